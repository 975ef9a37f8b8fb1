//! Limits on the sizes and counts a user gives a benchmark, checked before
//! anything is allocated or spawned: each against its range and, for what
//! becomes memory, against the memory the machine has available now
//! (`MemAvailable` in `/proc/meminfo`). Messages name the option, the
//! value (sizes formatted exactly) and the limit.

use crate::{asyncb, ring, transfer};

/// Bytes of memory available without swapping (`MemAvailable`), if known.
pub fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024))
}

/// A size exactly: `4 KiB`, `16 MiB`, `1 TiB` for whole units, else in
/// bytes (`4095 B`, `1536 B`), never rounded.
pub fn exact(n: u64) -> String {
    for (u, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {u}", n >> shift);
        }
    }
    format!("{n} B")
}

/// `n` (a size given to `what`) must lie in `min..=max`.
pub fn check_size(what: &str, n: u64, min: u64, max: u64) -> Result<(), String> {
    if n < min {
        return Err(format!(
            "{what} {}: the smallest is {}",
            exact(n),
            exact(min)
        ));
    }
    if n > max {
        return Err(format!(
            "{what} {}: the largest is {}",
            exact(n),
            exact(max)
        ));
    }
    Ok(())
}

/// A count given to `what` must lie in `min..=max`.
pub fn check_count(what: &str, n: u64, min: u64, max: u64) -> Result<(), String> {
    if n < min || n > max {
        return Err(format!("{what} {n}: use {min} to {max}"));
    }
    Ok(())
}

/// `need` bytes of memory (for `what`) must be available now.
pub fn check_memory(what: &str, need: u64) -> Result<(), String> {
    match mem_available() {
        Some(avail) if need > avail => Err(format!(
            "{what} needs about {} of memory, but only {} is available (MemAvailable in /proc/meminfo): choose smaller sizes",
            crate::fmt::bytes_u64(need),
            crate::fmt::bytes_u64(avail)
        )),
        _ => Ok(()),
    }
}

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
    fn sizes_are_exact_and_limits_named() {
        assert_eq!(exact(4095), "4095 B");
        assert_eq!(exact(4096), "4 KiB");
        assert_eq!(exact(3 << 20), "3 MiB");
        assert_eq!(exact(1 << 40), "1 TiB");
        let e = check_size("--sizes", 1 << 40, 4096, MAX_MESSAGE).unwrap_err();
        assert_eq!(e, "--sizes 1 TiB: the largest is 256 MiB");
        let e = check_size("--sizes", 4095, 4096, MAX_MESSAGE).unwrap_err();
        assert_eq!(e, "--sizes 4095 B: the smallest is 4 KiB");
        assert!(check_count("--consumers", 65, 1, 64).is_err());
        assert!(mem_available().is_some_and(|m| m > 0));
        assert!(check_memory("x", u64::MAX).is_err());
    }
}
