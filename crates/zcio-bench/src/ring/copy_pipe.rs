//! Part (a): a Linux pipe vs a continuous zcio ring read with copies, with
//! `peek`, and with `peek` plus one load per 64-byte line, over ring size ×
//! call size (the paper's Figures 6 and 11). One producer process (CPU 0),
//! one consumer process (CPU 1).

use std::os::fd::AsRawFd;

use zcio::ring::Layout;

use super::{
    collect, run_ring_writer, spawn, spawn_with, spec, Options, Part, ReadMode, RingGuard, Row,
    Task,
};
use crate::affinity::cpu_for;
use crate::child::Group;
use crate::fds::pipe_pair;

/// A way of moving the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Linux pipe, buffer = ring size (capped).
    Pipe,
    /// Ring, `write` / `read` (copy semantics).
    RingCopy,
    /// Ring, `write` / `peek` + `release` (payload not read).
    RingPeek,
    /// Ring, `write` / `peek`, one load per 64-byte line, `release`.
    RingPeekTouch,
}

impl Variant {
    /// All, in table order.
    pub const ALL: [Variant; 4] = [
        Variant::Pipe,
        Variant::RingCopy,
        Variant::RingPeek,
        Variant::RingPeekTouch,
    ];

    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Pipe => "pipe",
            Variant::RingCopy => "ring-copy",
            Variant::RingPeek => "ring-peek",
            Variant::RingPeekTouch => "ring-peek-touch",
        }
    }

    fn mode(self) -> Option<ReadMode> {
        match self {
            Variant::Pipe => None,
            Variant::RingCopy => Some(ReadMode::Copy),
            Variant::RingPeek => Some(ReadMode::Peek),
            Variant::RingPeekTouch => Some(ReadMode::PeekTouch),
        }
    }
}

/// Bytes moved at one point: at least `volume` and `min_laps` ring-fulls,
/// at most `max_calls` calls, at least 16 calls; a whole number of calls.
pub fn volume(opts: &Options, ring: usize, call: usize) -> u64 {
    let want = opts.volume.max(opts.min_laps * ring as u64);
    let calls = (want / call as u64).clamp(16, opts.max_calls.max(16));
    calls * call as u64
}

/// Measure one point once.
pub fn measure(v: Variant, ring: usize, call: usize, opts: &Options) -> Result<Row, String> {
    let volume = volume(opts, ring, call);
    let mut group = Group::new();
    let (reports, pipe_size) = match v.mode() {
        None => {
            let (r, w, eff) = pipe_pair(Some(ring))?;
            let all = [&r, &w];
            let reader = Task::PipeReader {
                fd: r.as_raw_fd(),
                call,
                volume,
            };
            group.push(
                spawn_with(&spec(reader, Some(cpu_for(1)), opts), &[&r], &all)?,
                "pipe reader",
            );
            let writer = Task::PipeWriter {
                fds: vec![w.as_raw_fd()],
                call,
                volume,
            };
            group.push(
                spawn_with(&spec(writer, Some(cpu_for(0)), opts), &[&w], &all)?,
                "pipe writer",
            );
            // Our copies must go, or the reader never sees end of stream.
            drop((r, w));
            (collect(group, opts)?, Some(eff as u64))
        }
        Some(mode) => {
            let guard = RingGuard::create(
                zcio::ring::Options::new()
                    .layout(Layout::Continuous)
                    .size(ring as u64),
            )?;
            let name = guard.name().to_string();
            let reader = Task::RingReader {
                ring: name.clone(),
                call,
                volume,
                mode,
            };
            group.push(spawn(&spec(reader, Some(cpu_for(1)), opts))?, "ring reader");
            (run_ring_writer(group, guard, call, volume, 1, opts)?, None)
        }
    };
    let mut row = Row::from_reports(Part::Copy, v.name(), &reports)?;
    row.ring_size = Some(ring as u64);
    row.pipe_size = pipe_size;
    row.call_size = Some(call as u64);
    row.items_per_consumer = volume / call as u64;
    Ok(row)
}
