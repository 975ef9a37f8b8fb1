//! The consuming end of a ring: any number per ring, each with a private
//! cursor in its own slot.
//!
//! Every block is read in three steps: copy its header or descriptor out of
//! shared memory and validate the copy; read (copy or peek) the bytes; then
//! check the producer's `write_end` again (after an acquire fence). Only a
//! block that is still intact after the read is returned or accepted, so a
//! consumer lapped by an overwriting producer (FRP/MRP) never returns
//! overwritten data: it skips forward with an adaptive step and counts the
//! skip in its slot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::{OpenError, ReadError, SourceError};
use super::layout::{
    block_unit, owner_parts, BlockHeader, Geometry, Layout, Overflow, RichPtr, BLOCK_HDR,
    MAX_CONSUMERS, MAX_SOURCES, OWNER_ACTIVE, OWNER_FAILED, SLOT_ACTIVE, SLOT_JOINING,
};
use super::live;
use super::map::RingMap;
use super::{protocol, Wait};
use crate::sync::Ordering;
use crate::view::View;
use crate::wait::{wait_ready, Readiness, SpinBudget, SpinPolicy, Waited};
use zcio_sys::registry::schema::consumer as counter;
use zcio_sys::registry::StatsPage;

/// Where a new consumer starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// At the producer's head: only data written from now on.
    #[default]
    Newest,
    /// At the oldest data the ring may still hold (a ring behind the head;
    /// `Variable` rings cannot find block boundaries there and start at the
    /// head instead).
    Oldest,
}

/// Where [`Consumer::seek`] moves the cursor. Distances are in blocks for
/// `Slotted`, `Descriptors` and `Index` rings and bytes for `Continuous`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekTo {
    /// To the producer's head.
    Newest,
    /// To the oldest data the ring may still hold.
    Oldest,
    /// Forward (never past the head).
    Forward(u64),
    /// Backward (never more than a ring behind the head).
    Backward(u64),
}

/// One consumer's counters (also visible to `zcio ring stat`). Built only
/// by [`Consumer::stats`]; more counters may be added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerStats {
    /// Blocks (or reads, for continuous rings) consumed.
    pub read_blocks: u64,
    /// Bytes consumed.
    pub read_bytes: u64,
    /// Times this consumer was lapped and skipped forward.
    pub skipped_blocks: u64,
    /// Cursor units skipped over.
    pub skipped_units: u64,
    /// Blocks the producer dropped (tail drop) since this consumer joined.
    pub drops: u64,
    /// Cursor units between this consumer and the producer.
    pub lag: u64,
    /// Reads and peeks that found nothing and did not wait.
    pub would_block: u64,
    /// Reads and peeks that timed out.
    pub timed_out: u64,
}

/// A located block: where its bytes are and how to check them afterwards.
#[derive(Clone, Copy, Debug)]
struct Block {
    ptr: *const u8,
    len: usize,
    tag: u32,
    /// Cursor units to advance past it.
    units: u64,
    /// Rich pointer to the bytes.
    origin: RichPtr,
    /// Index of the map holding the bytes in `targets` (`None`: own ring).
    target: Option<usize>,
}

/// The consuming end of a ring.
pub struct Consumer {
    map: Arc<RingMap>,
    geo: Geometry,
    cap: u64,
    slot: usize,
    cursor: u64,
    head_cache: u64,
    step: u64,
    seen_producer: bool,
    /// Producer epoch when we joined: a later producer's close is our end
    /// of stream even if we never saw it active.
    epoch_at_join: u64,
    /// The head when we joined: a producer that dies without having moved
    /// it never wrote to us, so we wait for the next one (see `idle`).
    head_at_join: u64,
    /// Our slot's liveness lock (`live`), released after `Drop` freed the
    /// slot (`None` only on the way out of a failed attach).
    claim: Option<live::Claim>,
    targets: Vec<Arc<RingMap>>,
    stats: ConsumerStats,
    drops_at_join: u64,
    /// How long a read spins before it sleeps (the process's
    /// [`SpinPolicy`], adapted to this consumer's waits).
    spin: SpinBudget,
    /// What [`Wait::Default`] waits at most ([`Consumer::wait_bound`]).
    bound: Duration,
    /// Set by [`Consumer::auto_doorbell`]: a non-blocking read or peek that
    /// finds nothing re-arms the doorbell itself (`ring::evented`).
    pub(crate) auto_arm: bool,
    /// Our named bell, once an event loop waits on this consumer
    /// (`ring::evented`).
    pub(crate) bell: Option<crate::bell::NamedBell>,
    /// What rings a producer that sleeps on its bell (made on first need).
    pub(crate) ringer: Option<crate::bell::Ringer>,
    /// Process-unique identity, so a [`DetachedPeek`] resumes only here.
    id: u64,
    /// Bumped by every read, peek and seek: a [`DetachedPeek`] taken
    /// before is stale (its block may no longer be at the cursor, and the
    /// ring its bytes are in may have been detached from `targets`).
    peek_gen: u64,
    /// Our live counters (`schema::consumer`): in our registry entry's
    /// page once the attach succeeded (a local page before, or without
    /// one); only we write them.
    page: StatsPage,
}

/// A consumer refreshes its drop count every this many blocks (a power of
/// two), besides every skip, empty look and [`Consumer::stats`].
const DROPS_EVERY: u64 = 64;

/// Source of [`Consumer::id`].
static NEXT_CONSUMER_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("ring", &self.map.name())
            .field("slot", &self.slot)
            .field("cursor", &self.cursor)
            .finish()
    }
}

impl Consumer {
    /// How long `read` and `peek` wait for a block unless [`Consumer::set_wait_bound`]
    /// says otherwise (one hour).
    pub const DEFAULT_WAIT_BOUND: std::time::Duration = super::DEFAULT_READ_BOUND;

