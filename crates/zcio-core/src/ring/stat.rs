//! A snapshot of a ring's shared state, for `zcio ring stat` and monitoring.
//! Read-only: it attaches to the file without joining as a consumer.

use super::error::OpenError;
use super::layout::{
    owner_parts, Geometry, MAX_CONSUMERS, OWNER_ACTIVE, OWNER_CLOSED, OWNER_FAILED, OWNER_NONE,
    SLOT_ACTIVE, SLOT_JOINING,
};
use super::live;
use super::map::RingMap;
use crate::sync::Ordering;

/// The producer as recorded in the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerInfo {
    /// Process id (0 if none ever attached).
    pub pid: u32,
    /// "none", "active", "closed", "failed" (closed with an error),
    /// "dead" or "starting".
    pub state: &'static str,
    /// The error code a failed producer closed the ring with (an errno
    /// for `zcio pipe put`), 0 otherwise.
    pub error: u32,
    /// The producer runs in another PID namespace (another container):
    /// `pid` is its number there, not here.
    pub other_pid_namespace: bool,
}

/// One consumer as recorded in its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumerInfo {
    /// Slot number.
    pub slot: usize,
    /// Process id.
    pub pid: u32,
    /// Whether that process is still running (it holds its slot's lock on
    /// the ring file, wherever it runs).
    pub alive: bool,
    /// The consumer runs in another PID namespace (another container):
    /// `pid` is its number there, not here.
    pub other_pid_namespace: bool,
    /// Cursor (cursor units).
    pub cursor: u64,
    /// Units behind the producer.
    pub lag: u64,
    /// Blocks dropped by the producer since the consumer joined.
    pub drops: u64,
    /// Times it was lapped and skipped forward.
    pub skips: u64,
    /// Units skipped.
    pub skipped_units: u64,
    /// Blocks read.
    pub read_blocks: u64,
    /// Bytes read.
    pub read_bytes: u64,
}

/// A snapshot of a ring.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RingStat {
    /// Ring name.
    pub name: String,
    /// Layout, policy and sizes.
    pub geometry: Geometry,
    /// File owner uid.
    pub uid: u32,
    /// File group gid.
    pub gid: u32,
    /// File permission bits.
    pub mode: u32,
    /// Producer.
    pub producer: ProducerInfo,
    /// Producer head (cursor units).
    pub head: u64,
    /// Units between the slowest live consumer and the head.
    pub fill: u64,
    /// Blocks published.
    pub blocks: u64,
    /// Bytes published.
    pub bytes: u64,
    /// Blocks dropped (tail drop).
    pub dropped_blocks: u64,
    /// Bytes dropped.
    pub dropped_bytes: u64,
    /// Attached consumers: every slot in the consumers bitmap, as the producer counts them
    /// (`Producer::consumers`, `wait_for_consumers`), also one whose consumer has joined
    /// but not yet marked its slot active (the producer keeps blocks for it already).
    pub consumers: Vec<ConsumerInfo>,
}

/// Take a snapshot of ring `name` (needs read permission only).
pub fn stat(name: &str) -> Result<RingStat, OpenError> {
    let map = RingMap::open(name, false)?;
    let geo = *map.geometry();
    let ctl = map.control();
    let (_, state, pid) = owner_parts(ctl.owner.load(Ordering::Acquire));
    let pidns = ctl.owner_pidns.load(Ordering::Acquire);
    let state = match state {
        OWNER_ACTIVE if live::held(&map, live::PRODUCER) => "active",
        OWNER_ACTIVE => "dead",
        OWNER_CLOSED => "closed",
        OWNER_FAILED => "failed",
        OWNER_NONE => "none",
        _ => "starting",
    };
    let head = map.producer().head.load(Ordering::Acquire) >> 1;
    let dropped_blocks = ctl.dropped_blocks.load(Ordering::Relaxed);
    let mask = ctl.consumers.load(Ordering::Acquire);
    let mut consumers = Vec::new();
    for i in 0..MAX_CONSUMERS {
        if mask & (1 << i) == 0 {
            continue;
        }
        let s = map.slot(i);
        let owner = s.owner.load(Ordering::Acquire);
        // A joining consumer is in the bitmap (it joined) before it marks its slot
        // active: counted, or a stat right after `wait_for_consumers` returned could
        // miss it. Its counters were zeroed before it joined.
        if !matches!(owner >> 32, SLOT_ACTIVE | SLOT_JOINING) {
            continue;
        }
        let cursor = s.cursor.load(Ordering::Acquire) >> 1;
        consumers.push(ConsumerInfo {
            slot: i,
            pid: owner as u32,
            alive: live::held(&map, live::slot_byte(i)),
            other_pid_namespace: live::other_namespace(s.owner_pidns.load(Ordering::Relaxed)),
            cursor,
            lag: head.saturating_sub(cursor),
            drops: dropped_blocks.wrapping_sub(s.drops_at_join.load(Ordering::Relaxed)),
            skips: s.skipped_blocks.load(Ordering::Relaxed),
            skipped_units: s.skipped_units.load(Ordering::Relaxed),
            read_blocks: s.read_blocks.load(Ordering::Relaxed),
            read_bytes: s.read_bytes.load(Ordering::Relaxed),
        });
    }
    let fill = consumers
        .iter()
        .filter(|c| c.alive)
        .map(|c| c.lag.min(geo.cap()))
        .max()
        .unwrap_or(0);
    let f = map.file_info();
    Ok(RingStat {
        name: name.to_owned(),
        geometry: geo,
        uid: f.uid,
        gid: f.gid,
        mode: f.mode,
        producer: ProducerInfo {
            pid,
            state,
            // Stored before the FAILED owner word, whose Acquire load
            // above orders this read after it.
            error: if state == "failed" {
                ctl.error.load(Ordering::Relaxed) as u32
            } else {
                0
            },
            other_pid_namespace: pid != 0 && live::other_namespace(pidns),
        },
        head,
        fill,
        blocks: map.producer().blocks.load(Ordering::Relaxed),
        bytes: map.producer().bytes.load(Ordering::Relaxed),
        dropped_blocks,
        dropped_bytes: ctl.dropped_bytes.load(Ordering::Relaxed),
        consumers,
    })
}
