//! What each counter of an entry's statistics page means, per [`Kind`]:
//! the one table the owners write by (the index constants) and the tools
//! read by (`zcio stat`, `zcio top`, `zcio hz`, `zcio metrics`).
//!
//! Each field has a stable index, a stable name (the Prometheus metric is
//! `zcio_<kind>_<name>`, with `_total` added for counters), whether it is a
//! counter (only grows) or a gauge, its unit, and a help line. Indices are
//! grouped by writer: counters one side of an end writes under its own lock
//! sit in cache lines of their own (8 counters per 64-byte line), so the
//! send and receive sides of one end never write the same line. New fields
//! are appended; an index is never reused for another meaning (the layout
//! version would change instead).

use super::layout::Kind;

/// Whether a field only grows or goes up and down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    /// Only grows (messages sent, bytes, events). Tools show rates.
    Counter,
    /// A current value (buffers held, lag).
    Gauge,
}

/// What a field counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Messages, blocks, samples.
    Messages,
    /// Bytes.
    Bytes,
    /// Buffers (slices, slots).
    Buffers,
    /// Events (wakes, time-outs, refusals).
    Events,
    /// Peers, endpoints, consumers.
    Peers,
    /// A position in a stream, in bytes.
    Position,
}

impl Unit {
    /// A short lowercase word for tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Messages => "messages",
            Unit::Bytes => "bytes",
            Unit::Buffers => "buffers",
            Unit::Events => "events",
            Unit::Peers => "peers",
            Unit::Position => "position",
        }
    }
}

/// One counter of a statistics page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Its index in the page.
    pub index: usize,
    /// Stable snake_case name, unique within its kind.
    pub name: &'static str,
    /// Counter or gauge.
    pub ty: Type,
    /// What it counts.
    pub unit: Unit,
    /// One line for `--help`, `zcio stat` and the metric's HELP.
    pub help: &'static str,
    /// A gauge nobody writes: readers compute it as the difference of
    /// two counters of the page, `(minuend, subtrahend)`, so that the
    /// two sides of one end that change it never share a
    /// read-modify-write on the hot path. Its own word stays 0.
    pub difference: Option<(usize, usize)>,
}

impl Field {
    /// This field's value in the page `words` (0 past its end).
    pub fn read(&self, words: &[u64]) -> u64 {
        let w = |i: usize| words.get(i).copied().unwrap_or(0);
        match self.difference {
            // A reader may see the subtrahend a moment ahead of the
            // minuend it was read after: never below 0.
            Some((a, b)) => w(a).saturating_sub(w(b)),
            None => w(self.index),
        }
    }
}

const fn c(index: usize, name: &'static str, unit: Unit, help: &'static str) -> Field {
    Field {
        index,
        name,
        ty: Type::Counter,
        unit,
        help,
        difference: None,
    }
}

const fn g(index: usize, name: &'static str, unit: Unit, help: &'static str) -> Field {
    Field {
        index,
        name,
        ty: Type::Gauge,
        unit,
        help,
        difference: None,
    }
}

/// A gauge computed as `minuend - subtrahend` (see [`Field::difference`]).
const fn d(
    index: usize,
    name: &'static str,
    unit: Unit,
    help: &'static str,
    minuend: usize,
    subtrahend: usize,
) -> Field {
    Field {
        difference: Some((minuend, subtrahend)),
        ..g(index, name, unit, help)
    }
}

use Unit::{Buffers, Bytes, Events, Messages, Peers, Position};

/// A channel listener's counters (written by its accepting thread).
pub mod listener {
    /// Connections accepted.
    pub const ACCEPTED: usize = 0;
    /// Connection attempts refused (failed handshake, credentials, limits).
    pub const REFUSED: usize = 1;
}

const LISTENER: &[Field] = &[
    c(
        listener::ACCEPTED,
        "accepted",
        Events,
        "connections accepted",
    ),
    c(
        listener::REFUSED,
        "refused",
        Events,
        "connection attempts refused (handshake, credentials or limits)",
    ),
];

