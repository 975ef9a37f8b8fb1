//! The benchmarks' one clock: `CLOCK_MONOTONIC` in nanoseconds (system-wide,
//! so a receiver can subtract a sender's stamp taken in another process)
//! and, for the tightest loops, the time-stamp counter.

/// `CLOCK_MONOTONIC` in nanoseconds (system-wide: comparable between
/// processes, so a receiver can subtract a sender's stamp).
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// The time-stamp counter (cycles) where the CPU has one readable from
/// user space; elsewhere `CLOCK_MONOTONIC` nanoseconds.
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // RDTSC has no preconditions; it only reads the counter.
        // SAFETY: as argued just above.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        mono_ns()
    }
}

/// What [`cycles`] counts, for the notes.
pub fn cycles_source() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "rdtsc (the invariant time-stamp counter)"
    } else {
        "CLOCK_MONOTONIC ns (no user-space cycle counter on this architecture)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_clocks_move_forward() {
        let (a, c) = (mono_ns(), cycles());
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(mono_ns() > a);
        assert!(cycles() > c);
        assert!(!cycles_source().is_empty());
    }
}
