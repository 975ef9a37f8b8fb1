//! The exporting half: a local source published to one Zenoh key.
//!
//! - A **ring** (`ring:NAME`): the bridge joins as one more consumer and
//!   publishes every block, its tag in the attachment and its position in
//!   the ring as the sample's position (so a restarted exporter continues
//!   the same stream and an importer can tell duplicates and gaps). Blocks
//!   (of 16 KiB or more) of rings that never overwrite unread data
//!   (`block`, `srp`) are lent
//!   to Zenoh from the ring's pages — Zenoh encodes them into its batch,
//!   the one user-space copy on this host — and go back to the ring once
//!   Zenoh has let go of them (`lent_block.rs`). Blocks of overwriting rings
//!   (FRP/MRP), and every block when a cache is kept (`history`) or `copy`
//!   is asked, are copied out once, then checked (under FRP/MRP the check
//!   after the copy is what tells a torn block); Zenoh encodes that copy.
//! - A **listener** (`listen:PATH`): every message of every channel that
//!   connects, in arrival order, one sample each; `send_array` headers go
//!   into the attachment and the sample carries the array's bytes. The
//!   message's slices go to Zenoh without a copy when they are immutable
//!   (sealed buffers, a trusted peer); otherwise each is copied once.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};
use zcio::ring::{Consumer, Layout, Overflow, ReadError, Start};

use zcio::tokio::AsyncChannel;
use zcio::{ChannelConfig, Listener, Msg};
use zenoh::bytes::ZBytes;
use zenoh::pubsub::Publisher;
use zenoh::qos::{CongestionControl, Reliability};
use zenoh::{Session, Wait};

use crate::cache::Cache;
use crate::config::STOP_CHECK;
use crate::error::{local, zenoh, BridgeError};
use crate::lent_block::LentBlock;
use crate::liveness::{random_u64, token_key, Token};
use crate::stats::Counters;
use crate::wire::{Kind, Meta};

/// A local source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Every block of a named ring.
    Ring {
        /// The ring's name.
        name: String,
        /// Where the bridge starts reading.
        start: Start,
    },
    /// Every message of every channel that connects to a listener at `path`.
    Listen {
        /// The socket path.
        path: PathBuf,
    },
}

impl Source {
    /// Parse `ring:NAME` or `listen:PATH` (rings start at the newest block).
    pub fn parse(spec: &str) -> Result<Self, BridgeError> {
        match spec.split_once(':') {
            Some(("ring", name)) if !name.is_empty() => Ok(Self::Ring {
                name: name.to_string(),
                start: Start::Newest,
            }),
            Some(("listen", path)) if !path.is_empty() => Ok(Self::Listen { path: path.into() }),
            _ => Err(BridgeError::Spec(format!(
                "source {spec:?}: expected ring:NAME (a named ring) or listen:PATH (a channel listener socket)"
            ))),
        }
    }
}

/// How a source is exported.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// Samples the publication cache keeps for late joiners and recovery
    /// (0, the default: no cache). Memory: up to this many samples of up to
    /// `max_sample`. A cache holds private copies, so with one every ring
    /// block is copied out instead of lent.
    pub history: usize,
    /// Congestion control; `None`: from the ring's overflow policy (`Block`
    /// for lossless rings and listeners, `Drop` for the dropping policies).
    pub congestion: Option<CongestionControl>,
    /// Largest message or block published; larger ones are dropped and
    /// counted (`oversize`).
    pub max_sample: usize,
    /// Read nothing from the source until a subscriber (an importer, or
    /// any Zenoh subscriber of the key) matches the publisher — once; after
    /// that, samples published while nobody listens reach only the cache.
    /// A lossless ring thus holds its producer back until the path exists.
    pub wait_for_subscriber: bool,
    /// Copy every ring block out before publishing it, also where it could
    /// be lent in place (blocks of 16 KiB or more of `block` and `srp` rings
    /// without a cache; smaller blocks are always copied, which costs less
    /// than a lent block). Lending
    /// trusts the ring's producer to keep the ring protocol — never to
    /// write a block before every consumer released it — as every local
    /// reader of the ring does; a copy out cannot be changed under Zenoh by
    /// a producer that breaks it (see `docs/bridge.md`). Off by default.
    pub copy: bool,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            history: 0,
            congestion: None,
            max_sample: crate::config::DEFAULT_MAX_SAMPLE,
            wait_for_subscriber: true,
            copy: false,
        }
    }
}

