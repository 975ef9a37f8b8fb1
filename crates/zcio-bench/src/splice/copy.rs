//! Parts (a) and (b): copying a page-cached file, and the CPU left to a
//! CPU-bound neighbour beside each copier.
//!
//! The copiers are separate processes: a read/write loop with a 64 KiB
//! buffer (this binary as a child), coreutils `cp` and `zcio cp`. Their CPU
//! time is what `wait4` reports for them. In (b) a repeater child pinned
//! to one CPU runs the copier again and again (the copier inherits the
//! pinning) while the neighbour, pinned to the same CPU, counts.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::files::{remove, spot_check, Place};
use super::proc::Proc;
use super::task::{Spec, Task};
use super::{require_sub, Options, Row};

/// The read/write loop's buffer.
pub const RW_BUF: usize = 64 << 10;

/// One copier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Copier {
    /// `read`/`write` with a 64 KiB buffer (a child of this binary).
    RwLoop,
    /// coreutils `cp`.
    Cp,
    /// `zcio cp`.
    ZcioCp,
}

impl Copier {
    /// All copiers, in table order.
    pub const ALL: [Copier; 3] = [Copier::RwLoop, Copier::Cp, Copier::ZcioCp];

    /// For tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Copier::RwLoop => "rw-loop",
            Copier::Cp => "cp",
            Copier::ZcioCp => "zcio-cp",
        }
    }

    /// Its command line copying `src` to `dst`.
    pub fn argv(self, src: &Path, dst: &Path, opts: &Options) -> Result<Vec<String>, String> {
        let (s, d) = (
            src.to_string_lossy().into_owned(),
            dst.to_string_lossy().into_owned(),
        );
        Ok(match self {
            Copier::RwLoop => {
                let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
                let spec = Spec {
                    task: Task::RwCopy {
                        src: s,
                        dst: d,
                        buf: RW_BUF,
                    },
                    cpu: None,
                    timeout_ms: opts.timeout.as_millis() as u64,
                };
                vec![
                    exe.to_string_lossy().into_owned(),
                    super::CHILD_ARG.into(),
                    crate::child::json(&spec)?,
                ]
            }
            Copier::Cp => vec!["cp".into(), s, d],
            Copier::ZcioCp => {
                require_sub(&opts.zcio, "cp")?;
                vec![
                    opts.zcio.to_string_lossy().into_owned(),
                    "cp".into(),
                    s,
                    d,
                    "--quiet".into(),
                ]
            }
        })
    }
}

fn command(argv: &[String]) -> Result<Command, String> {
    let (p, rest) = argv.split_first().ok_or("empty command line")?;
    let mut c = Command::new(p);
    c.args(rest);
    Ok(c)
}

/// (a) Copy `src` into `dir` once with `c`; the destination is checked and
/// removed afterwards.
pub fn measure_copy(
    c: Copier,
    place: Place,
    src: &Path,
    dir: &Path,
    opts: &Options,
) -> Result<Row, String> {
    let dst = dir.join(format!("copy-{}.dst", c.name()));
    remove(&dst);
    let argv = c.argv(src, &dst, opts)?;
    let errlog = dir.join(format!("{}.stderr", c.name()));
    let p = Proc::spawn(&mut command(&argv)?, c.name(), Some(&errlog))?;
    let res = p.wait(opts.timeout);
    let check = match &res {
        Ok(_) => spot_check(src, &dst),
        Err(_) => Ok(()),
    };
    remove(&dst);
    remove(&errlog);
    let (u, _) = res?;
    check?;
    let size = std::fs::metadata(src).map_err(|e| e.to_string())?.len();
    Ok(Row {
        fs: Some(place.name().into()),
        size: Some(size),
        gb_per_sec: Some(size as f64 / u.wall.as_secs_f64().max(1e-9) / 1e9),
        cpu_s: Some(u.cpu_s()),
        user_s: Some(u.user_s),
        sys_s: Some(u.sys_s),
        wall_s: Some(u.wall.as_secs_f64()),
        ..Row::new("a", c.name())
    })
}

/// What the neighbour prints.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct NeighbourReport {
    /// Iterations counted.
    pub iters: u64,
    /// Over this many seconds.
    pub secs: f64,
}

/// What the repeater prints.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct RepeatReport {
    /// Complete copies.
    pub copies: u64,
    /// Seconds from the first copy's start to the last one's end.
    pub secs: f64,
}

