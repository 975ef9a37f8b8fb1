//! `zcio bench …`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use zcio_bench::transfer::{self, Options, Variant};
use zcio_bench::{asyncb, ring};
use zcio_bench::{fmt, report};

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// Hand messages of 4 KiB … 16 MiB from one process to another (fbufs
    /// Table 1): zcio cached/uncached × volatile/secured, a three-domain
    /// path, and the pipe, Unix socket, iceoryx2 and memcpy baselines, all
    /// in one run.
    #[command(after_help = "Examples:\n  \
        zcio bench transfer --quick\n  \
        zcio bench transfer --sizes 4K,1M --variants zcio-cached-volatile,iceoryx2,pipe\n  \
        zcio bench transfer --format json --out transfer.json --svg transfer.svg")]
    Transfer(TransferArgs),
    /// Beltway rings vs Linux pipes and per-packet allocation, every side a
    /// separate process, all in one run: (a) pipe vs ring read/write (copy)
    /// vs peek over ring size × call size (Figures 6, 11); (b) fan-out to
    /// 1…8 consumers, ring peek vs a tee into N pipes, CPU per GiB
    /// (Figure 12b); (c) the four layouts with IMIX packets vs a Vec per
    /// packet (Figure 5). Prints tables and the targets; writes JSON and
    /// one SVG with a panel per ring size for (a) and one each for (b), (c).
    #[command(after_help = "Examples:\n  \
        zcio bench ring --quick                       # all three parts, well under a minute\n  \
        zcio bench ring                               # full sweep: rings 16K…64M × calls 64…1M\n  \
        zcio bench ring --parts a --ring-sizes 1M --call-sizes 4K,64K,1M\n  \
        zcio bench ring --parts b,c --reps 5          # median of 5 interleaved runs\n  \
        zcio bench ring --quick --format json --out ring.json --svg ring.svg")]
    Ring(RingArgs),
    /// The asynchronous-IPC experiments of issue #4 (thesis chapter 6),
    /// every side a separate process, in one run: (a) one-word latency of a
    /// synchronous rendezvous round trip, an asynchronous send, a round
    /// trip through the asynchronous receive proxy, a pipe and a futex
    /// ping-pong (Table 6.1); (b) forwarding chains of 0…8 relay processes,
    /// by reference and copying per hop: latency and msgs/ms (Table 6.2);
    /// (c) 16 messages of 4 B…4 KiB by copy through the kernel vs shared
    /// memory (Table 6.3); (d) receiver-side RFC 1071 checksum with and
    /// without the primitives (Figure 6.4); (e) futex calls per message
    /// under sustained load. Prints tables and the targets; writes JSON
    /// and an SVG.
    #[command(after_help = "Examples:\n  \
        zcio bench async --quick                      # all five parts, about half a minute\n  \
        zcio bench async                              # full run: 100k iterations, 1 GiB checksummed\n  \
        zcio bench async --parts a                    # only the one-word latencies\n  \
        zcio bench async --parts b --intermediates 0,8 --stream 100000\n  \
        zcio bench async --quick --format json --out async.json --svg async.svg")]
    Async(AsyncArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    /// Human-readable table (default).
    Table,
    /// JSON on stdout.
    Json,
}

#[derive(Args, Debug)]
pub struct TransferArgs {
    /// A short run (well under a minute) for CI and smoke tests.
    #[arg(long)]
    quick: bool,
    /// Message sizes, comma-separated (e.g. 4K,64K,1M,16M).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<String>>,
    /// Variants to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-out/transfer.json")]
    out: PathBuf,
    /// Where to write the SVG plot.
    #[arg(long, default_value = "bench-out/transfer.svg")]
    svg: PathBuf,
}

