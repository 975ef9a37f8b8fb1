//! Rows, the readable tables and the targets of `zcio-bench semantics`.

use serde::Serialize;

use super::model::{model_for, model_ops};
use super::Line;
use crate::driver::Target;
use crate::fmt::size as sz;
use crate::report::sig3;

/// How the sender's outputs travelled (counts over the whole measurement).
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutCounts {
    /// Copied into a pool buffer.
    pub copied: u64,
    /// Lent write-protected (TCOW).
    pub protected: u64,
    /// Lent hidden (emulated move).
    pub hidden: u64,
    /// Lent unprotected (share, weak move).
    pub lent: u64,
    /// A sealed single-use region (move).
    pub sealed: u64,
    /// Wanted to lend but copied (no spare pages, fragmented, …).
    pub fallbacks: u64,
    /// TCOW copies the sender's writes took (pages).
    pub tcow_copies: u64,
    /// Emulated-copy outputs copied because the buffer was rewritten
    /// during its previous lend (the cost model's rewrite tolerance).
    pub rewrite_copies: u64,
}

/// Spread of the repetitions of one point.
#[derive(Serialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct RunStats {
    /// Repetitions.
    pub n: usize,
    /// Lowest GB/s.
    pub gb_per_sec_min: f64,
    /// Highest GB/s.
    pub gb_per_sec_max: f64,
    /// Lowest median one-way latency, µs.
    pub latency_us_min: f64,
    /// Highest median one-way latency, µs.
    pub latency_us_max: f64,
}

/// One point: a line at one size and alignment (medians over the runs).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Row {
    /// The line ([`Line::name`]): a semantics, `secured`, `mixed`,
    /// `emulated-copy-rewrite` or a baseline.
    pub semantics: String,
    /// The sender's semantics (zcio lines).
    pub sender: Option<String>,
    /// The receiver's semantics (zcio lines).
    pub receiver: Option<String>,
    /// Whether the receiver trusted the sender (zcio lines).
    pub trusted: Option<bool>,
    /// Message size in bytes.
    pub size: usize,
    /// Receive buffer at the sender's page offset (0); else 100 bytes off.
    pub aligned: bool,
    /// Median one-way latency, µs: from the sender's clock before its
    /// output call to the receiver's once input returned and the stamps
    /// were checked, one message in flight; memcpy: one copy.
    pub latency_us: f64,
    /// 99th percentile of the one-way latency, µs.
    pub latency_p99_us: f64,
    /// Median round trip (the data message and an 8-byte answer by copy),
    /// µs; memcpy: two copies.
    #[serde(default)]
    pub round_trip_us: f64,
    /// Streamed throughput, GB/s (10^9 bytes per second).
    pub gb_per_sec: f64,
    /// Sender CPU (user + system) per streamed message, µs.
    pub cpu_tx_us: f64,
    /// Receiver CPU per streamed message, µs (none for memcpy).
    pub cpu_rx_us: Option<f64>,
    /// The cost model's predicted latency, µs (none for the baselines).
    pub model_us: Option<f64>,
    /// Streamed messages measured.
    pub msgs: u64,
    /// Round trips measured.
    pub round_trips: u64,
    /// How the outputs travelled (zcio lines).
    pub out: Option<OutCounts>,
    /// Pages swapped in per data message (zcio lines).
    pub in_swapped_pages_per_msg: Option<f64>,
    /// Bytes copied by input per data message (zcio lines).
    pub in_copied_bytes_per_msg: Option<f64>,
    /// Spread of the runs.
    pub runs: RunStats,
}

impl Row {
    /// The line.
    pub fn line(&self) -> Option<Line> {
        Line::parse(&self.semantics).ok()
    }

    /// `out` in a word: the dominant delivery.
    fn out_word(&self) -> String {
        let Some(o) = self.out else {
            return "-".into();
        };
        let all = [
            ("copied", o.copied),
            ("protected", o.protected),
            ("hidden", o.hidden),
            ("lent", o.lent),
            ("sealed", o.sealed),
        ];
        let total: u64 = all.iter().map(|a| a.1).sum();
        let mut used: Vec<&str> = all
            .iter()
            .filter(|a| a.1 * 20 > total)
            .map(|a| a.0)
            .collect();
        if used.is_empty() {
            used.push("-");
        }
        let mut s = used.join("+");
        if o.fallbacks > 0 {
            s.push_str(&format!(" ({} fb)", o.fallbacks));
        }
        if o.rewrite_copies > 0 {
            s.push_str(&format!(" ({} rw)", o.rewrite_copies));
        }
        if o.tcow_copies > 0 {
            s.push_str(&format!(" tcow {}", o.tcow_copies));
        }
        s
    }

