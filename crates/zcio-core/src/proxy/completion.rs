//! A one-shot completion cell: the per-message status behind [`Ticket`]
//! and the slot a receive handle is filled through.
//!
//! The value sits under a mutex; the state word says whether it is there and
//! whether anyone sleeps on it, so completing costs a futex wake only when a
//! waiter actually sleeps (most tickets are never waited on).
//!
//! [`Ticket`]: super::Ticket

use std::cell::Cell;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::{AtomicU64, Ordering};
use crate::wait::{wait_ready, Readiness, SpinBudget, SpinPolicy, Waited};

thread_local! {
    /// This thread's spin budget for completion waits: a cell lives for one
    /// message, so what spinning is worth is learned across the waits of
    /// the thread that collects them (as a channel end learns across its
    /// receives).
    static BUDGET: Cell<Option<SpinBudget>> = const { Cell::new(None) };
}

/// Low bits of the state word (the futex word is its low half).
const DONE: u64 = 1;
const WAITING: u64 = 2;

/// A value delivered once by one thread and collected by another.
pub(crate) struct Completion<T> {
    state: AtomicU64,
    value: Mutex<Option<T>>,
}

impl<T> Completion<T> {
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicU64::new(0),
            value: Mutex::new(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<T>> {
        self.value.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Deliver `v`. Only the first call counts; later ones give `v` back.
    pub(crate) fn complete(&self, v: T) -> Result<(), T> {
        {
            let mut g = self.lock();
            if self.is_done() {
                return Err(v);
            }
            *g = Some(v);
            // SYNC: published under the value lock; the Release pairs with the
            // Acquire in `is_done`/`wait`, which then take the lock anyway.
            let old = self.state.fetch_or(DONE, Ordering::AcqRel);
            if old & WAITING == 0 {
                return Ok(());
            }
        }
        crate::sync::futex_wake(&self.state);
        Ok(())
    }

    /// Whether a value was delivered (it may already have been taken).
    pub(crate) fn is_done(&self) -> bool {
        // SYNC: pairs with the Release in `complete`.
        self.state.load(Ordering::Acquire) & DONE != 0
    }

    /// Take the value if it is there.
    pub(crate) fn take(&self) -> Option<T> {
        self.lock().take()
    }

    /// Look at the value without taking it.
    pub(crate) fn peek<R>(&self, f: impl FnOnce(Option<&T>) -> R) -> R {
        f(self.lock().as_ref())
    }

    /// Wait until a value is delivered, at most `timeout` (`None`, or one
    /// too long for `Instant`: no bound). Returns whether it was delivered.
    pub(crate) fn wait(&self, timeout: Option<Duration>) -> bool {
        if self.is_done() {
            return true;
        }
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        // Spin first, as every waiter does (`crate::wait`; yielding after a
        // few microseconds, so a proxy that shares our CPU gets to run): a
        // proxy handing over a message usually finishes within
        // microseconds, and a futex sleep costs a wake system call plus a
        // reschedule on the other side.
        let policy = SpinPolicy::current();
        let mut budget = BUDGET
            .get()
            .filter(|b| b.max() == policy.max)
            .unwrap_or_else(|| policy.budget());
        let done = wait_ready(&mut &*self, &mut budget, deadline) == Waited::Ready;
        BUDGET.set(Some(budget));
        done
    }
}

/// The cell as the one wait loop (`crate::wait::wait_ready`) sees it: done,
/// the waiting flag beside it in the state word, a futex wait on that word.
/// The completer lives in this process (no liveness to check).
impl<T> Readiness for &Completion<T> {
    fn is_ready(&mut self) -> bool {
        self.is_done()
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        // SYNC: the RMW sets our flag and returns the latest state; the
        // completer's `fetch_or` sees the flag or we see DONE.
        let s = self.state.fetch_or(WAITING, Ordering::AcqRel);
        (s & DONE == 0).then_some((s | WAITING) as u32)
    }

    fn sleep(&mut self, armed: u32, slice: Duration) {
        crate::sync::futex_wait(&self.state, armed, slice);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn complete_once_and_wait_across_threads() {
        let c = Arc::new(Completion::new());
        assert!(!c.wait(Some(Duration::ZERO)));
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            c2.complete(7u32).unwrap();
            c2.complete(8).unwrap_err()
        });
        assert!(c.wait(Some(Duration::from_secs(10))));
        assert_eq!(t.join().unwrap(), 8, "the second value comes back");
        assert_eq!(c.peek(|v| v.copied()), Some(7));
        assert_eq!(c.take(), Some(7));
        assert!(c.is_done());
        assert_eq!(c.take(), None);
    }
}
