//! Named rings (`zcio::ring`): `zcio_ring_open` / `read` / `write` /
//! `peek` / `release` / `seek` / `fd` / `close` / `unlink`, and the
//! doorbell for event loops (`zcio_ring_doorbell` and its steps).

use std::ffi::{c_char, c_int, c_void};
use std::os::fd::AsRawFd;

use zcio::ring::{
    Consumer, DetachedPeek, Layout, Options, Overflow, Producer, RingMap, SeekTo, Start, Wait,
};

use crate::abi::put;
use crate::error::{einval, fail, fail_msg, guard};
use crate::ring_reserve::ProducerEnd;
use crate::{ssize_t, str_arg, Timeout};
use zcio::View;

/// Open as a consumer (reads; any number per ring).
pub const ZCIO_O_RDONLY: c_int = 0;
/// Open as the producer (writes; one live producer per ring).
pub const ZCIO_O_WRONLY: c_int = 1;
/// Mask of the access mode bits.
pub const ZCIO_O_ACCMODE: c_int = 3;
/// Create the ring if it does not exist (with `mode` and `size`).
pub const ZCIO_O_CREAT: c_int = 0x100;
/// With `ZCIO_O_CREAT`: fail with `-EEXIST` if the ring exists.
pub const ZCIO_O_EXCL: c_int = 0x200;
/// Reads, writes and peeks do not wait (`-EAGAIN`); same as
/// `zcio_ring_set_timeout(ring, 0)`.
pub const ZCIO_O_NONBLOCK: c_int = 0x400;
/// Consumer: start at the oldest data the ring still holds instead of at
/// the producer's head (only data written from now on).
pub const ZCIO_O_OLDEST: c_int = 0x800;
/// When creating: a ring of variable-size blocks (each write is one
/// block, each read or peek returns one whole block) instead of a byte
/// stream.
pub const ZCIO_O_BLOCKS: c_int = 0x1000;
/// When creating: overflow policy "drop new data" (SRP) instead of making
/// the producer wait for the slowest consumer (the default, lossless).
pub const ZCIO_O_SRP: c_int = 0x10000;
/// When creating: "overwrite old data" (FRP): slow consumers are lapped
/// and skip ahead; the producer never waits.
pub const ZCIO_O_FRP: c_int = 0x20000;
/// When creating: "shared read pointer" (MRP).
pub const ZCIO_O_MRP: c_int = 0x30000;
/// Mask of the overflow policy bits.
pub const ZCIO_O_POLICY: c_int = 0x30000;

/// `zcio_ring_seek`: move relative to the cursor (`offset` in bytes for
/// byte-stream rings, in blocks otherwise; never past the head, never
/// more than a ring behind it).
pub const ZCIO_SEEK_CUR: c_int = 1;
/// `zcio_ring_seek`: move to the producer's head (`offset` must be 0).
pub const ZCIO_SEEK_NEWEST: c_int = 2;
/// `zcio_ring_seek`: move to the oldest data still in the ring (`offset`
/// must be 0; not for block rings, `-EOPNOTSUPP`).
pub const ZCIO_SEEK_OLDEST: c_int = 3;

const KNOWN_FLAGS: c_int = ZCIO_O_ACCMODE
    | ZCIO_O_CREAT
    | ZCIO_O_EXCL
    | ZCIO_O_NONBLOCK
    | ZCIO_O_OLDEST
    | ZCIO_O_BLOCKS
    | ZCIO_O_POLICY;

/// A consumer's or producer's end of a named ring (opaque).
pub struct zcio_ring {
    pub(crate) end: End,
    pub(crate) timeout: Timeout,
    /// A block is peeked and not yet released (the consumer refuses to
    /// resume it once it has read, peeked or sought, which this handle
    /// prevents with `-EBUSY` until `zcio_ring_release`).
    pub(crate) peeked: Option<DetachedPeek>,
}

// One per handle, on the heap already (the handle is boxed): the
// consumer's size costs nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum End {
    /// The producer, and the reservation that may borrow it
    /// (`ring_reserve.rs`).
    Producer(ProducerEnd),
    Consumer(Consumer),
}

