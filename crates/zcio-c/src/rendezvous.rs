//! The rendezvous (Rust's `zcio::rendezvous`): synchronous, unbuffered
//! messages of a label, up to 8 words and up to `ZCIO_ENVELOPE_MAX_FDS`
//! descriptors between two processes. `zcio_rendezvous_listen` /
//! `zcio_rendezvous_accept` / `zcio_rendezvous_connect` make the
//! endpoints; `zcio_rendezvous_send`, `_recv`, `_call`, `_recv_any` and
//! `_reply_and_recv` move `struct zcio_envelope`s; the doorbell calls
//! drive an endpoint from an event loop.

use std::ffi::{c_char, c_int, CString};
use std::os::fd::{AsRawFd, BorrowedFd, IntoRawFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Duration;

use zcio::rendezvous::{
    Envelope, Rendezvous, RendezvousCallError, RendezvousConfig, RendezvousListener,
    RendezvousRecvError, RendezvousSendError, RendezvousStats,
};

use crate::abi::{put, put_config, take_config};
use crate::chan::path_arg;
use crate::cred::{access_arg, zcio_access, zcio_peer_cred};
use crate::error::{einval, fail, fail_msg, guard};
use crate::{bound_ms, ms_of, Timeout};

/// Data words one `struct zcio_envelope` carries at most (Rust's
/// `Envelope::WORDS`).
pub const ZCIO_ENVELOPE_WORDS: usize = 8;

/// Descriptors one `struct zcio_envelope` carries at most (Rust's
/// `Envelope::MAX_FDS`).
pub const ZCIO_ENVELOPE_MAX_FDS: usize = 16;

const _: () = assert!(ZCIO_ENVELOPE_WORDS == Envelope::WORDS);
const _: () = assert!(ZCIO_ENVELOPE_MAX_FDS == Envelope::MAX_FDS);

/// A rendezvous message: a label, `nwords` data words and `nfds` file
/// descriptors.
///
/// Sending (`zcio_rendezvous_send`, `_call`, `_reply_and_recv`,
/// `zcio_proxy_endpoint_send`, `_call`): the library reads `label`, the
/// first `nwords` words and the first `nfds` descriptors; the receiver gets
/// its own duplicates of the descriptors, and yours stay yours (close them
/// when you no longer need them). `nwords` > `ZCIO_ENVELOPE_WORDS` or
/// `nfds` > `ZCIO_ENVELOPE_MAX_FDS` is `-EMSGSIZE`; a descriptor that is not
/// open is `-EBADF`. Nothing is sent then.
///
/// Receiving: the library fills the whole struct. The `nfds` descriptors
/// received are new descriptors of this process (close-on-exec set) and
/// belong to you: close each one when done, or they leak. The unused
/// words are 0 and the unused descriptors -1.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_envelope {
    /// Caller-defined label (an operation code, say).
    pub label: u64,
    /// The data words; the first `nwords` are the message.
    pub words: [u64; ZCIO_ENVELOPE_WORDS],
    /// How many of `words` the message carries (0..=ZCIO_ENVELOPE_WORDS).
    pub nwords: usize,
    /// The descriptors; the first `nfds` are the message's.
    pub fds: [c_int; ZCIO_ENVELOPE_MAX_FDS],
    /// How many of `fds` the message carries (0..=ZCIO_ENVELOPE_MAX_FDS).
    pub nfds: usize,
}

/// A listener of rendezvous connections on a Unix socket path (opaque).
/// Thread-safe.
pub struct zcio_rendezvous_listener {
    l: RendezvousListener,
    path: CString,
}

/// One end of a rendezvous connection (opaque). Every call may be made
/// from several threads at once (sends of one endpoint take turns, as do
/// its receives).
pub struct zcio_rendezvous {
    pub(crate) ep: Rendezvous,
}

/// The bounds of a rendezvous endpoint's default waits, in milliseconds,
/// for `zcio_rendezvous_listen` (every endpoint the listener accepts) and
/// `zcio_rendezvous_connect`. Fill it with `zcio_rendezvous_config_init`
/// (the defaults), then change what you need. Each bound is > 0, or
/// `ZCIO_TIMEOUT_INFINITE` for none (only for peers you trust).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_rendezvous_config {
    /// `sizeof` the caller's struct, set by `zcio_rendezvous_config_init`; leave it as
    /// it set it (docs/c.md, "The ABI").
    pub size: usize,
    /// What a send waits for the partner to take the message with
    /// `timeout_ms` < 0: `zcio_rendezvous_send`, the send half of
    /// `zcio_rendezvous_call` and `_reply_and_recv`, and a proxy
    /// endpoint's deliveries and `zcio_ticket_wait` (default 10 000: 10 s).
    pub send_timeout_ms: c_int,
    /// What a receive waits with `timeout_ms` < 0: `zcio_rendezvous_recv`,
    /// `_recv_any` (the shortest of the endpoints'), the receive half of
    /// `_call` and `_reply_and_recv`, `zcio_proxy_endpoint_recv` and
    /// `zcio_recv_handle_wait` (default 3 600 000: one hour).
    pub recv_timeout_ms: c_int,
    /// What `zcio_rendezvous_accept` waits for a connection with
    /// `timeout_ms` < 0 (a listener's bound; default 3 600 000: one hour).
    pub accept_timeout_ms: c_int,
}

