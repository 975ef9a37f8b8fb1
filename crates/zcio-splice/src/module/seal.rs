//! `seal` / `open`: authenticated encryption of the stream with
//! ChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`), standing in for
//! the thesis's DES module.
//!
//! `seal` turns each input slice into one frame (longer slices into
//! several of at most `frame=` bytes):
//!
//! ```text
//! [len+flags u32 LE][counter u64 LE][ciphertext (len bytes)][tag 16 bytes]
//! ```
//!
//! The 12-byte header is the associated data, so it is authenticated too.
//! The nonce is `"zcio"` followed by the counter (little-endian). The
//! counter starts at a random value below 2^63 per stream (so two streams
//! under one key do not reuse nonces, with overwhelming probability) and
//! goes up by one per frame. Flag bit 30 marks the first frame, bit 31 the
//! final frame, which `finish` emits (empty), so `open` detects a stream
//! cut short at either end. The ciphertext is written by the cipher
//! straight from the input slice into the frame's pool buffer (no copy).
//!
//! `open` reassembles frames cut anywhere across input blocks (the pieces
//! are held by reference; a frame spread over several slices is gathered
//! into its output buffer, one counted copy), verifies the tag, then
//! checks the order: a tampered, reordered, replayed, dropped or
//! truncated frame, an oversized length or data after the final frame is a
//! [`ModuleError::BadInput`], and the module refuses further data. Bytes a
//! peer could still change are copied before they are verified.
//!
//! Arguments: `key=HEX` (64 hex digits) or `keyfile=PATH` (32 raw bytes or
//! 64 hex digits); `seal` also `frame=SIZE` (default 1M), `open` also
//! `max=SIZE` (largest frame accepted, default 16M).

use chacha20poly1305::aead::inout::InOutBuf;
use chacha20poly1305::{AeadInOut, ChaCha20Poly1305, Key, KeyInit, Nonce, Tag};

use super::{Args, Context, Flow, Module, ModuleError};
use crate::msg::{JoinError, Msg, MsgError};

/// Header bytes before the ciphertext.
const HEADER: usize = 12;
/// Tag bytes after it.
const TAG: usize = 16;
/// Flag: the first frame of a stream.
const FIRST: u32 = 1 << 30;
/// Flag: the final (empty) frame of a stream.
const FINAL: u32 = 1 << 31;
/// Largest frame payload the format can express.
const MAX_FRAME: usize = (1 << 30) - 1;

fn nonce(counter: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(b"zcio");
    n[4..].copy_from_slice(&counter.to_le_bytes());
    Nonce::from(n)
}

fn header(len: usize, flags: u32, counter: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(&(len as u32 | flags).to_le_bytes());
    h[4..].copy_from_slice(&counter.to_le_bytes());
    h
}

/// Where a module's key comes from: `key=HEX` (decoded when parsed) or
/// `keyfile=PATH` (read when the module opens). Its `Debug` shows no key.
#[derive(Clone, PartialEq, Eq)]
pub enum KeyArg {
    /// `key=`: 64 hex digits, decoded.
    Hex([u8; 32]),
    /// `keyfile=`: 32 raw bytes or 64 hex digits, in this file.
    File(String),
}

impl std::fmt::Debug for KeyArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Hex(_) => f.write_str("Hex(..)"),
            Self::File(p) => f.debug_tuple("File").field(p).finish(),
        }
    }
}

fn parse_hex(module: &str, text: &str, what: &str) -> Result<[u8; 32], ModuleError> {
    let mut k = [0u8; 32];
    hex::decode_to_slice(text.trim(), &mut k).map_err(|_| {
        ModuleError::bad_args(module, format!("{what}: expected 64 hex digits (32 bytes)"))
    })?;
    Ok(k)
}

