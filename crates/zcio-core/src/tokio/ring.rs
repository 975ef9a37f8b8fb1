//! [`AsyncConsumer`] and [`AsyncProducer`]: the two ends of a named ring
//! with futures for their waits.

use std::io;
use std::os::fd::BorrowedFd;

use super::channel::with_timeout;
use super::doorbell::{AsyncBell, ItemBound};
use crate::ring::{Consumer, Peek, Producer, ReadError, Reservation, Wait, WriteError};
use crate::wait::{Readiness, LIVENESS};

/// A consumer's readiness: readable (news, the end of the stream or an
/// error), its slot's bell flag, its named bell (it sleeps on the bell: a
/// ring end in an event loop is in bell mode).
impl Readiness for Consumer {
    fn is_ready(&mut self) -> bool {
        self.ready()
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        self.arm_read().then_some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: std::time::Duration) {
        if let Some(b) = Consumer::bell_fd(self) {
            crate::wait::sleep_on_bell(b, slice);
        }
        Consumer::take_rings(self);
    }

    fn alive(&mut self) -> bool {
        self.check_producer().is_ok()
    }

    fn bell_fd(&self) -> Option<BorrowedFd<'_>> {
        Consumer::bell_fd(self)
    }

    fn take_rings(&self, _hung_up: bool) -> usize {
        Consumer::take_rings(self)
    }

    fn peer_gone(&self) -> bool {
        false // a ring's producer is checked by the liveness timer
    }
}

/// A producer's readiness: writable (room for a block with no payload;
/// only `Overflow::Block` ever waits), the slowest consumer's cursor flag,
/// its named bell.
impl Readiness for Producer {
    fn is_ready(&mut self) -> bool {
        !matches!(self.blocked_on(0), Ok(Some(_)))
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        matches!(self.arm_write(0), Ok(true)).then_some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: std::time::Duration) {
        if let Some(b) = Producer::bell_fd(self) {
            crate::wait::sleep_on_bell(b, slice);
        }
        self.doorbell_rang();
    }

    fn bell_fd(&self) -> Option<BorrowedFd<'_>> {
        Producer::bell_fd(self)
    }

    fn take_rings(&self, _hung_up: bool) -> usize {
        Producer::take_rings(self)
    }

    fn peer_gone(&self) -> bool {
        false // consumers are checked by the liveness timer
    }
}

fn bind_error(e: rustix::io::Errno) -> io::Error {
    io::Error::other(format!(
        "cannot bind the ring's named doorbell (an abstract Unix socket): {e}"
    ))
}

/// A ring consumer for async code: `read(&mut buf).await`,
/// `peek(max).await`, with no thread per waiting task. It sleeps on its
/// *named bell* (a datagram socket in the abstract namespace whose number
/// it writes into its slot of the ring file); the producer — blocking or
/// async, in any process — rings it when it publishes and finds the
/// consumer asleep, and when it closes the ring. Every
/// 50 ms (the liveness interval of every blocking wait) without news the consumer also
/// looks for itself: that is how a producer that died in the middle of the
/// stream is reported (`ReadError::Disconnected`), as in the blocking
/// calls, and what bounds the wait if the bell cannot be reached (another
/// network namespace).
///
/// Every wait is bounded by the consumer's
/// [`wait_bound`](Consumer::wait_bound) (one hour unless set with
/// [`Consumer::set_wait_bound`], before or through
/// [`consumer`](Self::consumer)): `ReadError::TimedOut` after it.
///
/// Cancel safety: [`read`](Self::read), [`peek`](Self::peek),
/// [`readable`](Self::readable) and `Stream::poll_next` are cancel-safe — a
/// dropped future has not moved the cursor.
///
/// It is also a [`Stream`](futures_core::Stream) of blocks, each copied out
/// into a `Vec<u8>` (`peek` reads in place), ending at the end of the
/// stream; each item waits at most the bound (then `Some(Err(TimedOut))`,
/// and the stream goes on).
pub struct AsyncConsumer {
    bell: AsyncBell<Consumer>,
    /// The liveness timer of the `Stream`'s waits.
    stream_timer: Option<std::pin::Pin<Box<::tokio::time::Sleep>>>,
    /// The wait bound of the `Stream`'s current item.
    item_bound: ItemBound,
}

impl std::fmt::Debug for AsyncConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncConsumer").finish_non_exhaustive()
    }
}

impl AsyncConsumer {
    /// Make `c` an async consumer (binds its named bell).
    ///
    /// # Errors
    /// Outside a tokio runtime, or when the bell cannot be bound.
    pub fn new(mut c: Consumer) -> io::Result<Self> {
        c.evented_bell().map_err(bind_error)?;
        Ok(Self {
            bell: AsyncBell::new(c)?,
            stream_timer: None,
            item_bound: ItemBound::default(),
        })
    }

    /// The consumer (its non-blocking calls, stats, seeks).
    pub fn consumer(&mut self) -> &mut Consumer {
        self.bell.owner_mut()
    }