/// Counters of a rendezvous endpoint or listener
/// (`zcio_rendezvous_get_stats`, `zcio_rendezvous_listener_get_stats`):
/// what its entry in the registry of live objects shows (`zcio ls`, `zcio
/// stat`). Fields may be appended; the calls write only as many bytes as
/// the caller's struct has.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_rendezvous_stats {
    /// Endpoints connected now (a listener: those it accepted that still
    /// live; an endpoint: 1, its partner, until it hangs up or ends).
    pub peers: u64,
    /// Endpoints accepted since the listener was bound (0 for an endpoint).
    pub accepted: u64,
    /// Messages sent (taken by the partner).
    pub sent_messages: u64,
    /// Bytes of those messages (label and words, 8 bytes each).
    pub sent_bytes: u64,
    /// Messages received.
    pub received_messages: u64,
    /// Bytes of those messages.
    pub received_bytes: u64,
    /// Descriptors passed in messages, either way.
    pub descriptors: u64,
    /// Operations that timed out.
    pub timed_out: u64,
    /// Operations that found the partner gone.
    pub disconnected: u64,
    /// Malformed messages or slot states received (rejected).
    pub malformed: u64,
}

/// The C form of `d`.
fn rendezvous_config_of(d: &RendezvousConfig) -> zcio_rendezvous_config {
    zcio_rendezvous_config {
        size: std::mem::size_of::<zcio_rendezvous_config>(),
        send_timeout_ms: ms_of(d.send_timeout),
        recv_timeout_ms: ms_of(d.recv_timeout),
        accept_timeout_ms: ms_of(d.accept_timeout),
    }
}

/// Fill `*cfg` with the defaults: send 10 s, receive one hour, accept one
/// hour.
///
/// Records `size` in `cfg->size` and writes at most `size` bytes (the
/// header's `zcio_rendezvous_config_init(cfg)` passes `sizeof *(cfg)`). Returns 0 or
/// `-EINVAL` (NULL, a size out of range).
///
/// # Safety
/// `cfg` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_config_init_sized(
    cfg: *mut zcio_rendezvous_config,
    size: usize,
) -> c_int {
    guard(|| {
        let c = rendezvous_config_of(&RendezvousConfig::default());
        // SAFETY: the caller's contract.
        unsafe { put_config("zcio_rendezvous_config_init", &c, cfg, size) }
    })
}

/// The Rust configuration of `cfg` (NULL: the defaults).
///
/// # Safety
/// `cfg` is NULL or valid for reading `cfg->size` bytes.
unsafe fn config_arg(cfg: *const zcio_rendezvous_config) -> Result<RendezvousConfig, c_int> {
    let mut out = RendezvousConfig::default();
    if !cfg.is_null() {
        // SAFETY: the caller's contract.
        let c = unsafe { take_config("zcio_rendezvous_config", cfg, rendezvous_config_of(&out)) }?;
        out.send_timeout = bound_ms(c.send_timeout_ms, "send_timeout_ms")?;
        out.recv_timeout = bound_ms(c.recv_timeout_ms, "recv_timeout_ms")?;
        out.accept_timeout = bound_ms(c.accept_timeout_ms, "accept_timeout_ms")?;
    }
    Ok(out)
}

/// Listen for rendezvous connections on the Unix socket `path` (a stale
/// socket file of a dead listener is replaced; a live one is
/// `-EADDRINUSE`). `cfg` (NULL: the defaults) gives `zcio_rendezvous_accept`
/// its bound and every accepted endpoint its bounds. `access` (NULL: only
/// processes of this effective uid) says who may connect. Stores the
/// handle in `*out` (free it with `zcio_rendezvous_listener_close`, which
/// removes the socket file). Returns 0 or a negative errno: `-EINVAL` (NULL
/// or empty path, a bad bound, an access list that admits nobody),
/// `-ENOENT` (the directory does not exist), `-EACCES`, `-ENAMETOOLONG`,
/// `-EADDRINUSE` …; `zcio_last_error` names the path.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `cfg` is NULL or valid for
/// reading `cfg->size` bytes (`zcio_rendezvous_config_init` set it); `access` is NULL or a
/// readable `struct zcio_access` whose arrays hold their counts; `out` is
/// NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_listen(
    path: *const c_char,
    cfg: *const zcio_rendezvous_config,
    access: *const zcio_access,
    out: *mut *mut zcio_rendezvous_listener,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_rendezvous_listen: out is NULL");
        }
        let (path, cfg, access) =
            // SAFETY: the caller's contract (each argument as documented).
            match unsafe { (path_arg(path), config_arg(cfg), access_arg(access)) } {
                (Ok(p), Ok(c), Ok(a)) => (p, c, a),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return e,
            };
        match RendezvousListener::bind_with(path, access) {
            Ok(l) => {
                let path = CString::new(l.path().as_os_str().as_bytes()).unwrap_or_default();
                let h = zcio_rendezvous_listener {
                    l: l.with_config(cfg),
                    path,
                };
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(h))) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// The listener behind `l`.
///
/// # Safety
/// `l` is NULL or a live listener handle.
unsafe fn listener<'a>(
    l: *const zcio_rendezvous_listener,
    what: &str,
) -> Result<&'a zcio_rendezvous_listener, c_int> {
    // SAFETY: the caller's contract.
    unsafe { l.as_ref() }.ok_or_else(|| einval(format_args!("{what}: listener is NULL")))
}

