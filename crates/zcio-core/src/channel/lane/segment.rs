//! A lane's control segment as both ends see it: the mapping, where its
//! rings are, and the two *closed* words.

use crate::channel::lane::wire::{LaneDesc, LaneLayout, LaneNotice};
use crate::channel::spsc::{RingEntry, RingHeader};
use crate::sync::{AtomicU64 as SharedU64, Ordering};
use crate::sys::mmap::Mapping;

/// The mapped control segment of one lane.
pub(crate) struct LaneSegment {
    map: Mapping,
    layout: LaneLayout,
}

impl LaneSegment {
    /// # Safety
    /// `map` is a mapping of at least `layout.total_len` bytes laid out as
    /// `layout` says (header written by the sender, or validated against
    /// `layout` by the receiver; rings zeroed at creation).
    pub(crate) unsafe fn new(map: Mapping, layout: LaneLayout) -> Self {
        Self { map, layout }
    }

    /// The message ring's header and slots.
    pub(crate) fn msg_ring(&self) -> (*const RingHeader, *mut RingEntry<LaneDesc>) {
        self.ring(self.layout.msg_ring)
    }

    /// The notice ring's header and slots.
    pub(crate) fn notice_ring(&self) -> (*const RingHeader, *mut RingEntry<LaneNotice>) {
        self.ring(self.layout.notice_ring)
    }

    fn ring<T>(&self, at: usize) -> (*const RingHeader, *mut RingEntry<T>) {
        let base = self.map.as_ptr();
        // The ring's header and its `ring_entries` slots lie inside the
        // mapping at 64-byte aligned offsets (LaneLayout::new; the mapping
        // is at least `total_len` bytes by `new`'s contract), so both
        // pointers stay in bounds.
        // SAFETY: as argued just above.
        unsafe {
            (
                base.add(at).cast(),
                base.add(LaneLayout::entries(at)).cast(),
            )
        }
    }

    /// A word in the header line.
    fn word(&self, offset: usize) -> &SharedU64 {
        // `offset` is one of the header's closed words (8-aligned, inside
        // the 64-byte header at the start of the page-aligned mapping),
        // accessed only atomically by both ends; the mapping lives as long
        // as `self`.
        // SAFETY: as argued just above.
        unsafe { &*self.map.as_ptr().add(offset).cast::<SharedU64>() }
    }

    /// Say that this end (its closed word at `mine`) is gone.
    pub(crate) fn close(&self, mine: usize) {
        // SYNC: Release pairs with the Acquire load in the other end's
        // `ended`: everything this end published before is visible with it.
        self.word(mine).store(1, Ordering::Release);
    }

    /// The other end (its closed word at `theirs`) dropped the lane.
    pub(crate) fn closed_by(&self, theirs: usize) -> bool {
        // SYNC: Acquire pairs with the Release store in the other end's
        // `close`: its last messages or notices are visible once this
        // reads 1.
        self.word(theirs).load(Ordering::Acquire) != 0
    }

    /// The mapping's address and length (zcio's own hostile-peer tests).
    #[cfg(any(test, feature = "internals"))]
    pub(crate) fn raw(&self) -> (*mut u8, usize) {
        (self.map.as_ptr(), self.map.len())
    }
}
