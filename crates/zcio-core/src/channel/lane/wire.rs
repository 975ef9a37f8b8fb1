//! The shared layout of a lane: one control segment (a header line, the
//! message ring, the notice ring) that both ends map read-write, and one
//! data region of fixed-size slots that only the sender can write.
//!
//! Everything here is decoded from bytes a peer wrote: a header is copied
//! out once and validated, and a descriptor or notice is checked against
//! the slot count and slot size before anything uses it.

use crate::channel::spsc::{ring_bytes, Pod, RingEntry, RingHeader};

/// Magic number at the start of a lane's control segment ("ZCIOLANE").
pub const LANE_MAGIC: u64 = u64::from_le_bytes(*b"ZCIOLANE");
/// Layout version of the lane's control segment.
pub const LANE_VERSION: u32 = 1;
/// Most slots a lane may have.
pub const MAX_SLOTS: u32 = 1 << 16;
/// Largest slot (and so message) a lane may carry, in bytes.
pub const MAX_SLOT_SIZE: u64 = 1 << 30;
/// Largest control segment a receiver maps (two rings of [`MAX_SLOTS`]
/// 16-byte slots and the header fit easily).
pub const MAX_SEGMENT_LEN: u64 = 4 << 20;
/// Slots start at multiples of this many bytes: two cache lines, so the
/// slot the sender fills and the one the receiver reads never share a line
/// nor an adjacent-line prefetch pair (x86 CPUs fetch lines in aligned
/// pairs).
pub const SLOT_ALIGN: u64 = 128;
/// Offset of the sender's *closed* word in the segment
/// ([`LaneHeader::closed`]`[0]`, accessed only atomically once shared).
pub const SENDER_CLOSED: usize = std::mem::offset_of!(LaneHeader, closed);
/// Offset of the receiver's *closed* word (see [`SENDER_CLOSED`]).
pub const RECEIVER_CLOSED: usize = SENDER_CLOSED + 8;

/// One message on the lane's message ring: which slot holds it and how
/// long it is (16 bytes with its sequence word: four per cache line).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneDesc {
    /// Slot index, `< slots`.
    pub slot: u32,
    /// Length in bytes, `<= slot_size`.
    pub len: u32,
}

/// One release on the lane's notice ring: the receiver dropped the message
/// in `slot`, which the sender may fill again.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneNotice {
    /// Slot index, `< slots`.
    pub slot: u32,
    /// Zero when written; ignored when read.
    pub reserved: u32,
}

// SAFETY: repr(C) structs of integers only; every bit pattern is valid.
unsafe impl Pod for LaneDesc {}
// SAFETY: repr(C) structs of integers only; every bit pattern is valid.
unsafe impl Pod for LaneNotice {}

/// Header of a lane's control segment (one cache line), followed by the
/// message ring and the notice ring at offsets computed from
/// `ring_entries`.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct LaneHeader {
    /// [`LANE_MAGIC`].
    pub magic: u64,
    /// [`LANE_VERSION`].
    pub version: u32,
    /// Slots in the data region (1..=[`MAX_SLOTS`]).
    pub slots: u32,
    /// Bytes a slot holds at most (1..=[`MAX_SLOT_SIZE`]).
    pub slot_size: u64,
    /// Entries per ring: the smallest power of two `>= max(slots, 8)`.
    pub ring_entries: u32,
    /// Zero.
    pub reserved0: u32,
    /// Total segment length in bytes.
    pub total_len: u64,
    /// The *closed* words of the sender and the receiver
    /// ([`SENDER_CLOSED`]); 0 when the segment is created.
    pub closed: [u64; 2],
    /// Zero.
    pub reserved1: u64,
}

// SAFETY: repr(C) integers only.
unsafe impl Pod for LaneHeader {}

const _: () = {
    assert!(std::mem::size_of::<LaneDesc>() == 8);
    assert!(std::mem::size_of::<LaneNotice>() == 8);
    assert!(std::mem::size_of::<RingEntry<LaneDesc>>() == 16);
    assert!(std::mem::size_of::<RingEntry<LaneNotice>>() == 16);
    assert!(std::mem::size_of::<LaneHeader>() == 64);
    assert!(std::mem::offset_of!(LaneHeader, slot_size) == 16);
    assert!(std::mem::offset_of!(LaneHeader, total_len) == 32);
    assert!(SENDER_CLOSED == 40 && RECEIVER_CLOSED == 48);
};

