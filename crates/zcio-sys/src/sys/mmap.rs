//! Shared mappings of memory objects, unmapped on drop.

use std::os::fd::{AsFd, BorrowedFd};
use std::ptr::NonNull;

use rustix::io::Errno;
use rustix::mm::{self, Advice, MapFlags, ProtFlags};

use crate::sys::thp;

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
    /// Placed 2 MiB-aligned and advised for huge pages (`map_huge`).
    huge: bool,
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
    ///
    /// A mapping of at least 2 MiB, when the kernel offers huge pages for
    /// shared memory (`crate::sys::thp`), is placed at a 2 MiB-aligned
    /// address and advised `MADV_HUGEPAGE`, so the kernel can map it with
    /// huge pages (far fewer TLB misses for large messages); if that fails
    /// the mapping is made the usual way.
    pub fn map(fd: impl AsFd, len: usize, access: Access, populate: bool) -> Result<Self, Errno> {
        if len == 0 {
            return Err(Errno::INVAL);
        }
        if len >= thp::HUGE && thp::shmem_huge().offered() {
            if let Ok(m) = Self::map_huge(fd.as_fd(), len, access, populate) {
                return Ok(m);
            }
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
        Ok(Self {
            ptr,
            len,
            access,
            huge: false,
        })
    }

    /// [`Mapping::map`] at a 2 MiB-aligned address, advised for huge
    /// pages; populated (if asked) only after the advice, so the pages it
    /// faults in can be huge.
    fn map_huge(
        fd: BorrowedFd<'_>,
        len: usize,
        access: Access,
        populate: bool,
    ) -> Result<Self, Errno> {
        let prot = match access {
            Access::ReadOnly => ProtFlags::READ,
            Access::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
        };
        let span = len.next_multiple_of(crate::sys::page_size());
        let reserve = span.checked_add(thp::HUGE).ok_or(Errno::NOMEM)?;
        // Find a free range with room to align inside it and give it back
        // at once: the file is then mapped at the aligned address only if
        // that is still free (MAP_FIXED_NOREPLACE), so no mapping of anyone
        // else is ever replaced; if another thread took it meanwhile, the
        // caller maps the usual way.
        // SAFETY: null hint: a fresh range nothing uses, unmapped just below.
        let base = unsafe {
            mm::mmap_anonymous(
                std::ptr::null_mut(),
                reserve,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )?
        } as usize;
        // SAFETY: exactly the range mapped just above, which nothing uses.
        let _ = unsafe { mm::munmap(base as *mut std::ffi::c_void, reserve) };
        let aligned = base.next_multiple_of(thp::HUGE);
        // SAFETY: MAP_FIXED_NOREPLACE fails (EEXIST) rather than replace
        // anything; the new range belongs to the `Mapping` built below.
        let got = unsafe {
            mm::mmap(
                aligned as *mut std::ffi::c_void,
                len,
                prot,
                MapFlags::SHARED | MapFlags::FIXED_NOREPLACE,
                fd,
                0,
            )?
        };
        if got as usize != aligned {
            // A kernel without MAP_FIXED_NOREPLACE (before 4.17) took the
            // address as a hint and mapped elsewhere.
            // SAFETY: the range the kernel just returned is ours alone.
            let _ = unsafe { mm::munmap(got, len) };
            return Err(Errno::EXIST);
        }
        let ptr = NonNull::new(aligned as *mut u8).ok_or(Errno::NOMEM)?;
        let map = Self {
            ptr,
            len,
            access,
            huge: true,
        };
        // Advice only: a kernel that refuses it maps normal pages.
        // SAFETY: the range is exactly our mapping.
        let _ = unsafe { mm::madvise(map.ptr.as_ptr().cast(), len, Advice::LinuxHugepage) };
        if populate {
            let how = match access {
                Access::ReadOnly => Advice::LinuxPopulateRead,
                Access::ReadWrite => Advice::LinuxPopulateWrite,
            };
            // SAFETY: as above; populating only faults pages in.
            let done = unsafe { mm::madvise(map.ptr.as_ptr().cast(), len, how) };
            if done.is_err() && access == Access::ReadWrite {
                // No MADV_POPULATE_WRITE (before 5.14), or no memory:
                // allocate through the file, which says ENOMEM/ENOSPC
                // cleanly (the mapping is dropped with the error).
                crate::sys::memfd::allocate(fd, len as u64)?;
            }
        }
        Ok(map)
    }

    /// Whether this mapping was placed and advised for huge pages (the
    /// kernel still decides page by page; see [`Mapping::huge_bytes`]).
    pub fn is_huge_placed(&self) -> bool {
        self.huge
    }

    /// Bytes of this mapping the kernel maps with huge pages now (`None`:
    /// it does not say).
    pub fn huge_bytes(&self) -> Option<u64> {
        thp::pmd_mapped_bytes(self.ptr.as_ptr() as usize)
    }

    /// Base address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: zero-length mappings cannot be created.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The protection this mapping was created with.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Replace this writable mapping of `fd` by a read-only one at the same
    /// address (`MAP_FIXED`), atomically: pointers into it stay valid for
    /// reading, writes through them now fault, and the old writable
    /// mapping is gone (so the kernel accepts `F_SEAL_WRITE` on `fd`).
    /// `fd` must be the object this mapping maps.
    pub fn remap_read_only(&mut self, fd: impl AsFd) -> Result<(), Errno> {
        // The range is exactly our own mapping (owned by `self`, never
        // handed out as a Rust reference), so replacing it in place cannot
        // invalidate any Rust object; MAP_FIXED swaps the pages atomically,
        // so no other mapping can land in the range meanwhile.
        // SAFETY: as argued just above.
        let p = unsafe {
            mm::mmap(
                self.ptr.as_ptr().cast(),
                self.len,
                ProtFlags::READ,
                MapFlags::SHARED | MapFlags::FIXED,
                fd,
                0,
            )?
        };
        if p.cast::<u8>() != self.ptr.as_ptr() {
            return Err(Errno::FAULT);
        }
        self.access = Access::ReadOnly;
        Ok(())
    }

    /// Try to change this mapping's protection (used by tests to prove the
    /// kernel refuses write access to foreign regions).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
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

/// A ring file mapped for wrap-free access: the first `head_len` bytes of
/// the file (headers), then its data area (`data_len` bytes at file offset
/// `head_len`) mapped *twice*, back to back. A block that wraps around the
/// end of the data area is therefore contiguous in memory: bytes
/// `[i, i + n)` of the data area for any `i < data_len`, `n <= data_len`
/// are readable at `data() + i`.
///
/// The whole range is registered with [`crate::sys::sigbus`], so a peer
/// truncating the file cannot kill us; check [`RingMapping::truncated`].
#[derive(Debug)]
pub struct RingMapping {
    base: NonNull<u8>,
    total: usize,
    head_len: usize,
    data_len: usize,
    access: Access,
    guard: Option<crate::sys::sigbus::Guard>,
}

// SAFETY: as for `Mapping`: an owned address range, raw pointers only.
unsafe impl Send for RingMapping {}
// SAFETY: as for `Mapping`.
unsafe impl Sync for RingMapping {}

/// The most of a ring's data area [`RingMapping::populate`] pre-faults:
/// the size of a `zcio bridge import` ring, whole, for about 60 ms of a ring
/// end's attach on the 2-vCPU VM (64 MiB took 40 ms, both mappings of a 1
/// GiB ring 1.3 s), so that attaching to a GiB-sized ring does not take
/// seconds.
pub const POPULATE_MAX: usize = 128 << 20;

impl RingMapping {
    /// Map `fd` as described on the type. `head_len` and `data_len` must be
    /// page multiples, `head_len > 0`; `data_len` may be 0 (index rings).
    pub fn map(
        fd: impl AsFd,
        head_len: usize,
        data_len: usize,
        access: Access,
    ) -> Result<Self, Errno> {
        let ps = crate::sys::page_size();
        if head_len == 0 || !head_len.is_multiple_of(ps) || !data_len.is_multiple_of(ps) {
            return Err(Errno::INVAL);
        }
        let total = data_len
            .checked_mul(2)
            .and_then(|d| d.checked_add(head_len))
            .ok_or(Errno::NOMEM)?;
        let prot = match access {
            Access::ReadOnly => ProtFlags::READ,
            Access::ReadWrite => ProtFlags::READ | ProtFlags::WRITE,
        };
        // Reserve the whole range first so the fixed mappings below land in
        // addresses nobody else owns.
        // SAFETY: null hint, fresh anonymous range owned by the new value.
        let base = unsafe {
            mm::mmap_anonymous(
                std::ptr::null_mut(),
                total,
                ProtFlags::empty(),
                MapFlags::PRIVATE,
            )?
        };
        let base = NonNull::new(base.cast::<u8>()).ok_or(Errno::NOMEM)?;
        let mut me = Self {
            base,
            total,
            head_len,
            data_len,
            access,
            guard: None,
        };
        let fd = fd.as_fd();
        let parts = [
            (0usize, head_len, 0u64),
            (head_len, data_len, head_len as u64),
            (head_len + data_len, data_len, head_len as u64),
        ];
        for (off, len, file_off) in parts {
            if len == 0 {
                continue;
            }
            // `[base + off, base + off + len)` lies inside the range we
            // reserved above and own (`me` unmaps it on error).
            // SAFETY: as argued just above.
            unsafe {
                mm::mmap(
                    me.base.as_ptr().add(off).cast(),
                    len,
                    prot,
                    MapFlags::SHARED | MapFlags::FIXED,
                    fd,
                    file_off,
                )?
            };
        }
        me.guard = Some(crate::sys::sigbus::Guard::protect(
            me.base.as_ptr(),
            me.total,
        ));
        Ok(me)
    }

    /// Pre-fault the page tables of the data area's first mapping (at most
    /// [`POPULATE_MAX`] bytes of it), for writing (`write`, a read-write
    /// mapping) or reading: a long-lived ring end then takes no page fault
    /// per new page on its first pass over the ring (16 per 64 KiB block
    /// with 4 KiB pages). The pages themselves exist already (`fallocate`
    /// at creation); the second mapping, touched only by blocks that wrap,
    /// and the rest of a larger ring fault as usual. Best effort: kernels
    /// without `MADV_POPULATE_*` (before 5.14) and a file truncated under us
    /// fault as usual (the call reports an error, never `SIGBUS`).
    pub fn populate(&self, write: bool) {
        let len = self.data_len.min(POPULATE_MAX);
        if len == 0 {
            return;
        }
        let advice = if write && self.access == Access::ReadWrite {
            mm::Advice::LinuxPopulateWrite
        } else {
            mm::Advice::LinuxPopulateRead
        };
        // SAFETY: `[data, data + len)` is inside the range this value owns
        // and maps (the first data mapping); populating the page tables
        // changes neither the mapping nor any byte of it.
        let _ = unsafe { mm::madvise(self.data().cast(), len, advice) };
    }

    /// Start of the header part.
    #[inline]
    pub fn head(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Start of the (doubly mapped) data area.
    #[inline]
    pub fn data(&self) -> *mut u8 {
        // SAFETY: head_len < total, inside our mapping.
        unsafe { self.base.as_ptr().add(self.head_len) }
    }

    /// Header length in bytes.
    #[inline]
    pub fn head_len(&self) -> usize {
        self.head_len
    }

    /// Data area length in bytes (mapped twice).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    #[inline]
    pub fn data_len(&self) -> usize {
        self.data_len
    }

    /// How the file is mapped.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether the file was truncated under us (the range now reads zeros).
    #[inline]
    pub fn truncated(&self) -> bool {
        self.guard.as_ref().is_some_and(|g| g.tripped())
    }
}

impl Drop for RingMapping {
    fn drop(&mut self) {
        drop(self.guard.take());
        // `base`/`total` is the range reserved in `map`, unmapped once here;
        // the ring types that read through it are gone.
        // SAFETY: as argued just above.
        let _ = unsafe { mm::munmap(self.base.as_ptr().cast(), self.total) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "memfd, mmap MAP_SHARED|MAP_FIXED: not in Miri")]
    fn a_large_mapping_is_placed_for_huge_pages_when_the_kernel_offers_them() {
        let len = 2 * thp::HUGE;
        let fd = crate::sys::memfd::create_sized("zcio-thp-test", len as u64).unwrap();
        let m = Mapping::map(&fd, len, Access::ReadWrite, true).unwrap();
        // Usable either way: write the first and the last byte.
        // SAFETY: both offsets are inside the fresh writable mapping.
        unsafe {
            m.as_ptr().write_volatile(1);
            m.as_ptr().add(len - 1).write_volatile(2);
        }
        if !thp::shmem_huge().offered() {
            println!(
                "skipped: the kernel offers no huge pages for shared memory \
                 (shmem_enabled = never): the mapping falls back to normal pages"
            );
            return;
        }
        assert_eq!(m.as_ptr() as usize % thp::HUGE, 0, "2 MiB-aligned");
        // Whether the kernel found free huge pages is its business; report.
        println!("huge-page bytes mapped: {:?}", m.huge_bytes());
    }
    use crate::sys::memfd;

    #[test]
    #[cfg_attr(miri, ignore = "memfd, mmap MAP_SHARED|MAP_FIXED: not in Miri")]
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
    #[cfg_attr(miri, ignore = "memfd, mmap MAP_SHARED|MAP_FIXED: not in Miri")]
    fn ring_mapping_wraps() {
        let fd = memfd::create_sized("t", 4096 + 8192).unwrap();
        let m = RingMapping::map(&fd, 4096, 8192, Access::ReadWrite).unwrap();
        // SAFETY: data() + 8190 .. + 4 lies inside the double mapping.
        unsafe {
            std::ptr::copy_nonoverlapping([1u8, 2, 3, 4].as_ptr(), m.data().add(8190), 4);
            assert_eq!(m.data().add(0).read_volatile(), 3);
            assert_eq!(m.data().add(1).read_volatile(), 4);
            assert_eq!(m.data().add(8190).read_volatile(), 1);
        }
        assert!(!m.truncated());
        assert!(RingMapping::map(&fd, 100, 8192, Access::ReadOnly).is_err());
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd, mmap MAP_SHARED|MAP_FIXED: not in Miri")]
    fn zero_len_refused() {
        let fd = memfd::create_sized("t", 4096).unwrap();
        assert_eq!(
            Mapping::map(&fd, 0, Access::ReadOnly, false).unwrap_err(),
            Errno::INVAL
        );
    }
}
