//! Synchronous rendezvous IPC between processes (L4-style; the base of
//! [`proxy`](crate::proxy)).
//!
//! An [`Rendezvous`] is one end of a connection made over a Unix
//! `SOCK_SEQPACKET` socket (which also carries descriptors and tells each
//! side the other's kernel credentials). Messages — a label, up to
//! [`Envelope::WORDS`] words and up to [`Envelope::MAX_FDS`] descriptors — travel through a
//! shared slot per direction in a sealed memfd page, handed over with
//! futex waits:
//!
//! * [`Rendezvous::send`] returns only once the receiver has *taken* the
//!   message (unbuffered rendezvous); a send that fails — timed out, partner
//!   gone — did not happen (a timed-out send is retracted from the slot).
//! * [`Rendezvous::recv`] waits on one partner (closed wait), [`Rendezvous::recv_any`] on
//!   several (open wait, with `futex_waitv`).
//! * [`Rendezvous::call`] is send + receive from the same partner,
//!   [`Rendezvous::reply_and_recv`] a server's reply to one partner + receive from all.
//!
//! Every operation comes in the three forms of [`Channel`](crate::Channel)
//! and crossbeam-channel: the plain one waits at most the endpoint's
//! [`RendezvousConfig`] timeout, `try_` never waits (`WouldBlock`), `_timeout`
//! takes the bound. A partner that hung up or died gives `Disconnected`,
//! never a hang. Each family of calls has its error type:
//! [`RendezvousSendError`], [`RendezvousRecvError`] and, for the calls that
//! send and then receive, [`RendezvousCallError`].
//!
//! # Example
//!
//! A server thread answering calls (the partner would normally be another
//! process):
//!
//! ```
//! use zcio::rendezvous::{Rendezvous, RendezvousListener, Envelope};
//!
//! let path = std::env::temp_dir().join(format!("zcio-rdv-doc-{}", std::process::id()));
//! let listener = RendezvousListener::bind(&path)?;
//! let server = std::thread::spawn(move || -> Result<(), zcio::rendezvous::RendezvousCallError> {
//!     let ep = listener.accept().expect("accept");
//!     // Answer each request [a, b] with [a + b] until the caller hangs up.
//!     let (_, mut req) = Rendezvous::recv_any(&[&ep])?;
//!     loop {
//!         let reply = Envelope::new(req.label, &[req.words[0] + req.words[1]]);
//!         match ep.reply_and_recv(&reply, &[&ep]) {
//!             Ok((_, next)) => req = next,
//!             Err(e) if e.is_disconnected() => return Ok(()),
//!             Err(e) => return Err(e),
//!         }
//!     }
//! });
//!
//! let client = Rendezvous::connect(&path)?;
//! assert_eq!(client.peer().pid, std::process::id() as i32); // from the kernel
//! for i in 0..3 {
//!     let answer = client.call(&Envelope::new(1, &[i, 10]))?;
//!     assert_eq!(answer.words, [i + 10]);
//! }
//! drop(client);
//! server.join().unwrap()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
mod evented;
#[cfg(all(test, loom))]
mod loom_slot;
mod open_wait;
mod point;
#[doc(hidden)]
pub mod setup;
#[doc(hidden)]
pub mod slot;
mod stats;

pub(crate) use crate::sys::fdpass::MAX_FDS;
pub(crate) use error::IpcFail;
pub use error::{RendezvousCallError, RendezvousRecvError, RendezvousSendError};
pub(crate) use point::Wait;
pub use point::{Envelope, Rendezvous, RendezvousConfig};
pub use setup::RendezvousListener;
pub(crate) use slot::WORDS;
pub use stats::RendezvousStats;

impl Envelope {
    /// Data words one message carries (its label aside).
    pub const WORDS: usize = WORDS;
    /// Descriptors one message carries at most.
    pub const MAX_FDS: usize = MAX_FDS;
}
