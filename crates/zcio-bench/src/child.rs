//! Benchmark child processes: this binary re-executed as
//! `<exe> __bench-child '<json spec>'`. A child runs one side of one
//! measurement and, if it is the measuring side, prints one JSON line with
//! its result on stdout.

use std::io::{BufRead, BufReader};
use std::os::fd::RawFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The hidden first argument that makes the binary a benchmark child.
pub const CHILD_ARG: &str = "__bench-child";

/// How the zcio originator gets its buffers.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocKind {
    /// Path pool, volatile.
    CachedVolatile,
    /// Path pool, volatile, sized for a two-hop path (originator →
    /// forwarder → receiver): twice the buffers in flight.
    CachedVolatilePath2,
    /// Path pool, secured (sealed single-use regions).
    CachedSecured,
    /// Fresh region per buffer, volatile.
    UncachedVolatile,
    /// Fresh region per buffer, sealed.
    UncachedSecured,
}

/// One side of one measurement.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Role {
    /// zcio originator: connect to `path`, send.
    ZcioSend { path: String, alloc: AllocKind },
    /// zcio receiver: listen at `path`, receive, measure.
    ZcioRecv { path: String, expect_secured: bool },
    /// zcio forwarder: listen at `listen`, forward to `connect`.
    ZcioFwd { listen: String, connect: String },
    /// Copy originator: write messages to inherited fd.
    CopySend { fd: RawFd },
    /// Copy receiver: read messages from inherited fd, measure.
    CopyRecv { fd: RawFd },
    /// Copy forwarder: read from `input`, write to `output`.
    CopyFwd { input: RawFd, output: RawFd },
    /// iceoryx2 publisher.
    IoxPub { service: String },
    /// iceoryx2 subscriber, measures.
    IoxSub { service: String },
    /// In-process memcpy reference, measures.
    Memcpy,
    /// A side of the transfer benchmark's ping-pong (latency) part.
    Ping {
        /// Transport.
        kind: crate::transfer::pingpong::Kind,
        /// Client (measures) or server.
        client: bool,
        /// Socket path / service name base.
        path: String,
        /// Inherited read fd (pipe, socket; else -1).
        rfd: RawFd,
        /// Inherited write fd (pipe, socket; else -1).
        wfd: RawFd,
        /// Bound on the measured round trips' time, ms.
        budget_ms: u64,
    },
    /// A side of `zcio-bench ring` (all its parameters are in the task;
    /// the spec's size/warmup/count are unused). Prints a JSON array of
    /// [`crate::ring::Report`]s.
    Ring(crate::ring::Task),
}

/// Everything a child needs.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct ChildSpec {
    /// What to do.
    pub role: Role,
    /// Message size in bytes.
    pub size: usize,
    /// Unmeasured messages first.
    pub warmup: u64,
    /// Measured messages.
    pub count: u64,
    /// CPU to pin to.
    pub cpu: Option<usize>,
    /// Overall bound for the child's work.
    pub timeout_ms: u64,
}

/// What a measuring child reports.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Measured {
    /// Nanoseconds for `msgs` messages.
    pub elapsed_ns: u64,
    /// Messages in the measured interval.
    pub msgs: u64,
    /// Futex wake calls made by the measuring side (zcio only; else 0).
    pub wakes: u64,
    /// CPU time (user + system, `getrusage(RUSAGE_SELF)`) of this side's
    /// process over its `msgs` measured messages.
    #[serde(default)]
    pub cpu_ns: u64,
    /// One-way latency percentiles (a ping-pong client only).
    #[serde(default)]
    pub latency: Option<crate::transfer::pingpong::Latency>,
}

impl Measured {
    /// What a side that only sends or forwards reports: its CPU time over
    /// `msgs` messages.
    pub fn cpu_only(msgs: u64, cpu_ns: u64) -> Self {
        Self {
            elapsed_ns: 0,
            msgs,
            wakes: 0,
            cpu_ns,
            latency: None,
        }
    }
}

/// Spawn a child for `spec`. Its stdout is piped (result line); stderr is
/// inherited so errors show up.
pub fn spawn(spec: &ChildSpec) -> Result<Child, String> {
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    spawn_self(CHILD_ARG, &json)
}

/// Re-execute this binary as `arg json` (a benchmark child): stdout piped
/// for its result line, stderr inherited so its errors show up.
pub fn spawn_self(arg: &str, json: &str) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    Command::new(exe)
        .arg(arg)
        .arg(json)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn benchmark child: {e}"))
}

/// Reads a child's stdout while it runs (a result line longer than the
/// pipe's buffer would otherwise block the child in `write` until the
/// bound passes): its first line, once the child closes stdout.
struct Drain(Option<std::thread::JoinHandle<String>>);

