//! Associations (`zcio::splice`): a standing connection between a source
//! and a sink that moves the data itself — through the kernel's fast
//! paths (`copy_file_range`, `sendfile`, `splice`) when nothing processes
//! it, through pool buffers and a stack of processing modules when
//! something does. `zcio_splice_fds` / `zcio_splice_specs`, increments
//! (`zcio_assoc_run`, `zcio_assoc_start` + `zcio_assoc_wait` /
//! `zcio_assoc_fd` / `zcio_assoc_on_complete`), `zcio_assoc_stop`,
//! `zcio_assoc_get_status`, modules (`zcio_assoc_push` / `pop` / `control`),
//! `zcio_assoc_close`, `zcio_cp`, `zcio_module_load` and `zcio_module_names`;
//! a channel as an I/O object (`zcio_splice_channel_fd`,
//! `zcio_splice_fd_channel`) and the labels of both ends (`zcio_assoc_label`).

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, TryLockError};

use zcio::splice::module::Registry;
use zcio::splice::{
    Association, Completion, Increment, IoObject, MoverKind, Next, Remote, SpliceError, Status,
};

use crate::abi::{put, Extensible};
use crate::chan::zcio_channel;
use crate::error::{code_of, einval, fail, fail_msg, guard, set_last};
use crate::{ssize_t, str_arg, Timeout};

/// `zcio_assoc_run` / `zcio_assoc_start`: the default increment (zcio
/// chooses; 4 MiB).
pub const ZCIO_INCREMENT_DEFAULT: u64 = 0;
/// `zcio_assoc_run` / `zcio_assoc_start`: until the source ends (or an
/// error, or `zcio_assoc_stop`).
pub const ZCIO_INCREMENT_INFINITE: u64 = u64::MAX;

/// Mover: `copy_file_range(2)`, file to file inside the kernel.
pub const ZCIO_MOVER_COPY_FILE_RANGE: c_int = 0;
/// Mover: `sendfile(2)`, from a file to any descriptor.
pub const ZCIO_MOVER_SENDFILE: c_int = 1;
/// Mover: `splice(2)`, directly or through an internal pipe.
pub const ZCIO_MOVER_SPLICE: c_int = 2;
/// Mover: the buffer path (read into pool buffers, run the modules, write
/// out): datagram sockets, rings, and any association with modules.
pub const ZCIO_MOVER_BUFFER: c_int = 3;

/// `zcio_assoc_label`: the source's label.
pub const ZCIO_ASSOC_SOURCE: c_int = 0;
/// `zcio_assoc_label`: the sink's label.
pub const ZCIO_ASSOC_SINK: c_int = 1;

/// An association between a source and a sink (opaque). Made by
/// `zcio_splice_fds` or `zcio_splice_specs`, freed by `zcio_assoc_close`.
///
/// Threads: `zcio_assoc_stop`, `zcio_assoc_get_status`, `zcio_assoc_wait`,
/// `zcio_assoc_fd` and `zcio_assoc_module_stats` may be called from any
/// thread at any time (stop a `zcio_assoc_run` blocked in another thread,
/// say). The other calls take the association for their duration: one
/// made while another runs (a `zcio_assoc_run` in another thread) fails
/// with `-EBUSY` instead of waiting.
pub struct zcio_assoc {
    a: Mutex<Association>,
    r: Remote,
    /// The increment last started (what `*next` of the callback starts as).
    last: Arc<AtomicU64>,
}

/// The end of one increment.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_completion {
    /// Bytes moved in this increment.
    pub moved: u64,
    /// 1 if the source ended.
    pub eof: c_int,
    /// 1 if `zcio_assoc_stop` ended the increment early.
    pub stopped: c_int,
    /// 0, or the negative code of the error that ended the increment
    /// (details: `zcio_last_error()` on the thread that received it).
    pub error: c_int,
}

/// Status of an association (`zcio_assoc_get_status`): the thesis's status
/// bits and the counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_assoc_status {
    /// 1 while an increment runs.
    pub active: c_int,
    /// 1 while someone waits for it (`zcio_assoc_run`, `zcio_assoc_wait`).
    pub wanted: c_int,
    /// 1 if an error ended the last increment.
    pub error: c_int,
    /// 1 once the source has ended.
    pub eof: c_int,
    /// Bytes moved since the association was made.
    pub moved: u64,
    /// The mover in use: `ZCIO_MOVER_...` (`zcio_mover_name` names it).
    pub mover: c_int,
    /// How many faster movers the kernel refused for this pair.
    pub fell_back: c_int,
    /// The errno of the last refusal (0 if none).
    pub fell_back_errno: c_int,
    /// Modules on the stack.
    pub modules: c_int,
    /// Bytes the modules copied (0 for pass-through modules).
    pub copied: u64,
    /// Blocks dropped because the sink could not take them at once (an
    /// active source: UDP, a ring).
    pub dropped: u64,
    /// Bytes of those blocks.
    pub dropped_bytes: u64,
    /// Blocks the source lost before the association read them (a ring
    /// reader that was lapped).
    pub lost: u64,
}

