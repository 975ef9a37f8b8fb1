//! A measured point: the row of the tables and of the JSON document,
//! computed from the sides' reports.

use serde::Serialize;

use super::{Part, Report, Side};

/// One measured point (one JSON object of `rows`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// `a`, `b` or `c`.
    pub part: String,
    /// Variant name.
    pub variant: String,
    /// Ring data size in bytes (ring variants).
    pub ring_size: Option<u64>,
    /// Pipe buffer in effect (pipe variants).
    pub pipe_size: Option<u64>,
    /// Bytes per write/read call (parts a, b).
    pub call_size: Option<u64>,
    /// Consumers (each receives everything).
    pub consumers: u32,
    /// Data layout (part c rings).
    pub layout: Option<String>,
    /// Bytes each consumer received.
    pub bytes_per_consumer: u64,
    /// Calls (a, b) or packets (c) per consumer.
    pub items_per_consumer: u64,
    /// Measured interval: first consumer's first item to last consumer's
    /// last item.
    pub elapsed_s: f64,
    /// Gigabytes (1e9 B) delivered per second, summed over consumers.
    pub gb_per_sec: f64,
    /// Millions of packets per second per consumer (part c).
    pub mpkt_per_sec: Option<f64>,
    /// CPU seconds of all sides per GiB delivered (all consumers).
    pub cpu_s_per_gib: f64,
    /// Producer CPU seconds per GiB produced.
    pub producer_cpu_s_per_gib: f64,
    /// Consumers' CPU seconds per GiB delivered.
    pub consumer_cpu_s_per_gib: f64,
    /// Share of the CPU time spent in the kernel (all sides).
    pub sys_share: f64,
    /// Producer user CPU seconds over its data phase.
    pub producer_user_s: f64,
    /// Producer system CPU seconds over its data phase.
    pub producer_sys_s: f64,
    /// Consumers' user CPU seconds (sum) over their measured intervals.
    pub consumer_user_s: f64,
    /// Consumers' system CPU seconds (sum) over their measured intervals.
    pub consumer_sys_s: f64,
    /// Sequence words checked by the consumers.
    pub checked: u64,
    /// Whether both sides ran in one process (the `vec` baseline).
    pub in_process: bool,
    /// Whether every consumer saw a clean end of stream (a closed ring or
    /// pipe) after the last byte, rather than the producer process gone.
    pub clean_end: bool,
}

const GIB: f64 = (1u64 << 30) as f64;

impl Row {
    /// A row from the sides' reports; parameters are filled in by the
    /// caller.
    pub fn from_reports(part: Part, variant: &str, reports: &[Report]) -> Result<Self, String> {
        let cons: Vec<&Report> = reports
            .iter()
            .filter(|r| r.side == Side::Consumer)
            .collect();
        let prod: Vec<&Report> = reports
            .iter()
            .filter(|r| r.side == Side::Producer)
            .collect();
        if cons.is_empty() || prod.is_empty() {
            return Err(format!(
                "{variant}: expected producer and consumer reports, got {} and {}",
                prod.len(),
                cons.len()
            ));
        }
        let first = cons.iter().map(|r| r.first_ns).min().unwrap_or(0);
        let last = cons.iter().map(|r| r.last_ns).max().unwrap_or(0);
        let span = last.saturating_sub(first).max(1);
        let after_first: u64 = cons.iter().map(|r| r.bytes - r.first_bytes).sum();
        let delivered: u64 = cons.iter().map(|r| r.bytes).sum();
        let produced: u64 = prod.iter().map(|r| r.bytes).sum();
        let cpu = |rs: &[&Report]| rs.iter().map(|r| r.cpu_ns()).sum::<u64>() as f64 / 1e9;
        let per_gib = |s: f64, bytes: u64| s / (bytes.max(1) as f64 / GIB);
        // A consumer's CPU time covers what it received after its first
        // item; scale it to all it received.
        let cc = per_gib(cpu(&cons), after_first) * delivered as f64 / GIB;
        let pc = cpu(&prod);
        let sys: u64 = reports.iter().map(|r| r.sys_ns).sum();
        let all: u64 = reports.iter().map(|r| r.cpu_ns()).sum();
        let secs = |rs: &[&Report], f: fn(&Report) -> u64| {
            rs.iter().map(|r| f(r)).sum::<u64>() as f64 / 1e9
        };
        let c0 = cons[0];
        Ok(Row {
            part: part.letter().into(),
            variant: variant.into(),
            ring_size: None,
            pipe_size: None,
            call_size: None,
            consumers: cons.len() as u32,
            layout: None,
            bytes_per_consumer: c0.bytes,
            items_per_consumer: c0.items,
            elapsed_s: span as f64 / 1e9,
            gb_per_sec: after_first as f64 / span as f64,
            mpkt_per_sec: None,
            cpu_s_per_gib: per_gib(pc + cc, delivered),
            producer_cpu_s_per_gib: per_gib(pc, produced),
            consumer_cpu_s_per_gib: per_gib(cc, delivered),
            sys_share: sys as f64 / all.max(1) as f64,
            producer_user_s: secs(&prod, |r| r.user_ns),
            producer_sys_s: secs(&prod, |r| r.sys_ns),
            consumer_user_s: secs(&cons, |r| r.user_ns),
            consumer_sys_s: secs(&cons, |r| r.sys_ns),
            checked: cons.iter().map(|r| r.checked).sum(),
            in_process: false,
            clean_end: reports.iter().all(|r| r.clean_end),
        })
    }

    /// Whether `other` is the same point (another repetition).
    pub fn same_point(&self, other: &Row) -> bool {
        self.part == other.part
            && self.variant == other.variant
            && self.ring_size == other.ring_size
            && self.call_size == other.call_size
            && self.consumers == other.consumers
            && self.layout == other.layout
    }
}

/// Merge repetitions: per point, the row with the median GB/s (first
/// appearance order kept).
pub fn median_rows(rows: Vec<Row>) -> Vec<Row> {
    crate::driver::medians(rows, Row::same_point, |r| r.gb_per_sec)
}
