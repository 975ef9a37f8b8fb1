//! Part (c): 16 messages of one size by synchronous copy through the
//! kernel (a Unix `SOCK_SEQPACKET` socket: one `write` and one `read` per
//! message) vs through a channel by reference (the thesis's Table 6.3).
//!
//! Each round starts from idle: the sender waits for the receiver's
//! acknowledgement of the previous round (a pipe, unmeasured), stamps the
//! clocks, sends 16 messages, then passes its stamp over a second pipe;
//! the receiver stamps after the 16th message. Both senders produce the
//! bytes once (the copy sender into a private buffer it then writes, the
//! channel sender into the pool buffer it sends).

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, PoolConfig};

use super::stats::Welford;
use super::{collect, left, sample, spawn, Options, Row, Sample, SockPath, Task};
use crate::affinity::cpu_for;
use crate::child::Group;
use crate::clock::{cycles, mono_ns};

/// Messages per round.
pub const BURST: usize = 16;

/// How the messages travel.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Kind {
    /// Through the kernel: an inherited `SOCK_SEQPACKET` socket end.
    Copy {
        /// The socket.
        fd: RawFd,
    },
    /// Through a channel (16 descriptor entries) by reference.
    Shm {
        /// Listener path (the receiver binds).
        path: String,
    },
}

/// How (c) was measured.
pub fn note(opts: &Options) -> String {
    format!(
        "(c) time for {BURST} messages from the sender's first send to the receiver's last \
         receive, starting from idle; {} rounds after {} warm-up; sync-copy = a write + read per \
         message on a Unix SOCK_SEQPACKET socket, shm = a channel with {BURST} descriptor \
         entries (buffers from a pool, by reference); ratio = copy ÷ shm",
        opts.burst_rounds,
        opts.warmup.min(opts.burst_rounds)
    )
}

fn cfg() -> ChannelConfig {
    ChannelConfig {
        ring_entries: BURST as u32,
        ..ChannelConfig::default()
    }
}

fn run(copy: bool, size: usize, opts: &Options) -> Result<Sample, String> {
    let (ctl_r, ctl_w, _) = crate::fds::pipe_pair(Some(4096))?;
    let (ack_r, ack_w, _) = crate::fds::pipe_pair(Some(4096))?;
    let sock = SockPath::new("proxy", "burst");
    let pair: Option<(OwnedFd, OwnedFd)> = if copy {
        use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
        Some(
            socketpair(
                AddressFamily::UNIX,
                SocketType::SEQPACKET,
                SocketFlags::CLOEXEC,
                None,
            )
            .map_err(|e| format!("socketpair: {e}"))?,
        )
    } else {
        None
    };
    let mut all = vec![&ctl_r, &ctl_w, &ack_r, &ack_w];
    if let Some((a, b)) = &pair {
        all.push(a);
        all.push(b);
    }
    let kind = |end: usize| match &pair {
        Some((a, b)) => Kind::Copy {
            fd: if end == 0 {
                a.as_raw_fd()
            } else {
                b.as_raw_fd()
            },
        },
        None => Kind::Shm {
            path: sock.0.clone(),
        },
    };
    let warmup = opts.warmup.min(opts.burst_rounds);
    let rounds = warmup + opts.burst_rounds;
    let mut group = Group::new();
    let recv = Task::BurstRecv {
        kind: kind(1),
        size,
        warmup,
        rounds,
        ctl_fd: ctl_r.as_raw_fd(),
        ack_fd: ack_w.as_raw_fd(),
    };
    let mut give = vec![&ctl_r, &ack_w];
    if let Some((_, b)) = &pair {
        give.push(b);
    }
    group.push(
        spawn(recv, Some(cpu_for(1)), opts, &give, &all)?,
        "receiver",
    );
    let send = Task::BurstSend {
        kind: kind(0),
        size,
        warmup,
        rounds,
        ctl_fd: ctl_w.as_raw_fd(),
        ack_fd: ack_r.as_raw_fd(),
    };
    let mut give = vec![&ctl_w, &ack_r];
    if let Some((a, _)) = &pair {
        give.push(a);
    }
    group.push(spawn(send, Some(cpu_for(0)), opts, &give, &all)?, "sender");
    drop(all);
    drop((ctl_r, ctl_w, ack_r, ack_w, pair));
    sample(&collect(group, opts)?, 0, "receiver")
}

/// Both variants at one size.
pub fn measure(size: usize, opts: &Options) -> Result<Vec<Row>, String> {
    let c = run(true, size, opts)?;
    let s = run(false, size, opts)?;
    let row = |name: &str, x: &Sample| {
        let mut r = Row::new("c", name);
        r.size = Some(size as u64);
        r.latency_ns = Some(x.mean_ns);
        r.stddev_ns = Some(x.stddev_ns);
        r.cycles = Some(x.mean_cycles);
        r.count = x.n;
        r
    };
    let mut copy = row("sync-copy", &c);
    copy.ratio = Some(c.mean_ns / s.mean_ns.max(1e-9));
    Ok(vec![copy, row("shm", &s)])
}

enum End {
    Sock(std::fs::File),
    Chan(Channel, Option<Pool>),
}

