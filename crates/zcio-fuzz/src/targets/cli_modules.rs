//! Module chains as `zcio cp --module NAME[:KEY=VALUE,…]…`, the C API's and
//! the Python package's `cp(…, modules=[…])` take them: each line of the
//! input is one `--module` value, through `Registry::parse` (the first
//! half of `Registry::open`: name lookup, `Args::parse`), then the
//! module's own argument parsing — the built-in factory itself for the
//! modules that open without I/O (count, crc32c, inet, ratelimit, zstd,
//! unzstd), and `TapArgs::parse` / `SealArgs::parse` / `OpenArgs::parse`
//! (the parsing halves of `tap`, `seal` and `open`, which would create a
//! ring or read a key file named by the input).
//!
//! Invariant: no panic; a parsed spec names a registered module; its
//! arguments print (`Args::to_text`, what a C module receives) as text that
//! parses to the same arguments (parse(format(x)) == x); an opened module
//! reports the name it was opened under; accepted values are within their
//! documented bounds (seal's frame 1..=Seal::MAX_FRAME, open's max at most
//! Seal::MAX_FRAME, tap's ring named).

use zcio::splice::module::seal::{OpenArgs, Seal, SealArgs};
use zcio::splice::module::tap::TapArgs;
use zcio::splice::module::{Args, Registry};

/// Most modules in one chain.
const MAX_CHAIN: usize = 8;

/// The input is the chain, one module spec a line (UTF-8; other inputs
/// are skipped).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let reg = Registry::builtin();
    for spec in text.split('\n').take(MAX_CHAIN) {
        one(&reg, spec);
    }
}

fn one(reg: &Registry, spec: &str) {
    let Ok((name, factory, args)) = reg.parse(spec) else {
        return;
    };
    assert!(reg.contains(name));
    assert_eq!(name, spec.split(':').next().unwrap_or("").trim());
    let again = Args::parse(name, &args.to_text()).expect("printed arguments parse");
    assert_eq!(again, args);
    match name {
        "tap" => {
            if let Ok(t) = TapArgs::parse(args) {
                assert!(!t.ring.is_empty());
            }
        }
        "seal" => {
            if let Ok(s) = SealArgs::parse(args) {
                assert!((1..=Seal::MAX_FRAME).contains(&s.frame), "{}", s.frame);
            }
        }
        "open" => {
            if let Ok(o) = OpenArgs::parse(args) {
                assert!(o.max <= Seal::MAX_FRAME, "{}", o.max);
            }
        }
        _ => {
            if let Ok(m) = factory(args) {
                assert_eq!(m.name(), name);
            }
        }
    }
}

/// The chains the documentation shows.
pub fn seeds() -> Vec<Vec<u8>> {
    let key = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    [
        "zstd:level=3".to_string(),
        "unzstd:limit=64M".into(),
        "crc32c\ncount".into(),
        "inet".into(),
        "ratelimit:rate=100M,burst=1M".into(),
        "tap:ring=frames,policy=frp,size=64K,layout=continuous".into(),
        format!("seal:key={key},frame=4K\nopen:key={key},max=1M"),
        "open:keyfile=/k".into(),
        "crc32c\nzstd:level=19\ncount\nunzstd".into(),
        " count : ".into(),
        "zsdt:level=3".into(),
        "count:bogus=1".into(),
        "zstd:level=3,level=4".into(),
        "ratelimit:rate=0".into(),
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
