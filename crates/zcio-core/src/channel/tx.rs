//! The sending side: region announcement, ledger entries, descriptors onto
//! the ring, lazy wake-up of the receiver.

use std::os::fd::AsFd;
use std::sync::atomic::Ordering as LocalOrdering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zcio_sys::registry::schema::channel as st;

use crate::bell::Rung;
use crate::buf::{Fbuf, Pool, Reclaim};
use crate::channel::config::{FullPolicy, Notify};
use crate::channel::core::{lock, Core, TxState};
use crate::channel::error::{Area, PeerFault, SendErrorKind};
use crate::channel::slots::{SlotArea, Slots};
use crate::channel::wire::{Ctl, Desc, MAX_REGION_SLOTS, SINGLE_USE_SAME, SINGLE_USE_SLOT};
use crate::msg::Msg;
use crate::region::Region;
use crate::sys::fdpass;
use crate::wait::{wait_ready, Readiness, SpinBudget, Waited};

/// Ledger size at which `send` takes in deallocation notices itself.
const DRAIN_THRESHOLD: usize = 64;

impl Core {
    pub(crate) fn send(&self, msg: Msg, timeout: Duration) -> Result<(), (SendErrorKind, Msg)> {
        self.send_with(msg, timeout, true)
    }

    /// `send`, for a relay loop that takes in this channel's notices at
    /// the end of each round (`crate::forward`): a message of received
    /// buffers does not make it drain first (see `send_with`).
    pub(crate) fn send_in_round(
        &self,
        msg: Msg,
        timeout: Duration,
    ) -> Result<(), (SendErrorKind, Msg)> {
        self.send_with(msg, timeout, false)
    }

    /// `forwarded_drain`: a message carrying received buffers takes in the
    /// peer's notices before it is sent (their releases travel upstream to
    /// an originator that may be waiting for them).
    fn send_with(
        &self,
        msg: Msg,
        timeout: Duration,
        forwarded_drain: bool,
    ) -> Result<(), (SendErrorKind, Msg)> {
        let r = self.send_once(msg, timeout, forwarded_drain);
        if let Err((kind, _)) = &r {
            self.count_send_error(kind, timeout);
        }
        r
    }

    /// Count a failed send in the statistics page (a cold path; sends
    /// fail on several threads at once, so `add_shared`).
    #[cold]
    fn count_send_error(&self, kind: &SendErrorKind, timeout: Duration) {
        let waited = !timeout.is_zero() && self.cfg.policy.full != FullPolicy::Fail;
        let index = match kind {
            SendErrorKind::WouldBlock => st::SEND_WOULD_BLOCK,
            SendErrorKind::TooManyInFlight(_) if !waited => st::SEND_WOULD_BLOCK,
            SendErrorKind::TimedOut | SendErrorKind::TooManyInFlight(_) => st::SEND_TIMED_OUT,
            SendErrorKind::Disconnected => st::SEND_DISCONNECTED,
            _ => return,
        };
        self.counters.add_shared(index, 1);
    }

