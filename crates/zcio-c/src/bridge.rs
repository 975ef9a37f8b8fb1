//! The Zenoh bridge as library calls (`zcio_zenoh::Exporter` /
//! `Importer`), built only with the `bridge` feature (`scripts/build-c
//! --bridge`; the header section is under `#ifdef ZCIO_BRIDGE`):
//! `zcio_bridge_export_start`, `zcio_bridge_import_start`,
//! `zcio_bridge_endpoints`, `zcio_bridge_get_counters`,
//! `zcio_bridge_stop`, `zcio_bridge_wait`, `zcio_bridge_close`.
//!
//! Each bridge runs on a thread of its own with a tokio runtime, as the
//! `zcio bridge` command does; the handle talks to it through a stop
//! signal and the end status.

use std::ffi::{c_char, c_int};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zcio::ring::{Layout, Start};
use zcio_zenoh::{
    BridgeError, Counters, ExportEnd, ExportOptions, Exporter, ImportEnd, ImportOptions, Importer,
    SessionOptions, Sink, Source, DEFAULT_MAX_SAMPLE,
};

use crate::abi::{put as put_sized, take};
use crate::error::{einval, fail_msg, guard};
use crate::ring_create::zcio_ring_options;
use crate::{ssize_t, str_arg, Timeout, ZCIO_TIMEOUT_INFINITE};

/// `zcio_bridge_wait`'s status: the stream ended cleanly (the producer
/// closed it; an import delivered everything before the end).
pub const ZCIO_BRIDGE_END_OF_STREAM: c_int = 0;
/// `zcio_bridge_wait`'s status: stopped by `zcio_bridge_stop` before the
/// end of the stream (an import closes its ring with an error then: its
/// readers see the stream cut).
pub const ZCIO_BRIDGE_STOPPED: c_int = 1;

/// How a bridge connects (its Zenoh session) and runs. Fill it with
/// `zcio_bridge_session_init`, then set what you need. Fields may be
/// appended; the calls take `sizeof` the caller's struct. The strings and
/// arrays are read during the start call only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_bridge_session {
    /// Endpoints to listen on (`"tcp/127.0.0.1:0"`: a free port, see
    /// `zcio_bridge_endpoints`), `n_listen` of them (NULL with 0: none).
    pub listen: *const *const c_char,
    /// How many `listen` has.
    pub n_listen: usize,
    /// Endpoints to connect to (`"tcp/10.0.0.2:7447"`), `n_connect` of
    /// them.
    pub connect: *const *const c_char,
    /// How many `connect` has.
    pub n_connect: usize,
    /// A Zenoh configuration file (JSON5: TLS, access control) or NULL;
    /// `listen`/`connect` add to it.
    pub config_file: *const c_char,
    /// Nonzero: allow multicast scouting (default 0: name the peers).
    pub scout: c_int,
    /// Export: start reading the source at once (default 0: wait for a
    /// first subscriber of the key).
    pub no_wait: c_int,
    /// Export: copy every ring block out before publishing it (default 0:
    /// large blocks of block and srp rings are lent from the ring's pages).
    pub copy: c_int,
    /// Export: start at the oldest block the ring holds (default 0: the
    /// newest).
    pub from_oldest: c_int,
    /// Export: samples kept for late importers (default 0: none). Import:
    /// nonzero asks the exporter's cache for them first.
    pub history: usize,
    /// Largest sample sent or accepted, in bytes (default 64 MiB, at most
    /// 1 GiB); larger ones are dropped and counted.
    pub max_sample: usize,
    /// Import: milliseconds to wait for more samples once the exporter's
    /// liveliness token is gone (default 1000).
    pub grace_ms: c_int,
    /// Import: fail (`-ETIMEDOUT`) if no Zenoh peer is reached within this
    /// many milliseconds (default `ZCIO_TIMEOUT_INFINITE`: keep retrying).
    pub connect_timeout_ms: c_int,
    /// Import: nonzero keeps a ring sink the import created when it ends
    /// (default 0: it is removed then; readers that have it open read on).
    pub keep: c_int,
    /// Import into a ring that does not exist: how to create it (NULL: a
    /// variable ring of 16 MiB, mode 0600). Read as `ring_options_size`
    /// bytes.
    pub ring_options: *const zcio_ring_options,
    /// `sizeof(struct zcio_ring_options)`.
    pub ring_options_size: usize,
}

