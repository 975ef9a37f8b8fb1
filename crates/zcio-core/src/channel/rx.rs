//! The receiving side: copy descriptors out of the ring, validate them
//! against regions the peer announced, and hand out `Msg`s whose buffers
//! send a notice back when dropped.

use std::sync::atomic::Ordering as LocalOrdering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zcio_sys::registry::schema::channel as st;

use crate::channel::waitset::Cores;
use crate::wait::{wait_ready, Readiness, Waited};

use crate::bell::Rung;
use crate::buf::{Fbuf, Home, ReleaseSink};
use crate::channel::core::{lock, Core, RxState, MAX_OFFERED_LANES};
use crate::channel::error::{Area, Malformed, RecvFail};
use crate::channel::lane::{LaneError, LaneReceiver, Offered};
use crate::channel::wire::{
    Ctl, Desc, CTL_LEN, MAX_REGION_SLOTS, MAX_SLICES, SINGLE_USE_SAME, SINGLE_USE_SLOT,
};
use crate::msg::{Msg, Slice};
use crate::region::Region;
use crate::sys::fdpass::{self, RecvOutcome};

impl Core {
    /// `timeout == None`: do not wait.
    pub(crate) fn recv(&self, timeout: Option<Duration>) -> Result<Msg, RecvFail> {
        let r = self.recv_once(timeout);
        if let Err(e) = &r {
            self.count_recv_error(e, timeout);
        }
        r
    }

    /// Count a failed receive in the statistics page (a cold path;
    /// `add_shared`: any thread may receive).
    #[cold]
    fn count_recv_error(&self, e: &RecvFail, timeout: Option<Duration>) {
        let index = match (e, timeout) {
            (RecvFail::NotReady, None) => st::RECV_WOULD_BLOCK,
            (RecvFail::NotReady, Some(t)) if t.is_zero() => st::RECV_WOULD_BLOCK,
            (RecvFail::NotReady, Some(_)) => st::RECV_TIMED_OUT,
            (RecvFail::Disconnected, _) => st::RECV_DISCONNECTED,
            _ => return,
        };
        self.counters.add_shared(index, 1);
    }

    /// One receive (`recv` without the error counting).
    fn recv_once(&self, timeout: Option<Duration>) -> Result<Msg, RecvFail> {
        if self.closed.load(LocalOrdering::Acquire) {
            return Err(RecvFail::Disconnected);
        }
        let mut rx = lock(&self.rx);
        match rx.ring.available() {
            Ok(n) if n > 0 => return self.take(&mut rx, n),
            _ => {}
        }
        // About to wait: the sender may be waiting for our notices.
        self.flush_notices();
        let Some(timeout) = timeout else {
            return self.recv_ready(&mut rx);
        };
        let shares = self.shares_cpu_with_peer();
        // A timeout too long to represent (`Duration::MAX`) has no deadline.
        let deadline = Instant::now().checked_add(timeout);
        loop {
            let mut spin = rx.spin;
            let mut w = DataWait {
                core: self,
                rx: &mut rx,
                shares,
                looked: false,
                others: Cores::new(),
                fail: None,
            };
            let waited = wait_ready(&mut w, &mut spin, deadline);
            let fail = w.fail.take();
            drop(w);
            rx.spin = spin;
            match (waited, fail) {
                (_, Some(e)) => return Err(e),
                (Waited::TimedOut, None) => return Err(RecvFail::NotReady),
                (Waited::Gone, None) => return Err(RecvFail::Disconnected),
                (Waited::Ready, None) => match rx.ring.available() {
                    Ok(0) => {}
                    Ok(n) => return self.take(&mut rx, n),
                    Err(_) => {
                        self.corrupt(Area::MessageRing);
                        return Err(RecvFail::Corrupt);
                    }
                },
            }
        }
    }

