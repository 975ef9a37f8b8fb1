//! Typed messages as a receiver meets them: `Msg::read_typed`,
//! `Msg::read_typed_vec`, `Msg::borrow_typed` and `Msg::borrow_typed_elems`
//! over a message of arbitrary bytes (one slice or several), with and
//! without a type tag, and the tag on its own (`Tag::check`, the C and
//! Python frontends' entry). The types are declared as a user declares
//! them (docs/typed-messages.md): a `#[repr(u8)]` enum whose values leave
//! gaps, structs with `bool`s and that enum and no padding, a struct of
//! mixed widths, a header followed by a slice, and plain slices.
//!
//! Invariant: no panic; a value accepted is exactly the payload's bytes
//! (after the tag, when one is expected) and those bytes are valid for
//! the type — every `bool` 0 or 1, every enum byte a declared
//! discriminant — checked on the bytes, independently of zerocopy; a
//! valid payload of the right size is accepted (by copy always, in place
//! when the message is one slice); the reader's verdict on a tag is
//! `Tag::check`'s for the same layout described at run time; write→read
//! returns the value written; and a tag `Tag::encode` writes passes
//! `Tag::check`.

use crate::input::{record, Unstructured};
use crate::msgs;
use zcio::typed::{RuntimeShape, Tag, TypedError};
use zcio::Msg;
use zerocopy::{FromZeros, Immutable, IntoBytes, KnownLayout};

/// A mode: 0, 1 and 7 are values, every other byte is not.
#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq)]
#[repr(u8)]
pub enum Mode {
    /// 0.
    Idle = 0,
    /// 1.
    Run = 1,
    /// 7.
    Stop = 7,
}

/// 8 bytes, align 4: a bool, a mode and two integers.
#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Rec {
    flag: bool,
    mode: Mode,
    small: u16,
    value: u32,
}

/// 24 bytes, align 8: wide fields, floats, a bool and a mode, explicit
/// reserved bytes instead of padding.
#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug)]
#[repr(C)]
pub struct Reading {
    id: u64,
    pos: [f32; 3],
    ok: bool,
    mode: Mode,
    reserved: [u8; 2],
}

/// A header followed by its records (a slice DST).
#[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug)]
#[repr(C)]
pub struct Batch {
    head: Rec,
    items: [Rec],
}

fn mode_ok(b: u8) -> bool {
    matches!(b, 0 | 1 | 7)
}
fn rec_ok(b: &[u8]) -> bool {
    b.len() == 8 && b[0] <= 1 && mode_ok(b[1])
}
fn reading_ok(b: &[u8]) -> bool {
    b.len() == 24 && b[20] <= 1 && mode_ok(b[21])
}
fn recs_ok(b: &[u8]) -> bool {
    b.len().is_multiple_of(8) && b.chunks(8).all(rec_ok)
}
fn bools_ok(b: &[u8]) -> bool {
    b.iter().all(|&x| x <= 1)
}
fn modes_ok(b: &[u8]) -> bool {
    b.iter().all(|&x| mode_ok(x))
}
fn batch_ok(b: &[u8]) -> bool {
    b.len() >= 8 && recs_ok(b)
}

fn tag_rec() -> Tag {
    Tag::new("fuzz.Rec", 1)
}
fn tag_reading() -> Tag {
    Tag::new("fuzz.Reading", 3)
}
fn tag_batch() -> Tag {
    Tag::new("fuzz.Batch", 2)
}
fn tag_recs() -> Tag {
    Tag::of::<[Rec]>()
}
fn tag_bools() -> Tag {
    Tag::new("fuzz.bools", 0)
}
fn tag_modes() -> Tag {
    Tag::new("fuzz.modes", 0)
}

