//! Channels: `zcio_listen` / `zcio_accept` / `zcio_connect`, sending pool
//! buffers by reference (`zcio_send`, `zcio_sendv`), copies
//! (`zcio_send_bytes`) and received messages (`zcio_forward`), receiving
//! (`zcio_recv`), counters, the doorbell for event loops
//! (`zcio_channel_doorbell` and its three steps) and close.

use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::mem::size_of;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

use std::time::Duration;

use zcio::{
    Channel, ChannelConfig, FullPolicy, HoldExpiry, HoldLimit, LaneConfig, Listener, Msg, Notify,
    Pool,
};

use crate::abi::{put, put_config, take_config};
use crate::cred::{access_arg, zcio_access};
use crate::error::{einval, fail, guard};
use crate::msg::zcio_msg;
use crate::pool::{copy_pool, zcio_buf, BufState};
use crate::{bound_ms, ms_of, Timeout, ZCIO_TIMEOUT_INFINITE};

/// A listening socket that accepts channels (opaque).
pub struct zcio_listener {
    l: Listener,
}

/// One end of a channel (opaque). `zcio_send*` and `zcio_recv` may be
/// called from different threads at once; the rest of the calls are
/// thread-safe too.
pub struct zcio_channel {
    pub(crate) ch: Channel,
    /// The pool `zcio_send_bytes` copies into, made on first use.
    pub(crate) copies: OnceLock<Pool>,
}

/// `zcio_channel_config.notify`: wake a sleeping receiver with the send
/// that finds it asleep (the default; Rust's `Notify::Now`).
pub const ZCIO_NOTIFY_NOW: c_int = 0;
/// `zcio_channel_config.notify`: defer the wake until `wake_batch` messages
/// wait, the oldest is `max_age_us` old, or `zcio_channel_flush` (Rust's
/// `Notify::Defer`): fewer system calls per message.
pub const ZCIO_NOTIFY_DEFER: c_int = 1;
/// `zcio_channel_config.full`: a send into a full ring (or at the in-flight
/// caps) waits, up to its timeout (the default; Rust's `FullPolicy::Block`).
pub const ZCIO_FULL_BLOCK: c_int = 0;
/// `zcio_channel_config.full`: a send into a full ring fails at once with
/// `-EAGAIN` whatever its `timeout_ms` (Rust's `FullPolicy::Fail`).
pub const ZCIO_FULL_FAIL: c_int = 1;
/// `zcio_channel_config.hold_expiry`: a peer holding a lent buffer past
/// `hold_limit_ms` aborts the channel (Rust's `HoldExpiry::Abort`).
pub const ZCIO_HOLD_ABORT: c_int = 0;
/// `zcio_channel_config.hold_expiry`: a buffer held past `hold_limit_ms` is
/// taken back into its pool (the peer may then see it reused) and counted
/// in `ZCIO_FAULT_HOLDS_RECLAIMED` (Rust's `HoldExpiry::Reclaim`).
pub const ZCIO_HOLD_RECLAIM: c_int = 1;

