//! Limits on the sizes and counts a user gives a benchmark, checked before
//! anything is allocated or spawned: each against its range and, for what
//! becomes memory, against the memory the machine has available now
//! (`MemAvailable` in `/proc/meminfo`). Messages name the option, the
//! value (sizes formatted exactly) and the limit. Each benchmark checks its
//! own options with these (`transfer::check_limits`, `ring::check_limits`,
//! `proxyb::check_limits`, and the `validate` of semantics and splice).

pub use zcio_fmt::limits::{check_count, check_memory, check_size, exact};
