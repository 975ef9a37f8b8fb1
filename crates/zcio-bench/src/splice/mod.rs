//! `zcio-bench splice`: peer-to-peer I/O (issue 11, Fall's chapter 6), every
//! side a separate process, in one run.
//!
//! * (a) [`copy`]: copy a page-cached file (1 GiB; `--quick` 256 MiB) with a
//!   read/write loop (64 KiB buffer, a child of this binary), coreutils `cp`
//!   and `zcio cp`: throughput and the copier's CPU time (`wait4`).
//! * (b) [`copy`]: CPU availability (Table 6.1): the progress rate of a
//!   CPU-bound neighbour pinned to one CPU, alone and beside each copier
//!   pinned to the same CPU, as a percentage of its rate alone.
//! * (c) [`chain`]: a compressible stream through CRC32C + zstd level 1:
//!   `zcio cp --module crc32c --module zstd:level=1`, the same work in a
//!   user loop (a child of this binary) and a pipeline of standard tools;
//!   the total CPU time of all processes of each variant.
//! * (d) [`udp`]: UDP forwarding through `zcio gateway --plain` and `zcio
//!   gateway` (and, over loopback, straight from generator to sink as the
//!   harness's reference): one-way latency at a low rate and the highest
//!   loss-free rate (a bounded doubling + bisection [`search`]), over
//!   loopback and over a veth pair in a network namespace the bench
//!   creates ([`netns`]).
//!
//! Children are this binary re-executed with [`CHILD_ARG`] and a JSON
//! [`task::Spec`]; the zcio side is the `zcio` binary next to this one
//! (or `--zcio PATH`).

mod bench;
pub mod chain;
pub mod copy;
pub mod files;
pub mod netns;
pub mod plot;
pub mod proc;
pub mod search;
pub mod table;
pub mod task;
pub mod udp;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use bench::SpliceBench;
pub use table::Row;

/// The hidden first argument that makes the binary a child of this bench.
pub const CHILD_ARG: &str = "__bench-splice-child";

/// One part of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// (a) copy a page-cached file.
    Copy,
    /// (b) CPU availability beside a copier.
    Avail,
    /// (c) checksum + compression modules.
    Modules,
    /// (d) UDP forwarding.
    Udp,
}

impl Part {
    /// All parts in run order.
    pub const ALL: [Part; 4] = [Part::Copy, Part::Avail, Part::Modules, Part::Udp];

    /// The letter used in JSON (`part`), tables and `--parts`.
    pub fn letter(self) -> &'static str {
        match self {
            Part::Copy => "a",
            Part::Avail => "b",
            Part::Modules => "c",
            Part::Udp => "d",
        }
    }

    /// Long name, also accepted by `--parts`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Copy => "copy",
            Part::Avail => "avail",
            Part::Modules => "modules",
            Part::Udp => "udp",
        }
    }

    /// Parse a letter or a long name.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.letter() == s || p.name() == s)
            .ok_or_else(|| {
                format!("unknown part '{s}'; known: a (copy), b (avail), c (modules), d (udp)")
            })
    }
}

/// Options of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Parts to run.
    pub parts: Vec<Part>,
    /// Repetitions of every measurement, interleaved; the median is kept.
    pub reps: usize,
    /// (a), (b) size of the page-cached file.
    pub copy_size: u64,
    /// (b) how long the neighbour's rate is measured.
    pub avail_time: Duration,
    /// (c) size of the compressible stream.
    pub stream_size: u64,
    /// (d) packet sizes (UDP payload bytes).
    pub packet_sizes: Vec<usize>,
    /// (d) the low fixed rate of the latency runs (packets/s).
    pub latency_rate: u64,
    /// (d) how long a latency run sends.
    pub latency_time: Duration,
    /// (d) how long one trial of the rate search sends.
    pub trial_time: Duration,
    /// (d) trials per rate search (a bound).
    pub max_trials: usize,
    /// (d) the first rate tried (packets/s).
    pub start_rate: u64,
    /// (d) the highest rate tried (packets/s).
    pub max_rate: u64,
    /// (d) also over a veth pair in a network namespace, when permitted.
    pub veth: bool,
    /// (d) `--rcvbuf` given to both forwarders (0: their default, the
    /// kernel's `net.core.rmem_default`).
    pub gateway_rcvbuf: u64,
    /// Where the files go (default: a directory under the target dir).
    pub dir: Option<PathBuf>,
    /// The `zcio` binary.
    pub zcio: PathBuf,
    /// Bound on one measurement (all its processes).
    pub timeout: Duration,
    /// Whether this is the `--quick` run.
    pub quick: bool,
}

