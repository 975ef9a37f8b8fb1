//! A pool's state, shared by its handles and by the buffers it handed
//! out: the chunk regions and their extents, the LIFO quick lists, the
//! spare buffer allocations and the counters, under one lock; and the way
//! back in that a buffer's last handle takes (`free`, `free_recycle`,
//! `retire`). Allocating from it is `pool.rs`'s.
//!
//! Generic over `C`, the allocation a buffer lives in (always `BufCore`),
//! which the pool keeps spares of: so this file does not name the buffers
//! that point back to it (`fbuf.rs` sits above it, `pool.rs` above both).
//! Every call is static: no dynamic dispatch on the free path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::buf::config::PoolConfig;
use crate::buf::extent::Extents;
use crate::buf::reclaim::Reclaim;
use crate::region::Region;
use zcio_sys::registry::schema::{self, pool};
use zcio_sys::registry::{Kind, StatsPage};

/// Identity-like hasher for page counts (small integers, chosen by us).
#[derive(Default)]
pub(super) struct PageHasher(u64);

impl std::hash::Hasher for PageHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(b);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// One chunk region and the pages carved from it.
pub(super) struct Chunk {
    pub(super) region: Arc<Region>,
    pub(super) extents: Extents,
    /// Buffers handed out from this chunk whose last handle is alive.
    pub(super) live: u32,
    /// Retired buffers and their pages in this chunk.
    pub(super) retired: u32,
    pub(super) retired_pages: u32,
}

impl Chunk {
    pub(super) fn new(region: Region, pages: u32) -> Self {
        Self {
            region: Arc::new(region),
            extents: Extents::new(pages),
            live: 0,
            retired: 0,
            retired_pages: 0,
        }
    }
}

/// Everything behind the pool's lock.
pub(super) struct State<C> {
    pub(super) chunks: Vec<Chunk>,
    /// page count → LIFO of (chunk, first page).
    pub(super) quick: HashMap<u32, Vec<(u32, u32)>, std::hash::BuildHasherDefault<PageHasher>>,
    pub(super) quick_pages: usize,
    pub(super) in_use: usize,
    pub(super) in_use_pages: usize,
    pub(super) retired: usize,
    pub(super) retired_pages: usize,
    pub(super) allocs: u64,
    pub(super) quick_hits: u64,
    pub(super) exhausted: u64,
    pub(super) replaced: usize,
    pub(super) written_off: usize,
    /// Allocations of buffers whose last handle is gone (backing `Spent`,
    /// region still their chunk's), reused by `hand_out`: no allocation
    /// or free per buffer in the steady state. At most [`SPARE_CORES`].
    pub(super) spare: Vec<Arc<C>>,
    /// The live counters tools read (`zcio_sys::registry::schema::pool`):
    /// a local page until the first chunk is mapped, then the page of the
    /// pool's registry entry (`register_on_first_chunk`). Written under
    /// this lock only (`add`, `set`).
    pub(super) page: StatsPage,
    /// Whether registration was tried (once, at the first chunk).
    pub(super) registered: bool,
}

impl<C> State<C> {
    /// Publish the gauges after the buffers in use or retired changed.
    #[inline]
    pub(super) fn publish_use(&self, page_size: usize) {
        self.page.set(pool::IN_USE_BUFFERS, self.in_use as u64);
        self.page
            .set(pool::IN_USE_BYTES, (self.in_use_pages * page_size) as u64);
    }

    /// Publish what the chunks map and what is retired in them.
    pub(super) fn publish_chunks(&self, page_size: usize) {
        let pages: usize = self.chunks.iter().map(|c| c.extents.pages() as usize).sum();
        self.page
            .set(pool::CAPACITY_BYTES, (pages * page_size) as u64);
        self.page
            .set(pool::RETIRED_BYTES, (self.retired_pages * page_size) as u64);
    }
}

/// Most spare buffer allocations a pool keeps.
pub(super) const SPARE_CORES: usize = 64;

/// A pool's state (see the module docs): one per pool, behind every
/// `Pool` handle and every buffer it handed out.
pub(crate) struct PoolInner<C> {
    pub(super) id: u64,
    pub(super) cfg: PoolConfig,
    /// The page size.
    pub(super) page: usize,
    pub(super) state: Mutex<State<C>>,
    pub(super) reclaimers: Mutex<Vec<Weak<dyn Reclaim>>>,
}

