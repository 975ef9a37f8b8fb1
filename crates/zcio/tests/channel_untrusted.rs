//! Untrusted partners on the channel (issue #4, deliverable 4): a child
//! process plays each of the four bad partners against a victim `Channel`
//! in the test process. The victim must get typed errors or a
//! `PeerFault` from `Channel::health`/`faults`, never block past its bounds
//! (every victim wait has a timeout; a victim watchdog aborts the test
//! process if one does not, and `Kid`'s watchdog kills a hung child), never
//! panic, and recover where that makes sense.
//!
//! Already covered elsewhere and not repeated here: `WouldBlock`/`TimedOut`/
//! `TooManyInFlight` and pool exhaustion with recovery (`exhaustion.rs`),
//! corrupt message-ring tail and notice-ring counters, forged and replayed
//! notices, garbage descriptors and control records (`hostile.rs`), dead
//! partners (`death.rs`).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hostile::{desc, sealed_region, victim_cfg, Hostile};
use common::{Kid, SockPath, STEP};
use zcio::internals::wire;
use zcio::{Area, HoldExpiry, HoldLimit, PeerFault, SendErrorKind, TryRecvError};
use zcio::{Channel, ChannelConfig, ChannelPolicy, Listener, Msg};

/// Aborts the whole test process if the victim is still inside the test
/// after `LIMIT` (a victim wait that is not bounded would hang the test).
struct VictimWatchdog(Arc<AtomicBool>);

const LIMIT: Duration = Duration::from_secs(90);

