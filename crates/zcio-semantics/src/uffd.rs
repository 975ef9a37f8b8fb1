//! userfaultfd write-protection ("uffd-wp") with in-thread `SIGBUS` delivery.
//!
//! A [`Uffd`] is a userfaultfd opened with `UFFD_FEATURE_WP_HUGETLBFS_SHMEM`
//! (write-protect shmem/memfd pages, Linux 5.19+) and `UFFD_FEATURE_SIGBUS`:
//! a write to a write-protected page does not wake a monitor thread, it
//! raises `SIGBUS` in the writing thread (`si_addr` = the faulting address),
//! exactly like `mprotect` raises `SIGSEGV`. The handler may clear the
//! protection with [`write_protect_raw`] (a plain `ioctl`, async-signal-safe)
//! and return; the write then completes.
//!
//! Differences from `mprotect` that callers must know (each is a unit test
//! below):
//! - protection is per page table entry, not per VMA: protecting part of a
//!   registered range does not split the VMA;
//! - `mremap` of a registered page drops the registration of the moved page
//!   (unless `UFFD_FEATURE_EVENT_REMAP`, which blocks `mremap` until a
//!   monitor reads the event, unusable in-thread): a page moved to a new
//!   address is neither registered nor protected there, and must be
//!   re-registered ([`Uffd::register_wp`]; idempotent on registered
//!   pages) and re-protected; [`Uffd::write_protect`] over a range holding
//!   an unregistered page fails with `ENOENT` after protecting the pages
//!   before it;
//! - a new mapping (`mmap(MAP_FIXED)`) over a registered range is not
//!   registered;
//! - a kernel write (`read(2)` into a protected page) fails with `EFAULT`,
//!   with or without `UFFD_USER_MODE_ONLY`; no signal is raised;
//! - closing the userfaultfd unregisters everything and drops every
//!   protection, so the [`Uffd`] must outlive its registrations.
//!
//! Constants and layouts follow `include/uapi/linux/userfaultfd.h`.

// Parts of this toolbox serve only zcio's own tests (the `internals` feature).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use rustix::io::Errno;
use rustix::ioctl::{self, opcode, Opcode, Updater};
use rustix::mm::UserfaultfdFlags;

/// `UFFD_FEATURE_*` bits (`struct uffdio_api.features`).
pub mod feature {
    /// `UFFD_FEATURE_PAGEFAULT_FLAG_WP`
    pub const PAGEFAULT_FLAG_WP: u64 = 1 << 0;
    /// `UFFD_FEATURE_EVENT_FORK`
    pub const EVENT_FORK: u64 = 1 << 1;
    /// `UFFD_FEATURE_EVENT_REMAP`: keep the registration across `mremap`,
    /// at the price of blocking `mremap` until a monitor reads the event.
    pub const EVENT_REMAP: u64 = 1 << 2;
    /// `UFFD_FEATURE_EVENT_REMOVE`
    pub const EVENT_REMOVE: u64 = 1 << 3;
    /// `UFFD_FEATURE_MISSING_HUGETLBFS`
    pub const MISSING_HUGETLBFS: u64 = 1 << 4;
    /// `UFFD_FEATURE_MISSING_SHMEM`
    pub const MISSING_SHMEM: u64 = 1 << 5;
    /// `UFFD_FEATURE_EVENT_UNMAP`
    pub const EVENT_UNMAP: u64 = 1 << 6;
    /// `UFFD_FEATURE_SIGBUS`: deliver faults as `SIGBUS` to the faulting
    /// thread instead of queueing them for a monitor.
    pub const SIGBUS: u64 = 1 << 7;
    /// `UFFD_FEATURE_THREAD_ID`
    pub const THREAD_ID: u64 = 1 << 8;
    /// `UFFD_FEATURE_MINOR_HUGETLBFS`
    pub const MINOR_HUGETLBFS: u64 = 1 << 9;
    /// `UFFD_FEATURE_MINOR_SHMEM`
    pub const MINOR_SHMEM: u64 = 1 << 10;
    /// `UFFD_FEATURE_EXACT_ADDRESS`
    pub const EXACT_ADDRESS: u64 = 1 << 11;
    /// `UFFD_FEATURE_WP_HUGETLBFS_SHMEM`: write-protect shmem (memfd) and
    /// hugetlbfs pages (Linux 5.19).
    pub const WP_HUGETLBFS_SHMEM: u64 = 1 << 12;
    /// `UFFD_FEATURE_WP_UNPOPULATED`
    pub const WP_UNPOPULATED: u64 = 1 << 13;
    /// `UFFD_FEATURE_POISON`
    pub const POISON: u64 = 1 << 14;
    /// `UFFD_FEATURE_WP_ASYNC`
    pub const WP_ASYNC: u64 = 1 << 15;
    /// `UFFD_FEATURE_MOVE`
    pub const MOVE: u64 = 1 << 16;

    /// Names of the known bits, for messages.
    pub(crate) const NAMES: [(u64, &str); 17] = [
        (PAGEFAULT_FLAG_WP, "PAGEFAULT_FLAG_WP"),
        (EVENT_FORK, "EVENT_FORK"),
        (EVENT_REMAP, "EVENT_REMAP"),
        (EVENT_REMOVE, "EVENT_REMOVE"),
        (MISSING_HUGETLBFS, "MISSING_HUGETLBFS"),
        (MISSING_SHMEM, "MISSING_SHMEM"),
        (EVENT_UNMAP, "EVENT_UNMAP"),
        (SIGBUS, "SIGBUS"),
        (THREAD_ID, "THREAD_ID"),
        (MINOR_HUGETLBFS, "MINOR_HUGETLBFS"),
        (MINOR_SHMEM, "MINOR_SHMEM"),
        (EXACT_ADDRESS, "EXACT_ADDRESS"),
        (WP_HUGETLBFS_SHMEM, "WP_HUGETLBFS_SHMEM"),
        (WP_UNPOPULATED, "WP_UNPOPULATED"),
        (POISON, "POISON"),
        (WP_ASYNC, "WP_ASYNC"),
        (MOVE, "MOVE"),
    ];
}

/// The features [`Uffd::open`] requires.
pub const REQUIRED_FEATURES: u64 = feature::WP_HUGETLBFS_SHMEM | feature::SIGBUS;

