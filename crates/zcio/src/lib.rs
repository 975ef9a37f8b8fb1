//! zcio: zero-copy I/O across process boundaries on Linux.
//!
//! Layers, bottom up (each only calls the ones below it): system calls →
//! the substrate ([`Region`]s, shared segments, waiting) → buffers
//! ([`Pool`], [`Fbuf`], [`Msg`]) → transports ([`Channel`], [`ring`],
//! [`rendezvous`] and [`proxy`] on it) → forwarding ([`forward`]).
//! See `docs/ARCHITECTURE.md` for the picture.
//!
//! A message by reference, between two ends of a channel (here in one
//! process; across processes use [`Listener::bind`] and
//! [`Channel::connect`] on a socket path):
//!
//! ```
//! use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};
//!
//! let (originator, receiver) = Channel::pair(ChannelConfig::default())?;
//! let pool = Pool::new(PoolConfig::named("doc-crate"));
//! let mut buf = pool.try_alloc(4096)?;            // reserve
//! buf.as_mut_slice()[..5].copy_from_slice(b"hello"); // fill (only we can write)
//! originator.send(Msg::from(buf.freeze()?))?;      // commit: immutable, then sent
//!
//! let msg = receiver.recv()?;                      // zero copy: the sender's pages
//! let view = msg.chunks().next().expect("one slice");
//! assert_eq!(view.read_u64_le(0).map(|w| w as u8), Some(b'h'));
//! assert!(view.as_slice().is_none(), "volatile: the originator could still write it");
//! assert_eq!(&msg.contiguous()[..5], b"hello");    // a copy that cannot change
//! drop(msg);                                       // the notice returns the buffer
//! assert_eq!(originator.reclaim(), 1);
//! # Ok::<(), zcio::Error>(())
//! ```
#![warn(missing_docs)]

mod any_error;

#[cfg(feature = "tokio")]
pub use zcio_core::tokio;
#[cfg(feature = "typed")]
pub use zcio_core::typed;
pub use zcio_core::{array, forward, proxy, rendezvous, ring};
#[cfg(feature = "semantics")]
#[doc(inline)]
pub use zcio_semantics as semantics;
#[cfg(feature = "splice")]
#[doc(inline)]
pub use zcio_splice as splice;

// The layers below, under the paths `any_error` and `internals` use.
use zcio_core::{buf, channel, msg};
#[cfg(feature = "internals")]
use zcio_sys::{bell, sync};
use zcio_sys::{copy, error, region, segment, sys, view, wait};

pub use any_error::Error;
pub use copy::{copy, copy_raw};
pub use error::ErrorKind;
pub use region::{Ownership, Region, RegionError};
pub use rustix::io::Errno;
pub use segment::{AccessPolicy, ConnectError};
pub use sys::peer::{set_non_dumpable, PeerCred};
pub use view::View;
pub use wait::SpinPolicy;
pub use zcio_core::{
    AllocError, Fbuf, FbufMut, FreezeError, HugePages, Pool, PoolConfig, PoolStats, SecureView,
    Uncached,
};
pub use zcio_core::{
    Area, Channel, ChannelConfig, ChannelPolicy, ChannelStats, FullPolicy, HoldExpiry, HoldLimit,
    Listener, Malformed, Notify, PeerFault, RecvError, SendError, SendErrorKind, SendTimeoutError,
    TryRecvError, TrySendError,
};
pub use zcio_core::{JoinError, Msg, MsgError, SecureMsg, Slice, SplitError, Unit, UnitCursor};
pub use zcio_core::{
    LaneConfig, LaneError, LaneMsg, LaneReceiver, LaneSendError, LaneSender, LaneStats, Loan,
};

/// The system page size in bytes: the granularity of buffers, arenas and
/// ring data areas.
pub fn page_size() -> usize {
    sys::page_size()
}

