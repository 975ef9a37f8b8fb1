//! The registry of live objects: one small file per live zcio object in
//! one run directory, so tools (`zcio ls`) can see every object without
//! joining any protocol.
//!
//! * **Where:** [`dir::default_path`] — `$ZCIO_RUN_DIR`, else `zcio-<uid>`
//!   next to the rings (`$ZCIO_RING_DIR` or `/dev/shm`); created 0700, and
//!   refused when it is another user's or others may write it.
//! * **What:** an entry file ([`layout`]): a `#[repr(C)]` header (kind,
//!   name, the owner's pid as the owner sees it and its PID-namespace
//!   inode, uid, creation time) and one page of `u64` statistics counters
//!   that only the owner writes (Relaxed stores, one writer per counter;
//!   [`StatsPage`], meanings in [`schema`]). The file's mode is the read
//!   bits of the object's own, so a user lists only what they could open
//!   and nobody but the owner can write or truncate the page.
//! * **Liveness without pids:** the owner holds an OFD lock on byte
//!   [`LOCK_BYTE`] of its entry for its whole life ([`crate::sys::ofdlock`]);
//!   the kernel drops it when the owner dies, in whatever PID namespace.
//!   A lister that finds a complete entry with nobody holding the lock
//!   reports it dead and removes it. The owner locks before it writes the
//!   header and writes the magic last, so a complete entry without a lock
//!   holder is a dead one; an incomplete one is removed only once it is
//!   older than [`GRACE`].
//! * **Reading:** [`RunDir::list`] checks each file's length, maps it
//!   read-only under a SIGBUS guard ([`crate::sys::sigbus`]), copies the
//!   header and counters out (volatile copy, atomic loads) and validates
//!   the copy; a hostile or truncated file is reported invalid, never
//!   trusted.

pub mod dir;
pub mod layout;
pub mod schema;
mod stats_page;

use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{self, Mode, OFlags};
use thiserror::Error;

use crate::sync::{AtomicU64, Ordering};
use crate::sys::mmap::{Access, Mapping};
use crate::sys::sigbus::Guard;
use crate::sys::{ofdlock, Errno};

use layout::{Header, HEADER_LEN, MAGIC, STATS_OFFSET};
pub use layout::{Kind, Refusal, ENTRY_LEN, NAME_MAX, STATS_COUNT};
pub use stats_page::StatsPage;

/// The byte of an entry file its owner keeps locked while it lives.
pub const LOCK_BYTE: u64 = 0;

/// An entry without a complete header and without a lock holder is
/// removed only once it is this old (it may be one being created).
pub const GRACE: Duration = Duration::from_secs(5);

/// Failure to use the registry.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    /// The run directory is missing, unsafe or unusable.
    #[error("zcio run directory {}: {why}", path.display())]
    RunDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong and what to do.
        why: String,
    },
    /// A system call failed.
    #[error("registry: {op} failed: {errno}")]
    Os {
        /// The operation.
        op: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
}

fn os(op: &'static str) -> impl FnOnce(Errno) -> RegistryError {
    move |errno| RegistryError::Os { op, errno }
}

