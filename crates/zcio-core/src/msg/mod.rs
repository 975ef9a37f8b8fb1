//! Aggregates: a `Msg` is an immutable sequence of (fbuf, offset, len)
//! slices. Join, split, clip and header operations rearrange slice lists and
//! never touch payload bytes.

mod cursor;
mod interop;

use std::borrow::Cow;
use std::io::IoSlice;
use std::os::fd::AsFd;

use smallvec::SmallVec;
use thiserror::Error;

use crate::buf::Fbuf;
use crate::view::View;
pub use cursor::{Unit, UnitCursor};
pub use interop::SecureMsg;

/// Most slices one message may have (also the channel's wire cap, which
/// takes it from here).
pub const MAX_SLICES: usize = 64;

/// Failure of an aggregate operation; the inputs are unchanged.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MsgError {
    /// The result would have more than [`Msg::MAX_SLICES`] slices.
    #[error("message would have {0} slices; at most {MAX_SLICES} are allowed")]
    TooManySlices(usize),
    /// An offset or length beyond the message.
    #[error("range {at} is beyond the message length {len}")]
    OutOfRange {
        /// Requested offset/length.
        at: usize,
        /// Message length.
        len: usize,
    },
}

impl MsgError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> crate::error::ErrorKind {
        match self {
            Self::TooManySlices(_) => crate::error::ErrorKind::TooLarge,
            Self::OutOfRange { .. } => crate::error::ErrorKind::OutOfRange,
        }
    }
}

crate::error::value_back_error! {
    /// [`Msg::join`], [`Msg::prepend`] or [`Msg::append`] refused: the
    /// reason, and the message that was to be added, back (the receiver
    /// is unchanged).
    JoinError { MsgError, Msg }
}

crate::error::value_back_error! {
    /// [`Msg::split_at`] refused: the reason, and the message, back whole.
    SplitError { MsgError, Msg }
}

/// One slice of a message: `len` bytes at `offset` in `buf`.
#[derive(Clone, Debug)]
pub struct Slice {
    buf: Fbuf,
    offset: usize,
    len: usize,
}

impl Slice {
    /// A slice of `buf`; `None` if the range is outside it or empty.
    pub fn new(buf: Fbuf, offset: usize, len: usize) -> Option<Self> {
        let end = offset.checked_add(len)?;
        (len > 0 && end <= buf.len()).then_some(Self { buf, offset, len })
    }

    /// The underlying buffer.
    pub fn fbuf(&self) -> &Fbuf {
        &self.buf
    }

    /// Offset in the buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty slices are never stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes, in place (see [`View`]).
    #[inline]
    pub fn view(&self) -> View<'_> {
        // In range: every constructor checks offset + len <= buf.len().
        self.buf
            .view()
            .slice(self.offset, self.len)
            .unwrap_or_else(|| View::from_slice(&[]))
    }
}

/// An immutable aggregate of buffer slices.
#[derive(Clone, Debug, Default)]
pub struct Msg {
    slices: SmallVec<[Slice; 2]>,
    len: usize,
}

impl From<Fbuf> for Msg {
    fn from(buf: Fbuf) -> Self {
        let len = buf.len();
        match Slice::new(buf, 0, len) {
            Some(s) => {
                let mut slices = SmallVec::new();
                slices.push(s);
                Self { slices, len }
            }
            None => Self::default(),
        }
    }
}

impl Msg {
    /// Most slices one message may have.
    pub const MAX_SLICES: usize = MAX_SLICES;

    /// An empty message.
    pub fn new() -> Self {
        Self::default()
    }

    /// Build from slices already known to be non-empty and at most
    /// `MAX_SLICES` (a receive path that checked both).
    pub(crate) fn from_checked(slices: SmallVec<[Slice; 2]>) -> Self {
        debug_assert!(slices.len() <= MAX_SLICES && slices.iter().all(|s| s.len > 0));
        let len = slices.iter().map(|s| s.len).sum();
        Self { slices, len }
    }