/// The completion callback (`zcio_assoc_on_complete`): `ctx` as given,
/// the completion, and `*next`, preset to the increment that just ended.
/// Return 0 to leave flow stopped, non-zero to start `*next` at once (not
/// after the end of the source, an error or a stop).
pub type zcio_assoc_callback = Option<
    unsafe extern "C" fn(ctx: *mut c_void, c: *const zcio_completion, next: *mut u64) -> c_int,
>;

/// The quench hook (`zcio_assoc_on_quench`): `quenched` is 1 when the
/// sink stops taking data at once, 0 when it takes data again.
pub type zcio_assoc_quench_callback =
    Option<unsafe extern "C" fn(ctx: *mut c_void, quenched: c_int)>;

/// The registry `zcio_assoc_push` and `zcio_cp` find modules in: the
/// built-ins plus what `zcio_module_load` added.
fn registry() -> &'static RwLock<Registry> {
    static REG: OnceLock<RwLock<Registry>> = OnceLock::new();
    REG.get_or_init(|| RwLock::new(Registry::builtin()))
}

fn increment(n: u64) -> Increment {
    match n {
        ZCIO_INCREMENT_DEFAULT => Increment::Default,
        ZCIO_INCREMENT_INFINITE => Increment::Infinite,
        n => Increment::Bytes(n),
    }
}

/// A completion for C; an error becomes this thread's last error.
fn completion(c: &Completion) -> zcio_completion {
    zcio_completion {
        moved: c.moved,
        eof: c.eof.into(),
        stopped: c.stopped.into(),
        error: match &c.error {
            Some(e) => {
                set_last(e);
                -code_of(&e.clone().into())
            }
            None => 0,
        },
    }
}

fn mover_code(m: MoverKind) -> c_int {
    match m {
        MoverKind::CopyFileRange => ZCIO_MOVER_COPY_FILE_RANGE,
        MoverKind::Sendfile => ZCIO_MOVER_SENDFILE,
        MoverKind::Splice => ZCIO_MOVER_SPLICE,
        MoverKind::Buffer => ZCIO_MOVER_BUFFER,
    }
}

fn status(s: &Status) -> zcio_assoc_status {
    zcio_assoc_status {
        active: s.active.into(),
        wanted: s.wanted.into(),
        error: s.error.into(),
        eof: s.eof.into(),
        moved: s.moved,
        mover: mover_code(s.mover),
        fell_back: s.fell_back.len().try_into().unwrap_or(c_int::MAX),
        fell_back_errno: s.fell_back.last().map_or(0, |(_, e)| e.raw_os_error()),
        modules: s.modules.len().try_into().unwrap_or(c_int::MAX),
        copied: s.copied,
        dropped: s.dropped,
        dropped_bytes: s.dropped_bytes,
        lost: s.lost,
    }
}

/// Copy `text` into `buf` (`cap` bytes, NUL-terminated, truncated if
/// needed, like `snprintf`); its full length.
///
/// # Safety
/// `buf` is NULL (then `cap` must be 0) or valid for writing `cap` bytes.
unsafe fn text_out(text: &str, buf: *mut c_char, cap: usize) -> Result<ssize_t, c_int> {
    if cap > 0 {
        if buf.is_null() {
            return Err(einval("the reply buffer is NULL but its size is not 0"));
        }
        let n = text.len().min(cap - 1);
        // SAFETY: `buf` is valid for `cap` > n bytes (contract); `text`
        // is a Rust string that does not overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            buf.add(n).write(0);
        }
    }
    Ok(text.len().try_into().unwrap_or(ssize_t::MAX))
}

/// A new handle for `a` in `*out`.
///
/// # Safety
/// `out` is non-NULL and valid for writing a pointer.
unsafe fn hand_out(a: Association, out: *mut *mut zcio_assoc) -> c_int {
    let h = zcio_assoc {
        r: a.remote(),
        a: Mutex::new(a),
        last: Arc::new(AtomicU64::new(ZCIO_INCREMENT_DEFAULT)),
    };
    // SAFETY: non-NULL and writable (contract).
    unsafe { out.write(Box::into_raw(Box::new(h))) };
    0
}

/// The handle behind `a`, or `-EINVAL` naming `call`.
///
/// # Safety
/// `a` is NULL or a live handle.
unsafe fn handle<'a>(a: *const zcio_assoc, call: &str) -> Result<&'a zcio_assoc, c_int> {
    // SAFETY: NULL or live (contract).
    unsafe { a.as_ref() }.ok_or_else(|| einval(format_args!("{call}: association is NULL")))
}

/// Take the association for a call that needs it whole; `-EBUSY` while
/// another call (a `zcio_assoc_run` in another thread) has it.
fn take<'a>(h: &'a zcio_assoc, call: &str) -> Result<MutexGuard<'a, Association>, c_int> {
    match h.a.try_lock() {
        Ok(g) => Ok(g),
        // A panic inside a call left it: the association itself is
        // consistent (its state has its own lock), keep using it.
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => Err(fail_msg(
            libc::EBUSY,
            format_args!("{call}: another call is using the association (a zcio_assoc_run in another thread?); stop it or wait for it"),
        )),
    }
}