impl KeyArg {
    /// Take `key=` or `keyfile=` (exactly one) from `args` of `module`.
    pub fn take(module: &str, args: &mut Args) -> Result<Self, ModuleError> {
        match (args.take("key"), args.take("keyfile")) {
            (Some(_), Some(_)) => Err(ModuleError::bad_args(
                module,
                "give key= or keyfile=, not both",
            )),
            (Some(k), None) => Ok(Self::Hex(parse_hex(module, &k, "key")?)),
            (None, Some(path)) => Ok(Self::File(path)),
            (None, None) => Err(ModuleError::bad_args(
                module,
                "needs key=HEX64 or keyfile=PATH (32 bytes, e.g. from `head -c32 /dev/urandom`)",
            )),
        }
    }

    /// The key (reading the file of `keyfile=`).
    fn resolve(&self, module: &str) -> Result<Key, ModuleError> {
        let bytes = match self {
            Self::Hex(k) => *k,
            Self::File(path) => {
                let data = std::fs::read(path)
                    .map_err(|e| ModuleError::bad_args(module, format!("keyfile={path}: {e}")))?;
                match <[u8; 32]>::try_from(&data[..]) {
                    Ok(raw) => raw,
                    Err(_) => parse_hex(
                        module,
                        std::str::from_utf8(&data).unwrap_or(""),
                        &format!("keyfile={path}"),
                    )?,
                }
            }
        };
        Ok(Key::from(bytes))
    }
}

/// `seal`'s arguments, parsed: no key file read yet ([`Seal::open`] does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealArgs {
    /// The key.
    pub key: KeyArg,
    /// Largest frame payload, `1..=MAX_FRAME` (default 1 MiB).
    pub frame: usize,
}

impl SealArgs {
    /// Parse `key=`/`keyfile=`, `frame=SIZE`.
    pub fn parse(mut args: Args) -> Result<Self, ModuleError> {
        let key = KeyArg::take("seal", &mut args)?;
        let frame = args.take_size("frame")?.unwrap_or(1 << 20);
        args.finish(&["key", "keyfile", "frame"])?;
        if frame == 0 || frame > MAX_FRAME as u64 {
            return Err(ModuleError::bad_args(
                "seal",
                format!("frame must be 1..={MAX_FRAME}"),
            ));
        }
        Ok(Self {
            key,
            frame: frame as usize,
        })
    }
}

/// `open`'s arguments, parsed: no key file read yet ([`Unseal::open`]
/// does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenArgs {
    /// The key.
    pub key: KeyArg,
    /// Largest frame accepted, at most `MAX_FRAME` (default 16 MiB).
    pub max: usize,
}

impl OpenArgs {
    /// Parse `key=`/`keyfile=`, `max=SIZE`.
    pub fn parse(mut args: Args) -> Result<Self, ModuleError> {
        let key = KeyArg::take("open", &mut args)?;
        let max = args.take_size("max")?.unwrap_or(16 << 20);
        args.finish(&["key", "keyfile", "max"])?;
        if max > MAX_FRAME as u64 {
            return Err(ModuleError::bad_args(
                "open",
                format!("max must be <= {MAX_FRAME}"),
            ));
        }
        Ok(Self {
            key,
            max: max as usize,
        })
    }
}

/// A random counter start below 2^63 (from the kernel's CSPRNG).
fn random_start() -> Result<u64, ModuleError> {
    use std::io::Read;
    let mut b = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| ModuleError::failed("seal", format!("/dev/urandom: {e}")))?;
    Ok(u64::from_le_bytes(b) >> 1)
}

/// The `seal` module (encrypt + frame).
pub struct Seal {
    cipher: ChaCha20Poly1305,
    next: u64,
    first: bool,
    frame: usize,
    flow: Flow,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seal").field("frame", &self.frame).finish()
    }
}

impl Seal {
    /// The frame format, for readers of a sealed stream: header bytes before the ciphertext.
    pub const HEADER: usize = HEADER;
    /// Tag bytes after the ciphertext.
    pub const TAG: usize = TAG;
    /// Header flag: the first frame of a stream.
    pub const FIRST: u32 = FIRST;
    /// Header flag: the final (empty) frame of a stream.
    pub const FINAL: u32 = FINAL;
    /// Largest frame payload the format can express.
    pub const MAX_FRAME: usize = MAX_FRAME;

