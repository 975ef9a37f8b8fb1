//! Fbufs: immutable buffers in shared regions, and their writable
//! precursor `FbufMut`.
//!
//! An `FbufMut` is a reserved, exclusively owned range that only its
//! originator can write; `freeze` turns it into an `Fbuf`, which Rust lets
//! nobody write. Dropping the last handle returns the range to its pool, or
//! (for a buffer received from a peer) sends the peer a deallocation notice.

use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering as LocalOrdering};
use std::sync::Arc;

use crate::buf::pool_inner::PoolInner;
use crate::region::{Region, RegionError};
use crate::view::View;

/// Where a received buffer's release is reported (implemented by channels).
pub trait ReleaseSink: Send + Sync {
    /// The last local reference to the slice with `token` was dropped.
    fn release(&self, token: u64);
    /// The last local reference to the slice with `token` was dropped, but
    /// this process passed the slice on to a peer that ended without
    /// releasing it: the originator must never reuse the memory.
    fn retire(&self, token: u64);
    /// The region `region_id` (received through this sink's channel) is
    /// about to be passed on to another process: warn its originator first,
    /// waiting at most `timeout`. `false`: the warning could not be
    /// delivered in time and the region must not be passed on.
    fn escaped(&self, region_id: u64, timeout: std::time::Duration) -> bool;
    /// [`ReleaseSink::release`], and keep the allocation `core` of the
    /// released slice (spent: its backing and region already let go) for
    /// the next slice received through this sink (or drop it if enough are
    /// kept) — the last handle's drop of a received slice, in one step.
    fn release_recycle(&self, token: u64, core: Arc<BufCore>);
}

/// The owner of pages lent out by reference that are not pool pages (an
/// arena of the semantics layer): told when the last handle of a lent
/// range is gone, here and (through the notice) in the peer.
pub trait LentPages: Send + Sync {
    /// Every reference to `pages` pages starting at file page `first_page`
    /// of the owner's region was dropped. `retired`: a peer may still read
    /// them (see `Fbuf::retire`); the owner must never reuse them.
    fn returned(&self, first_page: u32, pages: u32, retired: bool);
}

/// What happens when a buffer's last handle is dropped.
pub(crate) enum Backing {
    /// Pages of a pool chunk: returned to the pool.
    Pooled {
        pool: Arc<PoolInner<BufCore>>,
        chunk: u32,
        first_page: u32,
        pages: u32,
    },
    /// A whole single-use region: unmapped and closed with it.
    SingleUse,
    /// A slice received from a peer: a notice goes back to it.
    Foreign {
        sink: Arc<dyn ReleaseSink>,
        token: u64,
    },
    /// Pages of an owner that lends them in place (an arena): the owner
    /// is told, and decides when the pages may change again.
    Lent {
        owner: Arc<dyn LentPages>,
        first_page: u32,
        pages: u32,
    },
    /// Already released: a recycled core waiting for its next slice.
    Spent,
}

/// The shared state behind an `Fbuf`.
pub struct BufCore {
    pub(crate) region: Arc<Region>,
    /// Byte offset of the buffer in the region.
    pub(crate) offset: usize,
    /// Length in bytes (`offset + len <= region.len()`, established by
    /// every constructor).
    pub(crate) len: usize,
    pub(crate) backing: Backing,
    /// Set when a peer this buffer was lent to ended without releasing it:
    /// a process it forwarded the buffer to may still read it, so the
    /// pages must never be reused (see [`Fbuf::retire`]). Process-local;
    /// the last handle's drop reads it (the `Arc` drop orders the store).
    pub(crate) retired: AtomicBool,
    /// The caller declared the peer this buffer came from trusted not to
    /// write it once sent (`unsafe` opt-in: `Channel::trust_peer`).
    pub(crate) trusted: bool,
}

impl Drop for BufCore {
    fn drop(&mut self) {
        self.release_backing();
    }
}