/// Counters and geometry of a ring end (`zcio_ring_get_stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_ring_stats {
    /// Data area in bytes.
    pub size: u64,
    /// Largest block one write may store (block rings; the ring size for
    /// byte-stream rings, whose writes are split as needed).
    pub max_block: u64,
    /// Consumer: reads (blocks) consumed.
    pub read_blocks: u64,
    /// Consumer: bytes consumed.
    pub read_bytes: u64,
    /// Consumer: times it was lapped and skipped ahead (FRP/MRP).
    pub skipped_blocks: u64,
    /// Consumer: cursor units skipped.
    pub skipped_units: u64,
    /// Consumer: blocks the producer dropped since it joined (SRP/MRP).
    pub drops: u64,
    /// Consumer: cursor units between it and the producer's head.
    pub lag: u64,
}

/// Open ring `name` (1–200 characters of `[A-Za-z0-9._-]`, not starting
/// with a dot; the file is `/dev/shm/zcio-ring.NAME`, `$ZCIO_RING_DIR`
/// overrides the directory).
///
/// `flags`: `ZCIO_O_RDONLY` (a consumer) or `ZCIO_O_WRONLY` (the
/// producer), or-ed with `ZCIO_O_CREAT` (create if missing), `ZCIO_O_EXCL`,
/// `ZCIO_O_NONBLOCK`, `ZCIO_O_OLDEST` (consumers), and for creation
/// `ZCIO_O_BLOCKS` and one of `ZCIO_O_SRP` / `ZCIO_O_FRP` / `ZCIO_O_MRP`.
/// `mode`: permission bits of a new ring file (at most 0777; setuid,
/// setgid and sticky bits are `-EINVAL`), applied as given (the umask
/// does not apply). `size`: data bytes of a new ring, a power of two
/// from 4096 to 16 GiB (ignored when the ring exists).
///
/// On success stores a new handle in `*out` (free it with
/// `zcio_ring_close`) and returns 0. Errors: `-EINVAL` (bad name, flags,
/// mode or size), `-ENOENT`, `-EEXIST`, `-EACCES`, `-ENOSPC` (no room for
/// the ring, or no consumer slot left), `-EBUSY` (another live producer),
/// `-ZCIO_EBADRING`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_open(
    name: *const c_char,
    flags: c_int,
    mode: libc::mode_t,
    size: usize,
    out: *mut *mut zcio_ring,
) -> c_int {
    guard(|| {
        if out.is_null() {
            return einval("zcio_ring_open: out is NULL");
        }
        // SAFETY: the caller's contract for `name`.
        let name = match unsafe { str_arg(name, "ring name") } {
            Ok(n) => n,
            Err(e) => return e,
        };
        let r = match open(name, flags, mode, size, None) {
            Ok(r) => r,
            Err(e) => return e,
        };
        // SAFETY: `out` is non-NULL and, by contract, writable.
        unsafe { out.write(Box::into_raw(Box::new(r))) };
        0
    })
}

/// `zcio_ring_open`, or with `opts` (`zcio_ring_open_with`) the options
/// of a new ring instead of `mode`, `size` and the layout and policy flags.
pub(crate) fn open(
    name: &str,
    flags: c_int,
    mode: libc::mode_t,
    size: usize,
    opts: Option<Options>,
) -> Result<zcio_ring, c_int> {
    if flags & !KNOWN_FLAGS != 0 {
        return Err(einval(format_args!(
            "zcio_ring_open: unknown flag bits {:#x}",
            flags & !KNOWN_FLAGS
        )));
    }
    let write = match flags & ZCIO_O_ACCMODE {
        ZCIO_O_RDONLY => false,
        ZCIO_O_WRONLY => true,
        _ => {
            return Err(einval(
                "zcio_ring_open: access mode must be ZCIO_O_RDONLY (consumer) or ZCIO_O_WRONLY (producer)",
            ))
        }
    };
    let create = flags & ZCIO_O_CREAT != 0;
    if flags & ZCIO_O_EXCL != 0 && !create {
        return Err(einval("zcio_ring_open: ZCIO_O_EXCL needs ZCIO_O_CREAT"));
    }
    if write && flags & ZCIO_O_OLDEST != 0 {
        return Err(einval("zcio_ring_open: ZCIO_O_OLDEST is for consumers"));
    }
    let map = if let (true, Some(o)) = (create, &opts) {
        if flags & (ZCIO_O_BLOCKS | ZCIO_O_POLICY) != 0 {
            return Err(einval(
                "zcio_ring_open_with: ZCIO_O_BLOCKS and the policy flags are for zcio_ring_open; \
                 set the layout and overflow fields of struct zcio_ring_options instead",
            ));
        }
        if flags & ZCIO_O_EXCL != 0 {
            o.create(name)
        } else {
            o.create_or_open(name)
        }
    } else if create {
        if size == 0 {
            return Err(einval(
                "zcio_ring_open: size 0; a new ring needs a power of two from 4096 bytes",
            ));
        }
        if mode & !0o777 != 0 {
            return Err(einval(format_args!(
                "zcio_ring_open: mode 0{mode:o} has bits beyond 0777 (only the permission bits apply: use e.g. 0600 or 0660)"
            )));
        }
        let overflow = match flags & ZCIO_O_POLICY {
            ZCIO_O_SRP => Overflow::Srp,
            ZCIO_O_FRP => Overflow::Frp,
            ZCIO_O_MRP => Overflow::Mrp,
            _ => Overflow::Block,
        };
        let layout = if flags & ZCIO_O_BLOCKS != 0 {
            Layout::Variable
        } else {
            Layout::Continuous
        };
        let o = Options::new()
            .layout(layout)
            .overflow(overflow)
            .size(size as u64)
            .mode(mode);
        if flags & ZCIO_O_EXCL != 0 {
            o.create(name)
        } else {
            o.create_or_open(name)
        }
    } else {
        RingMap::open(name, true)
    }
    .map_err(fail)?;
    let end = if write {
        End::Producer(ProducerEnd::new(Producer::attach(map).map_err(fail)?))
    } else {
        let start = if flags & ZCIO_O_OLDEST != 0 {
            Start::Oldest
        } else {
            Start::Newest
        };
        End::Consumer(Consumer::attach(map, start).map_err(fail)?)
    };
    Ok(zcio_ring {
        end,
        timeout: if flags & ZCIO_O_NONBLOCK != 0 {
            Timeout::No
        } else {
            Timeout::Default
        },
        peeked: None,
    })
}

