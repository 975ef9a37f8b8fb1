//! The UDP/TCP gateway (`zcio_gateway`, the `zcio gateway` command) across real processes: a
//! sender child → the gateway (in this process, so its counters can be read
//! while it runs) → a receiver child. Every datagram arrives intact and in
//! order at a low rate (sizes 1 B … 60 KiB, both modes); zero-length and
//! maximum-size datagrams pass; a burst far beyond the gateway's receive
//! buffer is counted as kernel drops while the gateway keeps receiving (the
//! sink never reads); an unreachable destination (ECONNREFUSED on the
//! connected socket after an ICMP port unreachable) is counted and the
//! gateway goes on; TCP moves 64 MiB both ways intact and survives a client
//! killed with SIGKILL mid-stream. No timing assertions: every wait is
//! bounded by the children's watchdog or `STEP`.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zcio_gateway::{
    GatewayConfig, GatewayMode, TcpGateway, TcpGatewayStats, UdpGateway, UdpGatewayStats,
};
use zcio_testkit::{arg, child_role, command, report, Kid, STEP};

/// Deterministic datagram contents for sequence number `seq`.
fn pattern(n: usize, seq: u64) -> Vec<u8> {
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// FNV-1a.
fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn nums(cmd: &str) -> Vec<u64> {
    cmd.split_whitespace()
        .skip(1)
        .flat_map(|w| w.split(','))
        .map(|w| w.parse().unwrap_or_else(|_| panic!("bad command {cmd:?}")))
        .collect()
}

// ------------------------------------------------------------------ children

/// Sends datagrams to TO. `send SEQ SIZE…`: one datagram per size, with
/// sequence numbers from SEQ, back to back. `burst N SIZE`: N datagrams.
#[test]
#[ignore = "child process"]
fn child_udp_sender() {
    let Some(()) = child_role("udp-sender") else {
        return;
    };
    let to: SocketAddr = arg("TO").parse().unwrap();
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    while let Some(cmd) = command() {
        let v = nums(&cmd);
        if cmd.starts_with("send ") {
            let datagrams: Vec<Vec<u8>> = v[1..]
                .iter()
                .enumerate()
                .map(|(i, &size)| pattern(size as usize, v[0] + i as u64))
                .collect();
            for d in &datagrams {
                s.send_to(d, to).unwrap();
            }
            report(format_args!("sent {}", datagrams.len()));
        } else if cmd.starts_with("burst ") {
            let d = pattern(v[1] as usize, 7);
            for _ in 0..v[0] {
                // ENOBUFS/EAGAIN cannot stop a burst; loopback drops silently.
                let _ = s.send_to(&d, to);
            }
            report(format_args!("sent {}", v[0]));
        } else {
            panic!("unknown command {cmd:?}");
        }
    }
}

/// Binds ADDR, reports it; `recv N`: receives N datagrams and reports
/// `got LEN HASH` for each. Without commands it never reads.
#[test]
#[ignore = "child process"]
fn child_udp_receiver() {
    let Some(()) = child_role("udp-receiver") else {
        return;
    };
    let s = UdpSocket::bind(arg("ADDR")).unwrap();
    s.set_read_timeout(Some(STEP)).unwrap();
    report(format_args!("addr {}", s.local_addr().unwrap()));
    let mut buf = vec![0u8; 1 << 16];
    while let Some(cmd) = command() {
        for _ in 0..nums(&cmd)[0] {
            let n = s.recv(&mut buf).expect("a datagram within STEP");
            report(format_args!("got {n} {}", fnv(&buf[..n])));
        }
    }
}

/// Period of the TCP test stream: not a power of two, so a lost, repeated
/// or reordered chunk shows.
const PERIOD: usize = 1_000_003;

/// One period of the stream and the first 64 KiB again, so any chunk of up
/// to 64 KiB starting inside the period is one slice.
fn stream_block(seed: u64) -> Vec<u8> {
    let mut b = pattern(PERIOD, seed);
    b.extend_from_within(..1 << 16);
    b
}

/// Write `n` bytes of the stream `block` to `w`.
fn write_stream(w: &mut impl Write, block: &[u8], n: u64) -> std::io::Result<()> {
    let mut off = 0u64;
    while off < n {
        let at = (off % PERIOD as u64) as usize;
        let k = ((n - off) as usize).min(1 << 16);
        w.write_all(&block[at..at + k])?;
        off += k as u64;
    }
    Ok(())
}

/// Read to the end, comparing with the stream `block`: (bytes, intact).
fn read_stream(r: &mut impl Read, block: &[u8]) -> (u64, bool) {
    let mut buf = vec![0u8; 1 << 16];
    let (mut off, mut ok) = (0u64, true);
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return (off, ok),
            Ok(k) => {
                let at = (off % PERIOD as u64) as usize;
                ok &= buf[..k] == block[at..at + k];
                off += k as u64;
            }
        }
    }
}

