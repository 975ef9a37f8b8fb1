//! Of a ring end: the consumers a producer sees (`Producer::consumers`,
//! `live_consumers`) and the settable bound of its default wait
//! (`wait_bound`, `set_wait_bound`).

use std::ffi::c_int;
use std::time::Duration;

use crate::error::{einval, guard};
use crate::ring::{handle, zcio_ring, End};
use crate::ZCIO_TIMEOUT_INFINITE;

/// Producer: how many consumers are attached. With `live` nonzero, first
/// evict those whose process died (`Producer::live_consumers`; costs a
/// look at each). Returns the count, `-EBADF` (a consumer's handle),
/// `-EBUSY` (a reservation is open) or `-EINVAL`.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_consumers(ring: *mut zcio_ring, live: c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let p = match r.producer("zcio_ring_consumers") {
            Ok(p) => p,
            Err(e) => return e,
        };
        let n = if live != 0 {
            p.live_consumers()
        } else {
            p.consumers()
        };
        n.min(c_int::MAX as usize) as c_int
    })
}

/// Set the bound of this end's default wait (what a read, peek, write or
/// reservation waits with the handle's timeout < 0, the default), in
/// milliseconds: > 0, or `ZCIO_TIMEOUT_INFINITE` for none. The defaults
/// are 10 000 for a producer and 3 600 000 (one hour) for a consumer. The
/// bound is this end's, not the ring's. Returns 0, `-EINVAL` (NULL, or
/// `bound_ms` ≤ 0) or `-EBUSY` (a reservation is open).
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_set_wait_bound(ring: *mut zcio_ring, bound_ms: i64) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let bound = match bound_ms {
            b if b == i64::from(ZCIO_TIMEOUT_INFINITE) => Duration::MAX,
            1.. => Duration::from_millis(bound_ms as u64),
            _ => {
                return einval(format_args!(
                    "zcio_ring_set_wait_bound: bound_ms must be > 0 or ZCIO_TIMEOUT_INFINITE, not {bound_ms}"
                ))
            }
        };
        match &mut r.end {
            End::Consumer(c) => c.set_wait_bound(bound),
            End::Producer(pe) => match pe.get("zcio_ring_set_wait_bound") {
                Ok(p) => p.set_wait_bound(bound),
                Err(e) => return e,
            },
        }
        0
    })
}

/// This end's wait bound in milliseconds (`ZCIO_TIMEOUT_INFINITE` when it
/// has none or it does not fit), or `-EINVAL` / `-EBUSY` (a reservation is
/// open).
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_wait_bound(ring: *mut zcio_ring) -> i64 {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return i64::from(e),
        };
        let b = match &mut r.end {
            End::Consumer(c) => c.wait_bound(),
            End::Producer(pe) => match pe.get("zcio_ring_wait_bound") {
                Ok(p) => p.wait_bound(),
                Err(e) => return i64::from(e),
            },
        };
        if b == Duration::MAX {
            return i64::from(ZCIO_TIMEOUT_INFINITE);
        }
        i64::try_from(b.as_millis()).unwrap_or(i64::from(ZCIO_TIMEOUT_INFINITE))
    })
}