fn sized<T>() -> RuntimeShape {
    RuntimeShape {
        size: size_of::<T>(),
        align: align_of::<T>(),
        elem_size: None,
    }
}
fn slice_of<E>() -> RuntimeShape {
    RuntimeShape {
        size: 0,
        align: align_of::<E>(),
        elem_size: Some(size_of::<E>()),
    }
}
fn batch_shape() -> RuntimeShape {
    RuntimeShape {
        size: 8,
        align: 4,
        elem_size: Some(8),
    }
}

/// `[selector][…]`: 0 arbitrary bytes (`[cuts, see msgs::cuts][bytes…]`)
/// through every reader; 1 values written with `TypedBuf` (optionally
/// tagged), read back, then one byte changed and read again; 2 a tag
/// encoded for a layout described at run time and checked.
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 3 {
        0 => {
            let mut u = Unstructured::new(rest);
            let cuts = msgs::cuts(&mut u, 6);
            read_all(u.take_rest(), &cuts);
        }
        1 => written(rest),
        _ => tags(rest),
    }
}

/// Where the payload starts by `Tag::check` (the offset), or why not.
fn tag_verdict(bytes: &[u8], tag: Option<&Tag>, shape: RuntimeShape) -> Result<usize, TypedError> {
    match tag {
        None => Ok(0),
        Some(t) => t.check(&bytes[..bytes.len().min(Tag::LEN)], bytes.len(), shape),
    }
}

fn is_tag_error(e: &TypedError) -> bool {
    matches!(
        e,
        TypedError::MissingTag { .. }
            | TypedError::CorruptTag { .. }
            | TypedError::TagMismatch { .. }
    )
}

/// What a reader's result says about the tag must be `Tag::check`'s:
/// returns the payload when the tag (if any) is good.
fn agree<'b, T>(
    r: &Result<T, TypedError>,
    bytes: &'b [u8],
    tag: Option<&Tag>,
    shape: RuntimeShape,
) -> Option<&'b [u8]> {
    let verdict = tag_verdict(bytes, tag, shape);
    match (&verdict, r) {
        (Err(_), Ok(_)) => panic!("a reader accepted a tag Tag::check refuses: {verdict:?}"),
        (Ok(_), Err(e)) if is_tag_error(e) => {
            panic!("a reader refused a tag Tag::check accepts: {e}")
        }
        _ => {}
    }
    verdict.ok().map(|off| &bytes[off..])
}

/// Every reader over `bytes` cut at `cuts`, with no tag and each type's.
fn read_all(bytes: &[u8], cuts: &[usize]) {
    let m = msgs::msg(bytes, cuts);
    let one = m.slice_count() <= 1;
    for tagged in [false, true] {
        let pick = |t: Tag| tagged.then_some(t);

        let tag = pick(tag_rec());
        let r = m.read_typed::<Rec>(tag.as_ref());
        if let Some(p) = agree(&r, bytes, tag.as_ref(), sized::<Rec>()) {
            sized_verdict(&r, p, rec_ok, 8);
        }
        let b = m.borrow_typed::<Rec>(tag.as_ref());
        if let Some(p) = agree(&b, bytes, tag.as_ref(), sized::<Rec>()) {
            borrowed(&b.map(|v| v.as_bytes()), p, rec_ok(p), one);
        }

        let tag = pick(tag_reading());
        let r = m.read_typed::<Reading>(tag.as_ref());
        if let Some(p) = agree(&r, bytes, tag.as_ref(), sized::<Reading>()) {
            sized_verdict(&r, p, reading_ok, 24);
        }

        let tag = pick(tag_recs());
        let r = m.read_typed_vec::<Rec>(tag.as_ref());
        if let Some(p) = agree(&r, bytes, tag.as_ref(), slice_of::<Rec>()) {
            vec_verdict(&r, p, recs_ok(p));
        }
        let b = m.borrow_typed_elems::<[Rec]>(tag.as_ref());
        if let Some(p) = agree(&b, bytes, tag.as_ref(), slice_of::<Rec>()) {
            borrowed(&b.map(|v| v.as_bytes()), p, recs_ok(p), one);
        }

        let tag = pick(tag_bools());
        let r = m.read_typed_vec::<bool>(tag.as_ref());
        if let Some(p) = agree(&r, bytes, tag.as_ref(), slice_of::<bool>()) {
            vec_verdict(&r, p, bools_ok(p));
        }

        let tag = pick(tag_modes());
        let b = m.borrow_typed_elems::<[Mode]>(tag.as_ref());
        if let Some(p) = agree(&b, bytes, tag.as_ref(), slice_of::<Mode>()) {
            borrowed(&b.map(|v| v.as_bytes()), p, modes_ok(p), one);
        }

        let tag = pick(tag_batch());
        let b = m.borrow_typed_elems::<Batch>(tag.as_ref());
        if let Some(p) = agree(&b, bytes, tag.as_ref(), batch_shape()) {
            borrowed(&b.map(|v| v.as_bytes()), p, batch_ok(p), one);
        }
    }
}

