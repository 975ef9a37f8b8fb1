//! Rings for waiters that sleep in an event loop: each end's named bell
//! (`crate::bell::NamedBell`, announced in the ring file) and the two
//! halves of its sleeps, on the same flags as the blocking path.
//!
//! An event-loop waiter also looks again every liveness interval
//! (`crate::wait::LIVENESS`): a ring has no connection that hangs up when
//! its peer dies, so that timer is how a dead producer (or a dead slowest
//! consumer, for a producer waiting for room) is noticed — the same bound
//! the blocking path keeps.

use std::os::fd::{AsFd, BorrowedFd};

use rustix::io::Errno;

use super::consumer::Consumer;
use super::producer::Producer;
use super::protocol;
use super::{Overflow, ReadError, WriteError};
use crate::bell::NamedBell;
use crate::sync::Ordering;

impl Consumer {
    /// This consumer's named bell, bound (and announced in its slot) on
    /// first use.
    pub(crate) fn evented_bell(&mut self) -> Result<BorrowedFd<'_>, Errno> {
        if self.bell.is_none() {
            let b = NamedBell::bind()?;
            let s = self.ring().slot(self.slot());
            s.bell.store(b.id(), Ordering::Relaxed);
            // SYNC: SeqCst like every bitmap update; after the number, so a
            // producer that sees the bit finds it (it reads the number only
            // after swapping an armed word we store later still).
            self.ring()
                .control()
                .bell_consumers
                .fetch_or(1u64 << self.slot(), Ordering::SeqCst);
            self.bell = Some(b);
        }
        Ok(self.bell.as_ref().map(|b| b.as_fd()).expect("bound above"))
    }

    /// First half of a read's sleep: `true` to sleep until the bell rings
    /// (armed, flag set), `false` when the producer has published since.
    pub(crate) fn arm_read(&mut self) -> bool {
        let map = self.ring().clone();
        protocol::consumer_arm(map.producer(), map.slot(self.slot()), self.position_raw())
    }

    /// After a wake: take the rings off the bell.
    pub(crate) fn take_rings(&self) -> usize {
        self.bell.as_ref().map_or(0, NamedBell::drain)
    }

    /// The doorbell, once bound.
    pub(crate) fn bell_fd(&self) -> Option<BorrowedFd<'_>> {
        self.bell.as_ref().map(|b| b.as_fd())
    }

    /// Steps 4 and 2 of the loop in [`Consumer::doorbell`] at once, for an
    /// automatic doorbell ([`Consumer::auto_doorbell`]): take the old rings
    /// off the bell and arm it. `true`: something came (or the stream
    /// ended) meanwhile, so look again now. After a second such look the
    /// bell is rung by ourselves instead, so the caller's next poll returns
    /// at once. Does nothing (`false`) without an automatic doorbell.
    pub(crate) fn rearm_when_empty(&mut self, looks: &mut u32) -> bool {
        if !self.auto_arm {
            return false;
        }
        self.take_rings();
        // Armed and still nothing: the producer's next publish (or its
        // close, which rings every armed bell) rings us. The look after
        // arming also catches a close that raced with the arming.
        if self.arm_read() && !self.has_news() {
            return false;
        }
        *looks += 1;
        if *looks < 2 {
            return true;
        }
        self.ring_own_bell();
        false
    }

    /// Make our doorbell readable (something to look at is there).
    fn ring_own_bell(&mut self) {
        let Some(id) = self.bell.as_ref().map(NamedBell::id) else {
            return;
        };
        if self.ringer.is_none() {
            self.ringer = crate::bell::Ringer::new().ok();
        }
        if let Some(r) = &self.ringer {
            r.ring(id);
        }
    }

    /// Whether a non-blocking read or peek now would find something other
    /// than nothing: news, the end of the stream or an error.
    pub(crate) fn ready(&mut self) -> bool {
        self.has_news()
    }

    /// After a liveness interval without news: report a producer that died
    /// in the middle of our stream (as a blocking read does after a full
    /// slice).
    pub(crate) fn check_producer(&mut self) -> Result<(), ReadError> {
        self.check_producer_alive()
    }
}

