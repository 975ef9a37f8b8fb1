//! Part (d): receiver-side RFC 1071 checksum with and without the
//! communication primitives (the thesis's Figure 6.4).
//!
//! With: a producer process fills one buffer of 256 messages once and
//! sends slices of it by reference, over and over, without touching the
//! data again; the consumer process receives each message, checksums it
//! and drops it (its deallocation notice lets the producer reuse the
//! slot). Without: one process checksums the same bytes in the same
//! message-sized pieces. Both fold the per-message checksums; the folds
//! must agree.

use std::time::{Duration, Instant};

use zcio::Slice;
use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, PoolConfig};

use super::{collect, left, sample, spawn, Options, Row, Sample, SockPath, Task};
use crate::affinity::cpu_for;
use crate::checksum::{fold_checksum, internet_checksum};
use crate::child::Group;
use crate::clock::mono_ns;

/// Messages per data buffer.
pub const PER_BUFFER: usize = 256;

/// How (d) was measured.
pub fn note(opts: &Options) -> String {
    format!(
        "(d) {} checksummed per point in messages of each size; checksum = a producer process \
         sends slices of one {PER_BUFFER}-message buffer by reference (filled once), the \
         consumer receives, checksums (RFC 1071) and drops each; checksum-local = the same \
         bytes in the same pieces in one process; overhead = local GB/s ÷ channel GB/s − 1; \
         each the median of {REPS} interleaved runs",
        crate::fmt::bytes_u64(opts.cksum_volume)
    )
}

/// Byte `j` of the data buffer.
pub fn data_byte(j: usize) -> u8 {
    (j.wrapping_mul(131) ^ (j >> 9)) as u8
}

fn count(size: usize, volume: u64) -> u64 {
    (volume / size as u64).max(1)
}

/// Runs per variant (interleaved); the median GB/s is kept. A 64 MiB point
/// of the quick run lasts only milliseconds.
pub const REPS: usize = 3;

fn through_channel(size: usize, opts: &Options) -> Result<Sample, String> {
    let sock = SockPath::new("proxy", "cksum");
    let volume = opts.cksum_volume;
    let mut group = Group::new();
    let cons = Task::CksumConsumer {
        path: sock.0.clone(),
        size,
        volume,
    };
    group.push(spawn(cons, Some(cpu_for(1)), opts, &[], &[])?, "consumer");
    let prod = Task::CksumProducer {
        path: sock.0.clone(),
        size,
        volume,
    };
    group.push(spawn(prod, Some(cpu_for(0)), opts, &[], &[])?, "producer");
    sample(&collect(group, opts)?, 0, "consumer")
}

fn in_process(size: usize, opts: &Options) -> Result<Sample, String> {
    let volume = opts.cksum_volume;
    let mut group = Group::new();
    group.push(
        spawn(
            Task::CksumLocal { size, volume },
            Some(cpu_for(1)),
            opts,
            &[],
            &[],
        )?,
        "local checksum",
    );
    sample(&collect(group, opts)?, 0, "local checksum")
}

fn gbs(s: &Sample) -> f64 {
    s.bytes as f64 / s.elapsed_ns.max(1) as f64
}

fn median(mut v: Vec<Sample>) -> Sample {
    v.sort_by(|a, b| gbs(a).total_cmp(&gbs(b)));
    v[v.len() / 2]
}

/// Both variants at one message size.
pub fn measure(size: usize, opts: &Options) -> Result<Vec<Row>, String> {
    let (mut w, mut wo) = (Vec::new(), Vec::new());
    for _ in 0..REPS {
        w.push(through_channel(size, opts)?);
        wo.push(in_process(size, opts)?);
    }
    if let Some(bad) = w.iter().chain(&wo).find(|s| s.check != w[0].check) {
        return Err(format!(
            "checksums differ: {:#x} vs {:#x}",
            w[0].check, bad.check
        ));
    }
    let (with, without) = (median(w), median(wo));
    let mut a = Row::new("d", "checksum");
    a.size = Some(size as u64);
    a.gb_per_s = Some(gbs(&with));
    a.msgs_per_ms = Some(with.msgs as f64 / (with.elapsed_ns.max(1) as f64 / 1e6));
    a.overhead = Some(gbs(&without) / gbs(&with).max(1e-12) - 1.0);
    a.count = with.msgs;
    let mut b = Row::new("d", "checksum-local");
    b.size = Some(size as u64);
    b.gb_per_s = Some(gbs(&without));
    b.count = without.msgs;
    Ok(vec![a, b])
}

