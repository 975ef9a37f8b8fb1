//! `Msg` (a received message, read in place through the buffer protocol)
//! and `MsgView` (one byte range of it, the exporter behind the arrays of
//! `recv_array`).
//!
//! Lifetime: CPython keeps the exporter object alive while any view holds
//! a buffer of it (`Py_buffer.obj`), and numpy keeps it as the array's
//! `base`. The Rust message — whose drop sends the deallocation notice —
//! lives inside that object, so the notice goes back only when the `Msg`
//! and every view of it are gone. `release()` gives the message up early
//! but refuses while views are exported; numpy arrays built with
//! `numpy.ndarray(buffer=msg)` hold no export, so after a release the
//! mappings stay (the object keeps the regions) and such an array reads
//! whatever the originator writes there later, never unmapped memory.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use zcio::Region;

use crate::buffer;
use crate::errors;

/// What a `Msg` object holds.
pub(crate) enum Body {
    /// Received (or forwarded) slices, in place.
    Shared(zcio::Msg),
    /// A private copy (`secure()` of a volatile message).
    Private(Box<[u8]>),
}

struct State {
    /// `None` after `release()`.
    body: Option<Body>,
    /// The contiguous copy exported for a message of several slices, made
    /// once and kept until the object dies.
    joined: Option<Box<[u8]>>,
    /// The regions of a released message: kept mapped until the object
    /// dies (see the module docs).
    keep: Vec<Arc<Region>>,
}

/// A received message (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct Msg {
    state: Mutex<State>,
    /// Buffer exports and live `MsgView`s.
    exports: AtomicUsize,
    len: usize,
    volatile: bool,
    secured: bool,
    slices: usize,
}

impl Msg {
    pub(crate) fn from_msg(m: zcio::Msg) -> Self {
        Self {
            len: m.len(),
            volatile: !m.is_immutable(),
            secured: m.is_secured() && m.slice_count() > 0,
            slices: m.slice_count(),
            state: Mutex::new(State {
                body: Some(Body::Shared(m)),
                joined: None,
                keep: Vec::new(),
            }),
            exports: AtomicUsize::new(0),
        }
    }

    fn from_private(bytes: Box<[u8]>) -> Self {
        Self {
            len: bytes.len(),
            volatile: false,
            secured: false,
            slices: 1,
            state: Mutex::new(State {
                body: Some(Body::Private(bytes)),
                joined: None,
                keep: Vec::new(),
            }),
            exports: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| errors::internal("message lock poisoned"))
    }

    /// The message for forwarding (a clone of the slices), or `None` for
    /// a private copy.
    pub(crate) fn shared(&self) -> PyResult<Option<zcio::Msg>> {
        match &self.lock()?.body {
            Some(Body::Shared(m)) => Ok(Some(m.clone())),
            Some(Body::Private(_)) => Ok(None),
            None => Err(errors::closed("message (released)")),
        }
    }

    /// Copy `dst.len()` bytes at `off` out (volatile reads).
    pub(crate) fn read_at(&self, off: usize, dst: &mut [u8]) -> PyResult<usize> {
        match &self.lock()?.body {
            Some(Body::Shared(m)) => Ok(m.read_at(off, dst)),
            Some(Body::Private(b)) => {
                let src = b.get(off..).unwrap_or_default();
                let n = src.len().min(dst.len());
                dst[..n].copy_from_slice(&src[..n]);
                Ok(n)
            }
            None => Err(errors::closed("message (released)")),
        }
    }

    /// Address of `[off, off + len)` if it lies inside one slice (or the
    /// private copy), else `None`; and whether those bytes are volatile.
    pub(crate) fn range_ptr(&self, off: usize, len: usize) -> PyResult<Option<(usize, bool)>> {
        let st = self.lock()?;
        let end = off.checked_add(len).filter(|&e| e <= self.len);
        let Some(end) = end else {
            return Ok(None);
        };
        match &st.body {
            Some(Body::Private(b)) => Ok(Some((b.as_ptr() as usize + off, false))),
            Some(Body::Shared(m)) => {
                let mut start = 0usize;
                for s in m.slices() {
                    let v = s.view();
                    let stop = start + v.len();
                    if off >= start && end <= stop {
                        let volatile = !s.fbuf().is_immutable();
                        return Ok(Some((v.as_ptr() as usize + (off - start), volatile)));
                    }
                    start = stop;
                }
                Ok(None)
            }
            None => Err(errors::closed("message (released)")),
        }
    }

