//! The layers of `docs/ARCHITECTURE.md`, checked on the sources:
//!
//! - the crates: each core crate depends only on the zcio crates below it
//!   (so the compiler refuses any import of a higher layer);
//! - inside each core crate, the top-level modules keep their sub-layers
//!   (no import from a higher one) and no module file imports itself
//!   through others (no import cycle among the files, [`file_graph`]).
//!
//! A new crate or top-level module must be placed here and in the
//! architecture document.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use zcio_testkit::layers::{assert_layered, file_graph, find_cycle, module_graph};

/// The core crates, bottom up, each with its top-level modules in layers
/// (bottom up; a module may import from its own layer and those below).
const CRATES: [(&str, &[&[&str]]); 5] = [
    (
        "zcio-sys",
        &[
            &[
                "sys", "sync", "wait", "bell", "view", "copy", "error", "testing",
            ],
            &["region", "segment", "registry"],
        ],
    ),
    (
        "zcio-core",
        &[
            &["buf", "msg", "array"],
            &["channel", "ring", "rendezvous"],
            &["proxy", "tokio", "forward", "typed"],
        ],
    ),
    (
        "zcio-semantics",
        &[
            &["uffd", "vm", "wire", "fit"],
            &["cost", "pages", "tcow", "arena"],
            &["error", "owned", "tests", "policy", "calibrate", "endpoint"],
        ],
    ),
    (
        "zcio-splice",
        &[
            &["module"],
            &["error", "io_object", "mover_kind", "mover", "blockio"],
            &["association", "completions", "spec"],
        ],
    ),
    ("zcio", &[&["any_error"]]),
];

/// The zcio crates each core crate may depend on: every one below it.
const MAY_USE: [(&str, &[&str]); 5] = [
    ("zcio-sys", &[]),
    ("zcio-core", &["zcio-sys"]),
    ("zcio-semantics", &["zcio-sys", "zcio-core"]),
    ("zcio-splice", &["zcio-sys", "zcio-core"]),
    (
        "zcio",
        &["zcio-sys", "zcio-core", "zcio-semantics", "zcio-splice"],
    ),
];

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

/// The zcio crates named in the `[dependencies]` table of a manifest.
fn zcio_dependencies(name: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(crate_dir(name).join("Cargo.toml")).expect("manifest");
    let mut section = String::new();
    let mut out = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if section == "[dependencies]" || section.ends_with(".dependencies]") {
            let key = line.split(['=', ' ']).next().unwrap_or("");
            if key.starts_with("zcio") && !section.contains("dev-") {
                out.insert(key.to_string());
            }
        }
    }
    out
}

#[test]
fn crates_depend_only_on_the_crates_below() {
    for (name, allowed) in MAY_USE {
        let deps = zcio_dependencies(name);
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        let up: Vec<&String> = deps.difference(&allowed).collect();
        assert!(
            up.is_empty(),
            "{name} depends on {up:?}, which is not below it (docs/ARCHITECTURE.md, \"Crates\")"
        );
    }
    // The scan reads the manifests: the dependencies that must be there are.
    assert!(zcio_dependencies("zcio-core").contains("zcio-sys"));
    assert_eq!(zcio_dependencies("zcio").len(), 4);
}

#[test]
fn modules_of_each_crate_form_layers() {
    for (name, layers) in CRATES {
        let graph = module_graph(&crate_dir(name).join("src"));
        let layer = |m: &str| {
            let at = layers.iter().position(|ms| ms.contains(&m));
            let at = at.unwrap_or_else(|| {
                panic!("top-level module `{m}` of {name} is in no layer: place it in CRATES (tests/layers.rs) and docs/ARCHITECTURE.md")
            });
            u8::try_from(at).expect("few layers")
        };
        for m in graph.keys() {
            layer(m);
        }
        assert_layered(&graph, layer, "docs/ARCHITECTURE.md");
    }
    // The scan sees the crates: imports that must be there are.
    let core = module_graph(&crate_dir("zcio-core").join("src"));
    assert!(core["channel"].contains("buf") && core["tokio"].contains("channel"));
}

#[test]
fn no_import_cycle_among_the_files_of_a_crate() {
    for (name, _) in CRATES {
        let graph = file_graph(&crate_dir(name).join("src"));
        if let Some(cycle) = find_cycle(&graph) {
            panic!("{name}: import cycle between files: {}", cycle.join(" -> "));
        }
    }
    // The scan sees the files: edges that must be there are (a direct
    // path, and one through `buf`'s re-export of `fbuf::Fbuf`).
    let core = file_graph(&crate_dir("zcio-core").join("src"));
    assert!(
        core["channel::core"].contains("channel::ledger"),
        "{:?}",
        core["channel::core"]
    );
    assert!(
        core["channel::tx"].contains("buf::fbuf"),
        "{:?}",
        core["channel::tx"]
    );
}
