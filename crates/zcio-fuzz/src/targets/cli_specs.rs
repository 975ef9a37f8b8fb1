//! Endpoint specs as `zcio cp SRC DST`, the C API's `zcio_cp` and the
//! Python package's `cp` take them (`-`, `fd:N`, `tcp:HOST:PORT`,
//! `tcp-listen:…`, `udp:…`, `unix:PATH`, `ring:NAME`, a path): one string
//! through `zcio::splice::Spec::parse`, the parsing half of `IoObject::open`
//! (the opening half is not driven: it would connect to whatever address
//! the input names), and `Spec::is_path`; a ring name through
//! `zcio::ring::ring_path`.
//!
//! Invariant: no panic; a parsed spec prints (`Display`) as a spec that
//! parses to the same value (parse(format(x)) == x); `Spec::is_path` says "path"
//! exactly for the specs that parse as one; a descriptor number is not
//! negative; a ring name that has a path names a file directly inside the
//! ring directory (no name reaches outside it).

use zcio::splice::Spec;

/// The input is the spec (UTF-8; other inputs are skipped).
pub fn run(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = Spec::parse(s);
    assert_eq!(
        Spec::is_path(s),
        matches!(parsed, Ok(Spec::Path(_))),
        "is_path and parse disagree on {s:?}"
    );
    let Ok(spec) = parsed else {
        return;
    };
    assert_eq!(Spec::parse(&spec.to_string()).as_ref(), Ok(&spec));
    match &spec {
        Spec::Fd(n) => assert!(*n >= 0),
        Spec::Ring(name) => {
            if let Some(p) = zcio::ring::ring_path(name) {
                let dir = zcio::ring::ring_path("x")
                    .and_then(|x| x.parent().map(std::path::Path::to_path_buf))
                    .expect("the ring directory");
                assert_eq!(
                    p.parent(),
                    Some(dir.as_path()),
                    "{name:?} leaves the ring dir"
                );
                let file = p.file_name().and_then(|f| f.to_str()).unwrap_or("");
                assert_eq!(file.strip_prefix("zcio-ring."), Some(name.as_str()));
            }
        }
        _ => {}
    }
}

/// Every kind of spec the documentation shows, and a few refused ones.
pub fn seeds() -> Vec<Vec<u8>> {
    [
        "-",
        "fd:0",
        "fd:3",
        "fd:+7",
        "fd:-1",
        "fd:x",
        "tcp:127.0.0.1:9000",
        "tcp-listen:0.0.0.0:0",
        "udp:localhost:53",
        "udp:[::1]:9",
        "unix:/run/zcio.sock",
        "ring:frames",
        "ring:../etc",
        "ring:",
        "big.log",
        "dir/big.log.zst",
        "",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
