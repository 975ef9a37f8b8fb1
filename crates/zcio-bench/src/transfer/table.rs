//! The transfer benchmark's output: the table, the targets and the plot.

use std::collections::BTreeMap;
use std::path::Path;

use super::pingpong::LatencyRow;
use super::{Entry, Row, Variant, NOISY};
use crate::driver::Target;
use crate::fmt::{si, size};
use crate::plot::{self, Axis, Figure, Legend, Lines, Scale};
use crate::report::sig3;

/// CPU µs per message with three significant digits, `-` if not measured.
fn cpu(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else if v >= 10.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    })
}

/// The transfer table, grouped by size, with the ratio to the pipe and the
/// CPU time per message of each process.
pub fn text(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<26} {:>8} {:>10} {:>8} {:>10} {:>9} {:>10} {:>8} {:>26}\n",
        "", "", "", "", "", "", "", "", "CPU µs/msg of each process"
    ));
    out.push_str(&format!(
        "{:<26} {:>8} {:>10} {:>8} {:>10} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8}  {}\n",
        "variant",
        "size",
        "msgs/s",
        "GB/s",
        "ns/msg",
        "ns/page",
        "incr ns/pg",
        "vs pipe",
        "orig",
        "fwd",
        "recv",
        "runs"
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
                "{:<26} {:>8} {:>10} {:>8.2} {:>10.0} {:>9.1} {:>10} {:>8} {:>8} {:>8} {:>8}  {}\n",
                r.variant,
                size(s),
                si(r.msgs_per_sec),
                r.gb_per_sec,
                r.ns_per_msg,
                r.ns_per_page,
                inc,
                vs,
                cpu(r.originator_cpu_us),
                cpu(r.forwarder_cpu_us),
                cpu(r.receiver_cpu_us),
                runs(r.spread, r.implausible),
            ));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "  runs: the slowest of a point's interleaved runs ÷ the fastest (the median is shown); \
         NOISY: more than {NOISY}× apart, IMPLAUSIBLE: the reader would touch its pages' cache \
         lines faster than memcpy moved bytes at that size in this run: neither decides a target\n\n"
    ));
    out
}

/// The "runs" column: the spread of a point's runs and what it means.
fn runs(spread: Option<f64>, implausible: bool) -> String {
    let mut t = spread.map_or("1 run".to_string(), |s| format!("{s:.2}×"));
    if spread.is_some_and(|s| s > NOISY) {
        t.push_str(" NOISY");
    }
    if implausible {
        t.push_str(" IMPLAUSIBLE");
    }
    t
}

fn find(rows: &[Row], v: Variant, size: usize) -> Option<&Row> {
    rows.iter()
        .find(|r| r.variant == v.name() && r.size == size)
}

/// The size at which `a`'s msgs/s relative to `b`'s is lowest, and that ratio.
fn worst_ratio(rows: &[Row], sizes: &[usize], a: Variant, b: Variant) -> Option<(usize, f64)> {
    sizes
        .iter()
        .filter_map(|&s| {
            Some((
                s,
                find(rows, a, s)?.msgs_per_sec / find(rows, b, s)?.msgs_per_sec,
            ))
        })
        .min_by(|x, y| x.1.total_cmp(&y.1))
}

