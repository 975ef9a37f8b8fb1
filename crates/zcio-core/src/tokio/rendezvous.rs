//! [`AsyncRendezvous`]: a rendezvous endpoint whose waits are futures.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use super::doorbell::{AsyncBell, ItemBound};
use crate::rendezvous::{slot, IpcFail};
use crate::rendezvous::{
    Envelope, Rendezvous, RendezvousCallError, RendezvousRecvError, RendezvousSendError,
};
use crate::wait::{spin_until, Readiness, SpinPolicy};

/// An endpoint's readiness: its receive side (a message in the slot it
/// receives from, that slot's state word), its partner's socket, and its
/// doorbell.
impl Readiness for Rendezvous {
    fn is_ready(&mut self) -> bool {
        slot::ready(self.rx_slot())
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        slot::prepare_sleep(self.rx_slot())
    }

    fn sleep(&mut self, armed: u32, slice: std::time::Duration) {
        crate::sync::futex_wait(&self.rx_slot().state, armed, slice);
    }

    fn alive(&mut self) -> bool {
        !Rendezvous::peer_gone(self)
    }

    fn bell_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.evented_bell())
    }

    fn take_rings(&self, _hung_up: bool) -> usize {
        // Whether the partner is gone is the socket's to say (peer_gone).
        self.sh.bell.drain().unwrap_or(0)
    }

    fn peer_gone(&self) -> bool {
        Rendezvous::peer_gone(self)
    }
}

/// A rendezvous endpoint for async code: `recv().await`, `send(&m).await`,
/// `call(&m).await`, with no thread per waiting task (the endpoint's
/// doorbell in tokio's reactor; the partner may be blocking or async, in
/// any language). A partner that dies wakes the task (the doorbell hangs
/// up) and the call reports `Disconnected`. The endpoint's configured
/// timeouts bound every call, as in the blocking API.
///
/// Cancel safety:
///
/// | method | cancel-safe | what a dropped future means |
/// |---|---|---|
/// | [`recv`](Self::recv), [`recv_timeout`](Self::recv_timeout) | yes | no message was taken |
/// | [`send`](Self::send), [`send_timeout`](Self::send_timeout) | no | the message is retracted if the partner had not taken it yet; if it had, it was delivered |
/// | [`call`](Self::call) | no | as `send`, and an answer already sent stays for the next `recv` |
/// | `Stream::poll_next` | yes | as `recv` |
///
/// It is also a [`Stream`](futures_core::Stream) of the partner's messages,
/// which ends when the partner is gone; each item waits at most the
/// endpoint's `recv_timeout` (then `Some(Err(TimedOut))`, and the stream
/// goes on).
///
/// Sends are serialised (one message in flight per direction is the
/// rendezvous' nature); receives may be awaited from several tasks.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use zcio::rendezvous::{Envelope, Rendezvous, RendezvousListener};
/// use zcio::tokio::AsyncRendezvous;
///
/// let dir = std::env::temp_dir().join(format!("zcio-doc-ardv-{}", std::process::id()));
/// let listener = RendezvousListener::bind(&dir)?;
/// let server = std::thread::spawn(move || -> Result<(), zcio::Error> {
///     let ep = listener.accept()?;
///     let m = ep.recv()?;
///     ep.send(&Envelope::new(m.label, &[m.words[0] * 2]))?;
///     Ok(())
/// });
/// let ep = AsyncRendezvous::new(Rendezvous::connect(&dir)?)?;
/// let answer = ep.call(&Envelope::new(1, &[21])).await?;
/// assert_eq!(answer.words, [42]);
/// server.join().unwrap()?;
/// # Ok(())
/// # }
/// ```
pub struct AsyncRendezvous {
    bell: AsyncBell<Rendezvous>,
    /// One send at a time.
    sending: ::tokio::sync::Mutex<()>,
    /// The liveness timer of the `Stream`'s waits (a distrusted bell).
    stream_timer: Option<std::pin::Pin<Box<::tokio::time::Sleep>>>,
    /// The `recv_timeout` of the `Stream`'s current item.
    item_bound: ItemBound,
}

impl std::fmt::Debug for AsyncRendezvous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncRendezvous")
            .field("endpoint", self.bell.owner())
            .finish_non_exhaustive()
    }
}

/// A published message until it is taken: dropped early, it retracts.
struct InFlight<'a> {
    ep: &'a Rendezvous,
    seq: u64,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.ep.retract(self.seq);
        }
    }
}

impl AsyncRendezvous {
    /// Make `ep` an async endpoint (bell mode, for good).
    ///
    /// # Errors
    /// Outside a tokio runtime, or when the reactor refuses the doorbell.
    pub fn new(ep: Rendezvous) -> io::Result<Self> {
        Ok(Self {
            bell: AsyncBell::new(ep)?,
            sending: ::tokio::sync::Mutex::new(()),
            stream_timer: None,
            item_bound: ItemBound::default(),
        })
    }

    /// The endpoint (its configuration, partner, non-blocking calls).
    pub fn endpoint(&self) -> &Rendezvous {
        self.bell.owner()
    }

    /// Spin until `done`, for at most the task budget (`wait::spin_until`,
    /// the spin of every waiter; a fresh budget per wait).
    fn spin(&self, done: impl FnMut() -> bool) -> bool {
        let mut b = SpinPolicy::current().task_budget(Duration::MAX);
        spin_until(done, &mut b, None, false, false)
    }