    /// Join an open ring as a new consumer, starting at `start`.
    pub fn attach(map: Arc<RingMap>, start: Start) -> Result<Self, OpenError> {
        if !map.writable() {
            return Err(OpenError::PermissionDenied(map.name().to_owned()));
        }
        map.populate(false);
        let (pid, pidns) = live::me();
        let (slot, claim) = Self::claim_slot(&map, pid)?;
        let geo = *map.geometry();
        let s = map.slot(slot);
        s.owner_pidns.store(pidns, Ordering::Relaxed);
        let ctl = map.control();
        let drops_at_join = ctl.dropped_blocks.load(Ordering::Relaxed);
        s.drops_at_join.store(drops_at_join, Ordering::Relaxed);
        for c in [
            &s.skipped_blocks,
            &s.skipped_units,
            &s.read_blocks,
            &s.read_bytes,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        // A bell left by the slot's previous consumer is not ours.
        s.bell.store(0, Ordering::Relaxed);
        s.bell_armed.store(0, Ordering::Relaxed);
        let h2 = protocol::join(map.producer(), &ctl.consumers, slot, &s.cursor, |w| {
            wake_producer(ctl, w, &mut None)
        });
        let mut me = Self {
            cap: geo.cap(),
            geo,
            slot,
            cursor: h2,
            head_cache: h2,
            step: 0,
            seen_producer: false,
            epoch_at_join: 0,
            head_at_join: h2,
            claim: Some(claim),
            targets: Vec::new(),
            stats: ConsumerStats::default(),
            drops_at_join,
            spin: SpinPolicy::current().budget(),
            bound: super::DEFAULT_READ_BOUND,
            map,
            auto_arm: false,
            bell: None,
            ringer: None,
            id: NEXT_CONSUMER_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            peek_gen: 0,
            page: StatsPage::local(),
        };
        me.step = me.base_step();
        if start == Start::Oldest && geo.layout != Layout::Variable {
            me.cursor = h2.saturating_sub(me.cap);
        }
        me.publish_cursor();
        // SYNC: Release publishes the slot's fields; pairs with the Acquire
        // owner loads in Producer::consumer_alive and ring::stat.
        let joining = SLOT_JOINING << 32 | u64::from(pid);
        if me
            .map
            .slot(slot)
            .owner
            .compare_exchange(
                joining,
                SLOT_ACTIVE << 32 | u64::from(pid),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            // Someone took the slot from us (only possible if our claim
            // scribbled over our word although we hold its lock): give up;
            // Drop must not free their slot.
            me.claim = None;
            std::mem::forget(me);
            return Err(OpenError::NoSlot(MAX_CONSUMERS));
        }
        let (state, _, epoch) = me.producer_state();
        me.seen_producer = state == OWNER_ACTIVE;
        me.epoch_at_join = epoch;
        me.page = super::registered::consumer(
            &me.map,
            me.cursor,
            me.head_cache.saturating_sub(me.cursor),
        );
        Ok(me)
    }

    /// Claim a free slot: one whose lock nobody holds (never used, freed,
    /// or its consumer died, even mid-claim), taken with its lock.
    fn claim_slot(map: &RingMap, pid: u32) -> Result<(usize, live::Claim), OpenError> {
        let joining = SLOT_JOINING << 32 | u64::from(pid);
        for i in 0..MAX_CONSUMERS {
            let byte = live::slot_byte(i);
            // A cheap look first: a slot whose lock is held is live.
            if live::held(map, byte) {
                continue;
            }
            let Some(claim) = live::Claim::new(map, byte)? else {
                continue;
            };
            let s = map.slot(i);
            let owner = s.owner.load(Ordering::Acquire);
            // SYNC: AcqRel CAS claims the slot (we hold its lock, so only a
            // scribbler can change the word meanwhile).
            if s.owner
                .compare_exchange(owner, joining, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return Ok((i, claim));
            }
        }
        Err(OpenError::NoSlot(MAX_CONSUMERS))
    }

    fn base_step(&self) -> u64 {
        let unit = if self.geo.layout == Layout::Slotted {
            self.geo.slot_size
        } else {
            1
        };
        (self.cap / 16).max(unit)
    }

    /// The ring.
    pub fn ring(&self) -> &Arc<RingMap> {
        &self.map
    }

    /// How long a read or peek waits for a block by default
    /// ([`Consumer::read`], [`Consumer::peek`], [`Wait::Default`], the
    /// async reads, and the default waits of the C and Python frontends):
    /// [`Consumer::DEFAULT_WAIT_BOUND`] (one hour) unless
    /// set.
    pub fn wait_bound(&self) -> Duration {
        self.bound
    }

    /// Set [`Consumer::wait_bound`] for this consumer (`Duration::MAX`:
    /// wait without a bound, for a producer you trust).
    pub fn set_wait_bound(&mut self, bound: Duration) {
        self.bound = bound;
    }

    /// The ring's geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Our slot number (as shown by `zcio ring stat`).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Our cursor (cursor units).
    pub fn position(&self) -> u64 {
        self.cursor
    }

    /// Counters, including drops since we joined and our lag (also
    /// brought up to date in our registry entry).
    pub fn stats(&mut self) -> ConsumerStats {
        let head = self.refresh_head();
        let drops = self.count_drops();
        ConsumerStats {
            drops,
            lag: head.saturating_sub(self.cursor),
            would_block: self.page.get(counter::WOULD_BLOCK),
            timed_out: self.page.get(counter::TIMED_OUT),
            ..self.stats
        }
    }

    /// Blocks the producer dropped since we joined, also stored in our page.
    fn count_drops(&self) -> u64 {
        let dropped = self.map.control().dropped_blocks.load(Ordering::Relaxed);
        let drops = dropped.wrapping_sub(self.drops_at_join);
        self.page.set(counter::DROPS, drops);
        drops
    }

    /// `(state, pid, epoch)` of the producer, after an Acquire load.
    fn producer_state(&self) -> (u64, u32, u64) {
        // SYNC: Acquire pairs with the Release owner stores of
        // Producer::attach and Producer::drop (all publishes come before
        // CLOSED).
        let (epoch, state, pid) = owner_parts(self.map.control().owner.load(Ordering::Acquire));
        (state, pid, epoch)
    }

    /// Whether the producer holds its liveness lock (`live`).
    fn producer_alive(&self) -> bool {
        live::held(&self.map, live::PRODUCER)
    }

    fn refresh_head(&mut self) -> u64 {
        let h = protocol::head(self.map.producer());
        self.head_cache = h;
        self.page
            .set(counter::LAG_BYTES, h.saturating_sub(self.cursor));
        h
    }

    /// Whether `idle` would not say "nothing yet": published news, a
    /// producer that has closed or failed the stream, a truncated file.
    pub(crate) fn has_news(&mut self) -> bool {
        if self.refresh_head() != self.cursor || self.map.truncated() {
            return true;
        }
        let (state, _, epoch) = self.producer_state();
        state != OWNER_ACTIVE && (self.seen_producer || epoch != self.epoch_at_join)
    }

    /// Our cursor (cursor units).
    pub(crate) fn position_raw(&self) -> u64 {
        self.cursor
    }

    /// Nothing new since we looked: report a producer that wrote to us and
    /// died (one that never moved the head since we joined wrote nothing
    /// to us: we wait for the next one, see `idle`).
    pub(crate) fn check_producer_alive(&mut self) -> Result<(), ReadError> {
        let h = self.refresh_head();
        if h == self.cursor && h != self.head_at_join {
            let (now, pid_now, _) = self.producer_state();
            if now == OWNER_ACTIVE && !self.producer_alive() {
                return Err(ReadError::Disconnected { pid: pid_now });
            }
        }
        Ok(())
    }

    /// Publish our cursor; wake the producer if it waits for us.
    fn publish_cursor(&mut self) {
        let map = &self.map;
        let ringer = &mut self.ringer;
        protocol::release(&map.slot(self.slot).cursor, self.cursor, |w| {
            wake_producer(map.control(), w, ringer)
        });
    }

    fn advance(&mut self, b: &Block) {
        let prev = self.cursor;
        self.cursor += b.units;
        // Statistics: they wrap (see `skip_to`).
        self.stats.read_blocks = self.stats.read_blocks.wrapping_add(1);
        self.stats.read_bytes = self.stats.read_bytes.wrapping_add(b.len as u64);
        let s = self.map.slot(self.slot);
        s.read_blocks
            .store(self.stats.read_blocks, Ordering::Relaxed);
        s.read_bytes.store(self.stats.read_bytes, Ordering::Relaxed);
        // Our registry page: plain stores of what we have (the lag as of
        // our last look at the head).
        self.page.set(counter::BLOCKS, self.stats.read_blocks);
        self.page.set(counter::BYTES, self.stats.read_bytes);
        self.page.set(counter::POSITION, self.cursor);
        self.page.set(
            counter::LAG_BYTES,
            self.head_cache.saturating_sub(self.cursor),
        );
        if self.stats.read_blocks & (DROPS_EVERY - 1) == 0 {
            self.count_drops();
        }
        self.publish_cursor();
        if self.geo.overflow == Overflow::Mrp {
            // SYNC: Release: we are done with everything below `prev`; pairs
            // with the Acquire load of R in Producer::ensure_room.
            self.map.shared().mrp_read.store(prev, Ordering::Release);
        }
        self.step = (self.step / 2).max(self.base_step());
    }

    /// We were lapped: jump forward, count it.
    fn skip(&mut self) {
        let head = self.refresh_head();
        let we = self.map.producer().write_end.load(Ordering::Relaxed);
        let to = match self.geo.layout {
            // No way to find a block boundary behind the head.
            Layout::Variable => head.max(self.cursor),
            Layout::Slotted => protocol::skip_target(
                self.cursor,
                head,
                we,
                self.cap,
                self.step,
                self.geo.slot_size,
            ),
            _ => protocol::skip_target(self.cursor, head, we, self.cap, self.step, 1),
        };
        self.skip_to(to);
        self.step = (self.step * 2).min((self.cap / 2).max(self.base_step()));
    }

    /// The block `b` at our cursor was found overwritten after it was
    /// read: move past it. If its entry itself was overwritten we were
    /// lapped ([`Self::skip`]); if only its bytes were (the data area of a
    /// descriptors ring, or the ring an index entry points into, laps on
    /// its own), the entry still stands, a lap skip would not move a
    /// reader near the head, and the block is stepped over instead.
    fn skip_lapped(&mut self, b: &Block) {
        if self.intact_entry() {
            self.skip_to(self.cursor + b.units);
        } else {
            self.skip();
        }
    }

    /// Move the cursor forward to `to` (≥ cursor), counting it as a skip.
    fn skip_to(&mut self, to: u64) {
        // Statistics: they wrap. A head word that jumps ahead and back
        // (anyone who may attach can write it) makes the skips as long as
        // it likes, as often as it likes (after `seek` back to it).
        self.stats.skipped_blocks = self.stats.skipped_blocks.wrapping_add(1);
        self.stats.skipped_units = self.stats.skipped_units.wrapping_add(to - self.cursor);
        let s = self.map.slot(self.slot);
        s.skipped_blocks
            .store(self.stats.skipped_blocks, Ordering::Relaxed);
        s.skipped_units
            .store(self.stats.skipped_units, Ordering::Relaxed);
        self.cursor = to;
        self.page
            .set(counter::SKIPPED_BLOCKS, self.stats.skipped_blocks);
        self.page.set(counter::POSITION, to);
        self.count_drops();
        self.publish_cursor();
    }

    /// Whether the block at our cursor (and its bytes) can still be intact:
    /// the producer has not announced overwriting them.
    fn intact(&self, b: &Block) -> bool {
        let p = self.map.producer();
        if !protocol::intact(&p.write_end, self.cursor, self.cap) || self.map.truncated() {
            return false;
        }
        match b.target {
            None if self.geo.layout == Layout::Descriptors => {
                protocol::intact(&p.data_write_end, b.origin.pos, self.geo.data_len)
            }
            None => true,
            Some(t) => {
                let m = &self.targets[t];
                let tp = m.producer();
                let g = m.geometry();
                let end = if g.layout == Layout::Descriptors {
                    &tp.data_write_end
                } else {
                    &tp.write_end
                };
                protocol::intact(end, b.origin.pos, g.data_len) && !m.truncated()
            }
        }
    }

    /// Locate the block at the cursor (`max`: byte limit for continuous
    /// rings). `Ok(None)`: the header was not valid (lapped or corrupt).
    fn locate(&mut self, max: usize) -> Result<Option<Block>, ReadError> {
        let avail = self.head_cache - self.cursor;
        let own = self.geo.ring_id;
        Ok(Some(match self.geo.layout {
            Layout::Continuous => {
                let n = avail.min(max as u64) as usize;
                Block {
                    ptr: self.map.data(self.cursor),
                    len: n,
                    tag: 0,
                    units: n as u64,
                    origin: RichPtr {
                        ring_id: own,
                        pos: self.cursor,
                        len: n as u32,
                        ..RichPtr::default()
                    },
                    target: None,
                }
            }
            Layout::Slotted | Layout::Variable => {
                // Blocks start on the layout's boundaries (where the
                // producer writes their headers); a cursor elsewhere came
                // from a head word someone scribbled, and there is no
                // header to read there (it would be a misaligned read).
                if !self.cursor.is_multiple_of(block_unit(&self.geo)) {
                    return Ok(None);
                }
                // The header is at our cursor inside the data area, on a
                // block boundary (so aligned for it); copied out (any bits
                // are a valid BlockHeader) before validation.
                // SAFETY: as argued just above.
                let h: BlockHeader = unsafe {
                    self.map
                        .data(self.cursor)
                        .cast::<BlockHeader>()
                        .read_volatile()
                };
                let units = if self.geo.layout == Layout::Slotted {
                    self.geo.slot_size
                } else {
                    BLOCK_HDR + u64::from(h.len).next_multiple_of(BLOCK_HDR)
                };
                if h.pos != self.cursor || u64::from(h.len) > self.geo.max_block() || units > avail
                {
                    return Ok(None);
                }
                Block {
                    ptr: self.map.data(self.cursor + BLOCK_HDR),
                    len: h.len as usize,
                    tag: h.tag,
                    units,
                    origin: RichPtr {
                        ring_id: own,
                        pos: self.cursor,
                        offset: BLOCK_HDR as u32,
                        len: h.len,
                        tag: h.tag,
                        _reserved: 0,
                    },
                    target: None,
                }
            }
            Layout::Descriptors => {
                // The entry of our cursor, copied out then validated.
                // SAFETY: as argued just above.
                let e: RichPtr = unsafe { self.map.desc(self.cursor).read_volatile() };
                if e.ring_id != own || u64::from(e.len) > self.geo.data_len || e.offset != 0 {
                    return Ok(None);
                }
                Block {
                    ptr: self.map.data(e.pos),
                    len: e.len as usize,
                    tag: e.tag,
                    units: 1,
                    origin: e,
                    target: None,
                }
            }
            Layout::Index => {
                // As above, for an index entry.
                // SAFETY: as argued just above.
                let e: RichPtr = unsafe { self.map.desc(self.cursor).read_volatile() };
                let t = match self.target(e.ring_id) {
                    Ok(t) => t,
                    Err(err) if !self.intact_entry() => {
                        let _ = err;
                        return Ok(None);
                    }
                    Err(err) => return Err(err),
                };
                let g = *self.targets[t].geometry();
                let end = u64::from(e.offset) + u64::from(e.len);
                if g.layout == Layout::Index || end > g.data_len {
                    return Ok(None);
                }
                Block {
                    ptr: self.targets[t].data(e.pos.wrapping_add(u64::from(e.offset))),
                    len: e.len as usize,
                    tag: e.tag,
                    units: 1,
                    origin: e,
                    target: Some(t),
                }
            }
        }))
    }

    fn intact_entry(&self) -> bool {
        protocol::intact(&self.map.producer().write_end, self.cursor, self.cap)
    }

    /// Find (attaching on first use) the ring `id` an index entry points into.
    fn target(&mut self, id: u64) -> Result<usize, ReadError> {
        if let Some(i) = self.targets.iter().position(|m| m.geometry().ring_id == id) {
            return Ok(i);
        }
        let name = (0..MAX_SOURCES)
            .filter_map(|i| self.map.read_source(i))
            .find(|(sid, _)| *sid == id)
            .map(|(_, n)| n)
            .ok_or(ReadError::Source(SourceError::UnknownId(id)))?;
        let m = match RingMap::open(&name, false) {
            Ok(m) => m,
            Err(e) => {
                return Err(ReadError::Source(SourceError::Open {
                    name,
                    error: Box::new(e),
                }))
            }
        };
        if m.geometry().ring_id != id {
            return Err(ReadError::Source(SourceError::Replaced(name)));
        }
        if self.targets.len() >= MAX_SOURCES {
            self.targets.remove(0);
        }
        self.targets.push(m);
        Ok(self.targets.len() - 1)
    }

    /// The next valid block (skipping lapped data), or `None` at end of
    /// stream.
    /// `wait`: `Default` becomes a deadline (written back, for the caller's
    /// later rounds) only once the read has to wait or loop: a read that
    /// finds its block at once reads no clock.
    fn next(&mut self, max: usize, wait: &mut Wait) -> Result<Option<Block>, ReadError> {
        self.peek_gen = self.peek_gen.wrapping_add(1);
        let mut rounds = 0u32;
        loop {
            if self.map.truncated() {
                return Err(ReadError::Corrupt("ring file truncated"));
            }
            // Every round either waits (bounded in `idle`) or moves the
            // cursor forward, but a hostile producer can make the rounds
            // endless: check the deadline now and then.
            rounds = rounds.wrapping_add(1);
            if rounds > 1 {
                *wait = wait.resolve(self.bound);
            }
            round_budget(rounds, *wait)?;
            if self.head_cache == self.cursor {
                self.refresh_head();
            }
            let avail = self.head_cache.wrapping_sub(self.cursor);
            if avail == 0 {
                *wait = wait.resolve(self.bound);
                if self.idle(*wait)? {
                    return Ok(None);
                }
                continue;
            }
            if avail > self.cap {
                if self.head_cache < self.cursor {
                    // A file truncated since the check above reads as zero
                    // pages: report the cause, not its symptom.
                    if self.map.truncated() {
                        return Err(ReadError::Corrupt("ring file truncated"));
                    }
                    return Err(ReadError::Corrupt("producer head behind our cursor"));
                }
                self.skip();
                continue;
            }
            self.seen_producer = true;
            match self.locate(max)? {
                Some(b) => return Ok(Some(b)),
                None if self.map.truncated() => {
                    return Err(ReadError::Corrupt("ring file truncated"))
                }
                // Overwritten while we read the header: lapped, skip.
                None if !self.intact_entry() => self.skip(),
                // Intact but invalid: the producer wrote garbage. A lossy
                // reader (FRP/MRP) steps over it to the head (counted as a
                // skip; the head is always a block boundary); a lossless one
                // reports it (`seek(SeekTo::Newest)` resynchronises).
                None if self.geo.overflow.overwrites() => {
                    let head = self.refresh_head().max(self.cursor);
                    self.skip_to(head);
                }
                None => return Err(ReadError::Corrupt("invalid block header")),
            }
        }
    }

    /// Nothing to read at our cursor: wait (on the one wait loop, bounded
    /// by `wait`) for news. `Ok(true)`: the stream ended; `Ok(false)`:
    /// look again (news, or a dead producer's successor may come).
    fn idle(&mut self, wait: Wait) -> Result<bool, ReadError> {
        let mut spin = self.spin;
        let mut w = ReadWait {
            consumer: self,
            eof: false,
            fail: None,
        };
        let waited = if wait == Wait::No {
            if !w.is_ready() {
                w.fail = Some(ReadError::WouldBlock);
            }
            Waited::Ready
        } else {
            wait_ready(&mut w, &mut spin, wait.deadline())
        };
        let (eof, fail) = (w.eof, w.fail.take());
        self.spin = spin;
        self.count_drops();
        match (fail, waited) {
            (Some(e), _) => {
                if e == ReadError::WouldBlock {
                    self.page.add(counter::WOULD_BLOCK, 1);
                }
                Err(e)
            }
            (None, Waited::Ready) => Ok(eof),
            (None, Waited::TimedOut | Waited::Gone) => {
                self.page.add(counter::TIMED_OUT, 1);
                Err(ReadError::TimedOut)
            }
        }
    }

    fn read_with(&mut self, buf: &mut [u8], wait: Wait) -> Result<usize, ReadError> {
        // One deadline for every round (made when first needed, see `next`).
        let mut wait = wait;
        let mut rounds = 0u32;
        loop {
            // Every round moves the cursor forward, but a hostile producer
            // racing us can make them many: bounded as in `next`.
            rounds = rounds.wrapping_add(1);
            if rounds > 1 {
                wait = wait.resolve(self.bound);
            }
            round_budget(rounds, wait)?;
            let Some(b) = self.next(buf.len(), &mut wait)? else {
                return Ok(0);
            };
            if b.len > buf.len() {
                return Err(ReadError::BufferTooSmall {
                    need: b.len,
                    have: buf.len(),
                });
            }
            // `b.ptr` addresses `b.len` mapped bytes (`locate` bounds them by
            // the data area, which is mapped twice) and `buf` has room. The
            // producer may be overwriting them right now (FRP/MRP, or a
            // hostile one): they are read once each with volatile loads and
            // the copy is only returned if `intact` says so (seqlock).
            // SAFETY: as argued just above.
            unsafe { crate::copy::copy_volatile(b.ptr, buf.as_mut_ptr(), b.len) };
            if self.intact(&b) {
                self.advance(&b);
                return Ok(b.len);
            }
            if self.map.truncated() {
                return Err(ReadError::Corrupt("ring file truncated"));
            }
            self.skip_lapped(&b);
        }
    }

    /// Copy the next block (continuous rings: up to `buf.len()` bytes) into
    /// `buf`, waiting for data at most [`Consumer::wait_bound`] (one hour
    /// unless set; `TimedOut` after it). `Ok(0)` is end of stream (the
    /// producer closed the ring and everything was read).
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize, ReadError> {
        self.read_with(buf, Wait::Default)
    }

    /// Like [`Self::read`] but never waits (`WouldBlock`; after
    /// [`Consumer::auto_doorbell`], a `WouldBlock` has armed the doorbell).
    pub fn try_read(&mut self, buf: &mut [u8]) -> Result<usize, ReadError> {
        let mut looks = 0;
        loop {
            match self.read_with(buf, Wait::No) {
                Err(ReadError::WouldBlock) if self.rearm_when_empty(&mut looks) => {}
                r => return r,
            }
        }
    }

    /// Like [`Self::read`], waiting at most `timeout` (`Duration::MAX`:
    /// without a bound).
    pub fn read_timeout(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize, ReadError> {
        self.read_with(buf, Wait::within(timeout))
    }

    /// Borrow the next block in place (continuous rings: up to `max`
    /// bytes), waiting for data at most [`Consumer::wait_bound`] (one hour
    /// unless set; `TimedOut` after it). `Ok(None)` is end of stream.
    pub fn peek(&mut self, max: usize) -> Result<Option<Peek<'_>>, ReadError> {
        self.peek_with(max, Wait::Default)
    }

    /// Like [`Self::peek`] but never waits (`WouldBlock`; after
    /// [`Consumer::auto_doorbell`], a `WouldBlock` has armed the doorbell).
    pub fn try_peek(&mut self, max: usize) -> Result<Option<Peek<'_>>, ReadError> {
        let b = self.next_now(max)?;
        Ok(b.map(|b| self.make_peek(b)))
    }

