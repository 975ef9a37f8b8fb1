//! `zcio record SOURCE... -o FILE`: record streams into an MCAP file.
//!
//! Each source runs on a thread of its own and writes every message it
//! receives into the one [`McapOut`] (behind a mutex), straight from where
//! the message lies: a block of a lossless ring from the ring's pages (the
//! block is released after the write), a channel message from its buffer
//! when nobody can change it, else from one private copy (a volatile
//! buffer may not be read through a plain reference), a Zenoh sample from
//! the bridge importer's queue (`record_zenoh.rs`). The main thread shows
//! progress and stops everything on `--count`, `--duration`, SIGINT or
//! SIGTERM; the file is then finished (summary, footer) and renamed to its
//! name — also when a source's stream failed ([`StreamFailed`]: exit 1,
//! what arrived is kept), not when the file could not be written.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use zcio::ring::{Consumer, ReadError, Start};
use zcio::{ChannelConfig, ConnectError, Listener, Msg, RecvError};

use crate::bridge::{announce, FollowArgs, SessionArgs};
use crate::mcap_out::{tag_of, ChannelKey, CompressionArg, McapOut, TAG_LEN};
use crate::record_zenoh::{ZenohSide, ZenohSource};
use crate::ring::size;
use crate::usage;

/// How often a waiting source looks at the stop flag.
pub(crate) const IDLE: Duration = Duration::from_millis(100);

/// Record ring blocks and channel messages into an MCAP file.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    zcio record ring:frames -o frames.mcap                      # until the producer closes the ring or Ctrl-C\n  \
    zcio record ring:frames ring:imu -o run.mcap --duration 60  # two rings, one MCAP channel each\n  \
    zcio record listen:/tmp/app.sock -o msgs.mcap --count 1000  # be the listener senders connect to\n  \
    zcio record zenoh:cam/front --connect tcp/10.0.0.1:7447 -o cam.mcap  # a `zcio bridge export --key cam/front`\n  \
    zcio record 'zenoh:cam/**' --listen tcp/0.0.0.0:7447 -o cams.mcap     # every key below cam/\n  \
    zcio replay run.mcap --to ring:frames                       # play it back with its timing\n\n\
    Sources:\n  \
    ring:NAME      attach to ring NAME as one more consumer (waits for the ring to appear);\n                 \
    every block is one MCAP message on topic `ring:NAME`\n  \
    listen:PATH    bind a channel listener at PATH and accept any number of senders; every\n                 \
    message is one MCAP message on topic `listen:PATH` (all connections share it);\n                 \
    typed messages (zcio type tags) get an MCAP channel per type, whose schema is the tag\n  \
    zenoh:KEY      subscribe to the Zenoh key expression KEY (wildcards allowed) as `zcio bridge\n                 \
    import` does: every sample is one MCAP message on the topic of its own key (one\n                 \
    channel per key; typed samples and tagged ring blocks get a channel of their own).\n                 \
    A `zcio bridge export` stream ends the recording with its end of stream; samples of\n                 \
    plain Zenoh publishers are recorded until stopped. Session options below.\n\n\
    Once every source is open (rings attached, listeners bound, Zenoh subscriptions\n\
    declared), one line on stdout: `ready`, followed by the endpoints the Zenoh session\n\
    listens on, if any (`ready tcp/127.0.0.1:40123`).\n\n\
    The recorder is a reader like any other. A block ring waits for its slowest reader:\n\
    if the disk is slower than the producer, the recorder slows the producer to the\n\
    disk's pace (never more); on a fast-enough disk (tmpfs) the producer's pace is\n\
    unchanged. On srp/mrp/frp rings the recorder never slows the producer: what it\n\
    cannot keep up with is dropped or skipped as the ring's policy says (see\n\
    `zcio ring stat`); blocks of frp/mrp rings are copied out and checked before they\n\
    are written, so the file has gaps, never torn blocks. Zenoh samples wait in a queue\n\
    of at most 32 MiB; when the disk is slower and it is full, the Zenoh receive thread\n\
    waits, which holds the link and (exports of block rings) the remote producer, as\n\
    `zcio bridge import` into a full ring does: nothing is dropped, the stream slows.\n\n\
    The file is written under a temporary name beside FILE and renamed once finished.\n\
    An existing FILE is kept unless --force. Log and publish times are the receive time\n\
    (CLOCK_REALTIME, ns; a Zenoh sample's publish time is its Zenoh timestamp when the\n\
    publisher stamps samples); each channel's sequence numbers count from 0.\n\
    Exit status: 0 when the file is complete (end of every stream, --count, --duration,\n\
    SIGINT, SIGTERM); 1 when a stream failed (a ring's producer died or failed, a Zenoh\n\
    exporter or its producer died or vanished, no Zenoh peer within --connect-timeout):\n\
    the file is still finished and renamed, with every message received before (none\n\
    arrived: no file); 1 also\n\
    when the file cannot be written (then it is removed); 2 for invalid options.")]
