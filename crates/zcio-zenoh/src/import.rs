//! The importing half: samples of a Zenoh key expression written into a
//! local sink — a named ring (one block per sample), a channel connection
//! (one message per sample) or a bounded queue the calling process drains
//! (`delivery.rs`). Each sample is written once, from Zenoh's
//! receive buffers into the ring block or pool buffer, by the Zenoh thread
//! that received it (see `follower.rs`); every local reader then reads
//! those pages in place.
//!
//! One stream at a time: the first zcio stream seen is followed to its end
//! (samples of other zcio streams are counted as `ignored`); samples
//! without zcio's attachment (plain Zenoh publishers) are delivered as
//! they come, and such an import ends only when stopped.
//!
//! Only the exporter's end of stream is a clean end: an import that ends
//! any other way — stopped before, during or after the first sample, no
//! peer reached within [`ImportOptions::connect_timeout`], the exporter
//! lost — closes a ring sink with an error code, so its readers never take
//! what arrived for the whole stream.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zcio::ring::{OpenError, Producer, RingMap};
use zcio::{Channel, ChannelConfig, Pool, PoolConfig};
use zenoh::sample::Sample;
use zenoh::Session;

use crate::delivery::DeliverySender;
use crate::error::{local, zenoh, BridgeError};
use crate::follower::{Finish, Follower, Local};
use crate::liveness::token_pattern;
use crate::stats::Counters;

/// The code a ring sink is closed with when the remote producer died
/// (`EOWNERDEAD`); readers get `ProducerFailed { code: 130 }`.
pub const CODE_PRODUCER_DIED: u32 = libc::EOWNERDEAD as u32;
/// The code a ring sink is closed with when the exporting bridge vanished
/// mid-stream (`ECONNRESET`).
pub const CODE_EXPORTER_LOST: u32 = libc::ECONNRESET as u32;
/// The code a ring sink is closed with when the import is stopped before
/// the exporter's end of stream (`ECANCELED`) — before the first sample,
/// mid-stream or after samples of plain Zenoh publishers alike: the
/// readers must not take what arrived (possibly nothing) for a whole
/// stream.
pub const CODE_STOPPED: u32 = libc::ECANCELED as u32;
/// The code a ring sink is closed with when no Zenoh peer was reached
/// within [`ImportOptions::connect_timeout`] (`ETIMEDOUT`).
pub const CODE_UNREACHABLE: u32 = libc::ETIMEDOUT as u32;

/// A local sink.
#[derive(Clone, Debug)]
pub enum Sink {
    /// A named ring: created with these options if it does not exist
    /// (`None`: it must exist). The bridge becomes its producer. A ring the
    /// import created is removed when it ends unless
    /// [`ImportOptions::keep`]; one that existed before is never removed.
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
    /// Samples handed to this process: each delivered sample (in stream
    /// order, after the same checks as for the other sinks) goes into the
    /// queue of [`crate::deliveries`], whose [`crate::Deliveries`] end
    /// the caller drains; the import's end closes it
    /// ([`crate::Next::Closed`], with the code a ring sink would get).
    Deliver(DeliverySender),
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
    /// History mode: payload bytes of live samples held back while the
    /// cache is asked, before Zenoh's receive thread waits (back-pressure
    /// to the link). Otherwise samples go straight into the sink.
    pub queue_bytes: usize,
    /// Fail the import ([`BridgeError::Unreachable`], the sink closed with
    /// [`CODE_UNREACHABLE`]) when the session has no Zenoh peer or router
    /// (an endpoint it connects to answered, or a peer connected to one of
    /// its listeners) this long after [`Importer::run`] started. `None`,
    /// the default: wait as long as it takes (Zenoh keeps retrying).
    pub connect_timeout: Option<Duration>,
    /// Keep a ring sink this import created when it ends. By default it is
    /// removed then (whatever the end: end of stream, error, stop): its
    /// readers that have it open read on to its end (a removed ring's
    /// pages stay while they are mapped), a reader that comes later finds
    /// no ring. A ring that existed before the import is never removed.
    pub keep: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            history: false,
            grace: crate::config::DEFAULT_GRACE,
            max_sample: crate::config::DEFAULT_MAX_SAMPLE,
            queue_bytes: 64 << 20,
            connect_timeout: None,
            keep: false,
        }
    }
}

