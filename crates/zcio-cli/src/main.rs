//! The `zcio` command.

mod bench;

use clap::{Parser, Subcommand};

/// Zero-copy I/O across process boundaries on Linux.
#[derive(Parser, Debug)]
#[command(
    name = "zcio",
    version,
    about = "zcio: zero-copy I/O across process boundaries on Linux",
    long_about = None,
    after_help = "Examples:\n  \
        zcio bench transfer --quick          # cross-process transfer benchmark, ~15 s\n  \
        zcio bench transfer                  # full sweep, median of 3 runs\n  \
        zcio bench transfer --help           # sizes, variants, JSON and SVG output"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Cross-process benchmarks against pipes, sockets and iceoryx2.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(zcio_bench::child::CHILD_ARG) {
        std::process::exit(zcio_bench::child::child_main(&args[2..]));
    }
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Bench(b) => bench::run(b),
    };
    if let Err(e) = res {
        eprintln!("zcio: error: {e:#}");
        std::process::exit(1);
    }
}