impl BufCore {
    /// Do what the last handle's drop must do (return pool pages, retire
    /// them, send the notice), once: the backing becomes `Spent`.
    fn release_backing(&mut self) {
        let retired = self.retired.load(LocalOrdering::Relaxed);
        match std::mem::replace(&mut self.backing, Backing::Spent) {
            Backing::Pooled {
                pool,
                chunk,
                first_page,
                pages,
            } if retired => pool.retire(chunk, first_page, pages),
            Backing::Pooled {
                pool,
                chunk,
                first_page,
                pages,
            } => pool.free(chunk, first_page, pages),
            // The region is unmapped with the core; its memfd lives on in
            // whoever still maps it, and is never reused by us anyway.
            Backing::SingleUse | Backing::Spent => {}
            Backing::Lent {
                owner,
                first_page,
                pages,
            } => owner.returned(first_page, pages, retired),
            Backing::Foreign { sink, token } if retired => sink.retire(token),
            Backing::Foreign { sink, token } => sink.release(token),
        }
    }

    fn ptr(&self) -> *mut u8 {
        // Offset <= region.len() (constructor invariant), so the
        // result stays inside (or one past) the region's mapping.
        // SAFETY: as argued just above.
        unsafe { self.region.base().add(self.offset) }
    }
}

/// An immutable buffer in a shared region. Cheap to clone (reference
/// counted); the memory is freed when every clone — here and in every peer
/// it was sent to — is gone.
///
/// For a *volatile* buffer received from a peer, the originator keeps its
/// writable mapping, so a buggy or hostile originator could still change the
/// bytes: use [`Fbuf::secure`] before validating data you must not see
/// change.
#[derive(Clone)]
pub struct Fbuf {
    /// Taken out only in `Drop` (see there); always valid otherwise.
    pub(crate) core: ManuallyDrop<Arc<BufCore>>,
}

