//! Rows of `zcio-bench proxy`: derived columns, the text tables, JSON and
//! the target checks.

use serde::Serialize;

use crate::driver::Target;
use crate::fmt::size;

/// One measured row (one JSON object of `rows`; fields that do not apply
/// are left out).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Row {
    /// `a` … `e`.
    pub part: String,
    /// Variant name.
    pub variant: String,
    /// (b) intermediate processes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intermediates: Option<u32>,
    /// Message size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Mean latency (ns): (a) per operation, (b) one-way, (c) per 16
    /// messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<f64>,
    /// The same in cycles.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycles: Option<f64>,
    /// Standard deviation of the latency (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stddev_ns: Option<f64>,
    /// Throughput in messages per millisecond.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msgs_per_ms: Option<f64>,
    /// (b) throughput ÷ direct path; (c) copy time ÷ shared-memory time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// (d) checksummed GB/s (1e9 B/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gb_per_s: Option<f64>,
    /// (d) local GB/s ÷ this GB/s − 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<f64>,
    /// (e) futex calls (wakes + sleeps, both sides) per message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub futex_per_msg: Option<f64>,
    /// (e) futex calls in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub futex_calls: Option<u64>,
    /// Measured iterations / messages / rounds.
    pub count: u64,
}

impl Row {
    /// A row of `part` for `variant` with nothing measured yet.
    pub fn new(part: &str, variant: &str) -> Self {
        Self {
            part: part.into(),
            variant: variant.into(),
            ..Self::default()
        }
    }
}

/// Fill in the columns that compare rows: the chains' fraction of the
/// direct path.
pub fn derive(rows: &mut [Row]) {
    let direct = rows
        .iter()
        .find(|r| r.part == "b" && r.variant == "chain" && r.intermediates == Some(0))
        .and_then(|r| r.msgs_per_ms);
    for r in rows.iter_mut().filter(|r| r.part == "b") {
        r.ratio = direct.zip(r.msgs_per_ms).map(|(d, x)| x / d.max(1e-12));
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

use crate::fmt::ns;

/// The readable tables, one per part that ran.
pub fn text(rows: &[Row]) -> String {
    let mut out = String::new();
    fn of<'a>(rows: &'a [Row], p: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        rows.iter().filter(move |r| r.part == p)
    }
    let part = |p: &'static str| of(rows, p);
    if part("a").next().is_some() {
        out.push_str("(a) one-word latency\n");
        out.push_str(&format!(
            "  {:<16} {:>11} {:>11} {:>12} {:>9}\n",
            "variant", "mean", "stddev", "cycles", "n"
        ));
        for r in part("a") {
            out.push_str(&format!(
                "  {:<16} {:>11} {:>11} {:>12} {:>9}\n",
                r.variant,
                opt(r.latency_ns, ns),
                opt(r.stddev_ns, ns),
                opt(r.cycles, |c| format!("{c:.0}")),
                r.count
            ));
        }
        out.push('\n');
    }
    if part("b").next().is_some() {
        out.push_str("(b) forwarding chains\n");
        out.push_str(&format!(
            "  {:<11} {:>13} {:>11} {:>11} {:>12} {:>10} {:>10}\n",
            "variant", "intermediates", "latency", "stddev", "cycles", "msgs/ms", "vs direct"
        ));
        for r in part("b") {
            out.push_str(&format!(
                "  {:<11} {:>13} {:>11} {:>11} {:>12} {:>10} {:>10}\n",
                r.variant,
                r.intermediates.unwrap_or(0),
                opt(r.latency_ns, ns),
                opt(r.stddev_ns, ns),
                opt(r.cycles, |c| format!("{c:.0}")),
                opt(r.msgs_per_ms, |m| format!("{m:.0}")),
                opt(r.ratio, |x| format!("{:.0}%", 100.0 * x))
            ));
        }
        out.push('\n');
    }
    if part("c").next().is_some() {
        out.push_str("(c) 16 messages: copy through the kernel vs shared memory\n");
        out.push_str(&format!(
            "  {:<10} {:>8} {:>11} {:>11} {:>12} {:>11}\n",
            "variant", "size", "16 msgs", "stddev", "cycles", "copy/shm"
        ));
        for r in part("c") {
            out.push_str(&format!(
                "  {:<10} {:>8} {:>11} {:>11} {:>12} {:>11}\n",
                r.variant,
                size(r.size.unwrap_or(0) as usize),
                opt(r.latency_ns, ns),
                opt(r.stddev_ns, ns),
                opt(r.cycles, |c| format!("{c:.0}")),
                opt(r.ratio, |x| format!("{x:.2}"))
            ));
        }
        out.push('\n');
    }
    if part("d").next().is_some() {
        out.push_str("(d) receiver-side RFC 1071 checksum\n");
        out.push_str(&format!(
            "  {:<15} {:>8} {:>9} {:>10} {:>9}\n",
            "variant", "size", "GB/s", "msgs/ms", "overhead"
        ));
        for r in part("d") {
            out.push_str(&format!(
                "  {:<15} {:>8} {:>9} {:>10} {:>9}\n",
                r.variant,
                size(r.size.unwrap_or(0) as usize),
                opt(r.gb_per_s, |g| format!("{g:.2}")),
                opt(r.msgs_per_ms, |m| format!("{m:.0}")),
                opt(r.overhead, |o| format!("{:.0}%", 100.0 * o))
            ));
        }
        out.push('\n');
    }
    if part("e").next().is_some() {
        out.push_str("(e) futex calls per message under sustained load\n");
        for r in part("e") {
            out.push_str(&format!(
                "  {} messages of {}: {} futex calls (wakes + sleeps, both sides) = {} per \
                 message; {} msgs/ms\n",
                r.count,
                size(r.size.unwrap_or(0) as usize),
                r.futex_calls.map_or("-".into(), |c| c.to_string()),
                opt(r.futex_per_msg, |f| format!("{f:.5}")),
                opt(r.msgs_per_ms, |m| format!("{m:.0}"))
            ));
        }
        out.push('\n');
    }
    out
}

fn find<'a>(rows: &'a [Row], part: &str, variant: &str, k: Option<u32>) -> Option<&'a Row> {
    rows.iter()
        .find(|r| r.part == part && r.variant == variant && (k.is_none() || r.intermediates == k))
}

