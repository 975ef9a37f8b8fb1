//! What every side of `zcio-bench ring` measures and checks: the report a
//! child prints, clocks and CPU time, the payload pattern with its sampled
//! sequence words, and the IMIX packet-size mix.

use serde::{Deserialize, Serialize};

/// Which end of the data path a report is from.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Writes the data.
    Producer,
    /// Receives the data (and measures the rate).
    Consumer,
}

/// What one side of one measurement reports (a child prints a JSON array
/// of these on stdout).
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Producer or consumer.
    pub side: Side,
    /// Payload bytes written or received.
    pub bytes: u64,
    /// Calls or packets.
    pub items: u64,
    /// Bytes of the first item (received before `first_ns`, so not part of
    /// the measured interval).
    pub first_bytes: u64,
    /// `CLOCK_MONOTONIC` (system-wide, comparable between processes) when
    /// the first item was written / received.
    pub first_ns: u64,
    /// `CLOCK_MONOTONIC` when the last item was written / received.
    pub last_ns: u64,
    /// User CPU time over the data phase (getrusage): a producer from its
    /// first write to its last, a consumer from its first item to its last
    /// (so the CPU time covers `bytes - first_bytes`).
    pub user_ns: u64,
    /// System CPU time over the same interval.
    pub sys_ns: u64,
    /// Sequence words compared with what the producer wrote.
    pub checked: u64,
    /// Consumers: whether the stream ended with a closed ring (end of
    /// stream) rather than with the producer process gone (see
    /// [`end_of_stream`]). Producers: always true.
    #[serde(default = "yes")]
    pub clean_end: bool,
}

impl Report {
    /// A producer's report: `items` items of `bytes` in all written between
    /// `first_ns` and `last_ns` with `cpu` = (user, system) nanoseconds.
    pub fn producer(
        bytes: u64,
        items: u64,
        first_bytes: u64,
        (first_ns, last_ns): (u64, u64),
        (user_ns, sys_ns): (u64, u64),
    ) -> Self {
        Self {
            side: Side::Producer,
            bytes,
            items,
            first_bytes,
            first_ns,
            last_ns,
            user_ns,
            sys_ns,
            checked: 0,
            clean_end: true,
        }
    }
}

fn yes() -> bool {
    true
}

/// After a ring consumer has received every expected byte: the stream must
/// end, with nothing more in the ring. `Ok(true)`: end of stream (the
/// producer closed the ring); `Ok(false)`: the producer process exited
/// without the ring being marked closed (`ReadError::Disconnected`, which
/// the library reports only once everything published has been read).
pub fn end_of_stream(
    c: &mut zcio::ring::Consumer,
    timeout: std::time::Duration,
) -> Result<bool, String> {
    match c.peek_timeout(usize::MAX, timeout) {
        Ok(None) => Ok(true),
        Ok(Some(p)) => Err(format!(
            "{} unexpected bytes after the expected end of the stream",
            p.len()
        )),
        Err(zcio::ring::ReadError::Disconnected { .. }) => Ok(false),
        Err(e) => Err(format!("waiting for the end of the stream: {e}")),
    }
}

impl Report {
    /// User + system CPU time.
    pub fn cpu_ns(&self) -> u64 {
        self.user_ns + self.sys_ns
    }
}

pub use crate::cpu::{Cpu, Who};

/// A buffer of `len` bytes of a fixed non-zero pattern (the producer's
/// source; the first 8 bytes of every call are overwritten with its
/// sequence number).
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) | 1).collect()
}

/// Stamp item `seq` into the first 8 bytes of `buf`.
pub fn stamp(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
}

pub use crate::touch::word;

/// Checks a byte stream of `call`-byte items whose first 8 bytes hold the
/// item's sequence number, for every `every`-th item, however the stream
/// is cut into pieces. Reads nothing but the sampled words.
#[derive(Debug)]
pub struct Verifier {
    stride: u64,
    every: u64,
    off: u64,
    partial: [u8; 8],
    checked: u64,
}

impl Verifier {
    /// For items of `call` ≥ 8 bytes, checking every `every`-th.
    pub fn new(call: usize, every: u64) -> Self {
        let every = every.max(1);
        Self {
            stride: call as u64 * every,
            every,
            off: 0,
            partial: [0; 8],
            checked: 0,
        }
    }

    /// Bytes fed so far.
    pub fn offset(&self) -> u64 {
        self.off
    }

