//! The cost model's side of the report: which model the run uses
//! (`--model`, [`prepare`]), the "model µs" column (the paper's Table 9)
//! and the per-operation table (Tables 6–8).
//!
//! All of them come from the cost model the library itself decides with,
//! `zcio::semantics::cost::CostModel::current()`: a process-wide model,
//! loaded once, from the file `$ZCIO_CALIBRATION` names (else the default
//! calibration file, else the built-in defaults). [`prepare`] runs before
//! anything reads it: for `--model fresh` it calibrates this machine, for
//! `--model builtin` it takes the built-in defaults, saves the model next
//! to the JSON document and points `ZCIO_CALIBRATION` at that file, so
//! this process and every receiver child (which inherits the environment)
//! decide with the same model; `--model current` leaves the library alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use zcio::semantics::calibrate::{self, Opts};
use zcio::semantics::cost::{CostModel, Linear, Op, Source, Thresholds};
use zcio::semantics::Semantics;

use super::Line;

/// The environment variable the library reads the calibration file's
/// path from (the receiver children inherit it).
pub const ENV: &str = "ZCIO_CALIBRATION";

/// Which cost model a run decides and predicts with (`--model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// Calibrate this machine at the start of the run (`zcio calibrate`'s
    /// measurements; its quick ones under `--quick`).
    #[default]
    Fresh,
    /// Whatever the library loads by itself: the calibration file, else
    /// the built-in defaults.
    Current,
    /// The built-in defaults (measured on the project's machine).
    Builtin,
}

impl Choice {
    /// Every choice, in the order `--help` lists them.
    pub const ALL: [Choice; 3] = [Choice::Fresh, Choice::Current, Choice::Builtin];

    /// The name `--model` takes.
    pub fn name(self) -> &'static str {
        match self {
            Choice::Fresh => "fresh",
            Choice::Current => "current",
            Choice::Builtin => "builtin",
        }
    }

    /// Parse `--model`'s value.
    pub fn parse(s: &str) -> Result<Choice, String> {
        let t = s.trim().to_ascii_lowercase();
        Choice::ALL
            .into_iter()
            .find(|c| c.name() == t)
            .ok_or_else(|| {
                format!(
                    "--model '{s}': unknown cost model; use fresh (the default), current or \
                     builtin"
                )
            })
    }
}

/// The model a run used and where it came from (the JSON document's
/// `model`, and the notes).
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    /// `--model`.
    pub choice: &'static str,
    /// `calibrated` (at the start of this run), `builtin`, or `file` (a
    /// calibration file that was there before the run).
    pub source: &'static str,
    /// The calibration file both processes read (none: the library's
    /// built-in defaults, no file).
    pub path: Option<PathBuf>,
    /// Whether the model comes from a quick calibration.
    pub quick: bool,
    /// When the model was measured (Unix seconds; none for the built-in
    /// defaults).
    pub created_unix: Option<u64>,
    /// Seconds the calibration took (`calibrated` only).
    pub calibration_s: Option<f64>,
    /// What the calibration bounded or left out (`calibrated` only).
    pub calibration_notes: Vec<String>,
    /// A calibration file the library found but ignored, and why
    /// (`--model current` only).
    pub ignored: Option<String>,
    /// The thresholds both processes' endpoints apply.
    pub thresholds: Thresholds,
    /// All of the above in words (the first note).
    pub description: String,
}

/// Where a run whose JSON document goes to `json` saves its model:
/// beside it, `<name>-calibration.json` (`bench-out/semantics.json` →
/// `bench-out/semantics-calibration.json`), as an absolute path (the
/// receiver children read it through the environment).
pub fn calibration_file(json: &Path) -> Result<PathBuf, String> {
    let abs = std::path::absolute(json)
        .map_err(|e| format!("the JSON output {}: {e}", json.display()))?;
    let stem = abs
        .file_stem()
        .map_or("semantics".into(), |s| s.to_string_lossy());
    Ok(abs.with_file_name(format!("{stem}-calibration.json")))
}

