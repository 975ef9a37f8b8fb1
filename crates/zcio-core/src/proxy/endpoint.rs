//! The proxy endpoint: a rendezvous [`Rendezvous`] with a send queue
//! and a receive side, both served by proxies from a [`Proxies`] pool.

use std::sync::atomic::Ordering as Counter;
use std::sync::Arc;
use std::time::Duration;

use super::pool::{Inner as Pool, Proxies};
use super::recv::{Alloc, RecvHandle, RecvSide};
use super::send::{SendQueue, Ticket};
use super::{ProxyError, ProxySendError};
use crate::rendezvous::{Envelope, Rendezvous, Wait};
use crate::sys::peer::PeerCred;

/// Counters of one proxy endpoint ([`ProxyEndpoint::stats`]).
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyEndpointStats {
    /// Messages waiting in the send queue.
    pub send_queued: usize,
    /// Messages the partner took (counted when the send returns, which can
    /// be just after the partner already answered a call).
    pub delivered: u64,
    /// Messages that could not be delivered.
    pub failed: u64,
    /// Messages the receive proxy took from the partner.
    pub received: u64,
    /// Received messages waiting for a receive.
    pub recv_queued: usize,
}

/// A rendezvous endpoint driven asynchronously (see the [module
/// docs](super)).
///
/// Its blocking forms are bounded by the wrapped endpoint's
/// [`RendezvousConfig`](crate::rendezvous::RendezvousConfig): deliveries and
/// `Ticket::wait` by its `send_timeout`, [`ProxyEndpoint::recv`] and
/// [`RecvHandle::wait`] by its
/// `recv_timeout` (set it with
/// [`Rendezvous::with_config`](crate::rendezvous::Rendezvous::with_config)
/// before wrapping).
///
/// Dropping it stops the receive proxy (waiting receives fail with
/// `Disconnected`); messages already queued for sending are still delivered
/// unless [`ProxyEndpoint::close`] was called.
pub struct ProxyEndpoint {
    ep: Arc<Rendezvous>,
    pool: Arc<Pool>,
    tx: Arc<SendQueue>,
    rx: Arc<RecvSide>,
}

impl std::fmt::Debug for ProxyEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyEndpoint")
            .field("peer", &self.ep.peer())
            .field("stats", &self.stats())
            .finish()
    }
}

impl ProxyEndpoint {
    /// Drive `ep` through proxies from `proxies`, with its quota.
    pub fn new(ep: Rendezvous, proxies: &Proxies) -> Self {
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
    pub fn endpoint(&self) -> &Rendezvous {
        &self.ep
    }

    /// The partner's kernel credentials.
    pub fn peer(&self) -> PeerCred {
        self.ep.peer()
    }

    /// Queue `msg` for delivery and return at once; a proxy delivers it
    /// with the synchronous send, in FIFO order, and records the outcome in
    /// the returned [`Ticket`].
    ///
    /// # Errors
    ///
    /// The message comes back with the reason: `QuotaExceeded`,
    /// `TooLarge`, `Disconnected`, or the error that ended the connection
    /// (`Disconnected`, `Protocol(_)`).
    pub fn send(&self, msg: Envelope) -> Result<Ticket, ProxySendError> {
        self.tx
            .push(&self.pool, msg)
            .map_err(|(e, msg)| ProxySendError::new(e, msg))
    }

    /// Post a receive; collect the message from the handle. Handles are
    /// served most recently posted first.
    pub fn post(&self) -> RecvHandle {
        self.rx.post(&self.pool)
    }

    /// Receive the next message, at most the endpoint's `recv_timeout`.
    /// When nothing else is receiving for this endpoint (no posted handle,
    /// no outstanding call, no proxy at work) the calling thread receives
    /// itself — as fast as a synchronous receive — otherwise it waits for
    /// the proxy's hand-over.
    ///
    /// # Errors
    ///
    /// `TimedOut`, `Disconnected`, or the rendezvous error that ended receiving
    /// (`Disconnected` when the partner is gone).
    pub fn recv(&self) -> Result<Envelope, ProxyError> {
        self.recv_timeout(self.ep.config().recv_timeout)
    }

    /// A message that is ready now — already collected by the receive
    /// proxy, or waiting in the partner's slot when nothing else receives;
    /// never waits.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when none is ready; otherwise as [`ProxyEndpoint::recv`].
    pub fn try_recv(&self) -> Result<Envelope, ProxyError> {
        self.rx.receive(&self.pool, Wait::Try)
    }

    /// Receive the next message, at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`ProxyEndpoint::recv`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Envelope, ProxyError> {
        self.rx.receive(&self.pool, Wait::For(timeout))
    }

    /// Asynchronous RPC: queue `msg` and return a handle the reply (the
    /// partner's next message) will be delivered to.
    ///
    /// # Errors
    ///
    /// As [`ProxyEndpoint::send`]; the message comes back.
    pub fn call(&self, msg: Envelope) -> Result<RecvHandle, ProxySendError> {
        let h = match self.rx.expect_reply(&self.pool) {
            Ok(h) => h,
            Err(e) => return Err(ProxySendError::new(e, msg)),
        };
        // The handle is registered before the request can go out; if the
        // request is refused, dropping the handle withdraws nothing the
        // partner could answer, so take it out of the reply order first.
        match self.tx.push(&self.pool, msg) {
            Ok(_) => Ok(h),
            Err((e, msg)) => {
                self.rx.cancel_reply(&h);
                Err(ProxySendError::new(e, msg))
            }
        }
    }

    /// Fail every message still queued for sending with `Disconnected`, refuse
    /// new ones, and stop receiving.
    pub fn close(&self) {
        self.tx.close(ProxyError::Disconnected);
        self.rx.shut(ProxyError::Disconnected);
    }

    /// Counters.
    pub fn stats(&self) -> ProxyEndpointStats {
        ProxyEndpointStats {
            send_queued: self.tx.queued(),
            delivered: self.tx.delivered.load(Counter::Relaxed),
            failed: self.tx.failed.load(Counter::Relaxed),
            received: self.rx.received.load(Counter::Relaxed),
            recv_queued: self.rx.queued(),
        }
    }
}

impl Drop for ProxyEndpoint {
    fn drop(&mut self) {
        self.rx.shut(ProxyError::Disconnected);
    }
}
