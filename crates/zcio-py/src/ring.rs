//! Rings: `RingProducer`, `RingConsumer` and `Peek` (a block read in
//! place through the buffer protocol).
//!
//! The Rust `Peek` borrows its consumer; Python objects cannot hold such a
//! borrow, so a Python `Peek` keeps the block detached
//! ([`zcio::ring::Peek::detach`]) and resumes it for each use. While one
//! is outstanding the consumer refuses to read, peek or seek (which would
//! make it stale), and the consumer — and with it the ring mapping — lives
//! as long as any `Peek` object does, even after `close()`.
//!
//! Under asyncio (`read_async`, `write_async`, `async for`), an end waits
//! on its *named bell* (a datagram socket in the abstract namespace whose
//! number it announces in the ring file) through `zcio._aio`: the peer
//! rings it instead of waking a futex, and every 50 ms the waiter also
//! looks for itself (`doorbell_rang`), since a ring has no connection that
//! hangs up when its peer dies.

use std::ffi::c_int;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use zcio::ring::{
    Consumer, DetachedPeek, Layout, OpenError, Options, Overflow, Producer, ReadError, RingMap,
    SeekTo, Start, Wait, WriteError,
};

use crate::aio::{self, async_timeout};
use crate::array;
use crate::buffer::{self, Exported, SendPtr};
use crate::errors::{self, Class};
use crate::wait::{blocking, seconds_arg, seconds_of, Deadline, Timeout};
use zcio::View;

fn parse_layout(s: &str) -> PyResult<Layout> {
    Ok(match s {
        "continuous" => Layout::Continuous,
        "slotted" => Layout::Slotted,
        "variable" => Layout::Variable,
        "descriptors" => Layout::Descriptors,
        "index" => Layout::Index,
        _ => {
            return Err(PyValueError::new_err(
                "layout must be 'continuous', 'slotted', 'variable', 'descriptors' or 'index'",
            ))
        }
    })
}

fn parse_policy(s: &str) -> PyResult<Overflow> {
    Ok(match s {
        "block" => Overflow::Block,
        "srp" => Overflow::Srp,
        "frp" => Overflow::Frp,
        "mrp" => Overflow::Mrp,
        _ => {
            return Err(PyValueError::new_err(
                "policy must be 'block', 'srp' (drop new data), 'frp' (overwrite) or 'mrp'",
            ))
        }
    })
}

/// Open ring `name` (for attaching), retrying while it does not exist
/// until the deadline.
fn open_map(py: Python<'_>, name: &str, deadline: Deadline) -> PyResult<Arc<RingMap>> {
    let got = blocking(py, deadline, |slice| match RingMap::open(name, true) {
        Err(OpenError::NotFound(_)) => {
            std::thread::sleep(slice.min(Duration::from_millis(5)));
            None
        }
        r => Some(r),
    })?;
    match got {
        Some(r) => r.map_err(|e| errors::raise(py, e)),
        None => Err(errors::raise(py, OpenError::NotFound(name.to_owned()))),
    }
}

/// The error for a named bell that could not be bound.
fn bell_error(py: Python<'_>, e: zcio::Errno) -> PyErr {
    errors::err(
        py,
        Class::Ring,
        format!("cannot bind the ring's doorbell (an abstract Unix datagram socket): {e}"),
        Some(e.raw_os_error()),
    )
}

/// The raw number of a doorbell (it stays the end's until it is dropped).
fn raw_fd(r: Result<BorrowedFd<'_>, zcio::Errno>) -> Result<i32, zcio::Errno> {
    r.map(|fd| fd.as_raw_fd())
}

/// Why a producer call could not go on.
pub(crate) enum Fail {
    /// The producer was closed.
    Closed,
    /// A `RingReservation` is open.
    Reserved,
    /// The write failed.
    Write(WriteError),
}

impl Fail {
    pub(crate) fn raise(self, py: Python<'_>) -> PyErr {
        match self {
            Fail::Closed => errors::closed("ring producer"),
            Fail::Reserved => reserved_error(),
            Fail::Write(e) => errors::raise(py, e),
        }
    }
}

/// The error for a write (or close) while a reservation is open.
pub(crate) fn reserved_error() -> PyErr {
    errors::buffer("a RingReservation of this producer is open: commit() or cancel() it first")
}

/// The producing end of a ring. (Weak references: the asyncio bell refers
/// back to its end without a cycle.)
#[pyclass(module = "zcio._zcio", frozen, weakref)]
pub struct RingProducer {
    inner: Mutex<Option<Producer>>,
    name: String,
    layout: Layout,
    overflow: Overflow,
    size: u64,
    cap: u64,
    /// The named bell's state in asyncio (a `zcio._aio.RingBell`), made by
    /// the first async call.
    bell: PyOnceLock<Py<PyAny>>,
    /// A `RingReservation` is open (set and cleared under `inner`'s lock):
    /// writes and `close` are refused until it is committed or cancelled.
    pub(crate) reserved: AtomicBool,
}

impl RingProducer {
    fn lock(&self) -> PyResult<MutexGuard<'_, Option<Producer>>> {
        self.inner
            .lock()
            .map_err(|_| errors::internal("ring producer lock poisoned"))
    }

    /// Run `f` on the producer with the GIL released (`ValueError` once
    /// closed).
    fn with_producer<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Producer) -> T + Send,
    ) -> PyResult<T> {
        let inner = &self.inner;
        py.detach(|| match inner.lock() {
            Ok(mut g) => g.as_mut().map(f).ok_or(false),
            Err(_) => Err(true),
        })
        .map_err(|poisoned| {
            if poisoned {
                errors::internal("ring producer lock poisoned")
            } else {
                errors::closed("ring producer")
            }
        })
    }

    /// `BufferError` while a reservation is open (call with `inner`
    /// locked).
    fn refuse_if_reserved(&self) -> PyResult<()> {
        if self.reserved.load(Ordering::Acquire) {
            return Err(reserved_error());
        }
        Ok(())
    }

    /// Run `f` on the producer, GIL released, in slices until `deadline`
    /// (each attempt may wait as the `Wait` it is given says): retries
    /// on `WouldBlock`/`TimedOut`; `t` says which of those to raise at the
    /// end.
    pub(crate) fn attempt_until<T: Send>(
        &self,
        py: Python<'_>,
        t: Timeout,
        mut f: impl FnMut(&mut Producer, Wait) -> Result<T, WriteError> + Send,
    ) -> PyResult<T> {
        let inner = &self.inner;
        let reserved = &self.reserved;
        let got = blocking(py, Deadline::new(t), |slice| {
            let Ok(mut g) = inner.lock() else {
                return Some(Err(Fail::Closed));
            };
            let Some(p) = g.as_mut() else {
                return Some(Err(Fail::Closed));
            };
            if reserved.load(Ordering::Acquire) {
                return Some(Err(Fail::Reserved));
            }
            let wait = if slice.is_zero() {
                Wait::No
            } else {
                Wait::Until(Instant::now() + slice)
            };
            match f(p, wait) {
                Err(WriteError::WouldBlock | WriteError::TimedOut) => None,
                r => Some(r.map_err(Fail::Write)),
            }
        })?;
        match got {
            Some(r) => r.map_err(|f| f.raise(py)),
            None if t.is_try() => Err(errors::raise(py, WriteError::WouldBlock)),
            None => Err(errors::raise(py, WriteError::TimedOut)),
        }
    }

    /// The asyncio bell and the timeout of an async write (the named bell
    /// bound now, so one that cannot be bound fails the call, not the
    /// wait; policies other than `block` never wait).
    fn async_wait<'py>(
        slf: &Bound<'py, Self>,
        timeout: Option<f64>,
    ) -> PyResult<(Bound<'py, PyAny>, Option<f64>)> {
        let py = slf.py();
        let me = slf.get();
        let bound = me.with_producer(py, |p| p.wait_bound())?;
        let mut t = async_timeout(timeout, bound)?;
        if me.overflow == Overflow::Block {
            me.with_producer(py, |p| raw_fd(p.doorbell()))?
                .map_err(|e| bell_error(py, e))?;
        } else {
            t = Some(0.0);
        }
        let bell = aio::bell(py, &me.bell, intern!(py, "RingBell"))?;
        Ok((bell, t))
    }

    /// The lock over the producer (for `RingReservation`).
    pub(crate) fn inner(&self) -> &Mutex<Option<Producer>> {
        &self.inner
    }

    /// The piece of a write of `len` bytes that must fit before it goes
    /// on (a byte stream is written in pieces of at most half the ring).
    fn piece(&self, len: usize) -> usize {
        if self.layout == Layout::Continuous {
            len.min((self.cap / 2).max(1) as usize)
        } else {
            len
        }
    }
}

