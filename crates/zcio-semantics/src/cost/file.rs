//! The calibration file (`calibration` feature): its JSON format, where
//! it lives, and loading and saving it.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{Above, CostModel, Curve, Fingerprint, FitQuality, Linear, Op, Source};

/// Why a calibration file was not used.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Reading failed.
    #[error("cannot read it: {0}")]
    Io(#[from] std::io::Error),
    /// Larger than any calibration file.
    #[error("it is {0} bytes, larger than a calibration file can be")]
    TooLarge(u64),
    /// Not JSON, or not shaped like a calibration file.
    #[error("it is not a zcio calibration file: {0}")]
    Garbled(String),
    /// Another format version.
    #[error("it has format version {found}, this zcio reads version {FORMAT_VERSION}")]
    Version {
        /// The version in the file.
        found: u32,
    },
    /// Measured on another machine.
    #[error("it was measured on another machine ({0})")]
    Foreign(String),
    /// A value out of range.
    #[error("{0}")]
    Invalid(String),
}

/// Failure writing a calibration file.
#[derive(Debug, Error)]
#[error("cannot write {path}: {err}")]
pub struct SaveError {
    /// The file.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub err: std::io::Error,
}

/// The calibration file format version this library reads and writes.
pub(crate) const FORMAT_VERSION: u32 = 4;
const FORMAT_TAG: &str = "zcio-calibration";
/// No calibration file is larger (16 ops of a few numbers each).
const MAX_FILE: u64 = 64 << 10;
/// Upper bounds on what a file may claim: 1 ms per byte, 10 s fixed.
const MAX_A: f64 = 1e6;
const MAX_B: f64 = 1e10;
const MAX_STRING: usize = 256;
const MAX_SAMPLES: u32 = 1 << 20;
/// No knot lies beyond 1 TiB.
const MAX_KNOT: u64 = 1 << 40;

impl CostModel {
    /// The calibration file format version this library reads and writes.
    pub const FORMAT_VERSION: u32 = FORMAT_VERSION;

    /// Where the calibration file is: `$ZCIO_CALIBRATION`, else
    /// `$XDG_CONFIG_HOME/zcio/calibration.json`, else
    /// `~/.config/zcio/calibration.json`; `None` without any of these.
    pub fn calibration_path() -> Option<PathBuf> {
        calibration_path()
    }

    /// The file `zcio calibrate` writes and [`CostModel::load`] reads.
    pub fn default_path() -> Option<PathBuf> {
        calibration_path()
    }

    /// The model to use: the calibration file ([`CostModel::calibration_path`]) if
    /// there is a usable one, else the built-in defaults. A file that
    /// exists but cannot be used is reported with one warning on stderr.
    pub fn load() -> CostModel {
        let explicit = env_path("ZCIO_CALIBRATION");
        let Some(path) = calibration_path() else {
            return CostModel::builtin();
        };
        match CostModel::load_from(&path) {
            Ok(m) => m,
            Err(LoadError::Io(e))
                if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() =>
            {
                CostModel::builtin()
            }
            Err(e) => {
                let reason = e.to_string();
                eprintln!(
                    "zcio: warning: ignoring the calibration file {}: {reason}; using the built-in \
                     costs. Run `zcio calibrate` to measure this machine.",
                    path.display()
                );
                let mut m = CostModel::builtin();
                m.source = Source::Builtin {
                    ignored: Some((path, reason)),
                };
                m
            }
        }
    }

    /// Read and validate a calibration file (everything in it is outside
    /// input: finite, non-negative, bounded, this format version, this
    /// machine).
    pub fn load_from(path: &Path) -> Result<CostModel, LoadError> {
        let f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        if len > MAX_FILE {
            return Err(LoadError::TooLarge(len));
        }
        let mut text = String::new();
        f.take(MAX_FILE + 1).read_to_string(&mut text)?;
        let mut m = CostModel::from_json(&text)?;
        m.source = Source::File(path.to_owned());
        Ok(m)
    }

