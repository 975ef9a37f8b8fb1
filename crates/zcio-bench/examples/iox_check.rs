//! Cross-process smoke test of the iceoryx2 baseline.
//!
//! `cargo run --release -p zcio-bench --example iox_check`
//!
//! The parent runs the publisher and spawns itself (`iox_check sub SERVICE SIZE WARMUP COUNT`) as
//! the subscriber, which prints `ELAPSED_NS INTERVALS` on stdout.

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zcio_bench::iox;

const TIMEOUT: Duration = Duration::from_secs(60);

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> Result<T, String> {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad or missing argument {i}"))
}

fn child(args: &[String]) -> Result<(), String> {
    let service: String = arg(args, 2)?;
    let (size, warmup, count) = (arg(args, 3)?, arg(args, 4)?, arg(args, 5)?);
    let (elapsed, intervals, _cpu_ns) = iox::subscriber(&service, size, warmup, count, TIMEOUT)?;
    println!("{} {}", elapsed.as_nanos(), intervals);
    Ok(())
}

fn run(size: usize, warmup: usize, count: usize) -> Result<(), String> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let service = format!("zcio/iox_check/{}-{nanos}-{size}", std::process::id());
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut sub = Command::new(exe)
        .args([
            "sub",
            &service,
            &size.to_string(),
            &warmup.to_string(),
            &count.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning subscriber: {e}"))?;
    let pub_result = iox::publisher(&service, size, warmup, count, TIMEOUT);
    if pub_result.is_err() {
        let _ = sub.kill(); // do not wait for the subscriber's own timeout
    }
    let out = sub
        .wait_with_output()
        .map_err(|e| format!("waiting for subscriber: {e}"))?;
    pub_result.map_err(|e| format!("publisher: {e}"))?;
    if !out.status.success() {
        return Err(format!("subscriber exited with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace().map(|s| s.parse::<u64>());
    let (Some(Ok(ns)), Some(Ok(intervals))) = (it.next(), it.next()) else {
        return Err(format!("unexpected subscriber output {text:?}"));
    };
    let secs = ns as f64 / 1e9;
    let rate = intervals as f64 / secs;
    println!(
        "iceoryx2 size={size:>9} B  msgs={intervals:>5}  {rate:>12.0} msgs/s  {:>8.2} GiB/s",
        rate * size as f64 / (1u64 << 30) as f64
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let result = if args.get(1).map(String::as_str) == Some("sub") {
        child(&args)
    } else {
        [
            (4096, 100, 2000),
            (1 << 20, 100, 2000),
            (16 << 20, 100, 200),
        ]
        .into_iter()
        .try_for_each(|(size, warmup, count)| run(size, warmup, count))
    };
    if let Err(e) = result {
        eprintln!("iox_check: {e}");
        std::process::exit(1);
    }
}