/// The producer: slices of one buffer, by reference, `volume` bytes.
pub fn producer(path: &str, size: usize, volume: u64, deadline: Instant) -> Result<(), String> {
    let ch = loop {
        match Channel::connect(path, ChannelConfig::default()) {
            Ok(c) => break c,
            Err(e) if Instant::now() >= deadline => return Err(format!("connect {path}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    };
    let len = size * PER_BUFFER;
    let pool = Pool::new(PoolConfig {
        chunk_size: len,
        max_chunks: 1,
        ..PoolConfig::named("cksum")
    });
    let mut b = pool.try_alloc(len).map_err(|e| e.to_string())?;
    b.truncate(len);
    for (j, x) in b.as_mut_slice().iter_mut().enumerate() {
        *x = data_byte(j);
    }
    let buf = b.freeze().map_err(|e| e.to_string())?;
    ch.share_pool(&pool).map_err(|e| e.to_string())?;
    for i in 0..count(size, volume) {
        let off = (i as usize % PER_BUFFER) * size;
        let s = Slice::new(buf.clone(), off, size).ok_or("slice out of range")?;
        let m = Msg::from_slices([s]).map_err(|e| e.to_string())?;
        ch.send_timeout(m, left(deadline))
            .map_err(|e| format!("send {i}: {e}"))?;
    }
    ch.flush();
    let end = Instant::now() + Duration::from_secs(5);
    while ch.stats().held_by_peer > 0 && ch.check_peer() && Instant::now() < end {
        if ch.reclaim() == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    Ok(())
}

/// The consumer: receive, checksum, drop; timed from the first message.
pub fn consumer(path: &str, size: usize, volume: u64, deadline: Instant) -> Result<Sample, String> {
    let l =
        Listener::bind(path, ChannelConfig::default()).map_err(|e| format!("bind {path}: {e}"))?;
    let ch = l
        .accept_timeout(left(deadline))
        .map_err(|e| format!("accept: {e}"))?;
    let n = count(size, volume);
    let mut fold = 0u64;
    let mut start = 0;
    for i in 0..n {
        let m = ch
            .recv_timeout(left(deadline))
            .map_err(|e| format!("recv {i}: {e}"))?;
        if i == 0 {
            start = mono_ns();
        }
        let c = crate::touch::msg_checksum(&m);
        fold = fold_checksum(fold, c);
    }
    // The first message arrived before the clock started.
    Ok(timed(n - 1, size, start, fold))
}

/// The same checksums in one process.
pub fn local(size: usize, volume: u64) -> Result<Sample, String> {
    let len = size * PER_BUFFER;
    let data: Vec<u8> = (0..len).map(data_byte).collect();
    let n = count(size, volume);
    let mut fold = fold_checksum(0, internet_checksum(&data[..size]));
    let start = mono_ns();
    for i in 1..n {
        let off = (i as usize % PER_BUFFER) * size;
        fold = fold_checksum(fold, internet_checksum(&data[off..off + size]));
    }
    Ok(timed(n - 1, size, start, fold))
}

/// The sample of `msgs` messages of `size` checksummed since `start`.
fn timed(msgs: u64, size: usize, start: u64, fold: u64) -> Sample {
    let end = mono_ns();
    Sample {
        msgs,
        bytes: msgs * size as u64,
        elapsed_ns: end.saturating_sub(start),
        check: fold,
        ..Sample::default()
    }
}
