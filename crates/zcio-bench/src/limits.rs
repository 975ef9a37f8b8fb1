//! Limits on the sizes and counts a user gives a benchmark, checked before
//! anything is allocated or spawned: each against its range and, for what
//! becomes memory, against the memory the machine has available now
//! (`MemAvailable` in `/proc/meminfo`). Messages name the option, the
//! value (sizes formatted exactly) and the limit.

pub use zcio_fmt::limits::{check_count, check_memory, check_size, exact};

use crate::{asyncb, ring, transfer};

/// Largest message of `bench transfer`.
pub const MAX_MESSAGE: u64 = 256 << 20;
/// Memory one message size of `bench transfer` takes, in messages: the
/// originator's pool (two chunks of half of the 12 messages in flight on a
/// three-domain path, `transfer::zcio_side::bench_pool_config`) plus the
/// copying baselines' buffers.
const TRANSFER_COPIES: u64 = 12 + 4;

/// `bench transfer --sizes`.
pub fn check_transfer(o: &transfer::Options) -> Result<(), String> {
    for &s in &o.sizes {
        check_size("--sizes", s as u64, 4096, MAX_MESSAGE)?;
    }
    if let Some(&max) = o.sizes.iter().max() {
        check_memory(
            &format!("--sizes {}", exact(max as u64)),
            max as u64 * TRANSFER_COPIES,
        )?;
    }
    Ok(())
}

/// Largest call of `bench ring` (a call larger than half a ring is skipped).
pub const MAX_CALL: u64 = 1 << 30;

/// `bench ring --ring-sizes/--call-sizes/--consumers/--reps`.
pub fn check_ring(o: &ring::Options) -> Result<(), String> {
    let max_ring = zcio::internals::ring_layout::MAX_DATA;
    for &r in &o.ring_sizes {
        check_size("--ring-sizes", r as u64, 4096, max_ring)?;
        if !r.is_power_of_two() {
            return Err(format!(
                "--ring-sizes {}: ring sizes are powers of two",
                exact(r as u64)
            ));
        }
    }
    for &c in &o.call_sizes {
        check_size("--call-sizes", c as u64, 8, MAX_CALL)?;
    }
    for &n in &o.consumers {
        check_count("--consumers", n as u64, 1, zcio::ring::MAX_CONSUMERS as u64)?;
    }
    check_count("--reps", o.reps as u64, 1, 1000)?;
    // One ring at a time, plus a call buffer in each of a few processes.
    let ring = o.ring_sizes.iter().max().copied().unwrap_or(0) as u64;
    let call = o.call_sizes.iter().max().copied().unwrap_or(0) as u64;
    check_memory("--ring-sizes/--call-sizes", ring + 4 * call)
}

/// `bench async --iters/--intermediates/--stream/--volume`.
pub fn check_async(o: &asyncb::Options) -> Result<(), String> {
    check_count("--iters", o.iters, 1, 1_000_000_000)?;
    for &k in &o.intermediates {
        check_count("--intermediates", u64::from(k), 0, 32)?;
    }
    check_count("--stream", o.chain_stream_msgs, 2, 1_000_000_000)?;
    // Checksummed as slices of one buffer of the message size: the volume
    // is a count of bytes streamed, not memory.
    check_size("--volume", o.cksum_volume, 1 << 20, 1 << 40)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_sizes_beyond_the_limit_are_refused() {
        let mut o = transfer::Options::quick();
        o.sizes = vec![1 << 40];
        assert_eq!(
            check_transfer(&o).unwrap_err(),
            "--sizes 1 TiB: the largest is 256 MiB"
        );
    }
}
