//! Asynchronous IPC (`zcio::proxy`): `Proxies`, `ProxyEndpoint`,
//! `Ticket` and `Reply`. Sends and calls return at once; proxy threads of a
//! shared pool do the synchronous rendezvous. Every wait releases the GIL
//! and runs in slices with signal checks.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use zcio::proxy::{self as zproxy, ProxyConfig, ProxyError, RecvHandle, TicketStatus};
use zcio::rendezvous::{self as rdv, RendezvousConfig};

use crate::errors;
use crate::ipc::{peer_dict, words_of, Envelope, Rendezvous};
use crate::wait::{blocking, seconds_arg, Deadline, Timeout};

/// The pool endpoints share when none is given.
static DEFAULT_PROXIES: OnceLock<zproxy::Proxies> = OnceLock::new();

fn seconds(name: &str, v: Option<f64>) -> PyResult<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && (0.0..=3.0e9).contains(&s) => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        Some(_) => Err(PyValueError::new_err(format!(
            "{name} must be a non-negative number of seconds"
        ))),
    }
}

/// A capped pool of proxy threads shared by proxy endpoints.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct Proxies {
    inner: zproxy::Proxies,
}

#[pymethods]
impl Proxies {
    /// Proxies(max_proxies=None, quota=None, spin=None, linger=None, idle_exit=None)
    #[new]
    #[pyo3(signature = (max_proxies=None, quota=None, spin=None, linger=None, idle_exit=None))]
    fn new(
        max_proxies: Option<usize>,
        quota: Option<usize>,
        spin: Option<f64>,
        linger: Option<f64>,
        idle_exit: Option<f64>,
    ) -> PyResult<Self> {
        let mut cfg = ProxyConfig::default();
        if let Some(n) = max_proxies {
            cfg.max_proxies = n;
        }
        if let Some(q) = quota {
            cfg.quota = q;
        }
        if let Some(d) = seconds("spin", spin)? {
            cfg.spin = d;
        }
        if let Some(d) = seconds("linger", linger)? {
            cfg.linger = d;
        }
        if let Some(d) = seconds("idle_exit", idle_exit)? {
            cfg.idle_exit = d;
        }
        Ok(Self {
            inner: zproxy::Proxies::new(cfg),
        })
    }

    /// stats() -> dict: threads, idle, waiting_jobs, spawned, reused.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("threads", s.threads)?;
        d.set_item("idle", s.idle)?;
        d.set_item("waiting_jobs", s.waiting_jobs)?;
        d.set_item("spawned", s.spawned)?;
        d.set_item("reused", s.reused)?;
        Ok(d)
    }

    /// config() -> dict: max_proxies, quota, spin, linger, idle_exit
    /// (durations in seconds).
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.inner.config();
        let d = PyDict::new(py);
        d.set_item("max_proxies", c.max_proxies)?;
        d.set_item("quota", c.quota)?;
        d.set_item("spin", c.spin.as_secs_f64())?;
        d.set_item("linger", c.linger.as_secs_f64())?;
        d.set_item("idle_exit", c.idle_exit.as_secs_f64())?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let s = self.inner.stats();
        format!(
            "zcio.Proxies(max_proxies={}, threads={}, idle={})",
            self.inner.config().max_proxies,
            s.threads,
            s.idle
        )
    }
}

/// Where one asynchronously sent message stands.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct Ticket {
    t: zproxy::Ticket,
    /// What `wait(timeout=None)` waits: the endpoint's delivery bound.
    bound: Duration,
}

#[pymethods]
impl Ticket {
    /// "pending", "delivered" or "failed" (never waits).
    #[getter]
    fn status(&self) -> &'static str {
        match self.t.status() {
            TicketStatus::Pending => "pending",
            TicketStatus::Delivered => "delivered",
            _ => "failed",
        }
    }

    /// Whether delivery has finished (successfully or not).
    #[getter]
    fn done(&self) -> bool {
        self.t.is_done()
    }

    /// The exception delivery failed with, or None (pending or delivered).
    #[getter]
    fn error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        match self.t.status() {
            TicketStatus::Failed(e) => Some(errors::raise(py, e).into_value(py).into_any()),
            _ => None,
        }
    }

    /// wait(timeout=None): until delivered (returns) or failed (raises);
    /// `None` waits up to the endpoint's delivery bound (its
    /// `delivery_timeout`; `TimedOut` if the message is still pending).
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = &self.t;
        let got = blocking(
            py,
            Deadline::new(Timeout::from_py(timeout, self.bound)?),
            |slice| match t.wait_timeout(slice) {
                Err(ProxyError::TimedOut) => None,
                r => Some(r),
            },
        )?;
        match got {
            Some(r) => r.map_err(|e| errors::raise(py, e)),
            None => Err(errors::raise(py, ProxyError::TimedOut)),
        }
    }

    fn __repr__(&self) -> String {
        format!("zcio.Ticket(status={:?})", self.status())
    }
}

