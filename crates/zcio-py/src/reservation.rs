//! `RingReservation`: room for one block reserved straight in a ring
//! (`RingProducer.reserve`), filled through the buffer protocol and then
//! committed (Rust's `ring::Reservation`).
//!
//! The Rust reservation borrows its producer mutably; a Python object
//! cannot hold that borrow, so the reservation is made (which waits for
//! room and announces it) and detached at once (`Reservation::detach`:
//! the room without the borrow). The producer's `reserved` flag then
//! refuses every other write and `close()` until `commit()` or `cancel()`,
//! so the room stays this object's and the ring stays mapped. `commit()`
//! resumes that very reservation (`Producer::resume`, which refuses a
//! reservation the producer wrote or reserved past, so nothing is reserved
//! twice) and publishes what was filled. A writable view never outlives
//! the reservation: `commit()` and `cancel()` are refused (`BufferError`)
//! while views are exported, and no view is exported after them.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use zcio::ring::DetachedReservation;

use crate::buffer;
use crate::errors;
use crate::ring::RingProducer;

/// Where a reservation is in its life.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Open,
    Committed,
    Cancelled,
}

/// The phase, and the detached reservation while it is open.
struct State {
    phase: Phase,
    held: Option<DetachedReservation>,
}

/// Room reserved in a ring (see the module docs and the Python docstring).
#[pyclass(module = "zcio._zcio", frozen)]
pub struct RingReservation {
    prod: Py<RingProducer>,
    /// The room: `cap` bytes inside the producer's mapping, which stays
    /// while the phase is `Open` (the producer refuses `close()`).
    ptr: usize,
    cap: usize,
    state: Mutex<State>,
    /// Buffer-protocol views alive (changed under `phase`).
    exports: AtomicUsize,
}

impl RingReservation {
    pub(crate) fn new(prod: Py<RingProducer>, held: DetachedReservation) -> Self {
        Self {
            prod,
            ptr: held.addr() as usize,
            cap: held.capacity(),
            state: Mutex::new(State {
                phase: Phase::Open,
                held: Some(held),
            }),
            exports: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| errors::internal("reservation lock poisoned"))
    }

    /// The phase must be `Open` and no view exported.
    fn check_closable(&self, phase: Phase) -> PyResult<()> {
        if phase != Phase::Open {
            return Err(not_open(phase));
        }
        if self.exports.load(Ordering::Acquire) > 0 {
            return Err(errors::buffer(
                "views of this reservation still exist (memoryview, numpy array …); release them first",
            ));
        }
        Ok(())
    }
}

/// Why `commit` published nothing.
enum CommitFail {
    Closed,
    /// `Producer::resume` refused the reservation.
    Stale,
    Write(zcio::ring::WriteError),
}

fn not_open(phase: Phase) -> PyErr {
    PyValueError::new_err(match phase {
        Phase::Committed => {
            "this reservation was committed: its room belongs to the ring now (reserve again)"
        }
        _ => "this reservation was cancelled (reserve again)",
    })
}

impl Drop for RingReservation {
    fn drop(&mut self) {
        // Dropped open (never committed): like `cancel()`. No view can be
        // alive (each holds a reference to this object).
        let open = self
            .state
            .get_mut()
            .map(|s| s.phase == Phase::Open)
            .unwrap_or(true);
        if open {
            // `get` needs no GIL for a frozen class.
            self.prod.get().reserved.store(false, Ordering::Release);
        }
    }
}

#[pymethods]
impl RingReservation {
    /// Bytes reserved.
    fn __len__(&self) -> usize {
        self.cap
    }

    /// Bytes reserved.
    #[getter]
    fn capacity(&self) -> usize {
        self.cap
    }

    /// Whether `commit()` was called.
    #[getter]
    fn committed(&self) -> PyResult<bool> {
        Ok(self.lock()?.phase == Phase::Committed)
    }

