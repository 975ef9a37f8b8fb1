//! [`CostModel::current`]: the model this process decides with — the
//! calibration file's, loaded once on first use (`calibration` feature),
//! or the built-in defaults.

use super::CostModel;

impl CostModel {
    /// The process-wide model the library decides with
    /// ([`Policy::calibrated`](crate::Policy::calibrated)).
    ///
    /// With the `calibration` feature (a default one): loaded once, on
    /// first use, by `CostModel::load` (the file `zcio calibrate` writes,
    /// else the built-in defaults). Without it: the built-in defaults
    /// ([`CostModel::builtin`]).
    pub fn current() -> &'static CostModel {
        #[cfg(feature = "calibration")]
        {
            loaded()
        }
        #[cfg(not(feature = "calibration"))]
        {
            CostModel::builtin_shared()
        }
    }
}

/// The model [`CostModel::current`] returns: [`CostModel::load`]ed on
/// first use, then the same one for the life of the process.
#[cfg(feature = "calibration")]
fn loaded() -> &'static CostModel {
    static CURRENT: std::sync::OnceLock<CostModel> = std::sync::OnceLock::new();
    CURRENT.get_or_init(CostModel::load)
}