/// A TCP server: reports `addr A`. `exchange N`: accepts one connection,
/// sends N bytes of stream 2 (then half-closes) while reading stream 1 to
/// the end; reports `got BYTES INTACT`. `drain AT`: accepts one
/// connection, reports `reading` once AT bytes arrived, then `end BYTES`.
#[test]
#[ignore = "child process"]
fn child_tcp_server() {
    let Some(()) = child_role("tcp-server") else {
        return;
    };
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    report(format_args!("addr {}", l.local_addr().unwrap()));
    let (up, down) = (stream_block(1), Arc::new(stream_block(2)));
    while let Some(cmd) = command() {
        let n = nums(&cmd)[0];
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(STEP)).unwrap();
        if cmd.starts_with("exchange ") {
            let mut w = c.try_clone().unwrap();
            let down = down.clone();
            let t = std::thread::spawn(move || {
                write_stream(&mut w, &down, n).unwrap();
                w.shutdown(Shutdown::Write).unwrap();
            });
            let (got, ok) = read_stream(&mut c, &up);
            t.join().unwrap();
            report(format_args!("got {got} {ok}"));
        } else {
            let mut buf = vec![0u8; 1 << 16];
            let (mut got, mut told) = (0u64, false);
            loop {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => got += k as u64,
                }
                if !told && got >= n {
                    report("reading");
                    told = true;
                }
            }
            report(format_args!("end {got}"));
        }
    }
}

/// A TCP client of ADDR. `exchange N`: sends N bytes of stream 1 (then
/// half-closes) while reading stream 2 to the end; reports `got BYTES
/// INTACT`. `flood`: connects, reports `connected`, writes until killed.
#[test]
#[ignore = "child process"]
fn child_tcp_client() {
    let Some(()) = child_role("tcp-client") else {
        return;
    };
    let addr = arg("ADDR");
    let (up, down) = (Arc::new(stream_block(1)), stream_block(2));
    while let Some(cmd) = command() {
        let mut c = TcpStream::connect(&addr).unwrap();
        if cmd.starts_with("exchange ") {
            let n = nums(&cmd)[0];
            c.set_read_timeout(Some(STEP)).unwrap();
            let mut w = c.try_clone().unwrap();
            let up = up.clone();
            let t = std::thread::spawn(move || {
                write_stream(&mut w, &up, n).unwrap();
                w.shutdown(Shutdown::Write).unwrap();
            });
            let (got, ok) = read_stream(&mut c, &down);
            t.join().unwrap();
            report(format_args!("got {got} {ok}"));
        } else {
            report("connected");
            loop {
                c.write_all(&up[..1 << 16]).unwrap();
            }
        }
    }
}

// ------------------------------------------------------------- the gateways

struct Running<S> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<S>>,
}

impl<S> Running<S> {
    fn finish(mut self) -> S {
        self.stop.store(true, Ordering::Relaxed);
        let h = self.handle.take().expect("joined once");
        h.join().expect("gateway thread panicked")
    }

    fn alive(&self) -> bool {
        self.handle.as_ref().is_some_and(|h| !h.is_finished())
    }
}

impl<S> Drop for Running<S> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn udp_cfg(to: SocketAddr, mode: GatewayMode) -> GatewayConfig {
    GatewayConfig {
        mode,
        ..GatewayConfig::new("127.0.0.1:0".parse().unwrap(), to)
    }
}

fn run_udp(mut r: UdpGateway) -> Running<UdpGatewayStats> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let handle = std::thread::spawn(move || r.run(&s, None).expect("the gateway runs"));
    Running {
        stop,
        handle: Some(handle),
    }
}

fn receiver(addr: &str) -> (Kid, SocketAddr) {
    let mut k = Kid::spawn(
        "child_udp_receiver",
        "udp-receiver",
        &[("ADDR", addr.into())],
    );
    let a = k.expect("addr").parse().unwrap();
    (k, a)
}