/// (b) Measure the neighbour alone (`c` = `None`) or beside copier `c`,
/// both pinned to the first allowed CPU.
pub fn measure_avail(
    c: Option<Copier>,
    src: &Path,
    dir: &Path,
    opts: &Options,
) -> Result<Row, String> {
    let cpu = Some(crate::affinity::cpu_for(0));
    let ms = opts.avail_time.as_millis() as u64;
    let spec = |task| Spec {
        task,
        cpu,
        timeout_ms: opts.timeout.as_millis() as u64,
    };
    let size = std::fs::metadata(src).map_err(|e| e.to_string())?.len();
    let dst = dir.join("avail.dst");
    let rep = match c {
        None => None,
        Some(c) => {
            remove(&dst);
            let task = Task::Repeat {
                argv: c.argv(src, &dst, opts)?,
                dst: dst.to_string_lossy().into_owned(),
                // Copy before the neighbour starts and after it ends.
                ms: ms + 400,
                max: 10_000,
            };
            let p = Proc::spawn_task(&spec(task), &[], &format!("{} repeater", c.name()))?;
            // Let the first copy get going.
            std::thread::sleep(Duration::from_millis(150));
            Some(p)
        }
    };
    let n = Proc::spawn_task(&spec(Task::Neighbour { ms }), &[], "neighbour")?;
    let nres = n.wait(opts.timeout);
    let rres = rep.map(|r| r.wait(opts.timeout));
    remove(&dst);
    let (_, line) = nres?;
    let nr: NeighbourReport =
        serde_json::from_str(line.trim()).map_err(|e| format!("neighbour: bad report: {e}"))?;
    let mut row = Row {
        size: Some(size),
        neighbour_rate: Some(nr.iters as f64 / nr.secs.max(1e-9)),
        ..Row::new("b", c.map_or("alone", Copier::name))
    };
    if let Some(r) = rres {
        let (u, line) = r?;
        let rr: RepeatReport =
            serde_json::from_str(line.trim()).map_err(|e| format!("repeater: bad report: {e}"))?;
        row.copies = Some(rr.copies);
        row.gb_per_sec = Some((rr.copies * size) as f64 / rr.secs.max(1e-9) / 1e9);
        row.cpu_s = Some(u.cpu_s());
        row.wall_s = Some(u.wall.as_secs_f64());
    }
    Ok(row)
}

/// The payload rate of the link-paced sink of (b): about a 10 GbE link's.
pub const LINK_RATE: u64 = 1_000_000_000;
/// How much the link may take at once after an idle moment.
const LINK_BURST: f64 = 4.0 * 1024.0 * 1024.0;

/// What the link-paced sink prints at the end.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct LinkReport {
    /// Bytes received.
    pub bytes: u64,
    /// Connections served (one per copy).
    pub conns: u64,
}

/// (b) Measure the neighbour beside copier `c` sending `src` over TCP to a
/// sink that takes [`LINK_RATE`] bytes per second (a link, on the other
/// CPU): the copier waits for the link, so what it leaves to the
/// neighbour is what moving the bytes costs it, as in Fall's Table 6.1
/// where the copies ran at the devices' speed.
pub fn measure_avail_link(
    c: Copier,
    src: &Path,
    dir: &Path,
    opts: &Options,
) -> Result<Row, String> {
    let ms = opts.avail_time.as_millis() as u64;
    let size = std::fs::metadata(src).map_err(|e| e.to_string())?.len();
    let spec = |task, cpu| Spec {
        task,
        cpu: Some(crate::affinity::cpu_for(cpu)),
        timeout_ms: opts.timeout.as_millis() as u64,
    };
    // The sink outlives the repeater's last copy (one copy takes
    // size / LINK_RATE seconds).
    let copy_ms = size * 1000 / LINK_RATE + 1;
    let sink_ms = ms + 400 + 2 * copy_ms + 1000;
    let mut sink = Proc::spawn_task(
        &spec(
            Task::LinkSink {
                rate: LINK_RATE,
                ms: sink_ms,
            },
            1,
        ),
        &[],
        "link sink",
    )?;
    let line = sink.read_line(Duration::from_secs(10))?;
    let port: u16 = line
        .strip_prefix("port ")
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| format!("link sink: expected 'port N', got {line:?}"))?;
    let dst = format!("tcp:127.0.0.1:{port}");
    let argv = c.argv(src, Path::new(&dst), opts)?;
    let _ = dir;
    let task = Task::Repeat {
        argv,
        dst: dst.clone(),
        ms: ms + 400,
        max: 10_000,
    };
    let rep = Proc::spawn_task(&spec(task, 0), &[], &format!("{} repeater", c.name()))?;
    std::thread::sleep(Duration::from_millis(150));
    let n = Proc::spawn_task(&spec(Task::Neighbour { ms }, 0), &[], "neighbour")?;
    let nres = n.wait(opts.timeout);
    let rres = rep.wait(opts.timeout);
    let sres = sink.wait(opts.timeout);
    let (_, line) = nres?;
    let nr: NeighbourReport =
        serde_json::from_str(line.trim()).map_err(|e| format!("neighbour: bad report: {e}"))?;
    let (u, line) = rres?;
    let rr: RepeatReport =
        serde_json::from_str(line.trim()).map_err(|e| format!("repeater: bad report: {e}"))?;
    let (_, line) = sres?;
    let lr: LinkReport = serde_json::from_str(line.trim())
        .map_err(|e| format!("link sink: bad report {line:?}: {e}"))?;
    if lr.bytes < rr.copies * size {
        return Err(format!(
            "link sink got {} bytes of {} copies of {size}",
            lr.bytes, rr.copies
        ));
    }
    Ok(Row {
        size: Some(size),
        neighbour_rate: Some(nr.iters as f64 / nr.secs.max(1e-9)),
        copies: Some(rr.copies),
        gb_per_sec: Some((rr.copies * size) as f64 / rr.secs.max(1e-9) / 1e9),
        cpu_s: Some(u.cpu_s()),
        wall_s: Some(u.wall.as_secs_f64()),
        ..Row::new("b", link_variant(c))
    })
}