/// `read_typed` of a sized type: accepted iff the payload is the type's
/// size and valid, and then the value is the payload.
fn sized_verdict<T: IntoBytes + Immutable>(
    r: &Result<T, TypedError>,
    p: &[u8],
    valid: fn(&[u8]) -> bool,
    size: usize,
) {
    let good = p.len() == size && valid(p);
    match r {
        Ok(v) => {
            assert_eq!(v.as_bytes(), p, "the value is the payload");
            assert!(good, "an invalid payload accepted");
        }
        Err(e) => assert!(!good, "a valid payload refused: {e}"),
    }
}

fn vec_verdict<T: IntoBytes + Immutable>(r: &Result<Vec<T>, TypedError>, p: &[u8], good: bool) {
    match r {
        Ok(v) => {
            assert_eq!(v.as_bytes(), p, "the values are the payload");
            assert!(good, "an invalid payload accepted");
        }
        Err(e) => assert!(!good, "a valid payload refused: {e}"),
    }
}

/// A borrow: accepted only over valid bytes, and always over valid bytes
/// of one slice (pool buffers are page-aligned, the tag keeps alignment).
fn borrowed(r: &Result<&[u8], TypedError>, p: &[u8], good: bool, one_slice: bool) {
    match r {
        Ok(v) => {
            assert_eq!(*v, p, "the borrow is the payload");
            assert!(good, "an invalid payload borrowed");
            assert!(one_slice, "a borrow over several slices");
        }
        Err(e) => assert!(!(good && one_slice), "a valid payload refused: {e}"),
    }
}

fn mode_of(b: u8) -> Mode {
    [Mode::Idle, Mode::Run, Mode::Stop][usize::from(b % 3)]
}

fn rec_from(u: &mut Unstructured<'_>) -> Rec {
    let [f, m, s0, s1, v0, v1, v2, v3] = record::<8>(u);
    Rec {
        flag: f & 1 == 1,
        mode: mode_of(m),
        small: u16::from_le_bytes([s0, s1]),
        value: u32::from_le_bytes([v0, v1, v2, v3]),
    }
}

