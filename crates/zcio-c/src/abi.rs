//! The size rule of the C ABI (docs/c.md, "The ABI: structs grow, sizes
//! travel"): every struct the library reads from or writes into the
//! caller's memory arrives with the caller's `sizeof` (a size argument, or
//! for a configuration its leading `size` field, which `_init` sets), and:
//!
//! - fields are only ever appended, so a smaller struct is a prefix;
//! - the library writes at most the caller's size: a smaller (older)
//!   struct gets the prefix it knows, a larger (newer) one gets zeros past
//!   the fields this library knows;
//! - the library reads at most the caller's size: fields a smaller struct
//!   lacks keep their defaults; a larger struct must hold zeros past the
//!   fields this library knows (the rule of Linux's openat2/clone3: a
//!   field this library does not know was set, and it cannot honour it);
//! - a size below the struct's first version, or above [`MAX_SIZE`], is
//!   `-EINVAL` and `zcio_last_error` says what to pass.

use std::ffi::c_int;
use std::mem::size_of;

use crate::error::einval;

/// No struct of the C API will ever be larger: a bigger size is a bug (a
/// length passed for a size), not a newer header.
pub(crate) const MAX_SIZE: usize = 4096;

/// A struct that crosses the C ABI with the caller's `sizeof`.
pub(crate) trait Extensible: Copy {
    /// Its C name, for messages.
    const NAME: &'static str;
    /// Its size in its first version: the smallest size any program was
    /// built with. Never changes when fields are appended.
    const V1: usize;
}

/// A configuration struct whose first field is `size_t size`, the caller's
/// `sizeof` recorded by its `_init`.
pub(crate) trait SizedConfig: Extensible {}

/// Implement [`Extensible`] (and with `config`, [`SizedConfig`]) for C
/// structs, pinning their first-version size.
macro_rules! extensible {
    ($($t:ident = $v1:literal $(, $config:ident)?;)*) => {$(
        impl crate::abi::Extensible for $t {
            const NAME: &'static str = concat!("struct ", stringify!($t));
            const V1: usize = $v1;
        }
        const _: () = assert!($v1 <= std::mem::size_of::<$t>() && $v1 <= crate::abi::MAX_SIZE);
        $(extensible!(@$config $t);)?
    )*};
    (@config $t:ident) => {
        impl crate::abi::SizedConfig for $t {}
        const _: () = assert!(std::mem::offset_of!($t, size) == 0);
    };
}

/// Every struct under the rule, with the size of its first version (the
/// size on the day it came under the rule; docs/c.md, "The ABI"). When you
/// append a field, leave the number: it is what programs built before say.
mod table {
    use crate::chan::{zcio_channel_config, zcio_channel_stats};
    use crate::lane::zcio_lane_stats;
    use crate::pool::{zcio_huge_pages, zcio_pool_config, zcio_pool_stats};
    use crate::proxy::{zcio_proxy_config, zcio_proxy_endpoint_stats, zcio_proxy_stats};
    use crate::relay::{zcio_forward_config, zcio_forward_report};
    use crate::rendezvous::{zcio_rendezvous_config, zcio_rendezvous_stats};
    use crate::ring::{zcio_ring_counters, zcio_ring_stats};
    use crate::ring_create::zcio_ring_options;
    use crate::ring_info::{zcio_ring_consumer_info, zcio_ring_stat_info};
    use crate::semantics::{zcio_semantic_config, zcio_semantic_stats};
    use crate::splice::{zcio_assoc_stats, zcio_assoc_status};

    extensible! {
        zcio_channel_config = 120, config;
        zcio_channel_stats = 192;
        zcio_lane_stats = 104;
        zcio_pool_config = 64, config;
        zcio_pool_stats = 104;
        zcio_huge_pages = 24;
        zcio_proxy_config = 40, config;
        zcio_proxy_stats = 40;
        zcio_proxy_endpoint_stats = 40;
        zcio_forward_config = 32, config;
        zcio_forward_report = 40;
        zcio_rendezvous_config = 24, config;
        zcio_rendezvous_stats = 80;
        zcio_ring_stats = 64;
        zcio_ring_counters = 96;
        zcio_ring_options = 40;
        zcio_ring_stat_info = 120;
        zcio_ring_consumer_info = 72;
        zcio_semantic_config = 48, config;
        zcio_semantic_stats = 104;
        zcio_assoc_status = 72;
        zcio_assoc_stats = 40;
    }

    #[cfg(feature = "bridge")]
    use crate::bridge::{zcio_bridge_counters, zcio_bridge_session};
    #[cfg(feature = "bridge")]
    extensible! {
        zcio_bridge_session = 104;
        zcio_bridge_counters = 80;
    }
}

