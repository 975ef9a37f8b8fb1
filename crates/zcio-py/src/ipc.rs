//! The rendezvous (`zcio::rendezvous`): `Envelope`, `RendezvousListener`,
//! `Rendezvous` and `recv_any` — small messages (a label and up to 8 words)
//! handed over synchronously between two processes.
//!
//! Every wait runs in slices of at most 100 ms with the GIL released (see
//! [`blocking`]); a rendezvous send that times out is retracted by the
//! library, so re-offering it in the next slice is the same send.
//! Descriptors a partner attaches to a message stay in its `Envelope`
//! until the caller takes them (`take_fds()`); the rest close with it.
//!
//! Under asyncio (`recv_async`, `send_async`, `call_async`, `async for`),
//! an endpoint waits on its doorbell through `zcio._aio`; a send runs in
//! three steps (`send_begin`, `send_poll`, `send_cancel`), one at a time per
//! endpoint: a begun send is this object's *flight* until it ends, and the
//! blocking sends wait for their turn behind it.

use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};
use zcio::rendezvous::{self as rdv};

const WORDS: usize = rdv::Envelope::WORDS;
use zcio::ErrorKind;
use zcio::{ConnectError, Errno, PeerCred};

use crate::aio::{self, async_timeout};
use crate::config::AccessPolicy;
use crate::errors::{self, Class};
use crate::listen;
use crate::wait::{blocking, seconds_arg, seconds_of, Deadline, Timeout, CONNECT_BOUND};

/// A rendezvous configuration with the bounds given (seconds; `None`: the
/// default; `math.inf`: none).
fn rdv_config(
    send_timeout: Option<f64>,
    recv_timeout: Option<f64>,
    accept_timeout: Option<f64>,
) -> PyResult<rdv::RendezvousConfig> {
    let mut cfg = rdv::RendezvousConfig::default();
    if let Some(t) = send_timeout {
        cfg.send_timeout = seconds_arg("send_timeout", t)?;
    }
    if let Some(t) = recv_timeout {
        cfg.recv_timeout = seconds_arg("recv_timeout", t)?;
    }
    if let Some(t) = accept_timeout {
        cfg.accept_timeout = seconds_arg("accept_timeout", t)?;
    }
    Ok(cfg)
}

/// A rendezvous message as Python sees it: a label, up to 8 words and the
/// descriptors that came with it (held until taken with `take_fds()`,
/// closed with the last copy of the object otherwise: never leaked).
#[pyclass(module = "zcio._zcio", frozen, eq, hash)]
#[derive(Clone, Debug)]
pub struct Envelope {
    pub(crate) label: u64,
    pub(crate) words: Vec<u64>,
    /// Shared by the clones (a proxy's reply is handed out more than once):
    /// whoever takes them owns them.
    fds: Arc<Mutex<Vec<OwnedFd>>>,
}

// Equality and hash: label and words (descriptors are not values).
impl PartialEq for Envelope {
    fn eq(&self, other: &Self) -> bool {
        self.label == other.label && self.words == other.words
    }
}

impl Eq for Envelope {}

impl std::hash::Hash for Envelope {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.label.hash(h);
        self.words.hash(h);
    }
}

impl Envelope {
    pub(crate) fn from_rust(m: rdv::Envelope) -> Self {
        Self {
            label: m.label,
            words: m.words,
            fds: Arc::new(Mutex::new(m.fds)),
        }
    }