/// The row name of copier `c` sending to the link.
pub fn link_variant(c: Copier) -> &'static str {
    match c {
        Copier::RwLoop => "rw-loop→link",
        Copier::Cp => "cp→link",
        Copier::ZcioCp => "zcio-cp→link",
    }
}

/// (b) The link-paced sink (a child): accept connections one after the
/// other on a loopback port (printed first) and read each to its end at
/// most `rate` bytes per second (a token bucket of [`LINK_BURST`]), for
/// `ms` milliseconds.
pub fn link_sink(rate: u64, ms: u64, deadline: Instant) -> Result<LinkReport, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    println!("port {port}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    l.set_nonblocking(true).map_err(|e| e.to_string())?;
    let until = (Instant::now() + Duration::from_millis(ms)).min(deadline);
    let mut buf = vec![0u8; 256 << 10];
    let (mut bytes, mut conns) = (0u64, 0u64);
    let mut tokens = LINK_BURST;
    let mut last = Instant::now();
    let mut refill = |tokens: &mut f64| {
        let now = Instant::now();
        *tokens = (*tokens + rate as f64 * (now - last).as_secs_f64()).min(LINK_BURST);
        last = now;
    };
    while Instant::now() < until {
        let mut s = match l.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => return Err(format!("accept: {e}")),
        };
        conns += 1;
        s.set_nonblocking(false).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        loop {
            if Instant::now() >= until {
                break;
            }
            refill(&mut tokens);
            if tokens < 65536.0 {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            let want = (tokens as usize).min(buf.len());
            match s.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => {
                    bytes += n as u64;
                    tokens -= n as f64;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => break,
            }
        }
    }
    Ok(LinkReport { bytes, conns })
}

/// The read/write copy loop (a child); `dst` may be `tcp:HOST:PORT`.
pub fn rw_copy(src: &str, dst: &str, buf: usize, deadline: Instant) -> Result<(), String> {
    let mut i = std::fs::File::open(src).map_err(|e| format!("open {src}: {e}"))?;
    let mut o: Box<dyn Write> = match dst.strip_prefix("tcp:") {
        Some(addr) => Box::new(
            std::net::TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?,
        ),
        None => Box::new(std::fs::File::create(dst).map_err(|e| format!("create {dst}: {e}"))?),
    };
    let mut b = vec![0u8; buf.max(1)];
    let mut calls = 0u64;
    loop {
        let n = match i.read(&mut b) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read {src}: {e}")),
        };
        o.write_all(&b[..n])
            .map_err(|e| format!("write {dst}: {e}"))?;
        calls += 1;
        if calls.is_multiple_of(1024) && Instant::now() > deadline {
            return Err("deadline passed".into());
        }
    }
}

