//! Rings between network namespaces (containers sharing only the ring
//! directory): a child re-executed in a new network namespace
//! (`unshare(CLONE_NEWNET)` before exec, as root).
//!
//! - A named bell bound by a waiter there is rung from here: it lives as a
//!   file in the shared ring directory, not as an abstract-namespace name
//!   (which exists only in the namespace that bound it, so the async
//!   waiter woke only on its 50 ms look).
//! - A tokio consumer there reads every block of a producer here, one
//!   block at a time (it sleeps on its bell before each), then the end.
//!
//! - A channel, a lane and a rendezvous between this process and a child in new
//!   PID, mount, network and IPC namespaces (`unshare --pid --fork
//!   --mount-proc --net --ipc --kill-child`), sharing only the socket path's
//!   directory: every byte arrives, and kill -9 of the child ends the
//!   waiting side with `Disconnected`, not a hang; the container sees the
//!   host side's death the same way.
//!
//! Skipped with a printed reason where the namespaces cannot be made.
//! Requires the `tokio` feature (the async suites run with it).

#![cfg(feature = "tokio")]

mod common;

use std::os::unix::process::CommandExt;

use common::ring::{block_of, check_block, child_ring_dir, RingDir};
use common::STEP;
use common::{Kid, SockPath};
use zcio::internals::bell::{NamedBell, Ringer};
use zcio::rendezvous::{Envelope, Rendezvous, RendezvousListener, RendezvousRecvError};
use zcio::ring::{Consumer, Layout, Options, Overflow, Producer, RingMap, Start};
use zcio::{Channel, ChannelConfig, Listener};

