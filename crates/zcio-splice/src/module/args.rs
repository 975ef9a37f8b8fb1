//! Module arguments: `key=value` pairs separated by commas, as in
//! `"ratelimit:rate=100M,burst=1M"`.

use super::ModuleError;

/// Parsed arguments of one module. A factory takes the keys it knows
/// ([`Args::take`] and friends) and calls [`Args::finish`], which rejects
/// anything left over, naming the keys the module accepts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Args {
    module: String,
    pairs: Vec<(String, String)>,
}

impl Args {
    /// Parse `"k=v,k2=v2"` (empty: no arguments) for module `module`. A
    /// bare word `k` means `k=` (a flag).
    pub fn parse(module: &str, text: &str) -> Result<Self, ModuleError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            let k = k.trim();
            if k.is_empty() {
                return Err(ModuleError::bad_args(
                    module,
                    format!("argument '{part}' has no name (write key=value)"),
                ));
            }
            if pairs.iter().any(|(seen, _)| seen == k) {
                return Err(ModuleError::bad_args(
                    module,
                    format!("argument '{k}' given twice"),
                ));
            }
            pairs.push((k.to_owned(), v.trim().to_owned()));
        }
        Ok(Self {
            module: module.to_owned(),
            pairs,
        })
    }

    /// The module these arguments are for.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// Whether no arguments are left.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The remaining arguments as `k=v,…` (what a C module receives).
    pub fn to_text(&self) -> String {
        self.pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Take and remove `key`'s value.
    pub fn take(&mut self, key: &str) -> Option<String> {
        let i = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(i).1)
    }

    /// Take `key` and parse it with `parse`, describing the expected form
    /// in the error.
    pub fn take_with<T>(
        &mut self,
        key: &str,
        expected: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, ModuleError> {
        match self.take(key) {
            None => Ok(None),
            Some(v) => parse(&v).map(Some).ok_or_else(|| {
                ModuleError::bad_args(&self.module, format!("{key}={v}: expected {expected}"))
            }),
        }
    }

    /// Take a size (`64K`, `100M`, `1G`, `4096`; powers of 1024).
    pub fn take_size(&mut self, key: &str) -> Result<Option<u64>, ModuleError> {
        self.take_with(key, "a size such as 4096, 64K, 100M or 1G", parse_size)
    }

    /// Take an integer.
    pub fn take_i64(&mut self, key: &str) -> Result<Option<i64>, ModuleError> {
        self.take_with(key, "an integer", |v| v.parse().ok())
    }

    /// Fail if any argument was not taken, listing what `accepted`.
    pub fn finish(self, accepted: &[&str]) -> Result<(), ModuleError> {
        if self.pairs.is_empty() {
            return Ok(());
        }
        let unknown: Vec<&str> = self.pairs.iter().map(|(k, _)| k.as_str()).collect();
        let known = if accepted.is_empty() {
            "none".to_owned()
        } else {
            accepted.join(", ")
        };
        Err(ModuleError::bad_args(
            &self.module,
            format!(
                "unknown argument(s) {} (accepted: {known})",
                unknown.join(", ")
            ),
        ))
    }
}

/// Parse a size: digits with an optional suffix `K`, `M`, `G`, `T`
/// (powers of 1024; `Ki`/`KiB`/`KB` and lower case also accepted).
/// `None` on overflow or bad syntax.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return None;
    }
    let n: u64 = t[..digits_end].parse().ok()?;
    let suffix = t[digits_end..].trim().to_ascii_lowercase();
    let unit = suffix.strip_suffix('b').unwrap_or(&suffix);
    let unit = unit.strip_suffix('i').unwrap_or(unit);
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs_and_rejects_leftovers() {
        let mut a = Args::parse("zstd", "level=3, flag").unwrap();
        assert_eq!(a.take_i64("level").unwrap(), Some(3));
        assert_eq!(a.take("flag").as_deref(), Some(""));
        a.finish(&["level", "flag"]).unwrap();

        let a = Args::parse("zstd", "levle=3").unwrap();
        let e = a.finish(&["level"]).unwrap_err().to_string();
        assert!(e.contains("levle") && e.contains("accepted: level"), "{e}");

        assert!(Args::parse("x", "a=1,a=2").is_err());
        assert!(Args::parse("x", "=1").is_err());
        let mut a = Args::parse("x", "n=abc").unwrap();
        let e = a.take_i64("n").unwrap_err().to_string();
        assert!(e.contains("expected an integer"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64K"), Some(64 << 10));
        assert_eq!(parse_size("100M"), Some(100 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("2MiB"), Some(2 << 20));
        assert_eq!(parse_size("10B"), Some(10));
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size("5X"), None);
        assert_eq!(parse_size("99999999999999999999"), None);
        assert_eq!(parse_size("16777216T"), None);
    }
}