/// Not part of the API: the wire formats and system-call wrappers that
/// zcio's own hostile-peer tests and benchmarks drive by hand. Anything
/// here may change in any release.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals {
    /// Channel wire format.
    pub mod wire {
        pub use crate::channel::wire::*;
    }
    /// Channel descriptor rings.
    pub mod bell {
        pub use crate::bell::*;
    }

    pub mod spsc {
        pub use crate::channel::spsc::*;
    }
    /// Ring file layout.
    pub mod ring_layout {
        pub use crate::ring::layout::*;
    }
    /// A lane's shared layout: its header, descriptors and notices.
    pub mod lane {
        pub use crate::channel::lane::wire::*;
    }
    /// The rendezvous segment: its magic and layout version, where the two
    /// slots lie, and the slot protocol.
    pub mod rendezvous {
        pub use crate::rendezvous::setup::{C2S, MAGIC, S2C, VERSION};
        pub use crate::rendezvous::slot::*;
    }
    /// The set-up handshake.
    pub mod segment {
        pub use crate::segment::*;
    }
    /// System-call wrappers.
    pub mod sys {
        pub use crate::sys::*;
        /// `SCM_RIGHTS` records.
        pub mod fdpass {
            pub use crate::sys::fdpass::*;
        }
        /// Shared futexes.
        pub mod futex {
            pub use crate::sys::futex::*;
        }
        /// memfd helpers.
        pub mod memfd {
            pub use crate::sys::memfd::*;
        }
        /// Shared mappings.
        pub mod mmap {
            pub use crate::sys::mmap::*;
        }
        /// Peer identity and liveness.
        pub mod peer {
            pub use crate::sys::peer::*;
        }
        /// Named ring files.
        pub mod shm {
            pub use crate::sys::shm::*;
        }
    }
    /// The atomics and futex calls of the protocols.
    pub mod sync {
        pub use crate::sync::*;
    }
    /// The semantics layer's message header and the checks input makes of
    /// a message before it copies or swaps anything (fuzz targets).
    #[cfg(feature = "semantics")]
    pub mod semantics_wire {
        pub use crate::semantics::endpoint::{parse_hello, parse_message};
        pub use crate::semantics::wire::*;
    }
    /// The host side of the `.so` module ABI: the checks of whatever a
    /// module hands back — its table, return codes, emitted ranges, texts
    /// (fuzz targets).
    /// The size syntax of module arguments (`64K`, `1G`; fuzz target).
    #[cfg(feature = "splice")]
    pub mod splice_args {
        pub use crate::splice::module::args::parse_size;
    }
    #[cfg(feature = "dynamic-modules")]
    pub mod splice_cabi {
        pub use crate::splice::module::cabi::*;
    }
}

/// The guides' Rust snippets, compiled (and, unless marked `no_run`, run)
/// as doctests by `cargo test`, so a guide cannot drift from the API.
/// Snippets that quote an example program are marked `ignore` and checked
/// against that program by `tests/guides.rs` instead.
#[cfg(doctest)]
mod guides {
    #[doc = include_str!("../../../README.md")]
    mod readme {}
    #[doc = include_str!("../../../docs/transfer.md")]
    mod transfer {}
    #[doc = include_str!("../../../docs/rings.md")]
    mod rings {}
    #[doc = include_str!("../../../docs/proxy.md")]
    mod proxy {}
    #[cfg(feature = "tokio")]
    #[doc = include_str!("../../../docs/async-rust.md")]
    mod async_rust {}
    #[cfg(all(feature = "splice", feature = "zstd", feature = "dynamic-modules"))]
    #[doc = include_str!("../../../docs/splice.md")]
    mod splice {}
    #[cfg(all(feature = "splice", feature = "zstd", feature = "dynamic-modules"))]
    #[doc = include_str!("../../../docs/modules.md")]
    mod modules {}
    #[cfg(feature = "semantics")]
    #[doc = include_str!("../../../docs/semantics.md")]
    mod semantics {}
    #[cfg(feature = "typed")]
    #[doc = include_str!("../../../docs/typed-messages.md")]
    mod typed_messages {}
}