    /// One send (`send_with` without the error counting).
    fn send_once(
        &self,
        msg: Msg,
        timeout: Duration,
        forwarded_drain: bool,
    ) -> Result<(), (SendErrorKind, Msg)> {
        if self.is_aborted() {
            return Err((SendErrorKind::HoldExpired, msg));
        }
        if self.closed.load(LocalOrdering::Acquire) || self.is_gone() || self.peer_closed() {
            return Err((SendErrorKind::Disconnected, msg));
        }
        let n = msg.slice_count();
        if n == 0 {
            return Err((SendErrorKind::EmptyMessage, msg));
        }
        // Tell the receiver where we run (a load and a compare unless we
        // moved): its waits do not spin for a sender on their own CPU.
        self.publish_cpu();
        let mut tx = lock(&self.tx);
        if self.poisoned.load(LocalOrdering::Relaxed) {
            self.drain_locked(&mut tx);
            return Err((SendErrorKind::Corrupt, msg));
        }
        if let Err(e) = self.expire_locked(&mut tx) {
            return Err((e, msg));
        }
        if n > tx.ring.capacity() {
            return Err((SendErrorKind::TooLarge(n), msg));
        }
        // Pools pull notices in when they run short of buffers, and every
        // wait takes them in; here only keep the ledger from growing, so
        // the receiver's notice line is read once per batch, not per send.
        // A forwarder (sending buffers it received) drains every time: its
        // releases travel upstream to an originator that may be waiting.
        // A relay loop does so once per round instead.
        let forwarding = forwarded_drain && msg.slices().iter().any(|s| s.fbuf().is_foreign());
        if forwarding || tx.ledger.len() >= DRAIN_THRESHOLD {
            self.drain_locked(&mut tx);
        }
        let bytes = msg.len() as u64;
        if let Err(e) = self.wait_for_ledger_room(&mut tx, n, bytes, timeout) {
            return Err((e, msg));
        }
        if let Err(e) = self.wait_for_space(&mut tx, n, timeout) {
            return Err((e, msg));
        }
        // Under the lock that `mark_gone` takes: a peer found gone (or
        // closed) by a drain or a wait above must not get entries in a
        // ledger that was already ended (they would never be released).
        if self.is_gone() || self.peer_closed() {
            return Err((SendErrorKind::Disconnected, msg));
        }
        let mut descs = std::mem::take(&mut tx.scratch);
        descs.clear();
        match self.small_desc(&mut tx, &msg) {
            Some(d) => descs.push(d),
            None => {
                if let Err(e) = self.lend_descs(&mut tx, &msg, timeout, &mut descs) {
                    tx.scratch = descs;
                    return Err((e, msg));
                }
            }
        }
        let cap = tx.ring.capacity();
        for d in &descs {
            if tx.recent.len() == cap {
                tx.recent.pop_front();
            }
            tx.recent.push_back(d.token);
        }
        let mut pending = 0;
        tx.ring.write(&descs, &mut pending);
        tx.scratch = descs;
        let sleeping = tx.ring.publish(pending);
        // Written only here, under the tx lock.
        self.counters.add(st::SENT_MESSAGES, 1);
        self.counters.add(st::SENT_BYTES, bytes);
        self.ledger_gauges(&tx);
        self.notify_locked(&mut tx, sleeping);
        // Notices are not taken in here but when the pool runs short (or
        // at `DRAIN_THRESHOLD`, above): a buffer the receiver has just
        // released is still in its cache, and rewriting it at once costs
        // the writer a transfer of every line back (measured: a copying
        // 64 KiB ping-pong twice as slow when each send drained).
        //
        // The Msg's own references go now, still under the send lock; the
        // ledger keeps the buffers. Dropped after the unlock, a handle could
        // race the ledger's own, dropped by a drain on another thread (the
        // waitset settles every channel of the process): each would see the
        // other and neither recycle the buffer's allocation (`Fbuf::drop`),
        // so the next receive or alloc would allocate one. Under the lock the
        // drops are ordered and the later one recycles.
        drop(msg);
        drop(tx);
        Ok(())
    }

    /// A message of one slice that fits a small-message slot goes by
    /// copy: its descriptor, or `None` to lend it by reference (no slots,
    /// a buffer that must travel by reference, or every slot in flight).
    /// Only a buffer of our own making is copied: a received one keeps
    /// travelling by reference (its originator decides when it is freed),
    /// and so does a sealed one (the receiver relies on the kernel's
    /// guarantee) and pages an arena lends in place.
    fn small_desc(&self, tx: &mut TxState, msg: &Msg) -> Option<Desc> {
        let [s] = msg.slices() else {
            return None;
        };
        let lane = self.cfg.lane;
        if matches!(tx.slots, Slots::Off) || s.len() > lane.slot_size || !s.fbuf().is_own_plain() {
            return None;
        }
        if matches!(tx.slots, Slots::Unmade) {
            tx.slots = Slots::Off;
            let (region, stride) = SlotArea::create(lane.slots, lane.slot_size)?;
            self.announce_region(tx, &region).ok()?;
            let slot = *tx.announced.get(&region.id())?;
            tx.slots = Slots::Made(SlotArea::new(
                region,
                slot,
                lane.slots,
                lane.slot_size,
                stride,
            ));
        }
        let mut filled = match &mut tx.slots {
            Slots::Made(area) => area.fill(s.fbuf(), s.offset(), s.len()),
            _ => return None,
        };
        if filled.is_none() {
            // Every slot in flight: take in what came back, once.
            self.drain_locked(tx);
            filled = match &mut tx.slots {
                Slots::Made(area) => area.fill(s.fbuf(), s.offset(), s.len()),
                _ => return None,
            };
        }
        let (slot, offset) = filled?;
        let region = match &tx.slots {
            Slots::Made(area) => area.region_slot,
            _ => return None,
        };
        let token = tx.ledger.insert_slot(slot, s.len() as u64);
        // Written only here, under the tx lock.
        self.counters.add(st::COPIED_MESSAGES, 1);
        if self.cfg.policy.hold.is_some() {
            tx.holds.push_back((token, Instant::now()));
        }
        Some(Desc {
            region,
            count: 1,
            offset,
            len: s.len() as u64,
            token,
            reserved: [0; 3],
        })
    }

