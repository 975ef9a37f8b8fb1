//! Shared segments: the one way two processes set up the control memory a
//! connection-oriented transport (channels, rendezvous endpoints) shares.
//!
//! The connector creates the segment — a memfd sealed against shrinking
//! and growing at birth, so no holder of any fd can truncate it under the
//! other side's mapping — writes its header (a magic number naming the
//! transport and a layout version) and offers it over a Unix
//! `SOCK_SEQPACKET` socket with `SCM_RIGHTS`. The listener takes the
//! kernel's word for who is calling (`SO_PEERCRED`), applies its
//! [`AccessPolicy`] *before* it looks at anything the caller sent, checks
//! the handshake record, the seals and the real size, maps the segment and
//! lets the transport validate the header copy; then it answers *welcome*
//! or *refused*. Every step is bounded by socket timeouts. The hello also
//! carries one end of the connection's doorbell pair (`crate::bell`): the
//! pollable descriptor each side rings to wake the other when it sleeps in
//! an event loop.
//!
//! Handshake records are 32 bytes, little-endian:
//! `kind: u32 (1 hello, 2 welcome, 3 refused), version: u32, len: u64,
//! magic: [u8; 8], reserved: u64`.
//!
//! Named rings are segments too, but they live as files under `/dev/shm`
//! so that the kernel's uid/gid/mode checks decide who may attach
//! (`sys::shm`, `ring::map`); they follow the same header discipline
//! (magic + layout version, copied out and validated before use).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::SealFlags;
use rustix::io::Errno;
use rustix::net::{self, sockopt, SocketAddrUnix, SocketFlags};
use thiserror::Error;

use crate::bell::Doorbell;
use crate::region::RegionError;
use crate::sys::fdpass::{self, RecvOutcome};
use crate::sys::memfd;
use crate::sys::mmap::{Access, Mapping};
use crate::sys::peer::{self, PeerCred};

/// Failure to set up a connection (channel or rendezvous endpoint).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// Operation.
        op: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
    /// The listener's access policy refused our credentials.
    #[error("connection refused by the listener's access policy (uid/gid not allowed)")]
    Refused,
    /// The peer spoke something other than the zcio protocol.
    #[error("handshake failed: {0}")]
    Protocol(&'static str),
    /// The handshake did not finish in time.
    #[error("handshake timed out")]
    TimedOut,
    /// The control segment could not be created or attached.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// A listener could not be set up at `path`: the path is empty or too
    /// long, its directory is missing or not writable, or a live listener
    /// is already there (`EADDRINUSE`). The kernel's error says which.
    #[error("cannot listen at {path:?}: {errno}{}", listen_hint(path, *errno))]
    Listen {
        /// The socket path asked for.
        path: PathBuf,
        /// The kernel's error (`EINVAL` for an empty path).
        errno: Errno,
    },
}

/// What to do about a [`ConnectError::Listen`].
fn listen_hint(path: &Path, errno: Errno) -> String {
    if path.as_os_str().is_empty() {
        return " (the socket path is empty: give a file path such as /tmp/app.sock)".into();
    }
    match errno {
        Errno::NOENT => match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => format!(
                " (directory {dir:?} does not exist: create it, or choose a path in an existing directory)"
            ),
            None => " (create the directory first, or choose a path in an existing directory)".into(),
        },
        Errno::NOTDIR => " (a component of the path is not a directory)".into(),
        Errno::ACCESS | Errno::PERM => {
            " (no permission to create a file there: choose a directory you may write to)".into()
        }
        Errno::ROFS => " (read-only file system: choose a writable directory)".into(),
        Errno::ADDRINUSE => " (a listener is running there: stop it, or choose another path)".into(),
        Errno::EXIST => " (a file that is not a socket is there; it is left alone: choose another path)".into(),
        Errno::NAMETOOLONG => {
            " (Unix socket paths are limited to 107 bytes: choose a shorter path)".into()
        }
        _ => String::new(),
    }
}

pub fn os(op: &'static str) -> impl FnOnce(Errno) -> ConnectError {
    move |errno| ConnectError::Os { op, errno }
}

