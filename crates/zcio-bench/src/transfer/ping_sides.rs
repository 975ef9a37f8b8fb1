//! The client and server of each ping-pong transport (run in the child
//! processes). Requests and replies carry the sequence number in the first
//! word of every 4 KiB page; the receiving side reads one word per page.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use zcio::rendezvous::{Envelope, Rendezvous, RendezvousListener as RdvListener};
use zcio::{
    Channel, ChannelConfig, ChannelPolicy, FbufMut, LaneConfig, LaneError, LaneReceiver,
    LaneSender, Listener, Msg, Pool,
};

use super::line_side::LineSide;
use super::pingpong::{client_loop, server_loop, Client, Kind, Server, STOP};
use super::zcio_side::{bench_pool_config, connect_retry};
use super::Measured;
use crate::fds::take_fd;
use crate::iox::PingPort;
use crate::pages::{read_pages, write_pages};

/// Everything a ping-pong side needs (from the child spec).
pub struct Args<'a> {
    /// Transport.
    pub kind: Kind,
    /// Client (measures) or server.
    pub client: bool,
    /// Socket path (zcio) or service name base (iceoryx2).
    pub path: &'a str,
    /// Inherited read fd (pipe, socket).
    pub rfd: RawFd,
    /// Inherited write fd (pipe, socket).
    pub wfd: RawFd,
    /// Message size.
    pub size: usize,
    /// Unmeasured round trips.
    pub warmup: u64,
    /// Measured round trips (at most).
    pub iters: u64,
    /// Bound on the measured round trips' time.
    pub budget: Duration,
    /// Bound on everything.
    pub timeout: Duration,
    /// Take the next message's buffer right after sending (see
    /// `PingOptions::loan_ahead`).
    pub loan_ahead: bool,
}

/// Run one side.
pub fn run(a: &Args<'_>) -> Result<Measured, String> {
    let t = a.timeout;
    // Blocking mode: no spin budget, a receiver sleeps on the futex at once.
    let cfg = ChannelConfig {
        policy: ChannelPolicy {
            spin: if a.kind == Kind::ZcioChannelBlocking {
                Duration::ZERO
            } else {
                ChannelPolicy::default().spin
            },
            ..ChannelPolicy::default()
        },
        ..ChannelConfig::default()
    };
    match (a.kind, a.client) {
        (Kind::ZcioChannel | Kind::ZcioChannelBlocking, true) => {
            let chan = connect_retry(a.path, &cfg, t)?;
            let mut c = ZcioSide::new(chan, a.size, t, a.loan_ahead);
            client_loop(&mut c, a.warmup, a.iters, a.budget)
        }
        (Kind::ZcioChannel | Kind::ZcioChannelBlocking, false) => {
            let l = Listener::bind(a.path, cfg).map_err(|e| format!("bind {}: {e}", a.path))?;
            let chan = l.accept_timeout(t).map_err(|e| format!("accept: {e}"))?;
            server_loop(&mut ZcioSide::new(chan, a.size, t, a.loan_ahead), a.warmup)
        }
        (Kind::ZcioLane, true) => {
            let chan = connect_retry(a.path, &cfg, t)?;
            let mut side = LaneSide::open(chan, a.size, true, t)?;
            client_loop(&mut side, a.warmup, a.iters, a.budget)
        }
        (Kind::ZcioLane, false) => {
            let l = Listener::bind(a.path, cfg).map_err(|e| format!("bind {}: {e}", a.path))?;
            let chan = l.accept_timeout(t).map_err(|e| format!("accept: {e}"))?;
            server_loop(&mut LaneSide::open(chan, a.size, false, t)?, a.warmup)
        }
        (Kind::ZcioRendezvous, true) => {
            let deadline = Instant::now() + t;
            let ep = crate::proxyb::latency::rdv_connect(a.path, deadline)?;
            let mut c = RdvClient {
                ep,
                words: a.size.div_ceil(8).max(1),
                t,
            };
            client_loop(&mut c, a.warmup, a.iters, a.budget)
        }
        (Kind::ZcioRendezvous, false) => {
            let l = RdvListener::bind(a.path).map_err(|e| format!("bind {}: {e}", a.path))?;
            let ep = l.accept().map_err(|e| format!("accept: {e}"))?;
            rdv_server(&ep, a.warmup, t)
        }
        (Kind::Iceoryx2 | Kind::Iceoryx2Blocking, client) => iceoryx2(a, client),
        (Kind::CacheLine | Kind::CacheLineFutex, client) => {
            let page = take_fd(a.rfd)?;
            let mut side = LineSide::new(&page, a.kind == Kind::CacheLineFutex, t)?;
            if client {
                client_loop(&mut side, a.warmup, a.iters, a.budget)
            } else {
                server_loop(&mut side, a.warmup)
            }
        }
        (Kind::Pipe | Kind::UnixSocket, client) => {
            let r = take_fd(a.rfd)?;
            // A socket is one fd for both directions.
            let w = if a.wfd == a.rfd {
                r.try_clone().map_err(|e| format!("dup: {e}"))?
            } else {
                take_fd(a.wfd)?
            };
            let mut side = FdSide {
                r,
                w,
                buf: vec![0u8; a.size],
            };
            if client {
                client_loop(&mut side, a.warmup, a.iters, a.budget)
            } else {
                server_loop(&mut side, a.warmup)
            }
        }
    }
}

