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
fn run(s: &mut Stack, blocks: Vec<Msg>) -> Result<Vec<u8>, ModuleError> {
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

fn cut(pool: &Pool, data: &[u8], step: usize, pieces: usize) -> Vec<Msg> {
    data.chunks(step.max(1))
        .map(|c| block(pool, c, pieces))
        .collect()
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
