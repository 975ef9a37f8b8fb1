//! The transfer benchmark's output: the table, the targets and the plot.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::{Row, Variant};
use crate::driver::Target;
use crate::fmt::{si, size};
use crate::report::{line_panel, Axes, Series};

/// CPU µs per message with three significant digits, `-` if not measured.
fn cpu(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else if v >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    })
}

/// The transfer table, grouped by size, with the ratio to the pipe and the
/// CPU time per message of each process.
pub fn text(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<26} {:>8} {:>10} {:>8} {:>10} {:>9} {:>10} {:>8} {:>26}\n",
        "", "", "", "", "", "", "", "", "CPU µs/msg of each process"
    ));
    out.push_str(&format!(
        "{:<26} {:>8} {:>10} {:>8} {:>10} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8}\n",
        "variant",
        "size",
        "msgs/s",
        "GB/s",
        "ns/msg",
        "ns/page",
        "incr ns/pg",
        "vs pipe",
        "orig",
        "fwd",
        "recv"
    ));
    let mut by_size: BTreeMap<usize, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        by_size.entry(r.size).or_default().push(r);
    }
    for (s, rs) in by_size {
        let pipe = rs
            .iter()
            .find(|r| r.variant == "pipe")
            .map(|r| r.msgs_per_sec);
        for r in rs {
            let vs = pipe.map_or("-".to_string(), |p| format!("{:.1}×", r.msgs_per_sec / p));
            let inc = r
                .incr_ns_per_page
                .map_or("-".to_string(), |v| format!("{v:.1}"));
            out.push_str(&format!(
                "{:<26} {:>8} {:>10} {:>8.2} {:>10.0} {:>9.1} {:>10} {:>8} {:>8} {:>8} {:>8}\n",
                r.variant,
                size(s),
                si(r.msgs_per_sec),
                r.gb_per_sec,
                r.ns_per_msg,
                r.ns_per_page,
                inc,
                vs,
                cpu(r.originator_cpu_us),
                cpu(r.forwarder_cpu_us),
                cpu(r.receiver_cpu_us),
            ));
        }
        out.push('\n');
    }
    out
}

fn find(rows: &[Row], v: Variant, size: usize) -> Option<&Row> {
    rows.iter()
        .find(|r| r.variant == v.name() && r.size == size)
}

/// The size at which `a`'s msgs/s relative to `b`'s is lowest, and that ratio.
fn worst_ratio(rows: &[Row], sizes: &[usize], a: Variant, b: Variant) -> Option<(usize, f64)> {
    sizes
        .iter()
        .filter_map(|&s| {
            Some((
                s,
                find(rows, a, s)?.msgs_per_sec / find(rows, b, s)?.msgs_per_sec,
            ))
        })
        .min_by(|x, y| x.1.total_cmp(&y.1))
}

