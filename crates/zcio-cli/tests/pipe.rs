//! `zcio ring …` and `zcio pipe put|get` as real processes.
//!
//! Every test gets its own ring directory (`ZCIO_RING_DIR`) and runs each
//! child under a watchdog: a child still running at the deadline is killed
//! and the test fails. Nothing asserts on timing.

mod common;

use std::time::Instant;

use common::*;
use serde_json::Value;

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

#[test]
fn killed_reader_is_evicted() {
    let dir = RingDir::new("killreader");
    let opts = ["--size", "256KiB"];
    let victim = dir.get("kr", &opts);
    common::killed_reader_is_evicted(&dir, "kr", &opts, victim);
}

#[test]
fn killed_producer_is_reported() {
    let dir = RingDir::new("killproducer");
    let put = dir.cmd(&["pipe", "put", "kp", "--size", "256KiB"]);
    common::killed_producer_is_reported(&dir, "kp", &["--size", "256KiB"], put);
}

/// A producer with empty input still ends the stream of a reader that was
/// waiting before it came.
#[test]
fn empty_input_ends_the_stream() {
    let dir = RingDir::new("empty");
    let deadline = Instant::now() + WATCHDOG;
    // `get` waits for the ring to appear; `put` creates it and waits for
    // the reader (--readers 1 by default).
    let get = Proc::spawn("pipe get e", dir.get("e", &[]));
    assert_ok("put", &dir.run(&["pipe", "put", "e"]));
    let o = get.finish(deadline);
    assert_ok("get", &o);
    assert!(o.stdout.is_empty());
}
