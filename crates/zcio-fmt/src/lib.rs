//! Human-readable sizes and rates: parsing sizes given by a user (`4K`,
//! `16MiB`) and printing sizes and rates. Shared by the `zcio` tool and the
//! benchmarks (`zcio-bench`), so neither depends on the other.

pub mod limits;
pub mod ring;

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
    not_negative(s, "size", "a positive size such as 8MiB")?;
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

/// A value given to an option that starts with `-`: a negative number
/// (`the size is negative: -1M (give a positive size such as 8MiB)`, naming
/// the whole value), or the next option where the value was left out. `what`
/// names the kind of value (`size`), `hint` what to give instead. Options
/// whose values may start with `-` (clap's `allow_hyphen_values`, so that
/// `--size -1M` reaches the value parser instead of reading as an unknown
/// option `-1`) check their values with this first.
pub fn not_negative(s: &str, what: &str, hint: &str) -> Result<(), String> {
    let t = s.trim();
    let Some(rest) = t.strip_prefix('-') else {
        return Ok(());
    };
    if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') || rest.parse::<f64>().is_ok() {
        Err(format!("the {what} is negative: {t} (give {hint})"))
    } else if !rest.is_empty() {
        Err(format!(
            "'{t}' is an option, not a {what}: the value is missing (give {hint})"
        ))
    } else {
        Ok(())
    }
}

/// A count (`0`, `64`): a whole number that fits `T`.
pub fn parse_count<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    not_negative(s, "count", "a whole number such as 64")?;
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number (e.g. 0, 1, 64)"))?;
    T::try_from(n).map_err(|_| format!("{n} is too large"))
}

/// A number of seconds (`10`, `0.5`): finite and not negative.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    not_negative(
        s,
        "duration",
        "a non-negative number of seconds such as 2.5",
    )?;
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("'{s}' is not a number of seconds (e.g. 0.5, 10)")),
    }
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
        assert_eq!(parse_bytes_u64("64k").unwrap(), 64 << 10);
        assert_eq!(parse_bytes_u64("2 GiB").unwrap(), 2 << 30);
        assert!(parse_bytes_u64("M").is_err());
        assert!(parse_bytes_u64("99999999999T").is_err());
        assert_eq!(size(100), "100 B");
    }

    #[test]
    fn negative_values_are_named_whole() {
        assert_eq!(
            parse_size("-1M").unwrap_err(),
            "the size is negative: -1M (give a positive size such as 8MiB)"
        );
        assert_eq!(
            parse_bytes_u64(" -5").unwrap_err(),
            "the size is negative: -5 (give a positive size such as 8MiB)"
        );
        assert!(parse_size("--layout")
            .unwrap_err()
            .contains("value is missing"));
        assert!(parse_size("-").unwrap_err().contains("not a size"));
        assert_eq!(parse_count::<usize>("64").unwrap(), 64);
        assert!(parse_count::<usize>("-5")
            .unwrap_err()
            .starts_with("the count is negative: -5 "));
        assert!(parse_count::<u8>("300").unwrap_err().contains("too large"));
        assert_eq!(parse_seconds("0.5").unwrap(), 0.5);
        assert!(parse_seconds("-1")
            .unwrap_err()
            .starts_with("the duration is negative: -1 "));
        assert!(parse_seconds("-inf").unwrap_err().contains("negative"));
        assert!(parse_seconds("nan").is_err());
    }
}
