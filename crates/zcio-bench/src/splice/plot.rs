//! The SVG of a splice benchmark run: bar panels for (a) copier CPU and
//! throughput, (b) the neighbour's share and (c) total CPU, and line panels
//! for (d) latency and the highest loss-free rate against packet size.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

use super::Row;
use crate::fmt::size;
use crate::report::{line_panel, log2_tick, sig3, Axes, Series};

fn io<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// A panel of labelled bars.
fn bar_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_desc: &str,
    bars: &[(String, f64)],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let n = bars.len().max(1);
    let ymax = bars.iter().map(|b| b.1).fold(0.0f64, f64::max).max(1e-6) * 1.15;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(60)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0..ymax)
        .map_err(io)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .y_label_formatter(&|y| sig3(*y))
        .draw()
        .map_err(io)?;
    for (i, (_, v)) in bars.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let x = i as f64;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x - 0.35, 0.0), (x + 0.35, *v)],
                color.filled(),
            )))
            .map_err(io)?;
        chart
            .draw_series(std::iter::once(Text::new(
                sig3(*v),
                (x - 0.15, *v + ymax * 0.02),
                ("sans-serif", 13),
            )))
            .map_err(io)?;
    }
    Ok(())
}

fn bars(rows: &[Row], part: &str, y: impl Fn(&Row) -> Option<f64>) -> Vec<(String, f64)> {
    rows.iter()
        .filter(|r| r.part == part && r.skipped.is_none())
        .filter_map(|r| {
            let name = match &r.fs {
                Some(fs) if fs != "work-dir" => format!("{} ({fs})", r.variant),
                _ => r.variant.clone(),
            };
            Some((name, y(r)?))
        })
        .collect()
}

fn series(rows: &[Row], metric: &str, y: impl Fn(&Row) -> Option<f64>) -> Vec<Series> {
    let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.part == "d" && r.metric.as_deref() == Some(metric))
    {
        if let (Some(s), Some(v)) = (r.size, y(r)) {
            by.entry(format!(
                "{} ({})",
                r.variant,
                r.link.as_deref().unwrap_or("-")
            ))
            .or_default()
            .push(((s as f64).log2(), v));
        }
    }
    by.into_iter()
        .map(|(name, points)| Series { name, points })
        .collect()
}

enum Panel {
    Bars(&'static str, &'static str, Vec<(String, f64)>),
    Lines(&'static str, &'static str, Vec<Series>),
}

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let panels = vec![
        Panel::Bars("(a) copier CPU time", "CPU s", bars(rows, "a", |r| r.cpu_s)),
        Panel::Bars(
            "(a) copy throughput",
            "GB/s",
            bars(rows, "a", |r| r.gb_per_sec),
        ),
        Panel::Bars(
            "(b) neighbour's rate beside each copier",
            "% of its rate alone",
            bars(rows, "b", |r| r.neighbour_pct),
        ),
        Panel::Bars(
            "(c) crc32c + zstd: CPU of all processes",
            "CPU s",
            bars(rows, "c", |r| r.cpu_s),
        ),
        Panel::Lines(
            "(d) one-way latency (median)",
            "µs",
            series(rows, "latency", |r| r.latency_us),
        ),
        Panel::Lines(
            "(d) highest loss-free rate",
            "packets/s",
            series(rows, "rate", |r| r.pkts_per_sec),
        ),
    ];
    let panels: Vec<Panel> = panels
        .into_iter()
        .filter(|p| match p {
            Panel::Bars(_, _, b) => !b.is_empty(),
            Panel::Lines(_, _, s) => !s.is_empty(),
        })
        .collect();
    if panels.is_empty() {
        return Err("no rows to plot".into());
    }
    let cols = panels.len().min(2);
    let nrows = panels.len().div_ceil(cols);
    let root = SVGBackend::new(path, (1200, 60 + 400 * nrows as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let root = root
        .titled(
            "zcio-bench splice: copy, CPU availability, module chain, UDP forwarding",
            ("sans-serif", 24),
        )
        .map_err(io)?;
    let cells = root.split_evenly((nrows, cols));
    for (p, cell) in panels.iter().zip(cells.iter()) {
        match p {
            Panel::Bars(title, yd, b) => bar_panel(cell, title, yd, b)?,
            Panel::Lines(title, yd, s) => {
                let ymax = s
                    .iter()
                    .flat_map(|s| s.points.iter().map(|p| p.1))
                    .fold(0.0f64, f64::max);
                let axes = Axes {
                    x_desc: "UDP payload",
                    y_desc: yd,
                    x_fmt: &|x| log2_tick(*x, |v| size(v as usize)),
                    y_fmt: &|y| sig3(*y),
                    y_range: Some((0.0, (ymax * 1.1).max(1e-3))),
                    legend: SeriesLabelPosition::UpperRight,
                    x_labels: 10,
                };
                line_panel(cell, title, &axes, s)?;
            }
        }
    }
    root.present().map_err(io)
}
