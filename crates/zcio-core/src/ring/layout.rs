//! The shared-memory layout of a named ring file, and the validated private
//! copy of its geometry.
//!
//! ```text
//! file offset
//! 0      Meta           (128 B, written once by the creator)
//! 128    ProducerLine   (128 B: head word, write ends, counters; hot)
//! 256    ControlLine    (128 B: producer owner, drop counters, consumer bitmap; cold)
//! 384    SharedLine     (128 B: MRP shared read pointer R)
//! 512    Source[8]      (256 B each: rings an index ring points into)
//! 2560   ConsumerSlot[64] (128 B each: one cache-line pair per consumer)
//! 10752  (pad to 12288)
//! 12288  descriptor ring: desc_len × RichPtr (32 B)   [Descriptors, Index]
//! head_len  data area: data_len bytes, power of two    [all but Index]
//! ```
//!
//! Cursor units: byte positions for `Continuous`, `Slotted` and `Variable`
//! rings, entry positions for `Descriptors` and `Index` rings. All positions
//! are free-running 63-bit counters; the place of position `p` in a ring of
//! capacity `cap` (a power of two) is `p & (cap - 1)` and its lap is
//! `p >> log2(cap)`. They never wrap in practice (2^63).

use crate::sync::AtomicU64;

/// First bytes of every ring file.
pub const MAGIC: [u8; 8] = *b"ZCIORING";
/// Bumped whenever anything in this file changes shape or meaning
/// (2: the `OWNER_FAILED` state and `ControlLine::error`; a version-1
/// reader would take a failed producer for a normal end of stream. 3: the
/// named bells of async waiters, `ConsumerSlot::bell`/`bell_armed` and
/// `ControlLine::bell_consumers`/`producer_bell`; a version-2 producer
/// would never ring them. 4: liveness is an OFD lock per participant on
/// the ring file, not `(pid, start time)`; `owner_start` became
/// `owner_pidns`; a version-3 peer would take every live peer in another
/// PID namespace for dead).
pub const LAYOUT_VERSION: u32 = 4;
/// Consumer slots per ring (one bit each in [`ControlLine::consumers`]).
pub const MAX_CONSUMERS: usize = 64;
/// Source rings an index ring can point into.
pub const MAX_SOURCES: usize = 8;
/// Offset of the descriptor ring (fixed headers end here).
pub const DESC_OFF: u64 = 12288;
/// Size of an in-band block header (`Slotted`, `Variable`).
pub const BLOCK_HDR: u64 = 16;
/// Largest descriptor ring, in entries.
pub const MAX_DESC: u64 = 1 << 24;
/// Largest data area (16 GiB).
pub const MAX_DATA: u64 = 1 << 34;
/// Largest slot (2 GiB: [`Meta::slot_size`] is 32 bits).
pub const MAX_SLOT: u64 = 1 << 31;
/// Largest block of a layout that records its length (in-band header,
/// rich pointer: 32 bits).
pub const MAX_RECORDED_BLOCK: u64 = u32::MAX as u64;

/// Data layout of a ring, chosen at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Layout {
    /// c-DBuf: a byte stream; writes and reads of any size, blocks wrap.
    Continuous = 1,
    /// p-DBuf: fixed-size slots (a power of two), one block per slot.
    Slotted = 2,
    /// v-DBuf: variable-length blocks, each preceded by a 16-byte header.
    Variable = 3,
    /// d-DBuf: variable-length data, headers in a separate descriptor ring.
    Descriptors = 4,
    /// IBuf: a ring of rich pointers into other rings (no data of its own).
    Index = 5,
}

impl Layout {
    /// Decode a value read from a ring file.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Continuous,
            2 => Self::Slotted,
            3 => Self::Variable,
            4 => Self::Descriptors,
            5 => Self::Index,
            _ => return None,
        })
    }

    /// Short name (`c`, `p`, `v`, `d`, `i` in the paper's terms).
    pub fn name(self) -> &'static str {
        match self {
            Self::Continuous => "continuous",
            Self::Slotted => "slotted",
            Self::Variable => "variable",
            Self::Descriptors => "descriptors",
            Self::Index => "index",
        }
    }

    /// Whether the cursor counts descriptor entries (else bytes).
    pub fn counts_entries(self) -> bool {
        matches!(self, Self::Descriptors | Self::Index)
    }
}

