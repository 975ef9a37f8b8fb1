//! Async channels (feature `tokio`) across real processes: a tokio
//! receiver in a child and a blocking sender in the parent, and the
//! reverse; one task selecting over several channels; receives cancelled
//! at random points with every message accounted for; SIGKILL of the peer
//! while a task awaits a receive or a send; the stream ending cleanly when
//! the peer closes. Every wait is bounded (`STEP`, tokio timeouts); the
//! children run under `Kid`'s watchdog.

mod common;

use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use common::cancel::ends_after_kill;
use common::ring::Rng;
use common::{Kid, SockPath, STEP};
use futures_core::Stream;
use zcio::tokio::AsyncChannel;
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, RecvError, SendErrorKind};

/// Message `i`: 8 bytes of sequence number, then a pattern; its length
/// varies with `i` (up to 64 KiB).
fn message(pool: &Pool, i: u64) -> Msg {
    let len = 8 + (i as usize * 4099) % (64 << 10);
    let mut buf = pool.alloc_timeout(len, STEP).expect("alloc");
    let b = buf.as_mut_slice();
    b[..8].copy_from_slice(&i.to_le_bytes());
    common::fill(&mut b[8..], i, 0);
    Msg::from(buf.freeze().expect("freeze"))
}

/// The sequence number of a message built by [`message`], after checking
/// every byte.
fn check(m: &Msg) -> u64 {
    let v = m.to_vec();
    let i = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
    assert_eq!(
        v.len(),
        8 + (i as usize * 4099) % (64 << 10),
        "length of {i}"
    );
    assert_eq!(common::first_mismatch(&v[8..], i, 0), None, "bytes of {i}");
    i
}

