//! Associations (`zcio::splice`) for Python: `zcio.splice(src, dst,
//! modules=[...])` → [`Association`] (`run`, `start` / `wait` / `fileno` /
//! `on_complete`, `on_quench`, `stop`, `status`, `push` / `pop` / `control`,
//! `close`), `zcio.cp(src, dst, modules=[...])`, `zcio.load_module(path)`
//! and `zcio.module_names()`. A `zcio.Channel` may be either end.
//!
//! Blocking work (opening a spec that connects or accepts, a synchronous
//! run, waiting for a completion, closing) happens with the GIL released;
//! a run happens on a helper thread while the calling thread waits in
//! slices, so Ctrl-C stops flow and raises `KeyboardInterrupt`. The
//! completion callback runs on the association's worker thread with the
//! GIL held; an exception in it stops flow and is attached to the
//! completion (`callback_error`), never unwinding into the worker.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex, OnceLock, RwLock, TryLockError};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use zcio::splice::module::Registry;
use zcio::splice::{
    Association as RsAssociation, Completion as RsCompletion, Increment, IoObject, MoverKind, Next,
    Remote, SpliceError as RsSpliceError, Status as RsStatus,
};
use zcio::splice::{Role, Spec};

use crate::channel::Channel;
use crate::errors;
use crate::wait::{blocking, Deadline, Timeout};

/// The registry `push`, `splice(modules=…)` and `cp` find modules in: the
/// built-ins plus what `load_module` added.
fn registry() -> &'static RwLock<Registry> {
    static REG: OnceLock<RwLock<Registry>> = OnceLock::new();
    REG.get_or_init(|| RwLock::new(Registry::builtin()))
}

fn open_module(py: Python<'_>, spec: &str) -> PyResult<Box<dyn zcio::splice::module::Module>> {
    registry()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .open(spec)
        .map_err(|e| errors::raise(py, e))
}

/// `zcio.DEFAULT`: the default increment (zcio chooses: 4 MiB).
#[pyclass(module = "zcio._zcio", frozen, name = "_Default")]
pub(crate) struct DefaultIncrement;

#[pymethods]
impl DefaultIncrement {
    fn __repr__(&self) -> &'static str {
        "zcio.DEFAULT"
    }
}

/// An increment as Python spells it: `None` (until the end of the
/// source), `zcio.DEFAULT`, or a positive byte count.
fn increment(n: Option<&Bound<'_, PyAny>>) -> PyResult<Increment> {
    let Some(n) = n else {
        return Ok(Increment::Infinite);
    };
    if n.is_instance_of::<DefaultIncrement>() {
        return Ok(Increment::Default);
    }
    if n.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err("nbytes must not be a bool"));
    }
    const WHAT: &str = "nbytes must be None (until the end of the source), zcio.DEFAULT, \
                        or a positive number of bytes";
    match n.extract::<u64>() {
        Ok(b) if b > 0 => Ok(Increment::Bytes(b)),
        _ if n.is_instance_of::<pyo3::types::PyInt>() => Err(PyValueError::new_err(WHAT)),
        _ => Err(PyTypeError::new_err(WHAT)),
    }
}

fn mover_name(m: MoverKind) -> &'static str {
    match m {
        MoverKind::CopyFileRange => "copy_file_range",
        MoverKind::Sendfile => "sendfile",
        MoverKind::Splice => "splice",
        MoverKind::Buffer => "buffer",
    }
}

/// The end of one increment.
#[pyclass(module = "zcio._zcio", frozen, get_all)]
pub(crate) struct Completion {
    /// Bytes moved in this increment.
    moved: u64,
    /// The source ended.
    eof: bool,
    /// ``stop()`` ended it early.
    stopped: bool,
    /// The exception (not raised) of the error that ended it, or None.
    error: Option<Py<PyAny>>,
    /// The exception the ``on_complete`` callback raised for this
    /// completion (flow stopped), or None.
    callback_error: Option<Py<PyAny>>,
}

impl Completion {
    fn new(py: Python<'_>, c: &RsCompletion, callback_error: Option<PyErr>) -> Self {
        Self {
            moved: c.moved,
            eof: c.eof,
            stopped: c.stopped,
            error: c
                .error
                .as_ref()
                .map(|e| errors::raise(py, e.clone()).into_value(py).into_any()),
            callback_error: callback_error.map(|e| e.into_value(py).into_any()),
        }
    }
}

