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

// The short paths the modules use for names `zcio` exports at its root (some only with
// the tokio or typed feature).
#[allow(unused_imports)]
pub(crate) use channel::{
    Channel, RecvError, SendError, SendErrorKind, SendTimeoutError, TryRecvError, TrySendError,
};
pub(crate) use msg::Msg;
pub(crate) use rustix::io::Errno;
#[cfg(test)]
pub(crate) use {
    buf::{Pool, PoolConfig},
    channel::lane::{LaneConfig, LaneError, LaneReceiver, LaneSender},
    channel::ChannelConfig,
};
