//! A hostile connector against a real channel end: the peer speaks the
//! set-up by hand (`zcio_testkit::hostile::Hostile`, written from the wire
//! format), then follows a script decoded from the input — descriptors on
//! the message ring (any region, count, offset, length, token), region and
//! single-use announcements with sealed, unsealed or short memfds, raw
//! control records with or without fds, forged deallocation notices (any
//! token, any kind, including tokens of messages the victim really sent),
//! and arbitrary words written anywhere in the shared control segment
//! (ring heads, tails, sequence words, the closed and CPU words) — while
//! the victim, a `Channel` accepted by a real `Listener` in this process,
//! receives, sends, reclaims and flushes between the steps.
//!
//! Invariant: no panic, no out-of-bounds access, no hang (every victim
//! call is non-blocking); every message the victim hands out is made of
//! bytes the peer put in a region it announced (regions hold a
//! self-describing pattern, so a slice that reaches outside one, into a
//! hole or into another mapping, breaks the run); nothing the victim
//! reports about itself (stats) goes backwards or overflows.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use crate::input::{Script, ScriptWriter};
use zcio::internals::sys::memfd;
use zcio::internals::lane::{LaneHeader, LaneLayout, LANE_MAGIC};
use zcio::internals::wire::{
    Ctl, Desc, Notice, MAX_REGION_SLOTS, MAX_SLICES, NOTICE_ESCAPED, NOTICE_RELEASED,
    NOTICE_RETIRED, SINGLE_USE_SAME, SINGLE_USE_SLOT,
};
use zcio::{Channel, Listener, Pool, PoolConfig};
use zcio_testkit::hostile::{self, Hostile};

/// Byte `o` of every region the peer announces.
fn pattern(o: u64) -> u8 {
    (o % 251) as u8
}

/// The pattern's first `len` bytes, a period at a time: a lane's data region
/// is up to 4 MiB, and a byte at a time that took 15 s of CPU per input in
/// the unoptimised build CI fuzzes with (libFuzzer's comparison hooks run on
/// every byte), past its 10 s timeout.
fn pattern_text(len: u64) -> Vec<u8> {
    let period: Vec<u8> = (0..251).map(pattern).collect();
    let len = usize::try_from(len).expect("a region length the rig chose");
    let mut text = Vec::with_capacity(len);
    while text.len() < len {
        let n = (len - text.len()).min(period.len());
        text.extend_from_slice(&period[..n]);
    }
    text
}

/// Whether `b` is a run of the pattern (each byte the previous plus one,
/// modulo 251).
fn is_run(b: &[u8]) -> bool {
    b.windows(2).all(|w| w[1] as u16 == (w[0] as u16 + 1) % 251) && b.iter().all(|&x| x < 251)
}

struct Victim {
    listener: Listener,
    path: PathBuf,
    pool: Pool,
}

fn victim() -> &'static Victim {
    static V: OnceLock<Victim> = OnceLock::new();
    V.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("zcio-fuzz-peer-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("sock");
        let _ = std::fs::remove_file(&path);
        let listener = Listener::bind(&path, hostile::victim_cfg()).expect("bind the victim");
        let pool = Pool::new(PoolConfig {
            name: "fuzz-victim".into(),
            chunk_size: 64 << 10,
            max_chunks: 4,
            populate: false,
            ..PoolConfig::default()
        });
        Victim {
            listener,
            path,
            pool,
        }
    })
}

/// A region of `actual` bytes holding the pattern; sealed (against growing
/// and shrinking; the peer keeps its writable fd, as an honest sender does
/// for a volatile pool) unless `unsealed`.
fn region(actual: u64, unsealed: bool) -> OwnedFd {
    let fd = if unsealed {
        hostile::unsealed_region("fuzz-unsealed", actual)
    } else {
        memfd::create_sized("fuzz-region", actual).expect("memfd")
    };
    let text = pattern_text(actual);
    let file = std::fs::File::from(fd);
    file.write_all_at(&text, 0).expect("fill region");
    OwnedFd::from(file)
}