    /// commit(nbytes=None, tag=0): publish the first `nbytes` bytes (all
    /// of them by default) as one block with `tag`. `BufferError` while
    /// views of the room exist; the room is the ring's afterwards (using
    /// the reservation again raises `ValueError`).
    #[pyo3(signature = (nbytes=None, tag=0))]
    fn commit(&self, py: Python<'_>, nbytes: Option<usize>, tag: u32) -> PyResult<()> {
        let mut st = self.lock()?;
        self.check_closable(st.phase)?;
        let n = nbytes.unwrap_or(self.cap);
        if n > self.cap {
            return Err(PyValueError::new_err(format!(
                "nbytes {n} is more than the {} bytes reserved",
                self.cap
            )));
        }
        let held = st
            .held
            .take()
            .ok_or_else(|| errors::internal("open reservation without its room"))?;
        let prod = self.prod.get();
        let r = py.detach(|| {
            let mut g = prod.inner().lock().map_err(|_| CommitFail::Closed)?;
            let p = g.as_mut().ok_or(CommitFail::Closed)?;
            // This reservation itself, not a new one: refused if the
            // producer wrote or reserved since (it cannot have: every
            // other write is refused while `reserved` is set).
            let r = match p.resume(held) {
                Ok(mut res) => {
                    // The first `n` bytes of the room are initialised: the
                    // room is shared memory the kernel zero-filled or
                    // earlier blocks wrote, and the caller filled what it
                    // means to publish.
                    // SAFETY: as argued just above (`n <= cap`, nothing
                    // filled through Rust before).
                    unsafe { res.advance(n) };
                    res.commit(tag).map_err(CommitFail::Write)
                }
                Err(_) => Err(CommitFail::Stale),
            };
            prod.reserved.store(false, Ordering::Release);
            r
        });
        st.phase = Phase::Committed;
        match r {
            Ok(()) => Ok(()),
            Err(CommitFail::Write(e)) => Err(errors::raise(py, e)),
            Err(CommitFail::Closed) => Err(errors::closed("ring producer")),
            Err(CommitFail::Stale) => Err(errors::internal(
                "the producer wrote past this reservation; nothing was committed",
            )),
        }
    }

    /// cancel(): give the room back, publishing nothing. `BufferError`
    /// while views of it exist; nothing once committed or cancelled.
    fn cancel(&self) -> PyResult<()> {
        let mut st = self.lock()?;
        if st.phase != Phase::Open {
            return Ok(());
        }
        self.check_closable(st.phase)?;
        let prod = self.prod.get();
        let _g = prod.inner().lock();
        // Dropped detached: nothing is published (the room is free again
        // for the next reservation or write).
        st.held = None;
        prod.reserved.store(false, Ordering::Release);
        st.phase = Phase::Cancelled;
        Ok(())
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Leaving a `with` block cancels a reservation that was not
    /// committed.
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.cancel()?;
        Ok(false)
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        // Held across the export: `commit`/`cancel` check `exports` under it.
        let phase = me.lock()?;
        if phase.phase != Phase::Open {
            return Err(not_open(phase.phase));
        }
        // The room is `cap` bytes of the producer's mapping, writable by
        // this process only and mapped while the reservation is open
        // (the producer refuses `close()`); the reservation stays open
        // while this view lives (`commit`/`cancel` are refused while
        // `exports` counts it).
        // SAFETY: as argued just above.
        unsafe {
            buffer::fill(
                view,
                slf.as_any(),
                me.ptr as *const u8,
                me.cap,
                false,
                flags,
            )?
        };
        me.exports.fetch_add(1, Ordering::AcqRel);
        drop(phase);
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }

    fn __repr__(&self) -> PyResult<String> {
        let phase = self.lock()?.phase;
        Ok(format!(
            "zcio.RingReservation(capacity={}, {})",
            self.cap,
            match phase {
                Phase::Open => "open",
                Phase::Committed => "committed",
                Phase::Cancelled => "cancelled",
            }
        ))
    }
}
