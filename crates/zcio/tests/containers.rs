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
//! Skipped with a printed reason where a network namespace cannot be made.
//! Requires the `tokio` feature (the async suites run with it).

#![cfg(feature = "tokio")]

mod common;

use std::os::unix::process::CommandExt;

use common::ring::{block_of, check_block, child_ring_dir, RingDir};
use common::STEP;
use zcio::internals::bell::{NamedBell, Ringer};
use zcio::ring::{Consumer, Layout, Options, Overflow, Producer, RingMap, Start};

/// Why a network namespace cannot be made here, if it cannot.
fn cannot_unshare_net() -> Option<String> {
    match std::process::Command::new("unshare")
        .args(["--net", "true"])
        .output()
    {
        Err(e) => Some(format!("unshare not runnable: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "unshare --net refused: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}

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
        if let Some(why) = cannot_unshare_net() {
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
