//! The receiving end of a lane: messages are read in place from the
//! sender's slots (through [`View`]: the sender keeps its writable mapping)
//! and given back with a notice when the [`LaneMsg`] is dropped.
//!
//! Owned by one thread (`&mut self`): no lock, no reference count and no
//! allocation per message. Every descriptor is copied out of the ring and
//! checked against the slot count and slot size before it is used.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::channel::core::Core;
use crate::channel::lane::error::LaneError;
use crate::channel::lane::offered::Offered;
use crate::channel::lane::segment::LaneSegment;
use crate::channel::lane::wire::{
    LaneDesc, LaneLayout, LaneNotice, RECEIVER_CLOSED, SENDER_CLOSED,
};
use crate::channel::lane::LaneStats;
use crate::channel::notify::WakeGate;
use crate::channel::registered;
use crate::channel::spsc::{Reader, Writer};
use crate::region::Region;
use crate::view::View;
use crate::wait::{wait_ready, Readiness, SpinBudget, Waited};
use zcio_sys::registry::schema::lane as l;
use zcio_sys::registry::StatsPage;

/// The receiving end of a lane (see
/// [`Channel::accept_lane`](crate::Channel::accept_lane)).
pub struct LaneReceiver {
    core: Arc<Core>,
    seg: LaneSegment,
    data: Region,
    layout: LaneLayout,
    ring: Reader<LaneDesc>,
    notices: Writer<LaneNotice>,
    gate: WakeGate,
    spin: SpinBudget,
    broken: bool,
    /// Counters kept only here (notices, malformed, dropped notices).
    stats: LaneStats,
    /// The live counters (`zcio_sys::registry::schema::lane`), in this
    /// lane's registry entry (named as its channel end) or a local page;
    /// this end's one thread is their only writer (`add`).
    page: StatsPage,
}

