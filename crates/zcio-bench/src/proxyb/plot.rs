//! The SVG of a proxy benchmark run: up to four panels — (b) latency and
//! throughput against intermediate processes, (c) time of 16 messages
//! against size, (d) checksum GB/s against message size.

use std::path::Path;

use super::Row;
use crate::fmt::size;
use crate::plot::{self, Axis, Figure, Lines, Scale, Series, YRange};
use crate::report::sig3;

/// Series per variant of the rows of `part`, (x, y) as `x` and `y` give.
fn series(
    rows: &[Row],
    part: &str,
    x: impl Fn(&Row) -> Option<f64>,
    y: impl Fn(&Row) -> Option<f64>,
) -> Vec<Series> {
    plot::series(
        rows.iter()
            .filter(|r| r.part == part)
            .filter_map(|r| Some((r.variant.as_str(), x(r)?, y(r)?))),
    )
}

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let k = |r: &Row| r.intermediates.map(f64::from);
    let bytes = |r: &Row| r.size.map(|s| s as f64);
    let hops = Axis::new("intermediate processes", Scale::Linear, |x| {
        format!("{x:.0}")
    });
    let sizes = Axis::new("message size", Scale::Log2, |v| size(v as usize));
    let panel = |title: &str, x: Axis, y_desc: &'static str, s: Vec<Series>| {
        Lines::new(title, x, Axis::new(y_desc, Scale::Linear, sig3), s)
            .y_range(YRange::FromZero)
            .into()
    };
    Figure::new(
        Some("zcio-bench proxy: forwarding chains, copy vs shared memory, checksum"),
        1200,
    )
    .grid(
        420,
        2,
        vec![
            panel(
                "(b) one-way latency vs intermediate processes",
                hops,
                "latency (µs)",
                series(rows, "b", k, |r| r.latency_ns.map(|v| v / 1e3)),
            ),
            panel(
                "(b) throughput, % of the direct path",
                hops,
                "% of direct",
                series(rows, "b", k, |r| r.ratio.map(|v| v * 100.0)),
            ),
            panel(
                "(c) 16 messages: copy vs shared memory",
                sizes,
                "time of 16 messages (µs)",
                series(rows, "c", bytes, |r| r.latency_ns.map(|v| v / 1e3)),
            ),
            panel(
                "(d) receiver-side checksum",
                sizes,
                "GB/s",
                series(rows, "d", bytes, |r| r.gb_per_s),
            ),
        ],
    )
    .write(path)
}
