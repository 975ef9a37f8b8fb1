//! Regions: memfd-backed shared memory objects.
//!
//! A region is created by its *owner*, sealed against shrink and grow at
//! birth (no holder of any fd can truncate it under a peer's mapping), mapped
//! read-write only in the owner, and sealed with `F_SEAL_FUTURE_WRITE` right
//! after that mapping exists, so no further writable mapping or `write(2)` is
//! possible for anyone. Receivers get a separate read-only file description.
//!
//! A *secured* region additionally carries `F_SEAL_WRITE`: the owner has
//! dropped its writable mapping and the kernel guarantees the bytes can never
//! change again. Receivers verify seals themselves on attach
//! ([`Region::attach`]); they never believe a peer's claim.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rustix::fs::SealFlags;
use thiserror::Error;

use crate::sys::memfd;
use crate::sys::mmap::{Access, Mapping};
use crate::sys::Errno;

static NEXT_REGION_ID: AtomicU64 = AtomicU64::new(1);

/// Failure creating, sealing or attaching a region.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegionError {
    /// A system call failed; the errno is kept.
    #[error("{op} failed: {errno}")]
    Os {
        /// The operation that failed.
        op: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
    /// A foreign region lacks `F_SEAL_SHRINK`/`F_SEAL_GROW`, so its owner
    /// could truncate it under our mapping (SIGBUS); refused.
    #[error("foreign region is not sealed against shrinking (seals {0:#x}); refusing to map it")]
    NotSizeSealed(u32),
    /// A foreign region is smaller than the peer claimed.
    #[error("foreign region is {actual} bytes but the peer claimed {claimed}")]
    SizeMismatch {
        /// Size the peer announced.
        claimed: u64,
        /// Size the kernel reports.
        actual: u64,
    },
    /// Zero or not page-aligned length.
    #[error("region length {0} is not a non-zero multiple of the page size")]
    BadLength(u64),
    /// More memory than the machine has available now (`MemAvailable`):
    /// refused before anything is allocated, instead of the kernel's OOM
    /// killer ending some process when the pages are touched.
    #[error("cannot create a region of {len} bytes: only {available} bytes of memory are available (MemAvailable in /proc/meminfo); ask for less")]
    NoMemory {
        /// Bytes asked for.
        len: u64,
        /// Bytes available.
        available: u64,
    },
}

fn os(op: &'static str) -> impl FnOnce(Errno) -> RegionError {
    move |errno| RegionError::Os { op, errno }
}

/// Who may write a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// Created by this process; the mapping is writable until secured.
    Owned,
    /// Received from a peer; mapped read-only.
    Foreign,
}

/// A mapped shared memory object. Shared by `Arc` among the buffers that
/// point into it; unmapped and closed when the last one goes.
#[derive(Debug)]
pub struct Region {
    id: u64,
    len: usize,
    map: Mapping,
    /// Owner: the read-write fd. Foreign: the read-only fd we were given.
    fd: OwnedFd,
    /// Owner only: the read-only description handed to receivers, opened
    /// on first use (a secured region shares `fd` itself: it is sealed).
    share_fd: OnceLock<OwnedFd>,
    ownership: Ownership,
    secured: bool,
    /// Carries exactly one buffer and is passed with every transfer.
    single_use: bool,
}

impl Region {
    /// Bytes of memory available now without swapping (`MemAvailable` in
    /// `/proc/meminfo`), if the kernel says: what a region may take at most
    /// (see [`RegionError::NoMemory`]).
    pub fn memory_available() -> Option<u64> {
        crate::sys::memory_available()
    }

    /// Create a region of `len` bytes (a non-zero multiple of the page size)
    /// owned and mapped read-write by this process. Nobody else can ever map
    /// it writable. `populate` pre-faults it.
    pub fn create(name: &str, len: usize, populate: bool) -> Result<Self, RegionError> {
        let ps = crate::sys::page_size();
        if len == 0 || !len.is_multiple_of(ps) {
            return Err(RegionError::BadLength(len as u64));
        }
        if let Some(available) = crate::sys::memory_available() {
            if len as u64 > available {
                return Err(RegionError::NoMemory {
                    len: len as u64,
                    available,
                });
            }
        }
        let fd = memfd::create_sized(name, len as u64).map_err(os("memfd_create"))?;
        // Under `advise`, pages allocated without a mapping (fallocate) are
        // never huge: a mapping that may get huge pages populates itself.
        let huge_advised = len >= crate::sys::thp::HUGE
            && crate::sys::thp::shmem_huge() == crate::sys::thp::ShmemHuge::Advise;
        if populate && !huge_advised {
            // Allocating the pages in one call is much cheaper than one
            // page fault each; the populated mapping then only maps them.
            memfd::allocate(&fd, len as u64).map_err(os("fallocate"))?;
        }
        let map = Mapping::map(&fd, len, Access::ReadWrite, populate).map_err(os("mmap"))?;
        if populate && huge_advised && !map.is_huge_placed() {
            // Mapped the usual way after all: allocate as above.
            memfd::allocate(&fd, len as u64).map_err(os("fallocate"))?;
        }
        // The owner's mapping exists; from now on nobody can add a writable one.
        memfd::add_seals(&fd, SealFlags::FUTURE_WRITE).map_err(os("F_SEAL_FUTURE_WRITE"))?;
        Ok(Self {
            id: NEXT_REGION_ID.fetch_add(1, Ordering::Relaxed),
            len,
            map,
            fd,
            share_fd: OnceLock::new(),
            ownership: Ownership::Owned,
            secured: false,
            single_use: false,
        })
    }

