//! Movers: the ways bytes get from a source to a sink, fastest first.
//!
//! | pair | mover |
//! |---|---|
//! | file → file | `copy_file_range` (in-kernel; may share extents) |
//! | file → anything else | `sendfile` |
//! | pipe → anything, anything → pipe | `splice` directly |
//! | socket → file/socket | `splice` through an internal pipe |
//! | datagram sockets, processing modules | the buffer path: read into pool buffers, run the modules, write them out |
//!
//! A mover that the kernel refuses for this pair before it moved anything
//! (`EXDEV` from `copy_file_range` across filesystems on older kernels,
//! `EINVAL`/`ENOSYS`/`EOPNOTSUPP` for unsupported descriptors) hands over
//! to the next one, and the status says which mover runs and why.
//! `SPLICE_F_MOVE` is passed but is a no-op on Linux: pages are not moved,
//! the kernel copies from the pipe's pages where it must.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicBool;

use rustix::pipe::{pipe_with, splice, PipeFlags, SpliceFlags};

use super::blockio::{read_block, read_into_ring, write_blocks, Flow, Got};
use super::error::SpliceError;
use super::io_object::{IoObject, Kind};
use super::module::{ModuleError, Stack};
use super::mover_kind::MoverKind;
use crate::buf::{Pool, PoolConfig};
use crate::Errno;

impl MoverKind {
    /// The fastest mover for `src` → `dst`; `buffered` forces the buffer
    /// path (modules are stacked).
    pub fn choose(src: &IoObject, dst: &IoObject, buffered: bool) -> Self {
        match (src.kind(), dst.kind()) {
            _ if buffered => Self::Buffer,
            (Kind::Datagram | Kind::Ring | Kind::Channel, _)
            | (_, Kind::Datagram | Kind::Ring | Kind::Channel) => Self::Buffer,
            (Kind::File, Kind::File) => Self::CopyFileRange,
            (Kind::File, _) => Self::Sendfile,
            _ => Self::Splice,
        }
    }

    /// The mover to try when the kernel refuses this one for the pair.
    fn fallback(self, src: &IoObject, dst: &IoObject) -> Option<Self> {
        match self {
            Self::CopyFileRange => Some(Self::Sendfile),
            Self::Sendfile if src.kind() == Kind::Pipe || dst.kind() == Kind::Pipe => {
                Some(Self::Splice)
            }
            Self::Sendfile | Self::Splice => Some(Self::Buffer),
            Self::Buffer => None,
        }
    }
}

/// Errors that mean "this mover does not work for this pair".
fn unsupported(e: Errno) -> bool {
    e == Errno::XDEV || e == Errno::INVAL || e == Errno::NOSYS || e == Errno::OPNOTSUPP
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Bytes that reached the sink.
    Moved(u64),
    /// The source is at its end (everything before it reached the sink).
    Eof,
}

/// Bytes per buffer-path read (stream sources); a datagram gets 64 KiB.
pub(crate) const BLOCK: usize = 256 << 10;
/// Internal pipe size asked for (the kernel may cap it at
/// `/proc/sys/fs/pipe-max-size`).
const PIPE_SIZE: usize = 1 << 20;

/// A mover with its state (internal pipe, buffer pool).
pub(crate) struct Mover {
    kind: MoverKind,
    /// Bytes this mover moved (a refusal after progress is an error, not a
    /// reason to fall back).
    moved: u64,
    /// Why the mover is not the first choice: (refused mover, its errno).
    fell_back: Vec<(MoverKind, Errno)>,
    pipe: Option<(OwnedFd, OwnedFd, usize)>,
    /// Buffers of the buffer path (the modules' output comes from the
    /// same pool).
    pool: Pool,
    finished: bool,
}

/// The pool of an association's buffer path: 4 MiB chunks, at most 4, not
/// populated up front (an association on a kernel fast path never touches it).
pub(crate) fn buffer_pool() -> Pool {
    Pool::new(PoolConfig {
        chunk_size: 4 << 20,
        max_chunks: 4,
        populate: false,
        ..PoolConfig::named("splice")
    })
}

/// A module failure as an association error.
pub(crate) fn module_error(e: ModuleError) -> SpliceError {
    SpliceError::Module {
        module: e.module().to_owned(),
        message: e.to_string(),
    }
}

impl Mover {
    pub(crate) fn new(kind: MoverKind, pool: Pool) -> Self {
        Self {
            kind,
            moved: 0,
            fell_back: Vec::new(),
            pipe: None,
            pool,
            finished: false,
        }
    }

    /// Whether the buffer path saw the end of the source (and finished
    /// the module stack).
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    /// End the stream here, before the source's end: the stack flushes
    /// what it holds (through the modules after each) to the sink, and no
    /// step moves data afterwards.
    pub(crate) fn finish_early(&mut self, io: StepIo<'_>) -> Result<(), SpliceError> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        let out = io.stack.finish().map_err(module_error)?;
        write_blocks(io.dst, out, io.flow, io.stop)
    }

    /// Switch to `kind` between steps (a module was pushed or the last one
    /// popped). The internal pipe is empty between steps.
    pub(crate) fn set_kind(&mut self, kind: MoverKind) {
        self.kind = kind;
    }

    pub(crate) fn kind(&self) -> MoverKind {
        self.kind
    }