impl Fbuf {
    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.core.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.core.len == 0
    }

    /// The bytes, read in place through a [`View`]: zero-copy, and sound
    /// even if the originator writes them meanwhile. `view().as_slice()`
    /// gives a plain `&[u8]` when nobody can change the bytes (see
    /// [`Fbuf::is_immutable`]).
    #[inline]
    pub fn view(&self) -> View<'_> {
        // The range [ptr, ptr+len) lies in the region mapping, which lives
        // as long as `core.region`, i.e. as long as `&self`. Nobody in this
        // process writes it (an `Fbuf` exists only after `FbufMut::freeze`
        // consumed the only writer, or for regions mapped read-only), and
        // `is_immutable` is true only when no other process can either.
        // SAFETY: as argued just above — the contract of `View::new`.
        unsafe { View::new(self.core.ptr(), self.core.len, self.is_immutable()) }
    }

    /// Whether nobody can change these bytes while this handle lives: the
    /// buffer is kernel-sealed ([`Fbuf::is_secured`]), this process made it
    /// (a frozen buffer of ours: only we could write the region, and
    /// freezing gave that up), or it came from a peer the caller declared
    /// trusted (`unsafe` [`Channel::trust_peer`](crate::Channel::trust_peer)).
    /// A *volatile* buffer received from a peer is not immutable: its
    /// originator keeps a writable mapping.
    #[inline]
    pub fn is_immutable(&self) -> bool {
        self.core.trusted
            || self.core.region.is_secured()
            || self.core.region.ownership() == crate::region::Ownership::Owned
    }

    /// The bytes as a plain slice, whoever may write them.
    ///
    /// # Safety
    /// As [`View::as_slice_unchecked`]: no process may write the bytes while
    /// the slice is in use (a trusted originator that leaves sent buffers
    /// alone). Prefer [`Fbuf::view`], or [`Fbuf::secure`] for bytes you
    /// must validate.
    pub unsafe fn as_slice_unchecked(&self) -> &[u8] {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.view().as_slice_unchecked() }
    }

    /// A private copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.view().to_vec()
    }

    /// Base pointer.
    pub fn as_ptr(&self) -> *const u8 {
        self.core.ptr()
    }

    /// Whether the kernel guarantees no domain can change these bytes
    /// (`F_SEAL_WRITE`, verified by this process).
    pub fn is_secured(&self) -> bool {
        self.core.region.is_secured()
    }

    /// The channel a received buffer came from.
    pub(crate) fn foreign_sink(&self) -> Option<&Arc<dyn ReleaseSink>> {
        match &self.core.backing {
            Backing::Foreign { sink, .. } => Some(sink),
            _ => None,
        }
    }

    /// Whether this buffer was received from another process.
    pub fn is_foreign(&self) -> bool {
        matches!(self.core.backing, Backing::Foreign { .. })
    }

    /// Whether this is a buffer of this process's own making that nothing
    /// else constrains: a pool's or a single-use one, not sealed, not
    /// received, not pages an arena lends in place.
    pub(crate) fn is_own_plain(&self) -> bool {
        matches!(
            self.core.backing,
            Backing::Pooled { .. } | Backing::SingleUse
        ) && self.core.region.ownership() == crate::region::Ownership::Owned
            && !self.core.region.is_secured()
    }

    /// The region this buffer lives in.
    pub fn region(&self) -> &Arc<Region> {
        &self.core.region
    }

    /// Byte offset of this buffer in its region.
    pub fn region_offset(&self) -> usize {
        self.core.offset
    }

    /// A view guaranteed immutable: the buffer itself when the kernel
    /// guarantees it (sealed), otherwise a private copy.
    pub fn secure(&self) -> SecureView {
        if self.is_secured() {
            SecureView::Sealed(self.clone())
        } else {
            SecureView::Copied(self.to_vec().into_boxed_slice())
        }
    }

    /// The pool this buffer belongs to, for buffers of this process's pools.
    pub fn pool_id(&self) -> Option<u64> {
        match &self.core.backing {
            Backing::Pooled { pool, .. } => Some(pool.id()),
            _ => None,
        }
    }

    pub(crate) fn pool_inner(&self) -> Option<&Arc<PoolInner<BufCore>>> {
        match &self.core.backing {
            Backing::Pooled { pool, .. } => Some(pool),
            _ => None,
        }
    }

    /// Whether two handles share the same underlying buffer.
    pub fn ptr_eq(&self, other: &Fbuf) -> bool {
        Arc::ptr_eq(&*self.core, &*other.core)
    }

    pub(crate) fn from_core(core: BufCore) -> Self {
        Self {
            core: ManuallyDrop::new(Arc::new(core)),
        }
    }

    /// `len` bytes at byte `offset` of `region`, lent in place by `owner`
    /// (told through [`LentPages::returned`] when the last handle, here or
    /// in a peer, is gone). `offset` is a *file* offset: the owner may map
    /// its pages elsewhere in its own address space, so such a buffer is
    /// only ever sent, never read locally through [`Fbuf::view`].
    /// `None` unless the range lies inside the region.
    pub fn lent(
        region: Arc<Region>,
        offset: usize,
        len: usize,
        owner: Arc<dyn LentPages>,
    ) -> Option<Self> {
        let ps = crate::sys::page_size();
        if offset.checked_add(len)? > region.len() || len == 0 {
            return None;
        }
        let first = offset / ps;
        let last = (offset + len).div_ceil(ps);
        Some(Self::from_core(BufCore {
            region,
            offset,
            len,
            backing: Backing::Lent {
                owner,
                first_page: u32::try_from(first).ok()?,
                pages: u32::try_from(last - first).ok()?,
            },
            retired: AtomicBool::new(false),
            trusted: false,
        }))
    }

    /// A slice received from a peer (the receive path's constructor). Its
    /// core reuses `spare`, the allocation of a slice received on the same
    /// channel and dropped earlier (`ReleaseSink::release_recycle`), when
    /// the channel has one, so a steady stream of receives (and a
    /// forwarder's receive → send → notice loop) allocates nothing per
    /// message.
    pub(crate) fn received(
        home: Home,
        offset: usize,
        len: usize,
        sink: Arc<dyn ReleaseSink>,
        token: u64,
        trusted: bool,
    ) -> Self {
        let backing = Backing::Foreign { sink, token };
        let (mut arc, region) = match home {
            Home::Spare(arc) => (arc, None),
            Home::Region(region, Some(arc)) => (arc, Some(region)),
            Home::Region(region, None) => {
                return Self::fresh_received(region, offset, len, backing, trusted)
            }
        };
        let Some(slot) = Arc::get_mut(&mut arc) else {
            // Shared after all (never, by construction): a fresh core.
            let region = region.unwrap_or_else(|| arc.region.clone());
            return Self::fresh_received(region, offset, len, backing, trusted);
        };
        // The old value is a spent core (`Spent` backing); its region is
        // replaced only when it is not the slice's.
        if let Some(r) = region {
            slot.region = r;
        }
        slot.offset = offset;
        slot.len = len;
        slot.backing = backing;
        slot.retired = AtomicBool::new(false);
        slot.trusted = trusted;
        Self {
            core: ManuallyDrop::new(arc),
        }
    }

    fn fresh_received(
        region: Arc<Region>,
        offset: usize,
        len: usize,
        backing: Backing,
        trusted: bool,
    ) -> Self {
        Self::from_core(BufCore {
            region,
            offset,
            len,
            backing,
            retired: AtomicBool::new(false),
            trusted,
        })
    }

    /// Never reuse this buffer's memory: when its last handle goes, pool
    /// pages are retired instead of freed (counted in
    /// [`PoolStats`](crate::PoolStats)), and a buffer received from a peer
    /// is reported to its originator as retired rather than released.
    ///
    /// Called when a peer we lent the buffer to ended without releasing it:
    /// it may have forwarded the buffer to a process we cannot see, which
    /// may still be reading it.
    pub(crate) fn retire(&self) {
        self.core.retired.store(true, LocalOrdering::Relaxed);
    }
}

