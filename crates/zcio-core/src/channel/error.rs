//! Channel errors, one type per operation, after crossbeam-channel's.
//!
//! # Sending
//!
//! A failed send gives the message back inside the error, as
//! crossbeam-channel does: [`Channel::send`](super::Channel::send) returns a
//! [`SendError<Msg>`], [`Channel::try_send`](super::Channel::try_send) a
//! [`TrySendError<Msg>`] and [`Channel::send_timeout`](super::Channel::send_timeout)
//! a [`SendTimeoutError<Msg>`]. Each is a message plus a typed reason, a
//! [`SendErrorKind`]: `into_inner()` takes the message back, `kind()` says
//! why, and the `is_…` helpers answer the common questions. One reason enum
//! serves all three because a zcio send is never unbounded: the blocking
//! `send` waits at most `ChannelConfig::send_timeout` and fails at once
//! under `FullPolicy::Fail`, so it can end `WouldBlock` or `TimedOut` too. The
//! type says which call failed; the kind says why. `Display` states the
//! reason only, never the message.
//!
//! # Receiving
//!
//! Nothing comes back from a failed receive, so the receive errors are
//! plain enums: [`RecvError`] for the calls that wait (`recv`, bounded by
//! `ChannelConfig::recv_timeout`, and `recv_timeout`: `TimedOut`) and
//! [`TryRecvError`] for the one that does not (`try_recv`: `WouldBlock`). Both
//! distinguish a malformed message (dropped, channel still usable) from a
//! corrupted ring (channel closed).
//!
//! Every error and reason enum is `#[non_exhaustive]`: match with a
//! wildcard arm.

use std::fmt;

use thiserror::Error;

use crate::error::ErrorKind;
use crate::sys::Errno;

/// What was wrong with a received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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

impl std::error::Error for Malformed {}

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

