//! [`UdpGateway`]: the UDP gateway (see the crate docs).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::net::{sockopt, SendFlags};

use super::batch::{self, Batch, Ctrl, SLOT};
use super::{GatewayConfig, GatewayCounters, GatewayError, GatewayMode, SendPath, UdpGatewayStats};
use zcio::Errno;

/// How long a receive waits before the gateway looks at its stop flag and
/// deadline again.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// Counts kept locally and added to the shared counters every batch (fast)
/// or every [`FLUSH_EVERY`] datagrams (plain).
#[derive(Default)]
struct Tally {
    received: u64,
    forwarded: u64,
    bytes: u64,
    dropped_sink: u64,
    dropped_kernel: u64,
    sink_errors: u64,
    batches: u64,
    syscalls: u64,
}

const FLUSH_EVERY: u64 = 64;

impl Tally {
    fn flush(&mut self, c: &GatewayCounters) {
        GatewayCounters::add(&c.received, self.received);
        GatewayCounters::add(&c.forwarded, self.forwarded);
        GatewayCounters::add(&c.bytes, self.bytes);
        GatewayCounters::add(&c.dropped_sink, self.dropped_sink);
        GatewayCounters::add(&c.dropped_kernel, self.dropped_kernel);
        GatewayCounters::add(&c.sink_errors, self.sink_errors);
        GatewayCounters::add(&c.batches, self.batches);
        GatewayCounters::add(&c.syscalls, self.syscalls);
        *self = Self::default();
    }
}

/// A bound UDP gateway; [`UdpGateway::run`] forwards until told to stop.
pub struct UdpGateway {
    cfg: GatewayConfig,
    rx: UdpSocket,
    tx: UdpSocket,
    local: SocketAddr,
    counters: Arc<GatewayCounters>,
    batch: Option<Batch>,
    send_path: SendPath,
    gso_refused: Option<Errno>,
    gso_units: u64,
    last_sink_error: Option<Errno>,
    /// The kernel's cumulative drop count last seen (`SO_RXQ_OVFL`).
    kernel_drops_seen: u32,
}

fn errno_of(e: &std::io::Error) -> Errno {
    Errno::from_io_error(e).unwrap_or(Errno::IO)
}