/// Accept one rendezvous connection, waiting at most `timeout_ms` for it
/// (< 0: the listener's `accept_timeout_ms`, one hour unless set; 0:
/// `-EAGAIN` unless a connection is pending; `ZCIO_TIMEOUT_INFINITE`: as
/// long as it takes). Stores the endpoint in `*out` (free it with
/// `zcio_rendezvous_close`). A refused or broken handshake (the handshake
/// itself takes at most 5 s) is an error and the listener stays usable:
/// `-EACCES` (the access list refused the caller), `-EPROTO`. Also
/// `-EAGAIN`, `-ETIMEDOUT`, or a negative errno.
///
/// # Safety
/// `l` is NULL or a live listener; `out` is NULL or valid for writing a
/// pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_accept(
    l: *mut zcio_rendezvous_listener,
    timeout_ms: c_int,
    out: *mut *mut zcio_rendezvous,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = match unsafe { listener(l, "zcio_rendezvous_accept") } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if out.is_null() {
            return einval("zcio_rendezvous_accept: out is NULL");
        }
        let t = Timeout::from_ms(timeout_ms);
        let r = match t {
            Timeout::Default => l.l.accept(),
            Timeout::No => l.l.accept_timeout(Duration::ZERO),
            Timeout::For(d) => l.l.accept_timeout(d),
        };
        match r {
            Ok(ep) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(zcio_rendezvous { ep }))) };
                0
            }
            Err(zcio::ConnectError::TimedOut) if t == Timeout::No => -libc::EAGAIN,
            Err(e) => fail(e),
        }
    })
}

/// The socket path the listener is bound to (as given to
/// `zcio_rendezvous_listen`). The string belongs to the listener and stays
/// valid until `zcio_rendezvous_listener_close`. NULL for a NULL handle.
///
/// # Safety
/// `l` is NULL or a live listener.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_listener_path(
    l: *const zcio_rendezvous_listener,
) -> *const c_char {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { l.as_ref() } {
            Some(l) => l.path.as_ptr(),
            None => std::ptr::null(),
        }
    })
}

/// Write `s` into `out` as a `struct zcio_rendezvous_stats` of at most
/// `size` bytes (`abi::put`).
///
/// # Safety
/// `out` is NULL or valid for writing `size` bytes.
unsafe fn write_stats(
    call: &str,
    s: RendezvousStats,
    out: *mut zcio_rendezvous_stats,
    size: usize,
) -> c_int {
    let s = zcio_rendezvous_stats {
        peers: s.peers,
        accepted: s.accepted,
        sent_messages: s.sent_messages,
        sent_bytes: s.sent_bytes,
        received_messages: s.received_messages,
        received_bytes: s.received_bytes,
        descriptors: s.descriptors,
        timed_out: s.timed_out,
        disconnected: s.disconnected,
        malformed: s.malformed,
    };
    // SAFETY: the caller's contract.
    unsafe { put(call, &s, out, size) }
}

/// Store the listener's counters in `*out` (`peers`: endpoints it
/// accepted that are still connected; `accepted`; the traffic counters
/// are each endpoint's own), writing at most `size` bytes (pass
/// `sizeof(struct zcio_rendezvous_stats)`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `l` is NULL or a live listener; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_listener_get_stats(
    l: *const zcio_rendezvous_listener,
    out: *mut zcio_rendezvous_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = match unsafe { listener(l, "zcio_rendezvous_listener_get_stats") } {
            Ok(l) => l,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        unsafe { write_stats("zcio_rendezvous_listener_get_stats", l.l.stats(), out, size) }
    })
}

/// Stop listening and free the handle; the socket file is removed.
/// Endpoints already accepted are not affected. NULL is ignored.
///
/// # Safety
/// `l` is NULL or a live listener, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_listener_close(l: *mut zcio_rendezvous_listener) {
    guard(|| {
        if !l.is_null() {
            // SAFETY: a live handle from `zcio_rendezvous_listen`, given up
            // here.
            drop(unsafe { Box::from_raw(l) });
        }
    })
}