    /// Open: `key=`/`keyfile=`, `frame=SIZE` ([`SealArgs::parse`]).
    pub fn open(args: Args) -> Result<Self, ModuleError> {
        let SealArgs { key, frame } = SealArgs::parse(args)?;
        let key = key.resolve("seal")?;
        Ok(Self {
            cipher: ChaCha20Poly1305::new(&key),
            next: random_start()?,
            first: true,
            frame,
            flow: Flow::default(),
        })
    }

    fn seal_piece(
        &mut self,
        plain: &[u8],
        flags: u32,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        let flags = flags | if self.first { FIRST } else { 0 };
        let counter = self.next;
        let hdr = header(plain.len(), flags, counter);
        let mut b = cx.alloc(HEADER + plain.len() + TAG)?;
        let buf = b.as_mut_slice();
        buf[..HEADER].copy_from_slice(&hdr);
        let (body, tag_out) = buf[HEADER..].split_at_mut(plain.len());
        let inout = InOutBuf::new(plain, body)
            .map_err(|_| ModuleError::failed("seal", "internal: buffer lengths differ"))?;
        let tag = self
            .cipher
            .encrypt_inout_detached(&nonce(counter), &hdr, inout)
            .map_err(|_| ModuleError::failed("seal", "frame too long for the cipher"))?;
        tag_out.copy_from_slice(&tag);
        out.push(cx.freeze(b)?);
        self.first = false;
        self.next = counter
            .checked_add(1)
            .ok_or_else(|| ModuleError::failed("seal", "frame counter exhausted"))?;
        Ok(())
    }
}

impl Module for Seal {
    fn name(&self) -> &str {
        "seal"
    }

    fn put(
        &mut self,
        block: Msg,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        self.flow.input(&block);
        let from = out.len();
        let mut scratch = Vec::new();
        for v in block.chunks() {
            let owned;
            let plain: &[u8] = match v.as_slice() {
                Some(s) => s,
                None => {
                    scratch.resize(v.len(), 0);
                    v.copy_to_slice(&mut scratch);
                    cx.note_copy(v.len());
                    owned = &scratch[..];
                    owned
                }
            };
            for piece in plain.chunks(self.frame) {
                self.seal_piece(piece, 0, cx, out)?;
            }
        }
        self.flow.output(out, from);
        Ok(())
    }

    fn finish(&mut self, cx: &mut Context<'_>, out: &mut Vec<Msg>) -> Result<(), ModuleError> {
        let from = out.len();
        self.seal_piece(&[], FINAL, cx, out)?;
        // A new stream may follow: fresh counter, first flag again.
        self.next = random_start()?;
        self.first = true;
        self.flow.output(out, from);
        Ok(())
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.flow.stats().to_vec()
    }
}

/// The `open` module (verify + decrypt; the type is `Unseal` because
/// `open` is every module's constructor).
pub struct Unseal {
    cipher: ChaCha20Poly1305,
    max: usize,
    /// Counter the next frame must carry (`None`: expecting a first frame).
    expect: Option<u64>,
    /// Bytes of frames not yet complete (slices held by reference).
    pending: Msg,
    ended: bool,
    failed: bool,
    flow: Flow,
    frames: u64,
    rejected: u64,
}

