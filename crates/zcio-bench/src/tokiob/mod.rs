//! `zcio-bench tokio`: zcio's async channel ([`zcio::tokio::AsyncChannel`])
//! against what an async Rust program would use today to move bytes
//! between processes — tokio's `UnixStream` with length-prefixed frames —
//! and against zcio's synchronous channel, every side a separate process,
//! in one run.
//!
//! * latency: ping-pong with one message in flight, one-way = round trip
//!   / 2, p50 and p99;
//! * throughput: a sender streams messages as fast as it can, the receiver
//!   touches every message; msgs/s, GB/s and the CPU time per message of
//!   both processes;
//! * idle: one task of a current-thread runtime awaits 100 channels whose
//!   peer never sends; its process's CPU time over one second.
//!
//! The variants ([`Variant`]): `zcio-async` (an [`AsyncChannel`] on a
//! current-thread tokio runtime in both processes), `tokio-unix` (tokio's
//! `UnixStream`, the same runtime), `zcio-sync-blocking` (the synchronous
//! channel without a spin budget, no runtime) and `zcio-sync` (the same
//! with its default spinning policy, for context). The sides of every
//! variant run the same generic loops ([`sides`]), so they are timed by
//! the same code.
//!
//! Children are this binary re-executed with [`CHILD_ARG`] and a JSON
//! [`Spec`]; a measuring child prints one JSON [`Sample`] line.
//!
//! [`AsyncChannel`]: zcio::tokio::AsyncChannel

mod bench;
pub mod idle;
pub mod sides;
pub mod table;

pub(crate) use crate::sockpath::SockPath;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use bench::TokioBench;
pub use table::Entry;

use crate::affinity::cpu_for;
use crate::child::Group;

/// The hidden first argument that makes the binary a child of this bench.
pub const CHILD_ARG: &str = "__bench-tokio-child";

/// How the bytes move.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// `zcio::tokio::AsyncChannel` in both processes, each on a
    /// current-thread tokio runtime (default channel policy: its async
    /// waits spin at most `SpinPolicy::task_max` before they sleep in the
    /// reactor).
    ZcioAsync,
    /// tokio's `UnixStream`, length-prefixed frames, on the same runtime.
    TokioUnix,
    /// zcio's synchronous channel without a spin budget (a waiter sleeps
    /// on the futex at once), blocking calls, no runtime.
    ZcioSyncBlocking,
    /// zcio's synchronous channel with its default policy (spins before
    /// it sleeps), blocking calls, no runtime.
    ZcioSync,
}

impl Variant {
    /// All variants in table order.
    pub const ALL: [Variant; 4] = [
        Variant::ZcioAsync,
        Variant::TokioUnix,
        Variant::ZcioSyncBlocking,
        Variant::ZcioSync,
    ];

    /// The variants of the idle part: a task of the runtime awaiting the
    /// async channels and tokio's sockets, and, for context, a thread per
    /// channel blocked in the synchronous channel's receive.
    pub const IDLE: [Variant; 3] = [
        Variant::ZcioAsync,
        Variant::TokioUnix,
        Variant::ZcioSyncBlocking,
    ];

    /// Name in tables, JSON and `--variants`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::ZcioAsync => "zcio-async",
            Variant::TokioUnix => "tokio-unix",
            Variant::ZcioSyncBlocking => "zcio-sync-blocking",
            Variant::ZcioSync => "zcio-sync",
        }
    }

    /// The variant named `s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown variant '{s}'; known: {}",
                    Self::ALL.map(Variant::name).join(", ")
                )
            })
    }

    /// Whether its processes run a tokio runtime.
    pub fn is_async(self) -> bool {
        matches!(self, Variant::ZcioAsync | Variant::TokioUnix)
    }
}

/// A part of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Ping-pong, one message in flight.
    Latency,
    /// Messages streamed from one process to another.
    Throughput,
    /// A task awaiting idle channels.
    Idle,
}

impl Part {
    /// All parts in run order.
    pub const ALL: [Part; 3] = [Part::Latency, Part::Throughput, Part::Idle];

    /// Name in JSON (`part`) and `--parts`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Latency => "latency",
            Part::Throughput => "throughput",
            Part::Idle => "idle",
        }
    }

    /// The part named `s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown part '{s}'; known: latency, throughput, idle"))
    }
}

/// The smallest message (a sequence word at its start and at its end).
pub const MIN_SIZE: usize = 16;
/// The largest message (each zcio process's pool holds 2 × [`IN_FLIGHT`]
/// of them).
pub const MAX_SIZE: usize = 16 << 20;

