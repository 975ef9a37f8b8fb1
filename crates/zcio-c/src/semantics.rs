//! Buffering semantics (`zcio::semantics`): an endpoint over a connected
//! channel that outputs and inputs under copy, emulated copy, share,
//! emulated share (application-allocated buffers, `zcio_semantic_endpoint_output`
//! / `zcio_semantic_endpoint_input`) and move, emulated move, weak move, emulated
//! weak move (system-allocated buffers, `zcio_semantic_endpoint_alloc` /
//! `zcio_semantic_endpoint_output_owned` / `zcio_semantic_endpoint_input_owned` /
//! `zcio_semantic_endpoint_free`); arena buffers (`zcio_arena_alloc`) for the
//! zero-copy paths.

use std::ffi::{c_char, c_int, c_void};
use std::time::{Duration, Instant};

use std::os::unix::ffi::OsStrExt;

use zcio::semantics::calibrate::CalibrateError;
use zcio::semantics::cost::{CostModel, LoadError, Op};
use zcio::semantics::{
    ArenaBuf, Delivery, InputError, OwnedBuf, Received, SemanticConfig, SemanticEndpoint, Semantics,
};

use crate::abi::{put, put_config, take_config};
use crate::chan::zcio_channel;
use crate::error::{einval, fail, fail_msg, guard};
use crate::ring_info::put_str;
use crate::{ssize_t, str_arg};

/// The eight buffering semantics (`zcio_semantics_name` gives the names
/// `"copy"`, `"emulated-copy"`, ...). Calls take them as `int`; `-1`
/// where a call allows it means "the endpoint's default". Who owns the
/// buffer after a call, and what a later write can affect:
///
/// * `ZCIO_SEM_COPY`: output copies, input copies. You keep your buffer;
///   later writes by either side change nothing the other sees.
/// * `ZCIO_SEM_EMULATED_COPY`: the guarantees of copy. Output of an arena
///   buffer write-protects its pages and lends them (your write to a page
///   still in flight gets a private copy of that page, transparently:
///   TCOW); input into an arena buffer at the sender's page offset swaps
///   whole pages in when that keeps the guarantee. Short data, and memory
///   not from `zcio_arena_alloc` (malloc, the stack), is copied.
/// * `ZCIO_SEM_SHARE`: output lends an arena buffer in place (wired while
///   in flight); your later write may change what the peer reads (weak).
/// * `ZCIO_SEM_EMULATED_SHARE`: as share without wiring (weak).
/// * `ZCIO_SEM_MOVE`: `zcio_semantic_endpoint_output_owned` hands a
///   `zcio_semantic_endpoint_alloc` buffer over sealed: you no longer own it and
///   nobody can change it; the receiver maps it privately.
/// * `ZCIO_SEM_EMULATED_MOVE`: as move, but the pages are only hidden
///   (touching them faults) and reused once the peer is done (strong).
/// * `ZCIO_SEM_WEAK_MOVE`: the buffer stays mapped (wired while in
///   flight) and is cached for reuse; do not touch it after output: a
///   write would change what the peer reads (weak).
/// * `ZCIO_SEM_EMULATED_WEAK_MOVE`: as weak move without wiring (weak).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum zcio_semantics {
    ZCIO_SEM_COPY = 0,
    ZCIO_SEM_EMULATED_COPY = 1,
    ZCIO_SEM_SHARE = 2,
    ZCIO_SEM_EMULATED_SHARE = 3,
    ZCIO_SEM_MOVE = 4,
    ZCIO_SEM_EMULATED_MOVE = 5,
    ZCIO_SEM_WEAK_MOVE = 6,
    ZCIO_SEM_EMULATED_WEAK_MOVE = 7,
}

/// How an output travelled (the return value of the output calls).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum zcio_delivery {
    /// Copied into a system buffer.
    ZCIO_DELIVERY_COPIED = 0,
    /// Lent in place, write-protected until the peer returned it (TCOW).
    ZCIO_DELIVERY_PROTECTED = 1,
    /// Lent in place, hidden (no access) until returned (emulated move).
    ZCIO_DELIVERY_HIDDEN = 2,
    /// Lent in place without protection (share, weak moves).
    ZCIO_DELIVERY_LENT = 3,
    /// A sealed single-use region (move).
    ZCIO_DELIVERY_SEALED = 4,
}

/// How an endpoint is set up (`zcio_semantic_config_init` fills the
/// defaults; a NULL config means the defaults).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_semantic_config {
    /// `sizeof` the caller's struct, set by `zcio_semantic_config_init`; leave it as
    /// it set it (docs/c.md, "The ABI").
    pub size: usize,
    /// Semantics of the output calls (an `enum zcio_semantics` value;
    /// default `ZCIO_SEM_EMULATED_COPY`).
    pub output: c_int,
    /// Semantics of the input calls (default `ZCIO_SEM_EMULATED_COPY`).
    pub input: c_int,
    /// Bytes of registered memory for `zcio_arena_alloc` buffers
    /// (0: 64 MiB). Only pages you touch use memory; the arena reserves
    /// three times this much address space.
    pub arena_capacity: usize,
    /// How long `zcio_semantic_endpoint_new` waits for the peer's hello, in
    /// milliseconds (<= 0: 10 s).
    pub hello_timeout_ms: c_int,
    /// Non-zero: call `zcio_semantic_endpoint_trust_peer` before the hello (so the
    /// peer learns it). Read the warning there first. Default 0.
    pub trust_peer: c_int,
    /// Non-zero: use the zero-copy mechanisms at every size — no
    /// conversion of short data to copy, pages swapped in whenever the
    /// buffers are aligned — whatever the cost model says is cheaper on
    /// this machine (tests, measurements of the mechanisms). Default 0:
    /// the thresholds of the calibrated cost model (`zcio calibrate`).
    pub ignore_cost_model: c_int,
    /// Emulated copy and buffers you rewrite while their previous output
    /// is still in flight (each rewritten page costs a fault and a page
    /// copy): the fraction of a buffer's pages that may have been
    /// rewritten for the next output to lend it again rather than copy
    /// it. 0.0 – 1.0; negative (the default, -1): what the cost model
    /// says per size (1.0 with `ignore_cost_model`). See
    /// `zcio_semantic_endpoint_rewrite_tolerance`.
    pub rewrite_tolerance: f64,
}

