//! The `.so` module ABI's host side (`splice/module/cabi.rs`), over
//! whatever a module hands back — what the host must check because a
//! module is foreign code: the table its entry point returns
//! (`check_table`, which `Registry::load` calls after `dlopen`), the
//! ranges it passes to `emit` and the code it returns from `put` or
//! `finish` (`call_module`, the very function every call into a loaded
//! module goes through, with the fuzzer playing the module), the text it
//! leaves in the error buffer of a failed `open` (`open_failed`) and the
//! code and reply of `control` (`control_reply`). No shared object is
//! loaded: the fuzzer is the module.
//!
//! Invariant: no panic, whatever the module returns; a table is accepted
//! exactly when it is non-null, aligned, of ABI version 1, at least a
//! version-1 table in size, has a name of 1..=64 characters of
//! `[A-Za-z0-9_-]` and `open`, `put` and `close`; a call succeeds exactly
//! when the module returned 0 and every emit it made was accepted, and
//! then its output is exactly the non-empty ranges it emitted, in order,
//! counted in the module's flow; a failed call leaves nothing it emitted
//! behind; `emit` refuses a NULL range (-EINVAL) and, after one refusal,
//! every later call (-ECANCELED); `-EBADMSG` is the input's fault
//! (`Malformed`), any other code the module's; a reply or error text is
//! what the module wrote up to its first NUL, never past the buffer.

use std::ffi::{c_char, c_int, c_void};

use zcio::internals::splice_cabi::{
    c_text, call_module, check_table, control_reply, open_failed, RawModuleV1, ABI_VERSION,
};
use zcio::splice::module::{Context, Flow, ModuleError};
use zcio::{ErrorKind, Msg};

use crate::input::{pick_u64, record, Unstructured};
use crate::msgs;

/// The errnos the header names (Linux's numbers, through zcio's `Errno`).
const EBADMSG: c_int = zcio::Errno::BADMSG.raw_os_error();
const ENOMEM: c_int = zcio::Errno::NOMEM.raw_os_error();
const EINVAL: c_int = zcio::Errno::INVAL.raw_os_error();
const ENOENT: c_int = zcio::Errno::NOENT.raw_os_error();
const ECANCELED: c_int = zcio::Errno::CANCELED.raw_os_error();

/// `[selector][…]`: 0 a table; 1 a call (`[rc][emits…]`, each emit
/// `[kind][off u16][len u16]`, then the module's own bytes); 2 texts
/// (`open`'s error buffer, `control`'s code and reply).
pub fn run(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut u = Unstructured::new(rest);
    match sel % 3 {
        0 => table(&mut u),
        1 => call(&mut u),
        _ => texts(&mut u),
    }
}

/// Codes a module might return: success, the errnos the header names,
/// the range's ends, and what no errno is.
const CODES: [u64; 14] = [
    0,
    (-EBADMSG) as i64 as u64,
    (-ENOMEM) as i64 as u64,
    (-EINVAL) as i64 as u64,
    (-ENOENT) as i64 as u64,
    -1i64 as u64,
    -4095i64 as u64,
    -4096i64 as u64,
    1,
    4095,
    65536,
    -65536i64 as u64,
    i32::MIN as i64 as u64,
    i32::MAX as u64,
];

fn code(u: &mut Unstructured<'_>) -> c_int {
    pick_u64(u, &CODES) as i64 as c_int
}

unsafe extern "C" fn dummy_open(_: *const c_char, _: *mut c_char, _: usize) -> *mut c_void {
    std::ptr::null_mut()
}
unsafe extern "C" fn dummy_put(
    _: *mut c_void,
    _: *const u8,
    _: usize,
    _: unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int,
    _: *mut c_void,
) -> c_int {
    0
}
unsafe extern "C" fn dummy_finish(
    _: *mut c_void,
    _: unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int,
    _: *mut c_void,
) -> c_int {
    0
}
unsafe extern "C" fn dummy_control(
    _: *mut c_void,
    _: *const c_char,
    _: *const c_char,
    _: *mut c_char,
    _: usize,
) -> c_int {
    0
}
unsafe extern "C" fn dummy_close(_: *mut c_void) {}

