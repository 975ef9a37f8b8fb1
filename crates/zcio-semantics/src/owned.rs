//! System-allocated buffers (the move family): what `alloc` and
//! `input_owned` return and `output_owned` consumes.

use super::arena::ArenaBuf;
use crate::vm;
use crate::{Fbuf, FbufMut};

/// A private mapping of a peer's sealed region (move input): nobody can
/// change the pages underneath, and the receiver's own writes stay private.
pub(crate) struct Mapped {
    pub addr: usize,
    pub map_len: usize,
    pub offset: usize,
    pub len: usize,
    /// Keeps the peer from being told the buffer came back while mapped.
    pub _src: Fbuf,
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // The range was reserved and mapped for this value alone.
        // SAFETY: as argued just above; nothing refers to it any more.
        let _ = unsafe { vm::release(self.addr, self.map_len) };
    }
}

pub(crate) enum Kind {
    /// Pages of the endpoint's arena (emulated move, weak moves).
    Arena(ArenaBuf),
    /// A fresh single-use region, writable by us only (move output).
    Fresh(FbufMut),
    /// A received sealed region, mapped privately (move input).
    Mapped(Mapped),
}

/// A system-allocated I/O buffer: the application owns it until it hands
/// it to [`SemanticEndpoint::output_owned`](super::SemanticEndpoint::output_owned) or
/// [`SemanticEndpoint::free`](super::SemanticEndpoint::free).
pub struct OwnedBuf {
    pub(crate) kind: Kind,
}

impl std::fmt::Debug for OwnedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Arena(_) => "arena",
            Kind::Fresh(_) => "fresh region",
            Kind::Mapped(_) => "mapped region",
        };
        f.debug_struct("OwnedBuf")
            .field("len", &self.len())
            .field("kind", &kind)
            .finish()
    }
}

impl OwnedBuf {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::Arena(b) => b.len(),
            Kind::Fresh(b) => b.len(),
            Kind::Mapped(m) => m.len,
        }
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offset of the first byte within its page.
    pub fn page_offset(&self) -> usize {
        (self.as_ptr() as usize) % crate::sys::page_size()
    }

    fn as_ptr(&self) -> *const u8 {
        match &self.kind {
            Kind::Arena(b) => b.as_ptr(),
            Kind::Fresh(b) => b.as_slice().as_ptr(),
            Kind::Mapped(m) => (m.addr + m.offset) as *const u8,
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.kind {
            Kind::Arena(b) => b.as_slice(),
            Kind::Fresh(b) => b.as_slice(),
            // A private mapping of a sealed region: no process can change
            // the file pages, and only this value's owner writes its
            // private copies; the range is mapped for the value's life.
            // SAFETY: as argued just above.
            Kind::Mapped(m) => unsafe {
                std::slice::from_raw_parts((m.addr + m.offset) as *const u8, m.len)
            },
        }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        match &mut self.kind {
            Kind::Arena(b) => b.as_mut_slice(),
            Kind::Fresh(b) => b.as_mut_slice(),
            // As in `as_slice`; the mapping is private and writable, and
            // `&mut self` makes this the only reference.
            // SAFETY: as argued just above.
            Kind::Mapped(m) => unsafe {
                std::slice::from_raw_parts_mut((m.addr + m.offset) as *mut u8, m.len)
            },
        }
    }
}

impl std::ops::Deref for OwnedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for OwnedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}
