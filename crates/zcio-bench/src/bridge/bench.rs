//! The bridge benchmark under the driver: sets up the two hosts once, then
//! measures job by job.

use std::path::Path;

use super::hosts::{Host, Hosts};
use super::{measure, plan, plot, table, Job, Options, Part, Row, Variant};
use crate::driver::{Bench, Target};

/// `zcio-bench bridge` with its options and its hosts.
pub struct BridgeBench {
    opts: Options,
    hosts: Hosts,
    load_at_start: String,
    zcio_version: String,
    /// Why a variant was left out (the `zcio` binary lacks what it needs).
    skipped: Option<String>,
}

/// Whether `zcio bridge export` has `--copy`.
fn has_copy(zcio: &Path) -> bool {
    std::process::Command::new(zcio)
        .args(["bridge", "export", "--help"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--copy"))
}

/// `/proc/loadavg`'s 1, 5 and 15 minute averages.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

impl BridgeBench {
    /// Check the `zcio` binary, remove what killed runs left, set up the
    /// hosts.
    pub fn prepare(mut opts: Options) -> Result<Self, String> {
        crate::splice::require_sub(&opts.zcio, "bridge")?;
        let mut skipped = None;
        if opts.variants.contains(&Variant::ZcioBridgeCopy) && !has_copy(&opts.zcio) {
            opts.variants.retain(|&v| v != Variant::ZcioBridgeCopy);
            let why = format!(
                "zcio-bridge-copy left out: {} has no `bridge export --copy`",
                opts.zcio.display()
            );
            eprintln!("{why}");
            skipped = Some(why);
        }
        let stale = crate::ring::remove_stale_rings();
        if stale > 0 {
            eprintln!("removed {stale} rings left behind by interrupted runs");
        }
        let zcio_version = std::process::Command::new(&opts.zcio)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Ok(Self {
            hosts: Hosts::setup(opts.veth),
            opts,
            load_at_start: loadavg(),
            zcio_version,
            skipped,
        })
    }

    fn notes_list(&self) -> Vec<String> {
        let o = &self.opts;
        let mut n = vec![
            format!(
                "{}; every side is a separate process; {}; zcio binary: {} ({}); load average \
                 (1/5/15 min) at the start {}, now {}",
                self.hosts.describe(),
                match o.reps {
                    1 => "one run per point".to_string(),
                    k => format!(
                        "each point is the run with the median (msgs/s; latency: p50; fan-out: \
                         CPU on B per message) of {k} runs, the variants of a point interleaved"
                    ),
                },
                o.zcio.display(),
                self.zcio_version,
                self.load_at_start,
                loadavg()
            ),
            format!(
                "zcio-bridge: a ring producer (this binary) writes each message as one block \
                 (reserve, copy in, commit) into a variable-layout ring of {} (policy block) on \
                 A; `zcio bridge export ring:RA --key K --listen tcp/IP_A:0` (the defaults: no \
                 cache, blocks lent from the ring's pages) publishes it; `zcio bridge import K --to ring:RB --connect ENDPOINT \
                 --listen tcp/IP_B:0 --size {}` writes it into a ring of the same geometry on B \
                 (created by the bench, unlinked after each measurement); each consumer on B \
                 peeks every block in place, reads its words and releases it; the producer's \
                 close is the end of stream (export → Zenoh → import closes RB)",
                crate::fmt::bytes_u64(o.ring_size),
                o.ring_size
            ),
            "zcio-bridge: the export lends each ring block to Zenoh from the ring's pages (no \
             copy out; the block goes back to the ring once Zenoh has encoded it; no cache, the \
             default); zcio-bridge-copy: the same with `zcio bridge export --copy` (each block \
             copied out of the ring first); the targets are checked on zcio-bridge, the default \
             export"
                .into(),
            "zenoh: the same zenoh crate (1.10.2, `zcio_zenoh::zenoh`) and the same session \
             configuration as the bridges (`zcio_zenoh::SessionOptions`: peer mode, the same \
             explicit tcp listen/connect endpoints, multicast scouting off, the same \
             max_message_size); a plain publisher (Reliable, CongestionControl::Block) builds \
             each message as a Vec (one copy of the template) and puts it; each subscriber \
             process reads the words of every sample in place (ZBytes slices) in its callback; \
             the publisher starts when every subscriber's liveliness token (declared after its \
             subscriber) is there, ends with a marker message and stays until the tokens are \
             gone"
                .into(),
            "tcp: one connection from A to B, TCP_NODELAY, frames of an 8-byte length + the \
             message written through a 256 KiB BufWriter (flushed after every message when \
             paced), read with read_exact through a 256 KiB BufReader"
                .into(),
            "payload: every variant sends the same messages: a fixed pattern with the sequence \
             number and a CLOCK_MONOTONIC send stamp (taken just before the hand-over) in the \
             first 16 bytes and the sequence number in the last 8; every receiver reads those \
             three words where the message lies (ring block, Zenoh buffer, its read buffer) and \
             checks the length, the last word and the order (gaps are counted as lost)"
                .into(),
        ];
        if o.has(Part::Throughput) || o.has(Part::Fanout) {
            n.push(format!(
                "throughput: the sender sends as fast as it can for {:?} after a warm-up of {} \
                 (4 … 2000 messages; at most {} or {} messages); msgs/s = measured messages ÷ \
                 the time from the arrival of the last warm-up message to the arrival of the \
                 last one, at the measuring receiver; CPU = user + system time of every process \
                 (/proc/PID/stat, all threads, clock ticks of 1/{} s) read when the measuring \
                 receiver got the last warm-up message and when its stream ended, ÷ measured \
                 messages (the bridges' own whole-run cpu_s from --stats-json is in the JSON); \
                 net/pay = bytes into B's link during the whole measurement (`ip -s link`: \
                 rx_bytes of B's veth end; loopback: lo's, every loopback packet of the \
                 machine) ÷ (messages sent × size)",
                o.send_time,
                crate::fmt::bytes_u64(o.warmup_bytes),
                crate::fmt::bytes_u64(o.max_bytes),
                o.max_msgs,
                super::hosts::ticks_per_second()
            ));
        }
        if o.has(Part::Latency) {
            n.push(format!(
                "latency: the sender paces its messages at min({} msgs/s, {} MB/s ÷ size) for \
                 {:?} (at least {} measured messages) after a warm-up of a tenth (5 … 200); \
                 one-way latency = the receiver's CLOCK_MONOTONIC at receipt − the sender's \
                 stamp (one machine, one clock for both namespaces), p50/p99/max over the \
                 measured messages",
                o.lat_max_rate,
                o.lat_max_bw / 1e6,
                o.lat_time,
                o.lat_min_msgs
            ));
        }
        if o.has(Part::Fanout) {
            n.push(format!(
                "fan-out: {r} receivers on B: zcio-bridge = one import into one ring, {r} \
                 consumer processes reading it in place (one copy over the link); zenoh = {r} \
                 subscriber processes, each its own session connected to the publisher (the \
                 publisher sends each sample {r} times); a flood as in the throughput part; CPU \
                 B = all processes on host B",
                r = o.fanout_receivers
            ));
        }
        if let Some(why) = &self.skipped {
            n.push(why.clone());
        }
        n.push(format!(
            "targets: one network copy = net/pay ≤ {}× (the payload once plus TCP/IP, Ethernet \
             and Zenoh framing)",
            table::ONE_COPY
        ));
        n
    }
}

impl Bench for BridgeBench {
    type Job = Job;
    type Row = Row;

    fn name(&self) -> &'static str {
        "bridge"
    }

    fn quick(&self) -> bool {
        self.opts.quick
    }

    fn intro(&self) -> String {
        let o = &self.opts;
        format!(
            "{} variants × {} sizes ({}), fan-out to {} at {}; {}",
            o.variants.len(),
            o.sizes.len(),
            o.parts
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", "),
            o.fanout_receivers,
            o.fanout_sizes
                .iter()
                .map(|&s| crate::fmt::size(s))
                .collect::<Vec<_>>()
                .join(", "),
            self.hosts.describe()
        )
    }

    fn groups(&self) -> Vec<Vec<Job>> {
        plan(&self.opts)
    }

    fn reps(&self) -> usize {
        self.opts.reps
    }

    fn label(&self, job: &Job) -> String {
        job.label()
    }

    fn run(&self, job: &Job) -> Result<Vec<Row>, String> {
        measure::measure(job, &self.opts, &self.hosts).map(|r| vec![r])
    }

    fn same_point(a: &Row, b: &Row) -> bool {
        a.same_point(b)
    }

    fn rank(row: &Row) -> f64 {
        row.rank()
    }

    fn derive(&self, rows: &mut [Row]) {
        table::derive(rows);
    }

    fn targets(&self, rows: &[Row]) -> Vec<Target> {
        table::targets(rows)
    }

    fn notes(&self) -> Vec<String> {
        self.notes_list()
    }

    fn json_fields(&self) -> Vec<(&'static str, serde_json::Value)> {
        vec![
            ("link", self.hosts.link().into()),
            ("hosts", self.hosts.describe().into()),
            (
                "pinning",
                serde_json::json!({"A": Host::A.cpu(), "B": Host::B.cpu()}),
            ),
            ("zcio", self.zcio_version.clone().into()),
            (
                "variants",
                Variant::ALL
                    .iter()
                    .map(|v| v.name())
                    .collect::<Vec<_>>()
                    .into(),
            ),
        ]
    }

    fn tables(&self, rows: &[Row]) -> String {
        table::text(rows)
    }

    fn svg(&self, rows: &[Row], path: &Path) -> Result<(), String> {
        plot::svg(rows, path)
    }
}
