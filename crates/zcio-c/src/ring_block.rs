//! Blocks with tags, gathered writes and ring-to-ring splicing:
//! `zcio_ring_write_tagged`, `zcio_ring_write_gather`, `zcio_ring_splice`,
//! and of a peeked block `zcio_ring_peek_tag` and
//! `zcio_ring_peek_is_intact` (`Producer::write_tagged`, `write_gather`,
//! `splice`; `Peek::tag`, `Peek::is_intact`).

use std::ffi::{c_int, c_void};

use zcio::View;

use crate::error::{einval, fail, guard};
use crate::ring::{handle, zcio_ring, End};
use crate::ssize_t;

/// One part of a gathered write: `len` bytes at `base` (the layout of
/// `struct iovec`, so an array of those may be passed cast).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_iovec {
    /// First byte (NULL only with `len` 0).
    pub base: *const c_void,
    /// Length in bytes.
    pub len: usize,
}

// Cast-compatible with `struct iovec`.
const _: () = {
    assert!(std::mem::size_of::<zcio_iovec>() == std::mem::size_of::<libc::iovec>());
    assert!(std::mem::align_of::<zcio_iovec>() == std::mem::align_of::<libc::iovec>());
};

/// Producer: copy `parts[0..n]` in, one after the other, as **one block**
/// carrying classification `tag` (consumers read it back with
/// `zcio_ring_peek_tag`), waiting for room as the handle's timeout says.
/// A block ring stores it as one block of at most `max_block` bytes
/// (`-EMSGSIZE` beyond); a byte-stream ring stores the bytes (at most half
/// the ring per call) and no tag. The parts may be memory another process
/// writes (each byte is read once). Returns the bytes written (all of
/// them) or the errors of `zcio_ring_write`; `-EINVAL` for a NULL part
/// with a length, or `n` > 1024.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `parts`
/// is NULL (with `n` 0) or valid for reading `n` entries, each readable
/// for its `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_write_gather(
    ring: *mut zcio_ring,
    parts: *const zcio_iovec,
    n: usize,
    tag: u32,
) -> ssize_t {
    guard(|| {
        if parts.is_null() && n != 0 {
            return einval("zcio_ring_write_gather: parts is NULL") as ssize_t;
        }
        if n > 1024 {
            return einval("zcio_ring_write_gather: more than 1024 parts") as ssize_t;
        }
        let parts = if n == 0 {
            &[][..]
        } else {
            // SAFETY: non-NULL and readable for `n` entries (contract).
            unsafe { std::slice::from_raw_parts(parts, n) }
        };
        let mut views = Vec::with_capacity(n);
        let mut total = 0usize;
        for p in parts {
            if p.base.is_null() && p.len != 0 {
                return einval("zcio_ring_write_gather: a part has a NULL base and a length")
                    as ssize_t;
            }
            total = match total.checked_add(p.len) {
                Some(t) if t <= isize::MAX as usize => t,
                _ => return einval("zcio_ring_write_gather: the parts are too large") as ssize_t,
            };
            views.push(if p.len == 0 {
                View::from_slice(&[])
            } else {
                // SAFETY: non-NULL and readable for `len` bytes during the
                // call (contract); read as a volatile view.
                unsafe { View::from_raw(p.base.cast::<u8>(), p.len) }
            });
        }
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e as ssize_t,
        };
        let wait = r.wait();
        let p = match r.producer("zcio_ring_write_gather") {
            Ok(p) => p,
            Err(e) => return e as ssize_t,
        };
        match p.write_gather(&views, tag, wait) {
            Ok(()) => total as ssize_t,
            Err(e) => fail(e) as ssize_t,
        }
    })
}

/// Producer: write `len` bytes from `buf` as one block carrying `tag`
/// (`zcio_ring_write_gather` with one part). Returns `len` or the errors
/// of `zcio_ring_write`.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `buf` is
/// valid for reading `len` bytes (or NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_write_tagged(
    ring: *mut zcio_ring,
    buf: *const c_void,
    len: usize,
    tag: u32,
) -> ssize_t {
    let part = zcio_iovec { base: buf, len };
    // SAFETY: one part, readable as the caller promises for `buf`.
    unsafe { zcio_ring_write_gather(ring, &part, 1, tag) }
}

