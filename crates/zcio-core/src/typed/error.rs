//! [`TypedError`]: why a typed message could not be made, read or
//! borrowed.

use thiserror::Error;

use crate::buf::AllocError;
use crate::typed::type_info::TypeInfo;

/// A typed message could not be allocated, read or borrowed. Nothing a
/// peer sends can do more than produce one of these: invalid bytes are
/// refused, never turned into a value.
///
/// Each message says what to do about it. [`TypedError::kind`] places the
/// error in the crate's vocabulary: what the sender got wrong is
/// `Malformed`; a message that cannot be *borrowed* in place (but can be
/// copied out) is `Unsupported`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TypedError {
    /// The payload's length is not a size of the type.
    #[error(
        "message payload of {len} bytes is not {} for `{ty}`: the sender sent another type or \
         another version of it{}",
        size_text(*size, *elem_size),
        if *tagged {
            "; the message starts with a type tag: read it with the sender's Tag"
        } else {
            " (tag the messages with a zcio::typed::Tag to have this reported as a type mismatch)"
        }
    )]
    Size {
        /// The type expected.
        ty: &'static str,
        /// Bytes of payload the message has.
        len: usize,
        /// The type's size (for a type ending in a slice: with no elements).
        size: usize,
        /// Bytes per element of a type ending in a slice; 0 for a sized type.
        elem_size: usize,
        /// The message was read without a tag, yet starts with one.
        tagged: bool,
    },
    /// The bytes are not a valid value of the type (zerocopy's
    /// `TryFromBytes` refused them).
    #[error(
        "the message's bytes are not a valid `{ty}` (an invalid bool, enum discriminant or other \
         forbidden bit pattern): the sender is buggy or hostile; the message was not used"
    )]
    Invalid {
        /// The type expected.
        ty: &'static str,
    },
    /// The bytes are not aligned for the type, so no reference to them can
    /// be made.
    #[error(
        "cannot reference `{ty}` in place: its bytes (at {addr:#x}) are not aligned for it; copy \
         it out with Msg::read_typed or Msg::read_typed_vec"
    )]
    Misaligned {
        /// The type expected.
        ty: &'static str,
        /// The address of the first byte of the payload.
        addr: usize,
    },
    /// A peer may still write the message's bytes (a volatile buffer), so
    /// no reference to them may be made.
    #[error(
        "cannot borrow `{ty}` in place: a peer may still write the message's bytes (a volatile \
         buffer); copy it out with Msg::read_typed or Msg::read_typed_vec, or into a buffer of \
         your own with zcio::forward::copy_into and borrow from that (or have the sender send \
         secured buffers, Pool::alloc_secured, which can be borrowed in place)"
    )]
    Volatile {
        /// The type expected.
        ty: &'static str,
    },
    /// The message is made of several slices; a reference needs one.
    #[error(
        "cannot borrow `{ty}` in place: the message has {slices} slices and a reference needs \
         one contiguous slice; copy it out with Msg::read_typed or Msg::read_typed_vec"
    )]
    Fragmented {
        /// The type expected.
        ty: &'static str,
        /// How many slices the message has.
        slices: usize,
    },
    /// A tag was expected but the message does not start with one.
    #[error(
        "message of {len} bytes does not start with a type tag, but a tagged `{ty}` was \
         expected: the sender did not tag it; read it without a tag, or have the sender tag it"
    )]
    MissingTag {
        /// The type expected.
        ty: &'static str,
        /// The message's length.
        len: usize,
    },
    /// The message starts with a tag that breaks the tag's own rules.
    #[error(
        "the message's type tag is corrupt ({reason}): the sender is buggy or hostile; the \
         message was not used"
    )]
    CorruptTag {
        /// Which rule the tag breaks.
        reason: &'static str,
    },
    /// The message is tagged with another type.
    #[error(
        "message carries type {found}, expected {expected}: the sender sent another type, or \
         another version of it"
    )]
    TagMismatch {
        /// What the tag says.
        found: Box<TypeInfo>,
        /// What the receiver asked for.
        expected: Box<TypeInfo>,
    },
    /// The type with that many elements does not fit in memory.
    #[error("cannot allocate a `{ty}` with {elems} elements: its size does not fit in memory")]
    TooLarge {
        /// The type asked for.
        ty: &'static str,
        /// The element count asked for.
        elems: usize,
    },
    /// The buffer could not be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// A layout described at run time ([`RuntimeShape`](super::RuntimeShape))
    /// that no type can have.
    #[error("invalid type layout: {reason}; describe the type as size_of/align_of report it")]
    BadShape {
        /// What is wrong with it.
        reason: &'static str,
    },
}

fn size_text(size: usize, elem_size: usize) -> String {
    if elem_size == 0 {
        format!("its size ({size} bytes)")
    } else if size == 0 {
        format!("a multiple of its element size ({elem_size} bytes)")
    } else {
        format!("a size it can have ({size} + n × {elem_size} bytes)")
    }
}

impl TypedError {
    /// Where this error sits in the common vocabulary: `Malformed` for a
    /// message that does not hold what was asked for, `Unsupported` for
    /// one that cannot be borrowed in place (copy it out instead),
    /// `TooLarge`, or the allocation's kind.
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind as K;
        match self {
            Self::Size { .. }
            | Self::Invalid { .. }
            | Self::MissingTag { .. }
            | Self::CorruptTag { .. }
            | Self::TagMismatch { .. } => K::Malformed,
            Self::Misaligned { .. } | Self::Volatile { .. } | Self::Fragmented { .. } => {
                K::Unsupported
            }
            Self::TooLarge { .. } => K::TooLarge,
            Self::Alloc(e) => e.kind(),
            Self::BadShape { .. } => K::InvalidInput,
        }
    }

    /// The system's error number, where an allocation failed in a system
    /// call.
    pub fn errno(&self) -> Option<crate::Errno> {
        match self {
            Self::Alloc(e) => e.errno(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn each_error_says_what_to_do_and_has_its_kind() {
        let size = TypedError::Size {
            ty: "a::B",
            len: 3,
            size: 8,
            elem_size: 0,
            tagged: false,
        };
        assert_eq!(
            size.to_string(),
            "message payload of 3 bytes is not its size (8 bytes) for `a::B`: the sender sent \
             another type or another version of it (tag the messages with a zcio::typed::Tag to \
             have this reported as a type mismatch)"
        );
        assert_eq!(size.kind(), ErrorKind::Malformed);
        let tagged = TypedError::Size {
            ty: "a::B",
            len: 3,
            size: 8,
            elem_size: 4,
            tagged: true,
        };
        assert!(tagged.to_string().contains("8 + n × 4 bytes"), "{tagged}");
        assert!(tagged
            .to_string()
            .ends_with("read it with the sender's Tag"));
        let v = TypedError::Volatile { ty: "a::B" };
        assert_eq!(v.kind(), ErrorKind::Unsupported);
        assert!(v.to_string().contains("copy it out with Msg::read_typed"));
        assert_eq!(
            TypedError::TooLarge { ty: "x", elems: 1 }.kind(),
            ErrorKind::TooLarge
        );
        let a = TypedError::from(AllocError::WouldBlock("p".into()));
        assert_eq!(a.kind(), ErrorKind::WouldBlock);
        assert_eq!(
            a.to_string(),
            AllocError::WouldBlock("p".into()).to_string()
        );
        assert_eq!(a.errno(), None);
    }
}
