//! Model checks of the Beltway ring protocol (`zcio::ring::protocol`, the
//! same functions the producer and consumers call) with loom:
//!
//! * `Block`: every consumer gets every block in order, the producer never
//!   overwrites unread data, and no wakeup is lost in either direction (the
//!   futex model has no timeouts, so a lost wakeup is a loom deadlock);
//! * joining while the producer writes: a joining consumer never sees
//!   overwritten data (the SeqCst join handshake);
//! * leaving while the producer waits for the leaver: no deadlock;
//! * FRP: a reader racing an overwriting producer accepts only intact data
//!   (the seqlock check).
//!
//! The data area is modelled as atomics (relaxed), one value per position:
//! position `p` holds `p + 1` once written.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p zcio --lib --release loom_`

use std::time::Duration;

use crate::ring::layout::ProducerLine;
use crate::ring::protocol::{
    announce, consumer_sleep, fits, futex_waker, head, intact, join, leave, producer_sleep,
    publish, release, scan, skip_target,
};
use crate::sync::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const CAP: u64 = 2;
const T: Duration = Duration::from_secs(1);

struct Ring {
    line: ProducerLine,
    mask: AtomicU64,
    cursors: [AtomicU64; 2],
    data: [AtomicU64; CAP as usize],
}

fn ring(mask: u64) -> Arc<Ring> {
    Arc::new(Ring {
        line: ProducerLine {
            head: AtomicU64::new(0),
            write_end: AtomicU64::new(0),
            data_write_end: AtomicU64::new(0),
            data_head: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        },
        mask: AtomicU64::new(mask),
        cursors: [AtomicU64::new(0), AtomicU64::new(0)],
        data: [AtomicU64::new(0), AtomicU64::new(0)],
    })
}

/// Producer writing `items` blocks of one unit; `block` waits for the
/// slowest consumer (Block policy), otherwise it overwrites (FRP).
fn produce(r: &Ring, items: u64, block: bool) {
    let mut h = 0;
    for _ in 0..items {
        while block {
            let (min, slowest) = scan(&r.mask, |k| &r.cursors[k], h, CAP);
            if fits(h, 1, min, CAP) {
                break;
            }
            let s = slowest.expect("a full ring has a slowest consumer");
            producer_sleep(
                &r.cursors[s],
                || {
                    let (min, now_slowest) = scan(&r.mask, |k| &r.cursors[k], h, CAP);
                    fits(h, 1, min, CAP) || now_slowest != Some(s)
                },
                T,
            );
        }
        announce(&r.line.write_end, h + 1);
        r.data[(h % CAP) as usize].store(h + 1, Ordering::Relaxed);
        h += 1;
        publish(&r.line, h);
    }
}

/// Consumer `k` from `start` until `until`; with `lossless` every block
/// must be intact, otherwise lapped reads are skipped. Returns how many
/// blocks it accepted.
fn consume(r: &Ring, k: usize, start: u64, until: u64, lossless: bool) -> u64 {
    let mut cursor = start;
    let mut accepted = 0;
    while cursor < until {
        let h = head(&r.line);
        if h == cursor {
            consumer_sleep(&r.line, cursor, T);
            continue;
        }
        assert!(h >= cursor, "head {h} behind cursor {cursor}");
        if h - cursor > CAP {
            assert!(
                !lossless,
                "Block policy lapped a consumer (head {h}, cursor {cursor})"
            );
            cursor = skip_target(
                cursor,
                h,
                r.line.write_end.load(Ordering::Relaxed),
                CAP,
                1,
                1,
            );
            release(&r.cursors[k], cursor, futex_waker);
            continue;
        }
        let v = r.data[(cursor % CAP) as usize].load(Ordering::Relaxed);
        if intact(&r.line.write_end, cursor, CAP) {
            assert_eq!(
                v,
                cursor + 1,
                "accepted data must be the block at the cursor"
            );
            accepted += 1;
            cursor += 1;
        } else {
            assert!(!lossless, "Block policy overwrote unread data");
            let we = r.line.write_end.load(Ordering::Relaxed);
            cursor = skip_target(cursor, head(&r.line), we, CAP, 1, 1);
        }
        release(&r.cursors[k], cursor, futex_waker);
    }
    accepted
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(f);
}

#[test]
fn block_two_consumers_get_everything_in_order() {
    model(|| {
        let r = ring(0b11);
        let (r1, r2) = (r.clone(), r.clone());
        let a = thread::spawn(move || consume(&r1, 0, 0, 3, true));
        let b = thread::spawn(move || consume(&r2, 1, 0, 3, true));
        produce(&r, 3, true);
        assert_eq!(a.join().unwrap(), 3);
        assert_eq!(b.join().unwrap(), 3);
    });
}