    pub(crate) fn byte_len(&self) -> usize {
        self.len
    }

    pub(crate) fn add_export(&self) {
        self.exports.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn drop_export(&self) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }

    /// The whole message's address for the buffer protocol: the single
    /// slice in place, or a contiguous copy made once. The lock is never
    /// held while the GIL is released (another thread holding the GIL
    /// could be waiting for it).
    fn export_ptr(&self, py: Python<'_>) -> PyResult<usize> {
        let m = {
            let st = self.lock()?;
            if let Some(j) = &st.joined {
                return Ok(j.as_ptr() as usize);
            }
            match &st.body {
                Some(Body::Private(b)) => return Ok(b.as_ptr() as usize),
                Some(Body::Shared(m)) => {
                    if let [one] = m.slices() {
                        return Ok(one.view().as_ptr() as usize);
                    }
                    m.clone()
                }
                None => return Err(errors::closed("message (released)")),
            }
        };
        let copy = copy_out(py, &m).into_boxed_slice();
        let mut st = self.lock()?;
        // Another thread may have made the copy meanwhile: keep the first.
        let j = st.joined.get_or_insert(copy);
        Ok(j.as_ptr() as usize)
    }
}

/// How `units` cuts a message.
#[derive(Clone, Copy)]
enum Cut {
    Record(usize),
    Line(u8),
}

fn out_of_range(at: usize, len: usize) -> PyErr {
    PyValueError::new_err(format!("{at} is past the end of a {len}-byte message"))
}

/// A private copy of `m` (the GIL released for large ones).
fn copy_out(py: Python<'_>, m: &zcio::Msg) -> Vec<u8> {
    if m.len() >= buffer::RELEASE_GIL_ABOVE {
        py.detach(|| m.to_vec())
    } else {
        m.to_vec()
    }
}

#[pymethods]
impl Msg {
    fn __len__(&self) -> usize {
        self.len
    }

    /// True when the originator kept a writable mapping of the bytes (a
    /// pool buffer of another process): they could still change while
    /// you read them. Use ``secure()`` before validating such data.
    #[getter]
    fn volatile(&self) -> bool {
        self.volatile
    }

    /// True when every byte is in kernel-sealed memory.
    #[getter]
    fn secured(&self) -> bool {
        self.secured
    }

    /// Number of slices (1 for everything zcio's Python API sends, except
    /// the zero-copy path of ``send_array``).
    #[getter]
    fn nslices(&self) -> usize {
        self.slices
    }

