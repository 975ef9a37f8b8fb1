//! Sealed frames as the `open` module meets them on an association: the
//! production module (`splice::module::seal::Unseal`, opened with its
//! arguments as the registry opens it) fed a stream cut into blocks of
//! one or more slices, then `finish`; the streams are made by the
//! production `seal` module (`Seal`) under a fixed key, then forged,
//! cut short, reordered, replayed, spliced with another stream's frames,
//! opened under another key — or replaced by arbitrary bytes.
//!
//! Invariant: no panic; a stream exactly as `seal` made it opens to
//! exactly the plaintext (seal→open is the identity, cut anywhere); any
//! other byte sequence — one byte changed, a frame dropped, swapped,
//! repeated or taken from another stream, the stream truncated or
//! extended, arbitrary bytes — is refused (at a block or at `finish`),
//! and a refused block leaves nothing behind in the output; a frame
//! longer than `max=` is refused; and no bytes at all open under a key
//! nothing was sealed with (arbitrary bytes are also opened under the
//! seeds' key, where a replayed real stream may open).

use zcio::splice::module::seal::{Seal, Unseal};
use zcio::splice::module::{Args, Context, Module};
use zcio::Msg;

use crate::input::{record, Unstructured};
use crate::msgs;

const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
const OTHER_KEY: &str = "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
/// Frame sizes `seal` cuts the plaintext into (`frame=`).
const FRAMES: [usize; 4] = [16, 100, 1000, 1 << 20];
/// `max=` of `open` (16M is the default).
const MAXES: [usize; 3] = [16 << 20, 100, 1000];

/// `[selector][…]`: 0 arbitrary bytes (`[slices][cuts, see msgs::cuts]
/// [bytes…]`) through `open`; 1 a sealed stream of the plaintext
/// (`[frame][max][slices][how][a][b][blocks cuts][wire cuts][bytes…]`),
/// changed as `how` says, through `open`.
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut u = Unstructured::new(rest);
    if sel % 2 == 0 {
        let [slices] = record::<1>(&mut u);
        let cuts = msgs::cuts(&mut u, 12);
        let bytes = u.take_rest();
        // Under the key the seeds were sealed with (a replayed stream
        // opens), and under a key nothing was ever sealed with.
        let _ = open(bytes, &cuts, slices, KEY, 16 << 20);
        let r = open(bytes, &cuts, slices, OTHER_KEY, 16 << 20);
        assert!(r.is_none(), "bytes opened under a key nobody sealed with");
        return;
    }
    let [frame, max, slices, how, a, b] = record::<6>(&mut u);
    let cuts_in = msgs::cuts(&mut u, 6);
    let cuts_wire = msgs::cuts(&mut u, 12);
    let plain = u.take_rest();
    let frame = FRAMES[usize::from(frame) % FRAMES.len()];
    let max = MAXES[usize::from(max) % MAXES.len()];
    let frames = seal(plain, &cuts_in, frame);
    let wire: Vec<u8> = frames.concat();
    let (bytes, key) = change(&frames, how, a, b, plain, &cuts_in, frame);
    let got = open(&bytes, &cuts_wire, slices, key, max);
    let fits = frames.iter().all(|f| f.len() - Seal::HEADER - Seal::TAG <= max);
    if bytes == wire && key == KEY && fits {
        let got = got.expect("a stream as sealed opens");
        assert!(got == plain, "seal then open changed the bytes");
    } else {
        assert!(got.is_none(), "a changed stream opened (how {how})");
    }
}

/// Seal `plain` cut into blocks at `cuts`: the frames, one per output.
fn seal(plain: &[u8], cuts: &[usize], frame: usize) -> Vec<Vec<u8>> {
    let args = Args::parse("seal", &format!("key={KEY},frame={frame}")).expect("args");
    let mut s = Seal::open(args).expect("open");
    let mut cx = Context::new(msgs::pool());
    let mut out: Vec<Msg> = Vec::new();
    let mut at: Vec<usize> = cuts.iter().copied().filter(|&c| c < plain.len()).collect();
    at.sort_unstable();
    at.dedup();
    at.push(plain.len());
    let mut from = 0;
    for to in at {
        s.put(msgs::msg(&plain[from..to], &[]), &mut cx, &mut out)
            .expect("seal");
        from = to;
    }
    s.finish(&mut cx, &mut out).expect("finish");
    out.iter().map(Msg::to_vec).collect()
}

