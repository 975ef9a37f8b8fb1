//! A rendezvous endpoint: its message type, its configuration, the
//! send/receive operations on one partner, and the open wait every receive
//! goes through (`wait_any`: the first message from any of several
//! partners, one `futex_waitv` over their slots).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::error::{os, IpcFail, RendezvousCallError, RendezvousRecvError, RendezvousSendError};
use super::slot::{self, Raw, Slot, SlotError, WORDS};
use super::stats::{Counters, RendezvousStats};
use crate::sys::fdpass::{self, RecvOutcome, MAX_FDS};
use crate::sys::mmap::Mapping;
use crate::sys::peer::{self, PeerCred};
use crate::wait::{wait_ready, Readiness, SpinBudget, SpinPolicy, Waited};

/// The rendezvous's message, an envelope: a label, up to [`WORDS`] words,
/// up to [`MAX_FDS`](super::MAX_FDS) descriptors.
///
/// ```
/// use zcio::rendezvous::Envelope;
///
/// let m = Envelope::new(7, &[1, 2, 3]);
/// assert_eq!((m.label, m.words.as_slice()), (7, &[1, 2, 3][..]));
/// assert!(m.fds.is_empty());
/// ```
#[derive(Debug, Default)]
pub struct Envelope {
    /// Caller-defined label (e.g. an operation code).
    pub label: u64,
    /// The words (at most [`WORDS`]).
    pub words: Vec<u64>,
    /// Descriptors (sent over the socket, paired with the hand-over; the
    /// receiver gets its own duplicates).
    pub fds: Vec<OwnedFd>,
}

impl Envelope {
    /// `(bytes, descriptors)` the statistics count for this message: its
    /// label and words, 8 bytes each, and its descriptors.
    pub(super) fn counted_size(&self) -> (u64, u64) {
        (8 * (1 + self.words.len() as u64), self.fds.len() as u64)
    }

    /// A message of `words` with `label` and no descriptors.
    pub fn new(label: u64, words: &[u64]) -> Self {
        Self {
            label,
            words: words.to_vec(),
            fds: Vec::new(),
        }
    }
}

/// Default bounds on the blocking operations of an [`Rendezvous`] (like
/// [`ChannelConfig`](crate::ChannelConfig)'s `send_timeout` and
/// `recv_timeout`). Set with [`Rendezvous::with_config`] or, for every
/// endpoint a listener accepts,
/// [`RendezvousListener::with_config`](super::RendezvousListener::with_config).
///
/// ```
/// use std::time::Duration;
/// use zcio::rendezvous::RendezvousConfig;
///
/// let cfg = RendezvousConfig {
///     recv_timeout: Duration::from_secs(30),
///     ..RendezvousConfig::default()
/// };
/// assert_eq!(cfg.send_timeout, Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RendezvousConfig {
    /// Bound on [`Rendezvous::send`] (and the send half of
    /// [`Rendezvous::call`], `AsyncRendezvous::send`, a proxy's delivery
    /// and `Ticket::wait`): how long to wait for the partner to take the
    /// message. Default 10 s. `Duration::MAX` waits without a bound.
    pub send_timeout: Duration,
    /// Bound on [`Rendezvous::recv`] (and the receive half of
    /// [`Rendezvous::call`], `recv_any`, `AsyncRendezvous::recv` and each
    /// item of its `Stream`, `ProxyEndpoint::recv` and `RecvHandle::wait`).
    /// Default one hour. `Duration::MAX` waits without a bound.
    pub recv_timeout: Duration,
    /// Bound on
    /// [`RendezvousListener::accept`](super::RendezvousListener::accept)
    /// waiting for a connection (a listener's configuration; the handshake
    /// after it takes at most 5 s). Default one hour. `Duration::MAX` waits
    /// without a bound.
    pub accept_timeout: Duration,
}

impl Default for RendezvousConfig {
    fn default() -> Self {
        Self {
            send_timeout: Duration::from_secs(10),
            recv_timeout: Duration::from_secs(3600),
            accept_timeout: Duration::from_secs(3600),
        }
    }
}

