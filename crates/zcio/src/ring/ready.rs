//! An eventfd that becomes readable when a consumer has data, so a ring can
//! sit in an `epoll` set next to sockets.
//!
//! The producer is another process and cannot write our eventfd, so a small
//! watcher thread does: it sleeps until the consumer *arms* it (a
//! non-blocking read or peek found the ring empty), then sleeps on the
//! ring's head word with the usual lazy-wakeup protocol until data arrives
//! (or the producer closes or dies), then writes the eventfd once and waits
//! to be armed again. A busy consumer therefore costs the producer no
//! wakeups at all; an idle one costs one per burst.
//!
//! Use: poll the fd; when readable call [`Readiness::clear`], then call
//! `try_read`/`try_peek` until it returns `WouldBlock` (which re-arms).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use rustix::event::{eventfd, EventfdFlags};
use rustix::io::Errno;

use super::layout::{owner_parts, OWNER_ACTIVE};
use super::map::RingMap;
use super::{protocol, Consumer};
use crate::sync::{AtomicU64, Ordering};

const SLICE: Duration = crate::wait::LIVENESS;

/// State shared by a consumer and its watcher thread.
#[derive(Debug)]
pub(crate) struct Shared {
    /// `cursor + 1` while armed, 0 while not.
    armed: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    /// Ask the watcher to signal once data beyond `cursor` arrives.
    pub(crate) fn arm(&self, cursor: u64) {
        // SYNC: Release/futex wake pairs with the watcher's Acquire load.
        self.armed.store(cursor + 1, Ordering::Release);
        crate::sync::futex_wake(&self.armed);
    }
}

/// A readiness handle: an eventfd readable while the consumer has data.
#[derive(Debug)]
pub struct Readiness {
    fd: Arc<OwnedFd>,
    shared: Arc<Shared>,
    map: Arc<RingMap>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Consumer {
    /// Create the readiness handle of this consumer (one per consumer).
    pub fn readiness(&mut self) -> Result<Readiness, Errno> {
        let fd = Arc::new(eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?);
        let shared = Arc::new(Shared {
            armed: AtomicU64::new(self.position() + 1),
            stop: AtomicBool::new(false),
        });
        self.ready = Some(shared.clone());
        let (f, s, m) = (fd.clone(), shared.clone(), self.ring().clone());
        let thread = std::thread::Builder::new()
            .name("zcio-ready".into())
            .spawn(move || watch(&m, &s, &f))
            .map_err(|_| Errno::AGAIN)?;
        Ok(Readiness {
            fd,
            shared,
            map: self.ring().clone(),
            thread: Some(thread),
        })
    }
}

fn watch(map: &RingMap, s: &Shared, fd: &OwnedFd) {
    let head = &map.producer().head;
    while !s.stop.load(std::sync::atomic::Ordering::Acquire) {
        // SYNC: Acquire pairs with the Release store in Shared::arm.
        let armed = s.armed.load(Ordering::Acquire);
        if armed == 0 {
            crate::sync::futex_wait(&s.armed, 0, SLICE);
            continue;
        }
        let cursor = armed - 1;
        // SYNC: as in Consumer::idle: the flag RMW returns the latest head
        // and the producer's publishing swap wakes us.
        let old = head.fetch_or(1, Ordering::SeqCst);
        let (_, state, _) = owner_parts(map.control().owner.load(Ordering::Acquire));
        if old >> 1 == cursor && state == OWNER_ACTIVE && !map.truncated() {
            // Pass a wake on, as every sleeper on the head word must
            // (see protocol::consumer_sleep: the producer wakes only one).
            let woken = crate::sync::futex_wait_woken(head, (old | 1) as u32, SLICE);
            if woken && protocol::head(map.producer()) != cursor {
                crate::sync::futex_wake_one(head);
            }
            continue;
        }
        // Data, end of stream or trouble: the consumer should look.
        if s.armed
            .compare_exchange(armed, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }
}

impl Readiness {
    /// Reset the eventfd after it polled readable (then drain the consumer
    /// with `try_read`/`try_peek` until `WouldBlock`).
    pub fn clear(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&*self.fd, &mut b);
    }
}

impl AsFd for Readiness {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Readiness {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for Readiness {
    fn drop(&mut self) {
        self.shared
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
        crate::sync::futex_wake(&self.shared.armed);
        crate::sync::futex_wake(&self.map.producer().head);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