    /// Non-blocking receive (the ring was just found empty once).
    fn recv_ready(&self, rx: &mut RxState) -> Result<Msg, RecvFail> {
        match rx.ring.available() {
            Ok(0)
                if self.is_gone()
                    || self.bye.load(LocalOrdering::Acquire)
                    || self.peer_closed() =>
            {
                Err(RecvFail::Disconnected)
            }
            Ok(0) => Err(RecvFail::NotReady),
            Ok(n) => self.take(rx, n),
            Err(_) => {
                self.corrupt(Area::MessageRing);
                Err(RecvFail::Corrupt)
            }
        }
    }

    /// Copy one message's descriptors out, free the ring slots, validate.
    fn take(&self, rx: &mut RxState, mut avail: usize) -> Result<Msg, RecvFail> {
        let first = rx.ring.peek(0);
        let count = first.count as usize;
        if count > avail {
            avail = match rx.ring.available_fresh() {
                Ok(n) => n,
                Err(_) => {
                    self.corrupt(Area::MessageRing);
                    return Err(RecvFail::Corrupt);
                }
            };
        }
        if count == 0 || count > MAX_SLICES || count > avail {
            // Framing is broken for this entry: drop just it, keep going.
            if rx.ring.release(1) {
                self.wake_sender(rx);
            }
            self.notice_tokens(&[first]);
            self.counters.add_shared(st::MALFORMED, 1);
            return Err(RecvFail::Malformed(Malformed::BadCount(first.count)));
        }
        let mut descs = std::mem::take(&mut rx.scratch);
        descs.clear();
        descs.extend((0..count).map(|i| rx.ring.peek(i)));
        // Wake the sender only if `release` found its sleeping flag: a
        // flag set after our release came with a read of the new head
        // (see `Writer::arm_space`), so that sender does not sleep on it.
        // (No read-modify-write of the shared head line per message.)
        if rx.ring.release(count) {
            self.wake_sender(rx);
        }
        let res = self.resolve(rx, &descs);
        rx.scratch = descs;
        match res {
            Ok(msg) => {
                // Written only here, under the rx lock.
                self.counters.add(st::RECEIVED_MESSAGES, 1);
                self.counters.add(st::RECEIVED_BYTES, msg.len() as u64);
                Ok(msg)
            }
            Err(e) => {
                self.counters.add_shared(st::MALFORMED, 1);
                Err(RecvFail::Malformed(e))
            }
        }
    }

    fn wake_sender(&self, rx: &mut RxState) {
        // The consumer side's release() already fenced; only wake if the
        // producer said it sleeps for space (and that flag is trusted).
        let RxState { ring, gate, .. } = rx;
        self.gated_wake(gate, || ring.wake_producer(Some(&self.bell)));
    }

    /// Validate the private copies and build the message. On any error every
    /// token of the message is returned to the sender.
    fn resolve(&self, rx: &mut RxState, descs: &[Desc]) -> Result<Msg, Malformed> {
        let sink: Arc<dyn ReleaseSink> = match self.me.upgrade() {
            Some(me) => me,
            None => return Err(Malformed::BadControl),
        };
        // The last slice takes the upgraded reference itself: one atomic
        // increment per message of one slice, not three.
        let mut sink = Some(sink);
        // Inline for the usual one or two slices: no allocation per message.
        let mut slices: smallvec::SmallVec<[Slice; 2]> = smallvec::SmallVec::new();
        let mut last_single: Option<Arc<Region>> = None;
        for (i, d) in descs.iter().enumerate() {
            let spare = self.take_spare(rx);
            let checked = if i > 0 && d.count != 0 {
                Err(Malformed::BadCount(d.count))
            } else {
                self.check_desc(rx, d, &mut last_single)
            };
            let checked = checked.map(|region| match spare {
                // The spare already points at this region: keep it.
                Some(s) if Arc::ptr_eq(&s.region, region) => Home::Spare(s),
                spare => Home::Region(region.clone(), spare),
            });
            match checked {
                Ok(home) => {
                    let own = if i + 1 == descs.len() {
                        sink.take()
                    } else {
                        sink.clone()
                    };
                    let Some(own) = own else {
                        // Unreachable: the last slice is the only taker.
                        drop(slices);
                        self.notice_tokens(&descs[i..]);
                        return Err(Malformed::BadControl);
                    };
                    self.received_one();
                    let buf = Fbuf::received(
                        home,
                        d.offset as usize,
                        d.len as usize,
                        own,
                        d.token,
                        self.trusted.load(LocalOrdering::Relaxed),
                    );
                    let len = buf.len();
                    // In bounds by check_desc; Slice::new re-checks.
                    if let Some(s) = Slice::new(buf, 0, len) {
                        slices.push(s);
                    }
                }
                Err(e) => {
                    // Built slices notify on drop; the rest are returned here.
                    drop(slices);
                    self.notice_tokens(&descs[i..]);
                    return Err(e);
                }
            }
        }
        // Every slice is non-empty (`check_desc` refuses empty ones) and
        // there are at most MAX_SLICES (`take` checked the count).
        Ok(Msg::from_checked(slices))
    }