impl std::fmt::Debug for LaneReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneReceiver")
            .field("slots", &self.layout.slots)
            .field("slot_size", &self.layout.slot_size)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl LaneReceiver {
    pub(crate) fn new(core: &Arc<Core>, o: Offered) -> Self {
        let Offered {
            seg,
            data,
            layout,
            ino,
        } = o;
        // `Offered::attach` checked the header against `layout` and that
        // the mapping is `total_len` bytes.
        // SAFETY: as argued just above.
        let seg = unsafe { LaneSegment::new(seg, layout) };
        let ((mh, me), (nh, ne)) = (seg.msg_ring(), seg.notice_ring());
        // Both rings lie inside the segment with `ring_entries` slots each;
        // `self` holds the segment, which outlives the ring ends.
        // SAFETY: as argued just above.
        let (ring, notices) = unsafe {
            (
                Reader::new(mh, me, layout.ring_entries),
                Writer::new(nh, ne, layout.ring_entries),
            )
        };
        Self {
            core: core.clone(),
            seg,
            data,
            layout,
            ring,
            notices,
            gate: WakeGate::default(),
            spin: SpinBudget::new(core.cfg.policy.spin),
            broken: false,
            stats: LaneStats::default(),
            page: registered::lane(core.registered_as.as_ref(), core.peer.pid, ino),
        }
    }

    /// Bytes a slot holds: the longest message this lane carries.
    pub fn slot_size(&self) -> usize {
        self.layout.slot_size as usize
    }

    /// Slots of the lane.
    pub fn slots(&self) -> u32 {
        self.layout.slots
    }

    /// Counters of this end.
    pub fn stats(&self) -> LaneStats {
        self.stats.with_page(&self.page, false)
    }

    /// The next message, waiting up to the channel's `recv_timeout`.
    pub fn recv(&mut self) -> Result<LaneMsg<'_>, LaneError> {
        let t = self.core.cfg.recv_timeout;
        self.recv_timeout(t)
    }

    /// The next message, or `WouldBlock` at once.
    pub fn try_recv(&mut self) -> Result<LaneMsg<'_>, LaneError> {
        self.recv_timeout(Duration::ZERO)
    }

    /// The next message, waiting up to `timeout` (spinning briefly, then
    /// sleeping on the ring).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<LaneMsg<'_>, LaneError> {
        let (slot, len) = match self.next(timeout) {
            Ok(m) => m,
            Err(e) => {
                self.count_error(&e);
                return Err(e);
            }
        };
        Ok(LaneMsg {
            rx: self,
            slot,
            len,
        })
    }

    /// Count a refused receive in the statistics page.
    #[cold]
    fn count_error(&self, e: &LaneError) {
        let index = match e {
            LaneError::WouldBlock => l::RECV_WOULD_BLOCK,
            LaneError::TimedOut => l::RECV_TIMED_OUT,
            LaneError::Disconnected => l::RECV_DISCONNECTED,
            _ => return,
        };
        self.page.add(index, 1);
    }

    /// Not an API: publish a notice for `slot` as a hostile receiver would
    /// (zcio's own hostile-peer tests).
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    pub fn forge_notice(&mut self, slot: u32) {
        self.give_back(slot);
    }

    /// Not an API: the control segment's address and length (zcio's own
    /// hostile-peer tests scribble on it).
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    pub fn segment_for_tests(&self) -> (*mut u8, usize) {
        self.seg.raw()
    }

    /// The sender dropped its end, or the channel is closed or gone.
    fn ended(&self) -> bool {
        self.seg.closed_by(SENDER_CLOSED) || self.core.ended()
    }

    /// Take the next descriptor off the ring, if there is one, and check it.
    fn take(&mut self) -> Result<Option<(u32, u32)>, LaneError> {
        match self.ring.available() {
            Ok(0) => Ok(None),
            Ok(_) => {
                // Copied out of the shared ring; only the copy is checked
                // and used.
                let d = self.ring.peek(0);
                self.ring.release(1);
                if d.slot >= self.layout.slots || u64::from(d.len) > self.layout.slot_size {
                    self.stats.malformed += 1;
                    return Err(LaneError::Malformed {
                        slot: d.slot,
                        len: d.len,
                    });
                }
                self.page.add(l::RECEIVED_MESSAGES, 1);
                self.page.add(l::RECEIVED_BYTES, u64::from(d.len));
                Ok(Some((d.slot, d.len)))
            }
            Err(_) => {
                self.broken = true;
                Err(LaneError::Corrupt)
            }
        }
    }

    fn next(&mut self, timeout: Duration) -> Result<(u32, u32), LaneError> {
        if self.broken {
            return Err(LaneError::Corrupt);
        }
        if let Some(m) = self.take()? {
            return Ok(m);
        }
        if timeout.is_zero() {
            return match self.ended() {
                // Re-check: messages published before the end still count.
                true => self.take()?.ok_or(LaneError::Disconnected),
                false => Err(LaneError::WouldBlock),
            };
        }
        // A timeout too long to represent (`Duration::MAX`) has no deadline.
        let deadline = Instant::now().checked_add(timeout);
        let mut spin = self.spin;
        let mut w = MsgWait {
            shares: self.core.shares_cpu_with_peer(),
            lane: self,
            got: None,
            fail: None,
        };
        let waited = wait_ready(&mut w, &mut spin, deadline);
        let (got, fail) = (w.got.take(), w.fail.take());
        self.spin = spin;
        match (got, fail, waited) {
            (Some(m), _, _) => Ok(m),
            (None, Some(e), _) => Err(e),
            (None, None, Waited::Gone) => Err(LaneError::Disconnected),
            (None, None, _) => Err(LaneError::TimedOut),
        }
    }

    /// Tell the sender `slot` is free again.
    fn give_back(&mut self, slot: u32) {
        if self.broken {
            return;
        }
        // An honest sender never has more messages in flight than the
        // ring has entries, so there is room; a sender that keeps naming
        // slots it never got back fills it, and its notices are dropped.
        if self.notices.cached_free() == 0 {
            match self.notices.free_slots() {
                Ok(0) => {
                    self.stats.notices_dropped += 1;
                    return;
                }
                Ok(_) => {}
                Err(_) => {
                    self.broken = true;
                    return;
                }
            }
        }
        let mut pending = 0;
        self.notices
            .write(&[LaneNotice { slot, reserved: 0 }], &mut pending);
        self.stats.notices += 1;
        if self.notices.publish(pending) {
            self.page.add(l::WAKES, 1);
            let LaneReceiver {
                core,
                gate,
                notices,
                ..
            } = self;
            core.gated_wake(gate, || notices.wake_consumer(Some(&core.bell)));
        }
    }
}

