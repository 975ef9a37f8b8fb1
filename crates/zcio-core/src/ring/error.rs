//! Errors of the ring operations, one enum per operation family.

use rustix::io::Errno;
use thiserror::Error;

use super::layout::BadHeader;
use crate::error::ErrorKind;

/// Creating, opening or attaching to a ring.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenError {
    /// No ring of that name.
    #[error("no ring named {0:?} (create it with `zcio ring create {0}`)")]
    NotFound(String),
    /// The ring directory does not exist.
    #[error("ring directory {0} does not exist (create it, or point ZCIO_RING_DIR at an existing tmpfs directory)")]
    NoDirectory(String),
    /// Creating, but the name is taken.
    #[error("a ring named {0:?} already exists (remove it with `zcio ring rm {0}`)")]
    Exists(String),
    /// The file's owner/group/mode do not allow this process in.
    #[error("permission denied on ring {0:?} (check its owner and mode with `ls -l /dev/shm`)")]
    PermissionDenied(String),
    /// Names are 1–200 characters of `[A-Za-z0-9._-]`, not starting with a dot.
    #[error(
        "invalid ring name {0:?}: use 1-200 characters from [A-Za-z0-9._-], not starting with '.'"
    )]
    InvalidName(String),
    /// A creation parameter is out of range.
    #[error("invalid {0}")]
    InvalidConfig(&'static str),
    /// The file is not a ring this build can use.
    #[error("not a usable zcio ring: {0}")]
    BadHeader(BadHeader),
    /// The ring directory's filesystem cannot hold the ring's memory
    /// (reserved up front, see `RingMap::reserve`).
    #[error(
        "no space left on {dir}: the ring needs {}, {} available (make it smaller, remove rings with `zcio ring rm`, or set ZCIO_RING_DIR to a larger tmpfs)",
        human(*need),
        human(*available)
    )]
    NoSpace {
        /// The ring directory.
        dir: String,
        /// Bytes the ring file needs.
        need: u64,
        /// Bytes the filesystem has for it (including what the file already holds).
        available: u64,
    },
    /// Another live producer has the ring.
    #[error("ring already has a live producer (pid {0})")]
    ProducerBusy(u32),
    /// All consumer slots are taken by live consumers.
    #[error("ring has no free consumer slot ({0} consumers attached)")]
    NoSlot(usize),
    /// The operation needs a different layout.
    #[error("this operation needs a {0} ring")]
    WrongLayout(&'static str),
    /// A system call failed.
    #[error("system call failed: {0}")]
    Os(Errno),
}

/// Writing to a ring (the caller keeps its bytes).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteError {
    /// Non-blocking write and no room (`Block` policy).
    #[error("would block: the ring is full (consumers have not read far enough)")]
    WouldBlock,
    /// Timed write and no room before the deadline.
    #[error("timed out waiting for room")]
    TimedOut,
    /// Tail drop (SRP/MRP): the block was not stored; counted in the ring.
    #[error("ring full: block dropped")]
    Dropped,
    /// The block does not fit this ring's layout.
    #[error("block of {len} bytes exceeds this ring's limit of {max}")]
    TooLarge {
        /// Requested length.
        len: u64,
        /// Largest block.
        max: u64,
    },
    /// An index ring stores rich pointers only: write a block obtained from
    /// `peek`, written with `Producer::splice(&peek)` (fast splice).
    #[error("index rings take only peeked blocks: write them with Producer::splice(&peek)")]
    NotIndexable,
    /// The index ring already points into the maximum number of rings.
    #[error("index ring already points into {0} rings")]
    TooManySources(usize),
    /// The ring file was truncated or its shared state corrupted.
    #[error("ring corrupted: {0}")]
    Corrupt(&'static str),
}

