//! Arenas: zcio-registered memory that applications allocate their I/O
//! buffers from, so that output can lend the pages in place and input can
//! swap a peer's pages in.
//!
//! An arena is one memfd region (sealed against resizing and against new
//! writable mappings: peers get a read-only descriptor and can never write
//! it) mapped once, read-write, in the owner. See [`super::pages`] for the
//! layout (app slots, spare slots, park window) and the page table.
//!
//! Everything in an arena is readable by every peer its pages were lent
//! to (the peer maps the whole region, as with pool chunks): use one arena
//! per trust domain.

use std::sync::{Arc, Mutex};

use thiserror::Error;

use super::pages::{Table, HOME, SCRATCH_PAGES};
use super::tcow::{self, Registration};
use crate::buf::extent::Extents;
use crate::buf::fbuf::LentPages;
use crate::region::{Region, RegionError};
use crate::vm::{self, Prot};
use crate::{Errno, Fbuf};

/// Why an arena could not be made or a buffer not be allocated.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArenaError {
    /// The capacity is zero or too large (more than 2^30 pages).
    #[error("arena capacity {0} bytes is not between one page and 4 TiB")]
    BadCapacity(usize),
    /// The memfd region could not be made.
    #[error("arena region: {0}")]
    Region(#[from] RegionError),
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// What was attempted.
        op: &'static str,
        /// The OS error.
        errno: Errno,
    },
    /// The process already has the maximum number of arenas (64).
    #[error("too many arenas in this process (the limit is 64); drop unused ones")]
    TooMany,
    /// Nothing available now: no free run of that many pages is left
    /// (buffers given back make room).
    #[error("would block: the arena has no free run of {pages} pages (capacity {capacity} pages); give buffers back first")]
    WouldBlock {
        /// Pages asked for.
        pages: u32,
        /// The arena's capacity in pages.
        capacity: u32,
    },
}

/// How pages are lent in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lend {
    /// Write-protect them until returned (TCOW: emulated copy).
    Protect,
    /// Make them inaccessible (region hiding: emulated move).
    Hide,
    /// Wire (`mlock`) them until returned (share, weak move).
    Wire,
    /// No protection change (emulated share, emulated weak move).
    Plain,
}

/// Why pages could not be lent in place (the caller copies instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LendRefused {
    /// The range is not inside the arena's app window.
    Outside,
    /// A page of the range holds a peer's swapped-in page, or is hidden.
    NotOwn,
    /// Not enough spare pages for the copies writes might need.
    NoSpare,
    /// The range maps more than this many discontiguous file runs.
    Fragmented,
    /// `mprotect` failed.
    Os(Errno),
    /// The kernel cannot move shared pages without unmapping them
    /// (`MREMAP_DONTUNMAP`), which TCOW needs.
    Unsupported,
}

pub(crate) struct Core {
    /// Dropped first (see `Drop`): no handler uses `table` afterwards.
    registration: Option<Registration>,
    pub(crate) table: Box<Table>,
    pub(crate) region: Arc<Region>,
    alloc: Mutex<Extents>,
    /// App slot → the peer buffer whose page is swapped in there (kept so
    /// the peer does not reuse the page while we map it).
    held: Mutex<Vec<Option<Fbuf>>>,
}

impl Drop for Core {
    fn drop(&mut self) {
        drop(self.registration.take());
        let t = &self.table;
        // The park window and the scratch page were reserved by `Arena::new`
        // and nothing of ours lives there any more.
        // SAFETY: as argued just above.
        unsafe {
            let _ = vm::release(t.park_base, t.n as usize * t.ps);
            let _ = vm::release(t.scratch, SCRATCH_PAGES as usize * t.ps);
        }
        // `region` unmaps the app and spare slots (one munmap over all of
        // them, however they were permuted).
    }
}

/// Registered memory for application I/O buffers (see the module docs).
/// Cheap to clone.
#[derive(Clone)]
pub struct Arena {
    pub(crate) core: Arc<Core>,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("capacity", &self.capacity())
            .field("stats", &self.stats())
            .finish()
    }
}