/// `-EINVAL` unless `size` is in `T::V1..=MAX_SIZE`.
pub(crate) fn check_size<T: Extensible>(call: &str, size: usize) -> Result<(), c_int> {
    if size < T::V1 {
        Err(einval(format_args!(
            "{call}: size {size} is smaller than {} has ever been ({} bytes): \
             pass sizeof your struct (the header's macros do)",
            T::NAME,
            T::V1
        )))
    } else if size > MAX_SIZE {
        Err(einval(format_args!(
            "{call}: size {size} of {} is larger than {MAX_SIZE}: pass sizeof your struct",
            T::NAME
        )))
    } else {
        Ok(())
    }
}

/// Copy `v` into the caller's `size` bytes at `out`: the prefix that fits,
/// then zeros up to `size` if the caller's struct is newer than ours.
/// Returns 0 or `-EINVAL` (NULL `out`, a size out of range; nothing is
/// written then).
///
/// # Safety
/// `out` is NULL or valid for writing `size` bytes, and does not overlap
/// `v`.
pub(crate) unsafe fn put<T: Extensible>(call: &str, v: &T, out: *mut T, size: usize) -> c_int {
    if out.is_null() {
        return einval(format_args!("{call}: out is NULL"));
    }
    if let Err(e) = check_size::<T>(call, size) {
        return e;
    }
    let n = size.min(size_of::<T>());
    let out = out.cast::<u8>();
    // SAFETY: `v` is at least `n` bytes; `out` is valid for `size` ≥ `n`
    // bytes (contract); they do not overlap (contract).
    unsafe { std::ptr::copy_nonoverlapping((v as *const T).cast::<u8>(), out, n) };
    // SAFETY: `out + n .. out + size` is within the caller's `size` bytes.
    unsafe { std::ptr::write_bytes(out.add(n), 0, size - n) };
    0
}

/// [`put`] for a configuration: also records `size` in its leading `size`
/// field, so the struct can be passed back to the calls that read it.
///
/// # Safety
/// As [`put`].
pub(crate) unsafe fn put_config<T: SizedConfig>(
    call: &str,
    v: &T,
    out: *mut T,
    size: usize,
) -> c_int {
    // SAFETY: the caller's contract is `put`'s.
    let rc = unsafe { put(call, v, out, size) };
    if rc == 0 {
        // SAFETY: `size` ≥ V1 ≥ the leading `size_t` (offset 0, asserted by
        // `extensible!`), and `out` is valid for `size` bytes.
        unsafe { out.cast::<usize>().write_unaligned(size) };
    }
    rc
}

/// The caller's struct at `p`, `size` bytes of it: fields past a smaller
/// struct keep `defaults`; a larger struct must be zero past ours.
/// NULL `p` is `-EINVAL` (callers that allow NULL check first).
///
/// # Safety
/// `p` is NULL or valid for reading `size` bytes, which nothing writes during the call.
pub(crate) unsafe fn take<T: Extensible>(
    call: &str,
    p: *const T,
    size: usize,
    defaults: T,
) -> Result<T, c_int> {
    if p.is_null() {
        return Err(einval(format_args!("{call}: {} is NULL", T::NAME)));
    }
    check_size::<T>(call, size)?;
    let ours = size_of::<T>();
    let bytes = p.cast::<u8>();
    if size > ours {
        // SAFETY: `p` is valid for `size` bytes (contract): the caller's own configuration
        // struct, which the contract also says nothing changes during the call (it is the
        // caller's argument, not memory a peer shares), so no other process writes these
        // bytes while the slice lives; the slice is read once, then dropped.
        let tail = unsafe { std::slice::from_raw_parts(bytes.add(ours), size - ours) };
        if let Some(i) = tail.iter().position(|&b| b != 0) {
            return Err(einval(format_args!(
                "{call}: byte {} of {} is not zero, but this libzcio's struct ends at byte \
                 {ours}: the program sets a field this library does not know (link a \
                 libzcio at least as new as the header it was built with, or leave the \
                 field zero)",
                ours + i,
                T::NAME
            )));
        }
    }
    let mut v = defaults;
    // SAFETY: `p` is valid for `size` ≥ `min(size, ours)` bytes, `v` is a
    // local of `ours` bytes; they do not overlap.
    unsafe { std::ptr::copy_nonoverlapping(bytes, (&raw mut v).cast::<u8>(), size.min(ours)) };
    Ok(v)
}

