//! Named files for shared rings: a directory (by default `/dev/shm`) whose
//! entries carry uid/gid/mode, so the kernel decides who may attach.
//!
//! Creation is atomic: the file is created under a temporary name with
//! `O_EXCL`, filled by the caller, then moved to its final name with
//! `renameat2(RENAME_NOREPLACE)`. Nobody ever opens a half-initialised ring.

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{self, Mode, OFlags, RenameFlags, CWD};
use rustix::io::Errno;

/// File-name prefix of every zcio ring in the ring directory.
pub const PREFIX: &str = "zcio-ring.";

/// Longest ring name accepted.
pub const MAX_NAME: usize = 200;

/// The directory rings live in: `$ZCIO_RING_DIR` or `/dev/shm`.
pub fn ring_dir() -> PathBuf {
    std::env::var_os("ZCIO_RING_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"))
}

/// Whether `name` is a valid ring name: 1..=200 characters from
/// `[A-Za-z0-9._-]`, not starting with a dot.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Path of ring `name` (the name must be valid).
pub fn path_of(name: &str) -> PathBuf {
    ring_dir().join(format!("{PREFIX}{name}"))
}

/// Open an existing ring file, read-write or read-only. Never follows a
/// symbolic link (another user could plant one) and never blocks (a FIFO
/// planted at the path would; the caller then refuses it as not a regular
/// file).
pub fn open(name: &str, writable: bool) -> Result<OwnedFd, Errno> {
    let acc = if writable {
        OFlags::RDWR
    } else {
        OFlags::RDONLY
    };
    fs::open(
        path_of(name),
        acc | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )
}

/// A freshly created ring file under a temporary name; call
/// [`NewFile::publish`] once it is initialised. Dropping it unlinks it.
pub struct NewFile {
    fd: Option<OwnedFd>,
    tmp: PathBuf,
}

impl NewFile {
    /// Create a temporary file of `len` bytes with permission bits `mode`
    /// (set explicitly after creating it, so the umask does not apply: a
    /// ring made to be shared gets the mode asked for).
    pub fn create(name: &str, len: u64, mode: u32) -> Result<Self, Errno> {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let nonce = u64::from(std::process::id()) ^ ((t.tv_nsec as u64) << 24) ^ (t.tv_sec as u64);
        let tmp = ring_dir().join(format!(".{PREFIX}{name}.{nonce:x}"));
        let fd = fs::open(
            &tmp,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(mode & 0o777),
        )?;
        let f = Self { fd: Some(fd), tmp };
        fs::fchmod(f.fd(), Mode::from_raw_mode(mode & 0o777))?;
        fs::ftruncate(f.fd(), len)?;
        Ok(f)
    }

    /// The open file.
    pub fn fd(&self) -> &OwnedFd {
        self.fd.as_ref().expect("present until published")
    }

    /// Give the file its final name; fails with `EEXIST` if a ring of that
    /// name appeared meanwhile.
    pub fn publish(mut self, name: &str) -> Result<OwnedFd, Errno> {
        fs::renameat_with(CWD, &self.tmp, CWD, path_of(name), RenameFlags::NOREPLACE)?;
        Ok(self.fd.take().expect("present until published"))
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        if self.fd.is_some() {
            let _ = fs::unlink(&self.tmp);
        }
    }
}

/// Remove ring `name`. Processes that have it open keep using it.
pub fn unlink(name: &str) -> Result<(), Errno> {
    fs::unlink(path_of(name))
}

/// Names of the rings in the ring directory (sorted).
pub fn list() -> Result<Vec<String>, Errno> {
    let rd =
        std::fs::read_dir(ring_dir()).map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
    let mut v: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| n.strip_prefix(PREFIX).map(str::to_owned))
        .filter(|n| valid_name(n))
        .collect();
    v.sort();
    Ok(v)
}

/// Owner, group, mode and size of an open ring file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo {
    /// Owner uid.
    pub uid: u32,
    /// Owner gid.
    pub gid: u32,
    /// Permission bits.
    pub mode: u32,
    /// Size in bytes.
    pub len: u64,
    /// Whether it is a regular file.
    pub regular: bool,
}

/// `fstat` an open ring file.
pub fn info(fd: impl AsFd) -> Result<FileInfo, Errno> {
    let st = fs::fstat(fd)?;
    Ok(FileInfo {
        uid: st.st_uid,
        gid: st.st_gid,
        mode: st.st_mode & 0o7777,
        len: u64::try_from(st.st_size).unwrap_or(0),
        regular: fs::FileType::from_raw_mode(st.st_mode) == fs::FileType::RegularFile,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("a"));
        assert!(valid_name("net.eth0-rx_1"));
        assert!(!valid_name(""));
        assert!(!valid_name(".hidden"));
        assert!(!valid_name("a/b"));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"x".repeat(MAX_NAME + 1)));
    }

    #[test]
    #[cfg_attr(miri, ignore = "opens files: refused by Miri's isolation")]
    fn create_publish_unlink() {
        let name = format!("shm-unit-{}", std::process::id());
        let f = NewFile::create(&name, 8192, 0o600).unwrap();
        let fd = f.publish(&name).unwrap();
        let i = info(&fd).unwrap();
        assert_eq!(i.len, 8192);
        assert!(i.regular);
        assert_eq!(i.mode & 0o077, 0);
        assert!(list().unwrap().contains(&name));
        let f2 = NewFile::create(&name, 4096, 0o600).unwrap();
        assert_eq!(f2.publish(&name).unwrap_err(), Errno::EXIST);
        assert!(open(&name, true).is_ok());
        unlink(&name).unwrap();
        assert_eq!(open(&name, false).unwrap_err(), Errno::NOENT);
    }
}
