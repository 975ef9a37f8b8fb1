//! A bridge between zcio and Zenoh: a zcio path crosses hosts with one copy
//! per host boundary and stays zero-copy on each host.
//!
//! - [`Exporter`]: a local [`Source`] — a named ring (its blocks) or a
//!   channel listener (every message of every channel that connects) —
//!   published to one Zenoh key.
//! - [`Importer`]: a Zenoh key expression into a local [`Sink`] — a named
//!   ring (one block per sample) or a channel connection (one message per
//!   sample), read in place by every local reader — or handed to this
//!   process through a bounded queue ([`Sink::Deliver`], what `zcio
//!   record zenoh:KEY` writes to a file).
//!
//! The sample payload is the message's bytes and nothing else, so plain
//! Zenoh applications (any language) read and write the same keys; zcio's
//! metadata — positions, end of stream, error close, a producer's death,
//! `send_array` headers — travels in the attachment ([`wire`]). The
//! exporter's liveliness token tells importers when it vanishes (a killed
//! bridge ends the remote stream with an error, never a clean end). See
//! `docs/bridge.md` for the guarantees and a two-host walk-through; the
//! `zcio bridge` command runs both halves.
//!
//! ```no_run
//! # #[cfg(feature = "bridge")]
//! # async fn demo() -> Result<(), zcio_zenoh::BridgeError> {
//! use zcio_zenoh::{ExportOptions, Exporter, SessionOptions, Source};
//! let session = SessionOptions {
//!     listen: vec!["tcp/127.0.0.1:7447".into()],
//!     ..SessionOptions::default()
//! }
//! .open()
//! .await?;
//! let source = Source::parse("ring:frames")?;
//! let exporter = Exporter::new(&session, source, "cam/front", ExportOptions::default())?;
//! exporter.run(async { let _ = tokio::signal::ctrl_c().await; }, || {}).await?;
//! # Ok(()) }
//! ```

//!
//! Feature `bridge` (on by default) builds the bridge itself, on Zenoh and
//! tokio. Without it only the Zenoh-free parts are built: the attachment
//! format ([`wire`]), the importer's per-sample decisions ([`track`]) and
//! the liveliness token keys ([`liveness`]) — what the fuzz targets drive
//! without building Zenoh.

#[cfg(feature = "bridge")]
mod cache;
#[cfg(feature = "bridge")]
mod config;
#[cfg(feature = "bridge")]
mod delivery;
#[cfg(feature = "bridge")]
mod error;
#[cfg(feature = "bridge")]
mod export;
#[cfg(feature = "bridge")]
mod follower;
#[cfg(feature = "bridge")]
mod import;
#[cfg(feature = "bridge")]
mod lent_block;
pub mod liveness;
#[cfg(feature = "bridge")]
mod stats;
pub mod track;
pub mod wire;

#[cfg(feature = "bridge")]
pub use config::{
    check_key, first_peer, SessionOptions, DEFAULT_GRACE, DEFAULT_MAX_SAMPLE, MAX_SAMPLE_LIMIT,
};
#[cfg(feature = "bridge")]
pub use delivery::{deliveries, Deliveries, Delivery, DeliverySender, Next};
#[cfg(feature = "bridge")]
pub use error::BridgeError;
#[cfg(feature = "bridge")]
pub use export::{ExportEnd, ExportOptions, Exporter, Source};
#[cfg(feature = "bridge")]
pub use import::{
    ImportEnd, ImportOptions, Importer, Sink, CODE_EXPORTER_LOST, CODE_PRODUCER_DIED, CODE_STOPPED,
    CODE_UNREACHABLE,
};
#[cfg(feature = "bridge")]
pub use stats::{Counters, Stats};
/// The Zenoh crate this bridge is built on (its `Session`, `Config`).
#[cfg(feature = "bridge")]
pub use zenoh;

/// The bridge guide's Rust snippet, compiled by `cargo test` (`no_run`: it
/// listens on a network) so the guide cannot drift from the API.
#[cfg(all(doctest, feature = "bridge"))]
#[doc = include_str!("../../../docs/bridge.md")]
mod guide {}
