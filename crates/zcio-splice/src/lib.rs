//! Peer-to-peer I/O: standing associations between I/O objects (Fall's
//! `splice`, see `../shared/seeds/001_07c0bbf12dbb31b7.txt`, chapters 3–6).
//!
//! A process names a source and a sink and zcio moves the data itself:
//! through the kernel's fast paths (`copy_file_range`, `sendfile`, `splice`
//! through a pipe) where no processing is needed, and through zcio buffers
//! with no copies between processing modules where it is.
//!
//! * [`module`]: processing modules (`Module`), their per-association stack
//!   and the registry that finds them by name (built-ins and shared
//!   objects through a versioned C ABI).
//!
//! The UDP/TCP gateway built on associations (`zcio gateway`) is the
//! `zcio-gateway` crate.

// The layers below, under the paths the modules of this crate use (`crate::buf`, ...).
#[cfg(feature = "tokio")]
use zcio_core::tokio;
use zcio_core::{buf, channel, msg, ring};
#[cfg(test)]
use zcio_sys::testing;
use zcio_sys::{copy, view};
// The short paths of names `zcio` exports at its root.
use rustix::io::Errno;
use zcio_sys::view::View;

mod association;
mod blockio;
#[cfg(feature = "tokio")]
mod completions;
mod error;
mod io_object;
pub mod module;
mod mover;
mod mover_kind;
mod spec;

pub use association::{Association, Completion, Increment, Next, Remote, Status};
#[cfg(feature = "tokio")]
pub use completions::Completions;
pub use error::SpliceError;
pub use io_object::{Attrs, IoObject, Kind};
pub use mover_kind::MoverKind;
pub use spec::{cp, Role, Spec};

/// Associate `src` with `sink`: `splice(src, sink)` of the thesis.
pub fn splice(src: IoObject, sink: IoObject) -> Result<Association, SpliceError> {
    Association::new(src, sink)
}
