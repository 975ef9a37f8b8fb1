//! The type tag: an optional 128-byte header before a typed payload that
//! names the type (a name and a schema version, with a hash of the name)
//! and its layout, so a receiver refuses a message of the wrong type with
//! a clear error instead of misreading it.
//!
//! The layout (`TagWire`, `#[repr(C)]`, integers little-endian and
//! unaligned) is documented in the module docs of `zcio::typed` and checked
//! by the compile-time asserts below.

use std::borrow::Cow;

use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::typed::type_info::TypeInfo;
use crate::typed::TypedError;

/// Length of the type tag in bytes.
pub(crate) const TAG_LEN: usize = 128;
/// The first eight bytes of every type tag.
const TAG_MAGIC: [u8; 8] = *b"ZCIOTYPE";
/// The tag layout this build writes and reads.
const TAG_VERSION: u16 = 1;

/// Bytes of the name kept in the tag (the hash covers all of it).
const NAME_BYTES: usize = 72;
/// `flags` bit: the type ends in a slice.
const SLICE_TAIL: u16 = 1;
/// The largest alignment Rust allows (and so the largest payload offset).
const MAX_ALIGN: usize = 1 << 29;

/// Who a message's bytes claim to be: a name and the sender's version of
/// the type (its *schema*). Sender and receiver pass equal tags; the
/// layout (size, alignment, element size) is taken from the Rust type on
/// each side and checked too.
///
/// Prefer a name of your own ([`Tag::new`]) for a type that two different
/// programs share: [`Tag::of`] uses [`std::any::type_name`], which names
/// the crate that defines the type and may change between compiler
/// versions.
///
/// ```
/// use zcio::typed::Tag;
///
/// let tag = Tag::new("video.Frame", 2);
/// assert_eq!((tag.name(), tag.schema()), ("video.Frame", 2));
/// assert_eq!(Tag::of::<u32>().name(), "u32");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tag {
    name: Cow<'static, str>,
    schema: u32,
}

impl Tag {
    /// Length of the type tag in bytes.
    pub const LEN: usize = TAG_LEN;
    /// The first eight bytes of every type tag.
    pub const MAGIC: [u8; 8] = TAG_MAGIC;
    /// The tag layout this build writes and reads.
    pub const VERSION: u16 = TAG_VERSION;

    /// A tag with a name and a schema version of your choosing.
    pub fn new(name: impl Into<Cow<'static, str>>, schema: u32) -> Self {
        Self {
            name: name.into(),
            schema,
        }
    }

    /// A tag named after the type ([`std::any::type_name`]), schema 0.
    pub fn of<T: ?Sized>() -> Self {
        Self::new(std::any::type_name::<T>(), 0)
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema version.
    pub fn schema(&self) -> u32 {
        self.schema
    }
}

/// The layout of a type described at run time — a C struct, a Python
/// ctypes class — for [`Tag::encode`] and [`Tag::check`]: what `size_of`
/// and `align_of` say, and for a type ending in a slice the bytes each
/// element adds (its `size` is then the size with no elements). This is
/// how the C and Python frontends put the very tag `TypedBuf<T>` writes on
/// the wire without a Rust type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuntimeShape {
    /// Size in bytes (with no elements, for a type ending in a slice).
    pub size: usize,
    /// Alignment in bytes (a power of two).
    pub align: usize,
    /// `Some(bytes per element)` for a type ending in a slice.
    pub elem_size: Option<usize>,
}

impl RuntimeShape {
    fn shape(&self) -> Result<Shape, TypedError> {
        if !self.align.is_power_of_two() || self.align > MAX_ALIGN {
            return Err(TypedError::BadShape {
                reason: "the alignment is not a power of two up to 2^29",
            });
        }
        if self.elem_size == Some(0) {
            return Err(TypedError::BadShape {
                reason: "a type ending in a slice has elements of at least one byte",
            });
        }
        Ok(Shape {
            slice_tail: self.elem_size.is_some(),
            size: self.size,
            elem_size: self.elem_size.unwrap_or(0),
            align: Some(self.align),
        })
    }
}

