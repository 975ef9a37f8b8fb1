//! Beltway rings: named shared rings with one producer and many consumers.
//!
//! A ring is a file under `/dev/shm` (`zcio-ring.NAME`; `$ZCIO_RING_DIR`
//! overrides the directory), so the kernel enforces its uid/gid/mode: a
//! process that cannot open the file read-write cannot attach. The producer
//! writes each block once; every consumer reads it at its own pace through a
//! private cursor, with no per-block allocation and no mapping work after
//! attach, and without any copy when it uses [`Consumer::peek`].
//!
//! * Data layouts ([`Layout`]): `Continuous` (c-DBuf, a byte stream whose
//!   blocks may wrap — the data area is mapped twice back to back, so every
//!   block is contiguous in memory), `Slotted` (p-DBuf), `Variable` (v-DBuf,
//!   in-band 16-byte headers), `Descriptors` (d-DBuf, headers in a separate
//!   ring of rich pointers) and `Index` (IBuf: rich pointers into other
//!   rings; reading one yields the bytes of the ring it points into,
//!   attached on first use). The API is the same for all.
//! * Overflow policies ([`Overflow`]): `Block`, `Srp`, `Frp`, `Mrp`. Drops
//!   and skips are counted per ring and per consumer ([`stat`]).
//! * Liveness: producers and consumers record pid and start time; a blocked
//!   producer evicts a consumer whose process died (pidfd), a blocked
//!   consumer reports [`ReadError::Disconnected`] — if that producer wrote
//!   anything since the consumer joined; otherwise the consumer waits for
//!   a new producer. A producer can also end the stream with an error
//!   ([`Producer::close_with_error`], read as [`ReadError::ProducerFailed`]).
//! * A peer that truncates the file cannot kill us (a `SIGBUS` in a ring
//!   mapping maps zeros over the page and the operation reports
//!   [`ReadError::Corrupt`]); corrupt shared state gives typed errors.
//! * Opening, one way: a [`RingMap`] from [`Options::create`] (a new ring),
//!   [`Options::create_or_open`] or [`RingMap::open`] (an existing one), then
//!   [`Producer::attach`] or [`Consumer::attach`] on it. [`Producer::open`]
//!   and [`Consumer::open`] are the two steps for an existing ring.
//! * Fast splice: [`Producer::splice`] of a [`Peek`] (the only way) into
//!   an `Index` ring stores a rich pointer, not the data.
//! * Every wait is bounded by default: [`Producer::write`] waits for room at
//!   most the producer's [`wait_bound`](Producer::wait_bound)
//!   ([`Producer::DEFAULT_WAIT_BOUND`], 10 s), [`Consumer::read`] and
//!   [`Consumer::peek`] wait for a block at most the consumer's
//!   ([`Consumer::DEFAULT_WAIT_BOUND`], one hour); `set_wait_bound` changes them.
//!   `try_` never waits, `_timeout` waits as long as it is told
//!   (`Duration::MAX`, or [`Wait::Forever`]: without a bound).
//!
//! ```
//! use std::time::Duration;
//! use zcio::ring::{Consumer, Options, Producer, Start};
//!
//! # let dir = std::env::temp_dir().join(format!("zcio-doc-ring-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! # std::env::set_var("ZCIO_RING_DIR", &dir);
//! let map = Options::new().size(64 << 10).create_or_open("doc-frames")?;
//! let mut c = Consumer::attach(map.clone(), Start::Newest)?; // any process the file mode allows
//! let mut p = Producer::attach(map)?;
//! p.write(b"frame 1")?;
//! if let Some(block) = c.peek_timeout(1 << 10, Duration::from_secs(1))? {
//!     let view = block.view();                 // in place, no copy, no `&[u8]`
//!     assert_eq!(view.to_vec(), b"frame 1");   // copy out what you keep ...
//!     block.release()?;                        // ... then check it was not overwritten
//! }
//! zcio::ring::unlink("doc-frames")?;
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok::<(), zcio::Error>(())
//! ```

mod consumer;
mod error;
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
mod evented;
#[doc(hidden)]
pub mod layout;
mod live;
#[cfg(all(test, loom))]
mod loom_beltway;
mod map;
mod producer;
pub(crate) mod protocol;
mod registered;
mod stat;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use consumer::{Consumer, ConsumerStats, DetachedPeek, Peek, SeekTo, Start};
pub use error::{OpenError, ReadError, SourceError, WriteError};
pub use layout::{BadHeader, Geometry, Layout, Overflow, RichPtr};
pub use map::RingMap;

/// The directory named rings live in: `$ZCIO_RING_DIR`, or `/dev/shm`
/// (where the kernel's uid/gid/mode checks decide who may attach).
pub fn ring_dir() -> std::path::PathBuf {
    crate::sys::shm::ring_dir()
}

/// The file of ring `name` in [`ring_dir`]; `None` for a name that is not
/// a valid ring name (1..=200 of `[A-Za-z0-9._-]`, not starting with a dot).
pub fn ring_path(name: &str) -> Option<std::path::PathBuf> {
    crate::sys::shm::valid_name(name).then(|| crate::sys::shm::path_of(name))
}
pub use producer::{DetachedReservation, Producer, ProducerStats, Reservation};
pub use stat::{stat, ConsumerInfo, ProducerInfo, RingStat};

/// How long an operation may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Not at all (`WouldBlock`).
    No,
    /// Up to this end's bound ([`Producer::wait_bound`],
    /// [`Consumer::wait_bound`]; `TimedOut` after it): the wait of
    /// [`Producer::write`], [`Consumer::read`] and [`Consumer::peek`].
    Default,
    /// Until this instant (`TimedOut`).
    Until(Instant),
    /// As long as it takes (dead peers are still detected). Only ever ask
    /// for it of trusted peers: a consumer that stops reading holds a
    /// `Block` producer for good, a producer that stops writing its
    /// consumers.
    Forever,
}