/// How one input arrived (`zcio_semantic_endpoint_input`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_received {
    /// Bytes delivered; after `-EMSGSIZE`, the length the buffer needs.
    pub len: usize,
    /// Whole pages swapped into your buffer (no byte copied).
    pub swapped_pages: usize,
    /// Bytes copied (partial pages, unaligned or untrusted data).
    pub copied: usize,
    /// The sender's semantics (`enum zcio_semantics`), or -1.
    pub sender: c_int,
}

/// Counters of an endpoint and its arena (`zcio_semantic_endpoint_get_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_semantic_stats {
    /// Outputs copied.
    pub out_copied: u64,
    /// Outputs lent write-protected (TCOW).
    pub out_protected: u64,
    /// Outputs lent hidden (emulated move).
    pub out_hidden: u64,
    /// Outputs lent unprotected (share, weak moves).
    pub out_lent: u64,
    /// Outputs as sealed regions (move).
    pub out_sealed: u64,
    /// Outputs that wanted to lend but copied (memory not from the arena,
    /// no spare page, ...).
    pub out_fallbacks: u64,
    /// Emulated-copy outputs copied because you rewrote the buffer while
    /// its previous output was in flight, more than the cost model
    /// tolerates (probed again after 2, 4, … up to 1024 copies); also
    /// counted in `out_copied`.
    pub out_rewrite_copies: u64,
    /// Pages swapped in by input.
    pub in_swapped_pages: u64,
    /// Bytes copied by input.
    pub in_copied_bytes: u64,
    /// Arena: your writes to in-flight pages that got a private copy.
    pub tcow_copies: u64,
    /// Arena: write-protect operations at output.
    pub protects: u64,
    /// Arena: unprotect operations when pages came back.
    pub unprotects: u64,
    /// Arena: pages lent and not yet returned by the peer.
    pub pages_in_flight: u64,
}

/// One end of a channel with buffering semantics (opaque). Thread-safe:
/// output and input may run on different threads at once.
pub struct zcio_semantic_endpoint {
    ep: SemanticEndpoint,
    /// The configured semantics (what `-1` stands for).
    output: Semantics,
    input: Semantics,
}

/// A buffer in an endpoint's arena (opaque): memory zcio can lend and
/// swap pages into. Used by one thread at a time. Stays valid after its
/// endpoint is freed.
pub struct zcio_arena_buf {
    b: ArenaBuf,
}

/// A system-allocated buffer (opaque), from `zcio_semantic_endpoint_alloc` or
/// `zcio_semantic_endpoint_input_owned`. Yours until `zcio_semantic_endpoint_output_owned`
/// consumes it or `zcio_semantic_endpoint_free` frees it. One thread at a time.
pub struct zcio_owned {
    b: Option<OwnedBuf>,
}

// ------------------------------------------------------------- semantics

const SEMS: [zcio_semantics; 8] = [
    zcio_semantics::ZCIO_SEM_COPY,
    zcio_semantics::ZCIO_SEM_EMULATED_COPY,
    zcio_semantics::ZCIO_SEM_SHARE,
    zcio_semantics::ZCIO_SEM_EMULATED_SHARE,
    zcio_semantics::ZCIO_SEM_MOVE,
    zcio_semantics::ZCIO_SEM_EMULATED_MOVE,
    zcio_semantics::ZCIO_SEM_WEAK_MOVE,
    zcio_semantics::ZCIO_SEM_EMULATED_WEAK_MOVE,
];

// The C constants are the positions in `Semantics::ALL` (checked here
// once, so the conversions below are plain indexing).
const _: () = {
    let mut i = 0;
    while i < 8 {
        assert!(SEMS[i] as usize == i);
        i += 1;
    }
};

fn sem_of(v: c_int) -> Option<Semantics> {
    usize::try_from(v)
        .ok()
        .and_then(|i| Semantics::ALL.get(i).copied())
}

fn sem_code(s: Semantics) -> c_int {
    Semantics::ALL.iter().position(|&x| x == s).unwrap_or(0) as c_int
}

/// The semantics argument of a call: -1 is `default`.
fn sem_arg(v: c_int, default: Semantics, call: &str) -> Result<Semantics, c_int> {
    if v == -1 {
        return Ok(default);
    }
    sem_of(v).ok_or_else(|| {
        einval(format_args!(
            "{call}: semantics {v} is not an enum zcio_semantics value (0..=7) or -1"
        ))
    })
}

/// Names as C strings, in `Semantics::ALL` order.
const NAMES: [&std::ffi::CStr; 8] = [
    c"copy",
    c"emulated-copy",
    c"share",
    c"emulated-share",
    c"move",
    c"emulated-move",
    c"weak-move",
    c"emulated-weak-move",
];

/// The semantics named `name` (`"emulated-copy"`, ...; case and `_` for
/// `-` do not matter) as an `enum zcio_semantics` value, or `-EINVAL` for
/// an unknown name or NULL (`zcio_last_error` lists the names).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantics_parse(name: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let s = match unsafe { str_arg(name, "zcio_semantics_parse: name") } {
            Ok(s) => s,
            Err(e) => return e,
        };
        match s.parse::<Semantics>() {
            Ok(m) => sem_code(m),
            Err(text) => einval(text),
        }
    })
}

/// The name of an `enum zcio_semantics` value (`"emulated-copy"`, ...):
/// a static string, or NULL for a value out of range.
#[no_mangle]
pub extern "C" fn zcio_semantics_name(sem: c_int) -> *const c_char {
    guard(|| {
        usize::try_from(sem)
            .ok()
            .and_then(|i| NAMES.get(i))
            .map_or(std::ptr::null(), |n| n.as_ptr())
    })
}

// -------------------------------------------------------------- endpoint

/// The defaults of a config.
fn semantic_config_defaults() -> zcio_semantic_config {
    let d = SemanticConfig::default();
    zcio_semantic_config {
        size: std::mem::size_of::<zcio_semantic_config>(),
        output: sem_code(d.output),
        input: sem_code(d.input),
        arena_capacity: d.arena_capacity,
        hello_timeout_ms: d.hello_timeout.as_millis().min(c_int::MAX as u128) as c_int,
        trust_peer: 0,
        ignore_cost_model: 0,
        rewrite_tolerance: -1.0,
    }
}