/// [`take`] for a configuration, the size read from its leading `size`
/// field (which `_init` set). A struct never passed through `_init`
/// usually holds a size out of range: `-EINVAL`, saying so.
///
/// # Safety
/// `p` is NULL or points to a `size_t` that gives how many bytes at `p`
/// are valid for reading.
pub(crate) unsafe fn take_config<T: SizedConfig>(
    call: &str,
    p: *const T,
    defaults: T,
) -> Result<T, c_int> {
    if p.is_null() {
        return Err(einval(format_args!("{call}: {} is NULL", T::NAME)));
    }
    // SAFETY: the leading `size_t` is readable (contract).
    let size = unsafe { p.cast::<usize>().read_unaligned() };
    if !(T::V1..=MAX_SIZE).contains(&size) {
        return Err(einval(format_args!(
            "{call}: {}.size is {size}: fill the struct with its _init call first \
             (it records sizeof the struct there)",
            T::NAME
        )));
    }
    // SAFETY: `p` is valid for `size` bytes (contract).
    let mut v = unsafe { take(call, p, size, defaults) }?;
    // SAFETY: `v` is a local whose leading field is the `size_t` (asserted
    // by `extensible!`).
    unsafe { (&raw mut v).cast::<usize>().write_unaligned(size_of::<T>()) };
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version 2 of a struct whose version 1 ended after `b`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct zcio_test_cfg {
        size: usize,
        a: u32,
        b: u32,
        c: u64,
    }
    extensible!(zcio_test_cfg = 16, config;);

    const V2: zcio_test_cfg = zcio_test_cfg {
        size: 24,
        a: 1,
        b: 2,
        c: 3,
    };

    #[test]
    fn an_old_program_gets_the_prefix_and_nothing_past_it() {
        let mut buf = [0xeeu8; 40];
        // SAFETY: `buf` holds 40 bytes.
        let rc = unsafe { put_config("t", &V2, buf.as_mut_ptr().cast(), 16) };
        assert_eq!(rc, 0);
        assert_eq!(&buf[..8], &16usize.to_ne_bytes());
        assert_eq!(&buf[8..12], &1u32.to_ne_bytes());
        assert_eq!(&buf[12..16], &2u32.to_ne_bytes());
        assert!(buf[16..].iter().all(|&b| b == 0xee));
        // Read back: the missing field keeps its default.
        let d = zcio_test_cfg { c: 99, ..V2 };
        // SAFETY: `buf` holds 40 bytes, its `size` says 16.
        let got = unsafe { take_config("t", buf.as_ptr().cast::<zcio_test_cfg>(), d) }.unwrap();
        assert_eq!(
            got,
            zcio_test_cfg {
                size: 24,
                c: 99,
                ..V2
            }
        );
    }

    #[test]
    fn a_newer_program_gets_zeros_and_must_leave_them() {
        let mut buf = [0xeeu8; 40];
        // SAFETY: `buf` holds 40 bytes.
        assert_eq!(unsafe { put("t", &V2, buf.as_mut_ptr().cast(), 32) }, 0);
        assert!(buf[24..32].iter().all(|&b| b == 0));
        assert!(buf[32..].iter().all(|&b| b == 0xee));
        // SAFETY: as above.
        let got = unsafe { take("t", buf.as_ptr().cast::<zcio_test_cfg>(), 32, V2) };
        assert_eq!(got.unwrap().c, 3);
        buf[30] = 1;
        // SAFETY: as above.
        let got = unsafe { take("t", buf.as_ptr().cast::<zcio_test_cfg>(), 32, V2) };
        assert_eq!(got, Err(-libc::EINVAL));
    }

    #[test]
    fn sizes_out_of_range_write_nothing() {
        let mut buf = [0xeeu8; 40];
        for size in [0, 15, MAX_SIZE + 1] {
            // SAFETY: nothing is written for these sizes (what is tested).
            let rc = unsafe { put("t", &V2, buf.as_mut_ptr().cast(), size) };
            assert_eq!(rc, -libc::EINVAL);
        }
        assert!(buf.iter().all(|&b| b == 0xee));
        // SAFETY: a NULL out is refused before any write.
        let rc = unsafe { put("t", &V2, std::ptr::null_mut(), 24) };
        assert_eq!(rc, -libc::EINVAL);
        buf[..8].copy_from_slice(&0usize.to_ne_bytes());
        // SAFETY: `buf` holds 40 bytes.
        let got = unsafe { take_config("t", buf.as_ptr().cast::<zcio_test_cfg>(), V2) };
        assert_eq!(got, Err(-libc::EINVAL));
    }
}