/// Where a received slice lives, for [`Fbuf::received`]: the region of a
/// spare core (a slice received on the same channel and dropped, which
/// keeps its region), reused as it is, or a region and perhaps a spare
/// core of another region to reuse. Reusing the spare's region costs no
/// reference counting, where a fresh `Arc` clone and the old one's drop
/// cost two atomic read-modify-writes per message.
pub(crate) enum Home {
    /// The spare core's own region is the slice's.
    Spare(Arc<BufCore>),
    /// The slice's region, and a spare core to reuse if there is one.
    Region(Arc<Region>, Option<Arc<BufCore>>),
}

impl Drop for Fbuf {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and nothing uses `self.core` after it;
        // this is the only place the `ManuallyDrop` is emptied.
        let mut arc = unsafe { ManuallyDrop::take(&mut self.core) };
        // The last handle of a received slice: release it now (the notice
        // goes out exactly as it would from `BufCore::drop`) and keep the
        // allocation for this thread's next received slice. A handle that
        // is not the last (a forwarder's, whose ledger keeps another) is
        // told by one plain load, without `get_mut`'s read-modify-write;
        // should the other handle go meanwhile, the drop below is the last
        // and `BufCore::drop` releases the buffer all the same.
        if Arc::strong_count(&arc) != 1 {
            drop(arc);
            return;
        }
        if let Some(core) = Arc::get_mut(&mut arc) {
            // The last handle of a pool buffer: its pages and this
            // allocation go back to the pool together (no free here, no
            // allocation at the next `alloc`).
            if matches!(core.backing, Backing::Pooled { .. })
                && !core.retired.load(LocalOrdering::Relaxed)
            {
                if let Backing::Pooled {
                    pool,
                    chunk,
                    first_page,
                    pages,
                } = std::mem::replace(&mut core.backing, Backing::Spent)
                {
                    pool.free_recycle(chunk, first_page, pages, arc);
                    return;
                }
            }
            if matches!(core.backing, Backing::Foreign { .. })
                && !core.region.is_single_use()
                && !core.retired.load(LocalOrdering::Relaxed)
            {
                if let Backing::Foreign { sink, token } =
                    std::mem::replace(&mut core.backing, Backing::Spent)
                {
                    // The spare keeps pointing at the region: one the peer
                    // announced on this channel, which keeps it mapped for
                    // its whole life anyway (single-use regions, unmapped
                    // with their last slice, are never recycled).
                    sink.release_recycle(token, arc);
                    return;
                }
            }
        }
        drop(arc);
    }
}

impl fmt::Debug for Fbuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fbuf")
            .field("region", &self.core.region.id())
            .field("offset", &self.core.offset)
            .field("len", &self.core.len)
            .field("secured", &self.is_secured())
            .field("foreign", &self.is_foreign())
            .finish()
    }
}

/// Bytes guaranteed not to change: see [`Fbuf::secure`].
#[derive(Debug, Clone)]
pub enum SecureView {
    /// Kernel-sealed buffer, read in place (no copy was made).
    Sealed(Fbuf),
    /// A private copy of a volatile buffer.
    Copied(Box<[u8]>),
}

impl SecureView {
    /// Whether a copy was needed.
    pub fn was_copied(&self) -> bool {
        matches!(self, SecureView::Copied(_))
    }
}

impl std::ops::Deref for SecureView {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            // A sealed buffer (`F_SEAL_WRITE`, verified by this process):
            // no process can ever write it, so its view is immutable.
            SecureView::Sealed(b) => b.view().as_slice().unwrap_or_default(),
            SecureView::Copied(v) => v,
        }
    }
}

