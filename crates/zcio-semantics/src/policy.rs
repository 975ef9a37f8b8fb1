//! The thresholds an endpoint applies, derived from the cost model.
//!
//! [`Policy::default`] is the built-in model's (no I/O: it depends on no
//! file, only on the page size); [`Policy::calibrated`] is this machine's
//! calibrated model's
//! (`zcio calibrate`), which is what an [`SemanticEndpoint`](super::SemanticEndpoint)
//! whose [`SemanticConfig::policy`](super::SemanticConfig::policy) is
//! `None` uses.

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
    /// The built-in cost model's thresholds ([`CostModel::builtin`],
    /// measured on the project's machine): reads no file and does no
    /// other I/O (it depends only on the page size; derived once per
    /// process). For this machine's calibration use [`Policy::calibrated`].
    fn default() -> Self {
        Policy::from_model(CostModel::builtin_shared())
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

    /// This machine's policy: the thresholds of [`CostModel::current`].
    /// With the `calibration` feature (a default one) that is the model in
    /// the calibration file `zcio calibrate` writes, read once per process
    /// (the first call may read the file and warn on stderr about one it
    /// cannot use), else the built-in model; without the feature it is the
    /// built-in model, as [`Policy::default`]. What an
    /// [`SemanticEndpoint`](super::SemanticEndpoint) uses when its config names no policy.
    pub fn calibrated() -> Policy {
        Policy::from_model(CostModel::current())
    }

    /// The former name of [`Policy::calibrated`].
    #[deprecated(
        note = "renamed to `Policy::calibrated` (`Policy::default` is the built-in model's)"
    )]
    pub fn current() -> Policy {
        Policy::calibrated()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn default_is_the_builtin_models_and_calibrated_the_current_models() {
        assert_eq!(Policy::default(), Policy::from_model(&CostModel::builtin()));
        assert_eq!(
            Policy::calibrated(),
            Policy::from_model(CostModel::current())
        );
        #[cfg(not(feature = "calibration"))]
        assert_eq!(Policy::calibrated(), Policy::default());
    }
}
