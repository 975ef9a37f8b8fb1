//! The transfer benchmark under the driver: the throughput part (a
//! variant at a size) and the latency part (a ping-pong transport at a
//! size).

use std::path::Path;

use super::pingpong::{self, Kind};
use super::{measure, row, table, zcio_side, Entry, Options, Part, Variant, NOISY};
use crate::affinity::{allowed_cpus, cpu_for};
use crate::driver::{Bench, Target};
use crate::fmt::size;

/// `zcio-bench transfer` with its options.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// What to run.
    pub opts: Options,
    /// Whether this is the `--quick` run.
    pub quick: bool,
}

/// One measurement.
#[derive(Debug, Clone, Copy)]
pub enum Job {
    /// Throughput: a variant at a size.
    Stream {
        /// The variant.
        variant: Variant,
        /// Message size.
        size: usize,
    },
    /// Latency: a ping-pong transport at a size.
    Ping {
        /// The transport.
        kind: Kind,
        /// Message size.
        size: usize,
    },
}

impl Transfer {
    fn has(&self, p: Part) -> bool {
        self.opts.parts.contains(&p)
    }
}

impl Bench for Transfer {
    type Job = Job;
    type Row = Entry;

    fn name(&self) -> &'static str {
        "transfer"
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn intro(&self) -> String {
        format!(
            "{} variants × {} sizes, ping-pong {} transports × {} sizes; originator/client pinned \
             to CPU {}, receiver/server to CPU {}{}",
            if self.has(Part::Throughput) {
                self.opts.variants.len()
            } else {
                0
            },
            self.opts.sizes.len(),
            if self.has(Part::Latency) {
                self.opts.ping.kinds.len()
            } else {
                0
            },
            self.opts.ping.sizes.len(),
            cpu_for(0),
            cpu_for(1),
            if allowed_cpus().len() < 3 {
                " (a forwarder shares a CPU)"
            } else {
                ""
            }
        )
    }

    /// One group per size and part: the variants of a size are interleaved.
    fn groups(&self) -> Vec<Vec<Job>> {
        let mut g = Vec::new();
        if self.has(Part::Throughput) {
            for &size in &self.opts.sizes {
                g.push(
                    self.opts
                        .variants
                        .iter()
                        .map(|&variant| Job::Stream { variant, size })
                        .collect(),
                );
            }
        }
        if self.has(Part::Latency) {
            for &size in &self.opts.ping.sizes {
                g.push(
                    self.opts
                        .ping
                        .kinds
                        .iter()
                        .filter(|k| k.carries(size))
                        .map(|&kind| Job::Ping { kind, size })
                        .collect(),
                );
            }
        }
        g
    }

    fn reps(&self) -> usize {
        self.opts.reps
    }

    fn label(&self, job: &Job) -> String {
        match *job {
            Job::Stream { variant, size: s } => format!("{} {}", variant.name(), size(s)),
            Job::Ping { kind, size: s } => format!("ping-pong {} {}", kind.name(), size(s)),
        }
    }

    fn run(&self, job: &Job) -> Result<Vec<Entry>, String> {
        Ok(vec![match *job {
            Job::Stream { variant, size } => {
                let m = measure(variant, size, &self.opts)?;
                Entry::Throughput(row(variant, size, &m))
            }
            Job::Ping { kind, size } => Entry::Latency(pingpong::measure(
                kind,
                size,
                &self.opts.ping,
                self.opts.timeout,
            )?),
        }])
    }

    fn same_point(a: &Entry, b: &Entry) -> bool {
        match (a, b) {
            (Entry::Throughput(a), Entry::Throughput(b)) => {
                a.variant == b.variant && a.size == b.size
            }
            (Entry::Latency(a), Entry::Latency(b)) => a.variant == b.variant && a.size == b.size,
            _ => false,
        }
    }

    fn rank(row: &Entry) -> f64 {
        match row {
            Entry::Throughput(r) => r.msgs_per_sec,
            Entry::Latency(r) => r.p50_ns,
        }
    }

    fn set_spread(row: &mut Entry, spread: f64) {
        match row {
            Entry::Throughput(r) => r.spread = Some(spread),
            Entry::Latency(r) => r.spread = Some(spread),
        }
    }

    fn derive(&self, rows: &mut [Entry]) {
        super::derive(rows.iter_mut().filter_map(|e| match e {
            Entry::Throughput(r) => Some(r),
            Entry::Latency(_) => None,
        }));
        let mut lat: Vec<_> = rows
            .iter_mut()
            .filter_map(|e| match e {
                Entry::Latency(r) => Some(r),
                Entry::Throughput(_) => None,
            })
            .collect();
        pingpong::set_floor_ratios(&mut lat);
    }

    /// Judged on the points whose runs agree (within [`NOISY`]) and whose
    /// figures are plausible; a target that only the others could decide
    /// says so instead of a verdict.
    fn targets(&self, rows: &[Entry]) -> Vec<Target> {
        let judge = |rows: &[Entry]| {
            let (tp, lat) = table::split(rows);
            let mut t = Vec::new();
            if self.has(Part::Throughput) {
                t.extend(table::targets(&tp));
            }
            if self.has(Part::Latency) {
                t.extend(table::latency_targets(&lat));
            }
            t
        };
        let doubtful = |e: &Entry| match e {
            Entry::Throughput(r) => r.implausible || r.spread.is_some_and(|s| s > NOISY),
            Entry::Latency(r) => r.spread.is_some_and(|s| s > NOISY),
        };
        let clean: Vec<Entry> = rows.iter().filter(|e| !doubtful(e)).cloned().collect();
        let all = judge(rows);
        let mut judged = judge(&clean);
        for (j, a) in judged.iter_mut().zip(all) {
            if j.met.is_none() && a.met.is_some() {
                j.measured = format!(
                    "no verdict: {} — a point it needs is noisy (runs > {NOISY}× apart) or \
                     implausible (see the tables)",
                    a.measured
                );
            }
        }
        judged
    }