    /// Lend every slice of `msg` by reference: announce the regions the
    /// peer lacks, record each slice in the ledger, and fill `descs`.
    fn lend_descs(
        &self,
        tx: &mut TxState,
        msg: &Msg,
        timeout: Duration,
        descs: &mut Vec<Desc>,
    ) -> Result<(), SendErrorKind> {
        let n = msg.slice_count();
        // Pass any region the peer does not have yet. Nothing is committed
        // until every region is across, so a failure leaves no trace.
        let mut last_single: Option<u64> = None;
        for s in msg.slices() {
            let region = s.fbuf().region();
            if region.is_single_use() {
                // Consecutive slices of one single-use region share one pass.
                if last_single == Some(region.id()) {
                    continue;
                }
                last_single = Some(region.id());
            }
            self.announce(tx, s.fbuf(), timeout)?;
        }
        let lent_at = self.cfg.policy.hold.map(|_| Instant::now());
        let mut last_single: Option<u64> = None;
        for (i, s) in msg.slices().iter().enumerate() {
            let region = s.fbuf().region();
            let slot = if region.is_single_use() {
                let same = last_single == Some(region.id());
                last_single = Some(region.id());
                if same {
                    SINGLE_USE_SAME
                } else {
                    SINGLE_USE_SLOT
                }
            } else {
                // Present: announce() succeeded for every slice above.
                tx.announced
                    .get(&region.id())
                    .copied()
                    .unwrap_or(SINGLE_USE_SLOT)
            };
            if let Some(pool) = s.fbuf().pool_inner() {
                if !tx.pools.contains(&pool.id()) {
                    tx.pools.push(pool.id());
                    if let Some(me) = self.me.upgrade() {
                        let weak: std::sync::Weak<dyn Reclaim> =
                            Arc::downgrade(&(me as Arc<dyn Reclaim>));
                        Pool::from_inner(pool.clone()).register_reclaimer(weak);
                    }
                }
            }
            // A single-use region we own is never recycled: the peer got its
            // own fd, so we keep only the accounting, not the mapping (the
            // last holder frees the pages). A forwarded one keeps our
            // reference, so upstream sees it held until downstream releases.
            let token = if region.is_single_use()
                && region.ownership() == crate::region::Ownership::Owned
            {
                tx.ledger.insert_detached(s.len() as u64)
            } else {
                tx.ledger.insert(s.fbuf().clone(), s.len() as u64)
            };
            if let Some(at) = lent_at {
                tx.holds.push_back((token, at));
            }
            descs.push(Desc {
                region: slot,
                count: if i == 0 { n as u32 } else { 0 },
                offset: (s.fbuf().region_offset() + s.offset()) as u64,
                len: s.len() as u64,
                token,
                reserved: [0; 3],
            });
        }
        Ok(())
    }