/// Which part of the shared control segment a peer broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
pub enum PeerFault {
    /// The peer keeps its "wake me" flag set without sleeping: this many
    /// wakes in a row woke nobody. It is now woken at most once per
    /// `ChannelPolicy::max_age` (until a wake finds it asleep again).
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

/// Why a send failed: the reason inside [`SendError`], [`TrySendError`]
/// and [`SendTimeoutError`], and the error of the sending-side calls that
/// carry no message ([`Channel::share_pool`](super::Channel::share_pool),
/// [`Channel::expire_holds`](super::Channel::expire_holds)).
///
/// Which kinds each call reports:
///
/// | kind | `send` | `try_send` | `send_timeout` |
/// |---|---|---|---|
/// | `WouldBlock` | with `FullPolicy::Fail` | ring full | with `FullPolicy::Fail`, or a zero timeout |
/// | `TimedOut` | after `ChannelConfig::send_timeout` | warning the originator of a forwarded region would wait | after the timeout |
/// | `TooManyInFlight` | after waiting | at once | after waiting |
/// | the others | always possible | always possible | always possible |
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendErrorKind {
    /// Nothing available now: the ring is full and the call was not
    /// allowed to wait (`try_send`, a zero timeout, or `FullPolicy::Fail`).
    #[error("would block: the ring is full (the receiver is not keeping up); retry later or use a send that waits")]
    WouldBlock,
    /// Waited for ring space (or for the peer to release buffers, or for a
    /// forwarded region's originator to be warned) until the timeout.
    #[error("timed out waiting for ring space; the receiver is not consuming")]
    TimedOut,
    /// The peer is gone or this end was closed (`Channel::close`). The
    /// error does not tell which, so its text names both.
    #[error("disconnected: this end was closed, or the peer closed its end or died")]
    Disconnected,
    /// The peer holds as many slices (`max_in_flight`, at most its notice
    /// ring size) or bytes (`max_bytes_in_flight`) as it may, and released
    /// too few in time.
    #[error("peer holds {0} slices already (at max_in_flight, max_bytes_in_flight or its notice ring size); it must release some first, or raise the cap")]
    TooManyInFlight(usize),
    /// Empty messages are not sent.
    #[error("message is empty: nothing to send")]
    EmptyMessage,
    /// The message has more slices than the ring (or the in-flight cap) can
    /// ever hold.
    #[error("message of {0} slices does not fit the ring")]
    TooLarge(usize),
    /// Passing a region to the peer failed; the kernel's errno is kept
    /// (`ENOSPC`: every region slot of the channel is used).
    #[error("passing a region failed: {0}")]
    Os(Errno),
    /// The peer broke the ring protocol; the channel is closed.
    #[error("peer corrupted the shared ring; channel closed")]
    Corrupt,
    /// The peer held a lent buffer past `ChannelPolicy::hold` with
    /// `HoldExpiry::Abort`: the channel was aborted and all it held released.
    #[error("peer held a lent buffer past the hold limit; channel aborted")]
    HoldExpired,
}

/// The parts every send error shares: a reason and the message that was
/// not sent. Debug shows the reason and elides the message; Display is the
/// reason's text.
macro_rules! send_error {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq)]
        pub struct $name<T> {
            kind: SendErrorKind,
            msg: T,
        }

        impl<T> $name<T> {
            /// An error of `kind` giving back `msg` (for tests and wrappers;
            /// the channel builds its own).
            pub fn new(kind: SendErrorKind, msg: T) -> Self {
                Self { kind, msg }
            }

            /// Why the send failed.
            pub fn kind(&self) -> SendErrorKind {
                self.kind
            }

            /// The message that was not sent.
            pub fn message(&self) -> &T {
                &self.msg
            }

            /// Take the message back (to retry, forward elsewhere or drop).
            pub fn into_inner(self) -> T {
                self.msg
            }

            /// The reason and the message.
            pub fn into_parts(self) -> (SendErrorKind, T) {
                (self.kind, self.msg)
            }

            /// Whether the peer is gone or the channel closed.
            pub fn is_disconnected(&self) -> bool {
                self.kind == SendErrorKind::Disconnected
            }

            /// Whether nothing was available now (the ring was full) and the
            /// call could not wait.
            pub fn is_would_block(&self) -> bool {
                self.kind == SendErrorKind::WouldBlock
            }

            /// Whether the call waited until its timeout.
            pub fn is_timeout(&self) -> bool {
                self.kind == SendErrorKind::TimedOut
            }
        }

        impl<T> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("kind", &self.kind)
                    .finish_non_exhaustive()
            }
        }

        impl<T> fmt::Display for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.kind, f)
            }
        }

        impl<T> std::error::Error for $name<T> {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                // Display already is the reason's text: continue the chain
                // below it, do not repeat it.
                std::error::Error::source(&self.kind)
            }
        }

        impl<T> From<$name<T>> for SendErrorKind {
            fn from(e: $name<T>) -> Self {
                e.kind
            }
        }
    };
}

send_error! {
    /// [`Channel::send`](super::Channel::send) failed; the message is inside.
    ///
    /// The blocking send waits for ring space at most
    /// `ChannelConfig::send_timeout` (and not at all under
    /// `FullPolicy::Fail`), so every [`SendErrorKind`] is possible.
    ///
    /// ```
    /// use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig, SendErrorKind};
    ///
    /// let (a, b) = Channel::pair(ChannelConfig::default())?;
    /// let pool = Pool::new(PoolConfig { chunk_size: 1 << 20, max_chunks: 1, ..PoolConfig::named("doc") });
    /// let mut buf = pool.try_alloc(5)?;
    /// buf.as_mut_slice().copy_from_slice(b"hello");
    /// let msg = Msg::from(buf.freeze()?);
    /// drop(b); // the receiver goes away
    ///
    /// let err = a.send(msg).unwrap_err();
    /// assert_eq!(err.kind(), SendErrorKind::Disconnected);
    /// assert_eq!( // the reason, not the message
    ///     err.to_string(),
    ///     "disconnected: this end was closed, or the peer closed its end or died"
    /// );
    /// let msg = err.into_inner(); // the unsent message comes back
    /// assert_eq!(msg.to_vec(), b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    SendError
}

