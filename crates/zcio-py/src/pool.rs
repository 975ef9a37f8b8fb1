//! `Pool` and `PoolBuffer`: buffers a sender fills in place and sends
//! without a copy, and numpy arrays whose memory is such a buffer.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use zcio::{AllocError, Fbuf, FbufMut, PoolConfig};

use crate::buffer;
use crate::errors;
use crate::numpy;
use crate::wait::{blocking, seconds_arg, seconds_of, Deadline, Timeout};

/// A pool of shared-memory buffers (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct Pool {
    pool: zcio::Pool,
    secured: bool,
}

impl Pool {
    /// The pool itself.
    pub(crate) fn inner(&self) -> &zcio::Pool {
        &self.pool
    }

    pub(crate) fn new_default(name: &str) -> Self {
        Self {
            pool: zcio::Pool::new(PoolConfig::named(name)),
            secured: false,
        }
    }

    /// Allocate `len` bytes within `deadline` (`try_` tells the
    /// exhaustion error apart: `PoolExhausted` vs `AllocTimedOut`).
    pub(crate) fn alloc_raw(
        &self,
        py: Python<'_>,
        len: usize,
        deadline: Deadline,
        try_: bool,
    ) -> PyResult<FbufMut> {
        if len == 0 {
            return Err(PyValueError::new_err("cannot allocate 0 bytes"));
        }
        let pool = &self.pool;
        if self.secured {
            // A fresh sealed region per buffer: never exhausted, never waits.
            return py
                .detach(|| pool.alloc_secured(len))
                .map_err(|e| errors::raise(py, e));
        }
        let got = blocking(py, deadline, |slice| {
            let r = if slice.is_zero() {
                pool.try_alloc(len)
            } else {
                pool.alloc_timeout(len, slice)
            };
            match r {
                Err(AllocError::WouldBlock(_) | AllocError::TimedOut(_)) => None,
                r => Some(r),
            }
        })?;
        match got {
            Some(r) => r.map_err(|e| errors::raise(py, e)),
            None if try_ => Err(errors::raise(
                py,
                AllocError::WouldBlock(pool.config().name.clone()),
            )),
            None => Err(errors::err(
                py,
                errors::Class::AllocTimedOut,
                format!(
                    "pool '{}' stayed exhausted for the whole timeout; receivers release buffers by dropping messages and their views",
                    pool.config().name
                ),
                None,
            )),
        }
    }
}

#[pymethods]
impl Pool {
    /// Pool(name=None, secured=False, chunk_size=16 MiB, max_chunks=16,
    /// populate=True, *, alloc_timeout=None): `alloc_timeout` is the bound
    /// (seconds) of `alloc(timeout=None)` (`None`: 10 s; `math.inf`: none).
    #[new]
    #[pyo3(signature = (name=None, secured=false, chunk_size=16 << 20, max_chunks=16, populate=true, *, alloc_timeout=None))]
    fn new(
        name: Option<String>,
        secured: bool,
        chunk_size: usize,
        max_chunks: usize,
        populate: bool,
        alloc_timeout: Option<f64>,
    ) -> PyResult<Self> {
        if chunk_size == 0 || max_chunks == 0 {
            return Err(PyValueError::new_err(
                "chunk_size and max_chunks must be positive",
            ));
        }
        let name = name.unwrap_or_else(|| "py".to_owned());
        if name.is_empty() || name.len() > 200 || name.contains('\0') {
            return Err(PyValueError::new_err(
                "name must be 1-200 characters without NUL",
            ));
        }
        let mut cfg = PoolConfig {
            name,
            chunk_size,
            max_chunks,
            populate,
            ..PoolConfig::default()
        };
        if let Some(t) = alloc_timeout {
            cfg.alloc_timeout = seconds_arg("alloc_timeout", t)?;
        }
        Ok(Self {
            pool: zcio::Pool::new(cfg),
            secured,
        })
    }

    /// The bound (seconds) of `alloc(timeout=None)` and `empty(…,
    /// timeout=None)` (`math.inf`: none).
    #[getter]
    fn alloc_timeout(&self) -> f64 {
        seconds_of(self.pool.config().alloc_timeout)
    }

    /// The pool's name (shown in /proc/PID/maps as memfd:zcio-NAME).
    #[getter]
    fn name(&self) -> String {
        self.pool.config().name.clone()
    }

    /// Whether buffers are kernel-sealed when sent (receivers see
    /// ``msg.secured``): each buffer is then a fresh single-use region.
    #[getter]
    fn secured(&self) -> bool {
        self.secured
    }

