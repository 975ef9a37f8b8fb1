//! Hostile *connectors*: handshakes with unsealed, malformed or mislabelled
//! control segments, wrong versions, wrong fds, silence and hang-ups. Each
//! must make `Listener::accept` return an error, and the listener must then
//! accept and serve the next, valid connection.

mod common;

use std::os::fd::{AsFd, OwnedFd};

use common::hostile::*;
use rustix::fs::SealFlags;
use rustix::net;
use zcio::internals::segment::Handshake;
use zcio::internals::sys::fdpass;
use zcio::internals::sys::memfd;
use zcio::internals::wire::{self, SegmentHeader, SegmentLayout, LAYOUT_VERSION};
use zcio::Channel;

#[test]
fn hostile_connectors_are_refused_and_listener_stays_usable() {
    let (sock, mut kid) = start_victim("hostile-conn");
    let layout = SegmentLayout::new(ENTRIES, ENTRIES).unwrap();
    let len = layout.total_len as u64;
    let good = header(&layout);
    let sealed_seg = |h: SegmentHeader| {
        let fd = memfd::create_sized("hostile-seg", len).unwrap();
        write_header(&fd, h);
        fd
    };
    let mut attempt = |want: &str, act: &dyn Fn(&OwnedFd)| {
        kid.send("accept");
        let s = raw_connect(sock.path());
        act(&s);
        let got = kid.next_report();
        assert!(
            got.starts_with(&format!("accept err {want}")),
            "wanted {want}, got {got}"
        );
    };
    let proto = |m: &str| format!("Protocol({m:?})");
    let not_sealed = proto("segment not sealed against resizing");
    let bad_header = proto("segment header invalid (magic, version or sizes)");
    let bad_hello = proto("hello with wrong transport, version or fds");
    let out_of_range = proto("segment size out of range");
    attempt(&not_sealed, &|s| {
        let fd = unsealed_region("hostile-seg", len);
        write_header(&fd, good);
        fdpass::send(s, &hello(len), &[fd.as_fd(), bell_end().as_fd()], false).unwrap();
    });
    for h in [
        SegmentHeader {
            magic: 0x1234,
            ..good
        },
        SegmentHeader {
            version: LAYOUT_VERSION + 1,
            ..good
        },
        SegmentHeader {
            msg_entries: 1000,
            ..good
        },
        SegmentHeader {
            desc_size: 16,
            ..good
        },
        SegmentHeader {
            total_len: len * 2,
            ..good
        },
    ] {
        attempt(&bad_header, &|s| {
            fdpass::send(
                s,
                &hello(len),
                &[sealed_seg(h).as_fd(), bell_end().as_fd()],
                false,
            )
            .unwrap()
        });
    }
    let v2 = hello_as(wire::SEGMENT_MAGIC.to_le_bytes(), LAYOUT_VERSION + 1, len);
    attempt(&bad_hello, &|s| {
        fdpass::send(
            s,
            &v2,
            &[sealed_seg(good).as_fd(), bell_end().as_fd()],
            false,
        )
        .unwrap()
    });
    // A rendezvous hello at a channel listener: another transport.
    let rdv = hello_as(*b"ZCIORDV1", 1, len);
    attempt(&bad_hello, &|s| {
        fdpass::send(
            s,
            &rdv,
            &[sealed_seg(good).as_fd(), bell_end().as_fd()],
            false,
        )
        .unwrap()
    });
    attempt(&bad_hello, &|s| {
        fdpass::send(s, &hello(len), &[], false).unwrap()
    });
    attempt(&bad_hello, &|s| {
        let fd = sealed_seg(good);
        fdpass::send(s, &hello(len), &[fd.as_fd()], false).unwrap();
    });
    attempt(&bad_hello, &|s| {
        let fd = sealed_seg(good);
        let bell = bell_end();
        fdpass::send(
            s,
            &hello(len),
            &[fd.as_fd(), bell.as_fd(), fd.as_fd()],
            false,
        )
        .unwrap();
    });
    attempt(
        &proto("doorbell is not a Unix SOCK_SEQPACKET socket"),
        &|s| {
            let fd = sealed_seg(good);
            let (r, _w) = rustix::pipe::pipe().unwrap();
            fdpass::send(s, &hello(len), &[fd.as_fd(), r.as_fd()], false).unwrap();
        },
    );
    attempt(&out_of_range, &|s| {
        fdpass::send(
            s,
            &hello(len * 4),
            &[sealed_seg(good).as_fd(), bell_end().as_fd()],
            false,
        )
        .unwrap()
    });
    attempt(&out_of_range, &|s| {
        fdpass::send(
            s,
            &hello(10),
            &[sealed_seg(good).as_fd(), bell_end().as_fd()],
            false,
        )
        .unwrap()
    });
    attempt(&proto("undecodable handshake record"), &|s| {
        fdpass::send(s, &[9u8; 32], &[], false).unwrap()
    });
    attempt(&proto("expected hello"), &|s| {
        let w = Handshake::Welcome {
            magic: wire::SEGMENT_MAGIC.to_le_bytes(),
            version: LAYOUT_VERSION,
        };
        fdpass::send(s, &w.encode(), &[], false).unwrap();
    });
    attempt("Os { op: \"F_GET_SEALS\"", &|s| {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        fdpass::send(s, &hello(len), &[r.as_fd(), bell_end().as_fd()], false).unwrap();
    });
    attempt("Os { op: \"mmap segment\"", &|s| {
        let fd = sealed_seg(good);
        memfd::add_seals(&fd, SealFlags::WRITE).unwrap();
        fdpass::send(s, &hello(len), &[fd.as_fd(), bell_end().as_fd()], false).unwrap();
    });
    attempt(&proto("peer hung up during handshake"), &|s| {
        net::shutdown(s, net::Shutdown::Write).unwrap()
    });
    attempt("TimedOut", &|_| {}); // says nothing: bounded by connect_timeout

    // After all that, a real client is accepted and served.
    kid.send("accept");
    let ch = Channel::connect(sock.path(), victim_cfg()).expect("valid connection");
    assert_eq!(kid.next_report(), "accept ok");
    let pool = common::small_pool("hostile-ok", 64 << 10, 1);
    ch.send(common::msg_of(&pool, b"after-hostiles")).unwrap();
    assert_eq!(kid.ask("recv"), "recv Ok(\"after-hostiles\")");
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
}

