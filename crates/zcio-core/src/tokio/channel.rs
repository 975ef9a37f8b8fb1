//! [`AsyncChannel`]: a [`Channel`] end whose waits are futures.

use std::io;
use std::os::fd::BorrowedFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use ::tokio::time::Sleep;

use super::doorbell::{AsyncBell, ItemBound};
use crate::channel::{Core, SendBlock};
use crate::wait::{spin_until, Readiness, SpinBudget, SpinPolicy};
use crate::{Channel, Msg, RecvError, SendError, SendErrorKind, SendTimeoutError, TryRecvError};

/// A channel end as the reactor holds it (shared with the [`Channel`]).
pub(crate) struct End(Arc<Core>);

impl std::ops::Deref for End {
    type Target = Arc<Core>;

    fn deref(&self) -> &Arc<Core> {
        &self.0
    }
}

/// A channel end's readiness: its receive side (a message on the ring it
/// consumes, the futex word of that ring), and its doorbell.
impl Readiness for End {
    fn is_ready(&mut self) -> bool {
        self.msg_sleep().is_ready()
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        self.msg_sleep().arm()
    }

    fn sleep(&mut self, armed: u32, slice: std::time::Duration) {
        crate::sync::futex_wait(self.msg_sleep().word(), armed, slice);
    }

    fn alive(&mut self) -> bool {
        !self.is_gone()
    }

    fn bell_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.evented_bell())
    }

    fn take_rings(&self, hung_up: bool) -> usize {
        Core::take_rings(&self.0, hung_up)
    }

    fn peer_gone(&self) -> bool {
        self.is_gone()
    }
}

/// A channel end for async code: `recv().await`, `send(msg).await`, and a
/// [`Stream`](futures_core::Stream) of messages.
///
/// A waiting task costs no thread and no CPU: it arms the same sleep flag
/// a blocking waiter sets, and its peer — any zcio end, async or not, in
/// any language — rings this end's doorbell, registered with tokio's
/// reactor, instead of waking a futex. A short spin (at most
/// [`SpinPolicy::task_max`], and the channel's own `ChannelPolicy::spin`)
/// comes first, as in the blocking path, so a busy
/// exchange pays no event-loop round trip. A peer that dies wakes the
/// task (its doorbell hangs up) and the call returns `Disconnected`.
///
/// Create it inside a tokio runtime with IO and time enabled. The
/// blocking methods of the [`Channel`] inside ([`AsyncChannel::channel`])
/// keep working (they then sleep on the doorbell too).
///
/// Cancel safety (as tokio's docs state it):
///
/// | method | cancel-safe | what a dropped future means |
/// |---|---|---|
/// | [`recv`](Self::recv), [`recv_timeout`](Self::recv_timeout) | yes | no message was taken; the next call gets it |
/// | [`send`](Self::send), [`send_timeout`](Self::send_timeout) | no | the message was not sent and is dropped (its buffers return to their pool); use [`try_send`](Self::try_send) + [`writable`](Self::writable) to keep it |
/// | [`writable`](Self::writable) | yes | nothing happened |
/// | `Stream::poll_next` | yes | as `recv` |
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use zcio::tokio::AsyncChannel;
/// use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};
///
/// let (a, b) = Channel::pair(ChannelConfig::default())?;
/// let (a, b) = (AsyncChannel::new(a)?, AsyncChannel::new(b)?);
/// let pool = Pool::new(PoolConfig::named("doc"));
/// let mut buf = pool.try_alloc(2)?;
/// buf.as_mut_slice().copy_from_slice(b"hi");
/// a.send(Msg::from(buf.freeze()?)).await?;
/// assert_eq!(b.recv().await?.to_vec(), b"hi");
/// # Ok(())
/// # }
/// ```
pub struct AsyncChannel {
    ch: Channel,
    bell: AsyncBell<End>,
    /// Spin budgets of receives and sends (adaptive, as the blocking
    /// path's).
    spin: Mutex<[SpinBudget; 2]>,
    /// The liveness timer of the `Stream`'s waits.
    stream_timer: Option<Pin<Box<Sleep>>>,
    /// The `recv_timeout` of the `Stream`'s current item.
    item_bound: ItemBound,
}