pub struct RecordArgs {
    /// What to record: ring:NAME, listen:PATH, zenoh:KEY (repeatable).
    #[arg(required = true, value_name = "SOURCE")]
    sources: Vec<String>,
    /// The MCAP file to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Replace FILE if it exists (at the end, once the recording is complete).
    #[arg(long)]
    force: bool,
    /// Stop after N messages (all sources together).
    #[arg(long, short = 'n', value_name = "N", value_parser = zcio_fmt::parse_count::<u64>)]
    count: Option<u64>,
    /// Stop after SECS seconds.
    #[arg(long, value_name = "SECS", value_parser = zcio_fmt::parse_seconds)]
    duration: Option<f64>,
    /// Compress the file's chunks.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    compression: CompressionArg,
    /// Target size of the file's chunks (the unit viewers load and index).
    #[arg(long, value_name = "SIZE", value_parser = zcio_fmt::parse_size, default_value = "4MiB")]
    chunk_size: usize,
    /// Ring sources start at the oldest block still in the ring, not the newest; zenoh sources first catch up from the exporter's cache (`bridge export --history N`).
    #[arg(long)]
    from_oldest: bool,
    /// No progress line and no summary.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten, next_help_heading = "Zenoh sources (zenoh:KEY)")]
    session: SessionArgs,
    #[command(flatten, next_help_heading = "Zenoh sources (zenoh:KEY)")]
    follow: FollowArgs,
}

/// A parsed SOURCE.
#[derive(Debug, Clone)]
enum Source {
    Ring(String),
    Listen(PathBuf),
    Zenoh(String),
}

impl Source {
    fn parse(s: &str) -> Result<Self> {
        if let Some(n) = s.strip_prefix("ring:") {
            if zcio::ring::ring_path(n).is_none() {
                return Err(usage(format!(
                    "invalid ring name {n:?} in {s:?}: 1 to 200 of [A-Za-z0-9._-], not starting with a dot"
                )));
            }
            Ok(Source::Ring(n.to_owned()))
        } else if let Some(p) = s.strip_prefix("listen:") {
            if p.is_empty() {
                return Err(usage(
                    "listen: needs a socket path, e.g. listen:/tmp/app.sock",
                ));
            }
            Ok(Source::Listen(PathBuf::from(p)))
        } else if let Some(k) = s.strip_prefix("zenoh:") {
            if k.is_empty() {
                return Err(usage(
                    "zenoh: needs a key expression, e.g. zenoh:cam/front (the --key of `zcio bridge export`) or zenoh:cam/** (every key below cam)",
                ));
            }
            if let Err(e) = zcio_zenoh::check_key(k, false) {
                let why = match &e {
                    zcio_zenoh::BridgeError::KeyExpr { why, .. } => why.clone(),
                    e => e.to_string(),
                };
                // Zenoh's message ends with where in its source it failed.
                let why = why.split(" at /").next().unwrap_or_default();
                return Err(usage(format!(
                    "invalid key expression {k:?} in {s:?} ({why}): give a Zenoh key expression such as zenoh:cam/front or zenoh:cam/** (no empty chunks, no leading or trailing /)"
                )));
            }
            Ok(Source::Zenoh(k.to_owned()))
        } else {
            Err(usage(format!(
                "unknown source {s:?}: give ring:NAME, listen:PATH or zenoh:KEY"
            )))
        }
    }
}

/// Set by SIGINT/SIGTERM.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    // SYNC: read by `Shared::stopped` on every thread; a flag, nothing
    // else is published through it.
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// Catch SIGINT and SIGTERM in [`SIGNALLED`] (so the file is finished).
pub(crate) fn catch_stop_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask"
        // value; the handler only stores to an atomic (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Whether SIGINT or SIGTERM arrived.
pub(crate) fn signalled() -> bool {
    // SYNC: set by `on_signal`.
    SIGNALLED.load(Ordering::Relaxed)
}