impl Options {
    /// The full run (≲ 15 minutes on two cores).
    pub fn full(zcio: PathBuf) -> Self {
        Self {
            parts: Part::ALL.to_vec(),
            reps: 3,
            copy_size: 1 << 30,
            avail_time: Duration::from_secs(3),
            stream_size: 1 << 30,
            packet_sizes: vec![64, 256, 1024, 4096, 8192],
            latency_rate: 10_000,
            latency_time: Duration::from_secs(1),
            trial_time: Duration::from_millis(500),
            max_trials: 10,
            start_rate: 25_000,
            max_rate: 3_200_000,
            veth: true,
            gateway_rcvbuf: 4 << 20,
            dir: None,
            zcio,
            timeout: Duration::from_secs(120),
            quick: false,
        }
    }

    /// The `--quick` run (well under 2 minutes on two cores).
    pub fn quick(zcio: PathBuf) -> Self {
        Self {
            reps: 1,
            copy_size: 256 << 20,
            avail_time: Duration::from_secs(1),
            stream_size: 128 << 20,
            packet_sizes: vec![64, 1024],
            latency_time: Duration::from_millis(500),
            trial_time: Duration::from_millis(250),
            max_trials: 7,
            start_rate: 50_000,
            timeout: Duration::from_secs(60),
            quick: true,
            ..Self::full(zcio)
        }
    }

    /// Whether `part` runs.
    pub fn has(&self, part: Part) -> bool {
        self.parts.contains(&part)
    }
}

/// Check options the sides rely on.
pub fn validate(opts: &Options) -> Result<(), String> {
    use crate::limits::{check_count, check_size};
    check_count("--reps", opts.reps as u64, 1, 100)?;
    check_size("--copy-size", opts.copy_size, 1 << 20, 64 << 30)?;
    check_size("--stream-size", opts.stream_size, 1 << 20, 64 << 30)?;
    for &s in &opts.packet_sizes {
        check_size(
            "--packet-sizes",
            s as u64,
            udp::HEADER as u64,
            udp::MAX_PACKET as u64,
        )?;
    }
    check_count("--max-trials", opts.max_trials as u64, 1, 40)?;
    if opts.gateway_rcvbuf > 0 {
        check_size("--gateway-rcvbuf", opts.gateway_rcvbuf, 4096, 1 << 30)?;
    }
    if opts.start_rate == 0 || opts.start_rate > opts.max_rate {
        return Err("--start-rate must be > 0 and ≤ the highest rate".into());
    }
    Ok(())
}

/// The default `zcio` binary: next to this one.
pub fn default_zcio() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("zcio")))
        .unwrap_or_else(|| PathBuf::from("zcio"))
}

/// Check that `zcio` exists and is executable (the failure says how to
/// build it).
pub fn check_zcio(zcio: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(zcio) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(()),
        _ => Err(format!(
            "the zcio binary is missing at {}: build it with `cargo build --release -p zcio-cli` \
             (or pass --zcio PATH)",
            zcio.display()
        )),
    }
}

