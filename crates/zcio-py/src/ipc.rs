//! The rendezvous (`zcio::rendezvous`): `Message`, `RendezvousListener`,
//! `Rendezvous` and `recv_any` — small messages (a label and up to 8 words)
//! handed over synchronously between two processes.
//!
//! Every wait runs in slices of at most 100 ms with the GIL released (see
//! [`blocking`]); a rendezvous send that times out is retracted by the
//! library, so re-offering it in the next slice is the same send.
//! Descriptors a partner attaches to a message are not exposed: they are
//! closed on receipt.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use zcio::rendezvous::{self as rdv, WORDS};
use zcio::ErrorKind;
use zcio::{ConnectError, Errno, PeerCred};

use crate::errors::{self, Class};
use crate::listen;
use crate::wait::{blocking, Deadline, Timeout};

/// A rendezvous message as Python sees it: a label and up to 8 words.
#[pyclass(module = "zcio._zcio", frozen, eq, hash)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Message {
    pub(crate) label: u64,
    pub(crate) words: Vec<u64>,
}

impl Message {
    pub(crate) fn from_rust(m: rdv::Message) -> Self {
        // Descriptors (if the partner sent any) are closed here.
        Self {
            label: m.label,
            words: m.words,
        }
    }
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
impl Message {
    /// Message(label, words=())
    #[new]
    #[pyo3(signature = (label, words=None))]
    fn new(label: u64, words: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        Ok(Self {
            label,
            words: words_of(words)?,
        })
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
            "zcio.Message(label={}, words=({}{trail}))",
            self.label,
            words.join(", ")
        )
    }
}

/// The partner's credentials as a dict.
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
}

