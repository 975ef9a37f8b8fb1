//! Unit tests: stamps, names, the plan, the target checks and the cost
//! model a run uses (`--model`).

use zcio::semantics::Semantics;

use super::side::{check, control_word, one_way, stamp, END_PING, END_STREAM};
use super::table::{find, targets, Row, RunStats};
use super::{plan, Line, Options};

#[test]
fn stamps_round_trip_and_catch_stale_or_moved_pages() {
    for size in [64, 1000, 4096, 6000, (1 << 20) + 100] {
        let mut b = vec![0u8; size];
        stamp(&mut b, 7);
        check(&b, 7).unwrap();
        assert!(check(&b, 8).is_err(), "{size}: a stale message passes");
        assert_eq!(control_word(&b), None);
    }
    // A page of another message (or another page) is named in the error.
    let mut a = vec![0u8; 3 * 4096];
    let mut b = vec![0u8; 3 * 4096];
    stamp(&mut a, 1);
    stamp(&mut b, 2);
    a[4096..8192].copy_from_slice(&b[4096..8192]);
    let e = check(&a, 1).unwrap_err();
    assert!(
        e.contains("byte 4096") && e.contains("message 2, page 1"),
        "{e}"
    );
    a[4096..8192].copy_from_slice(&b[8192..]);
    assert!(
        check(&a, 1).is_err(),
        "a page moved within a message passes"
    );
    let mut c = vec![0u8; 64];
    c[..8].copy_from_slice(&END_STREAM.to_le_bytes());
    assert_eq!(control_word(&c), Some(END_STREAM));
    c[..8].copy_from_slice(&END_PING.to_le_bytes());
    assert_eq!(control_word(&c), Some(END_PING));
}

#[test]
fn line_names_round_trip() {
    let all = Line::all();
    assert_eq!(all.len(), 14);
    for l in &all {
        assert_eq!(Line::parse(l.name()).unwrap(), *l);
    }
    assert_eq!(
        Line::parse("EMULATED_COPY").unwrap(),
        Line::Sem(Semantics::EmulatedCopy)
    );
    let e = Line::parse("nope").unwrap_err();
    assert!(e.contains("secured") && e.contains("pipe"), "{e}");
    // Only application-allocated zcio lines have an alignment dimension.
    let with: Vec<&str> = all
        .iter()
        .filter(|l| l.has_alignment())
        .map(|l| l.name())
        .collect();
    assert_eq!(
        with,
        [
            "copy",
            "emulated-copy",
            "share",
            "emulated-share",
            "secured",
            "mixed",
            "emulated-copy-rewrite"
        ]
    );
    assert!(!Line::Secured.trusted() && Line::Mixed.trusted());
    assert_eq!(
        Line::Mixed.semantics(),
        Some((Semantics::EmulatedCopy, Semantics::Copy))
    );
}

#[test]
fn plan_interleaves_everything_in_one_group() {
    let o = Options::quick();
    let g = plan(&o);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].len(), o.sizes.len() * (14 + 7));
    assert!(g[0].iter().all(|j| j.aligned || j.line.has_alignment()));
}

fn row(line: Line, size: usize, aligned: bool, gbps: f64) -> Row {
    Row {
        semantics: line.name().into(),
        sender: None,
        receiver: None,
        trusted: None,
        size,
        aligned,
        latency_us: 1.0,
        latency_p99_us: 1.0,
        round_trip_us: 2.0,
        gb_per_sec: gbps,
        cpu_tx_us: 1.0,
        cpu_rx_us: None,
        model_us: None,
        msgs: 1,
        round_trips: 1,
        out: None,
        in_swapped_pages_per_msg: None,
        in_copied_bytes_per_msg: None,
        runs: RunStats::default(),
    }
}

