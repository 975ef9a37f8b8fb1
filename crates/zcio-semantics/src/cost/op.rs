//! The primitive operations the cost model prices.

use std::fmt;

/// The primitive operations the model prices (the design's list). Page
/// operations are priced by their byte count (pages × page size).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// `memcpy` of B bytes from private memory into shared memory.
    CopyIn,
    /// Volatile copy of B bytes out of a peer's buffer into private memory.
    CopyOut,
    /// Send and receive one message by reference through a channel.
    RefPass,
    /// Write-protect the pages of an arena range (TCOW).
    Protect,
    /// Undo [`Op::Protect`].
    Unprotect,
    /// A write to a protected in-flight page: fault, page copy, remap.
    TcowFault,
    /// Receiver: move an arena range aside and map the peer's pages
    /// (private, populated) in its place.
    Swap,
    /// Undo a swap: foreign pages unmapped, own pages back.
    Rehome,
    /// memfd create + size + map read-write, populated; and the region's
    /// destruction (pages freed) once its last user lets go.
    RegionCreate,
    /// Drop the writable mapping and seal with `F_SEAL_WRITE`.
    RegionSeal,
    /// Receiver: attach a region and map it, populated; and unmap it.
    RegionMap,
    /// `PROT_NONE` on a range.
    Hide,
    /// `PROT_READ | PROT_WRITE` back on a hidden range.
    Reveal,
    /// `mlock` a range.
    Wire,
    /// `munlock` a range.
    Unwire,
    /// Zero-fill B bytes.
    Zero,
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 16] = [
        Op::CopyIn,
        Op::CopyOut,
        Op::RefPass,
        Op::Protect,
        Op::Unprotect,
        Op::TcowFault,
        Op::Swap,
        Op::Rehome,
        Op::RegionCreate,
        Op::RegionSeal,
        Op::RegionMap,
        Op::Hide,
        Op::Reveal,
        Op::Wire,
        Op::Unwire,
        Op::Zero,
    ];

    /// The stable name (calibration file keys, tables, JSON).
    pub fn name(self) -> &'static str {
        match self {
            Op::CopyIn => "copy_in",
            Op::CopyOut => "copy_out",
            Op::RefPass => "ref_pass",
            Op::Protect => "protect",
            Op::Unprotect => "unprotect",
            Op::TcowFault => "tcow_fault",
            Op::Swap => "swap",
            Op::Rehome => "rehome",
            Op::RegionCreate => "region_create",
            Op::RegionSeal => "region_seal",
            Op::RegionMap => "region_map",
            Op::Hide => "hide",
            Op::Reveal => "reveal",
            Op::Wire => "wire",
            Op::Unwire => "unwire",
            Op::Zero => "zero",
        }
    }

    /// The operation named `s` ([`Op::name`]).
    pub fn from_name(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == s)
    }

    /// Whether the operation works on whole pages (measured at page counts).
    pub fn is_page_op(self) -> bool {
        !matches!(self, Op::CopyIn | Op::CopyOut | Op::RefPass | Op::Zero)
    }

    /// Whether a usable model may lack this operation (only
    /// [`Op::TcowFault`]: it needs the arena's fault path to measure).
    pub fn optional(self) -> bool {
        self == Op::TcowFault
    }

    /// The operation's position in [`Op::ALL`] (the model's table index).
    pub(super) fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for op in Op::ALL {
            assert_eq!(Op::from_name(op.name()), Some(op));
        }
    }

    #[test]
    fn all_is_in_table_order() {
        for (i, op) in Op::ALL.into_iter().enumerate() {
            assert_eq!(op.index(), i, "{op}");
        }
    }
}