/// Make `choice` the model of this process and of the receivers it will
/// spawn, before anything reads `CostModel::current()`; `quick` selects
/// the quick calibration; the model is saved beside `json` (see
/// [`calibration_file`]). One line on stderr says what was done.
pub fn prepare(choice: Choice, quick: bool, json: &Path) -> Result<ModelInfo, String> {
    let info = match choice {
        Choice::Current => describe(choice, CostModel::current(), None, Vec::new()),
        Choice::Fresh | Choice::Builtin => {
            let path = calibration_file(json)?;
            let (model, took, notes) = if choice == Choice::Fresh {
                calibrate(quick)?
            } else {
                (CostModel::builtin(), None, Vec::new())
            };
            install(&model, &path)?;
            let m = activate(&path)?;
            describe(choice, m, took, notes)
        }
    };
    eprintln!("cost model: {}", info.description);
    Ok(info)
}

/// Calibrate this machine (a progress bar on stderr): the model, how
/// long it took, and the calibration's notes.
fn calibrate(quick: bool) -> Result<(CostModel, Option<Duration>, Vec<String>), String> {
    use indicatif::{ProgressBar, ProgressStyle};
    let pb = ProgressBar::new(1).with_style(
        ProgressStyle::with_template("calibrating the cost model {bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let opts = Opts {
        quick,
        ..Opts::default()
    };
    let start = Instant::now();
    let cal = calibrate::measure_with_samples(&opts, &mut |p| {
        pb.set_length(p.total as u64);
        pb.set_position(p.done as u64);
        pb.set_message(format!("{} at {}", p.op, crate::fmt::size(p.bytes)));
    });
    pb.finish_and_clear();
    let cal = cal.map_err(|e| {
        format!(
            "calibrating the cost model (--model fresh) failed: {e}; --model current or \
             --model builtin run without calibrating"
        )
    })?;
    Ok((cal.model, Some(start.elapsed()), cal.notes))
}

/// Save `model` to `path` and read it back as the library will (format,
/// bounds, this machine's fingerprint): the model every process of the
/// run will load.
pub fn install(model: &CostModel, path: &Path) -> Result<CostModel, String> {
    model
        .save(path)
        .map_err(|e| format!("saving the cost model: {e}"))?;
    CostModel::load_from(path).map_err(|e| {
        format!(
            "the cost model saved to {} does not load back: {e}",
            path.display()
        )
    })
}

/// Point the library (and the children to come) at the calibration file
/// `path` and load it; an error if the process-wide model was loaded
/// before (then it would not be the one chosen).
fn activate(path: &Path) -> Result<&'static CostModel, String> {
    // No other thread runs yet (the benchmark has not begun; the
    // calibration joined the one it started), so nothing reads the
    // environment concurrently.
    std::env::set_var(ENV, path);
    let m = CostModel::current();
    match m.source() {
        Source::File(p) if p == path => Ok(m),
        other => Err(format!(
            "internal error: the library's cost model was loaded ({}) before --model could \
             choose it",
            other.kind()
        )),
    }
}

fn bytes(b: usize) -> String {
    if b == usize::MAX {
        "never".into()
    } else {
        crate::fmt::size(b)
    }
}

