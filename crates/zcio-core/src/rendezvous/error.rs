//! The errors of rendezvous operations, one type per operation family as
//! for [`Channel`](crate::Channel): sends, receives, calls.
//!
//! The words are the ones every zcio transport uses
//! ([`ErrorKind`](crate::error::ErrorKind)): [`WouldBlock`] comes only from the
//! `try_` operations (which never wait), `TimedOut` from the waiting ones,
//! `Disconnected` means the partner is gone.
//!
//! A send that fails did not deliver the message (a send that times out is
//! retracted from the shared slot); the caller still owns it, since sends
//! take it by reference, so no error carries it back.
//!
//! [`WouldBlock`]: RendezvousSendError::WouldBlock

use rustix::io::Errno;
use thiserror::Error;

use super::slot::WORDS;
use crate::error::ErrorKind;
use crate::sys::fdpass::MAX_FDS;

/// Why a rendezvous operation did not happen: what the slot and socket
/// code reports, mapped onto the public type of each operation at the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IpcFail {
    WouldBlock,
    TimedOut,
    Disconnected,
    Protocol(&'static str),
    TooLarge,
    Os { op: &'static str, errno: Errno },
}

/// Map an errno from `op` into [`IpcFail::Os`].
pub(super) fn os(op: &'static str) -> impl FnOnce(Errno) -> IpcFail {
    move |errno| IpcFail::Os { op, errno }
}

/// A rendezvous send ([`Rendezvous::send`](super::Rendezvous::send),
/// `try_send`, `send_timeout`) failed: the message was not delivered.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RendezvousSendError {
    /// `try_send`: the partner did not take the message at once (it was
    /// not already receiving); the message was retracted.
    #[error("would block: the partner is not receiving right now (message not sent); use a send that waits")]
    WouldBlock,
    /// The partner did not take the message before the timeout; it was
    /// retracted.
    #[error("timed out waiting for the partner to take the message (message not sent)")]
    TimedOut,
    /// The partner hung up or died.
    #[error("disconnected: the partner hung up or died (message not sent)")]
    Disconnected,
    /// More than [`Envelope::WORDS`](super::Envelope::WORDS) words or
    /// [`Envelope::MAX_FDS`](super::Envelope::MAX_FDS) descriptors; nothing was sent.
    #[error("message too large: at most {WORDS} words and {MAX_FDS} descriptors")]
    TooLarge,
    /// The partner broke the slot protocol (corrupt shared state).
    #[error("partner broke the rendezvous protocol: {0}")]
    Protocol(&'static str),
    /// A system call failed (passing the descriptors).
    #[error("{op} failed: {errno}")]
    Os {
        /// The call.
        op: &'static str,
        /// Its errno.
        errno: Errno,
    },
}

/// A rendezvous receive ([`Rendezvous::recv`](super::Rendezvous::recv) and
/// its `try_`, `_timeout` and `_into` forms, [`recv_any`](super::Rendezvous::recv_any)
/// and its forms) failed.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RendezvousRecvError {
    /// `try_recv`: no message is waiting.
    #[error("would block: no message waiting")]
    WouldBlock,
    /// No message came before the timeout.
    #[error("timed out waiting for a message from the partner")]
    TimedOut,
    /// The partner hung up or died and sent nothing more (for an open
    /// wait: every partner did).
    #[error("disconnected: the partner hung up or died")]
    Disconnected,
    /// The partner broke the slot protocol (corrupt shared state or
    /// mismatched descriptors); what it said is untrustworthy.
    #[error("partner broke the rendezvous protocol: {0}")]
    Protocol(&'static str),
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// The call.
        op: &'static str,
        /// Its errno.
        errno: Errno,
    },
}

/// A call ([`Rendezvous::call`](super::Rendezvous::call), `call_timeout`,
/// [`reply_and_recv`](super::Rendezvous::reply_and_recv)) failed: in its send (the
/// request or reply was not delivered) or in its receive (it was, but no
/// message came back).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RendezvousCallError {
    /// The request (or reply) was not delivered.
    #[error("{0}")]
    Send(RendezvousSendError),
    /// The request was delivered; receiving the answer (or the next
    /// request) failed.
    #[error("{0}")]
    Recv(RendezvousRecvError),
}

