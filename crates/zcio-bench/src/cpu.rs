//! CPU time of this process or thread (`getrusage`).

/// Whose CPU time [`Cpu::now`] reads.
#[derive(Clone, Copy, Debug)]
pub enum Who {
    /// The whole process (`RUSAGE_SELF`).
    Process,
    /// The calling thread (`RUSAGE_THREAD`).
    Thread,
}

/// A CPU time reading `(user, system)` in nanoseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu {
    user: u64,
    sys: u64,
}

impl Cpu {
    /// Read the CPU time of `who` with `getrusage`.
    pub fn now(who: Who) -> Self {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        let w = match who {
            Who::Process => libc::RUSAGE_SELF,
            Who::Thread => libc::RUSAGE_THREAD,
        };
        // `ru` is a valid, writable rusage for the kernel to fill; `w` is
        // one of the two `who` values getrusage accepts.
        // SAFETY: as argued just above.
        let rc = unsafe { libc::getrusage(w, ru.as_mut_ptr()) };
        if rc != 0 {
            return Self::default();
        }
        // Zero-initialised above and filled by the kernel on success; a
        // rusage is plain integers, valid for any bits.
        // SAFETY: as argued just above.
        let ru = unsafe { ru.assume_init() };
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
        Self {
            user: ns(ru.ru_utime),
            sys: ns(ru.ru_stime),
        }
    }

    /// `(user, system)` nanoseconds since `earlier`.
    pub fn since(self, earlier: Cpu) -> (u64, u64) {
        (
            self.user.saturating_sub(earlier.user),
            self.sys.saturating_sub(earlier.sys),
        )
    }

    /// User + system nanoseconds since `earlier`.
    pub fn total_since(self, earlier: Cpu) -> u64 {
        let (u, s) = self.since(earlier);
        u + s
    }
}

/// The CPU time of this process over a measured interval that starts at
/// some message of a loop: [`start`](Self::start) it there, read it at the
/// end.
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    start: Option<Cpu>,
}

impl Window {
    /// Start (again) now.
    pub fn start(&mut self) {
        self.start = Some(Cpu::now(Who::Process));
    }

    /// User + system nanoseconds since [`start`](Self::start) (0 if never
    /// started).
    pub fn elapsed_ns(&self) -> u64 {
        self.start
            .map_or(0, |s| Cpu::now(Who::Process).total_since(s))
    }
}

/// Reap `child` within `bound`, with what it and the children it waited
/// for used (user + system seconds, from `wait4`).
pub fn reap(
    child: &mut std::process::Child,
    what: &str,
    bound: std::time::Duration,
) -> Result<(i32, f64), String> {
    let deadline = std::time::Instant::now() + bound;
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is valid; wait4 fills it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: our own unreaped child; both pointers are valid for the call.
        let r = unsafe { libc::wait4(child.id() as i32, &mut status, libc::WNOHANG, &mut ru) };
        if r > 0 {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
            return Ok((status, tv(ru.ru_utime) + tv(ru.ru_stime)));
        }
        if r < 0 {
            return Err(format!(
                "{what}: wait4: {}",
                std::io::Error::last_os_error()
            ));
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what}: still running after {bound:?} (killed)"));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
