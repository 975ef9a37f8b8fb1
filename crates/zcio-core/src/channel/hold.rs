//! The hold limit (`ChannelPolicy::hold`): how long a peer may keep a slice we
//! lent it, and what happens when it keeps it longer (abort the channel or
//! reclaim the slice).

use std::sync::atomic::Ordering as LocalOrdering;
use std::time::Instant;
use zcio_sys::registry::schema::channel as st;

use crate::channel::config::HoldExpiry;
use crate::channel::core::{Core, TxState};
use crate::channel::error::{PeerFault, SendErrorKind};

impl Core {
    /// Abort the channel: record `f`, release everything the peer holds,
    /// hang up on it.
    pub fn abort_locked(&self, tx: &mut TxState, f: PeerFault) {
        self.fault(f);
        self.aborted.store(true, LocalOrdering::Relaxed);
        // The peer is alive and may still read what it holds: retire it
        // all before marking the channel gone.
        let _ = self.drain_locked(tx);
        self.retire_all_locked(tx);
        self.mark_gone_locked(tx);
        tx.holds.clear();
        let _ = rustix::net::shutdown(&self.sock, rustix::net::Shutdown::Both);
        let _ = tx.ring.wake_consumer(Some(&self.bell));
    }

    /// Enforce the hold limit: expire (abort or reclaim) every lent slice
    /// held longer than `ChannelPolicy::hold`. Checks the FIFO from the front and
    /// stops at the first live entry that is young enough. Returns how many
    /// slices were reclaimed, or `HoldExpired` when the channel was aborted.
    pub fn expire_locked(&self, tx: &mut TxState) -> Result<usize, SendErrorKind> {
        let Some(h) = self.cfg.policy.hold else {
            return Ok(0);
        };
        if self.is_aborted() {
            return Err(SendErrorKind::HoldExpired);
        }
        let mut now = Instant::now();
        let mut drained = false;
        let mut reclaimed = 0;
        while let Some(&(token, at)) = tx.holds.front() {
            if !tx.ledger.holds(token) {
                tx.holds.pop_front();
                continue;
            }
            if now.saturating_duration_since(at) < h.limit {
                break;
            }
            if !drained {
                // The peer may have released it already: take notices in
                // first (once), so only real holds expire.
                drained = true;
                self.drain_locked(tx);
                now = Instant::now();
                continue;
            }
            match h.on_expiry {
                HoldExpiry::Abort => {
                    self.abort_locked(tx, PeerFault::HoldExpired(h.limit));
                    return Err(SendErrorKind::HoldExpired);
                }
                HoldExpiry::Reclaim => {
                    tx.holds.pop_front();
                    if let Ok(ret) = tx.ledger.release(token) {
                        drop(tx.take_back(ret, false));
                        reclaimed += 1;
                    }
                }
            }
        }
        // Released entries wait in the FIFO until they reach the front;
        // when they pile up behind a long (but legal) hold, sweep them out.
        // Each sweep removes at least half, so this stays amortised O(1).
        if tx.holds.len() > 2 * tx.ledger.len() + 64 {
            let TxState { holds, ledger, .. } = tx;
            holds.retain(|&(t, _)| ledger.holds(t));
        }
        if reclaimed > 0 {
            self.counters.add_shared(st::RECLAIMED, reclaimed as u64);
            self.ledger_gauges(tx);
        }
        Ok(reclaimed)
    }
}