/// The handle behind `ring`, or the error to return.
///
/// # Safety
/// `ring` is NULL or a live handle from `zcio_ring_open`, used by one
/// thread at a time.
pub(crate) unsafe fn handle<'a>(ring: *mut zcio_ring) -> Result<&'a mut zcio_ring, c_int> {
    // SAFETY: the caller's contract.
    unsafe { ring.as_mut() }.ok_or_else(|| einval("ring handle is NULL"))
}

impl zcio_ring {
    pub(crate) fn consumer(&mut self, call: &str) -> Result<&mut Consumer, c_int> {
        if self.peeked.is_some() {
            return Err(fail_msg(
                libc::EBUSY,
                format_args!("{call}: a peeked block is held; zcio_ring_release it first"),
            ));
        }
        match &mut self.end {
            End::Consumer(c) => Ok(c),
            End::Producer(_) => Err(fail_msg(
                libc::EBADF,
                format_args!("{call}: this ring was opened for writing (ZCIO_O_WRONLY)"),
            )),
        }
    }

    /// The producer, or `-EBADF` (a consumer's handle) or `-EBUSY` (a
    /// reservation is open).
    pub(crate) fn producer(&mut self, call: &str) -> Result<&mut Producer, c_int> {
        match &mut self.end {
            End::Producer(pe) => pe.get(call),
            End::Consumer(_) => Err(fail_msg(
                libc::EBADF,
                format_args!("{call}: this ring was opened for reading (ZCIO_O_RDONLY)"),
            )),
        }
    }

    pub(crate) fn wait(&self) -> Wait {
        match self.timeout {
            Timeout::Default => Wait::Default,
            Timeout::No => Wait::No,
            Timeout::For(d) => Wait::within(d),
        }
    }
}

/// Set how long reads, peeks and writes wait: `timeout_ms` < 0 waits up to
/// the ring end's bound (the default: 10 s for a producer's writes, one
/// hour for a consumer's reads and peeks; `-ETIMEDOUT` after it), 0 never
/// waits (`-EAGAIN`, as `ZCIO_O_NONBLOCK`), > 0 waits at most that long
/// (`-ETIMEDOUT`), `ZCIO_TIMEOUT_INFINITE` as long as it takes (a consumer
/// still notices a producer that died, a producer evicts a consumer that
/// died). Returns 0 or `-EINVAL`.
///
/// # Safety
/// `ring` is NULL or a live handle, used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_set_timeout(ring: *mut zcio_ring, timeout_ms: c_int) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        match unsafe { handle(ring) } {
            Ok(r) => {
                r.timeout = Timeout::from_ms(timeout_ms);
                0
            }
            Err(e) => e,
        }
    })
}

