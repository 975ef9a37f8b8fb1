//! The registry of live objects (issue 37) when owners die of SIGKILL, across
//! real processes: a child registers an entry of each kind in turn and is
//! killed; the next listing reports the entry dead and removes it, so the run
//! directory is left empty (20 rounds). Also inside a PID namespace of its
//! own: the entry carries the owner's pid as the owner sees it and its
//! namespace, and its death is still seen, with no pid numbers involved.
//!
//! The registry lives in `zcio-sys` and is not re-exported by `zcio` (tools
//! use it; applications do not), so this suite names `zcio_sys` directly.
//! Every test has its own run directory; children are re-executions of this
//! binary under a watchdog.

mod common;

use std::path::{Path, PathBuf};

use common::Kid;
use zcio_sys::registry::{Kind, RunDir, State};

/// A private run directory, removed on drop.
struct Run(PathBuf);

impl Run {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("zcio-registry-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Run(p)
    }
    fn files(&self) -> usize {
        std::fs::read_dir(&self.0).map_or(0, |d| d.count())
    }
    fn arg(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn owner(run: &Run, prefix: Option<&[&str]>, kind: Kind, name: &str) -> Kid {
    let args = [
        ("DIR", run.arg()),
        ("KIND", (kind as u32).to_string()),
        ("NAME", name.to_string()),
    ];
    let mut kid = match prefix {
        None => Kid::spawn("child_owner", "registry-owner", &args),
        Some(p) => Kid::try_spawn_under(p, "child_owner", "registry-owner", &args, |_| {})
            .expect("spawn in a PID namespace"),
    };
    kid.expect("registered");
    kid
}

#[test]
fn a_killed_owner_is_reported_dead_and_its_entry_removed() {
    let run = Run::new("kill");
    let dir = RunDir::open(&run.0).expect("run directory");
    for round in 0..20 {
        let kind = Kind::ALL[round % Kind::ALL.len()];
        let name = format!("victim-{round}");
        let mut kid = owner(&run, None, kind, &name);
        let pid = kid.pid();
        let live = dir.list().expect("list");
        assert_eq!(live.entries.len(), 1, "round {round}: {:?}", live.entries);
        let e = &live.entries[0];
        assert_eq!(
            (e.kind, e.name.as_str(), e.state),
            (kind, name.as_str(), State::Live)
        );
        assert_eq!(e.pid, pid, "our own PID namespace: the same number");
        assert_eq!(e.stats[0], 1000 + round as u64, "the owner's counter");
        // Reaped: the kernel has closed the child's files, and its lock with them.
        assert!(kid.kill().code().is_none(), "killed by a signal");
        assert_eq!(run.files(), 1, "nothing removed it yet");
        let dead = dir.list().expect("list");
        assert_eq!(dead.entries.len(), 1, "round {round}");
        assert_eq!(dead.entries[0].state, State::Dead, "round {round}");
        assert!(dead.invalid.is_empty(), "{:?}", dead.invalid);
        assert_eq!(run.files(), 0, "round {round}: the dead entry is gone");
        assert!(
            dir.list().expect("list").entries.is_empty(),
            "reported once"
        );
    }
}

#[test]
fn an_owner_that_closes_leaves_nothing() {
    let run = Run::new("close");
    let dir = RunDir::open(&run.0).expect("run directory");
    let mut kid = owner(&run, None, Kind::Channel, "/tmp/x.sock");
    assert_eq!(dir.list().expect("list").entries.len(), 1);
    assert_eq!(kid.ask("drop"), "dropped");
    assert_eq!(run.files(), 0);
    kid.finish();
    assert!(dir.list().expect("list").entries.is_empty());
}

#[test]
fn an_owner_in_its_own_pid_namespace_is_seen_and_its_death_too() {
    let ns = ["unshare", "--pid", "--fork", "--kill-child"];
    if let Some(why) = common::cannot_unshare(&ns[1..]) {
        eprintln!("skipped: {why}");
        return;
    }
    let run = Run::new("pidns");
    let dir = RunDir::open(&run.0).expect("run directory");
    let ours = std::fs::metadata("/proc/self/ns/pid").map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.ino()
    });
    for round in 0..3 {
        let mut kid = owner(&run, Some(&ns), Kind::RingProducer, "ns-ring");
        let l = dir.list().expect("list");
        assert_eq!(l.entries.len(), 1);
        let e = &l.entries[0];
        assert_eq!(e.state, State::Live);
        assert_ne!(e.pid, kid.pid(), "the pid as the owner sees it, not ours");
        if let Ok(ours) = ours {
            assert_ne!(e.pid_ns, ours, "another PID namespace");
        }
        kid.kill();
        // The owner dies when `unshare` does (--kill-child), a moment later.
        common::eventually("the owner's death", || {
            dir.list()
                .expect("list")
                .entries
                .iter()
                .any(|e| e.state == State::Dead)
        });
        assert_eq!(run.files(), 0, "round {round}");
    }
}

#[test]
#[ignore = "child process entry point"]
fn child_owner() {
    if common::child_role("registry-owner").is_none() {
        return;
    }
    let dir = RunDir::open(Path::new(&common::arg("DIR"))).expect("run directory");
    let kind = common::arg("KIND")
        .parse()
        .ok()
        .and_then(Kind::from_code)
        .expect("kind");
    let name = common::arg("NAME");
    let reg = dir.register(kind, &name, 0o600).expect("register");
    let round: u64 = name
        .strip_prefix("victim-")
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    reg.set(0, 1000 + round);
    common::report("registered");
    let mut reg = Some(reg);
    while let Some(cmd) = common::command() {
        if cmd == "drop" {
            reg = None;
            common::report("dropped");
        }
    }
    drop(reg);
}