/// Default [`Producer::wait_bound`]: how long a write waits for room
/// (like `ChannelConfig::send_timeout`).
pub(crate) const DEFAULT_WRITE_BOUND: Duration = Duration::from_secs(10);

/// Default [`Consumer::wait_bound`]: how long a read or peek waits for a
/// block (like `ChannelConfig::recv_timeout`).
pub(crate) const DEFAULT_READ_BOUND: Duration = Duration::from_secs(3600);

impl Wait {
    /// `Default` as an instant `bound` from now (`Forever` when that is
    /// too far to represent); the others as they are.
    fn resolve(self, bound: Duration) -> Wait {
        match self {
            Wait::Default => Wait::within(bound),
            w => w,
        }
    }

    /// At most `d` from now (`Forever` when that is too far to represent,
    /// `Duration::MAX` say).
    pub fn within(d: Duration) -> Wait {
        match Instant::now().checked_add(d) {
            Some(t) => Wait::Until(t),
            None => Wait::Forever,
        }
    }

    fn deadline(self) -> Option<Instant> {
        match self {
            Wait::Until(d) => Some(d),
            _ => None,
        }
    }
}

/// Parameters of a ring, for creating it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Data layout.
    pub layout: Layout,
    /// What a full ring does.
    pub overflow: Overflow,
    /// Data area in bytes (power of two, ≥ page size).
    pub size: u64,
    /// Slot size for `Slotted` rings (power of two, ≥ 32).
    pub slot_size: u64,
    /// Descriptor entries for `Descriptors` and `Index` rings (power of two).
    pub entries: u64,
    /// Permission bits of a new ring file (set explicitly: the umask does
    /// not apply).
    pub mode: u32,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            layout: Layout::Continuous,
            overflow: Overflow::Block,
            size: 1 << 20,
            slot_size: 2048,
            entries: 4096,
            mode: 0o600,
        }
    }
}

impl Options {
    /// Default options (continuous, `Block`, 1 MiB, mode 0600).
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the layout.
    pub fn layout(mut self, l: Layout) -> Self {
        self.layout = l;
        self
    }

    /// Set the overflow policy.
    pub fn overflow(mut self, o: Overflow) -> Self {
        self.overflow = o;
        self
    }

    /// Set the data size in bytes.
    pub fn size(mut self, s: u64) -> Self {
        self.size = s;
        self
    }

    /// Set the slot size (`Slotted`).
    pub fn slot_size(mut self, s: u64) -> Self {
        self.slot_size = s;
        self
    }

    /// Set the descriptor entries (`Descriptors`, `Index`).
    pub fn entries(mut self, n: u64) -> Self {
        self.entries = n;
        self
    }

    /// Set the permission bits (`0o600`, `0o660` …). Bits beyond `0o777`
    /// (setuid, setgid, sticky, file type) make creating fail with
    /// [`OpenError::InvalidConfig`] rather than being dropped silently.
    pub fn mode(mut self, m: u32) -> Self {
        self.mode = m;
        self
    }

    fn geometry(&self) -> Result<Geometry, OpenError> {
        if self.mode & !0o777 != 0 {
            return Err(OpenError::InvalidConfig(
                "mode: it has bits beyond 0777 (only the permission bits apply: use e.g. 0600 or 0660)",
            ));
        }
        let id = std::hash::BuildHasher::hash_one(
            &std::collections::hash_map::RandomState::new(),
            (std::process::id(), Instant::now()),
        ) | 1;
        Geometry::new(
            self.layout,
            self.overflow,
            self.size,
            self.slot_size,
            self.entries,
            id,
        )
        .map_err(OpenError::InvalidConfig)
    }

    /// Create ring `name`; fails if it exists.
    pub fn create(&self, name: &str) -> Result<Arc<RingMap>, OpenError> {
        RingMap::create(name, &self.geometry()?, self.mode)
    }

    /// Open ring `name`, creating it with these options if it does not exist.
    pub fn create_or_open(&self, name: &str) -> Result<Arc<RingMap>, OpenError> {
        let geo = self.geometry()?;
        loop {
            match RingMap::open(name, true) {
                Err(OpenError::NotFound(_)) => {}
                r => return r,
            }
            match RingMap::create(name, &geo, self.mode) {
                Err(OpenError::Exists(_)) => continue,
                r => return r,
            }
        }
    }
}

impl Producer {
    /// Become the producer of existing ring `name`.
    pub fn open(name: &str) -> Result<Self, OpenError> {
        Self::attach(RingMap::open(name, true)?)
    }
}

impl Consumer {
    /// Join existing ring `name` as a consumer starting at the head.
    pub fn open(name: &str) -> Result<Self, OpenError> {
        Self::attach(RingMap::open(name, true)?, Start::Newest)
    }
}

/// Remove ring `name` (attached processes keep using it).
pub fn unlink(name: &str) -> Result<(), OpenError> {
    if !crate::sys::shm::valid_name(name) {
        return Err(OpenError::InvalidName(name.to_owned()));
    }
    crate::sys::shm::unlink(name).map_err(|e| match e {
        rustix::io::Errno::NOENT => OpenError::NotFound(name.to_owned()),
        rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => {
            OpenError::PermissionDenied(name.to_owned())
        }
        e => OpenError::Os(e),
    })
}

/// Names of existing rings.
pub fn list() -> Result<Vec<String>, OpenError> {
    crate::sys::shm::list().map_err(OpenError::Os)
}

#[cfg(test)]
mod tests;
