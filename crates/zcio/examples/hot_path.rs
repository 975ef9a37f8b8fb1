//! The software cost of one channel message, with no cache line crossing
//! between CPUs: both ends of one channel live on this one thread, which
//! plays ping-pong with itself (allocate → fill → freeze → send → receive →
//! read → drop, each way). What a cross-process ping-pong measures beyond
//! this is the cost of the cache lines that cross (see "Where the time
//! goes" in docs/transfer.md).
//!
//! Run: `cargo run --release -p zcio --example hot_path [ROUNDS]`, pinned
//! to one CPU for steadier figures (`taskset -c 0 …`). It prints the best
//! and the median round: the VMs we measure on swing by tens of percent
//! from run to run, so compare builds by interleaving runs of each.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use zcio::{Channel, ChannelConfig, Listener, Msg, Pool, PoolConfig};

/// Heap allocations made by this process (the steady state should make
/// none per message).
static ALLOCS: AtomicU64 = AtomicU64::new(0);

struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is a side effect only.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Round trips per round.
const PER_ROUND: u64 = 200_000;

fn pool(name: &str) -> Pool {
    // As the cross-process ping-pong of `zcio-bench transfer` does: a small
    // pool, so buffers come back through the channel's notices.
    Pool::new(PoolConfig {
        chunk_size: 3 * 4096,
        max_chunks: 2,
        quick_list_cap: 6,
        ..PoolConfig::named(name)
    })
}

fn send(ch: &Channel, pool: &Pool, v: u64, t: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let mut b = pool.alloc_timeout(64, t)?;
    b.as_mut_slice()[..8].copy_from_slice(&v.to_le_bytes());
    ch.send_timeout(Msg::from(b.freeze()?), t)?;
    Ok(())
}

fn recv(ch: &Channel, want: u64, t: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let m = ch.recv_timeout(t)?;
    let mut word = [0u8; 8];
    if m.read_at(0, &mut word) != 8 || u64::from_le_bytes(word) != want {
        return Err(format!("expected {want}, got {}", u64::from_le_bytes(word)).into());
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: usize = match std::env::args().nth(1) {
        Some(a) => a
            .parse()
            .map_err(|_| format!("ROUNDS: a number, not {a:?}"))?,
        None => 15,
    };
    let dir = std::env::temp_dir().join(format!("zcio-hot-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (client, server) = pair(&dir, "sock")?;
    let (pc, ps) = (pool("hot-path-c"), pool("hot-path-s"));
    let t = Duration::from_secs(10);
    let mut per_msg = Vec::with_capacity(rounds);
    // Warm up (pools, spare allocations, scratch vectors), then count.
    for i in 0..1000 {
        send(&client, &pc, i, t)?;
        recv(&server, i, t)?;
        send(&server, &ps, !i, t)?;
        recv(&client, !i, t)?;
    }
    let allocs_before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..rounds.max(1) {
        let t0 = Instant::now();
        for i in 0..PER_ROUND {
            send(&client, &pc, i, t)?;
            recv(&server, i, t)?;
            send(&server, &ps, !i, t)?;
            recv(&client, !i, t)?;
        }
        per_msg.push(t0.elapsed().as_nanos() as f64 / (2 * PER_ROUND) as f64);
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - allocs_before;
    per_msg.sort_by(f64::total_cmp);
    let msgs = 2 * PER_ROUND * per_msg.len() as u64;
    println!(
        "one channel message, software only (one thread): best {:.0} ns, median {:.0} ns ({} rounds of {} messages); {:.3} heap allocations per message",
        per_msg[0],
        per_msg[per_msg.len() / 2],
        per_msg.len(),
        2 * PER_ROUND,
        allocs as f64 / msgs as f64
    );
    relay_hop(&dir, rounds, &pc)?;
    drop((client, server));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Messages per batch in the relay measurement: a stream, as a forwarding
/// chain sees it (the relay takes what is ready, then passes it on).
const RELAY_BATCH: u64 = 16;

/// A channel pair through a listener at `dir/name`.
fn pair(
    dir: &std::path::Path,
    name: &str,
) -> Result<(Channel, Channel), Box<dyn std::error::Error>> {
    let path = dir.join(name);
    let listener = Listener::bind(&path, ChannelConfig::default())?;
    let p2 = path.clone();
    let connector = std::thread::spawn(move || Channel::connect(&p2, ChannelConfig::default()));
    let server = listener.accept()?;
    let client = connector
        .join()
        .map_err(|_| "connector thread panicked")??;
    Ok((client, server))
}

/// The software cost of a forwarding hop: source → relay → sink on one
/// thread, the relay sending each received message on by reference (as
/// `zcio::forward` does); per message, minus nothing: compare with the
/// one-channel figure above to see what the hop adds.
fn relay_hop(
    dir: &std::path::Path,
    rounds: usize,
    pool: &Pool,
) -> Result<(), Box<dyn std::error::Error>> {
    let (src, relay_up) = pair(dir, "up")?;
    let (relay_down, sink) = pair(dir, "down")?;
    let t = Duration::from_secs(10);
    let batch = |v0: u64| -> Result<(), Box<dyn std::error::Error>> {
        for i in 0..RELAY_BATCH {
            send(&src, pool, v0 + i, t)?;
        }
        for _ in 0..RELAY_BATCH {
            relay_down.send_timeout(relay_up.recv_timeout(t)?, t)?;
        }
        relay_down.reclaim();
        relay_up.flush();
        for i in 0..RELAY_BATCH {
            recv(&sink, v0 + i, t)?;
        }
        Ok(())
    };
    for b in 0..100 {
        batch(b * RELAY_BATCH)?;
    }
    let mut per_msg = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        let t0 = Instant::now();
        for b in 0..PER_ROUND / RELAY_BATCH {
            batch(b * RELAY_BATCH)?;
        }
        per_msg.push(t0.elapsed().as_nanos() as f64 / PER_ROUND as f64);
    }
    per_msg.sort_by(f64::total_cmp);
    println!(
        "source → relay → sink, software only (one thread, batches of {RELAY_BATCH}): best {:.0} ns, median {:.0} ns per message",
        per_msg[0],
        per_msg[per_msg.len() / 2],
    );
    Ok(())
}
