//! What the registry tools (`zcio stat`, `top`, `hz`, `metrics`) share:
//! listing the run directory, finding the object a user names, showing a
//! counter in its unit, and traffic totals for rates. Everything is read
//! from the entries' statistics pages; nothing here writes to an entry.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use zcio_sys::registry::schema::{self, Field, Type, Unit};
use zcio_sys::registry::{dir, Entry, Kind, Listing, RunDir};

/// The run directory and what it holds now. Invalid files are reported on
/// stderr when `warn` (as `zcio ls` does); dead entries are removed by the
/// listing.
pub fn list(warn: bool) -> Result<(PathBuf, Listing)> {
    let path = dir::default_path();
    let listing = RunDir::open(&path)
        .and_then(|d| d.list())
        .with_context(|| format!("cannot list the zcio objects in {}", path.display()))?;
    if warn {
        for i in &listing.invalid {
            eprintln!(
                "zcio: warning: {}: not a valid entry: {}{}",
                path.join(&i.file).display(),
                i.reason,
                if i.removed {
                    " (left over: removed)"
                } else {
                    ""
                }
            );
        }
    }
    Ok((path, listing))
}

/// The PID namespace of this process (0 when /proc does not say).
pub fn our_pid_ns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// The owner's pid as this process may use it: `1234`, or `1234 (pid ns
/// N)` when the owner lives in another PID namespace.
pub fn pid_text(e: &Entry) -> String {
    if e.pid_ns == our_pid_ns() || e.pid_ns == 0 {
        e.pid.to_string()
    } else {
        format!("{} (pid ns {})", e.pid, e.pid_ns)
    }
}

/// The kind a user writes before `:` (`channel`, `producer`, ...).
pub fn kind_named(s: &str) -> Option<Kind> {
    Kind::ALL.into_iter().find(|k| k.as_str() == s)
}

/// The entries `query` names: an entry file name; `KIND:NAME` (`ring:NAME`
/// is the ring's producer, or its consumers while it has none); an exact
/// name; else every entry whose name contains `query`. Live entries only.
pub fn matching<'a>(entries: &'a [Entry], query: &str) -> Vec<&'a Entry> {
    let live = || {
        entries
            .iter()
            .filter(|e| e.state != zcio_sys::registry::State::Dead)
    };
    if let Some(e) = live().find(|e| e.file == query) {
        return vec![e];
    }
    if let Some((k, name)) = query.split_once(':') {
        let kinds: Vec<Kind> = match k {
            "ring" => vec![Kind::RingProducer, Kind::RingConsumer],
            _ => kind_named(k).into_iter().collect(),
        };
        if !kinds.is_empty() {
            let ends: Vec<&Entry> = live()
                .filter(|e| kinds.contains(&e.kind) && e.name == name)
                .collect();
            // `ring:NAME` is the ring's producer (the ring's own rate;
            // `zcio stat` shows its consumers with it) while it has one.
            let producers: Vec<&Entry> = ends
                .iter()
                .copied()
                .filter(|e| e.kind == Kind::RingProducer)
                .collect();
            return if k == "ring" && !producers.is_empty() {
                producers
            } else {
                ends
            };
        }
    }
    let exact: Vec<&Entry> = live().filter(|e| e.name == query).collect();
    if !exact.is_empty() {
        return exact;
    }
    live().filter(|e| e.name.contains(query)).collect()
}

/// The one entry `query` names, or an error that lists the candidates
/// and says how to pick one.
pub fn one<'a>(entries: &'a [Entry], query: &str, path: &std::path::Path) -> Result<&'a Entry> {
    let m = matching(entries, query);
    match m.as_slice() {
        [e] => Ok(e),
        [] => Err(anyhow::anyhow!(
            "no live zcio object matches {query:?} in {} (`zcio ls` lists them; name one by NAME, KIND:NAME or its entry file)",
            path.display()
        )),
        many => {
            let mut s = format!("{} objects match {query:?}; name one:\n", many.len());
            for e in many {
                s += &format!(
                    "  {}:{}  (pid {})  or by its entry file: {}\n",
                    e.kind.as_str(),
                    e.name,
                    pid_text(e),
                    e.file
                );
            }
            s += "(KIND:NAME picks a kind; the entry file picks one object)";
            Err(crate::usage(s))
        }
    }
}

/// Counter `f` of `e` (0 when the page is shorter).
pub fn value(e: &Entry, f: &Field) -> u64 {
    f.read(&e.stats)
}

/// A counter's value for people: sizes in binary units, other counts as
/// they are.
pub fn human(f: &Field, v: u64) -> String {
    match f.unit {
        Unit::Bytes | Unit::Position => zcio_fmt::bytes_u64(v),
        _ => v.to_string(),
    }
}