#[pymethods]
impl Completion {
    fn __repr__(&self) -> String {
        format!(
            "zcio.Completion(moved={}, eof={}, stopped={}, error={})",
            self.moved,
            py_bool(self.eof),
            py_bool(self.stopped),
            if self.error.is_some() { "..." } else { "None" }
        )
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// Status of an association: the status bits and counters.
#[pyclass(module = "zcio._zcio", frozen, get_all)]
pub(crate) struct SpliceStatus {
    /// An increment is running.
    active: bool,
    /// Someone waits for it (``run``, ``wait``).
    wanted: bool,
    /// An error ended the last increment.
    error: bool,
    /// The source has ended.
    eof: bool,
    /// Bytes moved since the association was made.
    moved: u64,
    /// The mover in use: "copy_file_range", "sendfile", "splice" or "buffer".
    mover: &'static str,
    /// Movers the kernel refused for this pair: [(mover, errno)].
    fell_back: Vec<(&'static str, i32)>,
    /// The stacked modules' names, in data order.
    modules: Vec<String>,
    /// Bytes the modules copied (0 for pass-through modules).
    copied: u64,
    /// Blocks dropped because the sink could not take them at once.
    dropped: u64,
    /// Bytes of those blocks.
    dropped_bytes: u64,
    /// Blocks the source lost before the association read them.
    lost: u64,
    /// The source's label.
    source: String,
    /// The sink's label.
    sink: String,
}

impl From<RsStatus> for SpliceStatus {
    fn from(s: RsStatus) -> Self {
        Self {
            active: s.active,
            wanted: s.wanted,
            error: s.error,
            eof: s.eof,
            moved: s.moved,
            mover: mover_name(s.mover),
            fell_back: s
                .fell_back
                .iter()
                .map(|(m, e)| (mover_name(*m), e.raw_os_error()))
                .collect(),
            modules: s.modules,
            copied: s.copied,
            dropped: s.dropped,
            dropped_bytes: s.dropped_bytes,
            lost: s.lost,
            source: s.source,
            sink: s.sink,
        }
    }
}

#[pymethods]
impl SpliceStatus {
    fn __repr__(&self) -> String {
        format!(
            "zcio.SpliceStatus(active={}, eof={}, error={}, moved={}, mover={:?}, modules={:?})",
            py_bool(self.active),
            py_bool(self.eof),
            py_bool(self.error),
            self.moved,
            self.mover,
            self.modules
        )
    }
}

/// The descriptor an endpoint argument names: an int, or an object with
/// ``fileno()``; `None` for a spec.
fn fd_of(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Option<i32>> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err("an endpoint must not be a bool"));
    }
    // A channel is an I/O object of its own, not its doorbell descriptor.
    if obj.is_instance_of::<Channel>() {
        return Ok(None);
    }
    if let Ok(n) = obj.extract::<i64>() {
        return i32::try_from(n).map(Some).map_err(|_| {
            errors::raise(
                py,
                RsSpliceError::Setup {
                    op: "duplicate the descriptor",
                    errno: zcio::Errno::BADF,
                },
            )
        });
    }
    if obj.is_instance_of::<pyo3::types::PyString>() || !obj.hasattr("fileno")? {
        return Ok(None);
    }
    Ok(Some(obj.call_method0("fileno")?.extract()?))
}

/// An endpoint argument: an int (a descriptor, duplicated), an object
/// with ``fileno()`` (its descriptor, duplicated), or a spec string /
/// path-like (opened). `other` is the other argument's descriptor: a
/// duplicate that gets its number proves it was not open.
fn endpoint(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    role: Role,
    other: Option<i32>,
    source_spec: Option<&str>,
) -> PyResult<IoObject> {
    let what = match role {
        Role::Source => "source",
        Role::Sink => "sink",
    };
    if let Some(fd) = fd_of(py, obj)? {
        let bad = |errno| {
            errors::raise(
                py,
                RsSpliceError::Setup {
                    op: "duplicate the descriptor",
                    errno,
                },
            )
        };
        let owned = dup_fd(fd).map_err(bad)?;
        if other == Some(owned.as_raw_fd()) {
            return Err(bad(zcio::Errno::BADF));
        }
        return IoObject::new(owned, format!("fd:{fd}")).map_err(|e| errors::raise(py, e));
    }
    let spec: String = if let Ok(s) = obj.extract::<String>() {
        s
    } else if let Ok(p) = obj.extract::<std::path::PathBuf>() {
        p.to_str()
            .ok_or_else(|| PyValueError::new_err(format!("the {what} path is not valid UTF-8")))?
            .to_owned()
    } else {
        return Err(PyTypeError::new_err(format!(
            "the {what} must be a descriptor (int), an object with fileno(), or a spec string \
             (a path, '-', 'fd:N', 'tcp:HOST:PORT', 'tcp-listen:HOST:PORT', 'udp:HOST:PORT', \
             'unix:PATH', 'ring:NAME')"
        )));
    };
    // A sink directory takes the source file's name (as `cp FILE DIR`).
    let spec = match source_spec {
        Some(src) if role == Role::Sink => Spec::sink_for(src, &spec).into_owned(),
        _ => spec,
    };
    // Connecting or accepting may take a while: without the GIL.
    py.detach(|| IoObject::open(&spec, role))
        .map_err(|e| errors::raise(py, e))
}

/// Duplicate a descriptor (close-on-exec); the caller keeps its own.
fn dup_fd(fd: i32) -> Result<OwnedFd, zcio::Errno> {
    if fd < 0 {
        return Err(zcio::Errno::BADF);
    }
    // SAFETY: borrowed only for the duplication below (as the library's
    // `fd:N` spec does); a number that is not an open descriptor makes
    // fcntl(F_DUPFD_CLOEXEC) fail with EBADF, nothing else uses it.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    b.try_clone_to_owned()
        .map_err(|e| zcio::Errno::from_io_error(&e).unwrap_or(zcio::Errno::BADF))
}

/// Exceptions of the completion callback, by the sequence number of the
/// completion they belong to (attached to it when `wait` collects it).
type CallbackErrors = Arc<Mutex<Vec<(u64, PyErr)>>>;

/// A standing association between a source and a sink.
#[pyclass(module = "zcio._zcio", frozen)]
pub(crate) struct Association {
    a: Mutex<Option<RsAssociation>>,
    r: Remote,
    callback_errors: CallbackErrors,
    /// Completions queued so far (counted on the worker, by the callback
    /// installed at creation or by `on_complete`).
    queued: Arc<AtomicU64>,
    /// Completions `wait` collected so far.
    collected: AtomicU64,
}

impl Association {
    /// Run `f` on the association, taken whole: `SpliceError` (EBUSY)
    /// while a `run` in another thread has it; closed: `ValueError`.
    fn with<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut RsAssociation) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut g = match self.a.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(errors::raise(py, RsSpliceError::Busy)),
        };
        match g.as_mut() {
            Some(a) => f(a),
            None => Err(errors::closed("association")),
        }
    }

    /// A collected completion, with the callback's exception for it.
    fn collected(&self, py: Python<'_>, c: &RsCompletion) -> Completion {
        let seq = self.collected.fetch_add(1, Ordering::Relaxed) + 1;
        let mut errs = self
            .callback_errors
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let err = errs
            .iter()
            .position(|(n, _)| *n == seq)
            .map(|i| errs.remove(i).1);
        errs.retain(|(n, _)| *n > seq);
        drop(errs);
        Completion::new(py, c, err)
    }
}

