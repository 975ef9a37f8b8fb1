//! Forwarding chains: move every message arriving on one [`Channel`] on to
//! the next, until the upstream closes.
//!
//! Two modes:
//!
//! * [`ForwardMode::ByRef`]: the received [`Msg`] is sent on unchanged, so one data
//!   buffer travels the whole chain (each adjacent pair of processes has its
//!   own channel, i.e. its own control ring). The downstream channel's
//!   ledger keeps the received buffers; when the next process releases one,
//!   its notice is taken in here and dropping our reference sends our own
//!   notice upstream — deallocation notices travel back hop by hop.
//! * [`ForwardMode::Copy`]: each hop copies the bytes into a fresh buffer from its
//!   own [`Pool`] and sends that, dropping the received one at once (the
//!   copy-per-hop alternative the benchmark compares against).
//!
//! The loop drains what is ready with `try_recv`, sends it, and only then
//! flushes deferred wakes and batched notices and reclaims notices from
//! downstream; when nothing is ready it waits (bounded) for the next
//! message, during which the channel layer keeps passing notices on. A
//! relay stops when the upstream disconnects (after forwarding everything
//! that arrived before) and closes the downstream so the close propagates
//! along the chain; when the downstream goes away it closes the upstream,
//! so the source learns of it too.

use std::time::{Duration, Instant};

use thiserror::Error;

use crate::buf::Pool;
use crate::channel::{Channel, NoticeBatch, RecvError, SendErrorKind, TryRecvError};
use crate::msg::Msg;

/// How a forwarding hop passes messages on.
#[derive(Debug, Clone, Copy)]
pub enum ForwardMode<'a> {
    /// Send the received message on unchanged (zero copy).
    ByRef,
    /// Copy each message into a buffer from this pool and send the copy.
    Copy(&'a Pool),
}

/// Tuning of a relay loop.
#[derive(Debug, Clone)]
pub struct ForwardConfig {
    /// Messages taken with `try_recv` before wakes and notices are flushed.
    pub batch: usize,
    /// Longest single wait for the next message; after it the relay
    /// reclaims, flushes and checks the downstream peer.
    pub idle_wait: Duration,
    /// Stop after this long without any message (`None`: only on close).
    pub max_idle: Option<Duration>,
    /// Bound on waiting for a buffer from the copy pool.
    pub alloc_timeout: Duration,
    /// How often a busy relay checks that the downstream peer is alive
    /// (a dead peer is otherwise only noticed once its ring is full).
    pub liveness_interval: Duration,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        Self {
            batch: 64,
            idle_wait: Duration::from_millis(20),
            max_idle: None,
            alloc_timeout: Duration::from_secs(10),
            liveness_interval: crate::wait::LIVENESS,
        }
    }
}

/// Why a relay stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardEnd {
    /// The upstream disconnected (closed its end or died) and everything it
    /// sent was forwarded.
    UpstreamDisconnected,
    /// The downstream disconnected (closed its end or died); the upstream
    /// was closed in turn.
    DownstreamDisconnected,
    /// No message for `max_idle`.
    Idle,
    /// A channel reported a broken protocol (corrupt ring) or a failure
    /// the relay cannot continue after; both channels were closed.
    Failed(ForwardFailure),
}

/// The failure that stopped a relay ([`ForwardEnd::Failed`]): the error of
/// the channel that reported it, typed.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardFailure {
    /// Receiving from the upstream failed (it corrupted the shared ring).
    #[error("upstream: {0}")]
    Upstream(RecvError),
    /// Sending to the downstream failed (it corrupted the shared ring).
    #[error("downstream: {0}")]
    Downstream(SendErrorKind),
}

impl ForwardFailure {
    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<crate::Errno> {
        match self {
            Self::Upstream(_) => None,
            Self::Downstream(e) => e.errno(),
        }
    }

    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> crate::error::ErrorKind {
        match self {
            Self::Upstream(e) => e.kind(),
            Self::Downstream(e) => e.kind(),
        }
    }
}

impl std::fmt::Display for ForwardEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ForwardEnd::UpstreamDisconnected => f.write_str("upstream-disconnected"),
            ForwardEnd::DownstreamDisconnected => f.write_str("downstream-disconnected"),
            ForwardEnd::Idle => f.write_str("idle"),
            ForwardEnd::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}

/// Counters of a relay. Built only by [`run`]; more counters may be added.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForwardStats {
    /// Messages forwarded.
    pub msgs: u64,
    /// Payload bytes forwarded.
    pub bytes: u64,
    /// Messages that could not be forwarded (malformed input, a copy
    /// buffer that could not be had, a send that timed out) — dropped.
    pub errors: u64,
    /// Batches (rounds of draining what was ready).
    pub batches: u64,
}

