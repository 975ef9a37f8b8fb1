//! Thin, safe wrappers over the Linux system calls zcio builds on.
//!
//! Everything above this layer talks to the kernel only through these
//! functions. Each wrapper keeps the OS error (`rustix::io::Errno`) so callers
//! can report the errno; nothing here panics on a failed call.

pub mod cpu;
pub mod fdpass;
pub mod futex;
pub mod io;
pub mod memfd;
pub mod mmap;
pub mod ofdlock;
pub mod peer;
pub mod shm;
pub mod sigbus;
pub mod thp;

pub use rustix::io::Errno;

/// The system page size in bytes (4096 on the machines we target).
pub fn page_size() -> usize {
    rustix::param::page_size()
}

/// Bytes of memory available without swapping (`MemAvailable` in
/// `/proc/meminfo`), if the kernel says.
pub fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Round `len` up to a whole number of pages; `None` on overflow.
pub fn round_to_pages(len: usize) -> Option<usize> {
    let ps = page_size();
    len.checked_add(ps - 1).map(|v| v & !(ps - 1))
}

/// A connected pair of `SOCK_SEQPACKET` sockets (unit tests).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn seqpacket_pair() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .expect("socketpair")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
    fn memory_available_is_known_and_below_the_address_space() {
        let m = memory_available().expect("MemAvailable in /proc/meminfo");
        assert!(m > 0 && m < 1 << 50, "{m}");
    }

    #[test]
    fn rounds_to_pages() {
        let ps = page_size();
        assert_eq!(round_to_pages(0), Some(0));
        assert_eq!(round_to_pages(1), Some(ps));
        assert_eq!(round_to_pages(ps), Some(ps));
        assert_eq!(round_to_pages(ps + 1), Some(2 * ps));
        assert_eq!(round_to_pages(usize::MAX), None);
    }
}
