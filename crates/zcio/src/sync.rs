//! The one place zcio takes its atomics from.
//!
//! Under `cfg(loom)` the atomics are loom's model-checked ones and the
//! futex operations become yields, so the ring protocols in
//! [`crate::channel::ring`] can be model-checked with the exact code that
//! runs in production. Everything that orders memory between processes
//! imports from here.

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
#[cfg(not(loom))]
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

/// Sleep while the low 32 bits of `word` equal `expected`, at most
/// `timeout`. Returns `true` when the wait ended early.
#[cfg(not(loom))]
pub fn futex_wait(word: &AtomicU64, expected: u32, timeout: Duration) -> bool {
    !matches!(
        crate::sys::futex::wait(low_half(word), expected, timeout),
        crate::sys::futex::Wake::TimedOut
    )
}

/// Wake the sleepers on `word`.
#[cfg(not(loom))]
pub fn futex_wake(word: &AtomicU64) {
    crate::sys::futex::wake(low_half(word), i32::MAX as u32);
}

/// Wake the sleepers on `word`; returns how many the kernel woke (0: the
/// flag that asked for the wake was not backed by a sleeper).
#[cfg(not(loom))]
pub fn futex_wake_counted(word: &AtomicU64) -> usize {
    crate::sys::futex::wake(low_half(word), i32::MAX as u32)
}

/// Wake one sleeper on `word` (for wake chains: each woken sleeper wakes
/// the next, so the waker's cost does not grow with the number of sleepers).
#[cfg(not(loom))]
pub fn futex_wake_one(word: &AtomicU64) {
    crate::sys::futex::wake(low_half(word), 1);
}

/// Like [`futex_wait`], but says whether this thread really slept and was
/// woken (`true`) rather than timing out or finding the word changed.
#[cfg(not(loom))]
pub fn futex_wait_woken(word: &AtomicU64, expected: u32, timeout: Duration) -> bool {
    matches!(
        crate::sys::futex::wait(low_half(word), expected, timeout),
        crate::sys::futex::Wake::Woken
    )
}

/// Sleep until any of `words` is woken or changed (bounded by `timeout`).
#[cfg(not(loom))]
pub fn futex_wait_any(words: &[(&AtomicU64, u32)], timeout: Duration) -> bool {
    let halves: smallvec::SmallVec<[(&AtomicU32, u32); 8]> =
        words.iter().map(|(w, v)| (low_half(w), *v)).collect();
    !matches!(
        crate::sys::futex::wait_any(&halves, timeout),
        crate::sys::futex::Wake::TimedOut
    )
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
