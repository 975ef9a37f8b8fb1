//! The cached allocator of a path: page-aligned buffers of any size carved
//! from a bounded set of chunk regions that stay mapped in every domain of
//! the path, so reusing a buffer costs no mapping work.
//!
//! Hot path: a LIFO quick list per page count (the most recently freed
//! buffer of that size is reused first: its pages are warm in every cache
//! and TLB along the path). Behind it, a best-fit extent allocator per chunk
//! with coalescing. New chunks are created on demand up to `max_chunks`;
//! after that allocation reports `WouldBlock` or waits (bounded) for
//! deallocation notices — never unbounded growth.
//!
//! This file allocates; the state it allocates from, and the free path a
//! buffer's last handle takes back into it, are `pool_inner.rs`'s.

use std::sync::{Arc, MutexGuard, Weak};
use std::time::{Duration, Instant};

use thiserror::Error;

pub use crate::buf::config::PoolConfig;
use crate::buf::fbuf::{Backing, BufCore, FbufMut};
use crate::buf::pool_inner::{lock, Chunk, PoolInner, State, SPARE_CORES};
pub use crate::buf::reclaim::Reclaim;
use crate::region::{Region, RegionError};
use crate::wait::{wait_ready, Readiness, SpinBudget, Waited};
use zcio_sys::registry::schema::pool;

/// Failure to allocate a buffer.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllocError {
    /// Nothing available now: the pool is at its chunk cap and no buffer
    /// of that size is free.
    #[error("would block: pool '{0}' is exhausted (all chunks in use); retry after receivers release buffers, or raise max_chunks")]
    WouldBlock(String),
    /// Nothing the pool lent is still in use, yet no room fits the request
    /// and none can be made: waiting could never help, so this is
    /// reported at once. Usually the pool's memory is retired (lent to
    /// peers that ended without releasing it) and the budget for replacing
    /// retired chunks is spent, or the request is larger than any chunk
    /// the pool may still create.
    #[error("pool '{pool}' cannot supply {len} bytes and never will: nothing it lent is in use, {retired} bytes are retired (lent to peers that ended holding them) and no chunk can be added or replaced; raise PoolConfig::retire_budget or max_chunks, or use a new pool")]
    Unsatisfiable {
        /// The pool's name.
        pool: String,
        /// Bytes requested.
        len: usize,
        /// Bytes retired in the pool's chunks.
        retired: usize,
    },
    /// Waited for the timeout without a buffer becoming free.
    #[error("timed out after {0:?} waiting for a free buffer")]
    TimedOut(Duration),
    /// Zero-length or too large a request.
    #[error("cannot allocate {0} bytes (must be 1..={1})")]
    BadSize(usize, usize),
    /// Creating a region failed.
    #[error(transparent)]
    Region(#[from] RegionError),
}

/// Whether a pool's chunks are mapped with transparent huge pages
/// ([`Pool::huge_pages`]). Chunks of at least 2 MiB are placed and advised
/// for them whenever the system offers huge pages for shared memory; the
/// kernel decides, page by page, and this says what it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HugePages {
    /// The system's setting for shared memory
    /// (`/sys/kernel/mm/transparent_hugepage/shmem_enabled`): `"never"`
    /// (normal pages only), `"advise"` or `"always"`.
    pub setting: &'static str,
    /// Bytes in the pool's chunks.
    pub chunk_bytes: u64,
    /// Of those, bytes this process maps with huge pages now (pages not
    /// yet touched are not counted).
    pub huge_bytes: u64,
}

/// Counters of a pool, for observability and leak checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Chunk regions.
    pub chunks: usize,
    /// Bytes in all chunks.
    pub bytes_total: usize,
    /// Bytes not allocated (including the quick lists). Retired bytes are
    /// not free: `bytes_free + bytes_in_use + bytes_retired == bytes_total`.
    pub bytes_free: usize,
    /// Buffers currently allocated (held here or by peers).
    pub buffers_in_use: usize,
    /// Bytes currently allocated.
    pub bytes_in_use: usize,
    /// Allocations served, ever.
    pub allocs: u64,
    /// Of those, served from a quick list.
    pub quick_hits: u64,
    /// Allocations refused for exhaustion.
    pub exhausted: u64,
    /// Buffers of this pool held by each peer (label, count).
    pub held_per_peer: Vec<(String, usize)>,
    /// Buffers retired in the pool's chunks: a peer they were lent to
    /// ended without releasing them, so a process it forwarded them to may
    /// still read them. Their pages are never reused; they leave the pool
    /// when their chunk is replaced (see `PoolConfig::retire_budget`).
    pub buffers_retired: usize,
    /// Bytes in retired buffers.
    pub bytes_retired: usize,
    /// Chunks replaced because they held retired buffers, ever.
    pub chunks_replaced: usize,
    /// Bytes written off by those replacements, ever (at most
    /// `PoolConfig::retire_budget`).
    pub bytes_written_off: usize,
    /// Buffers the pool can hand out at most (one page each, every chunk
    /// mapped).
    pub capacity_buffers: u64,
    /// Allocations that timed out waiting for a buffer.
    pub alloc_timed_out: u64,
}

