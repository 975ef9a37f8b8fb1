//! The idle part: a process waits on `n` connections whose peer (another
//! process) never sends, and reads its own CPU time (`getrusage`,
//! `RUSAGE_SELF`, user + system) over a window once the wait has settled.
//!
//! * `zcio-async` and `tokio-unix`: one task of a current-thread runtime
//!   awaits all `n` receives at once (a `poll_fn` over `n` boxed futures:
//!   `AsyncChannel::recv`, `UnixStream::readable`); the runtime's main
//!   future sleeps on a tokio timer through the settling time and the
//!   window. Wake-ups = polls of the waiting task in the window.
//! * `zcio-sync-blocking` (context): what a program without async does —
//!   one thread per channel blocked in `Channel::recv_timeout`. Wake-ups =
//!   the channels' futex sleeps begun in the window (each bounded by the
//!   liveness interval).

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use zcio::tokio::AsyncChannel;
use zcio::{Channel, Listener, RecvError};

use super::sides::{channel_config, runtime, unix_connect, zcio_connect};
use super::{Sample, Variant};
use crate::cpu::{Cpu, Who};

/// Run an idle side.
pub fn run(
    variant: Variant,
    waiter: bool,
    path: &str,
    n: usize,
    settle: Duration,
    window: Duration,
    t: Duration,
) -> Result<Sample, String> {
    match (variant, waiter) {
        (Variant::TokioUnix, false) => unix_peer(path, n, t),
        (_, false) => zcio_peer(variant, path, n, t),
        (Variant::ZcioAsync, true) => async_waiter(path, n, settle, window, t),
        (Variant::TokioUnix, true) => unix_waiter(path, n, settle, window, t),
        (Variant::ZcioSyncBlocking | Variant::ZcioSync, true) => {
            thread_waiter(variant, path, n, settle, window, t)
        }
    }
}

/// Poll every future of `futs` whenever the task wakes (counting the
/// polls in `polls`) until one is ready: its index and output.
async fn first_ready<F: Future>(
    mut futs: Vec<Pin<Box<F>>>,
    polls: &AtomicU64,
) -> (usize, F::Output) {
    poll_fn(|cx| {
        polls.fetch_add(1, Ordering::Relaxed);
        for (i, f) in futs.iter_mut().enumerate() {
            if let Poll::Ready(out) = f.as_mut().poll(cx) {
                return Poll::Ready((i, out));
            }
        }
        Poll::Pending
    })
    .await
}

/// The measurement of a waiting process: sleep through `settle` (on the
/// runtime's timer), then read its CPU time over `window`; `woke` says
/// whether the waiting task ended (it must not), `polls` counts its polls.
async fn window_async(
    settle: Duration,
    window: Duration,
    n: usize,
    polls: &AtomicU64,
    woke: impl Fn() -> bool,
) -> Result<Sample, String> {
    tokio::time::sleep(settle).await;
    if woke() {
        return Err("a receive on an idle connection returned before the window".into());
    }
    let p0 = polls.load(Ordering::Relaxed);
    let c0 = Cpu::now(Who::Process);
    let start = Instant::now();
    tokio::time::sleep(window).await;
    let c1 = Cpu::now(Who::Process);
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    let p1 = polls.load(Ordering::Relaxed);
    if woke() {
        return Err("a receive on an idle connection returned in the window".into());
    }
    Ok(Sample {
        msgs: n as u64,
        elapsed_ns,
        cpu_ns: c1.total_since(c0),
        wakeups: p1 - p0,
        ..Sample::default()
    })
}

/// Measure the process while `task` waits (see [`window_async`]); it must
/// not finish (a `what` that woke it is an error). Aborts it after.
async fn watch(
    task: tokio::task::JoinHandle<(usize, Result<(), String>)>,
    what: &str,
    settle: Duration,
    window: Duration,
    n: usize,
    polls: &AtomicU64,
) -> Result<Sample, String> {
    let s = window_async(settle, window, n, polls, || task.is_finished()).await;
    if task.is_finished() {
        return Err(match task.await {
            Ok((i, r)) => format!("{what} {i} woke its waiter: {r:?}"),
            Err(e) => format!("the waiting task failed: {e}"),
        });
    }
    task.abort();
    s
}

/// `zcio-async`: connect `n` channels, make them async ends, and let one
/// task await a receive on every one of them.
fn async_waiter(
    path: &str,
    n: usize,
    settle: Duration,
    window: Duration,
    t: Duration,
) -> Result<Sample, String> {
    let cfg = channel_config(Variant::ZcioAsync);
    let chans = (0..n)
        .map(|_| zcio_connect(path, &cfg, t))
        .collect::<Result<Vec<Channel>, String>>()?;
    let rt = runtime()?;
    rt.block_on(async {
        let chans = chans
            .into_iter()
            .map(AsyncChannel::new)
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| format!("AsyncChannel::new: {e}"))?;
        let polls = Arc::new(AtomicU64::new(0));
        let p = polls.clone();
        let task = tokio::spawn(async move {
            let futs = chans.iter().map(|c| Box::pin(c.recv())).collect();
            let (i, r) = first_ready(futs, &p).await;
            (i, r.map(|_| ()).map_err(|e| e.to_string()))
        });
        watch(task, "channel", settle, window, n, &polls).await
    })
}

