//! Open-file-description byte-range locks (`F_OFD_SETLK`, `F_OFD_GETLK`):
//! liveness that the kernel ends with its holder.
//!
//! An OFD lock belongs to the open file description that took it, not to a
//! process id: it is released when the last descriptor of that description
//! is closed — by `close`, by `exit`, or by `SIGKILL` — and every process
//! that shares the file sees it, in whatever PID namespace it runs. That is
//! what a shared ring needs to tell a live peer from a dead one across
//! containers (pid numbers mean nothing there, and are recycled). Locks on
//! bytes past the end of the file are allowed and touch no data.
//!
//! Exclusive (write) locks need a descriptor opened for writing; probing
//! (`F_OFD_GETLK`) works through any descriptor, and a description that
//! holds no locks itself sees every holder.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

fn flock(kind: libc::c_short, byte: u64) -> libc::flock {
    // SAFETY: `flock` is a plain C struct of integers; all-zero is valid.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = byte as libc::off_t;
    fl.l_len = 1;
    // l_pid must be 0 for OFD locks (zeroed above).
    fl
}

/// Take an exclusive lock on `byte` of `fd`'s description, without
/// waiting: `Ok(true)` taken (or already ours), `Ok(false)` another
/// description holds it.
pub fn try_lock(fd: impl AsFd, byte: u64) -> Result<bool, Errno> {
    let mut fl = flock(libc::F_WRLCK as libc::c_short, byte);
    // SAFETY: a valid descriptor and a pointer to an initialised `flock`
    // that outlives the call.
    let r = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
    if r == 0 {
        return Ok(true);
    }
    match Errno::from_raw_os_error(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)) {
        Errno::AGAIN | Errno::ACCESS => Ok(false),
        e => Err(e),
    }
}

/// Release our lock on `byte` of `fd`'s description.
pub fn unlock(fd: impl AsFd, byte: u64) {
    let mut fl = flock(libc::F_UNLCK as libc::c_short, byte);
    // SAFETY: as in `try_lock`.
    let _ = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
}

/// Whether a description other than `fd`'s holds a lock on `byte`. An
/// error (a filesystem without locks) says `None`.
pub fn held(fd: impl AsFd, byte: u64) -> Option<bool> {
    let mut fl = flock(libc::F_WRLCK as libc::c_short, byte);
    // SAFETY: as in `try_lock`; the kernel writes the result into `fl`.
    let r = unsafe { libc::fcntl(fd.as_fd().as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    (r == 0).then_some(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// A new open file description of the file behind `fd`, read-write (so
/// its locks are its own): reopened through `/proc/self/fd`.
pub fn reopen(fd: impl AsFd) -> Result<OwnedFd, Errno> {
    let path = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    rustix::fs::open(path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> OwnedFd {
        rustix::fs::memfd_create("ofdlock", rustix::fs::MemfdFlags::CLOEXEC).unwrap()
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn a_lock_is_seen_from_another_description_and_goes_with_it() {
        let f = file();
        let a = reopen(&f).unwrap();
        let b = reopen(&f).unwrap();
        let far = 1 << 62;
        assert_eq!(held(&f, far), Some(false));
        assert!(try_lock(&a, far).unwrap());
        assert!(try_lock(&a, far).unwrap(), "ours already");
        assert_eq!(held(&f, far), Some(true), "past the end of the file");
        assert!(!try_lock(&b, far).unwrap(), "exclusive");
        assert_eq!(held(&f, far + 1), Some(false), "one byte only");
        drop(a);
        assert_eq!(held(&f, far), Some(false), "closing releases it");
        assert!(try_lock(&b, far).unwrap());
        unlock(&b, far);
        assert_eq!(held(&f, far), Some(false));
    }
}