impl std::fmt::Debug for Unseal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unseal")
            .field("max", &self.max)
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl Unseal {
    /// Open: `key=`/`keyfile=`, `max=SIZE` ([`OpenArgs::parse`]).
    pub fn open(args: Args) -> Result<Self, ModuleError> {
        let OpenArgs { key, max } = OpenArgs::parse(args)?;
        let key = key.resolve("open")?;
        Ok(Self {
            cipher: ChaCha20Poly1305::new(&key),
            max,
            expect: None,
            pending: Msg::new(),
            ended: false,
            failed: false,
            flow: Flow::default(),
            frames: 0,
            rejected: 0,
        })
    }

    fn reject(&mut self, reason: String) -> ModuleError {
        self.failed = true;
        self.rejected += 1;
        self.pending = Msg::new();
        ModuleError::bad_input("open", reason)
    }

    /// Add `block` to the pending bytes, gathering them into one buffer
    /// if the slice list would grow too long.
    fn stash(&mut self, block: Msg, cx: &mut Context<'_>) -> Result<(), ModuleError> {
        match self.pending.join(block).map_err(JoinError::into_parts) {
            Ok(()) => Ok(()),
            Err((MsgError::TooManySlices(_), block)) => {
                let mut b = cx.alloc(self.pending.len())?;
                let n = self.pending.read_at(0, b.as_mut_slice());
                cx.note_copy(n);
                self.pending = cx.freeze(b)?;
                self.pending
                    .join(block)
                    .map_err(|e| ModuleError::msg("open", e.into_parts().0))
            }
            Err((e, _)) => Err(ModuleError::msg("open", e)),
        }
    }

    /// Verify and decrypt one complete frame.
    fn open_frame(
        &mut self,
        frame: Msg,
        len: usize,
        flags: u32,
        counter: u64,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        let hdr = header(len, flags, counter);
        let mut tag = [0u8; TAG];
        frame.read_at(HEADER + len, &mut tag);
        let tag = Tag::from(tag);
        let plain = if len > 0 {
            let mut b = cx.alloc(len)?;
            let mut body = frame;
            body.clip_front(HEADER)
                .and_then(|()| body.clip_back(TAG))
                .map_err(|e| ModuleError::msg("open", e))?;
            let direct = match body.slices() {
                [one] => one.view().as_slice(),
                _ => None,
            };
            let ok = match direct {
                // One immutable slice: decrypt from it into the output.
                Some(ct) => InOutBuf::new(ct, b.as_mut_slice())
                    .ok()
                    .and_then(|io| {
                        self.cipher
                            .decrypt_inout_detached(&nonce(counter), &hdr, io, &tag)
                            .ok()
                    })
                    .is_some(),
                // Gather (and take private what a peer could change), then
                // verify and decrypt in place.
                None => {
                    let n = body.read_at(0, b.as_mut_slice());
                    cx.note_copy(n);
                    self.cipher
                        .decrypt_inout_detached(
                            &nonce(counter),
                            &hdr,
                            b.as_mut_slice().into(),
                            &tag,
                        )
                        .is_ok()
                }
            };
            if !ok {
                return Err(self.reject(format!(
                    "frame {} fails authentication (tampered, or a different key)",
                    self.frames
                )));
            }
            Some(cx.freeze(b)?)
        } else {
            let ok = self
                .cipher
                .decrypt_inout_detached(&nonce(counter), &hdr, (&mut [][..]).into(), &tag)
                .is_ok();
            if !ok {
                return Err(self.reject(format!(
                    "frame {} fails authentication (tampered, or a different key)",
                    self.frames
                )));
            }
            None
        };
        // Authentic: now the order.
        let first = flags & FIRST != 0;
        match (self.expect, first) {
            (None, true) => {}
            (Some(want), false) if want == counter => {}
            (None, false) => {
                return Err(self.reject(
                    "stream does not start with its first frame (frames lost at the start)".into(),
                ))
            }
            (Some(want), _) => {
                return Err(self.reject(format!(
                    "frame out of order: counter {counter}, expected {want} (reordered, replayed or lost)"
                )))
            }
        }
        if flags & FINAL != 0 {
            if len != 0 {
                return Err(self.reject("final frame carries data".into()));
            }
            self.ended = true;
        }
        self.expect = counter.checked_add(1);
        self.frames += 1;
        if let Some(p) = plain {
            out.push(p);
        }
        Ok(())
    }
}

impl Module for Unseal {
    fn name(&self) -> &str {
        "open"
    }

