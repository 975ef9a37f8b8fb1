//! Child-side byte-stream producers and consumers of parts (a) and (b): a
//! continuous zcio ring (write / read, peek, peek + touch) and Linux pipes
//! (write, tee to several pipes, read).
//!
//! Every producer writes `volume / call` calls of `call` bytes from one
//! pre-filled buffer whose first 8 bytes carry the call's sequence number;
//! every consumer checks that it got exactly `volume` bytes and compares
//! sampled sequence words (see [`super::check::Verifier`]).

use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zcio::ring::{Consumer, Producer};

use super::check::{end_of_stream, pattern, stamp, Cpu, Report, Side, Verifier, Who};
use crate::clock::mono_ns;
use crate::fds::take_fd;

/// How a ring consumer takes the data.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadMode {
    /// `Consumer::read` into a private call-size buffer (a copy).
    Copy,
    /// `Consumer::peek` then `release`, reading no payload (only a sampled
    /// sequence word every 64 KiB).
    Peek,
    /// `peek`, read one u64 per 64-byte line, `release`.
    PeekTouch,
}

/// Bytes between two sampled sequence-word checks of consumers that do not
/// read the payload anyway.
pub const SAMPLE_BYTES: usize = 64 << 10;

/// Check every how many calls, for a consumer in `mode`.
fn every(mode: ReadMode, call: usize) -> u64 {
    match mode {
        ReadMode::Copy | ReadMode::PeekTouch => 1,
        ReadMode::Peek => (SAMPLE_BYTES / call).max(1) as u64,
    }
}

/// Produce the stream: `calls` calls of `call` bytes through `write`.
fn produce(
    call: usize,
    volume: u64,
    mut write: impl FnMut(&[u8], u64) -> Result<(), String>,
) -> Result<Report, String> {
    let calls = volume / call as u64;
    let mut src = pattern(call);
    let cpu0 = Cpu::now(Who::Process);
    let first_ns = mono_ns();
    for k in 0..calls {
        stamp(&mut src, k);
        write(&src, k)?;
    }
    let last_ns = mono_ns();
    let (user_ns, sys_ns) = Cpu::now(Who::Process).since(cpu0);
    Ok(Report::producer(
        calls * call as u64,
        calls,
        call as u64,
        (first_ns, last_ns),
        (user_ns, sys_ns),
    ))
}

/// Book-keeping of a consumer: timing, counting, verification. Time and
/// CPU run from the first item received to the last byte (waiting for the
/// producer to start and for end of stream are not counted).
struct Sink {
    volume: u64,
    v: Verifier,
    items: u64,
    first: (u64, u64),
    last_ns: u64,
    cpu0: Cpu,
    cpu: (u64, u64),
}

impl Sink {
    fn new(call: usize, every: u64, volume: u64) -> Self {
        Self {
            volume,
            v: Verifier::new(call, every),
            items: 0,
            first: (0, 0),
            last_ns: 0,
            cpu0: Cpu::default(),
            cpu: (0, 0),
        }
    }

    /// Bytes still expected.
    fn missing(&self) -> u64 {
        self.volume.saturating_sub(self.v.offset())
    }

    /// Account for `data` just received (verified sparsely).
    fn take(&mut self, data: zcio::View<'_>) -> Result<(), String> {
        if self.items == 0 {
            self.first = (mono_ns(), data.len() as u64);
            self.cpu0 = Cpu::now(Who::Process);
        }
        self.items += 1;
        self.v.feed(data)?;
        let got = self.v.offset();
        if got >= self.volume {
            if got > self.volume {
                return Err(format!(
                    "received {got} bytes, more than the {} sent",
                    self.volume
                ));
            }
            self.last_ns = mono_ns();
            self.cpu = Cpu::now(Who::Process).since(self.cpu0);
        }
        Ok(())
    }