/// How an export ended without error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportEnd {
    /// The ring's producer closed it: end of stream was published.
    EndOfStream,
    /// Stopped on request (a listener export publishes end of stream then;
    /// a ring export does not: the ring's stream goes on without it).
    Stopped,
}

/// Longest a lent block may stay with Zenoh.
const LOAN_BOUND: Duration = Duration::from_secs(30);

/// Smallest block lent in place; smaller ones are copied out, which costs
/// less than a lent block's bookkeeping (measured at 64 B: 0.51× plain Zenoh's
/// throughput copied, 0.37× lent; a 16 KiB copy is about a microsecond).
const LEND_MIN: usize = 16 << 10;

/// What happened to a peeked block.
enum Block {
    /// Larger than the limit: released unpublished.
    Oversize(Result<(), ReadError>),
    /// Copied out, then released (the result says whether the copy is
    /// intact).
    Copied(Vec<u8>, Result<(), ReadError>),
    /// Set aside to be lent to Zenoh in place.
    Lent(zcio::ring::DetachedPeek),
}

/// Publishes one local source to one key.
pub struct Exporter {
    session: Session,
    key: String,
    source: Source,
    opts: ExportOptions,
    counters: Arc<Counters>,
}

/// The publisher, cache and liveliness token of a running export.
struct Outlet {
    publisher: Publisher<'static>,
    cache: Option<Cache>,
    _token: zenoh::liveliness::LivelinessToken,
    stream: u64,
    byte_positions: bool,
}

impl Outlet {
    /// Publish one data sample. Zenoh's `put` is synchronous (its future
    /// is a ready one): it encodes the sample into the transmission queue,
    /// waiting for room under `CongestionControl::Block`.
    fn put(&self, payload: ZBytes, meta: &Meta) -> Result<(), BridgeError> {
        let att = meta.encode();
        if let Some(c) = &self.cache {
            // Shared, not copied: `ZBytes` clones are references.
            c.push(payload.clone(), att.clone(), meta);
        }
        self.publisher
            .put(payload)
            .attachment(att)
            .wait()
            .map_err(zenoh)
    }

    /// Wait until a subscriber matches the publisher.
    async fn matched(&self) -> Result<(), BridgeError> {
        let listener = self.publisher.matching_listener().await.map_err(zenoh)?;
        if self
            .publisher
            .matching_status()
            .await
            .map_err(zenoh)?
            .matching()
        {
            return Ok(());
        }
        loop {
            let status = listener.recv_async().await.map_err(zenoh)?;
            if status.matching() {
                return Ok(());
            }
        }
    }

    /// Publish end of stream, an error close or the producer's death.
    fn control(&self, kind: Kind, pos: u64) -> Result<(), BridgeError> {
        let meta = Meta {
            kind,
            ..Meta::data(self.stream, pos, pos, self.byte_positions)
        };
        self.publisher
            .delete()
            .attachment(meta.encode())
            .wait()
            .map_err(zenoh)
    }
}

impl Exporter {
    /// An exporter of `source` to `key` (checked: a concrete key) on
    /// `session`.
    pub fn new(
        session: &Session,
        source: Source,
        key: &str,
        opts: ExportOptions,
    ) -> Result<Self, BridgeError> {
        crate::config::check_key(key, true)?;
        Ok(Self {
            session: session.clone(),
            key: key.to_string(),
            source,
            opts,
            counters: Arc::new(Counters::exporter(key)),
        })
    }

