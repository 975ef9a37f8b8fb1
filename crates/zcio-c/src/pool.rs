//! Pools and buffers: `zcio_pool_create` → `zcio_buf_alloc` → fill through
//! `zcio_buf_data` → `zcio_send` (in `chan`).

use std::ffi::{c_char, c_int, c_void};
use std::time::Duration;

use zcio::{FbufMut, Msg, Pool, PoolConfig};

use crate::abi::{put, put_config, take_config};
use crate::error::{einval, fail, guard};
use crate::{str_arg, Timeout};

/// A pool of shared buffers (opaque): chunks of shared memory that stay
/// mapped in every process the buffers reach, so reusing a buffer costs no
/// mapping work. Thread-safe.
pub struct zcio_pool {
    pub(crate) pool: Pool,
}

/// A buffer from a pool (opaque): writable by its owner until it is sent.
pub struct zcio_buf {
    pub(crate) state: BufState,
}

pub(crate) enum BufState {
    /// Being filled.
    Fill(FbufMut),
    /// Frozen by a send attempt that failed: the bytes can no longer be
    /// changed; it can be sent again or freed.
    Frozen(Msg),
    /// Moved out during a send (never seen by the caller).
    Gone,
}

/// Counters of a pool (`zcio_pool_get_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_pool_stats {
    /// Chunk regions.
    pub chunks: u64,
    /// Bytes in all chunks.
    pub bytes_total: u64,
    /// Bytes free for allocation.
    pub bytes_free: u64,
    /// Buffers allocated and not yet returned (held here, or sent and not
    /// yet released by every receiver).
    pub buffers_in_use: u64,
    /// Bytes of those.
    pub bytes_in_use: u64,
    /// Allocations served, ever.
    pub allocs: u64,
    /// Allocations refused because the pool was exhausted.
    pub exhausted: u64,
    /// Buffers retired: a receiver ended while holding them, so they are
    /// never reused.
    pub buffers_retired: u64,
    /// Bytes of those.
    pub bytes_retired: u64,
    /// Chunks replaced by fresh memory because they held retired buffers
    /// and nothing else fit, ever (within the pool's retire budget:
    /// `max_chunks × chunk_size`).
    pub chunks_replaced: u64,
    /// Bytes written off by those replacements, ever.
    pub bytes_written_off: u64,
    /// Buffers the pool can hand out at most (one page each, every chunk
    /// mapped).
    pub capacity_buffers: u64,
    /// Allocations that timed out waiting for a buffer.
    pub alloc_timed_out: u64,
}

/// Create a pool named `name` (shows in `/proc/PID/maps`; NULL: "pool")
/// of chunks of `chunk_size` bytes (0: 16 MiB), at most `max_chunks` of
/// them (0: 16); a buffer larger than a chunk gets a chunk of its own.
/// Memory is taken chunk by chunk as buffers are allocated, never beyond
/// the cap. Stores the handle in `*out` (free it with
/// `zcio_pool_destroy`); returns 0 or `-EINVAL`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_pool_create(
    name: *const c_char,
    chunk_size: usize,
    max_chunks: usize,
    out: *mut *mut zcio_pool,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_pool_create: out is NULL");
        }
        let name = if name.is_null() {
            "pool"
        } else {
            // SAFETY: the caller's contract for `name`.
            match unsafe { str_arg(name, "pool name") } {
                Ok(n) => n,
                Err(e) => return e,
            }
        };
        if name.is_empty() || name.len() > 200 {
            return einval("zcio_pool_create: name must have 1-200 bytes");
        }
        if chunk_size > isize::MAX as usize / 2 {
            return einval("zcio_pool_create: chunk_size too large");
        }
        let d = PoolConfig::default();
        let cfg = PoolConfig {
            chunk_size: if chunk_size == 0 {
                d.chunk_size
            } else {
                chunk_size
            },
            max_chunks: if max_chunks == 0 {
                d.max_chunks
            } else {
                max_chunks
            },
            ..PoolConfig::named(name)
        };
        let p = Box::new(zcio_pool {
            pool: Pool::new(cfg),
        });
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(Box::into_raw(p)) };
        0
    })
}

