//! Fitting measured costs: a least-squares line `a·B + b` per operation,
//! and, where the data says so, two lines joined at a knot (a copy costs
//! less per byte while source and destination fit in a cache than once
//! they stream from memory; one line through both regimes misprices
//! both). The cost model ([`super::cost`]) is built from these.

/// `cost_ns(B) = a_ns_per_byte · B + b_ns`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "calibration", derive(serde::Serialize, serde::Deserialize))]
pub struct Linear {
    /// Slope, nanoseconds per byte.
    pub a_ns_per_byte: f64,
    /// Intercept, nanoseconds.
    pub b_ns: f64,
}

impl Linear {
    /// The line through the origin with slope 0 (costs nothing).
    pub const ZERO: Linear = Linear {
        a_ns_per_byte: 0.0,
        b_ns: 0.0,
    };

    /// A constant cost.
    pub const fn constant(b_ns: f64) -> Linear {
        Linear {
            a_ns_per_byte: 0.0,
            b_ns,
        }
    }

    /// The cost of `bytes` bytes, in nanoseconds.
    pub fn eval(&self, bytes: usize) -> f64 {
        self.a_ns_per_byte * bytes as f64 + self.b_ns
    }

    /// The least-squares line through `samples` (bytes, ns): ordinary least
    /// squares, with a negative slope or intercept replaced by the constant fit
    /// or the fit through the origin (a cost cannot be negative).
    pub fn fit(samples: &[(usize, f64)]) -> Linear {
        fit(samples)
    }
}

/// Ordinary least squares of `ns` on `bytes`.
///
/// A cost cannot be negative, so neither can the line's parts: a negative
/// slope (noise on a constant operation) is replaced by the constant fit
/// (slope 0, intercept the mean); a negative intercept (a copy whose cost
/// grows faster than linearly across cache levels, as Genie's Table 6
/// copyin shows) by the fit through the origin (intercept 0). Fewer than
/// two distinct sizes give the constant fit. Non-finite samples are
/// skipped; no samples give [`Linear::ZERO`].
pub(crate) fn fit(samples: &[(usize, f64)]) -> Linear {
    clamped(&points(samples))
}

/// `(bytes, ns)` of the finite samples.
fn points(samples: &[(usize, f64)]) -> Vec<(f64, f64)> {
    samples
        .iter()
        .filter(|(_, y)| y.is_finite())
        .map(|&(x, y)| (x as f64, y))
        .collect()
}

/// Least squares without clamps: `None` for fewer than two distinct
/// sizes.
fn ols(pts: &[(f64, f64)]) -> Option<Linear> {
    if pts.is_empty() {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| {
        let a = sxy / sxx;
        Linear {
            a_ns_per_byte: a,
            b_ns: my - a * mx,
        }
    })
}

/// [`ols`] with [`fit`]'s clamps.
fn clamped(pts: &[(f64, f64)]) -> Linear {
    if pts.is_empty() {
        return Linear::ZERO;
    }
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    let constant = Linear::constant(mean.max(0.0));
    match ols(pts) {
        None => constant,
        Some(l) if l.a_ns_per_byte < 0.0 => constant,
        Some(l) if l.b_ns < 0.0 => {
            let x2: f64 = pts.iter().map(|p| p.0 * p.0).sum();
            let xy: f64 = pts.iter().map(|p| p.0 * p.1).sum();
            Linear {
                a_ns_per_byte: (xy / x2).max(0.0),
                b_ns: 0.0,
            }
        }
        Some(l) => l,
    }
}

/// How well a line fits its samples (the calibration reports it per
/// operation).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "calibration", derive(serde::Serialize, serde::Deserialize))]
pub struct FitQuality {
    /// Coefficient of determination (1 is perfect; a constant operation
    /// measured with noise has a low R² and that is fine).
    pub r2: f64,
    /// Largest `|fitted − measured| / measured` over the samples.
    pub max_rel_residual: f64,
    /// Number of (size, median) samples fitted.
    pub samples: u32,
}

impl FitQuality {
    /// Judge `line` against `samples`.
    pub fn of(line: &Linear, samples: &[(usize, f64)]) -> FitQuality {
        FitQuality::of_curve(&Curve::linear(*line), samples)
    }

    /// Judge `curve` against `samples`.
    pub fn of_curve(curve: &Curve, samples: &[(usize, f64)]) -> FitQuality {
        let ys: Vec<f64> = samples.iter().map(|s| s.1).collect();
        let n = ys.len().max(1) as f64;
        let my = ys.iter().sum::<f64>() / n;
        let ss_tot: f64 = ys.iter().map(|y| (y - my) * (y - my)).sum();
        let mut ss_res = 0.0;
        let mut max_rel: f64 = 0.0;
        for &(x, y) in samples {
            let r = curve.eval(x) - y;
            ss_res += r * r;
            if y > 0.0 {
                max_rel = max_rel.max(r.abs() / y);
            }
        }
        let r2 = if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else if ss_res == 0.0 {
            1.0
        } else {
            0.0
        };
        FitQuality {
            r2,
            max_rel_residual: max_rel,
            samples: u32::try_from(samples.len()).unwrap_or(u32::MAX),
        }
    }
}

