//! `zcio replay FILE --to ring:NAME|connect:PATH`: play an MCAP file back.
//!
//! The file is untrusted input: it is read once from end to end first,
//! with every check the `mcap` crate's linear reader makes (record
//! framing, chunk and data/summary section CRCs, the end magic, records at
//! most `--max-message` long), and refused with an error naming what is
//! wrong before anything is sent. Then it is read again and each message
//! is sent at its recorded time: `log_time` deltas from the first message,
//! divided by `--rate`. Reading uses the crate's sans-I/O reader over
//! `read(2)`: memory holds one record (or one chunk), not the file.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mcap::records::Record;
use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};
use zcio::ring::{Layout, Producer, Wait};
use zcio::{Channel, ChannelConfig, Msg, Pool, PoolConfig};

use crate::record::{catch_stop_signals, signalled};
use crate::ring::{size, CreateArgs};
use crate::usage;

/// Play an MCAP file back into a ring or a channel.
#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    zcio replay run.mcap --to ring:frames                    # recorded timing; creates the ring if needed\n  \
    zcio replay run.mcap --to ring:frames --rate max --loop  # as fast as possible, over and over\n  \
    zcio replay run.mcap --to connect:/tmp/app.sock --rate 2 # twice as fast, to a listener\n  \
    zcio replay run.mcap --to ring:imu --topic ring:imu      # one topic of a multi-topic file\n\n\
    A ring target is opened, or created (layout variable unless --layout says otherwise, so\n\
    each message stays one block; options given must match an existing ring), as `zcio pipe\n\
    put` does; replay becomes its producer, waits for --readers readers, and closes the\n\
    ring at the end (readers see the end of the stream). A connect target is a channel\n\
    listener (e.g. `zcio record listen:PATH`); every message is sent as it was recorded,\n\
    type tag included. The file is checked from end to end before anything is sent: a\n\
    damaged or truncated file is refused. Exit status: 0 when every message was sent (or\n\
    on SIGINT/SIGTERM), 1 for a file that is not a valid MCAP file and other failures,\n\
    2 for invalid options.")]
pub struct ReplayArgs {
    /// The MCAP file to play.
    file: PathBuf,
    /// Where to: ring:NAME or connect:PATH.
    #[arg(long, value_name = "TARGET")]
    to: String,
    /// Speed: 1.0 is the recorded timing, 2 twice as fast, max as fast as possible.
    #[arg(long, default_value = "1.0", value_parser = parse_rate)]
    rate: Rate,
    /// Start again at the end, until SIGINT/SIGTERM.
    #[arg(long = "loop")]
    repeat: bool,
    /// Only the messages of these topics (repeatable) [default: all].
    #[arg(long, value_name = "TOPIC")]
    topic: Vec<String>,
    /// Ring target: wait until this many readers are attached before sending.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = zcio_fmt::ring::parse_readers)]
    readers: usize,
    /// Largest record accepted from the file (protects against absurd lengths).
    #[arg(long, value_name = "SIZE", value_parser = zcio_fmt::parse_size, default_value = "1GiB")]
    max_message: usize,
    /// No progress line and no summary.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    create: CreateArgs,
}

/// `--rate`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// As fast as possible.
    Max,
    /// A speed factor (> 0).
    Factor(f64),
}

fn parse_rate(s: &str) -> Result<Rate, String> {
    if s.eq_ignore_ascii_case("max") {
        return Ok(Rate::Max);
    }
    match s.parse::<f64>() {
        Ok(f) if f.is_finite() && f > 0.0 => Ok(Rate::Factor(f)),
        _ => Err(format!(
            "{s:?} is not a rate: give a positive number (1.0 = recorded timing) or max"
        )),
    }
}

/// Where messages go.
enum Target {
    Ring(Box<Producer>),
    Chan { ch: Channel, pool: Pool },
}

impl Target {
    fn send(&mut self, data: &[u8]) -> Result<()> {
        match self {
            Target::Ring(p) => p
                .write_tagged(data, 0, Wait::Forever)
                .with_context(|| format!("write to ring {}", p.ring().name())),
            Target::Chan { ch, pool } => {
                let msg = if data.is_empty() {
                    Msg::new()
                } else {
                    let mut b = pool
                        .alloc(data.len())
                        .context("allocate a message buffer")?;
                    b.as_mut_slice()[..data.len()].copy_from_slice(data);
                    Msg::from(b.freeze().context("freeze a message buffer")?)
                };
                ch.send(msg)
                    .map_err(|e| anyhow::anyhow!("send to the channel: {e}"))
            }
        }
    }
}

