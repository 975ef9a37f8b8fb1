//! Single-producer single-consumer descriptor ring in shared memory, with
//! sequence-numbered slots and lazy futex notification.
//!
//! Layout (one [`RingHeader`] followed by `cap` [`RingEntry`]s of `T`):
//!
//! ```text
//!  +-- producer line (64 B) --+-- consumer line (64 B) --+-- slots ...
//!  | tail word                | head word                | seq | entry
//! ```
//!
//! Index encoding: the *tail word* is `tail << 1 | consumer_sleeping` and
//! the *head word* is `head << 1 | producer_sleeping`, where `tail` and
//! `head` are free-running 63-bit counters of entries published / consumed.
//! The slot of counter value `c` is `c & (cap - 1)`; they never wrap in
//! practice (2^63 entries).
//!
//! **Sequence-numbered slots.** Each slot carries the counter value it was
//! last published for, plus one (`seq`, written after the entry with
//! Release). A consumer waiting for entry `c` polls `seq == c + 1` in that
//! slot: the one cache line it reads carries both the news and the entry,
//! so a hand-off costs one line transfer, not two (the tail word, then the
//! entry), and the tail line stays in the producer's cache. The slots of
//! one publish get their `seq` in reverse order, so a consumer that sees
//! the first one sees the whole batch (a message's descriptors arrive
//! together). The tail word is still advanced on every publish: it carries
//! the sleep flag and is what a consumer about to sleep reads.
//!
//! Lazy notification on one word: a consumer about to sleep sets bit 0 of
//! the tail word with a read-modify-write, which also returns the latest
//! tail; if the ring is still empty it `FUTEX_WAIT`s on the low 32 bits of
//! the tail word, expecting exactly the value it saw. Every publish changes
//! those bits (the counter moves), so a publish that races with the sleep
//! makes the wait return at once; a publish that finds bit 0 set wakes the
//! consumer. The producer sleeping for space is symmetric on the head word.
//! Because the flag and the counter share one atomic, the handshake needs
//! no fences and holds under any memory model loom checks. Under load
//! nobody sleeps and no system call is made.
//!
//! The peer may be hostile: each side keeps its *own* counter privately and
//! only reads the peer's, validating `0 <= tail - head <= cap` before
//! trusting it; a `seq` is only ever compared for equality with the value
//! the consumer expects, and a scan of slots never goes past `cap` entries
//! ahead of `head`. Entries are copied out before use.

use std::marker::PhantomData;
use std::time::Duration;

use crate::bell::{Bell, Rung};
use crate::sync::{AtomicU64, Ordering};

/// Plain-old-data entry types: `Copy`, `repr(C)`, every bit pattern valid,
/// no padding that matters.
///
/// # Safety
/// Implementors must be `repr(C)` structs of integers only, so that any
/// bytes a peer writes form a valid value.
pub unsafe trait Pod: Copy + Send + 'static {}

/// One entry of a ring with its sequence word (see the module docs).
#[repr(C)]
pub struct RingEntry<T> {
    /// The entry's counter value plus one, once published; stored by the
    /// producer after the entry (Release), loaded by the consumer before
    /// it (Acquire).
    pub seq: AtomicU64,
    /// The entry, accessed only by volatile copies.
    pub val: T,
}

impl<T: Pod + Default> RingEntry<T> {
    /// A never-published slot (for heap-backed rings in tests and loom
    /// models; a shared segment starts zeroed, which is the same).
    pub fn new() -> Self {
        Self {
            seq: AtomicU64::new(0),
            val: T::default(),
        }
    }
}

impl<T: Pod + Default> Default for RingEntry<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Producer cache line.
#[repr(C, align(64))]
pub struct TailLine {
    /// `tail << 1 | consumer_sleeping` (see module docs). The counter is
    /// written only by the producer; bit 0 is set by the consumer before it
    /// sleeps and cleared by whichever side ends the sleep.
    pub tail: AtomicU64,
    /// Nonzero once the consumer sleeps on its doorbell (`crate::bell`)
    /// rather than on the futex: a producer that finds the sleep flag set
    /// rings the bell instead of calling `FUTEX_WAKE`. Written by the
    /// consumer (sticky), read by the producer only after it found the
    /// flag set, so it costs nothing under load (same line as `tail`).
    pub bell: AtomicU64,
}

/// Consumer cache line.
#[repr(C, align(64))]
pub struct HeadLine {
    /// `head << 1 | producer_sleeping` (see module docs). The counter is
    /// written only by the consumer; bit 0 is set by the producer before it
    /// sleeps for space.
    pub head: AtomicU64,
    /// Nonzero once the producer sleeps for space on its doorbell (see
    /// [`TailLine::bell`]).
    pub bell: AtomicU64,
}

