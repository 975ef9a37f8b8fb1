//! The registry of live objects (issue 37) when owners die of SIGKILL, across
//! real processes: a child registers an entry of each kind in turn and is
//! killed; the next listing reports the entry dead and removes it, so the run
//! directory is left empty (20 rounds). Also inside a PID namespace of its
//! own: the entry carries the owner's pid as the owner sees it and its
//! namespace, and its death is still seen, with no pid numbers involved.
//!
//! Then the real objects: a child owns a ring producer, a ring consumer, a
//! rendezvous listener or a splice association (each registers itself in
//! `$ZCIO_RUN_DIR`), is killed, and the next listing leaves nothing behind
//! (20 rounds of each kind); and a child's producer entry shows exactly
//! the blocks and bytes it wrote.
//!
//! The registry lives in `zcio-sys` and is not re-exported by `zcio` (tools
//! use it; applications do not), so this suite names `zcio_sys` directly.
//! Every test has its own run directory; children are re-executions of this
//! binary under a watchdog.

mod common;

use std::path::{Path, PathBuf};

use common::Kid;
use zcio_sys::registry::schema::producer;
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

/// The objects a child owns for real (what registers is the object itself).
const OBJECTS: &[(&str, Kind)] = &[
    ("ring-producer", Kind::RingProducer),
    ("ring-consumer", Kind::RingConsumer),
    ("rendezvous", Kind::Rendezvous),
    #[cfg(feature = "splice")]
    ("association", Kind::Association),
];

/// A child owning `object` named after `round`, with its run directory
/// (and its rings' directory) in `run`.
fn object_owner(run: &Run, object: &str, round: usize, extra: &[(&str, String)]) -> Kid {
    let rings = run.0.join("rings");
    std::fs::create_dir_all(&rings).expect("rings directory");
    let mut args = vec![
        ("OBJECT", object.to_string()),
        ("ROUND", round.to_string()),
        ("WORK", run.arg()),
    ];
    args.extend(extra.iter().cloned());
    let mut kid = Kid::spawn_with("child_object_owner", "object-owner", &args, |c| {
        c.env("ZCIO_RUN_DIR", run.0.join("entries"));
        c.env("ZCIO_RING_DIR", &rings);
    });
    kid.expect("ready");
    kid
}

#[test]
fn every_kind_of_object_killed_twenty_times_leaves_no_entry() {
    for &(object, kind) in OBJECTS {
        let run = Run::new(&format!("objects-{object}"));
        let entries = run.0.join("entries");
        std::fs::create_dir_all(&run.0).expect("work directory");
        let dir = RunDir::open(&entries).expect("run directory");
        for round in 0..20 {
            let mut kid = object_owner(&run, object, round, &[]);
            let live = dir.list().expect("list");
            let ours: Vec<_> = live.entries.iter().filter(|e| e.kind == kind).collect();
            assert_eq!(ours.len(), 1, "{object} round {round}: {:?}", live.entries);
            assert_eq!(ours[0].state, State::Live);
            assert_eq!(ours[0].pid, kid.pid());
            assert!(kid.kill().code().is_none(), "killed by a signal");
            let dead = dir.list().expect("list");
            assert!(
                dead.entries.iter().all(|e| e.state == State::Dead),
                "{object} round {round}: {:?}",
                dead.entries
            );
            assert!(dead.invalid.is_empty(), "{:?}", dead.invalid);
            let left = dir.list().expect("list");
            assert!(
                left.entries.is_empty() && left.invalid.is_empty(),
                "{object} round {round}: leftovers {:?}",
                left
            );
            assert_eq!(
                std::fs::read_dir(&entries).map_or(0, |d| d.count()),
                0,
                "{object} round {round}: files left"
            );
        }
    }
}

#[test]
fn a_producer_entry_shows_exactly_what_its_owner_wrote() {
    const BLOCKS: u64 = 1234;
    const SIZE: u64 = 100;
    let run = Run::new("written");
    std::fs::create_dir_all(&run.0).expect("work directory");
    let mut kid = object_owner(
        &run,
        "ring-writer",
        0,
        &[("BLOCKS", BLOCKS.to_string()), ("SIZE", SIZE.to_string())],
    );
    // The child reported "ready" after its last write: read it now.
    let dir = RunDir::open(&run.0.join("entries")).expect("run directory");
    let l = dir.list().expect("list");
    let e = l
        .entries
        .iter()
        .find(|e| e.kind == Kind::RingProducer && e.name == "writer-0")
        .unwrap_or_else(|| panic!("no producer entry in {:?}", l.entries));
    assert_eq!(e.state, State::Live);
    assert_eq!(e.pid, kid.pid());
    assert_eq!(e.stats[producer::BLOCKS], BLOCKS);
    assert_eq!(e.stats[producer::BYTES], BLOCKS * SIZE);
    assert_eq!(e.stats[producer::HEAD], BLOCKS * SIZE, "a continuous ring");
    assert_eq!(e.stats[producer::CAPACITY_BYTES], 1 << 20);
    assert_eq!(kid.ask("drop"), "dropped");
    kid.finish();
    assert!(dir.list().expect("list").entries.is_empty());
}

#[test]
#[ignore = "child process entry point"]
fn child_object_owner() {
    if common::child_role("object-owner").is_none() {
        return;
    }
    let object = common::arg("OBJECT");
    let round = common::arg("ROUND");
    let work = std::path::PathBuf::from(common::arg("WORK"));
    let ring = |name: &str| {
        zcio::ring::Options::new()
            .size(1 << 20)
            .create_or_open(name)
            .expect("ring")
    };
    let held: Box<dyn std::any::Any> = match object.as_str() {
        "ring-producer" => {
            Box::new(zcio::ring::Producer::attach(ring(&format!("p-{round}"))).unwrap())
        }
        "ring-consumer" => Box::new(
            zcio::ring::Consumer::attach(ring(&format!("c-{round}")), zcio::ring::Start::Newest)
                .unwrap(),
        ),
        "rendezvous" => Box::new(
            zcio::rendezvous::RendezvousListener::bind(work.join(format!("rdv-{round}.sock")))
                .unwrap(),
        ),
        #[cfg(feature = "splice")]
        "association" => {
            use zcio::splice::{Association, IoObject};
            let open = |tag: &str| {
                let p = work.join(format!("{tag}-{round}"));
                std::fs::write(&p, b"some bytes").unwrap();
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&p)
                    .unwrap();
                IoObject::new(f.into(), p.display().to_string()).unwrap()
            };
            Box::new(Association::new(open("src"), open("dst")).unwrap())
        }
        "ring-writer" => {
            let blocks: u64 = common::arg("BLOCKS").parse().unwrap();
            let size: usize = common::arg("SIZE").parse().unwrap();
            let mut p = zcio::ring::Producer::attach(ring(&format!("writer-{round}"))).unwrap();
            for i in 0..blocks {
                assert_eq!(p.write(&vec![i as u8; size]).unwrap(), size);
            }
            Box::new(p)
        }
        other => panic!("unknown object {other}"),
    };
    common::report("ready");
    let mut held = Some(held);
    while let Some(cmd) = common::command() {
        if cmd == "drop" {
            held = None;
            common::report("dropped");
        }
    }
    drop(held);
}
