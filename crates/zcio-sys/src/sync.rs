//! The one place zcio takes its atomics from.
//!
//! Under `cfg(loom)` the atomics are loom's model-checked ones and the
//! futex operations become yields, so the shared-memory protocols of the
//! channel, ring and rendezvous (in zcio-core) can be model-checked with
//! the exact code that runs in production. Everything that orders memory between processes
//! imports from here.
//!
//! Under Miri (`scripts/miri`) the atomics are std's and the futex
//! operations go to a model of the kernel's futex in this process
//! (`miri_futex`), not to Miri's own `futex` shim: that shim reads the
//! futex word as a 4-byte atomic, and our futex word is the low half of a
//! `u64` the protocols update with 8-byte atomics (see `low_half`), so
//! every sleep that races with a publish would be reported as a mixed-size
//! atomic race — an access the kernel makes outside Rust's memory model,
//! not one zcio's Rust code makes.

#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

// Process-local statistics counters and id generators (Relaxed, never used
// to order other memory) use std atomics directly; everything that orders
// memory between threads or processes comes from here.

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use std::time::Duration;

/// The futex word of a 64-bit tail/head word: its low 32 bits (the ring
/// protocol keeps a flag and the low counter bits there, see
/// `channel::ring`). Only the kernel reads it through this view.
#[cfg(not(any(loom, miri)))]
fn low_half(word: &AtomicU64) -> &AtomicU32 {
    const _: () = assert!(
        cfg!(target_endian = "little"),
        "the futex word is the low half of a u64"
    );
    // An AtomicU64 is 8-byte aligned, so its first 4 bytes are an
    // aligned u32 location inside the same live object, and on little-endian
    // targets they are its low 32 bits. No Rust code performs a 32-bit
    // access through this reference: it is only handed to the futex system
    // call, which compares and waits in the kernel.
    // SAFETY: as argued just above.
    unsafe { &*word.as_ptr().cast::<AtomicU32>() }
}

/// The kernel's futex on the low half of a 64-bit word.
#[cfg(not(any(loom, miri)))]
mod kernel {
    use super::{low_half, AtomicU32, AtomicU64};
    pub(super) use crate::sys::futex::Wake;
    use std::time::Duration;

    pub(super) fn wait(word: &AtomicU64, expected: u32, timeout: Duration) -> Wake {
        crate::sys::futex::wait(low_half(word), expected, timeout)
    }

    pub(super) fn wait_any(words: &[(&AtomicU64, u32)], timeout: Duration) -> Wake {
        let halves: smallvec::SmallVec<[(&AtomicU32, u32); 8]> =
            words.iter().map(|(w, v)| (low_half(w), *v)).collect();
        crate::sys::futex::wait_any(&halves, timeout)
    }

    pub(super) fn wake(word: &AtomicU64, n: u32) -> usize {
        crate::sys::futex::wake(low_half(word), n)
    }
}

#[cfg(all(miri, not(loom)))]
use miri_futex as kernel;

/// Sleep while the low 32 bits of `word` equal `expected`, at most
/// `timeout`. Returns `true` when the wait ended early.
#[cfg(not(loom))]
pub fn futex_wait(word: &AtomicU64, expected: u32, timeout: Duration) -> bool {
    !matches!(
        kernel::wait(word, expected, timeout),
        kernel::Wake::TimedOut
    )
}

/// Wake the sleepers on `word`.
#[cfg(not(loom))]
pub fn futex_wake(word: &AtomicU64) {
    kernel::wake(word, i32::MAX as u32);
}

/// Wake the sleepers on `word`; returns how many the kernel woke (0: the
/// flag that asked for the wake was not backed by a sleeper).
#[cfg(not(loom))]
pub fn futex_wake_counted(word: &AtomicU64) -> usize {
    kernel::wake(word, i32::MAX as u32)
}

/// Wake one sleeper on `word` (for wake chains: each woken sleeper wakes
/// the next, so the waker's cost does not grow with the number of sleepers).
#[cfg(not(loom))]
pub fn futex_wake_one(word: &AtomicU64) {
    kernel::wake(word, 1);
}

/// Like [`futex_wait`], but says whether this thread really slept and was
/// woken (`true`) rather than timing out or finding the word changed.
#[cfg(not(loom))]
pub fn futex_wait_woken(word: &AtomicU64, expected: u32, timeout: Duration) -> bool {
    matches!(kernel::wait(word, expected, timeout), kernel::Wake::Woken)
}

/// Sleep until any of `words` is woken or changed (bounded by `timeout`).
#[cfg(not(loom))]
pub fn futex_wait_any(words: &[(&AtomicU64, u32)], timeout: Duration) -> bool {
    !matches!(kernel::wait_any(words, timeout), kernel::Wake::TimedOut)
}

/// The kernel's futex, modelled in this process for Miri (see the module
/// docs for why Miri's own futex cannot be used on our words). As in the
/// kernel, the value check and the sleep happen under one lock (the
/// hash-bucket lock) that a wake also takes, so a wake that follows a
/// change of the word cannot fall between a sleeper's check and its sleep;
/// every access to a word is an 8-byte atomic one. A wake wakes every
/// sleeper of the word (futex callers re-check their condition, so an extra
/// wakeup is harmless) and reports how many slept.
#[cfg(all(miri, not(loom)))]
mod miri_futex {
    use super::{AtomicU64, Ordering};
    use std::sync::{Condvar, Mutex, MutexGuard};
    use std::time::{Duration, Instant};

