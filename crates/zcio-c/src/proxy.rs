//! Asynchronous IPC through proxy threads (Rust's `zcio::proxy`): a
//! rendezvous endpoint driven by a pool of proxy threads
//! (`zcio_proxies`), so that a send returns at once with a ticket
//! (`zcio_ticket`) and a receive can be posted ahead and collected later
//! (`zcio_recv_handle`). The partner speaks plain rendezvous and cannot
//! tell the difference.

use std::ffi::c_int;
use std::sync::OnceLock;
use std::time::Duration;

use zcio::proxy::{
    Proxies, ProxyConfig, ProxyEndpoint, ProxyError, RecvHandle, Ticket, TicketStatus,
};

use crate::abi::{put, put_config, take_config};
use crate::cred::zcio_peer_cred;
use crate::error::{einval, fail, guard};
use crate::rendezvous::{envelope_arg, envelope_out, take, zcio_envelope, zcio_rendezvous};
use crate::Timeout;

/// `zcio_ticket_status`: the message is queued or being delivered.
pub const ZCIO_TICKET_PENDING: c_int = 0;
/// `zcio_ticket_status`: the partner took the message.
pub const ZCIO_TICKET_DELIVERED: c_int = 1;

/// A pool of proxy threads shared by proxy endpoints (opaque,
/// thread-safe). Its threads start on demand and exit when idle.
pub struct zcio_proxies {
    p: Proxies,
}

/// A rendezvous endpoint driven through proxy threads (opaque; every call
/// may be made from several threads at once).
pub struct zcio_proxy_endpoint {
    pe: ProxyEndpoint,
}

/// The status of one message given to `zcio_proxy_endpoint_send`
/// (opaque). Freeing it does not cancel the send. Thread-safe.
pub struct zcio_ticket {
    t: Ticket,
}

/// A receive under way (from `zcio_proxy_endpoint_post` or `_call`):
/// collect its message with `zcio_recv_handle_wait` (opaque).
pub struct zcio_recv_handle {
    h: RecvHandle,
}

/// What a pool of proxy threads does and how many there may be, for
/// `zcio_proxies_new`. Fill it with `zcio_proxy_config_init` (the
/// defaults), then change what you need.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_proxy_config {
    /// `sizeof` the caller's struct, set by `zcio_proxy_config_init`; leave it as
    /// it set it (docs/c.md, "The ABI").
    pub size: usize,
    /// Most proxy threads alive at once (send and receive proxies
    /// together; 0 is taken as 1). Default 64.
    pub max_proxies: usize,
    /// Default per-partner quota: messages that may wait in one partner's
    /// send queue (and in its receive queue) before `zcio_proxy_endpoint_send`
    /// fails with `-EAGAIN` (the receive proxy stops taking messages
    /// instead, so the partner's sends block). Default 4096; at least 1.
    pub quota: usize,
    /// How long a proxy whose queue ran empty busy-waits for more work
    /// before it parks, in microseconds (default 50).
    pub spin_us: u32,
    /// How long a parked proxy stays with its queue before returning to
    /// the pool, in milliseconds (default 20).
    pub linger_ms: u32,
    /// How long an idle proxy thread waits for a job before it exits, in
    /// milliseconds (default 10 000).
    pub idle_exit_ms: u32,
}

/// Counters of a proxy pool (`zcio_proxies_get_stats`). Fields may be
/// appended.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_proxy_stats {
    /// Proxy threads alive.
    pub threads: u64,
    /// Of those, idle.
    pub idle: u64,
    /// Jobs waiting for a proxy (the cap is reached).
    pub waiting_jobs: u64,
    /// Threads ever started.
    pub spawned: u64,
    /// Jobs handed to an idle proxy instead of a new thread.
    pub reused: u64,
}

/// Counters of a proxy endpoint (`zcio_proxy_endpoint_get_stats`). Fields
/// may be appended.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_proxy_endpoint_stats {
    /// Messages waiting in the send queue.
    pub send_queued: u64,
    /// Messages the partner took.
    pub delivered: u64,
    /// Messages that could not be delivered.
    pub failed: u64,
    /// Messages the receive proxy took from the partner.
    pub received: u64,
    /// Received messages waiting for a receive.
    pub recv_queued: u64,
}