/// Connect to the rendezvous listener at `path` (no retries: nobody
/// listening is `-ENOENT` / `-ECONNREFUSED`; the handshake waits at most
/// 5 s). `cfg` (NULL: the defaults) gives the endpoint its bounds
/// (`accept_timeout_ms` is not used). Stores the endpoint in `*out` (free
/// it with `zcio_rendezvous_close`). Returns 0, `-ENOENT`,
/// `-ECONNREFUSED`, `-EACCES` (refused by the listener's access list),
/// `-ETIMEDOUT`, `-EPROTO`, `-EINVAL` (NULL or empty path, a bad bound), or
/// a negative errno.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `cfg` is NULL or valid for
/// reading `cfg->size` bytes (`zcio_rendezvous_config_init` set it); `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_connect(
    path: *const c_char,
    cfg: *const zcio_rendezvous_config,
    out: *mut *mut zcio_rendezvous,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_rendezvous_connect: out is NULL");
        }
        // SAFETY: the caller's contract.
        let (path, cfg) = match unsafe { (path_arg(path), config_arg(cfg)) } {
            (Ok(p), Ok(c)) => (p, c),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        match Rendezvous::connect(path) {
            Ok(ep) => {
                let h = zcio_rendezvous {
                    ep: ep.with_config(cfg),
                };
                // SAFETY: non-NULL and writable (contract).
                unsafe { out.write(Box::into_raw(Box::new(h))) };
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// The endpoint behind `ep`.
///
/// # Safety
/// `ep` is NULL or a live endpoint handle.
pub(crate) unsafe fn endpoint<'a>(
    ep: *const zcio_rendezvous,
    what: &str,
) -> Result<&'a zcio_rendezvous, c_int> {
    // SAFETY: the caller's contract.
    unsafe { ep.as_ref() }.ok_or_else(|| einval(format_args!("{what}: endpoint is NULL")))
}

/// The Rust message of `*m`, with duplicates of its descriptors (the
/// caller's stay open and theirs).
///
/// # Safety
/// `m` is NULL or valid for reading a `struct zcio_envelope`.
pub(crate) unsafe fn envelope_arg(m: *const zcio_envelope, what: &str) -> Result<Envelope, c_int> {
    // SAFETY: the caller's contract.
    let Some(m) = (unsafe { m.as_ref() }) else {
        return Err(einval(format_args!("{what}: message is NULL")));
    };
    if m.nwords > ZCIO_ENVELOPE_WORDS || m.nfds > ZCIO_ENVELOPE_MAX_FDS {
        return Err(fail_msg(
            libc::EMSGSIZE,
            format_args!(
                "{what}: nwords {} / nfds {}: a message carries at most {ZCIO_ENVELOPE_WORDS} words and {ZCIO_ENVELOPE_MAX_FDS} descriptors",
                m.nwords, m.nfds
            ),
        ));
    }
    let mut env = Envelope::new(m.label, &m.words[..m.nwords]);
    for &fd in &m.fds[..m.nfds] {
        if fd < 0 {
            return Err(fail_msg(
                libc::EBADF,
                format_args!("{what}: descriptor {fd} is not valid"),
            ));
        }
        // SAFETY: only borrowed for the duplication; F_DUPFD_CLOEXEC on a
        // descriptor that is not open fails with EBADF, reported below.
        let b = unsafe { BorrowedFd::borrow_raw(fd) };
        match b.try_clone_to_owned() {
            Ok(d) => env.fds.push(d),
            Err(e) => {
                return Err(fail_msg(
                    e.raw_os_error().unwrap_or(libc::EBADF),
                    format_args!("{what}: cannot duplicate descriptor {fd} to send it: {e}"),
                ))
            }
        }
    }
    Ok(env)
}

/// `env` as a C message, its descriptors handed to the caller.
pub(crate) fn envelope_out(env: Envelope) -> zcio_envelope {
    let mut out = zcio_envelope {
        label: env.label,
        words: [0; ZCIO_ENVELOPE_WORDS],
        nwords: 0,
        fds: [-1; ZCIO_ENVELOPE_MAX_FDS],
        nfds: 0,
    };
    // The library never receives more than fits; should it, the rest is
    // closed (dropped) rather than leaked.
    let n = env.words.len().min(ZCIO_ENVELOPE_WORDS);
    out.words[..n].copy_from_slice(&env.words[..n]);
    out.nwords = n;
    for (slot, fd) in out.fds.iter_mut().zip(env.fds) {
        *slot = fd.into_raw_fd();
        out.nfds += 1;
    }
    out
}

/// Store a received message in `*out`.
///
/// # Safety
/// `out` is non-NULL and valid for writing a `struct zcio_envelope`.
unsafe fn deliver(env: Envelope, out: *mut zcio_envelope) {
    // SAFETY: the caller's contract.
    unsafe { out.write(envelope_out(env)) };
}

/// Send `*msg` to the partner and wait until it has *taken* the message
/// (an unbuffered rendezvous: when this returns 0 the partner has it), at
/// most `timeout_ms` (< 0: the endpoint's `send_timeout_ms`, 10 s unless
/// set; 0: only if the partner is waiting in a receive right now, else
/// `-EAGAIN`; `ZCIO_TIMEOUT_INFINITE`: as long as it takes). A send that
/// fails did not happen (a timed-out message is taken back). `*msg` and
/// its descriptors stay yours (see `struct zcio_envelope`). Returns 0,
/// `-EAGAIN`, `-ETIMEDOUT`, `-EPIPE` (the partner hung up or died),
/// `-EMSGSIZE`, `-EBADF`, `-EINVAL` (NULL), `-EPROTO` (the partner broke
/// the protocol), or a negative errno.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `msg` is NULL or valid for reading a
/// `struct zcio_envelope`.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_send(
    ep: *mut zcio_rendezvous,
    msg: *const zcio_envelope,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let (e, m) = match unsafe {
            (
                endpoint(ep, "zcio_rendezvous_send"),
                envelope_arg(msg, "zcio_rendezvous_send"),
            )
        } {
            (Ok(e), Ok(m)) => (e, m),
            (Err(c), _) | (_, Err(c)) => return c,
        };
        match send(&e.ep, &m, Timeout::from_ms(timeout_ms)) {
            Ok(()) => 0,
            Err(err) => fail(err),
        }
    })
}