/// How an import ended without error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportEnd {
    /// The exporter's end of stream arrived; the sink was closed cleanly,
    /// after everything before it.
    EndOfStream,
    /// Stopped on request before an end of stream: a ring sink was closed
    /// with [`CODE_STOPPED`] (whether or not a sample had arrived), a
    /// channel sink closed (it has no error close).
    Stopped,
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
            counters: Arc::new(Counters::importer(key)),
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
        let started = Instant::now();
        let (local, created) = open_local(&self.sink)?;
        // Dropped last (declared before everything that uses the sink):
        // the ring is removed after it was closed, on every way out.
        let _created = created.map(|c| c.removed(!self.opts.keep));
        let follower = Follower::new(local, self.counters.clone(), &self.opts, self.opts.history);
        let on_token = follower.clone();
        let tokens = self
            .session
            .liveliness()
            .declare_subscriber(token_pattern(&self.key))
            .history(true)
            .callback(move |s: Sample| on_token.on_token(&s))
            .await
            .map_err(zenoh)?;
        let on_sample = follower.clone();
        let sub = self
            .session
            .declare_subscriber(self.key.clone())
            .callback(move |s: Sample| on_sample.on_sample(s))
            .await
            .map_err(zenoh)?;
        // The import halts on the caller's stop, or when no peer was
        // reached in time (`unreached` tells the two apart).
        let unreached = AtomicBool::new(false);
        let halt = async {
            tokio::select! {
                () = stop => {}
                () = no_peer_by(&self.session, self.opts.connect_timeout.map(|t| started + t)) => {
                    // SYNC: read after `halt` completed, on this task.
                    unreached.store(true, Ordering::Relaxed);
                }
            }
        };
        tokio::pin!(halt);
        // With history: once an exporter with a cache is visible, ask its
        // cache (after subscribing, so nothing falls between the two); the
        // cached samples go first, then those held back meanwhile (live ones
        // the cache also had are dropped by position).
        let caught_up = if self.opts.history {
            self.catch_up(&follower, &mut halt).await
        } else {
            Ok(true)
        };
        match caught_up {
            Ok(false) => self.halted(&follower, &unreached),
            Err(e) => follower.fail(e),
            Ok(true) => {
                ready();
                // The callbacks do the work; this waits for them to finish,
                // for the loss timer and for the stop.
                while !follower.finished() {
                    let deadline = follower.lost_deadline();
                    tokio::select! {
                        biased;
                        () = &mut halt => self.halted(&follower, &unreached),
                        () = sleep_until(deadline) => follower.check_lost(),
                        () = follower.wake.notified() => {}
                    }
                }
            }
        }
        // Undeclare (waits for callbacks in progress; halted, they return
        // within one wait slice), then close the sink.
        drop(tokens);
        drop(sub);
        let finish = follower.take_finish().unwrap_or(Ok(Finish::Stopped));
        let finish = match finish {
            Ok(f) => f,
            Err(e) => {
                let code = match e {
                    BridgeError::Unreachable { .. } => CODE_UNREACHABLE,
                    _ => CODE_EXPORTER_LOST,
                };
                follower.close(Some(code));
                return Err(e);
            }
        };
        match finish {
            Finish::End => {
                follower.close(None);
                Ok(ImportEnd::EndOfStream)
            }
            Finish::Failed(code) => {
                follower.close(Some(code));
                Err(BridgeError::ProducerFailed { code })
            }
            Finish::Died(pid) => {
                follower.close(Some(CODE_PRODUCER_DIED));
                Err(BridgeError::ProducerDied { pid })
            }
            Finish::Lost(stream) => {
                follower.close(Some(CODE_EXPORTER_LOST));
                Err(BridgeError::ExporterLost {
                    stream,
                    grace: self.opts.grace,
                })
            }
            // Stopped before the exporter's end of stream: never a clean
            // end, whether a sample had arrived or not.
            Finish::Stopped => {
                follower.close(Some(CODE_STOPPED));
                Ok(ImportEnd::Stopped)
            }
        }
    }

    /// The halt future completed: stopped by the caller, or no peer reached
    /// within the connect timeout.
    fn halted(&self, follower: &Follower, unreached: &AtomicBool) {
        // SYNC: stored by the halt future on this task.
        if unreached.load(Ordering::Relaxed) {
            follower.fail(BridgeError::Unreachable {
                after: self.opts.connect_timeout.unwrap_or_default(),
            });
        } else {
            follower.stop();
        }
    }

    /// History mode: wait for an exporter, fetch its cache and deliver it
    /// before what was held back. `false`: stopped first.
    async fn catch_up(
        &self,
        follower: &Arc<Follower>,
        stop: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<bool, BridgeError> {
        let (token, key) = loop {
            if let Some(found) = follower.first_exporter() {
                break found;
            }
            tokio::select! {
                biased;
                () = stop.as_mut() => return Ok(false),
                () = follower.wake.notified() => {}
            }
        };
        let cached = if token.cached {
            match crate::cache::fetch(&self.session, token.stream, &key, stop).await? {
                Some(samples) => samples,
                None => return Ok(false),
            }
        } else {
            Vec::new()
        };
        // Writing into the sink may wait for room: off the async threads.
        let f = follower.clone();
        tokio::task::spawn_blocking(move || f.catch_up(cached))
            .await
            .map_err(|e| local("import", e))?;
        Ok(true)
    }
}

