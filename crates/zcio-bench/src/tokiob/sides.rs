//! The sides of the latency and throughput parts (run in the child
//! processes): one [`End`] per variant and one generic loop per role, so
//! every variant is timed by the same code.
//!
//! What each message carries and how it is touched is the same for every
//! variant: the sender writes the sequence number into the first word of
//! every 4 KiB page and into the last word of the message; the receiver
//! reads those words (zcio messages in place through `View`, socket bytes
//! in its own buffer after `read_exact`) and checks them and the length.
//!
//! The async variants run their loop on a current-thread tokio runtime
//! (`block_on`, as `#[tokio::main(flavor = "current_thread")]` does). The
//! synchronous channel's end makes blocking calls and never returns
//! `Pending`: its loop is polled to completion on the process's main
//! thread with no runtime ([`ready`]).

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use zcio::tokio::AsyncChannel;
use zcio::{
    AllocError, Channel, ChannelConfig, ChannelPolicy, FbufMut, Listener, Msg, Pool, PoolConfig,
    RecvError,
};

use super::{Latency, Sample, Variant, IN_FLIGHT};
use crate::cpu::Window;
use crate::pages::{read_pages, write_pages};

/// The sequence number that ends a ping-pong server.
const STOP: u64 = u64::MAX;

/// One end of a connection, as the loops drive it.
pub(crate) trait End {
    /// Send a message carrying `seq`.
    async fn send(&mut self, seq: u64) -> Result<(), String>;
    /// Receive the next message and touch it: its sequence number (checked
    /// against the length and the last word), `None` when the peer hung up.
    async fn recv(&mut self) -> Result<Option<u64>, String>;
    /// After the last send: wait (bounded) until the peer is done with what
    /// it was sent.
    async fn finish(&mut self);
    /// How often a send found the pool empty (0 when it has none).
    fn pool_waits(&self) -> u64 {
        0
    }
}

/// Write `seq` into the first word of every page of `buf` and into its
/// last word.
fn stamp(buf: &mut [u8], seq: u64) {
    write_pages(buf, seq);
    let n = buf.len();
    buf[n - 8..].copy_from_slice(&seq.to_le_bytes());
}

/// Check a received message's words: the first of every page (read, the
/// first kept), the last; both must be the same sequence number.
fn checked(first: Option<u64>, last: Option<u64>, len: usize, size: usize) -> Result<u64, String> {
    match (first, last) {
        (Some(f), Some(l)) if f == l && len == size => Ok(f),
        _ => Err(format!(
            "bad message: {len} bytes (expected {size}), first word {first:?}, last word {last:?}"
        )),
    }
}

/// Touch a message received in the process's own memory.
fn touch_own(buf: &[u8], size: usize) -> Result<u64, String> {
    let first = (buf.len() >= 8).then(|| read_pages(buf).0);
    let last = buf
        .len()
        .checked_sub(8)
        .map(|at| u64::from_le_bytes(buf[at..].try_into().unwrap_or([0; 8])));
    checked(first, last, buf.len(), size)
}

/// Touch a zcio message in place.
fn touch_msg(m: &Msg, size: usize) -> Result<u64, String> {
    let (first, _) = crate::touch::msg_pages(m);
    checked(first, crate::touch::msg_last_word(m), m.len(), size)
}

/// The configuration of every zcio channel of `v` (both ends): at most
/// [`IN_FLIGHT`] messages held by the receiver; the blocking variant
/// without a spin budget.
pub(crate) fn channel_config(v: Variant) -> ChannelConfig {
    let spin = if v == Variant::ZcioSyncBlocking {
        Duration::ZERO
    } else {
        ChannelPolicy::default().spin
    };
    ChannelConfig {
        max_in_flight: IN_FLIGHT,
        policy: ChannelPolicy {
            spin,
            ..ChannelPolicy::default()
        },
        ..ChannelConfig::default()
    }
}

