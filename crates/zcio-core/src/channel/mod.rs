//! Channels: connections between two domains that carry `Msg`s by
//! reference and the deallocation notices that free them.
//!
//! Set-up runs over a Unix `SOCK_SEQPACKET` socket (access policy checked on
//! the kernel's peer credentials). Then each direction has a message ring and
//! a reverse notice ring in one shared control segment; regions travel once
//! per channel over the socket with `SCM_RIGHTS`, single-use regions with
//! each transfer. See `docs/ARCHITECTURE.md`.

mod config;
mod connect;
mod core;
mod error;
mod evented;
mod hold;
pub mod lane;
mod ledger;
mod linger;
#[cfg(all(test, loom))]
pub(crate) mod loom_spsc;
mod notify;
#[cfg(test)]
mod policy_tests;
mod reclaim;
mod registered;
mod rx;
mod slots;
#[doc(hidden)]
pub mod spsc;
mod tx;
mod waitset;
#[doc(hidden)]
pub mod wire;

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::Duration;

pub use config::{ChannelConfig, ChannelPolicy, FullPolicy, HoldExpiry, HoldLimit, Notify};
pub use connect::Listener;
pub use error::{
    Area, Malformed, PeerFault, RecvError, SendError, SendErrorKind, SendTimeoutError,
    TryRecvError, TrySendError,
};

pub(crate) use self::core::Core;
pub(crate) use self::core::NoticeBatch;
pub(crate) use self::evented::SendBlock;
use self::lane::{LaneConfig, LaneError, LaneReceiver, LaneSender};
use crate::msg::Msg;
use crate::segment::ConnectError;
use crate::sys::peer::PeerCred;

/// Counters of one channel end ([`Channel::stats`]). Built only by the
/// channel; more counters may be added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelStats {
    /// Messages sent.
    pub msgs_sent: u64,
    /// Messages received.
    pub msgs_received: u64,
    /// Slices we sent that the peer still holds (our ledger).
    pub held_by_peer: usize,
    /// Deallocation notices received and accepted.
    pub notices_received: u64,
    /// Notices naming a token the peer does not hold (ignored).
    pub bad_notices: u64,
    /// Notices we sent.
    pub notices_sent: u64,
    /// Notices that could not be sent because the peer was gone.
    pub notices_dropped: u64,
    /// Malformed messages received (rejected, channel kept usable).
    pub malformed: u64,
    /// Futex wakes we issued.
    pub wakes: u64,
    /// Times we slept on a futex.
    pub sleeps: u64,
    /// Regions passed to the peer (once per region, or per transfer for
    /// single-use regions).
    pub regions_sent: u64,
    /// Messages sent by copy into a small-message slot
    /// ([`ChannelConfig::lane`]) rather than lent by reference.
    pub msgs_copied: u64,
    /// Regions received from the peer.
    pub regions_received: u64,
    /// Lent slices reclaimed after the peer held them past the hold limit
    /// (`HoldExpiry::Reclaim`).
    pub reclaimed: u64,
    /// Lent slices retired instead of released: the peer ended (died,
    /// broke the protocol, was aborted) while holding them, or reported
    /// that a process it forwarded them to did. Their memory is never
    /// reused (see `PoolStats::bytes_retired`).
    pub retired: u64,
    /// Retire notices we sent: slices we forwarded to a peer that ended
    /// without releasing them, reported to their originator.
    pub retire_notices_sent: u64,
    /// Slices still on the ring, past the peer's final read position, when
    /// it ended: it never received them, so they were released, not retired.
    pub never_received: u64,
    /// Wakes that found the peer's sleep flag set but nobody asleep.
    pub futile_wakes: u64,
    /// Wakes not issued because the peer's sleep flag is distrusted and it
    /// was woken less than `max_age` ago.
    pub wakes_suppressed: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Bytes of the slices the peer still holds (see `held_by_peer`).
    pub held_by_peer_bytes: u64,
    /// Slices the peer lent us that this process still holds (received,
    /// not yet dropped).
    pub holding: u64,
    /// Sends that found no room and were not allowed to wait.
    pub send_would_block: u64,
    /// Sends that timed out.
    pub send_timed_out: u64,
    /// Sends that found the peer gone (or this end closed).
    pub send_disconnected: u64,
    /// Receives that found nothing and were not allowed to wait.
    pub recv_would_block: u64,
    /// Receives that timed out.
    pub recv_timed_out: u64,
    /// Receives that found the peer gone (or this end closed).
    pub recv_disconnected: u64,
    /// The peer's pid as this process's PID namespace sees it (0: not
    /// visible from here).
    pub peer_pid: u32,
    /// An id both ends of this connection report alike: the inode number
    /// of the shared control segment's memfd (tools pair the two ends'
    /// registry entries by it).
    pub connection: u64,
}