/// A source's stream failed (its producer died or failed, the exporter
/// vanished): what was recorded before is kept, in a finished file.
#[derive(Debug)]
pub(crate) struct StreamFailed(pub String);

impl std::fmt::Display for StreamFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StreamFailed {}

/// What the sources share.
pub(crate) struct Shared {
    out: Mutex<Option<McapOut>>,
    /// Stop asked (count reached, duration, signal, another source failed).
    stop: AtomicBool,
    limit: Option<u64>,
    messages: AtomicU64,
    bytes: AtomicU64,
    /// Sources not yet ready (zenoh: subscribed); `ready` is printed when
    /// the last one is.
    unready: AtomicUsize,
    /// The endpoints the Zenoh session listens on, for the `ready` line.
    endpoints: String,
}

impl Shared {
    /// One more source is ready: the last one prints `ready`.
    pub(crate) fn ready_one(&self) {
        // SYNC: decremented by each source once; the one that takes it to
        // 0 prints (only a count, nothing published through it).
        if self.unready.fetch_sub(1, Ordering::Relaxed) == 1 {
            announce(&self.endpoints);
        }
    }

    pub(crate) fn stopped(&self) -> bool {
        // SYNC: set by `stop_now` on any thread; only a flag.
        self.stop.load(Ordering::Relaxed) || signalled()
    }

    pub(crate) fn stop_now(&self) {
        // SYNC: read by `stopped`.
        self.stop.store(true, Ordering::Relaxed);
    }

    pub(crate) fn channel(&self, key: &ChannelKey, meta: &BTreeMap<String, String>) -> Result<()> {
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(o) => o.channel(key, meta),
            None => Ok(()),
        }
    }

    /// Write one message, received now; `false` once no more may be
    /// written (the count is reached or the file closed).
    fn write(&self, key: &ChannelKey, data: &[u8]) -> Result<bool> {
        let now = now_ns();
        self.write_at(key, now, now, data)
    }

    /// [`Self::write`] with its log and publish times (ns since the Unix
    /// epoch).
    pub(crate) fn write_at(
        &self,
        key: &ChannelKey,
        log_time: u64,
        publish_time: u64,
        data: &[u8],
    ) -> Result<bool> {
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let Some(out) = g.as_mut() else {
            return Ok(false);
        };
        if self.limit.is_some_and(|l| out.messages >= l) {
            return Ok(false);
        }
        out.write_at(key, log_time, publish_time, data)?;
        // SYNC: progress counters, read by the main thread for display only.
        self.messages.store(out.messages, Ordering::Relaxed);
        self.bytes.store(out.bytes, Ordering::Relaxed);
        if self.limit.is_some_and(|l| out.messages >= l) {
            self.stop_now();
            return Ok(false);
        }
        Ok(true)
    }
}

/// Nanoseconds since the Unix epoch (CLOCK_REALTIME).
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// An opened source, ready to run on its own thread.
enum Opened {
    Ring(String, Consumer),
    Listen(PathBuf, Listener),
    Zenoh(Box<ZenohSource>),
}

/// Run `zcio record`; `Ok(status)` is the exit status.
pub fn run(a: RecordArgs) -> Result<i32> {
    let duration = a
        .duration
        .map(|s| {
            Duration::try_from_secs_f64(s)
                .map_err(|_| usage(format!("--duration must be a number of seconds, not {s}")))
        })
        .transpose()?;
    if a.count == Some(0) {
        return Err(usage("--count must be at least 1"));
    }
    if a.chunk_size == 0 {
        return Err(usage("--chunk-size must be at least 1 byte"));
    }
    let sources = a
        .sources
        .iter()
        .map(|s| Source::parse(s))
        .collect::<Result<Vec<_>>>()?;
    let zenoh_sources = sources
        .iter()
        .filter(|s| matches!(s, Source::Zenoh(_)))
        .count();
    if zenoh_sources == 0 && (a.session.any() || a.follow.any()) {
        return Err(usage(
            "--listen, --connect, --config, --scout, --max-size, --grace and --connect-timeout apply only to zenoh:KEY sources",
        ));
    }
    McapOut::check_dest(&a.output, a.force)?;
    catch_stop_signals();

    // The Zenoh session first (its options are checked before anything
    // is opened); closed at the end whatever happens.
    let zenoh = if zenoh_sources > 0 {
        Some(ZenohSide::open(&a.session, &a.follow)?)
    } else {
        None
    };
    let res = record(&a, &sources, zenoh.as_ref(), zenoh_sources, duration);
    if let Some(z) = zenoh {
        z.close();
    }
    res
}

