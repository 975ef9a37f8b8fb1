//! Part (d): UDP forwarding through `zcio gateway --plain` (a recvfrom/sendto
//! loop) and `zcio gateway`, three processes per trial: a generator child
//! (paced batches of `sendmmsg`, a sequence number and a `CLOCK_MONOTONIC`
//! send stamp in every payload), the forwarder, and a sink child
//! (`recvmmsg`; counts, checks sequence numbers, one-way latency from the
//! stamps — the clock is shared by all processes of one machine).
//!
//! Over loopback all three bind 127.0.0.1. Over veth the generator and the
//! sink run in a network namespace the bench creates ([`super::netns`]) and
//! the gateway in the root namespace: generator → veth → gateway → veth → sink.

use crate::clock::mono_ns;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::netns::Veth;
use super::proc::{Proc, Usage};
use super::search::Search;
use super::task::{Spec, Task};
use super::{require_sub, Options, Row};

/// Bytes of the payload header: sequence number, send stamp (ns).
pub const HEADER: usize = 16;
/// The largest packet the sink receives.
pub const MAX_PACKET: usize = 16 << 10;
/// Packets per `recvmmsg` / largest `sendmmsg` batch.
const BATCH: usize = 64;

/// The forwarder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Forwarder {
    /// None: the generator sends straight to the sink (the harness's own
    /// latency floor and the generator's ceiling; loopback only).
    Direct,
    /// `zcio gateway --plain`: recvfrom/sendto, one packet per call.
    Plain,
    /// `zcio gateway`: its fast mode.
    Gateway,
}

impl Forwarder {
    /// The two forwarders compared.
    pub const ALL: [Forwarder; 2] = [Forwarder::Plain, Forwarder::Gateway];

    /// What runs over `link`, in table order: the direct reference only
    /// over loopback (in the namespace it would not cross the veth).
    pub fn for_link(link: Link) -> Vec<Forwarder> {
        match link {
            Link::Loopback => vec![Forwarder::Direct, Forwarder::Plain, Forwarder::Gateway],
            Link::Veth => Forwarder::ALL.to_vec(),
        }
    }

    /// For tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Forwarder::Direct => "direct",
            Forwarder::Plain => "gateway-plain",
            Forwarder::Gateway => "zcio-gateway",
        }
    }
}

/// Where the packets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Link {
    /// 127.0.0.1.
    Loopback,
    /// A veth pair between the root namespace and the bench's namespace.
    Veth,
}

impl Link {
    /// For tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Link::Loopback => "loopback",
            Link::Veth => "veth",
        }
    }
}

/// The generator's job.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct GenSpec {
    /// Local address to bind (IP).
    pub bind: String,
    /// The forwarder's address.
    pub dst: String,
    /// Payload bytes per packet.
    pub size: usize,
    /// Packets per second.
    pub rate: f64,
    /// Packets to send.
    pub count: u64,
    /// Packets per `sendmmsg`.
    pub batch: usize,
}

/// What the generator prints.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default)]
pub struct GenReport {
    /// Packets sent.
    pub sent: u64,
    /// Seconds from the first send to the last.
    pub secs: f64,
    /// Sends that failed with ENOBUFS and were retried.
    pub retries: u64,
}

/// The sink's job.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct SinkSpec {
    /// IP to bind (port chosen by the kernel and printed first).
    pub bind: String,
    /// Payload bytes per packet.
    pub size: usize,
    /// Packets the generator sends.
    pub expect: u64,
    /// Give up this long after the last packet (ms).
    pub idle_ms: u64,
    /// Keep every packet's latency (latency runs).
    pub latency: bool,
}

/// What the sink prints.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default)]
pub struct SinkReport {
    /// Distinct packets received.
    pub received: u64,
    /// Duplicates.
    pub dups: u64,
    /// Packets with a lower sequence number than one before them.
    pub out_of_order: u64,
    /// Packets of the wrong size or with a sequence number out of range.
    pub bad: u64,
    /// One-way latency percentiles (µs; latency runs).
    pub p50_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// Largest.
    pub max_us: Option<f64>,
}

