//! memfd creation, sealing and read-only reopening.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::fs::{self, MemfdFlags, Mode, OFlags, SealFlags};
use rustix::io::Errno;

/// Create a sealable, close-on-exec memfd of `len` bytes and immediately seal
/// it against shrinking and growing, so no holder of any fd can truncate it
/// under a peer's mapping (the SIGBUS attack).
pub fn create_sized(name: &str, len: u64) -> Result<OwnedFd, Errno> {
    let fd = fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    fs::ftruncate(&fd, len)?;
    fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW)?;
    Ok(fd)
}

/// Allocate the backing pages of `[0, len)` now (`fallocate`).
pub fn allocate(fd: impl AsFd, len: u64) -> Result<(), Errno> {
    fs::fallocate(fd, fs::FallocateFlags::empty(), 0, len)
}

/// Offset of the first hole (unallocated range) in the file; its size if
/// it has none.
pub fn first_hole(fd: impl AsFd) -> Result<u64, Errno> {
    fs::seek(fd, fs::SeekFrom::Hole(0))
}

/// Add seals to a memfd. Seals only ever accumulate.
pub fn add_seals(fd: impl AsFd, seals: SealFlags) -> Result<(), Errno> {
    fs::fcntl_add_seals(fd, seals)
}

/// The seals currently set on `fd`.
pub fn seals(fd: impl AsFd) -> Result<SealFlags, Errno> {
    fs::fcntl_get_seals(fd)
}

/// Size of the file behind `fd` in bytes.
pub fn size(fd: impl AsFd) -> Result<u64, Errno> {
    let st = fs::fstat(fd)?;
    u64::try_from(st.st_size).map_err(|_| Errno::INVAL)
}

/// Open a second, read-only file description of the same memory object, to
/// hand to receivers. A receiver holding it cannot `mmap(PROT_WRITE,
/// MAP_SHARED)` or `write(2)`; with `F_SEAL_FUTURE_WRITE` set on the object it
/// cannot get write access by reopening `/proc/self/fd/N` either.
pub fn reopen_readonly(fd: impl AsFd) -> Result<OwnedFd, Errno> {
    let path = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    fs::open(
        path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Whether `fd` was opened for writing.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn is_writable_description(fd: impl AsFd) -> Result<bool, Errno> {
    let fl = fs::fcntl_getfl(fd)?;
    Ok(fl.contains(OFlags::RDWR) || fl.contains(OFlags::WRONLY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn create_seals_shrink_and_grow() {
        let fd = create_sized("zcio-test", 8192).unwrap();
        let s = seals(&fd).unwrap();
        assert!(s.contains(SealFlags::SHRINK | SealFlags::GROW));
        assert_eq!(size(&fd).unwrap(), 8192);
        assert_eq!(fs::ftruncate(&fd, 4096), Err(Errno::PERM));
        assert_eq!(fs::ftruncate(&fd, 16384), Err(Errno::PERM));
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn holes_are_found() {
        let fd = create_sized("zcio-test", 8192).unwrap();
        assert_eq!(first_hole(&fd).unwrap(), 0);
        // fallocate alone leaves "unwritten" pages that still read as holes;
        // pre-faulting them (as the owner does) makes them data.
        allocate(&fd, 8192).unwrap();
        let _m =
            crate::sys::mmap::Mapping::map(&fd, 8192, crate::sys::mmap::Access::ReadWrite, true)
                .unwrap();
        assert_eq!(first_hole(&fd).unwrap(), 8192);
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn readonly_reopen_is_readonly() {
        let fd = create_sized("zcio-test", 4096).unwrap();
        let ro = reopen_readonly(&fd).unwrap();
        assert!(!is_writable_description(&ro).unwrap());
        assert!(is_writable_description(&fd).unwrap());
    }
}
