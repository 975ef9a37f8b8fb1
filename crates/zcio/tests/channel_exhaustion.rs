//! Back-pressure with a receiver that stops consuming and never releases:
//! a full ring hands the message back (`WouldBlock` / `TimedOut`), the pool cap
//! gives `WouldBlock` and a bounded `alloc_timeout` gives `TimedOut`, the
//! `max_in_flight` cap gives `TooManyInFlight` — and once the receiver
//! releases, allocation and sending work again with nothing leaked.

mod common;

use std::time::{Duration, Instant};

use common::{Kid, SockPath, STEP};
use zcio::SendErrorKind;
use zcio::{AllocError, Channel, ChannelConfig, Listener, Msg, Uncached};

const BUF: usize = 8192;
const RING: u32 = 8;
const MAX_IN_FLIGHT: usize = 16;

fn cfg() -> ChannelConfig {
    ChannelConfig {
        ring_entries: RING,
        notice_entries: 64,
        max_in_flight: MAX_IN_FLIGHT,
        ..ChannelConfig::default()
    }
}

fn tagged(b: zcio::FbufMut, tag: u8) -> Msg {
    let mut b = b;
    b.as_mut_slice().fill(tag);
    Msg::from(b.freeze().expect("freeze"))
}

#[test]
fn caps_report_typed_errors_and_recover_after_release() {
    let sock = SockPath::new("exh");
    let listener = Listener::bind(sock.path(), cfg()).expect("bind");
    let mut kid = Kid::spawn("child_receiver", "exh-receiver", &[("SOCK", sock.arg())]);
    let ch = listener.accept_timeout(STEP).expect("accept");
    // Two 64 KiB chunks: sixteen 8 KiB buffers, no more.
    let pool = common::small_pool("exh", 64 << 10, 2);
    let mut tag = 0u8;
    let mut next = |pool: &zcio::Pool| {
        tag += 1;
        tagged(pool.try_alloc(BUF).expect("alloc"), tag)
    };

    // 1. The receiver is not consuming: the 8-entry ring fills.
    for _ in 0..RING {
        ch.try_send(next(&pool)).expect("ring has room");
    }
    let (e, back) = ch.try_send(next(&pool)).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::WouldBlock);
    assert_eq!(
        back.to_vec(),
        vec![9u8; BUF],
        "the message comes back intact"
    );
    let t0 = Instant::now();
    let (e, back) = ch
        .send_timeout(back, Duration::from_millis(200))
        .unwrap_err()
        .into_parts();
    assert_eq!(e, SendErrorKind::TimedOut);
    assert!(
        t0.elapsed() >= Duration::from_millis(200),
        "waited for its bound"
    );
    assert_eq!(back.to_vec(), vec![9u8; BUF]);

    // 2. The receiver takes (and keeps) what is queued: room again.
    assert_eq!(kid.ask("recv 8"), "received 8 held=8");
    ch.try_send(back).expect("room after the receiver consumed");
    assert_eq!(kid.ask("recv 1"), "received 1 held=9");

    // 3. Pool cap: sixteen buffers exist; nine are held by the receiver.
    let mut extra = 0;
    loop {
        match pool.try_alloc(BUF) {
            Ok(b) => {
                tag += 1;
                ch.try_send(tagged(b, tag)).expect("send");
                extra += 1;
            }
            Err(AllocError::WouldBlock(name)) => {
                assert_eq!(name, "exh");
                break;
            }
            Err(e) => panic!("unexpected {e}"),
        }
        assert!(extra <= 16, "the pool cap is not enforced");
    }
    assert_eq!(extra, 7, "16 buffers in the pool, 9 already held");
    let st = pool.stats();
    assert_eq!((st.buffers_in_use, st.chunks), (16, 2), "{st:?}");
    assert!(st.exhausted >= 1);
    assert!(st.held_per_peer.iter().any(|(_, n)| *n == 16), "{st:?}");
    let t0 = Instant::now();
    match pool.alloc_timeout(BUF, Duration::from_millis(300)) {
        Err(AllocError::TimedOut(d)) => assert_eq!(d, Duration::from_millis(300)),
        other => panic!("expected TimedOut, got {other:?}"),
    }
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < STEP,
        "bounded wait: {waited:?}"
    );

    // 4. max_in_flight: the peer holds (or has queued) 16 slices.
    let unc = Uncached::new("exh-u", false);
    let (e, back) = ch
        .try_send(tagged(unc.alloc(100).expect("uncached"), 0xEE))
        .unwrap_err()
        .into_parts();
    assert_eq!(e, SendErrorKind::TooManyInFlight(MAX_IN_FLIGHT));
    assert_eq!(back.to_vec(), vec![0xEE; 100]);
    assert_eq!(ch.stats().held_by_peer, MAX_IN_FLIGHT);

    // 5. The receiver takes the rest and then releases everything.
    assert_eq!(kid.ask("recv 7"), "received 7 held=16");
    assert_eq!(kid.ask("release"), "released 16 ok=true");
    let b = pool
        .alloc_timeout(BUF, STEP)
        .expect("allocation succeeds again after the release");
    drop(b);
    common::settle(&ch, "everything returned", || {
        pool.stats().buffers_in_use == 0 && ch.stats().held_by_peer == 0
    });
    ch.try_send(back).expect("in-flight cap lifted");
    assert_eq!(kid.ask("recv 1"), "received 1 held=1");
    assert_eq!(kid.ask("release"), "released 1 ok=true");
    common::settle(&ch, "uncached buffer released", || {
        ch.stats().held_by_peer == 0
    });
    let st = ch.stats();
    assert_eq!(
        (st.msgs_sent, st.notices_received, st.bad_notices),
        (17, 17, 0),
        "{st:?}"
    );
    kid.send("exit");
    kid.finish();
}