/// A receive under way: the reply of an asynchronous call, or a posted
/// receive. The outcome is kept once collected, so `wait()` may be called
/// again.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct Reply {
    h: RecvHandle,
    got: Mutex<Option<Result<Envelope, ProxyError>>>,
    /// What `wait(timeout=None)` waits: the endpoint's receive bound.
    bound: Duration,
}

impl Reply {
    fn new(h: RecvHandle, bound: Duration) -> Self {
        Self {
            h,
            got: Mutex::new(None),
            bound,
        }
    }

    fn cached(&self) -> Option<Result<Envelope, ProxyError>> {
        self.got.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Keep `r` (the first outcome wins) and return what is kept.
    fn keep(&self, r: Result<rdv::Envelope, ProxyError>) -> Result<Envelope, ProxyError> {
        let mut g = self.got.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = g.as_ref() {
            return v.clone();
        }
        let v = r.map(Envelope::from_rust);
        *g = Some(v.clone());
        v
    }
}

#[pymethods]
impl Reply {
    /// Whether the message (or an error) is there.
    fn ready(&self) -> bool {
        self.cached().is_some() || self.h.is_ready()
    }

    /// try_take() -> Envelope | None: the message if it is there (raises
    /// if receiving failed); never waits.
    fn try_take(&self, py: Python<'_>) -> PyResult<Option<Envelope>> {
        if let Some(v) = self.cached() {
            return v.map(Some).map_err(|e| errors::raise(py, e));
        }
        match self.h.try_take() {
            None => Ok(None),
            Some(r) => self.keep(r).map(Some).map_err(|e| errors::raise(py, e)),
        }
    }

    /// wait(timeout=None) -> Envelope: `None` waits up to the endpoint's
    /// receive bound (one hour).
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Envelope> {
        if let Some(v) = self.cached() {
            return v.map_err(|e| errors::raise(py, e));
        }
        let h = &self.h;
        let got = blocking(
            py,
            Deadline::new(Timeout::from_py(timeout, self.bound)?),
            |slice| match h.wait_timeout(slice) {
                Err(ProxyError::TimedOut) => None,
                r => Some(r),
            },
        )?;
        match got {
            // Another thread collected it first: its outcome is kept.
            Some(Err(ProxyError::Taken)) => match self.cached() {
                Some(v) => v.map_err(|e| errors::raise(py, e)),
                None => Err(errors::raise(py, ProxyError::Taken)),
            },
            Some(r) => self.keep(r).map_err(|e| errors::raise(py, e)),
            None => Err(errors::raise(py, ProxyError::TimedOut)),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "zcio.Reply(ready={})",
            if self.ready() { "True" } else { "False" }
        )
    }
}

/// A rendezvous endpoint driven asynchronously.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct ProxyEndpoint {
    inner: Mutex<Option<Arc<zproxy::ProxyEndpoint>>>,
    peer: zcio::PeerCred,
}

impl ProxyEndpoint {
    fn current(
        inner: &Mutex<Option<Arc<zproxy::ProxyEndpoint>>>,
    ) -> Option<Arc<zproxy::ProxyEndpoint>> {
        inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn get(&self) -> PyResult<Arc<zproxy::ProxyEndpoint>> {
        Self::current(&self.inner).ok_or_else(|| errors::closed("proxy endpoint"))
    }
}

#[pymethods]
impl ProxyEndpoint {
    /// ProxyEndpoint(endpoint, proxies=None, *, quota=None, delivery_timeout=None)
    #[new]
    #[pyo3(signature = (endpoint, proxies=None, *, quota=None, delivery_timeout=None))]
    fn new(
        endpoint: &Bound<'_, Rendezvous>,
        proxies: Option<&Bound<'_, Proxies>>,
        quota: Option<usize>,
        delivery_timeout: Option<f64>,
    ) -> PyResult<Self> {
        let delivery = delivery_timeout
            .map(|t| seconds_arg("delivery_timeout", t))
            .transpose()?;
        let mut ep = endpoint.get().take()?;
        if let Some(d) = delivery {
            let cfg = RendezvousConfig {
                send_timeout: d,
                ..ep.config()
            };
            ep = ep.with_config(cfg);
        }
        let peer = ep.peer();
        let pool = match proxies {
            Some(p) => p.get().inner.clone(),
            None => DEFAULT_PROXIES
                .get_or_init(zproxy::Proxies::default)
                .clone(),
        };
        let a = zproxy::ProxyEndpoint::new(ep, &pool);
        if let Some(q) = quota {
            a.set_quota(q);
        }
        Ok(Self {
            inner: Mutex::new(Some(Arc::new(a))),
            peer,
        })
    }

