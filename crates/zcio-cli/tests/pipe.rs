//! `zcio ring …` and `zcio pipe put|get` as real processes.
//!
//! Every test gets its own ring directory (`ZCIO_RING_DIR`) and runs each
//! child under a watchdog: a child still running at the deadline is killed
//! and the test fails. Nothing asserts on timing.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

const WATCHDOG: Duration = Duration::from_secs(60);
const INPUT: usize = 32 << 20;

/// A fresh directory for the test's rings, removed afterwards.
struct RingDir(PathBuf);

impl RingDir {
    fn new(tag: &str) -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let p = std::env::temp_dir().join(format!("zcio-cli-{tag}-{}-{t}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create ring dir");
        Self(p)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_zcio"));
        c.args(args).env("ZCIO_RING_DIR", &self.0);
        c
    }

    /// `zcio pipe get RING OPTS…`.
    fn get(&self, ring: &str, opts: &[&str]) -> Command {
        let mut c = self.cmd(&["pipe", "get", ring]);
        c.args(opts);
        c
    }

    /// `zcio pipe put RING --readers N OPTS…`, fed `data` on its stdin by a
    /// thread (returned: join it once the producer has finished).
    fn put_fed(
        &self,
        ring: &str,
        readers: usize,
        opts: &[&str],
        data: &std::sync::Arc<Vec<u8>>,
    ) -> (Proc, JoinHandle<()>) {
        let n = readers.to_string();
        let mut c = self.cmd(&["pipe", "put", ring, "--readers", &n]);
        c.args(opts).stdin(Stdio::piped());
        let mut put = Proc::spawn(&format!("pipe put {ring} --readers {readers}"), c);
        let mut stdin = put.child.stdin.take().expect("stdin piped");
        let data = data.clone();
        let feeder = std::thread::spawn(move || {
            // A killed child makes this fail with EPIPE; that is expected.
            let _ = stdin.write_all(&data);
        });
        (put, feeder)
    }

    /// Run to completion (stdin empty) under the watchdog.
    fn run(&self, args: &[&str]) -> Output {
        let mut c = self.cmd(args);
        c.stdin(Stdio::null());
        Proc::spawn(&args.join(" "), c).finish(Instant::now() + WATCHDOG)
    }

    fn stat(&self, name: &str) -> Option<Value> {
        let o = self.run(&["ring", "stat", name, "--format", "json"]);
        o.status
            .success()
            .then(|| serde_json::from_slice(&o.stdout).expect("stat --format json is JSON"))
    }

