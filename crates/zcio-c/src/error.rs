//! Error codes, the panic guard every entry point runs in, and the two
//! ways to turn a code into text (`zcio_strerror`, `zcio_last_error`).
//!
//! Every call returns `0`, a count, or a negative code: `-errno` where an
//! errno says it (`-EAGAIN`, `-ETIMEDOUT`, `-EPIPE` …) and `-ZCIO_E…` in
//! `ZCIO_ECODE_MIN..=ZCIO_ECODE_MAX` (above the kernel's 4095) for what no
//! errno says. Every Rust error becomes a `zcio::Error`, and its code
//! comes from its errno, else from its `zcio::ErrorKind`, in one place
//! ([`code_of`]): the same situation has the same code on every transport
//! (`-EAGAIN`: nothing available now; `-EPIPE`: the peer is gone).

use std::borrow::Cow;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use zcio::ErrorKind;

/// Lowest zcio-specific error code (above every errno, which stop at 4095).
pub const ZCIO_ECODE_MIN: c_int = 4096;
/// A peeked ring block was overwritten while it was held (FRP/MRP
/// policies): whatever was read from it may be garbage. The consumer's
/// cursor has skipped ahead.
pub const ZCIO_ELAPPED: c_int = 4096;
/// Internal error: a Rust panic inside libzcio was caught at the API
/// boundary (it never unwinds into C). Close the handle involved.
pub const ZCIO_EPANIC: c_int = 4097;
/// The peer corrupted shared state, or truncated a shared file: the
/// channel is closed, or the ring cannot be read further.
pub const ZCIO_ECORRUPT: c_int = 4098;
/// Ring full under a tail-drop policy (SRP/MRP): this block was not
/// stored (counted in the ring's drop counter).
pub const ZCIO_EDROPPED: c_int = 4099;
/// The file is not a ring this library can use (magic, version, geometry).
pub const ZCIO_EBADRING: c_int = 4100;
/// The ring's producer closed it with an error (`zcio_ring_close_error`):
/// everything it wrote was read, but the stream is incomplete.
pub const ZCIO_EPRODFAIL: c_int = 4101;
/// A processing module failed (bad arguments are `-EINVAL`, malformed
/// input `-EBADMSG`; this is the rest: a codec or module library failure),
/// or a shared object is not a loadable zcio module. `zcio_last_error`
/// names the module.
pub const ZCIO_EMODULE: c_int = 4102;
/// Highest zcio-specific error code.
pub const ZCIO_ECODE_MAX: c_int = 4102;

/// What a failed entry point returns when it caught a panic.
pub(crate) trait Ret {
    fn panicked() -> Self;
}

impl Ret for c_int {
    fn panicked() -> Self {
        -ZCIO_EPANIC
    }
}

impl Ret for isize {
    fn panicked() -> Self {
        -(ZCIO_EPANIC as isize)
    }
}

impl Ret for i64 {
    fn panicked() -> Self {
        -i64::from(ZCIO_EPANIC)
    }
}

impl Ret for usize {
    fn panicked() -> Self {
        0
    }
}

impl Ret for () {
    fn panicked() -> Self {}
}

impl<T> Ret for *mut T {
    fn panicked() -> Self {
        std::ptr::null_mut()
    }
}

impl<T> Ret for *const T {
    fn panicked() -> Self {
        std::ptr::null()
    }
}

/// Run an entry point's body; a panic becomes `R::panicked()` (for codes:
/// `-ZCIO_EPANIC`) and its message the thread's last error. No panic ever
/// unwinds into the caller.
pub(crate) fn guard<R: Ret>(f: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| Cow::Borrowed(*s))
                .or_else(|| {
                    payload
                        .downcast_ref::<String>()
                        .map(|s| Cow::from(s.clone()))
                })
                .unwrap_or(Cow::Borrowed("(no message)"));
            set_last(format!(
                "internal error in libzcio (a Rust panic, caught at the API boundary): {what}"
            ));
            // Dropping the payload runs its Drop, which could panic in
            // turn: drop it inside a guard too (and leak only what that
            // second panic carries).
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                std::mem::forget(again);
            }
            R::panicked()
        }
    }
}

/// The thread's last error text.
enum Last {
    None,
    /// Only a code: its `zcio_strerror` text (no allocation, for the
    /// frequent `-EAGAIN` / `-ETIMEDOUT`).
    Code(c_int),
    Text(CString),
}

thread_local! {
    static LAST: RefCell<Last> = const { RefCell::new(Last::None) };
}

/// Record `msg` as this thread's last error.
pub(crate) fn set_last(msg: impl Display) {
    let text = CString::new(msg.to_string().replace('\0', "\\0")).unwrap_or_default();
    // `try_with`: may run while the thread is being torn down.
    let _ = LAST.try_with(|l| *l.borrow_mut() = Last::Text(text));
}

fn set_last_code(code: c_int) {
    let _ = LAST.try_with(|l| *l.borrow_mut() = Last::Code(code));
}

