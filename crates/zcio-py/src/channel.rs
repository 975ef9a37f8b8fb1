//! `Listener` and `Channel`: connections between two processes that carry
//! messages by reference, and numpy arrays with a small header.

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{Mutex, RwLock, RwLockReadGuard};
use std::time::Duration;

use pyo3::exceptions::PyTypeError;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyMemoryView, PyTuple};
use zcio::Slice;
use zcio::{ConnectError, Errno, FullPolicy, PeerFault, RecvError, SendErrorKind};

use crate::aio::{aio, async_timeout};
use crate::array::{self, Header};
use crate::buffer::{self, Exported};
use crate::config::{channel_config, config_dict};
use crate::errors::{self, Class};
use crate::lane::{LaneReceiver, LaneSender};
use crate::listen;
use crate::msg::{Msg, MsgView};
use crate::numpy;
use crate::pool::{Pool, PoolBuffer};
use crate::wait::{blocking, seconds_of, Deadline, Timeout, CONNECT_BOUND};

/// Accepts channels on a Unix socket path.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct Listener {
    inner: Mutex<Option<zcio::Listener>>,
    path: PathBuf,
    /// What `accept(timeout=None)` waits.
    accept_bound: Duration,
}

#[pymethods]
impl Listener {
    /// Listener(path, *, send_timeout=None, recv_timeout=None,
    /// accept_timeout=None, **options): the bounds (seconds) of the default
    /// waits of `accept` and of the channels it accepts (`None`: 10 s, one
    /// hour, one hour; `math.inf`: no bound). `options`: the rest of the
    /// channel configuration of the accepted channels (`policy`, `access`,
    /// `ring_entries`, … -- see `Channel.config()`).
    #[new]
    #[pyo3(signature = (path, *, send_timeout=None, recv_timeout=None, accept_timeout=None, **options))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        send_timeout: Option<f64>,
        recv_timeout: Option<f64>,
        accept_timeout: Option<f64>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let cfg = channel_config(
            "Listener()",
            send_timeout,
            recv_timeout,
            accept_timeout,
            options,
            true,
        )?;
        let accept_bound = cfg.accept_timeout;
        let l = zcio::Listener::bind(&path, cfg).map_err(|e| errors::raise(py, e))?;
        Ok(Self {
            inner: Mutex::new(Some(l)),
            path,
            accept_bound,
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

    /// accept(timeout=None, pool=None) -> Channel
    #[pyo3(signature = (timeout=None, pool=None))]
    fn accept(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        pool: Option<Py<Pool>>,
    ) -> PyResult<Channel> {
        let t = Timeout::from_py(timeout, self.accept_bound)?;
        let c = listen::accept(py, &self.inner, t, "listener", |l, slice| {
            l.accept_timeout(slice)
        })?;
        Channel::wrap(py, c, pool)
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
        format!("zcio.Listener({:?})", self.path)
    }
}

/// One end of a channel. (Weak references: the asyncio bell refers back
/// to its channel without a cycle.)
#[pyclass(module = "zcio._zcio", frozen, weakref)]
pub struct Channel {
    /// `None` once handed to a `SemanticEndpoint` (`Channel.endpoint`).
    chan: RwLock<Option<zcio::Channel>>,
    pool: Py<Pool>,
    /// The doorbell's state in asyncio (a `zcio._aio.Bell`), made by the
    /// first async call.
    bell: PyOnceLock<Py<PyAny>>,
}

/// The channel of a [`Channel`] not handed over (read-locked).
pub(crate) struct ChanRef<'a>(RwLockReadGuard<'a, Option<zcio::Channel>>);

impl std::ops::Deref for ChanRef<'_> {
    type Target = zcio::Channel;
    fn deref(&self) -> &zcio::Channel {
        match self.0.as_ref() {
            Some(c) => c,
            // `Channel::chan` makes a `ChanRef` only over `Some`, and the
            // read lock keeps it so.
            None => unreachable!("ChanRef over a handed-over channel"),
        }
    }
}

/// How a send may wait.
#[derive(Clone, Copy)]
struct SendWait {
    deadline: Deadline,
    try_: bool,
}

impl SendWait {
    /// `bound`: the channel's send bound (`timeout=None`).
    fn new(timeout: Option<f64>, bound: Duration) -> PyResult<Self> {
        let t = Timeout::from_py(timeout, bound)?;
        Ok(Self {
            deadline: Deadline::new(t),
            try_: t.is_try(),
        })
    }
}

impl Channel {
    fn wrap(py: Python<'_>, chan: zcio::Channel, pool: Option<Py<Pool>>) -> PyResult<Self> {
        let pool = match pool {
            Some(p) => p,
            None => Py::new(py, Pool::new_default("py-channel"))?,
        };
        Ok(Self {
            chan: RwLock::new(Some(chan)),
            pool,
            bell: PyOnceLock::new(),
        })
    }

