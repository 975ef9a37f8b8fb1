//! The cost model: what each primitive data-passing operation costs on
//! this machine, fitted as `a·B + b`, and what each buffering semantics
//! therefore costs per transfer (Genie's Tables 6–9).
//!
//! [`CostModel::current`] is the model the library decides with. It is
//! loaded once per process by [`CostModel::load`]: from the file
//! `zcio calibrate` writes ([`calibration_path`]), or the built-in
//! defaults ([`CostModel::builtin`], measured on the project's machine)
//! when there is none. A file that cannot be used (unreadable, garbled,
//! another format version, another machine) is ignored with one warning
//! on stderr that names it and says to run `zcio calibrate`.
//!
//! ```
//! use zcio::semantics::cost::{CostModel, Op, Sem};
//!
//! let m = CostModel::builtin();
//! let copy = m.predict(Sem::Copy, 16 << 20, true);
//! let ec = m.predict(Sem::EmulatedCopy, 16 << 20, true);
//! assert!(ec < copy, "write protection beats the sender's copy of 16 MiB");
//! assert!(m.line(Op::CopyIn).unwrap().a_ns_per_byte > 0.0);
//! let t = m.thresholds();
//! assert!(t.emulated_copy_min > 64, "short data is copied");
//! ```

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use super::fit::{fit, fit_curve, Above, Curve, FitQuality, Linear};

/// The primitive operations the model prices (the design's list). Page
/// operations are priced by their byte count (pages × page size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// `memcpy` of B bytes from private memory into shared memory.
    CopyIn,
    /// Volatile copy of B bytes out of a peer's buffer into private memory.
    CopyOut,
    /// Send and receive one message by reference through a channel.
    RefPass,
    /// Write-protect the pages of an arena range (TCOW).
    Protect,
    /// Undo [`Op::Protect`].
    Unprotect,
    /// A write to a protected in-flight page: fault, page copy, remap.
    TcowFault,
    /// Receiver: move an arena range aside and map the peer's pages
    /// (private, populated) in its place.
    Swap,
    /// Undo a swap: foreign pages unmapped, own pages back.
    Rehome,
    /// memfd create + size + map read-write, populated; and the region's
    /// destruction (pages freed) once its last user lets go.
    RegionCreate,
    /// Drop the writable mapping and seal with `F_SEAL_WRITE`.
    RegionSeal,
    /// Receiver: attach a region and map it, populated; and unmap it.
    RegionMap,
    /// `PROT_NONE` on a range.
    Hide,
    /// `PROT_READ | PROT_WRITE` back on a hidden range.
    Reveal,
    /// `mlock` a range.
    Wire,
    /// `munlock` a range.
    Unwire,
    /// Zero-fill B bytes.
    Zero,
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 16] = [
        Op::CopyIn,
        Op::CopyOut,
        Op::RefPass,
        Op::Protect,
        Op::Unprotect,
        Op::TcowFault,
        Op::Swap,
        Op::Rehome,
        Op::RegionCreate,
        Op::RegionSeal,
        Op::RegionMap,
        Op::Hide,
        Op::Reveal,
        Op::Wire,
        Op::Unwire,
        Op::Zero,
    ];

    /// The stable name (calibration file keys, tables, JSON).
    pub fn name(self) -> &'static str {
        match self {
            Op::CopyIn => "copy_in",
            Op::CopyOut => "copy_out",
            Op::RefPass => "ref_pass",
            Op::Protect => "protect",
            Op::Unprotect => "unprotect",
            Op::TcowFault => "tcow_fault",
            Op::Swap => "swap",
            Op::Rehome => "rehome",
            Op::RegionCreate => "region_create",
            Op::RegionSeal => "region_seal",
            Op::RegionMap => "region_map",
            Op::Hide => "hide",
            Op::Reveal => "reveal",
            Op::Wire => "wire",
            Op::Unwire => "unwire",
            Op::Zero => "zero",
        }
    }

    /// The operation named `s` ([`Op::name`]).
    pub fn from_name(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Whether the operation works on whole pages (measured at page counts).
    pub fn is_page_op(self) -> bool {
        !matches!(self, Op::CopyIn | Op::CopyOut | Op::RefPass | Op::Zero)
    }

    /// Whether a usable model may lack this operation (only
    /// [`Op::TcowFault`]: it needs the arena's fault path to measure).
    pub fn optional(self) -> bool {
        self == Op::TcowFault
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The eight semantics, as the model names them (the layer's own enum).
pub use super::Semantics as Sem;

/// What identifies the machine a calibration is valid for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Page size in bytes.
    pub page_size: u64,
    /// `model name` from `/proc/cpuinfo` (empty if absent).
    pub cpu_model: String,
    /// Online logical CPUs.
    pub logical_cpus: u64,
    /// `uname -r`.
    pub kernel_release: String,
}

impl Fingerprint {
    /// This machine's fingerprint.
    pub fn current() -> Fingerprint {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_default();
        let kernel_release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        // SAFETY: sysconf only reads a configuration value.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        Fingerprint {
            page_size: crate::sys::page_size() as u64,
            cpu_model,
            logical_cpus: u64::try_from(cpus).unwrap_or(0),
            kernel_release,
        }
    }

    /// The first field that differs from `other`, described.
    pub fn mismatch(&self, other: &Fingerprint) -> Option<String> {
        if self.page_size != other.page_size {
            return Some(format!(
                "page size {} here, {} in the file",
                other.page_size, self.page_size
            ));
        }
        if self.cpu_model != other.cpu_model {
            return Some(format!(
                "CPU '{}' here, '{}' in the file",
                other.cpu_model, self.cpu_model
            ));
        }
        if self.logical_cpus != other.logical_cpus {
            return Some(format!(
                "{} CPUs here, {} in the file",
                other.logical_cpus, self.logical_cpus
            ));
        }
        if self.kernel_release != other.kernel_release {
            return Some(format!(
                "kernel {} here, {} in the file",
                other.kernel_release, self.kernel_release
            ));
        }
        None
    }
}

/// Where a model came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// The built-in defaults; `ignored` names a file that was found but
    /// could not be used, and why.
    Builtin {
        /// The file passed over and the reason.
        ignored: Option<(PathBuf, String)>,
    },
    /// A calibration file.
    File(PathBuf),
    /// Measured in this process ([`crate::semantics::calibrate::run`]).
    Measured,
}