/// A channel end's counters. 0..16: the send side (under its lock);
/// 16..32: the receive side; 32..: either side.
pub mod channel {
    /// Messages sent.
    pub const SENT_MESSAGES: usize = 0;
    /// Payload bytes sent.
    pub const SENT_BYTES: usize = 1;
    /// Messages sent by copy into a small-message slot.
    pub const COPIED_MESSAGES: usize = 2;
    /// Buffers we lent that the peer still holds (our ledger).
    pub const HELD_BY_PEER_BUFFERS: usize = 3;
    /// Bytes of those buffers.
    pub const HELD_BY_PEER_BYTES: usize = 4;
    /// Deallocation notices received and accepted.
    pub const NOTICES_RECEIVED: usize = 5;
    /// Notices naming a token the peer does not hold (ignored).
    pub const BAD_NOTICES: usize = 6;
    /// Regions passed to the peer.
    pub const REGIONS_SENT: usize = 7;
    /// Lent buffers reclaimed past the hold limit.
    pub const RECLAIMED: usize = 8;
    /// Lent buffers retired (the peer ended holding them).
    pub const RETIRED: usize = 9;
    /// Buffers on the ring the peer never received when it ended.
    pub const NEVER_RECEIVED: usize = 10;
    /// Sends that found no room and did not wait (`WouldBlock`).
    pub const SEND_WOULD_BLOCK: usize = 11;
    /// Sends that timed out.
    pub const SEND_TIMED_OUT: usize = 12;
    /// Sends that found the peer gone.
    pub const SEND_DISCONNECTED: usize = 13;
    /// Messages received.
    pub const RECEIVED_MESSAGES: usize = 16;
    /// Payload bytes received.
    pub const RECEIVED_BYTES: usize = 17;
    /// The peer's buffers this end holds (received, not yet released):
    /// [`RECEIVED_SLICES`] minus [`ENDED_SLICES`], computed by readers
    /// (its word is not written).
    pub const HOLDING_BUFFERS: usize = 18;
    /// Notices sent to the peer.
    pub const NOTICES_SENT: usize = 19;
    /// Notices not sent because the peer was gone.
    pub const NOTICES_DROPPED: usize = 20;
    /// Malformed messages received (rejected).
    pub const MALFORMED: usize = 21;
    /// Regions received from the peer.
    pub const REGIONS_RECEIVED: usize = 22;
    /// Retire notices sent for buffers forwarded to a peer that ended.
    pub const RETIRE_NOTICES_SENT: usize = 23;
    /// Receives that found nothing and did not wait.
    pub const RECV_WOULD_BLOCK: usize = 24;
    /// Receives that timed out.
    pub const RECV_TIMED_OUT: usize = 25;
    /// Receives that found the peer gone.
    pub const RECV_DISCONNECTED: usize = 26;
    /// Received slices built (one per buffer of a received message;
    /// under the receive lock).
    pub const RECEIVED_SLICES: usize = 27;
    /// Received slices ended: released or retired (under the notice
    /// lock; any thread may end a slice).
    pub const ENDED_SLICES: usize = 28;
    /// Futex wakes issued.
    pub const WAKES: usize = 32;
    /// Times this end slept on a futex.
    pub const SLEEPS: usize = 33;
    /// Wakes that found nobody asleep.
    pub const FUTILE_WAKES: usize = 34;
    /// Wakes not issued (distrusted sleep flag, woken recently).
    pub const WAKES_SUPPRESSED: usize = 35;
    /// The peer's pid (as this end's PID namespace sees it; 0 unknown).
    pub const PEER_PID: usize = 40;
    /// An id both ends of one connection share (so tools pair them).
    pub const CONNECTION: usize = 41;
}