#[pymethods]
impl RendezvousListener {
    /// RendezvousListener(path)
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let l = rdv::RendezvousListener::bind(&path).map_err(|e| errors::raise(py, e))?;
        Ok(Self {
            inner: Mutex::new(Some(l)),
            path,
        })
    }

    /// The socket path.
    #[getter]
    fn path(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// accept(timeout=None) -> Rendezvous
    #[pyo3(signature = (timeout=None))]
    fn accept(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Rendezvous> {
        let c = listen::accept(py, &self.inner, timeout, "endpoint listener", |l, slice| {
            l.accept_timeout(slice)
        })?;
        Ok(Rendezvous::wrap(c))
    }

    /// close(): stop listening and remove the socket file.
    fn close(&self) -> PyResult<()> {
        listen::close(&self.inner)
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

/// One end of a rendezvous connection.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct Rendezvous {
    /// `None` once closed or handed to an `AsyncEndpoint`. Operations clone
    /// the `Arc` for one slice at a time, so `close()` takes effect within
    /// a slice and the connection closes when the last slice ends.
    inner: Mutex<Option<Arc<rdv::Rendezvous>>>,
    peer: PeerCred,
}

/// Why a sliced operation ended without a result.
enum Stop {
    Ipc(zcio::Error),
    Closed,
}

impl Rendezvous {
    fn wrap(ep: rdv::Rendezvous) -> Self {
        Self {
            peer: ep.peer(),
            inner: Mutex::new(Some(Arc::new(ep))),
        }
    }

    fn current(inner: &Mutex<Option<Arc<rdv::Rendezvous>>>) -> Option<Arc<rdv::Rendezvous>> {
        inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn get(&self) -> PyResult<Arc<rdv::Rendezvous>> {
        Self::current(&self.inner).ok_or_else(|| errors::closed("endpoint"))
    }

    /// Take the endpoint out (for an `AsyncEndpoint`); this object is closed
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
        msg: &rdv::Message,
        deadline: Deadline,
        try_: bool,
    ) -> PyResult<()> {
        let timed_out = rdv::RendezvousSendError::TimedOut;
        self.run(py, deadline, try_, timed_out, |ep, slice| match slice {
            None => ep.try_send(msg).map_err(zcio::Error::from),
            Some(s) => ep.send_timeout(msg, s).map_err(zcio::Error::from),
        })
    }

    fn recv_with(&self, py: Python<'_>, deadline: Deadline, try_: bool) -> PyResult<Message> {
        let timed_out = rdv::RendezvousRecvError::TimedOut;
        self.run(py, deadline, try_, timed_out, |ep, slice| match slice {
            None => ep.try_recv().map_err(zcio::Error::from),
            Some(s) => ep.recv_timeout(s).map_err(zcio::Error::from),
        })
        .map(Message::from_rust)
    }

    fn send_then_recv(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Message> {
        let msg = rdv::Message::new(label, &words_of(words)?);
        let t = Timeout::from_py(timeout)?;
        let deadline = Deadline::new(t);
        self.send_with(py, &msg, deadline, t.is_try())?;
        self.recv_with(py, deadline, t.is_try())
    }
}

#[pymethods]
impl Rendezvous {
    /// Rendezvous.connect(path, timeout=None) -> Rendezvous
    #[staticmethod]
    #[pyo3(signature = (path, timeout=None))]
    fn connect(py: Python<'_>, path: PathBuf, timeout: Option<f64>) -> PyResult<Rendezvous> {
        let deadline = Deadline::new(Timeout::from_py(timeout)?);
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
            Some(Ok(ep)) => Ok(Rendezvous::wrap(ep)),
            Some(Err(e)) => Err(errors::raise(py, e)),
            None => Err(errors::err(
                py,
                Class::TimedOut,
                format!("nobody accepted at {} before the timeout", path.display()),
                None,
            )),
        }
    }

    /// send(label, words=(), timeout=None)
    #[pyo3(signature = (label, words=None, timeout=None))]
    fn send(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let msg = rdv::Message::new(label, &words_of(words)?);
        let t = Timeout::from_py(timeout)?;
        self.send_with(py, &msg, Deadline::new(t), t.is_try())
    }

    /// recv(timeout=None) -> Message
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Message> {
        let t = Timeout::from_py(timeout)?;
        self.recv_with(py, Deadline::new(t), t.is_try())
    }

    /// call(label, words=(), timeout=None) -> Message
    #[pyo3(signature = (label, words=None, timeout=None))]
    fn call(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Message> {
        self.send_then_recv(py, label, words, timeout)
    }

    /// reply_and_recv(label, words=(), timeout=None) -> Message
    #[pyo3(signature = (label, words=None, timeout=None))]
    fn reply_and_recv(
        &self,
        py: Python<'_>,
        label: u64,
        words: Option<&Bound<'_, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Message> {
        self.send_then_recv(py, label, words, timeout)
    }

    /// The partner's credentials (pid, uid, gid) from the kernel.
    #[getter]
    fn peer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        peer_dict(py, self.peer)
    }

    /// Whether this object was closed (or handed to an AsyncEndpoint).
    #[getter]
    fn closed(&self) -> bool {
        Self::current(&self.inner).is_none()
    }

    /// close(): hang up (the partner's waits end with Disconnected; so do
    /// this endpoint's operations under way in other threads).
    fn close(&self) {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(ep) = taken {
            ep.hang_up();
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> bool {
        self.close();
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

/// recv_any(endpoints, timeout=None) -> (index, Message)
#[pyfunction]
#[pyo3(signature = (endpoints, timeout=None))]
pub fn recv_any(
    py: Python<'_>,
    endpoints: Vec<Py<Rendezvous>>,
    timeout: Option<f64>,
) -> PyResult<(usize, Message)> {
    let t = Timeout::from_py(timeout)?;
    let eps: Vec<Arc<rdv::Rendezvous>> = endpoints
        .iter()
        .map(|e| e.get().get())
        .collect::<PyResult<_>>()?;
    let refs: Vec<&rdv::Rendezvous> = eps.iter().map(|e| &**e).collect();
    let got = if t.is_try() {
        py.detach(|| rdv::try_recv_any(&refs)).map(Some)
    } else {
        let r = &refs;
        match blocking(py, Deadline::new(t), |slice| {
            match rdv::recv_any_timeout(r, slice) {
                Err(rdv::RendezvousRecvError::TimedOut) => None,
                x => Some(x),
            }
        })? {
            Some(x) => x.map(Some),
            None => Ok(None),
        }
    };
    match got {
        Ok(Some((i, m))) => Ok((i, Message::from_rust(m))),
        Ok(None) => Err(errors::raise(py, rdv::RendezvousRecvError::TimedOut)),
        Err(e) => Err(errors::raise(py, e)),
    }
}
