//! A ring file's `Meta` header, decoded as every process that opens a ring
//! decodes it (`Geometry::from_meta`, called by `RingMap::open` on the
//! bytes it `pread`s from the file, before anything is mapped), and the
//! owner words of the control line (`owner_parts`).
//!
//! Invariant: no panic; a header is accepted only with a geometry that
//! matches the file's length, whose parts fit (`head_len` a page multiple
//! holding the fixed lines and the descriptor ring, a power-of-two data
//! area of at most 16 GiB, a slot size that fits it), whose largest block
//! fits its capacity and, where a block's length is recorded (in-band
//! header, rich pointer), that 32-bit field, and which re-encodes to a
//! header that decodes to the same geometry (decode(encode(x)) == x, also
//! for every geometry `Geometry::new` accepts); every refusal formats as a
//! sentence; an owner word splits into parts that encode back to it.

use crate::input::{record, Unstructured};
use zcio::internals::ring_layout::{
    owner_parts, owner_word, MetaCopy, BLOCK_HDR, DESC_OFF, LAYOUT_VERSION, MAGIC, MAX_CONSUMERS,
    MAX_DATA, MAX_DESC,
};
use zcio::ring::{Geometry, Layout, Overflow};

/// `[selector][bytes…]`: 0 a raw `Meta` (64 bytes) and a file length; 1
/// the parameters of a new geometry; 2 an owner word.
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut u = Unstructured::new(rest);
    match sel % 3 {
        0 => {
            let m = meta(&record::<64>(&mut u));
            let len = u64::from_le_bytes(record(&mut u));
            decode(&m, len);
        }
        1 => {
            let layout = u32::from_le_bytes(record(&mut u));
            let overflow = u32::from_le_bytes(record(&mut u));
            let size = u64::from_le_bytes(record(&mut u));
            let slot = u64::from_le_bytes(record(&mut u));
            let entries = u64::from_le_bytes(record(&mut u));
            let id = u64::from_le_bytes(record(&mut u));
            let (Some(l), Some(o)) = (Layout::from_raw(layout), Overflow::from_raw(overflow))
            else {
                return;
            };
            if let Ok(g) = Geometry::new(l, o, size, slot, entries, id) {
                check(&g);
                assert_eq!(Geometry::from_meta(&g.to_meta(), g.file_len()), Ok(g));
            }
        }
        _ => {
            let w = u64::from_le_bytes(record(&mut u));
            let (epoch, state, pid) = owner_parts(w);
            assert_eq!(owner_word(epoch, state, pid), w);
            assert!(epoch < 1 << 24 && state < 256);
        }
    }
}

/// The header as `RingMap::open` reads it: little-endian fields at their
/// offsets in `Meta`.
pub(crate) fn meta(b: &[u8; 64]) -> MetaCopy {
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    MetaCopy {
        magic: b[..8].try_into().expect("8 bytes"),
        version: u32_at(8),
        layout: u32_at(12),
        overflow: u32_at(16),
        slot_size: u32_at(20),
        head_len: u64_at(24),
        data_len: u64_at(32),
        desc_len: u64_at(40),
        ring_id: u64_at(48),
        max_consumers: u32_at(56),
    }
}

/// The bytes of `m` as a ring file holds them (the inverse of [`meta`]).
pub fn meta_bytes(m: &MetaCopy) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[..8].copy_from_slice(&m.magic);
    b[8..12].copy_from_slice(&m.version.to_le_bytes());
    b[12..16].copy_from_slice(&m.layout.to_le_bytes());
    b[16..20].copy_from_slice(&m.overflow.to_le_bytes());
    b[20..24].copy_from_slice(&m.slot_size.to_le_bytes());
    b[24..32].copy_from_slice(&m.head_len.to_le_bytes());
    b[32..40].copy_from_slice(&m.data_len.to_le_bytes());
    b[40..48].copy_from_slice(&m.desc_len.to_le_bytes());
    b[48..56].copy_from_slice(&m.ring_id.to_le_bytes());
    b[56..60].copy_from_slice(&m.max_consumers.to_le_bytes());
    b
}