/// The result of [`run`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ForwardReport {
    /// Counters.
    pub stats: ForwardStats,
    /// Why the relay stopped.
    pub end: ForwardEnd,
}

enum Step {
    Sent,
    Dropped,
    Stop(ForwardEnd),
}

/// Forward from `up` to `down` until one of them closes (see the module
/// documentation). On return the downstream has been closed if the
/// upstream ended, and the upstream if the downstream ended. Drop both
/// channels soon after: a neighbour that only sends (a source) learns of
/// the close when the socket hangs up.
pub fn run(
    up: &Channel,
    down: &Channel,
    mode: ForwardMode<'_>,
    cfg: &ForwardConfig,
) -> ForwardReport {
    let mut stats = ForwardStats::default();
    let batch = cfg.batch.max(1);
    let mut last_msg = Instant::now();
    let mut last_check = Instant::now();
    let end = 'outer: loop {
        // Drain what is ready. The notices this round owes upstream (for
        // buffers downstream released meanwhile) go out in one publish,
        // when the round's batch ends.
        let mut n = 0;
        let mut upstream_done = false;
        let round = NoticeBatch::enter();
        while n < batch {
            match up.try_recv() {
                Ok(m) => match forward(down, m, mode, cfg, &mut stats) {
                    Step::Sent => n += 1,
                    Step::Dropped => {}
                    Step::Stop(e) => break 'outer e,
                },
                Err(TryRecvError::WouldBlock) => break,
                Err(TryRecvError::Disconnected) => {
                    upstream_done = true;
                    break;
                }
                Err(TryRecvError::Malformed(_)) => stats.errors += 1,
                Err(TryRecvError::Corrupt) => {
                    break 'outer ForwardEnd::Failed(ForwardFailure::Upstream(RecvError::Corrupt))
                }
            }
        }
        if n > 0 {
            stats.batches += 1;
            last_msg = Instant::now();
            // Wake the next hop for deferred messages, take in its notices
            // (dropping our references) and pass ours on upstream.
            down.flush();
            down.reclaim();
        }
        drop(round);
        if n > 0 {
            up.flush();
        }
        if upstream_done {
            break ForwardEnd::UpstreamDisconnected;
        }
        if n > 0 && last_check.elapsed() < cfg.liveness_interval {
            continue;
        }
        last_check = Instant::now();
        if !down.check_peer() {
            break ForwardEnd::DownstreamDisconnected;
        }
        if n > 0 {
            continue;
        }
        // Nothing was ready: wait (bounded) for the next message. While
        // waiting, the channel layer takes in and passes on the notices of
        // every channel of the process.
        match up.recv_timeout(cfg.idle_wait) {
            Ok(m) => {
                last_msg = Instant::now();
                if let Step::Stop(e) = forward(down, m, mode, cfg, &mut stats) {
                    break e;
                }
            }
            Err(RecvError::TimedOut) => {
                down.reclaim();
                up.flush();
                if cfg.max_idle.is_some_and(|m| last_msg.elapsed() >= m) {
                    break ForwardEnd::Idle;
                }
            }
            Err(RecvError::Disconnected) => break ForwardEnd::UpstreamDisconnected,
            Err(RecvError::Malformed(_)) => stats.errors += 1,
            Err(e @ RecvError::Corrupt) => break ForwardEnd::Failed(ForwardFailure::Upstream(e)),
        }
    };
    match end {
        ForwardEnd::DownstreamDisconnected => up.close(),
        _ => {
            // Wake the next hop for anything deferred, then tell it we are
            // done: it receives what is in its ring, then `Disconnected`.
            down.flush();
            up.flush();
            down.close();
            if matches!(end, ForwardEnd::Failed(_)) {
                up.close();
            }
        }
    }
    ForwardReport { stats, end }
}