    /// Wait until ring `name` has `n` live consumers.
    fn wait_consumers(&self, name: &str, n: usize, deadline: Instant) {
        loop {
            let live = self.stat(name).map_or(0, |s| {
                s["consumers"]
                    .as_array()
                    .map_or(0, |c| c.iter().filter(|c| c["alive"] == true).count())
            });
            if live >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "watchdog: {n} consumers never attached to {name}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for RingDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process whose stdout and stderr are collected by threads; it is
/// killed if dropped while still running.
struct Proc {
    name: String,
    child: Child,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
}

impl Proc {
    fn spawn(name: &str, mut c: Command) -> Self {
        Self::spawn_with(name, c.stdout(Stdio::piped()), |mut o| {
            let mut v = Vec::new();
            let _ = o.read_to_end(&mut v);
            v
        })
    }

    /// Spawn with a custom stdout consumer (running on its own thread).
    fn spawn_with(
        name: &str,
        c: &mut Command,
        out: impl FnOnce(std::process::ChildStdout) -> Vec<u8> + Send + 'static,
    ) -> Self {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let o = child.stdout.take().expect("piped");
        let mut e = child.stderr.take().expect("piped");
        Self {
            name: name.to_owned(),
            out: Some(std::thread::spawn(move || out(o))),
            err: Some(std::thread::spawn(move || {
                let mut v = Vec::new();
                let _ = e.read_to_end(&mut v);
                v
            })),
            child,
        }
    }

    /// Wait for exit; kill it and fail if `deadline` passes first.
    fn wait(&mut self, deadline: Instant) -> ExitStatus {
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return s;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("watchdog: `zcio {}` still running, killed", self.name);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn finish(mut self, deadline: Instant) -> Output {
        let status = self.wait(deadline);
        let stdout = self
            .out
            .take()
            .map(|h| h.join().expect("stdout thread"))
            .unwrap_or_default();
        let stderr = self
            .err
            .take()
            .map(|h| h.join().expect("stderr thread"))
            .unwrap_or_default();
        Output {
            status,
            stdout,
            stderr,
        }
    }

    fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `n` pseudo-random bytes (xorshift64*).
fn random(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    v.truncate(n);
    v
}

/// `o` must be a successful exit (`what` names the process).
fn assert_ok(what: &str, o: &Output) {
    assert!(
        o.status.success(),
        "{what} failed: {:?} {}",
        o.status,
        stderr(o)
    );
}

fn assert_same(what: &str, got: &[u8], want: &[u8]) {
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} bytes out, {} in; first difference at {:?}",
            got.len(),
            want.len(),
            first
        );
    }
}

/// ~32 MiB of random data through a 256 KiB ring to three readers, each
/// of which must get exactly the input.
fn round_trip(layout: &str) {
    let dir = RingDir::new(layout);
    let deadline = Instant::now() + WATCHDOG;
    let data = std::sync::Arc::new(random(INPUT, 0x9e37_79b9_7f4a_7c15 ^ layout.len() as u64));
    let create = ["--layout", layout, "--size", "256KiB"];
    let mut readers: Vec<Proc> = (0..3)
        .map(|i| Proc::spawn(&format!("pipe get rt ({i})"), dir.get("rt", &create)))
        .collect();
    let (put, feeder) = dir.put_fed("rt", 3, &create, &data);
    assert_ok("put", &put.finish(deadline));
    feeder.join().expect("feeder");
    for (i, r) in readers.drain(..).enumerate() {
        let o = r.finish(deadline);
        assert_ok(&format!("reader {i}"), &o);
        assert_same(&format!("{layout} reader {i}"), &o.stdout, &data);
    }
    let s = dir.stat("rt").expect("stat rt");
    assert_eq!(s["layout"], layout);
    assert_eq!(s["size"], 256 << 10);
    assert_eq!(s["producer"]["state"], "closed");
    assert_eq!(s["bytes"], INPUT as u64);
    assert_eq!(s["dropped_blocks"], 0);
    assert_eq!(s["consumers"].as_array().map(Vec::len), Some(0));
}

#[test]
fn round_trip_continuous() {
    round_trip("continuous");
}

#[test]
fn round_trip_variable() {
    round_trip("variable");
}

#[test]
fn round_trip_descriptors() {
    round_trip("descriptors");
}

#[test]
fn ring_create_stat_ls_rm() {
    let dir = RingDir::new("admin");
    let ok = |args: &[&str]| {
        let o = dir.run(args);
        assert!(
            o.status.success(),
            "zcio {}: {}",
            args.join(" "),
            stderr(&o)
        );
        o
    };
    let fails = |args: &[&str], msg: &str| {
        let o = dir.run(args);
        assert!(!o.status.success(), "zcio {} should fail", args.join(" "));
        assert!(
            stderr(&o).contains(msg),
            "zcio {}: {}",
            args.join(" "),
            stderr(&o)
        );
    };
    ok(&[
        "ring",
        "create",
        "r1",
        "--layout",
        "p",
        "--size",
        "64KiB",
        "--slot-size",
        "1K",
        "--mode",
        "0640",
    ]);
    ok(&[
        "ring",
        "create",
        "r2",
        "--layout",
        "index",
        "--entries",
        "1024",
        "--policy",
        "frp",
    ]);
    fails(&["ring", "create", "r1"], "already exists");
    fails(
        &["ring", "create", "r3", "--size", "3M"],
        "not a power of two",
    );
    fails(&["ring", "create", "r3", "--mode", "0999"], "octal");
    fails(&["ring", "create", "bad/name"], "invalid ring name");
    fails(&["ring", "stat", "nope"], "no ring named");
    assert!(dir.0.join("zcio-ring.r1").exists());

    let s = dir.stat("r1").expect("stat r1");
    assert_eq!(s["name"], "r1");
    assert_eq!(s["layout"], "slotted");
    assert_eq!(s["policy"], "block");
    assert_eq!(s["size"], 65536);
    assert_eq!(s["slot_size"], 1024);
    let mode = u32::from_str_radix(s["mode"].as_str().expect("mode"), 8).expect("octal mode");
    assert_eq!(mode & !0o640, 0, "mode {mode:o}");
    assert_eq!(s["producer"]["state"], "none");
    assert_eq!(s["fill"], 0);
    assert_eq!(s["consumers"].as_array().map(Vec::len), Some(0));
    let s2 = dir.stat("r2").expect("stat r2");
    assert_eq!(s2["layout"], "index");
    assert_eq!(s2["policy"], "frp");
    assert_eq!(s2["entries"], 1024);
    let table = String::from_utf8(ok(&["ring", "stat", "r1"]).stdout).expect("utf-8");
    for k in [
        "slotted",
        "64 KiB",
        "1 KiB",
        "0640",
        "producer",
        "fill",
        "consumers",
    ] {
        assert!(table.contains(k), "stat table lacks {k:?}:\n{table}");
    }

    let ls: Value =
        serde_json::from_slice(&ok(&["ring", "ls", "--format", "json"]).stdout).expect("ls json");
    let names: Vec<&str> = ls
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(names, ["r1", "r2"]);
    let table = String::from_utf8(ok(&["ring", "ls"]).stdout).expect("utf-8");
    assert!(
        table.contains("r1") && table.contains("slotted") && table.contains("index"),
        "{table}"
    );

    ok(&["ring", "rm", "r1", "r2"]);
    assert!(!dir.0.join("zcio-ring.r1").exists());
    fails(&["ring", "rm", "r1"], "no ring named");
    ok(&["ring", "rm", "-f", "r1"]);
    let ls: Value =
        serde_json::from_slice(&ok(&["ring", "ls", "--format", "json"]).stdout).expect("ls json");
    assert_eq!(ls.as_array().map(Vec::len), Some(0));

    for sub in [
        &["ring", "create"][..],
        &["ring", "stat"],
        &["ring", "ls"],
        &["ring", "rm"],
        &["pipe", "put"],
        &["pipe", "get"],
    ] {
        let mut args = sub.to_vec();
        args.push("--help");
        let help = String::from_utf8(ok(&args).stdout).expect("utf-8");
        assert!(
            help.contains("Examples:"),
            "zcio {} --help has no examples",
            sub.join(" ")
        );
    }
}

/// A stdout consumer that reports (once) when `at` bytes have arrived and
/// keeps reading to the end; returns nothing (the bytes are not kept).
fn count_then_signal(
    at: usize,
    tx: mpsc::Sender<()>,
) -> impl FnOnce(std::process::ChildStdout) -> Vec<u8> + Send {
    move |mut o| {
        let mut buf = vec![0u8; 64 << 10];
        let mut n = 0;
        let mut told = false;
        while let Ok(k) = o.read(&mut buf) {
            if k == 0 {
                break;
            }
            n += k;
            if !told && n >= at {
                let _ = tx.send(());
                told = true;
            }
        }
        Vec::new()
    }
}

#[test]
fn killed_reader_is_evicted() {
    let dir = RingDir::new("killreader");
    let deadline = Instant::now() + WATCHDOG;
    let data = std::sync::Arc::new(random(INPUT, 42));
    let create = ["--size", "256KiB"];
    let good = Proc::spawn("pipe get kr (survivor)", dir.get("kr", &create));
    let (tx, rx) = mpsc::channel();
    let mut victim = Proc::spawn_with(
        "pipe get kr (victim)",
        &mut dir.get("kr", &create),
        count_then_signal(4 << 20, tx),
    );
    let (put, feeder) = dir.put_fed("kr", 2, &create, &data);
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .expect("watchdog: the victim never got 4 MiB");
    victim.kill9();
    assert_ok("put after a reader was killed", &put.finish(deadline));
    feeder.join().expect("feeder");
    let o = good.finish(deadline);
    assert_ok("survivor", &o);
    assert_same("survivor", &o.stdout, &data);
}

#[test]
fn killed_producer_is_reported() {
    let dir = RingDir::new("killproducer");
    let deadline = Instant::now() + WATCHDOG;
    let mut pc = dir.cmd(&["pipe", "put", "kp", "--size", "256KiB"]);
    pc.stdin(Stdio::piped());
    let mut put = Proc::spawn("pipe put kp", pc);
    let mut stdin = put.child.stdin.take().expect("stdin piped");
    // An endless input: the producer is killed mid-stream.
    let feeder = std::thread::spawn(move || {
        let chunk = random(1 << 20, 7);
        while stdin.write_all(&chunk).is_ok() {}
    });
    let (tx, rx) = mpsc::channel();
    let get = Proc::spawn_with(
        "pipe get kp",
        &mut dir.get("kp", &["--size", "256KiB"]),
        count_then_signal(2 << 20, tx),
    );
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .expect("watchdog: the reader never got 2 MiB");
    put.kill9();
    let o = get.finish(deadline);
    feeder.join().expect("feeder");
    assert!(!o.status.success(), "get must fail when the producer dies");
    assert!(
        stderr(&o).contains("producer died"),
        "get said: {}",
        stderr(&o)
    );
}

/// A producer with empty input still ends the stream of a reader that was
/// waiting before it came.
#[test]
fn empty_input_ends_the_stream() {
    let dir = RingDir::new("empty");
    let deadline = Instant::now() + WATCHDOG;
    let get = Proc::spawn("pipe get e", dir.get("e", &[]));
    dir.wait_consumers("e", 1, deadline);
    assert_ok("put", &dir.run(&["pipe", "put", "e"]));
    let o = get.finish(deadline);
    assert_ok("get", &o);
    assert!(o.stdout.is_empty());
}
