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

use crate::buf::extent::Extents;
use crate::sys::vm::{self, Prot};

/// "No park slot": the slot maps its own page in place.
pub(crate) const HOME: u32 = u32::MAX;

/// Counters of one arena (process-local, Relaxed).
#[derive(Default, Debug)]
pub(crate) struct Counters {
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
    /// Spare slots whose pages are free (not in flight); capacity `n`, so
    /// pushing never allocates.
    pub free_spares: Vec<u32>,
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
    /// One reserved page the TCOW swap passes a mapping through.
    pub scratch: usize,
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
    pub fn new(n: u32, ps: usize, base: usize, park_base: usize, scratch: usize) -> Self {
        let slots = 2 * n as usize;
        let mut free_spares = Vec::with_capacity(n as usize);
        // Pop order: lowest spare first.
        free_spares.extend((n..2 * n).rev());
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
            }),
            n,
            ps,
            base,
            park_base,
            scratch,
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
            let run_start = s;
            while s < end && st.prot[s as usize] != prot {
                s += 1;
            }
            let len = (s - run_start) as usize * self.ps;
            // The slots belong to this arena's mapping; the caller holds
            // the lock and does not access these pages meanwhile.
            // SAFETY: as argued just above.
            unsafe { vm::protect(self.slot_addr(run_start), len, prot)? };
            for i in run_start..s {
                st.prot[i as usize] = prot;
            }
        }
        Ok(())
    }

    /// The TCOW fault path, from the signal handler: a write hit app slot
    /// `slot`. Returns whether the write may be retried (`false`: not a
    /// fault of ours to fix, e.g. a hidden page).
    pub fn on_write_fault(&self, slot: u32) -> bool {
        let mut st = self.locked();
        let a = slot as usize;
        match st.prot[a] {
            // Another thread fixed it meanwhile.
            Prot::ReadWrite => true,
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
        let Some(s) = st.free_spares.pop() else {
            // `lend` keeps a spare per protected slot; reaching this means
            // the bookkeeping is broken: let the fault kill the process.
            self.counters.no_spare.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let (sa, aa) = (self.slot_addr(s), self.slot_addr(a));
        if st.prot[s as usize] != Prot::ReadWrite {
            // SAFETY: slot `s` is ours and free (no reader of it here).
            if unsafe { vm::protect(sa, self.ps, Prot::ReadWrite) }.is_err() {
                st.free_spares.push(s);
                return false;
            }
            st.prot[s as usize] = Prot::ReadWrite;
        }
        // Both slots are mapped (readable `a`, writable `s`), page-sized,
        // distinct, and no Rust reference covers the spare slot.
        // SAFETY: as argued just above.
        unsafe { std::ptr::copy_nonoverlapping(aa as *const u8, sa as *mut u8, self.ps) };
        // Swap the mappings through the scratch page; each step moves one
        // page-sized piece of our own mappings (split off its VMA).
        // SAFETY: slots `a` and `s` and the scratch page belong to this
        // arena; after the three moves every address is mapped again
        // (the scratch hole is re-filled with a placeholder).
        let moved = unsafe {
            vm::move_pages(aa, self.ps, self.scratch).and_then(|()| {
                vm::move_pages(sa, self.ps, aa)
                    .and_then(|()| vm::move_pages(self.scratch, self.ps, sa))
                    .inspect_err(|_| {
                        // Put the in-flight page back where it was.
                        let _ = vm::move_pages(self.scratch, self.ps, aa);
                    })
            })
        };
        // SAFETY: the scratch page is ours; a hole must not stay a hole.
        let _ = unsafe { vm::placeholder(self.scratch, self.ps) };
        if moved.is_err() {
            st.free_spares.push(s);
            return false;
        }
        let p = st.slot_page[a as usize];
        let q = st.slot_page[s as usize];
        st.slot_page[a as usize] = q;
        st.slot_page[s as usize] = p;
        st.page_slot[q as usize] = a;
        st.page_slot[p as usize] = s;
        // `a` now maps the spare's (writable) mapping, `s` the read-only one.
        st.prot[a as usize] = Prot::ReadWrite;
        st.prot[s as usize] = Prot::ReadOnly;
        st.reserved -= 1;
        self.counters.tcow_copies.fetch_add(1, Ordering::Relaxed);
        true
    }
}
