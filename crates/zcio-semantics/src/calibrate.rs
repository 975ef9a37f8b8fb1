//! Measuring the cost model's primitive operations on this machine
//! (`zcio calibrate`): each [`Op`] at several sizes, the median of
//! repeated runs per size, then a least-squares line ([`Linear::fit`](crate::cost::Linear::fit)) with its
//! R² and largest relative residual (Genie's Tables 6–8).
//!
//! Every measurement uses zcio's own primitives: [`crate::copy`] and the
//! volatile copy, [`Region`] for region create / seal / map, a
//! [`Channel::pair`] for reference passing, and the raw system calls
//! (`mprotect`, `mlock`, `mremap`, `mmap`) on memfd mappings for the page
//! operations. `tcow_fault` goes through an arena's real fault path
//! (lend write-protected, then write: fault, page copy, mapping swap);
//! [`Opts::tcow`] replaces that measurement.
//!
//! Every loop is bounded: a fixed list of sizes, and per size at most a
//! fixed number of repetitions within a time budget (quick: at most 21
//! within 50 ms, full: 101 within 300 ms, at least 3 / 5), so a run is
//! bounded by points × budget (quick < 20 s, full < 2 min, even on a slow
//! machine). On the project's 2-CPU machine `quick` takes 0.3 s and a full
//! run 3 s.
//!
//! `ref_pass` is measured with both ends of a [`Channel::pair`] on one
//! thread: the CPU cost of passing a reference (allocate, freeze, send,
//! receive, release, reclaim), without the wake-up of a sleeping peer,
//! which is common to every semantics (Genie's "base latency").

use std::ffi::c_void;
use std::os::fd::AsFd;
use std::ptr;
use std::time::{Duration, Instant};

use rustix::mm::{self, MapFlags, MprotectFlags, ProtFlags};
use thiserror::Error;

use super::cost::{fit_curve, CostModel, FitQuality, Op, Source};
use crate::region::{Region, RegionError};
use crate::sys::{memfd, Errno};
use crate::{Channel, ChannelConfig, Msg, Pool, PoolConfig};

/// How to calibrate.
#[derive(Default)]
pub struct Opts {
    /// Fewer sizes and repetitions (a few seconds instead of tens).
    pub quick: bool,
    /// Measures `tcow_fault` instead of the arena: given a page count,
    /// write to that many write-protected in-flight pages and return the
    /// nanoseconds it took (faults, page copies, remaps).
    #[allow(clippy::type_complexity)]
    pub tcow: Option<Box<dyn Fn(usize) -> Result<f64, String>>>,
}

impl std::fmt::Debug for Opts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opts")
            .field("quick", &self.quick)
            .field("tcow", &self.tcow.as_ref().map(|_| "hook"))
            .finish()
    }
}

/// Where a calibration is: about to measure `op` at `bytes` (point `done`
/// of `total`).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// The operation being measured.
    pub op: Op,
    /// The size being measured, bytes.
    pub bytes: usize,
    /// Points measured so far.
    pub done: usize,
    /// Points in the whole run.
    pub total: usize,
}

/// Failure of a calibration run.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CalibrateError {
    /// A system call failed; the errno is kept.
    #[error("calibrating {op}: {call} failed: {errno}")]
    Os {
        /// The operation being measured.
        op: Op,
        /// The call that failed.
        call: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
    /// Creating or attaching a region failed.
    #[error("calibrating {op}: {err}")]
    Region {
        /// The operation being measured.
        op: Op,
        /// The cause.
        #[source]
        err: RegionError,
    },
    /// The channel used for reference passing failed.
    #[error("calibrating ref_pass: {0}")]
    Channel(String),
    /// The `tcow` hook failed.
    #[error("calibrating tcow_fault: {0}")]
    Tcow(String),
    /// An arena used to measure swapping failed.
    #[error("calibrating {op}: {detail}")]
    Arena {
        /// The operation being measured.
        op: Op,
        /// What failed.
        detail: String,
    },
}

/// The samples behind one operation's line.
#[derive(Clone, Debug)]
pub struct OpSamples {
    /// The operation.
    pub op: Op,
    /// `(bytes, median ns)` per size.
    pub points: Vec<(usize, f64)>,
}