impl Producer {
    /// This producer's named bell, bound and announced in the ring's
    /// control line on first use (consumers then ring it instead of waking
    /// the futex when they make room).
    pub(crate) fn evented_bell(&mut self) -> Result<BorrowedFd<'_>, Errno> {
        if self.bell.is_none() {
            let b = NamedBell::bind()?;
            // SYNC: Release pairs with the Acquire load in the consumers'
            // wake_producer; stored before we ever flag a cursor word.
            self.ring()
                .control()
                .producer_bell
                .store(b.id(), Ordering::Release);
            self.bell = Some(b);
        }
        Ok(self.bell.as_ref().map(|b| b.as_fd()).expect("bound above"))
    }

    /// First half of a write's sleep for a block of `len` bytes (only
    /// `Overflow::Block` waits): `Ok(true)` to sleep until the bell rings
    /// (the slowest consumer's cursor word carries our flag), `Ok(false)`
    /// when there is room now.
    pub(crate) fn arm_write(&mut self, len: usize) -> Result<bool, WriteError> {
        if self.geometry().overflow != Overflow::Block {
            return Ok(false);
        }
        let Some(slot) = self.blocked_on(len as u64)? else {
            return Ok(false);
        };
        let map = self.ring().clone();
        let word = &map.slot(slot).cursor;
        // SYNC: the RMW sets our flag (as protocol::producer_sleep); a
        // release after it changes the word and, seeing the flag, rings.
        word.fetch_or(1, Ordering::SeqCst);
        // Look again after flagging: room now, or another consumer became
        // the slowest (it would not ring us).
        if self.blocked_on(len as u64)? != Some(slot) {
            word.fetch_and(!1, Ordering::Relaxed);
            return Ok(false);
        }
        self.armed = Some(slot);
        Ok(true)
    }

    /// Second half: clear our flag after a wake.
    pub(crate) fn disarm_write(&mut self) {
        if let Some(slot) = self.armed.take() {
            self.ring()
                .slot(slot)
                .cursor
                .fetch_and(!1, Ordering::Relaxed);
        }
    }

    /// After a wake: take the rings off the bell.
    pub(crate) fn take_rings(&self) -> usize {
        self.bell.as_ref().map_or(0, NamedBell::drain)
    }

    /// A liveness interval passed while waiting: evict the consumer we
    /// wait for if it has died.
    pub(crate) fn check_consumers(&mut self) {
        if let Some(slot) = self.armed {
            self.evict_if_dead(slot);
        }
    }

    /// The doorbell, once bound.
    pub(crate) fn bell_fd(&self) -> Option<BorrowedFd<'_>> {
        self.bell.as_ref().map(|b| b.as_fd())
    }
}

