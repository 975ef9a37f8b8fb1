//! Lanes across real processes: messages both ways (an echo child), a
//! receiver that holds every slot (back-pressure and recovery), peers
//! killed with SIGKILL on either side, and a hostile peer on either side
//! (forged notices and descriptors, a corrupt ring). Every victim wait is
//! bounded; the child runs under `Kid`'s watchdog.

mod common;

use std::time::Duration;

use common::{Kid, SockPath, STEP};
use zcio::{Channel, ChannelConfig, LaneConfig, LaneError, Listener};

const SLOT: usize = 4096;

fn victim(tag: &str) -> (SockPath, Listener, Kid, Channel) {
    let sock = SockPath::new(tag);
    let listener = Listener::bind(sock.path(), ChannelConfig::default()).expect("bind");
    let kid = Kid::spawn("child_peer", "lane-peer", &[("SOCK", sock.arg())]);
    let ch = listener.accept_timeout(STEP).expect("accept");
    (sock, listener, kid, ch)
}

fn cfg(slots: u32) -> LaneConfig {
    LaneConfig {
        slots,
        slot_size: SLOT,
    }
}

/// Message `i`: its length varies with `i`, every byte from the pattern.
fn pattern(i: u64) -> Vec<u8> {
    let len = 1 + (i as usize * 97) % SLOT;
    let mut v = vec![0u8; len];
    common::fill(&mut v, i, 0);
    v
}

#[test]
fn messages_cross_both_ways_through_an_echoing_process() {
    let (_s, _l, mut kid, ch) = victim("lane-echo");
    let mut tx = ch.open_lane(&cfg(8)).expect("open lane");
    assert_eq!(kid.ask("accept"), "accepted slot_size=4096");
    assert_eq!(kid.ask("open 8"), "opened");
    let mut rx = ch.accept_lane_timeout(STEP).expect("the child's lane");
    assert_eq!(kid.ask("echo 2000"), "echoed 2000");
    // Up to 8 in flight each way: send ahead, then read the echoes back.
    let mut next_back = 0u64;
    for i in 0..2000u64 {
        let p = pattern(i);
        let mut loan = tx.loan_timeout(STEP).expect("loan");
        loan.as_mut_slice()[..p.len()].copy_from_slice(&p);
        loan.send(p.len()).expect("send");
        if i >= 4 {
            let m = rx.recv_timeout(STEP).expect("echo");
            assert_eq!(m.to_vec(), pattern(next_back), "echo of {next_back}");
            next_back += 1;
        }
    }
    while next_back < 2000 {
        let m = rx.recv_timeout(STEP).expect("echo");
        assert_eq!(m.to_vec(), pattern(next_back));
        next_back += 1;
    }
    assert_eq!(kid.ask("done"), "done received=2000 ok=true");
    let s = tx.stats();
    assert_eq!((s.messages, s.bad_notices), (2000, 0), "{s:?}");
    assert_eq!(rx.stats().malformed, 0);
    kid.send("exit");
    kid.finish();
}

#[test]
fn a_receiver_holding_every_slot_blocks_the_sender_until_it_lets_go() {
    let (_s, _l, mut kid, ch) = victim("lane-hold");
    let mut tx = ch.open_lane(&cfg(2)).expect("open lane");
    assert_eq!(kid.ask("accept"), "accepted slot_size=4096");
    tx.send_copy(b"one").expect("send");
    tx.send_copy(b"two").expect("send");
    assert_eq!(kid.ask("hold"), "holding 3 bytes");
    assert_eq!(tx.try_loan().unwrap_err(), LaneError::WouldBlock);
    assert_eq!(
        tx.loan_timeout(Duration::from_millis(200)).unwrap_err(),
        LaneError::TimedOut
    );
    assert_eq!(kid.ask("release"), "released");
    let mut loan = tx.loan_timeout(STEP).expect("a slot came back");
    loan.as_mut_slice()[..5].copy_from_slice(b"three");
    loan.send(5).expect("send");
    assert_eq!(kid.ask("recv 2"), "received 2 last=three");
    kid.send("exit");
    kid.finish();
}

#[test]
fn a_killed_receiver_ends_the_lane_for_a_waiting_sender() {
    let (_s, _l, mut kid, ch) = victim("lane-kill-rx");
    let mut tx = ch.open_lane(&cfg(1)).expect("open lane");
    assert_eq!(kid.ask("accept"), "accepted slot_size=4096");
    tx.send_copy(b"held").expect("send");
    assert_eq!(kid.ask("hold"), "holding 4 bytes");
    assert!(kid.kill().code().is_none(), "killed by a signal");
    // The only slot is with the dead process: the bounded wait for it
    // watches the peer and ends with Disconnected, not a timeout.
    assert_eq!(tx.loan_timeout(STEP).unwrap_err(), LaneError::Disconnected);
    assert!(ch.is_disconnected());
}

#[test]
fn a_killed_sender_leaves_its_messages_readable_then_disconnected() {
    let (_s, _l, mut kid, ch) = victim("lane-kill-tx");
    assert_eq!(kid.ask("open 4"), "opened");
    assert_eq!(kid.ask("send 3"), "sent 3");
    let mut rx = ch.accept_lane_timeout(STEP).expect("the child's lane");
    assert!(kid.kill().code().is_none(), "killed by a signal");
    for i in 0..3u64 {
        let m = rx.recv_timeout(STEP).expect("queued before the kill");
        assert_eq!(m.to_vec(), pattern(i));
    }
    assert_eq!(rx.recv_timeout(STEP).unwrap_err(), LaneError::Disconnected);
}

