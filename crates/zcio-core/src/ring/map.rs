//! A ring file opened and mapped: creation, attach-time validation and
//! typed access to the shared header parts.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use rustix::io::Errno;

use super::error::OpenError;
use super::layout::{
    ConsumerSlot, ControlLine, Geometry, MetaCopy, ProducerLine, RichPtr, SharedLine, Source,
    CONTROL_OFF, DESC_OFF, MAX_CONSUMERS, MAX_SOURCES, PRODUCER_OFF, SHARED_OFF, SLOTS_OFF,
    SOURCES_OFF,
};
use crate::sys::mmap::{Access, RingMapping};
use crate::sys::shm;

/// How far ahead of the position a ring end reads or writes its page
/// tables are pre-faulted (see [`RingMap::populate`]): the largest block the
/// bridge benchmark sends (16 MiB), so that no block of those sizes takes a
/// page fault per page on the first pass over a fresh ring.
pub(crate) const PREFAULT_AHEAD: u64 = 16 << 20;
/// The unit of pre-faulting: each chunk of the data area is populated at
/// most once per mapping, with one `madvise` (a huge page's size).
pub(crate) const PREFAULT_CHUNK: u64 = 2 << 20;

/// Pre-faulting state of one mapping (private to this process).
struct Prefault {
    /// 0: no ring end attached (nothing to do), 1: populate for reading,
    /// 2: for writing.
    mode: AtomicU8,
    /// One bit per [`PREFAULT_CHUNK`] of the data area: populated.
    done: Box<[AtomicU64]>,
    /// Chunks not populated yet (0: the whole data area is).
    left: AtomicUsize,
}

impl Prefault {
    fn new(data_len: u64) -> Self {
        // A ring no larger than the window is populated whole at attach:
        // nothing left to do here.
        let chunks = if data_len > PREFAULT_AHEAD {
            data_len.div_ceil(PREFAULT_CHUNK) as usize
        } else {
            0
        };
        Self {
            mode: AtomicU8::new(0),
            done: (0..chunks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            left: AtomicUsize::new(chunks),
        }
    }

    fn is_done(&self, chunk: u64) -> bool {
        let (w, b) = ((chunk / 64) as usize, chunk % 64);
        // SYNC: Relaxed: a hint for this process only; a stale `false`
        // makes one `madvise` more, which is harmless.
        self.done[w].load(Ordering::Relaxed) & (1 << b) != 0
    }

    /// Mark `chunk` populated; `true` if this call did (so it populates).
    fn claim(&self, chunk: u64) -> bool {
        let (w, b) = ((chunk / 64) as usize, chunk % 64);
        // SYNC: Relaxed, as in `is_done`; fetch_or picks one claimer.
        let fresh = self.done[w].fetch_or(1 << b, Ordering::Relaxed) & (1 << b) == 0;
        if fresh {
            self.left.fetch_sub(1, Ordering::Relaxed);
        }
        fresh
    }
}

/// An open, mapped, validated ring file.
pub struct RingMap {
    name: String,
    geo: Geometry,
    map: RingMapping,
    file: shm::FileInfo,
    prefault: Prefault,
    _fd: OwnedFd,
}

impl std::fmt::Debug for RingMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingMap")
            .field("name", &self.name)
            .field("geometry", &self.geo)
            .finish()
    }
}

fn os(name: &str, e: Errno) -> OpenError {
    match e {
        Errno::NOENT => OpenError::NotFound(name.to_owned()),
        Errno::EXIST => OpenError::Exists(name.to_owned()),
        Errno::ACCESS | Errno::PERM => OpenError::PermissionDenied(name.to_owned()),
        e => OpenError::Os(e),
    }
}

