//! `zcio-bench transfer`: the fbufs Table 1 / Figure 3 experiment across
//! real processes. The originator allocates a message of S bytes, writes one
//! word in each page and sends it; the receiver reads one word in each page
//! and releases it. Every variant runs in the same invocation.

mod bench;
mod copy_side;
pub mod line_side;
pub mod ping_sides;
pub mod pingpong;
pub mod spec;
pub mod table;
mod zcio_side;

pub use bench::{Job, Transfer};
pub use spec::{child_main, AllocKind, ChildSpec, Measured, Role, CHILD_ARG};

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::child::Group;
use crate::pages;

/// One way of moving the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// In-process memcpy (reference: one copy, no IPC).
    Memcpy,
    /// zcio path pool, volatile buffers.
    ZcioCachedVolatile,
    /// A zcio channel's lane: slots of the message size (as many as the
    /// path pool's buffers in flight), filled in place.
    ZcioLane,
    /// zcio path pool, secured (sealed) buffers.
    ZcioCachedSecured,
    /// zcio fresh region per message, volatile.
    ZcioUncachedVolatile,
    /// zcio fresh region per message, sealed.
    ZcioUncachedSecured,
    /// Copy through a Linux pipe.
    Pipe,
    /// Copy through a Unix stream socket.
    UnixSocket,
    /// iceoryx2 publish-subscribe with slices.
    Iceoryx2,
    /// zcio cached/volatile over originator → forwarder → receiver.
    Zcio3Dom,
    /// Pipe over originator → forwarder → receiver.
    Pipe3Dom,
}

impl Variant {
    /// All variants, in table order.
    pub const ALL: [Variant; 11] = [
        Variant::ZcioCachedVolatile,
        Variant::ZcioLane,
        Variant::ZcioCachedSecured,
        Variant::ZcioUncachedVolatile,
        Variant::ZcioUncachedSecured,
        Variant::Iceoryx2,
        Variant::Pipe,
        Variant::UnixSocket,
        Variant::Memcpy,
        Variant::Zcio3Dom,
        Variant::Pipe3Dom,
    ];

    /// Name used in tables, JSON and `--variants`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Memcpy => "memcpy",
            Variant::ZcioCachedVolatile => "zcio-cached-volatile",
            Variant::ZcioLane => "zcio-lane",
            Variant::ZcioCachedSecured => "zcio-cached-secured",
            Variant::ZcioUncachedVolatile => "zcio-uncached-volatile",
            Variant::ZcioUncachedSecured => "zcio-uncached-secured",
            Variant::Pipe => "pipe",
            Variant::UnixSocket => "unix-socket",
            Variant::Iceoryx2 => "iceoryx2",
            Variant::Zcio3Dom => "zcio-cached-volatile-3dom",
            Variant::Pipe3Dom => "pipe-3dom",
        }
    }

    /// Parse a name from `--variants`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown variant '{s}'; known: {}",
                    Self::ALL.map(|v| v.name()).join(", ")
                )
            })
    }

    /// Protection domains the data crosses into (1 = in-process).
    pub fn domains(self) -> u32 {
        match self {
            Variant::Memcpy => 1,
            Variant::Zcio3Dom | Variant::Pipe3Dom => 3,
            _ => 2,
        }
    }
}

/// The largest message size accepted (the pools and iceoryx2's segment
/// hold a dozen messages of it).
pub const MAX_SIZE: usize = 256 << 20;

/// Options of a transfer run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Variants.
    pub variants: Vec<Variant>,
    /// Bytes handed over per (variant, size), which sets the message count.
    pub bytes_per_point: u64,
    /// Bounds on the message count per point.
    pub min_count: u64,
    /// See `min_count`.
    pub max_count: u64,
    /// Bound on any one child.
    pub timeout: Duration,
    /// Repetitions per point; the median is reported.
    pub reps: usize,
    /// Parts to run.
    pub parts: Vec<Part>,
    /// The latency part.
    pub ping: pingpong::PingOptions,
}

impl Options {
    /// The full sweep: 4 KiB … 16 MiB, every variant.
    pub fn full() -> Self {
        Self {
            sizes: (0..7).map(|i| 4096usize << (2 * i)).collect(),
            variants: Variant::ALL.to_vec(),
            bytes_per_point: 2 << 30,
            min_count: 100,
            max_count: 500_000,
            timeout: Duration::from_secs(120),
            reps: 3,
            parts: vec![Part::Throughput, Part::Latency],
            ping: pingpong::PingOptions::full(),
        }
    }

