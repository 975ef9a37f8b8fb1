//! What travels between the two ends of a channel: the control records on
//! the Unix socket, the descriptors on the message rings, the notices on the
//! reverse rings, and the layout of the shared control segment.
//!
//! Everything here is decoded from bytes a peer wrote, so decoding never
//! trusts a field: every function returns `None`/an error on nonsense.

use crate::channel::spsc::{ring_bytes, Pod, RingEntry, RingHeader};

/// Magic number at the start of a channel control segment ("ZCIOCHAN").
pub const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"ZCIOCHAN");
/// Layout version of the control segment and of the socket protocol.
pub const LAYOUT_VERSION: u32 = 5;
/// Offset in the segment of the connector's *closed* word
/// ([`SegmentHeader::closed`]`[0]`, accessed only atomically once the
/// segment is shared): 0 while its end is open, 1 once it closed. Each
/// side writes only its own word and reads the peer's before every send,
/// so a closed peer is seen at once, without a system call (layout
/// version 3).
pub const CONNECTOR_CLOSED: usize = std::mem::offset_of!(SegmentHeader, closed);
/// Offset of the listener's *closed* word (see [`CONNECTOR_CLOSED`]).
pub const LISTENER_CLOSED: usize = CONNECTOR_CLOSED + 8;
/// Offset in the segment of the connector's *CPU* word
/// ([`SegmentHeader::cpus`]`[0]`, accessed only atomically once the
/// segment is shared): the CPU its end last sent or waited on, plus one. A
/// waiter whose peer last ran on its own CPU does not spin (the peer cannot
/// run while it does): it yields the CPU on every poll. A peer that lies
/// about it only changes how we poll for it.
pub const CONNECTOR_CPU: usize = std::mem::offset_of!(SegmentHeader, cpus);
/// Offset of the listener's *CPU* word (see [`CONNECTOR_CPU`]).
pub const LISTENER_CPU: usize = CONNECTOR_CPU + 8;
/// Region slot meaning "the next single-use region announced on the socket".
pub const SINGLE_USE_SLOT: u32 = u32::MAX;
/// Region slot meaning "the same single-use region as the previous
/// single-use slice of this message" (one pass per region per message).
pub const SINGLE_USE_SAME: u32 = u32::MAX - 1;
/// `size_of::<Desc>()`, recorded in the segment header and checked on
/// attach.
pub const DESC_SIZE: u32 = std::mem::size_of::<Desc>() as u32;
/// Cap on slices in one message: a `Msg`'s own cap.
pub const MAX_SLICES: usize = crate::msg::MAX_SLICES;
/// Cap on region slots per channel direction.
pub const MAX_REGION_SLOTS: u32 = 1 << 16;

/// One slice of a message on a message ring (56 bytes: with its sequence
/// word a slot is one cache line).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    /// Region slot announced on this channel, [`SINGLE_USE_SLOT`] or
    /// [`SINGLE_USE_SAME`].
    pub region: u32,
    /// On the first slice of a message: the message's slice count (1..=64).
    /// On the following slices: 0.
    pub count: u32,
    /// Byte offset of the slice in the region.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// The sender's ledger token for this slice; returned in a notice.
    pub token: u64,
    /// Zero when written; ignored when read (pads the slot to a line).
    pub reserved: [u64; 3],
}

/// One deallocation notice on a reverse ring (24 bytes: with its sequence
/// word a slot is half a cache line).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Notice {
    /// Token of the released slice (as sent in [`Desc::token`]).
    pub token: u64,
    /// What the peer reports: [`NOTICE_RELEASED`] (it dropped every
    /// reference), [`NOTICE_RETIRED`] (it can no longer vouch for where
    /// the slice went — a process it forwarded the slice to may still read
    /// it — so the originator must never reuse the memory) or
    /// [`NOTICE_ESCAPED`]. Anything else is a bad notice.
    pub kind: u64,
    /// Zero when written; ignored when read (pads the slot).
    pub reserved: u64,
}

/// [`Notice::kind`]: the slice was released everywhere it went.
pub const NOTICE_RELEASED: u64 = 0;
/// [`Notice::kind`]: the slice's fate is unknown downstream; retire it.
pub const NOTICE_RETIRED: u64 = 1;
/// [`Notice::kind`]: not about one slice — `token` is a region slot the
/// originator announced, which the peer is about to pass on to another
/// process. Published *before* the region leaves, so if the peer dies the
/// originator knows that slices of that region may still be read
/// elsewhere and retires them; slices of regions that never escaped are
/// simply freed.
pub const NOTICE_ESCAPED: u64 = 2;

