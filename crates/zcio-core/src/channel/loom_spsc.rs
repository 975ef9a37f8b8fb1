//! Model checks of the descriptor ring protocol with loom: ordering of
//! entries across wrap-around (consumers finding entries by the slots'
//! sequence words, and a message's batch of entries seen whole),
//! back-pressure when full, and lazy futex notification without lost
//! wakeups (the futex model has no timeouts, so
//! a missed wake is reported by loom as a deadlock).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p zcio --lib --release loom_`

use std::time::Duration;

use crate::channel::spsc::{Pod, Reader, RingEntry, RingHeader, Writer};
use loom::sync::Arc;
use loom::thread;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct E(u64);
// SAFETY: repr(C) integer.
unsafe impl Pod for E {}

struct Shared {
    hdr: RingHeader,
    entries: std::cell::UnsafeCell<[RingEntry<E>; 2]>,
}
// SAFETY: entries are only accessed through the ring protocol under test;
// loom runs threads one at a time, and the assertions check the protocol.
unsafe impl Sync for Shared {}
// SAFETY: as above.
unsafe impl Send for Shared {}

fn ends(s: &Arc<Shared>) -> (Writer<E>, Reader<E>) {
    let hdr: *const RingHeader = &s.hdr;
    let ent = s.entries.get().cast::<RingEntry<E>>();
    // `s` (kept alive by the Arcs the threads hold) contains the
    // header and 2 slots; capacity 2 is a power of two.
    // SAFETY: as argued just above.
    unsafe { (Writer::new(hdr, ent, 2), Reader::new(hdr, ent, 2)) }
}

const T: Duration = Duration::from_secs(1);

/// A fresh header and two never-published slots.
fn shared() -> Arc<Shared> {
    Arc::new(Shared {
        hdr: RingHeader::new(),
        entries: std::cell::UnsafeCell::new([RingEntry::new(), RingEntry::new()]),
    })
}

/// Check `f` under loom with the bound every model here uses.
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

fn produce(mut p: Writer<E>, items: u64) {
    for i in 1..=items {
        loop {
            if p.free_slots().unwrap() >= 1 {
                break;
            }
            p.wait_for_space(1, T, None).unwrap();
        }
        let mut pend = 0;
        p.write(&[E(i)], &mut pend);
        if p.publish(pend) {
            p.wake_consumer(None);
        }
    }
}

fn consume(mut c: Reader<E>, items: u64) {
    let mut next = 1;
    while next <= items {
        let n = c.available().unwrap();
        if n == 0 {
            c.wait_for_data(T, None).unwrap();
            continue;
        }
        assert_eq!(
            c.peek(0),
            E(next),
            "entries arrive in order, never torn or stale"
        );
        next += 1;
        if c.release(1) {
            c.wake_producer(None);
        }
    }
}

/// Model-check `items` entries through a 2-slot ring; the producer runs on
/// a spawned thread (`producer_spawned`) or on the model's main thread.
fn check(items: u64, producer_spawned: bool) {
    model(move || {
        let s = shared();
        let (p, c) = ends(&s);
        let s2 = s.clone();
        if producer_spawned {
            let t = thread::spawn(move || {
                let _keep = s2;
                produce(p, items);
            });
            consume(c, items);
            t.join().unwrap();
        } else {
            let t = thread::spawn(move || {
                let _keep = s2;
                consume(c, items);
            });
            produce(p, items);
            t.join().unwrap();
        }
    });
}

#[test]
fn spsc_with_wraparound_and_lazy_wakeups() {
    check(3, true);
}

#[test]
fn full_ring_blocks_producer_until_consumer_frees() {
    check(4, false);
}

