//! The registry benchmark under the driver: jobs, tables, targets, plot.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::holder::{HolderSpec, Ready};
use super::{Job, Options, Row, Tool, CHILD_ARG};
use crate::driver::{Bench, Target};
use crate::plot::{Bars, Figure, Panel};
use crate::report::sig3;

/// The bound on one tool invocation or the holder's start.
const BOUND: Duration = Duration::from_secs(60);

/// `zcio-bench registry` with its options and its scratch directory.
pub struct RegistryBench {
    /// What to run.
    pub opts: Options,
    scratch: Scratch,
    metrics: bool,
    runs: AtomicU64,
}

/// A private directory under /dev/shm, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl RegistryBench {
    /// Check the `zcio` binary and make the scratch directory.
    pub fn new(opts: Options) -> Result<Self, String> {
        crate::splice::check_zcio(&opts.zcio)?;
        let metrics = crate::splice::zcio_has(&opts.zcio, "metrics");
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let path = base.join(format!("zcio-bench-registry-{}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| format!("mkdir {}: {e}", path.display()))?;
        Ok(Self {
            opts,
            scratch: Scratch(path),
            metrics,
            runs: AtomicU64::new(0),
        })
    }

    fn tools(&self) -> Vec<Tool> {
        let mut t = vec![Tool::Ls, Tool::LsJson];
        if self.metrics {
            t.push(Tool::Metrics);
        }
        t.push(Tool::PlainLs);
        t
    }

    fn command(&self, tool: Tool, dir: &Path) -> Command {
        let mut c = match tool {
            Tool::PlainLs => {
                let mut c = Command::new("ls");
                c.arg("-l").arg(dir);
                c
            }
            Tool::Ls | Tool::LsJson | Tool::Metrics => {
                let mut c = Command::new(&self.opts.zcio);
                c.args(match tool {
                    Tool::Ls => &["ls"][..],
                    Tool::LsJson => &["ls", "--json"],
                    _ => &["metrics", "--once"],
                });
                c
            }
        };
        c.env("ZCIO_RUN_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

/// Run `c` to its end within [`BOUND`]: its stdout, wall time and CPU time
/// (user + system, from wait4), in seconds.
fn timed(mut c: Command, what: &str) -> Result<(String, f64, f64), String> {
    let t = Instant::now();
    let mut child = c.spawn().map_err(|e| format!("{what}: spawn: {e}"))?;
    let out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut o) = out {
            let _ = std::io::Read::read_to_string(&mut o, &mut s);
        }
        s
    });
    let err = child.stderr.take();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut e) = err {
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
        }
        s
    });
    let (status, cpu) = crate::cpu::reap(&mut child, what, BOUND)?;
    let wall = t.elapsed().as_secs_f64();
    let stdout = reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    if status != 0 {
        return Err(format!(
            "{what} failed (wait status {status}): {}",
            stderr.trim()
        ));
    }
    Ok((stdout, wall, cpu))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// A holder of `objects` registered objects in `dir`, ready.
struct Holder {
    child: Child,
    ready: Ready,
}

impl Holder {
    fn start(dir: &Path, objects: usize) -> Result<Holder, String> {
        let spec = crate::child::json(&HolderSpec {
            dir: dir.to_path_buf(),
            objects,
        })?;
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut child = Command::new(exe)
            .arg(CHILD_ARG)
            .arg(spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("spawn the registry holder: {e}"))?;
        let out = child.stdout.take().ok_or("holder without stdout")?;
        // The ready line, or EOF if the holder failed (its error is on
        // stderr); the holder is killed on drop either way.
        let mut line = String::new();
        let got = BufReader::new(out).read_line(&mut line);
        let mut h = Holder {
            child,
            ready: Ready { register_ns: 0 },
        };
        match got {
            Ok(n) if n > 0 => {
                h.ready = serde_json::from_str(line.trim())
                    .map_err(|e| format!("holder's ready line {line:?}: {e}"))?;
                Ok(h)
            }
            _ => Err("the registry holder failed before it was ready".into()),
        }
    }

    /// SIGKILL it and reap it.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.kill();
    }
}

fn entries_in(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .count()
    })
}

impl Bench for RegistryBench {
    type Job = Job;
    type Row = Row;