fn us(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

fn ms(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// The C form of `d`.
fn proxy_config_of(d: &ProxyConfig) -> zcio_proxy_config {
    zcio_proxy_config {
        size: std::mem::size_of::<zcio_proxy_config>(),
        max_proxies: d.max_proxies,
        quota: d.quota,
        spin_us: us(d.spin),
        linger_ms: ms(d.linger),
        idle_exit_ms: ms(d.idle_exit),
    }
}

/// Fill `*cfg` with the defaults (64 proxies, a quota of 4096, spin 50 µs,
/// linger 20 ms, idle exit 10 s).
///
/// Records `size` in `cfg->size` and writes at most `size` bytes (the
/// header's `zcio_proxy_config_init(cfg)` passes `sizeof *(cfg)`). Returns 0 or
/// `-EINVAL` (NULL, a size out of range).
///
/// # Safety
/// `cfg` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_config_init_sized(
    cfg: *mut zcio_proxy_config,
    size: usize,
) -> c_int {
    guard(|| {
        let c = proxy_config_of(&ProxyConfig::default());
        // SAFETY: the caller's contract.
        unsafe { put_config("zcio_proxy_config_init", &c, cfg, size) }
    })
}

/// A new pool of proxy threads with `*cfg` (NULL: the defaults), stored
/// in `*out` (free it with `zcio_proxies_free`). Returns 0 or `-EINVAL`
/// (a quota of 0, NULL `out`).
///
/// # Safety
/// `cfg` is NULL or valid for reading `cfg->size` bytes
/// (`zcio_proxy_config_init` set it); `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxies_new(
    cfg: *const zcio_proxy_config,
    out: *mut *mut zcio_proxies,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_proxies_new: out is NULL");
        }
        let mut c = ProxyConfig::default();
        if !cfg.is_null() {
            // SAFETY: the caller's contract.
            let cfg = match unsafe { take_config("zcio_proxies_new", cfg, proxy_config_of(&c)) } {
                Ok(cfg) => cfg,
                Err(e) => return e,
            };
            if cfg.quota == 0 {
                return einval("zcio_proxies_new: quota must be at least 1");
            }
            c.max_proxies = cfg.max_proxies;
            c.quota = cfg.quota;
            c.spin = Duration::from_micros(u64::from(cfg.spin_us));
            c.linger = Duration::from_millis(u64::from(cfg.linger_ms));
            c.idle_exit = Duration::from_millis(u64::from(cfg.idle_exit_ms));
        }
        let h = zcio_proxies { p: Proxies::new(c) };
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(Box::into_raw(Box::new(h))) };
        0
    })
}

/// Store the pool's counters in `*out`, writing at most `size` bytes (pass
/// `sizeof(struct zcio_proxy_stats)`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `p` is NULL or a live pool; `out` is NULL or valid for writing `size`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxies_get_stats(
    p: *const zcio_proxies,
    out: *mut zcio_proxy_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { p.as_ref() }) else {
            return einval("zcio_proxies_get_stats: pool is NULL");
        };
        let s = p.p.stats();
        let s = zcio_proxy_stats {
            threads: s.threads as u64,
            idle: s.idle as u64,
            waiting_jobs: s.waiting_jobs as u64,
            spawned: s.spawned,
            reused: s.reused,
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_proxies_get_stats", &s, out, size) }
    })
}

/// Free the pool handle (NULL is ignored). Endpoints made with it keep
/// using its threads; the threads exit once idle.
///
/// # Safety
/// `p` is NULL or a live pool, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxies_free(p: *mut zcio_proxies) {
    guard(|| {
        if !p.is_null() {
            // SAFETY: a live handle from `zcio_proxies_new`, given up here.
            drop(unsafe { Box::from_raw(p) });
        }
    })
}

