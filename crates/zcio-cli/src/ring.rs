//! `zcio ring …`: create, inspect, list and remove named shared rings.

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};
use zcio::ring::{self, Geometry, Layout, Options, Overflow, RingMap, RingStat};
use zcio_fmt::limits::exact;
use zcio_fmt::ring::{parse_entries, parse_mode, parse_size as parse_ring_size, parse_slot_size};

use crate::usage;

#[derive(Subcommand, Debug)]
pub enum RingCmd {
    /// Create a named ring.
    ///
    /// The ring is a file /dev/shm/zcio-ring.NAME ($ZCIO_RING_DIR overrides
    /// the directory) whose owner and mode decide who may attach. Sizes take
    /// K/KiB, M/MiB, G/GiB (binary units) and must be powers of two.
    #[command(after_help = "Examples:\n  \
        zcio ring create video                              # continuous, block policy, 1 MiB, mode 0600\n  \
        zcio ring create video --size 16MiB --policy frp    # lossy: the producer never waits\n  \
        zcio ring create pkts --layout slotted --slot-size 2KiB --size 4M\n  \
        zcio ring create msgs --layout v --size 64KiB --mode 0660")]
    Create(CreateCmd),
    /// Show a ring's geometry, owner, producer, fill, counters and consumers.
    #[command(after_help = "Examples:\n  \
        zcio ring stat video\n  \
        zcio ring stat video --format json | jq .consumers\n  \
        watch -n1 zcio ring stat video                      # live view")]
    Stat(StatCmd),
    /// List the rings with layout, policy, size, producer state and consumers.
    #[command(
        alias = "list",
        after_help = "Examples:\n  \
        zcio ring ls\n  \
        zcio ring ls --format json\n  \
        ZCIO_RING_DIR=/tmp/rings zcio ring ls                # rings in another directory"
    )]
    Ls(LsCmd),
    /// Remove rings (processes attached to them keep using them).
    #[command(
        alias = "remove",
        after_help = "Examples:\n  \
        zcio ring rm video\n  \
        zcio ring rm -f a b c                              # no error for missing rings\n  \
        zcio ring rm $(zcio ring ls --format json | jq -r '.[].name')   # remove all"
    )]
    Rm(RmCmd),
}

/// Output format.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
    /// Human-readable table (default).
    Table,
    /// JSON on stdout.
    Json,
}

/// Data layout (`--layout`).
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum LayoutArg {
    /// c-DBuf: a byte stream (writes and reads of any size).
    #[value(alias = "c")]
    Continuous,
    /// p-DBuf: fixed-size slots, one block per slot (--slot-size).
    #[value(alias = "p")]
    Slotted,
    /// v-DBuf: variable-length blocks with in-band headers.
    #[value(alias = "v")]
    Variable,
    /// d-DBuf: variable-length data, headers in a descriptor ring (--entries).
    #[value(alias = "d")]
    Descriptors,
    /// IBuf: rich pointers into other rings (--entries; no data of its own).
    #[value(alias = "i")]
    Index,
}

impl From<LayoutArg> for Layout {
    fn from(l: LayoutArg) -> Self {
        match l {
            LayoutArg::Continuous => Layout::Continuous,
            LayoutArg::Slotted => Layout::Slotted,
            LayoutArg::Variable => Layout::Variable,
            LayoutArg::Descriptors => Layout::Descriptors,
            LayoutArg::Index => Layout::Index,
        }
    }
}

/// Overflow policy (`--policy`).
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum PolicyArg {
    /// The producer waits for the slowest live consumer (lossless).
    Block,
    /// Slow reader preference: tail drop when the slowest reader is a ring behind.
    Srp,
    /// Fast reader preference: overwrite; lapped readers skip forward.
    Frp,
    /// Medium reader preference: tail drop against a shared read pointer.
    Mrp,
}

impl From<PolicyArg> for Overflow {
    fn from(p: PolicyArg) -> Self {
        match p {
            PolicyArg::Block => Overflow::Block,
            PolicyArg::Srp => Overflow::Srp,
            PolicyArg::Frp => Overflow::Frp,
            PolicyArg::Mrp => Overflow::Mrp,
        }
    }
}