/// The statistics `zcio gateway --stats-json` writes.
#[derive(Deserialize, Serialize, Debug, Clone, Copy, Default)]
#[serde(default)]
pub struct GatewayStats {
    /// Packets received.
    pub received: u64,
    /// Packets forwarded.
    pub forwarded: u64,
    /// Dropped because the sink fell behind.
    pub dropped_sink: u64,
    /// Dropped by the kernel before the gateway read them (as it reports).
    pub dropped_kernel: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// User CPU seconds.
    pub cpu_user_s: f64,
    /// System CPU seconds.
    pub cpu_sys_s: f64,
    /// Seconds it ran.
    pub seconds: f64,
}

/// One trial of a rate search (kept in the JSON rows).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Trial {
    /// Rate asked of the generator (packets/s).
    pub offered: f64,
    /// Rate the generator achieved.
    pub achieved: f64,
    /// Packets sent.
    pub sent: u64,
    /// Packets the sink received.
    pub received: u64,
    /// 1 − received / sent.
    pub loss: f64,
    /// Forwarder CPU seconds per forwarded packet (ns).
    pub cpu_ns_per_pkt: Option<f64>,
    /// What the gateway says the kernel dropped.
    pub dropped_kernel: u64,
}

/// Addresses of a link: (generator/sink IP, gateway IP, command prefix that
/// runs a child on the generator/sink side).
fn addrs(link: Link, veth: Option<&Veth>) -> Result<(String, String, Vec<String>), String> {
    match link {
        Link::Loopback => Ok(("127.0.0.1".into(), "127.0.0.1".into(), Vec::new())),
        Link::Veth => {
            let v = veth.ok_or("the veth link is not set up")?;
            Ok((v.b.ip.clone(), v.a.ip.clone(), v.b.exec_prefix()))
        }
    }
}

/// What one trial measured.
struct TrialOut {
    gen: GenReport,
    sink: SinkReport,
    gateway: GatewayStats,
    gateway_usage: Usage,
    /// Whether a forwarder ran (not [`Forwarder::Direct`]).
    forwarded: bool,
}

impl TrialOut {
    fn cpu_ns_per_pkt(&self) -> Option<f64> {
        if !self.forwarded {
            return None;
        }
        let cpu = if self.gateway.cpu_user_s + self.gateway.cpu_sys_s > 0.0 {
            self.gateway.cpu_user_s + self.gateway.cpu_sys_s
        } else {
            self.gateway_usage.cpu_s()
        };
        let n = if self.gateway.forwarded > 0 {
            self.gateway.forwarded
        } else {
            self.sink.received
        };
        (n > 0).then(|| cpu * 1e9 / n as f64)
    }
}

/// Run generator → forwarder → sink once.
#[allow(clippy::too_many_arguments)]
fn trial(
    f: Forwarder,
    link: Link,
    size: usize,
    rate: f64,
    count: u64,
    batch: usize,
    latency: bool,
    opts: &Options,
    veth: Option<&Veth>,
    dir: &Path,
) -> Result<TrialOut, String> {
    let (side_ip, gateway_ip, prefix) = addrs(link, veth)?;
    let timeout_ms = opts.timeout.as_millis() as u64;
    let sink_spec = Spec {
        task: Task::UdpSink(SinkSpec {
            bind: side_ip.clone(),
            size,
            expect: count,
            idle_ms: 200,
            latency,
        }),
        cpu: None,
        timeout_ms,
    };
    let mut sink = Proc::spawn_task(&sink_spec, &prefix, "UDP sink")?;
    let line = sink.read_line(Duration::from_secs(10))?;
    let port: u16 = line
        .strip_prefix("port ")
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| format!("UDP sink: expected 'port N', got {line:?}"))?;
    let stats = dir.join(format!("gateway-{}.json", std::process::id()));
    let errlog = dir.join("gateway.stderr");
    let (mut gateway, addr) = if f == Forwarder::Direct {
        let addr: SocketAddr = format!("{side_ip}:{port}")
            .parse()
            .map_err(|e| format!("sink address: {e}"))?;
        (None, addr)
    } else {
        start_gateway(f, &gateway_ip, &side_ip, port, &stats, &errlog, opts)?
    };
    let gen_spec = Spec {
        task: Task::UdpGen(GenSpec {
            bind: side_ip,
            dst: addr.to_string(),
            size,
            rate,
            count,
            batch,
        }),
        cpu: None,
        timeout_ms,
    };
    let gen = Proc::spawn_task(&gen_spec, &prefix, "UDP generator")?;
    let (_, gline) = gen.wait(opts.timeout)?;
    let (_, sline) = sink.wait(opts.timeout)?;
    let (gateway_usage, gateway_stats) = match gateway.take() {
        Some(r) => stop_gateway(r, &stats, &errlog)?,
        None => (Usage::default(), GatewayStats::default()),
    };
    let parse = |what: &str, l: &str| -> Result<serde_json::Value, String> {
        serde_json::from_str(l.trim()).map_err(|e| format!("{what}: bad report {l:?}: {e}"))
    };
    let gen: GenReport = serde_json::from_value(parse("generator", &gline)?)
        .map_err(|e| format!("generator report: {e}"))?;
    let sink: SinkReport =
        serde_json::from_value(parse("sink", &sline)?).map_err(|e| format!("sink report: {e}"))?;
    if sink.received == 0 {
        return Err(format!(
            "the sink received none of {} packets through {} over {}: the path is broken \
             (gateway statistics: {gateway_stats:?})",
            gen.sent,
            f.name(),
            link.name()
        ));
    }
    Ok(TrialOut {
        gen,
        sink,
        gateway: gateway_stats,
        gateway_usage,
        forwarded: f != Forwarder::Direct,
    })
}