    /// send(label, words=()) -> Ticket: queue and return at once.
    #[pyo3(signature = (label, words=None))]
    fn send(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Ticket> {
        let msg = rdv::Envelope::new(label, &words_of(words)?);
        let a = self.get()?;
        let bound = a.endpoint().config().send_timeout;
        a.send(msg)
            .map(|t| Ticket { t, bound })
            .map_err(|e| errors::raise(py, e.into_parts().0))
    }

    /// call(label, words=()) -> Reply: queue a request; the partner's next
    /// message is its reply.
    #[pyo3(signature = (label, words=None))]
    fn call(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Reply> {
        let msg = rdv::Envelope::new(label, &words_of(words)?);
        let a = self.get()?;
        let bound = a.endpoint().config().recv_timeout;
        a.call(msg)
            .map(|h| Reply::new(h, bound))
            .map_err(|e| errors::raise(py, e.into_parts().0))
    }

    /// post() -> Reply: a receive collected later (most recent served first).
    fn post(&self) -> PyResult<Reply> {
        let a = self.get()?;
        let bound = a.endpoint().config().recv_timeout;
        Ok(Reply::new(a.post(), bound))
    }

    /// recv(timeout=None) -> Envelope
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Envelope> {
        let bound = self.get()?.endpoint().config().recv_timeout;
        let t = Timeout::from_py(timeout, bound)?;
        if t.is_try() {
            let a = self.get()?;
            return py
                .detach(|| a.try_recv())
                .map(Envelope::from_rust)
                .map_err(|e| errors::raise(py, e));
        }
        let inner = &self.inner;
        let got = blocking(py, Deadline::new(t), |slice| {
            let Some(a) = Self::current(inner) else {
                return Some(Err(None));
            };
            match a.recv_timeout(slice) {
                Err(ProxyError::TimedOut) => None,
                r => Some(r.map_err(Some)),
            }
        })?;
        match got {
            Some(Ok(m)) => Ok(Envelope::from_rust(m)),
            Some(Err(Some(e))) => Err(errors::raise(py, e)),
            Some(Err(None)) => Err(errors::closed("proxy endpoint")),
            None => Err(errors::raise(py, ProxyError::TimedOut)),
        }
    }

    /// stats() -> dict: send_queued, delivered, failed, received, recv_queued.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.get()?.stats();
        let d = PyDict::new(py);
        d.set_item("send_queued", s.send_queued)?;
        d.set_item("delivered", s.delivered)?;
        d.set_item("failed", s.failed)?;
        d.set_item("received", s.received)?;
        d.set_item("recv_queued", s.recv_queued)?;
        Ok(d)
    }

    /// The partner's credentials (pid, uid, gid) from the kernel.
    #[getter]
    fn peer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        peer_dict(py, self.peer)
    }

    /// Whether this endpoint was closed.
    #[getter]
    fn closed(&self) -> bool {
        Self::current(&self.inner).is_none()
    }

    /// close(): fail messages still queued (their tickets raise
    /// Disconnected), stop receiving (outstanding replies raise
    /// Disconnected) and hang up.
    fn close(&self, py: Python<'_>) {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(a) = taken {
            py.detach(move || {
                a.close();
                // Handles (Reply objects) and proxies may still own the
                // endpoint: hang up now rather than when they are gone.
                a.endpoint().hang_up();
                drop(a);
            });
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "zcio.ProxyEndpoint(peer_pid={}, closed={})",
            self.peer.pid,
            if self.closed() { "True" } else { "False" }
        )
    }
}
