//! `SemanticEndpoint`: a channel with buffering semantics
//! (`zcio::semantics`) — `output`/`input` under copy, emulated copy,
//! share and emulated share; `alloc`/`output_owned`/`input_owned`/`free`
//! under the move family; `send_array`/`recv_array` under any of the
//! eight; `ArenaBuffer` (registered memory, the zero-copy paths) and
//! `OwnedBuffer` (system-allocated buffers), both exported writable
//! through the buffer protocol.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use zcio::semantics::{
    ArenaBuf, Delivery, InputError, OwnedBuf, SemanticConfig,
    SemanticEndpoint as RsSemanticEndpoint, Semantics,
};
use zcio::RecvError;

use crate::array::{self, Header};
use crate::buffer::{self, Exported, SendPtr};
use crate::channel::Channel;
use crate::errors::{self, Class};
use crate::wait::{blocking, Deadline, Timeout};

/// A semantics name as Python passes it (`ValueError` listing the names).
fn parse_sem(name: &str) -> PyResult<Semantics> {
    name.parse::<Semantics>().map_err(PyValueError::new_err)
}

fn sem_or(name: Option<&str>, default: Semantics) -> PyResult<Semantics> {
    name.map_or(Ok(default), parse_sem)
}

fn delivery_name(d: Delivery) -> &'static str {
    match d {
        Delivery::Copied => "copied",
        Delivery::Protected => "protected",
        Delivery::Hidden => "hidden",
        Delivery::Lent => "lent",
        Delivery::Sealed => "sealed",
    }
}

// --------------------------------------------------------------- buffers

/// A buffer in an endpoint's arena (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct ArenaBuffer {
    buf: ArenaBuf,
    exports: AtomicUsize,
}

#[pymethods]
impl ArenaBuffer {
    fn __len__(&self) -> usize {
        self.buf.len()
    }

    /// Offset of the first byte within its page.
    #[getter]
    fn page_offset(&self) -> usize {
        self.buf.page_offset()
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        // The bytes are the arena slots allocated to `buf` alone, mapped
        // read-write (TCOW keeps writes possible while pages are lent) for
        // as long as `buf` — so this object — lives. `view` is CPython's.
        // SAFETY: as argued just above.
        unsafe {
            buffer::fill(
                view,
                slf.as_any(),
                me.buf.as_ptr(),
                me.buf.len(),
                false,
                flags,
            )?;
        }
        me.exports.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }

    fn __repr__(&self) -> String {
        format!(
            "zcio.ArenaBuffer(len={}, page_offset={})",
            self.buf.len(),
            self.buf.page_offset()
        )
    }
}

/// A system-allocated buffer (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct OwnedBuffer {
    /// `None` once handed over (`output_owned`) or freed.
    state: Mutex<Option<OwnedBuf>>,
    ptr: usize,
    len: usize,
    exports: AtomicUsize,
}