/// Ring header as laid out in shared memory.
#[repr(C)]
pub struct RingHeader {
    /// Producer's line.
    pub prod: TailLine,
    /// Consumer's line.
    pub cons: HeadLine,
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<TailLine>() == 64);
    assert!(std::mem::size_of::<HeadLine>() == 64);
    assert!(std::mem::size_of::<RingHeader>() == 128);
    assert!(std::mem::align_of::<RingHeader>() == 64);
    assert!(std::mem::offset_of!(RingHeader, cons) == 64);
    assert!(std::mem::offset_of!(TailLine, bell) == 8);
    assert!(std::mem::offset_of!(HeadLine, bell) == 8);
};

impl RingHeader {
    /// A zeroed header (for heap-backed rings in tests and loom models).
    pub fn new() -> Self {
        Self {
            prod: TailLine {
                tail: AtomicU64::new(0),
                bell: AtomicU64::new(0),
            },
            cons: HeadLine {
                head: AtomicU64::new(0),
                bell: AtomicU64::new(0),
            },
        }
    }
}

impl Default for RingHeader {
    fn default() -> Self {
        Self::new()
    }
}

/// Bytes a ring of `cap` entries of `T` occupies (header + slots).
pub const fn ring_bytes<T>(cap: usize) -> usize {
    std::mem::size_of::<RingHeader>() + cap * std::mem::size_of::<RingEntry<T>>()
}

/// Most slots one scan for published entries reads ahead (a consumer
/// learns of a long backlog a batch at a time).
const SCAN_MAX: u64 = 64;

/// The peer broke the ring protocol (a counter out of range).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt {
    /// Our own counter.
    pub ours: u64,
    /// The value the peer published.
    pub theirs: u64,
}

/// Counter part of a tail/head word.
const fn counter(word: u64) -> u64 {
    word >> 1
}

/// The futex value a sleeper expects: the low 32 bits of the word with the
/// sleep flag set.
const fn expect(word: u64) -> u32 {
    (word | 1) as u32
}

/// Raw location of a ring: header and slot array. Validity (alive, sized
/// for `cap` slots, 64-byte aligned) is established by whoever builds it.
struct RawRing<T> {
    hdr: *const RingHeader,
    entries: *mut RingEntry<T>,
    cap: u64,
    mask: u64,
}

// SAFETY: the pointers refer to shared memory kept alive by the owner of
// the Writer/Reader (see `Writer::new`); all cross-thread access to the
// header is through atomics and entries are only accessed by volatile copies.
unsafe impl<T: Pod> Send for RawRing<T> {}
// SAFETY: as for Send.
unsafe impl<T: Pod> Sync for RawRing<T> {}

impl<T: Pod> RawRing<T> {
    /// # Safety
    /// `hdr` must point to a live `RingHeader` followed (at `entries`) by
    /// `cap` slots of `T`, valid for as long as the returned value is
    /// used; `cap` a power of two.
    unsafe fn new(hdr: *const RingHeader, entries: *mut RingEntry<T>, cap: u32) -> Self {
        debug_assert!(cap.is_power_of_two());
        Self {
            hdr,
            entries,
            cap: u64::from(cap),
            mask: u64::from(cap) - 1,
        }
    }

    fn hdr(&self) -> &RingHeader {
        // SAFETY: `new`'s contract: hdr is live for our lifetime.
        unsafe { &*self.hdr }
    }

    fn slot(&self, counter: u64) -> *mut RingEntry<T> {
        // SAFETY: `counter & mask < cap`, and the slot array has `cap` slots.
        unsafe { self.entries.add((counter & self.mask) as usize) }
    }

    /// The entry of the slot of `counter`.
    fn val(&self, counter: u64) -> *mut T {
        // SAFETY: `slot` points into the slot array; no reference is made.
        unsafe { std::ptr::addr_of_mut!((*self.slot(counter)).val) }
    }

    /// The sequence word of the slot of `counter`.
    fn seq(&self, counter: u64) -> &AtomicU64 {
        // SAFETY: the slot is inside the live array (`new`'s contract); its
        // `seq` is only ever accessed atomically, by either side.
        unsafe { &(*self.slot(counter)).seq }
    }
}

/// What a wake attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeResult {
    /// The sleep flag was clear: nobody asked to be woken, no system call.
    NotFlagged,
    /// The flag was set and the kernel woke a sleeper.
    Woken,
    /// The flag was set but nobody slept on the word (a race with a sleeper
    /// that had just found data — or a peer that sets the flag and never
    /// sleeps; see `channel::notify`).
    Futile,
    /// The flag was set and the sleeper's line asked for its doorbell: it
    /// was rung (whether anyone polls it cannot be known here).
    Rang,
}

impl WakeResult {
    /// Whether a system call was made.
    pub fn issued(self) -> bool {
        self != WakeResult::NotFlagged
    }
}

