//! How a model's decisions ([`Thresholds`]) are found: a search over
//! sizes up to 256 MiB for where each zero-copy mechanism starts to save
//! at least [`MIN_GAIN`] over copying, where reverse copyout pays, which
//! secured-delivery mechanism is cheapest per size and how much rewriting
//! emulated copy tolerates; derived once per model, and kept in it.

use super::thresholds::{RewriteBand, SecuredBand, Thresholds};
use super::{CostModel, Op, Sem, MIN_GAIN};

/// Threshold search range: up to 256 MiB.
const SEARCH_MAX: usize = 256 << 20;

impl CostModel {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{Linear, Secured};

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
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
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
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
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
}
