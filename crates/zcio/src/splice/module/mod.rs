//! Processing modules: the `Module` trait, a per-association stack, the
//! registry of modules by name, and the built-in modules.