/// How long an operation may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// Not at all (`try_` operations: `WouldBlock` instead of `TimedOut`).
    Try,
    /// At most this long.
    For(Duration),
}

impl Wait {
    /// The deadline; `None` when it lies beyond what `Instant` can hold.
    pub(super) fn deadline(self) -> Option<Instant> {
        let now = Instant::now();
        match self {
            Wait::Try => Some(now),
            Wait::For(t) => now.checked_add(t),
        }
    }
}

pub(crate) struct Shared {
    pub(super) map: Mapping,
    pub(super) sock: OwnedFd,
    pub(super) peer: PeerCred,
    /// This end of the connection's doorbell pair (`crate::bell`): rung by
    /// the peer when a waiter of ours sleeps in an event loop.
    pub(crate) bell: crate::bell::Doorbell,
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

/// One end of a rendezvous connection (see the [module docs](super)).
///
/// Made by [`Rendezvous::connect`] or [`RendezvousListener::accept`]. Every
/// operation takes `&self`: one thread may send while another receives;
/// concurrent sends (or receives) on one endpoint take turns.
///
/// [`RendezvousListener::accept`]: super::RendezvousListener::accept
pub struct Rendezvous {
    pub(crate) sh: Arc<Shared>,
    tx: usize,
    pub(super) rx: usize,
    cfg: RendezvousConfig,
    /// Held while sending; the adaptive spin of the send side (the
    /// process's [`SpinPolicy`] when the endpoint was made).
    send_lock: Mutex<SpinBudget>,
    /// 1 while a message of this endpoint is in the slot (a blocking send,
    /// or a phased one between `send_begin` and its end): one at a time,
    /// whichever way it is sent.
    /// A futex word: a blocking send sleeps on it while a phased send
    /// holds the slot, and `release_send` wakes it.
    pub(super) sending: crate::sync::AtomicU64,
    /// Held while receiving; the adaptive spin of the receive side.
    pub(super) recv_lock: Mutex<SpinBudget>,
    /// Our counters, in our registry entry (`super::stats`).
    pub(super) counters: Counters,
    /// The size of the phased send in flight (`Envelope::counted_size`, packed
    /// `bytes << 8 | descriptors`), counted once the partner takes it.
    pub(super) phased: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Rendezvous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rendezvous")
            .field("peer", &self.sh.peer)
            .field("config", &self.cfg)
            .finish()
    }
}

/// The open wait as the one wait loop (`crate::wait::wait_ready`) sees
/// it: ready when any partner's slot holds a message; the preparation
/// flags every slot whose partner lives; the sleep is one `futex_waitv`
/// over those slots; alive while any partner is.
struct AnyOf<'a> {
    eps: &'a [&'a Rendezvous],
    /// The slots' state words and the values the preparation saw.
    /// (Inline for up to four endpoints: no allocation per receive.)
    words: smallvec::SmallVec<[(&'a crate::sync::AtomicU64, u32); 4]>,
    /// Partners alive at the last preparation.
    live: usize,
}

impl Readiness for AnyOf<'_> {
    fn is_ready(&mut self) -> bool {
        self.eps.iter().any(|e| slot::ready(e.rx_slot()))
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        self.words.clear();
        self.live = 0;
        let mut ready = false;
        for e in self.eps {
            if peer::socket_hung_up(&e.sh.sock) {
                continue;
            }
            self.live += 1;
            let s = e.rx_slot();
            match slot::prepare_sleep(s) {
                Some(v) => self.words.push((&s.state, v)),
                None => ready = true,
            }
        }
        // With no partner alive there is nothing to sleep for: `alive`
        // says so next.
        (!ready || self.live == 0).then_some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: Duration) {
        crate::sync::futex_wait_any(&self.words, slice);
    }

    fn alive(&mut self) -> bool {
        self.live > 0
    }
}

/// The endpoint's send slot, free of another send of this endpoint (a
/// phased send, `send_begin`, may hold it), as the one wait loop
/// (`crate::wait::wait_ready`) sees it: the look claims it; the sleep is on
/// the `sending` word, which `release_send` changes and wakes. Each spin
/// step yields (the holder runs in this process). The phased send's
/// partner may be gone: a liveness slice bounds each sleep.
struct Claim<'a>(&'a Rendezvous);