    /// slices() -> list[MsgView]: each slice of the message as a
    /// read-only range in place (one for a message sent from one buffer;
    /// several for `Channel.sendv`). Each view keeps the message from
    /// being released while it lives.
    fn slices<'py>(slf: &Bound<'py, Self>) -> PyResult<Vec<Bound<'py, MsgView>>> {
        let py = slf.py();
        let lens: Vec<usize> = match &slf.get().lock()?.body {
            Some(Body::Shared(m)) => m.slices().iter().map(|s| s.view().len()).collect(),
            Some(Body::Private(b)) => vec![b.len()],
            None => return Err(errors::closed("message (released)")),
        };
        let mut out = Vec::with_capacity(lens.len());
        let mut off = 0usize;
        for len in lens {
            let v = MsgView::new(slf, off, len)?
                .ok_or_else(|| errors::internal("slice outside its message"))?;
            out.push(Bound::new(py, v)?);
            off += len;
        }
        Ok(out)
    }

    /// write_to(fd) -> int: write the message to `fd` (an int or an object
    /// with `fileno()`) with `writev(2)` straight from the shared pages (no
    /// copy in this process); returns the bytes written, which may be
    /// fewer than `len(msg)` as for `os.writev`. The GIL is released.
    fn write_to(&self, py: Python<'_>, fd: &Bound<'_, PyAny>) -> PyResult<usize> {
        use std::io::Write;
        use std::os::fd::BorrowedFd;
        let raw: i32 = match fd.extract::<i32>() {
            Ok(n) => n,
            Err(_) => fd.call_method0(pyo3::intern!(py, "fileno"))?.extract()?,
        };
        if raw < 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "fd must be a non-negative descriptor, not {raw}"
            )));
        }
        // `raw` is the caller's descriptor, open for this call (borrowed
        // only to duplicate it: a closed one makes the dup fail with
        // EBADF).
        // SAFETY: as argued just above.
        let owned = unsafe { BorrowedFd::borrow_raw(raw) }
            .try_clone_to_owned()
            .map_err(pyo3::PyErr::from)?;
        let body = match &self.lock()?.body {
            Some(Body::Shared(m)) => Ok(m.clone()),
            Some(Body::Private(b)) => Err(b.clone()),
            None => return Err(errors::closed("message (released)")),
        };
        py.detach(|| match body {
            Ok(m) => m.write_to(&owned),
            Err(b) => std::fs::File::from(owned).write(&b),
        })
        .map_err(pyo3::PyErr::from)
    }

    /// Whether ``release()`` was called.
    #[getter]
    fn released(&self) -> PyResult<bool> {
        Ok(self.lock()?.body.is_none())
    }

    /// tobytes() -> bytes: a private copy.
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let m = match &self.lock()?.body {
            Some(Body::Shared(m)) => m.clone(),
            Some(Body::Private(b)) => return Ok(PyBytes::new(py, b)),
            None => return Err(errors::closed("message (released)")),
        };
        Ok(PyBytes::new(py, &copy_out(py, &m)))
    }

    /// secure() -> Msg: bytes that cannot change. A message that is
    /// already immutable (sealed, or made by this process) is shared in
    /// place; a volatile one is copied once into private memory.
    fn secure(&self, py: Python<'_>) -> PyResult<Msg> {
        let m = match &self.lock()?.body {
            Some(Body::Shared(m)) => m.clone(),
            Some(Body::Private(b)) => return Ok(Msg::from_private(b.clone())),
            None => return Err(errors::closed("message (released)")),
        };
        if self.volatile {
            Ok(Msg::from_private(copy_out(py, &m).into_boxed_slice()))
        } else {
            Ok(Msg::from_msg(m))
        }
    }

    /// split(at) -> (Msg, Msg): the bytes ``[0, at)`` and ``[at, len)`` as
    /// two messages over the same buffers (no byte is copied; a buffer that
    /// straddles `at` is shared by both). This message stays as it was.
    /// ``ValueError`` when `at` is past the end.
    fn split(&self, at: usize) -> PyResult<(Msg, Msg)> {
        let st = self.lock()?;
        match &st.body {
            Some(Body::Shared(m)) => {
                let mut head = m.clone();
                let tail = head
                    .split_off(at)
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                Ok((Msg::from_msg(head), Msg::from_msg(tail)))
            }
            Some(Body::Private(b)) => {
                if at > b.len() {
                    return Err(out_of_range(at, b.len()));
                }
                Ok((
                    Msg::from_private(b[..at].into()),
                    Msg::from_private(b[at..].into()),
                ))
            }
            None => Err(errors::closed("message (released)")),
        }
    }

    /// clip(front=0, back=0) -> Msg: this message without its first
    /// `front` and last `back` bytes, over the same buffers (no byte is
    /// copied). This message stays as it was. ``ValueError`` when
    /// ``front + back`` is more than its length.
    #[pyo3(signature = (front=0, back=0))]
    fn clip(&self, front: usize, back: usize) -> PyResult<Msg> {
        let total = front.saturating_add(back);
        if total > self.len {
            return Err(out_of_range(total, self.len));
        }
        let st = self.lock()?;
        match &st.body {
            Some(Body::Shared(m)) => {
                let mut m = m.clone();
                m.clip_front(front)
                    .and_then(|()| m.clip_back(back))
                    .map_err(|e| PyValueError::new_err(e.to_string()))?;
                Ok(Msg::from_msg(m))
            }
            Some(Body::Private(b)) => Ok(Msg::from_private(b[front..b.len() - back].into())),
            None => Err(errors::closed("message (released)")),
        }
    }

    /// units(size=None, delim=None) -> list[MsgView | bytes]: the
    /// application data units of the message (Rust's `Msg::units`), in
    /// order: records of `size` bytes, or lines ending in the one byte
    /// `delim` (included); the tail that is no whole unit comes last.
    /// A unit inside one buffer is a `MsgView`, read in place; one that
    /// straddles two buffers is copied into `bytes`.
    #[pyo3(signature = (size=None, delim=None))]
    fn units<'py>(
        slf: &Bound<'py, Self>,
        size: Option<usize>,
        delim: Option<&[u8]>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let py = slf.py();
        let by = match (size, delim) {
            (Some(0), None) => return Err(PyValueError::new_err("size must be at least 1")),
            (Some(n), None) => Cut::Record(n),
            (None, Some(&[d])) => Cut::Line(d),
            (None, Some(_)) => return Err(PyValueError::new_err("delim must be one byte")),
            _ => {
                return Err(PyValueError::new_err(
                    "give exactly one of size= and delim=",
                ))
            }
        };
        let me = slf.get();
        // (offset, length, the copy of a unit that straddled buffers)
        let mut cuts: Vec<(usize, usize, Option<Vec<u8>>)> = Vec::new();
        let body = match &me.lock()?.body {
            Some(Body::Shared(m)) => Ok(m.clone()),
            Some(Body::Private(b)) => Err(b.clone()),
            None => return Err(errors::closed("message (released)")),
        };
        match body {
            Ok(m) => {
                let mut cur = m.units();
                let mut off = 0;
                loop {
                    let u = match by {
                        Cut::Record(n) => cur.next_record(n),
                        Cut::Line(d) => cur.next_line(d),
                    };
                    let u = match u {
                        Some(u) => u,
                        None if cur.remaining() > 0 => cur.rest(),
                        None => break,
                    };
                    let n = u.len();
                    cuts.push((off, n, u.is_copied().then(|| u.into_vec())));
                    off += n;
                }
            }
            Err(b) => {
                let mut off = 0;
                while off < b.len() {
                    let left = b.len() - off;
                    let n = match by {
                        Cut::Record(n) => n.min(left),
                        Cut::Line(d) => b[off..]
                            .iter()
                            .position(|&x| x == d)
                            .map_or(left, |i| i + 1),
                    };
                    cuts.push((off, n, None));
                    off += n;
                }
            }
        }
        let mut out = Vec::with_capacity(cuts.len());
        for (off, n, copy) in cuts {
            let unit = match copy {
                Some(v) => PyBytes::new(py, &v).into_any(),
                None => match MsgView::new(slf, off, n)? {
                    Some(v) => Bound::new(py, v)?.into_any(),
                    None => {
                        let mut v = vec![0u8; n];
                        me.read_at(off, &mut v)?;
                        PyBytes::new(py, &v).into_any()
                    }
                },
            };
            out.push(unit);
        }
        Ok(out)
    }

    /// copy_into(pool, timeout=None) -> Msg | None: the message's bytes in
    /// one fresh buffer of `pool` (Rust's `forward::copy_into`): a message
    /// of one slice, made by this process, that the sender can no longer
    /// change. ``None`` when no buffer could be had within `timeout`
    /// (seconds; the pool's ``alloc_timeout`` by default), the message is
    /// empty, or larger than the pool allows.
    #[pyo3(signature = (pool, timeout=None))]
    fn copy_into(
        &self,
        py: Python<'_>,
        pool: &Bound<'_, crate::pool::Pool>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Msg>> {
        let p = pool.get().inner();
        let t = match timeout {
            None => p.config().alloc_timeout,
            Some(t) if t == f64::INFINITY => std::time::Duration::MAX,
            Some(t) if t.is_finite() && t >= 0.0 => std::time::Duration::from_secs_f64(t),
            Some(_) => return Err(PyValueError::new_err("timeout must be >= 0")),
        };
        let m = match &self.lock()?.body {
            Some(Body::Shared(m)) => m.clone(),
            // A private copy: the same, from its bytes.
            Some(Body::Private(b)) => {
                let b = b.clone();
                return Ok(py.detach(|| {
                    if b.is_empty() {
                        return None;
                    }
                    let mut fb = p.alloc_timeout(b.len(), t).ok()?;
                    fb.truncate(b.len());
                    fb.as_mut_slice().copy_from_slice(&b);
                    fb.freeze().ok().map(|f| Msg::from_msg(zcio::Msg::from(f)))
                }));
            }
            None => return Err(errors::closed("message (released)")),
        };
        Ok(py
            .detach(|| zcio::forward::copy_into(p, &m, t))
            .map(Msg::from_msg))
    }

    /// array() -> numpy.ndarray: the array of a `send_array` message (what
    /// `Channel.recv_array` returns for it), read-only, in place. The
    /// header is copied out and validated first; `MalformedMessage` when
    /// the message is not a valid array message.
    fn array<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        crate::channel::Channel::array_of(slf.py(), slf)
    }

    /// release(): give the buffers back now (the deallocation notice goes
    /// to the sender). BufferError while views are exported.
    fn release(&self) -> PyResult<()> {
        let mut st = self.lock()?;
        if self.exports.load(Ordering::Acquire) > 0 {
            return Err(errors::buffer(
                "views of this message still exist (memoryview, numpy array …); drop them first",
            ));
        }
        if let Some(Body::Shared(m)) = st.body.take() {
            let keep: Vec<Arc<Region>> = m
                .slices()
                .iter()
                .map(|s| s.fbuf().region().clone())
                .collect();
            st.keep.extend(keep);
            drop(m);
        }
        Ok(())
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        // Views that outlive the block keep the message (no error here).
        if self.exports.load(Ordering::Acquire) == 0 {
            self.release()?;
        }
        Ok(false)
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(errors::buffer(
                "a received message is read-only (the sender owns the memory); copy it (bytearray(msg)) to modify",
            ));
        }
        let me = slf.get();
        let ptr = me.export_ptr(slf.py())?;
        // `ptr` addresses `len` bytes owned by this object (a slice of
        // the message, which stays until release(), refused while exports
        // exist, or the private copy, kept until drop); `view` is
        // CPython's, and the view holds a reference to this object.
        // SAFETY: as argued just above.
        unsafe { buffer::fill(view, slf.as_any(), ptr as *const u8, me.len, true, flags)? };
        me.add_export();
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.drop_export();
    }

    fn __repr__(&self) -> PyResult<String> {
        let released = self.lock()?.body.is_none();
        Ok(format!(
            "zcio.Msg(len={}, slices={}, volatile={}, secured={}{})",
            self.len,
            self.slices,
            py_bool(self.volatile),
            py_bool(self.secured),
            if released { ", released" } else { "" }
        ))
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// A read-only range of a received message, in place.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct MsgView {
    msg: Py<Msg>,
    /// Address of the range: inside one slice of `msg`, which cannot be
    /// released while this object lives (it counts as an export).
    ptr: usize,
    len: usize,
    volatile: bool,
}

