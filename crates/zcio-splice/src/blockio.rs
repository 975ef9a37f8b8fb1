//! The ends of the buffer path: reading one block from a source and
//! writing blocks to a sink, for every kind of I/O object, under the flow
//! control the source's attributes call for (Fall, ch. 4).
//!
//! * A **passive** source (a file, a pipe, a stream socket, a channel) is
//!   paced by the sink: a block is read only after the previous ones were
//!   written, and writes wait for the sink. The high watermark of data in
//!   flight is the association's pool (16 MiB): a channel receiver that
//!   keeps blocks makes the next allocation wait for it to release some.
//! * An **active** source (a UDP socket, a ring) produces on its own
//!   schedule: when the sink cannot take a block at once, the block is
//!   dropped and counted, and the source keeps being read (holding it back
//!   would only move the loss into the kernel's receive queue).
//! * A **quenchable** source is paced by not being read; the quench hook
//!   tells the application when the sink stopped taking data and when it
//!   took data again (e.g. to tell the sender to slow down).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rustix::event::{poll, PollFd, PollFlags, Timespec};

use super::error::SpliceError;
use super::io_object::{IoObject, Kind, Object};
use super::mover_kind::MoverKind;
use crate::buf::Pool;
use crate::channel::{RecvError, SendErrorKind};
use crate::msg::Msg;
use crate::ring::{ReadError, Wait, WriteError};
use crate::view::View;
use crate::Errno;

/// How long a zcio source waits for data before the association looks at
/// its stop flag again (and a full zcio sink before it looks again).
pub(crate) const IDLE_WAIT: Duration = Duration::from_millis(100);
/// The largest block read from a datagram socket (one datagram).
pub(crate) const DATAGRAM_MAX: usize = 64 << 10;

/// What reading the source gave.
pub(crate) enum Got {
    /// One block (a datagram, a ring block, a message, up to `want`
    /// bytes of a stream).
    Block(Msg),
    /// `n` bytes went from the source straight into the sink.
    Written(usize),
    /// The source ended.
    Eof,
    /// Nothing within [`IDLE_WAIT`] (or a zero-length datagram, a
    /// malformed message the channel dropped, a lapped ring reader).
    Idle,
}

/// Flow-control counters and the quench hook of one association.
#[derive(Default)]
pub(crate) struct Flow {
    /// Drop blocks the sink cannot take at once (active sources).
    pub drop_when_behind: bool,
    /// Blocks and bytes dropped by that policy.
    pub dropped: u64,
    pub dropped_bytes: u64,
    /// Blocks the source lost before we read them (a lapped ring reader).
    pub lost: u64,
    /// Called with `true` when the sink stops taking data, `false` when
    /// it takes data again.
    pub quench: Option<Box<dyn FnMut(bool) + Send>>,
    pub quenched: bool,
}

impl Flow {
    fn set_quenched(&mut self, on: bool) {
        if self.quenched != on {
            self.quenched = on;
            if let Some(f) = self.quench.as_mut() {
                f(on);
            }
        }
    }

    fn drop_block(&mut self, m: &Msg) {
        self.dropped += 1;
        self.dropped_bytes += m.len() as u64;
        self.set_quenched(true);
    }
}

fn io(op: &'static str, errno: Errno) -> SpliceError {
    SpliceError::Io {
        op,
        mover: MoverKind::Buffer,
        errno,
    }
}

fn zcio_err(op: &'static str, e: impl std::fmt::Display) -> SpliceError {
    SpliceError::Zcio {
        op,
        message: e.to_string(),
    }
}