impl Readiness for Claim<'_> {
    fn is_ready(&mut self) -> bool {
        self.0.claim_send()
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        (!self.0.claim_send()).then_some(1)
    }

    fn sleep(&mut self, armed: u32, slice: Duration) {
        crate::sync::futex_wait(&self.0.sending, armed, slice);
    }

    fn costly_look(&self) -> bool {
        true
    }
}

/// The open wait behind every receive: takes the first message from any
/// of `eps` and hands it to `finish` while the receive locks are still held
/// (descriptor records are read in order under them).
pub(super) fn wait_any(
    eps: &[&Rendezvous],
    wait: Wait,
    finish: impl FnOnce(&Rendezvous, Raw) -> Result<(), IpcFail>,
) -> Result<usize, IpcFail> {
    let mut finished = false;
    let r = wait_any_uncounted(eps, wait, |e, raw| {
        finished = true;
        finish(e, raw)
    });
    // A failure of the wait itself is every endpoint's (each waited);
    // `Rendezvous::finish` counts its own.
    if !finished {
        for e in eps {
            e.counters.outcome(&r);
        }
    }
    r
}

fn wait_any_uncounted(
    eps: &[&Rendezvous],
    wait: Wait,
    finish: impl FnOnce(&Rendezvous, Raw) -> Result<(), IpcFail>,
) -> Result<usize, IpcFail> {
    // Inline for up to four endpoints: a receive allocates nothing.
    let mut guards: smallvec::SmallVec<[_; 4]> = eps
        .iter()
        .map(|e| e.recv_lock.lock().unwrap_or_else(|p| p.into_inner()))
        .collect();
    // Made when the first wait begins: a message already waiting costs no
    // clock read.
    let mut deadline = None;
    let mut any = AnyOf {
        eps,
        words: smallvec::SmallVec::new(),
        live: 0,
    };
    // Only the first wait spins (the first endpoint's budget): a partner
    // that is running usually sends within microseconds. After a wake that
    // found nothing to take (a retracted send), flag and sleep at once.
    let mut no_spin = SpinBudget::new(Duration::ZERO);
    let mut spin = guards.first_mut().map(|g| &mut **g);
    loop {
        for (i, e) in eps.iter().enumerate() {
            if let Some(raw) = e.try_take()? {
                return finish(e, raw).map(|()| i);
            }
        }
        if let Wait::Try = wait {
            // No flag, no sleep: a `try_` receive leaves no trace.
            return if eps.iter().all(|e| peer::socket_hung_up(&e.sh.sock)) {
                Err(IpcFail::Disconnected)
            } else {
                Err(IpcFail::WouldBlock)
            };
        }
        let budget = spin.take().unwrap_or(&mut no_spin);
        let deadline = *deadline.get_or_insert_with(|| wait.deadline());
        match wait_ready(&mut any, budget, deadline) {
            Waited::Ready => {}
            Waited::Gone => return Err(IpcFail::Disconnected),
            Waited::TimedOut => return Err(IpcFail::TimedOut),
        }
    }
}

