//! User modules in shared objects, through the versioned C ABI of
//! `include/zcio_module.h` (`struct zcio_module_v1`, exported through
//! `zcio_module_v1_entry`).
//!
//! Input goes to the C module by pointer, in place (our immutable pool
//! bytes; a slice a peer could still write is first copied, counted).
//! Output comes back through the `emit` callback, which copies each
//! emitted range into a new pool buffer: a C module's output costs one
//! copy (counted in [`Context::copied`]). The callback never lets a panic
//! unwind into C.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

use super::{Args, Context, Flow, Module, ModuleError};
use crate::msg::Msg;

/// The ABI version this build speaks.
pub const ABI_VERSION: u32 = 1;
/// The entry point's symbol.
pub const ENTRY_SYMBOL: &str = "zcio_module_v1_entry";

/// `zcio_emit_fn`.
pub type EmitFn = unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int;
/// The table's `open`.
pub type OpenFn = unsafe extern "C" fn(*const c_char, *mut c_char, usize) -> *mut c_void;
/// The table's `put`.
pub type PutFn = unsafe extern "C" fn(*mut c_void, *const u8, usize, EmitFn, *mut c_void) -> c_int;
/// The table's `finish`.
pub type FinishFn = unsafe extern "C" fn(*mut c_void, EmitFn, *mut c_void) -> c_int;
/// The table's `control`.
pub type ControlFn =
    unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char, *mut c_char, usize) -> c_int;
/// The table's `close`.
pub type CloseFn = unsafe extern "C" fn(*mut c_void);
type EntryFn = unsafe extern "C" fn() -> *const RawModuleV1;

/// `struct zcio_module_v1`, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(missing_docs)]
pub struct RawModuleV1 {
    pub abi_version: u32,
    pub struct_size: u32,
    pub name: *const c_char,
    pub open: Option<OpenFn>,
    pub put: Option<PutFn>,
    pub finish: Option<FinishFn>,
    pub control: Option<ControlFn>,
    pub close: Option<CloseFn>,
}

/// A module's table as the host accepted it ([`check_table`]).
#[derive(Debug)]
pub struct Table {
    /// The declared name: `[A-Za-z0-9_-]`, 1 to 64 bytes.
    pub name: String,
    /// `open`.
    pub open: OpenFn,
    /// `put`.
    pub put: PutFn,
    /// `finish`, if any.
    pub finish: Option<FinishFn>,
    /// `control`, if any.
    pub control: Option<ControlFn>,
    /// `close`.
    pub close: CloseFn,
}