impl OwnedBuffer {
    fn new(mut b: OwnedBuf) -> Self {
        let ptr = b.as_mut_slice().as_mut_ptr() as usize;
        let len = b.len();
        Self {
            state: Mutex::new(Some(b)),
            ptr,
            len,
            exports: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<OwnedBuf>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take the buffer out, refused while views of it exist.
    fn take(&self, what: &str) -> PyResult<OwnedBuf> {
        let mut st = self.lock();
        if self.exports.load(Ordering::Acquire) > 0 {
            return Err(errors::buffer(format!(
                "release the memoryviews and arrays of this OwnedBuffer before {what} (its memory goes away)"
            )));
        }
        st.take().ok_or_else(|| {
            PyValueError::new_err("this OwnedBuffer was handed over or freed already")
        })
    }
}

#[pymethods]
impl OwnedBuffer {
    fn __len__(&self) -> usize {
        self.len
    }

    /// Whether the buffer was handed over or freed (its bytes are gone).
    #[getter]
    fn released(&self) -> bool {
        self.lock().is_none()
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        // Counted under the state lock, so `take` sees the export.
        let st = me.lock();
        if st.is_none() {
            return Err(errors::buffer(
                "this OwnedBuffer was handed over or freed: its bytes are gone",
            ));
        }
        // `ptr`/`len` are the bytes of the buffer in `state`, which stay
        // mapped and writable while it is there; `take` refuses while any
        // view is exported, so they outlive every view. `view` is CPython's.
        // SAFETY: as argued just above.
        unsafe {
            buffer::fill(
                view,
                slf.as_any(),
                me.ptr as *const u8,
                me.len,
                false,
                flags,
            )?;
        }
        me.exports.fetch_add(1, Ordering::AcqRel);
        drop(st);
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }

    fn __repr__(&self) -> String {
        format!(
            "zcio.OwnedBuffer(len={}, released={})",
            self.len,
            if self.released() { "True" } else { "False" }
        )
    }
}

/// How one input arrived.
#[pyclass(module = "zcio._zcio", frozen, get_all)]
pub struct Received {
    /// Bytes delivered.
    len: usize,
    /// Whole pages swapped in (zero copy).
    swapped_pages: usize,
    /// Bytes copied.
    copied: usize,
    /// The sender's semantics.
    sender: Option<&'static str>,
}

#[pymethods]
impl Received {
    fn __repr__(&self) -> String {
        format!(
            "zcio.Received(len={}, swapped_pages={}, copied={}, sender={:?})",
            self.len,
            self.swapped_pages,
            self.copied,
            self.sender.unwrap_or("?")
        )
    }
}

// -------------------------------------------------------------- endpoint

/// One end of a channel with buffering semantics (see the docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct SemanticEndpoint {
    ep: RsSemanticEndpoint,
    output: Semantics,
    input: Semantics,
}

impl SemanticEndpoint {
    #[allow(clippy::too_many_arguments)] // one per keyword argument
    pub(crate) fn create(
        py: Python<'_>,
        channel: &Channel,
        output: &str,
        input: &str,
        arena_capacity: usize,
        hello_timeout: f64,
        trust_peer: bool,
        ignore_cost_model: bool,
        rewrite_tolerance: Option<f64>,
    ) -> PyResult<Self> {
        // Everything checked before the channel is taken.
        let (output, input) = (parse_sem(output)?, parse_sem(input)?);
        if rewrite_tolerance.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
            return Err(PyValueError::new_err(
                "rewrite_tolerance must be a fraction from 0.0 to 1.0 (or None: the cost model's)",
            ));
        }
        if !(hello_timeout.is_finite() && hello_timeout > 0.0) {
            return Err(PyValueError::new_err(
                "hello_timeout must be a positive number of seconds",
            ));
        }
        if arena_capacity == 0 {
            return Err(PyValueError::new_err("arena_capacity must be > 0"));
        }
        let chan = channel.take()?;
        if trust_peer {
            // The caller's opt-in (`trust_peer=True`, documented as unsafe
            // towards peers that write what they lent).
            // SAFETY: as argued just above.
            unsafe { chan.trust_peer() };
        }
        let cfg = SemanticConfig {
            output,
            input,
            arena_capacity,
            hello_timeout: Duration::from_secs_f64(hello_timeout.min(1.0e9)),
            policy: match (ignore_cost_model, rewrite_tolerance) {
                (false, None) => None,
                (true, None) => Some(zcio::semantics::Policy::always_zero_copy()),
                (ignore, Some(t)) => Some(
                    if ignore {
                        zcio::semantics::Policy::always_zero_copy()
                    } else {
                        zcio::semantics::Policy::calibrated()
                    }
                    .with_rewrite_tolerance(t),
                ),
            },
        };
        let ep = py
            .detach(|| RsSemanticEndpoint::new(chan, cfg))
            .map_err(|e| errors::raise(py, e))?;
        Ok(Self { ep, output, input })
    }

    /// Wait for the next message without taking it: `(len, page_offset)`,
    /// or `None` when the deadline passed (`timeout=None`: the channel's
    /// receive bound). Polls with short sleeps, the
    /// GIL released, handling signals every 100 ms. Sees a peer that died
    /// (`Disconnected`), not one that closed cleanly while alive (only a
    /// receive sees its goodbye): the callers that wait without a timeout
    /// receive directly instead.
    fn wait_next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<(usize, usize)>> {
        let ep = &self.ep;
        let bound = ep.channel().config().recv_timeout;
        let got = blocking(
            py,
            Deadline::new(Timeout::from_py(timeout, bound)?),
            |slice| {
                let end = Instant::now() + slice;
                let mut nap = Duration::from_micros(20);
                loop {
                    // Disconnection is checked first and the queue after it:
                    // whatever the peer sent before leaving is still taken.
                    let gone = !ep.channel().check_peer();
                    match ep.next_layout() {
                        Ok(Some((off, len))) => return Some(Ok((len, off))),
                        Ok(None) if gone => {
                            return Some(Err(InputError::Recv(RecvError::Disconnected)))
                        }
                        Ok(None) => {}
                        Err(e) => return Some(Err(e)),
                    }
                    let now = Instant::now();
                    if now >= end {
                        return None;
                    }
                    std::thread::sleep(nap.min(end - now));
                    nap = (nap * 2).min(Duration::from_millis(1));
                }
            },
        )?;
        match got {
            Some(Ok(l)) => Ok(Some(l)),
            Some(Err(e)) => Err(errors::raise(py, e)),
            None => Ok(None),
        }
    }

