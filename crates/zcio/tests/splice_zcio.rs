//! Associations with zcio endpoints and flow control, across real
//! processes: a file feeds a ring that a child reads (the association
//! reads straight into the ring's room), a socket feeds a channel whose
//! receiving child gets zcio buffers, a child's channel messages land in a
//! file, and an active source (UDP) drops and counts what a sink that is
//! behind cannot take instead of stalling. Children are re-executions of
//! this binary under the watchdog of `common`.

mod common;

use std::io::{Read, Write};
use std::net::UdpSocket;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use common::{arg, child_role, command, fill, fnv, report, Kid, SockPath};
use zcio::ring::{self, Consumer, Producer};
use zcio::splice::{splice, Increment, IoObject, MoverKind};
use zcio::{Channel, ChannelConfig, Listener};

fn data(n: usize, i: u64) -> Vec<u8> {
    let mut v = vec![0u8; n];
    fill(&mut v, i, 0);
    v
}

fn temp_with(tag: &str, bytes: &[u8]) -> (std::path::PathBuf, OwnedFd) {
    let p = std::env::temp_dir().join(format!("zcio-spz-{tag}-{}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    let f = std::fs::File::open(&p).unwrap();
    (p, OwnedFd::from(f))
}

// ------------------------------------------------------------------ children

/// Joins ring NAME, reads to the end, reports bytes and hash.
#[test]
#[ignore = "child process"]
fn child_ring_reader() {
    let Some(()) = child_role("ring-reader") else {
        return;
    };
    let mut c = Consumer::open(&arg("NAME")).unwrap();
    report("joined");
    let (mut n, mut h) = (0usize, 0u64);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = c.read(&mut buf).unwrap();
        if k == 0 {
            break;
        }
        n += k;
        h = fnv(h, &buf[..k]);
    }
    report(format_args!("got {n} {h:x}"));
}

/// Connects a channel to PATH and receives until the sender is gone.
#[test]
#[ignore = "child process"]
fn child_channel_receiver() {
    let Some(()) = child_role("chan-rx") else {
        return;
    };
    let ch = Channel::connect(arg("PATH"), ChannelConfig::default()).unwrap();
    report("connected");
    let (mut n, mut h, mut msgs) = (0usize, 0u64, 0usize);
    while let Ok(m) = ch.recv() {
        let v = m.to_vec();
        n += v.len();
        h = fnv(h, &v);
        msgs += 1;
    }
    report(format_args!("got {n} {h:x} {msgs}"));
}

/// Connects a channel to PATH and sends N messages of SIZE bytes.
#[test]
#[ignore = "child process"]
fn child_channel_sender() {
    let Some(()) = child_role("chan-tx") else {
        return;
    };
    let ch = Channel::connect(arg("PATH"), ChannelConfig::default()).unwrap();
    let pool = common::small_pool("spz-tx", 4 << 20, 4);
    let n: u64 = arg("N").parse().unwrap();
    let size: usize = arg("SIZE").parse().unwrap();
    for i in 0..n {
        ch.send(common::msg_of(&pool, &data(size, i))).unwrap();
    }
    ch.flush();
    report("sent");
    let _ = command(); // until the parent is done
}

/// Sends N datagrams of SIZE bytes to ADDR.
#[test]
#[ignore = "child process"]
fn child_udp_blaster() {
    let Some(()) = child_role("udp-blaster") else {
        return;
    };
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let n: u64 = arg("N").parse().unwrap();
    let d = data(arg("SIZE").parse().unwrap(), 5);
    for _ in 0..n {
        let _ = s.send_to(&d, arg("ADDR"));
    }
    report("sent");
}

// --------------------------------------------------------------------- tests

#[test]
fn a_file_feeds_a_ring_that_a_child_reads() {
    let name = format!("zcio-spz-ring-{}", std::process::id());
    let map = ring::Options::new().size(1 << 20).create(&name).unwrap();
    let mut kid = Kid::spawn(
        "child_ring_reader",
        "ring-reader",
        &[("NAME", name.clone())],
    );
    kid.expect("joined");
    let bytes = data(9 << 20, 1);
    let (path, fd) = temp_with("ring-src", &bytes);
    let mut a = splice(
        IoObject::new(fd, "file").unwrap(),
        IoObject::ring_writer(Producer::attach(map).unwrap(), format!("ring:{name}")),
    )
    .unwrap();
    let c = a.run(Increment::Infinite).unwrap();
    assert!(c.eof);
    let st = a.close(); // closes the ring: the reader sees the end
    assert_eq!(st.mover, MoverKind::Buffer);
    assert_eq!(st.moved, bytes.len() as u64);
    assert_eq!(st.dropped, 0, "a passive source is paced, never dropped");
    let got = kid.expect("got");
    assert_eq!(got, format!("{} {:x}", bytes.len(), fnv(0, &bytes)));
    kid.finish();
    let _ = ring::unlink(&name);
    let _ = std::fs::remove_file(path);
}

#[test]
fn a_socket_feeds_a_channel_whose_receiver_is_a_child() {
    let sock = SockPath::new("spz-chan");
    let l = Listener::bind(sock.path(), ChannelConfig::default()).unwrap();
    let mut kid = Kid::spawn("child_channel_receiver", "chan-rx", &[("PATH", sock.arg())]);
    let ch = l.accept_timeout(Duration::from_secs(20)).unwrap();
    kid.expect("connected");
    let (mut w, r) = std::os::unix::net::UnixStream::pair().unwrap();
    let bytes = data(6 << 20, 2);
    let writer = {
        let bytes = bytes.clone();
        std::thread::spawn(move || w.write_all(&bytes))
    };
    let mut a = splice(
        IoObject::new(OwnedFd::from(r), "unix").unwrap(),
        IoObject::channel(ch, "channel"),
    )
    .unwrap();
    let c = a.run(Increment::Infinite).unwrap();
    assert!(c.eof, "{c:?}");
    writer.join().unwrap().unwrap();
    let st = a.close(); // the channel closes: the child sees the end
    assert_eq!(st.moved, bytes.len() as u64);
    let got = kid.expect("got");
    let want = format!("{} {:x} ", bytes.len(), fnv(0, &bytes));
    assert!(got.starts_with(&want), "{got} vs {want}");
    kid.finish();
}

#[test]
fn a_childs_channel_messages_land_in_a_file() {
    let sock = SockPath::new("spz-chan-src");
    let l = Listener::bind(sock.path(), ChannelConfig::default()).unwrap();
    let (n, size) = (200u64, 20_000usize);
    let mut kid = Kid::spawn(
        "child_channel_sender",
        "chan-tx",
        &[
            ("PATH", sock.arg()),
            ("N", n.to_string()),
            ("SIZE", size.to_string()),
        ],
    );
    let ch = l.accept_timeout(Duration::from_secs(20)).unwrap();
    let out = std::env::temp_dir().join(format!("zcio-spz-chan-out-{}", std::process::id()));
    let f = std::fs::File::create(&out).unwrap();
    let mut a = splice(
        IoObject::channel(ch, "channel"),
        IoObject::new(OwnedFd::from(f), "file").unwrap(),
    )
    .unwrap();
    let c = a.run(Increment::Bytes(n * size as u64)).unwrap();
    assert_eq!(c.moved, n * size as u64);
    kid.expect("sent");
    kid.send("done");
    kid.finish();
    drop(a);
    let got = std::fs::read(&out).unwrap();
    let want: Vec<u8> = (0..n).flat_map(|i| data(size, i)).collect();
    assert!(got == want, "file differs from the messages sent");
    let _ = std::fs::remove_file(out);
}

#[test]
fn an_active_source_drops_and_counts_what_a_sink_behind_cannot_take() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = rx.local_addr().unwrap().to_string();
    // The sink: a pipe nobody reads (it fills at its capacity).
    let (mut pr, pw) = rustix::pipe::pipe()
        .map(|(r, w)| (std::fs::File::from(r), w))
        .unwrap();
    let mut a = splice(
        IoObject::new(OwnedFd::from(rx), "udp").unwrap(),
        IoObject::new(pw, "pipe").unwrap(),
    )
    .unwrap();
    let quenched = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let q = quenched.clone();
    a.on_quench(move |on| q.store(on, std::sync::atomic::Ordering::SeqCst))
        .unwrap();
    a.start(Increment::Infinite).unwrap();
    let mut kid = Kid::spawn(
        "child_udp_blaster",
        "udp-blaster",
        &[
            ("ADDR", addr),
            ("N", "3000".into()),
            ("SIZE", "1000".into()),
        ],
    );
    kid.expect("sent");
    kid.finish();
    // Bounded wait for the association to take what arrived.
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.status().dropped == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    a.stop();
    let c = a.wait(Duration::from_secs(20)).expect("the increment ends");
    assert!(c.stopped, "{c:?}");
    let st = a.close();
    assert!(
        st.dropped > 0,
        "a full sink made the active source drop: {st:?}"
    );
    assert!(quenched.load(std::sync::atomic::Ordering::SeqCst));
    // Everything taken either reached the pipe or was counted dropped.
    let mut inpipe = Vec::new();
    pr.read_to_end(&mut inpipe).unwrap();
    assert_eq!(inpipe.len() as u64 + st.dropped_bytes, st.moved, "{st:?}");
    assert_eq!(inpipe.len() % 1000, 0, "whole datagrams only");
}

