//! Human-readable tables of a ring benchmark run, and its JSON document.

use super::targets::{best, describe};
use super::Row;
use crate::fmt::{si, size};

fn opt_size(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| size(v as usize))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.1}×", a / b),
        _ => "-".into(),
    }
}

fn rate(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// Part (a): one line per (ring size, call size), GB/s per variant and the
/// ratios to the pipe.
pub fn copy_table(rows: &[Row]) -> String {
    let a: Vec<&Row> = rows.iter().filter(|r| r.part == "a").collect();
    if a.is_empty() {
        return String::new();
    }
    let mut out = String::from("(a) Linux pipe vs zcio ring: GB/s at the consumer\n");
    out.push_str(&format!(
        "{:>8} {:>8} {:>9} {:>7} {:>9} {:>9} {:>10} {:>9} {:>9} {:>10}\n",
        "ring",
        "call",
        "pipe buf",
        "pipe",
        "ring-copy",
        "ring-peek",
        "peek-touch",
        "copy/pipe",
        "peek/pipe",
        "touch/pipe"
    ));
    let mut points: Vec<(Option<u64>, Option<u64>)> = Vec::new();
    for r in &a {
        let k = (r.ring_size, r.call_size);
        if !points.contains(&k) {
            points.push(k);
        }
    }
    let mut last_ring = None;
    for (ring, call) in points {
        if last_ring.is_some() && last_ring != Some(ring) {
            out.push('\n');
        }
        last_ring = Some(ring);
        let get = |v: &str| {
            a.iter()
                .find(|r| r.variant == v && r.ring_size == ring && r.call_size == call)
        };
        let gb = |v: &str| get(v).map(|r| r.gb_per_sec);
        let pipe = gb("pipe");
        out.push_str(&format!(
            "{:>8} {:>8} {:>9} {:>7} {:>9} {:>9} {:>10} {:>9} {:>9} {:>10}\n",
            opt_size(ring),
            opt_size(call),
            opt_size(get("pipe").and_then(|r| r.pipe_size)),
            rate(pipe),
            rate(gb("ring-copy")),
            rate(gb("ring-peek")),
            rate(gb("ring-peek-touch")),
            ratio(gb("ring-copy"), pipe),
            ratio(gb("ring-peek"), pipe),
            ratio(gb("ring-peek-touch"), pipe),
        ));
    }
    out.push_str("best of each:\n");
    for v in ["pipe", "ring-copy", "ring-peek", "ring-peek-touch"] {
        if let Some(r) = best(rows, "a", v) {
            out.push_str(&format!(
                "  {v:<16} {}, {:.3} CPU s/GiB ({:.0}% system)\n",
                describe(r),
                r.cpu_s_per_gib,
                100.0 * r.sys_share
            ));
        }
    }
    out
}

/// Part (b): one line per (variant, consumers).
pub fn fanout_table(rows: &[Row]) -> String {
    let b: Vec<&Row> = rows.iter().filter(|r| r.part == "b").collect();
    if b.is_empty() {
        return String::new();
    }
    let mut out = String::from("(b) fan-out: one producer, every consumer receives everything\n");
    out.push_str(&format!(
        "{:<10} {:>9} {:>9} {:>13} {:>13} {:>13} {:>7} {:>10} {:>10}\n",
        "variant",
        "consumers",
        "GB/s",
        "prod CPU/GiB",
        "cons CPU/GiB",
        "total CPU/GiB",
        "sys %",
        "buffer",
        "prod vs 1"
    ));
    for r in &b {
        let one = b
            .iter()
            .find(|o| o.variant == r.variant && o.consumers == 1)
            .map(|o| o.producer_cpu_s_per_gib);
        out.push_str(&format!(
            "{:<10} {:>9} {:>9.2} {:>13.4} {:>13.4} {:>13.4} {:>7.0} {:>10} {:>10}\n",
            r.variant,
            r.consumers,
            r.gb_per_sec,
            r.producer_cpu_s_per_gib,
            r.consumer_cpu_s_per_gib,
            r.cpu_s_per_gib,
            100.0 * r.sys_share,
            opt_size(r.ring_size.or(r.pipe_size)),
            ratio(Some(r.producer_cpu_s_per_gib), one),
        ));
    }
    out.push_str(
        "  GB/s: delivered to all consumers; CPU/GiB in CPU seconds: producer per GiB produced, \
         consumers and total per GiB delivered\n",
    );
    out
}

/// Part (c): one line per layout and the baseline.
pub fn layouts_table(rows: &[Row]) -> String {
    let c: Vec<&Row> = rows.iter().filter(|r| r.part == "c").collect();
    if c.is_empty() {
        return String::new();
    }
    let mut out = String::from("(c) data layouts with an IMIX packet mix\n");
    out.push_str(&format!(
        "{:<17} {:>8} {:>10} {:>7} {:>13} {:>13} {:>8}\n",
        "variant", "ring", "packets/s", "GB/s", "prod CPU/GiB", "total CPU/GiB", "vs vec"
    ));
    let vec_rate = c
        .iter()
        .find(|r| r.variant == "vec")
        .and_then(|r| r.mpkt_per_sec);
    for r in &c {
        let name = if r.in_process {
            format!("{} (in-proc)", r.variant)
        } else {
            r.variant.clone()
        };
        out.push_str(&format!(
            "{:<17} {:>8} {:>10} {:>7.2} {:>13.4} {:>13.4} {:>8}\n",
            name,
            opt_size(r.ring_size),
            si(r.mpkt_per_sec.unwrap_or(0.0) * 1e6),
            r.gb_per_sec,
            r.producer_cpu_s_per_gib,
            r.cpu_s_per_gib,
            ratio(r.mpkt_per_sec, vec_rate),
        ));
    }
    out
}

/// A warning if ring consumers did not see a closed ring at the end.
pub fn end_warning(rows: &[Row]) -> Option<String> {
    let n = rows.iter().filter(|r| !r.clean_end).count();
    (n > 0).then(|| {
        format!(
            "in {n} of {} measurements a ring consumer saw the producer process exit instead of \
             end of stream after the last byte (all bytes were received and checked; the \
             producer's drop did not mark the ring closed); rows have clean_end = false",
            rows.len()
        )
    })
}

/// All tables that have rows, and the end-of-stream warning if any.
pub fn text(rows: &[Row]) -> String {
    let mut out = String::new();
    for t in [copy_table(rows), fanout_table(rows), layouts_table(rows)] {
        if !t.is_empty() {
            out.push_str(&t);
            out.push('\n');
        }
    }
    if let Some(w) = end_warning(rows) {
        out.push_str(&format!("warning: {w}\n\n"));
    }
    out
}