#[pymethods]
impl RingProducer {
    /// RingProducer(name, size=1 MiB, create=True, mode=0o600, policy="block", ...)
    #[new]
    #[pyo3(signature = (name, size=1 << 20, create=true, mode=0o600, policy="block", layout="continuous", slot_size=2048, entries=4096, exclusive=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        name: String,
        size: u64,
        create: bool,
        mode: u32,
        policy: &str,
        layout: &str,
        slot_size: u64,
        entries: u64,
        exclusive: bool,
    ) -> PyResult<Self> {
        let opts = Options::new()
            .layout(parse_layout(layout)?)
            .overflow(parse_policy(policy)?)
            .size(size)
            .slot_size(slot_size)
            .entries(entries)
            .mode(mode);
        let n = name.as_str();
        let p = py
            .detach(|| {
                let map = match (create, exclusive) {
                    (true, true) => opts.create(n)?,
                    (true, false) => opts.create_or_open(n)?,
                    (false, _) => RingMap::open(n, true)?,
                };
                Producer::attach(map)
            })
            .map_err(|e| errors::raise(py, e))?;
        let g = *p.geometry();
        Ok(Self {
            name,
            layout: g.layout,
            overflow: g.overflow,
            size: g.data_len,
            cap: g.cap(),
            inner: Mutex::new(Some(p)),
            bell: PyOnceLock::new(),
            reserved: AtomicBool::new(false),
        })
    }

    /// The ring's name.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// Data area in bytes.
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    /// Data layout ("continuous", "slotted", …).
    #[getter]
    fn layout(&self) -> &'static str {
        self.layout.name()
    }

    /// Overflow policy ("block", "srp", "frp", "mrp").
    #[getter]
    fn policy(&self) -> &'static str {
        self.overflow.name()
    }

    /// The bound (seconds) of the default wait of `write`, `write_async`
    /// and `wait_for_consumers` (`timeout=None`): 10 s unless set;
    /// settable (`math.inf`: no bound, for consumers you trust).
    #[getter]
    fn wait_bound(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(seconds_of(self.with_producer(py, |p| p.wait_bound())?))
    }

    #[setter]
    fn set_wait_bound(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        let d = seconds_arg("wait_bound", seconds)?;
        self.with_producer(py, |p| p.set_wait_bound(d))
    }

    /// write(data, timeout=None, *, tag=0) -> int: `tag` classifies the
    /// block (read back as `Peek.tag`; rings of blocks only).
    #[pyo3(signature = (data, timeout=None, *, tag=0))]
    fn write(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        tag: u32,
    ) -> PyResult<usize> {
        let bound = self.with_producer(py, |p| p.wait_bound())?;
        let t = Timeout::from_py(timeout, bound)?;
        let deadline = Deadline::new(t);
        let src = Exported::get(data, false)?;
        let (base, total) = (SendPtr(src.ptr()), src.len());
        // Continuous rings: pieces of at most half the ring, each written
        // whole or not at all, so a short write can be counted.
        let piece = if self.layout == Layout::Continuous {
            (self.cap / 2).max(1) as usize
        } else {
            total.max(1)
        };
        let inner = &self.inner;
        let reserved = &self.reserved;
        let mut done = 0usize;
        loop {
            let n = piece.min(total - done);
            let at = done;
            let got = blocking(py, deadline, move |slice| {
                let base = base;
                let Ok(mut g) = inner.lock() else {
                    return Some(Err(Fail::Closed));
                };
                let Some(p) = g.as_mut() else {
                    return Some(Err(Fail::Closed));
                };
                if reserved.load(Ordering::Acquire) {
                    return Some(Err(Fail::Reserved));
                }
                // `src` stays exported (valid, not resized) until `write`
                // returns. The object may expose memory a peer can write
                // (a received zcio buffer): read as a volatile view.
                // SAFETY: as argued just above.
                let bytes = unsafe { View::from_raw(base.0.add(at), n) };
                let wait = if slice.is_zero() {
                    Wait::No
                } else {
                    Wait::Until(std::time::Instant::now() + slice)
                };
                match p.write_gather(&[bytes], tag, wait) {
                    Err(WriteError::WouldBlock | WriteError::TimedOut) => None,
                    r => Some(r.map(|()| n).map_err(Fail::Write)),
                }
            })?;
            match got {
                Some(Ok(k)) => done += k,
                Some(Err(f)) => return Err(f.raise(py)),
                None if done > 0 => return Ok(done),
                None if t.is_try() => return Err(errors::raise(py, WriteError::WouldBlock)),
                None => return Err(errors::raise(py, WriteError::TimedOut)),
            }
            if done >= total || self.layout != Layout::Continuous {
                drop(src);
                return Ok(done);
            }
        }
    }

    /// write_gather(parts, timeout=None, *, tag=0) -> int: write the
    /// bytes-like `parts`, one after the other, as ONE block with `tag`
    /// (no join in Python first); returns its length. Waits as `write`.
    #[pyo3(signature = (parts, timeout=None, *, tag=0))]
    fn write_gather(
        &self,
        py: Python<'_>,
        parts: &Bound<'_, PyAny>,
        timeout: Option<f64>,
        tag: u32,
    ) -> PyResult<usize> {
        let bound = self.with_producer(py, |p| p.wait_bound())?;
        let t = Timeout::from_py(timeout, bound)?;
        let mut exported = Vec::new();
        for part in parts.try_iter()? {
            exported.push(Exported::get(&part?, false)?);
        }
        let spans: Vec<(SendPtr, usize)> = exported
            .iter()
            .map(|e| (SendPtr(e.ptr()), e.len()))
            .collect();
        let total: usize = spans.iter().map(|s| s.1).sum();
        let spans = &spans;
        let n = self.attempt_until(py, t, move |p, wait| {
            // Each part stays exported (valid, not resized) until
            // `exported` is dropped at the end of this function; the
            // bytes may be writable by others, so they are read as
            // volatile views.
            let views: Vec<View<'_>> = spans
                .iter()
                // SAFETY: as argued just above.
                .map(|(ptr, len)| unsafe { View::from_raw(ptr.0, *len) })
                .collect();
            p.write_gather(&views, tag, wait).map(|()| total)
        })?;
        drop(exported);
        Ok(n)
    }

    /// splice(peek, timeout=None): write the block `peek` holds (of a
    /// `RingConsumer` of another ring) into this ring: in an `"index"`
    /// ring a pointer to it (no bytes copied; the only write an index
    /// ring takes), in any other a copy of its bytes with its tag. Waits
    /// as `write`. The peek stays held (release it as usual).
    #[pyo3(signature = (peek, timeout=None))]
    fn splice(&self, py: Python<'_>, peek: &Bound<'_, Peek>, timeout: Option<f64>) -> PyResult<()> {
        let bound = self.with_producer(py, |p| p.wait_bound())?;
        let t = Timeout::from_py(timeout, bound)?;
        let pk = peek.get();
        let mut stash: Option<PyErr> = None;
        let stash_ref = &mut stash;
        self.attempt_until(py, t, move |p, wait| {
            match pk.with_block(|b| p.splice(b, wait)) {
                Ok(r) => r,
                Err(e) => {
                    *stash_ref = Some(e);
                    Ok(())
                }
            }
        })?;
        match stash {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// reserve(n, timeout=None) -> RingReservation: room for a block of up
    /// to `n` bytes, straight in the ring: fill it through the buffer
    /// protocol (`memoryview(r)`, `numpy.frombuffer`, `readinto`), then
    /// `r.commit(nbytes, tag=0)` publishes the first `nbytes`; nothing is
    /// visible to consumers before. While it is open this producer's
    /// writes and `close()` raise `BufferError`. Waits as `write`. Not for
    /// index rings.
    #[pyo3(signature = (n, timeout=None))]
    fn reserve(
        slf: &Bound<'_, Self>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<crate::reservation::RingReservation> {
        let py = slf.py();
        let me = slf.get();
        if n == 0 {
            return Err(PyValueError::new_err("reserve at least 1 byte"));
        }
        let bound = me.with_producer(py, |p| p.wait_bound())?;
        let t = Timeout::from_py(timeout, bound)?;
        let reserved = &me.reserved;
        let held = me.attempt_until(py, t, move |p, wait| {
            let held = p.reserve(n, wait)?.detach();
            // Under the producer's lock: no other write starts until the
            // reservation is committed or cancelled.
            reserved.store(true, Ordering::Release);
            Ok(held)
        })?;
        Ok(crate::reservation::RingReservation::new(
            slf.clone().unbind(),
            held,
        ))
    }

    /// await write_async(data, timeout=None) -> int: write as `write` does,
    /// waiting in the running asyncio loop (on the producer's named bell,
    /// `loop.add_reader`) while a `block` ring has no room, without
    /// blocking it. The slowest consumer rings the bell when it makes room;
    /// every 50 ms the call also looks for itself (evicting a consumer
    /// that died). The other policies never wait. `timeout` as for `write`
    /// (a byte stream written part-way when it runs out returns the count).
    /// Cancel-safe for a write of one piece (a block, or at most half of a
    /// continuous ring): written if the await returned, not at all if it
    /// was cancelled; a longer byte-stream write cancelled part-way has
    /// written its first pieces (whole). `tag` as for `write`.
    #[pyo3(signature = (data, timeout=None, *, tag=0))]
    fn write_async<'py>(
        slf: &Bound<'py, Self>,
        data: &Bound<'py, PyAny>,
        timeout: Option<f64>,
        tag: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let (bell, t) = Self::async_wait(slf, timeout)?;
        aio::call(py, intern!(py, "ring_write"), (slf, bell, data, t, tag))
    }

    /// await reserve_async(n, timeout=None) -> RingReservation: reserve as
    /// `reserve` does, waiting in the running asyncio loop (as
    /// `write_async` waits) while a `block` ring has no room. Cancel-safe:
    /// the reservation is taken synchronously, so a cancelled call holds
    /// none.
    #[pyo3(signature = (n, timeout=None))]
    fn reserve_async<'py>(
        slf: &Bound<'py, Self>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let (bell, t) = Self::async_wait(slf, timeout)?;
        aio::call(py, intern!(py, "ring_reserve"), (slf, bell, n, t))
    }

    /// The asyncio bell (a `zcio._aio.RingBell`) once an async call made
    /// it, else None (for tests).
    #[getter]
    fn _aio_bell(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.bell.get(py).map(|b| b.clone_ref(py))
    }

    /// doorbell() -> int: the producer's named bell, for an event loop of
    /// your own: readable when a consumer rang it (after
    /// `prepare_write_sleep` said to sleep and that consumer made room).
    /// Bound and announced in the ring on the first call; consumers then
    /// ring it instead of waking a futex. It belongs to the producer (do
    /// not close it) and closes with it. Wait until it is readable or 50 ms
    /// passed, whichever comes first, then call `doorbell_rang()`.
    fn doorbell(&self, py: Python<'_>) -> PyResult<i32> {
        self.with_producer(py, |p| raw_fd(p.doorbell()))?
            .map_err(|e| bell_error(py, e))
    }

    /// prepare_write_sleep(nbytes) -> bool: say "about to sleep until a
    /// write of `nbytes` bytes fits" (flags the slowest consumer's cursor,
    /// so its next release rings the bell). False: it fits now (or the
    /// policy never waits) -- write again. Byte streams: the first piece
    /// of the write (at most half the ring) must fit. Raises what the write
    /// would (`ValueError` for a block too large for the ring).
    fn prepare_write_sleep(&self, py: Python<'_>, nbytes: usize) -> PyResult<bool> {
        let n = self.piece(nbytes);
        self.with_producer(py, |p| p.prepare_write_sleep(n))?
            .map_err(|e| errors::raise(py, e))
    }

    /// doorbell_rang(): after the bell was readable or 50 ms passed: take
    /// the rings, clear the sleep flag, evict the consumer waited for if its
    /// process died. Then write again.
    fn doorbell_rang(&self, py: Python<'_>) -> PyResult<()> {
        self.with_producer(py, Producer::doorbell_rang)
    }

    /// Live consumers attached now (dead ones are evicted).
    fn consumers(&self, py: Python<'_>) -> PyResult<usize> {
        let inner = &self.inner;
        py.detach(|| match inner.lock() {
            Ok(mut g) => g.as_mut().map(Producer::live_consumers).ok_or(()),
            Err(_) => Err(()),
        })
        .map_err(|()| errors::closed("ring producer"))
    }

    /// wait_for_consumers(n, timeout=None) -> int
    #[pyo3(signature = (n, timeout=None))]
    fn wait_for_consumers(
        &self,
        py: Python<'_>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<usize> {
        let bound = self.with_producer(py, |p| p.wait_bound())?;
        let deadline = Deadline::new(Timeout::from_py(timeout, bound)?);
        let inner = &self.inner;
        let mut last = 0;
        let got = blocking(py, deadline, |slice| {
            let Ok(mut g) = inner.lock() else {
                return Some(Err(()));
            };
            let p = g.as_mut()?;
            last = p.wait_for_consumers(n, slice);
            (last >= n).then_some(Ok(last))
        })?;
        match got {
            Some(Ok(k)) => Ok(k),
            Some(Err(())) => Err(errors::closed("ring producer")),
            None => Ok(last),
        }
    }

    /// stats() -> dict: the live counters (what the producer's registry
    /// entry shows to ``zcio ls``): blocks, bytes, would_block, timed_out,
    /// consumers, head (cursor units), capacity_bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = match self.lock()?.as_ref() {
            Some(p) => p.stats(),
            None => return Err(errors::closed("ring producer")),
        };
        let d = PyDict::new(py);
        d.set_item("blocks", s.blocks)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("would_block", s.would_block)?;
        d.set_item("timed_out", s.timed_out)?;
        d.set_item("consumers", s.consumers)?;
        d.set_item("head", s.head)?;
        d.set_item("capacity_bytes", s.capacity_bytes)?;
        Ok(d)
    }

    /// The ring file's descriptor (for fstat/flock; not a readiness signal).
    fn fileno(&self) -> PyResult<i32> {
        let g = self.lock()?;
        match g.as_ref() {
            Some(p) => Ok(p.ring().fd().as_raw_fd()),
            None => Err(errors::closed("ring producer")),
        }
    }

    /// close(): end the stream; consumers read what is left, then see the
    /// end (``b""`` / ``None``). Tasks awaiting `write_async` get
    /// `ValueError` (closed).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut g = self.lock()?;
        self.refuse_if_reserved()?;
        g.take();
        drop(g);
        aio::closed(py, &self.bell);
        Ok(())
    }

    /// close_with_error(code): end the stream with an error code that
    /// consumers receive (``Disconnected`` with ``.code``).
    fn close_with_error(&self, py: Python<'_>, code: u32) -> PyResult<()> {
        let mut g = self.lock()?;
        self.refuse_if_reserved()?;
        if let Some(p) = g.take() {
            p.close_with_error(code);
        }
        aio::closed(py, &self.bell);
        Ok(())
    }

    /// unlink(): remove the ring's name (attached processes keep using it).
    fn unlink(&self, py: Python<'_>) -> PyResult<()> {
        zcio::ring::unlink(&self.name).map_err(|e| errors::raise(py, e))
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "zcio.RingProducer({:?}, size={}, layout={:?}, policy={:?})",
            self.name,
            self.size,
            self.layout.name(),
            self.overflow.name()
        )
    }
}

