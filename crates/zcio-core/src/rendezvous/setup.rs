//! Connection set-up of rendezvous endpoints, through the shared
//! [`segment`](crate::segment) handshake.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use std::sync::Arc;

use zcio_sys::registry::StatsPage;

use super::point::{Rendezvous, RendezvousConfig, Shared};
use super::stats::{Counters, RendezvousStats};
use crate::segment::{self, AccessPolicy, ConnectError, Protocol, SocketListener};
use crate::sys::page_size;

/// Segment magic.
pub const MAGIC: [u8; 8] = *b"ZCIORDV1";
/// Layout version of the segment (2: the hello carries the doorbell).
pub const VERSION: u32 = 2;
/// Offset of the client→server slot (the header is at 0).
pub const C2S: usize = 128;
/// Offset of the server→client slot.
pub const S2C: usize = 256;
/// Bound on the connection handshake.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// What both ends of a rendezvous connection must speak.
const PROTOCOL: Protocol = Protocol {
    magic: MAGIC,
    version: VERSION,
};

impl Rendezvous {
    /// Connect to the listener at `path`: offer a fresh one-page segment
    /// (sealed memfd, magic + layout version) through the shared handshake;
    /// the listener's [`AccessPolicy`] decides on our kernel credentials.
    /// The endpoint has the default [`RendezvousConfig`] (see
    /// [`Rendezvous::with_config`]).
    ///
    /// # Errors
    ///
    /// `ConnectError` when nobody listens at `path`, the listener refuses
    /// us, the handshake breaks or times out (5 s), or a system call fails.
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, ConnectError> {
        let sock = segment::connect(path.as_ref())?;
        segment::set_timeouts(&sock, HANDSHAKE, Some(HANDSHAKE))?;
        let len = page_size();
        let (fd, map) = segment::create("zcio-rendezvous", len)?;
        let mut hdr = [0u8; 16];
        hdr[..8].copy_from_slice(&MAGIC);
        hdr[8..12].copy_from_slice(&VERSION.to_le_bytes());
        // The mapping is ours, a page long and not yet shared.
        // SAFETY: as argued just above.
        unsafe { std::ptr::copy_nonoverlapping(hdr.as_ptr(), map.as_ptr(), hdr.len()) };
        let (peer, bell) = segment::offer(&sock, PROTOCOL, fd.as_fd(), len as u64)?;
        Ok(Self::new(
            Shared {
                map,
                sock,
                peer,
                bell,
            },
            C2S,
            S2C,
            RendezvousConfig::default(),
            Counters::endpoint(path.as_ref(), None),
        ))
    }
}

/// Accepts rendezvous connections on a Unix socket path; removes the path
/// on drop.
#[derive(Debug)]
pub struct RendezvousListener {
    sock: SocketListener,
    access: AccessPolicy,
    cfg: RendezvousConfig,
    /// Our counters, in our registry entry (`super::stats`); accepted
    /// endpoints leave its peers gauge when they end.
    page: Arc<StatsPage>,
}

impl RendezvousListener {
    /// Listen at `path`, admitting only our own uid (see
    /// [`RendezvousListener::bind_with`]). A stale socket file left by a dead
    /// listener is replaced; a live one is an error.
    ///
    /// # Errors
    ///
    /// `ConnectError` when `path` is in use by a live listener or cannot be
    /// bound.
    pub fn bind(path: impl AsRef<Path>) -> Result<Self, ConnectError> {
        Self::bind_with(path, AccessPolicy::default())
    }

    /// Listen at `path`, admitting callers `access` allows (decided on the
    /// kernel's `SO_PEERCRED`, before anything they send is looked at).
    ///
    /// # Errors
    ///
    /// As [`RendezvousListener::bind`].
    pub fn bind_with(path: impl AsRef<Path>, access: AccessPolicy) -> Result<Self, ConnectError> {
        let sock = SocketListener::bind(path.as_ref())?;
        let page = super::stats::listener(sock.path());
        Ok(Self {
            sock,
            access,
            cfg: RendezvousConfig::default(),
            page,
        })
    }

    /// This listener, giving every endpoint it accepts `cfg`.
    pub fn with_config(mut self, cfg: RendezvousConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// The configuration accepted endpoints get.
    pub fn config(&self) -> RendezvousConfig {
        self.cfg
    }

    /// Accept one connection, waiting at most the listener's
    /// [`RendezvousConfig::accept_timeout`] (one hour unless set), and
    /// validate the partner's segment.
    ///
    /// # Errors
    ///
    /// `ConnectError` for a refused or broken handshake (the listener stays
    /// usable) or a failed system call; `ConnectError::TimedOut` when
    /// nobody connected in time.
    pub fn accept(&self) -> Result<Rendezvous, ConnectError> {
        self.accept_timeout(self.cfg.accept_timeout)
    }

    /// Accept, waiting at most `timeout` for a connection
    /// (`Duration::MAX`: without a bound).
    ///
    /// # Errors
    ///
    /// As [`RendezvousListener::accept`]; `ConnectError::TimedOut` when
    /// nobody connected in time.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Rendezvous, ConnectError> {
        self.admit(self.sock.accept_timeout(timeout)?)
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        self.sock.path()
    }

    /// This listener's counters: endpoints accepted, and how many of them
    /// are connected now (each endpoint counts its own traffic:
    /// [`Rendezvous::stats`]).
    pub fn stats(&self) -> RendezvousStats {
        RendezvousStats::of(&self.page)
    }

    fn admit(&self, sock: OwnedFd) -> Result<Rendezvous, ConnectError> {
        segment::set_timeouts(&sock, HANDSHAKE, Some(HANDSHAKE))?;
        let len = page_size() as u64;
        let seg = segment::admit(&sock, PROTOCOL, &self.access, len, len)?;
        if segment::read_head(&seg.map) != (MAGIC, VERSION) {
            return Err(ConnectError::Protocol("bad segment header"));
        }
        segment::welcome(&sock, PROTOCOL)?;
        Ok(Rendezvous::new(
            Shared {
                map: seg.map,
                sock,
                peer: seg.cred,
                bell: seg.bell,
            },
            S2C,
            C2S,
            self.cfg,
            Counters::endpoint(self.sock.path(), Some(&self.page)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::RendezvousListener;

    /// A rendezvous listener reports the socket listener's path errors.
    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn listen_path_errors() {
        crate::segment::check_listen_paths(|p| RendezvousListener::bind(p));
    }
}
