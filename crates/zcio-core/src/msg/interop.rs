//! Interop with the `bytes` crate, only where the bytes cannot change.
//!
//! `bytes::Bytes` and `bytes::Buf` hand out `&[u8]`, so they may only ever
//! see bytes nobody can write: immutable buffers (sealed, made by this
//! process, or from a trusted peer) are shared without a copy — the
//! `Bytes` keeps the buffer alive, and the deallocation notice goes back
//! only when the last `Bytes` is dropped — and anything else is copied
//! once into private memory.

use bytes::{Buf, Bytes};

use crate::buf::{Fbuf, SecureView};
use crate::msg::{Msg, Slice};

/// An immutable slice of a buffer, the owner behind a zero-copy `Bytes`.
struct Frozen {
    buf: Fbuf,
    offset: usize,
    len: usize,
}

impl AsRef<[u8]> for Frozen {
    fn as_ref(&self) -> &[u8] {
        // Built only from immutable buffers (checked by `Frozen::new`), so
        // the view offers its slice; the range is inside the buffer.
        self.buf
            .view()
            .as_slice()
            .and_then(|s| s.get(self.offset..self.offset + self.len))
            .unwrap_or_default()
    }
}

impl Frozen {
    fn new(buf: Fbuf, offset: usize, len: usize) -> Option<Self> {
        (buf.is_immutable() && offset.checked_add(len)? <= buf.len()).then_some(Self {
            buf,
            offset,
            len,
        })
    }

    fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl Fbuf {
    /// The buffer as `Bytes` without a copy, if it is
    /// [immutable](Fbuf::is_immutable); otherwise the buffer comes back.
    /// The `Bytes` (and its clones) keep the buffer alive.
    ///
    /// ```
    /// use zcio::{Pool, PoolConfig};
    /// let pool = Pool::new(PoolConfig::named("doc-bytes"));
    /// let mut b = pool.try_alloc(5).unwrap();
    /// b.as_mut_slice().copy_from_slice(b"hello");
    /// let bytes = b.freeze().unwrap().try_into_bytes().unwrap();
    /// assert_eq!(&bytes[..], b"hello");
    /// ```
    pub fn try_into_bytes(self) -> Result<Bytes, Fbuf> {
        let len = self.len();
        if !self.is_immutable() {
            return Err(self);
        }
        // Immutable (checked above) and the whole buffer: what `Frozen`
        // requires.
        Ok(Frozen {
            buf: self,
            offset: 0,
            len,
        }
        .into_bytes())
    }

    /// The bytes as `Bytes`: shared without a copy when immutable, copied
    /// once otherwise.
    pub fn to_bytes(&self) -> Bytes {
        match self.clone().try_into_bytes() {
            Ok(b) => b,
            Err(b) => Bytes::from(b.to_vec()),
        }
    }
}

impl From<SecureView> for Bytes {
    /// A sealed buffer is shared without a copy; a copied view becomes the
    /// `Bytes`' own allocation.
    fn from(v: SecureView) -> Bytes {
        match v {
            SecureView::Sealed(b) => b.to_bytes(),
            SecureView::Copied(c) => Bytes::from(c),
        }
    }
}

/// A message whose bytes cannot change: immutable slices shared in place,
/// anything else copied once ([`Msg::secure`]). Implements [`bytes::Buf`]
/// and converts into [`Bytes`].
#[derive(Clone, Debug, Default)]
pub struct SecureMsg {
    parts: std::collections::VecDeque<Bytes>,
    remaining: usize,
}

impl Msg {
    /// This message with bytes that cannot change: immutable slices stay
    /// zero-copy (their buffers are kept alive), volatile ones are copied.
    ///
    /// ```
    /// use bytes::Buf;
    /// use zcio::{Msg, Pool, PoolConfig};
    /// let pool = Pool::new(PoolConfig::named("doc-secure-msg"));
    /// let mut b = pool.try_alloc(6).unwrap();
    /// b.as_mut_slice().copy_from_slice(b"abcdef");
    /// let mut m = Msg::from(b.freeze().unwrap()).secure();
    /// assert_eq!(m.get_u16(), u16::from_be_bytes(*b"ab"));
    /// assert_eq!(&m.copy_to_bytes(4)[..], b"cdef");
    /// ```
    pub fn secure(&self) -> SecureMsg {
        let parts = self.slices().iter().map(slice_bytes).collect();
        SecureMsg {
            parts,
            remaining: self.len(),
        }
    }

