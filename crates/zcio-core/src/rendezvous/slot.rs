//! The rendezvous slot: one message in flight per direction, handed over
//! with futex waits on a single state word.
//!
//! State word encoding: `seq << 4 | send_waiting << 3 | recv_waiting << 2 | st`
//! with `st` = [`EMPTY`], [`FULL`] or [`TAKEN`] and `seq` a free-running
//! message counter (so every hand-over changes the futex word's low bits).
//!
//! * Sender: writes the message words, then swaps the state to
//!   `FULL(seq+1)` (release) and wakes a receiver that flagged itself; then
//!   waits — setting its own flag first — until the state says `TAKEN`,
//!   and resets it to `EMPTY`. On timeout it *retracts*: a CAS from the
//!   exact `FULL` word back to `EMPTY`; if the CAS fails, the receiver took
//!   the message after all and the send succeeded.
//! * Receiver: waits — flag first — for `FULL`, copies the words out, then
//!   CASes `FULL(seq)` to `TAKEN(seq)` (failing if the sender retracted) and
//!   wakes a sender that flagged itself.
//!
//! Each flag lives in the word the other side changes with an RMW, so the
//! futex wait cannot miss the change (the same one-word argument as the
//! channel ring). The peer may be hostile: every value read is validated,
//! every wait is bounded by the caller.
//!
//! A side that sleeps in an event loop (`crate::bell`) marks its bell word
//! in the slot (`recv_bell` / `send_bell`, sticky) before it sets its flag;
//! the other side, finding the flag, rings the doorbell instead of the
//! futex. The async sender runs the send in its phases ([`publish`],
//! [`arm_taken`], [`retract`]) so it can sleep between them.

use std::time::{Duration, Instant};

use crate::bell::Bell;
use crate::sync::{AtomicU64, Ordering};
use crate::wait::{wait_ready, Readiness, SpinBudget, Waited};

/// The most words one rendezvous message carries.
pub const WORDS: usize = 8;

/// No message.
pub const EMPTY: u64 = 0;
/// A message waits to be taken.
pub const FULL: u64 = 1;
/// The receiver has taken the message; the sender resets the slot.
pub const TAKEN: u64 = 2;
const ST: u64 = 3;
const RECV_WAITING: u64 = 1 << 2;
const SEND_WAITING: u64 = 1 << 3;

/// One direction's slot, as laid out in shared memory.
#[repr(C, align(128))]
pub struct Slot {
    /// See the module docs.
    pub state: AtomicU64,
    /// Caller-defined label (e.g. an operation code).
    pub label: AtomicU64,
    /// `words | nfds << 32`.
    pub counts: AtomicU64,
    /// Message words (`counts & 0xffff_ffff` of them are meaningful).
    pub words: [AtomicU64; WORDS],
    /// Nonzero once the receiver sleeps on its doorbell (sticky).
    pub recv_bell: AtomicU64,
    /// Nonzero once the sender waits for `TAKEN` on its doorbell (sticky).
    pub send_bell: AtomicU64,
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Slot>() == 128);
    assert!(std::mem::offset_of!(Slot, words) == 24);
    assert!(std::mem::offset_of!(Slot, recv_bell) == 88);
    assert!(std::mem::offset_of!(Slot, send_bell) == 96);
};

impl Slot {
    /// A zeroed slot (tests and loom models; shared slots start zeroed).
    pub fn new() -> Self {
        Self {
            state: AtomicU64::new(0),
            label: AtomicU64::new(0),
            counts: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            recv_bell: AtomicU64::new(0),
            send_bell: AtomicU64::new(0),
        }
    }
}

impl Default for Slot {
    fn default() -> Self {
        Self::new()
    }
}

/// A message copied out of a slot (validated counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raw {
    /// Label.
    pub label: u64,
    /// Words (the first `len` are the message).
    pub words: [u64; WORDS],
    /// Number of words.
    pub len: usize,
    /// Number of descriptors that travel on the socket.
    pub nfds: usize,
    /// Sequence number of the hand-over.
    pub seq: u64,
}

/// Why a slot operation did not complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotError {
    /// Nothing happened before the deadline (a send was retracted).
    TimedOut,
    /// The slot holds a state the protocol cannot produce (hostile peer).
    Corrupt,
}