/// Check the table a module's entry point returned before anything in it
/// is used: not null and aligned, the ABI version this build speaks, a
/// `struct_size` no smaller than a version-1 table (both read before the
/// rest is trusted), a valid name, and `open`, `put` and `close` present.
///
/// # Safety
/// `table` is null, misaligned, or points to a readable `struct
/// zcio_module_v1` whose `name` is null or a NUL-terminated string
/// (`include/zcio_module.h`'s contract): at least its two version words,
/// and the whole table when they say version 1 and a size at least a
/// version-1 table's.
pub unsafe fn check_table(table: *const RawModuleV1) -> Result<Table, String> {
    if table.is_null() || !table.cast::<u64>().is_aligned() {
        return Err(format!(
            "{ENTRY_SYMBOL} returned a null or misaligned table"
        ));
    }
    // Read the two version words before trusting the size of the rest.
    // SAFETY: non-null and aligned (checked); the contract says it points
    // to a `struct zcio_module_v1`, whose first 8 bytes are these two u32
    // in every version.
    let (version, size) = unsafe {
        let t = table.cast::<u32>();
        (t.read(), t.add(1).read())
    };
    if version != ABI_VERSION {
        return Err(format!(
            "ABI version {version}; this zcio speaks version {ABI_VERSION} (rebuild the module against include/zcio_module.h)"
        ));
    }
    if (size as usize) < std::mem::size_of::<RawModuleV1>() {
        return Err(format!(
            "struct_size {size} is smaller than struct zcio_module_v1 ({})",
            std::mem::size_of::<RawModuleV1>()
        ));
    }
    // SAFETY: the module says (struct_size) at least this many bytes of a
    // version-1 table are there; aligned and non-null (checked).
    let raw = unsafe { table.read() };
    if raw.name.is_null() {
        return Err("the table's name is NULL".into());
    }
    // SAFETY: a non-null NUL-terminated string (contract).
    let name = unsafe { CStr::from_ptr(raw.name) };
    let name = name
        .to_str()
        .ok()
        .filter(|n| {
            !n.is_empty()
                && n.len() <= 64
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
        .ok_or_else(|| format!("invalid module name {name:?} (use [A-Za-z0-9_-], at most 64)"))?
        .to_owned();
    let (Some(open), Some(put), Some(close)) = (raw.open, raw.put, raw.close) else {
        return Err(format!(
            "module {name}: open, put and close must not be NULL"
        ));
    };
    Ok(Table {
        name,
        open,
        put,
        finish: raw.finish,
        control: raw.control,
        close,
    })
}

// The header's layout on LP64 Linux: two u32, then six pointers.
const _: () = assert!(std::mem::size_of::<RawModuleV1>() == 8 + 6 * 8);
const _: () = assert!(std::mem::align_of::<RawModuleV1>() == 8);

/// A loaded module object: the library and a copy of its table.
pub(crate) struct Library {
    name: String,
    path: String,
    open: OpenFn,
    put: PutFn,
    finish: Option<FinishFn>,
    control: Option<ControlFn>,
    close: CloseFn,
    /// Keeps the code mapped; dropped last (after every instance, which
    /// hold an `Arc<Library>`).
    _lib: libloading::Library,
}

/// A libloading error with the loader's own text (`dlerror`), which
/// libloading keeps as the error's source: "dlopen failed: …: cannot open
/// shared object file".
fn with_source(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(s) => format!("{e}: {s}"),
        None => e.to_string(),
    }
}

impl Library {
    /// Load `path` and validate its table.
    ///
    /// # Safety
    /// Loading runs the object's initialisers, and its functions are then
    /// called as `include/zcio_module.h` describes: `path` must be a zcio
    /// module that honours that contract (see [`super::Registry::load`]).
    pub(crate) unsafe fn load(path: &Path) -> Result<Self, ModuleError> {
        let shown = path.display().to_string();
        let fail = |reason: String| ModuleError::Load {
            path: shown.clone(),
            reason,
        };
        // A bare file name would make dlopen search the library path, not
        // the current directory: name it explicitly.
        let path = if path.components().count() == 1 {
            Path::new(".").join(path)
        } else {
            path.to_path_buf()
        };
        // SAFETY: the caller vouches for the object (this function's
        // contract), which covers running its initialisers.
        let lib = unsafe { libloading::Library::new(path.as_os_str()) }
            .map_err(|e| fail(with_source(&e)))?;
        // SAFETY: the symbol's type is the one the header declares for
        // `zcio_module_v1_entry` (caller's contract).
        let entry: EntryFn = unsafe { lib.get::<EntryFn>(ENTRY_SYMBOL) }
            .map(|s| *s)
            .map_err(|e| fail(format!("no {ENTRY_SYMBOL} symbol: {}", with_source(&e))))?;
        // SAFETY: calling the entry point as declared (caller's contract).
        let table = unsafe { entry() };
        // SAFETY: what the entry point returned, which the header's
        // contract (this function's) makes null or a table as
        // `check_table` requires.
        let t = unsafe { check_table(table) }.map_err(fail)?;
        Ok(Self {
            name: t.name,
            path: shown,
            open: t.open,
            put: t.put,
            finish: t.finish,
            control: t.control,
            close: t.close,
            _lib: lib,
        })
    }

    /// The name the module declared.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish()
    }
}

/// Text the C side wrote into `buf` (up to its first NUL; the last byte
/// is forced to NUL first, so an unterminated buffer cannot overrun).
pub fn c_text(buf: &mut [u8]) -> String {
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A module's return code for a message. A module may return any `int`;
/// only `-4095..=-1` name an errno (rustix's `Errno` asserts that range,
/// so nothing else may reach it).
pub fn errno_text(rc: c_int) -> String {
    match rc.checked_neg() {
        Some(e @ 1..=4095) => format!("{rc} ({})", rustix::io::Errno::from_raw_os_error(e)),
        _ => format!("{rc} (not a negative errno code)"),
    }
}

/// What `emit` works with during one call into the module.
struct EmitCtx<'c, 'a, 'o> {
    cx: &'c mut Context<'a>,
    out: &'o mut Vec<Msg>,
    error: Option<ModuleError>,
    panicked: bool,
}

