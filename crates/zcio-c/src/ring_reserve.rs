//! Reserve → fill → commit straight into a ring (`Producer::reserve`):
//! `zcio_ring_reserve`, `zcio_ring_commit`, `zcio_ring_abort`.
//!
//! Rust's `Reservation` borrows its `Producer` until it is committed or
//! dropped (a type state). In C the ring handle carries that state: after
//! `zcio_ring_reserve` the handle *has a reservation* and every other call
//! on it returns `-EBUSY` until `zcio_ring_commit` or `zcio_ring_abort`
//! ends it; `zcio_ring_close` aborts it. The producer therefore lives in a
//! heap cell of its own ([`ProducerEnd`]) that the reservation borrows, and
//! the handle never touches the producer while the borrow lives.

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;

use zcio::ring::{Producer, Reservation};

use crate::error::{einval, fail, fail_msg, guard};
use crate::ring::{handle, zcio_ring, End};

/// The producer of a ring handle, and its open reservation if any.
pub(crate) struct ProducerEnd {
    /// From `Box::into_raw`; freed in `Drop`, after `reservation`.
    ptr: NonNull<Producer>,
    /// Borrows `*ptr` (the `'static` is this struct's promise: it is
    /// dropped first, and `*ptr` is not otherwise touched while it is
    /// `Some`).
    reservation: Option<Reservation<'static>>,
}

// SAFETY: a `ProducerEnd` owns its producer (as a `Box` would) and the
// reservation that borrows it; `Producer` is `Send`, so moving both to
// another thread together is sound. It is never shared (`&ProducerEnd`
// gives no access to the producer).
unsafe impl Send for ProducerEnd {}

impl ProducerEnd {
    pub(crate) fn new(p: Producer) -> Self {
        Self {
            ptr: NonNull::from(Box::leak(Box::new(p))),
            reservation: None,
        }
    }

    /// The producer, unless a reservation holds it (`-EBUSY`).
    pub(crate) fn get(&mut self, call: &str) -> Result<&mut Producer, c_int> {
        if self.reservation.is_some() {
            return Err(fail_msg(
                libc::EBUSY,
                format_args!(
                    "{call}: a reservation is open; zcio_ring_commit or zcio_ring_abort it first"
                ),
            ));
        }
        // SAFETY: `ptr` is live (freed only in `Drop`) and, with no
        // reservation, nothing else borrows it; `&mut self` is exclusive.
        Ok(unsafe { self.ptr.as_mut() })
    }

    /// The producer, by value (ends an open reservation first).
    pub(crate) fn into_inner(self) -> Producer {
        let mut me = std::mem::ManuallyDrop::new(self);
        me.reservation = None;
        // SAFETY: `ptr` came from `Box::leak` and is freed only here or in
        // `Drop`, which `ManuallyDrop` keeps from running; no reservation
        // borrows it any more.
        *unsafe { Box::from_raw(me.ptr.as_ptr()) }
    }
}

