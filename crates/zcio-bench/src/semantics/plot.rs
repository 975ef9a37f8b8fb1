//! The SVG of a semantics run: throughput against size per line (log-log),
//! aligned and unaligned receive buffers, and the one-way latency.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::{Line, Row};
use crate::fmt::size;
use crate::report::{line_panel, log2_tick, sig3, Axes, Series};

fn io<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Series per line of the rows `keep` selects, y = log10(`y`).
fn series(rows: &[Row], keep: impl Fn(&Row) -> bool, y: impl Fn(&Row) -> f64) -> Vec<Series> {
    let mut by: BTreeMap<(usize, String), Vec<(f64, f64)>> = BTreeMap::new();
    let order = Line::all();
    for r in rows.iter().filter(|r| keep(r)) {
        let v = y(r);
        if v > 0.0 && v.is_finite() {
            let i = order
                .iter()
                .position(|l| l.name() == r.semantics)
                .unwrap_or(usize::MAX);
            by.entry((i, r.semantics.clone()))
                .or_default()
                .push(((r.size as f64).log2(), v.log10()));
        }
    }
    by.into_iter()
        .map(|((_, name), points)| Series { name, points })
        .collect()
}

fn baseline(r: &Row) -> bool {
    r.line().is_some_and(|l| l.semantics().is_none())
}

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let panels = [
        (
            "throughput, aligned receive buffers (log-log)",
            "GB/s",
            series(rows, |r| r.aligned, |r| r.gb_per_sec),
        ),
        (
            "throughput, unaligned receive buffers (offset 100)",
            "GB/s",
            series(
                rows,
                |r| !r.aligned || baseline(r) || r.line().is_some_and(|l| !l.app_allocated()),
                |r| r.gb_per_sec,
            ),
        ),
        (
            "one-way latency, aligned (median, log-log)",
            "µs",
            series(rows, |r| r.aligned, |r| r.latency_us),
        ),
    ];
    let panels: Vec<_> = panels.into_iter().filter(|p| !p.2.is_empty()).collect();
    if panels.is_empty() {
        return Err("no rows to plot".into());
    }
    let root = SVGBackend::new(path, (1200, 60 + 560 * panels.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let root = root
        .titled(
            "zcio-bench semantics: the eight buffering semantics between two processes",
            ("sans-serif", 24),
        )
        .map_err(io)?;
    let cells = root.split_evenly((panels.len(), 1));
    for ((title, yd, s), cell) in panels.iter().zip(cells.iter()) {
        let (lo, hi) = crate::report::extent(s, |p| p.1).unwrap_or((0.0, 1.0));
        let axes = Axes {
            x_desc: "message size",
            y_desc: yd,
            x_fmt: &|x| log2_tick(*x, |v| size(v as usize)),
            y_fmt: &|y| sig3(10f64.powf(*y)),
            y_range: Some((lo.floor(), hi.ceil().max(lo.floor() + 1.0))),
            legend: SeriesLabelPosition::UpperLeft,
            x_labels: 14,
        };
        line_panel(cell, title, &axes, s)?;
    }
    root.present().map_err(io)
}
