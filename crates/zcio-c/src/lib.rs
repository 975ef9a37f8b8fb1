//! The C library of zcio: POSIX-style calls over the Rust API, built as
//! `libzcio.so` / `libzcio.a` by `scripts/build-c`, declared in
//! `include/zcio.h` (generated from this crate by cbindgen; the doc
//! comments here are the header's comments, written for C programmers).
//!
//! Rules every entry point follows:
//! * it runs inside [`error::guard`]: a panic becomes `-ZCIO_EPANIC`, it
//!   never unwinds into C;
//! * pointers are checked for NULL; handles are opaque (`Box`es of the
//!   types below), never Rust types with a layout;
//! * it returns `0`, a count, or a negative errno-style code (see
//!   [`error`]), and records a detailed message for `zcio_last_error`.
//!
//! A frontend: it only binds the public `zcio` API (rings, channels,
//! pools, messages, typed messages, associations, the rendezvous and its
//! proxy threads).

#![allow(non_camel_case_types)]

// In the order of the header's sections (cbindgen follows it).
pub mod error;

mod abi;

/// A `timeout_ms` that asks for the default wait (any negative value
/// does): up to the bound the call's configuration sets — a channel's
/// `zcio_channel_config` (10 s to send, one hour to receive or accept by
/// default), a ring end's bound (10 s to write, one hour to read), a
/// pool's 10 s; each call names its bound. `-ETIMEDOUT` after it.
pub const ZCIO_TIMEOUT_DEFAULT: c_int = -1;

/// A `timeout_ms` (or a bound in `zcio_channel_config`) that waits without
/// a bound: as long as it takes (`INT_MAX`; a dead peer still ends the
/// wait). Only for peers you trust: a live peer that never answers then
/// holds the caller for good.
pub const ZCIO_TIMEOUT_INFINITE: c_int = i32::MAX;

pub mod ring;

#[cfg(feature = "bridge")]
pub mod bridge;

pub mod ring_block;

pub mod ring_create;

pub mod ring_end;

pub mod ring_info;

pub mod ring_reserve;

pub mod pool;

pub mod chan;

pub mod chan_control;

pub mod relay;

pub mod lane;

pub mod msg;

pub mod typed;

mod typetag;

pub mod splice;

pub mod semantics;

pub mod cred;

pub mod rendezvous;

pub mod proxy;

use std::ffi::{c_char, c_int, CStr};
use std::time::Duration;

/// `ssize_t` of the C library (the header uses the system's).
pub type ssize_t = libc::ssize_t;

const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the package version contains a NUL byte"),
    };

/// Version string of the library (`"0.1.0"`); static, never NULL.
#[no_mangle]
pub extern "C" fn zcio_version() -> *const c_char {
    error::guard(|| VERSION.as_ptr())
}

/// Set the process's spin policy (Rust's `zcio::SpinPolicy`): how long a
/// blocking wait spins before it sleeps (`max_us`, default 500), and how long
/// a wait inside an event loop's poll spins before it returns to the loop
/// (`task_max_us`, default 50, capped by `max_us`), in microseconds. 0 sleeps
/// at once: right when more processes than CPUs share the work. The policy is
/// read when a channel, ring end or rendezvous endpoint is made: set it
/// before opening them. Process-wide. Returns 0.
#[no_mangle]
pub extern "C" fn zcio_spin_policy_set(max_us: u64, task_max_us: u64) -> c_int {
    error::guard(|| {
        zcio::SpinPolicy {
            max: Duration::from_micros(max_us),
            task_max: Duration::from_micros(task_max_us),
        }
        .set();
        0
    })
}

/// The process's spin policy in microseconds (see `zcio_spin_policy_set`):
/// stores it in `*max_us` and `*task_max_us`. Returns 0, or `-EINVAL` when a
/// pointer is NULL.
///
/// # Safety
/// `max_us` and `task_max_us` are NULL or valid for a write of a `u64`.
#[no_mangle]
pub unsafe extern "C" fn zcio_spin_policy_get(max_us: *mut u64, task_max_us: *mut u64) -> c_int {
    error::guard(|| {
        if max_us.is_null() || task_max_us.is_null() {
            return -libc::EINVAL;
        }
        let p = zcio::SpinPolicy::current();
        let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        // SAFETY: both are non-NULL (checked) and valid for a write by the
        // caller's contract.
        unsafe {
            max_us.write(us(p.max));
            task_max_us.write(us(p.task_max));
        }
        0
    })
}

/// The system page size in bytes: the granularity of buffers, arenas and
/// ring data areas.
#[no_mangle]
pub extern "C" fn zcio_page_size() -> usize {
    error::guard(zcio::page_size)
}

/// Make this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): other
/// processes of the same uid can then neither `ptrace` it nor open its
/// the descriptors under `/proc/PID/fd`, the two ways a same-uid peer could get a writable
/// descriptor of its shared buffers. For an originator that must keep
/// secured or volatile buffers safe from same-uid peers (other uids need no
/// such step). Returns 0 or a negative errno.
#[no_mangle]
pub extern "C" fn zcio_set_non_dumpable() -> c_int {
    error::guard(|| match zcio::set_non_dumpable() {
        Ok(()) => 0,
        Err(e) => error::fail_msg(
            e.raw_os_error(),
            format_args!("zcio_set_non_dumpable: prctl(PR_SET_DUMPABLE): {e}"),
        ),
    })
}

