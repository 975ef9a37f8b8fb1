//! The files of parts (a)–(c): a working directory (removed at the end,
//! also when a panic unwinds), the page-cached source files, the file
//! system they live on and whether a copy there could be a reflink.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Where a copy of part (a) happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Place {
    /// The working directory (`--dir`, default under the target dir).
    Work,
    /// `/dev/shm` (tmpfs: a copy there is always a data copy); measured
    /// only when the working directory's file system can share extents.
    Tmpfs,
}

impl Place {
    /// For tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Place::Work => "work-dir",
            Place::Tmpfs => "tmpfs",
        }
    }
}

/// A file system's type by `statfs` magic, and whether `copy_file_range`
/// on it may share extents (reflink) instead of copying data.
pub fn fs_kind(path: &Path) -> (String, bool) {
    let Ok(st) = rustix::fs::statfs(path) else {
        return ("unknown".into(), true);
    };
    // Magic numbers from linux/magic.h.
    let (name, may_share) = match st.f_type as u64 {
        0xEF53 => ("ext4", false),
        0x0102_1994 => ("tmpfs", false),
        0x9123_683E => ("btrfs", true),
        0x5846_5342 => ("xfs", true),
        0xCA45_1A4E => ("bcachefs", true),
        0x2FC1_2FC1 => ("zfs", true),
        0x794C_7630 => ("overlayfs", true),
        0x6969 => ("nfs", true),
        0xF2F5_2010 => ("f2fs", false),
        0x7461_636f => ("ocfs2", true),
        _ => ("other", true),
    };
    (format!("{name} (magic {:#x})", st.f_type as u64), may_share)
}

/// Bytes free for an unprivileged user on the file system of `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Fail clearly unless `need` bytes (plus 1 GiB of slack) are free at `dir`.
pub fn check_room(dir: &Path, need: u64, what: &str) -> Result<(), String> {
    let free = free_bytes(dir).ok_or_else(|| format!("statvfs {}: failed", dir.display()))?;
    let want = need + (1 << 30);
    if free < want {
        return Err(format!(
            "{what} needs {} free at {} (with 1 GiB to spare) but only {} is free: free some \
             space, pass --dir on a larger file system, or use --quick",
            crate::fmt::bytes_u64(want),
            dir.display(),
            crate::fmt::bytes_u64(free)
        ));
    }
    Ok(())
}

/// The working directory of a run: created at start, removed with
/// everything in it when dropped.
#[derive(Debug)]
pub struct WorkDir {
    /// Its path.
    pub path: PathBuf,
}

impl WorkDir {
    /// `BASE/zcio-splice-bench-PID` (BASE: `dir`, else the target dir this
    /// binary was built in, else the temp dir).
    pub fn create(dir: Option<&Path>, tag: &str) -> Result<Self, String> {
        let base = match dir {
            Some(d) => d.to_path_buf(),
            None => std::env::current_exe()
                .ok()
                .and_then(|e| e.parent()?.parent().map(Path::to_path_buf))
                .filter(|t| t.join("release").is_dir() || t.join("debug").is_dir())
                .unwrap_or_else(std::env::temp_dir),
        };
        remove_stale(&base);
        let path = base.join(format!("zcio-splice-bench-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&path).map_err(|e| format!("create {}: {e}", path.display()))?;
        Ok(Self { path })
    }

    /// A path inside it.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

/// Remove working directories under `base` left by runs that were killed
/// (their process is gone).
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("zcio-splice-bench-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            eprintln!(
                "removing {} (left by a run that was killed)",
                e.path().display()
            );
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// xorshift64*: a fast deterministic generator for file contents.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded (0 is replaced).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0; the bias is negligible for small n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() >> 32) * n) >> 32
    }
}

/// Write `size` bytes made by `fill` (called with a 1 MiB buffer and the
/// chunk index) to `path`, flush them to the disk (so write-back does not
/// run during the measurements) and read the file once so it is in the
/// page cache.
pub fn create_cached(
    path: &Path,
    size: u64,
    mut fill: impl FnMut(&mut Vec<u8>, u64),
) -> Result<(), String> {
    let mut f = File::create(path).map_err(|e| format!("create {}: {e}", path.display()))?;
    let mut buf = Vec::with_capacity(1 << 20);
    let mut written = 0u64;
    let mut i = 0u64;
    while written < size {
        buf.clear();
        fill(&mut buf, i);
        let n = buf.len().min((size - written) as usize);
        if n == 0 {
            return Err("file generator produced nothing".into());
        }
        f.write_all(&buf[..n])
            .map_err(|e| format!("write {}: {e}", path.display()))?;
        written += n as u64;
        i += 1;
    }
    f.sync_all()
        .map_err(|e| format!("fsync {}: {e}", path.display()))?;
    drop(f);
    read_through(path)
}

/// Read a file once, to bring it into the page cache.
pub fn read_through(path: &Path) -> Result<(), String> {
    let mut f = File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("read {}: {e}", path.display())),
        }
    }
}

/// Incompressible content for part (a): 1 MiB of generator output per
/// chunk, different in every chunk.
pub fn random_fill(seed: u64) -> impl FnMut(&mut Vec<u8>, u64) {
    move |buf, i| {
        let mut r = Rng::new(seed ^ (i.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for _ in 0..(1 << 17) {
            buf.extend_from_slice(&r.next_u64().to_le_bytes());
        }
    }
}

/// Check that `dst` is a full copy of `src`: the same size, and the same
/// bytes in 16 blocks of 4 KiB spread over the file (first and last
/// included).
pub fn spot_check(src: &Path, dst: &Path) -> Result<(), String> {
    let mut a = File::open(src).map_err(|e| format!("open {}: {e}", src.display()))?;
    let mut b = File::open(dst).map_err(|e| format!("open {}: {e}", dst.display()))?;
    let la = a.metadata().map_err(|e| e.to_string())?.len();
    let lb = b.metadata().map_err(|e| e.to_string())?.len();
    if la != lb {
        return Err(format!(
            "{} has {lb} bytes, the source {la}: the copy is incomplete",
            dst.display()
        ));
    }
    let blk = 4096u64.min(la);
    let (mut x, mut y) = (vec![0u8; blk as usize], vec![0u8; blk as usize]);
    for k in 0..16u64 {
        let off = (la - blk) / 15 * k;
        for (f, v) in [(&mut a, &mut x), (&mut b, &mut y)] {
            f.seek(SeekFrom::Start(off)).map_err(|e| e.to_string())?;
            f.read_exact(v).map_err(|e| e.to_string())?;
        }
        if x != y {
            return Err(format!(
                "{} differs from the source at offset {off}",
                dst.display()
            ));
        }
    }
    Ok(())
}

/// Remove `path` if it exists.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    #[test]
    fn created_files_have_the_size_asked_and_copies_check() {
        let w = WorkDir::create(Some(&std::env::temp_dir()), "test").unwrap();
        let (a, b) = (w.join("a"), w.join("b"));
        create_cached(&a, (3 << 20) + 5, random_fill(7)).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().len(), (3 << 20) + 5);
        std::fs::copy(&a, &b).unwrap();
        spot_check(&a, &b).unwrap();
        let mut f = OpenOptions::new().write(true).open(&b).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(b"x").unwrap();
        assert!(spot_check(&a, &b).is_err());
        let p = w.path.clone();
        drop(w);
        assert!(!p.exists());
    }
}
