//! The one driver every benchmark runs under.
//!
//! A benchmark ([`Bench`]) says what to measure (groups of jobs), how to
//! measure one job (spawning its child processes), which rows are
//! repetitions of the same point and by what the median is taken, and how
//! to render its rows (tables, targets, notes, SVG). The driver does the
//! rest, the same way for all of them:
//!
//! 1. print what will run (on stderr), with a progress bar over all jobs;
//! 2. run every group `reps` times *interleaved* (each job of the group once,
//!    then again), so a slow phase of the machine hits all variants alike;
//! 3. keep, per point, the repetition with the median [`Bench::rank`];
//! 4. check the targets, write the JSON document and the SVG, print the
//!    tables, the targets (one vocabulary: PASS / MISS / n/a), the notes and
//!    the machine;
//! 5. fail if any measurement failed (after printing what did not).

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

/// A performance target, checked on the rows of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is required.
    pub name: String,
    /// What was measured.
    pub measured: String,
    /// `Some(true)` met, `Some(false)` missed, `None` not measured in this run.
    pub met: Option<bool>,
}

impl Target {
    /// `[PASS]`, `[MISS]` or `[n/a ]`.
    pub fn verdict(&self) -> &'static str {
        match self.met {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "n/a ",
        }
    }
}

/// The targets block printed after the tables.
pub fn targets_text(targets: &[Target]) -> String {
    let mut out = String::from("Targets:\n");
    for t in targets {
        out.push_str(&format!(
            "  [{}] {} — {}\n",
            t.verdict(),
            t.name,
            t.measured
        ));
    }
    out
}

/// A benchmark as the driver sees it.
pub trait Bench {
    /// One measurement (one set of child processes).
    type Job;
    /// One row of the tables and of the JSON `rows`.
    type Row: Serialize;

    /// `transfer`, `ring`, `async`: the subcommand, the JSON `benchmark`.
    fn name(&self) -> &'static str;
    /// Whether this is the `--quick` run.
    fn quick(&self) -> bool;
    /// One line (stderr) after "N measurements on MACHINE": what runs where.
    fn intro(&self) -> String;
    /// The jobs, in groups; repetitions are interleaved within a group.
    fn groups(&self) -> Vec<Vec<Self::Job>>;
    /// Repetitions of every job (at least 1).
    fn reps(&self) -> usize;
    /// The job's name on the progress bar and in failures.
    fn label(&self, job: &Self::Job) -> String;
    /// Measure once.
    fn run(&self, job: &Self::Job) -> Result<Vec<Self::Row>, String>;
    /// Whether two rows are the same point (repetitions of each other).
    fn same_point(a: &Self::Row, b: &Self::Row) -> bool;
    /// What the median of the repetitions is taken by (e.g. GB/s).
    fn rank(row: &Self::Row) -> f64;
    /// Record on a median row how far apart its point's runs were: the
    /// slowest run's `rank` ÷ the fastest's, ≥ 1 (only with several runs);
    /// nothing by default.
    fn set_spread(_row: &mut Self::Row, _spread: f64) {}
    /// Fill in columns that compare rows, after the medians.
    fn derive(&self, _rows: &mut [Self::Row]) {}
    /// The targets checked on the rows.
    fn targets(&self, rows: &[Self::Row]) -> Vec<Target>;
    /// How the numbers were taken (printed and stored in the JSON).
    fn notes(&self) -> Vec<String>;
    /// Further top-level fields of the JSON document (what else the run
    /// depended on); none by default.
    fn json_fields(&self) -> Vec<(&'static str, serde_json::Value)> {
        Vec::new()
    }
    /// The readable tables.
    fn tables(&self, rows: &[Self::Row]) -> String;
    /// Write the plot.
    fn svg(&self, rows: &[Self::Row], path: &Path) -> Result<(), String>;
}

/// What goes to stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable tables (default).
    Table,
    /// The JSON document.
    Json,
}

/// Where the results go.
#[derive(Clone, Debug)]
pub struct Output {
    /// Stdout format.
    pub format: Format,
    /// The JSON document.
    pub json: PathBuf,
    /// The SVG plot.
    pub svg: PathBuf,
}

/// Per point (groups of rows for which `same` holds, in first-appearance
/// order), the row with the median `rank`.
pub fn medians<R>(rows: Vec<R>, same: impl Fn(&R, &R) -> bool, rank: impl Fn(&R) -> f64) -> Vec<R> {
    medians_with_spread(rows, same, rank)
        .into_iter()
        .map(|(r, _)| r)
        .collect()
}

