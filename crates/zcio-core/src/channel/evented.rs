//! The two halves of a sleep, for waiters that sleep in an event loop
//! (tokio, Python's asyncio) rather than in a system call of their own.
//!
//! A blocking waiter sets its sleep flag, re-checks and sleeps in one call
//! (`spsc::Reader::wait_for_data`). An event-loop waiter cannot block, so
//! it *arms* (sets the flag in bell mode, re-checks), returns to its loop
//! with the doorbell registered, and *disarms* when the loop wakes it. The
//! flag, the bell word and the peer's side are exactly the blocking
//! path's: one protocol (see `crate::bell`).

use std::os::fd::{AsFd, BorrowedFd};

use crate::bell::Rung;
use crate::channel::core::{lock, Core};
use crate::channel::error::{Area, SendErrorKind};

/// Why a send could not go now, which decides the word to sleep on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendBlock {
    /// The message ring is full: sleep until the receiver consumes
    /// (`need` descriptor slots).
    Ring { need: usize },
    /// The peer holds as much as it may: sleep until a notice comes.
    Ledger,
}

impl SendBlock {
    /// The wait a failed non-blocking send calls for, if any.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn of(kind: SendErrorKind, need: usize) -> Option<Self> {
        match kind {
            SendErrorKind::WouldBlock => Some(Self::Ring { need }),
            SendErrorKind::TooManyInFlight(_) => Some(Self::Ledger),
            _ => None,
        }
    }
}

impl Core {
    /// Switch to bell mode and return the doorbell to register with the
    /// event loop.
    pub(crate) fn evented_bell(&self) -> BorrowedFd<'_> {
        self.enter_bell_mode();
        self.bell.as_fd()
    }

    /// First half of a receive's sleep: set the flag on our message ring.
    /// `true`: nothing is pending, sleep until the doorbell rings; `false`:
    /// a message is pending (the flag is cleared again), receive now.
    pub(crate) fn arm_recv(&self) -> bool {
        if self.msg_sleep().arm().is_some() {
            return true;
        }
        self.msg_sleep().disarm();
        false
    }

    /// Second half: clear the flag after a wake.
    pub(crate) fn disarm_recv(&self) {
        self.msg_sleep().disarm();
    }

    /// First half of a send's sleep, for the reason `why` (as
    /// [`Core::arm_recv`]). A corrupt ring is reported as the send error.
    pub(crate) fn arm_send(&self, why: SendBlock) -> Result<bool, SendErrorKind> {
        let mut tx = lock(&self.tx);
        // The receiver must see what we deferred waking it for, or it may
        // never consume or release what we are about to wait for.
        self.wake_deferred_locked(&mut tx);
        match why {
            SendBlock::Ring { need } => match tx.ring.arm_space(need) {
                Ok(Some(_)) => Ok(true),
                Ok(None) => {
                    tx.ring.disarm_space();
                    Ok(false)
                }
                Err(_) => {
                    tx.ring.disarm_space();
                    self.corrupt_locked(&mut tx, Area::MessageRing);
                    Err(SendErrorKind::Corrupt)
                }
            },
            SendBlock::Ledger => {
                drop(tx);
                if self.notice_sleep().arm().is_some() {
                    return Ok(true);
                }
                self.notice_sleep().disarm();
                Ok(false)
            }
        }
    }

    /// Second half of a send's sleep.
    pub(crate) fn disarm_send(&self, why: SendBlock) {
        match why {
            SendBlock::Ring { .. } => lock(&self.tx).ring.disarm_space(),
            SendBlock::Ledger => self.notice_sleep().disarm(),
        }
    }

    /// Take the rings without the reactor's word on a hang-up: `true` if the
    /// doorbell has hung up (the peer was checked).
    pub(crate) fn take_rings_checked(&self) -> bool {
        if self.bell.drain() == Err(Rung::HungUp) {
            self.check_peer();
            return true;
        }
        false
    }

    /// Take the rings queued on our doorbell after the event loop said it
    /// is readable; on a hang-up, find out whether the peer is gone (then
    /// the next receive or send reports it). Returns how many rings there
    /// were (0 after a hang-up or a spurious readiness).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn take_rings(&self, hung_up: bool) -> usize {
        match self.bell.drain() {
            Ok(n) if !hung_up => n,
            Ok(_) | Err(Rung::HungUp) => {
                self.check_peer();
                0
            }
            Err(_) => 0,
        }
    }
}

impl Core {
    /// What a send of `slices` descriptors and `bytes` bytes would wait for
    /// now, if anything (takes in the notices that came back first). The
    /// same limits as the send itself (`tx::wait_for_ledger_room`).
    pub(crate) fn send_blocked(
        &self,
        slices: usize,
        bytes: u64,
    ) -> Result<Option<SendBlock>, SendErrorKind> {
        if self.is_gone() || self.peer_closed() {
            return Err(SendErrorKind::Disconnected);
        }
        let mut tx = lock(&self.tx);
        self.drain_locked(&mut tx);
        match tx.ring.free_slots() {
            Ok(f) if f < slices => return Ok(Some(SendBlock::Ring { need: slices })),
            Ok(_) => {}
            Err(_) => {
                self.corrupt_locked(&mut tx, Area::MessageRing);
                return Err(SendErrorKind::Corrupt);
            }
        }
        let cap = self.cfg.max_in_flight.min(tx.notices.capacity());
        if tx.ledger.len() + slices > cap
            || (!tx.ledger.is_empty()
                && tx.ledger.bytes().saturating_add(bytes) > self.cfg.max_bytes_in_flight)
        {
            return Ok(Some(SendBlock::Ledger));
        }
        Ok(None)
    }
}
