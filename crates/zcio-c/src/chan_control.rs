//! Channel control and introspection: `zcio_channel_flush`,
//! `zcio_channel_expire_holds`, the peer's faults (`zcio_channel_health`,
//! `zcio_channel_faults`), who the peer is (`zcio_channel_peer`), whether it
//! is gone, the set-up socket, sharing a pool ahead of time, trusting the
//! peer and reading the configuration back.

use std::ffi::c_int;
use std::os::fd::AsRawFd;

use zcio::{Area, PeerFault};

use crate::abi::put_config;
use crate::chan::{chan, config_of, zcio_channel, zcio_channel_config};
use crate::cred::zcio_peer_cred;
use crate::error::{einval, fail, guard};
use crate::ms_of;
use crate::pool::zcio_pool;

/// `zcio_peer_fault.kind` of a fault this library version does not name
/// (a newer Rust kind); `zcio_last_error` after `zcio_channel_health` has
/// its text.
pub const ZCIO_FAULT_OTHER: c_int = 0;
/// The peer keeps its sleep flag set without sleeping; `value`: futile
/// wakes in a row. It is now woken at most once per `max_age_us`.
pub const ZCIO_FAULT_FUTILE_WAKES: c_int = 1;
/// A send waited its whole timeout for ring space: the peer does not
/// consume. `value`: 0.
pub const ZCIO_FAULT_NOT_CONSUMING: c_int = 2;
/// A send waited its whole timeout at the in-flight caps: the peer does not
/// release buffers. `value`: the slices it held.
pub const ZCIO_FAULT_NOT_RELEASING: c_int = 3;
/// The peer held a lent buffer past `hold_limit_ms` and the channel was
/// aborted (`ZCIO_HOLD_ABORT`). `value`: the limit in ms.
pub const ZCIO_FAULT_HOLD_EXPIRED: c_int = 4;
/// Buffers held past `hold_limit_ms` were taken back (`ZCIO_HOLD_RECLAIM`).
/// `value`: how many so far.
pub const ZCIO_FAULT_HOLDS_RECLAIMED: c_int = 5;
/// The peer wrote impossible values into the shared control segment; the
/// channel is closed. `value`: 1 a message ring, 2 a notice ring.
pub const ZCIO_FAULT_CORRUPT: c_int = 6;
/// Malformed messages or control records were rejected (the channel stays
/// usable). `value`: how many so far.
pub const ZCIO_FAULT_MALFORMED: c_int = 7;

/// One kind of misbehaviour of the peer that a channel end detected (Rust's
/// `PeerFault`): `kind` is a `ZCIO_FAULT_*` constant, `value` its detail
/// (the latest). New kinds get new constants; the struct stays as it is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_peer_fault {
    /// A `ZCIO_FAULT_*` constant.
    pub kind: c_int,
    /// Its detail (see the constant).
    pub value: u64,
}

impl From<PeerFault> for zcio_peer_fault {
    fn from(f: PeerFault) -> Self {
        let (kind, value) = match f {
            PeerFault::FutileWakes(n) => (ZCIO_FAULT_FUTILE_WAKES, u64::from(n)),
            PeerFault::NotConsuming => (ZCIO_FAULT_NOT_CONSUMING, 0),
            PeerFault::NotReleasing(n) => (ZCIO_FAULT_NOT_RELEASING, n as u64),
            PeerFault::HoldExpired(d) => (ZCIO_FAULT_HOLD_EXPIRED, ms_of(d) as u64),
            PeerFault::HoldsReclaimed(n) => (ZCIO_FAULT_HOLDS_RECLAIMED, n),
            PeerFault::Corrupt(Area::MessageRing) => (ZCIO_FAULT_CORRUPT, 1),
            PeerFault::Corrupt(_) => (ZCIO_FAULT_CORRUPT, 2),
            PeerFault::Malformed(n) => (ZCIO_FAULT_MALFORMED, n),
            _ => (ZCIO_FAULT_OTHER, 0),
        };
        Self { kind, value }
    }
}

/// Wake the peer for messages whose wake was deferred
/// (`ZCIO_NOTIFY_DEFER`), publish deallocation notices still batched here,
/// and enforce the hold limit (an abort shows in the next send and in
/// `zcio_channel_health`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_flush(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => {
                c.ch.flush();
                0
            }
            Err(e) => e,
        }
    })
}

/// Enforce `hold_limit_ms` now (also done on every send, reclaim and
/// flush; call it from a timer when the channel may sit idle while the
/// peer holds buffers). Returns how many lent slices were taken back
/// (`ZCIO_HOLD_RECLAIM`), `-ECONNABORTED` once the channel was aborted
/// (`ZCIO_HOLD_ABORT`: see `zcio_channel_health`), or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_expire_holds(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        match c.ch.expire_holds() {
            Ok(n) => n.min(c_int::MAX as usize) as c_int,
            Err(kind) => fail(kind),
        }
    })
}

