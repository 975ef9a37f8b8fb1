//! `zcio bridge export|import`: a ring or channel path across hosts through
//! Zenoh (`zcio_zenoh`).
//!
//! Contract (scripts, tests and `zcio-bench bridge` depend on it): once the
//! local end is open and the Zenoh declarations are made, exactly one line
//! on stdout (flushed): `ready`, followed by the endpoints the session
//! listens on, space-separated (`ready tcp/127.0.0.1:40123` after
//! `--listen tcp/127.0.0.1:0`); then run until the stream ends, SIGINT or
//! SIGTERM, or `--duration`; a summary on stderr with `--stats`, the
//! statistics as JSON with `--stats-json PATH`. `ready` says the local end
//! is open, not that a peer was reached: Zenoh connects in the background,
//! and an endpoint given with `--connect` that has not answered a second
//! later is reported on stderr (`cannot reach … yet: retrying`).
//!
//! Exit status: 0 for an end of stream (an export also for a requested
//! stop), 1 when the stream failed (the producer failed or died, the
//! exporting bridge vanished, no peer within `--connect-timeout`, a local
//! error), 2 for usage errors, 3 for an import stopped (SIGINT, SIGTERM,
//! `--duration`) before the exporter's end of stream — its sink was closed
//! with an error, never as a clean end.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use zcio::ring::{Layout, OpenError, RingMap, Start};
use zcio_fmt::{bytes_u64, parse_count, parse_seconds, parse_size};
use zcio_zenoh::zenoh;
use zcio_zenoh::{
    BridgeError, Counters, ExportEnd, ExportOptions, Exporter, ImportEnd, ImportOptions, Importer,
    SessionOptions, Sink, Source, Stats, DEFAULT_MAX_SAMPLE, MAX_SAMPLE_LIMIT,
};

use crate::ring::{describe, CreateArgs};
use crate::usage;

/// Exit status of an import stopped before the exporter's end of stream.
pub const EXIT_STOPPED: i32 = 3;

/// How long the endpoints given with `--connect` may take to answer before
/// the bridge says it cannot reach them (Zenoh's first retry comes after
/// one second).
const REACH_WARNING: Duration = Duration::from_secs(1);

/// Cross hosts through Zenoh: export a ring or channel listener to a key,
/// import a key into a ring or channel.
#[derive(Subcommand, Debug)]
pub enum BridgeCmd {
    /// Publish a local source (ring:NAME or listen:PATH) to a Zenoh key.
    #[command(after_help = "Examples:\n  \
        zcio bridge export ring:frames --key cam/front --listen tcp/0.0.0.0:7447\n  \
        zcio bridge export listen:/run/app/out.sock --key app/out --connect tcp/10.0.0.2:7447\n  \
        zcio bridge export ring:frames --key cam/front --config zenoh-tls.json5 --stats\n  \
        zcio bridge export ring:frames --key cam/front --listen tcp/0.0.0.0:7447 --history 64\n\n\
        The export reads nothing until a first subscriber of KEY appears (--no-wait: at\n\
        once). A ring export reads every block (from the newest unless --from oldest) and ends\n\
        when the ring's producer closes it (end of stream) or fails or dies (the remote\n\
        readers see the same). Blocks of block and srp rings go to Zenoh from the ring's\n\
        pages (--copy: copied out first; --history N keeps a cache of copies for late\n\
        importers). A listener export accepts any number of channels and publishes every\n\
        message until stopped.")]
    Export(ExportArgs),
    /// Write the samples of a Zenoh key expression into a local sink (ring:NAME or connect:PATH).
    #[command(after_help = "Examples:\n  \
        zcio bridge import cam/front --to ring:frames --connect tcp/10.0.0.1:7447\n  \
        zcio pipe get frames > out &            # any number of local readers, zero-copy\n  \
        zcio bridge import app/out --to connect:/run/app/in.sock --listen tcp/0.0.0.0:7447\n\n\
        A ring sink that does not exist is created (variable layout, 128 MiB, mode 0600\n\
        unless --layout/--size/--mode say otherwise); the bridge becomes its producer,\n\
        and removes it when the import ends (--keep: leave it; readers attached then\n\
        read on to the end). A ring that existed before is never removed.\n\
        An existing ring is used as it is (the options given must match it) and must keep\n\
        the samples apart: layout variable, slotted or descriptors.\n\
        The import ends with the remote stream: end of stream closes the ring, an error\n\
        close, a producer's death or the exporting bridge vanishing closes it with an\n\
        error code (ProducerFailed for its readers). Stopped (SIGINT, SIGTERM, --duration)\n\
        before the exporter's end of stream, it closes the ring with ECANCELED and exits\n\
        with status 3: its readers never see a clean end of a stream that did not end.\n\
        Samples of plain Zenoh publishers are delivered as they are.")]
    Import(ImportArgs),
}

