//! The page table of an arena: which file page each slot of the arena's
//! address range maps, how each slot is protected, how many references to
//! each page are in flight, and the spare pages transient copy-on-write
//! (TCOW) takes its copies from.
//!
//! An arena's memfd has `2n` pages. Its address range has `n` *app slots*
//! (where the application's buffers live) followed by `n` *spare slots*;
//! each slot maps exactly one file page, so the table is a permutation.
//! A TCOW fault on app slot `a` (page `p`, in flight) copies `p` into a
//! free spare slot `s` (page `q`) and swaps the two slots' mappings: the
//! writer continues on `q` at the same address while `p`, still read by a
//! peer, is parked in the spare window until the peer returns it.
//!
//! Receivers swap a peer's pages *over* app slots (input alignment); the
//! slot's own page is then moved aside into the *park window*, a separate
//! reserved range, and moved back when the slot is re-homed.
//!
//! Everything here runs under the arena's spin lock, which the fault
//! handler (a signal handler) also takes: the state is pre-allocated and
//! the handler path neither allocates nor blocks. Code holding the lock
//! must never write an app page (a write could fault into the handler on
//! the same thread, which would spin on the lock forever).

use std::cell::UnsafeCell;
// Process-local state reachable from a signal handler: std atomics, not
// `crate::sync` (loom atomics cannot live in a signal handler's reach, and
// nothing here is shared with another process).
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::os::fd::BorrowedFd;

use crate::buf::extent::Extents;
use crate::uffd::{self, Uffd};
use crate::vm::{self, Prot};

/// "No park slot": the slot maps its own page in place.
pub(crate) const HOME: u32 = u32::MAX;

/// Pages of the scratch range, and the most pages one TCOW fault copies.
pub(crate) const SCRATCH_PAGES: u32 = 32;

/// Counters of one arena (process-local, Relaxed).
#[derive(Default, Debug)]
pub(crate) struct Counters {
    pub tcow_faults: AtomicU64,
    pub tcow_copies: AtomicU64,
    pub lazy_unprotects: AtomicU64,
    pub protects: AtomicU64,
    pub unprotects: AtomicU64,
    pub swapped_pages: AtomicU64,
    pub rehomed_pages: AtomicU64,
    pub no_spare: AtomicU64,
}

pub(crate) struct State {
    /// Slot → file page (`2n` slots).
    pub slot_page: Box<[u32]>,
    /// File page → slot (`2n` pages).
    pub page_slot: Box<[u32]>,
    /// File page → references in flight (lent to peers, not yet returned).
    pub refs: Box<[u32]>,
    /// Slot → protection in effect.
    pub prot: Box<[Prot]>,
    /// App slot → park index while a peer's pages are swapped over it, or
    /// [`HOME`].
    pub park: Box<[u32]>,
    /// Spare slots whose pages are free (not in flight).
    pub free_spares: Spares,
    /// App slots that are read-only with references in flight: each may
    /// need a spare for its TCOW copy. `reserved <= free_spares.len()` is
    /// kept by [`Table::lend`], so the fault handler always finds a spare.
    pub reserved: u32,
    /// Free park indices (normal context only: allocates).
    pub park_free: Extents,
    /// Pages a peer could not vouch for (retired): never reused.
    pub retired_pages: u32,
    /// App slot → wired (`mlock`ed) while lent under share / weak move.
    pub wired: Box<[bool]>,
    /// App slot → registered with the userfaultfd (uffd backend only). A
    /// moved (`mremap`) or newly mapped page loses its registration.
    pub armed: Box<[bool]>,
    /// App slot → its page took a TCOW copy since the slot was last lent
    /// (the application rewrote it, or a neighbour, in flight).
    pub rewritten: Box<[bool]>,
    /// App slot (the first of a buffer's range) → consecutive outputs
    /// that found the range rewritten since its previous lend.
    pub streak: Box<[u8]>,
    /// App slot (as `streak`) → outputs still to copy before the next
    /// probe lends the range again.
    pub hold: Box<[u16]>,
}