    fn lock_fds(&self) -> MutexGuard<'_, Vec<OwnedFd>> {
        self.fds.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The descriptors to send: each an int or an object with `fileno()`,
/// duplicated (the caller keeps its own); at most `MAX_FDS`.
pub(crate) fn fds_of(fds: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<OwnedFd>> {
    let Some(fds) = fds else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for f in fds.try_iter()? {
        let f = f?;
        if out.len() == rdv::Envelope::MAX_FDS {
            return Err(PyValueError::new_err(format!(
                "a message carries at most {} descriptors (zcio.MAX_FDS)",
                rdv::Envelope::MAX_FDS
            )));
        }
        let raw: i32 = match f.extract::<i32>() {
            Ok(n) => n,
            Err(_) => f.call_method0(intern!(f.py(), "fileno"))?.extract()?,
        };
        if raw < 0 {
            return Err(PyValueError::new_err(format!(
                "a descriptor must be non-negative, not {raw}"
            )));
        }
        // `raw` is the caller's descriptor, open for this call, borrowed
        // only to duplicate it (a closed one makes the dup fail, EBADF).
        // SAFETY: as argued just above.
        let owned = unsafe { BorrowedFd::borrow_raw(raw) }
            .try_clone_to_owned()
            .map_err(PyErr::from)?;
        out.push(owned);
    }
    Ok(out)
}

/// The words of a message from any iterable of ints; more than [`WORDS`] is
/// a `ValueError` (found without consuming more than one extra item).
pub(crate) fn words_of(words: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<u64>> {
    let Some(words) = words else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(WORDS);
    for w in words.try_iter()? {
        if out.len() == WORDS {
            return Err(PyValueError::new_err(format!(
                "a message carries at most {WORDS} words"
            )));
        }
        out.push(w?.extract::<u64>()?);
    }
    Ok(out)
}

#[pymethods]
impl Envelope {
    /// Envelope(label, words=())
    #[new]
    #[pyo3(signature = (label, words=None))]
    fn new(label: u64, words: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Ok(Self {
            label,
            words: words_of(words)?,
            fds: Arc::default(),
        })
    }

    /// The descriptors that came with the message and were not taken yet,
    /// as ints. They still belong to this object (closed when it goes):
    /// use them while it lives, or `take_fds()` to keep them.
    #[getter]
    fn fds<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let raw: Vec<i32> = self.lock_fds().iter().map(AsRawFd::as_raw_fd).collect();
        PyTuple::new(py, raw)
    }

    /// take_fds() -> list[int]: the descriptors that came with the message,
    /// now the caller's (close each with `os.close`, or wrap it with
    /// `os.fdopen`/`socket.socket(fileno=...)`); empty once taken.
    fn take_fds(&self) -> Vec<i32> {
        std::mem::take(&mut *self.lock_fds())
            .into_iter()
            .map(IntoRawFd::into_raw_fd)
            .collect()
    }

    /// The label (an unsigned 64-bit int, e.g. an operation code).
    #[getter]
    fn label(&self) -> u64 {
        self.label
    }

    /// The words (unsigned 64-bit ints, at most 8).
    #[getter]
    fn words<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.words)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let m = slf.get();
        let args = (m.label, PyTuple::new(py, &m.words)?);
        PyTuple::new(
            py,
            [
                slf.get_type().into_any(),
                args.into_pyobject(py)?.into_any(),
            ],
        )
    }

    fn __repr__(&self) -> String {
        let words: Vec<String> = self.words.iter().map(u64::to_string).collect();
        let trail = if self.words.len() == 1 { "," } else { "" };
        format!(
            "zcio.Envelope(label={}, words=({}{trail}))",
            self.label,
            words.join(", ")
        )
    }
}

/// The partner's credentials as a dict.
/// A rendezvous point's counters as a dict (what `zcio ls` shows).
fn rdv_stats_dict<'py>(py: Python<'py>, s: rdv::RendezvousStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("peers", s.peers)?;
    d.set_item("accepted", s.accepted)?;
    d.set_item("sent_messages", s.sent_messages)?;
    d.set_item("sent_bytes", s.sent_bytes)?;
    d.set_item("received_messages", s.received_messages)?;
    d.set_item("received_bytes", s.received_bytes)?;
    d.set_item("descriptors", s.descriptors)?;
    d.set_item("timed_out", s.timed_out)?;
    d.set_item("disconnected", s.disconnected)?;
    d.set_item("malformed", s.malformed)?;
    Ok(d)
}

pub(crate) fn peer_dict<'py>(py: Python<'py>, p: PeerCred) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("pid", p.pid)?;
    d.set_item("uid", p.uid)?;
    d.set_item("gid", p.gid)?;
    Ok(d)
}

/// Accepts rendezvous connections on a Unix socket path.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct RendezvousListener {
    inner: Mutex<Option<rdv::RendezvousListener>>,
    path: PathBuf,
    /// What `accept(timeout=None)` waits.
    accept_bound: Duration,
}

