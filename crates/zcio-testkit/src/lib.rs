//! zcio's test kit (not published): what the test suites and the benchmark
//! children of every zcio crate share.
//!
//! * the child-process harness: [`Kid`] re-executes the current test binary
//!   as a child playing a role, under a watchdog; [`child_role`], [`arg`],
//!   [`report`], [`command`] are the child's side;
//! * temporary socket paths ([`SockPath`]);
//! * deterministic patterns and checksums ([`pattern`], [`fill`],
//!   [`first_mismatch`], [`fnv`]);
//! * bounded polling ([`eventually`]) and [`exec_as_blocker`] for tests that
//!   run a child under another uid;
//! * small pools, one-buffer messages and channel settling ([`small_pool`],
//!   [`msg_of`], [`settle`]);
//! * the raw hostile peer ([`hostile`]), written by hand from zcio's wire
//!   formats (the `internals` feature, which only this kit enables);
//! * the import graph of a crate's top-level modules ([`layers`]), for the
//!   layering tests.
//!
//!
//! Children are this same test binary, re-executed with the name of a
//! `#[test] #[ignore]` entry point and `ZCIO_CHILD_ROLE` set; the entry point
//! does nothing unless the variable names its role. Every child runs under a
//! watchdog thread that SIGKILLs it (through a pidfd, so a recycled pid is
//! never hit) when it outlives [`WATCHDOG`]; the test then fails.
//!
//! Parent ↔ child protocol: the parent writes command lines to the child's
//! stdin; the child answers with lines starting with `@` on stdout (the test
//! harness's own output on stdout is skipped).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags};
use zcio::{Channel, Pool, PoolConfig};

pub mod hostile;
pub mod layers;

/// Environment variable naming the role a re-executed child plays.
pub const ROLE_ENV: &str = "ZCIO_CHILD_ROLE";
/// Longest a child may live.
pub const WATCHDOG: Duration = Duration::from_secs(30);
/// Bound for any single wait inside a test (recv, accept, ...).
pub const STEP: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------- child side

/// In a child entry point: `Some(())` when this process was spawned to play
/// `role` (and announces itself to the parent), `None` otherwise (the entry
/// point then returns at once, so a plain `cargo test --include-ignored`
/// passes through it).
pub fn child_role(role: &str) -> Option<()> {
    match std::env::var(ROLE_ENV) {
        Ok(r) if r == role => {
            report(format_args!("hello {role}"));
            Some(())
        }
        _ => None,
    }
}

/// A parameter passed to the child by [`Kid::spawn`].
pub fn arg(name: &str) -> String {
    std::env::var(format!("ZCIO_ARG_{name}"))
        .unwrap_or_else(|_| panic!("child argument {name} missing"))
}

/// Send one report line to the parent.
pub fn report(line: impl std::fmt::Display) {
    let mut out = std::io::stdout().lock();
    // The harness may have left "test NAME ... " unterminated on stdout:
    // start a fresh line so the parent sees the report at a line start.
    writeln!(out, "\n@{line}").expect("write report");
    out.flush().expect("flush report");
}

/// Next command line from the parent (`None` on EOF: the parent is gone).
pub fn command() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end().to_string()),
    }
}

/// The number after `verb` in a command line like `"send 12"`.
pub fn count_arg(cmd: &str, verb: &str) -> usize {
    cmd.strip_prefix(verb)
        .and_then(|r| r.trim().parse().ok())
        .unwrap_or_else(|| panic!("bad command {cmd:?}"))
}

/// Wait for the exact command `want`; panic on anything else.
pub fn expect_command(want: &str) {
    let got = command();
    assert_eq!(
        got.as_deref(),
        Some(want),
        "child expected command {want:?}"
    );
}

// --------------------------------------------------------------- parent side

/// A child process under a watchdog. Dropping it kills and reaps it.
pub struct Kid {
    /// The role it plays (for messages).
    pub name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    timed_out: Arc<AtomicBool>,
    watchdog: Option<JoinHandle<()>>,
    reaped: bool,
}

impl Kid {
    /// Re-execute this test binary running only `entry` (a `#[test]
    /// #[ignore]` function) as `role`, with `ZCIO_ARG_<k>=<v>` for each arg.
    /// Returns once the child has announced itself.
    pub fn spawn(entry: &str, role: &str, args: &[(&str, String)]) -> Kid {
        Self::spawn_with(entry, role, args, |_| {})
    }