    /// The live counters.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Declare the publisher (with its cache) and the liveliness token.
    async fn outlet(
        &self,
        stream: u64,
        byte_positions: bool,
        cc: CongestionControl,
        history: usize,
    ) -> Result<Outlet, BridgeError> {
        let publisher = self
            .session
            .declare_publisher(self.key.clone())
            .congestion_control(self.opts.congestion.unwrap_or(cc))
            .reliability(Reliability::Reliable)
            .await
            .map_err(zenoh)?;
        // The cache's queryable before the token: an importer that sees
        // the token can ask the cache.
        let cache = match history {
            0 => None,
            n => Some(Cache::declare(&self.session, &self.key, stream, byte_positions, n).await?),
        };
        let token = self
            .session
            .liveliness()
            .declare_token(token_key(
                Token {
                    stream,
                    nonce: random_u64(),
                    cached: history > 0,
                },
                &self.key,
            ))
            .await
            .map_err(zenoh)?;
        Ok(Outlet {
            publisher,
            cache,
            _token: token,
            stream,
            byte_positions,
        })
    }

    /// Run until the source ends, fails, or `stop` completes. `ready` is
    /// called once the publisher is declared (the CLI prints its `ready`
    /// line there). Close the session (`session.close().await`) before the
    /// process exits: that sends what Zenoh still queues — the end of
    /// stream among it — where an exit may drop it.
    pub async fn run(
        self,
        stop: impl Future<Output = ()>,
        ready: impl FnOnce(),
    ) -> Result<ExportEnd, BridgeError> {
        match self.source.clone() {
            Source::Ring { name, start } => self.run_ring(&name, start, stop, ready).await,
            Source::Listen { path } => self.run_listen(&path, stop, ready).await,
        }
    }

    async fn run_ring(
        &self,
        name: &str,
        start: Start,
        stop: impl Future<Output = ()>,
        ready: impl FnOnce(),
    ) -> Result<ExportEnd, BridgeError> {
        let cons = Consumer::attach(zcio::ring::RingMap::open(name, true)?, start)?;
        let geo = *cons.geometry();
        let byte_positions = matches!(geo.layout, Layout::Continuous | Layout::Variable);
        let cc = match geo.overflow {
            Overflow::Block => CongestionControl::Block,
            _ => CongestionControl::Drop,
        };
        // In place: rings that never overwrite unread blocks (`block`, and
        // `srp`, which drops the new block instead; FRP/MRP could overwrite
        // a block while Zenoh reads it), not index rings (their blocks live
        // in other rings), no cache (it would keep ring pages) and no copy
        // asked for.
        let history = self.opts.history;
        let in_place = !self.opts.copy
            && history == 0
            && matches!(geo.overflow, Overflow::Block | Overflow::Srp)
            && geo.layout != Layout::Index;
        let out = self
            .outlet(geo.ring_id, byte_positions, cc, history)
            .await?;
        ready();
        tokio::pin!(stop);
        if self.opts.wait_for_subscriber {
            tokio::select! {
                biased;
                () = &mut stop => return Ok(ExportEnd::Stopped),
                r = out.matched() => r?,
            }
            self.counters.peers(1);
        }
        // The ring is read and published on a thread of its own, with the
        // blocking consumer and Zenoh's synchronous `put`: a block goes from
        // the ring's futex wake-up to Zenoh's transmission queue without a
        // hop through the async runtime.
        let halt = Arc::new(AtomicBool::new(false));
        // Also when this future is dropped before the pump ends: the thread
        // then stops within one wait slice instead of reading on.
        let _halt_on_drop = HaltOnDrop(halt.clone());
        let pump = RingPump {
            cons,
            out,
            counters: self.counters.clone(),
            max: self.opts.max_sample,
            in_place,
            byte_positions,
            halt: halt.clone(),
        };
        let mut task = tokio::task::spawn_blocking(move || pump.run());
        let joined = tokio::select! {
            biased;
            () = &mut stop => {
                HaltOnDrop::set(&halt);
                task.await
            }
            r = &mut task => r,
        };
        joined.map_err(|e| BridgeError::Local {
            what: "ring",
            why: format!("the ring reader thread failed: {e}"),
        })?
    }

