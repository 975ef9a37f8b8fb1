//! The forwarding loop (Rust's `zcio::forward::run`): `zcio_forward_run`
//! moves every message arriving on one channel on to another until one of
//! them ends, with its configuration (`zcio_forward_config`) and report
//! (`zcio_forward_report`); and `zcio_msg_copy_into`, the copy one hop
//! makes in copy mode.

use std::ffi::c_int;
use std::time::Duration;

use zcio::forward::{self, ForwardConfig, ForwardEnd, ForwardMode};

use crate::abi::{check_size, put, put_config, take_config};
use crate::chan::{chan, zcio_channel};
use crate::error::{einval, fail, fail_msg, guard};
use crate::msg::zcio_msg;
use crate::pool::zcio_pool;
use crate::{bound_ms, ms_of, Timeout, ZCIO_TIMEOUT_INFINITE};

/// `zcio_forward_report.end`: the upstream disconnected (closed its end or
/// died) and everything it sent was forwarded; the downstream was closed.
pub const ZCIO_FORWARD_UPSTREAM_DISCONNECTED: c_int = 1;
/// `zcio_forward_report.end`: the downstream disconnected (closed its end
/// or died); the upstream was closed in turn.
pub const ZCIO_FORWARD_DOWNSTREAM_DISCONNECTED: c_int = 2;
/// `zcio_forward_report.end`: no message came for `max_idle_ms`.
pub const ZCIO_FORWARD_IDLE: c_int = 3;
/// `zcio_forward_report.end`: a channel reported a failure the loop cannot
/// continue after (a corrupted ring); both channels were closed, and
/// `zcio_forward_report.error` has the code.
pub const ZCIO_FORWARD_FAILED: c_int = 4;

/// The tuning of `zcio_forward_run` (Rust's `ForwardConfig`). Fill it with
/// `zcio_forward_config_init` (the defaults), then change what you need;
/// fields are only ever added at the end. Bounds in ms are > 0 or
/// `ZCIO_TIMEOUT_INFINITE`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_forward_config {
    /// `sizeof` the caller's struct, set by `zcio_forward_config_init`; leave it as
    /// it set it (docs/c.md, "The ABI").
    pub size: usize,
    /// Messages taken without waiting before deferred wakes and notices
    /// are flushed (>= 1; default 64).
    pub batch: u32,
    /// Longest single wait for the next message, in ms; after it the loop
    /// reclaims, flushes and checks the downstream peer (> 0, finite;
    /// default 20).
    pub idle_wait_ms: c_int,
    /// Stop (`ZCIO_FORWARD_IDLE`) after this many ms without a message (0:
    /// only when a channel ends, the default).
    pub max_idle_ms: c_int,
    /// Bound on the wait for a buffer of the copy pool (copy mode; default
    /// 10 000).
    pub alloc_timeout_ms: c_int,
    /// How often a busy loop checks that the downstream peer is alive, in
    /// ms (> 0, finite; default 50).
    pub liveness_interval_ms: c_int,
}

/// What `zcio_forward_run` did and why it stopped (Rust's `ForwardReport`).
/// Counters may be added at the end: pass its size.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_forward_report {
    /// Why it stopped: a `ZCIO_FORWARD_*` constant.
    pub end: c_int,
    /// With `ZCIO_FORWARD_FAILED`: the failure's negative code (its text in
    /// `zcio_last_error`); else 0.
    pub error: c_int,
    /// Messages forwarded.
    pub msgs: u64,
    /// Payload bytes forwarded.
    pub bytes: u64,
    /// Messages that could not be forwarded and were dropped (malformed
    /// input, no copy buffer in time, a send that failed but left the
    /// downstream alive).
    pub errors: u64,
    /// Rounds of draining what was ready.
    pub batches: u64,
}

/// The defaults (Rust's `ForwardConfig::default()`).
fn forward_config_of(d: &ForwardConfig) -> zcio_forward_config {
    zcio_forward_config {
        size: std::mem::size_of::<zcio_forward_config>(),
        batch: u32::try_from(d.batch).unwrap_or(u32::MAX),
        idle_wait_ms: ms_of(d.idle_wait),
        max_idle_ms: d.max_idle.map_or(0, ms_of),
        alloc_timeout_ms: ms_of(d.alloc_timeout),
        liveness_interval_ms: ms_of(d.liveness_interval),
    }
}

