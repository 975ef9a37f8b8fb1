//! Model check of the lane protocol with loom: a sender reuses a slot only
//! after the receiver's notice for it, so the receiver never reads a slot
//! while the sender writes it (loom's `UnsafeCell` reports any access that
//! is not ordered by the rings' Release/Acquire pairs), messages arrive in
//! order and whole, and neither side loses a wake-up (a missed futex wake
//! is a deadlock to loom). Two slots, two-entry rings, three messages: the
//! first slot is reused. The slot bookkeeping is the sender's (a free
//! list fed by drained notices), as in `sender.rs`.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p zcio --lib --release loom_`

use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

use crate::channel::lane::wire::{LaneDesc, LaneNotice};
use crate::channel::loom_spsc::model;
use crate::channel::spsc::{Pod, Reader, RingEntry, RingHeader, Writer};

const T: Duration = Duration::from_secs(1);
const SLOTS: u32 = 2;
const MESSAGES: u64 = 3;

/// A two-entry ring in process memory.
struct Ring<E> {
    hdr: RingHeader,
    entries: std::cell::UnsafeCell<[RingEntry<E>; 2]>,
}

impl<E: Pod + Default> Ring<E> {
    fn new() -> Self {
        Self {
            hdr: RingHeader::new(),
            entries: std::cell::UnsafeCell::new([RingEntry::new(), RingEntry::new()]),
        }
    }

    fn ends(&self) -> (Writer<E>, Reader<E>) {
        let hdr: *const RingHeader = &self.hdr;
        let ent = self.entries.get().cast::<RingEntry<E>>();
        // `self` lives in the model's Arc for as long as both ends (each
        // thread keeps a clone), and holds the header and 2 slots; 2 is a
        // power of two.
        // SAFETY: as argued just above.
        unsafe { (Writer::new(hdr, ent, 2), Reader::new(hdr, ent, 2)) }
    }
}

struct Shared {
    msgs: Ring<LaneDesc>,
    notices: Ring<LaneNotice>,
    /// The slots' payload: written by the sender, read by the receiver.
    data: [UnsafeCell<u64>; SLOTS as usize],
}

// SAFETY: the rings are accessed only through the protocol under test and
// the payload through loom's checked cells.
unsafe impl Sync for Shared {}
// SAFETY: as above.
unsafe impl Send for Shared {}

fn sender(s: &Shared, mut ring: Writer<LaneDesc>, mut notices: Reader<LaneNotice>) {
    let mut free: Vec<u32> = (0..SLOTS).rev().collect();
    for i in 1..=MESSAGES {
        let slot = loop {
            let n = notices.available().unwrap();
            for k in 0..n {
                free.push(notices.peek(k).slot);
            }
            notices.release(n);
            if let Some(slot) = free.pop() {
                break slot;
            }
            notices.wait_for_data(T, None).unwrap();
        };
        s.data[slot as usize].with_mut(|p| {
            // SAFETY: loom checks that no read of this slot is concurrent.
            unsafe { *p = i }
        });
        // Never more in flight than slots, and the ring has as many
        // entries: room is always there.
        assert!(ring.free_slots().unwrap() >= 1);
        let mut pending = 0;
        ring.write(&[LaneDesc { slot, len: 8 }], &mut pending);
        if ring.publish(pending) {
            ring.wake_consumer(None);
        }
    }
}

fn receiver(s: &Shared, mut ring: Reader<LaneDesc>, mut notices: Writer<LaneNotice>) {
    let mut next = 1;
    while next <= MESSAGES {
        if ring.available().unwrap() == 0 {
            ring.wait_for_data(T, None).unwrap();
            continue;
        }
        let d = ring.peek(0);
        ring.release(1);
        assert!(d.slot < SLOTS && d.len == 8, "a whole descriptor");
        let v = s.data[d.slot as usize].with(|p| {
            // SAFETY: loom checks that no write of this slot is concurrent.
            unsafe { *p }
        });
        assert_eq!(v, next, "messages in order, each slot's payload whole");
        next += 1;
        assert!(notices.free_slots().unwrap() >= 1);
        let mut pending = 0;
        notices.write(
            &[LaneNotice {
                slot: d.slot,
                reserved: 0,
            }],
            &mut pending,
        );
        if notices.publish(pending) {
            notices.wake_consumer(None);
        }
    }
}

#[test]
fn loom_lane_slots_are_reused_only_after_their_notice() {
    model(|| {
        let s = Arc::new(Shared {
            msgs: Ring::new(),
            notices: Ring::new(),
            data: [UnsafeCell::new(0), UnsafeCell::new(0)],
        });
        let (mw, mr) = s.msgs.ends();
        let (nw, nr) = s.notices.ends();
        let s2 = s.clone();
        let t = thread::spawn(move || receiver(&s2, mr, nw));
        sender(&s, mw, nr);
        t.join().unwrap();
    });
}
