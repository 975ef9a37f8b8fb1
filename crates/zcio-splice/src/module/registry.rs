//! The registry of modules by name (the thesis's `kload`).

use std::collections::BTreeMap;

use std::sync::Arc;

use super::{Args, Module, ModuleError};

/// Opens a module from its arguments (the module's `open`). A factory
/// takes the keys it knows from `Args` and calls [`Args::finish`].
pub type Factory = Arc<dyn Fn(Args) -> Result<Box<dyn Module>, ModuleError> + Send + Sync>;

/// Modules by name. [`Registry::builtin`] knows every built-in;
/// [`Registry::register`] adds Rust modules and `Registry::load` C ones (feature `dynamic-modules`)
/// from a shared object. [`Registry::open`] takes `"name"` or
/// `"name:key=value,…"`.
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, Factory>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("names", &self.names())
            .finish()
    }
}

impl Registry {
    /// A registry with no modules.
    pub fn empty() -> Self {
        Self::default()
    }

    /// A registry with every built-in: `count`, `crc32c`, `inet`,
    /// `ratelimit`, `tap`, and with their features `zstd`, `unzstd` (feature
    /// `zstd`), `seal`, `open` (feature `seal`).
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        r.register("count", |a| super::count::Count::open(a).map(boxed));
        r.register("crc32c", |a| super::crc32c::Crc32c::open(a).map(boxed));
        r.register("inet", |a| super::inet::Inet::open(a).map(boxed));
        #[cfg(feature = "zstd")]
        {
            r.register("zstd", |a| super::zstd::Compress::open(a).map(boxed));
            r.register("unzstd", |a| super::zstd::Decompress::open(a).map(boxed));
        }
        #[cfg(feature = "seal")]
        {
            r.register("seal", |a| super::seal::Seal::open(a).map(boxed));
            r.register("open", |a| super::seal::Unseal::open(a).map(boxed));
        }
        r.register("ratelimit", |a| {
            super::ratelimit::RateLimit::open(a).map(boxed)
        });
        r.register("tap", |a| super::tap::Tap::open(a).map(boxed));
        r
    }

    /// Register (or replace) module `name`.
    pub fn register<F>(&mut self, name: &str, factory: F)
    where
        F: Fn(Args) -> Result<Box<dyn Module>, ModuleError> + Send + Sync + 'static,
    {
        self.factories.insert(name.to_owned(), Arc::new(factory));
    }

    /// Load the user module in shared object `path` through the C ABI of
    /// `include/zcio_module.h` (symbol `zcio_module_v1_entry`, ABI version
    /// and table size checked, `open`/`put`/`close` required) and register
    /// it under the name it declares, which is returned. The library stays
    /// loaded while the registry or any module opened from it lives. A
    /// bare file name is taken relative to the current directory.
    ///
    /// # Safety
    /// Loading runs the object's initialisers, and its functions run in
    /// this process with its privileges (the thesis loads modules into the
    /// kernel; here there is no isolation either). `path` must be a zcio
    /// module you trust as much as your own code, that honours the
    /// header's contract (valid pointers, no writes to its input, output
    /// only through `emit` during a call).
    #[cfg(feature = "dynamic-modules")]
    pub unsafe fn load(
        &mut self,
        path: impl AsRef<std::path::Path>,
    ) -> Result<String, ModuleError> {
        // SAFETY: this function's contract, passed on.
        let lib = unsafe { super::cabi::Library::load(path.as_ref()) }?;
        let name = lib.name().to_owned();
        let lib = Arc::new(lib);
        self.register(&name, move |a| {
            super::cabi::CModule::open(Arc::clone(&lib), a).map(boxed)
        });
        Ok(name)
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.factories.contains_key(name)
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.factories.keys().map(String::as_str).collect()
    }

    /// Parse `"name"` or `"name:key=value,…"` (one `--module` of a chain):
    /// the registered name, its factory and the arguments, not yet given
    /// to it (nothing is opened). [`Registry::open`] calls the factory.
    pub fn parse(&self, spec: &str) -> Result<(&str, &Factory, Args), ModuleError> {
        let (name, args) = spec.split_once(':').unwrap_or((spec, ""));
        let name = name.trim();
        let (name, factory) =
            self.factories
                .get_key_value(name)
                .ok_or_else(|| ModuleError::Unknown {
                    name: name.to_owned(),
                    known: self.names().join(", "),
                })?;
        Ok((name, factory, Args::parse(name, args)?))
    }

    /// Open a module from `"name"` or `"name:key=value,…"`
    /// ([`Registry::parse`], then its factory).
    pub fn open(&self, spec: &str) -> Result<Box<dyn Module>, ModuleError> {
        let (_, factory, args) = self.parse(spec)?;
        factory(args)
    }
}

fn boxed<M: Module + 'static>(m: M) -> Box<dyn Module> {
    Box::new(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_names_list_known() {
        let r = Registry::builtin();
        let e = r.open("zsdt:level=3").err().unwrap().to_string();
        assert!(e.contains("'zsdt'") && e.contains("crc32c"), "{e}");
        // The known names include zstd where it is built in.
        assert_eq!(e.contains("zstd"), cfg!(feature = "zstd"), "{e}");
        let e = r.open("count:bogus=1").err().unwrap().to_string();
        assert!(e.contains("bogus"), "{e}");
        assert_eq!(r.open("count").unwrap().name(), "count");
        assert_eq!(r.open(" crc32c: ").unwrap().name(), "crc32c");
        assert!(Registry::empty().open("count").is_err());
    }
}
