//! Timeouts as Python spells them (`None`: wait as long as it takes, `0`:
//! do not wait, seconds otherwise) and the loop that waits with the GIL
//! released, in slices, so other threads run and Ctrl-C is seen.

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The longest a blocking call waits with the GIL released before it looks
/// at pending signals (`KeyboardInterrupt`).
const SLICE: Duration = Duration::from_millis(100);

/// How long a call may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timeout {
    /// Not at all (`timeout=0`).
    Try,
    /// At most this long.
    Within(Duration),
    /// As long as it takes (`timeout=None`), interruptible.
    Forever,
}

impl Timeout {
    /// Parse a Python `timeout` argument.
    pub(crate) fn from_py(timeout: Option<f64>) -> PyResult<Self> {
        match timeout {
            None => Ok(Timeout::Forever),
            Some(t) if t.is_nan() || t < 0.0 => Err(PyValueError::new_err(
                "timeout must be None or a non-negative number of seconds",
            )),
            Some(t) if t <= 0.0 => Ok(Timeout::Try),
            // Longer than a century: as good as forever (and no overflow).
            Some(t) if t > 3.0e9 => Ok(Timeout::Forever),
            Some(t) => Ok(Timeout::Within(Duration::from_secs_f64(t))),
        }
    }

    /// Whether the call may not wait at all.
    pub(crate) fn is_try(self) -> bool {
        self == Timeout::Try
    }
}

/// A deadline derived from a [`Timeout`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    end: Option<Instant>,
}

impl Deadline {
    pub(crate) fn new(t: Timeout) -> Self {
        let now = Instant::now();
        Self {
            end: match t {
                Timeout::Try => Some(now),
                Timeout::Within(d) => now.checked_add(d),
                Timeout::Forever => None,
            },
        }
    }

    /// How long the next slice may wait.
    pub(crate) fn slice(self) -> Duration {
        match self.end {
            None => SLICE,
            Some(e) => e.saturating_duration_since(Instant::now()).min(SLICE),
        }
    }

    /// Whether the deadline has passed.
    pub(crate) fn passed(self) -> bool {
        self.end.is_some_and(|e| Instant::now() >= e)
    }
}

/// Call `op(slice)` with the GIL released until it returns `Some`, each call
/// waiting at most `slice`; between calls, pending signals are handled (a
/// `KeyboardInterrupt` ends the wait). `Ok(None)`: the deadline passed
/// (for [`Timeout::Try`], after exactly one call with a zero slice).
pub(crate) fn blocking<T, F>(py: Python<'_>, deadline: Deadline, mut op: F) -> PyResult<Option<T>>
where
    T: Send,
    F: FnMut(Duration) -> Option<T> + Send,
{
    loop {
        let slice = deadline.slice();
        if let Some(v) = py.detach(|| op(slice)) {
            return Ok(Some(v));
        }
        if deadline.passed() {
            return Ok(None);
        }
        py.check_signals()?;
    }
}