/// Producer: write `len` bytes from `buf`. A byte-stream ring takes any
/// length (split into pieces of at most half the ring); a block ring
/// (`ZCIO_O_BLOCKS`) stores them as one block of at most `max_block`
/// bytes (`-EMSGSIZE` beyond). Waits for room as the timeout says
/// (`zcio_ring_set_timeout`; by default up to 10 s).
///
/// Returns the bytes written: all of them, or fewer if a non-blocking or
/// timed write ran out of room after writing some (as `write(2)`).
/// Errors: `-EAGAIN` (no room, non-blocking), `-ETIMEDOUT`,
/// `-ZCIO_EDROPPED` (SRP/MRP tail drop), `-EMSGSIZE`, `-EBADF` (a
/// consumer's handle), `-ZCIO_ECORRUPT`. `buf` stays the caller's.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `buf` is
/// valid for reading `len` bytes (or NULL with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_write(
    ring: *mut zcio_ring,
    buf: *const c_void,
    len: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e as ssize_t,
        };
        if buf.is_null() && len != 0 {
            return einval("zcio_ring_write: buf is NULL") as ssize_t;
        }
        if len > isize::MAX as usize {
            return einval("zcio_ring_write: len too large") as ssize_t;
        }
        // `buf` may point into memory a peer can write (a received
        // message's bytes, another ring): read as a volatile view.
        let bytes = if len == 0 {
            View::from_slice(&[])
        } else {
            // SAFETY: non-NULL and readable for `len` bytes during the call
            // (contract).
            unsafe { View::from_raw(buf.cast::<u8>(), len) }
        };
        let wait = r.wait();
        let p = match r.producer("zcio_ring_write") {
            Ok(p) => p,
            Err(e) => return e as ssize_t,
        };
        if p.geometry().layout != Layout::Continuous {
            return match p.write_gather(&[bytes], 0, wait) {
                Ok(()) => len as ssize_t,
                Err(e) => fail(e) as ssize_t,
            };
        }
        // A byte stream: pieces of at most half the ring, so a reader can
        // hold part of it while we fill the rest (as `Producer::write`);
        // a partial write reports what went in, as `write(2)` does.
        let piece = (p.geometry().cap() / 2).max(1) as usize;
        let mut done = 0usize;
        while done < len {
            let n = piece.min(len - done);
            let chunk = bytes.slice(done, n).unwrap_or(bytes);
            match p.write_gather(&[chunk], 0, wait) {
                Ok(()) => done += n,
                Err(_) if done > 0 => break,
                Err(e) => return fail(e) as ssize_t,
            }
        }
        done as ssize_t
    })
}

/// Consumer: copy the next data into `buf`: up to `len` bytes of a
/// byte-stream ring, or one whole block of a block ring (`-EMSGSIZE` if it
/// does not fit; nothing is consumed then), waiting as the timeout says
/// (`zcio_ring_set_timeout`; by default up to one hour). The copy is made with single
/// reads of each byte and kept only if the block was not overwritten
/// meanwhile, so what you get is always intact.
///
/// Returns the bytes read, or 0 at the end of the stream (the producer
/// closed the ring and everything was read). Errors: `-EAGAIN`
/// (non-blocking, nothing to read), `-ETIMEDOUT`, `-EPIPE` (the producer
/// died without closing), `-ZCIO_EPRODFAIL` (it closed with an error),
/// `-EBUSY` (a peeked block is held), `-EBADF` (the producer's handle),
/// `-ZCIO_ECORRUPT`.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `buf` is
/// valid for writing `len` bytes and is memory of this process that no
/// other process can write during the call.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_read(
    ring: *mut zcio_ring,
    buf: *mut c_void,
    len: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e as ssize_t,
        };
        if buf.is_null() || len == 0 || len > isize::MAX as usize {
            return einval("zcio_ring_read: buf is NULL or len is 0 or too large") as ssize_t;
        }
        // SAFETY: non-NULL, writable for `len` bytes and private to this
        // process during the call (contract); any byte pattern is a valid
        // u8, and we only write through it.
        let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        let timeout = r.timeout;
        let c = match r.consumer("zcio_ring_read") {
            Ok(c) => c,
            Err(e) => return e as ssize_t,
        };
        // A non-blocking read that finds nothing re-arms the fd of
        // `zcio_ring_fd` (`Consumer::auto_doorbell`).
        let res = match timeout {
            Timeout::Default => c.read(out),
            Timeout::No => c.try_read(out),
            Timeout::For(d) => c.read_timeout(out, d),
        };
        match res {
            Ok(n) => n as ssize_t,
            Err(e) => fail(e) as ssize_t,
        }
    })
}

