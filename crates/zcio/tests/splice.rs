//! Associations across real processes: a file sent to a child over TCP
//! (`sendfile`), a child's TCP stream written to a file (`splice` through
//! a pipe), file to file (`copy_file_range`), UDP datagrams keeping their
//! boundaries (buffer path), asynchronous increments reported through the
//! callback and the pollable descriptor, `stop` interrupting a source that
//! sends nothing, and a sender killed with SIGKILL mid-stream (the
//! association ends, no hang). Children are re-executions of this binary
//! under the watchdog of `common`.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::Duration;

use common::{arg, child_role, command, count_arg, report, Kid};
use zcio::splice::{splice, Increment, IoObject, MoverKind, Next};

/// Deterministic test data.
fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// FNV-1a, to compare streams without shipping them back.
fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}
const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

struct TempFile(PathBuf);
impl TempFile {
    fn new(tag: &str, data: &[u8]) -> Self {
        let p = std::env::temp_dir().join(format!("zcio-splice-{tag}-{}", std::process::id()));
        std::fs::write(&p, data).unwrap();
        Self(p)
    }
    fn open(&self) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(&self.0).unwrap())
    }
    fn create(&self) -> OwnedFd {
        OwnedFd::from(std::fs::File::create(&self.0).unwrap())
    }
}
impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

// ------------------------------------------------------------------ children

/// Connects to ADDR and reads until EOF; reports the byte count and hash.
#[test]
#[ignore = "child process"]
fn child_tcp_reader() {
    let Some(()) = child_role("tcp-reader") else {
        return;
    };
    let mut s = TcpStream::connect(arg("ADDR")).unwrap();
    let (mut n, mut h) = (0usize, FNV0);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let k = s.read(&mut buf).unwrap();
        if k == 0 {
            break;
        }
        n += k;
        h = fnv(&buf[..k], h);
    }
    report(format_args!("got {n} {h:x}"));
}

/// Connects to ADDR; on "send N" writes N pattern bytes; on "hold" keeps
/// the connection open without sending until stdin closes.
#[test]
#[ignore = "child process"]
fn child_tcp_writer() {
    let Some(()) = child_role("tcp-writer") else {
        return;
    };
    let mut s = TcpStream::connect(arg("ADDR")).unwrap();
    report("connected");
    while let Some(cmd) = command() {
        if cmd.starts_with("send") {
            let n = count_arg(&cmd, "send");
            s.write_all(&pattern(n, 7)).unwrap();
            report(format_args!("sent {n}"));
        } else if cmd == "close" {
            break;
        }
    }
}

/// Sends datagrams of the sizes given on "send A,B,C" to ADDR.
#[test]
#[ignore = "child process"]
fn child_udp_sender() {
    let Some(()) = child_role("udp-sender") else {
        return;
    };
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = arg("ADDR");
    while let Some(cmd) = command() {
        if let Some(list) = cmd.strip_prefix("send ") {
            for size in list.split(',').map(|v| v.parse::<usize>().unwrap()) {
                s.send_to(&pattern(size, size as u64), &to).unwrap();
            }
            report("sent");
        }
    }
}

// --------------------------------------------------------------------- tests

#[test]
fn file_to_child_over_tcp_uses_sendfile() {
    let data = pattern(5 << 20, 1);
    let f = TempFile::new("sendfile", &data);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let kid = Kid::spawn("child_tcp_reader", "tcp-reader", &[("ADDR", addr)]);
    let (sock, _) = l.accept().unwrap();
    let src = IoObject::new(f.open(), "file").unwrap();
    let dst = IoObject::new(OwnedFd::from(sock), "tcp").unwrap();
    let mut a = splice(src, dst).unwrap();
    // Increments: 1 MiB first, then the rest.
    let c = a.run(Increment::Bytes(1 << 20)).unwrap();
    assert_eq!((c.moved, c.eof), (1 << 20, false));
    let c = a.run(Increment::Infinite).unwrap();
    assert!(c.eof && c.error.is_none(), "{c:?}");
    let st = a.close();
    assert_eq!(st.moved, data.len() as u64);
    assert_eq!(st.mover, MoverKind::Sendfile, "{st:?}");
    let mut kid = kid;
    let got = kid.expect("got");
    assert_eq!(got, format!("{} {:x}", data.len(), fnv(&data, FNV0)));
    kid.finish();
}

