//! The semantics layer's record at the start of every message, as a
//! `SemanticEndpoint` meets it: `Header::parse` over the first 32 bytes a
//! peer wrote, and the whole message's check before input copies a byte
//! or swaps a page (`parse_message`, which `input`, `input_owned` and
//! `next_layout` call; `parse_hello`, which `SemanticEndpoint::new` calls
//! on the peer's first message), over messages of arbitrary shape: the
//! header's slice with or without inline data, any number of data slices
//! of any lengths.
//!
//! Invariant: no panic; an accepted header has a known semantics, only
//! known flags, a page offset within a page, no data slices with inline
//! data and fewer slices than a message can carry, and re-encodes to the
//! bytes it came from (but the reserved word); an accepted data message
//! has exactly the shape delivery relies on to copy without a bounds
//! failure (inline: one slice holding the header and at least `len`
//! bytes; by reference: a bare header then `data_slices` slices of `len`
//! bytes in all), is not a hello and is not empty; an accepted hello has
//! the hello flag; and a header the sender side encodes for a message of
//! matching shape is accepted as itself (decode(encode(x)) == x).

use zcio::internals::semantics_wire::{
    parse_hello, parse_message, Header, HEADER_LEN, HELLO, INLINE, PROTECTED, SEALED, TRUSTS,
};
use zcio::semantics::Semantics;

use crate::input::{pick_u64, record, Unstructured};
use crate::msgs;

/// `[selector][…]`: 0 header bytes through `Header::parse`; 1 a message
/// (`[cuts, see msgs::cuts][bytes…]`, the header its first 32 bytes)
/// through `parse_message` and `parse_hello`; 2 a header and message
/// built as the sender builds them.
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 3 {
        0 => header(rest),
        1 => {
            let mut u = Unstructured::new(rest);
            let cuts = msgs::cuts(&mut u, 12);
            message(u.take_rest(), &cuts);
        }
        _ => built(rest),
    }
}

fn header(b: &[u8]) {
    let ps = zcio::page_size();
    let Ok(h) = Header::parse(b, ps) else {
        return;
    };
    let _ = h.sem();
    assert!((h.semantics as usize) < Semantics::ALL.len());
    assert_eq!(h.flags & !(INLINE | PROTECTED | SEALED | HELLO | TRUSTS), 0);
    assert!((h.page_offset as usize) < ps);
    assert!(h.flags & INLINE == 0 || h.data_slices == 0);
    assert!((h.data_slices as usize) < zcio::Msg::MAX_SLICES);
    assert_eq!(&h.to_bytes()[..24], &b[..24], "re-encodes as sent");
    assert_eq!(Header::parse(&h.to_bytes(), ps), Ok(h));
}

fn message(bytes: &[u8], cuts: &[usize]) {
    let ps = zcio::page_size();
    let m = msgs::msg(bytes, cuts);
    if let Some(h) = parse_hello(&m, ps) {
        assert!(h.flags & HELLO != 0, "a hello without the flag");
        header(&bytes[..HEADER_LEN]);
    }
    let Ok((h, m)) = parse_message(m, ps) else {
        return;
    };
    header(&bytes[..HEADER_LEN]);
    assert_eq!(h.flags & HELLO, 0, "a hello taken as data");
    assert!(h.len > 0, "an empty message accepted");
    let len = usize::try_from(h.len).expect("a length that fits");
    let first = &m.slices()[0];
    // What `deliver` does with it: copy the inline bytes, or each data
    // slice in turn into a buffer of `len` bytes.
    let mut buf = vec![0u8; len];
    if h.flags & INLINE != 0 {
        assert_eq!(m.slice_count(), 1);
        assert!(first.len() >= HEADER_LEN + len);
        assert_eq!(first.view().read_at(HEADER_LEN, &mut buf), len);
        assert_eq!(&buf[..], &bytes[HEADER_LEN..HEADER_LEN + len]);
    } else {
        assert_eq!(first.len(), HEADER_LEN);
        assert_eq!(m.slice_count(), h.data_slices as usize + 1);
        let mut pos = 0;
        for s in &m.slices()[1..] {
            let n = s.len();
            assert!(pos + n <= len, "data past the header's length");
            s.view().read_at(0, &mut buf[pos..pos + n]);
            pos += n;
        }
        assert_eq!(pos, len, "data short of the header's length");
        assert_eq!(&buf[..], &bytes[HEADER_LEN..]);
    }
}

