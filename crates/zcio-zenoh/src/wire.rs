//! zcio's metadata on a Zenoh sample: the attachment.
//!
//! The sample's payload is always the message's (or ring block's) bytes and
//! nothing else, so a Zenoh application that knows nothing of zcio reads
//! them as they are. What zcio needs besides travels in the attachment, a
//! fixed 48-byte record, little-endian, optionally followed by an array
//! header (`zcio::array`):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `zcio` |
//! | 4 | 1 | version (1) |
//! | 5 | 1 | kind: 1 data, 2 end of stream, 3 error close, 4 producer died, 5 cache range (replies to a cache query only) |
//! | 6 | 2 | flags: bit 0 positions count bytes (not blocks), bit 1 an array header follows |
//! | 8 | 8 | stream: who numbers the positions (a ring's identity, or a random number per exporting process) |
//! | 16 | 8 | position of this sample in the stream (end/error/died: the position after the last sample) |
//! | 24 | 8 | position after this sample (data: greater than its position, every block spans at least one; others: at least it) |
//! | 32 | 4 | ring block tag (0 for channel messages) |
//! | 36 | 4 | error close: the producer's code; producer died: its pid |
//! | 40 | 4 | array header length (0 or 64..=4096) |
//! | 44 | 4 | reserved (0) |
//! | 48 | … | the array header, its payload offset 0 and length the payload's |
//!
//! End of stream, error close and death are `DELETE` samples on the same
//! key (a plain subscriber sees the key deleted), so they stay in order
//! with the data of the same publisher.
//!
//! Everything here is parsed from a private copy and checked; a record
//! that starts with the magic but fails a check is malformed (counted and
//! dropped); an attachment without the magic is someone else's (a plain
//! Zenoh application's) and ignored.

use zcio::array::{ArrayHeader, BadArrayHeader};

/// First bytes of zcio's attachment.
pub const MAGIC: [u8; 4] = *b"zcio";
/// Its layout version.
pub const VERSION: u8 = 1;
/// The fixed part.
pub const FIXED: usize = 48;
/// Flag: positions count bytes (continuous and variable rings).
pub const FLAG_BYTE_POSITIONS: u16 = 1;
/// Flag: an array header follows the fixed part.
pub const FLAG_ARRAY: u16 = 2;

/// What a sample says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A message or ring block: the payload.
    Data,
    /// End of stream: the producer closed.
    End,
    /// The producer closed with an error code.
    Failed {
        /// `close_with_error`'s code.
        code: u32,
    },
    /// The producer died without closing.
    Died {
        /// Its pid.
        pid: u32,
    },
    /// The last reply to a cache query: the cache held positions
    /// `pos..next` (`pos == next`: empty).
    CacheRange,
}

/// The decoded attachment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// What it says.
    pub kind: Kind,
    /// Stream identity.
    pub stream: u64,
    /// Position of this sample.
    pub pos: u64,
    /// Position after it.
    pub next: u64,
    /// Positions count bytes.
    pub byte_positions: bool,
    /// Ring block tag.
    pub tag: u32,
    /// The array header of a `send_array` message (payload offset 0).
    pub array: Option<ArrayHeader>,
}

