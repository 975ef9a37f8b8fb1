//! A doorbell registered with tokio's reactor: how an async waiter of any
//! transport sleeps (see `crate::bell` for the protocol). The transport end
//! is a [`Readiness`], the one trait every waiter is built on; the reactor
//! uses its event-loop half (`bell_fd`, `take_rings`, `peer_gone`).
//!
//! Besides waiting, it guards the task against its peer. A wake that finds
//! nothing new is *futile*; an honest peer causes one now and then (it
//! rang for a flag we had set, while we found the message anyway). After
//! `FLOOD_LIMIT` futile wakes in a row — a peer that rings in a flood —
//! or once the doorbell has hung up while the peer still lives (it closed
//! only its bell), the waiter stops trusting the bell and looks every
//! [`LIVENESS`](crate::wait::LIVENESS) instead: the task neither spins
//! nor hangs. A wake that finds something restores trust (unless the bell
//! is dead).
//!
//! Those looks are paced by one stamp per doorbell, not by a timer per
//! future: a waiter whose futures are cancelled over and over (a `select!`
//! against a shorter timer, a `timeout` around each call) still looks at
//! its peer once a liveness interval has passed since the last look, so a
//! dead peer is found in bounded time whatever the cancellations.

use std::future::Future as _;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use ::tokio::time::Sleep;

use crate::wait::{Readiness, LIVENESS};

/// Futile wakes in a row after which the bell is not trusted.
pub(crate) const FLOOD_LIMIT: u32 = 32;

/// The registration: `AsyncFd` needs an owner of the descriptor.
pub(crate) struct Reg<T>(pub T);

impl<T: Readiness> AsRawFd for Reg<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.0
            .bell_fd()
            .expect("a doorbell before registration")
            .as_raw_fd()
    }
}

/// A transport end's doorbell in tokio's reactor.
pub(crate) struct AsyncBell<T: Readiness> {
    fd: AsyncFd<Reg<T>>,
    /// Futile wakes in a row.
    futile: AtomicU32,
    /// The doorbell hung up while the peer lived on: never trust it again.
    dead: AtomicBool,
    /// When the peer was last looked at (nanoseconds after `epoch`),
    /// shared by every wait of this end.
    looked: AtomicU64,
    epoch: Instant,
    /// Wakes so far (bell or timer), for tests.
    #[cfg(test)]
    pub(crate) wakes: std::sync::atomic::AtomicU64,
}

/// tokio's reactor is needed to register the doorbell.
pub fn no_runtime() -> io::Error {
    io::Error::other(
        "no tokio runtime: create async zcio handles inside a runtime with IO and time \
         enabled (#[tokio::main], or Builder::enable_all)",
    )
}