/// A path's cached allocator. Cloning gives another handle to the same pool.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner<BufCore>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.inner.cfg.name)
            .field("id", &self.inner.id)
            .finish()
    }
}

impl Pool {
    /// Create an empty pool; chunks are created on first use.
    pub fn new(cfg: PoolConfig) -> Self {
        Self {
            inner: Arc::new(PoolInner::new(cfg)),
        }
    }

    pub(crate) fn from_inner(inner: Arc<PoolInner<BufCore>>) -> Self {
        Self { inner }
    }

    /// Process-local identity of this pool.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The configuration.
    pub fn config(&self) -> &PoolConfig {
        &self.inner.cfg
    }

    /// Largest single buffer this pool can ever hold.
    pub fn max_alloc(&self) -> usize {
        (u32::MAX as usize / 2)
            .saturating_mul(self.inner.page)
            .min(isize::MAX as usize / 2)
    }

    /// Allocate without waiting. `WouldBlock` when the pool is at its cap.
    ///
    /// When no freed buffer of this size is at hand, pending deallocation
    /// notices are processed first, so the pool reuses warm buffers (LIFO)
    /// instead of carving cold memory or growing.
    pub fn try_alloc(&self, len: usize) -> Result<FbufMut, AllocError> {
        if let Some(b) = self.inner.alloc_quick(len, &self.inner) {
            return Ok(b);
        }
        if self.reclaim_all() > 0 {
            if let Some(b) = self.inner.alloc_quick(len, &self.inner) {
                return Ok(b);
            }
        }
        self.inner.alloc(len, &self.inner)
    }

    /// Process deallocation notices on every channel carrying this pool's
    /// buffers; returns how many buffers came back.
    pub fn reclaim_all(&self) -> usize {
        let list = lock(&self.inner.reclaimers);
        if list.is_empty() {
            return 0;
        }
        // Inline for the usual few channels: no allocation on this path,
        // which a pool short of buffers takes on every allocation.
        let live: smallvec::SmallVec<[Arc<dyn Reclaim>; 4]> =
            list.iter().filter_map(Weak::upgrade).collect();
        drop(list);
        live.iter().map(|r| r.reclaim()).sum()
    }

    /// Allocate, waiting up to `timeout` for receivers to release buffers
    /// (`Duration::MAX`: without a bound). While waiting it processes
    /// deallocation notices from every channel that carries this pool's
    /// buffers.
    pub fn alloc_timeout(&self, len: usize, timeout: Duration) -> Result<FbufMut, AllocError> {
        match self.try_alloc(len) {
            Err(AllocError::WouldBlock(_)) => {}
            other => return other,
        }
        // A timeout too long to represent has no deadline.
        let deadline = Instant::now().checked_add(timeout);
        // Receivers usually release within microseconds: poll a little
        // before paying for a sleep and a wake-up (this pool's own spin, for
        // this wait: a fresh budget).
        let mut spin = SpinBudget::new(self.inner.cfg.spin);
        let mut w = BufWait {
            pool: self,
            len,
            got: None,
            reclaimers: smallvec::SmallVec::new(),
        };
        let _: Waited = wait_ready(&mut w, &mut spin, deadline);
        w.got.take().unwrap_or_else(|| {
            lock(&self.inner.state).page.add(pool::ALLOC_TIMED_OUT, 1);
            Err(AllocError::TimedOut(timeout))
        })
    }

    /// Allocate, waiting up to [`PoolConfig::alloc_timeout`] (10 s unless
    /// set) for receivers to release buffers.
    pub fn alloc(&self, len: usize) -> Result<FbufMut, AllocError> {
        self.alloc_timeout(len, self.inner.cfg.alloc_timeout)
    }

