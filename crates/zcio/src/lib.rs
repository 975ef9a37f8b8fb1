//! zcio: zero-copy I/O across process boundaries on Linux.
//!
//! Layers, bottom up (each only calls the ones below it):
//! [`sys`] → [`region`] → [`buf`] → [`msg`] → [`channel`], [`ring`] and
//! [`rendezvous`], then [`asyncipc`] on top of the rendezvous.
//! See `docs/ARCHITECTURE.md` for the picture.

pub mod asyncipc;
pub mod buf;
pub mod channel;
pub mod error;
pub mod msg;
pub mod region;
pub mod relay;
pub mod rendezvous;
pub mod ring;
pub mod segment;
pub mod sync;
pub mod sys;
pub mod view;
pub mod wait;

pub use buf::{AllocError, Fbuf, FbufMut, Pool, PoolConfig, PoolStats, SecureView, Uncached};
pub use channel::{
    AccessPolicy, Channel, ChannelConfig, ChannelStats, ConnectError, FullPolicy, HoldExpiry,
    HoldLimit, Listener, Malformed, Notify, PeerFault, Policy, RecvError, SendError,
};
pub use error::Error;
pub use msg::{Msg, MsgError, SecureMsg, Unit, UnitCursor};
pub use region::{Region, RegionError};
pub use view::View;
