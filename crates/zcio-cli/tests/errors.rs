//! The `zcio` command on bad input and on failure, as a new user meets
//! them: limits checked before anything is allocated, one error prefix and
//! consistent exit statuses (2: the command line, 1: a failure at run
//! time), failures that readers can tell from an end of stream, no rings
//! left behind by a mistyped name, and readers and a restarted writer that
//! meet. Children run under a watchdog; nothing asserts on timing.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Instant;

use common::*;

/// Exit status for the command line being wrong.
const USAGE: i32 = 2;

/// `o` failed with exit status `code` and a single `zcio: error: ` line
/// (plus clap's hint) containing every one of `want`.
fn assert_error(what: &str, o: &Output, code: i32, want: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{what}: {e}");
    assert!(e.starts_with("zcio: error: "), "{what}: {e}");
    for w in want {
        assert!(e.contains(w), "{what}: {w:?} not in: {e}");
    }
    for bad in ["Length {", "Magic", "Os(", "issue #"] {
        assert!(!e.contains(bad), "{what}: {bad:?} in: {e}");
    }
}

fn rings(dir: &RingDir) -> Vec<String> {
    let o = dir.run(&["ring", "ls", "--format", "json"]);
    assert_ok("ring ls", &o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("ls json");
    v.as_array()
        .expect("array")
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn sizes_and_counts_are_checked_before_anything_is_allocated() {
    let dir = RingDir::new("limits");
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["ring", "create", "big", "--size", "1TiB"],
            &["1 TiB is above the maximum of 16 GiB"],
        ),
        (
            &[
                "ring",
                "create",
                "big",
                "--layout",
                "i",
                "--entries",
                "1000",
            ],
            &["1000 is not a power of two (try 512 or 1024)"],
        ),
        (
            &["pipe", "put", "big", "--size", "1TiB"],
            &["above the maximum"],
        ),
        (&["pipe", "put", "many", "--readers", "65"], &["at most 64"]),
        (
            &["pipe", "get", "x", "--timeout=-1"],
            &["non-negative number of seconds"],
        ),
    ];
    for (args, want) in cases {
        let o = dir.run(args);
        assert_error(&args.join(" "), &o, USAGE, want);
    }
    assert!(rings(&dir).is_empty(), "rings left: {:?}", rings(&dir));
}

/// A negative size or count given after its option (`--size -1M`) is read
/// as that option's value, not as an unknown option `-1`: the error names
/// the whole value, says it is negative, and nothing is created.
#[test]
fn negative_values_are_named_and_create_nothing() {
    let dir = RingDir::new("negative");
    let path = |n: &str| dir.0.join(n).to_string_lossy().into_owned();
    std::fs::write(path("a"), b"data").expect("write source");
    let cases: &[(&[&str], &str)] = &[
        (&["ring", "create", "bad", "--size", "-1M"], "-1M"),
        (&["cp", &path("a"), &path("o"), "--increment", "-5"], "-5"),
        (&["cp", &path("a"), &path("o"), "--max", "-1G"], "-1G"),
        (&["pipe", "put", "bad", "--readers", "-1"], "-1"),
        (&["pipe", "get", "bad", "--timeout", "-2"], "-2"),
        (
            &[
                "gateway",
                "--udp",
                "127.0.0.1:0",
                "--to",
                "127.0.0.1:9",
                "--batch",
                "-4",
            ],
            "-4",
        ),
        (
            &["bridge", "import", "k", "--to", "ring:bad", "--grace", "-3"],
            "-3",
        ),
    ];
    for (args, value) in cases {
        let o = dir.run(args);
        let what = args.join(" ");
        assert_error(&what, &o, USAGE, &[&format!("is negative: {value} ")]);
        let e = stderr(&o);
        assert!(!e.contains("unexpected argument"), "{what}: {e}");
    }
    assert!(rings(&dir).is_empty(), "rings left: {:?}", rings(&dir));
    assert!(!dir.0.join("o").exists(), "cp created its destination");
    // Attached with `=` it is the same error.
    let o = dir.run(&["ring", "create", "bad", "--size=-1M"]);
    assert_error("--size=-1M", &o, USAGE, &["the size is negative: -1M"]);
}