    fn notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        if self.has(Part::Throughput) {
            let huge = zcio::internals::sys::thp::shmem_huge();
            n.push(format!(
                "huge pages: this system's shmem_enabled is `{}`: {}",
                huge.name(),
                if huge.offered() {
                    "zcio's pool chunks and their mappings of 2 MiB and more are 2 MiB-aligned \
                     and advised for transparent huge pages (the kernel decides; iceoryx2's \
                     files in /dev/shm follow that mount's own huge= option instead)"
                } else {
                    "every process maps shared memory with 4 KiB pages (as root, \
                     `echo advise > /sys/kernel/mm/transparent_hugepage/shmem_enabled` lets \
                     zcio's pool chunks use 2 MiB pages)"
                }
            ));
            n.push(format!(
                "throughput: every side is a separate process; originator pinned to CPU {}, \
                 receiver to CPU {}; the forwarder of zcio's 3-domain path shares the \
                 originator's CPU, the pipe forwarder the receiver's",
                cpu_for(0),
                cpu_for(1),
            ));
            n.push(format!(
                "throughput: the originator writes one word in each 4 KiB page, the receiver \
                 reads one word in each page and releases the message; msgs/s at the receiver \
                 over the measured messages after a warm-up; {}",
                match self.opts.reps.max(1) {
                    1 => "one run per point".to_string(),
                    k => format!(
                        "each point is the run with the median msgs/s of {k} interleaved runs"
                    ),
                }
            ));
            n.push(format!(
                "throughput variants: zcio-cached-volatile = pool buffers sent as Msgs on a \
                 channel ({} in flight per hop); zcio-lane = a lane of the same channel kind \
                 (Channel::open_lane, {} slots of the message size, filled in place, read in \
                 place through View)",
                zcio_side::IN_FLIGHT,
                zcio_side::IN_FLIGHT
            ));
            n.push(
                "CPU µs/msg: getrusage(RUSAGE_SELF) user + system time of each process \
                 (originator, forwarder, receiver) over its own measured messages (from message \
                 number `warm-up` to its last), divided by their count; it includes time spent \
                 spinning or sleeping in waits, so a side that spins while the other works shows \
                 its wall time"
                    .to_string(),
            );
        }
        if self.has(Part::Latency) {
            let p = &self.opts.ping;
            n.push(format!(
                "latency: ping-pong with one message in flight, client pinned to CPU {}, server \
                 to CPU {}; {} warm-up round trips, then up to {} measured ones within {:?}; each \
                 side writes one word per 4 KiB page of what it sends and reads one word per page \
                 of what it receives; one-way = round trip / 2; CPU µs per round trip of each \
                 process by getrusage; {}",
                cpu_for(0),
                cpu_for(1),
                p.warmup,
                p.iters,
                p.budget,
                if p.loan_ahead {
                    "loan-ahead: the zcio channel's pool buffer and iceoryx2's sample for the next \
                     message are taken right after each send, off the round trip"
                } else {
                    "buffers taken when sending (--loan-ahead takes them right after the previous \
                     send, as iceoryx2's own benchmark does)"
                }
            ));
            n.push(format!(
                "latency transports: zcio-channel = request and reply on one channel, buffers \
                 from each side's cached pool (volatile); zcio-lane = a lane each way on one \
                 channel (Channel::open_lane: 6 slots of the message's size, one owner thread \
                 per end); zcio-rendezvous = Rendezvous::call / \
                 reply_and_recv with the payload in the message's words, so only sizes ≤ {} B \
                 (larger sizes are left out); iceoryx2 = two publish-subscribe services, busy \
                 polling; zcio-channel-blocking = zcio-channel with no spin budget (a receiver \
                 with nothing to read sleeps on the ring's futex, the sender wakes it); \
                 iceoryx2-blocking = iceoryx2 with an event service per direction (notify after \
                 every send, the receiver sleeps in its listener); pipe = two pipes; \
                 unix-socket = one stream socket pair",
                pingpong::RDV_MAX
            ));
            n.push(format!(
                "latency floor: cache-line = one cache line each way through a shared page, \
                 both sides spinning; cache-line-futex = the same, both sides sleeping in \
                 futex_wait until the other's futex_wake; measured at ≤ {} B in the same run; \
                 vs floor = p50 ÷ the floor of the transport's mode (busy: zcio-channel, \
                 zcio-lane, zcio-rendezvous, iceoryx2; blocking: zcio-channel-blocking, \
                 iceoryx2-blocking, pipe, unix-socket)",
                pingpong::LINE_MAX
            ));
        }
        n
    }

    fn tables(&self, rows: &[Entry]) -> String {
        let (tp, lat) = table::split(rows);
        let mut out = String::new();
        if !tp.is_empty() {
            out.push_str(&table::text(&tp));
        }
        if !lat.is_empty() {
            out.push_str(&table::latency_text(&lat));
        }
        out
    }

    fn svg(&self, rows: &[Entry], path: &Path) -> Result<(), String> {
        let (tp, lat) = table::split(rows);
        table::svg(&tp, &lat, path)
    }
}
