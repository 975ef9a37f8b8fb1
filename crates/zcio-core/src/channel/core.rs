//! The shared state of one channel end: socket, control segment, the four
//! ring ends, the ledger, liveness and counters.

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as LocalOrdering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use std::cell::RefCell;

use smallvec::SmallVec;

use crate::bell::{Bell, Doorbell};
use crate::buf::fbuf::BufCore;
use crate::buf::ReleaseSink;
use crate::channel::config::{ChannelConfig, Notify};
use crate::channel::error::{Area, PeerFault};
use crate::channel::ledger::{Ledger, Returned};
use crate::channel::notify::{Verdict, WakeGate};
use crate::channel::registered::EndPage;
use crate::channel::slots::Slots;
use crate::channel::spsc::{Reader, RingHeader, SleepHandle, WakeResult, Writer};
use crate::channel::wire::{self, Ctl, Desc, Notice, SegmentLayout};
use crate::channel::ChannelStats;
use crate::region::Region;
use crate::sync::{AtomicU64 as SharedU64, Ordering};
use crate::sys::mmap::Mapping;
use crate::sys::peer::{self, PeerCred};
use crate::wait::{Backoff, SpinBudget, Step};
use zcio_sys::registry::schema::channel as st;
use zcio_sys::registry::StatsPage;

/// Hasher for process-local ids (small, unique, not attacker-chosen).
pub(crate) type IdHash = std::hash::BuildHasherDefault<IdHasher>;

/// Multiplicative hash of a u64 id.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Which end of the segment we are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Connector,
    Listener,
}

pub(crate) struct TxState {
    pub ring: Writer<Desc>,
    pub notices: Reader<Notice>,
    pub ledger: Ledger,
    /// region id → slot on this channel.
    pub announced: HashMap<u64, u32, IdHash>,
    /// Regions announced, kept alive for the channel's life.
    pub keep: Vec<Arc<Region>>,
    pub next_slot: u32,
    /// Slots (indexes into `keep`) of regions the peer reported passing on
    /// to another process (`NOTICE_ESCAPED`): if the peer dies holding
    /// slices of them, those slices are retired, not reused.
    pub escaped: Vec<bool>,
    /// Pools already registered for reclaim via this channel.
    pub pools: Vec<u64>,
    /// Messages published to a sleeping receiver without waking it.
    pub deferred: u32,
    /// When the oldest of the `deferred` messages was published.
    pub deferred_since: Option<Instant>,
    /// Trust in the receiver's sleep flag on our message ring.
    pub gate: WakeGate,
    /// `(token, lent at)` in lending order, kept only under a hold limit;
    /// entries whose token was released are skipped when they reach the
    /// front (and compacted away when they pile up).
    pub holds: VecDeque<(u64, Instant)>,
    /// Tokens of the last descriptors written to the message ring (at most
    /// its capacity), oldest first: when the peer dies, those past its
    /// final read position were provably never received, and are
    /// released instead of retired.
    pub recent: VecDeque<u64>,
    pub scratch: Vec<Desc>,
    /// How long a send waiting for room spins before it sleeps (adaptive,
    /// at most `ChannelPolicy::spin`; see `crate::wait`).
    pub spin: SpinBudget,
    /// The small-message slots (`slots.rs`).
    pub slots: Slots,
}

impl TxState {
    /// What a released ledger entry kept, given back: a slot goes on the
    /// free list again unless `retired` (the peer may have passed it on),
    /// a buffer is returned for the caller to drop where it chooses.
    pub fn take_back(&mut self, ret: Returned, retired: bool) -> Option<crate::buf::Fbuf> {
        match ret {
            Returned::Buf(b) => Some(b),
            Returned::Slot(slot) => {
                if let (Slots::Made(area), false) = (&mut self.slots, retired) {
                    area.put_back(slot);
                }
                None
            }
            Returned::Nothing => None,
        }
    }
}

pub(crate) struct RxState {
    pub ring: Reader<Desc>,
    /// slot → region announced by the peer.
    pub regions: Vec<Option<Arc<Region>>>,
    /// Single-use regions announced, in order (`None`: one that failed
    /// to attach, kept so later descriptors stay aligned).
    pub single: VecDeque<Option<Arc<Region>>>,
    /// Trust in the sender's "sleeping for space" flag.
    pub gate: WakeGate,
    pub scratch: Vec<Desc>,
    /// How long a receive spins before it sleeps (adaptive, at most
    /// `ChannelPolicy::spin`; see `crate::wait`).
    pub spin: SpinBudget,
    /// Lanes the peer offered, validated and mapped, not yet accepted (at
    /// most `MAX_OFFERED_LANES`).
    pub lanes: VecDeque<crate::channel::lane::Offered>,
    /// Spent cores for the next received slices (`Core::take_spare`).
    pub spare: Vec<Arc<BufCore>>,
    /// Fresh cores received slices were given (the most that can come
    /// back as spares).
    pub cores: usize,
}

/// Most lanes a peer may have offered and we not yet accepted; more are
/// refused (closed unmapped) and counted as malformed.
pub(crate) const MAX_OFFERED_LANES: usize = 16;

pub(crate) struct NoticeTx {
    pub ring: Writer<Notice>,
    /// Tokens that did not fit the notice ring yet.
    pub overflow: Vec<Notice>,
    /// Trust in the originator's sleep flag on our notice ring.
    pub gate: WakeGate,
    /// Allocations of spent cores of slices received here, reused for the
    /// next ones (see `Fbuf::received`): kept under this lock, which the
    /// last drop of a received slice takes anyway for its notice.
    pub spare: Vec<Arc<BufCore>>,
}