const REGION_LENS: [u64; 3] = [4096, 8192, 3 * 4096];
const SLOTS: [u64; 6] = [
    0,
    1,
    2,
    SINGLE_USE_SLOT as u64,
    SINGLE_USE_SAME as u64,
    MAX_REGION_SLOTS as u64,
];
const COUNTS: [u64; 6] = [1, 0, 2, 3, MAX_SLICES as u64, MAX_SLICES as u64 + 1];
const OFFSETS: [u64; 8] = [0, 1, 4095, 4096, 8191, 8192, 12288, u64::MAX];
const LENS: [u64; 7] = [100, 0, 1, 4096, 8192, 12288, u64::MAX];
const TOKENS: [u64; 3] = [0, 1, u64::MAX];
const WORDS: [u64; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17];
const WORD_VALUES: [u64; 7] = [0, 1, 63, 64, 65, u64::MAX, 1 << 63];
const KINDS: [u64; 4] = [NOTICE_RELEASED, NOTICE_RETIRED, NOTICE_ESCAPED, 3];

/// The operations of a script, in `run`'s numbering.
mod op {
    pub const PUSH: u8 = 0;
    pub const REGION: u8 = 1;
    pub const SINGLE_USE: u8 = 2;
    pub const RAW_CTL: u8 = 3;
    pub const BYE: u8 = 4;
    pub const SCRIBBLE: u8 = 5;
    pub const NOTICES: u8 = 6;
    pub const RECV: u8 = 7;
    pub const SEND: u8 = 8;
    pub const RECLAIM: u8 = 9;
    pub const FLUSH: u8 = 10;
    pub const LANE: u8 = 11;
    pub const N: u8 = 12;
}

fn desc(s: &mut Script<'_>) -> Desc {
    hostile::desc(
        s.value(&SLOTS) as u32,
        s.value(&COUNTS) as u32,
        s.value(&OFFSETS),
        s.value(&LENS),
        s.value(&TOKENS),
    )
}

/// What the victim has reported so far (must never go backwards).
#[derive(Default)]
struct Seen {
    malformed: u64,
    regions: u64,
}

pub fn run(data: &[u8]) {
    session(data);
}

/// Messages the victim received, and those it refused as malformed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub received: usize,
    pub malformed: u64,
    pub lanes: usize,
}

