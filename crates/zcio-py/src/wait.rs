//! Timeouts as Python spells them (`None`: wait up to the bound the call's
//! configuration sets, `0`: do not wait, seconds otherwise, `math.inf`:
//! without a bound) and the loop that waits with the GIL released, in
//! slices, so other threads run and Ctrl-C is seen.

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The longest a blocking call waits with the GIL released before it looks
/// at pending signals (`KeyboardInterrupt`).
const SLICE: Duration = Duration::from_millis(100);

/// Longer than this is no bound (and clear of `Instant`'s range): a
/// century, `math.inf`, `Duration::MAX`.
const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The bound of the default wait of `Channel.connect` and
/// `Rendezvous.connect` (retrying while nobody listens, then the
/// handshake): a channel's default `connect_timeout`, 5 s, which is also
/// the rendezvous handshake's.
pub(crate) const CONNECT_BOUND: Duration = Duration::from_secs(5);

/// How long a call may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timeout {
    /// Not at all (`timeout=0`).
    Try,
    /// At most this long (`timeout=None`: the call's bound; a number).
    Within(Duration),
    /// As long as it takes (`timeout=math.inf`), interruptible.
    Forever,
}

impl Timeout {
    /// Parse a Python `timeout` argument; `bound` is what `None` waits
    /// (the bound the call's configuration sets).
    pub(crate) fn from_py(timeout: Option<f64>, bound: Duration) -> PyResult<Self> {
        match timeout {
            None => Ok(Self::within(bound)),
            Some(t) => Ok(match seconds_arg("timeout", t)? {
                d if d.is_zero() => Timeout::Try,
                d => Self::within(d),
            }),
        }
    }

    /// At most `d` (`Forever` past a century).
    pub(crate) fn within(d: Duration) -> Self {
        if d >= CENTURY {
            Timeout::Forever
        } else {
            Timeout::Within(d)
        }
    }

    /// Whether the call may not wait at all.
    pub(crate) fn is_try(self) -> bool {
        self == Timeout::Try
    }
}

/// A number of seconds given to `what` (a timeout, a bound): non-negative;
/// `math.inf` (or anything past a century) is no bound (`Duration::MAX`).
pub(crate) fn seconds_arg(what: &str, t: f64) -> PyResult<Duration> {
    if t.is_nan() || t < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be None, a non-negative number of seconds or math.inf"
        )));
    }
    // Longer than a century: as good as forever (and no overflow).
    if t > 3.0e9 {
        return Ok(Duration::MAX);
    }
    Ok(Duration::from_secs_f64(t))
}

/// A bound as Python shows it: seconds, `math.inf` for none.
pub(crate) fn seconds_of(d: Duration) -> f64 {
    if d >= CENTURY {
        f64::INFINITY
    } else {
        d.as_secs_f64()
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

/// set_spin_policy(max=None, task_max=None)
/// --
///
/// Set the process's spin policy: how long a blocking wait spins before it
/// sleeps (``max``, default 500 µs) and how long a wait inside an event
/// loop spins before it returns to the loop (``task_max``, default 50 µs,
/// capped by ``max``), in seconds; ``None`` keeps that setting. ``0`` sleeps
/// at once: right when more processes than CPUs share the work. Read when a
/// channel, ring end or rendezvous endpoint is made: set it before opening
/// them. Process-wide (Rust's ``zcio::SpinPolicy::set``).
#[pyfunction]
#[pyo3(signature = (max=None, task_max=None))]
pub(crate) fn set_spin_policy(max: Option<f64>, task_max: Option<f64>) -> PyResult<()> {
    let secs = |name: &str, v: f64| -> PyResult<Duration> {
        if !(0.0..=3600.0).contains(&v) {
            return Err(PyValueError::new_err(format!(
                "{name} must be a number of seconds from 0 to 3600, not {v}"
            )));
        }
        Ok(Duration::from_secs_f64(v))
    };
    let mut p = zcio::SpinPolicy::current();
    if let Some(v) = max {
        p.max = secs("max", v)?;
    }
    if let Some(v) = task_max {
        p.task_max = secs("task_max", v)?;
    }
    p.set();
    Ok(())
}

/// spin_policy() -> (max, task_max)
/// --
///
/// The process's spin policy in seconds (see :func:`set_spin_policy`).
#[pyfunction]
pub(crate) fn spin_policy() -> (f64, f64) {
    let p = zcio::SpinPolicy::current();
    (p.max.as_secs_f64(), p.task_max.as_secs_f64())
}
