//! The registry tools with the real binary: `zcio stat`, `top`, `hz`,
//! `echo` and `metrics`. Entries with known counters are registered by a
//! child — this test executable itself, run in child mode
//! (`ZCIO_TOOLS_CHILD`), which registers entries and sets their counters
//! as told over its stdin, answering each command — so every value the
//! tools show is known. Children run under a watchdog; nothing asserts on
//! timing (rates are only checked through the exact message and byte
//! counts of the windows they cover).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use zcio_sys::registry::schema::{channel, consumer, producer};
use zcio_sys::registry::{Kind, RunDir, StatsPage};

const CHILD: &str = "ZCIO_TOOLS_CHILD";

/// Child mode: `reg KIND NAME`, `set I INDEX VALUE`, `add I INDEX VALUE`;
/// each answered by a line `@@ ok ...` (or `@@ err ...`). Ends at EOF.
#[test]
fn registrar_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let run = std::env::var_os("ZCIO_RUN_DIR").expect("ZCIO_RUN_DIR");
    let dir = RunDir::open(Path::new(&run)).expect("run dir");
    let mut pages: Vec<StatsPage> = Vec::new();
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let w: Vec<&str> = line.split_whitespace().collect();
        let reply = match w.as_slice() {
            ["reg", kind, name] => {
                let kind = Kind::ALL
                    .into_iter()
                    .find(|k| k.as_str() == *kind)
                    .expect("a kind");
                let r = dir.register(kind, name, 0o640).expect("register");
                let file = r
                    .path()
                    .file_name()
                    .and_then(|f| f.to_str())
                    .unwrap_or_default()
                    .to_owned();
                pages.push(StatsPage::from_entry(r));
                format!("ok {} {file}", pages.len() - 1)
            }
            ["set", i, idx, v] => {
                pages[i.parse::<usize>().unwrap()].set(idx.parse().unwrap(), v.parse().unwrap());
                "ok".into()
            }
            ["add", i, idx, v] => {
                pages[i.parse::<usize>().unwrap()].add(idx.parse().unwrap(), v.parse().unwrap());
                "ok".into()
            }
            _ => format!("err {line}"),
        };
        writeln!(out, "@@ {reply}").unwrap();
        out.flush().unwrap();
    }
}

/// The registrar child and a private run directory (and ring directory).
struct Registrar {
    dir: RingDir,
    run: PathBuf,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Registrar {
    fn new(tag: &str) -> Self {
        let dir = RingDir::new(tag);
        let run = dir.0.join("run");
        let mut child = Command::new(std::env::current_exe().expect("test executable"))
            .args([
                "registrar_child",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .env("ZCIO_RUN_DIR", &run)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the registrar child");
        let stdin = child.stdin.take().expect("piped");
        let out = child.stdout.take().expect("piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                // The test harness may print before it on the same line.
                if let Some(i) = l.find("@@ ") {
                    if tx.send(l[i + 3..].to_owned()).is_err() {
                        break;
                    }
                }
            }
        });
        Registrar {
            dir,
            run,
            child,
            stdin,
            lines,
        }
    }

    fn say(&mut self, cmd: &str) -> String {
        writeln!(self.stdin, "{cmd}").expect("tell the registrar");
        self.stdin.flush().expect("flush");
        let r = self
            .lines
            .recv_timeout(WATCHDOG)
            .unwrap_or_else(|e| panic!("watchdog: the registrar did not answer {cmd:?}: {e}"));
        assert!(r.starts_with("ok"), "{cmd}: {r}");
        r
    }

    /// Register; returns (page index, entry file).
    fn reg(&mut self, kind: &str, name: &str) -> (usize, String) {
        let r = self.say(&format!("reg {kind} {name}"));
        let w: Vec<&str> = r.split_whitespace().collect();
        (w[1].parse().expect("index"), w[2].to_owned())
    }

    fn set(&mut self, i: usize, idx: usize, v: u64) {
        self.say(&format!("set {i} {idx} {v}"));
    }

    fn add(&mut self, i: usize, idx: usize, v: u64) {
        self.say(&format!("add {i} {idx} {v}"));
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.dir.cmd(args);
        c.env("ZCIO_RUN_DIR", &self.run);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut c = self.cmd(args);
        c.stdin(Stdio::null());
        Proc::spawn(&args.join(" "), c).finish(Instant::now() + WATCHDOG)
    }

    fn json(&self, args: &[&str]) -> Value {
        let o = self.run(args);
        assert_ok(&args.join(" "), &o);
        serde_json::from_slice(&o.stdout).expect("JSON")
    }
}

impl Drop for Registrar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn stat_shows_every_counter_the_peer_and_the_ring() {
    let mut r = Registrar::new("stat");
    let (a, fa) = r.reg("channel", "/tmp/zt-a.sock");
    let (b, fb) = r.reg("channel", "/tmp/zt-a.sock");
    for (i, conn) in [(a, 77), (b, 77)] {
        r.set(i, channel::CONNECTION, conn);
    }
    r.set(a, channel::SENT_MESSAGES, 5);
    r.set(a, channel::SENT_BYTES, 5000);
    r.set(a, channel::HELD_BY_PEER_BUFFERS, 2);
    r.set(b, channel::RECEIVED_SLICES, 2);

