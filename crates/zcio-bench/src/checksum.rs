//! The RFC 1071 Internet checksum the benchmarks' receivers compute (the
//! async benchmark's part (d), the touch of received data): a fast word
//! sum, the byte-wise reference it is tested against, and folding.

/// The 16-bit one's complement sum of `data` as RFC 1071 defines it
/// (big-endian 16-bit words, an odd last byte padded with a zero byte),
/// folded, not complemented.
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    // Sum native-endian 32-bit words into a 64-bit accumulator (no
    // overflow below 2^32 words), then fold; RFC 1071 §2(B): the sum of
    // byte-swapped words is the byte-swapped sum, so one swap at the end
    // gives the big-endian result on a little-endian machine.
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_ne_bytes([p[0], p[1]]));
    }
    if let [b] = pairs.remainder() {
        acc += u64::from(u16::from_ne_bytes([*b, 0]));
    }
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    let s = acc as u16;
    if cfg!(target_endian = "little") {
        s.swap_bytes()
    } else {
        s
    }
}

/// [`ones_complement_sum`] of bytes read in place through a [`zcio::View`]:
/// a plain slice when the bytes are immutable, otherwise one volatile
/// 64-bit load per word (bytes a peer may write are never borrowed).
pub fn ones_complement_sum_view(data: zcio::View<'_>) -> u16 {
    if let Some(s) = data.as_slice() {
        return ones_complement_sum(s);
    }
    // Fold the words into a 128-bit sum in a tight loop of volatile loads.
    let acc = data.fold_words_le(0u128, |a, w| a + u128::from(w));
    fold_sum(acc)
}

/// End-around-carry fold of a wide one's complement sum into 16 bits,
/// byte-swapped to RFC 1071's big-endian order (see
/// [`ones_complement_sum_words`]).
fn fold_sum(mut acc: u128) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    (acc as u16).swap_bytes()
}

/// [`ones_complement_sum`] over little-endian 64-bit words (a tail padded
/// with zeros, which is RFC 1071's padding of an odd last byte): the
/// end-around-carry fold of 64-bit words equals that of 16-bit words.
pub fn ones_complement_sum_words(words: impl Iterator<Item = u64>) -> u16 {
    fold_sum(words.map(u128::from).sum())
}

/// The Internet checksum of `data` (RFC 1071): the complement of
/// [`ones_complement_sum`].
pub fn internet_checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// The straightforward RFC 1071 loop (reference for the tests).
pub fn checksum_reference(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut i = 0;
    while i + 1 < data.len() {
        sum += u32::from(u16::from_be_bytes([data[i], data[i + 1]]));
        i += 2;
    }
    if i < data.len() {
        sum += u32::from(data[i]) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Fold of per-message checksums that the producer-side and in-process
/// runs of part (d) compare (order-sensitive).
pub fn fold_checksum(acc: u64, c: u16) -> u64 {
    acc.rotate_left(5) ^ u64::from(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_complement_sum(&d), 0xddf2);
        assert_eq!(internet_checksum(&d), !0xddf2);
        assert_eq!(checksum_reference(&d), !0xddf2);
    }

    #[test]
    fn checksum_of_data_with_its_checksum_verifies() {
        // An IPv4 header (RFC 791 example from the wild) with the checksum
        // field zeroed: the computed checksum is 0xb861; inserting it makes
        // the sum 0xffff (so the checksum of the whole is 0).
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(internet_checksum(&h), 0);
    }

    #[test]
    fn word_sum_matches_byte_sum() {
        let data: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect();
        for start in 0..9 {
            for len in (0..70).chain([1023, 1024, 1025, 2047, 2990]) {
                let d = &data[start..start + len];
                let v = zcio::View::from_slice(d);
                assert_eq!(
                    ones_complement_sum_words(v.words_le()),
                    ones_complement_sum(d),
                    "{start}+{len}"
                );
            }
        }
    }

    #[test]
    fn fast_sum_matches_reference_at_every_length_and_alignment() {
        let data: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..4 {
            for len in (0..300).chain([1023, 1024, 1025, 2047, 2996]) {
                let d = &data[start..start + len];
                assert_eq!(internet_checksum(d), checksum_reference(d), "{start}+{len}");
            }
        }
        assert_eq!(internet_checksum(&[0xff; 64]), 0);
    }
}
