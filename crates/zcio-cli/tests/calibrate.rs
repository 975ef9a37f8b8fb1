//! `zcio calibrate`: a quick calibration writes a file the library then
//! uses (`--show --json` says `source: file`); a garbled file or one from
//! another machine is ignored with one warning and the built-in model.
//! Each child runs under the watchdog; nothing here asserts on timing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use common::{assert_ok, stderr, Proc, RingDir, WATCHDOG};
use serde_json::Value;

/// `zcio ARGS` with a private config directory (never the user's), no
/// `$ZCIO_CALIBRATION` unless `cal` is given.
fn zcio(dir: &Path, cal: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_zcio"));
    c.args(args)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("HOME", dir.join("home"))
        .env_remove("ZCIO_CALIBRATION")
        .stdin(Stdio::null());
    if let Some(p) = cal {
        c.env("ZCIO_CALIBRATION", p);
    }
    Proc::spawn(&args.join(" "), c).finish(Instant::now() + WATCHDOG)
}

fn show(dir: &Path, cal: Option<&Path>) -> (Value, String) {
    let o = zcio(dir, cal, &["calibrate", "--show", "--json"]);
    assert_ok("calibrate --show --json", &o);
    let v = serde_json::from_slice(&o.stdout).expect("--show --json prints JSON");
    (v, stderr(&o))
}

fn warnings(err: &str) -> usize {
    err.matches("warning").count()
}

#[test]
fn quick_calibration_is_used_by_the_library() {
    let dir = RingDir::new("calibrate");
    let file: PathBuf = dir.0.join("cal.json");
    let f = file.to_str().expect("utf-8 temp path");
    let o = zcio(&dir.0, None, &["calibrate", "--quick", "--output", f, "-q"]);
    assert_ok("calibrate --quick", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("copy_in") && out.contains("swap"), "{out}");
    assert!(
        out.contains("tcow_fault") && !out.contains("not measured"),
        "{out}"
    );
    assert!(out.contains(&format!("wrote {f}")), "{out}");
    assert!(file.exists());

    // Named by $ZCIO_CALIBRATION: the library loads it, silently.
    let (v, err) = show(&dir.0, Some(&file));
    assert_eq!(v["source"], "file", "{v}");
    assert_eq!(v["path"], f);
    assert_eq!(v["quick"], true);
    assert_eq!(warnings(&err), 0, "{err}");
    assert!(v["ops"]["copy_in"]["a_ns_per_byte"].as_f64().unwrap() >= 0.0);
    assert!(v["ops"]["swap"]["r2"].is_number(), "{v}");
    assert!(
        v["ops"]["tcow_fault"].is_object(),
        "tcow_fault measured through an arena"
    );
    assert!(v["thresholds"]["emulated_copy_min"].is_u64());
    assert!(!v["thresholds"]["secured"].as_array().unwrap().is_empty());

    // At the default place ($XDG_CONFIG_HOME/zcio/calibration.json).
    let at = dir.0.join("config").join("zcio");
    std::fs::create_dir_all(&at).unwrap();
    std::fs::copy(&file, at.join("calibration.json")).unwrap();
    let (v, err) = show(&dir.0, None);
    assert_eq!(v["source"], "file", "{v}");
    assert_eq!(warnings(&err), 0, "{err}");

    // From another machine: ignored, one warning, built-in model.
    let mut j: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    j["fingerprint"]["cpu_model"] = Value::from("Imaginary CPU 9000");
    let foreign = dir.0.join("foreign.json");
    std::fs::write(&foreign, j.to_string()).unwrap();
    let (v, err) = show(&dir.0, Some(&foreign));
    assert_eq!(v["source"], "builtin", "{v}");
    assert_eq!(warnings(&err), 1, "{err}");
    assert!(err.contains(foreign.to_str().unwrap()), "{err}");
    assert!(err.contains("another machine"), "{err}");
    assert!(err.contains("zcio calibrate"), "{err}");

    // Another format version: the same.
    let mut j: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    j["version"] = Value::from(99);
    std::fs::write(&foreign, j.to_string()).unwrap();
    let (v, err) = show(&dir.0, Some(&foreign));
    assert_eq!(v["source"], "builtin", "{v}");
    assert!(err.contains("format version 99"), "{err}");
}

#[test]
fn garbled_or_missing_files_fall_back_to_builtin() {
    let dir = RingDir::new("calibrate-bad");
    let bad = dir.0.join("bad.json");
    std::fs::write(&bad, "this is not JSON {").unwrap();
    let (v, err) = show(&dir.0, Some(&bad));
    assert_eq!(v["source"], "builtin", "{v}");
    assert_eq!(warnings(&err), 1, "{err}");
    assert!(err.contains(bad.to_str().unwrap()), "{err}");
    assert!(err.contains("zcio calibrate"), "{err}");
    assert_eq!(
        v["ignored_because"].as_str().map(|s| !s.is_empty()),
        Some(true)
    );

    // A calibration file built from what --show prints of the built-in
    // model is accepted; with a negative cost it is refused.
    let (shown, _) = show(&dir.0, None);
    let mut file = serde_json::json!({
        "format": "zcio-calibration",
        "version": zcio::semantics::cost::CostModel::FORMAT_VERSION,
        "created_unix": 0,
        "quick": false,
        "fingerprint": shown["fingerprint"],
        "ops": shown["ops"],
    });
    let made = dir.0.join("made.json");
    std::fs::write(&made, file.to_string()).unwrap();
    let (v, err) = show(&dir.0, Some(&made));
    assert_eq!(v["source"], "file", "{v} {err}");
    file["ops"]["swap"]["b_ns"] = Value::from(-5.0);
    std::fs::write(&made, file.to_string()).unwrap();
    let (v, err) = show(&dir.0, Some(&made));
    assert_eq!(v["source"], "builtin");
    assert_eq!(warnings(&err), 1, "{err}");
    assert!(err.contains("swap: b_ns is out of range"), "{err}");

    // $ZCIO_CALIBRATION naming a missing file: said once.
    let missing = dir.0.join("missing.json");
    let (v, err) = show(&dir.0, Some(&missing));
    assert_eq!(v["source"], "builtin");
    assert_eq!(warnings(&err), 1, "{err}");

    // Nothing anywhere: built-in, silently.
    let (v, err) = show(&dir.0, None);
    assert_eq!(v["source"], "builtin");
    assert_eq!(warnings(&err), 0, "{err}");
    assert!(v["path"].is_null());
}

#[test]
fn help_has_examples_and_conflicts_are_usage_errors() {
    let dir = RingDir::new("calibrate-help");
    let o = zcio(&dir.0, None, &["calibrate", "--help"]);
    assert_ok("calibrate --help", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Examples:") && out.contains("--show"), "{out}");
    let o = zcio(&dir.0, None, &["calibrate", "--show", "--quick"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