/// The `emit` callback handed to C: copy `[ptr, ptr + len)` into a new
/// pool buffer and queue it as a block.
///
/// # Safety
/// `ctx` is the context [`call_module`] handed to the module for this
/// call, and `[ptr, ptr + len)` is readable for the call when `ptr` is
/// not NULL (`include/zcio_module.h`'s contract).
unsafe extern "C" fn emit(ctx: *mut c_void, ptr: *const u8, len: usize) -> c_int {
    let ctx = ctx.cast::<EmitCtx<'_, '_, '_>>();
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `ctx` is the `EmitCtx` that `call_module` passed as
        // emit_ctx for this very call, alive and not otherwise borrowed
        // while the C function runs (the header forbids keeping it).
        let ecx = unsafe { &mut *ctx };
        if ecx.error.is_some() {
            return -libc::ECANCELED;
        }
        if len == 0 {
            return 0;
        }
        if ptr.is_null() {
            ecx.error = Some(ModuleError::failed(
                ecx.cx.module_name(),
                "emit called with NULL and a non-zero length",
            ));
            return -libc::EINVAL;
        }
        let mut b = match ecx.cx.alloc(len) {
            Ok(b) => b,
            Err(e) => {
                ecx.error = Some(e);
                return -libc::ENOMEM;
            }
        };
        // SAFETY: the header's contract: `ptr` is readable for `len` bytes
        // during this call and nobody writes it meanwhile; `b` is a fresh
        // writable buffer of `len` bytes of ours, so they cannot overlap.
        unsafe { crate::copy::copy_raw(ptr, b.as_mut_ptr(), len) };
        ecx.cx.note_copy(len);
        match ecx.cx.freeze(b) {
            Ok(m) => {
                ecx.out.push(m);
                0
            }
            Err(e) => {
                ecx.error = Some(e);
                -libc::ENOMEM
            }
        }
    }));
    r.unwrap_or_else(|_| {
        // SAFETY: as above; the closure's borrow ended with the unwind.
        unsafe { (*ctx).panicked = true };
        -libc::EFAULT
    })
}

/// One call into a module, judged as the host judges whatever a module
/// does: `f` is the module's `put` or `finish`, handed the `emit`
/// callback and its context; a failed emit (a NULL range, no buffer) or
/// a panic inside it, or a non-zero return code (`-EBADMSG`: the input's
/// fault) is the call's error, and then nothing it emitted stays in
/// `out`; on success what it emitted is counted in `flow`.
pub fn call_module(
    name: &str,
    flow: &mut Flow,
    cx: &mut Context<'_>,
    out: &mut Vec<Msg>,
    what: &str,
    f: impl FnOnce(EmitFn, *mut c_void) -> c_int,
) -> Result<(), ModuleError> {
    let from = out.len();
    let mut ecx = EmitCtx {
        cx,
        out,
        error: None,
        panicked: false,
    };
    let rc = f(emit, (&raw mut ecx).cast());
    let EmitCtx {
        out,
        error,
        panicked,
        ..
    } = ecx;
    let res = if panicked {
        Err(ModuleError::failed(
            name,
            "internal error in the emit callback",
        ))
    } else if let Some(e) = error {
        Err(e)
    } else if rc == -libc::EBADMSG {
        Err(ModuleError::bad_input(
            name,
            format!("{what} rejected the input: {}", errno_text(rc)),
        ))
    } else if rc != 0 {
        Err(ModuleError::failed(
            name,
            format!("{what} returned {}", errno_text(rc)),
        ))
    } else {
        Ok(())
    };
    if res.is_err() {
        out.truncate(from);
    } else {
        flow.output(out, from);
    }
    res
}

/// A module's `open` returned NULL: its message from `err` (what it wrote
/// there, however it wrote it), or a plain one.
pub fn open_failed(name: &str, err: &mut [u8]) -> ModuleError {
    let msg = c_text(err);
    ModuleError::bad_args(
        name,
        if msg.is_empty() {
            "open failed".to_owned()
        } else {
            msg
        },
    )
}

/// A module's `control` returned `rc` after writing (or not) `reply`: the
/// reply's text, or the error.
pub fn control_reply(
    name: &str,
    key: &str,
    rc: c_int,
    reply: &mut [u8],
) -> Result<String, ModuleError> {
    match rc {
        0 => Ok(c_text(reply)),
        rc if rc == -libc::ENOENT => Err(ModuleError::control(name, key, "unknown key")),
        rc => Err(ModuleError::control(name, key, errno_text(rc))),
    }
}

/// An instance of a C module.
pub(crate) struct CModule {
    lib: Arc<Library>,
    state: NonNull<c_void>,
    flow: Flow,
}

// SAFETY: the header's contract lets an instance move between threads as
// long as one thread at a time uses it, which `&mut self` on every call
// guarantees.
unsafe impl Send for CModule {}

impl std::fmt::Debug for CModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CModule").field("lib", &self.lib).finish()
    }
}

impl CModule {
    /// Open an instance with `args`.
    pub(crate) fn open(lib: Arc<Library>, args: Args) -> Result<Self, ModuleError> {
        let text = CString::new(args.to_text())
            .map_err(|_| ModuleError::bad_args(&lib.name, "arguments contain a NUL byte"))?;
        let mut err = [0u8; 512];
        // SAFETY: `open` comes from a validated table of a library that
        // stays loaded (`lib`); the arguments are a NUL-terminated string
        // and a writable buffer of the stated length (header contract).
        let state = unsafe { (lib.open)(text.as_ptr(), err.as_mut_ptr().cast(), err.len()) };
        match NonNull::new(state) {
            Some(state) => Ok(Self {
                lib,
                state,
                flow: Flow::default(),
            }),
            None => Err(open_failed(&lib.name, &mut err)),
        }
    }