/// Fill `*cfg` with the defaults: emulated copy both ways, a 64 MiB
/// arena, a 10 s hello timeout, the peer not trusted.
///
/// Records `size` in `cfg->size` and writes at most `size` bytes (the
/// header's `zcio_semantic_config_init(cfg)` passes `sizeof *(cfg)`). Returns 0 or
/// `-EINVAL` (NULL, a size out of range).
///
/// # Safety
/// `cfg` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_config_init_sized(
    cfg: *mut zcio_semantic_config,
    size: usize,
) -> c_int {
    guard(|| {
        let c = semantic_config_defaults();
        // SAFETY: the caller's contract.
        unsafe { put_config("zcio_semantic_config_init", &c, cfg, size) }
    })
}

/// Make an endpoint of the connected channel `ch`. Both ends must do so:
/// each sends a hello (its input semantics, whether it trusts the peer)
/// and waits for the other's, at most `cfg->hello_timeout_ms`. `cfg` may
/// be NULL (the defaults). Stores the endpoint in `*out` (free it with
/// `zcio_semantic_endpoint_close`).
///
/// Ownership of `ch`: when this returns `-EINVAL` for a bad argument the
/// channel is still yours; otherwise — success or any other failure — the
/// endpoint took it (the handle is freed; on failure the channel is
/// closed). Errors: `-EINVAL`, `-ETIMEDOUT` (no hello), `-EPIPE` (the peer
/// left), `-EPROTO` (the peer is not an endpoint), `-EAGAIN`/`-ENOMEM`,
/// or a negative errno.
///
/// # Safety
/// `ch` is NULL or a live channel handle, not used again unless this
/// returned `-EINVAL`; `cfg` is NULL or readable for `cfg->size` bytes
/// (`zcio_semantic_config_init` set it); `out` is NULL
/// or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_new(
    ch: *mut zcio_channel,
    cfg: *const zcio_semantic_config,
    out: *mut *mut zcio_semantic_endpoint,
) -> c_int {
    guard(|| {
        if ch.is_null() || out.is_null() {
            return einval("zcio_semantic_endpoint_new: ch or out is NULL");
        }
        let mut c = SemanticConfig::default();
        let mut trust = false;
        if !cfg.is_null() {
            // SAFETY: readable for `cfg->size` bytes (contract).
            let cfg = match unsafe {
                take_config(
                    "zcio_semantic_endpoint_new",
                    cfg,
                    semantic_config_defaults(),
                )
            } {
                Ok(c) => c,
                Err(e) => return e,
            };
            let (Some(o), Some(i)) = (sem_of(cfg.output), sem_of(cfg.input)) else {
                return einval(format_args!(
                    "zcio_semantic_endpoint_new: output {} / input {} is not an enum zcio_semantics value",
                    cfg.output, cfg.input
                ));
            };
            c.output = o;
            c.input = i;
            if cfg.arena_capacity != 0 {
                c.arena_capacity = cfg.arena_capacity;
            }
            if cfg.hello_timeout_ms > 0 {
                c.hello_timeout = Duration::from_millis(cfg.hello_timeout_ms as u64);
            }
            trust = cfg.trust_peer != 0;
            if cfg.ignore_cost_model != 0 {
                c.policy = Some(zcio::semantics::Policy::always_zero_copy());
            }
            if cfg.rewrite_tolerance.is_nan() || cfg.rewrite_tolerance > 1.0 {
                return einval(format_args!(
                    "zcio_semantic_endpoint_new: rewrite_tolerance {} is not a fraction (0.0 - 1.0, or \
                     negative for the cost model's)",
                    cfg.rewrite_tolerance
                ));
            }
            if cfg.rewrite_tolerance >= 0.0 {
                // Without `ignore_cost_model`: this machine's calibrated
                // policy, as `SemanticEndpoint::new` would take (not the built-in
                // model's `Policy::default()`).
                let p = c
                    .policy
                    .take()
                    .unwrap_or_else(zcio::semantics::Policy::calibrated);
                c.policy = Some(p.with_rewrite_tolerance(cfg.rewrite_tolerance));
            }
        }
        // SAFETY: a live channel handle (contract), given up here.
        let chan = unsafe { Box::from_raw(ch) }.ch;
        if trust {
            // The caller opted in through the config (documented there
            // and at `zcio_semantic_endpoint_trust_peer`).
            // SAFETY: as argued just above.
            unsafe { chan.trust_peer() };
        }
        let (output, input) = (c.output, c.input);
        match SemanticEndpoint::new(chan, c) {
            Ok(ep) => {
                let h = zcio_semantic_endpoint { ep, output, input };
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(h))) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Declare that the peer runs zcio's TCOW and never writes pages it lent
/// (unsafe opt-in, as `Channel::trust_peer` in Rust): emulated-copy and
/// emulated-move input then swap the peer's write-protected pages into
/// your arena buffers instead of copying them. Without it, strong-integrity
/// input copies (or maps sealed regions). Returns 0 or `-EINVAL`.
///
/// Warning: a peer that does write its lent pages (a bug, or a hostile
/// process) can then change bytes you already received, under your feet.
/// Only for peers of one application that you trust as much as your own
/// code. Better set `trust_peer` in the config (the peer then learns it in
/// the hello); this call affects inputs from now on.
///
/// # Safety
/// `ep` is NULL or a live endpoint; see the warning.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_trust_peer(
    ep: *mut zcio_semantic_endpoint,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { endpoint(ep) } {
            Ok(e) => {
                // The caller's opt-in (see the warning above).
                // SAFETY: as argued just above.
                unsafe { e.ep.channel().trust_peer() };
                0
            }
            Err(c) => c,
        }
    })
}

/// The endpoint behind `ep`.
///
/// # Safety
/// `ep` is NULL or a live endpoint.
unsafe fn endpoint<'a>(
    ep: *const zcio_semantic_endpoint,
) -> Result<&'a zcio_semantic_endpoint, c_int> {
    // SAFETY: the caller's contract.
    unsafe { ep.as_ref() }.ok_or_else(|| einval("endpoint handle is NULL"))
}