/// Most notices buffered locally when the peer stops draining its ring.
const MAX_NOTICE_OVERFLOW: usize = 1 << 20;

pub(crate) struct Core {
    pub sock: OwnedFd,
    /// Our end of the connection's doorbell pair (`crate::bell`): rung by
    /// the peer when we sleep in bell mode; we ring the peer on it.
    pub bell: Doorbell,
    /// This end sleeps on its doorbell, not on futexes (set once by the
    /// first event-loop waiter, [`Core::enter_bell_mode`]; sticky).
    bell_mode: AtomicBool,
    /// Keeps the ring memory mapped for the raw pointers in the ring ends.
    _seg: Mapping,
    pub peer: PeerCred,
    pidfd: Option<OwnedFd>,
    pub cfg: ChannelConfig,
    pub tx: Mutex<TxState>,
    pub rx: Mutex<RxState>,
    pub ntx: Mutex<NoticeTx>,
    /// Regions the peer announced to us: region id → (the peer's slot,
    /// whether we told the peer it escaped). Kept apart from `RxState` so
    /// a forwarder can report an escape while another thread receives.
    pub origin_slots: Mutex<HashMap<u64, (u32, bool), IdHash>>,
    /// The peer hung up or died; its holdings were released.
    gone: AtomicBool,
    /// The peer said Bye: no more messages will come.
    pub bye: AtomicBool,
    /// We closed this end.
    pub closed: AtomicBool,
    /// We aborted the channel because the peer held a buffer too long.
    pub aborted: AtomicBool,
    /// The peer broke a ring we could not act on under the lock held at
    /// the time (the notice ring we produce); handled at the next drain.
    pub poisoned: AtomicBool,
    /// Set by the `unsafe` `Channel::trust_peer`: received buffers are
    /// marked immutable (the peer promised not to write what it sent).
    pub trusted: AtomicBool,
    /// Faults detected, one per kind (latest detail).
    faults: Mutex<Vec<PeerFault>>,
    /// This end's live counters (`zcio_sys::registry::schema::channel`):
    /// the statistics page of its registry entry, or a local page for an
    /// in-process pair. Counters one side writes under its lock use
    /// `add` (a load and a store), others `add_shared`.
    pub counters: StatsPage,
    /// The name and mode this end registered under (its lanes register
    /// under the same); `None` for an in-process pair.
    pub registered_as: Option<(Box<str>, u32)>,
    /// Slices received on this end, counted as they are built; minus
    /// `received_ended` (the one release or retire each ends with), the
    /// slices still alive here: while any is, closing must not hang up, or
    /// the originator would take us for dead and reuse what we still read.
    received_built: AtomicU64,
    /// How many of those ended (see `received_built`). Two counters, each
    /// written under one lock (built: the receive lock; ended: the notice
    /// lock, which every end takes anyway), so neither path pays for a
    /// read-modify-write.
    received_ended: AtomicU64,
    pub me: Weak<Core>,
    /// Sleep handle on the notice ring we consume (multi-channel waits).
    notice_sleep: SleepHandle,
    /// Sleep handle on the message ring we consume.
    msg_sleep: SleepHandle,
    /// Sleep handle on the message ring we produce (its head line: waiting
    /// for space).
    space_sleep: SleepHandle,
    /// Offsets in the segment of our *closed* word and the peer's
    /// (`wire::CONNECTOR_CLOSED` / `wire::LISTENER_CLOSED`).
    closed_words: (usize, usize),
    /// Offsets of our *CPU* word and the peer's (`wire::CONNECTOR_CPU` /
    /// `wire::LISTENER_CPU`).
    pub(crate) cpu_words: (usize, usize),
    /// What we last wrote to our CPU word (process-local: it is written
    /// only when the CPU changed).
    cpu_published: AtomicU64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The protected state stays consistent across a panic in user code
    // (no user code runs under these locks), so take the guard back.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Core {
    /// Build the end for `role` over a validated, mapped segment (the
    /// set-up in `connect.rs` then adds it to the waitset).
    ///
    /// # Safety
    /// `seg` must be a mapping of at least `layout.total_len` bytes laid out
    /// as `layout` describes (header checked by the caller); it is moved
    /// into the core, so the ring pointers stay valid for its lifetime.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn new(
        role: Role,
        sock: OwnedFd,
        bell: Doorbell,
        seg: Mapping,
        layout: SegmentLayout,
        peer: PeerCred,
        cfg: ChannelConfig,
        page: EndPage,
    ) -> Arc<Self> {
        let EndPage {
            page: counters,
            name: registered_as,
        } = page;
        let base = seg.as_ptr();
        let (tx_msgs, rx_notices, rx_msgs, tx_notices) = match role {
            Role::Connector => (
                wire::C2L_MSGS,
                wire::L2C_NOTICES,
                wire::L2C_MSGS,
                wire::C2L_NOTICES,
            ),
            Role::Listener => (
                wire::L2C_MSGS,
                wire::C2L_NOTICES,
                wire::C2L_MSGS,
                wire::L2C_NOTICES,
            ),
        };
        let hdr = |i: usize| -> *const RingHeader {
            // Layout offsets are within total_len (SegmentLayout::new)
            // and the mapping is at least that long (caller's contract).
            // SAFETY: as argued just above.
            unsafe { base.add(layout.rings[i]).cast::<RingHeader>() }
        };
        let ent = |i: usize| -> *mut u8 {
            // SAFETY: as above; entry arrays follow their headers in bounds.
            unsafe { base.add(layout.entries(i)) }
        };
        let (me_cap, nc) = (layout.msg_entries, layout.notice_entries);
        // Each header/entry pointer pair describes one ring of the
        // given capacity inside the segment, 64-byte aligned (SegmentLayout),
        // and the segment mapping lives in this Core as long as the ring ends.
        // SAFETY: as argued just above.
        let (ring, notices, rxring, ntx) = unsafe {
            (
                Writer::<Desc>::new(hdr(tx_msgs), ent(tx_msgs).cast(), me_cap),
                Reader::<Notice>::new(hdr(rx_notices), ent(rx_notices).cast(), nc),
                Reader::<Desc>::new(hdr(rx_msgs), ent(rx_msgs).cast(), me_cap),
                Writer::<Notice>::new(hdr(tx_notices), ent(tx_notices).cast(), nc),
            )
        };
        let pidfd = peer::open_pidfd(peer.pid).ok();
        // SAFETY: both headers are inside the segment, which the Core owns,
        // and head rings of these capacities.
        let (notice_sleep, msg_sleep, space_sleep) = unsafe {
            (
                SleepHandle::new(hdr(rx_notices), nc),
                SleepHandle::new(hdr(rx_msgs), me_cap),
                SleepHandle::new(hdr(tx_msgs), me_cap),
            )
        };
        let spin = SpinBudget::new(cfg.policy.spin);
        let slots = if cfg.lane.is_off() {
            Slots::Off
        } else {
            Slots::Unmade
        };
        let closed_words = match role {
            Role::Connector => (wire::CONNECTOR_CLOSED, wire::LISTENER_CLOSED),
            Role::Listener => (wire::LISTENER_CLOSED, wire::CONNECTOR_CLOSED),
        };
        let cpu_words = match role {
            Role::Connector => (wire::CONNECTOR_CPU, wire::LISTENER_CPU),
            Role::Listener => (wire::LISTENER_CPU, wire::CONNECTOR_CPU),
        };
        Arc::new_cyclic(|me| Core {
            sock,
            bell,
            bell_mode: AtomicBool::new(false),
            _seg: seg,
            peer,
            pidfd,
            cfg,
            tx: Mutex::new(TxState {
                ring,
                notices,
                ledger: Ledger::default(),
                announced: HashMap::default(),
                escaped: Vec::new(),
                keep: Vec::new(),
                next_slot: 0,
                pools: Vec::new(),
                deferred: 0,
                deferred_since: None,
                gate: WakeGate::default(),
                holds: VecDeque::new(),
                recent: VecDeque::with_capacity(me_cap as usize),
                scratch: Vec::with_capacity(wire::MAX_SLICES),
                spin,
                slots,
            }),
            rx: Mutex::new(RxState {
                ring: rxring,
                regions: Vec::new(),
                single: VecDeque::new(),
                gate: WakeGate::default(),
                scratch: Vec::with_capacity(wire::MAX_SLICES),
                spin,
                lanes: VecDeque::new(),
                spare: Vec::new(),
                cores: 0,
            }),
            origin_slots: Mutex::new(HashMap::default()),
            ntx: Mutex::new(NoticeTx {
                ring: ntx,
                overflow: Vec::new(),
                gate: WakeGate::default(),
                spare: Vec::new(),
            }),
            gone: AtomicBool::new(false),
            bye: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            aborted: AtomicBool::new(false),
            poisoned: AtomicBool::new(false),
            trusted: AtomicBool::new(false),
            faults: Mutex::new(Vec::new()),
            counters,
            registered_as,
            received_built: AtomicU64::new(0),
            received_ended: AtomicU64::new(0),
            me: me.clone(),
            notice_sleep,
            msg_sleep,
            space_sleep,
            closed_words,
            cpu_words,
            cpu_published: AtomicU64::new(0),
        })
    }

    /// Switch this end to bell mode: from now on every waiter of this end
    /// (blocking ones too) sleeps on the doorbell, and the peer rings it
    /// instead of waking a futex — the lines of the three words we sleep on
    /// (our message ring's tail, our send ring's head, our notice ring's
    /// tail) say so. Idempotent.
    pub fn enter_bell_mode(&self) {
        if self.bell_mode.load(LocalOrdering::Acquire) {
            return;
        }
        // The lines first, then the mode: a blocking waiter that already
        // sleeps on a futex when the lines change is rung instead of woken
        // and sees its message at the end of its liveness slice, once.
        self.msg_sleep.set_consumer_bell();
        self.notice_sleep.set_consumer_bell();
        self.space_sleep.set_producer_bell();
        self.bell_mode.store(true, LocalOrdering::Release);
    }

    /// The doorbell to sleep on, in bell mode.
    pub fn own_bell(&self) -> Option<&dyn Bell> {
        if self.bell_mode.load(LocalOrdering::Relaxed) {
            Some(&self.bell)
        } else {
            None
        }
    }

    /// Sleep handle on the notice ring we consume.
    pub fn notice_sleep(&self) -> &SleepHandle {
        &self.notice_sleep
    }

    /// Sleep handle on the message ring we consume.
    pub fn msg_sleep(&self) -> &SleepHandle {
        &self.msg_sleep
    }

    /// Whether the peer holds anything of ours (a busy sender counts).
    pub fn peer_holds_any(&self) -> bool {
        match self.tx.try_lock() {
            Ok(tx) => !tx.ledger.is_empty(),
            Err(_) => true,
        }
    }

    pub fn is_gone(&self) -> bool {
        self.gone.load(LocalOrdering::Acquire)
    }

    /// Nothing more goes through this channel: we closed this end, or the
    /// peer is gone or closed its end (what rides on it, its lanes, ended
    /// with it).
    pub fn ended(&self) -> bool {
        self.closed.load(LocalOrdering::Acquire) || self.is_gone() || self.peer_closed()
    }

    /// Say in the segment which CPU this end runs on now (a store only
    /// when it changed, so the header line stays shared), and whether the
    /// peer last said the same CPU: then pure spinning for it is useless
    /// (it cannot run while we do), and a waiter yields the CPU on every
    /// poll instead (see `SpinBudget::backoff_for`). Called as a send or a
    /// wait begins; a hostile peer's word only decides how we poll for it.
    pub fn shares_cpu_with_peer(&self) -> bool {
        let mine = self.publish_cpu();
        // SYNC: Relaxed: the peer's hint, paired with its store in
        // `publish_cpu`; nothing is published through it.
        mine != 0 && self.header_word(self.cpu_words.1).load(Ordering::Relaxed) == mine
    }

    /// Write this end's CPU (plus one) to its CPU word if it changed;
    /// returns it (0: unknown).
    pub fn publish_cpu(&self) -> u64 {
        let Some(cpu) = crate::sys::cpu::current() else {
            return 0;
        };
        let mine = u64::from(cpu) + 1;
        if self.cpu_published.load(LocalOrdering::Relaxed) != mine {
            self.cpu_published.store(mine, LocalOrdering::Relaxed);
            // SYNC: Relaxed: a hint for the peer's waits, paired with its
            // load in `shares_cpu_with_peer`.
            self.header_word(self.cpu_words.0)
                .store(mine, Ordering::Relaxed);
        }
        mine
    }

    /// A word in the segment's header line (a *closed* or a *CPU* word).
    pub(crate) fn header_word(&self, offset: usize) -> &SharedU64 {
        // The header line is inside the mapping (it is at least one page),
        // 64-byte aligned, so `offset` (8-aligned, < 64, checked at compile
        // time in `wire`) names an aligned u64 that lives as long as `self`
        // holds the mapping. Another process may write it at any time:
        // it is only ever accessed atomically.
        // SAFETY: as argued just above.
        unsafe { &*self._seg.as_ptr().add(offset).cast::<SharedU64>() }
    }

    /// The peer closed its end (it said so in the segment): nothing sent
    /// now would be received.
    pub fn peer_closed(&self) -> bool {
        // SYNC: Acquire pairs with the Release store in the peer's `close`
        // (`publish_closed`); everything the peer published before closing
        // (messages, notices) is visible once this reads 1.
        self.header_word(self.closed_words.1)
            .load(Ordering::Acquire)
            != 0
    }

    /// Tell the peer, through the segment, that this end is closed.
    fn publish_closed(&self) {
        // SYNC: Release pairs with the Acquire load in the peer's
        // `peer_closed`.
        self.header_word(self.closed_words.0)
            .store(1, Ordering::Release);
    }

    /// A pidfd of the peer, where its pid means something here (none
    /// when it lives in a PID namespace we cannot see into).
    pub fn pidfd(&self) -> Option<&OwnedFd> {
        self.pidfd.as_ref()
    }

    /// Whether the peer hung up or exited (two non-blocking polls).
    pub fn peer_dead(&self) -> bool {
        peer::socket_hung_up(&self.sock) || self.pidfd.as_ref().is_some_and(peer::has_exited)
    }

    /// Probe the peer's liveness. On death, release everything it held.
    /// Must not be called with the tx lock held (see `check_peer_locked`).
    pub fn check_peer(&self) -> bool {
        if self.is_gone() {
            return false;
        }
        let dead = self.peer_dead();
        if dead {
            self.mark_gone();
        }
        !dead
    }

    /// `check_peer` for callers holding the tx lock.
    pub fn check_peer_locked(&self, tx: &mut TxState) -> bool {
        if self.is_gone() {
            return false;
        }
        let dead = self.peer_dead();
        if dead {
            self.mark_gone_locked(tx);
        }
        !dead
    }

    /// The peer is gone: take in its last notices, then release everything
    /// the ledger still says it holds.
    pub fn mark_gone(&self) {
        if self.is_gone() {
            return;
        }
        let mut tx = lock(&self.tx);
        self.mark_gone_locked(&mut tx);
    }

    /// `mark_gone` for callers holding the tx lock.
    pub fn mark_gone_locked(&self, tx: &mut TxState) {
        if self.gone.swap(true, LocalOrdering::AcqRel) {
            return;
        }
        let _ = self.drain_locked(tx);
        // Descriptors still on the ring past the peer's final read
        // position never reached it (a receiver frees ring slots before it
        // hands a message out): their buffers are free, whatever region
        // they lie in. A head that breaks the ring protocol proves nothing.
        let unread = match tx.ring.free_slots() {
            Ok(free) => tx.ring.capacity().saturating_sub(free),
            Err(_) => 0,
        };
        let skip = tx.recent.len().saturating_sub(unread);
        let mut never_received = Vec::with_capacity(unread.min(tx.recent.len()));
        let recent = std::mem::take(&mut tx.recent);
        for &token in recent.iter().skip(skip) {
            if let Ok(ret) = tx.ledger.release(token) {
                if let Some(b) = tx.take_back(ret, false) {
                    never_received.push(b);
                }
            }
        }
        tx.recent = recent;
        tx.recent.clear();
        self.counters
            .add_shared(st::NEVER_RECEIVED, never_received.len() as u64);
        drop(never_received);
        // The peer is gone for good: what it held and never passed on is
        // free; what lies in a region it passed on may still be read by a
        // process we cannot see, and is retired.
        let TxState {
            ledger,
            announced,
            escaped,
            ..
        } = tx;
        let (held, retired) = ledger.end_all(|b| {
            announced
                .get(&b.region().id())
                .is_some_and(|&slot| escaped.get(slot as usize).copied().unwrap_or(false))
        });
        self.counters.add_shared(st::RETIRED, retired as u64);
        self.ledger_gauges(tx);
        drop(held);
    }

    /// Publish the ledger's size (what the peer holds of ours) to the
    /// statistics page; under the tx lock, after every change of the
    /// ledger (so a plain store: that lock's holder is the only writer).
    #[inline]
    pub fn ledger_gauges(&self, tx: &TxState) {
        self.counters
            .set(st::HELD_BY_PEER_BUFFERS, tx.ledger.len() as u64);
        self.counters.set(st::HELD_BY_PEER_BYTES, tx.ledger.bytes());
    }

    /// Close our end: no more sends or receives; tell the peer. What the
    /// peer holds stays accounted until it releases it or dies: an end
    /// whose live peer still holds buffers of ours is returned, for the
    /// caller to hand to the reaper thread (`linger::linger`); `None`
    /// otherwise, and on every call after the first.
    #[must_use = "an end returned must linger until its peer is done"]
    pub fn close(&self) -> Option<Arc<Core>> {
        if self.closed.swap(true, LocalOrdering::AcqRel) {
            return None;
        }
        self.flush_notices();
        // The peer's next send sees this at once (no system call), even
        // while another thread of this process still holds this core (the
        // waitset does while it sleeps): closing does not wait for the
        // last `Arc` to go.
        self.publish_closed();
        let _ = crate::sys::fdpass::send(&self.sock, &Ctl::Bye.encode(), &[], true);
        // Wake a peer sleeping on our rings so it notices promptly: waiting
        // to receive (our message ring), for room (its message ring, which
        // we consume) or for notices (the notice ring we produce).
        lock(&self.tx).ring.wake_consumer(Some(&self.bell));
        let _ = self.msg_sleep.wake_producer(Some(&self.bell));
        let _ = lock(&self.ntx).ring.wake_consumer(Some(&self.bell));
        // What the peer returned already needs no lingering for.
        self.try_drain_notices();
        self.check_peer();
        match self.me.upgrade() {
            Some(me) if self.peer_holds_any() && !self.is_gone() => return Some(me),
            // We still read slices the peer lent us: a hang-up now would
            // tell it we are gone. The socket closes with this core, when
            // the last of them is dropped.
            _ if self.holds_received() => {}
            // Nothing of ours is held: hang up now, as dropping the last
            // reference would (the peer's polls see it, its socket writes
            // fail with EPIPE).
            _ => {
                let _ = rustix::net::shutdown(&self.sock, rustix::net::Shutdown::Both);
                // Nothing of this end is left to see: out of the listing
                // now, not when the last reference to the core goes
                // (another thread's wait may hold one for a moment).
                self.counters.withdraw();
            }
        }
        None
    }

    /// A snapshot of the statistics page (`zcio_sys::registry::schema::channel`).
    pub fn stats(&self) -> ChannelStats {
        let g = |i: usize| self.counters.get(i);
        ChannelStats {
            msgs_sent: g(st::SENT_MESSAGES),
            msgs_received: g(st::RECEIVED_MESSAGES),
            held_by_peer: g(st::HELD_BY_PEER_BUFFERS) as usize,
            notices_received: g(st::NOTICES_RECEIVED),
            bad_notices: g(st::BAD_NOTICES),
            notices_sent: g(st::NOTICES_SENT),
            notices_dropped: g(st::NOTICES_DROPPED),
            malformed: g(st::MALFORMED),
            wakes: g(st::WAKES),
            sleeps: g(st::SLEEPS),
            regions_sent: g(st::REGIONS_SENT),
            msgs_copied: g(st::COPIED_MESSAGES),
            regions_received: g(st::REGIONS_RECEIVED),
            reclaimed: g(st::RECLAIMED),
            retired: g(st::RETIRED),
            retire_notices_sent: g(st::RETIRE_NOTICES_SENT),
            never_received: g(st::NEVER_RECEIVED),
            futile_wakes: g(st::FUTILE_WAKES),
            wakes_suppressed: g(st::WAKES_SUPPRESSED),
            bytes_sent: g(st::SENT_BYTES),
            bytes_received: g(st::RECEIVED_BYTES),
            held_by_peer_bytes: g(st::HELD_BY_PEER_BYTES),
            holding: self.holding(),
            send_would_block: g(st::SEND_WOULD_BLOCK),
            send_timed_out: g(st::SEND_TIMED_OUT),
            send_disconnected: g(st::SEND_DISCONNECTED),
            recv_would_block: g(st::RECV_WOULD_BLOCK),
            recv_timed_out: g(st::RECV_TIMED_OUT),
            recv_disconnected: g(st::RECV_DISCONNECTED),
            peer_pid: g(st::PEER_PID) as u32,
            connection: g(st::CONNECTION),
        }
    }

    /// Record a fault (one entry per kind, latest detail wins).
    pub fn fault(&self, f: PeerFault) {
        let mut v = lock(&self.faults);
        match v
            .iter_mut()
            .find(|g| std::mem::discriminant(*g) == std::mem::discriminant(&f))
        {
            Some(g) => *g = f,
            None => v.push(f),
        }
    }

    /// Every fault detected so far, in the order first seen, plus the
    /// running totals of malformed input and reclaimed holds.
    pub fn faults(&self) -> Vec<PeerFault> {
        let mut v = lock(&self.faults).clone();
        let malformed = self.counters.get(st::MALFORMED);
        if malformed > 0 {
            v.push(PeerFault::Malformed(malformed));
        }
        let reclaimed = self.counters.get(st::RECLAIMED);
        if reclaimed > 0 {
            v.push(PeerFault::HoldsReclaimed(reclaimed));
        }
        v
    }

    /// The peer broke a ring: record it and treat the peer as gone.
    pub fn corrupt_locked(&self, tx: &mut TxState, area: Area) {
        self.fault(PeerFault::Corrupt(area));
        self.mark_gone_locked(tx);
    }

    /// `corrupt_locked` for callers not holding the tx lock.
    pub fn corrupt(&self, area: Area) {
        self.fault(PeerFault::Corrupt(area));
        self.mark_gone();
    }

    /// Whether the channel was aborted on an expired hold.
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(LocalOrdering::Relaxed)
    }

    /// Wake the peer through `wake` unless its flag is distrusted and it
    /// was woken less than `max_age` ago; counts wakes and futile wakes and
    /// reports the peer when its flag turns out to be a lie. Returns whether
    /// a wake was issued or nothing needed waking (`false`: suppressed).
    pub fn gated_wake(&self, gate: &mut WakeGate, wake: impl FnOnce() -> WakeResult) -> bool {
        let p = &self.cfg.policy;
        if !gate.allow(p.max_age) {
            self.counters.add_shared(st::WAKES_SUPPRESSED, 1);
            return false;
        }
        let w = wake();
        if w.issued() {
            self.counters.add_shared(st::WAKES, 1);
        }
        if w == WakeResult::Futile {
            self.counters.add_shared(st::FUTILE_WAKES, 1);
        }
        if let Verdict::Distrusted(n) = gate.record(w, p.futile_wake_limit) {
            self.fault(PeerFault::FutileWakes(n));
        }
        true
    }

    /// Wake the receiver for deferred messages (gated).
    pub fn wake_deferred_locked(&self, tx: &mut TxState) {
        if tx.deferred == 0 {
            return;
        }
        let TxState { ring, gate, .. } = tx;
        if self.gated_wake(gate, || ring.wake_consumer(Some(&self.bell))) {
            tx.deferred = 0;
            tx.deferred_since = None;
        }
    }

    /// End every entry of the ledger without a release notice: the buffers
    /// are retired, never reused (the peer may have passed them on).
    pub fn retire_all_locked(&self, tx: &mut TxState) {
        let held = tx.ledger.retire_all();
        if !held.is_empty() {
            self.counters.add_shared(st::RETIRED, held.len() as u64);
        }
        self.ledger_gauges(tx);
        drop(held);
    }

    /// Process pending notices under the tx lock. Returns buffers released.
    pub fn drain_locked(&self, tx: &mut TxState) -> usize {
        let _batch = NoticeBatch::enter();
        // Load first: the swap (a read-modify-write) only when set.
        if self.poisoned.load(LocalOrdering::Relaxed)
            && self.poisoned.swap(false, LocalOrdering::Relaxed)
        {
            self.mark_gone_locked(tx);
        }
        let mut released = 0;
        let mut first = true;
        loop {
            // None at all: check the tail word too (a corrupt one is
            // reported at once; not read after a round of notices, whose
            // publish just changed it).
            let found = match tx.notices.available() {
                Ok(0) if first => tx.notices.check_tail().map(|()| 0),
                other => other,
            };
            first = false;
            let n = match found {
                Ok(0) => break,
                Ok(n) => n,
                // A corrupt notice ring: the peer broke the protocol. It
                // can no longer return buffers, so treat it as gone.
                Err(_) => {
                    self.fault(PeerFault::Corrupt(Area::NoticeRing));
                    self.gone.store(true, LocalOrdering::Release);
                    self.retire_all_locked(tx);
                    break;
                }
            };
            for i in 0..n {
                // Copied out of the shared ring by `peek`; validated here.
                let notice = tx.notices.peek(i);
                let retire = match notice.kind {
                    wire::NOTICE_RELEASED => false,
                    wire::NOTICE_RETIRED => true,
                    wire::NOTICE_ESCAPED if notice.token < u64::from(tx.next_slot) => {
                        let slot = notice.token as usize;
                        if tx.escaped.len() <= slot {
                            tx.escaped.resize(slot + 1, false);
                        }
                        tx.escaped[slot] = true;
                        continue;
                    }
                    _ => {
                        self.counters.add_shared(st::BAD_NOTICES, 1);
                        continue;
                    }
                };
                match tx.ledger.release(notice.token) {
                    Ok(ret) => {
                        let buf = tx.take_back(ret, retire);
                        released += 1;
                        if retire {
                            self.counters.add_shared(st::RETIRED, 1);
                            if let Some(b) = &buf {
                                b.retire();
                            }
                        }
                        drop(buf);
                    }
                    Err(_) => self.counters.add_shared(st::BAD_NOTICES, 1),
                }
            }
            tx.notices.release(n);
        }
        // A peer that closed its end returns what it holds until it ends;
        // once it has ended, what it still holds is released or retired
        // here (one atomic load while it is open; a poll once it closed).
        if !tx.ledger.is_empty() && !self.is_gone() && self.peer_closed() {
            self.check_peer_locked(tx);
        }
        if released > 0 {
            // Written only here, under the tx lock.
            self.counters.add(st::NOTICES_RECEIVED, released as u64);
            self.ledger_gauges(tx);
        }
        released
    }

    /// Take in notices and enforce the hold limit; returns the slices
    /// released (by the peer, or reclaimed on expiry).
    pub fn drain_notices(&self) -> usize {
        let mut tx = lock(&self.tx);
        self.drain_locked(&mut tx) + self.expire_locked(&mut tx).unwrap_or(0)
    }

    /// `drain_notices` unless another thread holds the send side (it may
    /// be sleeping there, waiting for a receiver that is this very thread).
    pub fn try_drain_notices(&self) -> usize {
        match self.tx.try_lock() {
            Ok(mut tx) => self.drain_locked(&mut tx),
            Err(std::sync::TryLockError::Poisoned(p)) => self.drain_locked(&mut p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => 0,
        }
    }

    /// Queue a notice for `token`, keeping `spare` (a spent core) under
    /// the same lock for the next received slice.
    /// `ended`: the notice ends a slice received here (see
    /// `received_built`).
    fn send_notice_recycle(&self, token: u64, kind: u64, spare: Option<Arc<BufCore>>, ended: bool) {
        let mut n = lock(&self.ntx);
        if ended {
            // SYNC: Release, written only under this lock; pairs with the
            // Acquire load in `holds_received`.
            let c = &self.received_ended;
            let ended = c.load(LocalOrdering::Relaxed) + 1;
            c.store(ended, LocalOrdering::Release);
            // Published for tools (holding = received - ended), a plain
            // store under the same lock: no read-modify-write per slice.
            self.counters.set(st::ENDED_SLICES, ended);
        }
        if let Some(core) = spare {
            if n.spare.len() < SPARE_MAX {
                n.spare.push(core);
            }
        }
        if self.is_gone() {
            self.counters.add_shared(st::NOTICES_DROPPED, 1);
            return;
        }
        if n.overflow.len() >= MAX_NOTICE_OVERFLOW {
            self.counters.add_shared(st::NOTICES_DROPPED, 1);
            return;
        }
        n.overflow.push(Notice {
            token,
            kind,
            reserved: 0,
        });
        // Inside a batch (this thread is taking in notices of another
        // channel, and every buffer they free may owe a notice here): defer
        // the publish to the end of the batch, so a forwarder passes a
        // round of notices upstream with one publish instead of one each.
        if NoticeBatch::defer(self) {
            return;
        }
        self.flush_notices_locked(&mut n);
    }

    /// Publish every queued notice that fits.
    pub fn flush_notices(&self) {
        let mut n = lock(&self.ntx);
        self.flush_notices_locked(&mut n);
    }

    pub fn flush_notices_locked(&self, n: &mut NoticeTx) {
        if n.overflow.is_empty() {
            return;
        }
        // The cached head usually shows room: only read the originator's
        // line when it does not.
        let mut free = n.ring.cached_free();
        if free < n.overflow.len() {
            free = match n.ring.free_slots() {
                Ok(f) => f,
                Err(_) => {
                    // The originator broke the ring our notices go on. We
                    // hold the notice lock, which ranks below the send lock:
                    // the next drain treats the peer as gone.
                    self.fault(PeerFault::Corrupt(Area::NoticeRing));
                    self.poisoned.store(true, LocalOrdering::Relaxed);
                    return;
                }
            };
        }
        let k = free.min(n.overflow.len());
        if k == 0 {
            return;
        }
        let mut pending = 0;
        let NoticeTx { ring, overflow, .. } = n;
        for chunk in overflow[..k].chunks(16) {
            ring.write(chunk, &mut pending);
        }
        overflow.drain(..k);
        if ring.publish(pending) {
            let NoticeTx { ring, gate, .. } = n;
            self.gated_wake(gate, || ring.wake_consumer(Some(&self.bell)));
        }
        // Written only here, under the ntx lock.
        self.counters.add(st::NOTICES_SENT, k as u64);
    }

    pub fn liveness_slice(&self) -> Duration {
        let p = &self.cfg.policy;
        let mut s = self.cfg.liveness_interval;
        if p.notify == Notify::Defer {
            s = s.min(p.max_age);
        }
        s
    }
}