    /// [`Self::next`] without waiting, re-arming an automatic doorbell on
    /// `WouldBlock`.
    fn next_now(&mut self, max: usize) -> Result<Option<Block>, ReadError> {
        let mut looks = 0;
        loop {
            match self.next(max, &mut Wait::No) {
                Err(ReadError::WouldBlock) if self.rearm_when_empty(&mut looks) => {}
                r => return r,
            }
        }
    }

    /// Like [`Self::peek`], waiting at most `timeout` (`Duration::MAX`:
    /// without a bound).
    pub fn peek_timeout(
        &mut self,
        max: usize,
        timeout: Duration,
    ) -> Result<Option<Peek<'_>>, ReadError> {
        self.peek_with(max, Wait::within(timeout))
    }

    fn peek_with(&mut self, max: usize, wait: Wait) -> Result<Option<Peek<'_>>, ReadError> {
        let b = self.next(max, &mut { wait })?;
        Ok(b.map(|b| self.make_peek(b)))
    }

    /// Borrow the next block and detach it at once: what
    /// `peek(max).map(Peek::detach)` gives, without the detour through a
    /// [`Peek`] (for frontends that hand the block's address across an FFI
    /// boundary and release it in a later call with [`Self::resume`]).
    /// [`DetachedPeek::addr`] is where the bytes are; they stay mapped
    /// while this consumer lives, and are read as [`Peek::view`] says.
    pub fn peek_detached(
        &mut self,
        max: usize,
        wait: Wait,
    ) -> Result<Option<DetachedPeek>, ReadError> {
        let b = if wait == Wait::No {
            self.next_now(max)?
        } else {
            self.next(max, &mut { wait })?
        };
        Ok(b.map(|b| DetachedPeek {
            consumer: self.id,
            gen: self.peek_gen,
            b,
        }))
    }

    fn make_peek(&mut self, b: Block) -> Peek<'_> {
        Peek {
            cons: self,
            b,
            done: false,
        }
    }

    /// Move the cursor.
    pub fn seek(&mut self, to: SeekTo) -> Result<u64, ReadError> {
        self.peek_gen = self.peek_gen.wrapping_add(1);
        let head = self.refresh_head();
        let floor = head.saturating_sub(self.cap);
        let unit = match self.geo.layout {
            Layout::Slotted => self.geo.slot_size,
            _ => 1,
        };
        let variable = self.geo.layout == Layout::Variable;
        let target = match to {
            SeekTo::Newest => head,
            SeekTo::Oldest if variable => return Err(ReadError::Unsupported("seek to oldest")),
            SeekTo::Oldest => floor,
            SeekTo::Forward(_) | SeekTo::Backward(_) if variable => {
                return Err(ReadError::Unsupported("relative seek in a variable ring"))
            }
            SeekTo::Forward(n) => self.cursor.saturating_add(n.saturating_mul(unit)).min(head),
            SeekTo::Backward(n) => self
                .cursor
                .saturating_sub(n.saturating_mul(unit))
                .max(floor),
        };
        self.cursor = target;
        self.page.set(counter::POSITION, target);
        self.publish_cursor();
        Ok(target)
    }
}

