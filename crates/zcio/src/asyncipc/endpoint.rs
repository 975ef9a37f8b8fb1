//! The asynchronous endpoint: a rendezvous [`Endpoint`] with a send queue
//! and a receive side, both served by proxies from a [`Proxies`] pool.

use std::sync::atomic::Ordering as Counter;
use std::sync::Arc;
use std::time::Duration;

use super::pool::{Inner as Pool, Proxies};
use super::recv::{Alloc, RecvHandle, RecvSide};
use super::send::{SendQueue, Ticket};
use super::AsyncError;
use crate::rendezvous::{Endpoint, Message};
use crate::sys::peer::PeerCred;

/// Counters of one asynchronous endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsyncStats {
    /// Messages waiting in the send queue.
    pub send_queued: usize,
    /// Messages the partner took.
    pub delivered: u64,
    /// Messages that could not be delivered.
    pub failed: u64,
    /// Messages the receive proxy took from the partner.
    pub received: u64,
    /// Received messages waiting for a receive.
    pub recv_queued: usize,
}

/// A rendezvous endpoint driven asynchronously (see the module docs).
///
/// Dropping it stops the receive proxy (waiting receives fail with
/// `Closed`); messages already queued for sending are still delivered
/// unless [`AsyncEndpoint::close`] was called.
pub struct AsyncEndpoint {
    ep: Arc<Endpoint>,
    pool: Arc<Pool>,
    tx: Arc<SendQueue>,
    rx: Arc<RecvSide>,
}

impl std::fmt::Debug for AsyncEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncEndpoint")
            .field("peer", &self.ep.peer())
            .field("stats", &self.stats())
            .finish()
    }
}

impl AsyncEndpoint {
    /// Drive `ep` through proxies from `proxies`, with its quota.
    pub fn new(ep: Endpoint, proxies: &Proxies) -> Self {
        let ep = Arc::new(ep);
        let quota = proxies.config().quota.max(1);
        Self {
            tx: Arc::new(SendQueue::new(ep.clone(), quota)),
            rx: Arc::new(RecvSide::new(ep.clone(), quota)),
            pool: proxies.inner.clone(),
            ep,
        }
    }

    /// Set this partner's quota (queued messages per direction), replacing
    /// the pool's default.
    pub fn set_quota(&self, quota: usize) {
        self.tx.set_quota(quota);
        self.rx.set_quota(quota);
    }

    /// Receive into buffers from `alloc` (called by the receive proxy before
    /// each message, with the most words a message can carry).
    pub fn set_alloc(&self, alloc: Alloc) {
        self.rx.set_alloc(alloc);
    }

    /// The underlying synchronous endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    /// The partner's kernel credentials.
    pub fn peer(&self) -> PeerCred {
        self.ep.peer()
    }

    /// Queue `msg` for delivery and return at once. On error (quota
    /// reached, too large, partner gone) the message comes back.
    pub fn send(&self, msg: Message) -> Result<Ticket, (AsyncError, Message)> {
        self.tx.push(&self.pool, msg)
    }

    /// Post a receive; collect the message from the handle.
    pub fn post(&self) -> RecvHandle {
        self.rx.post(&self.pool)
    }

    /// Receive the next message, waiting at most `timeout`. When nothing
    /// else is receiving for this endpoint (no posted handle, no
    /// outstanding call, no proxy at work) the calling thread receives
    /// itself — as fast as a synchronous receive — otherwise it waits for
    /// the proxy's hand-over.
    pub fn receive(&self, timeout: Option<Duration>) -> Result<Message, AsyncError> {
        self.rx.receive(&self.pool, timeout)
    }

    /// Asynchronous RPC: queue `msg` and return a handle the reply (the
    /// partner's next message) will be delivered to.
    pub fn call(&self, msg: Message) -> Result<RecvHandle, (AsyncError, Message)> {
        let h = match self.rx.expect_reply(&self.pool) {
            Ok(h) => h,
            Err(e) => return Err((e, msg)),
        };
        // The handle is registered before the request can go out; if the
        // request is refused, dropping the handle withdraws nothing the
        // partner could answer, so take it out of the reply order first.
        match self.tx.push(&self.pool, msg) {
            Ok(_) => Ok(h),
            Err((e, msg)) => {
                self.rx.cancel_reply(&h);
                Err((e, msg))
            }
        }
    }

    /// Fail every message still queued for sending with `Closed`, refuse
    /// new ones, and stop receiving.
    pub fn close(&self) {
        self.tx.close(AsyncError::Closed);
        self.rx.shut(AsyncError::Closed);
    }

    /// Counters.
    pub fn stats(&self) -> AsyncStats {
        AsyncStats {
            send_queued: self.tx.queued(),
            delivered: self.tx.delivered.load(Counter::Relaxed),
            failed: self.tx.failed.load(Counter::Relaxed),
            received: self.rx.received.load(Counter::Relaxed),
            recv_queued: self.rx.queued(),
        }
    }
}

impl Drop for AsyncEndpoint {
    fn drop(&mut self) {
        self.rx.shut(AsyncError::Closed);
    }
}