/// The targets checked on `rows`.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut t = Vec::new();
    let sizes: Vec<usize> = {
        let mut s: Vec<usize> = rows.iter().map(|r| r.size).collect();
        s.sort();
        s.dedup();
        s
    };
    // 1. cached/volatile vs iceoryx2.
    let worst = worst_ratio(rows, &sizes, Variant::ZcioCachedVolatile, Variant::Iceoryx2);
    t.push(Target {
        name: "zcio cached/volatile ≥ iceoryx2 msgs/s at every size (5% noise)".into(),
        measured: worst.map_or("not run".into(), |(s, r)| {
            format!("lowest ratio {r:.2}× at {}", crate::fmt::size(s))
        }),
        met: worst.map(|(_, r)| r >= 0.95),
    });
    let at4k =
        find(rows, Variant::ZcioCachedVolatile, 4096).zip(find(rows, Variant::Iceoryx2, 4096));
    t.push(Target {
        name: "zcio cached/volatile ≥ 1.5× iceoryx2 at 4 KiB".into(),
        measured: at4k.map_or("not run".into(), |(z, i)| {
            format!("{:.2}×", z.msgs_per_sec / i.msgs_per_sec)
        }),
        met: at4k.map(|(z, i)| z.msgs_per_sec >= 1.5 * i.msgs_per_sec),
    });
    // 2. incremental per-page cost at 1 MiB.
    let inc = find(rows, Variant::ZcioCachedVolatile, 1 << 20)
        .and_then(|z| z.incr_ns_per_page)
        .zip(find(rows, Variant::Pipe, 1 << 20).and_then(|p| p.incr_ns_per_page));
    t.push(Target {
        name: "cached/volatile incremental ns/page ≤ 1/50 of pipe's at 1 MiB".into(),
        measured: inc.map_or("not run".into(), |(z, p)| {
            format!("{z:.1} vs {p:.1} ns/page = 1/{:.0}", p / z.max(1e-9))
        }),
        met: inc.map(|(z, p)| z <= p / 50.0),
    });
    // 3. three domains: throughput and the forwarder's CPU per message.
    for at in [1 << 20, 16 << 20] {
        let three =
            find(rows, Variant::Zcio3Dom, at).zip(find(rows, Variant::ZcioCachedVolatile, at));
        t.push(Target {
            name: format!(
                "3 domains ≥ 80% of 2 domains' msgs/s at {} (cached/volatile)",
                crate::fmt::size(at)
            ),
            measured: three.map_or("not run".into(), |(a, b)| {
                format!("{:.0}%", 100.0 * a.msgs_per_sec / b.msgs_per_sec)
            }),
            met: three.map(|(a, b)| a.msgs_per_sec >= 0.8 * b.msgs_per_sec),
        });
    }
    let cpu = find(rows, Variant::Zcio3Dom, 1 << 20)
        .and_then(|r| r.forwarder_cpu_us.zip(r.originator_cpu_us));
    t.push(Target {
        name: "forwarder CPU per message ≤ 1/4 of the originator's at 1 MiB (3 domains)".into(),
        measured: cpu.map_or("not run".into(), |(f, o)| {
            format!("{f:.2} vs {o:.2} µs/msg = {:.2}", f / o.max(1e-9))
        }),
        met: cpu.map(|(f, o)| f <= o / 4.0),
    });
    // 4. uncached/secured vs pipe at >= 1 MiB.
    let big: Vec<usize> = sizes.iter().copied().filter(|&s| s >= 1 << 20).collect();
    let worst = worst_ratio(rows, &big, Variant::ZcioUncachedSecured, Variant::Pipe);
    t.push(Target {
        name: "uncached/secured beats the pipe copy at ≥ 1 MiB".into(),
        measured: worst.map_or("not run".into(), |(s, r)| {
            format!("lowest ratio {r:.2}× at {}", crate::fmt::size(s))
        }),
        met: worst.map(|(_, r)| r > 1.0),
    });
    t
}

/// Plot msgs/s against size, one line per variant (log-log).
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let mut by_variant: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        by_variant
            .entry(&r.variant)
            .or_default()
            .push(((r.size as f64).log2(), r.msgs_per_sec.max(1.0).log10()));
    }
    if by_variant.is_empty() {
        return Err("no rows to plot".into());
    }
    let series: Vec<Series> = by_variant
        .into_iter()
        .map(|(name, points)| Series {
            name: name.to_string(),
            points,
        })
        .collect();
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let axes = Axes {
        x_desc: "message size",
        y_desc: "messages per second",
        x_fmt: &|x| size(2f64.powf(*x).round() as usize),
        y_fmt: &|y| si(10f64.powf(*y)),
        y_range: None,
        legend: SeriesLabelPosition::LowerLeft,
        x_labels: 10,
    };
    line_panel(
        &root,
        "zcio-bench transfer: messages/s by size",
        &axes,
        &series,
    )?;
    root.present().map_err(|e| e.to_string())
}