    fn put(
        &mut self,
        block: Msg,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        if self.failed {
            return Err(ModuleError::bad_input("open", "stream already rejected"));
        }
        self.flow.input(&block);
        if block.is_empty() {
            return Ok(());
        }
        if self.ended {
            return Err(self.reject("data after the final frame".into()));
        }
        let from = out.len();
        self.stash(block, cx)?;
        while self.pending.len() >= HEADER && !self.ended {
            let mut h = [0u8; HEADER];
            self.pending.read_at(0, &mut h);
            let word = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let counter = u64::from_le_bytes([h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11]]);
            let flags = word & (FIRST | FINAL);
            let len = (word & !(FIRST | FINAL)) as usize;
            if len > self.max {
                out.truncate(from);
                return Err(self.reject(format!(
                    "frame of {len} bytes exceeds max={} (raise max= if the sender uses larger frames)",
                    self.max
                )));
            }
            let total = HEADER + len + TAG;
            if self.pending.len() < total {
                break;
            }
            let rest = self
                .pending
                .split_off(total)
                .map_err(|e| ModuleError::msg("open", e))?;
            let frame = std::mem::replace(&mut self.pending, rest);
            if let Err(e) = self.open_frame(frame, len, flags, counter, cx, out) {
                out.truncate(from);
                return Err(e);
            }
        }
        if self.ended && !self.pending.is_empty() {
            out.truncate(from);
            return Err(self.reject("data after the final frame".into()));
        }
        self.flow.output(out, from);
        Ok(())
    }

    fn finish(&mut self, _cx: &mut Context<'_>, _out: &mut Vec<Msg>) -> Result<(), ModuleError> {
        if self.failed {
            return Err(ModuleError::bad_input("open", "stream already rejected"));
        }
        if !self.ended {
            return Err(self.reject(format!(
                "stream truncated: no final frame ({} bytes of an incomplete frame pending)",
                self.pending.len()
            )));
        }
        // Ready for a new stream.
        self.ended = false;
        self.expect = None;
        Ok(())
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        let mut v = self.flow.stats().to_vec();
        v.extend([("frames", self.frames), ("rejected", self.rejected)]);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{block, pool, run};
    use super::*;
    use proptest::prelude::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    fn seal(extra: &str) -> Seal {
        Seal::open(Args::parse("seal", &format!("key={KEY}{extra}")).unwrap()).unwrap()
    }
    fn open() -> Unseal {
        Unseal::open(Args::parse("open", &format!("key={KEY}")).unwrap()).unwrap()
    }

    fn sealed(data: &[u8], frame: usize) -> Vec<u8> {
        let pool = pool();
        let mut s = seal(&format!(",frame={frame}"));
        run(&mut s, &pool, [block(&pool, data, 1)]).unwrap()
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn round_trip_cut_anywhere() {
        let pool = pool();
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
        let wire = sealed(&data, 4096);
        let blocks: Vec<Msg> = wire.chunks(1000).map(|c| block(&pool, c, 3)).collect();
        let mut o = open();
        assert_eq!(run(&mut o, &pool, blocks).unwrap(), data);
        assert!(o.stats().contains(&("rejected", 0)));
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn empty_stream_still_authenticated() {
        let pool = pool();
        let wire = sealed(&[], 16);
        assert_eq!(wire.len(), HEADER + TAG);
        let mut o = open();
        assert_eq!(run(&mut o, &pool, [block(&pool, &wire, 1)]).unwrap(), b"");
        let mut o = open();
        assert!(run(&mut o, &pool, []).is_err(), "no final frame");
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn tamper_reorder_truncate_and_keys() {
        let pool = pool();
        let data = vec![0x42u8; 300];
        let wire = sealed(&data, 100); // 3 data frames + final
        let f = HEADER + 100 + TAG;
        assert_eq!(wire.len(), 3 * f + HEADER + TAG);

        for i in [0, 5, HEADER + 3, f - 1, 2 * f + 20, wire.len() - 1] {
            let mut bad = wire.clone();
            bad[i] ^= 1;
            let e = run(&mut open(), &pool, [block(&pool, &bad, 2)]).unwrap_err();
            assert!(matches!(e, ModuleError::BadInput { .. }), "byte {i}: {e}");
        }
        // Swap frames 1 and 2.
        let mut swapped = wire[..f].to_vec();
        swapped.extend_from_slice(&wire[2 * f..3 * f]);
        swapped.extend_from_slice(&wire[f..2 * f]);
        swapped.extend_from_slice(&wire[3 * f..]);
        let e = run(&mut open(), &pool, [block(&pool, &swapped, 1)]).unwrap_err();
        assert!(e.to_string().contains("out of order"), "{e}");
        // Drop the first frame; drop the final frame; trailing garbage.
        let e = run(&mut open(), &pool, [block(&pool, &wire[f..], 1)]).unwrap_err();
        assert!(e.to_string().contains("first frame"), "{e}");
        let e = run(&mut open(), &pool, [block(&pool, &wire[..3 * f], 1)]).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let mut extra = wire.clone();
        extra.push(0);
        let e = run(&mut open(), &pool, [block(&pool, &extra, 1)]).unwrap_err();
        assert!(e.to_string().contains("after the final"), "{e}");
        // A wrong key.
        let other = Unseal::open(Args::parse("open", &format!("key={}", "ff".repeat(32))).unwrap())
            .unwrap();
        let mut other = other;
        assert!(run(&mut other, &pool, [block(&pool, &wire, 1)]).is_err());
        // An oversized length is refused before buffering.
        let mut huge = wire.clone();
        huge[..4].copy_from_slice(&(MAX_FRAME as u32 | FIRST).to_le_bytes());
        let e = run(&mut open(), &pool, [block(&pool, &huge[..HEADER], 1)]).unwrap_err();
        assert!(e.to_string().contains("exceeds max"), "{e}");
    }

    #[test]
    fn arguments_parse_without_reading_the_key_file() {
        let a = SealArgs::parse(Args::parse("seal", "keyfile=/nonexistent,frame=4K").unwrap());
        assert_eq!(
            a.unwrap(),
            SealArgs {
                key: KeyArg::File("/nonexistent".into()),
                frame: 4096
            }
        );
        let a = OpenArgs::parse(Args::parse("open", &format!("key={KEY}")).unwrap()).unwrap();
        assert_eq!(a.max, 16 << 20);
        assert_eq!(format!("{:?}", a.key), "Hex(..)", "no key in Debug");
        for bad in [
            "key=00,keyfile=x",
            "keyfile=x,frame=0",
            "keyfile=x,frame=1G",
        ] {
            assert!(
                SealArgs::parse(Args::parse("seal", bad).unwrap()).is_err(),
                "{bad}"
            );
        }
        assert!(OpenArgs::parse(Args::parse("open", "keyfile=x,max=2G").unwrap()).is_err());
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "pool: its buffers are memfd regions, not modelled by Miri"
    )]
    fn key_arguments() {
        let e = Seal::open(Args::parse("seal", "").unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("key=HEX64"), "{e}");
        assert!(Seal::open(Args::parse("seal", "key=abcd").unwrap()).is_err());
        let dir = std::env::temp_dir().join(format!("zcio-seal-key-{}", std::process::id()));
        std::fs::write(&dir, format!("{KEY}\n")).unwrap();
        let mut s = Seal::open(Args::parse("seal", &format!("keyfile={}", dir.display())).unwrap())
            .unwrap();
        let pool = pool();
        let wire = run(&mut s, &pool, [block(&pool, b"hi", 1)]).unwrap();
        assert_eq!(
            run(&mut open(), &pool, [block(&pool, &wire, 1)]).unwrap(),
            b"hi"
        );
        std::fs::write(&dir, [7u8; 32]).unwrap();
        Seal::open(Args::parse("seal", &format!("keyfile={}", dir.display())).unwrap()).unwrap();
        std::fs::remove_file(&dir).unwrap();
        assert!(
            Seal::open(Args::parse("seal", &format!("keyfile={}", dir.display())).unwrap())
                .is_err()
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        #[cfg_attr(miri, ignore = "pool: its buffers are memfd regions, not modelled by Miri")]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400), cut in 1usize..50) {
            let pool = pool();
            let blocks: Vec<Msg> = data.chunks(cut).map(|c| block(&pool, c, 1)).collect();
            prop_assert!(run(&mut open(), &pool, blocks).is_err());
        }
    }
}
