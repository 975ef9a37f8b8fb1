//! `zcio-bench semantics` end to end, as CI runs it: a short run across
//! real processes (the sender and a re-executed receiver per point) under
//! a watchdog, its JSON document, and its input checks. No timing is
//! asserted; the receiver checks every stamp of every message itself (a
//! mismatch fails the run and this test).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zcio-bench"))
}

#[test]
fn a_short_run_checks_integrity_and_writes_the_json() {
    let dir = std::env::temp_dir().join(format!("zcio-bench-sem-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("sem.json");
    let svg = dir.join("sem.svg");
    let mut child = bin()
        .args([
            "semantics",
            "--quick",
            "--sizes",
            "6000,64K",
            "--semantics",
            "emulated-copy,secured,emulated-weak-move,move,pipe,memcpy",
            "--runs",
            "1",
            "--format",
            "json",
        ])
        .arg("--out")
        .arg(&json)
        .arg("--svg")
        .arg(&svg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("zcio-bench did not start");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("zcio-bench semantics did not finish within 300 s (killed)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "{status}: {err}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    // 2 sizes × (6 lines + 2 with an unaligned variant).
    assert_eq!(rows.len(), 16, "{rows:#?}");
    for r in rows {
        for k in ["semantics", "size", "aligned", "latency_us", "gb_per_sec"] {
            assert!(!r[k].is_null(), "{k} missing in {r}");
        }
        assert!(r["gb_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["latency_us"].as_f64().unwrap() > 0.0, "{r}");
    }
    let get = |sem: &str, size: u64, aligned: bool| {
        rows.iter()
            .find(|r| r["semantics"] == sem && r["size"] == size && r["aligned"] == aligned)
            .unwrap_or_else(|| panic!("no row {sem} {size} {aligned}"))
    };
    // A trusted, aligned receiver swaps the protected pages in where the
    // cost model says swapping beats copying out (and the data is long
    // enough to be lent at all); one that does not trust its sender
    // copies them out; short data is copied.
    let policy = zcio::semantics::Policy::current();
    let swaps = 65536 >= policy.swap_min && 65536 >= policy.emulated_copy_min;
    assert_eq!(
        get("emulated-copy", 65536, true)["in_swapped_pages_per_msg"],
        if swaps { 16.0 } else { 0.0 },
        "{policy:?}"
    );
    assert_eq!(get("secured", 65536, true)["in_swapped_pages_per_msg"], 0.0);
    assert!(
        get("emulated-copy", 6000, true)["out"]["copied"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert!(get("move", 65536, true)["out"]["sealed"].as_u64().unwrap() > 0);
    assert!(doc["targets"].as_array().is_some_and(|t| !t.is_empty()));
    assert!(std::fs::metadata(&svg).is_ok_and(|m| m.len() > 0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    for (args, want) in [
        (&["semantics", "--sizes", "8"][..], "--sizes 8 B"),
        (&["semantics", "--sizes", "1G"], "--sizes"),
        (&["semantics", "--semantics", "nope"], "unknown line 'nope'"),
        (&["semantics", "--runs", "0"], "--runs"),
    ] {
        let o = bin().args(args).output().expect("zcio-bench did not start");
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.starts_with("zcio-bench: error: "), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {want:?} not in {e}");
    }
    let o = bin().args(["semantics", "--help"]).output().unwrap();
    assert!(o.status.success());
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(h.contains("--quick") && h.contains("emulated-copy"));
    for bad in ["issue #", "Table 9", "(issue"] {
        assert!(!h.contains(bad), "{bad:?} in help");
    }
}
