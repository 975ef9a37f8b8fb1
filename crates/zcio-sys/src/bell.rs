//! The doorbell: a pollable descriptor a peer rings to wake a waiter that
//! sleeps in an event loop (tokio's `AsyncFd`, Python's `loop.add_reader`)
//! instead of on a futex.
//!
//! It follows the futex path's discipline (`crate::wait`): the waiter sets
//! the *sleeping* flag in the word its peer changes when it publishes, and
//! also marks that word's line as "ring my bell" (a sticky word beside the
//! flag, see `channel::spsc::TailLine::bell`); the peer that finds the flag
//! set rings the bell instead of calling `FUTEX_WAKE`. One flag, one
//! handshake, two ways to sleep.
//!
//! **Why a `SOCK_SEQPACKET` pair and not an eventfd.** The two ends of a
//! connection share the bell, so the peer holds the same open file as we
//! do. An eventfd's non-blocking flag lives in that shared file: a hostile
//! peer could clear it and fill the counter, and our next ring would block
//! forever. A socket send takes `MSG_DONTWAIT` per call, so ringing never
//! blocks whatever the peer does; a full queue (`EAGAIN`) just means the
//! bell is already ringing. And when the peer's end closes — the peer
//! exited or was killed — ours reports a hang-up: the waiter wakes within
//! the kernel's own time, without a liveness timer.
//!
//! Each end of the pair is both: the waiter polls and drains its own end,
//! and rings the peer by sending on it (the datagram lands in the peer's
//! receive queue).
//!
//! **Named bells, for rings.** A named ring has no connection to pass a
//! descriptor over, and its consumers come and go. A waiter there binds a
//! [`NamedBell`]: a Unix datagram socket named by a random 64-bit number,
//! which it writes into its slot of the ring; the other side rings it with
//! a [`Ringer`] (`sendto` with `MSG_DONTWAIT`: never blocks). The socket is
//! bound as a file in the ring directory (`.zcio-bell.` and the number in
//! hex), so it reaches every process that shares the rings — containers in
//! other network namespaces too, where an abstract-namespace name would
//! not. Where that directory takes no socket (read-only, or a path too long
//! for `sun_path`) it falls back to the abstract name `zcio-bell/` and the
//! number, which works within one network namespace; a ringer tries the
//! file first, then the abstract name. Anyone who can reach a bell may send
//! to it (the file is made writable for all, like the abstract name), so a
//! named bell is only ever a hint to look — the flood guard of the async
//! layer applies — and the fixed prefix means a ring's writer can make a
//! producer poke nothing but zcio bells. A bell's file goes when the bell
//! is dropped; files left by killed processes are swept by the next bind
//! (a socket nobody listens on refuses a connection).

pub use real::{Doorbell, NamedBell, Ringer};

#[cfg(loom)]
pub use model::ModelBell;

/// What the ring protocols need of a doorbell: ring it (the waker's side)
/// and sleep on it (the waiter's). The real one is [`Doorbell`]; the loom
/// models use a counter on the model's futex.
pub trait Bell {
    /// Wake the sleeper, never blocking.
    fn ring(&self);
    /// Sleep until rung, hung up or `timeout` (then take the rings).
    fn wait(&self, timeout: std::time::Duration) -> Rung;
}

/// What a wait on a doorbell found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rung {
    /// The bell rang (or the wait was interrupted): re-check.
    Rang,
    /// The timeout passed.
    TimedOut,
    /// The peer's end is closed: it exited, was killed or closed the
    /// connection.
    HungUp,
}

mod real {
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    use rustix::io::Errno;
    use rustix::net::{
        self, sockopt, AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
    };

    use super::{Bell, Rung};

    /// Most datagrams one [`Doorbell::drain`] takes off the queue: a peer
    /// that rings in a flood costs a bounded amount of work per wake.
    const DRAIN_MAX: usize = 64;

    /// One end of a doorbell pair (see the module docs).
    #[derive(Debug)]
    pub struct Doorbell {
        sock: OwnedFd,
    }

    impl Doorbell {
        /// A connected pair: keep one, pass the other to the peer.
        pub fn pair() -> Result<(Self, OwnedFd), Errno> {
            let (a, b) = net::socketpair(
                AddressFamily::UNIX,
                SocketType::SEQPACKET,
                SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
                None,
            )?;
            Ok((Self { sock: a }, b))
        }

