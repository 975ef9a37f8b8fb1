//! Unit tests of the policy knobs (`ChannelPolicy`) and of the untrusted-flag
//! handling, on in-process channel pairs. Wakes are counted by arming the
//! receiver's sleep flag by hand (no thread needs to be asleep), so the
//! counts are exact.

use std::time::{Duration, Instant};

use super::*;
use crate::buf::{Pool, PoolConfig};

fn pool(name: &str) -> Pool {
    Pool::new(PoolConfig {
        chunk_size: 1 << 16,
        max_chunks: 2,
        populate: false,
        ..PoolConfig::named(name)
    })
}

fn msg(pool: &Pool, bytes: &[u8]) -> Msg {
    let mut b = pool.try_alloc(bytes.len()).unwrap();
    b.as_mut_slice().copy_from_slice(bytes);
    Msg::from(b.freeze().unwrap())
}

fn pair(policy: ChannelPolicy) -> (Channel, Channel) {
    Channel::pair(ChannelConfig {
        policy,
        ..ChannelConfig::default()
    })
    .unwrap()
}

/// [`pair`] with every message lent by reference (no small-message
/// slots): for the tests that watch the pool's buffers.
fn pair_by_ref(policy: ChannelPolicy) -> (Channel, Channel) {
    Channel::pair(ChannelConfig {
        policy,
        lane: crate::LaneConfig::OFF,
        ..ChannelConfig::default()
    })
    .unwrap()
}

/// Make `rx` look asleep to its sender: set the sleep flag on the ring it
/// receives on, exactly as a sleeper does before `FUTEX_WAIT`.
fn flag_asleep(rx: &Channel) {
    let _ = rx.core.msg_sleep().arm();
}

