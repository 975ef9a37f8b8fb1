//! The write-fault handler behind transient copy-on-write (TCOW).
//!
//! Arenas register their app window here. A write to a write-protected
//! page of a registered window raises a signal in the writing thread —
//! `SIGSEGV` (`SEGV_ACCERR`) under `mprotect`, `SIGBUS` under the
//! userfaultfd (`UFFD_FEATURE_SIGBUS`); the handler asks the arena's page
//! table to fix it ([`Table::on_fault`]: re-enable writing when the page
//! is no longer in flight, otherwise give the writer a private copy at the
//! same address) and returns, so the write is retried and succeeds. Faults
//! anywhere else, and faults the arena does not fix (a hidden page of an
//! emulated move), go to the previous handler — Rust's own stack-overflow
//! handler, zcio's ring `SIGBUS` guard, or the default action that ends
//! the process.
//!
//! The handler only reads atomics, takes the arena's spin lock and makes
//! plain system calls (`mprotect`, `mremap`, `mmap`), so it is safe at any
//! point of any thread — provided no thread faults on an arena page while
//! holding that arena's lock (see [`super::pages`]).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::sync::Once;

use super::pages::Table;

/// How many arenas can be registered at once.
const SLOTS: usize = 64;

struct Entry {
    start: AtomicUsize,
    len: AtomicUsize,
    table: AtomicPtr<Table>,
    /// Handlers currently using `table` (unregistration waits for 0).
    busy: AtomicU32,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Entry = Entry {
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    table: AtomicPtr::new(std::ptr::null_mut()),
    busy: AtomicU32::new(0),
};

/// `si_code` of a protection fault on a mapped page (`SEGV_ACCERR` in
/// `<asm-generic/siginfo.h>`; not exported by the libc crate).
const SEGV_ACCERR: libc::c_int = 2;

static ENTRIES: [Entry; SLOTS] = [EMPTY; SLOTS];
static INSTALL: Once = Once::new();

/// The handler that was installed before ours, per signal.
struct Prev {
    action: AtomicUsize,
    flags: AtomicUsize,
}

static PREV_SEGV: Prev = Prev {
    action: AtomicUsize::new(0),
    flags: AtomicUsize::new(0),
};
static PREV_BUS: Prev = Prev {
    action: AtomicUsize::new(0),
    flags: AtomicUsize::new(0),
};

/// A registered app window; unregisters (waiting for running handlers) on
/// drop, which must happen before the table is freed.
pub(crate) struct Registration {
    slot: usize,
}

/// Register `table`'s app window. `None` when every slot is taken.
///
/// # Safety
/// `table` stays valid (not moved, not freed) until the returned
/// registration is dropped.
pub(crate) unsafe fn register(
    table: *const Table,
    start: usize,
    len: usize,
) -> Option<Registration> {
    INSTALL.call_once(install);
    for (i, e) in ENTRIES.iter().enumerate() {
        // SYNC: claim by CAS on `len` (0 = free); the handler reads
        // `start`/`table` only after an Acquire load of a real `len`.
        if e.len
            .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            e.start.store(start, Ordering::Relaxed);
            e.table.store(table.cast_mut(), Ordering::Relaxed);
            // SYNC: Release publishes `start` and `table`; pairs with the
            // Acquire load of `len` in `on_sigsegv`.
            e.len.store(len, Ordering::Release);
            return Some(Registration { slot: i });
        }
    }
    None
}

impl Drop for Registration {
    fn drop(&mut self) {
        let e = &ENTRIES[self.slot];
        // Stop new handlers from matching, then wait for running ones.
        // SYNC: SeqCst orders this store before the `busy` loads below, and
        // pairs with the handler's SeqCst increment-then-recheck of `len`.
        e.len.store(usize::MAX, Ordering::SeqCst);
        while e.busy.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        e.table.store(std::ptr::null_mut(), Ordering::Relaxed);
        e.start.store(0, Ordering::Relaxed);
        // SYNC: Release frees the slot for the next `register` CAS.
        e.len.store(0, Ordering::Release);
    }
}

fn install() {
    install_one(libc::SIGSEGV, &PREV_SEGV);
    install_one(libc::SIGBUS, &PREV_BUS);
}

fn install_one(sig: libc::c_int, prev: &Prev) {
    // A zeroed `sigaction` is a valid value (no handler, empty mask).
    // SAFETY: as argued just above.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_fault as *const () as usize;
    sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `old` is an out-parameter the kernel fills.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `sa.sa_mask` is a sigset we own.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // `on_fault` has the SA_SIGINFO signature and is async-signal-safe
    // (see the module documentation).
    // SAFETY: as argued just above; both pointers are to live locals.
    if unsafe { libc::sigaction(sig, &sa, &mut old) } == 0 {
        prev.action.store(old.sa_sigaction, Ordering::Relaxed);
        prev.flags.store(old.sa_flags as usize, Ordering::Relaxed);
    }
}

/// Try the registered arenas; `true` when one fixed the fault.
fn handle(addr: usize) -> bool {
    for e in ENTRIES.iter() {
        // SYNC: Acquire pairs with the Release store in `register`.
        let len = e.len.load(Ordering::Acquire);
        if len == 0 || len == usize::MAX {
            continue;
        }
        let start = e.start.load(Ordering::Relaxed);
        if addr < start || addr - start >= len {
            continue;
        }
        // SYNC: SeqCst increment, then re-check `len`: pairs with the
        // SeqCst store + `busy` wait in `Registration::drop`.
        e.busy.fetch_add(1, Ordering::SeqCst);
        let fixed = if e.len.load(Ordering::SeqCst) == len {
            let table = e.table.load(Ordering::Relaxed);
            // `busy > 0` keeps the registration (and so the table, by
            // `register`'s contract) alive until we are done.
            // SAFETY: as argued just above.
            let table = unsafe { &*table };
            let slot = ((addr - start) / table.ps) as u32;
            table.on_fault(slot)
        } else {
            false
        };
        e.busy.fetch_sub(1, Ordering::SeqCst);
        return fixed;
    }
    false
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    // SIGSEGV: a protection fault only. SIGBUS: a userfaultfd
    // write-protect fault (BUS_ADRERR, as for a truncated file: the
    // address range tells them apart).
    let ours = sig == libc::SIGBUS || code == SEGV_ACCERR;
    if ours && handle(addr) {
        return;
    }
    let prev = if sig == libc::SIGSEGV {
        &PREV_SEGV
    } else {
        &PREV_BUS
    };
    let action = prev.action.load(Ordering::Relaxed);
    if action == libc::SIG_DFL || action == libc::SIG_IGN {
        // Not ours: restore the default action and return; the access
        // faults again and the process dies of the signal as it would have.
        // SAFETY: zeroed sigaction = SIG_DFL with an empty mask.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = libc::SIG_DFL;
        // SAFETY: valid pointer to a local.
        unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
        return;
    }
    if prev.flags.load(Ordering::Relaxed) & libc::SA_SIGINFO as usize != 0 {
        type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
        // The previous handler was installed with SA_SIGINFO, so `action`
        // is a function of this signature.
        // SAFETY: as argued just above.
        let f: Handler = unsafe { std::mem::transmute(action) };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO the stored value is a `fn(c_int)`.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(action) };
        f(sig);
    }
}
