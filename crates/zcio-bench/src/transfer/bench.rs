//! The transfer benchmark under the driver.

use std::path::Path;

use super::{measure, row, table, Options, Row, Variant};
use crate::affinity::{allowed_cpus, cpu_for};
use crate::driver::{Bench, Target};
use crate::fmt::size;

/// `zcio-bench transfer` with its options.
#[derive(Debug, Clone)]
pub struct Transfer {
    /// What to run.
    pub opts: Options,
    /// Whether this is the `--quick` run.
    pub quick: bool,
}

/// One measurement: a variant at a size.
#[derive(Debug, Clone, Copy)]
pub struct Job {
    /// The variant.
    pub variant: Variant,
    /// Message size.
    pub size: usize,
}

impl Bench for Transfer {
    type Job = Job;
    type Row = Row;

    fn name(&self) -> &'static str {
        "transfer"
    }

    fn quick(&self) -> bool {
        self.quick
    }

    fn intro(&self) -> String {
        format!(
            "{} variants × {} sizes; originator pinned to CPU {}, receiver to CPU {}{}",
            self.opts.variants.len(),
            self.opts.sizes.len(),
            cpu_for(0),
            cpu_for(1),
            if allowed_cpus().len() < 3 {
                " (a forwarder shares the originator's CPU)"
            } else {
                ""
            }
        )
    }

    /// One group per size: the variants of a size are interleaved.
    fn groups(&self) -> Vec<Vec<Job>> {
        self.opts
            .sizes
            .iter()
            .map(|&size| {
                self.opts
                    .variants
                    .iter()
                    .map(|&variant| Job { variant, size })
                    .collect()
            })
            .collect()
    }

    fn reps(&self) -> usize {
        self.opts.reps
    }

    fn label(&self, job: &Job) -> String {
        format!("{} {}", job.variant.name(), size(job.size))
    }

    fn run(&self, job: &Job) -> Result<Vec<Row>, String> {
        let m = measure(job.variant, job.size, &self.opts)?;
        Ok(vec![row(job.variant, job.size, &m)])
    }

    fn same_point(a: &Row, b: &Row) -> bool {
        a.variant == b.variant && a.size == b.size
    }

    fn rank(row: &Row) -> f64 {
        row.msgs_per_sec
    }

    fn derive(&self, rows: &mut [Row]) {
        super::derive(rows);
    }

    fn targets(&self, rows: &[Row]) -> Vec<Target> {
        table::targets(rows)
    }

    fn notes(&self) -> Vec<String> {
        vec![
            format!(
                "every side is a separate process; originator pinned to CPU {}, receiver to CPU \
                 {}; the forwarder of zcio's 3-domain path shares the originator's CPU, the pipe \
                 forwarder the receiver's",
                cpu_for(0),
                cpu_for(1),
            ),
            format!(
                "the originator writes one word in each 4 KiB page, the receiver reads one word \
                 in each page and releases the message; msgs/s at the receiver over the measured \
                 messages after a warm-up; {}",
                match self.opts.reps.max(1) {
                    1 => "one run per point".to_string(),
                    n => format!(
                        "each point is the run with the median msgs/s of {n} interleaved runs"
                    ),
                }
            ),
            "CPU µs/msg: getrusage(RUSAGE_SELF) user + system time of each process (originator, \
             forwarder, receiver) over its own measured messages (from message number `warm-up` \
             to its last), divided by their count; it includes time spent spinning or sleeping \
             in waits, so a side that spins while the other works shows its wall time"
                .to_string(),
        ]
    }

    fn tables(&self, rows: &[Row]) -> String {
        table::text(rows)
    }

    fn svg(&self, rows: &[Row], path: &Path) -> Result<(), String> {
        table::svg(rows, path)
    }
}