impl Default for zcio_bridge_session {
    fn default() -> Self {
        Self {
            listen: std::ptr::null(),
            n_listen: 0,
            connect: std::ptr::null(),
            n_connect: 0,
            config_file: std::ptr::null(),
            scout: 0,
            no_wait: 0,
            copy: 0,
            from_oldest: 0,
            history: 0,
            max_sample: DEFAULT_MAX_SAMPLE,
            grace_ms: zcio_zenoh::DEFAULT_GRACE.as_millis() as c_int,
            connect_timeout_ms: ZCIO_TIMEOUT_INFINITE,
            keep: 0,
            ring_options: std::ptr::null(),
            ring_options_size: 0,
        }
    }
}

/// Fill `*s` with the defaults, writing at most `size` bytes (pass
/// `sizeof(struct zcio_bridge_session)`). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `s` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_bridge_session_init(
    s: *mut zcio_bridge_session,
    size: usize,
) -> c_int {
    guard(|| {
        let d = zcio_bridge_session::default();
        // SAFETY: the caller's contract.
        unsafe { put_sized("zcio_bridge_session_init", &d, s, size) }
    })
}

/// The live counters of a bridge (`zcio_bridge_get_counters`). Fields may
/// be appended.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_bridge_counters {
    /// Samples published (export) or delivered to the sink (import).
    pub samples: u64,
    /// Payload bytes of those samples.
    pub bytes: u64,
    /// Samples dropped for exceeding the size limit.
    pub oversize: u64,
    /// Samples dropped for malformed zcio metadata.
    pub malformed: u64,
    /// Gaps seen in the stream's positions (import).
    pub gaps: u64,
    /// Positions missing in those gaps.
    pub lost: u64,
    /// Samples dropped as already delivered.
    pub duplicates: u64,
    /// Samples of another stream, or a plain publisher's deletes.
    pub ignored: u64,
    /// Ring blocks overwritten while the exporter copied them.
    pub lapped: u64,
    /// Channels accepted (listener export) or connected (channel import).
    pub connections: u64,
}

