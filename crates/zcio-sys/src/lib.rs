//! zcio's bottom layer: the system calls (`sys`), the atomics every shared-memory
//! protocol goes through (`sync`, loom under `cfg(loom)`), waiting (`wait`), doorbells
//! (`bell`), memfd-backed regions (`region`), the set-up handshake of two processes
//! (`segment`), read-only views of another process's bytes (`view`), copies (`copy`) and
//! the error vocabulary (`error`), and the registry of live objects (`registry`: one entry
//! file per live object in the run directory, read by tools such as `zcio ls`; public here
//! for the tools, not re-exported by `zcio`).
//!
//! Not an API of its own: applications depend on `zcio`, which re-exports what is public.
//! This crate imports no other zcio crate, so nothing here can depend on a layer above
//! (`docs/ARCHITECTURE.md`, "Crates").

pub mod bell;
pub mod copy;
pub mod error;
pub mod region;
pub mod registry;
pub mod segment;
pub mod sync;
pub mod sys;
#[cfg(any(test, feature = "testing"))]
#[doc(hidden)]
pub mod testing;
pub mod view;
pub mod wait;
