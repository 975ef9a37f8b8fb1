//! The importing half: samples of a Zenoh key expression written into a
//! local sink — a named ring (one block per sample) or a channel connection
//! (one message per sample). Each sample is written once, from Zenoh's
//! receive buffers into the ring block or pool buffer; every local reader
//! then reads those pages in place.
//!
//! One stream at a time: the first zcio stream seen is followed to its end
//! (samples of other zcio streams are counted as `ignored`); samples
//! without zcio's attachment (plain Zenoh publishers) are delivered as
//! they come, and such an import ends only when stopped.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zcio::array::ArrayHeader;
use zcio::ring::{Producer, WriteError};
use zcio::tokio::{AsyncChannel, AsyncProducer};
use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};
use zenoh::bytes::ZBytes;
use zenoh::sample::{Sample, SampleKind};
use zenoh::Session;

use crate::error::{zenoh, BridgeError};
use crate::inbox::{Event, Inbox};
use crate::liveness::{parse_token, token_pattern};
use crate::stats::Counters;
use crate::wire::{Kind, Meta};

/// The code a ring sink is closed with when the remote producer died
/// (`EOWNERDEAD`); readers get `ProducerFailed { code: 130 }`.
pub const CODE_PRODUCER_DIED: u32 = libc::EOWNERDEAD as u32;
/// The code a ring sink is closed with when the exporting bridge vanished
/// mid-stream (`ECONNRESET`).
pub const CODE_EXPORTER_LOST: u32 = libc::ECONNRESET as u32;
/// The code a ring sink is closed with when the import is stopped in the
/// middle of a zcio stream (`ECANCELED`): the readers must not take the
/// truncated stream for a whole one.
pub const CODE_STOPPED: u32 = libc::ECANCELED as u32;

/// A local sink.
#[derive(Clone, Debug)]
pub enum Sink {
    /// A named ring: created with these options if it does not exist
    /// (`None`: it must exist). The bridge becomes its producer.
    Ring {
        /// The ring's name.
        name: String,
        /// How to create it.
        create: Option<zcio::ring::Options>,
    },
    /// A channel to the listener at `path`: one message per sample.
    Connect {
        /// The listener's socket path.
        path: PathBuf,
    },
}

impl Sink {
    /// Parse `ring:NAME` (created with `create` if missing) or `connect:PATH`.
    pub fn parse(spec: &str, create: Option<zcio::ring::Options>) -> Result<Self, BridgeError> {
        match spec.split_once(':') {
            Some(("ring", name)) if !name.is_empty() => Ok(Self::Ring {
                name: name.to_string(),
                create,
            }),
            Some(("connect", path)) if !path.is_empty() => Ok(Self::Connect { path: path.into() }),
            _ => Err(BridgeError::Spec(format!(
                "sink {spec:?}: expected ring:NAME (a named ring) or connect:PATH (a channel listener socket)"
            ))),
        }
    }
}

/// How samples are imported.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Catch up from the exporter's publication cache: once an exporter is
    /// visible, ask its cache for what it holds (the last `--history`
    /// samples), deliver those first, then the live ones (duplicates
    /// dropped by position). Off by default: without it an importer starts
    /// with the next live sample.
    pub history: bool,
    /// How long to wait for more samples after the exporter's liveliness
    /// token vanished before the stream is declared lost.
    pub grace: Duration,
    /// Largest sample accepted; larger ones are dropped and counted.
    pub max_sample: usize,
    /// Payload bytes queued between Zenoh and the sink before Zenoh's
    /// receive thread waits (back-pressure to the link).
    pub queue_bytes: usize,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            history: false,
            grace: crate::config::DEFAULT_GRACE,
            max_sample: crate::config::DEFAULT_MAX_SAMPLE,
            queue_bytes: 64 << 20,
        }
    }
}

/// How an import ended without error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportEnd {
    /// The stream ended cleanly; the sink was closed (end of stream).
    EndOfStream,
    /// Stopped on request. A ring sink in the middle of a zcio stream was
    /// closed with [`CODE_STOPPED`]; otherwise closed cleanly.
    Stopped,
}

/// The local end samples go into.
enum Local {
    Ring(AsyncProducer),
    Chan { ch: AsyncChannel, pool: Pool },
}

