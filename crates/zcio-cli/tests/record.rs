//! `zcio record` and `zcio replay` as real processes.
//!
//! Producers and senders are this test binary run again as a child
//! (`child_entry`, selected by `ZCIO_REC_CHILD`), so the blocks and
//! messages are known exactly. Files are read back with the `mcap` crate
//! and, when a Python with the `mcap` package is at hand (target/py-venv,
//! as scripts/test-python installs it, or python3), with that independent
//! reader too. Every child runs under a watchdog; nothing asserts on
//! timing, and no sleep stands in for a synchronisation.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

/// Blocks a child producer writes.
const N: usize = 40;

/// The known content of block `i`.
fn block(i: usize) -> Vec<u8> {
    let len = match i {
        7 => 300 << 10, // one large block
        _ => 1 + (i * 7919) % 5000,
    };
    (0..len).map(|j| ((i * 31 + j) % 251) as u8).collect()
}

/// A fresh ring directory and run directory for one test.
struct Env {
    rings: RingDir,
    run: PathBuf,
}

impl Env {
    fn new(tag: &str) -> Self {
        let rings = RingDir::new(&format!("rec-{tag}"));
        let run = rings.0.join("run");
        std::fs::create_dir_all(&run).expect("run dir");
        Self { rings, run }
    }

    fn dir(&self) -> &Path {
        &self.rings.0
    }

    fn zcio(&self, args: &[&str]) -> Command {
        let mut c = self.rings.cmd(args);
        c.env("ZCIO_RUN_DIR", &self.run).stdin(Stdio::null());
        c
    }

    /// This test binary as a child in `mode`.
    fn child(&self, mode: &str, vars: &[(&str, &str)]) -> Command {
        let mut c = Command::new(std::env::current_exe().expect("test binary"));
        c.args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env("ZCIO_REC_CHILD", mode)
            .env("ZCIO_RING_DIR", self.dir())
            .env("ZCIO_RUN_DIR", &self.run);
        for (k, v) in vars {
            c.env(k, v);
        }
        c
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Proc::spawn(&args.join(" "), self.zcio(args)).finish(Instant::now() + WATCHDOG)
    }
}

/// A message as read back: topic, schema name (empty: none), sequence,
/// bytes.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Rec {
    topic: String,
    schema: String,
    sequence: u32,
    data: Vec<u8>,
}

/// Read `path` with the `mcap` crate (every message, in file order).
fn read_mcap(path: &Path) -> Vec<Rec> {
    let bytes = std::fs::read(path).expect("read mcap");
    // The summary must be there: the file was finished.
    let summary = mcap::Summary::read(&bytes)
        .expect("summary readable")
        .expect("file has a summary");
    let stats = summary.stats.expect("statistics record");
    let out: Vec<Rec> = mcap::MessageStream::new(&bytes)
        .expect("mcap header")
        .map(|m| {
            let m = m.expect("message");
            Rec {
                topic: m.channel.topic.clone(),
                schema: m
                    .channel
                    .schema
                    .as_ref()
                    .map(|s| s.name.clone())
                    .unwrap_or_default(),
                sequence: m.sequence,
                data: m.data.into_owned(),
            }
        })
        .collect();
    assert_eq!(stats.message_count, out.len() as u64, "statistics count");
    out
}

/// A Python that has the `mcap` package, if any.
fn python_with_mcap() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cands = vec![root.join("target/py-venv/bin/python")];
    if let Ok(t) = std::env::var("CARGO_TARGET_DIR") {
        cands.push(Path::new(&t).join("py-venv/bin/python"));
    }
    if let Ok(p) = std::env::var("ZCIO_TEST_PYTHON") {
        cands.insert(0, PathBuf::from(p));
    }
    cands.push(PathBuf::from("python3"));
    cands.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import mcap.reader"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

const PY_READ: &str = r#"
import json, sys
from mcap.reader import make_reader
with open(sys.argv[1], "rb") as f:
    r = make_reader(f)
    out = []
    for schema, channel, message in r.iter_messages(log_time_order=False):
        out.append([channel.topic, schema.name if schema else "", message.sequence, message.data.hex()])