/// The Zenoh session's options: of both bridge directions and of
/// `zcio record zenoh:KEY`.
#[derive(Args, Debug)]
pub struct SessionArgs {
    /// Listen for Zenoh peers on ENDPOINT (e.g. tcp/127.0.0.1:7447); repeatable.
    #[arg(long, value_name = "ENDPOINT")]
    listen: Vec<String>,
    /// Connect to a Zenoh peer or router at ENDPOINT; repeatable.
    #[arg(long, value_name = "ENDPOINT")]
    connect: Vec<String>,
    /// A Zenoh configuration file (JSON5: TLS, access control); --listen/--connect add to it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Allow multicast scouting (off by default: name the peers).
    #[arg(long)]
    scout: bool,
    /// Largest sample sent or accepted (larger ones are dropped and counted).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value_t = DEFAULT_MAX_SAMPLE)]
    pub(crate) max_size: usize,
}

impl SessionArgs {
    /// Whether any option was given (other than the defaults).
    pub(crate) fn any(&self) -> bool {
        !self.listen.is_empty()
            || !self.connect.is_empty()
            || self.config.is_some()
            || self.scout
            || self.max_size != DEFAULT_MAX_SAMPLE
    }

    /// The checked session options (usage errors for what the user gave
    /// wrong), before anything is opened.
    pub(crate) fn options(&self) -> Result<SessionOptions> {
        if self.max_size == 0 || self.max_size > MAX_SAMPLE_LIMIT {
            return Err(usage(format!(
                "--max-size {} is out of range: give 1B..=1GiB",
                self.max_size
            )));
        }
        let session = SessionOptions {
            config_file: self.config.clone(),
            listen: self.listen.clone(),
            connect: self.connect.clone(),
            scout: self.scout,
            max_sample: self.max_size,
        };
        session.zenoh_config().map_err(bridge_err)?;
        Ok(session)
    }

    /// What `--connect` (or the `--config` file) asks to connect to, for
    /// messages; `None` if nothing.
    pub(crate) fn connect_targets(&self, opts: &SessionOptions) -> Option<String> {
        if !self.connect.is_empty() {
            return Some(self.connect.join(", "));
        }
        let file = self.config.as_ref()?;
        let eps = opts
            .zenoh_config()
            .ok()?
            .get_json("connect/endpoints")
            .ok()?;
        eps.contains('/')
            .then(|| format!("the endpoints of {} ({eps})", file.display()))
    }
}

/// How an importer follows the remote stream: of `bridge import` and of
/// `zcio record zenoh:KEY`.
#[derive(Args, Debug)]
pub struct FollowArgs {
    /// Seconds to wait for more samples once the exporter's liveliness token is gone.
    #[arg(long, value_name = "SECS", default_value_t = zcio_zenoh::DEFAULT_GRACE.as_secs_f64(), value_parser = parse_seconds)]
    grace: f64,
    /// Fail (exit status 1; a bridge import closes its ring sink with ETIMEDOUT) if no Zenoh peer is reached within SECS seconds [default: keep retrying].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    connect_timeout: Option<f64>,
}

impl FollowArgs {
    /// Whether any option was given (other than the defaults).
    pub(crate) fn any(&self) -> bool {
        self.connect_timeout.is_some() || self.grace != zcio_zenoh::DEFAULT_GRACE.as_secs_f64()
    }