send_error! {
    /// [`Channel::try_send`](super::Channel::try_send) failed; the message is
    /// inside. `WouldBlock` (see [`is_would_block`](Self::is_would_block)) means "try again
    /// later".
    ///
    /// ```
    /// use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};
    ///
    /// let cfg = ChannelConfig { ring_entries: 8, ..ChannelConfig::default() };
    /// let (a, _b) = Channel::pair(cfg)?;
    /// let pool = Pool::new(PoolConfig { chunk_size: 1 << 20, max_chunks: 1, ..PoolConfig::named("doc") });
    /// let msg = |byte: u8| -> Result<Msg, Box<dyn std::error::Error>> {
    ///     let mut buf = pool.try_alloc(1)?;
    ///     buf.as_mut_slice()[0] = byte;
    ///     Ok(Msg::from(buf.freeze()?))
    /// };
    /// for i in 0..8 {
    ///     a.try_send(msg(i)?)?; // `?` converts into zcio::Error (dropping the message)
    /// }
    /// match a.try_send(msg(8)?) {
    ///     Err(e) if e.is_would_block() => assert_eq!(e.into_inner().to_vec(), [8]), // keep it for later
    ///     other => panic!("expected a full ring, got {other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    TrySendError
}

send_error! {
    /// [`Channel::send_timeout`](super::Channel::send_timeout) failed; the
    /// message is inside. `TimedOut` (see [`is_timeout`](Self::is_timeout))
    /// means the receiver did not make room in time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig, SendErrorKind};
    ///
    /// let cfg = ChannelConfig { ring_entries: 8, ..ChannelConfig::default() };
    /// let (a, _b) = Channel::pair(cfg)?;
    /// let pool = Pool::new(PoolConfig { chunk_size: 1 << 20, max_chunks: 1, ..PoolConfig::named("doc") });
    /// for _ in 0..9 {
    ///     let msg = Msg::from(pool.try_alloc(1)?.freeze()?);
    ///     if let Err(e) = a.send_timeout(msg, Duration::from_millis(10)) {
    ///         let (kind, msg) = e.into_parts();
    ///         assert_eq!(kind, SendErrorKind::TimedOut);
    ///         assert_eq!(msg.len(), 1);
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    SendTimeoutError
}

impl SendErrorKind {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::WouldBlock | Self::TooManyInFlight(_) => ErrorKind::WouldBlock,
            Self::TimedOut => ErrorKind::TimedOut,
            Self::Disconnected => ErrorKind::Disconnected,
            Self::EmptyMessage => ErrorKind::InvalidInput,
            Self::TooLarge(_) => ErrorKind::TooLarge,
            Self::Os(_) => ErrorKind::Os,
            Self::Corrupt => ErrorKind::PeerFault,
            Self::HoldExpired => ErrorKind::Aborted,
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

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(e: SendError<T>) -> Self {
        Self::new(e.kind, e.msg)
    }
}

impl<T> From<SendError<T>> for SendTimeoutError<T> {
    fn from(e: SendError<T>) -> Self {
        Self::new(e.kind, e.msg)
    }
}

/// [`Channel::recv`](super::Channel::recv) or
/// [`Channel::recv_timeout`](super::Channel::recv_timeout) failed. The
/// blocking receive waits at most `ChannelConfig::recv_timeout`, the other
/// the timeout it is given.
///
/// ```
/// use std::time::Duration;
/// use zcio::{Channel, ChannelConfig, RecvError};
///
/// let (a, b) = Channel::pair(ChannelConfig::default())?;
/// let e = b.recv_timeout(Duration::from_millis(1)).unwrap_err();
/// assert!(e.is_timeout());
/// assert_eq!(e, RecvError::TimedOut);
/// drop(a);
/// assert!(matches!(b.recv(), Err(RecvError::Disconnected)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecvError {
    /// Nothing arrived in time: within `ChannelConfig::recv_timeout`
    /// (`recv`) or the given timeout (`recv_timeout`).
    #[error("timed out waiting for a message")]
    TimedOut,
    /// The peer is gone and everything it sent has been received, or this
    /// end was closed (`Channel::close`); the text names both.
    #[error("disconnected: this end was closed, or the peer closed its end or died")]
    Disconnected,
    /// The peer sent a malformed message; it was dropped (its slices
    /// released) and the channel is still usable.
    #[error("malformed message from peer: {0}")]
    Malformed(Malformed),
    /// The peer broke the ring protocol; the channel is closed.
    #[error("peer corrupted the shared ring; channel closed")]
    Corrupt,
}