/// Duplicate a caller's descriptor (close-on-exec); the caller keeps its own.
fn dup_fd(fd: c_int, what: &str) -> Result<OwnedFd, c_int> {
    if fd < 0 {
        return Err(fail_msg(
            libc::EBADF,
            format_args!("{what} descriptor {fd} is negative"),
        ));
    }
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on any integer is memory-safe; a
    // descriptor that is not open fails with EBADF.
    let n = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return Err(fail_msg(
            e.raw_os_error().unwrap_or(libc::EBADF),
            format_args!("{what} descriptor {fd}: {e}"),
        ));
    }
    // SAFETY: `n` is a descriptor fcntl just made for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// `-EBADF` unless `fd` is open.
fn check_open(fd: c_int, what: &str) -> Result<(), c_int> {
    // SAFETY: fcntl(F_GETFD) on any integer is memory-safe.
    if fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0 {
        return Ok(());
    }
    Err(fail_msg(
        libc::EBADF,
        format_args!("{what} descriptor {fd} is not an open descriptor"),
    ))
}

fn endpoint(fd: c_int, what: &str) -> Result<IoObject, c_int> {
    let owned = dup_fd(fd, what)?;
    IoObject::new(owned, format!("fd:{fd}")).map_err(fail)
}

/// Associate the descriptors `src_fd` (data flows from it) and `dst_fd`
/// (into it): regular files, pipes, TCP/UDP/Unix sockets, terminals. Both
/// are duplicated: the caller keeps (and closes) its own; the association
/// reads the source from its current offset. No data flows until an
/// increment is started. The mover is chosen for the pair, fastest first
/// (`zcio_assoc_get_status`). Stores the association in `*out`. Returns 0,
/// `-EBADF` (not an open descriptor), `-EINVAL` (a descriptor data cannot
/// flow from or to: a directory, an unconnected socket), or a negative errno.
///
/// # Safety
/// `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_splice_fds(
    src_fd: c_int,
    dst_fd: c_int,
    out: *mut *mut zcio_assoc,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_splice_fds: out is NULL");
        }
        // Both checked before either is duplicated: the duplicate of the
        // source could take the number of a closed sink descriptor.
        if let Err(e) = check_open(src_fd, "source").and(check_open(dst_fd, "sink")) {
            return e;
        }
        let r = endpoint(src_fd, "source")
            .and_then(|s| Ok((s, endpoint(dst_fd, "sink")?)))
            .and_then(|(s, d)| Association::new(s, d).map_err(fail));
        match r {
            // SAFETY: non-NULL and writable (contract).
            Ok(a) => unsafe { hand_out(a, out) },
            Err(e) => e,
        }
    })
}

/// Associate the I/O objects the specs `src` and `dst` name: a file path
/// (a source is read from its start, a sink created or truncated), `-`
/// (standard input / output), `fd:N` (a duplicate of descriptor N),
/// `tcp:HOST:PORT` (connect), `tcp-listen:HOST:PORT` (wait for one
/// connection: this call blocks until it comes), `udp:HOST:PORT` (a
/// source binds there, a sink sends there), `unix:PATH` (connect to a
/// stream socket), `ring:NAME` (a source joins ring NAME as a consumer; a
/// sink produces into it, creating it if missing). Stores the association
/// in `*out`. Returns 0 or a negative code (`-ENOENT`, `-ECONNREFUSED`, …
/// from the system; `-EINVAL` for a malformed spec).
///
/// # Safety
/// `src` and `dst` are NULL or NUL-terminated strings; `out` is NULL or
/// valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_splice_specs(
    src: *const c_char,
    dst: *const c_char,
    out: *mut *mut zcio_assoc,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_splice_specs: out is NULL");
        }
        // SAFETY: the caller's contract.
        let (src, dst) = match unsafe { (str_arg(src, "source spec"), str_arg(dst, "sink spec")) } {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        let r = IoObject::open_pair(src, dst).and_then(|(s, d)| Association::new(s, d));
        match r {
            // SAFETY: non-NULL and writable (contract).
            Ok(a) => unsafe { hand_out(a, out) },
            Err(e) => fail(e),
        }
    })
}

/// Take the channel behind `ch` over (its handle is freed).
///
/// # Safety
/// `ch` is a live, non-NULL channel that nothing else uses now or later.
unsafe fn take_channel(ch: *mut zcio_channel) -> IoObject {
    // SAFETY: live, non-NULL and given up by the caller (contract).
    let h = unsafe { Box::from_raw(ch) };
    IoObject::channel(h.ch, "channel")
}

/// Associate the channel end `src` (data flows from it: each message
/// received is written to the sink, in order; the source ends when the
/// peer closes its end) with the descriptor `dst_fd` (into it: a file, a
/// pipe, a socket; duplicated, the caller keeps its own). Always through
/// the buffer path (`ZCIO_MOVER_BUFFER`); messages are read in place, not
/// copied. Takes `src` over whatever the result, unless `src` or `out` is
/// NULL: its handle is freed, do not use or close it again (the
/// association closes the channel when it is closed). Stores the
/// association in `*out`. Returns 0, `-EBADF` (`dst_fd` not open),
/// `-EINVAL` or a negative errno.
///
/// # Safety
/// `src` is NULL or a live channel that no other thread uses during the
/// call (nor afterwards); `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_splice_channel_fd(
    src: *mut zcio_channel,
    dst_fd: c_int,
    out: *mut *mut zcio_assoc,
) -> c_int {
    guard(|| {
        if src.is_null() || out.is_null() {
            return einval("zcio_splice_channel_fd: channel or out is NULL");
        }
        // SAFETY: live and given up to us (contract); taken before the
        // descriptor is checked, so the handle is gone whatever the result.
        let s = unsafe { take_channel(src) };
        let r = endpoint(dst_fd, "sink").and_then(|d| Association::new(s, d).map_err(fail));
        match r {
            // SAFETY: non-NULL and writable (contract).
            Ok(a) => unsafe { hand_out(a, out) },
            Err(e) => e,
        }
    })
}