/// The configuration of a channel end (Rust's `ChannelConfig` with its
/// `ChannelPolicy`), for `zcio_listen_with` / `zcio_listen_access` (every
/// channel the listener accepts), `zcio_connect_with` and
/// `zcio_channel_pair`. Always fill it with `zcio_channel_config_init`
/// (the defaults; it records `sizeof` your struct in `size`), then change
/// what you need. Fields are only ever appended (docs/c.md, "The ABI"): a
/// library newer than your header keeps its defaults for the fields you
/// lack, an older one refuses (`-EINVAL`) a field it lacks that you set.
/// Bounds are in milliseconds, > 0,
/// or `ZCIO_TIMEOUT_INFINITE` for none (only for peers you trust). A value
/// out of range makes the call that takes the struct return `-EINVAL`,
/// and `zcio_last_error` says what is allowed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_channel_config {
    /// `sizeof` the caller's struct, set by `zcio_channel_config_init`
    /// (and `zcio_channel_get_config`); leave it as they set it.
    pub size: usize,
    /// What a sending call waits with `timeout_ms` < 0: `zcio_send`,
    /// `zcio_sendv`, `zcio_send_bytes`, `zcio_forward`, `zcio_send_typed`,
    /// `zcio_lane_loan`, `zcio_lane_send_bytes` (default 10 000: 10 s).
    pub send_timeout_ms: c_int,
    /// What a receiving call waits with `timeout_ms` < 0: `zcio_recv`,
    /// `zcio_lane_accept`, `zcio_lane_recv`, and
    /// `zcio_semantic_endpoint_next` on the channel (default 3 600 000:
    /// one hour).
    pub recv_timeout_ms: c_int,
    /// The longest the connect handshake takes, on both ends (default
    /// 5 000).
    pub connect_timeout_ms: c_int,
    /// What `zcio_accept` waits for a connection with `timeout_ms` < 0
    /// (a listener's bound; default 3 600 000: one hour).
    pub accept_timeout_ms: c_int,
    /// Descriptor entries per message ring, one per slice in flight: a
    /// power of two in 8..=1048576 (default 1024).
    pub ring_entries: u32,
    /// Entries per deallocation-notice ring: a power of two in 8..=1048576
    /// (default 2048).
    pub notice_entries: u32,
    /// Most slices the peer may hold from this end at once; a send beyond
    /// it waits (or fails, `-EAGAIN`) until the peer releases some
    /// (default 65536; > 0).
    pub max_in_flight: u64,
    /// Most bytes of slices the peer may hold from this end at once, as
    /// `max_in_flight`; a message larger than the cap is still sent once
    /// the peer holds nothing else (default 256 MiB; > 0).
    pub max_bytes_in_flight: u64,
    /// 1: pre-fault received regions when mapping them (default); 0: not.
    pub populate: c_int,
    /// How often a sleeping side checks whether the peer is still alive,
    /// in ms (> 0; default 50).
    pub liveness_interval_ms: c_int,
    /// Largest region a peer may pass this end, in bytes; larger ones are
    /// refused (default 4 GiB; > 0).
    pub max_region_len: u64,
    /// Small-message slots: a message of one slice of this process's own
    /// making of at most `lane_slot_size` bytes is copied into one of
    /// `lane_slots` slots instead of lent (0..=65536; 0 turns it off;
    /// default 64).
    pub lane_slots: u32,
    /// Bytes per small-message slot (0..=1 GiB; default 4096).
    pub lane_slot_size: u64,
    /// `ZCIO_NOTIFY_NOW` (default) or `ZCIO_NOTIFY_DEFER`.
    pub notify: c_int,
    /// Under `ZCIO_NOTIFY_DEFER`: wake the sleeping receiver once this
    /// many messages wait (>= 1; default 1).
    pub wake_batch: u32,
    /// Most a deferred message waits before the receiver is woken, and the
    /// longest a receiver sleeps (set it on both ends), in µs (> 0;
    /// default 1000).
    pub max_age_us: u64,
    /// Most a wait spins before it sleeps, in µs (0: sleep at once;
    /// default the process's spin policy, `zcio_spin_policy_get`).
    pub spin_us: u64,
    /// `ZCIO_FULL_BLOCK` (default) or `ZCIO_FULL_FAIL`.
    pub full: c_int,
    /// Longest the peer may hold a buffer this end lent it, in ms (0: no
    /// limit, the default; `ZCIO_TIMEOUT_INFINITE` is also no limit).
    /// Checked on send, `zcio_channel_reclaim`, `zcio_channel_flush` and
    /// `zcio_channel_expire_holds`.
    pub hold_limit_ms: c_int,
    /// What a hold past `hold_limit_ms` does: `ZCIO_HOLD_ABORT` (default)
    /// or `ZCIO_HOLD_RECLAIM`.
    pub hold_expiry: c_int,
    /// Wakes in a row that find the peer's sleep flag set but nobody asleep
    /// before the flag is distrusted (`ZCIO_FAULT_FUTILE_WAKES`; >= 1;
    /// default 64).
    pub futile_wake_limit: u32,
}

/// Microseconds of `d`, saturated.
fn us_of(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Fill `*cfg` with the defaults: send 10 s, receive one hour, connect
/// 5 s, accept one hour (the bounds of `zcio_listen` and `zcio_connect`),
/// and Rust's `ChannelConfig::default()` for the rest, and record `size`
/// in `cfg->size`, writing at most `size` bytes (the header's
/// `zcio_channel_config_init(cfg)` passes `sizeof *(cfg)`). Returns 0 or
/// `-EINVAL` (NULL, a size out of range).
///
/// # Safety
/// `cfg` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_config_init_sized(
    cfg: *mut zcio_channel_config,
    size: usize,
) -> c_int {
    guard(|| {
        let c = config_of(&ChannelConfig::default());
        // SAFETY: the caller's contract.
        unsafe { put_config("zcio_channel_config_init", &c, cfg, size) }
    })
}

/// The C form of `d`.
pub(crate) fn config_of(d: &ChannelConfig) -> zcio_channel_config {
    let p = &d.policy;
    zcio_channel_config {
        size: size_of::<zcio_channel_config>(),
        send_timeout_ms: ms_of(d.send_timeout),
        recv_timeout_ms: ms_of(d.recv_timeout),
        connect_timeout_ms: ms_of(d.connect_timeout),
        accept_timeout_ms: ms_of(d.accept_timeout),
        ring_entries: d.ring_entries,
        notice_entries: d.notice_entries,
        max_in_flight: d.max_in_flight as u64,
        max_bytes_in_flight: d.max_bytes_in_flight,
        populate: c_int::from(d.populate),
        liveness_interval_ms: ms_of(d.liveness_interval),
        max_region_len: d.max_region_len,
        lane_slots: d.lane.slots,
        lane_slot_size: d.lane.slot_size as u64,
        notify: match p.notify {
            Notify::Now => ZCIO_NOTIFY_NOW,
            Notify::Defer => ZCIO_NOTIFY_DEFER,
        },
        wake_batch: p.wake_batch,
        max_age_us: us_of(p.max_age),
        spin_us: us_of(p.spin),
        full: match p.full {
            FullPolicy::Block => ZCIO_FULL_BLOCK,
            FullPolicy::Fail => ZCIO_FULL_FAIL,
        },
        hold_limit_ms: p.hold.map_or(0, |h| ms_of(h.limit)),
        hold_expiry: match p.hold.map(|h| h.on_expiry) {
            Some(HoldExpiry::Reclaim) => ZCIO_HOLD_RECLAIM,
            _ => ZCIO_HOLD_ABORT,
        },
        futile_wake_limit: p.futile_wake_limit,
    }
}