/// A consumer and what hangs on it.
struct ConsState {
    /// `None` once closed and no `Peek` object is left.
    cons: Option<Consumer>,
    /// A detached peek is outstanding (reads would make it stale).
    peek_out: bool,
    /// `Peek` objects alive (their memory is in this consumer's mappings).
    peeks_alive: usize,
    closed: bool,
}

impl ConsState {
    fn drop_if_done(&mut self) {
        if self.closed && self.peeks_alive == 0 {
            self.cons = None;
        }
    }
}

/// Why a consumer operation could not run.
enum Refused {
    Closed,
    PeekOutstanding,
    Poisoned,
    Read(ReadError),
}

fn refused(py: Python<'_>, r: Refused) -> PyErr {
    match r {
        Refused::Closed => errors::closed("ring consumer"),
        Refused::PeekOutstanding => errors::err(
            py,
            Class::Ring,
            "a peeked block is outstanding: release() it first",
            None,
        ),
        Refused::Poisoned => errors::internal("ring consumer lock poisoned"),
        Refused::Read(e) => errors::raise(py, e),
    }
}

/// Run `f` on the consumer unless it is closed or a peek is outstanding.
fn with_consumer<T>(
    st: &Mutex<ConsState>,
    f: impl FnOnce(&mut ConsState) -> T,
) -> Result<T, Refused> {
    let mut g = st.lock().map_err(|_| Refused::Poisoned)?;
    if g.closed || g.cons.is_none() {
        return Err(Refused::Closed);
    }
    if g.peek_out {
        return Err(Refused::PeekOutstanding);
    }
    Ok(f(&mut g))
}

