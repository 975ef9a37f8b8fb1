//! `include/zcio.h` is what cbindgen generates from this crate: the test
//! regenerates it in memory and fails if the committed header differs.
//! Update it with `ZCIO_BLESS=1 cargo test -p zcio-c --test header`.

use std::path::PathBuf;

#[test]
fn committed_header_is_current() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = crate_dir.join("../../include/zcio.h");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("read crates/zcio-c/cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("header is UTF-8");
    if std::env::var_os("ZCIO_BLESS").is_some() {
        std::fs::write(&header, &fresh).expect("write include/zcio.h");
        return;
    }
    let committed = std::fs::read_to_string(&header).unwrap_or_default();
    if committed != fresh {
        let line = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(fresh.lines().count()));
        panic!(
            "include/zcio.h is out of date (first difference at line {}).\n\
             Regenerate it with: ZCIO_BLESS=1 cargo test -p zcio-c --test header\n\
             committed: {:?}\n\
             generated: {:?}",
            line + 1,
            committed.lines().nth(line),
            fresh.lines().nth(line),
        );
    }
}