/// The pool endpoints made without one share.
fn default_proxies() -> &'static Proxies {
    static P: OnceLock<Proxies> = OnceLock::new();
    P.get_or_init(Proxies::default)
}

/// Drive the rendezvous endpoint `ep` through proxy threads from
/// `proxies` (NULL: a pool the library shares among all endpoints made
/// without one, with the defaults of `zcio_proxy_config_init`). Takes
/// `ep` over: on success its handle is freed (do not use or close it
/// again; its bounds stay: deliveries and `zcio_ticket_wait` wait up to
/// its `send_timeout_ms`, receives its `recv_timeout_ms`). On failure `ep`
/// is still yours. Stores the new endpoint in `*out` (free it with
/// `zcio_proxy_endpoint_free`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint that no other thread uses during the
/// call (nor afterwards, on success); `proxies` is NULL or a live pool;
/// `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_new(
    ep: *mut zcio_rendezvous,
    proxies: *const zcio_proxies,
    out: *mut *mut zcio_proxy_endpoint,
) -> c_int {
    guard(|| {
        if ep.is_null() {
            return einval("zcio_proxy_endpoint_new: endpoint is NULL");
        }
        if out.is_null() {
            return einval("zcio_proxy_endpoint_new: out is NULL");
        }
        // SAFETY: the caller's contract.
        let p = match unsafe { proxies.as_ref() } {
            Some(p) => &p.p,
            None => default_proxies(),
        };
        // SAFETY: a live, non-NULL handle nothing else uses (contract),
        // given up here.
        let ep = unsafe { take(ep) };
        let h = zcio_proxy_endpoint {
            pe: ProxyEndpoint::new(ep, p),
        };
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(Box::into_raw(Box::new(h))) };
        0
    })
}

/// The proxy endpoint behind `pe`.
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint.
unsafe fn proxy_endpoint<'a>(
    pe: *const zcio_proxy_endpoint,
    what: &str,
) -> Result<&'a ProxyEndpoint, c_int> {
    // SAFETY: the caller's contract.
    unsafe { pe.as_ref() }
        .map(|h| &h.pe)
        .ok_or_else(|| einval(format_args!("{what}: proxy endpoint is NULL")))
}

/// Set this partner's quota (messages that may wait per direction),
/// replacing the pool's. Returns 0 or `-EINVAL` (0, NULL).
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_set_quota(
    pe: *mut zcio_proxy_endpoint,
    quota: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let pe = match unsafe { proxy_endpoint(pe, "zcio_proxy_endpoint_set_quota") } {
            Ok(p) => p,
            Err(c) => return c,
        };
        if quota == 0 {
            return einval("zcio_proxy_endpoint_set_quota: quota must be at least 1");
        }
        pe.set_quota(quota);
        0
    })
}

/// Queue `*msg` for delivery and return at once; a proxy thread delivers
/// it with a synchronous rendezvous send, in order, and records the
/// outcome in the ticket stored in `*ticket` (free it with
/// `zcio_ticket_free`; pass NULL for no ticket: the outcome is then only
/// counted in `zcio_proxy_endpoint_get_stats`). `*msg` and its descriptors
/// stay yours (the library sends duplicates). Returns 0, or `-EAGAIN` (the
/// partner's queue holds its quota: retry after some are delivered),
/// `-EMSGSIZE`, `-EBADF`, `-EPIPE` (the partner is gone or this endpoint
/// was closed), `-EPROTO`, `-EINVAL`; the message was not queued then.
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint; `msg` is NULL or valid for
/// reading a `struct zcio_envelope`; `ticket` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_send(
    pe: *mut zcio_proxy_endpoint,
    msg: *const zcio_envelope,
    ticket: *mut *mut zcio_ticket,
) -> c_int {
    guard(|| {
        const WHAT: &str = "zcio_proxy_endpoint_send";
        // SAFETY: the caller's contract.
        let (pe, m) = match unsafe { (proxy_endpoint(pe, WHAT), envelope_arg(msg, WHAT)) } {
            (Ok(p), Ok(m)) => (p, m),
            (Err(c), _) | (_, Err(c)) => return c,
        };
        match pe.send(m) {
            Ok(t) => {
                if !ticket.is_null() {
                    // SAFETY: non-NULL and writable (contract).
                    unsafe { ticket.write(Box::into_raw(Box::new(zcio_ticket { t }))) };
                }
                0
            }
            // The message comes back: dropping it closes our duplicates.
            Err(e) => fail(e),
        }
    })
}

