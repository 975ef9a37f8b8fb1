//! `zcio-bench semantics`: the eight buffering semantics of
//! [`zcio::semantics`] end to end between two processes (issue 12,
//! deliverable 8; Brustoloni and Steenkiste's Table 9), beside a Linux
//! pipe, a Unix stream socket and an in-process `memcpy`, in one run.
//!
//! The coordinating process is the sender: for every measurement it binds
//! a zcio listener, re-executes this binary with [`CHILD_ARG`] as the
//! receiver, and both wrap their channel end in a
//! [`zcio::semantics::SemanticEndpoint`]. Per message the sender stamps one `u64`
//! per page (sequence number and page index) and outputs; the receiver
//! inputs and checks every stamp (a mismatch fails the run: integrity).
//! Two phases per measurement ([`side`]): a stream (throughput, CPU per
//! message of both processes) and a ping-pong with an 8-byte reply by copy.
//! The one-way latency is timed across the two processes
//! (`CLOCK_MONOTONIC` is system-wide): from the sender's clock when the
//! transfer begins (before output, or before `alloc`) to the receiver's
//! once input (and `free`) returned, with the time both spent stamping and
//! checking subtracted: what the cost model predicts. Half a round trip
//! would not be: only one direction carries the data, so it halves the
//! per-byte slope.
//!
//! The model column and the per-operation table come from [`model`], as
//! does the choice of the cost model both processes decide with
//! (`--model`: calibrated at the start of the run by default;
//! [`model::prepare`]).

mod baseline;
mod bench;
pub mod model;
mod plot;
pub mod side;
mod table;

use serde::{Deserialize, Serialize};
use zcio::semantics::Semantics;

pub use bench::SemBench;
pub use table::Row;

/// The hidden first argument that makes the binary a receiver of this
/// benchmark.
pub const CHILD_ARG: &str = "__bench-semantics-child";

/// One measured line of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Line {
    /// Sender and receiver both use this semantics; the receiver trusts
    /// the sender.
    Sem(Semantics),
    /// Emulated copy on both sides, the receiver *not* trusting the sender:
    /// the library delivers by the cheapest kernel-safe way.
    Secured,
    /// Sender emulated copy, receiver copy.
    Mixed,
    /// Emulated copy with the sender rewriting the same buffer right after
    /// each output (every page takes a TCOW copy).
    Rewrite,
    /// A Linux pipe (write / read), 1 MiB buffer where allowed.
    Pipe,
    /// A Unix stream socket pair (write / read).
    Socket,
    /// One `memcpy` per message in one process.
    Memcpy,
}

impl Line {
    /// All lines in table order.
    pub fn all() -> Vec<Line> {
        let mut v: Vec<Line> = Semantics::ALL.into_iter().map(Line::Sem).collect();
        v.extend([
            Line::Secured,
            Line::Mixed,
            Line::Rewrite,
            Line::Pipe,
            Line::Socket,
            Line::Memcpy,
        ]);
        v
    }