    fn wait_or_timeout(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<(usize, usize)> {
        self.wait_next(py, timeout)?.ok_or_else(|| {
            errors::err(
                py,
                Class::TimedOut,
                "no message arrived before the timeout",
                None,
            )
        })
    }

    /// Output the bytes of `data` (any C-contiguous buffer) under `sem`.
    fn output_buffer(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        sem: Semantics,
    ) -> PyResult<Delivery> {
        let src = Exported::get(data, false)?;
        if src.len() == 0 {
            return Err(PyValueError::new_err("cannot output an empty buffer"));
        }
        let (p, n) = (SendPtr(src.ptr()), src.len());
        let ep = &self.ep;
        let r = py.detach(move || {
            let p = p;
            // `src` keeps the exporter's memory mapped and in place for the
            // whole call (the buffer protocol's promise); whoever else may
            // write it, it is read as a volatile view, never as a slice.
            // SAFETY: as argued just above.
            let view = unsafe { zcio::View::from_raw(p.0.cast_const(), n) };
            ep.output_view(view, sem)
        });
        drop(src);
        r.map_err(|e| errors::raise(py, e))
    }

    /// Input the next message into `dst` (exported writable) under `sem`.
    fn input_into(&self, py: Python<'_>, dst: &Exported, sem: Semantics) -> PyResult<Received> {
        let (p, n) = (SendPtr(dst.ptr()), dst.len());
        if n == 0 {
            return Err(PyValueError::new_err("cannot input into an empty buffer"));
        }
        let ep = &self.ep;
        let r = py.detach(move || {
            let p = p;
            // `dst` is exported writable for the whole call; the API asks
            // callers not to touch it from another thread meanwhile.
            // SAFETY: as argued just above.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.0, n) };
            ep.input_with(bytes, sem)
        });
        let r = r.map_err(|e| errors::raise(py, e))?;
        Ok(Received {
            len: r.len,
            swapped_pages: r.swapped_pages,
            copied: r.copied,
            sender: r.sender.map(Semantics::name),
        })
    }

    fn new_arena_buffer(
        &self,
        py: Python<'_>,
        n: usize,
        page_offset: usize,
    ) -> PyResult<ArenaBuffer> {
        if n == 0 {
            return Err(PyValueError::new_err(
                "an arena buffer needs at least 1 byte",
            ));
        }
        let buf = self
            .ep
            .arena()
            .alloc_at(n, page_offset)
            .map_err(|e| errors::raise(py, e))?;
        Ok(ArenaBuffer {
            buf,
            exports: AtomicUsize::new(0),
        })
    }
}

#[pymethods]
impl SemanticEndpoint {
    /// SemanticEndpoint(channel, output="emulated-copy", input="emulated-copy",
    /// arena_capacity=64 MiB, hello_timeout=10.0, trust_peer=False,
    /// ignore_cost_model=False, rewrite_tolerance=None)
    #[new]
    #[pyo3(signature = (channel, output="emulated-copy", input="emulated-copy", arena_capacity=64 << 20, hello_timeout=10.0, trust_peer=false, ignore_cost_model=false, rewrite_tolerance=None))]
    #[allow(clippy::too_many_arguments)] // one per keyword argument
    fn new(
        py: Python<'_>,
        channel: &Bound<'_, Channel>,
        output: &str,
        input: &str,
        arena_capacity: usize,
        hello_timeout: f64,
        trust_peer: bool,
        ignore_cost_model: bool,
        rewrite_tolerance: Option<f64>,
    ) -> PyResult<Self> {
        Self::create(
            py,
            channel.get(),
            output,
            input,
            arena_capacity,
            hello_timeout,
            trust_peer,
            ignore_cost_model,
            rewrite_tolerance,
        )
    }