const CHANNEL: &[Field] = {
    use channel::*;
    &[
        c(SENT_MESSAGES, "sent_messages", Messages, "messages sent"),
        c(SENT_BYTES, "sent_bytes", Bytes, "payload bytes sent"),
        c(
            COPIED_MESSAGES,
            "copied_messages",
            Messages,
            "messages sent by copy into a small-message slot",
        ),
        g(
            HELD_BY_PEER_BUFFERS,
            "held_by_peer_buffers",
            Buffers,
            "buffers lent to the peer that it still holds",
        ),
        g(
            HELD_BY_PEER_BYTES,
            "held_by_peer_bytes",
            Bytes,
            "bytes of the buffers the peer still holds",
        ),
        c(
            NOTICES_RECEIVED,
            "notices_received",
            Events,
            "deallocation notices received from the peer",
        ),
        c(
            BAD_NOTICES,
            "bad_notices",
            Events,
            "notices naming a buffer the peer does not hold (ignored)",
        ),
        c(
            REGIONS_SENT,
            "regions_sent",
            Events,
            "regions passed to the peer",
        ),
        c(
            RECLAIMED,
            "reclaimed_buffers",
            Buffers,
            "lent buffers reclaimed past the hold limit",
        ),
        c(
            RETIRED,
            "retired_buffers",
            Buffers,
            "lent buffers retired because the peer ended holding them",
        ),
        c(
            NEVER_RECEIVED,
            "never_received_buffers",
            Buffers,
            "buffers still queued when the peer ended (released)",
        ),
        c(
            SEND_WOULD_BLOCK,
            "send_would_block",
            Events,
            "sends that found no room and did not wait",
        ),
        c(
            SEND_TIMED_OUT,
            "send_timed_out",
            Events,
            "sends that timed out",
        ),
        c(
            SEND_DISCONNECTED,
            "send_disconnected",
            Events,
            "sends that found the peer gone",
        ),
        c(
            RECEIVED_MESSAGES,
            "received_messages",
            Messages,
            "messages received",
        ),
        c(
            RECEIVED_BYTES,
            "received_bytes",
            Bytes,
            "payload bytes received",
        ),
        d(
            HOLDING_BUFFERS,
            "holding_buffers",
            Buffers,
            "the peer's buffers this end holds",
            RECEIVED_SLICES,
            ENDED_SLICES,
        ),
        c(
            NOTICES_SENT,
            "notices_sent",
            Events,
            "deallocation notices sent",
        ),
        c(
            NOTICES_DROPPED,
            "notices_dropped",
            Events,
            "notices not sent because the peer was gone",
        ),
        c(
            MALFORMED,
            "malformed",
            Events,
            "malformed messages received and rejected",
        ),
        c(
            REGIONS_RECEIVED,
            "regions_received",
            Events,
            "regions received from the peer",
        ),
        c(
            RETIRE_NOTICES_SENT,
            "retire_notices_sent",
            Events,
            "retire notices sent for forwarded buffers",
        ),
        c(
            RECV_WOULD_BLOCK,
            "recv_would_block",
            Events,
            "receives that found nothing and did not wait",
        ),
        c(
            RECV_TIMED_OUT,
            "recv_timed_out",
            Events,
            "receives that timed out",
        ),
        c(
            RECV_DISCONNECTED,
            "recv_disconnected",
            Events,
            "receives that found the peer gone",
        ),
        c(
            RECEIVED_SLICES,
            "received_slices",
            Buffers,
            "received buffers taken into use (one per buffer of a message)",
        ),
        c(
            ENDED_SLICES,
            "ended_slices",
            Buffers,
            "received buffers released or retired",
        ),
        c(WAKES, "wakes", Events, "futex wakes issued"),
        c(SLEEPS, "sleeps", Events, "times this end slept"),
        c(
            FUTILE_WAKES,
            "futile_wakes",
            Events,
            "wakes that found nobody asleep",
        ),
        c(
            WAKES_SUPPRESSED,
            "wakes_suppressed",
            Events,
            "wakes not issued (peer woken recently)",
        ),
        g(PEER_PID, "peer_pid", Peers, "the peer's pid (0 unknown)"),
        g(
            CONNECTION,
            "connection",
            Peers,
            "an id both ends of the connection share",
        ),
    ]
};