impl MsgView {
    /// A view of `[off, off + len)` of `msg`, if that lies in one slice.
    pub(crate) fn new(msg: &Bound<'_, Msg>, off: usize, len: usize) -> PyResult<Option<Self>> {
        let Some((ptr, volatile)) = msg.get().range_ptr(off, len)? else {
            return Ok(None);
        };
        msg.get().add_export();
        Ok(Some(Self {
            msg: msg.clone().unbind(),
            ptr,
            len,
            volatile,
        }))
    }
}

impl Drop for MsgView {
    fn drop(&mut self) {
        // `get` needs no GIL for a frozen class.
        self.msg.get().drop_export();
    }
}

#[pymethods]
impl MsgView {
    fn __len__(&self) -> usize {
        self.len
    }

    /// The message this range belongs to.
    #[getter]
    fn msg(&self, py: Python<'_>) -> Py<Msg> {
        self.msg.clone_ref(py)
    }

    /// True when the originator of these bytes kept a writable mapping
    /// (see ``Msg.volatile``; this range only).
    #[getter]
    fn volatile(&self) -> bool {
        self.volatile
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(errors::buffer(
                "received data is read-only (the sender owns the memory); copy it to modify",
            ));
        }
        let me = slf.get();
        // The range lies in a slice of `msg`, which this object keeps
        // (and keeps from being released) for its whole life.
        // SAFETY: as argued just above.
        unsafe { buffer::fill(view, slf.as_any(), me.ptr as *const u8, me.len, true, flags) }
    }

    fn __repr__(&self) -> String {
        format!(
            "zcio.MsgView(len={}, volatile={})",
            self.len,
            py_bool(self.volatile)
        )
    }
}
