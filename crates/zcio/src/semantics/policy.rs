//! The thresholds an endpoint applies, derived from the cost model.

use super::cost::{CostModel, RewriteBand};

/// Thresholds and choices (see `zcio calibrate` and [`CostModel`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Policy {
    /// Emulated copy converts to copy below this many bytes.
    pub emulated_copy_min: usize,
    /// Emulated share converts to copy below this many bytes.
    pub emulated_share_min: usize,
    /// A receiver swaps whole pages in from this many bytes on and copies
    /// out below it (`usize::MAX`: never — copying out is cheaper on this
    /// machine at every size).
    pub swap_min: usize,
    /// The model's reverse-copyout threshold: partially filled pages with
    /// fewer bytes than this are cheaper to copy out than to complete and
    /// swap (the page size: always). Completing a page here means writing
    /// the application's bytes into a private mapping of the *sender's*
    /// page, which copies that page first (copy on write), so the model
    /// never finds it cheaper and receivers copy partial pages out.
    pub reverse_copyout: usize,
    /// Emulated copy's tolerance for buffers the application rewrites
    /// while they are in flight (TCOW faults), per size: when more of a
    /// buffer's pages than this were rewritten during its previous lend,
    /// the next output copies it instead, probing again after 2, 4, …
    /// up to [`Policy::MAX_HOLD`] copies (see [`RewriteBand`]).
    pub rewrite: Vec<RewriteBand>,
}

impl Default for Policy {
    fn default() -> Self {
        Self::current()
    }
}

impl Policy {
    /// The thresholds a cost model implies.
    pub fn from_model(m: &CostModel) -> Policy {
        let t = m.thresholds_ref();
        Policy {
            emulated_copy_min: t.emulated_copy_min,
            emulated_share_min: t.emulated_share_min,
            swap_min: t.swap_min,
            reverse_copyout: t.reverse_copyout,
            rewrite: t.rewrite.clone(),
        }
    }

    /// The most outputs of a rewritten buffer copied between two probes
    /// (lends that check whether the application still rewrites it).
    pub const MAX_HOLD: u16 = 1024;

    /// The fraction of rewritten pages emulated copy tolerates for a
    /// buffer of `bytes` (see [`Policy::rewrite`]).
    pub fn rewrite_tolerance(&self, bytes: usize) -> f64 {
        super::cost::rewrite_tolerance(&self.rewrite, bytes)
    }

    /// This policy with one rewrite tolerance at every size, `fraction`
    /// of a buffer's pages clamped to `0.0..=1.0`: 0 copies every buffer
    /// the application rewrote during its previous lend (probing as
    /// [`Policy::rewrite`] says), 1 always lends again (TCOW copies the
    /// rewritten pages). For an application that knows its pattern.
    pub fn with_rewrite_tolerance(mut self, fraction: f64) -> Policy {
        let f = if fraction.is_nan() {
            0.0
        } else {
            fraction.clamp(0.0, 1.0)
        };
        self.rewrite = vec![RewriteBand {
            min_bytes: 0,
            max_rewritten_ppm: (f * 1e6).round() as u32,
        }];
        self
    }

    /// The process's policy: from the calibration file (`zcio calibrate`)
    /// when there is a usable one, else the built-in model.
    pub fn current() -> Policy {
        Policy::from_model(CostModel::current())
    }

    /// Convert nothing to copy, swap whenever aligned and lend rewritten
    /// buffers again (what the mechanisms do without a cost model; tests
    /// and measurements of the mechanisms themselves).
    pub fn always_zero_copy() -> Policy {
        Policy {
            emulated_copy_min: 0,
            emulated_share_min: 0,
            swap_min: 0,
            reverse_copyout: crate::sys::page_size(),
            rewrite: Vec::new(),
        }
        .with_rewrite_tolerance(1.0)
    }
}
