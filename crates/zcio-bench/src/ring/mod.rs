//! `zcio-bench ring`: Beltway rings against Linux pipes and per-block
//! allocation, every side in its own process, in one run.
//!
//! * (a) [`copy_pipe`]: a pipe vs a continuous ring with `write`/`read`
//!   (copy), with `peek` (no payload read) and with `peek` + one load per
//!   64-byte line, sweeping ring size × call size (the paper's Figures 6
//!   and 11).
//! * (b) [`fanout`]: one producer, 1…8 consumers: ring `peek` vs a tee-style
//!   copy into N pipes; CPU time per GiB (Figure 12b).
//! * (c) [`layouts`]: the four data layouts with an IMIX packet mix vs a
//!   `Vec` allocated and freed per packet (Figure 5).
//!
//! The coordinator creates each ring under a unique name, spawns the sides
//! as children ([`CHILD_ARG`], see [`crate::child`]) with a bound on the
//! whole measurement, collects their [`Report`]s and unlinks the ring (also
//! on error). Rings use [`Overflow::Block`]: lossless, and the producer
//! waits until every consumer has attached before its first byte.

mod bench;
pub mod check;
pub mod copy_pipe;
pub mod fanout;
pub mod layouts;
pub mod plot;
pub mod row;
pub mod sides;
pub mod table;
pub mod targets;
pub mod task;

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use zcio::ring::Overflow;

pub use bench::RingBench;
pub use check::{Report, Side};
pub use row::{median_rows, Row};
pub use sides::ReadMode;
pub use task::{run_task, Task};

use crate::child::{self, Group};

/// The hidden first argument that makes the binary a ring child.
pub const CHILD_ARG: &str = "__bench-ring-child";

/// Everything a ring child needs (all the parameters of a side are in its
/// [`Task`]).
pub type Spec = child::Spec<Task>;

/// One part of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// (a) pipe vs ring copy / peek, ring size × call size.
    Copy,
    /// (b) fan-out to N consumers, CPU per GiB.
    Fanout,
    /// (c) layouts with a packet mix vs `Vec` per packet.
    Layouts,
}

impl Part {
    /// All parts in run order.
    pub const ALL: [Part; 3] = [Part::Copy, Part::Fanout, Part::Layouts];

    /// The letter used in JSON (`part`), tables and `--parts`.
    pub fn letter(self) -> &'static str {
        match self {
            Part::Copy => "a",
            Part::Fanout => "b",
            Part::Layouts => "c",
        }
    }

    /// Long name, also accepted by `--parts`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Copy => "copy",
            Part::Fanout => "fanout",
            Part::Layouts => "layouts",
        }
    }

    /// Parse `a`/`copy`, `b`/`fanout`, `c`/`layouts`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.letter() == s || p.name() == s)
            .ok_or_else(|| format!("unknown part '{s}'; known: a (copy), b (fanout), c (layouts)"))
    }
}

/// Options of a ring benchmark run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Parts to run.
    pub parts: Vec<Part>,
    /// (a) ring sizes (bytes, powers of two).
    pub ring_sizes: Vec<usize>,
    /// (a) call sizes; calls larger than half the ring are skipped.
    pub call_sizes: Vec<usize>,
    /// (a) bytes per point, before the bounds below.
    pub volume: u64,
    /// (a) at least this many ring-fulls per point …
    pub min_laps: u64,
    /// … but at most this many calls per point.
    pub max_calls: u64,
    /// (b) consumer counts.
    pub consumers: Vec<usize>,
    /// (b) ring size (and pipe buffer size, capped at pipe-max-size).
    pub fanout_ring: usize,
    /// (b) call size.
    pub fanout_call: usize,
    /// (b) bytes produced (each consumer receives all of them).
    pub fanout_volume: u64,
    /// (c) ring size.
    pub layout_ring: usize,
    /// (c) slot size of the slotted layout.
    pub slot_size: usize,
    /// (c) payload bytes of packets per point (sets the packet count).
    pub layout_volume: u64,
    /// (c) seed of the packet-size sequence.
    pub seed: u64,
    /// Runs per point (interleaved); the median by GB/s is reported.
    pub reps: usize,
    /// Bound on one measurement (all its children).
    pub timeout: Duration,
}