    /// Name in tables, JSON (`semantics`) and `--semantics`.
    pub fn name(self) -> &'static str {
        match self {
            Line::Sem(s) => s.name(),
            Line::Secured => "secured",
            Line::Mixed => "mixed",
            Line::Rewrite => "emulated-copy-rewrite",
            Line::Pipe => "pipe",
            Line::Socket => "unix-socket",
            Line::Memcpy => "memcpy",
        }
    }

    /// Parse a name as given by [`Line::name`].
    pub fn parse(s: &str) -> Result<Line, String> {
        let t = s.trim().to_ascii_lowercase().replace('_', "-");
        Line::all()
            .into_iter()
            .find(|l| l.name() == t)
            .ok_or_else(|| {
                format!(
                    "unknown line '{s}'; known: {}",
                    Line::all()
                        .iter()
                        .map(|l| l.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
    }

    /// The sender's and the receiver's semantics (zcio lines).
    pub fn semantics(self) -> Option<(Semantics, Semantics)> {
        match self {
            Line::Sem(s) => Some((s, s)),
            Line::Secured | Line::Rewrite => {
                Some((Semantics::EmulatedCopy, Semantics::EmulatedCopy))
            }
            Line::Mixed => Some((Semantics::EmulatedCopy, Semantics::Copy)),
            Line::Pipe | Line::Socket | Line::Memcpy => None,
        }
    }

    /// Whether the receiver declares the sender trusted.
    pub fn trusted(self) -> bool {
        self != Line::Secured
    }

    /// Whether the application allocates the buffers (the sender's side
    /// decides: output vs output_owned).
    pub fn app_allocated(self) -> bool {
        self.semantics()
            .is_none_or(|(tx, _)| tx.application_allocated())
    }

    /// Whether the line is measured with aligned and unaligned receive
    /// buffers (application-allocated zcio lines; the system chooses the
    /// others' buffers, and the baselines copy anyway).
    pub fn has_alignment(self) -> bool {
        self.semantics().is_some() && self.app_allocated()
    }
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Lines to run.
    pub lines: Vec<Line>,
    /// Repetitions, interleaved (all measurements once, then again).
    pub runs: usize,
    /// Bound on the measured stream's time.
    pub stream_time: std::time::Duration,
    /// Bound on the measured stream's messages.
    pub stream_max: u64,
    /// Bound on the measured ping-pong's time.
    pub ping_time: std::time::Duration,
    /// Bound on the measured round trips.
    pub ping_max: u64,
    /// Bound on one measurement (both processes).
    pub timeout: std::time::Duration,
    /// Whether this is the `--quick` run.
    pub quick: bool,
}

/// The full run's sizes: 64 B … 16 MiB with non-page-multiples.
pub const FULL_SIZES: [usize; 12] = [
    64,
    1000,
    4096,
    6000,
    16 << 10,
    64 << 10,
    100_000,
    256 << 10,
    1 << 20,
    (1 << 20) + 100,
    4 << 20,
    16 << 20,
];

/// The `--quick` run's sizes.
pub const QUICK_SIZES: [usize; 6] = [64, 6000, 64 << 10, 256 << 10, 1 << 20, 4 << 20];

impl Options {
    /// The full run (median of 3).
    pub fn full() -> Self {
        Self {
            sizes: FULL_SIZES.to_vec(),
            lines: Line::all(),
            runs: 3,
            stream_time: std::time::Duration::from_millis(250),
            stream_max: 200_000,
            ping_time: std::time::Duration::from_millis(150),
            ping_max: 20_000,
            timeout: std::time::Duration::from_secs(60),
            quick: false,
        }
    }

    /// The `--quick` run (about a minute on two CPUs).
    pub fn quick() -> Self {
        Self {
            sizes: QUICK_SIZES.to_vec(),
            runs: 1,
            stream_time: std::time::Duration::from_millis(150),
            ping_time: std::time::Duration::from_millis(80),
            timeout: std::time::Duration::from_secs(30),
            quick: true,
            ..Self::full()
        }
    }
}

/// Largest message.
pub const MAX_SIZE: usize = 64 << 20;
/// Smallest message (control messages are 8 bytes).
pub const MIN_SIZE: usize = 64;

/// Check the options the sides rely on.
pub fn validate(o: &Options) -> Result<(), String> {
    use crate::limits::{check_count, check_memory, check_size, exact};
    if o.sizes.is_empty() || o.lines.is_empty() {
        return Err("nothing to run: give at least one size and one line".into());
    }
    for &s in &o.sizes {
        check_size("--sizes", s as u64, MIN_SIZE as u64, MAX_SIZE as u64)?;
    }
    check_count("--runs", o.runs as u64, 1, 100)?;
    if let Some(&max) = o.sizes.iter().max() {
        // Sender arena (up to 16 buffers) + receiver arena + pool copies.
        check_memory(&format!("--sizes {}", exact(max as u64)), max as u64 * 40)?;
    }
    Ok(())
}

/// One measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// What.
    pub line: Line,
    /// Message size.
    pub size: usize,
    /// Receiver buffer at the sender's page offset (else 100 bytes off).
    pub aligned: bool,
}

impl Job {
    /// For the progress bar and failures.
    pub fn label(&self) -> String {
        format!(
            "{} {}{}",
            self.line.name(),
            crate::fmt::size(self.size),
            if self.aligned { "" } else { " unaligned" }
        )
    }
}

/// Page offset of the receiver's buffer when unaligned (the sender's is 0).
pub const UNALIGNED_OFFSET: usize = 100;

/// The measurements of a run, in one group (repetitions interleave over
/// all of them: every line of every size once, then again).
pub fn plan(o: &Options) -> Vec<Vec<Job>> {
    let mut g = Vec::new();
    for &size in &o.sizes {
        for &line in &o.lines {
            g.push(Job {
                line,
                size,
                aligned: true,
            });
            if line.has_alignment() {
                g.push(Job {
                    line,
                    size,
                    aligned: false,
                });
            }
        }
    }
    vec![g]
}

/// Entry point of a receiver (`args` are the arguments after [`CHILD_ARG`]).
pub fn child_main(args: &[String]) -> i32 {
    crate::child::serve(
        CHILD_ARG,
        args,
        |s: &side::Spec| s.cpu,
        |s| Ok(Some(crate::child::line(&side::receive(s)?))),
        |s| format!("semantics receiver ({} {})", s.line, s.size),
    )
}

/// What the receiver reports.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct RxReport {
    /// CPU time (user + system) over the measured stream.
    pub cpu_ns: u64,
    /// Messages of the measured stream.
    pub msgs: u64,
    /// Pages swapped in (whole run).
    pub swapped_pages: u64,
    /// Bytes copied by input (whole run).
    pub copied_bytes: u64,
    /// Data messages received (whole run).
    pub data_msgs: u64,
    /// Ping-pong data messages: sequence number and `CLOCK_MONOTONIC`
    /// (ns) once input returned and the stamps were checked.
    pub arrivals: Vec<(u64, u64)>,
}

#[cfg(test)]
mod tests;