    /// The `--quick` sweep (about a minute): three short interleaved runs
    /// per point, so a verdict rests on a median and a noisy point shows.
    pub fn quick() -> Self {
        Self {
            sizes: vec![4096, 64 << 10, 1 << 20, 16 << 20],
            variants: Variant::ALL.to_vec(),
            bytes_per_point: 96 << 20,
            min_count: 12,
            max_count: 20_000,
            timeout: Duration::from_secs(60),
            reps: 3,
            parts: vec![Part::Throughput, Part::Latency],
            ping: pingpong::PingOptions::quick(),
        }
    }

    /// Check sizes before anything is allocated: the benchmark touches one
    /// word per 4 KiB page, and the originator's pool holds up to 12
    /// messages per size (a three-domain path), so sizes are bounded.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(&s) = self
            .sizes
            .iter()
            .find(|&&s| !(4096..=MAX_SIZE).contains(&s))
        {
            return Err(format!(
                "message size {} is out of range: use 4K … {} (e.g. 4K,64K,1M,16M)",
                crate::fmt::size(s),
                crate::fmt::size(MAX_SIZE)
            ));
        }
        if self.parts.contains(&Part::Throughput)
            && (self.sizes.is_empty() || self.variants.is_empty())
        {
            return Err("nothing to run: give at least one size and one variant".into());
        }
        if let Some(&s) = self
            .ping
            .sizes
            .iter()
            .find(|&&s| !(8..=MAX_SIZE).contains(&s))
        {
            return Err(format!(
                "ping-pong size {s} B is out of range: use 8 B … {}",
                crate::fmt::size(MAX_SIZE)
            ));
        }
        Ok(())
    }

    /// Measured messages for `size`.
    pub fn count_for(&self, size: usize) -> u64 {
        (self.bytes_per_point / size as u64).clamp(self.min_count, self.max_count)
    }
}

/// Memory one message size of `bench transfer` takes, in messages: the
/// originator's pool (two chunks of half of the 12 messages in flight on a
/// three-domain path, `zcio_side::bench_pool_config`) plus the copying
/// baselines' buffers.
const TRANSFER_COPIES: u64 = 12 + 4;

/// `bench transfer --sizes` against [`MAX_SIZE`] and the memory available
/// (see [`crate::limits`]).
pub fn check_limits(o: &Options) -> Result<(), String> {
    use crate::limits::{check_memory, check_size, exact};
    for &s in &o.sizes {
        check_size("--sizes", s as u64, 4096, MAX_SIZE as u64)?;
    }
    if let Some(&max) = o.sizes.iter().max() {
        check_memory(
            &format!("--sizes {}", exact(max as u64)),
            max as u64 * TRANSFER_COPIES,
        )?;
    }
    Ok(())
}

/// One measured point.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Variant name.
    pub variant: String,
    /// Message size in bytes.
    pub size: usize,
    /// Domains crossed.
    pub domains: u32,
    /// Measured messages.
    pub msgs: u64,
    /// Messages per second.
    pub msgs_per_sec: f64,
    /// Gigabytes (1e9 B) handed over per second.
    pub gb_per_sec: f64,
    /// Nanoseconds per message.
    pub ns_per_msg: f64,
    /// Nanoseconds per message per page.
    pub ns_per_page: f64,
    /// Incremental cost per page: slope of ns/msg from the previous size.
    pub incr_ns_per_page: Option<f64>,
    /// Futex wakes issued by the receiving side (zcio only).
    pub receiver_wakes: u64,
    /// CPU time (user + system, getrusage) of the originator process per
    /// measured message, in µs.
    pub originator_cpu_us: Option<f64>,
    /// The same for the forwarder (three-domain paths).
    pub forwarder_cpu_us: Option<f64>,
    /// The same for the receiver.
    pub receiver_cpu_us: Option<f64>,
    /// The slowest of this point's runs ÷ the fastest (msgs/s); above
    /// [`NOISY`] the point is reported as noisy, not judged.
    pub spread: Option<f64>,
    /// Faster than this machine can move memory: the cache lines the
    /// reader touches per second (one per page) exceed the bytes per second
    /// `memcpy` moved at the same size in this run. Reported, not judged.
    pub implausible: bool,
}

/// Runs of one point further apart than this (slowest ÷ fastest) make it
/// noisy: reported with its spread, not used for a verdict.
pub const NOISY: f64 = 2.0;

static SEQ: AtomicUsize = AtomicUsize::new(0);

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

fn sock_path() -> String {
    std::env::temp_dir()
        .join(unique("zcio-bench"))
        .with_extension("sock")
        .to_string_lossy()
        .into_owned()
}

