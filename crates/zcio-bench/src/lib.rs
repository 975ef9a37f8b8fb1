//! Cross-process benchmark drivers for zcio and the baselines it is
//! measured against (memcpy, Linux pipe, Unix socket, iceoryx2, Zenoh,
//! TCP).
//!
//! Every measured side runs in its own process, pinned to its own core
//! where the machine has them; the coordinator only spawns, waits and
//! collects. Child processes are this same binary re-executed with a
//! hidden argument of their family (see [`child`] and [`roles`]).
//!
//! # Layers
//!
//! The top-level modules form layers; a module imports (`crate::…`) only
//! from its own layer or from layers below it, never from above, and the
//! imports between top-level modules form no cycle (the test
//! `layers::top_level_modules_form_layers` checks both):
//!
//! 1. **Helpers** — [`affinity`], [`clock`], [`cpu`], [`checksum`],
//!    [`pages`], [`touch`] (the reads of received bytes), [`child`] (the
//!    generic spawn / bounded wait / serve of child processes), [`fds`],
//!    [`limits`], [`report`], [`plot`] (the one SVG plot helper),
//!    [`driver`] (the one [`driver::Bench`] loop) and [`iox`] (the iceoryx2
//!    baseline transport). They know no benchmark.
//! 2. **Families** — the benchmarks: [`transfer`], [`ring`], [`proxyb`],
//!    [`semantics`], [`splice`], [`tokiob`], [`containers`], `bridge` (feature
//!    `bridge`: Zenoh). Each owns its
//!    options, jobs, child argument, spec and child entry point, rows,
//!    tables and plot (its data, drawn by [`plot`]). A family uses another
//!    only in one direction: [`transfer`] uses the rendezvous connect of
//!    [`proxyb`]; `bridge` uses [`splice`]'s network namespaces, process
//!    handling and `zcio` binary, and [`ring`]'s ring guard; [`containers`]
//!    uses [`splice`]'s `zcio` binary check.
//! 3. **Dispatch** — [`roles`]: which family's child a hidden argument runs
//!    (and `main.rs`, the command line).

pub mod affinity;
#[cfg(feature = "bridge")]
pub mod bridge;
pub mod checksum;
pub mod child;
pub mod clock;
pub mod containers;
pub mod cpu;
pub mod driver;
pub mod fds;
pub mod iox;
pub mod limits;
pub mod oneway;
pub mod pages;
pub mod plot;
pub mod proxyb;
pub mod registryb;
pub mod report;
pub mod ring;
pub mod roles;
pub mod semantics;
pub mod sockpath;
pub mod splice;
pub mod tokiob;
pub mod touch;
pub mod transfer;

pub use zcio_fmt as fmt;

#[cfg(test)]
mod layers;