/// Run the child in a network namespace of its own.
fn new_netns(c: &mut std::process::Command) {
    // SAFETY: `unshare` is async-signal-safe and touches only the child
    // about to exec.
    unsafe {
        c.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

macro_rules! skip_without_netns {
    () => {
        if let Some(why) = common::cannot_unshare(&["--net"]) {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

#[test]
fn a_named_bell_in_another_network_namespace_is_rung_through_the_ring_directory() {
    skip_without_netns!();
    let dir = RingDir::new("netns-bell");
    let mut kid = dir
        .try_spawn_with("child_bell", "netns-bell", &[], new_netns)
        .expect("spawn in a new network namespace");
    let id: u64 = kid.expect("bound").parse().expect("bell id");
    Ringer::new_in(dir.path().to_path_buf())
        .expect("ringer")
        .ring(id);
    assert_eq!(kid.expect("bell"), "rang");
    kid.finish();
    assert!(
        !dir.entries().iter().any(|e| e.starts_with(".zcio-bell.")),
        "a dropped bell removes its file: {:?}",
        dir.entries()
    );
}

#[test]
fn a_tokio_consumer_in_another_network_namespace_reads_every_block() {
    skip_without_netns!();
    let dir = RingDir::new("netns-read");
    let name = dir.name("r");
    drop(
        Options::new()
            .layout(Layout::Variable)
            .overflow(Overflow::Block)
            .size(64 << 10)
            .create(&name)
            .expect("create"),
    );
    let mut kid = dir
        .try_spawn_with(
            "child_reader",
            "netns-reader",
            &[("RING", name.clone())],
            new_netns,
        )
        .expect("spawn in a new network namespace");
    kid.expect("attached");
    let mut p = Producer::attach(RingMap::open(&name, true).expect("open")).expect("producer");
    for i in 0..100u64 {
        let b = block_of(i, 100 + (i as usize * 37) % 3000);
        p.write(&b).expect("write");
        // One block at a time: the reader is asleep on its bell when the
        // next one comes.
        assert_eq!(kid.expect("got"), i.to_string());
    }
    drop(p);
    assert_eq!(kid.expect("end"), "100");
    kid.finish();
}

/// Every namespace a container has of its own but the file system.
const CONTAINER: [&str; 7] = [
    "unshare",
    "--pid",
    "--fork",
    "--mount-proc",
    "--net",
    "--ipc",
    "--kill-child",
];

macro_rules! skip_without_container {
    () => {
        if let Some(why) = common::cannot_unshare(&CONTAINER[1..]) {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

fn in_container(entry: &str, role: &str, sock: &SockPath) -> Kid {
    in_container_under(&CONTAINER, entry, role, sock)
}

fn in_container_under(prefix: &[&str], entry: &str, role: &str, sock: &SockPath) -> Kid {
    Kid::try_spawn_under(prefix, entry, role, &[("SOCK", sock.arg())], |_| {})
        .expect("spawn in a container")
}

/// A rootless container: [`CONTAINER`] in a user namespace of its own,
/// our uid mapped to its root.
const ROOTLESS: [&str; 9] = [
    "unshare",
    "--user",
    "--map-root-user",
    "--pid",
    "--fork",
    "--mount-proc",
    "--net",
    "--ipc",
    "--kill-child",
];

#[test]
fn a_channel_to_a_container_carries_every_byte_and_sees_its_death() {
    skip_without_container!();
    channel_to(&CONTAINER, "ct-chan");
}

#[test]
fn a_channel_to_a_rootless_container_is_accepted_as_our_uid() {
    if let Some(why) = common::cannot_unshare(&ROOTLESS[1..]) {
        eprintln!("skipped: {why}");
        return;
    }
    // The peer's uid comes through the user namespace's mapping as ours:
    // the listener's default policy (same uid) lets it in.
    channel_to(&ROOTLESS, "ct-chan-user");
}

fn channel_to(prefix: &[&str], tag: &str) {
    let sock = SockPath::new(tag);
    let l = Listener::bind(sock.path(), ChannelConfig::default()).expect("bind");
    let mut kid = in_container_under(prefix, "child_channel", "ct-channel", &sock);
    let ch = l.accept_timeout(STEP).expect("accept");
    kid.send("send 64");
    for i in 0..64u64 {
        let m = ch.recv_timeout(STEP).expect("recv");
        let v = m.to_vec();
        assert_eq!(v.len(), 64 << 10);
        assert_eq!(common::first_mismatch(&v, i, 0), None, "message {i}");
    }
    assert_eq!(kid.expect("sent"), "64");
    // Now the container dies while we wait for more.
    kid.kill();
    let e = ch.recv_timeout(STEP).unwrap_err();
    assert!(e.is_disconnected(), "{e}");
}

#[test]
fn a_lane_from_a_container_carries_every_message_and_sees_its_death() {
    skip_without_container!();
    let sock = SockPath::new("ct-lane");
    let l = Listener::bind(sock.path(), ChannelConfig::default()).expect("bind");
    let mut kid = in_container("child_lane", "ct-lane", &sock);
    let ch = l.accept_timeout(STEP).expect("accept");
    let mut rx = ch.accept_lane_timeout(STEP).expect("the container's lane");
    for i in 0..200u64 {
        let m = rx.recv_timeout(STEP).expect("recv");
        let v = m.to_vec();
        assert_eq!(v.len(), 1000);
        assert_eq!(common::first_mismatch(&v, i, 0), None, "message {i}");
    }
    assert_eq!(kid.expect("sent"), "200");
    kid.kill();
    assert_eq!(
        rx.recv_timeout(STEP).unwrap_err(),
        zcio::LaneError::Disconnected
    );
}

#[test]
fn a_container_sees_the_death_of_the_host_side() {
    skip_without_container!();
    // Both sides are children: the host side (no namespaces of its own)
    // listens and sends, the container receives; then the host side dies.
    // Over a channel, a lane and a rendezvous.
    for via in ["channel", "lane", "rendezvous"] {
        let sock = SockPath::new(&format!("ct-host-{via}"));
        let args = [("SOCK", sock.arg()), ("VIA", via.to_string())];
        let mut host = Kid::spawn("child_host_sender", "ct-host", &args);
        host.expect("listening");
        let mut ct = Kid::try_spawn_under(
            &CONTAINER,
            "child_container_receiver",
            "ct-receiver",
            &args,
            |_| {},
        )
        .expect("spawn in a container");
        assert_eq!(host.expect("sent"), "8", "{via}");
        assert_eq!(ct.expect("got"), "8", "{via}");
        host.kill();
        assert_eq!(ct.expect("end"), "disconnected", "{via}");
        ct.finish();
    }
}

#[test]
#[ignore = "child process entry point"]
fn child_host_sender() {
    if common::child_role("ct-host").is_none() {
        return;
    }
    let mut buf = vec![0u8; 4096];
    if common::arg("VIA") == "rendezvous" {
        let l = RendezvousListener::bind(common::arg("SOCK")).expect("bind");
        common::report("listening");
        let ep = l.accept_timeout(STEP).expect("accept");
        for i in 0..8u64 {
            ep.send(&Envelope::new(7, &[i])).expect("send");
        }
        common::report("sent 8");
        while common::command().is_some() {}
        return;
    }
    let l = Listener::bind(common::arg("SOCK"), ChannelConfig::default()).expect("bind");
    common::report("listening");
    let ch = l.accept_timeout(STEP).expect("accept");
    if common::arg("VIA") == "lane" {
        let mut tx = ch
            .open_lane(&zcio::LaneConfig {
                slots: 8,
                slot_size: 4096,
            })
            .expect("open lane");
        for i in 0..8u64 {
            common::fill(&mut buf, i, 0);
            tx.send_copy(&buf).expect("send");
        }
        common::report("sent 8");
        while common::command().is_some() {}
        return;
    }
    let pool = common::small_pool("ct-host", 1 << 20, 2);
    for i in 0..8u64 {
        let mut b = pool.alloc_timeout(4096, STEP).expect("alloc");
        common::fill(b.as_mut_slice(), i, 0);
        ch.send(zcio::Msg::from(b.freeze().expect("freeze")))
            .expect("send");
    }
    common::report("sent 8");
    while common::command().is_some() {}
}

#[test]
#[ignore = "child process entry point"]
fn child_container_receiver() {
    if common::child_role("ct-receiver").is_none() {
        return;
    }
    let ok = |bytes: &[u8], i: u64| common::first_mismatch(bytes, i, 0).is_none();
    let end = |disconnected: bool| {
        common::report(if disconnected {
            "end disconnected"
        } else {
            "end other"
        })
    };
    if common::arg("VIA") == "rendezvous" {
        let ep = Rendezvous::connect(common::arg("SOCK")).expect("connect");
        for i in 0..8u64 {
            assert_eq!(ep.recv().expect("recv").words, [i]);
        }
        common::report("got 8");
        return end(matches!(ep.recv(), Err(RendezvousRecvError::Disconnected)));
    }
    let ch = Channel::connect(common::arg("SOCK"), ChannelConfig::default()).expect("connect");
    if common::arg("VIA") == "lane" {
        let mut rx = ch.accept_lane_timeout(STEP).expect("the host's lane");
        for i in 0..8u64 {
            let m = rx.recv_timeout(STEP).expect("recv");
            assert!(ok(&m.to_vec(), i), "message {i}");
        }
        common::report("got 8");
        return end(rx.recv_timeout(STEP).unwrap_err() == zcio::LaneError::Disconnected);
    }
    for i in 0..8u64 {
        let m = ch.recv_timeout(STEP).expect("recv");
        assert!(ok(&m.to_vec(), i), "message {i}");
    }
    common::report("got 8");
    end(ch
        .recv_timeout(STEP)
        .expect_err("the host side dies")
        .is_disconnected());
}

#[test]
fn a_rendezvous_with_a_container_answers_calls_and_sees_its_death() {
    skip_without_container!();
    let sock = SockPath::new("ct-rdv");
    let l = RendezvousListener::bind(sock.path()).expect("bind");
    let mut kid = in_container("child_rendezvous", "ct-rendezvous", &sock);
    let ep = l.accept_timeout(STEP).expect("accept");
    for i in 0..100u64 {
        let m = ep.recv().expect("call");
        assert_eq!(m.words, [i]);
        ep.send(&Envelope::new(2, &[i * 2])).expect("answer");
    }
    assert_eq!(kid.expect("called"), "100");
    kid.kill();
    assert!(matches!(ep.recv(), Err(RendezvousRecvError::Disconnected)));
}

#[test]
#[ignore = "child process entry point"]
fn child_channel() {
    if common::child_role("ct-channel").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), ChannelConfig::default()).expect("connect");
    let pool = common::small_pool("ct-channel", 1 << 20, 4);
    let n = common::count_arg(&common::command().expect("a command"), "send");
    for i in 0..n as u64 {
        let mut b = pool.alloc_timeout(64 << 10, STEP).expect("alloc");
        common::fill(b.as_mut_slice(), i, 0);
        ch.send(zcio::Msg::from(b.freeze().expect("freeze")))
            .expect("send");
    }
    common::report(format_args!("sent {n}"));
    // Stay (holding the buffers' region) until killed.
    while common::command().is_some() {}
}

#[test]
#[ignore = "child process entry point"]
fn child_lane() {
    if common::child_role("ct-lane").is_none() {
        return;
    }
    let ch = Channel::connect(common::arg("SOCK"), ChannelConfig::default()).expect("connect");
    let mut tx = ch
        .open_lane(&zcio::LaneConfig {
            slots: 8,
            slot_size: 4096,
        })
        .expect("open lane");
    let mut buf = vec![0u8; 1000];
    for i in 0..200u64 {
        common::fill(&mut buf, i, 0);
        tx.send_copy(&buf).expect("send");
    }
    common::report("sent 200");
    while common::command().is_some() {}
}

#[test]
#[ignore = "child process entry point"]
fn child_rendezvous() {
    if common::child_role("ct-rendezvous").is_none() {
        return;
    }
    let ep = Rendezvous::connect(common::arg("SOCK")).expect("connect");
    for i in 0..100u64 {
        let r = ep.call(&Envelope::new(1, &[i])).expect("call");
        assert_eq!(r.words, [i * 2]);
    }
    common::report("called 100");
    while common::command().is_some() {}
}

#[test]
#[ignore = "child process entry point"]
fn child_bell() {
    if common::child_role("netns-bell").is_none() {
        return;
    }
    let bell = NamedBell::bind_in(&child_ring_dir()).expect("bind");
    assert!(bell.is_file(), "bound as a file in the ring directory");
    common::report(format_args!("bound {}", bell.id()));
    let mut fds = [rustix::event::PollFd::new(
        &bell,
        rustix::event::PollFlags::IN,
    )];
    let t = rustix::event::Timespec::try_from(STEP).expect("timespec");
    let n = rustix::event::poll(&mut fds, Some(&t)).expect("poll");
    common::report(if n > 0 && bell.drain() > 0 {
        "bell rang"
    } else {
        "bell silent"
    });
    // Keep the bell (and its file) until the parent is done with us.
    assert_eq!(common::command(), None);
}

#[test]
#[ignore = "child process entry point"]
fn child_reader() {
    if common::child_role("netns-reader").is_none() {
        return;
    }
    let name = common::arg("RING");
    let c =
        Consumer::attach(RingMap::open(&name, true).expect("open"), Start::Newest).expect("attach");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut c = zcio::tokio::AsyncConsumer::new(c).expect("async");
        common::report("attached");
        let mut buf = vec![0u8; 1 << 16];
        let mut n = 0u64;
        loop {
            let r = tokio::time::timeout(STEP, c.read(&mut buf))
                .await
                .expect("a block or the end within the bound");
            match r.expect("read") {
                0 => break,
                len => {
                    assert_eq!(check_block(&buf[..len]), Ok(n));
                    common::report(format_args!("got {n}"));
                    n += 1;
                }
            }
        }
        common::report(format_args!("end {n}"));
    });
    assert_eq!(common::command(), None);
}
