//! Connection set-up and the send/receive operations of a rendezvous
//! endpoint.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use thiserror::Error;

use super::slot::{self, Raw, Slot, SlotError, Waiter, WORDS};
use crate::segment::{self, AccessPolicy, ConnectError, Protocol, SocketListener};
use crate::sys::fdpass::{self, RecvOutcome, MAX_FDS};
use crate::sys::mmap::Mapping;
use crate::sys::page_size;
use crate::sys::peer::{self, PeerCred};
use crate::wait::SpinBudget;

/// Segment magic.
const MAGIC: [u8; 8] = *b"ZCIORDV1";
/// Layout version of the segment.
const VERSION: u32 = 1;
/// Offsets: header, client→server slot, server→client slot.
const C2S: usize = 128;
const S2C: usize = 256;
/// Longest sleep between liveness checks.
const SLICE: Duration = crate::wait::LIVENESS;
/// Longest busy-wait for a partner before sleeping (adapted per endpoint
/// side: halved after each wait that had to sleep anyway).
const SPIN: Duration = Duration::from_micros(30);
/// Bound on the connection handshake.
const HANDSHAKE: Duration = Duration::from_secs(5);
/// What both ends of a rendezvous connection must speak.
const PROTOCOL: Protocol = Protocol {
    magic: MAGIC,
    version: VERSION,
};

/// A message: a label, up to [`WORDS`] words, up to 16 descriptors.
#[derive(Debug, Default)]
pub struct Message {
    /// Caller-defined label.
    pub label: u64,
    /// The words (at most [`WORDS`]).
    pub words: Vec<u64>,
    /// Descriptors (sent over the socket, paired with the hand-over).
    pub fds: Vec<OwnedFd>,
}

impl Message {
    /// A message of `words` with `label`.
    pub fn new(label: u64, words: &[u64]) -> Self {
        Self {
            label,
            words: words.to_vec(),
            fds: Vec::new(),
        }
    }
}

/// Rendezvous errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum IpcError {
    /// Nothing happened before the timeout (a send was retracted).
    #[error("timed out")]
    TimedOut,
    /// The partner process hung up or died.
    #[error("partner gone")]
    PeerGone,
    /// The partner broke the slot protocol (corrupt shared state or
    /// mismatched descriptors).
    #[error("partner broke the protocol: {0}")]
    Protocol(&'static str),
    /// More than [`WORDS`] words or 16 descriptors.
    #[error("message too large: at most {WORDS} words and {MAX_FDS} descriptors")]
    TooLarge,
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// The call.
        op: &'static str,
        /// Its errno.
        errno: Errno,
    },
}

fn os(op: &'static str) -> impl FnOnce(Errno) -> IpcError {
    move |errno| IpcError::Os { op, errno }
}

struct Shared {
    map: Mapping,
    sock: OwnedFd,
    peer: PeerCred,
}

impl Shared {
    fn slot(&self, off: usize) -> &Slot {
        // `off` is C2S or S2C: a 128-aligned offset whose Slot (128 bytes)
        // lies inside the one-page mapping owned by `self`; Slot is made of
        // atomics, so shared access is sound and any bits are valid.
        // SAFETY: as argued just above.
        unsafe { &*self.map.as_ptr().add(off).cast::<Slot>() }
    }
}

/// One end of a rendezvous connection.
pub struct Endpoint {
    sh: Arc<Shared>,
    tx: usize,
    rx: usize,
    /// Held while sending; the adaptive spin of the send side.
    send_lock: Mutex<SpinBudget>,
    /// Held while receiving; the adaptive spin of the receive side.
    recv_lock: Mutex<SpinBudget>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("peer", &self.sh.peer)
            .finish()
    }
}

/// Bounded wait with liveness checks: sleeps in slices until `deadline`,
/// giving up early when the partner hung up.
struct PeerWait<'a> {
    deadline: Option<Instant>,
    sock: BorrowedFd<'a>,
    gone: bool,
    budget: &'a mut SpinBudget,
}

