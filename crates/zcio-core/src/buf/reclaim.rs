//! [`Reclaim`]: how a pool short of buffers reaches the channels that
//! carry them, to pull their deallocation notices in.

use std::time::Duration;

/// Something that can pull deallocation notices in and wait for them
/// (implemented by channels that carry this pool's buffers).
pub trait Reclaim: Send + Sync {
    /// Process pending notices; returns how many buffers were released.
    fn reclaim(&self) -> usize;
    /// Sleep until a notice may have arrived, at most `timeout`.
    fn wait_for_notices(&self, timeout: Duration);
    /// A label for the peer, and how many buffers of pool `pool_id` it holds.
    fn held_from_pool(&self, pool_id: u64) -> (String, usize);
}