impl Local {
    fn open(sink: &Sink) -> Result<Self, BridgeError> {
        match sink {
            Sink::Ring { name, create } => {
                let map = match create {
                    Some(o) => o.create_or_open(name)?,
                    None => zcio::ring::RingMap::open(name, true)?,
                };
                let p = AsyncProducer::new(Producer::attach(map)?).map_err(|e| local("ring", e))?;
                Ok(Self::Ring(p))
            }
            Sink::Connect { path } => {
                let ch = Channel::connect(path, ChannelConfig::default())?;
                let ch = AsyncChannel::new(ch).map_err(|e| local("channel", e))?;
                Ok(Self::Chan {
                    ch,
                    pool: Pool::new(PoolConfig::named("zcio-bridge")),
                })
            }
        }
    }

    /// Write one sample: `header` (a `send_array` header) then the payload.
    async fn deliver(
        &mut self,
        payload: &ZBytes,
        header: Option<&ArrayHeader>,
        tag: u32,
        counters: &Counters,
    ) -> Result<(), BridgeError> {
        let hdr = header.map(ArrayHeader::to_bytes);
        let hl = hdr.as_ref().map_or(0, Vec::len);
        let total = hl + payload.len();
        match self {
            Self::Ring(p) => {
                let mut r = match p.reserve(total).await {
                    Ok(r) => r,
                    Err(WriteError::TooLarge { .. }) => {
                        counters.oversize(1);
                        p.producer().record_lost(1, total as u64);
                        return Ok(());
                    }
                    // A dropping ring dropped it (and counted it).
                    Err(WriteError::Dropped) => return Ok(()),
                    Err(e) => return Err(local("ring", e)),
                };
                if let Some(h) = &hdr {
                    r.put(h);
                }
                for s in payload.slices() {
                    r.put(s);
                }
                r.commit(tag).map_err(|e| local("ring", e))?;
            }
            Self::Chan { ch, pool } => {
                if total == 0 {
                    // A channel carries no empty messages.
                    counters.ignored(1);
                    return Ok(());
                }
                let mut buf = tokio::task::block_in_place(|| pool.alloc(total))
                    .map_err(|e| local("pool", e))?;
                let dst = buf.as_mut_slice();
                let mut at = 0;
                if let Some(h) = &hdr {
                    dst[..hl].copy_from_slice(h);
                    at = hl;
                }
                for s in payload.slices() {
                    dst[at..at + s.len()].copy_from_slice(s);
                    at += s.len();
                }
                let msg = Msg::from(buf.freeze().map_err(|e| local("pool", e))?);
                ch.send(msg).await.map_err(|e| local("channel", e))?;
            }
        }
        counters.sample(total);
        Ok(())
    }

    /// Tell local readers that `blocks` blocks (`bytes` bytes) were lost
    /// upstream (rings count them as drops; channels cannot say it).
    fn lost(&mut self, blocks: u64, bytes: u64) {
        if let Self::Ring(p) = self {
            p.producer().record_lost(blocks, bytes);
        }
    }

    /// Close: cleanly (`None`) or with an error code (rings only: a channel
    /// cannot tell readers why it closed).
    fn close(self, code: Option<u32>) {
        match (self, code) {
            (Self::Ring(p), None) => p.into_inner().close(),
            (Self::Ring(p), Some(c)) => p.into_inner().close_with_error(c),
            (Self::Chan { ch, .. }, _) => ch.channel().close(),
        }
    }
}

fn local(what: &'static str, e: impl std::fmt::Display) -> BridgeError {
    BridgeError::Local {
        what,
        why: e.to_string(),
    }
}

/// The zcio stream being followed.
struct Stream {
    id: u64,
    /// Position expected next (`None` until the first data sample).
    next: Option<u64>,
}

/// How the loop ended.
enum Finish {
    End,
    Failed(u32),
    Died(u32),
    Lost(u64),
    Stopped { mid_stream: bool },
}

/// Imports one key expression into one local sink.
pub struct Importer {
    session: Session,
    key: String,
    sink: Sink,
    opts: ImportOptions,
    counters: Arc<Counters>,
}