/// Wake the side whose flag we found: `FUTEX_WAKE`, and also ring `bell`
/// if its `bell_word` says it may sleep on its doorbell. Both, because an
/// endpoint in bell mode may still have a blocking caller asleep on the
/// futex (its blocking calls keep working), and the flag cannot say which
/// of the two set it.
fn wake(slot: &Slot, bell_word: &AtomicU64, bell: Option<&dyn Bell>) {
    // SYNC: Acquire pairs with the Release store of the bell word
    // (mark_*_bell), which precedes the flag RMW we found.
    if let Some(b) = bell.filter(|_| bell_word.load(Ordering::Acquire) != 0) {
        b.ring();
    }
    crate::sync::futex_wake(&slot.state);
}

/// The receiver of `slot` sleeps on its doorbell from now on (sticky).
pub fn mark_recv_bell(slot: &Slot) {
    // SYNC: Release pairs with the Acquire load in `wake`.
    slot.recv_bell.store(1, Ordering::Release);
}

/// The sender of `slot` waits for `TAKEN` on its doorbell from now on.
pub fn mark_send_bell(slot: &Slot) {
    // SYNC: Release pairs with the Acquire load in `wake`.
    slot.send_bell.store(1, Ordering::Release);
}

/// Sender, first phase: put `raw` in the slot (which must be `EMPTY`) and
/// wake a receiver that flagged itself (ringing `bell` if it sleeps on
/// it). Returns the message's sequence number.
pub fn publish(slot: &Slot, raw: &Raw, bell: Option<&dyn Bell>) -> Result<u64, SlotError> {
    let cur = slot.state.load(Ordering::Acquire);
    if cur & ST != EMPTY {
        return Err(SlotError::Corrupt);
    }
    let seq = (cur >> 4).wrapping_add(1);
    slot.label.store(raw.label, Ordering::Relaxed);
    slot.counts
        .store(raw.len as u64 | (raw.nfds as u64) << 32, Ordering::Relaxed);
    for (d, s) in slot.words.iter().zip(&raw.words[..raw.len]) {
        d.store(*s, Ordering::Relaxed);
    }
    let full = seq << 4 | FULL;
    // SYNC: the swap releases the words above; pairs with the Acquire load
    // (or CAS) in `take`. It also returns the receiver's flag.
    let old = slot.state.swap(full, Ordering::AcqRel);
    if old & RECV_WAITING != 0 {
        wake(slot, &slot.recv_bell, bell);
    }
    Ok(seq)
}

/// Where a published message stands (see [`arm_taken`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handover {
    /// Taken, and the slot reset to `EMPTY`: the send is complete.
    Taken,
    /// Not taken yet; our flag is set: sleep on this futex value (or on
    /// the doorbell) and ask again.
    Pending(u32),
}

/// Sender, second phase: set our flag and see whether message `seq` was
/// taken; if so, reset the slot (keeping a receiver's flag: it already
/// waits for the next message, whose swap must wake it).
pub fn arm_taken(slot: &Slot, seq: u64) -> Result<Handover, SlotError> {
    // SYNC: the RMW sets our flag and returns the latest state; `take`
    // changes the word with a CAS, so a wait on it cannot miss it.
    let s = slot.state.fetch_or(SEND_WAITING, Ordering::AcqRel);
    match (s & ST, s >> 4 == seq) {
        (TAKEN, true) => {
            let mut cur = s | SEND_WAITING;
            // SYNC: AcqRel CAS loop; the receiver only ever adds its flag.
            while let Err(now) = slot.state.compare_exchange(
                cur,
                seq << 4 | EMPTY | (cur & RECV_WAITING),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                if now >> 4 != seq || now & ST != TAKEN {
                    return Err(SlotError::Corrupt);
                }
                cur = now;
            }
            Ok(Handover::Taken)
        }
        (FULL, true) => Ok(Handover::Pending((s | SEND_WAITING) as u32)),
        _ => Err(SlotError::Corrupt),
    }
}

