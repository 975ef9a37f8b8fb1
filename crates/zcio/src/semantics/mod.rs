//! Buffering semantics (Genie): the cost model and its calibration.

pub mod calibrate;
pub mod cost;