impl UdpGateway {
    /// Bind the listening socket and set up the sink socket (connected to
    /// `cfg.to` in fast mode). Nothing is received until `run`.
    pub fn bind(cfg: GatewayConfig) -> Result<Self, GatewayError> {
        cfg.check()?;
        let setup = |op| move |errno| GatewayError::Setup { op, errno };
        let rx = UdpSocket::bind(cfg.listen).map_err(|e| GatewayError::Bind {
            addr: cfg.listen,
            errno: errno_of(&e),
        })?;
        let local = rx.local_addr().map_err(|e| GatewayError::Setup {
            op: "getsockname",
            errno: errno_of(&e),
        })?;
        sockopt::set_socket_timeout(&rx, sockopt::Timeout::Recv, Some(TICK))
            .map_err(setup("setsockopt(SO_RCVTIMEO)"))?;
        if let Some(n) = cfg.rcvbuf {
            sockopt::set_socket_recv_buffer_size(&rx, n).map_err(setup("setsockopt(SO_RCVBUF)"))?;
        }
        batch::enable_rxq_ovfl(rx.as_fd()).map_err(setup("setsockopt(SO_RXQ_OVFL)"))?;
        let any: SocketAddr = if cfg.to.is_ipv4() {
            (Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let tx = UdpSocket::bind(any).map_err(|e| GatewayError::Setup {
            op: "bind the sending socket",
            errno: errno_of(&e),
        })?;
        if let Some(n) = cfg.sndbuf {
            sockopt::set_socket_send_buffer_size(&tx, n).map_err(setup("setsockopt(SO_SNDBUF)"))?;
        }
        let (batch, send_path, gso_refused) = match cfg.mode {
            GatewayMode::Plain => (None, SendPath::Sendto, None),
            GatewayMode::Fast => {
                tx.connect(cfg.to).map_err(|e| GatewayError::Connect {
                    addr: cfg.to,
                    errno: errno_of(&e),
                })?;
                let probe = if cfg.gso {
                    batch::probe_gso(tx.as_fd()).err()
                } else {
                    None
                };
                let gso = cfg.gso && probe.is_none();
                let b = Batch::new(cfg.batch, gso).map_err(setup("mmap the batch arena"))?;
                let path = if gso {
                    SendPath::SendmmsgGso
                } else {
                    SendPath::Sendmmsg
                };
                (Some(b), path, probe)
            }
        };
        Ok(Self {
            cfg,
            rx,
            tx,
            local,
            counters: Arc::new(GatewayCounters::default()),
            batch,
            send_path,
            gso_refused,
            gso_units: 0,
            last_sink_error: None,
            kernel_drops_seen: 0,
        })
    }

    /// The address the gateway receives on (with the port the kernel chose
    /// for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The configuration.
    pub fn config(&self) -> &GatewayConfig {
        &self.cfg
    }

    /// Counters readable while [`UdpGateway::run`] runs on another thread.
    pub fn counters(&self) -> Arc<GatewayCounters> {
        self.counters.clone()
    }

    /// The statistics so far.
    pub fn stats(&self) -> UdpGatewayStats {
        let mut s = UdpGatewayStats::from_counters(&self.counters, self.cfg.mode, self.send_path);
        s.last_sink_error = self.last_sink_error;
        s.gso_refused = self.gso_refused;
        s.gso_units = self.gso_units;
        s
    }

    /// Forward until `stop` is set (noticed within [`TICK`], 100 ms) or
    /// `deadline` passes. May be called again afterwards; the counters
    /// keep adding up.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        deadline: Option<Instant>,
    ) -> Result<UdpGatewayStats, GatewayError> {
        let r = match self.cfg.mode {
            GatewayMode::Fast => self.run_fast(stop, deadline),
            GatewayMode::Plain => self.run_plain(stop, deadline),
        };
        r.map(|()| self.stats())
    }

    fn kernel_drops(&mut self, seen: Option<u32>, t: &mut Tally) {
        if let Some(v) = seen {
            // The kernel's counter is cumulative and wraps at 2^32. A
            // datagram queued before an `SO_MEMINFO` read carries an older
            // (smaller) count: a "negative" step is ignored.
            let step = v.wrapping_sub(self.kernel_drops_seen);
            if step < 1 << 31 {
                t.dropped_kernel += u64::from(step);
                self.kernel_drops_seen = v;
            }
        }
    }

    /// Bring `dropped_kernel` up to date from the socket itself (an idle
    /// tick, the end of a run): drops after the last datagram received
    /// show only this way.
    fn sync_kernel_drops(&mut self, t: &mut Tally) {
        let now = batch::socket_drops(self.rx.as_fd());
        self.kernel_drops(now, t);
        t.flush(&self.counters);
    }

    fn run_fast(
        &mut self,
        stop: &AtomicBool,
        deadline: Option<Instant>,
    ) -> Result<(), GatewayError> {
        let Some(mut b) = self.batch.take() else {
            return Ok(());
        };
        let r = self.fast_loop(&mut b, stop, deadline);
        self.batch = Some(b);
        r
    }

    fn fast_loop(
        &mut self,
        b: &mut Batch,
        stop: &AtomicBool,
        deadline: Option<Instant>,
    ) -> Result<(), GatewayError> {
        let mut t = Tally::default();
        let res = loop {
            // Relaxed: the flag carries no data, only "stop now".
            if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                break Ok(());
            }
            let r = b.recv(self.rx.as_fd(), self.cfg.batch);
            t.syscalls += 1;
            match r {
                Ok(r) => {
                    t.batches += 1;
                    t.received += r.n as u64;
                    self.kernel_drops(r.kernel_drops, &mut t);
                    let s = b.send(self.tx.as_fd(), r.n);
                    t.forwarded += s.sent;
                    t.bytes += s.bytes;
                    t.dropped_sink += s.dropped;
                    t.sink_errors += s.errors;
                    t.syscalls += s.syscalls;
                    self.gso_units += s.gso_units;
                    if s.last_error.is_some() {
                        self.last_sink_error = s.last_error;
                    }
                    if let Some(e) = s.gso_refused {
                        self.gso_refused = Some(e);
                        if b.gso_limit() == 0 {
                            self.send_path = SendPath::Sendmmsg;
                        }
                    }
                    t.flush(&self.counters);
                }
                Err(e) if transient(e) => self.sync_kernel_drops(&mut t),
                Err(errno) => {
                    break Err(GatewayError::Receive {
                        op: "recvmmsg",
                        errno,
                    })
                }
            }
        };
        self.sync_kernel_drops(&mut t);
        res
    }