/// A finished calibration: the model, the samples it was fitted to, and
/// notes on what was bounded or left out.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// The fitted model ([`Source::Measured`]).
    pub model: CostModel,
    /// The medians per operation and size.
    pub samples: Vec<OpSamples>,
    /// What was limited or not measured, and why.
    pub notes: Vec<String>,
}

/// Measure every operation and fit the model.
pub fn measure(
    opts: &Opts,
    progress: &mut dyn FnMut(Progress),
) -> Result<CostModel, CalibrateError> {
    measure_with_samples(opts, progress).map(|c| c.model)
}

/// Repetitions and time budget per size.
#[derive(Clone, Copy)]
struct Budget {
    min_reps: usize,
    max_reps: usize,
    per_point: Duration,
}

fn os(op: Op, call: &'static str) -> impl FnOnce(Errno) -> CalibrateError {
    move |errno| CalibrateError::Os { op, call, errno }
}

fn region(op: Op) -> impl FnOnce(RegionError) -> CalibrateError {
    move |err| CalibrateError::Region { op, err }
}

/// The median of repeated measurements of `one` (which returns the
/// nanoseconds of one run), after one warm-up run.
fn median(
    b: Budget,
    mut one: impl FnMut() -> Result<f64, CalibrateError>,
) -> Result<f64, CalibrateError> {
    one()?;
    let start = Instant::now();
    let mut v = Vec::with_capacity(b.max_reps);
    while v.len() < b.max_reps && (v.len() < b.min_reps || start.elapsed() < b.per_point) {
        v.push(one()?);
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

fn time(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_nanos() as f64
}

fn time_r<E>(f: impl FnOnce() -> Result<(), E>) -> Result<f64, E> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_nanos() as f64)
}

