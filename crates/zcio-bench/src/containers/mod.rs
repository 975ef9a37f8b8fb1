//! `zcio-bench containers`: zcio between namespaces against the same run
//! within one, interleaved.
//!
//! * (a) pipe: `zcio pipe put` here → an 8 MiB ring → `zcio pipe get` in
//!   this PID namespace or in a new one (`unshare --pid --fork
//!   --mount-proc`): throughput and the reader's CPU time per MiB, the
//!   output checked byte for byte. Liveness across PID namespaces is the
//!   ring file's locks, so the figures should match.
//! * (b) wake: a tokio ring consumer (`AsyncConsumer`, asleep on its named
//!   bell) in this network namespace or in a new one (`unshare(CLONE_NEWNET)`
//!   before exec), woken by a producer here for each block (one every
//!   2 ms): one-way latency from the producer's stamp to the consumer's
//!   read. The bell is a file in the shared ring directory, so it must
//!   ring across the namespaces as within one (before, the consumer there
//!   woke only on its 50 ms look).
//!
//! Needs root (or the right to `unshare`); without it the other-namespace
//! rows are skipped with the reason. Part (a) needs the `zcio` binary.

mod bench;
mod sides;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use bench::ContainersBench;
pub use sides::child_main;

/// The hidden first argument that makes the binary a wake-part consumer.
pub const CHILD_ARG: &str = "__bench-containers-child";

/// Where the reading side runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Place {
    /// The benchmark's own namespaces.
    Same,
    /// A new PID (and mount, for its /proc) namespace.
    OtherPid,
    /// A new network namespace.
    OtherNet,
}

impl Place {
    /// Its name in the tables and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Place::Same => "same namespaces",
            Place::OtherPid => "other PID namespace",
            Place::OtherNet => "other network namespace",
        }
    }
}

/// One measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// (a) `zcio pipe` through a ring.
    Pipe(Place),
    /// (b) an async consumer woken per block.
    Wake(Place),
}

impl Job {
    /// The part's name.
    pub fn part(self) -> &'static str {
        match self {
            Job::Pipe(_) => "pipe",
            Job::Wake(_) => "wake",
        }
    }

    /// Where the reader runs.
    pub fn place(self) -> Place {
        match self {
            Job::Pipe(p) | Job::Wake(p) => p,
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--quick`.
    pub quick: bool,
    /// Interleaved runs per point.
    pub reps: usize,
    /// Bytes through the pipe per run.
    pub pipe_bytes: u64,
    /// Blocks the wake part sends per run.
    pub wakes: usize,
    /// The `zcio` binary.
    pub zcio: PathBuf,
}

impl Options {
    /// The full run.
    pub fn full(zcio: PathBuf) -> Self {
        Self {
            quick: false,
            reps: 5,
            pipe_bytes: 512 << 20,
            wakes: 2000,
            zcio,
        }
    }

    /// `--quick`: three runs per point (a median, with its spread), less data.
    pub fn quick(zcio: PathBuf) -> Self {
        Self {
            quick: true,
            reps: 3,
            pipe_bytes: 128 << 20,
            wakes: 300,
            zcio,
        }
    }
}

/// One row: a part at a place, one run (the driver keeps the median).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `pipe` or `wake`.
    pub part: &'static str,
    /// Where the reader ran.
    pub place: &'static str,
    /// (a) MB/s through the pipe.
    pub mb_per_s: Option<f64>,
    /// (a) the reader's CPU time (user + system) per MiB, µs.
    pub reader_cpu_us_per_mib: Option<f64>,
    /// (b) one-way latency, median, µs.
    pub p50_us: Option<f64>,
    /// (b) one-way latency, 99th percentile, µs.
    pub p99_us: Option<f64>,
    /// Bytes (a) or blocks (b) checked.
    pub count: u64,
    /// Why the row was not measured (no namespaces here).
    pub skipped: Option<String>,
}

/// Why namespaces of `place` cannot be made here, if they cannot.
pub fn cannot_enter(place: Place) -> Option<String> {
    let flags: &[&str] = match place {
        Place::Same => return None,
        Place::OtherPid => &["--pid", "--fork", "--mount-proc"],
        Place::OtherNet => &["--net"],
    };
    match std::process::Command::new("unshare")
        .args(flags)
        .arg("true")
        .stdin(std::process::Stdio::null())
        .output()
    {
        Err(e) => Some(format!("unshare not runnable: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "unshare {} refused: {}",
            flags.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}
