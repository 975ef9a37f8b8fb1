//! The shared-memory protocol of a ring, as small functions over the header
//! words, so that the producer and consumer code and the loom models
//! (`tests/loom_beltway.rs`) run exactly the same steps.
//!
//! Words (see [`super::layout`]):
//! * head word `head << 1 | consumers_sleeping` — written by the producer
//!   with a swap ([`publish`]); a consumer about to sleep sets bit 0 with an
//!   RMW that also returns the latest head ([`consumer_sleep`]).
//! * cursor word per consumer `cursor << 1 | producer_sleeping` — written by
//!   its consumer with a swap ([`release`]); the producer sets bit 0 before
//!   sleeping on it ([`producer_sleep`]).
//! * `write_end` — the seqlock word: stored by the producer before it
//!   overwrites anything ([`announce`]), checked by readers after reading
//!   ([`intact`]).
//! * consumer bitmap — joined ([`join`]) and left ([`leave`]) with SeqCst
//!   RMWs, read by the producer's [`scan`].
//!
//! Because each sleep flag shares a word with the counter it guards, a
//! publish that races with a sleeper either changes the word before the
//! futex wait (which then returns at once) or sees the flag (and wakes).
//!
//! Named bells (`crate::bell`), for waiters in an event loop: a consumer
//! that sleeps on its bell stores `bell_armed = 1` in its slot *before* the
//! flag RMW ([`consumer_arm`]); a publish that finds the flag set rings
//! every armed bell ([`ring_sleepers`]) besides starting the futex chain.
//! A producer that sleeps for room on its bell has published its number
//! (`ControlLine::producer_bell`); the consumer whose release finds the
//! producer's flag rings it instead of waking the futex (the `wake`
//! argument of [`release`], [`join`], [`leave`]).

use std::time::Duration;

use super::layout::{ConsumerSlot, ControlLine, ProducerLine};
use crate::sync::{fence, AtomicU64, Ordering};

/// Producer, before overwriting: announce that everything below `end -
/// cap` may be gone (`word` is `write_end` or `data_write_end`).
pub fn announce(word: &AtomicU64, end: u64) {
    word.store(end, Ordering::Relaxed);
    // SYNC: Release fence orders the store above before the data stores
    // that follow; pairs with the Acquire fence in `intact`.
    fence(Ordering::Release);
}

/// Reader, after reading bytes that started at position `pos` of a ring of
/// capacity `cap`: whether they were intact (not overwritten while read).
pub fn intact(word: &AtomicU64, pos: u64, cap: u64) -> bool {
    // SYNC: Acquire fence pairs with the Release fence in `announce`: if we
    // read any byte of an overwrite, we see the write_end stored before it.
    fence(Ordering::Acquire);
    word.load(Ordering::Relaxed) <= pos.saturating_add(cap)
}

/// Producer: publish `head`; if consumers sleep, wake one of them, which
/// wakes the next ([`consumer_sleep`]): the producer pays one system call
/// however many consumers sleep. Returns whether any slept.
pub fn publish(line: &ProducerLine, head: u64) -> bool {
    // SYNC: SeqCst swap publishes the block (release), pairs with the
    // sleep-flag RMW in `consumer_sleep` (one word: no lost wakeup) and with
    // the SeqCst bitmap RMW/head load in `join`.
    let old = line.head.swap(head << 1, Ordering::SeqCst);
    if old & 1 != 0 {
        crate::sync::futex_wake_one(&line.head);
        true
    } else {
        false
    }
}

/// Reader: the published head.
pub fn head(line: &ProducerLine) -> u64 {
    // SYNC: Acquire pairs with the SeqCst swap in `publish`: the blocks
    // below the head are written.
    line.head.load(Ordering::Acquire) >> 1
}

/// Consumer at `cursor` with nothing to read: flag the sleep and wait (at
/// most `t`) unless the head has moved. Returns the head seen.
///
/// A consumer that was woken and finds news passes the wake on to one more
/// sleeper (the wake chain started by [`publish`]): every consumer that
/// slept before the publish is woken in turn. A chain that ends early (its
/// waker died, or woke a sleeper that had nothing new) costs the remaining
/// sleepers at most `t`, or until the next publish, which sees the flag set
/// again by whoever went back to sleep.
pub fn consumer_sleep(line: &ProducerLine, cursor: u64, t: Duration) -> u64 {
    // SYNC: the RMW sets the flag and returns the latest head word (Acquire
    // part: blocks below it are written); `publish` changes the word, so
    // the futex wait below cannot miss it.
    let old = line.head.fetch_or(1, Ordering::SeqCst);
    if old >> 1 == cursor {
        let woken = crate::sync::futex_wait_woken(&line.head, (old | 1) as u32, t);
        let h = head(line);
        // Pass the wake on only for news: a sleeper woken by a chain with
        // nothing new to read stops it (otherwise two idle sleepers would
        // wake each other forever).
        if woken && h != cursor {
            crate::sync::futex_wake_one(&line.head);
        }
        h
    } else {
        old >> 1
    }
}

