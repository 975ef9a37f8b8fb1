//! `zcio-bench`: the cross-process benchmarks of zcio against its baselines.
//!
//! Kept out of the `zcio` tool so that it carries neither iceoryx2 nor the
//! plotting crates. Every measured side is this binary re-executed with a
//! hidden child argument, one per benchmark family
//! ([`zcio_bench::roles::ROLES`]).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
#[cfg(feature = "bridge")]
use zcio_bench::bridge;
use zcio_bench::driver::{self, Format, Output};
use zcio_bench::fmt::{parse_bytes_u64, parse_size};
use zcio_bench::{containers, proxyb, registryb, ring, roles, semantics, splice, tokiob, transfer};

#[derive(Parser, Debug)]
#[command(
    name = "zcio-bench",
    version,
    about = "Cross-process benchmarks of zcio against pipes, Unix sockets, iceoryx2, memcpy, Zenoh and TCP",
    long_about = None,
    after_help = "Every benchmark runs its baselines in the same invocation, prints tables and \
        checks its targets (PASS / MISS), and writes a JSON document and an SVG plot.\n\n\
        Examples:\n  \
        zcio-bench transfer --quick          # message transfer between processes, well under a minute\n  \
        zcio-bench transfer                  # full sweep, median of 3 interleaved runs\n  \
        zcio-bench ring --quick              # named rings vs pipes, fan-out, layouts\n  \
        zcio-bench proxy --quick             # rendezvous latency, forwarding chains, checksum\n  \
        zcio-bench semantics --quick         # the eight buffering semantics vs pipe, socket, memcpy\n  \
        zcio-bench tokio --quick             # async channels on tokio vs tokio's UnixStream\n  \
        zcio-bench bridge --quick            # zcio rings across hosts through Zenoh vs Zenoh, TCP\n  \
        zcio-bench containers --quick        # rings between PID / network namespaces vs within one\n  \
        zcio-bench transfer --help           # the options of one benchmark"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Messages between processes: zcio vs pipe, Unix socket, iceoryx2, memcpy.
    ///
    /// Throughput: hand messages of 4 KiB … 16 MiB from one process to
    /// another: zcio cached/uncached × volatile/secured, a three-process
    /// path, and the pipe, Unix socket, iceoryx2 and memcpy baselines, with
    /// the CPU time per message of each process. Latency: ping-pong with one
    /// message in flight (64 B … 1 MiB) over a zcio channel, the zcio
    /// rendezvous, iceoryx2, a pipe pair and a Unix socket pair: one-way
    /// latency percentiles, each beside the hardware floor of its mode (one
    /// cache line each way between the two pinned processes, spinning or
    /// with futex waits). All in one run.
    #[command(after_help = "Examples:\n  \
        zcio-bench transfer --quick\n  \
        zcio-bench transfer --sizes 4K,1M --variants zcio-cached-volatile,iceoryx2,pipe\n  \
        zcio-bench transfer --quick --ping-pong                # only the latency part\n  \
        zcio-bench transfer --parts latency --ping-sizes 64,4K\n  \
        zcio-bench transfer --ping-pong --ping-transports cache-line,zcio-channel --round-trips 200000\n  \
        zcio-bench transfer --ping-pong --loan-ahead          # buffers taken ahead, as iceoryx2's own benchmark\n  \
        zcio-bench transfer --quick --format json --out transfer.json --svg transfer.svg")]
    Transfer(TransferArgs),
    /// Named rings vs Linux pipes: copy, peek, fan-out, layouts.
    ///
    /// Named rings vs Linux pipes and per-packet allocation, every side a
    /// separate process, all in one run: (a) pipe vs ring read/write (copy)
    /// vs peek over ring size × call size; (b) fan-out to 1…8 consumers,
    /// ring peek vs a tee into N pipes, CPU per GiB; (c) the four layouts
    /// with IMIX packets vs a Vec per packet.
    #[command(after_help = "Examples:\n  \
        zcio-bench ring --quick                       # all three parts, well under a minute\n  \
        zcio-bench ring                               # full sweep: rings 16K…64M × calls 64…1M\n  \
        zcio-bench ring --parts a --ring-sizes 1M --call-sizes 4K,64K,1M\n  \
        zcio-bench ring --parts b,c --reps 5          # median of 5 interleaved runs\n  \
        zcio-bench ring --quick --format json --out ring.json --svg ring.svg")]
    Ring(RingArgs),
    /// Rendezvous and asynchronous IPC through proxy threads: latency, forwarding chains, checksum.
    ///
    /// Synchronous and asynchronous IPC, every side a separate process, in
    /// one run: (a) one-word latency of a rendezvous round trip, an
    /// asynchronous send through a proxy endpoint, a round trip through the
    /// receive proxy, a pipe and a futex ping-pong; (b) forwarding chains of 0…8
    /// relay processes, by reference and copying per hop; (c) 16 messages of
    /// 4 B…4 KiB by copy through the kernel vs shared memory; (d)
    /// receiver-side RFC 1071 checksum with and without the primitives; (e)
    /// futex calls per message under sustained load.
    #[command(after_help = "Examples:\n  \
        zcio-bench proxy --quick                      # all five parts, about half a minute\n  \
        zcio-bench proxy                              # full run: 100k iterations, 1 GiB checksummed\n  \
        zcio-bench proxy --parts a                    # only the one-word latencies\n  \
        zcio-bench proxy --parts b --intermediates 0,8 --stream 100000\n  \
        zcio-bench proxy --quick --format json --out proxy.json --svg proxy.svg")]
    Proxy(ProxyArgs),
    /// Peer-to-peer I/O: zcio cp and zcio gateway vs user loops and tools.
    ///
    /// Every side a separate process, all in one run: (a) copy a
    /// page-cached 1 GiB file with a read/write loop (64 KiB), coreutils
    /// `cp` and `zcio cp`: throughput and the copier's CPU time; (b) the
    /// rate of a CPU-bound neighbour pinned beside each copier, as a
    /// percentage of its rate alone; (c) 1 GiB of log text through CRC32C +
    /// zstd level 1: `zcio cp --module crc32c --module zstd` vs a user loop
    /// vs `tee | cksum` + `zstd -1`, total CPU; (d) UDP forwarding through
    /// `zcio gateway --plain` vs `zcio gateway`, 64 B … 8 KiB: one-way latency
    /// and the highest loss-free rate, over loopback and (as root) over a
    /// veth pair in a network namespace. Needs the `zcio` binary
    /// (`cargo build --release -p zcio-cli`).
    #[command(after_help = "Examples:\n  \
        cargo build --release -p zcio-cli -p zcio-bench\n  \
        zcio-bench splice --quick                       # all four parts, well under a minute\n  \
        zcio-bench splice                               # full run: 1 GiB files, 64 B…8 KiB, median of 3\n  \
        zcio-bench splice --parts a,b                   # only the copies and CPU availability\n  \
        zcio-bench splice --parts d --packet-sizes 64,1K --no-veth\n  \
        zcio-bench splice --quick --zcio ./target/release/zcio --dir /tmp\n  \
        zcio-bench splice --quick --format json --out splice.json --svg splice.svg")]
    Splice(SpliceArgs),
    /// Buffering semantics (Genie): the eight semantics between processes.
    ///
    /// This process sends, a child receives, over a zcio channel with a
    /// `zcio::semantics::SemanticEndpoint` on each end: copy, emulated copy, share,
    /// emulated share, move, emulated move, weak move and emulated weak
    /// move (the same on both sides), "secured" (emulated copy to a
    /// receiver that does not trust the sender), a mixed pair (emulated
    /// copy → copy) and emulated copy with the sender rewriting its buffer
    /// at once (TCOW), with aligned and unaligned receive buffers, beside a
    /// Linux pipe, a Unix socket and memcpy, in one run. Every page of
    /// every message is stamped and checked. Throughput (stream), one-way
    /// latency (ping-pong with an 8-byte answer by copy; timed from the
    /// sender's output to the receiver's input across the processes), CPU
    /// per message of both processes, and the cost model's prediction
    /// (by default from a calibration of this machine at the start of the
    /// run: see --model).
    #[command(after_help = "Examples:\n  \
        zcio-bench semantics --quick                  # about a minute: 64 B … 4 MiB, one run\n  \
        zcio-bench semantics                          # 64 B … 16 MiB, median of 3 interleaved runs\n  \
        zcio-bench semantics --sizes 4K,1M --semantics copy,emulated-copy,secured,pipe\n  \
        zcio-bench semantics --quick --runs 3\n  \
        zcio-bench semantics --quick --model builtin  # decide and predict with the built-in cost model\n  \
        zcio-bench semantics --model current          # with the calibration file (zcio calibrate), if any\n  \
        zcio-bench semantics --quick --format json --out sem.json --svg sem.svg")]
    Semantics(SemanticsArgs),
    /// Async zcio on tokio: AsyncChannel vs tokio's UnixStream vs the sync channel.
    ///
    /// Every side a separate process, all in one run: zcio's async channel
    /// (`zcio::tokio::AsyncChannel`, a current-thread tokio runtime in
    /// each process) against what an async program would use today —
    /// tokio's `UnixStream` with length-prefixed frames — and against
    /// zcio's synchronous channel in blocking mode (no spin) and, for
    /// context, with its default spinning policy. (latency) ping-pong with
    /// one message in flight, one-way p50, p90 and p99; (throughput) a sender
    /// streaming as fast as it can, msgs/s, GB/s and the CPU time per
    /// message of both processes; 64 B … 1 MiB. (idle) one task awaiting
    /// 100 channels whose peer never sends: its process's CPU time over
    /// one second (getrusage), beside tokio's sockets and a thread per
    /// synchronous channel. Checks the targets of issue 24.
    #[command(after_help = "Examples:\n  \
        zcio-bench tokio --quick                      # 64 B and 64 KiB, one run: well under a minute\n  \
        zcio-bench tokio                              # 64 B … 1 MiB, median of 3 interleaved runs\n  \
        zcio-bench tokio --parts latency --sizes 64,4K --reps 5\n  \
        zcio-bench tokio --parts throughput --variants zcio-async,tokio-unix --sizes 64K,1M\n  \
        zcio-bench tokio --parts idle                 # only the idle waiters\n  \
        zcio-bench tokio --quick --format json --out tokio.json --svg tokio.svg")]
    Tokio(TokioArgs),
    /// A zcio path across hosts through Zenoh vs plain Zenoh and TCP.
    ///
    /// Host A and host B are two network namespaces joined by a veth pair
    /// (as root with ip(8); otherwise loopback), each host's processes
    /// pinned to its own CPU. zcio-bridge: a ring producer on A → `zcio
    /// bridge export` → `zcio bridge import` on B → ring consumers on B
    /// reading in place (zcio-bridge-copy: the export with --copy);
    /// zenoh: a plain publisher on A and subscriber processes on B with the
    /// same session configuration (Reliable, CongestionControl::Block);
    /// tcp: a length-prefixed stream. The same
    /// payloads, 64 B … 16 MiB: throughput (msgs/s, MB/s, CPU per message
    /// of every process), one-way latency at a paced low rate (p50/p99 from
    /// CLOCK_MONOTONIC stamps), and fan-out to 4 receivers on B (bytes on
    /// the link against the payload, CPU of everything on B). Checks the
    /// targets of issue 25. Needs the `zcio` binary (`cargo build --release
    /// -p zcio-cli`) and this binary built with `--features bridge` (Zenoh).
    #[command(after_help = "Examples:\n  \
        cargo build --release -p zcio-cli && cargo build --release -p zcio-bench --features bridge\n  \
        zcio-bench bridge --quick                       # 64 B, 64 KiB, 1 MiB, one run: about a minute\n  \
        zcio-bench bridge                               # 64 B … 16 MiB, median of 3 interleaved runs\n  \
        zcio-bench bridge --parts latency --sizes 64,4K --reps 5\n  \
        zcio-bench bridge --parts fanout --fanout-sizes 64K,1M --receivers 4\n  \
        zcio-bench bridge --quick --no-veth             # host A and B on loopback\n  \
        zcio-bench bridge --quick --format json --out bridge.json --svg bridge.svg")]
    Bridge(BridgeArgs),
    /// zcio between namespaces (containers) vs within one.
    ///
    /// (a) `zcio pipe put` here → an 8 MiB ring → `zcio pipe get` here or in
    /// a new PID namespace (`unshare --pid --fork --mount-proc`):
    /// throughput and the reader's CPU per MiB, every byte checked; (b) a
    /// tokio ring consumer here or in a new network namespace, woken by
    /// its named bell for one block every 2 ms: one-way latency p50/p99.
    /// Runs interleaved, medians. Needs root (or the right to unshare;
    /// otherwise those rows say why they were skipped) and the `zcio`
    /// binary (`cargo build --release -p zcio-cli`).
    #[command(after_help = "Examples:\n  \
        cargo build --release -p zcio-cli -p zcio-bench\n  \
        zcio-bench containers --quick                  # 128 MiB, 300 wakes, 3 runs per point\n  \
        zcio-bench containers                          # 512 MiB, 2000 wakes, 5 runs per point\n  \
        zcio-bench containers --reps 7 --zcio ./target/release/zcio\n  \
        zcio-bench containers --quick --format json --out containers.json --svg containers.svg")]
    Containers(ContainersArgs),
    /// Seeing the registry of live objects: `zcio ls` and `zcio metrics` over N objects.
    ///
    /// A holder process registers N objects of every kind in a fresh run
    /// directory; `zcio ls`, `zcio ls --json` and `zcio metrics --once` (if
    /// built) list them, beside `ls -l` of the directory (the floor), each
    /// called several times per measurement, interleaved. Then the holder is
    /// killed with SIGKILL and one `zcio ls` must report every entry dead
    /// and leave none behind.
    #[command(after_help = "Examples:\n  \
        zcio-bench registry --quick                   # 1 and 1000 objects, 3 interleaved runs\n  \
        zcio-bench registry --objects 10,1000,10000 --reps 7\n  \
        zcio-bench registry --quick --format json --out registry.json --svg registry.svg")]
    Registry(RegistryArgs),
}