impl Core {
    /// Tell the originator that the region it announced as `slot` is about
    /// to be passed on to another process, and wait (bounded) until that
    /// notice is in the shared ring: only then may the region leave, so a
    /// crash after this point still leaves the originator warned.
    fn publish_escape(&self, slot: u32, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut n = lock(&self.ntx);
        if n.overflow.len() >= MAX_NOTICE_OVERFLOW {
            return false;
        }
        n.overflow.push(Notice {
            token: u64::from(slot),
            kind: wire::NOTICE_ESCAPED,
            reserved: 0,
        });
        // The originator drains its notice ring on every send and
        // allocation. Room is waited for without holding `ntx` (other
        // threads publish notices under it), so not on the ring's futex
        // word (sleeping there needs the ring writer, which `ntx` guards):
        // `wait::Backoff` spins briefly, then this polls every 50 µs. It is
        // a rare path: a region escaping while the notice ring is full.
        let mut backoff = Backoff::until(Duration::from_micros(20), deadline);
        loop {
            self.flush_notices_locked(&mut n);
            // Published (our notice and everything queued before it), or
            // the originator is gone and will never reuse anything.
            if n.overflow.is_empty() || self.is_gone() {
                return true;
            }
            drop(n);
            match backoff.step() {
                Step::Retry => {}
                Step::TimedOut => return false,
                Step::Sleep { remaining, .. } => {
                    std::thread::sleep(remaining.min(Duration::from_micros(50)))
                }
            }
            n = lock(&self.ntx);
        }
    }
}

