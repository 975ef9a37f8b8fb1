//! A bridge's counters: updated by the bridge task, read at any time
//! (progress lines, `--stats`, JSON).

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one exporter or importer (share it with an `Arc`;
/// [`Counters::snapshot`] reads them).
#[derive(Debug, Default)]
pub struct Counters {
    samples: AtomicU64,
    bytes: AtomicU64,
    oversize: AtomicU64,
    malformed: AtomicU64,
    gaps: AtomicU64,
    lost: AtomicU64,
    duplicates: AtomicU64,
    ignored: AtomicU64,
    lapped: AtomicU64,
    connections: AtomicU64,
}

/// The counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Samples published (exporter) or delivered to the local sink (importer).
    pub samples: u64,
    /// Payload bytes of those samples.
    pub bytes: u64,
    /// Samples or messages dropped for exceeding the size limit (or the
    /// local ring's capacity).
    pub oversize: u64,
    /// Samples dropped because zcio's metadata on them is malformed.
    pub malformed: u64,
    /// Gaps seen in a stream's positions (importer).
    pub gaps: u64,
    /// Positions missing in those gaps (blocks, or bytes for continuous and
    /// variable rings).
    pub lost: u64,
    /// Samples dropped as already delivered (history, a restarted exporter).
    pub duplicates: u64,
    /// Samples not delivered because they belong to another stream, or are
    /// a plain publisher's deletes.
    pub ignored: u64,
    /// Ring blocks overwritten while the exporter copied them (FRP/MRP).
    pub lapped: u64,
    /// Channels accepted (listener export) or connected (channel import).
    pub connections: u64,
}

macro_rules! bump {
    ($($name:ident),*) => {
        impl Counters {
            $(
                #[doc = concat!("Add to `", stringify!($name), "`.")]
                pub(crate) fn $name(&self, n: u64) {
                    // SYNC: statistics only, no partner (Relaxed counters).
                    self.$name.fetch_add(n, Ordering::Relaxed);
                }
            )*

            /// Read every counter.
            pub fn snapshot(&self) -> Stats {
                Stats {
                    // SYNC: statistics only, no partner.
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }
    };
}

bump!(
    samples,
    bytes,
    oversize,
    malformed,
    gaps,
    lost,
    duplicates,
    ignored,
    lapped,
    connections
);

impl Counters {
    /// Count one delivered or published sample of `len` bytes.
    pub(crate) fn sample(&self, len: usize) {
        self.samples(1);
        self.bytes(len as u64);
    }
}
