//! One measurement (the coordinator's side): start a variant's processes
//! on their hosts in order (each waits for what it needs: the `ready`
//! lines of the bridges and the publisher, the receivers' `attached`),
//! read every process's CPU time at the measuring receiver's `start` and
//! `end` marks, collect the reports and the bytes that crossed into B.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use super::hosts::{cpu_seconds, Host, Hosts};
use super::sides::{Got, Load, Sent, Take, Task};
use super::table::{BridgeStats, ProcCpu, Row};
use super::{Job, Options, Part, Spec, Variant};
use crate::ring::RingGuard;
use crate::splice::proc::Proc;

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// How long a process may take to print its `ready` / `attached` line.
const SETUP: Duration = Duration::from_secs(20);

/// A temporary file of this measurement, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(n: usize, tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "zcio-bridge-bench-{}-{n}-{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        Self(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The processes of one measurement, in start order; dropped ones are
/// killed and reaped ([`Proc`]).
#[derive(Default)]
struct Party {
    procs: Vec<(String, Host, Proc)>,
}

impl Party {
    fn add(&mut self, name: &str, host: Host, p: Proc) -> usize {
        self.procs.push((name.to_string(), host, p));
        self.procs.len() - 1
    }

    fn line(&mut self, i: usize, timeout: Duration) -> Result<String, String> {
        self.procs[i].2.read_line(timeout)
    }

    /// Read line `want` (a mark or `attached`) from process `i`.
    fn expect(&mut self, i: usize, want: &str, timeout: Duration) -> Result<(), String> {
        let l = self.line(i, timeout)?;
        if l.trim() == want {
            Ok(())
        } else {
            Err(format!("{}: expected {want:?}, got {l:?}", self.procs[i].0))
        }
    }

    /// Every process's CPU seconds so far.
    fn cpu(&self) -> Vec<Option<f64>> {
        self.procs
            .iter()
            .map(|(_, _, p)| cpu_seconds(p.id()))
            .collect()
    }

    /// Wait for all (in start order), each within what is left of
    /// `timeout`; what each printed after the lines already read.
    fn wait_all(self, timeout: Duration) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        for (_, _, p) in self.procs {
            let left = deadline.saturating_duration_since(Instant::now());
            let (_, text) = p.wait(left.max(Duration::from_millis(100)))?;
            out.push(text);
        }
        Ok(out)
    }
}

/// The last line of `text` as `T`.
fn report<T: DeserializeOwned>(what: &str, text: &str) -> Result<T, String> {
    let l = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    serde_json::from_str(l).map_err(|e| format!("{what}: bad report {l:?}: {e}"))
}

/// The first `tcp/…` endpoint of a `ready ENDPOINTS` line.
fn endpoint(what: &str, line: &str) -> Result<String, String> {
    line.strip_prefix("ready")
        .and_then(|rest| rest.split_whitespace().find(|e| e.starts_with("tcp/")))
        .map(str::to_string)
        .ok_or_else(|| format!("{what}: expected 'ready tcp/…', got {line:?}"))
}

/// A process's role, host and CPU seconds between the marks.
type Window = (String, Host, f64);

/// What a variant's run gave, before it becomes a row.
struct Outcome {
    sent: Sent,
    /// Messages on the link that are not payload (the Zenoh end marker).
    extra_msgs: u64,
    got: Vec<Got>,
    /// Per process.
    cpu: Vec<Window>,
    export: Option<BridgeStats>,
    import: Option<BridgeStats>,
}

/// The load of a sender and the checks of the receivers for `job`.
fn load_and_take(job: &Job, o: &Options) -> (Load, Take) {
    let latency = job.part == Part::Latency;
    let (warmup, count, rate) = if latency {
        (
            o.lat_warmup(job.size),
            o.lat_count(job.size),
            Some(o.lat_rate(job.size)),
        )
    } else {
        (o.stream_warmup(job.size), o.stream_count(job.size), None)
    };
    let budget = if latency {
        // A paced sender's count ends it; the bound is only a guard.
        Duration::from_secs_f64(count as f64 / rate.unwrap_or(1.0) * 2.0 + 1.0)
    } else {
        o.send_time
    };
    (
        Load {
            size: job.size,
            warmup,
            count,
            rate,
            budget_ms: budget.as_millis() as u64,
        },
        Take {
            size: job.size,
            warmup,
            latency,
            marks: false,
        },
    )
}

fn spec(task: Task, o: &Options) -> Spec {
    Spec {
        task,
        // Pinned by the command that starts it (its host's CPU).
        cpu: None,
        timeout_ms: o.timeout.as_millis() as u64,
    }
}