    /// rewrite_tolerance(n) -> float: the fraction of an n-byte buffer's
    /// pages that may have been rewritten during its previous
    /// emulated-copy output for the next output to lend it again (else it
    /// is copied; ``stats()["out_rewrite_copies"]``).
    fn rewrite_tolerance(&self, n: usize) -> f64 {
        self.ep.policy().rewrite_tolerance(n)
    }

    /// The endpoint's output and input semantics.
    #[getter]
    fn semantics(&self) -> (&'static str, &'static str) {
        (self.output.name(), self.input.name())
    }

    /// The peer's input semantics and whether it trusts us.
    #[getter]
    fn peer(&self) -> (&'static str, bool) {
        let (s, t) = self.ep.peer();
        (s.name(), t)
    }

    /// output(buffer, semantics=None) -> str
    #[pyo3(signature = (buffer, semantics=None))]
    fn output(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        semantics: Option<&str>,
    ) -> PyResult<&'static str> {
        let sem = sem_or(semantics, self.output)?;
        self.output_buffer(py, buffer, sem).map(delivery_name)
    }

    /// input(buffer, semantics=None, timeout=None) -> Received
    #[pyo3(signature = (buffer, semantics=None, timeout=None))]
    fn input(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        semantics: Option<&str>,
        timeout: Option<f64>,
    ) -> PyResult<Received> {
        let sem = sem_or(semantics, self.input)?;
        let dst = Exported::get(buffer, true)?;
        if timeout.is_some() {
            self.wait_or_timeout(py, timeout)?;
        }
        self.input_into(py, &dst, sem)
    }

    /// poll(timeout=0) -> (length, page_offset) | None
    #[pyo3(signature = (timeout=Some(0.0)))]
    fn poll(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<(usize, usize)>> {
        self.wait_next(py, timeout)
    }

    /// arena_buffer(n, page_offset=0) -> ArenaBuffer
    #[pyo3(signature = (n, page_offset=0))]
    fn arena_buffer(&self, py: Python<'_>, n: usize, page_offset: usize) -> PyResult<ArenaBuffer> {
        self.new_arena_buffer(py, n, page_offset)
    }

    /// alloc(n) -> OwnedBuffer
    fn alloc(&self, py: Python<'_>, n: usize) -> PyResult<OwnedBuffer> {
        if n == 0 {
            return Err(PyValueError::new_err("cannot allocate an empty buffer"));
        }
        let ep = &self.ep;
        let b = py
            .detach(|| ep.alloc(n))
            .map_err(|e| errors::raise(py, e))?;
        Ok(OwnedBuffer::new(b))
    }

    /// output_owned(buf, semantics=None) -> str
    #[pyo3(signature = (buf, semantics=None))]
    fn output_owned(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, OwnedBuffer>,
        semantics: Option<&str>,
    ) -> PyResult<&'static str> {
        let sem = sem_or(semantics, self.output)?;
        let ob = buf.get();
        let b = ob.take("handing it over")?;
        let ep = &self.ep;
        match py
            .detach(|| ep.output_owned_with(b, sem))
            .map_err(|e| e.into_parts())
        {
            Ok(d) => Ok(delivery_name(d)),
            Err((e, back)) => {
                if let Some(b) = back {
                    *ob.lock() = Some(b);
                }
                Err(errors::raise(py, e))
            }
        }
    }

    /// input_owned(semantics=None, timeout=None) -> OwnedBuffer
    #[pyo3(signature = (semantics=None, timeout=None))]
    fn input_owned(
        &self,
        py: Python<'_>,
        semantics: Option<&str>,
        timeout: Option<f64>,
    ) -> PyResult<OwnedBuffer> {
        let sem = sem_or(semantics, self.input)?;
        if timeout.is_some() {
            self.wait_or_timeout(py, timeout)?;
        }
        let ep = &self.ep;
        let b = py
            .detach(|| ep.input_owned_with(sem))
            .map_err(|e| errors::raise(py, e))?;
        Ok(OwnedBuffer::new(b))
    }

    /// free(buf): give a system-allocated buffer back for reuse.
    fn free(&self, buf: &Bound<'_, OwnedBuffer>) -> PyResult<()> {
        let b = buf.get().take("freeing it")?;
        self.ep.free(b);
        Ok(())
    }