/// Sender, giving up: take message `seq` back if it is still exactly our
/// untaken message (`true`). `false`: it was taken meanwhile — finish the
/// send with [`arm_taken`].
pub fn retract(slot: &Slot, seq: u64) -> bool {
    let mut cur = slot.state.load(Ordering::Acquire);
    // A CAS that fails because a flag was added meanwhile tries again; one
    // that finds the message taken (or anything else) gives up.
    while cur & ST == FULL && cur >> 4 == seq {
        // SYNC: AcqRel CAS from the exact FULL word; pairs with the
        // receiver's CAS in `take` (only one of the two succeeds).
        match slot.state.compare_exchange(
            cur,
            seq << 4 | EMPTY | (cur & RECV_WAITING),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return true,
            Err(now) => cur = now,
        }
    }
    false
}

/// The sender's wait for the hand-over of message `seq`, as the one wait
/// loop (`crate::wait::wait_ready`) sees it: the look is the state word,
/// the preparation is [`arm_taken`] (which also finishes a send it finds
/// taken), the sleep a futex wait on the state word; the partner's
/// liveness is `alive`'s to say.
struct TakenWait<'a, A> {
    slot: &'a Slot,
    seq: u64,
    alive: A,
    /// How the last preparation ended: taken (the send is complete) or a
    /// state the protocol cannot produce.
    done: Option<Result<(), SlotError>>,
}

impl<A: FnMut() -> bool> Readiness for TakenWait<'_, A> {
    fn is_ready(&mut self) -> bool {
        // SYNC: pairs with the CAS in `take` (the preparation re-reads
        // with an RMW).
        self.slot.state.load(Ordering::Acquire) & ST != FULL
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        match arm_taken(self.slot, self.seq) {
            Ok(Handover::Pending(v)) => Some(v),
            Ok(Handover::Taken) => {
                self.done = Some(Ok(()));
                None
            }
            Err(e) => {
                self.done = Some(Err(e));
                None
            }
        }
    }

    fn sleep(&mut self, armed: u32, slice: Duration) {
        crate::sync::futex_wait(&self.slot.state, armed, slice);
    }

    fn alive(&mut self) -> bool {
        (self.alive)()
    }
}

/// Sender: put `raw` in the slot and wait until it is taken (a blocking
/// sender, on the one wait loop: spin for `budget`, then futex waits;
/// `bell` is rung for a receiver that sleeps on it). Gives up — retracting
/// the message if it was not taken meanwhile — at `deadline` or once
/// `alive` says the partner is gone (both `TimedOut`: the caller knows
/// which).
pub fn send(
    slot: &Slot,
    raw: &Raw,
    budget: &mut SpinBudget,
    deadline: Option<Instant>,
    alive: impl FnMut() -> bool,
    bell: Option<&dyn Bell>,
) -> Result<u64, SlotError> {
    let seq = publish(slot, raw, bell)?;
    let mut h = TakenWait {
        slot,
        seq,
        alive,
        done: None,
    };
    // Only the first wait spins: a receiver that is running takes the
    // message within microseconds, and then no flag is set and no sleep
    // taken.
    let mut no_spin = SpinBudget::new(Duration::ZERO);
    let mut spin = Some(budget);
    loop {
        let b = spin.take().unwrap_or(&mut no_spin);
        let waited = wait_ready(&mut h, b, deadline);
        if let Some(done) = h.done.take() {
            return done.map(|()| seq);
        }
        if waited != Waited::Ready && retract(slot, seq) {
            return Err(SlotError::TimedOut);
        }
        // Taken (after the spin, or meanwhile, when the retraction failed):
        // finish the send.
        match arm_taken(slot, seq)? {
            Handover::Taken => return Ok(seq),
            Handover::Pending(_) => {}
        }
    }
}

/// Receiver: whether a message is waiting (cheap check, no flag).
pub fn ready(slot: &Slot) -> bool {
    slot.state.load(Ordering::Acquire) & ST == FULL
}

/// Receiver: flag that we are about to sleep on this slot; returns the
/// futex value to wait for, or `None` if a message is already there.
pub fn prepare_sleep(slot: &Slot) -> Option<u32> {
    // SYNC: the RMW sets our flag and returns the latest state; the sender's
    // publishing swap changes the word, so a wait on it cannot miss it.
    let s = slot.state.fetch_or(RECV_WAITING, Ordering::AcqRel);
    (s & ST != FULL).then_some((s | RECV_WAITING) as u32)
}