/// Fill `*cfg` with the defaults (Rust's `ForwardConfig::default()`).
///
/// Records `size` in `cfg->size` and writes at most `size` bytes (the
/// header's `zcio_forward_config_init(cfg)` passes `sizeof *(cfg)`). Returns 0 or
/// `-EINVAL` (NULL, a size out of range).
///
/// # Safety
/// `cfg` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_forward_config_init_sized(
    cfg: *mut zcio_forward_config,
    size: usize,
) -> c_int {
    guard(|| {
        let c = forward_config_of(&ForwardConfig::default());
        // SAFETY: the caller's contract.
        unsafe { put_config("zcio_forward_config_init", &c, cfg, size) }
    })
}

/// A finite bound > 0 in ms, field `what`.
fn finite_ms(ms: c_int, what: &str) -> Result<Duration, c_int> {
    if ms == ZCIO_TIMEOUT_INFINITE {
        return Err(einval(format_args!(
            "zcio_forward_config.{what} must be > 0 (ms) and finite, not ZCIO_TIMEOUT_INFINITE"
        )));
    }
    bound_ms(ms, &format!("zcio_forward_config.{what}"))
}

/// The Rust configuration of `cfg` (NULL: the defaults).
///
/// # Safety
/// `cfg` is NULL or valid for reading `cfg->size` bytes.
unsafe fn config_arg(cfg: *const zcio_forward_config) -> Result<ForwardConfig, c_int> {
    let mut out = ForwardConfig::default();
    if cfg.is_null() {
        return Ok(out);
    }
    // SAFETY: the caller's contract.
    let c = unsafe { take_config("zcio_forward_config", cfg, forward_config_of(&out)) }?;
    if c.batch == 0 {
        return Err(einval("zcio_forward_config.batch must be >= 1, not 0"));
    }
    out.batch = c.batch as usize;
    out.idle_wait = finite_ms(c.idle_wait_ms, "idle_wait_ms")?;
    out.max_idle = match c.max_idle_ms {
        0 | ZCIO_TIMEOUT_INFINITE => None,
        v @ 1.. => Some(Duration::from_millis(v as u64)),
        v => {
            return Err(einval(format_args!(
                "zcio_forward_config.max_idle_ms must be >= 0 (0: no idle bound), not {v}"
            )))
        }
    };
    out.alloc_timeout = bound_ms(c.alloc_timeout_ms, "zcio_forward_config.alloc_timeout_ms")?;
    out.liveness_interval = finite_ms(c.liveness_interval_ms, "liveness_interval_ms")?;
    Ok(out)
}