/// `-EINVAL` naming field `what` of `zcio_channel_config` and what it
/// allows.
fn bad(what: &str, allowed: &str, got: impl std::fmt::Display) -> c_int {
    einval(format_args!(
        "zcio_channel_config.{what} must be {allowed}, not {got}"
    ))
}

/// The Rust configuration of `cfg` (NULL: the defaults), read as
/// `cfg->size` bytes.
///
/// # Safety
/// `cfg` is NULL or valid for reading `cfg->size` bytes.
pub(crate) unsafe fn config_arg(cfg: *const zcio_channel_config) -> Result<ChannelConfig, c_int> {
    let mut out = ChannelConfig::default();
    if cfg.is_null() {
        return Ok(out);
    }
    // SAFETY: the caller's contract.
    let c = unsafe { take_config("zcio_channel_config", cfg, config_of(&out)) }?;
    out.send_timeout = bound_ms(c.send_timeout_ms, "send_timeout_ms")?;
    out.recv_timeout = bound_ms(c.recv_timeout_ms, "recv_timeout_ms")?;
    out.connect_timeout = bound_ms(c.connect_timeout_ms, "connect_timeout_ms")?;
    out.accept_timeout = bound_ms(c.accept_timeout_ms, "accept_timeout_ms")?;
    let entries = |n: u32, what| {
        if n.is_power_of_two() && (8..=1 << 20).contains(&n) {
            Ok(n)
        } else {
            Err(bad(what, "a power of two in 8..=1048576", n))
        }
    };
    out.ring_entries = entries(c.ring_entries, "ring_entries")?;
    out.notice_entries = entries(c.notice_entries, "notice_entries")?;
    out.max_in_flight = match usize::try_from(c.max_in_flight) {
        Ok(n @ 1..) => n,
        _ => return Err(bad("max_in_flight", "> 0", c.max_in_flight)),
    };
    if c.max_bytes_in_flight == 0 {
        return Err(bad("max_bytes_in_flight", "> 0", 0));
    }
    out.max_bytes_in_flight = c.max_bytes_in_flight;
    out.populate = match c.populate {
        0 => false,
        1 => true,
        v => return Err(bad("populate", "0 or 1", v)),
    };
    out.liveness_interval = match c.liveness_interval_ms {
        ZCIO_TIMEOUT_INFINITE => {
            return Err(bad("liveness_interval_ms", "> 0 and finite", "INFINITE"))
        }
        v => bound_ms(v, "liveness_interval_ms")?,
    };
    if c.max_region_len == 0 {
        return Err(bad("max_region_len", "> 0", 0));
    }
    out.max_region_len = c.max_region_len;
    if c.lane_slots > 65536 {
        return Err(bad("lane_slots", "0..=65536", c.lane_slots));
    }
    out.lane = match usize::try_from(c.lane_slot_size) {
        Ok(n) if n <= 1 << 30 => LaneConfig {
            slots: c.lane_slots,
            slot_size: n,
        },
        _ => return Err(bad("lane_slot_size", "0..=1073741824", c.lane_slot_size)),
    };
    let p = &mut out.policy;
    p.notify = match c.notify {
        ZCIO_NOTIFY_NOW => Notify::Now,
        ZCIO_NOTIFY_DEFER => Notify::Defer,
        v => {
            return Err(bad(
                "notify",
                "ZCIO_NOTIFY_NOW (0) or ZCIO_NOTIFY_DEFER (1)",
                v,
            ))
        }
    };
    if c.wake_batch == 0 {
        return Err(bad("wake_batch", ">= 1", 0));
    }
    p.wake_batch = c.wake_batch;
    if c.max_age_us == 0 {
        return Err(bad("max_age_us", "> 0", 0));
    }
    p.max_age = Duration::from_micros(c.max_age_us);
    p.spin = Duration::from_micros(c.spin_us);
    p.full = match c.full {
        ZCIO_FULL_BLOCK => FullPolicy::Block,
        ZCIO_FULL_FAIL => FullPolicy::Fail,
        v => return Err(bad("full", "ZCIO_FULL_BLOCK (0) or ZCIO_FULL_FAIL (1)", v)),
    };
    let on_expiry = match c.hold_expiry {
        ZCIO_HOLD_ABORT => HoldExpiry::Abort,
        ZCIO_HOLD_RECLAIM => HoldExpiry::Reclaim,
        v => {
            return Err(bad(
                "hold_expiry",
                "ZCIO_HOLD_ABORT (0) or ZCIO_HOLD_RECLAIM (1)",
                v,
            ))
        }
    };
    p.hold = match c.hold_limit_ms {
        0 | ZCIO_TIMEOUT_INFINITE => None,
        v @ 1.. => Some(HoldLimit {
            limit: Duration::from_millis(v as u64),
            on_expiry,
        }),
        v => return Err(bad("hold_limit_ms", ">= 0 (0: no limit)", v)),
    };
    if c.futile_wake_limit == 0 {
        return Err(bad("futile_wake_limit", ">= 1", 0));
    }
    p.futile_wake_limit = c.futile_wake_limit;
    Ok(out)
}

