//! The command line's sizes, counts, durations and ring options, as a user
//! (or a script building a command line from untrusted input) types them:
//! one string through every parser the `zcio` tool and the modules use —
//! `zcio_fmt::{parse_bytes_u64, parse_size, parse_count, parse_seconds,
//! not_negative}`, the ring options `zcio_fmt::ring::{parse_size,
//! parse_slot_size, parse_entries, parse_mode, parse_readers}` (clap's
//! value parsers in `zcio ring`, `zcio pipe`, `zcio bridge`), and the
//! modules' `zcio::splice::module::parse_size` (`frame=`, `rate=`, …) —
//! and the formatters beside them (`limits::exact`, `bytes_u64`, `ns`,
//! `si`, `limits::check_*`).
//!
//! Invariant: no panic; an accepted value lies within its documented
//! bounds (ring sizes and entries powers of two in their ranges, modes at
//! most 0777, readers at most 64, seconds finite and not negative, counts
//! within their type); where a formatter exists, parse(format(x)) == x
//! (`exact` for sizes, decimal for counts, `{}` for seconds, octal for
//! modes); the hint of a "not a power of two" error names only values the
//! same parser accepts; the tool's and the modules' size parsers agree on
//! every string both accept.

use zcio::internals::splice_args::parse_size as module_size;
use zcio_fmt::limits::{check_count, check_size, exact};
use zcio_fmt::ring;
use zcio_fmt::{bytes_u64, not_negative, ns, parse_bytes_u64, parse_count, parse_seconds, si};

/// The input is the argument (UTF-8; other inputs are skipped: a command
/// line's arguments reach clap's value parsers as `&str`).
pub fn run(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = not_negative(s, "size", "a size");
    sizes(s);
    counts(s);
    seconds(s);
    ring_options(s);
}

fn sizes(s: &str) {
    let tool = parse_bytes_u64(s);
    if let Ok(n) = tool {
        assert_eq!(parse_bytes_u64(&exact(n)), Ok(n), "{n}");
        assert_eq!(module_size(&exact(n)), Some(n), "{n}");
        assert_eq!(
            zcio_fmt::parse_size(s).ok(),
            usize::try_from(n).ok(),
            "usize and u64 sizes agree"
        );
        let _ = bytes_u64(n);
        let _ = check_size("--size", n, 4096, 1 << 30);
    }
    let module = module_size(s);
    if let Some(n) = module {
        assert_eq!(module_size(&exact(n)), Some(n), "{n}");
    }
    if let (Ok(a), Some(b)) = (&tool, module) {
        assert_eq!(*a, b, "one size, two meanings: {s:?}");
    }
}

fn counts(s: &str) {
    if let Ok(n) = parse_count::<u64>(s) {
        assert_eq!(parse_count::<u64>(&n.to_string()), Ok(n));
        assert_eq!(parse_count::<u8>(s).ok(), u8::try_from(n).ok());
        assert_eq!(parse_count::<u32>(s).ok(), u32::try_from(n).ok());
        let _ = check_count("--history", n, 0, 1 << 20);
    } else {
        assert!(parse_count::<u8>(s).is_err());
    }
}

fn seconds(s: &str) {
    if let Ok(v) = parse_seconds(s) {
        assert!(v.is_finite() && v >= 0.0, "{v}");
        let back = parse_seconds(&v.to_string()).expect("printed seconds parse");
        assert_eq!(back.to_bits(), v.to_bits(), "{v}");
        let _ = (ns(v), si(v));
    }
}

/// The values a "not a power of two" error suggests (its message is made
/// of numbers only, so the input cannot fake a hint).
fn hints(e: &str) -> Vec<&str> {
    match e.split_once(" is not a power of two (try ") {
        Some((_, rest)) => rest.trim_end_matches(')').split(" or ").collect(),
        None => Vec::new(),
    }
}

/// A power-of-two option: `parse` accepts a power of two in
/// `min..=max` that `print` prints back; when `number` reads a number
/// that `parse` refuses, every hint of the message is accepted.
fn pow2(
    s: &str,
    parse: fn(&str) -> Result<u64, String>,
    number: fn(&str) -> Option<u64>,
    (min, max): (u64, u64),
    print: fn(u64) -> String,
) {
    match parse(s) {
        Ok(n) => {
            assert!(n.is_power_of_two() && (min..=max).contains(&n), "{n}");
            assert_eq!(parse(&print(n)), Ok(n));
        }
        Err(e) => {
            if number(s).is_some() {
                for h in hints(&e) {
                    assert!(parse(h).is_ok(), "hint {h:?} of {e:?} is refused");
                }
            }
        }
    }
}

fn ring_options(s: &str) {
    use zcio::ring::Geometry;
    const BLOCK_HEADER_LEN: u64 = Geometry::BLOCK_HEADER_LEN;
    const MAX_DATA_LEN: u64 = Geometry::MAX_DATA_LEN;
    const MAX_DESCRIPTORS: u64 = Geometry::MAX_DESCRIPTORS;
    let page = zcio::page_size() as u64;
    let bytes = |s: &str| parse_bytes_u64(s).ok();
    let number = |s: &str| {
        not_negative(s, "n", "n").ok()?;
        s.trim().parse::<u64>().ok()
    };
    pow2(s, ring::parse_size, bytes, (page, MAX_DATA_LEN), exact);
    let slots = (2 * BLOCK_HEADER_LEN, MAX_DATA_LEN);
    pow2(s, ring::parse_slot_size, bytes, slots, exact);
    let entries = (2, MAX_DESCRIPTORS);
    pow2(s, ring::parse_entries, number, entries, |n| n.to_string());
    if let Ok(m) = ring::parse_mode(s) {
        assert!(m <= 0o777);
        for p in [format!("{m:o}"), format!("0{m:o}"), format!("0o{m:o}")] {
            assert_eq!(ring::parse_mode(&p), Ok(m));
        }
    }
    if let Ok(n) = ring::parse_readers(s) {
        assert!(n <= zcio::ring::Geometry::MAX_CONSUMERS);
        assert_eq!(ring::parse_readers(&n.to_string()), Ok(n));
    }
}

/// What the tool's documentation and tests give.
pub fn seeds() -> Vec<Vec<u8>> {
    [
        "4096",
        "4K",
        "64KiB",
        "1M",
        "16MiB",
        "1G",
        "2 GiB",
        "1TiB",
        "3M",
        "6K",
        "4095",
        "0",
        "100B",
        "10b",
        "99999999999T",
        "-1M",
        "--layout",
        "-",
        "64",
        "300",
        "0.5",
        "2.5",
        "-1",
        "nan",
        "inf",
        "0600",
        "644",
        "0o660",
        "0800",
        "7777",
        "1000",
        "4096",
        "65",
        " 8MiB ",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}
