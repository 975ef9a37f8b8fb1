//! The baselines: the same stamped messages through a Linux pipe or a Unix
//! stream socket (written by the sender, read by the receiving child), and
//! one `memcpy` per message in one process.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::side::{
    check, check_timed, clock, control_word, stamp, Got, Phases, Rx, Tx, TxResult, RX_BUFS, TX_BUFS,
};
use crate::fds::take_fd;

/// The sender over a byte stream: `out` carries messages, `back` answers.
pub struct StreamTx {
    out: File,
    back: File,
    bufs: Vec<Vec<u8>>,
    ctl: Vec<u8>,
}

impl StreamTx {
    /// Over `out` (messages) and `back` (answers).
    pub fn new(out: File, back: File, size: usize) -> Self {
        Self {
            out,
            back,
            bufs: vec![vec![0u8; size]; TX_BUFS],
            ctl: vec![0u8; size],
        }
    }
}

impl Tx for StreamTx {
    fn send(&mut self, seq: u64, timed: bool) -> Result<u64, String> {
        let b = &mut self.bufs[seq as usize % TX_BUFS];
        stamp(b, seq);
        let t = clock(timed);
        self.out
            .write_all(b)
            .map_err(|e| format!("write #{seq}: {e}"))?;
        Ok(t)
    }

    fn send_ctl(&mut self, w: u64) -> Result<(), String> {
        self.ctl[..8].copy_from_slice(&w.to_le_bytes());
        self.out
            .write_all(&self.ctl)
            .map_err(|e| format!("write control: {e}"))
    }

    fn recv_word(&mut self) -> Result<u64, String> {
        let mut w = [0u8; 8];
        self.back
            .read_exact(&mut w)
            .map_err(|e| format!("read answer: {e}"))?;
        Ok(u64::from_le_bytes(w))
    }
}

/// The receiver over a byte stream (in the child).
pub struct StreamRx {
    input: File,
    back: File,
    bufs: Vec<Vec<u8>>,
}

impl StreamRx {
    /// Over the inherited `rfd` (messages) and `wfd` (answers; may be the
    /// same socket).
    pub fn new(rfd: RawFd, wfd: RawFd, size: usize) -> Result<Self, String> {
        let input = take_fd(rfd)?;
        let back = if wfd == rfd {
            input.try_clone().map_err(|e| format!("dup: {e}"))?
        } else {
            take_fd(wfd)?
        };
        Ok(Self {
            input,
            back,
            bufs: vec![vec![0u8; size]; RX_BUFS],
        })
    }
}

impl Rx for StreamRx {
    fn recv(&mut self, seq: u64, timed: bool) -> Result<Got, String> {
        let b = &mut self.bufs[seq as usize % RX_BUFS];
        self.input
            .read_exact(b)
            .map_err(|e| format!("read #{seq}: {e}"))?;
        if let Some(w) = control_word(b) {
            return Ok(Got::Ctl(w));
        }
        check_timed(b, seq, timed).map(Got::Data)
    }

    fn send_word(&mut self, w: u64) -> Result<(), String> {
        self.back
            .write_all(&w.to_le_bytes())
            .map_err(|e| format!("write answer: {e}"))
    }
}

/// One process: stamp a sender buffer (rotating 4), `memcpy` it into a
/// receiver buffer (rotating 2), check the stamps. The stream phase gives
/// the throughput; each copy of the second phase is timed alone and
/// reported as a "round trip" of twice its time (so its half is the
/// one-copy latency).
pub fn memcpy(size: usize, p: &Phases) -> Result<TxResult, String> {
    let mut src = vec![vec![0u8; size]; TX_BUFS];
    let mut dst = vec![vec![0u8; size]; RX_BUFS];
    let mut one = |seq: u64| -> Result<(), String> {
        let s = &mut src[seq as usize % TX_BUFS];
        stamp(s, seq);
        let d = &mut dst[seq as usize % RX_BUFS];
        d.copy_from_slice(std::hint::black_box(s));
        check(std::hint::black_box(d), seq)
    };
    let mut seq = 0u64;
    for _ in 0..p.stream_warmup {
        one(seq)?;
        seq += 1;
    }
    let bound = Duration::from_millis(p.stream_ms);
    let start = Instant::now();
    let mut cpu = crate::cpu::Window::default();
    cpu.start();
    let mut msgs = 0u64;
    while msgs < p.stream_max && (msgs == 0 || start.elapsed() < bound) {
        one(seq)?;
        seq += 1;
        msgs += 1;
    }
    let stream_ns = start.elapsed().as_nanos() as u64;
    let cpu_ns = cpu.elapsed_ns();
    let bound = Duration::from_millis(p.ping_ms);
    let mut rt = Vec::new();
    let start = Instant::now();
    for i in 0..p.ping_warmup + p.ping_max {
        if i > p.ping_warmup && start.elapsed() >= bound {
            break;
        }
        let t0 = Instant::now();
        one(seq)?;
        let t = t0.elapsed().as_nanos() as u64;
        if i >= p.ping_warmup {
            rt.push(2 * t);
        }
        seq += 1;
    }
    Ok(TxResult {
        msgs,
        stream_ns,
        cpu_ns,
        round_trips: rt,
        sends: Vec::new(),
    })
}