/// The completion callback: counts the completion, then asks `cb` (if
/// any) what next.
fn install_callback(
    a: &mut RsAssociation,
    cb: Option<Py<PyAny>>,
    queued: Arc<AtomicU64>,
    errs: CallbackErrors,
) {
    let mut last = Increment::Default;
    a.on_complete(move |c| {
        let seq = queued.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(cb) = cb.as_ref() else {
            return Next::Stop;
        };
        // Never unwind into the worker: a panic here is a stop.
        catch_unwind(AssertUnwindSafe(|| {
            Python::attach(|py| {
                let comp = Completion::new(py, c, None);
                let r = cb
                    .bind(py)
                    .call1((comp,))
                    .and_then(|v| next_from(&v, &mut last));
                match r {
                    Ok(n) => n,
                    Err(e) => {
                        errs.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((seq, e));
                        Next::Stop
                    }
                }
            })
        }))
        .unwrap_or(Next::Stop)
    });
}

#[pymethods]
impl Association {
    /// run(nbytes=None): move an increment — None: until the source ends;
    /// ``zcio.DEFAULT``: 4 MiB; n: n bytes — and block (without the GIL)
    /// until it is moved, the source ends, an error ends it, or ``stop()``
    /// is called from another thread. Returns a ``Completion``; an error
    /// that ended an increment after some bytes moved is in its ``error``,
    /// one before any moved is raised (``SpliceError``). Ctrl-C stops
    /// flow and raises ``KeyboardInterrupt``.
    #[pyo3(signature = (nbytes=None))]
    fn run(&self, py: Python<'_>, nbytes: Option<&Bound<'_, PyAny>>) -> PyResult<Completion> {
        let inc = increment(nbytes)?;
        let r = self.with(py, |a| {
            let (tx, rx) = std::sync::mpsc::channel();
            // Shared with the GIL-free wait below (which needs `Sync`).
            let rx = Mutex::new(rx);
            std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name("zcio-py-run".into())
                    .spawn_scoped(s, move || {
                        let _ = tx.send(a.run(inc));
                    })
                    .map_err(|e| {
                        errors::raise(
                            py,
                            RsSpliceError::Setup {
                                op: "spawn a thread for run",
                                errno: zcio::Errno::from_io_error(&e).unwrap_or(zcio::Errno::AGAIN),
                            },
                        )
                    })?;
                let got = blocking(py, Deadline::new(Timeout::Forever), |slice| {
                    match rx
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .recv_timeout(slice)
                    {
                        Ok(r) => Some(Some(r)),
                        Err(RecvTimeoutError::Timeout) => None,
                        // The thread ended without an answer (it panicked).
                        Err(RecvTimeoutError::Disconnected) => Some(None),
                    }
                });
                match got {
                    Ok(Some(Some(r))) => Ok(r),
                    Ok(_) => Err(errors::internal("the run thread ended without a result")),
                    Err(interrupt) => {
                        // Ctrl-C: stop flow, let the run end (within a
                        // step), then raise.
                        self.r.stop();
                        py.detach(|| drop(rx.lock().map(|r| r.recv())));
                        Err(interrupt)
                    }
                }
            })
        })?;
        match r {
            Ok(c) => Ok(Completion::new(py, &c, None)),
            Err(e) => Err(errors::raise(py, e)),
        }
    }

    /// start(nbytes=None): start an increment (as for ``run``) on the
    /// association's worker thread and return at once. Its end goes to
    /// the ``on_complete`` callback, then to ``wait()``; ``fileno()``
    /// becomes readable.
    #[pyo3(signature = (nbytes=None))]
    fn start(&self, py: Python<'_>, nbytes: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let inc = increment(nbytes)?;
        self.with(py, |a| a.start(inc).map_err(|e| errors::raise(py, e)))
    }

    /// wait(timeout=None): the next completion of an asynchronous
    /// increment, waiting at most ``timeout`` seconds (None: up to the
    /// default bound, one hour; 0: do not wait; ``math.inf``: until it
    /// comes) without the GIL. None if none came in time, or if nothing
    /// runs or waits to be collected.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Completion>> {
        let deadline = Deadline::new(Timeout::from_py(
            timeout,
            zcio::splice::Association::WAIT_BOUND,
        )?);
        let r = self.r.clone();
        let got = blocking(py, deadline, |slice| match r.wait(slice) {
            Some(c) => Some(Some(c)),
            None if !r.status().active => Some(None),
            None => None,
        })?;
        Ok(got.flatten().map(|c| self.collected(py, &c)))
    }

    /// fileno(): a descriptor that polls readable while a completion waits
    /// for ``wait()`` (for select / selectors / asyncio's add_reader). It
    /// belongs to the association: do not close it.
    fn fileno(&self) -> i32 {
        self.r.as_fd().as_raw_fd()
    }

    /// stop(): stop flow within one step (a ``run`` in another thread
    /// returns, an asynchronous increment completes, with ``stopped``).
    /// Harmless when nothing runs; usable from any thread.
    fn stop(&self) {
        self.r.stop();
    }

    /// status(): the status bits and counters (a ``SpliceStatus``);
    /// readable while data flows, from any thread.
    fn status(&self) -> SpliceStatus {
        self.r.status().into()
    }

    /// stats() -> dict: the live counters (what the association's registry
    /// entry shows to ``zcio ls``): started, completed, failed,
    /// moved_bytes, running (bool); readable while data flows.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.r.status();
        let d = PyDict::new(py);
        d.set_item("started", s.started)?;
        d.set_item("completed", s.completed)?;
        d.set_item("failed", s.failed)?;
        d.set_item("moved_bytes", s.moved)?;
        d.set_item("running", s.active)?;
        Ok(d)
    }

    /// push(spec): push the processing module ``spec`` ("name" or
    /// "name:key=value,…": count, crc32c, inet, zstd, unzstd, seal, open,
    /// ratelimit, tap, or one loaded with ``load_module``) at the sink end
    /// of the stack; the first module moves the association to the buffer
    /// path. Between increments only.
    fn push(&self, py: Python<'_>, spec: &str) -> PyResult<()> {
        let m = open_module(py, spec)?;
        self.with(py, |a| a.push(m).map_err(|e| errors::raise(py, e)))
    }

    /// pop(): pop the module at the sink end (its buffered output is
    /// flushed to the sink first) and return its name, or None if no
    /// module is stacked. Popping the last one moves the association back
    /// to the fastest mover for its pair. Between increments only.
    fn pop(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |a| match py.detach(|| a.pop()) {
            Ok(m) => Ok(m.map(|m| m.name().to_owned())),
            Err(e) => Err(errors::raise(py, e)),
        })
    }

    /// finish(): end the stream here, before the source's end (a copy
    /// limited to a byte count): every stacked module flushes what it holds
    /// through the modules after it to the sink, as at the end of the source
    /// (a zstd frame or a sealed stream is complete); later increments
    /// report the end at once. Between increments only.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |a| {
            py.detach(|| a.finish()).map_err(|e| errors::raise(py, e))
        })
    }

    /// control(which, key, value=None): control read (value None) or write
    /// of a stacked module, ``which`` its position from the source side
    /// (int) or its name; returns the reply text. Every module answers
    /// "stats"; crc32c answers "value". Between increments only.
    #[pyo3(signature = (which, key, value=None))]
    fn control(
        &self,
        py: Python<'_>,
        which: &Bound<'_, PyAny>,
        key: &str,
        value: Option<&str>,
    ) -> PyResult<String> {
        let which: String = if let Ok(i) = which.extract::<usize>() {
            i.to_string()
        } else if let Ok(s) = which.extract::<String>() {
            s
        } else {
            return Err(PyTypeError::new_err(
                "which must be a module's position (int) or name (str)",
            ));
        };
        self.with(py, |a| {
            a.control(which.as_str(), key, value)
                .map_err(|e| errors::raise(py, e))
        })
    }

    /// module_stats(): every stacked module's counters as of the last step,
    /// in data order: [(name, {counter: value})]. Readable while data flows.
    fn module_stats<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, Bound<'py, PyDict>)>> {
        self.r
            .module_stats()
            .into_iter()
            .map(|(name, stats)| {
                let d = PyDict::new(py);
                for (k, v) in stats {
                    d.set_item(k, v)?;
                }
                Ok((name, d))
            })
            .collect()
    }

    /// on_complete(callback): call ``callback(completion)`` on the
    /// association's worker thread (GIL held) when an asynchronous
    /// increment ends, before ``wait()`` gets it. Its return value may
    /// start the next increment at once: None/False stops; True repeats
    /// the increment; ``zcio.DEFAULT`` or a byte count starts that. An
    /// exception stops flow and is attached to the completion
    /// (``callback_error``). None removes the callback.
    fn on_complete(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        self.with(py, |a| {
            if a.status().active {
                return Err(errors::raise(py, RsSpliceError::Busy));
            }
            install_callback(
                a,
                callback,
                Arc::clone(&self.queued),
                Arc::clone(&self.callback_errors),
            );
            Ok(())
        })
    }

    /// on_quench(callback): call ``callback(quenched)`` on the
    /// association's worker thread (GIL held) when the sink stops taking
    /// data at once (``True``: the source is being held back, or its blocks
    /// dropped) and when it takes data again (``False``). Buffer path only
    /// (an association with modules, a ring or a channel). An exception
    /// in it goes to ``sys.unraisablehook``; flow goes on. None removes
    /// the callback. Between increments only.
    fn on_quench(&self, py: Python<'_>, callback: Option<Py<PyAny>>) -> PyResult<()> {
        self.with(py, |a| {
            if a.status().active {
                return Err(errors::raise(py, RsSpliceError::Busy));
            }
            let r = match callback {
                None => a.on_quench(|_| {}),
                Some(cb) => a.on_quench(move |quenched| {
                    // Never unwind into the worker.
                    let _ = catch_unwind(AssertUnwindSafe(|| {
                        Python::attach(|py| {
                            if let Err(e) = cb.bind(py).call1((quenched,)) {
                                e.write_unraisable(py, Some(cb.bind(py)));
                            }
                        })
                    }));
                }),
            };
            r.map_err(|e| errors::raise(py, e))
        })
    }

    /// set_drop_when_behind(on): whether blocks the sink cannot take at
    /// once are dropped (and counted) instead of waited for; the default
    /// is on for active sources (UDP, rings), off for passive ones.
    /// Between increments only.
    fn set_drop_when_behind(&self, py: Python<'_>, on: bool) -> PyResult<()> {
        self.with(py, |a| {
            a.set_drop_when_behind(on).map_err(|e| errors::raise(py, e))
        })
    }

    /// close(): stop flow, wait for the worker, close both endpoints; the
    /// final ``SpliceStatus``. Modules were flushed if the source ended;
    /// otherwise what they buffered is discarded (pop them first). Closing
    /// twice returns the final status again.
    fn close(&self, py: Python<'_>) -> SpliceStatus {
        self.r.stop();
        // Blocking lock without the GIL: a run in another thread ends
        // within a step of the stop above.
        let taken = py.detach(|| self.a.lock().unwrap_or_else(|p| p.into_inner()).take());
        match taken {
            Some(a) => py.detach(move || a.close()).into(),
            None => self.r.status().into(),
        }
    }

    /// Whether ``close()`` was called.
    #[getter]
    fn closed(&self) -> bool {
        match self.a.try_lock() {
            Ok(g) => g.is_none(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().is_none(),
            Err(TryLockError::WouldBlock) => false,
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
        let s = self.r.status();
        format!(
            "zcio.Association({:?} -> {:?}, mover={:?}, moved={}, closed={})",
            s.source,
            s.sink,
            mover_name(s.mover),
            s.moved,
            py_bool(self.closed())
        )
    }
}

impl Drop for Association {
    fn drop(&mut self) {
        // Dropped by the garbage collector with the GIL held: the worker may
        // be waiting for the GIL to call the callback, so join it without.
        let a = self.a.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(a) = a {
            Python::attach(|py| py.detach(move || drop(a)));
        }
    }
}

/// The callback's answer → what happens next.
fn next_from(v: &Bound<'_, PyAny>, last: &mut Increment) -> PyResult<Next> {
    if v.is_none() {
        return Ok(Next::Stop);
    }
    if let Ok(b) = v.cast::<pyo3::types::PyBool>() {
        return Ok(if b.is_true() {
            Next::Continue(*last)
        } else {
            Next::Stop
        });
    }
    let inc = increment(Some(v))?;
    *last = inc;
    Ok(Next::Continue(inc))
}

/// The module specs of a ``modules=`` argument.
fn module_specs(modules: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<String>> {
    let Some(m) = modules else {
        return Ok(Vec::new());
    };
    if m.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyTypeError::new_err(
            "modules must be a list of module specs, not one string",
        ));
    }
    m.try_iter()?.map(|x| x?.extract::<String>()).collect()
}