/// A checked run directory.
#[derive(Clone, Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// The default run directory ([`dir::default_path`]), created if
    /// missing and checked.
    pub fn open_default() -> Result<RunDir, RegistryError> {
        Self::open(&dir::default_path())
    }

    /// The run directory at `path`, created (0700) if missing and checked.
    pub fn open(path: &Path) -> Result<RunDir, RegistryError> {
        dir::prepare(path)?;
        Ok(RunDir {
            path: path.to_path_buf(),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Register a live object: an entry of `kind` named `name` with
    /// permission bits `mode` (the object's own), held until the returned
    /// [`Registration`] is dropped.
    pub fn register(
        &self,
        kind: Kind,
        name: &str,
        mode: u32,
    ) -> Result<Registration, RegistryError> {
        Registration::create(&self.path, kind, name, mode)
    }

    /// Every entry this process may open, copied out and validated. Dead
    /// entries are reported once and removed; so are incomplete ones older
    /// than [`GRACE`] that nobody holds.
    pub fn list(&self) -> Result<Listing, RegistryError> {
        dir::check(&self.path)?;
        let rd = std::fs::read_dir(&self.path).map_err(|e| RegistryError::Os {
            op: "read_dir",
            errno: Errno::from_io_error(&e).unwrap_or(Errno::IO),
        })?;
        let mut out = Listing::default();
        for de in rd.flatten() {
            let Ok(file) = de.file_name().into_string() else {
                out.invalid.push(Invalid {
                    file: de.file_name().to_string_lossy().into_owned(),
                    reason: "file name not UTF-8".into(),
                    removed: false,
                });
                continue;
            };
            if file.starts_with('.') {
                continue;
            }
            match de.file_type() {
                Ok(t) if t.is_file() => {}
                Ok(t) if t.is_dir() || t.is_symlink() || t.is_fifo() || t.is_socket() => {
                    out.invalid.push(Invalid {
                        file,
                        reason: "not a regular file".into(),
                        removed: false,
                    });
                    continue;
                }
                _ => continue,
            }
            read_entry(&self.path, file, &mut out);
        }
        out.entries
            .sort_by(|a, b| (a.kind, &a.name, &a.file).cmp(&(b.kind, &b.name, &b.file)));
        Ok(out)
    }
}

/// The owner's side of a registry entry: holds the entry's lock, writes
/// its counters; dropping it removes the entry.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
    map: Mapping,
    // Closing it releases the lock: declared (dropped) after `map`.
    _fd: OwnedFd,
}

impl Registration {
    fn create(dir: &Path, kind: Kind, name: &str, mode: u32) -> Result<Self, RegistryError> {
        let mut tries = 0;
        let (path, fd) = loop {
            let path = dir.join(file_name(kind, name));
            match fs::open(
                &path,
                OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                Mode::from_raw_mode(0o600),
            ) {
                Ok(fd) => break (path, fd),
                Err(Errno::EXIST) if tries < 8 => tries += 1,
                Err(e) => return Err(os("create entry")(e)),
            }
        };
        // Remove the file if anything below fails.
        let undo = Unlink(Some(path.clone()));
        // Lock before anything is written: a complete header without a
        // holder then always means a dead owner.
        if !ofdlock::try_lock(&fd, LOCK_BYTE).map_err(os("lock entry"))? {
            return Err(os("lock entry")(Errno::AGAIN));
        }
        fs::ftruncate(&fd, ENTRY_LEN as u64).map_err(os("size entry"))?;
        let map =
            Mapping::map(&fd, ENTRY_LEN, Access::ReadWrite, false).map_err(os("map entry"))?;
        let me = Header::new(
            kind,
            name,
            std::process::id(),
            rustix::process::geteuid().as_raw(),
            pid_namespace(),
            now_ns(),
        );
        let bytes = me.to_bytes();
        let mut rest = [0u8; HEADER_LEN - 8];
        rest.copy_from_slice(&bytes[8..]);
        // Bytes 8..HEADER_LEN of our own fresh mapping of ENTRY_LEN bytes;
        // readers only copy them (volatile), never reference them.
        // SAFETY: as argued just above.
        unsafe {
            map.as_ptr()
                .add(8)
                .cast::<[u8; HEADER_LEN - 8]>()
                .write_volatile(rest)
        };
        // SYNC: Release publishes the header written just above; pairs
        // with the Acquire load of the magic in `read_entry`.
        word(&map, 0).store(MAGIC, Ordering::Release);
        // Read bits only: whoever may open the object may read its entry,
        // but nobody else may write (or truncate) a page the owner writes
        // on its hot path; our own descriptor was opened read-write before.
        fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o444)).map_err(os("chmod entry"))?;
        let path = undo.keep();
        Ok(Registration { path, map, _fd: fd })
    }

    /// Path of the entry file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove the entry file now, while the owner keeps its mapping (it
    /// may still write counters nobody reads): for an object that ended
    /// while something of it lingers in this process. Dropping unlinks
    /// again, harmlessly: the file name carries a nonce, so no other entry
    /// ever has it.
    pub fn withdraw(&self) {
        let _ = fs::unlink(&self.path);
    }

    /// Set counter `index` (ignored past [`STATS_COUNT`]).
    pub fn set(&self, index: usize, value: u64) {
        if index < STATS_COUNT {
            // SYNC: Relaxed: this owner is the counter's only writer; tools'
            // Relaxed loads in `read_entry` are the partner, and the counter
            // orders nothing else.
            word(&self.map, STATS_OFFSET + 8 * index).store(value, Ordering::Relaxed);
        }
    }

    /// Add `delta` to counter `index` (a load and a store: this owner is
    /// its only writer, so no read-modify-write is shared with anyone).
    pub fn add(&self, index: usize, delta: u64) {
        if index < STATS_COUNT {
            let w = word(&self.map, STATS_OFFSET + 8 * index);
            // SYNC: Relaxed load and store of a counter only we write;
            // partner: the tools' Relaxed loads in `read_entry`.
            w.store(
                w.load(Ordering::Relaxed).wrapping_add(delta),
                Ordering::Relaxed,
            );
        }
    }

    /// Counter `index` as last set (0 past [`STATS_COUNT`]).
    pub fn get(&self, index: usize) -> u64 {
        if index < STATS_COUNT {
            // SYNC: Relaxed: our own writes (see `set`).
            word(&self.map, STATS_OFFSET + 8 * index).load(Ordering::Relaxed)
        } else {
            0
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Unlink first: a lister then never sees our file without a holder.
        let _ = fs::unlink(&self.path);
    }
}

