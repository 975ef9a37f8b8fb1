//! Rings by name, without attaching: `zcio_ring_list`, `zcio_ring_dir`,
//! `zcio_ring_path`, and a snapshot of a ring's state (`ring::stat`):
//! `zcio_ring_stat`, `zcio_ring_stat_consumers`.

use std::ffi::{c_char, c_int};
use std::os::unix::ffi::OsStrExt;

use zcio::ring::RingStat;

use crate::abi::{check_size, put};
use crate::error::{einval, fail, guard};
use crate::{ssize_t, str_arg};

/// Copy `bytes` and a NUL into `buf[0..size]` like `snprintf`: returns
/// the length without the NUL (a result ≥ `size` means it was cut).
///
/// # Safety
/// `buf` is NULL with `size` 0, or valid for writing `size` bytes.
pub(crate) unsafe fn put_str(bytes: &[u8], buf: *mut c_char, size: usize, call: &str) -> ssize_t {
    if buf.is_null() && size != 0 {
        return einval(format_args!("{call}: buf is NULL and size is not 0")) as ssize_t;
    }
    if size > 0 {
        let n = bytes.len().min(size - 1);
        // SAFETY: `buf` is writable for `size` > `n` bytes (contract);
        // `bytes` is ours and does not overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    bytes.len().min(isize::MAX as usize) as ssize_t
}

/// The names of the rings in the ring directory, each followed by a
/// newline (`"a\nb\n"`; names never contain one), in no set order, copied
/// into `buf` like `snprintf`: at most `size - 1` bytes and a NUL. Returns
/// the length of the whole list (call with `size` 0 to ask; a result ≥
/// `size` means it was cut), or `-EINVAL` or the errno of reading the
/// directory.
///
/// # Safety
/// `buf` is NULL with `size` 0, or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_list(buf: *mut c_char, size: usize) -> ssize_t {
    guard(|| {
        let names = match zcio::ring::list() {
            Ok(n) => n,
            Err(e) => return fail(e) as ssize_t,
        };
        let mut s = String::new();
        for n in names {
            s.push_str(&n);
            s.push('\n');
        }
        // SAFETY: the caller's contract.
        unsafe { put_str(s.as_bytes(), buf, size, "zcio_ring_list") }
    })
}

/// The ring directory (`$ZCIO_RING_DIR`, else `/dev/shm`) into `buf` like
/// `snprintf`. Returns its length or `-EINVAL`.
///
/// # Safety
/// `buf` is NULL with `size` 0, or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_dir(buf: *mut c_char, size: usize) -> ssize_t {
    guard(|| {
        let d = zcio::ring::ring_dir();
        // SAFETY: the caller's contract.
        unsafe { put_str(d.as_os_str().as_bytes(), buf, size, "zcio_ring_dir") }
    })
}

/// The file of ring `name` (`DIR/zcio-ring.NAME`) into `buf` like
/// `snprintf`. Returns its length, or `-EINVAL` (NULL, or not a valid ring
/// name).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `buf` is NULL with `size` 0,
/// or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_path(
    name: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let name = match unsafe { str_arg(name, "ring name") } {
            Ok(n) => n,
            Err(e) => return e as ssize_t,
        };
        let Some(p) = zcio::ring::ring_path(name) else {
            return einval(format_args!(
                "zcio_ring_path: {name:?} is not a ring name (1-200 of [A-Za-z0-9._-], not starting with a dot)"
            )) as ssize_t;
        };
        // SAFETY: the caller's contract.
        unsafe { put_str(p.as_os_str().as_bytes(), buf, size, "zcio_ring_path") }
    })
}

/// The producer has the ring (`zcio_ring_stat_info.producer_state`).
pub const ZCIO_PRODUCER_ACTIVE: u32 = 1;
/// The producer's process died without closing.
pub const ZCIO_PRODUCER_DEAD: u32 = 2;
/// The producer closed the ring (end of stream).
pub const ZCIO_PRODUCER_CLOSED: u32 = 3;
/// The producer closed the ring with an error (`producer_error`).
pub const ZCIO_PRODUCER_FAILED: u32 = 4;
/// No producer ever attached.
pub const ZCIO_PRODUCER_NONE: u32 = 5;
/// A producer is attaching.
pub const ZCIO_PRODUCER_STARTING: u32 = 6;

/// A snapshot of a ring (`zcio_ring_stat`; `zcio ring stat`). Fields may
/// be appended; `zcio_ring_stat` writes only as many bytes as the caller's
/// struct has.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_ring_stat_info {
    /// `ZCIO_LAYOUT_*`.
    pub layout: u32,
    /// `ZCIO_OVERFLOW_*`.
    pub overflow: u32,
    /// Data area in bytes (0 for an index ring).
    pub size: u64,
    /// Slot bytes (slotted rings; else 0).
    pub slot_size: u64,
    /// Descriptor entries (descriptors and index rings; else 0).
    pub entries: u64,
    /// Largest block one write may store.
    pub max_block: u64,
    /// Owner, group and permission bits of the ring file.
    pub uid: u32,
    /// Group of the ring file.
    pub gid: u32,
    /// Permission bits of the ring file.
    pub mode: u32,
    /// `ZCIO_PRODUCER_*`.
    pub producer_state: u32,
    /// The last producer's pid (0 if none).
    pub producer_pid: u32,
    /// Its error code (`ZCIO_PRODUCER_FAILED`).
    pub producer_error: u32,
    /// The producer's head (cursor units since creation).
    pub head: u64,
    /// Cursor units the slowest live consumer has not read yet.
    pub fill: u64,
    /// Blocks written.
    pub blocks: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Blocks dropped (SRP/MRP).
    pub dropped_blocks: u64,
    /// Bytes dropped.
    pub dropped_bytes: u64,
    /// Consumers attached (`zcio_ring_stat_consumers` lists them).
    pub consumers: u64,
}

