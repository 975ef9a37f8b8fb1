//! Futex wait/wake on words in shared memory (no `FUTEX_PRIVATE_FLAG`, so
//! the word may live in a mapping shared with other processes).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

use rustix::io::Errno;
use rustix::thread::futex;

/// Why a [`wait`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Another thread or process called `FUTEX_WAKE` (or a spurious wakeup).
    Woken,
    /// The word no longer held the expected value when the kernel looked.
    Changed,
    /// The timeout elapsed.
    TimedOut,
}

/// Sleep while `word == expected`, for at most `timeout`.
///
/// Interrupted waits (`EINTR`) report [`Wake::Woken`]; callers always
/// re-check their condition, so that is safe.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) -> Wake {
    let ts = rustix::time::Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match futex::wait(word, futex::Flags::empty(), expected, Some(&ts)) {
        Ok(()) => Wake::Woken,
        Err(Errno::AGAIN) => Wake::Changed,
        Err(Errno::TIMEDOUT) => Wake::TimedOut,
        Err(_) => Wake::Woken,
    }
}

/// Sleep until any of `words` is woken or no longer equals its expected
/// value, for at most `timeout` (`futex_waitv`, Linux ≥ 5.16). Falls back to
/// waiting on the first word alone where `futex_waitv` is missing.
pub fn wait_any(words: &[(&AtomicU32, u32)], timeout: Duration) -> Wake {
    if words.is_empty() {
        std::thread::sleep(timeout);
        return Wake::TimedOut;
    }
    if words.len() == 1 || words.len() > 128 {
        return wait(words[0].0, words[0].1, timeout);
    }
    let waiters: smallvec::SmallVec<[futex::Wait; 8]> = words
        .iter()
        .map(|(w, v)| {
            let mut x = futex::Wait::new();
            x.val = u64::from(*v);
            x.uaddr = futex::WaitPtr::new(w.as_ptr().cast());
            x.flags = futex::WaitFlags::SIZE_U32;
            x
        })
        .collect();
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let add = rustix::time::Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX / 2),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    let mut abs = rustix::time::Timespec {
        tv_sec: now.tv_sec.saturating_add(add.tv_sec),
        tv_nsec: now.tv_nsec + add.tv_nsec,
    };
    if abs.tv_nsec >= 1_000_000_000 {
        abs.tv_sec += 1;
        abs.tv_nsec -= 1_000_000_000;
    }
    match futex::waitv(
        &waiters,
        futex::WaitvFlags::empty(),
        Some(&abs),
        rustix::time::ClockId::Monotonic,
    ) {
        Ok(_) => Wake::Woken,
        Err(Errno::AGAIN) => Wake::Changed,
        Err(Errno::TIMEDOUT) => Wake::TimedOut,
        Err(Errno::NOSYS) => wait(words[0].0, words[0].1, timeout),
        Err(_) => Wake::Woken,
    }
}

/// Wake up to `n` waiters on `word`. Returns how many were woken.
pub fn wake(word: &AtomicU32, n: u32) -> usize {
    futex::wake(word, futex::Flags::empty(), n).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    #[test]
    fn wait_times_out_and_sees_change() {
        let w = AtomicU32::new(0);
        assert_eq!(wait(&w, 1, Duration::from_millis(1)), Wake::Changed);
        assert_eq!(wait(&w, 0, Duration::from_millis(1)), Wake::TimedOut);
    }

    #[test]
    #[cfg_attr(miri, ignore = "futex_waitv: a system call Miri does not model")]
    fn wait_any_wakes_on_either_word() {
        let a = Arc::new(AtomicU32::new(1));
        let b = Arc::new(AtomicU32::new(1));
        assert_eq!(
            wait_any(&[(&a, 1), (&b, 1)], Duration::from_millis(1)),
            Wake::TimedOut
        );
        assert_eq!(
            wait_any(&[(&a, 1), (&b, 0)], Duration::from_millis(1)),
            Wake::Changed
        );
        let b2 = b.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            b2.store(0, Ordering::Release);
            wake(&b2, 1);
        });
        let r = wait_any(&[(&a, 1), (&b, 1)], Duration::from_secs(5));
        assert_ne!(r, Wake::TimedOut);
        t.join().unwrap();
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "rustix's futex wake makes a pointer of an integer: refused by -Zmiri-strict-provenance"
    )]
    fn wake_releases_a_waiter() {
        let w = Arc::new(AtomicU32::new(0));
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            while w2.load(Ordering::Acquire) == 0 {
                wait(&w2, 0, Duration::from_secs(5));
            }
        });
        std::thread::sleep(Duration::from_millis(10));
        w.store(1, Ordering::Release);
        wake(&w, 1);
        t.join().unwrap();
    }
}