    /// As [`Kid::spawn`], with a hook to adjust the command (uid, ...).
    pub fn spawn_with(
        entry: &str,
        role: &str,
        args: &[(&str, String)],
        adjust: impl FnOnce(&mut Command),
    ) -> Kid {
        Self::try_spawn_with(entry, role, args, adjust)
            .unwrap_or_else(|e| panic!("spawning child {role}: {e}"))
    }

    /// As [`Kid::spawn_with`], returning the spawn error instead of panicking.
    pub fn try_spawn_with(
        entry: &str,
        role: &str,
        args: &[(&str, String)],
        adjust: impl FnOnce(&mut Command),
    ) -> std::io::Result<Kid> {
        Self::try_spawn_under(&[], entry, role, args, adjust)
    }

    /// As [`Kid::try_spawn_with`], the child run by the command `prefix`
    /// (e.g. `unshare --pid --fork --kill-child`: a child in namespaces of
    /// its own; killing the kid kills the prefix's process, which must take
    /// the child with it).
    pub fn try_spawn_under(
        prefix: &[&str],
        entry: &str,
        role: &str,
        args: &[(&str, String)],
        adjust: impl FnOnce(&mut Command),
    ) -> std::io::Result<Kid> {
        let exe = std::env::current_exe()?;
        let mut cmd = match prefix.split_first() {
            Some((prog, rest)) => {
                let mut c = Command::new(prog);
                c.args(rest).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        cmd.args([
            entry,
            "--exact",
            "--nocapture",
            "--ignored",
            "--test-threads=1",
        ])
        .env(ROLE_ENV, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        for (k, v) in args {
            cmd.env(format!("ZCIO_ARG_{k}"), v);
        }
        adjust(&mut cmd);
        let mut child = cmd.spawn()?;
        let pid = child.id() as i32;
        let pidfd = open_pidfd(pid).expect("pidfd_open of our own child (Linux >= 5.3)");
        let timed_out = Arc::new(AtomicBool::new(false));
        let flag = timed_out.clone();
        let name = role.to_string();
        let watchdog = std::thread::spawn(move || watchdog(pidfd, flag));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut kid = Kid {
            name,
            child,
            stdin,
            stdout,
            timed_out,
            watchdog: Some(watchdog),
            reaped: false,
        };
        let hello = kid.next_report();
        assert_eq!(
            hello,
            format!("hello {role}"),
            "child did not start its role (wrong entry point name?)"
        );
        Ok(kid)
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Write one command line to the child.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("child stdin closed");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("child {} is not reading commands ({e})", self.name));
    }

    /// Next report line from the child (without the `@`). Bounded by the
    /// watchdog: a hung child is killed, which ends its stdout.
    pub fn next_report(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            match self.stdout.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let status = self.reap();
                    panic!(
                        "child {} ended without the expected report (status {status:?})",
                        self.name
                    );
                }
                Ok(_) => {
                    if let Some(r) = line.trim_end().strip_prefix('@') {
                        return r.to_string();
                    }
                }
            }
        }
    }

    /// Next report, which must start with `prefix`; returns the rest, trimmed.
    pub fn expect(&mut self, prefix: &str) -> String {
        let r = self.next_report();
        match r.strip_prefix(prefix) {
            Some(rest) => rest.trim().to_string(),
            None => panic!(
                "child {}: expected a report starting with {prefix:?}, got {r:?}",
                self.name
            ),
        }
    }

    /// Send a command and return the next report.
    pub fn ask(&mut self, line: &str) -> String {
        self.send(line);
        self.next_report()
    }

    /// SIGKILL the child now and reap it.
    pub fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.reap()
    }

    /// Close the child's stdin, wait for it (bounded by the watchdog) and
    /// require a successful exit.
    pub fn finish(mut self) {
        self.stdin = None;
        let status = self.reap();
        assert!(status.success(), "child {} failed: {status:?}", self.name);
    }

    fn reap(&mut self) -> ExitStatus {
        let status = self.child.wait().expect("wait for child");
        self.reaped = true;
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
        assert!(
            !self.timed_out.load(Ordering::SeqCst),
            "child {} outlived the {WATCHDOG:?} watchdog and was killed",
            self.name
        );
        status
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
            if let Some(w) = self.watchdog.take() {
                let _ = w.join();
            }
        }
    }
}

fn watchdog(pidfd: OwnedFd, timed_out: Arc<AtomicBool>) {
    let deadline = Instant::now() + WATCHDOG;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            timed_out.store(true, Ordering::SeqCst);
            let _ = rustix::process::pidfd_send_signal(&pidfd, rustix::process::Signal::KILL);
            return;
        }
        let ts = rustix::time::Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
        if let Ok(n) = poll(&mut fds, Some(&ts)) {
            if n > 0 {
                return; // exited
            }
        }
    }
}