fn open(kind: &Kind, sender: bool, deadline: Instant) -> Result<End, String> {
    match kind {
        Kind::Copy { fd } => crate::fds::take_fd(*fd).map(End::Sock),
        Kind::Shm { path } if sender => {
            let ch = loop {
                match Channel::connect(path, cfg()) {
                    Ok(c) => break c,
                    Err(e) if Instant::now() >= deadline => {
                        return Err(format!("connect {path}: {e}"))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            };
            let pool = Pool::new(PoolConfig {
                chunk_size: 1 << 20,
                max_chunks: 2,
                ..PoolConfig::named("burst")
            });
            Ok(End::Chan(ch, Some(pool)))
        }
        Kind::Shm { path } => {
            let l = Listener::bind(path, cfg()).map_err(|e| format!("bind {path}: {e}"))?;
            let ch = l
                .accept_timeout(left(deadline))
                .map_err(|e| format!("accept: {e}"))?;
            Ok(End::Chan(ch, None))
        }
    }
}

/// The sender.
pub fn sender(
    kind: &Kind,
    size: usize,
    rounds: u64,
    ctl_fd: RawFd,
    ack_fd: RawFd,
    deadline: Instant,
) -> Result<(), String> {
    let end = open(kind, true, deadline)?;
    let mut ctl = crate::fds::take_fd(ctl_fd)?;
    let mut ack = crate::fds::take_fd(ack_fd)?;
    let mut private = vec![0u8; size];
    let mut b = [0u8; 1];
    for r in 0..rounds {
        ack.read_exact(&mut b).map_err(|e| format!("ack: {e}"))?;
        let (c0, t0) = (cycles(), mono_ns());
        for i in 0..BURST {
            let v = (r as usize + i) as u8;
            match &end {
                End::Sock(f) => {
                    private.fill(v);
                    let n = rustix::io::write(f, &private).map_err(|e| format!("write: {e}"))?;
                    if n != size {
                        return Err(format!("short write {n}"));
                    }
                }
                End::Chan(ch, Some(pool)) => {
                    let mut buf = pool
                        .alloc_timeout(size, left(deadline))
                        .map_err(|e| format!("alloc: {e}"))?;
                    buf.truncate(size);
                    buf.as_mut_slice().fill(v);
                    let m = Msg::from(buf.freeze().map_err(|e| e.to_string())?);
                    ch.send_timeout(m, left(deadline))
                        .map_err(|e| format!("send: {e}"))?;
                }
                End::Chan(_, None) => return Err("sender without a pool".into()),
            }
        }
        let mut stamp = [0u8; 16];
        stamp[..8].copy_from_slice(&t0.to_le_bytes());
        stamp[8..].copy_from_slice(&c0.to_le_bytes());
        ctl.write_all(&stamp).map_err(|e| format!("ctl: {e}"))?;
    }
    ack.read_exact(&mut b)
        .map_err(|e| format!("final ack: {e}"))?;
    Ok(())
}

/// The receiver (measures).
pub fn receiver(
    kind: &Kind,
    size: usize,
    warmup: u64,
    rounds: u64,
    ctl_fd: RawFd,
    ack_fd: RawFd,
    deadline: Instant,
) -> Result<Sample, String> {
    let end = open(kind, false, deadline)?;
    let mut ctl = crate::fds::take_fd(ctl_fd)?;
    let mut ack = crate::fds::take_fd(ack_fd)?;
    let mut buf = vec![0u8; size.max(1) + 1];
    let (mut ns, mut cy) = (Welford::default(), Welford::default());
    ack.write_all(&[0]).map_err(|e| format!("ack: {e}"))?;
    for r in 0..rounds {
        for i in 0..BURST {
            let v = (r as usize + i) as u8;
            let (first, len) = match &end {
                End::Sock(f) => {
                    let n = rustix::io::read(f, &mut buf).map_err(|e| format!("read: {e}"))?;
                    (buf[0], n)
                }
                End::Chan(ch, _) => {
                    let m = ch
                        .recv_timeout(left(deadline))
                        .map_err(|e| format!("recv: {e}"))?;
                    let first = crate::touch::msg_first_byte(&m);
                    (first.unwrap_or(!v), m.len())
                }
            };
            if first != v || len != size {
                return Err(format!("round {r} message {i}: wrong content"));
            }
        }
        let (t1, c1) = (mono_ns(), cycles());
        let mut stamp = [0u8; 16];
        ctl.read_exact(&mut stamp)
            .map_err(|e| format!("ctl: {e}"))?;
        let t0 = u64::from_le_bytes(stamp[..8].try_into().unwrap_or_default());
        let c0 = u64::from_le_bytes(stamp[8..].try_into().unwrap_or_default());
        if r >= warmup {
            ns.add(t1.saturating_sub(t0) as f64);
            cy.add(c1.saturating_sub(c0) as f64);
        }
        ack.write_all(&[1]).map_err(|e| format!("ack: {e}"))?;
    }
    Ok(Sample {
        n: ns.count(),
        mean_ns: ns.mean(),
        stddev_ns: ns.stddev(),
        mean_cycles: cy.mean(),
        ..Sample::default()
    })
}
