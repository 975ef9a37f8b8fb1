//! Buffers: path pools (cached allocators), the uncached allocator, and the
//! fbufs they hand out.

mod config;
pub mod extent;
pub mod fbuf;
pub mod pool;
mod pool_inner;
mod reclaim;
mod uncached;

pub use config::PoolConfig;
pub use fbuf::{Fbuf, FbufMut, FreezeError, SecureView};
pub(crate) use fbuf::{Home, ReleaseSink};
pub use pool::{AllocError, HugePages, Pool, PoolStats};
pub(crate) use reclaim::Reclaim;
pub use uncached::Uncached;

impl Pool {
    /// A secured buffer for this path. Sealing is permanent on Linux, so
    /// secured buffers cannot be recycled in place: each is a single-use
    /// sealed region (see [`Uncached::alloc_secured`]), pre-faulted when the
    /// pool's `populate` is set. Use pool buffers (volatile) where the
    /// receivers trust the originator.
    pub fn alloc_secured(&self, len: usize) -> Result<FbufMut, AllocError> {
        Uncached::new(self.config().name.clone(), self.config().populate).alloc_secured(len)
    }
}