impl Rendezvous {
    pub(super) fn new(
        sh: Shared,
        tx: usize,
        rx: usize,
        cfg: RendezvousConfig,
        counters: Counters,
    ) -> Self {
        Self {
            sh: Arc::new(sh),
            tx,
            rx,
            cfg,
            send_lock: Mutex::new(SpinPolicy::current().budget()),
            sending: crate::sync::AtomicU64::new(0),
            recv_lock: Mutex::new(SpinPolicy::current().budget()),
            counters,
            phased: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// This endpoint's counters (also in its registry entry, for
    /// `zcio ls` and `zcio stat`).
    pub fn stats(&self) -> RendezvousStats {
        RendezvousStats::of(self.counters.page())
    }

    /// This endpoint with `cfg` as the bounds of its blocking operations.
    pub fn with_config(mut self, cfg: RendezvousConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// The bounds of the blocking operations.
    pub fn config(&self) -> RendezvousConfig {
        self.cfg
    }

    /// The partner's kernel credentials (from `SO_PEERCRED`, not from any
    /// message).
    pub fn peer(&self) -> PeerCred {
        self.sh.peer
    }

    /// Hang up now: shut the connection's socket down, so the partner's
    /// waits — and this endpoint's own — end with
    /// `Disconnected` even while the endpoint is still owned
    /// (e.g. shared by a [`ProxyEndpoint`](crate::proxy::ProxyEndpoint)
    /// with its proxies and handles). Dropping the last owner hangs up too;
    /// this is for owners that cannot wait for that.
    pub fn hang_up(&self) {
        // Fails only for a socket that is not connected any more: hung up
        // already.
        let _ = rustix::net::shutdown(&self.sh.sock, rustix::net::Shutdown::Both);
    }

    /// The slot this endpoint receives from.
    pub(crate) fn rx_slot(&self) -> &Slot {
        self.sh.slot(self.rx)
    }

    /// The slot this endpoint sends on.
    pub(super) fn tx_slot(&self) -> &Slot {
        self.sh.slot(self.tx)
    }

    /// Send `msg` and wait until the partner has taken it (unbuffered
    /// rendezvous), at most [`RendezvousConfig::send_timeout`].
    ///
    /// # Errors
    ///
    /// On any error the message was not delivered: `TimedOut` (retracted),
    /// `Disconnected`, `TooLarge`, `Protocol`, `Os`.
    pub fn send(&self, msg: &Envelope) -> Result<(), RendezvousSendError> {
        Ok(self.send_with(msg, Wait::For(self.cfg.send_timeout))?)
    }

    /// Send `msg` only if the partner takes it at once — in practice, if it
    /// is already waiting in a receive and running. Never sleeps.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when the partner did not take it (the message was retracted,
    /// not delivered); otherwise as [`Rendezvous::send`].
    pub fn try_send(&self, msg: &Envelope) -> Result<(), RendezvousSendError> {
        Ok(self.send_with(msg, Wait::Try)?)
    }

    /// Send `msg`, waiting at most `timeout` for the partner to take it.
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::send`]; on `TimedOut` the message was retracted.
    pub fn send_timeout(
        &self,
        msg: &Envelope,
        timeout: Duration,
    ) -> Result<(), RendezvousSendError> {
        Ok(self.send_with(msg, Wait::For(timeout))?)
    }

    /// The slot form of `msg` for the next hand-over, its descriptors
    /// already sent on the socket (tagged with the hand-over's sequence
    /// number, so the receiver pairs them).
    pub(super) fn prepare(&self, msg: &Envelope) -> Result<Raw, IpcFail> {
        if msg.words.len() > WORDS || msg.fds.len() > MAX_FDS {
            return Err(IpcFail::TooLarge);
        }
        let s = self.tx_slot();
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
        Ok(raw)
    }

    /// Claim the slot for one send (see `sending`): `false` if another
    /// send of this endpoint is in flight.
    pub(super) fn claim_send(&self) -> bool {
        // SYNC: AcqRel pairs with the Release store in `release_send`: the
        // previous send's last slot update happens before our first.
        self.sending
            .compare_exchange(
                0,
                1,
                crate::sync::Ordering::AcqRel,
                crate::sync::Ordering::Relaxed,
            )
            .is_ok()
    }

    /// The send that claimed the slot is over: wake a blocking send that
    /// waits its turn.
    pub(super) fn release_send(&self) {
        // SYNC: Release pairs with the AcqRel CAS in `claim_send`; the
        // store changes the futex word a waiter sleeps on (expecting 1).
        self.sending.store(0, crate::sync::Ordering::Release);
        crate::sync::futex_wake(&self.sending);
    }

    pub(crate) fn send_with(&self, msg: &Envelope, wait: Wait) -> Result<(), IpcFail> {
        let mut budget = self.send_lock.lock().unwrap_or_else(|e| e.into_inner());
        // A phased send (an event loop's, `send_begin`) may hold the slot:
        // wait for it to end, within our own bound.
        // Its own copy of the budget: this wait teaches the hand-over's
        // budget nothing.
        let mut claim = *budget;
        let waited = wait_ready(&mut Claim(self), &mut claim, wait.deadline());
        if waited != Waited::Ready {
            let f = match wait {
                Wait::Try => IpcFail::WouldBlock,
                Wait::For(_) => IpcFail::TimedOut,
            };
            self.counters.failed(f);
            return Err(f);
        }
        let r = self.send_claimed(msg, wait, &mut budget);
        self.release_send();
        match r {
            Ok(()) => self.counters.sent(msg.counted_size()),
            Err(f) => self.counters.failed(f),
        }
        r
    }

    fn send_claimed(
        &self,
        msg: &Envelope,
        wait: Wait,
        budget: &mut SpinBudget,
    ) -> Result<(), IpcFail> {
        let s = self.tx_slot();
        let raw = self.prepare(msg)?;
        let mut gone = false;
        let alive = || {
            gone = peer::socket_hung_up(&self.sh.sock);
            !gone
        };
        let deadline = wait.deadline();
        match slot::send(s, &raw, budget, deadline, alive, Some(&self.sh.bell)) {
            Ok(_) => Ok(()),
            Err(SlotError::TimedOut) if gone => Err(IpcFail::Disconnected),
            Err(SlotError::TimedOut) => match wait {
                Wait::Try => Err(IpcFail::WouldBlock),
                Wait::For(_) => Err(IpcFail::TimedOut),
            },
            Err(SlotError::Corrupt) => Err(IpcFail::Protocol("corrupt slot state")),
        }
    }

    /// Take a message if one is waiting (no wait); the caller holds
    /// `recv_lock` and finishes it with [`Self::finish`].
    pub(super) fn try_take(&self) -> Result<Option<Raw>, IpcFail> {
        slot::take(self.rx_slot(), Some(&self.sh.bell))
            .map_err(|_| IpcFail::Protocol("corrupt slot state"))
    }

    /// Turn a taken slot message into `into` (its word buffer is reused),
    /// fetching its descriptors. The caller holds `recv_lock`.
    pub(super) fn finish(&self, raw: Raw, into: &mut Envelope) -> Result<(), IpcFail> {
        let r = self.finish_uncounted(raw, into);
        match r {
            Ok(()) => self.counters.received(into.counted_size()),
            Err(f) => self.counters.failed(f),
        }
        r
    }

    fn finish_uncounted(&self, raw: Raw, into: &mut Envelope) -> Result<(), IpcFail> {
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
                                return Err(IpcFail::Protocol("descriptor count mismatch"));
                            }
                            into.fds = r.fds;
                            break;
                        }
                        if t > raw.seq {
                            return Err(IpcFail::Protocol("descriptors out of order"));
                        }
                    }
                    Ok(RecvOutcome::Record(_)) => {
                        return Err(IpcFail::Protocol("bad descriptor record"))
                    }
                    _ => return Err(IpcFail::Protocol("descriptors missing")),
                }
            }
        }
        into.label = raw.label;
        into.words.clear();
        into.words.extend_from_slice(&raw.words[..raw.len]);
        Ok(())
    }

    /// Wait for a message from this partner (closed wait), at most
    /// [`RendezvousConfig::recv_timeout`].
    ///
    /// # Errors
    ///
    /// `TimedOut`, `Disconnected` (the partner is gone and sent nothing
    /// more), `Protocol`.
    pub fn recv(&self) -> Result<Envelope, RendezvousRecvError> {
        self.recv_with(Wait::For(self.cfg.recv_timeout))
    }

    /// Take a message if one is waiting; never sleeps.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when nothing is waiting; otherwise as [`Rendezvous::recv`].
    pub fn try_recv(&self) -> Result<Envelope, RendezvousRecvError> {
        self.recv_with(Wait::Try)
    }

    /// Wait for a message from this partner, at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::recv`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Envelope, RendezvousRecvError> {
        self.recv_with(Wait::For(timeout))
    }

    fn recv_with(&self, wait: Wait) -> Result<Envelope, RendezvousRecvError> {
        let mut m = Envelope::default();
        self.recv_into_with(&mut m, wait)?;
        Ok(m)
    }

    /// Like [`Rendezvous::recv`], but into `buf`, whose word vector is reused
    /// (no allocation when it has room for [`WORDS`] words).
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::recv`]; on error `buf` is unspecified but valid.
    pub fn recv_into(&self, buf: &mut Envelope) -> Result<(), RendezvousRecvError> {
        Ok(self.recv_into_with(buf, Wait::For(self.cfg.recv_timeout))?)
    }

    /// Like [`Rendezvous::recv_timeout`], but into `buf` (see
    /// [`Rendezvous::recv_into`]).
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::recv`]; on error `buf` is unspecified but valid.
    pub fn recv_into_timeout(
        &self,
        buf: &mut Envelope,
        timeout: Duration,
    ) -> Result<(), RendezvousRecvError> {
        Ok(self.recv_into_with(buf, Wait::For(timeout))?)
    }

    pub(crate) fn recv_into_with(&self, buf: &mut Envelope, wait: Wait) -> Result<(), IpcFail> {
        wait_any(&[self], wait, |e, raw| e.finish(raw, buf)).map(|_| ())
    }

    /// Send `msg`, then wait for this partner's answer (its next message):
    /// the send bounded by [`RendezvousConfig::send_timeout`], the wait for
    /// the answer by [`RendezvousConfig::recv_timeout`].
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::send`] (the request was not delivered) or
    /// [`Rendezvous::recv`] (it was, but no answer came).
    pub fn call(&self, msg: &Envelope) -> Result<Envelope, RendezvousCallError> {
        self.send(msg)?;
        Ok(self.recv()?)
    }

    /// Send `msg` and wait for the answer, both within `timeout` in all.
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::call`].
    pub fn call_timeout(
        &self,
        msg: &Envelope,
        timeout: Duration,
    ) -> Result<Envelope, RendezvousCallError> {
        let deadline = Instant::now().checked_add(timeout);
        self.send_timeout(msg, timeout)?;
        let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
        Ok(self.recv_timeout(left)?)
    }
}

#[cfg(test)]
mod tests {
    use super::super::RendezvousListener;
    use super::*;
    use crate::segment::{AccessPolicy, ConnectError};
    use crate::sys::memfd;
    use std::path::PathBuf;

