//! The channel's fixed records from a peer's socket and segment: the
//! set-up hello/welcome (`Handshake::decode`, the record bytes only — the
//! fds travel beside them), the control records after it (`Ctl::decode`)
//! and the segment header a connector leaves at the start of the shared
//! segment (`SegmentLayout::from_header`, checked before anything is
//! mapped beyond it).
//!
//! Invariant: no panic; a decoded record re-encodes to bytes that decode
//! to the same record (decode(encode(x)) == x), and a hello/control record
//! that decodes re-encodes to the very bytes it came from; a layout
//! accepted from a header fits the segment length it was checked against
//! and its four rings lie inside it, in order, without overlapping.

use crate::input::{record, Unstructured};
use zcio::internals::segment::{Handshake, HANDSHAKE_LEN};
use zcio::internals::spsc::ring_bytes;
use zcio::internals::wire::{
    Ctl, Desc, Notice, SegmentHeader, SegmentLayout, CTL_LEN, DESC_SIZE, LAYOUT_VERSION,
    SEGMENT_MAGIC,
};

/// `[selector][record bytes…]`: selector 0 a handshake record, 1 a control
/// record, 2 a segment header (+ 8 bytes: the segment's real length).
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 3 {
        0 => handshake(rest),
        1 => ctl(rest),
        _ => header(rest),
    }
}

fn handshake(b: &[u8]) {
    if let Some(h) = Handshake::decode(b) {
        assert_eq!(&h.encode()[..], b, "a decoded hello re-encodes as sent");
    }
}

fn ctl(b: &[u8]) {
    if let Some(c) = Ctl::decode(b) {
        // The fourth word is ignored by every kind, so compare records.
        assert_eq!(Ctl::decode(&c.encode()), Some(c));
        assert_eq!(b.len(), CTL_LEN);
    }
}

fn header(b: &[u8]) {
    let mut u = Unstructured::new(b);
    let h = SegmentHeader {
        magic: u64::from_le_bytes(record(&mut u)),
        version: u32::from_le_bytes(record(&mut u)),
        msg_entries: u32::from_le_bytes(record(&mut u)),
        notice_entries: u32::from_le_bytes(record(&mut u)),
        desc_size: u32::from_le_bytes(record(&mut u)),
        total_len: u64::from_le_bytes(record(&mut u)),
        closed: [0; 2],
        cpus: [0; 2],
    };
    let actual = u64::from_le_bytes(record(&mut u));
    let Some(l) = SegmentLayout::from_header(&h, actual) else {
        return;
    };
    assert!(l.total_len as u64 <= actual && l.total_len as u64 == h.total_len);
    let sizes = [
        ring_bytes::<Desc>(l.msg_entries as usize),
        ring_bytes::<Notice>(l.notice_entries as usize),
        ring_bytes::<Desc>(l.msg_entries as usize),
        ring_bytes::<Notice>(l.notice_entries as usize),
    ];
    let mut end = std::mem::size_of::<SegmentHeader>();
    for (off, size) in l.rings.iter().zip(sizes) {
        assert!(*off >= end, "rings overlap");
        end = off + size;
    }
    assert!(end <= l.total_len, "rings run past the segment");
}

/// Real hellos, control records and headers.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for h in [
        Handshake::Hello {
            magic: SEGMENT_MAGIC.to_le_bytes(),
            version: LAYOUT_VERSION,
            len: 1 << 16,
        },
        Handshake::Welcome {
            magic: SEGMENT_MAGIC.to_le_bytes(),
            version: LAYOUT_VERSION,
        },
        Handshake::Refused,
    ] {
        out.push([&[0u8][..], &h.encode()[..HANDSHAKE_LEN]].concat());
    }
    for c in [
        Ctl::Region {
            slot: 3,
            len: 1 << 20,
        },
        Ctl::SingleUse { len: 8192 },
        Ctl::Bye,
        Ctl::Lane {
            slots: 64,
            slot_size: 4096,
            seg_len: 8192,
        },
    ] {
        out.push([&[1u8][..], &c.encode()[..]].concat());
    }
    for (m, n) in [(64u32, 64u32), (8, 1 << 20), (1024, 256)] {
        let l = SegmentLayout::new(m, n).expect("valid counts");
        let mut s = vec![2u8];
        s.extend_from_slice(&SEGMENT_MAGIC.to_le_bytes());
        s.extend_from_slice(&LAYOUT_VERSION.to_le_bytes());
        s.extend_from_slice(&m.to_le_bytes());
        s.extend_from_slice(&n.to_le_bytes());
        s.extend_from_slice(&DESC_SIZE.to_le_bytes());
        s.extend_from_slice(&(l.total_len as u64).to_le_bytes());
        s.extend_from_slice(&(l.total_len as u64).to_le_bytes());
        out.push(s);
    }
    out
}