/// Counters of a channel end (`zcio_channel_get_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_channel_stats {
    /// Messages sent.
    pub msgs_sent: u64,
    /// Messages received.
    pub msgs_received: u64,
    /// Slices we sent that the peer has not released yet.
    pub held_by_peer: u64,
    /// Deallocation notices received from the peer.
    pub notices_received: u64,
    /// Notices naming something the peer did not hold (ignored).
    pub bad_notices: u64,
    /// Deallocation notices we sent.
    pub notices_sent: u64,
    /// Malformed messages received (each rejected; the channel stays usable).
    pub malformed: u64,
    /// Shared-memory regions passed to the peer.
    pub regions_sent: u64,
    /// Regions received from the peer.
    pub regions_received: u64,
    /// Slices retired because the peer ended while holding them.
    pub retired: u64,
    /// Slices still on the ring, unread, when the peer ended: freed, not
    /// retired (it never received them).
    pub never_received: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Payload bytes received.
    pub bytes_received: u64,
    /// Bytes of the slices the peer has not released yet.
    pub held_by_peer_bytes: u64,
    /// Slices the peer lent us that this process still holds.
    pub holding: u64,
    /// Messages sent by copy into a small-message slot.
    pub msgs_copied: u64,
    /// Sends refused at once (no room, not allowed to wait).
    pub send_would_block: u64,
    /// Sends that timed out.
    pub send_timed_out: u64,
    /// Sends that found the peer gone (or this end closed).
    pub send_disconnected: u64,
    /// Receives that found nothing and were not allowed to wait.
    pub recv_would_block: u64,
    /// Receives that timed out.
    pub recv_timed_out: u64,
    /// Receives that found the peer gone (or this end closed).
    pub recv_disconnected: u64,
    /// The peer's pid as this process sees it (0: not visible from here).
    pub peer_pid: u64,
    /// An id both ends of the connection report alike (tools pair the
    /// ends' registry entries by it).
    pub connection: u64,
}

/// A path argument (any bytes but NUL).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub(crate) unsafe fn path_arg<'a>(p: *const c_char) -> Result<&'a Path, c_int> {
    if p.is_null() {
        return Err(einval("socket path is NULL"));
    }
    // SAFETY: non-NULL and NUL-terminated (contract).
    let b = unsafe { CStr::from_ptr(p) }.to_bytes();
    if b.is_empty() {
        return Err(einval("socket path is empty"));
    }
    Ok(Path::new(OsStr::from_bytes(b)))
}

/// Listen for channels on the Unix socket `path` (a stale socket file of
/// a dead listener is replaced; a live one is `-EADDRINUSE`). Only
/// processes of this user id may connect. The channels it accepts have
/// the default bounds (`zcio_channel_config_init`; `zcio_listen_with` sets
/// others). Stores the handle in `*out` (free it with
/// `zcio_listener_close`, which removes the socket file). Returns 0 or a
/// negative errno: `-EINVAL` (NULL or empty path), `-ENOENT` (the
/// directory does not exist), `-EACCES`, `-ENAMETOOLONG`, `-EADDRINUSE`
/// …; `zcio_last_error` names the path.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_listen(path: *const c_char, out: *mut *mut zcio_listener) -> c_int {
    // SAFETY: the caller's contract; NULL is the defaults.
    unsafe { zcio_listen_with(path, std::ptr::null(), out) }
}

/// `zcio_listen` with the configuration `*cfg` (NULL: the defaults) for
/// `zcio_accept` and every channel accepted. `-EINVAL` for a value out of
/// range (`zcio_last_error` says which and what is allowed).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `cfg` is NULL or valid for
/// reading `cfg->size` bytes (`zcio_channel_config_init` set it); `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_listen_with(
    path: *const c_char,
    cfg: *const zcio_channel_config,
    out: *mut *mut zcio_listener,
) -> c_int {
    // SAFETY: the caller's contract; NULL access is the own uid.
    unsafe { zcio_listen_access(path, cfg, std::ptr::null(), out) }
}

