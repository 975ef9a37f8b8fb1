//! `zcio-bench proxy`: the experiments of the thesis's chapter 6, every side
//! a separate process, in one run.
//!
//! * (a) [`latency`]: one-word latency (Table 6.1) in ns and cycles, mean
//!   and standard deviation: a synchronous rendezvous round trip, the cost
//!   of an asynchronous send returning, a round trip received through the
//!   asynchronous receive proxy, a pipe ping-pong and a futex ping-pong.
//! * (b) [`chain`]: forwarding chains of 0, 1, 2, 4, 8 intermediate
//!   processes running `zcio::forward` (Table 6.2): one-way latency with one
//!   message in flight and stream throughput, by reference and copying
//!   per hop, throughput as a fraction of the direct path.
//! * (c) [`burst`]: 16 messages of 4 B … 4 KiB by synchronous copy through
//!   the kernel vs through a channel by reference (Table 6.3).
//! * (d) [`cksum`]: receiver-side RFC 1071 checksum with and without the
//!   primitives (Figure 6.4).
//! * (e) futex system calls per message under sustained load on a channel
//!   (the direct path of (b) with a longer stream).
//!
//! Children are this binary re-executed with [`CHILD_ARG`] and a JSON
//! [`Spec`]; a measuring child prints one JSON [`Sample`] line.

mod bench;
pub mod burst;
pub mod chain;
pub mod cksum;
pub mod latency;
pub mod plot;
pub mod proxyside;
pub mod stats;
pub mod table;
pub mod task;

pub(crate) use crate::sockpath::SockPath;
use std::os::fd::OwnedFd;
use std::process::Child;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use bench::ProxyBench;
pub use table::Row;
pub use task::Task;

use crate::child::Group;

/// The hidden first argument that makes the binary a child of this bench.
pub const CHILD_ARG: &str = "__bench-proxy-child";

/// One part of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// (a) one-word latency.
    Latency,
    /// (b) forwarding chains.
    Chains,
    /// (c) copy vs shared memory, 16 messages.
    Copy,
    /// (d) receiver-side checksum.
    Checksum,
    /// (e) futex calls per message under load.
    Futex,
}

impl Part {
    /// All parts in run order.
    pub const ALL: [Part; 5] = [
        Part::Latency,
        Part::Chains,
        Part::Copy,
        Part::Checksum,
        Part::Futex,
    ];

    /// The letter used in JSON (`part`), tables and `--parts`.
    pub fn letter(self) -> &'static str {
        match self {
            Part::Latency => "a",
            Part::Chains => "b",
            Part::Copy => "c",
            Part::Checksum => "d",
            Part::Futex => "e",
        }
    }

    /// Long name, also accepted by `--parts`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Latency => "latency",
            Part::Chains => "chains",
            Part::Copy => "copy",
            Part::Checksum => "checksum",
            Part::Futex => "futex",
        }
    }

    /// Parse a letter or a long name.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.letter() == s || p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown part '{s}'; known: a (latency), b (chains), c (copy), d (checksum), \
                     e (futex)"
                )
            })
    }
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Parts to run.
    pub parts: Vec<Part>,
    /// (a) measured iterations per variant (after `warmup`).
    pub iters: u64,
    /// (a), (b), (c) unmeasured iterations first.
    pub warmup: u64,
    /// (b) intermediate process counts.
    pub intermediates: Vec<u32>,
    /// (b) messages sent one at a time for the latency.
    pub chain_latency_msgs: u64,
    /// (b) messages streamed for the throughput.
    pub chain_stream_msgs: u64,
    /// (b) message size.
    pub chain_msg_size: usize,
    /// (c) message sizes.
    pub burst_sizes: Vec<usize>,
    /// (c) measured rounds of 16 messages.
    pub burst_rounds: u64,
    /// (d) bytes checksummed per point.
    pub cksum_volume: u64,
    /// (d) message sizes.
    pub cksum_sizes: Vec<usize>,
    /// (e) messages streamed.
    pub futex_msgs: u64,
    /// Bound on one measurement (all its children).
    pub timeout: Duration,
    /// Whether this is the `--quick` run (for the output).
    pub quick: bool,
}

