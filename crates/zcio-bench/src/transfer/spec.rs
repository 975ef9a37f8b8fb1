//! The children of `zcio-bench transfer`: this binary re-executed as
//! `<exe> __bench-child '<json spec>'` ([`CHILD_ARG`]), one process per
//! side of a measurement (throughput and ping-pong). A measuring side prints
//! one JSON [`Measured`] line on stdout.

use std::os::fd::{OwnedFd, RawFd};
use std::process::Child;

use serde::{Deserialize, Serialize};

use crate::child;

/// The hidden first argument that makes the binary a transfer child.
pub const CHILD_ARG: &str = "__bench-child";

/// How the zcio originator gets its buffers.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocKind {
    /// Path pool, volatile.
    CachedVolatile,
    /// Path pool, volatile, sized for a two-hop path (originator →
    /// forwarder → receiver): twice the buffers in flight.
    CachedVolatilePath2,
    /// Path pool, secured (sealed single-use regions).
    CachedSecured,
    /// Fresh region per buffer, volatile.
    UncachedVolatile,
    /// Fresh region per buffer, sealed.
    UncachedSecured,
}

/// One side of one measurement.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Role {
    /// zcio originator: connect to `path`, send.
    ZcioSend { path: String, alloc: AllocKind },
    /// zcio receiver: listen at `path`, receive, measure.
    ZcioRecv { path: String, expect_secured: bool },
    /// zcio forwarder: listen at `listen`, forward to `connect`.
    ZcioFwd { listen: String, connect: String },
    /// zcio lane originator: connect to `path`, open a lane, send.
    ZcioLaneSend { path: String },
    /// zcio lane receiver: listen at `path`, accept the lane, receive,
    /// measure.
    ZcioLaneRecv { path: String },
    /// Copy originator: write messages to inherited fd.
    CopySend { fd: RawFd },
    /// Copy receiver: read messages from inherited fd, measure.
    CopyRecv { fd: RawFd },
    /// Copy forwarder: read from `input`, write to `output`.
    CopyFwd { input: RawFd, output: RawFd },
    /// iceoryx2 publisher.
    IoxPub { service: String },
    /// iceoryx2 subscriber, measures.
    IoxSub { service: String },
    /// In-process memcpy reference, measures.
    Memcpy,
    /// A side of the transfer benchmark's ping-pong (latency) part.
    Ping {
        /// Transport.
        kind: super::pingpong::Kind,
        /// Client (measures) or server.
        client: bool,
        /// Socket path / service name base.
        path: String,
        /// Inherited read fd (pipe, socket; else -1).
        rfd: RawFd,
        /// Inherited write fd (pipe, socket; else -1).
        wfd: RawFd,
        /// Bound on the measured round trips' time, ms.
        budget_ms: u64,
        /// Take the next message's buffer (pool buffer, iceoryx2 sample)
        /// right after sending, before the wait for the answer.
        #[serde(default)]
        loan_ahead: bool,
    },
}

/// Everything a child needs.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ChildSpec {
    /// What to do.
    pub role: Role,
    /// Message size in bytes.
    pub size: usize,
    /// Unmeasured messages first.
    pub warmup: u64,
    /// Measured messages.
    pub count: u64,
    /// CPU to pin to.
    pub cpu: Option<usize>,
    /// Overall bound for the child's work.
    pub timeout_ms: u64,
}

/// What a measuring child reports.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Measured {
    /// Nanoseconds for `msgs` messages.
    pub elapsed_ns: u64,
    /// Messages in the measured interval.
    pub msgs: u64,
    /// Futex wake calls made by the measuring side (zcio only; else 0).
    pub wakes: u64,
    /// CPU time (user + system, `getrusage(RUSAGE_SELF)`) of this side's
    /// process over its `msgs` measured messages.
    #[serde(default)]
    pub cpu_ns: u64,
    /// One-way latency percentiles (a ping-pong client only).
    #[serde(default)]
    pub latency: Option<super::pingpong::Latency>,
}

impl Measured {
    /// What a side that only sends or forwards reports: its CPU time over
    /// `msgs` messages.
    pub fn cpu_only(msgs: u64, cpu_ns: u64) -> Self {
        Self {
            elapsed_ns: 0,
            msgs,
            wakes: 0,
            cpu_ns,
            latency: None,
        }
    }
}

impl ChildSpec {
    /// Spawn a child for this spec. Its stdout is piped (result line);
    /// stderr is inherited so errors show up.
    pub fn spawn(&self) -> Result<Child, String> {
        child::spawn(CHILD_ARG, self)
    }

    /// [`ChildSpec::spawn`] so that of `all` the child inherits exactly
    /// `give`.
    pub fn spawn_with(&self, give: &[&OwnedFd], all: &[&OwnedFd]) -> Result<Child, String> {
        crate::fds::spawn_with(CHILD_ARG, self, give, all)
    }
}

/// Entry point of a transfer child (`args` are the arguments after
/// [`CHILD_ARG`]). Returns the process exit code.
pub fn child_main(args: &[String]) -> i32 {
    child::serve(
        CHILD_ARG,
        args,
        |s: &ChildSpec| s.cpu,
        |s| Ok(super::run_role(s)?.map(|m| child::line(&m))),
        |s| format!("benchmark child {:?} failed", s.role),
    )
}
