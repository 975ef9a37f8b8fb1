//! Rust errors → the Python exceptions of `zcio._errors`, in one mapping
//! ([`raise`]) over `zcio::Error` and its `ErrorKind`. The exception classes are defined in Python (so they can
//! derive from `TimeoutError`, `ConnectionError` … as well) and looked up
//! once.

use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use zcio::proxy::ProxyError;
use zcio::Error;

/// The exception classes of `zcio._errors`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Class {
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

impl Class {
    fn class_name(self) -> &'static str {
        match self {
            Class::Base => "ZcioError",
            Class::Disconnected => "Disconnected",
            Class::TimedOut => "TimedOut",
            Class::Full => "Full",
            Class::Empty => "Empty",
            Class::Malformed => "MalformedMessage",
            Class::PeerFault => "PeerFault",
            Class::Connect => "ConnectError",
            Class::Alloc => "AllocError",
            Class::PoolExhausted => "PoolExhausted",
            Class::AllocTimedOut => "AllocTimedOut",
            Class::Ring => "RingError",
            Class::Lapped => "Lapped",
            Class::Splice => "SpliceError",
            Class::Module => "ModuleError",
        }
    }
}

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// An exception of class `class` with message `msg` and, if known, the
/// kernel's `errno`.
pub(crate) fn err(
    py: Python<'_>,
    class: Class,
    msg: impl Into<String>,
    errno: Option<i32>,
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = ERRORS.get_or_try_init(py, || py.import("zcio._errors").map(Bound::unbind))?;
        let cls = module.bind(py).getattr(class.class_name())?;
        let inst = cls.call1((msg.into(),))?;
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
    class: Class,
    msg: impl Into<String>,
    errno: Option<i32>,
    attrs: &[(&str, i64)],
) -> PyErr {
    let e = err(py, class, msg, errno);
    for (k, v) in attrs {
        let _ = e.value(py).setattr(*k, *v);
    }
    e
}

/// Which way a "nothing available now" went, for the Python class
/// (`Full`, `Empty`, `PoolExhausted`: all `WouldBlock`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Send,
    Recv,
    Alloc,
}

fn side(e: &Error) -> Side {
    use zcio::rendezvous::RendezvousCallError as Call;
    use zcio::semantics::{OutputError as Out, SetupError as Setup};
    match e {
        Error::Region(_)
        | Error::Alloc(_)
        | Error::Freeze(_)
        | Error::Arena(_)
        | Error::SemanticInput(zcio::semantics::InputError::Alloc(_))
        | Error::SemanticSetup(Setup::Arena(_) | Setup::Alloc(_))
        | Error::SemanticOutput(Out::Alloc(_) | Out::Arena(_))
        | Error::Module(_) => Side::Alloc,
        Error::Send(_)
        | Error::RingWrite(_)
        | Error::RendezvousSend(_)
        | Error::RendezvousCall(Call::Send(_))
        | Error::Proxy(ProxyError::QuotaExceeded)
        | Error::SemanticSetup(Setup::Send(_))
        | Error::SemanticOutput(_) => Side::Send,
        _ => Side::Recv,
    }
}

/// The Python exception of any zcio error: the one place Rust errors
/// become exceptions. The class follows the error's
/// [`ErrorKind`](zcio::ErrorKind) (the table is in its docs), except that
/// set-up and naming failures keep their family's class (`ConnectError`,
/// `RingError`, `SpliceError`, `ModuleError`). `errno` is the error's own
/// errno; the family classes and `WouldBlock` fall back to the kind's
/// (`EAGAIN`, `EINVAL` …), the other situation classes (`TimedOut`,
/// `Disconnected`, `PeerFault` …) carry none.
pub(crate) fn raise(py: Python<'_>, e: impl Into<Error>) -> PyErr {
    use zcio::ring::ReadError;
    use zcio::ErrorKind as K;
    let e = e.into();
    let text = e.to_string();
    let kind = e.kind();
    let errno = e.errno().or(kind.errno()).map(|n| n.raw_os_error());
    let errno_own = e.errno().map(|n| n.raw_os_error());
    // Families whose class says more than the kind.
    match &e {
        Error::Module(_) => return err(py, Class::Module, text, errno_own),
        Error::Splice(_) if kind == K::Module => return err(py, Class::Module, text, errno_own),
        Error::Splice(_) => return err(py, Class::Splice, text, errno),
        Error::RingOpen(_) => return err(py, Class::Ring, text, errno),
        Error::Connect(_) if kind != K::TimedOut => return err(py, Class::Connect, text, errno),
        Error::SemanticSetup(_) if kind == K::Protocol => {
            return err(py, Class::Connect, text, None)
        }
        _ => {}
    }
    match kind {
        K::WouldBlock => {
            let class = match side(&e) {
                Side::Send => Class::Full,
                Side::Recv => Class::Empty,
                Side::Alloc => Class::PoolExhausted,
            };
            err(py, class, text, errno)
        }
        K::Dropped => err(py, Class::Full, text, None),
        K::TimedOut if side(&e) == Side::Alloc => err(py, Class::AllocTimedOut, text, None),
        K::TimedOut => err(py, Class::TimedOut, text, None),
        K::Disconnected | K::ProducerFailed => {
            let attrs: &[(&str, i64)] = match &e {
                Error::RingRead(ReadError::Disconnected { pid }) => &[("pid", i64::from(*pid))],
                Error::RingRead(ReadError::ProducerFailed { pid, code }) => {
                    &[("pid", i64::from(*pid)), ("code", i64::from(*code))]
                }
                _ => &[],
            };
            err_with(py, Class::Disconnected, text, None, attrs)
        }
        K::PeerFault | K::Aborted | K::Protocol => err(py, Class::PeerFault, text, None),
        K::Malformed => err(py, Class::Malformed, text, None),
        K::Lapped => err(py, Class::Lapped, text, None),
        K::InvalidInput | K::TooLarge | K::OutOfRange => {
            let v = PyValueError::new_err(text);
            if let Error::SemanticInput(zcio::semantics::InputError::TooShort { needed }) = e {
                let _ = v.value(py).setattr("needed", needed);
            }
            v
        }
        K::Internal => internal(&text),
        _ => {
            let class = match (&e, side(&e)) {
                (Error::RingRead(_) | Error::RingWrite(_), _) => Class::Ring,
                (_, Side::Alloc) => Class::Alloc,
                _ => Class::Base,
            };
            err(py, class, text, errno_own)
        }
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
