//! Lanes (`Channel.open_lane` / `Channel.accept_lane`): a channel's fast
//! path for small messages. A `LaneSender` lends one slot at a time
//! (`LaneLoan`, a writable buffer) or copies bytes in (`send`); a
//! `LaneReceiver` holds one received message at a time (`LaneMsg`, a
//! read-only buffer over the sender's slot).
//!
//! The Rust ends are single-owner (`&mut self`) and a loan or message
//! borrows its end; each Python object keeps its end in a state that is
//! taken out while a call waits with the GIL released, so no lock is ever
//! held across a wait. Exported memoryviews are counted: an end is not
//! closed, and a loan not sent, while views of it are alive (the bytes stay
//! mapped as long as any view may read them).

use std::ptr::NonNull;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use zcio::{LaneError, LaneStats, Loan};

use crate::buffer::{self, Exported};
use crate::errors;
use crate::wait::{blocking, Deadline, Timeout};

/// A Rust lane end with the loan or message that borrows it.
struct Held<E: 'static, B: 'static> {
    /// Borrows `*end`; dropped first (`Drop`).
    borrow: Option<B>,
    /// Owned (`Box::into_raw`).
    end: NonNull<E>,
}

impl<E, B> Held<E, B> {
    fn new(end: E) -> Self {
        Self {
            borrow: None,
            end: NonNull::from(Box::leak(Box::new(end))),
        }
    }
}

impl<E, B> Drop for Held<E, B> {
    fn drop(&mut self) {
        self.borrow = None;
        // SAFETY: `end` came from `Box::leak`; nothing borrows it now.
        drop(unsafe { Box::from_raw(self.end.as_ptr()) });
    }
}

// SAFETY: the end and its borrow are owned together and moved together;
// both are `Send` (the ends own their mappings; a loan or message is a
// borrow of the end plus plain data).
unsafe impl<E: Send, B> Send for Held<E, B> {}

/// Where a Python lane object's Rust end is.
enum State<E: 'static, B: 'static> {
    Idle(Held<E, B>),
    /// Taken out by a call that waits with the GIL released.
    Busy,
    Closed,
}

/// The state of one Python lane end: the Rust end, which borrow (loan or
/// message) is current, and how many memoryviews of it are alive.
struct Slot<E: 'static, B: 'static> {
    state: State<E, B>,
    /// Number of the current borrow (each new loan or message gets one).
    current: u64,
    views: usize,
}

/// Another thread's call is waiting with this lane end taken out.
fn busy() -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err(
        "the lane is in use by another thread (a call is waiting)",
    )
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<E, B> Slot<E, B> {
    /// Take the end out for a waiting call: refused while views of the
    /// current borrow are alive (the call releases it), while another
    /// thread waits, or after close.
    fn take(&mut self, what: &str) -> PyResult<Held<E, B>> {
        if self.views > 0 {
            return Err(errors::buffer(format!(
                "release the memoryviews of the current {what} first"
            )));
        }
        match std::mem::replace(&mut self.state, State::Busy) {
            State::Idle(h) => Ok(h),
            other => {
                let closed = matches!(other, State::Closed);
                self.state = other;
                Err(if closed {
                    errors::closed("the lane")
                } else {
                    busy()
                })
            }
        }
    }

    /// Put the end back after a call; `new_borrow`: it now holds a new one.
    fn put(&mut self, h: Held<E, B>, new_borrow: bool) -> u64 {
        if new_borrow {
            self.current += 1;
        }
        self.state = State::Idle(h);
        self.current
    }

    /// The end and its borrow if `id` is still the current one.
    fn current(&mut self, id: u64) -> Option<&mut Held<E, B>> {
        match &mut self.state {
            State::Idle(h) if self.current == id && h.borrow.is_some() => Some(h),
            _ => None,
        }
    }

    fn close(&mut self) -> PyResult<()> {
        if self.views > 0 {
            return Err(errors::buffer(
                "release the memoryviews of the lane's loan or message before closing it",
            ));
        }
        if matches!(self.state, State::Busy) {
            return Err(busy());
        }
        self.state = State::Closed;
        Ok(())
    }
}

/// The counters of a lane end, or of the end a loan or message borrows.
trait Counted {
    fn counters(&self) -> LaneStats;
}

impl Counted for zcio::LaneSender {
    fn counters(&self) -> LaneStats {
        self.stats()
    }
}

impl Counted for zcio::LaneReceiver {
    fn counters(&self) -> LaneStats {
        self.stats()
    }
}

impl Counted for Loan<'static> {
    fn counters(&self) -> LaneStats {
        self.lane().stats()
    }
}

