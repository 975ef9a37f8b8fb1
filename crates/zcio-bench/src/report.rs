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
    targets_table_titled("Targets (issue #2):", targets)
}

/// The target check lines under `title`.
pub fn targets_table_titled(title: &str, targets: &[Target]) -> String {
    let mut out = format!("{title}\n");
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

/// One line of a chart: a name and its points in chart coordinates (apply
/// any log scale before, and undo it in the axis label formatters).
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// Axes of a [`line_panel`].
pub struct Axes<'a> {
    /// X axis description.
    pub x_desc: &'a str,
    /// Y axis description.
    pub y_desc: &'a str,
    /// X tick labels from chart coordinates.
    pub x_fmt: &'a dyn Fn(&f64) -> String,
    /// Y tick labels from chart coordinates.
    pub y_fmt: &'a dyn Fn(&f64) -> String,
    /// Fixed y range (e.g. shared by several panels); default: the data's,
    /// rounded out to whole units.
    pub y_range: Option<(f64, f64)>,
    /// Where the legend goes.
    pub legend: SeriesLabelPosition,
    /// How many x tick labels to aim for.
    pub x_labels: usize,
}

/// A tick label for a log2 axis: `f` of 2^x at whole exponents, else
/// nothing (keeps log axes free of fractional ticks).
pub fn log2_tick(x: f64, f: impl Fn(f64) -> String) -> String {
    if (x - x.round()).abs() < 1e-6 {
        f(2f64.powf(x.round()))
    } else {
        String::new()
    }
}

/// Three significant digits: `31.6`, `0.123`, `1234`.
pub fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}

/// The (min, max) of `f` over all points of `series`.
pub fn extent(series: &[Series], f: impl Fn(&(f64, f64)) -> f64) -> Option<(f64, f64)> {
    series
        .iter()
        .flat_map(|s| s.points.iter())
        .map(f)
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((f64::min(a, v), f64::max(b, v))),
        })
}

/// Draw `series` as lines with points, with a legend, into `area`.
pub fn line_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    axes: &Axes<'_>,
    series: &[Series],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (xmin, xmax) = extent(series, |p| p.0).ok_or("no points to plot")?;
    let (ymin, ymax) = match axes.y_range {
        Some(r) => r,
        None => {
            let (a, b) = extent(series, |p| p.1).ok_or("no points to plot")?;
            (
                a.floor(),
                if b.ceil() > a.floor() {
                    b.ceil()
                } else {
                    a.floor() + 1.0
                },
            )
        }
    };
    let pad = ((xmax - xmin) * 0.05).max(0.3);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((xmin - pad)..(xmax + pad), ymin..ymax)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(axes.x_labels)
        .x_desc(axes.x_desc)
        .y_desc(axes.y_desc)
        .x_label_formatter(axes.x_fmt)
        .y_label_formatter(axes.y_fmt)
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, s) in series.iter().enumerate() {
        let mut pts = s.points.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(s.name.clone())
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
        .position(axes.legend.clone())
        .draw()
        .map_err(|e| e.to_string())
}

/// Plot msgs/s against size, one line per variant (log-log).
pub fn transfer_svg(rows: &[Row], path: &Path, title: &str) -> Result<(), String> {
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
    line_panel(&root, title, &axes, &series)?;
    root.present().map_err(|e| e.to_string())
}
