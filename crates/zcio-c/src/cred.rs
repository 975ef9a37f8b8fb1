//! Credentials: who may connect to a listener (`struct zcio_access`, Rust's
//! `AccessPolicy`) and who is at the other end of a connection (`struct
//! zcio_peer_cred`, Rust's `PeerCred`, from the kernel's `SO_PEERCRED`).

use std::ffi::c_int;

use zcio::{AccessPolicy, PeerCred};

use crate::error::einval;

/// Who may connect to a listener, decided on the kernel's credentials of
/// the connecting process (`SO_PEERCRED`), before anything it sends is
/// looked at: a process whose effective uid is in `uids`, or whose
/// effective gid is in `gids`. Both arrays are read during the call only
/// (the library keeps a copy). A NULL `struct zcio_access *` admits this
/// process's own effective uid only.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_access {
    /// User ids allowed (NULL when `nuids` is 0).
    pub uids: *const u32,
    /// How many `uids`.
    pub nuids: usize,
    /// Group ids allowed (NULL when `ngids` is 0).
    pub gids: *const u32,
    /// How many `gids`.
    pub ngids: usize,
}

/// The kernel's credentials of the process at the other end of a
/// connection (`SO_PEERCRED`, taken when it connected; not from any
/// message, so the peer cannot forge them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct zcio_peer_cred {
    /// Process id as this process's PID namespace sees it; 0 when the peer
    /// lives in a PID namespace this one cannot see into (a container).
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

impl From<PeerCred> for zcio_peer_cred {
    fn from(p: PeerCred) -> Self {
        Self {
            pid: p.pid,
            uid: p.uid,
            gid: p.gid,
        }
    }
}

/// One id array of a `zcio_access`.
///
/// # Safety
/// `p` is NULL or valid for reading `n` `u32`s.
unsafe fn ids(p: *const u32, n: usize, what: &str) -> Result<Vec<u32>, c_int> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(einval(format_args!(
            "zcio_access: {what} is NULL but its count is {n}"
        )));
    }
    if n > (1 << 20) {
        return Err(einval(format_args!(
            "zcio_access: {n} {what} (at most 1048576)"
        )));
    }
    // SAFETY: non-NULL and readable for `n` ids (contract).
    Ok(unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
}

/// The Rust policy of `a` (NULL: the own uid only).
///
/// # Safety
/// `a` is NULL or a readable `struct zcio_access` whose arrays are valid
/// for their counts.
pub(crate) unsafe fn access_arg(a: *const zcio_access) -> Result<AccessPolicy, c_int> {
    // SAFETY: the caller's contract.
    let Some(a) = (unsafe { a.as_ref() }) else {
        return Ok(AccessPolicy::default());
    };
    // SAFETY: the caller's contract.
    let uids = unsafe { ids(a.uids, a.nuids, "uids") }?;
    // SAFETY: the caller's contract.
    let gids = unsafe { ids(a.gids, a.ngids, "gids") }?;
    if uids.is_empty() && gids.is_empty() {
        return Err(einval(
            "zcio_access admits nobody (no uids and no gids); pass NULL for the own uid",
        ));
    }
    Ok(AccessPolicy { uids, gids })
}