/// Associate the descriptor `src_fd` (data flows from it: a file, a pipe,
/// a socket; duplicated, the caller keeps its own) with the channel end
/// `dst` (into it: each block read is sent as one message, by reference
/// — the receiver maps the association's buffers, nothing is copied).
/// The channel's receiver sees the end of the stream as the channel
/// closing, when the association is closed. Takes `dst` over whatever
/// the result, unless `dst` or `out` is NULL (see
/// `zcio_splice_channel_fd`). Stores the association in `*out`. Returns
/// 0, `-EBADF`, `-EINVAL` or a negative errno.
///
/// # Safety
/// `dst` is NULL or a live channel that no other thread uses during the
/// call (nor afterwards); `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_splice_fd_channel(
    src_fd: c_int,
    dst: *mut zcio_channel,
    out: *mut *mut zcio_assoc,
) -> c_int {
    guard(|| {
        if dst.is_null() || out.is_null() {
            return einval("zcio_splice_fd_channel: channel or out is NULL");
        }
        // SAFETY: live and given up to us (contract); taken first, so the
        // handle is gone whatever the result.
        let d = unsafe { take_channel(dst) };
        let r = endpoint(src_fd, "source").and_then(|s| Association::new(s, d).map_err(fail));
        match r {
            // SAFETY: non-NULL and writable (contract).
            Ok(a) => unsafe { hand_out(a, out) },
            Err(e) => e,
        }
    })
}

/// Synchronous mode: move `bytes` (`ZCIO_INCREMENT_DEFAULT`,
/// `ZCIO_INCREMENT_INFINITE`: until the source ends, or a byte count),
/// blocking until they are moved, the source ends, an error occurs or
/// `zcio_assoc_stop` is called from another thread. Fills `*out` (may be
/// NULL) and returns 0 — also when an error ended an increment that had
/// moved data: then `out->error` is its code. Returns a negative code if
/// the increment failed before moving anything, `-EBUSY` if an increment
/// is already running.
///
/// # Safety
/// `a` is NULL or a live association; `out` is NULL or valid for writing
/// a `struct zcio_completion`.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_run(
    a: *mut zcio_assoc,
    bytes: u64,
    out: *mut zcio_completion,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_run") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let mut g = match take(h, "zcio_assoc_run") {
            Ok(g) => g,
            Err(e) => return e,
        };
        h.last.store(bytes, Ordering::Relaxed);
        match g.run(increment(bytes)) {
            Ok(c) => {
                let c = completion(&c);
                if !out.is_null() {
                    // SAFETY: non-NULL and writable (contract).
                    unsafe { out.write(c) };
                }
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Asynchronous mode: start moving `bytes` (as for `zcio_assoc_run`) on
/// the association's worker thread and return at once. The end is
/// reported to the callback (`zcio_assoc_on_complete`) and queued for
/// `zcio_assoc_wait`; `zcio_assoc_fd` becomes readable. Returns 0,
/// `-EBUSY` (an increment is running), or a negative errno.
///
/// # Safety
/// `a` is NULL or a live association.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_start(a: *mut zcio_assoc, bytes: u64) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_start") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let mut g = match take(h, "zcio_assoc_start") {
            Ok(g) => g,
            Err(e) => return e,
        };
        h.last.store(bytes, Ordering::Relaxed);
        match g.start(increment(bytes)) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Wait at most `timeout_ms` (< 0: up to the default bound, one hour; 0:
/// do not wait; `ZCIO_TIMEOUT_INFINITE`: until it comes) for the next
/// completion of an asynchronous increment and store it in
/// `*out` (may be NULL). Returns 0, `-EAGAIN` / `-ETIMEDOUT` (none yet),
/// or `-ECHILD` (nothing to wait for: no increment runs or is queued).
/// Thread-safe.
///
/// # Safety
/// `a` is NULL or a live association; `out` is NULL or valid for writing
/// a `struct zcio_completion`.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_wait(
    a: *mut zcio_assoc,
    timeout_ms: c_int,
    out: *mut zcio_completion,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_wait") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let t = Timeout::from_ms(timeout_ms);
        match h.r.wait(t.or(zcio::splice::Association::WAIT_BOUND)) {
            Some(c) => {
                let c = completion(&c);
                if !out.is_null() {
                    // SAFETY: non-NULL and writable (contract).
                    unsafe { out.write(c) };
                }
                0
            }
            None if !h.r.status().active => fail_msg(
                libc::ECHILD,
                "zcio_assoc_wait: no increment is running or waiting to be collected",
            ),
            None if t == Timeout::No => -libc::EAGAIN,
            None => -libc::ETIMEDOUT,
        }
    })
}