/// Run one script; what the victim received.
pub fn session(data: &[u8]) -> Outcome {
    let v = victim();
    let mut out = Outcome::default();
    let mut s = Script::new(data);
    // The victim accepts in a helper thread while this one connects.
    let (ch, mut peer) = std::thread::scope(|sc| {
        let acc = sc.spawn(|| v.listener.accept_timeout(Duration::from_secs(10)));
        let peer = Hostile::connect(&v.path);
        (acc.join().expect("accept thread"), peer)
    });
    let ch: Channel = ch.expect("the victim accepts an honest hello");
    let (seg, seg_len) = peer.segment();
    let mut seen = Seen::default();
    let mut sent_tokens: Vec<u64> = Vec::new();
    let mut steps = 0;
    while !s.is_empty() && steps < 64 {
        steps += 1;
        match s.op(op::N) {
            op::PUSH => {
                let n = s.count(1, 4);
                let ds: Vec<Desc> = (0..n).map(|_| desc(&mut s)).collect();
                if peer.room() >= ds.len() {
                    peer.push(&ds);
                }
            }
            op::REGION => {
                let slot = s.value(&SLOTS) as u32;
                let actual = REGION_LENS[s.count(0, 2)];
                let claimed = s.value(&[actual, 0, 4096, 1 << 40]);
                let unsealed = s.flag();
                let fd = region(actual, unsealed);
                peer.try_ctl(&Ctl::Region { slot, len: claimed }.encode(), &[fd.as_fd()]);
            }
            op::SINGLE_USE => {
                let actual = REGION_LENS[s.count(0, 2)];
                let claimed = s.value(&[actual, 0, 1 << 40]);
                let fd = region(actual, false);
                peer.try_ctl(&Ctl::SingleUse { len: claimed }.encode(), &[fd.as_fd()]);
            }
            op::RAW_CTL => {
                let bytes = s.bytes();
                let owned: Vec<OwnedFd> = (0..s.count(0, 2)).map(|_| region(4096, false)).collect();
                let borrowed: Vec<_> = owned.iter().map(|f| f.as_fd()).collect();
                peer.try_ctl(bytes, &borrowed);
            }
            op::BYE => {
                peer.try_ctl(&Ctl::Bye.encode(), &[]);
            }
            op::SCRIBBLE => {
                let at = s.value(&WORDS) as usize % (seg_len / 8);
                let value = s.value(&WORD_VALUES);
                // SAFETY: word `at` lies inside the peer's mapping of the
                // control segment (page-aligned, `seg_len` bytes, alive as
                // long as `peer`); the victim reads these words only
                // atomically or by copy, as it would from a hostile process.
                unsafe { (*seg.add(at * 8).cast::<AtomicU64>()).store(value, Ordering::SeqCst) };
            }
            op::NOTICES => {
                let n = s.count(1, 4);
                let items: Vec<Notice> = (0..n)
                    .map(|_| {
                        let token = if !sent_tokens.is_empty() && s.flag() {
                            sent_tokens[s.count(0, sent_tokens.len() - 1)]
                        } else {
                            s.value(&TOKENS)
                        };
                        Notice {
                            token,
                            kind: s.value(&KINDS),
                            reserved: 0,
                        }
                    })
                    .collect();
                peer.forge_notices(&items);
            }
            op::RECV => {
                for _ in 0..4 {
                    match ch.try_recv() {
                        Ok(m) => {
                            out.received += 1;
                            for c in m.chunks() {
                                assert!(
                                    is_run(&c.to_vec()),
                                    "a received slice is not bytes of a region the peer announced"
                                );
                            }
                        }
                        Err(zcio::TryRecvError::Malformed(_)) => continue,
                        Err(_) => break,
                    }
                }
            }
            op::SEND => {
                if let Ok(mut b) = v.pool.try_alloc(64) {
                    b.as_mut_slice()[..5].copy_from_slice(b"hello");
                    b.truncate(5);
                    if let Ok(f) = b.freeze() {
                        let _ = ch.try_send(zcio::Msg::from(f));
                    }
                }
                sent_tokens.extend(peer.try_peek_all().iter().map(|d| d.token));
                sent_tokens.truncate(64);
            }
            op::RECLAIM => {
                ch.reclaim();
                let _ = ch.health();
                let _ = ch.check_peer();
            }
            op::LANE => {
                // A lane offer: the header the peer claims (from a real
                // layout, then any field replaced), the control segment's
                // and data region's real sizes, and what the record says.
                let slots = s.count(1, 8) as u32;
                let slot_size = s.value(&[64, 4096, 1, 0, 1 << 30, 1 << 31]);
                let layout = LaneLayout::new(slots, slot_size.clamp(1, 1 << 20))
                    .unwrap_or_else(|| LaneLayout::new(1, 64).expect("a small lane"));
                let mut h = layout.header();
                match s.count(0, 6) {
                    0 => {}
                    1 => h.magic = s.value(&[0, LANE_MAGIC + 1]),
                    2 => h.version = s.value(&[0, 2, u64::from(u32::MAX)]) as u32,
                    3 => h.slots = s.value(&[0, 9, u64::from(u32::MAX)]) as u32,
                    4 => h.slot_size = slot_size,
                    5 => h.ring_entries = s.value(&[0, 4, 16, 1 << 31]) as u32,
                    _ => h.total_len = s.value(&[0, 4096, 1 << 40]),
                }
                let seg_len = s.value(&[layout.total_len as u64, 4096, 0, 1 << 30]);
                let data_len = s.value(&[layout.data_len as u64, 4096, 0, 1 << 30]);
                let rec = Ctl::Lane {
                    slots: s.value(&[u64::from(slots), 0, 1 << 20]) as u32,
                    slot_size: s.value(&[slot_size, 0, u64::MAX]),
                    seg_len: s.value(&[seg_len, layout.total_len as u64, 0]),
                };
                let seg_fd = memfd::create_sized("fuzz-lane-seg", seg_len.min(1 << 22))
                    .expect("memfd");
                let mut bytes = [0u8; 64];
                // SAFETY: `LaneHeader` is 64 bytes of plain integers (repr(C),
                // no padding: asserted in lane/wire.rs), copied out whole.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (&h as *const LaneHeader).cast::<u8>(),
                        bytes.as_mut_ptr(),
                        64,
                    )
                };
                let file = std::fs::File::from(seg_fd);
                let _ = file.write_all_at(&bytes, 0);
                let seg_fd = OwnedFd::from(file);
                let data_fd = region(data_len.min(1 << 22), s.flag());
                peer.try_ctl(&rec.encode(), &[seg_fd.as_fd(), data_fd.as_fd()]);
                if let Ok(mut rx) = ch.try_accept_lane() {
                    out.lanes += 1;
                    // The peer leaves its rings zeroed: nothing to receive,
                    // and the receiver must say so rather than read.
                    let _ = rx.try_recv();
                }
            }
            _ => ch.flush(),
        }
        let st = ch.stats();
        assert!(st.malformed >= seen.malformed && st.regions_received >= seen.regions);
        seen = Seen {
            malformed: st.malformed,
            regions: st.regions_received,
        };
    }
    out.malformed = seen.malformed;
    drop(ch);
    drop(peer);
    out
}

