//! zcio sides of the transfer benchmark: originator, forwarder, receiver.

use std::time::{Duration, Instant};

use zcio::Uncached;
use zcio::{Channel, ChannelConfig, LaneConfig, Listener, Msg, Pool, PoolConfig};

use super::{AllocKind, Measured};
use crate::cpu::Window;
use crate::pages::write_pages;

pub(crate) fn connect_retry(
    path: &str,
    cfg: &ChannelConfig,
    timeout: Duration,
) -> Result<Channel, String> {
    let start = Instant::now();
    loop {
        match Channel::connect(path, cfg.clone()) {
            Ok(c) => return Ok(c),
            Err(e) if start.elapsed() > timeout => return Err(format!("connect {path}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// Messages the originator may have in flight per hop: the same 6 buffers
/// the iceoryx2 service gets (subscriber buffer 2, 2 borrowed, 2 loaned), so
/// both run with the same working set.
pub const IN_FLIGHT: usize = 6;

/// The originator's path pool for a path of `hops` channels: two chunks,
/// [`IN_FLIGHT`] messages per hop in all, created during the warm-up.
pub fn bench_pool_config(size: usize, hops: usize) -> PoolConfig {
    let in_flight = IN_FLIGHT * hops;
    let chunk = size.div_ceil(4096) * 4096 * (in_flight / 2);
    PoolConfig {
        chunk_size: chunk,
        max_chunks: 2,
        quick_list_cap: in_flight,
        ..PoolConfig::named("bench")
    }
}

/// Messages the bench pool holds at most (the warm-up must exceed it).
pub fn bench_pool_capacity(size: usize) -> u64 {
    let c = bench_pool_config(size, 2);
    (c.chunk_size / size.max(1) * c.max_chunks) as u64
}

/// Wait (bounded) until the peer has released everything we sent it, so
/// the process does not exit while the peer still reads our buffers.
fn wait_released(chan: &Channel, timeout: Duration) {
    let start = Instant::now();
    while chan.stats().held_by_peer > 0 && !chan.is_disconnected() && start.elapsed() < timeout {
        if chan.reclaim() == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn channel_config() -> ChannelConfig {
    ChannelConfig::default()
}

/// Originator: allocate, write a word per page, freeze, send; its CPU time
/// over the messages after `warmup`.
pub fn send(
    path: &str,
    alloc: AllocKind,
    size: usize,
    warmup: u64,
    count: u64,
    timeout: Duration,
) -> Result<Measured, String> {
    let total = warmup + count;
    let mut cpu = Window::default();
    let cfg = channel_config();
    let chan = connect_retry(path, &cfg, timeout)?;
    let hops = if alloc == AllocKind::CachedVolatilePath2 {
        2
    } else {
        1
    };
    let pool = Pool::new(bench_pool_config(size, hops));
    let uncached = Uncached::new("bench", true);
    for seq in 0..total {
        if seq == warmup {
            cpu.start();
        }
        let mut buf = match alloc {
            AllocKind::CachedVolatile | AllocKind::CachedVolatilePath2 => {
                pool.alloc_timeout(size, timeout)
            }
            AllocKind::CachedSecured => pool.alloc_secured(size),
            AllocKind::UncachedVolatile => uncached.alloc(size),
            AllocKind::UncachedSecured => uncached.alloc_secured(size),
        }
        .map_err(|e| format!("alloc {size}: {e}"))?;
        write_pages(buf.as_mut_slice(), seq);
        let frozen = buf.freeze().map_err(|e| e.to_string())?;
        chan.send_timeout(Msg::from(frozen), timeout)
            .map_err(|e| format!("send: {e}"))?;
    }
    let cpu_ns = cpu.elapsed_ns();
    wait_released(&chan, timeout);
    Ok(Measured::cpu_only(count, cpu_ns))
}

/// Receiver: receive, read a word per page, check the sequence, drop.
pub fn recv(
    path: &str,
    expect_secured: bool,
    warmup: u64,
    count: u64,
    timeout: Duration,
) -> Result<Measured, String> {
    let cfg = channel_config();
    let listener = Listener::bind(path, cfg).map_err(|e| format!("bind {path}: {e}"))?;
    let chan = listener
        .accept_timeout(timeout)
        .map_err(|e| format!("accept: {e}"))?;
    let mut start = Instant::now();
    let mut cpu = Window::default();
    for seq in 0..warmup + count {
        if seq == warmup {
            start = Instant::now();
            cpu.start();
        }
        let msg = chan
            .recv_timeout(timeout)
            .map_err(|e| format!("recv #{seq}: {e}"))?;
        check(&msg, seq, expect_secured)?;
        drop(msg);
    }
    Ok(received(start, count, &chan, &cpu))
}

/// Lane originator: loan a slot, write a word per page, send; its CPU
/// time over the messages after `warmup`. As many slots as the path pool
/// has buffers in flight.
pub fn lane_send(
    path: &str,
    size: usize,
    warmup: u64,
    count: u64,
    timeout: Duration,
) -> Result<Measured, String> {
    let chan = connect_retry(path, &channel_config(), timeout)?;
    let mut tx = chan
        .open_lane(&LaneConfig {
            slots: IN_FLIGHT as u32,
            slot_size: size,
        })
        .map_err(|e| format!("open lane: {e}"))?;
    let mut cpu = Window::default();
    for seq in 0..warmup + count {
        if seq == warmup {
            cpu.start();
        }
        let mut loan = tx
            .loan_timeout(timeout)
            .map_err(|e| format!("loan #{seq}: {e}"))?;
        write_pages(loan.as_mut_slice(), seq);
        loan.send(size).map_err(|e| format!("send #{seq}: {e}"))?;
    }
    let cpu_ns = cpu.elapsed_ns();
    // Keep the slots mapped until the receiver has read everything.
    let start = Instant::now();
    while tx.stats().in_flight > 0 && start.elapsed() < timeout {
        match tx.loan_timeout(Duration::from_millis(10)) {
            Ok(l) => drop(l),
            Err(zcio::LaneError::Disconnected) => break,
            Err(_) => {}
        }
    }
    Ok(Measured::cpu_only(count, cpu_ns))
}

/// Lane receiver: receive, read a word per page in place, check the
/// sequence, release.
pub fn lane_recv(
    path: &str,
    size: usize,
    warmup: u64,
    count: u64,
    timeout: Duration,
) -> Result<Measured, String> {
    let listener =
        Listener::bind(path, channel_config()).map_err(|e| format!("bind {path}: {e}"))?;
    let chan = listener
        .accept_timeout(timeout)
        .map_err(|e| format!("accept: {e}"))?;
    let mut rx = chan
        .accept_lane_timeout(timeout)
        .map_err(|e| format!("accept lane: {e}"))?;
    let mut start = Instant::now();
    let mut cpu = Window::default();
    for seq in 0..warmup + count {
        if seq == warmup {
            start = Instant::now();
            cpu.start();
        }
        let m = rx
            .recv_timeout(timeout)
            .map_err(|e| format!("recv #{seq}: {e}"))?;
        let (first, _) = crate::pages::read_pages_view(m.view());
        if first != seq || m.len() != size {
            return Err(format!(
                "message {seq}: first word {first}, {} bytes",
                m.len()
            ));
        }
    }
    Ok(received(start, count, &chan, &cpu))
}

/// What a receiver measured: `count` messages since `start`, its CPU
/// window, and the channel's wake count.
fn received(start: Instant, count: u64, chan: &Channel, cpu: &Window) -> Measured {
    Measured {
        elapsed_ns: start.elapsed().as_nanos() as u64,
        msgs: count,
        wakes: chan.stats().wakes,
        cpu_ns: cpu.elapsed_ns(),
        latency: None,
    }
}

fn check(msg: &Msg, seq: u64, expect_secured: bool) -> Result<(), String> {
    let (first, _) = crate::touch::msg_pages(msg);
    if first != Some(seq) {
        return Err(format!("message {seq}: first word {first:?}"));
    }
    if expect_secured && !msg.is_secured() {
        return Err(format!("message {seq}: expected a kernel-sealed buffer"));
    }
    Ok(())
}

/// Forwarder: pass every message on without touching payload; its CPU
/// time over the messages after `warmup`.
pub fn forward(
    listen: &str,
    connect: &str,
    warmup: u64,
    count: u64,
    timeout: Duration,
) -> Result<Measured, String> {
    let total = warmup + count;
    let mut cpu = Window::default();
    let cfg = channel_config();
    let out = connect_retry(connect, &cfg, timeout)?;
    let listener = Listener::bind(listen, cfg).map_err(|e| format!("bind {listen}: {e}"))?;
    let input = listener
        .accept_timeout(timeout)
        .map_err(|e| format!("accept: {e}"))?;
    for seq in 0..total {
        if seq == warmup {
            cpu.start();
        }
        let msg = input
            .recv_timeout(timeout)
            .map_err(|e| format!("recv #{seq}: {e}"))?;
        out.send_timeout(msg, timeout)
            .map_err(|e| format!("forward #{seq}: {e}"))?;
    }
    let cpu_ns = cpu.elapsed_ns();
    wait_released(&out, timeout);
    Ok(Measured::cpu_only(count, cpu_ns))
}
