//! Parts (b) and (e): forwarding chains (the thesis's Table 6.2) and futex
//! calls per message under sustained load.
//!
//! A source process, `k` relay processes running [`zcio::forward::run`] and
//! a sink process, connected by channels (one per adjacent pair). The
//! source first sends messages one at a time (the sink acknowledges each
//! over a pipe, outside the measurement) carrying a `CLOCK_MONOTONIC` and a
//! time-stamp-counter stamp: the sink's one-way latency. Then it streams
//! messages as fast as the chain takes them: the sink's rate from its
//! first to its last message is the throughput.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use zcio::forward::{self, ForwardConfig, ForwardEnd, ForwardMode};
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, PoolConfig};

use super::stats::Welford;
use super::{collect, left, sample, spawn, Options, Row, Sample, SockPath, Task};
use crate::affinity::cpu_for;
use crate::child::Group;
use crate::clock::{cycles, mono_ns};

/// Bytes of the header every chain message starts with: stamp (ns),
/// sequence number, stamp (cycles).
pub const HEADER: usize = 24;

/// How (b) was measured.
pub fn note(opts: &Options) -> String {
    format!(
        "(b) source → k relay processes (zcio::forward, by reference or copying into a per-hop \
         pool) → sink, a channel per adjacent pair, {} B messages; latency: one message in \
         flight ({} after {} warm-up; the sink acknowledges each over a pipe, unmeasured), \
         one-way from the source's CLOCK_MONOTONIC stamp to the sink; throughput: a stream \
         of {} messages timed at the sink; ratio = msgs/ms ÷ the direct path (0 \
         intermediates, the same for both variants)",
        opts.chain_msg_size, opts.chain_latency_msgs, opts.warmup, opts.chain_stream_msgs
    )
}

fn cfg() -> ChannelConfig {
    ChannelConfig {
        connect_timeout: Duration::from_secs(10),
        ..ChannelConfig::default()
    }
}

fn pool(name: &str) -> Pool {
    Pool::new(PoolConfig {
        chunk_size: 4 << 20,
        max_chunks: 4,
        ..PoolConfig::named(name)
    })
}

/// What one chain run measured.
struct Run {
    source: Sample,
    sink: Sample,
}

fn run_chain(copy: bool, k: u32, lat: u64, stream: u64, opts: &Options) -> Result<Run, String> {
    let socks: Vec<SockPath> = (0..=k)
        .map(|i| SockPath::new("proxy", &format!("chain{i}")))
        .collect();
    let (ack_r, ack_w, _) = crate::fds::pipe_pair(Some(4096))?;
    let all = [&ack_r, &ack_w];
    let mut group = Group::new();
    let warmup = if lat == 0 { 0 } else { opts.warmup.min(lat) };
    let src = Task::ChainSource {
        path: socks[0].0.clone(),
        ack_fd: ack_r.as_raw_fd(),
        warmup,
        latency_msgs: lat,
        stream_msgs: stream,
        size: opts.chain_msg_size,
    };
    group.push(
        spawn(src, Some(cpu_for(0)), opts, &[&ack_r], &all)?,
        "source",
    );
    for i in 0..k as usize {
        let r = Task::ChainRelay {
            up: socks[i].0.clone(),
            down: socks[i + 1].0.clone(),
            copy,
        };
        group.push(spawn(r, None, opts, &[], &all)?, format!("relay {i}"));
    }
    let sink = Task::ChainSink {
        path: socks[k as usize].0.clone(),
        ack_fd: ack_w.as_raw_fd(),
        warmup,
        latency_msgs: lat,
        stream_msgs: stream,
    };
    group.push(
        spawn(sink, Some(cpu_for(1)), opts, &[&ack_w], &all)?,
        "sink",
    );
    drop((ack_r, ack_w));
    let samples = collect(group, opts)?;
    let total = warmup + lat + stream;
    for i in 0..k as usize {
        let r = sample(&samples, 1 + i, "relay")?;
        if r.msgs != total || r.check != 0 {
            return Err(format!(
                "relay {i} forwarded {} of {total} messages ({} errors)",
                r.msgs, r.check
            ));
        }
    }
    let sink = sample(&samples, k as usize + 1, "sink")?;
    if sink.check != 0 {
        return Err(format!("sink saw {} messages out of order", sink.check));
    }
    Ok(Run {
        source: sample(&samples, 0, "source")?,
        sink,
    })
}