#[pymethods]
impl RendezvousListener {
    /// RendezvousListener(path, *, send_timeout=None, recv_timeout=None,
    /// accept_timeout=None): the bounds (seconds) of the default waits of
    /// `accept` and of the endpoints it accepts (`None`: 10 s, one hour,
    /// one hour; `math.inf`: no bound).
    /// `access`: who may connect (a `zcio.AccessPolicy`; default: this
    /// process's uid only).
    #[new]
    #[pyo3(signature = (path, *, send_timeout=None, recv_timeout=None, accept_timeout=None, access=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        send_timeout: Option<f64>,
        recv_timeout: Option<f64>,
        accept_timeout: Option<f64>,
        access: Option<&Bound<'_, AccessPolicy>>,
    ) -> PyResult<Self> {
        let cfg = rdv_config(send_timeout, recv_timeout, accept_timeout)?;
        let l = match access {
            Some(a) => rdv::RendezvousListener::bind_with(&path, a.get().inner.clone()),
            None => rdv::RendezvousListener::bind(&path),
        }
        .map_err(|e| errors::raise(py, e))?
        .with_config(cfg);
        Ok(Self {
            inner: Mutex::new(Some(l)),
            path,
            accept_bound: cfg.accept_timeout,
        })
    }

    /// The bound (seconds) of `accept(timeout=None)`.
    #[getter]
    fn accept_timeout(&self) -> f64 {
        seconds_of(self.accept_bound)
    }

    /// The socket path.
    #[getter]
    fn path(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// accept(timeout=None) -> Rendezvous
    #[pyo3(signature = (timeout=None))]
    fn accept(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Rendezvous> {
        let t = Timeout::from_py(timeout, self.accept_bound)?;
        let c = listen::accept(py, &self.inner, t, "endpoint listener", |l, slice| {
            l.accept_timeout(slice)
        })?;
        Ok(Rendezvous::wrap(c))
    }

    /// close(): stop listening and remove the socket file.
    fn close(&self) -> PyResult<()> {
        listen::close(&self.inner)
    }

    /// stats() -> dict: the listener's live counters (what ``zcio ls``
    /// shows): accepted, peers (accepted endpoints still connected), and
    /// the traffic fields (0: each endpoint counts its own).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = {
            let g = self
                .inner
                .lock()
                .map_err(|_| errors::internal("lock poisoned"))?;
            match g.as_ref() {
                Some(l) => l.stats(),
                None => return Err(errors::closed("endpoint listener")),
            }
        };
        rdv_stats_dict(py, s)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("zcio.RendezvousListener({:?})", self.path)
    }
}

/// One end of a rendezvous connection. (Weak references: the asyncio bell
/// refers back to its endpoint without a cycle.)
#[pyclass(module = "zcio._zcio", frozen, weakref)]
pub struct Rendezvous {
    /// `None` once closed or handed to a `ProxyEndpoint`. Operations clone
    /// the `Arc` for one slice at a time, so `close()` takes effect within
    /// a slice and the connection closes when the last slice ends.
    inner: Mutex<Option<Arc<rdv::Rendezvous>>>,
    peer: PeerCred,
    /// The send in flight between `send_begin` and its end (`send_poll`
    /// true or an error, `send_cancel`). Also the turn of the blocking
    /// sends: they hold this lock while they send, and wait while a flight
    /// is on. The flight keeps its endpoint, so it can be finished (or
    /// taken back) even after `close()`.
    flight: Mutex<Option<Flight>>,
    /// The doorbell's state in asyncio (a `zcio._aio.RendezvousBell`), made
    /// by the first async call.
    bell: PyOnceLock<Py<PyAny>>,
}

/// A begun send.
struct Flight {
    seq: u64,
    ep: Arc<rdv::Rendezvous>,
}

/// Why a sliced operation ended without a result.
enum Stop {
    Ipc(zcio::Error),
    Closed,
}

impl Rendezvous {
    /// The endpoint's bounds: send, receive.
    fn bounds(&self) -> PyResult<(Duration, Duration)> {
        let c = self.get()?.config();
        Ok((c.send_timeout, c.recv_timeout))
    }

