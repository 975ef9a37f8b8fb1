//! Part (c): a compressible stream through CRC32C + zstd level 1 in three
//! ways — `zcio cp` with the two modules, the same work in a user loop (a
//! child of this binary: read 256 KiB → `crc32c` → zstd streaming encoder
//! → write), and a pipeline of standard tools (`tee` into `cksum` and
//! `zstd -1`). The CPU time is that of all processes of a variant: `wait4`
//! on the one process started, which includes the children it waited for.
//! Every output is decompressed and compared with the input.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::files::{remove, Rng};
use super::proc::Proc;
use super::task::{Spec, Task};
use super::{require_sub, Options, Row};

/// The user loop's read size.
pub const BLOCK: usize = 256 << 10;
/// zstd level of every variant.
pub const LEVEL: i32 = 1;

/// One way of doing the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Variant {
    /// `zcio cp SRC DST --module crc32c --module zstd:level=1`.
    Zcio,
    /// read → crc32c → zstd → write in one process.
    UserLoop,
    /// `tee` into `cksum` (CRC-32/POSIX) and `zstd -1`.
    Shell,
}

impl Variant {
    /// All variants, in table order.
    pub const ALL: [Variant; 3] = [Variant::Zcio, Variant::UserLoop, Variant::Shell];

    /// For tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Zcio => "zcio-cp-modules",
            Variant::UserLoop => "user-loop",
            Variant::Shell => "shell-pipeline",
        }
    }
}

/// Whether a program is on `PATH` (runs with `--version`).
pub fn have(prog: &str) -> bool {
    Command::new(prog)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The first line `prog --version` prints (for the notes).
pub fn version(prog: &str) -> String {
    Command::new(prog)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("{prog}: not found"))
}

/// The pipeline: `tee` copies the input into a FIFO read by `cksum` and
/// into a pipe to `zstd -1`; the shell waits for all three, so `wait4` on
/// it counts them all. Arguments: `$1` source, `$2` destination, `$3` FIFO,
/// `$4` cksum output.
pub const PIPELINE: &str = "mkfifo \"$3\" || exit 1; cksum < \"$3\" > \"$4\" & \
     tee \"$3\" < \"$1\" | zstd -1 -q -c > \"$2\"; s=$?; wait || s=1; exit $s";

/// (c) Run `v` once over `src`; the output is verified and removed.
pub fn measure(v: Variant, src: &Path, dir: &Path, opts: &Options) -> Result<Row, String> {
    let dst = dir.join(format!("stream-{}.zst", v.name()));
    let (fifo, ck) = (dir.join("cksum.fifo"), dir.join("cksum.out"));
    for p in [&dst, &fifo, &ck] {
        remove(p);
    }
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let errlog = dir.join(format!("{}.stderr", v.name()));
    let p = match v {
        Variant::Zcio => {
            require_sub(&opts.zcio, "cp")?;
            let mut c = Command::new(&opts.zcio);
            c.args(["cp", &s(src), &s(&dst), "--module", "crc32c", "--module"])
                .arg(format!("zstd:level={LEVEL}"))
                .arg("--quiet");
            Proc::spawn(&mut c, v.name(), Some(&errlog))?
        }
        Variant::UserLoop => {
            let spec = Spec {
                task: Task::UserChain {
                    src: s(src),
                    dst: s(&dst),
                    block: BLOCK,
                    level: LEVEL,
                },
                cpu: None,
                timeout_ms: opts.timeout.as_millis() as u64,
            };
            Proc::spawn_task(&spec, &[], v.name())?
        }
        Variant::Shell => {
            if !have("zstd") {
                return Ok(Row {
                    skipped: Some("zstd(1) is not installed".into()),
                    ..Row::new("c", v.name())
                });
            }
            let mut c = Command::new("sh");
            c.args(["-c", PIPELINE, "sh", &s(src), &s(&dst), &s(&fifo), &s(&ck)]);
            Proc::spawn(&mut c, v.name(), Some(&errlog))?
        }
    };
    let res = p.wait(opts.timeout);
    let checked = match &res {
        Ok(_) => verify_zstd(src, &dst).map(|()| std::fs::metadata(&dst).map_or(0, |m| m.len())),
        Err(_) => Ok(0),
    };
    for p in [&dst, &fifo, &ck, &errlog] {
        remove(p);
    }
    let (u, _) = res?;
    let out = checked?;
    let size = std::fs::metadata(src).map_err(|e| e.to_string())?.len();
    Ok(Row {
        size: Some(size),
        out_bytes: Some(out),
        gb_per_sec: Some(size as f64 / u.wall.as_secs_f64().max(1e-9) / 1e9),
        cpu_s: Some(u.cpu_s()),
        user_s: Some(u.user_s),
        sys_s: Some(u.sys_s),
        wall_s: Some(u.wall.as_secs_f64()),
        ..Row::new("c", v.name())
    })
}

