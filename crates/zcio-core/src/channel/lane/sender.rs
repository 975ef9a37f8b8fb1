//! The sending end of a lane: fixed-size slots in a region only this end
//! can write, lent one at a time (`loan` → fill → `send`, a refused send
//! giving the loan back in a [`LaneSendError`]), and taken back when the
//! receiver's notice says it dropped the message.
//!
//! Everything here is owned by one thread (`&mut self`): no lock, no
//! reference count and no allocation per message. A slot's state is
//! process-local; the receiver can only move a slot from *in flight* back
//! to *free* (a notice for any other slot is counted and ignored).

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use crate::channel::core::Core;
use crate::channel::lane::error::LaneError;
use crate::channel::lane::segment::LaneSegment;
use crate::channel::lane::wire::{
    LaneDesc, LaneLayout, LaneNotice, RECEIVER_CLOSED, SENDER_CLOSED,
};
use crate::channel::lane::{LaneConfig, LaneStats};
use crate::channel::notify::WakeGate;
use crate::channel::registered;
use crate::channel::spsc::{Reader, Writer};
use crate::channel::wire::Ctl;
use crate::region::Region;
use crate::sys::fdpass;
use crate::sys::mmap::Mapping;
use crate::wait::{wait_ready, Readiness, SpinBudget, Waited};
use zcio_sys::registry::schema::lane as l;
use zcio_sys::registry::StatsPage;

/// Where a slot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    /// On the free list.
    Free,
    /// Lent to a [`Loan`] of this process.
    Loaned,
    /// Sent; the receiver holds it until its notice comes back.
    InFlight,
}

/// The sending end of a lane (see [`Channel::open_lane`](crate::Channel::open_lane)).
pub struct LaneSender {
    core: Arc<Core>,
    /// The control segment: header and both rings (the ring ends point
    /// into it).
    seg: LaneSegment,
    /// The slots, writable here only (the peer got a read-only fd).
    data: Region,
    layout: LaneLayout,
    ring: Writer<LaneDesc>,
    notices: Reader<LaneNotice>,
    state: Vec<SlotState>,
    /// Free slots, most recently returned last (handed out first: warm).
    free: Vec<u32>,
    gate: WakeGate,
    spin: SpinBudget,
    broken: bool,
    /// Counters kept only here (notices, bad notices).
    stats: LaneStats,
    /// Slots in flight now.
    in_flight: u32,
    /// The live counters (`zcio_sys::registry::schema::lane`), in this
    /// lane's registry entry (named as its channel end) or a local page;
    /// this end's one thread is their only writer (`add`).
    page: StatsPage,
}

