//! zcio between containers: processes in separate namespaces made with
//! `unshare` (as root), sharing only the ring directory.
//!
//! - A ring between two PID namespaces: `zcio pipe put` in this one,
//!   `zcio pipe get` in a new one (`unshare --pid --fork --mount-proc`),
//!   byte-exact; `zcio ring stat` says the reader lives in another PID
//!   namespace; kill -9 of either side is detected on the other, no hang;
//!   every overflow policy sees its reader there as alive and ends cleanly.
//!
//! - `zcio bridge` between two network namespaces joined by a veth pair
//!   (`ip netns`): a pipe byte-exact across them; kill -9 of the exporter is
//!   no clean end for the reader on the other host.
//!
//! A test that cannot make the namespaces (not root, or unshare refused)
//! prints `skipped: <reason>` and passes.

mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::*;

/// Why namespaces cannot be made here, if they cannot.
fn cannot_unshare(flags: &[&str]) -> Option<String> {
    let o = Command::new("unshare")
        .args(flags)
        .arg("true")
        .stdin(Stdio::null())
        .output();
    match o {
        Err(e) => Some(format!("unshare not runnable: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "unshare {} refused: {}",
            flags.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}

const PIDNS: [&str; 4] = ["--pid", "--fork", "--mount-proc", "--kill-child"];

/// `zcio ARGS…` in a new PID (+ mount, for its /proc) namespace, with the
/// test's ring directory. `--kill-child`: killing the `unshare` process
/// kills the namespace's first process too.
fn in_pidns(dir: &RingDir, args: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    c.args(PIDNS)
        .arg(env!("CARGO_BIN_EXE_zcio"))
        .args(args)
        .env("ZCIO_RING_DIR", &dir.0);
    c
}

macro_rules! skip_without {
    ($flags:expr) => {
        if let Some(why) = cannot_unshare(&$flags) {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

#[test]
fn a_ring_between_two_pid_namespaces_is_byte_exact() {
    skip_without!(PIDNS);
    let dir = RingDir::new("pidns");
    let deadline = Instant::now() + WATCHDOG;
    let data = std::sync::Arc::new(random(INPUT, 0x5151));
    assert_ok(
        "create",
        &dir.run(&["ring", "create", "pn", "--size", "8MiB"]),
    );
    let get = Proc::spawn("pipe get pn (other PID namespace)", {
        let mut c = in_pidns(&dir, &["pipe", "get", "pn"]);
        c.stdin(Stdio::null());
        c
    });
    dir.wait_consumers("pn", 1, deadline);
    let st = dir.stat("pn").expect("stat");
    let c = &st["consumers"][0];
    assert_eq!(c["alive"], true, "{st}");
    assert_eq!(c["other_pid_namespace"], true, "{st}");
    let (put, feeder) = dir.put_fed("pn", 1, &[], &data);
    assert_ok("put", &put.finish(deadline));
    feeder.join().expect("feeder");
    let o = get.finish(deadline);
    assert_ok("get in another PID namespace", &o);
    assert_same("get in another PID namespace", &o.stdout, &data);
}

/// A rootless container: a user namespace (our uid mapped to its root) with
/// its own PID and mount namespaces.
const USERNS: [&str; 6] = [
    "--user",
    "--map-root-user",
    "--pid",
    "--fork",
    "--mount-proc",
    "--kill-child",
];

#[test]
fn a_ring_to_a_reader_in_a_user_namespace_is_byte_exact() {
    skip_without!(USERNS);
    let dir = RingDir::new("userns");
    let deadline = Instant::now() + WATCHDOG;
    let data = std::sync::Arc::new(random(INPUT, 0x5152));
    assert_ok(
        "create",
        &dir.run(&["ring", "create", "un", "--size", "8MiB"]),
    );
    let get = Proc::spawn("pipe get un (user namespace)", {
        let mut c = Command::new("unshare");
        c.args(USERNS)
            .arg(env!("CARGO_BIN_EXE_zcio"))
            .args(["pipe", "get", "un"])
            .env("ZCIO_RING_DIR", &dir.0)
            .stdin(Stdio::null());
        c
    });
    dir.wait_consumers("un", 1, deadline);
    let (put, feeder) = dir.put_fed("un", 1, &[], &data);
    assert_ok("put", &put.finish(deadline));
    feeder.join().expect("feeder");
    let o = get.finish(deadline);
    assert_ok("get in a user namespace", &o);
    assert_same("get in a user namespace", &o.stdout, &data);
}

#[test]
fn every_overflow_policy_sees_its_reader_in_another_pid_namespace() {
    skip_without!(PIDNS);
    for policy in ["block", "srp", "frp", "mrp"] {
        let dir = RingDir::new(&format!("pidns-{policy}"));
        let deadline = Instant::now() + WATCHDOG;
        let data = std::sync::Arc::new(random(8 << 20, 0x77));
        let create = ["--size", "1MiB", "--policy", policy];
        assert_ok(
            "create",
            &dir.run(&[&["ring", "create", "po"][..], &create].concat()),
        );
        let get = Proc::spawn(&format!("pipe get po ({policy}, other PID namespace)"), {
            let mut c = in_pidns(&dir, &["pipe", "get", "po"]);
            c.stdin(Stdio::null());
            c
        });
        dir.wait_consumers("po", 1, deadline);
        let st = dir.stat("po").expect("stat");
        let c = &st["consumers"][0];
        assert_eq!(c["alive"], true, "{policy}: {st}");
        assert_eq!(c["other_pid_namespace"], true, "{policy}: {st}");
        let (put, feeder) = dir.put_fed("po", 1, &[], &data);
        assert_ok(&format!("put ({policy})"), &put.finish(deadline));
        feeder.join().expect("feeder");
        let o = get.finish(deadline);
        assert_ok(&format!("get ({policy}, other PID namespace)"), &o);
        if policy == "block" {
            assert_same("get (block)", &o.stdout, &data);
        } else {
            // The lossy policies may drop or skip what a slow reader missed;
            // never more than was written, and the end is a clean end.
            assert!(
                o.stdout.len() <= data.len(),
                "{policy}: {} bytes",
                o.stdout.len()
            );
        }
    }
}

#[test]
fn a_producer_killed_in_another_pid_namespace_is_reported() {
    skip_without!(PIDNS);
    let dir = RingDir::new("pidns-kp");
    assert_ok(
        "create",
        &dir.run(&["ring", "create", "kp", "--size", "256KiB"]),
    );
    let put = in_pidns(&dir, &["pipe", "put", "kp"]);
    killed_producer_is_reported(&dir, "kp", &[], put);
}

#[test]
fn a_reader_killed_in_another_pid_namespace_is_evicted() {
    skip_without!(PIDNS);
    let dir = RingDir::new("pidns-kr");
    assert_ok(
        "create",
        &dir.run(&["ring", "create", "kr", "--size", "256KiB"]),
    );
    let victim = in_pidns(&dir, &["pipe", "get", "kr"]);
    killed_reader_is_evicted(&dir, "kr", &[], victim);
}

/// Two network namespaces joined by a veth pair (addresses that exist only
/// inside them), removed on drop.
struct TwoHosts {
    a: String,
    b: String,
    addr_a: String,
}

impl TwoHosts {
    fn ip(args: &[&str]) -> Result<(), String> {
        let o = Command::new("ip")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("ip: {e}"))?;
        if o.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ip {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        }
    }

    /// The two hosts of test number `t` (tests run at once in one
    /// process: each gets its own names and subnet), or why they cannot be
    /// made here.
    fn new(t: u8) -> Result<Self, String> {
        let id = std::process::id();
        let hosts = Self {
            a: format!("zct{id}-{t}a"),
            b: format!("zct{id}-{t}b"),
            addr_a: format!("10.{}.{}.1", 240 + t, id % 250),
        };
        let addr_b = format!("10.{}.{}.2", 240 + t, id % 250);
        let (va, vb) = (format!("zv{id}{t}a"), format!("zv{id}{t}b"));
        Self::ip(&["netns", "add", &hosts.a])?;
        Self::ip(&["netns", "add", &hosts.b])?;
        Self::ip(&[
            "link", "add", &va, "netns", &hosts.a, "type", "veth", "peer", "name", &vb, "netns",
            &hosts.b,
        ])?;
        for (ns, dev, addr) in [(&hosts.a, &va, &hosts.addr_a), (&hosts.b, &vb, &addr_b)] {
            let cidr = format!("{addr}/24");
            Self::ip(&["-n", ns, "addr", "add", &cidr, "dev", dev])?;
            Self::ip(&["-n", ns, "link", "set", dev, "up"])?;
            Self::ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    /// `zcio ARGS` in host `ns`, with the test's ring directory.
    fn zcio(&self, ns: &str, dir: &RingDir, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns])
            .arg(env!("CARGO_BIN_EXE_zcio"))
            .args(args)
            .env("ZCIO_RING_DIR", &dir.0)
            .stdin(Stdio::null());
        c
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        let _ = Self::ip(&["netns", "del", &self.a]);
        let _ = Self::ip(&["netns", "del", &self.b]);
    }
}

/// Host A's exporter of ring `src` and host B's importer into `dst`.
fn bridges(hosts: &TwoHosts, dir: &RingDir, key: &str) -> (Proc, Proc) {
    let listen = format!("tcp/{}:0", hosts.addr_a);
    let (ex, line) = spawn_first_line(
        "bridge export (host A)",
        &mut hosts.zcio(
            &hosts.a,
            dir,
            &[
                "bridge", "export", "ring:src", "--key", key, "--listen", &listen,
            ],
        ),
    );
    let ep = line
        .strip_prefix("ready")
        .map(str::trim)
        .unwrap_or_else(|| panic!("export: first line {line:?}"))
        .to_string();
    assert!(ep.starts_with(&format!("tcp/{}:", hosts.addr_a)), "{ep}");
    let (im, line) = spawn_first_line(
        "bridge import (host B)",
        &mut hosts.zcio(
            &hosts.b,
            dir,
            &[
                "bridge",
                "import",
                key,
                "--to",
                "ring:dst",
                "--connect",
                &ep,
            ],
        ),
    );
    assert!(line.starts_with("ready"), "import: first line {line:?}");
    (ex, im)
}

/// Two hosts (test number `t`), a ring `src` and the bridges carrying it
/// to `dst` on host B; `None` (said) where the namespaces cannot be made.
fn bridged(t: u8, tag: &str) -> Option<(TwoHosts, RingDir, Proc, Proc)> {
    let hosts = match TwoHosts::new(t) {
        Ok(h) => h,
        Err(why) => {
            eprintln!("skipped: two network namespaces: {why}");
            return None;
        }
    };
    let dir = RingDir::new(tag);
    let key = format!("zcio-cli-test/{tag}/{}", std::process::id());
    assert_ok(
        "ring create",
        &dir.run(&[
            "ring", "create", "src", "--layout", "variable", "--size", "4MiB",
        ]),
    );
    let (ex, im) = bridges(&hosts, &dir, &key);
    Some((hosts, dir, ex, im))
}

#[test]
fn a_killed_exporter_in_another_network_namespace_is_no_clean_end() {
    let Some((_hosts, dir, mut ex, im)) = bridged(1, "netns-bridge-kill") else {
        return;
    };
    let deadline = Instant::now() + WATCHDOG;
    let (tx, rx) = std::sync::mpsc::channel();
    let get = Proc::spawn_with(
        "pipe get dst",
        &mut dir.get("dst", &[]),
        count_then_signal(1 << 20, tx),
    );
    dir.wait_consumers("dst", 1, deadline);
    let mut pc = dir.cmd(&["pipe", "put", "src"]);
    pc.stdin(Stdio::piped());
    let mut put = Proc::spawn("pipe put src", pc);
    let mut stdin = put.child.stdin.take().expect("stdin piped");
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        let chunk = random(1 << 20, 9);
        while stdin.write_all(&chunk).is_ok() {}
    });
    rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .expect("watchdog: the reader on host B never got 1 MiB");
    ex.kill9();
    let o = get.finish(deadline);
    assert!(
        !o.status.success(),
        "a killed exporter is no clean end: {}",
        stderr(&o)
    );
    let _ = im.finish(deadline);
    put.kill9();
    feeder.join().expect("feeder");
}

#[test]
fn a_pipe_crosses_two_bridges_in_two_network_namespaces() {
    let Some((_hosts, dir, ex, im)) = bridged(2, "netns-bridge") else {
        return;
    };
    let deadline = Instant::now() + WATCHDOG;
    let get = Proc::spawn("pipe get dst", dir.get("dst", &[]));
    dir.wait_consumers("dst", 1, deadline);
    let data = std::sync::Arc::new(random(8 << 20, 0x7a));
    let (put, feeder) = dir.put_fed("src", 1, &[], &data);
    assert_ok("pipe put", &put.finish(deadline));
    feeder.join().expect("feeder");
    assert_ok("bridge export", &ex.finish(deadline));
    assert_ok("bridge import", &im.finish(deadline));
    let out = get.finish(deadline);
    assert_ok("pipe get across the hosts", &out);
    assert_same("the pipe across two network namespaces", &out.stdout, &data);
}
