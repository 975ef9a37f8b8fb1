//! Copying bytes into and out of shared memory.
//!
//! Two copies live here, and every path that moves payload bytes between
//! private and shared memory uses one of them:
//!
//! - [`copy_volatile`] reads a source another process may be writing (a
//!   ring block, a volatile buffer) with volatile loads, so each byte is
//!   read exactly once and "copy out, then validate" holds.
//! - [`copy`] / [`copy_raw`] copy the caller's own bytes *into* shared
//!   memory. They are `memcpy`, except where `memcpy` falls off a cliff:
//!   glibc (2.36 here) copies blocks of a few KiB with `rep movsb`, and on
//!   AMD Zen cores with FSRM `rep movsb` runs about 20× slower when the
//!   destination lies just ahead of the source modulo 4 KiB (measured on
//!   this project's machine: 16 KiB took 5.9 µs instead of 0.3 µs whenever
//!   `(dst - src) mod 4096` was 8..=24; glibc bug 30994 describes the same
//!   class). A ring's write position moves with every block and a caller's
//!   buffer sits wherever `malloc` put it, so a producer could land in that
//!   window for a whole run: the C ring benchmark did, at 0.07× of Rust.
//!   Inside the window we copy with our own vector loop instead.

use std::ptr;

/// Below this, glibc's `memcpy` does not use `rep movsb` (its threshold is
/// 2 KiB × vector width / 16, so 2 KiB at the least).
const REP_MOVSB_MIN: usize = 2048;

/// `(dst - src) mod 4 KiB` below this (and not 0) is the cliff window;
/// measured 8..=24, widened to a cache line.
const ALIAS_WINDOW: usize = 64;