/// The configuration of a pool (Rust's `PoolConfig`), for
/// `zcio_pool_create_with`. Fill it with `zcio_pool_config_init` (the
/// defaults), then change what you need; fields are only ever added at the
/// end. A value out of range is `-EINVAL`, and `zcio_last_error` says what
/// is allowed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_pool_config {
    /// `sizeof` the caller's struct, set by `zcio_pool_config_init`; leave it as
    /// it set it (docs/c.md, "The ABI").
    pub size: usize,
    /// Bytes per chunk region, rounded up to pages (> 0; default 16 MiB); a
    /// larger buffer gets a chunk of its own size.
    pub chunk_size: u64,
    /// Most chunks the pool ever holds (> 0; default 16).
    pub max_chunks: u64,
    /// 1: pre-fault chunks when they are made (`MAP_POPULATE`, default);
    /// 0: fault pages in on first touch.
    pub populate: c_int,
    /// Freed buffers kept per page count on the quick list before they go
    /// back to the extent allocator (default 64).
    pub quick_list_cap: u64,
    /// How long an allocation that waits polls for released buffers before
    /// it sleeps, in µs (0: sleep at once; default the process's spin
    /// policy).
    pub spin_us: u64,
    /// Bytes of chunks the pool may write off over its life to replace
    /// chunks holding retired buffers (a dead receiver's); default
    /// `max_chunks × chunk_size`.
    pub retire_budget: u64,
    /// What `zcio_buf_alloc` (and any allocation with `timeout_ms` < 0)
    /// waits for receivers to release buffers, in ms (> 0 or
    /// `ZCIO_TIMEOUT_INFINITE`; default 10 000).
    pub alloc_timeout_ms: c_int,
}

/// The C form of `c`.
fn pool_config_of(c: &PoolConfig) -> zcio_pool_config {
    let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    zcio_pool_config {
        size: std::mem::size_of::<zcio_pool_config>(),
        chunk_size: c.chunk_size as u64,
        max_chunks: c.max_chunks as u64,
        populate: c_int::from(c.populate),
        quick_list_cap: c.quick_list_cap as u64,
        spin_us: us(c.spin),
        retire_budget: c.retire_budget as u64,
        alloc_timeout_ms: crate::ms_of(c.alloc_timeout),
    }
}

/// Fill `*cfg` with the defaults (Rust's `PoolConfig::default()`).
///
/// Records `size` in `cfg->size` and writes at most `size` bytes (the
/// header's `zcio_pool_config_init(cfg)` passes `sizeof *(cfg)`). Returns 0 or
/// `-EINVAL` (NULL, a size out of range).
///
/// # Safety
/// `cfg` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_pool_config_init_sized(
    cfg: *mut zcio_pool_config,
    size: usize,
) -> c_int {
    guard(|| {
        let c = pool_config_of(&PoolConfig::default());
        // SAFETY: the caller's contract.
        unsafe { put_config("zcio_pool_config_init", &c, cfg, size) }
    })
}

/// `-EINVAL` naming field `what` of `zcio_pool_config` and what it allows.
fn bad(what: &str, allowed: &str, got: impl std::fmt::Display) -> c_int {
    einval(format_args!(
        "zcio_pool_config.{what} must be {allowed}, not {got}"
    ))
}

