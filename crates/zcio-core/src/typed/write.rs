//! The writer's side: [`TypedBuf`], a `T` (or a type ending in a slice)
//! reserved in a buffer of this process, filled in place, then sent as a
//! [`Msg`].

use std::any::type_name;
use std::fmt;
use std::marker::PhantomData;

use zerocopy::{FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::buf::{AllocError, FbufMut, FreezeError, Pool};
use crate::msg::Msg;
use crate::typed::tag::{payload_offset, Shape, TagWire, TAG_LEN};
use crate::typed::{Tag, TypedError};

/// A `T` in a buffer of this process, being filled in place: reserve
/// ([`Pool::alloc_typed`], [`Pool::alloc_typed_elems`], or
/// [`TypedBuf::alloc`] with any allocator) → fill (`&mut T` through
/// [`TypedBuf::get_mut`] or `DerefMut`) → send ([`TypedBuf::into_msg`]).
///
/// The bytes start as zeros — a valid `T`, since `T: FromZeros` — so no
/// byte of the message is ever left from an earlier use of the buffer, and
/// `T: IntoBytes` (no padding) means every byte sent is one you wrote or a
/// zero. The buffer is this process's own and exclusive until
/// `into_msg`, so handing out `&mut T` over it is sound; after `into_msg`
/// nobody writes it (and a secured buffer is sealed by the kernel).
///
/// `T` is a sized type, or a type ending in a slice: `[E]` or a zerocopy
/// slice DST such as a header followed by pixels:
///
/// ```
/// use zcio::typed::Tag;
/// use zcio::{Pool, PoolConfig};
/// use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
///
/// #[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
/// #[repr(C)]
/// struct Frame {
///     width: u32,
///     height: u32,
///     pixels: [[u8; 4]], // RGBA: whole multiples of the alignment, no padding
/// }
///
/// let pool = Pool::new(PoolConfig::named("doc-typed-buf"));
/// let tag = Tag::new("doc.Frame", 1);
/// let mut frame = pool.alloc_typed_elems::<Frame>(4 * 3, Some(&tag))?;
/// frame.width = 4;
/// frame.height = 3;
/// frame.pixels.fill([0x80, 0x80, 0x80, 0xff]);
/// let msg = frame.into_msg()?;
/// assert_eq!(msg.len(), 128 + 8 + 4 * 12); // the tag, the header, the pixels
/// let back: &Frame = msg.borrow_typed_elems(Some(&tag))?; // our own bytes: in place
/// assert_eq!((back.width, back.pixels.len()), (4, 12));
/// # Ok::<(), zcio::Error>(())
/// ```
pub struct TypedBuf<T: ?Sized> {
    /// Exactly `offset + size of the T` bytes long; `[offset, len)` holds
    /// a valid, aligned `T` (zeros at first, then only written through
    /// `&mut T`), `[0, offset)` the tag or nothing.
    buf: FbufMut,
    offset: usize,
    _type: PhantomData<T>,
}

impl<T: FromZeros + IntoBytes + KnownLayout> TypedBuf<T> {
    /// A zeroed `T` in a buffer from `alloc` (called once with the length
    /// needed: `size_of::<T>()`, plus the tag and the alignment padding
    /// after it), tagged with `tag` if given. Use it for any allocator:
    /// `|len| pool.try_alloc(len)` (no wait), `|len|
    /// pool.alloc_secured(len)` (sealed at `into_msg`, so a receiver can
    /// borrow it in place), an [`Uncached`](crate::Uncached).
    pub fn alloc(
        tag: Option<&Tag>,
        alloc: impl FnOnce(usize) -> Result<FbufMut, AllocError>,
    ) -> Result<Self, TypedError> {
        let offset = tag.map_or(0, |_| payload_offset(align_of::<T>()));
        Self::build(Shape::sized::<T>(), size_of::<T>(), offset, tag, alloc).map_err(|(e, _)| e)
    }
}

impl<T: ?Sized + FromZeros + IntoBytes + KnownLayout<PointerMetadata = usize>> TypedBuf<T> {
    /// A zeroed `T` with `elems` trailing elements (`[E]` of `elems`
    /// elements, or a slice DST with that many in its trailing slice) in a
    /// buffer from `alloc`; see [`TypedBuf::alloc`].
    pub fn alloc_elems(
        elems: usize,
        tag: Option<&Tag>,
        alloc: impl FnMut(usize) -> Result<FbufMut, AllocError>,
    ) -> Result<Self, TypedError> {
        let ty = type_name::<T>();
        let size = T::size_for_metadata(elems).ok_or(TypedError::TooLarge { ty, elems })?;
        let mut alloc = alloc;
        let offset = tag.map_or(0, |_| TAG_LEN);
        match Self::build(Shape::elems::<T>(), size, offset, tag, &mut alloc) {
            // Aligned to more than the tag's length: the type's alignment
            // is known only from a value, so measure it on the first
            // buffer (page-aligned at its start) and place the payload there.
            Err((TypedError::Misaligned { .. }, Some(mut first))) => {
                let addr = first.as_mut_ptr() as usize;
                let align = T::try_mut_from_bytes(&mut first.as_mut_slice()[..size])
                    .map(|t| align_of_val(&*t))
                    .map_err(|_| TypedError::Misaligned { ty, addr })?;
                drop(first);
                Self::build(Shape::elems::<T>(), size, payload_offset(align), tag, alloc)
                    .map_err(|(e, _)| e)
            }
            other => other.map_err(|(e, _)| e),
        }
    }
}

impl<T: ?Sized + FromZeros + IntoBytes + KnownLayout> TypedBuf<T> {
    /// Allocate `offset + size` bytes, zero them, check that a `T` fits at
    /// `offset`, write the tag. On a misaligned payload the buffer comes
    /// back with the error.
    fn build(
        shape: Shape,
        size: usize,
        offset: usize,
        tag: Option<&Tag>,
        alloc: impl FnOnce(usize) -> Result<FbufMut, AllocError>,
    ) -> Result<Self, (TypedError, Option<FbufMut>)> {
        let ty = type_name::<T>();
        let too_large = || (TypedError::TooLarge { ty, elems: 0 }, None);
        let total = offset.checked_add(size).ok_or_else(too_large)?;
        let mut buf = alloc(total).map_err(|e| (e.into(), None))?;
        if buf.len() < total {
            let e = AllocError::BadSize(total, buf.len());
            return Err((e.into(), None));
        }
        buf.truncate(total);
        let bytes = buf.as_mut_slice();
        // A fresh buffer may hold bytes this process wrote into the pool
        // earlier: zeros are a valid T (FromZeros), and nothing old is sent.
        bytes.fill(0);
        let (head, body) = bytes.split_at_mut(offset);
        let align = match T::try_mut_from_bytes(body) {
            Ok(t) => align_of_val(&*t),
            Err(zerocopy::ConvertError::Alignment(_)) => {
                let addr = body.as_ptr() as usize;
                return Err((TypedError::Misaligned { ty, addr }, Some(buf)));
            }
            // Zeros are valid (FromZeros) and the size is the type's own:
            // neither can fail, and if they did the error says so.
            Err(zerocopy::ConvertError::Size(_)) => {
                let e = TypedError::Size {
                    ty,
                    len: size,
                    size: shape.size,
                    elem_size: shape.elem_size,
                    tagged: false,
                };
                return Err((e, None));
            }
            Err(zerocopy::ConvertError::Validity(_)) => {
                return Err((TypedError::Invalid { ty }, None));
            }
        };
        if let Some(tag) = tag {
            let wire = TagWire::new(tag, &shape, align, offset);
            head[..TAG_LEN].copy_from_slice(wire.as_bytes());
        }
        Ok(Self {
            buf,
            offset,
            _type: PhantomData,
        })
    }

    /// The value, writable in place (this process's own exclusive buffer).
    pub fn get_mut(&mut self) -> &mut T {
        match T::try_mut_from_bytes(&mut self.buf.as_mut_slice()[self.offset..]) {
            Ok(t) => t,
            // `buf` holds a valid, aligned T of exactly its size (checked
            // when it was made, written only through `&mut T` since).
            Err(_) => unreachable!("a TypedBuf always holds a valid T"),
        }
    }

    /// Bytes of the message: the tag (if any), its padding and the value.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Always false: a typed buffer holds at least a tag or a value
    /// (zero-sized values without a tag cannot be allocated).
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Where the value starts in the message (0 without a tag).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Freeze the buffer and make it a one-slice message, ready to send.
    /// Fails only for a secured buffer the kernel would not seal (the
    /// error carries the buffer, frozen but volatile).
    pub fn into_msg(self) -> Result<Msg, FreezeError> {
        self.buf.freeze().map(Msg::from)
    }
}

impl<T: ?Sized + FromZeros + IntoBytes + KnownLayout + Immutable> TypedBuf<T> {
    /// The value, read in place.
    pub fn get(&self) -> &T {
        match T::try_ref_from_bytes(&self.buf.as_slice()[self.offset..]) {
            Ok(t) => t,
            // As in `get_mut`.
            Err(_) => unreachable!("a TypedBuf always holds a valid T"),
        }
    }
}

impl<T: ?Sized + FromZeros + IntoBytes + KnownLayout + Immutable> std::ops::Deref for TypedBuf<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.get()
    }
}