    fn name(&self) -> &'static str {
        "registry"
    }

    fn quick(&self) -> bool {
        self.opts.quick
    }

    fn intro(&self) -> String {
        format!(
            "{} over {:?} live objects (every kind in turn) held by another process; {} calls \
             per measurement, {} interleaved run(s) per point, medians",
            self.tools()
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", "),
            self.opts.objects,
            self.opts.calls,
            self.opts.reps
        )
    }

    fn groups(&self) -> Vec<Vec<Job>> {
        self.opts
            .objects
            .iter()
            .map(|&objects| {
                self.tools()
                    .into_iter()
                    .map(|tool| Job { tool, objects })
                    .collect()
            })
            .collect()
    }

    fn reps(&self) -> usize {
        self.opts.reps
    }

    fn label(&self, job: &Job) -> String {
        format!("{}, {} objects", job.tool.name(), job.objects)
    }

    fn run(&self, job: &Job) -> Result<Vec<Row>, String> {
        let n = self.runs.fetch_add(1, Ordering::Relaxed);
        let dir = self.scratch.0.join(format!("run-{n}"));
        let mut holder = Holder::start(&dir, job.objects)?;
        let what = self.label(job);
        let (mut walls, mut cpus) = (Vec::new(), Vec::new());
        for _ in 0..self.opts.calls {
            let (out, wall, cpu) = timed(self.command(job.tool, &dir), &what)?;
            if job.tool == Tool::Ls {
                // The header line, then one line per object.
                let lines = out.lines().filter(|l| l.contains("/bench/object-")).count();
                if lines != job.objects {
                    return Err(format!("{what}: listed {lines} of {} objects", job.objects));
                }
            }
            walls.push(wall * 1e3);
            cpus.push(cpu * 1e3);
        }
        let register_us = holder.ready.register_ns as f64 / 1e3;
        let leftovers = if job.tool == Tool::Ls {
            holder.kill();
            let (out, _, _) = timed(self.command(Tool::LsJson, &dir), &what)?;
            let dead = out.matches("\"dead\"").count();
            if dead != job.objects {
                return Err(format!(
                    "{what}: after SIGKILL, {dead} of {} entries reported dead",
                    job.objects
                ));
            }
            Some(entries_in(&dir))
        } else {
            None
        };
        drop(holder);
        let _ = std::fs::remove_dir_all(&dir);
        Ok(vec![Row {
            tool: job.tool.name(),
            objects: job.objects,
            wall_ms: median(walls),
            cpu_ms: median(cpus),
            register_us,
            leftovers,
            spread: None,
        }])
    }

    fn same_point(a: &Row, b: &Row) -> bool {
        a.tool == b.tool && a.objects == b.objects
    }

    fn rank(row: &Row) -> f64 {
        row.wall_ms
    }

    fn set_spread(row: &mut Row, spread: f64) {
        row.spread = Some(spread);
    }

    fn targets(&self, rows: &[Row]) -> Vec<Target> {
        let ls1000 = rows
            .iter()
            .find(|r| r.tool == Tool::Ls.name() && r.objects == 1000);
        let leftovers: Vec<&Row> = rows.iter().filter(|r| r.leftovers.is_some()).collect();
        vec![
            Target {
                name: "`zcio ls` with 1000 live objects under 100 ms".into(),
                measured: ls1000.map_or("not measured (no 1000-object point)".into(), |r| {
                    format!("{} ms", sig3(r.wall_ms))
                }),
                met: ls1000.map(|r| r.wall_ms < 100.0),
            },
            Target {
                name: "0 registry entries left after the owner is killed with SIGKILL".into(),
                measured: format!(
                    "{} left over {} kills",
                    leftovers.iter().filter_map(|r| r.leftovers).sum::<usize>(),
                    leftovers.len()
                ),
                met: (!leftovers.is_empty())
                    .then(|| leftovers.iter().all(|r| r.leftovers == Some(0))),
            },
        ]
    }

    fn notes(&self) -> Vec<String> {
        vec![
            "wall: from spawning the tool to reaping it (process start, listing, output to a \
             pipe); CPU: wait4's user + system time of the tool"
                .into(),
            "each entry is an 8 KiB file (header + statistics page) the tool opens, checks, \
             maps read-only and copies out; `ls -l` only reads the directory and stats each file"
                .into(),
            "leftovers: after SIGKILL of the holder, one `zcio ls --json` must report every \
             entry dead and remove it (only the `zcio ls` rows)"
                .into(),
        ]
    }

    fn tables(&self, rows: &[Row]) -> String {
        let mut out = String::from(
            "  tool                   objects   wall ms   CPU ms   register µs/object   leftovers\n",
        );
        for r in rows {
            out.push_str(&format!(
                "  {:<22} {:>7}   {:>7}  {:>7}   {:>18}   {:>9}\n",
                r.tool,
                r.objects,
                sig3(r.wall_ms),
                sig3(r.cpu_ms),
                sig3(r.register_us),
                r.leftovers.map_or("—".into(), |l| l.to_string())
            ));
        }
        out
    }

    fn svg(&self, rows: &[Row], path: &Path) -> Result<(), String> {
        let panels: Vec<Panel> = self
            .opts
            .objects
            .iter()
            .map(|&n| {
                Bars::new(
                    format!("{n} live objects"),
                    "ms per call",
                    sig3,
                    rows.iter()
                        .filter(|r| r.objects == n)
                        .map(|r| (r.tool.to_string(), r.wall_ms))
                        .collect(),
                )
                .into()
            })
            .collect();
        let cols = panels.len().max(1);
        Figure::new(Some("Listing the registry of live objects"), 900)
            .row(320, cols, panels)
            .write(path)
    }
}