/// A ring larger than memory would allow is refused from `MemAvailable`
/// (a 16 GiB ring is within the size limit); nothing is created.
#[test]
fn ring_larger_than_available_memory_is_refused() {
    let avail = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kib| kib * 1024);
    match avail {
        Some(a) if a < 16 << 30 => {
            let dir = RingDir::new("mem");
            let o = dir.run(&["ring", "create", "huge", "--size", "16GiB"]);
            assert_error("ring create --size 16GiB", &o, USAGE, &["MemAvailable"]);
            assert!(rings(&dir).is_empty());
        }
        _ => println!("skipped: this machine has 16 GiB or more available; a 16 GiB ring fits"),
    }
}

#[test]
fn failed_put_closes_the_ring_with_an_error_that_readers_report() {
    let dir = RingDir::new("failput");
    let deadline = Instant::now() + WATCHDOG;
    let get = Proc::spawn("pipe get f", dir.get("f", &[]));
    // read(2) on a directory fails with EISDIR: stdin that cannot be read.
    let mut c = dir.cmd(&["pipe", "put", "f"]);
    c.stdin(std::fs::File::open("/").expect("open /"));
    let put = Proc::spawn("pipe put f < /", c).finish(deadline);
    assert_error("put < /", &put, 1, &["read stdin"]);
    let o = get.finish(deadline);
    assert_error(
        "get of a failed put",
        &o,
        1,
        &["failed", "the output is incomplete"],
    );
    let s = dir.stat("f").expect("stat f");
    assert_eq!(s["producer"]["state"], "failed");
    assert_ne!(s["producer"]["error"], 0, "the errno is shown: {s}");
}

/// `ring create` and `pipe put` reserve the ring's memory: a ring that
/// does not fit its tmpfs fails at once with "no space left".
#[test]
fn ring_that_does_not_fit_fails_early_with_no_space() {
    let dir = RingDir::new("nospace");
    let zcio = env!("CARGO_BIN_EXE_zcio");
    let mnt = dir.0.join("small");
    std::fs::create_dir_all(&mnt).expect("mkdir");
    // A 256 KiB tmpfs in a private mount namespace, if we may mount one.
    let probe = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o size=256k none {} && umount {}",
            mnt.display(),
            mnt.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(p) if p.status.success() => {
            let script = format!(
                "mount -t tmpfs -o size=256k none {m} || exit 99; export ZCIO_RING_DIR={m}; \
                 {z} ring create a --size 1MiB; echo create=$? >&2; \
                 {z} pipe put b --size 256KiB --readers 0 </dev/null; echo put=$? >&2; \
                 {z} ring create c --size 64KiB; echo small=$? >&2; \
                 ls -A {m} >&2",
                m = mnt.display(),
                z = zcio
            );
            let mut c = Command::new("unshare");
            c.args(["-m", "sh", "-c", &script]).stdin(Stdio::null());
            let o = Proc::spawn("unshare -m sh (small tmpfs)", c).finish(Instant::now() + WATCHDOG);
            let e = stderr(&o);
            assert!(o.status.success(), "{e}");
            assert_eq!(e.matches("zcio: error: ").count(), 2, "{e}");
            assert_eq!(e.matches("no space left on").count(), 2, "{e}");
            assert!(e.contains("ring a: no space left on"), "{e}");
            assert!(e.contains("create=1") && e.contains("put=1"), "{e}");
            // A ring that fits is still created; the failed ones left nothing.
            assert!(e.contains("small=0"), "{e}");
            assert!(
                e.trim_end().ends_with("zcio-ring.c"),
                "only ring c may exist: {e}"
            );
        }
        other => {
            let why = match other {
                Ok(p) => format!(
                    "cannot mount a tmpfs: {}",
                    String::from_utf8_lossy(&p.stderr).trim()
                ),
                Err(e) => format!("cannot run unshare: {e}"),
            };
            // Without a small tmpfs: a ring larger than the space left in
            // the ring directory's filesystem, if the size limit allows one.
            let free = Command::new("stat")
                .args(["-f", "-c", "%a %S"])
                .arg(&dir.0)
                .output()
                .ok()
                .and_then(|o| {
                    let s = String::from_utf8_lossy(&o.stdout).into_owned();
                    let mut it = s.split_whitespace().map(|v| v.parse::<u64>().ok());
                    Some(it.next()?? * it.next()??)
                });
            match free {
                Some(f) if f < 8 << 30 => {
                    let size = (f + 1).next_power_of_two();
                    let o = dir.run(&["ring", "create", "a", "--size", &format!("{size}")]);
                    assert_error(
                        "ring create larger than free space",
                        &o,
                        1,
                        &["no space left on"],
                    );
                    assert!(rings(&dir).is_empty());
                }
                _ => {
                    println!("skipped: {why}, and the ring directory has room for the largest ring")
                }
            }
        }
    }
}