print(json.dumps(out))
"#;

/// Read `path` with Python's `mcap` package; `None` (and a `skipped:`
/// line) without one.
fn read_mcap_python(path: &Path) -> Option<Vec<Rec>> {
    let Some(py) = python_with_mcap() else {
        println!("skipped: the Python check (no python with the mcap package; scripts/test-python installs it into target/py-venv)");
        return None;
    };
    let o = Command::new(&py)
        .args(["-c", PY_READ])
        .arg(path)
        .output()
        .expect("run python");
    assert!(
        o.status.success(),
        "python mcap reader failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    };
    Some(
        v.as_array()
            .expect("list")
            .iter()
            .map(|m| Rec {
                topic: m[0].as_str().expect("topic").to_owned(),
                schema: m[1].as_str().expect("schema").to_owned(),
                sequence: m[2].as_u64().expect("seq") as u32,
                data: hex(m[3].as_str().expect("data")),
            })
            .collect(),
    )
}

fn expected_ring(topic: &str, n: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| Rec {
            topic: topic.to_owned(),
            schema: String::new(),
            sequence: i as u32,
            data: block(i),
        })
        .collect()
}

fn assert_recs(what: &str, got: &[Rec], want: &[Rec]) {
    assert_eq!(got.len(), want.len(), "{what}: message count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(
            (&g.topic, &g.schema, g.sequence),
            (&w.topic, &w.schema, w.sequence),
            "{what}: message {i}"
        );
        assert!(
            g.data == w.data,
            "{what}: message {i} differs ({} bytes, want {})",
            g.data.len(),
            w.data.len()
        );
    }
}

/// Record ring `ring` (made by a child producer writing the N known
/// blocks) into `out`.
fn record_ring(env: &Env, ring: &str, out: &Path) {
    let deadline = Instant::now() + WATCHDOG;
    let n = N.to_string();
    let rec = Proc::spawn(
        "record",
        env.zcio(&[
            "record",
            &format!("ring:{ring}"),
            "-o",
            out.to_str().expect("utf-8 path"),
            "--count",
            &n,
        ]),
    );
    let prod = Proc::spawn("producer", env.child("produce", &[("ZCIO_REC_RING", ring)]));
    assert_ok("producer", &prod.finish(deadline));
    let o = rec.finish(deadline);
    assert_ok("record", &o);
}

#[test]
fn record_ring_read_back_byte_exact() {
    let env = Env::new("ring");
    let out = env.dir().join("a.mcap");
    record_ring(&env, "rec-a", &out);
    let want = expected_ring("ring:rec-a", N);
    assert_recs("mcap crate", &read_mcap(&out), &want);
    if let Some(py) = read_mcap_python(&out) {
        assert_recs("python mcap", &py, &want);
    }
    // Nothing but the output is left in the directory.
    let left: Vec<_> = std::fs::read_dir(env.dir())
        .expect("ls")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".zcio-record."))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn record_replay_record_round_trip() {
    let env = Env::new("rt");
    let first = env.dir().join("first.mcap");
    record_ring(&env, "rt-a", &first);
    let deadline = Instant::now() + WATCHDOG;
    let second = env.dir().join("second.mcap");
    let n = N.to_string();
    let rec = Proc::spawn(
        "record 2",
        env.zcio(&[
            "record",
            "ring:rt-b",
            "-o",
            second.to_str().expect("utf-8"),
            "--count",
            &n,
        ]),
    );
    let o = env.run(&[
        "replay",
        first.to_str().expect("utf-8"),
        "--to",
        "ring:rt-b",
        "--rate",
        "max",
    ]);
    assert_ok("replay", &o);
    assert_ok("record 2", &rec.finish(deadline));
    let a = read_mcap(&first);
    let b = read_mcap(&second);
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(x.data == y.data, "message {i} differs after the round trip");
        assert_eq!(x.sequence, y.sequence);
    }
    assert!(b.iter().all(|r| r.topic == "ring:rt-b"));
}

