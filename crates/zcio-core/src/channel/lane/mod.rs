//! Lanes: the channel's fast path for small messages at the latency of a
//! few cache-line transfers.
//!
//! A channel carries `Msg`s of pool buffers that may go anywhere — forwarded
//! to a third process, held for long, sent from any thread — and pays for
//! that generality on every message: locks, reference counts, a ledger
//! entry, region look-ups. A *lane* is the other trade-off, the one iceoryx2
//! makes: the sender owns a fixed set of slots in one region (read-only for
//! the receiver), one thread at each end owns its end (`&mut self`), and a
//! message is a slot index and a length on a sequence-numbered ring. A send
//! is a loan from a free list, the caller's writes, and one ring entry; a
//! receive is one ring entry copied out and checked, the caller's reads, and
//! one notice back when the [`LaneMsg`] is dropped. No lock, no reference
//! count, no allocation, no system call unless the other end sleeps.
//!
//! ```
//! use zcio::{Channel, ChannelConfig, LaneConfig};
//!
//! let (a, b) = Channel::pair(ChannelConfig::default())?;
//! let mut tx = a.open_lane(&LaneConfig { slots: 8, slot_size: 4096 })?;
//! let mut rx = b.accept_lane()?;
//!
//! let mut loan = tx.loan()?;                       // reserve a slot
//! loan.as_mut_slice()[..5].copy_from_slice(b"hello"); // fill it in place
//! loan.send(5).map_err(|e| *e.error())?;           // publish 5 bytes
//!
//! let msg = rx.recv()?;                            // read in place
//! assert_eq!(msg.to_vec(), b"hello");
//! drop(msg);                                       // the slot goes back
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What a lane gives up: messages are at most `slot_size` bytes and cannot
//! be forwarded, split or held past the receiver's next receive (a
//! [`LaneMsg`] borrows its receiver); at most `slots` messages are lent or
//! in flight. The hostile-peer rules hold: descriptors and notices are
//! copied out and checked against the slot count and size, a notice can
//! only free a slot that is in flight, the receiver cannot write the slots,
//! every wait is bounded and watches the peer, and a broken ring is
//! reported as [`LaneError::Corrupt`]. A lane lives on its channel: closing
//! the channel, or the peer dying, ends it.

mod error;
#[cfg(all(test, loom))]
mod loom_lane;
mod offered;
mod receiver;
mod segment;
mod sender;
#[cfg(all(test, not(loom)))]
mod tests;
#[doc(hidden)]
pub mod wire;

pub use error::LaneError;
pub(crate) use offered::Offered;
pub use receiver::{LaneMsg, LaneReceiver};
pub use sender::{LaneSendError, LaneSender, Loan};

/// The shape of a lane, chosen by its sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneConfig {
    /// How many messages may be lent or in flight at once (1..=65536).
    pub slots: u32,
    /// The longest message, in bytes (1 B..=1 GiB; the slots together
    /// must fit the receiver's `max_region_len`).
    pub slot_size: usize,
}

impl LaneConfig {
    /// No slots: as [`ChannelConfig::lane`](crate::ChannelConfig::lane),
    /// every message goes by reference.
    pub const OFF: Self = Self {
        slots: 0,
        slot_size: 0,
    };

    /// Whether this turns the small-message path off (no slots, or slots
    /// of no bytes).
    pub fn is_off(&self) -> bool {
        self.slots == 0 || self.slot_size == 0
    }
}

impl Default for LaneConfig {
    /// 64 slots of 4 KiB.
    fn default() -> Self {
        Self {
            slots: 64,
            slot_size: 4096,
        }
    }
}

/// Counters of one lane end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaneStats {
    /// Messages sent (sender) or received (receiver).
    pub messages: u64,
    /// Notices taken in (sender) or published (receiver).
    pub notices: u64,
    /// Sender: notices naming a slot that was not in flight (ignored).
    pub bad_notices: u64,
    /// Receiver: descriptors naming a slot or length out of bounds (dropped).
    pub malformed: u64,
    /// Receiver: notices that found the notice ring full (a sender that
    /// names slots it never got back); dropped.
    pub notices_dropped: u64,
    /// Sender: slots the receiver holds now.
    pub in_flight: u32,
    /// Payload bytes sent (sender) or received (receiver).
    pub bytes: u64,
    /// Loans, sends (sender) or receives (receiver) refused at once: no
    /// slot, no room, or nothing there.
    pub would_block: u64,
    /// Loans (sender) or receives (receiver) that timed out.
    pub timed_out: u64,
    /// Loans, sends (sender) or receives (receiver) that found the lane
    /// ended (the peer, or the channel, gone).
    pub disconnected: u64,
    /// Times this end slept.
    pub sleeps: u64,
    /// Wakes this end issued.
    pub wakes: u64,
    /// The peer's pid as this process's PID namespace sees it (0: not
    /// visible from here).
    pub peer_pid: u32,
    /// An id both ends of the lane report alike (the inode number of the
    /// lane segment's memfd).
    pub connection: u64,
}

impl LaneStats {
    /// The counters a lane end keeps in its statistics page, for the
    /// direction of `messages`/`bytes` (sent or received) and of the
    /// refusals.
    fn with_page(mut self, page: &zcio_sys::registry::StatsPage, sender: bool) -> LaneStats {
        use zcio_sys::registry::schema::lane as l;
        let g = |i| page.get(i);
        let (m, b, wb, to, dc) = if sender {
            (
                l::SENT_MESSAGES,
                l::SENT_BYTES,
                l::SEND_WOULD_BLOCK,
                l::SEND_TIMED_OUT,
                l::SEND_DISCONNECTED,
            )
        } else {
            (
                l::RECEIVED_MESSAGES,
                l::RECEIVED_BYTES,
                l::RECV_WOULD_BLOCK,
                l::RECV_TIMED_OUT,
                l::RECV_DISCONNECTED,
            )
        };
        self.messages = g(m);
        self.bytes = g(b);
        self.would_block = g(wb);
        self.timed_out = g(to);
        self.disconnected = g(dc);
        self.sleeps = g(l::SLEEPS);
        self.wakes = g(l::WAKES);
        self.peer_pid = g(l::PEER_PID) as u32;
        self.connection = g(l::CONNECTION);
        if sender {
            self.in_flight = g(l::IN_FLIGHT_BUFFERS) as u32;
        }
        self
    }
}