impl Options {
    /// The full sweep: rings 16 KiB … 64 MiB × calls 64 B … 1 MiB, 1 GiB
    /// per point (at most 4 Mi calls), median of 3 runs.
    pub fn full() -> Self {
        Self {
            parts: Part::ALL.to_vec(),
            ring_sizes: (0..7).map(|i| (16usize << 10) << (2 * i)).collect(),
            call_sizes: (0..8).map(|i| 64usize << (2 * i)).collect(),
            volume: 1 << 30,
            min_laps: 16,
            max_calls: 4 << 20,
            consumers: vec![1, 2, 4, 8],
            fanout_ring: 1 << 20,
            fanout_call: 64 << 10,
            fanout_volume: 1 << 30,
            layout_ring: 1 << 20,
            slot_size: 2048,
            layout_volume: 1 << 30,
            seed: 0x5eed,
            reps: 3,
            timeout: Duration::from_secs(120),
        }
    }

    /// The `--quick` run (well under a minute on two cores): rings 64 KiB
    /// and 1 MiB × calls 64 B, 4 KiB, 64 KiB; 256 MiB per point (at most
    /// 1 Mi calls; much less and the fastest points last about a
    /// millisecond), median of 3 runs (single runs on a VM vary by up to
    /// 10×).
    pub fn quick() -> Self {
        Self {
            ring_sizes: vec![64 << 10, 1 << 20],
            call_sizes: vec![64, 4 << 10, 64 << 10],
            volume: 256 << 20,
            max_calls: 1 << 20,
            fanout_volume: 256 << 20,
            layout_volume: 256 << 20,
            reps: 3,
            timeout: Duration::from_secs(60),
            ..Self::full()
        }
    }

    /// Whether `part` runs.
    pub fn has(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }
}

/// One measurement to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Part (a).
    Copy {
        /// Variant.
        variant: copy_pipe::Variant,
        /// Ring size (pipe buffer size asked for).
        ring: usize,
        /// Call size.
        call: usize,
    },
    /// Part (b).
    Fanout {
        /// Variant.
        variant: fanout::Variant,
        /// Consumers.
        consumers: usize,
    },
    /// Part (c).
    Layout {
        /// Variant.
        variant: layouts::Variant,
    },
}

impl Job {
    /// For the progress bar.
    pub fn label(&self) -> String {
        use crate::fmt::size;
        match *self {
            Job::Copy {
                variant,
                ring,
                call,
            } => format!(
                "(a) {} ring {} call {}",
                variant.name(),
                size(ring),
                size(call)
            ),
            Job::Fanout { variant, consumers } => {
                format!("(b) {} × {consumers}", variant.name())
            }
            Job::Layout { variant } => format!("(c) {}", variant.name()),
        }
    }

    /// Measure once.
    pub fn run(&self, opts: &Options) -> Result<Row, String> {
        match *self {
            Job::Copy {
                variant,
                ring,
                call,
            } => copy_pipe::measure(variant, ring, call, opts),
            Job::Fanout { variant, consumers } => fanout::measure(variant, consumers, opts),
            Job::Layout { variant } => layouts::measure(variant, opts),
        }
    }
}

/// The measurements of a run (one repetition), in order.
pub fn plan(opts: &Options) -> Vec<Job> {
    let mut jobs = Vec::new();
    for part in Part::ALL.into_iter().filter(|p| opts.has(*p)) {
        match part {
            Part::Copy => {
                for &ring in &opts.ring_sizes {
                    for &call in opts.call_sizes.iter().filter(|&&c| c <= ring / 2) {
                        for variant in copy_pipe::Variant::ALL {
                            jobs.push(Job::Copy {
                                variant,
                                ring,
                                call,
                            });
                        }
                    }
                }
            }
            Part::Fanout => {
                for &consumers in &opts.consumers {
                    for variant in fanout::Variant::ALL {
                        jobs.push(Job::Fanout { variant, consumers });
                    }
                }
            }
            Part::Layouts => {
                for variant in layouts::Variant::ALL {
                    jobs.push(Job::Layout { variant });
                }
            }
        }
    }
    jobs
}

