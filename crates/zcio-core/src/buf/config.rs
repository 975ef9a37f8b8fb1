//! [`PoolConfig`]: how a path pool is sized and behaves.

use std::time::Duration;

/// Configuration of a path pool.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Name (shows up in `/proc/PID/maps` as `memfd:zcio-NAME`).
    pub name: String,
    /// Bytes per chunk region (rounded up to pages); a larger request gets
    /// a chunk of its own size.
    pub chunk_size: usize,
    /// Cap on chunks: the pool never holds more.
    pub max_chunks: usize,
    /// Pre-fault chunks when created (`MAP_POPULATE`).
    pub populate: bool,
    /// Freed buffers kept per page count on the LIFO quick list before
    /// being returned to the extent allocator.
    pub quick_list_cap: usize,
    /// How long `alloc_timeout` polls for released buffers before it
    /// sleeps (0: sleep at once — right when more processes than cores
    /// share the path, so polling would only delay the releasing peer).
    /// Default: the process's [`SpinPolicy::max`](crate::SpinPolicy::max)
    /// (500 µs unless set).
    pub spin: Duration,
    /// Bytes of chunks the pool may write off over its life to replace
    /// chunks holding retired buffers. A chunk is replaced when nothing
    /// else fits, no live buffer lies in it and it holds retired pages:
    /// the pool drops its mapping and maps a fresh chunk, and the old
    /// memory goes back to the system when the last process mapping it
    /// (the peer's peers) lets go. So a peer's death costs at most this
    /// much memory, not the pool. Default: `max_chunks × chunk_size`.
    pub retire_budget: usize,
    /// Bound on [`Pool::alloc`](crate::Pool::alloc): how long it waits for receivers to release
    /// buffers (`AllocError::TimedOut` after it). Default 10 s.
    /// `Duration::MAX` waits without a bound.
    pub alloc_timeout: Duration,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            name: "pool".into(),
            chunk_size: 16 << 20,
            max_chunks: 16,
            populate: true,
            quick_list_cap: 64,
            spin: crate::wait::SpinPolicy::current().max,
            retire_budget: 16 * (16 << 20),
            alloc_timeout: Duration::from_secs(10),
        }
    }
}

impl PoolConfig {
    /// A configuration with the given name and defaults otherwise.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }
}
