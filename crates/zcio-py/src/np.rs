//! numpy, looked up once: the module, `numpy.ndarray`, and the dtypes that
//! arriving array headers name (a small bounded cache: building a dtype
//! from its string costs more than the rest of `recv_array` together).

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// How many dtypes the cache keeps. Header dtype strings come from peers,
/// so the cache is bounded; a peer cycling through more just misses.
const DTYPE_CACHE: usize = 32;

/// A dtype decoded from a header string, with what `recv_array` checks.
pub(crate) struct Dtype<'py> {
    pub(crate) obj: Bound<'py, PyAny>,
    pub(crate) itemsize: usize,
    /// Neither object references nor fields.
    pub(crate) plain: bool,
}

struct Cached {
    name: String,
    obj: Py<PyAny>,
    itemsize: usize,
    plain: bool,
}

static DTYPES: Mutex<Vec<Cached>> = Mutex::new(Vec::new());

/// What `send_array` needs to know of a local dtype object.
#[derive(Clone)]
pub(crate) struct Described {
    /// `dtype.str`, e.g. `<u4`.
    pub(crate) name: String,
    pub(crate) itemsize: usize,
    pub(crate) hasobject: bool,
    pub(crate) has_fields: bool,
}

/// Local dtype objects already described, keyed by identity (the cache
/// holds a reference, so an address is never reused while listed).
static DESCRIBED: Mutex<Vec<(Py<PyAny>, Described)>> = Mutex::new(Vec::new());

/// Describe a dtype object (from the cache when this very object was seen
/// before: `dtype.str` formats a new string on every call).
pub(crate) fn describe(dtype: &Bound<'_, PyAny>) -> PyResult<Described> {
    if let Ok(c) = DESCRIBED.lock() {
        if let Some((_, d)) = c.iter().find(|(o, _)| o.as_ptr() == dtype.as_ptr()) {
            return Ok(d.clone());
        }
    }
    let py = dtype.py();
    let d = Described {
        name: dtype.getattr(pyo3::intern!(py, "str"))?.extract()?,
        itemsize: dtype.getattr(pyo3::intern!(py, "itemsize"))?.extract()?,
        hasobject: dtype.getattr(pyo3::intern!(py, "hasobject"))?.is_truthy()?,
        has_fields: !dtype.getattr(pyo3::intern!(py, "fields"))?.is_none(),
    };
    if let Ok(mut c) = DESCRIBED.lock() {
        if c.len() < DTYPE_CACHE {
            c.push((dtype.clone().unbind(), d.clone()));
        }
    }
    Ok(d)
}

/// The `numpy` module (imported on first use: only the array calls need it).
pub(crate) fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    NUMPY
        .get_or_try_init(py, || py.import("numpy").map(Bound::unbind))
        .map(|m| m.bind(py))
}

/// `numpy.ndarray`.
pub(crate) fn ndarray(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    NDARRAY
        .get_or_try_init(py, || {
            numpy(py)?
                .getattr(pyo3::intern!(py, "ndarray"))?
                .cast_into::<PyType>()
                .map(Bound::unbind)
                .map_err(PyErr::from)
        })
        .map(|t| t.bind(py))
}

/// Whether a dtype has neither object references nor fields.
pub(crate) fn is_plain(dtype: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = dtype.py();
    Ok(!dtype.getattr(pyo3::intern!(py, "hasobject"))?.is_truthy()?
        && dtype.getattr(pyo3::intern!(py, "fields"))?.is_none())
}

/// `numpy.dtype(name)`, from the cache when it was seen before.
pub(crate) fn dtype<'py>(py: Python<'py>, name: &str) -> PyResult<Dtype<'py>> {
    if let Ok(c) = DTYPES.lock() {
        if let Some(c) = c.iter().find(|c| c.name == name) {
            return Ok(Dtype {
                obj: c.obj.bind(py).clone(),
                itemsize: c.itemsize,
                plain: c.plain,
            });
        }
    }
    let obj = numpy(py)?.call_method1(pyo3::intern!(py, "dtype"), (name,))?;
    let itemsize: usize = obj.getattr(pyo3::intern!(py, "itemsize"))?.extract()?;
    let plain = is_plain(&obj)?;
    if let Ok(mut c) = DTYPES.lock() {
        if c.len() < DTYPE_CACHE {
            c.push(Cached {
                name: name.to_owned(),
                obj: obj.clone().unbind(),
                itemsize,
                plain,
            });
        }
    }
    Ok(Dtype {
        obj,
        itemsize,
        plain,
    })
}
