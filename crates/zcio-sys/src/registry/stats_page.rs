//! [`StatsPage`]: the live statistics counters of one object, kept where
//! tools read them — in the statistics page of the object's registry
//! entry, or in a process-local page when it has no entry (an in-process
//! pair, a refused run directory). The hot path writes them with a plain
//! load and store (one writer per counter) or, for a counter several
//! threads of the owner write, a process-local `fetch_add`; nothing is
//! shared with the peer, and tools map the page read-only.
//!
//! Which index means what is [`super::schema`].

use std::ptr::NonNull;
// SYNC: statistics only (Relaxed, never used to order other memory), so
// std atomics directly, as `crate::sync` prescribes for counters; the
// partner of every store here is a tool's Relaxed load in `read_entry`.
use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::{Kind, STATS_COUNT, STATS_OFFSET};
use super::{register_quietly, Registration};

/// The live counters of one object (see the module docs).
pub struct StatsPage {
    words: NonNull<AtomicU64>,
    _backing: Backing,
}

enum Backing {
    /// The page of a registry entry (mapped for as long as this lives).
    Entry(Registration),
    /// A process-local page: `STATS_COUNT` atomics leaked from a box
    /// (`words` points to them) and boxed again on drop. Kept as a raw
    /// pointer, not a `Box`: moving a `Box` asserts it is unique, which
    /// would invalidate `words` under Rust's aliasing rules (Miri's
    /// Stacked Borrows).
    Local,
}

impl Drop for StatsPage {
    fn drop(&mut self) {
        if let Backing::Local = self._backing {
            let words = std::ptr::slice_from_raw_parts_mut(self.words.as_ptr(), STATS_COUNT);
            // SAFETY: `words` came from `Box::into_raw` of a boxed slice
            // of STATS_COUNT atomics in `local`, and is boxed again only
            // here, once; no reference to it outlives `self`.
            drop(unsafe { Box::from_raw(words) });
        }
    }
}

// SAFETY: `words` points into `_backing`, which is Send and Sync (a mapping
// or a boxed slice of atomics) and lives as long as the page; every access
// through it is atomic.
unsafe impl Send for StatsPage {}
// SAFETY: as for Send: shared access is atomic only.
unsafe impl Sync for StatsPage {}

impl std::fmt::Debug for StatsPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsPage")
            .field("registered", &self.entry().map(Registration::path))
            .finish()
    }
}

impl StatsPage {
    /// Register an object of `kind` named `name` with permission bits
    /// `mode` (the object's own) and keep its counters in the entry; a
    /// process-local page if the registry refuses (counted in
    /// [`super::failures`]). `start`: `(index, value)` pairs to begin with.
    pub fn register(kind: Kind, name: &str, mode: u32, start: &[(usize, u64)]) -> StatsPage {
        match register_quietly(kind, name, mode, start) {
            Some(r) => Self::from_entry(r),
            None => {
                let page = Self::local();
                for &(i, v) in start {
                    page.set(i, v);
                }
                page
            }
        }
    }

    /// The counters of the entry `r` (its page as it is).
    pub fn from_entry(r: Registration) -> StatsPage {
        let words = NonNull::new(r.stats_ptr()).expect("a mapping is never at address 0");
        StatsPage {
            words,
            _backing: Backing::Entry(r),
        }
    }

    /// A process-local page (an object tools do not see).
    pub fn local() -> StatsPage {
        let b: Box<[AtomicU64]> = (0..STATS_COUNT).map(|_| AtomicU64::new(0)).collect();
        let words =
            NonNull::new(Box::into_raw(b).cast::<AtomicU64>()).expect("a box is never null");
        StatsPage {
            words,
            _backing: Backing::Local,
        }
    }

    /// The registry entry holding the counters, if there is one.
    pub fn entry(&self) -> Option<&Registration> {
        match &self._backing {
            Backing::Entry(r) => Some(r),
            Backing::Local => None,
        }
    }