    /// The stream ended (`clean`: see [`Report::clean_end`]).
    fn finish(self, clean: bool) -> Result<Report, String> {
        let got = self.v.offset();
        if got != self.volume {
            return Err(format!(
                "end of stream after {got} of {} bytes",
                self.volume
            ));
        }
        Ok(Report {
            side: Side::Consumer,
            bytes: got,
            items: self.items,
            first_bytes: self.first.1,
            first_ns: self.first.0,
            last_ns: self.last_ns,
            user_ns: self.cpu.0,
            sys_ns: self.cpu.1,
            checked: self.v.checked(),
            clean_end: clean,
        })
    }
}

/// Producer of a continuous ring: wait for `consumers`, then `write` calls.
pub fn ring_writer(
    ring: &str,
    call: usize,
    volume: u64,
    consumers: usize,
    timeout: Duration,
) -> Result<Report, String> {
    let mut p = Producer::open(ring).map_err(|e| format!("open ring {ring} as producer: {e}"))?;
    let got = p.wait_for_consumers(consumers, timeout);
    if got < consumers {
        return Err(format!(
            "only {got} of {consumers} consumers attached within {timeout:?}"
        ));
    }
    let r = produce(call, volume, |buf, k| match p.write(buf) {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(n) => Err(format!("write #{k}: wrote {n} of {} bytes", buf.len())),
        Err(e) => Err(format!("write #{k}: {e}")),
    })?;
    drop(p); // end of stream for the consumers
    Ok(r)
}

/// Consumer of a continuous ring in `mode`: `volume` bytes, then the end
/// of the stream.
pub fn ring_reader(
    ring: &str,
    call: usize,
    volume: u64,
    mode: ReadMode,
    timeout: Duration,
) -> Result<Report, String> {
    let mut c = Consumer::open(ring).map_err(|e| format!("open ring {ring} as consumer: {e}"))?;
    let mut sink = Sink::new(call, every(mode, call), volume);
    let mut buf = vec![0u8; if mode == ReadMode::Copy { call } else { 0 }];
    while sink.missing() > 0 {
        if mode == ReadMode::Copy {
            let n = c.read(&mut buf).map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                break;
            }
            sink.take(zcio::View::from_slice(&buf[..n]))?;
        } else {
            let Some(p) = c.peek(call).map_err(|e| format!("peek: {e}"))? else {
                break;
            };
            if mode == ReadMode::PeekTouch {
                crate::touch::peek_lines(&p);
            }
            crate::touch::peek_with(&p, |bytes| sink.take(bytes))?;
            p.release().map_err(|e| format!("release: {e}"))?;
        }
    }
    let clean = if sink.missing() == 0 {
        end_of_stream(&mut c, timeout)?
    } else {
        true
    };
    sink.finish(clean)
}

/// Pipe producer: each call is written to every pipe in `fds` in turn (one
/// pipe: a plain writer; several: a tee-style copy).
pub fn pipe_writer(fds: &[RawFd], call: usize, volume: u64) -> Result<Report, String> {
    let mut outs = fds
        .iter()
        .map(|&fd| take_fd(fd))
        .collect::<Result<Vec<_>, _>>()?;
    let r = produce(call, volume, |buf, k| {
        for (i, o) in outs.iter_mut().enumerate() {
            o.write_all(buf)
                .map_err(|e| format!("write #{k} to pipe {i}: {e}"))?;
        }
        Ok(())
    })?;
    drop(outs); // end of stream
    Ok(r)
}

/// Pipe consumer: `read` into a call-size buffer until end of stream.
pub fn pipe_reader(fd: RawFd, call: usize, volume: u64) -> Result<Report, String> {
    let mut input = take_fd(fd)?;
    let mut buf = vec![0u8; call];
    let mut sink = Sink::new(call, 1, volume);
    loop {
        let n = match input.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read: {e}")),
        };
        if n == 0 {
            break;
        }
        sink.take(zcio::View::from_slice(&buf[..n]))?;
    }
    sink.finish(true)
}