#[test]
fn replay_refuses_damaged_files() {
    let env = Env::new("bad");
    let good = env.dir().join("good.mcap");
    record_ring(&env, "bad-a", &good);
    let bytes = std::fs::read(&good).expect("read");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", bytes[..bytes.len() / 2].to_vec()),
        ("no footer", bytes[..bytes.len() - 20].to_vec()),
        ("flipped byte", {
            let mut b = bytes.clone();
            let mid = b.len() / 3;
            b[mid] ^= 0x5a;
            b
        }),
        (
            "not mcap",
            b"hello, this is not an MCAP file at all".to_vec(),
        ),
        ("empty", Vec::new()),
    ];
    for (what, data) in cases {
        let p = env.dir().join(format!("{}.mcap", what.replace(' ', "-")));
        std::fs::write(&p, &data).expect("write");
        let o = env.run(&[
            "replay",
            p.to_str().expect("utf-8"),
            "--to",
            "ring:bad-sink",
            "--readers",
            "0",
            "--rate",
            "max",
        ]);
        assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("zcio: error:") && e.contains("not a valid MCAP file"),
            "{what}: {e}"
        );
        assert!(!e.contains("panicked"), "{what}: {e}");
        // Nothing was sent: the sink ring was not even created.
        assert!(!env.dir().join("zcio-ring.bad-sink").exists(), "{what}");
    }
}

#[test]
fn record_never_overwrites_and_keeps_what_arrived_when_the_producer_dies() {
    let env = Env::new("keep");
    let out = env.dir().join("keep.mcap");
    std::fs::write(&out, b"precious").expect("write");
    let o = env.run(&[
        "record",
        "ring:keep-a",
        "-o",
        out.to_str().expect("utf-8"),
        "--count",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).expect("read"), b"precious");

    // A producer that dies mid-stream: the recording fails (exit 1), and
    // what arrived before is in the output, a finished file; no temporary
    // file is left.
    let deadline = Instant::now() + WATCHDOG;
    let fail = env.dir().join("fail.mcap");
    let rec = Proc::spawn(
        "record",
        env.zcio(&["record", "ring:keep-b", "-o", fail.to_str().expect("utf-8")]),
    );
    let prod = Proc::spawn(
        "dying producer",
        env.child(
            "produce",
            &[("ZCIO_REC_RING", "keep-b"), ("ZCIO_REC_DIE", "1")],
        ),
    );
    let _ = prod.finish(deadline);
    let o = rec.finish(deadline);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("died"), "{}", stderr(&o));
    assert!(stderr(&o).contains("incomplete"), "{}", stderr(&o));
    let got = read_mcap(&fail);
    assert_recs("kept", &got, &expected_ring("ring:keep-b", got.len()));
    assert_eq!(mcap_files(&env), ["fail.mcap", "keep.mcap"], "files left");
}

/// The names of the files of `env`'s directory that mention mcap (the
/// outputs and any temporary file), sorted.
fn mcap_files(env: &Env) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(env.dir())
        .expect("ls")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("mcap"))
        .collect();
    names.sort();
    names
}

#[test]
fn record_listener_messages_and_type_tags() {
    let env = Env::new("listen");
    let deadline = Instant::now() + WATCHDOG;
    let sock = env.dir().join("in.sock");
    let out = env.dir().join("l.mcap");
    let k = 6; // 5 untyped, then one typed
    let rec = Proc::spawn(
        "record listen",
        env.zcio(&[
            "record",
            &format!("listen:{}", sock.display()),
            "-o",
            out.to_str().expect("utf-8"),
            "--count",
            &k.to_string(),
        ]),
    );
    let sender = Proc::spawn(
        "sender",
        env.child("send", &[("ZCIO_REC_SOCK", sock.to_str().expect("utf-8"))]),
    );
    assert_ok("sender", &sender.finish(deadline));
    assert_ok("record", &rec.finish(deadline));
    let got = read_mcap(&out);
    assert_eq!(got.len(), k);
    let topic = format!("listen:{}", sock.display());
    for (i, r) in got.iter().take(5).enumerate() {
        assert_eq!(r.topic, topic);
        assert_eq!(r.schema, "");
        assert_eq!(r.data, block(i));
        assert_eq!(r.sequence, i as u32);
    }
    let t = &got[5];
    assert_eq!(t.topic, topic);
    assert_eq!(t.schema, "test.Pair@3");
    assert_eq!(t.sequence, 0, "a typed channel counts its own sequence");
    assert_eq!(&t.data[..8], b"ZCIOTYPE");
    assert_eq!(&t.data[t.data.len() - 16..], &pair_payload());
    if let Some(py) = read_mcap_python(&out) {
        assert_recs("python mcap", &py, &got);
    }
}

