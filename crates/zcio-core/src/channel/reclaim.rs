//! How a pool short of buffers pulls them back through a channel end that
//! carries them ([`Reclaim`], registered by the first send of the pool's
//! buffers): take in the end's notices, sleep until more may come, say
//! who holds what; a closed end's reclaim also lets go of lingering ends
//! that are done.

use std::sync::atomic::Ordering as LocalOrdering;
use std::time::Duration;
use zcio_sys::registry::schema::channel as st;

use crate::buf::Reclaim;
use crate::channel::core::{lock, Core};
use crate::channel::linger;

impl Reclaim for Core {
    fn reclaim(&self) -> usize {
        let n = self.drain_notices();
        if n == 0 && self.closed.load(LocalOrdering::Acquire) {
            linger::reap_lingering();
        }
        n
    }

    fn wait_for_notices(&self, timeout: Duration) {
        let mut tx = lock(&self.tx);
        // The receiver must see what we deferred waking it for, or it may
        // never release what we are about to wait for.
        self.wake_deferred_locked(&mut tx);
        self.counters.add_shared(st::SLEEPS, 1);
        let _ = tx.notices.wait_for_data(timeout, self.own_bell());
        drop(tx);
        if !self.check_peer() {
            // Peer gone: its holdings were released by mark_gone.
        }
    }

    fn held_from_pool(&self, pool_id: u64) -> (String, usize) {
        (
            format!("pid {}", self.peer.pid),
            lock(&self.tx).ledger.count_from_pool(pool_id),
        )
    }
}
