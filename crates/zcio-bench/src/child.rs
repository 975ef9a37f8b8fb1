//! Benchmark child processes, the generic mechanics: this binary
//! re-executed as `<exe> <hidden argument> '<json spec>'`, spawned with its
//! stdout piped, waited for with a bound (and killed when it passes), and,
//! in the child, its spec read and served. A child runs one side of one
//! measurement and, if it is a measuring side, prints one JSON line with its
//! result on stdout.
//!
//! Which family a hidden argument belongs to (transfer's `__bench-child`,
//! ring's `__bench-ring-child`, …) is not known here: each family defines
//! its argument, spec and child entry point, and [`crate::roles`] (the top
//! of the crate) picks the family by the argument.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The spec of a child that runs one task of a family (`T`, that family's
/// task enum): the task, the CPU to pin to and a bound on its work.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Spec<T> {
    /// What to do.
    pub task: T,
    /// CPU to pin to (inherited by what it executes).
    pub cpu: Option<usize>,
    /// Bound on the child's work.
    pub timeout_ms: u64,
}

impl<T> Spec<T> {
    /// The child's bound.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// The child's deadline, from its start.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.timeout()
    }
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

/// [`spawn_self`] with `spec` as the JSON argument.
pub fn spawn<S: Serialize>(arg: &str, spec: &S) -> Result<Child, String> {
    spawn_self(arg, &json(spec)?)
}

/// `spec` as one line of JSON.
pub fn json<S: Serialize>(spec: &S) -> Result<String, String> {
    serde_json::to_string(spec).map_err(|e| e.to_string())
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
pub fn read_spec<T: DeserializeOwned>(
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

/// A child's entry point for a family (`args` are the arguments after its
/// hidden argument `arg`): read the spec (pinned to the CPU `cpu` picks),
/// `run` it and print its result line, if it has one, on stdout. On an
/// error, `what` names the child in the message on stderr. Returns the
/// process exit code (2: missing or bad spec, 1: the run failed).
pub fn serve<S: DeserializeOwned>(
    arg: &str,
    args: &[String],
    cpu: impl FnOnce(&S) -> Option<usize>,
    run: impl FnOnce(&S) -> Result<Option<String>, String>,
    what: impl FnOnce(&S) -> String,
) -> i32 {
    let spec: S = match read_spec(arg, args, cpu) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match run(&spec) {
        Ok(Some(line)) => {
            println!("{line}");
            0
        }
        Ok(None) => 0,
        Err(e) => {
            eprintln!("{}: {e}", what(&spec));
            1
        }
    }
}

/// A result as its line: compact JSON (empty if it cannot be serialized).
pub fn line<R: Serialize>(r: &R) -> String {
    serde_json::to_string(r).unwrap_or_default()
}