impl VictimWatchdog {
    fn arm(name: &'static str) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        std::thread::spawn(move || {
            let deadline = Instant::now() + LIMIT;
            while !d.load(Ordering::SeqCst) {
                if Instant::now() >= deadline {
                    eprintln!("victim in {name} is blocked past {LIMIT:?}: aborting");
                    std::process::abort();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        VictimWatchdog(done)
    }
}

impl Drop for VictimWatchdog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Spawn the partner child; `raw` partners speak the wire protocol by hand
/// (`Hostile`), the others use a real `Channel` that misbehaves by omission.
fn partner(sock: &SockPath, listener: &Listener, raw: bool) -> (Kid, Channel) {
    let mut kid = Kid::spawn(
        "child_partner",
        "untrusted-partner",
        &[("SOCK", sock.arg())],
    );
    kid.send(if raw { "connect-raw" } else { "connect" });
    let ch = listener.accept_timeout(STEP).expect("accept the partner");
    assert_eq!(kid.next_report(), "connected");
    (kid, ch)
}

/// (i) The partner keeps every "wake me" flag it owns set and never sleeps:
/// on the ring the victim sends on, on the ring the victim receives on
/// (producer waiting for space) and on the victim's notice ring. The
/// victim's wakes find nobody; after `futile_wake_limit` of them in a row
/// it stops paying a system call per message (at most one wake per
/// `max_age` per ring) and reports `PeerFault::FutileWakes`.
#[test]
fn partner_that_sets_wake_me_and_never_sleeps() {
    let _w = VictimWatchdog::arm("partner_that_sets_wake_me_and_never_sleeps");
    const LIMIT_IN_A_ROW: u32 = 16;
    const N: u64 = 2000;
    let max_age = Duration::from_millis(50);
    let sock = SockPath::new("liar");
    let cfg = ChannelConfig {
        policy: ChannelPolicy {
            futile_wake_limit: LIMIT_IN_A_ROW,
            max_age,
            ..ChannelPolicy::default()
        },
        liveness_interval: Duration::from_millis(5),
        ..victim_cfg()
    };
    let listener = Listener::bind(sock.path(), cfg).expect("bind");
    let (mut kid, ch) = partner(&sock, &listener, true);
    assert_eq!(kid.ask("push 60"), "pushed 60");
    let pool = common::small_pool("liar", 256 << 10, 4);
    let t0 = Instant::now();
    kid.send(&format!("lie {N}"));
    let mut received = 0;
    for i in 0..N {
        ch.send(common::msg_of(&pool, &i.to_le_bytes()))
            .expect("sending to a liar still works");
        if received < 60 {
            let m = ch.recv_timeout(STEP).expect("the liar's messages arrive");
            assert_eq!(m.to_vec(), b"lie");
            received += 1;
        }
    }
    ch.flush();
    assert_eq!(kid.next_report(), format!("consumed {N}"));
    let elapsed = t0.elapsed();
    let st = ch.stats();
    eprintln!("victim of a liar, {N} messages in {elapsed:?}: {st:?}");
    // Per ring: LIMIT futile wakes, then one per max_age at most. Nobody
    // ever sleeps, so trust is never restored.
    let per_ring = u64::from(LIMIT_IN_A_ROW) + 2 + elapsed.as_millis() as u64 / 50;
    assert!(
        st.wakes <= 3 * per_ring,
        "{} wakes for {N} messages in {elapsed:?}: not rate-limited ({st:?})",
        st.wakes
    );
    assert!(st.wakes_suppressed > 0, "{st:?}");
    assert_eq!(st.futile_wakes, st.wakes, "nobody ever slept: {st:?}");
    assert!(
        ch.faults()
            .iter()
            .any(|f| matches!(f, PeerFault::FutileWakes(n) if *n >= LIMIT_IN_A_ROW)),
        "{:?}",
        ch.faults()
    );
    let shown = ch.health().unwrap_err().to_string();
    assert!(shown.contains("sleep flag"), "{shown}");
    // The victim is still usable.
    common::settle(&ch, "liar returned everything", || {
        ch.stats().held_by_peer == 0
    });
    assert_eq!(pool.stats().buffers_in_use, 0);
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}

/// (ii) The partner never consumes. The victim's blocking send waits its
/// bound, gets `TimedOut` with the message back, and reports
/// `PeerFault::NotConsuming`; once the partner consumes, sending works.
#[test]
fn partner_that_never_consumes() {
    let _w = VictimWatchdog::arm("partner_that_never_consumes");
    let sock = SockPath::new("lazy");
    let listener = Listener::bind(sock.path(), ChannelConfig::default()).expect("bind");
    let (mut kid, ch) = partner(&sock, &listener, false);
    let pool = common::small_pool("lazy", 256 << 10, 4);
    let mut sent = 0u64;
    let back = loop {
        match ch.send_timeout(common::msg_of(&pool, b"lazy"), Duration::from_millis(100)) {
            Ok(()) => sent += 1,
            Err(e) => {
                assert_eq!(e.kind(), SendErrorKind::TimedOut);
                break e.into_inner();
            }
        }
        assert!(sent <= 64, "the ring cap is not enforced");
    };
    assert_eq!(sent, 64);
    assert_eq!(back.to_vec(), b"lazy", "the message comes back");
    assert_eq!(ch.health(), Err(PeerFault::NotConsuming));
    assert_eq!(kid.ask("recv 64"), "received 64");
    ch.send_timeout(back, STEP)
        .expect("room again once the partner consumes");
    assert_eq!(kid.ask("recv 1"), "received 1");
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}

/// (ii, default waits) The partner neither sends nor consumes, and nobody
/// else connects: every default wait of the victim (`accept`, `recv`,
/// `accept_lane`, `send`) ends with `TimedOut` at the bound its
/// configuration sets (200 ms here), never later than the watchdog allows.
#[test]
fn silent_partner_bounds_the_default_waits() {
    let _w = VictimWatchdog::arm("silent_partner_bounds_the_default_waits");
    let short = Duration::from_millis(200);
    let sock = SockPath::new("silent");
    let cfg = ChannelConfig {
        send_timeout: short,
        recv_timeout: short,
        accept_timeout: short,
        ..ChannelConfig::default()
    };
    let listener = Listener::bind(sock.path(), cfg).expect("bind");
    assert!(
        matches!(listener.accept(), Err(zcio::ConnectError::TimedOut)),
        "nobody connects: accept ends at accept_timeout"
    );
    let (mut kid, ch) = partner(&sock, &listener, false);
    assert_eq!(ch.config().recv_timeout, short);
    assert_eq!(ch.recv().unwrap_err(), zcio::RecvError::TimedOut);
    assert!(matches!(ch.accept_lane(), Err(zcio::LaneError::TimedOut)));
    let pool = common::small_pool("silent", 256 << 10, 4);
    let mut sent = 0u64;
    let back = loop {
        match ch.send(common::msg_of(&pool, b"silent")) {
            Ok(()) => sent += 1,
            Err(e) => {
                assert_eq!(e.kind(), SendErrorKind::TimedOut);
                break e.into_inner();
            }
        }
        assert!(sent <= 64, "the ring cap is not enforced");
    };
    assert_eq!(back.to_vec(), b"silent", "the message comes back");
    assert_eq!(kid.ask("recv 64"), "received 64");
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}

fn hold_cfg(limit: Duration, on_expiry: HoldExpiry, max_in_flight: usize) -> ChannelConfig {
    ChannelConfig {
        max_in_flight,
        policy: ChannelPolicy {
            hold: Some(HoldLimit { limit, on_expiry }),
            ..ChannelPolicy::default()
        },
        ..ChannelConfig::default()
    }
}

const BUF: usize = 8192;

fn tagged(pool: &zcio::Pool, tag: u8) -> Msg {
    let mut b = pool.alloc_timeout(BUF, STEP).expect("alloc");
    b.as_mut_slice().fill(tag);
    Msg::from(b.freeze().expect("freeze"))
}

/// (iii) The partner receives and never returns buffers. Without a hold
/// limit the in-flight cap stops the victim (`TooManyInFlight`,
/// `PeerFault::NotReleasing`); with `HoldExpiry::Reclaim` the victim's
/// exhausted pool gets its buffers back after the limit (the partner's
/// late notices are rejected by the generation check); with
/// `HoldExpiry::Abort` the channel is aborted and the partner disconnected.
#[test]
fn partner_that_never_returns_buffers() {
    let _w = VictimWatchdog::arm("partner_that_never_returns_buffers");
    // No hold limit: the in-flight cap, reported as a fault.
    let sock = SockPath::new("hoard-cap");
    let cfg = ChannelConfig {
        max_in_flight: 4,
        ..ChannelConfig::default()
    };
    let listener = Listener::bind(sock.path(), cfg).expect("bind");
    let (mut kid, ch) = partner(&sock, &listener, false);
    let pool = common::small_pool("hoard-cap", 64 << 10, 1);
    for t in 0..4 {
        ch.send(tagged(&pool, t)).expect("send");
    }
    assert_eq!(kid.ask("recv 4"), "received 4");
    let (e, _) = ch
        .send_timeout(tagged(&pool, 9), Duration::from_millis(100))
        .unwrap_err()
        .into_parts();
    assert_eq!(e, SendErrorKind::TooManyInFlight(4));
    assert_eq!(ch.health(), Err(PeerFault::NotReleasing(4)));
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();

    // Reclaim: 8 buffers in the pool, all hoarded.
    let limit = Duration::from_millis(50);
    let sock = SockPath::new("hoard-reclaim");
    let listener =
        Listener::bind(sock.path(), hold_cfg(limit, HoldExpiry::Reclaim, 1 << 16)).expect("bind");
    let (mut kid, ch) = partner(&sock, &listener, false);
    let pool = common::small_pool("hoard-reclaim", 64 << 10, 1);
    for t in 0..8 {
        ch.send(tagged(&pool, t)).expect("send");
    }
    assert_eq!(kid.ask("recv 8"), "received 8");
    assert!(pool.try_alloc(BUF).is_err(), "the partner holds the pool");
    // A bounded allocation waits; the pool's reclaim path enforces the
    // hold limit and gets the buffers back.
    let b = pool
        .alloc_timeout(BUF, STEP)
        .expect("the hold limit frees the hoarded buffers");
    drop(b);
    common::settle(&ch, "all eight reclaimed", || ch.stats().reclaimed == 8);
    assert_eq!(ch.stats().held_by_peer, 0);
    assert!(ch.faults().contains(&PeerFault::HoldsReclaimed(8)));
    // The buffers are reused (same ledger slots, new generations); the
    // partner's late notices name the old tokens and are rejected. The new
    // message may itself outlive the limit while this runs, so the check
    // is that every reclaimed hold's notice was rejected, and nothing else.
    ch.send(tagged(&pool, 0xAA)).expect("send");
    assert_eq!(kid.ask("recv 1"), "received 1");
    assert_eq!(kid.ask("release 8"), "released 8");
    common::settle(&ch, "stale notices counted", || ch.stats().bad_notices >= 8);
    assert_eq!(kid.ask("release 1"), "released 1");
    common::settle(&ch, "everything accounted", || {
        let st = ch.stats();
        st.held_by_peer == 0 && st.bad_notices == st.reclaimed
    });
    let st = ch.stats();
    assert!(st.reclaimed == 8 || st.reclaimed == 9, "{st:?}");
    assert_eq!(pool.stats().buffers_in_use, 0);
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();

    // Abort: the next send reports HoldExpired, all is released, the
    // partner is disconnected.
    let sock = SockPath::new("hoard-abort");
    let listener =
        Listener::bind(sock.path(), hold_cfg(limit, HoldExpiry::Abort, 1 << 16)).expect("bind");
    let (mut kid, ch) = partner(&sock, &listener, false);
    let pool = common::small_pool("hoard-abort", 64 << 10, 1);
    for t in 0..3 {
        ch.send(tagged(&pool, t)).expect("send");
    }
    assert_eq!(kid.ask("recv 3"), "received 3");
    std::thread::sleep(limit * 2);
    let (e, back) = ch.send(tagged(&pool, 7)).unwrap_err().into_parts();
    assert_eq!(e, SendErrorKind::HoldExpired);
    drop(back);
    assert_eq!(ch.health(), Err(PeerFault::HoldExpired(limit)));
    assert_eq!(ch.stats().held_by_peer, 0);
    assert_eq!(pool.stats().buffers_in_use, 0, "everything released");
    assert_eq!(kid.ask("recv-end"), "recv-end Disconnected");
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}

/// (iv) The partner scribbles on the shared control segment: it clears the
/// victim's sleep flag (the victim's wait is still bounded and the message
/// arrives), puts an impossible head into the ring the victim sends on
/// (`SendErrorKind::Corrupt`, `PeerFault::Corrupt`, everything released), and
/// finally storms every ring header with random words while the victim
/// keeps operating (typed errors only; the listener then serves an honest
/// partner).
#[test]
fn partner_that_scribbles_on_the_control_segment() {
    let _w = VictimWatchdog::arm("partner_that_scribbles_on_the_control_segment");
    let sock = SockPath::new("scribble");
    let listener = Listener::bind(sock.path(), victim_cfg()).expect("bind");
    let pool = common::small_pool("scribble", 256 << 10, 4);

    // Cleared sleep flag: the publish wakes nobody; the bounded sleep does.
    let (mut kid, ch) = partner(&sock, &listener, true);
    kid.send("push-unflagged");
    let m = ch.recv_timeout(STEP).expect("the bounded sleep finds it");
    assert_eq!(m.to_vec(), b"lie");
    assert_eq!(kid.next_report(), "pushed-unflagged");
    drop(m);

    // An impossible head on the ring the victim produces on.
    for i in 0..64u64 {
        ch.send(common::msg_of(&pool, &i.to_le_bytes()))
            .expect("send");
    }
    assert_eq!(kid.ask("scribble-head"), "scribbled 64");
    let (e, _) = ch
        .send(common::msg_of(&pool, b"x"))
        .unwrap_err()
        .into_parts();
    assert_eq!(e, SendErrorKind::Corrupt);
    assert_eq!(ch.health(), Err(PeerFault::Corrupt(Area::MessageRing)));
    assert_eq!(pool.stats().buffers_in_use, 0, "everything released");
    let e = ch.send(common::msg_of(&pool, b"y")).unwrap_err();
    assert_eq!(e.kind(), SendErrorKind::Disconnected);
    assert_eq!(e.into_inner().to_vec(), b"y", "the message comes back");
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
    drop(ch);

    // Random words over every ring header while the victim works.
    let (mut kid, ch) = partner(&sock, &listener, true);
    kid.send("storm");
    let mut outcomes = std::collections::BTreeMap::<String, u32>::new();
    for i in 0..5000u32 {
        let r = ch.send_timeout(
            common::msg_of(&pool, &i.to_le_bytes()),
            Duration::from_millis(5),
        );
        let s = match r {
            Ok(()) => "send ok".to_string(),
            Err(e) => format!("send {:?}", e.kind()),
        };
        *outcomes.entry(s).or_default() += 1;
        let r = match ch.try_recv() {
            Ok(_) => "recv ok".to_string(),
            Err(TryRecvError::Malformed(_)) => "recv malformed".to_string(),
            Err(e) => format!("recv {e:?}"),
        };
        *outcomes.entry(r).or_default() += 1;
        ch.reclaim();
        ch.flush();
        let _ = ch.expire_holds();
        if ch.is_disconnected() {
            break;
        }
    }
    assert_eq!(kid.ask("calm"), "calmed");
    assert!(
        ch.is_disconnected(),
        "random ring words went unnoticed: {outcomes:?}"
    );
    assert!(
        ch.faults()
            .iter()
            .any(|f| matches!(f, PeerFault::Corrupt(_))),
        "{:?} / {outcomes:?}",
        ch.faults()
    );
    assert_eq!(pool.stats().buffers_in_use, 0, "everything released");
    drop(ch);
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();

    // The victim's listener still serves an honest partner.
    let (mut kid, ch) = partner(&sock, &listener, false);
    ch.send(common::msg_of(&pool, b"honest")).expect("send");
    assert_eq!(kid.ask("recv 1"), "received 1");
    assert_eq!(ch.health(), Ok(()));
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}

// ------------------------------------------------------------------ child

/// The well-formed partners' rings: 64 message entries, 256 notice entries
/// (so the victim's in-flight cap, at most the notice ring, is above the
/// ring size and a non-consuming partner hits the ring limit first).
fn partner_cfg() -> ChannelConfig {
    ChannelConfig {
        ring_entries: 64,
        notice_entries: 256,
        ..ChannelConfig::default()
    }
}

fn partner_main() {
    let sock = common::arg("SOCK");
    let mut raw: Option<Hostile> = None;
    let mut ch: Option<Channel> = None;
    let mut held: Vec<Msg> = Vec::new();
    let region = sealed_region("untrusted-r0", 4096, b"lie");
    let mut announced = false;
    let mut token = 0u64;
    while let Some(cmd) = common::command() {
        let (verb, rest) = cmd.split_once(' ').unwrap_or((cmd.as_str(), ""));
        let n = || rest.parse::<u64>().expect("count");
        match verb {
            "connect-raw" => {
                raw = Some(Hostile::connect(std::path::Path::new(&sock)));
                common::report("connected");
            }
            "connect" => {
                ch = Some(Channel::connect(&sock, partner_cfg()).expect("connect"));
                common::report("connected");
            }
            "push" | "push-unflagged" => {
                let h = raw.as_mut().expect("raw");
                if !announced {
                    h.region(0, 4096, &region);
                    announced = true;
                }
                let k = if verb == "push" { n() } else { 1 };
                if verb == "push-unflagged" {
                    // Wait until the victim sleeps on our ring, clear its
                    // flag, then publish: push's wake finds no flag.
                    let tail = &h.hdr(wire::C2L_MSGS).prod.tail;
                    let t0 = std::time::Instant::now();
                    while tail.load(Ordering::SeqCst) & 1 == 0 && t0.elapsed() < STEP {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    tail.fetch_and(!1, Ordering::SeqCst);
                }
                for _ in 0..k {
                    token += 1;
                    h.push(&[desc(0, 1, 0, 3, token)]);
                }
                common::report(if verb == "push" {
                    format!("pushed {k}")
                } else {
                    "pushed-unflagged".into()
                });
            }
            "lie" => {
                let h = raw.as_mut().expect("raw");
                let want = n();
                let mut got = 0;
                let t0 = std::time::Instant::now();
                while got < want && t0.elapsed() < STEP {
                    // Every flag we own says "asleep, wake me"; we never sleep.
                    h.hdr(wire::L2C_MSGS)
                        .prod
                        .tail
                        .fetch_or(1, Ordering::SeqCst);
                    h.hdr(wire::L2C_NOTICES)
                        .prod
                        .tail
                        .fetch_or(1, Ordering::SeqCst);
                    h.hdr(wire::C2L_MSGS)
                        .cons
                        .head
                        .fetch_or(1, Ordering::SeqCst);
                    let descs = h.peek_all();
                    if !descs.is_empty() {
                        h.msgs_in.release(descs.len());
                        let tokens: Vec<u64> = descs.iter().map(|d| d.token).collect();
                        h.give_back(&tokens);
                        got += descs.len() as u64;
                    }
                    let _ = h.notices();
                    std::hint::spin_loop();
                }
                common::report(format_args!("consumed {got}"));
            }
            "scribble-head" => {
                let h = raw.as_mut().expect("raw");
                // Return every buffer but leave the ring full, then claim
                // an impossible head.
                let descs = h.peek_all();
                let tokens: Vec<u64> = descs.iter().map(|d| d.token).collect();
                h.give_back(&tokens);
                let head = &h.hdr(wire::L2C_MSGS).cons.head;
                let bogus = (head.load(Ordering::SeqCst) >> 1) + 1_000_000;
                head.store(bogus << 1, Ordering::SeqCst);
                common::report(format_args!("scribbled {}", descs.len()));
            }
            "storm" => {
                let h = raw.as_mut().expect("raw");
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(std::process::id());
                let t0 = std::time::Instant::now();
                // Until the parent says "calm" (checked between bursts).
                let stop = Arc::new(AtomicBool::new(false));
                let s2 = stop.clone();
                std::thread::spawn(move || {
                    if common::command().as_deref() == Some("calm") {
                        s2.store(true, Ordering::SeqCst);
                    }
                });
                while !stop.load(Ordering::SeqCst) && t0.elapsed() < STEP {
                    for ring in 0..4 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let hdr = h.hdr(ring);
                        if x & 1 == 0 {
                            hdr.prod.tail.store(x >> 8, Ordering::SeqCst);
                        } else {
                            hdr.cons.head.store(x >> 8, Ordering::SeqCst);
                        }
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                common::report("calmed");
            }
            "recv" => {
                let c = ch.as_ref().expect("channel");
                for _ in 0..n() {
                    held.push(c.recv_timeout(STEP).expect("recv"));
                }
                common::report(format_args!("received {rest}"));
            }
            "release" => {
                let k = (n() as usize).min(held.len());
                held.drain(..k);
                ch.as_ref().expect("channel").flush();
                common::report(format_args!("released {k}"));
            }
            "recv-end" => {
                let r = ch.as_ref().expect("channel").recv_timeout(STEP);
                let s = match r {
                    Ok(_) => "Ok".to_string(),
                    Err(e) => format!("{e:?}"),
                };
                common::report(format_args!("recv-end {s}"));
            }
            "exit" => {
                common::report("bye");
                return;
            }
            other => panic!("unknown command {other:?}"),
        }
    }
}

#[test]
#[ignore = "child process entry point"]
fn child_partner() {
    if common::child_role("untrusted-partner").is_some() {
        partner_main();
    }
}
