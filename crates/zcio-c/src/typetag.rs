//! The type tag of `zcio::typed` for types described at run time (C's
//! `struct zcio_type`, Python's ctypes classes): the one place outside the
//! `zcio` crate that writes and checks the 128-byte tag. `zcio-py`
//! compiles this same file (`#[path]`), so C and Python put the same bytes
//! on the wire; the tests below check them against `zcio::typed` itself
//! (a Rust-tagged message read here, a message tagged here read by
//! `Msg::read_typed`).
//!
//! `zcio::typed` writes its tag from a Rust type (`TypedBuf<T>`); a
//! runtime layout has no `T`, so the encoding and the checks below follow
//! the wire layout documented in `zcio::typed` (offsets, FNV-1a of the
//! name, `offset = max(128, align)`, the checks in the same order). Once
//! `zcio::typed` offers a public encoder/checker for a runtime layout,
//! this file should call it instead.

use std::fmt;

use zcio::typed::{TAG_LEN, TAG_MAGIC, TAG_VERSION};

/// Bytes of the name kept in the tag (the hash covers all of it).
const NAME_BYTES: usize = 72;
/// `flags` bit: the type ends in a slice.
const SLICE_TAIL: u16 = 1;
/// The largest alignment Rust allows.
const MAX_ALIGN: usize = 1 << 29;

/// A type described at run time: what a Rust `Tag` plus the layout of `T`
/// say. `name: None` is an untagged message (only its length is checked).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout<'a> {
    pub(crate) name: Option<&'a str>,
    pub(crate) schema: u32,
    /// `size_of::<T>()`; for a type ending in a slice, its size with no
    /// elements.
    pub(crate) size: usize,
    pub(crate) align: usize,
    /// 0 for a sized type; the bytes each trailing element adds.
    pub(crate) elem_size: usize,
}

/// Why a message was refused (texts as `zcio::typed::TypedError`'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The layout itself is unusable (the caller's mistake, not the
    /// sender's).
    BadLayout(String),
    MissingTag(usize),
    CorruptTag(&'static str),
    Mismatch {
        found: String,
        expected: String,
    },
    Size {
        len: usize,
        expected: String,
    },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::BadLayout(why) => write!(f, "invalid type description: {why}"),
            Refused::MissingTag(len) => write!(
                f,
                "message of {len} bytes has no type tag: the sender did not tag it (read it \
                 untagged, or have the sender tag it)"
            ),
            Refused::CorruptTag(reason) => write!(
                f,
                "the message's type tag is corrupt ({reason}): the sender is buggy or hostile"
            ),
            Refused::Mismatch { found, expected } => write!(
                f,
                "message carries type {found}, expected {expected}: the sender sent another \
                 type, or another version of it"
            ),
            Refused::Size { len, expected } => write!(
                f,
                "message payload of {len} bytes is not {expected}: the sender sent another type \
                 or another version of it"
            ),
        }
    }
}

