//! `View`: bytes another process may write (see the type's docs).

use crate::copy::copy_volatile;
use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsFd;
use std::ptr::NonNull;

/// Bytes in shared memory, possibly being written by another process while
/// we read them.
///
///
/// A Rust reference `&[u8]` promises that the bytes do not change while it
/// lives, and the compiler relies on that promise: it may read such bytes
/// twice or once as it likes, so validation that depends on *one* read of a
/// value ("copy out, then check") could silently be undone. Memory a peer
/// can write — a volatile buffer whose originator keeps its writable
/// mapping, a ring any attached process may scribble on — must therefore
/// never sit behind such a reference.
///
/// [`View`] is the one way zcio lets you read such bytes. It is a pointer
/// and a length (it is `Copy`, like a slice), and every method reads through
/// raw pointers with volatile loads, so each byte is read exactly once, when
/// you ask for it — the rule used by shared-memory seqlocks such as
/// crossbeam's `AtomicCell` fallback. Reading in place stays zero-copy:
/// [`View::get`], [`View::read_u64_le`], [`View::words_le`] and
/// [`View::position`] look at the bytes where they are; [`View::copy_to_slice`],
/// [`View::read_at`] and [`View::to_vec`] copy them out into memory of yours,
/// after which they cannot change; [`View::write_to`] hands them to the
/// kernel (`write(2)`), which reads them itself.
///
/// Where the bytes *cannot* change — a kernel-sealed buffer, a buffer this
/// process made, a private copy, or a channel the caller declared trusted
/// with an `unsafe` opt-in — the view knows it, and [`View::as_slice`] gives
/// the plain `&[u8]` at no cost. A caller who trusts the writer anyway can
/// take [`View::as_slice_unchecked`] (`unsafe`, with its contract spelled
/// out).
///
/// ```
/// use zcio::{Pool, PoolConfig};
///
/// let pool = Pool::new(PoolConfig::named("doc-view"));
/// let mut b = pool.try_alloc(8).unwrap();
/// b.as_mut_slice().copy_from_slice(b"abcdefgh");
/// let buf = b.freeze().unwrap();
/// let v = buf.view();
/// assert_eq!(v.get(2), Some(b'c'));
/// assert_eq!(v.read_u64_le(0), Some(u64::from_le_bytes(*b"abcdefgh")));
/// let mut out = [0u8; 3];
/// assert_eq!(v.read_at(5, &mut out), 3);
/// assert_eq!(&out, b"fgh");
/// // Our own buffer: nobody else can write it, so a plain slice is offered.
/// assert_eq!(v.as_slice(), Some(&b"abcdefgh"[..]));
/// ```
#[derive(Clone, Copy)]
pub struct View<'a> {
    ptr: NonNull<u8>,
    len: usize,
    /// Nobody can change these bytes while `'a` lasts (sealed, ours, or
    /// declared trusted by an `unsafe` opt-in).
    immutable: bool,
    _life: PhantomData<&'a [u8]>,
}

// SAFETY: a `View` only reads, through volatile loads, memory that stays
// mapped for `'a` (constructor contract); sharing or sending that ability
// across threads is as safe as sharing a `&[u8]` to mapped memory.
unsafe impl Send for View<'_> {}
// SAFETY: as for `Send`: no method writes through the pointer.
unsafe impl Sync for View<'_> {}

impl<'a> View<'a> {
    /// A view of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must be mapped readable for all of `'a` (another
    /// process may write it). If `immutable` is true, nobody — in this
    /// process or any other — may write those bytes during `'a`.
    #[inline]
    pub unsafe fn new(ptr: *const u8, len: usize, immutable: bool) -> Self {
        Self {
            ptr: NonNull::new(ptr.cast_mut()).unwrap_or(NonNull::dangling()),
            len,
            immutable,
            _life: PhantomData,
        }
    }