/// The public event-loop calls (any loop: epoll, mio, asyncio, libuv; Rust
/// on tokio uses `zcio::tokio::AsyncConsumer`/`AsyncProducer`, built on the
/// same steps).
impl Consumer {
    /// The consumer's doorbell, for an event loop: a descriptor that
    /// becomes readable when the producer rang it — only after this
    /// consumer said it sleeps ([`Consumer::prepare_read_sleep`]) — bound
    /// (a named bell) and announced in the ring on the first call.
    ///
    /// The loop:
    /// 1. `try_read`/`try_peek`; on `WouldBlock`:
    /// 2. `prepare_read_sleep()`; if `false`, go to 1;
    /// 3. wait until the doorbell is readable **or 50 ms passed**
    ///    (the liveness interval of every blocking wait: a ring cannot hang
    ///    up on a dead producer, so the loop looks for itself);
    /// 4. [`Consumer::doorbell_rang`] (`Err` for a producer that died in
    ///    the middle of the stream), go to 1.
    ///
    /// # Errors
    /// When the bell (an abstract Unix socket) cannot be bound.
    pub fn doorbell(&mut self) -> Result<BorrowedFd<'_>, Errno> {
        self.evented_bell()
    }

    /// The doorbell for a loop that only polls a descriptor (C's
    /// `zcio_ring_fd`, Python's `RingConsumer.fileno()`): the same bell as
    /// [`Consumer::doorbell`], but steps 2 and 4 of its loop happen inside
    /// the non-blocking reads: from now on every `try_read`, `try_peek` or
    /// `peek_detached(_, Wait::No)` that returns `WouldBlock` has taken
    /// the old rings off the bell and armed it (looking again first if
    /// something came meanwhile). The loop is then:
    /// 1. poll the descriptor (readable: the producer published or closed
    ///    the ring since the last `WouldBlock`);
    /// 2. `try_read`/`try_peek` until `WouldBlock`; go to 1.
    ///
    /// The bell is armed by this call already (and rung by ourselves if
    /// data waits), so the first poll needs no read before it. A ring
    /// cannot hang up on a dead producer: a loop that must notice one polls
    /// with a timeout (50 ms, the liveness interval) and calls
    /// [`Consumer::doorbell_rang`] when it passes. Arming costs the
    /// producer one wake per arm (a `sendto`), never more.
    ///
    /// # Errors
    /// When the bell (a Unix datagram socket) cannot be bound.
    pub fn auto_doorbell(&mut self) -> Result<BorrowedFd<'_>, Errno> {
        self.evented_bell()?;
        if !self.auto_arm {
            self.auto_arm = true;
            // One look left: news now rings the bell instead (`false`).
            let mut looks = 1;
            let _ = self.rearm_when_empty(&mut looks);
        }
        Ok(self.bell.as_ref().map(|b| b.as_fd()).expect("bound above"))
    }

    /// Step 2 of the loop in [`Consumer::doorbell`]: arm the bell and set
    /// the sleep flag. `false`: something was published since, read now.
    /// Binds the bell first if [`Consumer::doorbell`] was not called.
    pub fn prepare_read_sleep(&mut self) -> bool {
        if self.bell.is_none() && self.evented_bell().is_err() {
            // No bell: do not sleep on one (the caller polls).
            return false;
        }
        self.arm_read()
    }

    /// Step 4: take the rings off the doorbell and, if nothing new came,
    /// report a producer that died in the middle of the stream
    /// (`ReadError::Disconnected`).
    pub fn doorbell_rang(&mut self) -> Result<(), ReadError> {
        self.take_rings();
        self.check_producer()
    }
}

impl Producer {
    /// The producer's doorbell, for an event loop waiting for room under
    /// `Overflow::Block` (see [`Consumer::doorbell`] for the loop, with
    /// `try_write` and [`Producer::prepare_write_sleep`]; the 50 ms look
    /// evicts a consumer that died while we waited for it).
    ///
    /// # Errors
    /// When the bell (an abstract Unix socket) cannot be bound.
    pub fn doorbell(&mut self) -> Result<BorrowedFd<'_>, Errno> {
        self.evented_bell()
    }

    /// Say "about to sleep until a block of `len` bytes fits": `Ok(false)`
    /// if it fits now (or the policy never waits).
    ///
    /// # Errors
    /// As the write would fail (`TooLarge`, …).
    pub fn prepare_write_sleep(&mut self, len: usize) -> Result<bool, WriteError> {
        if self.bell.is_none() && self.evented_bell().is_err() {
            return Ok(false);
        }
        self.arm_write(len)
    }

    /// After the loop woke (doorbell readable or 50 ms passed): take the
    /// rings, clear the sleep flag, evict the awaited consumer if it died.
    pub fn doorbell_rang(&mut self) {
        self.take_rings();
        self.check_consumers();
        self.disarm_write();
    }
}