impl Layout<'_> {
    /// Whether the description is one a Rust type could have.
    pub(crate) fn validate(&self) -> Result<(), Refused> {
        let bad = |s: &str| Err(Refused::BadLayout(s.into()));
        if !self.align.is_power_of_two() || self.align > MAX_ALIGN {
            return bad("align must be a power of two up to 2^29");
        }
        if self.elem_size == 0 && !self.size.is_multiple_of(self.align) {
            return bad("size must be a multiple of align (as every C and Rust type's is)");
        }
        if !self.elem_size.is_multiple_of(self.align) {
            return bad("elem_size must be a multiple of align (no padding at any length)");
        }
        if self.elem_size == 0 && self.size == 0 && self.name.is_none() {
            return bad("an untagged zero-sized type has no bytes to send");
        }
        Ok(())
    }

    /// Where the payload starts: after the tag and its padding, or at 0.
    pub(crate) fn offset(&self) -> usize {
        match self.name {
            Some(_) => TAG_LEN.max(self.align),
            None => 0,
        }
    }

    /// Whether `len` payload bytes are a size of the type.
    pub(crate) fn payload_fits(&self, len: usize) -> bool {
        match self.elem_size {
            0 => len == self.size,
            e => len >= self.size && (len - self.size).is_multiple_of(e),
        }
    }

    fn size_error(&self, len: usize) -> Refused {
        let expected = match (self.elem_size, self.size) {
            (0, s) => format!("{s} bytes"),
            (e, 0) => format!("a multiple of {e} bytes"),
            (e, s) => format!("{s} + n × {e} bytes"),
        };
        Refused::Size { len, expected }
    }

    /// The bytes before the payload: the tag and the zeros up to
    /// `offset()` (empty for an untagged layout).
    pub(crate) fn header(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.offset()];
        let Some(name) = self.name else {
            return out;
        };
        let name = name.as_bytes();
        let flags = if self.elem_size > 0 { SLICE_TAIL } else { 0 };
        out[0..8].copy_from_slice(&TAG_MAGIC);
        out[8..10].copy_from_slice(&TAG_VERSION.to_le_bytes());
        out[10..12].copy_from_slice(&flags.to_le_bytes());
        out[12..16].copy_from_slice(&u32_of(self.offset()).to_le_bytes());
        out[16..24].copy_from_slice(&(self.size as u64).to_le_bytes());
        out[24..32].copy_from_slice(&(self.elem_size as u64).to_le_bytes());
        out[32..36].copy_from_slice(&u32_of(self.align).to_le_bytes());
        out[36..40].copy_from_slice(&self.schema.to_le_bytes());
        out[40..48].copy_from_slice(&fnv1a64(name).to_le_bytes());
        out[48..52].copy_from_slice(&u32_of(name.len()).to_le_bytes());
        // 52..56: reserved, zero.
        let n = name.len().min(NAME_BYTES);
        out[56..56 + n].copy_from_slice(&name[..n]);
        out
    }

    /// Check a message of `msg_len` bytes whose first bytes — a private
    /// copy of `min(msg_len, 128)` of them — are `head`; returns where the
    /// payload starts and its length. The same checks, in the same order,
    /// as `zcio::typed`.
    pub(crate) fn check(&self, head: &[u8], msg_len: usize) -> Result<(usize, usize), Refused> {
        self.validate()?;
        let Some(name) = self.name else {
            return if self.payload_fits(msg_len) {
                Ok((0, msg_len))
            } else {
                Err(self.size_error(msg_len))
            };
        };
        if msg_len < TAG_LEN || head.len() < TAG_LEN || head[..8] != TAG_MAGIC {
            return Err(Refused::MissingTag(msg_len));
        }
        let u16_at = |o: usize| u16::from_le_bytes([head[o], head[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(head[o..o + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |o: usize| u64::from_le_bytes(head[o..o + 8].try_into().unwrap_or([0; 8]));
        let corrupt = |r| Err(Refused::CorruptTag(r));
        if u16_at(8) != TAG_VERSION {
            return corrupt("an unknown version; this build reads version 1");
        }
        let flags = u16_at(10);
        if flags & !SLICE_TAIL != 0 || u32_at(52) != 0 {
            return corrupt("unknown flags or a non-zero reserved field");
        }
        let name_len = u32_at(48) as usize;
        let kept = &head[56..TAG_LEN];
        if name_len <= NAME_BYTES
            && (kept[name_len..].iter().any(|&b| b != 0)
                || fnv1a64(&kept[..name_len]) != u64_at(40))
        {
            return corrupt("its name and the name's hash disagree");
        }
        let align = u32_at(32) as usize;
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return corrupt("an alignment that is not a power of two up to 2^29");
        }
        let offset = u32_at(12) as usize;
        if offset != TAG_LEN.max(align) || offset > msg_len {
            return corrupt("a payload offset other than max(128, alignment) within the message");
        }
        let want_flags = if self.elem_size > 0 { SLICE_TAIL } else { 0 };
        let same = u64_at(40) == fnv1a64(name.as_bytes())
            && name_len == name.len()
            && u32_at(36) == self.schema
            && flags == want_flags
            && u64_at(16) == self.size as u64
            && u64_at(24) == self.elem_size as u64
            && align == self.align;
        if !same {
            let (shown, cut) = printable(&kept[..name_len.min(NAME_BYTES)]);
            let found = describe(
                &shown,
                cut || name_len > NAME_BYTES,
                u32_at(36),
                flags & SLICE_TAIL != 0,
                u64_at(16),
                u64_at(24),
                align as u64,
            );
            let (mine, cut) = printable(name.as_bytes());
            let expected = describe(
                &mine,
                cut,
                self.schema,
                self.elem_size > 0,
                self.size as u64,
                self.elem_size as u64,
                self.align as u64,
            );
            return Err(Refused::Mismatch { found, expected });
        }
        let len = msg_len - offset;
        if !self.payload_fits(len) {
            return Err(self.size_error(len));
        }
        Ok((offset, len))
    }
}

/// A type as `zcio::typed::TypeInfo` prints it.
fn describe(
    name: &str,
    cut: bool,
    schema: u32,
    slice_tail: bool,
    size: u64,
    elem: u64,
    align: u64,
) -> String {
    let more = if cut { "…" } else { "" };
    let size = match (slice_tail, size) {
        (false, s) => s.to_string(),
        (true, 0) => format!("n × {elem}"),
        (true, s) => format!("{s} + n × {elem}"),
    };
    format!("`{name}{more}` v{schema} (size {size}, align {align})")
}

/// FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn u32_of(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// At most `NAME_BYTES` of a name, fit to print (a peer wrote it).
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
