//! The Zenoh bridge's importer as the network feeds it: a sequence of
//! samples — put or delete, no attachment, arbitrary attachment bytes, or
//! zcio's attachment built from fields (kind, stream id, positions around
//! the one expected next, tag, an array header) and then scribbled on —
//! each with a payload length, through `zcio_zenoh::track::Tracker::step`,
//! the function the importer (`Follower`) calls for every sample it
//! receives (it decodes the attachment with `wire::Meta::decode` and the
//! array header with `zcio::array::ArrayHeader::decode`). Also, on their
//! own: one attachment through `Meta::decode`, and one liveliness token key
//! through `liveness::parse_token`. Zenoh itself is not built: the decoder
//! is Zenoh-free (`zcio-zenoh` without its `bridge` feature).
//!
//! Invariant: no panic; per followed stream, the positions delivered to
//! the sink are strictly increasing, each delivery or end starts at or
//! after the position expected next, and a gap is reported exactly when
//! the sample's position skips past it (of exactly the positions skipped;
//! for byte-counted streams one block of that many bytes); a duplicate is
//! a sample before the expected position; a malformed or ignored sample
//! changes nothing; nothing but "ignored" after the stream's end; only the
//! first zcio stream is followed; an array header handed to the sink
//! describes exactly the sample's payload behind it and re-decodes to
//! itself; a decoded attachment re-encodes (the exporter's
//! `Meta::encode`) to one that decodes to the same value, and a generated
//! one decodes to what was encoded (decode(encode(x)) == x); a token key
//! that parses is rebuilt by `token_key` into one that parses the same.

use crate::input::{Script, ScriptWriter};
use zcio::array::ArrayHeader;
use zcio_zenoh::liveness::{parse_token, token_key, Token};
use zcio_zenoh::track::{Ignored, Malformed, Step, Tracker};
use zcio_zenoh::wire::{Kind, Meta, FIXED};

/// Most samples in one input.
const MAX_SAMPLES: usize = 512;

/// Payload lengths.
const PAYLOAD: [u64; 7] = [0, 1, 64, 4096, 1 << 20, u32::MAX as u64, u64::MAX];
/// Element types of array headers (valid, odd, and one too long).
const DTYPES: [&str; 9] = [
    "<u2",
    "<f4",
    "|b1",
    "<i8",
    ">c16",
    "S7",
    "<M8[ns]",
    "|V3",
    "abcdefghijklmnopqrstuvwxyz0123456",
];

/// `[selector][…]`: selector 0 a sequence of samples (a [`Script`]), 1 one
/// attachment (`[payload length: 4 bytes LE][attachment…]`), 2 one token
/// key (UTF-8).
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 3 {
        0 => {
            samples(&mut Script::new(rest));
        }
        1 => {
            let mut len = [0u8; 4];
            let n = rest.len().min(4);
            len[..n].copy_from_slice(&rest[..n]);
            attachment(&rest[n..], u32::from_le_bytes(len) as usize);
        }
        _ => {
            if let Ok(key) = std::str::from_utf8(rest) {
                token(key);
            }
        }
    }
}

/// One attachment on its own: a decoded one re-encodes to the same value.
fn attachment(att: &[u8], payload_len: usize) {
    if let Ok(m) = Meta::decode(att, payload_len) {
        assert!(Meta::is_ours(att));
        assert_eq!(Meta::decode(&m.encode(), payload_len), Ok(m.clone()));
        if let Some(h) = &m.array {
            check_array(h, payload_len);
        }
    }
}

/// A token key: a parsed one, rebuilt, parses the same.
fn token(key: &str) {
    if let Some((t, k)) = parse_token(key) {
        assert!(key.ends_with(k));
        assert_eq!(parse_token(&token_key(t, k)), Some((t, k)));
    }
}