/// One end of a channel. Cheap operations take `&self`; the send and
/// receive sides have separate locks, so one thread may send while another
/// receives.
pub struct Channel {
    /// Owns this end's statistics page, and with it its entry in the
    /// registry of live objects (`registered`), if it has one.
    core: Arc<Core>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("peer", &self.core.peer)
            .finish()
    }
}

impl Channel {
    /// Connect to a [`Listener`] at `path`.
    pub fn connect(
        path: impl AsRef<std::path::Path>,
        cfg: ChannelConfig,
    ) -> Result<Self, ConnectError> {
        connect::connect(path.as_ref(), cfg).map(Self::from_core)
    }

    /// Two connected ends in this process (tests, threads); they do not
    /// register (their statistics pages are local).
    pub fn pair(cfg: ChannelConfig) -> Result<(Self, Self), ConnectError> {
        let (a, b) = connect::pair(cfg)?;
        Ok((Self::from_core(a), Self::from_core(b)))
    }

    /// An end over `core` (which owns its statistics page, registered at
    /// set-up under the socket path it was connected or accepted over).
    pub(crate) fn from_core(core: Arc<Core>) -> Self {
        Self { core }
    }

    /// This end's core (for the event-loop frontends in this crate).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Send a message by reference. Waits while the ring is full, as the
    /// policy says, at most `ChannelConfig::send_timeout`. On failure the
    /// message comes back inside the error ([`SendError::into_inner`]).
    ///
    /// ```
    /// use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};
    ///
    /// let (a, b) = Channel::pair(ChannelConfig::default())?;
    /// let pool = Pool::new(PoolConfig { chunk_size: 1 << 20, max_chunks: 1, ..PoolConfig::named("doc") });
    /// let mut buf = pool.try_alloc(2)?;
    /// buf.as_mut_slice().copy_from_slice(b"hi");
    /// a.send(Msg::from(buf.freeze()?))?;
    /// assert_eq!(b.recv()?.to_vec(), b"hi");
    /// # Ok::<(), zcio::Error>(())
    /// ```
    pub fn send(&self, msg: Msg) -> Result<(), SendError<Msg>> {
        self.core
            .send(msg, self.core.cfg.send_timeout)
            .map_err(|(kind, msg)| SendError::new(kind, msg))
    }

    /// `send`, from a relay loop that takes in this channel's notices once
    /// per round (`crate::forward::run`) rather than before every message
    /// of received buffers.
    pub(crate) fn send_in_round(&self, msg: Msg) -> Result<(), SendError<Msg>> {
        self.core
            .send_in_round(msg, self.core.cfg.send_timeout)
            .map_err(|(kind, msg)| SendError::new(kind, msg))
    }

    /// Send without waiting for ring space (`WouldBlock` if there is none). On
    /// failure the message comes back inside the error.
    pub fn try_send(&self, msg: Msg) -> Result<(), TrySendError<Msg>> {
        self.core
            .send(msg, Duration::ZERO)
            .map_err(|(kind, msg)| TrySendError::new(kind, msg))
    }

    /// Send, waiting at most `timeout` for ring space (`TimedOut` after
    /// it; `Duration::MAX`: without a bound). On failure the message comes
    /// back inside the error.
    pub fn send_timeout(&self, msg: Msg, timeout: Duration) -> Result<(), SendTimeoutError<Msg>> {
        self.core
            .send(msg, timeout)
            .map_err(|(kind, msg)| SendTimeoutError::new(kind, msg))
    }

    /// Wake the peer for messages whose wakeup was deferred by coalescing,
    /// publish deallocation notices still batched here, and enforce the hold
    /// limit (an abort shows in the next send and in [`Channel::health`]).
    pub fn flush(&self) {
        let _ = self.core.flush();
        self.core.flush_notices();
    }

    /// Enforce `ChannelPolicy::hold` now: returns how many lent slices were
    /// reclaimed (`HoldExpiry::Reclaim`), or `SendErrorKind::HoldExpired`
    /// once the channel was aborted (`HoldExpiry::Abort`). Also done on
    /// every send, reclaim and flush; call it from a timer if the channel
    /// may sit idle while the peer holds buffers.
    pub fn expire_holds(&self) -> Result<usize, SendErrorKind> {
        self.core.expire_holds()
    }