/// What the bridge thread reports.
#[derive(Default)]
struct State {
    /// Set once the local end is open and the declarations are made.
    ready: Option<(Arc<Counters>, String)>,
    /// The end: the status of `zcio_bridge_wait` and the error's text.
    end: Option<(c_int, String)>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }

    /// Wait until `done` holds, at most until `deadline` (`None`: for
    /// good); whether it holds.
    fn wait_for(&self, deadline: Option<Instant>, done: impl Fn(&State) -> bool) -> bool {
        let mut st = self.lock();
        loop {
            if done(&st) {
                return true;
            }
            st = match deadline {
                None => self.changed.wait(st).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    self.changed
                        .wait_timeout(st, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }
}

/// A running bridge (opaque; thread-safe).
pub struct zcio_bridge {
    shared: Arc<Shared>,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// The code and text of a bridge error.
fn code_of(e: &BridgeError) -> c_int {
    let kind = e.kind();
    if let Some(errno) = kind.errno() {
        return -errno.raw_os_error();
    }
    match kind {
        zcio::ErrorKind::ProducerFailed => -crate::error::ZCIO_EPRODFAIL,
        zcio::ErrorKind::NotARing => -crate::error::ZCIO_EBADRING,
        zcio::ErrorKind::PeerFault => -crate::error::ZCIO_ECORRUPT,
        _ => -libc::EIO,
    }
}

enum Job {
    Export(Source, String, ExportOptions),
    Import(String, Sink, ImportOptions),
}

/// Read the caller's session struct into options.
///
/// # Safety
/// `s` is valid for reading `size` bytes, its pointers as documented on
/// `zcio_bridge_session`.
unsafe fn session_of(
    s: *const zcio_bridge_session,
    size: usize,
) -> Result<(zcio_bridge_session, SessionOptions), c_int> {
    let mut c = zcio_bridge_session::default();
    if !s.is_null() {
        // SAFETY: readable for `size` bytes (contract); every field accepts
        // any bit pattern (integers and raw pointers).
        c = unsafe { take("zcio_bridge_session", s, size, c) }?;
    }
    // Each array holds `n` NUL-terminated strings (the caller's contract).
    let strings = |p: *const *const c_char, n: usize, what: &str| -> Result<Vec<String>, c_int> {
        if n == 0 {
            return Ok(Vec::new());
        }
        if p.is_null() || n > 64 {
            return Err(einval(format_args!(
                "zcio_bridge: {what} is NULL or has more than 64 entries"
            )));
        }
        // SAFETY: `p` is readable for `n` pointers (contract).
        let ptrs = unsafe { std::slice::from_raw_parts(p, n) };
        ptrs.iter()
            // SAFETY: each is a NUL-terminated string (contract).
            .map(|&e| unsafe { str_arg(e, what) }.map(str::to_owned))
            .collect()
    };
    let listen = strings(c.listen, c.n_listen, "listen")?;
    let connect = strings(c.connect, c.n_connect, "connect")?;
    let config_file = if c.config_file.is_null() {
        None
    } else {
        // SAFETY: a NUL-terminated string (contract).
        Some(unsafe { str_arg(c.config_file, "config_file") }?.into())
    };
    let o = SessionOptions {
        config_file,
        listen,
        connect,
        scout: c.scout != 0,
        max_sample: c.max_sample,
    };
    if let Err(e) = o.zenoh_config() {
        return Err(fail_msg(libc::EINVAL, format_args!("zcio_bridge: {e}")));
    }
    Ok((c, o))
}

fn start(opts: SessionOptions, job: Job) -> Result<Box<zcio_bridge>, c_int> {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        changed: Condvar::new(),
    });
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let sh = shared.clone();
    let thread = std::thread::Builder::new()
        .name("zcio-bridge".into())
        .spawn(move || {
            let end = run(opts, job, stop_rx, &sh);
            sh.set(|s| s.end = Some(end));
        })
        .map_err(|e| {
            fail_msg(
                e.raw_os_error().unwrap_or(libc::EAGAIN),
                format_args!("zcio_bridge: cannot start its thread: {e}"),
            )
        })?;
    let b = Box::new(zcio_bridge {
        shared,
        stop: Mutex::new(Some(stop_tx)),
        thread: Mutex::new(Some(thread)),
    });
    // Until the local end is open and declared, or the start failed.
    b.shared
        .wait_for(None, |s| s.ready.is_some() || s.end.is_some());
    let failed = {
        let st = b.shared.lock();
        match (&st.ready, &st.end) {
            (None, Some((code, why))) => Some((*code, why.clone())),
            _ => None,
        }
    };
    if let Some((code, why)) = failed {
        if let Some(t) = b.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
        return Err(if code < 0 {
            fail_msg(-code, why)
        } else {
            fail_msg(libc::EIO, "zcio_bridge: it ended before it started")
        });
    }
    Ok(b)
}

/// The bridge thread: a runtime, the session, the exporter or importer.
fn run(
    opts: SessionOptions,
    job: Job,
    stop: tokio::sync::oneshot::Receiver<()>,
    sh: &Arc<Shared>,
) -> (c_int, String) {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return (
                -libc::EAGAIN,
                format!("zcio_bridge: cannot start its runtime: {e}"),
            )
        }
    };
    let stop = async move {
        // A dropped sender (the handle closed) stops it too.
        let _ = stop.await;
    };
    let res = rt.block_on(async move {
        let session = opts.open().await?;
        let endpoints = session
            .info()
            .locators()
            .await
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ");
        let end = match job {
            Job::Export(source, key, o) => {
                let ex = Exporter::new(&session, source, &key, o)?;
                let c = ex.counters();
                ex.run(stop, || sh.set(|s| s.ready = Some((c, endpoints))))
                    .await
                    .map(|e| e == ExportEnd::EndOfStream)
            }
            Job::Import(key, sink, o) => {
                let im = Importer::new(&session, &key, sink, o)?;
                let c = im.counters();
                im.run(stop, || sh.set(|s| s.ready = Some((c, endpoints))))
                    .await
                    .map(|e| e == ImportEnd::EndOfStream)
            }
        };
        // Sends what Zenoh still queues (an end of stream among it).
        let _ = session.close().await;
        end
    });
    match res {
        Ok(true) => (ZCIO_BRIDGE_END_OF_STREAM, String::new()),
        Ok(false) => (ZCIO_BRIDGE_STOPPED, String::new()),
        Err(e) => (code_of(&e), format!("zcio_bridge: {e}")),
    }
}

