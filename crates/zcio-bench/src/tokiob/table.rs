//! Rows of `zcio-bench tokio`: one kind per part, the derived columns, the
//! text tables, the targets and the plot.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{Options, Sample, Variant};
use crate::driver::Target;
use crate::fmt::{ns, si, size};
use crate::plot::{self, Axis, Bars, Figure, Legend, Lines, Scale};
use crate::report::sig3;

/// Ping-pong: one-way latency of a variant at a size.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    /// Variant name.
    pub variant: String,
    /// Message size (request and reply).
    pub size: usize,
    /// Measured round trips.
    pub round_trips: u64,
    /// One-way latency (half a round trip), median.
    pub p50_ns: f64,
    /// 90th percentile.
    pub p90_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Mean.
    pub mean_ns: f64,
    /// CPU time (user + system) per round trip of the client process, µs.
    pub client_cpu_us: f64,
    /// The same for the server process.
    pub server_cpu_us: f64,
    /// p50 ÷ `tokio-unix`'s p50 at this size.
    pub vs_tokio_unix: Option<f64>,
    /// p50 ÷ `zcio-sync-blocking`'s p50 at this size.
    pub vs_sync_blocking: Option<f64>,
}

/// Streaming: throughput of a variant at a size.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputRow {
    /// Variant name.
    pub variant: String,
    /// Message size.
    pub size: usize,
    /// Measured messages.
    pub msgs: u64,
    /// Messages per second at the receiver.
    pub msgs_per_sec: f64,
    /// Gigabytes (1e9 B) per second.
    pub gb_per_sec: f64,
    /// CPU time (user + system) of the sender process per message, µs.
    pub sender_cpu_us: f64,
    /// The same for the receiver process.
    pub receiver_cpu_us: f64,
    /// msgs/s ÷ `tokio-unix`'s at this size.
    pub vs_tokio_unix: Option<f64>,
    /// How often the async sender found its pool empty (0 expected).
    pub pool_waits: u64,
}

/// Idle: a process waiting on connections that never carry anything.
#[derive(Debug, Clone, Serialize)]
pub struct IdleRow {
    /// Variant name.
    pub variant: String,
    /// Connections awaited.
    pub channels: u64,
    /// How the process waits.
    pub waiter: String,
    /// The window's length, ms.
    pub window_ms: f64,
    /// CPU time (user + system) of the waiting process over the window, µs.
    pub cpu_us: f64,
    /// Wake-ups in the window (polls of the waiting task; for the
    /// thread-per-channel waiter, futex sleeps begun).
    pub wakeups: u64,
}

/// A row of any part, as in the JSON `rows` (`"part": "latency"`, …).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "part", rename_all = "lowercase")]
pub enum Entry {
    /// Ping-pong.
    Latency(LatencyRow),
    /// Streaming.
    Throughput(ThroughputRow),
    /// Idle waiting.
    Idle(IdleRow),
}

/// The latency row of a ping-pong client's and server's samples.
pub fn latency_row(v: Variant, size: usize, cli: &Sample, srv: &Sample) -> Entry {
    let lat = cli.latency.unwrap_or_default();
    let per = |s: &Sample| s.cpu_ns as f64 / 1e3 / s.msgs.max(1) as f64;
    Entry::Latency(LatencyRow {
        variant: v.name().into(),
        size,
        round_trips: cli.msgs,
        p50_ns: lat.p50_ns,
        p90_ns: lat.p90_ns,
        p99_ns: lat.p99_ns,
        mean_ns: lat.mean_ns,
        client_cpu_us: per(cli),
        server_cpu_us: per(srv),
        vs_tokio_unix: None,
        vs_sync_blocking: None,
    })
}