    /// The first misbehaviour of the peer this end detected, if any (see
    /// [`Channel::faults`] for all of them).
    pub fn health(&self) -> Result<(), PeerFault> {
        match self.core.faults().first() {
            Some(f) => Err(*f),
            None => Ok(()),
        }
    }

    /// Every kind of misbehaviour detected so far, in the order first seen
    /// (latest detail per kind), followed by the running totals of malformed
    /// input and reclaimed holds.
    pub fn faults(&self) -> Vec<PeerFault> {
        self.core.faults()
    }

    /// Receive a message, waiting at most `ChannelConfig::recv_timeout`
    /// (`Disconnected` once the peer is gone and nothing is left).
    pub fn recv(&self) -> Result<Msg, RecvError> {
        self.core
            .recv(Some(self.core.cfg.recv_timeout))
            .map_err(RecvError::from)
    }

    /// Receive if a message is ready (`WouldBlock` if none is).
    pub fn try_recv(&self) -> Result<Msg, TryRecvError> {
        self.core.recv(None).map_err(TryRecvError::from)
    }

    /// Receive, waiting at most `timeout` (`TimedOut` after it;
    /// `Duration::MAX`: without a bound).
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Msg, RecvError> {
        self.core.recv(Some(timeout)).map_err(RecvError::from)
    }

    /// Process deallocation notices now and enforce the hold limit; returns
    /// how many lent slices came back (released by the peer or reclaimed).
    pub fn reclaim(&self) -> usize {
        self.core.drain_notices()
    }

    /// Announce every current region of `pool` to the peer now, so the
    /// first transfers from it need no set-up (the fbufs path mapping).
    pub fn share_pool(&self, pool: &crate::buf::Pool) -> Result<(), SendErrorKind> {
        self.core.share_pool(pool)
    }

    /// Check whether the peer is still alive (socket and pidfd); if not,
    /// release everything it held. Returns `true` while it is alive.
    pub fn check_peer(&self) -> bool {
        self.core.check_peer()
    }

    /// Declare that the peer never writes a buffer after sending it, so
    /// messages received from now on are [immutable](crate::Fbuf::is_immutable)
    /// and offer plain `&[u8]` slices ([`View::as_slice`](crate::View::as_slice),
    /// [`Msg::contiguous`] without a copy, `bytes::Bytes` without a copy).
    ///
    /// # Safety
    /// The peer's *volatile* buffers stay writable by their originator (and,
    /// for forwarded buffers, by whoever made them). If any of them is
    /// written while this process holds a slice of it, that slice changes
    /// under a shared reference: undefined behaviour, not just odd bytes.
    /// Call this only when every originator upstream is trusted to leave
    /// sent buffers alone (for example, processes of one application that
    /// follow the zcio ownership rules), never for untrusted peers — use
    /// secured buffers ([`Pool::alloc_secured`](crate::Pool::alloc_secured))
    /// or copies ([`Fbuf::secure`](crate::Fbuf::secure)) there.
    pub unsafe fn trust_peer(&self) {
        self.core
            .trusted
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`Channel::trust_peer`] was called.
    pub fn is_peer_trusted(&self) -> bool {
        self.core.trusted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the peer is known to have gone away: an operation of this
    /// end (or [`Channel::check_peer`]) found it dead or closed. A flag, no
    /// system call: an idle end learns of its peer's death only by using
    /// the channel or by calling [`Channel::check_peer`], which probes.
    pub fn is_disconnected(&self) -> bool {
        self.core.is_gone()
    }

    /// Kernel-reported credentials of the peer.
    pub fn peer(&self) -> PeerCred {
        self.core.peer
    }

    /// The configuration of this end (its `send_timeout` and
    /// `recv_timeout` bound the default waits).
    pub fn config(&self) -> &ChannelConfig {
        &self.core.cfg
    }

    /// Counters.
    pub fn stats(&self) -> ChannelStats {
        self.core.stats()
    }

    /// The set-up socket (readable when control records or a hang-up are
    /// pending; for integration with a poll loop).
    pub fn socket(&self) -> BorrowedFd<'_> {
        self.core.sock.as_fd()
    }