// SAFETY: repr(C) structs of integers only; every bit pattern is valid.
unsafe impl Pod for Desc {}
// SAFETY: repr(C) structs of integers only; every bit pattern is valid.
unsafe impl Pod for Notice {}

const _: () = {
    assert!(std::mem::size_of::<Desc>() == 56);
    assert!(std::mem::align_of::<Desc>() == 8);
    assert!(std::mem::offset_of!(Desc, offset) == 8);
    assert!(std::mem::offset_of!(Desc, token) == 24);
    assert!(std::mem::size_of::<Notice>() == 24);
    assert!(std::mem::size_of::<RingEntry<Desc>>() == 64);
    assert!(std::mem::offset_of!(RingEntry<Desc>, val) == 8);
    assert!(std::mem::size_of::<RingEntry<Notice>>() == 32);
};

/// Header of the shared control segment (one cache line), followed by four
/// rings at fixed offsets computed from the entry counts:
/// `c2l_msgs`, `l2c_notices`, `l2c_msgs`, `c2l_notices`
/// (c = connector, l = listener).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct SegmentHeader {
    /// [`SEGMENT_MAGIC`].
    pub magic: u64,
    /// [`LAYOUT_VERSION`].
    pub version: u32,
    /// Entries in each message ring (power of two).
    pub msg_entries: u32,
    /// Entries in each notice ring (power of two).
    pub notice_entries: u32,
    /// Size of `Desc` the creator was built with ([`DESC_SIZE`]).
    pub desc_size: u32,
    /// Total segment length in bytes.
    pub total_len: u64,
    /// The *closed* words of the connector and the listener
    /// ([`CONNECTOR_CLOSED`]); 0 when the segment is created.
    pub closed: [u64; 2],
    /// The CPU each end (connector, listener) last ran a send or a wait
    /// on, plus one (0: not known yet; see [`CONNECTOR_CPU`]); 0 when the
    /// segment is created. Written only when it changes.
    pub cpus: [u64; 2],
}

// SAFETY: repr(C) integers only.
unsafe impl Pod for SegmentHeader {}

const _: () = {
    assert!(std::mem::size_of::<SegmentHeader>() == 64);
    assert!(std::mem::offset_of!(SegmentHeader, msg_entries) == 12);
    assert!(std::mem::offset_of!(SegmentHeader, total_len) == 24);
    assert!(CONNECTOR_CLOSED == 32 && LISTENER_CLOSED == 40);
    assert!(CONNECTOR_CPU == 48 && LISTENER_CPU == 56);
};

/// Where the four rings live in a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentLayout {
    /// Entries per message ring.
    pub msg_entries: u32,
    /// Entries per notice ring.
    pub notice_entries: u32,
    /// Offsets of the four ring headers: c2l_msgs, l2c_notices, l2c_msgs, c2l_notices.
    pub rings: [usize; 4],
    /// Total bytes, rounded up to whole pages.
    pub total_len: usize,
}

/// Ring indices within [`SegmentLayout::rings`].
pub const C2L_MSGS: usize = 0;
/// See [`C2L_MSGS`].
pub const L2C_NOTICES: usize = 1;
/// See [`C2L_MSGS`].
pub const L2C_MSGS: usize = 2;
/// See [`C2L_MSGS`].
pub const C2L_NOTICES: usize = 3;

impl SegmentLayout {
    /// Compute the layout; `None` for counts that are not powers of two in
    /// 8..=2^20.
    pub fn new(msg_entries: u32, notice_entries: u32) -> Option<Self> {
        let ok = |n: u32| n.is_power_of_two() && (8..=1 << 20).contains(&n);
        if !ok(msg_entries) || !ok(notice_entries) {
            return None;
        }
        let align = |v: usize| (v + 63) & !63;
        let mut off = std::mem::size_of::<SegmentHeader>();
        let mut rings = [0usize; 4];
        for (i, r) in rings.iter_mut().enumerate() {
            *r = off;
            let bytes = if i % 2 == 0 {
                ring_bytes::<Desc>(msg_entries as usize)
            } else {
                ring_bytes::<Notice>(notice_entries as usize)
            };
            off = align(off + bytes);
        }
        let total_len = crate::sys::round_to_pages(off)?;
        Some(Self {
            msg_entries,
            notice_entries,
            rings,
            total_len,
        })
    }

    /// The layout a (copied-out) header describes, if it is valid and
    /// consistent with a segment of `actual_len` bytes.
    pub fn from_header(h: &SegmentHeader, actual_len: u64) -> Option<Self> {
        if h.magic != SEGMENT_MAGIC || h.version != LAYOUT_VERSION || h.desc_size != DESC_SIZE {
            return None;
        }
        let l = Self::new(h.msg_entries, h.notice_entries)?;
        (l.total_len as u64 == h.total_len && h.total_len <= actual_len).then_some(l)
    }

