//! `zcio-bench bridge`: a zcio path across hosts through Zenoh (`zcio
//! bridge export|import`, issue 25) against plain Zenoh pub/sub and a plain
//! TCP stream of the same payloads, every side a separate process, all in
//! one run.
//!
//! "Host A" and "host B" are two network namespaces the bench creates,
//! joined by a veth pair ([`crate::splice::netns::Veth::create_pair`]), or
//! loopback where that is not possible (not root, no `ip(8)`, `--no-veth`):
//! [`hosts`]. Every process of host A is pinned to one CPU, every process
//! of host B to the other.
//!
//! The variants ([`Variant`]):
//!
//! * `zcio-bridge`: a ring producer (a child of this binary) on A writes
//!   each message into a named ring → `zcio bridge export ring:RA` on A →
//!   Zenoh over the link → `zcio bridge import --to ring:RB` on B → ring
//!   consumer(s) on B, each reading the block in place (`peek`); the export
//!   lends each block to Zenoh from the ring's pages (its default);
//! * `zcio-bridge-copy`: the same with `zcio bridge export --copy` (each
//!   block copied out of the ring first), where the `zcio` binary has it;
//! * `zenoh`: a plain Zenoh publisher on A and subscriber process(es) on B
//!   (each its own session), the same session configuration as the bridge
//!   (`zcio_zenoh::SessionOptions`: peer mode, explicit TCP endpoints,
//!   multicast scouting off), `Reliable`, `CongestionControl::Block`;
//! * `tcp`: a length-prefixed TCP stream from a sender on A to a receiver
//!   on B.
//!
//! Every message carries its sequence number and a `CLOCK_MONOTONIC` send
//! stamp at its start and the sequence number in its last word; every
//! receiver reads those three words where the message is (in the ring, in
//! Zenoh's buffers, in its socket buffer) and checks them and the length
//! ([`sides`]).
//!
//! Parts ([`Part`]): throughput (a flood: msgs/s, bytes/s, CPU per message
//! of every process), latency (a paced low rate, one-way p50/p99 from the
//! stamps — one machine, one clock) and fan-out (4 receivers on B: one
//! imported ring read by 4 consumers vs 4 Zenoh subscriber processes; the
//! bytes on B's link against the payload, and the CPU of everything on B).
//!
//! Children are this binary re-executed with [`CHILD_ARG`] and a JSON
//! [`Spec`]; the bridges are the `zcio` binary next to this one (or
//! `--zcio PATH`).

mod bench;
pub mod hosts;
pub mod measure;
pub mod plot;
pub mod sides;
pub mod table;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use bench::BridgeBench;
pub use table::Row;

/// The hidden first argument that makes the binary a child of this bench.
pub const CHILD_ARG: &str = "__bench-bridge-child";

/// How the messages cross from A to B.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Ring → `zcio bridge export` → Zenoh → `zcio bridge import` → ring.
    ZcioBridge,
    /// The same with `zcio bridge export --copy`.
    ZcioBridgeCopy,
    /// A plain Zenoh publisher and subscriber(s).
    Zenoh,
    /// A length-prefixed TCP stream.
    Tcp,
}

impl Variant {
    /// All variants in table order.
    pub const ALL: [Variant; 4] = [
        Variant::ZcioBridge,
        Variant::ZcioBridgeCopy,
        Variant::Zenoh,
        Variant::Tcp,
    ];

    /// Name in tables, JSON and `--variants`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::ZcioBridge => "zcio-bridge",
            Variant::ZcioBridgeCopy => "zcio-bridge-copy",
            Variant::Zenoh => "zenoh",
            Variant::Tcp => "tcp",
        }
    }

    /// The variant named `s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                format!("unknown variant '{s}'; known: zcio-bridge, zcio-bridge-copy, zenoh, tcp")
            })
    }
}

/// A part of the benchmark.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// A flood of messages: rate and CPU per message.
    Throughput,
    /// A paced low rate: one-way latency.
    Latency,
    /// Several receivers on B: bytes on the link and CPU on B.
    Fanout,
}

impl Part {
    /// All parts in run order.
    pub const ALL: [Part; 3] = [Part::Throughput, Part::Latency, Part::Fanout];

    /// Name in JSON (`part`) and `--parts`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Throughput => "throughput",
            Part::Latency => "latency",
            Part::Fanout => "fanout",
        }
    }

    /// The part named `s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown part '{s}'; known: throughput, latency, fanout"))
    }
}