/// Consumer: look at the next data in place, without copying: up to `max`
/// bytes of a byte-stream ring, or one whole block. Stores its address in
/// `*data` and its length in `*len`, and keeps it *peeked* until
/// `zcio_ring_release` (until then `zcio_ring_read`, `peek` and `seek`
/// return `-EBUSY`; `zcio_ring_close` releases it).
///
/// Returns 1 with a block peeked, 0 at the end of the stream (nothing is
/// peeked), or the errors of `zcio_ring_read`.
///
/// The bytes are volatile: any process that can attach to the ring can
/// write them, and under FRP/MRP the producer overwrites them when it laps
/// this consumer. Read each byte you rely on once (copy the block or a
/// field out, with `memcpy` or a `volatile` read), validate the copy, and
/// use the copy; then `zcio_ring_release` tells you whether the block
/// stayed intact (`-ZCIO_ELAPPED` if not: discard what you read). Never
/// check a value in place and then use it in place again.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `data`
/// and `len` are valid for writing.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_peek(
    ring: *mut zcio_ring,
    max: usize,
    data: *mut *const c_void,
    len: *mut usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        if data.is_null() || len.is_null() || max == 0 {
            return einval("zcio_ring_peek: data or len is NULL, or max is 0");
        }
        let wait = r.wait();
        let c = match r.consumer("zcio_ring_peek") {
            Ok(c) => c,
            Err(e) => return e,
        };
        // As in `zcio_ring_read`: `-EAGAIN` re-arms the fd.
        let found = match c.peek_detached(max, wait) {
            Ok(found) => found,
            Err(e) => return fail(e),
        };
        let Some(detached) = found else {
            return 0;
        };
        let (p, n) = (detached.addr(), detached.len());
        r.peeked = Some(detached);
        // SAFETY: both non-NULL and writable (contract).
        unsafe {
            data.write(p.cast());
            len.write(n);
        }
        1
    })
}

/// Consumer: done with the peeked block; move past it. Returns 0 if it
/// stayed intact while peeked, `-ZCIO_ELAPPED` if the producer overwrote
/// it meanwhile (FRP/MRP: discard whatever you read from it; the cursor
/// has skipped ahead), `-EINVAL` if nothing is peeked. The pointer from
/// `zcio_ring_peek` is invalid afterwards.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_release(ring: *mut zcio_ring) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let Some(detached) = r.peeked.take() else {
            return einval("zcio_ring_release: no block is peeked");
        };
        match &mut r.end {
            End::Consumer(c) => match c.resume(detached) {
                Ok(peek) => match peek.release() {
                    Ok(()) => 0,
                    Err(e) => fail(e),
                },
                // Cannot happen: this handle refuses reads, peeks and seeks
                // while a block is peeked, so the detached peek is current.
                Err(_) => einval("zcio_ring_release: the peeked block is stale"),
            },
            End::Producer(_) => einval("zcio_ring_release: a producer's handle"),
        }
    })
}

/// Consumer: move the cursor, like `lseek`: `whence` `ZCIO_SEEK_CUR`
/// (`offset` bytes of a byte-stream ring or blocks of a block ring,
/// forward if positive, backward if negative; clamped to the data the ring
/// still holds), `ZCIO_SEEK_NEWEST` or `ZCIO_SEEK_OLDEST` (`offset` 0).
/// Returns the new position (cursor units, ≥ 0) or `-EINVAL`, `-EBUSY`,
/// `-EBADF`, `-EOPNOTSUPP` (what a block ring cannot do).
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_seek(ring: *mut zcio_ring, offset: i64, whence: c_int) -> i64 {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return i64::from(e),
        };
        let to = match (whence, offset) {
            (ZCIO_SEEK_CUR, o) if o >= 0 => SeekTo::Forward(o as u64),
            (ZCIO_SEEK_CUR, o) => SeekTo::Backward(o.unsigned_abs()),
            (ZCIO_SEEK_NEWEST, 0) => SeekTo::Newest,
            (ZCIO_SEEK_OLDEST, 0) => SeekTo::Oldest,
            _ => {
                return i64::from(einval(
                    "zcio_ring_seek: whence must be ZCIO_SEEK_CUR, or ZCIO_SEEK_NEWEST/OLDEST with offset 0",
                ))
            }
        };
        let c = match r.consumer("zcio_ring_seek") {
            Ok(c) => c,
            Err(e) => return i64::from(e),
        };
        match c.seek(to) {
            Ok(pos) => pos.min(i64::MAX as u64) as i64,
            Err(e) => i64::from(fail(e)),
        }
    })
}