    /// Call into the module ([`call_module`]) with this instance's state.
    fn call(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
        what: &str,
        f: impl FnOnce(*mut c_void, EmitFn, *mut c_void) -> c_int,
    ) -> Result<(), ModuleError> {
        let state = self.state.as_ptr();
        call_module(
            &self.lib.name,
            &mut self.flow,
            cx,
            out,
            what,
            |emit, ecx| f(state, emit, ecx),
        )
    }
}

impl Module for CModule {
    fn name(&self) -> &str {
        &self.lib.name
    }

    fn put(
        &mut self,
        block: Msg,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError> {
        self.flow.input(&block);
        let put = self.lib.put;
        let mut scratch = Vec::new();
        for v in block.chunks() {
            let owned;
            let input: &[u8] = match v.as_slice() {
                Some(s) => s,
                None => {
                    scratch.resize(v.len(), 0);
                    v.copy_to_slice(&mut scratch);
                    cx.note_copy(v.len());
                    owned = &scratch[..];
                    owned
                }
            };
            self.call(cx, out, "put", |state, emit, ecx| {
                // SAFETY: a validated `put` of a loaded library; `state`
                // is this instance's, `input` readable for its length for
                // the call, `emit`/`ecx` as its contract requires.
                unsafe { put(state, input.as_ptr(), input.len(), emit, ecx) }
            })?;
        }
        Ok(())
    }

    fn finish(&mut self, cx: &mut Context<'_>, out: &mut Vec<Msg>) -> Result<(), ModuleError> {
        let Some(finish) = self.lib.finish else {
            return Ok(());
        };
        self.call(cx, out, "finish", |state, emit, ecx| {
            // SAFETY: as for `put`.
            unsafe { finish(state, emit, ecx) }
        })
    }

    fn control(&mut self, key: &str, value: Option<&str>) -> Result<String, ModuleError> {
        if key == "stats" && value.is_none() {
            return Ok(super::format_stats(&self.stats()));
        }
        let name = &self.lib.name;
        let Some(control) = self.lib.control else {
            return Err(ModuleError::control(
                name,
                key,
                "the module has no controls",
            ));
        };
        let nul = |_| ModuleError::control(name, key, "contains a NUL byte");
        let k = CString::new(key).map_err(nul)?;
        let v = value.map(CString::new).transpose().map_err(nul)?;
        let mut reply = [0u8; 4096];
        // SAFETY: a validated `control` of a loaded library; NUL-terminated
        // key and (optional, else NULL) value, a writable reply buffer of
        // the stated length.
        let rc = unsafe {
            control(
                self.state.as_ptr(),
                k.as_ptr(),
                v.as_ref().map_or(std::ptr::null(), |v| v.as_ptr()),
                reply.as_mut_ptr().cast(),
                reply.len(),
            )
        };
        control_reply(name, key, rc, &mut reply)
    }

    fn stats(&self) -> Vec<(&'static str, u64)> {
        self.flow.stats().to_vec()
    }
}

impl Drop for CModule {
    fn drop(&mut self) {
        // SAFETY: `close` of a loaded library (this instance holds it),
        // called exactly once for the state `open` returned.
        unsafe { (self.lib.close)(self.state.as_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::{Pool, PoolConfig};

    #[test]
    fn any_code_a_module_returns_is_an_error_not_a_panic() {
        let pool = Pool::new(PoolConfig {
            chunk_size: 1 << 20,
            populate: false,
            ..PoolConfig::named("cabi-codes")
        });
        for rc in [
            1,
            2,
            4095,
            4096,
            65536,
            -4096,
            -65536,
            c_int::MIN,
            c_int::MAX,
        ] {
            let mut cx = Context::new(&pool);
            let (mut out, mut flow) = (Vec::new(), Flow::default());
            let e = call_module("m", &mut flow, &mut cx, &mut out, "put", |_, _| rc).unwrap_err();
            assert!(
                e.to_string().contains("not a negative errno code"),
                "{rc}: {e}"
            );
            let e = control_reply("m", "k", rc, &mut [0u8; 4]).unwrap_err();
            assert!(matches!(e, ModuleError::Control { .. }), "{rc}: {e}");
        }
        assert!(errno_text(-libc::EBADMSG).contains("Bad message"));
        assert!(errno_text(-4095).starts_with("-4095 ("));
    }
}