/// One consumer of a ring (`zcio_ring_stat_consumers`). Fields may be
/// appended.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_ring_consumer_info {
    /// Its slot (0 to `ZCIO_RING_MAX_CONSUMERS` - 1).
    pub slot: u32,
    /// Its pid.
    pub pid: u32,
    /// 1 if its process lives.
    pub alive: u32,
    /// 1 if it is in another pid namespace (`pid` is its pid there).
    pub other_pid_namespace: u32,
    /// Its read position (cursor units).
    pub cursor: u64,
    /// Cursor units between it and the head.
    pub lag: u64,
    /// Blocks the producer dropped since it joined.
    pub drops: u64,
    /// Times it was lapped and skipped ahead.
    pub skips: u64,
    /// Cursor units skipped.
    pub skipped_units: u64,
    /// Blocks read.
    pub read_blocks: u64,
    /// Bytes read.
    pub read_bytes: u64,
}

fn stat_of(name: *const c_char) -> Result<RingStat, c_int> {
    // SAFETY: the callers pass their caller's `name`, under the same
    // contract (NULL or NUL-terminated).
    let name = unsafe { str_arg(name, "ring name") }?;
    zcio::ring::stat(name).map_err(fail)
}

/// Fill `*out` with a snapshot of ring `name` (read permission is enough;
/// nothing attaches), writing at most `size` bytes (pass `sizeof(struct
/// zcio_ring_stat_info)`). Returns 0, or `-EINVAL`, `-ENOENT`, `-EACCES`,
/// `-ZCIO_EBADRING`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_stat(
    name: *const c_char,
    out: *mut zcio_ring_stat_info,
    size: usize,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_ring_stat: out is NULL");
        }
        let s = match stat_of(name) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let g = s.geometry;
        let producer_state = match s.producer.state {
            "active" => ZCIO_PRODUCER_ACTIVE,
            "dead" => ZCIO_PRODUCER_DEAD,
            "closed" => ZCIO_PRODUCER_CLOSED,
            "failed" => ZCIO_PRODUCER_FAILED,
            "none" => ZCIO_PRODUCER_NONE,
            _ => ZCIO_PRODUCER_STARTING,
        };
        let info = zcio_ring_stat_info {
            layout: g.layout as u32,
            overflow: g.overflow as u32,
            size: g.data_len,
            slot_size: g.slot_size,
            entries: g.desc_len,
            max_block: g.max_block(),
            uid: s.uid,
            gid: s.gid,
            mode: s.mode & 0o777,
            producer_state,
            producer_pid: s.producer.pid,
            producer_error: s.producer.error,
            head: s.head,
            fill: s.fill,
            blocks: s.blocks,
            bytes: s.bytes,
            dropped_blocks: s.dropped_blocks,
            dropped_bytes: s.dropped_bytes,
            consumers: s.consumers.len() as u64,
        };
        // SAFETY: `out` is writable for `size` bytes (contract); `info` is
        // a local.
        unsafe { put("zcio_ring_stat", &info, out, size) }
    })
}

/// Store up to `n` of ring `name`'s consumers into `out[0..n]`, each entry
/// `elem_size` bytes apart and written up to that size (pass
/// `sizeof(struct zcio_ring_consumer_info)`). Returns how many consumers
/// the ring has (like `snprintf`: call with `n` 0 to ask; at most
/// `ZCIO_RING_MAX_CONSUMERS`), or the errors of `zcio_ring_stat`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL with `n` 0, or
/// valid for writing `n * elem_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_stat_consumers(
    name: *const c_char,
    out: *mut zcio_ring_consumer_info,
    n: usize,
    elem_size: usize,
) -> c_int {
    guard(|| {
        if n > 0 && out.is_null() {
            return einval("zcio_ring_stat_consumers: out is NULL");
        }
        if n > 0 {
            if let Err(e) =
                check_size::<zcio_ring_consumer_info>("zcio_ring_stat_consumers", elem_size)
            {
                return e;
            }
        }
        if n.checked_mul(elem_size)
            .is_none_or(|b| b > isize::MAX as usize)
        {
            return einval("zcio_ring_stat_consumers: n * elem_size is too large");
        }
        let s = match stat_of(name) {
            Ok(s) => s,
            Err(e) => return e,
        };
        for (i, c) in s.consumers.iter().take(n).enumerate() {
            let info = zcio_ring_consumer_info {
                slot: c.slot as u32,
                pid: c.pid,
                alive: u32::from(c.alive),
                other_pid_namespace: u32::from(c.other_pid_namespace),
                cursor: c.cursor,
                lag: c.lag,
                drops: c.drops,
                skips: c.skips,
                skipped_units: c.skipped_units,
                read_blocks: c.read_blocks,
                read_bytes: c.read_bytes,
            };
            // SAFETY: entry `i` < `n` starts `i * elem_size` bytes into
            // `out`, which is writable for `n * elem_size` bytes (contract;
            // the product was checked); `put` writes `elem_size` bytes (its
            // range was checked).
            unsafe {
                let at = out
                    .cast::<u8>()
                    .add(i * elem_size)
                    .cast::<zcio_ring_consumer_info>();
                put("zcio_ring_stat_consumers", &info, at, elem_size);
            }
        }
        s.consumers.len() as c_int
    })
}
