//! Who may open a named ring, and what a ring file must look like:
//! (a) another uid (a child running as nobody) is kept out by the file's
//!     mode: nothing at 0600, `stat` only at 0644, attach at 0666;
//! (b) invalid names are refused before touching the file system;
//! (c) a symbolic link planted at a ring's path is never followed;
//! (d) files that are not rings (garbage, short, inconsistent headers,
//!     directories, FIFOs) are refused with typed errors;
//! (e) an existing ring is never re-created or replaced.

mod common;

use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;

use common::ring::{check_block, RingDir, Rng};
use common::STEP;
use zcio::internals::sys::shm::path_of;
use zcio::internals::sys::Errno;
use zcio::ring::{
    self, BadHeader, Consumer, Layout, OpenError, Options, Overflow, Producer, RingMap,
};

const NOBODY: u32 = 65534;

fn opts() -> Options {
    Options::new()
        .layout(Layout::Slotted)
        .overflow(Overflow::Block)
        .size(64 << 10)
        .slot_size(1024)
}

fn chmod(name: &str, mode: u32) {
    std::fs::set_permissions(path_of(name), std::fs::Permissions::from_mode(mode))
        .expect("chmod ring file");
}

/// What an open attempt gave, as a short word.
fn outcome<T>(r: &Result<T, OpenError>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(OpenError::PermissionDenied(_)) => "PermissionDenied".into(),
        Err(OpenError::ProducerBusy(_)) => "ProducerBusy".into(),
        Err(e) => format!("{e:?}"),
    }
}

#[test]
fn another_uid_is_kept_out_by_the_file_mode() {
    if let Some(why) = common::exec_as_blocker(NOBODY) {
        println!("skipped: {why}");
        return;
    }
    let dir = RingDir::new("access-uid");
    let name = dir.name("r");
    let map = opts().mode(0o600).create(&name).expect("create");
    assert_eq!(ring::stat(&name).unwrap().mode, 0o600);
    let mut p = Producer::attach(map).expect("producer");
    let mut k = dir
        .try_spawn_with(
            "child_stranger",
            "ring-stranger",
            &[("RING", name.clone())],
            |c| {
                c.uid(NOBODY).gid(NOBODY);
            },
        )
        .unwrap_or_else(|e| panic!("child as uid {NOBODY} did not start: {e}"));
    assert_eq!(k.expect("uid"), NOBODY.to_string());

    // 0600: not even a read-only look.
    assert_eq!(
        k.ask("try"),
        "try producer=PermissionDenied consumer=PermissionDenied stat=PermissionDenied"
    );
    // 0644: stat (read-only) works; attaching needs write access.
    chmod(&name, 0o644);
    assert_eq!(
        k.ask("try"),
        "try producer=PermissionDenied consumer=PermissionDenied stat=ok"
    );
    // 0666 (set with chmod: the umask would strip it at creation): the
    // stranger gets in; the producer role is taken by us.
    chmod(&name, 0o666);
    assert_eq!(
        k.ask("try"),
        "try producer=ProducerBusy consumer=ok stat=ok"
    );
    let slot: usize = k
        .ask("attach")
        .strip_prefix("attach ok slot=")
        .expect("attach ok")
        .parse()
        .unwrap();
    p.write(&common::ring::block(7, 1000)).expect("write");
    assert_eq!(k.ask("read"), "read seq=7");
    let st = ring::stat(&name).unwrap();
    assert!(
        st.consumers
            .iter()
            .any(|c| c.slot == slot && c.pid == k.pid() && c.alive),
        "{st:?}"
    );
    k.finish();
}

/// This process's effective uid (second field of `Uid:` in
/// `/proc/self/status`).
fn euid() -> u32 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .expect("Uid line")
}

