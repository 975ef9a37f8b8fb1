//! Channel configuration: ring sizes, waiting policy, access policy.

use std::time::Duration;

pub use crate::segment::AccessPolicy;

use crate::channel::lane::LaneConfig;

/// What `send` does when the ring (or the peer's in-flight allowance) is
/// full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullPolicy {
    /// Wait for space (bounded by the send timeout; `SendErrorKind::TimedOut`
    /// or `TooManyInFlight` when it runs out).
    Block,
    /// Fail at once with `SendErrorKind::WouldBlock` (or `TooManyInFlight`), whatever
    /// the timeout; the message comes back.
    Fail,
}

/// When a send that finds the receiver asleep wakes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notify {
    /// Wake a sleeping receiver with the send that finds it asleep (one
    /// `futex_wake`); a receiver that is awake or spinning is never woken, so
    /// under load no system call is made. Lowest latency when idle. Default.
    Now,
    /// Defer the wake of a sleeping receiver until `wake_batch` messages
    /// wait, the oldest of them is `max_age` old (checked by the sender on
    /// every send and flush), or [`Channel::flush`](crate::Channel::flush).
    /// The receiver's own sleep is bounded by its `max_age` as a backstop,
    /// so a deferred message waits at most `max_age` even if the sender goes
    /// quiet. Fewer wakes (system calls) per message.
    Defer,
}

/// What happens when the peer holds a lent buffer longer than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldExpiry {
    /// Abort the channel: everything the peer holds is released (pool
    /// buffers return to their pools and may be reused while the peer still
    /// maps them, read-only), the peer is disconnected, and every later send
    /// reports `SendErrorKind::HoldExpired` (the cause is in `Channel::health`).
    Abort,
    /// Reclaim the buffer: its ledger entry is released and the buffer
    /// returns to its pool (it may be reused while the peer still maps it,
    /// read-only: the peer loses the guarantee that the bytes stay put).
    /// The peer's later notice for it is rejected by the token's generation
    /// and counted in `bad_notices`; reclaims count in `reclaimed`.
    Reclaim,
}

/// A bound on how long a peer may hold a buffer we lent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldLimit {
    /// Longest a lent slice may stay unreleased.
    pub limit: Duration,
    /// What to do when it does.
    pub on_expiry: HoldExpiry,
}

/// The channel policy exported to the application: notification, batching,
/// latency bound, full-ring behaviour, spinning, hold limits and how far
/// the peer's sleep flag is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelPolicy {
    /// Notify a sleeping receiver now or defer it ([`Notify`]). Default
    /// `Now`: lazy notification — only a sleeping receiver is woken.
    pub notify: Notify,
    /// Batch size under `Notify::Defer`: wake the sleeping receiver once this
    /// many messages wait for it (ignored under `Now`). Default 1.
    pub wake_batch: u32,
    /// Maximum age of the oldest un-notified message. Under `Defer` the
    /// sender wakes the receiver on the first send or flush that finds the
    /// oldest deferred message this old, and a receiver never sleeps longer
    /// than this (backstop: set it on both ends). Also the rate at which a
    /// peer whose sleep flag proved untrustworthy is still woken. Default 1 ms.
    pub max_age: Duration,
    /// Most a wait spins (yielding after the first microseconds) before it
    /// sleeps on a futex; 0 = sleep at once. The actual budget adapts per
    /// channel end: it halves after every wait that had to sleep anyway and
    /// grows back when spinning served, so a waiter whose peer shares its
    /// CPU or is slow quickly stops spinning. Default: the process's
    /// [`SpinPolicy::max`](crate::SpinPolicy::max) (500 µs unless set).
    pub spin: Duration,
    /// What a full ring does ([`FullPolicy`]). Default `Block`.
    pub full: FullPolicy,
    /// Bound on how long the peer may hold a buffer we lent it, checked on
    /// send, reclaim, flush and `Channel::expire_holds` (a FIFO of lending
    /// times, checked from the front: amortised O(1), and nothing at all
    /// when `None`). Default `None`.
    pub hold: Option<HoldLimit>,
    /// Wakes in a row that found the peer's sleep flag set but nobody
    /// asleep before the flag is distrusted: from then on the peer is woken
    /// at most once per `max_age` (a wake that finds a sleeper restores
    /// trust) and `PeerFault::FutileWakes` is reported. Default 64.
    pub futile_wake_limit: u32,
}