impl Drop for LaneReceiver {
    fn drop(&mut self) {
        self.seg.close(RECEIVER_CLOSED);
        // A sender asleep waiting for a slot sees the end at once.
        let _ = self.notices.wake_consumer(Some(&self.core.bell));
    }
}

/// A message read in place from the sender's slot. Dropping it gives the
/// slot back (one notice, no system call unless the sender sleeps).
pub struct LaneMsg<'a> {
    rx: &'a mut LaneReceiver,
    slot: u32,
    len: u32,
}

impl std::fmt::Debug for LaneMsg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneMsg")
            .field("slot", &self.slot)
            .field("len", &self.len)
            .finish()
    }
}

impl LaneMsg<'_> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The lane this message came on (its size and counters).
    pub fn lane(&self) -> &LaneReceiver {
        self.rx
    }

    /// The bytes, in the sender's slot. The sender keeps its writable
    /// mapping, so they are read through [`View`] (copy out what must not
    /// change under you).
    pub fn view(&self) -> View<'_> {
        let off = self.rx.layout.slot_offset(self.slot);
        // [off, off + len) lies inside the mapped data region: slot < slots
        // and len <= slot_size were checked on the private copy of the
        // descriptor, stride >= slot_size, data.len() >= slots × stride
        // (`Offered::attach`). The region stays mapped while `self` borrows
        // the receiver. The sender may write the bytes: not immutable.
        // SAFETY: as argued just above.
        unsafe { View::new(self.rx.data.base().add(off), self.len as usize, false) }
    }

    /// Copy `dst.len()` bytes (or fewer, at the end) from offset `off`;
    /// returns how many were copied.
    pub fn read_at(&self, off: usize, dst: &mut [u8]) -> usize {
        self.view().read_at(off, dst)
    }

    /// A private copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.view().to_vec()
    }
}

impl Drop for LaneMsg<'_> {
    fn drop(&mut self) {
        self.rx.give_back(self.slot);
    }
}

/// The next message of the lane, as the one wait loop
/// (`crate::wait::wait_ready`) sees it: the look takes it (kept in `got`),
/// or sees the lane's end; the preparation refuses a corrupt tail (it
/// would look like pending data and never sleep); the flag is set by the
/// sleep, which flags, re-checks and sleeps on the ring in one call
/// (`spsc::Reader::wait_for_data`).
struct MsgWait<'a> {
    lane: &'a mut LaneReceiver,
    shares: bool,
    got: Option<(u32, u32)>,
    /// Why the wait ended without a message.
    fail: Option<LaneError>,
}

impl Readiness for MsgWait<'_> {
    fn is_ready(&mut self) -> bool {
        if self.got.is_some() || self.fail.is_some() {
            return true;
        }
        match self.lane.take() {
            Ok(Some(m)) => self.got = Some(m),
            Ok(None) if self.lane.ended() => {
                // Re-check: messages published before the end still count.
                match self.lane.take() {
                    Ok(Some(m)) => self.got = Some(m),
                    Ok(None) => self.fail = Some(LaneError::Disconnected),
                    Err(e) => self.fail = Some(e),
                }
            }
            Ok(None) => return false,
            Err(e) => self.fail = Some(e),
        }
        true
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        if self.is_ready() {
            return None;
        }
        if self.lane.ring.check_tail().is_err() {
            self.lane.broken = true;
            self.fail = Some(LaneError::Corrupt);
            return None;
        }
        Some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: Duration) {
        self.lane.page.add(l::SLEEPS, 1);
        let start = Instant::now();
        if self.lane.ring.wait_for_data(slice, None).is_err() {
            self.lane.broken = true;
            self.fail = Some(LaneError::Corrupt);
            return;
        }
        if Instant::now() >= start + slice {
            self.lane.core.check_peer();
        }
    }

    fn max_slice(&self) -> Duration {
        self.lane.core.liveness_slice()
    }

    fn peer_on_this_cpu(&self) -> bool {
        self.shares
    }
}