/// `UFFD_API`
const UFFD_API: u64 = 0xAA;
/// `UFFD_USER_MODE_ONLY` (flag of the `userfaultfd` system call).
const UFFD_USER_MODE_ONLY: u32 = 1;
/// `UFFDIO_REGISTER_MODE_WP`
const REGISTER_MODE_WP: u64 = 1 << 1;
/// `UFFDIO_WRITEPROTECT_MODE_WP`
const WRITEPROTECT_MODE_WP: u64 = 1 << 0;
/// `UFFDIO_WRITEPROTECT_MODE_DONTWAKE`
const WRITEPROTECT_MODE_DONTWAKE: u64 = 1 << 1;
/// `_UFFDIO_REGISTER`, `_UFFDIO_WRITEPROTECT`: ioctl numbers, also bit
/// positions in the `ioctls` masks the kernel returns.
const NR_REGISTER: u8 = 0x00;
const NR_UNREGISTER: u8 = 0x01;
const NR_WRITEPROTECT: u8 = 0x06;
const NR_API: u8 = 0x3F;
const UFFDIO: u8 = 0xAA;

/// `struct uffdio_api`
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct uffdio_range`
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

/// `struct uffdio_register`
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

/// `struct uffdio_writeprotect`
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

const _: () = assert!(std::mem::size_of::<UffdioApi>() == 24);
const _: () = assert!(std::mem::size_of::<UffdioRange>() == 16);
const _: () = assert!(std::mem::size_of::<UffdioRegister>() == 32);
const _: () = assert!(std::mem::size_of::<UffdioWriteprotect>() == 24);
const _: () = assert!(std::mem::align_of::<UffdioRegister>() == 8);
const _: () = assert!(std::mem::offset_of!(UffdioRegister, mode) == 16);
const _: () = assert!(std::mem::offset_of!(UffdioWriteprotect, mode) == 16);

const UFFDIO_API: Opcode = opcode::read_write::<UffdioApi>(UFFDIO, NR_API);
const UFFDIO_REGISTER: Opcode = opcode::read_write::<UffdioRegister>(UFFDIO, NR_REGISTER);
// The header declares UNREGISTER as _IOR although the kernel reads the range.
const UFFDIO_UNREGISTER: Opcode = opcode::read::<UffdioRange>(UFFDIO, NR_UNREGISTER);
const UFFDIO_WRITEPROTECT: Opcode =
    opcode::read_write::<UffdioWriteprotect>(UFFDIO, NR_WRITEPROTECT);

// Values printed by a C program including <linux/userfaultfd.h> (x86_64).
#[cfg(target_arch = "x86_64")]
const _: () = {
    assert!(UFFDIO_API as u64 == 0xc018_aa3f);
    assert!(UFFDIO_REGISTER as u64 == 0xc020_aa00);
    assert!(UFFDIO_UNREGISTER as u64 == 0x8010_aa01);
    assert!(UFFDIO_WRITEPROTECT as u64 == 0xc018_aa06);
};

/// Why userfaultfd write-protection cannot be used; the message says what
/// to do. Callers fall back to `mprotect`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UffdUnavailable {
    /// The kernel has no userfaultfd (`ENOSYS`).
    #[error(
        "userfaultfd is not available (ENOSYS): the kernel was built without \
         CONFIG_USERFAULTFD or a seccomp filter hides it; zcio falls back to mprotect"
    )]
    NoSyscall,
    /// `EPERM`: the sysctl, a missing capability or a security module refused.
    #[error(
        "userfaultfd is not permitted (EPERM; /proc/sys/vm/unprivileged_userfaultfd = {}): {}; \
         zcio falls back to mprotect",
        sysctl.map_or_else(|| "unreadable".to_string(), |v| v.to_string()),
        if *user_mode_only {
            "even the user-mode-only variant (allowed to everyone since Linux 5.11) was refused, \
             so a seccomp filter or security module (container runtime, SELinux) blocks the \
             system call: allow userfaultfd there"
        } else {
            "a full userfaultfd needs CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1"
        }
    )]
    NotPermitted {
        /// Value of `/proc/sys/vm/unprivileged_userfaultfd`, if readable.
        sysctl: Option<u8>,
        /// Whether the refused request was the user-mode-only variant.
        user_mode_only: bool,
    },
    /// The kernel lacks a feature zcio needs.
    #[error(
        "userfaultfd lacks {}: write-protecting memfd pages needs Linux 5.19 or later \
         (offered features {offered:#x}); zcio falls back to mprotect",
        feature_names(*missing)
    )]
    MissingFeatures {
        /// Required bits the kernel did not offer.
        missing: u64,
        /// Everything the kernel offered.
        offered: u64,
    },
    /// Any other failure of `userfaultfd` or `UFFDIO_API`.
    #[error("userfaultfd setup failed in {call}: {errno}")]
    Os {
        /// The failing call.
        call: &'static str,
        /// Its errno.
        errno: Errno,
    },
}

/// Names of the feature bits in `bits`, `|`-separated.
pub fn feature_names(bits: u64) -> String {
    let mut out = String::new();
    let mut rest = bits;
    for (bit, name) in feature::NAMES {
        if bits & bit != 0 {
            if !out.is_empty() {
                out.push('|');
            }
            out.push_str(name);
            rest &= !bit;
        }
    }
    if rest != 0 {
        if !out.is_empty() {
            out.push('|');
        }
        out.push_str(&format!("{rest:#x}"));
    }
    out
}

/// Which kind of userfaultfd to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A full one (handles kernel faults too), else a user-mode-only one.
    Any,
    /// `UFFD_USER_MODE_ONLY` (allowed even with
    /// `vm.unprivileged_userfaultfd = 0`).
    UserModeOnly,
    /// Without `UFFD_USER_MODE_ONLY` (needs `CAP_SYS_PTRACE` or the sysctl).
    Full,
}

/// An open, API-negotiated userfaultfd. Dropping it unregisters every range
/// and clears every protection it set.
#[derive(Debug)]
pub struct Uffd {
    fd: OwnedFd,
    features: u64,
    user_mode_only: bool,
}

impl Uffd {
    /// Open a userfaultfd for write-protecting memfd pages with faults
    /// delivered as `SIGBUS` to the writing thread ([`REQUIRED_FEATURES`]).
    /// Tries a full userfaultfd first, then `UFFD_USER_MODE_ONLY`.
    pub fn open() -> Result<Uffd, UffdUnavailable> {
        Self::open_with(Mode::Any, 0)
    }

    /// As [`Uffd::open`], choosing the kind and requesting `extra` feature
    /// bits (see [`feature`]) besides [`REQUIRED_FEATURES`].
    pub fn open_with(mode: Mode, extra: u64) -> Result<Uffd, UffdUnavailable> {
        let wanted = REQUIRED_FEATURES | extra;
        let (fd, user_mode_only) = open_fd(mode)?;
        let mut api = UffdioApi {
            api: UFFD_API,
            features: wanted,
            ioctls: 0,
        };
        match api_ioctl(fd.as_fd(), &mut api) {
            Ok(()) => {}
            Err(Errno::INVAL) => {
                // Unsupported bits requested: ask a fresh fd (the handshake
                // is once per fd) what is offered, to say what is missing.
                let offered = open_fd(mode)
                    .ok()
                    .and_then(|(probe, _)| {
                        let mut a = UffdioApi {
                            api: UFFD_API,
                            ..UffdioApi::default()
                        };
                        api_ioctl(probe.as_fd(), &mut a).ok().map(|()| a.features)
                    })
                    .unwrap_or(0);
                return Err(UffdUnavailable::MissingFeatures {
                    missing: wanted & !offered,
                    offered,
                });
            }
            Err(errno) => {
                return Err(UffdUnavailable::Os {
                    call: "UFFDIO_API",
                    errno,
                })
            }
        }
        if api.features & wanted != wanted {
            return Err(UffdUnavailable::MissingFeatures {
                missing: wanted & !api.features,
                offered: api.features,
            });
        }
        Ok(Uffd {
            fd,
            features: api.features,
            user_mode_only,
        })
    }

    /// The feature bits the kernel granted (all it supports, on recent
    /// kernels).
    pub fn features(&self) -> u64 {
        self.features
    }

    /// Whether this is a `UFFD_USER_MODE_ONLY` userfaultfd.
    pub fn is_user_mode_only(&self) -> bool {
        self.user_mode_only
    }

    /// The raw descriptor, for a signal handler calling
    /// [`write_protect_raw`]; valid while `self` lives.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Register `[addr, addr + len)` (page-aligned, one or more whole
    /// mappings' worth of pages) for write-protect tracking. Nothing is
    /// protected yet. Fails with `EINVAL` for an unaligned range or one
    /// containing unmapped addresses, `EOPNOTSUPP` when the kernel cannot
    /// write-protect this kind of memory.
    ///
    /// # Safety
    ///
    /// `[addr, addr + len)` must be memory the caller controls: once it is
    /// protected ([`Uffd::write_protect`]), any write there raises `SIGBUS`
    /// and kernel writes fail with `EFAULT`, so no other code may rely on
    /// writing it.
    pub unsafe fn register_wp(&self, addr: *mut u8, len: usize) -> Result<(), Errno> {
        let mut reg = UffdioRegister {
            range: range(addr, len),
            mode: REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: UFFDIO_REGISTER takes a `struct uffdio_register`, which
        // `UffdioRegister` mirrors (size asserted above); `self.fd` is a
        // userfaultfd.
        unsafe { ioctl::ioctl(&self.fd, Updater::<UFFDIO_REGISTER, _>::new(&mut reg)) }?;
        if reg.ioctls & (1 << NR_WRITEPROTECT) == 0 {
            let _ = self.unregister(addr, len);
            return Err(Errno::OPNOTSUPP);
        }
        Ok(())
    }

    /// Unregister `[addr, addr + len)`; clears any protection in it.
    // The address goes to the kernel and is never dereferenced; removing
    // this fd's protection cannot break anyone's assumptions.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn unregister(&self, addr: *mut u8, len: usize) -> Result<(), Errno> {
        // SAFETY: `self.fd` is an open userfaultfd; unregistering only
        // removes protection.
        unsafe { unregister_raw(self.fd.as_fd(), addr, len) }
    }

    /// Write-protect (`on`) or unprotect `[addr, addr + len)`, which must be
    /// registered: a page that is not (moved there by `mremap`, or mapped
    /// anew) fails the call with `ENOENT`, leaving the pages before it
    /// changed. Unprotecting does not wake blocked faulters when faults
    /// are delivered as `SIGBUS` (there are none).
    ///
    /// # Safety
    ///
    /// As [`Uffd::register_wp`].
    pub unsafe fn write_protect(&self, addr: *mut u8, len: usize, on: bool) -> Result<(), Errno> {
        let dontwake = self.features & feature::SIGBUS != 0;
        // SAFETY: `self.fd` is an open userfaultfd; the range condition is
        // the caller's.
        unsafe { write_protect_raw(self.fd.as_fd(), addr, len, on, dontwake) }
    }
}

impl AsFd for Uffd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// `UFFDIO_WRITEPROTECT` on `[addr, addr + len)`. A single `ioctl`, no
/// allocation: async-signal-safe (a `SIGBUS` handler may unprotect the
/// faulting page and return). `dontwake` skips waking faulters blocked on
/// the range (never any with `UFFD_FEATURE_SIGBUS`); it is ignored when
/// protecting (the kernel rejects WP|DONTWAKE).
///
/// # Safety
///
/// `fd` must be a userfaultfd with the range registered for write-protect
/// (see [`Uffd::raw_fd`]), and the range condition of
/// [`Uffd::register_wp`] holds.
pub unsafe fn write_protect_raw(
    fd: BorrowedFd<'_>,
    addr: *mut u8,
    len: usize,
    on: bool,
    dontwake: bool,
) -> Result<(), Errno> {
    let mode = if on {
        WRITEPROTECT_MODE_WP
    } else if dontwake {
        WRITEPROTECT_MODE_DONTWAKE
    } else {
        0
    };
    let mut wp = UffdioWriteprotect {
        range: range(addr, len),
        mode,
    };
    // SAFETY: UFFDIO_WRITEPROTECT takes a `struct uffdio_writeprotect`,
    // mirrored by `UffdioWriteprotect`; `fd` is a userfaultfd (caller).
    unsafe { ioctl::ioctl(fd, Updater::<UFFDIO_WRITEPROTECT, _>::new(&mut wp)) }
}

/// `UFFDIO_UNREGISTER` on `[addr, addr + len)`; async-signal-safe.
///
/// # Safety
///
/// `fd` must be a userfaultfd.
pub unsafe fn unregister_raw(fd: BorrowedFd<'_>, addr: *mut u8, len: usize) -> Result<(), Errno> {
    let mut r = range(addr, len);
    // SAFETY: UFFDIO_UNREGISTER takes a `struct uffdio_range`, mirrored by
    // `UffdioRange`; `fd` is a userfaultfd (caller).
    unsafe { ioctl::ioctl(fd, Updater::<UFFDIO_UNREGISTER, _>::new(&mut r)) }
}

fn range(addr: *mut u8, len: usize) -> UffdioRange {
    UffdioRange {
        start: addr as usize as u64,
        len: len as u64,
    }
}

fn api_ioctl(fd: BorrowedFd<'_>, api: &mut UffdioApi) -> Result<(), Errno> {
    // SAFETY: UFFDIO_API takes a `struct uffdio_api`, mirrored by
    // `UffdioApi`; `fd` is a fresh userfaultfd.
    unsafe { ioctl::ioctl(fd, Updater::<UFFDIO_API, _>::new(api)) }
}

/// `userfaultfd(O_CLOEXEC|O_NONBLOCK[|UFFD_USER_MODE_ONLY])`.
fn open_fd(mode: Mode) -> Result<(OwnedFd, bool), UffdUnavailable> {
    let base = UserfaultfdFlags::CLOEXEC | UserfaultfdFlags::NONBLOCK;
    let user = base | UserfaultfdFlags::from_bits_retain(UFFD_USER_MODE_ONLY);
    let attempt = |flags: UserfaultfdFlags| {
        // SAFETY: creating the descriptor is harmless; what it can do is
        // confined to the ranges later registered through `Uffd`'s unsafe
        // methods.
        unsafe { rustix::mm::userfaultfd(flags) }
    };
    let (result, user_mode_only) = match mode {
        Mode::Full => (attempt(base), false),
        Mode::UserModeOnly => (attempt(user), true),
        Mode::Any => match attempt(base) {
            Err(Errno::PERM) => (attempt(user), true),
            r => (r, false),
        },
    };
    result
        .map(|fd| (fd, user_mode_only))
        .map_err(|errno| match errno {
            Errno::NOSYS => UffdUnavailable::NoSyscall,
            Errno::PERM => UffdUnavailable::NotPermitted {
                user_mode_only,
                sysctl: std::fs::read_to_string("/proc/sys/vm/unprivileged_userfaultfd")
                    .ok()
                    .and_then(|s| s.trim().parse().ok()),
            },
            errno => UffdUnavailable::Os {
                call: "userfaultfd",
                errno,
            },
        })
}

#[cfg(test)]
mod tests {
    //! Each test probes for userfaultfd and prints `skipped: <reason>`
    //! without it. Run with `--nocapture` to see the findings. (The costs
    //! of write protection are measured by `zcio calibrate`.)

    use super::*;
    use std::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize, Ordering};
    use std::sync::{Mutex, MutexGuard};

    const PS: usize = 4096;

    fn open_or_skip(mode: Mode, extra: u64) -> Option<Uffd> {
        if crate::sys::page_size() != PS {
            println!("skipped: page size is not 4096");
            return None;
        }
        match Uffd::open_with(mode, extra) {
            Ok(u) => Some(u),
            Err(e) => {
                println!("skipped: {e}");
                None
            }
        }
    }

    /// A MAP_SHARED read-write mapping of a fresh memfd (pages populated).
    struct Shm {
        fd: OwnedFd,
        base: *mut u8,
        len: usize,
    }

    impl Shm {
        fn new(pages: usize) -> Shm {
            let len = pages * PS;
            let fd = crate::sys::memfd::create_sized("uffd-test", len as u64).unwrap();
            // SAFETY: a fresh mapping at a kernel-chosen address.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_POPULATE,
                    fd.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            let base = p.cast::<u8>();
            for i in 0..pages {
                // SAFETY: page `i` is inside the mapping.
                unsafe { base.add(i * PS).write_volatile((i as u8).wrapping_add(1)) };
            }
            Shm { fd, base, len }
        }
        fn page(&self, i: usize) -> *mut u8 {
            assert!(i * PS < self.len);
            self.base.wrapping_add(i * PS)
        }
    }

    impl Drop for Shm {
        fn drop(&mut self) {
            // SAFETY: we own the mapping (and whatever tests moved into it).
            unsafe { libc::munmap(self.base.cast(), self.len) };
        }
    }

    /// Whether the PTE of `addr` carries the uffd-wp bit (pagemap bit 57).
    fn pagemap_wp(addr: *mut u8) -> bool {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut b = [0u8; 8];
        f.read_exact_at(&mut b, (addr as u64 / PS as u64) * 8)
            .unwrap();
        u64::from_le_bytes(b) & (1 << 57) != 0
    }

    /// The VmFlags of the VMA containing `addr`, and the number of VMAs.
    fn vma_flags(addr: *mut u8) -> (String, usize) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let a = addr as usize;
        let mut inside = false;
        let mut found = String::new();
        let mut count = 0;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((s, e)) = first.split_once('-') {
                if let (Ok(s), Ok(e)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16))
                {
                    count += 1;
                    inside = s <= a && a < e;
                    continue;
                }
            }
            if inside {
                if let Some(f) = line.strip_prefix("VmFlags:") {
                    found = f.trim().to_string();
                }
            }
        }
        (found, count)
    }

    fn registered(addr: *mut u8) -> bool {
        vma_flags(addr).0.split_whitespace().any(|f| f == "uw")
    }

    // ---- a test-only fault handler for SIGBUS and SIGSEGV ----

    const FIX_NONE: u8 = 0;
    const FIX_UFFD: u8 = 1;
    const FIX_MPROTECT: u8 = 2;

    static LOCK: Mutex<()> = Mutex::new(());
    static H_START: AtomicUsize = AtomicUsize::new(0);
    static H_LEN: AtomicUsize = AtomicUsize::new(0);
    static H_FD: AtomicI32 = AtomicI32::new(-1);
    static H_FIX: AtomicU8 = AtomicU8::new(FIX_NONE);
    static HITS: AtomicUsize = AtomicUsize::new(0);
    static LAST_ADDR: AtomicUsize = AtomicUsize::new(0);
    static LAST_SIG: AtomicI32 = AtomicI32::new(0);
    static LAST_CODE: AtomicI32 = AtomicI32::new(0);
    static LAST_TID: AtomicI32 = AtomicI32::new(0);
    static FIX_FAILED: AtomicI32 = AtomicI32::new(0);
    static PREV_BUS: AtomicUsize = AtomicUsize::new(0);
    static PREV_BUS_FLAGS: AtomicUsize = AtomicUsize::new(0);
    static PREV_SEGV: AtomicUsize = AtomicUsize::new(0);
    static PREV_SEGV_FLAGS: AtomicUsize = AtomicUsize::new(0);

    fn gettid() -> i32 {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::syscall(libc::SYS_gettid) as i32 }
    }

    /// Installed handlers; restores the previous actions on drop. Holding
    /// it serializes the tests that fault.
    struct Handler {
        old_bus: libc::sigaction,
        old_segv: libc::sigaction,
        _lock: MutexGuard<'static, ()>,
    }

    impl Handler {
        fn install(start: *mut u8, len: usize, fix: u8, fd: RawFd) -> Handler {
            let lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
            // Make sure sys::sigbus has installed its handler before we
            // save the previous action (so we chain to it, and restoring
            // ours later cannot remove it). The dummy range is never touched.
            drop(crate::sys::sigbus::Guard::protect(
                std::ptr::dangling_mut::<u8>(),
                1,
            ));
            HITS.store(0, Ordering::SeqCst);
            FIX_FAILED.store(0, Ordering::SeqCst);
            LAST_ADDR.store(0, Ordering::SeqCst);
            H_FD.store(fd, Ordering::SeqCst);
            H_FIX.store(fix, Ordering::SeqCst);
            H_START.store(start as usize, Ordering::SeqCst);
            H_LEN.store(len, Ordering::SeqCst);
            // SAFETY: zeroed sigaction is valid (no handler, empty mask).
            let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
            sa.sa_sigaction = on_fault as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            // SAFETY: out-parameters written by the kernel.
            let mut old_bus: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            let mut old_segv: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: `on_fault` has the SA_SIGINFO signature and only uses
            // atomics and system calls; the pointers are to live locals.
            unsafe {
                assert_eq!(libc::sigaction(libc::SIGBUS, &sa, &mut old_bus), 0);
                assert_eq!(libc::sigaction(libc::SIGSEGV, &sa, &mut old_segv), 0);
            }
            PREV_BUS.store(old_bus.sa_sigaction, Ordering::SeqCst);
            PREV_BUS_FLAGS.store(old_bus.sa_flags as usize, Ordering::SeqCst);
            PREV_SEGV.store(old_segv.sa_sigaction, Ordering::SeqCst);
            PREV_SEGV_FLAGS.store(old_segv.sa_flags as usize, Ordering::SeqCst);
            Handler {
                old_bus,
                old_segv,
                _lock: lock,
            }
        }
    }

    impl Drop for Handler {
        fn drop(&mut self) {
            // SAFETY: restoring the actions saved by `install`.
            unsafe {
                libc::sigaction(libc::SIGBUS, &self.old_bus, std::ptr::null_mut());
                libc::sigaction(libc::SIGSEGV, &self.old_segv, std::ptr::null_mut());
            }
            H_LEN.store(0, Ordering::SeqCst);
        }
    }

    extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
        let start = H_START.load(Ordering::SeqCst);
        let len = H_LEN.load(Ordering::SeqCst);
        if len != 0 && addr >= start && addr - start < len {
            HITS.fetch_add(1, Ordering::SeqCst);
            LAST_ADDR.store(addr, Ordering::SeqCst);
            LAST_SIG.store(sig, Ordering::SeqCst);
            LAST_CODE.store(code, Ordering::SeqCst);
            LAST_TID.store(gettid(), Ordering::SeqCst);
            let page = (addr & !(PS - 1)) as *mut u8;
            let fd = H_FD.load(Ordering::SeqCst);
            let fixed = match H_FIX.load(Ordering::SeqCst) {
                // SAFETY: `fd` is the test's open userfaultfd (it outlives
                // the Handler); the page belongs to the test's mapping.
                FIX_UFFD => unsafe {
                    write_protect_raw(BorrowedFd::borrow_raw(fd), page, PS, false, true).is_ok()
                },
                // SAFETY: the page belongs to the test's mapping.
                FIX_MPROTECT => unsafe {
                    libc::mprotect(page.cast(), PS, libc::PROT_READ | libc::PROT_WRITE) == 0
                },
                _ => false,
            };
            if !fixed {
                FIX_FAILED.store(1, Ordering::SeqCst);
                // Make progress anyway: drop the registration and restore
                // write access, else the write would fault forever.
                // SAFETY: as above.
                let ok = unsafe {
                    fd >= 0 && unregister_raw(BorrowedFd::borrow_raw(fd), page, PS).is_ok()
                };
                // SAFETY: as above.
                let ok2 = unsafe {
                    libc::mprotect(page.cast(), PS, libc::PROT_READ | libc::PROT_WRITE) == 0
                };
                if !ok && !ok2 {
                    let msg = b"uffd test handler: cannot unprotect\n";
                    // SAFETY: write and _exit are async-signal-safe.
                    unsafe {
                        libc::write(2, msg.as_ptr().cast(), msg.len());
                        libc::_exit(101);
                    }
                }
            }
            return;
        }
        let (prev, flags) = if sig == libc::SIGBUS {
            (
                PREV_BUS.load(Ordering::SeqCst),
                PREV_BUS_FLAGS.load(Ordering::SeqCst),
            )
        } else {
            (
                PREV_SEGV.load(Ordering::SeqCst),
                PREV_SEGV_FLAGS.load(Ordering::SeqCst),
            )
        };
        if prev == libc::SIG_DFL || prev == libc::SIG_IGN {
            // SAFETY: zeroed sigaction = SIG_DFL; the access faults again
            // and the process dies as it would have without us.
            let sa: libc::sigaction = unsafe { std::mem::zeroed() };
            // SAFETY: valid pointer to a local.
            unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
        } else if flags & libc::SA_SIGINFO as usize != 0 {
            type H = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
            // SAFETY: installed with SA_SIGINFO, so it has this signature.
            let f: H = unsafe { std::mem::transmute(prev) };
            f(sig, info, ctx);
        } else {
            // SAFETY: without SA_SIGINFO the value is a `fn(c_int)`.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev) };
            f(sig);
        }
    }

    /// Rewrite the first byte of `addr` (same value); returns whether the
    /// write faulted into the test handler.
    fn write_faults(addr: *mut u8) -> bool {
        let before = HITS.load(Ordering::SeqCst);
        // SAFETY: `addr` is in a test mapping covered by the handler.
        unsafe { addr.write_volatile(addr.read_volatile()) };
        HITS.load(Ordering::SeqCst) != before
    }

    #[derive(Debug, PartialEq, Eq, Clone, Copy)]
    struct State {
        registered: bool,
        wp_bit: bool,
        faults: bool,
    }

    /// Registration, PTE bit, then whether a write faults (which, when it
    /// does, unprotects the page).
    fn state(addr: *mut u8) -> State {
        let registered = registered(addr);
        let wp_bit = pagemap_wp(addr);
        let faults = write_faults(addr);
        State {
            registered,
            wp_bit,
            faults,
        }
    }

    unsafe fn mremap_fixed(from: *mut u8, to: *mut u8) -> Result<(), Errno> {
        // SAFETY: the caller owns both pages.
        let p = unsafe {
            libc::mremap(
                from.cast(),
                PS,
                PS,
                // DONTUNMAP, as the arenas move pages: the source stays
                // mapped, so no hole is left for a concurrent test's mmap.
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED | libc::MREMAP_DONTUNMAP,
                to.cast::<libc::c_void>(),
            )
        };
        if p == libc::MAP_FAILED {
            Err(Errno::from_raw_os_error(
                std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            ))
        } else {
            assert_eq!(p.cast::<u8>(), to);
            Ok(())
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "userfaultfd, mprotect, mremap: not modelled by Miri")]
    fn opens_and_reports_features() {
        let Some(u) = open_or_skip(Mode::Any, 0) else {
            return;
        };
        println!(
            "uffd: user_mode_only={} features={:#x} ({})",
            u.is_user_mode_only(),
            u.features(),
            feature_names(u.features())
        );
        assert_eq!(u.features() & REQUIRED_FEATURES, REQUIRED_FEATURES);
        let msg = UffdUnavailable::MissingFeatures {
            missing: feature::WP_HUGETLBFS_SHMEM,
            offered: 0x7f,
        }
        .to_string();
        assert!(
            msg.contains("WP_HUGETLBFS_SHMEM") && msg.contains("5.19"),
            "{msg}"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "userfaultfd, mprotect, mremap: not modelled by Miri")]
    fn write_to_protected_page_raises_sigbus_in_the_writing_thread() {
        let Some(u) = open_or_skip(Mode::Any, 0) else {
            return;
        };
        let m = Shm::new(4);
        // SAFETY: the test owns the mapping.
        unsafe {
            u.register_wp(m.base, m.len).unwrap();
            u.write_protect(m.page(1), PS, true).unwrap();
        }
        assert!(pagemap_wp(m.page(1)) && !pagemap_wp(m.page(0)));
        let (flags, _) = vma_flags(m.base);
        println!("VmFlags after register: {flags}");
        let _h = Handler::install(m.base, m.len, FIX_UFFD, u.raw_fd());
        let target = m.page(1).wrapping_add(100) as usize;
        let writer = std::thread::spawn(move || {
            // SAFETY: inside the test mapping, which outlives the thread.
            unsafe { (target as *mut u8).write_volatile(42) };
            gettid()
        });
        let writer_tid = writer.join().unwrap();
        assert_eq!(HITS.load(Ordering::SeqCst), 1);
        assert_eq!(FIX_FAILED.load(Ordering::SeqCst), 0);
        assert_eq!(LAST_SIG.load(Ordering::SeqCst), libc::SIGBUS);
        assert_eq!(LAST_TID.load(Ordering::SeqCst), writer_tid);
        let code = LAST_CODE.load(Ordering::SeqCst);
        let addr = LAST_ADDR.load(Ordering::SeqCst);
        println!(
            "SIGBUS si_code={code} (BUS_ADRERR={}) si_addr=page+{:#x}",
            libc::BUS_ADRERR,
            addr.wrapping_sub(m.page(1) as usize)
        );
        assert_eq!(addr, target, "si_addr is the exact faulting address");
        assert_eq!(code, libc::BUS_ADRERR);
        // SAFETY: inside the mapping.
        assert_eq!(unsafe { (target as *const u8).read_volatile() }, 42);
        assert!(!pagemap_wp(m.page(1)));
        // Pages never protected did not fault.
        assert!(!write_faults(m.page(2)));
    }

    /// An anonymous PROT_NONE reservation of `pages` pages (scratch
    /// addresses for mremap).
    struct Reserve(*mut u8, usize);

    impl Reserve {
        fn new(pages: usize) -> Reserve {
            // SAFETY: a fresh mapping at a kernel-chosen address.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    pages * PS,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            Reserve(p.cast(), pages * PS)
        }
    }

    impl Drop for Reserve {
        fn drop(&mut self) {
            // SAFETY: we own the reservation.
            unsafe { libc::munmap(self.0.cast(), self.1) };
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "userfaultfd, mprotect, mremap: not modelled by Miri")]
    fn mremap_drops_the_registration_of_the_moved_page() {
        let Some(u) = open_or_skip(Mode::Any, 0) else {
            return;
        };
        let m = Shm::new(10);
        let other = Shm::new(1);
        let scratch = Reserve::new(1);
        // SAFETY: the test owns the mapping.
        unsafe {
            u.register_wp(m.base, m.len).unwrap();
            u.write_protect(m.page(1), PS, true).unwrap();
            u.write_protect(m.page(3), PS, true).unwrap();
        }
        let _h = Handler::install(m.base, m.len, FIX_UFFD, u.raw_fd());
        let (_, vmas0) = vma_flags(m.base);
        // A: a protected page moved inside the registered range.
        // SAFETY: both pages belong to the test mapping.
        unsafe { mremap_fixed(m.page(1), m.page(5)).unwrap() };
        // SAFETY: page 5 is mapped (page 1's contents, value 2).
        assert_eq!(unsafe { m.page(5).read_volatile() }, 2);
        let a = state(m.page(5));
        println!("A  protected page moved onto a registered address: {a:?}");
        // B: an unprotected registered page moved onto a registered address.
        // SAFETY: as above.
        unsafe { mremap_fixed(m.page(2), m.page(6)).unwrap() };
        let b = state(m.page(6));
        println!("B  unprotected registered page moved onto a registered address: {b:?}");
        // C: a page of an unregistered mapping moved onto a registered address.
        // SAFETY: `other` is ours; its base is now unmapped and `other`'s
        // drop unmaps nothing of anyone else.
        unsafe { mremap_fixed(other.base, m.page(7)).unwrap() };
        let c = state(m.page(7));
        println!("C  unregistered page moved onto a registered address: {c:?}");
        // E: protecting a range that contains a moved (unregistered) page
        // fails, after protecting the registered pages before it.
        // SAFETY: the test owns pages 4..7 (4 registered, 5 moved there in A).
        let partial = unsafe { u.write_protect(m.page(4), 2 * PS, true) };
        let first = pagemap_wp(m.page(4));
        println!("E  write_protect over [registered, moved] pages: {partial:?}; first page protected: {first}");
        let second = pagemap_wp(m.page(5));
        println!("   second (moved) page protected: {second}");
        // Undo, so that D starts from the same state.
        // SAFETY: as above.
        unsafe { u.write_protect(m.page(4), PS, false).unwrap() };
        // D: the TCOW swap: protected page 3 <-> spare page 8 via scratch.
        // SAFETY: all pages are the test's.
        unsafe {
            mremap_fixed(m.page(3), scratch.0).unwrap();
            mremap_fixed(m.page(8), m.page(3)).unwrap();
            mremap_fixed(scratch.0, m.page(8)).unwrap();
        }
        // SAFETY: both pages mapped; 3 now holds the spare (9), 8 the original (4).
        unsafe {
            assert_eq!(m.page(3).read_volatile(), 9);
            assert_eq!(m.page(8).read_volatile(), 4);
        }
        let d_page = (registered(m.page(3)), pagemap_wp(m.page(3)));
        let d_spare = (registered(m.page(8)), pagemap_wp(m.page(8)));
        println!("D  after the swap: page (registered, wp) = {d_page:?}, spare slot = {d_spare:?}");
        let (_, vmas1) = vma_flags(m.base);
        // Re-arm: register both again; protect the in-flight original.
        // SAFETY: the test owns the pages.
        let rearm = unsafe {
            u.register_wp(m.page(3), PS)
                .and_then(|()| u.register_wp(m.page(8), PS))
                .and_then(|()| u.write_protect(m.page(8), PS, true))
        };
        println!("D  re-arm (register page, register+protect spare): {rearm:?}");
        rearm.unwrap();
        let d3 = state(m.page(3));
        let d8 = state(m.page(8));
        let (_, vmas2) = vma_flags(m.base);
        println!("D  after re-arm: page {d3:?}, spare {d8:?}; VMAs {vmas0} -> {vmas1} -> {vmas2}");
        // Registering a whole range that already has such holes/splits.
        // SAFETY: the test owns the mapping; page 1 and 2 are holes now.
        let whole = unsafe { u.register_wp(m.page(3), 6 * PS) };
        println!("   re-register pages 3..9 in one call: {whole:?}");
        assert_eq!(FIX_FAILED.load(Ordering::SeqCst), 0);
        // Without EVENT_REMAP the moved page is unregistered at its
        // destination and even its PTE protection is gone: it is writable.
        let gone = State {
            registered: false,
            wp_bit: false,
            faults: false,
        };
        assert_eq!((a, b, c), (gone, gone, gone));
        assert_eq!((d_page, d_spare), ((false, false), (false, false)));
        assert_eq!(partial, Err(Errno::NOENT));
        assert!(first && !second);
        assert!(d3.registered && !d3.faults);
        assert!(d8.registered && d8.wp_bit && d8.faults);
        whole.unwrap();
    }

    #[test]
    #[cfg_attr(miri, ignore = "userfaultfd, mprotect, mremap: not modelled by Miri")]
    fn event_remap_keeps_the_registration_but_blocks_mremap_until_read() {
        let Some(u) = open_or_skip(Mode::Any, feature::EVENT_REMAP) else {
            return;
        };
        let m = Shm::new(4);
        // SAFETY: the test owns the mapping.
        unsafe {
            u.register_wp(m.base, m.len).unwrap();
            u.write_protect(m.page(1), PS, true).unwrap();
        }
        let _h = Handler::install(m.base, m.len, FIX_UFFD, u.raw_fd());
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (from, to) = (m.page(1) as usize, m.page(3) as usize);
        let d = done.clone();
        let mover = std::thread::spawn(move || {
            // SAFETY: both pages belong to the test mapping.
            let r = unsafe { mremap_fixed(from as *mut u8, to as *mut u8) };
            d.store(true, Ordering::SeqCst);
            r
        });
        // Give the mover time to finish if it does not block.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let finished_before_read = done.load(Ordering::SeqCst);
        // Read the event (bounded wait).
        let mut msg = [0u8; 32];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let got = loop {
            match rustix::io::read(&u, &mut msg) {
                Ok(n) => break Some(n),
                Err(Errno::AGAIN) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10))
                }
                Err(e) => {
                    println!("read event: {e}");
                    break None;
                }
            }
        };
        mover.join().unwrap().unwrap();
        let event = msg[0];
        let remap_from = u64::from_ne_bytes(msg[8..16].try_into().unwrap());
        let remap_to = u64::from_ne_bytes(msg[16..24].try_into().unwrap());
        println!(
            "EVENT_REMAP: mremap finished before the event was read: {finished_before_read}; \
             read {got:?} bytes, event {event:#x} (UFFD_EVENT_REMAP=0x14) from page1={} to page3={}",
            remap_from == from as u64,
            remap_to == to as u64
        );
        let st = state(m.page(3));
        println!("EVENT_REMAP: moved protected page at its destination: {st:?}");
        assert!(
            !finished_before_read,
            "mremap returned without the event being read"
        );
        assert_eq!(event, 0x14);
        assert_eq!(
            st,
            State {
                registered: true,
                wp_bit: true,
                faults: true
            }
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "userfaultfd, mprotect, mremap: not modelled by Miri")]
    fn mmap_fixed_over_a_registered_range_is_not_registered() {
        let Some(u) = open_or_skip(Mode::Any, 0) else {
            return;
        };
        let m = Shm::new(4);
        // SAFETY: the test owns the mapping.
        unsafe {
            u.register_wp(m.base, m.len).unwrap();
            u.write_protect(m.base, m.len, true).unwrap();
        }
        let _h = Handler::install(m.base, m.len, FIX_UFFD, u.raw_fd());
        let map_fixed = |addr: *mut u8, flags: libc::c_int, off: i64| {
            // SAFETY: `addr` is a page of the test mapping.
            let p = unsafe {
                libc::mmap(
                    addr.cast(),
                    PS,
                    libc::PROT_READ | libc::PROT_WRITE,
                    flags | libc::MAP_FIXED,
                    m.fd.as_raw_fd(),
                    off,
                )
            };
            assert_eq!(p.cast::<u8>(), addr);
        };
        // The same file page again, shared; another file page, private (the
        // receiver's swap in the design).
        map_fixed(m.page(2), libc::MAP_SHARED, 2 * PS as i64);
        map_fixed(m.page(3), libc::MAP_PRIVATE, 0);
        let shared = state(m.page(2));
        let private = state(m.page(3));
        let untouched = state(m.page(1));
        println!("MAP_FIXED|MAP_SHARED over a protected registered page: {shared:?}");
        println!("MAP_FIXED|MAP_PRIVATE over a protected registered page: {private:?}");
        println!("neighbouring page, still the original mapping: {untouched:?}");
        let fresh = State {
            registered: false,
            wp_bit: false,
            faults: false,
        };
        assert_eq!((shared, private), (fresh, fresh));
        assert_eq!(
            untouched,
            State {
                registered: true,
                wp_bit: true,
                faults: true
            }
        );
    }

    /// `read(2)` from a pipe into a protected page: the kernel's write.
    fn kernel_write_into_protected_page(u: &Uffd, label: &str) {
        let m = Shm::new(2);
        // SAFETY: the test owns the mapping.
        unsafe {
            u.register_wp(m.base, m.len).unwrap();
            u.write_protect(m.page(1), PS, true).unwrap();
        }
        let _h = Handler::install(m.base, m.len, FIX_UFFD, u.raw_fd());
        let (r, w) = rustix::pipe::pipe().unwrap();
        rustix::io::write(&w, &[7u8; 200]).unwrap();
        // Entirely inside the protected page.
        // SAFETY: page 1 is mapped for 4096 bytes.
        let whole = unsafe { libc::read(r.as_raw_fd(), m.page(1).cast(), 100) };
        let whole_err = std::io::Error::last_os_error();
        // Straddling: 96 bytes in the unprotected page 0, then page 1.
        // SAFETY: [page0 + 4000, page0 + 4200) is inside the mapping.
        let straddle = unsafe { libc::read(r.as_raw_fd(), m.page(0).add(4000).cast(), 200) };
        // SAFETY: inside page 0.
        let partial = unsafe { m.page(0).add(4000).read_volatile() } == 7;
        let mut rest = [0u8; 300];
        let left = rustix::io::read(&r, &mut rest).unwrap();
        println!(
            "{label}: read into a protected page -> {whole} ({whole_err}); straddling read -> \
             {straddle} (unprotected part written anyway: {partial}); bytes left in the pipe \
             {left}; signals {}; page still protected {}",
            HITS.load(Ordering::SeqCst),
            pagemap_wp(m.page(1))
        );
        assert_eq!(whole, -1);
        assert_eq!(whole_err.raw_os_error(), Some(libc::EFAULT));
        // A pipe read all-or-nothing: EFAULT, no short count.
        assert_eq!(straddle, -1);
        assert_eq!(
            HITS.load(Ordering::SeqCst),
            0,
            "no signal for kernel accesses"
        );
        assert!(pagemap_wp(m.page(1)));
        assert_eq!(left, 200, "the failed reads consumed nothing");
    }

    #[test]
    #[cfg_attr(miri, ignore = "userfaultfd, mprotect, mremap: not modelled by Miri")]
    fn kernel_write_into_protected_page_fails_with_efault() {
        match Uffd::open_with(Mode::Full, 0) {
            Ok(u) => kernel_write_into_protected_page(&u, "full userfaultfd"),
            Err(e) => println!("skipped (full): {e}"),
        }
        if let Some(u) = open_or_skip(Mode::UserModeOnly, 0) {
            kernel_write_into_protected_page(&u, "UFFD_USER_MODE_ONLY");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "userfaultfd, mprotect, mremap: not modelled by Miri")]
    fn dropping_the_uffd_unprotects_everything() {
        let Some(u) = open_or_skip(Mode::Any, 0) else {
            return;
        };
        let m = Shm::new(2);
        // SAFETY: the test owns the mapping.
        unsafe {
            u.register_wp(m.base, m.len).unwrap();
            u.write_protect(m.base, m.len, true).unwrap();
        }
        assert!(pagemap_wp(m.base));
        drop(u);
        let _h = Handler::install(m.base, m.len, FIX_NONE, -1);
        let st = state(m.base);
        println!("after closing the userfaultfd: {st:?}");
        assert!(!st.registered && !st.faults);
    }

    fn mprotect(addr: *mut u8, len: usize, prot: libc::c_int) {
        // SAFETY: only ever called on test mappings.
        assert_eq!(unsafe { libc::mprotect(addr.cast(), len, prot) }, 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "userfaultfd, mprotect, mremap: not modelled by Miri")]
    fn mprotect_protection_travels_with_mremap() {
        // The contrast to uffd-wp: a VMA attribute moves with its pages.
        let m = Shm::new(3);
        mprotect(m.page(0), PS, libc::PROT_READ);
        // SAFETY: both pages belong to the test mapping.
        unsafe { mremap_fixed(m.page(0), m.page(2)).unwrap() };
        let (flags, _) = vma_flags(m.page(2));
        println!("mprotect(PROT_READ) page after mremap: VmFlags {flags}");
        assert!(flags.split_whitespace().any(|f| f == "rd"));
        assert!(!flags.split_whitespace().any(|f| f == "wr"));
    }
}