/// `zcio_listen_with` that admits whom `*access` names (Rust's
/// `AccessPolicy`: effective uids and gids, checked on the kernel's
/// credentials of the connecting process; NULL: this process's effective
/// uid only). A refused process's `zcio_connect` returns `-EACCES`, and so
/// does this listener's `zcio_accept`; the listener stays usable.
/// `-EINVAL` for an access list that admits nobody or a NULL array with a
/// count.
///
/// # Safety
/// As `zcio_listen_with`; `access` is NULL or a readable `struct
/// zcio_access` whose arrays hold their counts.
#[no_mangle]
pub unsafe extern "C" fn zcio_listen_access(
    path: *const c_char,
    cfg: *const zcio_channel_config,
    access: *const zcio_access,
    out: *mut *mut zcio_listener,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_listen: out is NULL");
        }
        let (path, cfg, access) =
            // SAFETY: the caller's contract (each argument as documented).
            match unsafe { (path_arg(path), config_arg(cfg), access_arg(access)) } {
                (Ok(p), Ok(c), Ok(a)) => (p, c, a),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e,
            };
        let cfg = ChannelConfig { access, ..cfg };
        match Listener::bind(path, cfg) {
            Ok(l) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(zcio_listener { l }))) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Two connected ends of a channel in this process (Rust's
/// `Channel::pair`; for threads and tests), both with the configuration
/// `*cfg` (NULL: the defaults). Stores them in `*a` and `*b` (free each
/// with `zcio_channel_close`). Returns 0, `-EINVAL`, or a negative errno.
///
/// # Safety
/// `cfg` is NULL or valid for reading `cfg->size` bytes; `a`
/// and `b` are NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_pair(
    cfg: *const zcio_channel_config,
    a: *mut *mut zcio_channel,
    b: *mut *mut zcio_channel,
) -> c_int {
    guard(|| {
        if a.is_null() || b.is_null() {
            return einval("zcio_channel_pair: a or b is NULL");
        }
        // SAFETY: the caller's contract.
        let cfg = match unsafe { config_arg(cfg) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        match Channel::pair(cfg) {
            // SAFETY: both non-NULL and writable (contract).
            Ok((x, y)) => unsafe {
                a.write(new_channel(x));
                b.write(new_channel(y));
                0
            },
            Err(e) => fail(e),
        }
    })
}

/// Accept one channel, waiting at most `timeout_ms` for a connection
/// (< 0: the listener's bound, `accept_timeout_ms`, one hour unless set
/// with `zcio_listen_with`; 0: `-EAGAIN` unless a connection is pending;
/// `ZCIO_TIMEOUT_INFINITE`: as long as it takes). Stores the new channel
/// in `*out` (free it with `zcio_channel_close`). A refused or broken
/// handshake is an error; the listener stays usable. Returns 0,
/// `-EAGAIN`, `-ETIMEDOUT`, `-EPROTO`, or a negative errno.
///
/// # Safety
/// `l` is NULL or a live listener; `out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_accept(
    l: *mut zcio_listener,
    timeout_ms: c_int,
    out: *mut *mut zcio_channel,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(l) = (unsafe { l.as_ref() }) else {
            return einval("zcio_accept: listener is NULL");
        };
        if out.is_null() {
            return einval("zcio_accept: out is NULL");
        }
        let t = Timeout::from_ms(timeout_ms);
        let r = match t {
            Timeout::Default => l.l.accept(),
            Timeout::No => l.l.accept_timeout(std::time::Duration::ZERO),
            Timeout::For(d) => l.l.accept_timeout(d),
        };
        match r {
            // SAFETY: non-NULL and writable (contract).
            Ok(ch) => unsafe {
                out.write(new_channel(ch));
                0
            },
            Err(zcio::ConnectError::TimedOut) if t == Timeout::No => -libc::EAGAIN,
            Err(e) => fail(e),
        }
    })
}

fn new_channel(ch: Channel) -> *mut zcio_channel {
    Box::into_raw(Box::new(zcio_channel {
        ch,
        copies: OnceLock::new(),
    }))
}

/// Stop listening and free the handle; the socket file is removed.
/// Channels already accepted are not affected. NULL is ignored.
///
/// # Safety
/// `l` is NULL or a live listener, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_listener_close(l: *mut zcio_listener) {
    guard(|| {
        if !l.is_null() {
            // SAFETY: a live handle from `zcio_listen`, given up here.
            drop(unsafe { Box::from_raw(l) });
        }
    })
}

/// Connect to the listener at `path`; the handshake waits at most
/// `timeout_ms` (≤ 0: the default bound, 5 s; a handshake cannot be done
/// without waiting; `ZCIO_TIMEOUT_INFINITE`: as long as it takes). The
/// channel has the default bounds (`zcio_connect_with` sets others).
/// Stores the channel in `*out` (free it with `zcio_channel_close`).
/// Returns 0, `-ENOENT` / `-ECONNREFUSED` (no listener), `-EACCES`
/// (refused by the listener's access policy), `-ETIMEDOUT`, `-EPROTO`, or
/// a negative errno.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_connect(
    path: *const c_char,
    timeout_ms: c_int,
    out: *mut *mut zcio_channel,
) -> c_int {
    guard(|| {
        let mut cfg = ChannelConfig::default();
        if let Timeout::For(d) = Timeout::from_ms(timeout_ms) {
            cfg.connect_timeout = d;
        }
        // SAFETY: the caller's contract.
        unsafe { connect(path, cfg, out) }
    })
}

/// `zcio_connect` with the configuration `*cfg` (NULL: the defaults): the
/// handshake waits at most `connect_timeout_ms`. `-EINVAL` for a value out
/// of range (`zcio_last_error` says which and what is allowed).
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `cfg` is NULL or valid for
/// reading `cfg->size` bytes (`zcio_channel_config_init` set it); `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_connect_with(
    path: *const c_char,
    cfg: *const zcio_channel_config,
    out: *mut *mut zcio_channel,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { config_arg(cfg) } {
            // SAFETY: the caller's contract.
            Ok(cfg) => unsafe { connect(path, cfg, out) },
            Err(e) => e,
        }
    })
}

/// Connect with `cfg`.
///
/// # Safety
/// As `zcio_connect`.
unsafe fn connect(path: *const c_char, cfg: ChannelConfig, out: *mut *mut zcio_channel) -> c_int {
    if out.is_null() {
        return einval("zcio_connect: out is NULL");
    }
    // SAFETY: the caller's contract.
    let path = match unsafe { path_arg(path) } {
        Ok(p) => p,
        Err(e) => return e,
    };
    match Channel::connect(path, cfg) {
        // SAFETY: non-NULL and writable (contract).
        Ok(ch) => unsafe {
            out.write(new_channel(ch));
            0
        },
        Err(e) => fail(e),
    }
}