    /// Offset of the entry array of ring `i`.
    pub fn entries(&self, i: usize) -> usize {
        self.rings[i] + std::mem::size_of::<RingHeader>()
    }
}

/// Control records on the socket after the handshake (which is
/// `crate::segment`'s). Fixed 32-byte little-endian encoding:
/// `kind: u32, a: u32, b: u64, c: u64, d: u64`; kinds 1–3 are the
/// handshake's and never valid here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctl {
    /// A region for slot `slot`, with its fd. `secured` is the sender's
    /// claim only; the receiver checks the seals itself.
    Region {
        /// Slot number the sender will use in descriptors.
        slot: u32,
        /// Length in bytes.
        len: u64,
    },
    /// A single-use region, consumed by the next descriptor naming
    /// [`SINGLE_USE_SLOT`].
    SingleUse {
        /// Length in bytes.
        len: u64,
    },
    /// Orderly shutdown.
    Bye,
    /// A lane (`channel::lane`), with two fds: its control segment
    /// (read-write) and its slots (read-only).
    Lane {
        /// Slots.
        slots: u32,
        /// Bytes per slot.
        slot_size: u64,
        /// Length of the control segment.
        seg_len: u64,
    },
}

/// Encoded size of a [`Ctl`].
pub const CTL_LEN: usize = 32;

impl Ctl {
    /// Encode.
    pub fn encode(&self) -> [u8; CTL_LEN] {
        let (kind, a, b, c): (u32, u32, u64, u64) = match *self {
            Ctl::Region { slot, len } => (4, slot, len, 0),
            Ctl::SingleUse { len } => (5, 0, len, 0),
            Ctl::Bye => (6, 0, 0, 0),
            Ctl::Lane {
                slots,
                slot_size,
                seg_len,
            } => (7, slots, slot_size, seg_len),
        };
        let mut out = [0u8; CTL_LEN];
        out[0..4].copy_from_slice(&kind.to_le_bytes());
        out[4..8].copy_from_slice(&a.to_le_bytes());
        out[8..16].copy_from_slice(&b.to_le_bytes());
        out[16..24].copy_from_slice(&c.to_le_bytes());
        out
    }

    /// Decode; `None` for anything that is not exactly a valid record.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != CTL_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
        let (kind, a, b, c) = (u32_at(0), u32_at(4), u64_at(8), u64_at(16));
        Some(match kind {
            4 => Ctl::Region { slot: a, len: b },
            5 => Ctl::SingleUse { len: b },
            6 => Ctl::Bye,
            7 => Ctl::Lane {
                slots: a,
                slot_size: b,
                seg_len: c,
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_aligned_and_page_rounded() {
        let l = SegmentLayout::new(1024, 1024).unwrap();
        assert!(l.rings.iter().all(|o| o % 64 == 0));
        assert_eq!(l.total_len % crate::sys::page_size(), 0);
        assert!(l.entries(C2L_NOTICES) + 1024 * 32 <= l.total_len);
        assert!(SegmentLayout::new(1000, 1024).is_none());
        assert!(SegmentLayout::new(4, 1024).is_none());
    }

    #[test]
    fn header_validation() {
        let l = SegmentLayout::new(64, 64).unwrap();
        let mut h = SegmentHeader {
            magic: SEGMENT_MAGIC,
            version: LAYOUT_VERSION,
            msg_entries: 64,
            notice_entries: 64,
            desc_size: DESC_SIZE,
            total_len: l.total_len as u64,
            closed: [0; 2],
            cpus: [0; 2],
        };
        assert_eq!(SegmentLayout::from_header(&h, l.total_len as u64), Some(l));
        assert_eq!(SegmentLayout::from_header(&h, l.total_len as u64 - 1), None);
        h.version = 99;
        assert_eq!(SegmentLayout::from_header(&h, l.total_len as u64), None);
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        #[test]
        fn ctl_roundtrip_or_reject(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Some(c) = Ctl::decode(&bytes) {
                // Re-encoding a decoded record decodes to the same record.
                prop_assert_eq!(Ctl::decode(&c.encode()), Some(c));
            }
        }
    }

    #[test]
    fn ctl_roundtrip() {
        for c in [
            Ctl::Region {
                slot: 7,
                len: 1 << 24,
            },
            Ctl::SingleUse { len: 8192 },
            Ctl::Bye,
            Ctl::Lane {
                slots: 64,
                slot_size: 4096,
                seg_len: 8192,
            },
        ] {
            assert_eq!(Ctl::decode(&c.encode()), Some(c));
        }
    }
}
