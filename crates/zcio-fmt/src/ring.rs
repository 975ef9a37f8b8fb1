//! The ring options a user gives (`zcio ring create`, `zcio pipe put/get`,
//! `zcio bridge import`): sizes and counts that must be powers of two in a
//! range, permission bits, a number of readers. Each parser returns a value
//! inside its documented bounds or a message naming the value and the
//! bound (with a hint that never leaves the range).

use zcio::ring::Geometry;

const BLOCK_HEADER_LEN: u64 = Geometry::BLOCK_HEADER_LEN;
const MAX_CONSUMERS: usize = Geometry::MAX_CONSUMERS;
const MAX_DATA_LEN: u64 = Geometry::MAX_DATA_LEN;
const MAX_DESCRIPTORS: u64 = Geometry::MAX_DESCRIPTORS;
const MAX_SLOT_SIZE: u64 = Geometry::MAX_SLOT_SIZE;

use crate::limits::exact;

/// A power of two in `min..=max` (a size if `bytes`, else a count), with a
/// hint that never leaves that range.
pub fn pow2_in(n: u64, min: u64, max: u64, bytes: bool) -> Result<u64, String> {
    let show = |v: u64| if bytes { exact(v) } else { v.to_string() };
    let plain = |v: u64| show(v).replace(' ', "");
    if n < min {
        return Err(format!("{} is below the minimum of {}", show(n), show(min)));
    }
    if n > max {
        return Err(format!("{} is above the maximum of {}", show(n), show(max)));
    }
    if n.is_power_of_two() {
        return Ok(n);
    }
    let lo = 1u64 << n.ilog2();
    let hint = match (lo >= min, lo.checked_mul(2).filter(|&h| h <= max)) {
        (true, Some(hi)) => format!("try {} or {}", plain(lo), plain(hi)),
        (true, None) => format!("try {}", plain(lo)),
        (false, Some(hi)) => format!("try {}", plain(hi)),
        (false, None) => String::new(),
    };
    Err(format!("{} is not a power of two ({hint})", show(n)))
}

/// `--size`: a ring's data area, a power of two from the page size to
/// [`Geometry::MAX_DATA_LEN`] (16 GiB).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let page = zcio::page_size() as u64;
    pow2_in(crate::parse_bytes_u64(s)?, page, MAX_DATA_LEN, true)
}

/// `--slot-size`: a power of two from 32 bytes (two block headers) to
/// [`Geometry::MAX_SLOT_SIZE`] (2 GiB).
pub fn parse_slot_size(s: &str) -> Result<u64, String> {
    pow2_in(
        crate::parse_bytes_u64(s)?,
        2 * BLOCK_HEADER_LEN,
        MAX_SLOT_SIZE,
        true,
    )
}

/// `--entries`: a power of two from 2 to [`Geometry::MAX_DESCRIPTORS`] (2^24).
pub fn parse_entries(s: &str) -> Result<u64, String> {
    crate::not_negative(s, "number of entries", "a power of two such as 4096")?;
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number (e.g. 1024, 4096, 65536)"))?;
    pow2_in(n, 2, MAX_DESCRIPTORS, false)
}

/// `--mode`: permission bits in octal (`0600`, `644`, `0o660`), at most
/// `0777`.
pub fn parse_mode(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let digits = t.strip_prefix("0o").unwrap_or(t);
    let m = u32::from_str_radix(digits, 8)
        .map_err(|_| format!("'{s}' is not an octal mode: use e.g. 0600, 0660, 644"))?;
    if m > 0o777 {
        return Err(format!(
            "mode '{s}' has bits beyond 0777 (only permission bits apply)"
        ));
    }
    Ok(m)
}

/// `--readers`: readers to wait for, 0 to [`Geometry::MAX_CONSUMERS`] (a ring's
/// consumer slots).
pub fn parse_readers(s: &str) -> Result<usize, String> {
    crate::not_negative(s, "number of readers", "0 to 64")?;
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of readers"))?;
    if n > MAX_CONSUMERS {
        return Err(format!(
            "{n} readers: a ring has {MAX_CONSUMERS} consumer slots, so at most {MAX_CONSUMERS}"
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two_with_hints_in_range() {
        assert_eq!(parse_size("256K").unwrap(), 256 << 10);
        let e = parse_size("3M").unwrap_err();
        assert_eq!(e, "3 MiB is not a power of two (try 2MiB or 4MiB)");
        // Hints never go below the minimum, and 4095 is not "4 KiB".
        let e = parse_size("0").unwrap_err();
        assert_eq!(e, "0 B is below the minimum of 4 KiB");
        let e = parse_size("4095").unwrap_err();
        assert_eq!(e, "4095 B is below the minimum of 4 KiB");
        let e = parse_size("6K").unwrap_err();
        assert_eq!(e, "6 KiB is not a power of two (try 4KiB or 8KiB)");
        let e = parse_slot_size("40").unwrap_err();
        assert_eq!(e, "40 B is not a power of two (try 32B or 64B)");
        let e = parse_slot_size("3").unwrap_err();
        assert_eq!(e, "3 B is below the minimum of 32 B");
        let e = parse_size("1TiB").unwrap_err();
        assert_eq!(e, "1 TiB is above the maximum of 16 GiB");
        let e = parse_size("24G").unwrap_err();
        assert!(e.contains("above the maximum"), "{e}");
        assert_eq!(parse_entries("4096").unwrap(), 4096);
        assert_eq!(
            parse_entries("1000").unwrap_err(),
            "1000 is not a power of two (try 512 or 1024)"
        );
        assert!(parse_entries("1").unwrap_err().contains("minimum of 2"));
    }

    #[test]
    fn modes_and_readers() {
        assert_eq!(parse_mode("0600").unwrap(), 0o600);
        assert_eq!(parse_mode("644").unwrap(), 0o644);
        assert_eq!(parse_mode("0o660").unwrap(), 0o660);
        assert!(parse_mode("0800").is_err());
        assert!(parse_mode("7777").is_err());
        assert_eq!(parse_readers("64").unwrap(), 64);
        assert!(parse_readers("65").unwrap_err().contains("at most 64"));
        assert!(parse_readers("-1").unwrap_err().contains("negative"));
    }
}