/// Clear the sleep flag of `word` and wake its sleeper if the flag was set:
/// ring `bell` (the sleeper's doorbell) if the sleeper's `bell_word` asks
/// for it, else `FUTEX_WAKE`.
fn clear_and_wake(word: &AtomicU64, bell_word: &AtomicU64, bell: Option<&dyn Bell>) -> WakeResult {
    // SYNC: AcqRel RMW on the word the sleeper set its flag in.
    if word.fetch_and(!1, Ordering::AcqRel) & 1 != 0 {
        // SYNC: Acquire; the sleeper stored its bell word (Release,
        // SleepHandle::set_consumer_bell / set_producer_bell) before the
        // RMW that set the flag we just read, so a flag set
        // in bell mode is seen with its bell word.
        if let Some(bell) = bell.filter(|_| bell_word.load(Ordering::Acquire) != 0) {
            bell.ring();
            return WakeResult::Rang;
        }
        if crate::sync::futex_wake_counted(word) > 0 {
            WakeResult::Woken
        } else {
            WakeResult::Futile
        }
    } else {
        WakeResult::NotFlagged
    }
}

/// The producing end. Keeps its own `tail`; trusts nothing it reads back.
pub struct Writer<T> {
    ring: RawRing<T>,
    tail: u64,
    head_cache: u64,
    _t: PhantomData<T>,
}

/// The consuming end. Keeps its own `head`.
pub struct Reader<T> {
    ring: RawRing<T>,
    head: u64,
    tail_cache: u64,
    _t: PhantomData<T>,
}

impl<T: Pod> Writer<T> {
    /// # Safety
    /// `hdr` points to a live header followed by `cap` (a power of two)
    /// slots at `entries`, valid while this producer exists. A second
    /// producer (a hostile peer) can only corrupt data, never our memory.
    pub unsafe fn new(hdr: *const RingHeader, entries: *mut RingEntry<T>, cap: u32) -> Self {
        // SAFETY: forwarded contract.
        let ring = unsafe { RawRing::new(hdr, entries, cap) };
        // Start from the published tail (zero on a fresh ring); only our
        // private copy is trusted from here on.
        let tail = counter(ring.hdr().prod.tail.load(Ordering::Relaxed));
        Self {
            ring,
            tail,
            head_cache: tail,
            _t: PhantomData,
        }
    }

    /// Capacity in entries.
    pub fn capacity(&self) -> usize {
        self.ring.cap as usize
    }

    /// Free slots, refreshing the consumer's head. Errors if the consumer
    /// published an impossible head.
    pub fn free_slots(&mut self) -> Result<usize, Corrupt> {
        // SYNC: Acquire pairs with the Release RMW of the head word in
        // Reader::release; after it the consumer no longer reads the slots.
        let word = self.ring.hdr().cons.head.load(Ordering::Acquire);
        self.accept_head(counter(word))
    }

    fn accept_head(&mut self, head: u64) -> Result<usize, Corrupt> {
        let used = self.tail.wrapping_sub(head);
        if used > self.ring.cap {
            return Err(Corrupt {
                ours: self.tail,
                theirs: head,
            });
        }
        self.head_cache = head;
        Ok((self.ring.cap - used) as usize)
    }

    /// Free slots without reading shared memory (may be stale-low).
    pub fn cached_free(&self) -> usize {
        (self.ring.cap - self.tail.wrapping_sub(self.head_cache)) as usize
    }

    /// Write `items` into the ring without publishing. Caller must have
    /// checked `free_slots() >= items.len()`.
    pub fn write(&mut self, items: &[T], pending: &mut u64) {
        debug_assert!(items.len() <= self.cached_free());
        for (i, it) in items.iter().enumerate() {
            let p = self.ring.val(self.tail.wrapping_add(*pending + i as u64));
            // The slot is inside the entry array (RawRing::slot) and
            // not yet published, so an honest consumer does not read it.
            // SAFETY: as argued just above.
            unsafe { p.write_volatile(*it) };
        }
        *pending += items.len() as u64;
    }

    /// Publish `n` written entries. Returns `true` if the consumer is
    /// sleeping; its flag stays set so the caller can wake it now
    /// ([`Writer::wake_consumer`]) or later (coalescing).
    pub fn publish(&mut self, n: u64) -> bool {
        // Last slot first: a consumer that sees the first slot's seq sees
        // the whole batch.
        for i in (0..n).rev() {
            let c = self.tail.wrapping_add(i);
            // SYNC: Release publishes the entry written before it; pairs
            // with the Acquire load in Reader::scan.
            self.ring.seq(c).store(c.wrapping_add(1), Ordering::Release);
        }
        self.tail = self.tail.wrapping_add(n);
        let w = &self.ring.hdr().prod.tail;
        // SYNC: Release publishes the entry writes; pairs with the Acquire
        // load in Reader::available and the RMW in Reader::wait_for_data.
        let old = w.swap(self.tail << 1, Ordering::AcqRel);
        if old & 1 != 0 {
            // Keep the flag: the consumer is asleep until someone wakes it.
            w.fetch_or(1, Ordering::Relaxed);
            true
        } else {
            false
        }
    }