        /// The end a peer passed us. Refused unless it is a Unix
        /// `SOCK_SEQPACKET` socket: then ringing is a `send` with
        /// `MSG_DONTWAIT` and draining a `recv` with it, neither of which
        /// can block or touch anything but that socket, whatever the peer
        /// did to the file.
        pub fn from_peer(fd: OwnedFd) -> Result<Self, Errno> {
            if sockopt::socket_type(&fd)? != SocketType::SEQPACKET
                || sockopt::socket_domain(&fd)? != AddressFamily::UNIX
            {
                return Err(Errno::NOTSOCK);
            }
            Ok(Self { sock: fd })
        }

        /// Ring the peer's bell: one byte, never blocking. A full queue
        /// means it is already ringing; a closed peer has nobody to wake.
        pub fn ring(&self) {
            let _ = net::send(&self.sock, &[1], SendFlags::DONTWAIT | SendFlags::NOSIGNAL);
        }

        /// Take the rings queued for us off the socket (at most
        /// `DRAIN_MAX`). Returns how many there were, or `HungUp` once the
        /// peer's end is closed and nothing is queued.
        pub fn drain(&self) -> Result<usize, Rung> {
            let mut buf = [0u8; 8];
            for n in 0..DRAIN_MAX {
                match net::recv(&self.sock, &mut buf, RecvFlags::DONTWAIT) {
                    // A zero-length read on a SEQPACKET socket is the end.
                    Ok((0, _)) => return if n == 0 { Err(Rung::HungUp) } else { Ok(n) },
                    Ok(_) => {}
                    Err(Errno::INTR) => {}
                    Err(_) => return Ok(n),
                }
            }
            Ok(DRAIN_MAX)
        }

        /// Sleep until the bell rings, the peer hangs up or `timeout`
        /// passes (blocking waiters of an end in bell mode).
        pub fn wait(&self, timeout: Duration) -> Rung {
            let mut fds = [PollFd::new(&self.sock, PollFlags::IN)];
            let ts = Timespec::try_from(timeout).unwrap_or(Timespec {
                tv_sec: i64::MAX,
                tv_nsec: 0,
            });
            match poll(&mut fds, Some(&ts)) {
                Ok(0) => Rung::TimedOut,
                Ok(_) => {
                    let ev = fds[0].revents();
                    if ev.intersects(PollFlags::HUP | PollFlags::ERR) && !ev.contains(PollFlags::IN)
                    {
                        Rung::HungUp
                    } else {
                        match self.drain() {
                            Err(r) => r,
                            Ok(_) => Rung::Rang,
                        }
                    }
                }
                Err(_) => Rung::Rang,
            }
        }
    }

    /// A non-blocking Unix datagram socket.
    fn dgram() -> Result<OwnedFd, Errno> {
        net::socket_with(
            AddressFamily::UNIX,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )
    }

    /// The abstract address of named bell `id`.
    fn bell_addr(id: u64) -> Result<SocketAddrUnix, Errno> {
        SocketAddrUnix::new_abstract_name(format!("zcio-bell/{id:016x}").as_bytes())
    }

    /// File-name prefix of named bells in the ring directory.
    const FILE_PREFIX: &str = ".zcio-bell.";

    /// The file of named bell `id` in `dir`.
    fn bell_file(dir: &Path, id: u64) -> PathBuf {
        dir.join(format!("{FILE_PREFIX}{id:016x}"))
    }

    /// Most stale bell files one bind looks at.
    const SWEEP_MAX: usize = 64;