/// The CPU-bound neighbour (a child): count iterations of an integer loop
/// for `ms` milliseconds.
pub fn neighbour(ms: u64) -> Result<NeighbourReport, String> {
    const CHUNK: u64 = 1 << 14;
    let start = Instant::now();
    let end = start + Duration::from_millis(ms);
    let mut x = 1u64;
    let mut iters = 0u64;
    loop {
        for _ in 0..CHUNK {
            x = std::hint::black_box(
                x.wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407),
            );
        }
        iters += CHUNK;
        if Instant::now() >= end {
            break;
        }
    }
    Ok(NeighbourReport {
        iters,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// The repeater (a child): run `argv` until `ms` passed (whole copies
/// only) or `max` runs.
pub fn repeat(
    argv: &[String],
    dst: &str,
    ms: u64,
    max: u64,
    deadline: Instant,
) -> Result<RepeatReport, String> {
    let start = Instant::now();
    let until = start + Duration::from_millis(ms);
    let mut copies = 0u64;
    while copies < max && Instant::now() < until {
        let _ = std::fs::remove_file(dst);
        let p = Proc::spawn(&mut command(argv)?, argv[0].clone(), None)?;
        p.wait(deadline.saturating_duration_since(Instant::now()))?;
        copies += 1;
    }
    Ok(RepeatReport {
        copies,
        secs: start.elapsed().as_secs_f64(),
    })
}

/// How `cp` and `zcio cp` copy here, found on a small file in `dir`: the
/// copy system calls `cp` makes (under `strace`, when installed) and the
/// mover `zcio cp --json` reports (with `modules`, for part (c)).
pub fn probe_movers(dir: &Path, zcio: &Path, modules: &[&str]) -> Vec<String> {
    let src = dir.join("probe.src");
    let dst = dir.join("probe.dst");
    let mut notes = Vec::new();
    let fill = super::files::random_fill(1);
    if super::files::create_cached(&src, 4 << 20, fill).is_err() {
        return notes;
    }
    let log = dir.join("probe.strace");
    let traced = Command::new("strace")
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .args(["-e", "trace=copy_file_range,ioctl,sendfile,splice"])
        .arg("cp")
        .arg(&src)
        .arg(&dst)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if traced {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        notes.push(format!(
            "cp on this fs (strace of a 4 MiB copy): {}",
            summarize_strace(&text)
        ));
    } else {
        notes.push("cp's system calls not checked (strace not installed)".into());
    }
    remove(&dst);
    let json = dir.join("probe.json");
    let mut c = Command::new(zcio);
    c.arg("cp")
        .arg(&src)
        .arg(&dst)
        .arg("--quiet")
        .arg("--json")
        .arg(&json);
    for m in modules {
        c.args(["--module", m]);
    }
    let ran = c
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let summary = std::fs::read_to_string(&json)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
    match (ran, summary) {
        (true, Some(v)) => notes.push(format!(
            "zcio cp{} reports mover \"{}\"{}",
            if modules.is_empty() {
                String::new()
            } else {
                format!(" --module {}", modules.join(" --module "))
            },
            v["mover"].as_str().unwrap_or("?"),
            match v["fell_back"].as_array() {
                Some(a) if !a.is_empty() => format!(" (fell back from {a:?})"),
                _ => String::new(),
            }
        )),
        _ => notes.push("zcio cp's mover not known (zcio cp --json failed)".into()),
    }
    for p in [&src, &dst, &log, &json] {
        remove(p);
    }
    notes
}

/// `name = result` of each traced call, counted: `copy_file_range = 4194304
/// ×1, copy_file_range = 0 ×1`.
pub fn summarize_strace(text: &str) -> String {
    let mut seen: Vec<(String, u64)> = Vec::new();
    for line in text.lines() {
        // "PID name(args) = result ..."
        let body = line.split_once(' ').map_or(line, |(_, b)| b);
        let Some((call, rest)) = body.split_once('(') else {
            continue;
        };
        let Some((_, result)) = rest.rsplit_once(" = ") else {
            continue;
        };
        let result: String = result
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        let call = if call == "ioctl" && rest.contains("FICLONE") {
            "ioctl(FICLONE)"
        } else {
            call
        };
        let key = format!("{call} = {result}");
        match seen.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => seen.push((key, 1)),
        }
    }
    if seen.is_empty() {
        return "no copy_file_range, sendfile, splice or FICLONE calls (a read/write loop)".into();
    }
    seen.iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_lines_are_summarized_by_call_and_result() {
        let t = "10695 ioctl(4, BTRFS_IOC_CLONE or FICLONE, 3) = -1 EOPNOTSUPP (Operation not supported)\n\
                 10695 copy_file_range(3, NULL, 4, NULL, 9223372035781033984, 0) = 4194304\n\
                 10695 copy_file_range(3, NULL, 4, NULL, 9223372035781033984, 0) = 0\n";
        assert_eq!(
            summarize_strace(t),
            "ioctl(FICLONE) = -1 EOPNOTSUPP ×1, copy_file_range = 4194304 ×1, copy_file_range = 0 ×1"
        );
        assert!(summarize_strace("").contains("read/write loop"));
    }
}