fn per_ms(s: &Sample) -> f64 {
    s.msgs as f64 / (s.elapsed_ns.max(1) as f64 / 1e6)
}

/// Part (b): one chain.
pub fn measure(copy: bool, k: u32, opts: &Options) -> Result<Row, String> {
    let r = run_chain(
        copy,
        k,
        opts.chain_latency_msgs,
        opts.chain_stream_msgs,
        opts,
    )?;
    let mut row = Row::new("b", if copy { "chain-copy" } else { "chain" });
    row.intermediates = Some(k);
    row.size = Some(opts.chain_msg_size as u64);
    row.latency_ns = Some(r.sink.mean_ns);
    row.stddev_ns = Some(r.sink.stddev_ns);
    row.cycles = Some(r.sink.mean_cycles);
    row.msgs_per_ms = Some(per_ms(&r.sink));
    row.count = r.sink.msgs + 1;
    Ok(row)
}

/// Part (e): the direct path under sustained load.
pub fn measure_futex(opts: &Options) -> Result<Row, String> {
    let r = run_chain(false, 0, 0, opts.futex_msgs, opts)?;
    let mut row = Row::new("e", "futex");
    row.intermediates = Some(0);
    row.size = Some(opts.chain_msg_size as u64);
    row.msgs_per_ms = Some(per_ms(&r.sink));
    row.futex_per_msg = Some((r.source.futex + r.sink.futex) as f64 / opts.futex_msgs as f64);
    row.futex_calls = Some(r.source.futex + r.sink.futex);
    row.count = opts.futex_msgs;
    Ok(row)
}

fn futex_calls(ch: &Channel) -> u64 {
    let s = ch.stats();
    s.wakes + s.sleeps
}

