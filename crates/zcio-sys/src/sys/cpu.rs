//! Which CPU the calling thread runs on.

/// The CPU the calling thread is running on now (it may move at any time),
/// or `None` if the kernel does not say. glibc answers from the thread's
/// restartable-sequences area when the kernel offers one (a load, no
/// system call), else through the vDSO.
#[inline]
pub fn current() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments, touches no memory of ours
    // and only returns a number (or -1 with errno set).
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

/// For tests: pin the calling thread to the CPU it runs on; returns that
/// CPU and the set to restore afterwards (`None`, after printing why, when
/// this machine cannot).
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub fn pin_here() -> Option<(u32, rustix::thread::CpuSet)> {
    let Some(cpu) = current() else {
        println!("skipped: sched_getcpu is not available here");
        return None;
    };
    let Ok(all) = rustix::thread::sched_getaffinity(None) else {
        println!("skipped: cannot read this thread's CPUs");
        return None;
    };
    let mut one = rustix::thread::CpuSet::new();
    one.set(cpu as usize);
    if rustix::thread::sched_setaffinity(None, &one).is_err() {
        println!("skipped: cannot pin this thread");
        return None;
    }
    Some((cpu, all))
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg_attr(miri, ignore = "sched_setaffinity, sched_getcpu: not in Miri")]
    fn a_thread_pinned_to_a_cpu_reports_it() {
        let Some((cpu, all)) = super::pin_here() else {
            return;
        };
        assert_eq!(super::current(), Some(cpu));
        let _ = rustix::thread::sched_setaffinity(None, &all);
    }
}
