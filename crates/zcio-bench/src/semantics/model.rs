//! The cost model's side of the report: the "model µs" column (the
//! paper's Table 9) and the per-operation table (Tables 6–8).
//!
//! Both come from here and nowhere else. The cost model
//! (`zcio::semantics::cost`, fitted by `zcio calibrate`) is not in this
//! tree yet: [`model_for`] returns `None` and [`model_ops`] nothing, and
//! the report says "not wired". Wiring it is these two functions:
//! `CostModel::current().predict(line's semantics, size, aligned)` and its
//! per-operation fits.

use super::Line;

/// One fitted primitive operation: `cost_ns(B) = a_ns_per_byte·B + b_ns`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpCost {
    /// The operation's stable name (`copy_in`, `protect`, `swap`, …).
    pub op: String,
    /// Per-byte cost, ns.
    pub a_ns_per_byte: f64,
    /// Fixed cost, ns.
    pub b_ns: f64,
}

/// The model's prediction of one transfer's latency, in ns, for `line` at
/// `size` bytes with an aligned (or unaligned) receive buffer; `None`
/// while no cost model is wired (and for the baselines).
pub fn model_for(line: Line, size: usize, aligned: bool) -> Option<f64> {
    let _ = (line, size, aligned);
    None
}

/// The per-operation fits of the cost model in effect (empty while none is
/// wired).
pub fn model_ops() -> Vec<OpCost> {
    Vec::new()
}