impl Counted for zcio::LaneMsg<'static> {
    fn counters(&self) -> LaneStats {
        self.lane().stats()
    }
}

impl<E: Counted, B: Counted> Slot<E, B> {
    /// The end's counters (through its borrow when one is out).
    fn stats(&self) -> PyResult<LaneStats> {
        match &self.state {
            State::Idle(h) => Ok(match &h.borrow {
                Some(b) => b.counters(),
                // SAFETY: nothing borrows the end mutably (no loan or
                // message is out).
                None => unsafe { h.end.as_ref() }.counters(),
            }),
            State::Busy => Err(busy()),
            State::Closed => Err(errors::closed("the lane")),
        }
    }
}

fn stats_dict<'py>(py: Python<'py>, s: LaneStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("messages", s.messages)?;
    d.set_item("notices", s.notices)?;
    d.set_item("bad_notices", s.bad_notices)?;
    d.set_item("malformed", s.malformed)?;
    d.set_item("notices_dropped", s.notices_dropped)?;
    d.set_item("in_flight", s.in_flight)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("would_block", s.would_block)?;
    d.set_item("timed_out", s.timed_out)?;
    d.set_item("disconnected", s.disconnected)?;
    d.set_item("sleeps", s.sleeps)?;
    d.set_item("wakes", s.wakes)?;
    d.set_item("peer_pid", s.peer_pid)?;
    d.set_item("connection", s.connection)?;
    Ok(d)
}

/// Wait for `op` (retried in GIL-free slices until `timeout`; `None`:
/// `bound`, the channel's): its value, or the lane error
/// (`WouldBlock`/`TimedOut` when the deadline passed) or a
/// `KeyboardInterrupt`, raised.
fn wait_for<T: Send>(
    py: Python<'_>,
    timeout: Option<f64>,
    bound: Duration,
    mut op: impl FnMut(Duration) -> Result<T, LaneError> + Send,
) -> PyResult<T> {
    let t = Timeout::from_py(timeout, bound)?;
    let got = blocking(py, Deadline::new(t), |slice| match op(slice) {
        Err(LaneError::WouldBlock | LaneError::TimedOut) => None,
        r => Some(r),
    })?;
    match got {
        Some(r) => r.map_err(|e| errors::raise(py, e)),
        None if t.is_try() => Err(errors::raise(py, LaneError::WouldBlock)),
        None => Err(errors::raise(py, LaneError::TimedOut)),
    }
}

type TxSlot = Slot<zcio::LaneSender, Loan<'static>>;
type RxSlot = Slot<zcio::LaneReceiver, zcio::LaneMsg<'static>>;

/// The sending end of a lane (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct LaneSender {
    slot: Mutex<TxSlot>,
    slot_size: usize,
    slots: u32,
    /// The default wait: the channel's send bound.
    bound: Duration,
}

impl LaneSender {
    pub(crate) fn new(tx: zcio::LaneSender, bound: Duration) -> Self {
        Self {
            bound,
            slot_size: tx.slot_size(),
            slots: tx.slots(),
            slot: Mutex::new(Slot {
                state: State::Idle(Held::new(tx)),
                current: 0,
                views: 0,
            }),
        }
    }

    /// Take the end out, drop an unsent loan, wait for a new one, put the
    /// end back holding it; its number and address.
    fn lend(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<(u64, usize)> {
        let mut h = lock(&self.slot).take("loan")?;
        h.borrow = None;
        let ptr = h.end.as_ptr() as usize;
        let r = wait_for(py, timeout, self.bound, |slice| {
            // SAFETY: no borrow is held (dropped above); the loan is
            // stored in `h.borrow` below or dropped with the error.
            let end = unsafe { &mut *(ptr as *mut zcio::LaneSender) };
            end.loan_timeout(slice).map(|mut l| {
                let p = l.as_mut_slice().as_mut_ptr() as usize;
                (l, p)
            })
        });
        let mut s = lock(&self.slot);
        match r {
            Ok((loan, p)) => {
                h.borrow = Some(loan);
                Ok((s.put(h, true), p))
            }
            Err(e) => {
                s.put(h, false);
                Err(e)
            }
        }
    }
}

#[pymethods]
impl LaneSender {
    /// loan(timeout=None) -> LaneLoan: a free slot to fill in place.
    #[pyo3(signature = (timeout=None))]
    fn loan(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<LaneLoan> {
        let py = slf.py();
        let (id, ptr) = slf.get().lend(py, timeout)?;
        Ok(LaneLoan {
            lane: slf.unbind(),
            id,
            ptr,
            len: 0,
        }
        .sized())
    }

    /// send(data, timeout=None): copy a bytes-like object into a slot and
    /// send it.
    #[pyo3(signature = (data, timeout=None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        let src = Exported::get(data, false)?;
        if src.len() > self.slot_size {
            return Err(errors::raise(
                py,
                LaneError::TooLarge {
                    len: src.len(),
                    max: self.slot_size,
                },
            ));
        }
        let (id, dst) = self.lend(py, timeout)?;
        let mut s = lock(&self.slot);
        let Some(h) = s.current(id) else {
            return Err(errors::internal("lane loan vanished"));
        };
        // `dst` is the loaned slot (`slot_size` >= `src.len()` bytes, ours
        // alone while the loan is held); `src` stays exported (and so
        // allocated) while `src` lives; the two do not overlap (the slot
        // is in our shared mapping, `src` in the caller's object).
        // SAFETY: as argued just above.
        unsafe { std::ptr::copy_nonoverlapping(src.ptr(), dst as *mut u8, src.len()) };
        let loan = h
            .borrow
            .take()
            .ok_or_else(|| errors::internal("lane loan"))?;
        loan.send(src.len())
            .map_err(|e| errors::raise(py, *e.error()))
    }

