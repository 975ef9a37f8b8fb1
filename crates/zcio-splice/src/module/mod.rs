//! Processing modules: the [`Module`] trait, a per-association [`Stack`],
//! the [`Registry`] of modules by name, and the built-in modules.
//!
//! A module sits on an association's buffer path (Fall's PPIO modules,
//! after Streams): it is given one block at a time — a [`Msg`] of immutable
//! pool buffers — and pushes zero or more blocks on. A module that does not
//! change the bytes (a checksum, a counter, a tap, a rate limiter) forwards
//! the *same* `Msg`: the slices travel by reference and nothing is copied.
//! A module that does change them (compression, encryption) writes its
//! output into new buffers from the association's [`Pool`], taken through
//! [`Context::alloc`].
//!
//! Modules are opened by name with arguments (`"zstd:level=3"`) through a
//! [`Registry`] (the thesis's `kload`), controlled with key/value requests
//! ([`Module::control`], the thesis's control read/write), and closed by
//! dropping them. User modules load from a shared object through a small
//! versioned C ABI (`include/zcio_module.h`, see `Registry::load`, feature `dynamic-modules`).
//!
//! ```
//! use zcio::splice::module::{Registry, Stack};
//! use zcio::{Msg, Pool, PoolConfig};
//!
//! let pool = Pool::new(PoolConfig::named("doc-modules"));
//! let reg = Registry::builtin();
//! let mut stack = Stack::new(pool.clone());
//! stack.push(reg.open("crc32c")?);
//! stack.push(reg.open("count")?);
//!
//! let mut b = pool.try_alloc(5)?;
//! b.as_mut_slice().copy_from_slice(b"hello");
//! let block = Msg::from(b.freeze()?);
//! let out = stack.put(block)?;
//! assert_eq!(out.len(), 1);
//! assert_eq!(out[0].to_vec(), b"hello");
//! assert_eq!(stack.copied(), 0); // pass-through: the same buffer went on
//! assert_eq!(stack.control("crc32c", "value", None)?, "0x9a71bb4c");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[doc(hidden)]
pub mod args;
#[cfg(feature = "dynamic-modules")]
#[doc(hidden)]
pub mod cabi;
pub mod count;
pub mod crc32c;
pub mod inet;
pub mod ratelimit;
mod registry;
#[cfg(feature = "seal")]
pub mod seal;
mod stack;
pub mod tap;
#[cfg(feature = "zstd")]
pub mod zstd;

use std::sync::Arc;

use thiserror::Error;

use crate::buf::{AllocError, FbufMut, Pool};
use crate::msg::{Msg, MsgError};
use crate::view::View;

pub(crate) use args::parse_size;
pub use args::Args;
pub use registry::{Factory, Registry};
pub use stack::{Stack, StackIndex};

/// A processing module (see the [module docs](self)).
///
/// `open` is the factory the [`Registry`] holds; `close` is `Drop`.
pub trait Module: Send {
    /// The module's name (as registered, e.g. `"zstd"`).
    fn name(&self) -> &str;

    /// One block in (a `Msg`, normally of immutable pool buffers); push zero
    /// or more blocks to `out`. A module that does not change the bytes
    /// forwards the same `Msg` (no copy).
    fn put(
        &mut self,
        block: Msg,
        cx: &mut Context<'_>,
        out: &mut Vec<Msg>,
    ) -> Result<(), ModuleError>;

    /// End of stream: emit what is buffered (a zstd frame end, …).
    fn finish(&mut self, cx: &mut Context<'_>, out: &mut Vec<Msg>) -> Result<(), ModuleError> {
        let _ = (cx, out);
        Ok(())
    }

    /// Control read (`value == None`) or write: `key` and optional value →
    /// reply text. Every module answers `"stats"`.
    fn control(&mut self, key: &str, value: Option<&str>) -> Result<String, ModuleError> {
        match (key, value) {
            ("stats", None) => Ok(format_stats(&self.stats())),
            _ => Err(ModuleError::control(self.name(), key, "unknown key")),
        }
    }

