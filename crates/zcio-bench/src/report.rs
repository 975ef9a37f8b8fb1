//! Output of benchmark results: a readable table, JSON, and an SVG plot.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use crate::fmt::{si, size};
use crate::transfer::{Row, Target};

/// The transfer table, grouped by size, with the ratio to the pipe.
pub fn transfer_table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<26} {:>8} {:>12} {:>9} {:>11} {:>10} {:>12} {:>8}\n",
        "variant", "size", "msgs/s", "GB/s", "ns/msg", "ns/page", "incr ns/pg", "vs pipe"
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
                "{:<26} {:>8} {:>12} {:>9.2} {:>11.0} {:>10.1} {:>12} {:>8}\n",
                r.variant,
                size(s),
                si(r.msgs_per_sec),
                r.gb_per_sec,
                r.ns_per_msg,
                r.ns_per_page,
                inc,
                vs
            ));
        }
        out.push('\n');
    }
    out
}

/// The target check lines.
pub fn targets_table(targets: &[Target]) -> String {
    let mut out = String::from("Targets (issue #2):\n");
    for t in targets {
        let verdict = match t.met {
            Some(true) => "MET   ",
            Some(false) => "MISSED",
            None => "n/a   ",
        };
        out.push_str(&format!("  [{verdict}] {} — {}\n", t.name, t.measured));
    }
    out
}

/// JSON document with rows, targets and the machine description.
pub fn transfer_json(rows: &[Row], targets: &[Target], machine: &str) -> String {
    let doc = serde_json::json!({
        "benchmark": "transfer",
        "machine": machine,
        "rows": rows,
        "targets": targets,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// A one-line description of this machine.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    let cpus = crate::affinity::allowed_cpus();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<u64>()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0);
    format!(
        "{cpu}, {} CPUs, {:.0} GiB RAM, Linux {kernel}",
        cpus.len(),
        mem as f64 / (1024.0 * 1024.0)
    )
}

/// Plot msgs/s against size, one line per variant (log-log).
pub fn transfer_svg(rows: &[Row], path: &Path, title: &str) -> Result<(), String> {
    let mut series: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows {
        series
            .entry(&r.variant)
            .or_default()
            .push(((r.size as f64).log2(), r.msgs_per_sec.max(1.0).log10()));
    }
    if series.is_empty() {
        return Err("no rows to plot".into());
    }
    let (xmin, xmax) = rows.iter().fold((f64::MAX, f64::MIN), |(a, b), r| {
        let x = (r.size as f64).log2();
        (a.min(x), b.max(x))
    });
    let (ymin, ymax) = rows.iter().fold((f64::MAX, f64::MIN), |(a, b), r| {
        let y = r.msgs_per_sec.max(1.0).log10();
        (a.min(y), b.max(y))
    });
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((xmin - 0.3)..(xmax + 0.3), (ymin.floor())..(ymax.ceil()))
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("message size")
        .y_desc("messages per second")
        .x_label_formatter(&|x| size(2f64.powf(*x).round() as usize))
        .y_label_formatter(&|y| si(10f64.powf(*y)))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (name, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(name.to_string())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
            .map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .position(SeriesLabelPosition::LowerLeft)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}
