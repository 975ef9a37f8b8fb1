//! Rows of `zcio-bench splice`: derived columns, the text tables and the
//! target checks.

use serde::Serialize;

use super::udp::Trial;
use crate::driver::Target;
use crate::fmt::{bytes_u64, si};

/// One measured row (one JSON object of `rows`; fields that do not apply
/// are left out).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Row {
    /// `a` … `d`.
    pub part: String,
    /// Variant name (copier, module-chain variant, forwarder).
    pub variant: String,
    /// (a) where the copy ran (`work-dir`, `tmpfs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<String>,
    /// (d) `loopback` or `veth`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// (d) `latency` or `rate`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The swept parameter: file / stream bytes (a–c), UDP payload bytes (d).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Throughput, 1e9 B/s: (a) copy, (b) the copier's beside the
    /// neighbour, (c) input bytes, (d) payload at the loss-free rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gb_per_sec: Option<f64>,
    /// (d) one-way latency, median (µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<f64>,
    /// (d) 99th percentile (µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p99_us: Option<f64>,
    /// (d) largest (µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_max_us: Option<f64>,
    /// CPU seconds (user + system): (a) the copier, (b) the copier over the
    /// whole run, (c) all processes of the variant, (d) the forwarder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// User part of `cpu_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_s: Option<f64>,
    /// System part of `cpu_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sys_s: Option<f64>,
    /// Wall seconds of the measured process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// (a) CPU ÷ the rw loop's; (c) CPU ÷ the user loop's; (d) rate ÷ the
    /// plain forwarder's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// (c) compressed bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out_bytes: Option<u64>,
    /// (b) the neighbour's iterations per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neighbour_rate: Option<f64>,
    /// (b) … as a percentage of its rate alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub neighbour_pct: Option<f64>,
    /// (b) complete copies during the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copies: Option<u64>,
    /// (d) packets per second: the highest loss-free rate (`rate`) or the
    /// rate sent (`latency`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pkts_per_sec: Option<f64>,
    /// (d) latency runs: the fraction of packets lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// (d) forwarder CPU per packet (ns), from its `--stats-json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ns_per_pkt: Option<f64>,
    /// (d) the rate is the generator's limit, not the forwarder's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generator_limited: Option<bool>,
    /// (d) no trial lost packets: the rate is a lower bound (the
    /// generator's limit, the highest rate or the trial bound ended the
    /// search).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<bool>,
    /// (d) every trial of the rate search, with its loss.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trials: Option<Vec<Trial>>,
    /// Why this variant was not measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
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

    /// Whether `a` and `b` are repetitions of the same point.
    pub fn same_point(a: &Row, b: &Row) -> bool {
        a.part == b.part
            && a.variant == b.variant
            && a.fs == b.fs
            && a.link == b.link
            && a.metric == b.metric
            && a.size == b.size
    }

    /// What the median of repetitions is taken by.
    pub fn rank(&self) -> f64 {
        let v = match (self.part.as_str(), self.metric.as_deref()) {
            ("a", _) => self.gb_per_sec,
            ("b", _) => self.neighbour_rate,
            ("c", _) => self.cpu_s,
            ("d", Some("latency")) => self.latency_us,
            _ => self.pkts_per_sec,
        };
        v.unwrap_or(0.0)
    }
}

fn find<'a>(rows: &'a [Row], part: &str, variant: &str) -> impl Iterator<Item = &'a Row> + 'a {
    let (part, variant) = (part.to_owned(), variant.to_owned());
    rows.iter()
        .filter(move |r| r.part == part && r.variant == variant && r.skipped.is_none())
}