/// Read one block of at most `want` bytes from `src` into `pool` buffers.
pub(crate) fn read_block(
    src: &mut IoObject,
    pool: &Pool,
    want: usize,
    flow: &mut Flow,
) -> Result<Got, SpliceError> {
    let kind = src.kind();
    match &mut src.obj {
        Object::Fd(fd) => {
            let want = if kind == Kind::Datagram {
                DATAGRAM_MAX
            } else {
                want
            };
            let mut b = pool.alloc(want).map_err(|e| zcio_err("allocate", e))?;
            let n =
                rustix::io::read(&*fd, &mut b.as_mut_slice()[..want]).map_err(|e| io("read", e))?;
            if n == 0 {
                // A zero-length datagram is not the end of a UDP source.
                return Ok(if kind == Kind::Datagram {
                    Got::Idle
                } else {
                    Got::Eof
                });
            }
            b.truncate(n);
            freeze(b)
        }
        Object::RingReader(c) => {
            let max = usize::try_from(c.geometry().max_block()).unwrap_or(usize::MAX);
            let mut len = want.min(max).max(1);
            loop {
                let mut b = pool.alloc(len).map_err(|e| zcio_err("allocate", e))?;
                match c.read_timeout(&mut b.as_mut_slice()[..len], IDLE_WAIT) {
                    Ok(0) => return Ok(Got::Eof),
                    Ok(n) => {
                        b.truncate(n);
                        return freeze(b);
                    }
                    Err(ReadError::BufferTooSmall { need, .. }) if need > len && need <= max => {
                        len = need;
                    }
                    Err(ReadError::TimedOut) => return Ok(Got::Idle),
                    Err(ReadError::Lapped) => {
                        flow.lost += 1;
                        return Ok(Got::Idle);
                    }
                    Err(e) => return Err(zcio_err("read ring", e)),
                }
            }
        }
        Object::Channel(ch) => match ch.recv_timeout(IDLE_WAIT) {
            Ok(m) => Ok(Got::Block(m)),
            Err(RecvError::TimedOut | RecvError::Malformed(_)) => Ok(Got::Idle),
            Err(RecvError::Disconnected) => Ok(Got::Eof),
            Err(e) => Err(zcio_err("receive", e)),
        },
        Object::RingWriter(_) => Err(SpliceError::Unsuitable {
            role: "source",
            what: src.label().to_owned(),
            why: "a ring's producer end cannot be read",
        }),
    }
}

fn freeze(b: crate::buf::FbufMut) -> Result<Got, SpliceError> {
    match b.freeze() {
        Ok(f) => Ok(Got::Block(Msg::from(f))),
        Err(e) => Err(zcio_err("freeze", e.error)),
    }
}

/// Read up to `want` bytes from descriptor `src` straight into the room
/// reserved in ring sink `dst` (no modules: the bytes are read once, by
/// the kernel, into the ring). `None` when `dst` is not a ring or `src`
/// not a descriptor.
pub(crate) fn read_into_ring(
    src: &IoObject,
    dst: &mut IoObject,
    want: usize,
    flow: &mut Flow,
) -> Option<Result<Got, SpliceError>> {
    let (Some(fd), Object::RingWriter(p)) = (src.fd(), &mut dst.obj) else {
        return None;
    };
    let max = usize::try_from(p.geometry().max_block()).unwrap_or(usize::MAX);
    let want = if src.kind() == Kind::Datagram {
        DATAGRAM_MAX
    } else {
        want
    }
    .min(max)
    .max(1);
    // Waits for room in slices, as `write_blocks` does, so a `stop` ends
    // the wait (the step reports nothing moved and the engine looks).
    let wait = if flow.drop_when_behind {
        Wait::No
    } else {
        Wait::Until(std::time::Instant::now() + IDLE_WAIT)
    };
    let mut r = match p.reserve(want, wait) {
        Ok(r) => {
            flow.set_quenched(false);
            r
        }
        Err(WriteError::TimedOut) => {
            flow.set_quenched(true);
            return Some(Ok(Got::Idle));
        }
        Err(WriteError::WouldBlock | WriteError::Dropped) => {
            // No room: read the datagram anyway (into a scratch buffer) and
            // count it dropped, so the source keeps flowing.
            let mut scratch = vec![0u8; want];
            return Some(match rustix::io::read(fd, &mut scratch) {
                Ok(n) => {
                    flow.dropped += 1;
                    flow.dropped_bytes += n as u64;
                    Ok(Got::Idle)
                }
                Err(e) => Err(io("read", e)),
            });
        }
        Err(e) => return Some(Err(zcio_err("reserve ring room", e))),
    };
    let n = match rustix::io::read(fd, r.spare_mut()) {
        Ok((filled, _)) => filled.len(),
        Err(e) => return Some(Err(io("read", e))),
    };
    if n == 0 {
        // An uncommitted reservation publishes nothing.
        return Some(Ok(if src.kind() == Kind::Datagram {
            Got::Idle
        } else {
            Got::Eof
        }));
    }
    // SAFETY: `read` initialised the first `n` bytes of `spare_mut()`
    // (it returned them as `filled`).
    unsafe { r.advance(n) };
    Some(match r.commit(0) {
        Ok(()) => Ok(Got::Written(n)),
        Err(e) => Err(zcio_err("commit ring block", e)),
    })
}