    /// A view of `len` bytes at `ptr` that someone else may write while
    /// it lives (memory of unknown provenance: a buffer handed in through
    /// the C or Python frontends may be a peer's shared mapping). It is
    /// read like any volatile view: through copies, never as a `&[u8]`.
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must stay mapped readable for all of `'a`.
    #[inline]
    pub unsafe fn from_raw(ptr: *const u8, len: usize) -> Self {
        // SAFETY: the caller guarantees the mapping for 'a; `immutable`
        // is false, so nothing relies on the bytes staying unchanged.
        unsafe { Self::new(ptr, len, false) }
    }

    /// A view of bytes this process owns; always immutable.
    #[inline]
    pub fn from_slice(bytes: &'a [u8]) -> Self {
        // SAFETY: a shared borrow of `bytes` for 'a guarantees both
        // conditions of `new`.
        unsafe { Self::new(bytes.as_ptr(), bytes.len(), true) }
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the bytes are guaranteed not to change while the view lives
    /// (then [`View::as_slice`] returns them).
    #[inline]
    pub fn is_immutable(&self) -> bool {
        self.immutable
    }

    /// The address of the first byte (for `iovec`s, `io_uring`, `mincore`
    /// …). Reading through it is subject to the same rules as this type.
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The bytes as a plain slice, when nobody can change them while the
    /// view lives (kernel-sealed, made by this process, or trusted through
    /// an `unsafe` opt-in); `None` for bytes a peer may still write.
    #[inline]
    pub fn as_slice(&self) -> Option<&'a [u8]> {
        // SAFETY: `immutable` means nobody writes the bytes during 'a
        // (constructor contract), which is all `as_slice_unchecked` needs.
        self.immutable.then(|| unsafe { self.as_slice_unchecked() })
    }

    /// The bytes as a plain slice, whoever may write them.
    ///
    /// # Safety
    /// No process may write these bytes while the returned slice (or
    /// anything derived from it) is in use: the compiler assumes they do not
    /// change, so a concurrent write is undefined behaviour, not merely a
    /// torn value. Only call this for a peer you trust to leave a buffer
    /// alone once sent (the fbufs *volatile* contract) — and never to
    /// validate data whose check must not be undone by a later write.
    #[inline]
    pub unsafe fn as_slice_unchecked(&self) -> &'a [u8] {
        // SAFETY: mapped and readable for 'a (constructor contract); the
        // caller guarantees the bytes do not change while the slice lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The sub-view `[start, start + len)`; `None` if out of range.
    #[inline]
    pub fn slice(&self, start: usize, len: usize) -> Option<View<'a>> {
        let end = start.checked_add(len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: inside our own range (checked above), so the contract of
        // `new` carries over unchanged.
        Some(unsafe { Self::new(self.ptr.as_ptr().add(start), len, self.immutable) })
    }

    /// Byte `i`, read once; `None` past the end.
    #[inline]
    pub fn get(&self, i: usize) -> Option<u8> {
        // SAFETY: `i < len`, so the byte is inside the mapped range.
        (i < self.len).then(|| unsafe { self.ptr.as_ptr().add(i).read_volatile() })
    }

    /// The little-endian `u64` at byte `off` (any alignment), read once;
    /// `None` if fewer than 8 bytes remain.
    #[inline]
    pub fn read_u64_le(&self, off: usize) -> Option<u64> {
        if off.checked_add(8)? > self.len {
            return None;
        }
        // SAFETY: `[off, off + 8)` is inside the mapped range (checked).
        let p = unsafe { self.ptr.as_ptr().add(off) };
        if (p as usize).is_multiple_of(8) {
            // The common case (page or word offsets): one volatile load.
            // SAFETY: in range (above) and 8-byte aligned (checked).
            return Some(u64::from_le(unsafe { p.cast::<u64>().read_volatile() }));
        }
        let mut w = [0u8; 8];
        self.read_at(off, &mut w);
        Some(u64::from_le_bytes(w))
    }

