//! Buffering semantics (Genie): how data passes between an application's
//! buffers and a zcio channel, chosen per endpoint and per call.
//!
//! Brustoloni and Steenkiste classify I/O data passing by *who allocates
//! the buffers* (the application, or the system) and *what integrity is
//! guaranteed* (strong: what was output cannot change in flight, and what
//! was input cannot change under the receiver; weak: no such promise), and
//! show that with the right page-level optimizations the application-
//! allocated, strong-integrity semantics ("emulated copy") costs about as
//! little as the zero-copy ones. zcio offers all eight:
//!
//! | | strong integrity | weak integrity |
//! |---|---|---|
//! | application-allocated | [`Semantics::Copy`], [`Semantics::EmulatedCopy`] | [`Semantics::Share`], [`Semantics::EmulatedShare`] |
//! | system-allocated | [`Semantics::Move`], [`Semantics::EmulatedMove`] | [`Semantics::WeakMove`], [`Semantics::EmulatedWeakMove`] |
//!
//! Application-allocated semantics use the calls shaped like `write` and
//! `read` ([`SemanticEndpoint::output`], [`SemanticEndpoint::input`]); system-allocated ones
//! use [`SemanticEndpoint::alloc`], [`SemanticEndpoint::output_owned`],
//! [`SemanticEndpoint::input_owned`] and [`SemanticEndpoint::free`]. The zero-copy
//! mechanisms need the application's buffers in an [`Arena`] (registered
//! memory); a buffer elsewhere (the heap, the stack) is copied, whatever
//! the semantics.

// The layers below, under the paths the modules of this crate use (`crate::sys`, ...).
use zcio_core::{buf, channel, msg};
use zcio_sys::{copy, region, sys};
// The short paths of names `zcio` exports at its root.
use rustix::io::Errno;
use zcio_core::buf::{AllocError, Fbuf, FbufMut, Pool, PoolConfig, Uncached};
use zcio_core::channel::{Channel, ChannelConfig, RecvError, SendErrorKind, TryRecvError};
use zcio_core::msg::{Msg, MsgError};
use zcio_sys::view::View;

mod arena;
pub mod calibrate;
pub mod cost;
#[doc(hidden)]
pub mod endpoint;
mod error;
mod fit;
mod owned;
mod pages;
mod policy;
mod tcow;
#[doc(hidden)]
pub mod uffd;
#[doc(hidden)]
pub mod vm;
#[doc(hidden)]
pub mod wire;

pub use arena::{Arena, ArenaBuf, ArenaError, ArenaStats, Protection};
pub use endpoint::{Delivery, Received, SemanticConfig, SemanticEndpoint, SemanticStats};
pub use error::{InputError, OutputError, OutputOwnedError, SetupError};
pub use owned::OwnedBuf;
pub use policy::Policy;

/// How data passes between the application's buffers and the channel.
///
/// Each line says who owns the buffer after the call and what a later
/// write by either party can or cannot affect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Semantics {
    /// Output copies the bytes into a system buffer; input copies them out.
    /// The application keeps its buffer; later writes by either side affect
    /// nothing the other sees.
    Copy,
    /// The guarantees of [`Semantics::Copy`] without the copies: output
    /// write-protects the buffer's pages and lends them (a write while they
    /// are in flight gets a private copy of the page — TCOW); input swaps
    /// whole pages into an aligned arena buffer and copies partial pages.
    /// Falls back to copying where that is cheaper (short data) or needed.
    EmulatedCopy,
    /// Output lends the buffer in place, wired (`mlock`) while in flight;
    /// input swaps pages in without checks. The application keeps its
    /// buffer; its later writes may change what the peer reads (weak).
    Share,
    /// As [`Semantics::Share`] without wiring, converted to copy for short
    /// data. A later write may change what the peer reads (weak).
    EmulatedShare,
    /// Output hands over a system-allocated buffer: it is unmapped from the
    /// sender and sealed, so nobody can change it; input maps it at a
    /// fresh address. The sender no longer owns it; the receiver does.
    Move,
    /// As [`Semantics::Move`], but output only hides the pages (no access;
    /// touching them faults) and caches them for reuse once the peer is
    /// done. The sender no longer owns it; nobody can change it in flight
    /// (the sender's pages are inaccessible).
    EmulatedMove,
    /// Output hands over a system-allocated buffer that stays mapped
    /// (wired while in flight) and returns to a per-process cache; the
    /// sender must not touch it — a write would change what the peer
    /// reads (weak).
    WeakMove,
    /// As [`Semantics::WeakMove`] without any wiring or protection change
    /// (weak).
    EmulatedWeakMove,
}

impl Semantics {
    /// All eight, in the paper's order.
    pub const ALL: [Semantics; 8] = [
        Semantics::Copy,
        Semantics::EmulatedCopy,
        Semantics::Share,
        Semantics::EmulatedShare,
        Semantics::Move,
        Semantics::EmulatedMove,
        Semantics::WeakMove,
        Semantics::EmulatedWeakMove,
    ];

    /// The name used by the CLI, C and Python (`"emulated-copy"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Semantics::Copy => "copy",
            Semantics::EmulatedCopy => "emulated-copy",
            Semantics::Share => "share",
            Semantics::EmulatedShare => "emulated-share",
            Semantics::Move => "move",
            Semantics::EmulatedMove => "emulated-move",
            Semantics::WeakMove => "weak-move",
            Semantics::EmulatedWeakMove => "emulated-weak-move",
        }
    }

    /// Parse a name as given by [`Semantics::name`] (`_` accepted for `-`).
    pub fn parse(s: &str) -> Option<Semantics> {
        let s = s.trim().to_ascii_lowercase().replace('_', "-");
        Semantics::ALL.into_iter().find(|m| m.name() == s)
    }

    /// Whether the application allocates the buffers (copy, share and
    /// their emulations) rather than the system (the move family).
    pub fn application_allocated(self) -> bool {
        matches!(
            self,
            Semantics::Copy | Semantics::EmulatedCopy | Semantics::Share | Semantics::EmulatedShare
        )
    }

    /// Whether the semantics promises strong integrity.
    pub fn strong(self) -> bool {
        matches!(
            self,
            Semantics::Copy | Semantics::EmulatedCopy | Semantics::Move | Semantics::EmulatedMove
        )
    }
}

impl std::fmt::Display for Semantics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Semantics {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Semantics::parse(s).ok_or_else(|| {
            format!(
                "unknown semantics {s:?}; expected one of: {}",
                Semantics::ALL.map(Semantics::name).join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests;
