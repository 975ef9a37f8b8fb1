//! The two sides of one measurement and the protocol between them.
//!
//! Data messages carry one stamp per 4 KiB of the buffer: a `u64` at
//! offsets 0, 4096, … holding `seq << 24 | page` ([`stamp`], [`check`]).
//! Control messages end a phase: 8 bytes by copy over zcio (a whole
//! message whose first word is the control word over the byte streams).
//! The sender ([`drive`]) streams, ends the stream with [`END_STREAM`] and
//! waits for the receiver's count (so the clock stops when the receiver
//! has taken every message), then ping-pongs: each message is answered by
//! its sequence number, 8 bytes by copy in the reverse direction. The
//! receiver ([`serve`]) checks every stamp of every message.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zcio::semantics::{ArenaBuf, OwnedBuf, SemanticConfig, SemanticEndpoint, Semantics};
use zcio::{Channel, ChannelConfig};

use super::{Line, RxReport};
use crate::clock::mono_ns;
use crate::cpu::Window;

/// Stamp spacing (the page size the stamps assume).
pub const PAGE: usize = 4096;
/// Control word: end of the stream phase.
pub const END_STREAM: u64 = u64::MAX - 1;
/// Control word: end of the ping-pong phase (and of the measurement).
pub const END_PING: u64 = u64::MAX - 2;
/// Most ping-pong arrivals the receiver reports (the sender measures at
/// most `ping_max` round trips; this bounds the report of a confused one).
const MAX_ARRIVALS: usize = 1 << 17;

/// The stamp of page `page` of message `seq`.
pub fn stamp_word(seq: u64, page: usize) -> u64 {
    (seq << 24) | page as u64
}

/// Write the stamps of message `seq` into `buf`.
pub fn stamp(buf: &mut [u8], seq: u64) {
    let mut off = 0;
    while off + 8 <= buf.len() {
        buf[off..off + 8].copy_from_slice(&stamp_word(seq, off / PAGE).to_le_bytes());
        off += PAGE;
    }
}

/// Check every stamp of message `seq` in `buf`.
pub fn check(buf: &[u8], seq: u64) -> Result<(), String> {
    let mut off = 0;
    while off + 8 <= buf.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[off..off + 8]);
        let got = u64::from_le_bytes(w);
        let want = stamp_word(seq, off / PAGE);
        if got != want {
            return Err(format!(
                "integrity: message {seq}, byte {off}: stamp {got:#x}, expected {want:#x} \
                 (message {}, page {})",
                got >> 24,
                got & 0xff_ffff
            ));
        }
        off += PAGE;
    }
    Ok(())
}

/// `CLOCK_MONOTONIC` (ns) when `timed` (the ping-pong), else 0: the
/// stream reads no clock per message.
pub fn clock(timed: bool) -> u64 {
    if timed {
        mono_ns()
    } else {
        0
    }
}

/// [`stamp`], and the nanoseconds it took when `timed` (the
/// application's work, which the one-way latency leaves out).
pub fn stamp_timed(buf: &mut [u8], seq: u64, timed: bool) -> u64 {
    let t = clock(timed);
    stamp(buf, seq);
    clock(timed).saturating_sub(t)
}

/// [`check`], and the nanoseconds it took when `timed`.
pub fn check_timed(buf: &[u8], seq: u64, timed: bool) -> Result<u64, String> {
    let t = clock(timed);
    check(buf, seq)?;
    Ok(clock(timed).saturating_sub(t))
}

/// The first word of `buf` if it is a control word.
pub fn control_word(buf: &[u8]) -> Option<u64> {
    let w = u64::from_le_bytes(buf.get(..8)?.try_into().ok()?);
    (w >= END_PING).then_some(w)
}

/// The sender's side of a transport.
pub trait Tx {
    /// Output data message `seq` (stamped). When `timed`, returns when
    /// the transfer began on `CLOCK_MONOTONIC` (ns): just before the
    /// output call, or before the allocation for system-allocated
    /// buffers, with the time spent stamping added (the application's
    /// work is not the transfer's); else 0.
    fn send(&mut self, seq: u64, timed: bool) -> Result<u64, String>;
    /// Output the control word `w`.
    fn send_ctl(&mut self, w: u64) -> Result<(), String>;
    /// Wait for the receiver's 8-byte answer.
    fn recv_word(&mut self) -> Result<u64, String>;
}

/// What the receiver got.
pub enum Got {
    /// Data message (its stamps checked): the nanoseconds the check took
    /// if timed (the application's work, not the transfer's), else 0.
    Data(u64),
    /// A control word.
    Ctl(u64),
}