impl Drain {
    fn start(child: &mut Child) -> Self {
        Drain(child.stdout.take().map(|out| {
            std::thread::spawn(move || {
                let mut line = String::new();
                let mut r = BufReader::new(out);
                let _ = r.read_line(&mut line);
                // Keep draining: a child that prints more must not block.
                let _ = std::io::copy(&mut r, &mut std::io::sink());
                line
            })
        }))
    }

    /// The result line of an exited child (empty if it printed none).
    fn line(&mut self) -> String {
        self.0
            .take()
            .and_then(|h| h.join().ok())
            .map(|l| l.trim().to_string())
            .unwrap_or_default()
    }
}

fn failed(what: &str, status: ExitStatus) -> String {
    if status.code().is_some() {
        format!("{what} exited with {status} (its error is printed above)")
    } else {
        format!("{what} was terminated ({status})")
    }
}

/// Wait for a child with a bound; kill it when the bound passes. Returns
/// its result line, if it printed one.
pub fn wait(mut child: Child, timeout: Duration, what: &str) -> Result<Option<Measured>, String> {
    let start = Instant::now();
    let mut drain = Drain::start(&mut child);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let line = drain.line();
                if !status.success() {
                    return Err(failed(what, status));
                }
                if line.is_empty() {
                    return Ok(None);
                }
                return serde_json::from_str(&line)
                    .map(Some)
                    .map_err(|e| format!("{what}: bad result line: {e}"));
            }
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what} did not finish within {timeout:?}; killed"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("{what}: wait: {e}")),
        }
    }
}

/// Children of one measurement, waited for together. Children still
/// running when the group is dropped (a spawn failed, a sibling failed,
/// the bound passed) are killed and reaped.
#[derive(Default)]
pub struct Group {
    kids: Vec<(Child, String, Drain)>,
}

impl Group {
    /// An empty group.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a spawned child, named `what` in messages.
    pub fn push(&mut self, mut child: Child, what: impl Into<String>) {
        let drain = Drain::start(&mut child);
        self.kids.push((child, what.into(), drain));
    }

    /// Wait (at most `timeout` in all) until every child has exited; their
    /// result lines in the order they were pushed. The first child to fail
    /// fails the group at once (the others are killed).
    pub fn wait_all(mut self, timeout: Duration) -> Result<Vec<String>, String> {
        let start = Instant::now();
        let mut lines: Vec<Option<String>> = vec![None; self.kids.len()];
        loop {
            let mut running = Vec::new();
            for (i, (child, what, drain)) in self.kids.iter_mut().enumerate() {
                if lines[i].is_some() {
                    continue;
                }
                match child.try_wait() {
                    Ok(Some(status)) if status.success() => lines[i] = Some(drain.line()),
                    Ok(Some(status)) => return Err(failed(what, status)),
                    Ok(None) => running.push(what.clone()),
                    Err(e) => return Err(format!("{what}: wait: {e}")),
                }
            }
            if running.is_empty() {
                self.kids.clear();
                return Ok(lines.into_iter().map(Option::unwrap_or_default).collect());
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "{} did not finish within {timeout:?}; killed",
                    running.join(", ")
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for (child, _, _) in &mut self.kids {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// The JSON spec a benchmark child got as its first argument (after
/// `arg`), with the child pinned to the CPU `cpu` picks from it; the exit
/// code on a missing or bad spec.
pub fn read_spec<T: serde::de::DeserializeOwned>(
    arg: &str,
    args: &[String],
    cpu: impl FnOnce(&T) -> Option<usize>,
) -> Result<T, i32> {
    let Some(json) = args.first() else {
        eprintln!("{arg}: missing spec");
        return Err(2);
    };
    let spec: T = serde_json::from_str(json).map_err(|e| {
        eprintln!("{arg}: bad spec: {e}");
        2
    })?;
    if let Some(cpu) = cpu(&spec) {
        if let Err(e) = crate::affinity::pin(cpu) {
            eprintln!("warning: {e}");
        }
    }
    Ok(spec)
}

/// Entry point of a child (`args` are the arguments after `CHILD_ARG`).
/// Returns the process exit code.
pub fn child_main(args: &[String]) -> i32 {
    let spec: ChildSpec = match read_spec(CHILD_ARG, args, |s: &ChildSpec| s.cpu) {
        Ok(s) => s,
        Err(code) => return code,
    };
    if let Role::Ring(task) = &spec.role {
        let timeout = Duration::from_millis(spec.timeout_ms);
        return match crate::ring::run_task(task, timeout) {
            Ok(reports) => {
                println!("{}", serde_json::to_string(&reports).unwrap_or_default());
                0
            }
            Err(e) => {
                eprintln!("benchmark child {task:?} failed: {e}");
                1
            }
        };
    }
    match crate::transfer::run_role(&spec) {
        Ok(Some(m)) => {
            println!("{}", serde_json::to_string(&m).unwrap_or_default());
            0
        }
        Ok(None) => 0,
        Err(e) => {
            eprintln!("benchmark child {:?} failed: {e}", spec.role);
            1
        }
    }
}