/// What a full ring does (see the module docs of [`crate::ring`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Overflow {
    /// The producer waits for the slowest live consumer: lossless.
    Block = 1,
    /// Slow Reader Preference: tail drop when the slowest live consumer is a
    /// full ring behind.
    Srp = 2,
    /// Fast Reader Preference: the producer overwrites; lapped consumers
    /// detect it and skip forward.
    Frp = 3,
    /// Medium Reader Preference: tail drop against one shared read pointer
    /// that each consumer sets to its own previous position.
    Mrp = 4,
}

impl Overflow {
    /// Decode a value read from a ring file.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::Block,
            2 => Self::Srp,
            3 => Self::Frp,
            4 => Self::Mrp,
            _ => return None,
        })
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::Srp => "srp",
            Self::Frp => "frp",
            Self::Mrp => "mrp",
        }
    }

    /// Whether the producer may overwrite data a consumer has not read.
    pub fn overwrites(self) -> bool {
        matches!(self, Self::Frp | Self::Mrp)
    }
}

/// Immutable description written by the creator before the file gets its
/// name (so nobody sees it half-written).
#[repr(C, align(128))]
pub struct Meta {
    /// [`MAGIC`].
    pub magic: [u8; 8],
    /// [`LAYOUT_VERSION`].
    pub version: u32,
    /// [`Layout`] as u32.
    pub layout: u32,
    /// [`Overflow`] as u32.
    pub overflow: u32,
    /// Slot size in bytes (`Slotted`; 0 otherwise).
    pub slot_size: u32,
    /// Bytes before the data area (a page multiple).
    pub head_len: u64,
    /// Data area bytes (a power of two, page multiple; 0 for `Index`).
    pub data_len: u64,
    /// Entries in the descriptor ring (power of two; 0 unless
    /// `Descriptors`/`Index`).
    pub desc_len: u64,
    /// Random identity, carried by rich pointers into this ring.
    pub ring_id: u64,
    /// [`MAX_CONSUMERS`].
    pub max_consumers: u32,
    /// Zero.
    pub _reserved: u32,
}

/// The producer's hot line, read by every consumer.
#[repr(C, align(128))]
pub struct ProducerLine {
    /// `head << 1 | consumer_sleeping`: `head` is the published position
    /// (cursor units); bit 0 is set by a consumer about to sleep and cleared
    /// by the producer's publishing swap, which then wakes all sleepers.
    pub head: AtomicU64,
    /// End (cursor units) of the range the producer is writing or has
    /// written: stored *before* the data is overwritten. A reader of position
    /// `p` (block length `n`) knows its block is intact if, after copying,
    /// `write_end <= p + cap` (the seqlock check of FRP/MRP).
    pub write_end: AtomicU64,
    /// `Descriptors` only: as `write_end`, for data bytes.
    pub data_write_end: AtomicU64,
    /// `Descriptors` only: data bytes published.
    pub data_head: AtomicU64,
    /// Blocks published (statistics; on this line because the producer
    /// writes it anyway, so counting costs no extra cache-line transfer).
    pub blocks: AtomicU64,
    /// Bytes published (statistics).
    pub bytes: AtomicU64,
}