    /// After a publish: wake the receiver now, or defer the wake, as the
    /// policy says. `sleeping`: the publish found the receiver's flag set.
    fn notify_locked(&self, tx: &mut TxState, sleeping: bool) {
        if !sleeping {
            // The receiver is awake and will see everything queued.
            tx.deferred = 0;
            tx.deferred_since = None;
            return;
        }
        let p = &self.cfg.policy;
        tx.deferred += 1;
        let due = match p.notify {
            Notify::Now => true,
            Notify::Defer if tx.deferred >= p.wake_batch => true,
            Notify::Defer => match tx.deferred_since {
                // Only a deferring sender reads the clock here.
                Some(t) => t.elapsed() >= p.max_age,
                None => {
                    tx.deferred_since = Some(Instant::now());
                    p.max_age.is_zero()
                }
            },
        };
        if due {
            self.wake_deferred_locked(tx);
        }
    }

    /// The peer may hold at most `min(max_in_flight, notice ring size)`
    /// slices: then every notice it owes us always fits its notice ring, so
    /// none can be stranded on its side. It may also hold at most
    /// `max_bytes_in_flight` bytes, unless it holds nothing else. Wait
    /// (bounded) for notices when at either cap.
    fn wait_for_ledger_room(
        &self,
        tx: &mut TxState,
        n: usize,
        bytes: u64,
        timeout: Duration,
    ) -> Result<(), SendErrorKind> {
        let cap = self.cfg.max_in_flight.min(tx.notices.capacity());
        let max_bytes = self.cfg.max_bytes_in_flight;
        let fits = |tx: &TxState| {
            tx.ledger.len() + n <= cap
                && (tx.ledger.is_empty() || tx.ledger.bytes().saturating_add(bytes) <= max_bytes)
        };
        if fits(tx) {
            return Ok(());
        }
        if n > cap {
            return Err(SendErrorKind::TooLarge(n));
        }
        self.drain_locked(tx);
        if fits(tx) {
            return Ok(());
        }
        if self.is_gone() || self.peer_closed() {
            return Err(SendErrorKind::Disconnected);
        }
        if timeout.is_zero() || self.cfg.policy.full == FullPolicy::Fail {
            return Err(SendErrorKind::TooManyInFlight(tx.ledger.len()));
        }
        // A timeout too long to represent (`Duration::MAX`) has no deadline.
        let deadline = Instant::now().checked_add(timeout);
        // No spin: the peer returns buffers when it is done with them, not
        // within microseconds.
        let mut no_spin = SpinBudget::new(Duration::ZERO);
        let mut w = LedgerWait {
            core: self,
            tx,
            fits,
            fail: None,
        };
        let waited = wait_ready(&mut w, &mut no_spin, deadline);
        let fail = w.fail.take();
        match (waited, fail) {
            (_, Some(e)) => Err(e),
            (Waited::Ready, None) => Ok(()),
            (Waited::Gone, None) => Err(SendErrorKind::Disconnected),
            (Waited::TimedOut, None) => {
                self.fault(PeerFault::NotReleasing(tx.ledger.len()));
                Err(SendErrorKind::TooManyInFlight(tx.ledger.len()))
            }
        }
    }