impl Consumer {
    /// Take back a block set aside with [`Peek::detach`], as the [`Peek`]
    /// it was. Refused (the detached peek comes back) if it was detached
    /// from another consumer, or if this consumer has read, peeked or
    /// sought since: its block may then be gone, and the cursor has moved
    /// on without it.
    pub fn resume(&mut self, d: DetachedPeek) -> Result<Peek<'_>, DetachedPeek> {
        if d.consumer != self.id || d.gen != self.peek_gen {
            return Err(d);
        }
        Ok(Peek {
            cons: self,
            b: d.b,
            done: false,
        })
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        let s = self.map.slot(self.slot);
        let ctl = self.map.control();
        // SYNC: SeqCst like every bitmap update (see protocol::scan).
        ctl.bell_consumers
            .fetch_and(!(1u64 << self.slot), Ordering::SeqCst);
        let ringer = &mut self.ringer;
        protocol::leave(&ctl.consumers, self.slot, &s.cursor, |w| {
            wake_producer(ctl, w, ringer)
        });
        // SYNC: Release: the slot is free for the next claim (AcqRel CAS in
        // `claim_slot`).
        s.owner.store(0, Ordering::Release);
    }
}

/// Wake a producer that flagged `cursor_word`: the futex, and also its
/// named bell if it has one (making `ringer` on first need) — a producer
/// with a bell may still wait in a blocking write, on the futex.
fn wake_producer(
    ctl: &super::layout::ControlLine,
    cursor_word: &crate::sync::AtomicU64,
    ringer: &mut Option<crate::bell::Ringer>,
) {
    // SYNC: Acquire pairs with the producer's Release store of its bell
    // number (Producer::evented_bell), made before it ever flags a cursor.
    let id = ctl.producer_bell.load(Ordering::Acquire);
    if id != 0 {
        if ringer.is_none() {
            *ringer = crate::bell::Ringer::new().ok();
        }
        // Without a socket for a ringer the producer's liveness look finds
        // the room instead.
        if let Some(r) = ringer {
            r.ring(id);
        }
    }
    protocol::futex_waker(cursor_word);
}

