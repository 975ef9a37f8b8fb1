//! The `zcio` command.

mod bridge;
mod calibrate;
mod cp;
mod echo;
mod gateway;
mod hz;
mod ls;
mod mcap_out;
mod metrics;
mod objects;
mod pipe;
mod record;
mod record_zenoh;
mod replay;
mod ring;
mod stat;
mod top;

use std::ffi::OsString;

use clap::{Parser, Subcommand};

/// Zero-copy I/O across process boundaries on Linux.
#[derive(Parser, Debug)]
#[command(
    name = "zcio",
    version,
    about = "zcio: zero-copy I/O across process boundaries on Linux",
    long_about = None,
    after_help = "Examples:\n  \
        zcio ring create demo --size 4MiB    # a named shared ring in /dev/shm\n  \
        zcio pipe get demo > out &           # a reader of the ring (any number)\n  \
        zcio pipe put demo < file            # stdin into the ring, like a FIFO\n  \
        zcio ring stat demo                  # fill, producer and per-consumer counters\n  \
        zcio ls                              # every live zcio object you may see\n  \
        zcio cp big.log big.log.zst -m zstd  # copy through modules (kernel fast path without)\n  \
        zcio calibrate                       # measure this machine's costs for the semantics\n  \
        zcio bridge export ring:demo --key demo --listen tcp/0.0.0.0:7447   # to other hosts\n\n\
        Exit status: 0 on success; 1 when something fails at run time (a missing ring,\n\
        no space, a producer that died or failed, I/O errors); 2 when the command line\n\
        is wrong (unknown options, invalid or conflicting values, sizes beyond the\n\
        limits or the memory available); `pipe` also uses 141 for a broken pipe.\n\
        Errors are printed as `zcio: error: ...` on stderr.\n\n\
        The benchmarks are a separate program: cargo run --release -p zcio-bench -- --help"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Named shared rings (one producer, many consumers): create, stat, ls, rm.
    #[command(subcommand)]
    Ring(ring::RingCmd),
    /// Named multi-reader pipes over rings: stdin → ring → stdout.
    #[command(subcommand)]
    Pipe(pipe::PipeCmd),
    /// Copy SRC to DST through an association: kernel fast paths, or modules.
    Cp(cp::CpArgs),
    /// UDP/TCP gateway: forward from LISTEN to HOST:PORT (fast or --plain).
    Gateway(gateway::GatewayArgs),
    /// Cross hosts through Zenoh: export a ring or listener to a key, import a key into a ring or channel.
    #[command(subcommand)]
    Bridge(bridge::BridgeCmd),
    /// Measure this machine's data-passing costs (the semantics' cost model).
    Calibrate(calibrate::CalibrateArgs),
    /// List live zcio objects: listeners, channel ends, ring producers and consumers.
    ///
    /// Every live object registers in the run directory ($ZCIO_RUN_DIR, else
    /// zcio-UID in the ring directory: $ZCIO_RING_DIR or /dev/shm) while it lives. An entry
    /// whose owner died is shown once as dead and removed. You see the
    /// objects you could open (their mode is the object's own).
    #[command(
        alias = "list",
        after_help = "Examples:\n  \
        zcio ls\n  \
        zcio ls --json | jq '.[] | select(.kind == \"producer\") | .name'\n  \
        ZCIO_RUN_DIR=/shared/zcio zcio ls                   # a run directory shared with containers"
    )]
    Ls(ls::LsArgs),
    /// One object in detail: every counter with its help, its peer and held buffers, a ring's lag.
    #[command(after_help = "Examples:\n  \
        zcio stat demo                          # by name (or a unique part of it)\n  \
        zcio stat consumer:demo                 # KIND:NAME when names are shared\n  \
        zcio stat ring:demo                     # a ring: its producer, every consumer and its lag\n  \
        zcio stat channel:/tmp/app.sock --json  # JSON for scripts\n  \
        zcio stat channel.app_sock.1a2b3c4d5e6f7a8b   # by entry file (zcio ls --json)\n\n\
        Several matches are listed with the names that pick each one (exit status 2).\n\
        Read-only: it maps the statistics pages, never joins the object's protocol.")]
    Stat(stat::StatArgs),
    /// A live, refreshing view of every object with its message and byte rates.
    #[command(after_help = "Examples:\n  \
        zcio top                         # q, Esc or Ctrl-C quit; s cycles the sort key\n  \
        zcio top --interval 250ms --sort messages\n  \
        zcio top --once                  # one table after one interval, for scripts\n  \
        zcio top --once --json\n\n\
        Rates are the change of the counters zcio stat shows between two samples.\n\
        Works in any terminal, over SSH too. Read-only: it only maps statistics pages.")]
    Top(top::TopArgs),
    /// Message rate, byte rate and mean message size of one object, window by window.
    #[command(after_help = "Examples:\n  \
        zcio hz ring:demo                # the ring's producer: one line a second until Ctrl-C\n  \
        zcio hz producer:demo --window 500ms --count 10\n  \
        zcio hz channel:/tmp/app.sock --duration 1m --json\n\n\
        Computed from the object's counters (messages and bytes each way): it never\n\
        joins the protocol, so it cannot slow anybody down.")]
    Hz(hz::HzArgs),
    /// Print a ring's blocks as text or a hex dump (bounded), as a reader of the ring.
    #[command(after_help = "Examples:\n  \
        zcio echo ring:demo                      # the next 10 blocks\n  \
        zcio echo ring:demo --count 0            # until the end of the stream\n  \
        zcio echo ring:demo --format hex --max-bytes 64 --from-oldest\n\n\
        echo is a reader like any other, under the ring's overflow policy: on a\n\
        lossless (block) ring the producer waits for it while it prints, as for any\n\
        reader; on an overwriting ring it may miss blocks (it says so). Use\n\
        `zcio hz` to watch a rate without joining.")]
    Echo(echo::EchoArgs),
    /// Serve every object's statistics in the Prometheus/OpenMetrics text format.
    #[command(after_help = "Examples:\n  \
        zcio metrics --listen 127.0.0.1:9464     # scrape http://127.0.0.1:9464/metrics\n  \
        zcio metrics --listen 127.0.0.1:0        # a free port; the URL is stdout's first line\n  \
        zcio metrics --once                      # print the exposition once\n  \
        zcio metrics --list                      # every metric name, type and help\n\n\
        Names: zcio_<kind>_<field> (counters end in _total); labels name, pid and\n\
        entry (the entry file: one series per object); plus zcio_objects{kind,state},\n\
        zcio_registry_invalid and zcio_registry_unreadable. Each scrape lists the\n\
        registry afresh. See docs/metrics.md.")]
    Metrics(metrics::MetricsArgs),
    /// Record rings, channel messages and Zenoh keys into an MCAP file (Foxglove opens it).
    Record(record::RecordArgs),
    /// Play an MCAP file back into a ring or a channel, with its recorded timing.
    Replay(replay::ReplayArgs),
}