impl Tag {
    /// The tag for a value of `shape`, zero-padded to where its payload
    /// starts (`max(128, align)` bytes): the bytes `TypedBuf` writes before
    /// a value of the same type, so a Rust receiver reads it with
    /// `Msg::read_typed` (and the reverse with [`Tag::check`]).
    ///
    /// # Errors
    /// `BadShape` for a layout no type can have.
    pub fn encode(&self, shape: RuntimeShape) -> Result<Vec<u8>, TypedError> {
        let sh = shape.shape()?;
        let offset = payload_offset(shape.align);
        let mut out = vec![0u8; offset];
        out[..TAG_LEN].copy_from_slice(TagWire::new(self, &sh, shape.align, offset).as_bytes());
        Ok(out)
    }

    /// Check the tag of a message of `msg_len` bytes — `head` is a private
    /// copy of its first `TAG_LEN` bytes (fewer if the message is shorter)
    /// — against this tag and `shape`, with the checks `Msg::read_typed`
    /// makes; returns where the payload starts. The payload's size is the
    /// caller's to check.
    ///
    /// # Errors
    /// `MissingTag`, `CorruptTag`, `TagMismatch` (both types named),
    /// `BadShape`.
    pub fn check(
        &self,
        head: &[u8],
        msg_len: usize,
        shape: RuntimeShape,
    ) -> Result<usize, TypedError> {
        let sh = shape.shape()?;
        let ty = "a type described at run time";
        let Some(bytes) = head.get(..TAG_LEN).filter(|_| msg_len >= TAG_LEN) else {
            return Err(TypedError::MissingTag { ty, len: msg_len });
        };
        let wire = TagWire::read_from_bytes(bytes)
            .map_err(|_| TypedError::MissingTag { ty, len: msg_len })?;
        wire.check(msg_len, self, &sh, ty)
    }
}

/// The layout of a type as the tag records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) slice_tail: bool,
    pub(crate) size: usize,
    pub(crate) elem_size: usize,
    /// `None` for a type ending in a slice until a value tells.
    pub(crate) align: Option<usize>,
}

impl Shape {
    /// A sized type.
    pub(crate) fn sized<T>() -> Self {
        Self {
            slice_tail: false,
            size: size_of::<T>(),
            elem_size: 0,
            align: Some(align_of::<T>()),
        }
    }

    /// `[E]`, as `Msg::read_typed_vec::<E>` reads it (the same shape as
    /// `Shape::elems::<[E]>` with its alignment known).
    pub(crate) fn slice_of<E>() -> Self {
        Self {
            slice_tail: true,
            size: 0,
            elem_size: size_of::<E>(),
            align: Some(align_of::<E>()),
        }
    }

    /// A type ending in a slice (`[E]` or a zerocopy slice DST). Its size
    /// with `n` elements is `base + round_up(phase + n × elem, align)`, so
    /// the sizes at `n = 2^29` and `2^30` — multiples of every alignment,
    /// where the rounding cancels — differ by exactly `2^29 × elem`.
    pub(crate) fn elems<T: ?Sized + KnownLayout<PointerMetadata = usize>>() -> Self {
        let mut k = MAX_ALIGN;
        let elem_size = loop {
            let diff = T::size_for_metadata(2 * k)
                .zip(T::size_for_metadata(k))
                .map(|(b, a)| (b - a) / k);
            match diff {
                Some(e) => break e,
                // Only where usize is narrow and the element large.
                None if k > 1 => k /= 2,
                None => break 0,
            }
        };
        Self {
            slice_tail: true,
            size: T::size_for_metadata(0).unwrap_or(0),
            elem_size,
            align: None,
        }
    }

    fn info(&self, tag: &Tag) -> TypeInfo {
        let (name, name_truncated) = printable(tag.name.as_bytes());
        TypeInfo {
            name,
            name_truncated,
            schema: tag.schema,
            size: self.size as u64,
            elem_size: self.elem_size as u64,
            slice_tail: self.slice_tail,
            align: self.align.map(|a| a as u64),
        }
    }
}

