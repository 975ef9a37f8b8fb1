//! Gives the shared library its SONAME, so programs linked against the
//! installed `libzcio.so` (a symlink) record `libzcio.so.0`.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libzcio.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