    fn wait_for_space(
        &self,
        tx: &mut TxState,
        need: usize,
        timeout: Duration,
    ) -> Result<(), SendErrorKind> {
        if tx.ring.cached_free() >= need {
            return Ok(());
        }
        match tx.ring.free_slots() {
            Ok(f) if f >= need => {
                tx.spin.record(false);
                return Ok(());
            }
            Ok(_) => {}
            Err(_) => {
                self.corrupt_locked(tx, Area::MessageRing);
                return Err(SendErrorKind::Corrupt);
            }
        }
        if timeout.is_zero() || self.cfg.policy.full == FullPolicy::Fail {
            return Err(SendErrorKind::WouldBlock);
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut spin = tx.spin;
        let mut w = SpaceWait {
            core: self,
            shares: self.shares_cpu_with_peer(),
            tx,
            need,
            fail: None,
        };
        let waited = wait_ready(&mut w, &mut spin, deadline);
        let fail = w.fail;
        tx.spin = spin;
        match (waited, fail) {
            (_, Some(e)) => Err(e),
            (Waited::Ready, None) => Ok(()),
            (Waited::Gone, None) => Err(SendErrorKind::Disconnected),
            (Waited::TimedOut, None) => {
                self.fault(PeerFault::NotConsuming);
                Err(SendErrorKind::TimedOut)
            }
        }
    }

    /// Make sure the peer can resolve `region`: pool regions once per
    /// channel, single-use regions with every transfer.
    fn announce(
        &self,
        tx: &mut TxState,
        buf: &Fbuf,
        timeout: Duration,
    ) -> Result<(), SendErrorKind> {
        let region = buf.region();
        if !region.is_single_use() && !tx.announced.contains_key(&region.id()) {
            // A region we received is about to reach a process its
            // originator does not know of: warn the originator first.
            if let Some(origin) = buf.foreign_sink() {
                if !origin.escaped(region.id(), timeout) {
                    return Err(SendErrorKind::TimedOut);
                }
            }
        }
        self.announce_region(tx, region)
    }

    fn announce_region(&self, tx: &mut TxState, region: &Arc<Region>) -> Result<(), SendErrorKind> {
        let len = region.len() as u64;
        if region.is_single_use() {
            self.send_ctl(tx, Ctl::SingleUse { len }, region)?;
            return Ok(());
        }
        if tx.announced.contains_key(&region.id()) {
            return Ok(());
        }
        if tx.next_slot >= MAX_REGION_SLOTS {
            return Err(SendErrorKind::Os(rustix::io::Errno::NOSPC));
        }
        let slot = tx.next_slot;
        self.send_ctl(tx, Ctl::Region { slot, len }, region)?;
        tx.next_slot += 1;
        tx.announced.insert(region.id(), slot);
        tx.keep.push(region.clone());
        Ok(())
    }

    fn send_ctl(&self, tx: &mut TxState, ctl: Ctl, region: &Region) -> Result<(), SendErrorKind> {
        // The socket has SO_SNDTIMEO set (connect.rs), so this is bounded.
        let fd = region.share_fd().map_err(|e| match e {
            crate::region::RegionError::Os { errno, .. } => SendErrorKind::Os(errno),
            _ => SendErrorKind::Os(rustix::io::Errno::INVAL),
        })?;
        match fdpass::send(&self.sock, &ctl.encode(), &[fd.as_fd()], false) {
            Ok(()) => {
                self.counters.add_shared(st::REGIONS_SENT, 1);
                Ok(())
            }
            Err(rustix::io::Errno::PIPE) | Err(rustix::io::Errno::CONNRESET) => {
                self.mark_gone_locked(tx);
                Err(SendErrorKind::Disconnected)
            }
            Err(e) => Err(SendErrorKind::Os(e)),
        }
    }

    /// Wake the receiver for deferred messages and enforce the hold limit.
    pub(crate) fn flush(&self) -> Result<(), SendErrorKind> {
        let mut tx = lock(&self.tx);
        self.wake_deferred_locked(&mut tx);
        self.expire_locked(&mut tx).map(|_| ())
    }

    /// Enforce the hold limit now (`Channel::expire_holds`).
    pub(crate) fn expire_holds(&self) -> Result<usize, SendErrorKind> {
        let mut tx = lock(&self.tx);
        self.expire_locked(&mut tx)
    }

    /// Announce every current chunk of `pool` now.
    pub(crate) fn share_pool(&self, pool: &Pool) -> Result<(), SendErrorKind> {
        if self.closed.load(LocalOrdering::Acquire) || self.is_gone() {
            return Err(SendErrorKind::Disconnected);
        }
        let mut tx = lock(&self.tx);
        for r in pool.regions() {
            self.announce_region(&mut tx, &r)?;
        }
        Ok(())
    }
}

/// Room for `need` descriptors on the message ring, as the one wait loop
/// (`crate::wait::wait_ready`) sees it: the look is the ring's free slots
/// (and the peer's end), the preparation the space flag in the head word
/// (`spsc::Writer::arm_space`), the sleep that word's futex or, in bell
/// mode, the doorbell. A stack value borrowing the locked send side: no
/// allocation on the send path.
struct SpaceWait<'a> {
    core: &'a Core,
    tx: &'a mut TxState,
    need: usize,
    shares: bool,
    /// Why the wait ended without room (corrupt ring, peer gone, hold
    /// expired); checked before anything else.
    fail: Option<SendErrorKind>,
}

