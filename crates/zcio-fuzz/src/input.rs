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