    /// Counters for status (bytes in/out, blocks, drops…): name → value.
    fn stats(&self) -> Vec<(&'static str, u64)>;
}

/// `name=value` pairs separated by spaces (the reply to `"stats"`).
pub(crate) fn format_stats(stats: &[(&'static str, u64)]) -> String {
    stats
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Failure of a module operation; every variant names the module.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ModuleError {
    /// No module of that name is registered.
    #[error("no module named '{name}' (known: {known})")]
    Unknown {
        /// The requested name.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// Bad or missing arguments when opening.
    #[error("{module}: {reason}")]
    BadArgs {
        /// Module name.
        module: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A control request the module does not understand or cannot apply.
    #[error("{module}: control '{key}': {reason}")]
    Control {
        /// Module name.
        module: String,
        /// The key.
        key: String,
        /// Why it failed.
        reason: String,
    },
    /// No buffer from the association's pool.
    #[error("{module}: cannot allocate an output buffer: {source}")]
    Alloc {
        /// Module name.
        module: String,
        /// The pool's error.
        #[source]
        source: AllocError,
    },
    /// An aggregate operation failed (too many slices).
    #[error("{module}: {source}")]
    Msg {
        /// Module name.
        module: String,
        /// The aggregate error.
        #[source]
        source: MsgError,
    },
    /// The input stream is malformed, truncated or fails authentication
    /// (foreign data: never a panic).
    #[error("{module}: bad input: {reason}")]
    BadInput {
        /// Module name.
        module: String,
        /// What was wrong.
        reason: String,
    },
    /// A codec or library failure that is not the input's fault.
    #[error("{module}: {reason}")]
    Failed {
        /// Module name.
        module: String,
        /// What failed.
        reason: String,
    },
    /// Loading a shared-object module failed (file, symbol, ABI version).
    #[error("cannot load module from {path}: {reason}")]
    Load {
        /// The shared object.
        path: String,
        /// Why.
        reason: String,
    },
    /// A stack operation named a module that is not on the stack.
    #[error("no module {0} on the stack")]
    NotInStack(String),
}

impl ModuleError {
    /// The system's error number behind this error, if there is one (an
    /// allocation that failed in a system call).
    pub fn errno(&self) -> Option<crate::Errno> {
        match self {
            Self::Alloc { source, .. } => source.errno(),
            _ => None,
        }
    }

    /// Where this error sits in the common vocabulary.
    pub fn kind(&self) -> zcio_sys::error::ErrorKind {
        use zcio_sys::error::ErrorKind as K;
        match self {
            Self::Unknown { .. } | Self::NotInStack(_) => K::NotFound,
            Self::BadArgs { .. } | Self::Control { .. } => K::InvalidInput,
            Self::Alloc { source, .. } => source.kind(),
            Self::Msg { source, .. } => source.kind(),
            Self::BadInput { .. } => K::Malformed,
            Self::Failed { .. } | Self::Load { .. } => K::Module,
        }
    }

    /// The module the error is about ("" when none is named).
    pub fn module(&self) -> &str {
        match self {
            Self::Unknown { name, .. } => name,
            Self::BadArgs { module, .. }
            | Self::Control { module, .. }
            | Self::Alloc { module, .. }
            | Self::Msg { module, .. }
            | Self::BadInput { module, .. }
            | Self::Failed { module, .. } => module,
            Self::Load { path, .. } => path,
            Self::NotInStack(_) => "",
        }
    }

    /// A [`ModuleError::BadArgs`].
    pub fn bad_args(module: &str, reason: impl Into<String>) -> Self {
        Self::BadArgs {
            module: module.to_owned(),
            reason: reason.into(),
        }
    }

    /// A [`ModuleError::Control`].
    pub fn control(module: &str, key: &str, reason: impl Into<String>) -> Self {
        Self::Control {
            module: module.to_owned(),
            key: key.to_owned(),
            reason: reason.into(),
        }
    }

    /// A [`ModuleError::BadInput`].
    pub fn bad_input(module: &str, reason: impl Into<String>) -> Self {
        Self::BadInput {
            module: module.to_owned(),
            reason: reason.into(),
        }
    }

    /// A [`ModuleError::Failed`].
    pub fn failed(module: &str, reason: impl Into<String>) -> Self {
        Self::Failed {
            module: module.to_owned(),
            reason: reason.into(),
        }
    }

    /// A [`ModuleError::Msg`].
    pub fn msg(module: &str, source: MsgError) -> Self {
        Self::Msg {
            module: module.to_owned(),
            source,
        }
    }
}

/// What a module may use while it handles a block: the association's
/// [`Pool`] for output buffers, and helpers that count every byte they
/// copy, so a test (or `status`) can show that a pass-through stack copies
/// nothing ([`Context::copied`]).
pub struct Context<'a> {
    pool: &'a Pool,
    module: Option<Arc<str>>,
    copied: u64,
    allocated: u64,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("pool", &self.pool.id())
            .field("module", &self.module)
            .field("copied", &self.copied)
            .field("allocated", &self.allocated)
            .finish()
    }
}

impl<'a> Context<'a> {
    /// A context drawing buffers from `pool`, counters at zero.
    pub fn new(pool: &'a Pool) -> Self {
        Self {
            pool,
            module: None,
            copied: 0,
            allocated: 0,
        }
    }

    /// The pool output buffers come from.
    pub fn pool(&self) -> &Pool {
        self.pool
    }

    /// The module now running (as named by [`Context::enter`]).
    pub fn module_name(&self) -> &str {
        self.module.as_deref().unwrap_or("")
    }

    /// Name the module now running (for error messages; the [`Stack`]
    /// does this before each call).
    pub fn enter(&mut self, module: &Arc<str>) {
        if !self.module.as_ref().is_some_and(|m| Arc::ptr_eq(m, module)) {
            self.module = Some(Arc::clone(module));
        }
    }

    /// A writable buffer of `len` bytes from the association's pool
    /// (waits a bounded time for receivers to release buffers).
    pub fn alloc(&mut self, len: usize) -> Result<FbufMut, ModuleError> {
        match self.pool.alloc(len) {
            Ok(b) => {
                self.allocated += len as u64;
                Ok(b)
            }
            Err(source) => Err(ModuleError::Alloc {
                module: self.module_name().to_owned(),
                source,
            }),
        }
    }

    /// Bytes copied by the helpers so far (data-path copies: reassembly,
    /// private copies of volatile input, a C module's output).
    pub fn copied(&self) -> u64 {
        self.copied
    }

    /// Bytes of output buffers allocated so far.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Record `n` bytes copied by the module itself.
    pub fn note_copy(&mut self, n: usize) {
        self.copied += n as u64;
    }

    /// Copy `src` into `dst[at..]` with [`crate::copy`], counted.
    ///
    /// # Panics
    /// If `at + src.len() > dst.len()` (a bug in the calling module).
    pub fn copy_into(&mut self, dst: &mut FbufMut, at: usize, src: &[u8]) {
        crate::copy::copy(&mut dst.as_mut_slice()[at..at + src.len()], src);
        self.copied += src.len() as u64;
    }

    /// A new immutable block holding a copy of `bytes` (counted).
    pub fn block_from(&mut self, bytes: &[u8]) -> Result<Msg, ModuleError> {
        if bytes.is_empty() {
            return Ok(Msg::new());
        }
        let mut b = self.alloc(bytes.len())?;
        self.copy_into(&mut b, 0, bytes);
        self.freeze(b)
    }

    /// Freeze a filled buffer into a one-slice block.
    pub fn freeze(&mut self, b: FbufMut) -> Result<Msg, ModuleError> {
        match b.freeze() {
            Ok(f) => Ok(Msg::from(f)),
            // Only secured pools seal on freeze; the bytes are still ours
            // and immutable to Rust, so carry on with the unsealed buffer.
            Err(e) => Ok(Msg::from(e.buf)),
        }
    }

    /// Call `f` on each slice of `msg` as a plain `&[u8]`. Immutable
    /// slices (our own frozen buffers, sealed or trusted ones) are passed
    /// in place; a slice a peer may still write is first copied into a
    /// private scratch buffer (counted), so `f` validates bytes that cannot
    /// change under it.
    pub fn for_each_slice<E>(
        &mut self,
        msg: &Msg,
        mut f: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut scratch = Vec::new();
        for v in msg.chunks() {
            self.with_view(v, &mut scratch, &mut f)?;
        }
        Ok(())
    }

    fn with_view<E>(
        &mut self,
        v: View<'_>,
        scratch: &mut Vec<u8>,
        f: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        match v.as_slice() {
            Some(s) => f(s),
            None => {
                // Bounded pieces: a private copy of at most 64 KiB at a time.
                const PIECE: usize = 64 << 10;
                let mut off = 0;
                while off < v.len() {
                    let n = (v.len() - off).min(PIECE);
                    scratch.resize(n, 0);
                    let got = v.read_at(off, scratch);
                    self.copied += got as u64;
                    f(&scratch[..got])?;
                    off += n;
                }
                Ok(())
            }
        }
    }
}

/// Counters every built-in keeps: bytes and blocks in and out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    /// Bytes received.
    pub bytes_in: u64,
    /// Blocks received.
    pub blocks_in: u64,
    /// Bytes emitted.
    pub bytes_out: u64,
    /// Blocks emitted.
    pub blocks_out: u64,
}

impl Flow {
    /// Count one block in.
    pub fn input(&mut self, m: &Msg) {
        self.bytes_in += m.len() as u64;
        self.blocks_in += 1;
    }

    /// Count emitted blocks `out[from..]`.
    pub fn output(&mut self, out: &[Msg], from: usize) {
        for m in &out[from..] {
            self.bytes_out += m.len() as u64;
            self.blocks_out += 1;
        }
    }

    /// The four counters as stats.
    pub fn stats(&self) -> [(&'static str, u64); 4] {
        [
            ("bytes_in", self.bytes_in),
            ("blocks_in", self.blocks_in),
            ("bytes_out", self.bytes_out),
            ("blocks_out", self.blocks_out),
        ]
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use crate::buf::PoolConfig;

    pub fn pool() -> Pool {
        Pool::new(PoolConfig {
            chunk_size: 4 << 20,
            populate: false,
            ..PoolConfig::named("module-test")
        })
    }

    /// A block of our own (immutable) pool buffers holding `bytes`, split
    /// into `pieces` slices.
    pub fn block(pool: &Pool, bytes: &[u8], pieces: usize) -> Msg {
        let mut m = Msg::new();
        if bytes.is_empty() {
            return m;
        }
        let step = bytes.len().div_ceil(pieces.max(1));
        for part in bytes.chunks(step) {
            let mut b = pool.try_alloc(part.len()).expect("alloc");
            b.as_mut_slice().copy_from_slice(part);
            m.join(Msg::from(b.freeze().expect("freeze")))
                .expect("few slices");
        }
        m
    }

    /// Run `blocks` through `m` and its finish; the concatenated output.
    #[cfg(any(feature = "zstd", feature = "seal"))]
    pub fn run(
        m: &mut dyn Module,
        pool: &Pool,
        blocks: impl IntoIterator<Item = Msg>,
    ) -> Result<Vec<u8>, ModuleError> {
        let mut cx = Context::new(pool);
        let mut out = Vec::new();
        for b in blocks {
            m.put(b, &mut cx, &mut out)?;
        }
        m.finish(&mut cx, &mut out)?;
        Ok(out.iter().flat_map(|m| m.to_vec()).collect())
    }
}
