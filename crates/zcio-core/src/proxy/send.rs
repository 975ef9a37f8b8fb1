//! Asynchronous send: a per-receiver FIFO queue drained by a proxy that
//! delivers each message with the synchronous rendezvous.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as Counter};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::Duration;

use super::completion::Completion;
use super::pool::Inner as Pool;
use super::ProxyError;
use crate::rendezvous::{Envelope, Rendezvous};
use crate::wait::{Backoff, Step};

/// Where a message handed to an asynchronous send stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketStatus {
    /// Queued or being delivered.
    Pending,
    /// The receiver took it.
    Delivered,
    /// It was not delivered: the partner disconnected, did not take it
    /// within the endpoint's send timeout (`TimedOut`), broke the
    /// protocol, or the endpoint was closed first (`Disconnected`).
    Failed(ProxyError),
}

pub(crate) type Outcome = Completion<Result<(), ProxyError>>;

/// The status of one asynchronously sent message (from
/// [`ProxyEndpoint::send`](super::ProxyEndpoint::send)): check it or wait on
/// it. Cloning shares the status; dropping a ticket does not cancel the
/// send.
#[derive(Clone)]
pub struct Ticket {
    pub(crate) cell: Arc<Outcome>,
    /// What [`Ticket::wait`] waits at most: the endpoint's send timeout.
    bound: Duration,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Ticket").field(&self.status()).finish()
    }
}

impl Ticket {
    /// Where the message stands now (never waits).
    pub fn status(&self) -> TicketStatus {
        if !self.cell.is_done() {
            return TicketStatus::Pending;
        }
        self.cell.peek(|v| match v {
            Some(Ok(())) => TicketStatus::Delivered,
            Some(Err(e)) => TicketStatus::Failed(*e),
            None => TicketStatus::Pending,
        })
    }

    /// Whether delivery has finished (successfully or not).
    pub fn is_done(&self) -> bool {
        self.cell.is_done()
    }

    /// Wait until the message was delivered (`Ok`) or failed, at most the
    /// endpoint's
    /// [`send_timeout`](crate::rendezvous::RendezvousConfig::send_timeout)
    /// (which also bounds each delivery attempt; a message queued behind
    /// others may still be pending then).
    ///
    /// # Errors
    ///
    /// Why delivery failed (see [`TicketStatus::Failed`]); `TimedOut` when
    /// it is still pending (the ticket may be waited on again).
    pub fn wait(&self) -> Result<(), ProxyError> {
        self.wait_with(self.bound)
    }

    /// Wait at most `timeout` until the message was delivered or failed
    /// (`Duration::MAX`: without a bound).
    ///
    /// # Errors
    ///
    /// `TimedOut` when it is still pending (the ticket may be waited on
    /// again); otherwise as [`Ticket::wait`].
    pub fn wait_timeout(&self, timeout: Duration) -> Result<(), ProxyError> {
        self.wait_with(timeout)
    }

    fn wait_with(&self, timeout: Duration) -> Result<(), ProxyError> {
        if !self.cell.wait(Some(timeout)) {
            return Err(ProxyError::TimedOut);
        }
        match self.status() {
            TicketStatus::Delivered => Ok(()),
            TicketStatus::Failed(e) => Err(e),
            TicketStatus::Pending => Err(ProxyError::TimedOut),
        }
    }
}

/// Who drains the queue.
enum Proxy {
    /// Nobody: the next send schedules a proxy.
    None,
    /// A job is submitted but has not started yet.
    Scheduled,
    /// This thread is draining (it may be spinning or parked on it).
    Running(Thread),
}

struct State {
    msgs: VecDeque<(Envelope, Arc<Outcome>)>,
    proxy: Proxy,
    /// Set once the partner is gone or the owner dropped the endpoint.
    closed: Option<ProxyError>,
}

/// The send side of one proxy endpoint.
pub(crate) struct SendQueue {
    ep: Arc<Rendezvous>,
    st: Mutex<State>,
    /// Messages queued (a lock-free view for the proxy's spin).
    queued: AtomicUsize,
    quota: AtomicUsize,
    pub(crate) delivered: AtomicU64,
    pub(crate) failed: AtomicU64,
}

impl SendQueue {
    pub(crate) fn new(ep: Arc<Rendezvous>, quota: usize) -> Self {
        Self {
            ep,
            st: Mutex::new(State {
                msgs: VecDeque::new(),
                proxy: Proxy::None,
                closed: None,
            }),
            queued: AtomicUsize::new(0),
            quota: AtomicUsize::new(quota),
            delivered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_quota(&self, quota: usize) {
        self.quota.store(quota.max(1), Counter::Relaxed);
    }

    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Counter::Relaxed)
    }

