//! The bodies of zcio's fuzz targets, one module per target under
//! [`targets`], each calling the production decoders with bytes a peer, a
//! file or the network could hand zcio.
//!
//! Three things run them:
//! - `fuzz/` (a `cargo fuzz` project outside the workspace, driven by
//!   `scripts/fuzz`): one libFuzzer binary per target, a thin wrapper that
//!   calls [`Target::run`];
//! - `tests/replay.rs` (`cargo test`): every committed seed in
//!   `fuzz/corpus/<target>/` and every committed finding in
//!   `fuzz/regressions/<target>/` through the same function, so a fixed
//!   finding stays fixed in the ordinary test suite;
//! - `zcio-fuzz-seeds` (`src/bin/seeds.rs`): writes each target's seeds,
//!   made by encoding real values, into `fuzz/corpus/`.
//!
//! Every target states its invariant in its module's docs. All share these:
//! no panic, no out-of-bounds access (libFuzzer builds run under
//! AddressSanitizer), no hang (libFuzzer's `-timeout`), and no allocation
//! that grows with a length field the input chose beyond the documented
//! bound (`-malloc_limit_mb`).

pub mod input;
pub mod msgs;
pub mod rings;
pub mod targets;

/// One fuzz target: its name (the `cargo fuzz` binary and the corpus
/// folder), its body and its seeds.
pub struct Target {
    /// Name of the `cargo fuzz` target and of its corpus folder.
    pub name: &'static str,
    /// Feed one input through the production code; panics on a broken
    /// invariant (which libFuzzer reports as a crash).
    pub run: fn(&[u8]),
    /// Seed inputs, each made by encoding a real value.
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target, by name.
pub fn all() -> &'static [Target] {
    targets::ALL
}

/// The target called `name`.
pub fn find(name: &str) -> Option<&'static Target> {
    all().iter().find(|t| t.name == name)
}