/// The byte cap: a receiver in another process that holds 4 buffers of
/// 8 KiB holds all it may under a 32 KiB cap; a send waits for it (bounded),
/// hands the message back, reports the peer as not releasing, and goes
/// through once the peer released.
#[test]
fn the_byte_cap_holds_sends_back_until_the_peer_releases() {
    let sock = SockPath::new("exb");
    let capped = ChannelConfig {
        max_bytes_in_flight: 4 * BUF as u64,
        ..cfg()
    };
    let listener = Listener::bind(sock.path(), capped).expect("bind");
    let mut kid = Kid::spawn("child_receiver", "exh-receiver", &[("SOCK", sock.arg())]);
    let ch = listener.accept_timeout(STEP).expect("accept");
    let pool = common::small_pool("exb", 64 << 10, 2);
    for tag in 1..=4u8 {
        ch.try_send(tagged(pool.try_alloc(BUF).expect("alloc"), tag))
            .expect("under the byte cap");
    }
    assert_eq!(kid.ask("recv 4"), "received 4 held=4");
    let (e, back) = ch
        .send_timeout(
            tagged(pool.try_alloc(1).expect("alloc"), 5),
            Duration::from_millis(200),
        )
        .unwrap_err()
        .into_parts();
    assert_eq!(e, SendErrorKind::TooManyInFlight(4));
    assert_eq!(back.to_vec(), [5]);
    assert_eq!(ch.health(), Err(zcio::PeerFault::NotReleasing(4)));
    assert_eq!(kid.ask("release"), "released 4 ok=true");
    ch.send_timeout(back, STEP)
        .expect("the byte cap lifts once the peer released");
    assert_eq!(kid.ask("recv 1"), "received 1 held=1");
    assert_eq!(kid.ask("release"), "released 1 ok=true");
    common::settle(&ch, "everything returned", || {
        ch.stats().held_by_peer == 0 && pool.stats().buffers_in_use == 0
    });
    kid.send("exit");
    kid.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_receiver() {
    if common::child_role("exh-receiver").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), cfg()).expect("connect");
    let mut held: Vec<Msg> = Vec::new();
    while let Some(cmd) = common::command() {
        match cmd.split_once(' ') {
            Some(("recv", n)) => {
                for _ in 0..n.parse::<usize>().expect("count") {
                    held.push(ch.recv_timeout(STEP).expect("recv"));
                }
                common::report(format_args!("received {n} held={}", held.len()));
            }
            _ if cmd == "release" => {
                // Every message is one buffer filled with one tag byte.
                let ok = held.iter().all(|m| {
                    let v = m.to_vec();
                    m.slice_count() == 1 && v.iter().all(|&b| b == v[0])
                });
                let n = held.len();
                held.clear();
                ch.flush(); // publish the batched notices before going idle
                common::report(format_args!("released {n} ok={ok}"));
            }
            _ if cmd == "exit" => return,
            _ => panic!("unknown command {cmd:?}"),
        }
    }
}
