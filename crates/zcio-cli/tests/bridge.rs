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
    // The ring the import created is gone (its reader, attached before,
    // read all of it and the clean end); the exported one stays.
    assert_eq!(ring_files(&dir), ["src"]);
    for (what, p) in [("export", &ex_json), ("import", &im_json)] {
        let s = stats(p);
        assert_eq!(s["end"], "end of stream", "{what}: {s}");
        assert_eq!(s["bytes"], INPUT as u64, "{what}: {s}");
        assert_eq!(s["gaps"], 0, "{what}: {s}");
        assert!(s["cpu_s"].as_f64().is_some(), "{what}: {s}");
    }
}

/// The exit status of an import stopped before the exporter's end of stream.
const EXIT_STOPPED: i32 = 3;

/// A loopback TCP port that refuses connections while the value lives: a
/// socket bound to it that never listens (no other process can take it).
struct RefusedPort {
    _fd: std::os::fd::OwnedFd,
    port: u16,
}

impl RefusedPort {
    fn new() -> Self {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: plain socket calls on a descriptor we create and own; the
        // address structures are initialised and passed with their sizes.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket");
            let fd = std::os::fd::OwnedFd::from_raw_fd(fd);
            let mut a: libc::sockaddr_in = std::mem::zeroed();
            a.sin_family = libc::AF_INET as libc::sa_family_t;
            a.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let raw = fd.as_raw_fd();
            assert_eq!(libc::bind(raw, std::ptr::addr_of!(a).cast(), len), 0);
            let mut got = len;
            assert_eq!(
                libc::getsockname(raw, std::ptr::addr_of_mut!(a).cast(), &mut got),
                0
            );
            Self {
                _fd: fd,
                port: u16::from_be(a.sin_port),
            }
        }
    }

    fn endpoint(&self) -> String {
        format!("tcp/127.0.0.1:{}", self.port)
    }
}

/// The rings in `dir` (its `zcio-ring.NAME` files), sorted.
fn ring_files(dir: &RingDir) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(&dir.0)
        .expect("ring dir")
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            n.strip_prefix("zcio-ring.").map(str::to_string)
        })
        .collect();
    v.sort();
    v
}

/// A reader of `ring` must end with an error that says the stream was cut
/// (`pipe get` exits 1), never with a clean end (exit 0).
fn assert_cut(what: &str, get: Proc, deadline: Instant) {
    let o = get.finish(deadline);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{what}: pipe get: {err}");
    assert!(err.contains("incomplete"), "{what}: pipe get: {err}");
}

/// Issue 34: an import with nothing to connect to is stopped before any
/// sample; its reader sees the stream cut (ECANCELED), the importer exits
/// 3 — never exit 0 with 0 bytes.
#[test]
fn sigterm_before_the_first_sample_is_no_clean_end() {
    let dir = RingDir::new("bridge-stop");
    let json = dir.0.join("im.json");
    let refused = RefusedPort::new();
    let (im, _) = start(
        &dir,
        &[
            "import",
            &key("stop"),
            "--to",
            "ring:quiet",
            "--connect",
            &refused.endpoint(),
            "--keep",
            "--stats",
            "--stats-json",
            json.to_str().unwrap(),
        ],
    );
    let get = Proc::spawn("pipe get quiet", dir.get("quiet", &[]));
    let deadline = Instant::now() + WATCHDOG;
    dir.wait_consumers("quiet", 1, deadline);
    sigterm(&im);
    let o = im.finish(deadline);
    assert_eq!(o.status.code(), Some(EXIT_STOPPED), "{}", stderr(&o));
    assert!(stderr(&o).contains("(stopped)"), "{}", stderr(&o));
    assert_eq!(stats(&json)["samples"], 0);
    let st = dir.stat("quiet").expect("the ring exists");
    assert_eq!(st["producer"]["state"], "failed", "{st}");
    assert_eq!(st["producer"]["error"], 125, "ECANCELED: {st}");
    assert_cut("stopped before the first sample", get, deadline);
}