/// [`Channel::try_recv`](super::Channel::try_recv) failed.
///
/// ```
/// use zcio::{Channel, ChannelConfig, TryRecvError};
///
/// let (_a, b) = Channel::pair(ChannelConfig::default())?;
/// assert_eq!(b.try_recv().unwrap_err(), TryRecvError::WouldBlock);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryRecvError {
    /// Nothing available now: no message to receive.
    #[error("would block: no message ready")]
    WouldBlock,
    /// The peer is gone and everything it sent has been received, or this
    /// end was closed (`Channel::close`); the text names both.
    #[error("disconnected: this end was closed, or the peer closed its end or died")]
    Disconnected,
    /// The peer sent a malformed message; it was dropped (its slices
    /// released) and the channel is still usable.
    #[error("malformed message from peer: {0}")]
    Malformed(Malformed),
    /// The peer broke the ring protocol; the channel is closed.
    #[error("peer corrupted the shared ring; channel closed")]
    Corrupt,
}

impl RecvError {
    /// Whether the peer is gone (and nothing is left to receive) or this
    /// end was closed.
    pub fn is_disconnected(&self) -> bool {
        *self == Self::Disconnected
    }

    /// Whether nothing arrived in time.
    pub fn is_timeout(&self) -> bool {
        *self == Self::TimedOut
    }
}

impl TryRecvError {
    /// Whether nothing was ready.
    pub fn is_would_block(&self) -> bool {
        *self == Self::WouldBlock
    }

    /// Whether the peer is gone (and nothing is left to receive) or this
    /// end was closed.
    pub fn is_disconnected(&self) -> bool {
        *self == Self::Disconnected
    }
}

/// The kind of a receive failure (both receive errors share it).
fn recv_kind(fail: RecvFail) -> ErrorKind {
    match fail {
        RecvFail::NotReady => ErrorKind::WouldBlock,
        RecvFail::Disconnected => ErrorKind::Disconnected,
        RecvFail::Malformed(_) => ErrorKind::Malformed,
        RecvFail::Corrupt => ErrorKind::PeerFault,
    }
}

impl RecvError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::TimedOut => ErrorKind::TimedOut,
            Self::Disconnected => recv_kind(RecvFail::Disconnected),
            Self::Malformed(m) => recv_kind(RecvFail::Malformed(*m)),
            Self::Corrupt => recv_kind(RecvFail::Corrupt),
        }
    }
}

impl TryRecvError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::WouldBlock => recv_kind(RecvFail::NotReady),
            Self::Disconnected => recv_kind(RecvFail::Disconnected),
            Self::Malformed(m) => recv_kind(RecvFail::Malformed(*m)),
            Self::Corrupt => recv_kind(RecvFail::Corrupt),
        }
    }
}

/// Why the channel core's receive found no message (mapped onto the
/// public error of each receive call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvFail {
    /// Nothing ready (a non-blocking receive) or nothing before the timeout.
    NotReady,
    /// See [`RecvError::Disconnected`].
    Disconnected,
    /// See [`RecvError::Malformed`].
    Malformed(Malformed),
    /// See [`RecvError::Corrupt`].
    Corrupt,
}

impl From<RecvFail> for RecvError {
    fn from(e: RecvFail) -> Self {
        match e {
            RecvFail::NotReady => Self::TimedOut,
            RecvFail::Disconnected => Self::Disconnected,
            RecvFail::Malformed(m) => Self::Malformed(m),
            RecvFail::Corrupt => Self::Corrupt,
        }
    }
}

impl From<RecvFail> for TryRecvError {
    fn from(e: RecvFail) -> Self {
        match e {
            RecvFail::NotReady => Self::WouldBlock,
            RecvFail::Disconnected => Self::Disconnected,
            RecvFail::Malformed(m) => Self::Malformed(m),
            RecvFail::Corrupt => Self::Corrupt,
        }
    }
}

/// A receive that found nothing waiting, as the error of a bounded wait: `WouldBlock` is
/// `TimedOut` (a wait of zero that ended with nothing).
impl From<TryRecvError> for RecvError {
    fn from(e: TryRecvError) -> Self {
        match e {
            TryRecvError::WouldBlock => RecvError::TimedOut,
            TryRecvError::Disconnected => RecvError::Disconnected,
            TryRecvError::Malformed(m) => RecvError::Malformed(m),
            TryRecvError::Corrupt => RecvError::Corrupt,
        }
    }
}