fn send(ep: &Rendezvous, m: &Envelope, t: Timeout) -> Result<(), RendezvousSendError> {
    match t {
        Timeout::Default => ep.send(m),
        Timeout::No => ep.try_send(m),
        Timeout::For(d) => ep.send_timeout(m, d),
    }
}

fn recv(ep: &Rendezvous, t: Timeout) -> Result<Envelope, RendezvousRecvError> {
    match t {
        Timeout::Default => ep.recv(),
        Timeout::No => ep.try_recv(),
        Timeout::For(d) => ep.recv_timeout(d),
    }
}

/// Receive the partner's next message, waiting at most `timeout_ms` (< 0:
/// the endpoint's `recv_timeout_ms`, one hour unless set; 0: `-EAGAIN`
/// unless one is waiting; `ZCIO_TIMEOUT_INFINITE`: as long as it takes),
/// into `*out`. Received descriptors are yours to close (see `struct
/// zcio_envelope`). Returns 0, `-EAGAIN`, `-ETIMEDOUT`, `-EPIPE` (the
/// partner hung up or died: a partner killed mid-wait shows up here,
/// never as a hang), `-EPROTO`, `-EINVAL` (NULL), or a negative errno.
/// `*out` is written only on success.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or valid for writing a
/// `struct zcio_envelope`.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_recv(
    ep: *mut zcio_rendezvous,
    timeout_ms: c_int,
    out: *mut zcio_envelope,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep, "zcio_rendezvous_recv") } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out.is_null() {
            return einval("zcio_rendezvous_recv: out is NULL");
        }
        match recv(&e.ep, Timeout::from_ms(timeout_ms)) {
            Ok(env) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { deliver(env, out) };
                0
            }
            Err(err) => fail(err),
        }
    })
}

/// A call's or a reply's send and receive as `t` says: the default bounds
/// each half by its own bound, 0 tries both, a timeout bounds both
/// together.
fn call(ep: &Rendezvous, m: &Envelope, t: Timeout) -> Result<Envelope, RendezvousCallError> {
    match t {
        Timeout::Default => ep.call(m),
        Timeout::No => {
            ep.try_send(m)?;
            Ok(ep.try_recv()?)
        }
        Timeout::For(d) => ep.call_timeout(m, d),
    }
}

/// A remote call: send `*msg` to the partner, then wait for its answer
/// (its next message) into `*reply`. `timeout_ms` < 0 bounds the send by
/// the endpoint's `send_timeout_ms` and the wait for the answer by its
/// `recv_timeout_ms`; > 0 bounds both together; 0 sends only to a partner
/// already waiting and takes only an answer already there (`-EAGAIN`:
/// rarely useful). `msg` and `reply` may point to the same struct.
/// Errors as for `zcio_rendezvous_send` (the request was not delivered)
/// and `zcio_rendezvous_recv` (it was, but no answer came). `*reply` is
/// written only on success.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `msg` is NULL or valid for reading a
/// `struct zcio_envelope`; `reply` is NULL or valid for writing one.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_call(
    ep: *mut zcio_rendezvous,
    msg: *const zcio_envelope,
    timeout_ms: c_int,
    reply: *mut zcio_envelope,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let (e, m) = match unsafe {
            (
                endpoint(ep, "zcio_rendezvous_call"),
                envelope_arg(msg, "zcio_rendezvous_call"),
            )
        } {
            (Ok(e), Ok(m)) => (e, m),
            (Err(c), _) | (_, Err(c)) => return c,
        };
        if reply.is_null() {
            return einval("zcio_rendezvous_call: reply is NULL");
        }
        match call(&e.ep, &m, Timeout::from_ms(timeout_ms)) {
            Ok(env) => {
                // SAFETY: non-NULL and writable (contract); `msg` was read
                // in full above, so it may be the same struct.
                unsafe { deliver(env, reply) };
                0
            }
            Err(err) => fail(err),
        }
    })
}