/// Open the sink: a ring (created if asked and missing) or a channel; the
/// ring if this call created it.
fn open_local(sink: &Sink) -> Result<(Local, Option<CreatedRing>), BridgeError> {
    match sink {
        Sink::Ring { name, create } => {
            let (map, created) = match create {
                Some(o) => create_or_open(o, name)?,
                None => (RingMap::open(name, true)?, None),
            };
            // A failed attach drops `created`: the ring goes with it.
            let p = Producer::attach(map)?;
            Ok((Local::Ring(Box::new(p)), created))
        }
        Sink::Deliver(tx) => Ok((Local::Deliver(tx.clone()), None)),
        Sink::Connect { path } => Ok((
            Local::Chan {
                ch: Channel::connect(path, ChannelConfig::default())?,
                pool: Pool::new(PoolConfig::named("zcio-bridge")),
            },
            None,
        )),
    }
}

/// Open ring `name`, or create it with `o` if it does not exist (then
/// also returned as the [`CreatedRing`] to remove).
fn create_or_open(
    o: &zcio::ring::Options,
    name: &str,
) -> Result<(Arc<RingMap>, Option<CreatedRing>), OpenError> {
    loop {
        match RingMap::open(name, true) {
            Ok(map) => return Ok((map, None)),
            Err(OpenError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        match o.create(name) {
            Ok(map) => {
                let created = CreatedRing {
                    map: map.clone(),
                    remove: true,
                };
                return Ok((map, Some(created)));
            }
            // Created by someone else meanwhile: theirs, open it.
            Err(OpenError::Exists(_)) => {}
            Err(e) => return Err(e),
        }
    }
}

/// A ring this import created: removed when dropped unless told otherwise
/// (the name only — processes that have it open keep using it), if the
/// name still belongs to this very file (not to a ring someone made under
/// the same name after removing ours).
struct CreatedRing {
    map: Arc<RingMap>,
    remove: bool,
}

impl CreatedRing {
    /// Whether to remove it when dropped.
    fn removed(mut self, remove: bool) -> Self {
        self.remove = remove;
        self
    }
}

impl Drop for CreatedRing {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if !self.remove {
            return;
        }
        let id = |m: &RingMap| {
            let f = std::fs::File::from(m.fd().try_clone_to_owned().ok()?);
            f.metadata().ok().map(|md| (md.dev(), md.ino()))
        };
        let name = self.map.name();
        let ours = id(&self.map);
        let named = RingMap::open(name, false).ok().and_then(|m| id(&m));
        if ours.is_some() && ours == named {
            let _ = zcio::ring::unlink(name);
        }
    }
}

/// Resolves at `deadline` if `session` has had no transport to another
/// Zenoh node by then; never otherwise (nor without a deadline).
async fn no_peer_by(session: &Session, deadline: Option<Instant>) {
    let Some(at) = deadline else {
        return std::future::pending().await;
    };
    match tokio::time::timeout_at(at.into(), crate::config::first_peer(session)).await {
        // Reached: this never fires. A listener that could not be declared
        // (a closing session) cannot tell; the import's other ends apply.
        Ok(_) => std::future::pending().await,
        Err(_elapsed) => {}
    }
}

/// Sleep until `at`, or forever without a deadline.
async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t.into()).await,
        None => std::future::pending().await,
    }
}
