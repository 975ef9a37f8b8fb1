//! The one place where benchmark sides read payload bytes they *received*
//! through zcio (a [`Msg`] from a channel, a [`Peek`] of a ring): touching
//! pages, sequence words, prefixes, checksums, verification.
//!
//! Those bytes live in memory another process mapped (the originator keeps a
//! writable mapping of a volatile buffer; a ring's producer writes the ring).
//! Every read of them goes through this module so that a change of the
//! library's read API (a view type with copy-out / raw-pointer reads instead
//! of `&[u8]`) changes this file only. Bytes in the process's own memory
//! (copy baselines, pipes, sockets) are read with [`crate::pages`].

use zcio::ring::Peek;
use zcio::{Msg, View};

use crate::pages::read_pages_view;

/// Read one word (`u64`, little endian) at the start of every 4 KiB page of
/// every slice of `msg`: the receiver's per-page touch, in place (one
/// volatile load per page). Returns the first slice's first word (the
/// sequence number the originator wrote; `None` for an empty message) and
/// a sum that keeps the loads alive.
pub fn msg_pages(msg: &Msg) -> (Option<u64>, u64) {
    let mut first = None;
    let mut sum = 0u64;
    for c in msg.chunks() {
        if c.len() >= 8 {
            let (f, s) = read_pages_view(c);
            first.get_or_insert(f);
            sum = sum.wrapping_add(s);
        }
    }
    (first, sum)
}

/// The last word (`u64`, little endian) of `msg`, read in place (`None`
/// if it has fewer than 8 bytes).
pub fn msg_last_word(msg: &Msg) -> Option<u64> {
    let at = msg.len().checked_sub(8)?;
    let mut w = [0u8; 8];
    (msg.read_at(at, &mut w) == 8).then(|| u64::from_le_bytes(w))
}

/// Copy the first `out.len()` bytes of `msg` (fewer if it is shorter) into
/// `out`; returns how many were copied.
pub fn msg_prefix(msg: &Msg, out: &mut [u8]) -> usize {
    msg.read_at(0, out)
}

/// The first byte of `msg`, if it has one.
pub fn msg_first_byte(msg: &Msg) -> Option<u8> {
    msg.chunks().next().and_then(|c| c.get(0))
}

/// The RFC 1071 checksum of all of `msg`, read in place slice by slice:
/// one's complement sums add up across slices when every slice but the
/// last has an even length; otherwise the message is copied once.
pub fn msg_checksum(msg: &Msg) -> u16 {
    use crate::checksum::{internet_checksum, ones_complement_sum_view};
    let n = msg.slice_count();
    if msg
        .slices()
        .iter()
        .take(n.saturating_sub(1))
        .any(|s| s.len() % 2 == 1)
    {
        return internet_checksum(&msg.to_vec());
    }
    let mut acc = 0u32;
    for c in msg.chunks() {
        acc += u32::from(ones_complement_sum_view(c));
    }
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Read one `u64` per 64-byte line of a peeked ring block (the "touch" of
/// the peek-touch consumer); returns their sum so the loads stay.
pub fn peek_lines(p: &Peek<'_>) -> u64 {
    let data = p.view();
    let mut sum = 0u64;
    let mut off = 0;
    while let Some(w) = data.read_u64_le(off) {
        sum = sum.wrapping_add(w);
        off += 64;
    }
    std::hint::black_box(sum)
}

/// The sequence word at the start of a peeked block (which has ≥ 8 bytes).
pub fn peek_word(p: &Peek<'_>) -> u64 {
    word(p.view())
}

/// The sequence word at the start of `data` (which has ≥ 8 bytes;
/// `u64::MAX` if it has fewer).
pub fn word(data: View<'_>) -> u64 {
    data.read_u64_le(0).unwrap_or(u64::MAX)
}

/// Run `f` over the bytes of a peeked ring block, in place (the stream
/// verifier reads its sampled sequence words from them).
pub fn peek_with<R>(p: &Peek<'_>, f: impl FnOnce(View<'_>) -> R) -> R {
    f(p.view())
}