/// Unlinks a path on drop unless kept.
struct Unlink(Option<PathBuf>);

impl Unlink {
    fn keep(mut self) -> PathBuf {
        self.0.take().unwrap_or_default()
    }
}

impl Drop for Unlink {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::unlink(p);
        }
    }
}

/// The 8-byte word at `offset` of a mapping of at least `offset + 8` bytes.
fn word(map: &Mapping, offset: usize) -> &AtomicU64 {
    debug_assert!(offset.is_multiple_of(8) && offset + 8 <= ENTRY_LEN);
    // Every caller passes an 8-aligned offset below ENTRY_LEN, every
    // mapping here is ENTRY_LEN bytes and page-aligned, so the word is
    // aligned, in bounds and lives as long as `map`; it is only accessed
    // atomically (loads only, in a read-only mapping).
    // SAFETY: as argued just above.
    unsafe { &*map.as_ptr().add(offset).cast::<AtomicU64>() }
}

/// One listed entry, copied out of its file and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// File name in the run directory.
    pub file: String,
    /// What the object is.
    pub kind: Kind,
    /// Its name (socket path, ring name, ...).
    pub name: String,
    /// The owner's pid as the owner sees it (meaningful only in the PID
    /// namespace `pid_ns`).
    pub pid: u32,
    /// The owner's PID-namespace inode (0 unknown).
    pub pid_ns: u64,
    /// The uid the owner wrote.
    pub uid: u32,
    /// The file's owner uid (what the kernel says).
    pub file_uid: u32,
    /// The file's permission bits (the read bits of the object's own).
    pub mode: u32,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_ns: u64,
    /// Whether the owner lives.
    pub state: State,
    /// The statistics counters.
    pub stats: Vec<u64>,
}

/// Whether an entry's owner lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Its owner holds the lock.
    Live,
    /// Nobody holds the lock: the owner died; the entry was removed.
    Dead,
    /// The file system would not say (locks unsupported).
    Unknown,
}

impl State {
    /// `live`, `dead` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Live => "live",
            State::Dead => "dead",
            State::Unknown => "unknown",
        }
    }
}

/// A file in the run directory that is not a valid entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// Its name.
    pub file: String,
    /// Why it was refused.
    pub reason: String,
    /// Whether this listing removed it.
    pub removed: bool,
}

/// What [`RunDir::list`] found.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// Valid entries, live and dead, by kind then name.
    pub entries: Vec<Entry>,
    /// Files that are not valid entries.
    pub invalid: Vec<Invalid>,
    /// Entries this process may not open (another user's, mode denies).
    pub unreadable: usize,
}

fn read_entry(dir: &Path, file: String, out: &mut Listing) {
    let path = dir.join(&file);
    let fd = match fs::open(
        &path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::ACCESS | Errno::PERM) => {
            out.unreadable += 1;
            return;
        }
        // Gone meanwhile (its owner closed it), or not openable at all.
        Err(_) => return,
    };
    let mut invalid = |reason: String, removable: bool| {
        let removed = removable && fs::unlink(&path).is_ok();
        out.invalid.push(Invalid {
            file: file.clone(),
            reason,
            removed,
        });
    };
    let Ok(st) = fs::fstat(&fd) else { return };
    if fs::FileType::from_raw_mode(st.st_mode) != fs::FileType::RegularFile {
        invalid("not a regular file".into(), false);
        return;
    }
    let held = ofdlock::held(&fd, LOCK_BYTE);
    let len = u64::try_from(st.st_size).unwrap_or(0);
    let age = Duration::from_nanos(now_ns().saturating_sub(mtime_ns(&st)));
    // An incomplete entry with no holder, old enough not to be one being
    // created, is a leftover.
    let stale = held == Some(false) && age >= GRACE;
    if len < ENTRY_LEN as u64 {
        invalid(format!("too short ({len} bytes)"), stale);
        return;
    }
    let copy = match copy_out(&fd) {
        Ok(c) => c,
        Err(reason) => {
            invalid(reason.into(), stale);
            return;
        }
    };
    let (header, stats) = copy;
    let (kind, name) = match header.validate() {
        Ok(v) => v,
        Err(r) => {
            invalid(r.as_str().into(), stale);
            return;
        }
    };
    let state = match held {
        Some(true) => State::Live,
        Some(false) => {
            // Complete and unheld: its owner died. If the file is already
            // gone, its owner closed it cleanly meanwhile: not ours to show.
            match fs::unlink(&path) {
                Ok(()) => State::Dead,
                Err(Errno::NOENT) => return,
                Err(_) => State::Dead,
            }
        }
        None => State::Unknown,
    };
    out.entries.push(Entry {
        file,
        kind,
        name: name.to_owned(),
        pid: header.pid,
        pid_ns: header.pid_ns,
        uid: header.uid,
        file_uid: st.st_uid,
        mode: st.st_mode & 0o7777,
        created_ns: header.created_ns,
        state,
        stats,
    });
}

