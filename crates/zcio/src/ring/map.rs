//! A ring file opened and mapped: creation, attach-time validation and
//! typed access to the shared header parts.

use std::os::fd::{AsFd, OwnedFd};
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

/// An open, mapped, validated ring file.
pub struct RingMap {
    name: String,
    geo: Geometry,
    map: RingMapping,
    file: shm::FileInfo,
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

    /// Pre-fault this process's page tables for the data area (see
    /// `RingMapping::populate`): done by the producer (for writing) and each
    /// consumer (for reading) when they attach.
    pub(crate) fn populate(&self, write: bool) {
        self.map.populate(write);
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
    /// [`Consumer::readiness`](super::Consumer::readiness) for that).
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
    /// are mapped (the data area is mapped twice).
    pub fn data(&self, pos: u64) -> *mut u8 {
        debug_assert!(self.geo.data_len > 0);
        let i = (pos & (self.geo.data_len - 1)) as usize;
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