/// A consuming end of a ring. (Weak references: the asyncio bell refers
/// back to its end without a cycle.)
#[pyclass(module = "zcio._zcio", frozen, weakref)]
pub struct RingConsumer {
    st: Arc<Mutex<ConsState>>,
    name: String,
    /// The named bell's state in asyncio (a `zcio._aio.RingBell`), made by
    /// the first async call.
    bell: PyOnceLock<Py<PyAny>>,
}

/// What one read attempt gave.
type Attempt<T> = Option<Result<T, Refused>>;

/// Turn a read result into an attempt (`None`: nothing yet).
fn attempt<T>(r: Result<T, ReadError>) -> Attempt<T> {
    match r {
        Err(ReadError::WouldBlock | ReadError::TimedOut) => None,
        r => Some(r.map_err(Refused::Read)),
    }
}

impl RingConsumer {
    /// Run `f` on the consumer with the GIL released, unless it is closed
    /// (a peek may be outstanding: the doorbell calls do not move the
    /// cursor).
    fn with_cons<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Consumer) -> T + Send,
    ) -> PyResult<T> {
        let st = &*self.st;
        py.detach(|| {
            let mut g = st.lock().map_err(|_| Refused::Poisoned)?;
            if g.closed {
                return Err(Refused::Closed);
            }
            g.cons.as_mut().map(f).ok_or(Refused::Closed)
        })
        .map_err(|r| refused(py, r))
    }

    /// The consumer's `zcio._aio.RingBell`, its named bell bound (so that
    /// a bell that cannot be bound fails the call, not the wait).
    fn async_bell<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.with_cons(py, |c| raw_fd(c.doorbell()))?
            .map_err(|e| bell_error(py, e))?;
        aio::bell(py, &self.bell, intern!(py, "RingBell"))
    }

    /// The consumer's wait bound (`timeout=None`).
    fn bound(&self, py: Python<'_>) -> PyResult<Duration> {
        self.with_cons(py, |c| c.wait_bound())
    }

    /// Finish a waiting read: the value, or the error for nothing in time.
    fn finish<T>(py: Python<'_>, got: Option<Result<T, Refused>>, t: Timeout) -> PyResult<T> {
        match got {
            Some(Ok(v)) => Ok(v),
            Some(Err(r)) => Err(refused(py, r)),
            None if t.is_try() => Err(errors::raise(py, ReadError::WouldBlock)),
            None => Err(errors::raise(py, ReadError::TimedOut)),
        }
    }
}