/// Copy `src` into `dst` (equal lengths) as fast as this machine allows,
/// avoiding `memcpy`'s 4 KiB-aliasing cliff (see the module docs). Use it
/// to fill shared memory from your own bytes, e.g. a pool buffer's
/// `as_mut_slice()`.
///
/// # Panics
/// If the lengths differ (as `<[u8]>::copy_from_slice`).
pub fn copy(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "zcio::copy: lengths differ");
    // SAFETY: both slices are valid for their (equal) length, and a `&mut`
    // cannot overlap a `&`.
    unsafe { copy_raw(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// [`copy`] through raw pointers (for frontends that hold a foreign
/// buffer's address, not a slice).
///
/// # Safety
/// `[src, src + n)` must be readable and not written during the call;
/// `[d, d + n)` must be writable through this pointer (no live Rust
/// reference to it elsewhere); the two must not overlap.
pub unsafe fn copy_raw(src: *const u8, d: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let dist = (d as usize).wrapping_sub(src as usize) & 4095;
        if n >= REP_MOVSB_MIN && dist != 0 && dist < ALIAS_WINDOW {
            // Our own loop: volatile loads of a source nobody writes are
            // plain loads, and it never uses `rep movsb`.
            // SAFETY: the caller's contract covers copy_volatile's.
            unsafe { copy_volatile(src, d, n) };
            return;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { ptr::copy_nonoverlapping(src, d, n) }
}

/// Copy `n` bytes from `src` to `d`, reading the source only with
/// volatile loads (each source byte is read exactly once, and the compiler
/// can neither re-read nor elide a read). Wide aligned loads in the middle
/// keep it close to `memcpy`.
///
/// # Safety
/// `[src, src + n)` must be mapped readable; it may be written concurrently
/// by another process (the copy then holds some mix of old and new bytes —
/// callers that care validate the copy, e.g. with a seqlock). `[d, d + n)`
/// must be writable through this raw pointer (no live Rust reference to
/// it elsewhere) and must not overlap the source.
pub unsafe fn copy_volatile(src: *const u8, d: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if n >= 256 && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above); the caller's
        // contract is passed on unchanged.
        unsafe { copy_volatile_avx2(src, d, n) };
        return;
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { copy_volatile_sse(src, d, n) }
}

/// [`copy_volatile`] with 32-byte loads (AVX2), as fast as `memcpy` for
/// blocks in cache.
///
/// # Safety
/// As [`copy_volatile`], and the CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn copy_volatile_avx2(src: *const u8, d: *mut u8, n: usize) {
    use std::arch::x86_64::__m256i;
    let mut i = 0;
    // Head: bytes until the source is 32-byte aligned.
    let head = (src as usize).wrapping_neg() % 32;
    while i < head.min(n) {
        // SAFETY: i < n: inside both ranges.
        unsafe { d.add(i).write(src.add(i).read_volatile()) };
        i += 1;
    }
    while i + 128 <= n {
        // SAFETY: src + i is 32-byte aligned (head loop) and the 128 bytes
        // are inside both ranges; stores are unaligned.
        unsafe {
            let s = src.add(i).cast::<__m256i>();
            let a = s.read_volatile();
            let b = s.add(1).read_volatile();
            let c = s.add(2).read_volatile();
            let e = s.add(3).read_volatile();
            let o = d.add(i).cast::<__m256i>();
            o.write_unaligned(a);
            o.add(1).write_unaligned(b);
            o.add(2).write_unaligned(c);
            o.add(3).write_unaligned(e);
        }
        i += 128;
    }
    // SAFETY: the rest is inside both ranges (i <= n).
    unsafe { copy_volatile_sse(src.add(i), d.add(i), n - i) };
}

/// [`copy_volatile`] with 16-byte loads (every x86_64 and other targets).
///
/// # Safety
/// As [`copy_volatile`].
unsafe fn copy_volatile_sse(src: *const u8, d: *mut u8, n: usize) {
    let mut i = 0;
    // Head: bytes until the source is 16-byte aligned.
    let head = (src as usize).wrapping_neg() % 16;
    while i < head.min(n) {
        // SAFETY: i < n: inside both ranges.
        unsafe { d.add(i).write(src.add(i).read_volatile()) };
        i += 1;
    }
    // Body: aligned 16-byte volatile loads, unaligned stores.
    while i + 64 <= n {
        // SAFETY: src + i is 16-byte aligned (head loop) and the 64 bytes
        // are inside both ranges; u128 loads are 16-byte aligned here.
        unsafe {
            let s = src.add(i).cast::<u128>();
            let a = s.read_volatile();
            let b = s.add(1).read_volatile();
            let c = s.add(2).read_volatile();
            let e = s.add(3).read_volatile();
            let o = d.add(i).cast::<u128>();
            o.write_unaligned(a);
            o.add(1).write_unaligned(b);
            o.add(2).write_unaligned(c);
            o.add(3).write_unaligned(e);
        }
        i += 64;
    }
    while i + 16 <= n {
        // SAFETY: as above, one 16-byte word.
        unsafe {
            let v = src.add(i).cast::<u128>().read_volatile();
            d.add(i).cast::<u128>().write_unaligned(v);
        }
        i += 16;
    }
    // Tail.
    while i < n {
        // SAFETY: i < n: inside both ranges.
        unsafe { d.add(i).write(src.add(i).read_volatile()) };
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_volatile_matches_memcpy_at_every_alignment() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        // Under Miri: every head length (0..16), the 64-byte body loop and
        // its tail, and one copy long enough for the AVX2 loop (when the
        // target has AVX2), without the long copies.
        let lens: &[usize] = if cfg!(miri) {
            &[0, 1, 15, 16, 17, 63, 64, 65, 200, 300]
        } else {
            &[0, 1, 15, 16, 17, 63, 64, 65, 200, 900, 4099]
        };
        for off in 0..crate::testing::scaled(20, 17) {
            for &len in lens {
                let mut dst = vec![0u8; len];
                // SAFETY: off + len <= 1000.
                unsafe { copy_volatile(src.as_ptr().add(off), dst.as_mut_ptr(), len) };
                assert_eq!(dst, &src[off..off + len], "off {off} len {len}");
            }
        }
    }

    #[test]
    fn copy_matches_memcpy_in_and_out_of_the_window() {
        // Under Miri: our loop (inside the window, at the threshold) and
        // memcpy (outside it; below the threshold), without the long copies.
        let cases: Vec<(usize, usize)> = if cfg!(miri) {
            vec![(8, 2048), (64, 2048), (8, 100)]
        } else {
            let lens = [0, 100, 2047, 2048, 4099, 16384];
            [0, 1, 8, 16, 24, 63, 64, 200]
                .into_iter()
                .flat_map(|d| lens.map(|l| (d, l)))
                .collect()
        };
        let longest = cases.iter().map(|c| c.1).max().unwrap();
        let src: Vec<u8> = (0..longest as u32 + 64)
            .map(|i| (i * 13 + 5) as u8)
            .collect();
        let mut dst = vec![0u8; longest + 8192];
        let d0 = dst.as_ptr().align_offset(4096);
        let s0 = src.as_ptr().align_offset(64);
        for (dist, len) in cases {
            dst.fill(0);
            let s = &src[s0..s0 + len];
            // Place the destination `dist` bytes ahead of the source
            // modulo 4 KiB.
            let at = d0 + ((s.as_ptr() as usize + dist) & 4095);
            copy(&mut dst[at..at + len], s);
            assert_eq!(&dst[at..at + len], s, "dist {dist} len {len}");
            assert!(dst[..at].iter().all(|&b| b == 0));
            assert!(dst[at + len..].iter().all(|&b| b == 0));
        }
    }
}

#[cfg(test)]
mod speed {
    use std::time::Instant;

    #[test]
    #[ignore = "manual speed check: cargo test --release -p zcio --lib speed -- --ignored --nocapture"]
    fn copy_volatile_vs_memcpy() {
        let src = vec![7u8; 16 << 20];
        let mut dst = vec![0u8; 16 << 20];
        for _ in 0..3 {
            let t = Instant::now();
            for _ in 0..20 {
                // SAFETY: same lengths, both ours.
                unsafe { super::copy_volatile(src.as_ptr(), dst.as_mut_ptr(), dst.len()) };
            }
            let v = t.elapsed();
            let t = Instant::now();
            for _ in 0..20 {
                dst.copy_from_slice(std::hint::black_box(&src));
                std::hint::black_box(&mut dst);
            }
            let m = t.elapsed();
            let gbs = |d: std::time::Duration| 20.0 * 16.0 * 1.048576e6 / d.as_secs_f64() / 1e9;
            println!("volatile {:.1} GB/s, memcpy {:.1} GB/s", gbs(v), gbs(m));
        }
    }

    /// 16 KiB copies at every 8-byte distance modulo 4 KiB up to 128:
    /// `memcpy` against `copy` (ns per copy).
    #[test]
    #[ignore = "manual speed check: cargo test --release -p zcio --lib speed -- --ignored --nocapture"]
    fn copy_vs_memcpy_near_4k_aliasing() {
        let n = 16 << 10;
        let src = vec![1u8; n + 4096];
        let mut dst = vec![0u8; (1 << 20) + 8192];
        let s0 = src.as_ptr().align_offset(4096);
        let d0 = dst.as_ptr().align_offset(4096);
        for dist in (0..128).step_by(8) {
            let s = &src[s0..s0 + n];
            let mut time = |f: &mut dyn FnMut(&mut [u8])| {
                let t = Instant::now();
                for k in 0..2000 {
                    let at = d0 + dist + (k * n) % (1 << 20);
                    f(&mut dst[at..at + n]);
                }
                t.elapsed().as_nanos() as f64 / 2000.0
            };
            let m = time(&mut |d| d.copy_from_slice(std::hint::black_box(s)));
            let c = time(&mut |d| super::copy(d, std::hint::black_box(s)));
            println!("distance {dist:3}: memcpy {m:6.0} ns, copy {c:6.0} ns");
        }
    }
}
