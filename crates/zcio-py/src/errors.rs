//! Rust errors → the Python exceptions of `zcio._errors`, one mapping per
//! error family. The exception classes are defined in Python (so they can
//! derive from `TimeoutError`, `ConnectionError` … as well) and looked up
//! once.

use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use zcio::asyncipc::AsyncError;
use zcio::rendezvous::IpcError;
use zcio::ring::{OpenError, ReadError, WriteError};
use zcio::splice::module::ModuleError;
use zcio::splice::SpliceError;
use zcio::{AllocError, ConnectError, RecvTimeoutError, RegionError, SendErrorKind, TryRecvError};

/// The exception classes of `zcio._errors`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Base,
    Disconnected,
    TimedOut,
    Full,
    Empty,
    Malformed,
    PeerFault,
    Connect,
    Alloc,
    PoolExhausted,
    AllocTimedOut,
    Ring,
    Lapped,
    Splice,
    Module,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Base => "ZcioError",
            Kind::Disconnected => "Disconnected",
            Kind::TimedOut => "TimedOut",
            Kind::Full => "Full",
            Kind::Empty => "Empty",
            Kind::Malformed => "MalformedMessage",
            Kind::PeerFault => "PeerFault",
            Kind::Connect => "ConnectError",
            Kind::Alloc => "AllocError",
            Kind::PoolExhausted => "PoolExhausted",
            Kind::AllocTimedOut => "AllocTimedOut",
            Kind::Ring => "RingError",
            Kind::Lapped => "Lapped",
            Kind::Splice => "SpliceError",
            Kind::Module => "ModuleError",
        }
    }
}

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// An exception of class `kind` with message `msg` and, if known, the
/// kernel's `errno`.
pub(crate) fn err(py: Python<'_>, kind: Kind, msg: impl Into<String>, errno: Option<i32>) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = ERRORS.get_or_try_init(py, || py.import("zcio._errors").map(Bound::unbind))?;
        let class = module.bind(py).getattr(kind.class_name())?;
        let inst = class.call1((msg.into(),))?;
        if let Some(e) = errno {
            inst.setattr("errno", e)?;
        }
        Ok(PyErr::from_value(inst))
    };
    build().unwrap_or_else(|e| e)
}

/// Like [`err`], with an extra attribute (`pid`, `code` …).
pub(crate) fn err_with(
    py: Python<'_>,
    kind: Kind,
    msg: impl Into<String>,
    errno: Option<i32>,
    attrs: &[(&str, i64)],
) -> PyErr {
    let e = err(py, kind, msg, errno);
    for (k, v) in attrs {
        let _ = e.value(py).setattr(*k, *v);
    }
    e
}

fn errno_of(e: zcio::Errno) -> Option<i32> {
    Some(e.raw_os_error())
}

/// A failed send's reason.
pub(crate) fn send(py: Python<'_>, kind: SendErrorKind) -> PyErr {
    let text = kind.to_string();
    match kind {
        SendErrorKind::Full | SendErrorKind::TooManyInFlight(_) => err(py, Kind::Full, text, None),
        SendErrorKind::TimedOut => err(py, Kind::TimedOut, text, None),
        SendErrorKind::Disconnected => err(py, Kind::Disconnected, text, None),
        SendErrorKind::Empty | SendErrorKind::TooLarge(_) => PyValueError::new_err(text),
        SendErrorKind::Os(e) => err(py, Kind::Base, text, errno_of(e)),
        SendErrorKind::Corrupt | SendErrorKind::HoldExpired => err(py, Kind::PeerFault, text, None),
        _ => err(py, Kind::Base, text, None),
    }
}

/// A failed receive (`timed_out_kind` is `Empty` for a non-waiting
/// receive, `TimedOut` otherwise).
pub(crate) fn recv(py: Python<'_>, e: RecvTimeoutError) -> PyErr {
    let text = e.to_string();
    match e {
        RecvTimeoutError::TimedOut => err(py, Kind::TimedOut, text, None),
        RecvTimeoutError::Disconnected => err(py, Kind::Disconnected, text, None),
        RecvTimeoutError::Malformed(_) => err(py, Kind::Malformed, text, None),
        RecvTimeoutError::Corrupt => err(py, Kind::PeerFault, text, None),
        _ => err(py, Kind::Base, text, None),
    }
}