/// Fill in the columns that compare rows.
pub fn derive(rows: &mut [Row]) {
    let snapshot = rows.to_vec();
    for r in rows.iter_mut() {
        match r.part.as_str() {
            "a" => {
                let base = find(&snapshot, "a", "rw-loop")
                    .find(|b| b.fs == r.fs)
                    .and_then(|b| b.cpu_s);
                r.ratio = base.zip(r.cpu_s).map(|(b, c)| c / b.max(1e-12));
            }
            "b" => {
                let alone = find(&snapshot, "b", "alone")
                    .next()
                    .and_then(|b| b.neighbour_rate);
                r.neighbour_pct = alone
                    .zip(r.neighbour_rate)
                    .map(|(a, x)| 100.0 * x / a.max(1e-12));
            }
            "c" => {
                let base = find(&snapshot, "c", "user-loop")
                    .next()
                    .and_then(|b| b.cpu_s);
                r.ratio = base.zip(r.cpu_s).map(|(b, c)| c / b.max(1e-12));
            }
            "d" if r.metric.as_deref() == Some("rate") => {
                let base = find(&snapshot, "d", "gateway-plain")
                    .find(|b| b.link == r.link && b.size == r.size && b.metric == r.metric)
                    .and_then(|b| b.pkts_per_sec);
                r.ratio = base.zip(r.pkts_per_sec).map(|(b, x)| x / b.max(1e-12));
            }
            _ => {}
        }
    }
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("-".into(), f)
}

fn size_of(r: &Row) -> String {
    r.size.map_or("-".into(), bytes_u64)
}

fn part<'a>(rows: &'a [Row], p: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
    rows.iter().filter(move |r| r.part == p)
}

fn skipped_line(out: &mut String, r: &Row) -> bool {
    if let Some(s) = &r.skipped {
        out.push_str(&format!("  {:<16} skipped: {s}\n", r.variant));
        true
    } else {
        false
    }
}