/// Who may connect to a listener, decided on the kernel's `SO_PEERCRED`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessPolicy {
    /// User ids allowed.
    pub uids: Vec<u32>,
    /// Group ids allowed (any member of one of these may connect).
    pub gids: Vec<u32>,
}

impl Default for AccessPolicy {
    /// Only the listener's own effective uid.
    fn default() -> Self {
        Self {
            uids: vec![rustix::process::geteuid().as_raw()],
            gids: Vec::new(),
        }
    }
}

impl AccessPolicy {
    /// Allow these uids (and nothing else).
    pub fn uids(uids: impl IntoIterator<Item = u32>) -> Self {
        Self {
            uids: uids.into_iter().collect(),
            gids: Vec::new(),
        }
    }

    /// Whether a peer with `uid`/`gid` may connect.
    pub fn allows(&self, uid: u32, gid: u32) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid)
    }
}

/// Encoded size of a [`Handshake`] record.
pub const HANDSHAKE_LEN: usize = 32;

/// A handshake record (see the module docs for the encoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// Connector → listener, with the segment fd.
    Hello {
        /// The transport's segment magic.
        magic: [u8; 8],
        /// Its layout version.
        version: u32,
        /// Segment length in bytes.
        len: u64,
    },
    /// Listener → connector: accepted.
    Welcome {
        /// The transport's segment magic.
        magic: [u8; 8],
        /// Its layout version.
        version: u32,
    },
    /// Listener → connector: refused by the access policy.
    Refused,
}

impl Handshake {
    /// Encode.
    pub fn encode(&self) -> [u8; HANDSHAKE_LEN] {
        let (kind, version, len, magic) = match *self {
            Handshake::Hello {
                magic,
                version,
                len,
            } => (1u32, version, len, magic),
            Handshake::Welcome { magic, version } => (2, version, 0, magic),
            Handshake::Refused => (3, 0, 0, [0; 8]),
        };
        let mut out = [0u8; HANDSHAKE_LEN];
        out[0..4].copy_from_slice(&kind.to_le_bytes());
        out[4..8].copy_from_slice(&version.to_le_bytes());
        out[8..16].copy_from_slice(&len.to_le_bytes());
        out[16..24].copy_from_slice(&magic);
        out
    }

    /// Decode; `None` for anything that is not exactly a valid record.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != HANDSHAKE_LEN || bytes[24..].iter().any(|&b| b != 0) {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap_or_default());
        let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or_default());
        let magic: [u8; 8] = bytes[16..24].try_into().unwrap_or_default();
        let (kind, version) = (u32_at(0), u32_at(4));
        Some(match kind {
            1 => Handshake::Hello {
                magic,
                version,
                len,
            },
            2 if len == 0 => Handshake::Welcome { magic, version },
            3 if len == 0 && version == 0 && magic == [0; 8] => Handshake::Refused,
            _ => return None,
        })
    }
}

/// What the two sides must agree on: the transport's segment magic and
/// layout version.
#[derive(Clone, Copy, Debug)]
pub struct Protocol {
    pub magic: [u8; 8],
    pub version: u32,
}

/// A fresh segment of `len` bytes (page multiple), sealed against resizing
/// and mapped read-write (pre-faulted) by its creator.
pub fn create(name: &str, len: usize) -> Result<(OwnedFd, Mapping), ConnectError> {
    let fd = memfd::create_sized(name, len as u64).map_err(os("memfd_create"))?;
    let map = Mapping::map(&fd, len, Access::ReadWrite, true).map_err(os("mmap segment"))?;
    Ok((fd, map))
}

/// A new `SOCK_SEQPACKET` socket.
pub fn seqpacket() -> Result<OwnedFd, ConnectError> {
    fdpass::seqpacket().map_err(os("socket"))
}