#[pymethods]
impl RingConsumer {
    /// RingConsumer(name, start="newest", timeout=0): `timeout` waits for
    /// the ring to appear (`None`: up to a consumer's default wait bound,
    /// one hour).
    #[new]
    #[pyo3(signature = (name, start="newest", timeout=0.0))]
    fn new(py: Python<'_>, name: String, start: &str, timeout: Option<f64>) -> PyResult<Self> {
        let start = match start {
            "newest" => Start::Newest,
            "oldest" => Start::Oldest,
            _ => return Err(PyValueError::new_err("start must be 'newest' or 'oldest'")),
        };
        let t = Timeout::from_py(timeout, zcio::ring::Consumer::DEFAULT_WAIT_BOUND)?;
        let map = open_map(py, &name, Deadline::new(t))?;
        let cons = py
            .detach(|| Consumer::attach(map, start))
            .map_err(|e| errors::raise(py, e))?;
        Ok(Self {
            st: Arc::new(Mutex::new(ConsState {
                cons: Some(cons),
                peek_out: false,
                peeks_alive: 0,
                closed: false,
            })),
            name,
            bell: PyOnceLock::new(),
        })
    }

    /// The ring's name.
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    /// The bound (seconds) of the default wait of `read`, `readinto`,
    /// `peek`, their async forms and `async for` (`timeout=None`): one hour
    /// unless set; settable (`math.inf`: no bound, for a producer you
    /// trust).
    #[getter]
    fn wait_bound(&self, py: Python<'_>) -> PyResult<f64> {
        Ok(seconds_of(self.bound(py)?))
    }

    #[setter]
    fn set_wait_bound(&self, py: Python<'_>, seconds: f64) -> PyResult<()> {
        let d = seconds_arg("wait_bound", seconds)?;
        self.with_cons(py, |c| c.set_wait_bound(d))
    }