fn forward(
    down: &Channel,
    m: Msg,
    mode: ForwardMode<'_>,
    cfg: &ForwardConfig,
    stats: &mut ForwardStats,
) -> Step {
    let len = m.len() as u64;
    let out = match mode {
        ForwardMode::ByRef => m,
        ForwardMode::Copy(pool) => match copy_into(pool, &m, cfg.alloc_timeout) {
            Some(c) => {
                drop(m); // our notice for the received buffer goes upstream
                c
            }
            None => {
                stats.errors += 1;
                return Step::Dropped;
            }
        },
    };
    // A failed send gives the message back; it is dropped here (its
    // notice goes upstream) whatever the reason.
    // The loop takes in downstream's notices at the end of each round.
    match down.send_in_round(out).map_err(SendErrorKind::from) {
        Ok(()) => {
            stats.msgs += 1;
            stats.bytes += len;
            Step::Sent
        }
        Err(SendErrorKind::Disconnected) => Step::Stop(ForwardEnd::DownstreamDisconnected),
        Err(e @ SendErrorKind::Corrupt) => {
            Step::Stop(ForwardEnd::Failed(ForwardFailure::Downstream(e)))
        }
        // Anything else (ring full past the send timeout, too many slices
        // held by the peer, a hold-time expiry, ...): a downstream that
        // neither consumes nor goes away; drop this message, keep going.
        Err(_) => {
            stats.errors += 1;
            if down.check_peer() {
                Step::Dropped
            } else {
                Step::Stop(ForwardEnd::DownstreamDisconnected)
            }
        }
    }
}

/// `m`'s bytes in one fresh buffer from `pool` (`None` if none could be
/// had within `timeout`, or the message is larger than the pool allows).
pub fn copy_into(pool: &Pool, m: &Msg, timeout: Duration) -> Option<Msg> {
    let len = m.len();
    if len == 0 {
        return None;
    }
    let mut b = pool.alloc_timeout(len, timeout).ok()?;
    b.truncate(len);
    if m.read_at(0, b.as_mut_slice()) != len {
        return None;
    }
    b.freeze().ok().map(Msg::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::PoolConfig;
    use crate::channel::ChannelConfig;

    fn pool(name: &str) -> Pool {
        Pool::new(PoolConfig {
            chunk_size: 1 << 20,
            max_chunks: 2,
            populate: false,
            ..PoolConfig::named(name)
        })
    }

    fn msg(p: &Pool, bytes: &[u8]) -> Msg {
        let mut b = p.try_alloc(bytes.len()).unwrap();
        b.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
        b.truncate(bytes.len());
        Msg::from(b.freeze().unwrap())
    }

    fn chain(copy: bool) {
        let (a, r_up) = Channel::pair(ChannelConfig::default()).unwrap();
        let (r_down, c) = Channel::pair(ChannelConfig::default()).unwrap();
        let src = pool("relay-src");
        let t = std::thread::spawn(move || {
            let hop = pool("relay-hop");
            let mode = if copy {
                ForwardMode::Copy(&hop)
            } else {
                ForwardMode::ByRef
            };
            let r = run(&r_up, &r_down, mode, &ForwardConfig::default());
            drop((r_up, r_down));
            r
        });
        for i in 0..200u32 {
            a.send(msg(&src, &i.to_le_bytes().repeat(1 + i as usize % 7)))
                .unwrap();
        }
        for i in 0..200u32 {
            let m = c.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!(m.to_vec(), i.to_le_bytes().repeat(1 + i as usize % 7));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while src.stats().buffers_in_use > 0 && Instant::now() < deadline {
            a.reclaim();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(src.stats().buffers_in_use, 0, "every buffer came back");
        assert!(a.check_peer(), "released by notices, not by a close");
        a.close();
        let r = t.join().unwrap();
        assert_eq!(r.end, ForwardEnd::UpstreamDisconnected);
        assert_eq!(r.stats.msgs, 200);
        assert_eq!(r.stats.errors, 0);
        assert!(matches!(
            c.recv_timeout(Duration::from_secs(10)),
            Err(RecvError::Disconnected)
        ));
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn by_reference_forwards_and_releases_upstream() {
        chain(false);
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn copy_per_hop_forwards_and_releases_upstream() {
        chain(true);
    }

    #[test]
    #[cfg_attr(miri, ignore = "channel: memfd segment, SEQPACKET socket; not in Miri")]
    fn downstream_close_closes_upstream() {
        let (a, r_up) = Channel::pair(ChannelConfig::default()).unwrap();
        let (r_down, c) = Channel::pair(ChannelConfig::default()).unwrap();
        let t = std::thread::spawn(move || {
            run(
                &r_up,
                &r_down,
                ForwardMode::ByRef,
                &ForwardConfig::default(),
            )
        });
        drop(c);
        let r = t.join().unwrap();
        assert_eq!(r.end, ForwardEnd::DownstreamDisconnected);
        let src = pool("relay-dc");
        let e = a
            .send_timeout(msg(&src, b"x"), Duration::from_secs(5))
            .unwrap_err();
        assert!(e.is_disconnected());
        assert_eq!(e.into_inner().to_vec(), b"x");
    }
}
