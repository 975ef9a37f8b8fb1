//! Every committed seed (`fuzz/corpus/<target>/`) and every committed
//! finding (`fuzz/regressions/<target>/`) through its target's body, in the
//! ordinary test suite: a finding, once fixed, stays fixed. Every target
//! has a corpus folder with at least one seed, and every folder names a
//! target.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    v.retain(|p| p.is_file());
    v.sort();
    v
}

fn folders(dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_target_has_seeds_and_every_folder_a_target() {
    for t in zcio_fuzz::all() {
        let n = files(&root().join("corpus").join(t.name)).len();
        assert!(
            n > 0,
            "fuzz/corpus/{} has no seeds: run zcio-fuzz-seeds",
            t.name
        );
    }
    for kind in ["corpus", "regressions"] {
        for f in folders(&root().join(kind)) {
            assert!(
                zcio_fuzz::find(&f).is_some(),
                "fuzz/{kind}/{f} names no target"
            );
        }
    }
}

#[test]
fn committed_seeds_and_findings_pass() {
    let mut n = 0;
    for t in zcio_fuzz::all() {
        for kind in ["corpus", "regressions"] {
            for f in files(&root().join(kind).join(t.name)) {
                let bytes = std::fs::read(&f).unwrap();
                eprintln!("{} {}", t.name, f.display());
                (t.run)(&bytes);
                n += 1;
            }
        }
    }
    assert!(n > 0);
}

#[test]
fn generated_seeds_pass() {
    for t in zcio_fuzz::all() {
        let seeds = (t.seeds)();
        assert!(!seeds.is_empty(), "{} makes no seeds", t.name);
        for s in &seeds {
            (t.run)(s);
        }
    }
}
