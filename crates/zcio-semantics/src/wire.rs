//! The semantics layer's record at the start of every message: which
//! semantics the sender used, how the data travels, and what the sender
//! promises about it. Decoded from bytes a peer wrote: every field is
//! checked, nothing is trusted.

use super::Semantics;

/// "ZSEM", little-endian.
pub const MAGIC: u32 = u32::from_le_bytes(*b"ZSEM");
/// Layout version of [`Header`].
pub const VERSION: u16 = 1;

/// The data follows the header in the same slice (copied by the sender).
pub const INLINE: u8 = 1;
/// The sender write-protected (TCOW) or hid the lent pages until they
/// come back: it promises not to change them in flight.
pub const PROTECTED: u8 = 2;
/// The data is in a region the sender sealed (`F_SEAL_WRITE`).
pub const SEALED: u8 = 4;
/// Not data: the sender's hello (its input semantics, whether it trusts).
pub const HELLO: u8 = 8;
/// In a hello: this end swaps in protected pages (it trusts the peer).
pub const TRUSTS: u8 = 16;

/// The first 32 bytes of every message.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u32,
    /// [`VERSION`].
    pub version: u16,
    /// The sender's semantics (index into [`Semantics::ALL`]).
    pub semantics: u8,
    /// [`INLINE`] | [`PROTECTED`] | [`SEALED`] | [`HELLO`] | [`TRUSTS`].
    pub flags: u8,
    /// Data length in bytes.
    pub len: u64,
    /// Offset of the data's first byte within its page at the sender
    /// (input alignment: a receiver buffer at the same offset can take
    /// whole pages).
    pub page_offset: u32,
    /// Slices after the header's own (0 when [`INLINE`]).
    pub data_slices: u32,
    /// Zero when sent; not read.
    pub reserved: u64,
}

/// Bytes of [`Header`] on the wire.
pub const HEADER_LEN: usize = 32;

const _: () = {
    assert!(std::mem::size_of::<Header>() == HEADER_LEN);
    assert!(std::mem::align_of::<Header>() == 8);
    assert!(std::mem::offset_of!(Header, len) == 8);
    assert!(std::mem::offset_of!(Header, page_offset) == 16);
    assert!(std::mem::offset_of!(Header, data_slices) == 20);
};

/// Why a header was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Fewer than [`HEADER_LEN`] bytes.
    Short,
    /// Not [`MAGIC`].
    Magic,
    /// Not [`VERSION`].
    Version,
    /// No such semantics.
    Semantics,
    /// Unknown flag bits.
    Flags,
    /// A page offset past the page, slices with inline data, too many
    /// slices.
    Layout,
}

impl Header {
    /// A header for `len` bytes sent under `sem`.
    pub fn new(
        sem: Semantics,
        flags: u8,
        len: usize,
        page_offset: usize,
        data_slices: usize,
    ) -> Self {
        Self {
            magic: MAGIC,
            version: VERSION,
            semantics: Semantics::ALL.iter().position(|&s| s == sem).unwrap_or(0) as u8,
            flags,
            len: len as u64,
            page_offset: page_offset as u32,
            data_slices: data_slices as u32,
            reserved: 0,
        }
    }

    /// The header's wire bytes.
    pub fn to_bytes(self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&self.magic.to_le_bytes());
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[6] = self.semantics;
        b[7] = self.flags;
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..20].copy_from_slice(&self.page_offset.to_le_bytes());
        b[20..24].copy_from_slice(&self.data_slices.to_le_bytes());
        b
    }

    /// Decode and check a header copied out of a peer's message.
    pub fn parse(b: &[u8], page_size: usize) -> Result<Self, Bad> {
        let b: &[u8; HEADER_LEN] = b
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(Bad::Short)?;
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut len = [0u8; 8];
        len.copy_from_slice(&b[8..16]);
        let h = Header {
            magic: u32_at(0),
            version: u16::from_le_bytes([b[4], b[5]]),
            semantics: b[6],
            flags: b[7],
            len: u64::from_le_bytes(len),
            page_offset: u32_at(16),
            data_slices: u32_at(20),
            reserved: 0,
        };
        if h.magic != MAGIC {
            return Err(Bad::Magic);
        }
        if h.version != VERSION {
            return Err(Bad::Version);
        }
        if h.semantics as usize >= Semantics::ALL.len() {
            return Err(Bad::Semantics);
        }
        if h.flags & !(INLINE | PROTECTED | SEALED | HELLO | TRUSTS) != 0 {
            return Err(Bad::Flags);
        }
        if h.page_offset as usize >= page_size
            || (h.flags & INLINE != 0 && h.data_slices != 0)
            || h.data_slices as usize >= crate::channel::wire::MAX_SLICES
        {
            return Err(Bad::Layout);
        }
        Ok(h)
    }

    /// The sender's semantics (the index is checked by [`Header::parse`]).
    pub fn sem(&self) -> Semantics {
        Semantics::ALL[self.semantics as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let h = Header::new(Semantics::EmulatedCopy, PROTECTED, 12345, 17, 2);
        let b = h.to_bytes();
        assert_eq!(Header::parse(&b, 4096), Ok(h));
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(Header::parse(&bad, 4096), Err(Bad::Magic));
        let mut bad = b;
        bad[6] = 8;
        assert_eq!(Header::parse(&bad, 4096), Err(Bad::Semantics));
        let mut bad = b;
        bad[7] = 0x80;
        assert_eq!(Header::parse(&bad, 4096), Err(Bad::Flags));
        let mut bad = b;
        bad[16..20].copy_from_slice(&4096u32.to_le_bytes());
        assert_eq!(Header::parse(&bad, 4096), Err(Bad::Layout));
        assert_eq!(Header::parse(&b[..10], 4096), Err(Bad::Short));
    }
}