/// Whether `zcio SUB --help` succeeds (the subcommand exists in this build).
pub fn zcio_has(zcio: &Path, sub: &str) -> bool {
    std::process::Command::new(zcio)
        .args([sub, "--help"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The error of a zcio variant when `zcio` lacks the subcommand `sub`.
pub fn require_sub(zcio: &Path, sub: &str) -> Result<(), String> {
    if zcio_has(zcio, sub) {
        Ok(())
    } else {
        Err(format!(
            "{} has no `{sub}` subcommand: rebuild it with `cargo build --release -p zcio-cli` \
             from a tree that has `zcio {sub}`",
            zcio.display()
        ))
    }
}

/// One measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// (a) one copier on a file system.
    Copy(copy::Copier, files::Place),
    /// (b) the neighbour alone (`None`) or beside a copier.
    Avail(Option<copy::Copier>),
    /// (b) the neighbour beside a copier sending to a link-paced sink.
    AvailLink(copy::Copier),
    /// (c) one variant.
    Modules(chain::Variant),
    /// (d) latency at the low rate through one forwarder.
    Latency(udp::Forwarder, udp::Link, usize),
    /// (d) the highest loss-free rate through one forwarder.
    Rate(udp::Forwarder, udp::Link, usize),
}

impl Job {
    /// For the progress bar.
    pub fn label(&self) -> String {
        use crate::fmt::size as sz;
        match self {
            Job::Copy(c, p) => format!("(a) {} on {}", c.name(), p.name()),
            Job::Avail(None) => "(b) neighbour alone".into(),
            Job::Avail(Some(c)) => format!("(b) neighbour beside {}", c.name()),
            Job::AvailLink(c) => format!("(b) neighbour beside {}", copy::link_variant(*c)),
            Job::Modules(v) => format!("(c) {}", v.name()),
            Job::Latency(f, l, s) => format!("(d) latency {} {} {}", f.name(), l.name(), sz(*s)),
            Job::Rate(f, l, s) => format!("(d) rate {} {} {}", f.name(), l.name(), sz(*s)),
        }
    }
}

/// The groups of measurements of a run (repetitions interleave within a
/// group). `veth` says whether the veth link is available.
pub fn plan(opts: &Options, tmpfs_too: bool, veth: bool) -> Vec<Vec<Job>> {
    let mut groups = Vec::new();
    if opts.has(Part::Copy) {
        let mut places = vec![files::Place::Work];
        if tmpfs_too {
            places.push(files::Place::Tmpfs);
        }
        for p in places {
            groups.push(
                copy::Copier::ALL
                    .into_iter()
                    .map(|c| Job::Copy(c, p))
                    .collect(),
            );
        }
    }
    if opts.has(Part::Avail) {
        let mut g = vec![Job::Avail(None)];
        g.extend(copy::Copier::ALL.into_iter().map(|c| Job::Avail(Some(c))));
        // coreutils cp writes only to files.
        g.extend([copy::Copier::RwLoop, copy::Copier::ZcioCp].map(Job::AvailLink));
        groups.push(g);
    }
    if opts.has(Part::Modules) {
        groups.push(chain::Variant::ALL.into_iter().map(Job::Modules).collect());
    }
    if opts.has(Part::Udp) {
        let mut links = vec![udp::Link::Loopback];
        if veth {
            links.push(udp::Link::Veth);
        }
        for &l in &links {
            let mut g = Vec::new();
            let fwd = udp::Forwarder::for_link(l);
            for &s in &opts.packet_sizes {
                for &f in &fwd {
                    g.push(Job::Latency(f, l, s));
                }
            }
            groups.push(g);
            for &s in &opts.packet_sizes {
                groups.push(fwd.iter().map(|&f| Job::Rate(f, l, s)).collect());
            }
        }
    }
    groups
}

/// Entry point of a child (`args` are the arguments after [`CHILD_ARG`]).
pub fn child_main(args: &[String]) -> i32 {
    crate::child::serve(
        CHILD_ARG,
        args,
        |s: &task::Spec| s.cpu,
        task::run,
        |s| format!("benchmark child {:?} failed", s.task),
    )
}
