//! `inet`: the Internet checksum (RFC 1071) of the stream, and the
//! incremental update of RFC 1624 for rewriting header fields.
//!
//! The module sums the stream as one sequence of big-endian 16-bit words:
//! a block that starts at an odd stream offset continues the word its
//! predecessor began (RFC 1071 §2(B): the sum of byte-swapped words is the
//! byte-swapped sum, so such a block is summed as if aligned and swapped).
//! It passes every block on unchanged.
//!
//! Control: `value` (read: the checksum `0x%04x`, i.e. the complement of
//! the folded sum), `sum` (read: the folded sum), `reset` (write).

use super::{Args, Context, Flow, Module, ModuleError};
use crate::msg::Msg;

/// Fold a wide ones'-complement accumulator to 16 bits (end-around carry).
#[inline]
fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The ones'-complement sum of `data` as big-endian 16-bit words (an odd
/// last byte is padded with a zero low byte), added to `acc`, unfolded.
fn sum_be(mut acc: u64, data: &[u8]) -> u64 {
    // 32-bit words into a 64-bit accumulator: a word hi·2^16 + lo is
    // congruent to hi + lo modulo 2^16 - 1, so folding later gives the
    // 16-bit ones'-complement sum. 2^32 words of 2^32 cannot overflow.
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc + u64::from(u32::from_be_bytes(tail))
}

/// Ones'-complement 16-bit addition.
#[inline]
fn add1c(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// A running RFC 1071 sum over a byte stream cut anywhere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sum {
    acc: u64,
    odd: bool,
}

impl Sum {
    /// Add the next bytes of the stream.
    fn add(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let s = fold(sum_be(0, data));
        let s = if self.odd { s.swap_bytes() } else { s };
        self.acc = u64::from(fold(self.acc + u64::from(s)));
        self.odd ^= data.len() % 2 == 1;
    }

    /// The folded sum so far.
    fn sum(&self) -> u16 {
        fold(self.acc)
    }

    /// The checksum so far (complement of the sum).
    fn checksum(&self) -> u16 {
        !self.sum()
    }
}

/// The `inet` module.
#[derive(Debug, Default)]
pub struct Inet {
    sum: Sum,
    flow: Flow,
}

impl Inet {
    /// Open (no arguments).
    pub fn open(args: Args) -> Result<Self, ModuleError> {
        args.finish(&[])?;
        Ok(Self::default())
    }

    /// The checksum of everything seen so far.
    pub fn value(&self) -> u16 {
        self.sum.checksum()
    }

    /// The Internet checksum of `data` (RFC 1071): the complement of the
    /// folded ones'-complement sum.
    pub fn checksum(data: &[u8]) -> u16 {
        !fold(sum_be(0, data))
    }

    /// RFC 1624 eqn. 3: the new checksum `HC' = ~(~HC + ~m + m')` after the
    /// 16-bit field `m` (at an even offset) became `m_new`.
    ///
    /// As RFC 1624 §3 notes, the one case where this differs from a full
    /// recomputation is data whose new sum is zero (all-zero words): eqn. 3
    /// gives `0x0000` where recomputation gives `0xffff`; both are the same
    /// ones'-complement value (and UDP sends a computed `0` as `0xffff`).
    pub fn update16(hc: u16, m: u16, m_new: u16) -> u16 {
        !add1c(add1c(!hc, !m), m_new)
    }

    /// RFC 1624 for a field of several words (an IPv4 address, a port pair):
    /// `old` and `new` are the field's bytes before and after, of equal even
    /// length, at an even offset of the checksummed data. `None` if the
    /// lengths differ or are odd.
    pub fn update(hc: u16, old: &[u8], new: &[u8]) -> Option<u16> {
        if old.len() != new.len() || !old.len().is_multiple_of(2) {
            return None;
        }
        let mut acc = !hc;
        for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
            acc = add1c(acc, !u16::from_be_bytes([o[0], o[1]]));
            acc = add1c(acc, u16::from_be_bytes([n[0], n[1]]));
        }
        Some(!acc)
    }
}

impl Module for Inet {
    fn name(&self) -> &str {
        "inet"
    }

    fn put(
        &mut self,
        block: Msg,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        self.flow.input(&block);
        let sum = &mut self.sum;
        cx.for_each_slice(&block, |s| {
            sum.add(s);
            Ok::<(), ModuleError>(())
        })?;
        self.flow.bytes_out += block.len() as u64;
        self.flow.blocks_out += 1;
        out.push(block);
        Ok(())
    }