    /// The checked grace period and connect timeout.
    pub(crate) fn durations(&self) -> Result<(Duration, Option<Duration>)> {
        if !(self.grace.is_finite() && self.grace >= 0.0 && self.grace < 1e6) {
            return Err(usage(format!(
                "--grace {} is not a number of seconds",
                self.grace
            )));
        }
        let connect_timeout = match self.connect_timeout {
            Some(t) if t.is_finite() && t > 0.0 && t < 1e9 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(usage(format!(
                    "--connect-timeout {t} is not a positive number of seconds"
                )))
            }
            None => None,
        };
        Ok((Duration::from_secs_f64(self.grace), connect_timeout))
    }
}

/// Options of both directions: the Zenoh session and the report.
#[derive(Args, Debug)]
pub struct CommonArgs {
    #[command(flatten)]
    session: SessionArgs,
    /// Stop after SECS seconds [default: run until the stream ends or SIGINT/SIGTERM].
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    duration: Option<f64>,
    /// Print a summary on stderr at the end (samples, bytes, drops, gaps, rate).
    #[arg(long)]
    stats: bool,
    /// Write the final statistics as JSON to PATH.
    #[arg(long, value_name = "PATH")]
    stats_json: Option<PathBuf>,
    /// No progress line.
    #[arg(long, short)]
    quiet: bool,
}

/// Where a ring export starts.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum FromArg {
    /// Blocks written from now on.
    Newest,
    /// The oldest block the ring still holds.
    Oldest,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// ring:NAME (every block of a named ring) or listen:PATH (every message of every channel that connects).
    #[arg(value_name = "SOURCE")]
    source: String,
    /// The Zenoh key to publish to (no wildcards).
    #[arg(long, value_name = "KEY")]
    key: String,
    /// Samples kept for late joiners (`import --history`) and recovery (0: no cache, the default; memory: up to N × --max-size). A cache keeps copies, so with one every ring block is copied out instead of lent.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = parse_count::<usize>)]
    history: usize,
    /// Where a ring export starts.
    #[arg(long, value_enum, default_value_t = FromArg::Newest)]
    from: FromArg,
    /// Start reading the source at once, without waiting for a first subscriber of the key.
    #[arg(long)]
    no_wait: bool,
    /// Copy each ring block out before publishing it. Without it, blocks of 16 KiB or more of block and srp rings are lent to Zenoh from the ring's pages (no copy out; smaller ones cost less to copy), which trusts the ring's producer to keep the ring protocol, as every local reader does (docs/bridge.md).
    #[arg(long)]
    copy: bool,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The Zenoh key expression to import (wildcards allowed).
    #[arg(value_name = "KEY")]
    key: String,
    /// ring:NAME (created if missing; the bridge is its producer) or connect:PATH (a channel listener).
    #[arg(long, value_name = "SINK")]
    to: String,
    /// Catch up from the exporter's cache: a late joiner gets the last samples it holds (see docs/bridge.md).
    #[arg(long)]
    history: bool,
    #[command(flatten)]
    follow: FollowArgs,
    /// Keep the ring when the import ends. By default a ring this import created is removed then (readers that have it open read on to its end); a ring that existed before is never removed.
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    create: CreateArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// Run `zcio bridge …`; `Ok(status)` is the exit status.
pub fn run(cmd: BridgeCmd) -> Result<i32> {
    let common = match &cmd {
        BridgeCmd::Export(a) => &a.common,
        BridgeCmd::Import(a) => &a.common,
    };
    // Validate everything the user gave before touching anything.
    let session = common.session.options()?;
    let duration = match common.duration {
        Some(d) if d.is_finite() && d > 0.0 && d < 1e9 => Some(Duration::from_secs_f64(d)),
        Some(d) => {
            return Err(usage(format!(
                "--duration {d} is not a positive number of seconds"
            )))
        }
        None => None,
    };
    keep_freed_memory();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        match cmd {
            BridgeCmd::Export(a) => export(a, session, duration).await,
            BridgeCmd::Import(a) => import(a, session, duration).await,
        }
    })
}

