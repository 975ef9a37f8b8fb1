//! The asynchronous-IPC benchmark under the driver.

use std::path::Path;

use super::{latency, notes, plan, plot, table, Job, Options, Part, Row};
use crate::driver::{Bench, Target};

/// `zcio-bench proxy` with its options.
#[derive(Debug, Clone)]
pub struct ProxyBench {
    /// What to run.
    pub opts: Options,
}

impl ProxyBench {
    /// Whether the proxy layer is built (its rows exist).
    fn proxy_built() -> bool {
        latency::Variant::AsyncSend.available()
    }
}

impl Bench for ProxyBench {
    type Job = Job;
    type Row = Row;

    fn name(&self) -> &'static str {
        "proxy"
    }

    fn quick(&self) -> bool {
        self.opts.quick
    }

    fn intro(&self) -> String {
        let mut s = notes(&self.opts).swap_remove(0);
        if self.opts.has(Part::Latency) && !Self::proxy_built() {
            s.push_str(
                "\nproxy layer not built: the async-send and async-receive rows are left out",
            );
        }
        s
    }

    /// Every job once (its rows are single measurements).
    fn groups(&self) -> Vec<Vec<Job>> {
        vec![plan(&self.opts)]
    }

    fn reps(&self) -> usize {
        1
    }

    fn label(&self, job: &Job) -> String {
        job.label()
    }

    fn run(&self, job: &Job) -> Result<Vec<Row>, String> {
        job.run(&self.opts)
    }

    fn same_point(a: &Row, b: &Row) -> bool {
        a.part == b.part
            && a.variant == b.variant
            && a.intermediates == b.intermediates
            && a.size == b.size
    }

    fn rank(row: &Row) -> f64 {
        row.latency_ns.unwrap_or(0.0)
    }

    fn derive(&self, rows: &mut [Row]) {
        table::derive(rows);
    }

    fn targets(&self, rows: &[Row]) -> Vec<Target> {
        table::targets(rows, Self::proxy_built())
    }

    fn notes(&self) -> Vec<String> {
        notes(&self.opts)
    }

    fn tables(&self, rows: &[Row]) -> String {
        table::text(rows)
    }

    fn svg(&self, rows: &[Row], path: &Path) -> Result<(), String> {
        plot::svg(rows, path)
    }
}