/// The tag as it lies in the message (see the module docs).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy)]
#[repr(C)]
pub(crate) struct TagWire {
    magic: [u8; 8],
    version: U16,
    flags: U16,
    offset: U32,
    size: U64,
    elem_size: U64,
    align: U32,
    schema: U32,
    name_hash: U64,
    name_len: U32,
    reserved: U32,
    name: [u8; NAME_BYTES],
}

const _: () = {
    use std::mem::offset_of;
    assert!(size_of::<TagWire>() == TAG_LEN);
    assert!(align_of::<TagWire>() == 1);
    assert!(offset_of!(TagWire, version) == 8);
    assert!(offset_of!(TagWire, flags) == 10);
    assert!(offset_of!(TagWire, offset) == 12);
    assert!(offset_of!(TagWire, size) == 16);
    assert!(offset_of!(TagWire, elem_size) == 24);
    assert!(offset_of!(TagWire, align) == 32);
    assert!(offset_of!(TagWire, schema) == 36);
    assert!(offset_of!(TagWire, name_hash) == 40);
    assert!(offset_of!(TagWire, name_len) == 48);
    assert!(offset_of!(TagWire, reserved) == 52);
    assert!(offset_of!(TagWire, name) == 56);
};

/// Where the payload of a tagged message starts, for a type of alignment
/// `align`.
pub(crate) fn payload_offset(align: usize) -> usize {
    TAG_LEN.max(align)
}

impl TagWire {
    /// The tag for `tag` and `shape` (whose alignment is known), with the
    /// payload at `offset`.
    pub(crate) fn new(tag: &Tag, shape: &Shape, align: usize, offset: usize) -> Self {
        let name = tag.name.as_bytes();
        let mut kept = [0u8; NAME_BYTES];
        let n = name.len().min(NAME_BYTES);
        kept[..n].copy_from_slice(&name[..n]);
        Self {
            magic: TAG_MAGIC,
            version: TAG_VERSION.into(),
            flags: if shape.slice_tail { SLICE_TAIL } else { 0 }.into(),
            offset: u32_of(offset).into(),
            size: (shape.size as u64).into(),
            elem_size: (shape.elem_size as u64).into(),
            align: u32_of(align).into(),
            schema: tag.schema.into(),
            name_hash: fnv1a64(name).into(),
            name_len: u32_of(name.len()).into(),
            reserved: 0.into(),
            name: kept,
        }
    }

    /// What this tag says, for error messages.
    fn info(&self) -> TypeInfo {
        let len = (self.name_len.get() as usize).min(NAME_BYTES);
        let (name, cut) = printable(&self.name[..len]);
        TypeInfo {
            name,
            name_truncated: cut || self.name_len.get() as usize > NAME_BYTES,
            schema: self.schema.get(),
            size: self.size.get(),
            elem_size: self.elem_size.get(),
            slice_tail: self.flags.get() & SLICE_TAIL != 0,
            align: Some(u64::from(self.align.get())),
        }
    }

    /// Whether `bytes` start with a tag's magic.
    pub(crate) fn starts(bytes: &[u8]) -> bool {
        bytes.get(..TAG_MAGIC.len()) == Some(&TAG_MAGIC[..])
    }

