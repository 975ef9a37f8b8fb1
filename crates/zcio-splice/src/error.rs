//! Errors of associations.

use thiserror::Error;

use super::mover_kind::MoverKind;
use crate::Errno;

/// What went wrong with an association.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SpliceError {
    /// The descriptor is not something data can flow from or to (a
    /// directory, an unconnected socket, …).
    #[error("{what}: cannot be a splice {role} ({why})")]
    Unsuitable {
        /// "source", "sink", or "source or sink".
        role: &'static str,
        /// Which I/O object.
        what: String,
        /// Why not.
        why: &'static str,
    },
    /// An I/O object spec (`tcp:HOST:PORT`, a path, …) cannot be opened.
    #[error("{spec}: {reason}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What went wrong (and what to do).
        reason: String,
        /// The system's error, when a system call failed.
        errno: Option<Errno>,
    },
    /// A system call failed while moving data.
    #[error("{op} failed while moving data with {mover}: {errno}")]
    Io {
        /// The system call.
        op: &'static str,
        /// The mover in use.
        mover: MoverKind,
        /// The kernel's error.
        errno: Errno,
    },
    /// A system call failed while setting up.
    #[error("{op}: {errno}")]
    Setup {
        /// The system call.
        op: &'static str,
        /// The kernel's error.
        errno: Errno,
    },
    /// The source and the sink are the same file (by any path: a hard
    /// link, a symlink, an inherited descriptor). Nothing was changed.
    #[error("{source_label} and {sink} are the same file: nothing was copied and {sink} is unchanged; name another destination")]
    SameFile {
        /// The source's label.
        source_label: String,
        /// The sink's label.
        sink: String,
    },
    /// A file source ended before the bytes it had when the association
    /// was made were all moved (it shrank while being copied).
    #[error("{source_label} ended after {moved} of its {expected} bytes (did it shrink while being copied?); the destination is incomplete: copy again")]
    Short {
        /// The source's label.
        source_label: String,
        /// Bytes the file had from its offset when the association was made.
        expected: u64,
        /// Bytes moved before it ended.
        moved: u64,
    },
    /// The sink accepted no more bytes (wrote 0).
    #[error("the sink accepted no more data (write returned 0)")]
    SinkClosed,
    /// A processing module failed.
    #[error("module {module}: {message}")]
    Module {
        /// The module's name.
        module: String,
        /// What it said.
        message: String,
    },
    /// A zcio object (ring, channel, pool) failed while moving data.
    #[error("{op}: {message}")]
    Zcio {
        /// What was being done.
        op: &'static str,
        /// The object's error.
        message: String,
    },
    /// A write to a full zcio sink was abandoned because flow was stopped.
    #[error("flow stopped while the sink was full")]
    Stopped,
    /// An increment is already running (asynchronously) on this association.
    #[error("an increment is already running on this association; stop it or wait for it")]
    Busy,
    /// The association's worker thread is gone (it panicked).
    #[error("the association's worker thread ended unexpectedly")]
    WorkerGone,
}

impl SpliceError {
    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> zcio_sys::error::ErrorKind {
        use zcio_sys::error::ErrorKind as K;
        match self {
            Self::Io { .. } | Self::Setup { .. } => K::Os,
            Self::Spec { errno: Some(_), .. } => K::Os,
            Self::Spec { errno: None, .. } => K::InvalidInput,
            Self::Unsuitable { .. } | Self::SameFile { .. } => K::InvalidInput,
            Self::Short { .. } | Self::Zcio { .. } => K::Other,
            Self::SinkClosed => K::Disconnected,
            Self::Module { .. } => K::Module,
            Self::Stopped => K::Cancelled,
            Self::Busy => K::Busy,
            Self::WorkerGone => K::Internal,
        }
    }

    /// The errno behind an I/O failure, if any.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Self::Io { errno, .. } | Self::Setup { errno, .. } => Some(*errno),
            Self::Spec { errno, .. } => *errno,
            _ => None,
        }
    }
}