/// The page table and its lock.
pub(crate) struct Table {
    lock: AtomicBool,
    st: UnsafeCell<State>,
    pub n: u32,
    pub ps: usize,
    /// Address of slot 0.
    pub base: usize,
    /// Address of park index 0.
    pub park_base: usize,
    /// [`SCRATCH_PAGES`] reserved pages the TCOW swap passes mappings
    /// through.
    pub scratch: usize,
    /// Write protection by userfaultfd (`None`: by `mprotect`).
    pub uffd: Option<&'static Uffd>,
    /// The kernel moves shared pages with `MREMAP_DONTUNMAP`: TCOW and
    /// swapping are possible (otherwise the arena lends nothing).
    pub movable: bool,
    pub counters: Counters,
}

// SAFETY: `st` is only reached through `Table::locked`, which holds the
// spin lock (mutual exclusion across threads and the signal handler); the
// other fields are immutable after construction or atomics.
unsafe impl Sync for Table {}
// SAFETY: as for `Sync`; nothing here is tied to a thread.
unsafe impl Send for Table {}

/// Exclusive access to the state while the lock is held.
pub(crate) struct Locked<'a> {
    table: &'a Table,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SYNC: Release publishes the state changes made under the lock;
        // pairs with the Acquire CAS in `Table::locked`.
        self.table.lock.store(false, Ordering::Release);
    }
}

impl std::ops::Deref for Locked<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        // SAFETY: the lock is held for the life of `self` (see `locked`).
        unsafe { &*self.table.st.get() }
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut State {
        // SAFETY: the lock is held for the life of `self`, and `&mut self`
        // makes this the only access through it.
        unsafe { &mut *self.table.st.get() }
    }
}

impl Table {
    pub fn new(
        n: u32,
        ps: usize,
        base: usize,
        park_base: usize,
        scratch: usize,
        uffd: Option<&'static Uffd>,
        movable: bool,
    ) -> Self {
        let slots = 2 * n as usize;
        let free_spares = Spares::new(n);
        Self {
            lock: AtomicBool::new(false),
            st: UnsafeCell::new(State {
                slot_page: (0..slots as u32).collect(),
                page_slot: (0..slots as u32).collect(),
                refs: vec![0; slots].into_boxed_slice(),
                prot: vec![Prot::ReadWrite; slots].into_boxed_slice(),
                park: vec![HOME; n as usize].into_boxed_slice(),
                free_spares,
                reserved: 0,
                park_free: Extents::new(n),
                retired_pages: 0,
                wired: vec![false; n as usize].into_boxed_slice(),
                armed: vec![uffd.is_some(); n as usize].into_boxed_slice(),
                rewritten: vec![false; n as usize].into_boxed_slice(),
                streak: vec![0; n as usize].into_boxed_slice(),
                hold: vec![0; n as usize].into_boxed_slice(),
            }),
            n,
            ps,
            base,
            park_base,
            scratch,
            uffd,
            movable,
            counters: Counters::default(),
        }
    }

