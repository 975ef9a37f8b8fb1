use std::os::unix::fs::PermissionsExt;

use super::*;

/// A fresh run directory under the temporary directory, removed on drop.
struct TempRun(PathBuf);

impl TempRun {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "zcio-registry-{tag}-{}-{:x}",
            std::process::id(),
            nonce()
        ));
        TempRun(p)
    }
    fn files(&self) -> usize {
        std::fs::read_dir(&self.0).map_or(0, |d| d.count())
    }
}

impl Drop for TempRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Write a file of `bytes` into the run directory, aged `age_s` seconds.
fn plant(dir: &Path, file: &str, bytes: &[u8], age_s: i64) {
    let p = dir.join(file);
    std::fs::write(&p, bytes).unwrap();
    if age_s > 0 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        let old = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: t.tv_sec - age_s,
                tv_nsec: 0,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: t.tv_sec - age_s,
                tv_nsec: 0,
            },
        };
        rustix::fs::utimensat(rustix::fs::CWD, &p, &old, rustix::fs::AtFlags::empty()).unwrap();
    }
}

fn complete_entry(kind: Kind, name: &str) -> Vec<u8> {
    let mut b = vec![0u8; ENTRY_LEN];
    b[..HEADER_LEN].copy_from_slice(&Header::new(kind, name, 1, 2, 3, 4).to_bytes());
    b[STATS_OFFSET..STATS_OFFSET + 8].copy_from_slice(&77u64.to_le_bytes());
    b
}

#[test]
#[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
fn round_trip_live_then_gone() {
    let t = TempRun::new("rt");
    let run = RunDir::open(&t.0).unwrap();
    let md = std::fs::metadata(&t.0).unwrap();
    assert_eq!(md.permissions().mode() & 0o777, 0o700);
    let r = run.register(Kind::Channel, "/tmp/a b.sock", 0o640).unwrap();
    r.set(0, 5);
    r.add(0, 2);
    r.set(STATS_COUNT - 1, u64::MAX);
    r.set(STATS_COUNT, 1); // ignored
    assert_eq!(r.get(0), 7);
    let l = run.list().unwrap();
    assert!(l.invalid.is_empty(), "{:?}", l.invalid);
    assert_eq!(l.entries.len(), 1);
    let e = &l.entries[0];
    assert_eq!(e.kind, Kind::Channel);
    assert_eq!(e.name, "/tmp/a b.sock");
    assert_eq!(e.state, State::Live);
    assert_eq!(e.pid, std::process::id());
    assert_eq!(e.uid, rustix::process::geteuid().as_raw());
    assert_eq!(e.file_uid, e.uid);
    assert_eq!(e.mode, 0o440, "the read bits of the object's mode");
    assert_eq!(e.pid_ns, pid_namespace());
    assert_eq!(e.stats.len(), STATS_COUNT);
    assert_eq!(
        (e.stats[0], e.stats[1], e.stats[STATS_COUNT - 1]),
        (7, 0, u64::MAX)
    );
    assert!(e.created_ns > 0);
    assert!(e.file.starts_with("channel._tmp_a_b_sock."), "{}", e.file);
    // A second look still sees it live (listing disturbs nothing).
    assert_eq!(run.list().unwrap().entries[0].state, State::Live);
    let r2 = run.register(Kind::RingProducer, "r", 0o600).unwrap();
    assert_eq!(run.list().unwrap().entries.len(), 2);
    drop(r);
    drop(r2);
    assert_eq!(t.files(), 0);
    assert!(run.list().unwrap().entries.is_empty());
}

#[test]
#[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
fn an_entry_nobody_holds_is_dead_and_removed() {
    let t = TempRun::new("dead");
    let run = RunDir::open(&t.0).unwrap();
    plant(&t.0, "lane.x.1", &complete_entry(Kind::Lane, "x"), 0);
    let l = run.list().unwrap();
    assert_eq!(l.entries.len(), 1);
    assert_eq!(l.entries[0].state, State::Dead);
    assert_eq!(l.entries[0].stats[0], 77);
    assert_eq!(t.files(), 0, "removed by the lister");
    assert!(run.list().unwrap().entries.is_empty(), "reported once");
}

