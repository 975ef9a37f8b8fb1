//! The run directory every registry entry lives in: where it is, and
//! whether it is safe to use.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::RegistryError;

/// Environment variable naming the run directory.
pub const RUN_DIR_ENV: &str = "ZCIO_RUN_DIR";

/// Where the run directory is: `$ZCIO_RUN_DIR`, else `zcio-<uid>` in the
/// ring directory (`$ZCIO_RING_DIR`, else `/dev/shm`; see
/// [`crate::sys::shm::ring_dir`]), next to the rings.
///
/// Not `$XDG_RUNTIME_DIR`: a user's processes with and without a login
/// session (a service, a cron job, a container) disagree about it, and
/// would each see only their own objects; they agree on the ring
/// directory, which containers that share rings already share.
pub fn default_path() -> PathBuf {
    if let Some(p) = std::env::var_os(RUN_DIR_ENV).filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let uid = rustix::process::geteuid().as_raw();
    crate::sys::shm::ring_dir().join(format!("zcio-{uid}"))
}

/// Create `path` (mode 0700, with its parents) if it is missing, then check
/// it: a real directory (not a symbolic link), owned by our effective uid,
/// writable by nobody else. Another user's directory, or one others may
/// write, could hold planted entries: refused.
pub fn prepare(path: &Path) -> Result<(), RegistryError> {
    if std::fs::symlink_metadata(path).is_err() {
        // Racing creators are fine: the check below judges what exists.
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path);
    }
    check(path)
}

/// Check an existing run directory (see [`prepare`]).
pub fn check(path: &Path) -> Result<(), RegistryError> {
    let bad = |why: String| RegistryError::RunDir {
        path: path.to_path_buf(),
        why,
    };
    let md = std::fs::symlink_metadata(path).map_err(|e| {
        bad(format!(
            "cannot use it ({e}); create it (mode 0700) or set {RUN_DIR_ENV} to a directory of yours"
        ))
    })?;
    if md.file_type().is_symlink() {
        return Err(bad(format!(
            "it is a symbolic link; set {RUN_DIR_ENV} to the real directory"
        )));
    }
    if !md.is_dir() {
        return Err(bad(format!(
            "it is not a directory; remove it or set {RUN_DIR_ENV} to a directory of yours"
        )));
    }
    let me = rustix::process::geteuid().as_raw();
    if md.uid() != me {
        return Err(bad(format!(
            "it belongs to uid {}, not to you (uid {me}); set {RUN_DIR_ENV} to a directory of yours",
            md.uid()
        )));
    }
    if md.mode() & 0o022 != 0 {
        return Err(bad(format!(
            "others may write it (mode {:o}); run `chmod go-w {}` or set {RUN_DIR_ENV} to another directory",
            md.mode() & 0o7777,
            path.display()
        )));
    }
    Ok(())
}
