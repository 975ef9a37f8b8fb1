//! The array header of the frontends' `send_array`/`recv_array` (Python's
//! numpy arrays; the Zenoh bridge carries it across hosts): the element
//! type string, shape and strides in front of the payload, never a pickle.
//!
//! Layout (little-endian; the header is padded to a multiple of 64 bytes
//! so the payload behind it stays 64-byte aligned in a page-aligned
//! buffer):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `ZCNDARR1` |
//! | 8 | 2 | version (1) |
//! | 10 | 2 | flags (bit 0: sent without a copy from a sender array whose memory the sender still maps writable) |
//! | 12 | 2 | ndim (≤ 64) |
//! | 14 | 2 | dtype string length (1..=32) |
//! | 16 | 4 | header length (bytes, multiple of 64, ≤ 4096) |
//! | 20 | 4 | reserved (0) |
//! | 24 | 8 | payload offset in the message |
//! | 32 | 8 | payload length |
//! | 40 | 8 | offset of element 0 within the payload |
//! | 48 | 16 | reserved (0) |
//! | 64 | dtype length, padded to 8 | `numpy.dtype.str` (ASCII) |
//! | … | 8 × ndim | shape (u64) |
//! | … | 8 × ndim | strides (i64, bytes) |
//!
//! The payload is either behind the header in the same slice (the copying
//! path: one contiguous slice) or a slice of its own (the zero-copy path).
//! The receiver copies the header out of the message and validates the
//! copy: every field, the dtype (parsed by numpy, no object or structured
//! types), and that every element lies inside the payload.

/// First bytes of every array header.
const MAGIC: [u8; 8] = *b"ZCNDARR1";
/// The header layout version.
const VERSION: u16 = 1;
/// Fixed part of the header.
const FIXED: usize = 64;
/// Largest header accepted.
const MAX_HEADER: usize = 4096;
/// Most dimensions (numpy 2's limit).
const MAX_NDIM: usize = 64;
/// Longest dtype string.
const MAX_DTYPE: usize = 32;
/// Flag: the payload is the sender's live array memory (zero-copy send
/// from a non-secured pool): the sender still maps it writable.
const FLAG_SENDER_MAPS_WRITABLE: u16 = 1;

/// Why bytes are not a valid array header (what is wrong, in words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed array header: {0}")]
pub struct BadArrayHeader(pub String);

/// A decoded (or to-be-encoded) header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayHeader {
    /// Flags ([`ArrayHeader::FLAG_SENDER_MAPS_WRITABLE`]).
    pub flags: u16,
    /// numpy's `dtype.str` (ASCII, e.g. `<f4`).
    pub dtype: String,
    /// Elements per dimension.
    pub shape: Vec<u64>,
    /// Bytes between elements per dimension.
    pub strides: Vec<i64>,
    /// Where the payload starts in the message.
    pub payload_off: u64,
    /// Payload bytes.
    pub payload_len: u64,
    /// Offset of element 0 within the payload.
    pub data_off: u64,
}

/// Bytes of a header for `ndim` dimensions and a dtype string of `dlen`.
fn header_len(ndim: usize, dlen: usize) -> usize {
    (FIXED + dlen.next_multiple_of(8) + 16 * ndim).next_multiple_of(64)
}

impl ArrayHeader {
    /// First bytes of every array header.
    pub const MAGIC: [u8; 8] = MAGIC;
    /// The header layout version.
    pub const VERSION: u16 = VERSION;
    /// Fixed part of the header.
    pub const FIXED: usize = FIXED;
    /// Largest header accepted.
    pub const MAX_HEADER: usize = MAX_HEADER;
    /// Most dimensions (numpy 2's limit).
    pub const MAX_NDIM: usize = MAX_NDIM;
    /// Longest dtype string.
    pub const MAX_DTYPE: usize = MAX_DTYPE;
    /// Flag: the payload is the sender's live array memory (zero-copy send
    /// from a non-secured pool): the sender still maps it writable.
    pub const FLAG_SENDER_MAPS_WRITABLE: u16 = FLAG_SENDER_MAPS_WRITABLE;