/// A buffer being filled by its originator: writable, not yet shareable.
pub struct FbufMut {
    /// Never shared while an `FbufMut` exists (every constructor makes a
    /// fresh or recycled core only this handle points to); an `Arc` so
    /// that `freeze` hands the same allocation to the `Fbuf`, and a pool
    /// can recycle it when the last handle is gone.
    core: Arc<BufCore>,
    secure_on_freeze: bool,
}

/// `freeze` could not seal a secured buffer; the buffer is returned frozen
/// but volatile.
#[derive(Debug)]
#[non_exhaustive]
pub struct FreezeError {
    /// What failed.
    pub error: RegionError,
    /// The buffer, immutable to Rust but not kernel-sealed.
    pub buf: Fbuf,
}

impl fmt::Display for FreezeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not secure buffer: {}", self.error)
    }
}

impl std::error::Error for FreezeError {}

impl FbufMut {
    /// # Contract
    /// `core.region` is owned and writable by this process, the range is
    /// exclusively ours, and `offset + len <= region.len()`.
    pub(crate) fn from_core(core: BufCore, secure_on_freeze: bool) -> Self {
        Self::from_arc(Arc::new(core), secure_on_freeze)
    }

    /// As [`FbufMut::from_core`], for a core in an allocation nothing else
    /// points to (a recycled one).
    pub(crate) fn from_arc(core: Arc<BufCore>, secure_on_freeze: bool) -> Self {
        debug_assert!(Arc::strong_count(&core) == 1 && Arc::weak_count(&core) == 0);
        debug_assert!(core.region.is_writable());
        debug_assert!(core.offset + core.len <= core.region.len());
        Self {
            core,
            secure_on_freeze,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.core.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.core.len == 0
    }

    /// The bytes, writable. A fresh buffer holds zeros or bytes this
    /// process wrote earlier into the same pool (never another process's).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // `from_core`'s contract: the range is inside a writable
        // mapping of a region only this process can write (F_SEAL_FUTURE_WRITE
        // stops everyone else), and `&mut self` makes this the only handle.
        // SAFETY: as argued just above.
        unsafe { std::slice::from_raw_parts_mut(self.core.ptr(), self.core.len) }
    }

    /// The bytes, read-only.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as for as_mut_slice, with a shared borrow.
        unsafe { std::slice::from_raw_parts(self.core.ptr(), self.core.len) }
    }

    /// Byte offset of this buffer in its region.
    pub fn region_offset(&self) -> usize {
        self.core.offset
    }

    /// Base pointer for writing (valid for `len()` bytes while `self` lives).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.core.ptr()
    }

    /// Shorten the buffer to `len` bytes (no effect if `len >= self.len()`).
    /// The pages stay reserved until the buffer is freed.
    pub fn truncate(&mut self, len: usize) {
        // Always unique (see the field); a shared core is left whole.
        if let Some(c) = Arc::get_mut(&mut self.core) {
            c.len = c.len.min(len);
        }
    }

    /// Whether `freeze` will seal the buffer (`F_SEAL_WRITE`).
    pub fn is_secured_on_freeze(&self) -> bool {
        self.secure_on_freeze
    }

    /// Make the buffer immutable and shareable. Secured buffers are sealed
    /// here: the writable mapping is dropped and `F_SEAL_WRITE` applied.
    pub fn freeze(self) -> Result<Fbuf, FreezeError> {
        let Self {
            mut core,
            secure_on_freeze,
        } = self;
        if !secure_on_freeze {
            return Ok(Fbuf {
                core: ManuallyDrop::new(core),
            });
        }
        let res = match Arc::get_mut(&mut core).and_then(|c| Arc::get_mut(&mut c.region)) {
            Some(region) => region.secure(),
            None => Err(RegionError::Os {
                op: "secure (region shared)",
                errno: rustix::io::Errno::BUSY,
            }),
        };
        let buf = Fbuf {
            core: ManuallyDrop::new(core),
        };
        match res {
            Ok(()) => Ok(buf),
            Err(error) => Err(FreezeError { error, buf }),
        }
    }
}

impl fmt::Debug for FbufMut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FbufMut")
            .field("region", &self.core.region.id())
            .field("offset", &self.core.offset)
            .field("len", &self.core.len)
            .field("secure_on_freeze", &self.secure_on_freeze)
            .finish()
    }
}