    /// The coroutine `_aio.rdv_send(ep, bell, label, words, timeout)`: a
    /// send waiting on the endpoint's doorbell.
    fn send_with_bell<'py>(
        slf: &Bound<'py, Self>,
        label: u64,
        words: Option<&Bound<'py, PyAny>>,
        timeout: Option<f64>,
        fds: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let words = PyTuple::new(py, words_of(words)?)?;
        // Checked now (count, kind); duplicated by the send itself.
        drop(fds_of(fds)?);
        let fds = match fds {
            Some(f) => PyTuple::new(py, f.try_iter()?.collect::<PyResult<Vec<_>>>()?)?,
            None => PyTuple::empty(py),
        };
        let t = async_timeout(timeout, slf.get().bounds()?.0)?;
        let bell = slf.get().async_bell(py)?;
        aio::call(
            py,
            intern!(py, "rdv_send"),
            (slf, bell, label, words, t, fds),
        )
    }

    /// The coroutine `_aio.rdv_call(ep, bell, label, words, timeout,
    /// recv_timeout)`: a send, then the next message. An explicit
    /// `timeout` bounds both together; `None` bounds each half by the
    /// endpoint's bound for it, as `call()` does.
    fn call_with_bell<'py>(
        slf: &Bound<'py, Self>,
        label: u64,
        words: Option<&Bound<'py, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let words = PyTuple::new(py, words_of(words)?)?;
        let bell = slf.get().async_bell(py)?;
        let func = intern!(py, "rdv_call");
        match timeout {
            Some(_) => {
                let t = async_timeout(timeout, Duration::ZERO)?;
                aio::call(py, func, (slf, bell, label, words, t))
            }
            None => {
                let (send, recv) = slf.get().bounds()?;
                let ts = async_timeout(None, send)?;
                let tr = async_timeout(None, recv)?;
                aio::call(py, func, (slf, bell, label, words, ts, tr))
            }
        }
    }

    fn wrap(ep: rdv::Rendezvous) -> Self {
        Self {
            peer: ep.peer(),
            inner: Mutex::new(Some(Arc::new(ep))),
            flight: Mutex::new(None),
            bell: PyOnceLock::new(),
        }
    }

    fn lock_flight(&self) -> MutexGuard<'_, Option<Flight>> {
        self.flight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The flight of send `seq` (`ValueError` when no such send is on).
    fn flight_of<'a>(
        g: &'a MutexGuard<'_, Option<Flight>>,
        seq: u64,
    ) -> PyResult<&'a Arc<rdv::Rendezvous>> {
        match g.as_ref() {
            Some(f) if f.seq == seq => Ok(&f.ep),
            Some(f) => Err(PyValueError::new_err(format!(
                "send {seq} is not in progress (send {} is)",
                f.seq
            ))),
            None => Err(PyValueError::new_err(format!(
                "send {seq} is not in progress (no send is)"
            ))),
        }
    }

    /// This endpoint's `zcio._aio.RendezvousBell` (made on first use); the
    /// endpoint must be open.
    fn async_bell<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.get()?;
        aio::bell(py, &self.bell, intern!(py, "RendezvousBell"))
    }

    fn current(inner: &Mutex<Option<Arc<rdv::Rendezvous>>>) -> Option<Arc<rdv::Rendezvous>> {
        inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn get(&self) -> PyResult<Arc<rdv::Rendezvous>> {
        Self::current(&self.inner).ok_or_else(|| errors::closed("endpoint"))
    }

    /// Take the endpoint out (for a `ProxyEndpoint`); this object is closed
    /// afterwards. Refused while another thread is in an operation on it.
    pub(crate) fn take(&self) -> PyResult<rdv::Rendezvous> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let arc = g.take().ok_or_else(|| errors::closed("endpoint"))?;
        match Arc::try_unwrap(arc) {
            Ok(ep) => Ok(ep),
            Err(arc) => {
                *g = Some(arc);
                Err(PyValueError::new_err(
                    "endpoint is in use by another thread (or a recv_any); wait for it to return",
                ))
            }
        }
    }

    /// Run `op` until it completes: once without waiting for `try_`, else
    /// in slices (the GIL released, signals checked in between) until the
    /// deadline, each slice's `TimedOut` meaning "not yet".
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        deadline: Deadline,
        try_: bool,
        timed_out: impl Into<zcio::Error>,
        op: impl Fn(&rdv::Rendezvous, Option<Duration>) -> Result<T, zcio::Error> + Send + Sync,
    ) -> PyResult<T> {
        if try_ {
            let ep = self.get()?;
            return py
                .detach(|| op(&ep, None))
                .map_err(|e| errors::raise(py, e));
        }
        let inner = &self.inner;
        let got = blocking(py, deadline, |slice| {
            let Some(ep) = Self::current(inner) else {
                return Some(Err(Stop::Closed));
            };
            match op(&ep, Some(slice)) {
                Err(e) if e.kind() == ErrorKind::TimedOut => None,
                r => Some(r.map_err(Stop::Ipc)),
            }
        })?;
        match got {
            Some(Ok(v)) => Ok(v),
            Some(Err(Stop::Ipc(e))) => Err(errors::raise(py, e)),
            Some(Err(Stop::Closed)) => Err(errors::closed("endpoint")),
            None => Err(errors::raise(py, timed_out)),
        }
    }

    fn send_with(
        &self,
        py: Python<'_>,
        msg: &rdv::Envelope,
        deadline: Deadline,
        try_: bool,
    ) -> PyResult<()> {
        let timed_out = rdv::RendezvousSendError::TimedOut;
        let flight = &self.flight;
        self.run(py, deadline, try_, timed_out, |ep, slice| {
            // Our turn: no send begun with `send_begin` is in flight (its
            // message holds the slot). Held while we send.
            let turn = flight.lock().unwrap_or_else(|p| p.into_inner());
            if turn.is_some() {
                drop(turn);
                return match slice {
                    None => Err(rdv::RendezvousSendError::WouldBlock.into()),
                    Some(s) => {
                        std::thread::sleep(s.min(Duration::from_millis(1)));
                        Err(rdv::RendezvousSendError::TimedOut.into())
                    }
                };
            }
            let r = match slice {
                None => ep.try_send(msg),
                Some(s) => ep.send_timeout(msg, s),
            };
            drop(turn);
            r.map_err(zcio::Error::from)
        })
    }

    fn recv_with(&self, py: Python<'_>, deadline: Deadline, try_: bool) -> PyResult<Envelope> {
        let timed_out = rdv::RendezvousRecvError::TimedOut;
        self.run(py, deadline, try_, timed_out, |ep, slice| match slice {
            None => ep.try_recv().map_err(zcio::Error::from),
            Some(s) => ep.recv_timeout(s).map_err(zcio::Error::from),
        })
        .map(Envelope::from_rust)
    }

    /// A send, then the next message: an explicit `timeout` bounds both
    /// together; `None` bounds each half by the endpoint's bound for it,
    /// as `call()` does.
    fn send_then_recv(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Envelope> {
        let msg = rdv::Envelope::new(label, &words_of(words)?);
        if timeout.is_none() {
            let (send, recv) = self.bounds()?;
            let ts = Timeout::within(send);
            self.send_with(py, &msg, Deadline::new(ts), false)?;
            return self.recv_with(py, Deadline::new(Timeout::within(recv)), false);
        }
        let t = Timeout::from_py(timeout, Duration::ZERO)?;
        let deadline = Deadline::new(t);
        self.send_with(py, &msg, deadline, t.is_try())?;
        self.recv_with(py, deadline, t.is_try())
    }
}

