//! Asynchronous receive: a proxy receives for the endpoint with the
//! synchronous rendezvous and hands each message on.
//!
//! A message goes to the oldest outstanding asynchronous call (its reply:
//! with rendezvous `call` semantics the partner's next message answers it),
//! else to the most recently blocked waiter (its stack and caches are the
//! warmest), else into a FIFO queue that later receives take from in order.
//! When the queue is at its quota and nobody waits, the proxy stops taking
//! messages, so the partner's synchronous sends block as they would against
//! a slow synchronous receiver.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as Counter};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::completion::Completion;
use super::pool::Inner as Pool;
use super::ProxyError;
use crate::rendezvous::{Envelope, IpcFail, Rendezvous, Wait, WORDS};

/// Supplies the buffer the proxy receives the next message into (called
/// before the message arrives, with the most words a message can carry);
/// lets an application receive into recycled storage.
pub type Alloc = Box<dyn Fn(usize) -> Envelope + Send + Sync>;

/// How long one receive by the proxy sleeps before it re-checks whether it
/// is still wanted.
const SLICE: Duration = crate::wait::LIVENESS;

pub(crate) type Slot = Completion<Result<Envelope, ProxyError>>;

/// A receive that is under way (from [`ProxyEndpoint::post`] or
/// [`ProxyEndpoint::call`]): collect its message when it is ready.
/// Dropping a handle before it is filled withdraws it; a message that
/// filled it and was never taken goes back to the front of the queue.
///
/// [`ProxyEndpoint::post`]: super::ProxyEndpoint::post
/// [`ProxyEndpoint::call`]: super::ProxyEndpoint::call
pub struct RecvHandle {
    pub(crate) cell: Arc<Slot>,
    pub(crate) side: Arc<RecvSide>,
}

impl std::fmt::Debug for RecvHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvHandle")
            .field("ready", &self.is_ready())
            .finish()
    }
}

impl RecvHandle {
    /// Whether the message (or an error) is there.
    pub fn is_ready(&self) -> bool {
        self.cell.is_done()
    }

    /// The message if it is there (`None`: still waiting); never waits.
    pub fn try_take(&self) -> Option<Result<Envelope, ProxyError>> {
        if !self.cell.is_done() {
            return None;
        }
        self.cell.take()
    }

    /// Wait for the message, at most the endpoint's
    /// [`recv_timeout`](crate::rendezvous::RendezvousConfig::recv_timeout).
    ///
    /// # Errors
    ///
    /// `TimedOut` (the handle stays posted and may be waited on again),
    /// `Taken` (already collected), `Disconnected`, or the rendezvous error that
    /// ended receiving (`Disconnected` when the partner is gone).
    pub fn wait(&self) -> Result<Envelope, ProxyError> {
        self.wait_timeout(self.side.ep.config().recv_timeout)
    }

    /// Wait for the message, at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`RecvHandle::wait`].
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Envelope, ProxyError> {
        if self.cell.wait(Some(timeout)) {
            if let Some(r) = self.cell.take() {
                return r;
            }
            return Err(ProxyError::Taken);
        }
        Err(ProxyError::TimedOut)
    }
}

impl Drop for RecvHandle {
    fn drop(&mut self) {
        self.side.withdraw(&self.cell);
    }
}

struct State {
    msgs: VecDeque<Envelope>,
    /// Blocked receivers, most recent last (woken first).
    waiters: Vec<Arc<Slot>>,
    /// Outstanding asynchronous calls, oldest first.
    calls: VecDeque<Arc<Slot>>,
    running: bool,
    /// An application thread is receiving itself (`RecvSide::receive`);
    /// no proxy is started until it is done.
    direct: bool,
    failed: Option<ProxyError>,
}

/// The receive side of one proxy endpoint.
pub(crate) struct RecvSide {
    ep: Arc<Rendezvous>,
    st: Mutex<State>,
    alloc: Mutex<Option<Arc<Alloc>>>,
    quota: AtomicUsize,
    /// The owner dropped the endpoint: the proxy stops.
    stop: AtomicBool,
    pub(crate) received: AtomicU64,
}