fn delivery(d: Delivery) -> c_int {
    (match d {
        Delivery::Copied => zcio_delivery::ZCIO_DELIVERY_COPIED,
        Delivery::Protected => zcio_delivery::ZCIO_DELIVERY_PROTECTED,
        Delivery::Hidden => zcio_delivery::ZCIO_DELIVERY_HIDDEN,
        Delivery::Lent => zcio_delivery::ZCIO_DELIVERY_LENT,
        Delivery::Sealed => zcio_delivery::ZCIO_DELIVERY_SEALED,
    }) as c_int
}

/// Output `len` bytes at `data` under `sem` (-1: the endpoint's output
/// semantics), shaped like `write`: when it returns, `data` is yours again
/// (write it at once if you like; what the peer receives is what `data`
/// held at the call — except under the weak semantics, see `enum
/// zcio_semantics`). Returns the delivery (`enum zcio_delivery`) or a
/// negative code: `-EINVAL` (NULL, `len` 0, bad `sem`), `-EPIPE` (the peer
/// is gone), `-EAGAIN` (no room now), `-ETIMEDOUT`, ...
///
/// Only memory from `zcio_arena_alloc` of this endpoint can go without a
/// copy; any other memory (malloc, the stack) is copied, whatever `sem`
/// says (`out_fallbacks` in the stats counts these), and short data is
/// copied where copying is cheaper.
///
/// `data` may be any readable memory, including bytes another process
/// can write (a received message read in place): they are read with
/// volatile loads, never trusted to stay still; what the peer gets is
/// what was read during the call.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `data` is readable for `len` bytes
/// during the call.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_output(
    ep: *mut zcio_semantic_endpoint,
    data: *const c_void,
    len: usize,
    sem: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if data.is_null() || len == 0 || len > isize::MAX as usize {
            return einval("zcio_semantic_endpoint_output: data is NULL or len is 0");
        }
        let s = match sem_arg(sem, e.output, "zcio_semantic_endpoint_output") {
            Ok(s) => s,
            Err(c) => return c,
        };
        // Readable for `len` bytes during the call (contract); it may be
        // memory another process writes, so it is read as a volatile view,
        // never borrowed as a slice.
        // SAFETY: as argued just above.
        let view = unsafe { zcio::View::from_raw(data.cast::<u8>(), len) };
        match e.ep.output_view(view, s) {
            Ok(d) => delivery(d),
            Err(err) => fail(err),
        }
    })
}

fn received(r: &Received) -> zcio_received {
    zcio_received {
        len: r.len,
        swapped_pages: r.swapped_pages,
        copied: r.copied,
        sender: r.sender.map_or(-1, sem_code),
    }
}

/// Input the next message into `buf` (`cap` bytes) under `sem` (-1: the
/// endpoint's input semantics), shaped like `read` but message-oriented:
/// the whole message or nothing. Waits for it as long as the channel's
/// bound allows (a peer that goes away ends the wait with `-EPIPE`).
/// Returns the message length; `*info` (may be NULL) says how it arrived.
/// `-EMSGSIZE`: `buf` is too short — `info->len` is the length needed and
/// the message is kept for the next call. Other errors: `-EINVAL`,
/// `-EPIPE`, `-EBADMSG` (malformed; dropped), `-ETIMEDOUT`.
///
/// Whole pages are swapped in (no copy) only into a `zcio_arena_alloc`
/// buffer of this endpoint at the sender's page offset (see
/// `zcio_semantic_endpoint_next`); everything else is copied.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `buf` is writable for `cap` bytes and
/// nothing else reads or writes it during the call; `info` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_input(
    ep: *mut zcio_semantic_endpoint,
    buf: *mut c_void,
    cap: usize,
    sem: c_int,
    info: *mut zcio_received,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c as ssize_t,
        };
        if buf.is_null() || cap == 0 || cap > isize::MAX as usize {
            return einval("zcio_semantic_endpoint_input: buf is NULL or cap is 0") as ssize_t;
        }
        let s = match sem_arg(sem, e.input, "zcio_semantic_endpoint_input") {
            Ok(s) => s,
            Err(c) => return c as ssize_t,
        };
        // Writable for `cap` bytes and not accessed by anyone else during
        // the call (contract).
        // SAFETY: as argued just above.
        let dst = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) };
        let r = e.ep.input_with(dst, s);
        let (code, rec) = match r {
            Ok(r) => (r.len as ssize_t, received(&r)),
            Err(InputError::TooShort { needed }) => {
                let rec = zcio_received {
                    len: needed,
                    sender: -1,
                    ..zcio_received::default()
                };
                (fail(InputError::TooShort { needed }) as ssize_t, rec)
            }
            Err(err) => (fail(err) as ssize_t, zcio_received::default()),
        };
        if !info.is_null() && (code >= 0 || code == -(libc::EMSGSIZE as ssize_t)) {
            // SAFETY: non-NULL and writable (contract).
            unsafe { info.write(rec) };
        }
        code
    })
}