    /// Wait for the partner's next message, at most the endpoint's
    /// `recv_timeout`. Cancel-safe.
    pub async fn recv(&self) -> Result<Envelope, RendezvousRecvError> {
        let t = self.endpoint().config().recv_timeout;
        self.recv_timeout(t).await
    }

    /// Wait for the partner's next message, at most `timeout`.
    /// Cancel-safe.
    pub async fn recv_timeout(&self, timeout: Duration) -> Result<Envelope, RendezvousRecvError> {
        let ep = self.endpoint();
        let wait = async {
            let mut woke = false;
            loop {
                match ep.try_recv() {
                    Ok(m) => {
                        if woke {
                            self.bell.record(true);
                        }
                        return Ok(m);
                    }
                    Err(RendezvousRecvError::WouldBlock) => {}
                    Err(e) => return Err(e),
                }
                if woke {
                    self.bell.record(false);
                }
                if self.spin(|| ep.recv_ready()) || !ep.arm_recv() {
                    woke = false;
                    continue;
                }
                self.bell.wait().await;
                woke = true;
            }
        };
        super::channel::with_timeout(timeout, wait)
            .await
            .unwrap_or(Err(RendezvousRecvError::TimedOut))
    }

    /// Send `msg` and wait until the partner took it, at most the
    /// endpoint's `send_timeout` (then it is retracted: `TimedOut`). Not
    /// cancel-safe (see the type's docs).
    pub async fn send(&self, msg: &Envelope) -> Result<(), RendezvousSendError> {
        let t = self.endpoint().config().send_timeout;
        self.send_timeout(msg, t).await
    }

    /// Send `msg`, waiting at most `timeout` for the partner to take it.
    pub async fn send_timeout(
        &self,
        msg: &Envelope,
        timeout: Duration,
    ) -> Result<(), RendezvousSendError> {
        let start = ::tokio::time::Instant::now();
        let left = || timeout.saturating_sub(start.elapsed());
        let _one = self.sending.lock().await;
        let ep = self.endpoint();
        // A blocking send of another thread may hold the slot: wait for it
        // (briefly polling: it ends when its partner takes it or it times
        // out), within our own bound.
        let seq = loop {
            match ep.publish(msg) {
                Ok(seq) => break seq,
                Err(IpcFail::WouldBlock) if !left().is_zero() => {
                    ::tokio::time::sleep(left().min(Duration::from_micros(200))).await;
                }
                Err(IpcFail::WouldBlock) => return Err(RendezvousSendError::TimedOut),
                Err(e) => return Err(e.into()),
            }
        };
        let mut flight = InFlight {
            ep,
            seq,
            done: false,
        };
        let wait = async {
            let mut woke = false;
            loop {
                // A running partner takes it within microseconds: spin
                // first, then look (which sets our flag if it is not taken).
                self.spin(|| !ep.recv_ready_on_tx(seq));
                if ep.handover(seq)? {
                    if woke {
                        self.bell.record(true);
                    }
                    return Ok(());
                }
                if woke {
                    self.bell.record(false);
                }
                if ep.peer_gone() {
                    return Err(RendezvousSendError::Disconnected);
                }
                self.bell.wait().await;
                woke = true;
            }
        };
        let r = super::channel::with_timeout(left(), wait).await;
        match r {
            Some(Ok(())) => {
                flight.done = true;
                Ok(())
            }
            Some(Err(e)) => {
                flight.done = true;
                if ep.retract(seq) {
                    Err(e)
                } else {
                    Ok(()) // taken after all: delivered
                }
            }
            None => {
                flight.done = true;
                if ep.retract(seq) {
                    Err(RendezvousSendError::TimedOut)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Send `msg`, then wait for the partner's answer (its next message):
    /// each half bounded by the endpoint's timeouts. Not cancel-safe.
    pub async fn call(&self, msg: &Envelope) -> Result<Envelope, RendezvousCallError> {
        self.send(msg).await?;
        Ok(self.recv().await?)
    }
}

impl futures_core::Stream for AsyncRendezvous {
    type Item = Result<Envelope, RendezvousRecvError>;

    /// The partner's next message; `None` once it is gone. Cancel-safe.
    /// Waits at most the endpoint's `recv_timeout` for each message
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
                let bound = me.endpoint().config().recv_timeout;
                if me.item_bound.expired(cx, bound) {
                    return Poll::Ready(Some(Err(RendezvousRecvError::TimedOut)));
                }
            }
        }
        r
    }
}

impl AsyncRendezvous {
    fn poll_next_unbounded(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Envelope, RendezvousRecvError>>> {
        use std::task::Poll;
        let me = self;
        loop {
            match me.bell.owner().try_recv() {
                Ok(m) => {
                    me.bell.record(true);
                    return Poll::Ready(Some(Ok(m)));
                }
                Err(RendezvousRecvError::WouldBlock) => {}
                Err(RendezvousRecvError::Disconnected) => return Poll::Ready(None),
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
            if !me.bell.owner().arm_recv() {
                continue;
            }
            if me.bell.poll_wait(cx, &mut me.stream_timer).is_pending() {
                return Poll::Pending;
            }
            if !me.bell.owner().recv_ready() {
                me.bell.record(false);
            }
        }
    }
}
