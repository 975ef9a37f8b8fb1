//! `zcio pipe put|get`: a named, multi-reader pipe over a ring.
//!
//! `put` copies stdin into the ring, reading straight into the reserved
//! room (`Producer::reserve` → `read(2)` into `spare_mut` → `commit`); `get`
//! writes each peeked block straight from the ring to stdout
//! (`Consumer::peek` → `write(2)` → `release`). Neither copies through a
//! buffer of its own, except on lossy rings (see `put`/`get`).
//!
//! Exit status: 0 on success (for `get`: end of stream, the producer closed
//! the ring); 1 on errors (including `get` seeing the producer die without
//! closing the ring); 141 (128 + SIGPIPE, what a shell reports for `cat`
//! killed by a broken pipe) when `get`'s stdout is closed by its reader, or
//! when every reader of `put` has gone away.

use std::io::{ErrorKind, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use rustix::io::Errno;
use zcio::ring::{
    self, Consumer, Layout, OpenError, Overflow, Producer, ReadError, RingMap, Start, Wait,
    WriteError,
};

use crate::ring::{describe, open_error, size, CreateArgs};
use crate::usage;

/// Exit status for a broken pipe (128 + SIGPIPE).
pub const EXIT_BROKEN_PIPE: i32 = 141;

/// Largest chunk read from stdin or peeked for stdout.
const MAX_CHUNK: u64 = 256 << 10;

/// How often an idle reader with `--timeout` checks its deadline.
const IDLE_CHECK: Duration = Duration::from_millis(100);

/// How often `get` looks for a ring that does not exist yet.
const APPEAR_CHECK: Duration = Duration::from_millis(10);

#[derive(Subcommand, Debug)]
pub enum PipeCmd {
    /// Copy stdin into ring NAME for `zcio pipe get` readers (a FIFO writer).
    ///
    /// Creates the ring if it does not exist (the create options apply only
    /// then; for an existing ring, options that differ from it are errors),
    /// reserves its memory, waits for --readers readers, copies until EOF
    /// and closes the ring: readers drain it and exit 0. If reading stdin
    /// fails, the ring is closed with an error and readers exit 1. With the
    /// block policy (default) every reader gets every byte. Exit status: 0,
    /// 1 on errors, 2 for invalid options, 141 if every reader went away
    /// before EOF.
    #[command(after_help = "Examples:\n  \
        zcio pipe get logs > copy.txt &                    # a reader (start it first or later)\n  \
        zcio pipe put logs < big.log                       # waits for one reader, then copies\n  \
        tar c dir | zcio pipe put backup --readers 2 --size 16MiB --progress\n  \
        zcio pipe put video --readers 0 --policy frp < /dev/video0   # lossy broadcast, no waiting\n  \
        zcio pipe put msgs --layout variable < data        # one block per read(2) of stdin")]
    Put(PutArgs),
    /// Copy ring NAME to stdout until its producer closes it (a FIFO reader).
    ///
    /// Joins at the producer's current position. A ring that does not exist
    /// yet is waited for (`get` never creates one); create options, if
    /// given, must match the ring. A reader waits for a new producer if the
    /// last one closed, or died without writing since the reader joined.
    /// Exit status: 0 at end of stream, 1 on errors (including a producer
    /// that died or failed: the output is incomplete), 2 for invalid
    /// options, 141 if stdout is closed by its reader.
    #[command(after_help = "Examples:\n  \
        zcio pipe get logs | grep ERROR\n  \
        zcio pipe get backup | tar x                       # one of two readers of `put --readers 2`\n  \
        zcio pipe get logs --timeout 5 > out               # give up after 5 s without data\n  \
        zcio pipe get msgs --layout variable               # fail unless the ring is a variable one")]
    Get(GetArgs),
}

#[derive(Args, Debug)]
pub struct PutArgs {
    /// Ring name.
    name: String,
    /// Wait until this many readers are attached before copying (0: don't
    /// wait; at most 64, the ring's consumer slots).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = zcio_fmt::ring::parse_readers)]
    readers: usize,
    /// Give up if the readers are not there after SECS seconds [default: wait forever].
    #[arg(long, value_name = "SECS", value_parser = zcio_fmt::parse_seconds)]
    wait_timeout: Option<f64>,
    /// Remove the ring after closing it (attached readers still drain it).
    #[arg(long)]
    rm: bool,
    /// Show bytes and rate on stderr.
    #[arg(long)]
    progress: bool,
    #[command(flatten)]
    create: CreateArgs,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// Ring name.
    name: String,
    /// Give up (exit 1) after SECS seconds without data, including the wait
    /// for the ring to appear [default: wait forever].
    #[arg(long, value_name = "SECS", value_parser = zcio_fmt::parse_seconds)]
    timeout: Option<f64>,
    /// Show bytes and rate on stderr.
    #[arg(long)]
    progress: bool,
    #[command(flatten)]
    create: CreateArgs,
}

/// Run a pipe command; `Ok(status)` is the exit status.
pub fn run(cmd: PipeCmd) -> Result<i32> {
    match cmd {
        PipeCmd::Put(a) => put(a),
        PipeCmd::Get(a) => get(a),
    }
}

fn secs(what: &str, s: Option<f64>) -> Result<Option<Duration>> {
    s.map(|s| {
        Duration::try_from_secs_f64(s).map_err(|_| {
            usage(format!(
                "{what} must be a non-negative number of seconds, not {s}"
            ))
        })
    })
    .transpose()
}

/// `put`: open ring `name`, or create it with `create` (checked first);
/// an existing ring must match the options given.
pub(crate) fn open_or_create(name: &str, create: &CreateArgs) -> Result<Arc<RingMap>> {
    loop {
        match RingMap::open(name, true) {
            Ok(map) => {
                if create.check_existing(&map)? {
                    eprintln!(
                        "zcio: note: ring {name} already exists ({}); the create options given match it",
                        describe(map.geometry())
                    );
                }
                return Ok(map);
            }
            Err(OpenError::NotFound(_)) => {}
            Err(e) => return Err(open_error(name, e)),
        }
        create.check_new()?;
        match create.options().create(name) {
            Err(OpenError::Exists(_)) => continue, // created meanwhile
            r => return r.map_err(|e| open_error(name, e)),
        }
    }
}

/// `get`: open ring `name`, waiting (at most `timeout`) for it to be
/// created; never creates it, so a mistyped name leaves nothing behind.
fn wait_for_ring(
    name: &str,
    create: &CreateArgs,
    timeout: Option<Duration>,
) -> Result<Arc<RingMap>> {
    let t0 = Instant::now();
    let mut told = false;
    loop {
        match RingMap::open(name, true) {
            Ok(map) => {
                create.check_existing(&map)?;
                return Ok(map);
            }
            Err(OpenError::NotFound(_)) => {}
            Err(e) => return Err(open_error(name, e)),
        }
        let dir = zcio::ring::ring_dir();
        if !dir.is_dir() {
            return Err(OpenError::NoDirectory(dir.display().to_string()).into());
        }
        let waited = t0.elapsed();
        if timeout.is_some_and(|t| waited >= t) {
            anyhow::bail!(
                "no ring named {name:?} appeared in {:.1} s (--timeout; `zcio ring ls` lists the rings)",
                waited.as_secs_f64()
            );
        }
        if !told && waited >= Duration::from_secs(1) {
            eprintln!(
                "zcio pipe get: no ring named {name:?} yet; waiting for `zcio pipe put {name}` (`zcio ring ls` lists the rings)"
            );
            told = true;
        }
        std::thread::sleep(APPEAR_CHECK);
    }
}

fn progress(on: bool, what: &str) -> Option<ProgressBar> {
    on.then(|| {
        let pb = ProgressBar::new_spinner();
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} {msg} {binary_bytes} [{elapsed_precise}] {binary_bytes_per_sec}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.set_message(what.to_owned());
        pb.enable_steady_tick(Duration::from_millis(100));
        pb
    })
}

