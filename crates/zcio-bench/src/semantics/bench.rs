//! `zcio-bench semantics` under the driver: one measurement per job (this
//! process sends, a child receives), per-metric medians over the runs.

use std::cell::RefCell;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use zcio::semantics::SemanticEndpoint;
use zcio::Listener;

use super::model::ModelInfo;
use super::side::{channel_config, drive, endpoint_config, Phases, Spec, TxResult, ZcioTx};
use super::table::{self, OutCounts, Row, RunStats};
use super::{baseline, plan, plot, Job, Line, Options, RxReport, CHILD_ARG, UNALIGNED_OFFSET};
use crate::affinity::allowed_cpus;
use crate::child::{self, Group};
use crate::driver::{Bench, Target};

/// `zcio-bench semantics` with its options.
pub struct SemBench {
    /// What to run.
    pub opts: Options,
    /// Every run's row (the driver keeps one per point; `derive` takes
    /// per-metric medians from these).
    raw: RefCell<Vec<Row>>,
    pipe_size: RefCell<Option<usize>>,
    /// The CPUs this process may use (chosen before any pinning).
    cpus: Vec<usize>,
    /// `/proc/loadavg` at the start.
    load_at_start: String,
    /// The cost model both processes decide with (`--model`).
    model: ModelInfo,
}

/// `/proc/loadavg`'s 1, 5 and 15 minute averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

impl SemBench {
    /// A run of `opts` with the cost model `model` (made the library's by
    /// [`super::model::prepare`]).
    pub fn new(opts: Options, model: ModelInfo) -> Self {
        Self {
            opts,
            raw: RefCell::new(Vec::new()),
            pipe_size: RefCell::new(None),
            cpus: allowed_cpus(),
            load_at_start: loadavg(),
            model,
        }
    }

    /// The CPU of the sender (0) or the receiver (1): distinct ones when
    /// the process may use two, from the set it had at the start (the
    /// sender pins itself during a measurement, and a child inherits that).
    fn cpu(&self, side: usize) -> usize {
        self.cpus[side % self.cpus.len().max(1)]
    }
}

/// Pins the calling thread to one CPU; restores `all` on drop.
struct Pinned(Vec<usize>);

impl Pinned {
    fn to(cpu: usize, all: &[usize]) -> Self {
        if let Err(e) = crate::affinity::pin(cpu) {
            eprintln!("warning: {e}");
        }
        Pinned(all.to_vec())
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let mut set = rustix::thread::CpuSet::new();
        for &c in &self.0 {
            set.set(c);
        }
        let _ = rustix::thread::sched_setaffinity(None, &set);
    }
}

fn socket_path() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "zcio-bench-sem-{}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Removes a socket path on drop.
struct Unlink(PathBuf);

impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn rx_report(lines: Vec<String>) -> Result<RxReport, String> {
    let line = lines.into_iter().next().unwrap_or_default();
    serde_json::from_str(&line).map_err(|e| format!("receiver's result line {line:?}: {e}"))
}

fn remaining(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(500))
}

struct Measured {
    tx: TxResult,
    rx: Option<RxReport>,
    out: Option<OutCounts>,
}

impl SemBench {
    fn spec(&self, job: &Job, p: &Phases) -> Spec {
        Spec {
            line: job.line.name().into(),
            size: job.size,
            rx_offset: if job.aligned { 0 } else { UNALIGNED_OFFSET },
            path: None,
            rfd: -1,
            wfd: -1,
            stream_warmup: p.stream_warmup,
            cpu: Some(self.cpu(1)),
            timeout_ms: self.opts.timeout.as_millis() as u64,
        }
    }