    /// Words compared so far.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// The next `data.len()` bytes of the stream.
    pub fn feed(&mut self, data: zcio::View<'_>) -> Result<(), String> {
        let (off, end) = (self.off, self.off + data.len() as u64);
        // First sampled word that ends after `off`.
        let mut j = if off < 8 {
            0
        } else {
            (off - 7).div_ceil(self.stride)
        };
        loop {
            let p = j * self.stride;
            if p >= end {
                break;
            }
            let (lo, hi) = (p.max(off), (p + 8).min(end));
            data.read_at(
                (lo - off) as usize,
                &mut self.partial[(lo - p) as usize..(hi - p) as usize],
            );
            if hi == p + 8 {
                let got = u64::from_le_bytes(self.partial);
                let want = j * self.every;
                if got != want {
                    return Err(format!(
                        "corrupt data at stream offset {p}: sequence word {got:#x}, expected {want:#x}"
                    ));
                }
                self.checked += 1;
            }
            j += 1;
        }
        self.off = end;
        Ok(())
    }
}

/// The simple IMIX packet-size mix: 40, 576 and 1500 bytes in the ratio
/// 7:4:1 (mean 340.3 bytes), drawn with a seeded xorshift64 so producer and
/// consumer draw the same sequence.
#[derive(Clone, Debug)]
pub struct Imix {
    state: u64,
}

impl Imix {
    /// Smallest packet.
    pub const MIN: usize = 40;
    /// Largest packet.
    pub const MAX: usize = 1500;
    /// Mean packet size in bytes.
    pub const MEAN: f64 = (7.0 * 40.0 + 4.0 * 576.0 + 1500.0) / 12.0;

    /// A generator for `seed` (any value).
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed ^ 0x9e37_79b9_7f4a_7c15 | 1,
        }
    }

    /// The next packet length.
    pub fn next_len(&mut self) -> usize {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        match (x >> 32) % 12 {
            0..=6 => 40,
            7..=10 => 576,
            _ => 1500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(call: usize, n: u64) -> Vec<u8> {
        let mut v = Vec::new();
        let mut src = pattern(call);
        for k in 0..n {
            stamp(&mut src, k);
            v.extend_from_slice(&src);
        }
        v
    }

    #[test]
    fn verifier_accepts_any_cut() {
        let s = stream(64, 100);
        for every in [1, 3, 16] {
            for cut in [1, 5, 7, 8, 63, 64, 65, 1000] {
                let mut v = Verifier::new(64, every);
                for piece in s.chunks(cut) {
                    v.feed(zcio::View::from_slice(piece)).unwrap();
                }
                assert_eq!(
                    v.checked(),
                    100u64.div_ceil(every),
                    "every {every} cut {cut}"
                );
                assert_eq!(v.offset(), s.len() as u64);
            }
        }
    }

    #[test]
    fn verifier_catches_corruption() {
        let mut s = stream(128, 10);
        s[128 * 4 + 3] ^= 1;
        let mut v = Verifier::new(128, 1);
        let r = s
            .chunks(100)
            .try_for_each(|p| v.feed(zcio::View::from_slice(p)));
        assert!(r.unwrap_err().contains("offset 512"));
        // A sampled check does not look at item 4.
        let mut v = Verifier::new(128, 3);
        assert!(s
            .chunks(100)
            .try_for_each(|p| v.feed(zcio::View::from_slice(p)))
            .is_ok());
    }

    #[test]
    fn imix_mix_and_determinism() {
        let (mut a, mut b) = (Imix::new(7), Imix::new(7));
        let mut counts = [0usize; 3];
        for _ in 0..120_000 {
            let l = a.next_len();
            assert_eq!(l, b.next_len());
            counts[match l {
                40 => 0,
                576 => 1,
                _ => 2,
            }] += 1;
        }
        // 7:4:1 within a few percent.
        assert!(
            (counts[0] as f64 / 70_000.0 - 1.0).abs() < 0.03,
            "{counts:?}"
        );
        assert!(
            (counts[1] as f64 / 40_000.0 - 1.0).abs() < 0.03,
            "{counts:?}"
        );
        assert!(
            (counts[2] as f64 / 10_000.0 - 1.0).abs() < 0.05,
            "{counts:?}"
        );
    }

    #[test]
    fn cpu_time_moves() {
        // The kernel may account CPU time in scheduler ticks (4 ms at
        // HZ=250): spin until the clocks move, for at most 2 s of wall
        // time (a clock that never moves fails).
        let a = Cpu::now(Who::Process);
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let mut i = 0u64;
        while Cpu::now(Who::Process).since(a).0 == 0
            && start.elapsed() < std::time::Duration::from_secs(2)
        {
            for _ in 0..1_000_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                i += 1;
            }
        }
        let (u, s) = Cpu::now(Who::Thread).since(Cpu::default());
        assert!(u + s > 0);
        assert!(Cpu::now(Who::Process).since(a).0 > 0 || x == 0);
    }
}
