//! Part (a): one-word latency (the thesis's Table 6.1), each variant a
//! client process and a server process.

use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zcio::rendezvous::{Envelope, Rendezvous, RendezvousListener};

use super::stats::Welford;
use super::{collect, left, sample, spawn, Options, Row, Sample, SockPath, Task};
use crate::affinity::cpu_for;
use crate::child::Group;
use crate::clock::{cycles, mono_ns};

/// Label of a measured message.
pub const PING: u64 = 1;
/// Label of a reply.
pub const PONG: u64 = 2;
/// Label that ends a server.
pub const STOP: u64 = 3;

/// A latency variant.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Round trip of `Rendezvous::call` against `reply_and_recv`.
    Sync,
    /// The cost of an asynchronous send returning to the caller.
    AsyncSend,
    /// Round trip; the server receives through the asynchronous receive
    /// proxy.
    AsyncReceive,
    /// Round trip of one word over two pipes.
    PipePingpong,
    /// Round trip of a shared word flipped with futex wait/wake.
    FutexPingpong,
}

impl Variant {
    /// All variants in run order.
    pub const ALL: [Variant; 5] = [
        Variant::Sync,
        Variant::AsyncSend,
        Variant::AsyncReceive,
        Variant::PipePingpong,
        Variant::FutexPingpong,
    ];

    /// The JSON `variant`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Sync => "sync",
            Variant::AsyncSend => "async-send",
            Variant::AsyncReceive => "async-receive",
            Variant::PipePingpong => "pipe-pingpong",
            Variant::FutexPingpong => "futex-pingpong",
        }
    }

    /// Whether this build can measure it (the asynchronous variants need
    /// `zcio::proxy`).
    pub fn available(self) -> bool {
        match self {
            Variant::AsyncSend | Variant::AsyncReceive => super::proxyside::BUILT,
            _ => true,
        }
    }
}

/// How (a) was measured.
pub fn note(opts: &Options) -> String {
    format!(
        "(a) {} measured iterations after {} warm-up ones, one word each; sync, async-receive, \
         pipe-pingpong and futex-pingpong are round trips measured at the client; async-send is \
         the time until the asynchronous send call returns (the client then waits for its \
         ticket, unmeasured, so every send finds an idle proxy); futex-pingpong sleeps at once \
         (no spinning), rendezvous waits spin first",
        opts.iters, opts.warmup
    )
}

/// Measure one variant.
pub fn measure(v: Variant, opts: &Options) -> Result<Row, String> {
    if !v.available() {
        return Err(format!("{}: proxy layer not built", v.name()));
    }
    let (client, server) = (Some(cpu_for(0)), Some(cpu_for(1)));
    let (warmup, iters) = (opts.warmup, opts.iters);
    let mut group = Group::new();
    let s = match v {
        Variant::Sync | Variant::AsyncSend | Variant::AsyncReceive => {
            let sock = SockPath::new("proxy", "rdv");
            let path = sock.0.clone();
            let srv = Task::RdvServer {
                path: path.clone(),
                variant: v,
            };
            group.push(spawn(srv, server, opts, &[], &[])?, "rendezvous server");
            let cli = Task::RdvClient {
                path,
                variant: v,
                warmup,
                iters,
            };
            group.push(spawn(cli, client, opts, &[], &[])?, "rendezvous client");
            sample(&collect(group, opts)?, 1, "rendezvous client")?
        }
        Variant::PipePingpong => {
            let (r1, w1, _) = crate::fds::pipe_pair(Some(4096))?;
            let (r2, w2, _) = crate::fds::pipe_pair(Some(4096))?;
            let all = [&r1, &w1, &r2, &w2];
            use std::os::fd::AsRawFd;
            let srv = Task::PipePing {
                rfd: r1.as_raw_fd(),
                wfd: w2.as_raw_fd(),
                warmup,
                iters,
                client: false,
            };
            group.push(spawn(srv, server, opts, &[&r1, &w2], &all)?, "pipe server");
            let cli = Task::PipePing {
                rfd: r2.as_raw_fd(),
                wfd: w1.as_raw_fd(),
                warmup,
                iters,
                client: true,
            };
            group.push(spawn(cli, client, opts, &[&r2, &w1], &all)?, "pipe client");
            drop((r1, w1, r2, w2));
            sample(&collect(group, opts)?, 1, "pipe client")?
        }
        Variant::FutexPingpong => {
            use std::os::fd::AsRawFd;
            let fd = zcio::internals::sys::memfd::create_sized("zcio-bench-futex", 4096)
                .map_err(|e| format!("memfd: {e}"))?;
            let all = [&fd];
            let mk = |client| Task::FutexPing {
                fd: fd.as_raw_fd(),
                warmup,
                iters,
                client,
            };
            group.push(spawn(mk(false), server, opts, &all, &all)?, "futex server");
            group.push(spawn(mk(true), client, opts, &all, &all)?, "futex client");
            sample(&collect(group, opts)?, 1, "futex client")?
        }
    };
    let mut row = Row::new("a", v.name());
    row.latency_ns = Some(s.mean_ns);
    row.stddev_ns = Some(s.stddev_ns);
    row.cycles = Some(s.mean_cycles);
    row.count = s.n;
    Ok(row)
}

