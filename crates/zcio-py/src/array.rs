//! numpy-side helpers of `send_array`/`recv_array`; the header itself is
//! the core's [`zcio::array`] (shared with the Zenoh bridge).

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
pub(crate) use zcio::array::ArrayHeader as Header;
pub(crate) const FIXED: usize = Header::FIXED;
pub(crate) const FLAG_SENDER_MAPS_WRITABLE: u16 = Header::FLAG_SENDER_MAPS_WRITABLE;
pub(crate) const MAX_DTYPE: usize = Header::MAX_DTYPE;
pub(crate) const MAX_HEADER: usize = Header::MAX_HEADER;
pub(crate) const MAX_NDIM: usize = Header::MAX_NDIM;

/// Bytes of a header for `ndim` dimensions and a dtype string of `dlen` bytes.
pub(crate) fn header_len(ndim: usize, dlen: usize) -> usize {
    Header::len_for(ndim, dlen)
}

use crate::errors::{self, Class};

/// The extent of an array's elements relative to its first element's
/// address: `(lo, hi)` with every element in `[data + lo, data + hi)`, and
/// the number of elements. `None` on overflow.
pub(crate) fn extent(shape: &[usize], strides: &[isize], itemsize: usize) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return Some((0, 0));
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&d, &s) in shape.iter().zip(strides) {
        let span = (d as i128 - 1).checked_mul(s as i128)?;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    Some((lo, hi + itemsize as i128))
}

/// `MalformedMessage(text)`.
pub(crate) fn malformed(py: Python<'_>, text: String) -> PyErr {
    errors::err(py, Class::Malformed, text, None)
}

/// Check what numpy must judge in a decoded header (the dtype names a
/// plain type; every element lies inside the payload) and return the
/// dtype object.
pub(crate) fn checked_dtype<'py>(py: Python<'py>, hdr: &Header) -> PyResult<Bound<'py, PyAny>> {
    let dt = crate::np::dtype(py, &hdr.dtype)
        .map_err(|e| malformed(py, format!("dtype {:?} rejected by numpy: {e}", hdr.dtype)))?;
    if !dt.plain {
        return Err(malformed(
            py,
            format!("dtype {:?} is not a plain data type", hdr.dtype),
        ));
    }
    hdr.check_extent(dt.itemsize)
        .map_err(|e| malformed(py, e.0))?;
    Ok(dt.obj)
}

/// The read-only array a checked header describes, over `buffer` (an
/// object exporting the bytes in place) whose byte `payload_at` is the
/// payload's first.
pub(crate) fn ndarray_over<'py>(
    py: Python<'py>,
    hdr: &Header,
    dtype: Bound<'py, PyAny>,
    buffer: Bound<'py, PyAny>,
    payload_at: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let offset = payload_at
        .checked_add(hdr.data_off)
        .ok_or_else(|| malformed(py, "element offset overflows".into()))?;
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "shape"), PyTuple::new(py, &hdr.shape)?)?;
    kwargs.set_item(intern!(py, "dtype"), dtype)?;
    kwargs.set_item(intern!(py, "buffer"), buffer)?;
    kwargs.set_item(intern!(py, "offset"), offset)?;
    kwargs.set_item(intern!(py, "strides"), PyTuple::new(py, &hdr.strides)?)?;
    crate::np::ndarray(py)?
        .call((), Some(&kwargs))
        .map_err(|e| malformed(py, format!("numpy refused the array: {e}")))
}