    /// This end's `zcio._aio.Bell` (made on first use).
    fn bell<'py>(&self, py: Python<'py>) -> PyResult<&Bound<'py, PyAny>> {
        self.bell
            .get_or_try_init(py, || {
                Ok(aio(py)?.getattr(intern!(py, "Bell"))?.call0()?.unbind())
            })
            .map(|b| b.bind(py))
    }

    /// The channel, or `ValueError` once it was handed to an endpoint.
    pub(crate) fn chan(&self) -> PyResult<ChanRef<'_>> {
        let g = self.chan.read().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            return Err(PyValueError::new_err(
                "this Channel was handed to a SemanticEndpoint or an association (use that)",
            ));
        }
        Ok(ChanRef(g))
    }

    /// Take the channel out (for `SemanticEndpoint`): refused while another
    /// thread uses it, or when it was taken already.
    pub(crate) fn take(&self) -> PyResult<zcio::Channel> {
        let mut g = match self.chan.try_write() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => {
                return Err(PyValueError::new_err(
                    "the Channel is in use by another thread (a send or receive is waiting)",
                ))
            }
        };
        g.take().ok_or_else(|| {
            PyValueError::new_err(
                "this Channel was handed to a SemanticEndpoint or an association already",
            )
        })
    }

    /// Send `msg`, waiting for ring space until the deadline.
    fn send_msg(&self, py: Python<'_>, msg: zcio::Msg, w: SendWait) -> PyResult<()> {
        let guard = self.chan()?;
        let chan = &*guard;
        // `FullPolicy::Fail`: a full ring (or in-flight cap) fails at once,
        // whatever the timeout.
        let fail = chan.config().policy.full == FullPolicy::Fail;
        let mut pending = Some(msg);
        // Why the last attempt could not go (`Full` says which).
        let mut last = SendErrorKind::WouldBlock;
        let got = blocking(py, w.deadline, |slice| {
            let m = pending.take()?;
            match chan.send_timeout(m, slice) {
                Ok(()) => Some(Ok(())),
                Err(e) => match e.kind() {
                    k @ (SendErrorKind::WouldBlock | SendErrorKind::TooManyInFlight(_)) if fail => {
                        Some(Err(k))
                    }
                    k @ (SendErrorKind::TimedOut
                    | SendErrorKind::WouldBlock
                    | SendErrorKind::TooManyInFlight(_)) => {
                        last = k;
                        pending = Some(e.into_inner());
                        None
                    }
                    k => Some(Err(k)),
                },
            }
        })?;
        match got {
            Some(Ok(())) => Ok(()),
            Some(Err(k)) => Err(errors::raise(py, k)),
            None if w.try_ => Err(errors::raise(
                py,
                match last {
                    k @ SendErrorKind::TooManyInFlight(_) => k,
                    _ => SendErrorKind::WouldBlock,
                },
            )),
            None => Err(errors::raise(py, SendErrorKind::TimedOut)),
        }
    }

    /// The pool copies go to: `pool` if given, else the channel's.
    fn copy_pool<'py>(&self, py: Python<'py>, pool: Option<&Bound<'py, Pool>>) -> Bound<'py, Pool> {
        match pool {
            Some(p) => p.clone(),
            None => self.pool.bind(py).clone(),
        }
    }

    /// Copy `len` bytes at `src` behind `prefix` into one new buffer of
    /// `pool` and freeze it.
    ///
    /// # Safety
    /// `src` must be readable for `len` bytes for the whole call.
    unsafe fn copy_into_pool(
        py: Python<'_>,
        pool: &Pool,
        prefix: &[u8],
        src: *const u8,
        len: usize,
        w: SendWait,
    ) -> PyResult<zcio::Msg> {
        let total = prefix
            .len()
            .checked_add(len)
            .ok_or_else(|| PyValueError::new_err("message too large"))?;
        let mut b = pool.alloc_raw(py, total, w.deadline, w.try_)?;
        b.as_mut_slice()[..prefix.len()].copy_from_slice(prefix);
        if len > 0 {
            let dst = b.as_mut_slice()[prefix.len()..].as_mut_ptr();
            // `dst` has room for `len` bytes of our fresh buffer (no
            // reference to it is alive now), `src` is the caller's.
            // SAFETY: as argued just above.
            unsafe { buffer::copy(py, src, dst, len) };
        }
        let f = b.freeze().map_err(|e| errors::raise(py, e.error))?;
        Ok(zcio::Msg::from(f))
    }

    /// One message of `parts` (see `sendv`): pool buffers frozen, received
    /// messages forwarded, bytes-like parts copied into `pool` (waiting
    /// as `w` says).
    fn joined(
        py: Python<'_>,
        parts: &Bound<'_, PyAny>,
        pool: &Pool,
        w: SendWait,
    ) -> PyResult<zcio::Msg> {
        let mut msg = zcio::Msg::new();
        for part in parts.try_iter()? {
            let part = part?;
            let next = if let Ok(pb) = part.cast::<PoolBuffer>() {
                zcio::Msg::from(pb.get().freeze(py, true)?)
            } else if let Some(shared) = match part.cast::<Msg>() {
                Ok(m) => m.get().shared()?,
                Err(_) => None,
            } {
                shared
            } else {
                let src = Exported::get(&part, false)?;
                if src.len() == 0 {
                    continue;
                }
                // `src` stays exported (so valid) until the end of this
                // block.
                // SAFETY: as argued just above.
                unsafe { Self::copy_into_pool(py, pool, &[], src.ptr(), src.len(), w)? }
            };
            msg.join(next).map_err(|e| {
                PyValueError::new_err(format!(
                    "{e}: a message has at most {} slices (join fewer parts, or copy some together)",
                    zcio::Msg::MAX_SLICES
                ))
            })?;
        }
        if msg.is_empty() {
            return Err(PyValueError::new_err("cannot send an empty message"));
        }
        Ok(msg)
    }

    /// The timeout of an async send: as `async_timeout` with the send
    /// bound, but no wait at all under `FullPolicy::Fail` (a full ring
    /// fails at once there, as the blocking send does).
    fn async_send_timeout(&self, timeout: Option<f64>) -> PyResult<Option<f64>> {
        let (fail, bound) = {
            let c = self.chan()?;
            (
                c.config().policy.full == FullPolicy::Fail,
                c.config().send_timeout,
            )
        };
        if fail {
            return Ok(Some(0.0));
        }
        async_timeout(timeout, bound)
    }

    /// The channel's bounds: send, receive.
    fn bounds(&self) -> PyResult<(Duration, Duration)> {
        let c = self.chan()?;
        Ok((c.config().send_timeout, c.config().recv_timeout))
    }

    /// Receive one message as a Python object.
    fn recv_msg<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, Msg>> {
        let guard = self.chan()?;
        let chan = &*guard;
        let t = Timeout::from_py(timeout, chan.config().recv_timeout)?;
        let m = if t.is_try() {
            py.detach(|| chan.try_recv())
                .map_err(|e| errors::raise(py, e))?
        } else {
            let got = blocking(py, Deadline::new(t), |slice| {
                match chan.recv_timeout(slice) {
                    Err(RecvError::TimedOut) => None,
                    r => Some(r),
                }
            })?;
            match got {
                Some(r) => r.map_err(|e| errors::raise(py, e))?,
                None => return Err(errors::raise(py, RecvError::TimedOut)),
            }
        };
        Bound::new(py, Msg::from_msg(m))
    }

    /// Decode the array of a received message.
    pub(crate) fn array_of<'py>(
        py: Python<'py>,
        msg: &Bound<'py, Msg>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let bad = |text: String| array::malformed(py, text);
        let m = msg.get();
        let total = m.byte_len();
        let mut fixed = [0u8; array::FIXED];
        if m.read_at(0, &mut fixed)? < array::FIXED {
            return Err(bad(format!(
                "message of {total} bytes is too short for an array header"
            )));
        }
        let hl = Header::announced_len(&fixed).map_err(|e| bad(e.0))?;
        if hl > total {
            return Err(bad("array header longer than the message".into()));
        }
        let mut h = vec![0u8; hl];
        m.read_at(0, &mut h)?;
        let hdr = Header::decode(&h, total).map_err(|e| bad(e.0))?;
        let dtype = array::checked_dtype(py, &hdr)?;
        let (off, len) = (hdr.payload_off as usize, hdr.payload_len as usize);
        let buf: Bound<'py, PyAny> = match MsgView::new(msg, off, len)? {
            Some(v) => Bound::new(py, v)?.into_any(),
            None => {
                // Spread over several slices (not what zcio sends): one
                // private copy.
                let mut v = vec![0u8; len];
                m.read_at(off, &mut v)?;
                pyo3::types::PyBytes::new(py, &v).into_any()
            }
        };
        array::ndarray_over(py, &hdr, dtype, buf, 0)
    }
}

