//! Page-table manipulation inside ranges a caller owns: protection
//! changes, moving pages with `mremap`, fixed private mappings of a file
//! over a range, placeholders, and wiring (`mlock`).
//!
//! Every function here is a single system call that neither allocates
//! nor takes a lock, so the TCOW fault handler may call them from a
//! signal handler. They are `unsafe` because they replace or change
//! mappings at caller-chosen addresses: the caller must own the range
//! (no Rust object of someone else lives there).

// Parts of this toolbox serve only zcio's own tests (the `internals` feature).

use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::io::Errno;

fn check(ret: libc::c_int) -> Result<(), Errno> {
    if ret == 0 {
        Ok(())
    } else {
        Err(Errno::from_raw_os_error(last_errno()))
    }
}

fn last_errno() -> i32 {
    // SAFETY: `__errno_location` returns this thread's errno slot, valid
    // for the thread's life; reading it is async-signal-safe.
    unsafe { *libc::__errno_location() }
}

/// Page protection of a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Prot {
    /// Read and write.
    ReadWrite = 0,
    /// Read only (writes fault).
    ReadOnly = 1,
    /// No access (every access faults).
    None = 2,
}

impl Prot {
    fn bits(self) -> libc::c_int {
        match self {
            Prot::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
            Prot::ReadOnly => libc::PROT_READ,
            Prot::None => libc::PROT_NONE,
        }
    }
}

/// `mprotect(addr, len, prot)`.
///
/// # Safety
/// `[addr, addr + len)` is mapped and owned by the caller; no Rust
/// reference into it is used for an access the new protection forbids.
pub unsafe fn protect(addr: usize, len: usize, prot: Prot) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    check(unsafe { libc::mprotect(addr as *mut libc::c_void, len, prot.bits()) })
}

/// Move the pages mapped at `[from, from + len)` to `to`, replacing
/// whatever was mapped there in one step. With `MREMAP_DONTUNMAP` (Linux
/// 5.13+ for shared mappings) the source range stays mapped to the same
/// file pages, so the move never leaves a hole another thread's `mmap`
/// could take, and an access racing the move just faults in again.
///
/// # Safety
/// Both ranges are owned by the caller and `from` is one mapping (one
/// VMA).
pub unsafe fn move_pages(from: usize, len: usize, to: usize) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let p = unsafe {
        libc::mremap(
            from as *mut libc::c_void,
            len,
            len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | libc::MREMAP_DONTUNMAP,
            to as *mut libc::c_void,
        )
    };
    if p == libc::MAP_FAILED {
        Err(Errno::from_raw_os_error(last_errno()))
    } else {
        Ok(())
    }
}

/// Map `len` bytes of `fd` at `offset` over `[addr, addr + len)`,
/// `MAP_PRIVATE` (the caller's writes stay private) and readable and
/// writable; `populate` pre-faults it for reading. (It is mapped
/// read-only first and made writable after populating: populating a
/// writable private mapping would copy every page.)
///
/// # Safety
/// The range is owned by the caller; whatever was mapped there is gone.
pub unsafe fn map_private_fixed(
    addr: usize,
    len: usize,
    fd: BorrowedFd<'_>,
    offset: u64,
    populate: bool,
) -> Result<(), Errno> {
    let mut flags = libc::MAP_PRIVATE | libc::MAP_FIXED;
    if populate {
        flags |= libc::MAP_POPULATE;
    }
    // SAFETY: the caller's contract.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ,
            flags,
            fd.as_raw_fd(),
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Errno::from_raw_os_error(last_errno()));
    }
    // SAFETY: the range was just mapped by us.
    unsafe { protect(addr, len, Prot::ReadWrite) }
}

/// Fill `[addr, addr + len)` with an inaccessible anonymous placeholder
/// (so the kernel never places an unrelated mapping in a hole of ours).
///
/// # Safety
/// The range is owned by the caller; whatever was mapped there is gone.
pub unsafe fn placeholder(addr: usize, len: usize) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(Errno::from_raw_os_error(last_errno()))
    } else {
        Ok(())
    }
}

/// Reserve `len` bytes of address space (inaccessible, no memory); the
/// caller owns the range and unmaps it with [`release`].
pub fn reserve(len: usize) -> Result<usize, Errno> {
    // A null hint: the kernel picks a range that overlaps nothing.
    // SAFETY: as argued just above.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(Errno::from_raw_os_error(last_errno()))
    } else {
        Ok(p as usize)
    }
}

/// Unmap `[addr, addr + len)`.
///
/// # Safety
/// The range is owned by the caller and nothing uses it afterwards.
pub unsafe fn release(addr: usize, len: usize) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    check(unsafe { libc::munmap(addr as *mut libc::c_void, len) })
}

/// Wire (`mlock`) or unwire (`munlock`) a range.
///
/// # Safety
/// The range is mapped and owned by the caller.
pub unsafe fn wire(addr: usize, len: usize, on: bool) -> Result<(), Errno> {
    // SAFETY: the caller's contract.
    check(unsafe {
        if on {
            libc::mlock(addr as *const libc::c_void, len)
        } else {
            libc::munlock(addr as *const libc::c_void, len)
        }
    })
}