    /// Take the entry out of the listing now (see
    /// [`Registration::withdraw`]); the counters stay writable.
    pub fn withdraw(&self) {
        if let Some(r) = self.entry() {
            r.withdraw();
        }
    }

    /// Counter `index` (panics past [`STATS_COUNT`]: indices are the
    /// schema's constants).
    #[inline]
    pub fn word(&self, index: usize) -> &AtomicU64 {
        assert!(index < STATS_COUNT, "statistics index {index} out of range");
        // `words` points to STATS_COUNT aligned atomics that live as long
        // as `self` (the entry's mapping or the box), `index` is in range,
        // and the words are only ever accessed atomically.
        // SAFETY: as argued just above.
        unsafe { &*self.words.as_ptr().add(index) }
    }

    /// Add `n` to a counter this thread is the only writer of (it holds
    /// the lock every writer takes): a load and a store, no
    /// read-modify-write.
    #[inline]
    pub fn add(&self, index: usize, n: u64) {
        let w = self.word(index);
        // SYNC: Relaxed; one writer (see above); partner: tools' loads.
        w.store(w.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Add `n` to a counter several threads of this process write: a
    /// process-local read-modify-write (the peer never writes this page).
    #[inline]
    pub fn add_shared(&self, index: usize, n: u64) {
        // SYNC: Relaxed statistics; partner: tools' loads.
        self.word(index).fetch_add(n, Ordering::Relaxed);
    }

    /// Set a gauge.
    #[inline]
    pub fn set(&self, index: usize, v: u64) {
        // SYNC: Relaxed; partner: tools' loads.
        self.word(index).store(v, Ordering::Relaxed);
    }

    /// Counter `index` now.
    #[inline]
    pub fn get(&self, index: usize) -> u64 {
        // SYNC: Relaxed; partner: the stores above.
        self.word(index).load(Ordering::Relaxed)
    }
}

impl Registration {
    /// The first counter of the entry's statistics page.
    fn stats_ptr(&self) -> *mut AtomicU64 {
        const _: () = assert!(STATS_OFFSET.is_multiple_of(8));
        // The mapping is ENTRY_LEN = STATS_OFFSET + 8 * STATS_COUNT bytes
        // and page-aligned, so the offset is in bounds and 8-aligned.
        // SAFETY: as argued just above.
        unsafe { self.map.as_ptr().add(STATS_OFFSET).cast::<AtomicU64>() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::schema::channel;
    use crate::registry::{RunDir, State};

    #[test]
    fn a_local_page_counts() {
        let p = StatsPage::local();
        assert!(p.entry().is_none());
        p.add(channel::SENT_MESSAGES, 2);
        p.add_shared(channel::WAKES, 3);
        p.set(channel::HOLDING_BUFFERS, 7);
        assert_eq!(p.get(channel::SENT_MESSAGES), 2);
        assert_eq!(p.get(channel::WAKES), 3);
        assert_eq!(p.get(channel::HOLDING_BUFFERS), 7);
    }

    #[test]
    #[cfg_attr(miri, ignore = "files and mmap")]
    fn a_registered_page_is_what_the_lister_reads() {
        let dir = std::env::temp_dir().join(format!("zcio-statspage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let Ok(run) = RunDir::open(&dir) else {
            eprintln!("skipped: the run directory {} was refused", dir.display());
            return;
        };
        let p = StatsPage::from_entry(run.register(Kind::Channel, "page-test", 0o600).unwrap());
        p.set(channel::SENT_BYTES, 5);
        p.add(channel::SENT_MESSAGES, 41);
        p.add(channel::SENT_MESSAGES, 1);
        let l = RunDir::open(&dir).unwrap().list().unwrap();
        let e = l.entries.iter().find(|e| e.name == "page-test").unwrap();
        assert_eq!(e.state, State::Live);
        assert_eq!(e.stats[channel::SENT_MESSAGES], 42);
        assert_eq!(e.stats[channel::SENT_BYTES], 5);
        drop(p);
        assert!(RunDir::open(&dir)
            .unwrap()
            .list()
            .unwrap()
            .entries
            .is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