/// splice(src, dst, modules=()): associate ``src`` with ``dst`` — each a
/// descriptor (int, duplicated: you keep yours), an object with
/// ``fileno()`` (duplicated), a spec string (a path, '-', 'fd:N',
/// 'tcp:HOST:PORT', 'tcp-listen:HOST:PORT', 'udp:HOST:PORT', 'unix:PATH',
/// 'ring:NAME'), or a ``zcio.Channel`` (taken over: the association sends
/// each block as a message, by reference, or writes each message it
/// receives; the source ends when the peer closes) — and push ``modules``
/// in data order. No data flows until
/// ``run`` or ``start``.
#[pyfunction]
#[pyo3(signature = (src, dst, modules=None))]
pub(crate) fn splice(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    modules: Option<&Bound<'_, PyAny>>,
) -> PyResult<Association> {
    // Modules first: a bad name fails before a sink file is truncated.
    let stack = module_specs(modules)?
        .iter()
        .map(|s| open_module(py, s))
        .collect::<PyResult<Vec<_>>>()?;
    let (src_ch, dst_ch) = (src.cast::<Channel>().ok(), dst.cast::<Channel>().ok());
    let s = match src_ch {
        Some(_) => None,
        None => Some(endpoint(py, src, Role::Source, fd_of(py, dst)?, None)?),
    };
    let src_spec = match (&src_ch, fd_of(py, src)?) {
        (None, None) => src
            .extract::<std::path::PathBuf>()
            .ok()
            .and_then(|p| p.to_str().map(str::to_owned)),
        _ => None,
    };
    let d = match dst_ch {
        Some(_) => None,
        None => Some(endpoint(py, dst, Role::Sink, None, src_spec.as_deref())?),
    };
    // One channel cannot be both ends: refused before either is taken (taking the
    // source and then failing on the sink would lose the caller's channel).
    if let (Some(a), Some(b)) = (&src_ch, &dst_ch) {
        if a.is(b) {
            return Err(PyValueError::new_err(
                "the same Channel cannot be both source and sink: pass two channels",
            ));
        }
    }
    // Channels are taken last: a failure above leaves them to the caller.
    let take = |ch: Option<&Bound<'_, Channel>>| -> PyResult<IoObject> {
        let ch = ch.ok_or_else(|| PyValueError::new_err("no endpoint"))?;
        Ok(IoObject::channel(ch.get().take()?, "channel"))
    };
    let s = match s {
        Some(s) => s,
        None => take(src_ch)?,
    };
    let d = match d {
        Some(d) => d,
        None => take(dst_ch)?,
    };
    let mut a = RsAssociation::new(s, d).map_err(|e| errors::raise(py, e))?;
    for m in stack {
        a.push(m).map_err(|e| errors::raise(py, e))?;
    }
    let queued = Arc::new(AtomicU64::new(0));
    let callback_errors: CallbackErrors = Arc::new(Mutex::new(Vec::new()));
    install_callback(
        &mut a,
        None,
        Arc::clone(&queued),
        Arc::clone(&callback_errors),
    );
    Ok(Association {
        r: a.remote(),
        a: Mutex::new(Some(a)),
        callback_errors,
        queued,
        collected: AtomicU64::new(0),
    })
}