    /// Wait until a non-blocking read or peek finds something: a block,
    /// the end of the stream or an error; at most the consumer's wait
    /// bound (`TimedOut` after it). Cancel-safe.
    pub async fn readable(&mut self) -> Result<(), ReadError> {
        let bound = self.bell.owner().wait_bound();
        with_timeout(bound, self.readable_unbounded())
            .await
            .unwrap_or(Err(ReadError::TimedOut))
    }

    async fn readable_unbounded(&mut self) -> Result<(), ReadError> {
        let mut woke = false;
        loop {
            if self.bell.owner_mut().ready() {
                if woke {
                    self.bell.record(true);
                }
                return Ok(());
            }
            if woke {
                self.bell.record(false);
            }
            if !self.bell.owner_mut().arm_read() {
                woke = false;
                continue;
            }
            // Only a ring counts for the flood guard: the liveness look of
            // an idle ring finds nothing by design.
            woke = self.bell.wait_at_most(LIVENESS).await;
            if !woke {
                self.bell.owner_mut().check_producer()?;
            }
        }
    }

    /// Copy the next block into `buf` (as [`Consumer::read`], waiting at
    /// most the consumer's wait bound); `Ok(0)` is the end of the stream.
    /// Cancel-safe.
    pub async fn read(&mut self, buf: &mut [u8]) -> Result<usize, ReadError> {
        let bound = self.bell.owner().wait_bound();
        let read = async {
            loop {
                match self.bell.owner_mut().try_read(buf) {
                    Err(ReadError::WouldBlock) => self.readable_unbounded().await?,
                    r => return r,
                }
            }
        };
        with_timeout(bound, read)
            .await
            .unwrap_or(Err(ReadError::TimedOut))
    }

    /// Borrow the next block in place (as [`Consumer::peek`], waiting at
    /// most the consumer's wait bound); `Ok(None)` is the end of the
    /// stream. Cancel-safe (the cursor moves when the returned `Peek` is
    /// released or dropped).
    pub async fn peek(&mut self, max: usize) -> Result<Option<Peek<'_>>, ReadError> {
        self.readable().await?;
        // After `readable` a peek finds its block (or the end or an
        // error); a block the producer lapped meanwhile is skipped inside,
        // and what remains may be nothing: then the caller sees
        // `WouldBlock` and peeks again.
        self.bell.owner_mut().try_peek(max)
    }
}

/// A ring producer for async code: `write(bytes).await` waits (under
/// `Overflow::Block`) in the event loop until the slowest consumer makes
/// room, on the producer's named bell, which that consumer rings when its
/// release finds the producer waiting. Every
/// 50 ms (the liveness interval of every blocking wait) it also looks for itself, evicting a
/// consumer that died (as the blocking calls do). The other policies never
/// wait. Every wait is bounded by the producer's
/// [`wait_bound`](Producer::wait_bound) (10 s unless set with
/// [`Producer::set_wait_bound`]): `WriteError::TimedOut` after it.
///
/// Cancel safety: [`write`](Self::write), [`write_tagged`](Self::write_tagged)
/// and [`writable`](Self::writable) are cancel-safe — nothing is written
/// unless the future completes.
pub struct AsyncProducer {
    bell: AsyncBell<Producer>,
}

impl std::fmt::Debug for AsyncProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncProducer").finish_non_exhaustive()
    }
}

impl AsyncProducer {
    /// Make `p` an async producer (binds its named bell and announces it
    /// in the ring).
    ///
    /// # Errors
    /// Outside a tokio runtime, or when the bell cannot be bound.
    pub fn new(mut p: Producer) -> io::Result<Self> {
        p.evented_bell().map_err(bind_error)?;
        Ok(Self {
            bell: AsyncBell::new(p)?,
        })
    }

    /// The producer (its non-blocking calls, geometry, close).
    pub fn producer(&mut self) -> &mut Producer {
        self.bell.owner_mut()
    }

    /// The producer back (it keeps its bell until dropped).
    pub fn into_inner(self) -> Producer {
        self.bell.into_owner()
    }

    /// Wait until a block of `len` bytes fits, at most the producer's wait
    /// bound (`TimedOut` after it). Cancel-safe.
    pub async fn writable(&mut self, len: usize) -> Result<(), WriteError> {
        let bound = self.bell.owner().wait_bound();
        with_timeout(bound, self.writable_unbounded(len))
            .await
            .unwrap_or(Err(WriteError::TimedOut))
    }

    async fn writable_unbounded(&mut self, len: usize) -> Result<(), WriteError> {
        let mut woke = false;
        loop {
            let p = self.bell.owner_mut();
            if !p.arm_write(len)? {
                if woke {
                    self.bell.record(true);
                }
                return Ok(());
            }
            if woke {
                self.bell.record(false);
            }
            // Only a ring counts for the flood guard (see `readable`).
            woke = self.bell.wait_at_most(LIVENESS).await;
            let p = self.bell.owner_mut();
            if !woke {
                p.check_consumers();
            }
            p.disarm_write();
        }
    }

