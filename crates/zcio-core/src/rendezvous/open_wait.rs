//! Open waits: the first message from any of several partners (one
//! `futex_waitv` over their slots), and the server's reply-then-receive.

use std::time::{Duration, Instant};

use super::error::{IpcFail, RendezvousCallError, RendezvousRecvError};
use super::point::{spin_until, Envelope, Rendezvous, Wait, SLICE};
use super::slot::{self, Raw};
use crate::sys::peer;

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
/// As [`recv_any`].
pub fn recv_any_timeout(
    eps: &[&Rendezvous],
    timeout: Duration,
) -> Result<(usize, Envelope), RendezvousRecvError> {
    recv_any_with(eps, Wait::For(timeout))
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

/// A server's step: reply to `to` (bounded by its
/// [`send_timeout`](super::RendezvousConfig::send_timeout)), then wait for
/// the next message from any of `eps` (as [`recv_any`]).
///
/// # Errors
///
/// As [`Rendezvous::send`] (the reply was not delivered) or [`recv_any`].
pub fn reply_and_recv(
    to: &Rendezvous,
    reply: &Envelope,
    eps: &[&Rendezvous],
) -> Result<(usize, Envelope), RendezvousCallError> {
    to.send(reply)?;
    Ok(recv_any(eps)?)
}

/// Reply to `to`, then wait for the next message from any of `eps`, both
/// within `timeout` in all.
///
/// # Errors
///
/// As [`reply_and_recv`].
pub fn reply_and_recv_timeout(
    to: &Rendezvous,
    reply: &Envelope,
    eps: &[&Rendezvous],
    timeout: Duration,
) -> Result<(usize, Envelope), RendezvousCallError> {
    let deadline = Instant::now().checked_add(timeout);
    to.send_timeout(reply, timeout)?;
    let left = deadline.map_or(timeout, |d| d.saturating_duration_since(Instant::now()));
    Ok(recv_any_timeout(eps, left)?)
}

/// The open wait behind every receive: takes the first message from any
/// of `eps` and hands it to `finish` while the receive locks are still held
/// (descriptor records are read in order under them).
pub(super) fn wait_any(
    eps: &[&Rendezvous],
    wait: Wait,
    finish: impl FnOnce(&Rendezvous, Raw) -> Result<(), IpcFail>,
) -> Result<usize, IpcFail> {
    let mut guards: Vec<_> = eps
        .iter()
        .map(|e| e.recv_lock.lock().unwrap_or_else(|p| p.into_inner()))
        .collect();
    let deadline = wait.deadline();
    let mut spun = false;
    loop {
        for (i, e) in eps.iter().enumerate() {
            if let Some(raw) = e.try_take()? {
                return finish(e, raw).map(|()| i);
            }
        }
        if let Wait::Try = wait {
            // No flag, no sleep: a `try_` receive leaves no trace.
            return if eps.iter().all(|e| peer::socket_hung_up(&e.sh.sock)) {
                Err(IpcFail::Disconnected)
            } else {
                Err(IpcFail::WouldBlock)
            };
        }
        if !spun {
            // A partner that is running usually sends within microseconds:
            // spin (the first endpoint's budget) before flagging and sleeping.
            spun = true;
            if let Some(budget) = guards.first_mut() {
                let any = &mut || eps.iter().any(|e| slot::ready(e.rx_slot()));
                if spin_until(budget, deadline, any) {
                    continue;
                }
            }
        }
        let mut words = Vec::with_capacity(eps.len());
        let mut live = 0;
        for e in eps {
            if peer::socket_hung_up(&e.sh.sock) {
                continue;
            }
            live += 1;
            let s = e.rx_slot();
            match slot::prepare_sleep(s) {
                Some(v) => words.push((&s.state, v)),
                None => words.clear(),
            }
        }
        if live == 0 {
            return Err(IpcFail::Disconnected);
        }
        if words.len() < live {
            continue; // a message arrived while we flagged
        }
        let t = match deadline {
            None => SLICE,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Err(IpcFail::TimedOut);
                }
                (d - now).min(SLICE)
            }
        };
        crate::sync::futex_wait_any(&words, t);
    }
}
