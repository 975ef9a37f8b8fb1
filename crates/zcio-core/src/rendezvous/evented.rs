//! The rendezvous for waiters that sleep in an event loop: the send in its
//! phases and the receive's half-sleep, on the connection's doorbell
//! (`crate::bell`; the same flags as the blocking path).

use std::os::fd::{AsFd, BorrowedFd};

use super::error::{IpcFail, RendezvousSendError};
use super::point::{Envelope, Rendezvous};
use super::slot::{self, Handover};
use crate::sys::peer;

impl Rendezvous {
    /// Switch to bell mode (both slots' bell words; sticky) and return the
    /// doorbell to register with the event loop.
    pub(crate) fn evented_bell(&self) -> BorrowedFd<'_> {
        slot::mark_recv_bell(self.rx_slot());
        slot::mark_send_bell(self.tx_slot());
        self.sh.bell.as_fd()
    }

    /// First half of a receive's sleep: `true` to sleep (our flag is set),
    /// `false` when a message is already there.
    pub(crate) fn arm_recv(&self) -> bool {
        slot::prepare_sleep(self.rx_slot()).is_some()
    }

    /// Whether a message waits (cheap, no flag).
    pub(crate) fn recv_ready(&self) -> bool {
        slot::ready(self.rx_slot())
    }

    /// First phase of a send: the descriptors on the socket, the message
    /// in the slot (the receiver woken). Returns its sequence number for
    /// [`Rendezvous::handover`] and [`Rendezvous::retract`].
    /// `WouldBlock` while another send of this endpoint (blocking or
    /// phased) is in flight: one message in the slot at a time.
    pub(crate) fn publish(&self, msg: &Envelope) -> Result<u64, IpcFail> {
        if peer::socket_hung_up(&self.sh.sock) {
            return Err(IpcFail::Disconnected);
        }
        if !self.claim_send() {
            return Err(IpcFail::WouldBlock);
        }
        let (bytes, fds) = msg.counted_size();
        // SYNC: no partner: a process-local note, read by `handover` once
        // the partner took this message (the send's own sequence).
        self.phased
            .store(bytes << 8 | fds, std::sync::atomic::Ordering::Relaxed);
        let r = self.prepare(msg).and_then(|raw| {
            slot::publish(self.tx_slot(), &raw, Some(&self.sh.bell))
                .map_err(|_| IpcFail::Protocol("corrupt slot state"))
        });
        if let Err(f) = r {
            self.counters.failed(f);
            self.release_send();
        }
        r
    }

    /// Whether our message `seq` still waits in the slot to be taken
    /// (cheap, no flag: for spinning).
    pub(crate) fn recv_ready_on_tx(&self, seq: u64) -> bool {
        let s = self.tx_slot().state.load(crate::sync::Ordering::Acquire);
        s & 3 == slot::FULL && s >> 4 == seq
    }

    /// Whether message `seq` was taken (then the send is complete);
    /// `Ok(false)` leaves our flag set: sleep until the doorbell rings.
    pub(crate) fn handover(&self, seq: u64) -> Result<bool, IpcFail> {
        match slot::arm_taken(self.tx_slot(), seq) {
            Ok(Handover::Taken) => {
                // SYNC: no partner: our own note of `publish` (see there).
                let p = self.phased.load(std::sync::atomic::Ordering::Relaxed);
                self.counters.sent((p >> 8, p & 0xff));
                self.release_send();
                Ok(true)
            }
            Ok(Handover::Pending(_)) => Ok(false),
            Err(_) => {
                // The slot is broken: this send is over either way.
                self.counters
                    .failed(IpcFail::Protocol("corrupt slot state"));
                self.release_send();
                Err(IpcFail::Protocol("corrupt slot state"))
            }
        }
    }

    /// Give up on message `seq`: `true` if it was taken back undelivered;
    /// `false` if the partner took it meanwhile (the send is then
    /// complete: the slot has been reset).
    pub(crate) fn retract(&self, seq: u64) -> bool {
        if slot::retract(self.tx_slot(), seq) {
            self.release_send();
            return true;
        }
        // Taken meanwhile: finish it (which ends the send). `retract`
        // gives up only when the slot no longer holds this message.
        if self.handover(seq) == Ok(false) {
            self.release_send();
        }
        false
    }

    /// Whether the partner's end of the connection is gone.
    pub(crate) fn peer_gone(&self) -> bool {
        peer::socket_hung_up(&self.sh.sock)
    }
}

