//! The check that the crate's top-level modules keep the layers described in
//! the crate documentation: the import graph of its top-level modules
//! ([`zcio_testkit::layers`]) has no cycle and no import from a higher layer.

use std::path::Path;

use zcio_testkit::layers::{assert_layered, module_graph};

/// The benchmark families (layer 2); [`TOP`] is layer 3, every other
/// module a helper (layer 1).
const FAMILIES: [&str; 9] = [
    "proxyb",
    "registryb",
    "bridge",
    "containers",
    "ring",
    "semantics",
    "splice",
    "tokiob",
    "transfer",
];
/// The dispatch of child roles.
const TOP: [&str; 1] = ["roles"];

fn layer(module: &str) -> u8 {
    if TOP.contains(&module) {
        3
    } else if FAMILIES.contains(&module) {
        2
    } else {
        1
    }
}

#[test]
fn top_level_modules_form_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    // The scan sees the crate: its modules and some imports that must stay.
    for m in FAMILIES.iter().chain(&TOP).chain(&["child", "touch"]) {
        assert!(graph.contains_key(*m), "no module {m} in {graph:?}");
    }
    assert!(graph["ring"].contains("child") && graph["roles"].contains("ring"));
    assert_layered(&graph, layer, "the crate documentation");
}