/// Reading from a ring.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadError {
    /// Nothing available now: a non-blocking read found nothing to read.
    #[error("would block: nothing to read in the ring yet")]
    WouldBlock,
    /// Timed read and nothing arrived before the deadline.
    #[error("timed out waiting for data")]
    TimedOut,
    /// The producer died without closing the ring (everything it published
    /// has been read): the peer is gone, as `Disconnected` means for every
    /// transport. Reported only if it wrote something since this consumer
    /// joined; otherwise the consumer waits for the next producer.
    #[error("disconnected: the producer (pid {pid}) died without closing the ring")]
    Disconnected {
        /// The dead producer's pid.
        pid: u32,
    },
    /// The producer closed the ring with an error (everything it published
    /// has been read): the stream is incomplete, unlike an end of stream.
    /// `code` is the producer's (`zcio pipe put` uses an errno).
    #[error("producer (pid {pid}) closed the ring with error code {code}")]
    ProducerFailed {
        /// The producer's pid.
        pid: u32,
        /// The code passed to `Producer::close_with_error`.
        code: u32,
    },
    /// A peeked block was overwritten while it was being read (FRP/MRP); the
    /// cursor has skipped forward.
    #[error("block overwritten while being read (consumer lapped)")]
    Lapped,
    /// The caller's buffer cannot hold the next block.
    #[error("next block has {need} bytes, buffer has room for {have}")]
    BufferTooSmall {
        /// Block length.
        need: usize,
        /// Buffer length.
        have: usize,
    },
    /// This ring's layout cannot do that (named).
    #[error("not supported by this ring's layout: {0}")]
    Unsupported(&'static str),
    /// An index entry points into a ring that cannot be attached.
    #[error("index entry points into an unreachable ring: {0}")]
    Source(SourceError),
    /// The ring file was truncated or its shared state is inconsistent.
    #[error("ring corrupted: {0}")]
    Corrupt(&'static str),
}

/// Why the ring an index entry points into cannot be reached
/// ([`ReadError::Source`]).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceError {
    /// No row of the index ring's source table has this ring id.
    #[error("unknown ring id {0:#x}")]
    UnknownId(u64),
    /// The ring named in the source table could not be opened.
    #[error("{name}: {error}")]
    Open {
        /// The ring name from the source table.
        name: String,
        /// Why opening it failed.
        error: Box<OpenError>,
    },
    /// A ring of that name exists but has another id: the ring the entries
    /// point into was removed and the name reused.
    #[error("{0} was replaced")]
    Replaced(String),
}

/// A size: exact in the largest unit that divides it if that takes at most
/// four digits (`16 MiB`, `1036 KiB`, `4095 B`), else to one decimal.
fn human(n: u64) -> String {
    const UNITS: [(&str, u32); 5] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10), ("B", 0)];
    for (u, shift) in UNITS {
        if n.is_multiple_of(1 << shift) && n >> shift < 10_000 {
            return format!("{} {u}", n >> shift);
        }
    }
    let (u, shift) = UNITS
        .into_iter()
        .find(|&(_, shift)| n >> shift > 0)
        .unwrap_or(("B", 0));
    format!("{:.1} {u}", n as f64 / (1u64 << shift) as f64)
}

impl OpenError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound(_) | Self::NoDirectory(_) => ErrorKind::NotFound,
            Self::Exists(_) => ErrorKind::AlreadyExists,
            Self::PermissionDenied(_) => ErrorKind::PermissionDenied,
            Self::InvalidName(_) | Self::InvalidConfig(_) => ErrorKind::InvalidInput,
            Self::BadHeader(_) => ErrorKind::NotARing,
            Self::NoSpace { .. } => ErrorKind::NoSpace,
            Self::ProducerBusy(_) => ErrorKind::Busy,
            Self::NoSlot(_) => ErrorKind::NoSpace,
            Self::WrongLayout(_) => ErrorKind::Unsupported,
            Self::Os(_) => ErrorKind::Os,
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Os(e) => Some(*e),
            _ => None,
        }
    }
}

impl WriteError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::WouldBlock => ErrorKind::WouldBlock,
            Self::TimedOut => ErrorKind::TimedOut,
            Self::Dropped => ErrorKind::Dropped,
            Self::TooLarge { .. } => ErrorKind::TooLarge,
            Self::NotIndexable => ErrorKind::Unsupported,
            Self::TooManySources(_) => ErrorKind::NoSpace,
            Self::Corrupt(_) => ErrorKind::PeerFault,
        }
    }
}

impl ReadError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::WouldBlock => ErrorKind::WouldBlock,
            Self::TimedOut => ErrorKind::TimedOut,
            Self::Disconnected { .. } => ErrorKind::Disconnected,
            Self::ProducerFailed { .. } => ErrorKind::ProducerFailed,
            Self::Lapped => ErrorKind::Lapped,
            Self::BufferTooSmall { .. } => ErrorKind::TooLarge,
            Self::Unsupported(_) => ErrorKind::Unsupported,
            Self::Source(_) => ErrorKind::NotFound,
            Self::Corrupt(_) => ErrorKind::PeerFault,
        }
    }
}