    fn control(&mut self, key: &str, value: Option<&str>) -> Result<String, ModuleError> {
        match (key, value) {
            ("value", None) => Ok(format!("{:#06x}", self.sum.checksum())),
            ("sum", None) => Ok(format!("{:#06x}", self.sum.sum())),
            ("reset", Some(_)) => {
                self.sum = Sum::default();
                Ok("ok".into())
            }
            ("stats", None) => Ok(super::format_stats(&self.stats())),
            _ => Err(ModuleError::control(
                "inet",
                key,
                "expected value, sum, stats (read) or reset (write)",
            )),
        }
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("bytes", self.flow.bytes_in),
            ("blocks", self.flow.blocks_in),
            ("checksum", u64::from(self.sum.checksum())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{block, pool};
    use super::*;
    use proptest::prelude::*;

    /// The textbook definition: 16-bit words, end-around carry each step.
    fn reference(data: &[u8]) -> u16 {
        let mut s: u16 = 0;
        for w in data.chunks(2) {
            let v = u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]);
            s = add1c(s, v);
        }
        !s
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_be(0, &d)), 0xddf2);
        assert_eq!(Inet::checksum(&d), !0xddf2);
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 §4: HC = 0xdd2f, m = 0x5555 -> m' = 0x3285: HC' = 0x0000.
        assert_eq!(Inet::update16(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn module_over_odd_blocks() {
        let pool = pool();
        let data: Vec<u8> = (0..1001u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut m = Inet::open(Args::default()).unwrap();
        let mut cx = Context::new(&pool);
        let mut out = Vec::new();
        for part in [&data[..1], &data[1..4], &data[4..333], &data[333..]] {
            m.put(block(&pool, part, 2), &mut cx, &mut out).unwrap();
        }
        assert_eq!(m.value(), reference(&data));
        assert_eq!(
            m.control("value", None).unwrap(),
            format!("{:#06x}", reference(&data))
        );
        assert_eq!(cx.copied(), 0);
    }

    fn same_1c(a: u16, b: u16) -> bool {
        a == b || (a == 0 && b == 0xffff) || (a == 0xffff && b == 0)
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]

        #[test]
        fn sum_matches_reference(data in proptest::collection::vec(any::<u8>(), 0..crate::testing::scaled(600, 80))) {
            prop_assert_eq!(Inet::checksum(&data), reference(&data));
        }

        #[test]
        fn streamed_any_cuts(data in proptest::collection::vec(any::<u8>(), 0..crate::testing::scaled(600, 80)),
                             cuts in proptest::collection::vec(0usize..600, 0..6)) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (data.len() + 1)).collect();
            cuts.extend([0, data.len()]);
            cuts.sort_unstable();
            let mut s = Sum::default();
            for w in cuts.windows(2) {
                s.add(&data[w[0]..w[1]]);
            }
            prop_assert_eq!(s.checksum(), reference(&data));
        }

        #[test]
        fn incremental_equals_recompute(mut data in proptest::collection::vec(any::<u8>(), 2..crate::testing::scaled(200, 40)),
                                        at in 0usize..100, field in 1usize..4,
                                        new in proptest::collection::vec(any::<u8>(), 8)) {
            let at = (at % (data.len() / 2)) * 2;
            let len = (field * 2).min(data.len() - at) & !1;
            prop_assume!(len > 0);
            let hc = Inet::checksum(&data);
            let old = data[at..at + len].to_vec();
            data[at..at + len].copy_from_slice(&new[..len]);
            let inc = Inet::update(hc, &old, &new[..len]).unwrap();
            // Equal, or the two encodings of ones'-complement zero (RFC 1624 §3).
            prop_assert!(same_1c(inc, Inet::checksum(&data)), "inc {:#x} full {:#x}", inc, Inet::checksum(&data));
            if len == 2 {
                let m = u16::from_be_bytes([old[0], old[1]]);
                let m2 = u16::from_be_bytes([new[0], new[1]]);
                prop_assert_eq!(Inet::update16(hc, m, m2), inc);
            }
        }
    }

    #[test]
    fn incremental_zero_edge() {
        // Data that becomes all zeros: eqn. 3 gives 0x0000, recomputation 0xffff.
        let data = [0x12, 0x34];
        let hc = Inet::checksum(&data);
        assert_eq!(Inet::checksum(&[0, 0]), 0xffff);
        assert_eq!(Inet::update16(hc, 0x1234, 0), 0x0000);
        assert_eq!(Inet::update(hc, &data, &[1]), None);
    }
}