/// Busy-wait until `done`, for at most the budget (and not past
/// `deadline`); adapts the budget to how the wait ended.
fn spin_until(
    budget: &mut SpinBudget,
    deadline: Option<Instant>,
    done: &mut dyn FnMut() -> bool,
) -> bool {
    let start = Instant::now();
    let mut limit = budget.get();
    if let Some(d) = deadline {
        limit = limit.min(d.saturating_duration_since(start));
    }
    let mut i = 0u32;
    loop {
        if done() {
            budget.record(false);
            return true;
        }
        i = i.wrapping_add(1);
        if i.is_multiple_of(32) && start.elapsed() >= limit {
            budget.record(true);
            return false;
        }
        crate::wait::spin_pause(i);
    }
}

impl Waiter for PeerWait<'_> {
    fn spin(&mut self, done: &mut dyn FnMut() -> bool) -> bool {
        spin_until(self.budget, self.deadline, done)
    }

    fn slice(&mut self) -> Option<Duration> {
        if peer::socket_hung_up(self.sock) {
            self.gone = true;
            return None;
        }
        match self.deadline {
            None => Some(SLICE),
            Some(d) => {
                let now = Instant::now();
                (now < d).then(|| (d - now).min(SLICE))
            }
        }
    }
}

impl PeerWait<'_> {
    fn error(&self) -> IpcError {
        if self.gone {
            IpcError::PeerGone
        } else {
            IpcError::TimedOut
        }
    }
}

