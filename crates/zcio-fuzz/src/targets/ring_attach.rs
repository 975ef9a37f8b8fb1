//! A ring file whose every byte another process chose — the `Meta`
//! header, the producer and control lines, the consumer slots, the source
//! table, descriptors and data — met the ways a process meets a ring it
//! did not make: `zcio ring stat` (`ring::stat`, which opens it
//! read-only), `RingMap::open` read-write, then a script of the same
//! operations as `ring_read` (consumers attaching at the newest or oldest
//! data and reading every way, a producer attaching and continuing from
//! what the file says, scribbles) on whatever opened.
//!
//! Invariant: no panic, no out-of-bounds access, no hang; a file opens
//! (read-only for `stat`, read-write) exactly when its header
//! decodes (`Geometry::from_meta` against the file's length) and then with
//! that geometry; every block a consumer hands out lies inside the data
//! area of the ring that holds its bytes and has the length its header or
//! entry claims; errors are the typed ones.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::ring_header::meta_bytes;
use crate::rings::{self, encode, Op, Reader, Ring, Session, LAYOUTS, POLICIES};
use zcio::internals::ring_layout::{MetaCopy, CONTROL_OFF, DESC_OFF, SLOTS_OFF};
use zcio::ring::{Consumer, Geometry, Layout, Overflow, Producer, RingMap, Start, Wait};

/// Largest file made (larger headers are refused by length).
const MAX_FILE: u64 = 160 << 10;

/// `[length mode][Meta: 64 bytes][length: u32][n][n × (word index: u16,
/// value: u64)]`, then the operations. Length modes: 0 what the header
/// says, 1 a page less, 2 the length given, 3 shorter than the fixed
/// header.
pub fn run(data: &[u8]) {
    rings::enter();
    let mut r = Reader::new(data);
    let mode = r.u8();
    let raw: [u8; 64] = r.bytes();
    let given = u64::from(r.u32());
    let meta = parse(&raw);
    let says = meta.head_len.saturating_add(meta.data_len);
    let ps = zcio::internals::sys::page_size() as u64;
    let len = match mode % 4 {
        0 if says <= MAX_FILE => says,
        1 if says <= MAX_FILE + ps => says.saturating_sub(ps),
        0 | 1 => DESC_OFF + ps,
        2 => given % (MAX_FILE + 1),
        _ => given % DESC_OFF,
    };
    let name = rings::scratch("attach");
    let path = zcio::ring::ring_path(&name).expect("valid name");
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("create the attach file");
    file.set_len(len).expect("size the attach file");
    let _ = file.write_all_at(&raw[..raw.len().min(len as usize)], 0);
    for _ in 0..r.u8() {
        let at = u64::from(r.u16()) * 8;
        let v = r.u64();
        if at + 8 <= len {
            let _ = file.write_all_at(&v.to_le_bytes(), at);
        }
    }
    // What the header says (as the file has it: the words may have hit
    // it), decoded on its own.
    let mut now = [0u8; 64];
    let _ = file.read_exact_at(&mut now, 0);
    let want = if len >= DESC_OFF {
        Geometry::from_meta(&parse(&now), len).ok()
    } else {
        None
    };

    let st = zcio::ring::stat(&name);
    assert_eq!(st.as_ref().ok().map(|s| s.geometry), want, "stat: {st:?}");
    if let Ok(st) = &st {
        for c in &st.consumers {
            assert!(c.slot < 64);
        }
    }
    let Ok(map) = RingMap::open(&name, true) else {
        assert!(want.is_none());
        return;
    };
    assert_eq!(Some(*map.geometry()), want);
    // Rings an index file's source table may name (the scribbles' names,
    // and the seeds'), so that its entries lead somewhere.
    let _sources = [Layout::Variable, Layout::Continuous].map(|l| rings::ring(l, Overflow::Frp));
    Session::on(Ring::opened(&name, map, file)).run(&mut r);
}

/// `v` at file offset `off` with any pid in it made 4242 and any PID
/// namespace 0.
fn normalise(off: u64, v: u64) -> u64 {
    let off = off as usize;
    let pid = |v: u64| v & !0xffff_ffff | 4242;
    let slot = off.checked_sub(SLOTS_OFF).filter(|o| *o < 64 * 128);
    match (off, slot.map(|o| o % 128)) {
        (CONTROL_OFF, _) | (_, Some(8)) => pid(v),
        (o, _) if o == CONTROL_OFF + 8 => 0,
        (_, Some(16)) => 0,
        _ => v,
    }
}

fn parse(b: &[u8; 64]) -> MetaCopy {
    super::ring_header::meta(b)
}

/// Files real rings leave: each layout after a producer wrote some blocks
/// (one read, one consumer still attached, the producer closed), encoded
/// as their header and non-zero words; then a script that attaches and
/// reads.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (i, layout) in LAYOUTS.iter().enumerate() {
        let policy = POLICIES[i % POLICIES.len()];
        let ring = rings::ring(*layout, policy);
        let words = {
            let src =
                (*layout == Layout::Index).then(|| rings::ring(Layout::Variable, Overflow::Frp));
            let mut p = Producer::attach(ring.map.clone()).expect("producer");
            let mut c = Consumer::attach(ring.map.clone(), Start::Newest).expect("consumer");
            match &src {
                Some(s) => {
                    let mut sp = Producer::attach(s.map.clone()).expect("source producer");
                    let mut sc = Consumer::attach(s.map.clone(), Start::Newest).expect("splicer");
                    for n in [10usize, 200, 33] {
                        sp.write(&vec![n as u8; n]).expect("write");
                        let pk = sc.try_peek(4096).expect("peek").expect("a block");
                        p.splice(&pk, Wait::No).expect("splice");
                        pk.release().expect("intact");
                    }
                }
                None => {
                    for n in [10usize, 200, 33] {
                        p.write_tagged(&vec![n as u8; n], n as u32, Wait::No)
                            .expect("write");
                    }
                }
            }
            let mut buf = vec![0u8; 4096];
            c.try_read(&mut buf).expect("read");
            drop(p);
            // The file with the consumer still in it, the pids and PID
            // namespaces in it fixed (so the seeds do not change from run
            // to run).
            let words: Vec<(u16, u64)> = (16..ring.file_len() / 8)
                .filter_map(|i| {
                    let v = u64::from_le_bytes(ring.get(i * 8));
                    (v != 0).then_some((i as u16, normalise(i * 8, v)))
                })
                .take(255)
                .collect();
            drop(c);
            words
        };
        let meta = ring.geo.to_meta();
        for mode in [0u8, 1] {
            let mut s = vec![mode];
            s.extend_from_slice(&meta_bytes(&meta));
            s.extend_from_slice(&0u32.to_le_bytes());
            s.push(words.len() as u8);
            for (i, v) in &words {
                s.extend_from_slice(&i.to_le_bytes());
                s.extend_from_slice(&v.to_le_bytes());
            }
            s.extend(encode(&[
                Op::Stat,
                Op::Attach { oldest: true },
                Op::Read {
                    c: 0,
                    how: 1,
                    size: 4095,
                },
                Op::Read {
                    c: 0,
                    how: 0,
                    size: 4095,
                },
                Op::ProducerAttach,
                Op::Live,
                Op::Write {
                    len: 50,
                    tag: 1,
                    how: 0,
                },
                Op::Attach { oldest: false },
                Op::Read {
                    c: 1,
                    how: 3,
                    size: 4095,
                },
                Op::Stat,
            ]));
            out.push(s);
        }
    }
    // Not a ring: too short, and no magic.
    out.push(vec![3; 80]);
    out
}
