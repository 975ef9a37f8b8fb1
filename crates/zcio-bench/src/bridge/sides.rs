//! The sides of `zcio-bench bridge`, each run in a child process: the
//! senders on host A (a ring producer, a Zenoh publisher, a TCP sender) and
//! the receivers on host B (a ring consumer, a Zenoh subscriber, a TCP
//! receiver).
//!
//! Every message is the same for every variant: a fixed pattern with the
//! sequence number and a `CLOCK_MONOTONIC` send stamp in its first 16
//! bytes and the sequence number again in its last 8. A sender takes the
//! stamp just before it hands the message over (each copies the message
//! once into its transport: into the ring block, into the `Vec` it gives
//! Zenoh, into the socket); every receiver reads those three words where
//! the message lies (in place in the ring, in Zenoh's receive buffers, in
//! its own buffer after `read_exact`) and checks them and the length. All
//! senders share one loop ([`send_loop`]), all receivers one tally
//! ([`Tally`]).
//!
//! A measuring receiver prints `start` on stdout when the last warm-up
//! message arrived and `end` when the stream ended (the coordinator reads
//! every process's CPU time at those two marks), then its [`Got`] line.

use std::collections::HashSet;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zcio::ring::{Consumer, Producer, Wait};
use zcio_zenoh::zenoh::bytes::ZBytes;
use zcio_zenoh::zenoh::qos::{CongestionControl, Reliability};
use zcio_zenoh::zenoh::sample::{Sample, SampleKind};
use zcio_zenoh::zenoh::{self, Wait as _};
use zcio_zenoh::SessionOptions;

use super::Spec;
use crate::child::line;
use crate::clock::mono_ns;

/// The sequence number of the Zenoh publisher's last message, which ends
/// the stream (its stamp word holds the number of messages sent).
pub const END: u64 = u64::MAX;

/// What a sender sends.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// Message size.
    pub size: usize,
    /// Unmeasured messages first.
    pub warmup: u64,
    /// Measured messages after them, at most.
    pub count: u64,
    /// Messages per second (`None`: as fast as it can).
    pub rate: Option<f64>,
    /// Stop after this long past the warm-up (ms), even if `count` was not
    /// reached.
    pub budget_ms: u64,
}

/// What a receiver does with what it gets.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct Take {
    /// Message size (every message is checked against it).
    pub size: usize,
    /// Messages before the measured ones.
    pub warmup: u64,
    /// Keep every measured message's one-way latency.
    pub latency: bool,
    /// Print the `start` / `end` marks (the measuring receiver).
    pub marks: bool,
}

/// A side of one measurement.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub enum Task {
    /// A: write every message into ring `ring` as one block, then close it.
    RingProducer {
        /// The ring (the exporter is its consumer).
        ring: String,
        /// What to send.
        load: Load,
    },
    /// B: read ring `ring` (the importer is its producer) in place until
    /// end of stream.
    RingConsumer {
        /// The ring.
        ring: String,
        /// What to check.
        take: Take,
    },
    /// A: a Zenoh session listening on `tcp/IP:0` (prints `ready
    /// ENDPOINTS`), a publisher of `key`; sends once `subs` subscribers'
    /// liveliness tokens are there, and waits for them to go at the end.
    ZenohPub {
        /// The address to listen on.
        ip: String,
        /// The key.
        key: String,
        /// Subscribers to wait for.
        subs: usize,
        /// What to send.
        load: Load,
    },
    /// B: a Zenoh session connecting to `connect` (and listening on
    /// `tcp/IP:0`), a subscriber of `key` taking the samples in its
    /// callback, a liveliness token `KEY/sub/INDEX`.
    ZenohSub {
        /// The publisher's endpoint.
        connect: String,
        /// This host's address (its session listens there).
        ip: String,
        /// The key.
        key: String,
        /// Which subscriber.
        index: usize,
        /// What to check.
        take: Take,
    },
    /// A: connect to `addr`, send length-prefixed frames.
    TcpSend {
        /// The receiver's `IP:PORT`.
        addr: String,
        /// What to send.
        load: Load,
    },
    /// B: listen on `IP:0` (prints `port N`), accept one connection, read
    /// frames until end of stream.
    TcpRecv {
        /// The address to listen on.
        ip: String,
        /// What to check.
        take: Take,
    },
}