/// Consumer: a file descriptor that polls readable (`POLLIN`, epoll) when
/// the ring has news for this consumer (data, or the end of the stream),
/// for event loops that only poll: poll it, then read or peek with
/// `ZCIO_O_NONBLOCK` (or timeout 0) until `-EAGAIN`, which re-arms it (no
/// other call is needed). It is the consumer's doorbell, the fd
/// `zcio_ring_doorbell` returns, in a mode where every `-EAGAIN` does the
/// doorbell loop's steps 2 and 4 itself (no thread, no eventfd); the fd
/// belongs to the ring handle: do not close it or read it. It may be
/// readable with nothing behind it (a stale ring): a read then returns
/// `-EAGAIN`. A producer that dies never rings it: to notice one, poll
/// with a timeout (50 ms) and call `zcio_ring_doorbell_rang` when it
/// passes (`-EPIPE`). Returns the fd, `-EBADF` for a producer's handle,
/// or the errno of a bell that cannot be bound.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_fd(ring: *mut zcio_ring) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let End::Consumer(c) = &mut r.end else {
            return fail_msg(
                libc::EBADF,
                "zcio_ring_fd: only a consumer's handle has a pollable fd",
            );
        };
        match c.auto_doorbell() {
            Ok(fd) => fd.as_raw_fd(),
            Err(e) => fail_msg(
                e.raw_os_error(),
                format_args!("zcio_ring_fd: cannot bind the doorbell: {e}"),
            ),
        }
    })
}

/// Event loops: this end's *named bell* (a datagram socket in the abstract
/// namespace, announced in the ring file), a descriptor that polls readable
/// (`POLLIN`, epoll) when the peer rang it: for a consumer, the producer
/// published (or closed the ring) after `zcio_ring_prepare_read_sleep`
/// said to sleep; for the producer, a consumer made room after
/// `zcio_ring_prepare_write_sleep` said to sleep. Bound on the first call
/// (the peer rings it from then on instead of waking a futex); the same fd
/// on every call, owned by the handle: do not close it or read it. Returns
/// the fd (>= 0), `-EINVAL` (NULL handle) or the errno of a bell that
/// cannot be bound.
///
/// A ring has no connection that hangs up when its peer dies, so an event
/// loop waits for the bell **or 50 ms, whichever comes first**, and then
/// calls `zcio_ring_doorbell_rang` (which reports a producer that died in
/// the middle of the stream, or evicts a consumer that died while the
/// producer waited for it).
///
/// The read loop, with the fd in your epoll set (timeout 50 ms):
///  1. `zcio_ring_read` / `zcio_ring_peek` with timeout 0
///     (`zcio_ring_set_timeout(ring, 0)` or `ZCIO_O_NONBLOCK`); done unless
///     `-EAGAIN`;
///  2. `zcio_ring_prepare_read_sleep(ring)`: 0 -> go to 1;
///  3. `epoll_wait(..., 50)`;
///  4. `zcio_ring_doorbell_rang(ring)`: `-EPIPE` -> the producer died;
///     else go to 1.
///
/// A write that returned `-EAGAIN` (a `block` ring without room) waits the
/// same way, with `zcio_ring_prepare_write_sleep` in step 2.
///
/// `zcio_ring_fd` returns this same fd, and from then on a read or peek
/// that returns `-EAGAIN` has done steps 2 and 4 itself.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_doorbell(ring: *mut zcio_ring) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let fd = match &mut r.end {
            End::Consumer(c) => c.doorbell().map(|fd| fd.as_raw_fd()),
            End::Producer(pe) => match pe.get("zcio_ring_doorbell") {
                Ok(p) => p.doorbell().map(|fd| fd.as_raw_fd()),
                Err(e) => return e,
            },
        };
        fd.unwrap_or_else(|e| {
            fail_msg(
                e.raw_os_error(),
                format_args!(
                    "zcio_ring_doorbell: cannot bind the named bell \
                     (an abstract Unix datagram socket): {e}"
                ),
            )
        })
    })
}

/// Event loops, step 2 of a read (consumer): say "about to sleep until the
/// producer publishes" (arms the bell: the producer's next publish rings
/// it). Returns 1 (sleep: wait for the bell or 50 ms), 0 (something came
/// meanwhile: read it instead of sleeping), `-EBADF` (the producer's
/// handle), `-EBUSY` (a peeked block is held) or `-EINVAL`. Binds the bell
/// if `zcio_ring_doorbell` was not called (0 if it cannot be bound: poll
/// instead).
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_prepare_read_sleep(ring: *mut zcio_ring) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        match r.consumer("zcio_ring_prepare_read_sleep") {
            Ok(c) => c_int::from(c.prepare_read_sleep()),
            Err(e) => e,
        }
    })
}

