//! Cross-process benchmark drivers for zcio and the baselines it is
//! measured against (memcpy, Linux pipe, Unix socket, iceoryx2).
//!
//! Every measured side runs in its own process, pinned to its own core
//! where the machine has them; the coordinator only spawns, waits and
//! collects. Child processes are this same binary re-executed with the
//! hidden `__bench-child` argument (see [`child`]).

pub mod affinity;
pub mod asyncb;
pub mod checksum;
pub mod child;
pub mod clock;
pub mod cpu;
pub mod driver;
pub mod fds;
pub mod iox;
pub mod limits;
pub mod report;
pub mod ring;
pub mod semantics;
pub mod splice;
pub mod touch;
pub mod transfer;

pub use zcio_fmt as fmt;
