//! zstd frames as the `unzstd` module meets them on an association: the
//! production module (`splice::module::zstd::Decompress`, opened with its
//! arguments as the registry opens it) fed a stream cut into blocks of
//! one or more slices, block by block, then `finish` — and the `zstd`
//! compressor (`Compress`) whose frames it reads.
//!
//! Invariant: no panic, no hang; no block's output exceeds the module's
//! documented cap (`limit=`, bounding a decompression bomb), and a
//! refused block leaves nothing behind in the output; a stream the
//! module accepts whole decodes to exactly what libzstd's own one-shot
//! decoder (`zstd::stream::decode_all`) makes of it; and whatever
//! `zstd` compresses — any level, cut anywhere, frames ended anywhere —
//! `unzstd` decompresses to the same bytes, cut anywhere.

use zcio::splice::module::zstd::{Compress, Decompress};
use zcio::splice::module::{Args, Context, Module};
use zcio::Msg;

use crate::input::{record, Unstructured};
use crate::msgs;

/// Output caps the stream is decoded under (`limit=`), small so a bomb
/// is caught within a few buffers.
const LIMITS: [u64; 4] = [1, 4096, 64 << 10, 1 << 20];
/// Compression levels (the fast negative ones and the usual; a higher
/// level only costs each run a larger table to clear).
const LEVELS: [i32; 4] = [-5, -1, 1, 3];

/// `[selector][…]`: 0 and 3 a stream (`[limit][slices][cuts, see
/// msgs::cuts][bytes…]`) through `unzstd`; 1 plaintext (`[level][frame
/// end][slices][cuts][cuts][bytes…]`) through `zstd` then `unzstd`; 2 the
/// same, with the compressed stream damaged (`[…][at u16][how][bytes…]`)
/// before `unzstd`. (Half the runs decompress only: compressing costs a
/// run far more.)
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 4 {
        0 | 3 => {
            let mut u = Unstructured::new(rest);
            let [limit, slices] = record::<2>(&mut u);
            let cuts = msgs::cuts(&mut u, 8);
            let stream = u.take_rest();
            decompress(
                stream,
                &cuts,
                slices,
                LIMITS[usize::from(limit) % LIMITS.len()],
            );
        }
        s => round_trip(rest, s == 2),
    }
}

/// `bytes` cut into blocks at `cuts`, each block in one slice or (where
/// bit i of `slices` says) two.
fn blocks(bytes: &[u8], cuts: &[usize], slices: u8) -> Vec<Msg> {
    let mut at: Vec<usize> = cuts.iter().copied().filter(|&c| c < bytes.len()).collect();
    at.sort_unstable();
    at.dedup();
    at.push(bytes.len());
    let mut out = Vec::new();
    let mut from = 0;
    for (i, to) in at.into_iter().enumerate() {
        let piece = &bytes[from..to];
        let split = if slices >> (i % 8) & 1 == 1 {
            vec![piece.len() / 2]
        } else {
            vec![]
        };
        out.push(msgs::msg(piece, &split));
        from = to;
    }
    out
}

/// Run `stream` through `unzstd:limit=L` block by block; whether it was
/// accepted whole, and what it produced.
fn decompress(stream: &[u8], cuts: &[usize], slices: u8, limit: u64) -> Option<Vec<u8>> {
    let args = Args::parse("unzstd", &format!("limit={limit}")).expect("args");
    let mut dec = Decompress::open(args).expect("open");
    let mut cx = Context::new(msgs::pool());
    let mut out: Vec<Msg> = Vec::new();
    for block in blocks(stream, cuts, slices) {
        let from = out.len();
        match dec.put(block, &mut cx, &mut out) {
            Ok(()) => {
                let made: usize = out[from..].iter().map(Msg::len).sum();
                assert!(
                    made as u64 <= limit,
                    "one block made {made} > limit={limit}"
                );
            }
            Err(e) => {
                assert_eq!(out.len(), from, "a refused block left output: {e}");
                let _ = e.to_string();
                return None;
            }
        }
    }
    let from = out.len();
    if let Err(e) = dec.finish(&mut cx, &mut out) {
        assert_eq!(out.len(), from, "a refused finish left output: {e}");
        return None;
    }
    let got: Vec<u8> = out.iter().flat_map(Msg::to_vec).collect();
    drop(out);
    // Accepted: libzstd's own decoder must read the same. (Bounded: every
    // block was within the limit, so the stream is too.)
    match zstd::stream::decode_all(stream) {
        Ok(want) => assert!(want == got, "unzstd and libzstd disagree"),
        // libzstd checks a frame's declared content size in its one-pass
        // path (the whole frame at hand, room for all of it) but not in
        // its streaming path when the frame's last block is empty: such a
        // frame decodes or not depending on where the stream is cut. Then
        // libzstd fed a byte at a time must read what unzstd read.
        Err(e) => match streamed(stream) {
            Ok(want) => assert!(want == got, "unzstd and libzstd disagree"),
            Err(e2) => panic!("unzstd accepted a stream libzstd refuses: {e}; {e2}"),
        },
    }
    Some(got)
}