    /// send_array(arr, semantics=None, timeout=None)
    #[pyo3(signature = (arr, semantics=None, timeout=None))]
    fn send_array(
        &self,
        py: Python<'_>,
        arr: &Bound<'_, PyAny>,
        semantics: Option<&str>,
        timeout: Option<f64>,
    ) -> PyResult<&'static str> {
        // Sends wait up to the channel's send bound; `timeout` is accepted
        // for symmetry and checked.
        Timeout::from_py(timeout, Duration::ZERO)?;
        let sem = sem_or(semantics, self.output)?;
        let np = crate::numpy(py)?;
        let arr = np.call_method1(intern!(py, "ascontiguousarray"), (arr,))?;
        let d = crate::np::describe(&arr.getattr(intern!(py, "dtype"))?)?;
        if d.hasobject || d.has_fields {
            return Err(PyTypeError::new_err(
                "only plain dtypes can be sent (no object or structured arrays)",
            ));
        }
        let plain = |c: u8| c.is_ascii_alphanumeric() || b"<>|=[]".contains(&c);
        if d.name.is_empty() || d.name.len() > array::MAX_DTYPE || !d.name.bytes().all(plain) {
            return Err(PyTypeError::new_err(format!(
                "dtype {:?} cannot be described in an array header",
                d.name
            )));
        }
        let shape: Vec<usize> = arr.getattr(intern!(py, "shape"))?.extract()?;
        if shape.len() > array::MAX_NDIM {
            return Err(PyValueError::new_err("too many dimensions"));
        }
        let strides: Vec<isize> = arr.getattr(intern!(py, "strides"))?.extract()?;
        let nbytes: usize = arr.getattr(intern!(py, "nbytes"))?.extract()?;
        let hl = array::header_len(shape.len(), d.name.len());
        let hdr = Header {
            flags: 0,
            dtype: d.name,
            shape: shape.iter().map(|&x| x as u64).collect(),
            strides: strides.iter().map(|&x| x as i64).collect(),
            payload_off: hl as u64,
            payload_len: nbytes as u64,
            data_off: 0,
        };
        let mut head = vec![0u8; hl];
        hdr.encode_into(&mut head);
        let ep = &self.ep;
        py.detach(|| ep.output_with(&head, Semantics::Copy))
            .map_err(|e| errors::raise(py, e))?;
        if nbytes == 0 {
            return Ok("copied");
        }
        let d = if sem.application_allocated() {
            // In place when the array lives in this endpoint's arena; the
            // library copies anything else.
            self.output_buffer(py, &arr, sem)?
        } else {
            // The move family hands over a system-allocated buffer: one
            // copy of the array into it.
            let mut b = py
                .detach(|| ep.alloc(nbytes))
                .map_err(|e| errors::raise(py, e))?;
            let src = Exported::get(&arr, false)?;
            if src.len() != nbytes {
                return Err(errors::internal("array buffer length differs from nbytes"));
            }
            let dst = b.as_mut_slice().as_mut_ptr();
            // `src` is exported for the call, `dst` is the fresh buffer's
            // `nbytes` bytes (no reference to them is alive now).
            // SAFETY: as argued just above.
            unsafe { buffer::copy(py, src.ptr(), dst, nbytes) };
            drop(src);
            py.detach(|| ep.output_owned_with(b, sem))
                .map_err(|e| errors::raise(py, e.into_parts().0))?
        };
        Ok(delivery_name(d))
    }

    /// recv_array(semantics=None, timeout=None) -> numpy.ndarray
    #[pyo3(signature = (semantics=None, timeout=None))]
    fn recv_array<'py>(
        &self,
        py: Python<'py>,
        semantics: Option<&str>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let sem = sem_or(semantics, self.input)?;
        let bad = |text: String| errors::err(py, Class::Malformed, text, None);
        if timeout.is_some() {
            self.wait_or_timeout(py, timeout)?;
        }
        let mut h = vec![0u8; array::MAX_HEADER];
        let ep = &self.ep;
        let hlen = match py.detach(|| ep.input_with(&mut h, Semantics::Copy)) {
            Ok(r) => r.len,
            Err(InputError::TooShort { needed }) => {
                return Err(bad(format!(
                    "a message of {needed} bytes is not an array header (expected send_array's)"
                )))
            }
            Err(e) => return Err(errors::raise(py, e)),
        };
        if hlen < array::FIXED {
            return Err(bad(format!(
                "a message of {hlen} bytes is not an array header (expected send_array's)"
            )));
        }
        h.truncate(hlen);
        let mut fixed = [0u8; array::FIXED];
        fixed.copy_from_slice(&h[..array::FIXED]);
        let hl = Header::announced_len(&fixed).map_err(|e| bad(e.0))?;
        if hl != hlen {
            return Err(bad("array header length does not match its message".into()));
        }
        let hdr = Header::decode(&h, usize::MAX).map_err(|e| bad(e.0))?;
        let dt = crate::np::dtype(py, &hdr.dtype)
            .map_err(|e| bad(format!("dtype {:?} rejected by numpy: {e}", hdr.dtype)))?;
        if !dt.plain {
            return Err(bad(format!(
                "dtype {:?} is not a plain data type",
                hdr.dtype
            )));
        }
        hdr.check_extent(dt.itemsize).map_err(|e| bad(e.0))?;
        let plen = usize::try_from(hdr.payload_len).map_err(|_| bad("payload too large".into()))?;
        let buf: Bound<'py, PyAny> = if plen == 0 {
            pyo3::types::PyBytes::new(py, &[]).into_any()
        } else {
            let (len, off) = self.wait_or_timeout(py, timeout)?;
            if len != plen {
                return Err(bad(format!(
                    "array payload of {len} bytes, the header announced {plen}"
                )));
            }
            if sem.application_allocated() {
                // An arena buffer at the sender's page offset: whole pages
                // are swapped in where the semantics allows.
                let ab = Bound::new(py, self.new_arena_buffer(py, len, off)?)?;
                let dst = Exported::get(ab.as_any(), true)?;
                self.input_into(py, &dst, sem)?;
                drop(dst);
                ab.into_any()
            } else {
                let b = py
                    .detach(|| ep.input_owned_with(sem))
                    .map_err(|e| errors::raise(py, e))?;
                if b.len() != plen {
                    return Err(bad("array payload length changed".into()));
                }
                Bound::new(py, OwnedBuffer::new(b))?.into_any()
            }
        };
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "shape"), PyTuple::new(py, &hdr.shape)?)?;
        kwargs.set_item(intern!(py, "dtype"), dt.obj)?;
        kwargs.set_item(intern!(py, "buffer"), buf)?;
        kwargs.set_item(intern!(py, "offset"), hdr.data_off)?;
        kwargs.set_item(intern!(py, "strides"), PyTuple::new(py, &hdr.strides)?)?;
        crate::np::ndarray(py)?
            .call((), Some(&kwargs))
            .map_err(|e| bad(format!("numpy refused the array: {e}")))
    }

    /// stats() -> dict
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.ep.stats();
        let a = self.ep.arena().stats();
        let d = PyDict::new(py);
        d.set_item("out_copied", s.out_copied)?;
        d.set_item("out_protected", s.out_protected)?;
        d.set_item("out_hidden", s.out_hidden)?;
        d.set_item("out_lent", s.out_lent)?;
        d.set_item("out_sealed", s.out_sealed)?;
        d.set_item("out_fallbacks", s.out_fallbacks)?;
        d.set_item("out_rewrite_copies", s.out_rewrite_copies)?;
        d.set_item("in_swapped_pages", s.in_swapped_pages)?;
        d.set_item("in_copied_bytes", s.in_copied_bytes)?;
        d.set_item("tcow_copies", a.tcow_copies)?;
        d.set_item("protects", a.protects)?;
        d.set_item("unprotects", a.unprotects)?;
        d.set_item("swapped_pages", a.swapped_pages)?;
        d.set_item("pages_in_flight", a.pages_in_flight)?;
        Ok(d)
    }

    /// trust_peer(): the unsafe opt-in (see the docstring).
    fn trust_peer(&self) {
        // The caller's explicit opt-in, documented as unsafe towards peers
        // that write pages they lent.
        // SAFETY: as argued just above.
        unsafe { self.ep.channel().trust_peer() };
    }

    /// Whether the peer has gone away (or this end was closed).
    #[getter]
    fn disconnected(&self) -> bool {
        self.ep.channel().is_disconnected()
    }

    /// close(): tell the peer; buffers received stay usable.
    fn close(&self, py: Python<'_>) {
        let ep = &self.ep;
        py.detach(|| ep.channel().close());
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
            "zcio.SemanticEndpoint(output={:?}, input={:?})",
            self.output.name(),
            self.input.name()
        )
    }
}