fn drain(rx: &Channel) -> usize {
    let mut n = 0;
    while rx.try_recv().is_ok() {
        n += 1;
    }
    n
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn notify_now_wakes_on_every_send_that_finds_the_receiver_asleep() {
    let (a, b) = pair(ChannelPolicy::default());
    let p = pool("pol-now");
    a.send(msg(&p, b"awake")).unwrap();
    assert_eq!(a.stats().wakes, 0, "an awake receiver is never woken");
    for i in 0..10u8 {
        flag_asleep(&b);
        a.send(msg(&p, &[i])).unwrap();
    }
    assert_eq!(a.stats().wakes, 10);
    assert_eq!(drain(&b), 11);
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn defer_wakes_once_per_batch_and_flush_wakes_the_rest() {
    let (a, b) = pair(ChannelPolicy {
        notify: Notify::Defer,
        wake_batch: 4,
        max_age: Duration::from_secs(3600),
        ..ChannelPolicy::default()
    });
    let p = pool("pol-batch");
    for i in 0..10u8 {
        flag_asleep(&b);
        a.send(msg(&p, &[i])).unwrap();
    }
    assert_eq!(a.stats().wakes, 2, "one wake per 4 messages");
    a.flush();
    assert_eq!(a.stats().wakes, 3, "flush wakes for the 2 deferred");
    a.flush();
    assert_eq!(a.stats().wakes, 3, "nothing deferred any more");
    assert_eq!(drain(&b), 10);
    // A send that finds the receiver awake forgets the deferral.
    flag_asleep(&b);
    a.send(msg(&p, b"x")).unwrap();
    b.core.msg_sleep().disarm();
    a.send(msg(&p, b"y")).unwrap();
    a.flush();
    assert_eq!(a.stats().wakes, 3);
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn defer_sender_wakes_once_the_oldest_message_reaches_max_age() {
    let (a, b) = pair(ChannelPolicy {
        notify: Notify::Defer,
        wake_batch: 1000,
        max_age: Duration::from_millis(20),
        ..ChannelPolicy::default()
    });
    let p = pool("pol-age");
    flag_asleep(&b);
    a.send(msg(&p, b"1")).unwrap();
    a.send(msg(&p, b"2")).unwrap();
    assert_eq!(a.stats().wakes, 0, "deferred (batch of 1000)");
    std::thread::sleep(Duration::from_millis(30));
    a.send(msg(&p, b"3")).unwrap();
    assert_eq!(a.stats().wakes, 1, "the oldest was older than max_age");
    assert_eq!(drain(&b), 3);
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn deferred_message_reaches_a_sleeping_receiver_by_the_max_age_backstop() {
    // The sender never wakes (batch of 1000, no later send, no flush) and
    // the receiver's liveness slice is 30 s: only the max_age bound on its
    // sleep can deliver the message before that.
    let cfg = ChannelConfig {
        policy: ChannelPolicy {
            notify: Notify::Defer,
            wake_batch: 1000,
            max_age: Duration::from_millis(5),
            spin: Duration::ZERO,
            ..ChannelPolicy::default()
        },
        liveness_interval: Duration::from_secs(30),
        ..ChannelConfig::default()
    };
    let (a, b) = Channel::pair(cfg).unwrap();
    let p = pool("pol-backstop");
    assert_eq!(b.core.liveness_slice(), Duration::from_millis(5));
    let t = std::thread::spawn(move || {
        let r = b.recv_timeout(Duration::from_secs(60)).map(|m| m.to_vec());
        (r, b)
    });
    std::thread::sleep(Duration::from_millis(50));
    let sent = Instant::now();
    a.send(msg(&p, b"deferred")).unwrap();
    let (r, _b) = t.join().unwrap();
    assert_eq!(r.unwrap(), b"deferred");
    assert_eq!(a.stats().wakes, 0, "delivered without a wake");
    assert!(
        sent.elapsed() < Duration::from_secs(25),
        "delivered by the max_age backstop, not the 30 s liveness slice"
    );
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn fail_policy_fails_at_once_block_waits_for_room() {
    let small = |full| ChannelConfig {
        ring_entries: 8,
        max_in_flight: 64,
        policy: ChannelPolicy {
            full,
            ..ChannelPolicy::default()
        },
        ..ChannelConfig::default()
    };
    let p = pool("pol-full");
    let (a, b) = Channel::pair(small(FullPolicy::Fail)).unwrap();
    for i in 0..8u8 {
        a.send(msg(&p, &[i])).unwrap();
    }
    let t0 = Instant::now();
    let (e, back) = a
        .send_timeout(msg(&p, b"9"), Duration::from_secs(30))
        .unwrap_err()
        .into_parts();
    assert_eq!(e, SendErrorKind::WouldBlock, "Fail ignores the timeout");
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert_eq!(back.to_vec(), b"9");
    assert_eq!(a.health(), Ok(()), "a full ring under Fail is no fault");
    drop(b);

    let (a, b) = Channel::pair(small(FullPolicy::Block)).unwrap();
    for i in 0..8u8 {
        a.send(msg(&p, &[i])).unwrap();
    }
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        let m = b.recv().unwrap();
        (m, b)
    });
    a.send_timeout(back, Duration::from_secs(30))
        .map_err(|e| e.kind())
        .expect("Block waits for the receiver to make room");
    let (m, _b) = t.join().unwrap();
    assert_eq!(m.to_vec(), [0]);

    // Fail also applies at the in-flight cap.
    let (a, b) = Channel::pair(ChannelConfig {
        max_in_flight: 2,
        ..small(FullPolicy::Fail)
    })
    .unwrap();
    a.send(msg(&p, b"1")).unwrap();
    a.send(msg(&p, b"2")).unwrap();
    let (e, _) = a
        .send_timeout(msg(&p, b"3"), Duration::from_secs(30))
        .unwrap_err()
        .into_parts();
    assert_eq!(e, SendErrorKind::TooManyInFlight(2));
    drop(b);
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn the_byte_cap_bounds_what_the_peer_holds_and_lets_a_big_message_go_alone() {
    let p = pool("pol-bytes");
    let (a, b) = Channel::pair(ChannelConfig {
        max_bytes_in_flight: 8192,
        policy: ChannelPolicy {
            full: FullPolicy::Fail,
            ..ChannelPolicy::default()
        },
        ..ChannelConfig::default()
    })
    .unwrap();
    a.send(msg(&p, &[1; 4096])).unwrap();
    a.send(msg(&p, &[2; 4096])).unwrap();
    // 8 KiB held: one more byte is over the cap.
    let (e, back) = a.try_send(msg(&p, &[3])).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::TooManyInFlight(2));
    assert_eq!(
        a.stats().held_by_peer,
        2,
        "nothing of the refused send is lent"
    );
    // The receiver releases one: room for the message that came back.
    drop(b.try_recv().unwrap());
    a.send(back).unwrap();
    assert_eq!(b.try_recv().unwrap().to_vec(), [2; 4096]);
    assert_eq!(b.try_recv().unwrap().to_vec(), [3]);
    // Larger than the cap: refused while anything is held, sent alone.
    let big = vec![7u8; 12288];
    let held = {
        a.send(msg(&p, &[4])).unwrap();
        b.try_recv().unwrap()
    };
    let (e, back) = a.try_send(msg(&p, &big)).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::TooManyInFlight(1));
    drop(held);
    a.send(back).unwrap();
    assert_eq!(b.try_recv().unwrap().to_vec(), big);

    // A blocking send waits for the release instead.
    let (a, b) = Channel::pair(ChannelConfig {
        max_bytes_in_flight: 4096,
        ..ChannelConfig::default()
    })
    .unwrap();
    a.send(msg(&p, &[5; 4096])).unwrap();
    let t = std::thread::spawn(move || {
        let first = b.recv().unwrap();
        drop(first);
        (b.recv().unwrap().to_vec(), b)
    });
    a.send_timeout(msg(&p, &[6; 4096]), Duration::from_secs(30))
        .map_err(|e| e.kind())
        .expect("waits for the receiver to release");
    let (v, _b) = t.join().unwrap();
    assert_eq!(v, [6; 4096]);
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn blocking_send_that_times_out_reports_the_peer_not_consuming() {
    let (a, _b) = Channel::pair(ChannelConfig {
        ring_entries: 8,
        ..ChannelConfig::default()
    })
    .unwrap();
    let p = pool("pol-stuck");
    for i in 0..8u8 {
        a.send(msg(&p, &[i])).unwrap();
    }
    let (e, _) = a
        .send_timeout(msg(&p, b"x"), Duration::from_millis(20))
        .unwrap_err()
        .into_parts();
    assert_eq!(e, SendErrorKind::TimedOut);
    assert_eq!(a.health(), Err(PeerFault::NotConsuming));
}

fn hold(limit_ms: u64, on_expiry: HoldExpiry) -> ChannelPolicy {
    ChannelPolicy {
        hold: Some(HoldLimit {
            limit: Duration::from_millis(limit_ms),
            on_expiry,
        }),
        ..ChannelPolicy::default()
    }
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn hold_limit_abort_closes_the_channel_and_releases_everything() {
    let (a, b) = pair(hold(20, HoldExpiry::Abort));
    let p = pool("pol-abort");
    a.send(msg(&p, b"held")).unwrap();
    a.send(msg(&p, b"returned")).unwrap();
    let held = b.recv().unwrap();
    drop(b.recv().unwrap());
    b.flush();
    assert_eq!(a.expire_holds(), Ok(0), "not yet expired");
    std::thread::sleep(Duration::from_millis(30));
    let (e, back) = a.send(msg(&p, b"next")).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::HoldExpired);
    assert_eq!(back.to_vec(), b"next");
    drop(back);
    assert_eq!(
        a.health(),
        Err(PeerFault::HoldExpired(Duration::from_millis(20)))
    );
    assert_eq!(a.stats().held_by_peer, 0);
    assert_eq!(
        p.stats().buffers_in_use,
        0,
        "everything the peer held released"
    );
    assert_eq!(
        a.send(msg(&p, b"again")).unwrap_err().kind(),
        SendErrorKind::HoldExpired
    );
    assert_eq!(a.expire_holds(), Err(SendErrorKind::HoldExpired));
    // The peer is told: it finds the channel disconnected. What it still
    // holds stays mapped (read-only) and readable, but the bytes are no
    // longer its: the buffer went back to the pool and was reused above.
    assert_eq!(
        b.recv_timeout(Duration::from_secs(10)).unwrap_err(),
        RecvError::Disconnected
    );
    assert_eq!(held.to_vec().len(), 4);
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn hold_limit_reclaim_returns_the_buffer_and_rejects_the_stale_notice() {
    let (a, b) = pair_by_ref(hold(20, HoldExpiry::Reclaim));
    let p = pool("pol-reclaim");
    a.send(msg(&p, b"old")).unwrap();
    let old = b.recv().unwrap();
    let old_ptr = p.stats().buffers_in_use;
    assert_eq!(old_ptr, 1);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(a.expire_holds(), Ok(1));
    let st = a.stats();
    assert_eq!((st.reclaimed, st.held_by_peer), (1, 0));
    assert_eq!(p.stats().buffers_in_use, 0, "back in the pool");
    assert!(a.faults().contains(&PeerFault::HoldsReclaimed(1)));
    // The buffer is reused for a new message (same ledger slot, new
    // generation); the peer's late notice for the old one is rejected.
    a.send(msg(&p, b"new")).unwrap();
    let new = b.recv().unwrap();
    assert_eq!(new.to_vec(), b"new");
    drop(old);
    b.flush();
    a.reclaim();
    let st = a.stats();
    assert_eq!((st.bad_notices, st.held_by_peer), (1, 1), "{st:?}");
    assert_eq!(p.stats().buffers_in_use, 1, "the new message is still held");
    drop(new);
    b.flush();
    a.reclaim();
    assert_eq!(a.stats().held_by_peer, 0);
    assert_eq!(p.stats().buffers_in_use, 0);
    assert!(a.send(msg(&p, b"usable")).is_ok(), "the channel stays open");
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn hold_fifo_stays_small_while_the_peer_keeps_releasing() {
    let (a, b) = pair(hold(3_600_000, HoldExpiry::Abort));
    let p = pool("pol-fifo");
    a.send(msg(&p, b"long but legal hold")).unwrap();
    let _kept = b.recv().unwrap();
    for i in 0..2000u32 {
        a.send(msg(&p, &i.to_le_bytes())).unwrap();
        drop(b.recv().unwrap());
        b.flush();
        if i % 16 == 0 {
            a.reclaim();
        }
    }
    a.reclaim();
    let tx = core::lock(&a.core.tx);
    assert!(
        tx.holds.len() <= 2 * tx.ledger.len() + 64 + 1,
        "{} FIFO entries for {} held",
        tx.holds.len(),
        tx.ledger.len()
    );
}

#[test]
#[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
fn a_sleep_flag_that_lies_is_distrusted_and_wakes_are_rate_limited() {
    let (a, b) = pair(ChannelPolicy {
        futile_wake_limit: 8,
        max_age: Duration::from_secs(3600),
        ..ChannelPolicy::default()
    });
    let p = pool("pol-futile");
    for i in 0..100u32 {
        flag_asleep(&b); // "wake me" — but nobody ever sleeps
        a.send(msg(&p, &i.to_le_bytes())).unwrap();
        drop(b.try_recv().unwrap());
        b.flush();
    }
    let st = a.stats();
    assert_eq!(
        (st.wakes, st.futile_wakes, st.wakes_suppressed),
        (8, 8, 92),
        "{st:?}"
    );
    assert_eq!(a.health(), Err(PeerFault::FutileWakes(8)));
    assert!(a.health().unwrap_err().to_string().contains("futile"));
}