#[pymethods]
impl Rendezvous {
    /// Rendezvous.connect(path, timeout=None, *, send_timeout=None,
    /// recv_timeout=None) -> Rendezvous: `timeout` bounds the whole
    /// connect, retrying while nobody listens (`None`: 5 s);
    /// `send_timeout` and `recv_timeout` are the endpoint's bounds (as for
    /// `RendezvousListener`).
    #[staticmethod]
    #[pyo3(signature = (path, timeout=None, *, send_timeout=None, recv_timeout=None))]
    fn connect(
        py: Python<'_>,
        path: PathBuf,
        timeout: Option<f64>,
        send_timeout: Option<f64>,
        recv_timeout: Option<f64>,
    ) -> PyResult<Rendezvous> {
        let cfg = rdv_config(send_timeout, recv_timeout, None)?;
        let deadline = Deadline::new(Timeout::from_py(timeout, CONNECT_BOUND)?);
        let p = &path;
        let got = blocking(py, deadline, |slice| match rdv::Rendezvous::connect(p) {
            // Nobody listens there yet: retry until the deadline.
            Err(ConnectError::Os {
                errno: Errno::NOENT | Errno::CONNREFUSED | Errno::INTR,
                ..
            }) => {
                std::thread::sleep(slice.min(Duration::from_millis(5)));
                None
            }
            r => Some(r),
        })?;
        match got {
            Some(Ok(ep)) => Ok(Rendezvous::wrap(ep.with_config(cfg))),
            Some(Err(e)) => Err(errors::raise(py, e)),
            None => Err(errors::err(
                py,
                Class::TimedOut,
                format!("nobody accepted at {} before the timeout", path.display()),
                None,
            )),
        }
    }

    /// send(label, words=(), timeout=None, *, fds=()): `fds` are
    /// descriptors to pass along (ints or objects with `fileno()`, at most
    /// `zcio.MAX_FDS`); the partner gets its own duplicates and this
    /// process keeps its own.
    #[pyo3(signature = (label, words=None, timeout=None, *, fds=None))]
    fn send(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
        fds: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let msg = rdv::Envelope {
            label,
            words: words_of(words)?,
            fds: fds_of(fds)?,
        };
        let t = Timeout::from_py(timeout, self.bounds()?.0)?;
        self.send_with(py, &msg, Deadline::new(t), t.is_try())
    }

    /// recv(timeout=None) -> Envelope
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Envelope> {
        let t = Timeout::from_py(timeout, self.bounds()?.1)?;
        self.recv_with(py, Deadline::new(t), t.is_try())
    }