    /// Whether the consumer has said it sleeps (a hint).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn consumer_waiting(&self) -> bool {
        self.ring.hdr().prod.tail.load(Ordering::Relaxed) & 1 != 0
    }

    /// Wake the consumer if it is flagged as sleeping (ringing `bell`, the
    /// consumer's doorbell, if it sleeps on it).
    pub fn wake_consumer(&self, bell: Option<&dyn Bell>) -> WakeResult {
        let l = &self.ring.hdr().prod;
        clear_and_wake(&l.tail, &l.bell, bell)
    }

    /// Sleep until space may be free (bounded). Returns after a wake,
    /// a change, or `timeout`. The caller re-checks `free_slots`. With
    /// `bell` (an end in bell mode, see [`SleepHandle::set_producer_bell`]) the sleep
    /// polls the doorbell instead of the futex.
    pub fn wait_for_space(
        &mut self,
        need: usize,
        timeout: Duration,
        bell: Option<&dyn Bell>,
    ) -> Result<Rung, Corrupt> {
        let free = self.arm_space(need);
        let mut rung = Rung::Rang;
        if let Ok(Some(expected)) = free {
            rung = self.sleep_armed_space(expected, timeout, bell);
        } else {
            self.disarm_space();
        }
        free.map(|_| rung)
    }

    /// The second half of [`Writer::wait_for_space`], after an
    /// [`Writer::arm_space`] that returned `expected`: sleep on the head
    /// word (or `bell`) at most `timeout`, then clear the flag.
    pub fn sleep_armed_space(
        &self,
        expected: u32,
        timeout: Duration,
        bell: Option<&dyn Bell>,
    ) -> Rung {
        let rung = match bell {
            Some(b) => b.wait(timeout),
            None => {
                crate::sync::futex_wait(&self.ring.hdr().cons.head, expected, timeout);
                Rung::Rang
            }
        };
        self.disarm_space();
        rung
    }

    /// Set the sleeping-for-space flag (the first half of a sleep, for
    /// waiters that sleep elsewhere, such as an event loop): `Ok(None)` if
    /// `need` slots are free already (call [`Writer::disarm_space`]), else
    /// the futex value to sleep on.
    pub fn arm_space(&mut self, need: usize) -> Result<Option<u32>, Corrupt> {
        let w = &self.ring.hdr().cons.head;
        // SYNC: the RMW sets our flag and returns the latest head word; a
        // later release changes the word, so the futex wait cannot miss it.
        let old = w.fetch_or(1, Ordering::AcqRel);
        let free = self.accept_head(counter(old))?;
        Ok((free < need).then_some(expect(old)))
    }

    /// Clear the sleeping-for-space flag.
    pub fn disarm_space(&self) {
        self.ring.hdr().cons.head.fetch_and(!1, Ordering::Relaxed);
    }
}

impl<T: Pod> Reader<T> {
    /// # Safety
    /// As for [`Writer::new`], for the consuming side.
    pub unsafe fn new(hdr: *const RingHeader, entries: *mut RingEntry<T>, cap: u32) -> Self {
        // SAFETY: forwarded contract.
        let ring = unsafe { RawRing::new(hdr, entries, cap) };
        let head = counter(ring.hdr().cons.head.load(Ordering::Relaxed));
        Self {
            ring,
            head,
            tail_cache: head,
            _t: PhantomData,
        }
    }

    /// Capacity in entries.
    pub fn capacity(&self) -> usize {
        self.ring.cap as usize
    }

    /// Entries available to read (from the cache when it still has some,
    /// else looking at the next slots' sequence words).
    pub fn available(&mut self) -> Result<usize, Corrupt> {
        if self.tail_cache != self.head {
            return Ok(self.tail_cache.wrapping_sub(self.head) as usize);
        }
        self.scan()
    }

    /// Entries available, always looking for newly published ones.
    pub fn available_fresh(&mut self) -> Result<usize, Corrupt> {
        self.scan()
    }

    /// Extend the known-published run past `tail_cache` by the slots whose
    /// seq says they were published for exactly the counter expected there
    /// (at most [`SCAN_MAX`] more, never past `cap` ahead of `head`).
    /// Returns the entries available. Honest producers publish the seq
    /// after the entry and before advancing the tail word, so this agrees
    /// with the tail; a hostile one can only make us read its own bytes.
    /// The tail word is not read here (a spinning consumer that read it
    /// would pull the producer's line back on every publish, which cost
    /// a measured 5% of a ping-pong): [`Reader::check_tail`] and the sleep
    /// path validate it.
    fn scan(&mut self) -> Result<usize, Corrupt> {
        let limit = self.head.wrapping_add(self.ring.cap);
        let mut t = self.tail_cache;
        let mut n = 0;
        // SYNC: Acquire pairs with the Release store of the seq in
        // Writer::publish: the entry of a slot whose seq matches is written.
        while t != limit
            && n < SCAN_MAX
            && self.ring.seq(t).load(Ordering::Acquire) == t.wrapping_add(1)
        {
            t = t.wrapping_add(1);
            n += 1;
        }
        self.tail_cache = t;
        Ok(t.wrapping_sub(self.head) as usize)
    }