/// How an arena write-protects pages in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    /// `mprotect` + `SIGSEGV`: works everywhere, and the default — it is
    /// the faster one here (see below).
    Mprotect,
    /// userfaultfd write protection (Linux 5.19+ for shared memory),
    /// faults delivered as `SIGBUS` in the writing thread: per page, no
    /// VMA splits, cheaper calls for small ranges. Measured on the
    /// project's machine (Linux 6.18, `zcio-bench semantics`, 1 MiB,
    /// sender rewriting every page between outputs) it is about 6× slower
    /// end to end than `mprotect` (2.3 vs 13.9 GB/s): after the protection
    /// is resolved each page takes another write fault. Falls back to
    /// `mprotect` where the userfaultfd cannot be opened (seccomp,
    /// `vm.unprivileged_userfaultfd = 0` without `CAP_SYS_PTRACE` and no
    /// user-mode-only support).
    Userfaultfd,
}

impl Protection {
    /// `ZCIO_PROTECT=uffd` (or `userfaultfd`) or `=mprotect` (default).
    pub fn from_env() -> Protection {
        match std::env::var("ZCIO_PROTECT").as_deref() {
            Ok("uffd") | Ok("userfaultfd") => Protection::Userfaultfd,
            _ => Protection::Mprotect,
        }
    }
}

/// The process's userfaultfd (one for all arenas; it must outlive every
/// registration, so it is never closed).
fn process_uffd() -> Option<&'static crate::uffd::Uffd> {
    static UFFD: std::sync::OnceLock<Option<crate::uffd::Uffd>> = std::sync::OnceLock::new();
    UFFD.get_or_init(|| crate::uffd::Uffd::open().ok()).as_ref()
}

/// Counters of an arena.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ArenaStats {
    /// Write faults on in-flight pages that made private copies (TCOW);
    /// one fault copies a run of up to 32 in-flight pages.
    pub tcow_faults: u64,
    /// Pages copied by TCOW.
    pub tcow_copies: u64,
    /// Writes to returned pages that only needed writing re-enabled.
    pub lazy_unprotects: u64,
    /// Write-protect operations (system calls) at output.
    pub protects: u64,
    /// Unprotect operations (system calls) when pages came back.
    pub unprotects: u64,
    /// Pages of peers swapped into buffers of this arena (input).
    pub swapped_pages: u64,
    /// Pages whose own backing was put back after a swap.
    pub rehomed_pages: u64,
    /// Pages lent and not yet returned.
    pub pages_in_flight: u64,
}

fn os(op: &'static str) -> impl FnOnce(Errno) -> ArenaError {
    move |errno| ArenaError::Os { op, errno }
}

impl Arena {
    /// An arena with room for `capacity` bytes of buffers (rounded up to
    /// pages). Memory is only used for pages that are touched; the arena
    /// reserves three times `capacity` of address space.
    pub fn new(capacity: usize) -> Result<Arena, ArenaError> {
        Self::with_protection(capacity, Protection::from_env())
    }