    /// Build from slices (empty ones are dropped).
    pub fn from_slices(slices: impl IntoIterator<Item = Slice>) -> Result<Self, MsgError> {
        let slices: SmallVec<[Slice; 2]> = slices.into_iter().filter(|s| s.len > 0).collect();
        if slices.len() > MAX_SLICES {
            return Err(MsgError::TooManySlices(slices.len()));
        }
        let len = slices.iter().map(|s| s.len).sum();
        Ok(Self { slices, len })
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the message has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The slices.
    pub fn slices(&self) -> &[Slice] {
        &self.slices
    }

    /// Number of slices.
    pub fn slice_count(&self) -> usize {
        self.slices.len()
    }

    /// Append `other` after `self` (join). On error `self` is unchanged and
    /// `other` is returned.
    pub fn join(&mut self, other: Msg) -> Result<(), JoinError> {
        let n = self.slices.len() + other.slices.len();
        if n > MAX_SLICES {
            return Err(JoinError::new(MsgError::TooManySlices(n), other));
        }
        self.len += other.len;
        self.slices.extend(other.slices);
        Ok(())
    }

    /// Prepend a header message (e.g. a small fbuf with a protocol header).
    pub fn prepend(&mut self, header: Msg) -> Result<(), JoinError> {
        let n = self.slices.len() + header.slices.len();
        if n > MAX_SLICES {
            return Err(JoinError::new(MsgError::TooManySlices(n), header));
        }
        self.len += header.len;
        let tail = std::mem::replace(&mut self.slices, header.slices);
        self.slices.extend(tail);
        Ok(())
    }

    /// Append a trailer message.
    pub fn append(&mut self, trailer: Msg) -> Result<(), JoinError> {
        self.join(trailer)
    }

    /// Split at byte `at`: `self` keeps `[0, at)`, the result is `[at, len)`.
    pub fn split_off(&mut self, at: usize) -> Result<Msg, MsgError> {
        if at > self.len {
            return Err(MsgError::OutOfRange { at, len: self.len });
        }
        let (idx, within) = self.locate(at);
        let mut tail: SmallVec<[Slice; 2]> = self.slices.drain(idx..).collect();
        if within > 0 {
            // The slice at `idx` straddles `at`: both halves reference it.
            let s = &mut tail[0];
            let head = Slice {
                buf: s.buf.clone(),
                offset: s.offset,
                len: within,
            };
            s.offset += within;
            s.len -= within;
            self.slices.push(head);
        }
        let tail_len = self.len - at;
        self.len = at;
        Ok(Msg {
            slices: tail,
            len: tail_len,
        })
    }

    /// Split into `([0, at), [at, len))`.
    pub fn split_at(mut self, at: usize) -> Result<(Msg, Msg), SplitError> {
        match self.split_off(at) {
            Ok(tail) => Ok((self, tail)),
            Err(e) => Err(SplitError::new(e, self)),
        }
    }

    /// Remove `n` bytes from the front.
    pub fn clip_front(&mut self, n: usize) -> Result<(), MsgError> {
        let tail = self.split_off(n)?;
        *self = tail;
        Ok(())
    }

    /// Remove `n` bytes from the back.
    pub fn clip_back(&mut self, n: usize) -> Result<(), MsgError> {
        if n > self.len {
            return Err(MsgError::OutOfRange {
                at: n,
                len: self.len,
            });
        }
        drop(self.split_off(self.len - n)?);
        Ok(())
    }

    /// (slice index, offset within it) of byte `at`; `at == len` gives
    /// `(slices.len(), 0)`.
    fn locate(&self, mut at: usize) -> (usize, usize) {
        for (i, s) in self.slices.iter().enumerate() {
            if at < s.len {
                return (i, at);
            }
            at -= s.len;
        }
        (self.slices.len(), 0)
    }

    /// The slices as `IoSlice`s for `writev`/`sendmsg`, when every slice
    /// is [immutable](Msg::is_immutable) (an `IoSlice` is a `&[u8]`);
    /// otherwise use [`Msg::write_to`], which needs no reference.
    pub fn io_slices(&self) -> Option<Vec<IoSlice<'_>>> {
        self.slices
            .iter()
            .map(|s| s.view().as_slice().map(IoSlice::new))
            .collect()
    }

    /// Write the message to `fd` with one `writev(2)` per 1024 slices,
    /// straight from the shared buffers (the kernel reads them; no copy in
    /// user space, no reference to peer-writable bytes). Returns the bytes
    /// written, which may be short as for `writev`.
    pub fn write_to(&self, fd: impl AsFd) -> std::io::Result<usize> {
        let iov: SmallVec<[libc::iovec; 4]> = self
            .chunks()
            .map(|v| libc::iovec {
                iov_base: v.as_ptr().cast_mut().cast(),
                iov_len: v.len(),
            })
            .collect();
        crate::sys::io::writev_raw(fd.as_fd(), &iov)
    }

