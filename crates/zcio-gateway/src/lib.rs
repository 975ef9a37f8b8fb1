//! A UDP (and TCP) gateway on zcio's peer-to-peer I/O — the `zcio gateway`
//! command: it receives on one address and forwards to another, in a fast
//! batched mode and in a plain mode kept for comparison. A crate of its
//! own: zcio's core has no network gateway in it.
//!
//! # Modes (UDP)
//!
//! * **Plain** ([`GatewayMode::Plain`]): the forwarder everyone writes first.
//!   One `recvmsg` into a 64 KiB `Vec` and one `sendto` per datagram, on an
//!   unconnected sink socket (`recvmsg` rather than `recvfrom` only to read
//!   the kernel's drop counter; still one receive and one send per
//!   datagram).
//! * **Fast** ([`GatewayMode::Fast`]): `recvmmsg` of up to `batch` datagrams
//!   (default 64) into one preallocated, page-aligned arena of 64 KiB
//!   slots, then the same slots go out with one `sendmmsg` on a socket
//!   connected to the destination (no route lookup per datagram). Nothing
//!   is allocated per datagram and no byte is copied in user space: the
//!   kernel copies into the arena on receive and out of it on send.
//!   Consecutive datagrams of equal size (the last may be shorter) travel
//!   as one UDP GSO unit inside that `sendmmsg` (`UDP_SEGMENT`, Linux ≥
//!   4.18): the kernel builds one large datagram and cuts it into the
//!   original datagrams as late as possible (on the device, or at the
//!   receiving socket on loopback), so each run costs one trip through
//!   the UDP/IP send path instead of one per datagram.
//!
//! # The GSO probe
//!
//! At bind time the gateway sets `UDP_SEGMENT` to 0 on the sink socket:
//! kernels without UDP GSO refuse with `ENOPROTOOPT` and the gateway uses
//! plain `sendmmsg` ([`SendPath::Sendmmsg`]). A path can still refuse a
//! GSO unit when sending: `EINVAL` when a segment does not fit the route's
//! MTU (the gateway then stops using GSO for that segment size and larger),
//! `EIO` when the device cannot checksum (GSO is switched off). The unit is
//! then resent without GSO at once, nothing is lost, and
//! [`UdpGatewayStats::gso_refused`] records the errno. [`GatewayConfig::gso`]
//! turns GSO off by choice.
//!
//! # Flow control (an active source)
//!
//! A UDP source is active in Fall's sense: it does not slow down when the
//! sink does. The gateway therefore never waits for the sink: sends are
//! `MSG_DONTWAIT`, and when the kernel would block (`EAGAIN`, `ENOBUFS`)
//! the rest of the batch is dropped and counted in
//! [`UdpGatewayStats::dropped_sink`], and the gateway goes back to receiving. A
//! sink that refuses a datagram (`ECONNREFUSED` after an ICMP port
//! unreachable on the connected socket, `EMSGSIZE`) costs that datagram
//! (counted in `dropped_sink` and [`UdpGatewayStats::sink_errors`]); the gateway
//! goes on. Datagrams the kernel dropped because the gateway's own receive
//! queue was full are counted with `SO_RXQ_OVFL`: the kernel attaches the
//! socket's cumulative drop count to each received datagram (the count
//! as of when that datagram was queued), and when the gateway is idle (a
//! 100 ms receive timeout) and at the end of a run it reads the same
//! counter with `SO_MEMINFO`, so [`UdpGatewayStats::dropped_kernel`] is exact
//! when `run` returns.
//!
//! Over loopback the kernel does not push back on a UDP sender: a sink
//! that does not read drops in its own receive queue (its
//! `/proc/net/udp` `drops` column), not in the gateway's send path.
//!
//! # "Header rewrite"
//!
//! User-space UDP sockets never see the UDP header. The gateway rewrites it
//! in the only sense available to it: the kernel builds a new header for
//! each forwarded datagram — the gateway's sink socket's source port, the
//! destination's port, the length, and the checksum (computed or offloaded
//! to the device; with GSO, per segment). The payload is passed through
//! byte for byte. (An application-level field rewrite with the RFC 1624
//! incremental checksum update is in [`zcio::splice::module::inet`].)
//!
//! # TCP
//!
//! [`TcpGateway`] accepts connections (at most [`GatewayConfig::max_conns`] at
//! once; more wait in the listen backlog), connects each to the
//! destination and moves both directions with two splice
//! [`Association`](zcio::splice::Association)s (`splice(2)` through a pipe,
//! no user-space copy) in fast mode, or two read/write threads with a
//! 64 KiB buffer in plain mode. A direction that reaches end of stream
//! half-closes its sink (`shutdown(SHUT_WR)`); an error in either
//! direction (a client killed mid-stream) shuts both sockets down and the
//! connection is counted as failed; the gateway goes on. `splice(2)` into a
//! socket whose peer is gone raises `SIGPIPE` like `write(2)` does: the
//! process must ignore it (Rust programs and Python do by default).
//!
//! # Direction
//!
//! The UDP gateway is one-way: datagrams from anyone to `listen` go to `to`.
//! Answers from `to` reach the gateway's sending socket and are not read
//! (the kernel drops them once that socket's small queue is full).