/// Create a pool named `name` (shows in `/proc/PID/maps`; NULL: "pool")
/// with the configuration `*cfg` (NULL: the defaults). Stores the handle in
/// `*out` (free it with `zcio_pool_destroy`); returns 0 or `-EINVAL`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `cfg` is NULL or valid for
/// reading `cfg->size` bytes (`zcio_pool_config_init` set it); `out` is NULL or valid for writing
/// a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_pool_create_with(
    name: *const c_char,
    cfg: *const zcio_pool_config,
    out: *mut *mut zcio_pool,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_pool_create_with: out is NULL");
        }
        let name = if name.is_null() {
            "pool"
        } else {
            // SAFETY: the caller's contract for `name`.
            match unsafe { str_arg(name, "pool name") } {
                Ok(n) => n,
                Err(e) => return e,
            }
        };
        if name.is_empty() || name.len() > 200 {
            return einval("zcio_pool_create_with: name must have 1-200 bytes");
        }
        let mut pc = PoolConfig::named(name);
        if !cfg.is_null() {
            // SAFETY: the caller's contract.
            let c = match unsafe { take_config("zcio_pool_create_with", cfg, pool_config_of(&pc)) }
            {
                Ok(c) => c,
                Err(e) => return e,
            };
            let limit = isize::MAX as u64 / 2;
            if c.chunk_size == 0 || c.chunk_size > limit {
                return bad("chunk_size", "in 1..=isize::MAX/2", c.chunk_size);
            }
            if c.max_chunks == 0 || c.max_chunks > 1 << 20 {
                return bad("max_chunks", "in 1..=1048576", c.max_chunks);
            }
            pc.chunk_size = c.chunk_size as usize;
            pc.max_chunks = c.max_chunks as usize;
            pc.populate = match c.populate {
                0 => false,
                1 => true,
                v => return bad("populate", "0 or 1", v),
            };
            pc.quick_list_cap = match usize::try_from(c.quick_list_cap) {
                Ok(n) if n <= 1 << 20 => n,
                _ => return bad("quick_list_cap", "in 0..=1048576", c.quick_list_cap),
            };
            pc.spin = Duration::from_micros(c.spin_us);
            pc.retire_budget = match usize::try_from(c.retire_budget) {
                Ok(n) => n,
                Err(_) => return bad("retire_budget", "at most SIZE_MAX", c.retire_budget),
            };
            pc.alloc_timeout =
                match crate::bound_ms(c.alloc_timeout_ms, "zcio_pool_config.alloc_timeout_ms") {
                    Ok(d) => d,
                    Err(e) => return e,
                };
        }
        let p = Box::new(zcio_pool {
            pool: Pool::new(pc),
        });
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(Box::into_raw(p)) };
        0
    })
}

/// The pool's configuration, as `zcio_pool_config_init` gives it. Stores
/// it in `*out`; returns 0 or `-EINVAL`.
///
/// The header's `zcio_pool_get_config(…, out)` passes `sizeof *(out)` as `size`;
/// at most `size` bytes are written (docs/c.md, "The ABI").
///
/// # Safety
/// `pool` is NULL or a live handle; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_pool_get_config_sized(
    pool: *const zcio_pool,
    out: *mut zcio_pool_config,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { pool.as_ref() }) else {
            return einval("zcio_pool_get_config: pool is NULL");
        };
        // SAFETY: the caller's contract.
        unsafe {
            put_config(
                "zcio_pool_get_config",
                &pool_config_of(p.pool.config()),
                out,
                size,
            )
        }
    })
}

/// Process the deallocation notices of every channel carrying this pool's
/// buffers now (allocation does this by itself when it runs short).
/// Returns how many buffers came back, or `-EINVAL`.
///
/// # Safety
/// `pool` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn zcio_pool_reclaim_all(pool: *const zcio_pool) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { pool.as_ref() } {
            Some(p) => p.pool.reclaim_all().min(c_int::MAX as usize) as c_int,
            None => einval("zcio_pool_reclaim_all: pool is NULL"),
        }
    })
}

/// Free the pool handle (NULL is ignored). Buffers and messages from it
/// stay valid; its memory goes away when the last of them is released.
///
/// # Safety
/// `pool` is NULL or a live handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_pool_destroy(pool: *mut zcio_pool) {
    guard(|| {
        if !pool.is_null() {
            // SAFETY: a live handle from `zcio_pool_create`, given up here.
            drop(unsafe { Box::from_raw(pool) });
        }
    })
}

/// Fill `*out` with the pool's counters. Returns 0 or `-EINVAL`.
///
/// The header's `zcio_pool_get_stats(…, out)` passes `sizeof *(out)` as `size`;
/// at most `size` bytes are written (docs/c.md, "The ABI").
///
/// # Safety
/// `pool` is NULL or a live handle; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_pool_get_stats_sized(
    pool: *const zcio_pool,
    out: *mut zcio_pool_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { pool.as_ref() }) else {
            return einval("zcio_pool_get_stats: pool is NULL");
        };
        let s = p.pool.stats();
        let s = zcio_pool_stats {
            chunks: s.chunks as u64,
            bytes_total: s.bytes_total as u64,
            bytes_free: s.bytes_free as u64,
            buffers_in_use: s.buffers_in_use as u64,
            bytes_in_use: s.bytes_in_use as u64,
            allocs: s.allocs,
            exhausted: s.exhausted,
            buffers_retired: s.buffers_retired as u64,
            bytes_retired: s.bytes_retired as u64,
            chunks_replaced: s.chunks_replaced as u64,
            bytes_written_off: s.bytes_written_off as u64,
            capacity_buffers: s.capacity_buffers,
            alloc_timed_out: s.alloc_timed_out,
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_pool_get_stats", &s, out, size) }
    })
}

