//! [`MoverKind`]: which mover an association uses (the fastest one for a
//! pair is chosen, and the movers run, in `mover.rs`).

use std::fmt;

/// Which mover an association uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MoverKind {
    /// `copy_file_range(2)`: file to file inside the kernel.
    CopyFileRange,
    /// `sendfile(2)`: from a file to any descriptor.
    Sendfile,
    /// `splice(2)`, directly or through an internal pipe.
    Splice,
    /// Read into zcio pool buffers, run the modules, write out.
    Buffer,
}

impl fmt::Display for MoverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::CopyFileRange => "copy_file_range",
            Self::Sendfile => "sendfile",
            Self::Splice => "splice",
            Self::Buffer => "buffer path",
        })
    }
}
