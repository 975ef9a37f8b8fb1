//! Every live channel end of this process, so that a thread about to sleep
//! on one channel can first take in the deallocation notices of all the
//! others and then sleep until *any* of them has something for it
//! (`futex_waitv`). This is what keeps a forwarder — receiving on one
//! channel, sending on another — from holding buffers upstream while it
//! waits for input downstream.

use std::sync::{Arc, Mutex, Weak};

use smallvec::SmallVec;
use std::time::Duration;

use crate::channel::core::{lock, Core};
use crate::channel::spsc::SleepHandle;

static REGISTRY: Mutex<Vec<Weak<Core>>> = Mutex::new(Vec::new());

/// Add a channel end (called once per end at set-up).
pub(crate) fn register(core: &Arc<Core>) {
    let mut r = lock(&REGISTRY);
    r.retain(|w| w.strong_count() > 0);
    r.push(Arc::downgrade(core));
}

/// Channel ends of a process, inline for the usual handful (a forwarder
/// has two): a wait allocates nothing.
pub(crate) type Cores = SmallVec<[Arc<Core>; 8]>;

fn live() -> Cores {
    lock(&REGISTRY).iter().filter_map(Weak::upgrade).collect()
}

/// Before sleeping: take in every channel's notices (releasing buffers
/// their peers are done with, which may queue notices upstream), then
/// publish every channel's queued notices. Returns the channels whose
/// peers still hold buffers of ours (worth waking up for).
pub(crate) fn settle(except: &Core) -> Cores {
    let all = live();
    // try_lock: another thread of this process may hold a channel's send
    // side while it sleeps waiting for ring space that only *we* can free
    // by consuming; blocking on its lock here would deadlock both.
    for c in &all {
        c.try_drain_notices();
    }
    for c in &all {
        c.flush_notices();
    }
    all.into_iter()
        .filter(|c| !std::ptr::eq(Arc::as_ptr(c), except) && c.peer_holds_any())
        .collect()
}

/// Sleep until `own` (the ring we receive on) or any of `others`' notice
/// rings has something, for at most `timeout`. Returns early without
/// sleeping if something is already pending.
pub(crate) fn sleep_any(own: &SleepHandle, others: &[Arc<Core>], timeout: Duration) {
    let handles: SmallVec<[&SleepHandle; 8]> = std::iter::once(own)
        .chain(others.iter().map(|c| c.notice_sleep()))
        .collect();
    let mut words: SmallVec<[_; 8]> = SmallVec::new();
    let mut pending = false;
    for h in &handles {
        match h.arm() {
            Some(expected) => words.push((h.word(), expected)),
            None => pending = true,
        }
    }
    if !pending {
        crate::sync::futex_wait_any(&words, timeout);
    }
    for h in &handles {
        h.disarm();
    }
}