/// A lane end's counters. 0..8: send side; 8..16: receive side.
pub mod lane {
    /// Messages sent.
    pub const SENT_MESSAGES: usize = 0;
    /// Payload bytes sent.
    pub const SENT_BYTES: usize = 1;
    /// Sends that found no room and did not wait.
    pub const SEND_WOULD_BLOCK: usize = 2;
    /// Sends that timed out.
    pub const SEND_TIMED_OUT: usize = 3;
    /// Sends that found the peer gone.
    pub const SEND_DISCONNECTED: usize = 4;
    /// Buffers sent and not yet returned by the peer.
    pub const IN_FLIGHT_BUFFERS: usize = 5;
    /// Messages received.
    pub const RECEIVED_MESSAGES: usize = 8;
    /// Payload bytes received.
    pub const RECEIVED_BYTES: usize = 9;
    /// Receives that found nothing and did not wait.
    pub const RECV_WOULD_BLOCK: usize = 10;
    /// Receives that timed out.
    pub const RECV_TIMED_OUT: usize = 11;
    /// Receives that found the peer gone.
    pub const RECV_DISCONNECTED: usize = 12;
    /// Times this end slept.
    pub const SLEEPS: usize = 16;
    /// Wakes issued.
    pub const WAKES: usize = 17;
    /// The peer's pid (as this end's PID namespace sees it; 0 unknown).
    pub const PEER_PID: usize = 24;
    /// An id both ends of one lane share (so tools pair them).
    pub const CONNECTION: usize = 25;
}

const LANE: &[Field] = {
    use lane::*;
    &[
        c(SENT_MESSAGES, "sent_messages", Messages, "messages sent"),
        c(SENT_BYTES, "sent_bytes", Bytes, "payload bytes sent"),
        c(
            SEND_WOULD_BLOCK,
            "send_would_block",
            Events,
            "sends that found no room and did not wait",
        ),
        c(
            SEND_TIMED_OUT,
            "send_timed_out",
            Events,
            "sends that timed out",
        ),
        c(
            SEND_DISCONNECTED,
            "send_disconnected",
            Events,
            "sends that found the peer gone",
        ),
        g(
            IN_FLIGHT_BUFFERS,
            "in_flight_buffers",
            Buffers,
            "buffers sent and not yet returned",
        ),
        c(
            RECEIVED_MESSAGES,
            "received_messages",
            Messages,
            "messages received",
        ),
        c(
            RECEIVED_BYTES,
            "received_bytes",
            Bytes,
            "payload bytes received",
        ),
        c(
            RECV_WOULD_BLOCK,
            "recv_would_block",
            Events,
            "receives that found nothing and did not wait",
        ),
        c(
            RECV_TIMED_OUT,
            "recv_timed_out",
            Events,
            "receives that timed out",
        ),
        c(
            RECV_DISCONNECTED,
            "recv_disconnected",
            Events,
            "receives that found the peer gone",
        ),
        c(SLEEPS, "sleeps", Events, "times this end slept"),
        c(WAKES, "wakes", Events, "wakes issued"),
        g(PEER_PID, "peer_pid", Peers, "the peer's pid (0 unknown)"),
        g(
            CONNECTION,
            "connection",
            Peers,
            "an id both ends of the lane share",
        ),
    ]
};

/// A pool's counters.
pub mod pool {
    /// Buffers the pool can hand out at most (0: grows without a bound).
    pub const CAPACITY_BUFFERS: usize = 0;
    /// Bytes it maps.
    pub const CAPACITY_BYTES: usize = 1;
    /// Buffers in use (allocated, not yet back).
    pub const IN_USE_BUFFERS: usize = 2;
    /// Bytes of the buffers in use.
    pub const IN_USE_BYTES: usize = 3;
    /// Bytes retired: lent to a peer that ended holding them, never reused.
    pub const RETIRED_BYTES: usize = 4;
    /// Buffers allocated.
    pub const ALLOCATED: usize = 5;
    /// Allocations that found the pool exhausted.
    pub const EXHAUSTED: usize = 6;
    /// Allocations that timed out waiting for a buffer.
    pub const ALLOC_TIMED_OUT: usize = 7;
}

