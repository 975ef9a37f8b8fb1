//! `zcio gateway`: a UDP or TCP gateway (`zcio_gateway`).
//!
//! Contract (scripts and `zcio-bench splice` depend on it): once bound,
//! exactly one line `listening on <ADDR>` on stdout (flushed); run until
//! SIGINT/SIGTERM or `--duration`; then a summary on stderr (unless
//! `--quiet`), the statistics as JSON with `--stats-json PATH`, exit 0.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{ArgGroup, Args};
use serde_json::{json, Value};
use zcio_gateway::{
    GatewayConfig, GatewayMode, TcpGateway, TcpGatewayStats, UdpGateway, UdpGatewayStats, MAX_BATCH,
};

use crate::usage;

/// Forward UDP datagrams or TCP connections from LISTEN to HOST:PORT.
///
/// UDP fast mode receives up to --batch datagrams per recvmmsg(2) into a
/// preallocated arena and sends them on with one sendmmsg(2) on a connected
/// socket, runs of equal-size datagrams as UDP GSO units; nothing is copied
/// in user space. --plain forwards one recvmsg + one sendto per datagram
/// (the comparison forwarder). The kernel writes the new UDP header (ports,
/// length, checksum); payloads pass unchanged. The gateway never waits for a
/// slow sink: what it cannot send at once is dropped and counted, as are
/// datagrams the kernel dropped from the gateway's full receive queue.
///
/// TCP: each accepted connection (at most --max-conns at once) is connected
/// to HOST:PORT and both directions are moved with splice(2) (--plain: a
/// read/write loop per direction).
///
/// Prints `listening on ADDR` once bound, then runs until SIGINT/SIGTERM or
/// --duration; prints a summary on stderr on exit (exit status 0).
#[derive(Args, Debug)]
#[command(
    group(ArgGroup::new("proto").required(true).args(["udp", "tcp"])),
    after_help = "Examples:\n  \
        zcio gateway --udp 0.0.0.0:5000 --to 10.0.0.2:5000          # UDP gateway, fast mode\n  \
        zcio gateway --udp 127.0.0.1:0 --to 127.0.0.1:9000 --plain   # pick a port; plain forwarder\n  \
        zcio gateway --udp :5000 --to host:5000 --duration 10 --stats-json s.json --quiet\n  \
        zcio gateway --tcp 127.0.0.1:8080 --to 127.0.0.1:80           # TCP gateway over splice(2)"
)]
pub struct GatewayArgs {
    /// Receive UDP datagrams on ADDR (HOST:PORT or :PORT; port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    udp: Option<String>,
    /// Accept TCP connections on ADDR (HOST:PORT or :PORT; port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    tcp: Option<String>,
    /// Forward to HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    to: String,
    /// Plain mode: recvmsg + sendto per datagram (UDP), read/write loops (TCP).
    #[arg(long)]
    plain: bool,
    /// UDP fast mode: datagrams per receive call (1..=1024).
    #[arg(long, value_name = "N", default_value_t = zcio_gateway::DEFAULT_BATCH, value_parser = zcio_fmt::parse_count::<usize>)]
    batch: usize,
    /// UDP fast mode: do not send runs of equal-size datagrams as GSO units.
    #[arg(long)]
    no_gso: bool,
    /// Receive buffer size (SO_RCVBUF; e.g. 4MiB; the kernel caps it at net.core.rmem_max).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    rcvbuf: Option<usize>,
    /// Send buffer size (SO_SNDBUF).
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    sndbuf: Option<usize>,
    /// TCP: most connections forwarded at once (more wait in the backlog).
    #[arg(long, value_name = "N", default_value_t = zcio_gateway::DEFAULT_MAX_CONNS, value_parser = zcio_fmt::parse_count::<usize>)]
    max_conns: usize,
    /// Stop after SECS seconds [default: run until SIGINT/SIGTERM].
    #[arg(long, value_name = "SECS", value_parser = zcio_fmt::parse_seconds)]
    duration: Option<f64>,
    /// Write the final statistics as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    stats_json: Option<PathBuf>,
    /// No summary on stderr.
    #[arg(long)]
    quiet: bool,
}

