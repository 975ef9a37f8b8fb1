//! Received messages: length, slices in place, copy-out, write to an fd,
//! release.

use std::ffi::{c_int, c_void};
use std::os::fd::BorrowedFd;

use zcio::Msg;

use crate::error::{einval, fail_msg, guard};
use crate::ssize_t;

/// A received message (opaque): an immutable list of slices of the
/// sender's buffers. Yours until `zcio_msg_release`. Reading calls may be
/// made from several threads at once.
pub struct zcio_msg {
    pub(crate) msg: Msg,
}

/// One slice of a message, in place: `len` bytes at `data`.
///
/// Volatile rule: if the message is volatile (`zcio_msg_is_volatile`),
/// the sender can still write these bytes. Read each byte you rely on
/// once — copy it out (`zcio_msg_read`, `memcpy`, or a `volatile` read) —
/// validate the copy and use the copy; never check a value in place and
/// then use it in place again. Never write through `data` (the pages are
/// mapped read-only: that would crash).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_slice {
    /// First byte, valid until the message is released.
    pub data: *const c_void,
    /// Length in bytes (never 0).
    pub len: usize,
}

/// The message behind `msg`.
///
/// # Safety
/// `msg` is NULL or a live message.
unsafe fn get<'a>(msg: *const zcio_msg) -> Option<&'a Msg> {
    // SAFETY: the caller's contract.
    unsafe { msg.as_ref() }.map(|m| &m.msg)
}

/// Total length in bytes (0 for NULL).
///
/// # Safety
/// `msg` is NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_len(msg: *const zcio_msg) -> usize {
    // SAFETY: the caller's contract.
    guard(|| unsafe { get(msg) }.map_or(0, Msg::len))
}

/// Store up to `n` slices, in order, into `out[0..n]` and return how many
/// the message has in all (like `snprintf`: call with `n` 0 to ask, at
/// most 64). The pointers stay valid until `zcio_msg_release`; see
/// `struct zcio_slice` for the volatile rule. Returns `-EINVAL` for a NULL
/// `msg`, or a NULL `out` with `n` > 0.
///
/// # Safety
/// `msg` is NULL or a live message; `out` is valid for writing `n` slices.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_slices(
    msg: *const zcio_msg,
    out: *mut zcio_slice,
    n: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(m) = (unsafe { get(msg) }) else {
            return einval("zcio_msg_slices: msg is NULL") as ssize_t;
        };
        if out.is_null() && n > 0 {
            return einval("zcio_msg_slices: out is NULL") as ssize_t;
        }
        for (i, v) in m.chunks().take(n).enumerate() {
            let s = zcio_slice {
                data: v.as_ptr().cast(),
                len: v.len(),
            };
            // SAFETY: `i < n` and `out` is writable for `n` slices.
            unsafe { out.add(i).write(s) };
        }
        m.slice_count() as ssize_t
    })
}

/// Copy up to `len` bytes starting at byte `off` of the message into
/// `buf`; returns how many were copied (0 when `off` is at or beyond the
/// end), or `-EINVAL`. Each byte is read once: the copy is yours and
/// cannot change, even if the message is volatile.
///
/// # Safety
/// `msg` is NULL or a live message; `buf` is valid for writing `len`
/// bytes and is memory of this process that no other process can write
/// during the call (the point is a private copy).
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_read(
    msg: *const zcio_msg,
    off: usize,
    buf: *mut c_void,
    len: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(m) = (unsafe { get(msg) }) else {
            return einval("zcio_msg_read: msg is NULL") as ssize_t;
        };
        if len == 0 {
            return 0;
        }
        if buf.is_null() || len > isize::MAX as usize {
            return einval("zcio_msg_read: buf is NULL or len too large") as ssize_t;
        }
        // SAFETY: writable for `len` bytes and private to this process
        // during the call (contract); only written to.
        let dst = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        m.read_at(off, dst) as ssize_t
    })
}

/// 1 if the sender can still write the message's bytes (a pool buffer:
/// apply the volatile rule of `struct zcio_slice`), 0 if no process can
/// (secured buffers, sealed by the kernel and checked here), `-EINVAL`
/// for NULL.
///
/// # Safety
/// `msg` is NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_is_volatile(msg: *const zcio_msg) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { get(msg) } {
            Some(m) => c_int::from(!m.is_immutable()),
            None => einval("zcio_msg_is_volatile: msg is NULL"),
        }
    })
}

/// 1 if every slice of the message is a secured buffer (sealed by the
/// kernel: no process can write it, checked when it was received), 0 if
/// not, `-EINVAL` for NULL. Unlike `zcio_msg_is_volatile`, a peer trusted
/// with `zcio_channel_trust_peer` does not make this 1.
///
/// # Safety
/// `msg` is NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_is_secured(msg: *const zcio_msg) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { get(msg) } {
            Some(m) => c_int::from(m.is_secured()),
            None => einval("zcio_msg_is_secured: msg is NULL"),
        }
    })
}

