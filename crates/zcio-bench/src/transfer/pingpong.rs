//! The latency part of `zcio-bench transfer`: ping-pong with one message in
//! flight. A client process sends a request of S bytes (one word written
//! per 4 KiB page), the server reads one word per page, answers with a
//! reply of S bytes it wrote the same way, and the client reads one word
//! per page of the reply. One-way latency is half a round trip. The sides
//! of each transport are in [`super::ping_sides`].

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{ChildSpec, Measured, Role};
use crate::child::Group;
use crate::cpu::Window;

/// A transport of the ping-pong.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A zcio channel, request and reply on the same channel, buffers from
    /// each side's path pool (cached, volatile).
    ZcioChannel,
    /// A lane of a zcio channel (`Channel::open_lane`): fixed-size slots
    /// of the message's size, one lane each way, one owner thread per end.
    ZcioLane,
    /// The same channel with no spin budget (`ChannelPolicy::spin` zero):
    /// a receiver with nothing to read sleeps on the ring's futex at once
    /// and the sender wakes it.
    ZcioChannelBlocking,
    /// The zcio rendezvous (`Rendezvous::call` / `reply_and_recv`): at most
    /// 64 bytes, carried in the message's words.
    ZcioRendezvous,
    /// iceoryx2: two publish-subscribe services (request, reply).
    Iceoryx2,
    /// The same services, each paired with an event service: the sender
    /// notifies after every send, the receiver sleeps in its listener
    /// (iceoryx2's blocking wait) when nothing has arrived.
    Iceoryx2Blocking,
    /// Two Linux pipes.
    Pipe,
    /// A Unix stream socket pair.
    UnixSocket,
    /// The hardware floor, busy-polling: one cache line each way through
    /// a shared page, each side spinning (see [`super::line_side`]).
    CacheLine,
    /// The hardware floor, blocking: the same lines, each side sleeping
    /// in `futex_wait` until the other's `futex_wake`.
    CacheLineFutex,
}

/// How a transport waits for the other side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// It spins (or spins first, long enough for a ping-pong).
    Busy,
    /// It sleeps in the kernel and is woken.
    Blocking,
}

impl Kind {
    /// All transports in table order.
    pub const ALL: [Kind; 10] = [
        Kind::CacheLine,
        Kind::CacheLineFutex,
        Kind::ZcioChannel,
        Kind::ZcioLane,
        Kind::ZcioRendezvous,
        Kind::Iceoryx2,
        Kind::ZcioChannelBlocking,
        Kind::Iceoryx2Blocking,
        Kind::Pipe,
        Kind::UnixSocket,
    ];

    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Kind::ZcioChannel => "zcio-channel",
            Kind::ZcioLane => "zcio-lane",
            Kind::ZcioChannelBlocking => "zcio-channel-blocking",
            Kind::Iceoryx2Blocking => "iceoryx2-blocking",
            Kind::ZcioRendezvous => "zcio-rendezvous",
            Kind::Iceoryx2 => "iceoryx2",
            Kind::Pipe => "pipe",
            Kind::UnixSocket => "unix-socket",
            Kind::CacheLine => "cache-line",
            Kind::CacheLineFutex => "cache-line-futex",
        }
    }

    /// The transport named `s` (as in [`Kind::name`]).
    pub fn parse(s: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown ping-pong transport '{s}'; known: {}",
                    known.join(", ")
                )
            })
    }

    /// How it waits, and so which floor it is compared with: zcio's
    /// channel and rendezvous spin before they sleep (a ping-pong's peer
    /// answers within the spin), iceoryx2 here busy-polls; pipes and
    /// sockets sleep in the kernel.
    pub fn mode(self) -> Mode {
        match self {
            Kind::ZcioChannel
            | Kind::ZcioLane
            | Kind::ZcioRendezvous
            | Kind::Iceoryx2
            | Kind::CacheLine => Mode::Busy,
            Kind::ZcioChannelBlocking
            | Kind::Iceoryx2Blocking
            | Kind::Pipe
            | Kind::UnixSocket
            | Kind::CacheLineFutex => Mode::Blocking,
        }
    }

    /// The floor of `mode`.
    pub fn floor(mode: Mode) -> Kind {
        match mode {
            Mode::Busy => Kind::CacheLine,
            Mode::Blocking => Kind::CacheLineFutex,
        }
    }

    /// Whether it carries messages of `size` bytes.
    pub fn carries(self, size: usize) -> bool {
        match self {
            Kind::ZcioRendezvous => size <= RDV_MAX,
            // The floor is measured once, at the smallest size.
            Kind::CacheLine | Kind::CacheLineFutex => size <= LINE_MAX,
            _ => true,
        }
    }
}

