//! Surviving a truncated shared file.
//!
//! Named rings are plain files (a `/dev/shm` entry cannot be sealed), so any
//! process allowed to write the file can `ftruncate` it while others have
//! it mapped; touching a page past the new end raises `SIGBUS`, which would
//! kill a reader for another process's misbehaviour. A [`Guard`] registers a
//! mapped address range; if a `SIGBUS` hits inside a registered range, the
//! handler maps an anonymous zero page over the faulting page only
//! (`MAP_FIXED`), records the hit and returns, so the faulting access
//! completes (reading zeros) and the ring code reports [`Guard::tripped`] as
//! an error instead of dying. Pages still backed by the file stay mapped, so
//! a producer can still mark the ring closed in its (surviving) header. Faults outside every registered range go to the previous
//! handler (or the default action, which terminates the process as usual).
//!
//! This is the technique Wayland compositors use for client-supplied shm
//! pools. The handler only reads atomics and calls `mmap`, a plain system
//! call.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Once;

/// How many ranges can be protected at once; further mappings work but are
/// unprotected (see [`Guard::is_protected`]).
const SLOTS: usize = 512;

struct Range {
    start: AtomicUsize,
    len: AtomicUsize,
    hit: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Range = Range {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    hit: AtomicBool::new(false),
};

static RANGES: [Range; SLOTS] = [EMPTY; SLOTS];
static INSTALL: Once = Once::new();
static PREV_ACTION: AtomicUsize = AtomicUsize::new(0);
static PREV_FLAGS: AtomicUsize = AtomicUsize::new(0);

/// Registration of one mapped range; unregisters on drop. Drop it before
/// unmapping the range.
#[derive(Debug)]
pub struct Guard {
    slot: Option<usize>,
}

impl Guard {
    /// Protect `[start, start + len)`.
    pub fn protect(start: *mut u8, len: usize) -> Guard {
        INSTALL.call_once(install);
        for (i, r) in RANGES.iter().enumerate() {
            // SYNC: the claim is a CAS on `len` (0 = free); the handler reads
            // `start` only after seeing a non-zero `len` (Acquire below).
            if r.len
                .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                r.hit.store(false, Ordering::Relaxed);
                r.start.store(start as usize, Ordering::Relaxed);
                // SYNC: Release publishes `start`; pairs with the Acquire
                // load of `len` in `on_sigbus`.
                r.len.store(len, Ordering::Release);
                return Guard { slot: Some(i) };
            }
        }
        Guard { slot: None }
    }

    /// Whether a `SIGBUS` hit the range (the file was truncated under us);
    /// the range now reads as zeros.
    #[inline]
    pub fn tripped(&self) -> bool {
        // SYNC: Relaxed suffices: the handler runs on the faulting thread, and
        // other threads only need to see the flag eventually.
        self.slot
            .is_some_and(|i| RANGES[i].hit.load(Ordering::Relaxed))
    }

    /// Whether the range is registered (false when all slots were taken).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_protected(&self) -> bool {
        self.slot.is_some()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            RANGES[i].start.store(0, Ordering::Relaxed);
            // SYNC: Release frees the slot for the next `protect` CAS.
            RANGES[i].len.store(0, Ordering::Release);
        }
    }
}

fn install() {
    // A zeroed `sigaction` is a valid value (no handler, empty mask); `sa`
    // is filled before use and `old` is an out-parameter.
    // SAFETY: as argued just above.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_sigbus as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `old` is written by the kernel before we read it.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `sa.sa_mask` is a valid sigset we own.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // `on_sigbus` has the SA_SIGINFO signature and only touches atomics and
    // makes system calls, so it is safe to run at any point of any thread.
    // SAFETY: as argued just above; both pointers are to live locals.
    if unsafe { libc::sigaction(libc::SIGBUS, &sa, &mut old) } == 0 {
        PREV_ACTION.store(old.sa_sigaction, Ordering::Relaxed);
        PREV_FLAGS.store(old.sa_flags as usize, Ordering::Relaxed);
    }
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for r in RANGES.iter() {
        // SYNC: Acquire pairs with the Release store of `len` in `protect`.
        let len = r.len.load(Ordering::Acquire);
        let start = r.start.load(Ordering::Relaxed);
        if len == 0 || len == usize::MAX || start == 0 {
            continue;
        }
        if addr >= start && addr - start < len {
            // The page lies in a mapping registered by a live Guard; replacing
            // it with a private anonymous page keeps every address valid, and
            // nothing else in this process owns that page.
            // SAFETY: `sysconf` is async-signal-safe and has no preconditions.
            let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
            let page = addr & !(ps - 1);
            // SAFETY: as argued just above.
            let p = unsafe {
                libc::mmap(
                    page as *mut libc::c_void,
                    ps,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                r.hit.store(true, Ordering::Relaxed);
                return;
            }
        }
    }
    let prev = PREV_ACTION.load(Ordering::Relaxed);
    if prev == libc::SIG_DFL || prev == libc::SIG_IGN {
        // Not ours: restore the default action and return; the access faults
        // again and the process dies of SIGBUS as it would have without us.
        // SAFETY: zeroed sigaction = SIG_DFL with an empty mask.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = libc::SIG_DFL;
        // SAFETY: valid pointer to a local.
        unsafe { libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) };
        return;
    }
    if PREV_FLAGS.load(Ordering::Relaxed) & libc::SA_SIGINFO as usize != 0 {
        // The previous handler was installed with SA_SIGINFO, so `prev` is a
        // function of this signature.
        type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
        // SAFETY: as argued just above.
        let f: Handler = unsafe { std::mem::transmute(prev) };
        f(sig, info, ctx);
    } else {
        // A plain `sa_handler`.
        // SAFETY: without SA_SIGINFO the stored value is a `fn(c_int)`.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::mmap::{Access, Mapping};

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn truncated_file_reads_zero_instead_of_dying() {
        // An unsealed memfd: a plain file that can be truncated under us.
        let fd = rustix::fs::memfd_create("sigbus", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 2 * 4096).unwrap();
        let m = Mapping::map(&fd, 2 * 4096, Access::ReadWrite, false).unwrap();
        let g = Guard::protect(m.as_ptr(), m.len());
        assert!(g.is_protected());
        // SAFETY: offset 4096 is inside the 8 KiB mapping.
        unsafe { m.as_ptr().add(4096).write_volatile(7) };
        rustix::fs::ftruncate(&fd, 0).unwrap();
        // The address is inside the mapping; the guard turns the SIGBUS into
        // a zero page.
        // SAFETY: as argued just above.
        let v = unsafe { m.as_ptr().add(4096).read_volatile() };
        assert_eq!(v, 0);
        assert!(g.tripped());
        drop(g);
    }
}
