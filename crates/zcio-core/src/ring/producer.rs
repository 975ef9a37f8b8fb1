//! The producing end of a ring: one per ring at a time.
//!
//! A write is *announce → fill → publish*: the producer first stores the end
//! of the range it is about to overwrite in `write_end` (followed by a
//! release fence), then copies the data, then publishes the new head with a
//! swap that also tells it whether any consumer sleeps. Readers that may be
//! overtaken (FRP, MRP, index readers) check `write_end` after reading, the
//! seqlock way, so overwritten data is never returned as valid.
//!
//! Room is decided by the overflow policy: `Block` and `Srp` compare against
//! the slowest live consumer (cached; the consumer slots are re-scanned only
//! when the cached minimum says the ring is full), `Mrp` against the shared
//! read pointer, `Frp` never looks.

use std::sync::Arc;
use std::time::Duration;

use super::error::{OpenError, WriteError};
use super::layout::{
    block_unit, owner_parts, owner_word, BlockHeader, Geometry, Layout, Overflow, RichPtr,
    BLOCK_HDR, MAX_SOURCES, OWNER_ACTIVE, OWNER_CLOSED, OWNER_FAILED, SLOT_ACTIVE, SLOT_EVICTING,
    SLOT_JOINING,
};
use super::live;
use super::map::RingMap;
use super::{protocol, Wait};
use crate::sync::Ordering;
use crate::view::View;
use crate::wait::{wait_ready, Backoff, Readiness, SpinBudget, SpinPolicy, Step, Waited};
use zcio_sys::registry::schema::producer as counter;
use zcio_sys::registry::StatsPage;

/// A producer refreshes its count of consumers every this many blocks
/// (a power of two), besides every scan of their positions.
const CONSUMERS_EVERY: u64 = 64;

/// A producer's counters: what its registry entry shows (`zcio ls`,
/// `zcio stat`). Built only by [`Producer::stats`]; more counters may be
/// added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerStats {
    /// Blocks written (continued from the ring's count when attached).
    pub blocks: u64,
    /// Bytes written (likewise).
    pub bytes: u64,
    /// Writes that found no room and did not wait.
    pub would_block: u64,
    /// Writes that timed out waiting for room.
    pub timed_out: u64,
    /// Consumers attached now.
    pub consumers: u64,
    /// The write position (cursor units since the ring was created).
    pub head: u64,
    /// The ring's data area in bytes.
    pub capacity_bytes: u64,
}
/// Owner state while a producer takes over (start time not yet stored).
const OWNER_STARTING: u64 = 3;
/// Positions are 63-bit counters (see [`super::layout`]).
const POSITION_MASK: u64 = u64::MAX >> 1;

/// The producing end of a ring (see the module docs).
pub struct Producer {
    map: Arc<RingMap>,
    geo: Geometry,
    cap: u64,
    /// Our head (cursor units); only we write the shared copy.
    head: u64,
    /// `Descriptors`: data bytes written.
    data_head: u64,
    /// Largest `write_end` / `data_write_end` announced (kept monotonic).
    write_end: u64,
    data_write_end: u64,
    /// Lowest consumer position seen at the last scan (Block/SRP).
    min_cache: u64,
    /// `Descriptors`: the data position of each entry (private copy, so a
    /// consumer scribbling over the descriptor ring cannot fool us).
    shadow: Vec<u64>,
    epoch: u64,
    pid: u32,
    /// Our liveness lock (`live`): released after `Drop` closed the ring.
    _claim: live::Claim,
    /// `Index`: ring ids registered in the source table.
    sources: Vec<u64>,
    blocks: u64,
    bytes: u64,
    /// How long a write spins for room before it sleeps (the process's
    /// [`SpinPolicy`], adapted to this producer's waits).
    spin: SpinBudget,
    /// Set by [`Self::close_with_error`]: the code `Drop` closes with.
    failed: Option<u32>,
    /// What [`Wait::Default`] waits at most ([`Self::wait_bound`]).
    bound: Duration,
    /// Rings consumers that sleep on named bells (made on first need).
    ringer: Option<crate::bell::Ringer>,
    /// Our named bell, once an event loop waits for room (`ring::evented`).
    pub(crate) bell: Option<crate::bell::NamedBell>,
    /// The consumer slot whose cursor word carries our sleep flag while an
    /// event loop waits for room.
    pub(crate) armed: Option<usize>,
    /// Our live counters (`schema::producer`), in our registry entry's
    /// page (a local page without one): only we write them.
    page: StatsPage,
    /// Process-unique identity, so a [`DetachedReservation`] resumes only
    /// here.
    id: u64,
    /// Bumped by every announce (every reservation and write): a
    /// [`DetachedReservation`] taken before is stale (its room may have
    /// been written or published since).
    room_gen: u64,
}

static NEXT_PRODUCER_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("ring", &self.map.name())
            .field("head", &self.head)
            .finish()
    }
}

/// Room needed by one block, in cursor units and data bytes.
#[derive(Clone, Copy, Debug)]
struct Need {
    units: u64,
    data: u64,
}

impl Producer {
    /// How long `write` waits for room unless [`Producer::set_wait_bound`] says
    /// otherwise (10 s).
    pub const DEFAULT_WAIT_BOUND: std::time::Duration = super::DEFAULT_WRITE_BOUND;