/// Measure every operation and fit the model, keeping the samples.
pub fn measure_with_samples(
    opts: &Opts,
    progress: &mut dyn FnMut(Progress),
) -> Result<Calibration, CalibrateError> {
    let page = crate::sys::page_size();
    let budget = if opts.quick {
        Budget {
            min_reps: 3,
            max_reps: 21,
            per_point: Duration::from_millis(50),
        }
    } else {
        Budget {
            min_reps: 5,
            max_reps: 101,
            per_point: Duration::from_millis(300),
        }
    };
    let bytes: Vec<usize> = if opts.quick {
        vec![
            64,
            1 << 10,
            4 << 10,
            16 << 10,
            64 << 10,
            256 << 10,
            1 << 20,
            4 << 20,
        ]
    } else {
        // 64 B … 16 MiB by fours, and the doublings in between from
        // 256 KiB on, where copies leave the caches (the knot).
        let mut v: Vec<usize> = (0..10).map(|i| 64usize << (2 * i)).collect();
        v.extend([512 << 10, 2 << 20, 8 << 20]);
        v.sort_unstable();
        v
    };
    let pages: Vec<usize> = if opts.quick {
        vec![1, 4, 16, 64, 256, 1024]
    } else {
        vec![1, 4, 16, 64, 256, 1024, 4096]
    };
    let ref_sizes: Vec<usize> = vec![64, 4 << 10, 64 << 10, 1 << 20];
    let zero_sizes: Vec<usize> = bytes.iter().copied().filter(|&b| b <= 1 << 20).collect();
    let mut notes = Vec::new();

    // mlock is bounded by RLIMIT_MEMLOCK (8 MiB by default): measure wire
    // only at page counts that fit with room to spare.
    let memlock = rustix::process::getrlimit(rustix::process::Resource::Memlock)
        .current
        .unwrap_or(u64::MAX);
    let wire_max = usize::try_from(memlock / 2 / page as u64).unwrap_or(usize::MAX);
    let wire_pages: Vec<usize> = pages.iter().copied().filter(|&n| n <= wire_max).collect();
    if wire_pages.len() < pages.len() {
        notes.push(format!(
            "wire/unwire measured up to {} pages (RLIMIT_MEMLOCK is {})",
            wire_pages.last().copied().unwrap_or(0),
            memlock
        ));
    }

    let plan: Vec<(Op, Vec<usize>)> = Op::ALL
        .into_iter()
        .map(|op| {
            let sizes = match op {
                Op::CopyIn | Op::CopyOut => bytes.clone(),
                Op::Zero => zero_sizes.clone(),
                Op::RefPass => ref_sizes.clone(),
                Op::Wire | Op::Unwire => wire_pages.iter().map(|n| n * page).collect(),
                _ => pages.iter().map(|n| n * page).collect(),
            };
            (op, sizes)
        })
        .collect();
    // Whole passes over the plan, each (operation, size) the median of its
    // passes: a shared host's caches and neighbours change over seconds,
    // and one pass put the same machine's emulated-copy threshold
    // anywhere from 250 KiB to 2 MiB.
    let passes = if opts.quick { 1 } else { PASSES };
    let total: usize = plan.iter().map(|p| p.1.len()).sum::<usize>() * passes;
    let mut done = 0;
    let largest = bytes
        .iter()
        .copied()
        .chain(pages.iter().map(|n| n * page))
        .max()
        .unwrap_or(page);
    let mut bench = Bench::new(page, largest)?;
    let mut taken: Vec<Vec<Vec<f64>>> = plan
        .iter()
        .map(|(_, sizes)| vec![Vec::with_capacity(passes); sizes.len()])
        .collect();
    for _ in 0..passes {
        for ((op, sizes), got) in plan.iter().zip(taken.iter_mut()) {
            for (&b, per_size) in sizes.iter().zip(got.iter_mut()) {
                progress(Progress {
                    op: *op,
                    bytes: b,
                    done,
                    total,
                });
                per_size.push(bench.measure(*op, b, budget, opts)?);
                done += 1;
            }
        }
    }
    let results: Vec<OpSamples> = plan
        .iter()
        .zip(taken)
        .map(|((op, sizes), got)| OpSamples {
            op: *op,
            points: sizes
                .iter()
                .zip(got)
                .map(|(&b, mut v)| {
                    v.sort_by(f64::total_cmp);
                    (b, v[v.len() / 2])
                })
                .collect(),
        })
        .collect();
    let mut model = CostModel::empty(Source::Measured);
    model.set_quick(opts.quick);
    for s in &results {
        let curve = fit_curve(&s.points);
        model.set_curve(
            s.op,
            Some(curve),
            Some(FitQuality::of_curve(&curve, &s.points)),
        );
    }
    Ok(Calibration {
        model,
        samples: results,
        notes,
    })
}

/// An address range this module mapped itself, unmapped on drop.
struct Span {
    ptr: *mut c_void,
    len: usize,
}

impl Span {
    fn base(&self) -> *mut u8 {
        self.ptr.cast()
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: `ptr..ptr+len` is a range this module mapped and
            // still owns (every move of it updates or disarms the Span);
            // no Rust reference points into it.
            let _ = unsafe { mm::munmap(self.ptr, self.len) };
        }
    }
}

/// Map `len` bytes of `fd` shared read-write, populated.
fn map_shared(op: Op, fd: impl AsFd, len: usize) -> Result<Span, CalibrateError> {
    // SAFETY: a null hint: the kernel picks a fresh range that overlaps
    // no Rust object; the Span owns it from here.
    let ptr = unsafe {
        mm::mmap(
            ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED | MapFlags::POPULATE,
            fd,
            0,
        )
    }
    .map_err(os(op, "mmap"))?;
    Ok(Span { ptr, len })
}

/// Copies rotate over this many source/destination pairs, as a stream
/// through a few buffers in flight does (the benchmark's sender rotates
/// four): a copy of `B` bytes then works on `2 · COPY_SLOTS · B` bytes,
/// so it leaves the caches at the size where a pipeline's copies do —
/// one hot buffer copied over and over stays in the last-level cache up to
/// a quarter of its size and prices a 4 MiB stream's copies at a fifth of
/// what they cost.
const COPY_SLOTS: usize = 4;

/// Passes over every (operation, size) of a full calibration; each point
/// is the median of its passes.
const PASSES: usize = 3;