/// Wait at most `timeout_ms` (0: do not wait; < 0: up to the channel's
/// receive bound, `recv_timeout_ms`, one hour unless set;
/// `ZCIO_TIMEOUT_INFINITE`: as long as it takes) for the next message
/// without taking it, and report its layout: its length in
/// `*len` and the page offset the sender's data starts at in
/// `*page_offset` (either may be NULL). Allocate `zcio_arena_alloc(ep,
/// len, page_offset)` and input into it to have whole pages swapped in.
/// Returns 0, `-EAGAIN` (nothing yet, `timeout_ms` 0), `-ETIMEDOUT`,
/// `-EPIPE` (the peer died), `-EBADMSG`. The wait polls with short
/// sleeps; it sees a peer that died but not one that closed its end
/// while alive (`zcio_semantic_endpoint_input` sees that: `-EPIPE`).
///
/// # Safety
/// `ep` is NULL or a live endpoint; `len`, `page_offset` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_next(
    ep: *mut zcio_semantic_endpoint,
    timeout_ms: c_int,
    len: *mut usize,
    page_offset: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        // `None`: no deadline (a wait too long to represent).
        let bound = e.ep.channel().config().recv_timeout;
        let end = Instant::now().checked_add(crate::Timeout::from_ms(timeout_ms).or(bound));
        let mut nap = Duration::from_micros(20);
        loop {
            // Disconnection is checked first and the queue after it: what
            // the peer sent before leaving is still reported.
            let gone = !e.ep.channel().check_peer();
            match e.ep.next_layout() {
                Ok(Some((off, n))) => {
                    // SAFETY: NULL or writable (contract).
                    unsafe {
                        if let Some(l) = len.as_mut() {
                            *l = n;
                        }
                        if let Some(p) = page_offset.as_mut() {
                            *p = off;
                        }
                    }
                    return 0;
                }
                Ok(None) if gone => {
                    return fail(InputError::Recv(zcio::RecvError::Disconnected));
                }
                Ok(None) => {}
                Err(err) => return fail(err),
            }
            if timeout_ms == 0 {
                return -libc::EAGAIN;
            }
            let now = Instant::now();
            let left = match end {
                Some(end) if now >= end => return -libc::ETIMEDOUT,
                Some(end) => end - now,
                None => Duration::MAX,
            };
            std::thread::sleep(nap.min(left));
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    })
}

/// Store in `*out` the fraction of a `bytes`-long buffer's pages that may
/// have been rewritten during its previous emulated-copy output for the
/// next output to lend it again (else it is copied, counted in
/// `out_rewrite_copies`): the cost model's figure for that size, or the
/// config's `rewrite_tolerance`. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_rewrite_tolerance(
    ep: *mut zcio_semantic_endpoint,
    bytes: usize,
    out: *mut f64,
) -> c_int {
    // SAFETY: the caller's contract, as `query` needs it.
    unsafe {
        query(ep, out, "zcio_semantic_endpoint_rewrite_tolerance", |e| {
            e.ep.policy().rewrite_tolerance(bytes)
        })
    }
}

/// Write `what(endpoint)` to `*out`: 0, or `-EINVAL` for a NULL handle or
/// `out` (named by `call` in the error).
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or writable.
unsafe fn query<T>(
    ep: *mut zcio_semantic_endpoint,
    out: *mut T,
    call: &str,
    what: impl FnOnce(&zcio_semantic_endpoint) -> T,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out.is_null() {
            return einval(format_args!("{call}: out is NULL"));
        }
        let v = what(e);
        // SAFETY: non-NULL and writable (the caller's contract).
        unsafe { out.write(v) };
        0
    })
}

/// Fill `*out` with the endpoint's and its arena's counters, writing at
/// most `size` bytes (the header's `zcio_semantic_endpoint_get_stats(ep,
/// out)` passes `sizeof *(out)`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_get_stats_sized(
    ep: *mut zcio_semantic_endpoint,
    out: *mut zcio_semantic_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        let v = {
            let s = e.ep.stats();
            let a = e.ep.arena().stats();
            zcio_semantic_stats {
                out_copied: s.out_copied,
                out_protected: s.out_protected,
                out_hidden: s.out_hidden,
                out_lent: s.out_lent,
                out_sealed: s.out_sealed,
                out_fallbacks: s.out_fallbacks,
                out_rewrite_copies: s.out_rewrite_copies,
                in_swapped_pages: s.in_swapped_pages,
                in_copied_bytes: s.in_copied_bytes,
                tcow_copies: a.tcow_copies,
                protects: a.protects,
                unprotects: a.unprotects,
                pages_in_flight: a.pages_in_flight,
            }
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_semantic_endpoint_get_stats", &v, out, size) }
    })
}

/// Close the endpoint and its channel and free the handle (NULL is
/// ignored): the peer sees `-EPIPE` once it received what was sent.
/// Arena and owned buffers you still hold stay valid until you free them.
///
/// # Safety
/// `ep` is NULL or a live endpoint, not used again (by any thread).
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_close(ep: *mut zcio_semantic_endpoint) {
    guard(|| {
        if !ep.is_null() {
            // SAFETY: a live handle from `zcio_semantic_endpoint_new`, given up here.
            drop(unsafe { Box::from_raw(ep) });
        }
    })
}

// ----------------------------------------------------------------- arena

/// A buffer of `len` bytes in the endpoint's arena, starting
/// `page_offset` bytes into its first page (0: page-aligned; take the
/// page offset `zcio_semantic_endpoint_next` reports to receive with page swaps).
/// Only memory from here is zero-copy: output lends (and write-protects)
/// its pages, input swaps pages into it; malloc memory is always copied.
/// Stores the handle in `*out` (free it with `zcio_arena_buf_free`).
/// Returns 0, `-EINVAL`, or `-EAGAIN` (the arena is full now).
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_arena_alloc(
    ep: *mut zcio_semantic_endpoint,
    len: usize,
    page_offset: usize,
    out: *mut *mut zcio_arena_buf,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out.is_null() || len == 0 {
            return einval("zcio_arena_alloc: out is NULL or len is 0");
        }
        match e.ep.arena().alloc_at(len, page_offset) {
            Ok(b) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(zcio_arena_buf { b }))) };
                0
            }
            Err(err) => fail(err),
        }
    })
}

/// The buffer's bytes (`zcio_arena_buf_len` of them), readable and
/// writable by you at any time, also while output of them is in flight
/// (a write then gets a private copy of the page: TCOW). NULL for NULL.
///
/// # Safety
/// `b` is NULL or a live arena buffer.
#[no_mangle]
pub unsafe extern "C" fn zcio_arena_buf_data(b: *mut zcio_arena_buf) -> *mut c_void {
    // SAFETY: the caller's contract.
    guard(|| unsafe { b.as_ref() }.map_or(std::ptr::null_mut(), |b| b.b.as_ptr().cast()))
}

/// The buffer's length in bytes (0 for NULL).
///
/// # Safety
/// `b` is NULL or a live arena buffer.
#[no_mangle]
pub unsafe extern "C" fn zcio_arena_buf_len(b: *const zcio_arena_buf) -> usize {
    // SAFETY: the caller's contract.
    guard(|| unsafe { b.as_ref() }.map_or(0, |b| b.b.len()))
}