/// Start `zcio gateway` from `gateway_ip` (port chosen by the kernel) to
/// `side_ip:port`; its process and the address it listens on.
fn start_gateway(
    f: Forwarder,
    gateway_ip: &str,
    side_ip: &str,
    port: u16,
    stats: &Path,
    errlog: &Path,
    opts: &Options,
) -> Result<(Option<Proc>, SocketAddr), String> {
    super::files::remove(stats);
    let mut cmd = Command::new(&opts.zcio);
    cmd.arg("gateway")
        .arg("--udp")
        .arg(format!("{gateway_ip}:0"))
        .arg("--to")
        .arg(format!("{side_ip}:{port}"));
    if f == Forwarder::Plain {
        cmd.arg("--plain");
    }
    if opts.gateway_rcvbuf > 0 {
        cmd.arg("--rcvbuf").arg(opts.gateway_rcvbuf.to_string());
    }
    // A bound of its own: a gateway orphaned by a killed bench stops too.
    cmd.arg("--duration")
        .arg(opts.timeout.as_secs().max(1).to_string());
    cmd.arg("--stats-json").arg(stats).arg("--quiet");
    let mut gateway = Proc::spawn(&mut cmd, f.name(), Some(errlog))?;
    let line = gateway.read_line(Duration::from_secs(10))?;
    let addr: SocketAddr = line
        .strip_prefix("listening on ")
        .and_then(|a| a.trim().parse().ok())
        .ok_or_else(|| format!("{}: expected 'listening on ADDR', got {line:?}", f.name()))?;
    Ok((Some(gateway), addr))
}

/// SIGTERM the gateway, wait for it (bounded) and read its statistics.
fn stop_gateway(
    gateway: Proc,
    stats: &Path,
    errlog: &Path,
) -> Result<(Usage, GatewayStats), String> {
    gateway.terminate();
    let rres = gateway.wait(Duration::from_secs(10));
    let gateway_stats = std::fs::read_to_string(stats)
        .ok()
        .and_then(|s| serde_json::from_str::<GatewayStats>(&s).ok());
    super::files::remove(stats);
    super::files::remove(errlog);
    match (rres, gateway_stats) {
        (Ok((u, _)), s) => Ok((u, s.unwrap_or_default())),
        // It was stopped by the signal but left its statistics.
        (Err(_), Some(s)) => Ok((Usage::default(), s)),
        (Err(e), None) => Err(e),
    }
}

