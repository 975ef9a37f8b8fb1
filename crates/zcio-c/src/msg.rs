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