/// Producer ownership and counters.
#[repr(C, align(128))]
pub struct ControlLine {
    /// `epoch << 40 | state << 32 | pid` of the producer; state is
    /// [`OWNER_NONE`], [`OWNER_ACTIVE`], [`OWNER_CLOSED`] or
    /// [`OWNER_FAILED`].
    pub owner: AtomicU64,
    /// The producer's PID namespace (inode of `/proc/self/ns/pid`; 0 if
    /// unknown), so a tool can tell whether the pid in `owner` means
    /// anything to it. Liveness is not read from here but from the
    /// producer's lock on the ring file (`ring::live`).
    pub owner_pidns: AtomicU64,
    /// Blocks dropped (SRP/MRP tail drop).
    pub dropped_blocks: AtomicU64,
    /// Bytes dropped.
    pub dropped_bytes: AtomicU64,
    /// Bitmap of active consumer slots.
    pub consumers: AtomicU64,
    /// The code a producer closed the ring with ([`OWNER_FAILED`]); stored
    /// before the owner word says `FAILED`, meaningless otherwise.
    pub error: AtomicU64,
    /// Bitmap of consumer slots whose consumer may sleep on a named bell
    /// ([`ConsumerSlot::bell`]; set once by the consumer, cleared when the
    /// slot is freed): the producer rings those it finds armed.
    pub bell_consumers: AtomicU64,
    /// Number of the producer's named bell (`crate::bell::NamedBell`), 0
    /// while it sleeps on futexes: a consumer whose release finds the
    /// producer's flag on its cursor word rings it instead of waking.
    pub producer_bell: AtomicU64,
}

/// No producer has the ring.
pub const OWNER_NONE: u64 = 0;
/// A producer has the ring.
pub const OWNER_ACTIVE: u64 = 1;
/// The last producer closed the ring (consumers read to the end, then EOF).
pub const OWNER_CLOSED: u64 = 2;
/// The last producer closed the ring with an error ([`ControlLine::error`]):
/// consumers read to the end, then report it instead of EOF. (3 is the
/// producer's private "starting" state.)
pub const OWNER_FAILED: u64 = 4;

/// Encode an owner word.
pub const fn owner_word(epoch: u64, state: u64, pid: u32) -> u64 {
    (epoch & 0xff_ffff) << 40 | (state & 0xff) << 32 | pid as u64
}

/// Decode an owner word into `(epoch, state, pid)`.
pub const fn owner_parts(w: u64) -> (u64, u64, u32) {
    (w >> 40, (w >> 32) & 0xff, w as u32)
}

/// The MRP shared read pointer.
#[repr(C, align(128))]
pub struct SharedLine {
    /// `R` (cursor units): the producer treats it as the single read
    /// pointer; each consumer sets it to its own previous position.
    pub mrp_read: AtomicU64,
}

/// A ring an index ring points into.
#[repr(C)]
pub struct Source {
    /// Its `Meta::ring_id` (0: unused entry).
    pub ring_id: AtomicU64,
    /// Length of `name`.
    pub name_len: u32,
    /// Zero.
    pub _reserved: u32,
    /// Ring name (UTF-8, `name_len` bytes).
    pub name: [u8; 240],
}

/// One consumer's state.
#[repr(C, align(128))]
pub struct ConsumerSlot {
    /// `cursor << 1 | producer_sleeping`: the consumer's published position;
    /// bit 0 is set by a producer waiting for this consumer to make room
    /// (`Block`), cleared by the consumer's publishing swap, which wakes it.
    pub cursor: AtomicU64,
    /// `state << 32 | pid`, 0 when free; state [`SLOT_JOINING`],
    /// [`SLOT_ACTIVE`] or [`SLOT_EVICTING`] (pid of the evicting producer).
    pub owner: AtomicU64,
    /// The consumer's PID namespace (as `ControlLine::owner_pidns`).
    pub owner_pidns: AtomicU64,
    /// `ControlLine::dropped_blocks` when the consumer joined.
    pub drops_at_join: AtomicU64,
    /// Blocks skipped because the producer lapped this consumer.
    pub skipped_blocks: AtomicU64,
    /// Cursor units skipped.
    pub skipped_units: AtomicU64,
    /// Blocks read.
    pub read_blocks: AtomicU64,
    /// Bytes read.
    pub read_bytes: AtomicU64,
    /// Number of the consumer's named bell (`crate::bell::NamedBell`), 0
    /// if it has none.
    pub bell: AtomicU64,
    /// 1 while the consumer sleeps on its bell (stored before it sets the
    /// sleep flag in the head word); the producer swaps it to 0 when it
    /// rings.
    pub bell_armed: AtomicU64,
}