impl Importer {
    /// An importer of `key` (wildcards allowed) into `sink` on `session`.
    pub fn new(
        session: &Session,
        key: &str,
        sink: Sink,
        opts: ImportOptions,
    ) -> Result<Self, BridgeError> {
        crate::config::check_key(key, false)?;
        Ok(Self {
            session: session.clone(),
            key: key.to_string(),
            sink,
            opts,
            counters: Arc::new(Counters::default()),
        })
    }

    /// The live counters.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Run until the stream ends or `stop` completes. `ready` is called
    /// once the sink is open and the subscriptions are declared.
    pub async fn run(
        self,
        stop: impl Future<Output = ()>,
        ready: impl FnOnce(),
    ) -> Result<ImportEnd, BridgeError> {
        let mut local = Local::open(&self.sink)?;
        let inbox = Arc::new(Inbox::new(self.opts.queue_bytes));
        let tokens_in = inbox.clone();
        let tokens = self
            .session
            .liveliness()
            .declare_subscriber(token_pattern(&self.key))
            .history(true)
            .callback(move |s: Sample| {
                if let Some((token, key)) = parse_token(s.key_expr().as_str()) {
                    let alive = s.kind() == SampleKind::Put;
                    let key = key.to_string();
                    tokens_in.push(Event::Token { token, key, alive }, 0);
                }
            })
            .await
            .map_err(zenoh)?;
        tokio::pin!(stop);
        let max = self.opts.max_sample;
        let data_in = inbox.clone();
        let sub = self
            .session
            .declare_subscriber(self.key.clone())
            .callback(move |s: Sample| {
                let n = s.payload().len().min(max);
                data_in.push(Event::Sample(Box::new(s)), n);
            })
            .await
            .map_err(zenoh)?;
        // With history: once an exporter with a cache is visible, ask its
        // cache (after subscribing, so nothing falls between the two); the
        // cached samples go first, live ones it already had are dropped by
        // position.
        let mut early = std::collections::VecDeque::new();
        let stopped = |inbox: &Inbox, local: Local| {
            inbox.close();
            local.close(None);
            Ok(ImportEnd::Stopped)
        };
        if self.opts.history {
            let found = loop {
                let ev = tokio::select! {
                    biased;
                    () = &mut stop => None,
                    ev = inbox.pop() => Some(ev),
                };
                let Some(ev) = ev else {
                    drop((tokens, sub));
                    return stopped(&inbox, local);
                };
                let found = match &ev {
                    Event::Token {
                        token,
                        key,
                        alive: true,
                    } => Some((*token, key.clone())),
                    _ => None,
                };
                early.push_back(ev);
                if let Some(f) = found {
                    break f;
                }
            };
            if found.0.cached {
                match crate::cache::fetch(&self.session, found.0.stream, &found.1, &mut stop)
                    .await?
                {
                    Some(samples) => {
                        // Before anything live that arrived meanwhile.
                        let live = std::mem::take(&mut early);
                        early.extend(samples.into_iter().map(|s| Event::Sample(Box::new(s))));
                        early.extend(live);
                    }
                    None => {
                        drop((tokens, sub));
                        return stopped(&inbox, local);
                    }
                }
            }
        }
        ready();
        let finish = self.pump(&mut local, &inbox, early, stop).await;
        // Release Zenoh threads waiting for room before undeclaring (which
        // waits for callbacks in progress).
        inbox.close();
        drop(tokens);
        drop(sub);
        let finish = match finish {
            Ok(f) => f,
            Err(e) => {
                local.close(Some(CODE_EXPORTER_LOST));
                return Err(e);
            }
        };
        match finish {
            Finish::End => {
                local.close(None);
                Ok(ImportEnd::EndOfStream)
            }
            Finish::Failed(code) => {
                local.close(Some(code));
                Err(BridgeError::ProducerFailed { code })
            }
            Finish::Died(pid) => {
                local.close(Some(CODE_PRODUCER_DIED));
                Err(BridgeError::ProducerDied { pid })
            }
            Finish::Lost(stream) => {
                local.close(Some(CODE_EXPORTER_LOST));
                Err(BridgeError::ExporterLost {
                    stream,
                    grace: self.opts.grace,
                })
            }
            Finish::Stopped { mid_stream } => {
                local.close(mid_stream.then_some(CODE_STOPPED));
                Ok(ImportEnd::Stopped)
            }
        }
    }