#[test]
fn invalid_names_are_refused() {
    let dir = RingDir::new("access-names");
    let long = "a".repeat(201);
    let bad = [
        "",
        "../x",
        "..",
        ".",
        "x/../y",
        "a/b",
        "/etc/passwd",
        ".hidden",
        "sp ace",
        "nul\0x",
        "é",
        long.as_str(),
    ];
    let is_invalid = |r: Result<(), OpenError>, what: &str, n: &str| match r {
        Err(OpenError::InvalidName(got)) => assert_eq!(got, n),
        other => panic!("{what}({n:?}): {other:?}"),
    };
    for n in bad {
        is_invalid(opts().create(n).map(drop), "create", n);
        is_invalid(opts().create_or_open(n).map(drop), "create_or_open", n);
        is_invalid(Producer::open(n).map(drop), "Producer::open", n);
        is_invalid(Consumer::open(n).map(drop), "Consumer::open", n);
        is_invalid(RingMap::open(n, false).map(drop), "RingMap::open", n);
        is_invalid(ring::stat(n).map(drop), "stat", n);
        is_invalid(ring::unlink(n), "unlink", n);
    }
    assert!(
        dir.entries().is_empty(),
        "nothing created: {:?}",
        dir.entries()
    );
    // The longest valid name works.
    let max = "b".repeat(200);
    drop(opts().create(&max).expect("200-character name"));
    assert_eq!(ring::list().unwrap(), std::slice::from_ref(&max));
    assert_eq!(dir.entries(), [format!("zcio-ring.{max}")]);
}

fn is_loop<T: std::fmt::Debug>(r: Result<T, OpenError>, what: &str) {
    match r {
        Err(OpenError::Os(e)) if e == Errno::LOOP => {}
        other => panic!("{what} through a planted symlink: {other:?}"),
    }
}

#[test]
fn planted_symlink_is_never_followed() {
    let dir = RingDir::new("access-link");
    let target = dir.name("target");
    drop(opts().create(&target).expect("create target"));
    let id = ring::stat(&target).unwrap().geometry.ring_id;
    let target_len = std::fs::metadata(path_of(&target)).unwrap().len();

    // A link to a real ring: nobody attaches through it.
    let planted = dir.name("planted");
    symlink(path_of(&target), path_of(&planted)).unwrap();
    is_loop(Producer::open(&planted), "Producer::open");
    is_loop(Consumer::open(&planted), "Consumer::open");
    is_loop(ring::stat(&planted), "stat");
    is_loop(RingMap::open(&planted, false), "RingMap::open");
    is_loop(opts().create_or_open(&planted), "create_or_open");
    assert!(
        matches!(opts().create(&planted), Err(OpenError::Exists(_))),
        "create over a planted link"
    );
    let st = ring::stat(&target).unwrap();
    assert_eq!(st.producer.state, "none", "{st:?}");
    assert!(st.consumers.is_empty(), "{st:?}");
    assert_eq!(st.geometry.ring_id, id);

    // A link to some other file: not opened, not written.
    let secret = dir.path().join("secret");
    std::fs::write(&secret, b"not yours").unwrap();
    let other = dir.name("other");
    symlink(&secret, path_of(&other)).unwrap();
    is_loop(Producer::open(&other), "Producer::open");
    is_loop(ring::stat(&other), "stat");
    assert!(matches!(opts().create(&other), Err(OpenError::Exists(_))));
    assert_eq!(std::fs::read(&secret).unwrap(), b"not yours");

    // A dangling link: creating the ring must not create its target.
    let dangling = dir.name("dangling");
    let nowhere = dir.path().join("nowhere");
    symlink(&nowhere, path_of(&dangling)).unwrap();
    is_loop(Consumer::open(&dangling), "Consumer::open");
    assert!(matches!(
        opts().create(&dangling),
        Err(OpenError::Exists(_))
    ));
    assert!(!nowhere.exists(), "the link was followed on create");

    // Removing the name removes the link, not what it points to.
    ring::unlink(&planted).unwrap();
    assert!(std::fs::symlink_metadata(path_of(&planted)).is_err());
    assert_eq!(
        std::fs::metadata(path_of(&target)).unwrap().len(),
        target_len
    );
    assert_eq!(ring::stat(&target).unwrap().geometry.ring_id, id);
}