/// Keep memory the allocator gets back for the next sample instead of
/// returning it to the kernel. Zenoh reassembles each large sample in a
/// fresh buffer; with glibc's adaptive thresholds a bridge process would at
/// times (measured: two full benchmark runs out of two, at 1 MiB) give that
/// buffer back after every sample and take a page fault per 4 KiB page of
/// the next one — the importer then cost 850–990 µs per 1 MiB sample
/// instead of about 430. Fixed thresholds keep buffers of up to 32 MiB (the
/// largest glibc allows) on the heap and never trim it: a bridge holds on
/// to its peak receive memory, bounded by `--max-size` per sample in
/// flight. Called before any thread starts.
pub(crate) fn keep_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: `mallopt` only sets allocator parameters (it takes the
    // allocator's lock); no other thread of ours runs yet. A refused value
    // (0 returned) leaves glibc's defaults, which is also correct.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

pub(crate) fn bridge_err(e: BridgeError) -> anyhow::Error {
    if e.is_usage() {
        usage(e)
    } else {
        e.into()
    }
}

/// Resolves on SIGINT, SIGTERM or after `duration`. The handlers are
/// installed now (not when the future is first polled), so a signal that
/// arrives right after the `ready` line stops the bridge cleanly instead
/// of killing it.
fn stop_signal(duration: Option<Duration>) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let handlers = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = handlers else {
            // Without handlers the default action (exit) still stops us.
            return std::future::pending().await;
        };
        let timer = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            () = timer => {}
        }
    }
}