/// An array header handed to the sink: in front of exactly the payload,
/// and its bytes decode to itself in the local message.
fn check_array(h: &ArrayHeader, payload_len: usize) {
    let hl = h.len();
    assert!(
        (64..=ArrayHeader::MAX_HEADER).contains(&hl),
        "header of {hl}"
    );
    assert_eq!(h.payload_off, hl as u64, "payload right behind the header");
    assert_eq!(h.payload_len, payload_len as u64, "the sample's payload");
    let total = hl.checked_add(payload_len).expect("no overflow");
    assert_eq!(ArrayHeader::decode(&h.to_bytes(), total).as_ref(), Ok(h));
    for item in [1, 2, 8, 16] {
        let _ = h.check_extent(item);
    }
}

/// What the target expects of the tracker, from the decisions it made.
#[derive(Default)]
struct Model {
    stream: Option<u64>,
    expected: Option<u64>,
    last: Option<u64>,
    ended: bool,
}

/// What a sequence did, by kind of step (the seeds' test checks they
/// reach every kind).
#[derive(Default, Debug)]
struct Seen {
    plain: usize,
    delivered: usize,
    arrays: usize,
    gaps: usize,
    duplicates: usize,
    ends: usize,
    ignored: usize,
    malformed: usize,
}

fn samples(s: &mut Script<'_>) -> Seen {
    let mut t = Tracker::new();
    let mut m = Model::default();
    let mut seen = Seen::default();
    for _ in 0..MAX_SAMPLES {
        if s.is_empty() {
            break;
        }
        let mode = s.op(3);
        let is_put = s.flag();
        let len = s.value(&PAYLOAD) as usize;
        let (att, generated) = match mode {
            0 => (None, None),
            1 => (Some(s.bytes().to_vec()), None),
            _ => {
                let (att, meta) = structured(s, &t, len);
                (Some(att), meta)
            }
        };
        let step = t.step(is_put, att.as_deref(), len);
        check(&mut m, &t, is_put, att.as_deref(), len, generated, &step);
        seen.gaps += usize::from(step.gap().is_some());
        match step {
            Step::Plain => seen.plain += 1,
            Step::Deliver { array, .. } => {
                seen.delivered += 1;
                seen.arrays += usize::from(array.is_some());
            }
            Step::Duplicate { .. } => seen.duplicates += 1,
            Step::Finish { .. } => seen.ends += 1,
            Step::Ignored(_) => seen.ignored += 1,
            Step::Malformed(_) => seen.malformed += 1,
        }
    }
    seen
}

/// zcio's attachment from fields; the value encoded unless it was then
/// scribbled on.
fn structured(s: &mut Script<'_>, t: &Tracker, len: usize) -> (Vec<u8>, Option<Meta>) {
    let kind = match s.op(6) {
        0 | 5 => Kind::Data,
        1 => Kind::End,
        2 => Kind::Failed {
            code: s.value(&[0, 1, 130]) as u32,
        },
        3 => Kind::Died {
            pid: s.value(&[0, 1, 4242]) as u32,
        },
        _ => Kind::CacheRange,
    };
    let stream = s.value(&[1, 2, t.stream().unwrap_or(1)]);
    let base = t.expected().unwrap_or(0);
    let pos = s.value(&[
        base,
        base.wrapping_add(1),
        base.wrapping_sub(1),
        base.wrapping_add(2),
        0,
        u64::MAX,
    ]);
    let next = s.value(&[
        pos.wrapping_add(1),
        pos,
        pos.wrapping_add(2),
        pos.wrapping_add(100),
        pos.wrapping_sub(1),
        u64::MAX,
    ]);
    let byte_positions = s.flag();
    let tag = s.value(&[0, 1, u64::from(u32::MAX)]) as u32;
    let array = s.flag().then(|| array(s, len));
    let meta = Meta {
        kind,
        stream,
        pos,
        next,
        byte_positions,
        tag,
        array,
    };
    let mut att = meta.encode();
    let scribbles = s.count(0, 3);
    for _ in 0..scribbles {
        let at = s.count(0, 255) % att.len();
        att[at] = s.count(0, 255) as u8;
    }
    if scribbles == 3 {
        // Then cut it, or cut it and make the header length and flag
        // agree with the cut (lengths a byte scribble cannot reach).
        match s.op(3) {
            0 => {}
            1 => att.truncate(s.count(0, 255)),
            _ => {
                att.truncate(FIXED + s.count(0, 255));
                let hl = att.len().saturating_sub(FIXED);
                if att.len() >= FIXED {
                    att[40..44].copy_from_slice(&(hl as u32).to_le_bytes());
                    att[6] = (att[6] & !2) | if hl > 0 { 2 } else { 0 };
                }
            }
        }
    }
    (att, (scribbles == 0).then_some(meta))
}