/// The smallest message: sequence number and stamp at the start, the
/// sequence number again in the last word.
pub const MIN_SIZE: usize = 32;
/// The largest message (the bridges' default sample limit is 64 MiB; each
/// ring holds at least 8 of these).
pub const MAX_SIZE: usize = 16 << 20;

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Parts to run.
    pub parts: Vec<Part>,
    /// Message sizes of the throughput and latency parts.
    pub sizes: Vec<usize>,
    /// Variants of the throughput and latency parts (fan-out: zcio-bridge
    /// and zenoh).
    pub variants: Vec<Variant>,
    /// Message sizes of the fan-out part.
    pub fanout_sizes: Vec<usize>,
    /// Receivers on B in the fan-out part.
    pub fanout_receivers: usize,
    /// Repetitions per point, interleaved; the median is reported.
    pub reps: usize,
    /// How long a throughput point's sender sends after its warm-up (it
    /// stops earlier at `max_bytes` or `max_msgs`).
    pub send_time: Duration,
    /// Most payload bytes a throughput point sends after its warm-up.
    pub max_bytes: u64,
    /// Most messages a throughput point sends after its warm-up.
    pub max_msgs: u64,
    /// Payload bytes of the warm-up (4 … 2000 messages).
    pub warmup_bytes: u64,
    /// How long a latency point sends (at least `lat_min_msgs` messages).
    pub lat_time: Duration,
    /// The latency part's rate: at most this many messages per second …
    pub lat_max_rate: f64,
    /// … and at most this many payload bytes per second.
    pub lat_max_bw: f64,
    /// Fewest measured messages of a latency point.
    pub lat_min_msgs: u64,
    /// Data size of the two rings of the zcio path (and `--size` of the
    /// import).
    pub ring_size: u64,
    /// Try two network namespaces joined by a veth pair (else loopback).
    pub veth: bool,
    /// The `zcio` binary.
    pub zcio: PathBuf,
    /// Bound on one measurement (all its processes).
    pub timeout: Duration,
    /// Whether this is the `--quick` run.
    pub quick: bool,
}

impl Options {
    /// The full run: 64 B … 16 MiB, 2.5 s per throughput point, median of 3
    /// interleaved runs.
    pub fn full(zcio: PathBuf) -> Self {
        Self {
            parts: Part::ALL.to_vec(),
            sizes: vec![64, 4 << 10, 64 << 10, 1 << 20, 16 << 20],
            variants: Variant::ALL.to_vec(),
            fanout_sizes: vec![64 << 10, 1 << 20],
            fanout_receivers: 4,
            reps: 3,
            send_time: Duration::from_millis(2500),
            max_bytes: 8 << 30,
            max_msgs: 10_000_000,
            warmup_bytes: 32 << 20,
            lat_time: Duration::from_secs(3),
            lat_max_rate: 1000.0,
            lat_max_bw: 100e6,
            lat_min_msgs: 40,
            ring_size: 128 << 20,
            veth: true,
            zcio,
            timeout: Duration::from_secs(90),
            quick: false,
        }
    }

    /// The `--quick` run (about a minute): 64 B, 64 KiB and 1 MiB, fan-out
    /// at 64 KiB, 1 s per point, one run per point.
    pub fn quick(zcio: PathBuf) -> Self {
        Self {
            sizes: vec![64, 64 << 10, 1 << 20],
            fanout_sizes: vec![64 << 10],
            reps: 1,
            send_time: Duration::from_secs(1),
            max_bytes: 2 << 30,
            max_msgs: 3_000_000,
            lat_time: Duration::from_secs(1),
            lat_min_msgs: 20,
            timeout: Duration::from_secs(45),
            quick: true,
            ..Self::full(zcio)
        }
    }

    /// Whether `part` runs.
    pub fn has(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }

    /// Most measured messages of a throughput (or fan-out) point at
    /// `size` (the sender's time usually ends it first).
    pub fn stream_count(&self, size: usize) -> u64 {
        (self.max_bytes / size as u64).clamp(1, self.max_msgs)
    }

    /// Unmeasured messages first: `warmup_bytes` of them, 4 … 2000.
    pub fn stream_warmup(&self, size: usize) -> u64 {
        (self.warmup_bytes / size as u64).clamp(4, 2000)
    }

    /// The latency part's rate at `size` (messages per second).
    pub fn lat_rate(&self, size: usize) -> f64 {
        self.lat_max_rate.min(self.lat_max_bw / size as f64)
    }

    /// Measured messages of a latency point at `size`.
    pub fn lat_count(&self, size: usize) -> u64 {
        ((self.lat_rate(size) * self.lat_time.as_secs_f64()) as u64).max(self.lat_min_msgs)
    }

    /// Unmeasured messages before them (a tenth, 5 … 200).
    pub fn lat_warmup(&self, size: usize) -> u64 {
        (self.lat_count(size) / 10).clamp(5, 200)
    }
}

