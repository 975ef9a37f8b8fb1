//! `zcio-bench registry`: what seeing the registry of live objects costs.
//!
//! A holder process registers N objects (every kind in turn, each with its
//! statistics page) in a fresh run directory; then, interleaved, `zcio ls`,
//! `zcio ls --json` and `zcio metrics --once` (if this build has it) list
//! them, beside the floor of any such tool: `ls -l` of the directory
//! (reading it and stat'ing every file, nothing mapped or validated). Each
//! tool runs several times per measurement (median wall time and CPU time
//! of the tool process). Then the holder is killed with SIGKILL and one
//! `zcio ls` must report every entry dead and leave none behind.

mod bench;
mod holder;

use std::path::PathBuf;

use serde::Serialize;

pub use bench::RegistryBench;
pub use holder::child_main;

/// The hidden first argument that makes the binary a holder.
pub const CHILD_ARG: &str = "__bench-registry-holder";

/// A tool that lists the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `zcio ls`.
    Ls,
    /// `zcio ls --json`.
    LsJson,
    /// `zcio metrics --once`.
    Metrics,
    /// `ls -l DIR`: the floor.
    PlainLs,
}

impl Tool {
    /// Its name in the tables and the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Ls => "zcio ls",
            Tool::LsJson => "zcio ls --json",
            Tool::Metrics => "zcio metrics --once",
            Tool::PlainLs => "ls -l (floor)",
        }
    }
}

/// One measurement: a tool over N live objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// The tool.
    pub tool: Tool,
    /// Live objects.
    pub objects: usize,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--quick`.
    pub quick: bool,
    /// Interleaved runs per point.
    pub reps: usize,
    /// Object counts.
    pub objects: Vec<usize>,
    /// Tool invocations per measurement (the median is kept).
    pub calls: usize,
    /// The `zcio` binary.
    pub zcio: PathBuf,
}

impl Options {
    /// The full run.
    pub fn full(zcio: PathBuf) -> Self {
        Self {
            quick: false,
            reps: 5,
            objects: vec![1, 100, 1000, 4000],
            calls: 9,
            zcio,
        }
    }

    /// `--quick`.
    pub fn quick(zcio: PathBuf) -> Self {
        Self {
            quick: true,
            reps: 3,
            objects: vec![1, 1000],
            calls: 5,
            zcio,
        }
    }
}

/// One row: a tool over N objects, one run (the driver keeps the median).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The tool.
    pub tool: &'static str,
    /// Live objects listed.
    pub objects: usize,
    /// Median wall time of one invocation, ms (process start to exit).
    pub wall_ms: f64,
    /// Median CPU time (user + system) of one invocation, ms.
    pub cpu_ms: f64,
    /// The holder's registration cost per object, µs.
    pub register_us: f64,
    /// Entries left in the directory after the holder was killed and one
    /// `zcio ls` ran (`zcio ls` rows only).
    pub leftovers: Option<usize>,
    /// Slowest ÷ fastest run of this point.
    pub spread: Option<f64>,
}
