//! The two measurements of `zcio-bench containers`, and the wake part's
//! consumer child.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zcio::ring::{Consumer, Layout, Options as RingOptions, Overflow, Producer, RingMap, Start};

use super::{cannot_enter, Job, Options, Place, Row, CHILD_ARG};
use crate::affinity::cpu_for;
use crate::clock::mono_ns;

/// Longest one measurement may take.
const BOUND: Duration = Duration::from_secs(120);

/// A private ring directory, removed with everything in it.
pub(super) struct RingDir(PathBuf);

impl RingDir {
    pub(super) fn new() -> Result<Self, String> {
        let p = std::env::temp_dir().join(format!("zcio-bench-containers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir(&p).map_err(|e| format!("create {}: {e}", p.display()))?;
        Ok(Self(p))
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for RingDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bytes of the pipe part: a pattern that is cheap to make and to check.
fn byte_at(i: u64) -> u8 {
    (i.wrapping_mul(0x9e37_79b9) >> 13) as u8
}

/// FNV-1a over `bytes`, continuing `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Write the pipe part's input file (`n` bytes); returns its hash.
pub(super) fn write_input(path: &Path, n: u64) -> Result<u64, String> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?,
    );
    let mut h = 0xcbf2_9ce4_8422_2325;
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < n {
        let k = (n - at).min(buf.len() as u64) as usize;
        for (j, b) in buf[..k].iter_mut().enumerate() {
            *b = byte_at(at + j as u64);
        }
        h = fnv(h, &buf[..k]);
        f.write_all(&buf[..k])
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        at += k as u64;
    }
    f.flush()
        .map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(h)
}

/// `zcio ARGS` with the ring directory set.
fn zcio(opts: &Options, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(&opts.zcio);
    c.args(args).env("ZCIO_RING_DIR", dir);
    c
}

/// `zcio ARGS` run where `place` says.
fn zcio_at(opts: &Options, dir: &Path, place: Place, args: &[&str]) -> Command {
    if place != Place::OtherPid {
        return zcio(opts, dir, args);
    }
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(&opts.zcio)
        .args(args)
        .env("ZCIO_RING_DIR", dir);
    c
}

/// A row that says why it was not measured.
fn skipped(job: Job, why: String) -> Row {
    Row {
        part: job.part(),
        place: job.place().name(),
        mb_per_s: None,
        reader_cpu_us_per_mib: None,
        p50_us: None,
        p99_us: None,
        count: 0,
        skipped: Some(why),
    }
}

/// Run `job` once.
pub(super) fn measure(
    job: Job,
    opts: &Options,
    dir: &Path,
    input: &Path,
    input_hash: u64,
    n: u64,
) -> Result<Row, String> {
    if let Some(why) = cannot_enter(job.place()) {
        return Ok(skipped(job, why));
    }
    let name = format!("ct-{}-{n}", std::process::id());
    match job {
        Job::Pipe(place) => pipe(opts, dir, place, &name, input, input_hash),
        Job::Wake(place) => wake(opts, dir, place, &name),
    }
}

/// (a) `zcio pipe put` here → `zcio pipe get` at `place`.
fn pipe(
    opts: &Options,
    dir: &Path,
    place: Place,
    name: &str,
    input: &Path,
    input_hash: u64,
) -> Result<Row, String> {
    let st = zcio(opts, dir, &["ring", "create", name, "--size", "8MiB"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("zcio ring create: {e}"))?;
    if !st.success() {
        return Err(format!("zcio ring create {name}: {st}"));
    }
    let mut get = zcio_at(opts, dir, place, &["pipe", "get", name])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("zcio pipe get: {e}"))?;
    let mut out = get.stdout.take().ok_or("no stdout")?;
    let counter = std::thread::spawn(move || {
        let (mut h, mut n) = (0xcbf2_9ce4_8422_2325u64, 0u64);
        let mut buf = vec![0u8; 1 << 20];
        while let Ok(k) = out.read(&mut buf) {
            if k == 0 {
                break;
            }
            h = fnv(h, &buf[..k]);
            n += k as u64;
        }
        (h, n)
    });
    // The reader attaches first: `put` waits for one reader, and the clock
    // starts when `put` does.
    let file = std::fs::File::open(input).map_err(|e| format!("open {}: {e}", input.display()))?;
    let start = Instant::now();
    let mut put = zcio(opts, dir, &["pipe", "put", name])
        .stdin(file)
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("zcio pipe put: {e}"))?;
    let (put_status, _) = crate::cpu::reap(&mut put, "zcio pipe put", BOUND)?;
    let (get_status, get_cpu) = crate::cpu::reap(&mut get, "zcio pipe get", BOUND)?;
    let secs = start.elapsed().as_secs_f64();
    let (h, got) = counter.join().map_err(|_| "the output counter panicked")?;
    let _ = zcio(opts, dir, &["ring", "rm", name])
        .stdin(Stdio::null())
        .status();
    if put_status != 0 || get_status != 0 {
        return Err(format!(
            "put exited with {put_status:#x}, get with {get_status:#x}"
        ));
    }
    if (h, got) != (input_hash, opts.pipe_bytes) {
        return Err(format!(
            "the reader got {got} bytes (of {}), {}",
            opts.pipe_bytes,
            if got == opts.pipe_bytes {
                "different ones"
            } else {
                "a different count"
            }
        ));
    }
    let mib = got as f64 / f64::from(1 << 20);
    Ok(Row {
        part: "pipe",
        place: place.name(),
        mb_per_s: Some(got as f64 / secs / 1e6),
        reader_cpu_us_per_mib: Some(get_cpu * 1e6 / mib),
        p50_us: None,
        p99_us: None,
        count: got,
        skipped: None,
    })
}

/// What the wake part's consumer child is given.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    /// The ring (in `ZCIO_RING_DIR`).
    pub ring: String,
    /// Blocks to read before the end.
    pub blocks: usize,
    /// CPU to pin to.
    pub cpu: usize,
}