/// Send and receive timeouts on `sock` (`None`: block). A timeout too long
/// for the kernel (over a century, `Duration::MAX` say) blocks too.
pub fn set_timeouts(
    sock: &OwnedFd,
    send: Duration,
    recv: Option<Duration>,
) -> Result<(), ConnectError> {
    /// Longer than this is no timeout (and stays clear of the kernel's
    /// limits on a `timeval`).
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    let fit = |d: Duration| (d < CENTURY).then(|| d.max(Duration::from_micros(1)));
    sockopt::set_socket_timeout(sock, sockopt::Timeout::Send, fit(send))
        .map_err(os("SO_SNDTIMEO"))?;
    sockopt::set_socket_timeout(sock, sockopt::Timeout::Recv, recv.and_then(fit))
        .map_err(os("SO_RCVTIMEO"))
}

fn recv_handshake(sock: &OwnedFd) -> Result<(Handshake, Vec<OwnedFd>), ConnectError> {
    let mut buf = [0u8; HANDSHAKE_LEN + 1];
    match fdpass::recv(sock, &mut buf, false) {
        Ok(RecvOutcome::Record(r)) => {
            let h = Handshake::decode(&buf[..r.len])
                .ok_or(ConnectError::Protocol("undecodable handshake record"))?;
            Ok((h, r.fds))
        }
        Ok(RecvOutcome::HangUp) => Err(ConnectError::Protocol("peer hung up during handshake")),
        Ok(RecvOutcome::Empty) | Err(Errno::AGAIN) => Err(ConnectError::TimedOut),
        Err(e) => Err(ConnectError::Os {
            op: "recvmsg",
            errno: e,
        }),
    }
}

/// Connector half: offer the segment `fd` of `len` bytes and wait (bounded
/// by the socket's receive timeout) for the verdict, passing the peer one
/// end of a fresh doorbell pair. Returns the listener's kernel credentials
/// and our end of the doorbell.
pub fn offer(
    sock: &OwnedFd,
    proto: Protocol,
    fd: BorrowedFd<'_>,
    len: u64,
) -> Result<(PeerCred, Doorbell), ConnectError> {
    let (bell, peer_bell) = Doorbell::pair().map_err(os("socketpair (doorbell)"))?;
    let hello = Handshake::Hello {
        magic: proto.magic,
        version: proto.version,
        len,
    };
    if let Err(e) = fdpass::send(sock, &hello.encode(), &[fd, peer_bell.as_fd()], false) {
        // A listener that refused us may have closed before reading the
        // hello: its verdict is still queued for us.
        if matches!(e, Errno::PIPE | Errno::CONNRESET) {
            if let Ok((Handshake::Refused, _)) = recv_handshake(sock) {
                return Err(ConnectError::Refused);
            }
        }
        return Err(ConnectError::Os {
            op: "send hello",
            errno: e,
        });
    }
    match recv_handshake(sock)? {
        (Handshake::Welcome { magic, version }, fds)
            if fds.is_empty() && magic == proto.magic && version == proto.version => {}
        (Handshake::Welcome { .. }, _) => {
            return Err(ConnectError::Protocol(
                "listener speaks another transport or layout version",
            ))
        }
        (Handshake::Refused, _) => return Err(ConnectError::Refused),
        _ => return Err(ConnectError::Protocol("unexpected reply to hello")),
    }
    let cred = peer::peer_cred(sock).map_err(os("SO_PEERCRED"))?;
    Ok((cred, bell))
}

/// A segment the listener half has checked and mapped (header not yet
/// validated: that is the transport's layout).
pub struct Admitted {
    pub cred: PeerCred,
    pub map: Mapping,
    /// Bytes mapped (the length the connector announced).
    pub len: u64,
    /// The memfd's real size (at least `len`).
    pub actual: u64,
    /// The listener's end of the connection's doorbell pair
    /// (`crate::bell`), checked to be a Unix `SOCK_SEQPACKET` socket.
    pub bell: Doorbell,
    /// The segment memfd's inode number: the connector's `fstat` of the
    /// same memfd gives the same, so both ends can name their connection
    /// by it (`Kind::Channel`'s `connection` counter).
    pub ino: u64,
}