/// semantics_names() -> list[str]: the eight names, in the paper's order.
#[pyfunction]
pub fn semantics_names() -> Vec<&'static str> {
    Semantics::ALL.iter().map(|s| s.name()).collect()
}

// ------------------------------------------------------------ cost model

use zcio::semantics::cost::{CostModel as RsCostModel, LoadError, Op};

/// A load failure as Python raises it: `OSError` (its subclass for the
/// errno, `FileNotFoundError`, ...) when the file cannot be read,
/// `ValueError` when it is not a usable calibration file.
fn load_error(e: LoadError) -> PyErr {
    match e {
        LoadError::Io(io) => PyErr::from(io),
        e => PyValueError::new_err(format!("not a usable calibration file: {e}")),
    }
}

/// The cost model (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct CostModel {
    m: RsCostModel,
}

#[pymethods]
impl CostModel {
    /// The model endpoints made now decide with (the calibration file's,
    /// read once per process, else the built-in defaults).
    #[staticmethod]
    fn current() -> CostModel {
        CostModel {
            m: RsCostModel::current().clone(),
        }
    }

    /// The built-in defaults.
    #[staticmethod]
    fn builtin() -> CostModel {
        CostModel {
            m: RsCostModel::builtin(),
        }
    }

    /// load(path) -> CostModel: read and check a calibration file.
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<CostModel> {
        py.detach(|| RsCostModel::load_from(&path))
            .map(|m| CostModel { m })
            .map_err(load_error)
    }

