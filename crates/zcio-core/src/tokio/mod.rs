//! Async zcio on tokio (feature `tokio`): futures for the transports'
//! waits, with no thread per waiting task.
//!
//! A waiter that has to sleep arms the transport's own sleep flag — the
//! same flag in the same word a blocking waiter sets before its futex
//! wait — and sleeps in tokio's reactor on the connection's *doorbell*, a
//! pollable descriptor registered with [`AsyncFd`](::tokio::io::unix::AsyncFd).
//! The peer, blocking or async, in Rust, C or Python, rings the doorbell
//! only when it finds the flag set, exactly as it would otherwise call
//! `FUTEX_WAKE`: one protocol for both (see `docs/async-rust.md`). Under
//! load nobody sleeps and neither side makes a system call. A task
//! waiting on many channels (`tokio::select!`) costs nothing while they
//! are idle.
//!
//! Against a hostile or broken peer: a dead peer wakes the task at once
//! (its end of the doorbell hangs up) and the call reports
//! `Disconnected`; a peer that rings in a flood, or closes only its
//! doorbell, loses the task's trust and is looked at once per liveness
//! interval instead (the task neither spins nor hangs); every call has
//! the channel's timeouts.
//!
//! Each type's docs state which of its methods are cancel-safe.

mod channel;
#[doc(hidden)]
pub mod doorbell;
mod rendezvous;
mod ring;

pub use channel::AsyncChannel;
pub use rendezvous::AsyncRendezvous;
pub use ring::{AsyncConsumer, AsyncProducer};