    /// Register a channel that carries this pool's buffers (done by the
    /// channel on first send).
    pub fn register_reclaimer(&self, r: Weak<dyn Reclaim>) {
        let mut v = lock(&self.inner.reclaimers);
        v.retain(|w| w.strong_count() > 0);
        if !v.iter().any(|w| Weak::ptr_eq(w, &r)) {
            v.push(r);
        }
    }

    fn live_reclaimers(&self) -> smallvec::SmallVec<[Arc<dyn Reclaim>; 4]> {
        lock(&self.inner.reclaimers)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Current statistics (including what each peer holds).
    pub fn stats(&self) -> PoolStats {
        let held_per_peer = self
            .live_reclaimers()
            .iter()
            .map(|r| r.held_from_pool(self.inner.id))
            .collect();
        let s = lock(&self.inner.state);
        let page = self.inner.page;
        let total_pages: usize = s.chunks.iter().map(|c| c.extents.pages() as usize).sum();
        PoolStats {
            chunks: s.chunks.len(),
            bytes_total: total_pages * page,
            bytes_free: (total_pages - s.in_use_pages - s.retired_pages) * page,
            buffers_in_use: s.in_use,
            bytes_in_use: s.in_use_pages * page,
            allocs: s.allocs,
            quick_hits: s.quick_hits,
            exhausted: s.exhausted,
            held_per_peer,
            buffers_retired: s.retired,
            bytes_retired: s.retired_pages * page,
            chunks_replaced: s.replaced,
            bytes_written_off: s.written_off,
            capacity_buffers: s.page.get(pool::CAPACITY_BUFFERS),
            alloc_timed_out: s.page.get(pool::ALLOC_TIMED_OUT),
        }
    }

    /// Whether this pool's chunks are mapped with huge pages (reads
    /// `/proc/self/smaps`: call it to report, not per message).
    pub fn huge_pages(&self) -> HugePages {
        let regions = self.regions();
        HugePages {
            setting: crate::sys::thp::shmem_huge().name(),
            chunk_bytes: regions.iter().map(|r| r.len() as u64).sum(),
            huge_bytes: regions.iter().map(|r| r.huge_bytes()).sum(),
        }
    }

    /// The chunk regions (for announcing them along a path ahead of use).
    pub fn regions(&self) -> Vec<Arc<Region>> {
        lock(&self.inner.state)
            .chunks
            .iter()
            .map(|c| c.region.clone())
            .collect()
    }
}

impl PoolInner<BufCore> {
    fn pages_for(&self, len: usize) -> Result<u32, AllocError> {
        let max = (u32::MAX as usize / 2).saturating_mul(self.page);
        if len == 0 || len > max {
            return Err(AllocError::BadSize(len, max));
        }
        Ok(len.div_ceil(self.page) as u32)
    }

    /// Hot path: pop the quick list of exactly this size, if any.
    fn alloc_quick(&self, len: usize, me: &Arc<PoolInner<BufCore>>) -> Option<FbufMut> {
        let pages = self.pages_for(len).ok()?;
        let mut s = lock(&self.state);
        let (chunk, first) = s.quick.get_mut(&pages).and_then(Vec::pop)?;
        s.quick_pages -= pages as usize;
        s.quick_hits += 1;
        Some(self.hand_out(s, len, pages, chunk, first, me))
    }

    fn alloc(&self, len: usize, me: &Arc<PoolInner<BufCore>>) -> Result<FbufMut, AllocError> {
        let pages = self.pages_for(len)?;
        let mut s = lock(&self.state);
        let (chunk, first) = match self.take(&mut s, pages)? {
            Some(x) => x,
            None if s.in_use == 0 => {
                // Nothing can come back: waiting would never help.
                s.exhausted += 1;
                s.page.add(pool::EXHAUSTED, 1);
                return Err(AllocError::Unsatisfiable {
                    pool: self.cfg.name.clone(),
                    len,
                    retired: s.retired_pages * self.page,
                });
            }
            None => {
                s.exhausted += 1;
                s.page.add(pool::EXHAUSTED, 1);
                return Err(AllocError::WouldBlock(self.cfg.name.clone()));
            }
        };
        Ok(self.hand_out(s, len, pages, chunk, first, me))
    }