/// Write every block of `out` to `dst` (a datagram sink gets each block as
/// one datagram; a ring sink one ring block; a channel sink one message).
pub(crate) fn write_blocks(
    dst: &mut IoObject,
    out: Vec<Msg>,
    flow: &mut Flow,
    stop: &AtomicBool,
) -> Result<(), SpliceError> {
    let kind = dst.kind();
    for m in out {
        if m.is_empty() {
            continue;
        }
        match &mut dst.obj {
            Object::Fd(fd) => write_fd(fd, kind, m, flow)?,
            Object::RingWriter(p) => loop {
                let views: smallvec::SmallVec<[View<'_>; 8]> = m.chunks().collect();
                let wait = if flow.drop_when_behind {
                    Wait::No
                } else {
                    Wait::Until(std::time::Instant::now() + IDLE_WAIT)
                };
                match p.write_gather(&views, 0, wait) {
                    Ok(()) => {
                        flow.set_quenched(false);
                        break;
                    }
                    Err(WriteError::WouldBlock | WriteError::Dropped) => {
                        flow.drop_block(&m);
                        break;
                    }
                    Err(WriteError::TimedOut) if !stop.load(Ordering::SeqCst) => {
                        flow.set_quenched(true);
                    }
                    Err(WriteError::TimedOut) => return Err(SpliceError::Stopped),
                    Err(e) => return Err(zcio_err("write ring", e)),
                }
            },
            Object::Channel(ch) => {
                let mut m = m;
                loop {
                    let r = if flow.drop_when_behind {
                        ch.try_send(m).map_err(|e| e.into_parts())
                    } else {
                        ch.send_timeout(m, IDLE_WAIT).map_err(|e| e.into_parts())
                    };
                    match r {
                        Ok(()) => {
                            flow.set_quenched(false);
                            break;
                        }
                        Err((
                            SendErrorKind::WouldBlock | SendErrorKind::TooManyInFlight(_),
                            back,
                        )) if flow.drop_when_behind => {
                            flow.drop_block(&back);
                            break;
                        }
                        Err((
                            SendErrorKind::TimedOut | SendErrorKind::TooManyInFlight(_),
                            back,
                        )) if !stop.load(Ordering::SeqCst) => {
                            flow.set_quenched(true);
                            m = back;
                        }
                        Err((SendErrorKind::Disconnected, _)) => {
                            return Err(SpliceError::SinkClosed)
                        }
                        Err((SendErrorKind::TimedOut, _)) => return Err(SpliceError::Stopped),
                        Err((kind, _)) => return Err(zcio_err("send", kind)),
                    }
                }
            }
            Object::RingReader(_) => {
                return Err(SpliceError::Unsuitable {
                    role: "sink",
                    what: dst.label().to_owned(),
                    why: "a ring's consumer end cannot be written",
                })
            }
        }
    }
    Ok(())
}

/// Whether `fd` can take data now.
fn writable_now(fd: &std::os::fd::OwnedFd) -> bool {
    let mut fds = [PollFd::new(fd, PollFlags::OUT)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
}

fn write_fd(
    fd: &std::os::fd::OwnedFd,
    kind: Kind,
    mut m: Msg,
    flow: &mut Flow,
) -> Result<(), SpliceError> {
    if flow.drop_when_behind || flow.quench.is_some() {
        let ready = kind == Kind::File || writable_now(fd);
        if !ready && flow.drop_when_behind {
            flow.drop_block(&m);
            return Ok(());
        }
        flow.set_quenched(!ready);
    }
    while !m.is_empty() {
        let n = match m.write_to(fd) {
            Ok(n) => n,
            Err(e) => {
                let errno = Errno::from_io_error(&e).unwrap_or(Errno::IO);
                // A datagram the sink's queue cannot take: dropped by the
                // kernel's own rule, counted here.
                if kind == Kind::Datagram
                    && (errno == Errno::NOBUFS
                        || errno == Errno::AGAIN
                        || errno == Errno::CONNREFUSED)
                {
                    flow.drop_block(&m);
                    return Ok(());
                }
                return Err(io("writev", errno));
            }
        };
        if n == 0 {
            return Err(SpliceError::SinkClosed);
        }
        if kind == Kind::Datagram {
            break;
        }
        m.clip_front(n).map_err(|_| SpliceError::SinkClosed)?;
    }
    flow.set_quenched(false);
    Ok(())
}