/// Fail with `-code`, recording `msg` as the detail.
pub(crate) fn fail_msg(code: c_int, msg: impl Display) -> c_int {
    set_last(msg);
    -code
}

/// `-EINVAL` for a bad argument, saying which.
pub(crate) fn einval(msg: impl Display) -> c_int {
    fail_msg(libc::EINVAL, msg)
}

/// The (positive) code of a zcio error: its errno where a system call
/// gave one, else the code of its [`ErrorKind`]. The one place Rust errors
/// become C codes; the kinds' table is in `zcio::ErrorKind`'s docs.
pub(crate) fn code_of(e: &zcio::Error) -> c_int {
    if let Some(errno) = e.errno() {
        return errno.raw_os_error();
    }
    let kind = e.kind();
    if let Some(errno) = kind.errno() {
        return errno.raw_os_error();
    }
    match kind {
        ErrorKind::PeerFault => ZCIO_ECORRUPT,
        ErrorKind::Lapped => ZCIO_ELAPPED,
        ErrorKind::Dropped => ZCIO_EDROPPED,
        ErrorKind::ProducerFailed => ZCIO_EPRODFAIL,
        ErrorKind::NotARing => ZCIO_EBADRING,
        ErrorKind::Module => ZCIO_EMODULE,
        ErrorKind::Internal => ZCIO_EPANIC,
        _ => libc::EIO,
    }
}

/// Whether `e`'s text says no more than its code's: the frequent "try
/// again" outcomes of polling loops (an empty or full channel or ring, a
/// timeout), recorded without allocating. An exhausted pool or arena, or a
/// peer holding too many buffers, is also `-EAGAIN` but its text says
/// which and what to do, so that is kept.
fn code_says_all(e: &zcio::Error) -> bool {
    use zcio::rendezvous::{
        RendezvousCallError as RC, RendezvousRecvError as RR, RendezvousSendError as RS,
    };
    use zcio::{Error as E, SendErrorKind as S};
    matches!(
        e,
        E::TryRecv(_)
            | E::Recv(_)
            | E::RingRead(_)
            | E::RingWrite(_)
            | E::Send(S::WouldBlock | S::TimedOut)
            | E::Lane(zcio::LaneError::WouldBlock | zcio::LaneError::TimedOut)
            | E::RendezvousSend(RS::WouldBlock | RS::TimedOut)
            | E::RendezvousRecv(RR::WouldBlock | RR::TimedOut)
            | E::RendezvousCall(
                RC::Send(RS::WouldBlock | RS::TimedOut) | RC::Recv(RR::WouldBlock | RR::TimedOut)
            )
            | E::Proxy(zcio::proxy::ProxyError::WouldBlock | zcio::proxy::ProxyError::TimedOut)
    )
}

/// Fail with `e`'s code; its text becomes the thread's last error (only
/// the code for the "try again" outcomes of polling loops, so they
/// allocate nothing).
pub(crate) fn fail(e: impl Into<zcio::Error>) -> c_int {
    let e = e.into();
    let c = code_of(&e);
    if matches!(c, libc::EAGAIN | libc::ETIMEDOUT) && code_says_all(&e) {
        set_last_code(c);
    } else {
        set_last(&e);
    }
    -c
}

/// Texts of the errno values 1..=133, from the C library (built once).
fn errno_texts() -> &'static [CString] {
    static TEXTS: OnceLock<Vec<CString>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        (1..=133)
            .map(|e| {
                let s = std::io::Error::from_raw_os_error(e).to_string();
                // std appends " (os error N)"; keep the C library's text.
                let s = s.split(" (os error").next().unwrap_or("unknown error");
                CString::new(s).unwrap_or_default()
            })
            .collect()
    })
}

/// The text of `code` (either sign).
pub(crate) fn text(code: c_int) -> &'static CStr {
    let c = code.unsigned_abs();
    match c {
        0 => c"success",
        c if c == ZCIO_ELAPPED as u32 => {
            c"peeked block overwritten while held (consumer lapped; its cursor skipped ahead)"
        }
        c if c == ZCIO_EPANIC as u32 => {
            c"internal error in libzcio (a Rust panic caught at the API boundary; see zcio_last_error)"
        }
        c if c == ZCIO_ECORRUPT as u32 => {
            c"peer corrupted shared state or truncated a shared file"
        }
        c if c == ZCIO_EDROPPED as u32 => c"ring full: block dropped (tail-drop policy)",
        c if c == ZCIO_EBADRING as u32 => c"not a usable zcio ring",
        c if c == ZCIO_EPRODFAIL as u32 => {
            c"ring producer closed the ring with an error: the stream is incomplete"
        }
        c if c == ZCIO_EMODULE as u32 => {
            c"a processing module failed (see zcio_last_error for which and why)"
        }
        c => match errno_texts().get((c as usize).wrapping_sub(1)) {
            Some(t) => t.as_c_str(),
            None => c"unknown error code",
        },
    }
}

