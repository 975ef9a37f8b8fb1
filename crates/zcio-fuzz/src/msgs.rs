//! Messages for the targets that feed zcio's modules and readers: an
//! input's bytes in buffers of a pool of the fuzzer's own (frozen, so
//! immutable), cut into slices where the input says — the shapes a module
//! or a typed reader meets on an association or from a channel.

use std::sync::OnceLock;

use zcio::{Msg, Pool, PoolConfig};

/// Most slices [`msg`] cuts a message into (far below `zcio::Msg::MAX_SLICES`).
pub const MAX_CUTS: usize = 32;

/// The pool every target's messages and module outputs come from: one
/// per process, its chunks created on first use and reused (a target
/// drops every buffer before it returns, so it never runs dry).
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        Pool::new(PoolConfig {
            chunk_size: 4 << 20,
            max_chunks: 16,
            populate: false,
            ..PoolConfig::named("zcio-fuzz")
        })
    })
}

/// `bytes` as one message of frozen pool buffers, one slice per piece
/// between the `cuts` (byte offsets, in any order; out-of-range, repeated
/// and surplus ones ignored). Empty bytes give the empty message.
pub fn msg(bytes: &[u8], cuts: &[usize]) -> Msg {
    let mut at: Vec<usize> = cuts
        .iter()
        .copied()
        .filter(|&c| c > 0 && c < bytes.len())
        .take(MAX_CUTS - 1)
        .collect();
    at.sort_unstable();
    at.dedup();
    at.push(bytes.len());
    let mut m = Msg::new();
    let mut from = 0;
    for to in at {
        if to > from {
            m.join(own(&bytes[from..to])).expect("few slices");
        }
        from = to;
    }
    m
}

/// One frozen pool buffer holding `bytes` (non-empty).
fn own(bytes: &[u8]) -> Msg {
    let mut b = pool()
        .try_alloc(bytes.len())
        .expect("the fuzz pool has room");
    b.truncate(bytes.len());
    b.as_mut_slice().copy_from_slice(bytes);
    Msg::from(b.freeze().expect("a volatile pool freezes"))
}

/// Cut points for [`msg`] from the input, in a layout seeds can write:
/// a count byte (taken modulo `max + 1`), then that many `u16` LE offsets.
pub fn cuts(u: &mut arbitrary::Unstructured<'_>, max: usize) -> Vec<usize> {
    let n = usize::from(crate::input::record::<1>(u)[0]) % (max.min(MAX_CUTS - 1) + 1);
    (0..n)
        .map(|_| usize::from(u16::from_le_bytes(crate::input::record(u))))
        .collect()
}

/// The bytes [`cuts`] reads back as `at` (each offset below 2^16).
pub fn cuts_bytes(at: &[usize]) -> Vec<u8> {
    let mut v = vec![at.len() as u8];
    for &c in at {
        v.extend_from_slice(&(c as u16).to_le_bytes());
    }
    v
}