/// The *closed* word of the segment header (`Core::publish_closed` /
/// `Core::peer_closed`): an end publishes its last message, then stores 1
/// with Release; a receiver that loads 1 with Acquire and then finds the
/// ring empty may report `Disconnected`, so every message published before
/// the close must be visible to it by then: none is lost to the close.
#[test]
fn loom_messages_published_before_close_are_seen_after_it() {
    use crate::sync::{AtomicU64, Ordering};
    model(|| {
        let s = shared();
        let closed = Arc::new(AtomicU64::new(0));
        let (mut p, mut c) = ends(&s);
        let (s2, closed2) = (s.clone(), closed.clone());
        let t = thread::spawn(move || {
            let _keep = s2;
            let mut pend = 0;
            p.write(&[E(7)], &mut pend);
            p.publish(pend);
            // SYNC: Release pairs with the Acquire load below (as
            // `publish_closed` with `peer_closed`).
            closed2.store(1, Ordering::Release);
        });
        let mut got = 0;
        loop {
            // SYNC: Acquire pairs with the closer's Release store.
            let is_closed = closed.load(Ordering::Acquire) != 0;
            if c.available().unwrap() > 0 {
                got += 1;
                assert_eq!(c.peek(0), E(7));
                c.release(1);
                continue;
            }
            if is_closed {
                break;
            }
            thread::yield_now();
        }
        assert_eq!(got, 1, "the message published before the close was lost");
        t.join().unwrap();
    });
}

/// A publish of several entries (one message's descriptors) is seen
/// whole: the seqs are stored last slot first, so a consumer that finds
/// the first entry by its seq finds the rest too.
#[test]
fn loom_a_published_batch_is_seen_whole() {
    model(|| {
        let s = shared();
        let (mut p, mut c) = ends(&s);
        let s2 = s.clone();
        let t = thread::spawn(move || {
            let _keep = s2;
            let mut pend = 0;
            p.write(&[E(1), E(2)], &mut pend);
            p.publish(pend);
        });
        loop {
            let n = c.available().unwrap();
            if n > 0 {
                assert_eq!(n, 2, "part of a batch was seen");
                assert_eq!((c.peek(0), c.peek(1)), (E(1), E(2)));
                break;
            }
            thread::yield_now();
        }
        t.join().unwrap();
    });
}

/// Bell mode (`crate::bell`): both ends sleep on doorbells instead of the
/// futex (the consumer for data, the producer for space), each having
/// marked its line; the other side rings the bell when it finds the flag
/// set. A wake lost between the flag, the bell word and the ring would
/// leave a side asleep forever: loom reports it as a deadlock.
#[test]
fn loom_bell_mode_loses_no_wakeup() {
    use crate::bell::ModelBell;
    use crate::channel::spsc::SleepHandle;
    model(|| {
        let s = shared();
        let (mut p, mut c) = ends(&s);
        // SAFETY: the header lives in `s`, kept alive below; capacity 2.
        let lines = unsafe { SleepHandle::new(&s.hdr, 2) };
        lines.set_consumer_bell();
        lines.set_producer_bell();
        // The consumer's bell (rung by the producer) and the producer's.
        let (c_waits, p_rings) = ModelBell::pair();
        let (p_waits, c_rings) = ModelBell::pair();
        let s2 = s.clone();
        let items = 3u64;
        let t = thread::spawn(move || {
            let _keep = s2;
            for i in 1..=items {
                while p.free_slots().unwrap() < 1 {
                    p.wait_for_space(1, T, Some(&p_waits)).unwrap();
                }
                let mut pend = 0;
                p.write(&[E(i)], &mut pend);
                if p.publish(pend) {
                    p.wake_consumer(Some(&p_rings));
                }
            }
        });
        let mut next = 1;
        while next <= items {
            if c.available().unwrap() == 0 {
                c.wait_for_data(T, Some(&c_waits)).unwrap();
                continue;
            }
            assert_eq!(c.peek(0), E(next));
            next += 1;
            if c.release(1) {
                c.wake_producer(Some(&c_rings));
            }
        }
        t.join().unwrap();
    });
}