    /// Validate the producer's tail word now (a consumer that polls rarely,
    /// such as a drain of deallocation notices that found none, or one
    /// about to sleep through another handle, calls this so that a peer
    /// that wrote an impossible tail is reported at once). Only validates:
    /// entries are still found by their seqs, never through this load.
    pub fn check_tail(&self) -> Result<(), Corrupt> {
        // SYNC: Relaxed: only validated (see above); the cache of what is
        // available is not touched, so nothing is read through it.
        let tail = counter(self.ring.hdr().prod.tail.load(Ordering::Relaxed));
        self.validate_tail(tail)
    }

    /// Whether `tail` is possible: at most `cap` ahead of `head`, or
    /// behind it by at most `cap` (an honest tail lags the seqs a consumer
    /// already followed by at most one publish).
    fn validate_tail(&self, tail: u64) -> Result<(), Corrupt> {
        let ahead = tail.wrapping_sub(self.head);
        let behind = self.head.wrapping_sub(tail);
        if ahead > self.ring.cap && behind > self.ring.cap {
            return Err(Corrupt {
                ours: self.head,
                theirs: tail,
            });
        }
        Ok(())
    }

    /// Validate a tail value read from shared memory and cache it. On a
    /// corrupt value the cache is left as it was. An honest tail may lag
    /// behind entries already found by their seq (a publish stores the
    /// seqs before it advances the tail), by at most `cap`.
    fn accept_tail(&mut self, tail: u64) -> Result<usize, Corrupt> {
        self.validate_tail(tail)?;
        let ahead = tail.wrapping_sub(self.head);
        // Keep what a scan already found: the slots it covers stay
        // unreleased until read.
        if ahead <= self.ring.cap && ahead > self.tail_cache.wrapping_sub(self.head) {
            self.tail_cache = tail;
        }
        Ok(self.tail_cache.wrapping_sub(self.head) as usize)
    }

    /// Copy out the entry `i` positions after head (`i < available()`).
    pub fn peek(&self, i: usize) -> T {
        debug_assert!((i as u64) < self.tail_cache.wrapping_sub(self.head));
        let p = self.ring.val(self.head.wrapping_add(i as u64));
        // Slot inside the slot array; T is Pod so any bytes the
        // peer wrote (even concurrently) form a valid value; we copy it out
        // once and validate the copy.
        // SAFETY: as argued just above.
        unsafe { p.read_volatile() }
    }

    /// Consume `n` entries (already copied out) and publish the new head.
    /// Returns `true` if the producer sleeps waiting for space (its flag
    /// stays set; call [`Reader::wake_producer`]).
    pub fn release(&mut self, n: usize) -> bool {
        self.head = self.head.wrapping_add(n as u64);
        let w = &self.ring.hdr().cons.head;
        // SYNC: Release orders our reads of the released slots before the
        // producer reuses them; pairs with the Acquire in
        // Writer::free_slots and the RMW in Writer::wait_for_space.
        let old = w.swap(self.head << 1, Ordering::AcqRel);
        if old & 1 != 0 {
            w.fetch_or(1, Ordering::Relaxed);
            true
        } else {
            false
        }
    }

    /// Wake the producer if it is flagged as sleeping for space (ringing
    /// `bell`, its doorbell, if it sleeps on it).
    pub fn wake_producer(&self, bell: Option<&dyn Bell>) -> WakeResult {
        let l = &self.ring.hdr().cons;
        clear_and_wake(&l.head, &l.bell, bell)
    }

    /// Sleep until data may be available (bounded by `timeout`). With
    /// `bell` (an end in bell mode, see [`SleepHandle::set_consumer_bell`]) the sleep
    /// polls the doorbell instead of the futex; a hang-up it reports is
    /// returned as `Ok(Rung::HungUp)` for the caller to check the peer.
    pub fn wait_for_data(
        &mut self,
        timeout: Duration,
        bell: Option<&dyn Bell>,
    ) -> Result<Rung, Corrupt> {
        let w = &self.ring.hdr().prod.tail;
        // SYNC: the RMW sets our flag and returns the latest tail word
        // (Acquire: the entries it covers are written); any later publish
        // changes the word, so the futex wait cannot miss it.
        let old = w.fetch_or(1, Ordering::AcqRel);
        let avail = self.accept_tail(counter(old));
        let w = &self.ring.hdr().prod.tail;
        let mut rung = Rung::Rang;
        if matches!(avail, Ok(0)) {
            match bell {
                Some(b) => rung = b.wait(timeout),
                None => {
                    crate::sync::futex_wait(w, expect(old), timeout);
                }
            }
        }
        w.fetch_and(!1, Ordering::Relaxed);
        avail.map(|_| rung)
    }
}