    /// recv_into(buf, timeout=None) -> (label, nwords): receive the next
    /// message without making an `Envelope`: its words go into `buf`, a
    /// writable buffer of at least 64 bytes (e.g. `array.array("Q", [0] *
    /// 8)` or a `numpy.uint64` array of 8), in native byte order. Waits as
    /// `recv`. Descriptors that come with the message are closed (use
    /// `recv` for those).
    #[pyo3(signature = (buf, timeout=None))]
    fn recv_into(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<(u64, usize)> {
        let dst = crate::buffer::Exported::get(buf, true)?;
        if dst.len() < WORDS * 8 {
            return Err(PyValueError::new_err(format!(
                "buf must hold at least {} bytes ({WORDS} words), not {}",
                WORDS * 8,
                dst.len()
            )));
        }
        let t = Timeout::from_py(timeout, self.bounds()?.1)?;
        let scratch = Mutex::new(rdv::Envelope::default());
        let timed_out = rdv::RendezvousRecvError::TimedOut;
        let sc = &scratch;
        self.run(py, Deadline::new(t), t.is_try(), timed_out, |ep, slice| {
            let mut m = sc.lock().unwrap_or_else(|p| p.into_inner());
            match slice {
                None => ep.try_recv().map(|got| *m = got).map_err(zcio::Error::from),
                Some(s) => ep.recv_into_timeout(&mut m, s).map_err(zcio::Error::from),
            }
        })?;
        let m = scratch.into_inner().unwrap_or_else(|p| p.into_inner());
        let n = m.words.len().min(WORDS);
        // `dst` is exported writable for at least WORDS * 8 bytes until it
        // drops below; `n * 8` bytes of words fit (n <= WORDS).
        // SAFETY: as argued just above.
        unsafe {
            std::ptr::copy_nonoverlapping(m.words.as_ptr().cast::<u8>(), dst.ptr(), n * 8);
        }
        drop(dst);
        Ok((m.label, n))
    }

    /// The bound (seconds) of the default wait of `send`, `send_async` and
    /// the send half of `call` (`math.inf`: none).
    #[getter]
    fn send_timeout(&self) -> PyResult<f64> {
        Ok(seconds_of(self.bounds()?.0))
    }

    /// The bound (seconds) of the default wait of `recv`, `recv_async`,
    /// `async for` and the receive half of `call` (`math.inf`: none).
    #[getter]
    fn recv_timeout(&self) -> PyResult<f64> {
        Ok(seconds_of(self.bounds()?.1))
    }

    /// call(label, words=(), timeout=None) -> Envelope
    #[pyo3(signature = (label, words=None, timeout=None))]
    fn call(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Envelope> {
        self.send_then_recv(py, label, words, timeout)
    }

    /// reply_and_recv(label, words=(), timeout=None, *, endpoints=None)
    /// -> Envelope | (int, Envelope): a server's step: reply to this
    /// partner, then receive. Without `endpoints`: the next message of
    /// this partner. With `endpoints` (a list of `Rendezvous`, this one
    /// among them or not): the next message of any of them, as
    /// `zcio.recv_any` returns it, `(index, Envelope)`. `timeout` bounds
    /// both halves together; `None` bounds each by its own bound.
    #[pyo3(signature = (label, words=None, timeout=None, *, endpoints=None))]
    fn reply_and_recv<'py>(
        &self,
        py: Python<'py>,
        label: u64,
        words: Option<&Bound<'py, PyAny>>,
        timeout: Option<f64>,
        endpoints: Option<Vec<Py<Rendezvous>>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Some(eps) = endpoints else {
            return Ok(self
                .send_then_recv(py, label, words, timeout)?
                .into_pyobject(py)?
                .into_any());
        };
        let msg = rdv::Envelope::new(label, &words_of(words)?);
        let got = match timeout {
            None => {
                let ts = Timeout::within(self.bounds()?.0);
                self.send_with(py, &msg, Deadline::new(ts), false)?;
                recv_any(py, eps, None)?
            }
            Some(secs) => {
                let t = Timeout::from_py(Some(secs), Duration::ZERO)?;
                let start = std::time::Instant::now();
                self.send_with(py, &msg, Deadline::new(t), t.is_try())?;
                let left = match t {
                    Timeout::Try => 0.0,
                    Timeout::Forever => f64::INFINITY,
                    Timeout::Within(d) => d.saturating_sub(start.elapsed()).as_secs_f64(),
                };
                // A wait that ran out during the send still looks once.
                recv_any(py, eps, Some(left))?
            }
        };
        Ok(got.into_pyobject(py)?.into_any())
    }

    /// await recv_async(timeout=None) -> Envelope: the partner's next
    /// message, waiting in the running asyncio loop on the endpoint's
    /// doorbell (`loop.add_reader`) without blocking it. `timeout` and
    /// exceptions as for `recv` (`Disconnected` once the partner is gone,
    /// or when this endpoint is closed while the call waits). Cancel-safe:
    /// a message is only ever taken synchronously, so a cancelled call took
    /// none (the next receive gets it).
    #[pyo3(signature = (timeout=None))]
    fn recv_async<'py>(
        slf: &Bound<'py, Self>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = async_timeout(timeout, slf.get().bounds()?.1)?;
        let bell = slf.get().async_bell(py)?;
        aio::call(py, intern!(py, "rdv_recv"), (slf, bell, t))
    }