/// A peer fault as Python shows it: `kind`, `value`, `message`.
fn fault_dict<'py>(py: Python<'py>, f: &PeerFault) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let (kind, value): (&str, Option<Bound<'py, PyAny>>) = match *f {
        PeerFault::FutileWakes(n) => ("futile_wakes", Some(n.into_pyobject(py)?.into_any())),
        PeerFault::NotConsuming => ("not_consuming", None),
        PeerFault::NotReleasing(n) => ("not_releasing", Some(n.into_pyobject(py)?.into_any())),
        PeerFault::HoldExpired(d) => (
            "hold_expired",
            Some(d.as_secs_f64().into_pyobject(py)?.into_any()),
        ),
        PeerFault::HoldsReclaimed(n) => ("holds_reclaimed", Some(n.into_pyobject(py)?.into_any())),
        PeerFault::Corrupt(a) => ("corrupt", Some(a.to_string().into_pyobject(py)?.into_any())),
        PeerFault::Malformed(n) => ("malformed", Some(n.into_pyobject(py)?.into_any())),
        _ => ("other", None),
    };
    d.set_item("kind", kind)?;
    d.set_item("value", value)?;
    d.set_item("message", f.to_string())?;
    Ok(d)
}

/// The `PoolBuffer` whose memory `arr` views (through `base` links of
/// arrays and memoryviews), if any.
fn pool_buffer_of<'py>(arr: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PoolBuffer>>> {
    let py = arr.py();
    let ndarray = crate::np::ndarray(py)?;
    let mut obj = arr.clone();
    for _ in 0..256 {
        let next = if obj.is_instance(ndarray)? {
            obj.getattr(intern!(py, "base"))?
        } else if let Ok(mv) = obj.cast::<PyMemoryView>() {
            mv.getattr(intern!(py, "obj"))?
        } else {
            return Ok(None);
        };
        if next.is_none() {
            return Ok(None);
        }
        if let Ok(pb) = next.cast::<PoolBuffer>() {
            return Ok(Some(pb.clone()));
        }
        obj = next;
    }
    Ok(None)
}

/// Mark `arr` and the arrays it views read-only.
fn make_read_only(arr: &Bound<'_, PyAny>) -> PyResult<()> {
    let py = arr.py();
    let ndarray = crate::np::ndarray(py)?;
    let mut obj = arr.clone();
    for _ in 0..256 {
        if !obj.is_instance(ndarray)? {
            break;
        }
        obj.getattr(intern!(py, "flags"))?
            .setattr(intern!(py, "writeable"), false)?;
        let base = obj.getattr(intern!(py, "base"))?;
        if base.is_none() {
            break;
        }
        obj = base;
    }
    Ok(())
}

fn shared_name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= array::MAX_DTYPE
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"<>|=[]".contains(&c))
}