/// The largest message the rendezvous carries (8 words).
pub const RDV_MAX: usize = 64;

/// The sizes the cache-line floor is measured at (one line).
pub const LINE_MAX: usize = 64;

/// The client's sequence number that ends a server.
pub const STOP: u64 = u64::MAX;

/// One-way latency percentiles of a ping-pong client (half round trips).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// 99.9th percentile.
    pub p999_ns: f64,
    /// Mean.
    pub mean_ns: f64,
}

impl Latency {
    /// From round-trip times in ns (sorted here).
    pub fn from_round_trips(mut rt: Vec<u64>) -> Self {
        if rt.is_empty() {
            return Self::default();
        }
        rt.sort_unstable();
        let q = |p: f64| crate::oneway::quantile(&rt, p);
        Self {
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            mean_ns: crate::oneway::mean(&rt),
        }
    }
}

/// The client side of a transport: one round trip carrying `seq`, which the
/// reply must carry back.
pub trait Client {
    /// Send the request `seq` and wait for its reply; returns the reply's
    /// sequence word.
    fn round_trip(&mut self, seq: u64) -> Result<u64, String>;
    /// Tell the server to stop (best effort).
    fn stop(&mut self);
}

/// The client's loop: `warmup` round trips, then up to `iters` measured ones
/// within `budget`; its result carries the latency percentiles and its CPU
/// time over the measured round trips.
pub fn client_loop(
    c: &mut dyn Client,
    warmup: u64,
    iters: u64,
    budget: Duration,
) -> Result<Measured, String> {
    for seq in 0..warmup {
        check(seq, c.round_trip(seq)?)?;
    }
    let mut rt = Vec::with_capacity(iters as usize);
    let mut cpu = Window::default();
    cpu.start();
    let start = Instant::now();
    for seq in warmup..warmup + iters {
        let t0 = Instant::now();
        let got = c.round_trip(seq)?;
        rt.push(t0.elapsed().as_nanos() as u64);
        check(seq, got)?;
        if start.elapsed() > budget {
            break;
        }
    }
    let cpu_ns = cpu.elapsed_ns();
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    c.stop();
    let n = rt.len() as u64;
    Ok(Measured {
        elapsed_ns,
        msgs: n,
        wakes: 0,
        cpu_ns,
        latency: Some(Latency::from_round_trips(rt)),
    })
}

fn check(seq: u64, got: u64) -> Result<(), String> {
    if got == seq {
        Ok(())
    } else {
        Err(format!("round trip {seq}: the reply carries {got}"))
    }
}

/// The server side of a transport: answer requests until [`STOP`] (or the
/// client hangs up).
pub trait Server {
    /// Wait for the next request; `None` when the client stopped.
    fn next(&mut self) -> Result<Option<u64>, String>;
    /// Reply carrying `seq`.
    fn reply(&mut self, seq: u64) -> Result<(), String>;
}

/// The server's loop; its result is its CPU time from its `warmup`-th
/// request to the last.
pub fn server_loop(s: &mut dyn Server, warmup: u64) -> Result<Measured, String> {
    let mut cpu = Window::default();
    let mut n = 0u64;
    while let Some(seq) = s.next()? {
        if n == warmup {
            cpu.start();
        }
        s.reply(seq)?;
        n += 1;
    }
    Ok(Measured::cpu_only(
        n.saturating_sub(warmup),
        cpu.elapsed_ns(),
    ))
}

/// Options of the latency part.
#[derive(Debug, Clone)]
pub struct PingOptions {
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Transports.
    pub kinds: Vec<Kind>,
    /// Unmeasured round trips.
    pub warmup: u64,
    /// Measured round trips (at most).
    pub iters: u64,
    /// Bound on the measured round trips' time per point.
    pub budget: Duration,
    /// Every side that allocates per message (the zcio channel's pool,
    /// iceoryx2's loan) takes its next buffer right after it sent, off the
    /// round trip, as iceoryx2's own benchmark does (`--loan-ahead`).
    pub loan_ahead: bool,
}

impl PingOptions {
    /// The full run: 64 B … 1 MiB.
    pub fn full() -> Self {
        Self {
            sizes: vec![64, 4 << 10, 64 << 10, 1 << 20],
            kinds: Kind::ALL.to_vec(),
            warmup: 1000,
            iters: 20_000,
            budget: Duration::from_secs(5),
            loan_ahead: false,
        }
    }