/// (d) One-way latency at `opts.latency_rate`, one packet per send.
pub fn measure_latency(
    f: Forwarder,
    link: Link,
    size: usize,
    opts: &Options,
    veth: Option<&Veth>,
    dir: &Path,
) -> Result<Row, String> {
    if f != Forwarder::Direct {
        require_sub(&opts.zcio, "gateway")?;
    }
    let rate = opts.latency_rate as f64;
    let count = ((rate * opts.latency_time.as_secs_f64()) as u64).max(100);
    let t = trial(f, link, size, rate, count, 1, true, opts, veth, dir)?;
    let loss = 1.0 - t.sink.received as f64 / t.gen.sent.max(1) as f64;
    Ok(Row {
        link: Some(link.name().into()),
        size: Some(size as u64),
        latency_us: t.sink.p50_us,
        latency_p99_us: t.sink.p99_us,
        latency_max_us: t.sink.max_us,
        pkts_per_sec: Some(t.gen.sent as f64 / t.gen.secs.max(1e-9)),
        loss: Some(loss),
        cpu_ns_per_pkt: t.cpu_ns_per_pkt(),
        cpu_s: t
            .forwarded
            .then_some(t.gateway.cpu_user_s + t.gateway.cpu_sys_s),
        metric: Some("latency".into()),
        ..Row::new("d", f.name())
    })
}

/// Packets per `sendmmsg` at `rate`: single packets at low rates, up to
/// 64 at high ones (a batch every 200 µs: fewer wake-ups leave the CPU to
/// the forwarder; the bursts fit any socket buffer).
pub fn batch_for(rate: f64) -> usize {
    ((rate / 5_000.0) as usize).clamp(1, BATCH)
}

/// (d) The highest loss-free rate: a bounded [`Search`] of trials of
/// `opts.trial_time` each.
pub fn measure_rate(
    f: Forwarder,
    link: Link,
    size: usize,
    opts: &Options,
    veth: Option<&Veth>,
    dir: &Path,
) -> Result<Row, String> {
    if f != Forwarder::Direct {
        require_sub(&opts.zcio, "gateway")?;
    }
    let mut s = Search::new(
        opts.start_rate as f64,
        1000.0,
        opts.max_rate as f64,
        opts.max_trials,
    );
    let mut trials = Vec::new();
    let mut best_cpu = None;
    let mut gen_limited = false;
    while let Some(rate) = s.next() {
        let count = ((rate * opts.trial_time.as_secs_f64()) as u64).max(2000);
        let t = trial(
            f,
            link,
            size,
            rate,
            count,
            batch_for(rate),
            false,
            opts,
            veth,
            dir,
        )?;
        let achieved = t.gen.sent as f64 / t.gen.secs.max(1e-9);
        let ok = t.gen.sent == count && t.sink.received == count && t.sink.bad == 0;
        let tr = Trial {
            offered: rate,
            achieved,
            sent: t.gen.sent,
            received: t.sink.received,
            loss: 1.0 - t.sink.received as f64 / t.gen.sent.max(1) as f64,
            cpu_ns_per_pkt: t.cpu_ns_per_pkt(),
            dropped_kernel: t.gateway.dropped_kernel,
        };
        if achieved < 0.95 * rate {
            // The generator could not offer more: no higher rate is tried.
            gen_limited = true;
            s.cap(achieved);
        }
        let at = rate.min(achieved);
        if ok && s.result().is_none_or(|g| at >= g) {
            best_cpu = tr.cpu_ns_per_pkt;
        }
        s.record(at, ok);
        trials.push(tr);
    }
    let best = s.result();
    Ok(Row {
        link: Some(link.name().into()),
        size: Some(size as u64),
        pkts_per_sec: best,
        gb_per_sec: best.map(|r| r * size as f64 / 1e9),
        cpu_ns_per_pkt: best_cpu,
        generator_limited: Some(gen_limited && s.at_ceiling()),
        lower_bound: Some(s.at_ceiling()),
        metric: Some("rate".into()),
        trials: Some(trials),
        ..Row::new("d", f.name())
    })
}

/// Set a socket buffer (`force`: the privileged option that ignores the
/// system maximum; falls back to the plain one).
fn set_buf(fd: &impl AsRawFd, force: i32, plain: i32, bytes: i32) {
    for opt in [force, plain] {
        // `fd` is an open socket we own, `bytes` a live c_int whose size is
        // passed; SO_*BUF* take an int.
        // SAFETY: as argued just above.
        let r = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&bytes as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return;
        }
    }
}