#[pymethods]
impl Channel {
    /// Channel.connect(path, timeout=None, pool=None, *, send_timeout=None,
    /// recv_timeout=None, **options) -> Channel: `timeout` bounds the whole
    /// connect, retrying while nobody listens (`None`: 5 s); `send_timeout`
    /// and `recv_timeout` are the channel's bounds (as for `Listener`),
    /// `options` the rest of its configuration (as for `Listener`, without
    /// `access`).
    #[staticmethod]
    #[pyo3(signature = (path, timeout=None, pool=None, *, send_timeout=None, recv_timeout=None, **options))]
    fn connect(
        py: Python<'_>,
        path: PathBuf,
        timeout: Option<f64>,
        pool: Option<Py<Pool>>,
        send_timeout: Option<f64>,
        recv_timeout: Option<f64>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Channel> {
        let cfg = channel_config(
            "Channel.connect()",
            send_timeout,
            recv_timeout,
            None,
            options,
            false,
        )?;
        let deadline = Deadline::new(Timeout::from_py(timeout, CONNECT_BOUND)?);
        let p = &path;
        let got = blocking(py, deadline, |slice| {
            match zcio::Channel::connect(p, cfg.clone()) {
                // Nobody listens there yet: retry until the deadline.
                Err(ConnectError::Os {
                    errno: Errno::NOENT | Errno::CONNREFUSED | Errno::INTR,
                    ..
                }) => {
                    std::thread::sleep(slice.min(Duration::from_millis(5)));
                    None
                }
                r => Some(r),
            }
        })?;
        match got {
            Some(Ok(c)) => Channel::wrap(py, c, pool),
            Some(Err(e)) => Err(errors::raise(py, e)),
            None => Err(errors::err(
                py,
                Class::TimedOut,
                format!("nobody accepted at {} before the timeout", path.display()),
                None,
            )),
        }
    }

    /// Channel.pair(*, send_timeout=None, recv_timeout=None, **options) ->
    /// (Channel, Channel): two connected ends in this process (threads,
    /// tests), with the bounds and options given (as for
    /// `Channel.connect`).
    #[staticmethod]
    #[pyo3(signature = (*, send_timeout=None, recv_timeout=None, **options))]
    fn pair(
        py: Python<'_>,
        send_timeout: Option<f64>,
        recv_timeout: Option<f64>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<(Channel, Channel)> {
        let cfg = channel_config(
            "Channel.pair()",
            send_timeout,
            recv_timeout,
            None,
            options,
            false,
        )?;
        let (a, b) = py
            .detach(|| zcio::Channel::pair(cfg))
            .map_err(|e| errors::raise(py, e))?;
        Ok((Channel::wrap(py, a, None)?, Channel::wrap(py, b, None)?))
    }

    /// The bound (seconds) of the default wait of `send`, `send_array`,
    /// `send_async` and a lane's `loan`/`send` (`math.inf`: none).
    #[getter]
    fn send_timeout(&self) -> PyResult<f64> {
        Ok(seconds_of(self.bounds()?.0))
    }

    /// The bound (seconds) of the default wait of `recv`, `recv_array`,
    /// `recv_async`, `async for`, `accept_lane` and a lane's `recv`
    /// (`math.inf`: none).
    #[getter]
    fn recv_timeout(&self) -> PyResult<f64> {
        Ok(seconds_of(self.bounds()?.1))
    }

    /// open_lane(slots=64, slot_size=4096) -> LaneSender
    #[pyo3(signature = (slots=64, slot_size=4096))]
    fn open_lane(&self, py: Python<'_>, slots: u32, slot_size: usize) -> PyResult<LaneSender> {
        let chan = self.chan()?;
        let bound = chan.config().send_timeout;
        chan.open_lane(&zcio::LaneConfig { slots, slot_size })
            .map(|tx| LaneSender::new(tx, bound))
            .map_err(|e| errors::raise(py, e))
    }

    /// accept_lane(timeout=None) -> LaneReceiver
    #[pyo3(signature = (timeout=None))]
    fn accept_lane(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<LaneReceiver> {
        let guard = self.chan()?;
        let chan = &*guard;
        let bound = chan.config().recv_timeout;
        let t = Timeout::from_py(timeout, bound)?;
        let got = blocking(py, Deadline::new(t), |slice| {
            match chan.accept_lane_timeout(slice) {
                Err(zcio::LaneError::WouldBlock | zcio::LaneError::TimedOut) => None,
                r => Some(r),
            }
        })?;
        match got {
            Some(r) => r
                .map(|rx| LaneReceiver::new(rx, bound))
                .map_err(|e| errors::raise(py, e)),
            None if t.is_try() => Err(errors::raise(py, zcio::LaneError::WouldBlock)),
            None => Err(errors::raise(py, zcio::LaneError::TimedOut)),
        }
    }

    /// The pool bytes-like sends and array copies are written into.
    #[getter]
    fn pool(&self, py: Python<'_>) -> Py<Pool> {
        self.pool.clone_ref(py)
    }

    /// send(data, timeout=None, pool=None)
    #[pyo3(signature = (data, timeout=None, pool=None))]
    fn send(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        pool: Option<&Bound<'_, Pool>>,
    ) -> PyResult<()> {
        let w = SendWait::new(timeout, self.bounds()?.0)?;
        if let Ok(pb) = data.cast::<PoolBuffer>() {
            let f = pb.get().freeze(py, true)?;
            return self.send_msg(py, zcio::Msg::from(f), w);
        }
        if let Ok(m) = data.cast::<Msg>() {
            if let Some(shared) = m.get().shared()? {
                return self.send_msg(py, shared, w);
            }
        }
        let src = Exported::get(data, false)?;
        if src.len() == 0 {
            return Err(PyValueError::new_err("cannot send an empty message"));
        }
        let pool = self.copy_pool(py, pool);
        // `src` stays exported (so valid) until the end of this function.
        // SAFETY: as argued just above.
        let msg = unsafe { Self::copy_into_pool(py, pool.get(), &[], src.ptr(), src.len(), w)? };
        drop(src);
        self.send_msg(py, msg, w)
    }

    /// sendv(parts, timeout=None, pool=None): send several buffers as ONE
    /// message (the receiver gets one `Msg` whose `slices()` are the
    /// parts): each part a `PoolBuffer` (frozen and sent without a copy),
    /// a received `Msg` (forwarded by reference, all its slices) or
    /// bytes-like data (copied once into a buffer of `pool`, default the
    /// channel's). At most `zcio.MAX_SLICES` slices in all (`ValueError`
    /// beyond); empty parts are dropped, an empty message is refused.
    #[pyo3(signature = (parts, timeout=None, pool=None))]
    fn sendv(
        &self,
        py: Python<'_>,
        parts: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        pool: Option<&Bound<'_, Pool>>,
    ) -> PyResult<()> {
        let w = SendWait::new(timeout, self.bounds()?.0)?;
        let pool = self.copy_pool(py, pool);
        let msg = Self::joined(py, parts, pool.get(), w)?;
        self.send_msg(py, msg, w)
    }

    /// send_array(arr, timeout=None, pool=None)
    #[pyo3(signature = (arr, timeout=None, pool=None))]
    fn send_array(
        &self,
        py: Python<'_>,
        arr: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        pool: Option<&Bound<'_, Pool>>,
    ) -> PyResult<()> {
        let w = SendWait::new(timeout, self.bounds()?.0)?;
        let arr = if arr.is_instance(crate::np::ndarray(py)?)? {
            arr.clone()
        } else {
            numpy(py)?.call_method1(intern!(py, "asarray"), (arr,))?
        };
        let d = crate::np::describe(&arr.getattr(intern!(py, "dtype"))?)?;
        if d.hasobject {
            return Err(PyTypeError::new_err(
                "object arrays cannot be sent (they hold pointers into this process)",
            ));
        }
        if d.has_fields {
            return Err(PyTypeError::new_err(
                "structured dtypes are not supported; send arr.view(numpy.uint8) and the dtype separately",
            ));
        }
        let (dstr, itemsize) = (d.name, d.itemsize);
        if !shared_name_ok(&dstr) {
            return Err(PyTypeError::new_err(format!(
                "dtype {dstr:?} cannot be described in an array header"
            )));
        }
        let shape: Vec<usize> = arr.getattr(intern!(py, "shape"))?.extract()?;
        if shape.len() > array::MAX_NDIM {
            return Err(PyValueError::new_err("too many dimensions"));
        }
        let size: usize = arr.getattr(intern!(py, "size"))?.extract()?;
        let nbytes: usize = arr.getattr(intern!(py, "nbytes"))?.extract()?;

        // Zero copy: the array lives in a pool buffer.
        if size > 0 {
            if let Some(pb) = pool_buffer_of(&arr)? {
                let strides: Vec<isize> = arr.getattr(intern!(py, "strides"))?.extract()?;
                // The address of element 0 (numpy's `buf` for any strides).
                let addr = Exported::get_flags(&arr, ffi::PyBUF_STRIDES)?.ptr() as usize;
                let base = pb.get().addr() as i128;
                if let Some((lo, hi)) = array::extent(&shape, &strides, itemsize) {
                    let start = addr as i128 + lo - base;
                    let end = addr as i128 + hi - base;
                    let fits = start >= 0
                        && end <= pb.get().length() as i128
                        && start < end
                        && nbytes as i128 <= end - start;
                    if fits {
                        return self.send_in_place(
                            py,
                            &arr,
                            &pb,
                            dstr,
                            shape,
                            strides,
                            start as usize,
                            (end - start) as usize,
                            (-lo) as u64,
                            w,
                        );
                    }
                }
            }
        }

        // One copy into a pool buffer, behind the header.
        let flags = arr.getattr(intern!(py, "flags"))?;
        let c: bool = flags.getattr(intern!(py, "c_contiguous"))?.extract()?;
        let f: bool = flags.getattr(intern!(py, "f_contiguous"))?.extract()?;
        let arr = if c || f {
            arr
        } else {
            numpy(py)?.call_method1(intern!(py, "ascontiguousarray"), (&arr,))?
        };
        let strides: Vec<isize> = arr.getattr(intern!(py, "strides"))?.extract()?;
        let hdr_len = array::header_len(shape.len(), dstr.len());
        let hdr = Header {
            flags: 0,
            dtype: dstr,
            shape: shape.iter().map(|&d| d as u64).collect(),
            strides: strides.iter().map(|&s| s as i64).collect(),
            payload_off: hdr_len as u64,
            payload_len: nbytes as u64,
            data_off: 0,
        };
        let mut head = vec![0u8; hdr_len];
        hdr.encode_into(&mut head);
        let pool = self.copy_pool(py, pool);
        let msg = if nbytes > 0 {
            let src = Exported::get_flags(&arr, ffi::PyBUF_ANY_CONTIGUOUS)?;
            if src.len() != nbytes {
                return Err(errors::internal("array buffer length differs from nbytes"));
            }
            // `src` stays exported until the end of this block.
            // SAFETY: as argued just above.
            unsafe { Self::copy_into_pool(py, pool.get(), &head, src.ptr(), nbytes, w)? }
        } else {
            // SAFETY: no bytes are read from the (dangling) source.
            unsafe {
                Self::copy_into_pool(
                    py,
                    pool.get(),
                    &head,
                    std::ptr::NonNull::dangling().as_ptr(),
                    0,
                    w,
                )?
            }
        };
        self.send_msg(py, msg, w)
    }

    /// recv(timeout=None) -> Msg
    #[pyo3(signature = (timeout=None))]
    fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, Msg>> {
        self.recv_msg(py, timeout)
    }

    /// recv_array(timeout=None) -> numpy.ndarray
    #[pyo3(signature = (timeout=None))]
    fn recv_array<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let msg = self.recv_msg(py, timeout)?;
        Self::array_of(py, &msg)
    }

    /// endpoint(output="emulated-copy", input="emulated-copy",
    /// arena_capacity=64 MiB, hello_timeout=10.0, trust_peer=False,
    /// ignore_cost_model=False, rewrite_tolerance=None) -> SemanticEndpoint:
    /// hand this channel to
    /// an endpoint with buffering semantics (the peer must do the same
    /// with its end).
    #[pyo3(signature = (output="emulated-copy", input="emulated-copy", arena_capacity=64 << 20, hello_timeout=10.0, trust_peer=false, ignore_cost_model=false, rewrite_tolerance=None))]
    #[allow(clippy::too_many_arguments)] // one per keyword argument
    fn endpoint(
        &self,
        py: Python<'_>,
        output: &str,
        input: &str,
        arena_capacity: usize,
        hello_timeout: f64,
        trust_peer: bool,
        ignore_cost_model: bool,
        rewrite_tolerance: Option<f64>,
    ) -> PyResult<crate::semantics::SemanticEndpoint> {
        crate::semantics::SemanticEndpoint::create(
            py,
            self,
            output,
            input,
            arena_capacity,
            hello_timeout,
            trust_peer,
            ignore_cost_model,
            rewrite_tolerance,
        )
    }

    /// Deallocation notices processed now; returns how many buffers came
    /// back from the peer.
    fn reclaim(&self, py: Python<'_>) -> PyResult<usize> {
        let guard = self.chan()?;
        let chan = &*guard;
        Ok(py.detach(|| chan.reclaim()))
    }

    /// Wake the peer for deferred messages and publish batched notices.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let guard = self.chan()?;
        let chan = &*guard;
        py.detach(|| chan.flush());
        Ok(())
    }

    /// config() -> dict: the configuration in effect (`policy` a
    /// `ChannelPolicy`, `access` an `AccessPolicy`, the bounds in seconds,
    /// the sizes and caps) -- the keyword arguments `Listener` and
    /// `Channel.connect` take.
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let chan = self.chan()?;
        config_dict(py, chan.config())
    }