/// `[version][size][fns][place][name len][name…]`: a table with those
/// words, those of the five functions present, at an aligned, misaligned
/// or null address. (The functions are never called.)
fn table(u: &mut Unstructured<'_>) {
    let version = pick_u64(u, &[1, 0, 2, u64::from(u32::MAX)]) as u32;
    let size = pick_u64(u, &[56, 55, 0, 64, 4096, u64::from(u32::MAX)]) as u32;
    let [fns, place, name_len] = record::<3>(u);
    let name: Option<Vec<u8>> = (name_len != 0xff).then(|| {
        let n = usize::from(name_len % 80);
        let mut v = u.bytes(n.min(u.len())).unwrap_or_default().to_vec();
        v.push(0);
        v
    });
    let raw = RawModuleV1 {
        abi_version: version,
        struct_size: size,
        name: name
            .as_ref()
            .map_or(std::ptr::null(), |n| n.as_ptr().cast()),
        open: (fns & 1 != 0).then_some(dummy_open as _),
        put: (fns & 2 != 0).then_some(dummy_put as _),
        finish: (fns & 4 != 0).then_some(dummy_finish as _),
        control: (fns & 8 != 0).then_some(dummy_control as _),
        close: (fns & 16 != 0).then_some(dummy_close as _),
    };
    // The table at byte `at` of an 8-aligned buffer (0 and 8: aligned).
    let at = usize::from(place % 9);
    let mut buf = [0u64; 9];
    let base = buf.as_mut_ptr().cast::<u8>();
    let ptr: *const RawModuleV1 = if place == 0xff {
        std::ptr::null()
    } else {
        // SAFETY: `at + size_of::<RawModuleV1>()` = at most 8 + 56 bytes
        // of a 72-byte buffer; an unaligned write is allowed anywhere.
        unsafe {
            let p = base.add(at).cast::<RawModuleV1>();
            p.write_unaligned(raw);
            p
        }
    };
    // SAFETY: null, misaligned, or a whole table whose name is null or
    // NUL-terminated (built just above).
    let got = unsafe { check_table(ptr) };
    let name_text = name
        .as_ref()
        .map(|n| &n[..n.iter().position(|&b| b == 0).unwrap_or(n.len())]);
    let good = !ptr.is_null()
        && at % 8 == 0
        && version == ABI_VERSION
        && size as usize >= size_of::<RawModuleV1>()
        && name_text.is_some_and(|n| {
            (1..=64).contains(&n.len())
                && n.iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
        && fns & (1 | 2 | 16) == (1 | 2 | 16);
    match got {
        Ok(t) => {
            assert!(good, "a bad table accepted");
            assert_eq!(Some(t.name.as_bytes()), name_text);
            assert_eq!(t.finish.is_some(), fns & 4 != 0);
            assert_eq!(t.control.is_some(), fns & 8 != 0);
        }
        Err(e) => assert!(!good, "a good table refused: {e}"),
    }
}

/// What the fuzzer, playing the module, asks `emit` to do.
#[derive(Clone, Copy, Debug)]
enum Emit {
    /// `[off, off + len)` of the module's bytes.
    Range(usize, usize),
    /// NULL with a length.
    Null(usize),
}

fn call(u: &mut Unstructured<'_>) {
    let rc = code(u);
    let n = usize::from(record::<1>(u)[0] % 9);
    let plan: Vec<(u8, usize, usize)> = (0..n)
        .map(|_| {
            let [k, o0, o1, l0, l1] = record::<5>(u);
            let off = usize::from(u16::from_le_bytes([o0, o1]));
            let len = usize::from(u16::from_le_bytes([l0, l1]));
            (k, off, len)
        })
        .collect();
    let own = u.bytes(u.len()).unwrap_or_default();
    // Ranges within the module's bytes (anything else would be a module
    // breaking the header's contract, which no host can check).
    let plan: Vec<Emit> = plan
        .into_iter()
        .map(|(k, off, len)| {
            if k % 8 == 7 {
                Emit::Null(len.max(1))
            } else {
                let off = off.min(own.len());
                Emit::Range(off, len.min(own.len() - off))
            }
        })
        .collect();

    let mut flow = Flow::default();
    let mut cx = Context::new(msgs::pool());
    // A block already in the output (an earlier call's): it must stay.
    let mut out: Vec<Msg> = vec![msgs::msg(b"earlier", &[])];
    let mut codes: Vec<c_int> = Vec::new();
    let r = call_module("fuzz", &mut flow, &mut cx, &mut out, "put", |emit, ecx| {
        for e in &plan {
            let got = match *e {
                // SAFETY: `ecx` is the context handed to this call; the
                // range lies inside `own`, readable for the call.
                Emit::Range(off, len) => unsafe { emit(ecx, own.as_ptr().add(off), len) },
                // SAFETY: as above; a NULL range is refused, not read.
                Emit::Null(len) => unsafe { emit(ecx, std::ptr::null(), len) },
            };
            codes.push(got);
        }
        rc
    });
    assert_eq!(out[0].to_vec(), b"earlier", "an earlier block touched");
    // Each emit's answer: 0 until one fails; a NULL range -EINVAL; after
    // a failure, -ECANCELED.
    let mut failed = false;
    for (e, &c) in plan.iter().zip(&codes) {
        let want = match *e {
            _ if failed => -ECANCELED,
            Emit::Null(_) => -EINVAL,
            Emit::Range(..) => 0,
        };
        assert_eq!(c, want, "emit of {e:?}");
        failed |= c != 0;
    }
    match &r {
        Ok(()) => {
            assert!(rc == 0 && !failed, "a failed call accepted");
            let want: Vec<&[u8]> = plan
                .iter()
                .filter_map(|e| match *e {
                    Emit::Range(off, len) if len > 0 => Some(&own[off..off + len]),
                    _ => None,
                })
                .collect();
            assert_eq!(out.len(), 1 + want.len(), "one block per non-empty emit");
            for (m, w) in out[1..].iter().zip(&want) {
                assert_eq!(&m.to_vec()[..], *w, "a block is what was emitted");
            }
            assert_eq!(flow.blocks_out, want.len() as u64);
            assert_eq!(
                flow.bytes_out,
                want.iter().map(|w| w.len() as u64).sum::<u64>()
            );
        }
        Err(e) => {
            assert!(rc != 0 || failed, "a good call refused: {e}");
            assert_eq!(out.len(), 1, "a failed call left output");
            assert_eq!(flow, Flow::default());
            let bad_input = !failed && rc == -EBADMSG;
            assert_eq!(matches!(e, ModuleError::BadInput { .. }), bad_input, "{e}");
            assert_eq!(e.kind() == ErrorKind::Malformed, bad_input);
            let _ = e.to_string();
        }
    }
}

/// `[rc][err…]`: a failed `open`'s error buffer, and `control`'s code and
/// reply buffer, as the module left them (NULs anywhere, or none).
fn texts(u: &mut Unstructured<'_>) {
    let rc = code(u);
    let bytes = u.bytes(u.len()).unwrap_or_default();
    let expect = |b: &[u8]| -> String {
        let Some(cut) = b.len().checked_sub(1) else {
            return String::new();
        };
        let b = &b[..cut];
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        String::from_utf8_lossy(&b[..end]).into_owned()
    };
    let mut buf = bytes.to_vec();
    assert_eq!(c_text(&mut buf), expect(bytes));
    let mut buf = bytes.to_vec();
    let e = open_failed("fuzz", &mut buf);
    assert!(matches!(e, ModuleError::BadArgs { .. }));
    let _ = e.to_string();
    let mut buf = bytes.to_vec();
    match control_reply("fuzz", "key", rc, &mut buf) {
        Ok(text) => {
            assert_eq!(rc, 0);
            assert_eq!(text, expect(bytes));
        }
        Err(e) => {
            assert_ne!(rc, 0);
            assert!(matches!(e, ModuleError::Control { .. }));
            let _ = e.to_string();
        }
    }
}

/// What real modules return: rot13's table (version 1, 56 bytes, every
/// function), a table of a later version that appended fields, tables
/// missing `finish`/`control`; calls that emit their input in one and in
/// several ranges and succeed, reject the input (-EBADMSG) or fail
/// (-ENOMEM); replies and error texts as `snprintf` writes them.
pub fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // pick_u64's first byte 0 picks from the list, the next the index.
    for (v, size, fns, name) in [
        (0u8, 0u8, 31u8, &b"rot13"[..]),
        (0, 3, 31, b"zstd_c-module"),
        (0, 0, 19, b"passthrough"),
    ] {
        let mut s = vec![0u8, 0, v, 0, size, fns, 0, name.len() as u8];
        s.extend_from_slice(name);
        out.push(s);
    }
    let data = b"Uryyb, jbeyq! uryyb ntnva";
    for (rc, emits) in [
        (0u8, &[(0u8, 0u16, 25u16)][..]),
        (0, &[(0, 0, 5), (0, 5, 0), (0, 5, 20)]),
        (1, &[(0, 0, 10)]),
        (2, &[]),
        (0, &[(0, 0, 3), (7, 0, 4), (0, 3, 3)]),
    ] {
        let mut s = vec![1u8, 0, rc, emits.len() as u8];
        for &(k, off, len) in emits {
            s.push(k);
            s.extend_from_slice(&off.to_le_bytes());
            s.extend_from_slice(&len.to_le_bytes());
        }
        s.extend_from_slice(data);
        out.push(s);
    }
    for (rc, text) in [
        (0u8, &b"shift=13\0"[..]),
        (4, b"unknown key\0\0\0\0"),
        (3, b"shift: expected 1..25\0garbage after"),
    ] {
        let mut s = vec![2u8, 0, rc];
        s.extend_from_slice(text);
        out.push(s);
    }
    out
}
