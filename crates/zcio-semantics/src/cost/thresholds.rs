//! The decisions a cost model implies: size thresholds, secured
//! delivery's mechanism per size, and emulated copy's tolerance for
//! rewritten buffers (what they are; `derive.rs` finds them for a model).

/// The mechanism secured delivery ("the receiver gets bytes no one can
/// change") uses at a given size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "calibration",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum Secured {
    /// Send by reference, the receiver copies out of the volatile buffer.
    CopyOut,
    /// A fresh region sealed with `F_SEAL_WRITE` (the move path).
    SealedRegion,
    /// TCOW at the sender + page swapping at the receiver; only when the
    /// receiver trusts the peer (its integrity rests on the sender's TCOW).
    TcowSwap,
}

impl Secured {
    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Secured::CopyOut => "copy-out",
            Secured::SealedRegion => "sealed-region",
            Secured::TcowSwap => "tcow-swap",
        }
    }
}

/// From `min_bytes` on (up to the next band), secured delivery uses
/// `trusted` when the receiver trusts the peer, else `untrusted`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "calibration", derive(serde::Serialize, serde::Deserialize))]
pub struct SecuredBand {
    /// First size of the band, bytes.
    pub min_bytes: usize,
    /// Cheapest mechanism with a trusted peer.
    pub trusted: Secured,
    /// Cheapest mechanism without trust (never [`Secured::TcowSwap`]).
    pub untrusted: Secured,
}

/// The decisions derived from a model. A size threshold of `usize::MAX`
/// means "never" (the cheaper mechanism never wins).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "calibration", derive(serde::Serialize, serde::Deserialize))]
pub struct Thresholds {
    /// Emulated copy converts to copy below this many bytes (page-aligned
    /// receiver).
    pub emulated_copy_min: usize,
    /// Emulated share converts to copy below this many bytes.
    pub emulated_share_min: usize,
    /// A page-aligned receiver swaps pages in from this size on, and
    /// copies out below it (swapping includes the later rehome).
    pub swap_min: usize,
    /// A partly filled last page holding fewer bytes than this is copied
    /// out; from this on it is completed from the application's own bytes
    /// (reverse copyout) and swapped. The page size means "always copy".
    pub reverse_copyout: usize,
    /// Secured delivery's choice per size (aligned receiver), ascending.
    pub secured: Vec<SecuredBand>,
    /// How much rewriting emulated copy tolerates per size, ascending
    /// (see [`RewriteBand`]).
    pub rewrite: Vec<RewriteBand>,
}

impl Thresholds {
    /// The band that covers `bytes`.
    pub fn secured_at(&self, bytes: usize) -> Option<&SecuredBand> {
        self.secured.iter().rev().find(|b| b.min_bytes <= bytes)
    }

    /// The fraction of a buffer's pages that may have been rewritten while
    /// in flight (TCOW copies) for lending it again under emulated copy
    /// to stay cheaper than copying it (0 where emulated copy never wins).
    pub fn rewrite_tolerance(&self, bytes: usize) -> f64 {
        rewrite_tolerance(&self.rewrite, bytes)
    }
}

/// The tolerance of the band that covers `bytes` (0 below the first).
pub(crate) fn rewrite_tolerance(bands: &[RewriteBand], bytes: usize) -> f64 {
    let i = bands.partition_point(|b| b.min_bytes <= bytes);
    match i.checked_sub(1) {
        Some(i) => f64::from(bands[i].max_rewritten_ppm) / 1e6,
        None => 0.0,
    }
}

/// From `min_bytes` on (up to the next band), lending a buffer under
/// emulated copy is expected to stay cheaper than copying it while at
/// most `max_rewritten_ppm` millionths of its pages were rewritten in
/// flight the last time it was lent (each such page costs a TCOW fault
/// and a page copy): `(copy − emulated copy) / tcow_fault` at that size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "calibration", derive(serde::Serialize, serde::Deserialize))]
pub struct RewriteBand {
    /// First size of the band, bytes.
    pub min_bytes: usize,
    /// Tolerated fraction of rewritten pages, in millionths (0..=1e6).
    pub max_rewritten_ppm: u32,
}