    fn zcio(&self, job: &Job, p: &Phases, deadline: Instant) -> Result<Measured, String> {
        let path = socket_path();
        let _ = std::fs::remove_file(&path);
        let listener = Listener::bind(&path, channel_config())
            .map_err(|e| format!("bind {}: {e}", path.display()))?;
        let _unlink = Unlink(path.clone());
        let mut spec = self.spec(job, p);
        spec.path = Some(path.to_string_lossy().into_owned());
        let mut group = Group::new();
        group.push(child::spawn(CHILD_ARG, &spec)?, "receiver");
        let chan = listener
            .accept_timeout(Duration::from_secs(10))
            .map_err(|e| format!("accept the receiver: {e}"))?;
        let ep = SemanticEndpoint::new(chan, endpoint_config(job.line, job.size, true))
            .map_err(|e| format!("sender endpoint: {e}"))?;
        let mut tx = ZcioTx::new(ep, job.line, job.size, deadline)?;
        let r = drive(&mut tx, p, deadline)?;
        let st = tx.ep.stats();
        let ast = tx.ep.arena().stats();
        let rx = rx_report(group.wait_all(remaining(deadline))?)?;
        drop(tx);
        Ok(Measured {
            tx: r,
            rx: Some(rx),
            out: Some(OutCounts {
                copied: st.out_copied,
                protected: st.out_protected,
                hidden: st.out_hidden,
                lent: st.out_lent,
                sealed: st.out_sealed,
                fallbacks: st.out_fallbacks,
                tcow_copies: ast.tcow_copies,
                rewrite_copies: st.out_rewrite_copies,
            }),
        })
    }

    fn stream(&self, job: &Job, p: &Phases, deadline: Instant) -> Result<Measured, String> {
        let spec = self.spec(job, p);
        let (give, out, back): (Vec<OwnedFd>, File, File) = match job.line {
            Line::Pipe => {
                let (dr, dw, eff) = crate::fds::pipe_pair(Some(1 << 20))?;
                *self.pipe_size.borrow_mut() = Some(eff);
                let (ar, aw, _) = crate::fds::pipe_pair(Some(4096))?;
                (vec![dr, aw], File::from(dw), File::from(ar))
            }
            _ => {
                let (a, b) = std::os::unix::net::UnixStream::pair()
                    .map_err(|e| format!("socketpair: {e}"))?;
                let a2 = a.try_clone().map_err(|e| format!("dup: {e}"))?;
                (
                    vec![OwnedFd::from(b)],
                    File::from(OwnedFd::from(a)),
                    File::from(OwnedFd::from(a2)),
                )
            }
        };
        let mut spec = spec;
        spec.rfd = give[0].as_raw_fd();
        spec.wfd = give.last().map_or(-1, |f| f.as_raw_fd());
        let refs: Vec<&OwnedFd> = give.iter().collect();
        let mut group = Group::new();
        group.push(
            crate::fds::spawn_with(CHILD_ARG, &spec, &refs, &refs)?,
            "receiver",
        );
        drop(give);
        let mut tx = baseline::StreamTx::new(out, back, job.size);
        let r = drive(&mut tx, p, deadline)?;
        drop(tx);
        let rx = rx_report(group.wait_all(remaining(deadline))?)?;
        Ok(Measured {
            tx: r,
            rx: Some(rx),
            out: None,
        })
    }

    fn measure(&self, job: &Job) -> Result<Row, String> {
        let p = Phases::new(job.size, &self.opts);
        let deadline = Instant::now() + self.opts.timeout;
        let _pin = Pinned::to(self.cpu(0), &self.cpus);
        let m = match job.line {
            Line::Memcpy => Measured {
                tx: baseline::memcpy(job.size, &p)?,
                rx: None,
                out: None,
            },
            Line::Pipe | Line::Socket => self.stream(job, &p, deadline)?,
            _ => self.zcio(job, &p, deadline)?,
        };
        Ok(row(job, &m))
    }
}