fn sender(to: SocketAddr) -> Kid {
    Kid::spawn("child_udp_sender", "udp-sender", &[("TO", to.to_string())])
}

/// Send `sizes` (sequence numbers from `seq`) back to back and check that
/// the receiver gets each intact, in order.
fn check_window(tx: &mut Kid, rx: &mut Kid, seq: u64, sizes: &[usize]) {
    let list: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
    tx.send(&format!("send {seq} {}", list.join(",")));
    assert_eq!(tx.expect("sent"), sizes.len().to_string());
    rx.send(&format!("recv {}", sizes.len()));
    for (i, &size) in sizes.iter().enumerate() {
        let want = pattern(size, seq + i as u64);
        let got = rx.expect("got");
        assert_eq!(
            got,
            format!("{size} {}", fnv(&want)),
            "datagram {} (size {size}) lost, damaged or out of order",
            seq + i as u64
        );
    }
}

#[test]
fn udp_datagrams_arrive_intact_and_in_order_in_both_modes() {
    for mode in [GatewayMode::Fast, GatewayMode::Plain] {
        let (mut rx, sink) = receiver("127.0.0.1:0");
        let gw = UdpGateway::bind(udp_cfg(sink, mode)).unwrap();
        let mut tx = sender(gw.local_addr());
        let run = run_udp(gw);
        let mut seq = 0u64;
        let mut total = 0u64;
        for size in [1usize, 64, 1024, 8192, 60 << 10] {
            // A low rate: at most 32 KiB in flight, far below any buffer.
            let window = ((32 << 10) / size).clamp(1, 16);
            for _ in 0..3 {
                check_window(&mut tx, &mut rx, seq, &vec![size; window]);
                seq += window as u64;
                total += window as u64;
            }
        }
        let s = run.finish();
        assert_eq!((s.received, s.forwarded), (total, total), "{s:?}");
        assert_eq!(s.dropped_sink + s.dropped_kernel, 0, "{s:?}");
        println!("{mode}: {s:?}");
        tx.finish();
        rx.finish();
    }
}

#[test]
fn udp_zero_length_and_maximum_size_datagrams_pass() {
    const MAX: usize = 65507; // the largest UDP payload over IPv4
    for mode in [GatewayMode::Fast, GatewayMode::Plain] {
        let (mut rx, sink) = receiver("127.0.0.1:0");
        let gw = UdpGateway::bind(udp_cfg(sink, mode)).unwrap();
        let mut tx = sender(gw.local_addr());
        let run = run_udp(gw);
        check_window(&mut tx, &mut rx, 0, &[0, 0, 0, 5, 5, 0, 3, 3, 1, 0]);
        check_window(&mut tx, &mut rx, 100, &[MAX]);
        check_window(&mut tx, &mut rx, 200, &[0, MAX]);
        check_window(&mut tx, &mut rx, 300, &[MAX - 1, 0, 1]);
        let s = run.finish();
        assert_eq!(s.forwarded, 16, "{s:?}");
        tx.finish();
        rx.finish();
    }
}

