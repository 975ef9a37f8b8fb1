//! `zcio::Error`: every operation family's error in one type, for callers
//! that do not care which layer failed.

use thiserror::Error;

use crate::buf::{AllocError, FreezeError};
use crate::channel::{ConnectError, RecvError, SendError};
use crate::msg::MsgError;
use crate::region::RegionError;
use crate::ring::{OpenError, ReadError, WriteError};

/// Any zcio error.
#[derive(Debug, Error)]
pub enum Error {
    /// Region creation or attachment.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// Buffer allocation.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// Securing a buffer.
    #[error(transparent)]
    Freeze(#[from] FreezeError),
    /// Aggregate operations.
    #[error(transparent)]
    Msg(#[from] MsgError),
    /// Channel set-up.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Sending (the message was dropped; use `SendError` directly to keep it).
    #[error(transparent)]
    Send(#[from] SendError),
    /// Receiving.
    #[error(transparent)]
    Recv(#[from] RecvError),
    /// Creating or attaching to a ring.
    #[error(transparent)]
    RingOpen(#[from] OpenError),
    /// Writing to a ring.
    #[error(transparent)]
    RingWrite(#[from] WriteError),
    /// Reading from a ring.
    #[error(transparent)]
    RingRead(#[from] ReadError),
    /// Rendezvous send, receive or call.
    #[error(transparent)]
    Ipc(#[from] crate::rendezvous::IpcError),
    /// Asynchronous IPC (the message was dropped; use `AsyncError` directly to keep it).
    #[error(transparent)]
    Async(#[from] crate::asyncipc::AsyncError),
}

impl From<(crate::asyncipc::AsyncError, crate::rendezvous::Message)> for Error {
    fn from((e, _): (crate::asyncipc::AsyncError, crate::rendezvous::Message)) -> Self {
        Error::Async(e)
    }
}

impl From<(SendError, crate::msg::Msg)> for Error {
    fn from((e, _): (SendError, crate::msg::Msg)) -> Self {
        Error::Send(e)
    }
}