/// Free an arena buffer (NULL is ignored). Pages the peer still reads stay
/// with it until it returns them.
///
/// # Safety
/// `b` is NULL or a live arena buffer, not used again.
#[no_mangle]
pub unsafe extern "C" fn zcio_arena_buf_free(b: *mut zcio_arena_buf) {
    guard(|| {
        if !b.is_null() {
            // SAFETY: a live handle from `zcio_arena_alloc`, given up here.
            drop(unsafe { Box::from_raw(b) });
        }
    })
}

// ---------------------------------------------------- system-allocated

fn owned_handle(b: OwnedBuf) -> *mut zcio_owned {
    Box::into_raw(Box::new(zcio_owned { b: Some(b) }))
}

/// A system-allocated buffer of `len` bytes for the endpoint's output
/// semantics (a fresh region under move, arena pages otherwise). Fill it
/// through `zcio_owned_data` and hand it over with
/// `zcio_semantic_endpoint_output_owned`. Returns 0, `-EINVAL`, `-EAGAIN`.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_alloc(
    ep: *mut zcio_semantic_endpoint,
    len: usize,
    out: *mut *mut zcio_owned,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out.is_null() || len == 0 {
            return einval("zcio_semantic_endpoint_alloc: out is NULL or len is 0");
        }
        match e.ep.alloc(len) {
            Ok(b) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(owned_handle(b)) };
                0
            }
            Err(err) => fail(err),
        }
    })
}

/// The bytes of a system-allocated buffer, writable while it is yours
/// (your writes to a received buffer stay private). NULL for NULL.
///
/// # Safety
/// `b` is NULL or a live owned buffer used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_owned_data(b: *mut zcio_owned) -> *mut c_void {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { b.as_mut() }.and_then(|b| b.b.as_mut()) {
            Some(o) => o.as_mut_slice().as_mut_ptr().cast(),
            None => std::ptr::null_mut(),
        }
    })
}

/// The length of a system-allocated buffer (0 for NULL).
///
/// # Safety
/// `b` is NULL or a live owned buffer.
#[no_mangle]
pub unsafe extern "C" fn zcio_owned_len(b: *const zcio_owned) -> usize {
    guard(|| {
        // SAFETY: the caller's contract.
        unsafe { b.as_ref() }
            .and_then(|b| b.b.as_ref())
            .map_or(0, OwnedBuf::len)
    })
}

/// Hand `*buf` to the peer under `sem` (-1: the endpoint's output
/// semantics). It is consumed: on success `*buf` becomes NULL and you no
/// longer own the bytes (do not keep pointers into them). On failure
/// `*buf` is still yours when the buffer could be given back, and NULL
/// when it could not (a move buffer is sealed before sending: it is gone).
/// Returns the delivery (`enum zcio_delivery`) or a negative code.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `buf` is NULL or points to NULL or a
/// live owned buffer handle.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_output_owned(
    ep: *mut zcio_semantic_endpoint,
    buf: *mut *mut zcio_owned,
    sem: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        // SAFETY: the caller's contract.
        let Some(slot) = (unsafe { buf.as_mut() }) else {
            return einval("zcio_semantic_endpoint_output_owned: buf is NULL");
        };
        // SAFETY: NULL or a live handle (contract).
        let Some(h) = (unsafe { slot.as_mut() }) else {
            return einval("zcio_semantic_endpoint_output_owned: *buf is NULL");
        };
        let s = match sem_arg(sem, e.output, "zcio_semantic_endpoint_output_owned") {
            Ok(s) => s,
            Err(c) => return c,
        };
        let Some(b) = h.b.take() else {
            return einval(
                "zcio_semantic_endpoint_output_owned: the buffer was already handed over",
            );
        };
        let (code, back) = match e.ep.output_owned_with(b, s).map_err(|e| e.into_parts()) {
            Ok(d) => (delivery(d), None),
            Err((err, back)) => (fail(err), back),
        };
        match back {
            Some(b) => h.b = Some(b),
            None => {
                // SAFETY: a live handle (contract); its buffer is gone.
                drop(unsafe { Box::from_raw(*slot) });
                *slot = std::ptr::null_mut();
            }
        }
        code
    })
}

/// Receive the next message into a system-allocated buffer under `sem`
/// (-1: the endpoint's input semantics): a sealed region mapped privately
/// (move), or arena pages swapped in / copied. Waits as
/// `zcio_semantic_endpoint_input`. Stores the handle in `*out`; give it back with
/// `zcio_semantic_endpoint_free` (or pass it on with `zcio_semantic_endpoint_output_owned`).
/// Returns the length or a negative code (`-EPIPE`, `-EBADMSG`, ...).
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_input_owned(
    ep: *mut zcio_semantic_endpoint,
    sem: c_int,
    out: *mut *mut zcio_owned,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c as ssize_t,
        };
        if out.is_null() {
            return einval("zcio_semantic_endpoint_input_owned: out is NULL") as ssize_t;
        }
        let s = match sem_arg(sem, e.input, "zcio_semantic_endpoint_input_owned") {
            Ok(s) => s,
            Err(c) => return c as ssize_t,
        };
        match e.ep.input_owned_with(s) {
            Ok(b) => {
                let n = b.len() as ssize_t;
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(owned_handle(b)) };
                n
            }
            Err(err) => fail(err) as ssize_t,
        }
    })
}

/// Give a system-allocated buffer back (cached for reuse by `ep`; with a
/// NULL `ep` it is just freed). NULL `buf` is ignored.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `buf` is NULL or a live owned buffer,
/// not used again.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_free(
    ep: *mut zcio_semantic_endpoint,
    buf: *mut zcio_owned,
) {
    guard(|| {
        if buf.is_null() {
            return;
        }
        // SAFETY: a live handle (contract), given up here.
        let h = unsafe { Box::from_raw(buf) };
        // SAFETY: the caller's contract.
        if let (Some(e), Some(b)) = (unsafe { ep.as_ref() }, h.b) {
            e.ep.free(b);
        }
    })
}

// ------------------------------------------------------------------ peer