/// A descriptor that polls readable (POLLIN) while a completion waits for
/// `zcio_assoc_wait`. It belongs to the association: do not close it.
/// Returns it (≥ 0) or `-EINVAL`.
///
/// # Safety
/// `a` is NULL or a live association.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_fd(a: *const zcio_assoc) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { handle(a, "zcio_assoc_fd") } {
            Ok(h) => std::os::fd::AsFd::as_fd(&h.r).as_raw_fd(),
            Err(e) => e,
        }
    })
}

struct Ctx(*mut c_void);
// SAFETY: the documented contract of zcio_assoc_on_complete and
// zcio_assoc_on_quench: `ctx` may be used from the association's worker
// thread (the caller synchronises what it points to).
unsafe impl Send for Ctx {}

impl Ctx {
    /// The pointer (a method, so closures capture the whole `Ctx`).
    fn get(&self) -> *mut c_void {
        self.0
    }
}

/// Call `cb(ctx, completion, &next)` on the association's worker thread
/// when an asynchronous increment ends (before the completion is queued
/// for `zcio_assoc_wait`); its return value may start the next increment
/// (see `zcio_assoc_callback`). NULL `cb` removes the callback. The
/// callback must not call `zcio_assoc_close` on this association; other
/// calls on it fail with `-EBUSY` while it runs (`zcio_assoc_get_status` and
/// `zcio_last_error` work). Returns 0, `-EBUSY` (an increment is running)
/// or `-EINVAL`.
///
/// # Safety
/// `a` is NULL or a live association; `cb` is NULL or a function that may
/// be called from another thread with `ctx` until the callback is replaced
/// or the association closed.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_on_complete(
    a: *mut zcio_assoc,
    cb: zcio_assoc_callback,
    ctx: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_on_complete") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let mut g = match take(h, "zcio_assoc_on_complete") {
            Ok(g) => g,
            Err(e) => return e,
        };
        if g.status().active {
            return fail(SpliceError::Busy);
        }
        let ctx = Ctx(ctx);
        let last = Arc::clone(&h.last);
        g.on_complete(move |c| {
            let Some(f) = cb else {
                return Next::Stop;
            };
            let cc = completion(c);
            let mut next = last.load(Ordering::Relaxed);
            // SAFETY: the caller promised `f` may be called from this
            // thread with `ctx`; both pointers are to live locals.
            let go = unsafe { f(ctx.get(), &cc, &mut next) };
            if go == 0 {
                Next::Stop
            } else {
                last.store(next, Ordering::Relaxed);
                Next::Continue(increment(next))
            }
        });
        0
    })
}

/// Set the quench hook: `cb(ctx, 1)` when the sink stops taking data at
/// once (the source is held back, or, for an active source, its blocks are
/// dropped), `cb(ctx, 0)` when it takes data again; called on the thread
/// that moves the data. NULL `cb` removes it. Between increments only
/// (`-EBUSY`).
///
/// # Safety
/// As for `zcio_assoc_on_complete`.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_on_quench(
    a: *mut zcio_assoc,
    cb: zcio_assoc_quench_callback,
    ctx: *mut c_void,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_on_quench") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let mut g = match take(h, "zcio_assoc_on_quench") {
            Ok(g) => g,
            Err(e) => return e,
        };
        let ctx = Ctx(ctx);
        let r = g.on_quench(move |q| {
            if let Some(f) = cb {
                // SAFETY: the caller promised `f` may be called from the
                // moving thread with `ctx`.
                unsafe { f(ctx.get(), q.into()) }
            }
        });
        match r {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Flow control: whether blocks the sink cannot take at once are dropped
/// (and counted in `dropped`) instead of waited for. The default follows
/// the source: on for active sources (UDP sockets, rings), off for passive
/// ones, which the sink paces. Between increments only (`-EBUSY`).
///
/// # Safety
/// `a` is NULL or a live association.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_set_drop_when_behind(a: *mut zcio_assoc, on: c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_set_drop_when_behind") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let mut g = match take(h, "zcio_assoc_set_drop_when_behind") {
            Ok(g) => g,
            Err(e) => return e,
        };
        match g.set_drop_when_behind(on != 0) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Stop flow within one step (at most 1 MiB more): a `zcio_assoc_run` in
/// another thread returns with `stopped`, an asynchronous increment
/// completes with `stopped`. Harmless when nothing runs. Thread-safe.
/// Returns 0 or `-EINVAL`.
///
/// # Safety
/// `a` is NULL or a live association.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_stop(a: *mut zcio_assoc) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { handle(a, "zcio_assoc_stop") } {
            Ok(h) => {
                h.r.stop();
                0
            }
            Err(e) => e,
        }
    })
}

/// The size of the first version of `struct zcio_assoc_status`: what
/// `zcio_assoc_close` and `zcio_cp` write.
const V1_STATUS: usize = <zcio_assoc_status as Extensible>::V1;