/// A handle on a ring's header for a thread that does not own the consumer
/// end but wants to sleep until the ring has data (multi-ring waits).
pub struct SleepHandle {
    hdr: *const RingHeader,
    cap: u64,
}

// SAFETY: the header lives in a mapping owned by whoever created the
// handle (see `SleepHandle::new`); only atomics are accessed through it.
unsafe impl Send for SleepHandle {}
// SAFETY: as for Send.
unsafe impl Sync for SleepHandle {}

impl SleepHandle {
    /// # Safety
    /// `hdr` must point to a live `RingHeader` of a ring of `cap` entries
    /// for as long as the handle is used.
    pub unsafe fn new(hdr: *const RingHeader, cap: u32) -> Self {
        Self {
            hdr,
            cap: u64::from(cap),
        }
    }

    fn hdr(&self) -> &RingHeader {
        // SAFETY: `new`'s contract.
        unsafe { &*self.hdr }
    }

    /// Set the consumer's sleep flag. Returns `None` if data is already
    /// pending (do not sleep; call `disarm`), else the futex value to wait
    /// for on [`SleepHandle::word`].
    pub fn arm(&self) -> Option<u32> {
        let h = self.hdr();
        // SYNC: RMW returns the latest tail word (as in Reader::wait_for_data).
        let old = h.prod.tail.fetch_or(1, Ordering::AcqRel);
        let head = counter(h.cons.head.load(Ordering::Relaxed));
        // Empty, or a publish under way whose tail has not moved yet (the
        // consumer already took its entries by their seqs): its swap will
        // change the word, so the wait returns at once.
        (head.wrapping_sub(counter(old)) <= self.cap).then_some(expect(old))
    }

    /// The consumer of this ring sleeps on its doorbell from now on: a
    /// producer that finds its sleep flag set rings the bell instead of
    /// waking the futex (sticky; needs no access to the reader).
    pub fn set_consumer_bell(&self) {
        // SYNC: Release pairs with the Acquire load in clear_and_wake.
        self.hdr().prod.bell.store(1, Ordering::Release);
    }

    /// The producer of this ring sleeps for space on its doorbell from now
    /// on (sticky, as [`SleepHandle::set_consumer_bell`]).
    pub fn set_producer_bell(&self) {
        // SYNC: Release pairs with the Acquire load in clear_and_wake.
        self.hdr().cons.bell.store(1, Ordering::Release);
    }

    /// Wake this ring's producer if it sleeps for space (ringing `bell` if
    /// it sleeps on it), without access to the consuming end (closing).
    pub fn wake_producer(&self, bell: Option<&dyn Bell>) -> WakeResult {
        let l = &self.hdr().cons;
        clear_and_wake(&l.head, &l.bell, bell)
    }

    /// Clear the sleep flag.
    pub fn disarm(&self) {
        self.hdr().prod.tail.fetch_and(!1, Ordering::Relaxed);
    }

    /// The word to sleep on.
    pub fn word(&self) -> &AtomicU64 {
        &self.hdr().prod.tail
    }
}

/// The consumer side of a ring as a waiter sees it: entries to take (the
/// tail word, flag in bit 0).
impl crate::wait::Readiness for &SleepHandle {
    fn is_ready(&mut self) -> bool {
        let h = self.hdr();
        // SYNC: Acquire pairs with the producer's publishing swap of the
        // tail word (a look only; `prepare_sleep` is the RMW that decides).
        let tail = counter(h.prod.tail.load(Ordering::Acquire));
        counter(h.cons.head.load(Ordering::Relaxed)) != tail
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        self.arm()
    }