impl Endpoint {
    /// Connect to the listener at `path`: offer a fresh one-page segment
    /// (sealed memfd, magic + layout version) through the shared
    /// [`segment`](crate::segment) handshake; the listener's access policy
    /// decides on our kernel credentials.
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
        let peer = segment::offer(&sock, PROTOCOL, fd.as_fd(), len as u64)?;
        Ok(Self::new(Shared { map, sock, peer }, C2S, S2C))
    }

    fn new(sh: Shared, tx: usize, rx: usize) -> Self {
        Self {
            sh: Arc::new(sh),
            tx,
            rx,
            send_lock: Mutex::new(SpinBudget::new(SPIN)),
            recv_lock: Mutex::new(SpinBudget::new(SPIN)),
        }
    }

    /// The partner's kernel credentials (from `SO_PEERCRED`, not from any
    /// message).
    pub fn peer(&self) -> PeerCred {
        self.sh.peer
    }

    fn waiter<'a>(&'a self, timeout: Option<Duration>, budget: &'a mut SpinBudget) -> PeerWait<'a> {
        PeerWait {
            deadline: timeout.map(|t| Instant::now() + t),
            sock: self.sh.sock.as_fd(),
            gone: false,
            budget,
        }
    }

    /// Send `msg` and wait until the partner has taken it (at most
    /// `timeout`; `Some(ZERO)` succeeds only if the partner is already
    /// waiting... or takes it within one check). On error the message was
    /// not delivered.
    pub fn send(&self, msg: &Message, timeout: Option<Duration>) -> Result<(), IpcError> {
        if msg.words.len() > WORDS || msg.fds.len() > MAX_FDS {
            return Err(IpcError::TooLarge);
        }
        let mut budget = self.send_lock.lock().unwrap_or_else(|e| e.into_inner());
        let s = self.sh.slot(self.tx);
        let seq = (s.state.load(crate::sync::Ordering::Acquire) >> 4).wrapping_add(1);
        if !msg.fds.is_empty() {
            let fds: Vec<BorrowedFd<'_>> = msg.fds.iter().map(|f| f.as_fd()).collect();
            fdpass::send(&self.sh.sock, &seq.to_le_bytes(), &fds, false).map_err(os("sendmsg"))?;
        }
        let mut raw = Raw {
            label: msg.label,
            words: [0; WORDS],
            len: msg.words.len(),
            nfds: msg.fds.len(),
            seq,
        };
        raw.words[..msg.words.len()].copy_from_slice(&msg.words);
        let mut w = self.waiter(timeout, &mut budget);
        match slot::send(s, &raw, &mut w) {
            Ok(_) => Ok(()),
            Err(SlotError::TimedOut) => Err(w.error()),
            Err(SlotError::Corrupt) => Err(IpcError::Protocol("corrupt slot state")),
        }
    }

    /// Take a message if one is waiting (no wait); the caller holds
    /// `recv_lock` and finishes it with [`Self::finish`].
    fn try_take(&self) -> Result<Option<Raw>, IpcError> {
        slot::take(self.sh.slot(self.rx)).map_err(|_| IpcError::Protocol("corrupt slot state"))
    }

    /// Turn a taken slot message into `into` (its word buffer is reused),
    /// fetching its descriptors. The caller holds `recv_lock`.
    fn finish(&self, raw: Raw, into: &mut Message) -> Result<(), IpcError> {
        into.fds.clear();
        if raw.nfds > 0 {
            // The descriptors were sent before the hand-over; stale records
            // of retracted sends carry older sequence numbers.
            loop {
                let mut tag = [0u8; 8];
                match fdpass::recv(&self.sh.sock, &mut tag, true) {
                    Ok(RecvOutcome::Record(r)) if r.len == 8 => {
                        let t = u64::from_le_bytes(tag);
                        if t == raw.seq {
                            if r.fds.len() != raw.nfds {
                                return Err(IpcError::Protocol("descriptor count mismatch"));
                            }
                            into.fds = r.fds;
                            break;
                        }
                        if t > raw.seq {
                            return Err(IpcError::Protocol("descriptors out of order"));
                        }
                    }
                    Ok(RecvOutcome::Record(_)) => {
                        return Err(IpcError::Protocol("bad descriptor record"))
                    }
                    _ => return Err(IpcError::Protocol("descriptors missing")),
                }
            }
        }
        into.label = raw.label;
        into.words.clear();
        into.words.extend_from_slice(&raw.words[..raw.len]);
        Ok(())
    }

    /// Wait for a message from this partner (closed wait), at most `timeout`.
    pub fn receive(&self, timeout: Option<Duration>) -> Result<Message, IpcError> {
        receive_any(&[self], timeout).map(|(_, m)| m)
    }

    /// Like [`Self::receive`], but into `buf`, whose word vector is reused
    /// (no allocation when it has room for [`WORDS`] words). On error `buf`
    /// is unspecified but valid.
    pub fn receive_into(
        &self,
        buf: &mut Message,
        timeout: Option<Duration>,
    ) -> Result<(), IpcError> {
        wait_any(&[self], timeout, |e, raw| e.finish(raw, buf)).map(|_| ())
    }

    /// Send `msg`, then wait for this partner's answer.
    pub fn call(
        &self,
        msg: &Message,
        send_timeout: Option<Duration>,
        recv_timeout: Option<Duration>,
    ) -> Result<Message, IpcError> {
        self.send(msg, send_timeout)?;
        self.receive(recv_timeout)
    }
}

/// Open wait: the first message from any of `eps` (index, message), at most
/// `timeout`. Partners that hung up are skipped; if all have, `PeerGone`.
pub fn receive_any(
    eps: &[&Endpoint],
    timeout: Option<Duration>,
) -> Result<(usize, Message), IpcError> {
    let mut m = Message::default();
    let i = wait_any(eps, timeout, |e, raw| e.finish(raw, &mut m))?;
    Ok((i, m))
}