    /// Secure an owned region: replace the writable mapping by a read-only
    /// one at the same address, then seal with `F_SEAL_WRITE` (permanent; refused by the kernel
    /// while any writable mapping exists). On error the region is left mapped
    /// read-only and not secured.
    pub fn secure(&mut self) -> Result<(), RegionError> {
        if self.ownership != Ownership::Owned || self.secured {
            return Ok(());
        }
        // The read-only mapping replaces the writable one at the same
        // address, so pointers the owner kept into the buffer (a Python
        // array over it, say) still read the same bytes; writes fault.
        self.map
            .remap_read_only(&self.fd)
            .map_err(os("mmap read-only"))?;
        // The kernel refuses F_SEAL_WRITE (EBUSY) while any page still has
        // a transient extra reference (it waits a little itself); retry a
        // few times before giving up.
        let mut attempt = 0;
        loop {
            match memfd::add_seals(&self.fd, SealFlags::WRITE) {
                Ok(()) => break,
                Err(Errno::BUSY) if attempt < 5 => {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1 << attempt));
                }
                Err(e) => {
                    return Err(RegionError::Os {
                        op: "F_SEAL_WRITE",
                        errno: e,
                    })
                }
            }
        }
        self.secured = true;
        Ok(())
    }

    /// Attach a region received from a peer: check its seals and real size,
    /// then map it read-only. `claimed_len` is what the peer said; the
    /// kernel's size must be at least that (we map only `claimed_len`).
    pub fn attach(fd: OwnedFd, claimed_len: u64, populate: bool) -> Result<Self, RegionError> {
        let ps = crate::sys::page_size() as u64;
        if claimed_len == 0 || !claimed_len.is_multiple_of(ps) || claimed_len > isize::MAX as u64 {
            return Err(RegionError::BadLength(claimed_len));
        }
        let seals = memfd::seals(&fd).map_err(os("F_GET_SEALS"))?;
        if !seals.contains(SealFlags::SHRINK | SealFlags::GROW) {
            return Err(RegionError::NotSizeSealed(seals.bits()));
        }
        let actual = memfd::size(&fd).map_err(os("fstat"))?;
        if actual < claimed_len {
            return Err(RegionError::SizeMismatch {
                claimed: claimed_len,
                actual,
            });
        }
        let len = claimed_len as usize;
        // Pre-fault only memory the owner has really allocated: populating
        // a sparse region would make *us* allocate (and be charged for) the
        // holes a hostile peer left.
        let populate = populate && memfd::first_hole(&fd).is_ok_and(|h| h >= claimed_len);
        let map = Mapping::map(&fd, len, Access::ReadOnly, populate).map_err(os("mmap"))?;
        Ok(Self {
            id: NEXT_REGION_ID.fetch_add(1, Ordering::Relaxed),
            len,
            map,
            fd,
            share_fd: OnceLock::new(),
            ownership: Ownership::Foreign,
            secured: seals.contains(SealFlags::WRITE),
            single_use: false,
        })
    }

    /// Mark this region as carrying a single buffer (uncached transfers).
    pub fn mark_single_use(&mut self) {
        self.single_use = true;
    }

    /// Whether this region carries a single buffer and is passed with every
    /// transfer instead of once per channel.
    pub fn is_single_use(&self) -> bool {
        self.single_use
    }

    /// Process-local identity (never reused within a process).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Bytes of this process's mapping of the region that the kernel maps
    /// with huge pages now (0 when it uses normal pages; see
    /// `Pool::huge_pages`). Reads `/proc/self/smaps`: not for hot paths.
    pub fn huge_bytes(&self) -> u64 {
        self.map.huge_bytes().unwrap_or(0)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (regions are never empty).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Base address of this process's mapping.
    pub fn base(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// Whether this process may write the region through its mapping.
    pub fn is_writable(&self) -> bool {
        self.map.access() == Access::ReadWrite
    }

    /// Owned or foreign.
    pub fn ownership(&self) -> Ownership {
        self.ownership
    }

    /// Whether the kernel guarantees the bytes never change (`F_SEAL_WRITE`
    /// verified by this process).
    pub fn is_secured(&self) -> bool {
        self.secured
    }

    /// The descriptor to pass to a peer: a read-only description for owned
    /// volatile regions (opened on first use), the region's own fd once it
    /// is secured (sealed: no fd can write it), and the one we received for
    /// foreign regions (forwarding).
    pub fn share_fd(&self) -> Result<BorrowedFd<'_>, RegionError> {
        if self.ownership == Ownership::Foreign || self.secured {
            return Ok(self.fd.as_fd());
        }
        if let Some(fd) = self.share_fd.get() {
            return Ok(fd.as_fd());
        }
        let ro = memfd::reopen_readonly(&self.fd).map_err(os("reopen read-only"))?;
        Ok(self.share_fd.get_or_init(|| ro).as_fd())
    }

    /// The underlying fd (read-write for owned regions).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The seals the kernel reports now.
    pub fn seals(&self) -> Result<SealFlags, RegionError> {
        memfd::seals(&self.fd).map_err(os("F_GET_SEALS"))
    }
}