    /// Parse and validate the JSON of a calibration file.
    pub fn from_json(text: &str) -> Result<CostModel, LoadError> {
        if text.len() as u64 > MAX_FILE {
            return Err(LoadError::TooLarge(text.len() as u64));
        }
        // The version first, so a future format reports as such, not as
        // garbage.
        let head: Head =
            serde_json::from_str(text).map_err(|e| LoadError::Garbled(e.to_string()))?;
        if head.format != FORMAT_TAG {
            return Err(LoadError::Garbled(format!(
                "format is '{}', not '{FORMAT_TAG}'",
                truncate(&head.format)
            )));
        }
        if head.version != FORMAT_VERSION {
            return Err(LoadError::Version {
                found: head.version,
            });
        }
        let file: FileV2 =
            serde_json::from_str(text).map_err(|e| LoadError::Garbled(e.to_string()))?;
        let fp = file.fingerprint;
        if fp.cpu_model.len() > MAX_STRING || fp.kernel_release.len() > MAX_STRING {
            return Err(LoadError::Invalid("fingerprint strings too long".into()));
        }
        if let Some(why) = fp.mismatch(Fingerprint::here()) {
            return Err(LoadError::Foreign(why));
        }
        let mut m = CostModel::empty(Source::Measured);
        m.quick = file.quick;
        m.created_unix = file.created_unix;
        for (name, entry) in file.ops {
            let op = Op::from_name(&name).ok_or_else(|| {
                LoadError::Invalid(format!("unknown operation '{}'", truncate(&name)))
            })?;
            let Some(e) = entry else {
                continue;
            };
            let bad =
                |what: &str| LoadError::Invalid(format!("{}: {what} is out of range", op.name()));
            let ok = |v: f64, max: f64| v.is_finite() && (0.0..=max).contains(&v);
            if !ok(e.a_ns_per_byte, MAX_A) {
                return Err(bad("a_ns_per_byte"));
            }
            if !ok(e.b_ns, MAX_B) {
                return Err(bad("b_ns"));
            }
            let above = match e.above {
                None => None,
                Some(a) => {
                    if !ok(a.a_ns_per_byte, MAX_A) {
                        return Err(bad("above.a_ns_per_byte"));
                    }
                    if !(a.b_ns.is_finite() && a.b_ns.abs() <= MAX_B) {
                        return Err(bad("above.b_ns"));
                    }
                    if a.from_bytes == 0 || a.from_bytes > MAX_KNOT {
                        return Err(bad("above.from_bytes"));
                    }
                    // Never negative from the knot on (the slope is not).
                    if a.a_ns_per_byte * a.from_bytes as f64 + a.b_ns < 0.0 {
                        return Err(bad("above (negative cost at its knot)"));
                    }
                    Some(Above {
                        from_bytes: a.from_bytes,
                        line: Linear {
                            a_ns_per_byte: a.a_ns_per_byte,
                            b_ns: a.b_ns,
                        },
                    })
                }
            };
            let quality = match (e.r2, e.max_rel_residual, e.samples) {
                (Some(r2), Some(res), Some(samples)) => {
                    if !(r2.is_finite() && (-1e9..=1.0).contains(&r2)) {
                        return Err(bad("r2"));
                    }
                    if !ok(res, 1e9) {
                        return Err(bad("max_rel_residual"));
                    }
                    if samples > MAX_SAMPLES {
                        return Err(bad("samples"));
                    }
                    Some(FitQuality {
                        r2,
                        max_rel_residual: res,
                        samples,
                    })
                }
                (None, None, None) => None,
                _ => return Err(bad("the fit quality (r2, max_rel_residual, samples)")),
            };
            m.set_curve(
                op,
                Some(Curve {
                    line: Linear {
                        a_ns_per_byte: e.a_ns_per_byte,
                        b_ns: e.b_ns,
                    },
                    above,
                }),
                quality,
            );
        }
        if let Some(op) = Op::ALL
            .into_iter()
            .find(|op| !op.optional() && m.line(*op).is_none())
        {
            return Err(LoadError::Invalid(format!(
                "operation {} is missing",
                op.name()
            )));
        }
        Ok(m)
    }

