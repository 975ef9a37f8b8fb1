//! The tokio benchmark under the driver.

use std::path::Path;

use super::{measure, plan, table, Entry, Job, Options, Part, IN_FLIGHT};
use crate::affinity::cpu_for;
use crate::driver::{Bench, Target};

/// `zcio-bench tokio` with its options.
#[derive(Debug, Clone)]
pub struct TokioBench {
    /// What to run.
    pub opts: Options,
}

impl Bench for TokioBench {
    type Job = Job;
    type Row = Entry;

    fn name(&self) -> &'static str {
        "tokio"
    }

    fn quick(&self) -> bool {
        self.opts.quick
    }

    fn intro(&self) -> String {
        let o = &self.opts;
        format!(
            "{} variants × {} sizes ({}), idle: {} connections; client/sender/idle waiter pinned \
             to CPU {}, server/receiver/idle peer to CPU {}; {} run(s) per point, interleaved",
            o.variants.len(),
            o.sizes.len(),
            o.parts
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", "),
            o.idle_channels,
            cpu_for(0),
            cpu_for(1),
            o.reps
        )
    }

    /// One group per (part, size), its variants interleaved.
    fn groups(&self) -> Vec<Vec<Job>> {
        plan(&self.opts)
    }

    fn reps(&self) -> usize {
        self.opts.reps
    }

    fn label(&self, job: &Job) -> String {
        job.label()
    }

    fn run(&self, job: &Job) -> Result<Vec<Entry>, String> {
        measure(*job, &self.opts).map(|e| vec![e])
    }

    fn same_point(a: &Entry, b: &Entry) -> bool {
        match (a, b) {
            (Entry::Latency(a), Entry::Latency(b)) => a.variant == b.variant && a.size == b.size,
            (Entry::Throughput(a), Entry::Throughput(b)) => {
                a.variant == b.variant && a.size == b.size
            }
            (Entry::Idle(a), Entry::Idle(b)) => a.variant == b.variant,
            _ => false,
        }
    }

    fn rank(row: &Entry) -> f64 {
        match row {
            Entry::Latency(r) => r.p50_ns,
            Entry::Throughput(r) => r.msgs_per_sec,
            Entry::Idle(r) => r.cpu_us,
        }
    }

    fn derive(&self, rows: &mut [Entry]) {
        table::derive(rows);
    }

    fn targets(&self, rows: &[Entry]) -> Vec<Target> {
        table::targets(rows, &self.opts)
    }

    fn notes(&self) -> Vec<String> {
        notes(&self.opts)
    }

    fn tables(&self, rows: &[Entry]) -> String {
        table::text(rows)
    }

    fn svg(&self, rows: &[Entry], path: &Path) -> Result<(), String> {
        table::svg(rows, path)
    }
}

/// How the numbers were taken.
pub fn notes(o: &Options) -> Vec<String> {
    let mut n = vec![
        format!(
            "every side is a separate process (this binary re-executed); the client / sender / \
             idle waiter is pinned to CPU {}, the server / receiver / idle peer to CPU {}; {}",
            cpu_for(0),
            cpu_for(1),
            match o.reps {
                1 => "one run per point".to_string(),
                k => format!(
                    "each point is the run with the median (p50, msgs/s, idle CPU) of {k} runs, \
                     the variants of a size interleaved"
                ),
            }
        ),
        format!(
            "variants: zcio-async = zcio::tokio::AsyncChannel in both processes, each on a \
             current-thread tokio runtime (Builder::new_current_thread().enable_all(), the loop \
             in block_on as #[tokio::main(flavor = \"current_thread\")] runs it), recv().await / \
             send(msg).await, default channel policy (an async wait spins at most {:?} before \
             it sleeps in the reactor on the channel's doorbell); tokio-unix = tokio::net::\
             UnixStream on the same runtime, frames of an 8-byte length + payload, each frame \
             sent with one write_all from a reused buffer, read with read_exact (header, then \
             payload into a reused buffer) through a {} KiB tokio BufReader; zcio-sync-blocking \
             = the synchronous Channel with ChannelPolicy::spin = 0 (a waiter sleeps on the \
             futex at once, the peer wakes it) and zcio-sync = the same with the default policy \
             (spins up to {:?} first): blocking calls (send_timeout / recv_timeout, \
             Pool::alloc_timeout) on the main thread, no runtime — the same generic loops, \
             polled once to completion",
            zcio::SpinPolicy::current().task_max,
            super::sides::READ_BUF >> 10,
            zcio::ChannelPolicy::default().spin,
        ),
        format!(
            "every zcio variant: ChannelConfig::max_in_flight = {IN_FLIGHT} (a send waits — \
             the async one in the reactor — while the receiver holds {IN_FLIGHT} messages) and \
             a pool of 2 chunks × {IN_FLIGHT} buffers of the message size per process, so a \
             send the channel lets through always finds a free buffer (the async sender uses \
             try_alloc and never blocks its runtime)"
        ),
        "payload: the sender writes the sequence number into the first word of every 4 KiB page \
         and into the last word of each message (into a pool buffer, or into its frame buffer); \
         the receiver reads those words (zcio: in place through View; socket: in its buffer \
         after read_exact) and checks them and the length"
            .into(),
    ];
    if o.has(Part::Latency) {
        n.push(format!(
            "latency: ping-pong with one message in flight, request and reply of the same size; \
             {} warm-up round trips, then up to {} measured ones within {:?}; one-way = round \
             trip / 2 (p50, p90, p99, mean); CPU/rt = getrusage(RUSAGE_SELF) user + system of each \
             process over its measured round trips ÷ their count",
            o.ping_warmup, o.round_trips, o.ping_budget
        ));
    }
    if o.has(Part::Throughput) {
        n.push(format!(
            "throughput: the sender sends as fast as it can, the receiver takes and touches \
             every message; {} bytes per point (at least {}, at most {} messages) after a \
             warm-up of a tenth of that (at least {}, at most 2000 messages); msgs/s at the \
             receiver; CPU/msg = getrusage(RUSAGE_SELF) of each process over its measured \
             messages ÷ their count (it includes time spent waiting: spinning counts)",
            crate::fmt::bytes_u64(o.stream_bytes),
            o.min_msgs,
            o.max_msgs,
            2 * IN_FLIGHT + 8
        ));
    }
    if o.has(Part::Idle) {
        n.push(format!(
            "idle: the waiter connects {} channels (sockets) to a peer process that accepts them \
             and never sends; zcio-async and tokio-unix: one spawned task of a current-thread \
             runtime awaits all of them at once (a poll_fn over {} boxed AsyncChannel::recv / \
             UnixStream::readable futures, polled whenever the task wakes), the main future \
             sleeps {:?} on a tokio timer (the task's first poll spins, then every receive is \
             pending), then reads getrusage(RUSAGE_SELF) user + system over a {:?} tokio sleep; \
             zcio-sync-blocking (context, what a program without async does): a thread per \
             channel blocked in recv_timeout, the main thread sleeping, wake-ups = the channels' \
             futex sleeps begun in the window (every sleep is bounded by the liveness interval, \
             {:?})",
            o.idle_channels,
            o.idle_channels,
            o.idle_settle,
            o.idle_window,
            zcio::ChannelConfig::default().liveness_interval
        ));
    }
    n
}