/// The iceoryx2 side: a [`PingPort`] (two publish-subscribe services)
/// driven by the ping-pong loops.
fn iceoryx2(a: &Args<'_>, client: bool) -> Result<Measured, String> {
    let blocking = a.kind == Kind::Iceoryx2Blocking;
    let mut port = PingPort::open(a.path, a.size, client, blocking, a.loan_ahead, a.timeout)?;
    let m = if client {
        client_loop(&mut port, a.warmup, a.iters, a.budget)?
    } else {
        server_loop(&mut port, a.warmup)?
    };
    port.finish()?;
    Ok(m)
}

impl Client for PingPort {
    fn round_trip(&mut self, seq: u64) -> Result<u64, String> {
        self.send(seq)?;
        self.recv()
    }

    fn stop(&mut self) {
        let _ = self.send(STOP);
    }
}

impl Server for PingPort {
    fn next(&mut self) -> Result<Option<u64>, String> {
        Ok(Some(self.recv()?).filter(|&s| s != STOP))
    }

    fn reply(&mut self, seq: u64) -> Result<(), String> {
        self.send(seq)
    }
}

/// Send a message of `size` bytes from `pool` with `seq` in every page,
/// in `ahead` if a buffer was taken ahead.
fn zcio_send(
    chan: &Channel,
    pool: &Pool,
    ahead: Option<FbufMut>,
    size: usize,
    seq: u64,
    t: Duration,
) -> Result<(), String> {
    let mut buf = match ahead {
        Some(b) => b,
        None => pool
            .alloc_timeout(size, t)
            .map_err(|e| format!("alloc {size}: {e}"))?,
    };
    write_pages(buf.as_mut_slice(), seq);
    let frozen = buf.freeze().map_err(|e| e.to_string())?;
    chan.send_timeout(Msg::from(frozen), t)
        .map_err(|e| format!("send: {e}"))
}

/// A zcio channel side: its own pool; requests and replies on one channel.
struct ZcioSide {
    chan: Channel,
    pool: Pool,
    size: usize,
    t: Duration,
    /// `Some` with loan-ahead: the next message's buffer, taken right after
    /// the previous send.
    ahead: Option<Option<FbufMut>>,
}

impl ZcioSide {
    fn new(chan: Channel, size: usize, t: Duration, loan_ahead: bool) -> Self {
        Self {
            chan,
            pool: Pool::new(bench_pool_config(size.max(8), 1)),
            size: size.max(8),
            t,
            ahead: loan_ahead.then_some(None),
        }
    }

    /// Send `seq`, then (with loan-ahead) take the next buffer.
    fn send(&mut self, seq: u64) -> Result<(), String> {
        let taken = self.ahead.as_mut().and_then(Option::take);
        zcio_send(&self.chan, &self.pool, taken, self.size, seq, self.t)?;
        if let Some(slot) = &mut self.ahead {
            if seq != STOP {
                *slot = Some(
                    self.pool
                        .alloc_timeout(self.size, self.t)
                        .map_err(|e| format!("alloc {}: {e}", self.size))?,
                );
            }
        }
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<u64>, String> {
        match self.chan.recv_timeout(self.t) {
            Ok(m) => Ok(crate::touch::msg_pages(&m).0),
            Err(e) if self.chan.is_disconnected() => {
                let _ = e;
                Ok(None)
            }
            Err(e) => Err(format!("recv: {e}")),
        }
    }
}

impl Client for ZcioSide {
    fn round_trip(&mut self, seq: u64) -> Result<u64, String> {
        self.send(seq)?;
        self.recv()?.ok_or_else(|| "server hung up".into())
    }

    fn stop(&mut self) {
        let _ = self.send(STOP);
    }
}

impl Server for ZcioSide {
    fn next(&mut self) -> Result<Option<u64>, String> {
        Ok(self.recv()?.filter(|&s| s != STOP))
    }

    fn reply(&mut self, seq: u64) -> Result<(), String> {
        self.send(seq)
    }
}

/// A lane each way over one zcio channel (the client's carries requests,
/// the server's replies), slots of the message's size.
struct LaneSide {
    tx: LaneSender,
    rx: LaneReceiver,
    size: usize,
    t: Duration,
    /// Kept open for the lanes' life.
    _chan: Channel,
}

/// Slots per lane: the working set the channel's pool and iceoryx2 get.
const LANE_SLOTS: u32 = 6;

impl LaneSide {
    fn open(chan: Channel, size: usize, client: bool, t: Duration) -> Result<Self, String> {
        let size = size.max(8);
        let cfg = LaneConfig {
            slots: LANE_SLOTS,
            slot_size: size,
        };
        let open = |c: &Channel| c.open_lane(&cfg).map_err(|e| format!("open lane: {e}"));
        let accept = |c: &Channel| {
            c.accept_lane_timeout(t)
                .map_err(|e| format!("accept lane: {e}"))
        };
        // The client offers first, so neither side waits for the other.
        let (tx, rx) = if client {
            let tx = open(&chan)?;
            (tx, accept(&chan)?)
        } else {
            let rx = accept(&chan)?;
            (open(&chan)?, rx)
        };
        Ok(Self {
            tx,
            rx,
            size,
            t,
            _chan: chan,
        })
    }