/// The channel behind `ch`.
///
/// # Safety
/// `ch` is NULL or a live channel handle.
pub(crate) unsafe fn chan<'a>(ch: *const zcio_channel) -> Result<&'a zcio_channel, c_int> {
    // SAFETY: the caller's contract.
    unsafe { ch.as_ref() }.ok_or_else(|| einval("channel handle is NULL"))
}

/// Send `msg` as `t` says; on failure the code and the message back.
fn send_msg(ch: &Channel, msg: Msg, t: Timeout) -> Result<(), (c_int, Msg)> {
    match t {
        Timeout::Default => ch.send(msg).map_err(|e| e.into_parts()),
        Timeout::No => ch.try_send(msg).map_err(|e| e.into_parts()),
        Timeout::For(d) => ch.send_timeout(msg, d).map_err(|e| e.into_parts()),
    }
    .map_err(|(kind, msg)| (fail(kind), msg))
}

/// Freeze a copy the library made into a fresh buffer and send it as `t`
/// says: 0 or the error code (the copy is dropped either way).
pub(crate) fn send_copy(ch: &Channel, buf: zcio::FbufMut, t: Timeout) -> c_int {
    let msg = match buf.freeze() {
        Ok(b) => Msg::from(b),
        Err(e) => return fail(e.error),
    };
    match send_msg(ch, msg, t) {
        Ok(()) => 0,
        Err((code, _unsent)) => code,
    }
}

/// Freeze `b` for sending (idempotent): its message, or the error code.
fn freeze(b: &mut zcio_buf) -> Result<&Msg, c_int> {
    if let BufState::Fill(_) = b.state {
        let BufState::Fill(f) = std::mem::replace(&mut b.state, BufState::Gone) else {
            unreachable!("matched just above");
        };
        match f.freeze() {
            Ok(fb) => b.state = BufState::Frozen(Msg::from(fb)),
            Err(e) => {
                b.state = BufState::Frozen(Msg::from(e.buf));
                return Err(fail(e.error));
            }
        }
    }
    match &b.state {
        BufState::Frozen(m) => Ok(m),
        _ => Err(einval("buffer handle was already sent")),
    }
}

/// Send `buf` by reference: the receiver reads these very pages. Waits
/// for room in the channel at most `timeout_ms` (0: `-EAGAIN` if full;
/// < 0: the channel's bound, `send_timeout_ms`, 10 s unless set;
/// `ZCIO_TIMEOUT_INFINITE`: as long as it takes).
///
/// Ownership: on success (0) the buffer belongs to the channel and the
/// handle is freed: do not touch `buf` or its bytes again (the pages
/// return to the pool when the receiver releases the message). On failure
/// the buffer is still yours, frozen (`zcio_buf_data` returns NULL): send
/// it again or `zcio_buf_free` it. Errors: `-EAGAIN` (nothing available
/// now: the ring is full, or the peer holds too many buffers),
/// `-ETIMEDOUT`, `-EPIPE` (the peer is gone), `-ECONNABORTED`,
/// `-ZCIO_ECORRUPT`, `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel; `buf` is NULL or a live buffer handle
/// used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn zcio_send(
    ch: *mut zcio_channel,
    buf: *mut zcio_buf,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        let Some(b) = (unsafe { buf.as_mut() }) else {
            return einval("zcio_send: buf is NULL");
        };
        if let Err(e) = freeze(b) {
            return e;
        }
        let BufState::Frozen(msg) = std::mem::replace(&mut b.state, BufState::Gone) else {
            unreachable!("freeze leaves the buffer frozen");
        };
        match send_msg(&c.ch, msg, Timeout::from_ms(timeout_ms)) {
            Ok(()) => {
                // SAFETY: a live handle (contract); sent, so given up.
                drop(unsafe { Box::from_raw(buf) });
                0
            }
            Err((code, msg)) => {
                b.state = BufState::Frozen(msg);
                code
            }
        }
    })
}

/// Send `n` buffers as one message of `n` slices (at most 64), e.g. a
/// header and a payload; the receiver sees them in this order
/// (`zcio_msg_slices`). Ownership as for `zcio_send`: on success every
/// handle is freed; on failure every buffer is still yours (those that
/// were frozen stay frozen). The same buffer may not appear twice
/// (`-EINVAL`).
///
/// # Safety
/// `ch` is NULL or a live channel; `bufs` is NULL or points to `n`
/// pointers, each NULL or a live buffer handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn zcio_sendv(
    ch: *mut zcio_channel,
    bufs: *const *mut zcio_buf,
    n: usize,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        if bufs.is_null() || n == 0 || n > zcio::Msg::MAX_SLICES {
            return einval("zcio_sendv: bufs is NULL or n is not 1..=64");
        }
        // Copied out once (at most 64 pointers), so the checks below and
        // the use after them see the same handles whatever memory the
        // caller's array lives in.
        let ptrs: Vec<_> = (0..n)
            // SAFETY: `bufs` points to `n` readable pointers (contract);
            // `i < n`.
            .map(|i| unsafe { bufs.add(i).read() })
            .collect();
        let distinct: HashSet<_> = ptrs.iter().collect();
        if ptrs.iter().any(|p| p.is_null()) || distinct.len() != n {
            return einval("zcio_sendv: a buffer is NULL or appears twice");
        }
        let mut slices = Vec::with_capacity(n);
        for &p in &ptrs {
            // SAFETY: non-NULL live handles (contract), pairwise distinct
            // (checked), so each `&mut` is unique.
            let b = unsafe { &mut *p };
            match freeze(b) {
                Ok(m) => slices.extend(m.slices().iter().cloned()),
                Err(e) => return e,
            }
        }
        let msg = match Msg::from_slices(slices) {
            Ok(m) => m,
            Err(e) => return fail(e),
        };
        match send_msg(&c.ch, msg, Timeout::from_ms(timeout_ms)) {
            Ok(()) => {
                for &p in &ptrs {
                    // SAFETY: live, distinct handles (contract, checked);
                    // their buffers were sent, so the handles are given up.
                    drop(unsafe { Box::from_raw(p) });
                }
                0
            }
            Err((code, _copy)) => code,
        }
    })
}

