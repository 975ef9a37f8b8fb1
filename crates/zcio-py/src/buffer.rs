//! Both sides of the buffer protocol: borrowing another object's bytes
//! (`bytes`, `bytearray`, numpy arrays …) and exporting ours.

use std::ffi::c_int;
use std::ptr::NonNull;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

/// A contiguous buffer exported by a Python object, released on drop. The
/// exporter cannot move or resize the memory while this exists (that is
/// the protocol's promise), so the pointer stays valid even with the GIL
/// released; other threads may still write the bytes (a `bytearray`), so
/// they are only ever read or written through raw pointers.
pub(crate) struct Exported {
    view: Box<ffi::Py_buffer>,
}

// SAFETY: a Py_buffer is plain data plus a strong reference to its
// exporter; the reference is released in `Drop` with the GIL held
// (`Python::attach`), which is what CPython requires from any thread.
unsafe impl Send for Exported {}
// SAFETY: `&Exported` only exposes the pointer and length.
unsafe impl Sync for Exported {}

impl Exported {
    /// Borrow `obj`'s bytes as one C-contiguous block; `writable` asks for
    /// write access (refused by read-only exporters).
    pub(crate) fn get(obj: &Bound<'_, PyAny>, writable: bool) -> PyResult<Self> {
        let mut flags = ffi::PyBUF_C_CONTIGUOUS;
        if writable {
            flags |= ffi::PyBUF_WRITABLE;
        }
        Self::get_flags(obj, flags)
    }

    /// Borrow `obj`'s bytes with explicit `PyBUF_*` flags: contiguous ones
    /// for the bytes, or `PyBUF_STRIDES` when only [`Self::ptr`] (the
    /// address of element 0) is wanted.
    pub(crate) fn get_flags(obj: &Bound<'_, PyAny>, flags: c_int) -> PyResult<Self> {
        let mut view: Box<ffi::Py_buffer> = Box::new(ffi::Py_buffer::new());
        // `view` is a valid, exclusively owned Py_buffer; `obj` is a live
        // object (the Bound holds a reference) and we hold the GIL.
        // SAFETY: as argued just above.
        let rc = unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, flags) };
        if rc != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(Self { view })
    }

    /// The first byte (dangling but non-null when empty).
    pub(crate) fn ptr(&self) -> *mut u8 {
        NonNull::new(self.view.buf.cast::<u8>())
            .unwrap_or(NonNull::dangling())
            .as_ptr()
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        usize::try_from(self.view.len).unwrap_or(0)
    }
}

impl Drop for Exported {
    fn drop(&mut self) {
        Python::attach(|_| {
            // The view was filled by a successful PyObject_GetBuffer and is
            // released exactly once, here, with the GIL held.
            // SAFETY: as argued just above.
            unsafe { ffi::PyBuffer_Release(&mut *self.view) }
        });
    }
}

/// Fill `view` with `len` bytes at `ptr` for exporter `owner` (which gets
/// a new reference, released by Python when the view is).
///
/// # Safety
/// `view` must be the pointer CPython passed to `__getbuffer__`, and
/// `[ptr, ptr + len)` must stay mapped (and, if `!readonly`, writable)
/// for as long as `owner` lives.
pub(crate) unsafe fn fill(
    view: *mut ffi::Py_buffer,
    owner: &Bound<'_, PyAny>,
    ptr: *const u8,
    len: usize,
    readonly: bool,
    flags: c_int,
) -> PyResult<()> {
    if view.is_null() {
        return Err(PyBufferError::new_err("null view"));
    }
    let len = isize::try_from(len).map_err(|_| PyBufferError::new_err("buffer too large"))?;
    // PyBuffer_FillInfo sets every field for `flags` (format "B", 1-D),
    // takes its own reference to `owner`, and raises BufferError itself
    // when `flags` asks for writing and `readonly` is set. Its other
    // conditions are the caller's contract.
    // SAFETY: as argued just above.
    let rc = unsafe {
        ffi::PyBuffer_FillInfo(
            view,
            owner.as_ptr(),
            ptr.cast_mut().cast(),
            len,
            c_int::from(readonly),
            flags,
        )
    };
    if rc != 0 {
        return Err(PyErr::fetch(owner.py()));
    }
    Ok(())
}

/// A raw pointer that may cross into a `py.detach` closure. Whoever
/// builds one vouches that the memory stays valid for the closure's run.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub(crate) *mut u8);

// SAFETY: only an address; its validity is argued where it is made.
unsafe impl Send for SendPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for SendPtr {}

/// Copies of at least this many bytes release the GIL.
pub(crate) const RELEASE_GIL_ABOVE: usize = 64 << 10;

/// Copy `len` bytes from `src` to `dst`, releasing the GIL for large
/// copies.
///
/// # Safety
/// `src` must be readable and `dst` writable for `len` bytes for the whole
/// call, the ranges must not overlap, and no Rust reference may cover
/// `dst` meanwhile.
pub(crate) unsafe fn copy(py: Python<'_>, src: *const u8, dst: *mut u8, len: usize) {
    let (s, d) = (SendPtr(src.cast_mut()), SendPtr(dst));
    let run = move || {
        let (s, d) = (s, d);
        // The caller's contract; raw pointers only, so concurrent writers
        // of `src` (another thread, another process) give odd bytes at
        // worst, never undefined behaviour through a Rust reference.
        // SAFETY: as argued just above.
        unsafe { zcio::copy_raw(s.0, d.0, len) }
    };
    if len >= RELEASE_GIL_ABOVE {
        py.detach(run);
    } else {
        run();
    }
}