    /// Write `bytes` as one block (as [`Producer::write`]), waiting for
    /// room under `Overflow::Block`, at most the producer's wait bound.
    /// Cancel-safe.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<usize, WriteError> {
        let bound = self.bell.owner().wait_bound();
        let write = async {
            loop {
                match self.bell.owner_mut().try_write(bytes) {
                    Err(WriteError::WouldBlock) => self.writable_unbounded(bytes.len()).await?,
                    r => return r,
                }
            }
        };
        with_timeout(bound, write)
            .await
            .unwrap_or(Err(WriteError::TimedOut))
    }

    /// Write `bytes` as one block with classification `tag`, waiting as
    /// [`AsyncProducer::write`] does. Cancel-safe.
    pub async fn write_tagged(&mut self, bytes: &[u8], tag: u32) -> Result<(), WriteError> {
        let bound = self.bell.owner().wait_bound();
        let write = async {
            loop {
                match self.bell.owner_mut().write_tagged(bytes, tag, Wait::No) {
                    Err(WriteError::WouldBlock) => self.writable_unbounded(bytes.len()).await?,
                    r => return r,
                }
            }
        };
        with_timeout(bound, write)
            .await
            .unwrap_or(Err(WriteError::TimedOut))
    }

    /// Reserve room for a block of `len` bytes to fill in place (as
    /// [`Producer::reserve`]), waiting at most the producer's wait bound.
    /// Cancel-safe (a dropped reservation publishes nothing).
    pub async fn reserve(&mut self, len: usize) -> Result<Reservation<'_>, WriteError> {
        self.writable(len).await?;
        self.bell.owner_mut().reserve(len, Wait::No)
    }
}

impl futures_core::Stream for AsyncConsumer {
    type Item = Result<Vec<u8>, ReadError>;

    /// The next block, copied out; `None` at the end of the stream.
    /// Cancel-safe. Waits at most the consumer's wait bound for each block
    /// (`Some(Err(TimedOut))` after it).
    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        let me = self.get_mut();
        let r = me.poll_next_unbounded(cx);
        match r {
            Poll::Ready(_) => me.item_bound.clear(),
            Poll::Pending => {
                let bound = me.bell.owner().wait_bound();
                if me.item_bound.expired(cx, bound) {
                    return Poll::Ready(Some(Err(ReadError::TimedOut)));
                }
            }
        }
        r
    }
}

impl AsyncConsumer {
    fn poll_next_unbounded(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Vec<u8>, ReadError>>> {
        use std::task::Poll;
        let me = self;
        loop {
            let c = me.bell.owner_mut();
            if c.ready() {
                let got = match c.try_peek(usize::MAX) {
                    Ok(Some(p)) => {
                        let v = p.to_vec();
                        p.release().map(|()| v)
                    }
                    Ok(None) => return Poll::Ready(None),
                    Err(e) => Err(e),
                };
                me.bell.record(true);
                match got {
                    // Lapped while copying (overwriting policies) or
                    // nothing after a skip: look again.
                    Err(ReadError::Lapped | ReadError::WouldBlock) => continue,
                    r => return Poll::Ready(Some(r)),
                }
            }
            if !c.arm_read() {
                continue;
            }
            match me.bell.poll_wait_at_most(cx, &mut me.stream_timer) {
                Poll::Pending => return Poll::Pending,
                // A ring that finds nothing counts for the flood guard; the
                // liveness look does not.
                Poll::Ready(true) => {
                    if !me.bell.owner_mut().ready() {
                        me.bell.record(false);
                    }
                }
                Poll::Ready(false) => {
                    if let Err(e) = me.bell.owner_mut().check_producer() {
                        return Poll::Ready(Some(Err(e)));
                    }
                }
            }
        }
    }
}

// tokio's reactor (epoll, sockets) is outside what Miri models: `scripts/miri`
// leaves these out (the tokio feature reaches this crate there through the
// `zcio` dev-dependency of its doc examples).
#[cfg(all(test, not(miri)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ring::{Layout, Options, Overflow, Start};

    /// Minutes of idle liveness looks must not cost the bell its trust (the
    /// flood guard counts only rings that found nothing): time is paused,
    /// so 40 looks pass at once.
    #[test]
    fn idle_liveness_looks_do_not_count_as_futile_wakes() {
        let name = format!("unit-aidle-{}", std::process::id());
        let map = Options::new()
            .layout(Layout::Variable)
            .overflow(Overflow::Block)
            .size(64 << 10)
            .create(&name)
            .unwrap();
        let mut p = Producer::attach(map.clone()).unwrap();
        let c = Consumer::attach(map, Start::Newest).unwrap();
        let rt = ::tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let mut c = AsyncConsumer::new(c).unwrap();
            let idle = ::tokio::time::timeout(Duration::from_secs(2), c.readable()).await;
            assert!(idle.is_err(), "nothing was written");
            assert_eq!(c.bell.futile(), 0, "the liveness looks counted as futile");
            p.write(b"after the idle time").unwrap();
            let mut buf = [0u8; 64];
            let n = c.read(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"after the idle time");
        });
        drop(p);
        let _ = crate::ring::unlink(&name);
    }
}