/// Messages a zcio sender may have in flight (`ChannelConfig::max_in_flight`
/// of every zcio variant): a send waits — asynchronously for the async
/// channel — while the receiver holds this many, so the sender's pool
/// (twice as many buffers) never runs dry.
pub const IN_FLIGHT: usize = 8;

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Parts to run.
    pub parts: Vec<Part>,
    /// Message sizes (latency and throughput).
    pub sizes: Vec<usize>,
    /// Variants of the latency and throughput parts.
    pub variants: Vec<Variant>,
    /// Repetitions per point, interleaved; the median is reported.
    pub reps: usize,
    /// Unmeasured round trips first.
    pub ping_warmup: u64,
    /// Measured round trips per point, at most.
    pub round_trips: u64,
    /// Bound on the measured round trips' time per point.
    pub ping_budget: Duration,
    /// Bytes streamed per point, which sets the message count.
    pub stream_bytes: u64,
    /// Bounds on the streamed message count per point.
    pub min_msgs: u64,
    /// See `min_msgs`.
    pub max_msgs: u64,
    /// Channels the idle task awaits.
    pub idle_channels: usize,
    /// How long the idle waiter settles before its CPU time is read.
    pub idle_settle: Duration,
    /// The window over which its CPU time is measured.
    pub idle_window: Duration,
    /// Bound on one measurement (all its children).
    pub timeout: Duration,
    /// Whether this is the `--quick` run.
    pub quick: bool,
}

impl Options {
    /// The full run: 64 B … 1 MiB, median of 3 interleaved runs.
    pub fn full() -> Self {
        Self {
            parts: Part::ALL.to_vec(),
            sizes: vec![64, 4 << 10, 64 << 10, 1 << 20],
            variants: Variant::ALL.to_vec(),
            reps: 3,
            ping_warmup: 1000,
            round_trips: 20_000,
            ping_budget: Duration::from_secs(4),
            stream_bytes: 1 << 30,
            min_msgs: 200,
            max_msgs: 300_000,
            idle_channels: 100,
            idle_settle: Duration::from_millis(100),
            idle_window: Duration::from_secs(1),
            timeout: Duration::from_secs(120),
            quick: false,
        }
    }

    /// The `--quick` run (well under a minute): 64 B and 64 KiB, fewer
    /// round trips and messages, one run per point.
    pub fn quick() -> Self {
        Self {
            sizes: vec![64, 64 << 10],
            reps: 1,
            ping_warmup: 200,
            round_trips: 2000,
            ping_budget: Duration::from_secs(1),
            stream_bytes: 128 << 20,
            min_msgs: 50,
            max_msgs: 50_000,
            timeout: Duration::from_secs(60),
            quick: true,
            ..Self::full()
        }
    }

    /// Whether `part` runs.
    pub fn has(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }

    /// Messages streamed at `size` (after the warm-up).
    pub fn stream_count(&self, size: usize) -> u64 {
        (self.stream_bytes / size as u64).clamp(self.min_msgs, self.max_msgs)
    }

    /// Unmeasured streamed messages first.
    pub fn stream_warmup(&self, size: usize) -> u64 {
        (self.stream_count(size) / 10).clamp(2 * IN_FLIGHT as u64 + 8, 2000)
    }
}

/// Check the options before anything is spawned: sizes in range and the
/// memory they take, counts in range.
pub fn check_limits(o: &Options) -> Result<(), String> {
    use crate::limits::{check_count, check_memory, check_size, exact};
    if o.parts.is_empty() {
        return Err("nothing to run: give at least one part".into());
    }
    let sized = o.has(Part::Latency) || o.has(Part::Throughput);
    if sized && (o.sizes.is_empty() || o.variants.is_empty()) {
        return Err("nothing to run: give at least one size and one variant".into());
    }
    for &s in &o.sizes {
        check_size("--sizes", s as u64, MIN_SIZE as u64, MAX_SIZE as u64)?;
    }
    if let Some(&max) = o.sizes.iter().max() {
        // Both processes: a pool of 2 × IN_FLIGHT buffers each, and the
        // socket variant's frame and receive buffers.
        check_memory(
            &format!("--sizes {}", exact(max as u64)),
            max as u64 * (4 * IN_FLIGHT as u64 + 4),
        )?;
    }
    check_count("--reps", o.reps as u64, 1, 100)?;
    check_count("--round-trips", o.round_trips, 1, 100_000_000)?;
    check_count("--messages", o.max_msgs, 1, 1_000_000_000)?;
    check_count("--idle-channels", o.idle_channels as u64, 1, 1000)
}

/// Everything a child needs.
pub type Spec = crate::child::Spec<Task>;