    /// The whole message as one `Bytes`: zero-copy for a single immutable
    /// slice, one copy otherwise.
    pub fn to_bytes(&self) -> Bytes {
        match self.slices() {
            [one] => slice_bytes(one),
            _ => Bytes::from(self.to_vec()),
        }
    }
}

fn slice_bytes(s: &Slice) -> Bytes {
    match Frozen::new(s.fbuf().clone(), s.offset(), s.len()) {
        Some(f) => f.into_bytes(),
        None => Bytes::from(s.view().to_vec()),
    }
}

impl SecureMsg {
    /// The unconsumed bytes, one `Bytes` per slice (immutable slices
    /// shared in place): for APIs that take a list of buffers, such as a
    /// Zenoh payload.
    pub fn into_parts(self) -> impl Iterator<Item = Bytes> {
        self.parts.into_iter()
    }

    /// Bytes not yet consumed.
    pub fn len(&self) -> usize {
        self.remaining
    }

    /// Whether everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }
}

impl Buf for SecureMsg {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts.front().map(|b| &b[..]).unwrap_or_default()
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end of the message");
        self.remaining -= cnt;
        while cnt > 0 {
            let Some(front) = self.parts.front_mut() else {
                return;
            };
            if cnt < front.len() {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.parts.pop_front();
        }
        while self.parts.front().is_some_and(Bytes::is_empty) {
            self.parts.pop_front();
        }
    }
}

impl From<SecureMsg> for Bytes {
    fn from(mut m: SecureMsg) -> Bytes {
        match m.parts.len() {
            0 => Bytes::new(),
            1 => m.parts.pop_front().unwrap_or_default(),
            _ => {
                let n = m.remaining;
                m.copy_to_bytes(n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};

    fn buf(p: &Pool, bytes: &[u8]) -> Fbuf {
        let mut b = p.try_alloc(bytes.len()).unwrap();
        b.as_mut_slice().copy_from_slice(bytes);
        b.freeze().unwrap()
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn bytes_share_immutable_buffers_and_keep_them_alive() {
        let p = Pool::new(PoolConfig {
            chunk_size: 1 << 16,
            populate: false,
            ..PoolConfig::named("interop")
        });
        let f = buf(&p, b"zero-copy");
        let ptr = f.view().as_ptr();
        let b = f.try_into_bytes().unwrap();
        assert_eq!(b.as_ptr(), ptr, "shared, not copied");
        assert_eq!(p.stats().buffers_in_use, 1, "Bytes keeps the buffer");
        let c = b.slice(5..);
        drop(b);
        assert_eq!(&c[..], b"copy");
        assert_eq!(p.stats().buffers_in_use, 1);
        drop(c);
        assert_eq!(p.stats().buffers_in_use, 0);

        let mut m = Msg::from(buf(&p, b"abc"));
        m.join(Msg::from(buf(&p, b"defg"))).unwrap();
        let mut s = m.secure();
        assert_eq!(s.remaining(), 7);
        assert_eq!(s.chunk(), b"abc");
        s.advance(4);
        assert_eq!(s.chunk(), b"efg");
        assert_eq!(Bytes::from(s), Bytes::from_static(b"efg"));
        assert_eq!(m.to_bytes(), Bytes::from_static(b"abcdefg"));
    }
}
