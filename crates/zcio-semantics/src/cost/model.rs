//! The cost model proper: a curve per primitive operation, the built-in
//! defaults, and what each semantics costs per transfer.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::thresholds::{Secured, Thresholds};
use super::{Above, Curve, Fingerprint, FitQuality, Linear, Op, Sem};

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
    /// Measured in this process ([`crate::calibrate::measure`]).
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

/// A zero-copy mechanism replaces copying (and swapping replaces copying
/// out) only where the model expects it to save at least this fraction.
/// The model's per-byte slopes are off by up to ~15% against the
/// benchmark here and calibrations of one machine differ by as much, so
/// a smaller predicted gain is as likely a loss (measured: emulated copy
/// chosen from 768 KiB, with a predicted gain of a few percent at 1 MiB,
/// streamed 30% slower than copy there).
pub(crate) const MIN_GAIN: f64 = 0.10;

/// The costs of the primitive operations on one machine.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    curves: [Option<Curve>; Op::ALL.len()],
    quality: [Option<FitQuality>; Op::ALL.len()],
    pub(super) page: usize,
    pub(super) source: Source,
    pub(super) quick: bool,
    pub(super) created_unix: u64,
    /// Derived on first use; cleared by [`CostModel::set`].
    pub(super) thresholds: OnceLock<Thresholds>,
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
/// [`fit`](super::fit)).
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

impl CostModel {
    /// The least predicted gain over copying for which a decision takes
    /// another mechanism (10%).
    pub const MIN_GAIN: f64 = MIN_GAIN;

    /// The built-in defaults (see the constants in this file's source:
    /// a full `zcio calibrate` on the project's machine). Every operation
    /// has a line. Reads no file.
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

    /// The built-in model, built once per process (what
    /// [`Policy::default`](crate::Policy) decides with, and
    /// [`CostModel::current`] without the `calibration` feature).
    pub(crate) fn builtin_shared() -> &'static CostModel {
        static BUILTIN_MODEL: OnceLock<CostModel> = OnceLock::new();
        BUILTIN_MODEL.get_or_init(CostModel::builtin)
    }

    /// A model with no lines, for this machine (`source` as given); fill
    /// it with [`CostModel::set`].
    pub fn empty(source: Source) -> CostModel {
        let page = Some(crate::sys::page_size())
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        CostModel {
            curves: [None; Op::ALL.len()],
            quality: [None; Op::ALL.len()],
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

    /// The machine it describes: this one (every model is built for the
    /// machine it runs on; a calibration file from another is refused).
    /// Read once per process, on first use.
    pub fn fingerprint(&self) -> &Fingerprint {
        Fingerprint::here()
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

    pub(super) fn round_pages(&self, bytes: usize) -> usize {
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

    pub(super) fn land_swapping(&self, bytes: usize) -> f64 {
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

    pub(super) fn copy_partial(&self, partial: usize) -> f64 {
        self.cost(Op::CopyOut, partial)
    }

    /// Complete the partial page from the application's bytes and swap it
    /// along with the `whole` pages. In zcio the system page is the
    /// sender's, which the receiver can only map privately: writing the
    /// application's bytes into it copies the whole page first (copy on
    /// write), so completion costs a page copy on top of Genie's — more
    /// than copying the partial bytes out, at every fill, on any machine
    /// whose copies cost more for more bytes.
    pub(super) fn reverse_copyout(&self, whole: usize, partial: usize) -> f64 {
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
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn builtin_is_complete() {
        let m = CostModel::builtin();
        for op in Op::ALL {
            assert!(m.line(op).is_some(), "{op}");
        }
        for s in Sem::ALL {
            assert_eq!(Sem::parse(s.name()), Some(s));
            assert!(m.predict(s, 100_000, true) > 0.0);
        }
        assert_eq!(m.source(), &Source::Builtin { ignored: None });
        assert_eq!(m.fingerprint(), Fingerprint::here());
        assert_eq!(m.page_size(), crate::sys::page_size());
    }

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
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
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn the_shared_builtin_is_the_builtin() {
        let shared = CostModel::builtin_shared();
        let fresh = CostModel::builtin();
        for op in Op::ALL {
            assert_eq!(shared.curve(op), fresh.curve(op), "{op}");
        }
        assert_eq!(shared.thresholds_ref(), fresh.thresholds_ref());
        assert!(std::ptr::eq(shared, CostModel::builtin_shared()));
    }

    #[cfg(not(feature = "calibration"))]
    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn without_the_file_format_current_is_the_builtin() {
        let m = CostModel::current();
        assert!(std::ptr::eq(m, CostModel::builtin_shared()));
        assert_eq!(m.source().kind(), "builtin");
    }
}
