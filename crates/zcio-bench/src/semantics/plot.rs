//! The SVG of a semantics run: throughput against size per line (log-log),
//! aligned and unaligned receive buffers, and the one-way latency.

use std::path::Path;

use super::{Line, Row};
use crate::fmt::size;
use crate::plot::{self, Axis, Figure, Lines, Panel, Scale, Series};
use crate::report::sig3;

/// Series per line of the rows `keep` selects, (size, `y`), in the order of
/// [`Line::all`].
fn series(rows: &[Row], keep: impl Fn(&Row) -> bool, y: impl Fn(&Row) -> f64) -> Vec<Series> {
    let mut s = plot::series(
        rows.iter()
            .filter(|r| keep(r))
            .map(|r| (r.semantics.as_str(), r.size as f64, y(r))),
    );
    let order: Vec<&str> = Line::all().iter().map(|l| l.name()).collect();
    plot::order(&mut s, &order);
    s
}

fn baseline(r: &Row) -> bool {
    r.line().is_some_and(|l| l.semantics().is_none())
}

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let panel = |title: &str, y_desc: &'static str, s: Vec<Series>| -> Panel {
        Lines::new(
            title,
            Axis::new("message size", Scale::Log2, |v| size(v as usize)).labels(14),
            Axis::new(y_desc, Scale::Log10, sig3),
            s,
        )
        .into()
    };
    Figure::new(
        Some("zcio-bench semantics: the eight buffering semantics between two processes"),
        1200,
    )
    .grid(
        560,
        1,
        vec![
            panel(
                "throughput, aligned receive buffers (log-log)",
                "GB/s",
                series(rows, |r| r.aligned, |r| r.gb_per_sec),
            ),
            panel(
                "throughput, unaligned receive buffers (offset 100)",
                "GB/s",
                series(
                    rows,
                    |r| !r.aligned || baseline(r) || r.line().is_some_and(|l| !l.app_allocated()),
                    |r| r.gb_per_sec,
                ),
            ),
            panel(
                "one-way latency, aligned (median, log-log)",
                "µs",
                series(rows, |r| r.aligned, |r| r.latency_us),
            ),
        ],
    )
    .write(path)
}
