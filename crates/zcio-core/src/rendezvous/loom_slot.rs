//! Model checks of the rendezvous slot protocol (`zcio::rendezvous::slot`,
//! the code the endpoints run) with loom: messages are handed over in
//! order without lost wakeups (the futex model has no timeouts, so a lost
//! wakeup is a loom deadlock), and a send that gives up is retracted
//! atomically: either the receiver took it and the send succeeded, or the
//! send failed and nobody ever sees it.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p zcio --lib --release loom_`

use std::time::Duration;

use crate::bell::Bell;
use crate::rendezvous::slot::{prepare_sleep, send, take, Raw, Slot, SlotError, WORDS};
use crate::wait::SpinBudget;
use loom::sync::Arc;
use loom::thread;

/// Waits forever (the model has no time; no spin: a loom model must not
/// busy-wait).
fn send_forever(s: &Slot, r: &Raw, bell: Option<&dyn Bell>) -> Result<u64, SlotError> {
    send(
        s,
        r,
        &mut SpinBudget::new(Duration::ZERO),
        None,
        || true,
        bell,
    )
}

/// Gives up at once: models a send timeout firing at any point (after the
/// sender flagged itself, as a sleeper does before it checks its deadline).
fn send_give_up(s: &Slot, r: &Raw) -> Result<u64, SlotError> {
    let past = Some(std::time::Instant::now());
    send(
        s,
        r,
        &mut SpinBudget::new(Duration::ZERO),
        past,
        || true,
        None,
    )
}

fn raw(v: u64) -> Raw {
    let mut words = [0; WORDS];
    words[0] = v;
    words[1] = v * 3;
    Raw {
        label: v,
        words,
        len: 2,
        nfds: 0,
        seq: 0,
    }
}

/// Block until a message arrives (flag, re-check, futex wait).
fn receive(s: &Slot) -> Raw {
    loop {
        if let Some(r) = take(s, None).unwrap() {
            return r;
        }
        if let Some(v) = prepare_sleep(s) {
            crate::sync::futex_wait(&s.state, v, Duration::from_secs(1));
        }
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

#[test]
fn two_messages_in_order_without_lost_wakeups() {
    model(|| {
        let s = Arc::new(Slot::new());
        let s2 = s.clone();
        let t = thread::spawn(move || {
            for v in 1..=2 {
                send_forever(&s2, &raw(v), None).unwrap();
            }
        });
        for v in 1..=2 {
            let r = receive(&s);
            assert_eq!((r.label, r.words[0], r.words[1], r.len), (v, v, 3 * v, 2));
        }
        t.join().unwrap();
    });
}

#[test]
fn a_retracted_send_is_never_received() {
    model(|| {
        let s = Arc::new(Slot::new());
        let s2 = s.clone();
        // The receiver polls once; the sender gives up at once.
        let t = thread::spawn(move || take(&s2, None).unwrap());
        let sent = send_give_up(&s, &raw(1));
        let got = t.join().unwrap();
        match sent {
            Ok(_) => assert_eq!(got.map(|r| r.words[0]), Some(1)),
            Err(SlotError::TimedOut) => assert!(got.is_none()),
            Err(e) => panic!("{e:?}"),
        }
        // Either way the slot is usable for the next message.
        let s3 = s.clone();
        let t = thread::spawn(move || send_forever(&s3, &raw(2), None).unwrap());
        assert_eq!(receive(&s).words[0], 2);
        t.join().unwrap();
    });
}

/// Bell mode (`crate::bell`): the receiver sleeps on its doorbell and so
/// does the sender waiting for the hand-over (the phased send the async
/// endpoint runs); each side rings the other only when it finds its flag.
/// A ring lost between the bell word, the flag and the state word leaves a
/// side asleep forever: loom reports the deadlock.
#[test]
fn loom_bell_mode_hands_over_without_lost_wakeups() {
    use crate::bell::{Bell, ModelBell};
    use crate::rendezvous::slot::{arm_taken, mark_recv_bell, mark_send_bell, publish, Handover};
    model(|| {
        let s = Arc::new(Slot::new());
        mark_recv_bell(&s);
        mark_send_bell(&s);
        let (recv_waits, send_rings) = ModelBell::pair();
        let (send_waits, recv_rings) = ModelBell::pair();
        let s2 = s.clone();
        let t = thread::spawn(move || {
            for v in 1..=2 {
                let seq = publish(&s2, &raw(v), Some(&send_rings)).unwrap();
                while arm_taken(&s2, seq).unwrap() != Handover::Taken {
                    send_waits.wait(Duration::from_secs(1));
                }
            }
        });
        for v in 1..=2 {
            let r = loop {
                if let Some(r) = take(&s, Some(&recv_rings)).unwrap() {
                    break r;
                }
                if prepare_sleep(&s).is_some() {
                    recv_waits.wait(Duration::from_secs(1));
                }
            };
            assert_eq!((r.label, r.words[0]), (v, v));
        }
        t.join().unwrap();
    });
}

/// An endpoint in bell mode may still have a blocking caller asleep on the
/// futex: a sender that finds the receiver's flag wakes the futex as well
/// as ringing the bell, or the blocking receiver would sleep on (a
/// deadlock in the model: the model's futex has no timeout).
#[test]
fn loom_bell_mode_wakes_a_blocking_waiter_too() {
    use crate::bell::ModelBell;
    use crate::rendezvous::slot::mark_recv_bell;
    model(|| {
        let s = Arc::new(Slot::new());
        mark_recv_bell(&s);
        let (_unused_waiter, rings) = ModelBell::pair();
        let s2 = s.clone();
        let t = thread::spawn(move || {
            send_forever(&s2, &raw(1), Some(&rings)).unwrap();
        });
        // The blocking receiver: flag, futex wait (as `wait_any` does).
        let r = receive(&s);
        assert_eq!(r.label, 1);
        t.join().unwrap();
    });
}