/// Why an attachment that claims to be zcio's is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadMeta {
    /// Shorter than the fixed part, or not as long as it says.
    #[error("attachment of {0} bytes has the wrong length")]
    Length(usize),
    /// A version this build cannot read.
    #[error("attachment version {0} (this build reads {VERSION})")]
    Version(u8),
    /// Unknown kind or flags, or non-zero reserved bytes.
    #[error("attachment field out of range: {0}")]
    Field(&'static str),
    /// The array header is malformed.
    #[error(transparent)]
    Array(#[from] BadArrayHeader),
}

impl Meta {
    /// A data sample's metadata.
    pub fn data(stream: u64, pos: u64, next: u64, byte_positions: bool) -> Self {
        Self {
            kind: Kind::Data,
            stream,
            pos,
            next,
            byte_positions,
            tag: 0,
            array: None,
        }
    }

    /// Encode (the array header, if any, is written with payload offset 0).
    pub fn encode(&self) -> Vec<u8> {
        let hdr = self.array.as_ref().map(|h| {
            ArrayHeader {
                payload_off: 0,
                ..h.clone()
            }
            .to_bytes()
        });
        let hl = hdr.as_ref().map_or(0, Vec::len);
        let mut v = vec![0u8; FIXED + hl];
        let (kind, code) = match self.kind {
            Kind::Data => (1u8, 0u32),
            Kind::End => (2, 0),
            Kind::Failed { code } => (3, code),
            Kind::Died { pid } => (4, pid),
            Kind::CacheRange => (5, 0),
        };
        let mut flags = 0u16;
        if self.byte_positions {
            flags |= FLAG_BYTE_POSITIONS;
        }
        if hdr.is_some() {
            flags |= FLAG_ARRAY;
        }
        v[0..4].copy_from_slice(&MAGIC);
        v[4] = VERSION;
        v[5] = kind;
        v[6..8].copy_from_slice(&flags.to_le_bytes());
        v[8..16].copy_from_slice(&self.stream.to_le_bytes());
        v[16..24].copy_from_slice(&self.pos.to_le_bytes());
        v[24..32].copy_from_slice(&self.next.to_le_bytes());
        v[32..36].copy_from_slice(&self.tag.to_le_bytes());
        v[36..40].copy_from_slice(&code.to_le_bytes());
        v[40..44].copy_from_slice(&(hl as u32).to_le_bytes());
        if let Some(h) = hdr {
            v[FIXED..].copy_from_slice(&h);
        }
        v
    }

    /// Whether `att` (a private copy) claims to be zcio's.
    pub fn is_ours(att: &[u8]) -> bool {
        att.len() >= 4 && att[0..4] == MAGIC
    }

    /// Decode a private copy of an attachment that [`Self::is_ours`];
    /// `payload_len` is the sample payload's length (an array header must
    /// describe exactly that payload).
    pub fn decode(att: &[u8], payload_len: usize) -> Result<Self, BadMeta> {
        if att.len() < FIXED || att.len() > FIXED + ArrayHeader::MAX_HEADER {
            return Err(BadMeta::Length(att.len()));
        }
        let u32_at = |o: usize| u32::from_le_bytes([att[o], att[o + 1], att[o + 2], att[o + 3]]);
        let u64_at = |o: usize| u64::from(u32_at(o)) | u64::from(u32_at(o + 4)) << 32;
        if att[0..4] != MAGIC {
            return Err(BadMeta::Field("magic"));
        }
        if att[4] != VERSION {
            return Err(BadMeta::Version(att[4]));
        }
        let flags = u16::from_le_bytes([att[6], att[7]]);
        if flags & !(FLAG_BYTE_POSITIONS | FLAG_ARRAY) != 0 {
            return Err(BadMeta::Field("flags"));
        }
        if u32_at(44) != 0 {
            return Err(BadMeta::Field("reserved"));
        }
        let code = u32_at(36);
        let kind = match att[5] {
            1 => Kind::Data,
            2 => Kind::End,
            3 => Kind::Failed { code },
            4 => Kind::Died { pid: code },
            5 => Kind::CacheRange,
            _ => return Err(BadMeta::Field("kind")),
        };
        let (pos, next) = (u64_at(16), u64_at(24));
        if next < pos {
            return Err(BadMeta::Field("position after before position"));
        }
        if kind == Kind::Data && next == pos {
            // Every block spans at least one position (a block, or a
            // header's bytes): an empty span would let the next sample
            // claim the same position and be delivered twice.
            return Err(BadMeta::Field("data sample spans no position"));
        }
        let hl = u32_at(40) as usize;
        if FIXED + hl != att.len() || (hl != 0) != (flags & FLAG_ARRAY != 0) {
            return Err(BadMeta::Length(att.len()));
        }
        let array = if hl == 0 {
            None
        } else {
            if kind != Kind::Data {
                return Err(BadMeta::Field("array header on a control sample"));
            }
            if hl < ArrayHeader::FIXED {
                // Shorter than the header's fixed part (whose payload
                // offset is rewritten below): not a header.
                return Err(BadMeta::Length(att.len()));
            }
            // The header as it will sit in the local message: in front of
            // the payload.
            let mut h = att[FIXED..].to_vec();
            h[24..32].copy_from_slice(&(hl as u64).to_le_bytes());
            let total = hl
                .checked_add(payload_len)
                .ok_or(BadMeta::Field("payload length"))?;
            let hdr = ArrayHeader::decode(&h, total)?;
            if hdr.payload_len != payload_len as u64 {
                return Err(BadMeta::Field("array payload length"));
            }
            Some(hdr)
        };
        Ok(Self {
            kind,
            stream: u64_at(8),
            pos,
            next,
            byte_positions: flags & FLAG_BYTE_POSITIONS != 0,
            tag: u32_at(32),
            array,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(len: u64) -> ArrayHeader {
        ArrayHeader {
            flags: 0,
            dtype: "<u2".into(),
            shape: vec![len / 2],
            strides: vec![2],
            payload_off: 0,
            payload_len: len,
            data_off: 0,
        }
    }

    #[test]
    fn round_trips() {
        let mut m = Meta::data(7, 10, 11, false);
        m.tag = 99;
        assert_eq!(Meta::decode(&m.encode(), 0).unwrap(), m);
        for kind in [
            Kind::End,
            Kind::Failed { code: 5 },
            Kind::Died { pid: 42 },
            Kind::CacheRange,
        ] {
            let m = Meta {
                kind,
                ..Meta::data(1, 5, 5, true)
            };
            assert_eq!(Meta::decode(&m.encode(), 0).unwrap(), m);
        }
        let m = Meta {
            array: Some(array(64)),
            ..Meta::data(1, 0, 1, false)
        };
        let got = Meta::decode(&m.encode(), 64).unwrap();
        let h = got.array.expect("array header");
        assert_eq!(
            h.payload_off,
            h.len() as u64,
            "rebased in front of the payload"
        );
        assert_eq!(
            (h.dtype.as_str(), h.shape.as_slice()),
            ("<u2", &[32u64][..])
        );
    }

    #[test]
    fn rejects_malformed() {
        let good = Meta::data(1, 2, 3, false).encode();
        for cut in [0, 4, 47] {
            assert!(Meta::decode(&good[..cut], 0).is_err());
        }
        let mut v = good.clone();
        v[4] = 2;
        assert_eq!(Meta::decode(&v, 0), Err(BadMeta::Version(2)));
        let mut v = good.clone();
        v[5] = 9;
        assert!(Meta::decode(&v, 0).is_err());
        let mut v = good.clone();
        v[6] = 0x80;
        assert!(Meta::decode(&v, 0).is_err());
        let mut v = good.clone();
        v[16] = 9; // position 9 > next 3
        assert!(Meta::decode(&v, 0).is_err());
        let mut v = good.clone();
        v[24] = 2; // a data sample from 2 to 2
        assert_eq!(
            Meta::decode(&v, 0),
            Err(BadMeta::Field("data sample spans no position"))
        );
        // A header length below the header's fixed part, the attachment
        // as long as it says.
        for hl in [1usize, 10, 23, 31, 32, 63] {
            let mut v = good.clone();
            v.resize(FIXED + hl, 0);
            v[6] = FLAG_ARRAY as u8;
            v[40..44].copy_from_slice(&(hl as u32).to_le_bytes());
            assert_eq!(
                Meta::decode(&v, 0),
                Err(BadMeta::Length(FIXED + hl)),
                "{hl}"
            );
        }
        let mut v = good.clone();
        v[40] = 64; // claims a header it does not carry
        assert!(Meta::decode(&v, 0).is_err());
        // An array header whose payload is not the sample's.
        let m = Meta {
            array: Some(array(64)),
            ..Meta::data(1, 0, 1, false)
        };
        assert!(Meta::decode(&m.encode(), 63).is_err());
        assert!(Meta::decode(&m.encode(), 65).is_err());
        // Arbitrary bytes never panic.
        let mut x = 0x1234_5678_u64;
        for n in 0..2000 {
            let mut v = good.clone();
            v.resize(48 + (n % 130), 0);
            for b in v.iter_mut().skip(4) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            let _ = Meta::decode(&v, n);
        }
    }
}