/// Whether a pool's chunks are mapped with transparent huge pages
/// (`zcio_pool_get_huge_pages`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct zcio_huge_pages {
    /// The system's setting for shared memory
    /// (`/sys/kernel/mm/transparent_hugepage/shmem_enabled`): 0 never
    /// (normal pages only), 1 advise, 2 always. Chunks of 2 MiB and more
    /// are aligned and advised for huge pages unless it is 0.
    pub setting: u32,
    /// Bytes in the pool's chunks.
    pub chunk_bytes: u64,
    /// Of those, bytes this process maps with huge pages now.
    pub huge_bytes: u64,
}

/// Fill `*out` with whether the pool's chunks use huge pages (reads
/// `/proc/self/smaps`: call it to report, not per message). Returns 0 or
/// `-EINVAL`.
///
/// The header's `zcio_pool_get_huge_pages(…, out)` passes `sizeof *(out)` as `size`;
/// at most `size` bytes are written (docs/c.md, "The ABI").
///
/// # Safety
/// `pool` is NULL or a live handle; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_pool_get_huge_pages_sized(
    pool: *const zcio_pool,
    out: *mut zcio_huge_pages,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { pool.as_ref() }) else {
            return einval("zcio_pool_get_huge_pages: pool is NULL");
        };
        let h = p.pool.huge_pages();
        let h = zcio_huge_pages {
            setting: match h.setting {
                "advise" => 1,
                "always" => 2,
                _ => 0,
            },
            chunk_bytes: h.chunk_bytes,
            huge_bytes: h.huge_bytes,
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_pool_get_huge_pages", &h, out, size) }
    })
}

/// The allocation calls' shared body.
///
/// # Safety
/// `pool` is NULL or a live handle; `out` is NULL or valid for writing a
/// pointer.
unsafe fn alloc(
    pool: *const zcio_pool,
    len: usize,
    timeout: Timeout,
    secured: bool,
    out: *mut *mut zcio_buf,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some(p) = (unsafe { pool.as_ref() }) else {
        return einval("zcio_buf_alloc: pool is NULL");
    };
    if out.is_null() {
        return einval("zcio_buf_alloc: out is NULL");
    }
    let r = if secured {
        p.pool.alloc_secured(len)
    } else {
        match timeout {
            Timeout::Default => p.pool.alloc(len),
            Timeout::No => p.pool.try_alloc(len),
            Timeout::For(d) => p.pool.alloc_timeout(len, d),
        }
    };
    match r {
        Ok(b) => {
            let b = Box::new(zcio_buf {
                state: BufState::Fill(b),
            });
            // SAFETY: non-NULL and writable (contract).
            unsafe { out.write(Box::into_raw(b)) };
            0
        }
        Err(e) => fail(e),
    }
}

/// Allocate a buffer of `len` bytes from `pool`, waiting up to 10 s for
/// receivers to release buffers when the pool is exhausted. Its bytes are
/// zeros or bytes this process wrote earlier (never another process's).
/// Stores the handle in `*out`: the buffer is yours until
/// `zcio_send` succeeds (then it is the channel's) or you
/// `zcio_buf_free` it. Returns 0, `-EINVAL` (`len` 0), `-EMSGSIZE` (`len`
/// beyond what a pool can hold), `-ETIMEDOUT` (still exhausted),
/// `-ENOMEM`.
///
/// A pool buffer is *volatile*: this process keeps its writable mapping,
/// so receivers must treat its bytes as changeable (see `zcio_recv`).
///
/// # Safety
/// `pool` is NULL or a live handle; `out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_buf_alloc(
    pool: *mut zcio_pool,
    len: usize,
    out: *mut *mut zcio_buf,
) -> c_int {
    // SAFETY: the caller's contract is `alloc`'s.
    guard(|| unsafe { alloc(pool, len, Timeout::Default, false, out) })
}

