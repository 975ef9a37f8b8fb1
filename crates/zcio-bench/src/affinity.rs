//! CPU pinning.

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// CPUs this process may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    match sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => vec![0],
    }
}

/// Pin the calling thread (and its future children) to `cpu`.
pub fn pin(cpu: usize) -> Result<(), String> {
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).map_err(|e| format!("sched_setaffinity({cpu}): {e}"))
}

/// The CPU for role number `i` (0, 1, 2 …), spreading over allowed CPUs.
pub fn cpu_for(i: usize) -> usize {
    let cpus = allowed_cpus();
    cpus[i % cpus.len().max(1)]
}
