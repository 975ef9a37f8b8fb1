//! Rings as a reader meets them after a producer — honest or not — wrote
//! the file: a ring of each layout (continuous, slotted, variable,
//! descriptors, index) and policy made by `RingMap::create`, then a script
//! of operations (`crate::rings::Op`): the real `Producer` writes (every
//! write form; an index ring gets blocks spliced from a source ring),
//! `Consumer`s attach, read, peek, hold a peek while the producer goes on,
//! detach and resume peeks, seek; the producer closes, re-attaches and
//! counts live consumers; `zcio ring stat` looks; and scribbles write any
//! value over the words a hostile process owns — the producer line (head,
//! write ends, data head, counters), the control line (owner, drop
//! counters, consumer bitmap, error, bells), the MRP read pointer, the
//! consumer slots, the index ring's source table, descriptor entries and
//! in-band block headers — or truncate the file.
//!
//! Invariant: no panic, no out-of-bounds access, no hang (every call is a
//! non-blocking or 1 ms form, so each must return); every block a
//! consumer hands out lies inside the data area of the ring holding its
//! bytes (mapped twice back to back) and has the length, tag and position
//! its in-band header or descriptor entry claims; errors are the typed
//! ones (`ReadError`, `WriteError`, `OpenError`). While nothing but the
//! production code wrote the files, more holds: a block a consumer accepts
//! (read, or peeked and released intact) is byte for byte what the
//! producer wrote at that position, also when the producer lapped the
//! reader meanwhile (FRP/MRP) or overwrote the source block an index entry
//! points to; a reader of a ring that never overwrites never skips; no
//! error says "corrupt"; writes fail only as the policy says (`WouldBlock`
//! for `Block`, `Dropped` for SRP/MRP, `TooLarge` past the layout's
//! largest block).

use crate::rings::{encode, Op, Reader, Session, Value, LAYOUTS, POLICIES};
use zcio::ring::Layout;

/// `[layout][policy][source layout][source policy]`, then the operations.
pub fn run(data: &[u8]) {
    let mut r = Reader::new(data);
    let layout = LAYOUTS[usize::from(r.u8()) % LAYOUTS.len()];
    let policy = POLICIES[usize::from(r.u8()) % POLICIES.len()];
    // The source of an index ring holds data.
    let src_layout = LAYOUTS[usize::from(r.u8()) % (LAYOUTS.len() - 1)];
    let src_policy = POLICIES[usize::from(r.u8()) % POLICIES.len()];
    Session::new(layout, policy, (src_layout, src_policy)).run(&mut r);
}

fn w(len: u16, how: u8) -> Op {
    Op::Write {
        len,
        tag: len as u8,
        how,
    }
}

fn rd(c: u8, how: u8, size: u16) -> Op {
    Op::Read { c, how, size }
}

fn scribble(region: u8, index: u16, field: u8, value: Value) -> Op {
    Op::Scribble {
        target: 0,
        region,
        index,
        field,
        value,
    }
}

