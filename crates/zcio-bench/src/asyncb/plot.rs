//! The SVG of an async benchmark run: up to four panels — (b) latency and
//! throughput against intermediate processes, (c) time of 16 messages
//! against size, (d) checksum GB/s against message size.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::Row;
use crate::fmt::size;
use crate::report::{line_panel, log2_tick, sig3, Axes, Series};

fn io<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn series(
    rows: &[Row],
    part: &str,
    x: impl Fn(&Row) -> Option<f64>,
    y: impl Fn(&Row) -> Option<f64>,
) -> Vec<Series> {
    let mut by: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.part == part) {
        if let (Some(x), Some(y)) = (x(r), y(r)) {
            by.entry(&r.variant).or_default().push((x, y));
        }
    }
    by.into_iter()
        .map(|(n, points)| Series {
            name: n.to_string(),
            points,
        })
        .collect()
}

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let k = |r: &Row| r.intermediates.map(f64::from);
    let log_size = |r: &Row| r.size.map(|s| (s as f64).log2());
    let panels: Vec<(&str, &str, &str, bool, Vec<Series>)> = vec![
        (
            "(b) one-way latency vs intermediate processes",
            "intermediate processes",
            "latency (µs)",
            false,
            series(rows, "b", k, |r| r.latency_ns.map(|v| v / 1e3)),
        ),
        (
            "(b) throughput, % of the direct path",
            "intermediate processes",
            "% of direct",
            false,
            series(rows, "b", k, |r| r.ratio.map(|v| v * 100.0)),
        ),
        (
            "(c) 16 messages: copy vs shared memory",
            "message size",
            "time of 16 messages (µs)",
            true,
            series(rows, "c", log_size, |r| r.latency_ns.map(|v| v / 1e3)),
        ),
        (
            "(d) receiver-side checksum",
            "message size",
            "GB/s",
            true,
            series(rows, "d", log_size, |r| r.gb_per_s),
        ),
    ];
    let panels: Vec<_> = panels.into_iter().filter(|p| !p.4.is_empty()).collect();
    if panels.is_empty() {
        return Err("no rows to plot".into());
    }
    let cols = panels.len().min(2);
    let nrows = panels.len().div_ceil(cols);
    let root = SVGBackend::new(path, (1200, 60 + 420 * nrows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let root = root
        .titled(
            "zcio-bench async: forwarding chains, copy vs shared memory, checksum",
            ("sans-serif", 26),
        )
        .map_err(io)?;
    let cells = root.split_evenly((nrows, cols));
    for ((title, xd, yd, log_x, s), cell) in panels.iter().zip(cells.iter()) {
        let ymax = s
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0f64, f64::max);
        let axes = Axes {
            x_desc: xd,
            y_desc: yd,
            x_fmt: if *log_x {
                &|x| log2_tick(*x, |v| size(v as usize))
            } else {
                &|x| format!("{x:.0}")
            },
            y_fmt: &|y| sig3(*y),
            y_range: Some((0.0, (ymax * 1.1).max(1e-3))),
            legend: SeriesLabelPosition::UpperLeft,
            x_labels: 10,
        };
        line_panel(cell, title, &axes, s)?;
    }
    root.present().map_err(io)
}