/// What a sender reports.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Sent {
    /// Messages sent (warm-up included; not the Zenoh end marker).
    pub sent: u64,
    /// Seconds from the first send to the last.
    pub secs: f64,
}

/// What a receiver reports.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, Default, PartialEq)]
pub struct Got {
    /// Measured messages (after the warm-up).
    pub msgs: u64,
    /// Warm-up messages received.
    pub warm: u64,
    /// ns from the arrival of the last warm-up message to the arrival of
    /// the last measured one.
    pub elapsed_ns: u64,
    /// Messages missing (gaps in the sequence after the first received).
    pub lost: u64,
    /// The first sequence number received.
    pub first_seq: u64,
    /// One-way latency, median (ns; latency runs).
    pub p50_ns: Option<f64>,
    /// 99th percentile.
    pub p99_ns: Option<f64>,
    /// Largest.
    pub max_ns: Option<f64>,
}

/// A message of `size` bytes: a fixed pattern, stamped per message.
pub fn template(size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| (i as u8).wrapping_mul(31) ^ 0x5A)
        .collect()
}

/// Write `seq` and `stamp` into the first 16 bytes of `msg` and `seq`
/// into its last 8.
pub fn stamp(msg: &mut [u8], seq: u64, stamp: u64) {
    let n = msg.len();
    msg[..8].copy_from_slice(&seq.to_le_bytes());
    msg[8..16].copy_from_slice(&stamp.to_le_bytes());
    msg[n - 8..].copy_from_slice(&seq.to_le_bytes());
}

/// The nearest-rank quantile of sorted values (`None` for none).
pub fn quantile(sorted: &[u64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i] as f64)
}

/// Print a mark for the coordinator (stdout is line-buffered: one write).
fn mark(what: &str) {
    println!("{what}");
}

/// What a receiver has taken so far.
pub struct Tally {
    take: Take,
    next: Option<u64>,
    started: Option<u64>,
    last: u64,
    got: Got,
    lat: Vec<u64>,
}

impl Tally {
    /// Nothing taken yet.
    pub fn new(take: Take) -> Self {
        Self {
            take,
            next: None,
            started: None,
            last: 0,
            got: Got::default(),
            lat: Vec::new(),
        }
    }

    /// One message of `len` bytes arrived, its words read: check it and
    /// count it.
    pub fn take(&mut self, len: usize, seq: u64, sent_at: u64, tail: u64) -> Result<(), String> {
        let now = mono_ns();
        if len != self.take.size {
            return Err(format!(
                "message {seq}: {len} bytes, expected {}",
                self.take.size
            ));
        }
        if tail != seq {
            return Err(format!("message {seq}: last word {tail}, expected {seq}"));
        }
        match self.next {
            Some(n) if seq < n => {
                return Err(format!(
                    "message {seq} after {}: out of order or repeated",
                    n - 1
                ))
            }
            Some(n) => self.got.lost += seq - n,
            None => self.got.first_seq = seq,
        }
        self.next = Some(seq + 1);
        if self.started.is_none() {
            // The last warm-up message (or a later one, if the warm-up
            // went missing) starts the measured interval.
            if seq + 1 >= self.take.warmup {
                self.started = Some(now);
                self.last = now;
                if self.take.marks {
                    mark("start");
                }
            } else {
                self.got.warm += 1;
            }
            return Ok(());
        }
        self.got.msgs += 1;
        self.last = now;
        if self.take.latency {
            self.lat.push(now.saturating_sub(sent_at));
        }
        Ok(())
    }

    /// The stream ended: print `end` (if marking) and report.
    pub fn finish(mut self) -> Got {
        if self.take.marks {
            mark("end");
        }
        self.got.elapsed_ns = self.started.map_or(0, |s| self.last - s);
        if self.take.latency {
            self.lat.sort_unstable();
            self.got.p50_ns = quantile(&self.lat, 0.5);
            self.got.p99_ns = quantile(&self.lat, 0.99);
            self.got.max_ns = self.lat.last().map(|&v| v as f64);
        }
        self.got
    }
}

fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// Send `load`: `send(seq)` stamps and hands over message `seq`, paced at
/// `load.rate` if it has one; stops after `warmup + count` messages or
/// `budget_ms` past the warm-up.
fn send_loop(
    load: &Load,
    deadline: Instant,
    mut send: impl FnMut(u64) -> Result<(), String>,
) -> Result<Sent, String> {
    let total = load.warmup + load.count;
    let t0 = Instant::now();
    let budget = Duration::from_millis(load.budget_ms);
    let mut stop_at: Option<Instant> = None;
    let mut k = 0;
    while k < total {
        if let Some(rate) = load.rate {
            let due = t0 + Duration::from_secs_f64(k as f64 / rate);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        let now = Instant::now();
        if k >= load.warmup {
            let stop = *stop_at.get_or_insert(now + budget);
            if k > load.warmup && now >= stop {
                break;
            }
        }
        if now >= deadline {
            return Err(format!(
                "sent only {k} of {total} messages before the bound"
            ));
        }
        send(k)?;
        k += 1;
    }
    Ok(Sent {
        sent: k,
        secs: t0.elapsed().as_secs_f64(),
    })
}

/// A: the ring producer.
fn ring_producer(ring: &str, load: &Load, deadline: Instant) -> Result<Sent, String> {
    let mut p = Producer::open(ring).map_err(|e| format!("open ring {ring} as producer: {e}"))?;
    // The exporter is the ring's consumer.
    if p.wait_for_consumers(1, left(deadline)) < 1 {
        return Err("the exporter did not attach to the ring".into());
    }
    let mut msg = template(load.size);
    let sent = send_loop(load, deadline, |k| {
        stamp(&mut msg, k, mono_ns());
        let mut r = p
            .reserve(msg.len(), Wait::Until(deadline))
            .map_err(|e| format!("reserve message {k}: {e}"))?;
        r.put(&msg);
        r.commit(0).map_err(|e| format!("commit message {k}: {e}"))
    })?;
    // End of stream for the exporter (and, through the bridges, for B).
    p.close();
    Ok(sent)
}

/// B: a ring consumer reading every block in place.
fn ring_consumer(ring: &str, take: Take, deadline: Instant) -> Result<Got, String> {
    let mut c = Consumer::open(ring).map_err(|e| format!("open ring {ring} as consumer: {e}"))?;
    println!("attached");
    let mut t = Tally::new(take);
    loop {
        let wait = left(deadline);
        if wait.is_zero() {
            return Err("the stream did not end before the bound".into());
        }
        let Some(p) = c
            .peek_timeout(take.size, wait)
            .map_err(|e| format!("peek: {e}"))?
        else {
            break;
        };
        let len = p.len();
        let (seq, sent_at, tail) = crate::touch::peek_with(&p, |v| {
            let w = |off: usize| v.read_u64_le(off).unwrap_or(u64::MAX);
            (w(0), w(8), w(len.saturating_sub(8)))
        });
        p.release().map_err(|e| format!("release: {e}"))?;
        t.take(len, seq, sent_at, tail)?;
    }
    Ok(t.finish())
}

/// The 8 bytes of `z` at `off`, read from its slices where they lie
/// (`u64::MAX` past the end).
fn zword(z: &ZBytes, off: usize) -> u64 {
    let mut w = [0u8; 8];
    let mut got = 0;
    let mut at = 0;
    for s in z.slices() {
        let end = at + s.len();
        if end > off + got && got < 8 {
            let from = off + got - at;
            let n = (s.len() - from).min(8 - got);
            w[got..got + n].copy_from_slice(&s[from..from + n]);
            got += n;
        }
        at = end;
        if got == 8 {
            return u64::from_le_bytes(w);
        }
    }
    u64::MAX
}

fn zerr(what: &str) -> impl Fn(zenoh::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// The liveliness key of subscriber tokens of `key`.
fn sub_tokens(key: &str) -> String {
    format!("{key}/sub/*")
}

/// A: the plain Zenoh publisher.
fn zenoh_pub(
    ip: &str,
    key: &str,
    subs: usize,
    load: &Load,
    deadline: Instant,
) -> Result<Sent, String> {
    let cfg = SessionOptions {
        listen: vec![format!("tcp/{ip}:0")],
        ..SessionOptions::default()
    }
    .zenoh_config()
    .map_err(|e| e.to_string())?;
    let session = zenoh::open(cfg).wait().map_err(zerr("open session"))?;
    let eps: Vec<String> = session
        .info()
        .locators()
        .wait()
        .iter()
        .map(ToString::to_string)
        .collect();
    println!("ready {}", eps.join(" "));
    let publisher = session
        .declare_publisher(key.to_string())
        .congestion_control(CongestionControl::Block)
        .reliability(Reliability::Reliable)
        .wait()
        .map_err(zerr("declare publisher"))?;
    // The subscribers' tokens, declared after their subscribers: once a
    // token is here, so is its subscriber.
    let live = Arc::new((Mutex::new(HashSet::<String>::new()), Condvar::new()));
    let l2 = live.clone();
    let _tokens = session
        .liveliness()
        .declare_subscriber(sub_tokens(key))
        .history(true)
        .callback(move |s: Sample| {
            let mut set = l2.0.lock().unwrap_or_else(|p| p.into_inner());
            if s.kind() == SampleKind::Put {
                set.insert(s.key_expr().to_string());
            } else {
                set.remove(s.key_expr().as_str());
            }
            l2.1.notify_all();
        })
        .wait()
        .map_err(zerr("declare liveliness subscriber"))?;
    let wait_for = |pred: &dyn Fn(usize) -> bool, what: &str| -> Result<(), String> {
        let mut set = live.0.lock().unwrap_or_else(|p| p.into_inner());
        while !pred(set.len()) {
            let w = left(deadline);
            if w.is_zero() {
                return Err(format!("{what}: {} subscribers seen", set.len()));
            }
            set = live
                .1
                .wait_timeout(set, w.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(())
    };
    wait_for(&|n| n >= subs, "the subscribers did not appear")?;
    let mut msg = template(load.size);
    let sent = send_loop(load, deadline, |k| {
        stamp(&mut msg, k, mono_ns());
        publisher
            .put(msg.clone())
            .wait()
            .map_err(|e| format!("put message {k}: {e}"))
    })?;
    stamp(&mut msg, END, sent.sent);
    publisher
        .put(msg.clone())
        .wait()
        .map_err(zerr("put the end marker"))?;
    // Stay until every subscriber has taken the end marker and left.
    wait_for(&|n| n == 0, "the subscribers did not finish")?;
    drop(publisher);
    let _ = session.close().wait();
    Ok(sent)
}

/// B: a plain Zenoh subscriber, taking every sample in its callback.
fn zenoh_sub(
    connect: &str,
    ip: &str,
    key: &str,
    index: usize,
    take: Take,
    deadline: Instant,
) -> Result<Got, String> {
    let cfg = SessionOptions {
        listen: vec![format!("tcp/{ip}:0")],
        connect: vec![connect.to_string()],
        ..SessionOptions::default()
    }
    .zenoh_config()
    .map_err(|e| e.to_string())?;
    let session = zenoh::open(cfg).wait().map_err(zerr("open session"))?;
    let tally = Arc::new(Mutex::new(Some(Tally::new(take))));
    let (tx, rx) = mpsc::channel::<Result<(), String>>();
    let t2 = tally.clone();
    let sub = session
        .declare_subscriber(key.to_string())
        .callback(move |s: Sample| {
            let z = s.payload();
            let len = z.len();
            let seq = zword(z, 0);
            if seq == END {
                let _ = tx.send(Ok(()));
                return;
            }
            let (sent_at, tail) = (zword(z, 8), zword(z, len.saturating_sub(8)));
            let mut t = t2.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(t) = t.as_mut() {
                if let Err(e) = t.take(len, seq, sent_at, tail) {
                    let _ = tx.send(Err(e));
                }
            }
        })
        .wait()
        .map_err(zerr("declare subscriber"))?;
    let token = session
        .liveliness()
        .declare_token(format!("{key}/sub/{index}"))
        .wait()
        .map_err(zerr("declare token"))?;
    println!("attached");
    match rx.recv_timeout(left(deadline)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err("the end marker did not arrive before the bound".into()),
    }
    let t = tally
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or("no tally")?;
    let got = t.finish();
    drop(token);
    drop(sub);
    let _ = session.close().wait();
    Ok(got)
}

/// A: the TCP sender (frames: an 8-byte length, then the message).
fn tcp_send(addr: &str, load: &Load, deadline: Instant) -> Result<Sent, String> {
    let s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    s.set_write_timeout(Some(left(deadline).max(Duration::from_millis(1))))
        .map_err(|e| format!("SO_SNDTIMEO: {e}"))?;
    let mut w = BufWriter::with_capacity(256 << 10, s);
    let mut frame = vec![0u8; 8];
    frame[..8].copy_from_slice(&(load.size as u64).to_le_bytes());
    frame.extend_from_slice(&template(load.size));
    let paced = load.rate.is_some();
    let sent = send_loop(load, deadline, |k| {
        stamp(&mut frame[8..], k, mono_ns());
        w.write_all(&frame)
            .map_err(|e| format!("write message {k}: {e}"))?;
        if paced {
            w.flush().map_err(|e| format!("write message {k}: {e}"))?;
        }
        Ok(())
    })?;
    w.flush().map_err(|e| format!("flush: {e}"))?;
    Ok(sent)
}

/// B: the TCP receiver.
fn tcp_recv(ip: &str, take: Take, deadline: Instant) -> Result<Got, String> {
    let l = TcpListener::bind((ip, 0)).map_err(|e| format!("bind {ip}:0: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    println!("port {port}");
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let s = loop {
        match l.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if left(deadline).is_zero() {
                    return Err("no sender connected before the bound".into());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    };
    s.set_nonblocking(false).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(left(deadline).max(Duration::from_millis(1))))
        .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
    let mut r = BufReader::with_capacity(256 << 10, s);
    let mut msg = vec![0u8; take.size];
    let mut t = Tally::new(take);
    loop {
        let mut len = [0u8; 8];
        // A clean end of stream falls between frames.
        match r.read(&mut len[..1]) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read: {e}")),
        }
        r.read_exact(&mut len[1..])
            .map_err(|e| format!("read a frame header: {e}"))?;
        let n = u64::from_le_bytes(len) as usize;
        if n != take.size {
            return Err(format!("frame of {n} bytes, expected {}", take.size));
        }
        r.read_exact(&mut msg)
            .map_err(|e| format!("read a frame: {e}"))?;
        let w = |off: usize| u64::from_le_bytes(msg[off..off + 8].try_into().unwrap_or([0xFF; 8]));
        t.take(n, w(0), w(8), w(n - 8))?;
    }
    Ok(t.finish())
}

/// Run `spec`'s task; `Ok(Some(line))` is its result line.
pub fn run(spec: &Spec) -> Result<Option<String>, String> {
    let deadline = spec.deadline();
    match &spec.task {
        Task::RingProducer { ring, load } => ring_producer(ring, load, deadline).map(|r| line(&r)),
        Task::RingConsumer { ring, take } => ring_consumer(ring, *take, deadline).map(|r| line(&r)),
        Task::ZenohPub {
            ip,
            key,
            subs,
            load,
        } => zenoh_pub(ip, key, *subs, load, deadline).map(|r| line(&r)),
        Task::ZenohSub {
            connect,
            ip,
            key,
            index,
            take,
        } => zenoh_sub(connect, ip, key, *index, *take, deadline).map(|r| line(&r)),
        Task::TcpSend { addr, load } => tcp_send(addr, load, deadline).map(|r| line(&r)),
        Task::TcpRecv { ip, take } => tcp_recv(ip, *take, deadline).map(|r| line(&r)),
    }
    .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_read_across_slices() {
        let mut m = template(64);
        stamp(&mut m, 7, 1234);
        let mut w = ZBytes::writer();
        // Split inside the stamp word and inside the last word.
        w.append(ZBytes::from(m[..11].to_vec()));
        w.append(ZBytes::from(m[11..60].to_vec()));
        w.append(ZBytes::from(m[60..].to_vec()));
        let z = w.finish();
        assert_eq!((zword(&z, 0), zword(&z, 8), zword(&z, 56)), (7, 1234, 7));
        assert_eq!(zword(&z, 60), u64::MAX);
    }

    #[test]
    fn the_tally_counts_after_the_warmup_and_finds_gaps() {
        let take = Take {
            size: 32,
            warmup: 3,
            latency: true,
            marks: false,
        };
        let mut t = Tally::new(take);
        let now = mono_ns();
        for seq in [0, 1, 2, 3, 5, 6] {
            t.take(32, seq, now, seq).unwrap();
        }
        assert!(t.take(32, 6, now, 6).is_err());
        assert!(t.take(31, 7, now, 7).is_err());
        assert!(t.take(32, 7, now, 8).is_err());
        let g = t.finish();
        assert_eq!((g.warm, g.msgs, g.lost, g.first_seq), (2, 3, 1, 0));
        assert!(g.p50_ns.is_some() && g.p99_ns >= g.p50_ns);
        assert_eq!(quantile(&[1, 2, 3, 4], 0.5), Some(2.0));
    }
}