/// The receiver's side of a transport.
pub trait Rx {
    /// Input the next message, expected to be data message `seq`; checks
    /// its stamps (timing the check when `timed`).
    fn recv(&mut self, seq: u64, timed: bool) -> Result<Got, String>;
    /// Answer with 8 bytes.
    fn send_word(&mut self, w: u64) -> Result<(), String>;
}

/// Bounds of the two phases.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct Phases {
    /// Unmeasured stream messages first.
    pub stream_warmup: u64,
    /// Measured stream messages (at most).
    pub stream_max: u64,
    /// Bound on the measured stream's time, ms.
    pub stream_ms: u64,
    /// Unmeasured round trips first.
    pub ping_warmup: u64,
    /// Measured round trips (at most).
    pub ping_max: u64,
    /// Bound on the measured round trips' time, ms.
    pub ping_ms: u64,
}

impl Phases {
    /// Warm-ups scaled to the message size (about 8 MiB, 2…50 messages).
    pub fn new(size: usize, o: &super::Options) -> Self {
        let warm = ((8 << 20) / size.max(1)).clamp(2, 50) as u64;
        Self {
            stream_warmup: warm,
            stream_max: o.stream_max,
            stream_ms: o.stream_time.as_millis() as u64,
            ping_warmup: warm.min(20),
            ping_max: o.ping_max,
            ping_ms: o.ping_time.as_millis() as u64,
        }
    }
}

/// What the sender measured.
#[derive(Debug, Clone, Default)]
pub struct TxResult {
    /// Measured stream messages.
    pub msgs: u64,
    /// Wall time of the measured stream, up to the receiver's count.
    pub stream_ns: u64,
    /// The sender's CPU time over the measured stream.
    pub cpu_ns: u64,
    /// Measured round-trip times.
    pub round_trips: Vec<u64>,
    /// Each measured round trip's data message: its sequence number and
    /// when its transfer began ([`Tx::send`]).
    pub sends: Vec<(u64, u64)>,
}

fn past(deadline: Instant, what: &str) -> Result<(), String> {
    if Instant::now() > deadline {
        Err(format!("{what}: the measurement's time bound passed"))
    } else {
        Ok(())
    }
}

/// The sender's two phases.
pub fn drive(tx: &mut dyn Tx, p: &Phases, deadline: Instant) -> Result<TxResult, String> {
    let mut seq = 0u64;
    for _ in 0..p.stream_warmup {
        tx.send(seq, false)?;
        seq += 1;
    }
    let bound = Duration::from_millis(p.stream_ms);
    let start = Instant::now();
    let mut cpu = Window::default();
    cpu.start();
    let mut msgs = 0u64;
    while msgs < p.stream_max && (msgs == 0 || start.elapsed() < bound) {
        tx.send(seq, false)?;
        seq += 1;
        msgs += 1;
        if msgs.is_multiple_of(64) {
            past(deadline, "stream")?;
        }
    }
    tx.send_ctl(END_STREAM)?;
    let count = tx.recv_word()?;
    let stream_ns = start.elapsed().as_nanos() as u64;
    let cpu_ns = cpu.elapsed_ns();
    if count != seq {
        return Err(format!(
            "the receiver counted {count} messages, {seq} were sent"
        ));
    }
    let bound = Duration::from_millis(p.ping_ms);
    let mut rt = Vec::with_capacity(p.ping_max.min(1 << 16) as usize);
    let mut sends = Vec::with_capacity(rt.capacity());
    let mut start = Instant::now();
    for i in 0..p.ping_warmup + p.ping_max {
        if i == p.ping_warmup {
            start = Instant::now();
        } else if i > p.ping_warmup && start.elapsed() >= bound {
            break;
        }
        let t0 = Instant::now();
        let sent_at = tx.send(seq, true)?;
        let w = tx.recv_word()?;
        let t = t0.elapsed().as_nanos() as u64;
        if w != seq {
            return Err(format!("round trip {seq}: answer {w}"));
        }
        if i >= p.ping_warmup {
            rt.push(t);
            sends.push((seq, sent_at));
        }
        seq += 1;
        if i % 64 == 0 {
            past(deadline, "ping-pong")?;
        }
    }
    tx.send_ctl(END_PING)?;
    Ok(TxResult {
        msgs,
        stream_ns,
        cpu_ns,
        round_trips: rt,
        sends,
    })
}