/// Describe a return code: `zcio_strerror(-EAGAIN)` or
/// `zcio_strerror(EAGAIN)` (either sign), `-ZCIO_E…` codes included; `0`
/// gives "success", an unknown code "unknown error code". The string is
/// static: never free it. Thread-safe.
#[no_mangle]
pub extern "C" fn zcio_strerror(code: c_int) -> *const c_char {
    guard(|| text(code).as_ptr())
}

/// A description of the last failure of a zcio call on the calling
/// thread, with details the code cannot carry (which name, which size,
/// what to do). Never NULL (`""` before any failure). Successful calls do
/// not clear it. The string belongs to the thread and stays valid until
/// its next failing zcio call.
#[no_mangle]
pub extern "C" fn zcio_last_error() -> *const c_char {
    guard(|| {
        LAST.try_with(|l| match &*l.borrow() {
            Last::None => c"".as_ptr(),
            Last::Code(c) => text(*c).as_ptr(),
            Last::Text(t) => t.as_ptr(),
        })
        .unwrap_or(c"".as_ptr())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_text() {
        for c in ZCIO_ECODE_MIN..=ZCIO_ECODE_MAX {
            let t = text(-c).to_str().unwrap();
            assert!(!t.is_empty() && t != "unknown error code", "{c}");
        }
        assert_eq!(text(-libc::EAGAIN), text(libc::EAGAIN));
        assert_eq!(text(0).to_str().unwrap(), "success");
        assert_eq!(text(99_999).to_str().unwrap(), "unknown error code");
        assert_eq!(text(c_int::MIN).to_str().unwrap(), "unknown error code");
    }

    #[test]
    fn spec_errors_keep_the_os_errno() {
        let e =
            zcio::splice::IoObject::open("/nonexistent/zcio-c-test", zcio::splice::Role::Source)
                .err()
                .unwrap();
        assert_eq!(code_of(&e.clone().into()), libc::ENOENT, "{e}");
        let e = zcio::splice::IoObject::open("fd:x", zcio::splice::Role::Source)
            .err()
            .unwrap();
        assert_eq!(code_of(&e.clone().into()), libc::EINVAL, "{e}");
    }

    #[test]
    fn one_situation_has_one_code_on_every_transport() {
        use zcio::ring::{ReadError, WriteError};
        let would_block: Vec<zcio::Error> = vec![
            zcio::SendErrorKind::WouldBlock.into(),
            zcio::TryRecvError::WouldBlock.into(),
            ReadError::WouldBlock.into(),
            WriteError::WouldBlock.into(),
            zcio::AllocError::WouldBlock("p".into()).into(),
            zcio::rendezvous::RendezvousRecvError::WouldBlock.into(),
            zcio::proxy::ProxyError::WouldBlock.into(),
            zcio::semantics::ArenaError::WouldBlock {
                pages: 1,
                capacity: 1,
            }
            .into(),
        ];
        for e in &would_block {
            assert_eq!(code_of(e), libc::EAGAIN, "{e}");
        }
        let gone: Vec<zcio::Error> = vec![
            zcio::SendErrorKind::Disconnected.into(),
            zcio::RecvError::Disconnected.into(),
            ReadError::Disconnected { pid: 7 }.into(),
            zcio::rendezvous::RendezvousSendError::Disconnected.into(),
            zcio::proxy::ProxyError::Disconnected.into(),
        ];
        for e in &gone {
            assert_eq!(code_of(e), libc::EPIPE, "{e}");
        }
        let e: zcio::Error = zcio::RegionError::Os {
            op: "x",
            errno: zcio::Errno::NOSPC,
        }
        .into();
        assert_eq!(code_of(&e), libc::ENOSPC);
        assert_eq!(code_of(&ReadError::Lapped.into()), ZCIO_ELAPPED);
    }

    #[test]
    fn an_exhausted_pool_keeps_its_text_a_polling_miss_only_its_code() {
        assert_eq!(
            fail(zcio::AllocError::WouldBlock("pname".into())),
            -libc::EAGAIN
        );
        // SAFETY: zcio_last_error returns a NUL-terminated string that
        // stays valid until the next failing call on this thread.
        let msg = unsafe { CStr::from_ptr(zcio_last_error()) };
        assert!(msg.to_str().unwrap().contains("pname"), "{msg:?}");
        assert_eq!(fail(zcio::TryRecvError::WouldBlock), -libc::EAGAIN);
        // SAFETY: as above.
        let msg = unsafe { CStr::from_ptr(zcio_last_error()) };
        assert_eq!(msg, text(libc::EAGAIN));
    }

    #[test]
    fn a_panic_becomes_an_error_code_and_a_message() {
        let r: c_int = guard(|| panic!("boom"));
        assert_eq!(r, -ZCIO_EPANIC);
        // SAFETY: zcio_last_error returns a NUL-terminated string that
        // stays valid until the next failing call on this thread.
        let msg = unsafe { CStr::from_ptr(zcio_last_error()) };
        assert!(msg.to_str().unwrap().contains("boom"), "{msg:?}");
        let p: *mut u8 = guard(|| std::panic::panic_any(42_u32));
        assert!(p.is_null());
    }
}