/// Forward every message arriving on `up` to `down` until one of them ends
/// (Rust's `zcio::forward::run`). `pool` NULL forwards by reference (no
/// byte is copied; the deallocation notices travel back hop by hop);
/// otherwise each message is copied into a buffer of `pool` and the copy
/// sent. `cfg` NULL: the defaults (`zcio_forward_config_init`); set
/// `max_idle_ms` to stop after a quiet spell. It stops when the upstream
/// disconnects (after forwarding everything it sent; the downstream is
/// then closed), when the downstream disconnects (the upstream is then
/// closed), after `max_idle_ms` without a message, or on a failure; a peer
/// killed mid-stream ends it the same way, never as a hang. Close both
/// channels soon after.
///
/// Stores what happened in `*report` (NULL: not stored), writing at most
/// `report_size` bytes (pass `sizeof(struct zcio_forward_report)`; a
/// size out of range is `-EINVAL` before anything runs).
/// Returns 0 (the upstream ended, or the idle bound), `-EPIPE` (the
/// downstream went away: what was in flight may be lost), the failure's
/// code (`ZCIO_FORWARD_FAILED`, its text in `zcio_last_error`), or
/// `-EINVAL` (a NULL channel, the same channel twice, a bad `cfg` field:
/// `zcio_last_error` says which and what is allowed).
///
/// # Safety
/// `up` and `down` are NULL or live channels; `pool` is NULL or a live
/// pool; `cfg` is NULL or valid for reading `cfg->size` bytes;
/// `report` is NULL or valid for writing `report_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_forward_run(
    up: *mut zcio_channel,
    down: *mut zcio_channel,
    pool: *const zcio_pool,
    cfg: *const zcio_forward_config,
    report: *mut zcio_forward_report,
    report_size: usize,
) -> c_int {
    guard(|| {
        if std::ptr::eq(up, down) {
            return einval("zcio_forward_run: up and down are the same channel");
        }
        // SAFETY: the caller's contract.
        let (u, d) = match unsafe { (chan(up), chan(down)) } {
            (Ok(u), Ok(d)) => (u, d),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        if !report.is_null() {
            if let Err(e) = check_size::<zcio_forward_report>("zcio_forward_run", report_size) {
                return e;
            }
        }
        // SAFETY: the caller's contract.
        let cfg = match unsafe { config_arg(cfg) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        let mode = match unsafe { pool.as_ref() } {
            None => ForwardMode::ByRef,
            Some(p) => ForwardMode::Copy(&p.pool),
        };
        let r = forward::run(&u.ch, &d.ch, mode, &cfg);
        let (end, rc) = match r.end {
            ForwardEnd::UpstreamDisconnected => (ZCIO_FORWARD_UPSTREAM_DISCONNECTED, 0),
            ForwardEnd::DownstreamDisconnected => (
                ZCIO_FORWARD_DOWNSTREAM_DISCONNECTED,
                fail_msg(
                    libc::EPIPE,
                    "zcio_forward_run: the downstream disconnected (closed or died); the upstream was closed",
                ),
            ),
            ForwardEnd::Idle => (ZCIO_FORWARD_IDLE, 0),
            ForwardEnd::Failed(f) => (ZCIO_FORWARD_FAILED, fail(f)),
            other => (
                ZCIO_FORWARD_FAILED,
                fail_msg(libc::EIO, format_args!("zcio_forward_run ended: {other}")),
            ),
        };
        if !report.is_null() {
            let s = zcio_forward_report {
                end,
                error: if end == ZCIO_FORWARD_FAILED { rc } else { 0 },
                msgs: r.stats.msgs,
                bytes: r.stats.bytes,
                errors: r.stats.errors,
                batches: r.stats.batches,
            };
            // SAFETY: the caller's contract; the size was checked above.
            unsafe { put("zcio_forward_run", &s, report, report_size) };
        }
        rc
    })
}

/// Copy `msg`'s bytes into one fresh buffer of `pool` (Rust's
/// `forward::copy_into`: what `zcio_forward_run` does per message in copy
/// mode), waiting at most `timeout_ms` for the buffer (< 0: the pool's
/// `alloc_timeout_ms`, 10 s by default). Stores the copy, a message of one
/// slice that only this process made, in `*out` (release it with
/// `zcio_msg_release`; send it with `zcio_forward`). `msg` stays yours.
/// Returns 0, `-EAGAIN` (no buffer in time, or the message is larger than
/// the pool allows, or empty) or `-EINVAL`.
///
/// # Safety
/// `pool` is NULL or a live pool; `msg` is NULL or a live message; `out`
/// is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_copy_into(
    pool: *const zcio_pool,
    msg: *const zcio_msg,
    timeout_ms: c_int,
    out: *mut *mut zcio_msg,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let (Some(p), Some(m)) = (unsafe { (pool.as_ref(), msg.as_ref()) }) else {
            return einval("zcio_msg_copy_into: pool or msg is NULL");
        };
        if out.is_null() {
            return einval("zcio_msg_copy_into: out is NULL");
        }
        let t = Timeout::from_ms(timeout_ms).or(p.pool.config().alloc_timeout);
        match forward::copy_into(&p.pool, &m.msg, t) {
            Some(c) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(zcio_msg { msg: c }))) };
                0
            }
            None => fail_msg(
                libc::EAGAIN,
                format_args!(
                    "zcio_msg_copy_into: no buffer of {} bytes from the pool in time (or the message is empty or larger than the pool allows); release buffers or raise the pool's cap",
                    m.msg.len()
                ),
            ),
        }
    })
}