/// The public event-loop calls (any loop; Rust on tokio uses
/// `zcio::tokio::AsyncRendezvous`, built on the same steps).
impl Rendezvous {
    /// The endpoint's doorbell, for an event loop: readable when the
    /// partner rang it — only after this endpoint said it sleeps
    /// ([`Rendezvous::prepare_recv_sleep`], [`Rendezvous::send_poll`]) —
    /// or hung up. The first call switches the endpoint to bell mode for
    /// good (the partner rings instead of waking futexes).
    ///
    /// A receive: `try_recv`; on `WouldBlock`, `prepare_recv_sleep()`; if
    /// `true`, wait until the doorbell is readable, then
    /// [`Rendezvous::doorbell_rang`]; again.
    ///
    /// A send, in three calls so that the loop can wait in between:
    /// [`Rendezvous::send_begin`] puts the message in the slot;
    /// [`Rendezvous::send_poll`] says whether the partner took it (if not,
    /// wait for the doorbell and ask again); [`Rendezvous::send_cancel`]
    /// gives up. Every begun send must end with `send_poll` returning
    /// `true` or with `send_cancel`, before the next one.
    pub fn doorbell(&self) -> BorrowedFd<'_> {
        self.evented_bell()
    }

    /// Say "about to sleep until a message comes": `false` if one is there
    /// already (receive it instead).
    pub fn prepare_recv_sleep(&self) -> bool {
        self.evented_bell();
        self.arm_recv()
    }

    /// After the loop found the doorbell readable: take the rings; `true`
    /// if the doorbell hung up (the partner is gone: the next call reports
    /// `Disconnected`).
    pub fn doorbell_rang(&self) -> bool {
        matches!(self.sh.bell.drain(), Err(crate::bell::Rung::HungUp))
    }

    /// Put `msg` in the slot for the partner (a send's first step); returns
    /// the send's number for [`Rendezvous::send_poll`] and
    /// [`Rendezvous::send_cancel`].
    ///
    /// # Errors
    /// `WouldBlock` while another send of this endpoint is in flight (one
    /// message in the slot at a time; a blocking send waits for a phased
    /// one instead); `TooLarge`, `Disconnected`, `Protocol`, `Os`: nothing
    /// was sent.
    pub fn send_begin(&self, msg: &Envelope) -> Result<u64, RendezvousSendError> {
        self.evented_bell();
        Ok(self.publish(msg)?)
    }

    /// Whether the partner took send `seq` (then the send is complete).
    /// `Ok(false)`: not yet — this endpoint's flag is set, wait for the
    /// doorbell.
    ///
    /// # Errors
    /// `Protocol` for a corrupt slot; `Disconnected` once the partner is
    /// gone (the message was taken back).
    pub fn send_poll(&self, seq: u64) -> Result<bool, RendezvousSendError> {
        if self.handover(seq)? {
            return Ok(true);
        }
        if self.peer_gone() {
            // Taken back, or taken by the partner just before it went.
            return if self.retract(seq) {
                Err(RendezvousSendError::Disconnected)
            } else {
                Ok(true)
            };
        }
        Ok(false)
    }

    /// Give up on send `seq`: `true` if the message was taken back
    /// undelivered, `false` if the partner had taken it (it was delivered).
    pub fn send_cancel(&self, seq: u64) -> bool {
        self.retract(seq)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::rendezvous::{RendezvousListener, RendezvousRecvError};

    fn pair(tag: &str) -> (RendezvousListener, Rendezvous, Rendezvous) {
        let p = std::env::temp_dir().join(format!("zcio-rdv-ev-{tag}-{}", std::process::id()));
        let l = RendezvousListener::bind(&p).unwrap();
        let t = std::thread::spawn(move || Rendezvous::connect(&p).unwrap());
        let s = l.accept().unwrap();
        (l, t.join().unwrap(), s)
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn a_phased_send_and_a_blocking_send_take_turns_not_blame_the_partner() {
        let (_l, a, b) = pair("turns");
        let seq = a.send_begin(&Envelope::new(1, &[1])).unwrap();
        // The slot is ours: a second phased send is refused, a blocking one
        // waits its turn (here until its timeout), neither is a peer fault.
        assert_eq!(
            a.send_begin(&Envelope::new(2, &[2])),
            Err(RendezvousSendError::WouldBlock)
        );
        assert_eq!(
            a.send_timeout(&Envelope::new(2, &[2]), Duration::from_millis(20)),
            Err(RendezvousSendError::TimedOut)
        );
        assert_eq!(a.send_poll(seq), Ok(false));
        assert_eq!(b.recv().unwrap().words, [1]);
        assert_eq!(a.send_poll(seq), Ok(true));
        // Free again: a blocking send and then a phased one go through.
        std::thread::scope(|s| {
            s.spawn(|| a.send(&Envelope::new(3, &[3])).unwrap());
            assert_eq!(b.recv().unwrap().words, [3]);
        });
        let seq = a.send_begin(&Envelope::new(4, &[4])).unwrap();
        assert!(a.send_cancel(seq), "taken back undelivered");
        assert_eq!(b.try_recv().unwrap_err(), RendezvousRecvError::WouldBlock);
    }

    #[test]
    #[cfg_attr(miri, ignore = "SOCK_SEQPACKET: Miri models only SOCK_STREAM")]
    fn a_blocking_wait_of_an_endpoint_in_bell_mode_is_still_woken() {
        let (_l, a, b) = pair("mixed");
        let _ = a.doorbell(); // bell mode for good
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(5));
                b.send(&Envelope::new(7, &[7])).unwrap();
            });
            // Woken by the futex wake beside the ring (a ring alone would
            // leave this to its liveness slice; the loom model
            // `loom_bell_mode_wakes_a_blocking_waiter_too` checks the wake).
            assert_eq!(a.recv().unwrap().words, [7]);
        });
    }
}