impl<T: ?Sized + FromZeros + IntoBytes + KnownLayout + Immutable> std::ops::DerefMut
    for TypedBuf<T>
{
    fn deref_mut(&mut self) -> &mut T {
        self.get_mut()
    }
}

impl<T: ?Sized> fmt::Debug for TypedBuf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedBuf")
            .field("type", &type_name::<T>())
            .field("offset", &self.offset)
            .field("buf", &self.buf)
            .finish()
    }
}

impl Pool {
    /// A zeroed `T` in a buffer of this pool, to fill in place and send
    /// ([`TypedBuf`]); tagged with `tag` if given. Waits for a buffer as
    /// [`Pool::alloc`] does (up to `PoolConfig::alloc_timeout`); for
    /// another wait, or a secured buffer, use [`TypedBuf::alloc`].
    pub fn alloc_typed<T: FromZeros + IntoBytes + KnownLayout>(
        &self,
        tag: Option<&Tag>,
    ) -> Result<TypedBuf<T>, TypedError> {
        TypedBuf::alloc(tag, |len| self.alloc(len))
    }

    /// A zeroed `T` ending in a slice of `elems` elements (`[E]`, or a
    /// header followed by a slice) in a buffer of this pool; see
    /// [`Pool::alloc_typed`].
    pub fn alloc_typed_elems<T>(
        &self,
        elems: usize,
        tag: Option<&Tag>,
    ) -> Result<TypedBuf<T>, TypedError>
    where
        T: ?Sized + FromZeros + IntoBytes + KnownLayout<PointerMetadata = usize>,
    {
        TypedBuf::alloc_elems(elems, tag, |len| self.alloc(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::PoolConfig;
    use zerocopy::FromBytes;

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            chunk_size: 1 << 20,
            max_chunks: 2,
            populate: false,
            ..PoolConfig::named("typed-write")
        })
    }