/// Store a started bridge in `*out`.
///
/// # Safety
/// `out` is non-NULL and valid for writing a pointer.
unsafe fn put(out: *mut *mut zcio_bridge, r: Result<Box<zcio_bridge>, c_int>) -> c_int {
    match r {
        Ok(b) => {
            // SAFETY: the caller's contract.
            unsafe { out.write(Box::into_raw(b)) };
            0
        }
        Err(e) => e,
    }
}

/// Export a local source to Zenoh key `key` (no wildcards): `source` is
/// `"ring:NAME"` (every block of a named ring, from the newest unless
/// `from_oldest`; ends when its producer closes it) or `"listen:PATH"`
/// (every message of every channel that connects to a listener there).
/// `session` says how to connect (NULL: the defaults, which listen and
/// connect nowhere), read as `session_size` bytes.
///
/// Returns once the source is open and the publisher declared (not once
/// a peer is reached: Zenoh connects in the background), with a new
/// handle in `*out`: the bridge runs on a thread of its own until the
/// stream ends or `zcio_bridge_stop`; free it with `zcio_bridge_close`.
/// Errors: `-EINVAL` (bad spec, key or session field; `zcio_last_error`
/// says which), the ring's errors (`-ENOENT` …), `-EIO` (Zenoh).
///
/// # Safety
/// `source` and `key` are NULL or NUL-terminated strings; `session` is
/// NULL or valid for reading `session_size` bytes (and its strings as
/// documented there); `out` is NULL or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_bridge_export_start(
    source: *const c_char,
    key: *const c_char,
    session: *const zcio_bridge_session,
    session_size: usize,
    out: *mut *mut zcio_bridge,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_bridge_export_start: out is NULL");
        }
        // SAFETY: the caller's contract.
        let (source, key) = match unsafe { (str_arg(source, "source"), str_arg(key, "key")) } {
            (Ok(s), Ok(k)) => (s, k),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        // SAFETY: the caller's contract.
        let (c, opts) = match unsafe { session_of(session, session_size) } {
            Ok(x) => x,
            Err(e) => return e,
        };
        let mut source = match Source::parse(source) {
            Ok(s) => s,
            Err(e) => return fail_msg(libc::EINVAL, e),
        };
        if let Source::Ring { start, .. } = &mut source {
            if c.from_oldest != 0 {
                *start = Start::Oldest;
            }
        }
        if let Err(e) = zcio_zenoh::check_key(key, true) {
            return fail_msg(libc::EINVAL, e);
        }
        let o = ExportOptions {
            history: c.history,
            max_sample: c.max_sample,
            wait_for_subscriber: c.no_wait == 0,
            copy: c.copy != 0,
            ..ExportOptions::default()
        };
        let r = start(opts, Job::Export(source, key.to_owned(), o));
        // SAFETY: `out` is non-NULL and writable (contract).
        unsafe { put(out, r) }
    })
}