    /// Bytes of a header for `ndim` dimensions and a dtype string of `dlen`
    /// bytes (a multiple of 64).
    pub fn len_for(ndim: usize, dlen: usize) -> usize {
        header_len(ndim, dlen)
    }

    /// Bytes of this header (a multiple of 64).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        header_len(self.shape.len(), self.dtype.len())
    }

    /// Write the header into `out` (exactly `self.len()` bytes).
    pub fn encode_into(&self, out: &mut [u8]) {
        out.fill(0);
        let hl = self.len();
        out[0..8].copy_from_slice(&MAGIC);
        out[8..10].copy_from_slice(&VERSION.to_le_bytes());
        out[10..12].copy_from_slice(&self.flags.to_le_bytes());
        out[12..14].copy_from_slice(&(self.shape.len() as u16).to_le_bytes());
        out[14..16].copy_from_slice(&(self.dtype.len() as u16).to_le_bytes());
        out[16..20].copy_from_slice(&(hl as u32).to_le_bytes());
        out[24..32].copy_from_slice(&self.payload_off.to_le_bytes());
        out[32..40].copy_from_slice(&self.payload_len.to_le_bytes());
        out[40..48].copy_from_slice(&self.data_off.to_le_bytes());
        let d = self.dtype.as_bytes();
        out[FIXED..FIXED + d.len()].copy_from_slice(d);
        let mut at = FIXED + d.len().next_multiple_of(8);
        for s in &self.shape {
            out[at..at + 8].copy_from_slice(&s.to_le_bytes());
            at += 8;
        }
        for s in &self.strides {
            out[at..at + 8].copy_from_slice(&s.to_le_bytes());
            at += 8;
        }
    }

    /// The header length announced by a fixed part (checked for range).
    pub fn announced_len(fixed: &[u8; FIXED]) -> Result<usize, BadArrayHeader> {
        Self::announced_len_text(fixed).map_err(BadArrayHeader)
    }

    fn announced_len_text(fixed: &[u8; FIXED]) -> Result<usize, String> {
        if fixed[0..8] != MAGIC {
            return Err("not an array message (bad magic)".into());
        }
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if version != VERSION {
            return Err(format!(
                "array header version {version} (this build reads {VERSION})"
            ));
        }
        let hl = u32::from_le_bytes([fixed[16], fixed[17], fixed[18], fixed[19]]) as usize;
        if !(FIXED..=MAX_HEADER).contains(&hl) || !hl.is_multiple_of(64) {
            return Err(format!("array header length {hl} out of range"));
        }
        Ok(hl)
    }

    /// Decode a private copy of a whole header and check it against the
    /// message length. Every field is validated here — the fixed part as
    /// [`ArrayHeader::announced_len`] checks it and its length the bytes',
    /// known flags only, reserved words and padding zero, so an accepted
    /// header re-encodes to the very bytes it came from — except the
    /// dtype's meaning and itemsize (numpy's job, then
    /// [`ArrayHeader::check_extent`]).
    pub fn decode(h: &[u8], msg_len: usize) -> Result<Self, BadArrayHeader> {
        Self::decode_text(h, msg_len).map_err(BadArrayHeader)
    }

    fn decode_text(h: &[u8], msg_len: usize) -> Result<Self, String> {
        let u16_at = |o: usize| u16::from_le_bytes([h[o], h[o + 1]]);
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let Some(fixed) = h.first_chunk::<FIXED>() else {
            return Err("array header truncated".into());
        };
        let hl = Self::announced_len_text(fixed)?;
        if hl != h.len() {
            return Err(format!(
                "array header announces {hl} bytes, has {}",
                h.len()
            ));
        }
        let flags = u16_at(10);
        if flags & !FLAG_SENDER_MAPS_WRITABLE != 0 {
            return Err(format!("unknown array header flags {flags:#x}"));
        }
        if fixed[20..24]
            .iter()
            .chain(&fixed[48..FIXED])
            .any(|&b| b != 0)
        {
            return Err("array header reserved bytes are not zero".into());
        }
        let ndim = u16_at(12) as usize;
        let dlen = u16_at(14) as usize;
        if ndim > MAX_NDIM {
            return Err(format!("{ndim} dimensions (at most {MAX_NDIM})"));
        }
        if dlen == 0 || dlen > MAX_DTYPE {
            return Err(format!("dtype string of {dlen} bytes (1..={MAX_DTYPE})"));
        }
        if header_len(ndim, dlen) != h.len() {
            return Err("array header length does not match its contents".into());
        }
        let dbytes = &h[FIXED..FIXED + dlen];
        let plain = |c: &u8| c.is_ascii_alphanumeric() || b"<>|=[]".contains(c);
        if !dbytes.iter().all(plain) {
            return Err("dtype string has characters outside [A-Za-z0-9<>|=[]]".into());
        }
        let dtype = String::from_utf8(dbytes.to_vec()).map_err(|_| "dtype not ASCII")?;
        let mut at = FIXED + dlen.next_multiple_of(8);
        let tail = at + 16 * ndim;
        if h[FIXED + dlen..at]
            .iter()
            .chain(&h[tail..])
            .any(|&b| b != 0)
        {
            return Err("array header padding is not zero".into());
        }
        let mut shape = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            shape.push(u64_at(at));
            at += 8;
        }
        let mut strides = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            strides.push(u64_at(at) as i64);
            at += 8;
        }
        let hdr = ArrayHeader {
            flags,
            dtype,
            shape,
            strides,
            payload_off: u64_at(24),
            payload_len: u64_at(32),
            data_off: u64_at(40),
        };
        let end = hdr
            .payload_off
            .checked_add(hdr.payload_len)
            .ok_or("payload range overflows")?;
        if hdr.payload_off < h.len() as u64 || end > msg_len as u64 {
            return Err(format!(
                "payload {}+{} outside the message of {msg_len} bytes",
                hdr.payload_off, hdr.payload_len
            ));
        }
        if hdr.shape.iter().any(|&d| d > i64::MAX as u64) {
            return Err("dimension too large".into());
        }
        Ok(hdr)
    }

    /// Check that every element (`itemsize` bytes each) lies inside the
    /// payload and that the elements fit it (shape × itemsize ≤ payload).
    pub fn check_extent(&self, itemsize: usize) -> Result<(), BadArrayHeader> {
        self.check_extent_text(itemsize).map_err(BadArrayHeader)
    }

    fn check_extent_text(&self, itemsize: usize) -> Result<(), String> {
        let plen = i128::from(self.payload_len);
        let off = i128::from(self.data_off);
        if off > plen {
            return Err("element offset beyond the payload".into());
        }
        if self.shape.contains(&0) {
            return Ok(());
        }
        let mut count: i128 = 1;
        let (mut lo, mut hi) = (0i128, 0i128);
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            let d = i128::from(d);
            count = count.saturating_mul(d);
            let span = (d - 1) * i128::from(s);
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
            if count > plen.saturating_add(1) || lo < -plen || hi > plen {
                return Err("array larger than its payload".into());
            }
        }
        let item = itemsize as i128;
        if count.saturating_mul(item) > plen {
            return Err(format!(
                "{count} elements of {itemsize} bytes do not fit a payload of {plen} bytes"
            ));
        }
        if off + lo < 0 || off + hi + item > plen {
            return Err("strides reach outside the payload".into());
        }
        Ok(())
    }
}