impl<T: Readiness + Send + 'static> AsyncBell<T> {
    /// Register `owner`'s doorbell with the current runtime's reactor.
    pub(crate) fn new(owner: T) -> io::Result<Self> {
        if ::tokio::runtime::Handle::try_current().is_err() {
            return Err(no_runtime());
        }
        // The descriptor is the owner's doorbell, which the owner (a
        // transport end, moved into the registration) keeps open and never
        // replaces for as long as it lives; `Reg` returns that same fd on
        // every call.
        // SAFETY: as argued just above.
        let fd = unsafe { AsyncFd::register_with_interest(Reg(owner), Interest::READABLE) }
            .map_err(io::Error::from)?;
        Ok(Self {
            fd,
            futile: AtomicU32::new(0),
            dead: AtomicBool::new(false),
            looked: AtomicU64::new(0),
            epoch: Instant::now(),
            #[cfg(test)]
            wakes: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// The transport end.
    pub(crate) fn owner(&self) -> &T {
        &self.fd.get_ref().0
    }

    /// The transport end back (deregistered).
    pub(crate) fn into_owner(self) -> T {
        self.fd.into_inner().0
    }

    /// The transport end, for calls that need it exclusively.
    pub(crate) fn owner_mut(&mut self) -> &mut T {
        &mut self.fd.get_mut().0
    }

    /// [`AsyncBell::wait`], but at most `t`: `false` if `t` passed first
    /// (for peers that cannot hang a doorbell up when they die: the waiter
    /// then checks them itself).
    /// The interval is counted from this end's last look at its peer, not
    /// from this call: cancelled waits do not postpone the look.
    pub(crate) async fn wait_at_most(&self, t: Duration) -> bool {
        let left = self.until_look(t);
        if left.is_zero() || ::tokio::time::timeout(left, self.wait()).await.is_err() {
            self.looked_now();
            return false;
        }
        true
    }

    /// How long until the next look at the peer is due, `every` after the
    /// last one.
    fn until_look(&self, every: Duration) -> Duration {
        let last = Duration::from_nanos(self.looked.load(Ordering::Relaxed));
        (last + every).saturating_sub(self.epoch.elapsed())
    }

    /// Record a look at the peer (the caller looks now).
    fn looked_now(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.looked.store(now, Ordering::Relaxed);
    }

    /// Look at the peer (take the rings as after a hang-up, which checks
    /// it) and record the look.
    fn look(&self) {
        self.looked_now();
        self.owner().take_rings(true);
    }

    /// A liveness timer that ends when the next look is due.
    fn look_timer(&self) -> Pin<Box<Sleep>> {
        Box::pin(::tokio::time::sleep(self.until_look(LIVENESS)))
    }

    /// Whether to wait on a timer instead of the bell.
    fn distrusted(&self) -> bool {
        self.dead.load(Ordering::Relaxed) || self.futile.load(Ordering::Relaxed) >= FLOOD_LIMIT
    }

    /// Futile wakes in a row so far (tests).
    #[cfg(test)]
    pub(crate) fn futile(&self) -> u32 {
        self.futile.load(Ordering::Relaxed)
    }

    /// After a wake: whether it found what the waiter waited for.
    pub(crate) fn record(&self, found: bool) {
        if found {
            self.futile.store(0, Ordering::Relaxed);
        } else {
            let _ = self
                .futile
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |f| {
                    Some(f.saturating_add(1))
                });
        }
    }

    /// Take the rings after a readiness; a hang-up while the peer lives
    /// kills the bell.
    fn took(&self, hung_up: bool) {
        #[cfg(test)]
        self.wakes.fetch_add(1, Ordering::Relaxed);
        self.owner().take_rings(hung_up);
        if hung_up && !self.owner().peer_gone() {
            self.dead.store(true, Ordering::Relaxed);
        }
    }

    /// Sleep until the doorbell rings or the peer hangs up (or one
    /// liveness slice passes, when the bell is not trusted). Any number of
    /// tasks may wait at once. Cancel-safe: dropping it loses nothing.
    pub(crate) async fn wait(&self) {
        if self.distrusted() {
            ::tokio::time::sleep(self.until_look(LIVENESS)).await;
            #[cfg(test)]
            self.wakes.fetch_add(1, Ordering::Relaxed);
            self.look();
            return;
        }
        match self.fd.readable().await {
            Ok(mut g) => {
                let hung_up = g.ready().is_read_closed();
                self.took(hung_up);
                g.clear_ready();
            }
            // The reactor refused (it is shutting down): do not spin.
            Err(_) => ::tokio::time::sleep(LIVENESS).await,
        }
    }

    /// [`AsyncBell::wait`] as a poll, for one task at a time (a `Stream`):
    /// `timer` keeps the liveness timer between polls.
    pub(crate) fn poll_wait(
        &self,
        cx: &mut Context<'_>,
        timer: &mut Option<Pin<Box<Sleep>>>,
    ) -> Poll<()> {
        if self.distrusted() {
            let t = timer.get_or_insert_with(|| self.look_timer());
            if t.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            *timer = None;
            self.look();
            return Poll::Ready(());
        }
        match self.fd.poll_read_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(mut g)) => {
                let hung_up = g.ready().is_read_closed();
                self.took(hung_up);
                g.clear_ready();
                Poll::Ready(())
            }
            Poll::Ready(Err(_)) => {
                self.dead.store(true, Ordering::Relaxed);
                Poll::Ready(())
            }
        }
    }

    /// [`AsyncBell::poll_wait`], but ready after one liveness interval
    /// at the latest (`Ready(false)`: the interval passed; look at the peer):
    /// for peers that cannot hang a doorbell up when they die (rings).
    /// `timer` keeps the interval between polls.
    pub(crate) fn poll_wait_at_most(
        &self,
        cx: &mut Context<'_>,
        timer: &mut Option<Pin<Box<Sleep>>>,
    ) -> Poll<bool> {
        if !self.distrusted() {
            match self.fd.poll_read_ready(cx) {
                Poll::Ready(Ok(mut g)) => {
                    let hung_up = g.ready().is_read_closed();
                    self.took(hung_up);
                    g.clear_ready();
                    *timer = None;
                    return Poll::Ready(true);
                }
                Poll::Ready(Err(_)) => self.dead.store(true, Ordering::Relaxed),
                Poll::Pending => {}
            }
        }
        let t = timer.get_or_insert_with(|| self.look_timer());
        if t.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        *timer = None;
        self.look();
        Poll::Ready(false)
    }
}

/// The bound on one item of a `Stream` (the default wait of its `recv`, of
/// its `read`): armed when a poll starts to wait, cleared when an item is
/// returned.
#[derive(Default)]
pub(crate) struct ItemBound(Option<Pin<Box<Sleep>>>);

impl ItemBound {
    /// Whether `bound` has passed since this item's wait began (arming
    /// the timer on the first call; a bound too long to represent never
    /// passes). Call it before returning `Pending`, so that the timer
    /// wakes the task; `true` clears it for the next item.
    pub(crate) fn expired(&mut self, cx: &mut Context<'_>, bound: Duration) -> bool {
        let t = match &mut self.0 {
            Some(t) => t,
            None => match ::tokio::time::Instant::now().checked_add(bound) {
                Some(at) => self.0.insert(Box::pin(::tokio::time::sleep_until(at))),
                None => return false,
            },
        };
        if t.as_mut().poll(cx).is_ready() {
            self.0 = None;
            return true;
        }
        false
    }

    /// An item was returned: the next one has a bound of its own.
    pub(crate) fn clear(&mut self) {
        self.0 = None;
    }
}
