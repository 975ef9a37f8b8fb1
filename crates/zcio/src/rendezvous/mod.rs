//! Synchronous rendezvous IPC between processes (the L4 analogue the
//! asynchronous layer of issue #4 builds on).
//!
//! An [`Endpoint`] is one end of a connection made over a Unix
//! `SOCK_SEQPACKET` socket (which also carries descriptors and tells each
//! side the other's kernel credentials). Messages — a label, up to
//! [`WORDS`] words and optionally descriptors — travel through a shared
//! [`slot`] per direction in a sealed memfd page, handed over with futex
//! waits: [`Endpoint::send`] returns only once the receiver has *taken* the
//! message (unbuffered rendezvous), [`Endpoint::receive`] waits on one
//! partner (closed wait), [`receive_any`] on several (open wait, with
//! `futex_waitv`), [`Endpoint::call`] is send + receive from the same
//! partner, [`reply_and_wait`] replies to one and waits on all. Every
//! operation takes a timeout (`Some(ZERO)` polls, `None` waits as long as
//! the peer lives); a send that times out is retracted, so it either
//! happened or did not.

mod endpoint;
#[cfg(all(test, loom))]
mod loom_slot;
pub(crate) mod slot;

pub use crate::segment::{AccessPolicy, ConnectError};
pub use endpoint::{receive_any, reply_and_wait, Endpoint, EndpointListener, IpcError, Message};
pub use slot::WORDS;