/// An asynchronous remote call: queue `*msg` as `zcio_proxy_endpoint_send`
/// does and store in `*out` a handle that the partner's answer (its next
/// message) will be delivered to (collect it with `zcio_recv_handle_wait`,
/// free it with `zcio_recv_handle_free`). Errors as for
/// `zcio_proxy_endpoint_send`.
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint; `msg` is NULL or valid for
/// reading a `struct zcio_envelope`; `out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_call(
    pe: *mut zcio_proxy_endpoint,
    msg: *const zcio_envelope,
    out: *mut *mut zcio_recv_handle,
) -> c_int {
    guard(|| {
        const WHAT: &str = "zcio_proxy_endpoint_call";
        // SAFETY: the caller's contract.
        let (pe, m) = match unsafe { (proxy_endpoint(pe, WHAT), envelope_arg(msg, WHAT)) } {
            (Ok(p), Ok(m)) => (p, m),
            (Err(c), _) | (_, Err(c)) => return c,
        };
        if out.is_null() {
            return einval("zcio_proxy_endpoint_call: out is NULL");
        }
        match pe.call(m) {
            Ok(h) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(zcio_recv_handle { h }))) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Post a receive: the receive proxy starts receiving for this endpoint
/// and hands the next message to the handle stored in `*out` (collect it
/// with `zcio_recv_handle_wait`; handles are served most recently posted
/// first). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_post(
    pe: *mut zcio_proxy_endpoint,
    out: *mut *mut zcio_recv_handle,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let pe = match unsafe { proxy_endpoint(pe, "zcio_proxy_endpoint_post") } {
            Ok(p) => p,
            Err(c) => return c,
        };
        if out.is_null() {
            return einval("zcio_proxy_endpoint_post: out is NULL");
        }
        let h = pe.post();
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(Box::into_raw(Box::new(zcio_recv_handle { h }))) };
        0
    })
}

/// Receive the next message into `*out`, waiting at most `timeout_ms`
/// (< 0: the endpoint's `recv_timeout_ms`; 0: `-EAGAIN` unless one is
/// ready; `ZCIO_TIMEOUT_INFINITE`: as long as it takes). When nothing else
/// receives for this endpoint the calling thread receives itself.
/// Received descriptors are yours to close. Returns 0, `-EAGAIN`,
/// `-ETIMEDOUT`, `-EPIPE` (the partner is gone, or this endpoint was
/// closed), `-EPROTO`, `-EINVAL`.
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint; `out` is NULL or valid for
/// writing a `struct zcio_envelope`.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_recv(
    pe: *mut zcio_proxy_endpoint,
    timeout_ms: c_int,
    out: *mut zcio_envelope,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let pe = match unsafe { proxy_endpoint(pe, "zcio_proxy_endpoint_recv") } {
            Ok(p) => p,
            Err(c) => return c,
        };
        if out.is_null() {
            return einval("zcio_proxy_endpoint_recv: out is NULL");
        }
        let r = match Timeout::from_ms(timeout_ms) {
            Timeout::Default => pe.recv(),
            Timeout::No => pe.try_recv(),
            Timeout::For(d) => pe.recv_timeout(d),
        };
        match r {
            Ok(env) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(envelope_out(env)) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Store the partner's kernel credentials in `*out` (as
/// `zcio_rendezvous_peer`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint; `out` is NULL or valid for
/// writing a `struct zcio_peer_cred`.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_peer(
    pe: *const zcio_proxy_endpoint,
    out: *mut zcio_peer_cred,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let pe = match unsafe { proxy_endpoint(pe, "zcio_proxy_endpoint_peer") } {
            Ok(p) => p,
            Err(c) => return c,
        };
        if out.is_null() {
            return einval("zcio_proxy_endpoint_peer: out is NULL");
        }
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(pe.peer().into()) };
        0
    })
}

