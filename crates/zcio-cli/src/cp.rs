//! `zcio cp SRC DST [--module NAME[:ARGS]]…`: copy through an association
//! (the kernel's fast paths where no module is stacked, zcio buffers with
//! no copies between modules where one is), with a progress bar and a
//! summary: bytes, time, mover, CPU time.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zcio::splice::module::Registry;
use zcio::splice::{self, Association, Increment, MoverKind, Role, Status};
use zcio_fmt::bytes_u64;

use crate::usage;

/// Copy from SRC to DST through an association.
#[derive(Args, Debug)]
#[command(after_help = "I/O objects (SRC and DST):\n  \
    PATH                   a file (DST is created or truncated; never the source itself)\n  \
    DIR                    DST only: the source file's name in that directory\n  \
    -                      standard input / standard output\n  \
    fd:N                   an inherited descriptor\n  \
    tcp:HOST:PORT          connect; tcp-listen:HOST:PORT accepts one connection\n  \
    udp:HOST:PORT          SRC: bind there and take datagrams; DST: send datagrams there\n  \
    unix:PATH              a Unix stream socket\n  \
    ring:NAME              a zcio ring (SRC: join as a reader and wait for a producer, as a\n                         \
    FIFO does; DST: produce, created if missing)\n\n\
    Movers, fastest first: copy_file_range (file to file), sendfile (file to anything),\n\
    splice (pipes, sockets), the buffer path (modules, datagrams, rings, channels).\n\
    Modules (in data order): crc32c, inet, count, zstd[:level=N], unzstd[:limit=SIZE],\n\
    seal:key=HEX64, open:key=HEX64, ratelimit:rate=SIZE[,burst=SIZE], tap:ring=NAME.\n\n\
    Examples:\n  \
    zcio cp big.iso /mnt/backup/big.iso                  # copy_file_range, no user-space copy\n  \
    zcio cp big.iso tcp:10.0.0.2:9000                     # sendfile to a socket\n  \
    zcio cp log.txt log.txt.zst --module zstd:level=3     # compress through the buffer path\n  \
    zcio cp - out.bin --module crc32c --module count -v   # stdin to a file, print the module counters\n  \
    zcio cp udp:127.0.0.1:5000 ring:packets               # datagrams into a ring, one block each\n  \
    zcio cp data tcp:host:9 --json summary.json           # machine-readable summary")]
pub struct CpArgs {
    /// Where the data comes from.
    pub src: String,
    /// Where the data goes.
    pub dst: String,
    /// A processing module NAME[:KEY=VALUE,…] to stack (repeatable; data order).
    #[arg(long = "module", short = 'm', value_name = "NAME[:ARGS]")]
    pub modules: Vec<String>,
    /// Load user modules from a shared object first (runs its code: trust it).
    #[arg(long = "load", value_name = "LIB.so")]
    pub load: Vec<PathBuf>,
    /// Bytes per increment (progress granularity).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = zcio_fmt::parse_bytes_u64)]
    pub increment: u64,
    /// Stop after this many bytes (default: until the source ends).
    #[arg(long, value_name = "SIZE", value_parser = zcio_fmt::parse_bytes_u64)]
    pub max: Option<u64>,
    /// No progress bar and no summary.
    #[arg(long, short)]
    pub quiet: bool,
    /// Also print each module's counters, and which faster movers this pair
    /// of I/O objects does not support, after the summary.
    #[arg(long, short)]
    pub verbose: bool,
    /// Write the summary as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// CPU time of this process (user, system) in seconds, all threads.
fn cpu_times() -> (f64, f64) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable rusage for the kernel to fill and
    // RUSAGE_SELF is a `who` getrusage accepts.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    if rc != 0 {
        return (0.0, 0.0);
    }
    // SAFETY: rusage is plain integers (zeroed above, filled by the kernel).
    let ru = unsafe { ru.assume_init() };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (s(ru.ru_utime), s(ru.ru_stime))
}

