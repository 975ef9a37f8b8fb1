//! `writev(2)` from raw `iovec`s: hands bytes in shared memory to the
//! kernel without forming a Rust reference to them (the kernel reads them
//! itself; `std::io::IoSlice` would need a `&[u8]`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Most `iovec`s one call takes (`IOV_MAX` on Linux).
pub const IOV_MAX: usize = 1024;

/// `writev(fd, iov)`, retried on `EINTR`. Returns the bytes written.
///
/// Every `iovec` must describe memory mapped readable for the duration of
/// the call; the kernel validates the ranges itself and answers `EFAULT`
/// for unmapped ones, so a wrong range is an error, never memory unsafety
/// in this process.
pub fn writev_raw(fd: BorrowedFd<'_>, iov: &[libc::iovec]) -> io::Result<usize> {
    let n = iov.len().min(IOV_MAX);
    loop {
        // SAFETY: `iov` points to `n` initialised iovec structs that live
        // across the call; the kernel only reads the memory they describe
        // and checks each range itself (EFAULT for bad ones).
        let r = unsafe { libc::writev(fd.as_raw_fd(), iov.as_ptr(), n as libc::c_int) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
