//! Shared helpers for zcio's cross-process integration tests: the test kit
//! (`zcio-testkit`: child harness, socket paths, patterns, small pools,
//! hostile wire builders) and the ring helpers of the ring suites.

#![allow(dead_code)]

#[cfg(not(loom))]
pub mod cancel;
pub mod ring;

pub use zcio_testkit::*;
