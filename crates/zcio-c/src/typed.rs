//! Typed messages (`zcio::typed` for C): a C struct sent with the same
//! 128-byte type tag a Rust `TypedBuf` writes, and read back checked
//! against it (size, alignment, name, schema) into the caller's memory.

use std::ffi::{c_char, c_int, c_void};

use crate::chan::{chan, send_copy, zcio_channel};
use crate::error::{einval, fail, fail_msg, guard};
use crate::msg::zcio_msg;
use crate::pool::copy_pool;
use crate::typetag::{Layout, Refused};
use crate::{ssize_t, str_arg, Timeout};

/// A type as both sides of a typed message describe it: the C mirror of a
/// Rust `zcio::typed::Tag` plus the layout of `T`. Fill it the same way on
/// both sides, e.g. `{ "example.Reading", 1, sizeof(struct reading),
/// _Alignof(struct reading), 0 }`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct zcio_type {
    /// The tag's name (UTF-8, NUL-terminated), or NULL for an untagged
    /// message (only its length is then checked).
    pub name: *const c_char,
    /// The sender's version of the type (Rust's `Tag::new(name, schema)`).
    pub schema: u32,
    /// `sizeof` the type; for a type ending in a flexible array member,
    /// its size with no elements.
    pub size: usize,
    /// `_Alignof` the type (a power of two).
    pub align: usize,
    /// 0 for a fixed-size type; for a type ending in a flexible array
    /// member, the bytes each element adds (a multiple of `align`: no
    /// padding at any length, as Rust requires).
    pub elem_size: usize,
}

/// The layout behind `ty`, checked.
///
/// # Safety
/// `ty` is NULL or points to a `zcio_type` whose `name` is NULL or a
/// NUL-terminated string.
unsafe fn layout<'a>(ty: *const zcio_type, who: &str) -> Result<Layout<'a>, c_int> {
    // SAFETY: the caller's contract.
    let Some(t) = (unsafe { ty.as_ref() }) else {
        return Err(einval(format_args!("{who}: ty is NULL")));
    };
    let name = if t.name.is_null() {
        None
    } else {
        // SAFETY: non-NULL, NUL-terminated (contract).
        Some(unsafe { str_arg(t.name, "ty->name") }?)
    };
    let l = Layout {
        name,
        schema: t.schema,
        size: t.size,
        align: t.align,
        elem_size: t.elem_size,
    };
    l.validate()
        .map_err(|e| einval(format_args!("{who}: {e}")))?;
    Ok(l)
}

/// The code of a refused message: `-EINVAL` for the caller's description,
/// `-EBADMSG` (the code of `zcio::ErrorKind::Malformed`) for the rest.
fn refuse(who: &str, r: Refused) -> c_int {
    match r {
        Refused::BadLayout(_) => einval(format_args!("{who}: {r}")),
        r => fail_msg(libc::EBADMSG, format_args!("{who}: {r}")),
    }
}

/// Write the bytes that go before a typed payload — the 128-byte type tag
/// and zeros up to the payload's offset, `max(128, ty->align)` — into
/// `out[0..cap]`, and return that offset (0 for an untagged `ty`, whose
/// payload starts the message). For the reserve→fill→send shape:
/// `zcio_buf_alloc` offset + `ty->size` bytes, write the tag with this
/// call, fill the value at data + offset, `zcio_send`. Returns `-EINVAL`
/// (NULL, an invalid `ty`) or `-ENOBUFS` (`cap` smaller than the offset:
/// call with `cap` 0 to ask).
///
/// # Safety
/// `ty` as for `zcio_send_typed`; `out` is valid for writing `cap` bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_type_tag(
    ty: *const zcio_type,
    out: *mut c_void,
    cap: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let l = match unsafe { layout(ty, "zcio_type_tag") } {
            Ok(l) => l,
            Err(e) => return e as ssize_t,
        };
        let head = l.header();
        if head.is_empty() {
            return 0;
        }
        if out.is_null() || cap < head.len() {
            return fail_msg(
                libc::ENOBUFS,
                format_args!("zcio_type_tag: the tag needs {} bytes", head.len()),
            ) as ssize_t;
        }
        // SAFETY: `out` is writable for `cap >= head.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(head.as_ptr(), out.cast::<u8>(), head.len()) };
        head.len() as ssize_t
    })
}