/// The generator (a child).
pub fn generate(g: &GenSpec, deadline: Instant) -> Result<GenReport, String> {
    if g.size < HEADER || g.size > MAX_PACKET {
        return Err(format!("packet size {} out of range", g.size));
    }
    let sock =
        UdpSocket::bind((g.bind.as_str(), 0)).map_err(|e| format!("bind {}: {e}", g.bind))?;
    sock.connect(&g.dst)
        .map_err(|e| format!("connect {}: {e}", g.dst))?;
    set_buf(&sock, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, 4 << 20);
    // Sleep with 1 µs timer slack instead of the default 50 µs, so short
    // sleeps pace accurately. Best effort: pacing only gets coarser if it
    // fails.
    // PR_SET_TIMERSLACK takes one unsigned long and no pointers.
    // SAFETY: as argued just above.
    let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let batch = g.batch.clamp(1, BATCH);
    let mut bufs = vec![0xA5u8; batch * g.size];
    let mut iovs: Vec<libc::iovec> = vec![
        libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0
        };
        batch
    ];
    // All-zero is a valid mmsghdr (null pointers, zero lengths).
    // SAFETY: as argued just above.
    let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; batch];
    let interval = batch as f64 / g.rate.max(1.0);
    let start = Instant::now();
    let mut sent = 0u64;
    let mut retries = 0u64;
    let mut k = 0u64;
    while sent < g.count {
        // Pace: sleep while more than 30 µs ahead, then spin (the CPU is
        // shared with the forwarder and the sink). Due times are absolute,
        // so a late wake-up is caught up by the next batches.
        let due = start + Duration::from_secs_f64(k as f64 * interval);
        loop {
            let now = Instant::now();
            if now >= due {
                break;
            }
            let ahead = due - now;
            if ahead > Duration::from_micros(30) {
                std::thread::sleep(ahead - Duration::from_micros(15));
            } else {
                std::hint::spin_loop();
            }
        }
        if Instant::now() > deadline {
            return Err(format!("deadline passed after {sent} packets"));
        }
        k += 1;
        let n = (g.count - sent).min(batch as u64) as usize;
        let stamp = mono_ns();
        for i in 0..n {
            let p = &mut bufs[i * g.size..i * g.size + HEADER];
            p[..8].copy_from_slice(&(sent + i as u64).to_le_bytes());
            p[8..16].copy_from_slice(&stamp.to_le_bytes());
        }
        let base = bufs.as_mut_ptr();
        for i in 0..n {
            // In bounds: i < batch and `bufs` holds batch × size bytes.
            // SAFETY: as argued just above.
            iovs[i].iov_base = unsafe { base.add(i * g.size) }.cast();
            iovs[i].iov_len = g.size;
            hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
        }
        let mut done = 0usize;
        while done < n {
            // `hdrs[done..n]` are initialised mmsghdrs whose iovecs point
            // into `bufs`, alive and not otherwise borrowed for the call;
            // the socket is connected, so no address is needed.
            // SAFETY: as argued just above.
            let r = unsafe {
                libc::sendmmsg(
                    sock.as_fd().as_raw_fd(),
                    hdrs[done..].as_mut_ptr(),
                    (n - done) as u32,
                    0,
                )
            };
            if r < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                        retries += 1;
                        std::thread::sleep(Duration::from_micros(50));
                        if Instant::now() > deadline {
                            return Err("deadline passed retrying sends".into());
                        }
                        continue;
                    }
                    _ => return Err(format!("sendmmsg: {e}")),
                }
            }
            done += r as usize;
        }
        sent += n as u64;
    }
    Ok(GenReport {
        sent,
        secs: start.elapsed().as_secs_f64(),
        retries,
    })
}

/// The `q` quantile of sorted `v` (nearest rank).
pub fn quantile(v: &[u64], q: f64) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    Some(v[i])
}

