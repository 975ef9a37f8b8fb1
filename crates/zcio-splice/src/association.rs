//! `Association`: a standing connection between a source and a sink that
//! moves data on the process's behalf (Fall's `splice` descriptor).
//!
//! Control follows the thesis: [`Association::run`] starts flow for an
//! [`Increment`] and blocks until it is moved, the source ends or an error
//! occurs (synchronous mode); [`Association::start`] returns at once and a
//! worker thread moves the increment, then reports through the callback
//! set with [`Association::on_complete`] (which may start the next
//! increment) and through a pollable descriptor ([`Association::as_fd`],
//! readable when a completion is waiting for [`Association::wait`]).
//! [`Association::stop`] stops flow within one step (a step moves at most
//! [`Association::STEP`] bytes); [`Association::status`] reads the status bits, the
//! bytes moved and the mover in use. Dropping the association stops it,
//! joins the worker and closes both descriptors.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};
use zcio_sys::registry::schema::association as counter;
use zcio_sys::registry::{Kind, StatsPage};
use zcio_sys::sync::AtomicU64;
use zcio_sys::wait::{wait_ready, Readiness, SpinBudget, Waited};

use super::blockio::{write_blocks, Flow};
use super::error::SpliceError;
use super::io_object::IoObject;
use super::io_object::Object;
use super::module::{Module, Stack, StackIndex};
use super::mover::{buffer_pool, module_error, Mover, Step, StepIo};
use super::mover_kind::MoverKind;
use crate::Errno;

/// How much data to move before control returns (Fall's increment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Increment {
    /// zcio chooses: [`Increment::DEFAULT_BYTES`] bytes.
    Default,
    /// Exactly this many bytes (fewer at the end of the source).
    Bytes(u64),
    /// Until the source ends (or an error, or `stop`).
    Infinite,
}

/// The default increment.
const DEFAULT_INCREMENT: u64 = 4 << 20;
/// The most one step moves (the latency of `stop`).
const STEP: u64 = 1 << 20;

/// The bound on the default wait for a completion (one hour): C's
/// `zcio_assoc_wait` with a negative timeout, Python's
/// `Association.wait()` and `Completions::next` (feature `tokio`) wait at
/// most this long, so an increment whose source never delivers
/// does not hold its waiter for good. ([`Association::wait`] takes its
/// timeout; `Duration::MAX` waits without a bound.)
const WAIT_BOUND: Duration = Duration::from_secs(3600);

impl Increment {
    /// The bytes of [`Increment::Default`]: what zcio chooses.
    pub const DEFAULT_BYTES: u64 = DEFAULT_INCREMENT;

    fn limit(self) -> Option<u64> {
        match self {
            Self::Default => Some(DEFAULT_INCREMENT),
            Self::Bytes(n) => Some(n),
            Self::Infinite => None,
        }
    }
}

/// The end of one increment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Bytes moved in this increment.
    pub moved: u64,
    /// The source reached its end.
    pub eof: bool,
    /// Flow was stopped with [`Association::stop`] before the increment.
    pub stopped: bool,
    /// The error that ended it, if any.
    pub error: Option<SpliceError>,
}

/// What the completion callback wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Leave flow stopped.
    Stop,
    /// Start another increment at once.
    Continue(Increment),
}

/// Read-only status (the thesis's status bits plus counters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Data is flowing (an increment is running).
    pub active: bool,
    /// Someone waits for the running increment (a synchronous caller or
    /// [`Association::wait`]).
    pub wanted: bool,
    /// An error ended the last increment.
    pub error: bool,
    /// The source has ended.
    pub eof: bool,
    /// Bytes taken from the source since the association was made (on
    /// the buffer path, blocks that flow control dropped are included
    /// here and counted in `dropped`).
    pub moved: u64,
    /// The mover in use.
    pub mover: MoverKind,
    /// Movers the kernel refused for this pair before the one in use.
    pub fell_back: Vec<(MoverKind, Errno)>,
    /// The modules on the association's stack, in data order.
    pub modules: Vec<String>,
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
    /// The source's label.
    pub source: String,
    /// The sink's label.
    pub sink: String,
    /// Increments started (the registry entry's counters, as `zcio stat`
    /// shows them).
    pub started: u64,
    /// Increments that ended without an error (moved, source ended or
    /// stopped).
    pub completed: u64,
    /// Increments that ended in an error.
    pub failed: u64,
}