    /// Copy up to `dst.len()` bytes starting at `off` into `dst`; returns
    /// how many were copied (0 when `off >= len`). Each byte is read once.
    #[inline]
    pub fn read_at(&self, off: usize, dst: &mut [u8]) -> usize {
        if off >= self.len {
            return 0;
        }
        let n = dst.len().min(self.len - off);
        // SAFETY: `[off, off + n)` is inside the mapped range and `dst` is
        // ours with room for n; the source is read only through volatile
        // loads.
        unsafe { copy_volatile(self.ptr.as_ptr().add(off), dst.as_mut_ptr(), n) };
        n
    }

    /// Copy all bytes into `dst`, which must be exactly as long.
    ///
    /// # Panics
    /// If `dst.len() != self.len()` (a caller bug, as for
    /// `<[u8]>::copy_from_slice`).
    pub fn copy_to_slice(&self, dst: &mut [u8]) {
        assert_eq!(dst.len(), self.len, "copy_to_slice: length mismatch");
        self.read_at(0, dst);
    }

    /// A private copy: it cannot change after this returns.
    pub fn to_vec(&self) -> Vec<u8> {
        // Straight into the new allocation, without zeroing it first (a
        // second pass over the destination, as costly as the copy for
        // blocks beyond the caches).
        let mut v = Vec::with_capacity(self.len);
        // SAFETY: the source range is inside the mapping and read only
        // through volatile loads; the destination is `v`'s spare capacity
        // (room for `len` bytes, ours, not overlapping the mapping), written
        // through a raw pointer.
        unsafe { copy_volatile(self.ptr.as_ptr(), v.as_mut_ptr(), self.len) };
        // SAFETY: the copy initialised all `len` bytes.
        unsafe { v.set_len(self.len) };
        v
    }

    /// The bytes as little-endian `u64` words, read in place; a tail
    /// shorter than 8 bytes is padded with zeros. For checksums and scans
    /// over data you do not need to keep.
    pub fn words_le(&self) -> impl ExactSizeIterator<Item = u64> + Clone + std::fmt::Debug + 'a {
        WordsLe { view: *self, at: 0 }
    }

    /// Fold `f` over the bytes as little-endian `u64` words, read in place
    /// (a tail shorter than 8 bytes is padded with zeros): the same words
    /// as [`View::words_le`], in a tight loop of aligned volatile loads —
    /// for checksums and scans over large buffers.
    #[inline]
    pub fn fold_words_le<A>(&self, init: A, mut f: impl FnMut(A, u64) -> A) -> A {
        let base = self.ptr.as_ptr();
        if !(base as usize).is_multiple_of(8) {
            return self.words_le().fold(init, f);
        }
        let whole = self.len / 8;
        let mut acc = init;
        let words = base.cast::<u64>();
        for i in 0..whole {
            // SAFETY: `base` is 8-byte aligned (checked) and word `i` lies
            // inside `[0, len)` (i < len / 8).
            acc = f(acc, u64::from_le(unsafe { words.add(i).read_volatile() }));
        }
        let rest = self.len - whole * 8;
        if rest > 0 {
            let mut b = [0u8; 8];
            // SAFETY: the last `rest` bytes are inside `[0, len)`; `b` has
            // room for 8.
            unsafe { copy_volatile(base.add(whole * 8), b.as_mut_ptr(), rest) };
            acc = f(acc, u64::from_le_bytes(b));
        }
        acc
    }

    /// The bytes one by one, read in place.
    pub fn bytes(&self) -> impl Iterator<Item = u8> + 'a {
        let v = *self;
        // SAFETY: `i < len` for every index produced by the range.
        (0..v.len).map(move |i| unsafe { v.ptr.as_ptr().add(i).read_volatile() })
    }

    /// Index of the first byte equal to `b`, scanning in place.
    pub fn position(&self, b: u8) -> Option<usize> {
        match self.as_slice() {
            Some(s) => s.iter().position(|&x| x == b),
            None => self.bytes().position(|x| x == b),
        }
    }

    /// Write the bytes to `fd` with `write(2)` (the kernel reads them;
    /// nothing is copied in user space). Returns what `write` returned.
    pub fn write_to(&self, fd: impl AsFd) -> io::Result<usize> {
        let iov = [libc::iovec {
            iov_base: self.ptr.as_ptr().cast(),
            iov_len: self.len,
        }];
        crate::sys::io::writev_raw(fd.as_fd(), &iov)
    }
}

