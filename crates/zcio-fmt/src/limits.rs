//! Limits on sizes and counts a user gives: each checked against its range
//! and, for what becomes memory, against the memory the machine has
//! available now (`MemAvailable` in `/proc/meminfo`), before anything is
//! allocated. Messages name the option, the value (sizes formatted exactly)
//! and the limit.

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
    match zcio::Region::memory_available() {
        Some(avail) if need > avail => Err(format!(
            "{what} needs about {} of memory, but only {} is available (MemAvailable in /proc/meminfo): choose smaller sizes",
            crate::bytes_u64(need),
            crate::bytes_u64(avail)
        )),
        _ => Ok(()),
    }
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
        let e = check_size("--sizes", 1 << 40, 4096, 256 << 20).unwrap_err();
        assert_eq!(e, "--sizes 1 TiB: the largest is 256 MiB");
        let e = check_size("--sizes", 4095, 4096, 256 << 20).unwrap_err();
        assert_eq!(e, "--sizes 4095 B: the smallest is 4 KiB");
        assert!(check_count("--consumers", 65, 1, 64).is_err());
        assert!(zcio::Region::memory_available().is_some_and(|m| m > 0));
        assert!(check_memory("x", u64::MAX).is_err());
    }
}
