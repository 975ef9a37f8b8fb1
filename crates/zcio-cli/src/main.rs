//! The `zcio` command.

mod bench;
mod pipe;
mod ring;

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
        zcio bench transfer --help           # sizes, variants, JSON and SVG output\n  \
        zcio bench async --quick             # async IPC, forwarding chains, checksum (issue #4)\n  \
        zcio ring create demo --size 4MiB    # a named shared ring in /dev/shm\n  \
        zcio pipe get demo > out &           # a reader of the ring (any number)\n  \
        zcio pipe put demo < file            # stdin into the ring, like a FIFO\n  \
        zcio ring stat demo                  # fill, producer and per-consumer counters"
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
    /// Named shared rings (one producer, many consumers): create, stat, ls, rm.
    #[command(subcommand)]
    Ring(ring::RingCmd),
    /// Named multi-reader pipes over rings: stdin → ring → stdout.
    #[command(subcommand)]
    Pipe(pipe::PipeCmd),
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(zcio_bench::child::CHILD_ARG) {
        std::process::exit(zcio_bench::child::child_main(&args[2..]));
    }
    if args.get(1).map(String::as_str) == Some(zcio_bench::asyncb::CHILD_ARG) {
        std::process::exit(zcio_bench::asyncb::child_main(&args[2..]));
    }
    let cli = Cli::parse();
    // Every handle (rings, producers, consumers) is dropped inside `run`
    // before the process exits: a producer must close its ring.
    let res = match cli.cmd {
        Cmd::Bench(b) => bench::run(b).map(|()| 0),
        Cmd::Ring(r) => ring::run(r).map(|()| 0),
        Cmd::Pipe(p) => pipe::run(p),
    };
    match res {
        Ok(0) => {}
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("zcio: error: {e:#}");
            std::process::exit(1);
        }
    }
}