    /// Move events into the sink until the stream finishes.
    async fn pump(
        &self,
        local: &mut Local,
        inbox: &Inbox,
        mut early: std::collections::VecDeque<Event>,
        mut stop: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<Finish, BridgeError> {
        let c = &*self.counters;
        let grace = self.opts.grace;
        let mut current: Option<Stream> = None;
        let mut live: HashMap<u64, HashSet<u64>> = HashMap::new();
        // When the followed stream is declared lost, unless something
        // arrives first (armed while it has no liveliness token).
        let mut lost_at: Option<Instant> = None;
        loop {
            let deadline = lost_at;
            let ev = if let Some(ev) = early.pop_front() {
                ev
            } else {
                tokio::select! {
                    biased;
                    // Mid-stream, the readers must not see a clean end.
                    () = &mut stop => return Ok(Finish::Stopped { mid_stream: current.is_some() }),
                    () = sleep_until(deadline) => {
                        let s = current.as_ref().map_or(0, |s| s.id);
                        return Ok(Finish::Lost(s));
                    }
                    ev = inbox.pop() => ev,
                }
            };
            let sample = match ev {
                Event::Token { token, alive, .. } => {
                    let set = live.entry(token.stream).or_default();
                    if alive {
                        set.insert(token.nonce);
                    } else {
                        set.remove(&token.nonce);
                    }
                    if current.as_ref().is_some_and(|s| s.id == token.stream) {
                        lost_at = set.is_empty().then(|| Instant::now() + grace);
                    }
                    continue;
                }
                Event::Sample(s) => s,
            };
            let len = sample.payload().len();
            if len > self.opts.max_sample {
                c.oversize(1);
                continue;
            }
            // A private copy of the attachment, then the checks.
            let att = sample.attachment().map(|a| a.to_bytes().into_owned());
            let meta = match att.as_deref() {
                Some(a) if Meta::is_ours(a) => match Meta::decode(a, len) {
                    Ok(m) => m,
                    Err(_) => {
                        c.malformed(1);
                        continue;
                    }
                },
                // A plain Zenoh publisher (or another application's
                // attachment): the payload is the message.
                _ => {
                    if sample.kind() == SampleKind::Put {
                        local.deliver(sample.payload(), None, 0, c).await?;
                    } else {
                        c.ignored(1);
                    }
                    continue;
                }
            };
            let is_put = sample.kind() == SampleKind::Put;
            if is_put != (meta.kind == Kind::Data) {
                c.malformed(1);
                continue;
            }
            let stream = match &mut current {
                Some(s) if s.id != meta.stream => {
                    c.ignored(1);
                    continue;
                }
                Some(s) => s,
                None => current.insert(Stream {
                    id: meta.stream,
                    next: None,
                }),
            };
            // Activity of the followed stream: (re)arm the loss timer only
            // while it has no live token.
            lost_at = live
                .get(&stream.id)
                .is_none_or(HashSet::is_empty)
                .then(|| Instant::now() + grace);
            let expected = stream.next.unwrap_or(meta.pos);
            if meta.pos < expected {
                // Delivered before (history, a restarted exporter).
                c.duplicates(1);
                continue;
            }
            if meta.pos > expected {
                let gap = meta.pos - expected;
                c.gaps(1);
                c.lost(gap);
                let blocks = if meta.byte_positions { 1 } else { gap };
                let bytes = if meta.byte_positions { gap } else { 0 };
                local.lost(blocks, bytes);
            }
            match meta.kind {
                Kind::Data => {
                    local
                        .deliver(sample.payload(), meta.array.as_ref(), meta.tag, c)
                        .await?;
                    stream.next = Some(meta.next);
                }
                Kind::End => return Ok(Finish::End),
                Kind::Failed { code } => return Ok(Finish::Failed(code)),
                Kind::Died { pid } => return Ok(Finish::Died(pid)),
                // Only ever a reply to a cache query (rejected above).
                Kind::CacheRange => c.malformed(1),
            }
        }
    }
}

/// Sleep until `at`, or forever without a deadline.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