/// The open wait behind [`receive_any`] and [`Endpoint::receive_into`]:
/// takes the first message from any of `eps` and hands it to `finish`
/// while the receive locks are still held (descriptor records are read in
/// order under them).
fn wait_any(
    eps: &[&Endpoint],
    timeout: Option<Duration>,
    finish: impl FnOnce(&Endpoint, Raw) -> Result<(), IpcError>,
) -> Result<usize, IpcError> {
    let mut guards: Vec<_> = eps
        .iter()
        .map(|e| e.recv_lock.lock().unwrap_or_else(|p| p.into_inner()))
        .collect();
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut spun = false;
    loop {
        for (i, e) in eps.iter().enumerate() {
            if let Some(raw) = e.try_take()? {
                return finish(e, raw).map(|()| i);
            }
        }
        if !spun {
            // A partner that is running usually sends within microseconds:
            // spin (the first endpoint's budget) before flagging and sleeping.
            spun = true;
            if let Some(budget) = guards.first_mut() {
                let any = &mut || eps.iter().any(|e| slot::ready(e.sh.slot(e.rx)));
                if spin_until(budget, deadline, any) {
                    continue;
                }
            }
        }
        let mut words = Vec::with_capacity(eps.len());
        let mut live = 0;
        for e in eps {
            if peer::socket_hung_up(&e.sh.sock) {
                continue;
            }
            live += 1;
            let s = e.sh.slot(e.rx);
            match slot::prepare_sleep(s) {
                Some(v) => words.push((&s.state, v)),
                None => words.clear(),
            }
        }
        if live == 0 {
            return Err(IpcError::PeerGone);
        }
        if words.len() < live {
            continue; // a message arrived while we flagged
        }
        let t = match deadline {
            None => SLICE,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Err(IpcError::TimedOut);
                }
                (d - now).min(SLICE)
            }
        };
        crate::sync::futex_wait_any(&words, t);
    }
}

/// Reply to `to`, then wait for the next message from any of `eps`.
pub fn reply_and_wait(
    to: &Endpoint,
    reply: &Message,
    eps: &[&Endpoint],
    timeout: Option<Duration>,
) -> Result<(usize, Message), IpcError> {
    to.send(reply, timeout)?;
    receive_any(eps, timeout)
}

/// Accepts rendezvous connections on a Unix socket path; removes the path
/// on drop.
#[derive(Debug)]
pub struct EndpointListener {
    sock: SocketListener,
    access: AccessPolicy,
}

impl EndpointListener {
    /// Listen at `path`, admitting only our own uid (see
    /// [`EndpointListener::bind_with`]). A stale socket file left by a dead
    /// listener is replaced; a live one is an error.
    pub fn bind(path: impl AsRef<Path>) -> Result<Self, ConnectError> {
        Self::bind_with(path, AccessPolicy::default())
    }

    /// Listen at `path`, admitting callers `access` allows (decided on the
    /// kernel's `SO_PEERCRED`, before anything they send is looked at).
    pub fn bind_with(path: impl AsRef<Path>, access: AccessPolicy) -> Result<Self, ConnectError> {
        Ok(Self {
            sock: SocketListener::bind(path.as_ref())?,
            access,
        })
    }

    /// Accept one connection (blocking) and validate the partner's segment.
    /// Refused or broken handshakes are errors; the listener stays usable.
    pub fn accept(&self) -> Result<Endpoint, ConnectError> {
        self.admit(self.sock.accept()?)
    }

