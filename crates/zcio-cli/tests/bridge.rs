//! `zcio bridge export|import` as a user runs them: a pipe carried across
//! two bridge processes (explicit `tcp/127.0.0.1` endpoints, no multicast),
//! the `ready` line, the statistics, stops and usage errors. Every process
//! is a child under the watchdog; nothing asserts on time.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use common::*;
use serde_json::Value;

/// Start a bridge; return it and the endpoints of its `ready` line.
fn start(dir: &RingDir, args: &[&str]) -> (Proc, String) {
    let mut c: Command = dir.cmd(&[&["bridge"], args].concat());
    c.stdin(std::process::Stdio::null());
    let (p, line) = spawn_first_line(&format!("bridge {}", args.join(" ")), &mut c);
    let eps = line
        .strip_prefix("ready")
        .unwrap_or_else(|| {
            panic!(
                "zcio bridge {}: first line {line:?} is not `ready …`",
                args.join(" ")
            )
        })
        .trim()
        .to_string();
    (p, eps)
}

fn stats(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("--stats-json written"))
        .expect("--stats-json is JSON")
}

fn key(tag: &str) -> String {
    format!("zcio-cli-test/{tag}/{}", std::process::id())
}

#[test]
fn a_pipe_crosses_two_bridges_byte_exact() {
    let dir = RingDir::new("bridge-pipe");
    let k = key("pipe");
    let (ex_json, im_json) = (dir.0.join("ex.json"), dir.0.join("im.json"));
    assert_ok(
        "ring create",
        &dir.run(&[
            "ring", "create", "src", "--layout", "variable", "--size", "4MiB",
        ]),
    );
    let (ex, ep) = start(
        &dir,
        &[
            "export",
            "ring:src",
            "--key",
            &k,
            "--listen",
            "tcp/127.0.0.1:0",
            "--stats-json",
            ex_json.to_str().unwrap(),
        ],
    );
    assert!(ep.starts_with("tcp/127.0.0.1:"), "{ep}");
    let (im, _) = start(
        &dir,
        &[
            "import",
            &k,
            "--to",
            "ring:dst",
            "--connect",
            &ep,
            "--stats-json",
            im_json.to_str().unwrap(),
        ],
    );
    let mut get = Proc::spawn("pipe get dst", dir.get("dst", &[]));
    dir.wait_consumers("dst", 1, Instant::now() + WATCHDOG);
    let data = Arc::new(random(INPUT, 25));
    let (put, feeder) = dir.put_fed("src", 1, &[], &data);
    let deadline = Instant::now() + WATCHDOG;
    assert_ok("pipe put", &put.finish(deadline));
    feeder.join().unwrap();
    assert_ok("bridge export", &ex.finish(deadline));
    assert_ok("bridge import", &im.finish(deadline));
    let status = get.wait(deadline);
    assert!(status.success(), "pipe get: {status}");
    let out = get.finish(deadline);
    assert_same("the pipe across the bridges", &out.stdout, &data);
    for (what, p) in [("export", &ex_json), ("import", &im_json)] {
        let s = stats(p);
        assert_eq!(s["end"], "end of stream", "{what}: {s}");
        assert_eq!(s["bytes"], INPUT as u64, "{what}: {s}");
        assert_eq!(s["gaps"], 0, "{what}: {s}");
        assert!(s["cpu_s"].as_f64().is_some(), "{what}: {s}");
    }
}

#[test]
fn sigterm_stops_an_import_and_a_stream_that_never_began_ends_cleanly() {
    let dir = RingDir::new("bridge-stop");
    let json = dir.0.join("im.json");
    let (im, eps) = start(
        &dir,
        &[
            "import",
            &key("stop"),
            "--to",
            "ring:quiet",
            "--listen",
            "tcp/127.0.0.1:0",
            "--stats",
            "--stats-json",
            json.to_str().unwrap(),
        ],
    );
    assert!(eps.starts_with("tcp/127.0.0.1:"), "{eps}");
    sigterm(&im);
    let o = im.finish(Instant::now() + WATCHDOG);
    assert_ok("import after SIGTERM", &o);
    assert!(stderr(&o).contains("(stopped)"), "{}", stderr(&o));
    assert_eq!(stats(&json)["samples"], 0);
    // Nothing began: the ring it created was closed cleanly (its state
    // says `closed`, not `failed`).
    let st = dir.stat("quiet").expect("the ring exists");
    assert_eq!(st["producer"]["state"], "closed", "{st}");
    assert_eq!(st["blocks"], 0, "{st}");
}