/// Where everything of one lane lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneLayout {
    /// Slots in the data region.
    pub slots: u32,
    /// Bytes a slot holds at most.
    pub slot_size: u64,
    /// Distance between slots in the data region: `slot_size` rounded up to
    /// [`SLOT_ALIGN`].
    pub stride: u64,
    /// Entries per ring.
    pub ring_entries: u32,
    /// Offset of the message ring's header in the segment.
    pub msg_ring: usize,
    /// Offset of the notice ring's header.
    pub notice_ring: usize,
    /// Segment length, whole pages.
    pub total_len: usize,
    /// Data region length, whole pages (`slots × stride`, rounded up).
    pub data_len: usize,
}

impl LaneLayout {
    /// The layout of a lane of `slots` slots of `slot_size` bytes; `None`
    /// outside 1..=[`MAX_SLOTS`] and 1..=[`MAX_SLOT_SIZE`].
    pub fn new(slots: u32, slot_size: u64) -> Option<Self> {
        if !(1..=MAX_SLOTS).contains(&slots) || !(1..=MAX_SLOT_SIZE).contains(&slot_size) {
            return None;
        }
        let stride = slot_size.checked_add(SLOT_ALIGN - 1)? & !(SLOT_ALIGN - 1);
        let data = usize::try_from(stride.checked_mul(u64::from(slots))?).ok()?;
        let ring_entries = slots.next_power_of_two().max(8);
        let align = |v: usize| (v + 63) & !63;
        let msg_ring = std::mem::size_of::<LaneHeader>();
        let notice_ring = align(msg_ring + ring_bytes::<LaneDesc>(ring_entries as usize));
        let end = align(notice_ring + ring_bytes::<LaneNotice>(ring_entries as usize));
        Some(Self {
            slots,
            slot_size,
            stride,
            ring_entries,
            msg_ring,
            notice_ring,
            total_len: crate::sys::round_to_pages(end)?,
            data_len: crate::sys::round_to_pages(data)?,
        })
    }

    /// The header the sender writes for this layout.
    pub fn header(&self) -> LaneHeader {
        LaneHeader {
            magic: LANE_MAGIC,
            version: LANE_VERSION,
            slots: self.slots,
            slot_size: self.slot_size,
            ring_entries: self.ring_entries,
            reserved0: 0,
            total_len: self.total_len as u64,
            closed: [0; 2],
            reserved1: 0,
        }
    }

    /// The layout a (copied-out) header describes, if it is valid and its
    /// segment fits in `actual_len` bytes.
    pub fn from_header(h: &LaneHeader, actual_len: u64) -> Option<Self> {
        if h.magic != LANE_MAGIC || h.version != LANE_VERSION {
            return None;
        }
        let l = Self::new(h.slots, h.slot_size)?;
        (l.ring_entries == h.ring_entries
            && l.total_len as u64 == h.total_len
            && h.total_len <= actual_len)
            .then_some(l)
    }

    /// Offset of the entry array of the ring whose header is at `ring`.
    pub fn entries(ring: usize) -> usize {
        ring + std::mem::size_of::<RingHeader>()
    }

    /// Byte offset of `slot` in the data region (`slot < slots`).
    pub fn slot_offset(&self, slot: u32) -> usize {
        // slot < slots, so the product is below data_len (checked in `new`).
        (u64::from(slot) * self.stride) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_aligned_bounded_and_round_trip_through_the_header() {
        let l = LaneLayout::new(6, 100).unwrap();
        assert_eq!((l.ring_entries, l.stride), (8, 128));
        assert_eq!(LaneLayout::new(2, 129).unwrap().stride, 256);
        assert_eq!(l.msg_ring % 64, 0);
        assert_eq!(l.notice_ring % 64, 0);
        assert!(LaneLayout::entries(l.notice_ring) + 8 * 16 <= l.total_len);
        assert_eq!(l.total_len % crate::sys::page_size(), 0);
        assert!(l.data_len >= 6 * 128);
        assert_eq!(l.slot_offset(5), 640);
        let h = l.header();
        assert_eq!(LaneLayout::from_header(&h, l.total_len as u64), Some(l));
        assert_eq!(LaneLayout::from_header(&h, l.total_len as u64 - 1), None);
        let mut bad = h;
        bad.ring_entries = 16;
        assert_eq!(LaneLayout::from_header(&bad, 1 << 20), None);
        bad = h;
        bad.version = 7;
        assert_eq!(LaneLayout::from_header(&bad, 1 << 20), None);
        assert!(LaneLayout::new(0, 64).is_none());
        assert!(LaneLayout::new(MAX_SLOTS + 1, 64).is_none());
        assert!(LaneLayout::new(1, MAX_SLOT_SIZE + 1).is_none());
        assert!(LaneLayout::new(1, 0).is_none());
        let big = LaneLayout::new(MAX_SLOTS, 64).unwrap();
        assert!(big.total_len as u64 <= MAX_SEGMENT_LEN);
    }
}