    /// Become the producer of an open ring. Fails with
    /// [`OpenError::ProducerBusy`] while another live producer has it; a
    /// dead producer's claim is taken over.
    pub fn attach(map: Arc<RingMap>) -> Result<Self, OpenError> {
        if !map.writable() {
            return Err(OpenError::PermissionDenied(map.name().to_owned()));
        }
        // Before claiming: a ring whose memory cannot be had fails here
        // (`NoSpace`), not with a truncated-ring error at some later write.
        map.reserve()?;
        map.populate(true);
        let (pid, pidns) = live::me();
        let ctl = map.control();
        // The producer's lock first: while another live producer holds it,
        // the ring is busy; once we hold it, any producer the owner word
        // still names is dead (it releases the lock only after CLOSED).
        let Some(claim) = live::Claim::new(&map, live::PRODUCER)? else {
            let (_, _, owner) = owner_parts(ctl.owner.load(Ordering::Acquire));
            return Err(OpenError::ProducerBusy(owner));
        };
        let epoch = loop {
            let w = ctl.owner.load(Ordering::Acquire);
            let (epoch, _, _) = owner_parts(w);
            // SYNC: AcqRel CAS claims the ring; the PID namespace is stored
            // before the final ACTIVE word is released below.
            if ctl
                .owner
                .compare_exchange(
                    w,
                    owner_word(epoch, OWNER_STARTING, pid),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                ctl.owner_pidns.store(pidns, Ordering::Relaxed);
                break epoch + 1;
            }
        };
        let geo = *map.geometry();
        let p = map.producer();
        // Continue where the previous producer stopped. Its words are only
        // starting points (any process that may attach can write them):
        // positions are re-validated by every reader, and `write_end` only
        // ever grows. What an honest producer leaves is kept as it is;
        // anything else is brought back to what one could have left, so
        // that our own arithmetic and stores stay sound: the head on a
        // block boundary of the layout (block headers are written at the
        // head; a consumer at a head off the boundaries finds no block
        // there), the data head a 63-bit position like every other, each
        // write end at most a ring ahead of its head (a producer announces
        // one block at a time).
        let head = (p.head.load(Ordering::Acquire) >> 1).next_multiple_of(block_unit(&geo));
        let write_end = p
            .write_end
            .load(Ordering::Acquire)
            .clamp(head, head + geo.cap());
        let data_head = p.data_head.load(Ordering::Acquire) & POSITION_MASK;
        let data_write_end = p
            .data_write_end
            .load(Ordering::Acquire)
            .clamp(data_head, data_head + geo.data_len);
        let mut shadow = Vec::new();
        if geo.layout == Layout::Descriptors {
            shadow = vec![data_head; geo.desc_len as usize];
            for pos in head.saturating_sub(geo.desc_len)..head {
                // The entry is inside the descriptor ring; copied out, then
                // clamped into the range of data that can still exist.
                // SAFETY: as argued just above.
                let e = unsafe { map.desc(pos).read_volatile() };
                let lo = data_head.saturating_sub(geo.data_len);
                shadow[(pos & (geo.desc_len - 1)) as usize] = e.pos.clamp(lo, data_head);
            }
        }
        let ctl = map.control();
        // A bell left by a previous producer is not ours: consumers wake
        // us by futex until we sleep on a bell of our own.
        ctl.producer_bell.store(0, Ordering::Relaxed);
        // SYNC: Release publishes owner_pidns (stored above); pairs with the
        // Acquire loads of the owner word in Consumer::producer_state.
        ctl.owner
            .store(owner_word(epoch, OWNER_ACTIVE, pid), Ordering::Release);
        let blocks = p.blocks.load(Ordering::Relaxed);
        let bytes = p.bytes.load(Ordering::Relaxed);
        let mut me = Self {
            cap: geo.cap(),
            geo,
            head,
            data_head,
            write_end,
            data_write_end,
            min_cache: head,
            shadow,
            epoch,
            pid,
            _claim: claim,
            sources: Vec::new(),
            blocks,
            bytes,
            spin: SpinPolicy::current().budget(),
            failed: None,
            bound: super::DEFAULT_WRITE_BOUND,
            ringer: None,
            bell: None,
            armed: None,
            page: super::registered::producer(&map, blocks, bytes, head),
            map,
            id: NEXT_PRODUCER_ID.fetch_add(1, Ordering::Relaxed),
            room_gen: 0,
        };
        me.min_cache = me.scan().0;
        me.count_consumers();
        if geo.layout == Layout::Index {
            me.sources = (0..MAX_SOURCES)
                .filter_map(|i| me.map.read_source(i).map(|(id, _)| id))
                .collect();
        }
        Ok(me)
    }

    /// How long a write waits for room by default ([`Self::write`],
    /// [`Wait::Default`], the async writes, and the default waits of the C
    /// and Python frontends): [`Producer::DEFAULT_WAIT_BOUND`]
    /// (10 s) unless set.
    pub fn wait_bound(&self) -> Duration {
        self.bound
    }

    /// Set [`Self::wait_bound`] for this producer (`Duration::MAX`: wait
    /// without a bound, for consumers you trust to keep reading).
    pub fn set_wait_bound(&mut self, bound: Duration) {
        self.bound = bound;
    }

    /// The ring.
    pub fn ring(&self) -> &Arc<RingMap> {
        &self.map
    }

    /// The ring's geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Number of consumers attached now (including any that died since
    /// the last check; see [`Self::live_consumers`]).
    pub fn consumers(&self) -> usize {
        self.map
            .control()
            .consumers
            .load(Ordering::Relaxed)
            .count_ones() as usize
    }

    /// Our counters, as our registry entry shows them.
    pub fn stats(&self) -> ProducerStats {
        self.count_consumers();
        let p = &self.page;
        ProducerStats {
            blocks: p.get(counter::BLOCKS),
            bytes: p.get(counter::BYTES),
            would_block: p.get(counter::WOULD_BLOCK),
            timed_out: p.get(counter::TIMED_OUT),
            consumers: p.get(counter::CONSUMERS),
            head: p.get(counter::HEAD),
            capacity_bytes: p.get(counter::CAPACITY_BYTES),
        }
    }

    /// Refresh the consumers gauge of our page from the ring's bitmap.
    fn count_consumers(&self) {
        self.page.set(counter::CONSUMERS, self.consumers() as u64);
    }