/// Not part of the API (absent from the header): panics inside the
/// library, to prove that the panic comes back as `-ZCIO_EPANIC` and not
/// as an unwind into C. `kind` 0 panics with a message, anything else with
/// a non-string payload.
#[no_mangle]
pub extern "C" fn zcio__test_panic(kind: c_int) -> c_int {
    error::guard(|| {
        if kind == 0 {
            panic!("zcio__test_panic: a deliberate panic inside libzcio");
        }
        std::panic::panic_any(kind)
    })
}

/// A timeout argument: negative waits up to the bound the call's
/// configuration sets, 0 does not wait, positive waits that many
/// milliseconds, `ZCIO_TIMEOUT_INFINITE` without a bound
/// (`Duration::MAX`, which every `_timeout` call of zcio takes as no
/// deadline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timeout {
    Default,
    No,
    For(Duration),
}

impl Timeout {
    pub(crate) fn from_ms(ms: c_int) -> Self {
        match ms {
            ..0 => Timeout::Default,
            0 => Timeout::No,
            ZCIO_TIMEOUT_INFINITE => Timeout::For(Duration::MAX),
            ms => Timeout::For(Duration::from_millis(ms as u64)),
        }
    }

    /// The wait, with `bound` for the default.
    pub(crate) fn or(self, bound: Duration) -> Duration {
        match self {
            Timeout::Default => bound,
            Timeout::No => Duration::ZERO,
            Timeout::For(d) => d,
        }
    }
}

/// A bound given in milliseconds (a field of a configuration struct):
/// `ZCIO_TIMEOUT_INFINITE` is none (`Duration::MAX`); it must be > 0.
pub(crate) fn bound_ms(ms: c_int, what: &str) -> Result<Duration, c_int> {
    match ms {
        ZCIO_TIMEOUT_INFINITE => Ok(Duration::MAX),
        1.. => Ok(Duration::from_millis(ms as u64)),
        _ => Err(error::einval(format_args!(
            "{what} must be > 0 (ms) or ZCIO_TIMEOUT_INFINITE, not {ms}"
        ))),
    }
}

/// A bound as milliseconds for C (`ZCIO_TIMEOUT_INFINITE` when it does not
/// fit).
pub(crate) fn ms_of(d: Duration) -> c_int {
    c_int::try_from(d.as_millis()).unwrap_or(ZCIO_TIMEOUT_INFINITE)
}

/// A C string argument as UTF-8 (`what` names it in the error).
///
/// # Safety
/// `s` is NULL or a NUL-terminated string valid for reads.
pub(crate) unsafe fn str_arg<'a>(s: *const c_char, what: &str) -> Result<&'a str, c_int> {
    if s.is_null() {
        return Err(error::einval(format_args!("{what} is NULL")));
    }
    // SAFETY: non-NULL, and the caller promises a NUL-terminated string.
    let c = unsafe { CStr::from_ptr(s) };
    c.to_str()
        .map_err(|_| error::einval(format_args!("{what} {c:?} is not valid UTF-8")))
}

// The header promises: rings and buffers may move between threads;
// channels, pools, messages and endpoints may be used from several at once.
const _: () = {
    const fn send<T: Send>() {}
    const fn send_sync<T: Send + Sync>() {}
    send::<ring::zcio_ring>();
    send::<pool::zcio_buf>();
    send_sync::<pool::zcio_pool>();
    send_sync::<chan::zcio_channel>();
    send_sync::<chan::zcio_listener>();
    send_sync::<msg::zcio_msg>();
    send_sync::<splice::zcio_assoc>();
    send_sync::<semantics::zcio_semantic_endpoint>();
    send::<semantics::zcio_arena_buf>();
    send::<semantics::zcio_owned>();
    send_sync::<rendezvous::zcio_rendezvous>();
    send_sync::<rendezvous::zcio_rendezvous_listener>();
    send_sync::<proxy::zcio_proxies>();
    send_sync::<proxy::zcio_proxy_endpoint>();
    send_sync::<proxy::zcio_ticket>();
    send_sync::<proxy::zcio_recv_handle>();
    #[cfg(feature = "bridge")]
    send_sync::<bridge::zcio_bridge>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_panic_entry_returns_the_panic_code() {
        assert_eq!(zcio__test_panic(0), -error::ZCIO_EPANIC);
        assert_eq!(zcio__test_panic(7), -error::ZCIO_EPANIC);
        // The library still works afterwards.
        // SAFETY: zcio_strerror returns a static NUL-terminated string.
        let t = unsafe { CStr::from_ptr(error::zcio_strerror(-libc::EPIPE)) };
        assert_eq!(t.to_str().unwrap(), "Broken pipe");
    }

    #[test]
    fn null_handles_are_einval_not_crashes() {
        // SAFETY: NULL is allowed for every pointer argument.
        unsafe {
            assert_eq!(
                ring::zcio_ring_read(std::ptr::null_mut(), std::ptr::null_mut(), 1),
                -(libc::EINVAL as isize)
            );
            assert_eq!(
                chan::zcio_recv(std::ptr::null_mut(), 0, std::ptr::null_mut()),
                -libc::EINVAL
            );
            assert!(pool::zcio_buf_data(std::ptr::null_mut()).is_null());
            msg::zcio_msg_release(std::ptr::null_mut());
        }
    }
}