/// The endpoints of a C array.
///
/// # Safety
/// `eps` is NULL or points to `n` pointers, each NULL or a live endpoint.
unsafe fn endpoints<'a>(
    eps: *const *mut zcio_rendezvous,
    n: usize,
    what: &str,
) -> Result<Vec<&'a Rendezvous>, c_int> {
    if eps.is_null() || n == 0 {
        return Err(einval(format_args!("{what}: endpoints is NULL or n is 0")));
    }
    if n > 4096 {
        return Err(einval(format_args!("{what}: {n} endpoints (at most 4096)")));
    }
    (0..n)
        .map(|i| {
            // SAFETY: `eps` points to `n` readable pointers (contract); `i < n`.
            let p = unsafe { eps.add(i).read() };
            // SAFETY: NULL or a live endpoint (contract).
            unsafe { endpoint(p, what) }.map(|e| &e.ep)
        })
        .collect()
}

/// The index (as a return code) of a message received from `eps[i]`.
fn index_code(i: usize) -> c_int {
    c_int::try_from(i).unwrap_or(c_int::MAX)
}

/// Open wait: receive the first message that any of the `n` endpoints
/// `eps` has (a server's loop over several partners), waiting at most
/// `timeout_ms` (< 0: the shortest `recv_timeout_ms` of the endpoints; 0:
/// `-EAGAIN` unless one is waiting; `ZCIO_TIMEOUT_INFINITE`: as long as
/// it takes), into `*out`. Returns the index in `eps` of the endpoint it
/// came from (>= 0), or `-EAGAIN`, `-ETIMEDOUT`, `-EPIPE` (every partner
/// hung up or died; one that did is skipped while others live: close
/// it), `-EPROTO`, `-EINVAL` (NULL array, n 0, a NULL endpoint). Received
/// descriptors are yours to close.
///
/// # Safety
/// `eps` is NULL or points to `n` pointers, each NULL or a live endpoint;
/// `out` is NULL or valid for writing a `struct zcio_envelope`.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_recv_any(
    eps: *const *mut zcio_rendezvous,
    n: usize,
    timeout_ms: c_int,
    out: *mut zcio_envelope,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let eps = match unsafe { endpoints(eps, n, "zcio_rendezvous_recv_any") } {
            Ok(v) => v,
            Err(c) => return c,
        };
        if out.is_null() {
            return einval("zcio_rendezvous_recv_any: out is NULL");
        }
        let r = match Timeout::from_ms(timeout_ms) {
            Timeout::Default => Rendezvous::recv_any(&eps),
            Timeout::No => Rendezvous::try_recv_any(&eps),
            Timeout::For(d) => Rendezvous::recv_any_timeout(&eps, d),
        };
        match r {
            Ok((i, env)) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { deliver(env, out) };
                index_code(i)
            }
            Err(err) => fail(err),
        }
    })
}

/// A server's step: send `*reply` to the partner of `to` (bounded by its
/// `send_timeout_ms` when `timeout_ms` < 0), then receive the next message
/// from any of the `n` endpoints `eps` into `*out`, as
/// `zcio_rendezvous_recv_any` (`to` is usually one of them). A positive
/// `timeout_ms` bounds both together; 0 tries both. `reply` and `out` may point to
/// the same struct. Returns the index in `eps` the message came from, or
/// the errors of `zcio_rendezvous_send` (the reply was not delivered) and
/// `zcio_rendezvous_recv_any` (it was).
///
/// # Safety
/// `to` is NULL or a live endpoint; `reply` is NULL or valid for reading a
/// `struct zcio_envelope`; `eps` is NULL or points to `n` pointers, each
/// NULL or a live endpoint; `out` is NULL or valid for writing a `struct
/// zcio_envelope`.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_reply_and_recv(
    to: *mut zcio_rendezvous,
    reply: *const zcio_envelope,
    eps: *const *mut zcio_rendezvous,
    n: usize,
    timeout_ms: c_int,
    out: *mut zcio_envelope,
) -> c_int {
    guard(|| {
        const WHAT: &str = "zcio_rendezvous_reply_and_recv";
        // SAFETY: the caller's contract.
        let (to, m, eps) = match unsafe {
            (
                endpoint(to, WHAT),
                envelope_arg(reply, WHAT),
                endpoints(eps, n, WHAT),
            )
        } {
            (Ok(t), Ok(m), Ok(v)) => (t, m, v),
            (Err(c), _, _) | (_, Err(c), _) | (_, _, Err(c)) => return c,
        };
        if out.is_null() {
            return einval("zcio_rendezvous_reply_and_recv: out is NULL");
        }
        let r = match Timeout::from_ms(timeout_ms) {
            Timeout::Default => to.ep.reply_and_recv(&m, &eps),
            Timeout::No => to
                .ep
                .try_send(&m)
                .map_err(RendezvousCallError::from)
                .and_then(|()| Ok(Rendezvous::try_recv_any(&eps)?)),
            Timeout::For(d) => to.ep.reply_and_recv_timeout(&m, &eps, d),
        };
        match r {
            Ok((i, env)) => {
                // SAFETY: non-NULL and writable (contract); `reply` was read
                // in full above.
                unsafe { deliver(env, out) };
                index_code(i)
            }
            Err(err) => fail(err),
        }
    })
}