/// Store the classification tag of the block `zcio_ring_peek` holds in
/// `*tag` (0 for byte-stream rings and untagged writes). Returns 0, or
/// `-EINVAL` (NULL, or nothing is peeked).
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `tag` is
/// NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_peek_tag(ring: *mut zcio_ring, tag: *mut u32) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        if tag.is_null() {
            return einval("zcio_ring_peek_tag: tag is NULL");
        }
        let Some(d) = &r.peeked else {
            return einval("zcio_ring_peek_tag: no block is peeked (zcio_ring_peek first)");
        };
        // SAFETY: non-NULL and writable (contract).
        unsafe { tag.write(d.tag()) };
        0
    })
}

/// Whether the block `zcio_ring_peek` holds is still intact: 1 (the
/// producer has not overwritten it, so far: what you copied out before
/// this call is good), 0 (it was overwritten: discard what you read), or
/// `-EINVAL` (NULL, nothing peeked). The block stays peeked;
/// `zcio_ring_release` checks once more.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_peek_is_intact(ring: *mut zcio_ring) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let Some(d) = r.peeked.take() else {
            return einval("zcio_ring_peek_is_intact: no block is peeked (zcio_ring_peek first)");
        };
        let End::Consumer(c) = &mut r.end else {
            return einval("zcio_ring_peek_is_intact: a producer's handle");
        };
        match c.resume(d) {
            Ok(peek) => {
                let intact = peek.is_intact();
                r.peeked = Some(peek.detach());
                c_int::from(intact)
            }
            // Cannot happen: the handle refuses reads, peeks and seeks while
            // a block is peeked, so the detached peek is current.
            Err(d) => {
                r.peeked = Some(d);
                einval("zcio_ring_peek_is_intact: the peeked block is stale")
            }
        }
    })
}

/// Ring to ring: write the block the consumer `src` holds peeked
/// (`zcio_ring_peek`) into `dst` (a producer's handle), waiting for room
/// as `dst`'s timeout says. Into an index ring (`ZCIO_LAYOUT_INDEX`) it
/// stores a rich pointer to the block (no data is copied; consumers of
/// `dst` read the bytes from `src`'s ring, at most 8 source rings); into
/// any other ring a copy of its bytes with its tag. The block stays peeked
/// in `src` (release it as usual). Returns 0. Errors: `-EINVAL` (NULL,
/// nothing peeked in `src`, `src` not a consumer), `-EBADF` (`dst` a
/// consumer's handle), `-EBUSY` (a reservation is open on `dst`),
/// `-ENOSPC` (an index ring with 8 source rings already), and the errors
/// of `zcio_ring_write`.
///
/// # Safety
/// `dst` and `src` are NULL or live, distinct handles, each used by one
/// thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_splice(dst: *mut zcio_ring, src: *mut zcio_ring) -> c_int {
    guard(|| {
        if std::ptr::eq(dst, src) {
            return einval("zcio_ring_splice: dst and src are the same handle");
        }
        // SAFETY: the caller's contract (distinct handles: no aliasing).
        let (d, s) = match unsafe { (handle(dst), handle(src)) } {
            (Ok(d), Ok(s)) => (d, s),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let Some(detached) = s.peeked.take() else {
            return einval("zcio_ring_splice: src holds no peeked block (zcio_ring_peek first)");
        };
        let End::Consumer(c) = &mut s.end else {
            return einval("zcio_ring_splice: src is a producer's handle");
        };
        let peek = match c.resume(detached) {
            Ok(p) => p,
            Err(d) => {
                s.peeked = Some(d);
                return einval("zcio_ring_splice: the peeked block is stale");
            }
        };
        let wait = d.wait();
        let res = match d.producer("zcio_ring_splice") {
            Ok(p) => p.splice(&peek, wait).map_err(fail),
            Err(e) => Err(e),
        };
        s.peeked = Some(peek.detach());
        match res {
            Ok(()) => 0,
            Err(e) => e,
        }
    })
}
