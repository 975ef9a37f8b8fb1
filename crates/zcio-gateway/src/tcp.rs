//! [`TcpGateway`]: accept connections, connect each to the destination and
//! move both directions (two splice associations, or two read/write
//! threads in plain mode).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};

use super::udp::TICK;
use super::{GatewayConfig, GatewayError, GatewayMode};
use zcio::splice::{Association, Completion, Increment, IoObject, MoverKind};
use zcio::Errno;

/// How long connecting to the destination may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Plain mode's buffer.
const PLAIN_BUF: usize = 64 << 10;

/// Counters of a TCP gateway (statistics only: Relaxed).
#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    connect_failed: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// What a TCP gateway did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpGatewayStats {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections that ended with both directions at end of stream.
    pub completed: u64,
    /// Connections that ended with an error in a direction (a peer reset
    /// or killed) or were stopped.
    pub failed: u64,
    /// Accepted connections whose destination could not be reached.
    pub connect_failed: u64,
    /// Bytes client → destination.
    pub bytes_up: u64,
    /// Bytes destination → client.
    pub bytes_down: u64,
    /// The mode.
    pub mode: GatewayMode,
    /// The mover the last fast-mode connection used.
    pub mover: Option<MoverKind>,
}

/// A bound TCP gateway.
pub struct TcpGateway {
    cfg: GatewayConfig,
    listener: TcpListener,
    local: SocketAddr,
    counters: Arc<Counters>,
    mover: Arc<Mutex<Option<MoverKind>>>,
}

fn errno_of(e: &std::io::Error) -> Errno {
    Errno::from_io_error(e).unwrap_or(Errno::IO)
}