const POOL: &[Field] = {
    use pool::*;
    &[
        g(
            CAPACITY_BUFFERS,
            "capacity_buffers",
            Buffers,
            "buffers the pool hands out at most (0: no bound)",
        ),
        g(
            CAPACITY_BYTES,
            "capacity_bytes",
            Bytes,
            "bytes the pool maps",
        ),
        g(IN_USE_BUFFERS, "in_use_buffers", Buffers, "buffers in use"),
        g(
            IN_USE_BYTES,
            "in_use_bytes",
            Bytes,
            "bytes of the buffers in use",
        ),
        g(
            RETIRED_BYTES,
            "retired_bytes",
            Bytes,
            "bytes retired after a peer ended holding them (never reused)",
        ),
        c(ALLOCATED, "allocated_buffers", Buffers, "buffers allocated"),
        c(
            EXHAUSTED,
            "exhausted",
            Events,
            "allocations that found the pool exhausted",
        ),
        c(
            ALLOC_TIMED_OUT,
            "alloc_timed_out",
            Events,
            "allocations that timed out waiting for a buffer",
        ),
    ]
};

/// A ring producer's counters.
pub mod producer {
    /// Blocks written.
    pub const BLOCKS: usize = 0;
    /// Bytes written.
    pub const BYTES: usize = 1;
    /// Writes that found no room and did not wait.
    pub const WOULD_BLOCK: usize = 2;
    /// Writes that timed out.
    pub const TIMED_OUT: usize = 3;
    /// Consumers attached (as last seen by the producer).
    pub const CONSUMERS: usize = 4;
    /// The write position (bytes written since the ring was created).
    pub const HEAD: usize = 5;
    /// Ring capacity in bytes.
    pub const CAPACITY_BYTES: usize = 6;
}

const PRODUCER: &[Field] = {
    use producer::*;
    &[
        c(BLOCKS, "written_blocks", Messages, "blocks written"),
        c(BYTES, "written_bytes", Bytes, "bytes written"),
        c(
            WOULD_BLOCK,
            "write_would_block",
            Events,
            "writes that found no room and did not wait",
        ),
        c(
            TIMED_OUT,
            "write_timed_out",
            Events,
            "writes that timed out",
        ),
        g(CONSUMERS, "consumers", Peers, "consumers attached"),
        g(
            HEAD,
            "head",
            Position,
            "write position in bytes since creation",
        ),
        g(
            CAPACITY_BYTES,
            "capacity_bytes",
            Bytes,
            "ring capacity in bytes",
        ),
    ]
};

/// A ring consumer's counters.
pub mod consumer {
    /// Blocks read.
    pub const BLOCKS: usize = 0;
    /// Bytes read.
    pub const BYTES: usize = 1;
    /// Blocks skipped after the producer lapped this consumer.
    pub const SKIPPED_BLOCKS: usize = 2;
    /// Blocks the producer dropped since this consumer joined.
    pub const DROPS: usize = 3;
    /// How far this consumer is behind the producer, in bytes (at its
    /// last read).
    pub const LAG_BYTES: usize = 4;
    /// The read position (bytes since the ring was created).
    pub const POSITION: usize = 5;
    /// Reads that found nothing and did not wait.
    pub const WOULD_BLOCK: usize = 6;
    /// Reads that timed out.
    pub const TIMED_OUT: usize = 7;
}

const CONSUMER: &[Field] = {
    use consumer::*;
    &[
        c(BLOCKS, "read_blocks", Messages, "blocks read"),
        c(BYTES, "read_bytes", Bytes, "bytes read"),
        c(
            SKIPPED_BLOCKS,
            "skipped_blocks",
            Messages,
            "blocks skipped after the producer lapped this consumer",
        ),
        c(
            DROPS,
            "dropped_blocks",
            Messages,
            "blocks the producer dropped since this consumer joined",
        ),
        g(
            LAG_BYTES,
            "lag_bytes",
            Bytes,
            "bytes behind the producer at the last read",
        ),
        g(
            POSITION,
            "position",
            Position,
            "read position in bytes since creation",
        ),
        c(
            WOULD_BLOCK,
            "read_would_block",
            Events,
            "reads that found nothing and did not wait",
        ),
        c(TIMED_OUT, "read_timed_out", Events, "reads that timed out"),
    ]
};