/// A block borrowed in place from the ring. Dropping it (or [`release`])
/// moves the cursor past it.
///
/// Under FRP/MRP the producer may overwrite the block while it is borrowed:
/// [`release`] says whether it stayed intact, and [`is_intact`] can be asked
/// any time. Under `Block`/`Srp` it stays intact, except a block behind the
/// position this consumer joined at or sought back from ([`Start::Oldest`],
/// [`SeekTo::Oldest`], [`SeekTo::Backward`]): the producer waits for the
/// slowest position it has seen, and older data is read as under FRP.
///
/// [`release`]: Peek::release
/// [`is_intact`]: Peek::is_intact
pub struct Peek<'a> {
    cons: &'a mut Consumer,
    b: Block,
    done: bool,
}

impl Peek<'_> {
    /// The block's bytes, in place (zero-copy; see [`View`]). Any process
    /// that can attach to the ring can write them, and under FRP/MRP the
    /// producer overwrites them when it laps this reader: copy out what you
    /// keep, then check [`Peek::is_intact`] (or the result of
    /// [`Peek::release`]) before trusting the copy.
    pub fn view(&self) -> View<'_> {
        // `ptr`/`len` were bounded by `locate` inside a mapping that the
        // consumer keeps alive for at least our lifetime (`&self` borrows
        // the consumer). Other processes may write the bytes, so the view
        // is never marked immutable.
        // SAFETY: as argued just above — the contract of `View::new`.
        unsafe { View::new(self.b.ptr, self.b.len, false) }
    }

    /// A private copy of the block (check [`Peek::is_intact`] after it if
    /// the ring may overwrite).
    pub fn to_vec(&self) -> Vec<u8> {
        self.view().to_vec()
    }

    /// Classification tag.
    pub fn tag(&self) -> u32 {
        self.b.tag
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.b.len
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.b.len == 0
    }

    /// Whether the producer has not (yet) overwritten the block.
    pub fn is_intact(&self) -> bool {
        self.cons.intact(&self.b)
    }

    /// A rich pointer to the block and the ring that holds its bytes.
    pub fn origin(&self) -> (RichPtr, &RingMap) {
        let m = match self.b.target {
            Some(t) => &self.cons.targets[t],
            None => &self.cons.map,
        };
        (self.b.origin, m)
    }

    /// Consume only the first `n` bytes (continuous rings; others ignore it).
    pub fn truncate(&mut self, n: usize) {
        if self.cons.geo.layout == Layout::Continuous && n < self.b.len {
            self.b.len = n;
            self.b.units = n as u64;
        }
    }

    /// Done with the block: advance the cursor. `Err(Lapped)` if it was
    /// overwritten while borrowed (the cursor then skips forward).
    pub fn release(mut self) -> Result<(), ReadError> {
        self.finish()
    }

    /// Set the block aside without releasing it, ending the borrow of the
    /// consumer (for owners that cannot hold a borrow, such as the Python
    /// and C bindings). The cursor stays before the block; take it back
    /// with [`Consumer::resume`] to read or release it. The bytes stay
    /// mapped as long as the consumer lives and does not read, peek or
    /// seek; any of those makes the detached peek stale (the block is then
    /// neither released nor kept: the cursor simply moved on).
    ///
    /// ```
    /// use zcio::ring::{Consumer, Options, Producer, Start};
    ///
    /// # let dir = std::env::temp_dir().join(format!("zcio-doc-detach-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # std::env::set_var("ZCIO_RING_DIR", &dir);
    /// let map = Options::new().size(64 << 10).create_or_open("doc-detach")?;
    /// let mut c = Consumer::attach(map.clone(), Start::Newest)?;
    /// let mut p = Producer::attach(map)?;
    /// p.write(b"kept")?;
    /// let held = c.try_peek(1 << 10)?.expect("a block").detach(); // no borrow of `c`
    /// assert_eq!(held.len(), 4);
    /// let peek = c.resume(held).expect("nothing read since");
    /// assert_eq!(peek.to_vec(), b"kept");
    /// peek.release()?;
    /// zcio::ring::unlink("doc-detach")?;
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok::<(), zcio::Error>(())
    /// ```
    pub fn detach(mut self) -> DetachedPeek {
        self.done = true;
        DetachedPeek {
            consumer: self.cons.id,
            gen: self.cons.peek_gen,
            b: self.b,
        }
    }

    fn finish(&mut self) -> Result<(), ReadError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        if self.cons.intact(&self.b) {
            self.cons.advance(&self.b);
            Ok(())
        } else {
            self.cons.skip_lapped(&self.b);
            Err(ReadError::Lapped)
        }
    }
}

