//! The hardware floor of the ping-pong: one cache line each way between
//! the two pinned processes, through a shared page, with no protocol at
//! all. The request is a 32-bit word on one cache line, the reply one on
//! another line 128 bytes further (so the two never share a line, nor an
//! adjacent-line prefetch pair). Two modes, so that each transport is
//! compared with its like:
//!
//! * busy: each side spins on the word it waits for (what iceoryx2's and
//!   zcio's busy-polling paths pay at best);
//! * futex: each side sleeps in `futex_wait` on the word and is woken by
//!   the other's `futex_wake` (what a blocking transport pays at best).
//!
//! A word holds `seq + 1` (0: nothing yet), [`STOP_WORD`] ends the server.

use std::fs::File;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use rustix::thread::futex;

use super::pingpong::{Client, Server, STOP};

/// Bytes of the shared page the coordinator creates.
pub const PAGE: usize = 4096;
/// Offset of the reply word (the request word is at 0).
const REPLY_AT: usize = 128;
/// The word that ends the server.
const STOP_WORD: u32 = u32::MAX;
/// Longest single futex sleep, so a silent peer is noticed by the deadline.
const SLICE: Duration = Duration::from_millis(100);

/// One side of the floor ping-pong.
pub struct LineSide {
    base: *mut std::ffi::c_void,
    futex: bool,
    timeout: Duration,
    /// The last request the server took.
    last: u32,
}

impl LineSide {
    /// Map the shared page behind `fd` (a [`PAGE`]-byte memfd).
    pub fn new(fd: &File, futex: bool, timeout: Duration) -> Result<Self, String> {
        // SAFETY: a fresh shared mapping of the memfd's first page; nothing
        // else in this process refers to the address range it returns.
        let base = unsafe {
            mmap(
                std::ptr::null_mut(),
                PAGE,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd.as_fd(),
                0,
            )
        }
        .map_err(|e| format!("mmap the shared line page: {e}"))?;
        Ok(Self {
            base,
            futex,
            timeout,
            last: 0,
        })
    }

    fn word(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is 0 or REPLY_AT, 4-aligned and inside the mapped
        // page, which lives as long as `self`; the other process touches
        // the words only atomically (this benchmark's own child).
        unsafe { AtomicU32::from_ptr(self.base.cast::<u8>().add(at).cast::<u32>()) }
    }

    /// Publish `v` at `at` (and wake the peer in futex mode).
    fn put(&self, at: usize, v: u32) {
        let w = self.word(at);
        // SYNC: Release pairs with the peer's Acquire load in `wait_change`.
        w.store(v, Ordering::Release);
        if self.futex {
            let _ = futex::wake(w, futex::Flags::empty(), 1);
        }
    }

    /// Wait until the word at `at` differs from `old`; returns it.
    fn wait_change(&self, at: usize, old: u32) -> Result<u32, String> {
        let w = self.word(at);
        let deadline = Instant::now() + self.timeout;
        let mut spins = 0u32;
        loop {
            // SYNC: Acquire pairs with the peer's Release store in `put`.
            let v = w.load(Ordering::Acquire);
            if v != old {
                return Ok(v);
            }
            if self.futex {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err("the peer went silent (futex line)".into());
                }
                let t = left.min(SLICE);
                let ts = rustix::time::Timespec {
                    tv_sec: t.as_secs() as _,
                    tv_nsec: t.subsec_nanos() as _,
                };
                // EAGAIN (changed meanwhile), ETIMEDOUT and EINTR all mean
                // "look again".
                let _ = futex::wait(w, futex::Flags::empty(), old, Some(&ts));
            } else {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(4096) && Instant::now() > deadline {
                    return Err("the peer went silent (busy line)".into());
                }
            }
        }
    }
}

impl Drop for LineSide {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, not used after this.
        let _ = unsafe { munmap(self.base, PAGE) };
    }
}

fn encode(seq: u64) -> u32 {
    if seq == STOP {
        STOP_WORD
    } else {
        // 1 ..= 2^32 - 2: never "nothing yet" (0) nor STOP_WORD; wraps
        // after 2^32 - 2 round trips, and the sides only compare words.
        (seq % (u64::from(STOP_WORD) - 1)) as u32 + 1
    }
}

impl Client for LineSide {
    fn round_trip(&mut self, seq: u64) -> Result<u64, String> {
        let want = encode(seq);
        let before = self.word(REPLY_AT).load(Ordering::Acquire);
        self.put(0, want);
        let got = self.wait_change(REPLY_AT, before)?;
        Ok(if got == want { seq } else { u64::from(got) })
    }

    fn stop(&mut self) {
        self.put(0, STOP_WORD);
    }
}

impl Server for LineSide {
    fn next(&mut self) -> Result<Option<u64>, String> {
        let v = self.wait_change(0, self.last)?;
        self.last = v;
        Ok((v != STOP_WORD).then(|| u64::from(v.wrapping_sub(1))))
    }

    fn reply(&mut self, seq: u64) -> Result<(), String> {
        self.put(REPLY_AT, encode(seq));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::pingpong::{client_loop, server_loop};

    fn page() -> File {
        File::from(super::super::line_page().expect("memfd"))
    }

    /// Both modes carry every sequence number there and back, and a stop
    /// ends the server (in-process: a thread per side).
    #[test]
    fn both_modes_round_trip_and_stop() {
        for futex in [false, true] {
            let fd = page();
            let t = Duration::from_secs(20);
            let srv_fd = fd.try_clone().expect("dup");
            let server = std::thread::spawn(move || {
                let mut s = LineSide::new(&srv_fd, futex, t).expect("map");
                server_loop(&mut s, 3).map(|m| m.msgs)
            });
            let mut c = LineSide::new(&fd, futex, t).expect("map");
            let m = client_loop(&mut c, 3, 100, t).expect("client");
            assert_eq!(m.msgs, 100, "futex={futex}");
            assert_eq!(server.join().expect("server").expect("loop"), 100);
        }
    }

    #[test]
    fn words_never_read_as_nothing_or_stop() {
        assert_eq!(encode(0), 1);
        assert_eq!(encode(STOP), STOP_WORD);
        for seq in [
            u64::from(u32::MAX) - 2,
            u64::from(u32::MAX) - 1,
            u64::from(u32::MAX),
        ] {
            let w = encode(seq);
            assert!(w != 0 && w != STOP_WORD, "{seq} -> {w}");
        }
        assert_ne!(encode(41), encode(42));
    }
}