fn pipe_pair() -> Result<(OwnedFd, OwnedFd), String> {
    // Be generous to the baseline: the largest pipe an unprivileged user
    // may ask for (fewer context switches per message).
    crate::fds::pipe_pair(None).map(|(r, w, _)| (r, w))
}

/// The zeroed shared page of the cache-line floor: a `CLOEXEC` memfd of
/// [`line_side::PAGE`] bytes.
fn line_page() -> Result<OwnedFd, String> {
    use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
    let fd = memfd_create("zcio-bench-line", MemfdFlags::CLOEXEC)
        .map_err(|e| format!("memfd_create: {e}"))?;
    ftruncate(&fd, line_side::PAGE as u64).map_err(|e| format!("ftruncate: {e}"))?;
    Ok(fd)
}

fn socket_pair() -> Result<(OwnedFd, OwnedFd), String> {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("socketpair: {e}"))
}

/// What the sides of one measurement reported.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// The receiver (its interval sets msgs/s), or the in-process memcpy.
    pub recv: Measured,
    /// The originator (CPU time only).
    pub orig: Option<Measured>,
    /// The forwarder of a three-domain path (CPU time only).
    pub fwd: Option<Measured>,
}

/// The children of one measurement, named, in the order receiver,
/// forwarder, originator; waited for together (bounded) and their result
/// lines parsed into a [`Point`].
struct Sides {
    group: Group,
    roles: Vec<Side>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Receiver,
    Forwarder,
    Originator,
}

impl Sides {
    fn new() -> Self {
        Self {
            group: Group::new(),
            roles: Vec::new(),
        }
    }

    fn push(&mut self, side: Side, child: std::process::Child, what: &str) {
        self.group.push(child, what);
        self.roles.push(side);
    }

    fn wait(self, timeout: Duration) -> Result<Point, String> {
        let lines = self.group.wait_all(timeout)?;
        let got = |side: Side| -> Result<Option<Measured>, String> {
            match self.roles.iter().position(|&r| r == side) {
                None => Ok(None),
                Some(i) => serde_json::from_str(&lines[i])
                    .map(Some)
                    .map_err(|e| format!("bad result line {:?}: {e}", lines[i])),
            }
        };
        Ok(Point {
            recv: got(Side::Receiver)?.ok_or("no receiver")?,
            orig: got(Side::Originator)?,
            fwd: got(Side::Forwarder)?,
        })
    }
}