/// Store the endpoint's counters in `*out`, writing at most `size` bytes
/// (pass `sizeof(struct zcio_proxy_endpoint_stats)`). Returns 0 or
/// `-EINVAL`.
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint; `out` is NULL or valid for
/// writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_get_stats(
    pe: *const zcio_proxy_endpoint,
    out: *mut zcio_proxy_endpoint_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let pe = match unsafe { proxy_endpoint(pe, "zcio_proxy_endpoint_get_stats") } {
            Ok(p) => p,
            Err(c) => return c,
        };
        let s = pe.stats();
        let s = zcio_proxy_endpoint_stats {
            send_queued: s.send_queued as u64,
            delivered: s.delivered,
            failed: s.failed,
            received: s.received,
            recv_queued: s.recv_queued as u64,
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_proxy_endpoint_get_stats", &s, out, size) }
    })
}

/// Close the endpoint, keeping the handle: every message still queued for
/// sending fails (its ticket: `-EPIPE`), new sends are refused, and
/// receiving stops (waiting receives and handles: `-EPIPE`). Free it with
/// `zcio_proxy_endpoint_free`. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint.
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_close(pe: *mut zcio_proxy_endpoint) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { proxy_endpoint(pe, "zcio_proxy_endpoint_close") } {
            Ok(p) => {
                p.close();
                0
            }
            Err(c) => c,
        }
    })
}

/// Free the endpoint (NULL is ignored): receiving stops (handles still
/// posted get `-EPIPE`); messages already queued are still delivered
/// unless `zcio_proxy_endpoint_close` was called first. The connection
/// closes once the last queued message and outstanding handle are done.
/// Tickets and handles stay valid (free each on its own).
///
/// # Safety
/// `pe` is NULL or a live proxy endpoint, not used again afterwards (by
/// any thread).
#[no_mangle]
pub unsafe extern "C" fn zcio_proxy_endpoint_free(pe: *mut zcio_proxy_endpoint) {
    guard(|| {
        if !pe.is_null() {
            // SAFETY: a live handle from `zcio_proxy_endpoint_new`, given
            // up here.
            drop(unsafe { Box::from_raw(pe) });
        }
    })
}

/// The ticket behind `t`.
///
/// # Safety
/// `t` is NULL or a live ticket.
unsafe fn ticket<'a>(t: *const zcio_ticket, what: &str) -> Result<&'a Ticket, c_int> {
    // SAFETY: the caller's contract.
    unsafe { t.as_ref() }
        .map(|h| &h.t)
        .ok_or_else(|| einval(format_args!("{what}: ticket is NULL")))
}

/// Where the ticket's message stands now (never waits):
/// `ZCIO_TICKET_PENDING` (0: queued or being delivered),
/// `ZCIO_TICKET_DELIVERED` (1: the partner took it), or the negative code
/// of why it was not delivered: `-EPIPE` (the partner hung up or died, or
/// the endpoint was closed first), `-ETIMEDOUT` (the partner did not take
/// it within the endpoint's `send_timeout_ms`), `-EPROTO`, or a negative
/// errno. `-EINVAL` for a NULL ticket.
///
/// # Safety
/// `t` is NULL or a live ticket.
#[no_mangle]
pub unsafe extern "C" fn zcio_ticket_status(t: *const zcio_ticket) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { ticket(t, "zcio_ticket_status") } {
            Ok(t) => match t.status() {
                TicketStatus::Pending => ZCIO_TICKET_PENDING,
                TicketStatus::Delivered => ZCIO_TICKET_DELIVERED,
                TicketStatus::Failed(e) => fail(e),
            },
            Err(c) => c,
        }
    })
}