/// Import Zenoh key expression `key` (wildcards allowed) into a local
/// sink: `sink` is `"ring:NAME"` (created from `session->ring_options`
/// if it does not exist, and removed when the import ends unless
/// `keep`; the bridge is its producer; an existing ring must keep samples
/// apart: variable, slotted or descriptors) or `"connect:PATH"` (a
/// channel to a listener, one message per sample). Returns once the sink
/// is open and the subscriptions declared, with a new handle in `*out`.
/// The import ends with the remote stream: end of stream closes the
/// ring; a producer that failed or died, or an exporter that vanished
/// (`grace_ms` after its liveliness token went), closes it with an error
/// and ends the bridge with `-EPIPE` or `-ZCIO_EPRODFAIL`. Errors as for
/// `zcio_bridge_export_start`.
///
/// # Safety
/// As for `zcio_bridge_export_start`.
#[no_mangle]
pub unsafe extern "C" fn zcio_bridge_import_start(
    key: *const c_char,
    sink: *const c_char,
    session: *const zcio_bridge_session,
    session_size: usize,
    out: *mut *mut zcio_bridge,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_bridge_import_start: out is NULL");
        }
        // SAFETY: the caller's contract.
        let (key, sink) = match unsafe { (str_arg(key, "key"), str_arg(sink, "sink")) } {
            (Ok(k), Ok(s)) => (k, s),
            (Err(e), _) | (_, Err(e)) => return e,
        };
        // SAFETY: the caller's contract.
        let (c, opts) = match unsafe { session_of(session, session_size) } {
            Ok(x) => x,
            Err(e) => return e,
        };
        if let Err(e) = zcio_zenoh::check_key(key, false) {
            return fail_msg(libc::EINVAL, e);
        }
        let create = if c.ring_options.is_null() {
            zcio::ring::Options::new()
                .layout(Layout::Variable)
                .size(16 << 20)
        } else {
            // SAFETY: readable for `ring_options_size` bytes (contract);
            // the struct is integers only.
            let ro = match unsafe {
                take(
                    "zcio_bridge_session.ring_options",
                    c.ring_options,
                    c.ring_options_size,
                    zcio_ring_options::default(),
                )
            } {
                Ok(o) => o,
                Err(e) => return e,
            };
            match crate::ring_create::options(&ro) {
                Ok(o) => o,
                Err(e) => return e,
            }
        };
        let sink = match Sink::parse(sink, Some(create)) {
            Ok(s) => s,
            Err(e) => return fail_msg(libc::EINVAL, e),
        };
        let grace = match c.grace_ms {
            0.. => Duration::from_millis(c.grace_ms as u64),
            _ => return einval("zcio_bridge_import_start: grace_ms is negative"),
        };
        let connect_timeout = match Timeout::from_ms(c.connect_timeout_ms) {
            Timeout::For(d) if d != Duration::MAX => Some(d),
            Timeout::For(_) => None,
            _ => return einval(
                "zcio_bridge_import_start: connect_timeout_ms must be > 0 or ZCIO_TIMEOUT_INFINITE",
            ),
        };
        let o = ImportOptions {
            history: c.history != 0,
            grace,
            max_sample: c.max_sample,
            connect_timeout,
            keep: c.keep != 0,
            ..ImportOptions::default()
        };
        let r = start(opts, Job::Import(key.to_owned(), sink, o));
        // SAFETY: `out` is non-NULL and writable (contract).
        unsafe { put(out, r) }
    })
}

/// The bridge behind `b`, or `-EINVAL`.
///
/// # Safety
/// `b` is NULL or a live handle.
unsafe fn bridge<'a>(b: *const zcio_bridge) -> Result<&'a zcio_bridge, c_int> {
    // SAFETY: the caller's contract.
    unsafe { b.as_ref() }.ok_or_else(|| einval("bridge handle is NULL"))
}

/// The endpoints the bridge's session listens on (a port 0 resolved),
/// space-separated (`"tcp/127.0.0.1:40123"`), into `buf` like `snprintf`.
/// Returns their length (0: it listens nowhere) or `-EINVAL`.
///
/// # Safety
/// `b` is NULL or a live handle; `buf` is NULL with `size` 0, or valid for
/// writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_bridge_endpoints(
    b: *const zcio_bridge,
    buf: *mut c_char,
    size: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = match unsafe { bridge(b) } {
            Ok(b) => b,
            Err(e) => return e as ssize_t,
        };
        let eps = b
            .shared
            .lock()
            .ready
            .as_ref()
            .map(|(_, e)| e.clone())
            .unwrap_or_default();
        // SAFETY: the caller's contract.
        unsafe { crate::ring_info::put_str(eps.as_bytes(), buf, size, "zcio_bridge_endpoints") }
    })
}