/// Open the sources, record until they end or a stop, finish the file.
fn record(
    a: &RecordArgs,
    sources: &[Source],
    zenoh: Option<&ZenohSide>,
    zenoh_sources: usize,
    duration: Option<Duration>,
) -> Result<i32> {
    // Open every source before the file is created: a wrong source leaves
    // nothing behind.
    let mut opened = Vec::new();
    for s in sources {
        match s {
            Source::Ring(name) => {
                let Some(map) = wait_ring(name)? else {
                    return Ok(0); // stopped while waiting: nothing recorded
                };
                let start = if a.from_oldest {
                    Start::Oldest
                } else {
                    Start::Newest
                };
                let cons = Consumer::attach(map, start)
                    .with_context(|| format!("cannot read from ring {name}"))?;
                opened.push(Opened::Ring(name.clone(), cons));
            }
            Source::Listen(path) => {
                let l = Listener::bind(path, ChannelConfig::default())
                    .with_context(|| format!("cannot listen at {}", path.display()))?;
                opened.push(Opened::Listen(path.clone(), l));
            }
            Source::Zenoh(expr) => {
                let Some(z) = zenoh else {
                    bail!("internal error: no Zenoh session for zenoh:{expr}");
                };
                let src = z.source(expr, a.from_oldest)?;
                opened.push(Opened::Zenoh(Box::new(src)));
            }
        }
    }

    let out = McapOut::create(&a.output, a.force, a.compression, a.chunk_size as u64)?;
    let shared = Arc::new(Shared {
        out: Mutex::new(Some(out)),
        stop: AtomicBool::new(false),
        limit: a.count,
        messages: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        unready: AtomicUsize::new(zenoh_sources),
        endpoints: zenoh.map(|z| z.endpoints.clone()).unwrap_or_default(),
    });
    if zenoh_sources == 0 {
        announce("");
    }
    let t0 = Instant::now();
    let threads: Vec<_> = opened
        .into_iter()
        .map(|o| {
            let shared = shared.clone();
            let rt = zenoh.map(ZenohSide::handle);
            std::thread::Builder::new()
                .name("zcio-record".into())
                .spawn(move || {
                    let r = match (o, rt) {
                        (Opened::Ring(name, cons), _) => record_ring(&name, cons, &shared),
                        (Opened::Listen(path, l), _) => record_listener(&path, l, &shared),
                        (Opened::Zenoh(src), Some(rt)) => {
                            crate::record_zenoh::record(*src, &rt, &shared)
                        }
                        (Opened::Zenoh(_), None) => {
                            Err(anyhow::anyhow!("internal error: no Zenoh runtime"))
                        }
                    };
                    if r.is_err() {
                        shared.stop_now();
                    }
                    r
                })
        })
        .collect::<std::io::Result<_>>()
        .context("cannot start a recording thread")?;

    let pb = progress(a.quiet);
    while !threads.iter().all(|t| t.is_finished()) {
        if duration.is_some_and(|d| t0.elapsed() >= d) {
            shared.stop_now();
        }
        if let Some(pb) = &pb {
            // SYNC: display only (see `Shared::write`).
            pb.set_message(format!(
                "{} messages",
                shared.messages.load(Ordering::Relaxed)
            ));
            pb.set_position(shared.bytes.load(Ordering::Relaxed));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let mut failed: Option<anyhow::Error> = None;
    for t in threads {
        let e = match t.join() {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(_) => anyhow::anyhow!("a recording thread panicked"),
        };
        // A local failure (the file cannot be written) outweighs a stream
        // that failed: it is the one reported, and the file is removed.
        let local = !is_stream_failure(&e);
        match &failed {
            Some(f) if !local || !is_stream_failure(f) => {}
            _ => failed = Some(e),
        }
    }
    let out = shared.out.lock().unwrap_or_else(|e| e.into_inner()).take();
    let Some(out) = out else {
        bail!("internal error: the recording is gone");
    };
    match failed {
        Some(e) if !is_stream_failure(&e) => {
            drop(out); // removes the temporary file
            Err(e.context(format!(
                "nothing was written to {} (the partial recording was removed)",
                a.output.display()
            )))
        }
        Some(e) if out.messages == 0 => {
            // The stream failed before anything arrived: no file (an empty
            // recording would only hide the failure; `--force` users keep
            // what they had).
            drop(out); // removes the temporary file
            Err(e.context(format!(
                "nothing was recorded, so {} was not written",
                a.output.display()
            )))
        }
        Some(e) => {
            // The stream failed, not the recording: keep what arrived, in a
            // finished file.
            let messages = out.messages;
            let dest = out.finish()?;
            Err(e.context(format!(
                "the recording is incomplete: the {messages} messages received before are in {} (a finished MCAP file)",
                dest.display()
            )))
        }
        None => {
            let (messages, bytes) = (out.messages, out.bytes);
            let dest = out.finish()?;
            if !a.quiet {
                let s = t0.elapsed().as_secs_f64().max(1e-9);
                eprintln!(
                    "zcio record: {messages} messages, {} in {s:.2} s ({}/s, {:.0} msg/s) → {}",
                    size(bytes),
                    size((bytes as f64 / s) as u64),
                    messages as f64 / s,
                    dest.display()
                );
            }
            Ok(0)
        }
    }
}

/// Whether `e` is a source's stream failing (the recording itself is fine).
fn is_stream_failure(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<StreamFailed>())
}

fn progress(quiet: bool) -> Option<ProgressBar> {
    if quiet {
        return None;
    }
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if pb.is_hidden() {
        return None; // stderr is not a terminal
    }
    pb.set_style(
        ProgressStyle::with_template(
            "{spinner} recording: {msg}, {binary_bytes} [{elapsed_precise}] {binary_bytes_per_sec}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.enable_steady_tick(Duration::from_millis(100));
    Some(pb)
}

/// Open ring `name`, waiting for it to be created (never creating it);
/// `None` if stopped while waiting.
fn wait_ring(name: &str) -> Result<Option<Arc<zcio::ring::RingMap>>> {
    let t0 = Instant::now();
    let mut told = false;
    loop {
        match zcio::ring::RingMap::open(name, true) {
            Ok(m) => return Ok(Some(m)),
            Err(zcio::ring::OpenError::NotFound(_)) => {}
            Err(e) => return Err(crate::ring::open_error(name, e)),
        }
        if signalled() {
            return Ok(None);
        }
        if !told && t0.elapsed() >= Duration::from_secs(1) {
            eprintln!("zcio record: no ring named {name:?} yet; waiting for it (`zcio ring ls` lists the rings)");
            told = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The metadata of a ring's MCAP channel: what the ring is.
fn ring_metadata(name: &str, g: &zcio::ring::Geometry) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert("zcio.source".into(), "ring".into());
    m.insert("zcio.ring".into(), name.into());
    m.insert(
        "zcio.layout".into(),
        format!("{:?}", g.layout).to_lowercase(),
    );
    m.insert("zcio.policy".into(), g.overflow.name().into());
    m.insert("zcio.size".into(), g.data_len.to_string());
    m.insert("zcio.max_block".into(), g.max_block().to_string());
    m
}

/// Record ring `name` until its producer closes it or a stop.
fn record_ring(name: &str, mut cons: Consumer, shared: &Shared) -> Result<()> {
    let g = *cons.geometry();
    let key: ChannelKey = (format!("ring:{name}"), None, 0);
    shared.channel(&key, &ring_metadata(name, &g))?;
    let max = usize::try_from(g.max_block()).unwrap_or(usize::MAX).max(1);
    // Rings whose producer may overwrite a block being read (frp, mrp)
    // are read with a checked copy, as `zcio pipe get` does: the file may
    // have gaps, never torn blocks.
    let overwrites = g.overflow.overwrites();
    let mut buf = if overwrites {
        vec![0u8; max.min(1 << 20)]
    } else {
        Vec::new()
    };
    loop {
        if shared.stopped() {
            return Ok(());
        }
        let r = if overwrites {
            match cons.read_timeout(&mut buf, IDLE) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    if !shared.write(&key, &buf[..n])? {
                        return Ok(());
                    }
                    Ok(())
                }
                Err(ReadError::BufferTooSmall { need, .. }) => {
                    buf.resize(need, 0);
                    continue;
                }
                Err(e) => Err(e),
            }
        } else {
            match cons.peek_timeout(max, IDLE) {
                Ok(None) => return Ok(()),
                Ok(Some(p)) => {
                    let v = p.view();
                    // SAFETY: a block of a lossless ring (block or srp
                    // policy) is not written by its producer until every
                    // consumer released it, and we release it only after
                    // the write below. The slice only goes to the file
                    // (and the chunk CRC): nothing is validated or decided
                    // on its bytes, so a producer breaking the ring's
                    // protocol could only make the recorded bytes wrong.
                    let bytes = unsafe { v.as_slice_unchecked() };
                    let more = shared.write(&key, bytes)?;
                    p.release().with_context(|| format!("read ring {name}"))?;
                    if !more {
                        return Ok(());
                    }
                    Ok(())
                }
                Err(e) => Err(e),
            }
        };
        match r {
            Ok(()) | Err(ReadError::TimedOut) => {}
            Err(ReadError::Disconnected { pid }) => {
                return Err(StreamFailed(format!(
                    "the producer of ring {name} died (pid {pid}) without closing it"
                ))
                .into())
            }
            Err(ReadError::ProducerFailed { pid, code }) => {
                return Err(StreamFailed(format!(
                    "the producer of ring {name} (pid {pid}) failed ({})",
                    std::io::Error::from_raw_os_error(code as i32)
                ))
                .into())
            }
            Err(e) => return Err(e).with_context(|| format!("read ring {name}")),
        }
    }
}

/// Accept senders at `path` and record their messages until a stop.
fn record_listener(path: &std::path::Path, l: Listener, shared: &Arc<Shared>) -> Result<()> {
    let topic = format!("listen:{}", path.display());
    let mut meta = BTreeMap::new();
    meta.insert("zcio.source".to_owned(), "listen".to_owned());
    meta.insert("zcio.path".to_owned(), path.display().to_string());
    let meta = Arc::new(meta);
    shared.channel(&(topic.clone(), None, 0), &meta)?;
    let mut conns = Vec::new();
    let mut failed = None;
    while !shared.stopped() {
        match l.accept_timeout(IDLE) {
            Ok(ch) => {
                let (shared, topic, meta) = (shared.clone(), topic.clone(), meta.clone());
                let t = std::thread::Builder::new()
                    .name("zcio-record-conn".into())
                    .spawn(move || {
                        let r = record_channel(&ch, &topic, &meta, &shared);
                        if r.is_err() {
                            shared.stop_now();
                        }
                        r
                    })
                    .context("cannot start a connection thread")?;
                conns.push(t);
            }
            Err(ConnectError::TimedOut) => {}
            Err(ConnectError::Os { errno, .. })
                if errno == zcio::Errno::AGAIN || errno == zcio::Errno::TIMEDOUT => {}
            // A sender that failed its handshake: the others go on.
            Err(e) => eprintln!(
                "zcio record: warning: a connection at {} failed: {e}",
                path.display()
            ),
        }
        let (done, live): (Vec<_>, Vec<_>) = conns.into_iter().partition(|t| t.is_finished());
        conns = live;
        for t in done {
            if let Ok(Err(e)) = t.join() {
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed.take() {
            return Err(e);
        }
    }
    for t in conns {
        if let Ok(Err(e)) = t.join() {
            failed.get_or_insert(e);
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Record one accepted channel until its sender closes it or a stop.
fn record_channel(
    ch: &zcio::Channel,
    topic: &str,
    meta: &BTreeMap<String, String>,
    shared: &Shared,
) -> Result<()> {
    let untyped: ChannelKey = (topic.to_owned(), None, 0);
    loop {
        if shared.stopped() {
            return Ok(());
        }
        let msg = match ch.recv_timeout(IDLE) {
            Ok(m) => m,
            Err(e) if e.is_timeout() => continue,
            Err(e) if e.is_disconnected() => return Ok(()),
            Err(e) => return Err(recv_error(e, topic)),
        };
        let key = match typed_key(&msg, topic) {
            Some(k) => {
                shared.channel(&k, meta)?;
                k
            }
            None => untyped.clone(),
        };
        // In place when nobody can change the bytes (one immutable
        // slice), else one private copy (a volatile buffer may not be read
        // through a plain slice).
        let data = msg.contiguous();
        if !shared.write(&key, &data)? {
            return Ok(());
        }
    }
}

fn recv_error(e: RecvError, topic: &str) -> anyhow::Error {
    anyhow::Error::new(e).context(format!("receive from a sender of {topic}"))
}

/// The channel of a typed message (one that starts with a zcio type tag).
fn typed_key(msg: &Msg, topic: &str) -> Option<ChannelKey> {
    if msg.len() < TAG_LEN {
        return None;
    }
    let mut head = [0u8; TAG_LEN];
    (msg.read_at(0, &mut head) == TAG_LEN).then_some(())?;
    tag_of(&head).map(|t| (topic.to_owned(), Some(t), 0))
}