    async fn run_listen(
        &self,
        path: &std::path::Path,
        stop: impl Future<Output = ()>,
        ready: impl FnOnce(),
    ) -> Result<ExportEnd, BridgeError> {
        let listener = Listener::bind(path, ChannelConfig::default())?;
        let out = self
            .outlet(
                random_u64(),
                false,
                CongestionControl::Block,
                self.opts.history,
            )
            .await?;
        // Messages of all channels meet in one queue, so positions are
        // assigned in publishing order.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Msg>(64);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let accepting = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let acceptor = {
            let accepting = accepting.clone();
            let counters = self.counters.clone();
            let handle = tokio::runtime::Handle::current();
            std::thread::Builder::new()
                .name("zcio-bridge-accept".into())
                .spawn(move || {
                    accept_loop(&listener, &accepting, &counters, &tx, &stop_rx, &handle)
                })
                .map_err(|e| BridgeError::Local {
                    what: "listener",
                    why: e.to_string(),
                })?
        };
        ready();
        tokio::pin!(stop);
        // A stop ends accepting, then every channel hands over what it has
        // received and closes; the queue runs dry when the last of them
        // (and the acceptor) has let go, and only then is the end of
        // stream published: nothing received is dropped.
        let mut stopping = false;
        let begin_stop = |stopping: &mut bool| {
            *stopping = true;
            // SYNC: the acceptor reads this flag between bounded accepts;
            // no data is published through it (Relaxed is enough).
            accepting.store(false, std::sync::atomic::Ordering::Relaxed);
            let _ = stop_tx.send(true);
        };
        let mut pos = 0u64;
        let mut matched = !self.opts.wait_for_subscriber;
        let res = loop {
            let msg = tokio::select! {
                biased;
                () = &mut stop, if !stopping => {
                    begin_stop(&mut stopping);
                    continue;
                }
                m = rx.recv() => match m {
                    Some(m) => m,
                    None => break Ok(()),
                },
            };
            if msg.len() > self.opts.max_sample {
                self.counters.oversize(1);
                continue;
            }
            if !matched && !stopping {
                // Once stopping, publish anyway (the cache keeps it).
                tokio::select! {
                    biased;
                    () = &mut stop => begin_stop(&mut stopping),
                    r = out.matched() => if let Err(e) = r { break Err(e) },
                }
                matched = true;
                self.counters.peers(1);
            }
            let Some((payload, array)) = self.split_array(msg) else {
                continue;
            };
            let len = payload.len();
            let meta = Meta {
                array,
                ..Meta::data(out.stream, pos, pos + 1, false)
            };
            if let Err(e) = out.put(to_zbytes(&payload), &meta) {
                break Err(e);
            }
            pos += 1;
            self.counters.sample(len);
        };
        if !stopping {
            begin_stop(&mut stopping);
        }
        rx.close();
        let _ = tokio::task::spawn_blocking(move || acceptor.join()).await;
        res?;
        out.control(Kind::End, pos)?;
        Ok(ExportEnd::Stopped)
    }

    /// A message as a sample payload and, for a `send_array` message, its
    /// header. `None`: a malformed array header (counted).
    fn split_array(&self, mut msg: Msg) -> Option<(Msg, Option<zcio::array::ArrayHeader>)> {
        match zcio::array::ArrayHeader::read_from(&msg) {
            Ok(None) => Some((msg, None)),
            Ok(Some(h)) => {
                let (off, len) = (h.payload_off as usize, h.payload_len as usize);
                let tail = msg.len() - off - len;
                if msg.clip_front(off).is_err() || msg.clip_back(tail).is_err() {
                    self.counters.malformed(1);
                    return None;
                }
                Some((msg, Some(h)))
            }
            Err(_) => {
                self.counters.malformed(1);
                None
            }
        }
    }
}