/// `--connect-timeout`: nothing answers at the endpoint, so the import
/// fails (exit 1) saying it cannot reach it, and its reader sees the cut.
#[test]
fn an_unreachable_endpoint_fails_after_connect_timeout() {
    let dir = RingDir::new("bridge-unreach");
    let refused = RefusedPort::new();
    let ep = refused.endpoint();
    let (im, _) = start(
        &dir,
        &[
            "import",
            &key("unreach"),
            "--to",
            "ring:never-reached",
            "--connect",
            &ep,
            "--connect-timeout",
            "1.5",
            "--keep",
        ],
    );
    let get = Proc::spawn("pipe get", dir.get("never-reached", &[]));
    let deadline = Instant::now() + WATCHDOG;
    let o = im.finish(deadline);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot reach {ep} within --connect-timeout")),
        "{err}"
    );
    assert!(err.contains("no Zenoh peer reached"), "{err}");
    let st = dir.stat("never-reached").expect("the ring exists");
    assert_eq!(st["producer"]["state"], "failed", "{st}");
    assert_eq!(st["producer"]["error"], 110, "ETIMEDOUT: {st}");
    assert_cut("unreachable", get, deadline);
}

/// Without `--connect-timeout` the importer keeps retrying, and says so:
/// `ready` does not claim a connection.
#[test]
fn an_unreachable_endpoint_is_reported_while_retrying() {
    let dir = RingDir::new("bridge-retry");
    let refused = RefusedPort::new();
    let ep = refused.endpoint();
    let err_path = dir.0.join("import.err");
    let mut c = dir.cmd(&[
        "bridge",
        "import",
        &key("retry"),
        "--to",
        "ring:retry",
        "--connect",
        &ep,
    ]);
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut child = c.spawn().expect("spawn zcio bridge import");
    let deadline = Instant::now() + WATCHDOG;
    let want = format!("warning: cannot reach {ep} yet: retrying");
    // Bounded polling of its error output (the watchdog bounds it).
    while !std::fs::read_to_string(&err_path)
        .unwrap_or_default()
        .contains(&want)
    {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "watchdog: no {want:?}: {}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: kill(2) with the pid of our own, not yet reaped child.
    let r = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(r, 0, "kill(SIGTERM)");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(EXIT_STOPPED));
}

/// Issue 34: `zcio bridge import` removes the ring it created when it
/// ends — failed, stopped or complete (`a_pipe_crosses_two_bridges…`) —
/// unless `--keep`, and never a ring that existed before it.
#[test]
fn an_import_removes_the_ring_it_created_unless_kept() {
    let dir = RingDir::new("bridge-rm");
    let refused = RefusedPort::new();
    let ep = refused.endpoint();
    let deadline = Instant::now() + WATCHDOG;
    let import = |ring: &str, extra: &[&str]| {
        let (k, to) = (key(ring), format!("ring:{ring}"));
        let args = [&["import", &k, "--to", &to, "--connect", &ep][..], extra].concat();
        start(&dir, &args).0
    };
    // Failed: nothing reachable within --connect-timeout.
    let o = import("failed", &["--connect-timeout", "0.5"]).finish(deadline);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        ring_files(&dir),
        Vec::<String>::new(),
        "after a failed import"
    );
    // Stopped (SIGTERM), with a reader attached: it sees the cut.
    let im = import("stopped", &[]);
    let get = Proc::spawn("pipe get stopped", dir.get("stopped", &[]));
    dir.wait_consumers("stopped", 1, deadline);
    sigterm(&im);
    assert_eq!(im.finish(deadline).status.code(), Some(EXIT_STOPPED));
    assert_cut("a stopped import whose ring was removed", get, deadline);
    assert_eq!(
        ring_files(&dir),
        Vec::<String>::new(),
        "after a stopped import"
    );
    // A ring that existed before the import stays.
    assert_ok(
        "ring create",
        &dir.run(&["ring", "create", "existed", "--layout", "variable"]),
    );
    let im = import("existed", &[]);
    sigterm(&im);
    assert_eq!(im.finish(deadline).status.code(), Some(EXIT_STOPPED));
    assert_eq!(ring_files(&dir), ["existed"]);
    // --keep: the ring stays, closed with the import's error.
    let o = import("kept", &["--connect-timeout", "0.5", "--keep"]).finish(deadline);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(ring_files(&dir), ["existed", "kept"]);
    let st = dir.stat("kept").expect("kept");
    assert_eq!(st["producer"]["error"], 110, "{st}");
}