/// A sender's pool: two chunks of [`IN_FLIGHT`] buffers of `size` each,
/// so a send that the channel let through always finds a free buffer.
fn pool(size: usize) -> Pool {
    Pool::new(PoolConfig {
        chunk_size: size.div_ceil(4096) * 4096 * IN_FLIGHT,
        max_chunks: 2,
        quick_list_cap: 2 * IN_FLIGHT,
        ..PoolConfig::named("bench-tokio")
    })
}

/// Connect to a zcio listener at `path`, retrying until it is there.
pub(crate) fn zcio_connect(
    path: &str,
    cfg: &ChannelConfig,
    t: Duration,
) -> Result<Channel, String> {
    let start = Instant::now();
    loop {
        match Channel::connect(path, cfg.clone()) {
            Ok(c) => return Ok(c),
            Err(e) if start.elapsed() > t => return Err(format!("connect {path}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// One zcio channel: the listening side binds `path` and accepts, the
/// other connects.
fn zcio_open(v: Variant, listen: bool, path: &str, t: Duration) -> Result<Channel, String> {
    let cfg = channel_config(v);
    if listen {
        let l = Listener::bind(path, cfg).map_err(|e| format!("bind {path}: {e}"))?;
        l.accept_timeout(t).map_err(|e| format!("accept: {e}"))
    } else {
        zcio_connect(path, &cfg, t)
    }
}

/// A current-thread tokio runtime with IO and time.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))
}

/// Run a future that never waits (the synchronous channel's loops: every
/// call blocks instead) to completion without a runtime.
fn ready<F: Future>(f: F) -> Result<F::Output, String> {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Ok(v),
        Poll::Pending => Err("a synchronous side returned Pending".into()),
    }
}

/// Wait until the peer released everything this end sent it (or hung up),
/// at most `t`; `sleep` pauses between looks.
async fn released<S: Future<Output = ()>>(ch: &Channel, t: Duration, sleep: impl Fn() -> S) {
    let start = Instant::now();
    while ch.stats().held_by_peer > 0 && !ch.is_disconnected() && start.elapsed() < t {
        if ch.reclaim() == 0 {
            sleep().await;
        }
    }
}

/// `zcio-async`: an [`AsyncChannel`] and its pool.
struct AsyncZcio {
    ch: AsyncChannel,
    pool: Pool,
    size: usize,
    t: Duration,
    pool_waits: u64,
}

impl AsyncZcio {
    /// A buffer of the message's size, without blocking the runtime: if the
    /// pool is empty (the channel's cap should prevent it; `pool_waits`
    /// counts it), let the peer run and look again shortly.
    async fn alloc(&mut self) -> Result<FbufMut, String> {
        let start = Instant::now();
        loop {
            match self.pool.try_alloc(self.size) {
                Ok(b) => return Ok(b),
                Err(AllocError::WouldBlock(_)) if start.elapsed() < self.t => {
                    self.pool_waits += 1;
                    let _ = self.ch.channel().reclaim();
                    tokio::time::sleep(Duration::from_micros(100)).await;
                }
                Err(e) => return Err(format!("alloc {}: {e}", self.size)),
            }
        }
    }
}

impl End for AsyncZcio {
    async fn send(&mut self, seq: u64) -> Result<(), String> {
        let mut buf = self.alloc().await?;
        stamp(buf.as_mut_slice(), seq);
        let m = Msg::from(buf.freeze().map_err(|e| e.to_string())?);
        self.ch.send(m).await.map_err(|e| format!("send: {e}"))
    }

    async fn recv(&mut self) -> Result<Option<u64>, String> {
        match self.ch.recv().await {
            Ok(m) => touch_msg(&m, self.size).map(Some),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(format!("recv: {e}")),
        }
    }

    async fn finish(&mut self) {
        let sleep = || tokio::time::sleep(Duration::from_micros(200));
        released(self.ch.channel(), self.t, sleep).await;
    }

    fn pool_waits(&self) -> u64 {
        self.pool_waits
    }
}

/// `zcio-sync` and `zcio-sync-blocking`: a [`Channel`] and its pool,
/// blocking calls.
struct SyncZcio {
    ch: Channel,
    pool: Pool,
    size: usize,
    t: Duration,
}

impl End for SyncZcio {
    async fn send(&mut self, seq: u64) -> Result<(), String> {
        let mut buf = self
            .pool
            .alloc_timeout(self.size, self.t)
            .map_err(|e| format!("alloc {}: {e}", self.size))?;
        stamp(buf.as_mut_slice(), seq);
        let m = Msg::from(buf.freeze().map_err(|e| e.to_string())?);
        self.ch
            .send_timeout(m, self.t)
            .map_err(|e| format!("send: {e}"))
    }

    async fn recv(&mut self) -> Result<Option<u64>, String> {
        match self.ch.recv_timeout(self.t) {
            Ok(m) => touch_msg(&m, self.size).map(Some),
            Err(_) if self.ch.is_disconnected() => Ok(None),
            Err(e) => Err(format!("recv: {e}")),
        }
    }

    async fn finish(&mut self) {
        let sleep = || async { std::thread::sleep(Duration::from_micros(200)) };
        released(&self.ch, self.t, sleep).await;
    }
}

/// `tokio-unix`: a tokio `UnixStream`, frames of an 8-byte little-endian
/// length and the payload; reads through a `BufReader`, each frame written
/// with one `write_all` from a reused buffer, payloads read with
/// `read_exact` into a reused buffer.
struct TokioUnix {
    r: BufReader<OwnedReadHalf>,
    w: OwnedWriteHalf,
    /// Header and payload of the next frame sent.
    frame: Vec<u8>,
    /// The payload of the last frame received.
    buf: Vec<u8>,
}

/// The read buffer of [`TokioUnix`] (as large as a socket read returns
/// in one go on a default Linux socket, and generous for small frames).
pub(crate) const READ_BUF: usize = 64 << 10;

impl TokioUnix {
    async fn open(listen: bool, path: &str, size: usize, t: Duration) -> Result<Self, String> {
        let s = if listen {
            let l = UnixListener::bind(path).map_err(|e| format!("bind {path}: {e}"))?;
            tokio::time::timeout(t, l.accept())
                .await
                .map_err(|_| "accept: timed out".to_string())?
                .map_err(|e| format!("accept: {e}"))?
                .0
        } else {
            unix_connect(path, t).await?
        };
        let (r, w) = s.into_split();
        let mut frame = vec![0u8; 8 + size];
        frame[..8].copy_from_slice(&(size as u64).to_le_bytes());
        Ok(Self {
            r: BufReader::with_capacity(READ_BUF, r),
            w,
            frame,
            buf: vec![0u8; size],
        })
    }
}

/// Connect a tokio `UnixStream` to `path`, retrying until it listens.
pub(crate) async fn unix_connect(path: &str, t: Duration) -> Result<UnixStream, String> {
    let start = Instant::now();
    loop {
        match UnixStream::connect(path).await {
            Ok(s) => return Ok(s),
            Err(e) if start.elapsed() > t => return Err(format!("connect {path}: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    }
}

impl End for TokioUnix {
    async fn send(&mut self, seq: u64) -> Result<(), String> {
        stamp(&mut self.frame[8..], seq);
        self.w
            .write_all(&self.frame)
            .await
            .map_err(|e| format!("write: {e}"))
    }

    async fn recv(&mut self) -> Result<Option<u64>, String> {
        let mut hdr = [0u8; 8];
        match self.r.read_exact(&mut hdr).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(format!("read: {e}")),
        }
        let len = u64::from_le_bytes(hdr);
        if len != self.buf.len() as u64 {
            return Err(format!("frame of {len} bytes, expected {}", self.buf.len()));
        }
        self.r
            .read_exact(&mut self.buf)
            .await
            .map_err(|e| format!("read: {e}"))?;
        touch_own(&self.buf, self.buf.len()).map(Some)
    }

    async fn finish(&mut self) {
        let _ = self.w.shutdown().await;
    }
}

/// The ping-pong client: `warmup` round trips, then up to `iters` measured
/// ones within `budget`; the one-way latencies and its CPU time.
async fn ping_client<E: End>(
    e: &mut E,
    warmup: u64,
    iters: u64,
    budget: Duration,
) -> Result<Sample, String> {
    let expect = |seq: u64, got: Option<u64>| match got {
        Some(g) if g == seq => Ok(()),
        Some(g) => Err(format!("round trip {seq}: the reply carries {g}")),
        None => Err(format!("round trip {seq}: the server hung up")),
    };
    for seq in 0..warmup {
        e.send(seq).await?;
        expect(seq, e.recv().await?)?;
    }
    let mut rt = Vec::with_capacity(iters as usize);
    let mut cpu = Window::default();
    cpu.start();
    let start = Instant::now();
    for seq in warmup..warmup + iters {
        let t0 = Instant::now();
        e.send(seq).await?;
        let got = e.recv().await?;
        rt.push(t0.elapsed().as_nanos() as u64);
        expect(seq, got)?;
        if start.elapsed() > budget {
            break;
        }
    }
    let cpu_ns = cpu.elapsed_ns();
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    e.send(STOP).await?;
    e.finish().await;
    Ok(Sample {
        msgs: rt.len() as u64,
        elapsed_ns,
        cpu_ns,
        latency: Some(Latency::from_round_trips(rt)),
        wakeups: 0,
        pool_waits: e.pool_waits(),
    })
}

/// The ping-pong server: answer every request with a message of the same
/// size carrying its sequence number, until [`STOP`]; its CPU time from
/// its `warmup`-th request on.
async fn ping_server<E: End>(e: &mut E, warmup: u64) -> Result<Sample, String> {
    let mut cpu = Window::default();
    let mut n = 0u64;
    while let Some(seq) = e.recv().await? {
        if seq == STOP {
            break;
        }
        if n == warmup {
            cpu.start();
        }
        e.send(seq).await?;
        n += 1;
    }
    let cpu_ns = cpu.elapsed_ns();
    e.finish().await;
    Ok(Sample {
        msgs: n.saturating_sub(warmup),
        cpu_ns,
        pool_waits: e.pool_waits(),
        ..Sample::default()
    })
}

/// The streaming sender: `warmup + count` messages as fast as it can; its
/// CPU time over the last `count`.
async fn stream_sender<E: End>(e: &mut E, warmup: u64, count: u64) -> Result<Sample, String> {
    let mut cpu = Window::default();
    let start = Instant::now();
    let mut from = start;
    for seq in 0..warmup + count {
        if seq == warmup {
            cpu.start();
            from = Instant::now();
        }
        e.send(seq).await?;
    }
    let cpu_ns = cpu.elapsed_ns();
    let elapsed_ns = from.elapsed().as_nanos() as u64;
    e.finish().await;
    Ok(Sample {
        msgs: count,
        elapsed_ns,
        cpu_ns,
        pool_waits: e.pool_waits(),
        ..Sample::default()
    })
}

/// The streaming receiver: every message checked and touched; the time and
/// CPU time of the last `count`.
async fn stream_receiver<E: End>(e: &mut E, warmup: u64, count: u64) -> Result<Sample, String> {
    let mut cpu = Window::default();
    let mut start = Instant::now();
    for seq in 0..warmup + count {
        if seq == warmup {
            cpu.start();
            start = Instant::now();
        }
        match e.recv().await? {
            Some(got) if got == seq => {}
            Some(got) => return Err(format!("message {seq}: it carries {got}")),
            None => return Err(format!("message {seq}: the sender hung up")),
        }
    }
    let elapsed_ns = start.elapsed().as_nanos() as u64;
    let cpu_ns = cpu.elapsed_ns();
    e.finish().await;
    Ok(Sample {
        msgs: count,
        elapsed_ns,
        cpu_ns,
        ..Sample::default()
    })
}

/// What one side does: a role of the ping-pong or of the stream.
#[derive(Debug, Clone, Copy)]
enum Role {
    Client {
        warmup: u64,
        iters: u64,
        budget: Duration,
    },
    Server {
        warmup: u64,
    },
    Sender {
        warmup: u64,
        count: u64,
    },
    Receiver {
        warmup: u64,
        count: u64,
    },
}

impl Role {
    /// Whether this side binds the socket (the server and the receiver).
    fn listens(self) -> bool {
        matches!(self, Role::Server { .. } | Role::Receiver { .. })
    }

    async fn run<E: End>(self, e: &mut E) -> Result<Sample, String> {
        match self {
            Role::Client {
                warmup,
                iters,
                budget,
            } => ping_client(e, warmup, iters, budget).await,
            Role::Server { warmup } => ping_server(e, warmup).await,
            Role::Sender { warmup, count } => stream_sender(e, warmup, count).await,
            Role::Receiver { warmup, count } => stream_receiver(e, warmup, count).await,
        }
    }
}

/// Run `role` over `variant`'s connection at `path`.
fn side(
    variant: Variant,
    role: Role,
    path: &str,
    size: usize,
    t: Duration,
) -> Result<Sample, String> {
    let listen = role.listens();
    match variant {
        Variant::ZcioAsync => {
            let ch = zcio_open(variant, listen, path, t)?;
            let rt = runtime()?;
            rt.block_on(async {
                let ch = AsyncChannel::new(ch).map_err(|e| format!("AsyncChannel::new: {e}"))?;
                let mut e = AsyncZcio {
                    ch,
                    pool: pool(size),
                    size,
                    t,
                    pool_waits: 0,
                };
                role.run(&mut e).await
            })
        }
        Variant::TokioUnix => {
            let rt = runtime()?;
            rt.block_on(async {
                let mut e = TokioUnix::open(listen, path, size, t).await?;
                role.run(&mut e).await
            })
        }
        Variant::ZcioSyncBlocking | Variant::ZcioSync => {
            let mut e = SyncZcio {
                ch: zcio_open(variant, listen, path, t)?,
                pool: pool(size),
                size,
                t,
            };
            ready(role.run(&mut e))?
        }
    }
}

/// A side of the ping-pong (the client measures the latency).
#[allow(clippy::too_many_arguments)]
pub fn ping(
    variant: Variant,
    client: bool,
    path: &str,
    size: usize,
    warmup: u64,
    iters: u64,
    budget: Duration,
    t: Duration,
) -> Result<Sample, String> {
    let role = if client {
        Role::Client {
            warmup,
            iters,
            budget,
        }
    } else {
        Role::Server { warmup }
    };
    side(variant, role, path, size, t)
}

/// A side of the stream (the receiver measures the rate).
pub fn stream(
    variant: Variant,
    sender: bool,
    path: &str,
    size: usize,
    warmup: u64,
    count: u64,
    t: Duration,
) -> Result<Sample, String> {
    let role = if sender {
        Role::Sender { warmup, count }
    } else {
        Role::Receiver { warmup, count }
    };
    side(variant, role, path, size, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamped_messages_touch_back_to_their_sequence() {
        for size in [16usize, 64, 4096, 5000, 3 * 4096] {
            let mut b = vec![0u8; size];
            stamp(&mut b, 42);
            assert_eq!(touch_own(&b, size), Ok(42));
            assert!(touch_own(&b, size + 1).is_err());
        }
        let mut b = vec![0u8; 64];
        stamp(&mut b, 7);
        b[63] = 1;
        assert!(touch_own(&b, 64).is_err());
    }

    #[test]
    fn the_sync_end_never_waits() {
        assert_eq!(ready(async { 3 }), Ok(3));
        assert!(ready(std::future::pending::<()>()).is_err());
    }
}