    /// read(n, timeout=None) -> bytes (``b""`` at the end of the stream)
    #[pyo3(signature = (n, timeout=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let t = Timeout::from_py(timeout, self.bound(py)?)?;
        let mut buf = vec![0u8; n];
        let st = &*self.st;
        let got = blocking(py, Deadline::new(t), |slice| {
            let b = &mut buf;
            let r = with_consumer(st, |g| {
                let c = g.cons.as_mut().expect("checked by with_consumer");
                if slice.is_zero() {
                    c.try_read(b)
                } else {
                    c.read_timeout(b, slice)
                }
            });
            match r {
                Ok(r) => attempt(r),
                Err(e) => Some(Err(e)),
            }
        })?;
        let k = Self::finish(py, got, t)?;
        Ok(PyBytes::new(py, &buf[..k]))
    }

    /// readinto(buf, timeout=None) -> int (0 at the end of the stream)
    #[pyo3(signature = (buf, timeout=None))]
    fn readinto(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<usize> {
        let t = Timeout::from_py(timeout, self.bound(py)?)?;
        let dst = Exported::get(buf, true)?;
        let (p, n) = (SendPtr(dst.ptr()), dst.len());
        let st = &*self.st;
        let got = blocking(py, Deadline::new(t), move |slice| {
            let p = p;
            // `dst` is exported writable (valid, not resized) until
            // `readinto` returns, and nothing else in Rust refers to it.
            // SAFETY: as argued just above.
            let b = unsafe { std::slice::from_raw_parts_mut(p.0, n) };
            let r = with_consumer(st, |g| {
                let c = g.cons.as_mut().expect("checked by with_consumer");
                if slice.is_zero() {
                    c.try_read(b)
                } else {
                    c.read_timeout(b, slice)
                }
            });
            match r {
                Ok(r) => attempt(r),
                Err(e) => Some(Err(e)),
            }
        })?;
        let k = Self::finish(py, got, t)?;
        drop(dst);
        Ok(k)
    }

    /// peek(max=None, timeout=None) -> Peek | None (None at the end)
    #[pyo3(signature = (max=None, timeout=None))]
    fn peek(
        &self,
        py: Python<'_>,
        max: Option<usize>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Peek>> {
        let t = Timeout::from_py(timeout, self.bound(py)?)?;
        let max = max.unwrap_or(usize::MAX);
        let st = &*self.st;
        let got = blocking(py, Deadline::new(t), |slice| {
            let r = with_consumer(st, |g| {
                let c = g.cons.as_mut().expect("checked by with_consumer");
                let wait = if slice.is_zero() {
                    Wait::No
                } else {
                    Wait::Until(Instant::now() + slice)
                };
                match c.peek_detached(max, wait) {
                    Ok(Some(d)) => {
                        let (ptr, len, tag) = (d.addr() as usize, d.len(), d.tag());
                        g.peek_out = true;
                        g.peeks_alive += 1;
                        Ok(Some((d, ptr, len, tag)))
                    }
                    Ok(None) => Ok(None),
                    Err(e) => Err(e),
                }
            });
            match r {
                Ok(r) => attempt(r),
                Err(e) => Some(Err(e)),
            }
        })?;
        Ok(Self::finish(py, got, t)?.map(|(d, ptr, len, tag)| Peek {
            st: self.st.clone(),
            held: Mutex::new(Some(d)),
            ptr,
            len,
            tag,
            exports: AtomicUsize::new(0),
        }))
    }

    /// await read_async(n, timeout=None) -> bytes: the next block as
    /// `read` gives it (``b""`` at the end of the stream), waiting in the
    /// running asyncio loop on the consumer's named bell
    /// (`loop.add_reader`) without blocking it; the producer rings the bell
    /// when it publishes. Every 50 ms the call also looks for itself: a
    /// producer that died in the middle of the stream raises `Disconnected`
    /// within that bound. `timeout` and exceptions as for `read`.
    /// Cancel-safe: a block is only ever taken synchronously, so a
    /// cancelled call took none (the next read gets it).
    #[pyo3(signature = (n, timeout=None))]
    fn read_async<'py>(
        slf: &Bound<'py, Self>,
        n: usize,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = async_timeout(timeout, slf.get().bound(py)?)?;
        let bell = slf.get().async_bell(py)?;
        let op = slf.getattr(intern!(py, "read"))?;
        let op = py
            .import(intern!(py, "functools"))?
            .getattr(intern!(py, "partial"))?
            .call1((op, n, 0))?;
        aio::call(
            py,
            intern!(py, "ring_wait"),
            (slf, bell, op, t, intern!(py, "read_async")),
        )
    }

    /// await readinto_async(buf, timeout=None) -> int: `readinto` in the
    /// running asyncio loop (``0`` at the end of the stream); as
    /// `read_async`. Cancel-safe (`buf` may have been written, but no
    /// block was consumed unless the await returned).
    #[pyo3(signature = (buf, timeout=None))]
    fn readinto_async<'py>(
        slf: &Bound<'py, Self>,
        buf: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = async_timeout(timeout, slf.get().bound(py)?)?;
        // Checked at the call: a writable buffer.
        drop(Exported::get(buf, true)?);
        let bell = slf.get().async_bell(py)?;
        let op = slf.getattr(intern!(py, "readinto"))?;
        let op = py
            .import(intern!(py, "functools"))?
            .getattr(intern!(py, "partial"))?
            .call1((op, buf, 0))?;
        aio::call(
            py,
            intern!(py, "ring_wait"),
            (slf, bell, op, t, intern!(py, "readinto_async")),
        )
    }

    /// await peek_async(max=None, timeout=None) -> Peek | None: `peek` in
    /// the running asyncio loop (``None`` at the end of the stream); as
    /// `read_async`. Cancel-safe: the cursor moves only when the returned
    /// `Peek` is released.
    #[pyo3(signature = (max=None, timeout=None))]
    fn peek_async<'py>(
        slf: &Bound<'py, Self>,
        max: Option<usize>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = async_timeout(timeout, slf.get().bound(py)?)?;
        let bell = slf.get().async_bell(py)?;
        let op = slf.getattr(intern!(py, "peek"))?;
        let op = py
            .import(intern!(py, "functools"))?
            .getattr(intern!(py, "partial"))?
            .call1((op, max, 0))?;
        aio::call(
            py,
            intern!(py, "ring_wait"),
            (slf, bell, op, t, intern!(py, "peek_async")),
        )
    }

    /// `async for block in consumer`: every block as bytes (one block of a
    /// block ring; what is there, contiguous, of a byte stream) until the
    /// end of the stream, when the loop ends. A producer that died in the
    /// middle of the stream or closed it with an error raises
    /// `Disconnected` (with `.pid`, `.code`) after everything it wrote.
    /// Each block is waited for up to `wait_bound` (`TimedOut` ends the
    /// loop). Cancel-safe, as `read_async`.
    fn __aiter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __anext__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let t = async_timeout(None, slf.get().bound(py)?)?;
        let bell = slf.get().async_bell(py)?;
        aio::call(py, intern!(py, "ring_next"), (slf, bell, t))
    }

    /// The asyncio bell (a `zcio._aio.RingBell`) once an async call made
    /// it, else None (for tests).
    #[getter]
    fn _aio_bell(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.bell.get(py).map(|b| b.clone_ref(py))
    }

    /// doorbell() -> int: the consumer's named bell, for an event loop of
    /// your own: readable when the producer rang it (after
    /// `prepare_read_sleep` said to sleep and the producer published, or
    /// closed the ring). Bound and announced in the ring on the first call;
    /// it belongs to the consumer (do not close it) and closes with it. A
    /// ring cannot hang up on a dead producer: wait until the bell is
    /// readable *or 50 ms passed*, whichever comes first, then call
    /// `doorbell_rang()`. (`fileno()` is this fd too, re-armed by every
    /// read that finds nothing.)
    fn doorbell(&self, py: Python<'_>) -> PyResult<i32> {
        self.with_cons(py, |c| raw_fd(c.doorbell()))?
            .map_err(|e| bell_error(py, e))
    }

    /// prepare_read_sleep() -> bool: say "about to sleep until the producer
    /// publishes" (arms the bell, so the producer's next publish rings it).
    /// False: something came meanwhile -- read it instead of sleeping. The
    /// loop: `read(n, timeout=0)`; on `Empty`, `prepare_read_sleep()`; if
    /// True, wait until `doorbell()` is readable or 50 ms passed, call
    /// `doorbell_rang()`; start over.
    fn prepare_read_sleep(&self, py: Python<'_>) -> PyResult<bool> {
        self.with_cons(py, Consumer::prepare_read_sleep)
    }

    /// doorbell_rang(): after the bell was readable or 50 ms passed: take
    /// the rings and, if nothing new came, check the producer: raises
    /// `Disconnected` (with `.pid`) if it died in the middle of the stream.
    fn doorbell_rang(&self, py: Python<'_>) -> PyResult<()> {
        self.with_cons(py, Consumer::doorbell_rang)?
            .map_err(|e| errors::raise(py, e))
    }

    /// seek(to) -> int: "newest", "oldest", or a relative distance (blocks
    /// for block rings, bytes for continuous ones; negative goes back).
    fn seek(&self, py: Python<'_>, to: &Bound<'_, PyAny>) -> PyResult<u64> {
        let to = if let Ok(s) = to.extract::<String>() {
            match s.as_str() {
                "newest" => SeekTo::Newest,
                "oldest" => SeekTo::Oldest,
                _ => {
                    return Err(PyValueError::new_err(
                        "seek to 'newest', 'oldest' or an int",
                    ))
                }
            }
        } else if let Ok(n) = py
            .import(intern!(py, "operator"))?
            .call_method1(intern!(py, "index"), (to,))
        {
            // An int (or anything with `__index__`) of magnitude below
            // 2**64; the ring clamps the distance to what it holds.
            if let Ok(k) = n.extract::<u64>() {
                SeekTo::Forward(k)
            } else if let Ok(k) = n.neg()?.extract::<u64>() {
                SeekTo::Backward(k)
            } else {
                return Err(PyOverflowError::new_err(format!(
                    "seek distance {n} is out of range: give at most 2**64 - 1 either way \
                     (the cursor stops at the newest or oldest data), or 'newest' / 'oldest'"
                )));
            }
        } else {
            return Err(PyTypeError::new_err("seek to 'newest', 'oldest' or an int"));
        };
        with_consumer(&self.st, |g| {
            g.cons.as_mut().expect("checked by with_consumer").seek(to)
        })
        .and_then(|r| r.map_err(Refused::Read))
        .map_err(|r| refused(py, r))
    }

    /// The cursor (bytes for continuous rings, else cursor units).
    #[getter]
    fn position(&self, py: Python<'_>) -> PyResult<u64> {
        let g = self
            .st
            .lock()
            .map_err(|_| errors::internal("lock poisoned"))?;
        match g.cons.as_ref() {
            Some(c) if !g.closed => Ok(c.position()),
            _ => Err(refused(py, Refused::Closed)),
        }
    }

    /// stats() -> dict
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (s, position) = {
            let mut g = self
                .st
                .lock()
                .map_err(|_| errors::internal("lock poisoned"))?;
            match g.cons.as_mut() {
                Some(c) => (c.stats(), c.position()),
                None => return Err(refused(py, Refused::Closed)),
            }
        };
        let d = PyDict::new(py);
        d.set_item("would_block", s.would_block)?;
        d.set_item("timed_out", s.timed_out)?;
        d.set_item("position", position)?;
        d.set_item("read_blocks", s.read_blocks)?;
        d.set_item("read_bytes", s.read_bytes)?;
        d.set_item("skipped_blocks", s.skipped_blocks)?;
        d.set_item("skipped_units", s.skipped_units)?;
        d.set_item("drops", s.drops)?;
        d.set_item("lag", s.lag)?;
        Ok(d)
    }

    /// fileno() -> int: a descriptor readable while the ring has news for
    /// this consumer (data or the end of the stream), for `select`/`poll`/
    /// `selectors`: poll it, then read with ``timeout=0`` until
    /// ``zcio.Empty``, which re-arms it. It is the consumer's doorbell (the
    /// fd `doorbell()` returns; it belongs to the consumer: do not close or
    /// read it), in a mode where every read or peek that finds nothing does
    /// `doorbell_rang()` and `prepare_read_sleep()` itself. It may be
    /// readable with nothing behind it (then the read raises `Empty`). A
    /// producer that dies never rings it: poll with a timeout (50 ms) and
    /// call `doorbell_rang()` when it passes to learn of one.
    fn fileno(&self, py: Python<'_>) -> PyResult<i32> {
        self.with_cons(py, |c| raw_fd(c.auto_doorbell()))?
            .map_err(|e| bell_error(py, e))
    }

    /// close(): leave the ring (kept until the last Peek object is gone).
    /// Tasks awaiting this consumer get `ValueError` (closed).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        {
            let mut g = self
                .st
                .lock()
                .map_err(|_| errors::internal("lock poisoned"))?;
            g.closed = true;
            g.drop_if_done();
        }
        aio::closed(py, &self.bell);
        Ok(())
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("zcio.RingConsumer({:?})", self.name)
    }
}

