//! `zcio ls`: every live zcio object this user may see, from the registry
//! of live objects (the run directory). Entries whose owner died are shown
//! once as dead and removed.

use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};
use zcio_sys::registry::{Entry, Listing, State};

use crate::ring::{columns, Format};

#[derive(Args, Debug)]
pub struct LsArgs {
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table, conflicts_with = "json")]
    format: Format,
    /// Same as `--format json`.
    #[arg(long)]
    json: bool,
}

/// Run `zcio ls`; `Ok(status)` is the exit status.
pub fn run(a: LsArgs) -> Result<i32> {
    let (path, listing) = crate::objects::list(true)?;
    let json = a.json || a.format == Format::Json;
    if json {
        let v: Vec<Value> = listing.entries.iter().map(entry_json).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    print_table(&path, &listing);
    Ok(0)
}

fn entry_json(e: &Entry) -> Value {
    json!({
        "kind": e.kind.as_str(),
        "name": e.name,
        "pid": e.pid,
        "pid_ns": e.pid_ns,
        "same_pid_ns": e.pid_ns == crate::objects::our_pid_ns(),
        "state": e.state.as_str(),
        "uid": e.file_uid,
        "mode": format!("{:04o}", e.mode),
        "created_ns": e.created_ns,
        "file": e.file,
    })
}

fn print_table(path: &std::path::Path, l: &Listing) {
    if l.entries.is_empty() {
        eprintln!(
            "no zcio objects in {}{} (channels, listeners and ring ends register while they live)",
            path.display(),
            if l.unreadable > 0 {
                format!(" that you may open ({} others)", l.unreadable)
            } else {
                String::new()
            }
        );
        return;
    }
    let ours = crate::objects::our_pid_ns();
    let mut rows = vec![["kind", "name", "pid", "state", "uid", "mode"].map(str::to_owned)];
    for e in &l.entries {
        let pid = if e.pid_ns == ours || e.pid_ns == 0 {
            e.pid.to_string()
        } else {
            // Meaningful only in the owner's PID namespace.
            format!("{} (pid ns {})", e.pid, e.pid_ns)
        };
        let state = match e.state {
            State::Dead => "dead (removed)".to_owned(),
            s => s.as_str().to_owned(),
        };
        rows.push([
            e.kind.as_str().to_owned(),
            e.name.clone(),
            pid,
            state,
            e.file_uid.to_string(),
            format!("{:04o}", e.mode),
        ]);
    }
    print!(
        "{}",
        columns(&rows, [false, false, true, false, true, false], "")
    );
    if l.unreadable > 0 {
        eprintln!("({} more you may not open)", l.unreadable);
    }
}