/// The sink (a child): prints `port N`, then receives until every packet
/// arrived, `idle_ms` passed without one (after the first), or the
/// deadline.
pub fn sink(s: &SinkSpec, deadline: Instant) -> Result<SinkReport, String> {
    if s.size < HEADER || s.size > MAX_PACKET {
        return Err(format!("packet size {} out of range", s.size));
    }
    let sock =
        UdpSocket::bind((s.bind.as_str(), 0)).map_err(|e| format!("bind {}: {e}", s.bind))?;
    set_buf(&sock, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, 32 << 20);
    let port = sock.local_addr().map_err(|e| e.to_string())?.port();
    {
        use std::io::Write;
        let mut o = std::io::stdout().lock();
        writeln!(o, "port {port}").map_err(|e| e.to_string())?;
        o.flush().map_err(|e| e.to_string())?;
    }
    let slot = s.size + 64;
    let mut bufs = vec![0u8; BATCH * slot];
    let mut iovs: Vec<libc::iovec> = vec![
        libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0
        };
        BATCH
    ];
    // All-zero is a valid mmsghdr (null pointers, zero lengths).
    // SAFETY: as argued just above.
    let mut hdrs: Vec<libc::mmsghdr> = vec![unsafe { std::mem::zeroed() }; BATCH];
    let mut seen = vec![0u64; (s.expect as usize).div_ceil(64)];
    let mut lat: Vec<u64> = Vec::new();
    let mut r = SinkReport::default();
    let mut max_seq: Option<u64> = None;
    let mut last = None::<Instant>;
    let first_wait = Duration::from_secs(5);
    let started = Instant::now();
    while r.received < s.expect {
        let now = Instant::now();
        if now > deadline {
            break;
        }
        match last {
            Some(t) if now - t > Duration::from_millis(s.idle_ms) => break,
            None if now - started > first_wait => break,
            _ => {}
        }
        let mut fds = [rustix::event::PollFd::new(
            &sock,
            rustix::event::PollFlags::IN,
        )];
        let ts = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(format!("poll: {e}")),
        }
        let base = bufs.as_mut_ptr();
        for i in 0..BATCH {
            // In bounds: i < BATCH and `bufs` holds BATCH × slot bytes.
            // SAFETY: as argued just above.
            iovs[i].iov_base = unsafe { base.add(i * slot) }.cast();
            iovs[i].iov_len = slot;
            hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
            hdrs[i].msg_len = 0;
        }
        // `hdrs` are BATCH initialised mmsghdrs whose iovecs point into
        // `bufs` (alive, not otherwise borrowed during the call); no
        // addresses or control data are asked for; the timeout is null.
        // SAFETY: as argued just above.
        let got = unsafe {
            libc::recvmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                BATCH as u32,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if got < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
                _ => return Err(format!("recvmmsg: {e}")),
            }
        }
        let now_ns = mono_ns();
        last = Some(Instant::now());
        for (i, h) in hdrs.iter().enumerate().take(got as usize) {
            let p = &bufs[i * slot..i * slot + (h.msg_len as usize).min(slot)];
            if p.len() != s.size {
                r.bad += 1;
                continue;
            }
            let seq = u64::from_le_bytes(p[..8].try_into().unwrap_or_default());
            let stamp = u64::from_le_bytes(p[8..16].try_into().unwrap_or_default());
            if seq >= s.expect {
                r.bad += 1;
                continue;
            }
            let (w, b) = ((seq / 64) as usize, seq % 64);
            if seen[w] & (1 << b) != 0 {
                r.dups += 1;
                continue;
            }
            seen[w] |= 1 << b;
            r.received += 1;
            if max_seq.is_some_and(|m| seq < m) {
                r.out_of_order += 1;
            }
            max_seq = Some(max_seq.map_or(seq, |m| m.max(seq)));
            if s.latency {
                lat.push(now_ns.saturating_sub(stamp));
            }
        }
    }
    if s.latency {
        lat.sort_unstable();
        let us = |v: Option<u64>| v.map(|ns| ns as f64 / 1e3);
        r.p50_us = us(quantile(&lat, 0.5));
        r.p99_us = us(quantile(&lat, 0.99));
        r.max_us = us(lat.last().copied());
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&v, 1.0), Some(100));
        assert_eq!(quantile(&[7], 0.99), Some(7));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn batches_grow_with_the_rate() {
        assert_eq!(batch_for(4_000.0), 1);
        assert_eq!(batch_for(200_000.0), 40);
        assert_eq!(batch_for(5e6), 64);
    }
}
