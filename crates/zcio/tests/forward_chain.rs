//! Forwarding chains of real processes: source (this test) → three relay
//! processes running `zcio::forward` → sink, by reference and copying per
//! hop. The sink checks every byte; at the end every buffer is back in the
//! source's pool through deallocation notices that travelled back hop by
//! hop (the source's ledger empty while its peer is still alive). A relay
//! killed with SIGKILL mid-stream gives its neighbours — and through them
//! the source and the sink — a typed `Disconnected`, and nothing hangs; the
//! messages the sink still holds keep their content while the source goes
//! on allocating and writing (buffers the dead relay passed on are retired,
//! never reused).

mod common;

use std::time::{Duration, Instant};

use common::{Kid, SockPath, STEP};
use zcio::forward::{self, ForwardConfig, ForwardMode};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, SendErrorKind};

const RELAYS: usize = 3;

/// Message `i`: (payload length, number of parts).
fn shape(i: usize) -> (usize, usize) {
    let len = match i % 4 {
        0 => 1 + 3 * i,
        1 => 4096 * (1 + i % 3),
        2 => 20_000 + 37 * i,
        _ => 777,
    };
    let parts = 1 + i % 3;
    (len.max(parts), parts)
}

fn build(pool: &Pool, i: usize) -> Msg {
    let (len, parts) = shape(i);
    let mut m = Msg::new();
    let step = len / parts;
    for p in 0..parts {
        let from = p * step;
        let n = if p + 1 == parts { len - from } else { step };
        let mut b = pool.alloc_timeout(n, STEP).expect("alloc");
        b.truncate(n);
        common::fill(b.as_mut_slice(), i as u64, from as u64);
        m.join(Msg::from(b.freeze().expect("freeze")))
            .expect("join");
    }
    m
}

/// The source's channel, the relays and the sink of one chain.
struct Chain {
    first: Channel,
    relays: Vec<Kid>,
    sink: Kid,
    _socks: Vec<SockPath>,
}

fn chain(mode: &str, tag: &str) -> Chain {
    let socks: Vec<SockPath> = (0..=RELAYS)
        .map(|k| SockPath::new(&format!("{tag}-{k}")))
        .collect();
    // The source lends every buffer by reference (a small one would
    // otherwise be copied into a slot at the first hop).
    let source_cfg = ChannelConfig {
        lane: zcio::LaneConfig::OFF,
        ..ChannelConfig::default()
    };
    let listener = Listener::bind(socks[0].path(), source_cfg).expect("bind");
    let mut relays: Vec<Kid> = Vec::new();
    let mut first = None;
    for k in 0..RELAYS {
        let kid = Kid::spawn(
            "child_relay",
            "relay",
            &[
                ("UP", socks[k].arg()),
                ("DOWN", socks[k + 1].arg()),
                ("MODE", mode.to_string()),
                ("NAME", format!("relay{k}")),
            ],
        );
        if k == 0 {
            first = Some(listener.accept_timeout(STEP).expect("accept relay 0"));
        } else {
            // The previous relay accepted this one: its listener is bound.
            relays[k - 1].expect("linked");
        }
        relays.push(kid);
    }
    let sink = Kid::spawn(
        "child_chain_sink",
        "chain-sink",
        &[("UP", socks[RELAYS].arg())],
    );
    relays[RELAYS - 1].expect("linked");
    Chain {
        first: first.expect("first hop"),
        relays,
        sink,
        _socks: socks,
    }
}

