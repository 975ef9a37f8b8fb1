//! The layout of a registry entry file: a header page, then one page of
//! statistics counters. Shared with every tool that lists the registry, so
//! it is `#[repr(C)]`, versioned, and checked at compile time.

use std::mem::{offset_of, size_of};

/// `"ZCIOREG1"` as a little-endian `u64`: the first eight bytes of a
/// complete entry. The owner writes it last (Release), after every other
/// header field.
pub const MAGIC: u64 = u64::from_le_bytes(*b"ZCIOREG1");
/// The layout version this code writes and reads.
pub const VERSION: u32 = 1;
/// Longest object name an entry holds, in bytes (longer names are cut at a
/// character boundary).
pub const NAME_MAX: usize = 200;
/// Offset of the statistics page in the file.
pub const STATS_OFFSET: usize = 4096;
/// Number of `u64` counters in the statistics page.
pub const STATS_COUNT: usize = 512;
/// Length of an entry file.
pub const ENTRY_LEN: usize = STATS_OFFSET + STATS_COUNT * 8;

/// What kind of object an entry describes (stored as a `u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
#[non_exhaustive]
pub enum Kind {
    /// A channel listener (a bound socket path).
    Listener = 1,
    /// One end of a channel connection.
    Channel = 2,
    /// A lane of a channel.
    Lane = 3,
    /// A ring's producer.
    RingProducer = 4,
    /// A ring's consumer.
    RingConsumer = 5,
    /// A rendezvous listener.
    Rendezvous = 6,
    /// A splice association.
    Association = 7,
    /// A bridge exporting a local object.
    BridgeExport = 8,
    /// A bridge importing a remote object.
    BridgeImport = 9,
    /// A buffer pool.
    Pool = 10,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 10] = [
        Kind::Listener,
        Kind::Channel,
        Kind::Lane,
        Kind::RingProducer,
        Kind::RingConsumer,
        Kind::Rendezvous,
        Kind::Association,
        Kind::BridgeExport,
        Kind::BridgeImport,
        Kind::Pool,
    ];

    /// The kind stored as `code`, if it is one.
    pub fn from_code(code: u32) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| *k as u32 == code)
    }

    /// A short lowercase word for file names and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Listener => "listener",
            Kind::Channel => "channel",
            Kind::Lane => "lane",
            Kind::RingProducer => "producer",
            Kind::RingConsumer => "consumer",
            Kind::Rendezvous => "rendezvous",
            Kind::Association => "association",
            Kind::BridgeExport => "export",
            Kind::BridgeImport => "import",
            Kind::Pool => "pool",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The header at offset 0 of an entry file. Never referenced in shared
/// memory: the owner writes it field by field, a reader copies it out
/// (volatile) and validates the copy.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Header {
    /// [`MAGIC`] once the header is complete.
    pub magic: u64,
    /// [`VERSION`].
    pub version: u32,
    /// A [`Kind`] code.
    pub kind: u32,
    /// The owner's pid as the owner sees it (in its own PID namespace).
    pub pid: u32,
    /// The owner's effective uid.
    pub uid: u32,
    /// Inode of the owner's PID namespace (`/proc/self/ns/pid`), 0 unknown.
    pub pid_ns: u64,
    /// Creation time, nanoseconds since the Unix epoch.
    pub created_ns: u64,
    /// Offset of the statistics page ([`STATS_OFFSET`]).
    pub stats_offset: u32,
    /// Counters in it ([`STATS_COUNT`]).
    pub stats_count: u32,
    /// Bytes of `name` in use.
    pub name_len: u32,
    /// Zero.
    pub reserved: u32,
    /// The object's name, UTF-8, `name_len` bytes.
    pub name: [u8; NAME_MAX],
}

/// Size of [`Header`].
pub const HEADER_LEN: usize = 256;

const _: () = {
    assert!(size_of::<Header>() == HEADER_LEN);
    assert!(offset_of!(Header, magic) == 0);
    assert!(offset_of!(Header, version) == 8);
    assert!(offset_of!(Header, kind) == 12);
    assert!(offset_of!(Header, pid) == 16);
    assert!(offset_of!(Header, uid) == 20);
    assert!(offset_of!(Header, pid_ns) == 24);
    assert!(offset_of!(Header, created_ns) == 32);
    assert!(offset_of!(Header, stats_offset) == 40);
    assert!(offset_of!(Header, stats_count) == 44);
    assert!(offset_of!(Header, name_len) == 48);
    assert!(offset_of!(Header, name) == 56);
    assert!(HEADER_LEN <= STATS_OFFSET);
    assert!(STATS_OFFSET.is_multiple_of(8));
    assert!(cfg!(target_endian = "little"), "entries are little-endian");
};