    /// The region a descriptor points into, if the descriptor is in bounds
    /// (borrowed: the caller clones it only when it needs a reference of
    /// its own).
    fn check_desc<'a>(
        &self,
        rx: &'a mut RxState,
        d: &Desc,
        last_single: &'a mut Option<Arc<Region>>,
    ) -> Result<&'a Arc<Region>, Malformed> {
        if d.len == 0 {
            return Err(Malformed::EmptySlice);
        }
        let region = if d.region == SINGLE_USE_SLOT {
            if rx.single.is_empty() {
                self.poll_control(rx);
            }
            let r = rx
                .single
                .pop_front()
                .flatten()
                .ok_or(Malformed::NoSingleUseRegion)?;
            &*last_single.insert(r)
        } else if d.region == SINGLE_USE_SAME {
            last_single.as_ref().ok_or(Malformed::NoSingleUseRegion)?
        } else {
            let slot = d.region as usize;
            if rx.regions.get(slot).is_none_or(Option::is_none) {
                self.poll_control(rx);
            }
            rx.regions
                .get(slot)
                .and_then(Option::as_ref)
                .ok_or(Malformed::UnknownRegion(d.region))?
        };
        let rl = region.len() as u64;
        match d.offset.checked_add(d.len) {
            Some(end) if end <= rl => Ok(region),
            _ => Err(Malformed::OutOfBounds {
                offset: d.offset,
                len: d.len,
                region_len: rl,
            }),
        }
    }

    /// Return the tokens of rejected descriptors to the sender.
    fn notice_tokens(&self, descs: &[Desc]) {
        for d in descs {
            self.return_token(d.token);
        }
    }

    /// The next lane the peer offered, waiting up to `timeout` for its
    /// control record (polling the socket, never holding the receive lock
    /// while asleep).
    pub(crate) fn accept_lane(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<LaneReceiver, LaneError> {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if self.closed.load(LocalOrdering::Acquire) {
                return Err(LaneError::Disconnected);
            }
            {
                let mut rx = lock(&self.rx);
                self.poll_control(&mut rx);
                if let Some(o) = rx.lanes.pop_front() {
                    return Ok(LaneReceiver::new(self, o));
                }
            }
            if self.is_gone() || self.bye.load(LocalOrdering::Acquire) || self.peer_closed() {
                return Err(LaneError::Disconnected);
            }
            let now = Instant::now();
            let left = match deadline {
                Some(d) if now >= d => {
                    return Err(if timeout.is_zero() {
                        LaneError::WouldBlock
                    } else {
                        LaneError::TimedOut
                    })
                }
                Some(d) => d - now,
                None => Duration::MAX,
            };
            // Short slices: another thread's receive may take the offer
            // off the socket into the queue while this one sleeps.
            let slice = left.min(Duration::from_millis(20));
            if !crate::sys::peer::wait_readable(&self.sock, slice) {
                self.check_peer();
            }
        }
    }

    /// Read every queued control record (non-blocking): regions, Bye.
    pub(crate) fn poll_control(&self, rx: &mut RxState) {
        let mut buf = [0u8; CTL_LEN + 1];
        loop {
            let rec = match fdpass::recv(&self.sock, &mut buf, true) {
                Ok(RecvOutcome::Record(r)) => r,
                Ok(RecvOutcome::Empty) => return,
                Ok(RecvOutcome::HangUp) => {
                    // The peer's end is closed for good: no more messages,
                    // no more notices. Release what it held.
                    self.bye.store(true, LocalOrdering::Release);
                    self.mark_gone();
                    return;
                }
                Err(_) => {
                    self.counters.add_shared(st::MALFORMED, 1);
                    continue;
                }
            };
            let ctl = Ctl::decode(&buf[..rec.len]);
            let mut fds = rec.fds.into_iter();
            match (ctl, fds.next(), fds.next()) {
                (Some(Ctl::Region { len, .. } | Ctl::SingleUse { len }), Some(_fd), None)
                    if len > self.cfg.max_region_len =>
                {
                    // Too large for this channel's policy: refused unmapped.
                    self.counters.add_shared(st::MALFORMED, 1);
                    if matches!(ctl, Some(Ctl::SingleUse { .. })) {
                        rx.single.push_back(None);
                    }
                }
                (Some(Ctl::Region { slot, len }), Some(fd), None) if slot < MAX_REGION_SLOTS => {
                    match Region::attach(fd, len, self.cfg.populate) {
                        Ok(r) => {
                            let slot = slot as usize;
                            if rx.regions.len() <= slot {
                                rx.regions.resize(slot + 1, None);
                            }
                            let r = Arc::new(r);
                            crate::channel::core::lock(&self.origin_slots)
                                .insert(r.id(), (slot as u32, false));
                            rx.regions[slot] = Some(r);
                            self.counters.add_shared(st::REGIONS_RECEIVED, 1);
                        }
                        Err(_) => self.counters.add_shared(st::MALFORMED, 1),
                    }
                }
                (Some(Ctl::SingleUse { .. }), Some(_fd), None)
                    if rx.single.len() >= 2 * rx.ring.capacity() =>
                {
                    // An honest sender has at most a ring's worth of
                    // descriptors (plus the message being taken) ahead of
                    // its single-use regions; twice that is a flood.
                    // Dropping one record would misalign the FIFO, so the
                    // channel is closed instead (the fd is closed here).
                    self.counters.add_shared(st::MALFORMED, 1);
                    self.bye.store(true, LocalOrdering::Release);
                    self.mark_gone();
                    return;
                }
                (Some(Ctl::SingleUse { len }), Some(fd), None) => {
                    match Region::attach(fd, len, self.cfg.populate) {
                        Ok(mut r) => {
                            r.mark_single_use();
                            rx.single.push_back(Some(Arc::new(r)));
                            self.counters.add_shared(st::REGIONS_RECEIVED, 1);
                        }
                        Err(_) => {
                            // Keep the FIFO aligned with the descriptors: the
                            // descriptor naming this region finds `None`.
                            rx.single.push_back(None);
                            self.counters.add_shared(st::MALFORMED, 1);
                        }
                    }
                }
                (
                    Some(Ctl::Lane {
                        slots,
                        slot_size,
                        seg_len,
                    }),
                    Some(seg_fd),
                    Some(data_fd),
                ) => {
                    let offered = (rx.lanes.len() < MAX_OFFERED_LANES)
                        .then(|| {
                            Offered::attach(
                                slots,
                                slot_size,
                                seg_len,
                                seg_fd,
                                data_fd,
                                self.cfg.max_region_len,
                            )
                        })
                        .flatten();
                    match offered {
                        Some(o) => rx.lanes.push_back(o),
                        None => self.counters.add_shared(st::MALFORMED, 1),
                    }
                }
                (Some(Ctl::Bye), None, None) => self.bye.store(true, LocalOrdering::Release),
                _ => self.counters.add_shared(st::MALFORMED, 1),
            }
        }
    }
}

