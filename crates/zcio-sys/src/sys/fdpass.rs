//! Sending bytes plus file descriptors over a Unix `SOCK_SEQPACKET` socket
//! (`SCM_RIGHTS`), with every truncation reported instead of ignored.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{
    self, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// A new close-on-exec Unix `SOCK_SEQPACKET` socket (the transport of
/// channel and rendezvous set-up).
pub fn seqpacket() -> Result<OwnedFd, Errno> {
    net::socket_with(
        net::AddressFamily::UNIX,
        net::SocketType::SEQPACKET,
        net::SocketFlags::CLOEXEC,
        None,
    )
}

/// Most descriptors carried by one socket message.
pub const MAX_FDS: usize = 16;

/// Send one record (`bytes`) with `fds` attached. Blocks unless `nonblocking`.
pub fn send(
    sock: impl AsFd,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
    nonblocking: bool,
) -> Result<(), Errno> {
    if fds.len() > MAX_FDS {
        return Err(Errno::INVAL);
    }
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(Errno::NOBUFS);
    }
    let mut flags = SendFlags::NOSIGNAL;
    if nonblocking {
        flags |= SendFlags::DONTWAIT;
    }
    // A signal handler that ran while the call blocked interrupts it even
    // under SA_RESTART when the socket has a send timeout (signal(7)):
    // that is not the peer's doing, so try again (the timeout restarts).
    let n = loop {
        match net::sendmsg(sock.as_fd(), &[IoSlice::new(bytes)], &mut control, flags) {
            Err(Errno::INTR) => continue,
            r => break r?,
        }
    };
    if n != bytes.len() {
        return Err(Errno::MSGSIZE);
    }
    Ok(())
}

/// One received record.
#[derive(Debug)]
pub struct Received {
    /// Number of bytes written into the caller's buffer.
    pub len: usize,
    /// Descriptors that arrived with the record (owned: closed on drop).
    pub fds: Vec<OwnedFd>,
}

/// Outcome of a receive attempt.
#[derive(Debug)]
pub enum RecvOutcome {
    /// A record arrived.
    Record(Received),
    /// The peer closed its end (orderly hang-up).
    HangUp,
    /// Non-blocking and nothing was queued.
    Empty,
}

/// Receive one record into `buf`. A record longer than `buf`, or with
/// descriptors that did not fit, is an error (`EMSGSIZE`): any descriptors
/// that did arrive are closed, never leaked.
pub fn recv(sock: impl AsFd, buf: &mut [u8], nonblocking: bool) -> Result<RecvOutcome, Errno> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut flags = RecvFlags::CMSG_CLOEXEC;
    if nonblocking {
        flags |= RecvFlags::DONTWAIT;
    }
    // Interrupted by a signal handler (even under SA_RESTART when the
    // socket has a receive timeout, signal(7)): not the peer's doing, so
    // try again; the timeout restarts.
    let res = loop {
        match net::recvmsg(
            sock.as_fd(),
            &mut [IoSliceMut::new(buf)],
            &mut control,
            flags,
        ) {
            Ok(r) => break r,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(RecvOutcome::Empty),
            Err(e) => return Err(e),
        }
    };
    let mut fds = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = msg {
            fds.extend(rights);
        }
    }
    if res.flags.contains(ReturnFlags::TRUNC) || res.flags.contains(ReturnFlags::CTRUNC) {
        return Err(Errno::MSGSIZE);
    }
    if res.bytes == 0 && fds.is_empty() {
        return Ok(RecvOutcome::HangUp);
    }
    Ok(RecvOutcome::Record(Received {
        len: res.bytes,
        fds,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::memfd;

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn passes_fds_and_detects_hangup() {
        let (a, b) = crate::sys::seqpacket_pair();
        let m = memfd::create_sized("t", 4096).unwrap();
        send(&a, b"hello", &[m.as_fd()], false).unwrap();
        let mut buf = [0u8; 64];
        match recv(&b, &mut buf, false).unwrap() {
            RecvOutcome::Record(r) => {
                assert_eq!(&buf[..r.len], b"hello");
                assert_eq!(r.fds.len(), 1);
                assert_eq!(memfd::size(&r.fds[0]).unwrap(), 4096);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            recv(&b, &mut buf, true).unwrap(),
            RecvOutcome::Empty
        ));
        drop(a);
        assert!(matches!(
            recv(&b, &mut buf, false).unwrap(),
            RecvOutcome::HangUp
        ));
    }

    extern "C" fn on_usr1(_: libc::c_int) {}

    /// Found by the `channel_peer` fuzz target: libFuzzer's timer signal
    /// interrupted a handshake's blocking `recvmsg` (a socket with a receive
    /// timeout is not restarted, signal(7)), and the connect failed with
    /// EINTR. A signal handler in the process must not fail a transfer.
    #[test]
    #[cfg_attr(miri, ignore = "sockets and signals: system calls Miri does not model")]
    fn a_signal_does_not_fail_a_blocking_receive() {
        // SAFETY: installs a handler that does nothing (async-signal-safe)
        // for SIGUSR1, without SA_RESTART; the sigaction struct is zeroed
        // and then filled as sigaction(2) documents.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        let (a, b) = crate::sys::seqpacket_pair();
        rustix::net::sockopt::set_socket_timeout(
            &b,
            rustix::net::sockopt::Timeout::Recv,
            Some(std::time::Duration::from_secs(30)),
        )
        .unwrap();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let kid = std::thread::spawn(move || {
            // SAFETY: pthread_self has no preconditions.
            tid_tx.send(unsafe { libc::pthread_self() }).unwrap();
            let mut buf = [0u8; 16];
            let r = recv(&b, &mut buf, false).map(|o| match o {
                RecvOutcome::Record(r) => buf[..r.len].to_vec(),
                other => panic!("unexpected {other:?}"),
            });
            // A send blocked on a full socket is interrupted the same way;
            // this one has room, so only the receive is exercised here.
            r
        });
        let tid = tid_rx.recv().unwrap();
        for _ in 0..50 {
            // SAFETY: `tid` is a live thread (it blocks in recv until the
            // record below is sent), whose SIGUSR1 handler does nothing.
            unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        send(&a, b"after", &[], false).unwrap();
        assert_eq!(kid.join().unwrap(), Ok(b"after".to_vec()));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn oversized_record_is_an_error() {
        let (a, b) = crate::sys::seqpacket_pair();
        send(&a, &[1u8; 100], &[], false).unwrap();
        let mut buf = [0u8; 10];
        assert_eq!(recv(&b, &mut buf, false).unwrap_err(), Errno::MSGSIZE);
    }
}