    /// await send_async(label, words=(), timeout=None): send as `send`
    /// does, waiting in the running asyncio loop until the partner took the
    /// message. `timeout` as for `send`: when it runs out the message is
    /// taken back (`TimedOut`: not delivered) -- unless the partner took it
    /// meanwhile, then the call returns (delivered). Not cancel-safe: a
    /// cancelled call (`task.cancel()`, `asyncio.wait_for`) takes the
    /// message back if the partner has not taken it; if it has, it was
    /// delivered, and the cancellation cannot say which. Use `timeout=`
    /// for an exact answer. Sends of one endpoint take turns. `fds` as for
    /// `send`.
    #[pyo3(signature = (label, words=None, timeout=None, *, fds=None))]
    fn send_async<'py>(
        slf: &Bound<'py, Self>,
        label: u64,
        words: Option<&Bound<'py, PyAny>>,
        timeout: Option<f64>,
        fds: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Self::send_with_bell(slf, label, words, timeout, fds)
    }

    /// await call_async(label, words=(), timeout=None) -> Envelope: send,
    /// then the partner's answer (its next message); `timeout` bounds both
    /// together (`None`: each half its bound, as `call`). Not cancel-safe: as `send_async` for the request, and an
    /// answer that came after a cancellation stays for the next receive.
    #[pyo3(signature = (label, words=None, timeout=None))]
    fn call_async<'py>(
        slf: &Bound<'py, Self>,
        label: u64,
        words: Option<&Bound<'py, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Self::call_with_bell(slf, label, words, timeout)
    }

    /// await reply_and_recv_async(label, words=(), timeout=None) -> Envelope:
    /// a server's step (reply, then the next request), as `call_async`.
    #[pyo3(signature = (label, words=None, timeout=None))]
    fn reply_and_recv_async<'py>(
        slf: &Bound<'py, Self>,
        label: u64,
        words: Option<&Bound<'py, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Self::call_async(slf, label, words, timeout)
    }

    /// `async for m in ep`: the partner's messages until it is gone (or
    /// this endpoint is closed); then the loop ends. Each message is
    /// waited for as `recv_async()` waits: up to the endpoint's
    /// `recv_timeout` (`TimedOut` ends the loop). Cancel-safe, as
    /// `recv_async`.
    fn __aiter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let bell = match slf.get().async_bell(py) {
            Ok(b) => b,
            // Closed: the iteration is over.
            Err(_) if slf.get().closed() => {
                return Err(pyo3::exceptions::PyStopAsyncIteration::new_err(()))
            }
            Err(e) => return Err(e),
        };
        let t = async_timeout(None, slf.get().bounds()?.1)?;
        aio::call(py, intern!(py, "rdv_next"), (slf, bell, t))
    }

    /// The asyncio bell (a `zcio._aio.RendezvousBell`) once an async call made
    /// it, else None (for tests).
    #[getter]
    fn _aio_bell(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.bell.get(py).map(|b| b.clone_ref(py))
    }

    /// doorbell() -> int: the endpoint's doorbell, for an event loop of
    /// your own: readable when the partner rang it -- only after this
    /// endpoint said it sleeps (`prepare_recv_sleep`, `send_poll`) -- or
    /// hung up. The first call switches the endpoint to bell mode for good
    /// (the partner rings instead of waking futexes). It belongs to the
    /// endpoint (do not close it) and closes with it.
    fn doorbell(&self, py: Python<'_>) -> PyResult<i32> {
        let ep = self.get()?;
        Ok(py.detach(|| ep.doorbell().as_raw_fd()))
    }

    /// prepare_recv_sleep() -> bool: say "about to sleep until a message
    /// comes" (sets this endpoint's flag: the partner's next send rings the
    /// doorbell). False: a message is there -- receive it instead. The
    /// loop: `recv(timeout=0)`; on `Empty`, `prepare_recv_sleep()`; if True,
    /// wait until `doorbell()` is readable, call `doorbell_rang()`; again.
    fn prepare_recv_sleep(&self, py: Python<'_>) -> PyResult<bool> {
        let ep = self.get()?;
        Ok(py.detach(|| ep.prepare_recv_sleep()))
    }

    /// doorbell_rang() -> bool: after the doorbell was readable: take the
    /// rings. True: it hung up -- the partner is gone (the next call raises
    /// `Disconnected`); the descriptor stays readable, so look on a timer
    /// from then on, not on it.
    fn doorbell_rang(&self, py: Python<'_>) -> PyResult<bool> {
        let ep = self.get()?;
        Ok(py.detach(|| ep.doorbell_rang()))
    }

    /// send_begin(label, words=()) -> int: a send's first step: put the
    /// message in the slot for the partner (switching the endpoint to bell
    /// mode) and return the send's number. Finish it with `send_poll`
    /// until it returns True, or with `send_cancel`, before the next send.
    /// Raises `Full` while another send of this endpoint is in progress
    /// (a begun one, or a blocking `send` in another thread), and what
    /// `send` raises otherwise (nothing was sent then).
    #[pyo3(signature = (label, words=None, *, fds=None))]
    fn send_begin(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
        fds: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let msg = rdv::Envelope {
            label,
            words: words_of(words)?,
            fds: fds_of(fds)?,
        };
        let ep = self.get()?;
        let busy = |what: &str| {
            errors::err(
                py,
                Class::Full,
                format!("another send of this endpoint is in progress ({what})"),
                Some(libc_eagain()),
            )
        };
        // Never waits: a blocking send holds the turn for a while.
        let mut g = match self.flight.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(busy("a blocking send")),
        };
        if let Some(f) = g.as_ref() {
            return Err(busy(&format!(
                "send {} was begun and not finished with send_poll or send_cancel",
                f.seq
            )));
        }
        let e = &*ep;
        let seq = py
            .detach(|| e.send_begin(&msg))
            .map_err(|err| errors::raise(py, err))?;
        *g = Some(Flight { seq, ep });
        Ok(seq)
    }

    /// send_poll(seq) -> bool: whether the partner took send `seq` (True:
    /// delivered, the send is over). False: not yet -- this endpoint's flag
    /// is set: wait until `doorbell()` is readable, call `doorbell_rang()`,
    /// poll again. Raises `Disconnected` once the partner is gone (the
    /// message was taken back: the send is over), `PeerFault` for a
    /// corrupt slot (over too), `ValueError` if `seq` is not the send in
    /// progress.
    fn send_poll(&self, py: Python<'_>, seq: u64) -> PyResult<bool> {
        let mut g = self.lock_flight();
        let ep = Self::flight_of(&g, seq)?.clone();
        match py.detach(|| ep.send_poll(seq)) {
            Ok(false) => Ok(false),
            Ok(true) => {
                *g = None;
                Ok(true)
            }
            Err(e) => {
                *g = None;
                Err(errors::raise(py, e))
            }
        }
    }

    /// send_cancel(seq) -> bool: give up on send `seq`. True: the message
    /// was taken back, undelivered; False: the partner had taken it (it
    /// was delivered). Either way the send is over.
    fn send_cancel(&self, py: Python<'_>, seq: u64) -> PyResult<bool> {
        let mut g = self.lock_flight();
        let ep = Self::flight_of(&g, seq)?.clone();
        *g = None;
        Ok(py.detach(|| ep.send_cancel(seq)))
    }

    /// The partner's credentials (pid, uid, gid) from the kernel.
    #[getter]
    fn peer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        peer_dict(py, self.peer)
    }

    /// Whether this object was closed (or handed to a ProxyEndpoint).
    #[getter]
    fn closed(&self) -> bool {
        Self::current(&self.inner).is_none()
    }

    /// stats() -> dict: the endpoint's live counters (what ``zcio ls``
    /// shows): peers, sent/received messages and bytes (label and words,
    /// 8 bytes each), descriptors, timed_out, disconnected, malformed.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        rdv_stats_dict(py, self.get()?.stats())
    }

    /// close(): hang up (the partner's waits end with Disconnected; so do
    /// this endpoint's operations under way in other threads and tasks).
    fn close(&self, py: Python<'_>) {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(ep) = taken {
            ep.hang_up();
        }
        aio::closed(py, &self.bell);
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
            "zcio.Rendezvous(peer_pid={}, closed={})",
            self.peer.pid,
            if self.closed() { "True" } else { "False" }
        )
    }
}

