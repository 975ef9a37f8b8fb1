//! The performance targets of the ring benchmark issue, checked on the rows
//! of one run.

use super::Row;
use crate::driver::Target;
use crate::fmt::size;

/// The fastest row of `variant` in part `part`.
pub fn best<'a>(rows: &'a [Row], part: &str, variant: &str) -> Option<&'a Row> {
    rows.iter()
        .filter(|r| r.part == part && r.variant == variant)
        .max_by(|a, b| a.gb_per_sec.total_cmp(&b.gb_per_sec))
}

/// "1.23 GB/s (ring 1 MiB, call 64 KiB)" for a part (a) row.
pub fn describe(r: &Row) -> String {
    let mut at = Vec::new();
    if let Some(p) = r.pipe_size {
        at.push(format!("pipe buffer {}", size(p as usize)));
    } else if let Some(s) = r.ring_size {
        at.push(format!("ring {}", size(s as usize)));
    }
    if let Some(c) = r.call_size {
        at.push(format!("call {}", size(c as usize)));
    }
    format!("{:.2} GB/s ({})", r.gb_per_sec, at.join(", "))
}

fn fanout<'a>(rows: &'a [Row], variant: &str, n: u32) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.part == "b" && r.variant == variant && r.consumers == n)
}

fn vs_pipe(rows: &[Row], variant: &str, factor: f64, label: &str) -> Target {
    let pair = best(rows, "a", variant).zip(best(rows, "a", "pipe"));
    Target {
        name: format!("{label} ≥ {factor}× Linux pipe throughput (best sizes of each)"),
        measured: pair.map_or("not run".into(), |(r, p)| {
            format!(
                "{:.1}×: {variant} {} vs pipe {}",
                r.gb_per_sec / p.gb_per_sec,
                describe(r),
                describe(p)
            )
        }),
        met: pair.map(|(r, p)| r.gb_per_sec >= factor * p.gb_per_sec),
    }
}

/// Check the targets against `rows`.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut t = vec![
        vs_pipe(rows, "ring-copy", 2.0, "ring read/write (copy semantics)"),
        vs_pipe(rows, "ring-peek", 10.0, "ring peek"),
    ];
    let p = fanout(rows, "ring-peek", 8).zip(fanout(rows, "ring-peek", 1));
    t.push(Target {
        name: "producer CPU per GiB with 8 peek consumers within 1.2× of 1 consumer".into(),
        measured: p.map_or("not run".into(), |(n8, n1)| {
            format!(
                "{:.2}×: {:.4} vs {:.4} CPU s/GiB",
                n8.producer_cpu_s_per_gib / n1.producer_cpu_s_per_gib,
                n8.producer_cpu_s_per_gib,
                n1.producer_cpu_s_per_gib
            )
        }),
        met: p.map(|(n8, n1)| n8.producer_cpu_s_per_gib <= 1.2 * n1.producer_cpu_s_per_gib),
    });
    let tot = fanout(rows, "ring-peek", 8).zip(fanout(rows, "pipe-tee", 8));
    t.push(Target {
        name: "total CPU per GiB delivered to 8 consumers ≤ 1/4 of tee to 8 pipes".into(),
        measured: tot.map_or("not run".into(), |(z, p)| {
            format!(
                "1/{:.1}: {:.4} vs {:.4} CPU s/GiB",
                p.cpu_s_per_gib / z.cpu_s_per_gib.max(1e-12),
                z.cpu_s_per_gib,
                p.cpu_s_per_gib
            )
        }),
        met: tot.map(|(z, p)| z.cpu_s_per_gib <= p.cpu_s_per_gib / 4.0),
    });
    t
}