    /// Accept, waiting at most `timeout` for a connection.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Endpoint, ConnectError> {
        self.admit(self.sock.accept_timeout(timeout)?)
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        self.sock.path()
    }

    fn admit(&self, sock: OwnedFd) -> Result<Endpoint, ConnectError> {
        segment::set_timeouts(&sock, HANDSHAKE, Some(HANDSHAKE))?;
        let len = page_size() as u64;
        let seg = segment::admit(&sock, PROTOCOL, &self.access, len, len)?;
        if segment::read_head(&seg.map) != (MAGIC, VERSION) {
            return Err(ConnectError::Protocol("bad segment header"));
        }
        segment::welcome(&sock, PROTOCOL)?;
        Ok(Endpoint::new(
            Shared {
                map: seg.map,
                sock,
                peer: seg.cred,
            },
            S2C,
            C2S,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::memfd;
    use std::path::PathBuf;

    fn path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("zcio-rdv-{tag}-{}", std::process::id()))
    }

    #[test]
    fn call_and_reply_between_threads() {
        let p = path("call");
        let l = EndpointListener::bind(&p).unwrap();
        let p2 = p.clone();
        let t = std::thread::spawn(move || {
            let c = Endpoint::connect(&p2).unwrap();
            for i in 0..200u64 {
                let r = c
                    .call(
                        &Message::new(1, &[i, 2 * i]),
                        None,
                        Some(Duration::from_secs(10)),
                    )
                    .unwrap();
                assert_eq!(r.words, vec![3 * i]);
            }
        });
        let s = l.accept().unwrap();
        assert_eq!(s.peer().pid, std::process::id() as i32);
        let (_, mut m) = receive_any(&[&s], Some(Duration::from_secs(10))).unwrap();
        for _ in 0..199 {
            let reply = Message::new(2, &[m.words[0] + m.words[1]]);
            m = reply_and_wait(&s, &reply, &[&s], Some(Duration::from_secs(10)))
                .unwrap()
                .1;
        }
        s.send(&Message::new(2, &[m.words[0] + m.words[1]]), None)
            .unwrap();
        t.join().unwrap();
    }

    /// A listener and a connected (client, server) pair.
    fn pair(tag: &str) -> (EndpointListener, Endpoint, Endpoint) {
        let p = path(tag);
        let l = EndpointListener::bind(&p).unwrap();
        let t = std::thread::spawn(move || Endpoint::connect(&p).unwrap());
        let s = l.accept().unwrap();
        (l, t.join().unwrap(), s)
    }

    #[test]
    fn timeouts_and_hangup() {
        let (_l, c, s) = pair("to");
        // Nobody receives: the send times out and is retracted.
        assert!(matches!(
            c.send(&Message::new(0, &[1]), Some(Duration::from_millis(20))),
            Err(IpcError::TimedOut)
        ));
        assert!(matches!(
            s.receive(Some(Duration::ZERO)),
            Err(IpcError::TimedOut)
        ));
        assert!(matches!(
            c.send(&Message::new(0, &[0; 9]), None),
            Err(IpcError::TooLarge)
        ));
        drop(c);
        assert!(matches!(s.receive(None), Err(IpcError::PeerGone)));
        assert!(matches!(
            s.send(&Message::new(0, &[1]), None),
            Err(IpcError::PeerGone)
        ));
    }

    #[test]
    fn the_listener_applies_its_access_policy() {
        let p = path("acl");
        let me = rustix::process::geteuid().as_raw();
        let l =
            EndpointListener::bind_with(&p, AccessPolicy::uids([me.wrapping_add(4242)])).unwrap();
        let p2 = p.clone();
        let t = std::thread::spawn(move || Endpoint::connect(&p2).map(|_| ()));
        assert!(matches!(l.accept(), Err(ConnectError::Refused)));
        assert!(matches!(t.join().unwrap(), Err(ConnectError::Refused)));
    }

    #[test]
    fn descriptors_travel_with_the_message() {
        let (_l, c, s) = pair("fd");
        let t = std::thread::spawn(move || {
            let fd = memfd::create_sized("x", 4096).unwrap();
            let mut m = Message::new(5, &[42]);
            m.fds.push(fd);
            c.send(&m, Some(Duration::from_secs(10))).unwrap();
        });
        let m = s.receive(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(
            (m.label, m.words.as_slice(), m.fds.len()),
            (5, &[42u64][..], 1)
        );
        assert_eq!(memfd::size(&m.fds[0]).unwrap(), 4096);
        t.join().unwrap();
    }
}