/// Every way of attaching refuses `name` with the same `BadHeader`.
fn bad_header(name: &str) -> BadHeader {
    let got = [
        Producer::open(name).map(drop),
        Consumer::open(name).map(drop),
        ring::stat(name).map(drop),
    ];
    let mut hdr = None;
    for r in got {
        match r {
            Err(OpenError::BadHeader(h)) => {
                assert!(hdr.is_none() || hdr == Some(h), "{hdr:?} vs {h:?}");
                hdr = Some(h);
            }
            other => panic!("{name}: expected BadHeader, got {other:?}"),
        }
    }
    hdr.unwrap()
}

fn plant(name: &str, bytes: &[u8]) {
    std::fs::write(path_of(name), bytes).unwrap();
    chmod(name, 0o600);
}

#[test]
fn files_that_are_not_rings_are_refused() {
    let dir = RingDir::new("access-garbage");
    let model = dir.name("model");
    drop(opts().create(&model).expect("create"));
    let good = std::fs::read(path_of(&model)).unwrap();
    let len = good.len() as u64;
    // Plant `bytes` as ring `what` and return how every way of attaching
    // refuses it.
    let refused = |what: &str, bytes: &[u8]| {
        let n = dir.name(what);
        plant(&n, bytes);
        bad_header(&n)
    };
    // The model with `field` (little-endian bytes) written at `off`.
    let patched = |off: usize, field: &[u8]| {
        let mut b = good.clone();
        b[off..off + field.len()].copy_from_slice(field);
        b
    };

    assert_eq!(
        refused("random", &Rng::new(0x5eed).bytes(good.len())),
        BadHeader::Magic
    );
    assert_eq!(
        refused("short", &good[..100]),
        BadHeader::Length {
            expected: 12288,
            actual: 100
        }
    );
    assert!(matches!(
        refused("empty", b""),
        BadHeader::Length { actual: 0, .. }
    ));

    // One header field out of range.
    let le32 = |v: u32| v.to_le_bytes().to_vec();
    let le64 = |v: u64| v.to_le_bytes().to_vec();
    let field = BadHeader::Field;
    for (what, off, bytes, want) in [
        ("version", 8, le32(99), BadHeader::Version(99)),
        ("layout", 12, le32(77), field("layout")),
        ("overflow", 16, le32(0), field("overflow")),
        ("consumers", 56, le32(65), field("max_consumers")),
        ("headlen", 24, le64(4096), field("head_len")),
    ] {
        assert_eq!(refused(what, &patched(off, &bytes)), want, "{what}");
    }

    // A data size that is not a power of two (file length to match).
    let mut b = patched(32, &le64(3 << 12));
    b.truncate(12288 + (3 << 12));
    assert!(matches!(refused("datalen", &b), BadHeader::Field(_)));

    // A huge claimed size in a small file.
    assert!(matches!(
        refused("huge", &patched(32, &le64(1 << 40))),
        BadHeader::Field(_)
    ));

    // A good header in a file of the wrong length.
    assert_eq!(
        refused("cut", &good[..good.len() - 4096]),
        BadHeader::Length {
            expected: len,
            actual: len - 4096
        }
    );
    let mut b = good.clone();
    b.extend_from_slice(&[0; 4096]);
    assert_eq!(
        refused("long", &b),
        BadHeader::Length {
            expected: len,
            actual: len + 4096
        }
    );

    // A directory: not opened for writing; a read-only look says it is not
    // a regular file.
    let n = dir.name("dir");
    std::fs::create_dir(path_of(&n)).unwrap();
    match Producer::open(&n) {
        Err(OpenError::Os(e)) if e == Errno::ISDIR => {}
        other => panic!("producer on a directory: {other:?}"),
    }
    assert!(matches!(
        ring::stat(&n),
        Err(OpenError::BadHeader(BadHeader::Field("file type")))
    ));

    // The model itself is fine.
    assert!(ring::stat(&model).is_ok());
}