/// A failed non-waiting receive.
pub(crate) fn try_recv(py: Python<'_>, e: TryRecvError) -> PyErr {
    let text = e.to_string();
    match e {
        TryRecvError::Empty => err(py, Kind::Empty, text, None),
        TryRecvError::Disconnected => err(py, Kind::Disconnected, text, None),
        TryRecvError::Malformed(_) => err(py, Kind::Malformed, text, None),
        TryRecvError::Corrupt => err(py, Kind::PeerFault, text, None),
        _ => err(py, Kind::Base, text, None),
    }
}

/// Channel set-up.
pub(crate) fn connect(py: Python<'_>, e: &ConnectError) -> PyErr {
    let text = e.to_string();
    match e {
        ConnectError::Os { errno, .. } | ConnectError::Listen { errno, .. } => {
            err(py, Kind::Connect, text, errno_of(*errno))
        }
        ConnectError::TimedOut => err(py, Kind::TimedOut, text, None),
        ConnectError::Refused => err(
            py,
            Kind::Connect,
            text,
            Some(zcio::Errno::ACCESS.raw_os_error()),
        ),
        ConnectError::Region(r) => region(py, r),
        _ => err(py, Kind::Connect, text, None),
    }
}

/// Region creation or sealing.
pub(crate) fn region(py: Python<'_>, e: &RegionError) -> PyErr {
    let errno = match e {
        RegionError::Os { errno, .. } => errno_of(*errno),
        RegionError::NoMemory { .. } => errno_of(zcio::Errno::NOMEM),
        _ => None,
    };
    err(py, Kind::Alloc, e.to_string(), errno)
}

/// Buffer allocation.
pub(crate) fn alloc(py: Python<'_>, e: &AllocError) -> PyErr {
    let text = e.to_string();
    match e {
        AllocError::WouldBlock(_) => err(py, Kind::PoolExhausted, text, None),
        AllocError::TimedOut(_) => err(py, Kind::AllocTimedOut, text, None),
        AllocError::BadSize(..) => PyValueError::new_err(text),
        AllocError::Region(r) => region(py, r),
        _ => err(py, Kind::Alloc, text, None),
    }
}

/// Ring creation or attachment.
pub(crate) fn ring_open(py: Python<'_>, e: &OpenError) -> PyErr {
    let text = e.to_string();
    let errno = match e {
        OpenError::NotFound(_) | OpenError::NoDirectory(_) => Some(zcio::Errno::NOENT),
        OpenError::Exists(_) => Some(zcio::Errno::EXIST),
        OpenError::PermissionDenied(_) => Some(zcio::Errno::ACCESS),
        OpenError::InvalidName(_) | OpenError::InvalidConfig(_) => Some(zcio::Errno::INVAL),
        OpenError::NoSpace { .. } => Some(zcio::Errno::NOSPC),
        OpenError::ProducerBusy(_) => Some(zcio::Errno::BUSY),
        OpenError::Os(e) => Some(*e),
        _ => None,
    };
    err(py, Kind::Ring, text, errno.and_then(errno_of))
}

/// A failed ring write (`WouldBlock` only for a non-waiting write).
pub(crate) fn ring_write(py: Python<'_>, e: &WriteError) -> PyErr {
    let text = e.to_string();
    match e {
        WriteError::WouldBlock | WriteError::Dropped => err(py, Kind::Full, text, None),
        WriteError::TimedOut => err(py, Kind::TimedOut, text, None),
        WriteError::TooLarge { .. } => PyValueError::new_err(text),
        WriteError::Corrupt(_) => err(py, Kind::PeerFault, text, None),
        _ => err(py, Kind::Ring, text, None),
    }
}