/// The moving parts: I/O objects, mover, modules.
struct Engine {
    src: IoObject,
    dst: IoObject,
    mover: Mover,
    stack: Stack,
    flow: Flow,
    /// A file source's bytes when the association was made: its end before
    /// that many were taken is an error, never a success.
    expected: Option<u64>,
}

struct Shared {
    state: Mutex<State>,
    /// Bumped (by 2) after every change of `state` a thread may wait for;
    /// bit 0: a thread sleeps on it (see [`Changed`]).
    changed: AtomicU64,
    stop: AtomicBool,
    /// Readable while a stop is requested (wakes a poll on the source).
    stop_fd: OwnedFd,
    /// Readable while an asynchronous completion waits to be collected.
    done_fd: OwnedFd,
    /// Our live counters (`schema::association`), in our registry entry
    /// (a local page without one). Written only by whoever holds the
    /// engine (one increment at a time), so plain load-and-store adds.
    page: StatsPage,
}

type Callback = Box<dyn FnMut(&Completion) -> Next + Send>;

struct State {
    engine: Option<Engine>,
    active: bool,
    wanted: u32,
    error: bool,
    eof: bool,
    moved: u64,
    mover: MoverKind,
    fell_back: Vec<(MoverKind, Errno)>,
    /// Queued work for the worker.
    pending: Option<Increment>,
    completions: Vec<Completion>,
    callback: Option<Callback>,
    closing: bool,
    labels: (String, String),
    modules: Vec<String>,
    copied: u64,
    /// Blocks and bytes dropped by flow control, blocks the source lost.
    dropped: (u64, u64, u64),
    /// The modules' counters after the last step (readable while flowing).
    module_stats: Vec<(String, Vec<(&'static str, u64)>)>,
}

/// A standing association between a source and a sink.
pub struct Association {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

impl Association {
    /// How long a wait for a completion waits when it is given no timeout (one hour):
    /// `Completions::next`, Python's and C's default.
    pub const WAIT_BOUND: Duration = WAIT_BOUND;

    /// The most one step moves: how far an association runs on after `stop` is asked.
    pub const STEP: u64 = STEP;

    /// Associate `src` with `sink` (no data flows until an increment is
    /// started). The mover is chosen for the pair, fastest first.
    ///
    /// A source and sink that are the same file (by any path) are refused
    /// with [`SpliceError::SameFile`] before anything is written; a sink
    /// made with [`IoObject::truncate_on_start`] is truncated only after
    /// that check and every other set-up step succeeded.
    pub fn new(src: IoObject, mut sink: IoObject) -> Result<Self, SpliceError> {
        if src.file_id().is_some() && src.file_id() == sink.file_id() {
            return Err(SpliceError::SameFile {
                source_label: src.label().to_owned(),
                sink: sink.label().to_owned(),
            });
        }
        let kind = MoverKind::choose(&src, &sink, false);
        let efd = || {
            eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(|errno| {
                SpliceError::Setup {
                    op: "eventfd",
                    errno,
                }
            })
        };
        let labels = (src.label().to_owned(), sink.label().to_owned());
        let page = StatsPage::register(
            Kind::Association,
            &format!("{}→{}", labels.0, labels.1),
            0o600,
            &[],
        );
        let expected = src.size();
        let (stop_fd, done_fd) = (efd()?, efd()?);
        let pool = buffer_pool();
        if let Object::Channel(ch) = &sink.obj {
            // The receiver maps the pool's regions now, not on the first block.
            ch.share_pool(&pool).map_err(|e| SpliceError::Zcio {
                op: "share the association's pool with the channel's receiver",
                message: e.to_string(),
            })?;
        }
        let flow = Flow {
            drop_when_behind: src.attrs().active,
            ..Flow::default()
        };
        // The last fallible step: nothing is destroyed before the checks.
        sink.apply_truncate()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                engine: Some(Engine {
                    src,
                    dst: sink,
                    mover: Mover::new(kind, pool.clone()),
                    stack: Stack::new(pool),
                    flow,
                    expected,
                }),
                active: false,
                wanted: 0,
                error: false,
                eof: false,
                moved: 0,
                mover: kind,
                fell_back: Vec::new(),
                pending: None,
                completions: Vec::new(),
                callback: None,
                closing: false,
                labels,
                modules: Vec::new(),
                copied: 0,
                dropped: (0, 0, 0),
                module_stats: Vec::new(),
            }),
            changed: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            stop_fd,
            done_fd,
            page,
        });
        Ok(Self {
            shared,
            worker: None,
        })
    }

    /// Synchronous mode: move `inc`, blocking until it is moved, the
    /// source ends, an error occurs or another thread calls `stop`.
    pub fn run(&mut self, inc: Increment) -> Result<Completion, SpliceError> {
        let mut st = self.shared.lock();
        if st.active || st.pending.is_some() {
            return Err(SpliceError::Busy);
        }
        let Some(mut engine) = st.engine.take() else {
            return Err(SpliceError::Busy);
        };
        // Cleared before `active` is seen: a stop from another thread
        // (a `Remote`) that saw the increment running is never lost.
        self.shared.clear_stop();
        st.active = true;
        st.wanted += 1;
        drop(st);
        let c = self.shared.move_increment(&mut engine, inc);
        let mut st = self.shared.lock();
        st.engine = Some(engine);
        st.active = false;
        st.wanted -= 1;
        self.shared.notify();
        drop(st);
        match c.error.clone() {
            Some(e) if c.moved == 0 => Err(e),
            _ => Ok(c),
        }
    }

    /// Asynchronous mode: start moving `inc` on the association's worker
    /// thread and return at once.
    pub fn start(&mut self, inc: Increment) -> Result<(), SpliceError> {
        self.ensure_worker()?;
        let mut st = self.shared.lock();
        if st.active || st.pending.is_some() {
            return Err(SpliceError::Busy);
        }
        st.pending = Some(inc);
        st.active = true;
        self.shared.clear_stop();
        self.shared.notify();
        Ok(())
    }

    /// Call `f` on the worker thread when an asynchronous increment ends;
    /// its answer may start the next one.
    pub fn on_complete(&mut self, f: impl FnMut(&Completion) -> Next + Send + 'static) {
        self.shared.lock().callback = Some(Box::new(f));
    }

    /// Stop flow (within one step). A synchronous `run` on another thread
    /// returns with `stopped`.
    pub fn stop(&self) {
        self.shared.request_stop();
    }

    /// Wait up to `timeout` for the next asynchronous completion
    /// (`Duration::MAX`: without a bound; [`Association::WAIT_BOUND`] is the bound of
    /// the frontends' default wait). `None` when none came in time, or
    /// when no increment is running or queued.
    pub fn wait(&self, timeout: Duration) -> Option<Completion> {
        self.shared.wait(timeout)
    }

    /// A [`Remote`]: stop, wait and status from other threads while the
    /// association itself is borrowed (a synchronous [`Association::run`]
    /// blocks in it) — what the C and Python frontends hold beside it.
    pub fn remote(&self) -> Remote {
        Remote {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Flow control: whether blocks the sink cannot take at once are
    /// dropped (and counted in [`Status::dropped`]) instead of waited for.
    /// The default follows the source's attributes: on for active sources
    /// (UDP sockets, rings), off for passive ones, which are paced by the
    /// sink. Between increments only.
    pub fn set_drop_when_behind(&mut self, on: bool) -> Result<(), SpliceError> {
        self.with_engine(|e, _| {
            e.flow.drop_when_behind = on;
            Ok(())
        })
    }

    /// The quench hook: `f(true)` when the sink stops taking data at once
    /// (the source is being held back, or its blocks dropped), `f(false)`
    /// when it takes data again. Runs on the thread that moves the data.
    /// Between increments only.
    pub fn on_quench(&mut self, f: impl FnMut(bool) + Send + 'static) -> Result<(), SpliceError> {
        self.with_engine(|e, _| {
            e.flow.quench = Some(Box::new(f));
            Ok(())
        })
    }

    /// Push a processing module at the sink end of the association's
    /// stack (between increments). The first module moves the association
    /// from its kernel fast path to the buffer path.
    pub fn push(&mut self, m: Box<dyn Module>) -> Result<(), SpliceError> {
        self.with_engine(|e, st| {
            e.stack.push(m);
            e.mover.set_kind(MoverKind::Buffer);
            st.mover = MoverKind::Buffer;
            sync_modules(e, st);
            Ok(())
        })
    }

    /// End the stream at this point, before the source's end (a copy
    /// limited to a byte count): every stacked module flushes what it
    /// holds through the modules after it to the sink, as at the end of
    /// the source (a zstd frame or a sealed stream is complete). Later
    /// increments report the end at once. Between increments only;
    /// nothing happens when the source already ended.
    pub fn finish(&mut self) -> Result<(), SpliceError> {
        let stop = &self.shared.stop;
        self.with_engine(|e, st| {
            let io = StepIo {
                src: &mut e.src,
                dst: &mut e.dst,
                stack: &mut e.stack,
                flow: &mut e.flow,
                stop,
            };
            let r = e.mover.finish_early(io);
            // Ended on purpose: not a source that fell short.
            e.expected = None;
            st.eof = true;
            sync_modules(e, st);
            r
        })
    }

    /// Pop the module at the sink end (between increments): its buffered
    /// output (a compressor's frame end, …) is flushed to the sink first.
    /// Popping the last module moves the association back to the fastest
    /// mover for its pair. `None` when no module is stacked.
    pub fn pop(&mut self) -> Result<Option<Box<dyn Module>>, SpliceError> {
        self.with_engine(|e, st| {
            // After the end of the source the stack already finished.
            let popped = if e.mover.finished() {
                e.stack.pop().map(|m| (m, Vec::new()))
            } else {
                e.stack.pop_finished().map_err(module_error)?
            };
            let Some((m, out)) = popped else {
                return Ok(None);
            };
            let written = write_blocks(&mut e.dst, out, &mut e.flow, &self.shared.stop);
            if e.stack.is_empty() {
                let kind = MoverKind::choose(&e.src, &e.dst, false);
                e.mover.set_kind(kind);
                st.mover = kind;
            }
            sync_modules(e, st);
            written.map(|()| Some(m))
        })
    }

    /// Control read (`value == None`) or write of a stacked module, by
    /// position or name (the thesis's control read/write; every module
    /// answers `"stats"`). Between increments only.
    pub fn control<'a>(
        &mut self,
        which: impl Into<StackIndex<'a>>,
        key: &str,
        value: Option<&str>,
    ) -> Result<String, SpliceError> {
        let which = which.into();
        self.with_engine(|e, _| e.stack.control(which, key, value).map_err(module_error))
    }

    /// Every stacked module's counters (name, counters) as of the last
    /// step; readable while data flows.
    pub fn module_stats(&self) -> Vec<(String, Vec<(&'static str, u64)>)> {
        self.shared.module_stats()
    }

    /// Run `f` on the engine while no increment runs.
    fn with_engine<R>(
        &self,
        f: impl FnOnce(&mut Engine, &mut State) -> Result<R, SpliceError>,
    ) -> Result<R, SpliceError> {
        let mut st = self.shared.lock();
        if st.active || st.pending.is_some() {
            return Err(SpliceError::Busy);
        }
        let mut engine = st.engine.take().ok_or(SpliceError::Busy)?;
        let r = f(&mut engine, &mut st);
        st.engine = Some(engine);
        r
    }

    /// The status bits and counters.
    pub fn status(&self) -> Status {
        self.shared.status()
    }

    /// Stop, join the worker and give back the final status (the
    /// descriptors are closed). Dropping does the same.
    pub fn close(mut self) -> Status {
        self.shutdown();
        self.status()
    }

    fn shutdown(&mut self) {
        self.stop();
        self.shared.lock().closing = true;
        self.shared.notify();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
        // Closes both descriptors.
        self.shared.lock().engine = None;
    }

    fn ensure_worker(&mut self) -> Result<(), SpliceError> {
        if self.worker.as_ref().is_some_and(|w| !w.is_finished()) {
            return Ok(());
        }
        if self.worker.is_some() {
            return Err(SpliceError::WorkerGone);
        }
        let shared = self.shared.clone();
        let w = std::thread::Builder::new()
            .name("zcio-splice".into())
            .spawn(move || shared.worker())
            .map_err(|e| SpliceError::Setup {
                op: "spawn worker thread",
                errno: Errno::from_io_error(&e).unwrap_or(Errno::AGAIN),
            })?;
        self.worker = Some(w);
        Ok(())
    }
}

/// Stop, wait and status of an [`Association`] from any thread, while the
/// association itself is borrowed elsewhere (by a synchronous
/// [`Association::run`], say). Made by [`Association::remote`]; it keeps
/// no descriptor of the association's I/O objects open, and after the
/// association is closed its calls are harmless (status stays the final
/// one, wait returns `None`).
#[derive(Clone)]
pub struct Remote {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote").finish_non_exhaustive()
    }
}