impl Source {
    /// `builtin`, `file` or `measured`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Builtin { .. } => "builtin",
            Source::File(_) => "file",
            Source::Measured => "measured",
        }
    }
}

/// The mechanism secured delivery ("the receiver gets bytes no one can
/// change") uses at a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Secured {
    /// Send by reference, the receiver copies out of the volatile buffer.
    CopyOut,
    /// A fresh region sealed with `F_SEAL_WRITE` (the move path).
    SealedRegion,
    /// TCOW at the sender + page swapping at the receiver; only when the
    /// receiver trusts the peer (its integrity rests on the sender's TCOW).
    TcowSwap,
}

impl Secured {
    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Secured::CopyOut => "copy-out",
            Secured::SealedRegion => "sealed-region",
            Secured::TcowSwap => "tcow-swap",
        }
    }
}

/// From `min_bytes` on (up to the next band), secured delivery uses
/// `trusted` when the receiver trusts the peer, else `untrusted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecuredBand {
    /// First size of the band, bytes.
    pub min_bytes: usize,
    /// Cheapest mechanism with a trusted peer.
    pub trusted: Secured,
    /// Cheapest mechanism without trust (never [`Secured::TcowSwap`]).
    pub untrusted: Secured,
}

/// The decisions derived from a model. A size threshold of `usize::MAX`
/// means "never" (the cheaper mechanism never wins).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Emulated copy converts to copy below this many bytes (page-aligned
    /// receiver).
    pub emulated_copy_min: usize,
    /// Emulated share converts to copy below this many bytes.
    pub emulated_share_min: usize,
    /// A page-aligned receiver swaps pages in from this size on, and
    /// copies out below it (swapping includes the later rehome).
    pub swap_min: usize,
    /// A partly filled last page holding fewer bytes than this is copied
    /// out; from this on it is completed from the application's own bytes
    /// (reverse copyout) and swapped. The page size means "always copy".
    pub reverse_copyout: usize,
    /// Secured delivery's choice per size (aligned receiver), ascending.
    pub secured: Vec<SecuredBand>,
    /// How much rewriting emulated copy tolerates per size, ascending
    /// (see [`RewriteBand`]).
    pub rewrite: Vec<RewriteBand>,
}

impl Thresholds {
    /// The band that covers `bytes`.
    pub fn secured_at(&self, bytes: usize) -> Option<&SecuredBand> {
        self.secured.iter().rev().find(|b| b.min_bytes <= bytes)
    }

    /// The fraction of a buffer's pages that may have been rewritten while
    /// in flight (TCOW copies) for lending it again under emulated copy
    /// to stay cheaper than copying it (0 where emulated copy never wins).
    pub fn rewrite_tolerance(&self, bytes: usize) -> f64 {
        rewrite_tolerance(&self.rewrite, bytes)
    }
}

/// The tolerance of the band that covers `bytes` (0 below the first).
pub(crate) fn rewrite_tolerance(bands: &[RewriteBand], bytes: usize) -> f64 {
    let i = bands.partition_point(|b| b.min_bytes <= bytes);
    match i.checked_sub(1) {
        Some(i) => f64::from(bands[i].max_rewritten_ppm) / 1e6,
        None => 0.0,
    }
}

/// From `min_bytes` on (up to the next band), lending a buffer under
/// emulated copy is expected to stay cheaper than copying it while at
/// most `max_rewritten_ppm` millionths of its pages were rewritten in
/// flight the last time it was lent (each such page costs a TCOW fault
/// and a page copy): `(copy − emulated copy) / tcow_fault` at that size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RewriteBand {
    /// First size of the band, bytes.
    pub min_bytes: usize,
    /// Tolerated fraction of rewritten pages, in millionths (0..=1e6).
    pub max_rewritten_ppm: u32,
}

/// Why a calibration file was not used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Reading failed.
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    /// Larger than any calibration file.
    #[error("it is {0} bytes, larger than a calibration file can be")]
    TooLarge(u64),
    /// Not JSON, or not shaped like a calibration file.
    #[error("it is not a zcio calibration file: {0}")]
    Garbled(String),
    /// Another format version.
    #[error("it has format version {found}, this zcio reads version {FORMAT_VERSION}")]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// Measured on another machine.
    #[error("it was measured on another machine ({0})")]
    Foreign(String),
    /// A value out of range.
    #[error("{0}")]
    Invalid(String),
}

/// Failure writing a calibration file.
#[derive(Debug, Error)]
#[error("cannot write {path}: {err}")]
pub struct SaveError {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub err: std::io::Error,
}

/// The calibration file format version this library reads and writes.
pub const FORMAT_VERSION: u32 = 4;
const FORMAT_TAG: &str = "zcio-calibration";
/// No calibration file is larger (16 ops of a few numbers each).
const MAX_FILE: u64 = 64 << 10;
/// Upper bounds on what a file may claim: 1 ms per byte, 10 s fixed.
const MAX_A: f64 = 1e6;
const MAX_B: f64 = 1e10;
const MAX_STRING: usize = 256;
const MAX_SAMPLES: u32 = 1 << 20;
/// No knot lies beyond 1 TiB.
const MAX_KNOT: u64 = 1 << 40;
/// Threshold search range: up to 256 MiB.
const SEARCH_MAX: usize = 256 << 20;
/// A zero-copy mechanism replaces copying (and swapping replaces copying
/// out) only where the model expects it to save at least this fraction.
/// The model's per-byte slopes are off by up to ~15% against the
/// benchmark here and calibrations of one machine differ by as much, so
/// a smaller predicted gain is as likely a loss (measured: emulated copy
/// chosen from 768 KiB, with a predicted gain of a few percent at 1 MiB,
/// streamed 30% slower than copy there).
pub const MIN_GAIN: f64 = 0.10;

/// The costs of the primitive operations on one machine.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    curves: [Option<Curve>; Op::ALL.len()],
    quality: [Option<FitQuality>; Op::ALL.len()],
    fingerprint: Fingerprint,
    page: usize,
    source: Source,
    quick: bool,
    created_unix: u64,
    /// Derived on first use; cleared by [`CostModel::set`].
    thresholds: OnceLock<Thresholds>,
}