/// The memory the measurements work on, made once.
struct Bench {
    page: usize,
    /// Private source / destination of copies: [`COPY_SLOTS`] slots of
    /// `slot` bytes.
    private: Vec<u8>,
    /// A shared memfd mapping: the "arena" (copy targets in its slots;
    /// page ops on the first). Its descriptor is closed once mapped.
    arena: Span,
    /// Bytes per copy slot (the largest size measured, in whole pages).
    slot: usize,
    /// The slot the next copy uses.
    next_slot: usize,
    /// The channel for ref passing.
    chan: Option<(Channel, Channel, Pool)>,
}

impl Bench {
    fn new(page: usize, max: usize) -> Result<Self, CalibrateError> {
        let slot = max.div_ceil(page) * page;
        let len = slot * COPY_SLOTS;
        let fd = memfd::create_sized("zcio-calibrate", len as u64)
            .map_err(os(Op::CopyIn, "memfd_create"))?;
        memfd::allocate(&fd, len as u64).map_err(os(Op::CopyIn, "fallocate"))?;
        let arena = map_shared(Op::CopyIn, &fd, len)?;
        let mut private = vec![0u8; len];
        for (i, b) in private.iter_mut().enumerate() {
            *b = i as u8;
        }
        Ok(Self {
            page,
            private,
            arena,
            slot,
            next_slot: 0,
            chan: None,
        })
    }

    /// Byte offset of the copy slot to use next (round robin).
    fn rotate(slot: usize, next: &mut usize) -> usize {
        let off = *next * slot;
        *next = (*next + 1) % COPY_SLOTS;
        off
    }

