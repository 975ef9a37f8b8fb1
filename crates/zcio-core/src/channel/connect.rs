//! Channel set-up: Unix `SOCK_SEQPACKET` listener/connector, access policy
//! on the kernel's peer credentials, and the handshake that passes and
//! validates the shared control segment; each new end joins the process's
//! waitset.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustix::net::{self, AddressFamily, SocketFlags, SocketType};

use crate::channel::config::ChannelConfig;
use crate::channel::core::{Core, Role};
use crate::channel::registered;
use crate::channel::waitset;
use crate::channel::wire::{
    SegmentHeader, SegmentLayout, DESC_SIZE, LAYOUT_VERSION, SEGMENT_MAGIC,
};
use crate::channel::Channel;
use crate::segment::{self, os, ConnectError, Protocol, SocketListener};

/// What both ends of a channel must speak.
const PROTOCOL: Protocol = Protocol {
    magic: SEGMENT_MAGIC.to_le_bytes(),
    version: LAYOUT_VERSION,
};

/// Connector half: create and pass the segment, wait for the verdict.
/// `path`: the socket path the end registers under (`None`: an in-process
/// pair, with a local statistics page).
fn connector_handshake(
    sock: OwnedFd,
    cfg: ChannelConfig,
    path: Option<&Path>,
) -> Result<Arc<Core>, ConnectError> {
    segment::set_timeouts(&sock, cfg.send_timeout, Some(cfg.connect_timeout))?;
    let layout = SegmentLayout::new(cfg.ring_entries, cfg.notice_entries).ok_or(
        ConnectError::Protocol("ring sizes must be powers of two in 8..=2^20"),
    )?;
    let (seg_fd, seg) = segment::create("zcio-channel", layout.total_len)?;
    let header = SegmentHeader {
        magic: SEGMENT_MAGIC,
        version: LAYOUT_VERSION,
        msg_entries: layout.msg_entries,
        notice_entries: layout.notice_entries,
        desc_size: DESC_SIZE,
        total_len: layout.total_len as u64,
        closed: [0; 2],
        cpus: [0; 2],
    };
    // The mapping is at least one page long, page-aligned (so
    // aligned for the 64-byte header), and not yet shared with anyone.
    // SAFETY: as argued just above.
    unsafe { seg.as_ptr().cast::<SegmentHeader>().write(header) };
    let (cred, bell) = segment::offer(&sock, PROTOCOL, seg_fd.as_fd(), layout.total_len as u64)?;
    segment::set_timeouts(&sock, cfg.send_timeout, None)?;
    let page = registered::end(path, cred.pid, segment::inode(&seg_fd));
    // `seg` maps `layout.total_len` bytes laid out per `layout`
    // (we wrote the header and the rings are the fresh zeroed memfd).
    // SAFETY: as argued just above.
    let core = unsafe { Core::new(Role::Connector, sock, bell, seg, layout, cred, cfg, page) };
    waitset::register(&core);
    Ok(core)
}

/// Listener half: check credentials, validate and map the segment.
fn listener_handshake(
    sock: OwnedFd,
    cfg: ChannelConfig,
    path: Option<&Path>,
) -> Result<Arc<Core>, ConnectError> {
    segment::set_timeouts(&sock, cfg.send_timeout, Some(cfg.connect_timeout))?;
    let seg = segment::admit(
        &sock,
        PROTOCOL,
        &cfg.access,
        std::mem::size_of::<SegmentHeader>() as u64,
        1 << 30,
    )?;
    // The mapping is at least 64 bytes (checked by `admit`) and
    // page-aligned; SegmentHeader is Pod, so any bytes are a valid value.
    // We copy it out once and validate the copy.
    // SAFETY: as argued just above.
    let header = unsafe { seg.map.as_ptr().cast::<SegmentHeader>().read_volatile() };
    let layout = SegmentLayout::from_header(&header, seg.actual)
        .filter(|l| l.total_len as u64 == seg.len)
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
    segment::welcome(&sock, PROTOCOL)?;
    segment::set_timeouts(&sock, cfg.send_timeout, None)?;
    let page = registered::end(path, seg.cred.pid, seg.ino);
    // Validated above: the mapping is `layout.total_len` bytes and
    // the header describes exactly `layout`.
    // SAFETY: as argued just above.
    let core = unsafe {
        Core::new(
            Role::Listener,
            sock,
            seg.bell,
            seg.map,
            layout,
            seg.cred,
            cfg,
            page,
        )
    };
    waitset::register(&core);
    Ok(core)
}

pub(crate) fn connect(path: &Path, cfg: ChannelConfig) -> Result<Arc<Core>, ConnectError> {
    connector_handshake(segment::connect(path)?, cfg, Some(path))
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
    let t = std::thread::spawn(move || listener_handshake(b, cfg2, None));
    let ca = connector_handshake(a, cfg, None)?;
    let cb = t
        .join()
        .map_err(|_| ConnectError::Protocol("listener thread panicked"))??;
    Ok((ca, cb))
}

/// Accepts channels on a Unix socket path.
#[derive(Debug)]
pub struct Listener {
    sock: SocketListener,
    cfg: ChannelConfig,
    /// Our entry in the registry of live objects, if we have one.
    _registration: Option<zcio_sys::registry::Registration>,
}

impl Listener {
    /// Listen at `path`. A stale socket file left by a dead listener is
    /// replaced; a live one is an error (`EADDRINUSE`).
    pub fn bind(path: impl AsRef<Path>, cfg: ChannelConfig) -> Result<Self, ConnectError> {
        let sock = SocketListener::bind(path.as_ref())?;
        let _registration = super::registered::listener(sock.path());
        Ok(Self {
            sock,
            cfg,
            _registration,
        })
    }

    /// Accept one channel, waiting at most `ChannelConfig::accept_timeout`
    /// for a connection (`ConnectError::TimedOut` after it; the handshake
    /// is bounded by `connect_timeout`). Refused or broken handshakes are
    /// errors; the listener stays usable.
    pub fn accept(&self) -> Result<Channel, ConnectError> {
        self.accept_timeout(self.cfg.accept_timeout)
    }

    /// Accept, waiting at most `timeout` for a connection (`Duration::MAX`:
    /// without a bound).
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Channel, ConnectError> {
        let s = self.sock.accept_timeout(timeout)?;
        listener_handshake(s, self.cfg.clone(), Some(self.path())).map(Channel::from_core)
    }

    /// The configuration accepted channels get (its `accept_timeout`
    /// bounds [`Listener::accept`]).
    pub fn config(&self) -> &ChannelConfig {
        &self.cfg
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        self.sock.path()
    }
}

#[cfg(test)]
mod tests {
    use super::Listener;
    use crate::channel::ChannelConfig;

    /// A channel listener reports the socket listener's path errors.
    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn listen_path_errors() {
        crate::segment::check_listen_paths(|p| Listener::bind(p, ChannelConfig::default()));
    }
}