fn connect_retry(path: &str, deadline: Instant) -> Result<Channel, String> {
    loop {
        match Channel::connect(path, cfg()) {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() >= deadline => return Err(format!("connect {path}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

fn send_one(
    ch: &Channel,
    pool: &Pool,
    size: usize,
    seq: u64,
    deadline: Instant,
) -> Result<(), String> {
    let mut b = pool
        .alloc_timeout(size, left(deadline))
        .map_err(|e| format!("alloc: {e}"))?;
    b.truncate(size);
    let d = b.as_mut_slice();
    d[8..16].copy_from_slice(&seq.to_le_bytes());
    d[16..24].copy_from_slice(&cycles().to_le_bytes());
    d[0..8].copy_from_slice(&mono_ns().to_le_bytes());
    let m = Msg::from(b.freeze().map_err(|e| e.to_string())?);
    ch.send_timeout(m, left(deadline))
        .map_err(|e| format!("send {seq}: {e}"))
}

fn word(h: &[u8], at: usize) -> u64 {
    h.get(at..at + 8)
        .and_then(|w| w.try_into().ok())
        .map_or(u64::MAX, u64::from_le_bytes)
}

/// The source: latency phase, then the stream.
#[allow(clippy::too_many_arguments)]
pub fn source(
    path: &str,
    ack_fd: RawFd,
    warmup: u64,
    lat: u64,
    stream: u64,
    size: usize,
    deadline: Instant,
) -> Result<Sample, String> {
    let l = Listener::bind(path, cfg()).map_err(|e| format!("bind {path}: {e}"))?;
    let ch = l
        .accept_timeout(left(deadline))
        .map_err(|e| format!("accept: {e}"))?;
    let mut ack = crate::fds::take_fd(ack_fd)?;
    let pool = pool("chain-src");
    let mut b = [0u8; 1];
    let mut seq = 0;
    for _ in 0..warmup + lat {
        send_one(&ch, &pool, size, seq, deadline)?;
        seq += 1;
        ack.read_exact(&mut b).map_err(|e| format!("ack: {e}"))?;
    }
    let f0 = futex_calls(&ch);
    for _ in 0..stream {
        send_one(&ch, &pool, size, seq, deadline)?;
        seq += 1;
    }
    ch.flush();
    // The sink says when it has everything: count our futex calls up to
    // then (we may be waiting for room or buffers until the end).
    ack.read_exact(&mut b)
        .map_err(|e| format!("end ack: {e}"))?;
    let futex = futex_calls(&ch) - f0;
    // Do not leave while the chain still reads our buffers.
    let end = Instant::now() + Duration::from_secs(5);
    while ch.stats().held_by_peer > 0 && ch.check_peer() && Instant::now() < end {
        if ch.reclaim() == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    Ok(Sample {
        msgs: stream,
        futex,
        ..Sample::default()
    })
}

/// One relay process.
pub fn relay_side(up: &str, down: &str, copy: bool, deadline: Instant) -> Result<Sample, String> {
    let dl = Listener::bind(down, cfg()).map_err(|e| format!("bind {down}: {e}"))?;
    let upc = connect_retry(up, deadline)?;
    let downc = dl
        .accept_timeout(left(deadline))
        .map_err(|e| format!("accept: {e}"))?;
    let p = pool("chain-hop");
    let mode = if copy {
        ForwardMode::Copy(&p)
    } else {
        ForwardMode::ByRef
    };
    let rc = ForwardConfig {
        max_idle: Some(left(deadline)),
        ..ForwardConfig::default()
    };
    let r = forward::run(&upc, &downc, mode, &rc);
    drop((upc, downc));
    match r.end {
        ForwardEnd::UpstreamDisconnected => Ok(Sample {
            msgs: r.stats.msgs,
            check: r.stats.errors,
            ..Sample::default()
        }),
        e => Err(format!("relay ended: {e} after {} messages", r.stats.msgs)),
    }
}

/// The sink: latency phase (acknowledging each message), then the stream.
pub fn sink(
    path: &str,
    ack_fd: RawFd,
    warmup: u64,
    lat: u64,
    stream: u64,
    deadline: Instant,
) -> Result<Sample, String> {
    let ch = connect_retry(path, deadline)?;
    let mut ack = crate::fds::take_fd(ack_fd)?;
    let (mut ns, mut cy) = (Welford::default(), Welford::default());
    let mut bad = 0u64;
    let mut seq = 0u64;
    let mut hdr = [0u8; HEADER];
    let recv = |seq: u64, hdr: &mut [u8; HEADER]| -> Result<(), String> {
        let m = ch
            .recv_timeout(left(deadline))
            .map_err(|e| format!("recv {seq}: {e}"))?;
        crate::touch::msg_prefix(&m, hdr);
        Ok(())
    };
    for i in 0..warmup + lat {
        recv(seq, &mut hdr)?;
        let (t, c) = (mono_ns(), cycles());
        if i >= warmup {
            ns.add(t.saturating_sub(word(&hdr, 0)) as f64);
            cy.add(c.saturating_sub(word(&hdr, 16)) as f64);
        }
        bad += u64::from(word(&hdr, 8) != seq);
        seq += 1;
        ack.write_all(&[1]).map_err(|e| format!("ack: {e}"))?;
    }
    let f0 = {
        let s = ch.stats();
        s.wakes + s.sleeps
    };
    let mut first = 0;
    for j in 0..stream {
        recv(seq, &mut hdr)?;
        if j == 0 {
            first = mono_ns();
        }
        bad += u64::from(word(&hdr, 8) != seq);
        seq += 1;
    }
    let last = mono_ns();
    let f = {
        let s = ch.stats();
        s.wakes + s.sleeps
    };
    ack.write_all(&[2]).map_err(|e| format!("end ack: {e}"))?;
    // Leave only once the close has come down the chain, so no relay sees
    // its downstream go first.
    match ch.recv_timeout(left(deadline)) {
        Err(zcio::RecvError::Disconnected) => {}
        Ok(_) => return Err("a message after the end of the stream".into()),
        Err(e) => return Err(format!("waiting for the close: {e}")),
    }
    Ok(Sample {
        n: ns.count(),
        mean_ns: ns.mean(),
        stddev_ns: ns.stddev(),
        mean_cycles: cy.mean(),
        elapsed_ns: last.saturating_sub(first),
        msgs: stream.saturating_sub(1),
        futex: f - f0,
        check: bad,
        ..Sample::default()
    })
}