/// A ring block read in place.
///
/// Once released the block is no longer this object's: the consumer has
/// moved past it and, on overwriting rings, the producer writes newer
/// blocks there. So every way to reach the bytes — the buffer protocol,
/// `len()`, `tobytes()`, `is_intact()` — raises `ValueError` after
/// `release()`, and `release()` itself is refused (`BufferError`) while a
/// view exported before it (memoryview, numpy array …) is alive: views
/// never outlive the peek. `exports` changes only under the `held` lock, so
/// the check in `release()` and a new export cannot cross.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct Peek {
    st: Arc<Mutex<ConsState>>,
    /// `None` once released.
    held: Mutex<Option<DetachedPeek>>,
    /// The block's bytes: inside the consumer's mappings, which live as
    /// long as this object (see `ConsState::peeks_alive`).
    ptr: usize,
    len: usize,
    tag: u32,
    /// Buffer-protocol views alive (incremented under `held`).
    exports: AtomicUsize,
}

/// The error for using a peek after `release()`.
fn peek_released() -> PyErr {
    PyValueError::new_err(
        "the peeked block was released: its bytes may belong to newer data now \
         (copy what you need, e.g. with tobytes(), before release())",
    )
}

impl Peek {
    /// The detached block (`None` once released), locked.
    fn lock_held(&self) -> PyResult<MutexGuard<'_, Option<DetachedPeek>>> {
        self.held
            .lock()
            .map_err(|_| errors::internal("lock poisoned"))
    }

    /// Resume the detached block, run `f` on it, and set it aside again.
    fn with_block<T>(&self, f: impl FnOnce(&zcio::ring::Peek<'_>) -> T) -> PyResult<T> {
        let mut held = self.lock_held()?;
        let d = held.take().ok_or_else(peek_released)?;
        let mut g = self
            .st
            .lock()
            .map_err(|_| errors::internal("lock poisoned"))?;
        let c = g
            .cons
            .as_mut()
            .ok_or_else(|| errors::internal("consumer gone under a peek"))?;
        let r = match c.resume(d) {
            Ok(pk) => {
                let v = f(&pk);
                *held = Some(pk.detach());
                Ok(v)
            }
            Err(d) => {
                *held = Some(d);
                Err(errors::internal("stale peek"))
            }
        };
        r
    }
}

impl Drop for Peek {
    fn drop(&mut self) {
        let d = self.held.get_mut().ok().and_then(Option::take);
        if let Ok(mut g) = self.st.lock() {
            if let Some(d) = d {
                if let Some(c) = g.cons.as_mut() {
                    if let Ok(pk) = c.resume(d) {
                        let _ = pk.release();
                    }
                }
                g.peek_out = false;
            }
            g.peeks_alive = g.peeks_alive.saturating_sub(1);
            g.drop_if_done();
        }
    }
}

#[pymethods]
impl Peek {
    /// The block's length (`ValueError` once released).
    fn __len__(&self) -> PyResult<usize> {
        self.lock_held()?.as_ref().ok_or_else(peek_released)?;
        Ok(self.len)
    }

    /// The block's classification tag.
    #[getter]
    fn tag(&self) -> u32 {
        self.tag
    }

    /// Always True: any process attached to the ring can write these bytes,
    /// and overwriting rings do. Copy out what you keep, then release().
    #[getter]
    fn volatile(&self) -> bool {
        true
    }

    /// Whether release() was called.
    #[getter]
    fn released(&self) -> PyResult<bool> {
        Ok(self.lock_held()?.is_none())
    }

    /// Whether the producer has not (yet) overwritten the block.
    fn is_intact(&self) -> PyResult<bool> {
        self.with_block(|pk| pk.is_intact())
    }

    /// tobytes() -> bytes: a copy (check release() afterwards on
    /// overwriting rings).
    fn tobytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.with_block(|pk| pk.to_vec())?;
        Ok(PyBytes::new(py, &v))
    }

    /// array() -> numpy.ndarray: the array a `send_array` message carried
    /// into this block (a Zenoh bridge imports one as the header then the
    /// payload, the layout `recv_array` reads), read-only, in place. The
    /// header is copied out of the block and validated first (the ring's
    /// producer can write the block); `MalformedMessage` when the block
    /// does not hold a valid array. The array's `.base` is a `PeekView`,
    /// which counts as a view of this block: `release()` is refused while
    /// the array lives, and the block stays this peek's (the consumer does
    /// not move on) until the array and the peek are gone.
    fn array<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let me = slf.get();
        // Pin the block first (an export, counted under `held` as in
        // `__getbuffer__`), so everything below reads this block.
        let view = {
            let held = me.lock_held()?;
            if held.is_none() {
                return Err(peek_released());
            }
            me.exports.fetch_add(1, Ordering::AcqRel);
            drop(held);
            PeekView {
                peek: slf.clone().unbind(),
                ptr: me.ptr,
                len: me.len,
            }
        };
        let view = Bound::new(py, view)?;
        let bad = |text: String| array::malformed(py, text);
        // The block lies in the consumer's mappings, which live as long as
        // the peek object (`view` holds it), and stays this peek's while
        // `view` counts as an export. The producer may still write it: it
        // is read only through a volatile `View`, into private copies.
        // SAFETY: as argued just above.
        let block = unsafe { View::from_raw(me.ptr as *const u8, me.len) };
        let mut fixed = [0u8; array::FIXED];
        if block.read_at(0, &mut fixed) < array::FIXED {
            return Err(bad(format!(
                "block of {} bytes is too short for an array header",
                me.len
            )));
        }
        let hl = array::Header::announced_len(&fixed).map_err(|e| bad(e.0))?;
        if hl > me.len {
            return Err(bad("array header longer than the block".into()));
        }
        let mut h = vec![0u8; hl];
        block.read_at(0, &mut h);
        let hdr = array::Header::decode(&h, me.len).map_err(|e| bad(e.0))?;
        let dtype = array::checked_dtype(py, &hdr)?;
        array::ndarray_over(py, &hdr, dtype, view.into_any(), hdr.payload_off)
    }

    /// release(): done with the block; the consumer moves past it. Raises
    /// zcio.Lapped if it was overwritten meanwhile (what was read from it
    /// is not valid), BufferError while views of it are exported.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        let mut held = self.lock_held()?;
        // Under `held`: no view can be exported between this check and
        // the release.
        if self.exports.load(Ordering::Acquire) > 0 {
            return Err(errors::buffer(
                "views of this peeked block still exist (memoryview, numpy array …); drop them first",
            ));
        }
        let Some(d) = held.take() else {
            return Ok(());
        };
        let mut g = self
            .st
            .lock()
            .map_err(|_| errors::internal("lock poisoned"))?;
        g.peek_out = false;
        let c = g
            .cons
            .as_mut()
            .ok_or_else(|| errors::internal("consumer gone under a peek"))?;
        let r = match c.resume(d) {
            Ok(pk) => pk.release().map_err(|e| errors::raise(py, e)),
            Err(_) => Err(errors::internal("stale peek")),
        };
        r
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        if self.exports.load(Ordering::Acquire) > 0 {
            // Views escaped the block: the block is released when this
            // object goes.
            return Ok(false);
        }
        match self.release(py) {
            // An exception already propagates: do not mask it.
            Err(_) if !exc_type.is_none() => Ok(false),
            r => r.map(|()| false),
        }
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        // Held across the export: `release()` checks `exports` under it.
        let held = me.lock_held()?;
        if held.is_none() {
            return Err(peek_released());
        }
        if flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(errors::buffer("a peeked ring block is read-only"));
        }
        // The block lies in the consumer's mappings, which stay while this
        // object lives (`peeks_alive` keeps the consumer), and it stays
        // this peek's until `release()`, which is refused while the view
        // counted below is alive.
        // SAFETY: as argued just above.
        unsafe { buffer::fill(view, slf.as_any(), me.ptr as *const u8, me.len, true, flags)? };
        me.exports.fetch_add(1, Ordering::AcqRel);
        drop(held);
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }

    fn __repr__(&self) -> String {
        format!("zcio.Peek(len={}, tag={})", self.len, self.tag)
    }
}