/// Real sessions of every layout and policy: an honest producer and
/// readers of every kind, a ring lapped by its producer, a closed and
/// re-attached producer, and a few typical scribbles.
pub fn seeds() -> Vec<Vec<u8>> {
    let honest = [
        Op::ProducerAttach,
        Op::Attach { oldest: false },
        w(100, 0),
        w(7, 1),
        w(300, 2),
        w(0, 3),
        w(64, 4),
        rd(0, 0, 4095),
        rd(0, 1, 4095),
        rd(0, 3, 4095),
        rd(0, 5, 4095),
        rd(0, 6, 4095),
        Op::Attach { oldest: true },
        rd(1, 2, 2 << 12 | 4095),
        rd(1, 7, 4095),
        Op::Stat,
        Op::Live,
        Op::Close { error: 0, code: 0 },
        rd(0, 1, 4095),
        rd(0, 1, 4095),
        Op::ProducerAttach,
        w(10, 0),
        rd(0, 0, 4095),
        Op::Close { error: 1, code: 5 },
        rd(0, 0, 4095),
    ];
    let mut lapped = vec![
        Op::ProducerAttach,
        Op::Attach { oldest: false },
        Op::Attach { oldest: false },
    ];
    for i in 0..24u16 {
        lapped.push(w(200 + i * 37, (i % 3) as u8));
        if i % 5 == 0 {
            lapped.push(rd(0, (i % 4) as u8, 4095));
        }
    }
    lapped.extend([
        rd(0, 0, 4095),
        rd(1, 1, 4095),
        Op::Seek {
            c: 1,
            kind: 3,
            n: 4,
        },
        rd(1, 0, 4095),
        Op::Seek {
            c: 0,
            kind: 1,
            n: 0,
        },
        rd(0, 3, 4095),
        Op::Stat,
    ]);
    let hostile = [
        Op::ProducerAttach,
        Op::Attach { oldest: false },
        w(40, 0),
        w(40, 0),
        // The first block's header claims more than the ring holds.
        scribble(6, 0x0002, 1, Value::pick(30)),
        rd(0, 1, 4095),
        // The head goes behind the reader, then far ahead.
        scribble(0, 0, 0, Value::pick(0)),
        rd(0, 0, 4095),
        scribble(0, 0, 0, Value::pick(17)),
        rd(0, 0, 4095),
        Op::Seek {
            c: 0,
            kind: 0,
            n: 0,
        },
        // A dead consumer in slot 3, a producer that says it is active.
        scribble(3, 3, 1, Value::pick(25)),
        scribble(1, 0, 0, Value::pick(20)),
        Op::Live,
        Op::Stat,
        Op::Close { error: 0, code: 0 },
        // The next producer continues from what the file says.
        scribble(0, 0, 3, Value::pick(15)),
        scribble(0, 0, 4, Value::pick(15)),
        Op::ProducerAttach,
        w(33, 0),
        rd(0, 4, 4095),
        scribble(4, 0, 2 << 2 | 2, Value::pick(0)),
        scribble(5, 0, 1, Value::pick(2)),
        rd(0, 3, 4095),
    ];
    let mut out = Vec::new();
    for (l, layout) in LAYOUTS.iter().enumerate() {
        for p in 0..POLICIES.len() {
            let scripts: &[&[Op]] = if *layout == Layout::Index || p == 0 {
                &[&honest, &lapped, &hostile]
            } else {
                &[&honest, &lapped]
            };
            for (k, ops) in scripts.iter().enumerate() {
                // Index rings: a source of each data layout in turn.
                let src = ((p + k) % 4) as u8;
                let mut s = vec![l as u8, p as u8, src, (k % 4) as u8];
                s.extend(encode(ops));
                out.push(s);
            }
        }
    }
    // A producer that wrote, closed and then "came back" in the owner word
    // without its lock: a reader that sleeps finds it dead.
    let mut s = vec![0, 0, 0, 0];
    s.extend(encode(&[
        Op::ProducerAttach,
        Op::Attach { oldest: false },
        w(40, 0),
        rd(0, 0, 4095),
        Op::Close { error: 0, code: 0 },
        scribble(1, 0, 0, Value::pick(19)),
        rd(0, 4, 4095),
        Op::Stat,
    ]));
    out.push(s);
    // A dead consumer (its slot says active, nobody holds its lock) at the
    // oldest position of a full ring: a write that waits evicts it.
    let mut ops = vec![
        Op::ProducerAttach,
        Op::Attach { oldest: false },
        scribble(1, 0, 4, Value::raw(0b1001)),
        scribble(3, 3, 1, Value::pick(25)),
        scribble(3, 3, 0, Value::pick(0)),
    ];
    for _ in 0..14 {
        ops.extend([w(300, 0), rd(0, 0, 4095)]);
    }
    ops.extend([w(300, 5), Op::Live, Op::Stat]);
    let mut s = vec![0, 0, 0, 0];
    s.extend(encode(&ops));
    out.push(s);
    // A truncated ring.
    let mut s = vec![2, 0, 0, 0];
    s.extend(encode(&[
        Op::ProducerAttach,
        Op::Attach { oldest: false },
        w(40, 0),
        Op::Truncate { pages: 3 },
        rd(0, 1, 4095),
        w(40, 0),
        Op::Stat,
    ]));
    out.push(s);
    out
}