/// A knot of a built-in curve: (from bytes, slope ns/byte, intercept ns).
type BuiltinKnot = Option<(u64, f64, f64)>;

/// The built-in defaults: a full `zcio calibrate` run on the project's
/// machine (AMD EPYC Zen 4 in a Firecracker VM, 2 logical CPUs, 2 MiB L2
/// per CPU, 32 MiB L3 shared with the host's other guests, Linux 6.18,
/// 4 KiB pages, no shmem huge pages, `mprotect` write protection; the
/// middle of three runs by emulated copy's threshold, which came out at
/// 2.3, 2.3 and 2.7 MiB), rounded: (operation, slope ns/byte, intercept
/// ns, and for an operation with a knot (knot bytes, slope, intercept)
/// from there on). Copies rotate over four buffers, as a stream does:
/// ~0.029 ns/B while they stay in the caches, ~0.1 ns/B once they stream
/// from memory (past ~2 MiB); a zero intercept is the fit's clamp (see
/// [`fit`]).
const BUILTIN: [(Op, f64, f64, BuiltinKnot); 16] = [
    (
        Op::CopyIn,
        0.0288,
        0.0,
        Some((2_116_000, 0.0959, -141_900.0)),
    ),
    (
        Op::CopyOut,
        0.0299,
        0.0,
        Some((2_470_000, 0.1008, -175_000.0)),
    ),
    (Op::RefPass, 0.0, 300.0, None),
    (Op::Protect, 0.0140, 1550.0, None),
    (Op::Unprotect, 0.0139, 1700.0, None),
    // Through an arena's real fault path (copies of up to 32 pages per
    // fault, spares already allocated).
    (
        Op::TcowFault,
        0.0855,
        13_740.0,
        Some((145_500, 0.3091, -18_800.0)),
    ),
    (Op::Swap, 0.0654, 9690.0, None),
    (Op::Rehome, 0.0158, 7550.0, None),
    // Created and destroyed (pages allocated, zeroed and freed).
    (
        Op::RegionCreate,
        0.6378,
        13_470.0,
        Some((851_000, 0.7482, -80_400.0)),
    ),
    (
        Op::RegionSeal,
        0.0653,
        4110.0,
        Some((1_895_000, 0.0783, -20_600.0)),
    ),
    (
        Op::RegionMap,
        0.0908,
        7000.0,
        Some((1_048_576, 0.0912, 3400.0)),
    ),
    (Op::Hide, 0.0141, 1450.0, None),
    (Op::Reveal, 0.0134, 1370.0, None),
    (Op::Wire, 0.0665, 1660.0, None),
    (Op::Unwire, 0.0360, 1520.0, None),
    (Op::Zero, 0.0088, 20.0, Some((518_000, 0.0126, -2000.0))),
];

static CURRENT: OnceLock<CostModel> = OnceLock::new();

impl CostModel {
    /// The built-in defaults (see the constants in this file's source:
    /// a full `zcio calibrate` on the project's machine). Every operation
    /// has a line.
    pub fn builtin() -> CostModel {
        let mut m = CostModel::empty(Source::Builtin { ignored: None });
        for (op, a, b, above) in BUILTIN {
            let line = |a_ns_per_byte, b_ns| Linear {
                a_ns_per_byte,
                b_ns,
            };
            m.curves[op.index()] = Some(Curve {
                line: line(a, b),
                above: above.map(|(from_bytes, a, b)| Above {
                    from_bytes,
                    line: line(a, b),
                }),
            });
        }
        m
    }

    /// A model with no lines, for this machine (`source` as given); fill
    /// it with [`CostModel::set`].
    pub fn empty(source: Source) -> CostModel {
        let fingerprint = Fingerprint::current();
        let page = usize::try_from(fingerprint.page_size)
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        CostModel {
            curves: [None; Op::ALL.len()],
            quality: [None; Op::ALL.len()],
            fingerprint,
            page,
            source,
            quick: false,
            created_unix: now_unix(),
            thresholds: OnceLock::new(),
        }
    }

    /// Set (or clear) an operation's line (no knot) and fit quality.
    pub fn set(&mut self, op: Op, line: Option<Linear>, quality: Option<FitQuality>) {
        self.set_curve(op, line.map(Curve::linear), quality);
    }

    /// Set (or clear) an operation's curve and fit quality.
    pub fn set_curve(&mut self, op: Op, curve: Option<Curve>, quality: Option<FitQuality>) {
        self.curves[op.index()] = curve;
        self.quality[op.index()] = quality;
        self.thresholds = OnceLock::new();
    }

    /// Mark the model as coming from a quick calibration.
    pub fn set_quick(&mut self, quick: bool) {
        self.quick = quick;
    }

    /// Whether it came from `zcio calibrate --quick`.
    pub fn is_quick(&self) -> bool {
        self.quick
    }

    /// When it was measured (Unix seconds; builtin: when built here).
    pub fn created_unix(&self) -> u64 {
        self.created_unix
    }

    /// An operation's line (below its knot, if it has one); `None` when
    /// it was not measured (only [`Op::TcowFault`] can be missing from a
    /// loaded model).
    pub fn line(&self, op: Op) -> Option<Linear> {
        self.curve(op).map(|c| c.line)
    }

    /// An operation's cost curve: its line, and the line from its knot
    /// on when it has one.
    pub fn curve(&self, op: Op) -> Option<Curve> {
        self.curves[op.index()]
    }

    /// The fit quality recorded for `op` (`None` for built-in values).
    pub fn quality(&self, op: Op) -> Option<FitQuality> {
        self.quality[op.index()]
    }

    /// Where this model came from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The machine it describes.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// The page size the model's page arithmetic uses.
    pub fn page_size(&self) -> usize {
        self.page
    }

    /// Cost of `op` on `bytes` bytes; nothing for 0 bytes or an
    /// unmeasured operation.
    pub fn cost(&self, op: Op, bytes: usize) -> f64 {
        if bytes == 0 && op != Op::RefPass {
            return 0.0;
        }
        self.curve(op).map_or(0.0, |c| c.eval(bytes))
    }

    fn round_pages(&self, bytes: usize) -> usize {
        bytes.div_ceil(self.page).saturating_mul(self.page)
    }