    /// alloc(n, timeout=None) -> PoolBuffer
    #[pyo3(signature = (n, timeout=None))]
    fn alloc(&self, py: Python<'_>, n: usize, timeout: Option<f64>) -> PyResult<PoolBuffer> {
        let t = Timeout::from_py(timeout, self.pool.config().alloc_timeout)?;
        let b = self.alloc_raw(py, n, Deadline::new(t), t.is_try())?;
        Ok(PoolBuffer::new(b, self.secured))
    }

    /// empty(shape, dtype=float64, timeout=None) -> numpy.ndarray
    #[pyo3(signature = (shape, dtype=None, timeout=None))]
    fn empty<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: Option<&Bound<'py, PyAny>>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let np = numpy(py)?;
        let dtype = match dtype {
            Some(d) => np.call_method1(intern!(py, "dtype"), (d,))?,
            None => np.call_method1(intern!(py, "dtype"), (intern!(py, "float64"),))?,
        };
        if dtype.getattr(intern!(py, "hasobject"))?.is_truthy()? {
            return Err(PyTypeError::new_err(
                "object arrays cannot live in shared memory (they hold pointers)",
            ));
        }
        let dims: Vec<usize> = match shape.extract::<usize>() {
            Ok(n) => vec![n],
            Err(_) => shape.extract()?,
        };
        let itemsize: usize = dtype.getattr(intern!(py, "itemsize"))?.extract()?;
        let nbytes = dims
            .iter()
            .try_fold(itemsize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| PyValueError::new_err("array too large"))?;
        let t = Timeout::from_py(timeout, self.pool.config().alloc_timeout)?;
        let b = self.alloc_raw(py, nbytes.max(1), Deadline::new(t), t.is_try())?;
        let pb = Bound::new(py, PoolBuffer::new(b, self.secured))?;
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "shape"), PyTuple::new(py, &dims)?)?;
        kwargs.set_item(intern!(py, "dtype"), dtype)?;
        kwargs.set_item(intern!(py, "buffer"), pb)?;
        crate::np::ndarray(py)?.call((), Some(&kwargs))
    }

    /// stats() -> dict
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.pool.stats();
        let d = PyDict::new(py);
        d.set_item("chunks", s.chunks)?;
        d.set_item("bytes_total", s.bytes_total)?;
        d.set_item("bytes_free", s.bytes_free)?;
        d.set_item("buffers_in_use", s.buffers_in_use)?;
        d.set_item("bytes_in_use", s.bytes_in_use)?;
        d.set_item("allocs", s.allocs)?;
        d.set_item("quick_hits", s.quick_hits)?;
        d.set_item("exhausted", s.exhausted)?;
        d.set_item("buffers_retired", s.buffers_retired)?;
        d.set_item("bytes_retired", s.bytes_retired)?;
        d.set_item("chunks_replaced", s.chunks_replaced)?;
        d.set_item("bytes_written_off", s.bytes_written_off)?;
        d.set_item("held_per_peer", s.held_per_peer)?;
        d.set_item("capacity_buffers", s.capacity_buffers)?;
        d.set_item("alloc_timed_out", s.alloc_timed_out)?;
        Ok(d)
    }

    /// huge_pages() -> dict: whether the chunks are mapped with transparent
    /// huge pages: the system's setting for shared memory ("never",
    /// "advise" or "always"), the chunks' bytes, and of those the bytes
    /// this process maps with huge pages now (reads /proc/self/smaps).
    fn huge_pages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let h = self.pool.huge_pages();
        let d = PyDict::new(py);
        d.set_item("setting", h.setting)?;
        d.set_item("chunk_bytes", h.chunk_bytes)?;
        d.set_item("huge_bytes", h.huge_bytes)?;
        Ok(d)
    }

    /// reclaim() -> int: process deallocation notices now.
    fn reclaim(&self, py: Python<'_>) -> usize {
        let pool = &self.pool;
        py.detach(|| pool.reclaim_all())
    }

    fn __repr__(&self) -> String {
        let c = self.pool.config();
        format!(
            "zcio.Pool(name={:?}, secured={}, chunk_size={}, max_chunks={})",
            c.name,
            if self.secured { "True" } else { "False" },
            c.chunk_size,
            c.max_chunks
        )
    }
}

/// Where a pool buffer is in its life.
enum BufState {
    /// Being filled: only this process can write it.
    Writable(FbufMut),
    /// Frozen (sent at least once): read-only from now on. Kept until the
    /// Python object dies, so the pool never reuses the memory while any
    /// view of it (or numpy array over it) may exist.
    Frozen(Fbuf),
    /// Transient, while freezing.
    Busy,
}