/// Store the partner's kernel credentials in `*out` (`SO_PEERCRED`: who
/// connected, or whom we connected to; not from any message). Returns 0
/// or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or valid for writing a
/// `struct zcio_peer_cred`.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_peer(
    ep: *const zcio_rendezvous,
    out: *mut zcio_peer_cred,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep, "zcio_rendezvous_peer") } {
            Ok(e) => e,
            Err(c) => return c,
        };
        if out.is_null() {
            return einval("zcio_rendezvous_peer: out is NULL");
        }
        // SAFETY: non-NULL and writable (contract).
        unsafe { out.write(e.ep.peer().into()) };
        0
    })
}

/// Store the endpoint's counters in `*out`, writing at most `size` bytes
/// (pass `sizeof(struct zcio_rendezvous_stats)`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `out` is NULL or valid for writing
/// `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_get_stats(
    ep: *const zcio_rendezvous,
    out: *mut zcio_rendezvous_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep, "zcio_rendezvous_get_stats") } {
            Ok(e) => e,
            Err(c) => return c,
        };
        // SAFETY: the caller's contract.
        unsafe { write_stats("zcio_rendezvous_get_stats", e.ep.stats(), out, size) }
    })
}

/// Hang up now, keeping the handle: the partner's waits and this
/// endpoint's own (in any thread) end with `-EPIPE`. For a thread that
/// must stop another one blocked on this endpoint; then free it with
/// `zcio_rendezvous_close`. Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_hang_up(ep: *mut zcio_rendezvous) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { endpoint(ep, "zcio_rendezvous_hang_up") } {
            Ok(e) => {
                e.ep.hang_up();
                0
            }
            Err(c) => c,
        }
    })
}

/// Event loops: the endpoint's doorbell, a descriptor that polls readable
/// (`POLLIN`, epoll) when the partner rang it -- which it does only after
/// this endpoint said it is about to sleep
/// (`zcio_rendezvous_prepare_recv_sleep`) -- or when the partner hung up.
/// The first call switches the endpoint to bell mode for good (the
/// partner rings instead of waking a futex). The fd belongs to the
/// endpoint: do not close it or read from it. Returns the fd (>= 0) or
/// `-EINVAL`.
///
/// The receive loop, with the fd in your epoll set:
///  1. `zcio_rendezvous_recv(ep, 0, &m)`; done unless `-EAGAIN`;
///  2. `zcio_rendezvous_prepare_recv_sleep(ep)`: 0 -> go to 1;
///  3. wait until the fd is readable (epoll_wait);
///  4. `zcio_rendezvous_doorbell_rang(ep)`; go to 1.
///
/// # Safety
/// `ep` is NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_doorbell(ep: *mut zcio_rendezvous) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { endpoint(ep, "zcio_rendezvous_doorbell") } {
            Ok(e) => e.ep.doorbell().as_raw_fd(),
            Err(c) => c,
        }
    })
}

/// Event loops, step 2 of a receive: say "about to sleep until a message
/// comes". Returns 1 (sleep: wait for the doorbell), 0 (a message is
/// waiting: receive it instead of sleeping) or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_prepare_recv_sleep(ep: *mut zcio_rendezvous) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { endpoint(ep, "zcio_rendezvous_prepare_recv_sleep") } {
            Ok(e) => c_int::from(e.ep.prepare_recv_sleep()),
            Err(c) => c,
        }
    })
}

/// Event loops, step 4: after the doorbell polled readable, take the ring
/// off it. Returns 0, 1 when the doorbell has hung up (the partner is
/// gone: the next receive returns `-EPIPE` once everything it sent was
/// received; remove the fd from the epoll set), or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_doorbell_rang(ep: *mut zcio_rendezvous) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { endpoint(ep, "zcio_rendezvous_doorbell_rang") } {
            Ok(e) => c_int::from(e.ep.doorbell_rang()),
            Err(c) => c,
        }
    })
}