impl std::fmt::Debug for LaneSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneSender")
            .field("slots", &self.layout.slots)
            .field("slot_size", &self.layout.slot_size)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl LaneSender {
    /// Create the lane's segment and slots and offer them to the peer.
    pub(crate) fn open(core: &Arc<Core>, cfg: &LaneConfig) -> Result<Self, LaneError> {
        let layout = LaneLayout::new(cfg.slots, cfg.slot_size as u64)
            .filter(|l| l.data_len as u64 <= core.cfg.max_region_len)
            .ok_or(LaneError::InvalidConfig)?;
        if core.ended() {
            return Err(LaneError::Disconnected);
        }
        let os = |op| move |errno| LaneError::Os { op, errno };
        let seg_fd = crate::sys::memfd::create_sized("zcio-lane", layout.total_len as u64)
            .map_err(os("memfd_create"))?;
        let seg = Mapping::map(
            &seg_fd,
            layout.total_len,
            crate::sys::mmap::Access::ReadWrite,
            true,
        )
        .map_err(os("mmap lane segment"))?;
        // The mapping is page-aligned, at least one page long (so it holds
        // the 64-byte header) and not shared with anyone yet.
        // SAFETY: as argued just above.
        unsafe {
            seg.as_ptr()
                .cast::<super::wire::LaneHeader>()
                .write(layout.header())
        };
        let data =
            Region::create("zcio-lane-data", layout.data_len, true).map_err(|e| LaneError::Os {
                op: "create lane slots",
                errno: e.errno().unwrap_or(rustix::io::Errno::NOMEM),
            })?;
        let data_fd = data.share_fd().map_err(|e| LaneError::Os {
            op: "reopen lane slots read-only",
            errno: e.errno().unwrap_or(rustix::io::Errno::INVAL),
        })?;
        let ctl = Ctl::Lane {
            slots: layout.slots,
            slot_size: layout.slot_size,
            seg_len: layout.total_len as u64,
        };
        // The socket has SO_SNDTIMEO set (connect.rs), so this is bounded.
        fdpass::send(&core.sock, &ctl.encode(), &[seg_fd.as_fd(), data_fd], false).map_err(
            |e| match e {
                rustix::io::Errno::PIPE | rustix::io::Errno::CONNRESET => LaneError::Disconnected,
                errno => LaneError::Os {
                    op: "pass the lane",
                    errno,
                },
            },
        )?;
        // `seg` maps `total_len` bytes laid out per `layout`: we wrote the
        // header, the rings are the fresh zeroed memfd.
        // SAFETY: as argued just above.
        let seg = unsafe { LaneSegment::new(seg, layout) };
        let ((mh, me), (nh, ne)) = (seg.msg_ring(), seg.notice_ring());
        // Both rings lie inside the segment with `ring_entries` slots each;
        // `self` holds the segment, which outlives the ring ends.
        // SAFETY: as argued just above.
        let (ring, notices) = unsafe {
            (
                Writer::new(mh, me, layout.ring_entries),
                Reader::new(nh, ne, layout.ring_entries),
            )
        };
        Ok(Self {
            core: core.clone(),
            seg,
            data,
            layout,
            ring,
            notices,
            state: vec![SlotState::Free; layout.slots as usize],
            // Slot 0 handed out first.
            free: (0..layout.slots).rev().collect(),
            gate: WakeGate::default(),
            spin: SpinBudget::new(core.cfg.policy.spin),
            broken: false,
            stats: LaneStats::default(),
            in_flight: 0,
            page: registered::lane(
                core.registered_as.as_ref(),
                core.peer.pid,
                crate::segment::inode(&seg_fd),
            ),
        })
    }

    /// Bytes a slot holds: the longest message this lane carries.
    pub fn slot_size(&self) -> usize {
        self.layout.slot_size as usize
    }

    /// Slots of the lane: how many messages may be lent or in flight.
    pub fn slots(&self) -> u32 {
        self.layout.slots
    }

    /// Counters of this end.
    pub fn stats(&self) -> LaneStats {
        self.stats.with_page(&self.page, true)
    }

    /// A free slot to fill, waiting up to the channel's `send_timeout` for
    /// the receiver to release one.
    pub fn loan(&mut self) -> Result<Loan<'_>, LaneError> {
        let t = self.core.cfg.send_timeout;
        self.loan_timeout(t)
    }

    /// A free slot to fill, or `WouldBlock` at once.
    pub fn try_loan(&mut self) -> Result<Loan<'_>, LaneError> {
        self.loan_timeout(Duration::ZERO)
    }

    /// A free slot to fill, waiting up to `timeout` for the receiver to
    /// release one (spinning briefly, then sleeping on the notice ring).
    pub fn loan_timeout(&mut self, timeout: Duration) -> Result<Loan<'_>, LaneError> {
        let slot = match self.take_slot(timeout) {
            Ok(slot) => slot,
            Err(e) => {
                self.count_error(&e);
                return Err(e);
            }
        };
        Ok(Loan { tx: self, slot })
    }

    /// Count a refused loan or send in the statistics page.
    #[cold]
    fn count_error(&self, e: &LaneError) {
        let index = match e {
            LaneError::WouldBlock => l::SEND_WOULD_BLOCK,
            LaneError::TimedOut => l::SEND_TIMED_OUT,
            LaneError::Disconnected => l::SEND_DISCONNECTED,
            _ => return,
        };
        self.page.add(index, 1);
    }

    /// Copy `bytes` into a slot and send it (waiting for a slot as
    /// [`LaneSender::loan`] does).
    pub fn send_copy(&mut self, bytes: &[u8]) -> Result<(), LaneError> {
        if bytes.len() > self.slot_size() {
            return Err(LaneError::TooLarge {
                len: bytes.len(),
                max: self.slot_size(),
            });
        }
        let mut loan = self.loan()?;
        loan.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
        loan.send(bytes.len()).map_err(|e| *e.error())
    }

    /// Not an API: publish a descriptor as a hostile sender would (zcio's
    /// own hostile-peer tests).
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    /// (Dropped when the ring has no room: overwriting entries the
    /// receiver has not read is what a scribble on the segment does.)
    pub fn forge_desc(&mut self, slot: u32, len: u32) {
        if !matches!(self.ring.free_slots(), Ok(n) if n > 0) {
            return;
        }
        let mut pending = 0;
        self.ring.write(&[LaneDesc { slot, len }], &mut pending);
        if self.ring.publish(pending) {
            let _ = self.ring.wake_consumer(Some(&self.core.bell));
        }
    }

    /// Not an API: the control segment's address and length (zcio's own
    /// hostile-peer tests scribble on it).
    #[cfg(any(test, feature = "internals"))]
    #[doc(hidden)]
    pub fn segment_for_tests(&self) -> (*mut u8, usize) {
        self.seg.raw()
    }

    /// The receiver dropped its end, or the channel is closed or gone.
    fn ended(&self) -> bool {
        self.seg.closed_by(RECEIVER_CLOSED) || self.core.ended()
    }

    /// Take in the receiver's notices: every valid one frees its slot.
    fn drain(&mut self) -> Result<(), LaneError> {
        loop {
            let n = match self.notices.available() {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(_) => {
                    self.broken = true;
                    return Err(LaneError::Corrupt);
                }
            };
            for i in 0..n {
                // Copied out of the shared ring by `peek`; validated here.
                let slot = self.notices.peek(i).slot;
                match self.state.get_mut(slot as usize) {
                    Some(s @ SlotState::InFlight) => {
                        *s = SlotState::Free;
                        self.free.push(slot);
                        self.stats.notices += 1;
                        self.in_flight -= 1;
                        self.page.set(l::IN_FLIGHT_BUFFERS, self.in_flight.into());
                    }
                    _ => self.stats.bad_notices += 1,
                }
            }
            self.notices.release(n);
        }
    }

    fn take_slot(&mut self, timeout: Duration) -> Result<u32, LaneError> {
        if self.broken {
            return Err(LaneError::Corrupt);
        }
        // Take in what came back first (one load of the next notice slot
        // when nothing did), so the slot freed last is lent again: the
        // slots in use stay few and warm in the caches.
        self.drain()?;
        if let Some(slot) = self.free.pop() {
            self.state[slot as usize] = SlotState::Loaned;
            return Ok(slot);
        }
        if self.ended() {
            return Err(LaneError::Disconnected);
        }
        if timeout.is_zero() {
            return Err(LaneError::WouldBlock);
        }
        // A timeout too long to represent (`Duration::MAX`) has no deadline.
        let deadline = std::time::Instant::now().checked_add(timeout);
        let mut spin = self.spin;
        let mut w = SlotWait {
            shares: self.core.shares_cpu_with_peer(),
            lane: self,
            fail: None,
        };
        let waited = wait_ready(&mut w, &mut spin, deadline);
        let fail = w.fail.take();
        self.spin = spin;
        if let Some(e) = fail {
            return Err(e);
        }
        match (waited, self.free.pop()) {
            (_, Some(slot)) => {
                self.state[slot as usize] = SlotState::Loaned;
                Ok(slot)
            }
            (Waited::Gone, None) => Err(LaneError::Disconnected),
            (_, None) => Err(LaneError::TimedOut),
        }
    }

    /// Publish `slot` (filled with `len` bytes) to the receiver.
    fn publish(&mut self, slot: u32, len: usize) -> Result<(), LaneError> {
        if len > self.slot_size() {
            return Err(LaneError::TooLarge {
                len,
                max: self.slot_size(),
            });
        }
        if self.broken {
            return Err(LaneError::Corrupt);
        }
        if self.ended() {
            return Err(LaneError::Disconnected);
        }
        // Never more messages on the ring than slots in flight, and the
        // ring has at least as many entries as there are slots: an honest
        // receiver always left room. One that frees slots by notice without
        // taking their messages off the ring has none.
        if self.ring.cached_free() == 0 {
            match self.ring.free_slots() {
                Ok(0) => return Err(LaneError::WouldBlock),
                Ok(_) => {}
                Err(_) => {
                    self.broken = true;
                    return Err(LaneError::Corrupt);
                }
            }
        }
        self.core.publish_cpu();
        let mut pending = 0;
        // len <= slot_size <= MAX_SLOT_SIZE < 2^32.
        let desc = LaneDesc {
            slot,
            len: len as u32,
        };
        self.ring.write(&[desc], &mut pending);
        let sleeping = self.ring.publish(pending);
        self.state[slot as usize] = SlotState::InFlight;
        self.in_flight += 1;
        self.page.add(l::SENT_MESSAGES, 1);
        self.page.add(l::SENT_BYTES, len as u64);
        self.page.set(l::IN_FLIGHT_BUFFERS, self.in_flight.into());
        if sleeping {
            self.page.add(l::WAKES, 1);
            let LaneSender {
                core, gate, ring, ..
            } = self;
            core.gated_wake(gate, || ring.wake_consumer(Some(&core.bell)));
        }
        Ok(())
    }
}