/// `tokio-unix`: connect `n` streams, and let one task await readability
/// of every one of them.
fn unix_waiter(
    path: &str,
    n: usize,
    settle: Duration,
    window: Duration,
    t: Duration,
) -> Result<Sample, String> {
    let rt = runtime()?;
    rt.block_on(async {
        let mut streams = Vec::with_capacity(n);
        for _ in 0..n {
            streams.push(unix_connect(path, t).await?);
        }
        let polls = Arc::new(AtomicU64::new(0));
        let p = polls.clone();
        let task = tokio::spawn(async move {
            let futs = streams.iter().map(|s| Box::pin(s.readable())).collect();
            let (i, r) = first_ready(futs, &p).await;
            (i, r.map_err(|e| e.to_string()))
        });
        watch(task, "stream", settle, window, n, &polls).await
    })
}

/// The synchronous channel: a thread per channel blocked in a receive; the
/// main thread sleeps through `settle` and `window`.
fn thread_waiter(
    variant: Variant,
    path: &str,
    n: usize,
    settle: Duration,
    window: Duration,
    t: Duration,
) -> Result<Sample, String> {
    let cfg = channel_config(variant);
    let chans = (0..n)
        .map(|_| zcio_connect(path, &cfg, t).map(Arc::new))
        .collect::<Result<Vec<Arc<Channel>>, String>>()?;
    let ended = Arc::new(AtomicU64::new(0));
    for c in &chans {
        let (c, ended) = (c.clone(), ended.clone());
        std::thread::Builder::new()
            .name("idle-recv".into())
            .spawn(move || {
                let _ = c.recv_timeout(t);
                ended.fetch_add(1, Ordering::Relaxed);
            })
            .map_err(|e| format!("spawn a waiting thread: {e}"))?;
    }
    let sleeps = || chans.iter().map(|c| c.stats().sleeps).sum::<u64>();
    std::thread::sleep(settle);
    let s0 = sleeps();
    let c0 = Cpu::now(Who::Process);
    let start = Instant::now();
    std::thread::sleep(window);
    let c1 = Cpu::now(Who::Process);
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    let s1 = sleeps();
    if ended.load(Ordering::Relaxed) > 0 {
        return Err("a receive on an idle channel returned".into());
    }
    // The waiting threads end with the process (after the result line).
    Ok(Sample {
        msgs: n as u64,
        elapsed_ns,
        cpu_ns: c1.total_since(c0),
        wakeups: s1 - s0,
        ..Sample::default()
    })
}

/// The zcio peer: accept `n` channels, never send, and wait until the
/// waiter hangs up.
fn zcio_peer(variant: Variant, path: &str, n: usize, t: Duration) -> Result<Sample, String> {
    let l =
        Listener::bind(path, channel_config(variant)).map_err(|e| format!("bind {path}: {e}"))?;
    let chans = (0..n)
        .map(|i| l.accept_timeout(t).map_err(|e| format!("accept #{i}: {e}")))
        .collect::<Result<Vec<Channel>, String>>()?;
    match chans[0].recv_timeout(t) {
        Ok(_) => Err("the idle waiter sent a message".into()),
        Err(RecvError::Disconnected) => Ok(Sample::default()),
        Err(e) => Err(format!("waiting for the waiter to hang up: {e}")),
    }
}

/// The socket peer: accept `n` streams, never write, and wait until the
/// waiter hangs up.
fn unix_peer(path: &str, n: usize, t: Duration) -> Result<Sample, String> {
    use std::io::Read;
    use std::os::unix::net::UnixListener;
    let l = UnixListener::bind(path).map_err(|e| format!("bind {path}: {e}"))?;
    let mut streams = Vec::with_capacity(n);
    for i in 0..n {
        let (s, _) = l.accept().map_err(|e| format!("accept #{i}: {e}"))?;
        streams.push(s);
    }
    streams[0]
        .set_read_timeout(Some(t))
        .map_err(|e| e.to_string())?;
    let mut b = [0u8; 1];
    match streams[0].read(&mut b) {
        Ok(0) => Ok(Sample::default()),
        Ok(_) => Err("the idle waiter sent bytes".into()),
        Err(e) => Err(format!("waiting for the waiter to hang up: {e}")),
    }
}
