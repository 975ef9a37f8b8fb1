//! What the async methods of every transport share: the module `zcio._aio`
//! (asyncio on doorbells), the checked `timeout` of an async call, and an
//! end's bell object (a `zcio._aio.Bell` or one of its subclasses, made on
//! the first async call and woken when the end is closed).

use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use crate::wait::Timeout;

/// The module `zcio._aio`.
pub(crate) fn aio(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static AIO: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    AIO.get_or_try_init(py, || py.import("zcio._aio").map(Bound::unbind))
        .map(|m| m.bind(py))
}

/// A `timeout` argument of an async call, checked at the call (as the
/// blocking calls check theirs; `None` is `bound`, the call's configured
/// bound), as `zcio._aio` takes it: `None` (no limit: `math.inf`), `0.0`
/// (do not wait) or seconds.
pub(crate) fn async_timeout(timeout: Option<f64>, bound: Duration) -> PyResult<Option<f64>> {
    Ok(match Timeout::from_py(timeout, bound)? {
        Timeout::Try => Some(0.0),
        Timeout::Within(d) => Some(d.as_secs_f64()),
        Timeout::Forever => None,
    })
}

/// The bell in `cell`, made on first use as `zcio._aio.<class>()`.
pub(crate) fn bell<'py>(
    py: Python<'py>,
    cell: &PyOnceLock<Py<PyAny>>,
    class: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyAny>> {
    cell.get_or_try_init(py, || Ok(aio(py)?.getattr(class)?.call0()?.unbind()))
        .map(|b| b.bind(py).clone())
}

/// The end was closed (any thread): tasks awaiting it wake up and see it
/// closed (nothing rings our own doorbell when we close).
pub(crate) fn closed(py: Python<'_>, cell: &PyOnceLock<Py<PyAny>>) {
    if let Some(bell) = cell.get(py) {
        if let Err(e) = bell.bind(py).call_method0(intern!(py, "closed")) {
            e.write_unraisable(py, Some(bell.bind(py)));
        }
    }
}

/// Call `zcio._aio.<func>(*args)`: the coroutine of an async method.
pub(crate) fn call<'py>(
    py: Python<'py>,
    func: &Bound<'py, PyString>,
    args: impl pyo3::call::PyCallArgs<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    aio(py)?.getattr(func)?.call1(args)
}