/// How a run of [`stopped_imports`] stops its importer.
#[derive(Clone, Copy, Debug)]
enum StopAt {
    /// Nothing listens at the endpoint it connects to.
    Unreachable,
    /// Connected to an exporter, nothing written yet.
    BeforeFirst,
    /// Right after the first block is written: the stop races its arrival.
    DuringFirst,
    /// Once the first block is in the imported ring.
    AfterFirst,
    /// Once 50 blocks are in the imported ring.
    AfterMany,
}

/// Issue 34's target: `runs` imports stopped (SIGTERM) before, during and
/// after the first sample, none after the exporter's end of stream; each
/// has a `pipe get` reader attached. Returns how many readers saw a clean
/// end (exit 0), and what else went wrong.
fn stopped_imports(runs: usize) -> (usize, Vec<String>) {
    use std::io::Write;
    let phases = [
        StopAt::Unreachable,
        StopAt::BeforeFirst,
        StopAt::DuringFirst,
        StopAt::AfterFirst,
        StopAt::AfterMany,
    ];
    let (mut clean, mut wrong) = (0, Vec::new());
    for run in 0..runs {
        let at = phases[run % phases.len()];
        let dir = RingDir::new(&format!("bridge-cut{run}"));
        let k = key(&format!("cut{run}"));
        let refused = RefusedPort::new();
        let deadline = Instant::now() + WATCHDOG;
        let mut keep = Vec::new(); // exporter and producer, killed on drop
        let mut stdin = None;
        let ep = if let StopAt::Unreachable = at {
            refused.endpoint()
        } else {
            assert_ok(
                "ring create",
                &dir.run(&[
                    "ring", "create", "src", "--layout", "variable", "--size", "1MiB",
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
                ],
            );
            keep.push(ex);
            ep
        };
        let (im, _) = start(&dir, &["import", &k, "--to", "ring:dst", "--connect", &ep]);
        let get = Proc::spawn("pipe get dst", dir.get("dst", &[]));
        dir.wait_consumers("dst", 1, deadline);
        if !matches!(at, StopAt::Unreachable) {
            // The exporter reads its ring once the importer's subscription
            // reached it: then the path is up.
            let mut c = dir.cmd(&["pipe", "put", "src", "--readers", "1"]);
            c.stdin(std::process::Stdio::piped());
            let mut put = Proc::spawn("pipe put src", c);
            stdin = put.child.stdin.take();
            keep.push(put);
            dir.wait_consumers("src", 1, deadline);
        }
        let blocks = match at {
            StopAt::Unreachable | StopAt::BeforeFirst => 0,
            StopAt::DuringFirst | StopAt::AfterFirst => 1,
            StopAt::AfterMany => 50,
        };
        if let Some(w) = stdin.as_mut() {
            for i in 0..blocks {
                w.write_all(&[i as u8; 1000]).unwrap();
                w.flush().unwrap();
            }
        }
        if matches!(at, StopAt::AfterFirst | StopAt::AfterMany) {
            let want = 1000 * blocks as u64;
            while dir
                .stat("dst")
                .map_or(0, |s| s["bytes"].as_u64().unwrap_or(0))
                < want
            {
                assert!(
                    Instant::now() < deadline,
                    "watchdog: run {run}: nothing arrived"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        sigterm(&im);
        let o = im.finish(deadline);
        if o.status.code() != Some(EXIT_STOPPED) {
            wrong.push(format!(
                "run {run} ({at:?}): import {:?}: {}",
                o.status,
                stderr(&o)
            ));
        }
        let g = get.finish(deadline);
        let err = stderr(&g);
        if g.status.success() {
            clean += 1;
        } else if !err.contains("incomplete") {
            wrong.push(format!(
                "run {run} ({at:?}): pipe get {:?}: {err}",
                g.status
            ));
        }
        drop(stdin);
        drop(keep);
    }
    (clean, wrong)
}

/// The fast variant of issue 34's target: one run per way of stopping.
#[test]
fn stopped_imports_are_never_clean_ends() {
    let (clean, wrong) = stopped_imports(5);
    assert_eq!(clean, 0, "clean ends of stopped imports; also: {wrong:?}");
    assert!(wrong.is_empty(), "{wrong:?}");
}

/// Issue 34's target: 0 clean ends in 20 runs where the importer is
/// stopped before, during and after the first sample without the
/// exporter's end of stream. Slow (a few seconds a run):
/// `cargo test -p zcio-cli --test bridge -- --ignored stopped_imports_20`.
#[test]
#[ignore = "20 runs; run on purpose (see the doc comment)"]
fn stopped_imports_20_runs_are_never_clean_ends() {
    let (clean, wrong) = stopped_imports(20);
    println!(
        "stopped imports, 20 runs: {clean} clean ends, {} other failures",
        wrong.len()
    );
    assert_eq!(clean, 0, "{wrong:?}");
    assert!(wrong.is_empty(), "{wrong:?}");
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
    let (im, _) = start(
        &dir,
        &["import", &k, "--to", "ring:dst", "--connect", &ep, "--keep"],
    );
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
    let o = im.finish(deadline);
    assert_eq!(o.status.code(), Some(EXIT_STOPPED), "{}", stderr(&o));
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
            &[
                "import",
                "k",
                "--to",
                "ring:never",
                "--connect-timeout",
                "0",
            ],
            "--connect-timeout",
        ),
        (
            &["import", "k", "--to", "connect:/x.sock", "--size", "1MiB"],
            "apply only to ring sinks",
        ),
        (
            &["import", "k", "--to", "connect:/x.sock", "--keep"],
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

/// Each cause is printed once: a missing ring source is named in one
/// sentence, not in the bridge's message and again as its cause.
#[test]
fn a_missing_ring_source_is_reported_once() {
    let dir = RingDir::new("bridge-missing");
    let ring = format!("missing-{}", std::process::id());
    let o = dir.run(&[
        "bridge",
        "export",
        &format!("ring:{ring}"),
        "--key",
        &key("missing"),
        "--no-wait",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.matches("no ring named").count(), 1, "{err}");
    assert!(err.contains(&ring), "{err}");
}

/// An existing ring sink is checked against the options the user gave,
/// not against the defaults of a new sink: a variable ring of any size is
/// taken; a continuous one is refused for its layout, naming the layouts
/// an import can use, without blaming a `--layout` that was not given.
#[test]
fn an_existing_ring_sink_is_checked_against_what_was_given() {
    let dir = RingDir::new("bridge-sink");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let nowhere = format!("tcp/127.0.0.1:{port}");
    assert_ok(
        "ring create",
        &dir.run(&[
            "ring",
            "create",
            "cont",
            "--size",
            "1MiB",
            "--layout",
            "continuous",
        ]),
    );
    let o = dir.run(&[
        "bridge",
        "import",
        &key("sink"),
        "--to",
        "ring:cont",
        "--connect",
        &nowhere,
        "--duration",
        "2",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for want in ["message-preserving", "variable, slotted or descriptors"] {
        assert!(err.contains(want), "{want:?} not in: {err}");
    }
    assert!(!err.contains("not --layout"), "{err}");
    assert_eq!(
        dir.stat("cont").expect("still there")["layout"],
        "continuous"
    );

    assert_ok(
        "ring create",
        &dir.run(&[
            "ring", "create", "var", "--size", "1MiB", "--layout", "variable",
        ]),
    );
    let o = dir.run(&[
        "bridge",
        "import",
        &key("sink"),
        "--to",
        "ring:var",
        "--connect",
        &nowhere,
        "--duration",
        "0.5",
    ]);
    // Taken (it starts and runs until --duration), not refused for a size
    // that the user did not give.
    let err = stderr(&o);
    assert_ne!(o.status.code(), Some(2), "{err}");
    assert!(o.stdout.starts_with(b"ready"), "{err}");
    assert!(!err.contains("already exists as"), "{err}");
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
