//! Structured input for the targets that drive a sequence of operations
//! (a hostile peer's script): `arbitrary`'s `Unstructured` over the
//! fuzzer's bytes, plus the shapes zcio's targets need.

pub use arbitrary::{Arbitrary, Unstructured};

/// Bytes for a fixed-size record: the next `N` bytes, zero-padded when the
/// input runs out (so short inputs still reach the decoder).
pub fn record<const N: usize>(u: &mut Unstructured<'_>) -> [u8; N] {
    let mut out = [0u8; N];
    let take = u.len().min(N);
    if let Ok(b) = u.bytes(take) {
        out[..take].copy_from_slice(b);
    }
    out
}

/// A value that is usually one of `interesting` (bounds, off-by-ones the
/// decoder checks) and otherwise anything: mutations of raw bytes rarely
/// land on a valid magic or an exact length by chance.
pub fn pick_u64(u: &mut Unstructured<'_>, interesting: &[u64]) -> u64 {
    match u.int_in_range(0..=3u8).unwrap_or(0) {
        0 if !interesting.is_empty() => {
            let i = u.choose_index(interesting.len()).unwrap_or(0);
            interesting[i]
        }
        1 if !interesting.is_empty() => {
            let i = u.choose_index(interesting.len()).unwrap_or(0);
            let delta: i8 = u.arbitrary().unwrap_or(0);
            interesting[i].wrapping_add_signed(i64::from(delta))
        }
        _ => u.arbitrary().unwrap_or(0),
    }
}

/// A script of operations read from the fuzzer's bytes, in a format simple
/// enough that [`ScriptWriter`] can encode real sessions as seeds:
/// - an operation is one byte, taken modulo the number of operations;
/// - a count is one byte, modulo the range's width, added to its start;
/// - a value is one byte: below 0x80 it picks `interesting[b % len]`,
///   otherwise 8 little-endian bytes follow (zero-padded at the end);
/// - raw bytes are a length byte and that many bytes.
///
/// Every read succeeds (an exhausted input reads zeros), so every input is
/// a valid script; [`Script::is_empty`] ends it.
pub struct Script<'a> {
    rest: &'a [u8],
}

impl<'a> Script<'a> {
    /// A script over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { rest: data }
    }

    /// Whether the input is used up.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&b, r)) => {
                self.rest = r;
                b
            }
            None => 0,
        }
    }

    /// An operation in `0..n`.
    pub fn op(&mut self, n: u8) -> u8 {
        self.byte() % n.max(1)
    }

    /// A count in `lo..=hi`.
    pub fn count(&mut self, lo: usize, hi: usize) -> usize {
        let w = hi.saturating_sub(lo) + 1;
        lo + usize::from(self.byte()) % w
    }

    /// Whether the next byte is odd.
    pub fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// A value: one of `interesting`, or any 64-bit value.
    pub fn value(&mut self, interesting: &[u64]) -> u64 {
        let b = self.byte();
        if b < 0x80 && !interesting.is_empty() {
            return interesting[usize::from(b) % interesting.len()];
        }
        let mut w = [0u8; 8];
        for x in &mut w {
            *x = self.byte();
        }
        u64::from_le_bytes(w)
    }

    /// Up to 255 raw bytes.
    pub fn bytes(&mut self) -> &'a [u8] {
        let n = usize::from(self.byte()).min(self.rest.len());
        let (b, r) = self.rest.split_at(n);
        self.rest = r;
        b
    }
}

/// Encodes a script [`Script`] reads back: seeds are real sessions.
#[derive(Default)]
pub struct ScriptWriter {
    out: Vec<u8>,
}

impl ScriptWriter {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Operation `i`.
    pub fn op(&mut self, i: u8) -> &mut Self {
        self.out.push(i);
        self
    }

    /// The count `n` of a range starting at `lo`.
    pub fn count(&mut self, lo: usize, n: usize) -> &mut Self {
        self.out.push((n - lo) as u8);
        self
    }

    /// A flag.
    pub fn flag(&mut self, f: bool) -> &mut Self {
        self.out.push(u8::from(f));
        self
    }

    /// The interesting value at index `i`.
    pub fn pick(&mut self, i: u8) -> &mut Self {
        assert!(i < 0x80);
        self.out.push(i);
        self
    }

    /// Any value.
    pub fn value(&mut self, v: u64) -> &mut Self {
        self.out.push(0x80);
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Raw bytes (at most 255).
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.out.push(b.len() as u8);
        self.out.extend_from_slice(b);
        self
    }

    /// The encoded script.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_script_reads_back() {
        let data = ScriptWriter::new()
            .op(3)
            .count(1, 4)
            .flag(true)
            .pick(2)
            .value(1 << 40)
            .bytes(b"abc")
            .finish();
        let mut s = Script::new(&data);
        assert_eq!(s.op(5), 3);
        assert_eq!(s.count(1, 4), 4);
        assert!(s.flag());
        assert_eq!(s.value(&[7, 8, 9]), 9);
        assert_eq!(s.value(&[7]), 1 << 40);
        assert_eq!(s.bytes(), b"abc");
        assert!(s.is_empty());
        assert_eq!(s.op(5), 0);
    }
}
