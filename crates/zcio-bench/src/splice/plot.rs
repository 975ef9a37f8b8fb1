//! The SVG of a splice benchmark run: bar panels for (a) copier CPU and
//! throughput, (b) the neighbour's share and (c) total CPU, and line panels
//! for (d) latency and the highest loss-free rate against packet size.

use std::path::Path;

use super::Row;
use crate::fmt::size;
use crate::plot::{self, Axis, Bars, Figure, Legend, Lines, Panel, Scale, YRange};
use crate::report::sig3;

/// Bars of the measured rows of `part`, labelled by variant (and file
/// system where it is not the work directory's).
fn bars(
    title: &str,
    y_desc: &'static str,
    rows: &[Row],
    part: &str,
    y: impl Fn(&Row) -> Option<f64>,
) -> Panel {
    let bars = rows
        .iter()
        .filter(|r| r.part == part && r.skipped.is_none())
        .filter_map(|r| {
            let name = match &r.fs {
                Some(fs) if fs != "work-dir" => format!("{} ({fs})", r.variant),
                _ => r.variant.clone(),
            };
            Some((name, y(r)?))
        })
        .collect();
    Bars::new(title, y_desc, sig3, bars).into()
}

/// Lines of part (d)'s `metric` against the UDP payload size, one per
/// (variant, link).
fn lines(
    title: &str,
    y_desc: &'static str,
    rows: &[Row],
    metric: &str,
    y: impl Fn(&Row) -> Option<f64>,
) -> Panel {
    let series = plot::series(
        rows.iter()
            .filter(|r| r.part == "d" && r.metric.as_deref() == Some(metric))
            .filter_map(|r| {
                let name = format!("{} ({})", r.variant, r.link.as_deref().unwrap_or("-"));
                Some((name, r.size? as f64, y(r)?))
            }),
    );
    Lines::new(
        title,
        Axis::new("UDP payload", Scale::Log2, |v| size(v as usize)),
        Axis::new(y_desc, Scale::Linear, sig3),
        series,
    )
    .y_range(YRange::FromZero)
    .legend(Legend::UpperRight)
    .into()
}

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    Figure::new(
        Some("zcio-bench splice: copy, CPU availability, module chain, UDP forwarding"),
        1200,
    )
    .grid(
        400,
        2,
        vec![
            bars("(a) copier CPU time", "CPU s", rows, "a", |r| r.cpu_s),
            bars("(a) copy throughput", "GB/s", rows, "a", |r| r.gb_per_sec),
            bars(
                "(b) neighbour's rate beside each copier",
                "% of its rate alone",
                rows,
                "b",
                |r| r.neighbour_pct,
            ),
            bars(
                "(c) crc32c + zstd: CPU of all processes",
                "CPU s",
                rows,
                "c",
                |r| r.cpu_s,
            ),
            lines(
                "(d) one-way latency (median)",
                "µs",
                rows,
                "latency",
                |r| r.latency_us,
            ),
            lines(
                "(d) highest loss-free rate",
                "packets/s",
                rows,
                "rate",
                |r| r.pkts_per_sec,
            ),
        ],
    )
    .write(path)
}