/// Copy `len` bytes from `data` into a buffer of the channel's own pool
/// and send it (for small or occasional messages; large data is better
/// written straight into a `zcio_buf_alloc` buffer). `timeout_ms` bounds
/// both the wait for a free buffer and for room (0: `-EAGAIN` at once;
/// < 0: the pool's 10 s, then the channel's send bound). `data` stays
/// yours. Returns 0 or the errors of `zcio_buf_alloc` and `zcio_send`.
///
/// # Safety
/// `ch` is NULL or a live channel; `data` is valid for reading `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_send_bytes(
    ch: *mut zcio_channel,
    data: *const c_void,
    len: usize,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        if data.is_null() || len == 0 || len > isize::MAX as usize {
            return einval("zcio_send_bytes: data is NULL or len is 0");
        }
        let pool = c.copies.get_or_init(copy_pool);
        let t = Timeout::from_ms(timeout_ms);
        let buf = match t {
            Timeout::Default => pool.alloc(len),
            Timeout::No => pool.try_alloc(len),
            Timeout::For(d) => pool.alloc_timeout(len, d),
        };
        let mut buf = match buf {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        // `data` may point into memory a peer can write (a received
        // message's bytes): copied with raw pointers, never borrowed.
        // SAFETY: `data` is readable for `len` bytes (contract); `buf` is a
        // fresh buffer of at least `len` bytes that nothing else aliases.
        unsafe { zcio::copy_raw(data.cast::<u8>(), buf.as_mut_slice().as_mut_ptr(), len) };
        send_copy(&c.ch, buf, t)
    })
}

/// Forward a received message to another channel by reference (no byte
/// is copied; the pages are passed on). `msg` stays yours (release it as
/// usual); the originator gets its buffers back once both you and the
/// next receiver released them. Timeout and errors as for `zcio_send`.
///
/// # Safety
/// `ch` is NULL or a live channel; `msg` is NULL or a live message.
#[no_mangle]
pub unsafe extern "C" fn zcio_forward(
    ch: *mut zcio_channel,
    msg: *const zcio_msg,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        let Some(m) = (unsafe { msg.as_ref() }) else {
            return einval("zcio_forward: msg is NULL");
        };
        match send_msg(&c.ch, m.msg.clone(), Timeout::from_ms(timeout_ms)) {
            Ok(()) => 0,
            Err((code, _)) => code,
        }
    })
}

/// Receive a message, waiting at most `timeout_ms` (0: `-EAGAIN` if none
/// is ready; < 0: the channel's bound, `recv_timeout_ms`, one hour unless
/// set; `ZCIO_TIMEOUT_INFINITE`: as long as it takes). Stores it in
/// `*out`: it is
/// yours until `zcio_msg_release`. Errors: `-EAGAIN`, `-ETIMEDOUT`,
/// `-EPIPE` (the peer is gone and everything it sent was received; a
/// sender killed mid-stream shows up here, never as a hang), `-EBADMSG`
/// (a malformed message was dropped; the channel stays usable),
/// `-ZCIO_ECORRUPT` (the channel is closed).
///
/// The message's bytes are the sender's pages, read in place. If
/// `zcio_msg_is_volatile` says 1, the sender can still write them: copy
/// out what you validate (`zcio_msg_read`), then use the copy.
///
/// # Safety
/// `ch` is NULL or a live channel; `out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_recv(
    ch: *mut zcio_channel,
    timeout_ms: c_int,
    out: *mut *mut zcio_msg,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        if out.is_null() {
            return einval("zcio_recv: out is NULL");
        }
        let r = match Timeout::from_ms(timeout_ms) {
            Timeout::Default => c.ch.recv().map_err(fail),
            Timeout::No => c.ch.try_recv().map_err(fail),
            Timeout::For(d) => c.ch.recv_timeout(d).map_err(fail),
        };
        match r {
            Ok(msg) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(zcio_msg { msg }))) };
                0
            }
            Err(e) => e,
        }
    })
}

/// Process the peer's deallocation notices now, so released buffers are
/// back in their pools (allocation does this by itself when it needs
/// to). Returns how many slices came back.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_reclaim(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => c.ch.reclaim().min(c_int::MAX as usize) as c_int,
            Err(e) => e,
        }
    })
}