#[test]
fn block_single_consumer_wraps_with_lazy_wakeups() {
    model(|| {
        let r = ring(0b01);
        let r1 = r.clone();
        let p = thread::spawn(move || produce(&r1, 4, true));
        assert_eq!(consume(&r, 0, 0, 4, true), 4);
        p.join().unwrap();
    });
}

#[test]
fn joining_consumer_never_sees_overwritten_data() {
    model(|| {
        let r = ring(0);
        let r1 = r.clone();
        let c = thread::spawn(move || {
            let start = join(&r1.line, &r1.mask, 0, &r1.cursors[0], futex_waker);
            consume(&r1, 0, start, 3, true)
        });
        produce(&r, 3, true);
        c.join().unwrap();
    });
}

#[test]
fn leaving_consumer_unblocks_the_producer() {
    model(|| {
        let r = ring(0b11);
        let (r1, r2) = (r.clone(), r.clone());
        // Consumer 1 reads nothing and leaves; consumer 0 reads all.
        let a = thread::spawn(move || consume(&r1, 0, 0, 3, true));
        let b = thread::spawn(move || leave(&r2.mask, 1, &r2.cursors[1], futex_waker));
        produce(&r, 3, true);
        assert_eq!(a.join().unwrap(), 3);
        b.join().unwrap();
    });
}

#[test]
fn frp_reader_accepts_only_intact_data() {
    model(|| {
        let r = ring(0);
        let r1 = r.clone();
        let p = thread::spawn(move || produce(&r1, 4, false));
        let got = consume(&r, 0, 0, 4, false);
        assert!(got >= 1, "the newest block is always readable");
        p.join().unwrap();
    });
}

/// Named bells (event-loop waiters): the consumer sleeps on its bell for
/// data (armed in its slot, then the head flag) and the producer on its
/// bell for room (flag on the consumer's cursor word); each side rings the
/// other only when it finds the flag. A ring lost anywhere leaves a side
/// asleep forever (the model bell ends a wait only on a ring): loom
/// reports the deadlock.
#[test]
fn loom_named_bells_lose_no_wakeup() {
    use crate::bell::{Bell, ModelBell};
    use crate::ring::layout::{ConsumerSlot, ControlLine};
    use crate::ring::protocol::{consumer_arm, ring_sleepers};
    let z = || AtomicU64::new(0);
    struct Bells {
        ctl: ControlLine,
        slot: ConsumerSlot,
    }
    model(move || {
        let r = ring(0b1);
        let b = Arc::new(Bells {
            ctl: ControlLine {
                owner: z(),
                owner_pidns: z(),
                dropped_blocks: z(),
                dropped_bytes: z(),
                consumers: AtomicU64::new(0b1),
                error: z(),
                bell_consumers: AtomicU64::new(0b1),
                producer_bell: AtomicU64::new(1),
            },
            slot: ConsumerSlot {
                cursor: z(),
                owner: z(),
                owner_pidns: z(),
                drops_at_join: z(),
                skipped_blocks: z(),
                skipped_units: z(),
                read_blocks: z(),
                read_bytes: z(),
                bell: AtomicU64::new(1),
                bell_armed: z(),
            },
        });
        let (cons_waits, prod_rings) = ModelBell::pair();
        let (prod_waits, cons_rings) = ModelBell::pair();
        let items = 3u64;
        let (r2, b2) = (r.clone(), b.clone());
        let p = thread::spawn(move || {
            let (r, b) = (&*r2, &*b2);
            let mut h = 0;
            for _ in 0..items {
                loop {
                    let (min, slowest) = scan(&r.mask, |k| &r.cursors[k], h, CAP);
                    if fits(h, 1, min, CAP) {
                        break;
                    }
                    let s = slowest.expect("a full ring has a slowest consumer");
                    r.cursors[s].fetch_or(1, Ordering::SeqCst);
                    let (min, now) = scan(&r.mask, |k| &r.cursors[k], h, CAP);
                    if !(fits(h, 1, min, CAP) || now != Some(s)) {
                        prod_waits.wait(T);
                    }
                    r.cursors[s].fetch_and(!1, Ordering::Relaxed);
                }
                announce(&r.line.write_end, h + 1);
                r.data[(h % CAP) as usize].store(h + 1, Ordering::Relaxed);
                h += 1;
                if publish(&r.line, h) {
                    ring_sleepers(&b.ctl, |_| &b.slot, |_| prod_rings.ring());
                }
            }
        });
        let mut cursor = 0;
        while cursor < items {
            if head(&r.line) == cursor {
                if consumer_arm(&r.line, &b.slot, cursor) {
                    cons_waits.wait(T);
                }
                continue;
            }
            let v = r.data[(cursor % CAP) as usize].load(Ordering::Relaxed);
            assert!(intact(&r.line.write_end, cursor, CAP));
            assert_eq!(v, cursor + 1);
            cursor += 1;
            release(&r.cursors[0], cursor, |_| cons_rings.ring());
        }
        p.join().unwrap();
    });
}