fn parse_size(s: &str) -> Result<usize, String> {
    zcio_fmt::parse_size(s)
}

/// Set by the SIGINT/SIGTERM handler.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Async-signal-safe: one atomic store. Relaxed: the flag carries no
    // data, only "stop now".
    STOP.store(true, Ordering::Relaxed);
}

/// Route SIGINT and SIGTERM to [`STOP`] (no SA_RESTART: a blocked receive
/// returns EINTR and the loop looks at the flag at once).
fn install_handlers() -> Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: all-zero is a valid sigaction (empty mask, no flags).
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: `sa` is initialised and the handler only does an atomic
        // store, which is async-signal-safe; the old action is not wanted.
        let r = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
        if r != 0 {
            return Err(std::io::Error::last_os_error()).context("sigaction");
        }
    }
    Ok(())
}

/// Resolve `HOST:PORT` (or `:PORT`, meaning all IPv4 interfaces).
fn resolve(what: &str, s: &str) -> Result<SocketAddr> {
    let full = match s.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => s.to_owned(),
    };
    let mut addrs = full.to_socket_addrs().map_err(|e| {
        usage(format!(
            "{what} '{s}': {e} (give HOST:PORT, e.g. 127.0.0.1:5000 or [::1]:5000)"
        ))
    })?;
    addrs
        .next()
        .ok_or_else(|| usage(format!("{what} '{s}' resolves to no address")))
}

/// CPU time of this process so far: (user, system) seconds.
pub(crate) fn cpu_times() -> (f64, f64) {
    // SAFETY: all-zero is a valid rusage; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (0.0, 0.0);
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (s(ru.ru_utime), s(ru.ru_stime))
}

/// Run `zcio gateway`; `Ok(status)` is the exit status.
pub fn run(a: GatewayArgs) -> Result<i32> {
    if a.batch == 0 || a.batch > MAX_BATCH {
        return Err(usage(format!(
            "--batch {} is out of range: give 1..={MAX_BATCH}",
            a.batch
        )));
    }
    if a.max_conns == 0 {
        return Err(usage("--max-conns must be at least 1"));
    }
    let duration = match a.duration {
        Some(d) if d.is_finite() && d > 0.0 && d < 1e9 => Some(Duration::from_secs_f64(d)),
        Some(d) => {
            return Err(usage(format!(
                "--duration {d}: give a positive number of seconds"
            )))
        }
        None => None,
    };
    let to = resolve("--to", &a.to)?;
    if to.port() == 0 {
        return Err(usage(format!("--to {}: give the port to forward to", a.to)));
    }
    let (tcp, listen) = match (&a.udp, &a.tcp) {
        (Some(u), None) => (false, resolve("--udp", u)?),
        (None, Some(t)) => (true, resolve("--tcp", t)?),
        _ => return Err(usage("give exactly one of --udp LISTEN and --tcp LISTEN")),
    };
    let cfg = GatewayConfig {
        mode: if a.plain {
            GatewayMode::Plain
        } else {
            GatewayMode::Fast
        },
        batch: a.batch,
        rcvbuf: a.rcvbuf,
        sndbuf: a.sndbuf,
        gso: !a.no_gso,
        max_conns: a.max_conns,
        ..GatewayConfig::new(listen, to)
    };
    install_handlers()?;
    let (cpu0, t0) = (cpu_times(), Instant::now());
    let (stats, local) = if tcp {
        let mut r = TcpGateway::bind(cfg).context("zcio gateway --tcp")?;
        let local = r.local_addr();
        announce(local)?;
        let s = r
            .run(&STOP, duration.map(|d| Instant::now() + d))
            .context("forwarding TCP")?;
        (Stats::Tcp(s), local)
    } else {
        let mut r = UdpGateway::bind(cfg).context("zcio gateway --udp")?;
        let local = r.local_addr();
        announce(local)?;
        let s = r
            .run(&STOP, duration.map(|d| Instant::now() + d))
            .context("forwarding UDP")?;
        (Stats::Udp(s), local)
    };
    let secs = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_times();
    let (user, sys) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    let mut v = stats.json();
    v["listen"] = json!(local.to_string());
    v["to"] = json!(to.to_string());
    v["cpu_user_s"] = json!(user);
    v["cpu_sys_s"] = json!(sys);
    v["seconds"] = json!(secs);
    if let Some(p) = &a.stats_json {
        let text = serde_json::to_string_pretty(&v).context("encoding statistics")?;
        std::fs::write(p, text + "\n")
            .with_context(|| format!("writing statistics to {}", p.display()))?;
    }
    if !a.quiet {
        eprintln!("{}", stats.summary(secs, user + sys));
    }
    Ok(0)
}