    fn in_word(&self) -> String {
        match (self.in_swapped_pages_per_msg, self.in_copied_bytes_per_msg) {
            (Some(p), Some(b)) if p >= 0.5 && b >= 1.0 => {
                format!("swap {p:.0} pg + copy {}", sz(b.round() as usize))
            }
            (Some(p), _) if p >= 0.5 => format!("swap {p:.0} pg"),
            (_, Some(b)) => format!("copy {}", sz(b.round() as usize)),
            _ => "-".into(),
        }
    }
}

/// The row of `line` at `size` and `aligned`.
pub fn find(rows: &[Row], line: Line, size: usize, aligned: bool) -> Option<&Row> {
    rows.iter()
        .find(|r| r.semantics == line.name() && r.size == size && r.aligned == aligned)
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), sig3)
}

/// The readable tables: one block per size, then GB/s over all sizes,
/// then the per-operation costs of the model.
pub fn tables(rows: &[Row]) -> String {
    let mut out = String::new();
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    out.push_str(
        "Semantics end to end (sender = this process, receiver = a child; medians of the runs)\n",
    );
    for &s in &sizes {
        out.push_str(&format!("\n{} ({s} B)\n", short(s)));
        out.push_str(&format!(
            "  {:<22} {:<9} {:>9} {:>9} {:>9} {:>9} {:>9}  {:<26} {}\n",
            "line", "buffers", "lat µs", "GB/s", "CPU tx", "CPU rx", "model µs", "out", "in"
        ));
        for r in rows.iter().filter(|r| r.size == s) {
            out.push_str(&format!(
                "  {:<22} {:<9} {:>9} {:>9} {:>9} {:>9} {:>9}  {:<26} {}\n",
                r.semantics,
                if r.line().is_some_and(Line::has_alignment) {
                    if r.aligned {
                        "aligned"
                    } else {
                        "unaligned"
                    }
                } else {
                    "-"
                },
                sig3(r.latency_us),
                sig3(r.gb_per_sec),
                sig3(r.cpu_tx_us),
                opt(r.cpu_rx_us),
                opt(r.model_us),
                r.out_word(),
                r.in_word(),
            ));
        }
    }
    out.push_str(
        "\n(CPU: µs per streamed message, user + system, of the sender / receiver process)\n",
    );
    out.push_str("\nThroughput GB/s by size (a = aligned, u = unaligned receive buffer)\n");
    out.push_str(&format!("  {:<26}", "line"));
    for &s in &sizes {
        out.push_str(&format!(" {:>8}", short(s)));
    }
    out.push('\n');
    let mut keys: Vec<(String, bool)> = Vec::new();
    for r in rows {
        let k = (r.semantics.clone(), r.aligned);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (name, aligned) in &keys {
        let has_al = Line::parse(name).is_ok_and(Line::has_alignment);
        let label = if has_al {
            format!("{name} ({})", if *aligned { "a" } else { "u" })
        } else {
            name.clone()
        };
        out.push_str(&format!("  {label:<26}"));
        for &s in &sizes {
            let v = rows
                .iter()
                .find(|r| &r.semantics == name && r.aligned == *aligned && r.size == s)
                .map(|r| sig3(r.gb_per_sec))
                .unwrap_or_else(|| "-".into());
            out.push_str(&format!(" {v:>8}"));
        }
        out.push('\n');
    }
    let ops = model_ops();
    out.push_str(
        "\nPer-operation costs (cost model, cost_ns(B) = a·B + b; from = the size a line starts at)\n",
    );
    if ops.is_empty() {
        out.push_str("  none: the cost model has no lines\n");
    } else {
        out.push_str(&format!(
            "  {:<16} {:>8} {:>12} {:>10}\n",
            "operation", "from", "a ns/B", "b ns"
        ));
        for o in ops {
            let from = usize::try_from(o.from_bytes).map_or_else(|_| "-".into(), short);
            out.push_str(&format!(
                "  {:<16} {:>8} {:>12} {:>10}\n",
                o.op,
                from,
                sig3(o.a_ns_per_byte),
                sig3(o.b_ns)
            ));
        }
    }
    out
}

/// A size in few characters: `64`, `6000`, `64K`, `1M+100`.
fn short(s: usize) -> String {
    const K: usize = 1 << 10;
    const M: usize = 1 << 20;
    if s >= M && s.is_multiple_of(M) {
        format!("{}M", s / M)
    } else if s > M && (s % M) < K {
        format!("{}M+{}", s / M, s % M)
    } else if s >= K && s.is_multiple_of(K) {
        format!("{}K", s / K)
    } else {
        s.to_string()
    }
}

/// Fill in the model column.
pub fn add_model(rows: &mut [Row]) {
    for r in rows {
        if let Some(l) = r.line() {
            r.model_us = model_for(l, r.size, r.aligned).map(|ns| ns / 1e3);
        }
    }
}

use zcio::semantics::Semantics::{Copy as C, EmulatedCopy as EC, EmulatedShare as ES};

/// A ratio check over sizes: for each size in `sizes` where both lines
/// were measured, `ok(a, b)`; the figures listed.
fn over_sizes(
    rows: &[Row],
    sizes: &[usize],
    a: (Line, bool),
    b: (Line, bool),
    ok: impl Fn(f64, f64) -> bool,
    fmt: impl Fn(usize, f64, f64) -> String,
) -> (Option<bool>, Vec<String>) {
    let mut met = None;
    let mut figs = Vec::new();
    for &s in sizes {
        if let (Some(x), Some(y)) = (find(rows, a.0, s, a.1), find(rows, b.0, s, b.1)) {
            let good = ok(x.gb_per_sec, y.gb_per_sec);
            met = Some(met.unwrap_or(true) && good);
            figs.push(format!(
                "{}{}",
                fmt(s, x.gb_per_sec, y.gb_per_sec),
                if good { "" } else { " ✗" }
            ));
        }
    }
    (met, figs)
}

/// The targets, checked on this run's rows (throughput).
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let at_least =
        |min: usize| -> Vec<usize> { sizes.iter().copied().filter(|&s| s >= min).collect() };
    let ratio = |s: usize, x: f64, y: f64| format!("{}: {:.2}×", short(s), x / y.max(1e-12));
    let mut t = Vec::new();
    let (met, figs) = over_sizes(
        rows,
        &at_least(1 << 20),
        (Line::Sem(EC), true),
        (Line::Sem(C), true),
        |x, y| x >= 3.0 * y,
        ratio,
    );
    t.push(target(
        "emulated copy ≥ 3× copy's throughput at ≥ 1 MiB (aligned)",
        met,
        figs,
    ));
    let (met, figs) = over_sizes(
        rows,
        &at_least(256 << 10),
        (Line::Sem(ES), true),
        (Line::Sem(EC), true),
        |x, y| x <= 1.3 * y,
        |s, x, y| format!("{}: es/ec {:.2}×", short(s), x / y.max(1e-12)),
    );
    t.push(target(
        "emulated copy within 1.3× of emulated share at ≥ 256 KiB (aligned)",
        met,
        figs,
    ));
    for aligned in [true, false] {
        let (met, figs) = over_sizes(
            rows,
            &sizes,
            (Line::Sem(EC), aligned),
            (Line::Sem(C), aligned),
            |x, y| x >= 0.95 * y,
            ratio,
        );
        t.push(target(
            &format!(
                "emulated copy never > 5% slower than copy, every size ({})",
                if aligned { "aligned" } else { "unaligned" }
            ),
            met,
            figs,
        ));
    }
    let (met, figs) = over_sizes(
        rows,
        &at_least(64 << 10),
        (Line::Secured, true),
        (Line::Pipe, true),
        |x, y| x > y,
        ratio,
    );
    t.push(target(
        "secured beats the pipe at every size ≥ 64 KiB",
        met,
        figs,
    ));
    let (met, figs) = over_sizes(
        rows,
        &[1 << 20],
        (Line::Secured, true),
        (Line::Pipe, true),
        |x, y| x >= 2.0 * y,
        ratio,
    );
    t.push(target("secured ≥ 2× the pipe at 1 MiB", met, figs));
    t.push(slope_target(rows));
    t
}

