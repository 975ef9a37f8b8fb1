//! The one place zcio takes its atomics from.
//!
//! Under `cfg(loom)` the atomics are loom's model-checked ones and the
//! futex operations become yields, so the ring protocols in
//! [`crate::channel::ring`] can be model-checked with the exact code that
//! runs in production. Everything that orders memory between processes
//! imports from here.

#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use std::time::Duration;

/// Sleep while `word == expected` (bounded by `timeout`). Returns `true`
/// when the wait ended early (woken or value changed), `false` on timeout.
#[cfg(not(loom))]
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) -> bool {
    !matches!(crate::sys::futex::wait(word, expected, timeout), crate::sys::futex::Wake::TimedOut)
}

/// Wake up to `n` sleepers on `word`.
#[cfg(not(loom))]
pub fn futex_wake(word: &AtomicU32, n: u32) {
    crate::sys::futex::wake(word, n);
}

/// Loom stand-in: a wait is a yield (loom explores the interleavings).
#[cfg(loom)]
pub fn futex_wait(word: &AtomicU32, expected: u32, _timeout: Duration) -> bool {
    if word.load(Ordering::SeqCst) == expected {
        loom::thread::yield_now();
    }
    true
}

/// Loom stand-in: waking is implicit in the scheduler.
#[cfg(loom)]
pub fn futex_wake(_word: &AtomicU32, _n: u32) {}

/// One step of a bounded busy-wait, called every 64 spins: after the first
/// few thousand spins it yields the CPU, so a peer sharing this core (more
/// processes than cores, as in a three-domain path on two cores) can run.
pub fn spin_pause(spins: u32) {
    if spins > 64 * 32 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}