    /// expire_holds() -> int: enforce the policy's `hold_limit` now;
    /// returns how many lent buffers were reclaimed (`"reclaim"`), or
    /// raises `PeerFault` once the channel was aborted (`"abort"`). Also
    /// done by every send, `reclaim()` and `flush()`: call it from a timer
    /// when the channel may sit idle while the peer holds buffers.
    fn expire_holds(&self, py: Python<'_>) -> PyResult<usize> {
        let guard = self.chan()?;
        let chan = &*guard;
        py.detach(|| chan.expire_holds())
            .map_err(|k| errors::raise(py, k))
    }

    /// health() -> dict | None: the first misbehaviour of the peer this
    /// end detected (as in `faults()`), or `None`.
    fn health<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let chan = self.chan()?;
        match chan.health() {
            Ok(()) => Ok(None),
            Err(f) => fault_dict(py, &f).map(Some),
        }
    }

    /// faults() -> list[dict]: every kind of misbehaviour of the peer
    /// detected so far, in the order first seen, then the running totals of
    /// malformed input and reclaimed holds. Each dict: `kind`
    /// (`"futile_wakes"`, `"not_consuming"`, `"not_releasing"`,
    /// `"hold_expired"`, `"holds_reclaimed"`, `"corrupt"`, `"malformed"`),
    /// `value` (the count, the seconds of the hold limit, or the corrupted
    /// area; `None` when there is none) and `message`.
    fn faults<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let chan = self.chan()?;
        let l = PyList::empty(py);
        for f in chan.faults() {
            l.append(fault_dict(py, &f)?)?;
        }
        Ok(l)
    }

    /// share_pool(pool): announce every current region of `pool` to the
    /// peer now, so the first sends from it need no set-up.
    fn share_pool(&self, py: Python<'_>, pool: &Bound<'_, Pool>) -> PyResult<()> {
        let guard = self.chan()?;
        let chan = &*guard;
        let p = pool.get().inner();
        py.detach(|| chan.share_pool(p))
            .map_err(|k| errors::raise(py, k))
    }

    /// trust_peer(): UNSAFE opt-in -- treat the peer's buffers as if they
    /// could not change while read (no copies to protect against a writer).
    /// Only for peers of one application that never write a buffer after
    /// sending it; never for untrusted peers (use secured pools there).
    fn trust_peer(&self) -> PyResult<()> {
        let chan = self.chan()?;
        // The caller's explicit opt-in, documented as unsafe towards peers
        // that write buffers they lent.
        // SAFETY: as argued just above.
        unsafe { chan.trust_peer() };
        Ok(())
    }

    /// Whether `trust_peer()` was called.
    #[getter]
    fn peer_trusted(&self) -> PyResult<bool> {
        Ok(self.chan()?.is_peer_trusted())
    }

    /// stats() -> dict
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let chan = self.chan()?;
        let s = chan.stats();
        let d = PyDict::new(py);
        d.set_item("msgs_sent", s.msgs_sent)?;
        d.set_item("msgs_received", s.msgs_received)?;
        d.set_item("held_by_peer", s.held_by_peer)?;
        d.set_item("notices_received", s.notices_received)?;
        d.set_item("bad_notices", s.bad_notices)?;
        d.set_item("notices_sent", s.notices_sent)?;
        d.set_item("notices_dropped", s.notices_dropped)?;
        d.set_item("malformed", s.malformed)?;
        d.set_item("wakes", s.wakes)?;
        d.set_item("sleeps", s.sleeps)?;
        d.set_item("regions_sent", s.regions_sent)?;
        d.set_item("regions_received", s.regions_received)?;
        d.set_item("reclaimed", s.reclaimed)?;
        d.set_item("retired", s.retired)?;
        d.set_item("never_received", s.never_received)?;
        d.set_item("msgs_copied", s.msgs_copied)?;
        d.set_item("bytes_sent", s.bytes_sent)?;
        d.set_item("bytes_received", s.bytes_received)?;
        d.set_item("held_by_peer_bytes", s.held_by_peer_bytes)?;
        d.set_item("holding", s.holding)?;
        d.set_item("send_would_block", s.send_would_block)?;
        d.set_item("send_timed_out", s.send_timed_out)?;
        d.set_item("send_disconnected", s.send_disconnected)?;
        d.set_item("recv_would_block", s.recv_would_block)?;
        d.set_item("recv_timed_out", s.recv_timed_out)?;
        d.set_item("recv_disconnected", s.recv_disconnected)?;
        d.set_item("peer_pid", s.peer_pid)?;
        d.set_item("connection", s.connection)?;
        let faults: Vec<String> = chan.faults().iter().map(ToString::to_string).collect();
        d.set_item("faults", faults)?;
        Ok(d)
    }

    /// The peer's credentials as the kernel reported them.
    #[getter]
    fn peer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.chan()?.peer();
        let d = PyDict::new(py);
        d.set_item("pid", p.pid)?;
        d.set_item("uid", p.uid)?;
        d.set_item("gid", p.gid)?;
        Ok(d)
    }

    /// Whether the peer has gone away (or this end was closed).
    #[getter]
    fn disconnected(&self) -> bool {
        let g = self.chan.read().unwrap_or_else(|p| p.into_inner());
        g.as_ref().is_none_or(zcio::Channel::is_disconnected)
    }

    /// The set-up socket's descriptor (readable when the peer hangs up or
    /// control records are pending; for poll loops).
    fn fileno(&self) -> PyResult<i32> {
        Ok(self.chan()?.socket().as_raw_fd())
    }

    /// doorbell() -> int: this end's doorbell, a descriptor for an event
    /// loop (`loop.add_reader`, `selectors`, `epoll`). It becomes readable
    /// when the peer rang it -- only after this end said it is about to
    /// sleep (`prepare_recv_sleep`, `prepare_send_sleep`) -- or when the
    /// peer hung up. The first call switches this end to bell mode for
    /// good: the peer rings instead of waking a futex, and this end's
    /// blocking calls sleep on the doorbell too. The descriptor belongs to
    /// the channel: do not close it. `recv_async`/`send_async` use it; call
    /// this only to build your own loop.
    fn doorbell(&self, py: Python<'_>) -> PyResult<i32> {
        let guard = self.chan()?;
        let chan = &*guard;
        Ok(py.detach(|| chan.doorbell().as_raw_fd()))
    }

    /// prepare_recv_sleep() -> bool: say "about to sleep until a message
    /// comes" (sets this end's sleep flag, so the peer rings the doorbell
    /// on its next send). False: a message is pending -- receive it
    /// instead of sleeping. The receive loop: `recv(timeout=0)`; on
    /// `Empty`, `prepare_recv_sleep()`; if True, wait until `doorbell()` is
    /// readable, call `doorbell_rang()`; start over.
    fn prepare_recv_sleep(&self, py: Python<'_>) -> PyResult<bool> {
        let guard = self.chan()?;
        let chan = &*guard;
        Ok(py.detach(|| chan.prepare_recv_sleep()))
    }

    /// prepare_send_sleep(slices=1, nbytes=0) -> bool: say "about to sleep
    /// until a message of `slices` slices and `nbytes` bytes may be sent"
    /// (the ring is full, or the peer holds as much as it may, in slices or
    /// in bytes). False: it may be sent now. Raises `Disconnected` (or
    /// `PeerFault`) when it never can be.
    #[pyo3(signature = (slices=1, nbytes=0))]
    fn prepare_send_sleep(&self, py: Python<'_>, slices: usize, nbytes: u64) -> PyResult<bool> {
        let guard = self.chan()?;
        let chan = &*guard;
        py.detach(|| chan.prepare_send_sleep(slices, nbytes))
            .map_err(|k| errors::raise(py, k))
    }

    /// doorbell_rang() -> bool: after the loop found `doorbell()` readable,
    /// take the rings off it, clear the sleep flags and, if it hung up,
    /// find out whether the peer is gone (the next receive or send then
    /// raises `Disconnected`). True: the doorbell has hung up -- the peer
    /// is gone, or it closed its doorbell and will not ring again: from
    /// then on look again on a timer (at most every 50 ms), not on the
    /// descriptor, which stays readable. It clears every sleep flag of
    /// this end: wake every task that waits on this end after calling it.
    fn doorbell_rang(&self, py: Python<'_>) -> PyResult<bool> {
        let guard = self.chan()?;
        let chan = &*guard;
        Ok(py.detach(|| chan.doorbell_rang()))
    }

    /// await recv_async(timeout=None) -> Msg: the next message, waiting in
    /// the running asyncio loop on the doorbell (`loop.add_reader`) without
    /// blocking it. `timeout` as for `recv` (`None`: up to the channel's
    /// `recv_timeout`; `0`: `Empty` at once; seconds: `TimedOut` after;
    /// `math.inf`: as long as it takes). Raises what `recv`
    /// raises (`Disconnected` once the peer is gone and everything it sent
    /// was received). Cancel-safe: a message is only ever taken
    /// synchronously, so a cancelled call (`asyncio.wait_for`,
    /// `task.cancel()`) took none and the next call gets it.
    #[pyo3(signature = (timeout=None))]
    fn recv_async<'py>(
        slf: &Bound<'py, Self>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = async_timeout(timeout, slf.get().bounds()?.1)?;
        let bell = slf.get().bell(py)?;
        aio(py)?
            .getattr(intern!(py, "channel_recv"))?
            .call1((slf, bell, t))
    }

    /// await send_async(data, timeout=None, pool=None): send as `send` does
    /// (bytes-like: copied once into a pool buffer; `PoolBuffer`: without
    /// a copy; a received `Msg`: forwarded), waiting in the running asyncio
    /// loop while the ring is full or the peer holds as much as it may.
    /// Raises what `send` raises. Cancel-safe: the message is sent (the
    /// await returned) or not at all (cancelled, `TimedOut`, or an error);
    /// send `data` again to retry. A bytes-like `data` is copied once,
    /// before the first attempt; when the pool has no free buffer, the call
    /// looks again on a timer (nothing rings for pool room).
    #[pyo3(signature = (data, timeout=None, pool=None))]
    fn send_async<'py>(
        slf: &Bound<'py, Self>,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
        pool: Option<&Bound<'py, Pool>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = slf.get().async_send_timeout(timeout)?;
        let bell = slf.get().bell(py)?;
        let pool = slf.get().copy_pool(py, pool);
        aio(py)?
            .getattr(intern!(py, "channel_send"))?
            .call1((slf, bell, data, t, pool))
    }

    /// await sendv_async(parts, timeout=None, pool=None): send `parts` as
    /// one message as `sendv` does, waiting in the running asyncio loop as
    /// `send_async` does (and cancel-safe as it is: sent or not at all).
    /// Bytes-like parts are copied once, before the first attempt.
    #[pyo3(signature = (parts, timeout=None, pool=None))]
    fn sendv_async<'py>(
        slf: &Bound<'py, Self>,
        parts: &Bound<'py, PyAny>,
        timeout: Option<f64>,
        pool: Option<&Bound<'py, Pool>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = slf.get().async_send_timeout(timeout)?;
        let bell = slf.get().bell(py)?;
        let pool = slf.get().copy_pool(py, pool);
        // A list of its own: the parts are read once, at the first attempt.
        let parts = pyo3::types::PyList::new(py, parts.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
        aio(py)?
            .getattr(intern!(py, "channel_sendv"))?
            .call1((slf, bell, parts, t, pool))
    }

    /// `async for msg in ch`: the messages until the peer is gone and
    /// everything it sent was received (then the loop ends). Each message
    /// is waited for as `recv_async()` waits: up to the channel's
    /// `recv_timeout` (`TimedOut` ends the loop; `math.inf` bounds nothing).
    /// Cancel-safe, as `recv_async`.
    fn __aiter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = async_timeout(None, slf.get().bounds()?.1)?;
        let bell = slf.get().bell(py)?;
        aio(py)?
            .getattr(intern!(py, "channel_next"))?
            .call1((slf, bell, t))
    }

    /// close(): tell the peer, stop sending and receiving. Messages and
    /// arrays already received stay readable.
    fn close(&self, py: Python<'_>) {
        // Handed to an endpoint: the endpoint closes it.
        if let Ok(guard) = self.chan() {
            let chan = &*guard;
            py.detach(|| chan.close());
        }
        // Tasks awaiting this end wake up and see it closed (nothing rings
        // our own doorbell when we close).
        if let Some(bell) = self.bell.get(py) {
            if let Err(e) = bell.bind(py).call_method0(intern!(py, "closed")) {
                e.write_unraisable(py, Some(bell.bind(py)));
            }
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
        let Ok(chan) = self.chan() else {
            return "zcio.Channel(handed over)".into();
        };
        let p = chan.peer();
        format!(
            "zcio.Channel(peer_pid={}, disconnected={})",
            p.pid,
            if chan.is_disconnected() {
                "True"
            } else {
                "False"
            }
        )
    }
}