impl Remote {
    /// [`Association::stop`].
    pub fn stop(&self) {
        self.shared.request_stop();
    }

    /// [`Association::wait`].
    pub fn wait(&self, timeout: Duration) -> Option<Completion> {
        self.shared.wait(timeout)
    }

    /// [`Association::status`].
    pub fn status(&self) -> Status {
        self.shared.status()
    }

    /// [`Association::module_stats`].
    pub fn module_stats(&self) -> Vec<(String, Vec<(&'static str, u64)>)> {
        self.shared.module_stats()
    }
}

impl AsFd for Remote {
    /// [`Association::as_fd`]: readable while a completion waits.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.done_fd.as_fd()
    }
}

impl AsFd for Association {
    /// Readable while an asynchronous completion waits for [`Association::wait`].
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.done_fd.as_fd()
    }
}

impl Drop for Association {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Copy the stack's names and counters into the status.
fn sync_modules(e: &Engine, st: &mut State) {
    if st.modules.len() != e.stack.len() {
        st.modules = e.stack.names().into_iter().map(str::to_owned).collect();
    }
    st.copied = e.stack.copied();
    st.module_stats = e.stack.stats();
}

/// A change of an association's state, as the one wait loop
/// (`zcio_sys::wait::wait_ready`) sees it: the change count moved past
/// `seen`; the sleep flag is bit 0 of the count's word.
struct Changed<'a> {
    word: &'a AtomicU64,
    seen: u64,
}