    /// Take the lock (spinning, then yielding). Async-signal-safe.
    pub fn locked(&self) -> Locked<'_> {
        let mut spins = 0u32;
        loop {
            // SYNC: Acquire pairs with the Release store in `Locked::drop`.
            if self
                .lock
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Locked { table: self };
            }
            spins += 1;
            if spins < 128 {
                std::hint::spin_loop();
            } else {
                // A plain system call: async-signal-safe.
                // SAFETY: no preconditions.
                unsafe { libc::sched_yield() };
            }
        }
    }

    /// Address of slot `s`.
    pub fn slot_addr(&self, s: u32) -> usize {
        self.base + s as usize * self.ps
    }

    /// Address of park index `k`.
    pub fn park_addr(&self, k: u32) -> usize {
        self.park_base + k as usize * self.ps
    }

    /// Set the protection of app slots `[first, first + count)` (one
    /// system call per run of slots that need the change) and record it.
    /// Write protection uses the userfaultfd when the arena has one
    /// (re-registering pages that lost their registration); no-access and
    /// every change on the `mprotect` backend use `mprotect`.
    pub fn set_prot(
        &self,
        st: &mut State,
        first: u32,
        count: u32,
        prot: Prot,
    ) -> Result<(), crate::Errno> {
        let mut s = first;
        let end = first + count;
        while s < end {
            if st.prot[s as usize] == prot {
                s += 1;
                continue;
            }
            let from = st.prot[s as usize];
            let run_start = s;
            while s < end && st.prot[s as usize] == from {
                s += 1;
            }
            self.change(st, run_start, s - run_start, from, prot)?;
            for i in run_start..s {
                st.prot[i as usize] = prot;
            }
        }
        Ok(())
    }

    /// One run of slots, all at `from`, to `to`.
    fn change(
        &self,
        st: &mut State,
        first: u32,
        count: u32,
        from: Prot,
        to: Prot,
    ) -> Result<(), crate::Errno> {
        let addr = self.slot_addr(first);
        let len = count as usize * self.ps;
        let Some(u) = self.uffd else {
            // SAFETY: the slots belong to this arena's mapping; the caller
            // holds the lock and does not access these pages meanwhile.
            return unsafe { vm::protect(addr, len, to) };
        };
        let fd = u_fd(u);
        if from == Prot::ReadOnly {
            // Drop the write protection first (registered: see `armed`).
            // SAFETY: as above; only this arena's pages are named.
            unsafe { uffd::write_protect_raw(fd, addr as *mut u8, len, false, true) }?;
        }
        if from == Prot::None {
            // SAFETY: as above.
            unsafe { vm::protect(addr, len, Prot::ReadWrite) }?;
        }
        match to {
            Prot::ReadWrite => Ok(()),
            // SAFETY: as above.
            Prot::None => unsafe { vm::protect(addr, len, Prot::None) },
            Prot::ReadOnly => {
                for i in first..first + count {
                    if !st.armed[i as usize] {
                        // SAFETY: as above; registering adds no access.
                        unsafe { u.register_wp(self.slot_addr(i) as *mut u8, self.ps) }?;
                        st.armed[i as usize] = true;
                    }
                }
                // SAFETY: as above.
                unsafe { uffd::write_protect_raw(fd, addr as *mut u8, len, true, false) }
            }
        }
    }

    /// The TCOW fault path, from the signal handler: an access hit app
    /// slot `slot`. Returns whether the access may be retried (`false`:
    /// not a fault of ours to fix, e.g. a hidden page).
    pub fn on_fault(&self, slot: u32) -> bool {
        let mut st = self.locked();
        let a = slot as usize;
        match st.prot[a] {
            // Another thread fixed it meanwhile — or, with the
            // userfaultfd, a stale write protection: clear it.
            Prot::ReadWrite => match self.uffd {
                Some(u) => {
                    // SAFETY: the slot is ours; clearing protection adds
                    // access the table already grants.
                    let r = unsafe {
                        uffd::write_protect_raw(
                            u_fd(u),
                            self.slot_addr(slot) as *mut u8,
                            self.ps,
                            false,
                            true,
                        )
                    };
                    // ENOENT: a TCOW swap moved a fresh, unregistered (so
                    // unprotected) page here while we waited for the lock.
                    r.is_ok() || r == Err(crate::Errno::NOENT)
                }
                None => true,
            },
            // Hidden (moved out): touching it is the application's error.
            Prot::None => false,
            Prot::ReadOnly => {
                let p = st.slot_page[a];
                if st.refs[p as usize] == 0 {
                    // Returned but not yet unprotected: just re-enable.
                    let ok = self.set_prot(&mut st, slot, 1, Prot::ReadWrite).is_ok();
                    self.counters
                        .lazy_unprotects
                        .fetch_add(1, Ordering::Relaxed);
                    return ok;
                }
                self.tcow_copy(&mut st, slot)
            }
        }
    }

    /// Give app slot `a` a private copy of its in-flight page: copy into
    /// a free spare and swap the two slots' mappings.
    fn tcow_copy(&self, st: &mut State, a: u32) -> bool {
        // Prefer the spare holding the file page right after the previous
        // slot's (or right before the next slot's): a buffer rewritten
        // page by page then stays a few contiguous file runs, which a
        // later output lends as few slices.
        let mut want = None;
        if a > 0 {
            want = st.slot_page[a as usize - 1].checked_add(1);
        }
        if want.is_none_or(|w| w as usize >= st.page_slot.len()) && a + 1 < self.n {
            want = st.slot_page[a as usize + 1].checked_sub(1);
        }
        let preferred = want
            .and_then(|w| st.page_slot.get(w as usize).copied())
            .filter(|&slot| st.free_spares.take(slot));
        let Some(s) = preferred.or_else(|| st.free_spares.pop()) else {
            // `lend` keeps a spare per protected slot; reaching this means
            // the bookkeeping is broken: let the fault kill the process.
            self.counters.no_spare.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        // Copy ahead: the following slots of the same run of in-flight
        // pages, onto the following spares, in the same few system calls
        // (a buffer being rewritten faults once per run, not per page).
        let mut k = 1u32;
        while k < SCRATCH_PAGES
            && a + k < self.n
            && st.prot[(a + k) as usize] == Prot::ReadOnly
            && st.park[(a + k) as usize] == HOME
            && st.slot_page[(a + k) as usize] == st.slot_page[a as usize] + k
            && st.refs[st.slot_page[(a + k) as usize] as usize] > 0
            && s + k < 2 * self.n
            && st.slot_page[(s + k) as usize] == st.slot_page[s as usize] + k
            && st.prot[(s + k) as usize] == st.prot[s as usize]
            && st.free_spares.take(s + k)
        {
            k += 1;
        }
        self.counters.tcow_faults.fetch_add(1, Ordering::Relaxed);
        if !self.swap_run(st, a, s, k) {
            // Not one mapping each (the kernel keeps split VMAs apart):
            // give the extra spares back and do the faulting page alone.
            for i in 1..k {
                st.free_spares.push(s + i);
            }
            if k == 1 || !self.swap_run(st, a, s, 1) {
                st.free_spares.push(s);
                return false;
            }
            k = 1;
        }
        for i in 0..k {
            let (ai, si) = ((a + i) as usize, (s + i) as usize);
            let p = st.slot_page[ai];
            let q = st.slot_page[si];
            st.slot_page[ai] = q;
            st.slot_page[si] = p;
            st.page_slot[q as usize] = a + i;
            st.page_slot[p as usize] = s + i;
            // `a + i` now maps the spare's (writable) page, `s + i` the
            // in-flight one: read-only under `mprotect`; under the
            // userfaultfd both moved pages lost their registration
            // (writable, and nobody writes a spare slot but this path).
            st.prot[ai] = Prot::ReadWrite;
            st.prot[si] = if self.uffd.is_some() {
                Prot::ReadWrite
            } else {
                Prot::ReadOnly
            };
            st.armed[ai] = false;
            st.rewritten[ai] = true;
        }
        st.reserved -= k;
        self.counters
            .tcow_copies
            .fetch_add(k as u64, Ordering::Relaxed);
        true
    }

    /// Copy app slots `[a, a + k)` onto spare slots `[s, s + k)` and swap
    /// their mappings. `false` (nothing changed) when a range is not one
    /// mapping or a system call fails.
    fn swap_run(&self, st: &mut State, a: u32, s: u32, k: u32) -> bool {
        let (sa, aa) = (self.slot_addr(s), self.slot_addr(a));
        let len = k as usize * self.ps;
        if st.prot[s as usize] != Prot::ReadWrite {
            // A spare keeps the protection of the in-flight page it parked
            // (`mprotect` travels with `mremap`; userfaultfd protection does
            // not, so on that backend spares are always writable).
            // SAFETY: the spares are ours and free (no reader of them here).
            if unsafe { vm::protect(sa, len, Prot::ReadWrite) }.is_err() {
                return false;
            }
            for i in s..s + k {
                st.prot[i as usize] = Prot::ReadWrite;
            }
        }
        // Both ranges are mapped (readable app slots, writable spares),
        // distinct, and no Rust reference covers the spares.
        // SAFETY: as argued just above.
        unsafe { std::ptr::copy_nonoverlapping(aa as *const u8, sa as *mut u8, len) };
        // Swap the mappings through the scratch range. Each move replaces
        // its target in one step and leaves its source mapped (DONTUNMAP),
        // so no address of ours is ever a hole; the scratch range ends up
        // mapping the in-flight pages too (harmless: read-only under
        // `mprotect`, never written under the userfaultfd, and replaced by
        // the next swap).
        // The app slots, the spares and the scratch range belong to this
        // arena (the same argument holds for every move below).
        // SAFETY: as argued just above.
        if unsafe { vm::move_pages(aa, len, self.scratch) }.is_err()
            // SAFETY: as above.
            || unsafe { vm::move_pages(sa, len, aa) }.is_err()
        {
            // Nothing changed that matters: every source is still mapped
            // where it was (DONTUNMAP), the app slots still map the
            // in-flight pages.
            return false;
        }
        // SAFETY: as above.
        if unsafe { vm::move_pages(self.scratch, len, sa) }.is_err() {
            // The app slots map the spares' pages (also still at the
            // spares); put the in-flight pages back from the scratch range.
            // SAFETY: as above.
            let _ = unsafe { vm::move_pages(self.scratch, len, aa) };
            return false;
        }
        true
    }
}