/// Listener half up to the verdict: the caller's kernel credentials
/// against `access` (a refused caller is told so and its fd closed
/// unmapped), then the hello (`proto`, exactly two fds: the segment and the
/// doorbell, see `crate::bell`), the seals, the
/// announced length within `min..=max` and not beyond the real size, and a
/// read-write mapping (not pre-faulted: the connector chose the size).
/// Follow with the transport's header check and [`welcome`].
pub fn admit(
    sock: &OwnedFd,
    proto: Protocol,
    access: &AccessPolicy,
    min: u64,
    max: u64,
) -> Result<Admitted, ConnectError> {
    let cred = peer::peer_cred(sock).map_err(os("SO_PEERCRED"))?;
    if !access.allows(cred.uid, cred.gid) {
        // Take the hello off the queue first (its fd is closed unmapped):
        // closing with unread data would reset the connection, and the
        // connector would see ECONNRESET instead of our verdict.
        let _ = recv_handshake(sock);
        let _ = fdpass::send(sock, &Handshake::Refused.encode(), &[], true);
        return Err(ConnectError::Refused);
    }
    let (h, mut fds) = recv_handshake(sock)?;
    let len = match h {
        Handshake::Hello {
            magic,
            version,
            len,
        } if fds.len() == 2 && magic == proto.magic && version == proto.version => len,
        Handshake::Hello { .. } => {
            return Err(ConnectError::Protocol(
                "hello with wrong transport, version or fds",
            ))
        }
        _ => return Err(ConnectError::Protocol("expected hello")),
    };
    let bell = fds
        .pop()
        .ok_or(ConnectError::Protocol("hello without doorbell"))?;
    let fd = fds
        .pop()
        .ok_or(ConnectError::Protocol("hello without segment"))?;
    let bell = Doorbell::from_peer(bell)
        .map_err(|_| ConnectError::Protocol("doorbell is not a Unix SOCK_SEQPACKET socket"))?;
    let seals = memfd::seals(&fd).map_err(os("F_GET_SEALS"))?;
    if !seals.contains(SealFlags::SHRINK | SealFlags::GROW) {
        return Err(ConnectError::Protocol(
            "segment not sealed against resizing",
        ));
    }
    let actual = memfd::size(&fd).map_err(os("fstat"))?;
    let ino = inode(&fd);
    if len < min || len > max || len > actual {
        return Err(ConnectError::Protocol("segment size out of range"));
    }
    let map =
        Mapping::map(&fd, len as usize, Access::ReadWrite, false).map_err(os("mmap segment"))?;
    Ok(Admitted {
        cred,
        map,
        len,
        actual,
        bell,
        ino,
    })
}

/// The inode number of `fd` (0 if `fstat` fails): a memfd's is unique
/// among live memfds, and the same for every process mapping it.
pub fn inode(fd: impl std::os::fd::AsFd) -> u64 {
    rustix::fs::fstat(fd).map_or(0, |st| st.st_ino)
}

/// Listener half: accept the admitted segment.
pub fn welcome(sock: &OwnedFd, proto: Protocol) -> Result<(), ConnectError> {
    let w = Handshake::Welcome {
        magic: proto.magic,
        version: proto.version,
    };
    fdpass::send(sock, &w.encode(), &[], false).map_err(os("send welcome"))
}

/// The magic and version at the start of a mapped segment, copied out with
/// volatile reads (the peer may be writing them).
pub fn read_head(map: &Mapping) -> ([u8; 8], u32) {
    let mut head = [0u8; 12];
    // Every segment mapping is at least one page, so its first 12 bytes are
    // mapped; `head` is ours.
    // SAFETY: as argued just above.
    unsafe { crate::copy::copy_volatile(map.as_ptr(), head.as_mut_ptr(), head.len()) };
    let mut magic = [0u8; 8];
    magic.copy_from_slice(&head[..8]);
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    (magic, version)
}

/// A listening `SOCK_SEQPACKET` socket at a path; removes the path on drop.
#[derive(Debug)]
pub struct SocketListener {
    sock: OwnedFd,
    path: PathBuf,
}