    const LONG: Duration = Duration::from_secs(10);

    fn path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("zcio-rdv-{tag}-{}", std::process::id()))
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn counters_move_with_the_traffic() {
        let p = path("stats");
        let l = RendezvousListener::bind(&p).unwrap();
        let p2 = p.clone();
        let t = std::thread::spawn(move || {
            let c = Rendezvous::connect(&p2).unwrap();
            for i in 0..5u64 {
                c.send(&Envelope::new(1, &[i, i])).unwrap();
            }
            let r = c.try_recv();
            assert!(r.is_err());
            c
        });
        let s = l.accept().unwrap();
        assert_eq!((l.stats().accepted, l.stats().peers), (1, 1));
        for _ in 0..5 {
            s.recv_timeout(LONG).unwrap();
        }
        let c = t.join().unwrap();
        let (cs, ss) = (c.stats(), s.stats());
        assert_eq!((cs.sent_messages, cs.sent_bytes, cs.peers), (5, 5 * 24, 1));
        assert_eq!((ss.received_messages, ss.received_bytes), (5, 5 * 24));
        assert_eq!(
            s.recv_timeout(Duration::from_millis(1)).ok().map(|_| ()),
            None
        );
        assert_eq!(s.stats().timed_out, 1);
        drop(c);
        assert!(s.recv_timeout(LONG).is_err());
        assert_eq!(s.stats().disconnected, 1);
        drop(s);
        assert_eq!((l.stats().accepted, l.stats().peers), (1, 0));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn call_and_reply_between_threads() {
        let p = path("call");
        let l = RendezvousListener::bind(&p).unwrap();
        let p2 = p.clone();
        let t = std::thread::spawn(move || {
            let c = Rendezvous::connect(&p2).unwrap();
            for i in 0..200u64 {
                let m = Envelope::new(1, &[i, 2 * i]);
                let r = if i % 2 == 0 {
                    c.call(&m)
                } else {
                    c.call_timeout(&m, LONG)
                };
                assert_eq!(r.unwrap().words, vec![3 * i]);
            }
        });
        let s = l.accept().unwrap();
        assert_eq!(s.peer().pid, std::process::id() as i32);
        let (_, mut m) = Rendezvous::recv_any(&[&s]).unwrap();
        for _ in 0..199 {
            let reply = Envelope::new(2, &[m.words[0] + m.words[1]]);
            m = s.reply_and_recv_timeout(&reply, &[&s], LONG).unwrap().1;
        }
        s.send(&Envelope::new(2, &[m.words[0] + m.words[1]]))
            .unwrap();
        t.join().unwrap();
    }

    /// A listener and a connected (client, server) pair.
    fn pair(tag: &str) -> (RendezvousListener, Rendezvous, Rendezvous) {
        let p = path(tag);
        let l = RendezvousListener::bind(&p).unwrap();
        let t = std::thread::spawn(move || Rendezvous::connect(&p).unwrap());
        let s = l.accept().unwrap();
        (l, t.join().unwrap(), s)
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn timeouts_try_forms_and_hangup() {
        let (_l, c, s) = pair("to");
        // Nobody receives: the send times out and is retracted.
        let one = Envelope::new(0, &[1]);
        assert_eq!(
            c.send_timeout(&one, Duration::from_millis(20)),
            Err(RendezvousSendError::TimedOut)
        );
        assert_eq!(c.try_send(&one), Err(RendezvousSendError::WouldBlock));
        assert_eq!(s.try_recv().unwrap_err(), RendezvousRecvError::WouldBlock);
        assert_eq!(
            Rendezvous::try_recv_any(&[&s]).unwrap_err(),
            RendezvousRecvError::WouldBlock
        );
        assert_eq!(
            s.recv_timeout(Duration::ZERO).unwrap_err(),
            RendezvousRecvError::TimedOut
        );
        assert_eq!(
            Rendezvous::recv_any_timeout(&[&s], Duration::from_millis(5)).unwrap_err(),
            RendezvousRecvError::TimedOut
        );
        assert_eq!(
            c.send(&Envelope::new(0, &[0; WORDS + 1])),
            Err(RendezvousSendError::TooLarge)
        );
        // The configured bound applies to the plain forms.
        let quick = RendezvousConfig {
            send_timeout: Duration::from_millis(5),
            recv_timeout: Duration::from_millis(5),
            ..RendezvousConfig::default()
        };
        let (c, s) = (c.with_config(quick), s.with_config(quick));
        assert_eq!(c.config(), quick);
        assert_eq!(c.send(&one), Err(RendezvousSendError::TimedOut));
        assert_eq!(s.recv().unwrap_err(), RendezvousRecvError::TimedOut);
        assert_eq!(
            c.call(&one).unwrap_err(),
            RendezvousCallError::Send(RendezvousSendError::TimedOut)
        );
        drop(c);
        assert_eq!(s.recv().unwrap_err(), RendezvousRecvError::Disconnected);
        assert_eq!(s.try_recv().unwrap_err(), RendezvousRecvError::Disconnected);
        assert_eq!(s.send(&one), Err(RendezvousSendError::Disconnected));
        assert_eq!(s.try_send(&one), Err(RendezvousSendError::Disconnected));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn hang_up_ends_both_sides_while_the_endpoint_is_still_owned() {
        let (_l, c, s) = pair("hup");
        let c = Arc::new(c);
        let also = c.clone(); // another owner keeps the endpoint alive
        c.hang_up();
        assert_eq!(
            s.recv_timeout(LONG).unwrap_err(),
            RendezvousRecvError::Disconnected
        );
        assert_eq!(
            s.send_timeout(&Envelope::new(1, &[]), LONG),
            Err(RendezvousSendError::Disconnected)
        );
        assert_eq!(
            also.recv_timeout(LONG).unwrap_err(),
            RendezvousRecvError::Disconnected
        );
        assert_eq!(
            also.send_timeout(&Envelope::new(1, &[]), LONG),
            Err(RendezvousSendError::Disconnected)
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn try_recv_takes_a_waiting_message_and_try_send_reaches_a_receiver() {
        let (_l, c, s) = pair("try");
        let c = Arc::new(c);
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.send_timeout(&Envelope::new(3, &[4]), LONG));
        // The sender waits in the slot: a try_recv takes its message.
        let m = loop {
            match s.try_recv() {
                Ok(m) => break m,
                Err(RendezvousRecvError::WouldBlock) => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!((m.label, m.words.as_slice()), (3, &[4u64][..]));
        t.join().unwrap().unwrap();
        // A receiver that waits: try_send succeeds once it takes the message.
        let r = std::thread::spawn(move || s.recv_timeout(LONG).map(|m| m.label));
        let mut tries = 0u64;
        loop {
            match c.try_send(&Envelope::new(8, &[])) {
                Ok(()) => break,
                Err(RendezvousSendError::WouldBlock) => tries += 1,
                Err(e) => panic!("{e}"),
            }
            if tries.is_multiple_of(64) {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        assert_eq!(r.join().unwrap(), Ok(8));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn the_listener_applies_its_access_policy_and_config() {
        let p = path("acl");
        let me = rustix::process::geteuid().as_raw();
        let l =
            RendezvousListener::bind_with(&p, AccessPolicy::uids([me.wrapping_add(4242)])).unwrap();
        let p2 = p.clone();
        let t = std::thread::spawn(move || Rendezvous::connect(&p2).map(|_| ()));
        assert!(matches!(l.accept(), Err(ConnectError::Refused)));
        assert!(matches!(t.join().unwrap(), Err(ConnectError::Refused)));
        drop(l);
        let cfg = RendezvousConfig {
            recv_timeout: Duration::from_secs(7),
            ..RendezvousConfig::default()
        };
        let l = RendezvousListener::bind(&p).unwrap().with_config(cfg);
        let t = std::thread::spawn(move || Rendezvous::connect(&p).unwrap());
        assert_eq!(l.accept().unwrap().config(), cfg);
        assert_eq!(t.join().unwrap().config(), RendezvousConfig::default());
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn descriptors_travel_with_the_message() {
        let (_l, c, s) = pair("fd");
        let t = std::thread::spawn(move || {
            let fd = memfd::create_sized("x", 4096).unwrap();
            let mut m = Envelope::new(5, &[42]);
            m.fds.push(fd);
            c.send(&m).unwrap();
        });
        let mut m = Envelope::default();
        s.recv_into_timeout(&mut m, LONG).unwrap();
        assert_eq!(
            (m.label, m.words.as_slice(), m.fds.len()),
            (5, &[42u64][..], 1)
        );
        assert_eq!(memfd::size(&m.fds[0]).unwrap(), 4096);
        t.join().unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn errors_display_and_are_std_errors() {
        fn is_error<E: std::error::Error + Send + Sync + 'static>(_: &E) {}
        is_error(&RendezvousSendError::Disconnected);
        is_error(&RendezvousRecvError::Disconnected);
        is_error(&RendezvousCallError::Recv(
            RendezvousRecvError::Disconnected,
        ));
        assert_eq!(
            RendezvousRecvError::Disconnected.to_string(),
            "disconnected: the partner hung up or died"
        );
        assert!(RendezvousSendError::TooLarge
            .to_string()
            .contains("at most 8 words"));
        // A call's error is its half's, word for word.
        let call = RendezvousCallError::Send(RendezvousSendError::WouldBlock);
        assert_eq!(
            call.to_string(),
            RendezvousSendError::WouldBlock.to_string()
        );
        assert_eq!(call.kind(), crate::error::ErrorKind::WouldBlock);
    }
}