    /// The doorbell of this end, for an event loop (epoll, mio, libuv,
    /// Python's asyncio): a descriptor that becomes readable when the peer
    /// rang it — only after this end said it sleeps
    /// ([`Channel::prepare_recv_sleep`], [`Channel::prepare_send_sleep`]) —
    /// or when the peer hung up. The first call switches the end to *bell
    /// mode* for good: the peer rings instead of waking futexes, and this
    /// end's blocking calls sleep on the doorbell too. (Rust code on tokio
    /// uses `zcio::tokio::AsyncChannel`, built on the same calls.)
    ///
    /// The loop, for a receive:
    /// 1. `try_recv`; on `WouldBlock`:
    /// 2. `prepare_recv_sleep()`; if `false`, go to 1 (a message came);
    /// 3. wait until the doorbell is readable;
    /// 4. [`Channel::doorbell_rang`], go to 1.
    pub fn doorbell(&self) -> BorrowedFd<'_> {
        self.core.evented_bell()
    }

    /// Say "about to sleep until a message comes" (step 2 of the loop in
    /// [`Channel::doorbell`]): sets this end's sleep flag. `false`: a
    /// message is pending, receive instead of sleeping.
    pub fn prepare_recv_sleep(&self) -> bool {
        self.core.enter_bell_mode();
        self.core.arm_recv()
    }

    /// Say "about to sleep until a message of `slices` slices and `bytes`
    /// bytes ([`Msg::slice_count`], [`Msg::len`]) may be sent" (the ring is
    /// full, or the peer holds as much as it may, in slices or in bytes).
    /// `Ok(false)`: it may be sent now. `Err` when it never can
    /// (`Disconnected`, `Corrupt`).
    pub fn prepare_send_sleep(&self, slices: usize, bytes: u64) -> Result<bool, SendErrorKind> {
        self.core.enter_bell_mode();
        match self.core.send_blocked(slices.max(1), bytes)? {
            None => Ok(false),
            Some(why) => self.core.arm_send(why),
        }
    }

    /// After the event loop found the doorbell readable (step 4): take the
    /// rings off it, clear this end's sleep flags and, if the doorbell hung
    /// up, find out whether the peer is gone (the next call then reports
    /// `Disconnected`). Returns `true` if the doorbell has hung up: the peer
    /// is gone, or it closed its doorbell and will not ring again — poll
    /// with a timer from then on (at most every 50 ms), not on the
    /// descriptor, which stays readable.
    pub fn doorbell_rang(&self) -> bool {
        let hung_up = self.core.take_rings_checked();
        self.core.disarm_recv();
        self.core.disarm_send(SendBlock::Ledger);
        self.core.disarm_send(SendBlock::Ring { need: 1 });
        hung_up
    }

    /// Open a [lane] to the peer: `cfg.slots` slots of
    /// `cfg.slot_size` bytes in a region only this end can write, for
    /// small messages at the latency of a few cache-line transfers. The
    /// peer takes it with [`Channel::accept_lane`]. The lane lives on this
    /// channel: closing it, or the peer dying, ends the lane.
    pub fn open_lane(&self, cfg: &LaneConfig) -> Result<LaneSender, LaneError> {
        LaneSender::open(&self.core, cfg)
    }

    /// Take the next lane the peer opened, waiting up to the channel's
    /// `recv_timeout`.
    pub fn accept_lane(&self) -> Result<LaneReceiver, LaneError> {
        self.accept_lane_timeout(self.core.cfg.recv_timeout)
    }

    /// Take the next lane the peer opened, or `WouldBlock` at once.
    pub fn try_accept_lane(&self) -> Result<LaneReceiver, LaneError> {
        self.accept_lane_timeout(Duration::ZERO)
    }

    /// Take the next lane the peer opened, waiting up to `timeout`
    /// (`Duration::MAX`: without a bound).
    pub fn accept_lane_timeout(&self, timeout: Duration) -> Result<LaneReceiver, LaneError> {
        self.core.accept_lane(timeout)
    }

    /// Close this end: tell the peer, stop accepting messages, release what
    /// the peer held. Buffers already received stay readable.
    pub fn close(&self) {
        close_end(&self.core);
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        close_end(&self.core);
    }
}

/// Close `core`; an end whose peer still holds buffers of ours lingers
/// (`linger.rs`) until the peer has returned them or is gone.
fn close_end(core: &Core) {
    if let Some(end) = core.close() {
        linger::linger(end);
    }
}

