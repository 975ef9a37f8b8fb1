//! Open waits: the first message from any of several partners, and the
//! server's reply-then-receive — the public calls on the open wait every
//! receive goes through (`wait_any` of `point.rs`: one `futex_waitv` over
//! the partners' slots).

use std::time::{Duration, Instant};

use super::error::{RendezvousCallError, RendezvousRecvError};
use super::point::{wait_any, Envelope, Rendezvous, Wait};

impl Rendezvous {
    /// Open wait: the first message from any of `eps`, as `(index, message)`,
    /// at most the shortest [`recv_timeout`](super::RendezvousConfig::recv_timeout)
    /// among them. Partners that hung up are skipped.
    ///
    /// # Errors
    ///
    /// `Disconnected` once every partner has hung up (or `eps` is empty),
    /// `TimedOut`, `Protocol`.
    pub fn recv_any(eps: &[&Rendezvous]) -> Result<(usize, Envelope), RendezvousRecvError> {
        recv_any_with(eps, Wait::For(default_recv_timeout(eps)))
    }

    /// Take a message from the first of `eps` that has one waiting; never
    /// sleeps.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when none has; `Disconnected` when every partner has hung up;
    /// `Protocol`.
    pub fn try_recv_any(eps: &[&Rendezvous]) -> Result<(usize, Envelope), RendezvousRecvError> {
        recv_any_with(eps, Wait::Try)
    }

    /// Open wait for at most `timeout`.
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::recv_any`].
    pub fn recv_any_timeout(
        eps: &[&Rendezvous],
        timeout: Duration,
    ) -> Result<(usize, Envelope), RendezvousRecvError> {
        recv_any_with(eps, Wait::For(timeout))
    }

    /// A server's step: reply to this partner (bounded by its
    /// [`send_timeout`](super::RendezvousConfig::send_timeout)), then wait for
    /// the next message from any of `eps` (as [`Rendezvous::recv_any`]).
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::send`] (the reply was not delivered) or [`Rendezvous::recv_any`].
    pub fn reply_and_recv(
        &self,
        reply: &Envelope,
        eps: &[&Rendezvous],
    ) -> Result<(usize, Envelope), RendezvousCallError> {
        self.send(reply)?;
        Ok(Self::recv_any(eps)?)
    }

    /// Reply to this partner, then wait for the next message from any of `eps`, both
    /// within `timeout` in all.
    ///
    /// # Errors
    ///
    /// As [`Rendezvous::reply_and_recv`].
    pub fn reply_and_recv_timeout(
        &self,
        reply: &Envelope,
        eps: &[&Rendezvous],
        timeout: Duration,
    ) -> Result<(usize, Envelope), RendezvousCallError> {
        let deadline = Instant::now().checked_add(timeout);
        self.send_timeout(reply, timeout)?;
        let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
        Ok(Self::recv_any_timeout(eps, left)?)
    }
}

fn recv_any_with(
    eps: &[&Rendezvous],
    wait: Wait,
) -> Result<(usize, Envelope), RendezvousRecvError> {
    let mut m = Envelope::default();
    let i = wait_any(eps, wait, |e, raw| e.finish(raw, &mut m))?;
    Ok((i, m))
}

fn default_recv_timeout(eps: &[&Rendezvous]) -> Duration {
    eps.iter()
        .map(|e| e.config().recv_timeout)
        .min()
        .unwrap_or(Duration::ZERO)
}