    fn sleep(&mut self, armed: u32, slice: std::time::Duration) {
        crate::sync::futex_wait(self.word(), armed, slice);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    // SAFETY: repr(C) integers only.
    unsafe impl Pod for u64 {}

    struct HeapRing {
        hdr: Box<RingHeader>,
        entries: Vec<RingEntry<u64>>,
    }

    fn heap(cap: u32) -> HeapRing {
        HeapRing {
            hdr: Box::new(RingHeader::new()),
            entries: (0..cap).map(|_| RingEntry::new()).collect(),
        }
    }

    #[test]
    fn fifo_and_capacity() {
        let mut h = heap(4);
        let hp: *const RingHeader = &*h.hdr;
        let ep = h.entries.as_mut_ptr();
        // SAFETY: `h` outlives p and c; cap matches the vector.
        let (mut p, mut c) = unsafe { (Writer::new(hp, ep, 4), Reader::new(hp, ep, 4)) };
        assert_eq!(p.free_slots().unwrap(), 4);
        let mut pend = 0;
        p.write(&[1, 2, 3], &mut pend);
        assert_eq!(c.available().unwrap(), 0);
        p.publish(pend);
        assert_eq!(c.available().unwrap(), 3);
        assert_eq!((c.peek(0), c.peek(2)), (1, 3));
        c.release(2);
        assert_eq!(p.free_slots().unwrap(), 3);
        for round in 0..100u64 {
            assert!(p.free_slots().unwrap() >= 1);
            let mut pend = 0;
            p.write(&[round], &mut pend);
            p.publish(pend);
            let n = c.available_fresh().unwrap();
            assert_eq!(c.peek(n - 1), round);
            c.release(n);
        }
    }

    #[test]
    fn a_batch_is_seen_whole_and_stale_or_forged_seqs_are_not_entries() {
        let mut h = heap(4);
        let hp: *const RingHeader = &*h.hdr;
        let ep = h.entries.as_mut_ptr();
        // SAFETY: as above.
        let (mut p, mut c) = unsafe { (Writer::new(hp, ep, 4), Reader::new(hp, ep, 4)) };
        let mut pend = 0;
        p.write(&[1, 2, 3], &mut pend);
        assert_eq!(c.available().unwrap(), 0, "written is not published");
        p.publish(pend);
        assert_eq!(c.available().unwrap(), 3);
        c.release(3);
        // Slot 3 was never published; slots 0..3 carry last lap's seqs,
        // which are not the ones expected for counters 4..7.
        assert_eq!(c.available().unwrap(), 0);
        // A forged seq for a counter far ahead is not an entry either.
        h.entries[3].seq.store(100, Ordering::Relaxed);
        assert_eq!(c.available_fresh().unwrap(), 0);
        // A hostile producer marking every slot as published makes at most
        // `cap` entries appear, never more.
        for (i, s) in h.entries.iter().enumerate() {
            let ctr = 3 + ((i as u64 + 1) % 4);
            s.seq.store(ctr + 1, Ordering::Relaxed);
        }
        assert!(c.available_fresh().unwrap() <= 4);
    }

    /// An entry of several words, so a torn or stale read shows.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    struct Rec {
        n: u64,
        check: u64,
        pad: [u32; 2],
    }
    // SAFETY: repr(C) integers only.
    unsafe impl Pod for Rec {}

    fn rec(n: u64) -> Rec {
        Rec {
            n,
            check: n.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            pad: [n as u32, !(n as u32)],
        }
    }

