//! zcio's buffers and transports: path pools and fbufs (`buf`), aggregates (`msg`),
//! channels (`channel`, with their small-message slots), Beltway rings (`ring`), the
//! rendezvous (`rendezvous`) and its proxy threads (`proxy`), forwarding (`forward`),
//! arrays and typed messages (`array`, `typed`) and the tokio futures of every transport
//! (`tokio`).
//!
//! Not an API of its own: applications depend on `zcio`, which re-exports what is public.
//! This crate builds on `zcio-sys` only; the semantics and splice layers build on it
//! (`docs/ARCHITECTURE.md`, "Crates").

// The layer below, under the paths the modules of this crate use (`crate::region`, ...).
#[cfg(test)]
use zcio_sys::testing;
#[doc(hidden)]
pub use zcio_sys::{bell, copy, error, region, segment, sync, sys, view, wait};

pub mod array;
pub mod buf;
pub mod channel;
pub mod forward;
pub mod msg;
pub mod proxy;
pub mod rendezvous;
pub mod ring;
#[cfg(feature = "tokio")]
pub mod tokio;
#[cfg(feature = "typed")]
pub mod typed;

// The names `zcio` exports at its root, at this crate's root too: the short paths the
// modules and their doc links use (`crate::Channel`).
pub use buf::{
    AllocError, Fbuf, FbufMut, FreezeError, HugePages, Pool, PoolConfig, PoolStats, SecureView,
    Uncached,
};
pub use channel::lane::{
    LaneConfig, LaneError, LaneMsg, LaneReceiver, LaneSendError, LaneSender, LaneStats, Loan,
};
pub use channel::{
    Area, Channel, ChannelConfig, ChannelPolicy, ChannelStats, FullPolicy, HoldExpiry, HoldLimit,
    Listener, Malformed, Notify, PeerFault, RecvError, SendError, SendErrorKind, SendTimeoutError,
    TryRecvError, TrySendError,
};
pub use msg::{JoinError, Msg, MsgError, SecureMsg, Slice, SplitError, Unit, UnitCursor};
#[doc(hidden)]
pub use rustix::io::Errno;
#[doc(hidden)]
pub use view::View;
#[doc(hidden)]
pub use wait::SpinPolicy;