/// Allocate `len` bytes of `fd` (see [`RingMap::reserve`]). Refuses at
/// once, allocating nothing, when the filesystem reports less room than the
/// file still needs (so a huge ring does not first take all of the tmpfs).
fn reserve(fd: impl AsFd, len: u64) -> Result<(), OpenError> {
    let fd = fd.as_fd();
    let no_space = |available: u64| OpenError::NoSpace {
        dir: shm::ring_dir().display().to_string(),
        need: len,
        available,
    };
    let held = rustix::fs::fstat(fd)
        .map(|st| u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512))
        .map_err(OpenError::Os)?
        .min(len);
    // A tmpfs mounted with size=0 has no limit and reports 0 blocks.
    let free = rustix::fs::fstatvfs(fd)
        .ok()
        .filter(|v| v.f_blocks > 0)
        .map(|v| v.f_bavail.saturating_mul(v.f_frsize));
    if let Some(free) = free {
        if len - held > free {
            return Err(no_space(free + held));
        }
    }
    // KEEP_SIZE: never changes the file's length (a file truncated by a
    // hostile peer stays truncated and is reported as such).
    match rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::KEEP_SIZE, 0, len) {
        Ok(()) => Ok(()),
        Err(Errno::NOSPC) => Err(no_space(free.unwrap_or(0) + held)),
        Err(Errno::OPNOTSUPP | Errno::NOSYS) => Ok(()),
        Err(e) => Err(OpenError::Os(e)),
    }
}

impl RingMap {
    /// Create ring `name` with geometry `geo` and permission bits `mode`.
    /// Fails with [`OpenError::Exists`] if it exists.
    pub fn create(name: &str, geo: &Geometry, mode: u32) -> Result<Arc<Self>, OpenError> {
        if !shm::valid_name(name) {
            return Err(OpenError::InvalidName(name.to_owned()));
        }
        let file = shm::NewFile::create(name, geo.file_len(), mode).map_err(|e| match e {
            Errno::NOENT => OpenError::NoDirectory(shm::ring_dir().display().to_string()),
            e => os(name, e),
        })?;
        // Before the file has its name: a ring that does not fit is never
        // seen (dropping `file` removes it).
        reserve(file.fd(), geo.file_len())?;
        let map = RingMapping::map(
            file.fd(),
            geo.head_len as usize,
            geo.data_len as usize,
            Access::ReadWrite,
        )
        .map_err(OpenError::Os)?;
        let meta = geo.to_meta();
        // The file is new, private to us until `publish`, and at least one
        // page long; `MetaCopy` has `Meta`'s leading layout (asserted in
        // `layout`), so writing it at offset 0 initialises the header. All
        // other shared words start at zero (ftruncate), which is their
        // initial state.
        // SAFETY: as argued just above.
        unsafe { map.head().cast::<MetaCopy>().write(meta) };
        let fd = file.publish(name).map_err(|e| os(name, e))?;
        let info = shm::info(&fd).map_err(OpenError::Os)?;
        Ok(Arc::new(Self {
            name: name.to_owned(),
            geo: *geo,
            map,
            file: info,
            prefault: Prefault::new(geo.data_len),
            _fd: fd,
        }))
    }