    /// Number of live consumers, evicting any whose process has died.
    pub fn live_consumers(&mut self) -> usize {
        let mut mask = self.map.control().consumers.load(Ordering::Acquire);
        let mut n = 0;
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            match self.dead_owner(i) {
                None => n += 1,
                Some(dead) => self.evict(i, dead),
            }
        }
        n
    }

    /// Wait (at most `timeout`) until at least `n` live consumers are
    /// attached; returns how many there are.
    pub fn wait_for_consumers(&mut self, n: usize, timeout: Duration) -> usize {
        // Consumers attach by claiming a slot in the control block; nothing
        // wakes a producer when one does (the data path's futex words are
        // for published blocks), so this set-up wait polls: a short spin,
        // then every millisecond.
        let mut backoff = Backoff::new(Duration::from_micros(50), timeout);
        loop {
            let c = self.live_consumers();
            if c >= n {
                return c;
            }
            match backoff.step() {
                Step::Retry => {}
                Step::TimedOut => return c,
                Step::Sleep { remaining, .. } => {
                    std::thread::sleep(remaining.min(Duration::from_millis(1)))
                }
            }
        }
    }

    fn room_for(&self, len: u64) -> Result<Need, WriteError> {
        let g = &self.geo;
        if len > g.max_block() {
            return Err(WriteError::TooLarge {
                len,
                max: g.max_block(),
            });
        }
        Ok(match g.layout {
            Layout::Continuous => Need {
                units: len,
                data: 0,
            },
            Layout::Slotted => Need {
                units: g.slot_size,
                data: 0,
            },
            Layout::Variable => Need {
                units: BLOCK_HDR + len.next_multiple_of(BLOCK_HDR),
                data: 0,
            },
            Layout::Descriptors => Need {
                units: 1,
                data: len.next_multiple_of(8),
            },
            Layout::Index => Need { units: 1, data: 0 },
        })
    }

    /// Whether `need` fits when the slowest reader is at `min`.
    fn fits(&self, need: Need, min: u64) -> bool {
        if !protocol::fits(self.head, need.units, min, self.cap) {
            return false;
        }
        if need.data > 0 {
            let dmin = if min == self.head {
                self.data_head
            } else {
                self.shadow[(min & (self.cap - 1)) as usize]
            };
            return protocol::fits(self.data_head, need.data, dmin, self.geo.data_len);
        }
        true
    }

    /// Lowest live consumer position and the slot holding it.
    fn scan(&self) -> (u64, Option<usize>) {
        let m = &self.map;
        protocol::scan(
            &m.control().consumers,
            |i| &m.slot(i).cursor,
            self.head,
            self.cap,
        )
    }

    fn drop_block(&self, len: u64) -> WriteError {
        self.count_drops(1, len);
        WriteError::Dropped
    }

    /// Count `blocks` blocks (`bytes` bytes) as lost before they reached
    /// this ring — e.g. a bridge that learns upstream lost them — so every
    /// consumer sees them in [`ConsumerStats::drops`](super::ConsumerStats)
    /// as if this producer had dropped them.
    pub fn record_lost(&mut self, blocks: u64, bytes: u64) {
        self.count_drops(blocks, bytes);
    }

    fn count_drops(&self, blocks: u64, bytes: u64) {
        let c = self.map.control();
        // SYNC: statistics only, no partner: only the producer writes the
        // drop counters (load + store, not an RMW); consumers and
        // `ring::stat` read them Relaxed and order nothing by them.
        c.dropped_blocks.store(
            c.dropped_blocks
                .load(Ordering::Relaxed)
                .wrapping_add(blocks),
            Ordering::Relaxed,
        );
        c.dropped_bytes.store(
            c.dropped_bytes.load(Ordering::Relaxed).wrapping_add(bytes),
            Ordering::Relaxed,
        );
    }

    /// Make room for `need` under the ring's policy.
    /// `wait`: `Default` becomes a deadline only if there is no room now
    /// (a write with room reads no clock).
    fn ensure_room(&mut self, need: Need, len: u64, wait: Wait) -> Result<(), WriteError> {
        if self.map.truncated() {
            return Err(WriteError::Corrupt("ring file truncated"));
        }
        match self.geo.overflow {
            Overflow::Frp => Ok(()),
            Overflow::Mrp => {
                // SYNC: Acquire pairs with the Release store of R in
                // Consumer::advance: data below R has been read.
                let r = self.map.shared().mrp_read.load(Ordering::Acquire);
                let r = if r > self.head {
                    self.head
                } else {
                    r.max(self.head.saturating_sub(self.cap))
                };
                if self.fits(need, r) {
                    Ok(())
                } else {
                    Err(self.drop_block(len))
                }
            }
            Overflow::Block | Overflow::Srp => {
                if self.fits(need, self.min_cache) {
                    return Ok(());
                }
                let (min, slowest) = self.scan();
                self.min_cache = min;
                if self.fits(need, min) {
                    return Ok(());
                }
                if self.geo.overflow == Overflow::Srp {
                    return Err(self.drop_block(len));
                }
                self.count_consumers();
                if slowest.is_none() {
                    return Ok(());
                }
                if wait == Wait::No {
                    self.page.add(counter::WOULD_BLOCK, 1);
                    return Err(WriteError::WouldBlock);
                }
                let wait = wait.resolve(self.bound);
                let mut spin = self.spin;
                let waited = wait_ready(
                    &mut RoomWait {
                        producer: self,
                        need,
                        slot: slowest,
                    },
                    &mut spin,
                    wait.deadline(),
                );
                self.spin = spin;
                match waited {
                    Waited::Ready => Ok(()),
                    Waited::TimedOut | Waited::Gone => {
                        self.page.add(counter::TIMED_OUT, 1);
                        Err(WriteError::TimedOut)
                    }
                }
            }
        }
    }

    /// The consumer a block of `len` bytes waits for under `Block`, if it
    /// does not fit now.
    pub(crate) fn blocked_on(&mut self, len: u64) -> Result<Option<usize>, WriteError> {
        let need = self.room_for(len)?;
        let (min, slowest) = self.scan();
        self.min_cache = min;
        Ok(if self.fits(need, min) { None } else { slowest })
    }

    /// A liveness interval passed while waiting for consumer `slot`: evict
    /// it if its process has died.
    pub(crate) fn evict_if_dead(&mut self, slot: usize) {
        if let Some(dead) = self.dead_owner(slot) {
            self.evict(slot, dead);
        }
    }

    /// Sleep until consumer `slot` moves (bounded by `t`); evict it if its
    /// process has died.
    fn sleep_on(&mut self, slot: usize, need: Need, t: Duration) {
        let map = self.map.clone();
        let moved = protocol::producer_sleep(
            &map.slot(slot).cursor,
            || {
                // Look again at once if there is room now or if another
                // consumer became the slowest (it would not wake us).
                let (min, slowest) = self.scan();
                self.min_cache = min;
                self.fits(need, min) || slowest != Some(slot)
            },
            t,
        );
        if !moved {
            if let Some(dead) = self.dead_owner(slot) {
                self.evict(slot, dead);
            }
        }
    }

    /// `None` if the consumer in `slot` is alive (or the slot is being
    /// claimed or evicted by a live process: it holds the slot's lock),
    /// else the owner word that was found dead.
    fn dead_owner(&mut self, slot: usize) -> Option<u64> {
        let owner = self.map.slot(slot).owner.load(Ordering::Acquire);
        let alive = match owner >> 32 {
            SLOT_JOINING | SLOT_EVICTING | SLOT_ACTIVE => {
                live::held(&self.map, live::slot_byte(slot))
            }
            _ => false,
        };
        (!alive).then_some(owner)
    }

    /// Remove the dead consumer whose owner word was `dead` from `slot`.
    /// The slot is first marked as being evicted (a CAS from exactly the
    /// dead word, so a consumer that reclaimed the slot meanwhile is left
    /// alone), then its bitmap bit is cleared, then the slot is freed; a
    /// claimer cannot slip in between and lose its bit.
    fn evict(&mut self, slot: usize, dead: u64) {
        // The slot's lock, held through the eviction: only a dead
        // consumer's is free, and no claimer can take the slot meanwhile.
        let Ok(Some(_lock)) = live::Claim::new(&self.map, live::slot_byte(slot)) else {
            return;
        };
        let s = self.map.slot(slot);
        // SYNC: AcqRel CAS, as every claim of a slot (Consumer::claim_slot).
        if s.owner
            .compare_exchange(
                dead,
                SLOT_EVICTING << 32 | u64::from(self.pid),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return;
        }
        // SYNC: SeqCst like every update of the bitmap (see `scan`).
        self.map
            .control()
            .consumers
            .fetch_and(!(1u64 << slot), Ordering::SeqCst);
        // SYNC: SeqCst as above.
        self.map
            .control()
            .bell_consumers
            .fetch_and(!(1u64 << slot), Ordering::SeqCst);
        // SYNC: Release frees the slot for the next claim.
        s.owner.store(0, Ordering::Release);
    }

    /// Announce that positions up to `units`/`data` past our heads are about
    /// to be overwritten (the seqlock "begin").
    fn announce(&mut self, need: Need) {
        self.room_gen = self.room_gen.wrapping_add(1);
        let p = self.map.producer();
        self.write_end = self.write_end.max(self.head + need.units);
        protocol::announce(&p.write_end, self.write_end);
        if need.data > 0 {
            self.data_write_end = self.data_write_end.max(self.data_head + need.data);
            protocol::announce(&p.data_write_end, self.data_write_end);
        }
    }

    /// Publish a block of `units` (`data` bytes of payload).
    fn publish(&mut self, units: u64, data: u64, payload: u64) {
        self.head += units;
        self.data_head += data;
        let p = self.map.producer();
        if data > 0 {
            p.data_head.store(self.data_head, Ordering::Relaxed);
        }
        // Statistics, continued from the file's words: they wrap.
        self.blocks = self.blocks.wrapping_add(1);
        self.bytes = self.bytes.wrapping_add(payload);
        p.blocks.store(self.blocks, Ordering::Relaxed);
        p.bytes.store(self.bytes, Ordering::Relaxed);
        // Our registry page: plain stores of what we have (no loads).
        self.page.set(counter::BLOCKS, self.blocks);
        self.page.set(counter::BYTES, self.bytes);
        self.page.set(counter::HEAD, self.head);
        if self.blocks & (CONSUMERS_EVERY - 1) == 0 {
            self.count_consumers();
        }
        if protocol::publish(p, self.head) {
            self.ring_sleepers();
        }
    }

    /// Someone slept: ring the named bells of consumers that armed them.
    fn ring_sleepers(&mut self) {
        let ctl = self.map.control();
        // SYNC: SeqCst, as in protocol::ring_sleepers (a cheap look first:
        // most rings have no bell consumers).
        if ctl.bell_consumers.load(Ordering::SeqCst) == 0 {
            return;
        }
        if self.ringer.is_none() {
            self.ringer = crate::bell::Ringer::new().ok();
        }
        let Some(r) = &self.ringer else {
            // No socket: the consumers' liveness timers find the data.
            return;
        };
        let map = &self.map;
        protocol::ring_sleepers(ctl, |i| map.slot(i), |id| r.ring(id));
    }

    /// Write `parts` (one block, gathered) with classification `tag`.
    pub(crate) fn write_block(
        &mut self,
        parts: &[View<'_>],
        tag: u32,
        wait: Wait,
    ) -> Result<(), WriteError> {
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        if self.geo.layout == Layout::Index {
            return Err(WriteError::NotIndexable);
        }
        let need = self.room_for(len)?;
        self.ensure_room(need, len, wait)?;
        self.announce(need);
        let (hdr, mut dst) = match self.geo.layout {
            Layout::Continuous => (false, self.map.data(self.head)),
            Layout::Descriptors => (false, self.map.data(self.data_head)),
            _ => (true, self.map.data(self.head + BLOCK_HDR)),
        };
        for p in parts {
            // `dst` advances through the room just made: at most
            // `max_block` bytes from a position of the doubly mapped data
            // area, so every byte is mapped; nobody honest reads it before
            // `publish`.
            // A part that may itself be changing (a block peeked from a
            // ring) is read with volatile loads, our own bytes with memcpy.
            // SAFETY: as argued just above.
            unsafe {
                match p.as_slice() {
                    Some(s) => crate::copy::copy_raw(s.as_ptr(), dst, s.len()),
                    None => crate::copy::copy_volatile(p.as_ptr(), dst, p.len()),
                }
                dst = dst.add(p.len());
            }
        }
        self.finish_block(need, len, tag, hdr)
    }

    /// Write the block's header (in-band or descriptor) and publish it.
    fn finish_block(
        &mut self,
        need: Need,
        len: u64,
        tag: u32,
        inband: bool,
    ) -> Result<(), WriteError> {
        if inband {
            let h = BlockHeader {
                pos: self.head,
                len: len as u32,
                tag,
            };
            // The header goes at our head, inside the room made for the block.
            // SAFETY: as argued just above (16 bytes, 8-aligned position).
            unsafe {
                self.map
                    .data(self.head)
                    .cast::<BlockHeader>()
                    .write_volatile(h)
            };
        } else if self.geo.layout == Layout::Descriptors {
            let e = RichPtr {
                ring_id: self.geo.ring_id,
                pos: self.data_head,
                offset: 0,
                len: len as u32,
                tag,
                _reserved: 0,
            };
            self.shadow[(self.head & (self.cap - 1)) as usize] = self.data_head;
            // The entry of our head position, inside the descriptor ring.
            // SAFETY: as argued just above.
            unsafe { self.map.desc(self.head).write_volatile(e) };
        }
        let units = if self.geo.layout == Layout::Continuous {
            len
        } else {
            need.units
        };
        self.publish(units, need.data, len);
        self.check_truncated()
    }

    /// A truncation discovered while writing means the block went into the
    /// zero pages that replaced the file: report it as not written.
    fn check_truncated(&self) -> Result<(), WriteError> {
        if self.map.truncated() {
            Err(WriteError::Corrupt("ring file truncated"))
        } else {
            Ok(())
        }
    }

    // The writes. The one primitive is `reserve` → fill → `commit` (the
    // type states of `Reservation`); the rest are conveniences, each for a
    // need `reserve` would make a user spell out by hand.

    /// Copy `bytes` into the ring, waiting for room at most
    /// [`Self::wait_bound`] (10 s unless set; `TimedOut` after it: the
    /// ring's consumers decide when room comes back, and one that stops
    /// reading must not hold the producer for good). A producer that must
    /// not wait uses [`Self::try_write`], one that waits otherwise
    /// [`Self::write_timeout`].
    /// A continuous ring takes any length, split into pieces of at most
    /// half the ring (so a reader can hold part of it while the rest
    /// fills); a block ring takes one block of at most
    /// [`Geometry::max_block`] bytes. Returns the bytes written (of a
    /// continuous ring, fewer when the wait ended part-way: the pieces
    /// written are in the ring).
    ///
    /// *Why not `reserve`:* the byte-stream case (`zcio pipe`, files,
    /// sockets) would otherwise split and loop by hand. `write`,
    /// `try_write` and `write_timeout` are the same trio as
    /// `Channel::send`/`try_send`/`send_timeout`.
    pub fn write(&mut self, bytes: &[u8]) -> Result<usize, WriteError> {
        self.write_with(bytes, 0, Wait::Default)
    }

    /// Like [`Self::write`] but never waits: `WouldBlock` when full (a
    /// continuous ring returns what fitted, if anything did).
    pub fn try_write(&mut self, bytes: &[u8]) -> Result<usize, WriteError> {
        self.write_with(bytes, 0, Wait::No)
    }

    /// Like [`Self::write`], waiting at most `timeout` for room
    /// (`Duration::MAX`: without a bound).
    pub fn write_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<usize, WriteError> {
        self.write_with(bytes, 0, Wait::within(timeout))
    }

    /// Copy `bytes` in as one block carrying a classification `tag`
    /// (consumers filter and fan out on it), waiting as `wait` says.
    ///
    /// *Why not `reserve`:* a tagged block of bytes already at hand is the
    /// common case of every block ring (sensors, logs, the bridge); one
    /// call instead of reserve, put, commit.
    pub fn write_tagged(&mut self, bytes: &[u8], tag: u32, wait: Wait) -> Result<(), WriteError> {
        self.write_block(&[View::from_slice(bytes)], tag, wait)
    }

    /// Copy `parts` in, one after the other, as one block with `tag`. A
    /// part is a [`View`]: bytes that may be volatile (a peer's buffer,
    /// handed in through a frontend) are copied with single reads, never
    /// borrowed as a `&[u8]`.
    ///
    /// *Why not `reserve`:* `Reservation::put` takes a `&[u8]`, which
    /// bytes another process may write must never become; and gathering
    /// a header and a payload is one call.
    pub fn write_gather(
        &mut self,
        parts: &[View<'_>],
        tag: u32,
        wait: Wait,
    ) -> Result<(), WriteError> {
        self.write_block(parts, tag, wait)
    }

    fn write_with(&mut self, bytes: &[u8], tag: u32, wait: Wait) -> Result<usize, WriteError> {
        match self.geo.layout {
            Layout::Continuous => {
                // Pieces of at most half the ring, so a reader can hold part
                // of the ring while we fill the rest.
                let piece = (self.cap / 2).max(1) as usize;
                // One deadline for all the pieces (a write of one piece
                // makes it only if it has to wait, in `ensure_room`).
                let wait = if bytes.len() > piece {
                    wait.resolve(self.bound)
                } else {
                    wait
                };
                let mut done = 0;
                for chunk in bytes.chunks(piece) {
                    match self.write_block(&[View::from_slice(chunk)], tag, wait) {
                        Ok(()) => done += chunk.len(),
                        Err(WriteError::WouldBlock | WriteError::TimedOut) if done > 0 => {
                            return Ok(done)
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(done)
            }
            _ => self
                .write_block(&[View::from_slice(bytes)], tag, wait)
                .map(|()| bytes.len()),
        }
    }

    /// Reserve room for a block of up to `len` bytes, waiting as `wait`
    /// says: fill it in place ([`Reservation::put`], or
    /// [`Reservation::spare_mut`] and `advance`, e.g. straight from
    /// `read(2)`), then [`Reservation::commit`] it. Nothing is visible to
    /// consumers before the commit, and the room is never readable
    /// uninitialised. Not for index rings (they take [`Self::splice`]).
    pub fn reserve(&mut self, len: usize, wait: Wait) -> Result<Reservation<'_>, WriteError> {
        if self.geo.layout == Layout::Index {
            return Err(WriteError::NotIndexable);
        }
        let need = self.room_for(len as u64)?;
        self.ensure_room(need, len as u64, wait)?;
        self.announce(need);
        Ok(Reservation {
            need,
            cap: len,
            filled: 0,
            prod: self,
        })
    }

    /// Take back a reservation set aside with [`Reservation::detach`], as
    /// the [`Reservation`] it was (same room, same bytes filled): nothing
    /// is reserved again. Refused (the detached reservation comes back) if
    /// it was detached from another producer, or if this producer has
    /// reserved or written since: its room may then be written or
    /// published.
    pub fn resume(
        &mut self,
        d: DetachedReservation,
    ) -> Result<Reservation<'_>, DetachedReservation> {
        if d.producer != self.id || d.gen != self.room_gen {
            return Err(d);
        }
        Ok(Reservation {
            need: d.need,
            cap: d.cap,
            filled: d.filled,
            prod: self,
        })
    }

    /// Fast splice: append a rich pointer to `ptr` (a block in ring
    /// `source`) to this index ring. The data is not touched.
    fn push_ptr(&mut self, ptr: RichPtr, source: &RingMap, wait: Wait) -> Result<(), WriteError> {
        if self.geo.layout != Layout::Index {
            return Err(WriteError::NotIndexable);
        }
        self.register_source(ptr.ring_id, source.name())?;
        let need = Need { units: 1, data: 0 };
        self.ensure_room(need, 0, wait)?;
        self.announce(need);
        // Our head's entry, inside the descriptor ring.
        // SAFETY: as argued just above.
        unsafe { self.map.desc(self.head).write_volatile(ptr) };
        self.publish(1, 0, u64::from(ptr.len));
        self.check_truncated()
    }

    /// Write `peek`'s block here: a rich pointer if this is an index ring
    /// (fast splice, no data touched), else a copy of its bytes with its
    /// tag. The one way a consumer's block reaches another ring, and the
    /// only write an index ring takes.
    pub fn splice(&mut self, peek: &super::Peek<'_>, wait: Wait) -> Result<(), WriteError> {
        if self.geo.layout == Layout::Index {
            let (ptr, src) = peek.origin();
            return self.push_ptr(ptr, src, wait);
        }
        self.write_block(&[peek.view()], peek.tag(), wait)
    }

    fn register_source(&mut self, id: u64, name: &str) -> Result<(), WriteError> {
        if self.sources.contains(&id) {
            return Ok(());
        }
        for i in 0..MAX_SOURCES {
            let s = self.map.source(i);
            if self.map.source_id(i).load(Ordering::Acquire) != 0 {
                continue;
            }
            let mut raw = [0u8; 240];
            raw[..name.len()].copy_from_slice(name.as_bytes());
            // The entry is free (id 0) and only the producer writes the
            // table; readers ignore it until the id is published below. `s`
            // is a raw pointer into the mapping (`RingMap::source`), never
            // derived from a reference, so writing through it is allowed.
            // SAFETY: as argued just above.
            unsafe {
                std::ptr::addr_of_mut!((*s).name_len).write_volatile(name.len() as u32);
                std::ptr::addr_of_mut!((*s).name).write_volatile(raw);
            }
            // SYNC: Release publishes the name; pairs with the Acquire in
            // RingMap::read_source.
            self.map.source_id(i).store(id, Ordering::Release);
            self.sources.push(id);
            return Ok(());
        }
        Err(WriteError::TooManySources(MAX_SOURCES))
    }

    /// Close the ring for writing: consumers read what is left, then see
    /// end-of-stream. (Dropping the producer does the same.)
    pub fn close(self) {}

    /// Close the ring with an error: consumers read everything published
    /// so far, then get [`ReadError::ProducerFailed`] with `code` (and this
    /// pid) instead of the end of stream, so they can tell that the stream
    /// is incomplete. `code` is the application's (`zcio pipe put` passes an
    /// errno). A later producer may take the ring over as after `close`.
    ///
    /// [`ReadError::ProducerFailed`]: super::ReadError::ProducerFailed
    pub fn close_with_error(mut self, code: u32) {
        self.failed = Some(code);
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let ctl = self.map.control();
        let state = match self.failed {
            Some(code) => {
                // Only the producer writes it; made visible by the Release
                // CAS below.
                ctl.error.store(u64::from(code), Ordering::Relaxed);
                OWNER_FAILED
            }
            None => OWNER_CLOSED,
        };
        // SYNC: Release orders every publish (and the error code) before the
        // CLOSED/FAILED state; pairs with the Acquire load in
        // Consumer::producer_state.
        let _ = ctl.owner.compare_exchange(
            owner_word(self.epoch, OWNER_ACTIVE, self.pid),
            owner_word(self.epoch, state, self.pid),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        if let Some(b) = &self.bell {
            // Our bell goes with us: a next producer is woken by futex
            // until it has one of its own.
            let _ =
                ctl.producer_bell
                    .compare_exchange(b.id(), 0, Ordering::Relaxed, Ordering::Relaxed);
        }
        let p = self.map.producer();
        // SYNC: clear the sleep flag and wake every sleeper so they see CLOSED.
        p.head.fetch_and(!1, Ordering::SeqCst);
        crate::sync::futex_wake(&p.head);
        self.ring_sleepers();
    }
}

/// Room reserved in the ring for one block: fill it, then [`commit`].
/// Nothing is visible to consumers before `commit`; dropping it publishes
/// nothing.
///
/// [`commit`]: Reservation::commit
pub struct Reservation<'a> {
    prod: &'a mut Producer,
    need: Need,
    cap: usize,
    filled: usize,
}

impl Reservation<'_> {
    /// Bytes reserved.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes filled so far.
    pub fn len(&self) -> usize {
        self.filled
    }

    /// Whether nothing was filled yet.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    fn base(&self) -> *mut u8 {
        let p = &self.prod;
        match p.geo.layout {
            Layout::Continuous => p.map.data(p.head),
            Layout::Descriptors => p.map.data(p.data_head),
            _ => p.map.data(p.head + BLOCK_HDR),
        }
    }

    /// Append `bytes`; returns how many fit.
    pub fn put(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.cap - self.filled);
        // `[filled, filled + n)` lies inside the reserved room (n ≤ cap -
        // filled), which is mapped and not visible to readers yet.
        // SAFETY: as argued just above.
        unsafe { crate::copy::copy_raw(bytes.as_ptr(), self.base().add(self.filled), n) };
        self.filled += n;
        n
    }

    /// The unfilled part of the room, to fill in place (e.g. with `read(2)`);
    /// then call [`Self::advance`].
    pub fn spare_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        // The room is ours until commit (nobody honest reads or writes it);
        // exposing it as MaybeUninit promises nothing about its contents.
        // SAFETY: as argued just above; the length stays inside the room.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base().add(self.filled).cast(),
                self.cap - self.filled,
            )
        }
    }

    /// Mark `n` more bytes of [`Self::spare_mut`] as filled.
    ///
    /// # Safety
    /// The first `n` bytes of `spare_mut()` must have been initialised.
    pub unsafe fn advance(&mut self, n: usize) {
        assert!(n <= self.cap - self.filled);
        self.filled += n;
    }

    /// Set the reservation aside without a borrow of its producer (for
    /// frontends that hand the room's address across an FFI boundary and
    /// commit in a later call): [`Producer::resume`] turns it back into
    /// this reservation, unless the producer reserved or wrote since.
    /// Dropping it publishes nothing, as dropping the reservation does.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("zcio-doc-rdetach-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # std::env::set_var("ZCIO_RING_DIR", &dir);
    /// use zcio::ring::{Options, Producer, Wait};
    /// let mut p = Producer::attach(Options::new().size(1 << 12).create("doc-rdetach")?)?;
    /// let mut r = p.reserve(4, Wait::No)?;
    /// r.put(b"kept");
    /// let held = r.detach(); // no borrow of `p`
    /// assert_eq!(held.capacity(), 4);
    /// let r = p.resume(held).expect("nothing written since");
    /// r.commit(0)?;
    /// zcio::ring::unlink("doc-rdetach")?;
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), zcio::Error>(())
    /// ```
    pub fn detach(self) -> DetachedReservation {
        DetachedReservation {
            producer: self.prod.id,
            gen: self.prod.room_gen,
            addr: self.base(),
            need: self.need,
            cap: self.cap,
            filled: self.filled,
        }
    }

    /// Publish the filled bytes as one block with `tag`. Fails only if the
    /// ring file was truncated under us (the block is then lost).
    pub fn commit(self, tag: u32) -> Result<(), WriteError> {
        let len = self.filled as u64;
        let mut need = self.need;
        if self.prod.geo.layout == Layout::Variable {
            need.units = BLOCK_HDR + len.next_multiple_of(BLOCK_HDR);
        }
        if self.prod.geo.layout == Layout::Descriptors {
            need.data = len.next_multiple_of(8);
        }
        let inband = matches!(self.prod.geo.layout, Layout::Slotted | Layout::Variable);
        self.prod.finish_block(need, len, tag, inband)
    }
}