/// Store the status bits and counters in `*out`. Thread-safe (readable
/// while data flows). Returns 0 or `-EINVAL`.
///
/// The header's `zcio_assoc_get_status(…, out)` passes `sizeof *(out)` as `size`;
/// at most `size` bytes are written (docs/c.md, "The ABI").
///
/// # Safety
/// `a` is NULL or a live association; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_get_status_sized(
    a: *const zcio_assoc,
    out: *mut zcio_assoc_status,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_get_status") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_assoc_get_status", &status(&h.r.status()), out, size) }
    })
}

/// An association's live counters (`zcio_assoc_get_stats`): what its
/// entry in the registry of live objects shows (`zcio ls`, `zcio stat`).
/// Fields may be appended; `zcio_assoc_get_stats` writes only as many
/// bytes as the caller's struct has.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_assoc_stats {
    /// Increments started.
    pub started: u64,
    /// Increments that ended without an error.
    pub completed: u64,
    /// Increments that ended in an error.
    pub failed: u64,
    /// Bytes moved since the association was made.
    pub moved_bytes: u64,
    /// 1 while an increment runs.
    pub running: u64,
}

/// Store the association's live counters in `*out`, writing at most
/// `size` bytes (pass `sizeof(struct zcio_assoc_stats)`). Thread-safe
/// (readable while data flows). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `a` is NULL or a live association; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_get_stats(
    a: *const zcio_assoc,
    out: *mut zcio_assoc_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_get_stats") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let st = h.r.status();
        let s = zcio_assoc_stats {
            started: st.started,
            completed: st.completed,
            failed: st.failed,
            moved_bytes: st.moved,
            running: u64::from(st.active),
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_assoc_get_stats", &s, out, size) }
    })
}

/// The name of mover `mover` (`ZCIO_MOVER_...`): `"copy_file_range"`,
/// `"sendfile"`, `"splice"`, `"buffer"`, or `"unknown"`. Static; never NULL.
#[no_mangle]
pub extern "C" fn zcio_mover_name(mover: c_int) -> *const c_char {
    guard(|| {
        match mover {
            ZCIO_MOVER_COPY_FILE_RANGE => c"copy_file_range",
            ZCIO_MOVER_SENDFILE => c"sendfile",
            ZCIO_MOVER_SPLICE => c"splice",
            ZCIO_MOVER_BUFFER => c"buffer",
            _ => c"unknown",
        }
        .as_ptr()
    })
}

/// Push the processing module `spec` (`"name"` or `"name:key=value,…"`:
/// `count`, `crc32c`, `inet`, `zstd:level=3`, `unzstd`, `seal:key=…`,
/// `open:key=…`, `ratelimit:rate=…`, `tap:ring=…`, or one loaded with
/// `zcio_module_load`) at the sink end of the association's stack. The
/// first module moves the association to the buffer path. Between
/// increments only. Returns 0, `-ENOENT` (no module of that name),
/// `-EINVAL` (bad arguments), `-EBUSY`, or a negative code.
///
/// # Safety
/// `a` is NULL or a live association; `spec` is NULL or a NUL-terminated
/// string.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_push(a: *mut zcio_assoc, spec: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_push") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        let spec = match unsafe { str_arg(spec, "zcio_assoc_push: module spec") } {
            Ok(s) => s,
            Err(e) => return e,
        };
        let mut g = match take(h, "zcio_assoc_push") {
            Ok(g) => g,
            Err(e) => return e,
        };
        let m = match registry()
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .open(spec)
        {
            Ok(m) => m,
            Err(e) => return fail(e),
        };
        match g.push(m) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Pop the module at the sink end of the stack (its buffered output, a
/// compressor's frame end say, is flushed to the sink first) and close
/// it. Popping the last module moves the association back to the fastest
/// mover for its pair. Between increments only. Returns 1 (popped), 0 (no
/// module was stacked), `-EBUSY`, or a negative code (the flush failed;
/// the module is gone all the same).
///
/// # Safety
/// `a` is NULL or a live association.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_pop(a: *mut zcio_assoc) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_pop") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let mut g = match take(h, "zcio_assoc_pop") {
            Ok(g) => g,
            Err(e) => return e,
        };
        match g.pop() {
            Ok(Some(_)) => 1,
            Ok(None) => 0,
            Err(e) => fail(e),
        }
    })
}