impl Drop for Peek<'_> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// A peeked block set aside by [`Peek::detach`]: it does not borrow its
/// consumer, and gives no access to the bytes until
/// [`Consumer::resume`] turns it back into a [`Peek`].
#[derive(Debug)]
pub struct DetachedPeek {
    consumer: u64,
    gen: u64,
    b: Block,
}

// SAFETY: the only non-`Send` part is the block's raw pointer, which is
// never dereferenced through a `DetachedPeek`: only `Consumer::resume`
// turns it back into a `Peek`, after checking that it belongs to that
// consumer's current state, whose mappings keep the bytes alive.
unsafe impl Send for DetachedPeek {}
// SAFETY: as for `Send`; `&DetachedPeek` exposes only the length and tag.
unsafe impl Sync for DetachedPeek {}

impl DetachedPeek {
    /// Address of the block's first byte: memory other processes may
    /// write, to be read only through raw pointers or copy-out (see
    /// [`View`]), and only until the peek is resumed and released.
    pub fn addr(&self) -> *const u8 {
        self.b.ptr
    }

    /// Length of the block in bytes.
    pub fn len(&self) -> usize {
        self.b.len
    }

    /// Cursor units the block spans: how far releasing it moves the
    /// consumer's [`position`](Consumer::position) (1 for rings counted in
    /// blocks; header, bytes and padding for byte-counted rings).
    pub fn units(&self) -> u64 {
        self.b.units
    }