/// Send the value at `value` (`len` bytes: `ty->size`, or `ty->size + n ×
/// ty->elem_size` for a type ending in a flexible array member) as a typed
/// message: the type tag of `ty` (none if `ty->name` is NULL) then a copy
/// of the value, in one buffer of the channel's own pool. A Rust receiver
/// reads it with `Msg::read_typed::<T>(Some(&Tag::new(name, schema)))`
/// when `T` has the same layout. `timeout_ms` as for `zcio_send_bytes`.
/// Returns 0, `-EINVAL` (NULL, an invalid `ty`, `len` not a size of the
/// type), or the errors of `zcio_send_bytes`. The struct must have no
/// padding bytes (add explicit reserved fields, zeroed): every byte of
/// `value` is sent.
///
/// # Safety
/// `ch` is NULL or a live channel; `ty` is NULL or a valid `zcio_type`
/// (`name` NULL or NUL-terminated); `value` is valid for reading `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn zcio_send_typed(
    ch: *mut zcio_channel,
    ty: *const zcio_type,
    value: *const c_void,
    len: usize,
    timeout_ms: c_int,
) -> c_int {
    guard(|| {
        // SAFETY: the caller's contract.
        let c = match unsafe { chan(ch) } {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: the caller's contract.
        let l = match unsafe { layout(ty, "zcio_send_typed") } {
            Ok(l) => l,
            Err(e) => return e,
        };
        if !l.payload_fits(len) || len > isize::MAX as usize {
            return einval(format_args!(
                "zcio_send_typed: len {len} is not a size of the type (size {}, elem_size {})",
                l.size, l.elem_size
            ));
        }
        if value.is_null() && len > 0 {
            return einval("zcio_send_typed: value is NULL");
        }
        let head = l.header();
        let total = head.len() + len;
        let pool = c.copies.get_or_init(copy_pool);
        let t = Timeout::from_ms(timeout_ms);
        let buf = match t {
            Timeout::Default => pool.alloc(total),
            Timeout::No => pool.try_alloc(total),
            Timeout::For(d) => pool.alloc_timeout(total, d),
        };
        let mut buf = match buf {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        buf.truncate(total);
        let bytes = buf.as_mut_slice();
        bytes[..head.len()].copy_from_slice(&head);
        if len > 0 {
            // `value` may point into memory a peer can write: copied with
            // raw pointers, never borrowed.
            // SAFETY: `value` is readable for `len` bytes (contract); the
            // destination is this fresh buffer's last `len` bytes.
            unsafe {
                zcio::copy_raw(value.cast::<u8>(), bytes[head.len()..].as_mut_ptr(), len);
            }
        }
        send_copy(&c.ch, buf, t)
    })
}

/// Read a typed message: check its type tag against `ty` (or, for an
/// untagged `ty`, only its length), then copy the payload into
/// `out[0..cap]` and return the payload's length. The tag is read once
/// into a private copy and the payload copied once, so what you get
/// cannot change afterwards even if the message is volatile.
///
/// C cannot validate the value for you: the bytes are checked for type
/// (tag) and size only. A `bool`, an enum, an index or a length in them is
/// whatever the sender wrote: check each such field of your copy before
/// you rely on it (a Rust receiver's `read_typed` does this for `bool`
/// and enums).
///
/// Errors: `-EINVAL` (NULL, an invalid `ty`), `-EBADMSG` (no tag where
/// `ty` has a name, a corrupt tag, another type or version of it, or a
/// payload that is not a size of the type; `zcio_last_error` says which,
/// naming both types on a mismatch), `-ENOBUFS` (`cap` smaller than the
/// payload, which is at most `zcio_msg_len` bytes; nothing is copied).
///
/// # Safety
/// `msg` is NULL or a live message; `ty` as for `zcio_send_typed`; `out`
/// is valid for writing `cap` bytes (it may be shared memory: it is only
/// written through raw pointers).
#[no_mangle]
pub unsafe extern "C" fn zcio_msg_read_typed(
    msg: *const zcio_msg,
    ty: *const zcio_type,
    out: *mut c_void,
    cap: usize,
) -> ssize_t {
    guard(|| {
        // SAFETY: the caller's contract.
        let Some(m) = (unsafe { msg.as_ref() }).map(|m| &m.msg) else {
            return einval("zcio_msg_read_typed: msg is NULL") as ssize_t;
        };
        // SAFETY: the caller's contract.
        let l = match unsafe { layout(ty, "zcio_msg_read_typed") } {
            Ok(l) => l,
            Err(e) => return e as ssize_t,
        };
        let msg_len = m.len();
        let mut head = [0u8; zcio::typed::Tag::LEN];
        let got = m.read_at(0, &mut head);
        let (off, len) = match l.check(&head[..got], msg_len) {
            Ok(v) => v,
            Err(r) => return refuse("zcio_msg_read_typed", r) as ssize_t,
        };
        if len > cap {
            return fail_msg(
                libc::ENOBUFS,
                format_args!("zcio_msg_read_typed: the payload has {len} bytes, out only {cap}"),
            ) as ssize_t;
        }
        if len == 0 {
            return 0;
        }
        if out.is_null() {
            return einval("zcio_msg_read_typed: out is NULL") as ssize_t;
        }
        // Copied out once into our own bytes, then written to `out` with
        // raw pointers: no Rust reference is made over the caller's
        // memory (it might be a mapping another process can write).
        let mut payload = vec![0u8; len];
        let n = m.read_at(off, &mut payload);
        // SAFETY: `out` is writable for `cap >= len >= n` bytes (contract);
        // `payload` is ours and does not overlap it.
        unsafe { zcio::copy_raw(payload.as_ptr(), out.cast::<u8>(), n) };
        n as ssize_t
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zcio::typed::Tag;
    use zcio::{Channel, ChannelConfig, Pool, PoolConfig};
    use zerocopy::{FromZeros, Immutable, IntoBytes, KnownLayout};

    /// The type of the C and Python tests, on the Rust side.
    #[derive(FromZeros, IntoBytes, KnownLayout, Immutable, Debug, PartialEq, Clone, Copy)]
    #[repr(C)]
    struct Reading {
        seq: u32,
        ok: bool,
        kind: u8,
        reserved: [u8; 2],
        value: f64,
    }

    #[derive(FromZeros, IntoBytes, KnownLayout, Immutable)]
    #[repr(C)]
    struct Frame {
        width: u32,
        height: u32,
        pixels: [[u8; 4]],
    }

    fn reading() -> Layout<'static> {
        Layout {
            name: Some("example.Reading"),
            schema: 1,
            size: 16,
            align: 8,
            elem_size: 0,
        }
    }

    fn pool() -> Pool {
        Pool::new(PoolConfig {
            chunk_size: 1 << 20,
            max_chunks: 2,
            populate: false,
            ..PoolConfig::named("zcio-c-typed-test")
        })
    }

    #[test]
    fn the_tag_is_byte_for_byte_the_rust_one() {
        let p = pool();
        let tag = Tag::new("example.Reading", 1);
        let mut r = p.alloc_typed::<Reading>(Some(&tag)).unwrap();
        r.seq = 7;
        r.ok = true;
        r.value = 2.5;
        let bytes = r.into_msg().unwrap().to_vec();
        assert_eq!(&bytes[..128], &reading().header()[..]);
        assert_eq!(reading().check(&bytes[..128], bytes.len()), Ok((128, 16)));
        // A type ending in a slice.
        let ftag = Tag::new("doc.Frame", 2);
        let f = p.alloc_typed_elems::<Frame>(3, Some(&ftag)).unwrap();
        let fb = f.into_msg().unwrap().to_vec();
        let fl = Layout {
            name: Some("doc.Frame"),
            schema: 2,
            size: 8,
            align: 4,
            elem_size: 4,
        };
        assert_eq!(&fb[..128], &fl.header()[..]);
        assert_eq!(fl.check(&fb[..128], fb.len()), Ok((128, 20)));
    }

    #[test]
    fn rust_reads_what_the_c_api_sends_and_refuses_another_type() {
        let (tx, rx) = Channel::pair(ChannelConfig::default()).unwrap();
        let tx = Box::into_raw(Box::new(zcio_channel {
            ch: tx,
            copies: Default::default(),
        }));
        let value = Reading {
            seq: 9,
            ok: true,
            kind: 3,
            reserved: [0; 2],
            value: -1.5,
        };
        let ty = zcio_type {
            name: c"example.Reading".as_ptr(),
            schema: 1,
            size: 16,
            align: 8,
            elem_size: 0,
        };
        let v = (&raw const value).cast::<c_void>();
        // SAFETY: live channel, valid type, `value` readable for 16 bytes.
        unsafe {
            assert_eq!(zcio_send_typed(tx, &ty, v, 16, 1000), 0);
            assert_eq!(zcio_send_typed(tx, &ty, v, 16, 1000), 0);
            assert_eq!(zcio_send_typed(tx, &ty, v, 15, 1000), -libc::EINVAL);
        }
        let m = rx.recv().unwrap();
        let tag = Tag::new("example.Reading", 1);
        assert_eq!(m.read_typed::<Reading>(Some(&tag)).unwrap(), value);
        let e = m.read_typed::<Reading>(Some(&Tag::new("example.Reading", 2)));
        assert!(e.unwrap_err().to_string().contains("v1"));
        // And back through the C reader.
        let cm = zcio_msg {
            msg: rx.recv().unwrap(),
        };
        let mut out = [0u8; 32];
        let other = zcio_type { schema: 2, ..ty };
        // SAFETY: live message, valid types, `out` writable for 32 bytes.
        unsafe {
            let o = out.as_mut_ptr().cast();
            assert_eq!(zcio_msg_read_typed(&cm, &ty, o, 32), 16);
            assert_eq!(
                zcio_msg_read_typed(&cm, &ty, o, 8),
                -libc::ENOBUFS as ssize_t
            );
            assert_eq!(
                zcio_msg_read_typed(&cm, &other, o, 32),
                -libc::EBADMSG as ssize_t
            );
            drop(Box::from_raw(tx));
        }
        assert_eq!(&out[..16], value.as_bytes());
    }

    #[test]
    fn corrupt_and_missing_tags_are_refused() {
        let l = reading();
        let mut h = l.header();
        assert_eq!(l.check(&h[..64], 64), Err(Refused::MissingTag(64)));
        h[0] = b'X';
        assert_eq!(l.check(&h, 144), Err(Refused::MissingTag(144)));
        let mut h = l.header();
        h[52] = 1;
        assert!(matches!(l.check(&h, 144), Err(Refused::CorruptTag(_))));
        let mut h = l.header();
        h[60] ^= 1; // the name no longer matches its hash
        assert!(matches!(l.check(&h, 144), Err(Refused::CorruptTag(_))));
        let h = l.header();
        assert!(matches!(
            l.check(&h, 150),
            Err(Refused::Size { len: 22, .. })
        ));
        let wrong = Layout { size: 24, ..l };
        let e = wrong.check(&h, 144).unwrap_err().to_string();
        assert!(e.contains("`example.Reading` v1 (size 16, align 8)"), "{e}");
        assert!(Layout { align: 3, ..l }.validate().is_err());
    }
}