/// libzstd's streaming decoder fed one byte at a time (never its one-pass
/// path); an error unless the stream ends at the end of a frame.
fn streamed(stream: &[u8]) -> std::io::Result<Vec<u8>> {
    use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};
    let mut d = Decoder::new()?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 17];
    let mut hint = 1;
    for i in 0..stream.len() {
        let mut input = InBuffer::around(&stream[i..=i]);
        loop {
            let mut o = OutBuffer::around(&mut buf[..]);
            hint = d.run(&mut input, &mut o)?;
            let n = o.pos();
            out.extend_from_slice(&buf[..n]);
            if input.pos() == 1 && n < buf.len() {
                break;
            }
        }
    }
    if hint != 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(out)
}

fn round_trip(b: &[u8], damage: bool) {
    let mut u = Unstructured::new(b);
    let [level, frame_end, slices] = record::<3>(&mut u);
    let cuts_in = msgs::cuts(&mut u, 6);
    let cuts_out = msgs::cuts(&mut u, 8);
    let [a0, a1, how] = if damage { record::<3>(&mut u) } else { [0; 3] };
    let plain = u.take_rest();
    let level = LEVELS[usize::from(level) % LEVELS.len()];
    let mut z = Compress::open(Args::parse("zstd", &format!("level={level}")).expect("args"))
        .expect("open");
    let mut cx = Context::new(msgs::pool());
    let mut out: Vec<Msg> = Vec::new();
    for (i, block) in blocks(plain, &cuts_in, slices).into_iter().enumerate() {
        z.put(block, &mut cx, &mut out).expect("compress");
        // End a frame after block i where bit i says (a new one follows).
        if frame_end >> (i % 8) & 1 == 1 {
            z.finish(&mut cx, &mut out).expect("end a frame");
        }
    }
    z.finish(&mut cx, &mut out).expect("end the frame");
    let mut packed: Vec<u8> = out.iter().flat_map(Msg::to_vec).collect();
    drop(out);
    if !damage {
        let got = decompress(&packed, &cuts_out, slices, 1 << 20).expect("our own stream");
        assert!(got == plain, "zstd then unzstd changed the bytes");
        return;
    }
    // Damage: change a byte, cut the stream short, or add bytes.
    let at = usize::from(u16::from_le_bytes([a0, a1])) % (packed.len() + 1);
    match how % 4 {
        0 if at < packed.len() => packed[at] ^= how | 1,
        1 => packed.truncate(at),
        2 => packed.insert(at, how),
        _ => {
            let again = packed.clone();
            packed.extend_from_slice(&again[..at]);
        }
    }
    let _ = decompress(&packed, &cuts_out, slices, 1 << 20);
}

/// Streams `zstd` makes (levels 1 and 3, one frame and two, text and
/// zeros) as input to `unzstd`, in one block and cut; the empty frame
/// with a content size that lies; a bomb (8 MiB of zeros) under a 64 KiB
/// limit; and plaintexts to compress.
pub fn seeds() -> Vec<Vec<u8>> {
    let text: Vec<u8> = b"zcio moves bulk data between processes without copying it. "
        .iter()
        .copied()
        .cycle()
        .take(3000)
        .collect();
    let mut out = Vec::new();
    let packed = |plain: &[u8], level: i32, frames: usize| {
        let mut z = Compress::open(Args::parse("zstd", &format!("level={level}")).expect("args"))
            .expect("open");
        let mut cx = Context::new(msgs::pool());
        let mut o = Vec::new();
        // Empty plaintext: still one (empty) frame, as `finish` ends it.
        let parts: Vec<&[u8]> = if plain.is_empty() {
            vec![plain]
        } else {
            plain.chunks(plain.len().div_ceil(frames)).collect()
        };
        for part in parts {
            z.put(msgs::msg(part, &[]), &mut cx, &mut o)
                .expect("compress");
            z.finish(&mut cx, &mut o).expect("finish");
        }
        o.iter().flat_map(Msg::to_vec).collect::<Vec<u8>>()
    };
    for (plain, level, frames) in [
        (&text[..], 3, 1),
        (&text[..], 1, 2),
        (&[0u8; 5000][..], 3, 1),
        (&b""[..], 3, 1),
    ] {
        let p = packed(plain, level, frames);
        for cuts in [vec![], vec![5, 13, p.len() / 2]] {
            let mut s = vec![0u8, 3, 0b10];
            s.extend_from_slice(&msgs::cuts_bytes(&cuts));
            s.extend_from_slice(&p);
            out.push(s);
        }
    }
    // The empty frame claiming one byte of content, its header cut: what
    // libzstd's streaming path accepts and its one-pass path refuses.
    let mut liar = packed(b"", 3, 1);
    assert_eq!(&liar[4..6], &[0x24, 0], "one-byte content size, 0");
    liar[5] = 1;
    out.push([&[0u8, 3, 0b10][..], &msgs::cuts_bytes(&[5]), &liar].concat());
    let bomb = packed(&vec![0u8; 8 << 20], 3, 1);
    out.push([&[0u8, 2, 0, 0][..], &bomb].concat());
    for sel in [1u8, 2] {
        let mut s = vec![sel, 3, 0b100, 0b1];
        s.extend_from_slice(&msgs::cuts_bytes(&[100, 1000]));
        s.extend_from_slice(&msgs::cuts_bytes(&[7]));
        if sel == 2 {
            s.extend_from_slice(&[40, 0, 0]);
        }
        s.extend_from_slice(&text[..1500]);
        out.push(s);
    }
    out
}