/// Wait until the ticket's message was delivered (0) or failed (its code,
/// as `zcio_ticket_status`), at most `timeout_ms` (< 0: the endpoint's
/// `send_timeout_ms`; 0: `-EAGAIN` while pending; `ZCIO_TIMEOUT_INFINITE`:
/// as long as it takes). A ticket still pending then gives `-ETIMEDOUT`
/// (or `-EAGAIN`) and may be waited on again. `-EINVAL` for NULL.
///
/// # Safety
/// `t` is NULL or a live ticket.
#[no_mangle]
pub unsafe extern "C" fn zcio_ticket_wait(t: *const zcio_ticket, timeout_ms: c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let t = match unsafe { ticket(t, "zcio_ticket_wait") } {
            Ok(t) => t,
            Err(c) => return c,
        };
        let r = match Timeout::from_ms(timeout_ms) {
            Timeout::Default => t.wait(),
            Timeout::No => match t.status() {
                TicketStatus::Pending => Err(ProxyError::WouldBlock),
                TicketStatus::Delivered => Ok(()),
                TicketStatus::Failed(e) => Err(e),
            },
            Timeout::For(d) => t.wait_timeout(d),
        };
        match r {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// Free the ticket (NULL is ignored). The send goes on.
///
/// # Safety
/// `t` is NULL or a live ticket, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_ticket_free(t: *mut zcio_ticket) {
    guard(|| {
        if !t.is_null() {
            // SAFETY: a live handle from `zcio_proxy_endpoint_send`, given
            // up here.
            drop(unsafe { Box::from_raw(t) });
        }
    })
}

/// Whether the handle's message (or its error) is there: 1 or 0 (never
/// waits); `-EINVAL` for NULL.
///
/// # Safety
/// `h` is NULL or a live receive handle.
#[no_mangle]
pub unsafe extern "C" fn zcio_recv_handle_ready(h: *const zcio_recv_handle) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { h.as_ref() } {
            Some(h) => c_int::from(h.h.is_ready()),
            None => einval("zcio_recv_handle_ready: handle is NULL"),
        }
    })
}

/// Collect the handle's message into `*out`, waiting at most `timeout_ms`
/// (< 0: the endpoint's `recv_timeout_ms`; 0: `-EAGAIN` unless it is
/// there; `ZCIO_TIMEOUT_INFINITE`: as long as it takes). A handle still
/// empty then gives `-ETIMEDOUT` (or `-EAGAIN`) and may be waited on
/// again; one already collected gives `-EINVAL`. Received descriptors are
/// yours to close. Also `-EPIPE` (the partner is gone, or the endpoint was
/// closed or freed), `-EPROTO`.
///
/// # Safety
/// `h` is NULL or a live receive handle; `out` is NULL or valid for
/// writing a `struct zcio_envelope`.
#[no_mangle]
pub unsafe extern "C" fn zcio_recv_handle_wait(
    h: *const zcio_recv_handle,
    timeout_ms: c_int,
    out: *mut zcio_envelope,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(h) = (unsafe { h.as_ref() }) else {
            return einval("zcio_recv_handle_wait: handle is NULL");
        };
        if out.is_null() {
            return einval("zcio_recv_handle_wait: out is NULL");
        }
        let r = match Timeout::from_ms(timeout_ms) {
            Timeout::Default => h.h.wait(),
            Timeout::No => {
                // Read before taking: ready then and nothing to take means
                // collected already.
                let ready = h.h.is_ready();
                match h.h.try_take() {
                    Some(r) => r,
                    None if ready => Err(ProxyError::Taken),
                    None => Err(ProxyError::WouldBlock),
                }
            }
            Timeout::For(d) => h.h.wait_timeout(d),
        };
        match r {
            Ok(env) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(envelope_out(env)) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// Free the handle (NULL is ignored). A handle not yet filled is
/// withdrawn; a message that filled it and was never collected goes back
/// to the front of the endpoint's receive queue (the next receive gets
/// it).
///
/// # Safety
/// `h` is NULL or a live receive handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_recv_handle_free(h: *mut zcio_recv_handle) {
    guard(|| {
        if !h.is_null() {
            // SAFETY: a live handle from `zcio_proxy_endpoint_post` or
            // `_call`, given up here.
            drop(unsafe { Box::from_raw(h) });
        }
    })
}