impl From<IpcFail> for RendezvousSendError {
    fn from(f: IpcFail) -> Self {
        match f {
            IpcFail::WouldBlock => Self::WouldBlock,
            IpcFail::TimedOut => Self::TimedOut,
            IpcFail::Disconnected => Self::Disconnected,
            IpcFail::Protocol(p) => Self::Protocol(p),
            IpcFail::TooLarge => Self::TooLarge,
            IpcFail::Os { op, errno } => Self::Os { op, errno },
        }
    }
}

impl From<IpcFail> for RendezvousRecvError {
    fn from(f: IpcFail) -> Self {
        match f {
            IpcFail::WouldBlock => Self::WouldBlock,
            IpcFail::TimedOut => Self::TimedOut,
            IpcFail::Disconnected => Self::Disconnected,
            IpcFail::Protocol(p) => Self::Protocol(p),
            // Receives never build a message; a size fault here is the
            // partner's.
            IpcFail::TooLarge => Self::Protocol("message larger than a slot"),
            IpcFail::Os { op, errno } => Self::Os { op, errno },
        }
    }
}

impl From<RendezvousSendError> for RendezvousCallError {
    fn from(e: RendezvousSendError) -> Self {
        Self::Send(e)
    }
}

impl From<RendezvousRecvError> for RendezvousCallError {
    fn from(e: RendezvousRecvError) -> Self {
        Self::Recv(e)
    }
}

impl IpcFail {
    fn kind(self) -> ErrorKind {
        match self {
            Self::WouldBlock => ErrorKind::WouldBlock,
            Self::TimedOut => ErrorKind::TimedOut,
            Self::Disconnected => ErrorKind::Disconnected,
            Self::Protocol(_) => ErrorKind::Protocol,
            Self::TooLarge => ErrorKind::TooLarge,
            Self::Os { .. } => ErrorKind::Os,
        }
    }

    fn errno(self) -> Option<Errno> {
        match self {
            Self::Os { errno, .. } => Some(errno),
            _ => None,
        }
    }
}

impl From<RendezvousSendError> for IpcFail {
    fn from(e: RendezvousSendError) -> Self {
        match e {
            RendezvousSendError::WouldBlock => Self::WouldBlock,
            RendezvousSendError::TimedOut => Self::TimedOut,
            RendezvousSendError::Disconnected => Self::Disconnected,
            RendezvousSendError::TooLarge => Self::TooLarge,
            RendezvousSendError::Protocol(p) => Self::Protocol(p),
            RendezvousSendError::Os { op, errno } => Self::Os { op, errno },
        }
    }
}

impl From<RendezvousRecvError> for IpcFail {
    fn from(e: RendezvousRecvError) -> Self {
        match e {
            RendezvousRecvError::WouldBlock => Self::WouldBlock,
            RendezvousRecvError::TimedOut => Self::TimedOut,
            RendezvousRecvError::Disconnected => Self::Disconnected,
            RendezvousRecvError::Protocol(p) => Self::Protocol(p),
            RendezvousRecvError::Os { op, errno } => Self::Os { op, errno },
        }
    }
}

impl RendezvousSendError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        IpcFail::from(*self).kind()
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        IpcFail::from(*self).errno()
    }
}

impl RendezvousRecvError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        IpcFail::from(*self).kind()
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        IpcFail::from(*self).errno()
    }
}

impl RendezvousCallError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Send(e) => e.kind(),
            Self::Recv(e) => e.kind(),
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Send(e) => e.errno(),
            Self::Recv(e) => e.errno(),
        }
    }

    /// Whether the partner is gone (in either half of the call).
    pub fn is_disconnected(&self) -> bool {
        self.kind() == ErrorKind::Disconnected
    }
}
