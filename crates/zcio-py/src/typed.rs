//! Typed messages for Python (`zcio.send_typed` / `zcio.read_typed` in
//! `python/zcio/_typed.py`): the type tag is written and checked by the
//! same Rust file as the C library's (`crates/zcio-c/src/typetag.rs`), so
//! C, Python and Rust put the same tag on the wire.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{self, Class};
use crate::typetag::{Layout, Refused};

fn layout(
    name: Option<&str>,
    schema: u32,
    size: usize,
    align: usize,
    elem_size: usize,
) -> PyResult<Layout<'_>> {
    let l = Layout {
        name,
        schema,
        size,
        align,
        elem_size,
    };
    l.validate()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(l)
}

/// _typed_header(name, schema, size, align, elem_size) -> bytes: the type
/// tag and its padding up to the payload (empty when name is None).
#[pyfunction]
#[pyo3(signature = (name, schema, size, align, elem_size=0))]
pub(crate) fn _typed_header<'py>(
    py: Python<'py>,
    name: Option<&str>,
    schema: u32,
    size: usize,
    align: usize,
    elem_size: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let l = layout(name, schema, size, align, elem_size)?;
    Ok(PyBytes::new(py, &l.header()))
}

/// _typed_check(head, msg_len, name, schema, size, align, elem_size) ->
/// (offset, length): check a message of msg_len bytes whose first bytes
/// (a private copy) are head; MalformedMessage when refused.
#[pyfunction]
#[pyo3(signature = (head, msg_len, name, schema, size, align, elem_size=0))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn _typed_check(
    py: Python<'_>,
    head: &[u8],
    msg_len: usize,
    name: Option<&str>,
    schema: u32,
    size: usize,
    align: usize,
    elem_size: usize,
) -> PyResult<(usize, usize)> {
    let l = layout(name, schema, size, align, elem_size)?;
    l.check(head, msg_len).map_err(|r| match r {
        Refused::BadLayout(_) => PyValueError::new_err(r.to_string()),
        r => errors::err(py, Class::Malformed, r.to_string(), None),
    })
}
