//! `zcio echo ring:NAME`: attach to a ring as a consumer and print its
//! blocks, as text or a hex dump, a bounded number of them and a bounded
//! part of each. It is a reader like any other: on a lossless ring the
//! producer waits for it as for every reader, and on an overwriting ring
//! it may miss blocks.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use zcio::ring::{Consumer, OpenError, ReadError, RingMap, Start};

use crate::ring::open_error;

#[derive(Args, Debug)]
pub struct EchoArgs {
    /// The ring: `ring:NAME` (or just NAME).
    pub ring: String,
    /// Print this many blocks, then exit (0: until the end of the stream).
    #[arg(long, short = 'n', default_value_t = 10, value_parser = zcio_fmt::parse_count::<u64>)]
    pub count: u64,
    /// Print at most this many bytes of each block (the rest is counted).
    #[arg(long, default_value = "256", value_parser = zcio_fmt::parse_size)]
    pub max_bytes: usize,
    /// How to print a block: text, hex, or auto (text when the shown part
    /// is printable UTF-8).
    #[arg(long, value_enum, default_value_t = Shape::Auto)]
    pub format: Shape,
    /// Start at the oldest block the ring still holds instead of the newest.
    #[arg(long)]
    pub from_oldest: bool,
    /// Give up after this long without a block (1s, 500ms; default: wait).
    #[arg(long, value_parser = crate::objects::parse_positive_duration)]
    pub timeout: Option<Duration>,
}

/// How a block is printed.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Shape {
    /// Text when printable UTF-8, else a hex dump.
    Auto,
    /// Text (invalid UTF-8 shown as U+FFFD).
    Text,
    /// A hex dump with offsets and ASCII.
    Hex,
}

/// How long one wait for a block lasts before the timeout is checked.
const POLL: Duration = Duration::from_millis(100);

/// Run `zcio echo`; `Ok(status)` is the exit status.
pub fn run(a: EchoArgs) -> Result<i32> {
    let name = a.ring.strip_prefix("ring:").unwrap_or(&a.ring);
    let map = match RingMap::open(name, true) {
        Ok(m) => m,
        Err(OpenError::NotFound(_)) => {
            bail!("no ring named {name:?} (`zcio ring ls` lists the rings; `zcio ls` every object)")
        }
        Err(e) => return Err(open_error(name, e)),
    };
    let start = if a.from_oldest {
        Start::Oldest
    } else {
        Start::Newest
    };
    let mut cons = Consumer::attach(map, start)
        .with_context(|| format!("cannot attach to ring {name} as a reader"))?;
    let mut buf = vec![0u8; 64 << 10];
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut shown = 0u64;
    let mut last = Instant::now();
    while a.count == 0 || shown < a.count {
        match cons.read_timeout(&mut buf, POLL) {
            Ok(0) => {
                writeln!(out, "(end of stream)")?;
                break;
            }
            Ok(n) => {
                let pos = cons.position();
                write_block(&mut out, shown, pos, &buf[..n], a.max_bytes, a.format)?;
                out.flush()?;
                shown += 1;
                last = Instant::now();
            }
            Err(ReadError::BufferTooSmall { need, .. }) => buf.resize(need, 0),
            Err(ReadError::TimedOut | ReadError::WouldBlock) => {
                if a.timeout.is_some_and(|t| last.elapsed() >= t) {
                    bail!(
                        "no block on ring {name} for {:.1} s (--timeout)",
                        last.elapsed().as_secs_f64()
                    );
                }
            }
            Err(ReadError::Lapped) => writeln!(
                out,
                "(lapped: blocks were overwritten before they were read)"
            )?,
            Err(e) => return Err(e).with_context(|| format!("read ring {name}")),
        }
    }
    // What this reader missed under the ring's overflow policy.
    let st = cons.stats();
    if st.skipped_blocks > 0 || st.drops > 0 {
        eprintln!(
            "zcio echo: missed blocks: lapped {} time(s), {} dropped by the producer (the ring's overflow policy)",
            st.skipped_blocks, st.drops
        );
    }
    Ok(0)
}

fn write_block(
    out: &mut impl Write,
    i: u64,
    pos: u64,
    b: &[u8],
    max: usize,
    shape: Shape,
) -> std::io::Result<()> {
    let part = &b[..b.len().min(max)];
    let text = match shape {
        Shape::Hex => None,
        Shape::Text => Some(String::from_utf8_lossy(part).into_owned()),
        Shape::Auto => printable(part).map(str::to_owned),
    };
    writeln!(
        out,
        "-- block {i}: {}, up to position {pos}",
        zcio_fmt::bytes_u64(b.len() as u64)
    )?;
    match text {
        Some(t) => {
            out.write_all(t.as_bytes())?;
            if !t.ends_with('\n') {
                writeln!(out)?;
            }
        }
        None => hex(out, part)?,
    }
    if b.len() > part.len() {
        writeln!(out, "… {} more bytes", b.len() - part.len())?;
    }
    Ok(())
}

/// `b` as text if it is UTF-8 without control characters other than
/// tab, newline and carriage return (a cut in the middle of a character at
/// the end is allowed).
fn printable(b: &[u8]) -> Option<&str> {
    let s = match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) if e.error_len().is_none() && e.valid_up_to() + 4 > b.len() => {
            std::str::from_utf8(&b[..e.valid_up_to()]).ok()?
        }
        Err(_) => return None,
    };
    s.chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\r'))
        .then_some(s)
}

/// A hex dump: offset, 16 bytes in hex, the printable ASCII.
fn hex(out: &mut impl Write, b: &[u8]) -> std::io::Result<()> {
    for (k, row) in b.chunks(16).enumerate() {
        let mut h = String::with_capacity(48);
        for (j, x) in row.iter().enumerate() {
            if j == 8 {
                h.push(' ');
            }
            h += &format!("{x:02x} ");
        }
        let ascii: String = row
            .iter()
            .map(|&x| {
                if x.is_ascii_graphic() || x == b' ' {
                    x as char
                } else {
                    '.'
                }
            })
            .collect();
        writeln!(out, "{:08x}  {h:<49} |{ascii}|", k * 16)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(b: &[u8], max: usize, shape: Shape) -> String {
        let mut v = Vec::new();
        write_block(&mut v, 0, 7, b, max, shape).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn text_hex_and_the_limit() {
        let t = shown(b"hello\n", 256, Shape::Auto);
        assert_eq!(t, "-- block 0: 6 B, up to position 7\nhello\n");
        let h = shown(&[0, 1, 2, 0x41], 256, Shape::Auto);
        assert!(
            h.contains("00000000  00 01 02 41") && h.contains("|...A|"),
            "{h}"
        );
        let cut = shown(&[b'a'; 300], 256, Shape::Text);
        assert!(cut.ends_with("… 44 more bytes\n"), "{cut}");
        let forced = shown(b"hi", 256, Shape::Hex);
        assert!(forced.contains("68 69"), "{forced}");
        // A character cut at the limit is still text.
        assert!(printable("é".as_bytes().get(..1).unwrap()).is_some());
        assert!(printable(b"a\x1bb").is_none());
    }
}