impl SocketListener {
    /// Listen at `path`. A stale socket file left by a dead listener is
    /// replaced; a live one is an error (`EADDRINUSE`). Every failure to
    /// take the path (empty, too long, missing directory, no permission …)
    /// is a [`ConnectError::Listen`] naming it.
    pub fn bind(path: &Path) -> Result<Self, ConnectError> {
        let at = |errno| ConnectError::Listen {
            path: path.to_path_buf(),
            errno,
        };
        // An empty path would bind an autobound abstract address that no
        // one can connect to by name.
        if path.as_os_str().is_empty() {
            return Err(at(Errno::INVAL));
        }
        let addr = SocketAddrUnix::new(path).map_err(at)?;
        let sock = seqpacket()?;
        match net::bind(&sock, &addr) {
            Ok(()) => {}
            Err(Errno::ADDRINUSE) => {
                let probe = seqpacket()?;
                if net::connect(&probe, &addr).is_ok() {
                    return Err(at(Errno::ADDRINUSE));
                }
                // Only a stale *socket* (its listener died) is replaced:
                // anything else at the path (a file the user named by
                // mistake, a directory) is never removed.
                use std::os::unix::fs::FileTypeExt;
                match std::fs::symlink_metadata(path) {
                    Ok(m) if m.file_type().is_socket() => {
                        let _ = std::fs::remove_file(path);
                    }
                    Ok(_) => return Err(at(Errno::EXIST)),
                    Err(_) => return Err(at(Errno::ADDRINUSE)),
                }
                net::bind(&sock, &addr).map_err(at)?;
            }
            Err(e) => return Err(at(e)),
        }
        net::listen(&sock, 64).map_err(os("listen"))?;
        Ok(Self {
            sock,
            path: path.to_path_buf(),
        })
    }

    /// The next connection (blocking). A signal handler that interrupts
    /// the wait is not an error: it waits on.
    pub fn accept(&self) -> Result<OwnedFd, ConnectError> {
        loop {
            match net::accept_with(&self.sock, SocketFlags::CLOEXEC) {
                Err(rustix::io::Errno::INTR) => continue,
                r => return r.map_err(os("accept")),
            }
        }
    }