#![warn(missing_docs)]

mod batch;
mod tcp;
mod udp;

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use thiserror::Error;

use zcio::Errno;

pub use tcp::{TcpGateway, TcpGatewayStats};
pub use udp::UdpGateway;

/// Fast (batched, GSO, splice) or plain (one syscall each way per
/// datagram; a read/write loop for TCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GatewayMode {
    /// `recvmmsg` + `sendmmsg` with GSO units (UDP), `splice` (TCP).
    #[default]
    Fast,
    /// `recvmsg` + `sendto` per datagram (UDP), read/write threads (TCP).
    Plain,
}

impl fmt::Display for GatewayMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Fast => "fast",
            Self::Plain => "plain",
        })
    }
}

/// How datagrams leave the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendPath {
    /// One `sendto` per datagram (plain mode).
    Sendto,
    /// `sendmmsg`, one message per datagram.
    Sendmmsg,
    /// `sendmmsg` whose messages are UDP GSO units where sizes allow.
    SendmmsgGso,
}

impl fmt::Display for SendPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sendto => "sendto",
            Self::Sendmmsg => "sendmmsg",
            Self::SendmmsgGso => "sendmmsg+gso",
        })
    }
}

/// Largest batch accepted (datagrams per `recvmmsg`).
pub const MAX_BATCH: usize = 1024;
/// Default batch.
pub const DEFAULT_BATCH: usize = 64;
/// Default bound on concurrent TCP connections.
pub const DEFAULT_MAX_CONNS: usize = 64;

/// What to forward and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConfig {
    /// Where to receive (port 0: the kernel picks; see `local_addr`).
    pub listen: SocketAddr,
    /// Where to forward.
    pub to: SocketAddr,
    /// Fast or plain.
    pub mode: GatewayMode,
    /// Datagrams per receive in fast mode (1..=[`MAX_BATCH`]).
    pub batch: usize,
    /// `SO_RCVBUF` for the receiving socket (the kernel doubles it and
    /// caps it at `net.core.rmem_max`); `None` keeps the default.
    pub rcvbuf: Option<usize>,
    /// `SO_SNDBUF` for the sending socket.
    pub sndbuf: Option<usize>,
    /// Allow UDP GSO units in fast mode (used only if the kernel has it).
    pub gso: bool,
    /// TCP: most connections forwarded at once.
    pub max_conns: usize,
}

impl GatewayConfig {
    /// Fast mode with the defaults.
    pub fn new(listen: SocketAddr, to: SocketAddr) -> Self {
        Self {
            listen,
            to,
            mode: GatewayMode::Fast,
            batch: DEFAULT_BATCH,
            rcvbuf: None,
            sndbuf: None,
            gso: true,
            max_conns: DEFAULT_MAX_CONNS,
        }
    }

    fn check(&self) -> Result<(), GatewayError> {
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(GatewayError::Config(format!(
                "batch {} is out of range: give 1..={MAX_BATCH}",
                self.batch
            )));
        }
        if self.max_conns == 0 {
            return Err(GatewayError::Config(
                "max_conns 0 would never forward a connection: give at least 1".into(),
            ));
        }
        if self.to.port() == 0 {
            return Err(GatewayError::Config(format!(
                "destination {} has port 0: give the port to forward to",
                self.to
            )));
        }
        Ok(())
    }
}

