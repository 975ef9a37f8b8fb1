//! The array header in front of `send_array`'s payload (numpy arrays from
//! Python, carried across hosts by the Zenoh bridge), as a receiver meets
//! it: `ArrayHeader::read_from` over a received message (the fixed part's
//! `announced_len`, then `decode` of a private copy), `decode` alone over a
//! header and a message length (the bridge's path), and `check_extent`
//! with an item size (what the Python frontend calls once numpy named
//! the dtype's itemsize).
//!
//! Invariant: no panic; a decoded header is within every documented bound
//! (at most 64 dimensions, a dtype of 1..=32 characters of
//! `[A-Za-z0-9<>|=[]]`, its length that of the bytes, its payload inside
//! the message behind the header) and encodes to the very bytes it was
//! decoded from; decode(encode(x)) == x; and when `check_extent` accepts,
//! every element — checked one by one for arrays of up to 4096 elements —
//! lies inside the payload.

use crate::input::{pick_u64, record, Unstructured};
use crate::msgs;
use zcio::array::ArrayHeader;

const FIXED: usize = ArrayHeader::FIXED;
const MAX_DTYPE: usize = ArrayHeader::MAX_DTYPE;
const MAX_HEADER: usize = ArrayHeader::MAX_HEADER;
const MAX_NDIM: usize = ArrayHeader::MAX_NDIM;

/// `[selector][…]`: 0 a header's bytes (`[msg_len u64][itemsize u16]
/// [header…]`) through `decode`; 1 a message (`[itemsize u16][cuts, see
/// msgs::cuts][bytes…]`) through `read_from`; 2 a header built from the input
/// through `encode` and back.
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 3 {
        0 => raw(rest),
        1 => message(rest),
        _ => built(rest),
    }
}

fn raw(b: &[u8]) {
    let mut u = Unstructured::new(b);
    let msg_len = u64::from_le_bytes(record(&mut u)) as usize;
    let itemsize = u16::from_le_bytes(record(&mut u)) as usize;
    let h = u.take_rest();
    if let Some(fixed) = h.get(..FIXED) {
        let fixed: &[u8; FIXED] = fixed.try_into().expect("FIXED bytes");
        if let Ok(hl) = ArrayHeader::announced_len(fixed) {
            assert!((FIXED..=MAX_HEADER).contains(&hl) && hl.is_multiple_of(64));
        }
    }
    if let Ok(hdr) = ArrayHeader::decode(h, msg_len) {
        accepted(&hdr, h, msg_len);
        extent(&hdr, itemsize);
    }
}

fn message(b: &[u8]) {
    let mut u = Unstructured::new(b);
    let itemsize = u16::from_le_bytes(record(&mut u)) as usize;
    let cuts = msgs::cuts(&mut u, 8);
    let bytes = u.take_rest();
    let m = msgs::msg(bytes, &cuts);
    match ArrayHeader::read_from(&m) {
        Ok(Some(hdr)) => {
            accepted(&hdr, &bytes[..hdr.len()], bytes.len());
            extent(&hdr, itemsize);
        }
        Ok(None) => assert!(bytes.len() < FIXED || bytes[..8] != ArrayHeader::MAGIC),
        Err(_) => {}
    }
}

/// What every accepted header must satisfy; `h` the bytes it came from.
fn accepted(hdr: &ArrayHeader, h: &[u8], msg_len: usize) {
    assert!(hdr.shape.len() <= MAX_NDIM);
    assert_eq!(hdr.shape.len(), hdr.strides.len());
    assert!((1..=MAX_DTYPE).contains(&hdr.dtype.len()));
    assert!(hdr
        .dtype
        .bytes()
        .all(|c| c.is_ascii_alphanumeric() || b"<>|=[]".contains(&c)));
    assert_eq!(hdr.len(), h.len());
    assert_eq!(ArrayHeader::len_for(hdr.shape.len(), hdr.dtype.len()), h.len());
    assert!(h.len() <= MAX_HEADER && h.len().is_multiple_of(64));
    let end = hdr
        .payload_off
        .checked_add(hdr.payload_len)
        .expect("no overflow");
    assert!(hdr.payload_off >= h.len() as u64 && end <= msg_len as u64);
    assert!(hdr.shape.iter().all(|&d| d <= i64::MAX as u64));
    assert_eq!(hdr.to_bytes(), h, "an accepted header re-encodes as sent");
}

/// `check_extent(itemsize)`; when it accepts, every element fits.
fn extent(hdr: &ArrayHeader, itemsize: usize) {
    if hdr.check_extent(itemsize).is_err() {
        return;
    }
    let plen = i128::from(hdr.payload_len);
    let off = i128::from(hdr.data_off);
    let item = itemsize as i128;
    assert!(off <= plen);
    if hdr.shape.contains(&0) {
        return;
    }
    // The two corners: the lowest and highest element.
    let (mut lo, mut hi, mut count) = (0i128, 0i128, 1i128);
    for (&d, &s) in hdr.shape.iter().zip(&hdr.strides) {
        let span = (i128::from(d) - 1) * i128::from(s);
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
        count = count.saturating_mul(i128::from(d));
    }
    assert!(off + lo >= 0, "an element before the payload");
    assert!(off + hi + item <= plen, "an element past the payload");
    assert!(count.saturating_mul(item) <= plen, "more elements than fit");
    // Small arrays: every element, one by one.
    if count <= 4096 {
        let mut idx = vec![0u64; hdr.shape.len()];
        for _ in 0..count {
            let at: i128 = off
                + idx
                    .iter()
                    .zip(&hdr.strides)
                    .map(|(&i, &s)| i128::from(i) * i128::from(s))
                    .sum::<i128>();
            assert!(
                at >= 0 && at + item <= plen,
                "element at {at} outside 0..{plen}"
            );
            for (k, i) in idx.iter_mut().enumerate().rev() {
                *i += 1;
                if *i < hdr.shape[k] {
                    break;
                }
                *i = 0;
            }
        }
    }
}