/// Receiver: take the message if there is one. `Ok(None)`: nothing there
/// (or the sender retracted it while we copied). A sender that waits for
/// the hand-over is woken (`bell` rung if it waits on it).
pub fn take(slot: &Slot, bell: Option<&dyn Bell>) -> Result<Option<Raw>, SlotError> {
    // SYNC: Acquire pairs with the sender's publishing swap.
    let s = slot.state.load(Ordering::Acquire);
    if s & ST != FULL {
        return Ok(None);
    }
    let counts = slot.counts.load(Ordering::Relaxed);
    let (len, nfds) = ((counts & 0xffff_ffff) as usize, (counts >> 32) as usize);
    if len > WORDS || nfds > crate::sys::fdpass::MAX_FDS {
        return Err(SlotError::Corrupt);
    }
    let mut raw = Raw {
        label: slot.label.load(Ordering::Relaxed),
        words: [0; WORDS],
        len,
        nfds,
        seq: s >> 4,
    };
    for (d, w) in raw.words.iter_mut().zip(&slot.words[..len]) {
        *d = w.load(Ordering::Relaxed);
    }
    let taken = (s >> 4) << 4 | TAKEN;
    // SYNC: the CAS from the exact FULL word we read: if it succeeds, the
    // words we copied are that message's (the sender writes new words only
    // after seeing TAKEN and resetting to EMPTY). Release orders our reads
    // before the sender's reuse; pairs with its flag RMW in `send`.
    match slot
        .state
        .compare_exchange(s, taken, Ordering::AcqRel, Ordering::Acquire)
    {
        Ok(_) => {
            if s & SEND_WAITING != 0 {
                wake(slot, &slot.send_bell, bell);
            }
            Ok(Some(raw))
        }
        // The word changed under us: flags were added (retry) or the
        // sender retracted (nothing to take).
        Err(now) if now & ST == FULL && now >> 4 == s >> 4 => take(slot, bell),
        Err(_) => Ok(None),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A send that gives up `t` from now (no spin: these tests are about
    /// the protocol).
    fn send_for(slot: &Slot, raw: &Raw, t: Duration) -> Result<u64, SlotError> {
        let deadline = Some(std::time::Instant::now() + t);
        send(
            slot,
            raw,
            &mut SpinBudget::new(Duration::ZERO),
            deadline,
            || true,
            None,
        )
    }

    fn msg(v: u64) -> Raw {
        let mut words = [0; WORDS];
        words[0] = v;
        words[1] = !v;
        Raw {
            label: 7,
            words,
            len: 2,
            nfds: 0,
            seq: 0,
        }
    }

    #[test]
    fn hand_over_between_threads() {
        let slot = std::sync::Arc::new(Slot::new());
        let s2 = slot.clone();
        let n = crate::testing::scaled(1000, 60) as u64;
        let t = std::thread::spawn(move || {
            for i in 0..n {
                send_for(&s2, &msg(i), Duration::from_secs(10)).unwrap();
            }
        });
        for i in 0..n {
            let got = loop {
                if let Some(r) = take(&slot, None).unwrap() {
                    break r;
                }
                if let Some(v) = prepare_sleep(&slot) {
                    crate::sync::futex_wait(&slot.state, v, crate::wait::LIVENESS);
                }
            };
            assert_eq!((got.words[0], got.words[1], got.len), (i, !i, 2));
        }
        t.join().unwrap();
    }

    #[test]
    fn unreceived_send_is_retracted() {
        let slot = Slot::new();
        let t = Duration::from_millis(20);
        assert_eq!(send_for(&slot, &msg(1), t), Err(SlotError::TimedOut));
        assert_eq!(take(&slot, None), Ok(None));
        // The slot is usable again.
        let t = Duration::ZERO;
        assert_eq!(send_for(&slot, &msg(2), t), Err(SlotError::TimedOut));
    }

    #[test]
    fn garbage_state_is_corrupt_not_a_hang() {
        let slot = Slot::new();
        slot.state.store(u64::MAX, Ordering::Relaxed);
        let t = Duration::from_millis(20);
        assert_eq!(send_for(&slot, &msg(1), t), Err(SlotError::Corrupt));
        slot.state.store(FULL, Ordering::Relaxed);
        slot.counts.store(99, Ordering::Relaxed);
        assert_eq!(take(&slot, None), Err(SlotError::Corrupt));
    }
}