#[test]
fn sigint_finishes_the_file() {
    let env = Env::new("int");
    let deadline = Instant::now() + WATCHDOG;
    let out = env.dir().join("int.mcap");
    let rec = Proc::spawn(
        "record",
        env.zcio(&["record", "ring:int-a", "-o", out.to_str().expect("utf-8")]),
    );
    // The producer writes every block, says so, and keeps the ring open
    // (no end of stream) until its stdin closes.
    let mut c = env.child(
        "produce",
        &[("ZCIO_REC_RING", "int-a"), ("ZCIO_REC_HOLD", "1")],
    );
    let mut prod = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn producer");
    let mut line = String::new();
    let mut lines = BufReader::new(prod.stdout.take().expect("stdout"));
    loop {
        line.clear();
        let n = lines.read_line(&mut line).expect("producer stdout");
        assert!(n > 0, "producer ended without writing its blocks");
        if line.trim_end().ends_with("written") {
            break;
        }
    }
    // SAFETY: kill(2) on our own child's pid.
    let r = unsafe { libc::kill(rec.child.id() as i32, libc::SIGINT) };
    assert_eq!(r, 0);
    let o = rec.finish(deadline);
    assert_ok("record after SIGINT", &o);
    drop(prod.stdin.take());
    let _ = prod.wait();
    let got = read_mcap(&out);
    // Whatever arrived before the signal, complete and in order.
    let want = expected_ring("ring:int-a", got.len());
    assert_recs("after SIGINT", &got, &want);
    if let Some(py) = read_mcap_python(&out) {
        assert_recs("python mcap", &py, &want);
    }
}

/// A Zenoh key no other test (nor test run) uses.
fn zkey(tag: &str) -> String {
    format!("zcio-rec-test/{tag}/{}", std::process::id())
}

/// Start `cmd` and wait for its first stdout line, which must be `ready…`;
/// return it and the endpoints the line names.
fn start_ready(name: &str, mut c: Command) -> (Proc, String) {
    let (p, line) = spawn_first_line(name, &mut c);
    let eps = line
        .strip_prefix("ready")
        .unwrap_or_else(|| panic!("{name}: first line {line:?} is not `ready …`"))
        .trim()
        .to_owned();
    (p, eps)
}

/// A ring `ring` exported to `key` by `zcio bridge export` (listening on
/// a port of its choosing), and `zcio record zenoh:KEY` connected to it
/// and subscribed; returns both and the producer, started only then.
/// `hold`: the producer keeps the ring open after its blocks (until its
/// stdin closes) instead of closing it.
fn export_and_record(
    env: &Env,
    ring: &str,
    key: &str,
    out: &Path,
    hold: bool,
) -> (Proc, Proc, std::process::Child) {
    assert_ok(
        "ring create",
        &env.run(&[
            "ring", "create", ring, "--layout", "variable", "--size", "4MiB",
        ]),
    );
    let (export, eps) = start_ready(
        "bridge export",
        env.zcio(&[
            "bridge",
            "export",
            &format!("ring:{ring}"),
            "--key",
            key,
            "--listen",
            "tcp/127.0.0.1:0",
        ]),
    );
    assert!(
        eps.starts_with("tcp/127.0.0.1:"),
        "export endpoints {eps:?}"
    );
    // `ready` once subscribed: the export starts publishing then, and the
    // producer is started only now.
    let (record, _) = start_ready(
        "record zenoh",
        env.zcio(&[
            "record",
            &format!("zenoh:{key}"),
            "--connect",
            &eps,
            "-o",
            out.to_str().expect("utf-8 path"),
        ]),
    );
    let mut vars = vec![("ZCIO_REC_RING", ring)];
    if hold {
        vars.push(("ZCIO_REC_HOLD", "1"));
    }
    let prod = env
        .child("produce", &vars)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn producer");
    (export, record, prod)
}

