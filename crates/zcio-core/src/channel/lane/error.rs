//! What can go wrong on a lane, in zcio's one vocabulary.

use rustix::io::Errno;
use thiserror::Error;

/// Why a lane operation failed. Which operation returns what:
///
/// | variant | `open_lane` / `accept_lane` | `loan` | `Loan::send` | `recv` |
/// |---|---|---|---|---|
/// | `InvalidConfig` | bad slot count or size | | | |
/// | `WouldBlock` | nothing offered (`try_`) | every slot lent (`try_`) | | nothing to read (`try_`) |
/// | `TimedOut` | nothing offered in time | no slot came back in time | | nothing arrived in time |
/// | `Disconnected` | channel closed or peer gone | lane or channel ended | lane or channel ended | lane or channel ended, nothing left |
/// | `TooLarge` | | | longer than the slot | |
/// | `Malformed` | | | | the sender named a slot or length out of bounds (dropped; the lane stays usable) |
/// | `Corrupt` | a segment that fails validation | the receiver broke a ring | | the sender broke a ring |
/// | `Os` | a system call failed | | | |
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaneError {
    /// The slot count or slot size is out of bounds.
    #[error("invalid lane: slots must be 1..=65536 and slot_size 1 B..=1 GiB (and within the peer's max_region_len)")]
    InvalidConfig,
    /// Nothing available now (a `try_` call, or a receiver that broke the
    /// ring's flow so that no room came back).
    #[error(
        "would block: nothing available on the lane now; retry later or use a call that waits"
    )]
    WouldBlock,
    /// A bounded wait ended.
    #[error("timed out waiting on the lane; the peer is not keeping up (or offered no lane)")]
    TimedOut,
    /// The lane's other end was dropped, or its channel was closed, or the
    /// peer died.
    #[error(
        "disconnected: the lane's other end was dropped, or its channel closed, or the peer died"
    )]
    Disconnected,
    /// The message is longer than a slot.
    #[error("message of {len} bytes does not fit a lane slot of {max} bytes; use a larger slot_size or the channel's send")]
    TooLarge {
        /// Bytes asked for.
        len: usize,
        /// The slot size.
        max: usize,
    },
    /// The sender named a slot or a length out of bounds: the message was
    /// dropped (counted in [`LaneStats::malformed`](crate::LaneStats::malformed)).
    #[error("malformed lane message (slot {slot}, {len} bytes): dropped; the peer broke the lane protocol")]
    Malformed {
        /// The slot named.
        slot: u32,
        /// The length named.
        len: u32,
    },
    /// The peer corrupted the lane's shared state; the lane is unusable.
    #[error("the peer corrupted the lane's shared state; drop the lane (the channel may be fine)")]
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

impl LaneError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind as K;
        match self {
            Self::InvalidConfig => K::InvalidInput,
            Self::WouldBlock => K::WouldBlock,
            Self::TimedOut => K::TimedOut,
            Self::Disconnected => K::Disconnected,
            Self::TooLarge { .. } => K::TooLarge,
            Self::Malformed { .. } => K::Malformed,
            Self::Corrupt => K::PeerFault,
            Self::Os { .. } => K::Os,
        }
    }

    /// The system's error number, for `Os`.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}