/// Event loops, a send in steps: put `*msg` in the slot for the partner
/// without waiting, and store the send's number in `*seq` for
/// `zcio_rendezvous_send_poll` and `zcio_rendezvous_send_cancel`. Every
/// begun send ends with `zcio_rendezvous_send_poll` returning 1 or with
/// `zcio_rendezvous_send_cancel`, before the next send of this endpoint.
/// `*msg` and its descriptors stay yours. Switches the endpoint to bell
/// mode, as `zcio_rendezvous_doorbell` does. Returns 0, or `-EAGAIN`
/// (another send of this endpoint is in flight), `-EMSGSIZE`, `-EBADF`,
/// `-EPIPE`, `-EPROTO`, `-EINVAL`: nothing was sent then.
///
/// The loop: `zcio_rendezvous_send_begin`; then `zcio_rendezvous_send_poll`
/// until it returns 1, waiting for the doorbell (and calling
/// `zcio_rendezvous_doorbell_rang`) whenever it returns 0.
///
/// # Safety
/// `ep` is NULL or a live endpoint; `msg` is NULL or valid for reading a
/// `struct zcio_envelope`; `seq` is NULL or valid for writing a `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_send_begin(
    ep: *mut zcio_rendezvous,
    msg: *const zcio_envelope,
    seq: *mut u64,
) -> c_int {
    guard(|| {
        const WHAT: &str = "zcio_rendezvous_send_begin";
        // SAFETY: the caller's contract.
        let (e, m) = match unsafe { (endpoint(ep, WHAT), envelope_arg(msg, WHAT)) } {
            (Ok(e), Ok(m)) => (e, m),
            (Err(c), _) | (_, Err(c)) => return c,
        };
        if seq.is_null() {
            return einval("zcio_rendezvous_send_begin: seq is NULL");
        }
        match e.ep.send_begin(&m) {
            Ok(n) => {
                // SAFETY: non-NULL and writable (contract).
                unsafe { seq.write(n) };
                0
            }
            Err(err) => fail(err),
        }
    })
}

/// Event loops: whether the partner took send `seq` (from
/// `zcio_rendezvous_send_begin`). Returns 1 (taken: the send is complete),
/// 0 (not yet: wait for the doorbell, then ask again), `-EPIPE` (the
/// partner is gone; the message was taken back, undelivered), `-EPROTO`,
/// or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_send_poll(ep: *mut zcio_rendezvous, seq: u64) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let e = match unsafe { endpoint(ep, "zcio_rendezvous_send_poll") } {
            Ok(e) => e,
            Err(c) => return c,
        };
        match e.ep.send_poll(seq) {
            Ok(taken) => c_int::from(taken),
            Err(err) => fail(err),
        }
    })
}

/// Event loops: give up on send `seq`. Returns 1 if the message was taken
/// back undelivered, 0 if the partner had already taken it (it was
/// delivered), or `-EINVAL`.
///
/// # Safety
/// `ep` is NULL or a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_send_cancel(ep: *mut zcio_rendezvous, seq: u64) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { endpoint(ep, "zcio_rendezvous_send_cancel") } {
            Ok(e) => c_int::from(e.ep.send_cancel(seq)),
            Err(c) => c,
        }
    })
}

/// Close the endpoint and free the handle (NULL is ignored): the partner's
/// waits end with `-EPIPE`. Descriptors received earlier stay yours.
///
/// # Safety
/// `ep` is NULL or a live endpoint, not used again afterwards (by any
/// thread).
#[no_mangle]
pub unsafe extern "C" fn zcio_rendezvous_close(ep: *mut zcio_rendezvous) {
    guard(|| {
        if !ep.is_null() {
            // SAFETY: a live handle from `zcio_rendezvous_accept` or
            // `_connect`, given up here.
            drop(unsafe { Box::from_raw(ep) });
        }
    })
}

/// The endpoint behind `ep`, taken over from its handle (freed).
///
/// # Safety
/// `ep` is a live, non-NULL endpoint handle that nothing uses any more.
pub(crate) unsafe fn take(ep: *mut zcio_rendezvous) -> Rendezvous {
    // SAFETY: the caller's contract.
    unsafe { Box::from_raw(ep) }.ep
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{FromRawFd, OwnedFd};

    #[test]
    fn a_descriptor_beyond_what_fits_is_closed_not_leaked() {
        let mut env = Envelope::new(1, &[1, 2]);
        for _ in 0..ZCIO_ENVELOPE_MAX_FDS + 1 {
            // SAFETY: a fresh pipe's descriptors, owned here.
            let mut p = [0; 2];
            // SAFETY: `p` holds two ints.
            assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
            // SAFETY: both are fresh descriptors owned by nothing else.
            unsafe {
                env.fds.push(OwnedFd::from_raw_fd(p[0]));
                libc::close(p[1]);
            }
        }
        let last = env.fds.last().unwrap().as_raw_fd();
        let c = envelope_out(env);
        assert_eq!((c.nwords, c.nfds), (2, ZCIO_ENVELOPE_MAX_FDS));
        // SAFETY: fcntl on a number; fails with EBADF when it is closed.
        assert_eq!(unsafe { libc::fcntl(last, libc::F_GETFD) }, -1);
        for fd in &c.fds[..c.nfds] {
            // SAFETY: ours, handed out by `envelope_out`.
            unsafe { libc::close(*fd) };
        }
    }
}
