//! Human-readable sizes and rates: parsing sizes given by a user (`4K`,
//! `16MiB`) and printing sizes and rates. Shared by the `zcio` tool and the
//! benchmarks (`zcio-bench`), so neither depends on the other.

pub mod limits;

/// `4 KiB`, `1 MiB`, `16 MiB`, `1.5 KiB`, `100 B`.
pub fn size(bytes: usize) -> String {
    bytes_u64(bytes as u64)
}

/// [`size`] for `u64` counts.
pub fn bytes_u64(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || (v - v.round()).abs() < 0.05 {
        format!("{} {}", v.round() as u64, UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Parse `4096`, `4K`, `64KiB`, `1M`, `16MiB`, `1G` (units are binary).
pub fn parse_size(s: &str) -> Result<usize, String> {
    parse_bytes_u64(s)
        .and_then(|v| usize::try_from(v).map_err(|_| format!("size '{s}' is too large")))
}

/// [`parse_size`] for `u64` counts.
pub fn parse_bytes_u64(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size: use e.g. 4096, 64KiB, 1M, 16MiB"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "unknown unit '{other}' in '{s}': use K, M, G (or KiB, MiB, GiB)"
            ))
        }
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// A duration in nanoseconds, readably: `812 ns`, `12.3 µs`, `1.23 ms`.
pub fn ns(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} ms", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.1} µs", v / 1e3)
    } else {
        format!("{v:.0} ns")
    }
}

/// A rate with SI prefix: `1.23 M`, `456 k`.
pub fn si(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2} G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.1} ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_trip() {
        assert_eq!(size(4096), "4 KiB");
        assert_eq!(size(16 << 20), "16 MiB");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("4X").is_err());
    }
}
