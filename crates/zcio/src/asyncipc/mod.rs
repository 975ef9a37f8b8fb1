//! Asynchronous IPC built on the synchronous rendezvous (Götz's user-level
//! asynchrony, issue #4): the partner still talks plain
//! [`rendezvous`](crate::rendezvous) and cannot tell the difference.
//!
//! * [`AsyncEndpoint::send`] appends the message to the endpoint's FIFO
//!   send queue and returns a [`Ticket`] at once; a proxy thread from a
//!   shared [`Proxies`] pool (one per active receiver queue, idle proxies
//!   reused, a cap on threads, a per-partner quota on queued messages)
//!   delivers each message with the synchronous send and records
//!   delivered/failed in the ticket.
//! * [`AsyncEndpoint::post`] / [`AsyncEndpoint::receive`] take messages
//!   that a receive proxy collected with the synchronous receive: in FIFO
//!   order, the most recently blocked waiter served first, received into
//!   buffers from an optional allocation callback.
//! * [`AsyncEndpoint::call`] is an asynchronous RPC: the request goes
//!   through the send queue, the reply is collected by the receive proxy
//!   into the returned [`RecvHandle`].

mod completion;
mod endpoint;
mod pool;
mod recv;
mod send;

use thiserror::Error;

pub use endpoint::{AsyncEndpoint, AsyncStats};
pub use pool::{Proxies, ProxyConfig, ProxyStats};
pub use recv::{Alloc, RecvHandle};
pub use send::{Status, Ticket};

use crate::rendezvous::IpcError;

/// Errors of the asynchronous layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum AsyncError {
    /// The synchronous operation a proxy performed failed (the partner
    /// died, timed out, or broke the protocol).
    #[error("delivery failed: {0}")]
    Ipc(IpcError),
    /// The partner's queue already holds its quota of messages; retry
    /// after some are delivered (or raise the quota).
    #[error("queue for this partner is full (quota reached)")]
    QuotaExceeded,
    /// Waiting on a ticket or handle timed out; it is still pending.
    #[error("timed out waiting")]
    WaitTimedOut,
    /// The endpoint was closed before the message was handled.
    #[error("endpoint closed")]
    Closed,
    /// The handle's message was already taken.
    #[error("message already taken from this handle")]
    Taken,
}