/// Slot being claimed.
pub const SLOT_JOINING: u64 = 1;
/// Slot in use.
pub const SLOT_ACTIVE: u64 = 2;
/// Slot being freed by the producer (pid = the producer's) after its
/// consumer died.
pub const SLOT_EVICTING: u64 = 3;

/// A rich pointer: names a block in any ring, valid in every process.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RichPtr {
    /// `Meta::ring_id` of the ring holding the bytes.
    pub ring_id: u64,
    /// Data position (bytes) of the block in that ring.
    pub pos: u64,
    /// Offset of the bytes of interest from `pos` (skips headers).
    pub offset: u32,
    /// Length in bytes.
    pub len: u32,
    /// Classification tag.
    pub tag: u32,
    /// Zero.
    pub _reserved: u32,
}

/// In-band header of `Slotted` and `Variable` blocks.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BlockHeader {
    /// The block's own position: tells a header from stale data.
    pub pos: u64,
    /// Payload length.
    pub len: u32,
    /// Classification tag.
    pub tag: u32,
}

/// Byte offsets of the fixed header parts.
pub const PRODUCER_OFF: usize = 128;
/// See [`PRODUCER_OFF`].
pub const CONTROL_OFF: usize = 256;
/// See [`PRODUCER_OFF`].
pub const SHARED_OFF: usize = 384;
/// See [`PRODUCER_OFF`].
pub const SOURCES_OFF: usize = 512;
/// See [`PRODUCER_OFF`].
pub const SLOTS_OFF: usize = SOURCES_OFF + MAX_SOURCES * 256;

#[cfg(not(loom))]
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<Meta>() == 128);
    assert!(offset_of!(Meta, head_len) == 24);
    assert!(offset_of!(Meta, ring_id) == 48);
    assert!(size_of::<ProducerLine>() == 128 && align_of::<ProducerLine>() == 128);
    assert!(offset_of!(ProducerLine, write_end) == 8);
    assert!(size_of::<ControlLine>() == 128);
    assert!(offset_of!(ControlLine, consumers) == 32);
    assert!(offset_of!(ControlLine, error) == 40);
    assert!(offset_of!(ControlLine, bell_consumers) == 48);
    assert!(offset_of!(ControlLine, producer_bell) == 56);
    assert!(size_of::<SharedLine>() == 128);
    assert!(size_of::<Source>() == 256);
    assert!(size_of::<ConsumerSlot>() == 128);
    assert!(offset_of!(ConsumerSlot, owner) == 8);
    assert!(offset_of!(ConsumerSlot, bell) == 64);
    assert!(offset_of!(ConsumerSlot, bell_armed) == 72);
    assert!(size_of::<RichPtr>() == 32);
    assert!(size_of::<BlockHeader>() == BLOCK_HDR as usize);
    assert!(SLOTS_OFF == 2560);
    assert!(SLOTS_OFF + MAX_CONSUMERS * 128 <= DESC_OFF as usize);
    assert!(SLOTS_OFF.is_multiple_of(128));
};

/// Why a ring file was refused on attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadHeader {
    /// Not a zcio ring.
    Magic,
    /// A layout version this build does not read.
    Version(u32),
    /// A field is out of range or inconsistent (named).
    Field(&'static str),
    /// The file is not as long as its header says.
    Length {
        /// From the header.
        expected: u64,
        /// From `fstat`.
        actual: u64,
    },
}

impl std::fmt::Display for BadHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Magic => write!(f, "the file does not start with a zcio ring header"),
            Self::Version(v) => write!(
                f,
                "ring layout version {v}, but this zcio reads version {LAYOUT_VERSION} (made by another zcio release)"
            ),
            Self::Field(what) => write!(f, "its header has an invalid {what}"),
            Self::Length { expected, actual } => write!(
                f,
                "the file has {actual} bytes, its header needs {expected} (truncated, or not a ring)"
            ),
        }
    }
}