/// The stream, changed as `how` says (`a`, `b` pick frames or bytes),
/// and the key to open it with.
fn change(
    frames: &[Vec<u8>],
    how: u8,
    a: u8,
    b: u8,
    plain: &[u8],
    cuts: &[usize],
    frame: usize,
) -> (Vec<u8>, &'static str) {
    let n = frames.len();
    let fa = usize::from(a) % n;
    let fb = usize::from(b) % n;
    let mut f: Vec<Vec<u8>> = frames.to_vec();
    let mut key = KEY;
    match how % 10 {
        0 => {}
        // One bit of one byte.
        1 => {
            let wire = f.concat();
            let at = (usize::from(a) << 8 | usize::from(b)) % wire.len();
            let mut w = wire;
            w[at] ^= 1 << (how / 10 % 8);
            return (w, key);
        }
        // Cut short.
        2 => {
            let wire = f.concat();
            let at = (usize::from(a) << 8 | usize::from(b)) % wire.len();
            return (wire[..at].to_vec(), key);
        }
        3 => {
            f.remove(fa);
        }
        4 => f.swap(fa, fb),
        5 => f.insert(fa, frames[fb].clone()),
        // A frame of another stream of the same plaintext and key.
        6 => {
            let other = seal(plain, cuts, frame);
            let i = fb % other.len();
            f.insert(fa, other[i].clone());
        }
        // Two streams back to back (data after the final frame).
        7 => f.extend_from_slice(frames),
        8 => key = OTHER_KEY,
        // Bytes after the stream.
        _ => f.push(vec![a; usize::from(b % 40) + 1]),
    }
    (f.concat(), key)
}

/// Run `bytes` through `open:key=K,max=M` cut into blocks at `cuts`
/// (each block one slice, or two where bit i of `slices` says); the
/// output if accepted whole.
fn open(bytes: &[u8], cuts: &[usize], slices: u8, key: &str, max: usize) -> Option<Vec<u8>> {
    let args = Args::parse("open", &format!("key={key},max={max}")).expect("args");
    let mut o = Unseal::open(args).expect("open");
    let mut cx = Context::new(msgs::pool());
    let mut out: Vec<Msg> = Vec::new();
    let mut at: Vec<usize> = cuts.iter().copied().filter(|&c| c < bytes.len()).collect();
    at.sort_unstable();
    at.dedup();
    at.push(bytes.len());
    let mut from = 0;
    for (i, to) in at.into_iter().enumerate() {
        let piece = &bytes[from..to];
        from = to;
        let split = if slices >> (i % 8) & 1 == 1 {
            vec![piece.len() / 3, piece.len() * 2 / 3]
        } else {
            vec![]
        };
        let before = out.len();
        if let Err(e) = o.put(msgs::msg(piece, &split), &mut cx, &mut out) {
            assert_eq!(out.len(), before, "a refused block left output: {e}");
            // Refused for good: the module takes nothing more.
            assert!(o.put(msgs::msg(b"x", &[]), &mut cx, &mut out).is_err());
            assert!(o.finish(&mut cx, &mut out).is_err());
            return None;
        }
    }
    if o.finish(&mut cx, &mut out).is_err() {
        return None;
    }
    Some(out.iter().flat_map(Msg::to_vec).collect())
}

/// A text to seal into frames of 16, 100 and 1M bytes, in one block and
/// three, with each kind of change (selector 1), and the empty stream.
/// (`seal` starts each stream at a random counter, so a sealed stream
/// would be a new seed on every run of `zcio-fuzz-seeds`; the few real
/// streams for selector 0 in `fuzz/corpus/splice_seal` (first byte 0) were
/// sealed once, by an earlier version of this function.)
pub fn seeds() -> Vec<Vec<u8>> {
    let text: Vec<u8> = b"sealed frames carry a counter and a tag; "
        .iter()
        .copied()
        .cycle()
        .take(700)
        .collect();
    let mut out = Vec::new();
    // Frame sizes 16, 100 and 1000 (FRAMES[0..3]).
    for fi in 0..3u8 {
        for cuts in [vec![], vec![50, 300]] {
            for how in 0..10u8 {
                let mut s = vec![1u8, fi, 0, 0b1, how, 1, 2];
                s.extend_from_slice(&msgs::cuts_bytes(&cuts));
                s.extend_from_slice(&msgs::cuts_bytes(&[13, 200]));
                s.extend_from_slice(&text);
                out.push(s);
            }
        }
    }
    out.push(vec![1u8, 0, 0, 0, 0, 0, 0, 0, 0]);
    out
}