/// A rendezvous point's counters (the bound or connected end).
pub mod rendezvous {
    /// Endpoints connected now.
    pub const PEERS: usize = 0;
    /// Endpoints accepted since creation.
    pub const ACCEPTED: usize = 1;
    /// Messages sent.
    pub const SENT_MESSAGES: usize = 2;
    /// Payload bytes sent.
    pub const SENT_BYTES: usize = 3;
    /// Messages received.
    pub const RECEIVED_MESSAGES: usize = 4;
    /// Payload bytes received.
    pub const RECEIVED_BYTES: usize = 5;
    /// Descriptors passed in messages (either way).
    pub const DESCRIPTORS: usize = 6;
    /// Operations that timed out.
    pub const TIMED_OUT: usize = 7;
    /// Operations that found the peer gone.
    pub const DISCONNECTED: usize = 8;
    /// Malformed messages received (rejected).
    pub const MALFORMED: usize = 9;
}

const RENDEZVOUS: &[Field] = {
    use rendezvous::*;
    &[
        g(PEERS, "peers", Peers, "endpoints connected"),
        c(ACCEPTED, "accepted", Events, "endpoints accepted"),
        c(SENT_MESSAGES, "sent_messages", Messages, "messages sent"),
        c(SENT_BYTES, "sent_bytes", Bytes, "payload bytes sent"),
        c(
            RECEIVED_MESSAGES,
            "received_messages",
            Messages,
            "messages received",
        ),
        c(
            RECEIVED_BYTES,
            "received_bytes",
            Bytes,
            "payload bytes received",
        ),
        c(
            DESCRIPTORS,
            "descriptors",
            Events,
            "descriptors passed in messages",
        ),
        c(TIMED_OUT, "timed_out", Events, "operations that timed out"),
        c(
            DISCONNECTED,
            "disconnected",
            Events,
            "operations that found the peer gone",
        ),
        c(
            MALFORMED,
            "malformed",
            Events,
            "malformed messages received and rejected",
        ),
    ]
};

/// A splice association's counters.
pub mod association {
    /// Increments started.
    pub const STARTED: usize = 0;
    /// Increments completed.
    pub const COMPLETED: usize = 1;
    /// Increments that ended in an error.
    pub const FAILED: usize = 2;
    /// Bytes moved.
    pub const BYTES: usize = 3;
    /// Whether flow is running now (1) or stopped (0).
    pub const RUNNING: usize = 4;
}

const ASSOCIATION: &[Field] = {
    use association::*;
    &[
        c(STARTED, "started", Events, "increments started"),
        c(COMPLETED, "completed", Events, "increments completed"),
        c(
            FAILED,
            "failed",
            Events,
            "increments that ended in an error",
        ),
        c(BYTES, "moved_bytes", Bytes, "bytes moved"),
        g(RUNNING, "running", Events, "1 while flow runs, else 0"),
    ]
};

/// A bridge's counters (export or import).
pub mod bridge {
    /// Samples published (export) or delivered (import).
    pub const SAMPLES: usize = 0;
    /// Payload bytes of those samples.
    pub const BYTES: usize = 1;
    /// Samples lost: not published for back pressure (export), or gaps
    /// in the sequence (import).
    pub const LOST: usize = 2;
    /// Malformed samples received and rejected (import).
    pub const MALFORMED: usize = 3;
    /// Remote peers seen now (subscribers or publishers).
    pub const PEERS: usize = 4;
}

const BRIDGE: &[Field] = {
    use bridge::*;
    &[
        c(
            SAMPLES,
            "samples",
            Messages,
            "samples published or delivered",
        ),
        c(
            BYTES,
            "sample_bytes",
            Bytes,
            "payload bytes of those samples",
        ),
        c(
            LOST,
            "lost_samples",
            Messages,
            "samples lost (back pressure or gaps)",
        ),
        c(
            MALFORMED,
            "malformed",
            Events,
            "malformed samples received and rejected",
        ),
        g(PEERS, "peers", Peers, "remote peers seen"),
    ]
};

/// The fields of `kind`'s statistics page, by index.
pub fn fields(kind: Kind) -> &'static [Field] {
    match kind {
        Kind::Listener => LISTENER,
        Kind::Channel => CHANNEL,
        Kind::Lane => LANE,
        Kind::Pool => POOL,
        Kind::RingProducer => PRODUCER,
        Kind::RingConsumer => CONSUMER,
        Kind::Rendezvous => RENDEZVOUS,
        Kind::Association => ASSOCIATION,
        Kind::BridgeExport | Kind::BridgeImport => BRIDGE,
    }
}