/// recv_any(endpoints, timeout=None) -> (index, Envelope): `None` waits
/// up to the shortest `recv_timeout` of the endpoints (as Rust's
/// `recv_any`).
#[pyfunction]
#[pyo3(signature = (endpoints, timeout=None))]
pub fn recv_any(
    py: Python<'_>,
    endpoints: Vec<Py<Rendezvous>>,
    timeout: Option<f64>,
) -> PyResult<(usize, Envelope)> {
    let eps: Vec<Arc<rdv::Rendezvous>> = endpoints
        .iter()
        .map(|e| e.get().get())
        .collect::<PyResult<_>>()?;
    let bound = eps
        .iter()
        .map(|e| e.config().recv_timeout)
        .min()
        .unwrap_or(Duration::ZERO);
    let t = Timeout::from_py(timeout, bound)?;
    let refs: Vec<&rdv::Rendezvous> = eps.iter().map(|e| &**e).collect();
    let got = if t.is_try() {
        py.detach(|| rdv::Rendezvous::try_recv_any(&refs)).map(Some)
    } else {
        let r = &refs;
        match blocking(
            py,
            Deadline::new(t),
            |slice| match rdv::Rendezvous::recv_any_timeout(r, slice) {
                Err(rdv::RendezvousRecvError::TimedOut) => None,
                x => Some(x),
            },
        )? {
            Some(x) => x.map(Some),
            None => Ok(None),
        }
    };
    match got {
        Ok(Some((i, m))) => Ok((i, Envelope::from_rust(m))),
        Ok(None) => Err(errors::raise(py, rdv::RendezvousRecvError::TimedOut)),
        Err(e) => Err(errors::raise(py, e)),
    }
}

/// `EAGAIN`, the errno a `Full` carries.
fn libc_eagain() -> i32 {
    zcio::Errno::AGAIN.raw_os_error()
}
