//! Shared mappings of memory objects, unmapped on drop.

use std::os::fd::AsFd;
use std::ptr::NonNull;

use rustix::io::Errno;
use rustix::mm::{self, MapFlags, ProtFlags};

/// How a mapping may be accessed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// `PROT_READ`.
    ReadOnly,
    /// `PROT_READ | PROT_WRITE`.
    ReadWrite,
}

/// A `MAP_SHARED` mapping of `len` bytes of a file, unmapped on drop.
///
/// The mapping is raw shared memory: another process may write it at any
/// time (unless the object is sealed), so this type only hands out raw
/// pointers; typed access is the job of the layers above.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    access: Access,
}

// SAFETY: a Mapping is an address range owned by this value; the kernel
// mapping itself is process-wide and may be used from any thread. All reads
// and writes through it go through raw pointers whose synchronisation is the
// caller's (atomics or immutability) responsibility.
unsafe impl Send for Mapping {}
// SAFETY: see `Send`; `&Mapping` only exposes the base pointer and length.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes (`len > 0`) of `fd` at offset 0, shared.
    ///
    /// `populate` pre-faults the page tables (`MAP_POPULATE`), which turns
    /// many minor faults into one system call.
    pub fn map(fd: impl AsFd, len: usize, access: Access, populate: bool) -> Result<Self, Errno> {
        if len == 0 {
            return Err(Errno::INVAL);
        }
        let prot = match access {
            Access::ReadOnly => ProtFlags::READ,
            Access::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
        };
        let mut flags = MapFlags::SHARED;
        if populate {
            flags |= MapFlags::POPULATE;
        }
        // We pass a null hint, so the kernel picks a fresh range that
        // overlaps no existing Rust object; the returned range is owned by the
        // new `Mapping` and released exactly once in `Drop`.
        // SAFETY: as argued just above.
        let ptr = unsafe { mm::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0)? };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(Errno::NOMEM)?;
        Ok(Self { ptr, len, access })
    }

    /// Base address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: zero-length mappings cannot be created.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The protection this mapping was created with.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Try to change this mapping's protection (used by tests to prove the
    /// kernel refuses write access to foreign regions).
    pub fn try_protect(&self, access: Access) -> Result<(), Errno> {
        let prot = match access {
            Access::ReadOnly => mm::MprotectFlags::READ,
            Access::ReadWrite => mm::MprotectFlags::READ | mm::MprotectFlags::WRITE,
        };
        // The range is exactly our own mapping; changing its
        // protection cannot invalidate Rust references because this type
        // never hands out references into the mapping.
        // SAFETY: as argued just above.
        unsafe { mm::mprotect(self.ptr.as_ptr().cast(), self.len, prot) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // `ptr`/`len` came from a successful mmap in `map` and are
        // unmapped only here, once. Users of the memory hold an Arc to the
        // owning region, so no pointer into it outlives this drop.
        // SAFETY: as argued just above.
        let _ = unsafe { mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::memfd;

    #[test]
    fn map_write_read() {
        let fd = memfd::create_sized("t", 8192).unwrap();
        let rw = Mapping::map(&fd, 8192, Access::ReadWrite, false).unwrap();
        let ro = Mapping::map(&fd, 8192, Access::ReadOnly, true).unwrap();
        // SAFETY: both mappings are 8192 bytes long and alive; offset 100 is in range.
        unsafe {
            rw.as_ptr().add(100).write(7);
            assert_eq!(ro.as_ptr().add(100).read_volatile(), 7);
        }
    }

    #[test]
    fn zero_len_refused() {
        let fd = memfd::create_sized("t", 4096).unwrap();
        assert_eq!(
            Mapping::map(&fd, 0, Access::ReadOnly, false).unwrap_err(),
            Errno::INVAL
        );
    }
}