/// Honest sessions (a region and a message in it, received; a
/// single-use region and its message; a victim send answered by its
/// notice) and a few hostile ones (a descriptor past its region, a
/// scribbled tail, a forged notice, a bye).
pub fn seeds() -> Vec<Vec<u8>> {
    let region0 = |w: &mut ScriptWriter| {
        // slot 0, 4096 bytes, claimed as such, sealed
        w.op(op::REGION).pick(0).count(0, 0).pick(0).flag(false);
    };
    let push = |w: &mut ScriptWriter, slot: u8, count: u8, offset: u64, len: u64| {
        w.op(op::PUSH)
            .count(1, 1)
            .pick(slot)
            .pick(count)
            .value(offset)
            .value(len)
            .pick(0);
    };
    let mut out = Vec::new();
    let mut w = ScriptWriter::new();
    region0(&mut w);
    push(&mut w, 0, 0, 10, 100);
    w.op(op::RECV).op(op::FLUSH).op(op::RECLAIM);
    out.push(w.finish());

    w.op(op::SINGLE_USE).count(0, 1).pick(0);
    push(&mut w, 3, 0, 0, 8192);
    w.op(op::RECV).op(op::FLUSH);
    out.push(w.finish());

    w.op(op::SEND).op(op::NOTICES).count(1, 1).flag(true).count(0, 0).pick(0);
    w.op(op::RECLAIM).op(op::SEND).op(op::NOTICES).count(1, 2);
    w.flag(true).count(0, 0).pick(0).flag(true).count(0, 0).pick(0);
    w.op(op::RECLAIM);
    out.push(w.finish());

    region0(&mut w);
    push(&mut w, 0, 0, 4000, 200);
    w.op(op::RECV);
    w.op(op::SCRIBBLE).value(8).pick(5).op(op::RECV);
    w.op(op::BYE).op(op::RECV);
    out.push(w.finish());

    region0(&mut w);
    w.op(op::RAW_CTL)
        .bytes(&Ctl::Region { slot: 1, len: 4096 }.encode())
        .count(0, 1);
    w.op(op::PUSH).count(1, 2);
    for (count, o) in [(2, 0), (1, 50)] {
        // the first slice says 2 slices, the second 0 (index 1)
        w.pick(1).pick(count).value(o).value(10).pick(0);
    }
    w.op(op::RECV);
    out.push(w.finish());

    // An honest lane offer of 4 slots of 64 bytes, accepted.
    w.op(op::LANE).count(1, 4).pick(0).count(0, 0);
    w.pick(0).pick(0).pick(0).pick(0).pick(0).flag(false);
    out.push(w.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_text_is_the_pattern() {
        for len in [0u64, 1, 250, 251, 252, 4096, 3 * 4096 + 7] {
            let t = pattern_text(len);
            assert_eq!(t.len() as u64, len);
            assert!(t.iter().enumerate().all(|(o, &b)| b == pattern(o as u64)));
            assert!(is_run(&t));
        }
    }

    #[test]
    fn the_seeds_reach_delivery_and_refusal() {
        let seeds = seeds();
        let got: Vec<Outcome> = seeds.iter().map(|s| session(s)).collect();
        // A message in an announced region, and one in a single-use region.
        assert_eq!(got[0].received, 1, "{got:?}");
        assert_eq!(got[1].received, 1, "{got:?}");
        // A slice reaching past its region is refused.
        assert!(got[3].malformed >= 1, "{got:?}");
        // Two slices of two regions make one message.
        assert_eq!(got[4].received, 1, "{got:?}");
        // An honest lane offer is accepted.
        assert_eq!(got[5].lanes, 1, "{got:?}");
    }
}