/// The endpoints the session listens on (port 0 resolved), space-separated.
pub(crate) async fn listening(session: &zenoh::Session) -> String {
    let locs = session.info().locators().await;
    locs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `ready` line, with the endpoints the session listens on.
pub(crate) fn announce(endpoints: &str) {
    let mut out = std::io::stdout().lock();
    // Ignored: a closed stdout must not stop the bridge.
    let _ = if endpoints.is_empty() {
        writeln!(out, "ready")
    } else {
        writeln!(out, "ready {endpoints}")
    };
    let _ = out.flush();
}

async fn export(a: ExportArgs, opts: SessionOptions, duration: Option<Duration>) -> Result<i32> {
    let mut source = Source::parse(&a.source).map_err(bridge_err)?;
    if let Source::Ring { start, .. } = &mut source {
        *start = match a.from {
            FromArg::Newest => Start::Newest,
            FromArg::Oldest => Start::Oldest,
        };
    }
    zcio_zenoh::check_key(&a.key, true).map_err(bridge_err)?;
    let stop = stop_signal(duration);
    let session = opts.open().await?;
    let ex = Exporter::new(
        &session,
        source,
        &a.key,
        ExportOptions {
            history: a.history,
            max_sample: a.common.session.max_size,
            wait_for_subscriber: !a.no_wait,
            copy: a.copy,
            ..ExportOptions::default()
        },
    )
    .map_err(bridge_err)?;
    let what = format!("{} → {}", a.source, a.key);
    let report = Report::start(&a.common, ex.counters(), "export", &what);
    let eps = listening(&session).await;
    let reach = watch_reach(
        &session,
        "zcio bridge export",
        a.common.session.connect_targets(&opts),
    );
    let res = ex.run(stop, || announce(&eps)).await;
    if let Some(r) = reach {
        r.abort();
    }
    let res = res.map(|e| e == ExportEnd::EndOfStream);
    conclude(session, report, &a.common, res, 0).await
}

/// Close the session — it sends what Zenoh still queues, an end of stream
/// among it, before the process exits — then the summary; the exit status.
/// `res`: whether the stream ended (or was stopped), or why it failed.
/// `stopped`: the exit status of a requested stop.
async fn conclude(
    session: zenoh::Session,
    report: Report,
    common: &CommonArgs,
    res: Result<bool, BridgeError>,
    stopped: i32,
) -> Result<i32> {
    let end = match &res {
        Ok(true) => "end of stream",
        Ok(false) => "stopped",
        Err(_) => "failed",
    };
    let _ = session.close().await;
    report.finish(common, end)?;
    res.map(|ended| if ended { 0 } else { stopped })
        .map_err(bridge_err)
}

/// Say on stderr when the endpoints to connect to have not answered
/// [`REACH_WARNING`] after the start (`ready` does not wait for them), and
/// again once a peer is reached (`who`: the command, the messages' prefix).
/// Abort the task at the end.
pub(crate) fn watch_reach(
    session: &zenoh::Session,
    who: &'static str,
    targets: Option<String>,
) -> Option<tokio::task::JoinHandle<()>> {
    let targets = targets?;
    let session = session.clone();
    Some(tokio::spawn(async move {
        let first = zcio_zenoh::first_peer(&session);
        tokio::pin!(first);
        if tokio::time::timeout(REACH_WARNING, &mut first)
            .await
            .is_ok()
        {
            return;
        }
        eprintln!("{who}: warning: cannot reach {targets} yet: retrying");
        if let Ok(zid) = first.await {
            eprintln!("{who}: reached a Zenoh peer ({zid})");
        }
    }))
}

async fn import(a: ImportArgs, opts: SessionOptions, duration: Option<Duration>) -> Result<i32> {
    zcio_zenoh::check_key(&a.key, false).map_err(bridge_err)?;
    let mut sink = Sink::parse(&a.to, None).map_err(bridge_err)?;
    let (grace, connect_timeout) = a.follow.durations()?;
    let mut create = a.create.clone();
    if let Sink::Ring { .. } = &sink {
        if create.layout.map(Layout::from) == Some(Layout::Index) {
            return Err(usage(
                "an index ring holds no data: import into a data ring",
            ));
        }
        create
            .layout
            .get_or_insert(crate::ring::LayoutArg::Variable);
        create.size.get_or_insert(128 << 20);
    } else if a.create.any() || a.keep {
        return Err(usage(
            "--size/--layout/--policy/--mode/--keep apply only to ring sinks",
        ));
    }
    let stop = stop_signal(duration);
    let session = opts.open().await?;
    // The ring only once the session is up (a refused endpoint leaves no
    // ring behind), and by the importer, which removes the ring it created
    // when it ends unless --keep. Here only the checks of `pipe put`: the
    // options given must fit an existing ring, or make a valid new one.
    let sink_name = match &mut sink {
        Sink::Ring { name, create: how } => {
            match RingMap::open(name, true) {
                // Only the options given must fit an existing ring (the
                // defaults above are for a new one).
                Ok(map) => {
                    if a.create.check_existing(&map)? {
                        eprintln!(
                            "zcio: note: ring {name} already exists ({}); the create options given match it",
                            crate::ring::describe(map.geometry())
                        );
                    }
                    check_sink_layout(&map, &a.create)?;
                }
                Err(OpenError::NotFound(_)) => create.check_new()?,
                Err(e) => return Err(crate::ring::open_error(name, e)),
            }
            *how = Some(create.options());
            Some(name.clone())
        }
        Sink::Connect { .. } | Sink::Deliver(_) => None,
    };
    let im = Importer::new(
        &session,
        &a.key,
        sink,
        ImportOptions {
            history: a.history,
            grace,
            max_sample: a.common.session.max_size,
            connect_timeout,
            keep: a.keep,
            ..ImportOptions::default()
        },
    )
    .map_err(bridge_err)?;
    let what = format!("{} → {}", a.key, a.to);
    let report = Report::start(&a.common, im.counters(), "import", &what);
    let eps = listening(&session).await;
    let targets = a.common.session.connect_targets(&opts);
    let reach = watch_reach(&session, "zcio bridge import", targets.clone());
    let res = im.run(stop, || announce(&eps)).await;
    if let Some(r) = reach {
        r.abort();
    }
    match &res {
        Ok(ImportEnd::Stopped) => eprintln!(
            "zcio bridge import: stopped before the end of the stream: {} (exit status {EXIT_STOPPED})",
            match &sink_name {
                Some(n) => format!("ring {n} closed with ECANCELED, its readers see the stream cut"),
                None => "the channel was closed".to_string(),
            }
        ),
        Err(BridgeError::Unreachable { .. }) => eprintln!(
            "zcio bridge import: cannot reach {} within --connect-timeout: {}",
            targets.as_deref().unwrap_or("any Zenoh peer"),
            match &sink_name {
                Some(n) => format!("ring {n} closed with ETIMEDOUT"),
                None => "the channel was closed".to_string(),
            }
        ),
        _ => {}
    }
    let res = res.map(|e| e == ImportEnd::EndOfStream);
    conclude(session, report, &a.common, res, EXIT_STOPPED).await
}

/// An existing ring sink must keep the samples apart (the import writes
/// each as one block), unless `--layout continuous` asks for one byte
/// stream.
fn check_sink_layout(map: &RingMap, given: &CreateArgs) -> Result<()> {
    let name = map.name();
    let g = map.geometry();
    let why = match g.layout {
        Layout::Continuous if given.layout.is_some() => return Ok(()),
        Layout::Continuous => "a byte stream",
        Layout::Index => "it holds no data, only pointers into other rings",
        Layout::Slotted | Layout::Variable | Layout::Descriptors => return Ok(()),
    };
    Err(usage(format!(
        "ring {name} is {} ({why}): an import writes each sample as one block and needs a \
         message-preserving layout: variable, slotted or descriptors. Remove it (`zcio ring rm \
         {name}`) and the import creates it as a variable ring, or import into another ring{}",
        describe(g),
        if g.layout == Layout::Continuous {
            ", or give --layout continuous to take the samples as one byte stream without their boundaries"
        } else {
            ""
        }
    )))
}

/// Progress while running, summary and JSON at the end.
struct Report {
    counters: Arc<Counters>,
    t0: Instant,
    cpu0: f64,
    pb: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
    verb: &'static str,
    what: String,
}

impl Report {
    fn start(c: &CommonArgs, counters: Arc<Counters>, verb: &'static str, what: &str) -> Self {
        use std::io::IsTerminal;
        let pb = (!c.quiet && std::io::stderr().is_terminal()).then(|| {
            let pb = ProgressBar::new_spinner();
            pb.set_style(
                ProgressStyle::with_template("{spinner} {msg} [{elapsed_precise}]")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            pb.enable_steady_tick(Duration::from_millis(100));
            pb
        });
        let ticker = pb.clone().map(|pb| {
            let counters = counters.clone();
            let what = what.to_string();
            let t0 = Instant::now();
            tokio::spawn(async move {
                loop {
                    let s = counters.snapshot();
                    pb.set_message(format!("{what}: {}", line(&s, t0.elapsed().as_secs_f64())));
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        });
        Self {
            counters,
            t0: Instant::now(),
            cpu0: cpu_seconds(),
            pb,
            ticker,
            verb,
            what: what.to_string(),
        }
    }

    fn finish(self, c: &CommonArgs, end: &str) -> Result<()> {
        if let Some(t) = &self.ticker {
            t.abort();
        }
        if let Some(pb) = &self.pb {
            pb.finish_and_clear();
        }
        let s = self.counters.snapshot();
        let secs = self.t0.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - self.cpu0;
        if c.stats {
            eprintln!(
                "zcio bridge {}: {} ({end}): {}; CPU {:.2} s",
                self.verb,
                self.what,
                line(&s, secs),
                cpu
            );
        }
        if let Some(p) = &c.stats_json {
            let v = json!({
                "direction": self.verb,
                "path": self.what,
                "end": end,
                "samples": s.samples,
                "bytes": s.bytes,
                "oversize": s.oversize,
                "malformed": s.malformed,
                "gaps": s.gaps,
                "lost": s.lost,
                "duplicates": s.duplicates,
                "ignored": s.ignored,
                "lapped": s.lapped,
                "connections": s.connections,
                "seconds": secs,
                "cpu_s": cpu,
            });
            std::fs::write(p, format!("{v:#}\n"))
                .with_context(|| format!("writing --stats-json {}", p.display()))?;
        }
        Ok(())
    }
}

/// "1 234 samples, 1.2 GiB (310 MiB/s), 0 dropped, 0 gaps".
fn line(s: &Stats, secs: f64) -> String {
    let rate = (s.bytes as f64 / secs.max(1e-9)) as u64;
    let dropped = s.oversize + s.malformed + s.lapped;
    format!(
        "{} samples, {} ({}/s), {} dropped, {} gaps ({} lost), {} duplicates, {} ignored",
        s.samples,
        bytes_u64(s.bytes),
        bytes_u64(rate),
        dropped,
        s.gaps,
        s.lost,
        s.duplicates,
        s.ignored
    )
}

/// CPU time of this process so far, in seconds.
fn cpu_seconds() -> f64 {
    let (user, sys) = crate::gateway::cpu_times();
    user + sys
}