/// The one-way latencies (ns) of the round trips both sides timed: from
/// the sender's clock when the transfer began ([`Tx::send`]) to the
/// receiver's once input (and, for system-allocated buffers, `free`)
/// returned, less its stamp check (`CLOCK_MONOTONIC` is system-wide, so
/// the two processes' readings compare). The 8-byte answer is not part
/// of it.
pub fn one_way(sends: &[(u64, u64)], arrivals: &[(u64, u64)]) -> Vec<u64> {
    let mut out = Vec::with_capacity(sends.len());
    let mut a = arrivals.iter().peekable();
    for &(seq, t0) in sends {
        while a.next_if(|x| x.0 < seq).is_some() {}
        if let Some(&&(s, t1)) = a.peek() {
            if s == seq {
                out.push(t1.saturating_sub(t0));
            }
        }
    }
    out
}

/// The receiver's two phases.
pub fn serve(rx: &mut dyn Rx, stream_warmup: u64, deadline: Instant) -> Result<RxReport, String> {
    let mut seq = 0u64;
    let mut cpu = Window::default();
    let mut streaming = true;
    let mut rep = RxReport::default();
    loop {
        if streaming && seq == stream_warmup {
            cpu.start();
        }
        match rx.recv(seq, !streaming)? {
            Got::Data(check_ns) => {
                if !streaming {
                    if rep.arrivals.len() < MAX_ARRIVALS {
                        rep.arrivals.push((seq, mono_ns().saturating_sub(check_ns)));
                    }
                    rx.send_word(seq)?;
                }
                seq += 1;
            }
            Got::Ctl(END_STREAM) if streaming => {
                rep.cpu_ns = cpu.elapsed_ns();
                rep.msgs = seq.saturating_sub(stream_warmup);
                streaming = false;
                rx.send_word(seq)?;
            }
            Got::Ctl(END_PING) if !streaming => break,
            Got::Ctl(w) => return Err(format!("unexpected control word {w:#x} at {seq}")),
        }
        if seq.is_multiple_of(64) {
            past(deadline, "receive")?;
        }
    }
    rep.data_msgs = seq;
    Ok(rep)
}

/// Everything the receiver needs.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub struct Spec {
    /// The line's name ([`Line::name`]).
    pub line: String,
    /// Message size.
    pub size: usize,
    /// Page offset of the receive buffers.
    pub rx_offset: usize,
    /// zcio: the listener's socket path.
    pub path: Option<String>,
    /// Byte streams: the inherited fd to read messages from.
    pub rfd: RawFd,
    /// Byte streams: the inherited fd to write answers to.
    pub wfd: RawFd,
    /// Unmeasured stream messages first.
    pub stream_warmup: u64,
    /// CPU to pin to.
    pub cpu: Option<usize>,
    /// Bound on everything, ms.
    pub timeout_ms: u64,
}

/// The receiver's whole run (in the child).
pub fn receive(spec: &Spec) -> Result<RxReport, String> {
    let deadline = Instant::now() + Duration::from_millis(spec.timeout_ms);
    let line = Line::parse(&spec.line)?;
    match line {
        Line::Pipe | Line::Socket => {
            let mut rx = super::baseline::StreamRx::new(spec.rfd, spec.wfd, spec.size)?;
            serve(&mut rx, spec.stream_warmup, deadline)
        }
        Line::Memcpy => Err("memcpy has no receiver process".into()),
        _ => {
            let path = spec.path.as_deref().ok_or("no socket path")?;
            let timeout = Duration::from_millis(spec.timeout_ms);
            let chan = connect_retry(path, timeout.min(Duration::from_secs(10)))?;
            if line.trusted() {
                // The peer is this benchmark's own sender process (the
                // coordinator that spawned us and listens at `path`),
                // which outputs through zcio's endpoint: lent pages are
                // write-protected (TCOW) or hidden until we return them,
                // and it never writes a buffer a share line has in flight
                // (it waits for `ArenaBuf::in_flight` to clear).
                // SAFETY: as argued just above.
                unsafe { chan.trust_peer() };
            }
            let (_, input) = line.semantics().ok_or("not a zcio line")?;
            let ep = SemanticEndpoint::new(chan, endpoint_config(line, spec.size, false))
                .map_err(|e| format!("receiver endpoint: {e}"))?;
            let mut rx = ZcioRx::new(ep, input, spec.size, spec.rx_offset)?;
            let mut rep = serve(&mut rx, spec.stream_warmup, deadline)?;
            let st = rx.ep.stats();
            rep.swapped_pages = st.in_swapped_pages;
            rep.copied_bytes = st.in_copied_bytes;
            Ok(rep)
        }
    }
}

/// The channel configuration of both ends: waits bounded by the
/// measurement's bound.
pub fn channel_config() -> ChannelConfig {
    ChannelConfig {
        send_timeout: Duration::from_secs(20),
        recv_timeout: Duration::from_secs(20),
        ..ChannelConfig::default()
    }
}

