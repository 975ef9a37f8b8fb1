//! Processing modules through the public API: a pass-through stack copies
//! nothing, transforming stacks round-trip, hostile input gives errors.

use proptest::prelude::*;
use zcio::splice::module::{ModuleError, Registry, Stack};
use zcio::{Msg, Pool, PoolConfig};

const KEY: &str = "8f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100";

fn pool(name: &str) -> Pool {
    Pool::new(PoolConfig {
        chunk_size: 4 << 20,
        populate: false,
        ..PoolConfig::named(name)
    })
}

/// A block of our own frozen pool buffers (immutable), `pieces` slices.
fn block(pool: &Pool, bytes: &[u8], pieces: usize) -> Msg {
    let mut m = Msg::new();
    if bytes.is_empty() {
        return m;
    }
    for part in bytes.chunks(bytes.len().div_ceil(pieces.max(1))) {
        let mut b = pool.try_alloc(part.len()).expect("alloc");
        b.as_mut_slice().copy_from_slice(part);
        m.join(Msg::from(b.freeze().expect("freeze")))
            .expect("few slices");
    }
    m
}

fn stack(pool: &Pool, specs: &[&str]) -> Stack {
    let reg = Registry::builtin();
    let mut s = Stack::new(pool.clone());
    for spec in specs {
        s.push(reg.open(spec).unwrap_or_else(|e| panic!("{spec}: {e}")));
    }
    s
}

/// All blocks through the stack, then finish; the bytes that came out.
fn run(s: &mut Stack, blocks: impl IntoIterator<Item = Msg>) -> Result<Vec<u8>, ModuleError> {
    let mut out = Vec::new();
    for b in blocks {
        for m in s.put(b)? {
            out.extend(m.to_vec());
        }
    }
    for m in s.finish()? {
        out.extend(m.to_vec());
    }
    Ok(out)
}

/// `data` in blocks of `step` bytes, made one at a time as the stack takes
/// them (all of them at once could exhaust the pool: with `step` 1, every
/// byte would hold a buffer).
fn cut<'a>(
    pool: &'a Pool,
    data: &'a [u8],
    step: usize,
    pieces: usize,
) -> impl Iterator<Item = Msg> + 'a {
    data.chunks(step.max(1))
        .map(move |c| block(pool, c, pieces))
}

#[test]
fn pass_through_stack_copies_nothing() {
    let pool = pool("mod-pass");
    let ring = format!("test-mod-tap-{}", std::process::id());
    let mut s = stack(
        &pool,
        &[
            "crc32c",
            "inet",
            "count",
            &format!("tap:ring={ring},size=1M"),
        ],
    );
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 13 % 251) as u8).collect();
    let mut total = 0;
    for b in cut(&pool, &data, 65_536, 3) {
        let inputs: Vec<(*const u8, usize, usize)> = b
            .slices()
            .iter()
            .map(|sl| (sl.fbuf().as_ptr(), sl.offset(), sl.len()))
            .collect();
        let out = s.put(b).unwrap();
        assert_eq!(out.len(), 1, "one block in, the same block out");
        // Pointer identity: the very same buffers and ranges went through.
        let outputs: Vec<(*const u8, usize, usize)> = out[0]
            .slices()
            .iter()
            .map(|sl| (sl.fbuf().as_ptr(), sl.offset(), sl.len()))
            .collect();
        assert_eq!(inputs, outputs);
        total += out[0].len();
    }
    assert!(s.finish().unwrap().is_empty());
    assert_eq!(total, data.len());
    assert_eq!(s.copied(), 0, "the Context counted no copies");
    assert_eq!(s.allocated(), 0, "no output buffers were needed");
    assert_eq!(
        s.control("crc32c", "value", None).unwrap(),
        format!("{:#010x}", crc32c::crc32c(&data))
    );
    assert_eq!(
        s.control("count", "bytes", None).unwrap(),
        data.len().to_string()
    );
    let tap = s.control("tap", "stats", None).unwrap();
    assert!(tap.contains("errors=0"), "{tap}");
    drop(s);
    zcio::ring::unlink(&ring).unwrap();
}