impl Readiness for SpaceWait<'_> {
    fn is_ready(&mut self) -> bool {
        if self.fail.is_some() {
            return true;
        }
        match self.tx.ring.free_slots() {
            Ok(f) if f >= self.need => return true,
            Ok(_) => {}
            Err(_) => {
                self.core.corrupt_locked(self.tx, Area::MessageRing);
                self.fail = Some(SendErrorKind::Corrupt);
                return true;
            }
        }
        if self.core.is_gone() || self.core.peer_closed() {
            self.fail = Some(SendErrorKind::Disconnected);
            return true;
        }
        false
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        if self.is_ready() {
            return None;
        }
        // A receiver we never woke must see what is queued before we sleep.
        self.core.wake_deferred_locked(self.tx);
        match self.tx.ring.arm_space(self.need) {
            Ok(Some(v)) => Some(v),
            Ok(None) => {
                self.tx.ring.disarm_space();
                None
            }
            Err(_) => {
                self.tx.ring.disarm_space();
                self.core.corrupt_locked(self.tx, Area::MessageRing);
                self.fail = Some(SendErrorKind::Corrupt);
                None
            }
        }
    }

    fn sleep(&mut self, armed: u32, slice: Duration) {
        self.core.counters.add_shared(st::SLEEPS, 1);
        let start = Instant::now();
        let rung = self
            .tx
            .ring
            .sleep_armed_space(armed, slice, self.core.own_bell());
        if self.core.expire_locked(self.tx).is_err() {
            self.fail = Some(SendErrorKind::HoldExpired);
            return;
        }
        // A full slice without a wake, or a hung-up doorbell: is the peer
        // still there?
        if rung == Rung::HungUp || Instant::now() >= start + slice {
            self.core.check_peer_locked(self.tx);
        }
    }

    fn max_slice(&self) -> Duration {
        self.core.cfg.liveness_interval
    }

    fn peer_on_this_cpu(&self) -> bool {
        self.shares
    }
}

/// Room in the ledger (the peer returned enough of what it holds), as the
/// one wait loop (`crate::wait::wait_ready`) sees it: the look takes in
/// the notices and applies `fits`; the flag is set by the sleep, which
/// flags, re-checks and sleeps on the notice ring (or the doorbell) in one
/// call (`spsc::Reader::wait_for_data`); every slice ends with the hold
/// limit and a look at the peer.
struct LedgerWait<'a, F> {
    core: &'a Core,
    tx: &'a mut TxState,
    fits: F,
    /// Why the wait ended without room.
    fail: Option<SendErrorKind>,
}

impl<F: Fn(&TxState) -> bool> Readiness for LedgerWait<'_, F> {
    fn is_ready(&mut self) -> bool {
        if self.fail.is_some() {
            return true;
        }
        self.core.drain_locked(self.tx);
        if (self.fits)(self.tx) {
            return true;
        }
        if self.core.is_gone() || self.core.peer_closed() {
            self.fail = Some(SendErrorKind::Disconnected);
            return true;
        }
        false
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        if self.is_ready() {
            return None;
        }
        Some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: Duration) {
        // The receiver must see what we deferred waking it for.
        self.core.wake_deferred_locked(self.tx);
        self.core.counters.add_shared(st::SLEEPS, 1);
        let slept = self.tx.notices.wait_for_data(slice, self.core.own_bell());
        match slept {
            Err(_) => {
                self.core.corrupt_locked(self.tx, Area::NoticeRing);
                self.fail = Some(SendErrorKind::Corrupt);
                return;
            }
            // The doorbell hung up: the peer is gone or going.
            Ok(Rung::HungUp) => {
                self.core.check_peer_locked(self.tx);
            }
            Ok(_) => {}
        }
        if self.core.expire_locked(self.tx).is_err() {
            self.fail = Some(SendErrorKind::HoldExpired);
            return;
        }
        self.core.check_peer_locked(self.tx);
    }

    fn max_slice(&self) -> Duration {
        self.core.cfg.liveness_interval
    }
}
