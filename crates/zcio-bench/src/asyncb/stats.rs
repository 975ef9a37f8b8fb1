//! Pure helpers of `zcio-bench async`: clocks (CLOCK_MONOTONIC and the
//! time-stamp counter), mean and standard deviation, and the RFC 1071
//! Internet checksum the receiver computes in part (d).

/// `CLOCK_MONOTONIC` in nanoseconds (system-wide: comparable between
/// processes, so a receiver can subtract a sender's stamp).
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// The time-stamp counter (cycles) where the CPU has one readable from
/// user space; elsewhere `CLOCK_MONOTONIC` nanoseconds.
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // RDTSC has no preconditions; it only reads the counter.
        // SAFETY: as argued just above.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        mono_ns()
    }
}

/// What [`cycles`] counts, for the notes.
pub fn cycles_source() -> &'static str {
    if cfg!(target_arch = "x86_64") {
        "rdtsc (the invariant time-stamp counter)"
    } else {
        "CLOCK_MONOTONIC ns (no user-space cycle counter on this architecture)"
    }
}

/// Running mean and variance (Welford): no sample vector, no loss of
/// precision with many samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Welford {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Welford {
    /// Add one sample.
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Samples so far.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Their mean (0 without samples).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Their sample standard deviation (0 with fewer than two).
    pub fn stddev(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

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

    #[test]
    fn welford_mean_and_stddev() {
        let mut w = Welford::default();
        assert_eq!((w.mean(), w.stddev()), (0.0, 0.0));
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            w.add(x);
        }
        assert_eq!(w.count(), 8);
        assert!((w.mean() - 5.0).abs() < 1e-12);
        // Sample standard deviation: sqrt(32 / 7).
        assert!((w.stddev() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn clocks_advance() {
        let (a, c) = (mono_ns(), cycles());
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(mono_ns() > a);
        assert!(cycles() > c);
    }
}