    /// The `--quick` run: 64 B, 4 KiB, 64 KiB.
    pub fn quick() -> Self {
        Self {
            sizes: vec![64, 4 << 10, 64 << 10],
            warmup: 200,
            iters: 1000,
            budget: Duration::from_millis(400),
            ..Self::full()
        }
    }
}

/// One latency row.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    /// Transport name.
    pub variant: String,
    /// Message size (request and reply).
    pub size: usize,
    /// Measured round trips.
    pub round_trips: u64,
    /// One-way latency (half a round trip), median.
    pub p50_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// 99.9th percentile.
    pub p999_ns: f64,
    /// Mean.
    pub mean_ns: f64,
    /// CPU time (user + system) per round trip of the client process, µs.
    pub client_cpu_us: f64,
    /// The same for the server process.
    pub server_cpu_us: f64,
    /// p50 ÷ the p50 of the floor of this transport's [`Mode`] in the
    /// same run (`cache-line` for busy-polling transports,
    /// `cache-line-futex` for blocking ones); `None` when the floor was
    /// not measured.
    pub vs_floor: Option<f64>,
    /// The slowest of this point's runs ÷ the fastest (p50); above
    /// [`super::NOISY`] the point is noisy, not judged.
    pub spread: Option<f64>,
}

/// Fill every row's [`LatencyRow::vs_floor`] from the floors among them.
pub fn set_floor_ratios(rows: &mut [&mut LatencyRow]) {
    let floor_of = |rows: &[&mut LatencyRow], mode: Mode| {
        let name = Kind::floor(mode).name();
        rows.iter().find(|r| r.variant == name).map(|r| r.p50_ns)
    };
    let busy = floor_of(rows, Mode::Busy);
    let blocking = floor_of(rows, Mode::Blocking);
    for r in rows.iter_mut() {
        let mode = Kind::ALL
            .iter()
            .find(|k| k.name() == r.variant)
            .map_or(Mode::Busy, |k| k.mode());
        let floor = if mode == Mode::Busy { busy } else { blocking };
        r.vs_floor = floor.map(|f| r.p50_ns / f.max(1e-9));
    }
}

