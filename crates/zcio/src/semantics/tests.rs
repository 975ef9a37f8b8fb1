//! Unit tests of the arena's page table: TCOW, lending, swapping.

use std::os::fd::AsFd;

use super::arena::Lend;
use super::*;
use crate::sys::mmap::{Access, Mapping};

/// What a peer sees: a separate read-only mapping of the arena's region.
fn peer_view(a: &Arena) -> Mapping {
    let fd = crate::sys::memfd::reopen_readonly(a.core.region.fd()).unwrap();
    Mapping::map(fd.as_fd(), a.core.region.len(), Access::ReadOnly, false).unwrap()
}

fn read_file(m: &Mapping, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // SAFETY: [off, off+len) lies in the mapping (callers pass region offsets).
    unsafe { std::ptr::copy_nonoverlapping(m.as_ptr().add(off), v.as_mut_ptr(), len) };
    v
}

#[test]
fn names_round_trip() {
    for s in Semantics::ALL {
        assert_eq!(Semantics::parse(s.name()), Some(s));
        assert_eq!(s.name().parse::<Semantics>().unwrap(), s);
    }
    assert_eq!(
        Semantics::parse("EMULATED_COPY"),
        Some(Semantics::EmulatedCopy)
    );
    assert!("nope".parse::<Semantics>().is_err());
}

#[test]
fn tcow_gives_the_writer_a_copy_and_the_peer_keeps_the_original() {
    let arena = Arena::new(16 * 4096).unwrap();
    let mut buf = arena.alloc(3 * 4096).unwrap();
    buf.fill(b'a');
    let lent = arena
        .core
        .lend(buf.as_ptr() as usize, buf.len(), Lend::Protect)
        .unwrap();
    assert_eq!(lent.len(), 1);
    let (off, len) = (lent[0].region_offset(), lent[0].len());
    let peer = peer_view(&arena);
    // Write while in flight: every page gets a private copy.
    buf.fill(b'b');
    assert!(buf.iter().all(|&b| b == b'b'));
    assert!(read_file(&peer, off, len).iter().all(|&b| b == b'a'));
    let st = arena.stats();
    assert_eq!(st.tcow_copies, 3);
    assert_eq!(st.pages_in_flight, 3);
    drop(lent);
    assert_eq!(arena.stats().pages_in_flight, 0);
    // Lend again (the new pages), return, then write: no copy needed.
    let lent = arena
        .core
        .lend(buf.as_ptr() as usize, buf.len(), Lend::Protect)
        .unwrap();
    drop(lent);
    buf.fill(b'c');
    assert_eq!(arena.stats().tcow_copies, 3);
    assert!(buf.iter().all(|&b| b == b'c'));
}

#[test]
fn repeated_lends_and_writes_recycle_spares() {
    let arena = Arena::new(8 * 4096).unwrap();
    let mut buf = arena.alloc_at(4096 + 100, 50).unwrap();
    let peer = peer_view(&arena);
    let mut held = Vec::new();
    for round in 0..40u8 {
        buf.fill(round);
        let lent = arena
            .core
            .lend(buf.as_ptr() as usize, buf.len(), Lend::Protect)
            .unwrap();
        // The peer sees exactly this round's bytes.
        let mut seen = Vec::new();
        for f in &lent {
            seen.extend(read_file(&peer, f.region_offset(), f.len()));
        }
        assert_eq!(seen.len(), buf.len());
        assert!(seen.iter().all(|&b| b == round), "round {round}");
        held.push(lent);
        if held.len() > 3 {
            held.remove(0);
        }
    }
    // Previously lent rounds still read as they were sent.
    for (i, lent) in held.iter().enumerate() {
        let round = 40 - held.len() as u8 + i as u8;
        for f in lent {
            assert!(read_file(&peer, f.region_offset(), f.len())
                .iter()
                .all(|&b| b == round));
        }
    }
    drop(held);
    assert_eq!(arena.stats().pages_in_flight, 0);
}

#[test]
fn lend_refuses_without_spares_and_outside() {
    let arena = Arena::new(4 * 4096).unwrap();
    let buf = arena.alloc(4 * 4096).unwrap();
    // 4 spares for 4 slots: one protected lend fits.
    let l1 = arena
        .core
        .lend(buf.as_ptr() as usize, buf.len(), Lend::Protect)
        .unwrap();
    // Re-lending the same (already protected) pages needs no new spare.
    let l2 = arena
        .core
        .lend(buf.as_ptr() as usize, buf.len(), Lend::Protect)
        .unwrap();
    drop((l1, l2));
    let v = vec![0u8; 10];
    assert!(!arena.contains(v.as_ptr(), v.len()));
    assert!(arena
        .core
        .lend(v.as_ptr() as usize, 10, Lend::Plain)
        .is_err());
}

#[test]
fn swap_in_maps_peer_pages_privately_and_rehome_restores() {
    let sender = Arena::new(8 * 4096).unwrap();
    let mut sbuf = sender.alloc(2 * 4096).unwrap();
    sbuf.fill(b's');
    let lent = sender
        .core
        .lend(sbuf.as_ptr() as usize, sbuf.len(), Lend::Protect)
        .unwrap();
    let receiver = Arena::new(8 * 4096).unwrap();
    let mut rbuf = receiver.alloc(2 * 4096).unwrap();
    rbuf.fill(b'r');
    let src = lent[0].region();
    receiver
        .core
        .swap_in(rbuf.first, 2, src, lent[0].region_offset())
        .unwrap();
    rbuf.held = lent;
    assert!(rbuf.iter().all(|&b| b == b's'));
    // The receiver's writes stay private.
    rbuf[0] = b'x';
    assert_eq!(sbuf[0], b's');
    rbuf.rehome();
    assert_eq!(receiver.stats().rehomed_pages, 2);
    // The own pages are back, with their old contents.
    assert!(rbuf.iter().all(|&b| b == b'r'));
    assert_eq!(sender.stats().pages_in_flight, 0);
}

#[test]
fn hidden_pages_refuse_lending() {
    let arena = Arena::new(4 * 4096).unwrap();
    let buf = arena.alloc(4096).unwrap();
    let lent = arena
        .core
        .lend(buf.as_ptr() as usize, 4096, Lend::Hide)
        .unwrap();
    assert!(arena
        .core
        .lend(buf.as_ptr() as usize, 4096, Lend::Plain)
        .is_err());
    drop(lent);
    arena
        .core
        .set_prot(buf.first, 1, crate::sys::vm::Prot::ReadWrite)
        .unwrap();
}
