//! `zcio::Error`: every operation family's error in one type (see [`Error`]).

use thiserror::Error;

use crate::error::ErrorKind;

use crate::buf::{AllocError, FreezeError};
use crate::channel::{
    RecvError, SendError, SendErrorKind, SendTimeoutError, TryRecvError, TrySendError,
};
use crate::forward::ForwardFailure;
use crate::msg::MsgError;
use crate::proxy::ProxyError;
use crate::region::RegionError;
use crate::rendezvous::{RendezvousCallError, RendezvousRecvError, RendezvousSendError};
use crate::ring::{OpenError, ReadError, WriteError};
use crate::segment::ConnectError;

/// `zcio::Error`: every operation family's error in one type, for callers
/// that do not care which layer failed.
///
/// Each family keeps its own small error type (what a caller that handles
/// failures matches on); `zcio::Error` is for propagating with `?`. It
/// converts from every family with `From`. Errors that give something back
/// ([`SendError`] and its siblings return the unsent `Msg`, [`FreezeError`]
/// the buffer, the `Msg` aggregate operations their input) drop it in the
/// conversion and keep only the reason; take it out first
/// ([`SendError::into_inner`]) if you need it.
///
/// Display is the wrapped error's own message (they say what to do);
/// [`source`](std::error::Error::source) continues the chain below it, so
/// a chain printer (`anyhow`'s `{:#}`) shows each cause once.
///
/// ```
/// use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};
///
/// fn send_hello(chan: &Channel, pool: &Pool) -> Result<(), zcio::Error> {
///     let mut buf = pool.try_alloc(5)?; // AllocError
///     buf.as_mut_slice().copy_from_slice(b"hello");
///     chan.send(Msg::from(buf.freeze()?))?; // FreezeError, then SendError<Msg>
///     Ok(())
/// }
///
/// let (a, b) = Channel::pair(ChannelConfig::default())?; // ConnectError
/// let pool = Pool::new(PoolConfig { chunk_size: 1 << 20, max_chunks: 1, ..PoolConfig::named("doc") });
/// send_hello(&a, &pool)?;
/// assert_eq!(b.recv()?.to_vec(), b"hello"); // RecvError
/// a.close();
/// let err = send_hello(&a, &pool).unwrap_err();
/// assert!(matches!(err, zcio::Error::Send(zcio::SendErrorKind::Disconnected)));
/// assert_eq!(
///     err.to_string(),
///     "disconnected: this end was closed, or the peer closed its end or died"
/// );
/// # Ok::<(), zcio::Error>(())
/// ```
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// Region creation or attachment.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// Buffer allocation.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// Securing a buffer at `freeze` (the buffer was dropped; handle
    /// [`FreezeError`] directly to keep it).
    #[error("could not secure buffer: {0}")]
    Freeze(RegionError),
    /// Aggregate operations.
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// Channel or rendezvous set-up.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Sending on a channel, by any of the send calls (the message was
    /// dropped; handle [`SendError`] directly to keep it).
    #[error(transparent)]
    Send(#[from] SendErrorKind),
    /// [`Channel::recv`](crate::Channel::recv) or
    /// [`Channel::recv_timeout`](crate::Channel::recv_timeout).
    #[error(transparent)]
    Recv(#[from] RecvError),
    /// [`Channel::try_recv`](crate::Channel::try_recv).
    #[error(transparent)]
    TryRecv(#[from] TryRecvError),
    /// A lane of a channel (the loan, if any, was dropped: handle
    /// [`LaneSendError`](crate::LaneSendError) directly to keep it).
    #[error(transparent)]
    Lane(#[from] crate::channel::lane::LaneError),
    /// Creating or attaching to a ring.
    #[error(transparent)]
    RingOpen(#[from] OpenError),
    /// Writing to a ring.
    #[error(transparent)]
    RingWrite(#[from] WriteError),
    /// Reading from a ring.
    #[error(transparent)]
    RingRead(#[from] ReadError),
    /// A forwarding chain's relay failed.
    #[error(transparent)]
    Forward(#[from] ForwardFailure),
    /// A rendezvous send.
    #[error(transparent)]
    RendezvousSend(#[from] RendezvousSendError),
    /// A rendezvous receive.
    #[error(transparent)]
    RendezvousRecv(#[from] RendezvousRecvError),
    /// A rendezvous call (send, then receive).
    #[error(transparent)]
    RendezvousCall(#[from] RendezvousCallError),
    /// Asynchronous IPC through proxy threads ([`proxy`](crate::proxy)).
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// Peer-to-peer I/O: associations and endpoints named by strings.
    #[cfg(feature = "splice")]
    #[error(transparent)]
    Splice(#[from] crate::splice::SpliceError),
    /// A processing module (opening, loading, running it).
    #[cfg(feature = "splice")]
    #[error(transparent)]
    Module(#[from] crate::splice::module::ModuleError),
    /// Setting up a buffering-semantics endpoint.
    #[cfg(feature = "semantics")]
    #[error(transparent)]
    SemanticSetup(#[from] crate::semantics::SetupError),
    /// An output under a buffering semantics (the buffer, if any, was
    /// dropped: handle `OutputError` directly to keep it).
    #[cfg(feature = "semantics")]
    #[error(transparent)]
    SemanticOutput(#[from] crate::semantics::OutputError),
    /// An input under a buffering semantics.
    #[cfg(feature = "semantics")]
    #[error(transparent)]
    SemanticInput(#[from] crate::semantics::InputError),
    /// An arena of application buffers.
    #[cfg(feature = "semantics")]
    #[error(transparent)]
    Arena(#[from] crate::semantics::ArenaError),
    /// A typed message that could not be allocated, read or borrowed.
    #[cfg(feature = "typed")]
    #[error(transparent)]
    Typed(#[from] crate::typed::TypedError),
}

impl Error {
    /// Where this error sits in the common vocabulary: the same word for
    /// the same situation on every transport (and the C code and Python
    /// exception it becomes; see [`ErrorKind`]).
    ///
    /// ```
    /// use zcio::{Channel, ChannelConfig, ErrorKind};
    ///
    /// let (_a, b) = Channel::pair(ChannelConfig::default())?;
    /// let e = zcio::Error::from(b.try_recv().unwrap_err());
    /// assert_eq!(e.kind(), ErrorKind::WouldBlock); // as for a ring or a pool
    /// # Ok::<(), zcio::Error>(())
    /// ```
    pub fn kind(&self) -> ErrorKind {
        self.family().kind()
    }

    /// The system's error number behind this error, if there is one (for
    /// `std::io::Error::from_raw_os_error`, C's negative codes, Python's
    /// `OSError.errno`).
    pub fn errno(&self) -> Option<crate::Errno> {
        self.family().errno()
    }

    /// The wrapped family error.
    fn family(&self) -> &dyn Family {
        match self {
            Self::Region(e) | Self::Freeze(e) => e,
            Self::Alloc(e) => e,
            Self::Msg(e) => e,
            Self::Connect(e) => e,
            Self::Send(e) => e,
            Self::Recv(e) => e,
            Self::TryRecv(e) => e,
            Self::Lane(e) => e,
            Self::RingOpen(e) => e,
            Self::RingWrite(e) => e,
            Self::RingRead(e) => e,
            Self::Forward(e) => e,
            Self::RendezvousSend(e) => e,
            Self::RendezvousRecv(e) => e,
            Self::RendezvousCall(e) => e,
            Self::Proxy(e) => e,
            #[cfg(feature = "splice")]
            Self::Splice(e) => e,
            #[cfg(feature = "splice")]
            Self::Module(e) => e,
            #[cfg(feature = "semantics")]
            Self::SemanticSetup(e) => e,
            #[cfg(feature = "semantics")]
            Self::SemanticOutput(e) => e,
            #[cfg(feature = "semantics")]
            Self::SemanticInput(e) => e,
            #[cfg(feature = "semantics")]
            Self::Arena(e) => e,
            #[cfg(feature = "typed")]
            Self::Typed(e) => e,
        }
    }
}

/// What `zcio::Error` asks of each family's error: its kind and, where a
/// system call failed, its errno (both the families' own methods).
trait Family {
    fn kind(&self) -> ErrorKind;
    fn errno(&self) -> Option<crate::Errno> {
        None
    }
}

/// `Family` for types with `kind()` (and, with `errno`, `errno()`).
macro_rules! family {
    ($($t:ty),* $(,)?; errno: $($e:ty),* $(,)?) => {
        $(impl Family for $t {
            fn kind(&self) -> ErrorKind {
                <$t>::kind(self)
            }
        })*
        $(impl Family for $e {
            fn kind(&self) -> ErrorKind {
                <$e>::kind(self)
            }
            fn errno(&self) -> Option<crate::Errno> {
                <$e>::errno(self)
            }
        })*
    };
}

family!(
    MsgError, RecvError, TryRecvError, WriteError, ReadError;
    errno: RegionError, AllocError, ConnectError, SendErrorKind, OpenError, ForwardFailure,
    RendezvousSendError, RendezvousRecvError, RendezvousCallError, ProxyError,
    crate::channel::lane::LaneError,
);
#[cfg(feature = "splice")]
family!(; errno: crate::splice::SpliceError, crate::splice::module::ModuleError);
#[cfg(feature = "semantics")]
family!(; errno: crate::semantics::SetupError, crate::semantics::OutputError,
    crate::semantics::InputError, crate::semantics::ArenaError);
#[cfg(feature = "typed")]
family!(; errno: crate::typed::TypedError);

#[cfg(feature = "semantics")]
impl From<crate::semantics::OutputOwnedError> for Error {
    /// An owned output that gave its buffer back: drops it, keeps the
    /// reason.
    fn from(e: crate::semantics::OutputOwnedError) -> Self {
        Error::SemanticOutput(e.into_parts().0)
    }
}

impl From<crate::proxy::ProxySendError> for Error {
    /// An asynchronous send or call that gave its message back: drops it,
    /// keeps the reason.
    fn from(e: crate::proxy::ProxySendError) -> Self {
        Error::Proxy(e.into_parts().0)
    }
}

impl From<crate::channel::lane::LaneSendError<'_>> for Error {
    /// Drops the loan (its slot goes back), keeps the reason.
    fn from(e: crate::channel::lane::LaneSendError<'_>) -> Self {
        Error::Lane(*e.error())
    }
}

impl From<FreezeError> for Error {
    /// Drops the buffer, keeps the reason.
    fn from(e: FreezeError) -> Self {
        Error::Freeze(e.error)
    }
}

impl<T> From<SendError<T>> for Error {
    /// Drops the message, keeps the reason.
    fn from(e: SendError<T>) -> Self {
        Error::Send(e.kind())
    }
}

impl<T> From<TrySendError<T>> for Error {
    /// Drops the message, keeps the reason.
    fn from(e: TrySendError<T>) -> Self {
        Error::Send(e.kind())
    }
}

impl<T> From<SendTimeoutError<T>> for Error {
    /// Drops the message, keeps the reason.
    fn from(e: SendTimeoutError<T>) -> Self {
        Error::Send(e.kind())
    }
}

impl From<crate::msg::JoinError> for Error {
    /// [`Msg::join`](crate::Msg::join), [`Msg::prepend`](crate::Msg::prepend), [`Msg::append`](crate::Msg::append): drops the message
    /// given back, keeps the reason.
    fn from(e: crate::msg::JoinError) -> Self {
        Error::Msg(e.into_parts().0)
    }
}

impl From<crate::msg::SplitError> for Error {
    /// [`Msg::split_at`](crate::Msg::split_at): drops the message given back, keeps the reason.
    fn from(e: crate::msg::SplitError) -> Self {
        Error::Msg(e.into_parts().0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::Msg;
    use std::error::Error as _;

    /// The kind and errno survive the conversion, including through a value-back error and a
    /// family that wraps another (moved here from the families' own tests: a family sits
    /// below this umbrella and does not name it).
    #[test]
    fn kind_and_errno_survive_the_conversion() {
        let call = RendezvousCallError::Send(RendezvousSendError::WouldBlock);
        assert_eq!(Error::from(call).kind(), ErrorKind::WouldBlock);
        let e = Error::from(RendezvousRecvError::Disconnected);
        assert_eq!(e.kind(), ErrorKind::Disconnected);
        let lost = ProxyError::Disconnected;
        let e = Error::from(crate::proxy::ProxySendError::new(
            lost,
            crate::rendezvous::Envelope::default(),
        ));
        assert!(matches!(e, Error::Proxy(a) if a == lost));
        #[cfg(feature = "typed")]
        {
            use crate::typed::TypedError;
            let v = TypedError::Volatile { ty: "a::B" };
            let e = Error::from(v.clone());
            assert_eq!((e.to_string(), e.kind()), (v.to_string(), v.kind()));
            let os = AllocError::Region(RegionError::Os {
                op: "memfd_create",
                errno: crate::Errno::NOMEM,
            });
            assert_eq!(
                Error::from(TypedError::from(os)).errno(),
                Some(crate::Errno::NOMEM)
            );
        }
    }

    #[test]
    fn every_family_converts_and_keeps_its_text() {
        let errno = crate::Errno::NOSPC;
        let region = RegionError::Os {
            op: "memfd_create",
            errno,
        };
        let cases: Vec<(Error, String)> = vec![
            (region.clone().into(), region.to_string()),
            (
                AllocError::TimedOut(std::time::Duration::from_secs(1)).into(),
                AllocError::TimedOut(std::time::Duration::from_secs(1)).to_string(),
            ),
            (
                MsgError::TooManySlices(99).into(),
                MsgError::TooManySlices(99).to_string(),
            ),
            (
                ConnectError::Refused.into(),
                ConnectError::Refused.to_string(),
            ),
            (
                SendError::new(SendErrorKind::Os(errno), ()).into(),
                SendErrorKind::Os(errno).to_string(),
            ),
            (
                TrySendError::new(SendErrorKind::WouldBlock, 7u8).into(),
                SendErrorKind::WouldBlock.to_string(),
            ),
            (
                SendTimeoutError::new(SendErrorKind::TimedOut, "m").into(),
                SendErrorKind::TimedOut.to_string(),
            ),
            (RecvError::Corrupt.into(), RecvError::Corrupt.to_string()),
            (
                TryRecvError::WouldBlock.into(),
                TryRecvError::WouldBlock.to_string(),
            ),
            (RecvError::TimedOut.into(), RecvError::TimedOut.to_string()),
            (
                OpenError::Os(errno).into(),
                OpenError::Os(errno).to_string(),
            ),
            (
                WriteError::WouldBlock.into(),
                WriteError::WouldBlock.to_string(),
            ),
            (ReadError::Lapped.into(), ReadError::Lapped.to_string()),
            (
                RendezvousSendError::Disconnected.into(),
                RendezvousSendError::Disconnected.to_string(),
            ),
            (
                RendezvousRecvError::WouldBlock.into(),
                RendezvousRecvError::WouldBlock.to_string(),
            ),
            (
                RendezvousCallError::Recv(RendezvousRecvError::TimedOut).into(),
                RendezvousRecvError::TimedOut.to_string(),
            ),
            (
                ProxyError::Disconnected.into(),
                ProxyError::Disconnected.to_string(),
            ),
            (
                crate::msg::JoinError::new(MsgError::TooManySlices(70), Msg::default()).into(),
                MsgError::TooManySlices(70).to_string(),
            ),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), text, "{e:?}");
        }
    }

    #[test]
    fn the_errno_is_exposed_where_there_is_one() {
        let errno = crate::Errno::NOSPC;
        let with: Vec<Error> = vec![
            RegionError::Os { op: "x", errno }.into(),
            AllocError::Region(RegionError::Os { op: "x", errno }).into(),
            ConnectError::Os { op: "x", errno }.into(),
            SendErrorKind::Os(errno).into(),
            OpenError::Os(errno).into(),
            RendezvousSendError::Os { op: "x", errno }.into(),
            RendezvousRecvError::Os { op: "x", errno }.into(),
            ProxyError::Os { op: "x", errno }.into(),
        ];
        for e in with {
            assert_eq!(e.errno(), Some(errno), "{e:?}");
        }
        assert_eq!(
            Error::from(RegionError::NoMemory {
                len: 2,
                available: 1
            })
            .errno(),
            Some(crate::Errno::NOMEM)
        );
        assert_eq!(Error::from(TryRecvError::WouldBlock).errno(), None);
        #[cfg(feature = "splice")]
        {
            let e = crate::splice::SpliceError::Setup { op: "x", errno };
            assert_eq!(Error::from(e.clone()).errno(), Some(errno));
            assert_eq!(Error::from(e.clone()).to_string(), e.to_string());
            let m = crate::splice::module::Registry::builtin()
                .open("no-such-module")
                .err()
                .expect("unknown");
            let text = m.to_string();
            assert_eq!(Error::from(m).to_string(), text);
        }
        #[cfg(feature = "semantics")]
        {
            let e = crate::semantics::OutputError::Os(errno);
            assert_eq!(Error::from(e).errno(), Some(errno));
            let e = crate::semantics::ArenaError::Os { op: "x", errno };
            assert_eq!(Error::from(e).errno(), Some(errno));
            let e = crate::semantics::InputError::TooShort { needed: 3 };
            assert_eq!(Error::from(e).errno(), None);
        }
    }

    #[test]
    fn one_word_for_each_situation_on_every_transport() {
        use crate::error::ErrorKind as K;
        use crate::rendezvous::RendezvousCallError;
        // Nothing available now.
        let would_block: Vec<Error> = vec![
            TrySendError::new(SendErrorKind::WouldBlock, ()).into(),
            TryRecvError::WouldBlock.into(),
            WriteError::WouldBlock.into(),
            ReadError::WouldBlock.into(),
            AllocError::WouldBlock("p".into()).into(),
            RendezvousSendError::WouldBlock.into(),
            RendezvousRecvError::WouldBlock.into(),
            ProxyError::WouldBlock.into(),
            ProxyError::QuotaExceeded.into(),
        ];
        for e in &would_block {
            assert_eq!(e.kind(), K::WouldBlock, "{e:?}");
        }
        // The peer is gone.
        let gone: Vec<Error> = vec![
            SendErrorKind::Disconnected.into(),
            RecvError::Disconnected.into(),
            TryRecvError::Disconnected.into(),
            RecvError::Disconnected.into(),
            ReadError::Disconnected { pid: 7 }.into(),
            RendezvousSendError::Disconnected.into(),
            RendezvousRecvError::Disconnected.into(),
            RendezvousCallError::Recv(RendezvousRecvError::Disconnected).into(),
            ProxyError::Disconnected.into(),
        ];
        for e in &gone {
            assert_eq!(e.kind(), K::Disconnected, "{e:?}");
            assert!(e.to_string().starts_with("disconnected"), "{e}");
        }
        // The variant names say the same: no `Full`, `Empty` or `Closed`
        // for these situations anywhere.
        for e in would_block.iter().chain(&gone) {
            let dbg = format!("{e:?}");
            for old in ["Full", "Empty", "Closed", "ProducerDied"] {
                assert!(!dbg.contains(old), "{dbg}");
            }
        }
        // Every kind C reports without a zcio code has an errno.
        assert_eq!(K::WouldBlock.errno(), Some(crate::Errno::AGAIN));
        assert_eq!(K::Disconnected.errno(), Some(crate::Errno::PIPE));
        assert_eq!(K::PeerFault.errno(), None);
    }

    #[test]
    fn errors_cross_threads() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<Error>();
        send_sync::<SendError<Msg>>();
        send_sync::<TrySendError<Msg>>();
        send_sync::<SendTimeoutError<Msg>>();
        // So `?` into `Box<dyn Error + Send + Sync>` (and anyhow) works.
        let e: Box<dyn std::error::Error + Send + Sync> =
            Box::new(SendError::new(SendErrorKind::WouldBlock, Msg::default()));
        assert_eq!(e.to_string(), SendErrorKind::WouldBlock.to_string());
    }

    #[test]
    fn source_continues_below_the_wrapped_error() {
        // AllocError::Region is transparent over the RegionError, so
        // zcio::Error shows the region's text and no duplicate cause.
        let region = RegionError::BadLength(3);
        let e = Error::from(AllocError::Region(region.clone()));
        assert_eq!(e.to_string(), region.to_string());
        assert!(e.source().is_none());
        let e = Error::from(SendError::new(SendErrorKind::Disconnected, ()));
        assert!(e.source().is_none());
    }
}
