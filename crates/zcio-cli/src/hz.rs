//! `zcio hz OBJECT`: the message rate of one object, window by window,
//! from its statistics page (the messages and bytes counters the schema
//! names as its traffic): messages/s, bytes/s and the mean message size.
//! It only reads the page: it never joins the object's protocol.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use serde_json::json;
use zcio_sys::registry::schema;

use crate::objects::{self, byte_rate, msg_rate, parse_positive_duration};

#[derive(Args, Debug)]
pub struct HzArgs {
    /// The object: its name (or a unique part of it), KIND:NAME
    /// (`ring:NAME`: the ring's producer), or its entry file name (as for
    /// `zcio stat`).
    pub object: String,
    /// Length of each window (1s, 500ms, 2m).
    #[arg(long, default_value = "1s", value_parser = parse_positive_duration)]
    pub window: Duration,
    /// Stop after this many windows (default: until Ctrl-C).
    #[arg(long, short = 'n', value_parser = zcio_fmt::parse_count::<u64>, conflicts_with = "duration")]
    pub count: Option<u64>,
    /// Stop after this long (whole windows).
    #[arg(long, value_parser = parse_positive_duration)]
    pub duration: Option<Duration>,
    /// One JSON object per line (per window) on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Run `zcio hz`; `Ok(status)` is the exit status.
pub fn run(a: HzArgs) -> Result<i32> {
    let (path, listing) = objects::list(!a.json)?;
    let e = objects::one(&listing.entries, &a.object, &path)?;
    let Some(mut last) = objects::traffic(e) else {
        bail!(
            "{} {} counts no messages (a {} has no traffic counters): `zcio stat {}` shows its counters",
            e.kind.as_str(),
            e.name,
            e.kind.as_str(),
            e.file
        );
    };
    let (file, kind, name) = (e.file.clone(), e.kind, e.name.clone());
    let windows = match (a.count, a.duration) {
        (Some(n), _) => Some(n),
        (None, Some(d)) => Some((d.as_secs_f64() / a.window.as_secs_f64()).ceil().max(1.0) as u64),
        (None, None) => None,
    };
    if !a.json {
        eprintln!(
            "zcio hz: {} {} ({}), windows of {:.3} s{}",
            kind.as_str(),
            name,
            schema::traffic(kind)
                .iter()
                .filter_map(|&(m, _)| schema::fields(kind).iter().find(|f| f.index == m))
                .map(|f| f.name)
                .collect::<Vec<_>>()
                .join(" + "),
            a.window.as_secs_f64(),
            if windows.is_none() {
                "; Ctrl-C stops"
            } else {
                ""
            }
        );
    }
    let mut t_last = Instant::now();
    let mut next = t_last + a.window;
    let mut done = 0u64;
    while windows.is_none_or(|n| done < n) {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += a.window;
        let (_, l) = objects::list(false)?;
        let Some(now_e) = l.entries.iter().find(|x| x.file == file) else {
            bail!(
                "{} {} ended (its entry {file} is gone)",
                kind.as_str(),
                name
            );
        };
        let now = objects::traffic(now_e).unwrap_or(last);
        let t = Instant::now();
        let dt = t - t_last;
        let (mr, br) = objects::rates(last, now, dt);
        let dm = now.0.wrapping_sub(last.0);
        let db = now.1.wrapping_sub(last.1);
        let (dm, db) = if now.0 < last.0 {
            (now.0, now.1)
        } else {
            (dm, db)
        };
        let mean = (dm > 0).then(|| db as f64 / dm as f64);
        if a.json {
            println!(
                "{}",
                json!({
                    "object": name, "kind": kind.as_str(), "file": file,
                    "window_s": dt.as_secs_f64(),
                    "messages": dm, "bytes": db,
                    "messages_per_s": mr, "bytes_per_s": br,
                    "mean_bytes": mean,
                    "total_messages": now.0, "total_bytes": now.1,
                })
            );
        } else {
            println!(
                "{:>14}  {:>12}  mean {:>10}  ({} messages in {:.3} s)",
                msg_rate(mr),
                byte_rate(br),
                mean.map_or("-".to_owned(), |m| zcio_fmt::bytes_u64(m.round() as u64)),
                dm,
                dt.as_secs_f64()
            );
        }
        last = now;
        t_last = t;
        done += 1;
    }
    Ok(0)
}
