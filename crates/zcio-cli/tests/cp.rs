//! `zcio cp` as a user runs it: file to file on the kernel fast path,
//! through crc32c + zstd and back through unzstd (byte-exact), stdin to
//! stdout, into a ring that `zcio pipe get` reads in another process, the
//! JSON summary, and the errors a mistyped command meets. Every child runs
//! under a watchdog; nothing asserts on timing.

mod common;

use std::io::Write;
use std::process::Stdio;
use std::time::Instant;

use common::*;

fn data(n: usize) -> Vec<u8> {
    // Compressible but not trivial: text-like runs with a counter.
    let mut v = Vec::with_capacity(n);
    let mut i = 0u64;
    while v.len() < n {
        v.extend_from_slice(
            format!("line {i} of the zcio cp test {}\n", i * 7919 % 1013).as_bytes(),
        );
        i += 1;
    }
    v.truncate(n);
    v
}

#[test]
fn cp_files_fast_path_and_through_modules_round_trip() {
    let dir = RingDir::new("cp");
    let src = dir.0.join("src");
    let bytes = data(12 << 20);
    std::fs::write(&src, &bytes).unwrap();
    let p = |n: &str| dir.0.join(n).to_string_lossy().into_owned();
    let s = src.to_string_lossy().into_owned();

    let o = dir.run(&["cp", &s, &p("copy"), "--json", &p("copy.json")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(p("copy")).unwrap() == bytes);
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p("copy.json")).unwrap()).unwrap();
    assert_eq!(j["bytes"], bytes.len() as u64);
    let mover = j["mover"].as_str().unwrap();
    assert!(
        ["copy_file_range", "sendfile", "splice"].contains(&mover),
        "a kernel fast path without modules: {mover}"
    );
    assert!(stderr(&o).contains("zcio cp: 12 MiB in "), "{}", stderr(&o));

    let o = dir.run(&[
        "cp",
        &s,
        &p("z"),
        "-m",
        "crc32c",
        "-m",
        "zstd:level=1",
        "-v",
        "--json",
        &p("z.json"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p("z.json")).unwrap()).unwrap();
    assert_eq!(j["mover"], "buffer path");
    assert_eq!(j["copied"], 0, "no copies between modules");
    let zlen = std::fs::metadata(p("z")).unwrap().len();
    assert!(zlen < bytes.len() as u64 / 3, "compressed to {zlen}");
    assert!(stderr(&o).contains("module crc32c"), "{}", stderr(&o));

    let o = dir.run(&["cp", &p("z"), &p("back"), "-m", "unzstd", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "quiet: {}", stderr(&o));
    assert!(std::fs::read(p("back")).unwrap() == bytes);
}

#[test]
fn cp_stdin_to_stdout_and_into_a_ring_another_process_reads() {
    let dir = RingDir::new("cp-ring");
    let bytes = std::sync::Arc::new(data(5 << 20));
    // stdin → stdout.
    let mut c = dir.cmd(&["cp", "-", "-", "-q"]);
    c.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut p = Proc::spawn("cp - -", c);
    let mut stdin = p.child.stdin.take().unwrap();
    let b = bytes.clone();
    let feeder = std::thread::spawn(move || stdin.write_all(&b));
    let o = p.finish(Instant::now() + WATCHDOG);
    feeder.join().unwrap().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout == *bytes);

    // A file into a ring read by `zcio pipe get` in another process.
    let src = dir.0.join("src");
    std::fs::write(&src, &*bytes).unwrap();
    let o = dir.run(&["ring", "create", "cpring", "--size", "1MiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut g = dir.get("cpring", &[]);
    g.stdout(Stdio::piped());
    let get = Proc::spawn("pipe get cpring", g);
    dir.wait_consumers("cpring", 1, Instant::now() + WATCHDOG);
    let o = dir.run(&["cp", &src.to_string_lossy(), "ring:cpring"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("buffer path"), "{}", stderr(&o));
    let out = get.finish(Instant::now() + WATCHDOG);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        out.stdout == *bytes,
        "the reader got {} bytes",
        out.stdout.len()
    );
}

#[test]
fn cp_errors_say_what_is_wrong() {
    let dir = RingDir::new("cp-err");
    let missing = dir.0.join("missing").to_string_lossy().into_owned();
    let o = dir.run(&["cp", &missing, "x"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("zcio: error: source: "),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("No such file"), "{}", stderr(&o));

    let o = dir.run(&["cp", &missing, "x", "-m", "bogus"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no module named 'bogus'"),
        "{}",
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("zstd"),
        "lists the known modules: {}",
        stderr(&o)
    );

    let o = dir.run(&["cp", &missing, "x", "-m", "zstd:level=99"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    let o = dir.run(&["cp", "tcp:127.0.0.1:1", "x"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("connect"), "{}", stderr(&o));

    let o = dir.run(&["cp", "fd:notanumber", "x"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("fd:N"), "{}", stderr(&o));

    let o = dir.run(&["cp", "--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("Examples:"));
}

/// A mover the endpoints do not support (`splice` from `/dev/null`) is
/// passed over before anything moved: the copy succeeds and says nothing
/// alarming; `-v` notes it as information.
#[test]
fn cp_from_dev_null_succeeds_without_alarm() {
    let dir = RingDir::new("cp-null");
    let out = dir.0.join("out");
    let o = dir.run(&["cp", "/dev/null", &out.to_string_lossy()]);
    assert_ok("cp /dev/null out", &o);
    assert_eq!(std::fs::metadata(&out).map(|m| m.len()).ok(), Some(0));
    let e = stderr(&o);
    for bad in ["refused", "Invalid argument", "error"] {
        assert!(!e.contains(bad), "{bad:?} in: {e}");
    }
    let o = dir.run(&["cp", "/dev/null", &out.to_string_lossy(), "-v"]);
    assert_ok("cp /dev/null out -v", &o);
    let e = stderr(&o);
    assert!(!e.contains("refused") && !e.contains("zcio: error"), "{e}");
    // A real failure is still an error.
    let o = dir.run(&[
        "cp",
        "/dev/null",
        &dir.0.join("no/such/dir").to_string_lossy(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("zcio: error: "), "{}", stderr(&o));
}

/// `zcio cp` never destroys its source: a destination that is the source
/// by any path (itself, a symlink, a hard link, `DIR` holding it) is
/// refused with "are the same file", the file keeps every byte and the
/// exit status is not 0. A destination directory gets the source's name.
#[test]
fn cp_refuses_the_source_as_destination_and_copies_into_directories() {
    let dir = RingDir::new("cp-same");
    let p = |n: &str| dir.0.join(n).to_string_lossy().into_owned();
    let bytes = data(300_000);
    std::fs::write(p("a.bin"), &bytes).unwrap();
    std::os::unix::fs::symlink(p("a.bin"), p("link.bin")).unwrap();
    std::fs::hard_link(p("a.bin"), p("hard.bin")).unwrap();
    let base = dir.0.to_string_lossy().into_owned();
    let a = p("a.bin");
    for dst in [p("a.bin"), p("link.bin"), p("hard.bin"), base.clone()] {
        for modules in [&[][..], &["-m", "crc32c"][..]] {
            let mut args = vec!["cp", "-q", &a, &dst];
            args.extend_from_slice(modules);
            let o = dir.run(&args);
            assert_eq!(o.status.code(), Some(1), "cp a.bin {dst}: {}", stderr(&o));
            assert!(stderr(&o).contains("are the same file"), "{}", stderr(&o));
            assert!(
                std::fs::read(p("a.bin")).unwrap() == bytes,
                "cp a.bin {dst} {modules:?} changed the source"
            );
        }
    }

    std::fs::create_dir(p("into")).unwrap();
    let o = dir.run(&["cp", "-q", &p("a.bin"), &p("into")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(p("into/a.bin")).unwrap() == bytes);
    // Again, over the copy now there (an ordinary overwrite).
    let o = dir.run(&["cp", "-q", &p("a.bin"), &format!("{}/", p("into"))]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(p("into/a.bin")).unwrap() == bytes);

    // A destination directory with no source file name to give it.
    let o = dir.run(&["cp", "-q", "-", &p("into")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("directory"), "{}", stderr(&o));
}

/// `--json PATH` never replaces the data: the source or the destination as
/// the summary's path is refused before anything is copied, and so is a
/// summary in a missing directory (instead of failing after the copy).
#[test]
fn cp_summary_path_is_checked_before_the_copy() {
    let dir = RingDir::new("cp-json");
    let p = |n: &str| dir.0.join(n).to_string_lossy().into_owned();
    let bytes = data(100_000);
    std::fs::write(p("keep.bin"), &bytes).unwrap();
    std::fs::write(p("out.bin"), b"old").unwrap();
    for json in [p("keep.bin"), p("out.bin")] {
        let o = dir.run(&["cp", "-q", &p("keep.bin"), &p("out.bin"), "--json", &json]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("same file"), "{}", stderr(&o));
        assert!(std::fs::read(p("keep.bin")).unwrap() == bytes);
        assert_eq!(std::fs::read(p("out.bin")).unwrap(), b"old");
    }
    let o = dir.run(&[
        "cp",
        "-q",
        &p("keep.bin"),
        &p("new.bin"),
        "--json",
        &p("no/such/dir/s.json"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not exist"), "{}", stderr(&o));
    assert!(!dir.0.join("new.bin").exists(), "nothing was copied");
}

/// `--max` ends the stream where it stops: the modules are flushed, so a
/// limited copy through zstd (or seal) is a complete stream that decodes
/// to exactly the first `--max` bytes.
#[test]
fn cp_max_through_modules_writes_a_complete_stream() {
    let dir = RingDir::new("cp-max");
    let p = |n: &str| dir.0.join(n).to_string_lossy().into_owned();
    let bytes = data(3 << 20);
    std::fs::write(p("src"), &bytes).unwrap();
    let key = format!("key={}", "07".repeat(32));
    for (limit, enc, dec) in [
        ("1K", "zstd:level=1".to_owned(), "unzstd".to_owned()),
        ("2000000", "zstd:level=1".to_owned(), "unzstd".to_owned()),
        ("100000", format!("seal:{key}"), format!("open:{key}")),
    ] {
        let o = dir.run(&["cp", "-q", &p("src"), &p("enc"), "--max", limit, "-m", &enc]);
        assert!(o.status.success(), "{enc} --max {limit}: {}", stderr(&o));
        let o = dir.run(&["cp", "-q", &p("enc"), &p("dec"), "-m", &dec]);
        assert!(
            o.status.success(),
            "{dec} after --max {limit}: {}",
            stderr(&o)
        );
        let n = zcio_fmt::parse_bytes_u64(limit).unwrap() as usize;
        assert!(
            std::fs::read(p("dec")).unwrap() == bytes[..n],
            "{enc} --max {limit}"
        );
    }
}
