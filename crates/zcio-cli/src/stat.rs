//! `zcio stat OBJECT`: one live object in detail — its registry header,
//! every counter of its kind (from the schema) with its unit and help, and
//! who it works with: a channel end's or lane's peer (the entry with the
//! same connection id) and the buffers each holds of the other's; a ring
//! end's producer and consumers with their lag.

use anyhow::Result;
use clap::Args;
use serde_json::{json, Map, Value};
use zcio_sys::registry::schema::{self, channel, consumer, lane, producer, Type};
use zcio_sys::registry::{Entry, Kind};

use crate::objects::{self, human, pid_text, value};
use crate::ring::columns;

#[derive(Args, Debug)]
pub struct StatArgs {
    /// The object: its name (exact, or a unique part of it), KIND:NAME
    /// (`channel:/tmp/a.sock`; `ring:demo` is the ring's producer), or its entry
    /// file name (from `zcio ls --json`).
    pub object: String,
    /// JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Run `zcio stat`; `Ok(status)` is the exit status.
pub fn run(a: StatArgs) -> Result<i32> {
    let (path, listing) = objects::list(!a.json)?;
    let e = objects::one(&listing.entries, &a.object, &path)?;
    let peer = peer_of(e, &listing.entries);
    let ring = ring_ends(e, &listing.entries);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&to_json(e, peer, &ring))?
        );
    } else {
        print!("{}", text(e, peer, &ring));
    }
    Ok(0)
}

/// The connection id and peer pid counters of a channel end or lane.
fn pairing(kind: Kind) -> Option<(usize, usize)> {
    match kind {
        Kind::Channel => Some((channel::CONNECTION, channel::PEER_PID)),
        Kind::Lane => Some((lane::CONNECTION, lane::PEER_PID)),
        _ => None,
    }
}

/// The other end of `e`'s connection: same kind, same non-zero connection
/// id, another entry (another pid, or the same process's other end).
fn peer_of<'a>(e: &Entry, all: &'a [Entry]) -> Option<&'a Entry> {
    let (conn, _) = pairing(e.kind)?;
    let id = e.stats.get(conn).copied().filter(|&c| c != 0)?;
    let mut same: Vec<&Entry> = all
        .iter()
        .filter(|o| o.kind == e.kind && o.file != e.file && o.stats.get(conn) == Some(&id))
        .collect();
    // Prefer the other process when both ends' entries are listed.
    same.sort_by_key(|o| o.pid == e.pid);
    same.into_iter().next()
}

/// The ends of the ring `e` is an end of (producer first), if it is one.
fn ring_ends<'a>(e: &Entry, all: &'a [Entry]) -> Vec<&'a Entry> {
    if !matches!(e.kind, Kind::RingProducer | Kind::RingConsumer) {
        return Vec::new();
    }
    let mut v: Vec<&Entry> = all
        .iter()
        .filter(|o| matches!(o.kind, Kind::RingProducer | Kind::RingConsumer) && o.name == e.name)
        .collect();
    v.sort_by_key(|o| (o.kind != Kind::RingProducer, o.pid, o.file.clone()));
    v
}

fn age(e: &Entry) -> f64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    now.saturating_sub(e.created_ns) as f64 / 1e9
}

fn age_text(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} days", s / 86400.0)
    }
}

/// What the two ends of a channel or lane hold of each other's buffers.
fn held(e: &Entry) -> Vec<(&'static str, u64, String)> {
    let f = |name: &str| schema::field(e.kind, name).map(|f| (f, value(e, f)));
    [
        "held_by_peer_buffers",
        "held_by_peer_bytes",
        "holding_buffers",
        "in_flight_buffers",
    ]
    .into_iter()
    .filter_map(|n| f(n).map(|(f, v)| (f.name, v, human(f, v))))
    .collect()
}