impl Channel {
    /// The zero-copy path of `send_array`: header in a small buffer of the
    /// channel's pool, payload a slice of the array's own pool buffer.
    #[allow(clippy::too_many_arguments)]
    fn send_in_place(
        &self,
        py: Python<'_>,
        arr: &Bound<'_, PyAny>,
        pb: &Bound<'_, PoolBuffer>,
        dtype: String,
        shape: Vec<usize>,
        strides: Vec<isize>,
        start: usize,
        span: usize,
        data_off: u64,
        w: SendWait,
    ) -> PyResult<()> {
        let fbuf = pb.get().freeze(py, false)?;
        // Frozen now, whatever happens to the send: the sender's arrays
        // over it must not be written any more.
        make_read_only(arr)?;
        let hdr_len = array::header_len(shape.len(), dtype.len());
        let hdr = Header {
            flags: if pb.get().secured_flag() {
                0
            } else {
                array::FLAG_SENDER_MAPS_WRITABLE
            },
            dtype,
            shape: shape.iter().map(|&d| d as u64).collect(),
            strides: strides.iter().map(|&s| s as i64).collect(),
            payload_off: hdr_len as u64,
            payload_len: span as u64,
            data_off,
        };
        let mut head = vec![0u8; hdr_len];
        hdr.encode_into(&mut head);
        // SAFETY: no bytes are read from the (dangling) source.
        let mut msg = unsafe {
            Self::copy_into_pool(
                py,
                self.pool.get(),
                &head,
                std::ptr::NonNull::dangling().as_ptr(),
                0,
                w,
            )?
        };
        let payload = Slice::new(fbuf, start, span)
            .ok_or_else(|| errors::internal("payload slice outside its buffer"))?;
        let payload =
            zcio::Msg::from_slices([payload]).map_err(|e| errors::internal(&e.to_string()))?;
        msg.join(payload)
            .map_err(|e| errors::internal(&e.to_string()))?;
        self.send_msg(py, msg, w)
    }
}

