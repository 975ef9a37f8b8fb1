//! A lane between two real channel ends in this process, each end in turn
//! played hostile through the hooks zcio's hostile-peer tests use: the
//! sender publishes arbitrary `LaneDesc`s (any slot, any length) and
//! scribbles arbitrary words anywhere in the lane's control segment (the
//! header line, the closed words, both rings' heads, tails and sequence
//! words); the receiver publishes arbitrary `LaneNotice`s (slots it never
//! got, twice, out of range). Between the steps the other, honest end
//! sends, lends, receives and drops through the public API.
//!
//! Invariant: no panic, no out-of-bounds access, no hang (every call is
//! non-blocking); a message the receiver hands out is at most `slot_size`
//! bytes and reads back whole; the sender never reports more slots in
//! flight than the lane has; counters never go backwards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::input::{Script, ScriptWriter};
use zcio::{Channel, ChannelConfig, LaneConfig};

mod op {
    pub const SEND: u8 = 0;
    pub const LOAN_DROP: u8 = 1;
    pub const RECV: u8 = 2;
    pub const FORGE_DESC: u8 = 3;
    pub const FORGE_NOTICE: u8 = 4;
    pub const SCRIBBLE: u8 = 5;
    pub const N: u8 = 6;
}

const SLOTS: [u64; 6] = [0, 1, 2, 3, 7, u32::MAX as u64];
const LENS: [u64; 6] = [0, 1, 64, 100, 101, u32::MAX as u64];
const WORDS: [u64; 10] = [0, 1, 2, 3, 4, 5, 6, 8, 9, 16];
const WORD_VALUES: [u64; 7] = [0, 1, 7, 8, 9, u64::MAX, 1 << 63];

/// What one script saw.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub received: usize,
    pub malformed: u64,
    pub bad_notices: u64,
}

pub fn run(data: &[u8]) {
    session(data);
}

/// Run one script: `[slots (1..=8)][slot size (1..=256)][ops…]`.
pub fn session(data: &[u8]) -> Outcome {
    let mut s = Script::new(data);
    let slots = s.count(1, 8) as u32;
    let slot_size = s.count(1, 256);
    let mut out = Outcome::default();
    let cfg = ChannelConfig {
        ring_entries: 64,
        notice_entries: 64,
        ..ChannelConfig::default()
    };
    let Ok((a, b)) = Channel::pair(cfg) else {
        return out;
    };
    let t = Duration::from_secs(10);
    let Ok(mut tx) = a.open_lane(&LaneConfig { slots, slot_size }) else {
        return out;
    };
    let Ok(mut rx) = b.accept_lane_timeout(t) else {
        return out;
    };
    let mut steps = 0;
    let mut last = (0u64, 0u64, 0u64);
    while !s.is_empty() && steps < 64 {
        steps += 1;
        match s.op(op::N) {
            op::SEND => {
                let n = s.count(0, 255).min(slot_size);
                if let Ok(mut loan) = tx.try_loan() {
                    for (i, b) in loan.as_mut_slice()[..n].iter_mut().enumerate() {
                        *b = i as u8;
                    }
                    let _ = loan.send(n);
                }
            }
            op::LOAN_DROP => {
                // A loan dropped unsent gives its slot back.
                let _ = tx.try_loan();
            }
            op::RECV => {
                for _ in 0..4 {
                    match rx.try_recv() {
                        Ok(m) => {
                            out.received += 1;
                            assert!(m.len() <= slot_size, "a message longer than its slot");
                            assert_eq!(m.to_vec().len(), m.len());
                        }
                        Err(zcio::LaneError::Malformed { .. }) => continue,
                        Err(_) => break,
                    }
                }
            }
            op::FORGE_DESC => {
                let slot = s.value(&SLOTS) as u32;
                let len = s.value(&LENS) as u32;
                tx.forge_desc(slot, len);
            }
            op::FORGE_NOTICE => rx.forge_notice(s.value(&SLOTS) as u32),
            _ => {
                let (seg, len) = if s.flag() {
                    tx.segment_for_tests()
                } else {
                    rx.segment_for_tests()
                };
                let at = s.value(&WORDS) as usize % (len / 8);
                let v = s.value(&WORD_VALUES);
                // SAFETY: word `at` lies inside the lane's control segment
                // as this end maps it (page-aligned, `len` bytes, alive as
                // long as the lane end); both ends read these words only
                // atomically or by copy, as they would from a hostile peer.
                unsafe { (*seg.add(at * 8).cast::<AtomicU64>()).store(v, Ordering::SeqCst) };
            }
        }
        let (ts, rs) = (tx.stats(), rx.stats());
        assert!(ts.in_flight <= slots, "more in flight than the lane has");
        let now = (rs.malformed, ts.bad_notices, rs.messages);
        assert!(now.0 >= last.0 && now.1 >= last.1 && now.2 >= last.2);
        last = now;
    }
    out.malformed = last.0;
    out.bad_notices = last.1;
    out
}

/// Honest traffic, then each kind of forgery.
pub fn seeds() -> Vec<Vec<u8>> {
    let head = |w: &mut ScriptWriter| {
        w.count(1, 4).count(1, 100);
    };
    let mut out = Vec::new();
    let mut w = ScriptWriter::new();
    head(&mut w);
    w.op(op::SEND).count(0, 100).op(op::SEND).count(0, 3).op(op::RECV);
    w.op(op::LOAN_DROP).op(op::SEND).count(0, 1).op(op::RECV);
    out.push(w.finish());

    head(&mut w);
    w.op(op::FORGE_DESC).pick(2).pick(2).op(op::RECV);
    w.op(op::FORGE_DESC).pick(5).pick(1).op(op::RECV);
    w.op(op::FORGE_DESC).pick(1).pick(4).op(op::RECV);
    out.push(w.finish());

    head(&mut w);
    w.op(op::SEND).count(0, 10).op(op::FORGE_NOTICE).pick(0);
    w.op(op::FORGE_NOTICE).pick(0).op(op::FORGE_NOTICE).pick(5);
    w.op(op::SEND).count(0, 10).op(op::RECV);
    out.push(w.finish());

    head(&mut w);
    w.op(op::SEND).count(0, 10);
    w.op(op::SCRIBBLE).flag(true).pick(8).pick(5).op(op::RECV);
    w.op(op::SCRIBBLE).flag(false).pick(5).pick(1).op(op::SEND).count(0, 1);
    out.push(w.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_reach_delivery_and_refusal() {
        let got: Vec<Outcome> = seeds().iter().map(|s| session(s)).collect();
        assert_eq!(got[0].received, 3, "{got:?}");
        assert!(got[1].malformed >= 2, "{got:?}");
        assert!(got[2].bad_notices >= 1, "{got:?}");
    }
}
