//! Peer identity and liveness: `SO_PEERCRED` and pidfds.

use std::os::fd::{AsFd, OwnedFd};

use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{pidfd_open, Pid, PidfdFlags};

/// Credentials of the process at the other end of a Unix socket, as the
/// kernel recorded them at `connect`/`socketpair` time (not as the peer
/// claims them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id, as this process's PID namespace sees it: 0 when the
    /// peer lives in a PID namespace this one cannot see into (another
    /// container); nothing here relies on it for liveness.
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

/// Read `SO_PEERCRED` from a connected Unix socket. The kernel reports
/// pid 0 for a peer in a PID namespace we cannot see (a container); that
/// is a valid answer, not an error (rustix's wrapper refuses it, hence the
/// raw call).
pub fn peer_cred(sock: impl AsFd) -> Result<PeerCred, Errno> {
    use std::os::fd::AsRawFd;
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid descriptor, and `c`/`len` are valid for writes of
    // the size passed; the kernel writes at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            sock.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO));
    }
    if len as usize != std::mem::size_of::<libc::ucred>() {
        return Err(Errno::PROTO);
    }
    Ok(PeerCred {
        pid: c.pid,
        uid: c.uid,
        gid: c.gid,
    })
}

/// Open a pidfd for `pid` (Linux ≥ 5.3). The fd becomes readable when the
/// process exits, and unlike a pid it cannot be recycled under us.
pub fn open_pidfd(pid: i32) -> Result<OwnedFd, Errno> {
    let pid = Pid::from_raw(pid).ok_or(Errno::SRCH)?;
    pidfd_open(pid, PidfdFlags::empty())
}

/// Start time of process `pid` (clock ticks since boot, field 22 of
/// `/proc/PID/stat`). Together with the pid it names one process for its
/// whole life, which a pid alone does not (pids are recycled).
pub fn start_time(pid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses; the
    // fields after the last ')' are plain numbers.
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// Whether the process `pid` that started at `start` is still alive (a
/// recycled pid with another start time counts as dead).
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn is_alive(pid: i32, start: u64) -> bool {
    pid > 0 && start_time(pid) == Some(start)
}

/// Mark this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): other
/// processes of the same uid can then neither `ptrace` it nor open its
/// `/proc/PID/fd/*` — the two doors through which a same-uid peer could get
/// a writable descriptor of our regions. Use it in an originator that must
/// keep secured or volatile buffers safe from same-uid peers (different uids
/// need no such step).
pub fn set_non_dumpable() -> Result<(), Errno> {
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
}

/// Whether this process is non-dumpable.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn is_non_dumpable() -> bool {
    matches!(
        rustix::process::dumpable_behavior(),
        Ok(rustix::process::DumpableBehavior::NotDumpable)
    )
}

/// The events pending on `fd` among `interest` right now (no waiting).
fn poll_now(fd: impl AsFd, interest: PollFlags) -> PollFlags {
    let mut fds = [PollFd::new(&fd, interest)];
    match poll(
        &mut fds,
        Some(&rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        }),
    ) {
        Ok(n) if n > 0 => fds[0].revents(),
        _ => PollFlags::empty(),
    }
}

/// Wait up to `timeout` for `fd` to become readable (or hung up); whether
/// it did. An interrupted or failed poll counts as not readable.
pub fn wait_readable(fd: impl AsFd, timeout: std::time::Duration) -> bool {
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let ts = rustix::time::Timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    matches!(poll(&mut fds, Some(&ts)), Ok(n) if n > 0)
}

/// Whether the process behind `pidfd` has exited (non-blocking).
pub fn has_exited(pidfd: impl AsFd) -> bool {
    !poll_now(pidfd, PollFlags::IN).is_empty()
}

/// Whether a connected socket's peer has hung up (non-blocking check).
pub fn socket_hung_up(sock: impl AsFd) -> bool {
    poll_now(sock, PollFlags::RDHUP).intersects(PollFlags::HUP | PollFlags::RDHUP | PollFlags::ERR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "SO_PEERCRED, pidfd, fork: not modelled by Miri")]
    fn cred_of_self_and_hangup() {
        let (a, b) = crate::sys::seqpacket_pair();
        let c = peer_cred(&a).unwrap();
        assert_eq!(c.pid, std::process::id() as i32);
        assert_eq!(c.uid, rustix::process::geteuid().as_raw());
        assert!(!socket_hung_up(&a));
        drop(b);
        assert!(socket_hung_up(&a));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SO_PEERCRED, pidfd, fork: not modelled by Miri")]
    fn start_time_names_a_process() {
        let me = std::process::id() as i32;
        let t = start_time(me).unwrap();
        assert!(is_alive(me, t));
        assert!(!is_alive(me, t + 1));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(start_time(pid).is_none() || !is_alive(pid, 0));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SO_PEERCRED, pidfd, fork: not modelled by Miri")]
    fn pidfd_of_child_reports_exit() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let fd = open_pidfd(child.id() as i32).unwrap();
        child.wait().unwrap();
        assert!(has_exited(&fd));
        let me = open_pidfd(std::process::id() as i32).unwrap();
        assert!(!has_exited(&me));
    }
}