    /// Remove bell files in `dir` whose socket nobody listens on any more
    /// (their process died without dropping the bell). Best effort.
    fn sweep(dir: &Path) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        let Ok(probe) = dgram() else {
            return;
        };
        for e in rd.flatten().take(SWEEP_MAX * 16) {
            let name = e.file_name();
            if !name.to_string_lossy().starts_with(FILE_PREFIX) {
                continue;
            }
            let path = e.path();
            if let Ok(addr) = SocketAddrUnix::new(&path) {
                // A datagram connect sends nothing; a socket without a
                // listener refuses it.
                if net::connect(&probe, &addr) == Err(Errno::CONNREFUSED) {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }

    /// A doorbell with a number instead of a connection (see the module
    /// docs): bound as a file in the ring directory (or, failing that, in
    /// the abstract namespace), rung by [`Ringer::ring`].
    #[derive(Debug)]
    pub struct NamedBell {
        bell: Doorbell,
        id: u64,
        /// The socket's file, removed on drop (`None`: abstract name).
        file: Option<PathBuf>,
    }

    impl NamedBell {
        /// Bind a fresh named bell (a random nonzero number) in the ring
        /// directory (`crate::sys::shm::ring_dir`).
        pub fn bind() -> Result<Self, Errno> {
            Self::bind_in(&crate::sys::shm::ring_dir())
        }

        /// Bind a fresh named bell as a file in `dir`, else abstract.
        pub fn bind_in(dir: &Path) -> Result<Self, Errno> {
            use std::hash::{BuildHasher, Hasher};
            let sock = dgram()?;
            let mut in_dir = true;
            sweep(dir);
            for _ in 0..16 {
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u32(std::process::id());
                let id = h.finish() | 1;
                if in_dir {
                    let file = bell_file(dir, id);
                    match SocketAddrUnix::new(&file).and_then(|a| net::bind(&sock, &a)) {
                        Ok(()) => {
                            use std::os::unix::fs::PermissionsExt;
                            // Ringable by every process that shares the
                            // directory (see the module docs).
                            let _ = std::fs::set_permissions(
                                &file,
                                std::fs::Permissions::from_mode(0o666),
                            );
                            return Ok(Self {
                                bell: Doorbell { sock },
                                id,
                                file: Some(file),
                            });
                        }
                        Err(Errno::ADDRINUSE) => continue,
                        // No socket here (read-only, no permission, too
                        // long a path): the abstract name.
                        Err(_) => in_dir = false,
                    }
                }
                match net::bind(&sock, &bell_addr(id)?) {
                    Ok(()) => {
                        return Ok(Self {
                            bell: Doorbell { sock },
                            id,
                            file: None,
                        })
                    }
                    Err(Errno::ADDRINUSE) => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(Errno::ADDRINUSE)
        }

        /// Its number (what the ringing side needs).
        pub fn id(&self) -> u64 {
            self.id
        }

        /// Whether it is bound as a file in the ring directory (reachable
        /// from other network namespaces).
        #[cfg_attr(not(feature = "internals"), allow(dead_code))]
        pub fn is_file(&self) -> bool {
            self.file.is_some()
        }

        /// Take the rings queued (at most a bounded batch).
        pub fn drain(&self) -> usize {
            self.bell.drain().unwrap_or(0)
        }
    }

    impl Drop for NamedBell {
        fn drop(&mut self) {
            if let Some(f) = &self.file {
                let _ = std::fs::remove_file(f);
            }
        }
    }

    impl AsFd for NamedBell {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.bell.as_fd()
        }
    }

    impl AsRawFd for NamedBell {
        fn as_raw_fd(&self) -> RawFd {
            self.bell.as_raw_fd()
        }
    }

    /// Rings named bells by number (an unbound datagram socket).
    #[derive(Debug)]
    pub struct Ringer {
        sock: OwnedFd,
        dir: PathBuf,
    }

    impl Ringer {
        /// A ringer for bells in the ring directory.
        pub fn new() -> Result<Self, Errno> {
            Self::new_in(crate::sys::shm::ring_dir())
        }

        /// A ringer for bells in `dir`.
        pub fn new_in(dir: PathBuf) -> Result<Self, Errno> {
            Ok(Self {
                sock: dgram()?,
                dir,
            })
        }

        /// Ring named bell `id`: one byte, never blocking; a bell that is
        /// gone or full is not an error (nobody to wake, or already rung).
        /// Its file in the ring directory first, then its abstract name.
        pub fn ring(&self, id: u64) {
            let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
            if let Ok(addr) = SocketAddrUnix::new(bell_file(&self.dir, id)) {
                match net::sendto(&self.sock, &[1], flags, &addr) {
                    // Sent, or the bell is full (already ringing).
                    Ok(_) | Err(Errno::AGAIN) => return,
                    Err(_) => {}
                }
            }
            if let Ok(addr) = bell_addr(id) {
                let _ = net::sendto(&self.sock, &[1], flags, &addr);
            }
        }
    }

    impl Bell for Doorbell {
        fn ring(&self) {
            Doorbell::ring(self);
        }

        fn wait(&self, timeout: Duration) -> Rung {
            Doorbell::wait(self, timeout)
        }
    }

    impl AsFd for Doorbell {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.sock.as_fd()
        }
    }

    impl AsRawFd for Doorbell {
        fn as_raw_fd(&self) -> RawFd {
            self.sock.as_raw_fd()
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
        fn rings_cross_drain_and_hang_up_is_seen() {
            let (a, b) = Doorbell::pair().unwrap();
            let b = Doorbell::from_peer(b).unwrap();
            assert_eq!(b.wait(Duration::from_millis(1)), Rung::TimedOut);
            a.ring();
            a.ring();
            assert_eq!(b.wait(Duration::from_secs(5)), Rung::Rang);
            assert_eq!(b.drain(), Ok(0), "the wait drained both rings");
            // A flood never blocks the ringer and is drained a bounded
            // batch at a time.
            for _ in 0..10_000 {
                b.ring();
            }
            assert_eq!(a.drain(), Ok(DRAIN_MAX));
            drop(b);
            while a.drain() != Err(Rung::HungUp) {}
            assert_eq!(a.wait(Duration::from_secs(5)), Rung::HungUp);
        }

        #[test]
        #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
        fn a_named_bell_is_rung_by_number_and_a_gone_one_is_no_error() {
            let b = NamedBell::bind().unwrap();
            let r = Ringer::new().unwrap();
            assert_eq!(b.bell.wait(Duration::from_millis(1)), Rung::TimedOut);
            r.ring(b.id());
            assert_eq!(b.bell.wait(Duration::from_secs(5)), Rung::Rang);
            // A flood never blocks the ringer (the socket's queue is short:
            // the rest is dropped, which is fine for a bell).
            for _ in 0..10_000 {
                r.ring(b.id());
            }
            assert!((1..=DRAIN_MAX).contains(&b.drain()));
            let id = b.id();
            drop(b);
            r.ring(id);
            assert_ne!(NamedBell::bind().unwrap().id(), id);
        }

        #[test]
        #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
        fn anything_but_a_seqpacket_socket_is_refused() {
            let (r, _w) = rustix::pipe::pipe().unwrap();
            assert!(Doorbell::from_peer(r).is_err());
            let (s, _t) = net::socketpair(
                AddressFamily::UNIX,
                SocketType::STREAM,
                SocketFlags::CLOEXEC,
                None,
            )
            .unwrap();
            assert!(Doorbell::from_peer(s).is_err());
        }
    }
}

/// Loom model: a counter the ringer bumps under its own mutex and
/// condition variable, apart from the model's futex (whose one condition
/// variable wakes every sleeper): a model bell's wait ends only on a ring
/// of this bell, and a ring wakes nobody else, so a protocol that forgets
/// either a ring or a futex wake deadlocks, and loom reports it.
#[cfg(loom)]
mod model {
    use std::time::Duration;

    use loom::sync::{Arc, Condvar, Mutex};

    use super::{Bell, Rung};

    /// One direction of a doorbell: clone it for the waiter and the ringer.
    #[derive(Debug, Clone)]
    pub struct ModelBell {
        inner: Arc<(Mutex<u64>, Condvar)>,
    }

    impl ModelBell {
        /// The waiter's and the ringer's handle of one bell.
        pub fn pair() -> (Self, Self) {
            let b = Self {
                inner: Arc::new((Mutex::new(0), Condvar::new())),
            };
            (b.clone(), b)
        }
    }

    impl Bell for ModelBell {
        fn ring(&self) {
            let (m, cv) = &*self.inner;
            *m.lock().unwrap() += 1;
            cv.notify_all();
        }

        fn wait(&self, _timeout: Duration) -> Rung {
            let (m, cv) = &*self.inner;
            let mut n = m.lock().unwrap();
            while *n == 0 {
                n = cv.wait(n).unwrap();
            }
            *n = 0;
            Rung::Rang
        }
    }
}
