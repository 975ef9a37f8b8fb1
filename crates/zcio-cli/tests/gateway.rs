//! `zcio gateway` as a benchmark drives it: start it with port 0, read the
//! `listening on ADDR` line, send datagrams through it, SIGTERM it, read
//! the JSON statistics; the same for `--tcp` and `--duration`; errors say
//! what to do. The gateway is a child under the watchdog; no timing asserts.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

fn gateway_cmd(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zcio"));
    c.arg("gateway").args(args).stdin(Stdio::null());
    c
}

/// Start `zcio gateway ARGS`; return it and the address it announced.
fn start(args: &[&str]) -> (Proc, SocketAddr) {
    let mut c = gateway_cmd(args);
    let (p, line) = spawn_first_line(&format!("gateway {}", args.join(" ")), &mut c);
    assert!(!line.is_empty(), "zcio gateway printed nothing on stdout");
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line is not `listening on ADDR`: {line:?}"))
        .trim()
        .parse()
        .expect("an address after `listening on`");
    (p, addr)
}

fn stats(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).expect("--stats-json written");
    serde_json::from_str(&text).expect("--stats-json is JSON")
}

struct TempPath(std::path::PathBuf);
impl TempPath {
    fn new(tag: &str) -> Self {
        Self(std::env::temp_dir().join(format!("zcio-gateway-{tag}-{}.json", std::process::id())))
    }
    fn as_str(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}
impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn udp_gateway_contract_listening_line_sigterm_and_json() {
    for plain in [false, true] {
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        sink.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let to = sink.local_addr().unwrap().to_string();
        let json = TempPath::new(if plain { "udp-plain" } else { "udp-fast" });
        let mut args = vec![
            "--udp",
            "127.0.0.1:0",
            "--to",
            &to,
            "--stats-json",
            json.as_str(),
        ];
        if plain {
            args.push("--plain");
        }
        let (p, addr) = start(&args);
        let src = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = vec![0u8; 1 << 16];
        for i in 0..50usize {
            let d = vec![i as u8; i * 7];
            src.send_to(&d, addr).unwrap();
            let n = sink.recv(&mut buf).expect("a forwarded datagram");
            assert_eq!(&buf[..n], &d[..], "datagram {i}");
        }
        sigterm(&p);
        let o = p.finish(Instant::now() + WATCHDOG);
        assert_ok("zcio gateway after SIGTERM", &o);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(out.lines().count(), 1, "stdout: {out}");
        let e = stderr(&o);
        assert!(e.contains("received 50, forwarded 50"), "summary: {e}");
        let v = stats(&json.0);
        assert_eq!(v["protocol"], "udp");
        assert_eq!(v["received"], 50);
        assert_eq!(v["forwarded"], 50);
        assert_eq!(v["bytes"], (0..50u64).map(|i| i * 7).sum::<u64>());
        assert_eq!(v["dropped_sink"], 0);
        assert_eq!(v["dropped_kernel"], 0);
        assert_eq!(v["mode"], if plain { "plain" } else { "fast" });
        for k in ["batches", "syscalls", "cpu_user_s", "cpu_sys_s", "seconds"] {
            assert!(v[k].is_number(), "{k} missing: {v}");
        }
        assert!(v["send_path"].is_string(), "{v}");
        assert_eq!(v["listen"], addr.to_string());
    }
}

#[test]
fn tcp_gateway_with_duration_and_quiet() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = server.local_addr().unwrap().to_string();
    let json = TempPath::new("tcp");
    let (p, addr) = start(&[
        "--tcp",
        "127.0.0.1:0",
        "--to",
        &to,
        "--duration",
        "3",
        "--quiet",
        "--stats-json",
        json.as_str(),
    ]);
    let mut c = TcpStream::connect(addr).unwrap();
    let (mut s, _) = server.accept().unwrap();
    c.write_all(b"hello").unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"hello");
    drop(s);
    let mut back = Vec::new();
    c.read_to_end(&mut back).unwrap();
    assert!(back.is_empty());
    // --duration ends it.
    let o = p.finish(Instant::now() + WATCHDOG);
    assert_ok("zcio gateway --tcp --duration", &o);
    assert!(o.stderr.is_empty(), "--quiet: {}", stderr(&o));
    let v = stats(&json.0);
    assert_eq!(v["protocol"], "tcp");
    assert_eq!(v["accepted"], 1);
    assert_eq!(v["bytes_up"], 5);
    assert_eq!(v["mover"], "splice");
}

#[test]
fn gateway_errors_say_what_to_do() {
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let a = taken.local_addr().unwrap().to_string();
    let run = |args: &[&str]| {
        Proc::spawn(&args.join(" "), gateway_cmd(args)).finish(Instant::now() + WATCHDOG)
    };
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--udp", &a, "--to", "127.0.0.1:9"],
            1,
            "pick another port",
        ),
        (
            &[
                "--udp",
                "127.0.0.1:0",
                "--to",
                "127.0.0.1:9",
                "--batch",
                "0",
            ],
            2,
            "--batch 0 is out of range",
        ),
        (
            &["--udp", "127.0.0.1:0", "--to", "nowhere"],
            2,
            "give HOST:PORT",
        ),
        (
            &["--udp", "127.0.0.1:0", "--to", "127.0.0.1:0"],
            2,
            "give the port",
        ),
        (&["--to", "127.0.0.1:9"], 2, "--udp"),
    ];
    for (args, code, want) in cases {
        let o = run(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {e}");
        assert!(e.starts_with("zcio: error: "), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {want:?} not in {e}");
        assert!(
            o.stdout.is_empty(),
            "{args:?}: no `listening on` line on failure"
        );
    }
}
