//! Liveness of a ring's producer and consumers: OFD locks on the ring file.
//!
//! Every participant holds an exclusive open-file-description lock
//! (`sys::ofdlock`) on one byte of the ring file past its end — the
//! producer on [`PRODUCER`], the consumer of slot `i` on [`slot_byte`]`(i)`
//! — through a description of its own ([`Claim`]). It takes the lock
//! *before* it claims its role in the shared words and releases it only
//! after it has left them (the producer's `CLOSED`, the consumer's freed
//! slot); the kernel releases it when the holder dies. So:
//!
//! - a role whose byte nobody holds belongs to a dead process (or to
//!   nobody), in whatever PID namespace it ran — pid numbers, which mean
//!   nothing across namespaces and are recycled, are not consulted;
//! - a role is taken over only by whoever gets its lock, which no one else
//!   can hold at the same time: a slot is never claimed or evicted by two
//!   processes at once, and a live holder is never evicted.
//!
//! Probes (`F_OFD_GETLK`) go through the ring map's own descriptor, which
//! never takes a lock, so they see every holder, also one in this process.
//! The pid kept in the owner words and the PID namespace beside it are for
//! people and tools (`zcio ring stat`), not for liveness.
//!
//! A lock belongs to an open file description, which a `fork` (without
//! `exec`: the descriptor is close-on-exec) shares with the child: a role
//! then stays alive until both processes have dropped it or exited.

use std::os::fd::OwnedFd;

use super::error::OpenError;
use super::map::RingMap;
use crate::sys::ofdlock;
use crate::sys::shm;

/// First lock byte (far past the end of any ring file; locks there touch
/// no data): the producer's.
pub const PRODUCER: u64 = 1 << 62;

/// The lock byte of consumer slot `slot`.
pub const fn slot_byte(slot: usize) -> u64 {
    PRODUCER + 1 + slot as u64
}

/// A held liveness lock, on a description of the ring file of its own.
/// Dropping it releases the lock.
#[derive(Debug)]
pub struct Claim {
    fd: OwnedFd,
    byte: u64,
}

/// A new description of `map`'s file for locks (see the module docs).
pub fn lock_file(map: &RingMap) -> Result<OwnedFd, OpenError> {
    if let Ok(fd) = ofdlock::reopen(map.fd()) {
        return Ok(fd);
    }
    // No /proc: open the ring by name again and make sure it is the same
    // file (it may have been removed and re-created meanwhile).
    let fd = shm::open(map.name(), true).map_err(OpenError::Os)?;
    let (a, b) = (
        rustix::fs::fstat(map.fd()).map_err(OpenError::Os)?,
        rustix::fs::fstat(&fd).map_err(OpenError::Os)?,
    );
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino) {
        return Err(OpenError::NotFound(map.name().to_owned()));
    }
    Ok(fd)
}

impl Claim {
    /// Take `byte` of `map` on a new description: `Ok(None)` if a live
    /// participant holds it.
    pub fn new(map: &RingMap, byte: u64) -> Result<Option<Self>, OpenError> {
        let fd = lock_file(map)?;
        match ofdlock::try_lock(&fd, byte) {
            Ok(true) => Ok(Some(Self { fd, byte })),
            Ok(false) => Ok(None),
            Err(e) => Err(OpenError::Os(e)),
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Closing the description would release it too; say it explicitly
        // in case a forked child shares the description.
        ofdlock::unlock(&self.fd, self.byte);
    }
}

/// Whether a live participant holds `byte` of `map`. A filesystem that
/// cannot answer counts as "alive": nothing is evicted or taken over that
/// is not proven dead.
pub fn held(map: &RingMap, byte: u64) -> bool {
    ofdlock::held(map.fd(), byte).unwrap_or(true)
}

/// This process's id and PID namespace (the inode of `/proc/self/ns/pid`,
/// 0 if unknown).
pub fn me() -> (u32, u64) {
    (std::process::id(), pid_namespace())
}

/// The PID namespace of this process (0 if unknown). A process never
/// changes its own PID namespace, so it is looked up once per process:
/// `zcio ring stat` asks for every consumer it shows. Keyed by pid, since
/// a child forked after `unshare(CLONE_NEWPID)` inherits the cache but
/// lives in the new namespace.
pub fn pid_namespace() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    // `pid << 32 | 1` once looked up (0: not yet), and the namespace.
    static KEY: AtomicU64 = AtomicU64::new(0);
    static NS: AtomicU64 = AtomicU64::new(0);
    let key = u64::from(std::process::id()) << 32 | 1;
    // SYNC: Acquire pairs with the Release store of the key below, made
    // after NS: a thread that sees its pid's key sees that namespace.
    if KEY.load(Ordering::Acquire) == key {
        return NS.load(Ordering::Relaxed);
    }
    let ns = rustix::fs::stat("/proc/self/ns/pid").map_or(0, |st| st.st_ino);
    // Racing lookups store the same value.
    NS.store(ns, Ordering::Relaxed);
    // SYNC: Release publishes NS (see the Acquire above).
    KEY.store(key, Ordering::Release);
    ns
}

/// Whether a participant recorded with PID namespace `ns` lives in another
/// PID namespace than ours (its pid then means nothing here).
pub fn other_namespace(ns: u64) -> bool {
    let mine = pid_namespace();
    ns != 0 && mine != 0 && ns != mine
}

#[cfg(all(test, not(loom)))]
mod tests {
    /// The namespace looked up once is the one `/proc` shows, every time.
    #[test]
    #[cfg_attr(miri, ignore = "stat of /proc: a syscall Miri does not run")]
    fn the_pid_namespace_is_looked_up_once_and_right() {
        let direct = rustix::fs::stat("/proc/self/ns/pid").map_or(0, |st| st.st_ino);
        assert_eq!(super::pid_namespace(), direct);
        assert_eq!(super::pid_namespace(), direct);
        assert!(!super::other_namespace(direct));
    }
}