fn through_the_chain(mode: &str) {
    const N: usize = 60;
    let Chain {
        first,
        mut relays,
        mut sink,
        _socks,
    } = chain(mode, &format!("chain-{mode}"));
    let pool = common::small_pool(&format!("chain-{mode}"), 512 << 10, 16);
    let mut bytes = 0;
    let mut slices = 0;
    for i in 0..N {
        let m = build(&pool, i);
        bytes += m.len();
        slices += m.slice_count();
        first.send(m).expect("send");
    }
    let held = sink.ask(&format!("verify {N}"));
    assert_eq!(held, format!("held {N} bytes={bytes}"), "sink's view");
    first.reclaim();
    if mode == "ref" {
        // The sink holds every message, so every relay's ledger holds the
        // source's buffers, so the source's does too.
        assert_eq!(first.stats().held_by_peer, slices);
        assert_eq!(pool.stats().buffers_in_use, slices);
    } else {
        // The first relay copied each message and dropped ours.
        common::settle(&first, "source pool after the first copy", || {
            pool.stats().buffers_in_use == 0
        });
    }
    assert_eq!(sink.ask("release"), "released");
    common::settle(&first, "source pool after the sink released", || {
        pool.stats().buffers_in_use == 0 && first.stats().held_by_peer == 0
    });
    assert!(first.check_peer(), "released by notices, not by a close");
    let st = first.stats();
    assert_eq!(st.bad_notices, 0);
    assert_eq!(st.notices_received, slices as u64);
    assert_eq!(pool.stats().buffers_in_use, 0);

    // Closing the source propagates down the chain.
    first.close();
    for r in &mut relays {
        assert_eq!(
            r.expect("ended"),
            format!("upstream-disconnected msgs={N} bytes={bytes} errors=0")
        );
    }
    assert_eq!(sink.ask("drain 0"), "drained Disconnected after 0");
    for mut r in relays {
        r.send("exit");
        r.finish();
    }
    sink.send("exit");
    sink.finish();
}

#[test]
fn by_reference_one_buffer_travels_and_comes_back() {
    through_the_chain("ref");
}

#[test]
fn copy_per_hop_delivers_the_same_bytes() {
    through_the_chain("copy");
}

