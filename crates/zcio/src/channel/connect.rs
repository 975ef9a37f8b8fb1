//! Channel set-up: Unix `SOCK_SEQPACKET` listener/connector, access policy
//! on the kernel's peer credentials, and the handshake that passes and
//! validates the shared control segment.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustix::fs::SealFlags;
use rustix::io::Errno;
use rustix::net::{self, sockopt, AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use crate::channel::config::ChannelConfig;
use crate::channel::core::{Core, Role};
use crate::channel::error::ConnectError;
use crate::channel::wire::{
    Ctl, SegmentHeader, SegmentLayout, CTL_LEN, LAYOUT_VERSION, SEGMENT_MAGIC,
};
use crate::channel::Channel;
use crate::sys::fdpass::{self, RecvOutcome};
use crate::sys::mmap::{Access, Mapping};
use crate::sys::{memfd, peer};

fn os(op: &'static str) -> impl FnOnce(Errno) -> ConnectError {
    move |errno| ConnectError::Os { op, errno }
}

fn seqpacket() -> Result<OwnedFd, ConnectError> {
    fdpass::seqpacket().map_err(os("socket"))
}

fn set_timeouts(
    sock: &OwnedFd,
    send: Duration,
    recv: Option<Duration>,
) -> Result<(), ConnectError> {
    let nz = |d: Duration| {
        if d.is_zero() {
            Duration::from_micros(1)
        } else {
            d
        }
    };
    sockopt::set_socket_timeout(sock, sockopt::Timeout::Send, Some(nz(send)))
        .map_err(os("SO_SNDTIMEO"))?;
    sockopt::set_socket_timeout(sock, sockopt::Timeout::Recv, recv.map(nz))
        .map_err(os("SO_RCVTIMEO"))
}

fn recv_ctl(sock: &OwnedFd) -> Result<(Ctl, Vec<OwnedFd>), ConnectError> {
    let mut buf = [0u8; CTL_LEN + 1];
    match fdpass::recv(sock, &mut buf, false) {
        Ok(RecvOutcome::Record(r)) => {
            let ctl = Ctl::decode(&buf[..r.len])
                .ok_or(ConnectError::Protocol("undecodable control record"))?;
            Ok((ctl, r.fds))
        }
        Ok(RecvOutcome::HangUp) => Err(ConnectError::Protocol("peer hung up during handshake")),
        Ok(RecvOutcome::Empty) | Err(Errno::AGAIN) => Err(ConnectError::TimedOut),
        Err(e) => Err(ConnectError::Os {
            op: "recvmsg",
            errno: e,
        }),
    }
}

/// Connector half: create and pass the segment, wait for the verdict.
fn connector_handshake(sock: OwnedFd, cfg: ChannelConfig) -> Result<Arc<Core>, ConnectError> {
    set_timeouts(&sock, cfg.send_timeout, Some(cfg.connect_timeout))?;
    let layout = SegmentLayout::new(cfg.ring_entries, cfg.notice_entries).ok_or(
        ConnectError::Protocol("ring sizes must be powers of two in 8..=2^20"),
    )?;
    let seg_fd =
        memfd::create_sized("zcio-channel", layout.total_len as u64).map_err(os("memfd_create"))?;
    let seg = Mapping::map(&seg_fd, layout.total_len, Access::ReadWrite, true)
        .map_err(os("mmap segment"))?;
    let header = SegmentHeader {
        magic: SEGMENT_MAGIC,
        version: LAYOUT_VERSION,
        msg_entries: layout.msg_entries,
        notice_entries: layout.notice_entries,
        desc_size: 32,
        total_len: layout.total_len as u64,
    };
    // The mapping is at least one page long, page-aligned (so
    // aligned for the 64-byte header), and not yet shared with anyone.
    // SAFETY: as argued just above.
    unsafe { seg.as_ptr().cast::<SegmentHeader>().write(header) };
    let hello = Ctl::Hello {
        version: LAYOUT_VERSION,
        seg_len: layout.total_len as u64,
    };
    if let Err(e) = fdpass::send(&sock, &hello.encode(), &[seg_fd.as_fd()], false) {
        // A listener that refused us may have closed before reading the
        // hello: its verdict is still queued for us.
        if matches!(e, Errno::PIPE | Errno::CONNRESET) {
            if let Ok((Ctl::Refused, _)) = recv_ctl(&sock) {
                return Err(ConnectError::Refused);
            }
        }
        return Err(ConnectError::Os {
            op: "send hello",
            errno: e,
        });
    }
    match recv_ctl(&sock)? {
        (
            Ctl::Welcome {
                version: LAYOUT_VERSION,
            },
            fds,
        ) if fds.is_empty() => {}
        (Ctl::Welcome { .. }, _) => {
            return Err(ConnectError::Protocol(
                "listener speaks another layout version",
            ))
        }
        (Ctl::Refused, _) => return Err(ConnectError::Refused),
        _ => return Err(ConnectError::Protocol("unexpected reply to hello")),
    }
    let cred = peer::peer_cred(&sock).map_err(os("SO_PEERCRED"))?;
    set_timeouts(&sock, cfg.send_timeout, None)?;
    // `seg` maps `layout.total_len` bytes laid out per `layout`
    // (we wrote the header and the rings are the fresh zeroed memfd).
    // SAFETY: as argued just above.
    Ok(unsafe { Core::new(Role::Connector, sock, seg, layout, cred, cfg) })
}

/// Listener half: check credentials, validate and map the segment.
fn listener_handshake(sock: OwnedFd, cfg: ChannelConfig) -> Result<Arc<Core>, ConnectError> {
    let cred = peer::peer_cred(&sock).map_err(os("SO_PEERCRED"))?;
    set_timeouts(&sock, cfg.send_timeout, Some(cfg.connect_timeout))?;
    if !cfg.access.allows(cred.uid, cred.gid) {
        // Take the hello off the queue first (its fd is closed unmapped):
        // closing with unread data would reset the connection, and the
        // connector would see ECONNRESET instead of our verdict.
        let _ = recv_ctl(&sock);
        let _ = fdpass::send(&sock, &Ctl::Refused.encode(), &[], true);
        return Err(ConnectError::Refused);
    }
    let (ctl, mut fds) = recv_ctl(&sock)?;
    let seg_len = match ctl {
        Ctl::Hello {
            version: LAYOUT_VERSION,
            seg_len,
        } if fds.len() == 1 => seg_len,
        Ctl::Hello { .. } => return Err(ConnectError::Protocol("hello with wrong version or fds")),
        _ => return Err(ConnectError::Protocol("expected hello")),
    };
    let seg_fd = fds
        .pop()
        .ok_or(ConnectError::Protocol("hello without segment"))?;
    let seals = memfd::seals(&seg_fd).map_err(os("F_GET_SEALS"))?;
    if !seals.contains(SealFlags::SHRINK | SealFlags::GROW) {
        return Err(ConnectError::Protocol(
            "segment not sealed against resizing",
        ));
    }
    let actual = memfd::size(&seg_fd).map_err(os("fstat"))?;
    if seg_len < std::mem::size_of::<SegmentHeader>() as u64
        || seg_len > actual
        || seg_len > (1 << 30)
    {
        return Err(ConnectError::Protocol("segment size out of range"));
    }
    // Not pre-faulted: the connector chose the size, and pages we never
    // touch should not be charged to us.
    let seg = Mapping::map(&seg_fd, seg_len as usize, Access::ReadWrite, false)
        .map_err(os("mmap segment"))?;
    // The mapping is at least 64 bytes (checked above) and
    // page-aligned; SegmentHeader is Pod, so any bytes are a valid value.
    // We copy it out once and validate the copy.
    // SAFETY: as argued just above.
    let header = unsafe { seg.as_ptr().cast::<SegmentHeader>().read_volatile() };
    let layout = SegmentLayout::from_header(&header, actual)
        .filter(|l| l.total_len as u64 == seg_len)
        .ok_or(ConnectError::Protocol(
            "segment header invalid (magic, version or sizes)",
        ))?;
    // The connector picks the ring sizes; the listener bounds them.
    if layout.msg_entries > cfg.ring_entries.saturating_mul(4)
        || layout.notice_entries > cfg.notice_entries.saturating_mul(4)
    {
        return Err(ConnectError::Protocol(
            "ring sizes larger than this listener allows (4x its own)",
        ));
    }
    let welcome = Ctl::Welcome {
        version: LAYOUT_VERSION,
    };
    fdpass::send(&sock, &welcome.encode(), &[], false).map_err(os("send welcome"))?;
    set_timeouts(&sock, cfg.send_timeout, None)?;
    // Validated above: the mapping is `layout.total_len` bytes and
    // the header describes exactly `layout`.
    // SAFETY: as argued just above.
    Ok(unsafe { Core::new(Role::Listener, sock, seg, layout, cred, cfg) })
}

pub(crate) fn connect(path: &Path, cfg: ChannelConfig) -> Result<Arc<Core>, ConnectError> {
    let sock = seqpacket()?;
    let addr = SocketAddrUnix::new(path).map_err(os("socket path"))?;
    net::connect(&sock, &addr).map_err(os("connect"))?;
    connector_handshake(sock, cfg)
}

pub(crate) fn pair(cfg: ChannelConfig) -> Result<(Arc<Core>, Arc<Core>), ConnectError> {
    let (a, b) = net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(os("socketpair"))?;
    let cfg2 = cfg.clone();
    // The connector's hello is queued before the listener reads it, and
    // the welcome before the connector reads it, so threads are needed only
    // to let both block on their reads.
    let t = std::thread::spawn(move || listener_handshake(b, cfg2));
    let ca = connector_handshake(a, cfg)?;
    let cb = t
        .join()
        .map_err(|_| ConnectError::Protocol("listener thread panicked"))??;
    Ok((ca, cb))
}

/// Accepts channels on a Unix socket path.
#[derive(Debug)]
pub struct Listener {
    sock: OwnedFd,
    path: PathBuf,
    cfg: ChannelConfig,
}

impl Listener {
    /// Listen at `path`. A stale socket file left by a dead listener is
    /// replaced; a live one is an error (`EADDRINUSE`).
    pub fn bind(path: impl AsRef<Path>, cfg: ChannelConfig) -> Result<Self, ConnectError> {
        let path = path.as_ref().to_path_buf();
        let addr = SocketAddrUnix::new(&path).map_err(os("socket path"))?;
        let sock = seqpacket()?;
        if let Err(Errno::ADDRINUSE) = net::bind(&sock, &addr) {
            let probe = seqpacket()?;
            if net::connect(&probe, &addr).is_ok() {
                return Err(ConnectError::Os {
                    op: "bind (a listener is running there)",
                    errno: Errno::ADDRINUSE,
                });
            }
            let _ = std::fs::remove_file(&path);
            net::bind(&sock, &addr).map_err(os("bind"))?;
        }
        net::listen(&sock, 64).map_err(os("listen"))?;
        Ok(Self { sock, path, cfg })
    }

    /// Accept one channel (blocking). Refused or broken handshakes are
    /// errors; the listener stays usable.
    pub fn accept(&self) -> Result<Channel, ConnectError> {
        let s = net::accept_with(&self.sock, SocketFlags::CLOEXEC).map_err(os("accept"))?;
        listener_handshake(s, self.cfg.clone()).map(Channel::from_core)
    }

    /// Accept, waiting at most `timeout` for a connection.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Channel, ConnectError> {
        use rustix::event::{poll, PollFd, PollFlags};
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&self.sock, PollFlags::IN)];
        match poll(&mut fds, Some(&ts)) {
            Ok(0) => Err(ConnectError::TimedOut),
            Ok(_) => self.accept(),
            Err(e) => Err(ConnectError::Os {
                op: "poll",
                errno: e,
            }),
        }
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