/// The second line of a [`Curve`]: from `from_bytes` on, costs follow
/// `line` instead. Its intercept may be negative (a steeper line that
/// starts at the knot); its cost from the knot on never is.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "calibration", derive(serde::Serialize, serde::Deserialize))]
pub struct Above {
    /// The knot: the first size (bytes) priced by `line`.
    pub from_bytes: u64,
    /// The line from the knot on.
    pub line: Linear,
}

/// What one operation costs as a function of its size: a line, or two
/// lines joined at a knot ([`Curve::fit`] decides).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "calibration", derive(serde::Serialize, serde::Deserialize))]
pub struct Curve {
    /// The line (below the knot, when there is one).
    pub line: Linear,
    /// The line from the knot on, if the operation has one.
    pub above: Option<Above>,
}

impl From<Linear> for Curve {
    fn from(line: Linear) -> Curve {
        Curve::linear(line)
    }
}

impl Curve {
    /// A line, or two lines with a knot where the per-byte cost changes,
    /// through `samples` (bytes, ns), the knot placed where the relative
    /// residuals are least.
    pub fn fit(samples: &[(usize, f64)]) -> Curve {
        fit_curve(samples)
    }

    /// One line everywhere.
    pub const fn linear(line: Linear) -> Curve {
        Curve { line, above: None }
    }

    /// The line that prices `bytes`.
    pub fn line_at(&self, bytes: usize) -> Linear {
        match self.above {
            Some(a) if bytes as u64 >= a.from_bytes => a.line,
            _ => self.line,
        }
    }

    /// The cost of `bytes` bytes, in nanoseconds.
    pub fn eval(&self, bytes: usize) -> f64 {
        self.line_at(bytes).eval(bytes)
    }
}

/// A knot must cut the squared relative residuals of the single line to
/// a quarter before it is taken (two more parameters must earn their
/// keep: noise on a straight operation rarely gains that much, a copy
/// leaving the cache gains far more).
const KNOT_GAIN: f64 = 0.25;
/// …and by at least this much in absolute terms (one sample's residual
/// going from 7% to 0): lines that already fit earn no knot.
const KNOT_MIN_GAIN: f64 = 0.005;
/// Fewest distinct sizes for which a knot is considered: each line then
/// rests on at least two sizes, sharing the one at the knot.
const KNOT_MIN_SIZES: usize = 5;

/// Least squares with at most one knot: the single line ([`fit`]), or
/// the two lines — fitted to the samples up to and from one measured
/// size, which both share; the lower one by [`fit`], the upper one
/// without clamps (its intercept may be negative, its slope not) — whose
/// sum of squared *relative* residuals is smallest, if that sum is at
/// most a quarter of the single line's (and smaller by a margin). Least squares
/// alone lets the largest sizes decide (a line through 16 MiB copies
/// that stream from memory misprices 256 KiB ones that stay in cache);
/// judging the knot by relative residuals gives every size a say. The
/// knot sits where the two lines cross when that lies between the
/// neighbouring sizes (no jump in cost there), else at the shared size.
pub(crate) fn fit_curve(samples: &[(usize, f64)]) -> Curve {
    let mut pts: Vec<(usize, f64)> = samples
        .iter()
        .copied()
        .filter(|(_, y)| y.is_finite())
        .collect();
    pts.sort_by_key(|p| p.0);
    let single = Curve::linear(fit(&pts));
    let mut sizes: Vec<usize> = pts.iter().map(|p| p.0).collect();
    sizes.dedup();
    if sizes.len() < KNOT_MIN_SIZES {
        return single;
    }
    let rel = |c: &Curve| -> f64 {
        pts.iter()
            .filter(|p| p.1 > 0.0)
            .map(|&(x, y)| ((c.eval(x) - y) / y).powi(2))
            .sum()
    };
    let base = rel(&single);
    let mut best = (base, single);
    // Knot at sizes[k]: the lower line fits sizes[..=k], the upper one
    // sizes[k..]; both have at least two sizes.
    for k in 1..sizes.len() - 1 {
        let at = sizes[k];
        let lower: Vec<(usize, f64)> = pts.iter().copied().filter(|p| p.0 <= at).collect();
        let upper: Vec<(usize, f64)> = pts.iter().copied().filter(|p| p.0 >= at).collect();
        let lo = fit(&lower);
        let Some(hi) = ols(&points(&upper)).filter(|l| l.a_ns_per_byte >= 0.0) else {
            continue;
        };
        let from = crossing(&lo, &hi)
            .filter(|&x| x > sizes[k - 1] as f64 && x < sizes[k + 1] as f64)
            .map_or(at as u64, |x| x.ceil() as u64);
        if hi.eval(usize::try_from(from).unwrap_or(usize::MAX)) < 0.0 {
            continue;
        }
        let c = Curve {
            line: lo,
            above: Some(Above {
                from_bytes: from,
                line: hi,
            }),
        };
        let e = rel(&c);
        if e < best.0 {
            best = (e, c);
        }
    }
    if best.0 <= KNOT_GAIN * base && base - best.0 >= KNOT_MIN_GAIN {
        best.1
    } else {
        single
    }
}