fn array(s: &mut Script<'_>, len: usize) -> ArrayHeader {
    let dtype = DTYPES[usize::from(s.op(DTYPES.len() as u8))].to_string();
    let ndim = s.value(&[0, 1, 2, 3, 64, 65]).min(70) as usize;
    let len = len as u64;
    let shape = (0..ndim)
        .map(|_| s.value(&[0, 1, 2, 3, len, len / 2]))
        .collect();
    let strides = (0..ndim)
        .map(|_| s.value(&[1, 2, 4, 8, u64::MAX, 0]) as i64)
        .collect();
    ArrayHeader {
        flags: s.value(&[0, 1, 2]) as u16,
        dtype,
        shape,
        strides,
        payload_off: 0,
        payload_len: s.value(&[len, len.wrapping_add(1), len.wrapping_sub(1), 0]),
        data_off: s.value(&[0, 1, len]),
    }
}

fn check(
    m: &mut Model,
    t: &Tracker,
    is_put: bool,
    att: Option<&[u8]>,
    len: usize,
    generated: Option<Meta>,
    step: &Step,
) {
    let ours = att.is_some_and(Meta::is_ours);
    let decoded = att.filter(|_| ours).map(|a| Meta::decode(a, len));
    if let Some(Ok(d)) = &decoded {
        // The exporter's encoder, decoded: the same value.
        assert_eq!(Meta::decode(&d.encode(), len).as_ref(), Ok(d));
        if let Some(g) = &generated {
            let mut g = g.clone();
            if let Some(h) = &mut g.array {
                h.payload_off = h.len() as u64;
            }
            assert_eq!(d, &g, "decode(encode(x)) == x");
        }
    }
    let before = (m.stream, m.expected);
    if m.ended {
        assert_eq!(step, &Step::Ignored(Ignored::Finished));
    }
    match step {
        Step::Plain => assert!(is_put && !ours),
        Step::Ignored(Ignored::PlainDelete) => assert!(!is_put && !ours),
        Step::Ignored(Ignored::Finished) => assert!(m.ended),
        Step::Ignored(Ignored::OtherStream) => {
            let Some(Ok(d)) = &decoded else {
                panic!("another stream without a valid attachment")
            };
            assert!(m.stream.is_some_and(|s| s != d.stream));
        }
        Step::Malformed(why) => {
            let Some(d) = &decoded else {
                panic!("malformed without zcio's attachment")
            };
            match (why, d) {
                (Malformed::Meta(e), Err(e2)) => assert_eq!(e, e2),
                (Malformed::Kind, Ok(d)) => assert_ne!(is_put, d.kind == Kind::Data),
                (Malformed::CacheRange, Ok(d)) => assert_eq!(d.kind, Kind::CacheRange),
                _ => panic!("{why:?} for {d:?}"),
            }
        }
        Step::Duplicate { stream } => {
            let Some(Ok(d)) = &decoded else {
                panic!("a duplicate without a valid attachment")
            };
            assert_eq!(Some(*stream), m.stream);
            assert!(m.expected.is_some_and(|e| d.pos < e));
        }
        Step::Deliver {
            stream,
            pos,
            next,
            gap,
            array,
            tag,
        } => {
            let Some(Ok(d)) = &decoded else {
                panic!("a delivery without a valid attachment")
            };
            assert!(is_put && d.kind == Kind::Data);
            assert_eq!((*pos, *next, *tag, array), (d.pos, d.next, d.tag, &d.array));
            follow(m, *stream, d, *gap);
            if let Some(last) = m.last {
                assert!(*pos > last, "delivered {pos} after {last}");
            }
            m.last = Some(*pos);
            m.expected = Some(*next);
            if let Some(h) = array {
                check_array(h, len);
            }
        }
        Step::Finish { stream, gap, .. } => {
            let Some(Ok(d)) = &decoded else {
                panic!("an end without a valid attachment")
            };
            assert!(
                !is_put && matches!(d.kind, Kind::End | Kind::Failed { .. } | Kind::Died { .. })
            );
            follow(m, *stream, d, *gap);
            m.ended = true;
        }
    }
    if !matches!(step, Step::Deliver { .. } | Step::Finish { .. }) {
        assert_eq!((m.stream, m.expected), before, "no effect");
    }
    assert_eq!(t.stream(), m.stream);
    assert_eq!(t.expected(), m.expected);
    assert_eq!(t.ended(), m.ended);
}