#[test]
fn sigterm_of_an_import_mid_stream_closes_its_ring_with_ecanceled() {
    let dir = RingDir::new("bridge-midstop");
    let k = key("midstop");
    assert_ok(
        "ring create",
        &dir.run(&[
            "ring", "create", "src", "--layout", "variable", "--size", "1MiB",
        ]),
    );
    let (_ex, ep) = start(
        &dir,
        &[
            "export",
            "ring:src",
            "--key",
            &k,
            "--listen",
            "tcp/127.0.0.1:0",
        ],
    );
    let (im, _) = start(&dir, &["import", &k, "--to", "ring:dst", "--connect", &ep]);
    let mut get = Proc::spawn("pipe get dst", dir.get("dst", &[]));
    dir.wait_consumers("dst", 1, Instant::now() + WATCHDOG);
    // A producer that writes and keeps its stream open.
    let mut c = dir.cmd(&["pipe", "put", "src", "--readers", "1"]);
    c.stdin(std::process::Stdio::piped());
    let mut put = Proc::spawn("pipe put src", c);
    let mut stdin = put.child.stdin.take().expect("piped");
    std::io::Write::write_all(&mut stdin, &[7u8; 10_000]).unwrap();
    std::io::Write::flush(&mut stdin).unwrap();
    // Wait until the data is in the imported ring: the stream has begun.
    let deadline = Instant::now() + WATCHDOG;
    while dir
        .stat("dst")
        .map_or(0, |s| s["bytes"].as_u64().unwrap_or(0))
        < 10_000
    {
        assert!(
            Instant::now() < deadline,
            "watchdog: nothing reached the imported ring"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    sigterm(&im);
    assert_ok("import after SIGTERM", &im.finish(deadline));
    let st = dir.stat("dst").expect("the ring exists");
    assert_eq!(st["producer"]["state"], "failed", "{st}");
    assert_eq!(st["producer"]["error"], 125, "ECANCELED: {st}");
    let status = get.wait(deadline);
    assert!(!status.success(), "the reader must not see a clean end");
    drop(stdin);
    let _ = put.wait(deadline);
}

#[test]
fn usage_errors_exit_2_before_anything_is_created() {
    let dir = RingDir::new("bridge-usage");
    let cases: &[(&[&str], &str)] = &[
        (&["export", "ring:x", "--key", "cam/*"], "wildcards"),
        (&["export", "ring:x", "--key", "@zcio/x"], "reserved"),
        (&["export", "pipe:x", "--key", "k"], "expected ring:NAME"),
        (&["import", "k", "--to", "file:x"], "expected ring:NAME"),
        (
            &["import", "a//b", "--to", "ring:never"],
            "invalid key expression",
        ),
        (
            &["import", "k", "--to", "ring:never", "--connect", "nonsense"],
            "--connect",
        ),
        (
            &["import", "k", "--to", "ring:never", "--max-size", "0"],
            "--max-size",
        ),
        (
            &["import", "k", "--to", "ring:never", "--grace", "nan"],
            "--grace",
        ),
        (
            &["import", "k", "--to", "connect:/x.sock", "--size", "1MiB"],
            "apply only to ring sinks",
        ),
        (
            &["import", "k", "--to", "ring:never", "--layout", "index"],
            "index ring",
        ),
    ];
    for (args, want) in cases {
        let o = dir.run(&[&["bridge"], *args].concat());
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "zcio bridge {args:?}: {err}");
        assert!(err.starts_with("zcio: error:"), "{args:?}: {err}");
        assert!(
            err.contains(want),
            "zcio bridge {args:?}: {err:?} should say {want:?}"
        );
    }
    let ls = dir.run(&["ring", "ls"]);
    assert!(
        !String::from_utf8_lossy(&ls.stdout).contains("never"),
        "a refused import created its ring"
    );
    // A ring source that does not exist is a run-time error (1) that says so.
    let o = dir.run(&[
        "bridge",
        "export",
        "ring:missing",
        "--key",
        "k",
        "--duration",
        "5",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("missing"), "{}", stderr(&o));
}

#[test]
fn help_has_examples() {
    let dir = RingDir::new("bridge-help");
    for sub in ["export", "import"] {
        let o = dir.run(&["bridge", sub, "--help"]);
        assert_ok("help", &o);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            text.contains("Examples:") && text.contains("zcio bridge"),
            "{text}"
        );
    }
}
