//! The ring benchmark under the driver.

use std::path::Path;

use super::{notes, plan, plot, table, targets, Job, Options, Row};
use crate::affinity::cpu_for;
use crate::driver::{Bench, Target};

/// `zcio-bench ring` with its options.
#[derive(Debug, Clone)]
pub struct RingBench {
    /// What to run.
    pub opts: Options,
    /// Whether this is the `--quick` run.
    pub quick: bool,
}

impl Bench for RingBench {
    type Job = Job;
    type Row = Row;

    fn name(&self) -> &'static str {
        "ring"
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn intro(&self) -> String {
        format!(
            "producer pinned to CPU {}, (first) consumer to CPU {}",
            cpu_for(0),
            cpu_for(1)
        )
    }

    /// One group: every measurement once, then again.
    fn groups(&self) -> Vec<Vec<Job>> {
        vec![plan(&self.opts)]
    }

    fn reps(&self) -> usize {
        self.opts.reps
    }

    fn label(&self, job: &Job) -> String {
        job.label()
    }

    fn run(&self, job: &Job) -> Result<Vec<Row>, String> {
        job.run(&self.opts).map(|r| vec![r])
    }

    fn same_point(a: &Row, b: &Row) -> bool {
        a.same_point(b)
    }

    fn rank(row: &Row) -> f64 {
        row.gb_per_sec
    }

    fn targets(&self, rows: &[Row]) -> Vec<Target> {
        targets::targets(rows)
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