fn small_rings() -> ChannelConfig {
    ChannelConfig {
        ring_entries: 8,
        notice_entries: 8,
        ..ChannelConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn listen(tag: &str, cfg: ChannelConfig) -> (SockPath, Listener) {
    let sock = SockPath::new(tag);
    let l = Listener::bind(sock.path(), cfg).expect("bind");
    (sock, l)
}

/// `fut`, failing the test if it takes longer than `STEP`.
async fn bounded<F: std::future::Future>(what: &str, fut: F) -> F::Output {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no result within {STEP:?}"))
}

#[test]
fn a_tokio_receiver_in_a_child_takes_every_message_of_a_blocking_sender() {
    let (sock, l) = listen("tokio-rx", small_rings());
    let mut kid = Kid::spawn("child_peer", "tokio-peer", &[("SOCK", sock.arg())]);
    let ch = l.accept_timeout(STEP).expect("accept");
    kid.send("recv 3000");
    let pool = common::small_pool("tokio-rx", 1 << 20, 4);
    for i in 0..3000 {
        ch.send(message(&pool, i)).expect("send");
    }
    assert_eq!(kid.expect("received"), "3000 in order");
    kid.send("exit");
    kid.finish();
}

#[test]
fn a_blocking_receiver_takes_every_message_of_a_tokio_sender_in_a_child() {
    let (sock, l) = listen("tokio-tx", small_rings());
    let mut kid = Kid::spawn("child_peer", "tokio-peer", &[("SOCK", sock.arg())]);
    let ch = l.accept_timeout(STEP).expect("accept");
    kid.send("send 3000");
    for i in 0..3000 {
        let m = ch.recv_timeout(STEP).expect("recv");
        assert_eq!(check(&m), i);
        // Hold a few now and then: the async sender waits for notices too.
        if i % 500 == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(kid.expect("sent"), "3000");
    kid.send("exit");
    kid.finish();
}

#[test]
fn one_task_selects_over_four_channels_fed_by_a_child() {
    let (sock, l) = listen("tokio-select", small_rings());
    let mut kid = Kid::spawn("child_spray", "tokio-spray", &[("SOCK", sock.arg())]);
    let chans: Vec<Channel> = (0..4)
        .map(|_| l.accept_timeout(STEP).expect("accept"))
        .collect();
    runtime().block_on(async {
        let c: Vec<AsyncChannel> = chans
            .into_iter()
            .map(|c| AsyncChannel::new(c).expect("async"))
            .collect();
        kid.send("spray 2000");
        let mut next = [0u64; 4];
        let mut total = 0;
        while total < 2000 {
            let (k, m) = bounded("select", async {
                tokio::select! {
                    m = c[0].recv() => (0, m),
                    m = c[1].recv() => (1, m),
                    m = c[2].recv() => (2, m),
                    m = c[3].recv() => (3, m),
                }
            })
            .await;
            let i = check(&m.expect("recv"));
            // The child sends message i on channel i % 4, in order.
            assert_eq!(i % 4, k as u64, "message {i} on channel {k}");
            assert_eq!(i, next[k] * 4 + k as u64, "order on channel {k}");
            next[k] += 1;
            total += 1;
        }
    });
    assert_eq!(kid.expect("sprayed"), "2000");
    kid.send("exit");
    kid.finish();
}

#[test]
fn receives_cancelled_at_random_points_lose_no_message() {
    let (sock, l) = listen("tokio-cancel", small_rings());
    let mut kid = Kid::spawn("child_peer", "tokio-peer", &[("SOCK", sock.arg())]);
    let ch = l.accept_timeout(STEP).expect("accept");
    kid.send("blocking-send 4000");
    runtime().block_on(async {
        let mut ch = AsyncChannel::new(ch).expect("async");
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let (mut next, mut cancelled) = (0u64, 0u64);
        while next < 4000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let delay = Duration::from_micros(rng % 40);
            // Three ways to give up on a receive half-way: a timer in a
            // select!, a timeout around the future, a dropped stream poll.
            let got = match rng % 3 {
                0 => tokio::select! {
                    m = ch.recv() => Some(m.expect("recv")),
                    _ = tokio::time::sleep(delay) => None,
                },
                1 => tokio::time::timeout(delay, ch.recv())
                    .await
                    .ok()
                    .map(|m| m.expect("recv")),
                _ => {
                    let next = poll_fn(|cx| Pin::new(&mut ch).poll_next(cx));
                    tokio::time::timeout(delay, next)
                        .await
                        .ok()
                        .map(|m| m.expect("stream ended early").expect("recv"))
                }
            };
            match got {
                Some(m) => {
                    assert_eq!(check(&m), next, "a cancelled receive lost or reordered");
                    next += 1;
                }
                None => cancelled += 1,
            }
        }
        assert!(
            bounded("end", ch.recv_timeout(Duration::from_millis(1)))
                .await
                .is_err(),
            "nothing beyond the 4000"
        );
        eprintln!("4000 received, {cancelled} receives cancelled");
    });
    assert_eq!(kid.expect("sent"), "4000");
    kid.send("exit");
    kid.finish();
}

#[test]
fn a_peer_killed_while_a_task_awaits_a_receive_ends_it_with_disconnected() {
    let (sock, l) = listen("tokio-kill-rx", ChannelConfig::default());
    let mut kid = Kid::spawn("child_peer", "tokio-peer", &[("SOCK", sock.arg())]);
    let ch = l.accept_timeout(STEP).expect("accept");
    runtime().block_on(async {
        let ch = AsyncChannel::new(ch).expect("async");
        let waiter = async {
            // Pending first (nothing comes), then the kill below wakes it.
            ch.recv().await
        };
        let after = Duration::from_millis(20);
        let r = ends_after_kill(
            "receive after kill",
            after,
            || {
                kid.kill();
            },
            waiter,
        )
        .await;
        assert_eq!(r.unwrap_err(), RecvError::Disconnected);
        assert!(ch.channel().is_disconnected());
    });
}

#[test]
fn a_peer_killed_while_a_task_awaits_ring_space_ends_the_send_with_disconnected() {
    let (sock, l) = listen("tokio-kill-tx", small_rings());
    let mut kid = Kid::spawn("child_peer", "tokio-peer", &[("SOCK", sock.arg())]);
    let ch = l.accept_timeout(STEP).expect("accept");
    let pool = common::small_pool("tokio-kill-tx", 1 << 20, 4);
    runtime().block_on(async {
        let ch = AsyncChannel::new(ch).expect("async");
        // The child never receives: the ring (8 entries) fills up.
        let mut sent = 0u64;
        let err = loop {
            match ch.try_send(message(&pool, 0)) {
                Ok(()) => sent += 1,
                Err(e) => break e.kind(),
            }
        };
        assert!(
            matches!(
                err,
                SendErrorKind::WouldBlock | SendErrorKind::TooManyInFlight(_)
            ),
            "{err:?} after {sent}"
        );
        let sender = ch.send(message(&pool, 1));
        let after = Duration::from_millis(20);
        let r = ends_after_kill(
            "send after kill",
            after,
            || {
                kid.kill();
            },
            sender,
        )
        .await;
        let e = r.expect_err("the peer is dead");
        assert_eq!(e.kind(), SendErrorKind::Disconnected);
        assert_eq!(check(&e.into_inner()), 1, "the message comes back");
    });
}

/// Rounds of [`sends_cancelled_at_random_points_still_end_when_the_peer_is_killed`].
const KILL_ROUNDS: u64 = 150;

#[test]
fn sends_cancelled_at_random_points_still_end_when_the_peer_is_killed() {
    // A task keeps its message across cancellations (`writable` in a
    // `select!` against a random short timer, then `try_send`) while the
    // peer, which never receives, is killed: the wait must end with
    // `Disconnected` however the cancellations fell (before the fix a
    // doorbell hang-up seen while the dying peer's socket was still open
    // left every later look to a timer that the cancellations reset).
    let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
    let pool = common::small_pool("tokio-kill-cancel", 1 << 20, 4);
    let (sock, l) = listen("tokio-kill-cancel", small_rings());
    let mut cancelled = 0u64;
    for round in 0..KILL_ROUNDS {
        let mut kid = Kid::spawn("child_peer", "tokio-peer", &[("SOCK", sock.arg())]);
        let ch = l.accept_timeout(STEP).expect("accept");
        let kill_after = Duration::from_micros(rng.below(20_000));
        let spread = 1 + rng.below(2_000);
        runtime().block_on(async {
            let ch = AsyncChannel::new(ch).expect("async");
            while ch.try_send(message(&pool, 0)).is_ok() {}
            let mut msg = Some(message(&pool, 1));
            let sender = async {
                loop {
                    let delay = Duration::from_micros(rng.below(spread));
                    tokio::select! {
                        r = ch.writable(msg.as_ref().expect("kept")) => {
                            if let Err(kind) = r {
                                return kind;
                            }
                            match ch.try_send(msg.take().expect("kept")) {
                                Ok(()) => panic!("round {round}: sent, but the peer never receives"),
                                Err(e) => {
                                    let kind = e.kind();
                                    msg = Some(e.into_inner());
                                    if SendErrorKind::Disconnected == kind {
                                        return kind;
                                    }
                                }
                            }
                        }
                        _ = tokio::time::sleep(delay) => cancelled += 1,
                    }
                }
            };
            let what = format!("round {round}: send after kill");
            let kind = ends_after_kill(&what, kill_after, || { kid.kill(); }, sender).await;
            assert_eq!(kind, SendErrorKind::Disconnected, "round {round}");
            assert_eq!(check(msg.as_ref().expect("kept")), 1, "the message is kept");
        });
    }
    eprintln!("{KILL_ROUNDS} kills, {cancelled} waits cancelled");
}

#[test]
fn the_stream_ends_after_the_last_message_of_a_peer_that_closed() {
    let (sock, l) = listen("tokio-stream", ChannelConfig::default());
    let mut kid = Kid::spawn("child_peer", "tokio-peer", &[("SOCK", sock.arg())]);
    let ch = l.accept_timeout(STEP).expect("accept");
    // The child sends 100 (blocking while its ring is full), then closes.
    kid.send("blocking-send 100");
    kid.send("exit");
    runtime().block_on(async {
        let mut ch = AsyncChannel::new(ch).expect("async");
        let mut n = 0;
        while let Some(m) = bounded("stream", poll_fn(|cx| Pin::new(&mut ch).poll_next(cx))).await {
            assert_eq!(check(&m.expect("recv")), n);
            n += 1;
        }
        assert_eq!(n, 100, "every message, then the end");
    });
    assert_eq!(kid.expect("sent"), "100");
    kid.finish();
}

/// A silent peer in a child: the default waits of an async end end with
/// `TimedOut` at the configured bounds (200 ms here); the stream yields a
/// `TimedOut` item and goes on to the message sent later.
#[test]
fn a_silent_peer_bounds_the_async_default_waits() {
    let short = Duration::from_millis(200);
    let cfg = ChannelConfig {
        send_timeout: short,
        recv_timeout: short,
        ..small_rings()
    };
    let (sock, l) = listen("tokio-silent", cfg);
    let mut kid = Kid::spawn("child_peer", "tokio-peer", &[("SOCK", sock.arg())]);
    let ch = l.accept_timeout(STEP).expect("accept");
    let pool = common::small_pool("tokio-silent", 1 << 20, 4);
    runtime().block_on(async {
        let mut ch = AsyncChannel::new(ch).expect("async");
        assert_eq!(
            bounded("recv", ch.recv()).await.unwrap_err(),
            RecvError::TimedOut
        );
        let item = bounded("stream", poll_fn(|cx| Pin::new(&mut ch).poll_next(cx))).await;
        assert!(matches!(item, Some(Err(RecvError::TimedOut))), "{item:?}");
        // The child never receives: the ring (8 entries) fills up.
        let mut sent = 0u64;
        let err = loop {
            match bounded("send", ch.send(message(&pool, sent))).await {
                Ok(()) => sent += 1,
                Err(e) => break e.kind(),
            }
            assert!(sent < 1000, "the ring never filled");
        };
        assert!(
            matches!(
                err,
                SendErrorKind::TimedOut | SendErrorKind::TooManyInFlight(_)
            ),
            "{err:?} after {sent}"
        );
        kid.send("send 1");
        let item = bounded("stream", poll_fn(|cx| Pin::new(&mut ch).poll_next(cx))).await;
        assert_eq!(check(&item.expect("an item").expect("a message")), 0);
        assert_eq!(kid.expect("sent"), "1");
        kid.send(&format!("recv {sent}"));
        assert_eq!(kid.next_report(), format!("received {sent} in order"));
    });
    kid.send("exit");
    kid.finish();
}

// ------------------------------------------------------------------ children

#[test]
#[ignore]
fn child_peer() {
    if common::child_role("tokio-peer").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), small_rings()).expect("connect");
    let pool = common::small_pool("tokio-peer", 1 << 20, 4);
    let rt = runtime();
    let ch = rt.block_on(async { AsyncChannel::new(ch).expect("async") });
    while let Some(cmd) = common::command() {
        let words: Vec<&str> = cmd.split(' ').collect();
        match words.as_slice() {
            ["recv", n] => {
                let n: u64 = n.parse().expect("count");
                rt.block_on(async {
                    for i in 0..n {
                        let m = ch.recv().await.expect("recv");
                        assert_eq!(check(&m), i);
                    }
                });
                common::report(format_args!("received {n} in order"));
            }
            ["send", n] => {
                let n: u64 = n.parse().expect("count");
                rt.block_on(async {
                    for i in 0..n {
                        ch.send(message(&pool, i)).await.expect("send");
                    }
                });
                common::report(format_args!("sent {n}"));
            }
            ["blocking-send", n] => {
                // The blocking calls of an end in bell mode.
                let n: u64 = n.parse().expect("count");
                for i in 0..n {
                    ch.channel().send(message(&pool, i)).expect("send");
                }
                common::report(format_args!("sent {n}"));
            }
            ["exit"] => break,
            other => panic!("unknown command {other:?}"),
        }
    }
    // Wait for the parent to take every message before closing.
    drop(ch);
}

#[test]
#[ignore]
fn child_spray() {
    if common::child_role("tokio-spray").is_none() {
        return;
    }
    let chans: Vec<Channel> = (0..4)
        .map(|_| Channel::connect(common::arg("SOCK"), small_rings()).expect("connect"))
        .collect();
    let pool = common::small_pool("tokio-spray", 1 << 20, 4);
    while let Some(cmd) = common::command() {
        match cmd.split(' ').collect::<Vec<_>>().as_slice() {
            ["spray", n] => {
                let n: u64 = n.parse().expect("count");
                for i in 0..n {
                    chans[(i % 4) as usize]
                        .send(message(&pool, i))
                        .expect("send");
                }
                common::report(format_args!("sprayed {n}"));
            }
            ["exit"] => break,
            other => panic!("unknown command {other:?}"),
        }
    }
}