    /// Open existing ring `name`; `writable` asks for read-write access
    /// (producers and consumers), otherwise read-only (observers). The
    /// kernel checks the file's uid/gid/mode.
    pub fn open(name: &str, writable: bool) -> Result<Arc<Self>, OpenError> {
        if !shm::valid_name(name) {
            return Err(OpenError::InvalidName(name.to_owned()));
        }
        let fd = shm::open(name, writable).map_err(|e| os(name, e))?;
        let info = shm::info(&fd).map_err(OpenError::Os)?;
        if !info.regular {
            return Err(OpenError::BadHeader(super::layout::BadHeader::Field(
                "file type",
            )));
        }
        if info.len < DESC_OFF {
            return Err(OpenError::BadHeader(super::layout::BadHeader::Length {
                expected: DESC_OFF,
                actual: info.len,
            }));
        }
        let mut raw = [0u8; std::mem::size_of::<MetaCopy>()];
        rustix::io::pread(&fd, &mut raw, 0).map_err(OpenError::Os)?;
        // MetaCopy is repr(C) of integers and byte arrays: any bytes are a
        // valid value; `raw` has exactly its size.
        // SAFETY: as argued just above.
        let meta: MetaCopy = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast()) };
        let geo = Geometry::from_meta(&meta, info.len).map_err(OpenError::BadHeader)?;
        let access = if writable {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let map = RingMapping::map(&fd, geo.head_len as usize, geo.data_len as usize, access)
            .map_err(OpenError::Os)?;
        Ok(Arc::new(Self {
            name: name.to_owned(),
            geo,
            map,
            file: info,
            prefault: Prefault::new(geo.data_len),
            _fd: fd,
        }))
    }

    /// Allocate the ring's memory now, if its filesystem has not yet: a
    /// full tmpfs then fails here with [`OpenError::NoSpace`] instead of a
    /// `SIGBUS` (seen as a truncated ring) or `EFAULT` at the first write
    /// that touches a new page. [`RingMap::create`] and
    /// [`super::Producer::attach`] call it; it is cheap when the memory is
    /// already there. Filesystems without `fallocate` are left as they are.
    pub fn reserve(&self) -> Result<(), OpenError> {
        reserve(&self._fd, self.geo.file_len())
    }

    /// Pre-fault this process's page tables for the data area as a ring
    /// end uses it: called by the producer (`write`) and each consumer when
    /// they attach. A ring no larger than [`PREFAULT_AHEAD`] is populated
    /// whole now (`RingMapping::populate`). A larger one is not: attaching
    /// to a 128 MiB ring used to map all of it (128 MiB more resident in
    /// every process attached, ~40–60 ms per attach); instead [`Self::data`]
    /// populates, a [`PREFAULT_CHUNK`] at a time, the [`PREFAULT_AHEAD`]
    /// bytes ahead of each position it is asked for, so the first pass over
    /// a fresh ring still takes no page fault per page (16 per 64 KiB block
    /// otherwise; the pages were allocated at creation, a first touch zeroes
    /// them), and what is mapped is what the ring end used plus that window.
    pub(crate) fn populate(&self, write: bool) {
        if self.geo.data_len <= PREFAULT_AHEAD {
            self.map.populate(write);
            return;
        }
        let mode = if write && self.writable() { 2 } else { 1 };
        // SYNC: Relaxed: a hint for `data`, read on this process's threads.
        self.prefault.mode.fetch_max(mode, Ordering::Relaxed);
    }

    /// Populate the chunks of `[off, off + PREFAULT_AHEAD)` of the data
    /// area (wrapping) not populated yet (see [`Self::populate`]).
    #[inline]
    fn prefault_ahead(&self, off: u64) {
        let p = &self.prefault;
        // SYNC: Relaxed: hints (see `Prefault`).
        if p.left.load(Ordering::Relaxed) == 0 {
            return;
        }
        let chunks = self.geo.data_len.div_ceil(PREFAULT_CHUNK);
        let first = off / PREFAULT_CHUNK;
        let last = (off + PREFAULT_AHEAD - 1) / PREFAULT_CHUNK;
        if p.is_done(first) && p.is_done(last % chunks) {
            return;
        }
        let mode = p.mode.load(Ordering::Relaxed);
        if mode == 0 {
            return;
        }
        self.prefault_chunks(first, last, chunks, mode == 2);
    }

    #[cold]
    fn prefault_chunks(&self, first: u64, last: u64, chunks: u64, write: bool) {
        let advice = if write {
            rustix::mm::Advice::LinuxPopulateWrite
        } else {
            rustix::mm::Advice::LinuxPopulateRead
        };
        for c in first..=last {
            let c = c % chunks;
            if self.prefault.is_done(c) || !self.prefault.claim(c) {
                continue;
            }
            let at = c * PREFAULT_CHUNK;
            let len = PREFAULT_CHUNK.min(self.geo.data_len - at) as usize;
            // `[data + at, data + at + len)` lies inside the first mapping
            // of the data area (at < data_len, at + len <= data_len), which
            // this value owns and keeps mapped; populating the page tables
            // changes neither the mapping nor a byte of it. Best effort: a
            // kernel without MADV_POPULATE_* (before 5.14) or a file
            // truncated under us reports an error (never SIGBUS) and the
            // pages fault in as used.
            // SAFETY: as argued just above.
            let _ = unsafe {
                rustix::mm::madvise(self.map.data().add(at as usize).cast(), len, advice)
            };
        }
    }

    /// The ring's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The validated geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Whether the file was truncated under us (everything reads as zero).
    pub fn truncated(&self) -> bool {
        self.map.truncated()
    }

    /// Owner, group, mode and length of the file when it was opened.
    pub fn file_info(&self) -> shm::FileInfo {
        self.file
    }

    /// The open ring file (for `fstat`, `flock` and the like; it is a
    /// regular file, so it does not signal data: use
    /// [`Consumer::auto_doorbell`](super::Consumer::auto_doorbell) for that).
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self._fd.as_fd()
    }

    /// Whether this mapping may be written.
    pub fn writable(&self) -> bool {
        self.map.access() == Access::ReadWrite
    }

    fn at<T>(&self, off: usize) -> &T {
        debug_assert!(off + std::mem::size_of::<T>() <= self.map.head_len());
        // Every caller passes a fixed offset from `layout` whose type is
        // asserted there to fit before DESC_OFF (≤ head_len); the mapping is
        // page aligned so the offset's alignment is the type's; these types
        // are made of atomics (any bits valid, shared access sound) and the
        // mapping lives as long as `self`. After a truncation the range is
        // remapped to zeros, still valid.
        // SAFETY: as argued just above.
        unsafe { &*self.map.head().add(off).cast::<T>() }
    }

    /// Producer line.
    pub fn producer(&self) -> &ProducerLine {
        self.at(PRODUCER_OFF)
    }

    /// Control line.
    pub fn control(&self) -> &ControlLine {
        self.at(CONTROL_OFF)
    }

    /// MRP shared line.
    pub fn shared(&self) -> &SharedLine {
        self.at(SHARED_OFF)
    }

    /// Consumer slot `i` (`i < MAX_CONSUMERS`).
    pub fn slot(&self, i: usize) -> &ConsumerSlot {
        assert!(i < MAX_CONSUMERS);
        self.at(SLOTS_OFF + i * std::mem::size_of::<ConsumerSlot>())
    }

    /// Source entry `i` (`i < MAX_SOURCES`). A raw pointer, never a
    /// reference: `Source` has plain fields that the producer writes (and a
    /// hostile peer may scribble on) while others read them. Its address is
    /// inside the header mapping, which lives as long as `self`.
    pub fn source(&self, i: usize) -> *mut Source {
        assert!(i < MAX_SOURCES);
        let off = SOURCES_OFF + i * std::mem::size_of::<Source>();
        debug_assert!(off + std::mem::size_of::<Source>() <= self.map.head_len());
        // SAFETY: `off` is a fixed offset inside the header part (asserted
        // in `layout` to lie before DESC_OFF ≤ head_len), so the result
        // stays inside the mapping.
        unsafe { self.map.head().add(off).cast::<Source>() }
    }

    /// The id stored in source entry `i` (0: unused).
    pub fn source_id(&self, i: usize) -> &crate::sync::AtomicU64 {
        // SAFETY: `source(i)` points to a live, aligned `Source` in the
        // mapping (see there); `ring_id` is an atomic, so a shared reference
        // to just that field is sound while others write it.
        unsafe { &*std::ptr::addr_of!((*self.source(i)).ring_id) }
    }

    /// Pointer to descriptor entry of position `pos`.
    pub fn desc(&self, pos: u64) -> *mut RichPtr {
        let i = (pos & (self.geo.desc_len - 1)) as usize;
        // i < desc_len, and the descriptor ring occupies desc_len entries
        // from DESC_OFF inside the header part (Geometry::new sized it).
        // SAFETY: as argued just above.
        unsafe {
            self.map
                .head()
                .add(DESC_OFF as usize)
                .cast::<RichPtr>()
                .add(i)
        }
    }

    /// Pointer to data byte at position `pos`; the `data_len` bytes after it
    /// are mapped (the data area is mapped twice). For an attached ring end
    /// of a large ring, also pre-faults the page tables ahead of `pos` (see
    /// `populate`).
    #[inline]
    pub fn data(&self, pos: u64) -> *mut u8 {
        debug_assert!(self.geo.data_len > 0);
        let i = (pos & (self.geo.data_len - 1)) as usize;
        self.prefault_ahead(i as u64);
        // i < data_len and the double mapping spans 2 × data_len.
        // SAFETY: as argued just above.
        unsafe { self.map.data().add(i) }
    }

    /// Copy out a source entry's ring id and name (validated UTF-8 name).
    pub fn read_source(&self, i: usize) -> Option<(u64, String)> {
        let s = self.source(i);
        // SYNC: Acquire pairs with the Release store of the id in
        // `register_source`, after the name was written.
        let id = self.source_id(i).load(crate::sync::Ordering::Acquire);
        if id == 0 {
            return None;
        }
        // The entry lies inside the header at a fixed offset (`source`); its
        // plain fields are copied out through raw pointers with volatile
        // reads (any bytes are valid values) and validated below.
        // SAFETY: as argued just above.
        let (len, raw) = unsafe {
            (
                std::ptr::addr_of!((*s).name_len).read_volatile() as usize,
                std::ptr::addr_of!((*s).name).read_volatile(),
            )
        };
        let name = std::str::from_utf8(raw.get(..len)?).ok()?;
        shm::valid_name(name).then(|| (id, name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{Consumer, Layout, Options, Producer, Start, Wait};

    /// Resident bytes of the mapping of this process that contains `addr`
    /// (the `Rss` of its `/proc/self/smaps` entry).
    fn rss_at(addr: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_once(' ').map_or(line, |(r, _)| r);
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = (a..b).contains(&addr);
                    continue;
                }
            }
            if let Some(kb) = line.strip_prefix("Rss:").filter(|_| inside) {
                let kb = kb.trim().trim_end_matches("kB").trim();
                return kb.parse::<u64>().expect("Rss in kB") << 10;
            }
        }
        panic!("no mapping contains {addr:#x}");
    }

    /// Issue 34: attaching to a fresh 128 MiB ring maps (pre-faults) none
    /// of its data area; using it maps what is used plus the window ahead
    /// ([`PREFAULT_AHEAD`]), not the whole ring (it used to be 128 MiB
    /// resident in every process attached).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "ring: a /dev/shm file mapped shared, twice; not in Miri"
    )]
    fn attaching_to_a_large_ring_maps_what_is_used_not_the_whole_ring() {
        let name = format!("zcio-prefault-{}", std::process::id());
        let _ = crate::ring::unlink(&name);
        let map = Options::new()
            .layout(Layout::Variable)
            .size(128 << 20)
            .create(&name)
            .unwrap();
        let other = RingMap::open(&name, true).unwrap();
        let _ = crate::ring::unlink(&name);
        let mut prod = Producer::attach(map.clone()).unwrap();
        let mut cons = Consumer::attach(other.clone(), Start::Oldest).unwrap();
        let (w, r) = (map.map.data() as usize, other.map.data() as usize);
        // The header shares the data area's first mapping: allow for it.
        let slack = map.geometry().head_len + (1 << 20);
        let (rw, rr) = (rss_at(w), rss_at(r));
        assert!(
            rw <= slack && rr <= slack,
            "after attach: producer {rw} B, consumer {rr} B of a 128 MiB ring resident"
        );
        prod.write_tagged(&[7u8; 65536], 1, Wait::Forever).unwrap();
        let mut buf = vec![0u8; 65536];
        assert_eq!(
            cons.read_timeout(&mut buf, std::time::Duration::from_secs(10)),
            Ok(65536)
        );
        let window = PREFAULT_AHEAD..=PREFAULT_AHEAD + PREFAULT_CHUNK + slack;
        let (rw, rr) = (rss_at(w), rss_at(r));
        assert!(
            window.contains(&rw) && window.contains(&rr),
            "after one 64 KiB block: producer {rw} B, consumer {rr} B resident (want {window:?}: the window ahead, pre-faulted)"
        );
    }
}