impl fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("View")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("immutable", &self.immutable)
            .finish()
    }
}

/// Iterator of [`View::words_le`].
#[derive(Clone, Debug)]
struct WordsLe<'a> {
    view: View<'a>,
    at: usize,
}

impl Iterator for WordsLe<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        if self.at >= self.view.len {
            return None;
        }
        let p = self.view.ptr.as_ptr();
        let left = self.view.len - self.at;
        let w = if left >= 8 && (p as usize + self.at).is_multiple_of(8) {
            // An aligned word: one volatile load.
            // SAFETY: the 8 bytes at `at` are inside `[0, len)` (left >= 8)
            // and aligned (checked), inside the mapping (View contract).
            u64::from_le(unsafe { p.add(self.at).cast::<u64>().read_volatile() })
        } else {
            let mut b = [0u8; 8];
            // SAFETY: `left.min(8)` bytes from `at` are inside `[0, len)`;
            // `b` has room for 8.
            unsafe { copy_volatile(p.add(self.at), b.as_mut_ptr(), left.min(8)) };
            u64::from_le_bytes(b)
        };
        self.at += 8;
        Some(w)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = (self.view.len.saturating_sub(self.at)).div_ceil(8);
        (n, Some(n))
    }
}

impl ExactSizeIterator for WordsLe<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_reads_in_place_and_copies_out() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1003).collect();
        let v = View::from_slice(&data);
        assert_eq!(v.len(), 1003);
        assert_eq!(v.get(1002), Some(data[1002]));
        assert_eq!(v.get(1003), None);
        assert_eq!(v.to_vec(), data);
        assert_eq!(v.position(7), Some(7));
        let mut out = [0u8; 10];
        assert_eq!(v.read_at(1000, &mut out), 3);
        assert_eq!(v.read_at(2000, &mut out), 0);
        assert_eq!(
            v.read_u64_le(3),
            Some(u64::from_le_bytes(data[3..11].try_into().unwrap()))
        );
        assert_eq!(v.read_u64_le(1000), None);
        let sub = v.slice(1, 16).unwrap();
        assert_eq!(sub.to_vec(), &data[1..17]);
        assert!(v.slice(1000, 4).is_none());
        let words: Vec<u64> = v.words_le().collect();
        assert_eq!(words.len(), 1003usize.div_ceil(8));
        let mut tail = [0u8; 8];
        tail[..3].copy_from_slice(&data[1000..]);
        assert_eq!(*words.last().unwrap(), u64::from_le_bytes(tail));
        let folded = v.fold_words_le(Vec::new(), |mut a, w| {
            a.push(w);
            a
        });
        assert_eq!(folded, words, "fold sees the same words");
        for (k, w) in words.iter().enumerate().take(125) {
            assert_eq!(
                *w,
                u64::from_le_bytes(data[8 * k..8 * k + 8].try_into().unwrap())
            );
        }
    }

    /// A view of memory it does not own (as of a peer's mapping): nothing
    /// is offered as a slice, every read goes through the pointer and sees
    /// the bytes as they are at that moment, on the aligned word paths and
    /// the unaligned ones alike.
    #[test]
    fn a_view_of_foreign_memory_reads_through_the_pointer_every_time() {
        // 8-byte aligned backing, so the aligned word paths are taken at
        // word offsets and the unaligned ones one byte further.
        let mut words = vec![0u64; 9];
        let base = words.as_mut_ptr().cast::<u8>();
        let len = 8 * 8 + 5;
        let write = |at: usize, b: u8| {
            assert!(at < 72);
            // SAFETY: inside the 72 bytes of `words`, written through the
            // raw pointer the views also read through (no reference to
            // the bytes is alive).
            unsafe { base.add(at).write_volatile(b) }
        };
        for i in 0..len {
            write(i, i as u8 + 1);
        }
        let expect: Vec<u8> = (1..=len as u8).collect();
        // SAFETY: `words` outlives the view and is only written through
        // `base`.
        let v = unsafe { View::from_raw(base, len) };
        assert!(!v.is_immutable());
        assert_eq!(v.as_slice(), None, "foreign bytes are never a slice");
        assert_eq!(v.to_vec(), expect);
        let word = |at: usize| u64::from_le_bytes(expect[at..at + 8].try_into().unwrap());
        assert_eq!(v.read_u64_le(0), Some(word(0)), "aligned");
        assert_eq!(v.read_u64_le(8), Some(word(8)), "aligned");
        assert_eq!(v.read_u64_le(9), Some(word(9)), "unaligned");
        assert_eq!(v.read_u64_le(len - 8), Some(word(len - 8)));
        assert_eq!(v.read_u64_le(len - 7), None);
        let mut tail = [0u8; 8];
        tail[..5].copy_from_slice(&expect[64..]);
        let all: Vec<u64> = v.words_le().collect();
        assert_eq!(all.len(), 9);
        assert_eq!(
            all[..8],
            (0..8).map(|k| word(8 * k)).collect::<Vec<_>>()[..]
        );
        assert_eq!(all[8], u64::from_le_bytes(tail));
        assert_eq!(
            v.fold_words_le(Vec::new(), |mut a, w| {
                a.push(w);
                a
            }),
            all
        );
        let shifted = v.slice(1, len - 1).unwrap();
        assert_eq!(shifted.words_le().next(), Some(word(1)));
        assert_eq!(
            shifted.fold_words_le(0u64, |a, w| a ^ w),
            shifted.words_le().fold(0, |a, w| a ^ w),
            "unaligned fold agrees"
        );
        assert_eq!(v.position(5), Some(4));
        assert_eq!(v.bytes().collect::<Vec<_>>(), expect);
        // The peer rewrites bytes: the next read sees them.
        write(4, 0xEE);
        write(9, 0xEF);
        assert_eq!(v.get(4), Some(0xEE));
        assert_eq!(v.position(0xEE), Some(4));
        assert_eq!(v.read_u64_le(0).map(|w| (w >> 32) as u8), Some(0xEE));
        assert_eq!(v.read_u64_le(9).map(|w| w as u8), Some(0xEF));
        let mut out = [0u8; 3];
        assert_eq!(v.slice(8, 3).unwrap().read_at(0, &mut out), 3);
        assert_eq!(out, [9, 0xEF, 11]);
        let mut whole = vec![0u8; len];
        v.copy_to_slice(&mut whole);
        assert_eq!(
            (whole[4], whole[9], whole[len - 1]),
            (0xEE, 0xEF, len as u8)
        );
        assert!(v.slice(len, 1).is_none());
        assert_eq!(v.slice(len, 0).map(|e| e.to_vec()), Some(vec![]));
        drop(words);
    }

    #[test]
    fn empty_views_read_nothing() {
        // SAFETY: zero bytes at a null pointer: nothing is ever read.
        let v = unsafe { View::from_raw(std::ptr::null(), 0) };
        assert!(v.is_empty());
        assert_eq!(v.to_vec(), Vec::<u8>::new());
        assert_eq!(
            (v.get(0), v.read_u64_le(0), v.position(0)),
            (None, None, None)
        );
        assert_eq!(v.words_le().count(), 0);
        assert_eq!(v.fold_words_le(0, |a, _| a + 1), 0);
        assert_eq!(v.read_at(0, &mut [0u8; 4]), 0);
        let e = View::from_slice(&[]);
        assert_eq!(e.as_slice(), Some(&[][..]));
        // SAFETY: no bytes: nobody can write them.
        assert_eq!(unsafe { v.as_slice_unchecked() }, &[] as &[u8]);
    }

    #[test]
    fn unaligned_views_give_the_same_words() {
        let data: Vec<u8> = (0..100u8).collect();
        let v = View::from_slice(&data[3..]);
        let w: Vec<u64> = v.words_le().collect();
        assert_eq!(w[0], u64::from_le_bytes(data[3..11].try_into().unwrap()));
    }
}
