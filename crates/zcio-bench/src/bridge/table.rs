//! Rows of `zcio-bench bridge`, the columns that compare them with plain
//! Zenoh, the text tables and the targets of issue 25 (deliverable 8).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Part, Variant};
use crate::driver::Target;
use crate::fmt::{si, size};
use crate::report::sig3;

/// CPU time of one process between the marks.
#[derive(Debug, Clone, Serialize)]
pub struct ProcCpu {
    /// Its role (`producer`, `export`, `import`, `consumer 0`, …).
    pub name: String,
    /// `A` or `B`.
    pub host: String,
    /// User + system seconds between the measuring receiver's marks.
    pub cpu_s: f64,
    /// The same per measured message, µs.
    pub us_per_msg: f64,
}

/// What a bridge wrote with `--stats-json` (the fields used here).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BridgeStats {
    /// Samples published (export) or delivered (import).
    pub samples: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Gaps seen (import).
    pub gaps: u64,
    /// Samples lost in them.
    pub lost: u64,
    /// Seconds it ran.
    pub seconds: f64,
    /// Its CPU seconds over the whole run (setup included).
    pub cpu_s: f64,
    /// How it ended.
    pub end: String,
}

/// One measurement's result (the median repetition of its point).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `throughput`, `latency` or `fanout`.
    pub part: String,
    /// `zcio-bridge`, `zenoh` or `tcp`.
    pub variant: String,
    /// `veth` (two namespaces) or `loopback`.
    pub link: String,
    /// Message size.
    pub size: usize,
    /// Receiving processes on B.
    pub receivers: usize,
    /// Messages the sender sent (warm-up included).
    pub sent: u64,
    /// Measured messages (at the measuring receiver).
    pub msgs: u64,
    /// Messages missing at the receivers (sum over them; 0 expected).
    pub lost: u64,
    /// Measured messages per second at the measuring receiver.
    pub msgs_per_sec: f64,
    /// Payload bytes per second.
    pub bytes_per_sec: f64,
    /// One-way latency, median (µs; latency part).
    pub p50_us: Option<f64>,
    /// 99th percentile.
    pub p99_us: Option<f64>,
    /// Largest.
    pub max_us: Option<f64>,
    /// Every process's CPU time between the marks.
    pub cpu: Vec<ProcCpu>,
    /// CPU µs per measured message of all processes on A.
    pub cpu_a_us_per_msg: f64,
    /// The same on B.
    pub cpu_b_us_per_msg: f64,
    /// CPU seconds of all processes on B between the marks.
    pub cpu_b_s: f64,
    /// Bytes B's link received during the whole measurement (setup and
    /// end included).
    pub net_bytes: Option<u64>,
    /// Payload bytes sent: messages sent × size (one copy).
    pub payload_bytes: u64,
    /// `net_bytes` ÷ `payload_bytes`.
    pub net_per_payload: Option<f64>,
    /// The exporting bridge's statistics (zcio-bridge).
    pub export: Option<BridgeStats>,
    /// The importing bridge's statistics (zcio-bridge).
    pub import: Option<BridgeStats>,
    /// Against plain Zenoh at the same point: msgs/s ratio (throughput),
    /// p50 ratio (latency), CPU-on-B-per-message ratio (fan-out).
    pub vs_zenoh: Option<f64>,
}

impl Row {
    /// Whether `other` is a repetition of the same point.
    pub fn same_point(&self, other: &Row) -> bool {
        self.part == other.part
            && self.variant == other.variant
            && self.size == other.size
            && self.receivers == other.receivers
    }

    /// What the median is taken by: msgs/s, p50 or CPU on B per message.
    pub fn rank(&self) -> f64 {
        match self.part.as_str() {
            "latency" => self.p50_us.unwrap_or(f64::MAX),
            "fanout" => self.cpu_b_us_per_msg,
            _ => self.msgs_per_sec,
        }
    }

    /// What `vs_zenoh` compares.
    fn compared(&self) -> Option<f64> {
        match self.part.as_str() {
            "latency" => self.p50_us,
            "fanout" => Some(self.cpu_b_us_per_msg),
            _ => Some(self.msgs_per_sec),
        }
    }
}

/// Fill in `vs_zenoh`.
pub fn derive(rows: &mut [Row]) {
    let base: Vec<Option<f64>> = rows
        .iter()
        .map(|r| {
            rows.iter()
                .find(|z| {
                    z.variant == Variant::Zenoh.name()
                        && z.part == r.part
                        && z.size == r.size
                        && z.receivers == r.receivers
                })
                .and_then(Row::compared)
        })
        .collect();
    for (r, b) in rows.iter_mut().zip(base) {
        r.vs_zenoh = r.compared().zip(b).map(|(a, b)| a / b.max(1e-12));
    }
}

