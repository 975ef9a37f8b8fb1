//! Lanes between the two ends of an in-process channel pair: the slot
//! life cycle, back-pressure, the ends, and a hostile peer on either side
//! (forged descriptors and notices, a corrupt ring). Across processes:
//! `tests/channel_lane.rs`.

use std::time::Duration;

use crate::channel::lane::wire::LaneLayout;
use crate::{Channel, ChannelConfig, LaneConfig, LaneError, LaneReceiver, LaneSender};

const T: Duration = Duration::from_secs(30);

fn lane(slots: u32, slot_size: usize) -> (Channel, Channel, LaneSender, LaneReceiver) {
    let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
    let tx = a.open_lane(&LaneConfig { slots, slot_size }).unwrap();
    let rx = b.accept_lane_timeout(T).unwrap();
    (a, b, tx, rx)
}

fn send(tx: &mut LaneSender, bytes: &[u8]) {
    let mut l = tx.try_loan().unwrap();
    l.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
    l.send(bytes.len()).unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn messages_arrive_in_order_and_slots_come_back_warmest_first() {
    let (_a, _b, mut tx, mut rx) = lane(4, 100);
    assert_eq!((tx.slots(), tx.slot_size(), rx.slot_size()), (4, 100, 100));
    for i in 0..3u8 {
        send(&mut tx, &[i; 10]);
    }
    assert_eq!(tx.stats().in_flight, 3);
    for i in 0..3u8 {
        let m = rx.try_recv().unwrap();
        assert_eq!((m.len(), m.to_vec()), (10, vec![i; 10]));
        let mut b = [0u8; 4];
        assert_eq!(m.read_at(8, &mut b), 2);
    }
    assert_eq!(rx.try_recv().unwrap_err(), LaneError::WouldBlock);
    // The notices free all three; the slot released last is lent first.
    let l = tx.try_loan().unwrap();
    assert_eq!(format!("{l:?}"), "Loan { slot: 2 }");
    drop(l);
    assert_eq!(tx.stats().in_flight, 0);
    let s = rx.stats();
    assert_eq!((s.messages, s.notices, s.malformed), (3, 3, 0));
    // A zero-length message is a message.
    tx.try_loan().unwrap().send(0).unwrap();
    assert!(rx.try_recv().unwrap().is_empty());
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn every_slot_in_flight_blocks_the_sender_until_the_receiver_drops_one() {
    let (_a, _b, mut tx, mut rx) = lane(2, 64);
    send(&mut tx, b"one");
    send(&mut tx, b"two");
    assert_eq!(tx.try_loan().unwrap_err(), LaneError::WouldBlock);
    assert_eq!(
        tx.loan_timeout(Duration::from_millis(20)).unwrap_err(),
        LaneError::TimedOut
    );
    // A loan dropped unsent gives its slot back; so does a received message.
    let first = rx.try_recv().unwrap();
    assert_eq!(first.to_vec(), b"one");
    drop(first);
    drop(tx.try_loan().unwrap());
    send(&mut tx, b"three");
    // A blocking loan waits for the receiver (another thread) to drop one.
    let t = std::thread::spawn(move || {
        let got: Vec<Vec<u8>> = (0..3)
            .map(|_| rx.recv_timeout(T).unwrap().to_vec())
            .collect();
        (got, rx)
    });
    send_blocking(&mut tx, b"four");
    let (got, _rx) = t.join().unwrap();
    assert_eq!(got, [b"two".to_vec(), b"three".to_vec(), b"four".to_vec()]);
}

fn send_blocking(tx: &mut LaneSender, bytes: &[u8]) {
    let mut l = tx.loan_timeout(T).unwrap();
    l.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
    l.send(bytes.len()).unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn a_message_too_long_for_the_slot_gives_the_loan_back() {
    let (_a, _b, mut tx, mut rx) = lane(1, 8);
    let (e, loan) = tx.try_loan().unwrap().send(9).unwrap_err().into_parts();
    assert_eq!(e, LaneError::TooLarge { len: 9, max: 8 });
    assert_eq!(e.kind(), crate::error::ErrorKind::TooLarge);
    loan.send(8).unwrap();
    assert_eq!(rx.try_recv().unwrap().len(), 8);
    assert_eq!(
        tx.send_copy(&[0; 9]).unwrap_err(),
        LaneError::TooLarge { len: 9, max: 8 }
    );
    tx.send_copy(b"12345678").unwrap();
    assert_eq!(rx.try_recv().unwrap().to_vec(), b"12345678");
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn ends_are_seen_by_the_other_side() {
    let (_a, _b, mut tx, mut rx) = lane(4, 64);
    send(&mut tx, b"last");
    drop(tx);
    // What was sent before the end still arrives; then the end.
    assert_eq!(rx.recv_timeout(T).unwrap().to_vec(), b"last");
    assert_eq!(rx.recv_timeout(T).unwrap_err(), LaneError::Disconnected);

    let (_a, _b, mut tx, rx) = lane(1, 64);
    send(&mut tx, b"held");
    drop(rx);
    assert_eq!(tx.loan_timeout(T).unwrap_err(), LaneError::Disconnected);

    // Closing the channel ends its lanes, both ways.
    let (a, b, mut tx, mut rx) = lane(2, 64);
    a.close();
    let (e, _) = tx.try_loan().unwrap().send(1).unwrap_err().into_parts();
    assert_eq!(e, LaneError::Disconnected);
    assert_eq!(rx.recv_timeout(T).unwrap_err(), LaneError::Disconnected);
    assert_eq!(
        a.open_lane(&LaneConfig::default()).unwrap_err(),
        LaneError::Disconnected
    );
    assert_eq!(
        b.accept_lane_timeout(T).unwrap_err(),
        LaneError::Disconnected
    );
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn accepting_waits_for_an_offer_and_bad_configs_are_refused() {
    let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
    assert_eq!(b.try_accept_lane().unwrap_err(), LaneError::WouldBlock);
    assert_eq!(
        b.accept_lane_timeout(Duration::from_millis(30))
            .unwrap_err(),
        LaneError::TimedOut
    );
    for bad in [
        LaneConfig {
            slots: 0,
            slot_size: 64,
        },
        LaneConfig {
            slots: 1 << 17,
            slot_size: 64,
        },
        LaneConfig {
            slots: 1,
            slot_size: 0,
        },
        LaneConfig {
            slots: 1,
            slot_size: (1 << 30) + 1,
        },
    ] {
        assert_eq!(a.open_lane(&bad).unwrap_err(), LaneError::InvalidConfig);
    }
    // Two lanes, taken in the order offered; either end may open one.
    let mut t1 = a
        .open_lane(&LaneConfig {
            slots: 1,
            slot_size: 16,
        })
        .unwrap();
    let mut t2 = a
        .open_lane(&LaneConfig {
            slots: 2,
            slot_size: 32,
        })
        .unwrap();
    let mut back = b.open_lane(&LaneConfig::default()).unwrap();
    let mut r1 = b.accept_lane_timeout(T).unwrap();
    let mut r2 = b.accept_lane_timeout(T).unwrap();
    let mut rback = a.accept_lane_timeout(T).unwrap();
    assert_eq!((r1.slot_size(), r2.slot_size()), (16, 32));
    t1.send_copy(b"1").unwrap();
    t2.send_copy(b"2").unwrap();
    back.send_copy(b"3").unwrap();
    assert_eq!(r1.try_recv().unwrap().to_vec(), b"1");
    assert_eq!(r2.try_recv().unwrap().to_vec(), b"2");
    assert_eq!(rback.try_recv().unwrap().to_vec(), b"3");
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn forged_notices_free_nothing_that_is_not_in_flight() {
    let (_a, _b, mut tx, mut rx) = lane(2, 64);
    send(&mut tx, b"x");
    // Slot 1 was never sent; slot 7 does not exist; slot 0 is in flight.
    rx.forge_notice(1);
    rx.forge_notice(7);
    rx.forge_notice(0);
    // A second notice for slot 0 once it is free again: ignored too.
    rx.forge_notice(0);
    let l1 = tx.try_loan().unwrap();
    drop(l1);
    assert_eq!(tx.stats().bad_notices, 3);
    // Both slots free, each exactly once: two loans, not three.
    send(&mut tx, b"a");
    send(&mut tx, b"b");
    assert_eq!(tx.try_loan().unwrap_err(), LaneError::WouldBlock);
    // The receiver still reads both messages (and the forged-away one).
    let got: Vec<_> = (0..3).map(|_| rx.try_recv().unwrap().to_vec()).collect();
    assert_eq!(got.len(), 3);
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn forged_descriptors_are_dropped_and_the_lane_stays_usable() {
    let (_a, _b, mut tx, mut rx) = lane(2, 64);
    tx.forge_desc(2, 1);
    tx.forge_desc(0, 65);
    tx.forge_desc(u32::MAX, u32::MAX);
    assert_eq!(
        rx.try_recv().unwrap_err(),
        LaneError::Malformed { slot: 2, len: 1 }
    );
    assert_eq!(
        rx.try_recv().unwrap_err(),
        LaneError::Malformed { slot: 0, len: 65 }
    );
    let e = rx.try_recv().unwrap_err();
    assert_eq!(e.kind(), crate::error::ErrorKind::Malformed);
    assert_eq!(rx.stats().malformed, 3);
    send(&mut tx, b"fine");
    assert_eq!(rx.try_recv().unwrap().to_vec(), b"fine");
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn a_corrupt_ring_is_reported_not_waited_on() {
    let (_a, _b, tx, mut rx) = lane(2, 64);
    let layout = LaneLayout::new(2, 64).unwrap();
    let (seg, len) = tx.segment_for_tests();
    assert!(layout.msg_ring + 8 <= len);
    // The message ring's tail word (the producer's line) far ahead of any
    // possible position.
    // SAFETY: an aligned u64 inside the live mapping; the test plays the
    // hostile sender that owns this word.
    unsafe {
        (*seg
            .add(layout.msg_ring)
            .cast::<std::sync::atomic::AtomicU64>())
        .store(1 << 40, std::sync::atomic::Ordering::Release)
    };
    assert_eq!(rx.recv_timeout(T).unwrap_err(), LaneError::Corrupt);
    assert_eq!(rx.try_recv().unwrap_err(), LaneError::Corrupt);
    assert_eq!(
        LaneError::Corrupt.kind(),
        crate::error::ErrorKind::PeerFault
    );

    // The notice ring's tail, as a hostile receiver.
    let (_a, _b, mut tx, rx) = lane(1, 64);
    send(&mut tx, b"x");
    let (seg, _) = rx.segment_for_tests();
    // SAFETY: as above, the notice ring's tail word, owned by the
    // receiver this test plays.
    unsafe {
        (*seg
            .add(layout.notice_ring)
            .cast::<std::sync::atomic::AtomicU64>())
        .store(u64::MAX >> 2, std::sync::atomic::Ordering::Release)
    };
    assert_eq!(tx.loan_timeout(T).unwrap_err(), LaneError::Corrupt);
}

#[test]
#[cfg_attr(miri, ignore = "lane: memfd segments, SEQPACKET socket; not in Miri")]
fn the_statistics_page_counts_bytes_refusals_and_names_the_lane_alike() {
    let (_a, _b, mut tx, mut rx) = lane(2, 64);
    let (s, r) = (tx.stats(), rx.stats());
    assert_eq!(s.peer_pid, std::process::id());
    assert_ne!(s.connection, 0);
    assert_eq!(s.connection, r.connection, "both ends name one lane");
    assert_eq!(rx.try_recv().unwrap_err(), LaneError::WouldBlock);
    send(&mut tx, b"one");
    send(&mut tx, &[9; 60]);
    assert_eq!(tx.try_loan().unwrap_err(), LaneError::WouldBlock);
    let s = tx.stats();
    assert_eq!(
        (s.messages, s.bytes, s.in_flight, s.would_block),
        (2, 63, 2, 1)
    );
    for _ in 0..2 {
        drop(rx.try_recv().unwrap());
    }
    let r = rx.stats();
    assert_eq!((r.messages, r.bytes, r.would_block), (2, 63, 1));
    drop(tx.try_loan().unwrap());
    assert_eq!(tx.stats().in_flight, 0);
    drop(rx);
    let l = tx.try_loan().unwrap();
    let e = *l.send(1).unwrap_err().error();
    assert_eq!(e, LaneError::Disconnected);
    assert_eq!(tx.stats().disconnected, 1);
}
