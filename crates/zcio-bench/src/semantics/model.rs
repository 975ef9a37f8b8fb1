//! The cost model's side of the report: the "model µs" column (the
//! paper's Table 9) and the per-operation table (Tables 6–8).
//!
//! Both come from here and nowhere else: the cost model the library
//! itself uses (`zcio::semantics::cost::CostModel::current()`, fitted by
//! `zcio calibrate`, else built in).

use super::Line;

/// One line of a fitted primitive operation: `cost_ns(B) =
/// a_ns_per_byte·B + b_ns` for sizes from `from_bytes` (up to the next
/// line's, if the operation has a knot).
#[derive(Debug, Clone, serde::Serialize)]
pub struct OpCost {
    /// The operation's stable name (`copy_in`, `protect`, `swap`, …).
    pub op: String,
    /// The smallest size this line prices (0, or the knot).
    pub from_bytes: u64,
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

/// The per-operation fits of the cost model in effect: one row per line
/// (two for an operation with a knot).
pub fn model_ops() -> Vec<OpCost> {
    use zcio::semantics::cost::{CostModel, Op};
    let m = CostModel::current();
    let row = |op: Op, from_bytes, l: zcio::semantics::cost::Linear| OpCost {
        op: op.name().to_string(),
        from_bytes,
        a_ns_per_byte: l.a_ns_per_byte,
        b_ns: l.b_ns,
    };
    Op::ALL
        .into_iter()
        .filter_map(|op| m.curve(op).map(|c| (op, c)))
        .flat_map(|(op, c)| {
            std::iter::once(row(op, 0, c.line))
                .chain(c.above.map(|a| row(op, a.from_bytes, a.line)))
        })
        .collect()
}