impl std::fmt::Debug for AsyncChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncChannel")
            .field("channel", &self.ch)
            .finish_non_exhaustive()
    }
}

const RECV: usize = 0;
const SEND: usize = 1;

impl AsyncChannel {
    /// Make `ch` an async end. Switches the end to bell mode for good: its
    /// peer rings the doorbell instead of waking futexes.
    ///
    /// # Errors
    /// Outside a tokio runtime, or when the reactor refuses the doorbell.
    pub fn new(ch: Channel) -> io::Result<Self> {
        let core = ch.core().clone();
        core.enter_bell_mode();
        let spin = SpinPolicy::current().task_budget(core.cfg.policy.spin);
        Ok(Self {
            bell: AsyncBell::new(End(core))?,
            ch,
            spin: Mutex::new([spin; 2]),
            stream_timer: None,
            item_bound: ItemBound::default(),
        })
    }

    /// The channel (its non-blocking calls, stats, lanes; its blocking
    /// calls would block the runtime's thread).
    pub fn channel(&self) -> &Channel {
        &self.ch
    }

    /// The channel back (it stays in bell mode).
    pub fn into_inner(self) -> Channel {
        self.ch
    }

    fn core(&self) -> &Arc<Core> {
        self.bell.owner()
    }

    fn budget(&self, i: usize) -> SpinBudget {
        self.spin.lock().unwrap_or_else(|p| p.into_inner())[i]
    }

    fn learn(&self, i: usize, slept: bool) {
        self.spin.lock().unwrap_or_else(|p| p.into_inner())[i].record(slept);
    }

    /// Receive now, spinning up to the budget (`wait::spin_until`, the
    /// spin of every waiter). `None`: nothing came, sleep.
    fn recv_spinning(&self) -> Option<Result<Msg, RecvError>> {
        let mut got = None;
        let look = || match self.ch.try_recv() {
            Err(TryRecvError::WouldBlock) => false,
            r => {
                got = Some(r.map_err(recv_error));
                true
            }
        };
        // A copy: the end's shared budget learns below (not from an error).
        let came = spin_until(look, &mut self.budget(RECV), None, false, false);
        if matches!(got, Some(Ok(_))) || !came {
            self.learn(RECV, !came);
        }
        got
    }

    /// Receive a message, waiting at most `ChannelConfig::recv_timeout`
    /// (as [`Channel::recv`]). Cancel-safe.
    pub async fn recv(&self) -> Result<Msg, RecvError> {
        let limit = self.core().cfg.recv_timeout;
        self.recv_timeout(limit).await
    }

    /// Receive, waiting at most `timeout` (`TimedOut` after it;
    /// `Duration::MAX`: without a bound). Cancel-safe.
    pub async fn recv_timeout(&self, timeout: Duration) -> Result<Msg, RecvError> {
        let wait = async {
            loop {
                if let Some(r) = self.recv_spinning() {
                    return r;
                }
                if !self.core().arm_recv() {
                    continue;
                }
                self.bell.wait().await;
                self.core().disarm_recv();
                let got = self.ch.try_recv();
                self.bell
                    .record(!matches!(got, Err(TryRecvError::WouldBlock)));
                match got {
                    Ok(m) => return Ok(m),
                    Err(TryRecvError::WouldBlock) => {}
                    Err(e) => return Err(recv_error(e)),
                }
            }
        };
        match with_timeout(timeout, wait).await {
            Some(r) => r,
            None => Err(RecvError::TimedOut),
        }
    }

    /// Receive if a message is ready (never waits).
    pub fn try_recv(&self) -> Result<Msg, TryRecvError> {
        self.ch.try_recv()
    }

