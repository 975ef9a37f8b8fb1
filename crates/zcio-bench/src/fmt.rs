//! Human-readable sizes and rates.

/// `4 KiB`, `1 MiB`, `16 MiB`, `1.5 KiB`.
pub fn size(bytes: usize) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if (v - v.round()).abs() < 1e-9 {
        format!("{} {}", v.round() as u64, UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Parse `4K`, `4KiB`, `1M`, `16MiB`, `4096`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: usize = num
        .parse()
        .map_err(|_| format!("bad size '{s}': expected e.g. 4K, 1M, 4096"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("bad size unit '{other}' in '{s}': use K, M or G")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' too large"))
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