/// Where two lines cross (bytes), if they do at a positive size.
fn crossing(a: &Linear, b: &Linear) -> Option<f64> {
    let da = a.a_ns_per_byte - b.a_ns_per_byte;
    if da.abs() < 1e-15 {
        return None;
    }
    let x = (b.b_ns - a.b_ns) / da;
    (x.is_finite() && x > 0.0).then_some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_known_line_exactly() {
        let pts: Vec<(usize, f64)> = [64usize, 4096, 65536, 1 << 20]
            .iter()
            .map(|&b| (b, 0.25 * b as f64 + 300.0))
            .collect();
        let l = fit(&pts);
        assert!((l.a_ns_per_byte - 0.25).abs() < 1e-12, "{l:?}");
        assert!((l.b_ns - 300.0).abs() < 1e-6, "{l:?}");
        let q = FitQuality::of(&l, &pts);
        assert!((q.r2 - 1.0).abs() < 1e-12);
        assert!(q.max_rel_residual < 1e-9);
        assert_eq!(q.samples, 4);
    }

    #[test]
    fn fit_clamps_negative_parts() {
        // Falling: constant fit at the mean.
        let l = fit(&[(0, 10.0), (100, 5.0)]);
        assert_eq!(l, Linear::constant(7.5));
        // Through the origin when the intercept would be negative.
        let l = fit(&[(100, 50.0), (200, 150.0)]);
        assert_eq!(l.b_ns, 0.0);
        assert!(l.a_ns_per_byte > 0.0);
        // One size: constant.
        assert_eq!(fit(&[(8, 3.0), (8, 5.0)]), Linear::constant(4.0));
        assert_eq!(fit(&[]), Linear::ZERO);
        assert_eq!(fit(&[(1, f64::NAN)]), Linear::ZERO);
    }

    /// Sizes 64 B … 16 MiB, as `zcio calibrate` measures copies.
    fn sizes() -> Vec<usize> {
        (0..10).map(|i| 64usize << (2 * i)).collect()
    }

    #[test]
    fn a_straight_line_gets_no_knot() {
        let pts: Vec<(usize, f64)> = sizes()
            .into_iter()
            .map(|b| (b, 0.05 * b as f64 + 30.0))
            .collect();
        let c = fit_curve(&pts);
        assert_eq!(c.above, None, "{c:?}");
        assert!((c.line.a_ns_per_byte - 0.05).abs() < 1e-9);
    }

    #[test]
    fn a_cache_edge_gets_a_knot_between_the_regimes() {
        // 0.04 ns/B up to 4 MiB, 0.12 ns/B beyond (a copy leaving the
        // cache), as measured on the project's machine.
        let cost = |b: usize| {
            if b <= 4 << 20 {
                0.04 * b as f64 + 30.0
            } else {
                0.12 * b as f64 - 335_000.0
            }
        };
        let pts: Vec<(usize, f64)> = sizes().into_iter().map(|b| (b, cost(b))).collect();
        let single = fit(&pts);
        let c = fit_curve(&pts);
        let above = c.above.expect("a knot");
        assert!(
            above.from_bytes >= 1 << 20 && above.from_bytes <= 16 << 20,
            "{c:?}"
        );
        // In cache the curve prices copies as measured; the single line
        // is far off there.
        let b = 256 << 10;
        assert!((c.eval(b) / cost(b) - 1.0).abs() < 0.05, "{c:?}");
        assert!((single.eval(b) / cost(b) - 1.0).abs() > 0.5, "{single:?}");
        let q = FitQuality::of_curve(&c, &pts);
        assert!(q.max_rel_residual < 0.05, "{q:?}");
    }

    #[test]
    fn too_few_sizes_or_noise_give_one_line() {
        let pts = [
            (64, 30.0),
            (4096, 90.0),
            (1 << 20, 40_000.0),
            (4 << 20, 300_000.0),
        ];
        assert_eq!(fit_curve(&pts).above, None);
        // ±10% noise around one line: whatever the fit, it stays near
        // the truth wherever the per-byte cost dominates (from 4 KiB).
        let truth = |b: usize| 0.05 * b as f64 + 30.0;
        let pts: Vec<(usize, f64)> = sizes()
            .into_iter()
            .enumerate()
            .map(|(i, b)| (b, truth(b) * if i % 2 == 0 { 1.1 } else { 0.9 }))
            .collect();
        let c = fit_curve(&pts);
        for b in sizes().into_iter().filter(|&b| b >= 4096) {
            let err = (c.eval(b) / truth(b) - 1.0).abs();
            assert!(err < 0.25, "{b}: {err} {c:?}");
        }
    }

    #[test]
    fn crossing_of_two_lines() {
        let a = Linear {
            a_ns_per_byte: 1.0,
            b_ns: 0.0,
        };
        let b = Linear {
            a_ns_per_byte: 0.5,
            b_ns: 10.0,
        };
        assert_eq!(crossing(&a, &b), Some(20.0));
        assert_eq!(crossing(&a, &a), None);
    }
}
