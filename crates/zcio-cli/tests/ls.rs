//! `zcio ls` with the real binary: a live ring producer (`zcio pipe put`)
//! is listed live with its pid and mode; killed with SIGKILL, it is listed
//! once as dead and its entry removed, leaving the run directory empty.
//! An empty or unsafe run directory is reported as such. Children run
//! under a watchdog; nothing asserts on timing.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

struct Run {
    rings: RingDir,
    run: std::path::PathBuf,
}

impl Run {
    fn new(tag: &str) -> Self {
        let rings = RingDir::new(tag);
        let run = rings.0.join("run");
        Run { rings, run }
    }
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.rings.cmd(args);
        c.env("ZCIO_RUN_DIR", &self.run);
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        let mut c = self.cmd(args);
        c.stdin(Stdio::null());
        Proc::spawn(&args.join(" "), c).finish(Instant::now() + WATCHDOG)
    }
    fn ls(&self) -> Vec<Value> {
        let o = self.run(&["ls", "--json"]);
        assert!(
            o.status.success(),
            "ls: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: Value = serde_json::from_slice(&o.stdout).expect("ls --json is JSON");
        v.as_array().expect("an array").clone()
    }
    fn files(&self) -> usize {
        std::fs::read_dir(&self.run).map_or(0, |d| d.count())
    }
}

#[test]
fn a_killed_producer_is_listed_dead_once_and_leaves_nothing() {
    let r = Run::new("ls-kill");
    let o = r.run(&["ls"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no zcio objects in"));
    let mode = std::fs::metadata(&r.run)
        .expect("ls made the run directory")
        .permissions();
    assert_eq!(mode.mode() & 0o777, 0o700);

    let o = r.run(&["ring", "create", "r", "--size", "64KiB", "--mode", "0640"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut c = r.cmd(&["pipe", "put", "r", "--readers", "0"]);
    c.stdin(Stdio::piped());
    let mut put = Proc::spawn("pipe put r", c);
    let _stdin = put.child.stdin.take().expect("stdin piped");
    let deadline = Instant::now() + WATCHDOG;
    let live = loop {
        let v = r.ls();
        if let Some(e) = v.iter().find(|e| e["kind"] == "producer") {
            break e.clone();
        }
        assert!(
            Instant::now() < deadline,
            "watchdog: the producer never registered"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(live["name"], "r");
    assert_eq!(live["state"], "live");
    assert_eq!(live["pid"].as_u64(), Some(u64::from(put.child.id())));
    assert_eq!(live["mode"], "0440", "the read bits of the ring's 0640");
    assert_eq!(live["same_pid_ns"], true);
    let table = r.run(&["ls"]);
    let t = String::from_utf8_lossy(&table.stdout);
    let header: Vec<&str> = t.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        header,
        ["kind", "name", "pid", "state", "uid", "mode"],
        "{t}"
    );
    assert!(
        t.lines()
            .any(|l| l.starts_with("producer") && l.contains(" live ")),
        "{t}"
    );

    put.kill9();
    let dead = r.ls();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["state"], "dead");
    assert_eq!(r.files(), 0, "the dead entry was removed");
    assert!(r.ls().is_empty(), "shown once");
}

#[test]
fn an_unsafe_run_directory_is_refused_with_advice() {
    let r = Run::new("ls-unsafe");
    std::fs::create_dir(&r.run).expect("mkdir");
    std::fs::set_permissions(&r.run, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let o = r.run(&["ls"]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.starts_with("zcio: error: "), "{e}");
    assert!(e.contains("chmod go-w"), "{e}");
}

#[test]
fn objects_work_when_they_cannot_register() {
    // A run directory the registry refuses: the ring's ends still work.
    let r = Run::new("ls-noreg");
    std::fs::create_dir(&r.run).expect("mkdir");
    std::fs::set_permissions(&r.run, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let mut c = r.cmd(&["pipe", "put", "q", "--readers", "0", "--size", "64KiB"]);
    c.stdin(Stdio::piped());
    let mut put = Proc::spawn("pipe put q", c);
    let mut stdin = put.child.stdin.take().expect("stdin piped");
    std::io::Write::write_all(&mut stdin, b"hello\n").expect("feed");
    drop(stdin);
    let o = put.finish(Instant::now() + WATCHDOG);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r.files(), 0, "nothing registered");
}

#[test]
fn help_shows_examples() {
    let o = Run::new("ls-help").run(&["ls", "--help"]);
    assert!(o.status.success());
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(
        h.contains("Examples:") && h.contains("zcio ls --json"),
        "{h}"
    );
}