/// Connects a channel to PATH, receives and keeps every message (never
/// releases a buffer) until told to quit.
#[test]
#[ignore = "child process"]
fn child_channel_hoarder() {
    let Some(()) = child_role("chan-hoard") else {
        return;
    };
    let ch = Channel::connect(arg("PATH"), ChannelConfig::default()).unwrap();
    report("connected");
    let mut kept = Vec::new();
    loop {
        match ch.recv_timeout(Duration::from_millis(50)) {
            Ok(m) => kept.push(m),
            Err(zcio::RecvError::TimedOut) => {
                if kept.len() > 1 {
                    report(format_args!("holding {}", kept.len()));
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let _ = command();
}

#[test]
fn a_receiver_that_hoards_buffers_ends_the_increment_with_an_error_not_a_hang() {
    let sock = SockPath::new("spz-hoard");
    let l = Listener::bind(sock.path(), ChannelConfig::default()).unwrap();
    let mut kid = Kid::spawn(
        "child_channel_hoarder",
        "chan-hoard",
        &[("PATH", sock.arg())],
    );
    let ch = l.accept_timeout(Duration::from_secs(20)).unwrap();
    kid.expect("connected");
    // Far more than the association's pool (16 MiB) can hold in flight.
    let bytes = data(64 << 20, 3);
    let (path, fd) = temp_with("hoard-src", &bytes);
    let mut a = splice(
        IoObject::new(fd, "file").unwrap(),
        IoObject::channel(ch, "channel"),
    )
    .unwrap();
    let r = a.run(Increment::Infinite);
    let st = a.status();
    let err = match r {
        Ok(c) => c.error.expect("the increment ends with an error"),
        Err(e) => e,
    };
    assert!(st.error, "{st:?}");
    assert!(st.moved < bytes.len() as u64, "{st:?}");
    let msg = err.to_string();
    assert!(!msg.is_empty());
    let holding = kid.expect("holding");
    assert!(holding.parse::<usize>().unwrap() > 0);
    kid.send("quit");
    kid.finish();
    drop(a);
    let _ = std::fs::remove_file(path);
}
