//! The containers benchmark under the driver: jobs, tables, targets, plot.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::sides::{measure, write_input, RingDir};
use super::{Job, Options, Place, Row};
use crate::driver::{Bench, Target};
use crate::plot::{Bars, Figure, Panel};
use crate::report::sig3;

/// `zcio-bench containers` with its options and its files.
pub struct ContainersBench {
    /// What to run.
    pub opts: Options,
    dir: RingDir,
    input: PathBuf,
    input_hash: u64,
    runs: AtomicU64,
}

impl ContainersBench {
    /// Prepare the ring directory (also `ZCIO_RING_DIR` of this process,
    /// so rings made here and by the children meet) and the pipe's input.
    pub fn new(opts: Options) -> Result<Self, String> {
        crate::splice::check_zcio(&opts.zcio)?;
        let dir = RingDir::new()?;
        std::env::set_var("ZCIO_RING_DIR", dir.path());
        let input = dir.path().join("pipe-input");
        let input_hash = write_input(&input, opts.pipe_bytes)?;
        Ok(Self {
            opts,
            dir,
            input,
            input_hash,
            runs: AtomicU64::new(0),
        })
    }
}

fn find<'a>(rows: &'a [Row], part: &str, place: Place) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.part == part && r.place == place.name() && r.skipped.is_none())
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), sig3)
}

impl Bench for ContainersBench {
    type Job = Job;
    type Row = Row;

    fn name(&self) -> &'static str {
        "containers"
    }

    fn quick(&self) -> bool {
        self.opts.quick
    }

    fn intro(&self) -> String {
        format!(
            "(a) {} MiB through `zcio pipe` (8 MiB ring), reader here or in a new PID namespace; \
             (b) {} blocks to a tokio ring consumer here or in a new network namespace, one every \
             2 ms, consumer pinned to CPU {}; {} interleaved run(s) per point, medians",
            self.opts.pipe_bytes >> 20,
            self.opts.wakes,
            crate::affinity::cpu_for(1),
            self.opts.reps
        )
    }

    fn groups(&self) -> Vec<Vec<Job>> {
        vec![
            vec![Job::Pipe(Place::Same), Job::Pipe(Place::OtherPid)],
            vec![Job::Wake(Place::Same), Job::Wake(Place::OtherNet)],
        ]
    }

    fn reps(&self) -> usize {
        self.opts.reps
    }

    fn label(&self, job: &Job) -> String {
        format!("{}: {}", job.part(), job.place().name())
    }

    fn run(&self, job: &Job) -> Result<Vec<Row>, String> {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        measure(
            *job,
            &self.opts,
            self.dir.path(),
            &self.input,
            self.input_hash,
            n,
        )
        .map(|r| vec![r])
    }

    fn same_point(a: &Row, b: &Row) -> bool {
        a.part == b.part && a.place == b.place
    }

    fn rank(row: &Row) -> f64 {
        row.mb_per_s.or(row.p50_us).unwrap_or(0.0)
    }

    fn targets(&self, rows: &[Row]) -> Vec<Target> {
        let pipe = find(rows, "pipe", Place::Same)
            .zip(find(rows, "pipe", Place::OtherPid))
            .and_then(|(s, o)| Some((s.mb_per_s?, o.mb_per_s?)));
        let wake = find(rows, "wake", Place::Same)
            .zip(find(rows, "wake", Place::OtherNet))
            .and_then(|(s, o)| Some((s.p50_us?, o.p50_us?)));
        vec![
            Target {
                name: "zcio pipe between two PID namespaces ≥ 0.9× the same-namespace throughput"
                    .into(),
                measured: pipe.map_or("not measured (no PID namespaces here)".into(), |(s, o)| {
                    format!("{} vs {} MB/s: {:.2}×", sig3(o), sig3(s), o / s)
                }),
                met: pipe.map(|(s, o)| o >= 0.9 * s),
            },
            Target {
                name: "tokio ring consumer in another network namespace: one-way p50 ≤ 2× the \
                       same-namespace figure"
                    .into(),
                measured: wake.map_or(
                    "not measured (no network namespaces here)".into(),
                    |(s, o)| format!("{} vs {} µs: {:.2}×", sig3(o), sig3(s), o / s),
                ),
                met: wake.map(|(s, o)| o <= 2.0 * s),
            },
        ]
    }

    fn notes(&self) -> Vec<String> {
        vec![
            "(a) throughput: bytes ÷ the time from starting `zcio pipe put` (the reader already \
             attached) to both ends' exit; reader CPU: wait4's user + system time of `zcio pipe \
             get` (with `unshare`, of it and the namespace's first process); every byte checked"
                .into(),
            "(b) one-way latency: the consumer's CLOCK_MONOTONIC at its read minus the producer's \
             stamp in the block (one system-wide clock); the consumer sleeps on its named bell \
             before every block (2 ms apart)"
                .into(),
        ]
    }

    fn tables(&self, rows: &[Row]) -> String {
        let mut out = String::from(
            "(a) zcio pipe through an 8 MiB ring\n  reader                  MB/s   reader CPU µs/MiB\n",
        );
        for r in rows.iter().filter(|r| r.part == "pipe") {
            match &r.skipped {
                Some(why) => out.push_str(&format!("  {:<22}  skipped: {why}\n", r.place)),
                None => out.push_str(&format!(
                    "  {:<22} {:>6}   {:>8}\n",
                    r.place,
                    opt(r.mb_per_s),
                    opt(r.reader_cpu_us_per_mib)
                )),
            }
        }
        out.push_str("\n(b) tokio ring consumer woken per block\n  consumer                 p50 µs   p99 µs   blocks\n");
        for r in rows.iter().filter(|r| r.part == "wake") {
            match &r.skipped {
                Some(why) => out.push_str(&format!("  {:<23}  skipped: {why}\n", r.place)),
                None => out.push_str(&format!(
                    "  {:<23} {:>7}  {:>7}  {:>7}\n",
                    r.place,
                    opt(r.p50_us),
                    opt(r.p99_us),
                    r.count
                )),
            }
        }
        out
    }

    fn svg(&self, rows: &[Row], path: &Path) -> Result<(), String> {
        let bars = |part: &str, f: fn(&Row) -> Option<f64>| -> Vec<(String, f64)> {
            rows.iter()
                .filter(|r| r.part == part)
                .filter_map(|r| Some((r.place.to_string(), f(r)?)))
                .collect()
        };
        let panels: Vec<Panel> = vec![
            Bars::new(
                "(a) zcio pipe throughput",
                "MB/s",
                sig3,
                bars("pipe", |r| r.mb_per_s),
            )
            .into(),
            Bars::new(
                "(b) tokio consumer wake, one-way p50",
                "µs",
                sig3,
                bars("wake", |r| r.p50_us),
            )
            .into(),
        ];
        Figure::new(Some("zcio between namespaces"), 900)
            .row(360, 2, panels)
            .write(path)
    }
}