impl Default for ChannelPolicy {
    fn default() -> Self {
        Self {
            notify: Notify::Now,
            wake_batch: 1,
            max_age: Duration::from_millis(1),
            spin: crate::wait::SpinPolicy::current().max,
            full: FullPolicy::Block,
            hold: None,
            futile_wake_limit: 64,
        }
    }
}

/// Default [`ChannelConfig::max_bytes_in_flight`].
const DEFAULT_MAX_BYTES_IN_FLIGHT: u64 = 256 << 20;

/// Configuration of a channel end.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// Descriptor entries per message ring (power of two; one per slice).
    pub ring_entries: u32,
    /// Entries per notice ring (power of two).
    pub notice_entries: u32,
    /// Notification policy.
    pub policy: ChannelPolicy,
    /// Bound on the default wait of every sending call: `Channel::send`,
    /// `LaneSender::loan`, `AsyncChannel::send` and `writable`. Default
    /// 10 s. `Duration::MAX` waits without a bound (only ever ask for that
    /// of a trusted peer).
    pub send_timeout: Duration,
    /// Bound on the default wait of every receiving call: `Channel::recv`,
    /// `accept_lane`, `LaneReceiver::recv`, `AsyncChannel::recv` and each
    /// item of its `Stream`. Default one hour. `Duration::MAX` waits
    /// without a bound.
    pub recv_timeout: Duration,
    /// Bound on the connect handshake (both ends). Default 5 s.
    pub connect_timeout: Duration,
    /// Bound on [`Listener::accept`](crate::Listener::accept) waiting for
    /// a connection (the handshake after it is bounded by
    /// `connect_timeout`). Default one hour. `Duration::MAX` waits without
    /// a bound.
    pub accept_timeout: Duration,
    /// Who may connect (listener side).
    pub access: AccessPolicy,
    /// Cap on slices the peer may hold from us at once.
    pub max_in_flight: usize,
    /// Cap on the bytes of the slices the peer may hold from us at once: a
    /// send waits (like at `max_in_flight`) until the peer released enough.
    /// Keeps the buffers in flight few and warm in the caches and the TLB,
    /// and bounds what a slow peer pins. A message larger than the cap is
    /// still sent, once the peer holds nothing else. Default 256 MiB.
    pub max_bytes_in_flight: u64,
    /// Pre-fault received regions when mapping them.
    pub populate: bool,
    /// How often a sleeping side checks whether the peer is still alive.
    pub liveness_interval: Duration,
    /// Largest region a peer may pass us (bytes); larger ones are refused.
    pub max_region_len: u64,
    /// The small-message path: a message of one slice of our own making
    /// (a pool's or an `Uncached` buffer) of at most `lane.slot_size`
    /// bytes is copied into one of `lane.slots` slots this end owns
    /// instead of lent by reference, while a slot is free (the rest go by
    /// reference). Made on the first such message; `slots: 0` turns it
    /// off. Default 64 slots of 4 KiB (256 KiB per sending end).
    pub lane: LaneConfig,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            ring_entries: 1024,
            notice_entries: 2048,
            policy: ChannelPolicy::default(),
            send_timeout: Duration::from_secs(10),
            recv_timeout: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(5),
            accept_timeout: Duration::from_secs(3600),
            access: AccessPolicy::default(),
            max_in_flight: 1 << 16,
            max_bytes_in_flight: DEFAULT_MAX_BYTES_IN_FLIGHT,
            populate: true,
            liveness_interval: crate::wait::LIVENESS,
            max_region_len: 4 << 30,
            lane: LaneConfig::default(),
        }
    }
}