fn part(rows: &[Row], p: Part) -> Vec<&Row> {
    rows.iter().filter(|r| r.part == p.name()).collect()
}

fn by_size<'a>(rows: &[&'a Row]) -> BTreeMap<usize, Vec<&'a Row>> {
    let mut m: BTreeMap<usize, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        m.entry(r.size).or_default().push(r);
    }
    m
}

fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}×"))
}

fn us(v: f64) -> String {
    format!("{} µs", sig3(v))
}

fn opt_us(v: Option<f64>) -> String {
    v.map_or("-".into(), us)
}

fn mbps(bytes_per_sec: f64) -> String {
    sig3(bytes_per_sec / 1e6)
}

/// `producer 1.2 + export 3.4 | import … + consumer …` (µs per message).
fn per_process(r: &Row) -> String {
    let side = |h: &str| {
        r.cpu
            .iter()
            .filter(|c| c.host == h)
            .map(|c| format!("{} {}", c.name, sig3(c.us_per_msg)))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    format!("A: {} | B: {}", side("A"), side("B"))
}

/// [`per_process`] with the processes of one role summed (the fan-out's
/// consumers or subscribers as one figure), to keep the line short.
fn per_process_grouped(r: &Row) -> String {
    let mut groups: Vec<(String, String, f64)> = Vec::new();
    for c in &r.cpu {
        let base = c.name.split(' ').next().unwrap_or(&c.name).to_string();
        match groups.iter_mut().find(|g| g.0 == base && g.1 == c.host) {
            Some(g) => g.2 += c.us_per_msg,
            None => groups.push((base, c.host.clone(), c.us_per_msg)),
        }
    }
    let side = |h: &str| {
        groups
            .iter()
            .filter(|g| g.1 == h)
            .map(|g| format!("{} {}", g.0, sig3(g.2)))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    format!("A: {} | B: {}", side("A"), side("B"))
}

/// The readable tables of the parts that ran.
pub fn text(rows: &[Row]) -> String {
    let mut out = String::new();
    let tp = part(rows, Part::Throughput);
    if !tp.is_empty() {
        out.push_str(&format!(
            "throughput: a flood from host A to host B over {}, one receiver\n",
            tp[0].link
        ));
        out.push_str(&format!(
            "{:>8} {:<14} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8} {:>5}  {}\n",
            "size",
            "variant",
            "msgs/s",
            "MB/s",
            "vs zenoh",
            "CPU A/msg",
            "CPU B/msg",
            "net/pay",
            "lost",
            "CPU/msg (µs) per process"
        ));
        for (s, rs) in by_size(&tp) {
            for r in rs {
                out.push_str(&format!(
                    "{:>8} {:<14} {:>9} {:>9} {:>9} {:>11} {:>11} {:>8} {:>5}  {}\n",
                    size(s),
                    r.variant,
                    si(r.msgs_per_sec),
                    mbps(r.bytes_per_sec),
                    ratio(r.vs_zenoh),
                    us(r.cpu_a_us_per_msg),
                    us(r.cpu_b_us_per_msg),
                    ratio(r.net_per_payload),
                    r.lost,
                    per_process(r),
                ));
            }
        }
        out.push_str(
            "  vs zenoh: msgs/s ÷ plain Zenoh's at the same size; CPU A/B: CPU time of all \
             processes on that host per message; net/pay: bytes into B's link ÷ payload bytes\n\n",
        );
    }
    let lat = part(rows, Part::Latency);
    if !lat.is_empty() {
        out.push_str(&format!(
            "latency: one-way, a paced low rate from A to B over {} (send stamp → receipt, \
             one clock)\n",
            lat[0].link
        ));
        out.push_str(&format!(
            "{:>8} {:<14} {:>7} {:>9} {:>11} {:>11} {:>11} {:>9} {:>11} {:>11}\n",
            "size",
            "variant",
            "msgs",
            "rate",
            "p50",
            "p99",
            "max",
            "vs zenoh",
            "CPU A/msg",
            "CPU B/msg"
        ));
        for (s, rs) in by_size(&lat) {
            for r in rs {
                out.push_str(&format!(
                    "{:>8} {:<14} {:>7} {:>9} {:>11} {:>11} {:>11} {:>9} {:>11} {:>11}\n",
                    size(s),
                    r.variant,
                    r.msgs,
                    format!("{}/s", si(r.msgs_per_sec).trim()),
                    opt_us(r.p50_us),
                    opt_us(r.p99_us),
                    opt_us(r.max_us),
                    ratio(r.vs_zenoh),
                    us(r.cpu_a_us_per_msg),
                    us(r.cpu_b_us_per_msg),
                ));
            }
        }
        out.push_str("  vs zenoh: p50 ÷ plain Zenoh's p50 at the same size (lower is faster)\n\n");
    }
    let fo = part(rows, Part::Fanout);
    if !fo.is_empty() {
        out.push_str(&format!(
            "fan-out: {} receivers on host B over {} (zcio-bridge: one import, {} ring \
             consumers; zenoh: {} subscriber processes, a session each)\n",
            fo[0].receivers, fo[0].link, fo[0].receivers, fo[0].receivers
        ));
        out.push_str(&format!(
            "{:>8} {:<14} {:>9} {:>9} {:>8} {:>9} {:>11} {:>9} {:>5}  {}\n",
            "size",
            "variant",
            "msgs/s",
            "MB/s",
            "net/pay",
            "CPU B",
            "CPU B/msg",
            "vs zenoh",
            "lost",
            "CPU/msg (µs) per role"
        ));
        for (s, rs) in by_size(&fo) {
            for r in rs {
                out.push_str(&format!(
                    "{:>8} {:<14} {:>9} {:>9} {:>8} {:>9} {:>11} {:>9} {:>5}  {}\n",
                    size(s),
                    r.variant,
                    si(r.msgs_per_sec),
                    mbps(r.bytes_per_sec),
                    ratio(r.net_per_payload),
                    format!("{:.2} s", r.cpu_b_s),
                    us(r.cpu_b_us_per_msg),
                    ratio(r.vs_zenoh),
                    r.lost,
                    per_process_grouped(r),
                ));
            }
        }
        out.push_str(
            "  msgs/s: per receiver; net/pay: bytes into B's link ÷ the payload sent once; CPU \
             B: all processes on B between the marks; vs zenoh: CPU B per message ÷ the Zenoh \
             subscribers'\n\n",
        );
    }
    out
}

fn find(rows: &[Row], p: Part, v: Variant, s: usize) -> Option<&Row> {
    rows.iter()
        .find(|r| r.part == p.name() && r.variant == v.name() && r.size == s)
}

/// Bytes on the link per payload byte that still count as one copy: the
/// payload once plus TCP/IP, Ethernet and Zenoh framing.
pub const ONE_COPY: f64 = 1.1;

/// The targets of issue 25, deliverable 8, each from one run's rows.
pub fn targets(rows: &[Row]) -> Vec<Target> {
    let mut t = Vec::new();
    // Throughput at every size ≥ 64 KiB.
    let sizes: Vec<usize> = by_size(&part(rows, Part::Throughput))
        .into_keys()
        .filter(|&s| s >= 64 << 10)
        .collect();
    let pairs: Vec<(usize, f64, f64)> = sizes
        .iter()
        .filter_map(|&s| {
            let b = find(rows, Part::Throughput, Variant::ZcioBridge, s)?;
            let z = find(rows, Part::Throughput, Variant::Zenoh, s)?;
            Some((s, b.bytes_per_sec, z.bytes_per_sec))
        })
        .collect();
    t.push(Target {
        name: "zcio-bridge throughput ≥ 0.9× plain Zenoh's at every size ≥ 64 KiB".into(),
        measured: if pairs.is_empty() {
            "not run".into()
        } else {
            pairs
                .iter()
                .map(|(s, b, z)| {
                    format!(
                        "{}: {} vs {} MB/s ({:.3}×)",
                        size(*s),
                        mbps(*b),
                        mbps(*z),
                        b / z.max(1e-9)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        },
        met: (!pairs.is_empty()).then(|| pairs.iter().all(|(_, b, z)| *b >= 0.9 * z)),
    });
    let pair = find(rows, Part::Latency, Variant::ZcioBridge, 64)
        .and_then(|r| r.p50_us)
        .zip(find(rows, Part::Latency, Variant::Zenoh, 64).and_then(|r| r.p50_us));
    t.push(Target {
        name: "zcio-bridge one-way p50 latency ≤ 1.2× plain Zenoh's at 64 B".into(),
        measured: pair.map_or("not run".into(), |(b, z)| {
            format!("{} vs {} ({:.3}×)", us(b), us(z), b / z.max(1e-9))
        }),
        met: pair.map(|(b, z)| b <= 1.2 * z),
    });
    let fo: Vec<(usize, &Row, &Row)> = by_size(&part(rows, Part::Fanout))
        .into_keys()
        .filter_map(|s| {
            Some((
                s,
                find(rows, Part::Fanout, Variant::ZcioBridge, s)?,
                find(rows, Part::Fanout, Variant::Zenoh, s)?,
            ))
        })
        .collect();
    let n = fo.first().map_or(4, |f| f.1.receivers);
    let nets: Vec<(usize, f64, Option<f64>)> = fo
        .iter()
        .filter_map(|(s, b, z)| Some((*s, b.net_per_payload?, z.net_per_payload)))
        .collect();
    t.push(Target {
        name: format!(
            "fan-out to {n} receivers on B: bytes on the link = 1× the payload (one network copy; \
             ≤ {ONE_COPY}× with framing)"
        ),
        measured: if nets.is_empty() {
            "not run".into()
        } else {
            nets.iter()
                .map(|(s, b, z)| {
                    format!(
                        "{}: {b:.3}× (plain Zenoh, {n} subscribers: {})",
                        size(*s),
                        z.map_or("-".into(), |z| format!("{z:.3}×"))
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        },
        met: (!nets.is_empty()).then(|| nets.iter().all(|(_, b, _)| *b <= ONE_COPY)),
    });
    t.push(Target {
        name: format!(
            "fan-out to {n} receivers: total CPU on B ≤ 1/2 of {n} Zenoh subscribers' (per message)"
        ),
        measured: if fo.is_empty() {
            "not run".into()
        } else {
            fo.iter()
                .map(|(s, b, z)| {
                    format!(
                        "{}: {} vs {} per message ({:.3}×)",
                        size(*s),
                        us(b.cpu_b_us_per_msg),
                        us(z.cpu_b_us_per_msg),
                        b.cpu_b_us_per_msg / z.cpu_b_us_per_msg.max(1e-9)
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        },
        met: (!fo.is_empty()).then(|| {
            fo.iter()
                .all(|(_, b, z)| b.cpu_b_us_per_msg <= 0.5 * z.cpu_b_us_per_msg)
        }),
    });
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(part: Part, v: Variant, size: usize, rate: f64, p50: f64, cpu_b: f64) -> Row {
        Row {
            part: part.name().into(),
            variant: v.name().into(),
            link: "veth".into(),
            size,
            receivers: if part == Part::Fanout { 4 } else { 1 },
            sent: 100,
            msgs: 90,
            lost: 0,
            msgs_per_sec: rate,
            bytes_per_sec: rate * size as f64,
            p50_us: (part == Part::Latency).then_some(p50),
            p99_us: None,
            max_us: None,
            cpu: vec![ProcCpu {
                name: "consumer 0".into(),
                host: "B".into(),
                cpu_s: 1.0,
                us_per_msg: cpu_b,
            }],
            cpu_a_us_per_msg: 1.0,
            cpu_b_us_per_msg: cpu_b,
            cpu_b_s: 1.0,
            net_bytes: Some(0),
            payload_bytes: 1,
            net_per_payload: Some(if v == Variant::Zenoh { 4.1 } else { 1.02 }),
            export: None,
            import: None,
            vs_zenoh: None,
        }
    }

    #[test]
    fn ratios_and_targets() {
        use Part::*;
        use Variant::*;
        let mut rows = vec![
            row(Throughput, ZcioBridge, 64 << 10, 950.0, 0.0, 1.0),
            row(Throughput, Zenoh, 64 << 10, 1000.0, 0.0, 1.0),
            row(Throughput, ZcioBridge, 1 << 20, 80.0, 0.0, 1.0),
            row(Throughput, Zenoh, 1 << 20, 100.0, 0.0, 1.0),
            row(Latency, ZcioBridge, 64, 1.0, 110.0, 1.0),
            row(Latency, Zenoh, 64, 1.0, 100.0, 1.0),
            row(Fanout, ZcioBridge, 64 << 10, 1.0, 0.0, 4.0),
            row(Fanout, Zenoh, 64 << 10, 1.0, 0.0, 10.0),
        ];
        derive(&mut rows);
        assert!((rows[0].vs_zenoh.unwrap() - 0.95).abs() < 1e-9);
        assert!((rows[4].vs_zenoh.unwrap() - 1.1).abs() < 1e-9);
        let t = targets(&rows);
        let met: Vec<Option<bool>> = t.iter().map(|t| t.met).collect();
        // 1 MiB is at 0.8×: the throughput target is missed.
        assert_eq!(met, vec![Some(false), Some(true), Some(true), Some(true)]);
        assert!(t[0].measured.contains("0.800×"));
        assert!(t[2].measured.contains("4.100×"));
        let text = text(&rows);
        assert!(text.contains("throughput") && text.contains("fan-out"));
        assert_eq!(targets(&[]).iter().filter(|t| t.met.is_none()).count(), 4);
    }
}