impl Drop for LaneSender {
    fn drop(&mut self) {
        self.seg.close(SENDER_CLOSED);
        // A receiver asleep on the message ring sees the end at once.
        let _ = self.ring.wake_consumer(Some(&self.core.bell));
    }
}

/// A slot lent for filling (reserve → fill → [`Loan::send`]). Dropping it
/// unsent gives the slot back.
pub struct Loan<'a> {
    tx: &'a mut LaneSender,
    slot: u32,
}

impl std::fmt::Debug for Loan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loan").field("slot", &self.slot).finish()
    }
}

impl<'a> Loan<'a> {
    /// The whole slot, to fill: [`LaneSender::slot_size`] bytes. It holds
    /// what this slot carried last (never uninitialised memory); only the
    /// first `len` bytes given to [`Loan::send`] reach the receiver.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let off = self.tx.layout.slot_offset(self.slot);
        let len = self.tx.slot_size();
        // The slot [off, off + len) lies inside the data region
        // (slot < slots, stride >= slot_size, data_len >= slots × stride),
        // which this process created and maps read-write; the peer holds
        // only a read-only fd, so no one else writes it. The slot is
        // `Loaned` to this loan alone (the state machine hands a slot to one
        // loan and takes it back only when the loan is sent or dropped), and
        // the borrow of `self` keeps the region mapped.
        // SAFETY: as argued just above.
        unsafe { std::slice::from_raw_parts_mut(self.tx.data.base().add(off), len) }
    }

    /// Bytes the slot holds.
    pub fn capacity(&self) -> usize {
        self.tx.slot_size()
    }

    /// The lane this loan is from (its size and counters).
    pub fn lane(&self) -> &LaneSender {
        self.tx
    }

    /// Send the first `len` bytes of the slot. The receiver sees them when
    /// this returns; the slot comes back when it drops the message.
    pub fn send(self, len: usize) -> Result<(), LaneSendError<'a>> {
        let this = std::mem::ManuallyDrop::new(self);
        let slot = this.slot;
        // SAFETY: `this` is never used or dropped after this read (it is
        // a `ManuallyDrop`), so the `&mut` is moved out exactly once.
        let tx: &'a mut LaneSender = unsafe { std::ptr::read(&this.tx) };
        match tx.publish(slot, len) {
            Ok(()) => Ok(()),
            Err(e) => {
                tx.count_error(&e);
                Err(LaneSendError::new(e, Loan { tx, slot }))
            }
        }
    }
}

