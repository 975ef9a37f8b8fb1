//! The reader's side: a received [`Msg`] as a `T` — copied out and
//! validated ([`Msg::read_typed`], [`Msg::read_typed_vec`]), or borrowed in
//! place where its bytes cannot change ([`Msg::borrow_typed`],
//! [`Msg::borrow_typed_elems`]).

use std::any::type_name;
use std::ops::Deref;

use smallvec::SmallVec;
use zerocopy::{ConvertError, FromBytes, Immutable, KnownLayout, TryFromBytes};

use crate::msg::Msg;
use crate::typed::tag::{Shape, TagWire, TAG_LEN};
use crate::typed::{Tag, TypedError};

/// A payload's bytes that cannot change while held: borrowed from an
/// immutable slice, or a private copy (on the stack when small).
// Large on purpose: a short-lived local that keeps small copies off the heap.
#[allow(clippy::large_enum_variant)]
enum Bytes<'a> {
    Borrowed(&'a [u8]),
    Copied(SmallVec<[u8; 256]>),
}

impl Deref for Bytes<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Borrowed(b) => b,
            Self::Copied(c) => c,
        }
    }
}

/// The bytes of an empty message: none, at a page-aligned address (a
/// plain `&[]` lies at address 1, where no `[u32]` of zero elements may).
#[repr(C, align(4096))]
struct PageAligned([u8; 0]);
static EMPTY: PageAligned = PageAligned([]);

impl Msg {
    /// The message as a `T`, copied out of the message and then validated:
    /// the bytes are copied once into memory of this process (read through
    /// [`View`](crate::View), never referenced where a peer may write
    /// them), and only that copy is checked and turned into the `T`
    /// (zerocopy's `TryFromBytes`). A `bool` that is not 0 or 1, an enum
    /// discriminant that names no variant — any bit pattern `T` forbids —
    /// is a [`TypedError::Invalid`], never a value. The payload (after the
    /// tag, if `tag` is given) must be exactly `size_of::<T>()` bytes.
    ///
    /// Works on any message: volatile, several slices, any alignment.
    ///
    /// ```
    /// use zcio::{Channel, ChannelConfig, Pool, PoolConfig};
    /// use zerocopy::{FromZeros, Immutable, IntoBytes, KnownLayout};
    ///
    /// #[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug, PartialEq)]
    /// #[repr(C)]
    /// struct Status { ok: bool, code: u8, retries: u16 }
    ///
    /// let (tx, rx) = Channel::pair(ChannelConfig::default())?;
    /// let pool = Pool::new(PoolConfig::named("doc-read-typed"));
    /// let mut s = pool.alloc_typed::<Status>(None)?;
    /// s.ok = true;
    /// s.retries = 3;
    /// tx.send(s.into_msg()?)?;
    /// let msg = rx.recv()?; // volatile: the sender could still write it
    /// assert_eq!(msg.read_typed::<Status>(None)?, Status { ok: true, code: 0, retries: 3 });
    /// # Ok::<(), zcio::Error>(())
    /// ```
    pub fn read_typed<T: TryFromBytes>(&self, tag: Option<&Tag>) -> Result<T, TypedError> {
        let ty = type_name::<T>();
        let shape = Shape::sized::<T>();
        let (offset, _) = self.typed_offset(tag, &shape, ty)?;
        let len = self.len() - offset;
        if len != shape.size {
            return Err(self.size_error(ty, len, &shape, tag));
        }
        let bytes = self.payload(offset);
        T::try_read_from_bytes(&bytes).map_err(|e| match e {
            ConvertError::Alignment(never) => match never {},
            ConvertError::Size(_) => self.size_error(ty, len, &shape, tag),
            ConvertError::Validity(_) => TypedError::Invalid { ty },
        })
    }

