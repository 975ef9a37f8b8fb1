//! The one place where benchmark sides read payload bytes they *received*
//! through zcio (a [`Msg`] from a channel, a [`Peek`] of a ring): touching
//! pages, sequence words, prefixes, checksums, verification.
//!
//! Those bytes live in memory another process mapped (the originator keeps a
//! writable mapping of a volatile buffer; a ring's producer writes the ring).
//! Every read of them goes through this module so that a change of the
//! library's read API (a view type with copy-out / raw-pointer reads instead
//! of `&[u8]`) changes this file only. Bytes in the process's own memory
//! (copy baselines, pipes, sockets) are read with [`crate::transfer::pages`].

use zcio::ring::Peek;
use zcio::Msg;

use crate::transfer::pages::read_pages;

/// Read one word (`u64`, little endian) at the start of every 4 KiB page of
/// every slice of `msg`: the receiver's per-page touch. Returns the first
/// slice's first word (the sequence number the originator wrote; `None`
/// for an empty message) and a sum that keeps the loads alive.
pub fn msg_pages(msg: &Msg) -> (Option<u64>, u64) {
    let mut first = None;
    let mut sum = 0u64;
    for s in msg.slices() {
        if s.len() >= 8 {
            let (f, s) = read_pages(s.as_slice());
            first.get_or_insert(f);
            sum = sum.wrapping_add(s);
        }
    }
    (first, sum)
}

/// Copy the first `out.len()` bytes of `msg` (fewer if it is shorter) into
/// `out`; returns how many were copied.
pub fn msg_prefix(msg: &Msg, out: &mut [u8]) -> usize {
    let mut at = 0;
    for c in msg.chunks() {
        let n = c.len().min(out.len() - at);
        out[at..at + n].copy_from_slice(&c[..n]);
        at += n;
        if at == out.len() {
            break;
        }
    }
    at
}

/// The first byte of `msg`, if it has one.
pub fn msg_first_byte(msg: &Msg) -> Option<u8> {
    let mut b = [0u8; 1];
    (msg_prefix(msg, &mut b) == 1).then_some(b[0])
}

/// The RFC 1071 checksum of all of `msg` (in place for a one-slice message,
/// over a private copy otherwise).
pub fn msg_checksum(msg: &Msg) -> u16 {
    use crate::asyncb::stats::internet_checksum;
    match msg.slices() {
        [one] => internet_checksum(one.as_slice()),
        _ => internet_checksum(&msg.to_vec()),
    }
}

/// Read one `u64` per 64-byte line of a peeked ring block (the "touch" of
/// the peek-touch consumer); returns their sum so the loads stay.
pub fn peek_lines(p: &Peek<'_>) -> u64 {
    crate::ring::check::touch_lines(p)
}

/// The sequence word at the start of a peeked block (which has ≥ 8 bytes).
pub fn peek_word(p: &Peek<'_>) -> u64 {
    crate::ring::check::word(p)
}

/// Run `f` over the bytes of a peeked ring block (the stream verifier reads
/// its sampled sequence words from them).
pub fn peek_with<R>(p: &Peek<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
    f(p)
}
