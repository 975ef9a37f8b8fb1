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

use super::Row;
use crate::fmt::{si, size};
use crate::plot::{self, Axis, Bars, Figure, Lines, Panel, Scale, Series};
use crate::report::sig3;

const W: u32 = 1500;
const PANEL_H: u32 = 380;
const COLS: usize = 4;

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let mut copy = copy_panels(rows);
    plot::share_y(&mut copy);
    Figure::new(
        Some("zcio-bench ring: Beltway rings vs Linux pipes and Vec per packet"),
        W,
    )
    .grid(PANEL_H, COLS, copy)
    .row(PANEL_H, 2, vec![fanout_panel(rows), layouts_panel(rows)])
    .write(path)
}

/// Part (a): per ring size, a panel with a series per variant of (call
/// size, GB/s).
fn copy_panels(rows: &[Row]) -> Vec<Panel> {
    let mut by_ring: BTreeMap<u64, Vec<(&str, f64, f64)>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.part == "a") {
        if let (Some(ring), Some(call)) = (r.ring_size, r.call_size) {
            by_ring.entry(ring).or_default().push((
                r.variant.as_str(),
                call as f64,
                r.gb_per_sec.max(1e-4),
            ));
        }
    }
    by_ring
        .into_iter()
        .map(|(ring, points)| {
            let mut series = plot::series(points);
            plot::order(
                &mut series,
                &["pipe", "ring-copy", "ring-peek", "ring-peek-touch"],
            );
            Lines::new(
                format!("(a) ring / pipe buffer {}", size(ring as usize)),
                // Every other octave: the call sizes of the sweep.
                Axis::new("call size", Scale::Log2, |v| size(v as usize)).labels(8),
                Axis::new("GB/s", Scale::Log10, sig3),
                series,
            )
            .into()
        })
        .collect()
}

/// Part (b): CPU per GiB against consumers, producer and total, per
/// variant.
fn fanout_panel(rows: &[Row]) -> Panel {
    let mut series = Vec::new();
    for v in ["ring-peek", "pipe-tee"] {
        let pts = |f: fn(&Row) -> f64| -> Vec<(f64, f64)> {
            rows.iter()
                .filter(|r| r.part == "b" && r.variant == v)
                .map(|r| (r.consumers as f64, f(r).max(1e-5)))
                .collect()
        };
        series.push(Series {
            name: format!("{v} producer"),
            points: pts(|r| r.producer_cpu_s_per_gib),
        });
        series.push(Series {
            name: format!("{v} total"),
            points: pts(|r| r.cpu_s_per_gib),
        });
    }
    Lines::new(
        "(b) fan-out: CPU per GiB (producer: produced; total: delivered)",
        Axis::new("consumers", Scale::Log2, |v| format!("{v}")).labels(8),
        Axis::new("CPU seconds per GiB", Scale::Log10, sig3),
        series,
    )
    .into()
}

/// Part (c): packets per second per layout (bars).
fn layouts_panel(rows: &[Row]) -> Panel {
    let bars = rows
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
    Bars::new(
        "(c) layouts, IMIX packets: packets per second",
        "packets per second",
        si,
        bars,
    )
    .into()
}
