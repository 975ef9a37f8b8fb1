//! Unit tests: stamps, names, the plan and the target checks.

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