/// Read the marks of process `recv`, then wait for everyone; CPU seconds
/// of every process between the marks, and their outputs.
fn run_party(
    mut party: Party,
    recv: usize,
    o: &Options,
) -> Result<(Vec<Window>, Vec<String>), String> {
    party.expect(recv, "start", o.timeout)?;
    let c0 = party.cpu();
    party.expect(recv, "end", o.timeout)?;
    let c1 = party.cpu();
    let cpu = party
        .procs
        .iter()
        .zip(c0.iter().zip(&c1))
        .map(|((name, host, _), (a, b))| {
            let d = match (a, b) {
                (Some(a), Some(b)) => (b - a).max(0.0),
                _ => 0.0,
            };
            (name.clone(), *host, d)
        })
        .collect();
    let out = party.wait_all(o.timeout)?;
    Ok((cpu, out))
}

/// ring producer → export → Zenoh → import → ring consumer(s); the export
/// with `--copy` if `copy`.
fn zcio_bridge(job: &Job, o: &Options, hosts: &Hosts, copy: bool) -> Result<Outcome, String> {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let (load, take) = load_and_take(job, o);
    let ring_opts = zcio::ring::Options::new()
        .layout(zcio::ring::Layout::Variable)
        .size(o.ring_size);
    let ra = RingGuard::create(ring_opts.clone())?;
    let rb = RingGuard::create(ring_opts)?;
    let key = format!("zcio-bench/{}/{n}", std::process::id());
    let (ex_stats, im_stats) = (
        TempFile::new(n, "export.json"),
        TempFile::new(n, "import.json"),
    );
    let (ex_err, im_err) = (
        TempFile::new(n, "export.err"),
        TempFile::new(n, "import.err"),
    );
    let bound = (o.timeout.as_secs() + 5).to_string();
    let mut party = Party::default();

    let mut cmd = hosts.command(Host::A, o.zcio.as_os_str());
    cmd.args(["bridge", "export", &format!("ring:{}", ra.name())])
        .args(["--key", &key])
        .args(["--listen", &format!("tcp/{}:0", hosts.ip(Host::A))])
        .arg("--stats-json")
        .arg(&ex_stats.0)
        .args(["--quiet", "--duration", &bound]);
    if copy {
        cmd.arg("--copy");
    }
    let ex = party.add(
        "export",
        Host::A,
        Proc::spawn(&mut cmd, "zcio bridge export", Some(ex_err.0.as_path()))?,
    );
    let ep = endpoint("zcio bridge export", &party.line(ex, SETUP)?)?;

    let mut cmd = hosts.command(Host::B, o.zcio.as_os_str());
    cmd.args(["bridge", "import", &key])
        .args(["--to", &format!("ring:{}", rb.name())])
        .args(["--connect", &ep])
        .args(["--listen", &format!("tcp/{}:0", hosts.ip(Host::B))])
        .args(["--size", &o.ring_size.to_string()])
        .arg("--stats-json")
        .arg(&im_stats.0)
        .args(["--quiet", "--duration", &bound]);
    let im = party.add(
        "import",
        Host::B,
        Proc::spawn(&mut cmd, "zcio bridge import", Some(im_err.0.as_path()))?,
    );
    let l = party.line(im, SETUP)?;
    if !l.starts_with("ready") {
        return Err(format!("zcio bridge import: expected 'ready', got {l:?}"));
    }

    let mut recv = Vec::new();
    for i in 0..job.receivers {
        let task = Task::RingConsumer {
            ring: rb.name().to_string(),
            take: Take {
                marks: i == 0,
                ..take
            },
        };
        let name = format!("consumer {i}");
        let p = hosts.spawn_child(Host::B, &spec(task, o), &name)?;
        let k = party.add(&name, Host::B, p);
        party.expect(k, "attached", SETUP)?;
        recv.push(k);
    }
    let task = Task::RingProducer {
        ring: ra.name().to_string(),
        load,
    };
    let p = hosts.spawn_child(Host::A, &spec(task, o), "producer")?;
    let pr = party.add("producer", Host::A, p);

    let (cpu, out) = run_party(party, recv[0], o)?;
    let sent: Sent = report("producer", &out[pr])?;
    let got = recv
        .iter()
        .map(|&k| report::<Got>("consumer", &out[k]))
        .collect::<Result<Vec<_>, _>>()?;
    let stats = |f: &TempFile| {
        std::fs::read_to_string(&f.0)
            .ok()
            .and_then(|s| serde_json::from_str::<BridgeStats>(&s).ok())
    };
    Ok(Outcome {
        sent,
        extra_msgs: 0,
        got,
        cpu,
        export: stats(&ex_stats),
        import: stats(&im_stats),
    })
}

