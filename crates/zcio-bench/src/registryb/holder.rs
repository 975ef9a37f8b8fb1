//! The holder: registers N objects in a run directory, says so, and holds
//! them until its stdin closes (or it is killed).

use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use zcio_sys::registry::schema::fields;
use zcio_sys::registry::{Kind, RunDir, StatsPage};

use super::CHILD_ARG;
use crate::child;

/// What a holder does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HolderSpec {
    /// The run directory.
    pub dir: PathBuf,
    /// Objects to register.
    pub objects: usize,
}

/// The holder's ready line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ready {
    /// Registration cost per object, ns.
    pub register_ns: u64,
}

/// Register `spec.objects` objects, every kind in turn, each counter set.
fn hold(spec: &HolderSpec) -> Result<Option<String>, String> {
    let run = RunDir::open(&spec.dir).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let mut pages = Vec::with_capacity(spec.objects);
    for i in 0..spec.objects {
        let kind = Kind::ALL[i % Kind::ALL.len()];
        let r = run
            .register(kind, &format!("/bench/object-{i}"), 0o600)
            .map_err(|e| format!("register object {i}: {e}"))?;
        let page = StatsPage::from_entry(r);
        for f in fields(kind) {
            page.set(f.index, (i * 1000 + f.index) as u64);
        }
        pages.push(page);
    }
    let register_ns = t.elapsed().as_nanos() as u64 / spec.objects.max(1) as u64;
    println!("{}", child::line(&Ready { register_ns }));
    // Hold until the parent closes our stdin (or kills us).
    let _ = std::io::stdin().read(&mut [0u8; 1]);
    drop(pages);
    Ok(None)
}

/// The holder's entry point (the arguments after [`CHILD_ARG`]).
pub fn child_main(args: &[String]) -> i32 {
    child::serve(
        CHILD_ARG,
        args,
        |_: &HolderSpec| None,
        hold,
        |s| format!("registry holder of {} objects", s.objects),
    )
}