/// Wait until the importer of `zcio record zenoh:KEY` delivered `n`
/// samples (its `samples` counter in the registry).
fn wait_delivered(env: &Env, key: &str, n: u64, deadline: Instant) {
    loop {
        let o = env.run(&["stat", &format!("import:{key}"), "--json"]);
        let samples = serde_json::from_slice::<serde_json::Value>(&o.stdout)
            .ok()
            .and_then(|v| v["counters"]["samples"]["value"].as_u64());
        if samples.is_some_and(|s| s >= n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "watchdog: the recorder's importer delivered {samples:?} of {n} samples"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Record a Zenoh key exported from a ring: every block byte-exact, in
/// order, on the key's topic; the recording ends with the exporter's end
/// of stream (exit 0) and leaves no temporary file.
fn record_zenoh(env: &Env, ring: &str, key: &str, out: &Path) {
    let deadline = Instant::now() + WATCHDOG;
    let (export, record, mut prod) = export_and_record(env, ring, key, out, false);
    let st = prod.wait().expect("producer");
    assert!(st.success(), "producer failed: {st}");
    assert_ok("bridge export", &export.finish(deadline));
    assert_ok("record zenoh", &record.finish(deadline));
    assert_eq!(
        mcap_files(env)
            .iter()
            .filter(|n| n.contains(".zcio-record."))
            .count(),
        0,
        "temporary files left"
    );
}

#[test]
fn record_zenoh_key_read_back_byte_exact() {
    let env = Env::new("zen");
    let out = env.dir().join("z.mcap");
    let key = zkey("exact");
    record_zenoh(&env, "zen-a", &key, &out);
    let want = expected_ring(&key, N);
    assert_recs("mcap crate", &read_mcap(&out), &want);
    if let Some(py) = read_mcap_python(&out) {
        assert_recs("python mcap", &py, &want);
    }
}

/// A file recorded from Zenoh replays into a ring; recording that ring
/// gives the same messages in the same order.
#[test]
fn record_zenoh_replay_record_round_trip() {
    let env = Env::new("zrt");
    let first = env.dir().join("first.mcap");
    record_zenoh(&env, "zrt-a", &zkey("rt"), &first);
    let deadline = Instant::now() + WATCHDOG;
    let second = env.dir().join("second.mcap");
    let n = N.to_string();
    let rec = Proc::spawn(
        "record 2",
        env.zcio(&[
            "record",
            "ring:zrt-b",
            "-o",
            second.to_str().expect("utf-8"),
            "--count",
            &n,
        ]),
    );
    let o = env.run(&[
        "replay",
        first.to_str().expect("utf-8"),
        "--to",
        "ring:zrt-b",
        "--rate",
        "max",
    ]);
    assert_ok("replay", &o);
    assert_ok("record 2", &rec.finish(deadline));
    let a = read_mcap(&first);
    let b = read_mcap(&second);
    assert_eq!(a.len(), N);
    assert_recs("round trip", &b, &expected_ring("ring:zrt-b", N));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(x.data == y.data, "message {i} differs after the round trip");
    }
}

/// The exporting bridge killed mid-stream: the recording fails (exit 1)
/// within the grace period, and keeps what it received in a finished
/// file; no temporary file is left.
#[test]
fn record_zenoh_exporter_killed_keeps_a_finished_file() {
    let env = Env::new("zkill");
    let deadline = Instant::now() + WATCHDOG;
    let out = env.dir().join("k.mcap");
    let key = zkey("kill");
    let (mut export, record, mut prod) = export_and_record(&env, "zkill-a", &key, &out, true);
    // The producer wrote every block and holds the ring open: no end of
    // stream will come.
    let mut lines = BufReader::new(prod.stdout.take().expect("stdout"));
    let mut line = String::new();
    loop {
        line.clear();
        let n = lines.read_line(&mut line).expect("producer stdout");
        assert!(n > 0, "producer ended without writing its blocks");
        if line.trim_end().ends_with("written") {
            break;
        }
    }
    // Every block reached the recorder (its importer's registry counter)
    // before the export is killed: no end of stream will come.
    wait_delivered(&env, &key, N as u64, deadline);
    export.kill9();
    let o = record.finish(deadline);
    drop(prod.stdin.take());
    let _ = prod.wait();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("is gone") && err.contains("incomplete"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // Everything that arrived before the kill, complete and in order, in a
    // file with its summary.
    let got = read_mcap(&out);
    assert_recs("after the kill", &got, &expected_ring(&key, N));
    if let Some(py) = read_mcap_python(&out) {
        assert_recs("python mcap", &py, &got);
    }
    assert_eq!(mcap_files(&env), ["k.mcap"], "files left");
}

/// A channel listener exported to Zenoh: its messages recorded from the
/// key, a typed one on a channel of its own whose schema is the type.
#[test]
fn record_zenoh_typed_messages_of_an_exported_listener() {
    let env = Env::new("ztyped");
    let deadline = Instant::now() + WATCHDOG;
    let sock = env.dir().join("in.sock");
    let out = env.dir().join("t.mcap");
    let key = zkey("typed");
    let (export, eps) = start_ready(
        "bridge export listen",
        env.zcio(&[
            "bridge",
            "export",
            &format!("listen:{}", sock.display()),
            "--key",
            &key,
            "--listen",
            "tcp/127.0.0.1:0",
        ]),
    );
    let (record, _) = start_ready(
        "record zenoh",
        env.zcio(&[
            "record",
            &format!("zenoh:{key}"),
            "--connect",
            &eps,
            "-o",
            out.to_str().expect("utf-8"),
            "--count",
            "6",
        ]),
    );
    let sender = Proc::spawn(
        "sender",
        env.child("send", &[("ZCIO_REC_SOCK", sock.to_str().expect("utf-8"))]),
    );
    assert_ok("record", &record.finish(deadline));
    // A listener export runs until stopped; the sender leaves once its
    // channel closes.
    sigterm(&export);
    assert_ok("bridge export", &export.finish(deadline));
    assert_ok("sender", &sender.finish(deadline));
    let got = read_mcap(&out);
    assert_eq!(got.len(), 6);
    for (i, r) in got.iter().take(5).enumerate() {
        assert_eq!((r.topic.as_str(), r.schema.as_str()), (key.as_str(), ""));
        assert_eq!(r.sequence, i as u32);
        assert!(r.data == block(i), "message {i} differs");
    }
    let t = &got[5];
    assert_eq!(
        (t.topic.as_str(), t.schema.as_str()),
        (key.as_str(), "test.Pair@3")
    );
    assert_eq!(t.sequence, 0, "a typed channel counts its own sequence");
    assert_eq!(&t.data[..8], b"ZCIOTYPE");
    assert_eq!(&t.data[t.data.len() - 16..], &pair_payload());
    if let Some(py) = read_mcap_python(&out) {
        assert_recs("python mcap", &py, &got);
    }
}

#[test]
fn record_zenoh_usage_errors_exit_2() {
    let env = Env::new("zuse");
    let out = env.dir().join("u.mcap");
    let o = out.to_str().expect("utf-8");
    let cases: [(&[&str], &str); 4] = [
        (&["record", "zenoh:", "-o", o], "needs a key expression"),
        (&["record", "zenoh:a//b", "-o", o], "invalid key expression"),
        (&["record", "zenoh:@x/y", "-o", o], "reserved"),
        (
            &["record", "ring:r", "--connect", "tcp/127.0.0.1:1", "-o", o],
            "apply only to zenoh:KEY sources",
        ),
    ];
    for (args, says) in cases {
        let r = env.run(args);
        let err = stderr(&r);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(err.contains("zenoh:"), "{args:?} says what to give: {err}");
    }
    assert!(mcap_files(&env).is_empty(), "nothing written");
}

#[test]
fn record_zenoh_with_no_peer_fails_and_writes_no_file() {
    let env = Env::new("znopeer");
    // A loopback port nobody listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let out = env.dir().join("none.mcap");
    let ep = format!("tcp/127.0.0.1:{port}");
    let r = env.run(&[
        "record",
        "zenoh:test/nopeer",
        "--connect",
        &ep,
        "--connect-timeout",
        "0.5",
        "-o",
        out.to_str().expect("utf-8"),
    ]);
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("nothing was recorded"), "{err}");
    assert!(!out.exists(), "no file for a recording that got nothing");
    assert!(mcap_files(&env).is_empty(), "no temporary file left");
}

/// The payload of the typed message: a `Pair` of two u64.
fn pair_payload() -> [u8; 16] {
    let mut p = [0u8; 16];
    p[..8].copy_from_slice(&0x0123_4567_89ab_cdefu64.to_le_bytes());
    p[8..].copy_from_slice(&42u64.to_le_bytes());
    p
}

/// The children: a ring producer (`produce`) and a channel sender
/// (`send`). Does nothing when run as a test.
#[test]
fn child_entry() {
    match std::env::var("ZCIO_REC_CHILD").as_deref() {
        Ok("produce") => child_produce(),
        Ok("send") => child_send(),
        _ => {}
    }
}

fn child_produce() {
    use zcio::ring::{Layout, Options, Producer};
    let name = std::env::var("ZCIO_REC_RING").expect("ring name");
    let map = Options::new()
        .layout(Layout::Variable)
        .size(4 << 20)
        .create_or_open(&name)
        .expect("create ring");
    let mut p = Producer::attach(map).expect("producer");
    let deadline = Instant::now() + WATCHDOG;
    while p.live_consumers() < 1 {
        assert!(Instant::now() < deadline, "watchdog: no reader attached");
        std::thread::sleep(Duration::from_millis(2));
    }
    if std::env::var_os("ZCIO_REC_DIE").is_some() {
        p.write(&block(0)).expect("write");
        // Gone without closing the ring (exit runs no destructor).
        std::process::exit(3);
    }
    for i in 0..N {
        p.write(&block(i)).expect("write");
    }
    if std::env::var_os("ZCIO_REC_HOLD").is_some() {
        println!("written");
        std::io::stdout().flush().expect("flush");
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
    }
    p.close();
}

fn child_send() {
    use zcio::typed::Tag;
    use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};
    let path = std::env::var("ZCIO_REC_SOCK").expect("socket path");
    let deadline = Instant::now() + WATCHDOG;
    let ch = loop {
        match Channel::connect(&path, ChannelConfig::default()) {
            Ok(c) => break c,
            Err(e) => {
                assert!(Instant::now() < deadline, "watchdog: cannot connect: {e}");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    let pool = Pool::new(PoolConfig::named("rec-test"));
    for i in 0..5 {
        let b = block(i);
        let mut buf = pool.alloc(b.len()).expect("alloc");
        buf.as_mut_slice()[..b.len()].copy_from_slice(&b);
        ch.send(Msg::from(buf.freeze().expect("freeze")))
            .expect("send");
    }
    let shape = zcio::typed::RuntimeShape {
        size: 16,
        align: 8,
        elem_size: None,
    };
    let mut bytes = Tag::new("test.Pair", 3).encode(shape).expect("tag");
    bytes.extend_from_slice(&pair_payload());
    let mut buf = pool.alloc(bytes.len()).expect("alloc");
    buf.as_mut_slice()[..bytes.len()].copy_from_slice(&bytes);
    ch.send(Msg::from(buf.freeze().expect("freeze")))
        .expect("send typed");
    // Stay until the recorder, done after --count messages, goes away
    // (our buffers must live until it has written them).
    loop {
        match ch.recv_timeout(Duration::from_millis(50)) {
            Err(e) if e.is_disconnected() => break,
            _ => assert!(
                Instant::now() < deadline,
                "watchdog: the recorder never left"
            ),
        }
    }
}