#[test]
fn compress_seal_open_decompress_chain() {
    let pool = pool("mod-chain");
    let data: Vec<u8> = (0..1_000_000u32)
        .map(|i| (i / 100 % 7) as u8 + b'a')
        .collect();
    let mut tx = stack(
        &pool,
        &[
            "crc32c",
            "zstd:level=3",
            &format!("seal:key={KEY},frame=64K"),
        ],
    );
    let wire = run(&mut tx, cut(&pool, &data, 100_000, 2)).unwrap();
    assert!(wire.len() < data.len() / 10, "compressed: {}", wire.len());
    let mut rx = stack(&pool, &[&format!("open:key={KEY}"), "unzstd", "crc32c"]);
    assert_eq!(run(&mut rx, cut(&pool, &wire, 4099, 2)).unwrap(), data);
    assert_eq!(
        tx.control(0, "value", None).unwrap(),
        rx.control(2, "value", None).unwrap()
    );
}

#[test]
fn tampered_ciphertext_fails() {
    let pool = pool("mod-tamper");
    let mut tx = stack(&pool, &[&format!("seal:key={KEY}")]);
    let mut wire = run(&mut tx, vec![block(&pool, &[5u8; 10_000], 1)]).unwrap();
    wire[5000] ^= 0x80;
    let mut rx = stack(&pool, &[&format!("open:key={KEY}")]);
    let e = run(&mut rx, cut(&pool, &wire, 3000, 1)).unwrap_err();
    assert!(
        matches!(e, ModuleError::BadInput { ref module, .. } if module == "open"),
        "{e}"
    );
    // The stream stays rejected.
    assert!(rx.put(block(&pool, b"more", 1)).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn zstd_round_trip(data in proptest::collection::vec(0u8..8, 0..200_000),
                       step in 1usize..70_000, pieces in 1usize..4, wire_step in 1usize..5000,
                       level in 1i32..6) {
        let pool = pool("mod-prop-zstd");
        let mut tx = stack(&pool, &[&format!("zstd:level={level}")]);
        let wire = run(&mut tx, cut(&pool, &data, step, pieces)).unwrap();
        let mut rx = stack(&pool, &["unzstd"]);
        prop_assert_eq!(run(&mut rx, cut(&pool, &wire, wire_step, 1)).unwrap(), data);
    }

    #[test]
    fn seal_round_trip(data in proptest::collection::vec(any::<u8>(), 0..100_000),
                       step in 1usize..40_000, pieces in 1usize..4, wire_step in 1usize..5000,
                       frame in 1usize..20_000) {
        let pool = pool("mod-prop-seal");
        let mut tx = stack(&pool, &[&format!("seal:key={KEY},frame={frame}")]);
        let wire = run(&mut tx, cut(&pool, &data, step, pieces)).unwrap();
        let mut rx = stack(&pool, &[&format!("open:key={KEY}")]);
        prop_assert_eq!(run(&mut rx, cut(&pool, &wire, wire_step, 2)).unwrap(), data);
    }

    #[test]
    fn hostile_input_is_an_error_not_a_panic(garbage in proptest::collection::vec(any::<u8>(), 0..5000),
                                             step in 1usize..600, keep in 0usize..5000) {
        let pool = pool("mod-prop-hostile");
        // Garbage.
        let mut rx = stack(&pool, &[&format!("open:key={KEY}")]);
        prop_assert!(run(&mut rx, cut(&pool, &garbage, step, 1)).is_err());
        let mut rx = stack(&pool, &["unzstd"]);
        let _ = run(&mut rx, cut(&pool, &garbage, step, 1));
        // Truncated valid streams.
        let mut tx = stack(&pool, &["zstd", &format!("seal:key={KEY},frame=1000")]);
        let wire = run(&mut tx, vec![block(&pool, &garbage, 1)]).unwrap();
        let keep = keep % wire.len();
        let mut rx = stack(&pool, &[&format!("open:key={KEY}"), "unzstd"]);
        prop_assert!(run(&mut rx, cut(&pool, &wire[..keep], step, 1)).is_err());
    }
}

/// Build a shared object from C source with `cc`; `None` (after printing
/// `skipped:`) when there is no C compiler.
fn build_c(name: &str, src: &std::path::Path, defines: &[&str]) -> Option<std::path::PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if std::process::Command::new(&cc)
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skipped: no C compiler ({cc}) to build the example module");
        return None;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("zcio-cmod-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join(format!("lib{name}.so"));
    let status = std::process::Command::new(&cc)
        .args([
            "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        ])
        .arg("-I")
        .arg(root.join("include"))
        .args(defines)
        .arg("-o")
        .arg(&so)
        .arg(src)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed for {}", src.display());
    Some(so)
}

fn c_source(file: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("zcio-cmod-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(file);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn c_module_rot13() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../c/modules/rot13.c");
    let Some(so) = build_c("rot13", &src, &[]) else {
        return;
    };
    let mut reg = Registry::builtin();
    // SAFETY: our own example module, built just now from c/modules/rot13.c.
    let name = unsafe { reg.load(&so) }.unwrap();
    assert_eq!(name, "rot13");
    assert!(reg.names().contains(&"rot13"));

    let pool = pool("mod-c");
    let mut s = Stack::new(pool.clone());
    s.push(reg.open("rot13").unwrap());
    s.push(reg.open("rot13:shift=13").unwrap());
    s.push(reg.open("count").unwrap());
    let text: Vec<u8> = b"Hello, zcio modules! The quick brown fox. "
        .iter()
        .copied()
        .cycle()
        .take(100_000)
        .collect();
    let out = run(&mut s, cut(&pool, &text, 7000, 3)).unwrap();
    assert_eq!(out, text, "rot13 twice is the identity");
    // Input by pointer, output one copy per module: exactly 2 x the bytes.
    assert_eq!(s.copied(), 2 * text.len() as u64);

    let mut one = Stack::new(pool.clone());
    one.push(reg.open("rot13:shift=1").unwrap());
    let out = run(&mut one, vec![block(&pool, b"abz ABZ!", 1)]).unwrap();
    assert_eq!(out, b"bca BCA!");
    assert_eq!(one.control("rot13", "bytes", None).unwrap(), "8");
    assert_eq!(one.control(0, "shift", Some("2")).unwrap(), "ok");
    assert!(one.control(0, "shift", Some("99")).is_err());
    assert!(one
        .control(0, "nope", None)
        .unwrap_err()
        .to_string()
        .contains("unknown key"));
    assert!(one
        .control(0, "stats", None)
        .unwrap()
        .contains("bytes_in=8"));

    let e = reg.open("rot13:shift=40").err().unwrap().to_string();
    assert!(e.contains("rot13") && e.contains("shift=0..25"), "{e}");
    let e = reg.open("rot13:bogus=1").err().unwrap().to_string();
    assert!(e.contains("bogus"), "{e}");
}

const BAD_MODULE: &str = r#"
#include <errno.h>
#include <stdlib.h>
#include "zcio_module.h"
#ifndef VERSION
#define VERSION ZCIO_MODULE_ABI_VERSION
#endif
#ifndef NAME
#define NAME "bad"
#endif
static int st;
static void *o(const char *a, char *e, size_t n) { (void)a; (void)e; (void)n; return &st; }
__attribute__((unused)) static int p(void *s, const uint8_t *in, size_t len, zcio_emit_fn emit, void *ctx) {
    (void)s;
    if (len > 0 && in[0] == 'x') return -EBADMSG;
    if (len > 0 && in[0] == 'n') return emit(ctx, NULL, 5);
    if (len > 0 && in[0] == 'e') return -EIO;
    return emit(ctx, in, len);
}
static void c(void *s) { (void)s; }
static const struct zcio_module_v1 T = {
    .abi_version = VERSION, .struct_size = sizeof(struct zcio_module_v1), .name = NAME,
    .open = o,
#ifndef NO_PUT
    .put = p,
#endif
    .close = c,
};
#ifndef NO_ENTRY
const struct zcio_module_v1 *zcio_module_v1_entry(void) { return &T; }
#else
const struct zcio_module_v1 *other_entry(void) { return &T; }
#endif
"#;

#[test]
fn c_module_abi_checks_and_errors() {
    let src = c_source("bad.c", BAD_MODULE);
    let Some(good) = build_c("bad", &src, &[]) else {
        return;
    };
    let v2 = build_c("v2", &src, &["-DVERSION=2"]).unwrap();
    let noput = build_c("noput", &src, &["-DNO_PUT"]).unwrap();
    let badname = build_c("badname", &src, &["-DNAME=\"a:b\""]).unwrap();
    let noentry = build_c("noentry", &src, &["-DNO_ENTRY"]).unwrap();
    let mut reg = Registry::empty();
    for (so, want) in [
        (&v2, "ABI version 2"),
        (&noput, "must not be NULL"),
        (&badname, "invalid module name"),
        (&noentry, "no zcio_module_v1_entry symbol"),
    ] {
        // SAFETY: test modules built just now from BAD_MODULE.
        let e = unsafe { reg.load(so) }.unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
    // SAFETY: nothing is loaded: the file does not exist.
    let e = unsafe { reg.load("/nonexistent/libnothing.so") }.unwrap_err();
    assert!(matches!(e, ModuleError::Load { .. }), "{e}");

    // SAFETY: as above.
    assert_eq!(unsafe { reg.load(&good) }.unwrap(), "bad");
    let pool = pool("mod-c-bad");
    let mut s = Stack::new(pool.clone());
    s.push(reg.open("bad").unwrap());
    assert_eq!(
        run(&mut s, vec![block(&pool, b"fine", 1)]).unwrap(),
        b"fine"
    );
    let e = s.put(block(&pool, b"xx", 1)).unwrap_err();
    assert!(matches!(e, ModuleError::BadInput { .. }), "{e}");
    let e = s.put(block(&pool, b"nn", 1)).unwrap_err().to_string();
    assert!(e.contains("NULL"), "{e}");
    let e = s.put(block(&pool, b"ee", 1)).unwrap_err().to_string();
    assert!(e.contains("put returned -5"), "{e}");
    assert!(s
        .control(0, "anything", None)
        .unwrap_err()
        .to_string()
        .contains("no controls"));
}

/// CPU time of this process (user + system), seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct we pass; no other effect.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Not a benchmark with baselines (that is `zcio bench splice`): a quick
/// look at what a stack costs in-process, printed, never asserted.
/// `cargo test --release -p zcio --test splice_modules -- --ignored --nocapture`
#[test]
#[ignore = "measurement; run explicitly in release mode"]
fn stack_throughput() {
    let pool = Pool::new(PoolConfig {
        chunk_size: 16 << 20,
        max_chunks: 64,
        ..PoolConfig::named("mod-tput")
    });
    // 16 distinct 1 MiB blocks of text-like data: words drawn by a
    // xorshift generator (compresses about 3x).
    const WORDS: [&str; 16] = [
        "the ",
        "quick ",
        "brown ",
        "fox ",
        "jumps ",
        "over ",
        "a ",
        "lazy ",
        "dog, ",
        "zero-copy ",
        "buffers ",
        "move ",
        "between ",
        "processes. ",
        "and ",
        "modules ",
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let blocks: Vec<Msg> = (0..16)
        .map(|_| {
            let mut data = Vec::with_capacity(1 << 20);
            while data.len() < 1 << 20 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                data.extend_from_slice(WORDS[(x % 16) as usize].as_bytes());
            }
            data.truncate(1 << 20);
            block(&pool, &data, 1)
        })
        .collect();
    // Warm the pool (its chunks are created on first use).
    drop(stack(&pool, &["zstd"]).put(blocks[0].clone()).unwrap());
    let total_mib = 512;
    println!("stack                                  MiB/s   CPU s/GiB  copied");
    for specs in [
        vec!["count"],
        vec!["crc32c"],
        vec!["inet"],
        vec!["crc32c", "inet", "count"],
        vec!["zstd:level=1"],
        vec!["crc32c", "zstd:level=3"],
        vec!["seal:key=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"],
    ] {
        let mut s = stack(&pool, &specs);
        let (t0, c0) = (std::time::Instant::now(), cpu_seconds());
        for i in 0..total_mib {
            drop(s.put(blocks[i % blocks.len()].clone()).unwrap());
        }
        drop(s.finish().unwrap());
        let (dt, dc) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
        let label = specs
            .iter()
            .map(|s| s.split(':').next().unwrap_or(s))
            .collect::<Vec<_>>()
            .join(" -> ");
        println!(
            "{label:<36} {:>8.0} {:>10.3}  {}",
            total_mib as f64 / dt,
            dc / (total_mib as f64 / 1024.0),
            s.copied()
        );
    }
    // The same work on plain Vecs, for comparison.
    let plain: Vec<Vec<u8>> = blocks.iter().map(Msg::to_vec).collect();
    for (label, level) in [
        ("baseline: zstd::stream::Encoder level 1", 1),
        ("baseline: level 3", 3),
    ] {
        let (t0, c0) = (std::time::Instant::now(), cpu_seconds());
        let mut enc = zstd::stream::Encoder::new(std::io::sink(), level).unwrap();
        for i in 0..total_mib {
            std::io::Write::write_all(&mut enc, &plain[i % plain.len()]).unwrap();
        }
        enc.finish().unwrap();
        let (dt, dc) = (t0.elapsed().as_secs_f64(), cpu_seconds() - c0);
        println!(
            "{label:<36} {:>8.0} {:>10.3}  -",
            total_mib as f64 / dt,
            dc / (total_mib as f64 / 1024.0)
        );
    }
}