#[test]
fn targets_pass_and_miss_on_the_figures() {
    use Semantics::{Copy as C, EmulatedCopy as EC, EmulatedShare as ES};
    let m = 1 << 20;
    let mut rows = Vec::new();
    for &(s, copy, ec, es, secured, pipe) in &[
        (64usize, 1.0, 0.96, 1.0, 1.0, 2.0),
        (256 << 10, 4.0, 9.0, 10.0, 8.0, 2.0),
        (m, 3.0, 9.5, 12.0, 8.0, 3.9),
    ] {
        for aligned in [true, false] {
            rows.push(row(Line::Sem(C), s, aligned, copy));
            rows.push(row(Line::Sem(EC), s, aligned, ec));
            rows.push(row(Line::Sem(ES), s, aligned, es));
            rows.push(row(Line::Secured, s, aligned, secured));
        }
        rows.push(row(Line::Pipe, s, true, pipe));
    }
    assert!(find(&rows, Line::Pipe, m, true).is_some());
    let t = targets(&rows);
    let verdict = |name: &str| {
        t.iter()
            .find(|x| x.name.starts_with(name))
            .unwrap_or_else(|| panic!("{name}"))
            .met
    };
    assert_eq!(verdict("emulated copy ≥ 3×"), Some(true));
    // 12 / 9.5 = 1.26 at 1 MiB, 10 / 9 = 1.11 at 256 KiB.
    assert_eq!(verdict("emulated copy within 1.3×"), Some(true));
    // 0.96 ≥ 0.95 at 64 B.
    assert_eq!(
        verdict("emulated copy never > 5% slower than copy, every size (aligned)"),
        Some(true)
    );
    assert_eq!(verdict("secured beats the pipe"), Some(true));
    // 8 / 3.9 ≥ 2.
    assert_eq!(verdict("secured ≥ 2×"), Some(true));
    assert_eq!(verdict("the cost model"), None);
    rows.retain(|r| !(r.semantics == "emulated-copy" && r.size == 64));
    rows.push(row(Line::Sem(EC), 64, true, 0.5));
    rows.push(row(Line::Sem(EC), 64, false, 0.99));
    let t = targets(&rows);
    let a = t
        .iter()
        .find(|x| x.name.ends_with("(aligned)") && x.name.contains("5%"))
        .unwrap();
    assert_eq!(a.met, Some(false));
    assert!(a.measured.contains("64: 0.50× ✗"), "{}", a.measured);
}

#[test]
fn one_way_pairs_sends_with_arrivals_by_sequence_number() {
    // Warm-up arrivals the sender did not measure, a lost arrival (7) and
    // an arrival without a measured send (9) are skipped.
    let sends = [(5, 100), (6, 200), (7, 300), (8, 400)];
    let arrivals = [(3, 10), (4, 20), (5, 150), (6, 260), (8, 470), (9, 600)];
    assert_eq!(one_way(&sends, &arrivals), vec![50, 60, 70]);
    assert!(one_way(&sends, &[]).is_empty());
    // A clock reading before the send (impossible, but foreign) is 0.
    assert_eq!(one_way(&[(1, 500)], &[(1, 400)]), vec![0]);
}

#[test]
fn model_choices_parse_and_bad_ones_say_what_to_use() {
    use super::model::Choice;
    assert_eq!(Choice::default(), Choice::Fresh);
    for c in Choice::ALL {
        assert_eq!(Choice::parse(c.name()).unwrap(), c);
    }
    assert_eq!(Choice::parse(" BuiltIn ").unwrap(), Choice::Builtin);
    let e = Choice::parse("calibrated").unwrap_err();
    assert!(
        e.contains("--model 'calibrated'")
            && e.contains("fresh")
            && e.contains("current")
            && e.contains("builtin"),
        "{e}"
    );
}

#[test]
fn the_calibration_file_sits_beside_the_json_as_an_absolute_path() {
    use super::model::calibration_file;
    use std::path::Path;
    assert_eq!(
        calibration_file(Path::new("/tmp/x/sem.json")).unwrap(),
        Path::new("/tmp/x/sem-calibration.json")
    );
    let rel = calibration_file(Path::new("bench-out/semantics.json")).unwrap();
    assert!(rel.is_absolute(), "{}", rel.display());
    assert!(rel.ends_with("bench-out/semantics-calibration.json"));
}