/// Notices owed upstream while this thread takes in notices downstream:
/// published once per channel when the outermost batch ends. A relay loop
/// (`crate::forward`) holds one around each round of forwarding, so the
/// notices of a round go upstream in one publish.
pub(crate) struct NoticeBatch;

thread_local! {
    /// Nesting depth of batches on this thread, and the channels with
    /// deferred notices (inline for the usual few).
    static BATCH: RefCell<(u32, SmallVec<[Arc<Core>; 4]>)> =
        RefCell::new((0, SmallVec::new()));
}

impl NoticeBatch {
    pub(crate) fn enter() -> NoticeBatch {
        BATCH.with(|b| b.borrow_mut().0 += 1);
        NoticeBatch
    }

    /// Inside a batch: remember `core` for the flush at its end and say
    /// so; outside one, or if `core` is going away: `false` (publish now).
    /// A channel already remembered is found by address, so only its first
    /// notice of a batch upgrades its weak self-reference (an atomic
    /// read-modify-write, and another to drop it, per notice otherwise).
    fn defer(core: &Core) -> bool {
        BATCH.with(|b| {
            let mut b = b.borrow_mut();
            if b.0 == 0 {
                return false;
            }
            if b.1.iter().any(|c| std::ptr::eq(Arc::as_ptr(c), core)) {
                return true;
            }
            match core.me.upgrade() {
                Some(me) => {
                    b.1.push(me);
                    true
                }
                None => false,
            }
        })
    }
}