/// A delivery or end of `stream` at `d.pos`: the stream followed (the
/// first one seen), and `gap` exactly the positions skipped.
fn follow(m: &mut Model, stream: u64, d: &Meta, gap: Option<zcio_zenoh::track::Gap>) {
    assert_eq!(stream, d.stream);
    assert!(
        m.stream.is_none_or(|s| s == stream),
        "only the first stream"
    );
    m.stream = Some(stream);
    let expected = m.expected.unwrap_or(d.pos);
    assert!(d.pos >= expected, "a delivery before the expected position");
    let skipped = d.pos - expected;
    match gap {
        None => assert_eq!(skipped, 0, "positions skipped without a gap"),
        Some(g) => {
            assert!(skipped > 0 && g.positions == skipped, "{g:?} for {skipped}");
            let (blocks, bytes) = if d.byte_positions {
                (1, skipped)
            } else {
                (skipped, 0)
            };
            assert_eq!((g.blocks, g.bytes), (blocks, bytes));
        }
    }
}

/// One sample of a seed script.
enum Seed {
    /// No attachment.
    Plain { put: bool, len: u64 },
    /// Raw attachment bytes.
    Raw { put: bool, len: u64, att: Vec<u8> },
    /// zcio's attachment: kind index (of `structured`'s six), stream, pos,
    /// next, byte positions, an array header of `len / 2` `<u2` elements.
    Meta {
        kind: u8,
        stream: u64,
        pos: u64,
        next: u64,
        bytes: bool,
        array: bool,
        len: u64,
    },
}

fn script(samples: &[Seed]) -> Vec<u8> {
    let mut w = ScriptWriter::new();
    w.op(0);
    for s in samples {
        match s {
            Seed::Plain { put, len } => {
                w.op(0).flag(*put).value(*len);
            }
            Seed::Raw { put, len, att } => {
                w.op(1).flag(*put).value(*len).bytes(att);
            }
            Seed::Meta {
                kind,
                stream,
                pos,
                next,
                bytes,
                array,
                len,
            } => {
                w.op(2).flag(*kind == 0).value(*len).op(*kind);
                if matches!(kind, 2 | 3) {
                    w.value(130);
                }
                w.value(*stream).value(*pos).value(*next);
                w.flag(*bytes).pick(1).flag(*array);
                if *array {
                    // "<u2", one dimension of len / 2, stride 2, flags 0,
                    // the payload's length, element 0 at 0.
                    w.op(0).pick(1).pick(5).pick(1).pick(0).pick(0).pick(0);
                }
                w.count(0, 0);
            }
        }
    }
    w.finish()
}