/// A scratch directory removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let d =
            std::env::temp_dir().join(format!("zcio-bench-sem-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn saved_models_load_back_as_the_library_loads_them() {
    use super::model::{describe, install, Choice};
    use zcio::semantics::calibrate::{self, Opts};
    use zcio::semantics::cost::{CostModel, Op, Source};
    let dir = Scratch::new("install");
    // The built-in defaults: exactly the same model (their decimals
    // survive JSON), so `--model builtin` decides as the library would
    // without a file.
    let path = dir.0.join("sub").join("builtin-calibration.json");
    let b = CostModel::builtin();
    let back = install(&b, &path).unwrap();
    assert_eq!(back.source(), &Source::File(path.clone()));
    for op in Op::ALL {
        assert_eq!(back.curve(op), b.curve(op), "{op}");
    }
    assert_eq!(back.thresholds(), b.thresholds());
    let info = describe(Choice::Builtin, &back, None, Vec::new());
    assert_eq!((info.source, info.choice), ("builtin", "builtin"));
    assert_eq!(info.path.as_deref(), Some(path.as_path()));
    assert!(info.description.contains("built-in defaults"), "{info:?}");
    assert!(info.created_unix.is_none());
    // A real (quick) calibration of this machine, as `--model fresh --quick`
    // runs it (the TCOW fault priced by a stand-in, to keep this test
    // free of fault handlers): the file passes the library's checks
    // (format, bounds, this machine's fingerprint) and keeps every line.
    let opts = Opts {
        quick: true,
        tcow: Some(Box::new(|pages| Ok(pages as f64 * 1000.0))),
    };
    let m = calibrate::measure(&opts, &mut |_| {}).unwrap();
    let path = dir.0.join("fresh-calibration.json");
    let back = install(&m, &path).unwrap();
    assert!(back.is_quick());
    for op in Op::ALL {
        let (x, y) = (back.line(op).unwrap(), m.line(op).unwrap());
        assert!(
            (x.a_ns_per_byte - y.a_ns_per_byte).abs() <= 1e-12 * y.a_ns_per_byte.abs(),
            "{op}"
        );
        assert!((x.b_ns - y.b_ns).abs() <= 1e-12 * y.b_ns.abs(), "{op}");
        assert_eq!(back.quality(op).is_some(), m.quality(op).is_some(), "{op}");
    }
    let took = std::time::Duration::from_millis(420);
    let info = describe(Choice::Fresh, &back, Some(took), vec!["a note".into()]);
    assert_eq!(info.source, "calibrated");
    assert!(
        info.description
            .starts_with("calibrated at the start of this run (quick, 0.4 s), saved to ")
            && info.description.contains(&path.display().to_string()),
        "{}",
        info.description
    );
    let v = serde_json::to_value(&info).unwrap();
    assert_eq!(v["source"], "calibrated");
    assert_eq!(v["path"], path.display().to_string());
    assert_eq!(v["quick"], true);
    assert!(v["thresholds"]["emulated_copy_min"].is_u64());
    // Unwritable: a clear error, no panic.
    let e = install(&m, std::path::Path::new("/proc/zcio-nope/cal.json")).unwrap_err();
    assert!(e.starts_with("saving the cost model: cannot write"), "{e}");
}

#[test]
fn the_current_model_is_described_by_where_it_came_from() {
    use super::model::{describe, Choice};
    use zcio::semantics::cost::CostModel;
    let info = describe(Choice::Current, &CostModel::builtin(), None, Vec::new());
    assert_eq!((info.source, info.choice), ("builtin", "current"));
    assert!(info.path.is_none());
    assert!(
        info.description.contains("no calibration file"),
        "{}",
        info.description
    );
    assert!(info
        .thresholds_text()
        .contains("emulated copy → copy below "));
}