/// A plain Zenoh publisher on A, subscriber process(es) on B.
fn zenoh(job: &Job, o: &Options, hosts: &Hosts) -> Result<Outcome, String> {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let (load, take) = load_and_take(job, o);
    let key = format!("zcio-bench/{}/{n}", std::process::id());
    let mut party = Party::default();
    let task = Task::ZenohPub {
        ip: hosts.ip(Host::A),
        key: key.clone(),
        subs: job.receivers,
        load,
    };
    let p = hosts.spawn_child(Host::A, &spec(task, o), "zenoh publisher")?;
    let pb = party.add("publisher", Host::A, p);
    let ep = endpoint("zenoh publisher", &party.line(pb, SETUP)?)?;
    let mut recv = Vec::new();
    for i in 0..job.receivers {
        let task = Task::ZenohSub {
            connect: ep.clone(),
            ip: hosts.ip(Host::B),
            key: key.clone(),
            index: i,
            take: Take {
                marks: i == 0,
                ..take
            },
        };
        let name = format!("subscriber {i}");
        let p = hosts.spawn_child(Host::B, &spec(task, o), &name)?;
        let k = party.add(&name, Host::B, p);
        party.expect(k, "attached", SETUP)?;
        recv.push(k);
    }
    let (cpu, out) = run_party(party, recv[0], o)?;
    let sent: Sent = report("zenoh publisher", &out[pb])?;
    let got = recv
        .iter()
        .map(|&k| report::<Got>("zenoh subscriber", &out[k]))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Outcome {
        sent,
        extra_msgs: 1,
        got,
        cpu,
        export: None,
        import: None,
    })
}

/// A TCP sender on A, a receiver on B.
fn tcp(job: &Job, o: &Options, hosts: &Hosts) -> Result<Outcome, String> {
    let (load, take) = load_and_take(job, o);
    let mut party = Party::default();
    let task = Task::TcpRecv {
        ip: hosts.ip(Host::B),
        take: Take {
            marks: true,
            ..take
        },
    };
    let p = hosts.spawn_child(Host::B, &spec(task, o), "tcp receiver")?;
    let rv = party.add("receiver", Host::B, p);
    let l = party.line(rv, SETUP)?;
    let port: u16 = l
        .strip_prefix("port ")
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| format!("tcp receiver: expected 'port N', got {l:?}"))?;
    let task = Task::TcpSend {
        addr: format!("{}:{port}", hosts.ip(Host::B)),
        load,
    };
    let p = hosts.spawn_child(Host::A, &spec(task, o), "tcp sender")?;
    let sd = party.add("sender", Host::A, p);
    let (cpu, out) = run_party(party, rv, o)?;
    Ok(Outcome {
        sent: report("tcp sender", &out[sd])?,
        extra_msgs: 0,
        got: vec![report("tcp receiver", &out[rv])?],
        cpu,
        export: None,
        import: None,
    })
}

/// Measure `job` once.
pub fn measure(job: &Job, o: &Options, hosts: &Hosts) -> Result<Row, String> {
    let rx0 = hosts.rx_bytes_b().ok();
    let out = match job.variant {
        Variant::ZcioBridge => zcio_bridge(job, o, hosts, false),
        Variant::ZcioBridgeCopy => zcio_bridge(job, o, hosts, true),
        Variant::Zenoh => zenoh(job, o, hosts),
        Variant::Tcp => tcp(job, o, hosts),
    }?;
    let rx1 = hosts.rx_bytes_b().ok();
    let g0 = out.got[0];
    if g0.msgs == 0 {
        return Err(format!(
            "no measured message arrived (sent {}, warm-up {} received)",
            out.sent.sent, g0.warm
        ));
    }
    let secs = (g0.elapsed_ns as f64 / 1e9).max(1e-9);
    let msgs_per_sec = g0.msgs as f64 / secs;
    let per = |s: f64| s * 1e6 / g0.msgs as f64;
    let cpu: Vec<ProcCpu> = out
        .cpu
        .iter()
        .map(|(name, host, s)| ProcCpu {
            name: name.clone(),
            host: host.name().into(),
            cpu_s: *s,
            us_per_msg: per(*s),
        })
        .collect();
    let sum = |h: Host| {
        out.cpu
            .iter()
            .filter(|c| c.1 == h)
            .map(|c| c.2)
            .sum::<f64>()
    };
    let payload = (out.sent.sent + out.extra_msgs) * job.size as u64;
    let net = rx0.zip(rx1).map(|(a, b)| b.saturating_sub(a));
    let us = |v: Option<f64>| v.map(|ns| ns / 1e3);
    Ok(Row {
        part: job.part.name().into(),
        variant: job.variant.name().into(),
        link: hosts.link().into(),
        size: job.size,
        receivers: job.receivers,
        sent: out.sent.sent,
        msgs: g0.msgs,
        lost: out.got.iter().map(|g| g.lost).sum(),
        msgs_per_sec,
        bytes_per_sec: msgs_per_sec * job.size as f64,
        p50_us: us(g0.p50_ns),
        p99_us: us(g0.p99_ns),
        max_us: us(g0.max_ns),
        cpu_a_us_per_msg: per(sum(Host::A)),
        cpu_b_us_per_msg: per(sum(Host::B)),
        cpu_b_s: sum(Host::B),
        cpu,
        net_bytes: net,
        payload_bytes: payload,
        net_per_payload: net.map(|b| b as f64 / payload.max(1) as f64),
        export: out.export,
        import: out.import,
        vs_zenoh: None,
    })
}