/// A reservation set aside by [`Reservation::detach`]: it does not borrow
/// its producer, and commits nothing until [`Producer::resume`] turns it
/// back into a [`Reservation`].
#[derive(Debug)]
pub struct DetachedReservation {
    producer: u64,
    gen: u64,
    addr: *mut u8,
    need: Need,
    cap: usize,
    filled: usize,
}

// SAFETY: the only non-`Send` part is the room's raw pointer, which is
// never dereferenced through a `DetachedReservation`: only
// `Producer::resume` turns it back into a `Reservation`, after checking
// that it belongs to that producer's current state, whose mapping keeps
// the room alive.
unsafe impl Send for DetachedReservation {}
// SAFETY: as for `Send`; `&DetachedReservation` exposes only numbers and
// the address.
unsafe impl Sync for DetachedReservation {}

impl DetachedReservation {
    /// Address of the room's first byte: `capacity()` bytes of the ring's
    /// shared mapping, which only its producer writes. The caller may fill
    /// them through raw pointers while the producer lives and has not
    /// reserved or written since, then [`Producer::resume`] and commit.
    pub fn addr(&self) -> *mut u8 {
        self.addr
    }

    /// Bytes reserved.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Bytes filled before it was detached.
    pub fn len(&self) -> usize {
        self.filled
    }