/// A FIFO at a ring's path: every way of opening must fail with an error,
/// and none may block (opening a FIFO read-only waits for a writer unless
/// `O_NONBLOCK` is given). Run in a child under the watchdog.
#[test]
fn planted_fifo_is_refused_without_blocking() {
    let dir = RingDir::new("access-fifo");
    let name = dir.name("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(path_of(&name))
        .status();
    if !made.is_ok_and(|s| s.success()) {
        println!("skipped: mkfifo(1) is not available to plant a FIFO");
        return;
    }
    let mut k = dir.spawn("child_opener", "ring-opener", &[("RING", name.clone())]);
    let r = k.next_report();
    assert!(
        r.starts_with("consumer Err(BadHeader(Field(\"file type\")))"),
        "{r}"
    );
    let r = k.next_report();
    assert!(
        r.starts_with("producer Err(BadHeader(Field(\"file type\")))"),
        "{r}"
    );
    let r = k.next_report();
    assert!(r.starts_with("stat Err("), "{r}");
    k.finish();
    assert!(Path::new(&path_of(&name)).exists());
}

#[test]
fn an_existing_ring_is_never_recreated() {
    let dir = RingDir::new("access-exists");
    let name = dir.name("r");
    drop(opts().create(&name).expect("create"));
    let st = ring::stat(&name).unwrap();
    for o in [
        opts(),
        opts().layout(Layout::Variable),
        Options::new().size(1 << 16).mode(0o666),
    ] {
        assert!(
            matches!(o.create(&name), Err(OpenError::Exists(ref n)) if *n == name),
            "{o:?}"
        );
    }
    // Non-exclusive creation opens the existing ring as it is.
    let m = Options::new()
        .layout(Layout::Descriptors)
        .create_or_open(&name)
        .unwrap();
    assert_eq!(*m.geometry(), st.geometry);
    drop(m);
    // And the producer that joins it sees the same geometry.
    let p = Producer::attach(Options::new().size(1 << 20).create_or_open(&name).unwrap()).unwrap();
    assert_eq!(*p.geometry(), st.geometry);
    drop(p);
    assert_eq!(ring::stat(&name).unwrap().geometry, st.geometry);

    // Racing creators: exactly one wins, the others see Exists, and no
    // temporary file is left behind.
    let race = dir.name("race");
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let race = race.clone();
                s.spawn(move || {
                    opts()
                        .size(1 << (16 + i % 3))
                        .create(&race)
                        .map(|m| m.geometry().ring_id)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    assert!(results
        .iter()
        .all(|r| r.is_ok() || matches!(r, Err(OpenError::Exists(_)))));
    assert_eq!(ring::stat(&race).unwrap().geometry.ring_id, *won[0]);
    let mut want = [format!("zcio-ring.{race}"), format!("zcio-ring.{name}")];
    want.sort();
    assert_eq!(dir.entries(), want);
}

#[test]
#[ignore = "child process entry point"]
fn child_stranger() {
    if common::child_role("ring-stranger").is_none() {
        return;
    }
    common::ring::child_ring_dir();
    common::report(format_args!("uid {}", euid()));
    let name = common::arg("RING");
    let mut held = None;
    while let Some(cmd) = common::command() {
        match cmd.as_str() {
            "try" => {
                let p = outcome(&Producer::open(&name));
                let c = outcome(&Consumer::open(&name));
                let s = outcome(&ring::stat(&name));
                common::report(format_args!("try producer={p} consumer={c} stat={s}"));
            }
            "attach" => match Consumer::open(&name) {
                Ok(c) => {
                    common::report(format_args!("attach ok slot={}", c.slot()));
                    held = Some(c);
                }
                Err(e) => common::report(format_args!("attach err {e:?}")),
            },
            "read" => {
                let c = held.as_mut().expect("attached");
                let mut buf = vec![0u8; 4096];
                match c.read_timeout(&mut buf, STEP) {
                    Ok(n) => match check_block(&buf[..n]) {
                        Ok(seq) => common::report(format_args!("read seq={seq}")),
                        Err(e) => common::report(format_args!("read bad {e}")),
                    },
                    Err(e) => common::report(format_args!("read err {e:?}")),
                }
            }
            other => panic!("unknown command {other:?}"),
        }
    }
}

#[test]
#[ignore = "child process entry point"]
fn child_opener() {
    if common::child_role("ring-opener").is_none() {
        return;
    }
    common::ring::child_ring_dir();
    let name = common::arg("RING");
    common::report(format_args!("consumer {:?}", Consumer::open(&name)));
    common::report(format_args!("producer {:?}", Producer::open(&name)));
    common::report(format_args!("stat {:?}", ring::stat(&name)));
}