#[test]
fn child_tcp_stream_to_file_uses_splice_and_survives_sigkill() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let mut kid = Kid::spawn("child_tcp_writer", "tcp-writer", &[("ADDR", addr)]);
    let (sock, _) = l.accept().unwrap();
    kid.expect("connected");
    let out = TempFile::new("from-tcp", b"");
    let src = IoObject::new(OwnedFd::from(sock), "tcp").unwrap();
    let dst = IoObject::new(out.create(), "file").unwrap();
    let mut a = splice(src, dst).unwrap();
    assert_eq!(kid.ask("send 3000000"), "sent 3000000");
    let c = a.run(Increment::Bytes(3_000_000)).unwrap();
    assert_eq!(c.moved, 3_000_000);
    assert_eq!(a.status().mover, MoverKind::Splice);
    // Killed mid-stream: the association sees the end, never hangs.
    kid.send("send 1000000");
    kid.kill();
    let c = a.run(Increment::Infinite).unwrap();
    assert!(c.eof || c.error.is_some(), "{c:?}");
    let total = a.close().moved;
    assert!((3_000_000..=4_000_000).contains(&total), "{total}");
    let got = std::fs::read(&out.0).unwrap();
    assert_eq!(got.len() as u64, total);
    assert_eq!(&got[..3_000_000], &pattern(3_000_000, 7)[..]);
}

#[test]
fn the_same_file_as_source_and_sink_is_refused_untouched() {
    let data = pattern(200_000, 11);
    let src = TempFile::new("same-src", &data);
    let link = src.0.with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&src.0, &link).unwrap();
    let s = src.0.to_str().unwrap();
    for dst in [s, link.to_str().unwrap()] {
        for modules in [&[][..], &["crc32c"][..]] {
            let e = zcio::splice::cp(s, dst, modules).unwrap_err();
            assert!(
                matches!(e, zcio::splice::SpliceError::SameFile { .. }),
                "{e}"
            );
            assert!(e.to_string().contains("are the same file"), "{e}");
            assert_eq!(std::fs::read(&src.0).unwrap(), data, "cp {s} {dst}");
        }
    }
    // Descriptors of the same file, opened separately (no path involved).
    let e = splice(
        IoObject::new(src.open(), "src").unwrap(),
        IoObject::new(
            OwnedFd::from(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&src.0)
                    .unwrap(),
            ),
            "fd",
        )
        .unwrap(),
    )
    .err()
    .expect("refused");
    assert!(
        matches!(e, zcio::splice::SpliceError::SameFile { .. }),
        "{e}"
    );
    let _ = std::fs::remove_file(&link);
    assert_eq!(std::fs::read(&src.0).unwrap(), data);
}