#[test]
#[ignore = "child process entry point"]
fn child_victim() {
    if common::child_role("hostile-victim").is_some() {
        common::hostile::victim();
    }
}

/// A connector picks the ring sizes, but the listener bounds them (4x its
/// own) and does not pre-fault the segment: a huge request is refused, and an
/// idle connection of the largest allowed size costs the listener almost
/// nothing.
#[test]
fn huge_segment_is_refused_and_allowed_one_not_allocated_by_listener() {
    let (sock, mut kid) = start_victim("hostile-bigseg");
    let huge = SegmentLayout::new(1 << 20, 1 << 20).unwrap();
    kid.send("accept");
    let s = raw_connect(sock.path());
    let fd = memfd::create_sized("hostile-bigseg", huge.total_len as u64).unwrap();
    write_header(&fd, header(&huge));
    fdpass::send(
        &s,
        &hello(huge.total_len as u64),
        &[fd.as_fd(), bell_end().as_fd()],
        false,
    )
    .unwrap();
    let r = kid.next_report();
    assert!(
        r.starts_with("accept err Protocol(\"ring sizes larger"),
        "{r}"
    );
    drop(s);

    let d = victim_cfg();
    let big = SegmentLayout::new(d.ring_entries * 4, d.notice_entries * 4).unwrap();
    let len = big.total_len as u64;
    let before = rss_shmem_kib(kid.pid());
    kid.send("accept");
    let s = raw_connect(sock.path());
    let fd = memfd::create_sized("hostile-bigseg", len).unwrap();
    write_header(&fd, header(&big));
    fdpass::send(&s, &hello(len), &[fd.as_fd(), bell_end().as_fd()], false).unwrap();
    assert_eq!(kid.next_report(), "accept ok");
    let after = rss_shmem_kib(kid.pid());
    assert_eq!(kid.ask("exit"), "bye");
    kid.finish();
    assert!(
        after.saturating_sub(before) < (len >> 10) / 4 + 64,
        "one idle connection cost the listener {} KiB of a {} KiB segment",
        after.saturating_sub(before),
        len >> 10
    );
}