/// The field of `kind` named `name`.
pub fn field(kind: Kind, name: &str) -> Option<&'static Field> {
    fields(kind).iter().find(|f| f.name == name)
}

/// The field of `kind` that counts its messages (sent or written for a
/// sender, received or read for a receiver, whichever grew), for rates:
/// `(messages, bytes)` pairs of field indices to sum.
pub fn traffic(kind: Kind) -> &'static [(usize, usize)] {
    match kind {
        Kind::Channel => &[
            (channel::SENT_MESSAGES, channel::SENT_BYTES),
            (channel::RECEIVED_MESSAGES, channel::RECEIVED_BYTES),
        ],
        Kind::Lane => &[
            (lane::SENT_MESSAGES, lane::SENT_BYTES),
            (lane::RECEIVED_MESSAGES, lane::RECEIVED_BYTES),
        ],
        Kind::RingProducer => &[(producer::BLOCKS, producer::BYTES)],
        Kind::RingConsumer => &[(consumer::BLOCKS, consumer::BYTES)],
        Kind::Rendezvous => &[
            (rendezvous::SENT_MESSAGES, rendezvous::SENT_BYTES),
            (rendezvous::RECEIVED_MESSAGES, rendezvous::RECEIVED_BYTES),
        ],
        Kind::BridgeExport | Kind::BridgeImport => &[(bridge::SAMPLES, bridge::BYTES)],
        Kind::Listener | Kind::Pool | Kind::Association => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::STATS_COUNT;

    #[test]
    fn every_kind_has_unique_indices_and_names_in_the_page() {
        for kind in Kind::ALL {
            let f = fields(kind);
            assert!(!f.is_empty(), "{kind} has no fields");
            for (i, a) in f.iter().enumerate() {
                assert!(a.index < STATS_COUNT, "{kind}.{}", a.name);
                assert!(
                    a.name
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                    "{kind}.{} is not snake_case",
                    a.name
                );
                assert!(!a.help.is_empty());
                for b in &f[i + 1..] {
                    assert_ne!(a.index, b.index, "{kind}: {} and {}", a.name, b.name);
                    assert_ne!(a.name, b.name, "{kind}");
                }
            }
            for x in f {
                if let Some((a, b)) = x.difference {
                    assert_eq!(x.ty, Type::Gauge, "{kind}.{}", x.name);
                    for i in [a, b] {
                        assert!(
                            f.iter().any(|y| y.index == i && y.ty == Type::Counter),
                            "{kind}.{}: {i} is not a counter of the page",
                            x.name
                        );
                    }
                }
            }
            for &(m, b) in traffic(kind) {
                assert!(f.iter().any(|x| x.index == m && x.unit == Unit::Messages));
                assert!(f.iter().any(|x| x.index == b && x.unit == Unit::Bytes));
            }
        }
    }

    #[test]
    fn a_difference_is_read_from_its_two_counters() {
        let f = field(Kind::Channel, "holding_buffers").unwrap();
        let mut w = [0u64; STATS_COUNT];
        w[channel::RECEIVED_SLICES] = 7;
        w[channel::ENDED_SLICES] = 5;
        w[channel::HOLDING_BUFFERS] = 99;
        assert_eq!(f.read(&w), 2);
        w[channel::ENDED_SLICES] = 8;
        assert_eq!(f.read(&w), 0, "never below zero");
        assert_eq!(f.read(&w[..3]), 0, "a short page");
    }

    #[test]
    fn channel_sides_write_separate_cache_lines() {
        use channel::*;
        let line = |i: usize| i / 8;
        let tx = [
            SENT_MESSAGES,
            SENT_BYTES,
            HELD_BY_PEER_BYTES,
            SEND_DISCONNECTED,
        ];
        let rx = [
            RECEIVED_MESSAGES,
            RECEIVED_BYTES,
            RECEIVED_SLICES,
            RECV_DISCONNECTED,
        ];
        for t in tx {
            for r in rx {
                assert_ne!(line(t), line(r));
            }
        }
        assert_ne!(line(lane::SENT_BYTES), line(lane::RECEIVED_BYTES));
    }
}