/// Measure one (transport, size) once: a server pinned to the receiver's
/// CPU, a client pinned to the originator's.
pub fn measure(
    kind: Kind,
    size: usize,
    opts: &PingOptions,
    timeout: Duration,
) -> Result<LatencyRow, String> {
    use std::os::fd::AsRawFd;
    let spec = |client: bool, path: &str, fds: (i32, i32)| ChildSpec {
        role: Role::Ping {
            kind,
            client,
            path: path.to_string(),
            rfd: fds.0,
            wfd: fds.1,
            budget_ms: opts.budget.as_millis() as u64,
            loan_ahead: opts.loan_ahead,
        },
        size,
        warmup: opts.warmup,
        count: opts.iters,
        cpu: Some(crate::affinity::cpu_for(if client { 0 } else { 1 })),
        timeout_ms: timeout.as_millis() as u64,
    };
    let path = super::sock_path();
    let mut group = Group::new();
    match kind {
        Kind::ZcioChannel
        | Kind::ZcioChannelBlocking
        | Kind::ZcioLane
        | Kind::ZcioRendezvous
        | Kind::Iceoryx2
        | Kind::Iceoryx2Blocking => {
            group.push(spec(false, &path, (-1, -1)).spawn()?, "ping server");
            group.push(spec(true, &path, (-1, -1)).spawn()?, "ping client");
        }
        Kind::Pipe => {
            let (r1, w1) = super::pipe_pair()?;
            let (r2, w2) = super::pipe_pair()?;
            let all = [&r1, &w1, &r2, &w2];
            let srv = spec(false, &path, (r1.as_raw_fd(), w2.as_raw_fd()));
            let srv = srv.spawn_with(&[&r1, &w2], &all)?;
            group.push(srv, "ping server");
            let cli = spec(true, &path, (r2.as_raw_fd(), w1.as_raw_fd()));
            let cli = cli.spawn_with(&[&r2, &w1], &all)?;
            group.push(cli, "ping client");
        }
        Kind::CacheLine | Kind::CacheLineFutex => {
            let page = super::line_page()?;
            let all = [&page];
            let srv = spec(false, &path, (page.as_raw_fd(), page.as_raw_fd()));
            group.push(srv.spawn_with(&[&page], &all)?, "ping server");
            let cli = spec(true, &path, (page.as_raw_fd(), page.as_raw_fd()));
            group.push(cli.spawn_with(&[&page], &all)?, "ping client");
        }
        Kind::UnixSocket => {
            let (a, b) = super::socket_pair()?;
            let all = [&a, &b];
            let srv = spec(false, &path, (a.as_raw_fd(), a.as_raw_fd()));
            group.push(srv.spawn_with(&[&a], &all)?, "ping server");
            let cli = spec(true, &path, (b.as_raw_fd(), b.as_raw_fd()));
            group.push(cli.spawn_with(&[&b], &all)?, "ping client");
        }
    }
    let lines = group.wait_all(timeout + Duration::from_secs(5));
    let _ = std::fs::remove_file(&path);
    let lines = lines?;
    let parse = |l: &str| -> Result<Measured, String> {
        serde_json::from_str(l).map_err(|e| format!("bad result line {l:?}: {e}"))
    };
    let (srv, cli) = (parse(&lines[0])?, parse(&lines[1])?);
    let lat = cli.latency.ok_or("the ping client reported no latency")?;
    let per_rt = |m: &Measured| m.cpu_ns as f64 / 1e3 / m.msgs.max(1) as f64;
    Ok(LatencyRow {
        variant: kind.name().into(),
        size,
        round_trips: cli.msgs,
        p50_ns: lat.p50_ns,
        p99_ns: lat.p99_ns,
        p999_ns: lat.p999_ns,
        mean_ns: lat.mean_ns,
        client_cpu_us: per_rt(&cli),
        server_cpu_us: per_rt(&srv),
        vs_floor: None,
        spread: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_half_round_trips() {
        let l = Latency::from_round_trips((1..=1000).map(|i| i * 2).collect());
        assert_eq!(l.p50_ns, 500.0);
        assert_eq!(l.p99_ns, 990.0);
        assert_eq!(l.p999_ns, 999.0);
        assert_eq!(Latency::from_round_trips(vec![]), Latency::default());
        assert!(!Kind::ZcioRendezvous.carries(4096) && Kind::ZcioRendezvous.carries(64));
    }
}

#[cfg(test)]
mod floor_tests {
    use super::*;

    fn row(variant: &str, p50_ns: f64) -> LatencyRow {
        LatencyRow {
            variant: variant.into(),
            size: 64,
            round_trips: 1,
            p50_ns,
            p99_ns: p50_ns,
            p999_ns: p50_ns,
            mean_ns: p50_ns,
            client_cpu_us: 0.0,
            server_cpu_us: 0.0,
            vs_floor: None,
            spread: None,
        }
    }

    #[test]
    fn every_transport_parses_from_its_name_and_has_a_floor_of_its_mode() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.name()), Ok(k));
            assert!(Kind::ALL.contains(&Kind::floor(k.mode())));
        }
        let e = Kind::parse("zcio").unwrap_err();
        assert!(e.contains("zcio-channel-blocking"), "{e}");
        // Each of zcio's and iceoryx2's waiting styles is there in both modes.
        for (busy, blocking) in [
            (Kind::ZcioChannel, Kind::ZcioChannelBlocking),
            (Kind::Iceoryx2, Kind::Iceoryx2Blocking),
        ] {
            assert_eq!((busy.mode(), blocking.mode()), (Mode::Busy, Mode::Blocking));
        }
    }

    #[test]
    fn each_row_is_compared_with_the_floor_of_its_mode() {
        let mut rows = [
            row("cache-line", 100.0),
            row("cache-line-futex", 10_000.0),
            row("zcio-channel", 400.0),
            row("pipe", 20_000.0),
            row("zcio-channel-blocking", 15_000.0),
            row("iceoryx2-blocking", 30_000.0),
        ];
        let mut refs: Vec<&mut LatencyRow> = rows.iter_mut().collect();
        set_floor_ratios(&mut refs);
        let got: Vec<_> = rows.iter().map(|r| r.vs_floor).collect();
        assert_eq!(
            got,
            [
                Some(1.0),
                Some(1.0),
                Some(4.0),
                Some(2.0),
                Some(1.5),
                Some(3.0)
            ]
        );
        // Without a floor in the run, no ratio.
        let mut alone = [row("zcio-channel", 400.0)];
        let mut refs: Vec<&mut LatencyRow> = alone.iter_mut().collect();
        set_floor_ratios(&mut refs);
        assert_eq!(alone[0].vs_floor, None);
    }
}