/// A side of one measurement, run in a child process.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Task {
    /// A ping-pong side: the server listens at `path`, the client connects
    /// and measures.
    Ping {
        /// The variant.
        variant: Variant,
        /// Client (measures) or server.
        client: bool,
        /// The socket path.
        path: String,
        /// Message size.
        size: usize,
        /// Unmeasured round trips.
        warmup: u64,
        /// Measured round trips, at most.
        iters: u64,
        /// Bound on the measured round trips' time, ms.
        budget_ms: u64,
    },
    /// A streaming side: the receiver listens at `path` and measures, the
    /// sender connects.
    Stream {
        /// The variant.
        variant: Variant,
        /// Sender or receiver (measures).
        sender: bool,
        /// The socket path.
        path: String,
        /// Message size.
        size: usize,
        /// Unmeasured messages first.
        warmup: u64,
        /// Measured messages.
        count: u64,
    },
    /// An idle side: the peer listens at `path` and never sends; the
    /// waiter connects `channels` channels, awaits them all and measures
    /// its CPU time.
    Idle {
        /// The variant.
        variant: Variant,
        /// Waiter (measures) or peer.
        waiter: bool,
        /// The socket path.
        path: String,
        /// Channels.
        channels: usize,
        /// Settling time before the window, ms.
        settle_ms: u64,
        /// The measured window, ms.
        window_ms: u64,
    },
}

/// What a measuring child reports (fields that do not apply stay 0).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Measured round trips or messages.
    pub msgs: u64,
    /// Nanoseconds of the measured interval.
    pub elapsed_ns: u64,
    /// CPU time (user + system, `getrusage(RUSAGE_SELF)`) of the process
    /// over the measured interval.
    pub cpu_ns: u64,
    /// One-way latency (a ping-pong client).
    pub latency: Option<Latency>,
    /// Idle waiter: how often it woke in the window (see the notes).
    pub wakeups: u64,
    /// zcio async sender: how often a send found its pool empty and
    /// waited (the channel's cap should keep this 0).
    #[serde(default)]
    pub pool_waits: u64,
}

/// One-way latency percentiles (half round trips).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50_ns: f64,
    /// 90th percentile.
    pub p90_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Mean.
    pub mean_ns: f64,
}

impl Latency {
    /// From round-trip times in ns (sorted here).
    pub fn from_round_trips(mut rt: Vec<u64>) -> Self {
        if rt.is_empty() {
            return Self::default();
        }
        rt.sort_unstable();
        let q = |p: f64| crate::oneway::quantile(&rt, p);
        Self {
            p50_ns: q(0.5),
            p90_ns: q(0.9),
            p99_ns: q(0.99),
            mean_ns: crate::oneway::mean(&rt),
        }
    }
}

/// One measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Ping-pong: a variant at a size.
    Ping {
        /// The variant.
        variant: Variant,
        /// Message size.
        size: usize,
    },
    /// Streaming: a variant at a size.
    Stream {
        /// The variant.
        variant: Variant,
        /// Message size.
        size: usize,
    },
    /// A task awaiting idle channels of a variant.
    Idle {
        /// The variant.
        variant: Variant,
    },
}

impl Job {
    /// For the progress bar and failures.
    pub fn label(&self) -> String {
        use crate::fmt::size as sz;
        match *self {
            Job::Ping { variant, size } => format!("latency {} {}", variant.name(), sz(size)),
            Job::Stream { variant, size } => {
                format!("throughput {} {}", variant.name(), sz(size))
            }
            Job::Idle { variant } => format!("idle {}", variant.name()),
        }
    }
}

/// The groups of jobs of a run: one per (part, size), its variants
/// interleaved; the idle variants in one group.
pub fn plan(o: &Options) -> Vec<Vec<Job>> {
    let mut g = Vec::new();
    if o.has(Part::Latency) {
        for &size in &o.sizes {
            g.push(
                o.variants
                    .iter()
                    .map(|&variant| Job::Ping { variant, size })
                    .collect(),
            );
        }
    }
    if o.has(Part::Throughput) {
        for &size in &o.sizes {
            g.push(
                o.variants
                    .iter()
                    .map(|&variant| Job::Stream { variant, size })
                    .collect(),
            );
        }
    }
    if o.has(Part::Idle) {
        g.push(
            Variant::IDLE
                .into_iter()
                .map(|variant| Job::Idle { variant })
                .collect(),
        );
    }
    g
}