impl TcpGateway {
    /// Listen on `cfg.listen`. Nothing is accepted until `run`.
    pub fn bind(cfg: GatewayConfig) -> Result<Self, GatewayError> {
        cfg.check()?;
        let listener = TcpListener::bind(cfg.listen).map_err(|e| GatewayError::Bind {
            addr: cfg.listen,
            errno: errno_of(&e),
        })?;
        let local = listener.local_addr().map_err(|e| GatewayError::Setup {
            op: "getsockname",
            errno: errno_of(&e),
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| GatewayError::Setup {
                op: "fcntl(O_NONBLOCK)",
                errno: errno_of(&e),
            })?;
        Ok(Self {
            cfg,
            listener,
            local,
            counters: Arc::default(),
            mover: Arc::default(),
        })
    }

    /// The address the gateway listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The statistics so far (connections still running count their bytes
    /// when they end).
    pub fn stats(&self) -> TcpGatewayStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = &self.counters;
        TcpGatewayStats {
            accepted: l(&c.accepted),
            completed: l(&c.completed),
            failed: l(&c.failed),
            connect_failed: l(&c.connect_failed),
            bytes_up: l(&c.bytes_up),
            bytes_down: l(&c.bytes_down),
            mode: self.cfg.mode,
            mover: *self.mover.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Forward connections until `stop` is set or `deadline` passes; then
    /// stop every connection (within [`TICK`]) and return.
    pub fn run(
        &mut self,
        stop: &AtomicBool,
        deadline: Option<Instant>,
    ) -> Result<TcpGatewayStats, GatewayError> {
        let inner_stop = Arc::new(AtomicBool::new(false));
        let mut conns: Vec<JoinHandle<()>> = Vec::new();
        let res = loop {
            // Relaxed: the flag carries no data, only "stop now".
            if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                break Ok(());
            }
            conns.retain(|h| !h.is_finished());
            if conns.len() >= self.cfg.max_conns {
                std::thread::sleep(TICK / 10);
                continue;
            }
            let mut fds = [PollFd::new(&self.listener, PollFlags::IN)];
            let t = Timespec {
                tv_sec: 0,
                tv_nsec: TICK.as_nanos() as i64,
            };
            match poll(&mut fds, Some(&t)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(errno) => break Err(GatewayError::Receive { op: "poll", errno }),
            }
            match self.listener.accept() {
                Ok((client, _peer)) => {
                    add(&self.counters.accepted, 1);
                    let to = self.cfg.to;
                    let mode = self.cfg.mode;
                    let counters = self.counters.clone();
                    let mover = self.mover.clone();
                    let stop = inner_stop.clone();
                    let h = std::thread::Builder::new()
                        .name("zcio-gw-conn".into())
                        .spawn(move || connection(client, to, mode, &counters, &mover, &stop));
                    match h {
                        Ok(h) => conns.push(h),
                        // The client is closed with the closure; count it.
                        Err(_) => add(&self.counters.failed, 1),
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => match errno_of(&e) {
                    // The client gave up before we accepted; or a momentary
                    // shortage of descriptors or memory: go on.
                    Errno::CONNABORTED
                    | Errno::INTR
                    | Errno::MFILE
                    | Errno::NFILE
                    | Errno::NOBUFS
                    | Errno::NOMEM
                    | Errno::PROTO => std::thread::sleep(TICK / 10),
                    errno => {
                        break Err(GatewayError::Receive {
                            op: "accept",
                            errno,
                        })
                    }
                },
            }
        };
        // Relaxed: as above; the joins order everything after.
        inner_stop.store(true, Ordering::Relaxed);
        for h in conns {
            let _ = h.join();
        }
        res.map(|()| self.stats())
    }
}

/// Forward one connection to its end.
fn connection(
    client: TcpStream,
    to: SocketAddr,
    mode: GatewayMode,
    counters: &Counters,
    mover: &Mutex<Option<MoverKind>>,
    stop: &AtomicBool,
) {
    let server = match TcpStream::connect_timeout(&to, CONNECT_TIMEOUT) {
        Ok(s) => s,
        Err(_) => {
            add(&counters.connect_failed, 1);
            return;
        }
    };
    let ok = match mode {
        // A setup failure (dup, eventfd, thread) counts as failed.
        GatewayMode::Fast => spliced(client, server, counters, mover, stop).unwrap_or(false),
        GatewayMode::Plain => plain(client, server, counters, stop),
    };
    add(
        if ok {
            &counters.completed
        } else {
            &counters.failed
        },
        1,
    );
}

/// Fast mode: two associations (`splice` through a pipe each way). `Ok(true)`
/// when both directions reached end of stream.
fn spliced(
    client: TcpStream,
    server: TcpStream,
    counters: &Counters,
    mover: &Mutex<Option<MoverKind>>,
    stop: &AtomicBool,
) -> std::io::Result<bool> {
    let client_ctl = client.try_clone()?;
    let server_ctl = server.try_clone()?;
    let ep = |s: TcpStream, label: &str| {
        IoObject::new(OwnedFd::from(s), label).map_err(std::io::Error::other)
    };
    let up_src = ep(client.try_clone()?, "client")?;
    let down_src = ep(server.try_clone()?, "destination")?;
    let mut up =
        Association::new(up_src, ep(server, "destination")?).map_err(std::io::Error::other)?;
    let mut down =
        Association::new(down_src, ep(client, "client")?).map_err(std::io::Error::other)?;
    up.start(Increment::Infinite)
        .map_err(std::io::Error::other)?;
    down.start(Increment::Infinite)
        .map_err(std::io::Error::other)?;
    let (mut up_end, mut down_end): (Option<Completion>, Option<Completion>) = (None, None);
    let mut failed = false;
    while up_end.is_none() || down_end.is_none() {
        // Relaxed: the flag carries no data, only "stop now".
        if stop.load(Ordering::Relaxed) {
            failed = true;
            break;
        }
        let mut fds = [
            PollFd::new(&up, PollFlags::IN),
            PollFd::new(&down, PollFlags::IN),
        ];
        let t = Timespec {
            tv_sec: 0,
            tv_nsec: TICK.as_nanos() as i64,
        };
        let _ = poll(&mut fds, Some(&t));
        for (a, end, sink) in [
            (&up, &mut up_end, &server_ctl),
            (&down, &mut down_end, &client_ctl),
        ] {
            if end.is_some() {
                continue;
            }
            if let Some(c) = a.wait(Duration::ZERO) {
                if c.error.is_some() || c.stopped {
                    // A reset or killed peer: end both directions.
                    failed = true;
                    let _ = client_ctl.shutdown(Shutdown::Both);
                    let _ = server_ctl.shutdown(Shutdown::Both);
                } else {
                    // End of stream: pass the half-close on.
                    let _ = sink.shutdown(Shutdown::Write);
                }
                *end = Some(c);
            }
        }
    }
    *mover.lock().unwrap_or_else(|p| p.into_inner()) = Some(up.status().mover);
    let (su, sd) = (up.close(), down.close());
    add(&counters.bytes_up, su.moved);
    add(&counters.bytes_down, sd.moved);
    Ok(!failed)
}

/// Plain mode: a read/write loop per direction (this thread and one more).
fn plain(client: TcpStream, server: TcpStream, counters: &Counters, stop: &AtomicBool) -> bool {
    let set = |s: &TcpStream| s.set_read_timeout(Some(TICK));
    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
        return false;
    };
    if set(&client).is_err() || set(&server).is_err() {
        return false;
    }
    let ok = std::thread::scope(|sc| {
        let down = sc.spawn(|| pump(&s2, &c2, stop, &counters.bytes_down));
        let up = pump(&client, &server, stop, &counters.bytes_up);
        let down = down.join().unwrap_or(false);
        up && down
    });
    ok
}

/// Copy `src` to `dst` until end of stream (then half-close `dst`: true) or
/// an error or stop (then shut both down: false).
fn pump(src: &TcpStream, dst: &TcpStream, stop: &AtomicBool, bytes: &AtomicU64) -> bool {
    let mut buf = vec![0u8; PLAIN_BUF];
    let (mut r, mut w) = (src, dst);
    loop {
        // Relaxed: the flag carries no data, only "stop now".
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match r.read(&mut buf) {
            Ok(0) => {
                let _ = dst.shutdown(Shutdown::Write);
                return true;
            }
            Ok(n) => {
                if w.write_all(&buf[..n]).is_err() {
                    break;
                }
                add(bytes, n as u64);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    let _ = src.shutdown(Shutdown::Both);
    let _ = dst.shutdown(Shutdown::Both);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_a_small_exchange_in_both_modes() {
        for mode in [GatewayMode::Fast, GatewayMode::Plain] {
            let server = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut cfg =
                GatewayConfig::new("127.0.0.1:0".parse().unwrap(), server.local_addr().unwrap());
            cfg.mode = mode;
            let mut gw = TcpGateway::bind(cfg).unwrap();
            let addr = gw.local_addr();
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            let h = std::thread::spawn(move || gw.run(&st, None).unwrap());
            let mut c = TcpStream::connect(addr).unwrap();
            let (mut s, _) = server.accept().unwrap();
            c.write_all(b"ping").unwrap();
            c.shutdown(Shutdown::Write).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            assert_eq!(got, b"ping");
            s.write_all(b"pong").unwrap();
            drop(s);
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap();
            assert_eq!(got, b"pong");
            stop.store(true, Ordering::Relaxed);
            let stats = h.join().unwrap();
            assert_eq!(
                (stats.accepted, stats.bytes_up, stats.bytes_down),
                (1, 4, 4)
            );
            if mode == GatewayMode::Fast {
                assert_eq!(stats.mover, Some(MoverKind::Splice));
            }
        }
    }
}