/// Measure one (variant, size) once.
pub fn measure(v: Variant, size: usize, opts: &Options) -> Result<Point, String> {
    let count = opts.count_for(size);
    // Warm-up long enough for the originator's pool to reach its steady
    // state (all chunks created and mapped on both sides).
    let warmup = (count / 10)
        .clamp(4, 1000)
        .max(zcio_side::bench_pool_capacity(size).min(2048) + 8);
    let t = opts.timeout;
    let spec = |role: Role, cpu: usize| ChildSpec {
        role,
        size,
        warmup,
        count,
        cpu: Some(crate::affinity::cpu_for(cpu)),
        timeout_ms: t.as_millis() as u64,
    };
    let mut sides = Sides::new();
    let mut paths = Vec::new();
    match v {
        Variant::Memcpy => {
            sides.push(Side::Receiver, spec(Role::Memcpy, 0).spawn()?, "memcpy");
        }
        Variant::ZcioCachedVolatile
        | Variant::ZcioCachedSecured
        | Variant::ZcioUncachedVolatile
        | Variant::ZcioUncachedSecured => {
            let alloc = match v {
                Variant::ZcioCachedVolatile => AllocKind::CachedVolatile,
                Variant::ZcioCachedSecured => AllocKind::CachedSecured,
                Variant::ZcioUncachedVolatile => AllocKind::UncachedVolatile,
                _ => AllocKind::UncachedSecured,
            };
            let secured = matches!(alloc, AllocKind::CachedSecured | AllocKind::UncachedSecured);
            let path = sock_path();
            paths.push(path.clone());
            let recv = Role::ZcioRecv {
                path: path.clone(),
                expect_secured: secured,
            };
            sides.push(Side::Receiver, spec(recv, 1).spawn()?, "zcio receiver");
            let send = Role::ZcioSend { path, alloc };
            sides.push(Side::Originator, spec(send, 0).spawn()?, "zcio originator");
        }
        Variant::ZcioLane => {
            let path = sock_path();
            paths.push(path.clone());
            let recv = Role::ZcioLaneRecv { path: path.clone() };
            sides.push(Side::Receiver, spec(recv, 1).spawn()?, "zcio lane receiver");
            let send = Role::ZcioLaneSend { path };
            sides.push(
                Side::Originator,
                spec(send, 0).spawn()?,
                "zcio lane originator",
            );
        }
        Variant::Zcio3Dom => {
            let (p0, p1) = (sock_path(), sock_path());
            paths.extend([p0.clone(), p1.clone()]);
            let recv = Role::ZcioRecv {
                path: p1.clone(),
                expect_secured: false,
            };
            sides.push(Side::Receiver, spec(recv, 1).spawn()?, "zcio receiver");
            // Two cores, three processes: the forwarder shares the
            // originator's core (the receiver does the per-page reading).
            let fwd = Role::ZcioFwd {
                listen: p0.clone(),
                connect: p1,
            };
            sides.push(Side::Forwarder, spec(fwd, 0).spawn()?, "zcio forwarder");
            let send = Role::ZcioSend {
                path: p0,
                alloc: AllocKind::CachedVolatilePath2,
            };
            sides.push(Side::Originator, spec(send, 0).spawn()?, "zcio originator");
        }
        Variant::Pipe | Variant::UnixSocket => {
            let (r, w) = if v == Variant::Pipe {
                pipe_pair()?
            } else {
                socket_pair()?
            };
            let all = [&r, &w];
            let recv = spec(Role::CopyRecv { fd: r.as_raw_fd() }, 1);
            sides.push(
                Side::Receiver,
                recv.spawn_with(&[&r], &all)?,
                "copy receiver",
            );
            let send = spec(Role::CopySend { fd: w.as_raw_fd() }, 0);
            sides.push(
                Side::Originator,
                send.spawn_with(&[&w], &all)?,
                "copy originator",
            );
        }
        Variant::Pipe3Dom => {
            let (r1, w1) = pipe_pair()?;
            let (r2, w2) = pipe_pair()?;
            let all = [&r1, &w1, &r2, &w2];
            let recv = spec(Role::CopyRecv { fd: r2.as_raw_fd() }, 1);
            sides.push(
                Side::Receiver,
                recv.spawn_with(&[&r2], &all)?,
                "copy receiver",
            );
            let fwd = Role::CopyFwd {
                input: r1.as_raw_fd(),
                output: w2.as_raw_fd(),
            };
            let fwd = spec(fwd, 1).spawn_with(&[&r1, &w2], &all)?;
            sides.push(Side::Forwarder, fwd, "copy forwarder");
            let send = spec(Role::CopySend { fd: w1.as_raw_fd() }, 0);
            sides.push(
                Side::Originator,
                send.spawn_with(&[&w1], &all)?,
                "copy originator",
            );
        }
        Variant::Iceoryx2 => {
            let service = unique("zcio-bench-iox");
            let sub = Role::IoxSub {
                service: service.clone(),
            };
            sides.push(Side::Receiver, spec(sub, 1).spawn()?, "iceoryx2 subscriber");
            let publ = Role::IoxPub { service };
            sides.push(
                Side::Originator,
                spec(publ, 0).spawn()?,
                "iceoryx2 publisher",
            );
        }
    }
    let res = sides.wait(t + Duration::from_secs(5));
    for p in paths {
        let _ = std::fs::remove_file(p);
    }
    res
}

/// Run one side (called in the child process).
pub fn run_role(spec: &ChildSpec) -> Result<Option<Measured>, String> {
    let t = Duration::from_millis(spec.timeout_ms);
    let (size, warmup, count) = (spec.size, spec.warmup, spec.count);
    let m = match &spec.role {
        Role::Memcpy => copy_side::memcpy(size, warmup, count),
        Role::ZcioSend { path, alloc } => zcio_side::send(path, *alloc, size, warmup, count, t)?,
        Role::ZcioRecv {
            path,
            expect_secured,
        } => zcio_side::recv(path, *expect_secured, warmup, count, t)?,
        Role::ZcioFwd { listen, connect } => zcio_side::forward(listen, connect, warmup, count, t)?,
        Role::ZcioLaneSend { path } => zcio_side::lane_send(path, size, warmup, count, t)?,
        Role::ZcioLaneRecv { path } => zcio_side::lane_recv(path, size, warmup, count, t)?,
        Role::CopySend { fd } => copy_side::send(*fd, size, warmup, count)?,
        Role::CopyRecv { fd } => copy_side::recv(*fd, size, warmup, count)?,
        Role::CopyFwd { input, output } => {
            copy_side::forward(*input, *output, size, warmup, count)?
        }
        Role::IoxPub { service } => {
            let cpu_ns = crate::iox::publisher(service, size, warmup as usize, count as usize, t)?;
            Measured::cpu_only(count, cpu_ns)
        }
        Role::Ping {
            kind,
            client,
            path,
            rfd,
            wfd,
            budget_ms,
            loan_ahead,
        } => ping_sides::run(&ping_sides::Args {
            kind: *kind,
            client: *client,
            path,
            rfd: *rfd,
            wfd: *wfd,
            size,
            warmup,
            iters: count,
            budget: Duration::from_millis(*budget_ms),
            timeout: t,
            loan_ahead: *loan_ahead,
        })?,
        Role::IoxSub { service } => {
            let (elapsed, msgs, cpu_ns) =
                crate::iox::subscriber(service, size, warmup as usize, count as usize, t)?;
            Measured {
                elapsed_ns: elapsed.as_nanos() as u64,
                msgs,
                wakes: 0,
                cpu_ns,
                latency: None,
            }
        }
    };
    Ok(Some(m))
}