/// Wait (bounded by STEP) until `f` holds, prodding with `prod` between looks.
fn until(what: &str, mut f: impl FnMut() -> bool, mut prod: impl FnMut()) {
    let deadline = Instant::now() + STEP;
    while !f() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        prod();
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn udp_burst_beyond_the_buffers_is_counted_not_blocking() {
    for mode in [GatewayMode::Fast, GatewayMode::Plain] {
        // The sink never reads.
        let (rx, sink) = receiver("127.0.0.1:0");
        let cfg = GatewayConfig {
            rcvbuf: Some(64 << 10),
            ..udp_cfg(sink, mode)
        };
        let gw = UdpGateway::bind(cfg).unwrap();
        let counters = gw.counters();
        let mut tx = sender(gw.local_addr());
        // A burst of 8 MiB while the gateway is bound but not yet running:
        // the kernel must drop most of it from the gateway's receive queue.
        tx.send("burst 8192 1024");
        tx.expect("sent");
        let run = run_udp(gw);
        // Drops are reported with datagrams queued after them.
        until(
            "the gateway reports kernel drops",
            || counters.dropped() > 0,
            || {
                tx.send("send 0 64");
                tx.expect("sent");
            },
        );
        // The sink's queue is long full; the gateway keeps receiving.
        for _ in 0..3 {
            let before = counters.received();
            tx.send("burst 2000 1024");
            tx.expect("sent");
            until(
                "the gateway keeps receiving",
                || counters.received() > before,
                || {
                    tx.send("send 0 64");
                    tx.expect("sent");
                },
            );
        }
        assert!(run.alive());
        let s = run.finish();
        assert!(s.dropped_sink + s.dropped_kernel > 0, "{s:?}");
        assert!(s.received > 0 && s.forwarded > 0, "{s:?}");
        println!("{mode}: {s:?}");
        tx.finish();
        drop(rx);
    }
}

#[test]
fn udp_unreachable_destination_is_counted_and_survived() {
    for mode in [GatewayMode::Fast, GatewayMode::Plain] {
        // A port nobody listens on (until later).
        let free = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port_addr = free.local_addr().unwrap();
        drop(free);
        let gw = UdpGateway::bind(udp_cfg(port_addr, mode)).unwrap();
        let counters = gw.counters();
        let mut tx = sender(gw.local_addr());
        let run = run_udp(gw);
        for i in 0..20 {
            tx.send(&format!("send {i} 64"));
            tx.expect("sent");
            until("the gateway receives", || counters.received() > i, || {});
        }
        if mode == GatewayMode::Fast {
            // Each send draws an ICMP port unreachable; the connected
            // socket reports it as ECONNREFUSED on the next send.
            assert!(counters.sink_errors() > 0, "no refusal seen");
        }
        assert!(
            run.alive(),
            "the gateway died on an unreachable destination"
        );
        // Now something listens there: datagrams flow again (at most one is
        // still eaten by a refusal pending from before).
        let (mut rx, _) = receiver(&port_addr.to_string());
        tx.send("send 100 64,64,64");
        tx.expect("sent");
        rx.send("recv 1");
        let got = rx.expect("got");
        assert!(got.starts_with("64 "), "{got}");
        let s = run.finish();
        if mode == GatewayMode::Fast {
            assert!(s.last_sink_error.is_some(), "{s:?}");
        }
        println!("{mode}: {s:?}");
        tx.finish();
        rx.finish();
    }
}

// ---------------------------------------------------------------------- TCP

fn run_tcp(mut r: TcpGateway) -> Running<TcpGatewayStats> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let handle = std::thread::spawn(move || r.run(&s, None).expect("the gateway runs"));
    Running {
        stop,
        handle: Some(handle),
    }
}

#[test]
fn tcp_moves_64_mib_both_ways_and_survives_a_killed_client() {
    const N: u64 = 64 << 20;
    for mode in [GatewayMode::Fast, GatewayMode::Plain] {
        let mut server = Kid::spawn("child_tcp_server", "tcp-server", &[]);
        let to: SocketAddr = server.expect("addr").parse().unwrap();
        let gw = TcpGateway::bind(udp_cfg(to, mode)).unwrap();
        let addr = gw.local_addr().to_string();
        let run = run_tcp(gw);
        let mut client = Kid::spawn("child_tcp_client", "tcp-client", &[("ADDR", addr.clone())]);

        server.send(&format!("exchange {N}"));
        client.send(&format!("exchange {N}"));
        assert_eq!(client.expect("got"), format!("{N} true"), "{mode}: down");
        assert_eq!(server.expect("got"), format!("{N} true"), "{mode}: up");

        // A client killed with SIGKILL mid-stream.
        let mut flood = Kid::spawn("child_tcp_client", "tcp-client", &[("ADDR", addr.clone())]);
        server.send(&format!("drain {}", 4 << 20));
        flood.send("flood");
        flood.expect("connected");
        server.expect("reading");
        flood.kill();
        // The server sees the end of that connection…
        server.expect("end");
        assert!(run.alive(), "{mode}: the gateway died with its client");
        // …and the gateway still forwards.
        server.send("exchange 1000000");
        client.send("exchange 1000000");
        assert_eq!(client.expect("got"), "1000000 true");
        assert_eq!(server.expect("got"), "1000000 true");

        let s = run.finish();
        assert_eq!(s.accepted, 3, "{s:?}");
        assert!(s.completed >= 2, "{s:?}");
        assert!(
            s.bytes_up >= N + 1_000_000 && s.bytes_down >= N + 1_000_000,
            "{s:?}"
        );
        println!("{mode}: {s:?}");
        client.finish();
        server.finish();
    }
}
