//! Typed messages: a `T` or `[T]` allocated in a buffer, filled in place
//! and sent; received as a validated copy, or borrowed in place where the
//! bytes cannot change (cargo feature `typed`, on by default; built on
//! [zerocopy](https://docs.rs/zerocopy)'s derives, so `T` is plain data
//! with a layout the compiler checks — `#[repr(C)]` structs, `#[repr(u8)]`
//! enums, arrays, slices, and structs ending in a slice).
//!
//! **Sending** ([`TypedBuf`]): reserve a zeroed `T` in a buffer
//! ([`Pool::alloc_typed`](crate::Pool::alloc_typed),
//! [`Pool::alloc_typed_elems`](crate::Pool::alloc_typed_elems),
//! [`TypedBuf::alloc`] for any allocator), fill it through `&mut T` — the
//! buffer is this process's own and exclusive, so that is sound — and
//! turn it into a [`Msg`](crate::Msg) ([`TypedBuf::into_msg`]). The writer's
//! types are `FromZeros + IntoBytes + KnownLayout`: they start as zeros,
//! and have no padding, so every byte sent was written or zeroed.
//!
//! **Receiving** follows zcio's rule that no reference is ever made over
//! bytes a peer may write:
//! - *Copy out, then validate*: [`Msg::read_typed`](crate::Msg::read_typed)
//!   and [`Msg::read_typed_vec`](crate::Msg::read_typed_vec) copy the bytes
//!   once (through [`View`](crate::View)) and check only that copy with
//!   zerocopy's `TryFromBytes`. A hostile sender's invalid `bool` or enum
//!   discriminant is a [`TypedError::Invalid`], never undefined behaviour,
//!   and a sender rewriting its buffer meanwhile can only make the copy
//!   another valid value or invalid. Works for every message.
//! - *Borrow in place*: [`Msg::borrow_typed`](crate::Msg::borrow_typed) and
//!   [`Msg::borrow_typed_elems`](crate::Msg::borrow_typed_elems) give `&T`
//!   without a copy when nobody can change the bytes — one slice that is
//!   kernel-sealed (a secured buffer), this process's own, or from a peer
//!   declared trusted — validated once, which then holds for the borrow.
//!   A volatile message is refused ([`TypedError::Volatile`]): copy it out,
//!   or into a buffer of your own
//!   ([`forward::copy_into`](crate::forward::copy_into)) and borrow that.
//!
//! **Type tags** ([`Tag`], optional, passed on both sides): a 128-byte
//! header before the payload naming the type (name, schema version, the
//! name's FNV-1a hash) and its layout (size, element size, alignment), so
//! a message of another type is refused with
//! [`TypedError::TagMismatch`] ("message carries type X (size a, align b),
//! expected Y …") instead of being read as garbage that happens to fit.
//!
//! The tag's layout (`#[repr(C)]`, [`Tag::LEN`] = 128 bytes, integers
//! little-endian and unaligned; `docs/typed-messages.md` explains it):
//!
//! | offset | size | field | value |
//! |---|---|---|---|
//! | 0 | 8 | `magic` | `b"ZCIOTYPE"` ([`Tag::MAGIC`]) |
//! | 8 | 2 | `version` | 1 ([`Tag::VERSION`]) |
//! | 10 | 2 | `flags` | bit 0: the type ends in a slice; no other bit may be set |
//! | 12 | 4 | `offset` | where the payload starts, from the tag's first byte: 128, or the type's alignment if larger |
//! | 16 | 8 | `size` | `size_of::<T>()`; for a type ending in a slice, its size with no elements |
//! | 24 | 8 | `elem_size` | 0; for a type ending in a slice, the bytes each element adds |
//! | 32 | 4 | `align` | the type's alignment (a power of two) |
//! | 36 | 4 | `schema` | the sender's version of the type ([`Tag::new`]; 0 for [`Tag::of`]) |
//! | 40 | 8 | `name_hash` | FNV-1a 64 of the whole name's UTF-8 bytes |
//! | 48 | 4 | `name_len` | the name's length in bytes |
//! | 52 | 4 | `reserved` | 0 |
//! | 56 | 72 | `name` | the name's first 72 bytes, the rest zero |
//!
//! The bytes between the tag and `offset` are zero, and the payload runs
//! to the end of the message. A receiver checks every rule (magic,
//! version, flags, reserved, the name against its hash when the whole name
//! fits, alignment, offset within the message) before it compares the
//! type, and reads the tag once, into a private copy.
//!
//! ```
//! use zcio::typed::Tag;
//! use zcio::{Channel, ChannelConfig, Pool, PoolConfig};
//! use zerocopy::{FromZeros, Immutable, IntoBytes, KnownLayout};
//!
//! // FromZeros implies TryFromBytes: the receiver validates every value.
//! #[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq)]
//! #[repr(u8)]
//! enum Kind { Still = 0, Video = 1 }
//!
//! #[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug)]
//! #[repr(C)]
//! struct Header { kind: Kind, keyframe: bool, width: u16, height: u16, stride: u16 }
//!
//! let (tx, rx) = Channel::pair(ChannelConfig::default())?;
//! let pool = Pool::new(PoolConfig::named("doc-typed"));
//! let tag = Tag::new("doc.Header", 1);
//! let mut h = pool.alloc_typed::<Header>(Some(&tag))?; // reserve (zeroed)
//! h.kind = Kind::Video;                                 // fill in place
//! h.width = 640;
//! tx.send(h.into_msg()?)?;                              // send
//!
//! let msg = rx.recv()?;
//! let got: Header = msg.read_typed(Some(&tag))?;        // copy out, validate
//! assert_eq!((got.kind, got.width), (Kind::Video, 640));
//! assert!(msg.borrow_typed::<Header>(Some(&tag)).is_err()); // volatile: no &Header
//! assert!(msg.read_typed::<u64>(None).is_err());        // wrong size
//! # Ok::<(), zcio::Error>(())
//! ```

mod error;
mod read;
mod tag;
mod type_info;
mod write;

pub use error::TypedError;
pub use tag::{RuntimeShape, Tag};
pub use type_info::TypeInfo;
pub use write::TypedBuf;
