//! The thresholds an endpoint applies, derived from the cost model.

use super::cost::CostModel;

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
    /// swap (the page size: always). Reported, not applied: completing a
    /// page would rewrite application bytes outside the caller's buffer,
    /// which another borrow may be writing at the same time, so receivers
    /// always copy partial pages out.
    pub reverse_copyout: usize,
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
        }
    }

    /// The process's policy: from the calibration file (`zcio calibrate`)
    /// when there is a usable one, else the built-in model.
    pub fn current() -> Policy {
        Policy::from_model(CostModel::current())
    }

    /// Convert nothing to copy and swap whenever aligned (what the
    /// mechanisms do without a cost model; tests and measurements of the
    /// mechanisms themselves).
    pub fn always_zero_copy() -> Policy {
        Policy {
            emulated_copy_min: 0,
            emulated_share_min: 0,
            swap_min: 0,
            reverse_copyout: crate::sys::page_size(),
        }
    }
}