fn built(b: &[u8]) {
    let mut u = Unstructured::new(b);
    let ndim = u.int_in_range(0..=MAX_NDIM).unwrap_or(0);
    let dlen = u.int_in_range(1..=MAX_DTYPE).unwrap_or(1);
    const CHARS: &[u8] = b"<>|=[]fiubcmMOSUVa0123456789";
    let dtype: String = (0..dlen)
        .map(|_| CHARS[u.choose_index(CHARS.len()).unwrap_or(0)] as char)
        .collect();
    let small = [0, 1, 2, 3, 4, 8, 16, 1 << 20, i64::MAX as u64, u64::MAX];
    let shape: Vec<u64> = (0..ndim).map(|_| pick_u64(&mut u, &small)).collect();
    let strides: Vec<i64> = (0..ndim)
        .map(|_| {
            pick_u64(
                &mut u,
                &[0, 1, 4, 8, (-4i64) as u64, (-8i64) as u64, 1 << 40],
            ) as i64
        })
        .collect();
    let hl = ArrayHeader::len_for(ndim, dlen) as u64;
    let payload_len = pick_u64(&mut u, &[0, 1, 16, 4096, 1 << 30]);
    let slack = pick_u64(&mut u, &[0, 1, 64]);
    let hdr = ArrayHeader {
        flags: u.arbitrary().unwrap_or(0) & ArrayHeader::FLAG_SENDER_MAPS_WRITABLE,
        dtype,
        shape,
        strides,
        payload_off: hl.saturating_add(pick_u64(&mut u, &[0, 64, 4096])),
        payload_len,
        data_off: pick_u64(&mut u, &[0, 1, 8, payload_len, payload_len.wrapping_add(1)]),
    };
    let itemsize = u16::from_le_bytes(record(&mut u)) as usize;
    let bytes = hdr.to_bytes();
    let Some(msg_len) = hdr
        .payload_off
        .checked_add(payload_len)
        .and_then(|e| e.checked_add(slack))
        .and_then(|e| usize::try_from(e).ok())
    else {
        return;
    };
    match ArrayHeader::decode(&bytes, msg_len) {
        Ok(back) => {
            assert_eq!(back, hdr, "decode(encode(x)) == x");
            accepted(&back, &bytes, msg_len);
            extent(&back, itemsize);
        }
        // Only a dimension beyond i64 is refused of what this builds.
        Err(e) => assert!(
            hdr.shape.iter().any(|&d| d > i64::MAX as u64),
            "a valid header refused: {e}"
        ),
    }
}

/// Real headers: a C-ordered float matrix, a reversed view, a scalar, a
/// Fortran-ordered int array, an empty array — as `send_array` encodes
/// them — each as raw header bytes, as a message (header + payload,
/// in one slice and cut), and as built values.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mk = |dtype: &str, shape: &[u64], strides: &[i64], plen: u64, data_off: u64| {
        let h = ArrayHeader {
            flags: 0,
            dtype: dtype.into(),
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            payload_off: 0,
            payload_len: plen,
            data_off,
        };
        ArrayHeader {
            payload_off: h.len() as u64,
            ..h
        }
    };
    let headers = [
        (mk("<f4", &[3, 4], &[16, 4], 48, 0), 4usize),
        (mk("<f8", &[5], &[-8], 40, 32), 8),
        (mk("|b1", &[], &[], 1, 0), 1),
        (mk("<i2", &[2, 3, 4], &[2, 4, 12], 48, 0), 2),
        (mk("<u8", &[0, 7], &[56, 8], 0, 0), 8),
        (
            ArrayHeader {
                flags: ArrayHeader::FLAG_SENDER_MAPS_WRITABLE,
                ..mk("<c16", &[2, 2], &[32, 16], 64, 0)
            },
            16,
        ),
    ];
    for (h, item) in &headers {
        let bytes = h.to_bytes();
        let total = h.payload_off + h.payload_len;
        let mut s = vec![0u8];
        s.extend_from_slice(&total.to_le_bytes());
        s.extend_from_slice(&(*item as u16).to_le_bytes());
        s.extend_from_slice(&bytes);
        out.push(s);
        let mut whole = bytes.clone();
        whole.extend((0..h.payload_len).map(|i| i as u8));
        for cuts in [&[][..], &[bytes.len(), 3][..]] {
            let mut s = vec![1u8];
            s.extend_from_slice(&(*item as u16).to_le_bytes());
            s.extend_from_slice(&msgs::cuts_bytes(cuts));
            s.extend_from_slice(&whole);
            out.push(s);
        }
    }
    out.push(vec![2u8; 48]);
    out
}