    /// Swap `bytes` (whole pages) in, and eventually back out: every
    /// swapped range is rehomed once the buffer is released, so the
    /// steady-state cost per transfer includes it.
    fn swap_in(&self, bytes: usize) -> f64 {
        self.cost(Op::Swap, bytes) + self.cost(Op::Rehome, bytes)
    }

    /// The receiver's cost of landing `bytes` in an application buffer:
    /// copying out, or, when `aligned` and cheaper ([`Thresholds::swap_min`]),
    /// page swapping (whole pages swapped, the partial last page copied or
    /// completed by reverse copyout, whichever is cheaper).
    fn land(&self, bytes: usize, aligned: bool) -> f64 {
        let copy = self.cost(Op::CopyOut, bytes);
        if aligned {
            copy.min(self.land_swapping(bytes))
        } else {
            copy
        }
    }

    fn land_swapping(&self, bytes: usize) -> f64 {
        let whole = bytes / self.page * self.page;
        let partial = bytes - whole;
        self.swap_in(whole) + self.partial_cost(whole, partial)
    }

    fn partial_cost(&self, whole: usize, partial: usize) -> f64 {
        if partial == 0 {
            return 0.0;
        }
        self.copy_partial(partial)
            .min(self.reverse_copyout(whole, partial))
    }

    fn copy_partial(&self, partial: usize) -> f64 {
        self.cost(Op::CopyOut, partial)
    }

    /// Complete the partial page from the application's bytes and swap it
    /// along with the `whole` pages. In zcio the system page is the
    /// sender's, which the receiver can only map privately: writing the
    /// application's bytes into it copies the whole page first (copy on
    /// write), so completion costs a page copy on top of Genie's — more
    /// than copying the partial bytes out, at every fill, on any machine
    /// whose copies cost more for more bytes.
    fn reverse_copyout(&self, whole: usize, partial: usize) -> f64 {
        self.cost(Op::CopyIn, self.page)
            + self.cost(Op::CopyIn, self.page - partial)
            + self.swap_in(whole + self.page)
            - self.swap_in(whole)
    }

    /// The cost of `sem`'s own mechanism for one transfer of `bytes`,
    /// without the conversion of short data to copy.
    pub fn mechanism(&self, sem: Sem, bytes: usize, aligned: bool) -> f64 {
        let pages = self.round_pages(bytes);
        let rp = self.cost(Op::RefPass, bytes);
        match sem {
            Sem::Copy => self.cost(Op::CopyIn, bytes) + rp + self.cost(Op::CopyOut, bytes),
            Sem::EmulatedCopy => {
                self.cost(Op::Protect, pages)
                    + rp
                    + self.land(bytes, aligned)
                    + self.cost(Op::Unprotect, pages)
            }
            Sem::Share => {
                self.cost(Op::Wire, pages)
                    + rp
                    + self.land(bytes, aligned)
                    + self.cost(Op::Unwire, pages)
            }
            Sem::EmulatedShare => rp + self.land(bytes, aligned),
            Sem::Move => {
                self.cost(Op::RegionCreate, pages)
                    + self.cost(Op::RegionSeal, pages)
                    + rp
                    + self.cost(Op::RegionMap, pages)
                    + self.cost(Op::Zero, pages - bytes)
            }
            // System-allocated buffers are page-aligned by construction:
            // the receiver lands the bytes like an aligned application
            // buffer (swapping whole pages where that is cheaper).
            Sem::EmulatedMove => {
                self.cost(Op::Hide, pages)
                    + rp
                    + self.land(bytes, true)
                    + self.cost(Op::Reveal, pages)
            }
            Sem::WeakMove => {
                self.cost(Op::Wire, pages)
                    + rp
                    + self.land(bytes, true)
                    + self.cost(Op::Unwire, pages)
            }
            Sem::EmulatedWeakMove => rp + self.land(bytes, true),
        }
    }

    /// Predicted latency (ns) of one transfer of `bytes` under `sem`, to
    /// an application buffer with the sender's page offset (`aligned`) or
    /// not, per the design's formulas; emulated copy and emulated share
    /// convert short data to copy ([`CostModel::thresholds`]).
    pub fn predict(&self, sem: Sem, bytes: usize, aligned: bool) -> f64 {
        let t = self.thresholds_ref();
        let min = match sem {
            Sem::EmulatedCopy => t.emulated_copy_min,
            Sem::EmulatedShare => t.emulated_share_min,
            _ => 0,
        };
        if bytes < min {
            self.mechanism(Sem::Copy, bytes, aligned)
        } else {
            self.mechanism(sem, bytes, aligned)
        }
    }

    /// Cost of each secured-delivery mechanism for `bytes`.
    pub fn secured_cost(&self, how: Secured, bytes: usize, aligned: bool) -> f64 {
        let rp = self.cost(Op::RefPass, bytes);
        match how {
            Secured::CopyOut => rp + self.cost(Op::CopyOut, bytes),
            Secured::SealedRegion => self.mechanism(Sem::Move, bytes, aligned),
            Secured::TcowSwap => self.mechanism(Sem::EmulatedCopy, bytes, aligned),
        }
    }

    /// The cheapest secured-delivery mechanism for `bytes` (ties go to the
    /// simpler one: copy-out, then sealed region).
    pub fn secured_choice(&self, bytes: usize, aligned: bool, trusted: bool) -> Secured {
        let mut best = Secured::CopyOut;
        let mut cost = self.secured_cost(best, bytes, aligned);
        let mut consider = |how: Secured| {
            let c = self.secured_cost(how, bytes, aligned);
            if c < cost {
                best = how;
                cost = c;
            }
        };
        consider(Secured::SealedRegion);
        if trusted {
            consider(Secured::TcowSwap);
        }
        best
    }

    /// The thresholds this model implies (searched over sizes up to
    /// 256 MiB: every 64 bytes up to a page, every page up to 64 pages,
    /// then steps of 1/16). Derived once per model.
    pub fn thresholds(&self) -> Thresholds {
        self.thresholds_ref().clone()
    }

    /// [`CostModel::thresholds`] without the copy.
    pub fn thresholds_ref(&self) -> &Thresholds {
        self.thresholds.get_or_init(|| self.derive_thresholds())
    }