/// End the stream here, before the source's end (a copy limited to a byte
/// count): every stacked module flushes what it holds through the modules
/// after it to the sink, as at the end of the source (a zstd frame or a
/// sealed stream is complete); later increments report the end at once.
/// Between increments only. Returns 0, `-EBUSY`, or a negative code (the
/// flush failed).
///
/// # Safety
/// `a` is NULL or a live association.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_finish(a: *mut zcio_assoc) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_finish") } {
            Ok(h) => h,
            Err(e) => return e,
        };
        let mut g = match take(h, "zcio_assoc_finish") {
            Ok(g) => g,
            Err(e) => return e,
        };
        match g.finish() {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Control read (`value` NULL) or write of a stacked module: `which` is
/// its position from the source side (`"0"`, `"1"`, …) or its name (the
/// first with that name); `key` is the module's (every module answers
/// `"stats"`; `crc32c` answers `"value"`, …). The reply text is copied to
/// `reply` (`cap` bytes, NUL-terminated, truncated to fit; `reply` may be
/// NULL when `cap` is 0). Between increments only. Returns the reply's
/// full length (like `snprintf`), `-ENOENT`-style codes, `-ZCIO_EMODULE`
/// (see `zcio_last_error`), or `-EBUSY`.
///
/// # Safety
/// `a` is NULL or a live association; `which`, `key` and `value` are NULL
/// or NUL-terminated strings; `reply` is NULL or valid for writing `cap`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_control(
    a: *mut zcio_assoc,
    which: *const c_char,
    key: *const c_char,
    value: *const c_char,
    reply: *mut c_char,
    cap: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_control") } {
            Ok(h) => h,
            Err(e) => return e as ssize_t,
        };
        // SAFETY: the caller's contract (three strings, `value` may be NULL).
        let args = unsafe {
            (
                str_arg(which, "zcio_assoc_control: which"),
                str_arg(key, "zcio_assoc_control: key"),
                if value.is_null() {
                    Ok(None)
                } else {
                    str_arg(value, "zcio_assoc_control: value").map(Some)
                },
            )
        };
        let (which, key, value) = match args {
            (Ok(w), Ok(k), Ok(v)) => (w, k, v),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e as ssize_t,
        };
        let mut g = match take(h, "zcio_assoc_control") {
            Ok(g) => g,
            Err(e) => return e as ssize_t,
        };
        match g.control(which, key, value) {
            // SAFETY: the caller's contract for `reply`/`cap`.
            Ok(text) => unsafe { text_out(&text, reply, cap) }.unwrap_or_else(|e| e as ssize_t),
            Err(e) => fail(e) as ssize_t,
        }
    })
}

/// Every stacked module's counters as text, one line per module in data
/// order: `NAME key=value key=value…\n` (as of the last step: readable
/// while data flows). Copied like `zcio_assoc_control`'s reply. Returns
/// the full length or `-EINVAL`. Thread-safe.
///
/// # Safety
/// `a` is NULL or a live association; `buf` is NULL or valid for writing
/// `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_module_stats(
    a: *const zcio_assoc,
    buf: *mut c_char,
    cap: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_module_stats") } {
            Ok(h) => h,
            Err(e) => return e as ssize_t,
        };
        let text: String =
            h.r.module_stats()
                .iter()
                .map(|(name, stats)| {
                    // The module's `stats` reply: `name=value` pairs separated by spaces.
                    let kv: Vec<String> = stats.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    format!("{name} {}\n", kv.join(" "))
                })
                .collect();
        // SAFETY: the caller's contract for `buf`/`cap`.
        unsafe { text_out(&text, buf, cap) }.unwrap_or_else(|e| e as ssize_t)
    })
}

/// The label of the association's source (`which` =
/// `ZCIO_ASSOC_SOURCE`) or sink (`ZCIO_ASSOC_SINK`): the spec it was
/// opened from (`zcio_splice_specs`), `fd:N` (`zcio_splice_fds`, N the
/// caller's descriptor) or `channel`. Copied like
/// `zcio_assoc_control`'s reply (NUL-terminated, truncated to `cap`).
/// Returns the label's full length or `-EINVAL`. Thread-safe.
///
/// # Safety
/// `a` is NULL or a live association; `buf` is NULL or valid for writing
/// `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_label(
    a: *const zcio_assoc,
    which: c_int,
    buf: *mut c_char,
    cap: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let h = match unsafe { handle(a, "zcio_assoc_label") } {
            Ok(h) => h,
            Err(e) => return e as ssize_t,
        };
        let st = h.r.status();
        let label = match which {
            ZCIO_ASSOC_SOURCE => st.source,
            ZCIO_ASSOC_SINK => st.sink,
            _ => {
                return einval(format_args!(
                    "zcio_assoc_label: which is {which}, not ZCIO_ASSOC_SOURCE or ZCIO_ASSOC_SINK"
                )) as ssize_t
            }
        };
        // SAFETY: the caller's contract for `buf`/`cap`.
        unsafe { text_out(&label, buf, cap) }.unwrap_or_else(|e| e as ssize_t)
    })
}

/// Stop flow, wait for the worker, close both I/O objects and free the
/// association; its final status goes to `*final_status` (may be NULL).
/// Modules are flushed when the source ends; closed earlier, what they
/// buffered is discarded (pop them first to flush). NULL `a` is ignored.
/// Must not be called from the association's own callback, nor while
/// another thread uses the handle.
///
/// # Safety
/// `a` is NULL or a live association, not used again afterwards;
/// `final_status` is NULL or valid for writing the first version of
/// `struct zcio_assoc_status` (the fields of a later one stay untouched;
/// `zcio_assoc_get_status` gives them all).
#[no_mangle]
pub unsafe extern "C" fn zcio_assoc_close(
    a: *mut zcio_assoc,
    final_status: *mut zcio_assoc_status,
) {
    guard(|| {
        if a.is_null() {
            return;
        }
        // SAFETY: a live handle from zcio_splice_*, given up here.
        let h = unsafe { Box::from_raw(a) };
        h.r.stop();
        let a = h.a.into_inner().unwrap_or_else(|p| p.into_inner());
        let st = a.close();
        if !final_status.is_null() {
            // The first version of the struct only (no size travels with
            // this call; docs/c.md, "The ABI").
            // SAFETY: non-NULL and writable for that many bytes (contract).
            unsafe { put("zcio_assoc_close", &status(&st), final_status, V1_STATUS) };
        }
    })
}