/// Output options shared by the benchmarks.
#[derive(Args, Debug)]
struct OutArgs {
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Where to write the JSON results [default: bench-out/<benchmark>.json].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where to write the SVG plot [default: bench-out/<benchmark>.svg].
    #[arg(long)]
    svg: Option<PathBuf>,
}

impl OutArgs {
    fn output(self, bench: &str) -> Output {
        Output {
            format: self.format,
            json: self
                .out
                .unwrap_or_else(|| PathBuf::from(format!("bench-out/{bench}.json"))),
            svg: self
                .svg
                .unwrap_or_else(|| PathBuf::from(format!("bench-out/{bench}.svg"))),
        }
    }
}

#[derive(Args, Debug)]
struct TransferArgs {
    /// A short run (well under a minute) for CI and smoke tests: 4 KiB,
    /// 64 KiB, 1 MiB and 16 MiB, one run per point.
    #[arg(long)]
    quick: bool,
    /// Message sizes, comma-separated (e.g. 4K,64K,1M,16M; 4 KiB … 256 MiB).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<String>>,
    /// Variants to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
    /// Parts to run, comma-separated: throughput (messages streamed),
    /// latency (ping-pong, one message in flight). Default: both.
    #[arg(long, value_delimiter = ',')]
    parts: Option<Vec<String>>,
    /// Only the latency part (the same as --parts latency).
    #[arg(long, conflicts_with = "parts")]
    ping_pong: bool,
    /// Ping-pong message sizes, comma-separated (8 B … 256 MiB; default
    /// 64,4K,64K,1M; --quick 64,4K,64K).
    #[arg(long, value_delimiter = ',')]
    ping_sizes: Option<Vec<String>>,
    /// Ping-pong transports, comma-separated (default: all of cache-line,
    /// cache-line-futex, zcio-channel, zcio-lane, zcio-rendezvous, iceoryx2,
    /// zcio-channel-blocking, iceoryx2-blocking, pipe, unix-socket). A row's
    /// "vs floor" needs its mode's floor in the run.
    #[arg(long, value_delimiter = ',')]
    ping_transports: Option<Vec<String>>,
    /// Measured round trips per ping-pong point, at most (default 20000;
    /// --quick 2000); each point also stops after 5 s (--quick 1 s).
    #[arg(long, value_parser = clap::value_parser!(u64).range(100..=10_000_000))]
    round_trips: Option<u64>,
    /// Ping-pong: every side that allocates per message (the zcio
    /// channel's pool, iceoryx2's loan) takes its next buffer right after it
    /// sent, off the round trip, as iceoryx2's own benchmark does. (A lane
    /// reuses its slot; pipes, sockets and the rendezvous copy.)
    #[arg(long)]
    loan_ahead: bool,
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct RingArgs {
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
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct ProxyArgs {
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
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct SpliceArgs {
    /// A short run (well under 2 minutes on two cores): a 256 MiB file, a
    /// 128 MiB stream, packets of 64 B and 1 KiB, trials of 0.25 s, one
    /// run per point.
    #[arg(long)]
    quick: bool,
    /// Parts to run, comma-separated: a (copy), b (avail), c (modules),
    /// d (udp).
    #[arg(long, value_delimiter = ',')]
    parts: Option<Vec<String>>,
    /// Runs per point, interleaved; the median is reported (default 3;
    /// --quick 1).
    #[arg(long)]
    reps: Option<usize>,
    /// (a), (b) size of the page-cached file (e.g. 1G).
    #[arg(long)]
    copy_size: Option<String>,
    /// (c) size of the compressible stream (e.g. 1G).
    #[arg(long)]
    stream_size: Option<String>,
    /// (d) UDP payload sizes, comma-separated (16 B … 16 KiB).
    #[arg(long, value_delimiter = ',')]
    packet_sizes: Option<Vec<String>>,
    /// (d) trials per rate search (a bound; default 10, --quick 7).
    #[arg(long)]
    max_trials: Option<usize>,
    /// (d) only loopback, no veth pair in a network namespace.
    #[arg(long)]
    no_veth: bool,
    /// (d) receive buffer given to both forwarders (`zcio gateway --rcvbuf`;
    /// 0: their default, net.core.rmem_default) [default: 4MiB].
    #[arg(long)]
    gateway_rcvbuf: Option<String>,
    /// Directory for the files of (a)–(c) [default: under the target dir].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The zcio binary [default: `zcio` next to zcio-bench].
    #[arg(long)]
    zcio: Option<PathBuf>,
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct SemanticsArgs {
    /// A short run (about a minute on two CPUs, for CI): sizes 64, 6000,
    /// 64K, 256K, 1M, 4M, one run, shorter phases.
    #[arg(long)]
    quick: bool,
    /// Message sizes, comma-separated (64 B … 64 MiB; e.g. 64,6000,64K,1M).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<String>>,
    /// Lines to run, comma-separated (default: all): copy, emulated-copy,
    /// share, emulated-share, move, emulated-move, weak-move,
    /// emulated-weak-move, secured, mixed, emulated-copy-rewrite, pipe,
    /// unix-socket, memcpy.
    #[arg(long, value_delimiter = ',')]
    semantics: Option<Vec<String>>,
    /// Runs, interleaved; medians per metric are reported (default 3;
    /// --quick 1).
    #[arg(long)]
    runs: Option<usize>,
    /// The cost model both processes' endpoints decide with and the
    /// "model µs" column predicts: fresh (default) calibrates this machine
    /// before measuring (as `zcio calibrate`; quick under --quick) and
    /// saves it beside the JSON as <name>-calibration.json; current uses
    /// what the library finds ($ZCIO_CALIBRATION, else
    /// $XDG_CONFIG_HOME/zcio/calibration.json or
    /// ~/.config/zcio/calibration.json, else built-in); builtin forces the
    /// built-in defaults (measured on another machine). fresh and builtin
    /// set ZCIO_CALIBRATION for the run.
    #[arg(long, value_name = "fresh|current|builtin")]
    model: Option<String>,
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct ContainersArgs {
    /// A short run (well under a minute): 128 MiB through the pipe, 300
    /// wakes, 3 interleaved runs per point.
    #[arg(long)]
    quick: bool,
    /// Runs per point, interleaved; the median is reported (default 5;
    /// --quick 3).
    #[arg(long)]
    reps: Option<usize>,
    /// The zcio binary [default: target/release/zcio beside this one].
    #[arg(long)]
    zcio: Option<PathBuf>,
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct RegistryArgs {
    /// A short run: 1 and 1000 objects, 5 calls per measurement, 3
    /// interleaved runs per point.
    #[arg(long)]
    quick: bool,
    /// Live object counts, comma-separated (1 … 100000; default
    /// 1,100,1000,4000).
    #[arg(long, value_delimiter = ',')]
    objects: Option<Vec<usize>>,
    /// Runs per point, interleaved; the median is reported (default 5;
    /// --quick 3).
    #[arg(long)]
    reps: Option<usize>,
    /// The zcio binary [default: target/release/zcio beside this one].
    #[arg(long)]
    zcio: Option<PathBuf>,
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct TokioArgs {
    /// A short run (well under a minute, for CI): sizes 64 B and 64 KiB,
    /// 2000 round trips and 128 MiB streamed per point, one run.
    #[arg(long)]
    quick: bool,
    /// Parts to run, comma-separated: latency, throughput, idle
    /// (default: all).
    #[arg(long, value_delimiter = ',')]
    parts: Option<Vec<String>>,
    /// Message sizes of the latency and throughput parts, comma-separated
    /// (16 B … 16 MiB; default 64,4K,64K,1M; --quick 64,64K).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<String>>,
    /// Variants of the latency and throughput parts, comma-separated
    /// (default: all of zcio-async, tokio-unix, zcio-sync-blocking,
    /// zcio-sync). The targets need zcio-async, tokio-unix and
    /// zcio-sync-blocking.
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
    /// Runs per point, interleaved; the median is reported (default 3;
    /// --quick 1).
    #[arg(long)]
    reps: Option<usize>,
    /// Measured round trips per ping-pong point, at most (default 20000;
    /// --quick 2000); each point also stops after 4 s (--quick 1 s).
    #[arg(long)]
    round_trips: Option<u64>,
    /// Most messages streamed per throughput point (default 300000;
    /// --quick 50000); otherwise 1 GiB (--quick 128 MiB) per point.
    #[arg(long)]
    messages: Option<u64>,
    #[command(flatten)]
    out: OutArgs,
}

#[derive(Args, Debug)]
struct BridgeArgs {
    /// A short run (about a minute on two CPUs, for CI): sizes 64 B, 64 KiB
    /// and 1 MiB, fan-out at 64 KiB, 1 s per point, one run.
    #[arg(long)]
    quick: bool,
    /// Parts to run, comma-separated: throughput, latency, fanout
    /// (default: all).
    #[arg(long, value_delimiter = ',')]
    parts: Option<Vec<String>>,
    /// Message sizes of the throughput and latency parts, comma-separated
    /// (32 B … 16 MiB; default 64,4K,64K,1M,16M; --quick 64,64K,1M).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<String>>,
    /// Variants of the throughput and latency parts, comma-separated
    /// (default: all of zcio-bridge, zcio-bridge-copy, zenoh, tcp;
    /// zcio-bridge-copy runs `zcio bridge export --copy`). The targets
    /// need zcio-bridge and zenoh.
    #[arg(long, value_delimiter = ',')]
    variants: Option<Vec<String>>,
    /// Message sizes of the fan-out part (default 64K,1M; --quick 64K).
    #[arg(long, value_delimiter = ',')]
    fanout_sizes: Option<Vec<String>>,
    /// Receivers on host B in the fan-out part [default: 4].
    #[arg(long)]
    receivers: Option<usize>,
    /// Runs per point, interleaved; the median is reported (default 3;
    /// --quick 1).
    #[arg(long)]
    reps: Option<usize>,
    /// Most messages sent per throughput point after the warm-up (default
    /// 10000000; --quick 3000000); the sender also stops after 2.5 s
    /// (--quick 1 s) or 8 GiB (--quick 2 GiB).
    #[arg(long)]
    messages: Option<u64>,
    /// Data size of the two rings of the zcio path, a power of two (also
    /// the import's --size) [default: 128MiB, the import's default].
    #[arg(long)]
    ring_size: Option<String>,
    /// Host A and host B on loopback, no network namespaces.
    #[arg(long)]
    no_veth: bool,
    /// The zcio binary [default: `zcio` next to zcio-bench].
    #[arg(long)]
    zcio: Option<PathBuf>,
    #[command(flatten)]
    out: OutArgs,
}

/// A run that could not start because of its input (exit code 2), or one
/// that failed (exit code 1).
enum Failure {
    Input(String),
    Run(String),
}

fn input<T>(r: Result<T, String>) -> Result<T, Failure> {
    r.map_err(Failure::Input)
}

/// `--reps N`: 1 to 100 runs per point.
fn reps(r: usize) -> Result<usize, Failure> {
    input(if (1..=100).contains(&r) {
        Ok(r)
    } else {
        Err(format!("--reps {r}: give 1 to 100 runs per point"))
    })
}

/// `a,b,…` through `parse`.
fn list<T>(items: &[String], parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, Failure> {
    input(items.iter().map(|x| parse(x)).collect())
}

fn transfer_cmd(a: TransferArgs) -> Result<(), Failure> {
    let mut opts = if a.quick {
        transfer::Options::quick()
    } else {
        transfer::Options::full()
    };
    if let Some(s) = &a.sizes {
        opts.sizes = list(s, parse_size)?;
    }
    if let Some(v) = &a.variants {
        opts.variants = list(v, transfer::Variant::parse)?;
    }
    if let Some(p) = &a.parts {
        opts.parts = list(p, transfer::Part::parse)?;
    }
    if a.ping_pong {
        opts.parts = vec![transfer::Part::Latency];
    }
    if let Some(s) = &a.ping_sizes {
        opts.ping.sizes = list(s, parse_size)?;
    }
    if let Some(t) = &a.ping_transports {
        opts.ping.kinds = list(t, transfer::pingpong::Kind::parse)?;
    }
    if let Some(n) = a.round_trips {
        opts.ping.iters = n;
    }
    opts.ping.loan_ahead = a.loan_ahead;
    input(opts.validate())?;
    input(transfer::check_limits(&opts))?;
    let bench = transfer::Transfer {
        opts,
        quick: a.quick,
    };
    driver::run(&bench, &a.out.output("transfer")).map_err(Failure::Run)
}

fn ring_cmd(a: RingArgs) -> Result<(), Failure> {
    let mut opts = if a.quick {
        ring::Options::quick()
    } else {
        ring::Options::full()
    };
    if let Some(p) = &a.parts {
        opts.parts = list(p, ring::Part::parse)?;
    }
    if let Some(s) = &a.ring_sizes {
        opts.ring_sizes = list(s, parse_size)?;
    }
    if let Some(s) = &a.call_sizes {
        opts.call_sizes = list(s, parse_size)?;
    }
    if let Some(c) = &a.consumers {
        opts.consumers = c.clone();
    }
    if let Some(r) = a.reps {
        opts.reps = r.max(1);
    }
    input(ring::validate(&opts))?;
    input(ring::check_limits(&opts))?;
    let stale = ring::remove_stale_rings();
    if stale > 0 {
        eprintln!("removed {stale} rings left behind by interrupted runs");
    }
    let bench = ring::RingBench {
        opts,
        quick: a.quick,
    };
    driver::run(&bench, &a.out.output("ring")).map_err(Failure::Run)
}

fn proxy_cmd(a: ProxyArgs) -> Result<(), Failure> {
    let mut opts = if a.quick {
        proxyb::Options::quick()
    } else {
        proxyb::Options::full()
    };
    if let Some(p) = &a.parts {
        opts.parts = list(p, proxyb::Part::parse)?;
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
        opts.cksum_volume = input(parse_bytes_u64(v))?;
    }
    input(proxyb::validate(&opts))?;
    input(proxyb::check_limits(&opts))?;
    let bench = proxyb::ProxyBench { opts };
    driver::run(&bench, &a.out.output("proxy")).map_err(Failure::Run)
}

fn splice_cmd(a: SpliceArgs) -> Result<(), Failure> {
    let zcio = a.zcio.unwrap_or_else(splice::default_zcio);
    input(splice::check_zcio(&zcio))?;
    let mut opts = if a.quick {
        splice::Options::quick(zcio)
    } else {
        splice::Options::full(zcio)
    };
    if let Some(p) = &a.parts {
        opts.parts = list(p, splice::Part::parse)?;
    }
    if let Some(r) = a.reps {
        opts.reps = r;
    }
    if let Some(s) = &a.copy_size {
        opts.copy_size = input(parse_bytes_u64(s))?;
    }
    if let Some(s) = &a.stream_size {
        opts.stream_size = input(parse_bytes_u64(s))?;
    }
    if let Some(s) = &a.packet_sizes {
        opts.packet_sizes = list(s, parse_size)?;
    }
    if let Some(n) = a.max_trials {
        opts.max_trials = n;
    }
    opts.veth = !a.no_veth;
    if let Some(s) = &a.gateway_rcvbuf {
        opts.gateway_rcvbuf = input(parse_bytes_u64(s))?;
    }
    opts.dir = a.dir;
    input(splice::validate(&opts))?;
    let bench = splice::SpliceBench::prepare(opts).map_err(Failure::Run)?;
    driver::run(&bench, &a.out.output("splice")).map_err(Failure::Run)
}

fn semantics_cmd(a: SemanticsArgs) -> Result<(), Failure> {
    let mut opts = if a.quick {
        semantics::Options::quick()
    } else {
        semantics::Options::full()
    };
    if let Some(s) = &a.sizes {
        opts.sizes = list(s, parse_size)?;
    }
    if let Some(l) = &a.semantics {
        opts.lines = list(l, semantics::Line::parse)?;
    }
    if let Some(r) = a.runs {
        opts.runs = r;
    }
    let choice = match &a.model {
        Some(m) => input(semantics::model::Choice::parse(m))?,
        None => semantics::model::Choice::default(),
    };
    input(semantics::validate(&opts))?;
    let out = a.out.output("semantics");
    // Before anything reads the library's cost model (the first endpoint).
    let model = semantics::model::prepare(choice, opts.quick, &out.json).map_err(Failure::Run)?;
    let bench = semantics::SemBench::new(opts, model);
    driver::run(&bench, &out).map_err(Failure::Run)
}

fn tokio_cmd(a: TokioArgs) -> Result<(), Failure> {
    let mut opts = if a.quick {
        tokiob::Options::quick()
    } else {
        tokiob::Options::full()
    };
    if let Some(p) = &a.parts {
        opts.parts = list(p, tokiob::Part::parse)?;
    }
    if let Some(s) = &a.sizes {
        opts.sizes = list(s, parse_size)?;
    }
    if let Some(v) = &a.variants {
        opts.variants = list(v, tokiob::Variant::parse)?;
    }
    if let Some(r) = a.reps {
        opts.reps = r;
    }
    if let Some(n) = a.round_trips {
        opts.round_trips = n;
    }
    if let Some(n) = a.messages {
        opts.max_msgs = n;
        opts.min_msgs = opts.min_msgs.min(n);
    }
    input(tokiob::check_limits(&opts))?;
    let bench = tokiob::TokioBench { opts };
    driver::run(&bench, &a.out.output("tokio")).map_err(Failure::Run)
}

#[cfg(not(feature = "bridge"))]
fn bridge_cmd(_: BridgeArgs) -> Result<(), Failure> {
    Err(Failure::Input(
        "this zcio-bench was built without the `bridge` feature (it pulls in Zenoh): run \
         `cargo run --release -p zcio-bench --features bridge -- bridge …`"
            .into(),
    ))
}

#[cfg(feature = "bridge")]
fn bridge_cmd(a: BridgeArgs) -> Result<(), Failure> {
    let zcio = a.zcio.unwrap_or_else(splice::default_zcio);
    input(splice::check_zcio(&zcio))?;
    let mut opts = if a.quick {
        bridge::Options::quick(zcio)
    } else {
        bridge::Options::full(zcio)
    };
    if let Some(p) = &a.parts {
        opts.parts = list(p, bridge::Part::parse)?;
    }
    if let Some(s) = &a.sizes {
        opts.sizes = list(s, parse_size)?;
    }
    if let Some(v) = &a.variants {
        opts.variants = list(v, bridge::Variant::parse)?;
    }
    if let Some(s) = &a.fanout_sizes {
        opts.fanout_sizes = list(s, parse_size)?;
    }
    if let Some(n) = a.receivers {
        opts.fanout_receivers = n;
    }
    if let Some(r) = a.reps {
        opts.reps = r;
    }
    if let Some(n) = a.messages {
        opts.max_msgs = n;
    }
    if let Some(s) = &a.ring_size {
        opts.ring_size = input(parse_bytes_u64(s))?;
    }
    opts.veth = !a.no_veth;
    input(bridge::check_limits(&opts))?;
    let bench = bridge::BridgeBench::prepare(opts).map_err(Failure::Input)?;
    driver::run(&bench, &a.out.output("bridge")).map_err(Failure::Run)
}

fn containers_cmd(a: ContainersArgs) -> Result<(), Failure> {
    let zcio = a.zcio.unwrap_or_else(splice::default_zcio);
    let mut opts = if a.quick {
        containers::Options::quick(zcio)
    } else {
        containers::Options::full(zcio)
    };
    if let Some(r) = a.reps {
        opts.reps = reps(r)?;
    }
    let bench = containers::ContainersBench::new(opts).map_err(Failure::Input)?;
    driver::run(&bench, &a.out.output("containers")).map_err(Failure::Run)
}

fn registry_cmd(a: RegistryArgs) -> Result<(), Failure> {
    let zcio = a.zcio.unwrap_or_else(splice::default_zcio);
    let mut opts = if a.quick {
        registryb::Options::quick(zcio)
    } else {
        registryb::Options::full(zcio)
    };
    if let Some(r) = a.reps {
        opts.reps = reps(r)?;
    }
    if let Some(n) = a.objects {
        opts.objects = input(
            if !n.is_empty() && n.iter().all(|n| (1..=100_000).contains(n)) {
                Ok(n)
            } else {
                Err("--objects: give counts from 1 to 100000, comma-separated".into())
            },
        )?;
    }
    let bench = registryb::RegistryBench::new(opts).map_err(Failure::Input)?;
    driver::run(&bench, &a.out.output("registry")).map_err(Failure::Run)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(code) = roles::dispatch(&args) {
        std::process::exit(code);
    }
    let res = match Cli::parse().cmd {
        Cmd::Transfer(a) => transfer_cmd(a),
        Cmd::Ring(a) => ring_cmd(a),
        Cmd::Proxy(a) => proxy_cmd(a),
        Cmd::Splice(a) => splice_cmd(a),
        Cmd::Semantics(a) => semantics_cmd(a),
        Cmd::Tokio(a) => tokio_cmd(a),
        Cmd::Bridge(a) => bridge_cmd(a),
        Cmd::Containers(a) => containers_cmd(a),
        Cmd::Registry(a) => registry_cmd(a),
    };
    match res {
        Ok(()) => {}
        Err(Failure::Input(e)) => {
            eprintln!("zcio-bench: error: {e}");
            std::process::exit(2);
        }
        Err(Failure::Run(e)) => {
            eprintln!("zcio-bench: error: {e}");
            std::process::exit(1);
        }
    }
}