/// The readable tables, one per part that ran.
pub fn text(rows: &[Row]) -> String {
    let mut out = String::new();
    if part(rows, "a").next().is_some() {
        out.push_str("(a) copy a page-cached file\n");
        out.push_str(&format!(
            "  {:<16} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>11}\n",
            "copier", "where", "size", "GB/s", "CPU s", "user s", "sys s", "CPU vs rw"
        ));
        for r in part(rows, "a") {
            if skipped_line(&mut out, r) {
                continue;
            }
            out.push_str(&format!(
                "  {:<16} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>11}\n",
                r.variant,
                r.fs.as_deref().unwrap_or("-"),
                size_of(r),
                opt(r.gb_per_sec, |g| format!("{g:.2}")),
                opt(r.cpu_s, |c| format!("{c:.3}")),
                opt(r.user_s, |c| format!("{c:.3}")),
                opt(r.sys_s, |c| format!("{c:.3}")),
                opt(r.ratio, |x| format!("{:.0}%", 100.0 * x)),
            ));
        }
        out.push('\n');
    }
    if part(rows, "b").next().is_some() {
        out.push_str("(b) CPU availability: a CPU-bound neighbour pinned beside each copier\n");
        out.push_str(&format!(
            "  {:<16} {:>14} {:>10} {:>13} {:>8} {:>12}\n",
            "beside", "neighbour it/s", "% of alone", "copier GB/s", "copies", "copier CPU s"
        ));
        for r in part(rows, "b") {
            if skipped_line(&mut out, r) {
                continue;
            }
            out.push_str(&format!(
                "  {:<16} {:>14} {:>10} {:>13} {:>8} {:>12}\n",
                r.variant,
                opt(r.neighbour_rate, si),
                opt(r.neighbour_pct, |p| format!("{p:.1}%")),
                opt(r.gb_per_sec, |g| format!("{g:.2}")),
                r.copies.map_or("-".into(), |c| c.to_string()),
                opt(r.cpu_s, |c| format!("{c:.2}")),
            ));
        }
        out.push('\n');
    }
    if part(rows, "c").next().is_some() {
        out.push_str("(c) CRC32C + zstd level 1 over a compressible stream (all processes' CPU)\n");
        out.push_str(&format!(
            "  {:<16} {:>9} {:>8} {:>8} {:>8} {:>8} {:>12} {:>10} {:>7}\n",
            "variant",
            "input",
            "GB/s",
            "CPU s",
            "user s",
            "sys s",
            "CPU vs user",
            "output",
            "ratio"
        ));
        for r in part(rows, "c") {
            if skipped_line(&mut out, r) {
                continue;
            }
            out.push_str(&format!(
                "  {:<16} {:>9} {:>8} {:>8} {:>8} {:>8} {:>12} {:>10} {:>7}\n",
                r.variant,
                size_of(r),
                opt(r.gb_per_sec, |g| format!("{g:.3}")),
                opt(r.cpu_s, |c| format!("{c:.3}")),
                opt(r.user_s, |c| format!("{c:.3}")),
                opt(r.sys_s, |c| format!("{c:.3}")),
                opt(r.ratio, |x| format!("{:.0}%", 100.0 * x)),
                r.out_bytes.map_or("-".into(), bytes_u64),
                match (r.size, r.out_bytes) {
                    (Some(i), Some(o)) if o > 0 => format!("{:.2}×", i as f64 / o as f64),
                    _ => "-".into(),
                },
            ));
        }
        out.push('\n');
    }
    let lat: Vec<&Row> = part(rows, "d")
        .filter(|r| r.metric.as_deref() == Some("latency"))
        .collect();
    if !lat.is_empty() {
        out.push_str("(d) UDP forwarding: one-way latency generator → forwarder → sink\n");
        out.push_str(&format!(
            "  {:<9} {:>8} {:<12} {:>10} {:>10} {:>10} {:>9} {:>7} {:>11}\n",
            "link", "size", "forwarder", "p50", "p99", "max", "pkt/s", "loss", "CPU/pkt"
        ));
        for r in lat {
            out.push_str(&format!(
                "  {:<9} {:>8} {:<12} {:>10} {:>10} {:>10} {:>9} {:>7} {:>11}\n",
                r.link.as_deref().unwrap_or("-"),
                size_of(r),
                r.variant,
                opt(r.latency_us, |v| format!("{v:.1} µs")),
                opt(r.latency_p99_us, |v| format!("{v:.1} µs")),
                opt(r.latency_max_us, |v| format!("{v:.0} µs")),
                opt(r.pkts_per_sec, si),
                opt(r.loss, |l| format!("{:.2}%", 100.0 * l)),
                opt(r.cpu_ns_per_pkt, |c| format!("{c:.0} ns")),
            ));
        }
        out.push('\n');
    }
    let rate: Vec<&Row> = part(rows, "d")
        .filter(|r| r.metric.as_deref() == Some("rate"))
        .collect();
    if !rate.is_empty() {
        out.push_str("(d) UDP forwarding: highest loss-free rate (0 packets lost)\n");
        out.push_str(&format!(
            "  {:<9} {:>8} {:<12} {:>12} {:>9} {:>11} {:>9} {:>7}\n",
            "link", "size", "forwarder", "pkt/s", "Gbit/s", "CPU/pkt", "vs plain", "trials"
        ));
        for r in rate {
            out.push_str(&format!(
                "  {:<9} {:>8} {:<12} {:>12} {:>9} {:>11} {:>9} {:>7}\n",
                r.link.as_deref().unwrap_or("-"),
                size_of(r),
                r.variant,
                match (r.pkts_per_sec, r.lower_bound) {
                    (Some(p), Some(true)) => format!("≥{}", si(p)),
                    (Some(p), _) => si(p),
                    (None, _) => "none".into(),
                },
                opt(r.gb_per_sec, |g| format!("{:.2}", 8.0 * g)),
                opt(r.cpu_ns_per_pkt, |c| format!("{c:.0} ns")),
                opt(r.ratio, |x| format!("{x:.2}×")),
                r.trials.as_ref().map_or(0, Vec::len),
            ));
        }
        out.push('\n');
    }
    out
}

fn row<'a>(rows: &'a [Row], part: &str, variant: &str) -> Option<&'a Row> {
    find(rows, part, variant).next()
}

fn d_row<'a>(
    rows: &'a [Row],
    variant: &str,
    link: &str,
    metric: &str,
    size: u64,
) -> Option<&'a Row> {
    find(rows, "d", variant).find(|r| {
        r.link.as_deref() == Some(link)
            && r.metric.as_deref() == Some(metric)
            && r.size == Some(size)
    })
}

fn not_measured(why: &str) -> String {
    format!("not measured in this run{why}")
}

