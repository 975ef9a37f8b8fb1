//! Liveness of the processes named in a ring's shared state.
//!
//! A ring records `(pid, start time)` for its producer and each consumer.
//! [`Watch`] turns that into a pidfd once (checking the start time after
//! opening it, so a recycled pid counts as dead) and then answers with a
//! non-blocking poll of the pidfd.

use std::os::fd::OwnedFd;

use crate::sys::peer;

/// A watched process.
#[derive(Debug)]
pub struct Watch {
    pid: u32,
    start: u64,
    fd: Option<OwnedFd>,
}

impl Watch {
    /// Watch process `pid` that started at `start`.
    pub fn new(pid: u32, start: u64) -> Self {
        let fd = i32::try_from(pid)
            .ok()
            .filter(|&p| p > 0)
            .and_then(|p| peer::open_pidfd(p).ok().map(|fd| (p, fd)))
            // Checked after opening: if the start time matches now, the
            // pidfd refers to that very process for good.
            .filter(|(p, _)| peer::start_time(*p) == Some(start))
            .map(|(_, fd)| fd);
        Self { pid, start, fd }
    }

    /// Whether this watch is for `(pid, start)`.
    pub fn is_for(&self, pid: u32, start: u64) -> bool {
        self.pid == pid && self.start == start
    }

    /// Whether the process is still running.
    pub fn alive(&self) -> bool {
        self.fd.as_ref().is_some_and(|fd| !peer::has_exited(fd))
    }
}

/// Whether a consumer slot still being claimed (its start time may not be
/// stored yet) belongs to a running process.
pub fn claimant_alive(pid: u32) -> bool {
    i32::try_from(pid).is_ok_and(|p| p > 0 && peer::start_time(p).is_some())
}

/// This process's `(pid, start time)`.
pub fn me() -> (u32, u64) {
    let pid = std::process::id();
    (pid, peer::start_time(pid as i32).unwrap_or(0))
}