/// Fill `*out` with the bridge's live counters, writing at most `size`
/// bytes (pass `sizeof(struct zcio_bridge_counters)`). Returns 0 or
/// `-EINVAL`.
///
/// # Safety
/// `b` is NULL or a live handle; `out` is NULL or valid for writing `size`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_bridge_get_counters(
    b: *const zcio_bridge,
    out: *mut zcio_bridge_counters,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = match unsafe { bridge(b) } {
            Ok(b) => b,
            Err(e) => return e,
        };
        if out.is_null() {
            return einval("zcio_bridge_get_counters: out is NULL");
        }
        let s = b
            .shared
            .lock()
            .ready
            .as_ref()
            .map(|(c, _)| c.snapshot())
            .unwrap_or_default();
        let c = zcio_bridge_counters {
            samples: s.samples,
            bytes: s.bytes,
            oversize: s.oversize,
            malformed: s.malformed,
            gaps: s.gaps,
            lost: s.lost,
            duplicates: s.duplicates,
            ignored: s.ignored,
            lapped: s.lapped,
            connections: s.connections,
        };
        // SAFETY: the caller's contract.
        unsafe { put_sized("zcio_bridge_get_counters", &c, out, size) }
    })
}

/// Ask the bridge to stop (returns at once; `zcio_bridge_wait` for the
/// end). An export stops reading its source (a ring's stream goes on
/// without it); an import closes its ring with an error (its readers see
/// the stream cut, never a clean end). Returns 0 (also if it ended
/// already) or `-EINVAL`.
///
/// # Safety
/// `b` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn zcio_bridge_stop(b: *const zcio_bridge) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = match unsafe { bridge(b) } {
            Ok(b) => b,
            Err(e) => return e,
        };
        if let Some(tx) = b.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(());
        }
        0
    })
}

/// Wait up to `timeout_ms` (< 0 or `ZCIO_TIMEOUT_INFINITE`: as long as it
/// runs; 0: just look) for the bridge to end. Returns 0 once it has ended,
/// with its status in `*status`: `ZCIO_BRIDGE_END_OF_STREAM`,
/// `ZCIO_BRIDGE_STOPPED`, or the negative code of its failure (`-EPIPE`:
/// the producer died or the exporter vanished; `-ZCIO_EPRODFAIL`: the
/// producer closed with an error; `-ETIMEDOUT`: no peer within
/// `connect_timeout_ms`; its text in `zcio_last_error`). Returns
/// `-ETIMEDOUT` (`-EAGAIN` for 0) while it still runs, or `-EINVAL`.
///
/// # Safety
/// `b` is NULL or a live handle; `status` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zcio_bridge_wait(
    b: *const zcio_bridge,
    timeout_ms: c_int,
    status: *mut c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let b = match unsafe { bridge(b) } {
            Ok(b) => b,
            Err(e) => return e,
        };
        if status.is_null() {
            return einval("zcio_bridge_wait: status is NULL");
        }
        let deadline = match Timeout::from_ms(timeout_ms) {
            Timeout::Default => None,
            Timeout::No => Some(Instant::now()),
            Timeout::For(d) => Instant::now().checked_add(d),
        };
        if !b.shared.wait_for(deadline, |s| s.end.is_some()) {
            let c = if timeout_ms == 0 {
                libc::EAGAIN
            } else {
                libc::ETIMEDOUT
            };
            return -c;
        }
        let (code, why) = b.shared.lock().end.clone().unwrap_or_default();
        if code < 0 {
            crate::error::set_last(why);
        }
        // SAFETY: non-NULL and writable (contract).
        unsafe { status.write(code) };
        0
    })
}

/// Stop the bridge if it runs, wait for its thread to finish (an import
/// closes its sink, the session sends what it still queues), and free the
/// handle. NULL is ignored.
///
/// # Safety
/// `b` is NULL or a live handle, not used again afterwards (by any
/// thread).
#[no_mangle]
pub unsafe extern "C" fn zcio_bridge_close(b: *mut zcio_bridge) {
    guard(|| {
        if b.is_null() {
            return;
        }
        // SAFETY: a live handle from a start call (contract), given up here.
        let b = unsafe { Box::from_raw(b) };
        if let Some(tx) = b.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(());
        }
        let thread = b.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    })
}