impl Drop for NoticeBatch {
    fn drop(&mut self) {
        let pending = BATCH.with(|b| {
            let mut b = b.borrow_mut();
            b.0 -= 1;
            if b.0 == 0 {
                std::mem::take(&mut b.1)
            } else {
                SmallVec::new()
            }
        });
        // Outside the thread-local borrow: flushing may drop buffers whose
        // notices start a new batch.
        for c in pending {
            c.flush_notices();
        }
    }
}

/// Most spare received-slice cores a channel end keeps.
const SPARE_MAX: usize = 1024;

impl Core {
    /// A received slice was built (the receive path, once per slice,
    /// under the receive lock).
    pub(crate) fn received_one(&self) {
        let c = &self.received_built;
        let built = c.load(LocalOrdering::Relaxed) + 1;
        c.store(built, LocalOrdering::Relaxed);
        // Published for tools, as `ENDED_SLICES` is (see there).
        self.counters.set(st::RECEIVED_SLICES, built);
    }

    /// How many slices received here are still alive (never fewer than
    /// are).
    pub(crate) fn holding(&self) -> u64 {
        // SYNC: ended first, with Acquire, pairing with the Release store in
        // `send_notice_recycle`: a slice counted there was built before it
        // ended (its handle travelled from the receive to the drop), so
        // the built count read next includes it. Read in this order the
        // difference is never below the slices alive now.
        let ended = self.received_ended.load(LocalOrdering::Acquire);
        let built = self.received_built.load(LocalOrdering::Acquire);
        built.saturating_sub(ended)
    }