/// The throughput row of a stream's sender and receiver samples.
pub fn throughput_row(v: Variant, size: usize, tx: &Sample, rx: &Sample) -> Entry {
    let msgs_per_sec = rx.msgs as f64 * 1e9 / rx.elapsed_ns.max(1) as f64;
    let per = |s: &Sample| s.cpu_ns as f64 / 1e3 / s.msgs.max(1) as f64;
    Entry::Throughput(ThroughputRow {
        variant: v.name().into(),
        size,
        msgs: rx.msgs,
        msgs_per_sec,
        gb_per_sec: msgs_per_sec * size as f64 / 1e9,
        sender_cpu_us: per(tx),
        receiver_cpu_us: per(rx),
        vs_tokio_unix: None,
        pool_waits: tx.pool_waits,
    })
}

/// The idle row of a waiter's sample.
pub fn idle_row(v: Variant, w: &Sample) -> Entry {
    let waiter = match v {
        Variant::ZcioAsync | Variant::TokioUnix => "one task, current-thread runtime",
        Variant::ZcioSyncBlocking | Variant::ZcioSync => "a thread per channel",
    };
    Entry::Idle(IdleRow {
        variant: v.name().into(),
        channels: w.msgs,
        waiter: waiter.into(),
        window_ms: w.elapsed_ns as f64 / 1e6,
        cpu_us: w.cpu_ns as f64 / 1e3,
        wakeups: w.wakeups,
    })
}

/// The rows of each part.
pub fn split(rows: &[Entry]) -> (Vec<&LatencyRow>, Vec<&ThroughputRow>, Vec<&IdleRow>) {
    let (mut l, mut t, mut i) = (Vec::new(), Vec::new(), Vec::new());
    for e in rows {
        match e {
            Entry::Latency(r) => l.push(r),
            Entry::Throughput(r) => t.push(r),
            Entry::Idle(r) => i.push(r),
        }
    }
    (l, t, i)
}

/// Fill in the ratios to the baselines of the same size.
pub fn derive(rows: &mut [Entry]) {
    let find_lat = |rows: &[Entry], v: Variant, s: usize| {
        rows.iter().find_map(|e| match e {
            Entry::Latency(r) if r.variant == v.name() && r.size == s => Some(r.p50_ns),
            _ => None,
        })
    };
    let find_tp = |rows: &[Entry], s: usize| {
        rows.iter().find_map(|e| match e {
            Entry::Throughput(r) if r.variant == Variant::TokioUnix.name() && r.size == s => {
                Some(r.msgs_per_sec)
            }
            _ => None,
        })
    };
    let base: Vec<(Option<f64>, Option<f64>)> = rows
        .iter()
        .map(|e| match e {
            Entry::Latency(r) => (
                find_lat(rows, Variant::TokioUnix, r.size),
                find_lat(rows, Variant::ZcioSyncBlocking, r.size),
            ),
            Entry::Throughput(r) => (find_tp(rows, r.size), None),
            Entry::Idle(_) => (None, None),
        })
        .collect();
    for (e, (a, b)) in rows.iter_mut().zip(base) {
        match e {
            Entry::Latency(r) => {
                r.vs_tokio_unix = a.map(|a| r.p50_ns / a.max(1e-9));
                r.vs_sync_blocking = b.map(|b| r.p50_ns / b.max(1e-9));
            }
            Entry::Throughput(r) => r.vs_tokio_unix = a.map(|a| r.msgs_per_sec / a.max(1e-9)),
            Entry::Idle(_) => {}
        }
    }
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}×"))
}

/// CPU µs with three significant digits.
fn us(v: f64) -> String {
    format!("{} µs", sig3(v))
}

fn by_size<'a, R>(rows: &[&'a R], size: impl Fn(&R) -> usize) -> BTreeMap<usize, Vec<&'a R>> {
    let mut m: BTreeMap<usize, Vec<&R>> = BTreeMap::new();
    for r in rows {
        m.entry(size(r)).or_default().push(r);
    }
    m
}