/// Append the slices of `tail` to `msg` (no byte is copied). On success
/// `tail`'s handle is freed (its slices now belong to `msg`); on failure
/// (`-EMSGSIZE`: more than 64 slices together) both stay as they were.
/// Returns 0, `-EMSGSIZE` or `-EINVAL`.
///
/// # Safety
/// `msg` and `tail` are NULL or live messages, distinct, and not in use by
/// another thread during the call.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_join(msg: *mut zcio_msg, tail: *mut zcio_msg) -> c_int {
    guard(|| {
        if msg.is_null() || tail.is_null() || std::ptr::eq(msg, tail) {
            return einval("zcio_msg_join: msg or tail is NULL, or they are the same message");
        }
        // SAFETY: live, distinct, unshared for the call (contract).
        let (m, t) = unsafe { (&mut *msg, &mut *tail) };
        match m.msg.join(std::mem::take(&mut t.msg)) {
            Ok(()) => {
                // SAFETY: a live handle (contract); its slices moved to `msg`.
                drop(unsafe { Box::from_raw(tail) });
                0
            }
            Err(e) => {
                let (err, back) = e.into_parts();
                t.msg = back;
                fail_msg(libc::EMSGSIZE, format_args!("zcio_msg_join: {err}"))
            }
        }
    })
}

/// Split `msg` at byte `at`: `msg` keeps bytes `[0, at)` and the rest goes
/// to a new message stored in `*tail` (release both; no byte is copied, a
/// slice cut in two is shared). Returns 0, `-ERANGE` (`at` > the length;
/// nothing changes) or `-EINVAL`.
///
/// # Safety
/// `msg` is NULL or a live message not in use by another thread during the
/// call; `tail` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_split(
    msg: *mut zcio_msg,
    at: usize,
    tail: *mut *mut zcio_msg,
) -> c_int {
    guard(|| {
        if msg.is_null() || tail.is_null() {
            return einval("zcio_msg_split: msg or tail is NULL");
        }
        // SAFETY: live and unshared for the call (contract).
        let m = unsafe { &mut *msg };
        match m.msg.split_off(at) {
            Ok(t) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { tail.write(Box::into_raw(Box::new(zcio_msg { msg: t }))) };
                0
            }
            Err(e) => fail_msg(libc::ERANGE, format_args!("zcio_msg_split: {e}")),
        }
    })
}

/// Drop `front` bytes from the start and `back` bytes from the end of
/// `msg` (slices entirely cut away are released). Returns 0, `-ERANGE`
/// (`front + back` > the length; nothing changes) or `-EINVAL`.
///
/// # Safety
/// `msg` is NULL or a live message not in use by another thread during the
/// call.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_clip(msg: *mut zcio_msg, front: usize, back: usize) -> c_int {
    guard(|| {
        if msg.is_null() {
            return einval("zcio_msg_clip: msg is NULL");
        }
        // SAFETY: live and unshared for the call (contract).
        let m = unsafe { &mut *msg };
        let len = m.msg.len();
        if front.checked_add(back).is_none_or(|n| n > len) {
            return fail_msg(
                libc::ERANGE,
                format_args!(
                    "zcio_msg_clip: {front} + {back} bytes is more than the message's {len}"
                ),
            );
        }
        match m.msg.clip_back(back).and_then(|()| m.msg.clip_front(front)) {
            Ok(()) => 0,
            Err(e) => fail_msg(libc::ERANGE, format_args!("zcio_msg_clip: {e}")),
        }
    })
}

/// Write the message to file descriptor `fd` with one `writev(2)`
/// straight from the shared pages (no copy in this process). Returns the
/// bytes written (possibly fewer, as `writev`) or a negative errno.
///
/// # Safety
/// `msg` is NULL or a live message; `fd` is an open descriptor.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_write_to(msg: *const zcio_msg, fd: c_int) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(m) = (unsafe { get(msg) }) else {
            return einval("zcio_msg_write_to: msg is NULL") as ssize_t;
        };
        if fd < 0 {
            return fail_msg(libc::EBADF, "zcio_msg_write_to: negative fd") as ssize_t;
        }
        // SAFETY: the caller promises an open descriptor for the call.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        match m.write_to(fd) {
            Ok(n) => n as ssize_t,
            Err(e) => fail_msg(
                e.raw_os_error().unwrap_or(libc::EIO),
                format_args!("zcio_msg_write_to: {e}"),
            ) as ssize_t,
        }
    })
}

/// Release the message (NULL is ignored): a deallocation notice goes back
/// to the sender, whose buffers return to its pool once every receiver
/// released them. Slice pointers are invalid afterwards.
///
/// # Safety
/// `msg` is NULL or a live message, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_release(msg: *mut zcio_msg) {
    guard(|| {
        if !msg.is_null() {
            // SAFETY: a live handle from `zcio_recv`, given up here.
            drop(unsafe { Box::from_raw(msg) });
        }
    })
}
