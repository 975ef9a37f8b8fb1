//! The calibration file as the cost model loads it: `CostModel::from_json`
//! (what `CostModel::load_from` calls on the file's text, and through it
//! every endpoint whose policy is `Policy::calibrated`) over arbitrary
//! text, then everything that decides with a loaded model: its costs and
//! predictions, the thresholds derived from it, `Policy::from_model`.
//!
//! A file is refused unless measured on this machine, so the input may
//! name this machine's fingerprint with the placeholder `"@here"` (the
//! target puts `Fingerprint::current()` there): the seeds stay usable on
//! any machine.
//!
//! Invariant: no panic; every number of an accepted model is within the
//! loader's documented bounds (finite, non-negative slopes and
//! intercepts below 1e6 ns/B and 1e10 ns, a knot in 1..=2^40 bytes and
//! never negative from it on, sane fit quality, every operation but
//! `tcow_fault` present); every cost and prediction it gives is finite
//! and costs are never negative; its thresholds and policy derive
//! without a panic and are well-formed (bands ascending from 0,
//! tolerances within 0..=1); and it saves (`to_json`) to a file that
//! loads back to the same model.

use std::borrow::Cow;
use std::sync::OnceLock;

use zcio::semantics::cost::{CostModel, Fingerprint, FitQuality, Linear, Op};
use zcio::semantics::Semantics;
use zcio::semantics::Policy;

/// What the input writes for this machine's fingerprint.
pub const HERE: &str = "\"@here\"";

fn here() -> &'static str {
    static HERE_JSON: OnceLock<String> = OnceLock::new();
    HERE_JSON.get_or_init(|| serde_json::to_string(&Fingerprint::current()).expect("plain data"))
}

/// The input is the file's text (UTF-8, as `load_from` reads it).
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let text: Cow<'_, str> = if text.contains(HERE) {
        Cow::Owned(text.replacen(HERE, here(), 1))
    } else {
        Cow::Borrowed(text)
    };
    match CostModel::from_json(&text) {
        Ok(m) => accepted(&m),
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

fn accepted(m: &CostModel) {
    let sizes = |extra: u64| {
        let mut v: Vec<usize> = vec![0, 1, 63, 64, 4095, 4096, 4097, 1 << 20, 256 << 20, 1 << 40];
        for d in [-1i64, 0, 1] {
            v.push(usize::try_from(extra.saturating_add_signed(d)).unwrap_or(usize::MAX));
        }
        v
    };
    for op in Op::ALL {
        let Some(c) = m.curve(op) else {
            assert!(op.optional(), "{op} missing from an accepted model");
            continue;
        };
        line_ok(&c.line, false);
        let knot = c.above.map_or(0, |a| a.from_bytes);
        if let Some(a) = c.above {
            assert!(
                (1..=1 << 40).contains(&a.from_bytes),
                "knot {}",
                a.from_bytes
            );
            line_ok(&a.line, true);
            assert!(a.line.a_ns_per_byte * a.from_bytes as f64 + a.line.b_ns >= 0.0);
        }
        for b in sizes(knot) {
            let cost = m.cost(op, b);
            assert!(
                cost.is_finite() && cost >= 0.0,
                "{op} at {b} bytes costs {cost}"
            );
        }
        if let Some(FitQuality {
            r2,
            max_rel_residual,
            samples,
        }) = m.quality(op)
        {
            assert!(r2.is_finite() && r2 <= 1.0);
            assert!(max_rel_residual.is_finite() && max_rel_residual >= 0.0);
            assert!(samples <= 1 << 20);
        }
    }
    for b in sizes(0) {
        for sem in Semantics::ALL {
            for aligned in [true, false] {
                let p = m.predict(sem, b, aligned);
                assert!(p.is_finite(), "{sem:?} of {b} bytes predicted {p}");
            }
        }
        let _ = m.secured_choice(b, true, true);
    }
    let t = m.thresholds();
    assert!(t.reverse_copyout <= m.page_size());
    for bands in [
        t.secured.iter().map(|b| b.min_bytes).collect::<Vec<_>>(),
        t.rewrite.iter().map(|b| b.min_bytes).collect(),
    ] {
        assert_eq!(bands.first(), Some(&0), "bands start at 0");
        assert!(bands.windows(2).all(|w| w[0] < w[1]), "bands ascend");
    }
    assert!(t.rewrite.iter().all(|b| b.max_rewritten_ppm <= 1_000_000));
    let p = Policy::from_model(m);
    for b in sizes(0) {
        let f = p.rewrite_tolerance(b);
        assert!((0.0..=1.0).contains(&f), "tolerance {f}");
        let _ = t.secured_at(b);
    }
    // Saved and loaded again: the same model.
    let back = CostModel::from_json(&m.to_json()).expect("a saved model loads");
    for op in Op::ALL {
        assert_eq!(back.curve(op), m.curve(op), "{op} after a save");
        assert_eq!(back.quality(op), m.quality(op), "{op}'s fit after a save");
    }
    assert_eq!(back.is_quick(), m.is_quick());
    assert_eq!(back.created_unix(), m.created_unix());
}

fn line_ok(l: &Linear, above: bool) {
    let a = l.a_ns_per_byte;
    assert!(a.is_finite() && (0.0..=1e6).contains(&a), "slope {a}");
    let b = l.b_ns;
    if above {
        assert!(b.is_finite() && b.abs() <= 1e10, "intercept {b}");
    } else {
        assert!(b.is_finite() && (0.0..=1e10).contains(&b), "intercept {b}");
    }
}

/// `m.to_json()` with this machine's fingerprint replaced by `fp` and a
/// fixed creation time (the same seed on every run, on every machine).
fn portable(m: &CostModel, fp: serde_json::Value) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_str(&m.to_json()).expect("JSON");
    v["fingerprint"] = fp;
    v["created_unix"] = serde_json::json!(1_767_225_600);
    serde_json::to_string_pretty(&v).expect("JSON").into_bytes()
}

/// Files `zcio calibrate` writes, for this machine ([`HERE`]): the
/// built-in model, one with fit quality recorded for every operation (a
/// full run), a quick one without `tcow_fault`, one without knots; and
/// the built-in model measured on another machine.
pub fn seeds() -> Vec<Vec<u8>> {
    let builtin = CostModel::builtin();
    let mut full = CostModel::builtin();
    for (i, op) in Op::ALL.into_iter().enumerate() {
        let q = FitQuality {
            r2: 0.999 - i as f64 * 0.01,
            max_rel_residual: 0.02 + i as f64 * 0.003,
            samples: 12 + i as u32,
        };
        full.set_curve(op, builtin.curve(op), Some(q));
    }
    let mut quick = CostModel::builtin();
    quick.set_quick(true);
    quick.set(Op::TcowFault, None, None);
    let mut straight = CostModel::builtin();
    for op in Op::ALL {
        straight.set(op, builtin.line(op), None);
    }
    let here = || serde_json::Value::String("@here".into());
    let mut out: Vec<Vec<u8>> = [&builtin, &full, &quick, &straight]
        .into_iter()
        .map(|m| portable(m, here()))
        .collect();
    let other = serde_json::json!({
        "page_size": 4096,
        "cpu_model": "AMD EPYC 9R14 96-Core Processor",
        "logical_cpus": 2,
        "kernel_release": "6.18.0"
    });
    out.push(portable(&builtin, other));
    out
}