    /// Poll for a message (the `Stream` uses it; one task at a time).
    /// Waits at most `ChannelConfig::recv_timeout` for each message
    /// (`Err(TimedOut)` after it; the next poll waits anew).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Msg, RecvError>> {
        let r = self.poll_recv_unbounded(cx);
        match r {
            Poll::Ready(_) => self.item_bound.clear(),
            Poll::Pending => {
                let bound = self.core().cfg.recv_timeout;
                if self.item_bound.expired(cx, bound) {
                    self.core().disarm_recv();
                    return Poll::Ready(Err(RecvError::TimedOut));
                }
            }
        }
        r
    }

    fn poll_recv_unbounded(&mut self, cx: &mut Context<'_>) -> Poll<Result<Msg, RecvError>> {
        loop {
            if let Some(r) = self.recv_spinning() {
                return Poll::Ready(r);
            }
            if !self.core().arm_recv() {
                continue;
            }
            let Self {
                bell, stream_timer, ..
            } = self;
            if bell.poll_wait(cx, stream_timer).is_pending() {
                return Poll::Pending;
            }
            self.core().disarm_recv();
            match self.ch.try_recv() {
                Ok(m) => {
                    self.bell.record(true);
                    return Poll::Ready(Ok(m));
                }
                Err(TryRecvError::WouldBlock) => self.bell.record(false),
                Err(e) => return Poll::Ready(Err(recv_error(e))),
            }
        }
    }

    /// Send a message by reference, waiting while the peer's ring is full
    /// or it holds as much as it may, at most `ChannelConfig::send_timeout`
    /// (as [`Channel::send`]). On failure the message comes back inside the
    /// error. **Not cancel-safe**: a dropped future drops the message.
    pub async fn send(&self, msg: Msg) -> Result<(), SendError<Msg>> {
        let limit = self.core().cfg.send_timeout;
        self.send_timeout(msg, limit).await.map_err(|e| {
            let (kind, msg) = e.into_parts();
            SendError::new(kind, msg)
        })
    }

    /// Send, waiting at most `timeout` (`TimedOut` after it, the message
    /// inside the error; `Duration::MAX`: without a bound). Not cancel-safe
    /// (see [`AsyncChannel::send`]).
    pub async fn send_timeout(
        &self,
        msg: Msg,
        timeout: Duration,
    ) -> Result<(), SendTimeoutError<Msg>> {
        // The message waits here, outside the timed future, so that a
        // timeout hands it back.
        let mut held = Some(msg);
        let slot = &mut held;
        let sent = with_timeout(timeout, async move {
            let mut woke = false;
            while let Some(m) = slot.take() {
                let (kind, m) = match self.send_spinning(m) {
                    Ok(()) => {
                        if woke {
                            self.bell.record(true);
                        }
                        return Ok(());
                    }
                    Err(e) => e,
                };
                let Some(why) = SendBlock::of(kind, m.slice_count()) else {
                    *slot = Some(m);
                    return Err(kind);
                };
                if woke {
                    self.bell.record(false);
                }
                *slot = Some(m);
                woke = self.sleep_to_send(why).await?;
            }
            Ok(())
        })
        .await;
        let kind = match sent {
            Some(Ok(())) => return Ok(()),
            Some(Err(kind)) => kind,
            None => SendErrorKind::TimedOut,
        };
        match held {
            Some(m) => Err(SendTimeoutError::new(kind, m)),
            // Unreachable: the loop above only ends with the message sent
            // or put back.
            None => Ok(()),
        }
    }

    /// Send if the ring has room and the peer may hold more now (never
    /// waits); the message comes back inside the error.
    pub fn try_send(&self, msg: Msg) -> Result<(), crate::TrySendError<Msg>> {
        self.ch.try_send(msg)
    }

    /// Wait until `msg` may be sent (ring room and room in what the peer
    /// may hold, slices and bytes), at most `ChannelConfig::send_timeout`.
    /// Cancel-safe: pair it with [`AsyncChannel::try_send`] to never lose a
    /// message to a cancelled send. Another task may still fill the ring
    /// first.
    pub async fn writable(&self, msg: &Msg) -> Result<(), SendErrorKind> {
        let (slices, bytes) = (msg.slice_count().max(1), msg.len() as u64);
        let limit = self.core().cfg.send_timeout;
        let wait = async {
            let mut woke = false;
            loop {
                match self.core().send_blocked(slices, bytes)? {
                    None => {
                        if woke {
                            self.bell.record(true);
                        }
                        return Ok(());
                    }
                    Some(why) => {
                        if woke {
                            self.bell.record(false);
                        }
                        woke = self.sleep_to_send(why).await?;
                    }
                }
            }
        };
        with_timeout(limit, wait)
            .await
            .unwrap_or(Err(SendErrorKind::TimedOut))
    }

    /// Try to send, spinning up to the budget (`wait::spin_until`) while
    /// the ring or the ledger is full. The error is the last attempt's.
    fn send_spinning(&self, msg: Msg) -> Result<(), (SendErrorKind, Msg)> {
        let mut pending = Some(msg);
        let mut last = SendErrorKind::WouldBlock;
        let mut done = None;
        let look = || {
            let Some(m) = pending.take() else {
                return true;
            };
            let (kind, m) = match self.ch.try_send(m) {
                Ok(()) => {
                    done = Some(Ok(()));
                    return true;
                }
                Err(e) => e.into_parts(),
            };
            if SendBlock::of(kind, m.slice_count()).is_none() {
                done = Some(Err((kind, m)));
                return true;
            }
            (last, pending) = (kind, Some(m));
            false
        };
        let sent = spin_until(look, &mut self.budget(SEND), None, false, false);
        match done {
            Some(Ok(())) => {
                self.learn(SEND, false);
                Ok(())
            }
            Some(Err(e)) => Err(e),
            None => {
                debug_assert!(!sent);
                self.learn(SEND, true);
                Err((last, pending.take().expect("kept by a failed attempt")))
            }
        }
    }

    /// Sleep in the event loop until a send blocked by `why` may go.
    /// Returns whether it slept (false: things moved while arming).
    async fn sleep_to_send(&self, why: SendBlock) -> Result<bool, SendErrorKind> {
        if !self.core().arm_send(why)? {
            return Ok(false);
        }
        self.bell.wait().await;
        self.core().disarm_send(why);
        Ok(true)
    }
}