    fn hand_out(
        &self,
        mut s: MutexGuard<'_, State<BufCore>>,
        len: usize,
        pages: u32,
        chunk: u32,
        first: u32,
        me: &Arc<PoolInner<BufCore>>,
    ) -> FbufMut {
        s.allocs += 1;
        s.in_use += 1;
        s.in_use_pages += pages as usize;
        s.chunks[chunk as usize].live += 1;
        s.page.add(pool::ALLOCATED, 1);
        s.publish_use(self.page);
        if let Some(mut arc) = s.spare.pop() {
            if let Some(core) = Arc::get_mut(&mut arc) {
                let region = &s.chunks[chunk as usize].region;
                if !Arc::ptr_eq(&core.region, region) {
                    core.region = region.clone();
                }
                drop(s);
                core.offset = first as usize * self.page;
                core.len = len;
                core.backing = Backing::Pooled {
                    pool: me.clone(),
                    chunk,
                    first_page: first,
                    pages,
                };
                core.retired = Default::default();
                core.trusted = false;
                return FbufMut::from_arc(arc, false);
            }
        }
        // A fresh allocation: make room for it among the spares, where its
        // last handle puts it back — often on another thread (a notice
        // drain), which must not pay for growing the list.
        let want = (s.spare.len() + s.in_use).min(SPARE_CORES);
        if s.spare.capacity() < want {
            let more = want - s.spare.len();
            s.spare.reserve(more);
        }
        let region = s.chunks[chunk as usize].region.clone();
        drop(s);
        let core = BufCore {
            region,
            offset: first as usize * self.page,
            len,
            backing: Backing::Pooled {
                pool: me.clone(),
                chunk,
                first_page: first,
                pages,
            },
            retired: Default::default(),
            trusted: false,
        };
        FbufMut::from_core(core, false)
    }

    /// Find `pages` pages: quick list, then extents, then a new chunk, then
    /// the quick lists of other sizes flushed back into the extents.
    fn take(&self, s: &mut State<BufCore>, pages: u32) -> Result<Option<(u32, u32)>, AllocError> {
        if let Some(x) = s.quick.get_mut(&pages).and_then(Vec::pop) {
            s.quick_pages -= pages as usize;
            s.quick_hits += 1;
            return Ok(Some(x));
        }
        let found = self.take_elsewhere(s, pages)?;
        if found.is_some() {
            // Room on this size's quick list for the buffer to come back:
            // the free runs on whichever thread drops the last handle (often
            // a notice drain on another thread), which must not allocate.
            // Taken from the list, a buffer leaves its room behind.
            let out = s.in_use + 1;
            let list = s.quick.entry(pages).or_default();
            let want = (list.len() + out).min(self.cfg.quick_list_cap);
            if list.capacity() < want {
                list.reserve(want - list.len());
            }
        }
        Ok(found)
    }

    /// [`Self::take`] past the quick list: extents, a new chunk, the other
    /// sizes' quick lists, a retired chunk replaced.
    fn take_elsewhere(
        &self,
        s: &mut State<BufCore>,
        pages: u32,
    ) -> Result<Option<(u32, u32)>, AllocError> {
        if let Some(x) = Self::from_extents(s, pages) {
            return Ok(Some(x));
        }
        if s.chunks.len() < self.cfg.max_chunks {
            let chunk_pages = (self.cfg.chunk_size.div_ceil(self.page) as u32).max(pages);
            let name = format!("zcio-{}", self.cfg.name);
            let region =
                Region::create(&name, chunk_pages as usize * self.page, self.cfg.populate)?;
            self.register_on_first_chunk(s);
            s.chunks.push(Chunk::new(region, chunk_pages));
            s.publish_chunks(self.page);
            return Ok(Self::from_extents(s, pages));
        }
        if s.quick_pages > 0 {
            Self::flush_quick(s);
            if let Some(x) = Self::from_extents(s, pages) {
                return Ok(Some(x));
            }
        }
        self.replace_retired(s, pages)
    }

    /// Return every quick-list buffer to its chunk's extents. The lists
    /// keep their room (see `take`).
    fn flush_quick(s: &mut State<BufCore>) {
        let State { quick, chunks, .. } = s;
        for (&n, list) in quick.iter_mut() {
            for (c, p) in list.drain(..) {
                chunks[c as usize].extents.free(p, n);
            }
        }
        s.quick_pages = 0;
    }