    /// Bytes a slot holds: the longest message.
    #[getter]
    fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// Slots of the lane.
    #[getter]
    fn slots(&self) -> u32 {
        self.slots
    }

    /// stats() -> dict
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, lock(&self.slot).stats()?)
    }

    /// close(): end the lane (the receiver sees the end once it read what
    /// was sent); an unsent loan is given back.
    fn close(&self) -> PyResult<()> {
        lock(&self.slot).close()
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
        format!(
            "zcio.LaneSender(slots={}, slot_size={})",
            self.slots, self.slot_size
        )
    }
}

/// A slot lent for filling (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct LaneLoan {
    lane: Py<LaneSender>,
    id: u64,
    ptr: usize,
    len: usize,
}

impl LaneLoan {
    fn sized(mut self) -> Self {
        self.len = self.lane.get().slot_size;
        self
    }
}

#[pymethods]
impl LaneLoan {
    fn __len__(&self) -> usize {
        self.len
    }

    /// send(n): send the first `n` bytes of the slot.
    fn send(&self, py: Python<'_>, n: usize) -> PyResult<()> {
        let lane = self.lane.get();
        let mut s = lock(&lane.slot);
        if s.views > 0 {
            return Err(errors::buffer(
                "release the memoryviews of this LaneLoan before sending it",
            ));
        }
        let Some(h) = s.current(self.id) else {
            return Err(errors::closed(
                "this LaneLoan (sent, cancelled or replaced)",
            ));
        };
        let Some(loan) = h.borrow.take() else {
            return Err(errors::internal("lane loan"));
        };
        match loan.send(n) {
            Ok(()) => Ok(()),
            Err(e) => {
                let (err, loan) = e.into_parts();
                if matches!(err, LaneError::TooLarge { .. }) {
                    h.borrow = Some(loan);
                }
                Err(errors::raise(py, err))
            }
        }
    }

    /// cancel(): give the slot back unsent.
    fn cancel(&self) -> PyResult<()> {
        let lane = self.lane.get();
        let mut s = lock(&lane.slot);
        if s.views > 0 {
            return Err(errors::buffer(
                "release the memoryviews of this LaneLoan before cancelling it",
            ));
        }
        if let Some(h) = s.current(self.id) {
            h.borrow = None;
        }
        Ok(())
    }

    /// Whether this loan can still be filled and sent.
    #[getter]
    fn active(&self) -> bool {
        lock(&self.lane.get().slot).current(self.id).is_some()
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        let mut s = lock(&me.lane.get().slot);
        if s.current(me.id).is_none() {
            return Err(errors::buffer(
                "this LaneLoan was sent, cancelled or replaced: take a new loan",
            ));
        }
        // `ptr`/`len` are the loaned slot, mapped writable in this
        // process for as long as the lane end lives: the lane is not
        // closed and the slot not released while `views` > 0 (counted
        // under this lock), and the view keeps this object, and so the
        // lane object, alive. `view` is CPython's.
        // SAFETY: as argued just above.
        unsafe {
            buffer::fill(
                view,
                slf.as_any(),
                me.ptr as *const u8,
                me.len,
                false,
                flags,
            )?
        };
        s.views += 1;
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        let mut s = lock(&self.lane.get().slot);
        s.views = s.views.saturating_sub(1);
    }