    /// An arena whose write protection uses `how` (the userfaultfd falls
    /// back to `mprotect` when it cannot be opened).
    pub fn with_protection(capacity: usize, how: Protection) -> Result<Arena, ArenaError> {
        let ps = crate::sys::page_size();
        let pages = capacity.div_ceil(ps);
        if pages == 0 || pages > 1 << 30 {
            return Err(ArenaError::BadCapacity(capacity));
        }
        let n = pages as u32;
        let region = Region::create("zcio-arena", 2 * pages * ps, false)?;
        let base = region.base() as usize;
        let park_base = vm::reserve(pages * ps).map_err(os("mmap (park window)"))?;
        let scratch_len = SCRATCH_PAGES as usize * ps;
        let scratch = match vm::reserve(scratch_len) {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: reserved just above, unused.
                let _ = unsafe { vm::release(park_base, pages * ps) };
                return Err(ArenaError::Os {
                    op: "mmap (scratch)",
                    errno: e,
                });
            }
        };
        let mut uffd = match how {
            Protection::Mprotect => None,
            Protection::Userfaultfd => process_uffd(),
        };
        if let Some(u) = uffd {
            // The whole app window, once; pages moved later re-register.
            // SAFETY: the window is this arena's fresh mapping.
            if unsafe { u.register_wp(base as *mut u8, pages * ps) }.is_err() {
                uffd = None;
            }
        }
        // TCOW and swapping move shared pages with MREMAP_DONTUNMAP (Linux
        // 5.13+): probe once with the last spare slot (the scratch range
        // then maps that spare too, which is harmless). Without it (older
        // kernels, valgrind) the arena lends nothing and swaps nothing:
        // every semantics copies, correctly.
        let last_spare = base + (2 * pages - 1) * ps;
        // SAFETY: both addresses are this arena's own, fresh mappings.
        let movable = unsafe { vm::move_pages(last_spare, ps, scratch) }.is_ok();
        let table = Box::new(Table::new(n, ps, base, park_base, scratch, uffd, movable));
        let mut core = Core {
            registration: None,
            table,
            region: Arc::new(region),
            alloc: Mutex::new(Extents::new(n)),
            held: Mutex::new(vec![None; pages]),
        };
        // The table is boxed (stable address) and owned by `core`, whose
        // `Drop` unregisters before the box is freed.
        // SAFETY: as argued just above.
        core.registration = unsafe { tcow::register(&*core.table, base, pages * ps) };
        if core.registration.is_none() {
            return Err(ArenaError::TooMany);
        }
        Ok(Arena {
            core: Arc::new(core),
        })
    }

    /// The write protection in use.
    pub fn protection(&self) -> Protection {
        if self.core.table.uffd.is_some() {
            Protection::Userfaultfd
        } else {
            Protection::Mprotect
        }
    }

    /// Whether this arena can lend pages in place and swap pages in (the
    /// kernel moves shared pages with `MREMAP_DONTUNMAP`, Linux 5.13+; not
    /// under valgrind). When `false` every semantics copies.
    pub fn zero_copy(&self) -> bool {
        self.core.table.movable
    }

    /// Capacity in bytes (whole pages).
    pub fn capacity(&self) -> usize {
        self.core.table.n as usize * self.core.table.ps
    }

    /// A buffer of `len` bytes starting at a page boundary.
    pub fn alloc(&self, len: usize) -> Result<ArenaBuf, ArenaError> {
        self.alloc_at(len, 0)
    }

    /// A buffer of `len` bytes starting `page_offset` bytes into its first
    /// page (input alignment: match the sender's page offset so whole
    /// pages can be swapped in). `page_offset` is taken modulo the page
    /// size.
    pub fn alloc_at(&self, len: usize, page_offset: usize) -> Result<ArenaBuf, ArenaError> {
        let t = &self.core.table;
        let offset = page_offset % t.ps;
        let pages = (offset + len.max(1)).div_ceil(t.ps);
        let pages = u32::try_from(pages).map_err(|_| ArenaError::WouldBlock {
            pages: u32::MAX,
            capacity: t.n,
        })?;
        let first = lock(&self.core.alloc)
            .alloc(pages)
            .ok_or(ArenaError::WouldBlock {
                pages,
                capacity: t.n,
            })?;
        Ok(ArenaBuf {
            arena: self.clone(),
            first,
            pages,
            offset,
            len,
        })
    }

    /// Whether `[ptr, ptr + len)` lies in this arena's buffer window.
    pub fn contains(&self, ptr: *const u8, len: usize) -> bool {
        self.core.slots_of(ptr as usize, len).is_some()
    }

    /// The arena's counters.
    pub fn stats(&self) -> ArenaStats {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.core.table.counters;
        let in_flight = {
            let st = self.core.table.locked();
            st.refs.iter().filter(|&&r| r > 0).count() as u64
        };
        ArenaStats {
            tcow_faults: c.tcow_faults.load(Relaxed),
            tcow_copies: c.tcow_copies.load(Relaxed),
            lazy_unprotects: c.lazy_unprotects.load(Relaxed),
            protects: c.protects.load(Relaxed),
            unprotects: c.unprotects.load(Relaxed),
            swapped_pages: c.swapped_pages.load(Relaxed),
            rehomed_pages: c.rehomed_pages.load(Relaxed),
            pages_in_flight: in_flight,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Most file runs one lend may produce (one message slice each).
pub(crate) const MAX_RUNS: usize = 62;

impl Core {
    /// Whether to lend `[addr, addr + len)` under emulated copy again, from
    /// how much of it the application rewrote while it was last in flight
    /// (TCOW copies, each costing a fault and a page copy): lend when at
    /// most `tolerance` of its pages were, else copy — except every 2nd,
    /// 4th, … up to `max_hold`th output, which lends as a probe (the
    /// application may have stopped rewriting). Ranges outside the arena
    /// are `true` (lending refuses them, and the caller copies anyway).
    pub(crate) fn lend_again(
        &self,
        addr: usize,
        len: usize,
        tolerance: f64,
        max_hold: u16,
    ) -> bool {
        let Some((first, count)) = self.slots_of(addr, len) else {
            return true;
        };
        let mut st = self.table.locked();
        let range = first as usize..(first + count) as usize;
        let rewritten = st.rewritten[range].iter().filter(|&&r| r).count();
        let f = first as usize;
        if rewritten as f64 <= tolerance * count as f64 {
            st.streak[f] = 0;
            st.hold[f] = 0;
            return true;
        }
        if st.hold[f] > 0 {
            st.hold[f] -= 1;
            return false;
        }
        // Probe; if it confirms the rewriting, wait twice as long.
        st.streak[f] = st.streak[f].saturating_add(1).min(15);
        st.hold[f] = 1u16
            .checked_shl(u32::from(st.streak[f]))
            .unwrap_or(u16::MAX)
            .min(max_hold);
        true
    }

    /// App slots `[first, first + count)` covering `[addr, addr + len)`.
    pub(crate) fn slots_of(&self, addr: usize, len: usize) -> Option<(u32, u32)> {
        let t = &self.table;
        let window = t.n as usize * t.ps;
        let off = addr.checked_sub(t.base)?;
        if len == 0 || off >= window || len > window - off {
            return None;
        }
        let first = off / t.ps;
        let last = (off + len).div_ceil(t.ps);
        Some((first as u32, (last - first) as u32))
    }

    /// Lend `[addr, addr + len)` in place: count a reference on each page,
    /// change protection per `mode`, and return one buffer per run of
    /// contiguous file pages (in order). The pages come back through
    /// [`LentPages::returned`] when the last handle (here and in the peer)
    /// is gone.
    pub(crate) fn lend(
        self: &Arc<Self>,
        addr: usize,
        len: usize,
        mode: Lend,
    ) -> Result<Vec<Fbuf>, LendRefused> {
        let t = &self.table;
        let (first, count) = self.slots_of(addr, len).ok_or(LendRefused::Outside)?;
        if !t.movable {
            return Err(LendRefused::Unsupported);
        }
        let mut st = t.locked();
        let mut need = 0u32;
        let mut runs = 1usize;
        for s in first..first + count {
            let i = s as usize;
            if st.park[i] != HOME || st.prot[i] == Prot::None {
                return Err(LendRefused::NotOwn);
            }
            let p = st.slot_page[i] as usize;
            if mode == Lend::Protect && !(st.prot[i] == Prot::ReadOnly && st.refs[p] > 0) {
                need += 1;
            }
            if s > first && st.slot_page[i] != st.slot_page[i - 1] + 1 {
                runs += 1;
            }
        }
        if runs > MAX_RUNS {
            return Err(LendRefused::Fragmented);
        }
        if need > 0 && (st.free_spares.len() as u32).saturating_sub(st.reserved) < need {
            return Err(LendRefused::NoSpare);
        }
        let target = match mode {
            Lend::Protect => Some(Prot::ReadOnly),
            Lend::Hide => Some(Prot::None),
            Lend::Wire | Lend::Plain => None,
        };
        if let Some(prot) = target {
            // Nothing else in this process writes these pages while the
            // lock is held (the application's own writes fault and wait).
            t.set_prot(&mut st, first, count, prot)
                .map_err(LendRefused::Os)?;
            t.counters
                .protects
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if mode == Lend::Wire {
            // Wiring is best effort (RLIMIT_MEMLOCK may forbid it): the
            // pages are lent either way.
            // SAFETY: the slots are mapped and ours.
            if unsafe { vm::wire(t.slot_addr(first), count as usize * t.ps, true) }.is_ok() {
                for s in first..first + count {
                    st.wired[s as usize] = true;
                }
            }
        }
        st.reserved += need;
        for s in first..first + count {
            let p = st.slot_page[s as usize] as usize;
            st.refs[p] += 1;
            if mode == Lend::Protect {
                // A new flight: what it rewrites is counted afresh.
                st.rewritten[s as usize] = false;
            }
        }
        // Build the runs: byte ranges of the file, contiguous pages merged.
        let mut out = Vec::with_capacity(runs);
        let start_in_page = (addr - t.base) % t.ps;
        let mut run_file = st.slot_page[first as usize] as usize * t.ps + start_in_page;
        let mut run_len = 0usize;
        let mut remaining = len;
        let mut in_page = start_in_page;
        for s in first..first + count {
            let i = s as usize;
            let take = (t.ps - in_page).min(remaining);
            if s > first && st.slot_page[i] != st.slot_page[i - 1] + 1 {
                out.push((run_file, run_len));
                run_file = st.slot_page[i] as usize * t.ps;
                run_len = 0;
            }
            run_len += take;
            remaining -= take;
            in_page = 0;
        }
        out.push((run_file, run_len));
        drop(st);
        let owner: Arc<dyn LentPages> = self.clone();
        Ok(out
            .into_iter()
            .map(|(off, len)| {
                Fbuf::lent(self.region.clone(), off, len, owner.clone())
                    .expect("runs lie inside the region")
            })
            .collect())
    }

    /// Swap `pages` whole pages of `src` (starting at byte `src_off` of its
    /// region, page-aligned) over app slots starting at `first`: each
    /// slot's own page is parked, and the peer's pages are mapped privately
    /// (our writes stay ours). Slots already holding swapped-in pages are
    /// simply mapped over. Refused (nothing changed) when a slot's own
    /// page is in flight or hidden.
    pub(crate) fn swap_in(
        &self,
        first: u32,
        pages: u32,
        src: &Region,
        src_off: usize,
    ) -> Result<(), Errno> {
        let t = &self.table;
        let mut st = t.locked();
        for s in first..first + pages {
            let i = s as usize;
            if st.park[i] == HOME
                && (st.refs[st.slot_page[i] as usize] > 0 || st.prot[i] != Prot::ReadWrite)
            {
                return Err(Errno::BUSY);
            }
        }
        // Park the own pages, run by run.
        let mut s = first;
        while s < first + pages {
            if st.park[s as usize] != HOME {
                s += 1;
                continue;
            }
            let run_start = s;
            while s < first + pages && st.park[s as usize] == HOME {
                s += 1;
            }
            let n = s - run_start;
            let Some(k) = st.park_free.alloc(n) else {
                return Err(Errno::NOMEM);
            };
            // The slots and park indices are ours; the move keeps the own
            // pages (and their writable mappings) in the park window.
            // SAFETY: as argued just above.
            let moved = unsafe {
                vm::move_pages(t.slot_addr(run_start), n as usize * t.ps, t.park_addr(k))
            };
            if moved.is_err() {
                // A run spanning several mappings: move page by page.
                for j in 0..n {
                    // SAFETY: as above, one page at a time.
                    unsafe {
                        vm::move_pages(t.slot_addr(run_start + j), t.ps, t.park_addr(k + j))
                    }?;
                }
            }
            for j in 0..n {
                st.park[(run_start + j) as usize] = k + j;
            }
        }
        // Map the peer's pages over the (now empty or foreign) slots.
        // SAFETY: the slots are ours (their own pages are parked).
        let mapped = unsafe {
            vm::map_private_fixed(
                t.slot_addr(first),
                pages as usize * t.ps,
                src.fd(),
                src_off as u64,
                true,
            )
        };
        if let Err(e) = mapped {
            // A failed MAP_FIXED may have unmapped the range: put every own
            // page back (the caller drops what it held there).
            drop(st);
            self.rehome(first, pages);
            return Err(e);
        }
        for s in first..first + pages {
            st.prot[s as usize] = Prot::ReadWrite;
            st.armed[s as usize] = false;
        }
        t.counters
            .swapped_pages
            .fetch_add(pages as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Keep `src` (a peer buffer) alive while its pages are swapped into
    /// app slots `[first, first + pages)`; what was held there is dropped
    /// (its peer gets the notice).
    pub(crate) fn hold(&self, first: u32, pages: u32, src: &Fbuf) {
        let old: Vec<Option<Fbuf>> = {
            let mut held = lock(&self.held);
            (first..first + pages)
                .map(|s| held[s as usize].replace(src.clone()))
                .collect()
        };
        drop(old);
    }

    /// Put the own pages back under app slots `[first, first + pages)`
    /// that hold swapped-in pages (the swapped-in contents are dropped).
    pub(crate) fn rehome(&self, first: u32, pages: u32) {
        self.rehome_pages(first, pages);
        let old: Vec<Option<Fbuf>> = {
            let mut held = lock(&self.held);
            (first..first + pages)
                .map(|s| held[s as usize].take())
                .collect()
        };
        drop(old);
    }

    fn rehome_pages(&self, first: u32, pages: u32) {
        let t = &self.table;
        let mut st = t.locked();
        let mut s = first;
        while s < first + pages {
            let k = st.park[s as usize];
            if k == HOME {
                s += 1;
                continue;
            }
            // A run of slots parked at consecutive park indices (parked
            // together by one `swap_in`): one move back.
            let mut n = 1;
            while s + n < first + pages && st.park[(s + n) as usize] == k + n {
                n += 1;
            }
            // Park indices `k..k+n` hold the own pages of slots `s..s+n`;
            // moving them back replaces the peer's private mapping, and
            // the park range gets a placeholder again. All addresses are
            // this arena's.
            let len = n as usize * t.ps;
            // SAFETY: as argued just above.
            let moved = unsafe { vm::move_pages(t.park_addr(k), len, t.slot_addr(s)) }.is_ok()
                || (n > 1
                    && (0..n).all(|i| {
                        // Not one mapping: page by page.
                        // SAFETY: as above, one page at a time.
                        unsafe { vm::move_pages(t.park_addr(k + i), t.ps, t.slot_addr(s + i)) }
                            .is_ok()
                    }));
            if moved {
                // SAFETY: the park range is ours.
                let _ = unsafe { vm::placeholder(t.park_addr(k), len) };
                st.park_free.free(k, n);
                for i in s..s + n {
                    st.park[i as usize] = HOME;
                    st.prot[i as usize] = Prot::ReadWrite;
                    st.armed[i as usize] = false;
                }
                t.counters
                    .rehomed_pages
                    .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            }
            s += n;
        }
    }

    /// Change the protection of app slots (reveal hidden pages, wire).
    pub(crate) fn set_prot(&self, first: u32, pages: u32, prot: Prot) -> Result<(), Errno> {
        let mut st = self.table.locked();
        self.table.set_prot(&mut st, first, pages, prot)
    }

    /// Whether any page of app slots `[first, first + pages)` is in flight.
    pub(crate) fn in_flight(&self, first: u32, pages: u32) -> bool {
        let st = self.table.locked();
        (first..first + pages).any(|s| st.refs[st.slot_page[s as usize] as usize] > 0)
    }

    /// Return app slots to the allocator: swapped-in pages go back,
    /// hidden pages are revealed — except hidden pages still lent, which
    /// are never reused (a new owner would write what a peer reads).
    pub(crate) fn free_slots(&self, first: u32, pages: u32) {
        if pages == 0 {
            return;
        }
        self.rehome(first, pages);
        let mut keep = Vec::new();
        {
            let t = &self.table;
            let mut st = t.locked();
            let mut reveal = Vec::new();
            for s in first..first + pages {
                let i = s as usize;
                // The next owner's rewriting history starts afresh.
                st.rewritten[i] = false;
                st.streak[i] = 0;
                st.hold[i] = 0;
                if st.prot[i] == Prot::None {
                    if st.refs[st.slot_page[i] as usize] > 0 {
                        continue;
                    }
                    reveal.push(s);
                } else {
                    keep.push(s);
                }
            }
            // Reveal the returned hidden pages run by run (one mprotect
            // each, not one per page).
            for (start, n) in runs(&reveal) {
                if t.set_prot(&mut st, start, n, Prot::ReadWrite).is_ok() {
                    keep.extend(start..start + n);
                }
            }
        }
        keep.sort_unstable();
        let mut alloc = lock(&self.alloc);
        for (start, n) in runs(&keep) {
            alloc.free(start, n);
        }
    }
}

/// The maximal runs of consecutive values in an ascending list, as
/// `(first, count)`.
fn runs(sorted: &[u32]) -> impl Iterator<Item = (u32, u32)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let start = *sorted.get(i)?;
        let mut n = 1;
        while start
            .checked_add(n)
            .is_some_and(|v| sorted.get(i + n as usize) == Some(&v))
        {
            n += 1;
        }
        i += n as usize;
        Some((start, n))
    })
}

impl LentPages for Core {
    fn returned(&self, first_page: u32, pages: u32, retired: bool) {
        let t = &self.table;
        let mut st = t.locked();
        let mut unprotect: Vec<u32> = Vec::new();
        let mut unwire: Vec<u32> = Vec::new();
        // Descending, so the spares freed here are popped in ascending
        // order (consecutive TCOW copies then land on consecutive pages).
        for p in (first_page..first_page + pages).rev() {
            let pi = p as usize;
            if pi >= st.refs.len() || st.refs[pi] == 0 {
                continue;
            }
            if retired {
                // A peer may still read it: the page stays in flight forever.
                st.retired_pages += 1;
                continue;
            }
            st.refs[pi] -= 1;
            if st.refs[pi] > 0 {
                continue;
            }
            let s = st.page_slot[pi];
            if s < t.n && st.wired[s as usize] {
                st.wired[s as usize] = false;
                unwire.push(s);
            }
            if s < t.n {
                if st.prot[s as usize] == Prot::ReadOnly {
                    st.reserved -= 1;
                    unprotect.push(s);
                }
            } else {
                // A parked TCOW original: its spare slot is free again
                // (still read-only; the fault path re-enables writing).
                st.free_spares.push(s);
            }
        }
        // Unwire and unprotect run by run (one system call per run, not
        // per page: a 16 MiB buffer is 4096 pages).
        unwire.sort_unstable();
        for (start, n) in runs(&unwire) {
            // SAFETY: the slots are mapped and ours.
            let _ = unsafe { vm::wire(t.slot_addr(start), n as usize * t.ps, false) };
        }
        unprotect.sort_unstable();
        for (start, n) in runs(&unprotect) {
            if t.set_prot(&mut st, start, n, Prot::ReadWrite).is_ok() {
                t.counters
                    .unprotects
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

/// An application buffer in an [`Arena`]: the application owns it, reads
/// and writes it like any memory, and may output it at once again; zcio
/// keeps the bytes a peer was given from changing (TCOW) and swaps a
/// peer's pages into it on input.
///
/// The bytes are this process's own (no peer can write the arena), except
/// after an input that swapped in the pages of a peer declared trusted
/// (`unsafe` [`Channel::trust_peer`](crate::Channel::trust_peer)): then
/// they are a private mapping of that peer's pages, which the peer
/// promised — by running zcio's TCOW — not to change.
pub struct ArenaBuf {
    pub(crate) arena: Arena,
    pub(crate) first: u32,
    pub(crate) pages: u32,
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

impl std::fmt::Debug for ArenaBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArenaBuf")
            .field("len", &self.len)
            .field("page_offset", &self.offset)
            .finish()
    }
}

impl ArenaBuf {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Offset of the first byte within its page.
    pub fn page_offset(&self) -> usize {
        self.offset
    }

    /// The arena this buffer belongs to.
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// Pointer to the first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        (self.arena.core.table.slot_addr(self.first) + self.offset) as *mut u8
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // The range lies in the arena's app window, allocated to this
        // buffer alone; only this process can write it (the region is
        // sealed against writable mappings by others), or — after a swap —
        // it is a private mapping of pages of a peer the caller declared
        // trusted (see the type's docs). Protection changes and TCOW swaps
        // keep the contents at every address.
        // SAFETY: as argued just above.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    /// The bytes, writable. Writes to pages a peer still reads fault once
    /// and continue on a private copy (TCOW).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // As `as_slice`; `&mut self` makes this the only reference.
        // SAFETY: as argued in `as_slice` and just above.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.len) }
    }

    /// Whether a peer still holds pages of this buffer (lent by an output
    /// and not yet returned): a write now would take a private copy of
    /// each page it touches (TCOW) under emulated copy, or change what the
    /// peer reads under share. Returned pages are noticed when the
    /// channel processes its deallocation notices
    /// ([`Channel::reclaim`](crate::Channel::reclaim)).
    pub fn in_flight(&self) -> bool {
        self.arena.core.in_flight(self.first, self.pages)
    }

    /// Give back any peer pages swapped into this buffer (the peer may
    /// reuse them), restoring the arena's own pages; the contents become
    /// indeterminate.
    pub fn release_swapped(&mut self) {
        self.arena.core.rehome(self.first, self.pages);
    }
}

impl ArenaBuf {
    /// Drop the buffer without returning its slots (pages a peer may
    /// still read and that must never be reused).
    pub(crate) fn abandon(mut self) {
        self.pages = 0;
    }
}

impl std::ops::Deref for ArenaBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for ArenaBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl Drop for ArenaBuf {
    fn drop(&mut self) {
        self.arena.core.free_slots(self.first, self.pages);
    }
}

impl ArenaError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> zcio_sys::error::ErrorKind {
        use zcio_sys::error::ErrorKind as K;
        match self {
            Self::BadCapacity(_) => K::InvalidInput,
            Self::Region(r) => r.kind(),
            Self::Os { .. } => K::Os,
            Self::TooMany => K::NoSpace,
            Self::WouldBlock { .. } => K::WouldBlock,
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Os { errno, .. } => Some(*errno),
            Self::Region(r) => r.errno(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_split_an_ascending_list_at_gaps() {
        let v: Vec<(u32, u32)> = runs(&[1, 2, 3, 7, 9, 10]).collect();
        assert_eq!(v, vec![(1, 3), (7, 1), (9, 2)]);
        assert_eq!(runs(&[]).count(), 0);
        assert_eq!(
            runs(&[u32::MAX - 1, u32::MAX]).collect::<Vec<_>>(),
            vec![(u32::MAX - 1, 2)]
        );
    }
}
