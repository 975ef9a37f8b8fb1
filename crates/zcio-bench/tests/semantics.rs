//! `zcio-bench semantics` end to end, as CI runs it: a short run across
//! real processes (the sender and a re-executed receiver per point) under
//! a watchdog, its JSON document, the cost model it used (`--model`), and
//! its input checks. No timing is asserted; the receiver checks every stamp
//! of every message itself (a mismatch fails the run and this test).

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
    // The run calibrated this machine first (--model fresh, the default;
    // quick under --quick), saved the model beside the JSON and said so.
    let model = &doc["model"];
    assert_eq!(model["choice"], "fresh", "{model}");
    assert_eq!(model["source"], "calibrated", "{model}");
    assert_eq!(model["quick"], true, "{model}");
    let cal = std::path::PathBuf::from(model["path"].as_str().unwrap());
    assert_eq!(cal, dir.join("sem-calibration.json"));
    let m = zcio::semantics::cost::CostModel::load_from(&cal).expect("the saved model loads");
    assert!(m.is_quick());
    assert_eq!(
        serde_json::to_value(m.thresholds()).unwrap(),
        model["thresholds"]
    );
    let note = doc["notes"][0].as_str().unwrap();
    assert!(
        note.contains("calibrated at the start of this run (quick, ")
            && note.contains(&format!("saved to {}", cal.display())),
        "{note}"
    );
    // A trusted, aligned receiver swaps the protected pages in where the
    // run's cost model says swapping beats copying out (and the data is
    // long enough to be lent at all); one that does not trust its sender
    // copies them out; short data is copied.
    let policy = zcio::semantics::Policy::from_model(&m);
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
        (
            &["semantics", "--model", "calibrated"],
            "--model 'calibrated': unknown cost model; use fresh",
        ),
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
    assert!(h.contains("--model <fresh|current|builtin>") && h.contains("--model builtin"));
    for bad in ["issue #", "Table 9", "(issue"] {
        assert!(!h.contains(bad), "{bad:?} in help");
    }
}

/// `--model builtin` and `--model current` (on the memcpy line alone: no
/// receiver, only the model's bookkeeping): the model named in the JSON
/// and the notes, no warning, and the built-in model saved for the run.
#[test]
fn model_builtin_and_current_say_where_the_model_came_from() {
    use zcio::semantics::cost::CostModel;
    let dir = std::env::temp_dir().join(format!("zcio-bench-sem-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |model: &str, env: Option<&std::path::Path>| {
        let json = dir.join(format!("{model}.json"));
        let mut c = bin();
        c.args([
            "semantics",
            "--quick",
            "--sizes",
            "64K",
            "--semantics",
            "memcpy",
        ])
        .args(["--model", model, "--format", "json", "--out"])
        .arg(&json)
        .arg("--svg")
        .arg(dir.join(format!("{model}.svg")))
        .env_remove("ZCIO_CALIBRATION");
        if let Some(p) = env {
            c.env("ZCIO_CALIBRATION", p);
        }
        let o = c.output().expect("zcio-bench did not start");
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "--model {model}: {e}");
        assert!(!e.contains("warning"), "--model {model}: {e}");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (doc, e)
    };
    let (doc, err) = run("builtin", None);
    let model = &doc["model"];
    assert_eq!(
        (&model["choice"], &model["source"]),
        (&"builtin".into(), &"builtin".into())
    );
    let cal = dir.join("builtin-calibration.json");
    assert_eq!(model["path"], cal.display().to_string());
    let builtin = CostModel::builtin();
    assert_eq!(
        CostModel::load_from(&cal).unwrap().thresholds(),
        builtin.thresholds()
    );
    assert_eq!(
        model["thresholds"],
        serde_json::to_value(builtin.thresholds()).unwrap()
    );
    let note = doc["notes"][0].as_str().unwrap();
    assert!(
        note.contains("here the built-in defaults (--model builtin"),
        "{note}"
    );
    assert!(err.contains("cost model: the built-in defaults"), "{err}");
    // --model current reads what ZCIO_CALIBRATION names: here that file.
    let (doc, _) = run("current", Some(&cal));
    assert_eq!(doc["model"]["source"], "file", "{}", doc["model"]);
    assert_eq!(doc["model"]["path"], cal.display().to_string());
    let note = doc["notes"][0].as_str().unwrap();
    assert!(
        note.contains(&format!("here the calibration file {}", cal.display())),
        "{note}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