/// The first misbehaviour of the peer this end detected: 0 when there is
/// none, 1 when there is one — stored in `*out` unless `out` is NULL, with
/// its text in `zcio_last_error` — or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel; `out` is NULL or valid for writing a
/// `struct zcio_peer_fault`.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_health(
    ch: *mut zcio_channel,
    out: *mut zcio_peer_fault,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        match c.ch.health() {
            Ok(()) => 0,
            Err(f) => {
                crate::error::set_last(f);
                if !out.is_null() {
                    // SAFETY: non-NULL and writable (contract).
                    unsafe { out.write(f.into()) };
                }
                1
            }
        }
    })
}

/// Every kind of misbehaviour of the peer detected so far, in the order
/// first seen (latest detail per kind), then the running totals of
/// malformed input and reclaimed holds. Stores the first `n` in `out[0..n]`
/// (`out` may be NULL when `n` is 0) and returns how many there are (more
/// than `n`: call again with a larger array), or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel; `out` is NULL or valid for writing `n`
/// `struct zcio_peer_fault`s.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_faults(
    ch: *mut zcio_channel,
    out: *mut zcio_peer_fault,
    n: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        if out.is_null() && n > 0 {
            return einval("zcio_channel_faults: out is NULL but n is not 0");
        }
        let faults = c.ch.faults();
        for (i, f) in faults.iter().take(n).enumerate() {
            // SAFETY: `out` is writable for `n` entries (contract); `i < n`.
            unsafe { out.add(i).write((*f).into()) };
        }
        faults.len().min(c_int::MAX as usize) as c_int
    })
}

/// The kernel's credentials of the peer process (`SO_PEERCRED`, taken
/// when the channel was set up; not from any message). Returns 0 or
/// `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel; `out` is NULL or valid for writing a
/// `struct zcio_peer_cred`.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_peer(
    ch: *mut zcio_channel,
    out: *mut zcio_peer_cred,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        if out.is_null() {
            return einval("zcio_channel_peer: out is NULL");
        }
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(c.ch.peer().into()) };
        0
    })
}

/// 1 when the peer is known to be gone (an operation of this end, or
/// `zcio_channel_check_peer`, found it dead or closed), else 0; a flag, no
/// system call. `-EINVAL` for NULL.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_is_disconnected(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => c_int::from(c.ch.is_disconnected()),
            Err(e) => e,
        }
    })
}

/// Probe whether the peer is still alive (its socket and pidfd); if not,
/// release everything it held. Returns 1 while it is alive, 0 when it is
/// gone, `-EINVAL` for NULL.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_check_peer(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => c_int::from(c.ch.check_peer()),
            Err(e) => e,
        }
    })
}

/// The channel's set-up socket (readable when control records or a hang-up
/// are pending), for a poll loop that watches for the peer going away. It
/// belongs to the channel: do not read, write or close it. Returns the fd
/// or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_socket(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => c.ch.socket().as_raw_fd(),
            Err(e) => e,
        }
    })
}

/// Announce every current chunk of `pool` to the peer now, so the first
/// messages from it need no set-up on the way. Returns 0, `-EPIPE` (the
/// peer is gone), `-EINVAL`, or a negative errno.
///
/// # Safety
/// `ch` is NULL or a live channel; `pool` is NULL or a live pool.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_share_pool(
    ch: *mut zcio_channel,
    pool: *const zcio_pool,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { pool.as_ref() }) else {
            return einval("zcio_channel_share_pool: pool is NULL");
        };
        match c.ch.share_pool(&p.pool) {
            Ok(()) => 0,
            Err(kind) => fail(kind),
        }
    })
}

/// Declare that the peer never writes a buffer after sending it: messages
/// received from now on are not volatile (`zcio_msg_is_volatile` says 0)
/// and may be read in place without copying out first. Only for peers
/// (and every originator upstream of them) you trust to leave sent
/// buffers alone; for the others use secured buffers
/// (`zcio_buf_alloc_secured`) or copies. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel. The trust is yours to give: a trusted
/// peer that writes a sent buffer changes bytes this process reads as
/// immutable.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_trust_peer(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => {
                // SAFETY: the caller vouches for the peer (contract above).
                unsafe { c.ch.trust_peer() };
                0
            }
            Err(e) => e,
        }
    })
}

/// 1 when `zcio_channel_trust_peer` was called on this end, else 0;
/// `-EINVAL` for NULL.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_is_peer_trusted(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => c_int::from(c.ch.is_peer_trusted()),
            Err(e) => e,
        }
    })
}

/// The configuration of this end, as `zcio_channel_config_init` would
/// give it (an accepted channel has its listener's). Stores it in `*out`.
/// Returns 0 or `-EINVAL`.
///
/// The header's `zcio_channel_get_config(…, out)` passes `sizeof *(out)` as `size`;
/// at most `size` bytes are written (docs/c.md, "The ABI").
///
/// # Safety
/// `ch` is NULL or a live channel; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_get_config_sized(
    ch: *mut zcio_channel,
    out: *mut zcio_channel_config,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        unsafe {
            put_config(
                "zcio_channel_get_config",
                &config_of(c.ch.config()),
                out,
                size,
            )
        }
    })
}