/// What the check of the file found.
struct Checked {
    messages: u64,
    bytes: u64,
}

/// Run `zcio replay`; `Ok(status)` is the exit status.
pub fn run(a: ReplayArgs) -> Result<i32> {
    enum To {
        Ring(String),
        Connect(PathBuf),
    }
    let to = if let Some(n) = a.to.strip_prefix("ring:") {
        if zcio::ring::ring_path(n).is_none() {
            return Err(usage(format!("invalid ring name {n:?} in --to {}", a.to)));
        }
        To::Ring(n.to_owned())
    } else if let Some(p) = a.to.strip_prefix("connect:") {
        if p.is_empty() {
            return Err(usage(
                "connect: needs a socket path, e.g. connect:/tmp/app.sock",
            ));
        }
        if a.create.any() {
            return Err(usage(
                "the ring options (--size, --layout, ...) apply only to --to ring:NAME",
            ));
        }
        To::Connect(PathBuf::from(p))
    } else {
        return Err(usage(format!(
            "unknown target {:?}: give --to ring:NAME or --to connect:PATH",
            a.to
        )));
    };
    catch_stop_signals();
    let checked = check(&a.file, a.max_message, &a.topic)?;
    if checked.messages == 0 {
        bail!(
            "{} has no messages{}: nothing to replay",
            a.file.display(),
            if a.topic.is_empty() {
                ""
            } else {
                " on the topics given"
            }
        );
    }
    let mut target = match to {
        To::Ring(name) => {
            let mut create = a.create.clone();
            if create.layout.is_none() && zcio::ring::RingMap::open(&name, false).is_err() {
                create.layout = Some(crate::ring::LayoutArg::Variable);
            }
            let map = crate::pipe::open_or_create(&name, &create)?;
            if map.geometry().layout == Layout::Index {
                return Err(usage(format!(
                    "ring {name} is an index ring: replay needs a data ring"
                )));
            }
            let mut p =
                Producer::attach(map).with_context(|| format!("cannot write to ring {name}"))?;
            while p.live_consumers() < a.readers {
                if signalled() {
                    return Ok(0);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Target::Ring(Box::new(p))
        }
        To::Connect(path) => Target::Chan {
            ch: Channel::connect(&path, ChannelConfig::default())
                .with_context(|| format!("cannot connect to {}", path.display()))?,
            pool: Pool::new(PoolConfig::named("zcio-replay")),
        },
    };
    let pb = progress(a.quiet, checked.messages, checked.bytes);
    let t0 = Instant::now();
    let (mut messages, mut bytes) = (0u64, 0u64);
    let res = loop {
        let r = play(&a, &mut target, &pb, &mut messages, &mut bytes);
        if r.is_err() || !a.repeat || signalled() {
            break r;
        }
    };
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    match target {
        Target::Ring(p) => match &res {
            Ok(()) => p.close(),
            Err(_) => p.close_with_error(rustix::io::Errno::IO.raw_os_error() as u32),
        },
        Target::Chan { ch, .. } => ch.close(),
    }
    res?;
    if !a.quiet {
        let s = t0.elapsed().as_secs_f64().max(1e-9);
        eprintln!(
            "zcio replay: {messages} messages, {} in {s:.2} s ({}/s, {:.0} msg/s) → {}",
            size(bytes),
            size((bytes as f64 / s) as u64),
            messages as f64 / s,
            a.to
        );
    }
    Ok(0)
}

fn progress(quiet: bool, messages: u64, _bytes: u64) -> Option<ProgressBar> {
    if quiet {
        return None;
    }
    let pb = ProgressBar::with_draw_target(Some(messages), ProgressDrawTarget::stderr());
    if pb.is_hidden() {
        return None;
    }
    pb.set_style(
        ProgressStyle::with_template("replaying {bar:30} {pos}/{len} messages [{elapsed_precise}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    Some(pb)
}

/// A strict linear reader of `path`.
fn reader(max: usize) -> LinearReader {
    LinearReader::new_with_options(
        LinearReaderOptions::default()
            .with_validate_chunk_crcs(true)
            .with_prevalidate_chunk_crcs(true)
            .with_validate_data_section_crc(true)
            .with_validate_summary_section_crc(true)
            .with_check_finishes_after_end_magic(true)
            .with_record_length_limit(max),
    )
}

/// Read every record of `path`, calling `each` with each parsed one.
fn for_each_record(
    path: &Path,
    max: usize,
    mut each: impl FnMut(Record<'_>) -> Result<bool>,
) -> Result<()> {
    let mut f =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut r = reader(max);
    let invalid = |e: &dyn std::fmt::Display| {
        anyhow::anyhow!(
            "{} is not a valid MCAP file (damaged, truncated or not MCAP): {e}; nothing was replayed",
            path.display()
        )
    };
    while let Some(ev) = r.next_event() {
        match ev.map_err(|e| invalid(&e))? {
            LinearReadEvent::ReadRequest(n) => {
                let n = n.min(max.saturating_add(64)).max(1);
                let got = loop {
                    match f.read(r.insert(n)) {
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        other => break other,
                    }
                }
                .with_context(|| format!("cannot read {}", path.display()))?;
                r.notify_read(got);
            }
            LinearReadEvent::Record { opcode, data } => {
                let rec = mcap::parse_record(opcode, data).map_err(|e| invalid(&e))?;
                if !each(rec)? {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// Check the whole file before anything is sent.
fn check(path: &Path, max: usize, topics: &[String]) -> Result<Checked> {
    let mut chans: HashMap<u16, String> = HashMap::new();
    let mut c = Checked {
        messages: 0,
        bytes: 0,
    };
    for_each_record(path, max, |rec| {
        match rec {
            Record::Channel(ch) => {
                chans.insert(ch.id, ch.topic.clone());
            }
            Record::Message { header, data } => {
                let Some(t) = chans.get(&header.channel_id) else {
                    bail!(
                        "{} is not a valid MCAP file: message {} names channel {}, which the file never defines; nothing was replayed",
                        path.display(),
                        c.messages,
                        header.channel_id
                    );
                };
                if topics.is_empty() || topics.contains(t) {
                    c.messages += 1;
                    c.bytes += data.len() as u64;
                }
            }
            _ => {}
        }
        Ok(true)
    })?;
    if !topics.is_empty() {
        for t in topics {
            if !chans.values().any(|c| c == t) {
                let mut all: Vec<_> = chans.values().cloned().collect();
                all.sort();
                all.dedup();
                return Err(usage(format!(
                    "{} has no topic {t:?}; its topics: {}",
                    path.display(),
                    all.join(", ")
                )));
            }
        }
    }
    Ok(c)
}

/// Play the file once.
fn play(
    a: &ReplayArgs,
    target: &mut Target,
    pb: &Option<ProgressBar>,
    messages: &mut u64,
    bytes: &mut u64,
) -> Result<()> {
    let mut chans: HashMap<u16, bool> = HashMap::new();
    let mut first: Option<(u64, Instant)> = None;
    for_each_record(&a.file, a.max_message, |rec| {
        match rec {
            Record::Channel(ch) => {
                let wanted = a.topic.is_empty() || a.topic.contains(&ch.topic);
                chans.insert(ch.id, wanted);
            }
            Record::Message { header, data } => {
                if !chans.get(&header.channel_id).copied().unwrap_or(false) {
                    return Ok(true);
                }
                if let Rate::Factor(f) = a.rate {
                    let (t_first, start) = *first.get_or_insert((header.log_time, Instant::now()));
                    let delta = header.log_time.saturating_sub(t_first) as f64 / f;
                    let due = start + Duration::from_secs_f64(delta / 1e9);
                    // Wait in short steps, so a signal stops us soon.
                    loop {
                        if signalled() {
                            return Ok(false);
                        }
                        let now = Instant::now();
                        if now >= due {
                            break;
                        }
                        std::thread::sleep((due - now).min(Duration::from_millis(100)));
                    }
                }
                if signalled() {
                    return Ok(false);
                }
                target.send(&data)?;
                *messages += 1;
                *bytes += data.len() as u64;
                if let Some(pb) = pb {
                    pb.inc(1);
                }
            }
            _ => {}
        }
        Ok(true)
    })
}