#[cfg(test)]
mod live_stats_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig, Uncached};

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            chunk_size: 1 << 20,
            max_chunks: 2,
            ..PoolConfig::named("chtest")
        })
    }

    /// Every message lent by reference (no small-message slots).
    fn by_ref() -> ChannelConfig {
        ChannelConfig {
            lane: crate::LaneConfig::OFF,
            ..ChannelConfig::default()
        }
    }

    fn filled(pool: &Pool, bytes: &[u8]) -> Msg {
        let mut b = pool.try_alloc(bytes.len()).unwrap();
        b.as_mut_slice().copy_from_slice(bytes);
        Msg::from(b.freeze().unwrap())
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn ends_on_one_cpu_see_it_through_the_segment_and_a_move_is_seen() {
        let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let Some((cpu, all)) = crate::sys::cpu::pin_here() else {
            return;
        };
        // Nothing published by the peer yet: not known to share.
        assert!(!a.core.shares_cpu_with_peer());
        // Both ends have said where they run: the same CPU.
        assert!(b.core.shares_cpu_with_peer());
        assert!(a.core.shares_cpu_with_peer());
        // A peer that says another CPU (or lies) only changes the answer.
        b.core
            .header_word(b.core.cpu_words.0)
            .store(u64::from(cpu) + 2, crate::sync::Ordering::Relaxed);
        assert!(!a.core.shares_cpu_with_peer());
        // This test thread runs other tests next: let it move again.
        let _ = rustix::thread::sched_setaffinity(None, &all);
    }

    /// `Duration::MAX` (as a timeout or as the configured bound) is no
    /// deadline, not an overflow: a send that waits for the peer to release
    /// what it holds goes through once it does.
    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn duration_max_waits_without_a_bound() {
        let cfg = ChannelConfig {
            max_in_flight: 1,
            send_timeout: Duration::MAX,
            recv_timeout: Duration::MAX,
            ..by_ref()
        };
        let (a, b) = Channel::pair(cfg).unwrap();
        assert_eq!(a.config().send_timeout, Duration::MAX);
        let p = pool();
        a.send_timeout(filled(&p, b"one"), Duration::MAX).unwrap();
        let held = b.recv_timeout(Duration::MAX).unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(held);
            b.flush();
            b
        });
        // The peer holds as much as it may: this waits for its notice.
        a.send(filled(&p, b"two")).unwrap();
        let b = t.join().unwrap();
        assert_eq!(b.recv().unwrap().to_vec(), b"two");
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn received_volatile_bytes_are_views_until_the_peer_is_trusted() {
        let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let p = pool();
        a.send(filled(&p, b"volatile")).unwrap();
        let m = b.recv().unwrap();
        assert!(!m.is_immutable(), "the originator keeps a writable mapping");
        assert!(m.slices()[0].view().as_slice().is_none());
        assert!(m.io_slices().is_none());
        assert!(matches!(m.contiguous(), std::borrow::Cow::Owned(_)));
        assert_eq!(m.to_vec(), b"volatile");
        assert!(!b.is_peer_trusted());
        // SAFETY: the sender is this test, which never writes a sent buffer.
        unsafe { b.trust_peer() };
        a.send(filled(&p, b"trusted")).unwrap();
        let t = b.recv().unwrap();
        assert!(t.is_immutable());
        assert_eq!(t.slices()[0].view().as_slice(), Some(&b"trusted"[..]));
        assert!(matches!(
            t.contiguous(),
            std::borrow::Cow::Borrowed(b"trusted")
        ));
    }

    /// Dropping an end closes it for its peer at once, even while another
    /// reference to its core is alive (the waitset holds one while another
    /// thread of the process sleeps): the peer's next send is
    /// `Disconnected` with the message handed back, for a region the peer
    /// already announced and for a new one. (The relay test
    /// `downstream_close_closes_upstream` failed this way under load.)
    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn dropping_an_end_closes_it_for_the_peer_while_its_core_is_still_referenced() {
        for announced in [true, false] {
            let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
            let p = pool();
            if announced {
                a.send(filled(&p, b"first")).unwrap();
                assert_eq!(b.recv().unwrap().to_vec(), b"first");
            }
            let sleeping_waiter = Arc::clone(&b.core);
            drop(b);
            assert!(a.core.peer_closed());
            let fresh = pool();
            let src = if announced { &p } else { &fresh };
            let e = a
                .send_timeout(filled(src, b"x"), Duration::from_secs(5))
                .unwrap_err();
            assert!(e.is_disconnected(), "{e:?}");
            assert_eq!(e.into_inner().to_vec(), b"x");
            assert!(matches!(
                a.recv_timeout(Duration::from_secs(5)),
                Err(RecvError::Disconnected)
            ));
            drop(sleeping_waiter);
        }
    }

    /// A channel with `slots` small-message slots of 64 bytes.
    fn small_slots(slots: u32) -> ChannelConfig {
        ChannelConfig {
            lane: crate::LaneConfig {
                slots,
                slot_size: 64,
            },
            ..ChannelConfig::default()
        }
    }

    /// A descriptor refused on receipt returns its token, but no slice was
    /// built for it: the count of slices alive here must not go below zero
    /// (it once did, and a closing end then lingered as if it still read).
    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn a_refused_descriptor_leaves_nothing_counted_as_held() {
        let (a, b) = Channel::pair(by_ref()).unwrap();
        {
            let mut tx = crate::channel::core::lock(&a.core.tx);
            let mut pending = 0;
            let forged = wire::Desc {
                region: 999,
                count: 1,
                offset: 0,
                len: 8,
                token: 1,
                reserved: [0; 3],
            };
            tx.ring.write(&[forged], &mut pending);
            tx.ring.publish(pending);
        }
        assert!(matches!(
            b.recv_timeout(Duration::from_secs(5)),
            Err(RecvError::Malformed(_))
        ));
        assert!(!b.core.holds_received(), "nothing received is alive");
        let p = pool();
        a.send(filled(&p, b"real")).unwrap();
        let got = b.recv().unwrap();
        assert!(b.core.holds_received());
        drop(got);
        assert!(!b.core.holds_received());
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn a_small_message_is_copied_into_a_slot_and_its_buffer_freed_at_once() {
        let (a, b) = Channel::pair(small_slots(2)).unwrap();
        let p = pool();
        a.send(filled(&p, b"small")).unwrap();
        assert_eq!(p.stats().buffers_in_use, 0, "the buffer went back at once");
        let st = a.stats();
        assert_eq!(
            (st.msgs_copied, st.held_by_peer, st.regions_sent),
            (1, 1, 1)
        );
        let got = b.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(got.to_vec(), b"small");
        assert!(got.slices()[0].fbuf().is_foreign());
        assert!(!got.slices()[0].fbuf().is_immutable(), "a slot is volatile");
        drop(got);
        assert_eq!(a.reclaim(), 1, "the slot comes back by notice");
        assert_eq!(a.stats().held_by_peer, 0);
        // The slot is filled again: no new region.
        for i in 0..10u8 {
            a.send(filled(&p, &[i; 64])).unwrap();
            assert_eq!(b.recv().unwrap().to_vec(), [i; 64]);
        }
        let st = a.stats();
        assert_eq!((st.msgs_copied, st.regions_sent), (11, 1));
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn small_and_lent_messages_keep_their_order_and_a_full_slot_set_lends() {
        let (a, b) = Channel::pair(small_slots(2)).unwrap();
        let p = pool();
        // 65 bytes do not fit a slot; with both slots held the third small
        // message is lent by reference.
        let sizes = [8usize, 65, 64, 8, 1000, 1];
        for (i, &n) in sizes.iter().enumerate() {
            a.send(filled(&p, &vec![i as u8; n])).unwrap();
        }
        let st = a.stats();
        assert_eq!(st.msgs_copied, 2, "two slots, then by reference");
        assert_eq!(st.held_by_peer, sizes.len());
        let got: Vec<_> = sizes.iter().map(|_| b.recv().unwrap()).collect();
        for (i, (m, &n)) in got.iter().zip(&sizes).enumerate() {
            assert_eq!(m.to_vec(), vec![i as u8; n], "message {i} in order");
        }
        drop(got);
        assert_eq!(a.reclaim(), sizes.len());
        assert_eq!(p.stats().buffers_in_use, 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn only_plain_buffers_of_our_own_take_a_slot() {
        let (a, b) = Channel::pair(small_slots(4)).unwrap();
        let (c, d) = Channel::pair(small_slots(4)).unwrap();
        let p = pool();
        a.send(filled(&p, b"fwd")).unwrap();
        // A received message is forwarded by reference, never copied.
        let got = b.recv().unwrap();
        c.send(got).unwrap();
        assert_eq!(c.stats().msgs_copied, 0);
        assert_eq!(d.recv().unwrap().to_vec(), b"fwd");
        // Off: every message is lent.
        let (e, f) = Channel::pair(by_ref()).unwrap();
        e.send(filled(&p, b"x")).unwrap();
        assert_eq!(e.stats().msgs_copied, 0);
        assert_eq!(p.stats().buffers_in_use, 1);
        drop(f.recv().unwrap());
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn a_peer_that_dies_holding_slots_retires_them() {
        let (a, b) = Channel::pair(small_slots(2)).unwrap();
        let p = pool();
        a.send(filled(&p, b"one")).unwrap();
        a.send(filled(&p, b"two")).unwrap();
        let held = b.recv().unwrap();
        drop(b);
        drop(held);
        assert!(!a.check_peer());
        assert!(a.try_send(filled(&p, b"x")).unwrap_err().is_disconnected());
        assert_eq!(a.stats().held_by_peer, 0, "ended, not leaked");
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn send_recv_release_returns_to_pool() {
        let (a, b) = Channel::pair(by_ref()).unwrap();
        let p = pool();
        let m = filled(&p, b"hello zcio");
        a.send(m).unwrap();
        let got = b.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(got.to_vec(), b"hello zcio");
        assert!(got.slices()[0].fbuf().is_foreign());
        assert_eq!(a.stats().held_by_peer, 1);
        assert_eq!(p.stats().buffers_in_use, 1);
        drop(got);
        assert_eq!(a.reclaim(), 1);
        assert_eq!(p.stats().buffers_in_use, 0);
        assert_eq!(a.stats().regions_sent, 1);
        // Second transfer from the same chunk: no new region.
        a.send(filled(&p, b"again")).unwrap();
        drop(b.recv().unwrap());
        assert_eq!(a.stats().regions_sent, 1);
        assert!(matches!(b.try_recv(), Err(TryRecvError::WouldBlock)));
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn aggregates_and_single_use_travel() {
        let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let p = pool();
        let u = Uncached::new("t", false);
        let mut m = filled(&p, b"head:");
        let mut s = u.alloc_secured(5).unwrap();
        s.as_mut_slice().copy_from_slice(b"body!");
        m.join(Msg::from(s.freeze().unwrap())).unwrap();
        let (x, _y) = m.split_at(7).map_err(|e| e.into_parts().0).unwrap();
        a.send(x).unwrap();
        let got = b.recv().unwrap();
        assert_eq!(got.to_vec(), b"head:bo");
        assert!(!got.slices()[0].fbuf().is_secured());
        assert!(got.slices()[1].fbuf().is_secured());
        assert!(!got.is_secured());
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn ring_full_gives_message_back() {
        let cfg = ChannelConfig {
            ring_entries: 8,
            ..ChannelConfig::default()
        };
        let (a, _b) = Channel::pair(cfg).unwrap();
        let p = pool();
        for _ in 0..8 {
            a.try_send(filled(&p, b"x")).unwrap();
        }
        let e = a.try_send(filled(&p, b"y")).unwrap_err();
        assert!(e.is_would_block());
        assert_eq!(e.kind(), SendErrorKind::WouldBlock);
        let back = e.into_inner();
        assert_eq!(back.to_vec(), b"y");
        let e = a.send_timeout(back, Duration::from_millis(20)).unwrap_err();
        assert_eq!(e.kind(), SendErrorKind::TimedOut);
        assert_eq!(e.to_string(), SendErrorKind::TimedOut.to_string());
        assert_eq!(e.into_inner().to_vec(), b"y");
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn forwarding_passes_region_once_and_releases_upstream() {
        let (a, b1) = Channel::pair(ChannelConfig::default()).unwrap();
        let (b2, c) = Channel::pair(ChannelConfig::default()).unwrap();
        let p = pool();
        for i in 0..10u8 {
            a.send(filled(&p, &[i; 100])).unwrap();
            let m = b1.recv().unwrap();
            let ptr = m.slices()[0].view().as_ptr();
            b2.send(m).unwrap();
            let m2 = c.recv().unwrap();
            assert_eq!(m2.to_vec(), vec![i; 100]);
            assert_ne!(
                ptr,
                m2.slices()[0].view().as_ptr(),
                "separate mappings (one per domain in real use)"
            );
            drop(m2);
            c.flush();
            b2.reclaim();
            b1.flush();
            a.reclaim();
        }
        assert_eq!(b2.stats().regions_sent, 1, "forwarded region passed once");
        assert_eq!(p.stats().buffers_in_use, 0);
    }

    /// After this end's own `close()`, sends and receives fail
    /// `Disconnected` with a text that does not blame the peer alone.
    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn own_close_is_not_reported_as_the_peer_disconnecting() {
        let (a, _b) = Channel::pair(ChannelConfig::default()).unwrap();
        let p = pool();
        a.close();
        let send = a.try_send(filled(&p, b"x")).unwrap_err();
        assert!(send.is_disconnected(), "{send:?}");
        let recv = a.recv_timeout(std::time::Duration::ZERO).unwrap_err();
        assert!(recv.is_disconnected(), "{recv:?}");
        let texts = [
            send.to_string(),
            recv.to_string(),
            a.try_recv().unwrap_err().to_string(),
            a.recv().unwrap_err().to_string(),
        ];
        for text in texts {
            assert!(text.contains("this end was closed"), "{text}");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn peer_drop_releases_holdings() {
        let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let p = pool();
        a.send(filled(&p, b"held")).unwrap();
        let got = b.recv().unwrap();
        drop(b);
        assert_eq!(got.to_vec(), b"held", "still readable after close");
        drop(got);
        // b's core is gone now (no buffers reference it): a sees the hang-up.
        assert!(!a.check_peer());
        assert_eq!(p.stats().buffers_in_use, 0);
        assert!(a.try_send(filled(&p, b"x")).unwrap_err().is_disconnected());
        assert!(matches!(a.try_recv(), Err(TryRecvError::Disconnected)));
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn share_pool_announces_ahead_and_stats_show_holder() {
        let (a, b) = Channel::pair(by_ref()).unwrap();
        let p = pool();
        drop(p.try_alloc(1).unwrap()); // creates the first chunk
        a.share_pool(&p).unwrap();
        assert_eq!(a.stats().regions_sent, 1);
        a.send(filled(&p, b"pre-announced")).unwrap();
        assert_eq!(
            a.stats().regions_sent,
            1,
            "no region passed on the first send"
        );
        let got = b.recv().unwrap();
        assert_eq!(got.to_vec(), b"pre-announced");
        let st = p.stats();
        assert_eq!(st.held_per_peer.len(), 1);
        assert_eq!(
            st.held_per_peer[0].1, 1,
            "the peer holds one buffer: {st:?}"
        );
        drop(got);
        a.reclaim();
        assert_eq!(p.stats().held_per_peer[0].1, 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn coalesced_wake_still_delivers_within_the_delay_bound() {
        let policy = ChannelPolicy {
            notify: Notify::Defer,
            wake_batch: 1000,
            max_age: Duration::from_millis(2),
            ..ChannelPolicy::default()
        };
        let cfg = ChannelConfig {
            policy,
            ..ChannelConfig::default()
        };
        let (a, b) = Channel::pair(cfg).unwrap();
        let p = pool();
        let t = std::thread::spawn(move || {
            let m = b.recv_timeout(Duration::from_secs(10)).map(|m| m.to_vec());
            (m, b)
        });
        // Give the receiver time to go to sleep (not needed for correctness:
        // if it is awake it simply sees the message).
        std::thread::sleep(Duration::from_millis(20));
        a.send(filled(&p, b"late but bounded")).unwrap();
        let (m, _b) = t.join().unwrap();
        assert_eq!(m.unwrap(), b"late but bounded");
        assert_eq!(a.stats().wakes, 0, "the wake was deferred (batch of 1000)");
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn single_use_regions_stay_in_order_when_the_sender_runs_a_ring_ahead() {
        // The sender can be a full ring ahead of the receiver's single-use
        // FIFO plus the message being taken; every region must still pair
        // with its own descriptor.
        let cfg = ChannelConfig {
            ring_entries: 8,
            ..ChannelConfig::default()
        };
        let (a, b) = Channel::pair(cfg).unwrap();
        const N: u64 = 3000;
        let t = std::thread::spawn(move || {
            let u = Uncached::new("order", false);
            for i in 0..N {
                let mut m = u.alloc(8).unwrap();
                m.as_mut_slice().copy_from_slice(&i.to_le_bytes());
                a.send(Msg::from(m.freeze().unwrap())).unwrap();
            }
            a
        });
        for i in 0..N {
            let m = b.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(
                m.to_vec(),
                i.to_le_bytes(),
                "message {i} paired with another's region"
            );
        }
        drop(t.join().unwrap());
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn receiver_is_not_blocked_by_a_sender_waiting_in_the_same_process() {
        // A sender waiting (holding its send side) for notices that only
        // this process's receiver can publish must not stop that receiver
        // from waiting and returning.
        use std::sync::atomic::{AtomicBool, Ordering};
        let cfg = ChannelConfig {
            notice_entries: 8,
            ..ChannelConfig::default()
        };
        let (a, b) = Channel::pair(cfg).unwrap();
        let p = pool();
        for i in 0..8u8 {
            a.send(filled(&p, &[i])).unwrap();
        }
        let held: Vec<Msg> = (0..8).map(|_| b.recv().unwrap()).collect();
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let done2 = done.clone();
        let extra = filled(&p, b"ninth");
        let t = std::thread::spawn(move || {
            let r = a.send_timeout(extra, Duration::from_secs(5));
            done2.store(true, Ordering::SeqCst);
            (r.map_err(|e| e.kind()), a)
        });
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            b.recv_timeout(Duration::from_millis(50)).unwrap_err(),
            RecvError::TimedOut
        );
        assert!(
            !done.load(Ordering::SeqCst),
            "recv waited for the blocked sender"
        );
        drop(held); // notices go out: the sender gets room
        let (r, _a) = t.join().unwrap();
        assert_eq!(r, Ok(()));
    }
}