    fn send(&mut self, seq: u64) -> Result<(), String> {
        let mut loan = self
            .tx
            .loan_timeout(self.t)
            .map_err(|e| format!("loan: {e}"))?;
        write_pages(&mut loan.as_mut_slice()[..self.size], seq);
        loan.send(self.size).map_err(|e| format!("send: {e}"))
    }

    fn recv(&mut self) -> Result<Option<u64>, String> {
        match self.rx.recv_timeout(self.t) {
            Ok(m) => Ok(Some(crate::pages::read_pages_view(m.view()).0)),
            Err(LaneError::Disconnected) => Ok(None),
            Err(e) => Err(format!("recv: {e}")),
        }
    }
}

impl Client for LaneSide {
    fn round_trip(&mut self, seq: u64) -> Result<u64, String> {
        self.send(seq)?;
        self.recv()?.ok_or_else(|| "server hung up".into())
    }

    fn stop(&mut self) {
        let _ = self.send(STOP);
    }
}

impl Server for LaneSide {
    fn next(&mut self) -> Result<Option<u64>, String> {
        Ok(self.recv()?.filter(|&s| s != STOP))
    }

    fn reply(&mut self, seq: u64) -> Result<(), String> {
        self.send(seq)
    }
}

/// Label of a request / reply / stop on the rendezvous.
const PING: u64 = 1;
const PONG: u64 = 2;
const RDV_STOP: u64 = 3;

/// A rendezvous client: the message's words are the payload (64 B at most).
struct RdvClient {
    ep: Rendezvous,
    words: usize,
    t: Duration,
}

impl Client for RdvClient {
    fn round_trip(&mut self, seq: u64) -> Result<u64, String> {
        let words = vec![seq; self.words];
        let r = self
            .ep
            .call_timeout(&Envelope::new(PING, &words), self.t)
            .map_err(|e| format!("call: {e}"))?;
        if r.label != PONG {
            return Err(format!("unexpected reply label {}", r.label));
        }
        Ok(touch_words(&r.words))
    }

    fn stop(&mut self) {
        let _ = self.ep.send_timeout(&Envelope::new(RDV_STOP, &[]), self.t);
    }
}

/// Read every word (the message's payload); the first is the sequence.
fn touch_words(w: &[u64]) -> u64 {
    let sum = w.iter().fold(0u64, |a, &x| a.wrapping_add(x));
    std::hint::black_box(sum);
    w.first().copied().unwrap_or(u64::MAX - 1)
}

/// The rendezvous server: `reply_and_recv` answers and takes the next
/// request in one call.
fn rdv_server(ep: &Rendezvous, warmup: u64, t: Duration) -> Result<Measured, String> {
    let mut cpu = crate::cpu::Window::default();
    let (_, mut m) = Rendezvous::recv_any_timeout(&[ep], t).map_err(|e| format!("receive: {e}"))?;
    let mut n = 0u64;
    while m.label != RDV_STOP {
        if n == warmup {
            cpu.start();
        }
        let seq = touch_words(&m.words);
        let reply = Envelope::new(PONG, &vec![seq; m.words.len().max(1)]);
        m = ep
            .reply_and_recv_timeout(&reply, &[ep], t)
            .map_err(|e| format!("reply_and_recv: {e}"))?
            .1;
        n += 1;
    }
    Ok(Measured::cpu_only(
        n.saturating_sub(warmup),
        cpu.elapsed_ns(),
    ))
}

/// A pipe or socket side: a private buffer, one write and one read per
/// message.
struct FdSide {
    r: File,
    w: File,
    buf: Vec<u8>,
}

impl FdSide {
    fn send(&mut self, seq: u64) -> Result<(), String> {
        write_pages(&mut self.buf, seq);
        self.w
            .write_all(&self.buf)
            .map_err(|e| format!("write: {e}"))
    }

    fn recv(&mut self) -> Result<Option<u64>, String> {
        match self.r.read_exact(&mut self.buf) {
            Ok(()) => Ok(Some(read_pages(&self.buf).0)),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(format!("read: {e}")),
        }
    }
}

impl Client for FdSide {
    fn round_trip(&mut self, seq: u64) -> Result<u64, String> {
        self.send(seq)?;
        self.recv()?.ok_or_else(|| "server hung up".into())
    }

    fn stop(&mut self) {
        let _ = self.send(STOP);
    }
}

impl Server for FdSide {
    fn next(&mut self) -> Result<Option<u64>, String> {
        Ok(self.recv()?.filter(|&s| s != STOP))
    }

    fn reply(&mut self, seq: u64) -> Result<(), String> {
        self.send(seq)
    }
}
