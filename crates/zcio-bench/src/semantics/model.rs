//! The cost model's side of the report: the "model µs" column (the
//! paper's Table 9) and the per-operation table (Tables 6–8).
//!
//! Both come from here and nowhere else: the cost model the library
//! itself uses (`zcio::semantics::cost::CostModel::current()`, fitted by
//! `zcio calibrate`, else built in).

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
/// `size` bytes with an aligned (or unaligned) receive buffer; `None` for
/// the baselines. The model is the one the library uses
/// (`CostModel::current()`: the calibration file, or the built-in one).
pub fn model_for(line: Line, size: usize, aligned: bool) -> Option<f64> {
    use zcio::semantics::cost::{CostModel, Op};
    use zcio::semantics::Semantics;
    let m = CostModel::current();
    match line {
        Line::Sem(s) => Some(m.predict(s, size, aligned)),
        // The receiver copies out: what an unaligned receiver pays.
        Line::Secured | Line::Mixed => Some(m.predict(Semantics::EmulatedCopy, size, false)),
        // Every page of the buffer takes a TCOW copy as well.
        Line::Rewrite => Some(
            m.predict(Semantics::EmulatedCopy, size, aligned)
                + if size >= m.thresholds_ref().emulated_copy_min {
                    m.cost(Op::TcowFault, size)
                } else {
                    0.0
                },
        ),
        Line::Pipe | Line::Socket | Line::Memcpy => None,
    }
}

/// The per-operation fits of the cost model in effect.
pub fn model_ops() -> Vec<OpCost> {
    use zcio::semantics::cost::{CostModel, Op};
    let m = CostModel::current();
    Op::ALL
        .into_iter()
        .filter_map(|op| {
            m.line(op).map(|l| OpCost {
                op: op.name().to_string(),
                a_ns_per_byte: l.a_ns_per_byte,
                b_ns: l.b_ns,
            })
        })
        .collect()
}
