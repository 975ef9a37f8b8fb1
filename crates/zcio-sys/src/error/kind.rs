//! [`ErrorKind`]: the one vocabulary every zcio error is classified by,
//! across the transports and the languages.
//!
//! Each family's error type (`SendErrorKind`, `ReadError`, `AllocError`,
//! the rendezvous errors …) keeps its own variants, which say exactly what
//! happened; its `kind()` places it in this list, and so does
//! [`zcio::Error::kind`](crate::Error::kind). The C library turns a kind
//! into its return code and Python into its exception class, each in one
//! place, so the same situation reads the same in Rust, C and Python.

/// What kind of failure an error is: the same word for the same situation
/// on every transport. The C code and the Python exception of each kind:
///
/// | kind | C | Python |
/// |---|---|---|
/// | `WouldBlock` | `-EAGAIN` | `WouldBlock` (as `Full`, `Empty` or `PoolExhausted`) |
/// | `TimedOut` | `-ETIMEDOUT` | `TimedOut` (`AllocTimedOut` for a pool) |
/// | `Disconnected` | `-EPIPE` | `Disconnected` (a splice sink: `SpliceError`) |
/// | `PeerFault` | `-ZCIO_ECORRUPT` | `PeerFault` |
/// | `Aborted` | `-ECONNABORTED` | `PeerFault` |
/// | `Malformed` | `-EBADMSG` | `MalformedMessage` |
/// | `InvalidInput` | `-EINVAL` | `ValueError` (rings, connections, splice: the family's exception) |
/// | `TooLarge` | `-EMSGSIZE` | `ValueError` |
/// | `OutOfRange` | `-ERANGE` | `ValueError` |
/// | `NotFound` | `-ENOENT` | the family's exception |
/// | `AlreadyExists` | `-EEXIST` | the family's exception |
/// | `PermissionDenied` | `-EACCES` | the family's exception |
/// | `Busy` | `-EBUSY` | the family's exception |
/// | `NoSpace` | `-ENOSPC` | the family's exception |
/// | `OutOfMemory` | `-ENOMEM` | the family's exception |
/// | `Unsupported` | `-EOPNOTSUPP` | the family's exception |
/// | `Protocol` | `-EPROTO` | `PeerFault` (`ConnectError` while connecting) |
/// | `Lapped` | `-ZCIO_ELAPPED` | `Lapped` |
/// | `Dropped` | `-ZCIO_EDROPPED` | `Full` (`errno` `None`) |
/// | `ProducerFailed` | `-ZCIO_EPRODFAIL` | `Disconnected` (with `code`) |
/// | `NotARing` | `-ZCIO_EBADRING` | `RingError` |
/// | `Module` | `-ZCIO_EMODULE` | `ModuleError` |
/// | `Cancelled` | `-ECANCELED` | `SpliceError` |
/// | `Internal` | `-ZCIO_EPANIC` | `SpliceError` (the only source: an association's worker that panicked) |
/// | `Os` | the errno | the family's exception, with `errno` |
/// | `Other` | `-EIO` | the family's exception |
///
/// Where an error has an errno (`zcio::Error::errno`), C
/// returns it whatever the kind; Python sets it as `.errno` (and, for the
/// family exceptions, the kind's errno where the error has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Nothing available now: no message to receive, no room to send, no
    /// free buffer, a partner that is not waiting, a peer that holds as
    /// many buffers as it may. The call was not allowed to wait (or, for a
    /// peer that releases nothing, waiting did not help); trying again
    /// later can succeed.
    WouldBlock,
    /// A bounded wait ended before the operation could complete.
    TimedOut,
    /// The peer is gone (it closed its end or died) or this end was
    /// closed: nothing more can be sent or received.
    Disconnected,
    /// The peer corrupted shared state: the channel or ring is closed.
    PeerFault,
    /// The peer broke a policy (held a lent buffer too long) and the
    /// connection was aborted.
    Aborted,
    /// The peer sent a message that failed validation; it was dropped.
    Malformed,
    /// The caller passed something invalid (an empty message, a bad spec,
    /// a zero size).
    InvalidInput,
    /// Larger than the transport can ever carry, or than the buffer the
    /// caller gave.
    TooLarge,
    /// An offset or range beyond the data.
    OutOfRange,
    /// A named thing (ring, module, file) does not exist.
    NotFound,
    /// A named thing already exists.
    AlreadyExists,
    /// Access was refused.
    PermissionDenied,
    /// Someone else is using it (a ring's producer, an association).
    Busy,
    /// No room, and none will come by waiting.
    NoSpace,
    /// Not enough memory.
    OutOfMemory,
    /// Not supported by this object or layout.
    Unsupported,
    /// A handshake or protocol exchange went wrong.
    Protocol,
    /// A ring block was overwritten while being read.
    Lapped,
    /// A ring block was dropped under a tail-drop policy.
    Dropped,
    /// A ring's producer closed it with an error code.
    ProducerFailed,
    /// A file is not a usable zcio ring.
    NotARing,
    /// A processing module failed.
    Module,
    /// The operation was stopped on request.
    Cancelled,
    /// An internal failure of zcio (a worker that panicked).
    Internal,
    /// A system call failed: see the errno.
    Os,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// The errno that stands for this kind, where one does (`EAGAIN` for
    /// [`WouldBlock`](Self::WouldBlock) …); `None` for the kinds C reports
    /// with a `ZCIO_E…` code and for [`Os`](Self::Os), whose errno is the
    /// error's own.
    pub fn errno(self) -> Option<rustix::io::Errno> {
        use rustix::io::Errno as E;
        Some(match self {
            Self::WouldBlock => E::AGAIN,
            Self::TimedOut => E::TIMEDOUT,
            Self::Disconnected => E::PIPE,
            Self::Aborted => E::CONNABORTED,
            Self::Malformed => E::BADMSG,
            Self::InvalidInput => E::INVAL,
            Self::TooLarge => E::MSGSIZE,
            Self::OutOfRange => E::RANGE,
            Self::NotFound => E::NOENT,
            Self::AlreadyExists => E::EXIST,
            Self::PermissionDenied => E::ACCESS,
            Self::Busy => E::BUSY,
            Self::NoSpace => E::NOSPC,
            Self::OutOfMemory => E::NOMEM,
            Self::Unsupported => E::OPNOTSUPP,
            Self::Protocol => E::PROTO,
            Self::Cancelled => E::CANCELED,
            Self::Other => E::IO,
            Self::PeerFault
            | Self::Lapped
            | Self::Dropped
            | Self::ProducerFailed
            | Self::NotARing
            | Self::Module
            | Self::Internal
            | Self::Os => return None,
        })
    }
}