    /// Nothing fits: replace a chunk that holds retired pages and no live
    /// buffer with fresh memory, within `retire_budget`. The old region is
    /// dropped here (its memory goes back to the system when the last
    /// process mapping it lets go); its index is reused, so no live
    /// buffer can name it (it has none) and its free pages are in no
    /// quick list (flushed first).
    fn replace_retired(
        &self,
        s: &mut State<BufCore>,
        pages: u32,
    ) -> Result<Option<(u32, u32)>, AllocError> {
        let want = (self.cfg.chunk_size.div_ceil(self.page) as u32).max(pages);
        let bytes = want as usize * self.page;
        let Some(i) = s.chunks.iter().position(|c| c.retired > 0 && c.live == 0) else {
            return Ok(None);
        };
        let old = s.chunks[i].extents.pages() as usize * self.page;
        if s.written_off + old > self.cfg.retire_budget {
            return Ok(None);
        }
        Self::flush_quick(s);
        let name = format!("zcio-{}", self.cfg.name);
        let region = Region::create(&name, bytes, self.cfg.populate)?;
        let gone = std::mem::replace(&mut s.chunks[i], Chunk::new(region, want));
        // Spare allocations must not keep the old region mapped.
        s.spare.retain(|c| !Arc::ptr_eq(&c.region, &gone.region));
        s.retired -= gone.retired as usize;
        s.retired_pages -= gone.retired_pages as usize;
        s.replaced += 1;
        s.written_off += old;
        s.publish_chunks(self.page);
        Ok(Self::from_extents(s, pages))
    }

    fn from_extents(s: &mut State<BufCore>, pages: u32) -> Option<(u32, u32)> {
        s.chunks
            .iter_mut()
            .enumerate()
            .find_map(|(i, c)| c.extents.alloc(pages).map(|p| (i as u32, p)))
    }
}

impl AllocError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind as K;
        match self {
            Self::WouldBlock(_) => K::WouldBlock,
            Self::Unsatisfiable { .. } => K::NoSpace,
            Self::TimedOut(_) => K::TimedOut,
            Self::BadSize(0, _) => K::InvalidInput,
            Self::BadSize(..) => K::TooLarge,
            Self::Region(r) => r.kind(),
        }
    }

    /// The system's error number behind this error, if there is one.
    pub fn errno(&self) -> Option<crate::Errno> {
        match self {
            Self::Region(r) => r.errno(),
            _ => None,
        }
    }
}

/// A buffer of `len` bytes, as the one wait loop (`crate::wait::wait_ready`)
/// sees it: the look allocates (kept in `got`: a result other than
/// `WouldBlock`) after taking in the notices of every channel that carries
/// the pool's buffers, as long as they free any; it is costly, so each
/// spin step yields. The sleep is on the first such channel's notice ring
/// (a slice of at most 50 ms with one channel, 1 ms with several, which
/// it cannot all sleep on), or a plain 1 ms with none.
struct BufWait<'a> {
    pool: &'a Pool,
    len: usize,
    got: Option<Result<FbufMut, AllocError>>,
    reclaimers: smallvec::SmallVec<[Arc<dyn Reclaim>; 4]>,
}