#[test]
fn cp_into_a_directory_takes_the_source_name() {
    let data = pattern(100_000, 12);
    let src = TempFile::new("into-src", &data);
    let dir = std::env::temp_dir().join(format!("zcio-splice-into-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let st = zcio::splice::cp(src.0.to_str().unwrap(), dir.to_str().unwrap(), &[]).unwrap();
    assert_eq!(st.moved, data.len() as u64);
    let got = std::fs::read(dir.join(src.0.file_name().unwrap())).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(got, data);
}

#[test]
fn a_file_source_that_shrinks_is_an_error_not_a_success() {
    let data = pattern(1 << 20, 13);
    let src = TempFile::new("shrink-src", &data);
    let dst = TempFile::new("shrink-dst", b"");
    for buffer_path in [false, true] {
        let source = IoObject::new(src.open(), "src").unwrap();
        assert_eq!(source.size(), Some(1 << 20));
        // Someone truncates the file after it was classified.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&src.0)
            .unwrap()
            .set_len(100_000)
            .unwrap();
        let mut a = splice(source, IoObject::new(dst.create(), "dst").unwrap()).unwrap();
        if buffer_path {
            a.push(
                zcio::splice::module::Registry::builtin()
                    .open("count")
                    .unwrap(),
            )
            .unwrap();
        }
        let c = a.run(Increment::Infinite).unwrap();
        assert!(c.eof);
        match c.error {
            Some(zcio::splice::SpliceError::Short {
                expected, moved, ..
            }) => assert_eq!((expected, moved), (1 << 20, 100_000)),
            other => panic!("a short copy must be an error: {other:?}"),
        }
        let st = a.close();
        assert!(st.error, "{st:?}");
        std::fs::write(&src.0, &data).unwrap();
    }
    // An inherited descriptor that was read from counts from its offset.
    let mut f = std::fs::File::open(&src.0).unwrap();
    let mut head = [0u8; 1000];
    f.read_exact(&mut head).unwrap();
    let source = IoObject::new(OwnedFd::from(f), "src").unwrap();
    assert_eq!(source.size(), Some((1 << 20) - 1000));
    let mut a = splice(source, IoObject::new(dst.create(), "dst").unwrap()).unwrap();
    let c = a.run(Increment::Infinite).unwrap();
    assert!(c.eof && c.error.is_none(), "{c:?}");
    assert_eq!(std::fs::read(&dst.0).unwrap(), &data[1000..]);
}

#[test]
fn file_to_file_uses_copy_file_range() {
    let data = pattern(3 << 20, 3);
    let src = TempFile::new("cfr-src", &data);
    let dst = TempFile::new("cfr-dst", b"");
    let mut a = splice(
        IoObject::new(src.open(), "src").unwrap(),
        IoObject::new(dst.create(), "dst").unwrap(),
    )
    .unwrap();
    let c = a.run(Increment::Infinite).unwrap();
    assert!(c.eof);
    let st = a.close();
    // copy_file_range, or sendfile where this filesystem refuses it.
    assert!(
        st.mover == MoverKind::CopyFileRange
            || st
                .fell_back
                .iter()
                .any(|(m, _)| *m == MoverKind::CopyFileRange),
        "{st:?}"
    );
    assert_eq!(std::fs::read(&dst.0).unwrap(), data);
}

#[test]
fn udp_datagrams_keep_their_boundaries() {
    let src = UdpSocket::bind("127.0.0.1:0").unwrap();
    let sink_peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink_peer
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let out = UdpSocket::bind("127.0.0.1:0").unwrap();
    out.connect(sink_peer.local_addr().unwrap()).unwrap();
    let addr = src.local_addr().unwrap().to_string();
    let mut kid = Kid::spawn("child_udp_sender", "udp-sender", &[("ADDR", addr)]);
    let mut a = splice(
        IoObject::new(OwnedFd::from(src), "udp-in").unwrap(),
        IoObject::new(OwnedFd::from(out), "udp-out").unwrap(),
    )
    .unwrap();
    let sizes = [1usize, 100, 1472, 8000, 64, 30000];
    let list: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
    assert_eq!(kid.ask(&format!("send {}", list.join(","))), "sent");
    let total: usize = sizes.iter().sum();
    let c = a.run(Increment::Bytes(total as u64)).unwrap();
    assert_eq!(c.moved, total as u64);
    assert_eq!(a.status().mover, MoverKind::Buffer);
    let mut buf = vec![0u8; 65536];
    for &s in &sizes {
        let n = sink_peer.recv(&mut buf).unwrap();
        assert_eq!(n, s, "datagram boundaries kept");
        assert_eq!(&buf[..n], &pattern(s, s as u64)[..]);
    }
    kid.finish();
}

#[test]
fn async_increments_report_through_callback_and_fd() {
    let data = pattern(3 << 20, 5);
    let src = TempFile::new("async-src", &data);
    let dst = TempFile::new("async-dst", b"");
    let mut a = splice(
        IoObject::new(src.open(), "src").unwrap(),
        IoObject::new(dst.create(), "dst").unwrap(),
    )
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    a.on_complete(move |c| {
        tx.send(c.moved).unwrap();
        Next::Continue(Increment::Bytes(1 << 20))
    });
    a.start(Increment::Bytes(1 << 20)).unwrap();
    // The pollable descriptor becomes readable once a completion waits.
    let mut fds = [rustix::event::PollFd::new(&a, rustix::event::PollFlags::IN)];
    let t = rustix::event::Timespec {
        tv_sec: 20,
        tv_nsec: 0,
    };
    assert_eq!(rustix::event::poll(&mut fds, Some(&t)).unwrap(), 1);
    let mut eof = false;
    for _ in 0..10 {
        let c = a.wait(Duration::from_secs(20)).expect("a completion");
        if c.eof {
            eof = true;
            break;
        }
    }
    assert!(eof);
    let moved: Vec<u64> = rx.try_iter().collect();
    assert_eq!(moved.iter().sum::<u64>(), data.len() as u64);
    assert_eq!(std::fs::read(&dst.0).unwrap(), data);
}

#[test]
fn stop_interrupts_a_source_that_sends_nothing() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let mut kid = Kid::spawn("child_tcp_writer", "tcp-writer", &[("ADDR", addr)]);
    let (sock, _) = l.accept().unwrap();
    kid.expect("connected");
    let out = TempFile::new("stop", b"");
    let mut a = splice(
        IoObject::new(OwnedFd::from(sock), "tcp").unwrap(),
        IoObject::new(out.create(), "file").unwrap(),
    )
    .unwrap();
    a.start(Increment::Infinite).unwrap();
    assert!(a.status().active);
    assert!(a.wait(Duration::from_millis(200)).is_none());
    a.stop();
    let c = a.wait(Duration::from_secs(20)).expect("stopped increment");
    assert!(c.stopped && c.moved == 0, "{c:?}");
    assert!(!a.status().active);
    kid.send("close");
    kid.finish();
}

#[test]
fn remote_stops_a_synchronous_run_on_another_thread() {
    // The frontends hold a Remote beside the association: stop and status
    // from another thread while `run` blocks on a source that sends nothing.
    let (quiet, peer) = std::os::unix::net::UnixStream::pair().unwrap();
    let out = TempFile::new("remote", b"");
    let mut a = splice(
        IoObject::new(OwnedFd::from(quiet), "quiet").unwrap(),
        IoObject::new(out.create(), "file").unwrap(),
    )
    .unwrap();
    let r = a.remote();
    let runner = std::thread::spawn(move || {
        let c = a.run(Increment::Infinite).unwrap();
        (c, a.close())
    });
    while !r.status().active {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(r.status().wanted);
    r.stop();
    let (c, st) = runner.join().unwrap();
    assert!(c.stopped && c.moved == 0 && !c.eof, "{c:?}");
    assert!(!st.active && !r.status().active);
    // After close: harmless.
    r.stop();
    assert!(r.wait(Duration::from_secs(u64::MAX)).is_none());
    drop(peer);
}

#[test]
fn a_stop_right_after_start_still_completes_the_increment() {
    // The worker may not have taken the increment yet: it must still end
    // (stopped), not stay active with nothing to wait for.
    let (quiet, peer) = std::os::unix::net::UnixStream::pair().unwrap();
    let out = TempFile::new("stopstart", b"");
    let mut a = splice(
        IoObject::new(OwnedFd::from(quiet), "quiet").unwrap(),
        IoObject::new(out.create(), "file").unwrap(),
    )
    .unwrap();
    for _ in 0..20 {
        a.start(Increment::Infinite).unwrap();
        a.stop();
        let c = a.wait(Duration::from_secs(20)).expect("a completion");
        assert!(c.stopped && c.moved == 0, "{c:?}");
        assert!(!a.status().active);
    }
    drop(peer);
}

#[test]
fn push_moves_to_the_buffer_path_and_popping_the_last_moves_back() {
    let data = pattern(6 << 20, 11);
    let src = TempFile::new("push-src", &data);
    let dst = TempFile::new("push-dst", b"");
    let mut a = splice(
        IoObject::new(src.open(), "src").unwrap(),
        IoObject::new(dst.create(), "dst").unwrap(),
    )
    .unwrap();
    let reg = zcio::splice::module::Registry::builtin();
    // 1 MiB on the kernel fast path.
    assert_eq!(a.run(Increment::Bytes(1 << 20)).unwrap().moved, 1 << 20);
    assert_eq!(a.status().mover, MoverKind::CopyFileRange);
    // 2 MiB through crc32c and count: the buffer path, no copies.
    a.push(reg.open("crc32c").unwrap()).unwrap();
    a.push(reg.open("count").unwrap()).unwrap();
    let st = a.status();
    assert_eq!(st.mover, MoverKind::Buffer);
    assert_eq!(st.modules, ["crc32c", "count"]);
    assert_eq!(a.run(Increment::Bytes(2 << 20)).unwrap().moved, 2 << 20);
    let want = crc32c::crc32c(&data[1 << 20..3 << 20]);
    assert_eq!(
        a.control("crc32c", "value", None).unwrap(),
        format!("{want:#010x}")
    );
    let stats = a.module_stats();
    assert_eq!(stats[1].0, "count");
    assert!(stats[1].1.contains(&("bytes", 2 << 20)), "{stats:?}");
    assert_eq!(a.status().copied, 0, "pass-through modules copy nothing");
    // Pop both: back on copy_file_range for the rest.
    assert_eq!(a.pop().unwrap().unwrap().name(), "count");
    assert_eq!(a.status().mover, MoverKind::Buffer);
    assert_eq!(a.pop().unwrap().unwrap().name(), "crc32c");
    assert!(a.pop().unwrap().is_none());
    assert_eq!(a.status().mover, MoverKind::CopyFileRange);
    assert!(a.run(Increment::Infinite).unwrap().eof);
    assert!(a.control(0, "stats", None).is_err(), "stack is empty");
    let st = a.close();
    assert_eq!(st.moved, data.len() as u64);
    assert_eq!(std::fs::read(&dst.0).unwrap(), data);
}

#[test]
fn child_tcp_stream_through_zstd_to_file_decompresses_to_the_input() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let mut kid = Kid::spawn("child_tcp_writer", "tcp-writer", &[("ADDR", addr)]);
    let (sock, _) = l.accept().unwrap();
    kid.expect("connected");
    let out = TempFile::new("zstd-out", b"");
    let mut a = splice(
        IoObject::new(OwnedFd::from(sock), "tcp").unwrap(),
        IoObject::new(out.create(), "file").unwrap(),
    )
    .unwrap();
    let reg = zcio::splice::module::Registry::builtin();
    a.push(reg.open("crc32c").unwrap()).unwrap();
    a.push(reg.open("zstd:level=1").unwrap()).unwrap();
    // Asynchronous: the child's write blocks until the association reads.
    a.start(Increment::Infinite).unwrap();
    assert_eq!(kid.ask("send 5000000"), "sent 5000000");
    kid.send("close");
    let c = a
        .wait(Duration::from_secs(20))
        .expect("the increment completes");
    assert!(c.eof, "{c:?}");
    kid.finish();
    let want = pattern(5_000_000, 7);
    assert_eq!(
        a.control("crc32c", "value", None).unwrap(),
        format!("{:#010x}", crc32c::crc32c(&want))
    );
    assert_eq!(
        a.status().copied,
        0,
        "crc32c and zstd copy nothing between them"
    );
    drop(a);
    let packed = std::fs::read(&out.0).unwrap();
    let got = zstd::stream::decode_all(&packed[..]).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want);
}