fn row(job: &Job, m: &Measured) -> Row {
    // One-way latency: receiver's arrival minus sender's output, where
    // the receiver timed them; memcpy (no receiver) reports each copy's
    // time as half a "round trip".
    let mut one_way = match &m.rx {
        Some(rx) => super::side::one_way(&m.tx.sends, &rx.arrivals),
        None => m.tx.round_trips.iter().map(|t| t / 2).collect(),
    };
    one_way.sort_unstable();
    let mut rt = m.tx.round_trips.clone();
    rt.sort_unstable();
    let quantile = |v: &[u64], p: f64| -> f64 {
        if v.is_empty() {
            return 0.0;
        }
        let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1e3
    };
    let q = |p: f64| quantile(&one_way, p);
    let msgs = m.tx.msgs.max(1);
    let sem = job.line.semantics();
    Row {
        semantics: job.line.name().into(),
        sender: sem.map(|s| s.0.name().into()),
        receiver: sem.map(|s| s.1.name().into()),
        trusted: sem.map(|_| job.line.trusted()),
        size: job.size,
        aligned: job.aligned,
        latency_us: q(0.5),
        latency_p99_us: q(0.99),
        round_trip_us: quantile(&rt, 0.5),
        gb_per_sec: (m.tx.msgs * job.size as u64) as f64 / m.tx.stream_ns.max(1) as f64,
        cpu_tx_us: m.tx.cpu_ns as f64 / msgs as f64 / 1e3,
        cpu_rx_us: m
            .rx
            .as_ref()
            .map(|r| r.cpu_ns as f64 / r.msgs.max(1) as f64 / 1e3),
        model_us: None,
        msgs: m.tx.msgs,
        round_trips: m.tx.round_trips.len() as u64,
        out: m.out,
        in_swapped_pages_per_msg: m
            .out
            .and(m.rx.as_ref())
            .map(|r| r.swapped_pages as f64 / r.data_msgs.max(1) as f64),
        in_copied_bytes_per_msg: m
            .out
            .and(m.rx.as_ref())
            .map(|r| r.copied_bytes as f64 / r.data_msgs.max(1) as f64),
        runs: RunStats::default(),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn same(a: &Row, b: &Row) -> bool {
    a.semantics == b.semantics && a.size == b.size && a.aligned == b.aligned
}

impl Bench for SemBench {
    type Job = Job;
    type Row = Row;

    fn name(&self) -> &'static str {
        "semantics"
    }

    fn quick(&self) -> bool {
        self.opts.quick
    }

    fn intro(&self) -> String {
        format!(
            "sender: this process on CPU {}; receiver: a child on CPU {}; {} lines × {} sizes, \
             {} interleaved run(s)",
            self.cpu(0),
            self.cpu(1),
            self.opts.lines.len(),
            self.opts.sizes.len(),
            self.opts.runs
        )
    }

    fn groups(&self) -> Vec<Vec<Job>> {
        plan(&self.opts)
    }

    fn reps(&self) -> usize {
        self.opts.runs
    }

    fn label(&self, job: &Job) -> String {
        job.label()
    }

    fn run(&self, job: &Job) -> Result<Vec<Row>, String> {
        let r = self.measure(job)?;
        self.raw.borrow_mut().push(r.clone());
        Ok(vec![r])
    }

    fn same_point(a: &Row, b: &Row) -> bool {
        same(a, b)
    }

    fn rank(row: &Row) -> f64 {
        row.gb_per_sec
    }

    fn derive(&self, rows: &mut [Row]) {
        let raw = self.raw.borrow();
        for r in rows.iter_mut() {
            let reps: Vec<&Row> = raw.iter().filter(|x| same(x, r)).collect();
            let col = |f: &dyn Fn(&Row) -> f64| median(reps.iter().map(|x| f(x)).collect());
            r.latency_us = col(&|x| x.latency_us);
            r.latency_p99_us = col(&|x| x.latency_p99_us);
            r.round_trip_us = col(&|x| x.round_trip_us);
            r.cpu_tx_us = col(&|x| x.cpu_tx_us);
            if r.cpu_rx_us.is_some() {
                r.cpu_rx_us = Some(col(&|x| x.cpu_rx_us.unwrap_or(0.0)));
            }
            let fold = |f: &dyn Fn(&Row) -> f64, min: bool| {
                reps.iter().map(|x| f(x)).fold(
                    if min { f64::INFINITY } else { 0.0 },
                    if min { f64::min } else { f64::max },
                )
            };
            r.runs = RunStats {
                n: reps.len(),
                gb_per_sec_min: fold(&|x| x.gb_per_sec, true),
                gb_per_sec_max: fold(&|x| x.gb_per_sec, false),
                latency_us_min: fold(&|x| x.latency_us, true),
                latency_us_max: fold(&|x| x.latency_us, false),
            };
        }
        table::add_model(rows);
    }

    fn targets(&self, rows: &[Row]) -> Vec<Target> {
        table::targets(rows)
    }

    fn notes(&self) -> Vec<String> {
        let o = &self.opts;
        let pipe = match *self.pipe_size.borrow() {
            Some(s) => crate::fmt::size(s),
            None => "not measured".into(),
        };
        let model = &self.model;
        let cal_notes = if model.calibration_notes.is_empty() {
            String::new()
        } else {
            format!("; the calibration: {}", model.calibration_notes.join("; "))
        };
        vec![
            format!(
                "sender = the coordinating process (pinned to CPU {}), receiver = a child of \
                 this binary (pinned to CPU {}), connected by a zcio Listener/Channel, each \
                 end wrapped in zcio::semantics::SemanticEndpoint with the library's policy ({}) from \
                 its cost model, here {}; the receiver declares the sender trusted on every \
                 line except `secured`",
                self.cpu(0),
                self.cpu(1),
                model.thresholds_text(),
                model.description,
            ),
            "lines: the eight semantics (same on both sides); secured = emulated copy on both \
             sides, receiver not trusting (the library delivers by the cheapest kernel-safe way); \
             mixed = sender emulated copy, receiver copy; emulated-copy-rewrite = emulated copy \
             with the sender rewriting the same buffer right after each output (TCOW copies); \
             pipe / unix-socket: write/read of the same bytes; memcpy: one copy per message in \
             one process"
                .into(),
            format!(
                "per message the sender stamps one u64 per 4 KiB (sequence << 24 | page) and \
                 outputs; application-allocated lines rotate 4 sender buffers (waiting until a \
                 buffer's pages are back, ArenaBuf::in_flight, before stamping it again) and 2 \
                 receive buffers; system-allocated lines alloc → stamp → output_owned and \
                 input_owned → check → free; the receiver checks every stamp of every message \
                 (a mismatch fails the run); aligned = both buffers at page offset 0, unaligned \
                 = receive buffers at offset {UNALIGNED_OFFSET}; the sender lets the receiver \
                 hold at most about 4 MiB (8 … 512 slices) before it waits for notices"
            ),
            format!(
                "throughput: a stream of up to {} messages within {} ms after a warm-up of \
                 2…50 messages (~8 MiB), timed until the receiver's count comes back; CPU = \
                 getrusage(RUSAGE_SELF) user + system of each process over the stream ÷ \
                 messages (each process measures itself; waiting counts: a zcio side spins up to the \
                 channel's spin budget before it sleeps, so while the other side keeps up its CPU \
                 per message is close to the wall time per message); latency: ping-pong, each message \
                 answered with 8 bytes by copy in the reverse direction, up to {} round trips \
                 within {} ms; one-way latency = the receiver's CLOCK_MONOTONIC once input (and free, \
                 for system-allocated buffers) returned minus the sender's when the transfer \
                 began (before output, or before alloc), both processes' stamping and \
                 checking subtracted (memcpy: one copy); \
                 medians per metric of {} interleaved run(s) (all points once, then again)",
                o.stream_max,
                o.stream_time.as_millis(),
                o.ping_max,
                o.ping_time.as_millis(),
                o.runs
            ),
            format!(
                "pipe buffer {pipe} (F_SETPIPE_SZ 1 MiB where allowed, pipe-max-size {}); Unix \
                 socket: a stream socketpair with default buffers; out = how the sender's \
                 outputs travelled (fb = fallbacks to copy, rw = copied because the buffer was \
                 rewritten during its previous lend, tcow = pages the sender's writes copied); in = pages swapped in and bytes copied per message by the receiver",
                crate::fmt::size(crate::fds::pipe_max_size())
            ),
            format!(
                "model µs and the per-operation table: the same cost model \
                 (zcio::semantics::cost::CostModel::current(); --model {}: {}){cal_notes}",
                model.choice, model.source
            ),
            format!(
                "load average (1/5/15 min) at the start {}, at the end {} (other work on the \
                 machine shows here)",
                self.load_at_start,
                loadavg()
            ),
        ]
    }

    fn json_fields(&self) -> Vec<(&'static str, serde_json::Value)> {
        vec![(
            "model",
            serde_json::to_value(&self.model).unwrap_or_default(),
        )]
    }

    fn tables(&self, rows: &[Row]) -> String {
        table::tables(rows)
    }

    fn svg(&self, rows: &[Row], path: &Path) -> Result<(), String> {
        plot::svg(rows, path)
    }
}