/// Copy `src` to `dst` (specs as for `zcio_splice_specs`) through the
/// `n` modules `modules[0..n]` (specs as for `zcio_assoc_push`, in data
/// order; `modules` may be NULL when `n` is 0) until the source ends: the
/// C form of `zcio cp`. The final status goes to `*out` (may be NULL).
/// The modules are flushed at the end of the source (a zstd frame is
/// complete). Returns 0 or a negative code; a bad module spec fails before
/// any I/O object is opened.
///
/// # Safety
/// `src`, `dst` are NULL or NUL-terminated strings; `modules` is NULL or
/// points to `n` NULL-or-NUL-terminated strings; `out` is NULL or valid
/// for writing the first version of `struct zcio_assoc_status` (the fields
/// of a later one stay untouched).
#[no_mangle]
pub unsafe extern "C" fn zcio_cp(
    src: *const c_char,
    dst: *const c_char,
    modules: *const *const c_char,
    n: usize,
    out: *mut zcio_assoc_status,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let (src, dst) = match unsafe {
            (
                str_arg(src, "zcio_cp: source spec"),
                str_arg(dst, "zcio_cp: sink spec"),
            )
        } {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        if n > 0 && modules.is_null() {
            return einval("zcio_cp: modules is NULL but n is not 0");
        }
        let mut specs = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `modules` points to `n` pointers (contract), i < n.
            let p = unsafe { modules.add(i).read() };
            // SAFETY: each is NULL or NUL-terminated (contract).
            match unsafe { str_arg(p, "zcio_cp: a module spec") } {
                Ok(s) => specs.push(s),
                Err(e) => return e,
            }
        }
        // Modules are opened before any endpoint: a bad name fails before
        // a sink file is truncated or a listener waits.
        let reg = registry().read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut stack = Vec::with_capacity(n);
        for s in &specs {
            match reg.open(s) {
                Ok(m) => stack.push(m),
                Err(e) => return fail(e),
            }
        }
        let r = (|| {
            let (source, sink) = IoObject::open_pair(src, dst)?;
            let mut a = Association::new(source, sink)?;
            for m in stack {
                a.push(m)?;
            }
            let c = a.run(Increment::Infinite)?;
            if let Some(e) = c.error {
                return Err(e);
            }
            Ok(a.close())
        })();
        match r {
            Ok(st) => {
                if !out.is_null() {
                    // The first version of the struct only (no size
                    // travels with this call; docs/c.md, "The ABI").
                    // SAFETY: non-NULL and writable for that many bytes
                    // (contract).
                    unsafe { put("zcio_cp", &status(&st), out, V1_STATUS) };
                }
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Load the user module in the shared object `path` (the C ABI of
/// `zcio_module.h`; the example is `c/modules/rot13.c`) and register it
/// under the name it declares, for `zcio_assoc_push` and `zcio_cp` in
/// this process. The name is copied to `name` (`cap` bytes, like
/// `zcio_assoc_control`'s reply; may be NULL when `cap` is 0). Returns the
/// name's length, `-ZCIO_EMODULE` (not a loadable zcio module: missing file or
/// symbol, wrong ABI version; see `zcio_last_error`) or `-EINVAL`.
///
/// Trust: loading runs the object's initialisers, and its functions run
/// inside this process with its privileges. Load only modules you trust
/// as much as your own code.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string naming a zcio module you
/// trust (see above); `name` is NULL or valid for writing `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_module_load(
    path: *const c_char,
    name: *mut c_char,
    cap: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let path = match unsafe { str_arg(path, "zcio_module_load: path") } {
            Ok(p) => p,
            Err(e) => return e as ssize_t,
        };
        let mut reg = registry().write().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the caller vouches for the module (this function's contract).
        match unsafe { reg.load(path) } {
            // SAFETY: the caller's contract for `name`/`cap`.
            Ok(n) => unsafe { text_out(&n, name, cap) }.unwrap_or_else(|e| e as ssize_t),
            Err(e) => fail(e) as ssize_t,
        }
    })
}

/// The names of the modules `zcio_assoc_push` and `zcio_cp` can open —
/// the built-ins and those `zcio_module_load` added — sorted, one per
/// line (`NAME\n`). Copied like `zcio_assoc_control`'s reply. Returns the
/// full length or `-EINVAL`. Thread-safe.
///
/// # Safety
/// `buf` is NULL or valid for writing `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_module_names(buf: *mut c_char, cap: usize) -> ssize_t {
    guard(|| {
        let reg = registry().read().unwrap_or_else(|p| p.into_inner());
        let mut names = reg.names();
        names.sort_unstable();
        let text: String = names.iter().map(|n| format!("{n}\n")).collect();
        // SAFETY: the caller's contract for `buf`/`cap`.
        unsafe { text_out(&text, buf, cap) }.unwrap_or_else(|e| e as ssize_t)
    })
}
