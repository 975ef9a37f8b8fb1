//! `zcio.forward`: the relay loop between two channels
//! (`zcio::forward::run`), run on a thread of its own while the calling
//! thread waits with the GIL released, in slices: between them it handles
//! signals (Ctrl-C) and looks at the stop event and the timeout. To stop
//! the loop it closes the upstream channel, which is how the loop ends
//! anyway (it then closes the downstream).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zcio::forward::{ForwardConfig, ForwardEnd, ForwardMode, ForwardReport};

use crate::channel::Channel;
use crate::pool::Pool;
use crate::wait::seconds_arg;

/// How often the waiting thread looks at signals, the stop event and the
/// timeout.
const LOOK: Duration = Duration::from_millis(50);

/// A positive, finite number of seconds for `what`.
fn positive(what: &str, t: f64) -> PyResult<Duration> {
    if !t.is_finite() || t <= 0.0 || t > 86400.0 {
        return Err(PyValueError::new_err(format!(
            "{what} must be a number of seconds above 0 and at most 86400, not {t}"
        )));
    }
    Ok(Duration::from_secs_f64(t))
}

/// forward(up, down, *, pool=None, batch=64, idle_wait=0.02,
/// max_idle=None, alloc_timeout=10.0, liveness_interval=None,
/// timeout=None, stop=None) -> dict
/// --
///
/// Forward every message arriving on `up` to `down` until one of them
/// closes (Rust's `zcio::forward::run`): by reference (`pool=None`: one
/// buffer travels the whole chain) or copied into buffers of `pool`.
/// `batch`: messages taken before wakes and notices are flushed;
/// `idle_wait`: longest single wait for the next message; `max_idle`:
/// stop after this many seconds without a message; `alloc_timeout`: bound
/// on waiting for a copy buffer; `liveness_interval`: how often a busy
/// relay checks the downstream peer. The GIL is released while it runs.
/// It stops early when `stop` (a `threading.Event`, or any object with
/// `is_set()`) is set, when `timeout` seconds have passed, or on Ctrl-C
/// (`KeyboardInterrupt` after the loop ended): it then closes `up`, the
/// loop closes `down`, and the report says `"stopped"`. Returns the report:
/// `msgs`, `bytes`, `errors` (messages dropped), `batches`, `end`
/// (`"upstream-disconnected"`, `"downstream-disconnected"`, `"idle"`,
/// `"failed"` or `"stopped"`) and `error` (the failure's text, else None).
#[pyfunction]
#[pyo3(signature = (up, down, *, pool=None, batch=64, idle_wait=0.02, max_idle=None, alloc_timeout=10.0, liveness_interval=None, timeout=None, stop=None))]
#[allow(clippy::too_many_arguments)] // one per keyword argument
pub(crate) fn forward<'py>(
    py: Python<'py>,
    up: &Bound<'py, Channel>,
    down: &Bound<'py, Channel>,
    pool: Option<&Bound<'py, Pool>>,
    batch: usize,
    idle_wait: f64,
    max_idle: Option<f64>,
    alloc_timeout: f64,
    liveness_interval: Option<f64>,
    timeout: Option<f64>,
    stop: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    if up.is(down) {
        return Err(PyValueError::new_err(
            "up and down must be two different channels",
        ));
    }
    if batch == 0 {
        return Err(PyValueError::new_err("batch must be at least 1"));
    }
    let mut cfg = ForwardConfig {
        batch,
        idle_wait: positive("idle_wait", idle_wait)?,
        ..ForwardConfig::default()
    };
    if let Some(t) = max_idle {
        cfg.max_idle = Some(positive("max_idle", t)?);
    }
    cfg.alloc_timeout = seconds_arg("alloc_timeout", alloc_timeout)?;
    if let Some(t) = liveness_interval {
        cfg.liveness_interval = positive("liveness_interval", t)?;
    }
    let deadline = match timeout {
        None => None,
        Some(t) => Some(Instant::now() + positive("timeout", t)?),
    };
    if let Some(s) = stop {
        if !s.hasattr(intern!(py, "is_set"))? {
            return Err(PyValueError::new_err(
                "stop must be a threading.Event (an object with is_set())",
            ));
        }
    }
    let up_ref = up.get().chan()?;
    let down_ref = down.get().chan()?;
    let (upc, downc): (&zcio::Channel, &zcio::Channel) = (&up_ref, &down_ref);
    let mode = match pool {
        Some(p) => ForwardMode::Copy(p.get().inner()),
        None => ForwardMode::ByRef,
    };
    let cfg = &cfg;
    // What made us stop the loop, if we did.
    let mut stopped: Option<PyErr> = None;
    let mut we_stopped = false;
    let report: Option<ForwardReport> = std::thread::scope(|s| {
        let (tx, mut rx) = mpsc::channel();
        s.spawn(move || {
            let _ = tx.send(zcio::forward::run(upc, downc, mode, cfg));
        });
        loop {
            // The receiver goes into the GIL-free closure and comes back
            // (it may be used from one thread at a time only).
            let (got, back) = py.detach(move || (rx.recv_timeout(LOOK), rx));
            rx = back;
            match got {
                Ok(r) => return Some(r),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // The loop's thread ended without a report.
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
            if we_stopped {
                continue;
            }
            let mut halt = deadline.is_some_and(|d| Instant::now() >= d);
            if let Err(e) = py.check_signals() {
                stopped = Some(e);
                halt = true;
            }
            if let Some(s) = stop {
                match s
                    .call_method0(intern!(py, "is_set"))
                    .and_then(|v| v.is_truthy())
                {
                    Ok(true) => halt = true,
                    Ok(false) => {}
                    Err(e) => {
                        stopped = Some(e);
                        halt = true;
                    }
                }
            }
            if halt {
                we_stopped = true;
                py.detach(|| upc.close());
            }
        }
    });
    if let Some(e) = stopped {
        return Err(e);
    }
    let report =
        report.ok_or_else(|| crate::errors::internal("the relay thread ended without a report"))?;
    let d = PyDict::new(py);
    d.set_item("msgs", report.stats.msgs)?;
    d.set_item("bytes", report.stats.bytes)?;
    d.set_item("errors", report.stats.errors)?;
    d.set_item("batches", report.stats.batches)?;
    let (end, error) = match report.end {
        _ if we_stopped => ("stopped", None),
        ForwardEnd::UpstreamDisconnected => ("upstream-disconnected", None),
        ForwardEnd::DownstreamDisconnected => ("downstream-disconnected", None),
        ForwardEnd::Idle => ("idle", None),
        ForwardEnd::Failed(f) => ("failed", Some(f.to_string())),
        _ => ("failed", Some(report.end.to_string())),
    };
    d.set_item("end", end)?;
    d.set_item("error", error)?;
    Ok(d)
}