#[derive(Args, Debug)]
pub struct RingArgs {
    /// A short run (well under a minute on two cores): rings 64K and 1M ×
    /// calls 64, 4K, 64K; 256 MiB per point. Without it: rings 16K…64M ×
    /// calls 64…1M, 1 GiB per point. Both take the median of 3 runs.
    #[arg(long)]
    quick: bool,
    /// Parts to run, comma-separated: a (copy), b (fanout), c (layouts).
    #[arg(long, value_delimiter = ',')]
    parts: Option<Vec<String>>,
    /// (a) ring sizes, comma-separated powers of two (e.g. 16K,1M,64M).
    #[arg(long, value_delimiter = ',')]
    ring_sizes: Option<Vec<String>>,
    /// (a) call sizes, comma-separated (e.g. 64,4K,1M); calls larger than
    /// half a ring are skipped for it.
    #[arg(long, value_delimiter = ',')]
    call_sizes: Option<Vec<String>>,
    /// (b) consumer counts, comma-separated (default 1,2,4,8).
    #[arg(long, value_delimiter = ',')]
    consumers: Option<Vec<usize>>,
    /// Runs per point, interleaved; the median by GB/s is reported
    /// (default 3).
    #[arg(long)]
    reps: Option<usize>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-out/ring.json")]
    out: PathBuf,
    /// Where to write the SVG plot (one file, one panel per part-(a) ring
    /// size, plus (b) and (c)).
    #[arg(long, default_value = "bench-out/ring.svg")]
    svg: PathBuf,
}

#[derive(Args, Debug)]
pub struct AsyncArgs {
    /// A short run (≲ 30 s on two cores): 10k iterations in (a), streams
    /// of 200k messages in (b), 64 MiB checksummed in (d), 200k messages in
    /// (e).
    #[arg(long)]
    quick: bool,
    /// Parts to run, comma-separated: a (latency), b (chains), c (copy),
    /// d (checksum), e (futex).
    #[arg(long, value_delimiter = ',')]
    parts: Option<Vec<String>>,
    /// (a) measured iterations per variant.
    #[arg(long)]
    iters: Option<u64>,
    /// (b) intermediate process counts, comma-separated (default
    /// 0,1,2,4,8; 0 is the direct path the others are compared with).
    #[arg(long, value_delimiter = ',')]
    intermediates: Option<Vec<u32>>,
    /// (b) messages streamed per chain for the throughput.
    #[arg(long)]
    stream: Option<u64>,
    /// (d) bytes checksummed per message size (e.g. 1G, 64M).
    #[arg(long)]
    volume: Option<String>,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-out/async.json")]
    out: PathBuf,
    /// Where to write the SVG plot.
    #[arg(long, default_value = "bench-out/async.svg")]
    svg: PathBuf,
}

pub fn run(cmd: BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Transfer(a) => transfer_cmd(a),
        BenchCmd::Ring(a) => ring_cmd(a),
        BenchCmd::Async(a) => async_cmd(a),
    }
}

/// Print a benchmark's result: the JSON, or the table `table()` renders
/// followed by the time taken and where the files went.
fn print_result(
    format: Format,
    json: &str,
    started: std::time::Instant,
    out: &Path,
    svg: &Path,
    table: impl FnOnce() -> String,
) {
    match format {
        Format::Json => println!("{json}"),
        Format::Table => {
            print!("{}", table());
            println!(
                "took {:.1} s; wrote {} and {}",
                started.elapsed().as_secs_f64(),
                out.display(),
                svg.display()
            );
        }
    }
}

/// `--parts a,b,…` through a benchmark's own part parser.
fn parse_parts<P>(names: &[String], parse: impl Fn(&str) -> Result<P, String>) -> Result<Vec<P>> {
    names
        .iter()
        .map(|x| parse(x))
        .collect::<Result<_, _>>()
        .map_err(crate::usage)
}