/// [`medians`], each with its point's spread: the largest `rank` ÷ the
/// smallest (`None` for a single run or a zero rank).
pub fn medians_with_spread<R>(
    rows: Vec<R>,
    same: impl Fn(&R, &R) -> bool,
    rank: impl Fn(&R) -> f64,
) -> Vec<(R, Option<f64>)> {
    let mut groups: Vec<Vec<R>> = Vec::new();
    for r in rows {
        match groups.iter_mut().find(|g| same(&g[0], &r)) {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    groups
        .into_iter()
        .filter_map(|mut g| {
            g.sort_by(|a, b| rank(a).total_cmp(&rank(b)));
            let (lo, hi) = (rank(&g[0]), rank(&g[g.len() - 1]));
            let spread = (g.len() > 1 && lo > 0.0).then(|| hi / lo);
            let mid = g.len() / 2;
            g.into_iter().nth(mid).map(|r| (r, spread))
        })
        .collect()
}

fn progress_bar(total: u64) -> ProgressBar {
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

fn create_parent(path: &Path) -> Result<(), String> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))
        }
        None => Ok(()),
    }
}

/// Run `bench` and report it to `out`. `Err` when a file could not be
/// written or a measurement failed (after everything else was reported).
pub fn run<B: Bench>(bench: &B, out: &Output) -> Result<(), String> {
    let machine = crate::report::machine();
    let groups = bench.groups();
    let reps = bench.reps().max(1);
    let total = (groups.iter().map(Vec::len).sum::<usize>() * reps) as u64;
    eprintln!(
        "zcio-bench {}{}: {total} measurements on {machine}\n{}",
        bench.name(),
        if bench.quick() { " --quick" } else { "" },
        bench.intro()
    );
    let started = Instant::now();
    let pb = progress_bar(total);
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for group in &groups {
        for rep in 0..reps {
            for job in group {
                let label = bench.label(job);
                pb.set_message(if reps > 1 {
                    format!("{label} (run {}/{reps})", rep + 1)
                } else {
                    label.clone()
                });
                match bench.run(job) {
                    Ok(r) => rows.extend(r),
                    Err(e) => failures.push(format!("{label}: {e}")),
                }
                pb.inc(1);
            }
        }
    }
    pb.finish_and_clear();
    let mut rows: Vec<B::Row> = medians_with_spread(rows, B::same_point, B::rank)
        .into_iter()
        .map(|(mut r, spread)| {
            if let Some(s) = spread {
                B::set_spread(&mut r, s);
            }
            r
        })
        .collect();
    bench.derive(&mut rows);
    let targets = bench.targets(&rows);
    let notes = bench.notes();
    let mut doc = serde_json::json!({
        "benchmark": bench.name(),
        "quick": bench.quick(),
        "machine": machine,
        "notes": notes,
        "rows": rows,
        "targets": targets,
    });
    for (k, v) in bench.json_fields() {
        doc[k] = v;
    }
    let json = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
    create_parent(&out.json)?;
    std::fs::write(&out.json, &json).map_err(|e| format!("write {}: {e}", out.json.display()))?;
    create_parent(&out.svg)?;
    let svg_res = bench.svg(&rows, &out.svg);
    match out.format {
        Format::Json => println!("{json}"),
        Format::Table => {
            let mut text = bench.tables(&rows);
            if !text.ends_with("\n\n") {
                text.push('\n');
            }
            text.push_str(&targets_text(&targets));
            text.push_str("\nHow these were measured:\n");
            for n in &notes {
                text.push_str(&format!("  - {n}\n"));
            }
            text.push_str(&format!("machine: {machine}\n"));
            print!("{text}");
            println!(
                "took {:.1} s; wrote {} and {}",
                started.elapsed().as_secs_f64(),
                out.json.display(),
                out.svg.display()
            );
        }
    }
    if let Err(e) = svg_res {
        eprintln!(
            "warning: could not write the plot {}: {e}",
            out.svg.display()
        );
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("failed: {f}");
        }
        return Err(format!("{} of {total} measurements failed", failures.len()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_keep_the_middle_repetition_per_point() {
        let rows = vec![("a", 3.0), ("b", 1.0), ("a", 1.0), ("a", 2.0), ("b", 5.0)];
        let m = medians(rows, |x, y| x.0 == y.0, |r| r.1);
        assert_eq!(m, vec![("a", 2.0), ("b", 5.0)]);
    }

    #[test]
    fn verdicts_use_one_vocabulary() {
        let t = |met| Target {
            name: "x".into(),
            measured: "y".into(),
            met,
        };
        let s = targets_text(&[t(Some(true)), t(Some(false)), t(None)]);
        assert!(s.contains("[PASS] x — y") && s.contains("[MISS]") && s.contains("[n/a ]"));
        assert!(!s.contains("MET") && !s.contains("issue"));
    }
}
