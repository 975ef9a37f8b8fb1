//! The receive and forward paths allocate nothing per message in steady
//! state: a received slice's core reuses the allocation of one dropped
//! before, and every other per-message structure lives inline or in reused
//! buffers. Counted with a global allocator that counts per thread; not a
//! timing assertion.
//!
//! What may still be allocated grows with the pipeline's depth, never with
//! the message count, and how deep the pipeline gets depends on scheduling
//! (on a loaded machine a stalled consumer lets it fill). So the bound is
//! the deepest the pipeline can get, and the message count is large enough
//! that an allocation in one message of a hundred would exceed it. A thread
//! also takes in the notices of every channel of the process while it waits
//! (the waitset), so the lists a notice drain fills are grown by the thread
//! that makes their entries, never by the drain: that is checked here too,
//! both tests running at once in this process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: defers every operation to the system allocator unchanged; the
// thread-local counter does not allocate (const-initialised `Cell`).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Buffers the source's pool holds.
const POOL_BUFFERS: u64 = 64;

/// The most one-page messages in flight on one channel: the sender's pool
/// buffers plus its small-message slots (a message copied into a slot
/// frees its buffer at once).
fn in_flight() -> u64 {
    POOL_BUFFERS + u64::from(ChannelConfig::default().lane.slots)
}

/// The most allocations the steady state may make: a core for each
/// message in flight (allocated the first time the pipeline gets that
/// deep), and the doublings of the lists that grow with the depth (a
/// ledger's entries and free list, two spare lists and the notice queue;
/// each doubles at most once per power of two up to the depth, from 4).
fn bound() -> u64 {
    const LISTS: u64 = 5;
    let depth = in_flight();
    depth + LISTS * u64::from(depth.next_power_of_two().trailing_zeros())
}

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

/// A thread sending `n` one-page messages from its own pool on `tx`.
fn source(tx: Channel, n: u64) -> std::thread::JoinHandle<Channel> {
    std::thread::spawn(move || {
        // One chunk bounds the buffers in flight (with the channel's
        // small-message slots: `in_flight`).
        let pool = Pool::new(PoolConfig {
            chunk_size: POOL_BUFFERS as usize * 4096,
            max_chunks: 1,
            populate: false,
            ..PoolConfig::named("no-alloc")
        });
        for i in 0..n {
            let mut b = pool
                .alloc_timeout(4096, Duration::from_secs(10))
                .expect("alloc");
            b.as_mut_slice()[..8].copy_from_slice(&(i + 1).to_le_bytes());
            tx.send(Msg::from(b.freeze().expect("freeze")))
                .expect("send");
        }
        tx
    })
}

#[test]
fn steady_state_receive_allocates_nothing_per_message() {
    const N: u64 = 20_000;
    let (tx, rx) = Channel::pair(ChannelConfig::default()).expect("pair");
    let sender = source(tx, N + 100);
    // Warm up: the first messages attach the region, size the scratch
    // vectors and fill this thread's spare cores.
    for _ in 0..100 {
        drop(rx.recv_timeout(Duration::from_secs(10)).expect("recv"));
    }
    let before = allocs();
    let mut sum = 0u64;
    for _ in 0..N {
        let m = rx.recv_timeout(Duration::from_secs(10)).expect("recv");
        sum = sum.wrapping_add(
            m.chunks()
                .next()
                .and_then(|c| c.read_u64_le(0))
                .unwrap_or(0),
        );
        drop(m);
    }
    let total = allocs() - before;
    drop(sender.join().expect("sender"));
    assert!(sum > 0);
    println!("the receive path allocated {total} times for {N} messages");
    assert!(
        total <= bound(),
        "the receive path allocated {total} times for {N} messages (at most {} may grow with the depth)",
        bound()
    );
}

#[test]
fn steady_state_forwarding_allocates_nothing_per_message() {
    const N: u64 = 20_000;
    const WARM: u64 = 500;
    let (tx, up) = Channel::pair(ChannelConfig::default()).expect("pair up");
    let (down, sink) = Channel::pair(ChannelConfig::default()).expect("pair down");
    let sender = source(tx, N + WARM);
    let receiver = std::thread::spawn(move || {
        let mut got = 0u64;
        while let Ok(m) = sink.recv_timeout(Duration::from_secs(10)) {
            got += u64::from(m.len() == 4096);
            if got == N + WARM {
                break;
            }
        }
        got
    });
    let forward = || {
        let m = up.recv_timeout(Duration::from_secs(10)).expect("recv");
        down.send(m).expect("forward");
    };
    // Warm up until the pipeline's depth (buffers in flight across three
    // threads) has settled: growth allocates, the steady state must not.
    for _ in 0..WARM {
        forward();
    }
    let before = allocs();
    for _ in 0..N {
        forward();
    }
    let total = allocs() - before;
    assert_eq!(receiver.join().expect("receiver"), N + WARM);
    drop(sender.join().expect("sender"));
    println!("the forwarder allocated {total} times for {N} messages");
    assert!(
        total <= bound(),
        "the forwarder allocated {total} times for {N} messages (at most {} may grow with the depth)",
        bound()
    );
}