/// The row of one measurement (`incr_ns_per_page` is filled in by
/// [`derive`] once all sizes are in).
pub fn row(v: Variant, size: usize, p: &Point) -> Row {
    let m = &p.recv;
    let ns_per_msg = m.elapsed_ns as f64 / m.msgs.max(1) as f64;
    let msgs_per_sec = 1e9 / ns_per_msg;
    let cpu_us = |m: &Measured| m.cpu_ns as f64 / 1e3 / m.msgs.max(1) as f64;
    let two_or_more = v.domains() >= 2;
    Row {
        variant: v.name().to_string(),
        size,
        domains: v.domains(),
        msgs: m.msgs,
        msgs_per_sec,
        gb_per_sec: msgs_per_sec * size as f64 / 1e9,
        ns_per_msg,
        ns_per_page: ns_per_msg / pages::pages(size) as f64,
        incr_ns_per_page: None,
        receiver_wakes: m.wakes,
        originator_cpu_us: p.orig.as_ref().map(cpu_us),
        forwarder_cpu_us: p.fwd.as_ref().map(cpu_us),
        receiver_cpu_us: two_or_more.then(|| cpu_us(m)),
        spread: None,
        implausible: false,
    }
}

/// Fill in the incremental per-page costs: the slope of ns/msg from the
/// next smaller size of the same variant.
pub fn derive<'a>(rows: impl IntoIterator<Item = &'a mut Row>) {
    let mut rows: Vec<&mut Row> = rows.into_iter().collect();
    let all: Vec<(String, usize, f64)> = rows
        .iter()
        .map(|r| (r.variant.clone(), r.size, r.ns_per_msg))
        .collect();
    for r in rows.iter_mut() {
        let prev = all
            .iter()
            .filter(|(v, s, _)| *v == r.variant && *s < r.size)
            .max_by_key(|(_, s, _)| *s);
        if let Some((_, ps, pn)) = prev {
            let dp = (pages::pages(r.size) - pages::pages(*ps)) as f64;
            r.incr_ns_per_page = Some((r.ns_per_msg - pn) / dp);
        }
    }
    // The memory bandwidth of this run: what memcpy moved per second at
    // each size.
    let memcpy: Vec<(usize, f64)> = rows
        .iter()
        .filter(|r| r.variant == Variant::Memcpy.name())
        .map(|r| (r.size, r.gb_per_sec * 1e9))
        .collect();
    for r in rows.iter_mut() {
        let touched = pages::pages(r.size) as f64 * 64.0 * r.msgs_per_sec;
        r.implausible = r.variant != Variant::Memcpy.name()
            && memcpy.iter().any(|&(s, bw)| s == r.size && touched > bw);
    }
}

/// A row of either part, as in the JSON `rows` (`"part": "throughput"` or
/// `"latency"`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "part", rename_all = "lowercase")]
pub enum Entry {
    /// Messages streamed from one process to another.
    Throughput(Row),
    /// Ping-pong with one message in flight.
    Latency(pingpong::LatencyRow),
}

/// A part of the transfer benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Messages streamed, msgs/s and CPU per message.
    Throughput,
    /// Ping-pong, one-way latency percentiles.
    Latency,
}

impl Part {
    /// Parse `throughput` / `latency` (or `ping-pong`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "throughput" => Ok(Part::Throughput),
            "latency" | "ping-pong" => Ok(Part::Latency),
            _ => Err(format!(
                "unknown part '{s}'; known: throughput, latency (ping-pong)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_sizes_beyond_the_limit_are_refused() {
        let mut o = Options::quick();
        o.sizes = vec![1 << 40];
        assert_eq!(
            check_limits(&o).unwrap_err(),
            "--sizes 1 TiB: the largest is 256 MiB"
        );
    }
}