/// The targets checked on `rows` (`met: None` when not measured).
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut t = Vec::new();
    // Where the work dir's fs may share extents, tmpfs was measured too:
    // only there is every copy a data copy.
    let place = if rows.iter().any(|r| r.fs.as_deref() == Some("tmpfs")) {
        "tmpfs"
    } else {
        "work-dir"
    };
    let a = |v: &str| {
        find(rows, "a", v)
            .find(|r| r.fs.as_deref() == Some(place))
            .and_then(|r| r.gb_per_sec.zip(r.cpu_s))
    };
    let (rw, cp, z) = (a("rw-loop"), a("cp"), a("zcio-cp"));
    t.push(Target {
        name: "(a) zcio cp CPU ≤ 50% of the read/write loop's, at ≥ its throughput".into(),
        measured: match (z, rw) {
            (Some((zg, zc)), Some((rg, rc))) => format!(
                "zcio cp {zc:.3} s CPU = {:.0}% of rw loop {rc:.3} s; {zg:.2} vs {rg:.2} GB/s \
                 ({place})",
                100.0 * zc / rc.max(1e-12)
            ),
            _ => not_measured(""),
        },
        met: z
            .zip(rw)
            .map(|((zg, zc), (rg, rc))| zc <= 0.5 * rc && zg >= rg),
    });
    t.push(Target {
        name: "(a) zcio cp throughput within 10% of coreutils cp".into(),
        measured: match (z, cp) {
            (Some((zg, zc)), Some((cg, cc))) => format!(
                "zcio cp {zg:.2} GB/s = {:.0}% of cp {cg:.2} GB/s (CPU {zc:.3} s vs {cc:.3} s; \
                 {place})",
                100.0 * zg / cg.max(1e-12)
            ),
            _ => not_measured(""),
        },
        met: z.zip(cp).map(|((zg, _), (cg, _))| zg >= 0.9 * cg),
    });
    let pct = |v: &str| row(rows, "b", v).and_then(|r| r.neighbour_pct);
    for (what, zcio, rw) in [
        ("", "zcio-cp", "rw-loop"),
        ("copying to a 1 GB/s link: ", "zcio-cp→link", "rw-loop→link"),
    ] {
        let (pz, pr) = (pct(zcio), pct(rw));
        t.push(Target {
            name: format!(
                "(b) {what}the neighbour keeps ≥ 30% more of its rate beside zcio cp than beside \
                 the rw loop"
            ),
            measured: match (pz, pr) {
                (Some(z), Some(r)) => format!(
                    "beside zcio cp {z:.1}% of alone, beside rw loop {r:.1}%: {:.2}× (need \
                     1.30×), {:+.1} percentage points",
                    z / r.max(1e-12),
                    z - r
                ),
                _ => not_measured(""),
            },
            met: pz.zip(pr).map(|(z, r)| z >= 1.3 * r),
        });
    }
    let c = |v: &str| row(rows, "c", v).and_then(|r| r.cpu_s);
    let (cz, cu) = (c("zcio-cp-modules"), c("user-loop"));
    t.push(Target {
        name: "(c) crc32c + zstd modules: total CPU ≤ 0.8× the user loop's".into(),
        measured: match (cz, cu) {
            (Some(z), Some(u)) => format!(
                "zcio cp --module crc32c --module zstd {z:.3} s = {:.2}× user loop {u:.3} s",
                z / u.max(1e-12)
            ),
            _ => not_measured(""),
        },
        met: cz.zip(cu).map(|(z, u)| z <= 0.8 * u),
    });
    let links: Vec<&str> = ["loopback", "veth"]
        .into_iter()
        .filter(|l| {
            rows.iter()
                .any(|r| r.part == "d" && r.link.as_deref() == Some(*l))
        })
        .collect();
    for link in if links.is_empty() {
        vec!["loopback"]
    } else {
        links
    } {
        for size in [64u64, 1024] {
            let rate = |v: &str| d_row(rows, v, link, "rate", size).and_then(|r| r.pkts_per_sec);
            let flag = |v: &str, f: fn(&Row) -> Option<bool>| {
                d_row(rows, v, link, "rate", size).and_then(f) == Some(true)
            };
            let limited = |v| flag(v, |r| r.generator_limited);
            let lower = |v| flag(v, |r| r.lower_bound);
            let (p, z) = (rate("gateway-plain"), rate("zcio-gateway"));
            let bound = if lower("gateway-plain") {
                " (no trial of the plain forwarder lost packets: its rate is a lower bound, \
                 the ratio not conclusive)"
            } else if limited("zcio-gateway") {
                " (zcio gateway's rate is a lower bound: the generator could not offer more)"
            } else if lower("zcio-gateway") {
                " (zcio gateway's rate is a lower bound: no trial lost packets)"
            } else {
                ""
            };
            t.push(Target {
                name: format!(
                    "(d) {link} {}: zcio gateway's highest loss-free rate ≥ 1.5× the plain \
                     forwarder's",
                    bytes_u64(size)
                ),
                measured: match (z, p) {
                    (Some(z), Some(p)) => format!(
                        "zcio gateway {} pkt/s = {:.2}× plain {} pkt/s{bound}",
                        si(z),
                        z / p.max(1e-12),
                        si(p)
                    ),
                    _ => not_measured(""),
                },
                met: z.zip(p).map(|(z, p)| z >= 1.5 * p),
            });
        }
        let sizes: Vec<u64> = rows
            .iter()
            .filter(|r| {
                r.part == "d"
                    && r.link.as_deref() == Some(link)
                    && r.metric.as_deref() == Some("latency")
                    && r.variant == "zcio-gateway"
            })
            .filter_map(|r| r.size)
            .collect();
        let pairs: Vec<(u64, f64, f64)> = sizes
            .iter()
            .filter_map(|&s| {
                let l = |v| d_row(rows, v, link, "latency", s).and_then(|r| r.latency_us);
                Some((s, l("zcio-gateway")?, l("gateway-plain")?))
            })
            .collect();
        t.push(Target {
            name: format!(
                "(d) {link}: zcio gateway's median latency no worse than the plain forwarder's \
                 (≤ at every size; medians move by a few % between runs, so a quick run may \
                 miss by noise)"
            ),
            measured: if pairs.is_empty() {
                not_measured("")
            } else {
                pairs
                    .iter()
                    .map(|(s, z, p)| {
                        format!(
                            "{}: {z:.1} vs {p:.1} µs ({:+.0}%)",
                            bytes_u64(*s),
                            100.0 * (z / p.max(1e-12) - 1.0)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            met: (!pairs.is_empty()).then(|| pairs.iter().all(|(_, z, p)| z <= p)),
        });
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: &str, gb: f64, cpu: f64) -> Row {
        Row {
            fs: Some("work-dir".into()),
            size: Some(1 << 30),
            gb_per_sec: Some(gb),
            cpu_s: Some(cpu),
            ..Row::new("a", v)
        }
    }

    fn rate(v: &str, size: u64, pps: f64) -> Row {
        Row {
            link: Some("loopback".into()),
            metric: Some("rate".into()),
            size: Some(size),
            pkts_per_sec: Some(pps),
            ..Row::new("d", v)
        }
    }

    #[test]
    fn copy_targets_compare_with_the_rw_loop_and_cp() {
        let mut rows = vec![
            a("rw-loop", 2.0, 0.5),
            a("cp", 3.0, 0.3),
            a("zcio-cp", 2.8, 0.24),
        ];
        derive(&mut rows);
        assert_eq!(rows[2].ratio, Some(0.48));
        let t = targets(&rows);
        assert_eq!(t[0].met, Some(true), "{}", t[0].measured);
        assert_eq!(t[1].met, Some(true), "{}", t[1].measured);
        assert!(t[1].measured.contains("93% of cp"), "{}", t[1].measured);
        assert_eq!(t[2].met, None);
        assert!(t[2].measured.starts_with("not measured"));
    }

    #[test]
    fn copy_targets_use_tmpfs_where_the_work_dir_may_share_extents() {
        let tmpfs = |v: &str, gb, cpu| Row {
            fs: Some("tmpfs".into()),
            ..a(v, gb, cpu)
        };
        // On the work dir zcio cp looks free (an extent share); on tmpfs not.
        let rows = vec![
            a("rw-loop", 2.0, 0.5),
            a("zcio-cp", 50.0, 0.001),
            tmpfs("rw-loop", 2.0, 0.5),
            tmpfs("zcio-cp", 2.5, 0.4),
        ];
        let t = targets(&rows);
        assert_eq!(t[0].met, Some(false), "{}", t[0].measured);
        assert!(t[0].measured.contains("(tmpfs)"), "{}", t[0].measured);
    }

    #[test]
    fn neighbour_percentages_and_the_ratio_target() {
        let b = |v: &str, r: f64| Row {
            neighbour_rate: Some(r),
            ..Row::new("b", v)
        };
        let mut rows = vec![b("alone", 1000.0), b("rw-loop", 500.0), b("zcio-cp", 640.0)];
        derive(&mut rows);
        assert_eq!(rows[1].neighbour_pct, Some(50.0));
        let t = targets(&rows);
        assert_eq!(t[2].met, Some(false), "64% < 1.3 × 50%");
        assert!(t[2].measured.contains("1.28×"), "{}", t[2].measured);
        assert!(t[2].measured.contains("+14.0 percentage points"));
    }

    #[test]
    fn gateway_rates_are_compared_per_link_and_size() {
        let mut rows = vec![
            rate("gateway-plain", 64, 100_000.0),
            rate("zcio-gateway", 64, 160_000.0),
            rate("gateway-plain", 1024, 100_000.0),
            rate("zcio-gateway", 1024, 140_000.0),
        ];
        derive(&mut rows);
        assert_eq!(rows[1].ratio, Some(1.6));
        let t = targets(&rows);
        let d: Vec<_> = t.iter().filter(|t| t.name.starts_with("(d)")).collect();
        assert_eq!(d[0].met, Some(true));
        assert_eq!(d[1].met, Some(false));
        assert_eq!(d[2].met, None, "no latency rows");
    }

    #[test]
    fn latency_is_no_worse_at_every_size() {
        let lat = |v: &str, size: u64, us: f64| Row {
            link: Some("loopback".into()),
            metric: Some("latency".into()),
            size: Some(size),
            latency_us: Some(us),
            ..Row::new("d", v)
        };
        let rows = vec![
            lat("gateway-plain", 64, 20.0),
            lat("zcio-gateway", 64, 20.0),
            lat("gateway-plain", 1024, 20.0),
            lat("zcio-gateway", 1024, 19.0),
        ];
        let t = targets(&rows);
        let l = t.iter().find(|t| t.name.contains("latency")).unwrap();
        assert_eq!(l.met, Some(true), "{}", l.measured);
        assert!(
            l.measured.contains("1 KiB: 19.0 vs 20.0 µs (-5%)"),
            "{}",
            l.measured
        );
        let rows = vec![
            lat("gateway-plain", 64, 20.0),
            lat("zcio-gateway", 64, 20.2),
        ];
        let t = targets(&rows);
        assert_eq!(
            t.iter().find(|t| t.name.contains("latency")).unwrap().met,
            Some(false)
        );
    }

    #[test]
    fn tables_show_skips_and_missing_values() {
        let rows = vec![
            Row {
                skipped: Some("zstd(1) is not installed".into()),
                ..Row::new("c", "shell-pipeline")
            },
            Row {
                lower_bound: Some(true),
                ..rate("zcio-gateway", 64, 2_000_000.0)
            },
            Row {
                pkts_per_sec: None,
                ..rate("gateway-plain", 64, 0.0)
            },
        ];
        let s = text(&rows);
        assert!(
            s.contains("shell-pipeline   skipped: zstd(1) is not installed"),
            "{s}"
        );
        assert!(s.contains("≥2.00 M"), "{s}");
        assert!(s.contains("none"), "{s}");
    }

    #[test]
    fn repetitions_are_matched_by_point() {
        let x = rate("zcio-gateway", 64, 1.0);
        let mut y = rate("zcio-gateway", 64, 2.0);
        assert!(Row::same_point(&x, &y));
        y.link = Some("veth".into());
        assert!(!Row::same_point(&x, &y));
        assert_eq!(x.rank(), 1.0);
    }
}