fn text(e: &Entry, peer: Option<&Entry>, ring: &[&Entry]) -> String {
    let mut o = format!("{} {}\n", e.kind.as_str(), e.name);
    let same_ns = e.pid_ns == objects::our_pid_ns();
    let mut head = vec![
        ["entry".to_owned(), e.file.clone()],
        [
            "owner".to_owned(),
            format!(
                "pid {}{}, uid {}",
                e.pid,
                if e.pid_ns == 0 {
                    String::new()
                } else if same_ns {
                    format!(" (pid ns {}, this one)", e.pid_ns)
                } else {
                    format!(" (pid ns {}: another namespace)", e.pid_ns)
                },
                e.file_uid
            ),
        ],
        ["mode".to_owned(), format!("{:04o}", e.mode)],
        ["age".to_owned(), age_text(age(e))],
        ["state".to_owned(), e.state.as_str().to_owned()],
    ];
    if let Some((conn, peer_pid)) = pairing(e.kind) {
        let id = e.stats.get(conn).copied().unwrap_or(0);
        let pp = e.stats.get(peer_pid).copied().unwrap_or(0);
        let p = match peer {
            Some(p) => format!("pid {}, entry {} (connection {id})", pid_text(p), p.file),
            None if pp != 0 => format!("pid {pp} (its entry is not visible here)"),
            None => "not known".to_owned(),
        };
        head.push(["peer".to_owned(), p]);
        let h = held(e)
            .into_iter()
            .map(|(n, _, s)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ");
        head.push(["held".to_owned(), h]);
    }
    o += &columns(&head, [false, false], "  ");
    if !ring.is_empty() {
        o += &format!("ring {} ends:\n", e.name);
        let mut rows = vec![["", "kind", "pid", "blocks", "position", "lag"].map(str::to_owned)];
        for r in ring {
            let (blocks, pos, lag) = match r.kind {
                Kind::RingProducer => (
                    at(r, producer::BLOCKS),
                    at(r, producer::HEAD),
                    "-".to_owned(),
                ),
                _ => (
                    at(r, consumer::BLOCKS),
                    at(r, consumer::POSITION),
                    zcio_fmt::bytes_u64(at(r, consumer::LAG_BYTES)),
                ),
            };
            rows.push([
                if r.file == e.file { "*" } else { "" }.to_owned(),
                r.kind.as_str().to_owned(),
                pid_text(r),
                blocks.to_string(),
                zcio_fmt::bytes_u64(pos),
                lag,
            ]);
        }
        o += &columns(&rows, [false, false, true, true, true, true], "  ");
    }
    o += "counters:\n";
    let mut rows = vec![["name", "value", "type", "help"].map(str::to_owned)];
    for f in schema::fields(e.kind) {
        let v = value(e, f);
        rows.push([
            f.name.to_owned(),
            human(f, v),
            match f.ty {
                Type::Counter => "counter",
                Type::Gauge => "gauge",
            }
            .to_owned(),
            f.help.to_owned(),
        ]);
    }
    o += &columns(&rows, [false, true, false, false], "  ");
    o
}

fn brief(e: &Entry) -> Value {
    json!({"kind": e.kind.as_str(), "name": e.name, "pid": e.pid, "pid_ns": e.pid_ns, "file": e.file})
}

fn to_json(e: &Entry, peer: Option<&Entry>, ring: &[&Entry]) -> Value {
    let mut counters = Map::new();
    for f in schema::fields(e.kind) {
        counters.insert(
            f.name.to_owned(),
            json!({
                "value": value(e, f),
                "type": match f.ty { Type::Counter => "counter", Type::Gauge => "gauge" },
                "unit": f.unit.as_str(),
                "help": f.help,
            }),
        );
    }
    let mut v = json!({
        "kind": e.kind.as_str(),
        "name": e.name,
        "file": e.file,
        "pid": e.pid,
        "pid_ns": e.pid_ns,
        "same_pid_ns": e.pid_ns == objects::our_pid_ns(),
        "uid": e.file_uid,
        "mode": format!("{:04o}", e.mode),
        "created_ns": e.created_ns,
        "age_s": age(e),
        "state": e.state.as_str(),
        "counters": counters,
    });
    if pairing(e.kind).is_some() {
        v["peer"] = peer.map_or(Value::Null, brief);
        v["held"] = held(e)
            .into_iter()
            .map(|(n, x, _)| (n.to_owned(), json!(x)))
            .collect::<Map<_, _>>()
            .into();
    }
    if !ring.is_empty() {
        v["ring"] = ring
            .iter()
            .map(|r| {
                let mut b = brief(r);
                match r.kind {
                    Kind::RingProducer => {
                        b["blocks"] = json!(at(r, producer::BLOCKS));
                        b["head"] = json!(at(r, producer::HEAD));
                    }
                    _ => {
                        b["blocks"] = json!(at(r, consumer::BLOCKS));
                        b["position"] = json!(at(r, consumer::POSITION));
                        b["lag_bytes"] = json!(at(r, consumer::LAG_BYTES));
                    }
                }
                b
            })
            .collect::<Vec<_>>()
            .into();
    }
    v
}

/// Counter `i` of `e` (0 past its page).
fn at(e: &Entry, i: usize) -> u64 {
    e.stats.get(i).copied().unwrap_or(0)
}
