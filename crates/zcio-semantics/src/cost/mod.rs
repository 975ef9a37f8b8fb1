//! The cost model: what each primitive data-passing operation costs on
//! this machine, fitted as `a·B + b`, and what each buffering semantics
//! therefore costs per transfer (Genie's Tables 6–9).
//!
//! [`CostModel::current`] is the model [`Policy::calibrated`] decides
//! with. With the `calibration` feature (on by default) it is loaded once
//! per process by `CostModel::load`: from the file `zcio calibrate`
//! writes (`calibration_path`), or the built-in defaults
//! ([`CostModel::builtin`], measured on the project's machine) when there
//! is none. A file that cannot be used (unreadable, garbled, another
//! format version, another machine) is ignored with one warning on stderr
//! that names it and says to run `zcio calibrate`. Without the feature
//! the calibration file format (and serde) is not compiled in:
//! [`CostModel::current`] is the built-in model, and a model measured by
//! [`calibrate`](super::calibrate) can be used but not saved or loaded.
//! [`Policy::default`](super::Policy) always uses the built-in model and
//! reads no file.
//!
//! The module's parts: the operations priced (`op.rs`), the machine a
//! model describes (`fingerprint.rs`), the model and its predictions
//! (`model.rs`), the decisions it implies (`thresholds.rs`) and how they
//! are derived from it (`derive.rs`), the calibration file (`file.rs`,
//! `calibration` feature) and the model the process decides with
//! (`current.rs`).
//!
//! ```
//! use zcio::semantics::cost::{CostModel, Op};
//! use zcio::semantics::Semantics;
//!
//! let m = CostModel::builtin();
//! let copy = m.predict(Semantics::Copy, 16 << 20, true);
//! let ec = m.predict(Semantics::EmulatedCopy, 16 << 20, true);
//! assert!(ec < copy, "write protection beats the sender's copy of 16 MiB");
//! assert!(m.line(Op::CopyIn).unwrap().a_ns_per_byte > 0.0);
//! let t = m.thresholds();
//! assert!(t.emulated_copy_min > 64, "short data is copied");
//! ```
//!
//! [`Policy::calibrated`]: super::Policy::calibrated

mod current;
mod derive;
#[cfg(feature = "calibration")]
mod file;
mod fingerprint;
mod model;
mod op;
mod thresholds;

pub(crate) use super::fit::fit_curve;
pub use super::fit::{Above, Curve, FitQuality, Linear};
#[cfg(feature = "calibration")]
pub use file::{LoadError, SaveError};
pub use fingerprint::Fingerprint;
pub(crate) use model::MIN_GAIN;
pub use model::{CostModel, Source};
pub use op::Op;
pub(crate) use thresholds::rewrite_tolerance;
pub use thresholds::{RewriteBand, Secured, SecuredBand, Thresholds};

/// The eight semantics, as the model names them (the layer's own enum).
pub(crate) use super::Semantics as Sem;