/// The geometry of a ring: a validated private copy of [`Meta`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Data layout.
    pub layout: Layout,
    /// Overflow policy.
    pub overflow: Overflow,
    /// Slot size (`Slotted`).
    pub slot_size: u64,
    /// Header bytes (page multiple).
    pub head_len: u64,
    /// Data area bytes.
    pub data_len: u64,
    /// Descriptor ring entries.
    pub desc_len: u64,
    /// Identity.
    pub ring_id: u64,
}

/// The cursor units blocks start at multiples of: a slot (`Slotted`), a
/// block header (`Variable`, whose blocks are whole headers long), one
/// unit otherwise.
pub(crate) fn block_unit(g: &Geometry) -> u64 {
    match g.layout {
        Layout::Slotted => g.slot_size,
        Layout::Variable => BLOCK_HDR,
        _ => 1,
    }
}

/// What [`Geometry::new`] says of a bad descriptor count.
const BAD_ENTRIES: &str = "entries (a power of two between 2 and 2^24)";

fn pow2_page(v: u64) -> bool {
    v.is_power_of_two() && v >= crate::sys::page_size() as u64
}

impl Geometry {
    /// Consumer slots per ring.
    pub const MAX_CONSUMERS: usize = MAX_CONSUMERS;
    /// Source rings an index ring can point into.
    pub const MAX_SOURCES: usize = MAX_SOURCES;
    /// Bytes of the in-band header each block carries in the `Slotted` and
    /// `Variable` layouts (what a block of `n` bytes occupies is `n` plus this,
    /// rounded up to the layout's alignment).
    pub const BLOCK_HEADER_LEN: u64 = BLOCK_HDR;
    /// The largest data area a ring may have (16 GiB).
    pub const MAX_DATA_LEN: u64 = MAX_DATA;
    /// The most entries a ring's descriptor ring may have (`Index` layout).
    pub const MAX_DESCRIPTORS: u64 = MAX_DESC;
    /// The largest slot of a `Slotted` ring (2 GiB).
    pub const MAX_SLOT_SIZE: u64 = MAX_SLOT;

