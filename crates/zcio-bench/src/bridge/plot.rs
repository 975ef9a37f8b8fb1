//! The SVG of a bridge benchmark run: throughput and one-way latency
//! against message size (one line per variant), and the fan-out's bytes on
//! the link and CPU on host B (bars).

use std::path::Path;

use super::{Part, Row, Variant};
use crate::fmt::size;
use crate::plot::{self, Axis, Bars, Figure, Legend, Lines, Scale};
use crate::report::sig3;

/// Write the plot of `rows` to `path`.
pub fn svg(rows: &[Row], path: &Path) -> Result<(), String> {
    let names: Vec<&str> = Variant::ALL.iter().map(|v| v.name()).collect();
    let of = |p: Part| rows.iter().filter(move |r| r.part == p.name());
    let mut tp = plot::series(of(Part::Throughput).map(|r| {
        (
            r.variant.as_str(),
            r.size as f64,
            (r.bytes_per_sec / 1e6).max(1e-3),
        )
    }));
    plot::order(&mut tp, &names);
    let mut lat = plot::series(
        of(Part::Latency)
            .filter_map(|r| Some((r.variant.as_str(), r.size as f64, r.p50_us?.max(1e-3)))),
    );
    plot::order(&mut lat, &names);
    let label = |r: &Row| format!("{} {}", r.variant, size(r.size));
    let net = of(Part::Fanout)
        .filter_map(|r| Some((label(r), r.net_per_payload?)))
        .collect();
    let cpu = of(Part::Fanout)
        .map(|r| (label(r), r.cpu_b_us_per_msg))
        .collect();
    let n = of(Part::Fanout).next().map_or(4, |r| r.receivers);
    let link = rows.first().map_or("-", |r| r.link.as_str());
    let sizes = Axis::new("message size", Scale::Log2, |v| size(v as usize));
    Figure::new(
        Some(&format!(
            "zcio-bench bridge: zcio ring → Zenoh → ring vs plain Zenoh vs TCP, host A → host B \
             ({link})"
        )),
        1200,
    )
    .grid(
        440,
        2,
        vec![
            Lines::new(
                "throughput (one receiver)",
                sizes,
                Axis::new("MB/s", Scale::Log10, sig3),
                tp,
            )
            .legend(Legend::LowerRight)
            .into(),
            Lines::new(
                "one-way latency at a low rate (p50)",
                sizes,
                Axis::new("µs", Scale::Log10, sig3),
                lat,
            )
            .into(),
            Bars::new(
                format!("fan-out to {n} receivers: bytes into B ÷ payload"),
                "× payload",
                sig3,
                net,
            )
            .into(),
            Bars::new(
                format!("fan-out to {n} receivers: CPU of everything on B per message"),
                "µs per message",
                sig3,
                cpu,
            )
            .into(),
        ],
    )
    .write(path)
}
