//! The error of rendezvous operations.

use rustix::io::Errno;
use thiserror::Error;

use super::slot::WORDS;
use crate::sys::fdpass::MAX_FDS;

/// Why a rendezvous send, receive or call did not happen.
///
/// The words follow [`Channel`](crate::Channel)'s `SendError` / `RecvError`
/// and crossbeam-channel: [`Full`](IpcError::Full) and
/// [`Empty`](IpcError::Empty) come only from the `try_` operations (which
/// never wait), [`TimedOut`](IpcError::TimedOut) from the waiting ones,
/// [`Disconnected`](IpcError::Disconnected) means the partner is gone.
///
/// A send that fails did not deliver the message (a send that times out is
/// retracted from the shared slot); the caller still owns it, since sends
/// take it by reference.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum IpcError {
    /// `try_send`: the partner did not take the message at once (it was not
    /// already receiving); the message was retracted.
    #[error("partner is not receiving right now (message not sent); use a send that waits")]
    Full,
    /// `try_recv`: no message is waiting.
    #[error("no message waiting")]
    Empty,
    /// Nothing happened before the timeout; a send was retracted, so the
    /// message was not delivered.
    #[error("timed out waiting for the partner")]
    TimedOut,
    /// The partner hung up or died (for an open wait: every partner did).
    #[error("partner disconnected (it hung up or died)")]
    Disconnected,
    /// The partner broke the slot protocol (corrupt shared state or
    /// mismatched descriptors); what it said is untrustworthy.
    #[error("partner broke the rendezvous protocol: {0}")]
    Protocol(&'static str),
    /// More than [`WORDS`](super::WORDS) words or
    /// [`MAX_FDS`](super::MAX_FDS) descriptors; nothing was sent.
    #[error("message too large: at most {WORDS} words and {MAX_FDS} descriptors")]
    TooLarge,
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// The call.
        op: &'static str,
        /// Its errno.
        errno: Errno,
    },
}

/// Map an errno from `op` into [`IpcError::Os`].
pub(super) fn os(op: &'static str) -> impl FnOnce(Errno) -> IpcError {
    move |errno| IpcError::Os { op, errno }
}

impl IpcError {
    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}