#[test]
fn relay_killed_mid_stream_disconnects_both_ends() {
    let Chain {
        first,
        mut relays,
        mut sink,
        _socks,
    } = chain("ref", "chain-kill");
    let pool = common::small_pool("chain-kill", 512 << 10, 8);
    sink.send("drain 64");
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut sent = 0u64;
    let outcome = loop {
        assert!(Instant::now() < deadline, "source never saw the break");
        if sent == 300 {
            // Kill relay 1 only once data has flowed end to end (the sink
            // released something, so its notice came back), however the
            // scheduler ran the chain so far.
            common::settle(&first, "first notice back from the sink", || {
                first.stats().notices_received > 0
            });
            relays[1].kill();
        }
        let Ok(mut b) = pool.alloc_timeout(512, Duration::from_millis(100)) else {
            if first.is_disconnected() {
                break SendErrorKind::Disconnected;
            }
            continue;
        };
        b.truncate(512);
        common::fill(b.as_mut_slice(), sent, 0);
        let m = Msg::from(b.freeze().expect("freeze"));
        match first.send_timeout(m, Duration::from_millis(100)) {
            Ok(()) => sent += 1,
            Err(e) => match e.kind() {
                SendErrorKind::TimedOut
                | SendErrorKind::WouldBlock
                | SendErrorKind::TooManyInFlight(_) => {}
                kind => break kind,
            },
        }
    };
    assert_eq!(outcome, SendErrorKind::Disconnected, "source's typed error");
    assert!(sent >= 300);
    let up = relays[0].expect("ended");
    assert!(up.starts_with("downstream-disconnected"), "relay 0: {up}");
    let down = relays[2].expect("ended");
    assert!(down.starts_with("upstream-disconnected"), "relay 2: {down}");
    let got = sink.expect("drained");
    let n: u64 = got
        .strip_prefix("Disconnected after ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("sink: {got}"));
    assert!(n > 0 && n <= sent, "sink got {n} of {sent}");
    common::settle(&first, "source pool after the break", || {
        pool.stats().buffers_in_use == 0
    });
    // Write over every buffer the pool will still hand out: none of them
    // may be one the sink holds.
    let mut scribbled = Vec::new();
    while let Ok(mut b) = pool.try_alloc(512) {
        b.as_mut_slice().fill(0xEE);
        scribbled.push(b);
    }
    assert!(!scribbled.is_empty(), "the pool still has free buffers");
    let held = sink.ask("recheck");
    assert!(held.starts_with("intact "), "sink after the break: {held}");
    let st = pool.stats();
    assert_eq!(
        st.bytes_free + st.bytes_in_use + st.bytes_retired,
        st.bytes_total,
        "{st:?}"
    );
    drop(scribbled);
    for (k, mut r) in relays.into_iter().enumerate() {
        if k != 1 {
            r.send("exit");
            r.finish();
        }
    }
    sink.send("exit");
    sink.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_relay() {
    if common::child_role("relay").is_none() {
        return;
    }
    let name = common::arg("NAME");
    let down_l = Listener::bind(common::arg("DOWN"), ChannelConfig::default()).expect("bind");
    let up = Channel::connect(common::arg("UP"), ChannelConfig::default()).expect("connect");
    let down = down_l.accept_timeout(STEP).expect("accept downstream");
    common::report("linked");
    let pool = common::small_pool(&name, 512 << 10, 16);
    let mode = if common::arg("MODE") == "copy" {
        ForwardMode::Copy(&pool)
    } else {
        ForwardMode::ByRef
    };
    let r = forward::run(&up, &down, mode, &ForwardConfig::default());
    // Hang up at once: a neighbour that only sends learns of the close
    // from the socket.
    drop((up, down));
    common::report(format_args!(
        "ended {} msgs={} bytes={} errors={}",
        r.end, r.stats.msgs, r.stats.bytes, r.stats.errors
    ));
    // Stay (and keep the report readable) until told to go.
    if let Some(cmd) = common::command() {
        assert_eq!(cmd, "exit", "unknown command");
    }
}

#[test]
#[ignore = "child process entry point"]
fn child_chain_sink() {
    if common::child_role("chain-sink").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("UP"), ChannelConfig::default()).expect("connect");
    let mut held: Vec<Msg> = Vec::new();
    let mut held_stream: Vec<(u64, Msg)> = Vec::new();
    while let Some(cmd) = common::command() {
        match cmd.as_str() {
            c if c.starts_with("verify ") => {
                let n = common::count_arg(c, "verify ");
                let mut bytes = 0;
                for i in 0..n {
                    let m = ch.recv_timeout(STEP).expect("recv");
                    assert_eq!(m.len(), shape(i).0, "message {i} length");
                    let mut at = 0u64;
                    for s in m.slices() {
                        assert!(s.fbuf().is_foreign());
                        assert!(
                            common::first_mismatch(&s.view().to_vec(), i as u64, at).is_none(),
                            "message {i} bytes"
                        );
                        at += s.len() as u64;
                    }
                    bytes += m.len();
                    held.push(m);
                }
                common::report(format_args!("held {n} bytes={bytes}"));
            }
            "release" => {
                held.clear();
                ch.flush();
                common::report("released");
            }
            c if c.starts_with("drain ") => {
                // Stream of 512-byte messages, numbered from 0; the last
                // `keep` stay held for a later "recheck".
                let keep = common::count_arg(c, "drain ");
                let mut k = 0u64;
                let mut window = std::collections::VecDeque::new();
                let err = loop {
                    match ch.recv_timeout(STEP) {
                        Ok(m) => {
                            let ok = m.len() == 512
                                && common::first_mismatch(&m.to_vec(), k, 0).is_none();
                            assert!(ok, "stream message {k} bytes");
                            window.push_back((k, m));
                            if window.len() > keep {
                                window.pop_front();
                            }
                            k += 1;
                        }
                        Err(e) => break e,
                    }
                };
                common::report(format_args!("drained {err:?} after {k}"));
                held_stream = window.into_iter().collect();
            }
            "recheck" => {
                let bad = held_stream
                    .iter()
                    .find(|(k, m)| common::first_mismatch(&m.to_vec(), *k, 0).is_some());
                match bad {
                    None => common::report(format_args!("intact {}", held_stream.len())),
                    Some((k, m)) => common::report(format_args!(
                        "message {k} changed after arrival: {:02x?}",
                        &m.to_vec()[..8]
                    )),
                }
            }
            "exit" => return,
            other => panic!("unknown command {other:?}"),
        }
    }
}