static NEXT_POOL_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the allocator's
    // invariants half-updated in a way that matters more than losing the
    // pool, so recover the guard rather than propagate the poison.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<C> PoolInner<C> {
    /// An empty pool (chunks are created on first use).
    pub(super) fn new(cfg: PoolConfig) -> Self {
        let page_size = crate::sys::page_size();
        let page = StatsPage::local();
        let chunk_pages = cfg.chunk_size.div_ceil(page_size) as u64;
        page.set(
            pool::CAPACITY_BUFFERS,
            chunk_pages.saturating_mul(cfg.max_chunks as u64),
        );
        Self {
            id: NEXT_POOL_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cfg,
            page: page_size,
            state: Mutex::new(State {
                chunks: Vec::new(),
                quick: HashMap::default(),
                quick_pages: 0,
                in_use: 0,
                in_use_pages: 0,
                retired: 0,
                retired_pages: 0,
                allocs: 0,
                quick_hits: 0,
                exhausted: 0,
                replaced: 0,
                written_off: 0,
                spare: Vec::new(),
                page,
                registered: false,
            }),
            reclaimers: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The pool is about to map its first chunk: register it in the
    /// registry of live objects (once; a pool never used costs no file),
    /// carrying over the counters so far. A refusal leaves the local page
    /// (counted in `zcio_sys::registry::failures`); the pool works on.
    pub(super) fn register_on_first_chunk(&self, s: &mut State<C>) {
        if s.registered {
            return;
        }
        s.registered = true;
        let start: Vec<(usize, u64)> = schema::fields(Kind::Pool)
            .iter()
            .map(|f| (f.index, s.page.get(f.index)))
            .collect();
        s.page = StatsPage::register(Kind::Pool, &self.registry_name(), 0o600, &start);
    }

    /// The name tools show: the pool's own, or `<exe>:<pid>#<id>` for a
    /// pool left with the default name.
    fn registry_name(&self) -> String {
        let default = PoolConfig::default().name;
        if !self.cfg.name.is_empty() && self.cfg.name != default {
            return self.cfg.name.clone();
        }
        let exe = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "?".into());
        format!("{exe}:{}#{}", std::process::id(), self.id)
    }

    /// The last handle of a retired buffer is gone: its pages leave the
    /// in-use count but never return to a free list (a peer's peer may
    /// still read them). They stay in their chunk, so they keep counting
    /// against `max_chunks` until the chunk is replaced
    /// (`replace_retired`); the kernel frees them when every mapping of the
    /// chunk is gone.
    pub(crate) fn retire(&self, chunk: u32, _first: u32, pages: u32) {
        let mut s = lock(&self.state);
        s.in_use = s.in_use.saturating_sub(1);
        s.in_use_pages = s.in_use_pages.saturating_sub(pages as usize);
        s.retired += 1;
        s.retired_pages += pages as usize;
        if let Some(c) = s.chunks.get_mut(chunk as usize) {
            c.live = c.live.saturating_sub(1);
            c.retired += 1;
            c.retired_pages += pages;
        }
        s.publish_use(self.page);
        s.page
            .set(pool::RETIRED_BYTES, (s.retired_pages * self.page) as u64);
    }

    pub(crate) fn free(&self, chunk: u32, first: u32, pages: u32) {
        let mut s = lock(&self.state);
        Self::free_locked(&mut s, self.cfg.quick_list_cap, chunk, first, pages);
        s.publish_use(self.page);
    }

    /// [`PoolInner::free`], keeping the buffer's allocation `core` (its
    /// backing already `Spent`, nothing else pointing to it) for the next
    /// `hand_out`.
    pub(crate) fn free_recycle(&self, chunk: u32, first: u32, pages: u32, core: Arc<C>) {
        let mut s = lock(&self.state);
        Self::free_locked(&mut s, self.cfg.quick_list_cap, chunk, first, pages);
        s.publish_use(self.page);
        if s.spare.len() < SPARE_CORES {
            s.spare.push(core);
            return;
        }
        drop(s);
        // Dropped outside the lock (its backing is `Spent`: nothing runs).
        drop(core);
    }

    fn free_locked(s: &mut State<C>, cap: usize, chunk: u32, first: u32, pages: u32) {
        s.in_use = s.in_use.saturating_sub(1);
        s.in_use_pages = s.in_use_pages.saturating_sub(pages as usize);
        if let Some(c) = s.chunks.get_mut(chunk as usize) {
            c.live = c.live.saturating_sub(1);
        }
        let list = s.quick.entry(pages).or_default();
        if list.len() < cap {
            list.push((chunk, first));
            s.quick_pages += pages as usize;
        } else if let Some(c) = s.chunks.get_mut(chunk as usize) {
            let ok = c.extents.free(first, pages);
            debug_assert!(ok, "double free of pool pages");
        }
    }
}
