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
    let n = net::sendmsg(sock, &[IoSlice::new(bytes)], &mut control, flags)?;
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
    let res = match net::recvmsg(sock, &mut [IoSliceMut::new(buf)], &mut control, flags) {
        Ok(r) => r,
        Err(Errno::AGAIN) => return Ok(RecvOutcome::Empty),
        Err(e) => return Err(e),
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

    #[test]
    fn oversized_record_is_an_error() {
        let (a, b) = crate::sys::seqpacket_pair();
        send(&a, &[1u8; 100], &[], false).unwrap();
        let mut buf = [0u8; 10];
        assert_eq!(recv(&b, &mut buf, false).unwrap_err(), Errno::MSGSIZE);
    }
}