    /// The message as a `[T]`, copied out into a `Vec` and each element
    /// validated, as [`Msg::read_typed`] does. The payload must be a
    /// multiple of `size_of::<T>()` bytes (zero-sized `T` do not compile:
    /// their count could not be known).
    pub fn read_typed_vec<T: TryFromBytes>(&self, tag: Option<&Tag>) -> Result<Vec<T>, TypedError> {
        const { assert!(size_of::<T>() > 0, "read_typed_vec of a zero-sized type") };
        let ty = type_name::<[T]>();
        let shape = Shape::slice_of::<T>();
        let (offset, _) = self.typed_offset(tag, &shape, ty)?;
        let len = self.len() - offset;
        if !len.is_multiple_of(shape.elem_size) {
            return Err(self.size_error(ty, len, &shape, tag));
        }
        let bytes = self.payload(offset);
        bytes
            .chunks_exact(shape.elem_size)
            .map(|c| T::try_read_from_bytes(c).map_err(|_| TypedError::Invalid { ty }))
            .collect()
    }

    /// The message as a `&T`, in place and without a copy — only where its
    /// bytes cannot change while the reference lives: the message is one
    /// slice and that slice is immutable ([`View::as_slice`](crate::View::as_slice):
    /// kernel-sealed, this process's own, or from a peer declared trusted).
    /// The bytes are validated once (`TryFromBytes`); since nobody can
    /// write them, the check holds for as long as the borrow.
    ///
    /// Bytes a peer may still write (a volatile buffer) are refused with
    /// [`TypedError::Volatile`]: no reference is ever made over them.
    /// Copy such a message out ([`Msg::read_typed`]), or into a buffer of
    /// your own ([`forward::copy_into`](crate::forward::copy_into)) and
    /// borrow from that. The payload must also be aligned for `T` (pool
    /// buffers start on a page, and a tag keeps the payload aligned).
    pub fn borrow_typed<T>(&self, tag: Option<&Tag>) -> Result<&T, TypedError>
    where
        T: TryFromBytes + KnownLayout + Immutable,
    {
        let ty = type_name::<T>();
        let shape = Shape::sized::<T>();
        let bytes = self.in_place(ty)?;
        let (offset, _) = self.typed_offset(tag, &shape, ty)?;
        let payload = &bytes[offset..];
        if payload.len() != shape.size {
            return Err(self.size_error(ty, payload.len(), &shape, tag));
        }
        T::try_ref_from_bytes(payload).map_err(|e| self.cast_error(e, ty, payload, &shape, tag))
    }

    /// The message as a `&T` for a type ending in a slice — `[E]`, or a
    /// zerocopy slice DST such as a header followed by pixels — in place,
    /// on the same conditions as [`Msg::borrow_typed`]. The number of
    /// elements follows from the payload's length, which must be a size the
    /// type can have.
    pub fn borrow_typed_elems<T>(&self, tag: Option<&Tag>) -> Result<&T, TypedError>
    where
        T: ?Sized + TryFromBytes + KnownLayout<PointerMetadata = usize> + Immutable,
    {
        let ty = type_name::<T>();
        let shape = Shape::elems::<T>();
        let bytes = self.in_place(ty)?;
        let (offset, wire) = self.typed_offset(tag, &shape, ty)?;
        let payload = &bytes[offset..];
        let t = T::try_ref_from_bytes(payload)
            .map_err(|e| self.cast_error(e, ty, payload, &shape, tag))?;
        if let (Some(wire), Some(tag)) = (wire, tag) {
            wire.check_align(tag, &shape, align_of_val(t))?;
        }
        Ok(t)
    }

    /// Where the payload starts (after the checked tag, if `tag`), and the
    /// tag. The tag is read once, into a private copy.
    fn typed_offset(
        &self,
        tag: Option<&Tag>,
        shape: &Shape,
        ty: &'static str,
    ) -> Result<(usize, Option<TagWire>), TypedError> {
        let Some(tag) = tag else {
            return Ok((0, None));
        };
        let mut raw = [0u8; TAG_LEN];
        if self.read_at(0, &mut raw) < TAG_LEN {
            return Err(TypedError::MissingTag {
                ty,
                len: self.len(),
            });
        }
        let wire = TagWire::read_from_bytes(&raw[..]).map_err(|_| TypedError::MissingTag {
            ty,
            len: self.len(),
        })?;
        let offset = wire.check(self.len(), tag, shape, ty)?;
        Ok((offset, Some(wire)))
    }