    /// The slices' bytes, in place (see [`View`]).
    #[inline]
    pub fn chunks(&self) -> impl Iterator<Item = View<'_>> {
        self.slices.iter().map(Slice::view)
    }

    /// Copy everything into a `Vec`: a private copy that cannot change.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        self.read_at(0, &mut v);
        v
    }

    /// Copy up to `dst.len()` bytes starting at byte `off` of the message
    /// into `dst`; returns how many were copied.
    pub fn read_at(&self, mut off: usize, dst: &mut [u8]) -> usize {
        let mut done = 0;
        for c in self.chunks() {
            if done == dst.len() {
                break;
            }
            if off >= c.len() {
                off -= c.len();
                continue;
            }
            done += c.read_at(off, &mut dst[done..]);
            off = 0;
        }
        done
    }

    /// The bytes as one contiguous slice that cannot change while you hold
    /// it: borrowed in place when the message is one [immutable](Msg::is_immutable)
    /// slice, a private copy otherwise (several slices, or bytes a peer may
    /// still write).
    pub fn contiguous(&self) -> Cow<'_, [u8]> {
        match self.slices.as_slice() {
            [] => Cow::Borrowed(&[]),
            [one] => match one.view().as_slice() {
                Some(s) => Cow::Borrowed(s),
                None => Cow::Owned(one.view().to_vec()),
            },
            _ => Cow::Owned(self.to_vec()),
        }
    }

    /// Whether nobody can change any byte of the message while it lives
    /// (see [`Fbuf::is_immutable`]).
    pub fn is_immutable(&self) -> bool {
        self.slices.iter().all(|s| s.buf.is_immutable())
    }

    /// A cursor yielding application data units.
    pub fn units(&self) -> UnitCursor<'_> {
        UnitCursor::new(self)
    }

    /// Whether every slice is kernel-sealed.
    pub fn is_secured(&self) -> bool {
        self.slices.iter().all(|s| s.buf.is_secured())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};

    fn msg_of(pool: &Pool, bytes: &[u8]) -> Msg {
        let mut m = pool.try_alloc(bytes.len()).unwrap();
        m.as_mut_slice().copy_from_slice(bytes);
        Msg::from(m.freeze().unwrap())
    }

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            chunk_size: 1 << 20,
            populate: false,
            ..PoolConfig::named("msgtest")
        })
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn join_split_clip_without_copy() {
        let p = pool();
        let mut a = msg_of(&p, b"hello ");
        let b = msg_of(&p, b"world");
        let b_ptr = b.slices()[0].view().as_ptr();
        a.join(b).unwrap();
        assert_eq!(a.to_vec(), b"hello world");
        let (x, y) = a.split_at(3).map_err(|e| e.into_parts().0).unwrap();
        assert_eq!(
            (x.to_vec(), y.to_vec()),
            (b"hel".to_vec(), b"lo world".to_vec())
        );
        let mut y2 = y.clone();
        y2.clip_front(3).unwrap();
        y2.clip_back(2).unwrap();
        assert_eq!(y2.to_vec(), b"wor");
        assert_eq!(y2.slices()[0].view().as_ptr(), b_ptr, "same bytes, no copy");
        let mut h = msg_of(&p, b">>");
        h.append(y2).unwrap();
        let mut body = msg_of(&p, b"!");
        body.prepend(h).unwrap();
        assert_eq!(body.to_vec(), b">>wor!");
        assert_eq!(body.io_slices().map(|v| v.len()), Some(3));
        assert!(body.is_immutable(), "our own buffers");
        assert!(matches!(body.contiguous(), Cow::Owned(_)));
        let one = msg_of(&p, b"solo");
        assert!(matches!(one.contiguous(), Cow::Borrowed(b"solo")));
        let mut part = [0u8; 4];
        assert_eq!(body.read_at(2, &mut part), 4);
        assert_eq!(&part, b"wor!");
        assert!(body.clone().split_at(100).is_err());
        assert!(body.clip_back(7).is_err());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn slice_cap_enforced() {
        let p = pool();
        let one = msg_of(&p, b"x");
        let mut m = Msg::new();
        for _ in 0..MAX_SLICES {
            m.join(one.clone()).unwrap();
        }
        let (e, back) = m.join(one).unwrap_err().into_parts();
        assert_eq!(e, MsgError::TooManySlices(MAX_SLICES + 1));
        assert_eq!(back.len(), 1);
    }

    proptest::proptest! {
        #[test]
        #[cfg_attr(miri, ignore = "pool: its buffers are memfd regions, not modelled by Miri")]
        fn split_and_join_preserve_bytes(data in proptest::collection::vec(proptest::num::u8::ANY, 1..300),
                                         cuts in proptest::collection::vec(0usize..300, 0..6),
                                         at in 0usize..300) {
            let p = pool();
            let mut m = Msg::new();
            let mut prev = 0;
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % data.len()).collect();
            cuts.sort();
            cuts.push(data.len());
            for c in cuts {
                if c > prev { m.join(msg_of(&p, &data[prev..c])).unwrap(); prev = c; }
            }
            proptest::prop_assert_eq!(m.to_vec(), data.clone());
            let at = at % (data.len() + 1);
            let (a, b) = m.split_at(at).map_err(|e| e.into_parts().0).unwrap();
            proptest::prop_assert_eq!(a.len() + b.len(), data.len());
            let mut j = a; j.join(b).unwrap();
            proptest::prop_assert_eq!(j.to_vec(), data);
        }
    }
}
