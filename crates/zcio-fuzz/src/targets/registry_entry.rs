//! A registry entry file as every tool that lists the registry reads it
//! (`RunDir::list`, behind `zcio ls`, `zcio stat`, `zcio top`, `zcio hz`
//! and `zcio metrics`): the input is written as one file in a private run
//! directory, then listed. Anyone who may write the run directory (the
//! owner's uid) or whose entry it is can put any bytes there.
//!
//! Invariant: no panic; the file is reported exactly once, as an entry or
//! as invalid; an entry is accepted only when its header decodes to a
//! known kind, a UTF-8 name of at most `NAME_MAX` bytes and the statistics
//! page this layout puts at its offset, with all `STATS_COUNT` counters
//! copied out; since nobody holds its lock, an accepted entry is reported
//! dead and removed; a file shorter than an entry is invalid; every refusal
//! has a reason.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use zcio_sys::registry::layout::{Header, HEADER_LEN};
use zcio_sys::registry::{Kind, RunDir, State, ENTRY_LEN, NAME_MAX, STATS_COUNT};

/// The private run directory of this process.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = crate::rings::dir().join("run");
        std::fs::create_dir_all(&d).expect("create the fuzz run directory");
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod the fuzz run directory");
        d
    })
}

/// `[file bytes…]`, at most one entry and a page long.
pub fn run(data: &[u8]) {
    let data = &data[..data.len().min(ENTRY_LEN + 4096)];
    let d = dir();
    let run = RunDir::open(d).expect("the fuzz run directory is ours");
    let file = "channel.fuzz.0";
    let path = d.join(file);
    std::fs::write(&path, data).expect("write the entry file");
    let l = run.list().expect("list the fuzz run directory");
    let mine = l.entries.iter().filter(|e| e.file == file).count()
        + l.invalid.iter().filter(|i| i.file == file).count();
    assert_eq!(mine, 1, "the file is reported once");
    if let Some(e) = l.entries.iter().find(|e| e.file == file) {
        assert!(data.len() >= ENTRY_LEN, "accepted a short file");
        assert!(e.name.len() <= NAME_MAX);
        assert!(Kind::ALL.contains(&e.kind));
        assert_eq!(e.stats.len(), STATS_COUNT);
        assert_eq!(e.state, State::Dead, "nobody holds its lock");
        assert!(!path.exists(), "a dead entry is removed");
        // What the lister accepted is what the header says.
        let h = Header::from_bytes(data[..HEADER_LEN].try_into().expect("a header"));
        let (kind, name) = h.validate().expect("the lister accepted it");
        assert_eq!((kind, name), (e.kind, e.name.as_str()));
        for (i, v) in e.stats.iter().enumerate() {
            let at = zcio_sys::registry::layout::STATS_OFFSET + 8 * i;
            let want = u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
            assert_eq!(*v, want, "counter {i}");
        }
    } else {
        let i = l.invalid.iter().find(|i| i.file == file).expect("reported");
        assert!(!i.reason.is_empty());
    }
    let _ = std::fs::remove_file(&path);
}

/// Real entries of every kind (registered by the production code and read
/// back from their files), and a short one.
pub fn seeds() -> Vec<Vec<u8>> {
    let d = crate::rings::dir().join("seeds-run");
    let _ = std::fs::remove_dir_all(&d);
    let run = RunDir::open(&d).expect("a seed run directory");
    let mut out = Vec::new();
    for (i, kind) in Kind::ALL.into_iter().enumerate() {
        let name = format!("/run/zcio/seed-{i}.sock");
        let r = run.register(kind, &name, 0o600).expect("register a seed");
        r.set(0, 42 + i as u64);
        r.set(STATS_COUNT - 1, u64::MAX);
        out.push(std::fs::read(r.path()).expect("read the seed entry"));
    }
    out.push(out[0][..HEADER_LEN].to_vec());
    let _ = std::fs::remove_dir_all(&d);
    out
}
