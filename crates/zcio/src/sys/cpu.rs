//! Which CPU the calling thread runs on.

/// The CPU the calling thread is running on now (it may move at any time),
/// or `None` if the kernel does not say. glibc answers from the thread's
/// restartable-sequences area when the kernel offers one (a load, no
/// system call), else through the vDSO.
pub fn current() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments, touches no memory of ours
    // and only returns a number (or -1 with errno set).
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_thread_pinned_to_a_cpu_reports_it() {
        let Some(cpu) = super::current() else {
            println!("skipped: sched_getcpu is not available here");
            return;
        };
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu as usize);
        if rustix::thread::sched_setaffinity(None, &set).is_err() {
            println!("skipped: cannot pin this thread");
            return;
        }
        assert_eq!(super::current(), Some(cpu));
    }
}
