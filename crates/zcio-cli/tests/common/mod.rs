//! Helpers shared by the CLI tests: a private ring directory, the real
//! `zcio` binary as a child under a watchdog, and checks on its output.
//! Each test binary uses a part of them.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

pub const WATCHDOG: Duration = Duration::from_secs(60);
pub const INPUT: usize = 32 << 20;

/// A fresh directory for the test's rings, removed afterwards.
pub struct RingDir(pub PathBuf);

impl RingDir {
    pub fn new(tag: &str) -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let p = std::env::temp_dir().join(format!("zcio-cli-{tag}-{}-{t}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create ring dir");
        Self(p)
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_zcio"));
        c.args(args).env("ZCIO_RING_DIR", &self.0);
        c
    }

    /// `zcio pipe get RING OPTS…`.
    pub fn get(&self, ring: &str, opts: &[&str]) -> Command {
        let mut c = self.cmd(&["pipe", "get", ring]);
        c.args(opts);
        c
    }

    /// `zcio pipe put RING --readers N OPTS…`, fed `data` on its stdin by a
    /// thread (returned: join it once the producer has finished).
    pub fn put_fed(
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
    pub fn run(&self, args: &[&str]) -> Output {
        let mut c = self.cmd(args);
        c.stdin(Stdio::null());
        Proc::spawn(&args.join(" "), c).finish(Instant::now() + WATCHDOG)
    }

    pub fn stat(&self, name: &str) -> Option<Value> {
        let o = self.run(&["ring", "stat", name, "--format", "json"]);
        o.status
            .success()
            .then(|| serde_json::from_slice(&o.stdout).expect("stat --format json is JSON"))
    }

    /// Wait until ring `name` has `n` live consumers.
    pub fn wait_consumers(&self, name: &str, n: usize, deadline: Instant) {
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
pub struct Proc {
    name: String,
    pub child: Child,
    out: Option<JoinHandle<Vec<u8>>>,
    err: Option<JoinHandle<Vec<u8>>>,
}

impl Proc {
    pub fn spawn(name: &str, mut c: Command) -> Self {
        Self::spawn_with(name, c.stdout(Stdio::piped()), |mut o| {
            let mut v = Vec::new();
            let _ = o.read_to_end(&mut v);
            v
        })
    }

    /// Spawn with a custom stdout consumer (running on its own thread).
    pub fn spawn_with(
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
    pub fn wait(&mut self, deadline: Instant) -> ExitStatus {
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

    pub fn finish(mut self, deadline: Instant) -> Output {
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

    pub fn kill9(&mut self) {
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

/// Spawn `c` and wait (bounded by the watchdog) for the first line it
/// prints on stdout (`""` if it printed none); the rest is collected.
pub fn spawn_first_line(name: &str, c: &mut Command) -> (Proc, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    let p = Proc::spawn_with(name, c, move |o| {
        let mut r = std::io::BufReader::new(o);
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut r, &mut line);
        let _ = tx.send(line.clone());
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
        let mut all = line.into_bytes();
        all.extend(rest);
        all
    });
    let line = rx.recv_timeout(WATCHDOG).unwrap_or_default();
    (p, line)
}

/// Send SIGTERM to a running child.
pub fn sigterm(p: &Proc) {
    // SAFETY: kill(2) with a pid of our own, not yet reaped child.
    let r = unsafe { libc::kill(p.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(r, 0, "kill(SIGTERM)");
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `n` pseudo-random bytes (xorshift64*).
pub fn random(n: usize, seed: u64) -> Vec<u8> {
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
pub fn assert_ok(what: &str, o: &Output) {
    assert!(
        o.status.success(),
        "{what} failed: {:?} {}",
        o.status,
        stderr(o)
    );
}

pub fn assert_same(what: &str, got: &[u8], want: &[u8]) {
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

/// A stdout consumer that reports (once) when `at` bytes have arrived and
/// keeps reading to the end; returns nothing (the bytes are not kept).
pub fn count_then_signal(
    at: usize,
    tx: std::sync::mpsc::Sender<()>,
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

/// kill -9 of a reader: `victim` (a `zcio pipe get RING` command, run
/// anywhere) is killed once it has 4 MiB while a survivor here and
/// `pipe put RING --readers 2 OPTS…` go on; the producer evicts the dead
/// reader and the survivor gets every byte.
pub fn killed_reader_is_evicted(dir: &RingDir, ring: &str, opts: &[&str], mut victim: Command) {
    let deadline = Instant::now() + WATCHDOG;
    let data = std::sync::Arc::new(random(INPUT, 42));
    let good = Proc::spawn(&format!("pipe get {ring} (survivor)"), dir.get(ring, opts));
    let (tx, rx) = std::sync::mpsc::channel();
    let mut victim = Proc::spawn_with(
        &format!("pipe get {ring} (victim)"),
        &mut victim,
        count_then_signal(4 << 20, tx),
    );
    let (put, feeder) = dir.put_fed(ring, 2, opts, &data);
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .expect("watchdog: the victim never got 4 MiB");
    victim.kill9();
    assert_ok("put after a reader was killed", &put.finish(deadline));
    feeder.join().expect("feeder");
    let o = good.finish(deadline);
    assert_ok("survivor", &o);
    assert_same("survivor", &o.stdout, &data);
}

/// kill -9 of a producer: `put` (a `zcio pipe put RING` command, run
/// anywhere, fed endless input) is killed once a reader here (`pipe get
/// RING OPTS…`) has 2 MiB; the reader fails saying the producer died.
pub fn killed_producer_is_reported(dir: &RingDir, ring: &str, opts: &[&str], mut put: Command) {
    let deadline = Instant::now() + WATCHDOG;
    put.stdin(Stdio::piped());
    let mut put = Proc::spawn(&format!("pipe put {ring}"), put);
    let mut stdin = put.child.stdin.take().expect("stdin piped");
    // An endless input: the producer is killed mid-stream.
    let feeder = std::thread::spawn(move || {
        let chunk = random(1 << 20, 7);
        while stdin.write_all(&chunk).is_ok() {}
    });
    let (tx, rx) = std::sync::mpsc::channel();
    let get = Proc::spawn_with(
        &format!("pipe get {ring}"),
        &mut dir.get(ring, opts),
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