/// What the peer said in its hello: its input semantics (an `enum
/// zcio_semantics` value) into `*input` and whether it trusts this side
/// (1: it called `zcio_semantic_endpoint_trust_peer` or set `trust_peer`
/// before the hello, so it swaps this side's lent pages in rather than
/// copying them; 0 otherwise) into `*trusts`. Either pointer may be NULL.
/// Returns 0 or `-EINVAL` (a NULL endpoint).
///
/// # Safety
/// `ep` is NULL or a live endpoint; `input` and `trusts` are NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_semantic_endpoint_peer(
    ep: *mut zcio_semantic_endpoint,
    input: *mut c_int,
    trusts: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep) } {
            Ok(e) => e,
            Err(c) => return c,
        };
        let (sem, trusted) = e.ep.peer();
        if !input.is_null() {
            // SAFETY: non-NULL and writable (contract).
            unsafe { input.write(sem_code(sem)) };
        }
        if !trusts.is_null() {
            // SAFETY: non-NULL and writable (contract).
            unsafe { trusts.write(c_int::from(trusted)) };
        }
        0
    })
}

// ------------------------------------------------------------ cost model

/// The cost model (opaque): what each primitive operation costs on this
/// machine, from which endpoints choose their mechanisms per size
/// (`zcio calibrate` measures it). Immutable; free it with
/// `zcio_cost_model_free`.
pub struct zcio_cost_model {
    m: CostModel,
}

/// Store `m` as a new handle in `*out`: 0, or `-EINVAL` for a NULL `out`.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn put_model(m: CostModel, out: *mut *mut zcio_cost_model, call: &str) -> c_int {
    if out.is_null() {
        return einval(format_args!("{call}: out is NULL"));
    }
    // SAFETY: non-NULL and writable (the caller's contract).
    unsafe { out.write(Box::into_raw(Box::new(zcio_cost_model { m }))) };
    0
}

/// # Safety
/// `m` is NULL or a live cost model.
unsafe fn model<'a>(m: *const zcio_cost_model, call: &str) -> Result<&'a CostModel, c_int> {
    // SAFETY: the caller's contract.
    unsafe { m.as_ref() }
        .map(|h| &h.m)
        .ok_or_else(|| einval(format_args!("{call}: model is NULL")))
}

fn load_error(path: &str, e: LoadError) -> c_int {
    let code = match &e {
        LoadError::Io(io) => io.raw_os_error().unwrap_or(libc::EIO),
        // Not a calibration file of this version and machine.
        _ => libc::EPROTO,
    };
    fail_msg(code, format_args!("calibration file {path}: {e}"))
}

/// The model endpoints made now decide with (`CostModel::current`): the
/// calibration file's (`zcio_calibration_path`), read once per process,
/// else the built-in defaults. Stores a copy in `*out`. Returns 0 or
/// `-EINVAL`.
///
/// # Safety
/// `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_current(out: *mut *mut zcio_cost_model) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { put_model(CostModel::current().clone(), out, "zcio_cost_model_current") })
}

/// The built-in defaults (measured on the project's machine) into `*out`.
/// Returns 0 or `-EINVAL`.
///
/// # Safety
/// `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_builtin(out: *mut *mut zcio_cost_model) -> c_int {
    // SAFETY: the caller's contract.
    guard(|| unsafe { put_model(CostModel::builtin(), out, "zcio_cost_model_builtin") })
}

/// Read and check the calibration file `path` (everything in it is
/// validated: this format version, this machine, finite bounded numbers)
/// into `*out`. Errors: `-EINVAL` (NULL), the errno of reading it
/// (`-ENOENT`, ...), `-EPROTO` (not a usable calibration file: garbled,
/// another format version, measured on another machine; the reason is in
/// `zcio_last_error`).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_load(
    path: *const c_char,
    out: *mut *mut zcio_cost_model,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let p = match unsafe { str_arg(path, "zcio_cost_model_load: path") } {
            Ok(p) => p,
            Err(e) => return e,
        };
        if out.is_null() {
            return einval("zcio_cost_model_load: out is NULL");
        }
        match CostModel::load_from(std::path::Path::new(p)) {
            // SAFETY: `out` is non-NULL and writable (contract).
            Ok(m) => unsafe { put_model(m, out, "zcio_cost_model_load") },
            Err(e) => load_error(p, e),
        }
    })
}

/// Parse and check the JSON of a calibration file (what
/// `zcio_cost_model_to_json` writes) into `*out`. Errors as
/// `zcio_cost_model_load`.
///
/// # Safety
/// `json` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_from_json(
    json: *const c_char,
    out: *mut *mut zcio_cost_model,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let t = match unsafe { str_arg(json, "zcio_cost_model_from_json: json") } {
            Ok(t) => t,
            Err(e) => return e,
        };
        if out.is_null() {
            return einval("zcio_cost_model_from_json: out is NULL");
        }
        match CostModel::from_json(t) {
            // SAFETY: `out` is non-NULL and writable (contract).
            Ok(m) => unsafe { put_model(m, out, "zcio_cost_model_from_json") },
            Err(e) => load_error("(JSON text)", e),
        }
    })
}

/// The model as the JSON of a calibration file, into `buf` like
/// `snprintf` (at most `size - 1` bytes and a NUL). Returns the length of
/// the whole text (call with `size` 0 to ask; a result ≥ `size` means it
/// was cut) or `-EINVAL`.
///
/// # Safety
/// `m` is NULL or a live model; `buf` is NULL with `size` 0, or valid for
/// writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_to_json(
    m: *const zcio_cost_model,
    buf: *mut c_char,
    size: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let m = match unsafe { model(m, "zcio_cost_model_to_json") } {
            Ok(m) => m,
            Err(e) => return e as ssize_t,
        };
        // SAFETY: the caller's contract.
        unsafe { put_str(m.to_json().as_bytes(), buf, size, "zcio_cost_model_to_json") }
    })
}

/// Write the model to `path` as a calibration file (atomically: a
/// temporary file renamed over it; the directories are created). Endpoints
/// use the file at `zcio_calibration_path` from the next process on.
/// Returns 0, `-EINVAL`, or the errno of writing.
///
/// # Safety
/// `m` is NULL or a live model; `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_save(
    m: *const zcio_cost_model,
    path: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let m = match unsafe { model(m, "zcio_cost_model_save") } {
            Ok(m) => m,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        let p = match unsafe { str_arg(path, "zcio_cost_model_save: path") } {
            Ok(p) => p,
            Err(e) => return e,
        };
        match m.save(std::path::Path::new(p)) {
            Ok(()) => 0,
            Err(e) => fail_msg(e.err.raw_os_error().unwrap_or(libc::EIO), e),
        }
    })
}