/// Event loops, step 2 of a write that returned `-EAGAIN` (producer of a
/// `block` ring): say "about to sleep until a write of `len` bytes fits"
/// (flags the slowest consumer, whose next read rings the bell; a byte
/// stream is written in pieces of at most half the ring, so `len` counts up
/// to that). Returns 1 (sleep: wait for the bell or 50 ms), 0 (it fits now,
/// or the policy never waits: write again), `-EMSGSIZE` (it never fits),
/// `-EBADF` (a consumer's handle), `-ZCIO_ECORRUPT` or `-EINVAL`.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_prepare_write_sleep(ring: *mut zcio_ring, len: usize) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let p = match r.producer("zcio_ring_prepare_write_sleep") {
            Ok(p) => p,
            Err(e) => return e,
        };
        let len = if p.geometry().layout == Layout::Continuous {
            len.min((p.geometry().cap() / 2).max(1) as usize)
        } else {
            len
        };
        match p.prepare_write_sleep(len) {
            Ok(sleep) => c_int::from(sleep),
            Err(e) => fail(e),
        }
    })
}

/// Event loops, step 4: after the bell polled readable *or 50 ms passed*:
/// take the rings off the bell and look for a dead peer. A consumer: 0, or
/// `-EPIPE` if nothing new came and the producer died in the middle of the
/// stream (what it wrote has been read). The producer: clears its sleep
/// flag and evicts the consumer it waited for if that one died; 0. Then go
/// back to step 1. `-EINVAL` for a NULL handle.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_doorbell_rang(ring: *mut zcio_ring) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        match &mut r.end {
            End::Consumer(c) => match c.doorbell_rang() {
                Ok(()) => 0,
                Err(e) => fail(e),
            },
            End::Producer(pe) => match pe.get("zcio_ring_doorbell_rang") {
                Ok(p) => {
                    p.doorbell_rang();
                    0
                }
                Err(e) => e,
            },
        }
    })
}

/// Producer: wait until at least `n` live consumers are attached, at most
/// `timeout_ms` (< 0: the producer's bound, 10 s; 0: just count;
/// `ZCIO_TIMEOUT_INFINITE`: as long as it takes). Returns how many are
/// attached (possibly fewer than `n` after the timeout), or `-EBADF` for
/// a consumer's handle.
/// Consumers start at the producer's head, so a producer that must not
/// write before its readers are there calls this first.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_wait_consumers(
    ring: *mut zcio_ring,
    n: u32,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let p = match r.producer("zcio_ring_wait_consumers") {
            Ok(p) => p,
            Err(e) => return e,
        };
        let t = Timeout::from_ms(timeout_ms).or(p.wait_bound());
        p.wait_for_consumers(n as usize, t).min(c_int::MAX as usize) as c_int
    })
}

/// Fill `*out` with the ring's size and (consumers) this consumer's
/// counters. Returns 0 or `-EINVAL`.
///
/// The header's `zcio_ring_get_stats(…, out)` passes `sizeof *(out)` as `size`;
/// at most `size` bytes are written (docs/c.md, "The ABI").
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `out` is
/// NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_get_stats_sized(
    ring: *mut zcio_ring,
    out: *mut zcio_ring_stats,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let geo = match &mut r.end {
            End::Producer(pe) => match pe.get("zcio_ring_get_stats") {
                Ok(p) => *p.geometry(),
                Err(e) => return e,
            },
            End::Consumer(c) => *c.geometry(),
        };
        let mut s = zcio_ring_stats {
            size: geo.data_len,
            max_block: geo.max_block(),
            ..Default::default()
        };
        if let End::Consumer(c) = &mut r.end {
            let cs = c.stats();
            s.read_blocks = cs.read_blocks;
            s.read_bytes = cs.read_bytes;
            s.skipped_blocks = cs.skipped_blocks;
            s.skipped_units = cs.skipped_units;
            s.drops = cs.drops;
            s.lag = cs.lag;
        }
        // SAFETY: the caller's contract.
        unsafe { put("zcio_ring_get_stats", &s, out, size) }
    })
}

