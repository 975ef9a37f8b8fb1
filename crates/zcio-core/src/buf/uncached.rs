//! The uncached allocator: a fresh memfd region per buffer, passed by fd and
//! mapped by each receiver on every transfer. It is the expensive baseline,
//! the allocator for buffers whose path is unknown, and the only way to get
//! *secured* buffers: Linux seals are permanent, so a sealed region can never
//! be recycled in place.

use std::sync::Arc;

use crate::buf::fbuf::{Backing, BufCore, FbufMut};
use crate::buf::pool::AllocError;
use crate::region::Region;

/// Allocator of single-use regions.
#[derive(Debug, Clone)]
pub struct Uncached {
    name: String,
    populate: bool,
}

impl Uncached {
    /// An allocator whose regions are named `zcio-NAME`. `populate`
    /// pre-faults each region in one system call.
    pub fn new(name: impl Into<String>, populate: bool) -> Self {
        Self {
            name: format!("zcio-{}", name.into()),
            populate,
        }
    }

    /// A volatile single-use buffer of `len` bytes.
    pub fn alloc(&self, len: usize) -> Result<FbufMut, AllocError> {
        self.make(len, false)
    }

    /// A buffer that `freeze` seals with `F_SEAL_WRITE`: after freezing,
    /// no domain — the originator included — can modify it.
    pub fn alloc_secured(&self, len: usize) -> Result<FbufMut, AllocError> {
        self.make(len, true)
    }

    fn make(&self, len: usize, secured: bool) -> Result<FbufMut, AllocError> {
        let max = isize::MAX as usize / 2;
        if len == 0 || len > max {
            return Err(AllocError::BadSize(len, max));
        }
        let rounded = crate::sys::round_to_pages(len).ok_or(AllocError::BadSize(len, max))?;
        let mut region = Region::create(&self.name, rounded, self.populate)?;
        region.mark_single_use();
        let core = BufCore {
            region: Arc::new(region),
            offset: 0,
            len,
            backing: Backing::SingleUse,
            retired: Default::default(),
            trusted: false,
        };
        Ok(FbufMut::from_core(core, secured))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::SealFlags;

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn secured_freeze_seals_and_secure_is_free() {
        let u = Uncached::new("t", false);
        let mut m = u.alloc_secured(100).unwrap();
        m.as_mut_slice()[..5].copy_from_slice(b"hello");
        let f = m.freeze().unwrap();
        assert!(f.is_secured());
        assert!(f.region().seals().unwrap().contains(SealFlags::WRITE));
        assert_eq!(&f.to_vec()[..5], b"hello");
        assert!(!f.secure().was_copied());
        assert!(f.region().is_single_use());
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd_create: a system call Miri does not model")]
    fn volatile_is_not_secured() {
        let u = Uncached::new("t", true);
        let f = u.alloc(4096).unwrap().freeze().unwrap();
        assert!(!f.is_secured());
        assert_eq!(f.len(), 4096);
    }
}