/// Sets the ring pump's stop flag when dropped.
struct HaltOnDrop(Arc<AtomicBool>);

impl HaltOnDrop {
    fn set(flag: &AtomicBool) {
        // SYNC: read by `RingPump::run` between bounded waits; a stop flag,
        // no data published through it (Relaxed).
        flag.store(true, Ordering::Relaxed);
    }
}

impl Drop for HaltOnDrop {
    fn drop(&mut self) {
        Self::set(&self.0);
    }
}

/// The ring half of an export, on its own thread: every block of the ring,
/// published in ring order.
struct RingPump {
    cons: Consumer,
    out: Outlet,
    counters: Arc<Counters>,
    max: usize,
    in_place: bool,
    byte_positions: bool,
    /// Set when the export is stopped.
    halt: Arc<AtomicBool>,
}

impl RingPump {
    fn run(mut self) -> Result<ExportEnd, BridgeError> {
        let (out, max) = (&self.out, self.max);
        loop {
            // SYNC: set by `Exporter::run_ring` on stop (Relaxed, a flag).
            if self.halt.load(Ordering::Relaxed) {
                return Ok(ExportEnd::Stopped);
            }
            let before = self.cons.position();
            let skipped_before = self.cons.stats().skipped_units;
            let got = self.cons.peek_timeout(max, STOP_CHECK).map(|p| {
                p.map(|p| {
                    let (len, tag) = (p.len(), p.tag());
                    if len > max {
                        (len, tag, Block::Oversize(p.release()))
                    } else if self.in_place && len >= LEND_MIN {
                        (len, tag, Block::Lent(p.detach()))
                    } else {
                        // The one copy: out of pages the producer can
                        // write, then the check that it was not overwritten
                        // meanwhile.
                        let data = p.to_vec();
                        (len, tag, Block::Copied(data, p.release()))
                    }
                })
            });
            let c = &mut self.cons;
            match got {
                Ok(Some((len, tag, block))) => {
                    let skipped = c.stats().skipped_units - skipped_before;
                    let pos = before + skipped;
                    let released = match block {
                        Block::Oversize(r) => r.map(|()| self.counters.oversize(1)),
                        Block::Copied(data, Ok(())) => {
                            let meta = Meta {
                                tag,
                                ..Meta::data(out.stream, pos, c.position(), self.byte_positions)
                            };
                            out.put(ZBytes::from(data), &meta)?;
                            self.counters.sample(len);
                            Ok(())
                        }
                        Block::Copied(_, Err(e)) => Err(e),
                        Block::Lent(d) => {
                            let meta = Meta {
                                tag,
                                ..Meta::data(out.stream, pos, pos + d.units(), self.byte_positions)
                            };
                            let r = lend(c, d, out, &meta);
                            if r.is_ok() {
                                self.counters.sample(len);
                            }
                            r?
                        }
                    };
                    match released {
                        Ok(()) => {}
                        Err(ReadError::Lapped) => self.counters.lapped(1),
                        Err(e) => return Err(local("ring", e)),
                    }
                }
                Ok(None) => {
                    out.control(Kind::End, c.position())?;
                    return Ok(ExportEnd::EndOfStream);
                }
                Err(ReadError::TimedOut) => {}
                Err(ReadError::Disconnected { pid }) => {
                    out.control(Kind::Died { pid }, c.position())?;
                    return Err(BridgeError::ProducerDied { pid });
                }
                Err(ReadError::ProducerFailed { code, .. }) => {
                    out.control(Kind::Failed { code }, c.position())?;
                    return Err(BridgeError::ProducerFailed { code });
                }
                Err(ReadError::Lapped) => self.counters.lapped(1),
                Err(e) => return Err(local("ring", e)),
            }
        }
    }
}

