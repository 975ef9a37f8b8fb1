//! `zcio ring …`: create, inspect, list and remove named shared rings.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};
use zcio::ring::{self, Geometry, Layout, Options, Overflow, RingStat};

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
    /// Data area size, a power of two ≥ the page size [default: 1MiB].
    #[arg(long, value_parser = parse_pow2_size, value_name = "SIZE")]
    pub size: Option<u64>,
    /// Data layout (or c, p, v, d, i) [default: continuous].
    #[arg(long, value_enum)]
    pub layout: Option<LayoutArg>,
    /// What a full ring does [default: block].
    #[arg(long, value_enum)]
    pub policy: Option<PolicyArg>,
    /// Slot size of slotted rings, a power of two ≥ 32 [default: 2KiB].
    #[arg(long, value_parser = parse_pow2_size, value_name = "SIZE")]
    pub slot_size: Option<u64>,
    /// Descriptor entries of descriptors/index rings, a power of two [default: 4096].
    #[arg(long, value_parser = parse_pow2_count, value_name = "N")]
    pub entries: Option<u64>,
    /// Permission bits in octal (the umask applies) [default: 0600].
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

    /// Explicitly given options that an existing ring of geometry `g`
    /// does not have (for a warning: they only apply to new rings).
    pub fn mismatches(&self, g: &Geometry) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(l) = self.layout {
            if Layout::from(l) != g.layout {
                v.push(format!("--layout {}", Layout::from(l).name()));
            }
        }
        if let Some(p) = self.policy {
            if Overflow::from(p) != g.overflow {
                v.push(format!("--policy {}", Overflow::from(p).name()));
            }
        }
        if let Some(s) = self.size {
            if g.layout != Layout::Index && s != g.data_len {
                v.push(format!("--size {}", size(s)));
            }
        }
        if let Some(s) = self.slot_size {
            if g.layout == Layout::Slotted && s != g.slot_size {
                v.push(format!("--slot-size {}", size(s)));
            }
        }
        if let Some(n) = self.entries {
            if g.layout.counts_entries() && n != g.desc_len {
                v.push(format!("--entries {n}"));
            }
        }
        v
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

pub fn run(cmd: RingCmd) -> Result<()> {
    match cmd {
        RingCmd::Create(c) => create(c),
        RingCmd::Stat(s) => stat(s),
        RingCmd::Ls(l) => ls(l),
        RingCmd::Rm(r) => rm(r),
    }
}

fn create(c: CreateCmd) -> Result<()> {
    let opts = c.opts.options();
    let map = opts.create(&c.name)?;
    let g = map.geometry();
    eprintln!(
        "created ring {} at {}: {}",
        c.name,
        zcio::sys::shm::path_of(&c.name).display(),
        describe(g)
    );
    Ok(())
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
    let st = ring::stat(&s.name)?;
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

fn stat_json(st: &RingStat) -> Value {
    let g = &st.geometry;
    let consumers: Vec<Value> = st
        .consumers
        .iter()
        .map(|c| {
            json!({
                "slot": c.slot,
                "pid": c.pid,
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
        "path": zcio::sys::shm::path_of(&st.name).display().to_string(),
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
        "producer": { "pid": st.producer.pid, "state": st.producer.state },
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
    line(
        "ring",
        format!(
            "{} ({})",
            st.name,
            zcio::sys::shm::path_of(&st.name).display()
        ),
    );
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
        if st.producer.pid == 0 {
            st.producer.state.to_owned()
        } else {
            format!("pid {}, {}", st.producer.pid, st.producer.state)
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
                c.pid.to_string(),
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
fn columns<const N: usize>(rows: &[[String; N]], right: [bool; N], prefix: &str) -> String {
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
            zcio::sys::shm::ring_dir().display()
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
                    zcio::sys::shm::ring_dir().display()
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

fn rm(r: RmCmd) -> Result<()> {
    let mut failed = 0;
    for n in &r.names {
        match ring::unlink(n) {
            Ok(()) => {}
            Err(ring::OpenError::NotFound(_)) if r.force => {}
            Err(ring::OpenError::NotFound(_)) => {
                eprintln!("zcio ring rm: no ring named {n:?} (`zcio ring ls` lists them)");
                failed += 1;
            }
            Err(e) => {
                eprintln!("zcio ring rm: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} rings not removed", r.names.len());
    }
    Ok(())
}

pub use zcio_fmt::{bytes_u64 as size, parse_bytes_u64 as parse_size};

fn parse_pow2_size(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    if n.is_power_of_two() {
        return Ok(n);
    }
    let lo = if n == 0 { 0 } else { 1u64 << n.ilog2() };
    Err(format!(
        "{} is not a power of two (try {} or {})",
        size(n),
        size(lo.max(1)).replace(' ', ""),
        size(lo.max(1) * 2).replace(' ', "")
    ))
}

fn parse_pow2_count(s: &str) -> Result<u64, String> {
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !n.is_power_of_two() {
        return Err(format!(
            "{n} is not a power of two (e.g. 1024, 4096, 65536)"
        ));
    }
    Ok(n)
}

fn parse_mode(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let digits = t.strip_prefix("0o").unwrap_or(t);
    let m = u32::from_str_radix(digits, 8)
        .map_err(|_| format!("'{s}' is not an octal mode: use e.g. 0600, 0660, 644"))?;
    if m > 0o777 {
        return Err(format!(
            "mode '{s}' has bits beyond 0777 (only permission bits apply)"
        ));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64KiB").unwrap(), 64 << 10);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("2 GiB").unwrap(), 2 << 30);
        assert!(parse_size("1X").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(parse_pow2_size("256K").unwrap(), 256 << 10);
        let e = parse_pow2_size("3M").unwrap_err();
        assert!(e.contains("2MiB or 4MiB"), "{e}");
        assert!(parse_pow2_size("0").is_err());
        assert_eq!(parse_pow2_count("4096").unwrap(), 4096);
        assert!(parse_pow2_count("1000").is_err());
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(100), "100 B");
        assert_eq!(size(16 << 20), "16 MiB");
    }

    #[test]
    fn modes() {
        assert_eq!(parse_mode("0600").unwrap(), 0o600);
        assert_eq!(parse_mode("644").unwrap(), 0o644);
        assert_eq!(parse_mode("0o660").unwrap(), 0o660);
        assert!(parse_mode("0800").is_err());
        assert!(parse_mode("7777").is_err());
    }
}
