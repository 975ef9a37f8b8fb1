//! The Rust twin of `c/examples/ring_producer.c` and `ring_consumer.c`:
//! the same arguments, the same work and the same output, written against
//! `zcio::ring` directly, so `scripts/bench-c` can compare the C library
//! with the Rust API on one benchmark shape.
//!
//! ```text
//! ring_rust consumer [--raw] [--peek] NAME RING_SIZE MSG_SIZE COUNT
//! ring_rust producer [--raw] NAME RING_SIZE MSG_SIZE COUNT
//! ```

use std::process::ExitCode;
use std::time::{Duration, Instant};

use zcio::ring::{Consumer, Options, Producer, Start};

fn cpu_ns() -> u64 {
    // SAFETY: getrusage writes the struct it is given; all-zero bits are a
    // valid `rusage`.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime) + us(ru.ru_stime)) * 1000
}

struct Args {
    raw: bool,
    peek: bool,
    name: String,
    ring: usize,
    msg: usize,
    count: usize,
}

fn parse(mut v: Vec<String>) -> Result<Args, String> {
    let mut raw = false;
    let mut peek = false;
    while v.first().is_some_and(|a| a.starts_with("--")) {
        match v.remove(0).as_str() {
            "--raw" => raw = true,
            "--peek" => peek = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    let [name, ring, msg, count] = <[String; 4]>::try_from(v)
        .map_err(|_| "expected NAME RING_SIZE MSG_SIZE COUNT".to_string())?;
    let size = |s: &str| zcio_fmt::parse_size(s);
    let a = Args {
        raw,
        peek,
        name,
        ring: size(&ring)?,
        msg: size(&msg)?,
        count: size(&count)?,
    };
    if a.msg == 0 {
        return Err("MSG_SIZE must be at least 1".into());
    }
    Ok(a)
}

fn producer(a: &Args) -> Result<(), String> {
    let map = Options::new()
        .size(a.ring as u64)
        .create_or_open(&a.name)
        .map_err(|e| format!("open: {e}"))?;
    let mut p = Producer::attach(map).map_err(|e| format!("open: {e}"))?;
    if p.wait_for_consumers(1, Duration::from_secs(10)) < 1 {
        return Err("no consumer attached within 10 s".into());
    }
    let mut buf: Vec<u8> = (0..a.msg).map(|i| (i * 7 + 1) as u8).collect();
    let (t0, c0) = (Instant::now(), cpu_ns());
    for k in 0..a.count as u64 {
        if a.msg >= 8 {
            buf[..8].copy_from_slice(&k.to_ne_bytes());
        }
        match p.write(&buf) {
            Ok(n) if n == a.msg => {}
            Ok(n) => return Err(format!("write: wrote {n} of {} bytes", a.msg)),
            Err(e) => return Err(format!("write: {e}")),
        }
    }
    let (ns, cpu) = (t0.elapsed().as_nanos() as u64, cpu_ns() - c0);
    drop(p); // end of stream for the consumers
    let bytes = (a.msg * a.count) as f64;
    if a.raw {
        println!(
            "role=producer bytes={bytes:.0} msgs={} ns={ns} cpu_ns={cpu}",
            a.count
        );
    } else {
        let secs = ns as f64 / 1e9;
        println!(
            "ring_rust producer: wrote {} messages of {} bytes ({:.1} MiB) in {secs:.3} s: {:.1} MiB/s, {:.0} ns CPU per message",
            a.count,
            a.msg,
            bytes / 1048576.0,
            bytes / 1048576.0 / secs.max(1e-9),
            cpu as f64 / a.count.max(1) as f64
        );
    }
    Ok(())
}

/// As `check` in ring_consumer.c: a message starting at `off` carries its
/// sequence number (copied out of the view first).
fn check(data: zcio::View<'_>, off: u64, msg: usize) -> Result<(), String> {
    if msg < 8 || data.len() < 8 || !off.is_multiple_of(msg as u64) {
        return Ok(());
    }
    let mut w = [0u8; 8];
    data.read_at(0, &mut w);
    let seq = u64::from_ne_bytes(w);
    if seq != off / msg as u64 {
        return Err(format!(
            "message {} carries sequence number {seq}",
            off / msg as u64
        ));
    }
    Ok(())
}

fn consumer(a: &Args) -> Result<(), String> {
    let map = Options::new()
        .size(a.ring as u64)
        .create_or_open(&a.name)
        .map_err(|e| format!("open: {e}"))?;
    let mut c = Consumer::attach(map, Start::Newest).map_err(|e| format!("open: {e}"))?;
    let mut buf = vec![0u8; a.msg];
    let total = (a.msg * a.count) as u64;
    let (mut got, mut first, mut reads) = (0u64, 0u64, 0u64);
    let (mut t0, mut c0) = (Instant::now(), 0);
    while got < total {
        let n = if a.peek {
            let Some(p) = c.peek(a.msg).map_err(|e| format!("peek: {e}"))? else {
                return Err(format!("end of stream after {got} of {total} bytes"));
            };
            let n = p.len();
            if reads == 0 {
                (t0, c0, first) = (Instant::now(), cpu_ns(), n as u64);
            }
            check(p.view(), got, a.msg)?;
            p.release().map_err(|e| format!("release: {e}"))?;
            n
        } else {
            let n = c.read(&mut buf).map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err(format!("end of stream after {got} of {total} bytes"));
            }
            if reads == 0 {
                (t0, c0, first) = (Instant::now(), cpu_ns(), n as u64);
            }
            check(zcio::View::from_slice(&buf[..n]), got, a.msg)?;
            n
        };
        reads += 1;
        got += n as u64;
    }
    let (ns, cpu) = (t0.elapsed().as_nanos() as u64, cpu_ns() - c0);
    match c.read_timeout(&mut buf, Duration::from_secs(10)) {
        Ok(0) => {}
        other => return Err(format!("expected the end of the stream, got {other:?}")),
    }
    drop(c);
    let _ = zcio::ring::unlink(&a.name);
    if a.raw {
        println!(
            "role=consumer bytes={got} timed_bytes={} msgs={} reads={reads} ns={ns} cpu_ns={cpu}",
            got - first,
            a.count
        );
    } else {
        let secs = ns as f64 / 1e9;
        println!(
            "ring_rust consumer: read {} messages of {} bytes ({:.1} MiB) by {} in {secs:.3} s: {:.1} MiB/s, {:.0} ns CPU per message",
            a.count,
            a.msg,
            got as f64 / 1048576.0,
            if a.peek { "peek" } else { "copy" },
            (got - first) as f64 / 1048576.0 / secs.max(1e-9),
            cpu as f64 / a.count.max(1) as f64
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut v: Vec<String> = std::env::args().skip(1).collect();
    let role = if v.is_empty() {
        String::new()
    } else {
        v.remove(0)
    };
    let r = parse(v).and_then(|a| match role.as_str() {
        "producer" if !a.peek => producer(&a),
        "consumer" => consumer(&a),
        _ => Err("usage: ring_rust consumer [--raw] [--peek] NAME RING_SIZE MSG_SIZE COUNT\n       ring_rust producer [--raw] NAME RING_SIZE MSG_SIZE COUNT".into()),
    });
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ring_rust {role}: {e}");
            ExitCode::FAILURE
        }
    }
}
