//! The per-page work of a message (fbufs Table 1): the originator writes
//! one word in each page, the receiver reads one word in each page. Used by
//! the transfer benchmark's sides and by [`crate::touch`] (bytes received
//! through zcio).

/// Page size used for the per-page touch.
pub const PAGE: usize = 4096;

/// Write `seq` as the first word of every page of `buf`.
pub fn write_pages(buf: &mut [u8], seq: u64) {
    let word = seq.to_le_bytes();
    let mut off = 0;
    while off + 8 <= buf.len() {
        buf[off..off + 8].copy_from_slice(&word);
        off += PAGE;
    }
}

/// Read the first word of every page; returns the first page's word (the
/// sequence number) and a checksum that keeps the reads alive.
pub fn read_pages(buf: &[u8]) -> (u64, u64) {
    read_pages_view(zcio::View::from_slice(buf))
}

/// [`read_pages`] over bytes in shared memory, read in place (one volatile
/// load per page: the bytes may belong to another process).
pub fn read_pages_view(buf: zcio::View<'_>) -> (u64, u64) {
    let mut sum = 0u64;
    let mut first = None;
    let mut off = 0;
    while let Some(w) = buf.read_u64_le(off) {
        let v = std::hint::black_box(w);
        first.get_or_insert(v);
        sum = sum.wrapping_add(v);
        off += PAGE;
    }
    (first.unwrap_or(0), std::hint::black_box(sum))
}

/// Number of pages in a message of `size` bytes.
pub fn pages(size: usize) -> usize {
    size.div_ceil(PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read() {
        let mut b = vec![0u8; 3 * PAGE];
        write_pages(&mut b, 7);
        assert_eq!(read_pages(&b), (7, 21));
        assert_eq!(pages(3 * PAGE + 1), 4);
    }
}