impl Readiness for Changed<'_> {
    fn is_ready(&mut self) -> bool {
        // SYNC: Acquire pairs with the bump in `Shared::notify`.
        self.word.load(Ordering::Acquire) & !1 != self.seen & !1
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        // SYNC: the RMW sets the flag and returns the latest count; a
        // `notify` after it changes the word (and wakes), one before it
        // moved the count we compare.
        let old = self.word.fetch_or(1, Ordering::AcqRel);
        (old & !1 == self.seen & !1).then_some((old | 1) as u32)
    }

    fn sleep(&mut self, armed: u32, slice: Duration) {
        zcio_sys::sync::futex_wait(self.word, armed, slice);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = rustix::io::write(&self.stop_fd, &1u64.to_ne_bytes());
        // A queued increment stays queued: the worker takes it, sees the
        // stop at once and reports it (a completion with `stopped`), so
        // `active` ends and `wait` gets a completion for every `start`.
        self.notify();
    }

    fn wait(&self, timeout: Duration) -> Option<Completion> {
        // A timeout too long to represent waits without a deadline.
        let deadline = Instant::now().checked_add(timeout);
        self.lock().wanted += 1;
        loop {
            let seen = self.changes();
            let mut st = self.lock();
            if !st.completions.is_empty() {
                let c = st.completions.remove(0);
                if st.completions.is_empty() {
                    let mut b = [0u8; 8];
                    let _ = rustix::io::read(&self.done_fd, &mut b);
                }
                st.wanted -= 1;
                return Some(c);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) || (!st.active && st.pending.is_none()) {
                st.wanted -= 1;
                return None;
            }
            drop(st);
            self.wait_change(seen, deadline);
        }
    }

    /// The state's change count now: read it before looking at the state,
    /// then [`Shared::wait_change`] with it.
    fn changes(&self) -> u64 {
        // SYNC: Acquire pairs with the AcqRel bump in `notify` (which
        // follows the state change under the lock).
        self.changed.load(Ordering::Acquire)
    }

    /// Sleep until the state changes after `seen` was read (or `deadline`
    /// passes), on the one wait loop. No spin: an increment moves blocks
    /// through system calls, its end is far from microseconds away (as
    /// the condition variable this replaced, which never spun).
    fn wait_change(&self, seen: u64, deadline: Option<Instant>) {
        let mut no_spin = SpinBudget::new(Duration::ZERO);
        let mut c = Changed {
            word: &self.changed,
            seen,
        };
        let _: Waited = wait_ready(&mut c, &mut no_spin, deadline);
    }

    /// The state changed: wake every thread that sleeps on it.
    fn notify(&self) {
        // SYNC: AcqRel bump (clearing the sleep flag); pairs with the
        // Acquire in `changes` and the flag RMW in `Changed::prepare_sleep`:
        // a sleeper flagged before this bump is woken (and its futex value
        // is stale), one after it sees the new count.
        let old = self
            .changed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                Some(v.wrapping_add(2) & !1)
            })
            .unwrap_or_else(|v| v);
        if old & 1 != 0 {
            zcio_sys::sync::futex_wake(&self.changed);
        }
    }
    fn status(&self) -> Status {
        let st = self.lock();
        Status {
            active: st.active,
            wanted: st.wanted > 0,
            error: st.error,
            eof: st.eof,
            moved: st.moved,
            mover: st.mover,
            fell_back: st.fell_back.clone(),
            modules: st.modules.clone(),
            copied: st.copied,
            dropped: st.dropped.0,
            dropped_bytes: st.dropped.1,
            lost: st.dropped.2,
            source: st.labels.0.clone(),
            sink: st.labels.1.clone(),
            started: self.page.get(counter::STARTED),
            completed: self.page.get(counter::COMPLETED),
            failed: self.page.get(counter::FAILED),
        }
    }

    fn module_stats(&self) -> Vec<(String, Vec<(&'static str, u64)>)> {
        self.lock().module_stats.clone()
    }

    fn clear_stop(&self) {
        self.stop.store(false, Ordering::SeqCst);
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&self.stop_fd, &mut b);
    }

    /// The worker: take queued increments, move them, report.
    fn worker(&self) {
        loop {
            let (inc, st) = loop {
                let seen = self.changes();
                let mut st = self.lock();
                if st.closing {
                    return;
                }
                if let Some(inc) = st.pending.take() {
                    break (inc, st);
                }
                drop(st);
                self.wait_change(seen, None);
            };
            let mut st = st;
            let Some(mut engine) = st.engine.take() else {
                return;
            };
            drop(st);
            let c = self.move_increment(&mut engine, inc);
            let mut st = self.lock();
            st.engine = Some(engine);
            let mut cb = st.callback.take();
            drop(st);
            let next = cb.as_mut().map(|f| f(&c)).unwrap_or(Next::Stop);
            let mut st = self.lock();
            if st.callback.is_none() {
                st.callback = cb;
            }
            match next {
                Next::Continue(inc) if !c.eof && c.error.is_none() && !c.stopped && !st.closing => {
                    st.pending = Some(inc);
                }
                _ => {
                    st.active = false;
                }
            }
            st.completions.push(c);
            let _ = rustix::io::write(&self.done_fd, &1u64.to_ne_bytes());
            drop(st);
            self.notify();
        }
    }

    /// Move one increment (called without the state lock, by the holder
    /// of the engine: the only writer of the counters).
    fn move_increment(&self, e: &mut Engine, inc: Increment) -> Completion {
        self.page.add(counter::STARTED, 1);
        self.page.set(counter::RUNNING, 1);
        let c = self.move_increment_uncounted(e, inc);
        let ended = if c.error.is_some() {
            counter::FAILED
        } else {
            counter::COMPLETED
        };
        self.page.add(ended, 1);
        self.page.set(counter::RUNNING, 0);
        c
    }

    fn move_increment_uncounted(&self, e: &mut Engine, inc: Increment) -> Completion {
        let limit = inc.limit();
        let mut c = Completion {
            moved: 0,
            eof: false,
            stopped: false,
            error: None,
        };
        loop {
            if self.stop.load(Ordering::SeqCst) {
                c.stopped = true;
                break;
            }
            let left = limit.map_or(STEP, |l| (l - c.moved).min(STEP));
            if left == 0 {
                break;
            }
            if let Some(fd) = e.src.poll_fd() {
                match self.ready(fd) {
                    Ok(true) => {}
                    Ok(false) => continue, // a stop was requested
                    Err(err) => {
                        c.error = Some(err);
                        break;
                    }
                }
            }
            let io = StepIo {
                src: &mut e.src,
                dst: &mut e.dst,
                stack: &mut e.stack,
                flow: &mut e.flow,
                stop: &self.stop,
            };
            let r = e.mover.step(io, left);
            let mut st = self.lock();
            st.mover = e.mover.kind();
            st.dropped = (e.flow.dropped, e.flow.dropped_bytes, e.flow.lost);
            if !e.stack.is_empty() {
                sync_modules(e, &mut st);
            }
            if st.fell_back.len() != e.mover.fell_back().len() {
                st.fell_back = e.mover.fell_back().to_vec();
            }
            match r {
                Ok(Step::Moved(n)) => {
                    c.moved += n;
                    st.moved += n;
                    self.page.add(counter::BYTES, n);
                }
                Ok(Step::Eof) => {
                    c.eof = true;
                    st.eof = true;
                    if let Some(expected) = e.expected.filter(|&x| st.moved < x) {
                        st.error = true;
                        c.error = Some(SpliceError::Short {
                            source_label: st.labels.0.clone(),
                            expected,
                            moved: st.moved,
                        });
                    }
                    break;
                }
                Err(err) => {
                    st.error = true;
                    c.error = Some(err);
                    break;
                }
            }
        }
        if c.error.is_none() {
            self.lock().error = false;
        }
        c
    }

    /// Wait until `src` is readable (true) or a stop is requested (false).
    fn ready(&self, src: BorrowedFd<'_>) -> Result<bool, SpliceError> {
        loop {
            let mut fds = [
                PollFd::new(&src, PollFlags::IN),
                PollFd::new(&self.stop_fd, PollFlags::IN),
            ];
            let t = Timespec {
                tv_sec: 1,
                tv_nsec: 0,
            };
            match poll(&mut fds, Some(&t)) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(errno) => return Err(SpliceError::Setup { op: "poll", errno }),
            }
            if !fds[1].revents().is_empty() || self.stop.load(Ordering::SeqCst) {
                return Ok(false);
            }
            if !fds[0].revents().is_empty() {
                return Ok(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(tag: &str, bytes: &[u8]) -> (std::path::PathBuf, IoObject) {
        let p = std::env::temp_dir().join(format!("zcio-assoc-{tag}-{}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        (
            p.clone(),
            IoObject::new(f.into(), p.display().to_string()).unwrap(),
        )
    }

    #[test]
    #[cfg_attr(miri, ignore = "files, eventfd and splice")]
    fn counters_move_with_the_increments() {
        let (sp, src) = file("src", &[5u8; 10_000]);
        let (dp, dst) = file("dst", b"");
        let mut a = Association::new(src, dst).unwrap();
        let s = a.status();
        assert_eq!((s.started, s.completed, s.failed, s.moved), (0, 0, 0, 0));
        let c = a.run(Increment::Bytes(4000)).unwrap();
        assert_eq!(c.moved, 4000);
        let s = a.status();
        assert_eq!((s.started, s.completed, s.failed), (1, 1, 0));
        assert_eq!((s.moved, s.active), (4000, false));
        a.start(Increment::Infinite).unwrap();
        let c = a.wait(Duration::from_secs(60)).unwrap();
        assert!(c.eof);
        let s = a.remote().status();
        assert_eq!((s.started, s.completed, s.moved), (2, 2, 10_000));
        drop(a);
        let _ = std::fs::remove_file(sp);
        let _ = std::fs::remove_file(dp);
    }
}