    /// Why a wait returned (as `crate::sys::futex::Wake`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) enum Wake {
        Woken,
        Changed,
        TimedOut,
    }

    /// A word someone sleeps on: its address, how many sleep on it, and
    /// how many wakes it has had since the first of them slept.
    struct Sleepers {
        addr: usize,
        count: usize,
        wakes: u64,
    }

    static BUCKET: Mutex<Vec<Sleepers>> = Mutex::new(Vec::new());
    static WOKEN: Condvar = Condvar::new();

    fn lock() -> MutexGuard<'static, Vec<Sleepers>> {
        BUCKET.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn addr(word: &AtomicU64) -> usize {
        word.as_ptr().addr()
    }

    pub(super) fn wait(word: &AtomicU64, expected: u32, timeout: Duration) -> Wake {
        wait_any(&[(word, expected)], timeout)
    }

    pub(super) fn wait_any(words: &[(&AtomicU64, u32)], timeout: Duration) -> Wake {
        let deadline = Instant::now().checked_add(timeout);
        let mut g = lock();
        // SYNC: SeqCst, as the kernel's check is ordered with the waker's
        // change of the word by the bucket lock and a full barrier.
        if words
            .iter()
            .any(|(w, v)| w.load(Ordering::SeqCst) as u32 != *v)
        {
            return Wake::Changed;
        }
        let mut seen = Vec::with_capacity(words.len());
        for (w, _) in words {
            let a = addr(w);
            let at = match g.iter().position(|s| s.addr == a) {
                Some(i) => i,
                None => {
                    g.push(Sleepers {
                        addr: a,
                        count: 0,
                        wakes: 0,
                    });
                    g.len() - 1
                }
            };
            g[at].count += 1;
            seen.push((a, g[at].wakes));
        }
        let woken = |g: &[Sleepers]| {
            seen.iter()
                .any(|&(a, n)| g.iter().any(|s| s.addr == a && s.wakes != n))
        };
        let why = loop {
            if woken(&g) {
                break Wake::Woken;
            }
            let left = match deadline {
                None => Duration::from_secs(3600),
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => break Wake::TimedOut,
                },
            };
            g = WOKEN
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        for &(a, _) in &seen {
            if let Some(i) = g.iter().position(|s| s.addr == a) {
                g[i].count -= 1;
                if g[i].count == 0 {
                    g.swap_remove(i);
                }
            }
        }
        why
    }

    pub(super) fn wake(word: &AtomicU64, n: u32) -> usize {
        let a = addr(word);
        let mut g = lock();
        match g.iter_mut().find(|s| s.addr == a) {
            Some(s) => {
                s.wakes += 1;
                WOKEN.notify_all();
                s.count.min(n as usize)
            }
            None => 0,
        }
    }
}

// Under loom a futex is modelled as the kernel implements it: the value
// check and the sleep happen under one lock (the hash-bucket lock), and a
// wake takes the same lock. The model ignores timeouts, so a protocol that
// needs a timeout to make progress shows up as a loom deadlock.
#[cfg(loom)]
loom::lazy_static! {
    static ref FUTEX: (loom::sync::Mutex<()>, loom::sync::Condvar) =
        (loom::sync::Mutex::new(()), loom::sync::Condvar::new());
}

/// Loom model of `FUTEX_WAIT` on the low half of `word` (untimed).
#[cfg(loom)]
pub fn futex_wait(word: &AtomicU64, expected: u32, timeout: Duration) -> bool {
    futex_wait_any(&[(word, expected)], timeout)
}

/// Loom model of `futex_waitv` (untimed).
#[cfg(loom)]
pub fn futex_wait_any(words: &[(&AtomicU64, u32)], _timeout: Duration) -> bool {
    let (m, cv) = &*FUTEX;
    let g = m.lock().unwrap();
    if words
        .iter()
        .any(|(w, v)| w.load(Ordering::SeqCst) as u32 != *v)
    {
        return true;
    }
    drop(cv.wait(g).unwrap());
    true
}

/// Loom model of `FUTEX_WAKE`.
#[cfg(loom)]
pub fn futex_wake(_word: &AtomicU64) {
    let (m, cv) = &*FUTEX;
    let _g = m.lock().unwrap();
    cv.notify_all();
}

/// Loom model of [`futex_wake_counted`]: the model cannot tell whether a
/// sleeper was woken, so it reports one (never a futile wake).
#[cfg(loom)]
pub fn futex_wake_counted(word: &AtomicU64) -> usize {
    futex_wake(word);
    1
}

/// Loom model of waking one sleeper. The model's one condition variable is
/// shared by all words, so waking "one" could pick a sleeper of another
/// word; it wakes all instead (every woken sleeper re-checks, so this only
/// adds spurious wakeups — it cannot hide a protocol that forgets to wake).
#[cfg(loom)]
pub fn futex_wake_one(word: &AtomicU64) {
    futex_wake(word);
}

/// Loom model of [`futex_wait_woken`] (untimed, so always woken).
#[cfg(loom)]
pub fn futex_wait_woken(word: &AtomicU64, expected: u32, timeout: Duration) -> bool {
    futex_wait(word, expected, timeout)
}