fn u_fd(u: &Uffd) -> BorrowedFd<'_> {
    use std::os::fd::AsFd;
    u.as_fd()
}

/// The free spare slots: a stack plus a flag per spare, so a particular
/// spare can be taken (leaving a stale stack entry that `pop` skips).
/// `pop` and `take` never allocate (the fault handler calls them).
pub(crate) struct Spares {
    n: u32,
    stack: Vec<u32>,
    free: Box<[bool]>,
    count: u32,
}

impl Spares {
    fn new(n: u32) -> Spares {
        Spares {
            n,
            // Pop order: lowest spare first.
            stack: (n..2 * n).rev().collect(),
            free: vec![true; n as usize].into_boxed_slice(),
            count: n,
        }
    }

    /// Free spares.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Mark spare slot `s` free. May allocate (normal context), except
    /// right after a `pop`/`take` of the same slot, which left room.
    pub fn push(&mut self, s: u32) {
        let Some(f) = s
            .checked_sub(self.n)
            .and_then(|i| self.free.get_mut(i as usize))
        else {
            return;
        };
        if !*f {
            *f = true;
            self.count += 1;
            if self.stack.len() == self.stack.capacity() && self.stack.len() > 2 * self.n as usize {
                // Drop stale entries rather than grow without bound.
                let free = &self.free;
                let n = self.n;
                self.stack.retain(|&x| free[(x - n) as usize]);
            }
            self.stack.push(s);
        }
    }

    /// Take any free spare.
    pub fn pop(&mut self) -> Option<u32> {
        while let Some(s) = self.stack.pop() {
            let f = &mut self.free[(s - self.n) as usize];
            if *f {
                *f = false;
                self.count -= 1;
                return Some(s);
            }
        }
        None
    }

    /// Take slot `s` if it is a free spare.
    pub fn take(&mut self, s: u32) -> bool {
        match s
            .checked_sub(self.n)
            .and_then(|i| self.free.get_mut(i as usize))
        {
            Some(f) if *f => {
                *f = false;
                self.count -= 1;
                true
            }
            _ => false,
        }
    }
}