/// Creation options, shared by `ring create` and `pipe put/get` (which use
/// them only when the ring does not exist yet). `None`: the default.
#[derive(Args, Debug, Clone, Default)]
pub struct CreateArgs {
    /// Data area size, a power of two from 4KiB to 16GiB [default: 1MiB].
    #[arg(long, value_parser = parse_ring_size, value_name = "SIZE")]
    pub size: Option<u64>,
    /// Data layout (or c, p, v, d, i) [default: continuous].
    #[arg(long, value_enum)]
    pub layout: Option<LayoutArg>,
    /// What a full ring does [default: block].
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Slot size of slotted rings (only with --layout slotted), a power of
    /// two from 32 bytes to the ring size, at most 2GiB [default: 2KiB].
    #[arg(long, value_parser = parse_slot_size, value_name = "SIZE")]
    pub slot_size: Option<u64>,
    /// Descriptor entries (only with --layout descriptors or index), a
    /// power of two from 2 to 16777216 [default: 4096].
    #[arg(long, value_parser = parse_entries, value_name = "N")]
    pub entries: Option<u64>,
    /// Permission bits in octal, set as given (the umask does not apply)
    /// [default: 0600].
    #[arg(long, value_parser = parse_mode, value_name = "OCTAL")]
    pub mode: Option<u32>,
}

impl CreateArgs {
    /// The library options these arguments describe.
    pub fn options(&self) -> Options {
        let mut o = Options::new();
        if let Some(l) = self.layout {
            o = o.layout(l.into());
        }
        if let Some(p) = self.policy {
            o = o.overflow(p.into());
        }
        if let Some(s) = self.size {
            o = o.size(s);
        }
        if let Some(s) = self.slot_size {
            o = o.slot_size(s);
        }
        if let Some(n) = self.entries {
            o = o.entries(n);
        }
        if let Some(m) = self.mode {
            o = o.mode(m);
        }
        o
    }

    /// Whether any option was given.
    pub fn any(&self) -> bool {
        self.size.is_some()
            || self.layout.is_some()
            || self.policy.is_some()
            || self.slot_size.is_some()
            || self.entries.is_some()
            || self.mode.is_some()
    }

    /// Check the options for a ring of layout `layout`: every option given
    /// must apply to it and the sizes must fit together.
    fn check_for(&self, layout: Layout) -> Result<()> {
        let name = layout.name();
        if self.slot_size.is_some() && layout != Layout::Slotted {
            return Err(usage(format!(
                "--slot-size applies only to slotted rings, not to a {name} ring (add --layout slotted)"
            )));
        }
        if self.entries.is_some() && !layout.counts_entries() {
            return Err(usage(format!(
                "--entries applies only to descriptors and index rings, not to a {name} ring"
            )));
        }
        if self.size.is_some() && layout == Layout::Index {
            return Err(usage(
                "--size does not apply to index rings (they hold pointers into other rings, no data): give --entries",
            ));
        }
        if let (Some(slot), Layout::Slotted) = (self.slot_size, layout) {
            let size = self.size.unwrap_or(Options::new().size);
            if slot > size {
                return Err(usage(format!(
                    "--slot-size {} is larger than the ring (--size {})",
                    exact(slot),
                    exact(size)
                )));
            }
        }
        Ok(())
    }

    /// Check the options for a new ring, including that its memory is
    /// available, before anything is created.
    pub fn check_new(&self) -> Result<()> {
        let o = self.options();
        self.check_for(o.layout)?;
        let g = Geometry::new(o.layout, o.overflow, o.size, o.slot_size, o.entries, 1)
            .map_err(|what| usage(format!("invalid {what}")))?;
        zcio_fmt::limits::check_memory(&format!("a ring of {}", exact(g.file_len())), g.file_len())
            .map_err(usage)
    }

    /// Check the options given against existing ring `map`: an option
    /// that does not apply to it or asks for something else is an error
    /// (they only apply when a ring is created). Returns whether any
    /// option was given (all of them matching).
    pub fn check_existing(&self, map: &RingMap) -> Result<bool> {
        let g = map.geometry();
        let exists = |what: String| {
            usage(format!(
                "ring {} already exists as {}: {what} (create options apply only to new rings; `zcio ring rm {}` first to recreate it)",
                map.name(),
                describe(g),
                map.name()
            ))
        };
        if let Some(l) = self.layout {
            if Layout::from(l) != g.layout {
                return Err(exists(format!(
                    "it is not --layout {}",
                    Layout::from(l).name()
                )));
            }
        }
        if let Some(p) = self.policy {
            if Overflow::from(p) != g.overflow {
                return Err(exists(format!(
                    "it is not --policy {}",
                    Overflow::from(p).name()
                )));
            }
        }
        self.check_for(g.layout)
            .map_err(|e| exists(e.to_string()))?;
        if let Some(s) = self.size.filter(|&s| s != g.data_len) {
            return Err(exists(format!("its size is not {}", exact(s))));
        }
        if let Some(s) = self.slot_size.filter(|&s| s != g.slot_size) {
            return Err(exists(format!("its slots are not {}", exact(s))));
        }
        if let Some(n) = self.entries.filter(|&n| n != g.desc_len) {
            return Err(exists(format!("it does not have {n} entries")));
        }
        let mode = map.file_info().mode & 0o777;
        if let Some(m) = self.mode.filter(|&m| m != mode) {
            return Err(exists(format!("its mode is {mode:04o}, not {m:04o}")));
        }
        Ok(self.any())
    }
}