    fn measure(
        &mut self,
        op: Op,
        b: usize,
        budget: Budget,
        opts: &Opts,
    ) -> Result<f64, CalibrateError> {
        let arena = self.arena.base();
        let private = self.private.as_mut_ptr();
        let (slot, next) = (self.slot, &mut self.next_slot);
        debug_assert!(b <= slot && slot * COPY_SLOTS <= self.arena.len);
        debug_assert!(slot * COPY_SLOTS <= self.private.len());
        let prot = |p: MprotectFlags, call: &'static str| {
            move || -> Result<f64, CalibrateError> {
                // SAFETY: `[arena, arena + b)` lies in our own arena
                // mapping (b <= its length, page-aligned for page ops);
                // no Rust reference points into it, so changing its
                // protection invalidates nothing.
                time_r(|| unsafe { mm::mprotect(arena.cast(), b, p) }).map_err(os(op, call))
            }
        };
        let rw = MprotectFlags::READ | MprotectFlags::WRITE;
        match op {
            Op::CopyIn => median(budget, || {
                let off = Self::rotate(slot, next);
                // SAFETY: the private buffer and the arena are distinct
                // mappings, each with COPY_SLOTS slots of `slot >= b`
                // bytes (asserted above), `off` the start of one; nothing
                // else touches them during the copy.
                Ok(time(|| unsafe {
                    crate::copy::copy_raw(private.add(off), arena.add(off), b)
                }))
            }),
            Op::CopyOut => median(budget, || {
                let off = Self::rotate(slot, next);
                // SAFETY: as for CopyIn, in the other direction.
                Ok(time(|| unsafe {
                    crate::copy::copy_volatile(arena.add(off), private.add(off), b)
                }))
            }),
            Op::Zero => median(budget, || {
                // SAFETY: b bytes of our own arena mapping, no references.
                Ok(time(|| unsafe {
                    ptr::write_bytes(std::hint::black_box(arena), 0, b)
                }))
            }),
            Op::Protect | Op::Hide | Op::Unprotect | Op::Reveal => {
                let (on, undo) = match op {
                    Op::Protect | Op::Unprotect => (MprotectFlags::READ, rw),
                    _ => (MprotectFlags::empty(), rw),
                };
                let measure_on = matches!(op, Op::Protect | Op::Hide);
                let protect = prot(on, "mprotect");
                let restore = prot(undo, "mprotect");
                median(budget, || {
                    let t_on = protect()?;
                    let t_off = restore()?;
                    Ok(if measure_on { t_on } else { t_off })
                })
            }
            Op::Wire | Op::Unwire => median(budget, || {
                let t_on = time_r(|| {
                    // SAFETY: our own arena range (see `prot`); mlock does
                    // not change its contents or protection.
                    unsafe { mm::mlock(arena.cast(), b) }
                })
                .map_err(os(op, "mlock"))?;
                let t_off = time_r(|| {
                    // SAFETY: as for mlock just above.
                    unsafe { mm::munlock(arena.cast(), b) }
                })
                .map_err(os(op, "munlock"))?;
                Ok(if op == Op::Wire { t_on } else { t_off })
            }),
            Op::Swap | Op::Rehome => self.swap(op, b, budget),
            // A region's whole life on its creator's side: created, and
            // destroyed (its pages freed) when the last user lets go; a
            // transfer that makes one per message pays both.
            Op::RegionCreate => median(budget, || {
                time_r(|| {
                    let r = Region::create("zcio-calibrate", b, true)?;
                    drop(std::hint::black_box(r));
                    Ok(())
                })
                .map_err(region(op))
            }),
            Op::RegionSeal => median(budget, || {
                let mut r = Region::create("zcio-calibrate", b, true).map_err(region(op))?;
                time_r(|| r.secure()).map_err(region(op))
            }),
            Op::RegionMap => {
                let mut r = Region::create("zcio-calibrate", b, true).map_err(region(op))?;
                r.secure().map_err(region(op))?;
                median(budget, || {
                    let fd = r
                        .share_fd()
                        .map_err(region(op))?
                        .try_clone_to_owned()
                        .map_err(|e| CalibrateError::Os {
                            op,
                            call: "dup",
                            errno: Errno::from_io_error(&e).unwrap_or(Errno::BADF),
                        })?;
                    // Attached and, once the receiver is done, unmapped.
                    time_r(|| {
                        let m = Region::attach(fd, b as u64, true)?;
                        drop(std::hint::black_box(m));
                        Ok(())
                    })
                    .map_err(region(op))
                })
            }
            Op::RefPass => self.ref_pass(b, budget),
            Op::TcowFault => {
                let pages = b / self.page;
                match opts.tcow.as_ref() {
                    Some(hook) => median(budget, || hook(pages).map_err(CalibrateError::Tcow)),
                    None => median(budget, || arena_tcow(pages).map_err(CalibrateError::Tcow)),
                }
            }
        }
    }

    fn ref_pass(&mut self, b: usize, budget: Budget) -> Result<f64, CalibrateError> {
        let err = |e: &dyn std::fmt::Display| CalibrateError::Channel(e.to_string());
        if self.chan.is_none() {
            let (a, r) = Channel::pair(ChannelConfig::default()).map_err(|e| err(&e))?;
            let pool = Pool::new(PoolConfig {
                chunk_size: 4 << 20,
                max_chunks: 2,
                ..PoolConfig::named("zcio-calibrate")
            });
            self.chan = Some((a, r, pool));
        }
        let Some((a, r, pool)) = &self.chan else {
            return Err(CalibrateError::Channel("no channel".into()));
        };
        median(budget, || {
            let t = Instant::now();
            let buf = pool.try_alloc(b).map_err(|e| err(&e))?;
            let msg = Msg::from(buf.freeze().map_err(|e| err(&e))?);
            a.send(msg).map_err(|e| err(&e))?;
            let got = r.recv().map_err(|e| err(&e))?;
            drop(got);
            r.flush();
            a.reclaim();
            Ok(t.elapsed().as_nanos() as f64)
        })
    }

    /// Swap (and rehome) `b` bytes through the arenas' own code: a
    /// sender arena lends `b` bytes, a receiver arena swaps them over one
    /// of its buffers (own pages moved aside, the peer's mapped private
    /// and populated), then puts its own pages back.
    fn swap(&mut self, op: Op, b: usize, budget: Budget) -> Result<f64, CalibrateError> {
        use super::arena::{Arena, Lend};
        let e = |what: &'static str| {
            move |x: &dyn std::fmt::Debug| CalibrateError::Arena {
                op,
                detail: format!("{what}: {x:?}"),
            }
        };
        let sender = Arena::new(b).map_err(|x| e("arena")(&x))?;
        let receiver = Arena::new(b).map_err(|x| e("arena")(&x))?;
        let mut sbuf = sender.alloc(b).map_err(|x| e("arena alloc")(&x))?;
        sbuf.fill(1);
        let mut rbuf = receiver.alloc(b).map_err(|x| e("arena alloc")(&x))?;
        rbuf.fill(2);
        let lent = sender
            .core
            .lend(sbuf.as_ptr() as usize, b, Lend::Plain)
            .map_err(|x| e("lend")(&x))?;
        let src = lent[0].region().clone();
        let off = lent[0].region_offset();
        let pages = (b / self.page) as u32;
        let r = median(budget, || {
            let t = Instant::now();
            receiver
                .core
                .swap_in(rbuf.first, pages, &src, off)
                .map_err(os(op, "swap_in"))?;
            let t_swap = t.elapsed().as_nanos() as f64;
            let t = Instant::now();
            receiver.core.rehome(rbuf.first, pages);
            let t_rehome = t.elapsed().as_nanos() as f64;
            Ok(if op == Op::Swap { t_swap } else { t_rehome })
        });
        drop(lent);
        r
    }
}