#[test]
#[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
fn corrupt_and_truncated_entries_are_invalid_and_only_old_ones_go() {
    let t = TempRun::new("bad");
    let run = RunDir::open(&t.0).unwrap();
    plant(&t.0, "new-garbage", &vec![0xa5; ENTRY_LEN], 0);
    plant(&t.0, "old-garbage", &vec![0xa5; ENTRY_LEN], 60);
    plant(&t.0, "new-short", b"ZCIOREG1", 0);
    plant(
        &t.0,
        "old-short",
        &complete_entry(Kind::Channel, "x")[..4096],
        60,
    );
    plant(&t.0, "empty", b"", 0);
    let mut bad_name = complete_entry(Kind::Channel, "abc");
    bad_name[56] = 0xff;
    plant(&t.0, "bad-utf8", &bad_name, 60);
    let mut long_name = complete_entry(Kind::Channel, "abc");
    long_name[48..52].copy_from_slice(&u32::MAX.to_le_bytes());
    plant(&t.0, "long-name", &long_name, 0);
    let mut bad_kind = complete_entry(Kind::Channel, "abc");
    bad_kind[12..16].copy_from_slice(&0u32.to_le_bytes());
    plant(&t.0, "bad-kind", &bad_kind, 0);
    std::fs::create_dir(t.0.join("a-dir")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", t.0.join("a-link")).unwrap();
    let l = run.list().unwrap();
    assert!(l.entries.is_empty(), "{:?}", l.entries);
    let mut got: Vec<(String, bool)> = l
        .invalid
        .iter()
        .map(|i| (i.file.clone(), i.removed))
        .collect();
    got.sort();
    let want = [
        ("a-dir", false),
        ("a-link", false),
        ("bad-kind", false),
        ("bad-utf8", true),
        ("empty", false),
        ("long-name", false),
        ("new-garbage", false),
        ("new-short", false),
        ("old-garbage", true),
        ("old-short", true),
    ];
    let want: Vec<(String, bool)> = want.iter().map(|(f, r)| (f.to_string(), *r)).collect();
    assert_eq!(got, want, "{:?}", l.invalid);
    assert_eq!(t.files(), 7);
}

#[test]
#[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
fn a_live_incomplete_entry_is_left_alone() {
    let t = TempRun::new("incomplete");
    let run = RunDir::open(&t.0).unwrap();
    // An owner that has locked its file but not written it yet.
    plant(&t.0, "channel.x.2", b"", 60);
    let fd = rustix::fs::open(
        t.0.join("channel.x.2"),
        OFlags::RDWR | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    assert!(ofdlock::try_lock(&fd, LOCK_BYTE).unwrap());
    let l = run.list().unwrap();
    assert_eq!(l.invalid.len(), 1);
    assert!(!l.invalid[0].removed);
    assert_eq!(t.files(), 1);
    drop(fd);
    assert!(run.list().unwrap().invalid[0].removed);
    assert_eq!(t.files(), 0);
}

#[test]
#[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
fn unsafe_run_directories_are_refused_with_advice() {
    let t = TempRun::new("perm");
    std::fs::create_dir(&t.0).unwrap();
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = RunDir::open(&t.0).unwrap_err().to_string();
    assert!(
        e.contains("others may write it") && e.contains("chmod go-w"),
        "{e}"
    );
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o720)).unwrap();
    assert!(RunDir::open(&t.0).is_err(), "group-writable");
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = RunDir::open(&t.0).unwrap();
    // Becoming unsafe later is noticed by the next listing.
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o757)).unwrap();
    assert!(run.list().is_err());
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o700)).unwrap();

    let link = t.0.join("link");
    std::os::unix::fs::symlink(&t.0, &link).unwrap();
    let e = RunDir::open(&link).unwrap_err().to_string();
    assert!(
        e.contains("symbolic link") && e.contains(dir::RUN_DIR_ENV),
        "{e}"
    );
    let file = t.0.join("file");
    std::fs::write(&file, b"").unwrap();
    let e = RunDir::open(&file).unwrap_err().to_string();
    assert!(e.contains("not a directory"), "{e}");
    // Another user's directory: / is root's (skipped when we are root).
    if rustix::process::geteuid().as_raw() != 0 {
        let e = RunDir::open(Path::new("/")).unwrap_err().to_string();
        assert!(e.contains("belongs to uid 0"), "{e}");
    }
}

#[test]
#[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
fn entries_we_may_not_open_are_only_counted() {
    if rustix::process::geteuid().as_raw() == 0 {
        return; // root opens everything
    }
    let t = TempRun::new("unreadable");
    let run = RunDir::open(&t.0).unwrap();
    let r = run.register(Kind::Rendezvous, "private", 0o000).unwrap();
    let l = run.list().unwrap();
    assert!(l.entries.is_empty());
    assert_eq!(l.unreadable, 1);
    drop(r);
    assert_eq!(t.files(), 0);
}

#[test]
fn default_path_follows_the_environment_order() {
    // Only reads the environment (tests never set it: they share a process).
    let p = dir::default_path();
    if let Some(v) = std::env::var_os(dir::RUN_DIR_ENV).filter(|v| !v.is_empty()) {
        assert_eq!(p, PathBuf::from(v));
    } else {
        let uid = rustix::process::geteuid().as_raw();
        assert_eq!(p, crate::sys::shm::ring_dir().join(format!("zcio-{uid}")));
    }
}

#[test]
#[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
fn a_failed_quiet_registration_is_counted() {
    let t = TempRun::new("quiet");
    std::fs::create_dir(&t.0).unwrap();
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let before = failures();
    let r = quietly(RunDir::open(&t.0).and_then(|d| d.register(Kind::Channel, "x", 0o600)));
    assert!(r.is_none());
    assert!(failures() > before, "counted");
    assert_eq!(t.files(), 0);
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let r = quietly(RunDir::open(&t.0).and_then(|d| d.register(Kind::Channel, "x", 0o600)));
    assert!(r.is_some());
}