fn announce(local: SocketAddr) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {local}")
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

enum Stats {
    Udp(UdpGatewayStats),
    Tcp(TcpGatewayStats),
}

impl Stats {
    fn json(&self) -> Value {
        match self {
            Self::Udp(s) => json!({
                "protocol": "udp",
                "received": s.received,
                "forwarded": s.forwarded,
                "bytes": s.bytes,
                "dropped_sink": s.dropped_sink,
                "dropped_kernel": s.dropped_kernel,
                "sink_errors": s.sink_errors,
                "last_sink_error": s.last_sink_error.map(|e| e.to_string()),
                "batches": s.batches,
                "syscalls": s.syscalls,
                "mode": s.mode.to_string(),
                "send_path": s.send_path.to_string(),
                "gso_units": s.gso_units,
                "gso_refused": s.gso_refused.map(|e| e.to_string()),
            }),
            Self::Tcp(s) => json!({
                "protocol": "tcp",
                "accepted": s.accepted,
                "completed": s.completed,
                "failed": s.failed,
                "connect_failed": s.connect_failed,
                "bytes_up": s.bytes_up,
                "bytes_down": s.bytes_down,
                "mode": s.mode.to_string(),
                "mover": s.mover.map(|m| m.to_string()),
            }),
        }
    }

    fn summary(&self, secs: f64, cpu: f64) -> String {
        let secs_nz = secs.max(1e-9);
        match self {
            Self::Udp(s) => {
                let per = if s.forwarded > 0 {
                    zcio_fmt::ns(cpu * 1e9 / s.forwarded as f64)
                } else {
                    "-".into()
                };
                let mut t = format!(
                    "zcio gateway (udp, {}, {}): received {}, forwarded {} ({}), dropped {} at the sink + {} in the kernel in {secs:.2} s\n  \
                     {}packets/s, {}/s forwarded; CPU {cpu:.3} s ({per} per forwarded datagram); {} batches, {} syscalls",
                    s.mode,
                    s.send_path,
                    s.received,
                    s.forwarded,
                    zcio_fmt::bytes_u64(s.bytes),
                    s.dropped_sink,
                    s.dropped_kernel,
                    zcio_fmt::si(s.forwarded as f64 / secs_nz),
                    zcio_fmt::bytes_u64((s.bytes as f64 / secs_nz) as u64),
                    s.batches,
                    s.syscalls,
                );
                if s.sink_errors > 0 {
                    t += &format!(
                        "\n  {} sends refused (last: {})",
                        s.sink_errors,
                        s.last_sink_error.map_or("-".into(), |e| e.to_string())
                    );
                }
                if let Some(e) = s.gso_refused {
                    t += &format!("\n  GSO limited or off: the kernel refused it ({e})");
                }
                t
            }
            Self::Tcp(s) => format!(
                "zcio gateway (tcp, {}{}): {} connections ({} completed, {} failed, {} could not reach the destination); \
                 {} up, {} down in {secs:.2} s; CPU {cpu:.3} s",
                s.mode,
                s.mover.map_or(String::new(), |m| format!(", {m}")),
                s.accepted,
                s.completed,
                s.failed,
                s.connect_failed,
                zcio_fmt::bytes_u64(s.bytes_up),
                zcio_fmt::bytes_u64(s.bytes_down),
            ),
        }
    }
}