#[derive(Args, Debug)]
pub struct CreateCmd {
    /// Ring name: 1-200 characters from [A-Za-z0-9._-], not starting with '.'.
    name: String,
    #[command(flatten)]
    opts: CreateArgs,
}

#[derive(Args, Debug)]
pub struct StatCmd {
    /// Ring name.
    name: String,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Args, Debug)]
pub struct LsCmd {
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Args, Debug)]
pub struct RmCmd {
    /// Ring names.
    #[arg(required = true)]
    names: Vec<String>,
    /// Ignore rings that do not exist.
    #[arg(short, long)]
    force: bool,
}

/// Run a ring command; `Ok(status)` is the exit status.
pub fn run(cmd: RingCmd) -> Result<i32> {
    match cmd {
        RingCmd::Create(c) => create(c).map(|()| 0),
        RingCmd::Stat(s) => stat(s).map(|()| 0),
        RingCmd::Ls(l) => ls(l).map(|()| 0),
        RingCmd::Rm(r) => Ok(rm(r)),
    }
}

fn create(c: CreateCmd) -> Result<()> {
    c.opts.check_new()?;
    let opts = c.opts.options();
    let map = opts.create(&c.name).map_err(|e| open_error(&c.name, e))?;
    let g = map.geometry();
    eprintln!(
        "created ring {} at {}: {}",
        c.name,
        ring_file(&c.name),
        describe(g)
    );
    Ok(())
}

/// `e` from opening ring `name`, naming the ring where the message does
/// not already.
pub fn open_error(name: &str, e: ring::OpenError) -> anyhow::Error {
    use ring::OpenError as E;
    match e {
        E::BadHeader(_) | E::Os(_) | E::ProducerBusy(_) | E::NoSlot(_) | E::NoSpace { .. } => {
            anyhow::Error::new(e).context(format!("ring {name}"))
        }
        e => e.into(),
    }
}

/// "continuous, block, 1 MiB" (plus slot size / entries where they apply).
pub fn describe(g: &Geometry) -> String {
    let mut s = format!("{}, {}", g.layout.name(), g.overflow.name());
    if g.layout != Layout::Index {
        s += &format!(", {}", size(g.data_len));
    }
    if g.layout == Layout::Slotted {
        s += &format!(", slots of {}", size(g.slot_size));
    }
    if g.layout.counts_entries() {
        s += &format!(", {} entries", g.desc_len);
    }
    s
}

/// A cursor distance in the ring's units: bytes, or entries for
/// descriptors/index rings.
fn units(g: &Geometry, n: u64) -> String {
    if g.layout.counts_entries() {
        format!("{n} entries")
    } else {
        size(n)
    }
}

fn stat(s: StatCmd) -> Result<()> {
    let st = ring::stat(&s.name).map_err(|e| open_error(&s.name, e))?;
    match s.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&stat_json(&st))?),
        Format::Table => print!("{}", stat_table(&st)),
    }
    Ok(())
}

fn fill_pct(st: &RingStat) -> f64 {
    let cap = st.geometry.cap();
    if cap == 0 {
        0.0
    } else {
        st.fill as f64 * 100.0 / cap as f64
    }
}

/// Said beside a pid that is its number in another PID namespace (a
/// container): liveness comes from the ring file's locks, not from it.
fn ns_note(other: bool) -> &'static str {
    if other {
        " (in another PID namespace)"
    } else {
        ""
    }
}

