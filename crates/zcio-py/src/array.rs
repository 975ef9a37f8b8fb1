//! numpy-side helpers of `send_array`/`recv_array`; the header itself is
//! the core's [`zcio::array`] (shared with the Zenoh bridge).

pub(crate) use zcio::array::{
    header_len, ArrayHeader as Header, FIXED, FLAG_SENDER_MAPS_WRITABLE, MAX_DTYPE, MAX_HEADER,
    MAX_NDIM,
};

/// The extent of an array's elements relative to its first element's
/// address: `(lo, hi)` with every element in `[data + lo, data + hi)`, and
/// the number of elements. `None` on overflow.
pub(crate) fn extent(shape: &[usize], strides: &[isize], itemsize: usize) -> Option<(i128, i128)> {
    if shape.contains(&0) {
        return Some((0, 0));
    }
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&d, &s) in shape.iter().zip(strides) {
        let span = (d as i128 - 1).checked_mul(s as i128)?;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    Some((lo, hi + itemsize as i128))
}
