//! Creating a ring of any layout (`ring::Options`): `struct
//! zcio_ring_options`, `zcio_ring_options_init`, `zcio_ring_open_with`;
//! the layout and overflow codes and the ring limits
//! (`ring::Geometry::MAX_…`) as constants, checked against Rust at
//! compile time.

use std::ffi::{c_char, c_int};

use zcio::ring::{Geometry, Layout, Options, Overflow};

use crate::abi::{put, take};
use crate::error::{einval, guard};
use crate::ring::{zcio_ring, ZCIO_O_CREAT};
use crate::str_arg;

/// Layout: a byte stream (c-DBuf); writes and reads of any size.
pub const ZCIO_LAYOUT_CONTINUOUS: u32 = 1;
/// Layout: fixed-size slots (`slot_size`), one block per slot (p-DBuf).
pub const ZCIO_LAYOUT_SLOTTED: u32 = 2;
/// Layout: variable-size blocks with 16-byte in-band headers (v-DBuf;
/// what `ZCIO_O_BLOCKS` creates).
pub const ZCIO_LAYOUT_VARIABLE: u32 = 3;
/// Layout: variable-size blocks, headers in a separate ring of `entries`
/// descriptors (d-DBuf).
pub const ZCIO_LAYOUT_DESCRIPTORS: u32 = 4;
/// Layout: `entries` rich pointers into other rings, no data of its own
/// (IBuf): written only by `zcio_ring_splice`; reading one yields the
/// bytes of the ring it points into.
pub const ZCIO_LAYOUT_INDEX: u32 = 5;

/// Overflow: the producer waits for the slowest consumer (lossless).
pub const ZCIO_OVERFLOW_BLOCK: u32 = 1;
/// Overflow: drop new data (SRP; `ZCIO_O_SRP`).
pub const ZCIO_OVERFLOW_SRP: u32 = 2;
/// Overflow: overwrite old data (FRP; `ZCIO_O_FRP`).
pub const ZCIO_OVERFLOW_FRP: u32 = 3;
/// Overflow: shared read pointer (MRP; `ZCIO_O_MRP`).
pub const ZCIO_OVERFLOW_MRP: u32 = 4;

/// Consumer slots of a ring (`-ENOSPC` beyond).
pub const ZCIO_RING_MAX_CONSUMERS: u32 = 64;
/// Source rings an index ring may point into.
pub const ZCIO_RING_MAX_SOURCES: u32 = 8;
/// Bytes of the in-band header of a `ZCIO_LAYOUT_VARIABLE` or `SLOTTED`
/// block.
pub const ZCIO_RING_BLOCK_HEADER_LEN: u32 = 16;
/// Largest data area (`size`): 16 GiB.
pub const ZCIO_RING_MAX_SIZE: u64 = 1 << 34;
/// Most descriptor entries (`entries`).
pub const ZCIO_RING_MAX_DESCRIPTORS: u64 = 1 << 24;
/// Largest slot (`slot_size`): 2 GiB.
pub const ZCIO_RING_MAX_SLOT_SIZE: u64 = 1 << 31;

// The header's numbers are Rust's.
const _: () = {
    assert!(ZCIO_LAYOUT_CONTINUOUS == Layout::Continuous as u32);
    assert!(ZCIO_LAYOUT_SLOTTED == Layout::Slotted as u32);
    assert!(ZCIO_LAYOUT_VARIABLE == Layout::Variable as u32);
    assert!(ZCIO_LAYOUT_DESCRIPTORS == Layout::Descriptors as u32);
    assert!(ZCIO_LAYOUT_INDEX == Layout::Index as u32);
    assert!(ZCIO_OVERFLOW_BLOCK == Overflow::Block as u32);
    assert!(ZCIO_OVERFLOW_SRP == Overflow::Srp as u32);
    assert!(ZCIO_OVERFLOW_FRP == Overflow::Frp as u32);
    assert!(ZCIO_OVERFLOW_MRP == Overflow::Mrp as u32);
    assert!(ZCIO_RING_MAX_CONSUMERS as usize == Geometry::MAX_CONSUMERS);
    assert!(ZCIO_RING_MAX_SOURCES as usize == Geometry::MAX_SOURCES);
    assert!(ZCIO_RING_BLOCK_HEADER_LEN as u64 == Geometry::BLOCK_HEADER_LEN);
    assert!(ZCIO_RING_MAX_SIZE == Geometry::MAX_DATA_LEN);
    assert!(ZCIO_RING_MAX_DESCRIPTORS == Geometry::MAX_DESCRIPTORS);
    assert!(ZCIO_RING_MAX_SLOT_SIZE == Geometry::MAX_SLOT_SIZE);
};