fn finish(pb: Option<ProgressBar>, what: &str, bytes: u64, t0: Instant) {
    if let Some(pb) = pb {
        pb.finish_and_clear();
        let s = t0.elapsed().as_secs_f64();
        eprintln!(
            "zcio pipe {what}: {} in {s:.2} s ({}/s)",
            size(bytes),
            size((bytes as f64 / s.max(1e-9)) as u64)
        );
    }
}

fn wait_readers(prod: &mut Producer, n: usize, timeout: Option<Duration>) -> Result<()> {
    let name = prod.ring().name().to_owned();
    let t0 = Instant::now();
    let mut told = false;
    loop {
        let have = prod.live_consumers();
        if have >= n {
            return Ok(());
        }
        let waited = t0.elapsed();
        if timeout.is_some_and(|t| waited >= t) {
            bail!(
                "only {have} of {n} reader(s) attached to ring {name} after {:.1} s: start them with `zcio pipe get {name}`",
                waited.as_secs_f64()
            );
        }
        if !told && waited >= Duration::from_secs(1) {
            eprintln!("zcio pipe put: waiting for {n} reader(s): run `zcio pipe get {name}`");
            told = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Wait until `fd` is ready for `flags` (for descriptors left non-blocking
/// by whoever set them up).
fn poll_fd(fd: BorrowedFd<'_>, flags: rustix::event::PollFlags) -> std::io::Result<()> {
    let mut p = [rustix::event::PollFd::new(&fd, flags)];
    loop {
        match rustix::event::poll(&mut p, None) {
            Err(Errno::INTR) => continue,
            r => return r.map(drop).map_err(Into::into),
        }
    }
}

/// Run a system call on `fd`, retrying on EINTR and, for descriptors left
/// non-blocking, waiting for `ready` on EAGAIN.
fn retry<T>(
    fd: BorrowedFd<'_>,
    ready: rustix::event::PollFlags,
    mut call: impl FnMut() -> Result<T, Errno>,
) -> std::io::Result<T> {
    loop {
        match call() {
            Ok(v) => return Ok(v),
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => poll_fd(fd, ready)?,
            Err(e) => return Err(e.into()),
        }
    }
}

/// One `read(2)` from `fd` into (possibly uninitialised) `buf`; 0 is EOF.
fn read_into(fd: BorrowedFd<'_>, buf: &mut [MaybeUninit<u8>]) -> std::io::Result<usize> {
    retry(fd, rustix::event::PollFlags::IN, || {
        rustix::io::read(fd, &mut *buf).map(|(filled, _)| filled.len())
    })
}

/// One `read(2)` from `fd` into `buf`; 0 is EOF.
fn read_some(fd: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<usize> {
    retry(fd, rustix::event::PollFlags::IN, || {
        rustix::io::read(fd, &mut *buf)
    })
}

/// `write_all` straight to `fd` (no user-space buffer).
fn write_all(fd: BorrowedFd<'_>, buf: &[u8]) -> std::io::Result<()> {
    write_all_view(fd, zcio::View::from_slice(buf))
}

/// `write_all` of bytes in a ring, handed to `write(2)` in place (no
/// reference to memory another process may write is formed).
fn write_all_view(fd: BorrowedFd<'_>, buf: zcio::View<'_>) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = buf.slice(done, buf.len() - done).unwrap_or(buf);
        match retry(fd, rustix::event::PollFlags::OUT, || {
            rest.write_to(fd)
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))
        })? {
            0 => return Err(ErrorKind::WriteZero.into()),
            n => done += n,
        }
    }
    Ok(())
}

/// Bytes per block/chunk for this ring: a quarter of the ring (so the
/// other side works on the rest), at most 256 KiB and the largest block.
fn chunk(g: &zcio::ring::Geometry) -> usize {
    (g.data_len / 4)
        .clamp(1, MAX_CHUNK)
        .min(g.max_block())
        .max(1) as usize
}

fn put(a: PutArgs) -> Result<i32> {
    let wait_timeout = secs("--wait-timeout", a.wait_timeout)?;
    let name = a.name.as_str();
    let map = open_or_create(name, &a.create)?;
    let g = *map.geometry();
    if g.layout == Layout::Index {
        return Err(usage(format!(
            "ring {name} is an index ring (pointers into other rings): `zcio pipe put` needs a data ring; create one with `zcio ring create NAME --layout continuous`"
        )));
    }
    let mut prod = Producer::attach(map).with_context(|| format!("cannot write to ring {name}"))?;
    let res = match a.readers {
        0 => Ok(()),
        n => wait_readers(&mut prod, n, wait_timeout),
    }
    .and_then(|()| copy_in(&mut prod, a.readers > 0, a.progress));
    // Close the ring before anything else: normally (readers drain it, then
    // see EOF) or, if we failed, with an error they report (exit 1).
    match &res {
        Err(e) => prod.close_with_error(error_code(e)),
        Ok(_) => prod.close(),
    }
    if a.rm {
        match ring::unlink(name) {
            Ok(()) | Err(OpenError::NotFound(_)) => {}
            Err(e) => eprintln!("zcio: warning: could not remove ring {name}: {e}"),
        }
    }
    match res? {
        Copied::All => Ok(0),
        Copied::NoReaders(n) => {
            eprintln!(
                "zcio: error: every reader of ring {name} has gone away after {}; stopping (start readers with `zcio pipe get {name}`)",
                size(n)
            );
            Ok(EXIT_BROKEN_PIPE)
        }
    }
}

/// The code `put` closes the ring with: the errno of the failure if there
/// is one, else EIO.
fn error_code(e: &anyhow::Error) -> u32 {
    e.chain()
        .find_map(|c| c.downcast_ref::<std::io::Error>()?.raw_os_error())
        .and_then(|c| u32::try_from(c).ok())
        .unwrap_or(Errno::IO.raw_os_error() as u32)
}

enum Copied {
    All,
    NoReaders(u64),
}

/// Copy stdin into the ring until EOF (or until no reader is left, if
/// `need_readers`).
fn copy_in(prod: &mut Producer, need_readers: bool, show: bool) -> Result<Copied> {
    let g = *prod.geometry();
    let chunk = chunk(&g);
    let stdin = std::io::stdin();
    let fd = stdin.as_fd();
    let pb = progress(show, "put");
    let t0 = Instant::now();
    let (mut total, mut dropped, mut drops) = (0u64, 0u64, 0u64);
    // Tail-drop rings (SRP/MRP) decide about a block when it is written, so
    // each chunk is read first (one copy) and then offered: only what the
    // policy drops is lost, and the ring's drop counters stay exact. Block
    // and FRP rings always take the block: read straight into the ring.
    let lossy = matches!(g.overflow, Overflow::Srp | Overflow::Mrp);
    let mut scratch = if lossy { vec![0u8; chunk] } else { Vec::new() };
    loop {
        let n = if lossy {
            let n = read_some(fd, &mut scratch).context("read stdin")?;
            if n == 0 {
                break;
            }
            match prod.write_tagged(&scratch[..n], 0, Wait::Forever) {
                Ok(()) => {}
                Err(WriteError::Dropped) => {
                    dropped += n as u64;
                    drops += 1;
                }
                Err(e) => return Err(e).context("write to ring"),
            }
            n
        } else {
            let mut r = prod
                .reserve(chunk, Wait::Forever)
                .context("reserve room in ring")?;
            let n = read_into(fd, r.spare_mut()).context("read stdin")?;
            if n == 0 {
                break; // dropping the reservation publishes nothing
            }
            // SAFETY: `read_into` reported `n` bytes of `spare_mut()` written.
            unsafe { r.advance(n) };
            r.commit(0).context("write to ring")?;
            n
        };
        total += n as u64;
        if let Some(pb) = &pb {
            pb.set_position(total);
        }
        if need_readers && prod.consumers() == 0 {
            finish(pb, "put", total, t0);
            return Ok(Copied::NoReaders(total));
        }
    }
    finish(pb, "put", total, t0);
    if drops > 0 {
        eprintln!(
            "zcio pipe put: ring full ({} policy): dropped {} in {drops} blocks",
            g.overflow.name(),
            size(dropped)
        );
    }
    Ok(Copied::All)
}

fn get(a: GetArgs) -> Result<i32> {
    let timeout = secs("--timeout", a.timeout)?;
    let name = a.name.as_str();
    let map = wait_for_ring(name, &a.create, timeout)?;
    let mut cons = Consumer::attach(map, Start::Newest)
        .with_context(|| format!("cannot read from ring {name}"))?;
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    let pb = progress(a.progress, "get");
    let t0 = Instant::now();
    let mut total = 0u64;
    let res = copy_out(&mut cons, lock.as_fd(), timeout, |n| {
        total += n as u64;
        if let Some(pb) = &pb {
            pb.set_position(total);
        }
    });
    // Nothing is buffered (we write to the descriptor), but be explicit.
    let flushed = lock.flush();
    drop(cons);
    finish(pb, "get", total, t0);
    match res {
        Err(e) if is_broken_pipe(&e) => Ok(EXIT_BROKEN_PIPE),
        Err(e) => Err(e),
        Ok(()) => match flushed {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => Ok(EXIT_BROKEN_PIPE),
            r => r.context("flush stdout").map(|()| 0),
        },
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == ErrorKind::BrokenPipe)
}

/// Copy the ring to `out` until end of stream.
fn copy_out(
    cons: &mut Consumer,
    out: BorrowedFd<'_>,
    timeout: Option<Duration>,
    mut count: impl FnMut(usize),
) -> Result<()> {
    let g = *cons.geometry();
    let max = chunk(&g);
    // Under FRP/MRP the producer may overwrite a block while we write it
    // out, and `release` would only tell us afterwards. So those rings are
    // read with `read` (a copy, validated before it is returned): the
    // output may have gaps, never garbage. Lossless rings are peeked.
    let overwrites = g.overflow.overwrites();
    let mut buf = if overwrites {
        vec![0u8; max.max(64 << 10)]
    } else {
        Vec::new()
    };
    let mut last = Instant::now();
    loop {
        let wait = match timeout {
            Some(t) => IDLE_CHECK.min(t.saturating_sub(last.elapsed())),
            None => IDLE_CHECK,
        };
        let r = if overwrites {
            match cons.read_timeout(&mut buf, wait) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    write_all(out, &buf[..n])?;
                    Ok(n)
                }
                Err(ReadError::BufferTooSmall { need, .. }) => {
                    buf.resize(need, 0);
                    continue;
                }
                Err(e) => Err(e),
            }
        } else {
            match cons.peek_timeout(max, wait) {
                Ok(None) => return Ok(()),
                Ok(Some(p)) => {
                    let n = p.len();
                    write_all_view(out, p.view())?;
                    p.release().map(|()| n)
                }
                Err(e) => Err(e),
            }
        };
        match r {
            Ok(n) => {
                count(n);
                last = Instant::now();
            }
            Err(ReadError::TimedOut) => {
                if let Some(t) = timeout {
                    if last.elapsed() >= t {
                        bail!("no data for {:.1} s (--timeout)", t.as_secs_f64());
                    }
                }
            }
            Err(ReadError::Disconnected { pid }) => bail!(
                "producer died (pid {pid}) without closing ring {}: the output is incomplete",
                cons.ring().name()
            ),
            Err(ReadError::ProducerFailed { pid, code }) => bail!(
                "the producer of ring {} (pid {pid}) failed ({}): the output is incomplete",
                cons.ring().name(),
                std::io::Error::from_raw_os_error(code as i32)
            ),
            Err(e) => return Err(e).with_context(|| format!("read ring {}", cons.ring().name())),
        }
    }
}
