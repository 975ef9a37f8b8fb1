//! The type tag of `zcio::typed` for types described at run time (C's
//! `struct zcio_type`, Python's ctypes classes). `zcio-py`
//! compiles this same file (`#[path]`), so C and Python put the same bytes
//! on the wire; the tests below check them against `zcio::typed` itself
//! (a Rust-tagged message read here, a message tagged here read by
//! `Msg::read_typed`).
//!
//! The tag itself is written and checked by `zcio::typed` (`Tag::encode`,
//! `Tag::check` with a `RuntimeShape`): this file only describes C's and
//! Python's layouts to it, checks the payload's size and words the
//! verdicts for the frontends.

use std::fmt;

use zcio::typed::{RuntimeShape, Tag, TypedError};

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
            Some(_) => Tag::LEN.max(self.align),
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

    /// The shape `zcio::typed` checks and encodes.
    fn shape(&self) -> RuntimeShape {
        RuntimeShape {
            size: self.size,
            align: self.align,
            elem_size: (self.elem_size > 0).then_some(self.elem_size),
        }
    }

    /// The bytes before the payload: the tag and the zeros up to
    /// `offset()` (empty for an untagged layout), as `zcio::typed` writes
    /// them (`Tag::encode`).
    pub(crate) fn header(&self) -> Vec<u8> {
        let Some(name) = self.name else {
            return Vec::new();
        };
        Tag::new(name.to_owned(), self.schema)
            .encode(self.shape())
            .unwrap_or_else(|_| vec![0u8; self.offset()])
    }

    /// Check a message of `msg_len` bytes whose first bytes — a private
    /// copy of `min(msg_len, 128)` of them — are `head`; returns where the
    /// payload starts and its length. The tag is checked by `zcio::typed`
    /// itself (`Tag::check`: the checks `Msg::read_typed` makes), the
    /// payload's size here.
    pub(crate) fn check(&self, head: &[u8], msg_len: usize) -> Result<(usize, usize), Refused> {
        self.validate()?;
        let offset = match self.name {
            None => 0,
            Some(name) => Tag::new(name.to_owned(), self.schema)
                .check(head, msg_len, self.shape())
                .map_err(refused)?,
        };
        let len = msg_len - offset;
        if !self.payload_fits(len) {
            return Err(self.size_error(len));
        }
        Ok((offset, len))
    }
}

/// `zcio::typed`'s verdict in the frontends' terms.
fn refused(e: TypedError) -> Refused {
    match e {
        TypedError::MissingTag { len, .. } => Refused::MissingTag(len),
        TypedError::CorruptTag { reason } => Refused::CorruptTag(reason),
        TypedError::TagMismatch { found, expected } => Refused::Mismatch {
            found: found.to_string(),
            expected: expected.to_string(),
        },
        other => Refused::BadLayout(other.to_string()),
    }
}
