//! `zcio calibrate [--quick] [--output PATH] [--show] [--json]`: measure
//! the cost model's primitive operations on this machine, fit `a·B + b`
//! per operation, print the table and the thresholds it implies, and
//! write the calibration file the library loads. `--show` prints the model
//! in effect (and where it came from) without measuring.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use zcio::semantics::calibrate::{self, Calibration, Opts};
use zcio::semantics::cost::{CostModel, Op, Source, Thresholds};
use zcio::semantics::Semantics;
use zcio_fmt::size;

use crate::usage;

/// `writeln!` into a String (cannot fail).
macro_rules! wl {
    ($o:expr, $($t:tt)*) => {{ $o.push_str(&format!($($t)*)); $o.push('\n'); }};
}

/// `write!` into a String.
macro_rules! w {
    ($o:expr, $($t:tt)*) => { $o.push_str(&format!($($t)*)) };
}

/// Print `text` on stdout; a closed stdout is exit status 141 (as `pipe`).
fn emit(text: &str) -> Result<i32> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(0),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(141),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

/// Measure this machine's data-passing costs for the semantics layer.
#[derive(Args, Debug)]
#[command(
    after_help = "The file is where the library looks for it: $ZCIO_CALIBRATION, else\n\
    $XDG_CONFIG_HOME/zcio/calibration.json, else ~/.config/zcio/calibration.json.\n\
    Without one (or with one from another machine, kernel or format) the library\n\
    uses built-in costs measured on the project's machine.\n\n\
    Examples:\n  \
    zcio calibrate                        # measure (seconds; bounded to < 2 min), write the default file\n  \
    zcio calibrate --quick                # fewer sizes and repetitions (about a second)\n  \
    zcio calibrate --output cal.json      # write elsewhere (use with ZCIO_CALIBRATION=cal.json)\n  \
    zcio calibrate --show                 # the model in effect and where it came from\n  \
    zcio calibrate --show --json          # the same, machine-readable"
)]
pub struct CalibrateArgs {
    /// Fewer sizes (copies up to 4 MiB, page ops up to 1024 pages) and repetitions.
    #[arg(long, conflicts_with = "show")]
    pub quick: bool,
    /// Where to write the calibration file (default: where the library looks).
    #[arg(long, short, value_name = "PATH", conflicts_with = "show")]
    pub output: Option<PathBuf>,
    /// Print the model in effect (file or built-in) without measuring.
    #[arg(long)]
    pub show: bool,
    /// Print JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Run the command.
pub fn run(a: CalibrateArgs) -> Result<i32> {
    if a.show {
        let m = CostModel::load();
        let mut o = String::new();
        if a.json {
            wl!(o, "{}", serde_json::to_string_pretty(&model_json(&m))?);
        } else {
            print_source(&mut o, &m);
            print_model(&mut o, &m, None);
        }
        return emit(&o);
    }
    let path = match a.output.clone().or_else(CostModel::calibration_path) {
        Some(p) => p,
        None => {
            return Err(usage(
                "no place for the calibration file: neither $ZCIO_CALIBRATION, \
                 $XDG_CONFIG_HOME nor $HOME is set; pass --output PATH",
            ))
        }
    };
    let pb = (!a.quiet).then(|| {
        let pb = ProgressBar::new(1).with_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        pb.set_draw_target(ProgressDrawTarget::stderr());
        pb
    });
    let opts = Opts {
        quick: a.quick,
        tcow: None,
    };
    let cal = calibrate::measure_with_samples(&opts, &mut |p| {
        if let Some(pb) = &pb {
            pb.set_length(p.total as u64);
            pb.set_position(p.done as u64);
            pb.set_message(format!("{} at {}", p.op, size(p.bytes)));
        }
    })
    .context("calibration failed")?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    cal.model
        .save(&path)
        .context("the calibration was measured but not saved")?;
    let mut o = String::new();
    if a.json {
        let mut v = model_json(&cal.model);
        v["written"] = json!(path);
        v["notes"] = json!(cal.notes);
        v["samples"] = samples_json(&cal);
        wl!(o, "{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_model(&mut o, &cal.model, Some(&cal));
        for n in &cal.notes {
            wl!(o, "note: {n}");
        }
        wl!(o, "\nwrote {}", path.display());
        if CostModel::calibration_path().as_deref() != Some(path.as_path()) {
            wl!(
                o,
                "the library reads it with ZCIO_CALIBRATION={}",
                path.display()
            );
        } else {
            wl!(o, "the library uses it from the next process on");
        }
    }
    emit(&o)
}

fn print_source(o: &mut String, m: &CostModel) {
    match m.source() {
        Source::File(p) => wl!(
            o,
            "model: calibration file {}{}",
            p.display(),
            if m.is_quick() { " (quick run)" } else { "" }
        ),
        Source::Builtin { ignored: None } => {
            wl!(
                o,
                "model: built-in defaults (no calibration file; run `zcio calibrate`)"
            )
        }
        Source::Builtin {
            ignored: Some((p, why)),
        } => wl!(
            o,
            "model: built-in defaults ({} ignored: {why})",
            p.display()
        ),
        Source::Measured => wl!(o, "model: measured now"),
    }
    let fp = m.fingerprint();
    wl!(
        o,
        "machine: {}, {} CPUs, Linux {}, {} pages\n",
        if fp.cpu_model.is_empty() {
            "unknown CPU"
        } else {
            &fp.cpu_model
        },
        fp.logical_cpus,
        fp.kernel_release,
        size(fp.page_size as usize)
    );
}

fn print_model(o: &mut String, m: &CostModel, cal: Option<&Calibration>) {
    wl!(
        o,
        "{:<14} {:>12} {:>10} {:>8} {:>10} {:>8}",
        "op",
        "a ns/KiB",
        "b µs",
        "R²",
        "max resid",
        "samples"
    );
    for op in Op::ALL {
        match (m.curve(op), m.quality(op)) {
            (None, _) => wl!(o, "{:<14} {:>12}", op.name(), "not measured"),
            (Some(c), q) => {
                let l = c.line;
                let (r2, res, n) = match q {
                    Some(q) => (
                        format!("{:.4}", q.r2),
                        format!("{:.0}%", q.max_rel_residual * 100.0),
                        q.samples.to_string(),
                    ),
                    None => ("-".into(), "-".into(), "built-in".into()),
                };
                wl!(
                    o,
                    "{:<14} {:>12.3} {:>10.2} {:>8} {:>10} {:>8}",
                    op.name(),
                    l.a_ns_per_byte * 1024.0,
                    l.b_ns / 1000.0,
                    r2,
                    res,
                    n
                );
                if let Some(a) = c.above {
                    wl!(
                        o,
                        "{:<14} {:>12.3} {:>10.2}   (from {} on)",
                        "",
                        a.line.a_ns_per_byte * 1024.0,
                        a.line.b_ns / 1000.0,
                        size(usize::try_from(a.from_bytes).unwrap_or(usize::MAX))
                    );
                }
            }
        }
    }
    if let Some(cal) = cal {
        wl!(o, "\nmedians (µs) per size:");
        for s in &cal.samples {
            let pts: Vec<String> = s
                .points
                .iter()
                .map(|(b, ns)| format!("{}={:.2}", size(*b), ns / 1000.0))
                .collect();
            wl!(o, "  {:<14} {}", s.op.name(), pts.join(" "));
        }
    }
    let t = m.thresholds_ref();
    o.push('\n');
    print_thresholds(o, t, m.page_size());
    wl!(
        o,
        "\npredicted latency per transfer (page-aligned receiver):"
    );
    let sizes = [4usize << 10, 64 << 10, 1 << 20, 16 << 20];
    w!(o, "  {:<20}", "semantics");
    for s in sizes {
        w!(o, " {:>10}", size(s));
    }
    o.push('\n');
    for sem in Semantics::ALL {
        w!(o, "  {:<20}", sem.name());
        for s in sizes {
            w!(o, " {:>10}", zcio_fmt::ns(m.predict(sem, s, true)));
        }
        o.push('\n');
    }
}

fn never(v: usize) -> String {
    if v == usize::MAX {
        "never".into()
    } else {
        size(v)
    }
}

fn print_thresholds(o: &mut String, t: &Thresholds, page: usize) {
    wl!(o, "thresholds:");
    wl!(
        o,
        "  emulated copy → copy below      {}",
        never(t.emulated_copy_min)
    );
    wl!(
        o,
        "  emulated share → copy below     {}",
        never(t.emulated_share_min)
    );
    wl!(
        o,
        "  aligned receiver swaps pages    {}",
        if t.swap_min == usize::MAX {
            "never (copying out is cheaper)".to_owned()
        } else {
            format!("from {}", size(t.swap_min))
        }
    );
    if t.reverse_copyout >= page {
        wl!(o, "  partial last page               always copied out");
    } else {
        wl!(
            o,
            "  partial last page               copied out below {}, else completed and swapped",
            size(t.reverse_copyout)
        );
    }
    let tolerated: Vec<String> = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]
        .into_iter()
        .filter(|&b| b >= t.emulated_copy_min)
        .map(|b| format!("{:.0}% ({})", t.rewrite_tolerance(b) * 100.0, size(b)))
        .collect();
    wl!(
        o,
        "  buffers rewritten in flight     {}",
        if tolerated.is_empty() {
            "copied (emulated copy converts to copy at these sizes)".to_owned()
        } else {
            format!(
                "lent again while at most {} of their pages were, else copied",
                tolerated.join(", ")
            )
        }
    );
    wl!(o, "  secured delivery:");
    for (i, b) in t.secured.iter().enumerate() {
        let to = t
            .secured
            .get(i + 1)
            .map_or("…".to_owned(), |n| size(n.min_bytes));
        wl!(
            o,
            "    {:>9} – {:<9} {} (trusted peer: {})",
            size(b.min_bytes),
            to,
            b.untrusted.name(),
            b.trusted.name()
        );
    }
}

fn model_json(m: &CostModel) -> Value {
    let (path, ignored) = match m.source() {
        Source::File(p) => (Some(p.clone()), None),
        Source::Builtin {
            ignored: Some((p, why)),
        } => (Some(p.clone()), Some(why.clone())),
        _ => (None, None),
    };
    let ops: serde_json::Map<String, Value> = Op::ALL
        .into_iter()
        .map(|op| {
            let v = match m.curve(op) {
                None => Value::Null,
                Some(c) => {
                    let l = c.line;
                    let mut v = json!({"a_ns_per_byte": l.a_ns_per_byte, "b_ns": l.b_ns});
                    if let Some(a) = c.above {
                        v["above"] = json!({"from_bytes": a.from_bytes,
                            "a_ns_per_byte": a.line.a_ns_per_byte, "b_ns": a.line.b_ns});
                    }
                    if let Some(q) = m.quality(op) {
                        v["r2"] = json!(q.r2);
                        v["max_rel_residual"] = json!(q.max_rel_residual);
                        v["samples"] = json!(q.samples);
                    }
                    v
                }
            };
            (op.name().to_owned(), v)
        })
        .collect();
    let sizes = [64usize, 4 << 10, 64 << 10, 1 << 20, 16 << 20];
    let predictions: Vec<Value> = Semantics::ALL
        .into_iter()
        .flat_map(|sem| {
            sizes.into_iter().flat_map(move |s| {
                [true, false]
                    .into_iter()
                    .map(move |aligned| (sem, s, aligned))
            })
        })
        .map(|(sem, s, aligned)| {
            json!({"semantics": sem.name(), "size": s, "aligned": aligned,
                   "latency_us": m.predict(sem, s, aligned) / 1000.0})
        })
        .collect();
    json!({
        "source": m.source().kind(),
        "path": path,
        "ignored_because": ignored,
        "quick": m.is_quick(),
        "created_unix": m.created_unix(),
        "fingerprint": m.fingerprint(),
        "ops": ops,
        "thresholds": m.thresholds_ref(),
        "predictions": predictions,
    })
}

fn samples_json(cal: &Calibration) -> Value {
    let map: serde_json::Map<String, Value> = cal
        .samples
        .iter()
        .map(|s| {
            let pts: Vec<Value> = s
                .points
                .iter()
                .map(|(b, ns)| json!({"bytes": b, "ns": ns}))
                .collect();
            (s.op.name().to_owned(), Value::Array(pts))
        })
        .collect();
    Value::Object(map)
}