/// Fill `*out` with the channel's counters, writing at most `size` bytes
/// (the header's `zcio_channel_get_stats(ch, out)` passes `sizeof
/// *(out)`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_get_stats_sized(
    ch: *mut zcio_channel,
    out: *mut zcio_channel_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        let s = c.ch.stats();
        let s = zcio_channel_stats {
            msgs_sent: s.msgs_sent,
            msgs_received: s.msgs_received,
            held_by_peer: s.held_by_peer as u64,
            notices_received: s.notices_received,
            bad_notices: s.bad_notices,
            notices_sent: s.notices_sent,
            malformed: s.malformed,
            regions_sent: s.regions_sent,
            regions_received: s.regions_received,
            retired: s.retired,
            never_received: s.never_received,
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
            held_by_peer_bytes: s.held_by_peer_bytes,
            holding: s.holding,
            msgs_copied: s.msgs_copied,
            send_would_block: s.send_would_block,
            send_timed_out: s.send_timed_out,
            send_disconnected: s.send_disconnected,
            recv_would_block: s.recv_would_block,
            recv_timed_out: s.recv_timed_out,
            recv_disconnected: s.recv_disconnected,
            peer_pid: u64::from(s.peer_pid),
            connection: s.connection,
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_channel_get_stats", &s, out, size) }
    })
}

/// Event loops: this end's doorbell, a descriptor that polls readable
/// (`POLLIN`, epoll) when the peer rang it -- which it does only after this
/// end said it is about to sleep (`zcio_channel_prepare_recv_sleep`,
/// `zcio_channel_prepare_send_sleep`) -- or when the peer hung up. The
/// first call switches this end to *bell mode* for good: the peer rings
/// instead of waking a futex, and this end's blocking calls sleep on the
/// doorbell too. The fd belongs to the channel (the same one on every
/// call): do not close it or read from it. Returns the fd (>= 0) or
/// `-EINVAL` (NULL handle).
///
/// The receive loop, with the fd in your epoll set:
///  1. `zcio_recv(ch, 0, &m)`; done unless `-EAGAIN`;
///  2. `zcio_channel_prepare_recv_sleep(ch)`: 0 -> go to 1;
///  3. wait until the fd is readable (epoll_wait);
///  4. `zcio_channel_doorbell_rang(ch)`; go to 1.
///
/// A send that returned `-EAGAIN` waits the same way, with
/// `zcio_channel_prepare_send_sleep` in step 2.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_doorbell(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => std::os::fd::AsRawFd::as_raw_fd(&c.ch.doorbell()),
            Err(e) => e,
        }
    })
}

/// Event loops, step 2 of a receive: say "about to sleep until a message
/// comes" (sets this end's sleep flag, so the peer's next send rings the
/// doorbell). Returns 1 (sleep: wait for the doorbell), 0 (a message is
/// pending: receive it instead of sleeping) or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_prepare_recv_sleep(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => c_int::from(c.ch.prepare_recv_sleep()),
            Err(e) => e,
        }
    })
}

/// Event loops, step 2 of a send that returned `-EAGAIN`: say "about to
/// sleep until a message of `slices` slices and `bytes` bytes may be sent"
/// (the ring is full, or the peer holds as much as it may, in slices or in
/// bytes; 0 slices count as 1). Returns 1
/// (sleep: wait for the doorbell), 0 (it may be sent now: send again),
/// `-EPIPE` (the peer is gone: it never will), `-ZCIO_ECORRUPT` or
/// `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_prepare_send_sleep(
    ch: *mut zcio_channel,
    slices: usize,
    bytes: u64,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        match c.ch.prepare_send_sleep(slices, bytes) {
            Ok(sleep) => c_int::from(sleep),
            Err(kind) => fail(kind),
        }
    })
}

/// Event loops, step 4: after the doorbell polled readable, take the rings
/// off it, clear this end's sleep flags (every waiter's: wake all of this
/// end's waiters, they set theirs again) and, if it hung up, find out
/// whether the peer is gone (the next `zcio_recv` or send then returns
/// `-EPIPE`, after everything the peer sent was received). Returns 0, 1
/// when the doorbell has hung up -- the peer is gone, or it closed its
/// doorbell and will not ring again: from then on look again on a timer
/// (at most every 50 ms), not on the fd, which stays readable (remove it
/// from the epoll set) -- or `-EINVAL`.
///
/// # Safety
/// `ch` is NULL or a live channel.
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_doorbell_rang(ch: *mut zcio_channel) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { chan(ch) } {
            Ok(c) => c_int::from(c.ch.doorbell_rang()),
            Err(e) => e,
        }
    })
}

/// Close this end and free the handle (NULL is ignored): the peer sees
/// `-EPIPE` once it has received what was sent; what the peer held of
/// ours is released. Messages received earlier stay readable until
/// released.
///
/// # Safety
/// `ch` is NULL or a live channel, not used again afterwards (by any
/// thread).
#[no_mangle]
pub unsafe extern "C" fn zcio_channel_close(ch: *mut zcio_channel) {
    guard(|| {
        if !ch.is_null() {
            // SAFETY: a live handle from `zcio_accept`/`zcio_connect`,
            // given up here.
            drop(unsafe { Box::from_raw(ch) });
        }
    })
}