fn stat_json(st: &RingStat) -> Value {
    let g = &st.geometry;
    let consumers: Vec<Value> = st
        .consumers
        .iter()
        .map(|c| {
            json!({
                "slot": c.slot,
                "pid": c.pid,
                "other_pid_namespace": c.other_pid_namespace,
                "alive": c.alive,
                "cursor": c.cursor,
                "lag": c.lag,
                "drops": c.drops,
                "skips": c.skips,
                "skipped_units": c.skipped_units,
                "read_blocks": c.read_blocks,
                "read_bytes": c.read_bytes,
            })
        })
        .collect();
    json!({
        "name": st.name,
        "path": ring_file(&st.name),
        "layout": g.layout.name(),
        "policy": g.overflow.name(),
        "size": (g.layout != Layout::Index).then_some(g.data_len),
        "slot_size": (g.layout == Layout::Slotted).then_some(g.slot_size),
        "entries": g.layout.counts_entries().then_some(g.desc_len),
        "capacity": g.cap(),
        "units": if g.layout.counts_entries() { "entries" } else { "bytes" },
        "max_block": g.max_block(),
        "file_len": g.file_len(),
        "ring_id": format!("{:#018x}", g.ring_id),
        "uid": st.uid,
        "gid": st.gid,
        "mode": format!("{:04o}", st.mode),
        "producer": {
            "pid": st.producer.pid,
            "other_pid_namespace": st.producer.other_pid_namespace,
            "state": st.producer.state,
            "error": st.producer.error,
        },
        "head": st.head,
        "fill": st.fill,
        "fill_percent": (fill_pct(st) * 10.0).round() / 10.0,
        "blocks": st.blocks,
        "bytes": st.bytes,
        "dropped_blocks": st.dropped_blocks,
        "dropped_bytes": st.dropped_bytes,
        "consumers": consumers,
    })
}

fn stat_table(st: &RingStat) -> String {
    use std::fmt::Write;
    let g = &st.geometry;
    let mut o = String::new();
    let mut line = |k: &str, v: String| {
        let _ = writeln!(o, "{k:<11} {v}");
    };
    line("ring", format!("{} ({})", st.name, ring_file(&st.name)));
    line("layout", g.layout.name().to_owned());
    line("policy", g.overflow.name().to_owned());
    if g.layout != Layout::Index {
        line("size", size(g.data_len));
    }
    if g.layout == Layout::Slotted {
        line(
            "slots",
            format!("{} of {}", g.data_len / g.slot_size, size(g.slot_size)),
        );
    }
    if g.layout.counts_entries() {
        line("entries", g.desc_len.to_string());
    }
    line("max block", size(g.max_block()));
    line(
        "owner",
        format!(
            "uid {}, gid {}, mode {:04o}",
            with_name(st.uid, "/etc/passwd"),
            with_name(st.gid, "/etc/group"),
            st.mode
        ),
    );
    line(
        "producer",
        match (st.producer.pid, st.producer.error) {
            (0, _) => st.producer.state.to_owned(),
            (pid, 0) => format!(
                "pid {pid}{}, {}",
                ns_note(st.producer.other_pid_namespace),
                st.producer.state
            ),
            (pid, code) => format!(
                "pid {pid}{}, {} with error {code} ({})",
                ns_note(st.producer.other_pid_namespace),
                st.producer.state,
                std::io::Error::from_raw_os_error(code as i32)
            ),
        },
    );
    line("head", st.head.to_string());
    line(
        "fill",
        format!(
            "{} of {} ({:.1}%)",
            units(g, st.fill),
            units(g, g.cap()),
            fill_pct(st)
        ),
    );
    line(
        "written",
        format!("{} blocks, {}", st.blocks, size(st.bytes)),
    );
    line(
        "dropped",
        format!("{} blocks, {}", st.dropped_blocks, size(st.dropped_bytes)),
    );
    line("consumers", st.consumers.len().to_string());
    if !st.consumers.is_empty() {
        let mut rows = vec![[
            "slot", "pid", "alive", "lag", "drops", "skips", "skipped", "blocks", "bytes",
        ]
        .map(str::to_owned)];
        for c in &st.consumers {
            rows.push([
                c.slot.to_string(),
                format!("{}{}", c.pid, ns_note(c.other_pid_namespace)),
                if c.alive { "yes" } else { "no" }.to_owned(),
                units(g, c.lag),
                c.drops.to_string(),
                c.skips.to_string(),
                units(g, c.skipped_units),
                c.read_blocks.to_string(),
                size(c.read_bytes),
            ]);
        }
        o += &columns(
            &rows,
            [true, true, false, true, true, true, true, true, true],
            "  ",
        );
    }
    o
}

