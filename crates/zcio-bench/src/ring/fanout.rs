//! Part (b): one producer, N consumers that each receive every byte
//! (Figure 12b). zcio: the producer writes each call once into a ring, the
//! consumers `peek` and `release` it. Baseline: a tee-style producer that
//! writes each call into N pipes, one reader process per pipe. Reported:
//! producer CPU per GiB produced and total CPU per GiB delivered.

use std::os::fd::{AsRawFd, OwnedFd};

use zcio::ring::Layout;

use super::{
    collect, run_ring_writer, spawn, spawn_with, spec, Options, Part, ReadMode, RingGuard, Row,
    Task,
};
use crate::affinity::{allowed_cpus, cpu_for};
use crate::child::Group;
use crate::fds::pipe_pair;

/// A way of fanning out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// One ring, N `peek` consumers.
    RingPeek,
    /// N pipes fed by a tee-style copy, N readers.
    PipeTee,
}

impl Variant {
    /// All, in table order.
    pub const ALL: [Variant; 2] = [Variant::RingPeek, Variant::PipeTee];

    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Variant::RingPeek => "ring-peek",
            Variant::PipeTee => "pipe-tee",
        }
    }
}

/// CPU of consumer `i` of `n`: the first on CPU 1; the others spread over
/// the remaining CPUs when there is one per process, else unpinned (left to
/// the scheduler).
pub fn consumer_cpu(i: usize, n: usize) -> Option<usize> {
    if i == 0 {
        Some(cpu_for(1))
    } else if n < allowed_cpus().len() {
        Some(cpu_for(i + 1))
    } else {
        None
    }
}

/// How (b) places its processes, for the notes.
pub fn pinning_note(counts: &[usize]) -> String {
    let cpus = allowed_cpus().len();
    let crowded: Vec<String> = counts
        .iter()
        .filter(|&&n| n >= cpus)
        .map(|n| n.to_string())
        .collect();
    let mut s = format!(
        "(b) producer on CPU {}, consumer 1 on CPU {}",
        cpu_for(0),
        cpu_for(1)
    );
    if crowded.is_empty() {
        s.push_str(", the others on CPUs of their own");
    } else {
        s.push_str(&format!(
            "; with {} consumers ({} CPUs) consumers 2… are unpinned and share the CPUs",
            crowded.join(", "),
            cpus
        ));
    }
    s.push_str(
        "; ring-peek consumers do not read the payload; pipe-tee readers copy it; \
         total CPU / GiB counts the bytes every consumer received; ring runs move \
         16× the pipe runs' volume so their CPU times are long enough to measure",
    );
    s
}

/// Measure once with `n` consumers.
pub fn measure(v: Variant, n: usize, opts: &Options) -> Result<Row, String> {
    let (call, volume) = (opts.fanout_call, fanout_volume(v, opts));
    let mut group = Group::new();
    let (reports, pipe_size) = match v {
        Variant::RingPeek => {
            let guard = RingGuard::create(
                zcio::ring::Options::new()
                    .layout(Layout::Continuous)
                    .size(opts.fanout_ring as u64),
            )?;
            for i in 0..n {
                let reader = Task::RingReader {
                    ring: guard.name().to_string(),
                    call,
                    volume,
                    mode: ReadMode::Peek,
                };
                group.push(
                    spawn(&spec(reader, consumer_cpu(i, n), opts))?,
                    format!("ring reader {}", i + 1),
                );
            }
            (run_ring_writer(group, guard, call, volume, n, opts)?, None)
        }
        Variant::PipeTee => {
            let mut pipes: Vec<(OwnedFd, OwnedFd)> = Vec::new();
            let mut eff = usize::MAX;
            for _ in 0..n {
                let (r, w, e) = pipe_pair(Some(opts.fanout_ring))?;
                eff = eff.min(e);
                pipes.push((r, w));
            }
            let all: Vec<&OwnedFd> = pipes.iter().flat_map(|(r, w)| [r, w]).collect();
            for (i, (r, _)) in pipes.iter().enumerate() {
                let reader = Task::PipeReader {
                    fd: r.as_raw_fd(),
                    call,
                    volume,
                };
                group.push(
                    spawn_with(&spec(reader, consumer_cpu(i, n), opts), &[r], &all)?,
                    format!("pipe reader {}", i + 1),
                );
            }
            let writes: Vec<&OwnedFd> = pipes.iter().map(|(_, w)| w).collect();
            let writer = Task::PipeWriter {
                fds: writes.iter().map(|w| w.as_raw_fd()).collect(),
                call,
                volume,
            };
            group.push(
                spawn_with(&spec(writer, Some(cpu_for(0)), opts), &writes, &all)?,
                "tee writer",
            );
            drop(all);
            // Our copies must go, or the readers never see end of stream.
            drop(pipes);
            (collect(group, opts)?, Some(eff as u64))
        }
    };
    let mut row = Row::from_reports(Part::Fanout, v.name(), &reports)?;
    if row.consumers as usize != n {
        return Err(format!(
            "{}: {} consumer reports for {n} consumers",
            v.name(),
            row.consumers
        ));
    }
    row.ring_size = (v == Variant::RingPeek).then_some(opts.fanout_ring as u64);
    row.pipe_size = pipe_size;
    row.call_size = Some(call as u64);
    row.items_per_consumer = volume / call as u64;
    Ok(row)
}

/// Ring runs move this many times the pipe runs' bytes: they are 10–50×
/// faster, and CPU time (getrusage, tick-based) needs runs of a few hundred
/// milliseconds to be measured to a few per cent.
pub const RING_VOLUME_FACTOR: u64 = 16;

/// Bytes produced (a whole number of calls).
fn fanout_volume(v: Variant, opts: &Options) -> u64 {
    let call = opts.fanout_call as u64;
    let factor = if v == Variant::RingPeek {
        RING_VOLUME_FACTOR
    } else {
        1
    };
    (opts.fanout_volume * factor / call).max(16) * call
}