impl Drop for Loan<'_> {
    fn drop(&mut self) {
        let slot = self.slot;
        self.tx.state[slot as usize] = SlotState::Free;
        self.tx.free.push(slot);
    }
}

/// [`Loan::send`] refused: the reason ([`LaneError::TooLarge`],
/// [`LaneError::Disconnected`] or [`LaneError::WouldBlock`]) and the loan,
/// back (its slot is still yours: fix the length and send again, or drop
/// the loan to give the slot back). Shaped like the channel's `SendError`.
pub struct LaneSendError<'a> {
    error: LaneError,
    loan: Loan<'a>,
}

impl<'a> LaneSendError<'a> {
    pub(crate) fn new(error: LaneError, loan: Loan<'a>) -> Self {
        Self { error, loan }
    }

    /// Why the send was refused.
    pub fn error(&self) -> &LaneError {
        &self.error
    }

    /// The loan, back.
    pub fn into_inner(self) -> Loan<'a> {
        self.loan
    }

    /// The reason and the loan.
    pub fn into_parts(self) -> (LaneError, Loan<'a>) {
        (self.error, self.loan)
    }

    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> crate::error::ErrorKind {
        self.error.kind()
    }
}

impl std::fmt::Debug for LaneSendError<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneSendError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Display for LaneSendError<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for LaneSendError<'_> {}

/// A free slot of the lane, as the one wait loop (`crate::wait::wait_ready`)
/// sees it: the look takes in the receiver's notices (and sees the lane's
/// end); the flag is set by the sleep, which flags, re-checks and sleeps on
/// the notice ring in one call (`spsc::Reader::wait_for_data`).
struct SlotWait<'a> {
    lane: &'a mut LaneSender,
    shares: bool,
    /// Why the wait ended without a slot.
    fail: Option<LaneError>,
}

impl Readiness for SlotWait<'_> {
    fn is_ready(&mut self) -> bool {
        if self.fail.is_some() {
            return true;
        }
        if let Err(e) = self.lane.drain() {
            self.fail = Some(e);
            return true;
        }
        if !self.lane.free.is_empty() {
            return true;
        }
        if self.lane.ended() {
            self.fail = Some(LaneError::Disconnected);
            return true;
        }
        false
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        (!self.is_ready()).then_some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: Duration) {
        self.lane.page.add(l::SLEEPS, 1);
        let start = std::time::Instant::now();
        if self.lane.notices.wait_for_data(slice, None).is_err() {
            self.lane.broken = true;
            self.fail = Some(LaneError::Corrupt);
            return;
        }
        if std::time::Instant::now() >= start + slice {
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