#[test]
fn get_with_a_mistyped_name_leaves_no_ring_behind() {
    let dir = RingDir::new("typo");
    let o = dir.run(&["pipe", "get", "lgos", "--timeout", "0.2"]);
    assert_error("get of a missing ring", &o, 1, &["no ring named \"lgos\""]);
    assert!(rings(&dir).is_empty(), "{:?}", rings(&dir));
}

/// The writer is killed (its ring says "dead"), a reader starts, then the
/// writer is restarted: the reader must wait for it and get its data.
#[test]
fn reader_started_before_a_restarted_writer_gets_its_data() {
    let dir = RingDir::new("restart");
    let deadline = Instant::now() + WATCHDOG;
    let mut c = dir.cmd(&["pipe", "put", "r", "--readers", "0", "--size", "64KiB"]);
    c.stdin(Stdio::piped());
    let mut first = Proc::spawn("pipe put r (first)", c);
    let mut stdin = first.child.stdin.take().expect("stdin piped");
    stdin.write_all(b"before the crash\n").expect("feed");
    // Wait until the first writer published something, then kill it.
    loop {
        if dir.stat("r").is_some_and(|s| s["bytes"].as_u64() > Some(0)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "watchdog: first writer wrote nothing"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    first.kill9();
    drop(stdin);
    assert_eq!(dir.stat("r").expect("stat")["producer"]["state"], "dead");
    let get = Proc::spawn("pipe get r", dir.get("r", &[]));
    dir.wait_consumers("r", 1, deadline);
    let data = Arc::new(random(1 << 20, 5));
    let (put, feeder) = dir.put_fed("r", 1, &[], &data);
    assert_ok("restarted put", &put.finish(deadline));
    feeder.join().expect("feeder");
    let o = get.finish(deadline);
    assert_ok("reader of the restarted writer", &o);
    assert_same("reader of the restarted writer", &o.stdout, &data);
}

#[test]
fn options_that_do_not_apply_or_conflict_are_errors() {
    let dir = RingDir::new("opts");
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["ring", "create", "a", "--slot-size", "1K"],
            &[
                "--slot-size applies only to slotted rings",
                "--layout slotted",
            ],
        ),
        (
            &["ring", "create", "a", "--entries", "1024"],
            &["--entries applies only to descriptors and index rings"],
        ),
        (
            &["ring", "create", "a", "--layout", "index", "--size", "1M"],
            &["--size does not apply to index rings"],
        ),
        (
            &[
                "ring",
                "create",
                "a",
                "--layout",
                "p",
                "--size",
                "4K",
                "--slot-size",
                "8K",
            ],
            &["--slot-size 8 KiB is larger than the ring"],
        ),
    ];
    for (args, want) in cases {
        assert_error(&args.join(" "), &dir.run(args), USAGE, want);
    }
    assert!(rings(&dir).is_empty());

    // The mode is set as given, whatever the umask.
    assert_ok(
        "create with mode",
        &dir.run(&["ring", "create", "m", "--size", "64KiB", "--mode", "0666"]),
    );
    assert_eq!(dir.stat("m").expect("stat m")["mode"], "0666");

    // An existing ring: differing create options are errors, matching ones
    // a note.
    let existing: &[(&[&str], &str)] = &[
        (&["--size", "1MiB"], "its size is not 1 MiB"),
        (&["--layout", "variable"], "it is not --layout variable"),
        (&["--policy", "frp"], "it is not --policy frp"),
        (
            &["--slot-size", "1K"],
            "--slot-size applies only to slotted rings",
        ),
        (&["--mode", "0600"], "its mode is 0666, not 0600"),
    ];
    for (opts, want) in existing {
        for cmd in ["put", "get"] {
            let mut args = vec!["pipe", cmd, "m", "--readers", "0"];
            if cmd == "get" {
                args = vec!["pipe", "get", "m", "--timeout", "0"];
            }
            args.extend_from_slice(opts);
            let o = dir.run(&args);
            assert_error(&args.join(" "), &o, USAGE, &["already exists", want]);
        }
    }
    let o = dir.run(&["pipe", "put", "m", "--readers", "0", "--size", "64KiB"]);
    assert_ok("put with matching options", &o);
    assert!(
        stderr(&o).contains("zcio: note: ring m already exists"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn error_text_is_human_and_uniform() {
    let dir = RingDir::new("text");
    // Size hints stay within the limits and name sizes exactly.
    let o = dir.run(&["ring", "create", "a", "--size", "0"]);
    assert_error(
        "--size 0",
        &o,
        USAGE,
        &["0 B is below the minimum of 4 KiB"],
    );
    let o = dir.run(&["ring", "create", "a", "--size", "4095"]);
    assert_error(
        "--size 4095",
        &o,
        USAGE,
        &["4095 B is below the minimum of 4 KiB"],
    );
    let o = dir.run(&["ring", "create", "a", "--layout", "p", "--slot-size", "40"]);
    assert_error("--slot-size 40", &o, USAGE, &["(try 32B or 64B)"]);
    let e = stderr(&o);
    assert!(!e.contains("try 1B"), "{e}");

    // Garbage ring files: a sentence naming the ring, not Debug output.
    std::fs::write(dir.0.join("zcio-ring.g"), vec![0u8; 4096]).expect("write");
    let o = dir.run(&["ring", "stat", "g"]);
    assert_error(
        "stat of a short file",
        &o,
        1,
        &["ring g: not a usable zcio ring: the file has 4096 bytes"],
    );
    std::fs::write(dir.0.join("zcio-ring.g"), vec![7u8; 64 << 10]).expect("write");
    let o = dir.run(&["pipe", "get", "g", "--timeout", "0"]);
    assert_error(
        "get of a garbage file",
        &o,
        1,
        &["ring g: not a usable zcio ring"],
    );

    // One prefix, also for `ring rm`; a missing ring is a run-time failure.
    let o = dir.run(&["ring", "rm", "nope"]);
    assert_error("rm of a missing ring", &o, 1, &["no ring named \"nope\""]);
    let o = dir.run(&["ring", "create", "bad/name"]);
    assert_error("invalid name", &o, USAGE, &["invalid ring name"]);
    let o = dir.run(&["ring", "creat", "x"]);
    assert_error(
        "unknown subcommand",
        &o,
        USAGE,
        &["unrecognized subcommand"],
    );

    // --help: exit statuses documented, no tracker references.
    let o = dir.run(&["--help"]);
    assert_ok("--help", &o);
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(help.contains("Exit status"), "{help}");
    for sub in [
        &["ring", "create"][..],
        &["ring", "stat"],
        &["ring", "ls"],
        &["ring", "rm"],
        &["pipe", "put"],
        &["pipe", "get"],
    ] {
        let mut args = vec!["help"];
        args.extend_from_slice(sub);
        let o = dir.run(&args);
        assert_ok(&args.join(" "), &o);
        let h = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(!h.contains("issue #"), "{}: {h}", args.join(" "));
        assert!(!h.contains("umask applies"), "{}: {h}", args.join(" "));
    }
    assert!(!help.contains("issue #"), "{help}");
}

/// A child that cannot be started fails the test (it never passes it).
#[test]
#[should_panic(expected = "spawn")]
fn a_child_that_fails_to_spawn_fails_the_test() {
    let c = Command::new(std::env::temp_dir().join("zcio-no-such-binary"));
    let _ = Proc::spawn("no such binary", c);
}
