//! The accept loop and `close` shared by `Listener` (channels) and
//! `RendezvousListener` (rendezvous): both keep their socket listener in a
//! `Mutex<Option<_>>` (`None` once closed) and accept in GIL-free slices.

use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use zcio::{ConnectError, Errno};

use crate::errors::{self, Class};
use crate::wait::{blocking, Deadline, Timeout};

/// Accept one connection on the listener in `slot`, waiting as `timeout`
/// says (parsed by [`Timeout::from_py`] with the listener's bound); `what`
/// names the listener in errors.
/// A handshake that stalled, nobody connecting yet, or a signal only ends
/// the slice: the listener stays usable and the loop looks again.
pub(crate) fn accept<L, T>(
    py: Python<'_>,
    slot: &Mutex<Option<L>>,
    timeout: Timeout,
    what: &'static str,
    accept_timeout: impl Fn(&L, Duration) -> Result<T, ConnectError> + Send + Sync,
) -> PyResult<T>
where
    L: Send,
    T: Send,
{
    let deadline = Deadline::new(timeout);
    let got = blocking(py, deadline, |slice| {
        let Ok(g) = slot.lock() else {
            return Some(Err(None));
        };
        let Some(l) = g.as_ref() else {
            return Some(Err(None));
        };
        match accept_timeout(l, slice) {
            Err(ConnectError::TimedOut)
            | Err(ConnectError::Os {
                errno: Errno::INTR, ..
            }) => None,
            r => Some(r.map_err(Some)),
        }
    })?;
    match got {
        Some(Ok(c)) => Ok(c),
        Some(Err(Some(e))) => Err(errors::raise(py, e)),
        Some(Err(None)) => Err(errors::closed(what)),
        None => Err(errors::err(
            py,
            Class::TimedOut,
            "no connection before the timeout",
            None,
        )),
    }
}

/// Stop listening: drop the listener (which removes the socket file).
pub(crate) fn close<L>(slot: &Mutex<Option<L>>) -> PyResult<()> {
    let mut g = slot
        .lock()
        .map_err(|_| errors::internal("listener lock poisoned"))?;
    g.take();
    Ok(())
}
