//! Channel configuration: ring sizes, waiting policy, access policy.

use std::time::Duration;

/// Who may connect to a listener, decided on the kernel's `SO_PEERCRED`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessPolicy {
    /// User ids allowed.
    pub uids: Vec<u32>,
    /// Group ids allowed (any member of one of these may connect).
    pub gids: Vec<u32>,
}

impl Default for AccessPolicy {
    /// Only the listener's own effective uid.
    fn default() -> Self {
        Self {
            uids: vec![rustix::process::geteuid().as_raw()],
            gids: Vec::new(),
        }
    }
}

impl AccessPolicy {
    /// Allow these uids (and nothing else).
    pub fn uids(uids: impl IntoIterator<Item = u32>) -> Self {
        Self {
            uids: uids.into_iter().collect(),
            gids: Vec::new(),
        }
    }

    /// Whether a peer with `uid`/`gid` may connect.
    pub fn allows(&self, uid: u32, gid: u32) -> bool {
        self.uids.contains(&uid) || self.gids.contains(&gid)
    }
}

/// What `send` does when the ring is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullPolicy {
    /// Wait for space (bounded by the send timeout).
    Block,
    /// Fail at once with `SendError::Full`.
    Fail,
}

/// Notification policy: when to wake a sleeping peer, and how long to spin
/// before sleeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Wake a sleeping receiver only once this many messages are waiting
    /// (1 = wake at once). Deferred wakes are bounded by `max_delay`.
    pub wake_batch: u32,
    /// Latency bound for deferred wakes: a receiver never sleeps longer
    /// than this while coalescing is on, so a message waits at most this long.
    pub max_delay: Duration,
    /// Busy-wait this long before sleeping on a futex (0 = sleep at once).
    pub spin: Duration,
    /// What a full ring does.
    pub full: FullPolicy,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            wake_batch: 1,
            max_delay: Duration::from_millis(1),
            spin: Duration::from_micros(500),
            full: FullPolicy::Block,
        }
    }
}

/// Configuration of a channel end.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// Descriptor entries per message ring (power of two; one per slice).
    pub ring_entries: u32,
    /// Entries per notice ring (power of two).
    pub notice_entries: u32,
    /// Notification policy.
    pub policy: Policy,
    /// Bound on a blocking `send`.
    pub send_timeout: Duration,
    /// Bound on a blocking `recv`.
    pub recv_timeout: Duration,
    /// Bound on the connect handshake.
    pub connect_timeout: Duration,
    /// Who may connect (listener side).
    pub access: AccessPolicy,
    /// Cap on slices the peer may hold from us at once.
    pub max_in_flight: usize,
    /// Pre-fault received regions when mapping them.
    pub populate: bool,
    /// How often a sleeping side checks whether the peer is still alive.
    pub liveness_interval: Duration,
    /// Largest region a peer may pass us (bytes); larger ones are refused.
    pub max_region_len: u64,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            ring_entries: 1024,
            notice_entries: 2048,
            policy: Policy::default(),
            send_timeout: Duration::from_secs(10),
            recv_timeout: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(5),
            access: AccessPolicy::default(),
            max_in_flight: 1 << 16,
            populate: true,
            liveness_interval: Duration::from_millis(50),
            max_region_len: 4 << 30,
        }
    }
}