/// Where the model came from: `"builtin"`, `"file"` or `"measured"` (a
/// static string), or NULL for a NULL model.
///
/// # Safety
/// `m` is NULL or a live model.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_source(m: *const zcio_cost_model) -> *const c_char {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { model(m, "zcio_cost_model_source") } {
            Ok(m) => match m.source().kind() {
                "builtin" => c"builtin".as_ptr(),
                "file" => c"file".as_ptr(),
                _ => c"measured".as_ptr(),
            },
            Err(_) => std::ptr::null(),
        }
    })
}

/// The predicted cost in nanoseconds of primitive operation `op` on
/// `bytes` bytes (page operations: pages × page size) into `*ns`. `op` is
/// an operation's name as `zcio calibrate --show` prints it
/// (`"copy_in"`, `"copy_out"`, `"ref_pass"`, `"protect"`, `"tcow_fault"`,
/// `"swap"`, `"region_create"`, ...). Returns 0 or `-EINVAL` (NULL, an
/// unknown name: `zcio_last_error` lists the names).
///
/// # Safety
/// `m` is NULL or a live model; `op` is NULL or a NUL-terminated string;
/// `ns` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_cost(
    m: *const zcio_cost_model,
    op: *const c_char,
    bytes: usize,
    ns: *mut f64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let m = match unsafe { model(m, "zcio_cost_model_cost") } {
            Ok(m) => m,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        let name = match unsafe { str_arg(op, "zcio_cost_model_cost: op") } {
            Ok(p) => p,
            Err(e) => return e,
        };
        let Some(op) = Op::from_name(name) else {
            let names: Vec<&str> = Op::ALL.iter().map(|o| o.name()).collect();
            return einval(format_args!(
                "zcio_cost_model_cost: no operation is named {name:?} (one of {})",
                names.join(", ")
            ));
        };
        if ns.is_null() {
            return einval("zcio_cost_model_cost: ns is NULL");
        }
        // SAFETY: non-NULL and writable (contract).
        unsafe { ns.write(m.cost(op, bytes)) };
        0
    })
}

/// The predicted cost in nanoseconds of moving `bytes` bytes under
/// semantics `sem` (an `enum zcio_semantics` value) end to end, with the
/// buffers page-aligned (`aligned` non-zero) or not, into `*ns`: what an
/// endpoint compares to choose between copying and its zero-copy
/// mechanism. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `m` is NULL or a live model; `ns` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_predict(
    m: *const zcio_cost_model,
    sem: c_int,
    bytes: usize,
    aligned: c_int,
    ns: *mut f64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let m = match unsafe { model(m, "zcio_cost_model_predict") } {
            Ok(m) => m,
            Err(e) => return e,
        };
        let Some(s) = sem_of(sem) else {
            return einval(format_args!(
                "zcio_cost_model_predict: {sem} is not an enum zcio_semantics value"
            ));
        };
        if ns.is_null() {
            return einval("zcio_cost_model_predict: ns is NULL");
        }
        // SAFETY: non-NULL and writable (contract).
        unsafe { ns.write(m.predict(s, bytes, aligned != 0)) };
        0
    })
}

/// Free a model (NULL is ignored).
///
/// # Safety
/// `m` is NULL or a live model, not used again.
#[no_mangle]
pub unsafe extern "C" fn zcio_cost_model_free(m: *mut zcio_cost_model) {
    guard(|| {
        if !m.is_null() {
            // SAFETY: a live handle from a `zcio_cost_model_*` call, given up here.
            drop(unsafe { Box::from_raw(m) });
        }
    })
}

/// Where the calibration file is (`$ZCIO_CALIBRATION`, else
/// `$XDG_CONFIG_HOME/zcio/calibration.json`, else
/// `~/.config/zcio/calibration.json`), into `buf` like `snprintf`. Returns
/// its length, `-ENOENT` when none of these is set, or `-EINVAL`.
///
/// # Safety
/// `buf` is NULL with `size` 0, or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_calibration_path(buf: *mut c_char, size: usize) -> ssize_t {
    guard(|| match CostModel::calibration_path() {
        // SAFETY: the caller's contract.
        Some(p) => unsafe { put_str(p.as_os_str().as_bytes(), buf, size, "zcio_calibration_path") },
        None => fail_msg(
            libc::ENOENT,
            "zcio_calibration_path: none of ZCIO_CALIBRATION, XDG_CONFIG_HOME, HOME is set",
        ) as ssize_t,
    })
}

/// Measure this machine's costs (`zcio calibrate`): every primitive
/// operation at several sizes, then a fitted model into `*out` (its source
/// `"measured"`; `zcio_cost_model_save` it to `zcio_calibration_path` for
/// endpoints to use). Every loop is bounded: `quick` non-zero measures
/// fewer sizes, at most 21 runs within 50 ms each (well under a second on
/// an idle machine, at most 20 s on a loaded one); 0 measures the full
/// set, at most 101 runs within 300 ms each (a few seconds, at most 2
/// minutes). Blocks the calling thread meanwhile. Returns 0, `-EINVAL`, or
/// the errno of the system call that failed (`zcio_last_error` says which).
///
/// # Safety
/// `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_calibrate_measure(
    quick: c_int,
    out: *mut *mut zcio_cost_model,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_calibrate_measure: out is NULL");
        }
        let opts = zcio::semantics::calibrate::Opts {
            quick: quick != 0,
            ..Default::default()
        };
        match zcio::semantics::calibrate::measure(&opts, &mut |_| {}) {
            // SAFETY: `out` is non-NULL and writable (contract).
            Ok(m) => unsafe { put_model(m, out, "zcio_calibrate_measure") },
            Err(e) => {
                let code = match &e {
                    CalibrateError::Os { errno, .. } => errno.raw_os_error(),
                    _ => libc::EIO,
                };
                fail_msg(code, e)
            }
        }
    })
}