/// Publish the detached block `d` of `c` from the ring's pages and release
/// it once Zenoh let go of them. The outer error: publishing failed or the
/// lent block did not come back; the inner one: the release.
fn lend(
    c: &mut Consumer,
    d: zcio::ring::DetachedPeek,
    out: &Outlet,
    meta: &Meta,
) -> Result<Result<(), ReadError>, BridgeError> {
    // SAFETY: `d` is a block of this consumer's ring, held (detached, not
    // released) until the lent block comes back below; the ring's policy never
    // overwrites an unreleased block (`Block` or `Srp`: `in_place`).
    let (lent, back) = unsafe { LentBlock::new(d.addr(), d.len(), c.ring().clone()) };
    let sent = out.put(ZBytes::from(bytes::Bytes::from_owner(lent)), meta);
    // Zenoh encodes the payload into its batch while publishing and then
    // lets go of it; only then may the block go back to the ring.
    if back.recv_timeout(LOAN_BOUND).is_err() {
        return Err(BridgeError::Local {
            what: "ring",
            why: format!(
                "Zenoh kept a lent block for {LOAN_BOUND:?} (a subscriber in this session holding samples?): export without zero-copy"
            ),
        });
    }
    let r = match c.resume(d) {
        Ok(p) => p.release(),
        Err(_) => Err(ReadError::Corrupt("lent block lost its consumer")),
    };
    sent?;
    Ok(r)
}

/// A message's slices as one `ZBytes`: immutable slices by reference,
/// others copied once (`Msg::secure`).
fn to_zbytes(msg: &Msg) -> ZBytes {
    let mut w = ZBytes::writer();
    for part in msg.secure().into_parts() {
        w.append(ZBytes::from(part));
    }
    w.finish()
}

/// Accept channels until `accepting` is cleared; each gets a task that
/// forwards its messages to `tx` until its peer goes or `stop` turns true,
/// then hands over what it has received and closes.
fn accept_loop(
    listener: &Listener,
    accepting: &std::sync::atomic::AtomicBool,
    counters: &Arc<Counters>,
    tx: &tokio::sync::mpsc::Sender<Msg>,
    stop: &tokio::sync::watch::Receiver<bool>,
    rt: &tokio::runtime::Handle,
) {
    // SYNC: see `run_listen` (a stop flag, Relaxed).
    while accepting.load(std::sync::atomic::Ordering::Relaxed) {
        let ch = match listener.accept_timeout(Duration::from_millis(100)) {
            Ok(ch) => ch,
            // Timeouts, and peers refused by the access policy or failing
            // the handshake: keep listening.
            Err(_) => continue,
        };
        counters.connections(1);
        let tx = tx.clone();
        let _guard = rt.enter();
        let Ok(ch) = AsyncChannel::new(ch) else {
            continue;
        };
        let counters = counters.clone();
        let mut stop = stop.clone();
        rt.spawn(async move {
            loop {
                let got = tokio::select! {
                    biased;
                    r = ch.recv() => Some(r),
                    r = stop.wait_for(|s| *s) => r.is_err().then_some(Err(zcio::RecvError::Disconnected)),
                };
                let Some(got) = got else {
                    // Stopping: what this channel has received goes out
                    // first.
                    loop {
                        match ch.try_recv() {
                            Ok(m) => {
                                if tx.send(m).await.is_err() {
                                    break;
                                }
                            }
                            Err(zcio::TryRecvError::Malformed(_)) => counters.malformed(1),
                            Err(_) => break,
                        }
                    }
                    break;
                };
                match got {
                    Ok(m) => {
                        if tx.send(m).await.is_err() {
                            break;
                        }
                    }
                    // Dropped by the channel (its slices released); the
                    // channel goes on.
                    Err(zcio::RecvError::Malformed(_)) => counters.malformed(1),
                    Err(_) => break,
                }
            }
            ch.channel().close();
        });
    }
}