/// `(messages, bytes)` of `e`'s traffic: the sums of its
/// [`schema::traffic`] counters.
pub fn traffic(e: &Entry) -> Option<(u64, u64)> {
    let t = schema::traffic(e.kind);
    if t.is_empty() {
        return None;
    }
    let at = |i: usize| e.stats.get(i).copied().unwrap_or(0);
    Some(t.iter().fold((0u64, 0u64), |(m, b), &(mi, bi)| {
        (m.wrapping_add(at(mi)), b.wrapping_add(at(bi)))
    }))
}

/// Messages and bytes per second between two traffic totals `dt` apart
/// (a counter that went back — a restarted owner — counts from 0).
pub fn rates(before: (u64, u64), now: (u64, u64), dt: Duration) -> (f64, f64) {
    let s = dt.as_secs_f64();
    if s <= 0.0 {
        return (0.0, 0.0);
    }
    let d = |a: u64, b: u64| if b >= a { b - a } else { b };
    (d(before.0, now.0) as f64 / s, d(before.1, now.1) as f64 / s)
}

/// Messages per second for people: `12.3 k msg/s`.
pub fn msg_rate(r: f64) -> String {
    format!("{}msg/s", zcio_fmt::si(r))
}

/// Bytes per second for people: `45.6 MiB/s`.
pub fn byte_rate(r: f64) -> String {
    format!("{}/s", zcio_fmt::bytes_u64(r.round() as u64))
}

/// The gauges of `e` that are not zero, for a one-line summary
/// (`lag_bytes=4 KiB consumers=2`), without the pairing ids.
pub fn gauges(e: &Entry) -> String {
    schema::fields(e.kind)
        .iter()
        .filter(|f| f.ty == Type::Gauge && !matches!(f.name, "connection" | "peer_pid"))
        .filter_map(|f| {
            let v = value(e, f);
            (v != 0).then(|| format!("{}={}", f.name, human(f, v)))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A duration a user gives: `1s`, `500ms`, `2m`, `1.5` (seconds), `100us`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    zcio_fmt::not_negative(s, "duration", "a duration such as 1s or 500ms")?;
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration: use e.g. 1s, 500ms, 2m"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit '{other}' in '{s}': use ms, s, m or h"
            ))
        }
    };
    let secs = n * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("duration '{s}' is too long"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// [`parse_duration`] for options that must be above zero.
pub fn parse_positive_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(1) {
        return Err(format!(
            "'{s}' is too short: give at least 1ms (e.g. 500ms, 1s)"
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zcio_sys::registry::State;

    fn entry(kind: Kind, name: &str, file: &str) -> Entry {
        Entry {
            file: file.into(),
            kind,
            name: name.into(),
            pid: 1,
            pid_ns: 0,
            uid: 0,
            file_uid: 0,
            mode: 0o400,
            created_ns: 0,
            state: State::Live,
            stats: vec![0; zcio_sys::registry::STATS_COUNT],
        }
    }

    #[test]
    fn queries_pick_by_file_kind_name_and_substring() {
        let es = vec![
            entry(Kind::RingProducer, "demo", "producer.demo.1"),
            entry(Kind::RingConsumer, "demo", "consumer.demo.2"),
            entry(Kind::Channel, "/tmp/a.sock", "channel._tmp_a_sock.3"),
        ];
        let names =
            |q: &str| -> Vec<String> { matching(&es, q).iter().map(|e| e.file.clone()).collect() };
        assert_eq!(names("consumer.demo.2"), ["consumer.demo.2"]);
        assert_eq!(names("producer:demo"), ["producer.demo.1"]);
        assert_eq!(names("ring:demo"), ["producer.demo.1"]);
        assert_eq!(
            matching(&es[1..], "ring:demo").len(),
            1,
            "a consumer without a producer"
        );
        assert_eq!(names("demo").len(), 2);
        assert_eq!(names("a.sock"), ["channel._tmp_a_sock.3"]);
        assert!(names("nothing").is_empty());
        let p = std::path::Path::new("/run");
        assert!(one(&es, "a.sock", p).is_ok());
        let e = one(&es, "demo", p).unwrap_err().to_string();
        assert!(
            e.contains("2 objects match") && e.contains("consumer:demo"),
            "{e}"
        );
        assert!(one(&es, "zzz", p)
            .unwrap_err()
            .to_string()
            .contains("zcio ls"));
    }

    #[test]
    fn durations_and_rates() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("1 fortnight").is_err());
        assert!(parse_positive_duration("0").is_err());
        let (m, b) = rates((10, 100), (30, 300), Duration::from_secs(2));
        assert_eq!((m, b), (10.0, 100.0));
        // A counter that went back counts from zero.
        assert_eq!(
            rates((10, 100), (4, 40), Duration::from_secs(1)),
            (4.0, 40.0)
        );
    }
}