impl RegionError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind as K;
        match self {
            Self::Os { .. } => K::Os,
            Self::NoMemory { .. } => K::OutOfMemory,
            Self::BadLength(_) => K::InvalidInput,
            // A peer's region that breaks the sealing/size contract.
            Self::NotSizeSealed(_) | Self::SizeMismatch { .. } => K::Protocol,
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Os { errno, .. } => Some(*errno),
            Self::NoMemory { .. } => Some(Errno::NOMEM),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn owner_writes_receiver_cannot_map_writable() {
        let r = Region::create("t", 8192, false).unwrap();
        // SAFETY: offset 0 is inside the 8192-byte read-write mapping.
        unsafe { r.base().write(42) };
        let ro = memfd::reopen_readonly(r.share_fd().unwrap()).unwrap();
        assert_eq!(
            Mapping::map(&ro, 8192, Access::ReadWrite, false).unwrap_err(),
            Errno::ACCESS
        );
        // Reopening read-write through /proc is possible for the same uid,
        // but F_SEAL_FUTURE_WRITE refuses the writable mapping.
        let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&ro));
        let rw = rustix::fs::open(
            path.as_str(),
            rustix::fs::OFlags::RDWR,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        assert_eq!(
            Mapping::map(&rw, 8192, Access::ReadWrite, false).unwrap_err(),
            Errno::PERM
        );
        let att = Region::attach(ro, 8192, false).unwrap();
        // SAFETY: offset 0 is inside the 8192-byte mapping.
        assert_eq!(unsafe { att.base().read_volatile() }, 42);
        assert!(!att.is_secured());
        assert!(!att.is_writable());
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn secure_seals_and_blocks_owner_writes() {
        let mut r = Region::create("t", 4096, false).unwrap();
        // SAFETY: offset 0 is inside the mapping.
        unsafe { r.base().write(1) };
        let base = r.base();
        r.secure().unwrap();
        assert!(r.is_secured());
        assert!(r.seals().unwrap().contains(SealFlags::WRITE));
        assert_eq!(r.base(), base, "read-only at the same address");
        // SAFETY: offset 0 is inside the (now read-only) mapping.
        assert_eq!(unsafe { base.read_volatile() }, 1);
        assert_eq!(
            r.map.try_protect(Access::ReadWrite).unwrap_err(),
            Errno::ACCESS,
            "the new mapping cannot be made writable"
        );
        assert_eq!(
            Mapping::map(r.fd(), 4096, Access::ReadWrite, false).unwrap_err(),
            Errno::PERM
        );
        let att = Region::attach(memfd::reopen_readonly(r.fd()).unwrap(), 4096, false).unwrap();
        assert!(att.is_secured());
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn attach_refuses_unsealed_and_short() {
        let fd = rustix::fs::memfd_create("t", rustix::fs::MemfdFlags::ALLOW_SEALING).unwrap();
        rustix::fs::ftruncate(&fd, 4096).unwrap();
        assert!(matches!(
            Region::attach(fd, 4096, false),
            Err(RegionError::NotSizeSealed(_))
        ));
        let fd = memfd::create_sized("t", 4096).unwrap();
        assert!(matches!(
            Region::attach(fd, 8192, false),
            Err(RegionError::SizeMismatch { .. })
        ));
        let fd = memfd::create_sized("t", 4096).unwrap();
        assert!(matches!(
            Region::attach(fd, 100, false),
            Err(RegionError::BadLength(100))
        ));
    }
}