fn written(b: &[u8]) {
    let mut u = Unstructured::new(b);
    let [what, tagged, n, flip_at, flip] = record::<5>(&mut u);
    let tagged = tagged & 1 == 1;
    let pool = msgs::pool();
    let (m, payload): (Msg, Vec<u8>) = match what % 4 {
        0 => {
            let v = rec_from(&mut u);
            let tag = tagged.then(tag_rec);
            let mut t = pool.alloc_typed::<Rec>(tag.as_ref()).expect("alloc");
            *t = v;
            let m = t.into_msg().expect("freeze");
            assert_eq!(m.read_typed::<Rec>(tag.as_ref()), Ok(v));
            assert_eq!(m.borrow_typed::<Rec>(tag.as_ref()), Ok(&v));
            (m, v.as_bytes().to_vec())
        }
        1 => {
            let [i0, i1, i2, i3, i4, i5, i6, i7, ok, md] = record::<10>(&mut u);
            let pos: [f32; 3] = std::array::from_fn(|_| f32::from_le_bytes(record(&mut u)));
            let v = Reading {
                id: u64::from_le_bytes([i0, i1, i2, i3, i4, i5, i6, i7]),
                pos,
                ok: ok & 1 == 1,
                mode: mode_of(md),
                reserved: [0; 2],
            };
            let tag = tagged.then(tag_reading);
            let mut t = pool.alloc_typed::<Reading>(tag.as_ref()).expect("alloc");
            *t = v;
            let m = t.into_msg().expect("freeze");
            let back = m
                .read_typed::<Reading>(tag.as_ref())
                .expect("written, read");
            assert_eq!(back.as_bytes(), v.as_bytes());
            (m, v.as_bytes().to_vec())
        }
        2 => {
            let n = usize::from(n % 17);
            let items: Vec<Rec> = (0..n).map(|_| rec_from(&mut u)).collect();
            let tag = tagged.then(tag_recs);
            let t = pool.alloc_typed_elems::<[Rec]>(n, tag.as_ref());
            if n == 0 && tag.is_none() {
                // Nothing at all to send: a pool has no empty buffers.
                assert!(t.is_err(), "an empty buffer");
                return;
            }
            let mut t = t.expect("alloc");
            t.copy_from_slice(&items);
            let m = t.into_msg().expect("freeze");
            assert_eq!(
                m.read_typed_vec::<Rec>(tag.as_ref()).as_deref(),
                Ok(&items[..])
            );
            assert_eq!(m.borrow_typed_elems::<[Rec]>(tag.as_ref()), Ok(&items[..]));
            (m, items.as_bytes().to_vec())
        }
        _ => {
            let n = usize::from(n % 17);
            let head = rec_from(&mut u);
            let items: Vec<Rec> = (0..n).map(|_| rec_from(&mut u)).collect();
            let tag = tagged.then(tag_batch);
            let mut t = pool
                .alloc_typed_elems::<Batch>(n, tag.as_ref())
                .expect("alloc");
            t.head = head;
            t.items.copy_from_slice(&items);
            let m = t.into_msg().expect("freeze");
            let got = m.borrow_typed_elems::<Batch>(tag.as_ref()).expect("borrow");
            assert_eq!((got.head, &got.items), (head, &items[..]));
            let mut want = head.as_bytes().to_vec();
            want.extend_from_slice(items.as_bytes());
            (m, want)
        }
    };
    let mut bytes = m.to_vec();
    assert!(bytes.ends_with(&payload), "the payload ends the message");
    drop(m);
    // The same bytes, then one byte changed, through every reader.
    let cuts = msgs::cuts(&mut u, 3);
    read_all(&bytes, &cuts);
    if !bytes.is_empty() && flip != 0 {
        let i = usize::from(flip_at) * bytes.len() / 256;
        bytes[i] ^= flip;
        read_all(&bytes, &cuts);
    }
}

fn tags(b: &[u8]) {
    let mut u = Unstructured::new(b);
    let [name_len, align_log, has_elem, extra] = record::<4>(&mut u);
    let schema = u32::from_le_bytes(record(&mut u));
    let size = usize::from(u16::from_le_bytes(record(&mut u)));
    let elem = usize::from(u16::from_le_bytes(record(&mut u)));
    let name_bytes = u.bytes(usize::from(name_len % 100)).unwrap_or_default();
    let name = String::from_utf8_lossy(name_bytes).into_owned();
    let shape = RuntimeShape {
        size,
        align: 1usize << (align_log % 12),
        elem_size: (has_elem & 1 == 1).then_some(elem),
    };
    let tag = Tag::new(name.clone(), schema);
    let Ok(enc) = tag.encode(shape) else {
        assert!(shape.elem_size == Some(0), "a valid shape refused");
        return;
    };
    assert_eq!(enc.len(), Tag::LEN.max(shape.align));
    let len = enc.len() + usize::from(extra);
    assert_eq!(tag.check(&enc[..Tag::LEN], len, shape), Ok(enc.len()));
    // Another schema or another layout is a mismatch, never a pass.
    let other = Tag::new(name, schema.wrapping_add(1));
    assert!(matches!(
        other.check(&enc[..Tag::LEN], len, shape),
        Err(TypedError::TagMismatch { .. })
    ));
    let wider = RuntimeShape {
        size: size + 1,
        ..shape
    };
    assert!(matches!(
        tag.check(&enc[..Tag::LEN], len, wider),
        Err(TypedError::TagMismatch { .. })
    ));
    // The tag's own bytes, read as a message.
    read_all(&enc, &[]);
}