/// `fut` with a deadline of `timeout` from now (`None` after it; no timer
/// at all when the timeout is too long to represent).
pub(crate) async fn with_timeout<F: std::future::Future>(
    timeout: Duration,
    fut: F,
) -> Option<F::Output> {
    match ::tokio::time::Instant::now().checked_add(timeout) {
        Some(deadline) => ::tokio::time::timeout_at(deadline, fut).await.ok(),
        None => Some(fut.await),
    }
}

fn recv_error(e: TryRecvError) -> RecvError {
    match e {
        TryRecvError::Disconnected | TryRecvError::WouldBlock => RecvError::Disconnected,
        TryRecvError::Malformed(m) => RecvError::Malformed(m),
        TryRecvError::Corrupt => RecvError::Corrupt,
    }
}

impl futures_core::Stream for AsyncChannel {
    type Item = Result<Msg, RecvError>;

    /// The next message; `None` once the peer is gone and everything it
    /// sent was received. Cancel-safe. Waits at most
    /// `ChannelConfig::recv_timeout` for each message (`Some(Err(TimedOut))`
    /// after it; the stream goes on).
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.get_mut().poll_recv(cx) {
            Poll::Ready(Err(RecvError::Disconnected)) => Poll::Ready(None),
            Poll::Ready(r) => Poll::Ready(Some(r)),
            Poll::Pending => Poll::Pending,
        }
    }
}

// tokio's reactor (epoll, sockets) is outside what Miri models: `scripts/miri`
// leaves these out (the tokio feature reaches this crate there through the
// `zcio` dev-dependency of its doc examples).
#[cfg(all(test, not(miri)))]
mod tests {
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::tokio::doorbell::FLOOD_LIMIT;
    use crate::wait::LIVENESS;
    use crate::{ChannelConfig, Pool, PoolConfig};