impl Options {
    /// The full run.
    pub fn full() -> Self {
        Self {
            parts: Part::ALL.to_vec(),
            iters: 100_000,
            warmup: 1000,
            intermediates: vec![0, 1, 2, 4, 8],
            chain_latency_msgs: 2000,
            chain_stream_msgs: 200_000,
            chain_msg_size: 64,
            burst_sizes: vec![4, 64, 256, 1024, 4096],
            burst_rounds: 2000,
            cksum_volume: 1 << 30,
            cksum_sizes: vec![1024, 16 << 10],
            futex_msgs: 1_000_000,
            timeout: Duration::from_secs(120),
            quick: false,
        }
    }

    /// The `--quick` run (≲ 30 s on two cores).
    pub fn quick() -> Self {
        Self {
            iters: 10_000,
            warmup: 200,
            chain_latency_msgs: 1000,
            chain_stream_msgs: 200_000,
            burst_rounds: 1000,
            cksum_volume: 64 << 20,
            futex_msgs: 200_000,
            timeout: Duration::from_secs(30),
            quick: true,
            ..Self::full()
        }
    }

    /// Whether `part` runs.
    pub fn has(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }
}

/// Check options the sides rely on.
pub fn validate(opts: &Options) -> Result<(), String> {
    if opts.iters == 0 || opts.chain_stream_msgs < 2 || opts.burst_rounds == 0 {
        return Err("iteration counts must be positive".into());
    }
    if let Some(k) = opts.intermediates.iter().find(|&&k| k > 32) {
        return Err(format!("{k} intermediates: at most 32"));
    }
    if opts.chain_msg_size < chain::HEADER {
        return Err(format!(
            "chain messages carry a {}-byte header",
            chain::HEADER
        ));
    }
    if let Some(s) = opts
        .burst_sizes
        .iter()
        .chain(&opts.cksum_sizes)
        .find(|&&s| s == 0 || s > 1 << 20)
    {
        return Err(format!("message size {s} out of range 1 B … 1 MiB"));
    }
    Ok(())
}

/// `bench proxy --iters/--intermediates/--stream/--volume` against their
/// ranges (see [`crate::limits`]).
pub fn check_limits(o: &Options) -> Result<(), String> {
    use crate::limits::{check_count, check_size};
    check_count("--iters", o.iters, 1, 1_000_000_000)?;
    for &k in &o.intermediates {
        check_count("--intermediates", u64::from(k), 0, 32)?;
    }
    check_count("--stream", o.chain_stream_msgs, 2, 1_000_000_000)?;
    // Checksummed as slices of one buffer of the message size: the volume
    // is a count of bytes streamed, not memory.
    check_size("--volume", o.cksum_volume, 1 << 20, 1 << 40)
}

/// One measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// (a) one variant.
    Latency(latency::Variant),
    /// (b) a chain of `k` relays, by reference or copying.
    Chain {
        /// Copy per hop.
        copy: bool,
        /// Intermediate processes.
        k: u32,
    },
    /// (c) one size, both variants.
    Burst {
        /// Message size.
        size: usize,
    },
    /// (d) one message size, with and without the primitives.
    Checksum {
        /// Message size.
        size: usize,
    },
    /// (e) the direct path under sustained load.
    Futex,
}

impl Job {
    /// For the progress bar.
    pub fn label(&self) -> String {
        use crate::fmt::size as sz;
        match *self {
            Job::Latency(v) => format!("(a) {}", v.name()),
            Job::Chain { copy, k } => {
                format!("(b) {} × {k}", if copy { "chain-copy" } else { "chain" })
            }
            Job::Burst { size } => format!("(c) 16 × {}", sz(size)),
            Job::Checksum { size } => format!("(d) checksum {}", sz(size)),
            Job::Futex => "(e) futex calls per message".into(),
        }
    }

    /// Measure once.
    pub fn run(&self, opts: &Options) -> Result<Vec<Row>, String> {
        match *self {
            Job::Latency(v) => latency::measure(v, opts).map(|r| vec![r]),
            Job::Chain { copy, k } => chain::measure(copy, k, opts).map(|r| vec![r]),
            Job::Burst { size } => burst::measure(size, opts),
            Job::Checksum { size } => cksum::measure(size, opts),
            Job::Futex => chain::measure_futex(opts).map(|r| vec![r]),
        }
    }
}