/// The targets checked on `rows`.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut t = Vec::new();
    let sizes: Vec<usize> = {
        let mut s: Vec<usize> = rows.iter().map(|r| r.size).collect();
        s.sort();
        s.dedup();
        s
    };
    // 1. cached/volatile vs iceoryx2.
    let worst = worst_ratio(rows, &sizes, Variant::ZcioCachedVolatile, Variant::Iceoryx2);
    t.push(Target {
        name: "zcio cached/volatile ≥ 1.0× iceoryx2 msgs/s at every size".into(),
        measured: worst.map_or("not run".into(), |(s, r)| {
            format!("lowest ratio {r:.2}× at {}", crate::fmt::size(s))
        }),
        met: worst.map(|(_, r)| r >= 1.0),
    });
    let at4k =
        find(rows, Variant::ZcioCachedVolatile, 4096).zip(find(rows, Variant::Iceoryx2, 4096));
    t.push(Target {
        name: "zcio cached/volatile ≥ 3× iceoryx2 at 4 KiB".into(),
        measured: at4k.map_or("not run".into(), |(z, i)| {
            format!("{:.2}×", z.msgs_per_sec / i.msgs_per_sec)
        }),
        met: at4k.map(|(z, i)| z.msgs_per_sec >= 3.0 * i.msgs_per_sec),
    });
    // 2. incremental per-page cost at 1 MiB.
    let inc = find(rows, Variant::ZcioCachedVolatile, 1 << 20)
        .and_then(|z| z.incr_ns_per_page)
        .zip(find(rows, Variant::Pipe, 1 << 20).and_then(|p| p.incr_ns_per_page));
    t.push(Target {
        name: "cached/volatile incremental ns/page ≤ 1/50 of pipe's at 1 MiB".into(),
        measured: inc.map_or("not run".into(), |(z, p)| {
            format!("{z:.1} vs {p:.1} ns/page = 1/{:.0}", p / z.max(1e-9))
        }),
        met: inc.map(|(z, p)| z <= p / 50.0),
    });
    // 3. three domains: throughput and the forwarder's CPU per message.
    for at in [1 << 20, 16 << 20] {
        let three =
            find(rows, Variant::Zcio3Dom, at).zip(find(rows, Variant::ZcioCachedVolatile, at));
        t.push(Target {
            name: format!(
                "3 domains ≥ 80% of 2 domains' msgs/s at {} (cached/volatile)",
                crate::fmt::size(at)
            ),
            measured: three.map_or("not run".into(), |(a, b)| {
                format!("{:.0}%", 100.0 * a.msgs_per_sec / b.msgs_per_sec)
            }),
            met: three.map(|(a, b)| a.msgs_per_sec >= 0.8 * b.msgs_per_sec),
        });
    }
    let cpu = find(rows, Variant::Zcio3Dom, 1 << 20)
        .and_then(|r| r.forwarder_cpu_us.zip(r.originator_cpu_us));
    t.push(Target {
        name: "forwarder CPU per message ≤ 1/4 of the originator's at 1 MiB (3 domains)".into(),
        measured: cpu.map_or("not run".into(), |(f, o)| {
            format!("{f:.2} vs {o:.2} µs/msg = {:.2}", f / o.max(1e-9))
        }),
        met: cpu.map(|(f, o)| f <= o / 4.0),
    });
    // 4. uncached/secured vs pipe at >= 1 MiB.
    let big: Vec<usize> = sizes.iter().copied().filter(|&s| s >= 1 << 20).collect();
    let worst = worst_ratio(rows, &big, Variant::ZcioUncachedSecured, Variant::Pipe);
    t.push(Target {
        name: "uncached/secured beats the pipe copy at ≥ 1 MiB".into(),
        measured: worst.map_or("not run".into(), |(s, r)| {
            format!("lowest ratio {r:.2}× at {}", crate::fmt::size(s))
        }),
        met: worst.map(|(_, r)| r > 1.0),
    });
    t
}

/// The plot: msgs/s against size, one line per variant (log-log), and,
/// if the latency part ran, the one-way p50 latency against size beside it.
pub fn svg(rows: &[Row], lat: &[LatencyRow], path: &Path) -> Result<(), String> {
    let tp = plot::series(
        rows.iter()
            .map(|r| (r.variant.as_str(), r.size as f64, r.msgs_per_sec.max(1e-3))),
    );
    let lt = plot::series(lat.iter().map(|r| {
        (
            r.variant.as_str(),
            r.size as f64,
            (r.p50_ns / 1e3).max(1e-3),
        )
    }));
    let sizes = Axis::new("message size", Scale::Log2, |v| size(v as usize));
    // One panel 960 pixels wide per part that ran.
    let width = 960 * (u32::from(!tp.is_empty()) + u32::from(!lt.is_empty())).max(1);
    Figure::new(None, width)
        .grid(
            600,
            2,
            vec![
                Lines::new(
                    "zcio-bench transfer: messages/s by size",
                    sizes,
                    Axis::new("messages per second", Scale::Log10, si),
                    tp,
                )
                .legend(Legend::LowerLeft)
                .into(),
                Lines::new(
                    "ping-pong: one-way latency (p50) by size",
                    sizes,
                    Axis::new("one-way latency p50 (µs)", Scale::Log10, sig3),
                    lt,
                )
                .into(),
            ],
        )
        .write(path)
}