fn connect_retry(path: &str, timeout: Duration) -> Result<Channel, String> {
    let start = Instant::now();
    loop {
        match Channel::connect(path, channel_config()) {
            Ok(c) => return Ok(c),
            Err(e) if start.elapsed() > timeout => return Err(format!("connect {path}: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// Pages of `size` bytes at a page offset of at most one page.
fn pages(size: usize) -> usize {
    size.div_ceil(PAGE) + 1
}

/// The endpoint configuration of a side of `line` (arena room for the
/// rotating buffers, the TCOW spares and what the system-allocated lines
/// keep in flight).
pub fn endpoint_config(line: Line, size: usize, sender: bool) -> SemanticConfig {
    let (output, input) = line
        .semantics()
        .unwrap_or((Semantics::Copy, Semantics::Copy));
    let bufs = if !line.app_allocated() {
        (max_ahead(size) + 8).min(64)
    } else if sender {
        8
    } else {
        4
    };
    SemanticConfig {
        output,
        input,
        arena_capacity: (bufs * pages(size) * PAGE).max(1 << 20),
        hello_timeout: Duration::from_secs(10),
        ..SemanticConfig::default()
    }
}

/// The most slices (the channel's ledger: about one per copied message,
/// two or more per lent one) the sender lets the receiver hold before it
/// waits for notices (until half of them came back): about 4 MiB, 8 …
/// 512 slices. Bounds the memory in flight without starving the receiver
/// of short messages. A deeper queue (32 MiB, as this bench had first)
/// turns into a steady state of its own: buffers wait in it long enough
/// to leave the caches, both copies then run from memory (up to 4× slower
/// at 256 KiB), and the receiver never catches up — runs then swing
/// between the two states.
pub fn max_ahead(size: usize) -> usize {
    ((4 << 20) / size.max(1)).clamp(8, 512)
}

/// Rotating sender buffers (application-allocated lines).
pub const TX_BUFS: usize = 4;
/// Rotating receiver buffers (application-allocated lines).
pub const RX_BUFS: usize = 2;

/// Wait for returned pages: reclaim notices, spin briefly, then sleep in
/// short steps; `ready` is checked after each reclaim.
fn wait_until(
    chan: &Channel,
    deadline: Instant,
    what: &str,
    mut ready: impl FnMut() -> bool,
) -> Result<(), String> {
    let mut i = 0u32;
    loop {
        chan.reclaim();
        if ready() {
            return Ok(());
        }
        i += 1;
        if i < 200 {
            std::hint::spin_loop();
        } else if i < 2000 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(20));
            if Instant::now() > deadline {
                return Err(format!(
                    "{what}: still held by the receiver at the time bound"
                ));
            }
        }
    }
}

/// The zcio sender.
pub struct ZcioTx {
    /// The endpoint (output semantics = the line's sender semantics).
    pub ep: SemanticEndpoint,
    line: Line,
    size: usize,
    bufs: Vec<ArenaBuf>,
    deadline: Instant,
}

impl ZcioTx {
    /// Buffers at page offset 0 in the endpoint's arena.
    pub fn new(
        ep: SemanticEndpoint,
        line: Line,
        size: usize,
        deadline: Instant,
    ) -> Result<Self, String> {
        let n = match line {
            Line::Rewrite => 1,
            l if l.app_allocated() => TX_BUFS,
            _ => 0,
        };
        let mut bufs = Vec::with_capacity(n);
        for _ in 0..n {
            let mut b = ep
                .arena()
                .alloc_at(size, 0)
                .map_err(|e| format!("sender buffer: {e}"))?;
            b.fill(0);
            bufs.push(b);
        }
        if line == Line::Rewrite {
            stamp(&mut bufs[0], 0);
        }
        Ok(Self {
            ep,
            line,
            size,
            bufs,
            deadline,
        })
    }

    fn alloc(&self) -> Result<OwnedBuf, String> {
        let mut tries = 0u32;
        loop {
            match self.ep.alloc(self.size) {
                Ok(b) => return Ok(b),
                Err(e) => {
                    tries += 1;
                    self.ep.channel().reclaim();
                    if Instant::now() > self.deadline {
                        return Err(format!("alloc after {tries} tries: {e}"));
                    }
                    if tries < 2000 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }
            }
        }
    }
}

impl Tx for ZcioTx {
    fn send(&mut self, seq: u64, timed: bool) -> Result<u64, String> {
        let chan = self.ep.channel();
        if self.line == Line::Rewrite {
            // The rewritten buffer's pages move (TCOW) and spread over the
            // arena's file, so a message may be many slices: bound the
            // pages in flight instead (the receiver keeps the last
            // `RX_BUFS` messages' pages swapped in).
            let limit = (RX_BUFS as u64 + 2) * pages(self.size) as u64;
            let arena = self.ep.arena();
            if arena.stats().pages_in_flight > limit {
                wait_until(chan, self.deadline, "pages", || {
                    arena.stats().pages_in_flight <= limit
                })?;
            }
        } else {
            let limit = max_ahead(self.size);
            if chan.stats().held_by_peer > limit {
                wait_until(chan, self.deadline, "messages", || {
                    chan.stats().held_by_peer <= limit / 2
                })?;
            }
        }
        if !self.line.app_allocated() {
            let t = clock(timed);
            let mut b = self.alloc()?;
            let stamping = stamp_timed(&mut b, seq, timed);
            self.ep
                .output_owned(b)
                .map_err(|e| format!("output_owned #{seq}: {e}"))?;
            return Ok(t + stamping);
        }
        if self.line == Line::Rewrite {
            // Stamped for `seq` already (at set-up or right after the
            // previous output): output, then rewrite at once.
            let b = &mut self.bufs[0];
            let t = clock(timed);
            self.ep
                .output(b)
                .map_err(|e| format!("output #{seq}: {e}"))?;
            stamp(b, seq + 1);
            return Ok(t);
        }
        let b = &mut self.bufs[seq as usize % TX_BUFS];
        if b.in_flight() {
            let deadline = self.deadline;
            wait_until(self.ep.channel(), deadline, "sender buffer", || {
                !b.in_flight()
            })?;
        }
        stamp(b, seq);
        let t = clock(timed);
        self.ep
            .output(b)
            .map_err(|e| format!("output #{seq}: {e}"))?;
        Ok(t)
    }

    fn send_ctl(&mut self, w: u64) -> Result<(), String> {
        self.ep
            .output_with(&w.to_le_bytes(), Semantics::Copy)
            .map(|_| ())
            .map_err(|e| format!("output control: {e}"))
    }

    fn recv_word(&mut self) -> Result<u64, String> {
        let mut w = [0u8; 8];
        let got = self
            .ep
            .input_with(&mut w, Semantics::Copy)
            .map_err(|e| format!("input answer: {e}"))?;
        if got.len != 8 {
            return Err(format!("answer of {} bytes", got.len));
        }
        Ok(u64::from_le_bytes(w))
    }
}

/// The zcio receiver.
pub struct ZcioRx {
    ep: SemanticEndpoint,
    owned: bool,
    size: usize,
    bufs: Vec<ArenaBuf>,
}

impl ZcioRx {
    fn new(
        ep: SemanticEndpoint,
        input: Semantics,
        size: usize,
        offset: usize,
    ) -> Result<Self, String> {
        let owned = !input.application_allocated();
        let mut bufs = Vec::new();
        if !owned {
            for _ in 0..RX_BUFS {
                let mut b = ep
                    .arena()
                    .alloc_at(size, offset)
                    .map_err(|e| format!("receiver buffer: {e}"))?;
                b.fill(0);
                bufs.push(b);
            }
        }
        Ok(Self {
            ep,
            owned,
            size,
            bufs,
        })
    }
}

impl Rx for ZcioRx {
    fn recv(&mut self, seq: u64, timed: bool) -> Result<Got, String> {
        if self.owned {
            let b = self
                .ep
                .input_owned()
                .map_err(|e| format!("input_owned #{seq}: {e}"))?;
            let r = if b.len() == 8 {
                Ok(Got::Ctl(u64::from_le_bytes(
                    b[..8].try_into().map_err(|_| "short")?,
                )))
            } else if b.len() != self.size {
                Err(format!("message {seq}: {} bytes", b.len()))
            } else {
                check_timed(&b, seq, timed).map(Got::Data)
            };
            self.ep.free(b);
            return r;
        }
        let b = &mut self.bufs[seq as usize % RX_BUFS];
        let got = self.ep.input(b).map_err(|e| format!("input #{seq}: {e}"))?;
        if got.len == 8 {
            return Ok(Got::Ctl(u64::from_le_bytes(
                b[..8].try_into().map_err(|_| "short")?,
            )));
        }
        if got.len != self.size {
            return Err(format!("message {seq}: {} bytes", got.len));
        }
        check_timed(b, seq, timed).map(Got::Data)
    }

    fn send_word(&mut self, w: u64) -> Result<(), String> {
        self.ep
            .output_with(&w.to_le_bytes(), Semantics::Copy)
            .map(|_| ())
            .map_err(|e| format!("output answer: {e}"))
    }
}