/// The readable tables of the parts that ran.
pub fn text(rows: &[Entry]) -> String {
    let (lat, tp, idle) = split(rows);
    let mut out = String::new();
    if !lat.is_empty() {
        out.push_str("ping-pong, one message in flight: one-way latency (round trip / 2)\n");
        out.push_str(&format!(
            "{:<20} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>13} {:>13}\n",
            "variant",
            "size",
            "p50",
            "p90",
            "p99",
            "mean",
            "vs tokio",
            "vs sync-bl",
            "client CPU/rt",
            "server CPU/rt"
        ));
        for (s, rs) in by_size(&lat, |r| r.size) {
            for r in rs {
                out.push_str(&format!(
                    "{:<20} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>13} {:>13}\n",
                    r.variant,
                    size(s),
                    ns(r.p50_ns),
                    ns(r.p90_ns),
                    ns(r.p99_ns),
                    ns(r.mean_ns),
                    ratio(r.vs_tokio_unix),
                    ratio(r.vs_sync_blocking),
                    us(r.client_cpu_us),
                    us(r.server_cpu_us),
                ));
            }
            out.push('\n');
        }
        out.push_str(
            "  vs tokio / vs sync-bl: p50 ÷ the p50 of tokio-unix / zcio-sync-blocking at the \
             same size (lower is faster); CPU/rt: CPU time per round trip of each process\n\n",
        );
    }
    if !tp.is_empty() {
        out.push_str("streaming, one sender and one receiver process\n");
        out.push_str(&format!(
            "{:<20} {:>8} {:>10} {:>8} {:>10} {:>14} {:>14}\n",
            "variant", "size", "msgs/s", "GB/s", "vs tokio", "sender CPU/msg", "recv CPU/msg"
        ));
        for (s, rs) in by_size(&tp, |r| r.size) {
            for r in rs {
                out.push_str(&format!(
                    "{:<20} {:>8} {:>10} {:>8.2} {:>10} {:>14} {:>14}\n",
                    r.variant,
                    size(s),
                    si(r.msgs_per_sec),
                    r.gb_per_sec,
                    ratio(r.vs_tokio_unix),
                    us(r.sender_cpu_us),
                    us(r.receiver_cpu_us),
                ));
            }
            out.push('\n');
        }
        out.push_str(
            "  vs tokio: msgs/s ÷ tokio-unix's at the same size (higher is faster); CPU/msg: \
             CPU time per message of each process\n\n",
        );
    }
    if !idle.is_empty() {
        out.push_str("idle: a process waiting on connections whose peer never sends\n");
        out.push_str(&format!(
            "{:<20} {:>8} {:<34} {:>10} {:>12} {:>9}\n",
            "variant", "channels", "waiter", "window", "CPU", "wake-ups"
        ));
        for r in &idle {
            out.push_str(&format!(
                "{:<20} {:>8} {:<34} {:>10} {:>12} {:>9}\n",
                r.variant,
                r.channels,
                r.waiter,
                format!("{:.0} ms", r.window_ms),
                us(r.cpu_us),
                r.wakeups,
            ));
        }
        out.push_str(
            "  CPU: getrusage(RUSAGE_SELF) user + system of the waiting process over the window; \
             wake-ups: polls of the waiting task (threads: futex sleeps begun)\n\n",
        );
    }
    out
}

