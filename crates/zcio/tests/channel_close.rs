//! Closing a channel frees it: a sender that opens a channel, sends from
//! its own pool and drops both — with the messages read by the receiver
//! before the close, after it, or after it by a receiver that keeps its end
//! open — gets back every descriptor and every shared mapping once the
//! receiver returned what it held (1000 channels: no growth).
//!
//! This binary holds one test on purpose: it counts the whole process's
//! descriptors and mappings, which another test running beside it in the
//! same process would change.

mod common;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use common::{Kid, SockPath, STEP};
use zcio::{Channel, ChannelConfig, Listener, Pool};

const MSGS: usize = 8;
const LEN: usize = 1024;
/// Channels the receiver keeps open after returning their buffers.
const KEEP: usize = 64;

/// Descriptors, shared mappings and their bytes of this process.
fn resources() -> (usize, usize, u64) {
    let fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let (mut n, mut bytes) = (0, 0);
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        if !perms.ends_with('s') {
            continue;
        }
        let (a, b) = range.split_once('-').unwrap();
        let (a, b) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        n += 1;
        bytes += b - a;
    }
    (fds, n, bytes)
}

fn pool() -> Pool {
    common::small_pool("close", 64 << 10, 1)
}

/// One channel's life: connect, send 8 messages of 1 KiB, close at the
/// point `mode` says, drop the pool too.
fn one(kid: &mut Kid, sock: &SockPath, mode: &str) {
    kid.send(&format!("accept {mode}"));
    let ch = Channel::connect(sock.path(), ChannelConfig::default()).expect("connect");
    let p = pool();
    for i in 0..MSGS {
        ch.send(common::msg_of(&p, &[i as u8; LEN])).expect("send");
    }
    if mode == "before" {
        kid.expect("read");
    }
    drop(ch);
    drop(p);
    if mode != "before" {
        kid.send("go");
    }
    kid.expect("done");
}

#[test]
fn closing_1000_channels_with_messages_in_flight_leaks_nothing() {
    let sock = SockPath::new("close");
    let mut kid = Kid::spawn("child_receiver", "close-receiver", &[("SOCK", sock.arg())]);
    kid.expect("ready");
    let modes = ["before", "after", "keep"];
    // Warm up (thread-local caches, the process's reaper thread), then
    // wait until every end of the warm-up is gone.
    for m in modes.iter().cycle().take(6) {
        one(&mut kid, &sock, m);
    }
    let settle = |what: &str, want: Option<(usize, usize, u64)>| -> (usize, usize, u64) {
        // Settled: the same figures twice in a row 100 ms apart (the
        // reaper runs on its own thread), and no more than `want`.
        let deadline = Instant::now() + STEP;
        let mut last = resources();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let now = resources();
            let within = want.is_none_or(|w| now.0 <= w.0 && now.1 <= w.1 && now.2 <= w.2);
            if now == last && within {
                return now;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: now {now:?}, wanted at most {want:?}"
            );
            last = now;
        }
    };
    let base = settle("baseline", None);
    for i in 0..1000 {
        one(&mut kid, &sock, modes[i % 3]);
    }
    let after = settle("after 1000 channels", Some(base));
    eprintln!("fds, shared mappings, mapped bytes: before {base:?}, after {after:?}");
    assert_eq!(kid.ask("kept"), format!("kept {KEEP}"));
    kid.finish();
}

/// The receiver: accepts one channel per command; `before` reads the
/// messages before the sender closes, `after` once it has, `keep` too but
/// keeps its end open (the last 64 of them), so only its notices can free
/// the sender's end.
#[test]
#[ignore = "child process entry point"]
fn child_receiver() {
    if common::child_role("close-receiver").is_none() {
        return;
    }
    let listener = Listener::bind(common::arg("SOCK"), ChannelConfig::default()).expect("bind");
    common::report("ready");
    let mut kept = VecDeque::new();
    while let Some(cmd) = common::command() {
        if cmd == "kept" {
            common::report(format!("kept {}", kept.len()));
            continue;
        }
        let mode = cmd.strip_prefix("accept ").expect("accept MODE");
        let ch = listener.accept_timeout(STEP).expect("accept");
        if mode != "before" {
            common::expect_command("go");
        }
        for i in 0..MSGS {
            let m = ch.recv_timeout(STEP).expect("recv");
            assert_eq!(m.to_vec(), [i as u8; LEN]);
        }
        if mode == "before" {
            common::report("read");
        }
        if mode == "keep" {
            kept.push_back(ch);
            if kept.len() > KEEP {
                kept.pop_front();
            }
        } else {
            // The sender's close reaches us as the end of the stream.
            let e = ch.recv_timeout(STEP).expect_err("the sender closed");
            assert!(e.is_disconnected(), "{e}");
        }
        common::report("done");
    }
}