fn decode(m: &MetaCopy, len: u64) {
    match Geometry::from_meta(m, len) {
        Ok(g) => {
            check(&g);
            assert_eq!(g.file_len(), len, "accepted a file of another length");
            assert_eq!(
                (m.magic, m.version, m.layout, m.overflow),
                (MAGIC, LAYOUT_VERSION, g.layout as u32, g.overflow as u32)
            );
            assert_eq!(
                (m.head_len, m.data_len, m.desc_len, m.ring_id),
                (g.head_len, g.data_len, g.desc_len, g.ring_id)
            );
            assert_eq!(m.max_consumers as usize, MAX_CONSUMERS);
            let again = g.to_meta();
            assert_eq!(Geometry::from_meta(&again, len), Ok(g));
            assert_eq!(meta(&meta_bytes(&again)), again);
        }
        Err(e) => {
            let s = e.to_string();
            assert!(!s.is_empty());
        }
    }
}

/// What every accepted geometry satisfies.
fn check(g: &Geometry) {
    let ps = zcio::internals::sys::page_size() as u64;
    assert!(g.head_len.is_multiple_of(ps) && g.head_len >= DESC_OFF);
    match g.layout {
        Layout::Index => assert_eq!(g.data_len, 0),
        _ => assert!(g.data_len.is_power_of_two() && g.data_len >= ps && g.data_len <= MAX_DATA),
    }
    if g.layout.counts_entries() {
        assert!(g.desc_len.is_power_of_two() && (2..=MAX_DESC).contains(&g.desc_len));
        assert!(g.head_len >= DESC_OFF + 32 * g.desc_len);
    } else {
        assert_eq!(g.desc_len, 0);
    }
    if g.layout == Layout::Slotted {
        assert!(g.slot_size.is_power_of_two());
        assert!(g.slot_size >= 2 * BLOCK_HDR && g.slot_size <= g.data_len);
    }
    assert!(g.layout == Layout::Index || g.max_block() <= g.data_len);
    // The layouts that record a block's length record it in 32 bits (the
    // in-band header's and the rich pointer's `len`).
    if g.layout != Layout::Continuous {
        assert!(
            g.max_block() <= u64::from(u32::MAX),
            "blocks too long to record"
        );
    }
    assert_eq!(g.file_len(), g.head_len + g.data_len);
    assert!(g.cap() > 0 && g.cap().is_power_of_two());
}

/// Headers of real rings of every layout, and geometries and owner words
/// the production code makes.
pub fn seeds() -> Vec<Vec<u8>> {
    let ps = zcio::internals::sys::page_size() as u64;
    let mut out = Vec::new();
    let geos = [
        (Layout::Continuous, Overflow::Block, 1 << 20, 0, 0),
        (Layout::Slotted, Overflow::Frp, 1 << 16, 2048, 0),
        (Layout::Variable, Overflow::Srp, ps, 0, 0),
        (Layout::Descriptors, Overflow::Mrp, 1 << 16, 0, 1024),
        (Layout::Index, Overflow::Frp, 0, 0, 4096),
    ];
    for (i, (l, o, size, slot, entries)) in geos.into_iter().enumerate() {
        let g = Geometry::new(l, o, size, slot, entries, 0x1234 + i as u64).expect("valid");
        let mut s = vec![0u8];
        s.extend_from_slice(&meta_bytes(&g.to_meta()));
        s.extend_from_slice(&g.file_len().to_le_bytes());
        out.push(s);
        let mut s = vec![1u8];
        for v in [l as u32, o as u32] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        for v in [size, slot, entries, 0x1234] {
            s.extend_from_slice(&v.to_le_bytes());
        }
        out.push(s);
    }
    for w in [
        owner_word(1, 1, 4242),
        owner_word(0xff_ffff, 4, u32::MAX),
        u64::MAX,
    ] {
        let mut s = vec![2u8];
        s.extend_from_slice(&w.to_le_bytes());
        out.push(s);
    }
    out
}