    // Two ends share the name: listed, with how to pick one.
    let o = r.run(&["stat", "channel:/tmp/zt-a.sock"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("2 objects match") && e.contains(&fa) && e.contains(&fb),
        "{e}"
    );

    let v = r.json(&["stat", &fa, "--json"]);
    assert_eq!(v["kind"], "channel");
    assert_eq!(v["counters"]["sent_messages"]["value"], 5);
    assert_eq!(v["counters"]["sent_bytes"]["unit"], "bytes");
    assert_eq!(v["counters"]["sent_bytes"]["type"], "counter");
    assert_eq!(v["peer"]["file"].as_str(), Some(fb.as_str()));
    assert_eq!(v["held"]["held_by_peer_buffers"], 2);
    assert_eq!(v["mode"], "0440");
    let v = r.json(&["stat", &fb, "--json"]);
    assert_eq!(v["peer"]["file"].as_str(), Some(fa.as_str()));
    assert_eq!(v["held"]["holding_buffers"], 2);

    let o = r.run(&["stat", &fa]);
    assert_ok("stat", &o);
    let t = text(&o);
    assert!(t.starts_with("channel /tmp/zt-a.sock\n"), "{t}");
    for want in [
        "sent_messages",
        "4.9 KiB",
        "payload bytes sent",
        "peer",
        &fb,
    ] {
        assert!(t.contains(want), "{want} missing:\n{t}");
    }

    let (p, fp) = r.reg("producer", "zt-ring");
    let (c, _) = r.reg("consumer", "zt-ring");
    r.set(p, producer::HEAD, 8192);
    r.set(c, consumer::POSITION, 4096);
    r.set(c, consumer::LAG_BYTES, 4096);
    let v = r.json(&["stat", "consumer:zt-ring", "--json"]);
    let ends = v["ring"].as_array().expect("the ring's ends");
    assert_eq!(ends.len(), 2, "{v}");
    assert_eq!(ends[0]["file"].as_str(), Some(fp.as_str()));
    assert_eq!(ends[1]["lag_bytes"], 4096);
    let v = r.json(&["stat", "ring:zt-ring", "--json"]);
    assert_eq!(v["kind"], "producer", "ring:NAME is the producer");
    assert_eq!(v["ring"].as_array().map(Vec::len), Some(2));
    let t = text(&r.run(&["stat", "producer:zt-ring"]));
    assert!(
        t.contains("ring zt-ring ends:") && t.contains("4 KiB"),
        "{t}"
    );

    let o = r.run(&["stat", "no-such-object"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("zcio ls"), "{}", stderr(&o));
}

#[test]
fn top_once_lists_every_object_with_its_totals() {
    let mut r = Registrar::new("top");
    let (p, _) = r.reg("producer", "zt-top");
    r.set(p, producer::BLOCKS, 10);
    r.set(p, producer::BYTES, 1000);
    r.reg("listener", "/tmp/zt-top.sock");
    let v = r.json(&["top", "--once", "--interval", "20ms", "--json"]);
    let rows = v.as_array().expect("rows");
    let row = rows
        .iter()
        .find(|x| x["name"] == "zt-top")
        .expect("the producer");
    assert_eq!(row["messages"], 10);
    assert_eq!(row["bytes"], 1000);
    // Nothing moved between the two samples.
    assert_eq!(row["messages_per_s"], 0.0);
    let l = rows
        .iter()
        .find(|x| x["kind"] == "listener")
        .expect("the listener");
    assert_eq!(l["messages_per_s"], Value::Null, "no traffic counters");
    let o = r.run(&["top", "--once", "--interval", "20ms"]);
    assert_ok("top --once", &o);
    let t = text(&o);
    assert!(t.starts_with("kind "), "{t}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("producer") && l.contains("zt-top") && l.contains("1000 B")),
        "{t}"
    );
    // Without a terminal, the live view says what to use instead.
    let o = r.run(&["top"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--once"), "{}", stderr(&o));
}

#[test]
fn hz_counts_the_messages_of_each_window() {
    let mut r = Registrar::new("hz");
    let (p, file) = r.reg("producer", "zt-hz");
    r.set(p, producer::BLOCKS, 3);
    r.set(p, producer::BYTES, 300);
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let mut c = r.cmd(&["hz", &file, "--window", "50ms", "--count", "1000", "--json"]);
    let hz = Proc::spawn_with("hz", &mut c, move |o| {
        for l in BufReader::new(o).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
        Vec::new()
    });
    let deadline = Instant::now() + WATCHDOG;
    let next = |rx: &Receiver<String>| -> Value {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => serde_json::from_str(&l).expect("a JSON line"),
            Err(RecvTimeoutError::Timeout) => panic!("watchdog: hz printed nothing"),
            Err(e) => panic!("hz ended: {e}"),
        }
    };
    let first = next(&rx);
    assert_eq!(first["total_messages"], 3);
    assert_eq!(first["messages"], 0);
    // 7 messages of 100 bytes: whichever windows see them, they add up.
    r.add(p, producer::BYTES, 700);
    r.add(p, producer::BLOCKS, 7);
    let (mut m, mut b) = (0, 0);
    while m < 7 || b < 700 {
        let v = next(&rx);
        m += v["messages"].as_u64().expect("messages");
        b += v["bytes"].as_u64().expect("bytes");
        if v["messages"] == 7 && v["bytes"] == 700 {
            assert_eq!(v["mean_bytes"], 100.0);
        }
    }
    assert_eq!((m, b), (7, 700));
    drop(hz);
    let (_, lf) = r.reg("listener", "/tmp/zt-hz.sock");
    let o = r.run(&["hz", &lf, "--count", "1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("counts no messages"), "{}", stderr(&o));
    let o = r.run(&["hz", &file, "--window", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn echo_prints_blocks_as_text_or_hex_bounded() {
    let r = Registrar::new("echo");
    let deadline = Instant::now() + WATCHDOG;
    assert_ok(
        "ring create",
        &r.run(&["ring", "create", "zt-echo", "--size", "64KiB"]),
    );
    let echo = Proc::spawn("echo", r.cmd(&["echo", "ring:zt-echo", "--max-bytes", "5"]));
    r.dir.wait_consumers("zt-echo", 1, deadline);
    let data = std::sync::Arc::new(b"hello world\n".to_vec());
    let (put, feeder) = r.dir.put_fed("zt-echo", 1, &[], &data);
    assert_ok("put", &put.finish(deadline));
    feeder.join().expect("feeder");
    let o = echo.finish(deadline);
    assert_ok("echo", &o);
    let t = text(&o);
    assert!(t.starts_with("-- block 0: 12 B"), "{t}");
    assert!(t.contains("\nhello\n… 7 more bytes\n"), "{t}");
    assert!(t.ends_with("(end of stream)\n"), "{t}");

    let echo = Proc::spawn("echo hex", r.cmd(&["echo", "zt-echo", "--count", "1"]));
    r.dir.wait_consumers("zt-echo", 1, deadline);
    let data = std::sync::Arc::new(vec![0u8, 1, 2, 0x41]);
    // --readers 0: echo, attached already, may leave before the producer
    // closes (after its one block).
    let (put, feeder) = r.dir.put_fed("zt-echo", 0, &[], &data);
    let o = echo.finish(deadline);
    assert_ok("put", &put.finish(deadline));
    feeder.join().expect("feeder");
    assert_ok("echo", &o);
    let t = text(&o);
    assert!(
        t.contains("00000000  00 01 02 41") && t.contains("|...A|"),
        "{t}"
    );
    assert!(!t.contains("end of stream"), "stopped after --count 1: {t}");

    let o = r.run(&["echo", "ring:zt-missing"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("zcio ring ls"), "{}", stderr(&o));
}

/// GET `path` from `addr`; (status line, body).
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(WATCHDOG)).expect("timeout");
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut r = String::new();
    s.read_to_string(&mut r).expect("read the response");
    let (head, body) = r.split_once("\r\n\r\n").expect("a response head");
    (head.to_owned(), body.to_owned())
}

/// A Python with `prometheus_client`: `$ZCIO_PYTHON` (then it must have
/// it), else the venv of scripts/test-python, else python3.
fn python() -> Option<PathBuf> {
    let has = |p: &Path| {
        Command::new(p)
            .args(["-c", "import prometheus_client"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if let Some(p) = std::env::var_os("ZCIO_PYTHON") {
        let p = PathBuf::from(p);
        assert!(
            has(&p),
            "ZCIO_PYTHON={} has no prometheus_client",
            p.display()
        );
        return Some(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    [root.join("target/py-venv/bin/python"), "python3".into()]
        .into_iter()
        .find(|p| has(p))
}

/// The samples of an exposition as the Python OpenMetrics parser reads
/// them: `[name, labels, value]` each.
fn parse_with_python(py: &Path, body: &str) -> Vec<Value> {
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        out.append([s.name, s.labels, s.value, fam.type])
print(json.dumps(out))
"#;
    let mut c = Command::new(py);
    c.args(["-c", script]).stdin(Stdio::piped());
    let mut p = Proc::spawn("python parser", c);
    p.child
        .stdin
        .take()
        .expect("piped")
        .write_all(body.as_bytes())
        .expect("feed the parser");
    let o = p.finish(Instant::now() + WATCHDOG);
    assert_ok("the Python OpenMetrics parser", &o);
    serde_json::from_slice::<Value>(&o.stdout)
        .expect("JSON")
        .as_array()
        .expect("samples")
        .clone()
}

#[test]
fn metrics_serves_every_counter_with_its_known_value() {
    let mut r = Registrar::new("metrics");
    let (a, fa) = r.reg("channel", "/tmp/zt-m.sock");
    r.set(a, channel::SENT_MESSAGES, 1234);
    r.set(a, channel::SENT_BYTES, 1234 * 4096);
    r.set(a, channel::RECEIVED_SLICES, 5);
    r.set(a, channel::ENDED_SLICES, 2);
    let (c, fc) = r.reg("consumer", "zt-m");
    r.set(c, consumer::BLOCKS, 99);
    r.set(c, consumer::LAG_BYTES, 65536);

    let (server, line) = spawn_first_line(
        "metrics --listen",
        &mut r.cmd(&["metrics", "--listen", "127.0.0.1:0"]),
    );
    let addr = line
        .trim()
        .strip_prefix("http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("first line is the URL: {line:?}"))
        .to_owned();
    // A client that sends nothing holds one connection, not the server.
    let idle = TcpStream::connect(&addr).expect("connect");
    // A malformed request ends only its own connection.
    {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.set_read_timeout(Some(WATCHDOG)).expect("timeout");
        s.write_all(b"\x00\x01 garbage\r\n\r\n").expect("send");
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink);
    }
    let (head, _) = get(&addr, "/nope");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    let (head, body) = get(&addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    drop(idle);
    drop(server);
    let want_line = format!(
        "zcio_channel_sent_messages_total{{name=\"/tmp/zt-m.sock\",pid=\"{}\",entry=\"{fa}\"}} 1234\n",
        r.child.id()
    );
    assert!(body.contains(&want_line), "{want_line} missing:\n{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");

    let Some(py) = python() else {
        eprintln!("skipped: the independent parse (no Python with prometheus_client; scripts/test-python installs it into target/py-venv)");
        return;
    };
    let samples = parse_with_python(&py, &body);
    let find = |name: &str, entry: &str| -> Option<(f64, String)> {
        samples.iter().find_map(|s| {
            (s[0] == name && s[1]["entry"] == entry).then(|| {
                (
                    s[2].as_f64().unwrap_or(-1.0),
                    s[3].as_str().unwrap_or("").to_owned(),
                )
            })
        })
    };
    let pid = r.child.id().to_string();
    for (name, entry, want, ty) in [
        ("zcio_channel_sent_messages_total", &fa, 1234.0, "counter"),
        (
            "zcio_channel_sent_bytes_total",
            &fa,
            1234.0 * 4096.0,
            "counter",
        ),
        ("zcio_channel_holding_buffers", &fa, 3.0, "gauge"),
        ("zcio_channel_received_messages_total", &fa, 0.0, "counter"),
        ("zcio_consumer_read_blocks_total", &fc, 99.0, "counter"),
        ("zcio_consumer_lag_bytes", &fc, 65536.0, "gauge"),
    ] {
        assert_eq!(
            find(name, entry),
            Some((want, ty.to_owned())),
            "{name} of {entry}"
        );
    }
    let labels = samples
        .iter()
        .find(|s| s[0] == "zcio_consumer_lag_bytes")
        .map(|s| s[1].clone())
        .expect("lag");
    assert_eq!(labels["name"], "zt-m");
    assert_eq!(labels["pid"].as_str(), Some(pid.as_str()));
    let objects: Vec<&Value> = samples.iter().filter(|s| s[0] == "zcio_objects").collect();
    assert!(objects
        .iter()
        .any(|s| s[1]["kind"] == "channel" && s[1]["state"] == "live" && s[2] == 1.0));
    assert!(samples
        .iter()
        .any(|s| s[0] == "zcio_registry_invalid" && s[2] == 0.0));

    // --once prints the same families.
    let o = r.run(&["metrics", "--once"]);
    assert_ok("metrics --once", &o);
    assert!(text(&o).contains(&want_line));
    let t = text(&r.run(&["metrics", "--list"]));
    assert!(t.contains("| `zcio_consumer_lag_bytes` | gauge |"), "{t}");
}

/// tmux with a private server socket, killed when dropped.
struct Tmux(PathBuf);

impl Tmux {
    fn cmd(&self, args: &[&str]) -> Output {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.0).args(args).stdin(Stdio::null());
        Proc::spawn(&format!("tmux {}", args.join(" ")), c).finish(Instant::now() + WATCHDOG)
    }
    fn show(&self, session: &str, what: &str) -> String {
        text(&self.cmd(&["display-message", "-p", "-t", session, what]))
            .trim()
            .to_owned()
    }
    fn screen(&self, session: &str) -> String {
        text(&self.cmd(&["capture-pane", "-p", "-t", session]))
    }
    /// Poll the pane until `ok` holds for its screen (bounded by the watchdog).
    fn wait_screen(&self, session: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WATCHDOG;
        loop {
            let s = self.screen(session);
            if ok(&s) {
                return s;
            }
            assert!(Instant::now() < deadline, "watchdog: {what}:\n{s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    /// `zcio top` in a new session of a 120x20 terminal, once it shows `name`.
    fn top(&self, session: &str, run: &Path, name: &str) -> String {
        // The shell records top's exit status (tmux's own report of it
        // can be missed when the terminal closes first).
        let line = format!(
            "env ZCIO_RUN_DIR='{}' '{}' top --interval 100ms; echo \"exit=$?\" > '{}'",
            run.display(),
            env!("CARGO_BIN_EXE_zcio"),
            self.status_file(session).display()
        );
        let o = self.cmd(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "120",
            "-y",
            "20",
            &line,
        ]);
        assert_ok("tmux new-session", &o);
        // The pane stays after top exits, so its status can be read.
        let o = self.cmd(&["set-option", "-t", session, "remain-on-exit", "on"]);
        assert_ok("tmux set-option", &o);
        let screen = self.wait_screen(session, "top never showed the object", |s| {
            s.contains(name) && s.contains("zcio top")
        });
        assert_eq!(
            self.show(session, "#{alternate_on}"),
            "1",
            "top uses the alternate screen"
        );
        screen
    }
    fn status_file(&self, session: &str) -> PathBuf {
        self.0.with_file_name(format!("{session}.status"))
    }
    /// The pid of top: the child of the pane's shell.
    fn top_pid(&self, session: &str) -> i32 {
        let shell = self.show(session, "#{pane_pid}");
        let deadline = Instant::now() + WATCHDOG;
        loop {
            for d in std::fs::read_dir("/proc").expect("/proc").flatten() {
                let stat = std::fs::read_to_string(d.path().join("stat")).unwrap_or_default();
                // pid (comm) state ppid ...: comm may hold spaces, so after ')'.
                let ppid = stat
                    .rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1));
                if ppid == Some(shell.as_str()) {
                    if let Some(pid) = d.file_name().to_str().and_then(|p| p.parse().ok()) {
                        return pid;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "watchdog: no child of the pane's shell {shell}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    /// Wait until top has ended; then it ended with status 0 and left the
    /// terminal as it was.
    fn ended_cleanly(&self, session: &str, name: &str) {
        let deadline = Instant::now() + WATCHDOG;
        let f = self.status_file(session);
        let status = loop {
            match std::fs::read_to_string(&f) {
                Ok(s) if s.ends_with('\n') => break s,
                _ => {}
            }
            assert!(
                Instant::now() < deadline,
                "watchdog: top in session {session} did not end:\n{}",
                self.screen(session)
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status, "exit=0\n", "top exits with status 0");
        assert_eq!(
            self.show(session, "#{alternate_on}"),
            "0",
            "the terminal left the alternate screen"
        );
        let after = self.screen(session);
        assert!(!after.contains(name), "the screen is restored:\n{after}");
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

#[test]
fn top_runs_in_a_terminal_and_quits_cleanly() {
    if !Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: no tmux");
        return;
    }
    let mut r = Registrar::new("top-tty");
    let (p, _) = r.reg("producer", "zt-tty");
    r.set(p, producer::BYTES, 4096);
    let t = Tmux(r.dir.0.join("tmux.sock"));

    // q quits; s cycles the sort key first.
    let screen = t.top("q", &r.run, "zt-tty");
    assert!(
        screen.contains("bytes/s") && screen.contains("4 KiB"),
        "{screen}"
    );
    let path = std::env::temp_dir().join(format!("zcio-top-screen-{}.txt", std::process::id()));
    if std::fs::write(&path, &screen).is_ok() {
        eprintln!("the captured screen: {}", path.display());
    }
    assert_ok("send s", &t.cmd(&["send-keys", "-t", "q", "s"]));
    t.wait_screen("q", "s did not change the sort key", |s| {
        s.contains("sorted by msg/s")
    });
    assert_ok("send q", &t.cmd(&["send-keys", "-t", "q", "q"]));
    t.ended_cleanly("q", "zt-tty");

    // SIGTERM leaves through the same exit.
    t.top("term", &r.run, "zt-tty");
    let pid = t.top_pid("term");
    // SAFETY: kill(2) of top, which runs until it is told to end; its
    // parent shell waits for it, so the pid is not reused meanwhile.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "kill");
    t.ended_cleanly("term", "zt-tty");
}