fn age(created_unix: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let s = now.saturating_sub(created_unix);
    match s {
        0..120 => format!("{s} s ago"),
        120..7200 => format!("{} min ago", s / 60),
        7200..172_800 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

/// What `choice` gave: the model `m` (the one `CostModel::current()`
/// returns), the calibration's duration and notes if one ran.
pub fn describe(
    choice: Choice,
    m: &CostModel,
    took: Option<Duration>,
    calibration_notes: Vec<String>,
) -> ModelInfo {
    let kind = if m.is_quick() { "quick" } else { "full" };
    let (source, path, ignored, description) = match (choice, m.source()) {
        (Choice::Fresh, Source::File(p)) => (
            "calibrated",
            Some(p.clone()),
            None,
            format!(
                "calibrated at the start of this run ({kind}{}), saved to {}, which both \
                 processes read through {ENV}",
                took.map_or(String::new(), |t| format!(", {:.1} s", t.as_secs_f64())),
                p.display()
            ),
        ),
        (Choice::Builtin, Source::File(p)) => (
            "builtin",
            Some(p.clone()),
            None,
            format!(
                "the built-in defaults (--model builtin; measured on the project's machine, \
                 not this one), saved to {}, which both processes read through {ENV}",
                p.display()
            ),
        ),
        (_, Source::File(p)) => (
            "file",
            Some(p.clone()),
            None,
            format!(
                "the calibration file {} (--model current; a {kind} calibration measured {})",
                p.display(),
                age(m.created_unix())
            ),
        ),
        (_, Source::Builtin { ignored: None }) => (
            "builtin",
            None,
            None,
            "the built-in defaults (--model current and no calibration file; measured on the \
             project's machine, not this one)"
                .to_string(),
        ),
        (
            _,
            Source::Builtin {
                ignored: Some((p, why)),
            },
        ) => (
            "builtin",
            Some(p.clone()),
            Some(why.clone()),
            format!(
                "the built-in defaults (--model current; the calibration file {} was ignored: \
                 {why})",
                p.display()
            ),
        ),
        (_, Source::Measured) => (
            "calibrated",
            None,
            None,
            format!("measured in this process ({kind}), not saved"),
        ),
    };
    let builtin = source == "builtin";
    ModelInfo {
        choice: choice.name(),
        source,
        path,
        quick: m.is_quick(),
        created_unix: (!builtin).then(|| m.created_unix()),
        calibration_s: took.map(|t| t.as_secs_f64()),
        calibration_notes,
        ignored,
        thresholds: m.thresholds(),
        description,
    }
}

impl ModelInfo {
    /// The thresholds as the notes state them.
    pub fn thresholds_text(&self) -> String {
        let t = &self.thresholds;
        format!(
            "emulated copy → copy below {}, emulated share below {}, aligned receivers swap \
             pages from {}",
            bytes(t.emulated_copy_min),
            bytes(t.emulated_share_min),
            bytes(t.swap_min)
        )
    }
}

/// One line of a fitted primitive operation: `cost_ns(B) =
/// a_ns_per_byte·B + b_ns` for sizes from `from_bytes` (up to the next
/// line's, if the operation has a knot).
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpCost {
    /// The operation's stable name (`copy_in`, `protect`, `swap`, …).
    pub op: String,
    /// The smallest size this line prices (0, or the knot).
    pub from_bytes: u64,
    /// Per-byte cost, ns.
    pub a_ns_per_byte: f64,
    /// Fixed cost, ns.
    pub b_ns: f64,
}

/// The model's prediction of one transfer's latency, in ns, for `line` at
/// `size` bytes with an aligned (or unaligned) receive buffer; `None` for
/// the baselines. The model is the one the library uses
/// (`CostModel::current()`, as [`prepare`] chose it).
pub fn model_for(line: Line, size: usize, aligned: bool) -> Option<f64> {
    let m = CostModel::current();
    match line {
        Line::Sem(s) => Some(m.predict(s, size, aligned)),
        // The receiver copies out: what an unaligned receiver pays.
        Line::Secured | Line::Mixed => Some(m.predict(Semantics::EmulatedCopy, size, false)),
        // Every page of the buffer takes a TCOW copy as well.
        Line::Rewrite => Some(
            m.predict(Semantics::EmulatedCopy, size, aligned)
                + if size >= m.thresholds_ref().emulated_copy_min {
                    m.cost(Op::TcowFault, size)
                } else {
                    0.0
                },
        ),
        Line::Pipe | Line::Socket | Line::Memcpy => None,
    }
}

/// The per-operation fits of the cost model in effect: one row per line
/// (two for an operation with a knot).
pub fn model_ops() -> Vec<OpCost> {
    let m = CostModel::current();
    let row = |op: Op, from_bytes, l: Linear| OpCost {
        op: op.name().to_string(),
        from_bytes,
        a_ns_per_byte: l.a_ns_per_byte,
        b_ns: l.b_ns,
    };
    Op::ALL
        .into_iter()
        .filter_map(|op| m.curve(op).map(|c| (op, c)))
        .flat_map(|(op, c)| {
            std::iter::once(row(op, 0, c.line))
                .chain(c.above.map(|a| row(op, a.from_bytes, a.line)))
        })
        .collect()
}