    fn run_plain(
        &mut self,
        stop: &AtomicBool,
        deadline: Option<Instant>,
    ) -> Result<(), GatewayError> {
        let mut buf = vec![0u8; SLOT];
        let mut ctrl = Ctrl([0; 64]);
        let mut t = Tally::default();
        let to = self.cfg.to;
        let res = loop {
            // Relaxed: the flag carries no data, only "stop now".
            if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                break Ok(());
            }
            let r = batch::recv_one(self.rx.as_fd(), &mut buf, &mut ctrl);
            t.syscalls += 1;
            match r {
                Ok((n, drops, _trunc)) => {
                    t.received += 1;
                    t.batches += 1;
                    self.kernel_drops(drops, &mut t);
                    let s = rustix::net::sendto(&self.tx, &buf[..n], SendFlags::DONTWAIT, &to);
                    t.syscalls += 1;
                    match s {
                        Ok(_) => {
                            t.forwarded += 1;
                            t.bytes += n as u64;
                        }
                        Err(Errno::AGAIN | Errno::NOBUFS) => t.dropped_sink += 1,
                        Err(e) => {
                            t.dropped_sink += 1;
                            t.sink_errors += 1;
                            self.last_sink_error = Some(e);
                        }
                    }
                    if t.received >= FLUSH_EVERY {
                        t.flush(&self.counters);
                    }
                }
                Err(e) if transient(e) => self.sync_kernel_drops(&mut t),
                Err(errno) => {
                    break Err(GatewayError::Receive {
                        op: "recvmsg",
                        errno,
                    })
                }
            }
        };
        self.sync_kernel_drops(&mut t);
        res
    }
}

/// Receive errors the gateway survives: the timeout tick, a signal, a
/// momentary memory shortage, a reported ICMP error.
fn transient(e: Errno) -> bool {
    matches!(
        e,
        Errno::AGAIN
            | Errno::INTR
            | Errno::NOMEM
            | Errno::NOBUFS
            | Errno::CONNREFUSED
            | Errno::HOSTUNREACH
            | Errno::NETUNREACH
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_errors_say_what_to_do() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let cfg = GatewayConfig::new(a.local_addr().unwrap(), "127.0.0.1:9".parse().unwrap());
        let e = UdpGateway::bind(cfg).err().expect("port in use");
        assert_eq!(e.errno(), Some(Errno::ADDRINUSE));
        assert!(e.to_string().contains("pick another port"), "{e}");
        let mut cfg = GatewayConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            "127.0.0.1:9".parse().unwrap(),
        );
        cfg.batch = 0;
        assert!(matches!(
            UdpGateway::bind(cfg),
            Err(GatewayError::Config(_))
        ));
    }

    #[test]
    fn stops_within_a_tick_without_traffic() {
        for mode in [GatewayMode::Fast, GatewayMode::Plain] {
            let mut cfg = GatewayConfig::new(
                "127.0.0.1:0".parse().unwrap(),
                "127.0.0.1:9".parse().unwrap(),
            );
            cfg.mode = mode;
            let mut r = UdpGateway::bind(cfg).unwrap();
            let stop = AtomicBool::new(false);
            let s = r
                .run(&stop, Some(Instant::now() + Duration::from_millis(150)))
                .unwrap();
            assert_eq!(s.received, 0);
            assert_eq!(s.mode, mode);
        }
    }
}