/// Consumer with nothing to read, about to sleep on its named bell (the
/// first half of [`consumer_sleep`] for an event loop): mark the bell
/// armed, set the flag, re-check. `true`: sleep until the bell rings;
/// `false`: the head has moved (read now).
pub fn consumer_arm(line: &ProducerLine, slot: &ConsumerSlot, cursor: u64) -> bool {
    // SYNC: SeqCst store before the SeqCst flag RMW below; the producer's
    // SeqCst head swap that reads our flag precedes its SeqCst swap of this
    // word in `ring_sleepers`, so that swap sees the 1.
    slot.bell_armed.store(1, Ordering::SeqCst);
    // SYNC: as in `consumer_sleep`.
    let old = line.head.fetch_or(1, Ordering::SeqCst);
    old >> 1 == cursor
}

/// Producer, after a [`publish`] that found the flag set: ring the named
/// bell of every consumer that armed it (`ring(number)`), disarming it.
pub fn ring_sleepers<'a>(
    ctl: &ControlLine,
    slot_of: impl Fn(usize) -> &'a ConsumerSlot,
    ring: impl Fn(u64),
) {
    // SYNC: SeqCst, as every bitmap access (the consumer set its bit before
    // it ever armed).
    let mut mask = ctl.bell_consumers.load(Ordering::SeqCst);
    while mask != 0 {
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        let s = slot_of(i);
        // SYNC: pairs with the SeqCst store in `consumer_arm`.
        if s.bell_armed.swap(0, Ordering::SeqCst) != 0 {
            let id = s.bell.load(Ordering::Relaxed);
            if id != 0 {
                ring(id);
            }
        }
    }
}

/// The producer's futex wake (the `wake` of [`release`] when it does not
/// sleep on a bell).
pub fn futex_waker(cursor_word: &AtomicU64) {
    crate::sync::futex_wake(cursor_word);
}

/// Consumer: publish our cursor; `wake` the producer if it waits for us.
pub fn release(cursor_word: &AtomicU64, cursor: u64, wake: impl FnOnce(&AtomicU64)) -> bool {
    // SYNC: SeqCst swap releases the blocks below `cursor` (we no longer read
    // them) and pairs with the flag RMW in `producer_sleep`.
    if cursor_word.swap(cursor << 1, Ordering::SeqCst) & 1 != 0 {
        wake(cursor_word);
        true
    } else {
        false
    }
}

/// Producer: the position of the slowest consumer in `mask_word` and its
/// slot. Cursors ahead of `head` are ignored (nonsense from a broken
/// consumer); cursors more than `cap` behind count as `cap` behind.
pub fn scan<'a>(
    mask_word: &AtomicU64,
    cursor_of: impl Fn(usize) -> &'a AtomicU64,
    head: u64,
    cap: u64,
) -> (u64, Option<usize>) {
    // SYNC: the SeqCst fence pairs with the one in `join` (store-buffering
    // pattern: our earlier head swap, then this bitmap load; its bitmap RMW,
    // then its head load): either we see a joining consumer here, or it
    // sees our latest head. (SeqCst accesses alone would do in C++20, but
    // loom models them as AcqRel; the fences make the model check it.)
    fence(Ordering::SeqCst);
    let mut mask = mask_word.load(Ordering::SeqCst);
    let (mut min, mut slowest) = (head, None);
    while mask != 0 {
        let i = mask.trailing_zeros() as usize;
        mask &= mask - 1;
        // SYNC: Acquire pairs with the swap in `release`.
        let c = cursor_of(i).load(Ordering::Acquire) >> 1;
        if c > head {
            continue;
        }
        let c = c.max(head.saturating_sub(cap));
        if c < min {
            (min, slowest) = (c, Some(i));
        }
    }
    (min, slowest)
}

/// Producer, short of room because of the consumer at `cursor_word`: flag
/// the sleep, then wait (at most `t`) unless `look_again()` (re-checked
/// after flagging) says not to: it must return true if there is room now
/// *or if another consumer has become the slowest* (only the flagged one
/// wakes us). Returns whether to look again at once (woken, changed or
/// `look_again`); `false` means the wait timed out.
pub fn producer_sleep(
    cursor_word: &AtomicU64,
    look_again: impl FnOnce() -> bool,
    t: Duration,
) -> bool {
    // SYNC: the RMW sets the flag and returns the latest cursor; `release`
    // changes the word, so the wait cannot miss it.
    let old = cursor_word.fetch_or(1, Ordering::SeqCst);
    let moved = look_again() || crate::sync::futex_wait(cursor_word, (old | 1) as u32, t);
    cursor_word.fetch_and(!1, Ordering::Relaxed);
    moved
}