    /// The calibration file's JSON for this model.
    pub fn to_json(&self) -> String {
        let file = FileV2 {
            format: FORMAT_TAG.to_owned(),
            version: FORMAT_VERSION,
            created_unix: self.created_unix,
            quick: self.quick,
            fingerprint: self.fingerprint().clone(),
            ops: Op::ALL
                .into_iter()
                .map(|op| {
                    let e = self.curve(op).map(|c| {
                        let q = self.quality(op);
                        OpEntry {
                            a_ns_per_byte: c.line.a_ns_per_byte,
                            b_ns: c.line.b_ns,
                            above: c.above.map(|a| AboveEntry {
                                from_bytes: a.from_bytes,
                                a_ns_per_byte: a.line.a_ns_per_byte,
                                b_ns: a.line.b_ns,
                            }),
                            r2: q.map(|q| q.r2),
                            max_rel_residual: q.map(|q| q.max_rel_residual),
                            samples: q.map(|q| q.samples),
                        }
                    });
                    (op.name().to_owned(), e)
                })
                .collect(),
        };
        // Serialising plain numbers and strings cannot fail.
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Write the calibration file to `path` (its directory is created;
    /// the file is replaced atomically).
    pub fn save(&self, path: &Path) -> Result<(), SaveError> {
        let err = |err| SaveError {
            path: path.to_owned(),
            err,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let mut text = self.to_json();
        text.push('\n');
        if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(err(e));
        }
        Ok(())
    }
}

/// Where the calibration file is: `$ZCIO_CALIBRATION`, else
/// `$XDG_CONFIG_HOME/zcio/calibration.json`, else
/// `~/.config/zcio/calibration.json`; `None` without any of these.
pub(crate) fn calibration_path() -> Option<PathBuf> {
    if let Some(p) = env_path("ZCIO_CALIBRATION") {
        return Some(p);
    }
    let base = env_path("XDG_CONFIG_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| env_path("HOME").map(|h| h.join(".config")))?;
    Some(base.join("zcio").join("calibration.json"))
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

#[derive(Deserialize)]
struct Head {
    format: String,
    version: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileV2 {
    format: String,
    version: u32,
    created_unix: u64,
    quick: bool,
    fingerprint: Fingerprint,
    ops: std::collections::BTreeMap<String, Option<OpEntry>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpEntry {
    a_ns_per_byte: f64,
    b_ns: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    r2: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_rel_residual: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    samples: Option<u32>,
    /// The line from the knot on (since format version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    above: Option<AboveEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AboveEntry {
    from_bytes: u64,
    a_ns_per_byte: f64,
    b_ns: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn builtin_round_trips() {
        let m = CostModel::builtin();
        let back = CostModel::from_json(&m.to_json()).unwrap();
        for op in Op::ALL {
            assert_eq!(back.curve(op), m.curve(op), "{op}");
        }
        assert!(
            back.curve(Op::CopyIn).unwrap().above.is_some(),
            "copies have a knot"
        );
        assert_eq!(back.source(), &Source::Measured);
        assert_eq!(back.fingerprint(), m.fingerprint());
        assert_eq!(back.thresholds_ref(), m.thresholds_ref());
    }

    /// A model loaded from a file saves to a file that loads back to the same model: every
    /// number parses to the closest f64 (found by fuzzing: with serde_json's default parser,
    /// `20.07777555555555` came back 1 ULP off after a save).
    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn loaded_model_round_trips_exactly() {
        let good = CostModel::builtin().to_json();
        for text in [
            "20.07777555555555",
            "0.1",
            "0.30000000000000004",
            "1450.0000000000002",
            "999999.9999999999",
        ] {
            let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
            v["ops"]["hide"]["b_ns"] = serde_json::Value::Number(text.parse().unwrap());
            v["ops"]["copy_in"]["a_ns_per_byte"] = serde_json::Value::Number(text.parse().unwrap());
            let first = CostModel::from_json(&v.to_string()).unwrap();
            let hide = first.line(Op::Hide).unwrap();
            assert_eq!(
                hide.b_ns,
                text.parse::<f64>().unwrap(),
                "{text} parses exactly"
            );
            let second = CostModel::from_json(&first.to_json()).unwrap();
            for op in Op::ALL {
                assert_eq!(
                    second.curve(op),
                    first.curve(op),
                    "{op} after a save of {text}"
                );
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn knots_are_validated() {
        let good = CostModel::builtin().to_json();
        let v: serde_json::Value = serde_json::from_str(&good).unwrap();
        assert!(v["ops"]["copy_in"]["above"].is_object(), "{v}");
        for (field, val) in [
            ("from_bytes", serde_json::json!(0)),
            ("a_ns_per_byte", serde_json::json!(-1.0)),
            // Negative at the knot.
            ("b_ns", serde_json::json!(-1e9)),
        ] {
            let mut bad = v.clone();
            bad["ops"]["copy_in"]["above"][field] = val;
            let r = CostModel::from_json(&bad.to_string());
            assert!(matches!(r, Err(LoadError::Invalid(_))), "{field}: {r:?}");
        }
        let mut unknown = v.clone();
        unknown["ops"]["copy_in"]["above"]["extra"] = serde_json::json!(1);
        assert!(matches!(
            CostModel::from_json(&unknown.to_string()),
            Err(LoadError::Garbled(_))
        ));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn garbled_json_is_rejected() {
        for text in ["", "{", "[1,2]", "{\"format\": 3}", "null", "\u{0}"] {
            assert!(
                matches!(CostModel::from_json(text), Err(LoadError::Garbled(_))),
                "{text:?}"
            );
        }
        let good = CostModel::builtin().to_json();
        let other = good.replace("zcio-calibration", "something-else");
        assert!(matches!(
            CostModel::from_json(&other),
            Err(LoadError::Garbled(_))
        ));
        // Older formats (1: no knots; 2: regions priced without their
        // teardown) are ignored.
        for old in 1..FORMAT_VERSION {
            let stale = good.replace(
                &format!("\"version\": {FORMAT_VERSION}"),
                &format!("\"version\": {old}"),
            );
            assert!(
                matches!(
                    CostModel::from_json(&stale),
                    Err(LoadError::Version { found }) if found == old
                ),
                "version {old}"
            );
        }
        let extra = good.replacen('{', "{\"surprise\": 1,", 1);
        assert!(matches!(
            CostModel::from_json(&extra),
            Err(LoadError::Garbled(_))
        ));
        let missing = good.replace("\"copy_in\"", "\"copy_in_x\"");
        assert!(matches!(
            CostModel::from_json(&missing),
            Err(LoadError::Invalid(_))
        ));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn nan_negative_and_huge_values_are_rejected() {
        let good = CostModel::builtin().to_json();
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        for (field, val) in [
            ("a_ns_per_byte", serde_json::json!(-0.5)),
            ("b_ns", serde_json::json!(-1.0)),
            ("b_ns", serde_json::json!(1e300)),
            ("a_ns_per_byte", serde_json::json!(1e7)),
        ] {
            let mut bad = v.clone();
            bad["ops"]["swap"][field] = val;
            let r = CostModel::from_json(&bad.to_string());
            assert!(matches!(r, Err(LoadError::Invalid(_))), "{field}: {r:?}");
        }
        // JSON has no NaN; the literal is garbage to the parser.
        let nan = good.replacen("\"b_ns\": 9690.0", "\"b_ns\": NaN", 1);
        assert_ne!(nan, good);
        assert!(matches!(
            CostModel::from_json(&nan),
            Err(LoadError::Garbled(_))
        ));
        // Fit quality must be complete and sane.
        v["ops"]["swap"]["r2"] = serde_json::json!(2.0);
        v["ops"]["swap"]["max_rel_residual"] = serde_json::json!(0.1);
        v["ops"]["swap"]["samples"] = serde_json::json!(5);
        assert!(matches!(
            CostModel::from_json(&v.to_string()),
            Err(LoadError::Invalid(_))
        ));
        v["ops"]["swap"]["r2"] = serde_json::json!(0.9);
        assert!(CostModel::from_json(&v.to_string()).is_ok());
        v["ops"]["swap"]["samples"] = serde_json::Value::Null;
        assert!(CostModel::from_json(&v.to_string()).is_err());
    }

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn foreign_fingerprint_is_rejected() {
        let good = CostModel::builtin().to_json();
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        v["fingerprint"]["cpu_model"] = serde_json::json!("Imaginary CPU 9000");
        assert!(matches!(
            CostModel::from_json(&v.to_string()),
            Err(LoadError::Foreign(_))
        ));
        let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
        v["fingerprint"]["logical_cpus"] = serde_json::json!(9999);
        assert!(matches!(
            CostModel::from_json(&v.to_string()),
            Err(LoadError::Foreign(_))
        ));
    }

    #[test]
    #[cfg_attr(miri, ignore = "SystemTime::now: no wall clock under Miri's isolation")]
    fn save_and_load_a_file() {
        let dir = std::env::temp_dir().join(format!("zcio-cost-{}", std::process::id()));
        let path = dir.join("sub").join("calibration.json");
        let m = CostModel::builtin();
        m.save(&path).unwrap();
        let back = CostModel::load_from(&path).unwrap();
        assert_eq!(back.source(), &Source::File(path.clone()));
        assert_eq!(back.line(Op::Swap), m.line(Op::Swap));
        std::fs::write(&path, "garbage").unwrap();
        assert!(matches!(
            CostModel::load_from(&path),
            Err(LoadError::Garbled(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