/// Measured iteration: record both clocks.
#[derive(Default)]
pub struct Timer {
    ns: Welford,
    cy: Welford,
}

impl Timer {
    /// Time `f` (recorded only when `keep`).
    #[inline]
    pub fn time<T>(&mut self, keep: bool, f: impl FnOnce() -> T) -> T {
        let c0 = cycles();
        let t0 = mono_ns();
        let r = f();
        let t1 = mono_ns();
        let c1 = cycles();
        if keep {
            self.ns.add(t1.saturating_sub(t0) as f64);
            self.cy.add(c1.saturating_sub(c0) as f64);
        }
        r
    }

    /// The sample.
    pub fn sample(&self) -> Sample {
        Sample {
            n: self.ns.count(),
            mean_ns: self.ns.mean(),
            stddev_ns: self.ns.stddev(),
            mean_cycles: self.cy.mean(),
            ..Sample::default()
        }
    }
}

/// Connect to a rendezvous listener, retrying until it exists.
pub fn rdv_connect(path: &str, deadline: Instant) -> Result<Rendezvous, String> {
    loop {
        match Rendezvous::connect(path) {
            Ok(e) => return Ok(e),
            Err(e) if Instant::now() >= deadline => return Err(format!("connect {path}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// The client side of the rendezvous variants.
pub fn rdv_client(
    path: &str,
    v: Variant,
    warmup: u64,
    iters: u64,
    deadline: Instant,
) -> Result<Sample, String> {
    let ep = rdv_connect(path, deadline)?;
    if v == Variant::AsyncSend {
        return super::proxyside::send_client(ep, warmup, iters, deadline);
    }
    let mut t = Timer::default();
    for i in 0..warmup + iters {
        let msg = Envelope::new(PING, &[i]);
        let to = left(deadline);
        let r = t
            .time(i >= warmup, || ep.call_timeout(&msg, to))
            .map_err(|e| format!("call {i}: {e}"))?;
        if r.label != PONG || r.words.first() != Some(&i) {
            return Err(format!("call {i}: unexpected reply {r:?}"));
        }
    }
    ep.send_timeout(&Envelope::new(STOP, &[]), left(deadline))
        .map_err(|e| format!("stop: {e}"))?;
    Ok(t.sample())
}

/// The server side of the rendezvous variants: `sync` answers with
/// `reply_and_recv`, `async-send` only receives (a plain synchronous
/// receiver), `async-receive` receives through the receive proxy.
pub fn rdv_server(path: &str, v: Variant, deadline: Instant) -> Result<(), String> {
    let l = RendezvousListener::bind(path).map_err(|e| format!("bind {path}: {e}"))?;
    let ep = l.accept().map_err(|e| format!("accept: {e}"))?;
    match v {
        Variant::AsyncReceive => return super::proxyside::receive_server(ep, deadline),
        Variant::AsyncSend => loop {
            let m = ep.recv_timeout(left(deadline)).map_err(|e| e.to_string())?;
            if m.label == STOP {
                return Ok(());
            }
        },
        _ => {}
    }
    let (_, mut m) =
        Rendezvous::recv_any_timeout(&[&ep], left(deadline)).map_err(|e| e.to_string())?;
    while m.label != STOP {
        let reply = Envelope::new(PONG, &m.words);
        m = ep
            .reply_and_recv_timeout(&reply, &[&ep], left(deadline))
            .map_err(|e| format!("reply_and_recv: {e}"))?
            .1;
    }
    Ok(())
}

/// One side of the pipe ping-pong.
pub fn pipe_ping(
    rfd: RawFd,
    wfd: RawFd,
    warmup: u64,
    iters: u64,
    client: bool,
) -> Result<Option<Sample>, String> {
    let mut r = crate::fds::take_fd(rfd)?;
    let mut w = crate::fds::take_fd(wfd)?;
    let mut buf = [0u8; 8];
    if !client {
        loop {
            match r.read_exact(&mut buf) {
                Ok(()) => w.write_all(&buf).map_err(|e| format!("write: {e}"))?,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
    }
    let mut t = Timer::default();
    for i in 0..warmup + iters {
        t.time(i >= warmup, || {
            w.write_all(&i.to_le_bytes())
                .and_then(|()| r.read_exact(&mut buf))
        })
        .map_err(|e| format!("ping {i}: {e}"))?;
        if u64::from_le_bytes(buf) != i {
            return Err(format!("ping {i}: wrong echo"));
        }
    }
    Ok(Some(t.sample()))
}

/// One side of the futex ping-pong on the first word of the memfd `fd`:
/// the client stores odd values, the server answers with the next even
/// one; `u32::MAX` ends the server.
pub fn futex_ping(
    fd: RawFd,
    warmup: u64,
    iters: u64,
    client: bool,
    deadline: Instant,
) -> Result<Option<Sample>, String> {
    use zcio::internals::sys::mmap::{Access, Mapping};
    let file = crate::fds::take_fd(fd)?;
    let map = Mapping::map(&file, 4096, Access::ReadWrite, true).map_err(|e| e.to_string())?;
    // The mapping is a page long, page-aligned and lives until the end of
    // this function; an AtomicU32 may hold any bits and is shared safely.
    // SAFETY: as argued just above.
    let word = unsafe { &*map.as_ptr().cast::<AtomicU32>() };
    // Wait while the word holds `v`.
    let wait_while = |v: u32| -> Result<u32, String> {
        loop {
            let now = word.load(Ordering::Acquire);
            if now != v {
                return Ok(now);
            }
            if Instant::now() >= deadline {
                return Err("futex ping-pong: partner stopped answering".into());
            }
            zcio::internals::sys::futex::wait(word, v, Duration::from_millis(50));
        }
    };
    if !client {
        let mut seen = 0u32;
        loop {
            let v = wait_while(seen)?;
            if v == u32::MAX {
                return Ok(None);
            }
            word.store(v.wrapping_add(1), Ordering::Release);
            zcio::internals::sys::futex::wake(word, 1);
            seen = v.wrapping_add(1);
        }
    }
    let mut t = Timer::default();
    let mut v = 0u32;
    for i in 0..warmup + iters {
        let odd = v.wrapping_add(1) | 1;
        t.time(i >= warmup, || {
            word.store(odd, Ordering::Release);
            zcio::internals::sys::futex::wake(word, 1);
            wait_while(odd)
        })?;
        v = word.load(Ordering::Acquire);
        if v != odd.wrapping_add(1) {
            return Err(format!("futex ping-pong: {v} after {odd}"));
        }
    }
    word.store(u32::MAX, Ordering::Release);
    zcio::internals::sys::futex::wake(word, 1);
    Ok(Some(t.sample()))
}