/// Real messages: each type written with `TypedBuf`, tagged and not, as
/// raw bytes (selector 0) and as values to write (selector 1); and tags
/// for layouts a C struct or a numpy dtype has (selector 2).
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let pool = msgs::pool();
    let rec = Rec {
        flag: true,
        mode: Mode::Stop,
        small: 9,
        value: 0xdead_beef,
    };
    let raw = |m: Msg| [&[0u8, 0][..], &m.to_vec()].concat();
    for tag in [None, Some(tag_rec())] {
        let mut t = pool.alloc_typed::<Rec>(tag.as_ref()).expect("alloc");
        *t = rec;
        out.push(raw(t.into_msg().expect("freeze")));
    }
    for tag in [None, Some(tag_reading())] {
        let mut t = pool.alloc_typed::<Reading>(tag.as_ref()).expect("alloc");
        t.id = 42;
        t.pos = [1.0, -2.5, f32::NAN];
        t.ok = true;
        t.mode = Mode::Run;
        out.push(raw(t.into_msg().expect("freeze")));
    }
    for tag in [None, Some(tag_recs())] {
        let mut t = pool
            .alloc_typed_elems::<[Rec]>(3, tag.as_ref())
            .expect("alloc");
        t[1] = rec;
        out.push(raw(t.into_msg().expect("freeze")));
    }
    for tag in [None, Some(tag_batch())] {
        let mut t = pool
            .alloc_typed_elems::<Batch>(2, tag.as_ref())
            .expect("alloc");
        t.head = rec;
        t.items[0] = rec;
        out.push(raw(t.into_msg().expect("freeze")));
    }
    for tag in [Some(tag_bools()), Some(tag_modes())] {
        let mut t = pool
            .alloc_typed_elems::<[bool]>(5, tag.as_ref())
            .expect("alloc");
        t[2] = true;
        out.push(raw(t.into_msg().expect("freeze")));
    }
    // A tagged Rec cut into three slices.
    let mut t = pool.alloc_typed::<Rec>(Some(&tag_rec())).expect("alloc");
    *t = rec;
    let bytes = t.into_msg().expect("freeze").to_vec();
    out.push([&[0u8][..], &msgs::cuts_bytes(&[64, 130]), &bytes].concat());
    // Values to write.
    for what in 0..4u8 {
        for tagged in 0..2u8 {
            let mut s = vec![1u8, what, tagged, 3, 77, 0x40];
            s.extend_from_slice(&rec.as_bytes().repeat(5));
            out.push(s);
        }
    }
    // Tags: a 16-byte C struct, a slice of 4-byte pixels after a
    // 16-byte header, a 256-aligned layout.
    for (name, align_log, elem, size, e) in [
        ("example.Reading", 3u8, 0u8, 16u16, 0u16),
        ("example.Frame", 2, 1, 16, 4),
        ("big", 8, 1, 0, 256),
    ] {
        let mut s = vec![2u8, name.len() as u8, align_log, elem, 16];
        s.extend_from_slice(&1u32.to_le_bytes());
        s.extend_from_slice(&size.to_le_bytes());
        s.extend_from_slice(&e.to_le_bytes());
        s.extend_from_slice(name.as_bytes());
        out.push(s);
    }
    out
}