fn async_cmd(a: AsyncArgs) -> Result<()> {
    let mut opts = if a.quick {
        asyncb::Options::quick()
    } else {
        asyncb::Options::full()
    };
    if let Some(p) = &a.parts {
        opts.parts = parse_parts(p, asyncb::Part::parse)?;
    }
    if let Some(n) = a.iters {
        opts.iters = n;
    }
    if let Some(k) = &a.intermediates {
        opts.intermediates = k.clone();
    }
    if let Some(n) = a.stream {
        opts.chain_stream_msgs = n;
    }
    if let Some(v) = &a.volume {
        opts.cksum_volume = fmt::parse_bytes_u64(v).map_err(crate::usage)?;
    }
    zcio_bench::limits::check_async(&opts).map_err(crate::usage)?;
    asyncb::validate(&opts).map_err(anyhow::Error::msg)?;
    let machine = report::machine();
    let notes = asyncb::notes(&opts);
    let jobs = asyncb::plan(&opts);
    let total = jobs.len() as u64;
    eprintln!(
        "zcio bench async{}: {total} measurements on {machine}\n{}",
        if a.quick { " --quick" } else { "" },
        notes[0]
    );
    let async_built = asyncb::latency::Variant::AsyncSend.available();
    if opts.has(asyncb::Part::Latency) && !async_built {
        eprintln!("async layer not built: the async-send and async-receive rows are left out");
    }
    let started = std::time::Instant::now();
    let pb = progress_bar(total);
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for job in &jobs {
        pb.set_message(job.label());
        match job.run(&opts) {
            Ok(r) => rows.extend(r),
            Err(e) => failures.push(format!("{}: {e}", job.label())),
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    asyncb::table::derive(&mut rows);
    let targets = asyncb::table::targets(&rows, async_built);
    let json = asyncb::table::json(&rows, &targets, &notes, &machine, a.quick);
    create_parent(&a.out)?;
    std::fs::write(&a.out, &json).with_context(|| format!("write {}", a.out.display()))?;
    create_parent(&a.svg)?;
    let svg_res = asyncb::plot::svg(&rows, &a.svg);
    print_result(a.format, &json, started, &a.out, &a.svg, || {
        format!(
            "{}\n{}",
            asyncb::table::text(&rows, &notes, &machine),
            asyncb::table::targets_text(&targets)
        )
    });
    finish(svg_res, &failures, total)
}

fn create_parent(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    Ok(())
}

fn parse_sizes(list: &[String]) -> Result<Vec<usize>> {
    list.iter()
        .map(|x| fmt::parse_size(x))
        .collect::<Result<_, _>>()
        .map_err(crate::usage)
}

fn progress_bar(total: u64) -> ProgressBar {
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

fn ring_cmd(a: RingArgs) -> Result<()> {
    let mut opts = if a.quick {
        ring::Options::quick()
    } else {
        ring::Options::full()
    };
    if let Some(p) = &a.parts {
        opts.parts = parse_parts(p, ring::Part::parse)?;
    }
    if let Some(s) = &a.ring_sizes {
        opts.ring_sizes = parse_sizes(s)?;
    }
    if let Some(s) = &a.call_sizes {
        opts.call_sizes = parse_sizes(s)?;
    }
    if let Some(c) = &a.consumers {
        opts.consumers = c.clone();
    }
    if let Some(r) = a.reps {
        opts.reps = r.max(1);
    }
    zcio_bench::limits::check_ring(&opts).map_err(crate::usage)?;
    ring::validate(&opts).map_err(anyhow::Error::msg)?;
    let stale = ring::remove_stale_rings();
    if stale > 0 {
        eprintln!("removed {stale} rings left behind by interrupted runs");
    }
    let machine = report::machine();
    let notes = ring::notes(&opts);
    let jobs = ring::plan(&opts);
    let reps = opts.reps;
    let total = (jobs.len() * reps) as u64;
    eprintln!(
        "zcio bench ring{}: {} measurements on {machine}\n{}",
        if a.quick { " --quick" } else { "" },
        total,
        notes[0]
    );
    let started = std::time::Instant::now();
    let pb = progress_bar(total);
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    // Repetitions are interleaved (every measurement once, then again), so
    // a slow phase of the machine hits all variants alike.
    for rep in 0..reps {
        for job in &jobs {
            pb.set_message(format!("{} (run {}/{reps})", job.label(), rep + 1));
            match job.run(&opts) {
                Ok(r) => rows.push(r),
                Err(e) => failures.push(format!("{}: {e}", job.label())),
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let rows = ring::median_rows(rows);
    let json = ring::table::json(&rows, &notes, &machine, a.quick);
    create_parent(&a.out)?;
    std::fs::write(&a.out, &json).with_context(|| format!("write {}", a.out.display()))?;
    create_parent(&a.svg)?;
    let svg_res = ring::plot::svg(&rows, &a.svg);
    print_result(a.format, &json, started, &a.out, &a.svg, || {
        ring::table::text(&rows, &notes, &machine)
    });
    finish(svg_res, &failures, total)
}

fn transfer_cmd(a: TransferArgs) -> Result<()> {
    let mut opts = if a.quick {
        Options::quick()
    } else {
        Options::full()
    };
    if let Some(s) = &a.sizes {
        opts.sizes = parse_sizes(s)?;
        if opts.sizes.iter().any(|&s| s < 4096) {
            return Err(crate::usage(
                "sizes must be at least 4K (the benchmark touches one word per 4 KiB page)",
            ));
        }
    }
    zcio_bench::limits::check_transfer(&opts).map_err(crate::usage)?;
    if let Some(v) = &a.variants {
        opts.variants = v
            .iter()
            .map(|x| Variant::parse(x))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?;
    }
    let machine = report::machine();
    let cpus = zcio_bench::affinity::allowed_cpus();
    eprintln!(
        "zcio bench transfer: {} variants × {} sizes on {machine}\n\
         originator pinned to CPU {}, receiver to CPU {}{}",
        opts.variants.len(),
        opts.sizes.len(),
        zcio_bench::affinity::cpu_for(0),
        zcio_bench::affinity::cpu_for(1),
        if cpus.len() < 3 {
            " (a forwarder shares the originator's CPU)"
        } else {
            ""
        }
    );
    // Repetitions are interleaved (every variant once, then again), so a
    // slow phase of the machine hits all variants alike; the median is kept.
    let reps = opts.reps.max(1);
    let total = (opts.variants.len() * opts.sizes.len() * reps) as u64;
    let pb = progress_bar(total);
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for &size in &opts.sizes {
        let mut runs: Vec<Vec<zcio_bench::child::Measured>> = vec![Vec::new(); opts.variants.len()];
        for rep in 0..reps {
            for (i, &v) in opts.variants.iter().enumerate() {
                pb.set_message(format!(
                    "{} {} (run {}/{reps})",
                    v.name(),
                    fmt::size(size),
                    rep + 1
                ));
                match transfer::measure(v, size, &opts) {
                    Ok(m) => runs[i].push(m),
                    Err(e) => failures.push(format!("{} at {}: {e}", v.name(), fmt::size(size))),
                }
                pb.inc(1);
            }
        }
        for (i, r) in runs.into_iter().enumerate() {
            if let Some(m) = transfer::median(r) {
                results.push((opts.variants[i], size, m));
            }
        }
    }
    pb.finish_and_clear();
    let rows = transfer::rows(&results);
    let targets = transfer::targets(&rows);
    let json = report::transfer_json(&rows, &targets, &machine);
    create_parent(&a.out)?;
    std::fs::write(&a.out, &json).with_context(|| format!("write {}", a.out.display()))?;
    create_parent(&a.svg)?;
    let svg_res = report::transfer_svg(&rows, &a.svg, "zcio bench transfer: messages/s by size");
    match a.format {
        Format::Json => println!("{json}"),
        Format::Table => {
            println!("{}", report::transfer_table(&rows));
            println!("{}", report::targets_table(&targets));
            println!("machine: {machine}");
            println!("wrote {} and {}", a.out.display(), a.svg.display());
        }
    }
    finish(svg_res, &failures, total)
}

/// Report a plot that could not be written (a warning) and failed
/// measurements (an error).
fn finish<E: std::fmt::Display>(
    svg_res: Result<(), E>,
    failures: &[String],
    total: u64,
) -> Result<()> {
    if let Err(e) = svg_res {
        eprintln!("warning: could not write the plot: {e}");
    }
    if !failures.is_empty() {
        for f in failures {
            eprintln!("failed: {f}");
        }
        bail!("{} of {total} measurements failed", failures.len());
    }
    Ok(())
}