/// Why a header copy was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No magic: not an entry, or one still being written.
    Magic,
    /// A layout version this code does not read.
    Version,
    /// An unknown kind code.
    Kind,
    /// Statistics page not where this version puts it.
    Stats,
    /// Name length out of range or not UTF-8.
    Name,
}

impl Refusal {
    /// A short phrase for listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Magic => "no magic (not an entry, or still being written)",
            Refusal::Version => "unknown layout version",
            Refusal::Kind => "unknown kind",
            Refusal::Stats => "statistics page out of place",
            Refusal::Name => "name not UTF-8 or too long",
        }
    }
}

impl Header {
    /// A complete header (magic included) for a new entry.
    pub fn new(kind: Kind, name: &str, pid: u32, uid: u32, pid_ns: u64, created_ns: u64) -> Self {
        let name = truncate(name, NAME_MAX);
        let mut buf = [0u8; NAME_MAX];
        buf[..name.len()].copy_from_slice(name.as_bytes());
        Header {
            magic: MAGIC,
            version: VERSION,
            kind: kind as u32,
            pid,
            uid,
            pid_ns,
            created_ns,
            stats_offset: STATS_OFFSET as u32,
            stats_count: STATS_COUNT as u32,
            name_len: name.len() as u32,
            reserved: 0,
            name: buf,
        }
    }

    /// Validate a private copy: its kind and name.
    pub fn validate(&self) -> Result<(Kind, &str), Refusal> {
        if self.magic != MAGIC {
            return Err(Refusal::Magic);
        }
        if self.version != VERSION {
            return Err(Refusal::Version);
        }
        let kind = Kind::from_code(self.kind).ok_or(Refusal::Kind)?;
        if self.stats_offset as usize != STATS_OFFSET || self.stats_count as usize != STATS_COUNT {
            return Err(Refusal::Stats);
        }
        let len = usize::try_from(self.name_len).map_err(|_| Refusal::Name)?;
        let bytes = self.name.get(..len).ok_or(Refusal::Name)?;
        let name = std::str::from_utf8(bytes).map_err(|_| Refusal::Name)?;
        Ok((kind, name))
    }

    /// The header as bytes (to write it into the file).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&self.magic.to_le_bytes());
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&self.kind.to_le_bytes());
        out[16..20].copy_from_slice(&self.pid.to_le_bytes());
        out[20..24].copy_from_slice(&self.uid.to_le_bytes());
        out[24..32].copy_from_slice(&self.pid_ns.to_le_bytes());
        out[32..40].copy_from_slice(&self.created_ns.to_le_bytes());
        out[40..44].copy_from_slice(&self.stats_offset.to_le_bytes());
        out[44..48].copy_from_slice(&self.stats_count.to_le_bytes());
        out[48..52].copy_from_slice(&self.name_len.to_le_bytes());
        out[52..56].copy_from_slice(&self.reserved.to_le_bytes());
        out[56..].copy_from_slice(&self.name);
        out
    }

    /// Parse bytes copied out of a file (any content is accepted here;
    /// [`Header::validate`] judges it).
    pub fn from_bytes(b: &[u8; HEADER_LEN]) -> Self {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let mut name = [0u8; NAME_MAX];
        name.copy_from_slice(&b[56..]);
        Header {
            magic: u64_at(0),
            version: u32_at(8),
            kind: u32_at(12),
            pid: u32_at(16),
            uid: u32_at(20),
            pid_ns: u64_at(24),
            created_ns: u64_at(32),
            stats_offset: u32_at(40),
            stats_count: u32_at(44),
            name_len: u32_at(48),
            reserved: u32_at(52),
            name,
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a
/// character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_refuses_garbage() {
        let h = Header::new(Kind::Channel, "/tmp/a.sock", 7, 1000, 42, 5);
        let back = Header::from_bytes(&h.to_bytes());
        assert_eq!(back.validate(), Ok((Kind::Channel, "/tmp/a.sock")));
        let mut b = h.to_bytes();
        b[48] = 201;
        assert_eq!(Header::from_bytes(&b).validate(), Err(Refusal::Name));
        let mut b = h.to_bytes();
        b[56] = 0xff;
        assert_eq!(Header::from_bytes(&b).validate(), Err(Refusal::Name));
        let mut b = h.to_bytes();
        b[12] = 99;
        assert_eq!(Header::from_bytes(&b).validate(), Err(Refusal::Kind));
        let mut b = h.to_bytes();
        b[8] = 2;
        assert_eq!(Header::from_bytes(&b).validate(), Err(Refusal::Version));
        assert_eq!(
            Header::from_bytes(&[0u8; HEADER_LEN]).validate(),
            Err(Refusal::Magic)
        );
        let long = "é".repeat(150);
        let h = Header::new(Kind::Lane, &long, 1, 1, 1, 1);
        let (_, n) = h.validate().unwrap();
        assert!(n.len() <= NAME_MAX && long.starts_with(n));
    }
}