    /// The protocol between two threads, over a heap ring of 4 slots:
    /// batches of 1 to 3 entries, both ends sleeping (futex) when the ring
    /// is full or empty. Every entry arrives once, whole, in order. Under
    /// Miri the race detector also checks that the entries' plain
    /// (volatile) writes and reads are ordered by the seq and head words'
    /// Release/Acquire pairs, and no wakeup may be lost: every sleep is
    /// bounded far beyond what the run takes.
    #[test]
    fn two_threads_hand_over_every_entry_in_order_through_wraps_and_sleeps() {
        const CAP: u32 = 4;
        const LONG: Duration = Duration::from_secs(20);
        let items = crate::testing::scaled(20_000, 120) as u64;
        let hdr = Box::new(RingHeader::new());
        let mut entries: Vec<RingEntry<Rec>> = (0..CAP).map(|_| RingEntry::new()).collect();
        let hp: *const RingHeader = &*hdr;
        let ep = entries.as_mut_ptr();
        // SAFETY: `hdr` and `entries` outlive the scope the ends are used
        // in and are not touched otherwise meanwhile; cap matches.
        let (mut p, mut c) = unsafe { (Writer::new(hp, ep, CAP), Reader::new(hp, ep, CAP)) };
        let start = std::time::Instant::now();
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut next = 0u64;
                while next < items {
                    let free = p.free_slots().unwrap();
                    if free == 0 {
                        p.wait_for_space(1, LONG, None).unwrap();
                        continue;
                    }
                    // Batches of 1, 2, 3, 1, ... as room allows.
                    let n = free
                        .min(1 + (next % 3) as usize)
                        .min((items - next) as usize);
                    let batch: Vec<Rec> = (next..next + n as u64).map(rec).collect();
                    let mut pend = 0;
                    p.write(&batch, &mut pend);
                    if p.publish(pend) {
                        p.wake_consumer(None);
                    }
                    next += n as u64;
                }
            });
            let mut next = 0u64;
            while next < items {
                let n = c.available().unwrap();
                if n == 0 {
                    c.wait_for_data(LONG, None).unwrap();
                    continue;
                }
                for i in 0..n {
                    assert_eq!(c.peek(i), rec(next), "in order, whole, once");
                    next += 1;
                }
                if c.release(n) {
                    c.wake_producer(None);
                }
            }
            assert_eq!(c.available_fresh().unwrap(), 0, "nothing more");
        });
        assert!(
            start.elapsed() < LONG,
            "a wakeup was lost (a sleep ran out)"
        );
        drop((hdr, entries));
    }

    /// A doorbell that counts its rings.
    #[derive(Default)]
    struct CountingBell(std::cell::Cell<u32>);

    impl Bell for CountingBell {
        fn ring(&self) {
            self.0.set(self.0.get() + 1);
        }
        fn wait(&self, _timeout: Duration) -> Rung {
            Rung::TimedOut
        }
    }

    /// The sleep-flag handshake step by step (one thread): a sleeper's flag
    /// survives the publish that finds it, that publish changes the futex
    /// word the sleeper expects, and exactly one wake clears it — by the
    /// futex, or by ringing the consumer's bell once it asked for one.
    #[test]
    fn a_sleep_flag_is_kept_by_the_publish_and_cleared_by_one_wake() {
        let mut h = heap(4);
        let hp: *const RingHeader = &*h.hdr;
        let ep = h.entries.as_mut_ptr();
        // SAFETY: `h` outlives p, c and s; cap matches the vector.
        let (mut p, mut c, s) = unsafe {
            (
                Writer::new(hp, ep, 4),
                Reader::new(hp, ep, 4),
                SleepHandle::new(hp, 4),
            )
        };
        assert_eq!(p.wake_consumer(None), WakeResult::NotFlagged);
        let expected = s.arm().expect("an empty ring: sleep");
        assert!(p.consumer_waiting());
        let mut pend = 0;
        p.write(&[7], &mut pend);
        assert!(p.publish(pend), "the publish finds the sleeper");
        assert!(p.consumer_waiting(), "and leaves the flag for the wake");
        assert_ne!(
            s.word().load(Ordering::Relaxed) as u32,
            expected,
            "a late sleep returns at once"
        );
        assert_eq!(
            p.wake_consumer(None),
            WakeResult::Futile,
            "flagged, nobody asleep"
        );
        assert!(!p.consumer_waiting());
        assert_eq!(
            p.wake_consumer(None),
            WakeResult::NotFlagged,
            "one wake per flag"
        );
        // Data pending: arming says do not sleep (and the flag is taken back).
        assert_eq!(s.arm(), None);
        s.disarm();
        assert_eq!(c.available().unwrap(), 1);
        assert_eq!(c.peek(0), 7);
        c.release(1);
        // The consumer sleeps on its bell from now on: the wake rings it.
        let bell = CountingBell::default();
        s.set_consumer_bell();
        assert!(s.arm().is_some());
        let mut pend = 0;
        p.write(&[8], &mut pend);
        assert!(p.publish(pend));
        assert_eq!(p.wake_consumer(Some(&bell)), WakeResult::Rang);
        assert_eq!(bell.0.get(), 1);
        assert_eq!(p.wake_consumer(Some(&bell)), WakeResult::NotFlagged);
        assert_eq!(bell.0.get(), 1);
        // The producer's side: sleeping for space on a full ring.
        assert_eq!(p.free_slots().unwrap(), 3);
        let mut pend = 0;
        p.write(&[9, 10, 11], &mut pend);
        p.publish(pend);
        assert_eq!(p.free_slots().unwrap(), 0);
        assert!(p.arm_space(1).unwrap().is_some(), "full: sleep");
        assert_eq!(c.available().unwrap(), 4);
        assert!(c.release(2), "the release finds the producer asleep");
        assert_eq!(c.wake_producer(None), WakeResult::Futile);
        assert_eq!(c.wake_producer(None), WakeResult::NotFlagged);
        assert_eq!(p.arm_space(1).unwrap(), None, "room now");
        p.disarm_space();
        assert_eq!(p.free_slots().unwrap(), 2);
    }

    #[test]
    fn corrupt_counters_detected() {
        let mut h = heap(4);
        let hp: *const RingHeader = &*h.hdr;
        let ep = h.entries.as_mut_ptr();
        // SAFETY: as above.
        let (mut p, mut c) = unsafe { (Writer::new(hp, ep, 4), Reader::new(hp, ep, 4)) };
        h.hdr.prod.tail.store(100 << 1, Ordering::Relaxed);
        // Polling reads only the slots; the tail is checked on request and
        // by a consumer about to sleep.
        assert_eq!(c.available().unwrap(), 0);
        assert!(c.check_tail().is_err());
        assert!(c.wait_for_data(Duration::ZERO, None).is_err());
        // A tail that lags what the slots show (a publish under way) is
        // not corrupt.
        h.hdr.prod.tail.store(0, Ordering::Relaxed);
        let mut pend = 0;
        p.write(&[1, 2], &mut pend);
        p.publish(pend);
        h.hdr.prod.tail.store(0, Ordering::Relaxed);
        assert_eq!(c.available().unwrap(), 2);
        c.release(2);
        assert_eq!(c.available().unwrap(), 0);
        h.hdr.prod.tail.store(0, Ordering::Relaxed);
        h.hdr.cons.head.store(5 << 1, Ordering::Relaxed);
        assert!(p.free_slots().is_err());
    }
}