/// The targets of issue 24, deliverable 6, each from one run's rows.
pub fn targets(rows: &[Entry], o: &Options) -> Vec<Target> {
    let (lat, tp, idle) = split(rows);
    let lat_of = |v: Variant, at: usize| {
        lat.iter()
            .find(|r| r.variant == v.name() && r.size == at)
            .map(|r| r.p50_ns)
    };
    let tp_of = |v: Variant, at: usize| {
        tp.iter()
            .find(|r| r.variant == v.name() && r.size == at)
            .map(|r| r.msgs_per_sec)
    };
    let mut t = Vec::new();
    let a = lat_of(Variant::ZcioAsync, 64);
    let pair = a.zip(lat_of(Variant::ZcioSyncBlocking, 64));
    t.push(Target {
        name: "zcio-async one-way p50 ≤ 2× the synchronous channel's (blocking mode) at 64 B"
            .into(),
        measured: pair.map_or("not run".into(), |(a, b)| {
            format!("{} vs {} ({:.2}×)", ns(a), ns(b), a / b.max(1e-9))
        }),
        met: pair.map(|(a, b)| a <= 2.0 * b),
    });
    let pair = a.zip(lat_of(Variant::TokioUnix, 64));
    t.push(Target {
        name: "zcio-async one-way p50 ≤ 1/5 of tokio UnixStream's at 64 B".into(),
        measured: pair.map_or("not run".into(), |(a, b)| {
            format!("{} vs {} (1/{:.1})", ns(a), ns(b), b / a.max(1e-9))
        }),
        met: pair.map(|(a, b)| a <= b / 5.0),
    });
    let at = 64 << 10;
    let pair = tp_of(Variant::ZcioAsync, at).zip(tp_of(Variant::TokioUnix, at));
    t.push(Target {
        name: "zcio-async streaming throughput ≥ 10× tokio UnixStream's at 64 KiB".into(),
        measured: pair.map_or("not run".into(), |(a, b)| {
            format!(
                "{} vs {} msgs/s ({:.1}×; {:.2} vs {:.2} GB/s)",
                si(a),
                si(b),
                a / b.max(1e-9),
                a * at as f64 / 1e9,
                b * at as f64 / 1e9
            )
        }),
        met: pair.map(|(a, b)| a >= 10.0 * b),
    });
    let w = idle.iter().find(|r| r.variant == Variant::ZcioAsync.name());
    t.push(Target {
        name: format!(
            "a task awaiting {} idle zcio-async channels uses ≤ 1 ms CPU over 1 s",
            o.idle_channels
        ),
        measured: w.map_or("not run".into(), |r| {
            format!(
                "{} over {:.0} ms, {} wake-ups",
                us(r.cpu_us),
                r.window_ms,
                r.wakeups
            )
        }),
        met: w.map(|r| r.cpu_us * 1000.0 / r.window_ms.max(1e-9) <= 1000.0),
    });
    t
}

/// The plot: one-way p50 and GB/s against size, one line per variant,
/// and the idle waiters' CPU time.
pub fn svg(rows: &[Entry], path: &Path) -> Result<(), String> {
    let (lat, tp, idle) = split(rows);
    let names: Vec<&str> = Variant::ALL.iter().map(|v| v.name()).collect();
    let mut lt = plot::series(lat.iter().map(|r| {
        (
            r.variant.as_str(),
            r.size as f64,
            (r.p50_ns / 1e3).max(1e-3),
        )
    }));
    plot::order(&mut lt, &names);
    let mut gb = plot::series(
        tp.iter()
            .map(|r| (r.variant.as_str(), r.size as f64, r.gb_per_sec.max(1e-4))),
    );
    plot::order(&mut gb, &names);
    let n = idle.first().map_or(0, |r| r.channels);
    let bars = idle
        .iter()
        .map(|r| {
            let how = if r.waiter.starts_with("one task") {
                "1 task".to_string()
            } else {
                format!("{} threads", r.channels)
            };
            (format!("{} ({how})", r.variant), r.cpu_us)
        })
        .collect();
    let sizes = Axis::new("message size", Scale::Log2, |v| size(v as usize));
    Figure::new(
        Some("zcio-bench tokio: async channel vs tokio UnixStream vs synchronous channel"),
        1440,
    )
    .grid(
        520,
        3,
        vec![
            Lines::new(
                "ping-pong: one-way latency (p50)",
                sizes,
                Axis::new("one-way latency p50 (µs)", Scale::Log10, sig3),
                lt,
            )
            .into(),
            Lines::new(
                "streaming throughput",
                sizes,
                Axis::new("GB/s", Scale::Log10, sig3),
                gb,
            )
            .legend(Legend::LowerRight)
            .into(),
            Bars::new(
                format!("idle: CPU of a process awaiting {n} connections"),
                "CPU time (µs)",
                sig3,
                bars,
            )
            .into(),
        ],
    )
    .write(path)
}