/// The rows of each part.
pub fn split(rows: &[Entry]) -> (Vec<Row>, Vec<LatencyRow>) {
    let mut tp = Vec::new();
    let mut lat = Vec::new();
    for e in rows {
        match e {
            Entry::Throughput(r) => tp.push(r.clone()),
            Entry::Latency(r) => lat.push(r.clone()),
        }
    }
    (tp, lat)
}

use crate::fmt::ns;

/// The latency table: one line per (size, transport).
pub fn latency_text(rows: &[LatencyRow]) -> String {
    let mut out =
        String::from("ping-pong, one message in flight: one-way latency (round trip / 2)\n");
    out.push_str(&format!(
        "{:<21} {:>8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>14} {:>14}  {}\n",
        "transport",
        "size",
        "p50",
        "p99",
        "p99.9",
        "mean",
        "vs floor",
        "vs pipe",
        "client CPU/rt",
        "server CPU/rt",
        "runs"
    ));
    let mut by_size: BTreeMap<usize, Vec<&LatencyRow>> = BTreeMap::new();
    for r in rows {
        by_size.entry(r.size).or_default().push(r);
    }
    for (s, rs) in by_size {
        let pipe = rs.iter().find(|r| r.variant == "pipe").map(|r| r.p50_ns);
        for r in rs {
            out.push_str(&format!(
                "{:<21} {:>8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8} {:>11.2} µs {:>11.2} µs  {}\n",
                r.variant,
                size(s),
                ns(r.p50_ns),
                ns(r.p99_ns),
                ns(r.p999_ns),
                ns(r.mean_ns),
                r.vs_floor.map_or("-".into(), |f| format!("{f:.1}×")),
                pipe.map_or("-".into(), |p| format!("{:.2}×", r.p50_ns / p.max(1e-9))),
                r.client_cpu_us,
                r.server_cpu_us,
                runs(r.spread, false),
            ));
        }
        out.push('\n');
    }
    out.push_str(
        "  vs floor: p50 ÷ the cache-line floor of the same mode (busy or blocking) in this run; \
         vs pipe: p50 ÷ the pipe's p50 (lower is faster); CPU/rt: CPU time per round trip\n\n",
    );
    out
}

/// The latency targets of issue 23, each from one run's rows: the channel's
/// one-way p50 at most 0.6× iceoryx2's (busy-polling both) and at most 4×
/// the cache-line floor, at 64 B and 4 KiB, for its `Msg` path and for its
/// lanes; in blocking mode, the channel's p50 at most iceoryx2's blocking
/// mode.
pub fn latency_targets(rows: &[LatencyRow]) -> Vec<Target> {
    let get = |v: &str, at: usize| rows.iter().find(|r| r.variant == v && r.size == at);
    let ratio = |name: String, a: Option<&LatencyRow>, b: Option<&LatencyRow>, max: f64| {
        let pair = a.zip(b);
        Target {
            name,
            measured: pair.map_or("not run".into(), |(a, b)| {
                format!(
                    "{} vs {} ({:.2}×)",
                    ns(a.p50_ns),
                    ns(b.p50_ns),
                    a.p50_ns / b.p50_ns.max(1e-9)
                )
            }),
            met: pair.map(|(a, b)| a.p50_ns <= max * b.p50_ns),
        }
    };
    let mut t = Vec::new();
    // The channel's two paths, each checked: `Msg`s of pool buffers, and
    // its lanes (`Channel::open_lane`).
    for (variant, what) in [
        ("zcio-channel", "zcio channel (Msg)"),
        ("zcio-lane", "zcio channel lane"),
    ] {
        for at in [64usize, 4096] {
            t.push(ratio(
                format!(
                    "{what} one-way p50 ≤ 0.6× iceoryx2's at {} (busy-polling both)",
                    size(at)
                ),
                get(variant, at),
                get("iceoryx2", at),
                0.6,
            ));
            t.push(ratio(
                format!(
                    "{what} one-way p50 ≤ 4× the cache-line floor at {}",
                    size(at)
                ),
                get(variant, at),
                // The floor is measured once, at 64 B.
                get("cache-line", 64),
                4.0,
            ));
        }
    }
    t.push(ratio(
        "blocking mode: zcio channel one-way p50 ≤ iceoryx2's at 64 B".into(),
        get("zcio-channel-blocking", 64),
        get("iceoryx2-blocking", 64),
        1.0,
    ));
    t
}
