//! Asynchronous IPC built on the synchronous rendezvous (Götz's user-level
//! asynchrony): the partner still talks plain
//! [`rendezvous`](crate::rendezvous) and cannot tell the difference.
//!
//! * [`ProxyEndpoint::send`] appends the message to the endpoint's FIFO
//!   send queue and returns a [`Ticket`] at once; a proxy thread from a
//!   shared [`Proxies`] pool (one per active receiver queue, idle proxies
//!   reused, a cap on threads, a per-partner quota on queued messages)
//!   delivers each message with the synchronous send and records
//!   delivered/failed in the ticket. A message that cannot be queued comes
//!   back inside the error.
//! * [`ProxyEndpoint::post`] / [`ProxyEndpoint::recv`] take messages
//!   that a receive proxy collected with the synchronous receive: in FIFO
//!   order, the most recently blocked waiter served first, received into
//!   buffers from an optional allocation callback ([`Alloc`]). A `recv`
//!   while nothing else receives is done on the caller's thread.
//! * [`ProxyEndpoint::call`] is an asynchronous RPC: the request goes
//!   through the send queue, the reply is collected by the receive proxy
//!   into the returned [`RecvHandle`].
//!
//! Waits come in the forms of the rest of zcio: `recv` / `RecvHandle::wait`
//! / `Ticket::wait` bounded by the endpoint's
//! [`RendezvousConfig`](crate::rendezvous::RendezvousConfig), `try_recv` /
//! `RecvHandle::try_take` / `Ticket::status` never waiting, and `_timeout`
//! forms taking the bound.
//!
//! # Example
//!
//! A client queues one-way notes and an RPC to a plain synchronous server
//! (a thread here, normally another process):
//!
//! ```
//! use zcio::proxy::{ProxyEndpoint, Proxies};
//! use zcio::rendezvous::{Rendezvous, RendezvousListener, RendezvousRecvError, Envelope};
//!
//! let path = std::env::temp_dir().join(format!("zcio-proxy-doc-{}", std::process::id()));
//! let listener = RendezvousListener::bind(&path)?;
//! let server = std::thread::spawn(move || -> Result<u64, zcio::Error> {
//!     let ep = listener.accept().expect("accept");
//!     let mut notes = 0;
//!     loop {
//!         let m = match ep.recv() {
//!             Ok(m) => m,
//!             Err(RendezvousRecvError::Disconnected) => return Ok(notes),
//!             Err(e) => return Err(e.into()),
//!         };
//!         match m.label {
//!             1 => notes += m.words[0],                               // a note
//!             _ => ep.send(&Envelope::new(2, &[m.words[0] * 2]))?,     // a call
//!         }
//!     }
//! });
//!
//! let proxies = Proxies::default();
//! let peer = ProxyEndpoint::new(Rendezvous::connect(&path)?, &proxies);
//! let tickets: Vec<_> = (1..=3)
//!     .map(|i| peer.send(Envelope::new(1, &[i])))
//!     .collect::<Result<_, _>>()?;                 // returns at once
//! let reply = peer.call(Envelope::new(2, &[21]))?; // the message comes back in the error
//! assert_eq!(reply.wait()?.words, [42]);          // delivered in order
//! for t in &tickets {
//!     t.wait()?;                                  // each was taken
//! }
//! // The connection closes once the endpoint and its handles are gone.
//! drop((reply, peer));
//! assert_eq!(server.join().unwrap()?, 6);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod completion;
mod endpoint;
mod pool;
mod recv;
mod send;

use thiserror::Error;

pub use endpoint::{ProxyEndpoint, ProxyEndpointStats};
pub use pool::{Proxies, ProxyConfig, ProxyStats};
pub use recv::{Alloc, RecvHandle};
pub use send::{Ticket, TicketStatus};

use crate::error::ErrorKind;
use crate::rendezvous::{Envelope, IpcFail, RendezvousRecvError, RendezvousSendError};

/// Errors of the proxy layer, in the words of every zcio transport
/// ([`ErrorKind`]).
///
/// A partner that hung up or died, and this endpoint closed before a
/// message was handled, are both `Disconnected`, as for a
/// [`Channel`](crate::Channel).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProxyError {
    /// `try_recv` / `RecvHandle::try_take`: nothing available now.
    #[error("would block: no message ready")]
    WouldBlock,
    /// The partner's queue already holds its quota of messages: nothing
    /// can be queued now; retry after some are delivered (or raise the
    /// quota with [`ProxyEndpoint::set_quota`]).
    #[error("send queue for this partner is full (quota reached); wait for deliveries or raise the quota")]
    QuotaExceeded,
    /// A wait (receive, ticket or handle) timed out, or the synchronous
    /// send or receive behind it did. A ticket or handle waited on is
    /// still pending and may be waited on again.
    #[error("timed out waiting")]
    TimedOut,
    /// The partner hung up or died, or this endpoint was closed (or
    /// dropped) before the message was handled.
    #[error("disconnected: the partner hung up or died, or this endpoint was closed")]
    Disconnected,
    /// The handle's message was already taken.
    #[error("message already taken from this handle")]
    Taken,
    /// More than [`WORDS`](crate::rendezvous::WORDS) words or
    /// [`MAX_FDS`](crate::rendezvous::MAX_FDS) descriptors.
    #[error(
        "message too large: at most {} words and {} descriptors",
        crate::rendezvous::WORDS,
        crate::rendezvous::MAX_FDS
    )]
    TooLarge,
    /// The partner broke the rendezvous protocol.
    #[error("partner broke the rendezvous protocol: {0}")]
    Protocol(&'static str),
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// The call.
        op: &'static str,
        /// Its errno.
        errno: crate::Errno,
    },
}

impl ProxyError {
    /// The synchronous operation's failure, in this layer's words.
    pub(crate) fn from_fail(f: IpcFail) -> Self {
        match f {
            IpcFail::WouldBlock => Self::WouldBlock,
            IpcFail::TimedOut => Self::TimedOut,
            IpcFail::Disconnected => Self::Disconnected,
            IpcFail::Protocol(p) => Self::Protocol(p),
            IpcFail::TooLarge => Self::TooLarge,
            IpcFail::Os { op, errno } => Self::Os { op, errno },
        }
    }

    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::WouldBlock | Self::QuotaExceeded => ErrorKind::WouldBlock,
            Self::TimedOut => ErrorKind::TimedOut,
            Self::Disconnected => ErrorKind::Disconnected,
            Self::Taken => ErrorKind::InvalidInput,
            Self::TooLarge => ErrorKind::TooLarge,
            Self::Protocol(_) => ErrorKind::Protocol,
            Self::Os { .. } => ErrorKind::Os,
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<crate::Errno> {
        match self {
            Self::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

impl From<RendezvousSendError> for ProxyError {
    fn from(e: RendezvousSendError) -> Self {
        Self::from_fail(e.into())
    }
}

impl From<RendezvousRecvError> for ProxyError {
    fn from(e: RendezvousRecvError) -> Self {
        Self::from_fail(e.into())
    }
}

crate::error::value_back_error! {
    /// [`ProxyEndpoint::send`] or [`ProxyEndpoint::call`] refused: the
    /// reason, and the message, back.
    ProxySendError { ProxyError, Envelope }
}