/// The model's per-byte slope against the measured one, per semantics:
/// least-squares lines through (size, one-way latency) and (size, model
/// latency) over the aligned sizes ≥ 64 KiB.
fn slope_target(rows: &[Row]) -> Target {
    use zcio::semantics::cost::Linear;
    let mut figs = Vec::new();
    let mut met = None;
    for sem in zcio::semantics::Semantics::ALL {
        let pts: Vec<&Row> = rows
            .iter()
            .filter(|r| r.line() == Some(Line::Sem(sem)) && r.aligned && r.size >= 64 << 10)
            .collect();
        let measured: Vec<(usize, f64)> =
            pts.iter().map(|r| (r.size, r.latency_us * 1e3)).collect();
        let model: Vec<(usize, f64)> = pts
            .iter()
            .filter_map(|r| r.model_us.map(|m| (r.size, m * 1e3)))
            .collect();
        if measured.len() < 2 || model.len() != measured.len() {
            continue;
        }
        let (a_meas, a_model) = (
            Linear::fit(&measured).a_ns_per_byte,
            Linear::fit(&model).a_ns_per_byte,
        );
        let err = (a_model - a_meas).abs() / a_meas.max(1e-12);
        met = Some(met.unwrap_or(true) && err <= 0.15);
        figs.push(format!(
            "{sem}: measured {:.3} ns/B, model {:.3} ({:+.0}%)",
            a_meas,
            a_model,
            (a_model / a_meas.max(1e-12) - 1.0) * 100.0
        ));
    }
    target(
        "the cost model predicts each semantics' per-byte slope within 15%",
        met,
        figs,
    )
}

fn target(name: &str, met: Option<bool>, figs: Vec<String>) -> Target {
    Target {
        name: name.into(),
        measured: if figs.is_empty() {
            "not measured in this run (sizes or lines missing)".into()
        } else {
            figs.join(", ")
        },
        met,
    }
}