impl Drop for ProducerEnd {
    fn drop(&mut self) {
        // The borrow first (an uncommitted reservation publishes nothing).
        self.reservation = None;
        // SAFETY: `ptr` came from `Box::leak`, is freed only here, and no
        // reservation borrows it any more.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}

/// Producer: reserve room in the ring for one block of up to `len` bytes
/// (≥ 1), waiting for room as the handle's timeout says (as
/// `zcio_ring_write`). Stores the address of the room in `*data` and `len`
/// in `*capacity`; fill up to `*capacity` bytes there, then publish them
/// with `zcio_ring_commit` or drop them with `zcio_ring_abort`.
///
/// Ownership: `*data` is writable by this process only until the
/// reservation ends (`zcio_ring_commit`, `zcio_ring_abort`, or
/// `zcio_ring_close`, which aborts it); afterwards it is invalid. Nothing
/// is visible to consumers before the commit, and an aborted reservation
/// publishes nothing. While it is open the handle takes no other call:
/// they return `-EBUSY` (the handle is in the *reserved* state, as Rust's
/// `Reservation` borrows its `Producer`). Not for index rings
/// (`-EOPNOTSUPP`: they take `zcio_ring_splice`).
///
/// Returns 0. Errors: `-EINVAL` (NULL argument, `len` 0, a reservation
/// already open), `-EBADF` (a consumer's handle), `-EMSGSIZE` (`len` never
/// fits one block), `-EAGAIN`, `-ETIMEDOUT`, `-ZCIO_EDROPPED`,
/// `-ZCIO_ECORRUPT`; the handle is then not reserved.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `data`
/// and `capacity` are NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_reserve(
    ring: *mut zcio_ring,
    len: usize,
    data: *mut *mut c_void,
    capacity: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        if data.is_null() || capacity.is_null() || len == 0 {
            return einval("zcio_ring_reserve: data or capacity is NULL, or len is 0");
        }
        let wait = r.wait();
        let pe = match &mut r.end {
            End::Producer(pe) => pe,
            End::Consumer(_) => {
                return fail_msg(
                    libc::EBADF,
                    "zcio_ring_reserve: this ring was opened for reading (ZCIO_O_RDONLY)",
                )
            }
        };
        if pe.reservation.is_some() {
            return einval(
                "zcio_ring_reserve: a reservation is already open; commit or abort it first",
            );
        }
        // SAFETY: `ptr` is live until `ProducerEnd` drops, which drops the
        // reservation first; with no reservation open nothing else borrows
        // the producer, and `pe.get` refuses it while this one lives.
        let p: &'static mut Producer = unsafe { &mut *pe.ptr.as_ptr() };
        let mut res = match p.reserve(len, wait) {
            Ok(res) => res,
            Err(e) => return fail(e),
        };
        let room = res.spare_mut();
        let (addr, cap) = (room.as_mut_ptr().cast::<c_void>(), room.len());
        pe.reservation = Some(res);
        // SAFETY: both non-NULL and writable (contract).
        unsafe {
            data.write(addr);
            capacity.write(cap);
        }
        0
    })
}

/// Producer: publish the first `len` bytes of the open reservation (0 ≤
/// `len` ≤ its capacity) as one block with classification `tag` (read
/// back by `zcio_ring_peek_tag`; 0 if you do not use tags). Ends the
/// reservation: its pointer is invalid afterwards. For a byte-stream ring
/// the tag is not kept.
///
/// Returns 0. Errors: `-EINVAL` (no reservation is open, e.g. a second
/// commit; or `len` larger than reserved: the reservation then stays open,
/// to commit again or abort), `-ZCIO_ECORRUPT` (the ring file was
/// truncated: the block is lost, the reservation ends).
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; the
/// first `len` bytes of the reserved room were written by this process.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_commit(ring: *mut zcio_ring, len: usize, tag: u32) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let End::Producer(pe) = &mut r.end else {
            return einval("zcio_ring_commit: a consumer's handle has no reservation");
        };
        let Some(res) = pe.reservation.as_mut() else {
            return einval("zcio_ring_commit: no reservation is open (zcio_ring_reserve first; a reservation commits once)");
        };
        if len > res.capacity() - res.len() {
            return einval(format_args!(
                "zcio_ring_commit: len {len} is larger than the {} bytes reserved",
                res.capacity()
            ));
        }
        // SAFETY: `len` ≤ the spare room (checked above), and the caller
        // wrote those bytes (contract); the room is shared memory, so every
        // byte of it is initialised memory in any case.
        unsafe { res.advance(len) };
        let Some(res) = pe.reservation.take() else {
            return einval("zcio_ring_commit: no reservation is open");
        };
        match res.commit(tag) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Producer: drop the open reservation without publishing anything; its
/// pointer is invalid afterwards. Returns 0, or `-EINVAL` if no
/// reservation is open.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_abort(ring: *mut zcio_ring) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        match &mut r.end {
            End::Producer(pe) if pe.reservation.is_some() => {
                pe.reservation = None;
                0
            }
            _ => einval("zcio_ring_abort: no reservation is open"),
        }
    })
}
