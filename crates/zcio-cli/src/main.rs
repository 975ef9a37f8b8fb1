//! The `zcio` command.

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
        zcio ring create demo --size 4MiB    # a named shared ring in /dev/shm\n  \
        zcio pipe get demo > out &           # a reader of the ring (any number)\n  \
        zcio pipe put demo < file            # stdin into the ring, like a FIFO\n  \
        zcio ring stat demo                  # fill, producer and per-consumer counters\n\n\
        The benchmarks are a separate program: cargo run --release -p zcio-bench -- --help"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Named shared rings (one producer, many consumers): create, stat, ls, rm.
    #[command(subcommand)]
    Ring(ring::RingCmd),
    /// Named multi-reader pipes over rings: stdin → ring → stdout.
    #[command(subcommand)]
    Pipe(pipe::PipeCmd),
}

fn main() {
    let cli = Cli::parse();
    // Every handle (rings, producers, consumers) is dropped inside `run`
    // before the process exits: a producer must close its ring.
    let res = match cli.cmd {
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