/// A header as `SemanticEndpoint`'s output builds it, in a message of the
/// shape it sends: inline (the data behind the header, one slice) or by
/// reference (a bare header, then the data in `slices` slices).
fn built(b: &[u8]) {
    let mut u = Unstructured::new(b);
    let [sem, flags, slices, slack] = record::<4>(&mut u);
    let sem = Semantics::ALL[usize::from(sem) % Semantics::ALL.len()];
    let inline = flags & 1 == 1;
    let mut fl = flags & (PROTECTED | SEALED);
    if inline {
        fl |= INLINE;
    }
    let ps = zcio::page_size();
    let page_offset = pick_u64(&mut u, &[0, 1, ps as u64 - 1]) as usize % ps;
    let data = u.take_rest();
    if data.is_empty() {
        return;
    }
    let (slices, cuts): (usize, Vec<usize>) = if inline {
        (0, vec![])
    } else {
        let k = usize::from(slices % 8).min(data.len() - 1);
        let cuts: Vec<usize> = (1..=k)
            .map(|i| HEADER_LEN + i * data.len() / (k + 1))
            .collect();
        let mut at = vec![HEADER_LEN];
        at.extend(cuts);
        at.dedup();
        (at.len(), at)
    };
    let h = Header::new(sem, fl, data.len(), page_offset, slices);
    let mut bytes = h.to_bytes().to_vec();
    bytes.extend_from_slice(data);
    if inline {
        // A sender's buffer may be longer than the data (pool rounding).
        bytes.resize(bytes.len() + usize::from(slack % 16), 0);
    }
    let m = msgs::msg(&bytes, &cuts);
    let (back, _) = parse_message(m, ps).expect("a message as the sender builds it");
    assert_eq!(back, h, "decode(encode(x)) == x");
    assert_eq!(back.sem(), sem);
    message(&bytes, &cuts);
    // The hello: a bare header with the hello flag.
    let hello = Header::new(sem, HELLO | (flags & TRUSTS), 0, 0, 0);
    let got = parse_hello(&msgs::msg(&hello.to_bytes(), &[]), ps).expect("a hello");
    assert_eq!(got, hello);
}

/// Real headers and messages: inline data, data by reference in one and
/// three slices, a hello, each semantics.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    for (i, sem) in Semantics::ALL.into_iter().enumerate() {
        let h = Header::new(sem, INLINE, data.len(), i * 100, 0);
        let mut s = vec![0u8];
        s.extend_from_slice(&h.to_bytes());
        out.push(s);
        let mut s = vec![1u8];
        s.extend_from_slice(&msgs::cuts_bytes(&[]));
        s.extend_from_slice(&h.to_bytes());
        s.extend_from_slice(&data);
        out.push(s);
    }
    for k in [1usize, 3] {
        let h = Header::new(Semantics::EmulatedCopy, PROTECTED, data.len(), 64, k);
        let cuts: Vec<usize> = (0..k).map(|i| HEADER_LEN + i * 100).collect();
        let mut s = vec![1u8];
        s.extend_from_slice(&msgs::cuts_bytes(&cuts));
        s.extend_from_slice(&h.to_bytes());
        s.extend_from_slice(&data);
        out.push(s);
    }
    let hello = Header::new(Semantics::Move, HELLO | TRUSTS, 0, 0, 0);
    out.push([&[1u8, 0][..], &hello.to_bytes()].concat());
    for flags in [1u8, 2, 0x13] {
        let mut s = vec![2u8, 3, flags, 2, 5];
        s.extend_from_slice(&[0, 0, 0]);
        s.extend_from_slice(&data[..100]);
        out.push(s);
    }
    out
}