/// Run the two sides of one measurement, `listener` first (the side that
/// binds `path`, pinned to CPU `cpu_for(1)`), then `connector` (pinned to
/// `cpu_for(0)`); their samples in that order.
fn two_sides(
    o: &Options,
    listener: (Task, &str),
    connector: (Task, &str),
) -> Result<(Sample, Sample), String> {
    let spec = |task: Task, cpu: usize| Spec {
        task,
        cpu: Some(cpu_for(cpu)),
        timeout_ms: o.timeout.as_millis() as u64,
    };
    let mut group = Group::new();
    group.push(
        crate::child::spawn(CHILD_ARG, &spec(listener.0, 1))?,
        listener.1,
    );
    group.push(
        crate::child::spawn(CHILD_ARG, &spec(connector.0, 0))?,
        connector.1,
    );
    let lines = group.wait_all(o.timeout + Duration::from_secs(5))?;
    let parse = |l: &str, what: &str| -> Result<Sample, String> {
        serde_json::from_str(l).map_err(|e| format!("{what}: bad result line {l:?}: {e}"))
    };
    Ok((
        parse(&lines[0], listener.1)?,
        parse(&lines[1], connector.1)?,
    ))
}

/// Measure one job once.
pub fn measure(job: Job, o: &Options) -> Result<Entry, String> {
    let path = SockPath::new("tokio", "point");
    let p = path.0.clone();
    match job {
        Job::Ping { variant, size } => {
            let task = |client| Task::Ping {
                variant,
                client,
                path: p.clone(),
                size,
                warmup: o.ping_warmup,
                iters: o.round_trips,
                budget_ms: o.ping_budget.as_millis() as u64,
            };
            let (srv, cli) = two_sides(o, (task(false), "server"), (task(true), "client"))?;
            Ok(table::latency_row(variant, size, &cli, &srv))
        }
        Job::Stream { variant, size } => {
            let task = |sender| Task::Stream {
                variant,
                sender,
                path: p.clone(),
                size,
                warmup: o.stream_warmup(size),
                count: o.stream_count(size),
            };
            let (rx, tx) = two_sides(o, (task(false), "receiver"), (task(true), "sender"))?;
            Ok(table::throughput_row(variant, size, &tx, &rx))
        }
        Job::Idle { variant } => {
            let task = |waiter| Task::Idle {
                variant,
                waiter,
                path: p.clone(),
                channels: o.idle_channels,
                settle_ms: o.idle_settle.as_millis() as u64,
                window_ms: o.idle_window.as_millis() as u64,
            };
            // The waiter binds nothing: the peer listens, the waiter
            // connects (and is the measured side, on CPU cpu_for(0)).
            let (_, w) = two_sides(o, (task(false), "idle peer"), (task(true), "idle waiter"))?;
            Ok(table::idle_row(variant, &w))
        }
    }
}

/// Run a task (in the child process).
pub fn run(spec: &Spec) -> Result<Sample, String> {
    let t = spec.timeout();
    match &spec.task {
        Task::Ping {
            variant,
            client,
            path,
            size,
            warmup,
            iters,
            budget_ms,
        } => sides::ping(
            *variant,
            *client,
            path,
            *size,
            *warmup,
            *iters,
            Duration::from_millis(*budget_ms),
            t,
        ),
        Task::Stream {
            variant,
            sender,
            path,
            size,
            warmup,
            count,
        } => sides::stream(*variant, *sender, path, *size, *warmup, *count, t),
        Task::Idle {
            variant,
            waiter,
            path,
            channels,
            settle_ms,
            window_ms,
        } => idle::run(
            *variant,
            *waiter,
            path,
            *channels,
            Duration::from_millis(*settle_ms),
            Duration::from_millis(*window_ms),
            t,
        ),
    }
}

/// Entry point of a child (`args` are the arguments after [`CHILD_ARG`]).
pub fn child_main(args: &[String]) -> i32 {
    crate::child::serve(
        CHILD_ARG,
        args,
        |s: &Spec| s.cpu,
        |s| run(s).map(|r| Some(crate::child::line(&r))),
        |s| format!("benchmark child {:?} failed", s.task),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_percentiles_are_half_round_trips() {
        for v in Variant::ALL {
            assert_eq!(Variant::parse(v.name()), Ok(v));
        }
        for p in Part::ALL {
            assert_eq!(Part::parse(p.name()), Ok(p));
        }
        assert!(Variant::parse("zcio").is_err());
        let l = Latency::from_round_trips((1..=1000).map(|i| i * 2).collect());
        assert_eq!((l.p50_ns, l.p90_ns, l.p99_ns), (500.0, 900.0, 990.0));
    }

    #[test]
    fn limits_refuse_tiny_and_huge_sizes() {
        let mut o = Options::quick();
        o.sizes = vec![8];
        assert!(check_limits(&o).is_err());
        o.sizes = vec![1 << 30];
        assert!(check_limits(&o).is_err());
        o.sizes = vec![64];
        assert!(check_limits(&o).is_ok());
        // Every quick job is planned, variants interleaved per size.
        let g = plan(&Options::quick());
        assert_eq!(g.len(), 5);
        assert_eq!(g[0].len(), Variant::ALL.len());
    }
}