/// The parameters of a new ring (`zcio_ring_open_with`). Fill it with
/// `zcio_ring_options_init` first, then set what you need. Fields may be
/// appended; calls take `sizeof` the caller's struct.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_ring_options {
    /// `ZCIO_LAYOUT_*` (default `ZCIO_LAYOUT_CONTINUOUS`).
    pub layout: u32,
    /// `ZCIO_OVERFLOW_*` (default `ZCIO_OVERFLOW_BLOCK`).
    pub overflow: u32,
    /// Data bytes, a power of two from the page size to
    /// `ZCIO_RING_MAX_SIZE` (default 1 MiB; ignored by index rings).
    pub size: u64,
    /// Slot bytes of a slotted ring, a power of two from 32 to `size`
    /// (default 2048).
    pub slot_size: u64,
    /// Descriptor entries of a descriptors or index ring, a power of two
    /// from 2 to `ZCIO_RING_MAX_DESCRIPTORS` (default 4096).
    pub entries: u64,
    /// Permission bits of the ring file, at most 0777 (default 0600; the
    /// umask does not apply).
    pub mode: u32,
    /// Zero.
    pub reserved: u32,
}

impl Default for zcio_ring_options {
    fn default() -> Self {
        let o = Options::default();
        Self {
            layout: o.layout as u32,
            overflow: o.overflow as u32,
            size: o.size,
            slot_size: o.slot_size,
            entries: o.entries,
            mode: o.mode,
            reserved: 0,
        }
    }
}

/// Fill `*opts` with the defaults (a 1 MiB continuous ring, overflow
/// block, mode 0600), writing at most `size` bytes (pass `sizeof(struct
/// zcio_ring_options)`). Returns 0 or `-EINVAL` (NULL).
///
/// # Safety
/// `opts` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_options_init(
    opts: *mut zcio_ring_options,
    size: usize,
) -> c_int {
    guard(|| {
        let d = zcio_ring_options::default();
        // SAFETY: the caller's contract.
        unsafe { put("zcio_ring_options_init", &d, opts, size) }
    })
}

pub(crate) fn options(o: &zcio_ring_options) -> Result<Options, c_int> {
    let layout = match o.layout {
        ZCIO_LAYOUT_CONTINUOUS => Layout::Continuous,
        ZCIO_LAYOUT_SLOTTED => Layout::Slotted,
        ZCIO_LAYOUT_VARIABLE => Layout::Variable,
        ZCIO_LAYOUT_DESCRIPTORS => Layout::Descriptors,
        ZCIO_LAYOUT_INDEX => Layout::Index,
        l => {
            return Err(einval(format_args!(
                "zcio_ring_open_with: layout {l} is not a ZCIO_LAYOUT_* code"
            )))
        }
    };
    let overflow = match o.overflow {
        ZCIO_OVERFLOW_BLOCK => Overflow::Block,
        ZCIO_OVERFLOW_SRP => Overflow::Srp,
        ZCIO_OVERFLOW_FRP => Overflow::Frp,
        ZCIO_OVERFLOW_MRP => Overflow::Mrp,
        v => {
            return Err(einval(format_args!(
                "zcio_ring_open_with: overflow {v} is not a ZCIO_OVERFLOW_* code"
            )))
        }
    };
    if o.reserved != 0 {
        return Err(einval(
            "zcio_ring_open_with: reserved is not 0 (start from zcio_ring_options_init)",
        ));
    }
    Ok(Options::new()
        .layout(layout)
        .overflow(overflow)
        .size(o.size)
        .slot_size(o.slot_size)
        .entries(o.entries)
        .mode(o.mode))
}

/// `zcio_ring_open` with the parameters of a new ring in `*opts` (any
/// layout, its slot size or entries), read as `opts_size` bytes (pass
/// `sizeof(struct zcio_ring_options)`; fields beyond keep their
/// defaults). `flags` as for `zcio_ring_open` (`ZCIO_O_CREAT` to create;
/// without it `opts` is not used), but without `ZCIO_O_BLOCKS` and the
/// policy flags (`-EINVAL`: the options say it). `opts` may be NULL
/// without `ZCIO_O_CREAT`. Bad options are `-EINVAL` with the parameter
/// named in `zcio_last_error`. Returns 0 and a new handle in `*out`, or
/// the errors of `zcio_ring_open`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `opts` is NULL or valid for
/// reading `opts_size` bytes; `out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_open_with(
    name: *const c_char,
    flags: c_int,
    opts: *const zcio_ring_options,
    opts_size: usize,
    out: *mut *mut zcio_ring,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_ring_open_with: out is NULL");
        }
        // SAFETY: the caller's contract for `name`.
        let name = match unsafe { str_arg(name, "ring name") } {
            Ok(n) => n,
            Err(e) => return e,
        };
        let o = if opts.is_null() {
            if flags & ZCIO_O_CREAT != 0 {
                return einval("zcio_ring_open_with: opts is NULL with ZCIO_O_CREAT");
            }
            None
        } else {
            // SAFETY: `opts` is readable for `opts_size` bytes (contract),
            // and every byte pattern is a valid `zcio_ring_options`
            // (integers only).
            let o = match unsafe {
                take(
                    "zcio_ring_open_with",
                    opts,
                    opts_size,
                    zcio_ring_options::default(),
                )
            } {
                Ok(o) => o,
                Err(e) => return e,
            };
            match options(&o) {
                Ok(o) => Some(o),
                Err(e) => return e,
            }
        };
        let r = match crate::ring::open(name, flags, 0, 0, o) {
            Ok(r) => r,
            Err(e) => return e,
        };
        // SAFETY: `out` is non-NULL and, by contract, writable.
        unsafe { out.write(Box::into_raw(Box::new(r))) };
        0
    })
}