    fn rt() -> ::tokio::runtime::Runtime {
        ::tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    fn msg(pool: &Pool, b: &[u8]) -> Msg {
        let mut buf = pool.try_alloc(b.len()).unwrap();
        buf.as_mut_slice().copy_from_slice(b);
        Msg::from(buf.freeze().unwrap())
    }

    /// Wakes a waiter may take in `elapsed`: the flood's trust runs out
    /// after FLOOD_LIMIT, then one per liveness slice (plus slack for the
    /// wakes around each phase change).
    fn bound(elapsed: Duration) -> u64 {
        u64::from(FLOOD_LIMIT) + 4 + (elapsed.as_millis() / LIVENESS.as_millis()) as u64 * 2
    }

    #[test]
    fn a_peer_ringing_in_a_flood_neither_hangs_nor_spins_the_task() {
        let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let pool = Pool::new(PoolConfig::named("flood"));
        rt().block_on(async {
            let b = AsyncChannel::new(b).unwrap();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flood = {
                let (core, stop) = (a.core().clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        core.bell.ring();
                    }
                })
            };
            let t = Instant::now();
            let r = b.recv_timeout(Duration::from_millis(300)).await;
            let elapsed = t.elapsed();
            assert_eq!(r.unwrap_err(), RecvError::TimedOut);
            let wakes = b.bell.wakes.load(Ordering::Relaxed);
            assert!(
                wakes <= bound(elapsed),
                "{wakes} wakes in {elapsed:?}: the flood made the task spin"
            );
            // A real message still arrives (by the liveness timer).
            a.send(msg(&pool, b"through")).unwrap();
            let m = b.recv_timeout(Duration::from_secs(20)).await.unwrap();
            assert_eq!(m.to_vec(), b"through");
            stop.store(true, Ordering::Relaxed);
            flood.join().unwrap();
        });
    }

    #[test]
    fn a_peer_that_closes_only_its_doorbell_is_looked_at_by_timer() {
        let (a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let pool = Pool::new(PoolConfig::named("deadbell"));
        rt().block_on(async {
            let b = AsyncChannel::new(b).unwrap();
            // The peer lives on but shuts its doorbell: ours hangs up.
            rustix::net::shutdown(&a.core().bell, rustix::net::Shutdown::Both).unwrap();
            let t = Instant::now();
            let r = b.recv_timeout(Duration::from_millis(300)).await;
            let elapsed = t.elapsed();
            assert_eq!(r.unwrap_err(), RecvError::TimedOut);
            let wakes = b.bell.wakes.load(Ordering::Relaxed);
            assert!(wakes <= bound(elapsed), "{wakes} wakes in {elapsed:?}");
            assert!(!b.channel().is_disconnected(), "the peer still lives");
            a.send(msg(&pool, b"late")).unwrap();
            let m = b.recv_timeout(Duration::from_secs(20)).await.unwrap();
            assert_eq!(m.to_vec(), b"late");
        });
    }

    #[test]
    fn a_peer_closing_cleanly_wakes_a_send_waiting_for_room() {
        let cfg = ChannelConfig {
            ring_entries: 8,
            ..ChannelConfig::default()
        };
        let (a, b) = Channel::pair(cfg).unwrap();
        let pool = Pool::new(PoolConfig::named("closewake"));
        rt().block_on(async {
            let a = AsyncChannel::new(a).unwrap();
            while a.try_send(msg(&pool, b"x")).is_ok() {}
            let b = std::sync::Arc::new(b);
            let closer = {
                let b = b.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    b.close(); // the peer lives on: only the close wakes us
                })
            };
            let r = ::tokio::time::timeout(Duration::from_secs(20), a.send(msg(&pool, b"y")))
                .await
                .expect("the close wakes the waiting send");
            assert_eq!(r.unwrap_err().kind(), SendErrorKind::Disconnected);
            closer.join().unwrap();
        });
    }

    #[test]
    fn a_message_too_big_for_what_the_peer_may_hold_waits_without_spinning() {
        let cfg = ChannelConfig {
            max_bytes_in_flight: 4096,
            ..ChannelConfig::default()
        };
        let (a, b) = Channel::pair(cfg).unwrap();
        let pool = Pool::new(PoolConfig::named("bytescap"));
        rt().block_on(async {
            let a = AsyncChannel::new(a).unwrap();
            let held = {
                a.send(msg(&pool, &[1; 3000])).await.unwrap();
                b.recv().unwrap()
            };
            let big = msg(&pool, &[2; 3000]);
            assert!(
                a.channel().prepare_send_sleep(1, 3000).unwrap(),
                "3000 + 3000 bytes exceed the cap: sleep"
            );
            let waiting = a.writable(&big);
            let t = Instant::now();
            let r = ::tokio::time::timeout(Duration::from_millis(200), waiting).await;
            assert!(r.is_err(), "it waits while the peer holds the first");
            let wakes = a.bell.wakes.load(Ordering::Relaxed);
            assert!(wakes <= bound(t.elapsed()), "{wakes} wakes: it spun");
            drop(held);
            b.flush();
            ::tokio::time::timeout(Duration::from_secs(20), a.writable(&big))
                .await
                .expect("room once the first comes back")
                .unwrap();
            a.send(big).await.unwrap();
        });
    }

    #[test]
    fn outside_a_runtime_new_says_what_to_do() {
        let (_a, b) = Channel::pair(ChannelConfig::default()).unwrap();
        let e = AsyncChannel::new(b).unwrap_err();
        assert!(e.to_string().contains("tokio runtime"), "{e}");
    }

    #[test]
    fn a_send_waiting_for_ring_space_goes_when_the_receiver_consumes() {
        let cfg = ChannelConfig {
            ring_entries: 8,
            ..ChannelConfig::default()
        };
        let (a, b) = Channel::pair(cfg).unwrap();
        let pool = Pool::new(PoolConfig::named("space"));
        rt().block_on(async {
            let a = AsyncChannel::new(a).unwrap();
            let b = AsyncChannel::new(b).unwrap();
            let sender = async {
                for i in 0..200u8 {
                    a.send(msg(&pool, &[i])).await.unwrap();
                }
            };
            let receiver = async {
                for i in 0..200u8 {
                    // Let the ring fill up now and then.
                    if i % 50 == 0 {
                        ::tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    assert_eq!(b.recv().await.unwrap().to_vec(), [i]);
                }
            };
            ::tokio::join!(sender, receiver);
        });
    }

    /// Point the descriptor `fd` at `/dev/null`: the socket end it held
    /// closes (as the dying peer's descriptors close, one at a time).
    fn close_under(fd: std::os::fd::BorrowedFd<'_>) {
        use std::os::fd::AsRawFd;
        let null = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: both descriptors are open; dup2 replaces `fd`'s open
        // file in place, and its owner later closes the /dev/null copy.
        assert!(unsafe { libc::dup2(null.as_raw_fd(), fd.as_raw_fd()) } >= 0);
    }

    #[test]
    fn a_dying_peer_is_found_however_often_the_waits_are_cancelled() {
        // The dying peer's doorbell end closes before its socket: the
        // waiter sees the hang-up while the peer still looks alive, and
        // from then on looks at the peer once per liveness interval. That
        // look must come even when every wait is cancelled before the
        // interval has passed (it used to restart with each new wait).
        let cfg = ChannelConfig {
            ring_entries: 8,
            ..ChannelConfig::default()
        };
        use std::os::fd::AsFd;
        let (a, b) = Channel::pair(cfg).unwrap();
        let pool = Pool::new(PoolConfig::named("cancelled-look"));
        rt().block_on(async {
            let a = AsyncChannel::new(a).unwrap();
            while a.try_send(msg(&pool, b"fill")).is_ok() {}
            let m = msg(&pool, b"kept");
            close_under(b.core().bell.as_fd());
            let t = Instant::now();
            let mut killed = false;
            let r = loop {
                ::tokio::select! {
                    r = a.writable(&m) => break r,
                    _ = ::tokio::time::sleep(Duration::from_millis(2)) => {}
                }
                if !killed && t.elapsed() > LIVENESS * 3 {
                    // Now the socket goes too: the peer has died.
                    close_under(b.core().sock.as_fd());
                    killed = true;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "the wait never found the dead peer"
                );
            };
            assert!(killed, "the wait ended before the peer died: {r:?}");
            assert_eq!(r.unwrap_err(), SendErrorKind::Disconnected);
        });
    }
}