/// The live counters of a ring end (`zcio_ring_get_counters`): what its
/// entry in the registry of live objects shows (`zcio ls`, `zcio stat`).
/// Fields may be appended; `zcio_ring_get_counters` writes only as many
/// bytes as the caller's struct has.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_ring_counters {
    /// Blocks written (producer) or read (consumer).
    pub blocks: u64,
    /// Bytes written (producer) or read (consumer).
    pub bytes: u64,
    /// Writes (producer) or reads (consumer) that found no room or no
    /// data and did not wait.
    pub would_block: u64,
    /// Writes or reads that timed out.
    pub timed_out: u64,
    /// Producer: consumers attached.
    pub consumers: u64,
    /// Producer: the write position (cursor units since creation).
    pub head: u64,
    /// Producer: the data area in bytes.
    pub capacity_bytes: u64,
    /// Consumer: the read position (cursor units since creation).
    pub position: u64,
    /// Consumer: cursor units between it and the producer's head.
    pub lag: u64,
    /// Consumer: times it was lapped and skipped ahead.
    pub skipped_blocks: u64,
    /// Consumer: blocks the producer dropped since it joined.
    pub drops: u64,
    /// 1 for a producer, 0 for a consumer.
    pub producer: u64,
}

/// Fill `*out` with the end's live counters, writing at most `size` bytes
/// (pass `sizeof(struct zcio_ring_counters)`: a program built against an
/// older, shorter struct gets only the fields it knows). Returns 0 or
/// `-EINVAL`.
///
/// # Safety
/// `ring` is NULL or a live handle used by one thread at a time; `out` is
/// NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_get_counters(
    ring: *mut zcio_ring,
    out: *mut zcio_ring_counters,
    size: usize,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let r = match unsafe { handle(ring) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let s = match &mut r.end {
            End::Producer(pe) => {
                let ps = match pe.get("zcio_ring_get_counters") {
                    Ok(p) => p.stats(),
                    Err(e) => return e,
                };
                zcio_ring_counters {
                    blocks: ps.blocks,
                    bytes: ps.bytes,
                    would_block: ps.would_block,
                    timed_out: ps.timed_out,
                    consumers: ps.consumers,
                    head: ps.head,
                    capacity_bytes: ps.capacity_bytes,
                    producer: 1,
                    ..Default::default()
                }
            }
            End::Consumer(c) => {
                let cs = c.stats();
                zcio_ring_counters {
                    blocks: cs.read_blocks,
                    bytes: cs.read_bytes,
                    would_block: cs.would_block,
                    timed_out: cs.timed_out,
                    position: c.position(),
                    lag: cs.lag,
                    skipped_blocks: cs.skipped_blocks,
                    drops: cs.drops,
                    ..Default::default()
                }
            }
        };
        // SAFETY: the caller's contract.
        unsafe { put("zcio_ring_get_counters", &s, out, size) }
    })
}

/// Close the handle and free it (NULL is ignored). A producer's close ends
/// the stream: its consumers read what is left, then get 0 (end of
/// stream). A peeked block is released, an open reservation aborted
/// (nothing of it is published). The ring itself stays until
/// `zcio_ring_unlink`.
///
/// # Safety
/// `ring` is NULL or a live handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_close(ring: *mut zcio_ring) {
    guard(|| {
        if !ring.is_null() {
            // SAFETY: a live handle from `zcio_ring_open` (contract),
            // owned by the caller and given up here.
            drop(unsafe { Box::from_raw(ring) });
        }
    })
}

/// Producer: close the handle and free it, ending the stream *with an
/// error*: consumers read what was written, then get `-ZCIO_EPRODFAIL`
/// instead of the end of the stream (`code` is yours, e.g. an errno, and
/// shows in their `zcio_last_error`). For a consumer's handle the same as
/// `zcio_ring_close`. NULL is ignored.
///
/// # Safety
/// `ring` is NULL or a live handle, not used again afterwards.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_close_error(ring: *mut zcio_ring, code: u32) {
    guard(|| {
        if ring.is_null() {
            return;
        }
        // SAFETY: as for `zcio_ring_close`.
        let r = unsafe { Box::from_raw(ring) };
        if let End::Producer(pe) = r.end {
            pe.into_inner().close_with_error(code);
        }
    })
}

/// Remove ring `name`; processes attached to it keep using it. Returns 0,
/// `-ENOENT`, `-EACCES` or `-EINVAL` (bad name).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn zcio_ring_unlink(name: *const c_char) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let name = match unsafe { str_arg(name, "ring name") } {
            Ok(n) => n,
            Err(e) => return e,
        };
        match zcio::ring::unlink(name) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}
