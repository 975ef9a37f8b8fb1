//! Channel errors, one enum per operation family.

use thiserror::Error;

use crate::sys::Errno;

pub use crate::segment::ConnectError;

/// What was wrong with a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Slice count 0 or above the cap.
    BadCount(u32),
    /// A region slot the peer never announced.
    UnknownRegion(u32),
    /// A single-use descriptor with no single-use region announced.
    NoSingleUseRegion,
    /// Offset + length outside the region (or overflowing).
    OutOfBounds {
        /// Offset.
        offset: u64,
        /// Length.
        len: u64,
        /// Region size.
        region_len: u64,
    },
    /// An empty slice.
    EmptySlice,
    /// A control record that does not decode, or an fd that is unusable.
    BadControl,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::BadCount(n) => write!(f, "slice count {n} out of range"),
            Malformed::UnknownRegion(s) => write!(f, "unknown region slot {s}"),
            Malformed::NoSingleUseRegion => write!(f, "single-use descriptor without a region"),
            Malformed::OutOfBounds {
                offset,
                len,
                region_len,
            } => {
                write!(
                    f,
                    "slice {offset}+{len} outside region of {region_len} bytes"
                )
            }
            Malformed::EmptySlice => write!(f, "empty slice"),
            Malformed::BadControl => write!(f, "bad control record"),
        }
    }
}

/// Failure to send; the message is returned alongside.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The ring is full (policy `Fail`, or zero timeout).
    #[error("ring full: the receiver is not keeping up")]
    Full,
    /// Waited for ring space until the timeout.
    #[error("timed out waiting for ring space; the receiver is not consuming")]
    TimedOut,
    /// The peer is gone or the channel was closed.
    #[error("peer disconnected")]
    Disconnected,
    /// The peer holds as many slices as it may (`max_in_flight`, at most
    /// its notice ring size) and released none within the timeout.
    #[error("peer holds {0} slices already (max_in_flight or its notice ring size); it must release some first")]
    TooManyInFlight(usize),
    /// Empty messages are not sent.
    #[error("message is empty")]
    Empty,
    /// The message has more slices than the ring can ever hold.
    #[error("message of {0} slices does not fit the ring")]
    TooLarge(usize),
    /// Passing a region failed.
    #[error("passing a region failed: {0}")]
    Os(Errno),
    /// The peer broke the ring protocol; the channel is closed.
    #[error("peer corrupted the shared ring; channel closed")]
    Corrupt,
    /// The peer held a lent buffer past `Policy::hold` with
    /// `HoldExpiry::Abort`: the channel was aborted and all it held released.
    #[error("peer held a lent buffer past the hold limit; channel aborted")]
    HoldExpired,
}

/// Which part of the shared control segment a peer broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// A message ring's counters (tail or head word out of range).
    MessageRing,
    /// A notice ring's counters.
    NoticeRing,
}

impl std::fmt::Display for Area {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Area::MessageRing => "message ring counters",
            Area::NoticeRing => "notice ring counters",
        })
    }
}

/// Misbehaviour of the peer that this end detected (`Channel::health`,
/// `Channel::faults`). Each kind is recorded once, with its latest detail;
/// none of them can block or crash this end.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum PeerFault {
    /// The peer keeps its "wake me" flag set without sleeping: this many
    /// wakes in a row woke nobody. It is now woken at most once per
    /// `Policy::max_age` (until a wake finds it asleep again).
    #[error("peer sets its sleep flag but does not sleep ({0} futile wakes in a row); waking it at most once per max_age")]
    FutileWakes(u32),
    /// A blocking send waited its whole timeout for ring space.
    #[error("peer is not consuming: the ring stayed full for a whole send timeout")]
    NotConsuming,
    /// A blocking send waited its whole timeout at the in-flight cap.
    #[error("peer is not returning buffers: it holds {0} slices and released none within a send timeout")]
    NotReleasing(usize),
    /// A lent buffer was held past the hold limit; the channel was aborted.
    #[error("peer held a lent buffer past the hold limit of {0:?}; channel aborted")]
    HoldExpired(std::time::Duration),
    /// Lent buffers held past the hold limit were reclaimed (this many so far).
    #[error("peer held {0} lent buffers past the hold limit; they were reclaimed")]
    HoldsReclaimed(u64),
    /// The peer wrote impossible values into the shared control segment;
    /// the channel is closed and what the peer held was released.
    #[error("peer corrupted the shared control segment ({0}); channel closed")]
    Corrupt(Area),
    /// Messages or control records that failed validation (each rejected,
    /// the channel kept usable); the total so far.
    #[error("peer sent {0} malformed messages or control records (rejected)")]
    Malformed(u64),
}

/// Failure to receive.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RecvError {
    /// Nothing to receive right now.
    #[error("no message ready")]
    Empty,
    /// Nothing arrived before the timeout.
    #[error("timed out waiting for a message")]
    TimedOut,
    /// The peer is gone and everything it sent has been received.
    #[error("peer disconnected")]
    Disconnected,
    /// The peer sent a malformed message; it was dropped (its slices
    /// released) and the channel is still usable.
    #[error("malformed message from peer: {0}")]
    Malformed(Malformed),
    /// The peer broke the ring protocol; the channel is closed.
    #[error("peer corrupted the shared ring; channel closed")]
    Corrupt,
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// Operation.
        op: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
}
