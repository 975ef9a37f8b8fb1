//! The SVG of a ring benchmark run: one file, several panels.
//!
//! * Top: part (a), one panel per ring size (up to four per row): GB/s
//!   (log) against call size (log), one line per variant; all panels share
//!   the y range.
//! * Bottom left: part (b), CPU seconds per GiB (log) against consumers:
//!   producer and total, for ring-peek and pipe-tee.
//! * Bottom right: part (c), packets per second per variant (bars).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::Row;
use crate::fmt::{si, size};
use crate::report::{extent, line_panel, log2_tick, sig3, Axes, Series};

const W: u32 = 1500;
const PANEL_H: u32 = 380;
const COLS: usize = 4;

fn io<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let a = copy_series(rows);
    let has_b = rows.iter().any(|r| r.part == "b");
    let has_c = rows.iter().any(|r| r.part == "c");
    if a.is_empty() && !has_b && !has_c {
        return Err("no rows to plot".into());
    }
    let cols = a.len().clamp(1, COLS);
    let a_rows = a.len().div_ceil(cols) as u32;
    let bottom = u32::from(has_b || has_c);
    let h = 50 + PANEL_H * (a_rows + bottom);
    let root = SVGBackend::new(path, (W, h)).into_drawing_area();
    root.fill(&WHITE).map_err(io)?;
    let root = root
        .titled(
            "zcio-bench ring: Beltway rings vs Linux pipes and Vec per packet",
            ("sans-serif", 28),
        )
        .map_err(io)?;
    let (top, low) = root.split_vertically(PANEL_H * a_rows);
    if !a.is_empty() {
        let all: Vec<Series> = a.values().flatten().cloned().collect();
        let (lo, hi) = extent(&all, |p| p.1).unwrap_or((-2.0, 1.0));
        let y_range = Some((lo.floor(), hi.ceil().max(lo.floor() + 1.0)));
        let cells = top.split_evenly((a_rows as usize, cols));
        for ((ring, series), cell) in a.iter().zip(cells.iter()) {
            let axes = Axes {
                x_desc: "call size",
                y_desc: "GB/s",
                x_fmt: &|x| log2_tick(*x, |v| size(v as usize)),
                y_fmt: &|y| sig3(10f64.powf(*y)),
                y_range,
                legend: SeriesLabelPosition::UpperLeft,
                // Every other octave: the call sizes of the sweep.
                x_labels: 8,
            };
            let title = format!("(a) ring / pipe buffer {}", size(*ring as usize));
            line_panel(cell, &title, &axes, series)?;
        }
    }
    if bottom == 1 {
        let halves = low.split_evenly((1, 2));
        if has_b {
            fanout_panel(rows, &halves[0])?;
        }
        if has_c {
            layouts_panel(rows, &halves[1])?;
        }
    }
    root.present().map_err(io)
}

/// Points of one variant.
type Points<'a> = BTreeMap<&'a str, Vec<(f64, f64)>>;

/// Part (a): per ring size, a series per variant of (log2 call, log10 GB/s).
fn copy_series(rows: &[Row]) -> BTreeMap<u64, Vec<Series>> {
    let mut by_ring: BTreeMap<u64, Points<'_>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.part == "a") {
        let (Some(ring), Some(call)) = (r.ring_size, r.call_size) else {
            continue;
        };
        by_ring
            .entry(ring)
            .or_default()
            .entry(&r.variant)
            .or_default()
            .push(((call as f64).log2(), r.gb_per_sec.max(1e-4).log10()));
    }
    let order = ["pipe", "ring-copy", "ring-peek", "ring-peek-touch"];
    by_ring
        .into_iter()
        .map(|(ring, vs)| {
            let mut series: Vec<Series> = vs
                .into_iter()
                .map(|(name, points)| Series {
                    name: name.to_string(),
                    points,
                })
                .collect();
            series.sort_by_key(|s| order.iter().position(|o| *o == s.name));
            (ring, series)
        })
        .collect()
}

fn fanout_panel<DB: DrawingBackend>(
    rows: &[Row],
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let mut series = Vec::new();
    for v in ["ring-peek", "pipe-tee"] {
        let pts = |f: &dyn Fn(&Row) -> f64| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| r.part == "b" && r.variant == v)
                .map(|r| ((r.consumers as f64).log2(), f(r).max(1e-5).log10()))
                .collect()
        };
        series.push(Series {
            name: format!("{v} producer"),
            points: pts(&|r| r.producer_cpu_s_per_gib),
        });
        series.push(Series {
            name: format!("{v} total"),
            points: pts(&|r| r.cpu_s_per_gib),
        });
    }
    series.retain(|s| !s.points.is_empty());
    let axes = Axes {
        x_desc: "consumers",
        y_desc: "CPU seconds per GiB",
        x_fmt: &|x| log2_tick(*x, |v| format!("{v}")),
        y_fmt: &|y| sig3(10f64.powf(*y)),
        y_range: None,
        legend: SeriesLabelPosition::UpperLeft,
        x_labels: 8,
    };
    line_panel(
        area,
        "(b) fan-out: CPU per GiB (producer: produced; total: delivered)",
        &axes,
        &series,
    )
}

fn layouts_panel<DB: DrawingBackend>(
    rows: &[Row],
    area: &DrawingArea<DB, Shift>,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let bars: Vec<(String, f64)> = rows
        .iter()
        .filter(|r| r.part == "c")
        .map(|r| {
            let name = if r.in_process {
                format!("{} (in-process)", r.variant)
            } else {
                r.variant.clone()
            };
            (name, r.mpkt_per_sec.unwrap_or(0.0) * 1e6)
        })
        .collect();
    let n = bars.len();
    let top = bars.iter().map(|b| b.1).fold(1.0, f64::max) * 1.15;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let label = move |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < names.len() {
            names[i as usize].clone()
        } else {
            String::new()
        }
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            "(c) layouts, IMIX packets: packets per second",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top)
        .map_err(io)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(1) * 4)
        .x_label_formatter(&label)
        .y_label_formatter(&|y| si(*y))
        .y_desc("packets per second")
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
                si(*v),
                (x - 0.2, *v + top * 0.06),
                ("sans-serif", 14),
            )))
            .map_err(io)?;
    }
    Ok(())
}