/// _sendable(data, pool) -> (object, slices): what `send_async` passes to
/// `send(…, timeout=0)` on every attempt, so that a bytes-like `data` is
/// copied once, not once per attempt: a `PoolBuffer` or a received `Msg`
/// as it is, anything else copied into a new buffer of `pool` (never
/// waiting: `PoolExhausted`). `slices`, `nbytes`: what
/// `prepare_send_sleep` needs.
#[pyfunction]
pub(crate) fn _sendable<'py>(
    data: &Bound<'py, PyAny>,
    pool: &Bound<'py, Pool>,
) -> PyResult<(Bound<'py, PyAny>, usize, u64)> {
    let py = data.py();
    if let Ok(b) = data.cast::<PoolBuffer>() {
        return Ok((data.clone(), 1, b.get().length() as u64));
    }
    if let Ok(m) = data.cast::<Msg>() {
        if let Some(shared) = m.get().shared()? {
            return Ok((
                data.clone(),
                shared.slice_count().max(1),
                shared.len() as u64,
            ));
        }
    }
    let src = Exported::get(data, false)?;
    if src.len() == 0 {
        return Err(PyValueError::new_err("cannot send an empty message"));
    }
    let w = SendWait {
        deadline: Deadline::new(Timeout::Try),
        try_: true,
    };
    // `src` stays exported (so valid) until the end of this function.
    // SAFETY: as argued just above.
    let msg = unsafe { Channel::copy_into_pool(py, pool.get(), &[], src.ptr(), src.len(), w)? };
    drop(src);
    let nbytes = msg.len() as u64;
    Ok((Bound::new(py, Msg::from_msg(msg))?.into_any(), 1, nbytes))
}

/// _sendable_parts(parts, pool) -> (Msg, slices, nbytes): as `_sendable`,
/// for `sendv_async`: the parts joined into one message (bytes-like parts
/// copied into `pool`, never waiting: `PoolExhausted`).
#[pyfunction]
pub(crate) fn _sendable_parts<'py>(
    parts: &Bound<'py, PyAny>,
    pool: &Bound<'py, Pool>,
) -> PyResult<(Bound<'py, PyAny>, usize, u64)> {
    let py = parts.py();
    let w = SendWait {
        deadline: Deadline::new(Timeout::Try),
        try_: true,
    };
    let msg = Channel::joined(py, parts, pool.get(), w)?;
    let (slices, nbytes) = (msg.slice_count(), msg.len() as u64);
    Ok((
        Bound::new(py, Msg::from_msg(msg))?.into_any(),
        slices,
        nbytes,
    ))
}