    /// Geometry for a new ring, or the name of the bad parameter.
    pub fn new(
        layout: Layout,
        overflow: Overflow,
        data_len: u64,
        slot_size: u64,
        desc_len: u64,
        ring_id: u64,
    ) -> Result<Self, &'static str> {
        let (data_len, desc_len, slot_size) = match layout {
            Layout::Index => (0, desc_len, 0),
            Layout::Descriptors => (data_len, desc_len, 0),
            Layout::Slotted => (data_len, 0, slot_size),
            _ => (data_len, 0, 0),
        };
        let ps = crate::sys::page_size() as u64;
        // Before `check` has seen the count (it may come from a file):
        // checked, so that no count makes the sum overflow.
        let head_len = desc_len
            .checked_mul(std::mem::size_of::<RichPtr>() as u64)
            .and_then(|b| b.checked_add(DESC_OFF))
            .and_then(|h| h.checked_next_multiple_of(ps))
            .ok_or(BAD_ENTRIES)?;
        let g = Self {
            layout,
            overflow,
            slot_size,
            head_len,
            data_len,
            desc_len,
            ring_id,
        };
        g.check()?;
        Ok(g)
    }

    fn check(&self) -> Result<(), &'static str> {
        match self.layout {
            Layout::Index => {}
            _ => {
                if !pow2_page(self.data_len) || self.data_len > MAX_DATA {
                    return Err("size (a power of two between the page size and 16 GiB)");
                }
            }
        }
        if self.layout.counts_entries()
            && (!self.desc_len.is_power_of_two() || self.desc_len < 2 || self.desc_len > MAX_DESC)
        {
            return Err(BAD_ENTRIES);
        }
        if self.layout == Layout::Slotted
            && (!self.slot_size.is_power_of_two()
                || self.slot_size < 2 * BLOCK_HDR
                || self.slot_size > self.data_len
                || self.slot_size > MAX_SLOT)
        {
            return Err("slot size (a power of two from 32 bytes to the ring size, at most 2 GiB)");
        }
        Ok(())
    }

    /// Validate a header copied out of a file of `file_len` bytes.
    pub fn from_meta(m: &MetaCopy, file_len: u64) -> Result<Self, BadHeader> {
        if m.magic != MAGIC {
            return Err(BadHeader::Magic);
        }
        if m.version != LAYOUT_VERSION {
            return Err(BadHeader::Version(m.version));
        }
        let layout = Layout::from_raw(m.layout).ok_or(BadHeader::Field("layout"))?;
        let overflow = Overflow::from_raw(m.overflow).ok_or(BadHeader::Field("overflow"))?;
        if m.max_consumers as usize != MAX_CONSUMERS {
            return Err(BadHeader::Field("max_consumers"));
        }
        let g = Self::new(
            layout,
            overflow,
            m.data_len,
            u64::from(m.slot_size),
            m.desc_len,
            m.ring_id,
        )
        .map_err(BadHeader::Field)?;
        if g.head_len != m.head_len || g.data_len != m.data_len || g.desc_len != m.desc_len {
            return Err(BadHeader::Field("head_len"));
        }
        if file_len != g.file_len() {
            return Err(BadHeader::Length {
                expected: g.file_len(),
                actual: file_len,
            });
        }
        Ok(g)
    }

    /// Total file length.
    pub fn file_len(&self) -> u64 {
        self.head_len + self.data_len
    }

    /// Capacity in cursor units (bytes or entries).
    pub fn cap(&self) -> u64 {
        if self.layout.counts_entries() {
            self.desc_len
        } else {
            self.data_len
        }
    }

    /// The header to write into a new file.
    pub fn to_meta(&self) -> MetaCopy {
        MetaCopy {
            magic: MAGIC,
            version: LAYOUT_VERSION,
            layout: self.layout as u32,
            overflow: self.overflow as u32,
            slot_size: self.slot_size as u32,
            head_len: self.head_len,
            data_len: self.data_len,
            desc_len: self.desc_len,
            ring_id: self.ring_id,
            max_consumers: MAX_CONSUMERS as u32,
        }
    }

    /// Largest payload of one block (what a layout that records a block's
    /// length can record: at most [`MAX_RECORDED_BLOCK`]).
    pub fn max_block(&self) -> u64 {
        match self.layout {
            Layout::Continuous => self.data_len,
            Layout::Descriptors => self.data_len.min(MAX_RECORDED_BLOCK),
            Layout::Slotted => self.slot_size - BLOCK_HDR,
            Layout::Variable => (self.data_len - BLOCK_HDR).min(MAX_RECORDED_BLOCK),
            Layout::Index => MAX_RECORDED_BLOCK,
        }
    }
}

/// Plain copy of [`Meta`] (what is read from or written to the file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct MetaCopy {
    /// See [`Meta`].
    pub magic: [u8; 8],
    /// See [`Meta`].
    pub version: u32,
    /// See [`Meta`].
    pub layout: u32,
    /// See [`Meta`].
    pub overflow: u32,
    /// See [`Meta`].
    pub slot_size: u32,
    /// See [`Meta`].
    pub head_len: u64,
    /// See [`Meta`].
    pub data_len: u64,
    /// See [`Meta`].
    pub desc_len: u64,
    /// See [`Meta`].
    pub ring_id: u64,
    /// See [`Meta`].
    pub max_consumers: u32,
}