/// A buffer of a pool (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct PoolBuffer {
    state: Mutex<BufState>,
    /// Address of the bytes; the same before and after freezing (a
    /// secured buffer's read-only mapping replaces the writable one in
    /// place), and valid as long as this object lives.
    ptr: usize,
    /// Length in bytes; only shortened (`truncate`), while writable.
    len: AtomicUsize,
    secured: bool,
    exports: AtomicUsize,
}

impl PoolBuffer {
    pub(crate) fn new(mut b: FbufMut, secured: bool) -> Self {
        let ptr = b.as_mut_ptr() as usize;
        let len = b.len();
        Self {
            state: Mutex::new(BufState::Writable(b)),
            ptr,
            len: AtomicUsize::new(len),
            secured,
            exports: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> PyResult<MutexGuard<'_, BufState>> {
        self.state
            .lock()
            .map_err(|_| errors::internal("pool buffer lock poisoned"))
    }

    pub(crate) fn addr(&self) -> usize {
        self.ptr
    }

    pub(crate) fn length(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub(crate) fn secured_flag(&self) -> bool {
        self.secured
    }

    /// Freeze (first time) and return a handle for sending.
    /// `require_no_views`: refuse while memoryviews of it are exported.
    pub(crate) fn freeze(&self, py: Python<'_>, require_no_views: bool) -> PyResult<Fbuf> {
        let mut st = self.lock()?;
        if let BufState::Frozen(f) = &*st {
            return Ok(f.clone());
        }
        if require_no_views && self.exports.load(Ordering::Acquire) > 0 {
            return Err(errors::buffer(
                "release the memoryviews of this PoolBuffer before sending it (it becomes read-only)",
            ));
        }
        let BufState::Writable(b) = std::mem::replace(&mut *st, BufState::Busy) else {
            return Err(errors::internal("pool buffer in transition"));
        };
        match b.freeze() {
            Ok(f) => {
                *st = BufState::Frozen(f.clone());
                Ok(f)
            }
            Err(e) => {
                *st = BufState::Frozen(e.buf);
                Err(errors::raise(py, e.error))
            }
        }
    }
}

#[pymethods]
impl PoolBuffer {
    fn __len__(&self) -> usize {
        self.length()
    }

    /// truncate(n): shorten the buffer to `n` bytes before sending it
    /// (reserve a large buffer, fill part of it, send only that part; no
    /// effect if `n >= len(buf)`). Refused (`BufferError`) once sent or
    /// while memoryviews of it exist.
    fn truncate(&self, n: usize) -> PyResult<()> {
        let mut st = self.lock()?;
        let BufState::Writable(b) = &mut *st else {
            return Err(errors::buffer(
                "this PoolBuffer was sent: it can no longer be truncated",
            ));
        };
        if self.exports.load(Ordering::Acquire) > 0 {
            return Err(errors::buffer(
                "release the memoryviews of this PoolBuffer before truncating it",
            ));
        }
        if n == 0 {
            return Err(PyValueError::new_err(
                "cannot truncate to 0 bytes (a message is never empty)",
            ));
        }
        b.truncate(n);
        self.len.store(b.len(), Ordering::Release);
        Ok(())
    }

    /// Whether the buffer was frozen by a send (it is read-only since).
    #[getter]
    fn sent(&self) -> PyResult<bool> {
        Ok(matches!(*self.lock()?, BufState::Frozen(_)))
    }

    /// Whether the buffer is sealed by the kernel when sent.
    #[getter]
    fn secured(&self) -> bool {
        self.secured
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        let readonly = !matches!(*me.lock()?, BufState::Writable(_));
        if readonly && flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(errors::buffer(
                "this PoolBuffer was sent: it is read-only (allocate a new one to write)",
            ));
        }
        // `ptr`/`len` are the buffer's bytes, which stay mapped (writable
        // until frozen, then read-only at the same address) and allocated
        // for as long as this object lives: the state keeps the buffer
        // until drop. `view` is CPython's.
        // SAFETY: as argued just above.
        unsafe {
            buffer::fill(
                view,
                slf.as_any(),
                me.ptr as *const u8,
                me.length(),
                readonly,
                flags,
            )?;
        }
        me.exports.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }

    fn __repr__(&self) -> PyResult<String> {
        let sent = matches!(*self.lock()?, BufState::Frozen(_));
        Ok(format!(
            "zcio.PoolBuffer(len={}, sent={}, secured={})",
            self.length(),
            if sent { "True" } else { "False" },
            if self.secured { "True" } else { "False" }
        ))
    }
}
