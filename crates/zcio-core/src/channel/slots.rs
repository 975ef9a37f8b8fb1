//! The channel's small-message slots: the sending end's own fixed-size
//! slots in one region (read-only for the receiver), into which `send`
//! copies a message that fits one, instead of lending the message's buffer.
//!
//! For a message of a few KiB a copy into a warm slot costs less than
//! lending the buffer by reference (a ledger entry keeping the buffer
//! alive, the pool waiting for the receiver's notice before it can hand the
//! buffer out again, the region looked up per message): the message's own
//! buffer goes back to its pool at once, still warm, and the slot comes
//! back by the same notice a lent buffer would. The descriptor travels on
//! the channel's one message ring, so order is kept with messages sent by
//! reference, and the receiver sees an ordinary slice of an announced
//! region: everything a received message can do (forward, split, hold)
//! works unchanged.
//!
//! A slot is named in the ledger like any lent slice, so the peer's
//! holdings, hold limits and the end of a peer (a slot it held is never
//! reused: see `ledger.rs`) follow the one set of rules.

use std::sync::Arc;

use crate::buf::Fbuf;
use crate::region::{Ownership, Region};

/// The slots of one sending end, made on the first message that fits one.
pub(crate) enum Slots {
    /// No message fitted yet (nothing allocated).
    Unmade,
    /// The slots, announced to the peer.
    Made(SlotArea),
    /// Turned off by the configuration, or making them failed: every
    /// message goes by reference.
    Off,
}

pub(crate) struct SlotArea {
    region: Arc<Region>,
    /// The region's slot on this channel (what descriptors name).
    pub region_slot: u32,
    size: usize,
    stride: usize,
    /// Free slots, the most recently returned last (handed out first: the
    /// slots in use stay few and warm in the caches).
    free: Vec<u32>,
}

/// Slots start at multiples of this many bytes: two cache lines, so two
/// slots never share a line nor an adjacent-line prefetch pair.
const SLOT_ALIGN: usize = 128;

impl SlotArea {
    /// A region of `count` slots of `size` bytes (not yet announced).
    pub fn create(count: u32, size: usize) -> Option<(Arc<Region>, usize)> {
        let stride = size.checked_next_multiple_of(SLOT_ALIGN)?;
        let len = stride
            .checked_mul(count as usize)?
            .checked_next_multiple_of(crate::sys::page_size())?;
        let region = Region::create("zcio-slots", len, true).ok()?;
        Some((Arc::new(region), stride))
    }

    pub fn new(
        region: Arc<Region>,
        region_slot: u32,
        count: u32,
        size: usize,
        stride: usize,
    ) -> Self {
        Self {
            region,
            region_slot,
            size,
            stride,
            free: (0..count).rev().collect(),
        }
    }

    /// Copy `len` bytes of `buf` from `offset` into a free slot; `None`
    /// when every slot is in flight. Returns the slot and its byte offset
    /// in the region.
    pub fn fill(&mut self, buf: &Fbuf, offset: usize, len: usize) -> Option<(u32, u64)> {
        debug_assert!(len <= self.size);
        let slot = self.free.pop()?;
        let at = slot as usize * self.stride;
        let src = buf.view().slice(offset, len)?;
        debug_assert_eq!(self.region.ownership(), Ownership::Owned);
        // [at, at + len) lies inside the region (slot < count, stride >=
        // size >= len, region len >= count × stride), which this process
        // created and maps read-write; the peer holds only a read-only fd.
        // The slot is off the free list, i.e. not in flight: the receiver
        // released it (its notice came back), so nobody reads it while it
        // changes — and a peer that still did would read bytes it may not
        // rely on anyway (a received slice is volatile).
        // SAFETY: as argued just above.
        let dst = unsafe { std::slice::from_raw_parts_mut(self.region.base().add(at), len) };
        match src.as_slice() {
            // Our own frozen buffer: nobody can change it, a plain copy.
            Some(bytes) => dst.copy_from_slice(bytes),
            None => {
                src.read_at(0, dst);
            }
        }
        Some((slot, at as u64))
    }

    /// The peer released `slot`: it may be filled again.
    pub fn put_back(&mut self, slot: u32) {
        self.free.push(slot);
    }
}