    /// Whether the block is empty.
    pub fn is_empty(&self) -> bool {
        self.b.len == 0
    }

    /// Classification tag.
    pub fn tag(&self) -> u32 {
        self.b.tag
    }
}

/// News at a consumer's cursor, as the one wait loop
/// (`crate::wait::wait_ready`) sees it: the look reads the producer's head
/// and its owner word (the end of the stream, a failed producer, a
/// truncated file end the wait too) — a costly look, so every spin step
/// yields. The flag is set by the sleep (`protocol::consumer_sleep` flags,
/// re-checks and sleeps on the head word in one call); after a full slice
/// without news it checks that a producer that wrote to us still lives.
struct ReadWait<'a> {
    consumer: &'a mut Consumer,
    /// The stream ended (the producer closed after our last block).
    eof: bool,
    /// Why the wait ended without news.
    fail: Option<ReadError>,
}

impl Readiness for ReadWait<'_> {
    fn is_ready(&mut self) -> bool {
        if self.eof || self.fail.is_some() {
            return true;
        }
        let c = &mut *self.consumer;
        if c.map.truncated() {
            self.fail = Some(ReadError::Corrupt("ring file truncated"));
            return true;
        }
        if c.head_cache == c.cursor {
            c.refresh_head();
        }
        if c.head_cache != c.cursor {
            return true;
        }
        let (state, pid, epoch) = c.producer_state();
        if state == OWNER_ACTIVE || epoch != c.epoch_at_join {
            c.seen_producer = true;
        }
        if state != OWNER_ACTIVE && c.seen_producer && c.refresh_head() == c.cursor {
            if state == OWNER_FAILED {
                // SYNC: written before the FAILED owner word was released
                // (Producer::drop); our Acquire load of it is in
                // `producer_state`.
                let code = c.map.control().error.load(Ordering::Relaxed) as u32;
                self.fail = Some(ReadError::ProducerFailed { pid, code });
            } else {
                self.eof = true;
            }
            return true;
        }
        c.head_cache != c.cursor
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        (!self.is_ready()).then_some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: Duration) {
        let c = &mut *self.consumer;
        let t0 = Instant::now();
        let h = protocol::consumer_sleep(c.map.producer(), c.cursor, slice);
        c.head_cache = h;
        // A dead producer that never moved the head since we joined wrote
        // nothing to us: we are early for the next producer (readers may
        // start before a restarted writer), so keep waiting for one
        // (bounded by `wait`). One that wrote and died left our stream
        // incomplete. The owner word is read again: a producer that closed
        // (and exited) while we fell asleep has ended the stream, not died
        // in it.
        if h == c.cursor && t0.elapsed() >= slice {
            if let Err(e) = c.check_producer_alive() {
                self.fail = Some(e);
            }
        }
    }

    fn costly_look(&self) -> bool {
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::ring::{Options, Overflow, Producer};

    fn ring(tag: &str, o: Options) -> Arc<RingMap> {
        let name = format!("unit-{tag}-{}", std::process::id());
        let _ = crate::ring::unlink(&name);
        let map = o.create(&name).unwrap();
        crate::ring::unlink(&name).unwrap();
        map
    }

    /// Fuzz finding (`fuzz/regressions/ring_read/descriptors-data-lapped-hang`):
    /// in an FRP descriptors ring the data area can lap a reader whose
    /// descriptor entry was not overwritten. `read` then took the lap skip,
    /// which cannot move a reader near the head, and read the same entry
    /// again, forever (an honest producer; `try_read` never returned). The
    /// block whose bytes are gone is stepped over, counted as a skip.
    #[test]
    #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared; not in Miri")]
    fn a_block_whose_data_was_lapped_is_stepped_over() {
        let o = Options::new()
            .layout(Layout::Descriptors)
            .overflow(Overflow::Frp)
            .size(4096)
            .entries(16);
        for peek in [false, true] {
            let map = ring(&format!("data-lapped-{peek}"), o.clone());
            let mut p = Producer::attach(map.clone()).unwrap();
            let mut c = Consumer::attach(map, Start::Newest).unwrap();
            let mut buf = vec![0u8; 4096];
            for i in 0..16u8 {
                p.write(&[i; 10]).unwrap();
                assert_eq!(c.try_read(&mut buf), Ok(10));
            }
            // 5000 bytes into 4096: the first block's bytes are gone, its
            // entry (5 of 16) is not.
            for i in 0..5u8 {
                p.write(&[100 + i; 1000]).unwrap();
            }
            if peek {
                let b = c.try_peek(4096).unwrap().unwrap();
                assert_eq!(b.release(), Err(ReadError::Lapped));
            }
            assert_eq!(c.try_read(&mut buf), Ok(1000));
            assert_eq!(buf[..1000], [101; 1000]);
            assert_eq!(c.stats().skipped_blocks, 1);
        }
    }

    /// Fuzz finding (`fuzz/regressions/ring_read/index-source-lapped-hang`):
    /// the same for an index entry whose block the source ring overwrote.
    #[test]
    #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared; not in Miri")]
    fn an_index_entry_whose_source_block_was_overwritten_is_stepped_over() {
        // The index reader opens the source by name: both keep theirs
        // until the end.
        let src_name = format!("unit-index-src-{}", std::process::id());
        let name = format!("unit-index-lapped-{}", std::process::id());
        let _ = crate::ring::unlink(&src_name);
        let _ = crate::ring::unlink(&name);
        let src = Options::new()
            .layout(Layout::Variable)
            .overflow(Overflow::Frp)
            .size(4096)
            .create(&src_name)
            .unwrap();
        let idx = Options::new()
            .layout(Layout::Index)
            .entries(16)
            .create(&name)
            .unwrap();
        let mut sp = Producer::attach(src.clone()).unwrap();
        let mut splicer = Consumer::attach(src, Start::Newest).unwrap();
        let mut ip = Producer::attach(idx.clone()).unwrap();
        let mut c = Consumer::attach(idx, Start::Newest).unwrap();
        let mut buf = vec![0u8; 4096];
        for i in 0..17u8 {
            sp.write(&[i; 100]).unwrap();
            let b = splicer.try_peek(4096).unwrap().unwrap();
            ip.splice(&b, Wait::No).unwrap();
            b.release().unwrap();
            if i < 16 {
                assert_eq!(c.try_read(&mut buf), Ok(100));
            }
        }
        // The source laps the block the last entry points to.
        for _ in 0..5 {
            sp.write(&[0xee; 1000]).unwrap();
        }
        assert_eq!(c.try_read(&mut buf), Err(ReadError::WouldBlock));
        assert_eq!(c.stats().skipped_blocks, 1);
        crate::ring::unlink(&name).unwrap();
        crate::ring::unlink(&src_name).unwrap();
    }

    /// Fuzz finding (`fuzz/regressions/ring_read/consumer-skipped-units-overflow`):
    /// a head word that jumps ~2^62 ahead (the reader skips to it) and back
    /// (the reader seeks to it) a few times overflowed the skipped-units
    /// counter. Counters wrap.
    #[test]
    #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared; not in Miri")]
    fn a_head_jumping_back_and_forth_does_not_overflow_the_counters() {
        let map = ring(
            "head-jumps",
            Options::new().overflow(Overflow::Frp).size(4096),
        );
        let mut c = Consumer::attach(map.clone(), Start::Newest).unwrap();
        let line = map.producer();
        let mut buf = [0u8; 64];
        for _ in 0..6 {
            line.head.store(((1 << 63) - 1) & !1, Ordering::Relaxed);
            assert_eq!(c.try_read(&mut buf), Ok(64));
            line.head.store(0, Ordering::Relaxed);
            assert_eq!(c.seek(SeekTo::Newest), Ok(0));
        }
        assert_eq!(c.stats().skipped_blocks, 6);
    }

    /// Fuzz finding (`fuzz/regressions/ring_read/consumer-misaligned-cursor`):
    /// a consumer that joined at a head word someone set off the block
    /// boundaries read its first block header at a misaligned address
    /// (UB). There is no block there: a lossless reader reports it as
    /// corrupt, a lossy one steps to the head (and, with no producer
    /// attached, finds the stream ended).
    #[test]
    #[cfg_attr(miri, ignore = "ring: a /dev/shm file mapped shared; not in Miri")]
    fn a_cursor_off_the_block_boundaries_finds_no_block() {
        for (layout, overflow) in [
            (Layout::Variable, Overflow::Block),
            (Layout::Slotted, Overflow::Block),
            (Layout::Variable, Overflow::Frp),
        ] {
            let map = ring(
                &format!("misaligned-{}-{}", layout.name(), overflow.name()),
                Options::new()
                    .layout(layout)
                    .overflow(overflow)
                    .size(4096)
                    .slot_size(256),
            );
            let line = map.producer();
            line.head.store(3 << 1, Ordering::Relaxed);
            let mut c = Consumer::attach(map.clone(), Start::Newest).unwrap();
            line.head.store(35 << 1, Ordering::Relaxed);
            let mut buf = vec![0u8; 4096];
            let r = c.try_read(&mut buf);
            if overflow.overwrites() {
                assert_eq!(r, Ok(0), "{layout:?} {overflow:?}");
                assert_eq!(c.position(), 35);
            } else {
                assert_eq!(r, Err(ReadError::Corrupt("invalid block header")));
            }
        }
    }
}

/// Every 64th round of a read loop, whether its wait has run out (a
/// hostile producer can make the rounds endless): `TimedOut` past the
/// deadline, `WouldBlock` after 1024 rounds of a non-blocking read.
fn round_budget(rounds: u32, wait: Wait) -> Result<(), ReadError> {
    if rounds.is_multiple_of(64) {
        match wait {
            Wait::Until(d) if Instant::now() >= d => return Err(ReadError::TimedOut),
            Wait::No if rounds >= 1024 => return Err(ReadError::WouldBlock),
            _ => {}
        }
    }
    Ok(())
}
