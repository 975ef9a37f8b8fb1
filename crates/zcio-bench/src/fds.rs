//! File descriptors handed from the coordinator to benchmark children:
//! pipes (with a chosen buffer size), spawning a child that inherits exactly
//! the fds it needs, and taking ownership of an inherited fd in the child.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use rustix::io::{fcntl_getfd, fcntl_setfd, FdFlags};
use serde::Serialize;

use crate::child;

/// Set or clear `FD_CLOEXEC` on `fd`.
pub fn set_cloexec(fd: &OwnedFd, on: bool) -> Result<(), String> {
    let mut f = fcntl_getfd(fd).map_err(|e| e.to_string())?;
    f.set(FdFlags::CLOEXEC, on);
    fcntl_setfd(fd, f).map_err(|e| e.to_string())
}

/// [`child::spawn`]`(arg, spec)` so that of `all` the child inherits
/// exactly `give` (the others are `CLOEXEC`; afterwards all of them are
/// `CLOEXEC` again). The one place benchmark children get their fds.
pub fn spawn_with<S: Serialize>(
    arg: &str,
    spec: &S,
    give: &[&OwnedFd],
    all: &[&OwnedFd],
) -> Result<std::process::Child, String> {
    let json = child::json(spec)?;
    for fd in all {
        set_cloexec(fd, !give.iter().any(|g| g.as_raw_fd() == fd.as_raw_fd()))?;
    }
    let c = child::spawn_self(arg, &json);
    for fd in all {
        set_cloexec(fd, true)?;
    }
    c
}

/// `/proc/sys/fs/pipe-max-size`: the largest pipe buffer an unprivileged
/// process may ask for (1 MiB if unreadable, the kernel default).
pub fn pipe_max_size() -> usize {
    std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(1 << 20)
}

/// A `CLOEXEC` pipe `(read end, write end, effective buffer size)`. The
/// buffer is set with `F_SETPIPE_SZ` to `want` capped at
/// [`pipe_max_size`] (`None`: that maximum). The kernel may round up, or
/// refuse when the user's pipe quota is exhausted; the size actually in
/// effect is returned.
pub fn pipe_pair(want: Option<usize>) -> Result<(OwnedFd, OwnedFd, usize), String> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| format!("pipe: {e}"))?;
    let max = pipe_max_size();
    let _ = rustix::pipe::fcntl_setpipe_size(&w, want.unwrap_or(max).min(max));
    let eff = rustix::pipe::fcntl_getpipe_size(&w).map_err(|e| format!("F_GETPIPE_SZ: {e}"))?;
    Ok((r, w, eff))
}

/// In a child: own the inherited fd `fd` as a [`File`].
pub fn take_fd(fd: RawFd) -> Result<File, String> {
    // Validate the number refers to an open fd before owning it.
    rustix::io::fcntl_getfd(
        // SAFETY: only used for the duration of this call to probe the fd.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
    )
    .map_err(|e| format!("fd {fd} not inherited: {e}"))?;
    // The coordinator created this fd for this child only and
    // passed its number; nothing else in this process owns it.
    // SAFETY: as argued just above.
    Ok(unsafe { File::from_raw_fd(fd) })
}