/// Check options the sides rely on.
pub fn validate(opts: &Options) -> Result<(), String> {
    let pow2 = |v: usize| v.is_power_of_two() && v >= 4096;
    if let Some(r) = opts.ring_sizes.iter().find(|&&r| !pow2(r)) {
        return Err(format!(
            "ring size {r} must be a power of two ≥ 4 KiB (e.g. 16K, 1M)"
        ));
    }
    if let Some(c) = opts.call_sizes.iter().find(|&&c| c < 8) {
        return Err(format!(
            "call size {c} too small: calls carry an 8-byte sequence word"
        ));
    }
    if opts.has(Part::Copy)
        && !opts
            .ring_sizes
            .iter()
            .any(|&r| opts.call_sizes.iter().any(|&c| c <= r / 2))
    {
        return Err("no call size is at most half of a ring size: nothing to run in (a)".into());
    }
    if let Some(n) = opts
        .consumers
        .iter()
        .find(|&&n| n == 0 || n > zcio::ring::Geometry::MAX_CONSUMERS)
    {
        return Err(format!(
            "consumer count {n} out of range 1..={}",
            zcio::ring::Geometry::MAX_CONSUMERS
        ));
    }
    Ok(())
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A ring created for one measurement, unlinked when dropped (also on
/// error paths; the children keep their mappings until they exit).
#[derive(Debug)]
pub struct RingGuard {
    name: String,
}

impl RingGuard {
    /// Create a ring with `opts` (policy forced to `Block`) under a new
    /// unique name (`zcio-bench-ring-PID-N`).
    pub fn create(opts: zcio::ring::Options) -> Result<Self, String> {
        let name = format!(
            "zcio-bench-ring-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let opts = opts.overflow(Overflow::Block);
        opts.create(&name)
            .map_err(|e| format!("create ring {name} ({opts:?}): {e}"))?;
        Ok(Self { name })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for RingGuard {
    fn drop(&mut self) {
        if let Err(e) = zcio::ring::unlink(&self.name) {
            eprintln!("warning: could not remove ring {}: {e}", self.name);
        }
    }
}

/// Largest call of `bench ring` (a call larger than half a ring is skipped).
pub const MAX_CALL: u64 = 1 << 30;

/// `bench ring --ring-sizes/--call-sizes/--consumers/--reps` against their
/// ranges and the memory available (see [`crate::limits`]).
pub fn check_limits(o: &Options) -> Result<(), String> {
    use crate::limits::{check_count, check_memory, check_size, exact};
    let max_ring = zcio::internals::ring_layout::MAX_DATA;
    for &r in &o.ring_sizes {
        check_size("--ring-sizes", r as u64, 4096, max_ring)?;
        if !r.is_power_of_two() {
            return Err(format!(
                "--ring-sizes {}: ring sizes are powers of two",
                exact(r as u64)
            ));
        }
    }
    for &c in &o.call_sizes {
        check_size("--call-sizes", c as u64, 8, MAX_CALL)?;
    }
    for &n in &o.consumers {
        check_count(
            "--consumers",
            n as u64,
            1,
            zcio::ring::Geometry::MAX_CONSUMERS as u64,
        )?;
    }
    check_count("--reps", o.reps as u64, 1, 1000)?;
    // One ring at a time, plus a call buffer in each of a few processes.
    let ring = o.ring_sizes.iter().max().copied().unwrap_or(0) as u64;
    let call = o.call_sizes.iter().max().copied().unwrap_or(0) as u64;
    check_memory("--ring-sizes/--call-sizes", ring + 4 * call)
}

/// Remove rings left behind by earlier runs whose coordinator is gone (e.g.
/// interrupted with Ctrl-C); returns how many were removed.
pub fn remove_stale_rings() -> usize {
    let Ok(names) = zcio::ring::list() else {
        return 0;
    };
    names
        .iter()
        .filter(|n| {
            n.strip_prefix("zcio-bench-ring-")
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| {
                    pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
                })
        })
        .filter(|n| zcio::ring::unlink(n).is_ok())
        .count()
}

/// The spec of a child running `task`, pinned to `cpu`.
pub fn spec(task: Task, cpu: Option<usize>, opts: &Options) -> Spec {
    Spec {
        task,
        cpu,
        timeout_ms: opts.timeout.as_millis() as u64,
    }
}

/// Spawn a ring child for `spec`. Its stdout is piped (its reports);
/// stderr is inherited so errors show up.
pub fn spawn(spec: &Spec) -> Result<Child, String> {
    child::spawn(CHILD_ARG, spec)
}

/// [`spawn`] so that of `all` the child inherits exactly `give`.
pub fn spawn_with(spec: &Spec, give: &[&OwnedFd], all: &[&OwnedFd]) -> Result<Child, String> {
    crate::fds::spawn_with(CHILD_ARG, spec, give, all)
}

/// Entry point of a ring child (`args` are the arguments after
/// [`CHILD_ARG`]): runs its task and prints a JSON array of [`Report`]s.
/// Returns the process exit code.
pub fn child_main(args: &[String]) -> i32 {
    child::serve(
        CHILD_ARG,
        args,
        |s: &Spec| s.cpu,
        |s| Ok(Some(child::line(&run_task(&s.task, s.timeout())?))),
        |s| format!("benchmark child {:?} failed", s.task),
    )
}

/// Start the ring writer of one measurement (pinned to the producer CPU),
/// wait for it and the readers already in `group`, and remove the ring.
pub fn run_ring_writer(
    mut group: Group,
    guard: RingGuard,
    call: usize,
    volume: u64,
    consumers: usize,
    opts: &Options,
) -> Result<Vec<Report>, String> {
    let writer = Task::RingWriter {
        ring: guard.name().to_string(),
        call,
        volume,
        consumers,
    };
    group.push(
        spawn(&spec(writer, Some(crate::affinity::cpu_for(0)), opts))?,
        "ring writer",
    );
    let reports = collect(group, opts)?;
    drop(guard);
    Ok(reports)
}

/// Wait for the children of one measurement (bounded) and collect their
/// reports.
pub fn collect(group: Group, opts: &Options) -> Result<Vec<Report>, String> {
    let lines = group.wait_all(opts.timeout + Duration::from_secs(5))?;
    let mut out = Vec::new();
    for line in lines {
        let rs: Vec<Report> = serde_json::from_str(&line)
            .map_err(|e| format!("bad report line {line:?} from a child: {e}"))?;
        out.extend(rs);
    }
    Ok(out)
}

/// What a reader needs to know about how the numbers were taken (printed
/// with the tables and stored in the JSON document).
pub fn notes(opts: &Options) -> Vec<String> {
    use crate::affinity::cpu_for;
    use crate::fmt::size;
    let mut n = vec![format!(
        "every side is a separate process; producer pinned to CPU {}, (first) consumer to CPU {}; \
         rings use the Block policy (lossless) and the producer starts only when all consumers \
         have attached",
        cpu_for(0),
        cpu_for(1)
    )];
    n.push(format!(
        "rates are measured at the consumers, from the first item received to the last; CPU time \
         is getrusage (user + system) of each child over its data phase; each point is the run \
         with the median GB/s of {} interleaved runs",
        opts.reps
    ));
    if opts.has(Part::Copy) {
        n.push(format!(
            "(a) per point max({}, {} ring-fulls) but at most {} calls; pipes get F_SETPIPE_SZ = \
             ring size capped at pipe-max-size ({}), the effective size is pipe_size",
            size(opts.volume as usize),
            opts.min_laps,
            opts.max_calls,
            size(crate::fds::pipe_max_size())
        ));
        n.push(format!(
            "(a) ring-peek consumers do not read the payload (they check one sampled sequence word \
             every {}); ring-peek-touch reads one u64 per 64-byte line; ring-copy and pipe \
             consumers copy into a call-size buffer",
            size(sides::SAMPLE_BYTES)
        ));
    }
    if opts.has(Part::Fanout) {
        n.push(fanout::pinning_note(&opts.consumers));
    }
    if opts.has(Part::Layouts) {
        n.push(layouts::note(opts));
    }
    n
}

#[cfg(test)]
mod tests;