    fn derive_thresholds(&self) -> Thresholds {
        let grid = self.grid();
        // The smallest grid size from which `cheaper` holds at every larger
        // size on the grid; 0 if it holds everywhere, usize::MAX if nowhere.
        let from = |cheaper: &dyn Fn(usize) -> bool| {
            let mut min = usize::MAX;
            for &b in grid.iter().rev() {
                if cheaper(b) {
                    min = b;
                } else {
                    break;
                }
            }
            if Some(&min) == grid.first() {
                0
            } else {
                min
            }
        };
        let keep = 1.0 - MIN_GAIN;
        let first_win = |sem: Sem| {
            from(&|b| self.mechanism(sem, b, true) < keep * self.mechanism(Sem::Copy, b, true))
        };
        let swap_min = from(&|b| self.land_swapping(b) < keep * self.cost(Op::CopyOut, b));
        let emulated_copy_min = first_win(Sem::EmulatedCopy);
        let emulated_share_min = first_win(Sem::EmulatedShare);
        // Reverse copyout: copy-out grows with the partial bytes, the
        // completion shrinks with them; the first crossing is the one.
        let whole = self.page;
        let reverse_copyout = (1..self.page)
            .find(|&p| self.reverse_copyout(whole, p) < self.copy_partial(p))
            .unwrap_or(self.page);
        let mut rewrite: Vec<RewriteBand> = Vec::new();
        for &b in &grid {
            let band = RewriteBand {
                min_bytes: b,
                max_rewritten_ppm: self.rewrite_ppm(b),
            };
            match rewrite.last() {
                Some(l) if l.max_rewritten_ppm == band.max_rewritten_ppm => {}
                _ => rewrite.push(band),
            }
        }
        if let Some(first) = rewrite.first_mut() {
            first.min_bytes = 0;
        }
        let mut secured: Vec<SecuredBand> = Vec::new();
        for &b in &grid {
            let band = SecuredBand {
                min_bytes: b,
                trusted: self.secured_choice(b, true, true),
                untrusted: self.secured_choice(b, true, false),
            };
            match secured.last() {
                Some(l) if l.trusted == band.trusted && l.untrusted == band.untrusted => {}
                _ => secured.push(band),
            }
        }
        if let Some(first) = secured.first_mut() {
            first.min_bytes = 0;
        }
        Thresholds {
            emulated_copy_min,
            emulated_share_min,
            swap_min,
            reverse_copyout,
            secured,
            rewrite,
        }
    }

    /// [`RewriteBand::max_rewritten_ppm`] at `bytes`: what emulated copy
    /// saves over copy, in TCOW faults of the whole buffer (page-aligned
    /// receiver; rounded to 1% steps so neighbouring sizes share a band).
    fn rewrite_ppm(&self, bytes: usize) -> u32 {
        let saved =
            self.mechanism(Sem::Copy, bytes, true) - self.mechanism(Sem::EmulatedCopy, bytes, true);
        let fault = self.cost(Op::TcowFault, self.round_pages(bytes));
        if saved.is_nan() || saved <= 0.0 {
            return 0;
        }
        if fault.is_nan() || fault <= 0.0 {
            // Not measured (or free): rewriting costs nothing extra.
            return 1_000_000;
        }
        let pct = (saved / fault * 100.0).floor().clamp(0.0, 100.0);
        pct as u32 * 10_000
    }

    fn grid(&self) -> Vec<usize> {
        let mut g: Vec<usize> = (1..=self.page / 64).map(|i| i * 64).collect();
        g.extend((2..=64).map(|i| i * self.page));
        let mut b = 64 * self.page;
        while b < SEARCH_MAX {
            b = self.round_pages(b + b / 16);
            g.push(b);
        }
        g
    }

    /// The file `zcio calibrate` writes and [`CostModel::load`] reads.
    pub fn default_path() -> Option<PathBuf> {
        calibration_path()
    }

    /// The model to use: the calibration file ([`calibration_path`]) if
    /// there is a usable one, else the built-in defaults. A file that
    /// exists but cannot be used is reported with one warning on stderr.
    pub fn load() -> CostModel {
        let explicit = env_path("ZCIO_CALIBRATION");
        let Some(path) = calibration_path() else {
            return CostModel::builtin();
        };
        match CostModel::load_from(&path) {
            Ok(m) => m,
            Err(LoadError::Io(e))
                if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() =>
            {
                CostModel::builtin()
            }
            Err(e) => {
                let reason = e.to_string();
                eprintln!(
                    "zcio: warning: ignoring the calibration file {}: {reason}; using the built-in \
                     costs. Run `zcio calibrate` to measure this machine.",
                    path.display()
                );
                let mut m = CostModel::builtin();
                m.source = Source::Builtin {
                    ignored: Some((path, reason)),
                };
                m
            }
        }
    }