/// `1000 (alice)` from a passwd/group style file, or just the number.
fn with_name(id: u32, file: &str) -> String {
    let name = std::fs::read_to_string(file).ok().and_then(|s| {
        s.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let n: u32 = f.nth(1)?.parse().ok()?;
            (n == id).then(|| name.to_owned())
        })
    });
    match name {
        Some(n) => format!("{id} ({n})"),
        None => id.to_string(),
    }
}

/// Columns, each row prefixed; `right[i]`: right-align column `i`.
pub(crate) fn columns<const N: usize>(
    rows: &[[String; N]],
    right: [bool; N],
    prefix: &str,
) -> String {
    let mut w = [0usize; N];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut o = String::new();
    for r in rows {
        o += prefix;
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i > 0 {
                o += "  ";
            }
            if right[i] {
                o += &" ".repeat(pad);
                o += c;
            } else {
                o += c;
                if i + 1 < N {
                    o += &" ".repeat(pad);
                }
            }
        }
        o += "\n";
    }
    o
}

fn ls(l: LsCmd) -> Result<()> {
    let names = ring::list().with_context(|| {
        format!(
            "cannot list {} (set ZCIO_RING_DIR to an existing directory)",
            zcio::ring::ring_dir().display()
        )
    })?;
    let stats: Vec<(String, Result<RingStat, ring::OpenError>)> = names
        .into_iter()
        .map(|n| (n.clone(), ring::stat(&n)))
        .collect();
    match l.format {
        Format::Json => {
            let v: Vec<Value> = stats
                .iter()
                .map(|(n, s)| match s {
                    Ok(st) => {
                        let g = &st.geometry;
                        json!({
                            "name": n,
                            "layout": g.layout.name(),
                            "policy": g.overflow.name(),
                            "size": (g.layout != Layout::Index).then_some(g.data_len),
                            "entries": g.layout.counts_entries().then_some(g.desc_len),
                            "producer": { "pid": st.producer.pid, "state": st.producer.state },
                            "consumers": st.consumers.iter().filter(|c| c.alive).count(),
                        })
                    }
                    Err(e) => json!({ "name": n, "error": e.to_string() }),
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Table => {
            if stats.is_empty() {
                eprintln!(
                    "no rings in {} (create one with `zcio ring create NAME`)",
                    zcio::ring::ring_dir().display()
                );
                return Ok(());
            }
            let mut rows = vec![
                ["name", "layout", "policy", "size", "producer", "consumers"].map(str::to_owned),
            ];
            for (n, s) in &stats {
                rows.push(match s {
                    Ok(st) => {
                        let g = &st.geometry;
                        [
                            n.clone(),
                            g.layout.name().to_owned(),
                            g.overflow.name().to_owned(),
                            if g.layout.counts_entries() {
                                format!("{} entries", g.desc_len)
                            } else {
                                size(g.data_len)
                            },
                            if st.producer.pid == 0 {
                                st.producer.state.to_owned()
                            } else {
                                format!("{} ({})", st.producer.state, st.producer.pid)
                            },
                            st.consumers.iter().filter(|c| c.alive).count().to_string(),
                        ]
                    }
                    Err(e) => [
                        n.clone(),
                        format!("error: {e}"),
                        String::new(),
                        String::new(),
                        String::new(),
                        String::new(),
                    ],
                });
            }
            print!(
                "{}",
                columns(&rows, [false, false, false, true, false, true], "")
            );
        }
    }
    Ok(())
}

/// Remove the rings; every failure is reported, the status is 1 if any.
fn rm(r: RmCmd) -> i32 {
    let mut status = 0;
    for n in &r.names {
        match ring::unlink(n) {
            Ok(()) => {}
            Err(ring::OpenError::NotFound(_)) if r.force => {}
            Err(ring::OpenError::NotFound(_)) => {
                eprintln!("zcio: error: no ring named {n:?} (`zcio ring ls` lists them)");
                status = status.max(1);
            }
            Err(e @ ring::OpenError::InvalidName(_)) => {
                eprintln!("zcio: error: {e}");
                status = crate::EXIT_USAGE;
            }
            Err(e) => {
                eprintln!("zcio: error: cannot remove ring {n}: {e}");
                status = status.max(1);
            }
        }
    }
    status
}

pub use zcio_fmt::bytes_u64 as size;

/// Where ring `name` lives, for messages (the name itself if it is not a
/// valid ring name).
fn ring_file(name: &str) -> String {
    zcio::ring::ring_path(name).map_or_else(|| name.to_owned(), |p| p.display().to_string())
}