/// Check the options before anything is spawned: sizes, counts, memory.
pub fn check_limits(o: &Options) -> Result<(), String> {
    use crate::limits::{check_count, check_memory, check_size};
    if o.parts.is_empty() {
        return Err("nothing to run: give at least one part".into());
    }
    let sized = o.has(Part::Throughput) || o.has(Part::Latency);
    if sized && (o.sizes.is_empty() || o.variants.is_empty()) {
        return Err("nothing to run: give at least one size and one variant".into());
    }
    if o.has(Part::Fanout) && o.fanout_sizes.is_empty() {
        return Err("nothing to run: give at least one fan-out size".into());
    }
    for &s in o.sizes.iter().chain(&o.fanout_sizes) {
        check_size("--sizes", s as u64, MIN_SIZE as u64, MAX_SIZE as u64)?;
    }
    check_count("--reps", o.reps as u64, 1, 100)?;
    check_count("--messages", o.max_msgs, 1, 100_000_000)?;
    check_count(
        "--receivers",
        o.fanout_receivers as u64,
        1,
        (zcio::ring::Geometry::MAX_CONSUMERS - 1) as u64,
    )?;
    let max = o
        .sizes
        .iter()
        .chain(&o.fanout_sizes)
        .max()
        .copied()
        .unwrap_or(0) as u64;
    check_size(
        "--ring-size",
        o.ring_size,
        (2 * (max + zcio::ring::Geometry::BLOCK_HEADER_LEN)).next_power_of_two(),
        zcio::ring::Geometry::MAX_DATA_LEN,
    )?;
    if !o.ring_size.is_power_of_two() {
        return Err(format!(
            "--ring-size {}: ring sizes are powers of two",
            crate::limits::exact(o.ring_size)
        ));
    }
    // Two rings, and what the bridges' caches and queues may hold (a
    // history of 16 samples, a 64 MiB import queue).
    check_memory("--sizes", 2 * o.ring_size + 20 * max + (64 << 20))
}

/// Everything a child needs.
pub type Spec = crate::child::Spec<sides::Task>;

/// One measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Job {
    /// Which part.
    pub part: Part,
    /// How the messages cross.
    pub variant: Variant,
    /// Message size.
    pub size: usize,
    /// Receivers on B.
    pub receivers: usize,
}

impl Job {
    /// For the progress bar and failures.
    pub fn label(&self) -> String {
        let r = if self.receivers > 1 {
            format!(" ×{}", self.receivers)
        } else {
            String::new()
        };
        format!(
            "{} {} {}{r}",
            self.part.name(),
            self.variant.name(),
            crate::fmt::size(self.size)
        )
    }
}

/// The groups of jobs of a run: one per (part, size), its variants
/// interleaved.
pub fn plan(o: &Options) -> Vec<Vec<Job>> {
    let mut g = Vec::new();
    for part in [Part::Throughput, Part::Latency] {
        if !o.has(part) {
            continue;
        }
        for &size in &o.sizes {
            g.push(
                o.variants
                    .iter()
                    .map(|&variant| Job {
                        part,
                        variant,
                        size,
                        receivers: 1,
                    })
                    .collect(),
            );
        }
    }
    if o.has(Part::Fanout) {
        for &size in &o.fanout_sizes {
            g.push(
                [Variant::ZcioBridge, Variant::Zenoh]
                    .into_iter()
                    .map(|variant| Job {
                        part: Part::Fanout,
                        variant,
                        size,
                        receivers: o.fanout_receivers,
                    })
                    .collect(),
            );
        }
    }
    g
}

/// Entry point of a child (`args` are the arguments after [`CHILD_ARG`]).
pub fn child_main(args: &[String]) -> i32 {
    crate::child::serve(
        CHILD_ARG,
        args,
        |s: &Spec| s.cpu,
        sides::run,
        |s| format!("benchmark child {:?} failed", s.task),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_the_plan_interleaves_variants() {
        for v in Variant::ALL {
            assert_eq!(Variant::parse(v.name()), Ok(v));
        }
        for p in Part::ALL {
            assert_eq!(Part::parse(p.name()), Ok(p));
        }
        assert!(Variant::parse("zcio").is_err());
        let o = Options::quick(PathBuf::from("zcio"));
        let g = plan(&o);
        assert_eq!(g.len(), 2 * o.sizes.len() + o.fanout_sizes.len());
        assert_eq!(g[0].len(), Variant::ALL.len());
        assert!(g.last().unwrap().iter().all(|j| j.receivers == 4));
        assert!(check_limits(&o).is_ok());
    }

    #[test]
    fn counts_and_rates_are_bounded() {
        let o = Options::full(PathBuf::from("zcio"));
        assert_eq!(o.stream_count(64), o.max_msgs);
        assert_eq!(o.stream_count(16 << 20), 512);
        assert_eq!((o.stream_warmup(64), o.stream_warmup(16 << 20)), (2000, 4));
        assert_eq!(o.lat_rate(64), 1000.0);
        assert!(o.lat_rate(16 << 20) < 10.0);
        assert_eq!(o.lat_count(16 << 20), o.lat_min_msgs);
        let mut bad = o.clone();
        bad.sizes = vec![8];
        assert!(check_limits(&bad).is_err());
    }
}
