//! Errors of the semantics layer, one enum per operation family.

use thiserror::Error;

use super::arena::ArenaError;
use crate::{AllocError, Errno, MsgError, RecvError, SendErrorKind};

/// Why [`SemanticEndpoint::new`](super::SemanticEndpoint::new) failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The arena could not be made.
    #[error("arena: {0}")]
    Arena(#[from] ArenaError),
    /// A buffer for the hello could not be allocated.
    #[error("allocating the hello: {0}")]
    Alloc(AllocError),
    /// Sending the hello failed.
    #[error("sending the hello: {0}")]
    Send(SendErrorKind),
    /// The peer's hello did not arrive (is the peer an `SemanticEndpoint` too?).
    #[error("waiting for the peer's hello: {0} (both ends must create an SemanticEndpoint)")]
    Recv(crate::RecvError),
    /// The peer's first message was not a valid hello.
    #[error("the peer's first message is not a zcio semantics hello (version mismatch, or the peer is not an SemanticEndpoint)")]
    BadHello,
}

/// Why an output failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OutputError {
    /// Empty data or a zero-length buffer.
    #[error("message is empty: nothing to output")]
    EmptyMessage,
    /// A system buffer (copy, header, move region) could not be allocated.
    #[error("allocating a buffer: {0}")]
    Alloc(AllocError),
    /// The arena has no room for a system-allocated buffer.
    #[error("arena: {0}")]
    Arena(ArenaError),
    /// The channel refused the message.
    #[error("sending: {0}")]
    Send(SendErrorKind),
    /// Building the message failed.
    #[error("building the message: {0}")]
    Msg(MsgError),
    /// Sealing a move buffer failed.
    #[error("sealing the buffer: {0}")]
    Freeze(String),
    /// A protection change failed.
    #[error("changing page protection: {0}")]
    Os(Errno),
}

zcio_sys::error::value_back_error! {
    /// [`SemanticEndpoint::output_owned`](super::SemanticEndpoint::output_owned)
    /// refused: the reason, and the buffer back when it is still the
    /// application's (`None` once it was sealed for a move or lent).
    OutputOwnedError { OutputError, Option<super::OwnedBuf> }
}

/// Why an input failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum InputError {
    /// Receiving from the channel failed.
    #[error("receiving: {0}")]
    Recv(RecvError),
    /// The buffer is shorter than the message, which is kept for the next
    /// call: call again with at least `needed` bytes.
    #[error("buffer too short: the message has {needed} bytes (it is kept for the next call)")]
    TooShort {
        /// The message length.
        needed: usize,
    },
    /// The peer sent something that is not a valid semantics message; it
    /// was dropped.
    #[error("malformed message from peer: {0}")]
    Malformed(&'static str),
    /// No system-allocated buffer could be had (the arena is full now, or
    /// protecting its pages failed): the allocation's error.
    #[error("allocating the input buffer: {0}")]
    Alloc(Box<OutputError>),
    /// Mapping the received pages failed.
    #[error("mapping the received pages: {0}")]
    Os(Errno),
}

impl SetupError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> zcio_sys::error::ErrorKind {
        match self {
            Self::Arena(e) => e.kind(),
            Self::Alloc(e) => e.kind(),
            Self::Send(e) => e.kind(),
            Self::Recv(e) => e.kind(),
            Self::BadHello => zcio_sys::error::ErrorKind::Protocol,
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Arena(e) => e.errno(),
            Self::Alloc(e) => e.errno(),
            Self::Send(e) => e.errno(),
            _ => None,
        }
    }
}

impl OutputError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> zcio_sys::error::ErrorKind {
        match self {
            Self::EmptyMessage => zcio_sys::error::ErrorKind::InvalidInput,
            Self::Alloc(e) => e.kind(),
            Self::Arena(e) => e.kind(),
            Self::Send(e) => e.kind(),
            Self::Msg(e) => e.kind(),
            Self::Freeze(_) => zcio_sys::error::ErrorKind::Other,
            Self::Os(_) => zcio_sys::error::ErrorKind::Os,
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Alloc(e) => e.errno(),
            Self::Arena(e) => e.errno(),
            Self::Send(e) => e.errno(),
            Self::Os(e) => Some(*e),
            _ => None,
        }
    }
}

impl InputError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> zcio_sys::error::ErrorKind {
        match self {
            Self::Recv(e) => e.kind(),
            Self::TooShort { .. } => zcio_sys::error::ErrorKind::TooLarge,
            Self::Malformed(_) => zcio_sys::error::ErrorKind::Malformed,
            Self::Alloc(e) => e.kind(),
            Self::Os(_) => zcio_sys::error::ErrorKind::Os,
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Alloc(e) => e.errno(),
            Self::Os(e) => Some(*e),
            _ => None,
        }
    }
}