    /// The next connection, waiting at most `timeout` (a signal handler
    /// that interrupts the wait does not end it early: poll(2) is never
    /// restarted by the kernel).
    pub fn accept_timeout(&self, timeout: Duration) -> Result<OwnedFd, ConnectError> {
        use rustix::event::{poll, PollFd, PollFlags};
        let deadline = std::time::Instant::now().checked_add(timeout);
        loop {
            let left = deadline.map_or(timeout, |d| {
                d.saturating_duration_since(std::time::Instant::now())
            });
            let ts = rustix::time::Timespec {
                tv_sec: left.as_secs().min(i64::MAX as u64) as i64,
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [PollFd::new(&self.sock, PollFlags::IN)];
            return match poll(&mut fds, Some(&ts)) {
                Ok(0) => Err(ConnectError::TimedOut),
                Ok(_) => self.accept(),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => Err(ConnectError::Os {
                    op: "poll",
                    errno: e,
                }),
            };
        }
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Connect a `SOCK_SEQPACKET` socket to `path`.
pub fn connect(path: &Path) -> Result<OwnedFd, ConnectError> {
    let sock = seqpacket()?;
    let addr = SocketAddrUnix::new(path).map_err(os("socket path"))?;
    net::connect(&sock, &addr).map_err(os("connect"))?;
    Ok(sock)
}

impl ConnectError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind as K;
        match self {
            Self::Os { .. } | Self::Listen { .. } => K::Os,
            Self::Refused => K::PermissionDenied,
            Self::Protocol(_) => K::Protocol,
            Self::TimedOut => K::TimedOut,
            Self::Region(r) => r.kind(),
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Os { errno, .. } | Self::Listen { errno, .. } => Some(*errno),
            Self::Region(r) => r.errno(),
            _ => None,
        }
    }
}

/// The path errors every listener built on [`SocketListener`] reports, checked
/// against `bind` (the tests of the segment, channel and rendezvous listeners):
///
/// * a path in a missing directory: the bind error (`ENOENT`) naming the path,
///   not the `listen` that used to follow it (`EINVAL`);
/// * an empty path is refused (it used to autobind an abstract address nobody
///   could connect to by name).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn check_listen_paths<T>(bind: impl Fn(&Path) -> Result<T, ConnectError>) {
    let refused = |path: &str| match bind(Path::new(path)) {
        Ok(_) => panic!("a listener bound {path:?}"),
        Err(e) => e,
    };
    let e = refused("/nonexistent-zcio-test-dir/sub/s.sock");
    let text = e.to_string();
    match e {
        ConnectError::Listen { path: p, errno } => {
            assert_eq!(p, Path::new("/nonexistent-zcio-test-dir/sub/s.sock"));
            assert_eq!(errno, Errno::NOENT, "{text}");
        }
        other => panic!("expected ConnectError::Listen, got {other:?}"),
    }
    assert!(
        text.contains("\"/nonexistent-zcio-test-dir/sub/s.sock\""),
        "{text}"
    );
    assert!(
        text.contains("directory \"/nonexistent-zcio-test-dir/sub\" does not exist"),
        "{text}"
    );
    let e = refused("");
    let text = e.to_string();
    assert!(
        matches!(e, ConnectError::Listen { ref path, errno: Errno::INVAL } if path.as_os_str().is_empty()),
        "{e:?}"
    );
    assert!(text.contains("the socket path is empty"), "{text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The socket listener's path errors ([`check_listen_paths`]); the channel and
    /// rendezvous listeners, built on it, run the same checks in their own tests.
    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn listen_path_errors() {
        check_listen_paths(SocketListener::bind);
    }

    /// A live listener's path is `EADDRINUSE` with the path; a stale socket
    /// file (its listener gone) is replaced.
    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn listen_on_a_live_path_is_addrinuse_and_a_stale_one_is_replaced() {
        let dir = std::env::temp_dir().join(format!("zcio-seg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let first = SocketListener::bind(&path).unwrap();
        match SocketListener::bind(&path).unwrap_err() {
            ConnectError::Listen { path: p, errno } => {
                assert_eq!((p.as_path(), errno), (path.as_path(), Errno::ADDRINUSE));
            }
            other => panic!("expected ConnectError::Listen, got {other:?}"),
        }
        drop(first);
        // A stale file: a socket bound there and closed, its path left.
        let stale = seqpacket().unwrap();
        net::bind(&stale, &SocketAddrUnix::new(path.as_path()).unwrap()).unwrap();
        drop(stale);
        assert!(path.exists());
        let again = SocketListener::bind(&path).expect("a stale socket file is replaced");
        drop(again);
        assert!(!path.exists(), "the path is removed on drop");
        // Anything but a socket at the path is never removed: a user's
        // file named by mistake stays (EEXIST, saying so).
        let file = dir.join("notes.txt");
        std::fs::write(&file, b"keep me").unwrap();
        match SocketListener::bind(&file).unwrap_err() {
            ConnectError::Listen { errno, .. } => assert_eq!(errno, Errno::EXIST),
            other => panic!("expected ConnectError::Listen, got {other:?}"),
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn handshake_roundtrip_and_rejects() {
        for h in [
            Handshake::Hello {
                magic: *b"ZCIOCHAN",
                version: 2,
                len: 4096,
            },
            Handshake::Welcome {
                magic: *b"ZCIORDV1",
                version: 1,
            },
            Handshake::Refused,
        ] {
            assert_eq!(Handshake::decode(&h.encode()), Some(h));
        }
        let mut bad = Handshake::Refused.encode();
        bad[30] = 1;
        assert_eq!(Handshake::decode(&bad), None, "reserved bytes must be zero");
        assert_eq!(Handshake::decode(&[1u8; 31]), None);
        let mut w = Handshake::Welcome {
            magic: [1; 8],
            version: 1,
        }
        .encode();
        w[8] = 1;
        assert_eq!(Handshake::decode(&w), None, "a welcome carries no length");
    }

    proptest::proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        #[test]
        fn decode_never_panics_and_roundtrips(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            if let Some(h) = Handshake::decode(&bytes) {
                proptest::prop_assert_eq!(Handshake::decode(&h.encode()), Some(h));
            }
        }
    }
}