/// The consumer child's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Result_ {
    p50_ns: u64,
    p99_ns: u64,
    blocks: u64,
}

/// (b) a producer here, an async consumer at `place`.
fn wake(opts: &Options, dir: &Path, place: Place, name: &str) -> Result<Row, String> {
    let map = RingOptions::new()
        .layout(Layout::Variable)
        .overflow(Overflow::Block)
        .size(1 << 20)
        .create(name)
        .map_err(|e| format!("create ring {name}: {e}"))?;
    let spec = Spec {
        ring: name.to_string(),
        blocks: opts.wakes,
        cpu: cpu_for(1),
    };
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg(CHILD_ARG)
        .arg(crate::child::json(&spec)?)
        .env("ZCIO_RING_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if place == Place::OtherNet {
        // SAFETY: unshare is async-signal-safe and touches only the child
        // about to exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::unshare(libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("spawn the consumer: {e}"))?;
    let mut out = std::io::BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    use std::io::BufRead;
    out.read_line(&mut line)
        .map_err(|e| format!("consumer: {e}"))?;
    if line.trim() != "attached" {
        let _ = child.kill();
        return Err(format!("consumer: expected 'attached', got {line:?}"));
    }
    let mut p = Producer::attach(map).map_err(|e| format!("producer: {e}"))?;
    for seq in 0..opts.wakes as u64 {
        // Long enough for the consumer to fall asleep on its bell.
        std::thread::sleep(Duration::from_millis(2));
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&seq.to_le_bytes());
        b[8..].copy_from_slice(&mono_ns().to_le_bytes());
        p.write(&b).map_err(|e| format!("write: {e}"))?;
    }
    drop(p);
    line.clear();
    out.read_line(&mut line)
        .map_err(|e| format!("consumer: {e}"))?;
    let (status, _) = crate::cpu::reap(&mut child, "consumer", BOUND)?;
    let _ = zcio::ring::unlink(name);
    if status != 0 {
        return Err(format!("the consumer exited with {status:#x}"));
    }
    let r: Result_ =
        serde_json::from_str(line.trim()).map_err(|e| format!("consumer result {line:?}: {e}"))?;
    Ok(Row {
        part: "wake",
        place: place.name(),
        mb_per_s: None,
        reader_cpu_us_per_mib: None,
        p50_us: Some(r.p50_ns as f64 / 1e3),
        p99_us: Some(r.p99_ns as f64 / 1e3),
        count: r.blocks,
        skipped: None,
    })
}

/// The consumer child: read every block with a tokio `AsyncConsumer`,
/// then the end; report the one-way latency percentiles.
fn consume(spec: &Spec) -> Result<Option<String>, String> {
    let c = Consumer::attach(
        RingMap::open(&spec.ring, true).map_err(|e| format!("open: {e}"))?,
        Start::Newest,
    )
    .map_err(|e| format!("attach: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let mut lat = rt.block_on(async {
        let mut c = zcio::tokio::AsyncConsumer::new(c).map_err(|e| format!("async: {e}"))?;
        println!("attached");
        let mut lat: Vec<u64> = Vec::with_capacity(spec.blocks);
        let mut buf = [0u8; 64];
        loop {
            match c.read(&mut buf).await.map_err(|e| format!("read: {e}"))? {
                0 => break,
                16 => {
                    let now = mono_ns();
                    let seq = u64::from_le_bytes(buf[..8].try_into().unwrap_or_default());
                    let at = u64::from_le_bytes(buf[8..16].try_into().unwrap_or_default());
                    if seq != lat.len() as u64 {
                        return Err(format!("block {seq}, expected {}", lat.len()));
                    }
                    lat.push(now.saturating_sub(at));
                }
                n => return Err(format!("a block of {n} bytes")),
            }
        }
        Ok::<_, String>(lat)
    })?;
    if lat.len() != spec.blocks {
        return Err(format!("{} blocks of {}", lat.len(), spec.blocks));
    }
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1];
    Ok(Some(crate::child::line(&Result_ {
        p50_ns: q(0.5),
        p99_ns: q(0.99),
        blocks: lat.len() as u64,
    })))
}

/// The wake part's consumer child: `args` after [`CHILD_ARG`].
pub fn child_main(args: &[String]) -> i32 {
    crate::child::serve(
        CHILD_ARG,
        args,
        |s: &Spec| Some(s.cpu),
        consume,
        |s: &Spec| format!("containers consumer of {}", s.ring),
    )
}