impl ArrayHeader {
    /// The header at the front of `msg`, if it starts with [`ArrayHeader::MAGIC`]:
    /// copied out once and validated against the message length (not the
    /// element type's meaning: see [`ArrayHeader::check_extent`]).
    /// `Ok(None)`: not an array message.
    pub fn read_from(msg: &crate::Msg) -> Result<Option<Self>, BadArrayHeader> {
        let mut fixed = [0u8; FIXED];
        if msg.read_at(0, &mut fixed) < FIXED || fixed[0..8] != MAGIC {
            return Ok(None);
        }
        let hl = Self::announced_len(&fixed)?;
        if hl > msg.len() {
            return Err(BadArrayHeader(
                "array header longer than the message".into(),
            ));
        }
        let mut h = vec![0u8; hl];
        msg.read_at(0, &mut h);
        Self::decode(&h, msg.len()).map(Some)
    }

    /// The header as bytes (`self.len()` of them).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len()];
        self.encode_into(&mut v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ArrayHeader {
        let h = ArrayHeader {
            flags: 0,
            dtype: "<f4".into(),
            shape: vec![3, 4],
            strides: vec![16, 4],
            payload_off: 0,
            payload_len: 48,
            data_off: 0,
        };
        ArrayHeader {
            payload_off: h.len() as u64,
            ..h
        }
    }

    #[test]
    fn round_trip_and_extent() {
        let h = sample();
        let b = h.to_bytes();
        assert_eq!(b.len() % 64, 0);
        let mut fixed = [0u8; FIXED];
        fixed.copy_from_slice(&b[..FIXED]);
        assert_eq!(ArrayHeader::announced_len(&fixed), Ok(b.len()));
        let d = ArrayHeader::decode(&b, b.len() + 48).unwrap();
        assert_eq!(d, h);
        d.check_extent(4).unwrap();
        assert!(
            d.check_extent(8).is_err(),
            "12 elements of 8 bytes exceed 48"
        );
    }

    #[test]
    fn rejects_bad_fields() {
        let h = sample();
        let b = h.to_bytes();
        assert!(
            ArrayHeader::decode(&b, b.len() + 47).is_err(),
            "payload past the message"
        );
        let mut bad = b.clone();
        bad[12] = 65; // 65 dimensions
        assert!(ArrayHeader::decode(&bad, usize::MAX).is_err());
        let mut bad = b.clone();
        bad[FIXED] = b'!';
        assert!(ArrayHeader::decode(&bad, usize::MAX).is_err());
        let mut fixed = [0u8; FIXED];
        fixed.copy_from_slice(&b[..FIXED]);
        fixed[16] = 65; // not a multiple of 64
        assert!(ArrayHeader::announced_len(&fixed).is_err());
        fixed[0] = b'X';
        assert!(ArrayHeader::announced_len(&fixed).is_err());
    }

    #[test]
    fn decode_checks_the_fixed_part_reserved_bytes_and_padding() {
        let h = sample();
        let b = h.to_bytes();
        let total = b.len() + 48;
        assert_eq!(ArrayHeader::decode(&b, total), Ok(h));
        // (byte, value): magic, version, an unknown flag, the announced
        // length, a reserved byte of each word, the dtype's padding, the
        // header's tail.
        let dtype_pad = FIXED + 3;
        let tail = b.len() - 1;
        for (i, v) in [
            (0, b'X'),
            (8, 2),
            (10, 2),
            (16, 0),
            (20, 1),
            (48, 1),
            (63, 1),
            (dtype_pad, b'4'),
            (tail, 1),
        ] {
            let mut bad = b.clone();
            bad[i] = v;
            assert!(ArrayHeader::decode(&bad, total).is_err(), "byte {i} = {v}");
        }
        let mut flagged = b.clone();
        flagged[10] = FLAG_SENDER_MAPS_WRITABLE as u8;
        let d = ArrayHeader::decode(&flagged, total).unwrap();
        assert_eq!(d.to_bytes(), flagged, "re-encodes as sent");
    }
}
