//! A bridge's counters: updated by the bridge task, read at any time
//! (progress lines, `--stats`, JSON), and mirrored into the bridge's
//! entry in the registry of live objects (`zcio_sys::registry`; kind
//! `BridgeExport` or `BridgeImport`, named by the key expression, counters
//! `schema::bridge`) so `zcio ls` and `zcio stat` see them: samples and
//! bytes, samples lost (an exporter: blocks lapped or too large to
//! publish; an importer: positions missing in gaps), malformed samples,
//! and the remote peers seen now (an importer: live exporters of the key;
//! an exporter: 1 once a subscriber matched). The bridge's tasks and
//! Zenoh's callbacks update them from several threads: process-local
//! read-modify-writes, never shared with a peer.

use std::sync::atomic::{AtomicU64, Ordering};

use zcio_sys::registry::schema::bridge as entry;
use zcio_sys::registry::{Kind, StatsPage};

/// Live counters of one exporter or importer (share it with an `Arc`;
/// [`Counters::snapshot`] reads them).
#[derive(Debug)]
pub struct Counters {
    /// The registry entry's page (a local one when not registered).
    page: StatsPage,
    /// An importer's (else an exporter's): which counters are `lost`.
    import: bool,
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

impl Default for Counters {
    /// Counters in a local page (a bridge tools do not see).
    fn default() -> Self {
        Self::with_page(StatsPage::local(), false)
    }
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
                    self.mirror(stringify!($name), n);
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
    fn with_page(page: StatsPage, import: bool) -> Self {
        Counters {
            page,
            import,
            samples: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            oversize: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            gaps: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            ignored: AtomicU64::new(0),
            lapped: AtomicU64::new(0),
            connections: AtomicU64::new(0),
        }
    }

    /// The counters of an exporter to `key`, registered.
    pub(crate) fn exporter(key: &str) -> Self {
        Self::with_page(
            StatsPage::register(Kind::BridgeExport, key, 0o600, &[]),
            false,
        )
    }

    /// The counters of an importer of `key`, registered.
    pub(crate) fn importer(key: &str) -> Self {
        Self::with_page(
            StatsPage::register(Kind::BridgeImport, key, 0o600, &[]),
            true,
        )
    }

    /// Add `n` to the registry counter `counter` stands for, if any.
    #[inline]
    fn mirror(&self, counter: &str, n: u64) {
        let import = self.import;
        let index = match counter {
            "samples" => entry::SAMPLES,
            "bytes" => entry::BYTES,
            "malformed" => entry::MALFORMED,
            "lost" if import => entry::LOST,
            "oversize" | "lapped" if !import => entry::LOST,
            _ => return,
        };
        self.page.add_shared(index, n);
    }

    /// Set the remote peers seen now.
    pub(crate) fn peers(&self, n: u64) {
        self.page.set(entry::PEERS, n);
    }

    /// Count one delivered or published sample of `len` bytes.
    pub(crate) fn sample(&self, len: usize) {
        self.samples(1);
        self.bytes(len as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_page_mirrors_the_schema_counters() {
        for import in [false, true] {
            let c = Counters::with_page(StatsPage::local(), import);
            c.sample(100);
            c.sample(20);
            c.malformed(1);
            c.lost(5);
            c.lapped(2);
            c.oversize(1);
            c.peers(3);
            let p = &c.page;
            assert_eq!((p.get(entry::SAMPLES), p.get(entry::BYTES)), (2, 120));
            assert_eq!(p.get(entry::MALFORMED), 1);
            assert_eq!(p.get(entry::LOST), if import { 5 } else { 3 });
            assert_eq!(p.get(entry::PEERS), 3);
            assert_eq!(c.snapshot().samples, 2);
        }
    }
}