/// Map the first [`ENTRY_LEN`] bytes of `fd` read-only and copy the header
/// and counters out.
fn copy_out(fd: &OwnedFd) -> Result<(Header, Vec<u64>), &'static str> {
    let map = Mapping::map(fd, ENTRY_LEN, Access::ReadOnly, false).map_err(|_| "cannot map")?;
    let guard = Guard::protect(map.as_ptr(), ENTRY_LEN);
    // SYNC: Acquire pairs with the owner's Release store of the magic in
    // `Registration::create`: the header bytes below are complete.
    let magic = word(&map, 0).load(Ordering::Acquire);
    // HEADER_LEN bytes at the start of our ENTRY_LEN-byte mapping, copied
    // (volatile: the owner or anyone able to write the file may change
    // them meanwhile) into a private array; a truncation under us reads
    // zeros (the guard) and is caught below.
    // SAFETY: as argued just above.
    let mut bytes = unsafe { map.as_ptr().cast::<[u8; HEADER_LEN]>().read_volatile() };
    bytes[..8].copy_from_slice(&magic.to_le_bytes());
    let stats: Vec<u64> = (0..STATS_COUNT)
        // SYNC: Relaxed loads of counters each written by the owner alone
        // (partner: `Registration::set`); they order nothing.
        .map(|i| word(&map, STATS_OFFSET + 8 * i).load(Ordering::Relaxed))
        .collect();
    if guard.tripped() {
        return Err("truncated while read");
    }
    drop(guard);
    Ok((Header::from_bytes(&bytes), stats))
}

/// A unique entry file name: kind, sanitized name, random suffix.
fn file_name(kind: Kind, name: &str) -> String {
    let clean: String = layout::truncate(name, 48)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{}.{}.{:016x}", kind.as_str(), clean, nonce())
}

fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // SYNC: no partner: a process-local sequence number (std atomics,
    // like every process-local counter), only mixed into a hash.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u64(now_ns());
    h.write_u32(std::process::id());
    h.finish()
}

/// Inode of this process's PID namespace, 0 when /proc does not say.
fn pid_namespace() -> u64 {
    fs::stat("/proc/self/ns/pid").map_or(0, |s| s.st_ino)
}

fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    (t.tv_sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec.max(0) as u64)
}

// `st_mtime_nsec` is unsigned on some targets, signed on others.
#[allow(clippy::unnecessary_cast)]
fn mtime_ns(st: &fs::Stat) -> u64 {
    (st.st_mtime.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(st.st_mtime_nsec as u64)
}

// ------------------------------------------------ registration for objects

// SYNC: no partner: a process-local statistic (std atomics), Relaxed.
static FAILURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Register an object in the default run directory, or count the failure
/// and go on without ([`failures`]): objects never fail for the registry.
/// `counters`: `(index, value)` pairs to start the statistics page with.
pub fn register_quietly(
    kind: Kind,
    name: &str,
    mode: u32,
    counters: &[(usize, u64)],
) -> Option<Registration> {
    let r = quietly(RunDir::open_default().and_then(|d| d.register(kind, name, mode)))?;
    for &(i, v) in counters {
        r.set(i, v);
    }
    Some(r)
}

/// The registration, or `None` with the failure counted.
fn quietly(r: Result<Registration, RegistryError>) -> Option<Registration> {
    match r {
        Ok(r) => Some(r),
        Err(_) => {
            // SYNC: no partner (see FAILURES).
            FAILURES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            None
        }
    }
}

/// How many registrations [`register_quietly`] could not make in this
/// process.
pub fn failures() -> u64 {
    // SYNC: no partner (see FAILURES).
    FAILURES.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests;