/// `zcio_buf_alloc`, waiting at most `timeout_ms` for a free buffer: 0
/// does not wait (`-EAGAIN` when the pool is exhausted), < 0 waits up to
/// the pool's bound, 10 s, > 0 that many milliseconds (`-ETIMEDOUT`),
/// `ZCIO_TIMEOUT_INFINITE` as long as it takes.
///
/// # Safety
/// As for `zcio_buf_alloc`.
#[no_mangle]
pub unsafe extern "C" fn zcio_buf_alloc_timeout(
    pool: *mut zcio_pool,
    len: usize,
    timeout_ms: c_int,
    out: *mut *mut zcio_buf,
) -> c_int {
    // SAFETY: the caller's contract is `alloc`'s.
    guard(|| unsafe { alloc(pool, len, Timeout::from_ms(timeout_ms), false, out) })
}

/// Allocate a *secured* buffer of `len` bytes: fresh memory of its own
/// (not recycled), sealed by the kernel when it is sent, so no process,
/// this one included, can change it afterwards and receivers can check
/// that (`zcio_msg_is_volatile` returns 0). Costs fresh pages per buffer.
/// Otherwise as `zcio_buf_alloc`.
///
/// # Safety
/// As for `zcio_buf_alloc`.
#[no_mangle]
pub unsafe extern "C" fn zcio_buf_alloc_secured(
    pool: *mut zcio_pool,
    len: usize,
    out: *mut *mut zcio_buf,
) -> c_int {
    // SAFETY: the caller's contract is `alloc`'s.
    guard(|| unsafe { alloc(pool, len, Timeout::Default, true, out) })
}

/// The buffer's bytes, writable by you until you send it: `zcio_buf_len`
/// bytes. NULL if `buf` is NULL or was frozen by a failed `zcio_send`
/// (its bytes can no longer change). Valid until the buffer is sent or
/// freed.
///
/// # Safety
/// `buf` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_buf_data(buf: *mut zcio_buf) -> *mut c_void {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { buf.as_mut() } {
            Some(zcio_buf {
                state: BufState::Fill(b),
            }) => b.as_mut_ptr().cast(),
            _ => std::ptr::null_mut(),
        }
    })
}

/// The buffer's length in bytes (0 for NULL).
///
/// # Safety
/// `buf` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn zcio_buf_len(buf: *const zcio_buf) -> usize {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { buf.as_ref() } {
            Some(b) => match &b.state {
                BufState::Fill(f) => f.len(),
                BufState::Frozen(m) => m.len(),
                BufState::Gone => 0,
            },
            None => 0,
        }
    })
}

/// Shorten the buffer to `len` bytes before sending it (no effect if `len`
/// is not smaller). Returns 0, or `-EINVAL` (NULL, `len` 0, or a frozen
/// buffer).
///
/// # Safety
/// `buf` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_buf_truncate(buf: *mut zcio_buf, len: usize) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { buf.as_mut() } {
            Some(zcio_buf {
                state: BufState::Fill(b),
            }) if len > 0 => {
                b.truncate(len);
                0
            }
            _ => einval("zcio_buf_truncate: NULL or frozen buffer, or len 0"),
        }
    })
}

/// Give back a buffer you did not send (or whose send failed): it returns
/// to its pool. NULL is ignored.
///
/// # Safety
/// `buf` is NULL or a live handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_buf_free(buf: *mut zcio_buf) {
    guard(|| {
        if !buf.is_null() {
            // SAFETY: a live handle from `zcio_buf_alloc*`, given up here.
            drop(unsafe { Box::from_raw(buf) });
        }
    })
}

/// A default-sized pool for `zcio_send_bytes` (1 MiB chunks, up to 64).
pub(crate) fn copy_pool() -> Pool {
    Pool::new(PoolConfig {
        chunk_size: 1 << 20,
        max_chunks: 64,
        spin: Duration::from_micros(50),
        ..PoolConfig::named("zcio-c-send-bytes")
    })
}