impl RecvSide {
    pub(crate) fn new(ep: Arc<Rendezvous>, quota: usize) -> Self {
        Self {
            ep,
            st: Mutex::new(State {
                msgs: VecDeque::new(),
                waiters: Vec::new(),
                calls: VecDeque::new(),
                running: false,
                direct: false,
                failed: None,
            }),
            alloc: Mutex::new(None),
            quota: AtomicUsize::new(quota),
            stop: AtomicBool::new(false),
            received: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_quota(&self, quota: usize) {
        self.quota.store(quota.max(1), Counter::Relaxed);
    }

    pub(crate) fn set_alloc(&self, alloc: Alloc) {
        *self.alloc.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(alloc));
    }

    pub(crate) fn queued(&self) -> usize {
        self.lock().msgs.len()
    }

    /// Post a receive: filled at once from the queue, or when a message
    /// arrives (most recently posted first).
    pub(crate) fn post(self: &Arc<Self>, pool: &Arc<Pool>) -> RecvHandle {
        let cell = Arc::new(Completion::new());
        let mut st = self.lock();
        if let Some(m) = st.msgs.pop_front() {
            let _ = cell.complete(Ok(m));
        } else if let Some(e) = st.failed {
            let _ = cell.complete(Err(e));
        } else {
            st.waiters.push(cell.clone());
            self.ensure_proxy(st, pool);
        }
        RecvHandle {
            cell,
            side: self.clone(),
        }
    }

    /// Receive the next message (`Wait::Try`: only if one is ready). When
    /// nothing else is receiving for this endpoint — no proxy running, no
    /// posted handle, no outstanding call — the calling thread does the
    /// synchronous receive itself: no proxy thread, no hand-over, no
    /// wake-up. A message that arrives while a call registered meanwhile is
    /// owed a reply goes to that call (as with the proxy); handles posted
    /// during a direct receive are served by a proxy started when it ends.
    pub(crate) fn receive(
        self: &Arc<Self>,
        pool: &Arc<Pool>,
        wait: Wait,
    ) -> Result<Envelope, ProxyError> {
        {
            let mut st = self.lock();
            if let Some(m) = st.msgs.pop_front() {
                return Ok(m);
            }
            if let Some(e) = st.failed {
                return Err(e);
            }
            if st.running || st.direct || !st.waiters.is_empty() || !st.calls.is_empty() {
                drop(st);
                return match wait {
                    // Someone else receives; what it gets is not ours yet.
                    Wait::Try => Err(ProxyError::WouldBlock),
                    Wait::For(t) => self.post(pool).wait_timeout(t),
                };
            }
            st.direct = true;
        }
        let deadline = match wait {
            Wait::Try => None,
            Wait::For(t) => Instant::now().checked_add(t),
        };
        let mut buf = self.fresh_buffer();
        let res = loop {
            let step = match (wait, deadline) {
                (Wait::Try, _) => Wait::Try,
                (Wait::For(_), Some(d)) => Wait::For(d.saturating_duration_since(Instant::now())),
                (Wait::For(t), None) => Wait::For(t),
            };
            match self.ep.recv_into_with(&mut buf, step) {
                Ok(()) => {
                    self.received.fetch_add(1, Counter::Relaxed);
                    let mut st = self.lock();
                    let Some(call) = st.calls.pop_front() else {
                        break Ok(buf);
                    };
                    let next = self.fresh_buffer();
                    if let Err(Ok(m)) = call.complete(Ok(std::mem::replace(&mut buf, next))) {
                        st.msgs.push_back(m);
                    }
                }
                Err(IpcFail::TimedOut) => break Err(ProxyError::TimedOut),
                Err(IpcFail::WouldBlock) => break Err(ProxyError::WouldBlock),
                Err(e) => {
                    let e = ProxyError::from_fail(e);
                    self.fail(e);
                    break Err(e);
                }
            }
        };
        let mut st = self.lock();
        st.direct = false;
        if !st.waiters.is_empty() || !st.calls.is_empty() {
            self.ensure_proxy(st, pool);
        }
        res
    }

    /// Register a call's reply slot before the call's message is queued,
    /// so the reply cannot overtake it.
    pub(crate) fn expect_reply(
        self: &Arc<Self>,
        pool: &Arc<Pool>,
    ) -> Result<RecvHandle, ProxyError> {
        let cell = Arc::new(Completion::new());
        let mut st = self.lock();
        if let Some(e) = st.failed {
            return Err(e);
        }
        st.calls.push_back(cell.clone());
        self.ensure_proxy(st, pool);
        Ok(RecvHandle {
            cell,
            side: self.clone(),
        })
    }

    fn ensure_proxy(self: &Arc<Self>, mut st: std::sync::MutexGuard<'_, State>, pool: &Arc<Pool>) {
        // A thread receiving directly starts the proxy when it is done, if
        // anyone is still waiting then.
        if st.running || st.direct {
            return;
        }
        st.running = true;
        drop(st);
        let me = self.clone();
        let idle = pool.cfg.linger;
        pool.submit(Box::new(move || me.run(idle)));
    }

    /// Take a call's reply slot out of the reply order (its request was
    /// never queued).
    pub(crate) fn cancel_reply(&self, h: &RecvHandle) {
        self.lock().calls.retain(|c| !Arc::ptr_eq(c, &h.cell));
    }

    /// Withdraw a posted handle (dropped or given up on).
    fn withdraw(&self, cell: &Arc<Slot>) {
        let mut st = self.lock();
        if let Some(i) = st.waiters.iter().position(|c| Arc::ptr_eq(c, cell)) {
            st.waiters.remove(i);
            return;
        }
        if st.calls.iter().any(|c| Arc::ptr_eq(c, cell)) {
            // A reply still owed to a dropped call is consumed when it
            // arrives: the call keeps its place in the reply order.
            return;
        }
        if let Some(Ok(m)) = cell.take() {
            st.msgs.push_front(m);
        }
    }

    /// Stop the proxy (the owner is gone) and fail whoever still waits.
    pub(crate) fn shut(&self, e: ProxyError) {
        self.stop.store(true, Counter::Relaxed);
        self.fail(e);
    }

    fn fail(&self, e: ProxyError) {
        let cells: Vec<_> = {
            let mut st = self.lock();
            st.failed.get_or_insert(e);
            let mut v: Vec<_> = st.waiters.drain(..).collect();
            v.extend(st.calls.drain(..));
            v
        };
        for c in cells {
            let _ = c.complete(Err(e));
        }
    }

    /// Whether the proxy should take another message now.
    fn wanted(&self) -> bool {
        let st = self.lock();
        !st.waiters.is_empty()
            || !st.calls.is_empty()
            || st.msgs.len() < self.quota.load(Counter::Relaxed)
    }

    /// The proxy's job: receive until stopped, the partner is gone, or
    /// nobody has waited for `idle`.
    fn run(&self, idle: Duration) {
        let mut quiet_since = Instant::now();
        let mut buf = self.fresh_buffer();
        loop {
            if self.stop.load(Counter::Relaxed) {
                break;
            }
            if !self.wanted() {
                // At quota: leave messages in the partner's slot until a
                // receive makes room.
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            match self.ep.recv_into_with(&mut buf, Wait::For(SLICE)) {
                Ok(()) => {
                    self.received.fetch_add(1, Counter::Relaxed);
                    let next = self.fresh_buffer();
                    self.hand_on(std::mem::replace(&mut buf, next));
                    quiet_since = Instant::now();
                }
                Err(IpcFail::TimedOut) => {
                    let st = self.lock();
                    if st.waiters.is_empty() && st.calls.is_empty() && quiet_since.elapsed() >= idle
                    {
                        let mut st = st;
                        st.running = false;
                        return;
                    }
                }
                Err(e) => {
                    self.fail(ProxyError::from_fail(e));
                    break;
                }
            }
        }
        self.lock().running = false;
    }

    fn fresh_buffer(&self) -> Envelope {
        let alloc = self.alloc.lock().unwrap_or_else(|p| p.into_inner()).clone();
        match alloc {
            Some(a) => a(WORDS),
            None => Envelope {
                words: Vec::with_capacity(WORDS),
                ..Envelope::default()
            },
        }
    }

    /// Give `m` to the oldest call, the newest waiter, or the queue.
    fn hand_on(&self, m: Envelope) {
        let mut st = self.lock();
        let target = st.calls.pop_front().or_else(|| st.waiters.pop());
        // Completed under the state lock, so a handle withdrawn at the same
        // time either is still listed (and never gets the message) or finds
        // it and puts it back.
        match target {
            Some(c) => {
                if let Err(Ok(m)) = c.complete(Ok(m)) {
                    st.msgs.push_back(m);
                }
            }
            None => st.msgs.push_back(m),
        }
    }
}