    /// from_json(text) -> CostModel: parse and check a calibration file's JSON.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<CostModel> {
        RsCostModel::from_json(text)
            .map(|m| CostModel { m })
            .map_err(load_error)
    }

    /// The JSON of a calibration file.
    fn to_json(&self) -> String {
        self.m.to_json()
    }

    /// save(path): write it as a calibration file (atomically).
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| self.m.save(&path)).map_err(|e| {
            let msg = e.to_string();
            let io = e.err;
            PyErr::from(std::io::Error::new(io.kind(), msg))
        })
    }

    /// `"builtin"`, `"file"` or `"measured"`.
    #[getter]
    fn source(&self) -> &'static str {
        self.m.source().kind()
    }

    /// The operation names `cost` takes.
    #[classattr]
    #[allow(non_snake_case)]
    fn OPS() -> Vec<&'static str> {
        Op::ALL.iter().map(|o| o.name()).collect()
    }

    /// cost(op, nbytes) -> float: nanoseconds of one primitive operation.
    fn cost(&self, op: &str, nbytes: usize) -> PyResult<f64> {
        let o = Op::from_name(op).ok_or_else(|| {
            let names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
            PyValueError::new_err(format!(
                "no operation is named {op:?} (one of {})",
                names.join(", ")
            ))
        })?;
        Ok(self.m.cost(o, nbytes))
    }

    /// predict(semantics, nbytes, aligned=True) -> float: nanoseconds of
    /// one transfer end to end.
    #[pyo3(signature = (semantics, nbytes, aligned = true))]
    fn predict(&self, semantics: &str, nbytes: usize, aligned: bool) -> PyResult<f64> {
        Ok(self.m.predict(parse_sem(semantics)?, nbytes, aligned))
    }

    fn __repr__(&self) -> String {
        format!("zcio.CostModel(source={:?})", self.m.source().kind())
    }
}

/// calibration_path() -> str | None: where the calibration file is.
#[pyfunction]
pub fn calibration_path() -> Option<std::ffi::OsString> {
    RsCostModel::calibration_path().map(std::path::PathBuf::into_os_string)
}

/// calibrate(quick=True) -> CostModel: measure this machine.
#[pyfunction]
#[pyo3(signature = (quick = true))]
pub fn calibrate(py: Python<'_>, quick: bool) -> PyResult<CostModel> {
    use zcio::semantics::calibrate::{measure, CalibrateError, Opts};
    // (`Opts` holds a hook that is not `Send`: built inside the detached
    // closure.)
    let r = py.detach(move || {
        let opts = Opts {
            quick,
            ..Default::default()
        };
        measure(&opts, &mut |_| {}).map_err(|e| {
            let errno = match &e {
                CalibrateError::Os { errno, .. } => Some(errno.raw_os_error()),
                _ => None,
            };
            (e.to_string(), errno)
        })
    });
    match r {
        Ok(m) => Ok(CostModel { m }),
        Err((msg, errno)) => Err(errors::err(py, Class::Base, msg, errno)),
    }
}