/// A read-only range of a peeked block in place: the `.base` of the
/// arrays `Peek.array()` returns. It counts as an export of its `Peek` for
/// its whole life (so the block cannot be released under it) and keeps the
/// `Peek` — and with it the ring's mapping — alive.
#[pyclass(module = "zcio._zcio", frozen)]
pub struct PeekView {
    peek: Py<Peek>,
    /// The block's bytes (see `Peek::ptr`).
    ptr: usize,
    len: usize,
}

impl Drop for PeekView {
    fn drop(&mut self) {
        // `get` needs no GIL for a frozen class.
        self.peek.get().exports.fetch_sub(1, Ordering::AcqRel);
    }
}

#[pymethods]
impl PeekView {
    fn __len__(&self) -> usize {
        self.len
    }

    /// The peeked block these bytes belong to.
    #[getter]
    fn peek(&self, py: Python<'_>) -> Py<Peek> {
        self.peek.clone_ref(py)
    }

    /// Always True, as for `Peek`: a ring block can be written by any
    /// process attached to the ring.
    #[getter]
    fn volatile(&self) -> bool {
        true
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(errors::buffer("a peeked ring block is read-only"));
        }
        let me = slf.get();
        // The block stays this peek's while this object lives (it counts
        // as an export, so `release()` is refused) and stays mapped while
        // the peek object lives, which this object keeps.
        // SAFETY: as argued just above.
        unsafe { buffer::fill(view, slf.as_any(), me.ptr as *const u8, me.len, true, flags) }
    }

    fn __repr__(&self) -> String {
        format!("zcio.PeekView(len={})", self.len)
    }
}

/// ring_unlink(name): remove a ring's name.
#[pyfunction]
pub(crate) fn ring_unlink(py: Python<'_>, name: &str) -> PyResult<()> {
    zcio::ring::unlink(name).map_err(|e| errors::raise(py, e))
}

/// ring_dir() -> str: the directory of ring files (`$ZCIO_RING_DIR`, else
/// `/dev/shm`).
#[pyfunction]
pub(crate) fn ring_dir() -> String {
    zcio::ring::ring_dir().to_string_lossy().into_owned()
}

/// ring_path(name) -> str: the file of ring `name`; `ValueError` for a
/// name that is not a valid ring name.
#[pyfunction]
pub(crate) fn ring_path(name: &str) -> PyResult<String> {
    zcio::ring::ring_path(name)
        .map(|p| p.to_string_lossy().into_owned())
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "{name:?} is not a valid ring name (letters, digits, '.', '_', '-'; not starting with '.')"
            ))
        })
}

/// ring_stat(name) -> dict: a snapshot of ring `name` (what `zcio ring
/// stat` shows), read without attaching: `name`, `layout`, `policy`,
/// `size`, `slot_size`, `max_block`, `uid`, `gid`, `mode`, `producer`
/// (dict: `pid`, `state`, `error`, `other_pid_namespace`), `head`, `fill`,
/// `blocks`, `bytes`, `dropped_blocks`, `dropped_bytes` and `consumers`
/// (list of dicts: `slot`, `pid`, `alive`, `other_pid_namespace`,
/// `cursor`, `lag`, `drops`, `skips`, `skipped_units`, `read_blocks`,
/// `read_bytes`).
#[pyfunction]
pub(crate) fn ring_stat<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    let st = py
        .detach(|| zcio::ring::stat(name))
        .map_err(|e| errors::raise(py, e))?;
    let g = &st.geometry;
    let d = PyDict::new(py);
    d.set_item("name", &st.name)?;
    d.set_item("layout", g.layout.name())?;
    d.set_item("policy", g.overflow.name())?;
    d.set_item("size", g.data_len)?;
    d.set_item("slot_size", g.slot_size)?;
    d.set_item("max_block", g.max_block())?;
    d.set_item("uid", st.uid)?;
    d.set_item("gid", st.gid)?;
    d.set_item("mode", st.mode)?;
    let p = PyDict::new(py);
    p.set_item("pid", st.producer.pid)?;
    p.set_item("state", st.producer.state)?;
    p.set_item("error", st.producer.error)?;
    p.set_item("other_pid_namespace", st.producer.other_pid_namespace)?;
    d.set_item("producer", p)?;
    d.set_item("head", st.head)?;
    d.set_item("fill", st.fill)?;
    d.set_item("blocks", st.blocks)?;
    d.set_item("bytes", st.bytes)?;
    d.set_item("dropped_blocks", st.dropped_blocks)?;
    d.set_item("dropped_bytes", st.dropped_bytes)?;
    let mut cs = Vec::with_capacity(st.consumers.len());
    for c in &st.consumers {
        let cd = PyDict::new(py);
        cd.set_item("slot", c.slot)?;
        cd.set_item("pid", c.pid)?;
        cd.set_item("alive", c.alive)?;
        cd.set_item("other_pid_namespace", c.other_pid_namespace)?;
        cd.set_item("cursor", c.cursor)?;
        cd.set_item("lag", c.lag)?;
        cd.set_item("drops", c.drops)?;
        cd.set_item("skips", c.skips)?;
        cd.set_item("skipped_units", c.skipped_units)?;
        cd.set_item("read_blocks", c.read_blocks)?;
        cd.set_item("read_bytes", c.read_bytes)?;
        cs.push(cd);
    }
    d.set_item("consumers", cs)?;
    Ok(d)
}

/// ring_list() -> list[str]: names of existing rings.
#[pyfunction]
pub(crate) fn ring_list(py: Python<'_>) -> PyResult<Vec<String>> {
    zcio::ring::list().map_err(|e| errors::raise(py, e))
}