/// A message on the ring this end consumes, as the one wait loop
/// (`crate::wait::wait_ready`) sees it. The look is the ring's entries (and
/// the peer's end: messages published before a hang-up still count). The
/// preparation takes in and passes on every channel's notices and refuses
/// a corrupt tail; the flag itself is set by the sleep, which flags,
/// re-checks (validating the tail it reads) and sleeps in one call
/// (`spsc::Reader::wait_for_data`, or `waitset::sleep_any` over this ring
/// and the notice rings of every channel whose peer holds our buffers).
/// A stack value borrowing the locked receive side: no allocation on the
/// receive path beyond the waitset's own.
struct DataWait<'a> {
    core: &'a Core,
    rx: &'a mut RxState,
    shares: bool,
    /// Whether a look was taken already (a spin step after it settles).
    looked: bool,
    /// The channels to sleep on as well, from the last preparation.
    others: Cores,
    /// Why the wait ended without a message.
    fail: Option<RecvFail>,
}

impl DataWait<'_> {
    /// The look, without settling.
    fn look(&mut self) -> bool {
        if self.fail.is_some() {
            return true;
        }
        match self.rx.ring.available() {
            Ok(0) => {}
            Ok(_) => return true,
            Err(_) => {
                self.core.corrupt(Area::MessageRing);
                self.fail = Some(RecvFail::Corrupt);
                return true;
            }
        }
        let c = self.core;
        if c.is_gone() || c.bye.load(LocalOrdering::Acquire) || c.peer_closed() {
            // Re-check: messages published before the hang-up still count.
            if self.rx.ring.available().unwrap_or(0) == 0 {
                self.fail = Some(RecvFail::Disconnected);
            }
            return true;
        }
        false
    }
}