/// A pidfd for our own child `pid` (it cannot be recycled before we reap it).
fn open_pidfd(pid: i32) -> std::io::Result<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid)
        .ok_or_else(|| std::io::Error::from(rustix::io::Errno::SRCH))?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).map_err(Into::into)
}

// ------------------------------------------------------------------- misc

/// Why this test binary cannot run a child as `uid`, if it cannot: not
/// root, or the binary (or a directory above it) is closed to other users.
/// Tests print `skipped: <reason>` and return; when this says nothing, a
/// child that then fails to start fails the test.
pub fn exec_as_blocker(uid: u32) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() {
        return Some(format!("needs root to run a child as uid {uid}"));
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return Some(format!("cannot find the test binary: {e}")),
    };
    for (path, bit, what) in std::iter::once((exe.as_path(), 0o001, "executable"))
        .chain(exe.ancestors().skip(1).map(|a| (a, 0o001, "searchable")))
    {
        match std::fs::metadata(path) {
            Ok(m) if m.permissions().mode() & bit != 0 => {}
            Ok(m) => {
                return Some(format!(
                    "{} is not {what} by other users (mode {:o}); build in a world-readable directory to run this test",
                    path.display(),
                    m.permissions().mode() & 0o7777
                ))
            }
            Err(e) => return Some(format!("cannot stat {}: {e}", path.display())),
        }
    }
    None
}

/// A unique socket path in the temp dir, removed on drop.
pub struct SockPath(PathBuf);

impl SockPath {
    pub fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("zcio-{}-{n}-{tag}.sock", std::process::id()));
        let _ = std::fs::remove_file(&p);
        SockPath(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path as a child argument.
    pub fn arg(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }
}

impl Drop for SockPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The deterministic content of byte `j` of message `i`.
pub fn pattern(i: u64, j: u64) -> u8 {
    let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x ^ (x >> 29) ^ (j >> 12)) as u8
}

/// Fill `buf` with message `i`'s pattern starting at logical offset `from`.
pub fn fill(buf: &mut [u8], i: u64, from: u64) {
    for (k, b) in buf.iter_mut().enumerate() {
        *b = pattern(i, from + k as u64);
    }
}

/// Index of the first byte that differs from message `i`'s pattern.
pub fn first_mismatch(bytes: &[u8], i: u64, from: u64) -> Option<usize> {
    bytes
        .iter()
        .enumerate()
        .position(|(k, &b)| b != pattern(i, from + k as u64))
}

/// FNV-1a, folded over chunks.
pub fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    if h == 0 {
        h = 0xcbf2_9ce4_8422_2325;
    }
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A small pool that keeps tests quick.
pub fn small_pool(name: &str, chunk_size: usize, max_chunks: usize) -> Pool {
    Pool::new(PoolConfig {
        name: name.into(),
        chunk_size,
        max_chunks,
        populate: false,
        quick_list_cap: 8,
        ..PoolConfig::default()
    })
}

/// A one-buffer message holding `bytes`.
pub fn msg_of(pool: &Pool, bytes: &[u8]) -> zcio::Msg {
    let mut b = pool.alloc_timeout(bytes.len().max(1), STEP).expect("alloc");
    b.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
    b.truncate(bytes.len());
    zcio::Msg::from(b.freeze().expect("freeze"))
}

/// Reclaim on `ch` until `done()` holds, sleeping briefly between rounds;
/// panics (with `what`) after [`STEP`].
pub fn settle(ch: &Channel, what: &str, done: impl FnMut() -> bool) {
    assert!(
        try_settle(ch, STEP, done),
        "{what}: did not settle within {STEP:?}"
    );
}

/// As [`settle`], returning whether `done()` was reached within `bound`.
pub fn try_settle(ch: &Channel, bound: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    loop {
        ch.reclaim();
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Poll `cond` (briefly sleeping) until it holds; panics after [`STEP`].
pub fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + STEP;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "{what}: not reached within {STEP:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Why `unshare ARGS true` fails here (not root, namespaces refused), if it
/// does: a test that needs those namespaces prints `skipped: <reason>`.
pub fn cannot_unshare(args: &[&str]) -> Option<String> {
    match Command::new("unshare")
        .args(args)
        .arg("true")
        .stdin(Stdio::null())
        .output()
    {
        Err(e) => Some(format!("unshare not runnable: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "unshare {} refused: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}