fn main() {
    let cli = match Cli::try_parse_from(attach_negative_values(std::env::args_os())) {
        Ok(cli) => cli,
        // --help, --version, and the help shown for a missing subcommand.
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => {
            // clap says `error: …`; every zcio error says `zcio: error: …`.
            eprint!("zcio: {}", e.render());
            std::process::exit(EXIT_USAGE);
        }
    };
    // Every handle (rings, producers, consumers) is dropped inside `run`
    // before the process exits: a producer must close its ring.
    let res = match cli.cmd {
        Cmd::Ring(r) => ring::run(r),
        Cmd::Pipe(p) => pipe::run(p),
        Cmd::Cp(c) => cp::run(c),
        Cmd::Gateway(g) => gateway::run(g),
        Cmd::Bridge(b) => bridge::run(b),
        Cmd::Calibrate(c) => calibrate::run(c),
        Cmd::Ls(l) => ls::run(l),
        Cmd::Stat(a) => stat::run(a),
        Cmd::Top(a) => top::run(a),
        Cmd::Hz(a) => hz::run(a),
        Cmd::Echo(a) => echo::run(a),
        Cmd::Metrics(a) => metrics::run(a),
        Cmd::Record(r) => record::run(r),
        Cmd::Replay(r) => replay::run(r),
    };
    match res {
        Ok(0) => {}
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("zcio: error: {e:#}");
            std::process::exit(exit_status(&e));
        }
    }
}

/// `--size -1M` → `--size=-1M`. clap reads a word that starts with `-` as
/// an option, so a negative value after its option would be reported as an
/// unknown option `-1`; attached, it reaches the option's value parser,
/// which says that the value is negative and names all of it. Only a word
/// that looks like a negative number (`-` then a digit or a dot) right
/// after a long option without `=`, and nothing after `--`.
fn attach_negative_values(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut options = true;
    for arg in args {
        let negative = arg.to_str().is_some_and(|a| {
            a.strip_prefix('-')
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
        });
        let after_option = out
            .last()
            .and_then(|p| p.to_str())
            .is_some_and(|p| p.len() > 2 && p.starts_with("--") && !p.contains('='));
        if options && negative && after_option {
            if let Some(prev) = out.last_mut() {
                prev.push("=");
                prev.push(&arg);
                continue;
            }
        }
        options &= arg != "--";
        out.push(arg);
    }
    out
}

/// Exit status for an input or usage error (as clap uses).
pub const EXIT_USAGE: i32 = 2;

/// A value the user gave that cannot be used: exit status 2.
#[derive(Debug)]
pub struct UsageError(String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A [`UsageError`] as an `anyhow::Error`.
pub fn usage(msg: impl std::fmt::Display) -> anyhow::Error {
    UsageError(msg.to_string()).into()
}

/// 2 for errors in what the user asked for, 1 for failures at run time.
fn exit_status(e: &anyhow::Error) -> i32 {
    use zcio::ring::OpenError;
    let input = e.chain().any(|c| {
        c.is::<UsageError>()
            || matches!(
                c.downcast_ref::<OpenError>(),
                Some(OpenError::InvalidName(_) | OpenError::InvalidConfig(_))
            )
    });
    if input {
        EXIT_USAGE
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attached(args: &[&str]) -> Vec<String> {
        attach_negative_values(args.iter().map(OsString::from))
            .into_iter()
            .map(|a| a.into_string().unwrap_or_default())
            .collect()
    }

    #[test]
    fn negative_values_stay_with_their_option() {
        assert_eq!(
            attached(&["zcio", "ring", "create", "bad", "--size", "-1M"]),
            ["zcio", "ring", "create", "bad", "--size=-1M"]
        );
        assert_eq!(
            attached(&["zcio", "cp", "a", "o", "--increment", "-5", "-q"]),
            ["zcio", "cp", "a", "o", "--increment=-5", "-q"]
        );
        assert_eq!(
            attached(&["zcio", "pipe", "get", "x", "--timeout", "-.5"]),
            ["zcio", "pipe", "get", "x", "--timeout=-.5"]
        );
        // Not after a long option, already attached, after `--`, or not a number.
        for args in [
            &["zcio", "cp", "-5", "o"][..],
            &["zcio", "cp", "-q", "-5"],
            &["zcio", "cp", "--max=1", "-5"],
            &["zcio", "cp", "--", "--max", "-5"],
            &["zcio", "cp", "--max", "-", "o"],
            &["zcio", "cp", "--max", "--quiet"],
        ] {
            assert_eq!(attached(args), args, "{args:?}");
        }
    }
}