    /// Whether nothing was filled before it was detached.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }
}

/// Room for a block under `Overflow::Block`, as the one wait loop
/// (`crate::wait::wait_ready`) sees it: the look scans the consumers (a
/// costly look: every spin step yields); ready once the block fits or
/// nobody is left to wait for. The flag is set by the sleep, on the
/// slowest consumer's cursor word (`protocol::producer_sleep` flags,
/// re-checks and sleeps in one call, and a consumer found dead after a
/// full slice is evicted).
struct RoomWait<'a> {
    producer: &'a mut Producer,
    need: Need,
    /// The slowest consumer at the last look.
    slot: Option<usize>,
}

impl Readiness for RoomWait<'_> {
    fn is_ready(&mut self) -> bool {
        let p = &mut *self.producer;
        let (min, slowest) = p.scan();
        p.min_cache = min;
        self.slot = slowest;
        p.fits(self.need, min) || slowest.is_none()
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        (!self.is_ready()).then_some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: Duration) {
        if let Some(slot) = self.slot {
            self.producer.sleep_on(slot, self.need, slice);
        }
    }

    fn costly_look(&self) -> bool {
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::ring::{Consumer, Options, ReadError, Start};

    /// Fuzz findings (`fuzz/regressions/ring_read/producer-*`): a producer
    /// taking over a ring whose producer line another process scribbled
    /// (a head off the block boundaries, write ends and a data head near
    /// `u64::MAX`, saturated counters) used to panic on its counters or
    /// its data head, or write its first block header at a misaligned
    /// address. It continues from sane positions, and what it writes next
    /// is read intact.
    #[test]
    #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared; not in Miri")]
    fn attach_continues_from_a_scribbled_producer_line() {
        for layout in [
            Layout::Continuous,
            Layout::Slotted,
            Layout::Variable,
            Layout::Descriptors,
        ] {
            let name = format!("unit-scribbled-{}-{}", layout.name(), std::process::id());
            let map = Options::new()
                .layout(layout)
                .size(1 << 16)
                .slot_size(256)
                .entries(64)
                .create(&name)
                .unwrap();
            crate::ring::unlink(&name).unwrap();
            let line = map.producer();
            line.head.store(3 << 1, Ordering::Relaxed);
            for w in [
                &line.write_end,
                &line.data_write_end,
                &line.blocks,
                &line.bytes,
            ] {
                w.store(u64::MAX, Ordering::Relaxed);
            }
            line.data_head.store(u64::MAX - 3, Ordering::Relaxed);
            let mut p = Producer::attach(map.clone()).unwrap();
            p.write_tagged(b"first", 1, Wait::No).unwrap();
            let head = line.head.load(Ordering::Relaxed) >> 1;
            assert_eq!(
                head % block_unit(map.geometry()),
                0,
                "{layout:?}: head {head}"
            );
            let mut c = Consumer::attach(map.clone(), Start::Newest).unwrap();
            p.write_tagged(b"second", 2, Wait::No).unwrap();
            let mut buf = [0u8; 64];
            let n = c.try_read(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"second", "{layout:?}");
            assert_eq!(c.try_read(&mut buf), Err(ReadError::WouldBlock));
            assert_eq!(line.blocks.load(Ordering::Relaxed), 1, "the counter wraps");
        }
    }

    /// A detached reservation resumes as the same room with what was
    /// filled (nothing reserved again), and is refused once its producer
    /// wrote or reserved since, or by another producer.
    #[test]
    #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared; not in Miri")]
    fn detached_reservation_resumes_only_unchanged() {
        for layout in [Layout::Continuous, Layout::Variable, Layout::Descriptors] {
            let name = format!("unit-rdetach-{}-{}", layout.name(), std::process::id());
            let map = Options::new()
                .layout(layout)
                .size(1 << 16)
                .entries(64)
                .create(&name)
                .unwrap();
            crate::ring::unlink(&name).unwrap();
            let mut p = Producer::attach(map.clone()).unwrap();
            let mut c = Consumer::attach(map.clone(), Start::Oldest).unwrap();
            let mut r = p.reserve(8, Wait::No).unwrap();
            r.put(b"abc");
            let d = r.detach();
            assert_eq!((d.capacity(), d.len()), (8, 3));
            // SAFETY: the room is 8 bytes of the mapping, ours until commit.
            unsafe { d.addr().add(3).copy_from_nonoverlapping(b"de".as_ptr(), 2) };
            let mut r = p.resume(d).unwrap();
            // SAFETY: the 2 bytes past the 3 put were written just above.
            unsafe { r.advance(2) };
            r.commit(7).unwrap();
            let mut buf = [0u8; 64];
            let n = c.try_read(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"abcde", "{layout:?}");

            // Stale: a write came between.
            let d = p.reserve(8, Wait::No).unwrap().detach();
            p.write_tagged(b"between", 0, Wait::No).unwrap();
            let d = p.resume(d).map(|_| ()).unwrap_err();
            // Another producer (of another ring) refuses it too.
            let other = format!("{name}-o");
            let map2 = Options::new()
                .layout(layout)
                .size(1 << 16)
                .entries(64)
                .create(&other)
                .unwrap();
            crate::ring::unlink(&other).unwrap();
            let mut q = Producer::attach(map2).unwrap();
            assert!(q.resume(d).is_err());
            let n = c.try_read(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"between", "{layout:?}");
            assert_eq!(c.try_read(&mut buf), Err(ReadError::WouldBlock));
        }
    }
}