/// The measurements of a run, in order.
pub fn plan(opts: &Options) -> Vec<Job> {
    let mut jobs = Vec::new();
    for part in Part::ALL.into_iter().filter(|p| opts.has(*p)) {
        match part {
            Part::Latency => {
                for v in latency::Variant::ALL {
                    if v.available() {
                        jobs.push(Job::Latency(v));
                    }
                }
            }
            Part::Chains => {
                for copy in [false, true] {
                    for &k in &opts.intermediates {
                        // The direct path is the same with or without copying.
                        if !(copy && k == 0) {
                            jobs.push(Job::Chain { copy, k });
                        }
                    }
                }
            }
            Part::Copy => {
                for &size in &opts.burst_sizes {
                    jobs.push(Job::Burst { size });
                }
            }
            Part::Checksum => {
                for &size in &opts.cksum_sizes {
                    jobs.push(Job::Checksum { size });
                }
            }
            Part::Futex => jobs.push(Job::Futex),
        }
    }
    jobs
}

/// Everything a child needs.
pub type Spec = crate::child::Spec<Task>;

/// What a measuring child reports (fields that do not apply stay 0).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Measured iterations or messages.
    pub n: u64,
    /// Mean latency (ns).
    pub mean_ns: f64,
    /// Its standard deviation (ns).
    pub stddev_ns: f64,
    /// Mean latency in cycles.
    pub mean_cycles: f64,
    /// Nanoseconds of the measured interval (throughput runs).
    pub elapsed_ns: u64,
    /// Messages in the measured interval.
    pub msgs: u64,
    /// Payload bytes in the measured interval.
    pub bytes: u64,
    /// Futex wakes + sleeps of the side's channels over the interval.
    pub futex: u64,
    /// A check value (checksum fold, sequence errors …).
    pub check: u64,
}

/// Spawn a child running `task` pinned to `cpu`; of `all` fds it inherits
/// exactly `give` (the others stay `CLOEXEC`).
pub fn spawn(
    task: Task,
    cpu: Option<usize>,
    opts: &Options,
    give: &[&OwnedFd],
    all: &[&OwnedFd],
) -> Result<Child, String> {
    let spec = Spec {
        task,
        cpu,
        timeout_ms: opts.timeout.as_millis() as u64,
    };
    crate::fds::spawn_with(CHILD_ARG, &spec, give, all)
}

/// Wait for the children of one measurement (bounded) and parse the
/// samples of those that printed one (in push order; `None` for the rest).
pub fn collect(group: Group, opts: &Options) -> Result<Vec<Option<Sample>>, String> {
    let lines = group.wait_all(opts.timeout + Duration::from_secs(5))?;
    lines
        .into_iter()
        .map(|l| {
            if l.is_empty() {
                Ok(None)
            } else {
                serde_json::from_str(&l)
                    .map(Some)
                    .map_err(|e| format!("bad sample line {l:?}: {e}"))
            }
        })
        .collect()
}

/// The sample of the child at `i`, which must have printed one.
pub fn sample(samples: &[Option<Sample>], i: usize, what: &str) -> Result<Sample, String> {
    samples
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| format!("{what} printed no result"))
}

/// Entry point of a child (`args` are the arguments after [`CHILD_ARG`]).
pub fn child_main(args: &[String]) -> i32 {
    crate::child::serve(
        CHILD_ARG,
        args,
        |s: &Spec| s.cpu,
        |s| Ok(task::run(&s.task, s.deadline())?.map(|r| crate::child::line(&r))),
        |s| format!("benchmark child {:?} failed", s.task),
    )
}

/// Time left before `deadline` (at least 1 ms, so a bound is never zero).
pub fn left(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

/// What a reader needs to know about how the numbers were taken.
pub fn notes(opts: &Options) -> Vec<String> {
    use crate::affinity::cpu_for;
    let mut n = vec![format!(
        "every side is a separate process; client/source pinned to CPU {}, server/sink to CPU {}; \
         relays float over all CPUs; cycles from {}",
        cpu_for(0),
        cpu_for(1),
        crate::clock::cycles_source()
    )];
    if opts.has(Part::Latency) {
        n.push(latency::note(opts));
        if !latency::Variant::AsyncSend.available() {
            n.push(
                "(a) async-send and async-receive: proxy layer not built (zcio::proxy is \
                 missing); those rows are left out"
                    .into(),
            );
        }
    }
    if opts.has(Part::Chains) {
        n.push(chain::note(opts));
    }
    if opts.has(Part::Copy) {
        n.push(burst::note(opts));
    }
    if opts.has(Part::Checksum) {
        n.push(cksum::note(opts));
    }
    if opts.has(Part::Futex) {
        n.push(format!(
            "(e) a stream of {} messages of {} B on the direct path (by reference, default \
             policy); futex calls = wakes + sleeps from both sides' ChannelStats over the stream",
            opts.futex_msgs, opts.chain_msg_size
        ));
    }
    n
}
