//! The layers of `docs/ARCHITECTURE.md`, checked on the sources: the import
//! graph of zcio's top-level modules (`crate::…` paths, read by
//! [`zcio_testkit::layers`]) has no cycle, and no module imports from a
//! layer above its own. A new top-level module must be placed in a layer
//! here.

use std::path::Path;

use zcio_testkit::layers::{assert_layered, module_graph};

/// zcio's layers, bottom up; a module may import from its own layer and the
/// layers below.
const LAYERS: [(&str, &[&str]); 7] = [
    (
        "sys",
        &[
            "sys", "sync", "wait", "bell", "view", "copy", "error", "testing",
        ],
    ),
    ("substrate", &["region", "segment"]),
    ("buffers", &["buf", "msg", "array"]),
    (
        "transports",
        &[
            "channel",
            "ring",
            "rendezvous",
            "proxy",
            "tokio",
            "forward",
            "typed",
        ],
    ),
    ("semantics", &["semantics"]),
    ("paths", &["splice"]),
    ("umbrella", &["any_error"]),
];

fn layer(module: &str) -> u8 {
    let at = LAYERS.iter().position(|(_, ms)| ms.contains(&module));
    let at = at.unwrap_or_else(|| {
        panic!("top-level module `{module}` is in no layer: place it in LAYERS (tests/layers.rs) and docs/ARCHITECTURE.md")
    });
    u8::try_from(at).expect("few layers")
}

#[test]
fn top_level_modules_form_layers() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The scan sees the crate: every module is placed, and imports that must
    // be there are.
    for m in graph.keys() {
        layer(m);
    }
    assert!(graph["channel"].contains("segment") && graph["any_error"].contains("channel"));
    assert_layered(&graph, layer, "docs/ARCHITECTURE.md");
}