/// Real sessions: blocks in order then the end, a byte-counted stream with
/// a gap, arrays, duplicates, another stream, plain publishers, the three
/// ends; attachments the exporter encodes; token keys it declares.
pub fn seeds() -> Vec<Vec<u8>> {
    let data = |stream, pos, next, len| Seed::Meta {
        kind: 0,
        stream,
        pos,
        next,
        bytes: false,
        array: false,
        len,
    };
    let control = |kind, stream, pos| Seed::Meta {
        kind,
        stream,
        pos,
        next: pos,
        bytes: false,
        array: false,
        len: 0,
    };
    let mut out = vec![
        script(&[
            data(7, 0, 1, 64),
            data(7, 1, 2, 64),
            data(7, 2, 3, 4096),
            control(1, 7, 3),
        ]),
        script(&[
            Seed::Meta {
                kind: 0,
                stream: 9,
                pos: 0,
                next: 80,
                bytes: true,
                array: false,
                len: 64,
            },
            Seed::Meta {
                kind: 0,
                stream: 9,
                pos: 240,
                next: 320,
                bytes: true,
                array: false,
                len: 64,
            },
            control(2, 9, 320),
        ]),
        script(&[
            Seed::Meta {
                kind: 0,
                stream: 3,
                pos: 0,
                next: 1,
                bytes: false,
                array: true,
                len: 64,
            },
            data(3, 0, 1, 64),
            data(4, 1, 2, 64),
            data(3, 5, 6, 64),
            control(3, 3, 6),
        ]),
        script(&[
            Seed::Plain { put: true, len: 64 },
            Seed::Plain { put: false, len: 0 },
            Seed::Raw {
                put: true,
                len: 1,
                att: b"not zcio".to_vec(),
            },
            control(4, 1, 0),
            data(1, 0, 1, 1),
        ]),
    ];
    let array = ArrayHeader {
        flags: 0,
        dtype: "<f4".into(),
        shape: vec![4, 4],
        strides: vec![16, 4],
        payload_off: 0,
        payload_len: 64,
        data_off: 0,
    };
    for (meta, len) in [
        (Meta::data(7, 10, 11, false), 100u32),
        (
            Meta {
                array: Some(array),
                ..Meta::data(1, 0, 1, false)
            },
            64,
        ),
        (
            Meta {
                kind: Kind::Failed { code: 5 },
                ..Meta::data(1, 5, 5, true)
            },
            0,
        ),
        (
            Meta {
                kind: Kind::CacheRange,
                ..Meta::data(1, 0, 9, true)
            },
            0,
        ),
    ] {
        let mut s = vec![1u8];
        s.extend_from_slice(&len.to_le_bytes());
        s.extend_from_slice(&meta.encode());
        out.push(s);
    }
    let t = Token {
        stream: 0xabc,
        nonce: 0x1234_5678_9abc_def0,
        cached: true,
    };
    for key in [
        token_key(t, "cam/front/raw"),
        token_key(Token { cached: false, ..t }, "k"),
    ] {
        out.push([&[2u8][..], key.as_bytes()].concat());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_reach_every_kind_of_step() {
        let mut all = Seen::default();
        for seed in seeds().iter().filter(|s| s[0] == 0) {
            let s = samples(&mut Script::new(&seed[1..]));
            all.plain += s.plain;
            all.delivered += s.delivered;
            all.arrays += s.arrays;
            all.gaps += s.gaps;
            all.duplicates += s.duplicates;
            all.ends += s.ends;
            all.ignored += s.ignored;
            all.malformed += s.malformed;
        }
        let Seen {
            plain,
            delivered,
            arrays,
            gaps,
            duplicates,
            ends,
            ignored,
            malformed,
        } = all;
        assert_eq!(
            (plain, delivered, arrays, gaps, duplicates, ends, ignored, malformed),
            (2, 8, 1, 2, 1, 3, 2, 1),
            "{all:?}"
        );
    }
}
