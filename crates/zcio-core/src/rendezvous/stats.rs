//! Rendezvous points in the registry of live objects
//! (`zcio_sys::registry`), and their counters (`schema::rendezvous`).
//!
//! A [`RendezvousListener`](super::RendezvousListener) registers as
//! `Kind::Rendezvous`, named by its socket path, with the socket file's
//! mode; it counts the endpoints it accepted and how many of them are
//! connected now. Every endpoint (accepted or connected) registers too,
//! under the same name, and counts its own traffic: messages and their
//! bytes (label and words, 8 bytes each) each way, descriptors, time-outs,
//! disconnections and malformed messages. An endpoint's operations take
//! `&self` from any thread, so its counters are process-local
//! read-modify-writes ([`StatsPage::add_shared`]); the partner never
//! writes them. A refused registration leaves a local page.

use std::path::Path;
use std::sync::{Arc, Weak};

use zcio_sys::registry::schema::rendezvous as counter;
use zcio_sys::registry::{Kind, StatsPage};

use super::error::IpcFail;

/// A rendezvous listener's or endpoint's counters: what its registry
/// entry shows (`zcio ls`, `zcio stat`). Built only by
/// [`Rendezvous::stats`](super::Rendezvous::stats) and
/// [`RendezvousListener::stats`](super::RendezvousListener::stats); more
/// counters may be added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RendezvousStats {
    /// Endpoints connected now (a listener: those it accepted that still
    /// live; an endpoint: 1, its partner, until it hangs up or ends).
    pub peers: u64,
    /// Endpoints accepted since the listener was bound (0 for an endpoint).
    pub accepted: u64,
    /// Messages sent (taken by the partner).
    pub sent_messages: u64,
    /// Bytes of those messages (label and words, 8 bytes each).
    pub sent_bytes: u64,
    /// Messages received.
    pub received_messages: u64,
    /// Bytes of those messages.
    pub received_bytes: u64,
    /// Descriptors passed in messages, either way.
    pub descriptors: u64,
    /// Operations that timed out.
    pub timed_out: u64,
    /// Operations that found the partner gone.
    pub disconnected: u64,
    /// Malformed messages or slot states received (rejected).
    pub malformed: u64,
}

impl RendezvousStats {
    pub(super) fn of(p: &StatsPage) -> Self {
        use counter::*;
        RendezvousStats {
            peers: p.get(PEERS),
            accepted: p.get(ACCEPTED),
            sent_messages: p.get(SENT_MESSAGES),
            sent_bytes: p.get(SENT_BYTES),
            received_messages: p.get(RECEIVED_MESSAGES),
            received_bytes: p.get(RECEIVED_BYTES),
            descriptors: p.get(DESCRIPTORS),
            timed_out: p.get(TIMED_OUT),
            disconnected: p.get(DISCONNECTED),
            malformed: p.get(MALFORMED),
        }
    }
}

/// The mode of the socket file at `path` (0600 if it cannot be read).
fn socket_mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).map_or(0o600, |m| m.permissions().mode() & 0o777)
}

/// The page of a listener bound at `path`.
pub(super) fn listener(path: &Path) -> Arc<StatsPage> {
    Arc::new(StatsPage::register(
        Kind::Rendezvous,
        &path.to_string_lossy(),
        socket_mode(path),
        &[],
    ))
}

/// An endpoint's counters, and the listener that accepted it (whose
/// connected-peers gauge it leaves on drop).
#[derive(Debug)]
pub(crate) struct Counters {
    page: StatsPage,
    listener: Weak<StatsPage>,
}

impl Counters {
    /// The counters of an endpoint connected to (or accepted at) `path`;
    /// `listener`: the accepting listener's page.
    pub(super) fn endpoint(path: &Path, listener: Option<&Arc<StatsPage>>) -> Self {
        let page = StatsPage::register(
            Kind::Rendezvous,
            &path.to_string_lossy(),
            socket_mode(path),
            &[(counter::PEERS, 1)],
        );
        if let Some(l) = listener {
            l.add_shared(counter::ACCEPTED, 1);
            l.add_shared(counter::PEERS, 1);
        }
        Counters {
            page,
            listener: listener.map_or_else(Weak::new, Arc::downgrade),
        }
    }

    pub(super) fn page(&self) -> &StatsPage {
        &self.page
    }

    /// A message of `bytes` bytes with `fds` descriptors was taken by the
    /// partner.
    pub(super) fn sent(&self, (bytes, fds): (u64, u64)) {
        self.page.add_shared(counter::SENT_MESSAGES, 1);
        self.page.add_shared(counter::SENT_BYTES, bytes);
        if fds > 0 {
            self.page.add_shared(counter::DESCRIPTORS, fds);
        }
    }

    /// A message of `(bytes, descriptors)` was received
    /// (`Envelope::counted_size`).
    pub(super) fn received(&self, (bytes, fds): (u64, u64)) {
        self.page.add_shared(counter::RECEIVED_MESSAGES, 1);
        self.page.add_shared(counter::RECEIVED_BYTES, bytes);
        if fds > 0 {
            self.page.add_shared(counter::DESCRIPTORS, fds);
        }
    }

    /// An operation failed with `f`: count the failures the schema names.
    pub(super) fn failed(&self, f: IpcFail) {
        match f {
            IpcFail::TimedOut => self.page.add_shared(counter::TIMED_OUT, 1),
            IpcFail::Disconnected => {
                self.page.add_shared(counter::DISCONNECTED, 1);
                self.page.set(counter::PEERS, 0);
            }
            IpcFail::Protocol(_) => self.page.add_shared(counter::MALFORMED, 1),
            IpcFail::WouldBlock | IpcFail::TooLarge | IpcFail::Os { .. } => {}
        }
    }

    /// Count what `r` says of an operation.
    pub(super) fn outcome<T>(&self, r: &Result<T, IpcFail>) {
        if let Err(f) = r {
            self.failed(*f);
        }
    }
}

impl Drop for Counters {
    fn drop(&mut self) {
        if let Some(l) = self.listener.upgrade() {
            l.add_shared(counter::PEERS, 1u64.wrapping_neg());
        }
    }
}