/// What went wrong setting up or running a gateway.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GatewayError {
    /// The configuration cannot work.
    #[error("{0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {errno}{}", bind_hint(*errno))]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The kernel's error.
        errno: Errno,
    },
    /// The destination could not be set up (connect of the sink socket).
    #[error("cannot forward to {addr}: {errno}{}", connect_hint(*errno))]
    Connect {
        /// The destination.
        addr: SocketAddr,
        /// The kernel's error.
        errno: Errno,
    },
    /// A system call failed while setting up.
    #[error("{op}: {errno}")]
    Setup {
        /// The call.
        op: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
    /// Receiving failed in a way that cannot be survived (not a timeout,
    /// an interrupt or a transient shortage).
    #[error("{op} on the listening socket failed: {errno}")]
    Receive {
        /// The call.
        op: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
}

fn bind_hint(e: Errno) -> &'static str {
    match e {
        Errno::ADDRINUSE => " (another socket uses this port: stop it, pick another port, or use port 0)",
        Errno::ACCESS => " (ports below 1024 need CAP_NET_BIND_SERVICE: use a higher port)",
        Errno::ADDRNOTAVAIL => " (no local interface has this address: use 0.0.0.0, 127.0.0.1 or an address of this host)",
        _ => "",
    }
}

fn connect_hint(e: Errno) -> &'static str {
    match e {
        Errno::CONNREFUSED => " (nothing listens there: start the server first)",
        Errno::NETUNREACH | Errno::HOSTUNREACH => " (no route to that host)",
        _ => "",
    }
}

impl GatewayError {
    /// The errno behind the error, if any.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Bind { errno, .. }
            | Self::Connect { errno, .. }
            | Self::Setup { errno, .. }
            | Self::Receive { errno, .. } => Some(*errno),
            Self::Config(_) => None,
        }
    }
}

/// Counters of a UDP gateway, readable while it runs (statistics only:
/// Relaxed, they order no other memory).
#[derive(Debug, Default)]
pub struct GatewayCounters {
    received: AtomicU64,
    forwarded: AtomicU64,
    bytes: AtomicU64,
    dropped_sink: AtomicU64,
    dropped_kernel: AtomicU64,
    sink_errors: AtomicU64,
    batches: AtomicU64,
    syscalls: AtomicU64,
}

impl GatewayCounters {
    fn add(c: &AtomicU64, n: u64) {
        if n != 0 {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Datagrams received so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Datagrams forwarded so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Relaxed)
    }

    /// Datagrams dropped so far (sink and kernel).
    pub fn dropped(&self) -> u64 {
        self.dropped_sink.load(Ordering::Relaxed) + self.dropped_kernel.load(Ordering::Relaxed)
    }

    /// Failed sends so far.
    pub fn sink_errors(&self) -> u64 {
        self.sink_errors.load(Ordering::Relaxed)
    }
}

/// What a UDP gateway did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpGatewayStats {
    /// Datagrams received.
    pub received: u64,
    /// Datagrams the kernel accepted for the destination.
    pub forwarded: u64,
    /// Payload bytes forwarded.
    pub bytes: u64,
    /// Datagrams dropped because the sink would block or refused them.
    pub dropped_sink: u64,
    /// Datagrams the kernel dropped from the gateway's receive queue
    /// (`SO_RXQ_OVFL` while datagrams arrive, `SO_MEMINFO` when idle and
    /// at the end of the run).
    pub dropped_kernel: u64,
    /// Sends that failed with an error other than would-block.
    pub sink_errors: u64,
    /// The last such error.
    pub last_sink_error: Option<Errno>,
    /// Receive calls that returned datagrams.
    pub batches: u64,
    /// System calls made on the data path (receives, sends, timeouts).
    pub syscalls: u64,
    /// The mode.
    pub mode: GatewayMode,
    /// How datagrams left.
    pub send_path: SendPath,
    /// Why GSO was limited or switched off, if it was.
    pub gso_refused: Option<Errno>,
    /// UDP GSO units sent (each more than one datagram).
    pub gso_units: u64,
}

impl UdpGatewayStats {
    fn from_counters(c: &GatewayCounters, mode: GatewayMode, send_path: SendPath) -> Self {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Self {
            received: l(&c.received),
            forwarded: l(&c.forwarded),
            bytes: l(&c.bytes),
            dropped_sink: l(&c.dropped_sink),
            dropped_kernel: l(&c.dropped_kernel),
            sink_errors: l(&c.sink_errors),
            last_sink_error: None,
            batches: l(&c.batches),
            syscalls: l(&c.syscalls),
            mode,
            send_path,
            gso_refused: None,
            gso_units: 0,
        }
    }
}