    pub(crate) fn fell_back(&self) -> &[(MoverKind, Errno)] {
        &self.fell_back
    }

    /// Move up to `max` bytes (at least 1). A refusal of the pair before
    /// any progress switches to the next mover and retries.
    pub(crate) fn step(&mut self, io: StepIo<'_>, max: u64) -> Result<Step, SpliceError> {
        if self.finished {
            // The stream was ended early (`Association::finish`).
            return Ok(Step::Eof);
        }
        loop {
            let max = usize::try_from(max).unwrap_or(usize::MAX).max(1);
            let fds = (io.src.fd(), io.dst.fd());
            let (s, d) = match (self.kind, fds) {
                (MoverKind::Buffer, _) | (_, (None, _)) | (_, (_, None)) => {
                    self.kind = MoverKind::Buffer;
                    return self.buffer_step(io, max);
                }
                (_, (Some(s), Some(d))) => (s, d),
            };
            let r = match self.kind {
                MoverKind::CopyFileRange => {
                    rustix::fs::copy_file_range(s, None, d, None, max.min(1 << 30))
                        .map(|n| self.done(n))
                        .map_err(|e| ("copy_file_range", e))
                }
                MoverKind::Sendfile => rustix::fs::sendfile(d, s, None, max.min(1 << 30))
                    .map(|n| self.done(n))
                    .map_err(|e| ("sendfile", e)),
                MoverKind::Splice => self.splice_step(s, io.src.kind(), d, io.dst.kind(), max),
                MoverKind::Buffer => unreachable!("handled above"),
            };
            match r {
                Ok(s) => return Ok(s),
                Err((_, e)) if self.moved == 0 && unsupported(e) => {
                    match self.kind.fallback(io.src, io.dst) {
                        Some(next) => {
                            self.fell_back.push((self.kind, e));
                            self.kind = next;
                        }
                        None => return Err(self.io("move", e)),
                    }
                }
                Err((op, e)) => return Err(self.io(op, e)),
            }
        }
    }

    fn done(&mut self, n: usize) -> Step {
        if n == 0 {
            Step::Eof
        } else {
            self.moved += n as u64;
            Step::Moved(n as u64)
        }
    }

    fn io(&self, op: &'static str, errno: Errno) -> SpliceError {
        SpliceError::Io {
            op,
            mover: self.kind,
            errno,
        }
    }

    fn splice_step(
        &mut self,
        src: BorrowedFd<'_>,
        src_kind: Kind,
        dst: BorrowedFd<'_>,
        dst_kind: Kind,
        max: usize,
    ) -> Result<Step, (&'static str, Errno)> {
        let flags = SpliceFlags::MOVE | SpliceFlags::MORE;
        if src_kind == Kind::Pipe || dst_kind == Kind::Pipe {
            let n =
                splice(src, None, dst, None, max.min(1 << 30), flags).map_err(|e| ("splice", e))?;
            return Ok(self.done(n));
        }
        if self.pipe.is_none() {
            let (r, w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| ("pipe2", e))?;
            let cap = rustix::pipe::fcntl_setpipe_size(&w, PIPE_SIZE)
                .or_else(|_| rustix::pipe::fcntl_getpipe_size(&w))
                .map_err(|e| ("fcntl(F_GETPIPE_SZ)", e))?;
            self.pipe = Some((r, w, cap));
        }
        let Some((r, w, cap)) = &self.pipe else {
            unreachable!("created just above")
        };
        let n = splice(src, None, w, None, max.min(*cap), flags).map_err(|e| ("splice", e))?;
        if n == 0 {
            return Ok(Step::Eof);
        }
        // Drain the pipe completely, so the next step starts empty.
        let mut left = n;
        while left > 0 {
            let k = splice(r, None, dst, None, left, flags).map_err(|e| ("splice", e))?;
            if k == 0 {
                return Err(("splice", Errno::PIPE));
            }
            left -= k;
        }
        Ok(self.done(n))
    }

    fn buffer_step(&mut self, io: StepIo<'_>, max: usize) -> Result<Step, SpliceError> {
        let StepIo {
            src,
            dst,
            stack,
            flow,
            stop,
        } = io;
        let want = BLOCK.min(max).max(1);
        let got = match stack.is_empty() {
            true => read_into_ring(src, dst, want, flow),
            false => None,
        };
        let got = match got {
            Some(g) => g?,
            None => read_block(src, &self.pool, want, flow)?,
        };
        let block = match got {
            Got::Block(m) => m,
            Got::Written(n) => return Ok(self.done(n)),
            Got::Idle => return Ok(Step::Moved(0)),
            Got::Eof => {
                if !self.finished {
                    self.finished = true;
                    let out = stack.finish().map_err(module_error)?;
                    write_blocks(dst, out, flow, stop)?;
                }
                return Ok(Step::Eof);
            }
        };
        let n = block.len();
        let out = stack.put(block).map_err(module_error)?;
        write_blocks(dst, out, flow, stop)?;
        self.moved += n as u64;
        Ok(Step::Moved(n as u64))
    }
}

/// What one step works on.
pub(crate) struct StepIo<'a> {
    pub src: &'a mut IoObject,
    pub dst: &'a mut IoObject,
    pub stack: &'a mut Stack,
    pub flow: &'a mut Flow,
    pub stop: &'a AtomicBool,
}
