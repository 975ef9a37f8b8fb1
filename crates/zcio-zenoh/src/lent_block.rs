//! A ring block lent to Zenoh in place: the exporter hands Zenoh the
//! ring's own pages instead of a copy, and releases the block only once
//! Zenoh has let go of them (Zenoh encodes the payload into its batch
//! inside `put` — that memcpy is the one user-space copy on the exporting
//! host — and drops it before `put` returns).
//!
//! This is the explicit, argued exception to "no Rust reference over bytes
//! another process may write": `LentBlock::as_ref` gives Zenoh a `&[u8]` over
//! ring pages. Under `Overflow::Block` and `Overflow::Srp` a producer that
//! keeps the ring protocol never writes a block before every consumer — the
//! exporter among them — released it, so the bytes cannot change while
//! Zenoh reads them. A producer that breaks the protocol could still write
//! them; Zenoh would then publish a mix of the bytes (it reads them once,
//! interprets nothing), which is no more than such a producer could publish
//! by writing them in the first place: the bridge never reads the payload,
//! and the attachment is built from the ring's validated header fields. An
//! exporter that would rather pay a copy than rely on the producer asks
//! for one (`ExportOptions::copy`, `--copy`); rings that overwrite unread
//! blocks (FRP/MRP) are always copied out and checked.

use std::sync::Arc;

use zcio::ring::RingMap;

/// The owner behind a `bytes::Bytes` over a lent block; dropping it (the
/// last reference Zenoh held) tells the exporter the block may go back.
pub(crate) struct LentBlock {
    ptr: *const u8,
    len: usize,
    /// Keeps the ring mapped while Zenoh holds the bytes.
    _map: Arc<RingMap>,
    returned: Option<std::sync::mpsc::SyncSender<()>>,
}

// SAFETY: the pointer is into a shared mapping kept alive by `_map`
// (immutable while lent, see the module comment); nothing in a `LentBlock` is
// tied to the thread that made it.
unsafe impl Send for LentBlock {}
// SAFETY: `&LentBlock` only reads the lent bytes (see `Send`).
unsafe impl Sync for LentBlock {}

impl LentBlock {
    /// Lend `len` bytes at `ptr` of `map`; the receiver gets its one
    /// message when the lent block is dropped.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must lie inside `map`'s mapping, in a block the
    /// caller holds (peeked, not released) under `Overflow::Block` or
    /// `Overflow::Srp` until the receiver gets that message, so that a
    /// producer following the protocol does not write it meanwhile.
    pub(crate) unsafe fn new(
        ptr: *const u8,
        len: usize,
        map: Arc<RingMap>,
    ) -> (Self, std::sync::mpsc::Receiver<()>) {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        (
            Self {
                ptr,
                len,
                _map: map,
                returned: Some(tx),
            },
            rx,
        )
    }
}

impl AsRef<[u8]> for LentBlock {
    fn as_ref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: the explicit opt-in of the module comment: `ptr..ptr +
        // len` is inside a mapping `_map` keeps alive (`LentBlock::new`'s
        // contract), in a block held unreleased until this lent block is
        // dropped, which a protocol-following producer does not write.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for LentBlock {
    fn drop(&mut self) {
        if let Some(tx) = self.returned.take() {
            // The exporter may have stopped waiting (stopped); nothing to do.
            // Never blocks: the one message fits the channel.
            let _ = tx.try_send(());
        }
    }
}