    /// Check this tag — a private copy of the message's first `TAG_LEN`
    /// bytes — against what the receiver expects, for a message of
    /// `msg_len` bytes; returns where the payload starts. The alignment of
    /// a type ending in a slice is checked later ([`TagWire::check_align`]).
    pub(crate) fn check(
        &self,
        msg_len: usize,
        tag: &Tag,
        shape: &Shape,
        ty: &'static str,
    ) -> Result<usize, TypedError> {
        if self.magic != TAG_MAGIC {
            return Err(TypedError::MissingTag { ty, len: msg_len });
        }
        let corrupt = |reason| Err(TypedError::CorruptTag { reason });
        if self.version.get() != TAG_VERSION {
            return corrupt("an unknown version; this build reads version 1");
        }
        if self.flags.get() & !SLICE_TAIL != 0 || self.reserved.get() != 0 {
            return corrupt("unknown flags or a non-zero reserved field");
        }
        let name_len = self.name_len.get() as usize;
        if name_len <= NAME_BYTES
            && (self.name[name_len..].iter().any(|&b| b != 0)
                || fnv1a64(&self.name[..name_len]) != self.name_hash.get())
        {
            return corrupt("its name and the name's hash disagree");
        }
        let align = self.align.get() as usize;
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return corrupt("an alignment that is not a power of two up to 2^29");
        }
        let offset = self.offset.get() as usize;
        if offset != payload_offset(align) || offset > msg_len {
            return corrupt("a payload offset other than max(128, alignment) within the message");
        }
        let want = TagWire::new(tag, shape, shape.align.unwrap_or(align), offset);
        let same = self.name_hash == want.name_hash
            && self.name_len == want.name_len
            && self.schema == want.schema
            && self.flags == want.flags
            && self.size == want.size
            && self.elem_size == want.elem_size
            && self.align == want.align;
        if !same {
            return Err(self.mismatch(tag, shape));
        }
        Ok(offset)
    }

    /// After the payload was cast to a type ending in a slice: whether the
    /// tag's alignment is the value's.
    pub(crate) fn check_align(
        &self,
        tag: &Tag,
        shape: &Shape,
        align: usize,
    ) -> Result<(), TypedError> {
        if self.align.get() as usize == align {
            return Ok(());
        }
        let known = Shape {
            align: Some(align),
            ..*shape
        };
        Err(self.mismatch(tag, &known))
    }

    fn mismatch(&self, tag: &Tag, shape: &Shape) -> TypedError {
        TypedError::TagMismatch {
            found: Box::new(self.info()),
            expected: Box::new(shape.info(tag)),
        }
    }
}

/// FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn u32_of(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// At most `NAME_BYTES` of a name, fit to print: invalid UTF-8 replaced,
/// control characters escaped (a peer wrote these bytes). Whether it was
/// cut.
fn printable(bytes: &[u8]) -> (String, bool) {
    let cut = bytes.len() > NAME_BYTES;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(NAME_BYTES)]);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    (out, cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_shape_encodes_and_checks_the_tag_a_rust_type_gets() {
        #[repr(C)]
        struct Reading {
            _a: u32,
            _b: u64,
        }
        let tag = Tag::new("example.Reading", 3);
        let shape = RuntimeShape {
            size: size_of::<Reading>(),
            align: align_of::<Reading>(),
            elem_size: None,
        };
        let bytes = tag.encode(shape).unwrap();
        let rust = TagWire::new(&tag, &Shape::sized::<Reading>(), 8, 128);
        assert_eq!(bytes.len(), 128);
        assert_eq!(
            &bytes[..TAG_LEN],
            rust.as_bytes(),
            "the same bytes as TypedBuf's"
        );
        assert_eq!(tag.check(&bytes, 128 + 16, shape), Ok(128));
        let other = Tag::new("example.Reading", 4);
        assert!(matches!(
            other.check(&bytes, 144, shape),
            Err(TypedError::TagMismatch { .. })
        ));
        assert!(matches!(
            tag.check(&bytes[..40], 40, shape),
            Err(TypedError::MissingTag { .. })
        ));
        let bad = RuntimeShape { align: 3, ..shape };
        assert!(matches!(tag.encode(bad), Err(TypedError::BadShape { .. })));
        // A type ending in a slice, aligned past 128: the payload moves.
        let big = RuntimeShape {
            size: 0,
            align: 256,
            elem_size: Some(256),
        };
        let b = tag.encode(big).unwrap();
        assert_eq!(b.len(), 256);
        assert_eq!(tag.check(&b[..TAG_LEN], 512, big), Ok(256));
    }

    #[test]
    fn fnv_matches_the_published_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_tag_round_trips_and_describes_its_type() {
        let tag = Tag::new("demo.Pair", 3);
        let shape = Shape::sized::<[u32; 2]>();
        let wire = TagWire::new(&tag, &shape, 4, payload_offset(4));
        let bytes = wire.as_bytes();
        assert_eq!(&bytes[..8], b"ZCIOTYPE");
        assert_eq!(&bytes[8..10], &1u16.to_le_bytes());
        assert_eq!(&bytes[12..16], &128u32.to_le_bytes());
        assert_eq!(&bytes[16..24], &8u64.to_le_bytes());
        assert_eq!(&bytes[56..65], b"demo.Pair");
        let back = TagWire::read_from_bytes(bytes).unwrap();
        assert_eq!(back.check(136, &tag, &shape, "t"), Ok(128));
        assert_eq!(back.info().to_string(), "`demo.Pair` v3 (size 8, align 4)");
        // Another schema, another size: a mismatch that names both.
        let e = back
            .check(136, &Tag::new("demo.Pair", 4), &shape, "t")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "message carries type `demo.Pair` v3 (size 8, align 4), expected `demo.Pair` v4 \
             (size 8, align 4): the sender sent another type, or another version of it"
        );
        let e = back
            .check(136, &tag, &Shape::sized::<u64>(), "t")
            .unwrap_err();
        assert!(matches!(e, TypedError::TagMismatch { .. }), "{e}");
        // A payload offset past the message.
        assert!(matches!(
            back.check(100, &tag, &shape, "t"),
            Err(TypedError::CorruptTag { .. })
        ));
    }

    #[test]
    fn slice_shapes_agree_between_writer_and_reader() {
        let w = Shape::elems::<[u32]>();
        assert_eq!(
            Shape {
                align: Some(4),
                ..w
            },
            Shape::slice_of::<u32>()
        );
        #[derive(KnownLayout)]
        #[repr(C)]
        #[allow(dead_code)]
        struct Dst {
            a: u64,
            b: u8,
            tail: [u16],
        }
        let d = Shape::elems::<Dst>();
        assert_eq!((d.size, d.elem_size, d.slice_tail), (16, 2, true));
    }

    #[test]
    fn long_and_hostile_names_are_cut_and_escaped() {
        let long = "x".repeat(100);
        let tag = Tag::new(long.clone(), 0);
        let shape = Shape::sized::<u8>();
        let wire = TagWire::new(&tag, &shape, 1, 128);
        assert_eq!(wire.check(129, &tag, &shape, "u8"), Ok(128));
        let info = wire.info();
        assert!(info.name_truncated && info.name.len() == 72);
        assert!(info.to_string().starts_with(&format!("`{}…`", &long[..72])));
        let (p, _) = printable(b"a\x1b[2Jb\xff");
        assert_eq!(p, "a\\u{1b}[2Jb\u{fffd}");
    }

    #[test]
    fn every_rule_of_the_tag_is_checked() {
        let tag = Tag::new("t", 1);
        let shape = Shape::sized::<u64>();
        let good = TagWire::new(&tag, &shape, 8, 128);
        let check = |f: &dyn Fn(&mut TagWire)| {
            let mut w = good;
            f(&mut w);
            w.check(136, &tag, &shape, "u64")
        };
        assert_eq!(check(&|_| {}), Ok(128));
        assert!(matches!(
            check(&|w| w.magic[0] = b'X'),
            Err(TypedError::MissingTag { len: 136, .. })
        ));
        let corrupt: [&dyn Fn(&mut TagWire); 7] = [
            &|w| w.version = 2.into(),
            &|w| w.flags = 2.into(),
            &|w| w.reserved = 1.into(),
            &|w| w.name[0] = b'u',
            &|w| w.name[5] = b'u',
            &|w| w.align = 3.into(),
            &|w| w.offset = 64.into(),
        ];
        for f in corrupt {
            assert!(
                matches!(check(f), Err(TypedError::CorruptTag { .. })),
                "{:?}",
                check(f)
            );
        }
        let mismatch: [&dyn Fn(&mut TagWire); 4] = [
            &|w| w.schema = 2.into(),
            &|w| w.size = 4.into(),
            &|w| w.flags = SLICE_TAIL.into(),
            &|w| w.align = 4.into(),
        ];
        for f in mismatch {
            assert!(
                matches!(check(f), Err(TypedError::TagMismatch { .. })),
                "{:?}",
                check(f)
            );
        }
    }
}