impl Readiness for DataWait<'_> {
    fn is_ready(&mut self) -> bool {
        // The sender shares our CPU, so each spin step yielded it: a
        // forwarder passes on, before it polls again, the notices its
        // downstream returned meanwhile — its upstream (which runs while
        // we yield) may be waiting for exactly those buffers.
        if self.shares && self.looked {
            crate::channel::waitset::settle(self.core);
        }
        self.looked = true;
        self.look()
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        if self.look() {
            return None;
        }
        // Take in and pass on every channel's notices, then sleep until
        // this ring or a notice ring of a channel whose peer holds our
        // buffers has something (a forwarder must keep releasing upstream
        // while it waits for input).
        self.others = crate::channel::waitset::settle(self.core);
        // The sleep goes through the tail word: refuse a corrupt one now
        // (a sleep handle would take it for pending data and never sleep).
        if self.rx.ring.check_tail().is_err() {
            self.core.corrupt(Area::MessageRing);
            self.fail = Some(RecvFail::Corrupt);
            return None;
        }
        Some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: Duration) {
        self.core.counters.add_shared(st::SLEEPS, 1);
        let start = Instant::now();
        let bell = self.core.own_bell();
        let others = std::mem::take(&mut self.others);
        let rung = if others.is_empty() || bell.is_some() {
            // In bell mode only our own doorbell wakes us: the other
            // channels' peers wake futexes (see waitset).
            match self.rx.ring.wait_for_data(slice, bell) {
                Ok(r) => r,
                Err(_) => {
                    self.core.corrupt(Area::MessageRing);
                    self.fail = Some(RecvFail::Corrupt);
                    return;
                }
            }
        } else {
            crate::channel::waitset::sleep_any(self.core.msg_sleep(), &others, slice);
            Rung::Rang
        };
        if rung == Rung::HungUp || Instant::now() >= start + slice {
            // A full slice without a wake: is the peer still there?
            self.core.poll_control(self.rx);
            self.core.check_peer();
        }
    }

    fn max_slice(&self) -> Duration {
        self.core.liveness_slice()
    }

    fn peer_on_this_cpu(&self) -> bool {
        self.shares
    }
}