/// Read into `buf` until it is full or the reader ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Check that `dst` decompresses (zstd, any number of frames) to exactly
/// the bytes of `src`.
pub fn verify_zstd(src: &Path, dst: &Path) -> Result<(), String> {
    let bad = |e: std::io::Error| format!("{}: {e}", dst.display());
    let mut s = File::open(src).map_err(|e| format!("open {}: {e}", src.display()))?;
    let mut d = zstd::stream::read::Decoder::new(File::open(dst).map_err(bad)?).map_err(bad)?;
    let (mut a, mut b) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut off = 0u64;
    loop {
        let n = read_full(&mut s, &mut a).map_err(|e| e.to_string())?;
        let m = read_full(&mut d, &mut b[..n.max(1)]).map_err(bad)?;
        if n == 0 {
            return if m == 0 {
                Ok(())
            } else {
                Err(format!(
                    "{} decompresses to more than the {off} input bytes",
                    dst.display()
                ))
            };
        }
        if m != n || a[..n] != b[..n] {
            return Err(format!(
                "{} does not decompress to the input (differs within bytes {off}..{})",
                dst.display(),
                off + n as u64
            ));
        }
        off += n as u64;
    }
}

/// What the user loop prints.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub struct UserReport {
    /// CRC32C of the input.
    pub crc32c: u32,
    /// Input bytes.
    pub bytes_in: u64,
}

/// The user loop (a child): read `block` bytes → CRC32C → zstd → write.
pub fn user_chain(
    src: &str,
    dst: &str,
    block: usize,
    level: i32,
    deadline: Instant,
) -> Result<UserReport, String> {
    let mut i = File::open(src).map_err(|e| format!("open {src}: {e}"))?;
    let o = File::create(dst).map_err(|e| format!("create {dst}: {e}"))?;
    let mut enc = zstd::stream::write::Encoder::new(o, level).map_err(|e| e.to_string())?;
    let mut b = vec![0u8; block.max(1)];
    let (mut crc, mut total) = (0u32, 0u64);
    loop {
        let n = match i.read(&mut b) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("read {src}: {e}")),
        };
        crc = crc32c::crc32c_append(crc, &b[..n]);
        enc.write_all(&b[..n])
            .map_err(|e| format!("write {dst}: {e}"))?;
        total += n as u64;
        if Instant::now() > deadline {
            return Err("deadline passed".into());
        }
    }
    enc.finish().map_err(|e| format!("finish {dst}: {e}"))?;
    Ok(UserReport {
        crc32c: crc,
        bytes_in: total,
    })
}

/// Compressible text for part (c): web-server log lines with varying
/// fields, about 1 MiB per chunk; deterministic in `seed` and the chunk.
pub fn text_fill(seed: u64) -> impl FnMut(&mut Vec<u8>, u64) {
    const HOSTS: [&str; 6] = ["web-01", "web-02", "web-03", "api-1", "api-2", "edge-eu"];
    const METHODS: [&str; 4] = ["GET", "GET", "POST", "PUT"];
    const PATHS: [&str; 8] = [
        "api/v1/items",
        "api/v1/users",
        "static/img",
        "api/v2/orders",
        "search",
        "cart/checkout",
        "api/v1/items/reviews",
        "healthz",
    ];
    const STATUS: [u16; 6] = [200, 200, 200, 304, 404, 500];
    const AGENTS: [&str; 4] = [
        "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) Safari/605.1.15",
        "curl/8.5.0",
        "python-requests/2.32.3",
    ];
    move |buf, chunk| {
        let mut r = Rng::new(seed ^ chunk.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut t = chunk * 3_600_000 + r.below(1000);
        while buf.len() < 1 << 20 {
            t += r.below(40);
            let pick = |r: &mut Rng, n: usize| r.below(n as u64) as usize;
            let _ = writeln!(
                buf,
                "2025-03-{:02}T{:02}:{:02}:{:02}.{:03}Z {} {} /{}/{} {} {} \"{}\" rt={}ms id={:016x}",
                1 + (t / 86_400_000) % 28,
                (t / 3_600_000) % 24,
                (t / 60_000) % 60,
                (t / 1000) % 60,
                t % 1000,
                HOSTS[pick(&mut r, HOSTS.len())],
                METHODS[pick(&mut r, METHODS.len())],
                PATHS[pick(&mut r, PATHS.len())],
                r.below(100_000),
                STATUS[pick(&mut r, STATUS.len())],
                r.below(65_536),
                AGENTS[pick(&mut r, AGENTS.len())],
                r.below(900),
                r.next_u64() >> 24,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_loop_output_verifies_and_tampering_is_caught() {
        let w = super::super::files::WorkDir::create(Some(&std::env::temp_dir()), "chain").unwrap();
        let (src, dst) = (w.join("src"), w.join("dst.zst"));
        super::super::files::create_cached(&src, 3 << 20, text_fill(1)).unwrap();
        let far = Instant::now() + std::time::Duration::from_secs(60);
        let r = user_chain(
            src.to_str().unwrap(),
            dst.to_str().unwrap(),
            BLOCK,
            LEVEL,
            far,
        )
        .unwrap();
        assert_eq!(r.bytes_in, 3 << 20);
        assert_eq!(r.crc32c, crc32c::crc32c(&std::fs::read(&src).unwrap()));
        let out = std::fs::metadata(&dst).unwrap().len();
        assert!(out < (3 << 20) / 2, "log text compresses: {out} bytes");
        verify_zstd(&src, &dst).unwrap();
        // A stream of other input does not verify.
        std::fs::write(&dst, zstd::encode_all(&b"other"[..], 1).unwrap()).unwrap();
        assert!(verify_zstd(&src, &dst).is_err());
    }
}