/// cp(src, dst, modules=()): copy ``src`` to ``dst`` (as for ``splice``)
/// through ``modules`` until the source ends, without the GIL; the final
/// ``SpliceStatus``. Ctrl-C stops the copy (``KeyboardInterrupt``).
#[pyfunction]
#[pyo3(signature = (src, dst, modules=None))]
pub(crate) fn cp(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    modules: Option<&Bound<'_, PyAny>>,
) -> PyResult<SpliceStatus> {
    let a = splice(py, src, dst, modules)?;
    let c = a.run(py, None)?;
    if let Some(e) = c.error {
        a.close(py);
        return Err(PyErr::from_value(e.into_bound(py)));
    }
    Ok(a.close(py))
}

/// load_module(path): load the user module in the shared object ``path``
/// (the C ABI of include/zcio_module.h; example: c/modules/rot13.c) and
/// register it, for ``push``, ``splice`` and ``cp`` in this process, under
/// the name it declares, which is returned. Trust: loading runs the
/// object's initialisers and its code runs inside this process with its
/// privileges — load only modules you trust as much as your own code.
#[pyfunction]
pub(crate) fn load_module(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
    let r = py.detach(|| {
        let mut reg = registry().write().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the caller vouches for the module (documented above, the
        // same contract as Registry::load).
        unsafe { reg.load(&path) }
    });
    r.map_err(|e| errors::raise(py, e))
}

/// module_names(): the names ``push``, ``splice(modules=…)`` and ``cp``
/// can open — the built-ins and those ``load_module`` added — sorted.
#[pyfunction]
pub(crate) fn module_names() -> Vec<String> {
    let reg = registry().read().unwrap_or_else(|p| p.into_inner());
    let mut names: Vec<String> = reg.names().into_iter().map(str::to_owned).collect();
    names.sort_unstable();
    names
}

// The pyclass is frozen (shared between threads): Association and Remote
// must be Send + Sync.
const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<Association>();
};