    #[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Debug, PartialEq)]
    #[repr(C)]
    struct Header {
        seq: u32,
        width: u32,
        height: u32,
    }

    #[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
    #[repr(C)]
    struct Frame {
        header: Header,
        pixels: [u32],
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn a_value_is_zeroed_then_filled_in_place() {
        let p = pool();
        // Dirty the pool's buffer first: a typed buffer must not show it.
        let mut b = p.try_alloc(4096).unwrap();
        b.as_mut_slice().fill(0xee);
        drop(b);
        let mut h = p.alloc_typed::<Header>(None).unwrap();
        assert_eq!(*h, Header::new_zeroed());
        assert_eq!((h.len(), h.offset()), (12, 0));
        h.seq = 7;
        h.get_mut().width = 640;
        let m = h.into_msg().unwrap();
        assert_eq!(m.len(), 12);
        assert_eq!(m.to_vec(), [7, 0, 0, 0, 128, 2, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn a_tagged_frame_has_its_tag_then_the_value() {
        let p = pool();
        let tag = Tag::new("test.Frame", 1);
        let mut f = p.alloc_typed_elems::<Frame>(6, Some(&tag)).unwrap();
        assert_eq!((f.offset(), f.len()), (128, 128 + 12 + 24));
        f.header.width = 3;
        f.pixels.copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        let bytes = f.into_msg().unwrap().to_vec();
        assert_eq!(&bytes[..8], b"ZCIOTYPE");
        let wire = TagWire::read_from_bytes(&bytes[..TAG_LEN]).unwrap();
        let mut shape = Shape::elems::<Frame>();
        assert_eq!(wire.check(bytes.len(), &tag, &shape, "Frame"), Ok(128));
        shape.align = Some(4);
        assert_eq!(wire.check(bytes.len(), &tag, &shape, "Frame"), Ok(128));
        assert_eq!(bytes[128 + 4], 3);
        assert_eq!(bytes[bytes.len() - 4], 6);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn over_aligned_types_get_their_payload_at_their_alignment() {
        #[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
        #[repr(C, align(256))]
        struct Wide {
            x: [u8; 256],
        }
        #[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
        #[repr(C, align(256))]
        struct WideDst {
            x: [u8; 256],
            tail: [Wide],
        }
        let p = pool();
        let tag = Tag::of::<Wide>();
        let w = p.alloc_typed::<Wide>(Some(&tag)).unwrap();
        assert_eq!((w.offset(), w.len()), (256, 512));
        let d = p
            .alloc_typed_elems::<WideDst>(2, Some(&Tag::of::<WideDst>()))
            .unwrap();
        assert_eq!((d.offset(), d.len()), (256, 256 + 768));
        let msg = d.into_msg().unwrap();
        let back: &WideDst = msg.borrow_typed_elems(Some(&Tag::of::<WideDst>())).unwrap();
        assert_eq!(back.tail.len(), 2);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn allocation_failures_are_typed_errors() {
        let p = pool();
        assert!(matches!(
            p.alloc_typed_elems::<[u64]>(usize::MAX / 4, None),
            Err(TypedError::TooLarge { .. })
        ));
        assert!(matches!(
            TypedBuf::<[u8]>::alloc_elems(p.max_alloc() + 1, None, |len| p.try_alloc(len)),
            Err(TypedError::Alloc(AllocError::BadSize(..)))
        ));
        assert!(matches!(
            TypedBuf::<u64>::alloc(None, |_| Err(AllocError::WouldBlock("x".into()))),
            Err(TypedError::Alloc(AllocError::WouldBlock(_)))
        ));
        // An allocator that hands out less than asked for.
        let short = p.try_alloc(4).unwrap();
        let mut short = Some(short);
        assert!(matches!(
            TypedBuf::<u64>::alloc(None, |_| Ok(short.take().unwrap())),
            Err(TypedError::Alloc(AllocError::BadSize(8, _)))
        ));
    }
}