#[test]
fn a_hostile_receiver_frees_only_what_it_was_sent() {
    let (_s, _l, mut kid, ch) = victim("lane-bad-rx");
    let mut tx = ch.open_lane(&cfg(2)).expect("open lane");
    assert_eq!(kid.ask("accept"), "accepted slot_size=4096");
    tx.send_copy(b"a").expect("send");
    // Slot 0 is in flight: one notice for it counts, the repeat, the slot
    // never sent (1) and the slots that do not exist do not.
    assert_eq!(kid.ask("forge 0 0 1 7 4294967295"), "forged 5");
    let l = tx.loan_timeout(STEP).expect("loan");
    drop(l);
    assert_eq!(tx.stats().bad_notices, 4);
    tx.send_copy(b"b").expect("send");
    tx.send_copy(b"c").expect("send");
    assert_eq!(
        tx.try_loan().unwrap_err(),
        LaneError::WouldBlock,
        "two slots, no more"
    );
    kid.send("exit");
    kid.finish();
}

#[test]
fn a_hostile_sender_gets_its_bad_descriptors_dropped_and_a_corrupt_ring_reported() {
    let (_s, _l, mut kid, ch) = victim("lane-bad-tx");
    assert_eq!(kid.ask("open 2"), "opened");
    let mut rx = ch.accept_lane_timeout(STEP).expect("the child's lane");
    assert_eq!(kid.ask("forge-desc 2 1"), "forged");
    assert_eq!(
        rx.recv_timeout(STEP).unwrap_err(),
        LaneError::Malformed { slot: 2, len: 1 }
    );
    assert_eq!(kid.ask("forge-desc 0 4097"), "forged");
    assert!(matches!(
        rx.recv_timeout(STEP).unwrap_err(),
        LaneError::Malformed { .. }
    ));
    assert_eq!(kid.ask("send 1"), "sent 1");
    assert_eq!(
        rx.recv_timeout(STEP).expect("still usable").to_vec(),
        pattern(0)
    );
    assert_eq!(kid.ask("corrupt"), "corrupted");
    // Nothing to read and an impossible tail: reported, not slept on.
    assert_eq!(rx.recv_timeout(STEP).unwrap_err(), LaneError::Corrupt);
    assert_eq!(rx.stats().malformed, 2);
    kid.send("exit");
    kid.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_peer() {
    if common::child_role("lane-peer").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), ChannelConfig::default()).expect("connect");
    let mut rx = None;
    let mut tx = None;
    let mut echoed = 0u64;
    while let Some(cmd) = common::command() {
        let words: Vec<&str> = cmd.split(' ').collect();
        match words.as_slice() {
            ["accept"] => {
                let r = ch.accept_lane_timeout(STEP).expect("accept lane");
                common::report(format_args!("accepted slot_size={}", r.slot_size()));
                rx = Some(r);
            }
            ["open", slots] => {
                tx = Some(
                    ch.open_lane(&cfg(slots.parse().expect("slots")))
                        .expect("open lane"),
                );
                common::report("opened");
            }
            ["echo", n] => {
                let n: u64 = n.parse().expect("count");
                common::report(format_args!("echoed {n}"));
                let (r, t) = (rx.as_mut().expect("rx"), tx.as_mut().expect("tx"));
                for _ in 0..n {
                    let m = r.recv_timeout(STEP).expect("recv");
                    let mut loan = t.loan_timeout(STEP).expect("loan");
                    let len = m.read_at(0, &mut loan.as_mut_slice()[..]);
                    drop(m);
                    loan.send(len).expect("echo");
                    echoed += 1;
                }
            }
            ["done"] => common::report(format_args!("done received={echoed} ok=true")),
            ["hold"] => {
                let r = rx.as_mut().expect("rx");
                let m = r.recv_timeout(STEP).expect("recv");
                common::report(format_args!("holding {} bytes", m.len()));
                common::expect_command("release");
                drop(m);
                common::report("released");
            }
            ["recv", n] => {
                let r = rx.as_mut().expect("rx");
                let mut last = Vec::new();
                for _ in 0..n.parse::<usize>().expect("count") {
                    last = r.recv_timeout(STEP).expect("recv").to_vec();
                }
                common::report(format_args!(
                    "received {n} last={}",
                    String::from_utf8_lossy(&last)
                ));
            }
            ["send", n] => {
                let t = tx.as_mut().expect("tx");
                for i in 0..n.parse::<u64>().expect("count") {
                    t.send_copy(&pattern(i)).expect("send");
                }
                common::report(format_args!("sent {n}"));
            }
            ["forge", slots @ ..] => {
                let r = rx.as_mut().expect("rx");
                for s in slots {
                    r.forge_notice(s.parse().expect("slot"));
                }
                common::report(format_args!("forged {}", slots.len()));
            }
            ["forge-desc", slot, len] => {
                let t = tx.as_mut().expect("tx");
                t.forge_desc(slot.parse().expect("slot"), len.parse().expect("len"));
                common::report("forged");
            }
            ["corrupt"] => {
                let t = tx.as_ref().expect("tx");
                let (seg, _) = t.segment_for_tests();
                // The message ring's header follows the 64-byte lane
                // header; its first word is the tail this process owns.
                // SAFETY: an aligned u64 inside the live segment mapping,
                // written by the producer that owns it (hostile on purpose).
                unsafe {
                    (*seg.add(64).cast::<std::sync::atomic::AtomicU64>())
                        .store(1 << 40, std::sync::atomic::Ordering::Release)
                };
                common::report("corrupted");
            }
            ["exit"] => return,
            _ => panic!("unknown command {cmd:?}"),
        }
    }
}