/// `tcow_fault` through an arena's real fault path: lend `pages` pages
/// write-protected, then write one byte to each (faults, page copies and
/// mapping swaps); the nanoseconds the writes took. Measured on the second
/// round, when the spare pages are allocated already (as in steady state).
fn arena_tcow(pages: usize) -> Result<f64, String> {
    use super::arena::{Arena, Lend};
    let ps = crate::sys::page_size();
    let pages = pages.max(1);
    let arena = Arena::new(pages * ps).map_err(|e| e.to_string())?;
    let mut buf = arena.alloc(pages * ps).map_err(|e| e.to_string())?;
    buf.fill(1);
    let mut ns = 0.0;
    for _ in 0..2 {
        let lent = arena
            .core
            .lend(buf.as_ptr() as usize, buf.len(), Lend::Protect)
            .map_err(|e| format!("lend refused: {e:?}"))?;
        let t0 = Instant::now();
        for p in 0..pages {
            buf[p * ps] = 2;
        }
        ns = t0.elapsed().as_nanos() as f64;
        drop(lent);
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "getrlimit, memfd, mremap, userfaultfd: not in Miri")]
    fn every_op_is_measured_in_a_tiny_run() {
        // Not a timing test: only that every measurement runs and yields
        // finite, non-negative lines.
        let opts = Opts {
            quick: true,
            tcow: Some(Box::new(|pages| Ok(pages as f64 * 1000.0))),
        };
        let mut seen = 0;
        let c = measure_with_samples(&opts, &mut |p| {
            assert!(p.done < p.total);
            seen += 1;
        })
        .unwrap();
        assert!(seen > 16);
        for op in Op::ALL {
            let l = c.model.line(op).unwrap_or_else(|| panic!("{op} measured"));
            assert!(
                l.a_ns_per_byte.is_finite() && l.a_ns_per_byte >= 0.0,
                "{op}"
            );
            assert!(l.b_ns.is_finite() && l.b_ns >= 0.0, "{op}");
            assert!(c.model.quality(op).is_some());
        }
        let tcow = c.model.line(Op::TcowFault).unwrap();
        assert!((tcow.a_ns_per_byte - 1000.0 / 4096.0).abs() < 1e-9);
        // The file round-trips (to the last bit or so: JSON floats).
        #[cfg(feature = "calibration")]
        {
            let back = CostModel::from_json(&c.model.to_json()).unwrap();
            let (x, y) = (
                back.line(Op::Swap).unwrap(),
                c.model.line(Op::Swap).unwrap(),
            );
            assert!((x.a_ns_per_byte - y.a_ns_per_byte).abs() <= 1e-12 * y.a_ns_per_byte);
            assert!((x.b_ns - y.b_ns).abs() <= 1e-12 * y.b_ns);
        }
    }
}