/// A failed ring read.
pub(crate) fn ring_read(py: Python<'_>, e: &ReadError) -> PyErr {
    let text = e.to_string();
    match e {
        ReadError::WouldBlock => err(py, Kind::Empty, text, None),
        ReadError::TimedOut => err(py, Kind::TimedOut, text, None),
        ReadError::ProducerDied(pid) => err_with(
            py,
            Kind::Disconnected,
            text,
            None,
            &[("pid", i64::from(*pid))],
        ),
        ReadError::ProducerFailed { pid, code } => err_with(
            py,
            Kind::Disconnected,
            text,
            None,
            &[("pid", i64::from(*pid)), ("code", i64::from(*code))],
        ),
        ReadError::Lapped => err(py, Kind::Lapped, text, None),
        ReadError::BufferTooSmall { .. } => PyValueError::new_err(text),
        ReadError::Corrupt(_) => err(py, Kind::PeerFault, text, None),
        _ => err(py, Kind::Ring, text, None),
    }
}

/// `BufferError` (views still exported, or a writable view asked of
/// read-only memory).
pub(crate) fn buffer(msg: impl Into<String>) -> PyErr {
    PyBufferError::new_err(msg.into())
}

/// An object used after `close()`/`release()`.
pub(crate) fn closed(what: &str) -> PyErr {
    PyValueError::new_err(format!("{what} is closed"))
}

/// A state the binding never expects (a lock poisoned by a panic).
pub(crate) fn internal(what: &str) -> PyErr {
    PyRuntimeError::new_err(format!("zcio internal error: {what}"))
}

/// A failed rendezvous operation. `Protocol` is the partner's fault
/// (`PeerFault`); `TooLarge` is the caller's (`ValueError`).
pub(crate) fn ipc(py: Python<'_>, e: IpcError) -> PyErr {
    let text = e.to_string();
    match e {
        IpcError::Full => err(py, Kind::Full, text, None),
        IpcError::Empty => err(py, Kind::Empty, text, None),
        IpcError::TimedOut => err(py, Kind::TimedOut, text, None),
        IpcError::Disconnected => err(py, Kind::Disconnected, text, None),
        IpcError::Protocol(_) => err(py, Kind::PeerFault, text, None),
        IpcError::TooLarge => PyValueError::new_err(text),
        IpcError::Os { errno, .. } => err(py, Kind::Base, text, errno_of(errno)),
        _ => err(py, Kind::Base, text, None),
    }
}

/// A failed asynchronous operation: the rendezvous error behind it as
/// [`ipc`]; a full queue is `Full`; an endpoint closed before the message
/// was handled is `Disconnected`.
pub(crate) fn async_ipc(py: Python<'_>, e: AsyncError) -> PyErr {
    let text = e.to_string();
    match e {
        AsyncError::Ipc(i) => ipc(py, i),
        AsyncError::QuotaExceeded => err(py, Kind::Full, text, None),
        AsyncError::Empty => err(py, Kind::Empty, text, None),
        AsyncError::TimedOut => err(py, Kind::TimedOut, text, None),
        AsyncError::Closed => err(py, Kind::Disconnected, text, None),
        AsyncError::Taken => PyValueError::new_err(text),
        _ => err(py, Kind::Base, text, None),
    }
}

/// The errno of an association failure, where one is known.
fn splice_errno(e: &SpliceError) -> Option<i32> {
    match e {
        SpliceError::Io { errno, .. } | SpliceError::Setup { errno, .. } => errno_of(*errno),
        SpliceError::Spec { errno, .. } => errno.and_then(errno_of),
        SpliceError::SinkClosed => errno_of(zcio::Errno::PIPE),
        SpliceError::Busy => errno_of(zcio::Errno::BUSY),
        _ => None,
    }
}

/// A failed association operation: `ModuleError` for a module's failure,
/// `SpliceError` (an `OSError`, with `errno` where the system gave one)
/// for the rest.
pub(crate) fn splice(py: Python<'_>, e: &SpliceError) -> PyErr {
    let kind = match e {
        SpliceError::Module { .. } => Kind::Module,
        _ => Kind::Splice,
    };
    err(py, kind, e.to_string(), splice_errno(e))
}

/// A module that cannot be found, opened, loaded or controlled.
pub(crate) fn module(py: Python<'_>, e: &ModuleError) -> PyErr {
    err(py, Kind::Module, e.to_string(), None)
}