/// The targets checked on `rows` (`met: None` when not measured).
pub fn targets(rows: &[Row], proxy_built: bool) -> Vec<Target> {
    let mut t = Vec::new();
    let s = find(rows, "a", "sync", None).and_then(|r| r.latency_ns);
    let a = find(rows, "a", "async-send", None).and_then(|r| r.latency_ns);
    t.push(Target {
        name: "asynchronous send ≤ 1/4 of a synchronous round trip".into(),
        measured: match (a, s) {
            (Some(a), Some(s)) => format!(
                "async send {} = {:.2} of sync round trip {}",
                ns(a),
                a / s.max(1e-9),
                ns(s)
            ),
            _ if !proxy_built => "not measured: proxy layer not built".into(),
            _ => "not measured in this run".into(),
        },
        met: a.zip(s).map(|(a, s)| a <= s / 4.0),
    });
    let r = find(rows, "a", "async-receive", None).and_then(|r| r.latency_ns);
    t.push(Target {
        name: "asynchronous receive round trip ≤ 2× the synchronous round trip".into(),
        measured: match (r, s) {
            (Some(r), Some(s)) => format!(
                "async receive {} = {:.2}× sync round trip {}",
                ns(r),
                r / s.max(1e-9),
                ns(s)
            ),
            _ if !proxy_built => "not measured: proxy layer not built".into(),
            _ => "not measured in this run".into(),
        },
        met: r.zip(s).map(|(r, s)| r <= 2.0 * s),
    });
    let c8 = find(rows, "b", "chain", Some(8));
    t.push(Target {
        name: "with 8 intermediate processes, throughput ≥ 25% of the direct path".into(),
        measured: c8
            .and_then(|r| r.ratio.zip(r.msgs_per_ms))
            .map_or("not measured in this run".into(), |(x, m)| {
                format!("{:.0}% ({m:.0} msgs/ms, by reference)", 100.0 * x)
            }),
        met: c8.and_then(|r| r.ratio).map(|x| x >= 0.25),
    });
    let f = find(rows, "e", "futex", None);
    t.push(Target {
        name: "futex system calls per message under sustained load ≤ 1/100".into(),
        measured: f.and_then(|r| r.futex_per_msg.zip(r.futex_calls)).map_or(
            "not measured in this run".into(),
            |(x, c)| {
                format!(
                    "{x:.5} ({c} calls for {} messages)",
                    f.map_or(0, |r| r.count)
                )
            },
        ),
        met: f.and_then(|r| r.futex_per_msg).map(|x| x <= 0.01),
    });
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(k: u32, m: f64) -> Row {
        Row {
            intermediates: Some(k),
            msgs_per_ms: Some(m),
            ..Row::new("b", "chain")
        }
    }

    #[test]
    fn chains_are_compared_with_the_direct_path() {
        let mut rows = vec![chain(0, 1000.0), chain(8, 300.0)];
        derive(&mut rows);
        assert_eq!(rows[1].ratio, Some(0.3));
        let t = targets(&rows, true);
        assert_eq!(t[2].met, Some(true), "the chain target");
        assert_eq!(t[0].met, None, "nothing of (a) measured");
        assert_eq!(t[1].met, None, "nothing of (a) measured");
        assert_eq!(t[3].met, None);
    }

    #[test]
    fn unmeasured_fields_are_left_out_of_json() {
        let r = Row {
            latency_ns: Some(1.5),
            ..Row::new("a", "sync")
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["variant"], "sync");
        assert_eq!(v["latency_ns"], 1.5);
        assert!(v.get("ratio").is_none());
    }

    #[test]
    fn async_target_needs_both_rows() {
        let rows = vec![
            Row {
                latency_ns: Some(1000.0),
                ..Row::new("a", "sync")
            },
            Row {
                latency_ns: Some(200.0),
                ..Row::new("a", "async-send")
            },
        ];
        assert_eq!(targets(&rows, true)[0].met, Some(true));
        assert!(targets(&rows[..1], false)[0]
            .measured
            .contains("proxy layer not built"));
    }
}
