//! What a child of `zcio-bench splice` does: one [`Task`] from a JSON
//! [`Spec`], printing at most one JSON line on stdout (the UDP sink first
//! prints the port it bound).

use serde::{Deserialize, Serialize};

use super::{chain, copy, udp};
use crate::child::line;

/// Everything a child needs (its CPU is inherited by what it executes).
pub type Spec = crate::child::Spec<Task>;

/// One child's job.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Task {
    /// (a) copy `src` to `dst` with a read/write loop of `buf` bytes.
    RwCopy {
        /// Source file.
        src: String,
        /// Destination file (created or truncated).
        dst: String,
        /// Buffer size.
        buf: usize,
    },
    /// (b) a CPU-bound loop counting iterations for `ms` milliseconds;
    /// prints [`copy::NeighbourReport`].
    Neighbour {
        /// How long.
        ms: u64,
    },
    /// (b) run `argv` again and again (removing `dst` before each run)
    /// until `ms` milliseconds passed or `max` runs; prints
    /// [`copy::RepeatReport`].
    Repeat {
        /// The copier's command line.
        argv: Vec<String>,
        /// Its destination.
        dst: String,
        /// How long.
        ms: u64,
        /// At most this many runs.
        max: u64,
    },
    /// (b) a TCP sink taking `rate` bytes per second for `ms`
    /// milliseconds (prints `port N` first, then [`copy::LinkReport`]).
    LinkSink {
        /// Bytes per second.
        rate: u64,
        /// How long.
        ms: u64,
    },
    /// (c) read `block` bytes → CRC32C → zstd level `level` → write;
    /// prints [`chain::UserReport`].
    UserChain {
        /// Source file.
        src: String,
        /// Destination file (created or truncated).
        dst: String,
        /// Read size.
        block: usize,
        /// zstd level.
        level: i32,
    },
    /// (d) the UDP generator.
    UdpGen(udp::GenSpec),
    /// (d) the UDP sink.
    UdpSink(udp::SinkSpec),
}

/// Run `spec`'s task; `Ok(Some(line))` is its result line.
pub fn run(spec: &Spec) -> Result<Option<String>, String> {
    let deadline = spec.deadline();
    match &spec.task {
        Task::RwCopy { src, dst, buf } => copy::rw_copy(src, dst, *buf, deadline).map(|()| None),
        Task::Neighbour { ms } => copy::neighbour(*ms).map(|r| Some(line(&r))),
        Task::Repeat { argv, dst, ms, max } => {
            copy::repeat(argv, dst, *ms, *max, deadline).map(|r| Some(line(&r)))
        }
        Task::LinkSink { rate, ms } => {
            copy::link_sink(*rate, *ms, deadline).map(|r| Some(line(&r)))
        }
        Task::UserChain {
            src,
            dst,
            block,
            level,
        } => chain::user_chain(src, dst, *block, *level, deadline).map(|r| Some(line(&r))),
        Task::UdpGen(g) => udp::generate(g, deadline).map(|r| Some(line(&r))),
        Task::UdpSink(s) => udp::sink(s, deadline).map(|r| Some(line(&r))),
    }
}