    /// Append `msg`; a proxy delivers it. Fails (giving it back) when the
    /// queue is at its quota, the message is too large, or the partner is
    /// gone.
    pub(crate) fn push(
        self: &Arc<Self>,
        pool: &Arc<Pool>,
        msg: Envelope,
    ) -> Result<Ticket, (ProxyError, Envelope)> {
        if msg.words.len() > crate::rendezvous::WORDS || msg.fds.len() > crate::sys::fdpass::MAX_FDS
        {
            return Err((ProxyError::TooLarge, msg));
        }
        let cell = Arc::new(Completion::new());
        let mut st = self.lock();
        if let Some(e) = st.closed {
            return Err((e, msg));
        }
        if st.msgs.len() >= self.quota.load(Counter::Relaxed) {
            return Err((ProxyError::QuotaExceeded, msg));
        }
        st.msgs.push_back((msg, cell.clone()));
        self.queued.fetch_add(1, Counter::Relaxed);
        match &st.proxy {
            // Costs a futex wake only if the proxy is parked.
            Proxy::Running(t) => t.unpark(),
            Proxy::Scheduled => {}
            Proxy::None => {
                st.proxy = Proxy::Scheduled;
                drop(st);
                let me = self.clone();
                let (spin, linger) = (pool.cfg.spin, pool.cfg.linger);
                pool.submit(Box::new(move || me.drain(spin, linger)));
            }
        }
        Ok(Ticket {
            cell,
            bound: self.ep.config().send_timeout,
        })
    }

    /// The proxy's job: deliver queued messages in order, then wait a
    /// little for more before giving the thread back to the pool.
    fn drain(&self, spin: Duration, linger: Duration) {
        self.lock().proxy = Proxy::Running(std::thread::current());
        loop {
            let next = {
                let mut st = self.lock();
                let n = st.msgs.pop_front();
                if n.is_some() {
                    self.queued.fetch_sub(1, Counter::Relaxed);
                }
                n
            };
            if let Some((msg, cell)) = next {
                self.deliver(&msg, &cell);
                continue;
            }
            if self.idle_wait(spin, linger) {
                continue;
            }
            let mut st = self.lock();
            if st.msgs.is_empty() {
                st.proxy = Proxy::None;
                return;
            }
        }
    }

    /// Deliver one message with the endpoint's blocking send (bounded by
    /// its configured send timeout).
    fn deliver(&self, msg: &Envelope, cell: &Outcome) {
        let r = self
            .ep
            .send_with(
                msg,
                crate::rendezvous::Wait::For(self.ep.config().send_timeout),
            )
            .map_err(ProxyError::from_fail);
        match r {
            Ok(()) => self.delivered.fetch_add(1, Counter::Relaxed),
            Err(_) => self.failed.fetch_add(1, Counter::Relaxed),
        };
        if let Err(e @ (ProxyError::Disconnected | ProxyError::Protocol(_))) = r {
            // The connection is unusable: fail everything still queued.
            self.close(e);
        }
        // A ticket is completed exactly once, here.
        let _ = cell.complete(r);
    }

    /// Wait for more work: spin (yielding) for `spin`, then park for up to
    /// `linger`. Returns whether work arrived.
    fn idle_wait(&self, spin: Duration, linger: Duration) -> bool {
        // The queue is this process's memory, not a shared word: the sleep
        // is a thread park (`push` unparks us after queueing; a token left
        // from an earlier unpark just makes the park return at once), the
        // spin and the bound are `wait::Backoff`'s.
        let mut backoff = Backoff::new(spin, spin.saturating_add(linger));
        loop {
            if self.queued() > 0 {
                return true;
            }
            match backoff.step() {
                Step::Retry => {}
                Step::TimedOut => return false,
                Step::Sleep { remaining, .. } => std::thread::park_timeout(remaining),
            }
        }
    }

    /// Fail every queued message with `e` and refuse new ones.
    pub(crate) fn close(&self, e: ProxyError) {
        let drained: Vec<_> = {
            let mut st = self.lock();
            st.closed.get_or_insert(e);
            self.queued.store(0, Counter::Relaxed);
            st.msgs.drain(..).collect()
        };
        for (_, cell) in drained {
            self.failed.fetch_add(1, Counter::Relaxed);
            let _ = cell.complete(Err(e));
        }
    }
}