    /// The process-wide model, loaded once ([`CostModel::load`]).
    pub fn current() -> &'static CostModel {
        CURRENT.get_or_init(CostModel::load)
    }

    /// Read and validate a calibration file (everything in it is outside
    /// input: finite, non-negative, bounded, this format version, this
    /// machine).
    pub fn load_from(path: &Path) -> Result<CostModel, LoadError> {
        let f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        if len > MAX_FILE {
            return Err(LoadError::TooLarge(len));
        }
        let mut text = String::new();
        f.take(MAX_FILE + 1).read_to_string(&mut text)?;
        let mut m = CostModel::from_json(&text)?;
        m.source = Source::File(path.to_owned());
        Ok(m)
    }

    /// Parse and validate the JSON of a calibration file.
    pub fn from_json(text: &str) -> Result<CostModel, LoadError> {
        if text.len() as u64 > MAX_FILE {
            return Err(LoadError::TooLarge(text.len() as u64));
        }
        // The version first, so a future format reports as such, not as
        // garbage.
        let head: Head =
            serde_json::from_str(text).map_err(|e| LoadError::Garbled(e.to_string()))?;
        if head.format != FORMAT_TAG {
            return Err(LoadError::Garbled(format!(
                "format is '{}', not '{FORMAT_TAG}'",
                truncate(&head.format)
            )));
        }
        if head.version != FORMAT_VERSION {
            return Err(LoadError::Version {
                found: head.version,
            });
        }
        let file: FileV2 =
            serde_json::from_str(text).map_err(|e| LoadError::Garbled(e.to_string()))?;
        let fp = file.fingerprint;
        if fp.cpu_model.len() > MAX_STRING || fp.kernel_release.len() > MAX_STRING {
            return Err(LoadError::Invalid("fingerprint strings too long".into()));
        }
        let here = Fingerprint::current();
        if let Some(why) = fp.mismatch(&here) {
            return Err(LoadError::Foreign(why));
        }
        let mut m = CostModel::empty(Source::Measured);
        m.quick = file.quick;
        m.created_unix = file.created_unix;
        for (name, entry) in file.ops {
            let op = Op::from_name(&name).ok_or_else(|| {
                LoadError::Invalid(format!("unknown operation '{}'", truncate(&name)))
            })?;
            let Some(e) = entry else {
                continue;
            };
            let bad =
                |what: &str| LoadError::Invalid(format!("{}: {what} is out of range", op.name()));
            let ok = |v: f64, max: f64| v.is_finite() && (0.0..=max).contains(&v);
            if !ok(e.a_ns_per_byte, MAX_A) {
                return Err(bad("a_ns_per_byte"));
            }
            if !ok(e.b_ns, MAX_B) {
                return Err(bad("b_ns"));
            }
            let above = match e.above {
                None => None,
                Some(a) => {
                    if !ok(a.a_ns_per_byte, MAX_A) {
                        return Err(bad("above.a_ns_per_byte"));
                    }
                    if !(a.b_ns.is_finite() && a.b_ns.abs() <= MAX_B) {
                        return Err(bad("above.b_ns"));
                    }
                    if a.from_bytes == 0 || a.from_bytes > MAX_KNOT {
                        return Err(bad("above.from_bytes"));
                    }
                    // Never negative from the knot on (the slope is not).
                    if a.a_ns_per_byte * a.from_bytes as f64 + a.b_ns < 0.0 {
                        return Err(bad("above (negative cost at its knot)"));
                    }
                    Some(Above {
                        from_bytes: a.from_bytes,
                        line: Linear {
                            a_ns_per_byte: a.a_ns_per_byte,
                            b_ns: a.b_ns,
                        },
                    })
                }
            };
            let quality = match (e.r2, e.max_rel_residual, e.samples) {
                (Some(r2), Some(res), Some(samples)) => {
                    if !(r2.is_finite() && (-1e9..=1.0).contains(&r2)) {
                        return Err(bad("r2"));
                    }
                    if !ok(res, 1e9) {
                        return Err(bad("max_rel_residual"));
                    }
                    if samples > MAX_SAMPLES {
                        return Err(bad("samples"));
                    }
                    Some(FitQuality {
                        r2,
                        max_rel_residual: res,
                        samples,
                    })
                }
                (None, None, None) => None,
                _ => return Err(bad("the fit quality (r2, max_rel_residual, samples)")),
            };
            m.set_curve(
                op,
                Some(Curve {
                    line: Linear {
                        a_ns_per_byte: e.a_ns_per_byte,
                        b_ns: e.b_ns,
                    },
                    above,
                }),
                quality,
            );
        }
        if let Some(op) = Op::ALL
            .into_iter()
            .find(|op| !op.optional() && m.line(*op).is_none())
        {
            return Err(LoadError::Invalid(format!(
                "operation {} is missing",
                op.name()
            )));
        }
        Ok(m)
    }

    /// The calibration file's JSON for this model.
    pub fn to_json(&self) -> String {
        let file = FileV2 {
            format: FORMAT_TAG.to_owned(),
            version: FORMAT_VERSION,
            created_unix: self.created_unix,
            quick: self.quick,
            fingerprint: self.fingerprint.clone(),
            ops: Op::ALL
                .into_iter()
                .map(|op| {
                    let e = self.curve(op).map(|c| {
                        let q = self.quality(op);
                        OpEntry {
                            a_ns_per_byte: c.line.a_ns_per_byte,
                            b_ns: c.line.b_ns,
                            above: c.above.map(|a| AboveEntry {
                                from_bytes: a.from_bytes,
                                a_ns_per_byte: a.line.a_ns_per_byte,
                                b_ns: a.line.b_ns,
                            }),
                            r2: q.map(|q| q.r2),
                            max_rel_residual: q.map(|q| q.max_rel_residual),
                            samples: q.map(|q| q.samples),
                        }
                    });
                    (op.name().to_owned(), e)
                })
                .collect(),
        };
        // Serialising plain numbers and strings cannot fail.
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Write the calibration file to `path` (its directory is created;
    /// the file is replaced atomically).
    pub fn save(&self, path: &Path) -> Result<(), SaveError> {
        let err = |err| SaveError {
            path: path.to_owned(),
            err,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let mut text = self.to_json();
        text.push('\n');
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        Ok(())
    }
}

/// Where the calibration file is: `$ZCIO_CALIBRATION`, else
/// `$XDG_CONFIG_HOME/zcio/calibration.json`, else
/// `~/.config/zcio/calibration.json`; `None` without any of these.
pub fn calibration_path() -> Option<PathBuf> {
    if let Some(p) = env_path("ZCIO_CALIBRATION") {
        return Some(p);
    }
    let base = env_path("XDG_CONFIG_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| env_path("HOME").map(|h| h.join(".config")))?;
    Some(base.join("zcio").join("calibration.json"))
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

#[derive(Deserialize)]
struct Head {
    format: String,
    version: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileV2 {
    format: String,
    version: u32,
    created_unix: u64,
    quick: bool,
    fingerprint: Fingerprint,
    ops: std::collections::BTreeMap<String, Option<OpEntry>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpEntry {
    a_ns_per_byte: f64,
    b_ns: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    r2: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_rel_residual: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    samples: Option<u32>,
    /// The line from the knot on (since format version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    above: Option<AboveEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AboveEntry {
    from_bytes: u64,
    a_ns_per_byte: f64,
    b_ns: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic() -> CostModel {
        let mut m = CostModel::builtin();
        let page = m.page_size();
        assert_eq!(page, 4096, "the synthetic figures assume 4 KiB pages");
        let set = |m: &mut CostModel, op, a, b| {
            m.set(
                op,
                Some(Linear {
                    a_ns_per_byte: a,
                    b_ns: b,
                }),
                None,
            )
        };
        // Copies 0.1 ns/B, passing 1 µs, protection 0.5 µs, swap 2 µs +
        // 0.01 ns/B, nothing else.
        for op in Op::ALL {
            m.set(op, Some(Linear::ZERO), None);
        }
        set(&mut m, Op::CopyIn, 0.1, 0.0);
        set(&mut m, Op::CopyOut, 0.1, 0.0);
        set(&mut m, Op::RefPass, 0.0, 1000.0);
        set(&mut m, Op::Protect, 0.0, 500.0);
        set(&mut m, Op::Unprotect, 0.0, 500.0);
        set(&mut m, Op::Swap, 0.01, 2000.0);
        set(&mut m, Op::RegionCreate, 0.1, 1e6);
        m
    }

    #[test]
    fn thresholds_from_a_synthetic_model() {
        let m = synthetic();
        let t = m.thresholds();
        // Swapping (0.01·B + 2000) beats copying out (0.1·B) by the
        // margin (MIN_GAIN, 10%) from 0.01·B + 2000 < 0.09·B, B > 25 KB:
        // 7 pages.
        assert_eq!(t.swap_min, 7 * 4096);
        // Copy of B: 0.2·B + 1000. Emulated copy: protect 500 + pass 1000
        // + unprotect 500 + the cheaper landing (0.1·B below 6 pages):
        // 2000 + 0.1·B < 0.9·(0.2·B + 1000) from B > 13.75 KB: 4 pages.
        assert_eq!(t.emulated_copy_min, 4 * 4096);
        // Emulated share (pass 1000 + landing 0.1·B) saves the copy in,
        // but by 10% only from 1000 + 0.1·B < 0.18·B + 900, B > 1250:
        // the next grid size, 1280 bytes.
        assert_eq!(t.emulated_share_min, 1280);
        // Reverse copyout of p bytes: the private copy of the sender's
        // page 0.1·4096 + copy_in(4096 - p) + 0.01·4096 vs 0.1·p →
        // 409.6 + 409.6 − 0.1 p + 40.96 < 0.1 p → p > 4300: never within
        // a page, so always copy out.
        assert_eq!(t.reverse_copyout, 4096);
        // Rewriting (synthetic() has no TCOW cost): tolerated entirely
        // where emulated copy wins, not at all where it loses.
        assert_eq!(t.rewrite_tolerance(1 << 20), 1.0);
        assert_eq!(t.rewrite_tolerance(4096), 0.0);
        // Secured: copy-out (0.1·B + 1000) always beats a 1 ms region;
        // TCOW+swap wins for trusted peers from 3000/0.09 ≈ 33 KB.
        assert_eq!(t.secured[0].min_bytes, 0);
        assert_eq!(t.secured[0].untrusted, Secured::CopyOut);
        assert_eq!(t.secured[0].trusted, Secured::CopyOut);
        let last = t.secured.last().unwrap();
        assert_eq!(last.trusted, Secured::TcowSwap);
        assert_eq!(last.untrusted, Secured::CopyOut);
        assert_eq!(last.min_bytes, 9 * 4096);
        assert_eq!(t.secured_at(1 << 20), Some(last));
        // predict converts short data.
        assert_eq!(
            m.predict(Sem::EmulatedCopy, 4096, true),
            m.predict(Sem::Copy, 4096, true)
        );
        let mb = 1 << 20;
        let p = m.predict(Sem::EmulatedCopy, mb, true);
        assert!((p - (4000.0 + 0.01 * mb as f64)).abs() < 1e-6, "{p}");
        // Unaligned: copy out instead of swapping (protect 500 + pass
        // 1000 + unprotect 500 + 0.1·B).
        assert!(
            (m.predict(Sem::EmulatedCopy, mb, false) - (2000.0 + 0.1 * mb as f64)).abs() < 1e-6
        );
    }

    #[test]
    fn rewrite_tolerance_is_what_emulated_copy_saves_in_tcow_faults() {
        let mut m = synthetic();
        m.set(
            Op::TcowFault,
            Some(Linear {
                a_ns_per_byte: 0.5,
                b_ns: 10_000.0,
            }),
            None,
        );
        let t = m.thresholds();
        // 1 MiB: copy 0.2·B + 1000 = 210715; emulated copy (swapping)
        // 4000 + 0.01·B = 14486; saved 196229 over a fault of the whole
        // buffer 0.5·B + 10000 = 534288: 36.7% → 36%.
        assert_eq!(t.rewrite_tolerance(1 << 20), 0.36);
        // Below emulated copy's threshold nothing is tolerated, and the
        // tolerance grows with the size (the fault's fixed cost shrinks).
        assert_eq!(t.rewrite_tolerance(2 * 4096), 0.0);
        assert!(t.rewrite_tolerance(64 << 10) < t.rewrite_tolerance(1 << 20));
        // Bands ascend, start at 0, and neighbours differ.
        assert_eq!(t.rewrite[0].min_bytes, 0);
        for w in t.rewrite.windows(2) {
            assert!(w[0].min_bytes < w[1].min_bytes);
            assert_ne!(w[0].max_rewritten_ppm, w[1].max_rewritten_ppm);
        }
        // The built-in model tolerates some rewriting of large buffers
        // and none below emulated copy's threshold.
        let b = CostModel::builtin().thresholds();
        assert_eq!(b.rewrite_tolerance(4096), 0.0);
        assert!(b.rewrite_tolerance(16 << 20) > 0.0);
        assert!(b.rewrite_tolerance(16 << 20) < 1.0);
    }

    #[test]
    fn builtin_is_complete_and_round_trips() {
        let m = CostModel::builtin();
        for op in Op::ALL {
            assert!(m.line(op).is_some(), "{op}");
        }
        let back = CostModel::from_json(&m.to_json()).unwrap();
        for op in Op::ALL {
            assert_eq!(back.curve(op), m.curve(op), "{op}");
        }
        assert!(
            back.curve(Op::CopyIn).unwrap().above.is_some(),
            "copies have a knot"
        );
        assert_eq!(back.source(), &Source::Measured);
        for s in Sem::ALL {
            assert_eq!(Sem::parse(s.name()), Some(s));
            assert!(m.predict(s, 100_000, true) > 0.0);
        }
        for op in Op::ALL {
            assert_eq!(Op::from_name(op.name()), Some(op));
        }
    }

    #[test]
    fn builtin_knots_are_continuous_and_set_the_copy_threshold() {
        let m = CostModel::builtin();
        for op in Op::ALL {
            let c = m.curve(op).unwrap();
            if let Some(a) = c.above {
                let at = a.from_bytes as usize;
                let (lo, hi) = (c.line.eval(at), a.line.eval(at));
                assert!((lo / hi - 1.0).abs() < 0.1, "{op}: {lo} vs {hi} at {at}");
            }
        }
        // In cache a copy costs ~0.029 ns/B, less than protecting and
        // unprotecting the pages, so write protection pays only once a
        // stream's copies leave the caches (the project machine's
        // measured crossover is between 1 and 4 MiB); beyond the knot
        // copies are dear.
        let t = m.thresholds();
        assert!(
            (1 << 20..=4 << 20).contains(&t.emulated_copy_min),
            "{}",
            t.emulated_copy_min
        );
        assert!(m.cost(Op::CopyIn, 16 << 20) > 3.0 * 0.0288 * (16 << 20) as f64);
    }

    #[test]
    fn knots_are_validated() {
        let good = CostModel::builtin().to_json();
        let v: serde_json::Value = serde_json::from_str(&good).unwrap();
        assert!(v["ops"]["copy_in"]["above"].is_object(), "{v}");
        for (field, val) in [
            ("from_bytes", serde_json::json!(0)),
            ("a_ns_per_byte", serde_json::json!(-1.0)),
            // Negative at the knot.
            ("b_ns", serde_json::json!(-1e9)),
        ] {
            let mut bad = v.clone();
            bad["ops"]["copy_in"]["above"][field] = val;
            let r = CostModel::from_json(&bad.to_string());
            assert!(matches!(r, Err(LoadError::Invalid(_))), "{field}: {r:?}");
        }
        let mut unknown = v.clone();
        unknown["ops"]["copy_in"]["above"]["extra"] = serde_json::json!(1);
        assert!(matches!(
            CostModel::from_json(&unknown.to_string()),
            Err(LoadError::Garbled(_))
        ));
    }

    #[test]
    fn garbled_json_is_rejected() {
        for text in ["", "{", "[1,2]", "{\"format\": 3}", "null", "\u{0}"] {
            assert!(
                matches!(CostModel::from_json(text), Err(LoadError::Garbled(_))),
                "{text:?}"
            );
        }
        let good = CostModel::builtin().to_json();
        let other = good.replace("zcio-calibration", "something-else");
        assert!(matches!(
            CostModel::from_json(&other),
            Err(LoadError::Garbled(_))
        ));
        // Older formats (1: no knots; 2: regions priced without their
        // teardown) are ignored.
        for old in 1..FORMAT_VERSION {
            let stale = good.replace(
                &format!("\"version\": {FORMAT_VERSION}"),
                &format!("\"version\": {old}"),
            );
            assert!(
                matches!(
                    CostModel::from_json(&stale),
                    Err(LoadError::Version { found }) if found == old
                ),
                "version {old}"
            );
        }
        let extra = good.replacen('{', "{\"surprise\": 1,", 1);
        assert!(matches!(
            CostModel::from_json(&extra),
            Err(LoadError::Garbled(_))
        ));
        let missing = good.replace("\"copy_in\"", "\"copy_in_x\"");
        assert!(matches!(
            CostModel::from_json(&missing),
            Err(LoadError::Invalid(_))
        ));
    }

    #[test]
    fn nan_negative_and_huge_values_are_rejected() {
        let good = CostModel::builtin().to_json();
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        for (field, val) in [
            ("a_ns_per_byte", serde_json::json!(-0.5)),
            ("b_ns", serde_json::json!(-1.0)),
            ("b_ns", serde_json::json!(1e300)),
            ("a_ns_per_byte", serde_json::json!(1e7)),
        ] {
            let mut bad = v.clone();
            bad["ops"]["swap"][field] = val;
            let r = CostModel::from_json(&bad.to_string());
            assert!(matches!(r, Err(LoadError::Invalid(_))), "{field}: {r:?}");
        }
        // JSON has no NaN; the literal is garbage to the parser.
        let nan = good.replacen("\"b_ns\": 9690.0", "\"b_ns\": NaN", 1);
        assert_ne!(nan, good);
        assert!(matches!(
            CostModel::from_json(&nan),
            Err(LoadError::Garbled(_))
        ));
        // Fit quality must be complete and sane.
        v["ops"]["swap"]["r2"] = serde_json::json!(2.0);
        v["ops"]["swap"]["max_rel_residual"] = serde_json::json!(0.1);
        v["ops"]["swap"]["samples"] = serde_json::json!(5);
        assert!(matches!(
            CostModel::from_json(&v.to_string()),
            Err(LoadError::Invalid(_))
        ));
        v["ops"]["swap"]["r2"] = serde_json::json!(0.9);
        assert!(CostModel::from_json(&v.to_string()).is_ok());
        v["ops"]["swap"]["samples"] = serde_json::Value::Null;
        assert!(CostModel::from_json(&v.to_string()).is_err());
    }

    #[test]
    fn foreign_fingerprint_is_rejected() {
        let good = CostModel::builtin().to_json();
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        v["fingerprint"]["cpu_model"] = serde_json::json!("Imaginary CPU 9000");
        assert!(matches!(
            CostModel::from_json(&v.to_string()),
            Err(LoadError::Foreign(_))
        ));
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        v["fingerprint"]["logical_cpus"] = serde_json::json!(9999);
        assert!(matches!(
            CostModel::from_json(&v.to_string()),
            Err(LoadError::Foreign(_))
        ));
    }

    #[test]
    fn save_and_load_a_file() {
        let dir = std::env::temp_dir().join(format!("zcio-cost-{}", std::process::id()));
        let path = dir.join("sub").join("calibration.json");
        let m = CostModel::builtin();
        m.save(&path).unwrap();
        let back = CostModel::load_from(&path).unwrap();
        assert_eq!(back.source(), &Source::File(path.clone()));
        assert_eq!(back.line(Op::Swap), m.line(Op::Swap));
        std::fs::write(&path, "garbage").unwrap();
        assert!(matches!(
            CostModel::load_from(&path),
            Err(LoadError::Garbled(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