pub fn run(a: CpArgs) -> Result<i32> {
    if a.increment == 0 {
        return Err(usage("--increment must be at least one byte"));
    }
    let mut reg = Registry::builtin();
    for lib in &a.load {
        // SAFETY: the user asked for this shared object to be loaded and
        // run (documented under --load); the registry checks its ABI version.
        unsafe { reg.load(lib) }.with_context(|| format!("--load {}", lib.display()))?;
    }
    let mut modules = Vec::new();
    for m in &a.modules {
        modules.push(reg.open(m).map_err(usage)?);
    }
    if let Some(j) = &a.json {
        summary_dir_exists(j)?;
    }
    let src = splice::IoObject::open(&a.src, Role::Source).context("source")?;
    let total = src.size();
    // Into a directory under the source's name; a path is truncated only
    // once the association has checked it is not the source.
    let dst = splice::IoObject::open(&splice::Spec::sink_for(&a.src, &a.dst), Role::Sink)
        .context("destination")?;
    if let Some(j) = &a.json {
        summary_is_not(j, &[&src, &dst])?;
    }
    if let Some(name) = a.dst.strip_prefix("ring:") {
        let readers = zcio::ring::stat(name)
            .map(|st| st.consumers.iter().filter(|c| c.alive).count())
            .unwrap_or(0);
        if readers == 0 && !a.quiet {
            eprintln!(
                "zcio cp: warning: ring {name} has no reader yet: a ring never waits for readers, \
                 so blocks no reader takes in time are dropped or overwritten \
                 (start `zcio pipe get {name}` first)"
            );
        }
    }
    let mut assoc = Association::new(src, dst)?;
    for m in modules {
        assoc.push(m)?;
    }
    let cpu0 = cpu_times();
    let t0 = Instant::now();
    let pb = progress(!a.quiet, total.or(a.max));
    let mut moved = 0u64;
    let mut err = None;
    loop {
        let left = a.max.map(|m| m - moved);
        if left == Some(0) {
            // The limit ends the stream: the modules flush what they hold
            // (a zstd frame, the sealed stream's last frame) to the sink.
            if let Err(e) = assoc.finish() {
                err = Some(e);
            }
            break;
        }
        let step = left.map_or(a.increment, |l| l.min(a.increment));
        match assoc.run(Increment::Bytes(step)) {
            Ok(c) => {
                moved += c.moved;
                if let Some(pb) = &pb {
                    pb.set_position(moved);
                }
                if let Some(e) = c.error {
                    err = Some(e);
                    break;
                }
                if c.eof || c.stopped {
                    break;
                }
            }
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    let stats = assoc.module_stats();
    let st = assoc.close();
    let secs = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_times();
    let cpu = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    // A failed copy says how far it got in its error, not in a summary
    // that reads like success.
    if !a.quiet && err.is_none() {
        summary(&st, secs, cpu);
        if a.verbose {
            details(&st, &stats);
        }
    }
    if let Some(path) = &a.json {
        let v = serde_json::json!({
            "source": st.source, "sink": st.sink, "bytes": st.moved, "seconds": secs,
            "mover": st.mover.to_string(),
            "fell_back": st.fell_back.iter().map(|(m, e)| format!("{m}: {e}")).collect::<Vec<_>>(),
            "modules": st.modules, "copied": st.copied, "dropped": st.dropped,
            "dropped_bytes": st.dropped_bytes, "cpu_user_s": cpu.0, "cpu_sys_s": cpu.1,
            "error": err.as_ref().map(|e| e.to_string()),
        });
        std::fs::write(path, format!("{v:#}\n"))
            .with_context(|| format!("write {}", path.display()))?;
    }
    match err {
        Some(e) => Err(anyhow::Error::new(e).context(format!(
            "copying {} to {} stopped after {}",
            st.source,
            st.sink,
            bytes_u64(st.moved)
        ))),
        None => Ok(0),
    }
}

/// `--json PATH` must be writable at the end: its directory exists now
/// (checked before anything is copied).
fn summary_dir_exists(path: &std::path::Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        return Err(usage(format!(
            "--json {}: the directory {} does not exist; nothing was copied",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// `--json PATH` must not name the source or the destination (writing the
/// summary would replace the data).
fn summary_is_not(path: &std::path::Path, ends: &[&zcio::splice::IoObject]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return Ok(());
    };
    for e in ends {
        if e.file_id() == Some((m.dev(), m.ino())) {
            return Err(usage(format!(
                "--json {} is the same file as {}: the summary would replace the data; nothing was copied, give the summary another path",
                path.display(),
                e.label()
            )));
        }
    }
    Ok(())
}

fn progress(on: bool, total: Option<u64>) -> Option<ProgressBar> {
    on.then(|| {
        let pb = match total {
            Some(n) => ProgressBar::new(n).with_style(
                ProgressStyle::with_template(
                    "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            ),
            None => ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template(
                    "{spinner} {binary_bytes} [{elapsed_precise}] {binary_bytes_per_sec}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            ),
        };
        pb.set_draw_target(ProgressDrawTarget::stderr());
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    })
}

type ModuleStats = Vec<(String, Vec<(&'static str, u64)>)>;

/// The summary of a copy that succeeded. A faster mover the kernel does
/// not support for these I/O objects (`splice` from `/dev/null`) is no
/// failure: the copy used the next one, which the summary names.
fn summary(st: &Status, secs: f64, cpu: (f64, f64)) {
    let rate = (st.moved as f64 / secs.max(1e-9)) as u64;
    let mut mover = st.mover.to_string();
    if !st.modules.is_empty() {
        mover.push_str(&format!(
            " through {} ({} copied between modules)",
            st.modules.join(" → "),
            bytes_u64(st.copied)
        ));
    }
    eprintln!(
        "zcio cp: {} in {secs:.2} s ({}/s) with {mover}; CPU {:.2} s user + {:.2} s system",
        bytes_u64(st.moved),
        bytes_u64(rate),
        cpu.0,
        cpu.1
    );
    if st.dropped > 0 || st.lost > 0 {
        eprintln!(
            "zcio cp: {} blocks ({}) dropped because the destination was behind, {} lost by the source",
            st.dropped,
            bytes_u64(st.dropped_bytes),
            st.lost
        );
    }
}

/// `-v`: the movers passed over and why, as information, then each
/// module's counters.
fn details(st: &Status, stats: &ModuleStats) {
    for (i, (m, e)) in st.fell_back.iter().enumerate() {
        let next = match st.fell_back.get(i + 1).map_or(st.mover, |&(n, _)| n) {
            MoverKind::Buffer => "the buffer path".to_string(),
            n => n.to_string(),
        };
        eprintln!(
            "zcio cp: note: {m} is not available for {} → {} (the kernel says: {e}); used {next} instead",
            st.source, st.sink
        );
    }
    for (name, kv) in stats {
        let kv: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={v}")).collect();
        eprintln!("zcio cp: module {name}: {}", kv.join(" "));
    }
}
