//! The benchmark program on bad input, as a user meets it: every size and
//! count is checked before anything is allocated or spawned, with one
//! `zcio-bench: error:` line naming the option, the value and the limit,
//! exit status 2; `--help` cites no tracker or paper numbers.

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zcio-bench"))
        .args(args)
        .output()
        .expect("zcio-bench did not start")
}

#[test]
fn sizes_and_counts_are_checked_before_anything_runs() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["transfer", "--sizes", "4K,1TiB"],
            "1 TiB is out of range: use 4K … 256 MiB",
        ),
        (&["transfer", "--sizes", "1K"], "1 KiB is out of range"),
        (
            &["ring", "--ring-sizes", "1TiB"],
            "--ring-sizes 1 TiB: the largest is 16 GiB",
        ),
        (&["ring", "--call-sizes", "4"], "call size 4 too small"),
        (&["ring", "--consumers", "65"], "65 out of range 1..=64"),
        (
            &["proxy", "--intermediates", "100000"],
            "100000 intermediates: at most 32",
        ),
        (&["proxy", "--volume", "1PiB"], "unknown unit"),
        (
            &["splice", "--zcio", "/nonexistent/zcio"],
            "cargo build --release -p zcio-cli",
        ),
        (
            &["splice", "--zcio", "/bin/true", "--packet-sizes", "8"],
            "--packet-sizes 8 B: the smallest is 16 B",
        ),
        (
            &["splice", "--zcio", "/bin/true", "--copy-size", "1T"],
            "--copy-size",
        ),
        (
            &["splice", "--zcio", "/bin/true", "--parts", "x"],
            "unknown part 'x'",
        ),
    ];
    for (args, want) in cases {
        let o = run(args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.starts_with("zcio-bench: error: "), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {want:?} not in {e}");
    }
}

#[test]
fn help_names_no_tracker_or_paper_numbers() {
    for args in [
        &["--help"][..],
        &["transfer", "--help"],
        &["ring", "--help"],
        &["proxy", "--help"],
        &["splice", "--help"],
    ] {
        let o = run(args);
        assert!(o.status.success(), "{args:?}");
        let h = String::from_utf8_lossy(&o.stdout);
        for bad in ["issue #", "Table 6", "Figure 1", "(issue"] {
            assert!(!h.contains(bad), "{args:?}: {bad:?} in help");
        }
    }
}