/// Consumer joining: announce ourselves in bit `bit` of `mask_word` and
/// return the head to start from (our cursor word is set to it).
pub fn join(
    line: &ProducerLine,
    mask_word: &AtomicU64,
    bit: usize,
    cursor_word: &AtomicU64,
    wake: impl FnOnce(&AtomicU64),
) -> u64 {
    let h = line.head.load(Ordering::SeqCst) >> 1;
    cursor_word.store(h << 1, Ordering::SeqCst);
    // SYNC: SeqCst RMW then SeqCst head load pair with the producer's
    // SeqCst head swap (`publish`) then SeqCst bitmap load (`scan`): either
    // it counts us from its next scan, or we start at its newest head.
    mask_word.fetch_or(1u64 << bit, Ordering::SeqCst);
    // SYNC: pairs with the SeqCst fence in `scan`.
    fence(Ordering::SeqCst);
    let h2 = line.head.load(Ordering::SeqCst) >> 1;
    // A swap, not a store: the producer may already be waiting on us.
    release(cursor_word, h2, wake);
    h2
}

/// Consumer leaving bit `bit`; `wake`s a producer waiting for us.
pub fn leave(
    mask_word: &AtomicU64,
    bit: usize,
    cursor_word: &AtomicU64,
    wake: impl FnOnce(&AtomicU64),
) {
    // SYNC: SeqCst like every bitmap update (see `scan`).
    mask_word.fetch_and(!(1u64 << bit), Ordering::SeqCst);
    if cursor_word.fetch_and(!1, Ordering::SeqCst) & 1 != 0 {
        wake(cursor_word);
    }
}

/// Whether a block of `units` fits at `head` when the slowest reader is at
/// `min`, in a ring of `cap` units (`min <= head`).
pub fn fits(head: u64, units: u64, min: u64, cap: u64) -> bool {
    head - min <= cap && units <= cap - (head - min)
}

/// Where a lapped reader at `cursor` jumps: `step` units past the oldest
/// position that is not being overwritten (`max(head, write_end) - cap`),
/// rounded down to a multiple of `unit`, never past `head` and never
/// backwards.
pub fn skip_target(cursor: u64, head: u64, write_end: u64, cap: u64, step: u64, unit: u64) -> u64 {
    let floor = head.max(write_end).saturating_sub(cap);
    let to = floor.saturating_add(step) / unit * unit;
    to.min(head).max(cursor)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        /// `fits` agrees with the plain definition and never overflows.
        #[test]
        fn fits_matches_definition(min in 0u64..1 << 40, lag in 0u64..1 << 21, units in 0u64..1 << 21, cap_log in 4u32..20) {
            let cap = 1u64 << cap_log;
            let head = min + lag;
            let expect = lag <= cap && lag + units <= cap;
            prop_assert_eq!(fits(head, units, min, cap), expect);
        }

        /// A skip lands inside the ring's live window (or at our cursor if
        /// that is further), on a unit boundary when it moves.
        #[test]
        fn skip_lands_in_window(cursor in 0u64..1 << 40, ahead in 0u64..1 << 24, writing in 0u64..1 << 20, cap_log in 6u32..20, step_div in 1u64..64, unit_log in 0u32..6) {
            let cap = 1u64 << cap_log;
            let unit = 1u64 << unit_log.min(cap_log - 1);
            let head = cursor + ahead;
            let write_end = head + writing.min(cap);
            let step = (cap / step_div).max(unit);
            let to = skip_target(cursor, head, write_end, cap, step, unit);
            prop_assert!(to >= cursor && to <= head);
            // Where it lands is not being overwritten (unless it could not move).
            prop_assert!(write_end - to <= cap || to == cursor || to == head);
            if to != cursor && to != head {
                prop_assert_eq!(to % unit, 0);
            }
        }

        /// Positions map into the ring and laps count whole rings.
        #[test]
        fn place_and_lap(pos in 0u64..u64::MAX >> 1, cap_log in 4u32..34) {
            let cap = 1u64 << cap_log;
            let place = pos & (cap - 1);
            let lap = pos >> cap_log;
            prop_assert!(place < cap);
            prop_assert_eq!(lap * cap + place, pos);
        }
    }
}