impl Readiness for BufWait<'_> {
    fn is_ready(&mut self) -> bool {
        if self.got.is_some() {
            return true;
        }
        loop {
            match self.pool.try_alloc(self.len) {
                Err(AllocError::WouldBlock(_)) => {}
                other => {
                    self.got = Some(other);
                    return true;
                }
            }
            self.reclaimers = self.pool.live_reclaimers();
            let freed: usize = self.reclaimers.iter().map(|r| r.reclaim()).sum();
            if freed == 0 {
                return false;
            }
        }
    }

    fn prepare_sleep(&mut self) -> Option<u32> {
        (!self.is_ready()).then_some(0)
    }

    fn sleep(&mut self, _armed: u32, slice: Duration) {
        let one = self.reclaimers.len() == 1;
        let slice = slice.min(Duration::from_millis(if one { 50 } else { 1 }));
        match self.reclaimers.first() {
            Some(r) => r.wait_for_notices(slice),
            None => std::thread::sleep(slice.min(Duration::from_millis(1))),
        }
    }

    fn costly_look(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Pool {
        Pool::new(PoolConfig {
            name: "t".into(),
            chunk_size: 64 << 10,
            max_chunks: 2,
            populate: false,
            quick_list_cap: 4,
            ..PoolConfig::default()
        })
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn lifo_reuse_and_stats_return_to_baseline() {
        let p = small();
        let a = p.try_alloc(5000).unwrap().freeze().unwrap();
        let off = a.region_offset();
        assert_eq!(p.stats().buffers_in_use, 1);
        assert_eq!(p.stats().bytes_in_use, 8192);
        drop(a);
        let b = p.try_alloc(8000).unwrap().freeze().unwrap();
        assert_eq!(b.region_offset(), off, "LIFO reuse of the same pages");
        drop(b);
        let s = p.stats();
        assert_eq!(
            (s.buffers_in_use, s.bytes_in_use, s.bytes_free),
            (0, 0, s.bytes_total)
        );
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn exhaustion_is_would_block_then_recovers() {
        let p = small();
        let mut held = Vec::new();
        loop {
            match p.try_alloc(16 << 10) {
                Ok(b) => held.push(b),
                Err(AllocError::WouldBlock(_)) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(held.len(), 8, "two 64 KiB chunks hold eight 16 KiB buffers");
        assert_eq!(p.stats().chunks, 2);
        assert!(matches!(
            p.alloc_timeout(4096, Duration::from_millis(5)),
            Err(AllocError::TimedOut(_))
        ));
        held.pop();
        assert!(p.try_alloc(16 << 10).is_ok());
    }

    /// `alloc` waits `PoolConfig::alloc_timeout`; `Duration::MAX` is no
    /// deadline (not an overflow): it waits until a buffer comes back.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn alloc_waits_its_configured_bound_and_duration_max_waits_on() {
        let p = Pool::new(PoolConfig {
            alloc_timeout: Duration::from_millis(20),
            ..small().config().clone()
        });
        let mut held = Vec::new();
        while let Ok(b) = p.try_alloc(16 << 10) {
            held.push(b);
        }
        assert!(matches!(
            p.alloc(16 << 10),
            Err(AllocError::TimedOut(t)) if t == Duration::from_millis(20)
        ));
        let one = held.pop().unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            drop(one);
        });
        assert!(p.alloc_timeout(16 << 10, Duration::MAX).is_ok());
        t.join().unwrap();
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn what_nothing_can_satisfy_fails_at_once_and_retired_chunks_are_replaced() {
        let p = Pool::new(PoolConfig {
            retire_budget: 64 << 10,
            ..small().config().clone()
        });
        let a = p.try_alloc(64 << 10).unwrap();
        let b = p.try_alloc(64 << 10).unwrap();
        drop((a, b));
        // At the chunk cap, nothing in use: a larger request can never fit.
        let e = p
            .alloc_timeout(1 << 20, Duration::from_secs(60))
            .unwrap_err();
        assert!(
            matches!(e, AllocError::Unsatisfiable { len, .. } if len == 1 << 20),
            "{e}"
        );
        assert!(e.to_string().contains("never will"), "{e}");
        // Retire every buffer of both chunks (as a dead peer's would be).
        for _ in 0..2 {
            let f = p.try_alloc(64 << 10).unwrap().freeze().unwrap();
            f.retire();
        }
        let s = p.stats();
        assert_eq!(
            (s.buffers_retired, s.bytes_free, s.buffers_in_use),
            (2, 0, 0)
        );
        // One chunk is replaced (the budget holds one), then none.
        let fresh = p.try_alloc(64 << 10).expect("a replaced chunk");
        let s = p.stats();
        assert_eq!(
            (s.chunks_replaced, s.bytes_written_off, s.buffers_retired),
            (1, 64 << 10, 1)
        );
        drop(fresh);
        let f = p.try_alloc(64 << 10).unwrap().freeze().unwrap();
        f.retire();
        drop(f);
        assert!(matches!(
            p.try_alloc(4096),
            Err(AllocError::Unsatisfiable { .. })
        ));
        assert_eq!(p.stats().chunks, 2);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn a_buffer_larger_than_the_memory_available_is_refused_not_populated() {
        // 1 TiB, populated: the kernel would kill some process instead.
        let p = Pool::new(PoolConfig {
            populate: true,
            ..small().config().clone()
        });
        match p.try_alloc(1 << 40) {
            Err(AllocError::Region(RegionError::NoMemory { len, available })) => {
                assert_eq!(len, 1 << 40);
                assert!(available < len);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(p.stats().chunks, 0, "nothing was allocated");
        assert!(p.try_alloc(4096).is_ok(), "the pool is still usable");
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn frees_find_the_room_their_allocations_made() {
        // A free runs on whichever thread drops the last handle (often
        // another thread's notice drain): it must not grow the lists.
        let page = crate::sys::page_size();
        let p = Pool::new(PoolConfig {
            chunk_size: 64 * page,
            max_chunks: 1,
            populate: false,
            ..PoolConfig::named("room")
        });
        let pages = 1u32;
        let room = |p: &Pool| {
            let s = lock(&p.inner.state);
            let quick = s
                .quick
                .get(&pages)
                .map_or((0, 0), |l| (l.len(), l.capacity()));
            (s.spare.len(), s.spare.capacity(), quick)
        };
        // Frozen: the last handle of an `Fbuf` recycles its allocation.
        let bufs: Vec<_> = (0..64)
            .map(|_| p.try_alloc(page).unwrap().freeze().unwrap())
            .collect();
        let (_, spare_room, (_, quick_room)) = room(&p);
        assert!(
            spare_room >= 64 && quick_room >= 64,
            "{spare_room} {quick_room}"
        );
        drop(bufs);
        assert_eq!(
            room(&p),
            (64, spare_room, (64, quick_room)),
            "all back, no list grown"
        );
        // Flushed into the extents, the quick lists keep their room.
        let big = p.try_alloc(2 * page).unwrap();
        assert_eq!(room(&p).2 .1, quick_room);
        drop(big);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn quick_lists_flush_for_other_sizes() {
        let p = small();
        let bufs: Vec<_> = (0..8).map(|_| p.try_alloc(16 << 10).unwrap()).collect();
        drop(bufs);
        // 32 KiB needs coalesced extents, not the 4-page quick list.
        let big = p.try_alloc(64 << 10).unwrap();
        assert_eq!(big.len(), 64 << 10);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn oversized_request_gets_own_chunk_and_bad_sizes_fail() {
        let p = small();
        let b = p.try_alloc(1 << 20).unwrap();
        assert_eq!(b.len(), 1 << 20);
        assert!(matches!(p.try_alloc(0), Err(AllocError::BadSize(0, _))));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn write_then_freeze_reads_back() {
        let p = small();
        let mut m = p.try_alloc(10).unwrap();
        m.as_mut_slice().copy_from_slice(b"0123456789");
        let f = m.freeze().unwrap();
        assert_eq!(f.view().as_slice(), Some(&b"0123456789"[..]));
        assert!(f.is_immutable(), "our own buffer");
        assert!(!f.is_secured());
        assert!(f.secure().was_copied());
    }
}

#[cfg(test)]
mod page_tests {
    use super::*;

    /// The pool's statistics page follows its buffers: in use, allocated,
    /// exhausted, timed out, capacity.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn the_statistics_page_follows_the_buffers() {
        let p = Pool::new(PoolConfig {
            chunk_size: 64 << 10,
            max_chunks: 1,
            populate: false,
            ..PoolConfig::named("page-test")
        });
        let page_size = crate::sys::page_size() as u64;
        let get = |i| lock(&p.inner.state).page.get(i);
        assert_eq!(get(pool::CAPACITY_BUFFERS), (64 << 10) / page_size);
        assert_eq!(get(pool::CAPACITY_BYTES), 0, "no chunk yet");
        let a = p.try_alloc(1).unwrap();
        let b = p.try_alloc(1).unwrap();
        assert_eq!(get(pool::CAPACITY_BYTES), 64 << 10);
        assert_eq!(get(pool::IN_USE_BUFFERS), 2);
        assert_eq!(get(pool::IN_USE_BYTES), 2 * page_size);
        assert_eq!(get(pool::ALLOCATED), 2);
        assert!(p.try_alloc(64 << 10).is_err());
        assert_eq!(get(pool::EXHAUSTED), 1);
        assert!(p.alloc_timeout(64 << 10, Duration::from_millis(1)).is_err());
        assert_eq!(get(pool::ALLOC_TIMED_OUT), 1);
        assert_eq!(p.stats().alloc_timed_out, 1);
        drop((a, b));
        assert_eq!((get(pool::IN_USE_BUFFERS), get(pool::IN_USE_BYTES)), (0, 0));
        assert_eq!(get(pool::ALLOCATED), 2);
    }
}