    fn __repr__(&self) -> String {
        format!("zcio.LaneLoan(len={}, active={})", self.len, self.active())
    }
}

/// The receiving end of a lane (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct LaneReceiver {
    slot: Mutex<RxSlot>,
    slot_size: usize,
    /// The default wait: the channel's receive bound.
    bound: Duration,
}

impl LaneReceiver {
    pub(crate) fn new(rx: zcio::LaneReceiver, bound: Duration) -> Self {
        Self {
            bound,
            slot_size: rx.slot_size(),
            slot: Mutex::new(Slot {
                state: State::Idle(Held::new(rx)),
                current: 0,
                views: 0,
            }),
        }
    }
}

#[pymethods]
impl LaneReceiver {
    /// recv(timeout=None) -> LaneMsg: the next message (the one before
    /// is released).
    #[pyo3(signature = (timeout=None))]
    fn recv(slf: Bound<'_, Self>, timeout: Option<f64>) -> PyResult<LaneMsg> {
        let py = slf.py();
        let me = slf.get();
        let mut h = lock(&me.slot).take("LaneMsg")?;
        h.borrow = None;
        let ptr = h.end.as_ptr() as usize;
        let r = wait_for(py, timeout, me.bound, |slice| {
            // SAFETY: no message is held (dropped above); the new one is
            // stored in `h.borrow` below or dropped with the error.
            let end = unsafe { &mut *(ptr as *mut zcio::LaneReceiver) };
            end.recv_timeout(slice).map(|m| {
                let (p, n) = (m.view().as_ptr() as usize, m.len());
                (m, p, n)
            })
        });
        let mut s = lock(&me.slot);
        match r {
            Ok((m, p, n)) => {
                h.borrow = Some(m);
                let id = s.put(h, true);
                drop(s);
                Ok(LaneMsg {
                    lane: slf.unbind(),
                    id,
                    ptr: p,
                    len: n,
                })
            }
            Err(e) => {
                s.put(h, false);
                Err(e)
            }
        }
    }

    /// Bytes a slot holds: the longest message.
    #[getter]
    fn slot_size(&self) -> usize {
        self.slot_size
    }

    /// stats() -> dict
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, lock(&self.slot).stats()?)
    }

    /// close(): end the lane; a held message is released.
    fn close(&self) -> PyResult<()> {
        lock(&self.slot).close()
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
        format!("zcio.LaneReceiver(slot_size={})", self.slot_size)
    }
}

/// A received message, read in place (see the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct LaneMsg {
    lane: Py<LaneReceiver>,
    id: u64,
    ptr: usize,
    len: usize,
}

#[pymethods]
impl LaneMsg {
    fn __len__(&self) -> usize {
        self.len
    }

    /// Whether the message is still held (not released, not replaced by
    /// the next `recv`).
    #[getter]
    fn held(&self) -> bool {
        lock(&self.lane.get().slot).current(self.id).is_some()
    }

    /// A private copy of the bytes.
    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let mut s = lock(&self.lane.get().slot);
        let Some(h) = s.current(self.id) else {
            return Err(errors::closed("this LaneMsg (released)"));
        };
        let v = h.borrow.as_ref().map(|m| m.to_vec()).unwrap_or_default();
        Ok(PyBytes::new(py, &v))
    }

    /// release(): give the slot back to the sender.
    fn release(&self) -> PyResult<()> {
        let mut s = lock(&self.lane.get().slot);
        if s.views > 0 {
            return Err(errors::buffer(
                "release the memoryviews of this LaneMsg first",
            ));
        }
        if let Some(h) = s.current(self.id) {
            h.borrow = None;
        }
        Ok(())
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        let mut s = lock(&me.lane.get().slot);
        if s.current(me.id).is_none() {
            return Err(errors::buffer("this LaneMsg was released"));
        }
        // `ptr`/`len` are the message's bytes in the sender's slot, mapped
        // read-only here for as long as the lane end lives: the lane is not
        // closed and the message not released while `views` > 0 (counted
        // under this lock), and the view keeps this object, and so the
        // lane object, alive. The sender may still write those bytes
        // (read them as volatile data). `view` is CPython's.
        // SAFETY: as argued just above.
        unsafe { buffer::fill(view, slf.as_any(), me.ptr as *const u8, me.len, true, flags)? };
        s.views += 1;
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        let mut s = lock(&self.lane.get().slot);
        s.views = s.views.saturating_sub(1);
    }

    fn __repr__(&self) -> String {
        format!("zcio.LaneMsg(len={}, held={})", self.len, self.held())
    }
}
