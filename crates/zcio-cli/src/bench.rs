//! `zcio bench …`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use zcio_bench::transfer::{self, Options, Variant};
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

pub fn run(cmd: BenchCmd) -> Result<()> {
    match cmd {
        BenchCmd::Transfer(a) => transfer_cmd(a),
    }
}

fn transfer_cmd(a: TransferArgs) -> Result<()> {
    let mut opts = if a.quick {
        Options::quick()
    } else {
        Options::full()
    };
    if let Some(s) = &a.sizes {
        opts.sizes = s
            .iter()
            .map(|x| fmt::parse_size(x))
            .collect::<Result<_, _>>()
            .map_err(anyhow::Error::msg)?;
        if opts.sizes.iter().any(|&s| s < 4096) {
            bail!("sizes must be at least 4K (the benchmark touches one word per 4 KiB page)");
        }
    }
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
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
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
    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    std::fs::write(&a.out, &json).with_context(|| format!("write {}", a.out.display()))?;
    if let Some(dir) = a.svg.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
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
    if let Err(e) = svg_res {
        eprintln!("warning: could not write the plot: {e}");
    }
    if !failures.is_empty() {
        for f in &failures {
            eprintln!("failed: {f}");
        }
        bail!("{} of {total} measurements failed", failures.len());
    }
    Ok(())
}