    /// The bytes from `offset` on, which cannot change while held: in
    /// place for one immutable slice, else copied once.
    fn payload(&self, offset: usize) -> Bytes<'_> {
        if let [one] = self.slices() {
            if let Some(s) = one.view().as_slice() {
                return Bytes::Borrowed(s.get(offset..).unwrap_or_default());
            }
        }
        let mut copy = SmallVec::from_elem(0u8, self.len().saturating_sub(offset));
        self.read_at(offset, &mut copy);
        Bytes::Copied(copy)
    }

    /// The whole message as a slice that cannot change, or why it cannot
    /// be borrowed.
    fn in_place(&self, ty: &'static str) -> Result<&[u8], TypedError> {
        match self.slices() {
            // No bytes, but a zero-length value still needs an aligned
            // address: a page's, as a pool buffer's.
            [] => Ok(&EMPTY.0),
            [one] => one.view().as_slice().ok_or(TypedError::Volatile { ty }),
            many => Err(TypedError::Fragmented {
                ty,
                slices: many.len(),
            }),
        }
    }

    fn size_error(&self, ty: &'static str, len: usize, s: &Shape, tag: Option<&Tag>) -> TypedError {
        let mut head = [0u8; 8];
        let tagged = tag.is_none() && self.read_at(0, &mut head) == 8 && TagWire::starts(&head);
        TypedError::Size {
            ty,
            len,
            size: s.size,
            elem_size: s.elem_size,
            tagged,
        }
    }

    fn cast_error<S, A, V>(
        &self,
        e: ConvertError<A, S, V>,
        ty: &'static str,
        payload: &[u8],
        shape: &Shape,
        tag: Option<&Tag>,
    ) -> TypedError {
        match e {
            ConvertError::Alignment(_) => TypedError::Misaligned {
                ty,
                addr: payload.as_ptr() as usize,
            },
            ConvertError::Size(_) => self.size_error(ty, payload.len(), shape, tag),
            ConvertError::Validity(_) => TypedError::Invalid { ty },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};
    use crate::channel::{Channel, ChannelConfig};
    use crate::error::ErrorKind;
    use crate::msg::Slice;
    use proptest::prelude::*;
    use zerocopy::{FromZeros, IntoBytes};

    #[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug, PartialEq, Clone, Copy)]
    #[repr(u8)]
    enum Mode {
        Idle = 0,
        Run = 1,
        Stop = 7,
    }

    /// A bool and an enum: 254 of 256 values of byte 0 and 253 of byte 1
    /// are invalid.
    #[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug, PartialEq, Clone, Copy)]
    #[repr(C)]
    struct Rec {
        flag: bool,
        mode: Mode,
        small: u16,
        value: u32,
    }

    fn valid(b: &[u8]) -> bool {
        b[0] <= 1 && matches!(b[1], 0 | 1 | 7)
    }

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            chunk_size: 1 << 20,
            max_chunks: 4,
            populate: false,
            ..PoolConfig::named("typed-read")
        })
    }

    fn own(p: &Pool, bytes: &[u8]) -> Msg {
        let mut b = p.try_alloc(bytes.len().max(1)).unwrap();
        b.truncate(bytes.len().max(1));
        b.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
        let m = Msg::from(b.freeze().unwrap());
        if bytes.is_empty() {
            Msg::new()
        } else {
            m
        }
    }

    fn rec(flag: bool, mode: Mode, value: u32) -> Rec {
        Rec {
            flag,
            mode,
            small: 9,
            value,
        }
    }

    #[test]
    fn an_empty_message_is_an_empty_slice_of_any_type() {
        let m = Msg::new();
        assert_eq!(m.borrow_typed_elems::<[u64]>(None), Ok(&[][..]));
        assert_eq!(m.borrow_typed_elems::<[Rec]>(None), Ok(&[][..]));
        assert_eq!(m.borrow_typed::<[u32; 0]>(None), Ok(&[]));
        assert_eq!(m.read_typed_vec::<Rec>(None), Ok(vec![]));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn own_messages_are_read_and_borrowed_in_place() {
        let p = pool();
        let tag = Tag::new("test.Rec", 1);
        for t in [None, Some(&tag)] {
            let mut b = p.alloc_typed::<Rec>(t).unwrap();
            *b = rec(true, Mode::Stop, 42);
            let m = b.into_msg().unwrap();
            assert!(m.is_immutable());
            assert_eq!(m.read_typed::<Rec>(t).unwrap(), rec(true, Mode::Stop, 42));
            let r: &Rec = m.borrow_typed(t).unwrap();
            assert_eq!(*r, rec(true, Mode::Stop, 42));
            let view_ptr = m.slices()[0].view().as_ptr();
            let offset = if t.is_some() { 128 } else { 0 };
            assert_eq!(
                std::ptr::from_ref(r).cast::<u8>(),
                view_ptr.wrapping_add(offset),
                "in place"
            );
        }
        let mut v = p.alloc_typed_elems::<[Rec]>(3, Some(&tag)).unwrap();
        v[2] = rec(false, Mode::Run, 5);
        let m = v.into_msg().unwrap();
        let all = m.read_typed_vec::<Rec>(Some(&tag)).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[2], rec(false, Mode::Run, 5));
        let s: &[Rec] = m.borrow_typed_elems(Some(&tag)).unwrap();
        assert_eq!(s, &all[..]);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn volatile_messages_are_copied_out_never_borrowed() {
        let p = pool();
        let (tx, rx) = Channel::pair(ChannelConfig::default()).unwrap();
        let mut b = p.alloc_typed::<Rec>(None).unwrap();
        *b = rec(true, Mode::Run, 1);
        tx.send(b.into_msg().unwrap()).unwrap();
        let m = rx.recv().unwrap();
        assert!(!m.is_immutable());
        assert_eq!(m.read_typed::<Rec>(None).unwrap(), rec(true, Mode::Run, 1));
        let e = m.borrow_typed::<Rec>(None).unwrap_err();
        assert_eq!(
            e,
            TypedError::Volatile {
                ty: type_name::<Rec>()
            }
        );
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(matches!(
            m.borrow_typed_elems::<[u8]>(None),
            Err(TypedError::Volatile { .. })
        ));
        // Copied into a buffer of our own, it can be borrowed.
        let mine = crate::forward::copy_into(&p, &m, std::time::Duration::from_secs(1)).unwrap();
        assert_eq!(
            *mine.borrow_typed::<Rec>(None).unwrap(),
            rec(true, Mode::Run, 1)
        );
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn fragmented_and_misaligned_messages_are_copied_out_never_borrowed() {
        let p = pool();
        let bytes = rec(true, Mode::Idle, 0x0102_0304).as_bytes().to_vec();
        let mut m = own(&p, &bytes[..3]);
        m.join(own(&p, &bytes[3..])).unwrap();
        assert_eq!(
            m.read_typed::<Rec>(None).unwrap(),
            rec(true, Mode::Idle, 0x0102_0304)
        );
        assert_eq!(
            m.borrow_typed::<Rec>(None).unwrap_err(),
            TypedError::Fragmented {
                ty: type_name::<Rec>(),
                slices: 2
            }
        );
        // One slice starting at an odd offset of its buffer.
        let mut b = p.try_alloc(9).unwrap();
        b.as_mut_slice()[1..].copy_from_slice(&bytes);
        let odd = Msg::from_slices(Slice::new(b.freeze().unwrap(), 1, 8)).unwrap();
        assert_eq!(
            odd.read_typed::<Rec>(None).unwrap(),
            rec(true, Mode::Idle, 0x0102_0304)
        );
        assert!(matches!(
            odd.borrow_typed::<Rec>(None),
            Err(TypedError::Misaligned { .. })
        ));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn sizes_and_tags_are_checked_with_clear_errors() {
        let p = pool();
        let tag = Tag::new("test.Rec", 1);
        let mut b = p.alloc_typed::<Rec>(Some(&tag)).unwrap();
        *b = rec(false, Mode::Idle, 0);
        let m = b.into_msg().unwrap();
        // Read without the tag: the size is wrong, and the error says why.
        let e = m.read_typed::<Rec>(None).unwrap_err();
        assert!(
            matches!(
                e,
                TypedError::Size {
                    len: 136,
                    tagged: true,
                    ..
                }
            ),
            "{e}"
        );
        // Another type's tag.
        let e = m
            .read_typed::<Rec>(Some(&Tag::new("test.Other", 1)))
            .unwrap_err();
        assert!(
            e.to_string().starts_with(
                "message carries type `test.Rec` v1 (size 8, align 4), expected `test.Other` v1"
            ),
            "{e}"
        );
        let e = m.read_typed::<u64>(Some(&tag)).unwrap_err();
        assert!(
            e.to_string()
                .contains("expected `test.Rec` v1 (size 8, align 8)"),
            "{e}"
        );
        assert_eq!(e.kind(), ErrorKind::Malformed);
        let e = m.read_typed_vec::<u32>(Some(&tag)).unwrap_err();
        assert!(e.to_string().contains("(size n × 4, align 4)"), "{e}");
        // An untagged message read with a tag.
        let plain = own(&p, rec(true, Mode::Run, 0).as_bytes());
        assert_eq!(
            plain.read_typed::<Rec>(Some(&tag)).unwrap_err(),
            TypedError::MissingTag {
                ty: type_name::<Rec>(),
                len: 8
            }
        );
        let long = own(&p, &[0u8; 200]);
        assert!(matches!(
            long.borrow_typed::<Rec>(Some(&tag)),
            Err(TypedError::MissingTag { len: 200, .. })
        ));
        assert!(matches!(
            Msg::new().read_typed::<Rec>(None),
            Err(TypedError::Size { len: 0, .. })
        ));
        assert!(matches!(
            Msg::new().borrow_typed::<Rec>(None),
            Err(TypedError::Size { len: 0, .. })
        ));
        assert_eq!(Msg::new().read_typed_vec::<Rec>(None).unwrap(), vec![]);
        assert!(matches!(
            own(&p, &[0u8; 12]).read_typed_vec::<Rec>(None),
            Err(TypedError::Size {
                len: 12,
                elem_size: 8,
                ..
            })
        ));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn slice_dsts_are_checked_for_size_and_alignment_against_the_tag() {
        #[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug)]
        #[repr(C)]
        struct Frame {
            mode: Mode,
            flag: bool,
            width: u16,
            pixels: [u16],
        }
        let p = pool();
        let tag = Tag::new("test.Frame", 1);
        let mut f = p.alloc_typed_elems::<Frame>(5, Some(&tag)).unwrap();
        f.mode = Mode::Run;
        f.pixels[4] = 99;
        let m = f.into_msg().unwrap();
        let back: &Frame = m.borrow_typed_elems(Some(&tag)).unwrap();
        assert_eq!(
            (back.mode, back.pixels.len(), back.pixels[4]),
            (Mode::Run, 5, 99)
        );
        // Bytes that make an invalid header, and an odd length.
        let mut bytes = m.to_vec();
        bytes[128] = 3;
        assert!(matches!(
            own(&p, &bytes).borrow_typed_elems::<Frame>(Some(&tag)),
            Err(TypedError::Invalid { .. })
        ));
        bytes[128] = 1;
        bytes.push(0);
        assert!(matches!(
            own(&p, &bytes).borrow_typed_elems::<Frame>(Some(&tag)),
            Err(TypedError::Size { .. })
        ));
        // A tag that claims another alignment for the same sizes.
        bytes.pop();
        bytes[32] = 4;
        let e = own(&p, &bytes)
            .borrow_typed_elems::<Frame>(Some(&tag))
            .unwrap_err();
        assert!(
            e.to_string().contains(
                "(size 4 + n × 2, align 4), expected `test.Frame` v1 (size 4 + n × 2, align 2)"
            ),
            "{e}"
        );
    }

    proptest! {
        /// Any bytes, any length: the value when they are a valid `Rec`,
        /// `Invalid` or `Size` otherwise — the same whether read from a
        /// copy or borrowed in place. Never a panic or an invalid value.
        #[test]
        #[cfg_attr(miri, ignore = "pool: its buffers are memfd regions, not modelled by Miri")]
        fn random_bytes_are_a_valid_rec_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            let p = pool();
            let m = own(&p, &bytes);
            let read = m.read_typed::<Rec>(None);
            let borrowed = m.borrow_typed::<Rec>(None).copied();
            prop_assert_eq!(&read, &borrowed);
            match read {
                Ok(r) => {
                    prop_assert!(bytes.len() == 8 && valid(&bytes));
                    prop_assert_eq!(r.as_bytes(), &bytes[..]);
                }
                Err(TypedError::Invalid { .. }) => prop_assert!(bytes.len() == 8 && !valid(&bytes)),
                Err(TypedError::Size { len, .. }) => {
                    prop_assert_eq!(len, bytes.len());
                    prop_assert!(bytes.len() != 8);
                }
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
            let all = m.read_typed_vec::<Rec>(None);
            let each_valid = bytes.chunks_exact(8).all(valid);
            match all {
                Ok(v) => {
                    prop_assert!(bytes.len() % 8 == 0 && each_valid);
                    prop_assert_eq!(v.as_bytes(), &bytes[..]);
                }
                Err(TypedError::Invalid { .. }) => prop_assert!(bytes.len() % 8 == 0 && !each_valid),
                Err(TypedError::Size { .. }) => prop_assert!(bytes.len() % 8 != 0),
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
            // As a tagged message: random bytes are never a tag.
            prop_assert!(m.read_typed::<Rec>(Some(&Tag::of::<Rec>())).is_err());
        }

        /// Changing any one byte of a tag gets the message refused; a
        /// change in the payload is caught by validation or gives the
        /// value those bytes make.
        #[test]
        #[cfg_attr(miri, ignore = "pool: its buffers are memfd regions, not modelled by Miri")]
        fn every_change_to_a_tag_is_refused(at in 0usize..136, to in any::<u8>(), flag in any::<bool>()) {
            let p = pool();
            let tag = Tag::new("test.Rec", 2);
            let mut b = p.alloc_typed::<Rec>(Some(&tag)).unwrap();
            *b = rec(flag, Mode::Stop, 77);
            let mut bytes = b.into_msg().unwrap().to_vec();
            let before = bytes[at];
            bytes[at] = to;
            let m = own(&p, &bytes);
            let got = m.read_typed::<Rec>(Some(&tag));
            prop_assert_eq!(&got, &m.borrow_typed::<Rec>(Some(&tag)).copied());
            if to == before {
                prop_assert!(got.is_ok());
            } else if at < TAG_LEN {
                prop_assert!(got.is_err(), "byte {} changed to {}: {:?}", at, to, got);
            } else {
                prop_assert_eq!(got.is_ok(), valid(&bytes[TAG_LEN..]));
            }
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn a_sender_rewriting_a_volatile_buffer_gets_errors_or_values_never_ub() {
        // The originator keeps its writable mapping: flip the bool between
        // valid and invalid values while the receiver reads. Every read is a
        // value the copy held, or Invalid.
        let p = pool();
        let (tx, rx) = Channel::pair(ChannelConfig::default()).unwrap();
        let mut b = p.alloc_typed::<Rec>(None).unwrap();
        *b = rec(false, Mode::Idle, 3);
        let m = b.into_msg().unwrap();
        let addr = m.slices()[0].fbuf().as_ptr() as usize;
        tx.send(m).unwrap();
        let got = rx.recv().unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut i = 0u8;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // SAFETY: the first byte of our own pool buffer, still
                    // mapped writable by this process (the pool's chunk);
                    // no reference to it exists here (the receiver reads
                    // through View), so a volatile write races only with
                    // volatile reads — the hostile originator on purpose.
                    unsafe { (addr as *mut u8).write_volatile(i % 3) };
                    i = i.wrapping_add(1);
                }
            });
            let (mut ok, mut bad) = (0, 0);
            for _ in 0..20_000 {
                match got.read_typed::<Rec>(None) {
                    Ok(r) => {
                        assert_eq!((r.mode, r.value), (Mode::Idle, 3));
                        ok += 1;
                    }
                    Err(TypedError::Invalid { .. }) => bad += 1,
                    Err(e) => panic!("unexpected {e}"),
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            assert_eq!(ok + bad, 20_000);
        });
    }
}