    /// Whether slices received here are still alive.
    pub(crate) fn holds_received(&self) -> bool {
        self.holding() > 0
    }

    /// The space a descriptor we rejected took: its token goes back to
    /// the sender (no slice was built for it).
    pub(crate) fn return_token(&self, token: u64) {
        self.send_notice_recycle(token, wire::NOTICE_RELEASED, None, false);
    }

    /// Spare cores for the next received slices (under the receive lock):
    /// refilled from the notice side's list, one lock per batch.
    /// `None`: the slice gets a fresh allocation, so both spare lists make
    /// room for it to come back, and the notice queue for its notice — its
    /// last handle may go on another thread (a notice drain), which must
    /// not pay for growing them.
    pub(crate) fn take_spare(&self, rx: &mut RxState) -> Option<Arc<BufCore>> {
        if rx.spare.is_empty() {
            std::mem::swap(&mut rx.spare, &mut lock(&self.ntx).spare);
        }
        let spare = rx.spare.pop();
        if spare.is_none() {
            rx.cores = rx.cores.saturating_add(1);
            let want = rx.cores.min(SPARE_MAX);
            if rx.spare.capacity() < want {
                rx.spare.reserve(want - rx.spare.len());
            }
            let mut n = lock(&self.ntx);
            if n.spare.capacity() < want {
                let more = want - n.spare.len();
                n.spare.reserve(more);
            }
            // And for its notice: queued while a batch defers the publish.
            if n.overflow.capacity() < want {
                let more = want - n.overflow.len();
                n.overflow.reserve(more);
            }
        }
        spare
    }
}

impl ReleaseSink for Core {
    fn release_recycle(&self, token: u64, core: Arc<BufCore>) {
        self.send_notice_recycle(token, wire::NOTICE_RELEASED, Some(core), true);
    }

    fn escaped(&self, region_id: u64, timeout: Duration) -> bool {
        let slot = match lock(&self.origin_slots).get(&region_id) {
            Some(&(_, true)) => return true,
            Some(&(slot, false)) => slot,
            // Not a region this peer announced to us (cannot happen for a
            // buffer received on this channel): nothing to warn.
            None => return true,
        };
        if !self.publish_escape(slot, timeout) {
            return false;
        }
        if let Some(e) = lock(&self.origin_slots).get_mut(&region_id) {
            e.1 = true;
        }
        true
    }

    fn release(&self, token: u64) {
        self.send_notice_recycle(token, wire::NOTICE_RELEASED, None, true);
    }

    fn retire(&self, token: u64) {
        self.counters.add_shared(st::RETIRE_NOTICES_SENT, 1);
        self.send_notice_recycle(token, wire::NOTICE_RETIRED, None, true);
    }
}
