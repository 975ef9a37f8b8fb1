//! Channel errors, one enum per operation family.

use thiserror::Error;

use crate::region::RegionError;
use crate::sys::Errno;

/// Failure to set up a channel.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// Operation.
        op: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
    /// The listener's access policy refused our credentials.
    #[error("connection refused by the listener's access policy (uid/gid not allowed)")]
    Refused,
    /// The peer spoke something other than the zcio protocol.
    #[error("handshake failed: {0}")]
    Protocol(&'static str),
    /// The handshake did not finish in time.
    #[error("handshake timed out")]
    TimedOut,
    /// The control segment could not be created or attached.
    #[error(transparent)]
    Region(#[from] RegionError),
}

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