#[cfg(not(loom))]
const _: () = {
    use std::mem::offset_of;
    // MetaCopy mirrors Meta's leading fields byte for byte.
    assert!(offset_of!(MetaCopy, head_len) == offset_of!(Meta, head_len));
    assert!(offset_of!(MetaCopy, ring_id) == offset_of!(Meta, ring_id));
    assert!(offset_of!(MetaCopy, max_consumers) == offset_of!(Meta, max_consumers));
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_validates() {
        let g = Geometry::new(Layout::Continuous, Overflow::Block, 1 << 16, 0, 0, 7).unwrap();
        assert_eq!(g.head_len, DESC_OFF);
        assert_eq!(g.cap(), 1 << 16);
        assert!(Geometry::new(Layout::Continuous, Overflow::Block, 3 << 12, 0, 0, 7).is_err());
        assert!(Geometry::new(Layout::Slotted, Overflow::Block, 1 << 16, 16, 0, 7).is_err());
        let d = Geometry::new(Layout::Descriptors, Overflow::Frp, 1 << 16, 0, 1024, 7).unwrap();
        assert_eq!(d.head_len, DESC_OFF + 32 * 1024);
        assert_eq!(d.cap(), 1024);
        let m = d.to_meta();
        assert_eq!(Geometry::from_meta(&m, d.file_len()), Ok(d));
        assert!(matches!(
            Geometry::from_meta(&m, d.file_len() - 4096),
            Err(BadHeader::Length { .. })
        ));
        let mut bad = m;
        bad.magic[0] = b'X';
        assert_eq!(
            Geometry::from_meta(&bad, d.file_len()),
            Err(BadHeader::Magic)
        );
        let mut bad = m;
        bad.layout = 99;
        assert_eq!(
            Geometry::from_meta(&bad, d.file_len()),
            Err(BadHeader::Field("layout"))
        );
    }

    /// Fuzz findings (`fuzz/regressions/ring_header/slot-size-beyond-its-field`,
    /// `variable-block-longer-than-its-length-field`): a slotted ring with
    /// slots of 4 GiB or more was accepted, and its header recorded a slot
    /// size of 0 (32 bits) that no other process could open; variable and
    /// descriptors rings over 4 GiB took blocks whose length their 32-bit
    /// header or entry truncated. Slots stop at 2 GiB, blocks at what the
    /// field holds, and a geometry re-encodes to itself.
    #[test]
    fn slots_and_block_lengths_fit_their_fields() {
        let slot = |s| Geometry::new(Layout::Slotted, Overflow::Block, MAX_DATA, s, 0, 7);
        let g = slot(MAX_SLOT).unwrap();
        assert_eq!(Geometry::from_meta(&g.to_meta(), g.file_len()), Ok(g));
        assert!(slot(MAX_SLOT * 2).is_err() && slot(MAX_DATA).is_err());
        for l in [Layout::Variable, Layout::Descriptors] {
            let g = Geometry::new(l, Overflow::Block, MAX_DATA, 0, 16, 7).unwrap();
            assert_eq!(g.max_block(), MAX_RECORDED_BLOCK, "{l:?}");
            let small = Geometry::new(l, Overflow::Block, 1 << 16, 0, 16, 7).unwrap();
            assert!(small.max_block() >= (1 << 16) - BLOCK_HDR);
        }
    }

    /// Fuzz finding (`fuzz/regressions/ring_header/meta-entries-overflow`):
    /// a header announcing 2^60 (or any huge number of) descriptor entries
    /// overflowed the header length computed from it before the count was
    /// checked: `RingMap::open` and `zcio ring stat` panicked on such a
    /// file. It is refused as a bad count.
    #[test]
    fn a_huge_descriptor_count_is_refused() {
        let g = Geometry::new(Layout::Index, Overflow::Block, 0, 0, 16, 7).unwrap();
        for n in [1 << 59, 1 << 60, u64::MAX / 32, u64::MAX] {
            let mut m = g.to_meta();
            m.desc_len = n;
            assert_eq!(
                Geometry::from_meta(&m, g.file_len()),
                Err(BadHeader::Field(BAD_ENTRIES)),
                "{n}"
            );
            assert_eq!(
                Geometry::new(Layout::Descriptors, Overflow::Frp, 1 << 16, 0, n, 7),
                Err(BAD_ENTRIES)
            );
        }
    }

    #[test]
    fn owner_words_round_trip() {
        let w = owner_word(5, OWNER_ACTIVE, 1234);
        assert_eq!(owner_parts(w), (5, OWNER_ACTIVE, 1234));
    }
}
