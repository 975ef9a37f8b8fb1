//! The channel's configuration as Python spells it: `ChannelPolicy` and
//! `AccessPolicy` (small frozen classes) and the keyword arguments of
//! `Listener`, `Channel.connect` and `Channel.pair` that fill a
//! `zcio::ChannelConfig`.

use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zcio::{ChannelConfig, FullPolicy, HoldExpiry, HoldLimit, Notify};

use crate::wait::{seconds_arg, seconds_of};

/// A finite, non-negative number of seconds given to `what`.
fn finite_seconds(what: &str, t: f64) -> PyResult<Duration> {
    if !t.is_finite() || !(0.0..=3600.0 * 24.0).contains(&t) {
        return Err(PyValueError::new_err(format!(
            "{what} must be a number of seconds from 0 to 86400, not {t}"
        )));
    }
    Ok(Duration::from_secs_f64(t))
}

/// ChannelPolicy(*, notify="now", wake_batch=1, max_age=0.001, spin=None,
/// full="block", hold_limit=None, on_hold_expiry="reclaim",
/// futile_wake_limit=64)
/// --
///
/// How a channel end notifies, batches, spins, treats a full ring and
/// bounds the peer's holds (Rust's `zcio::ChannelPolicy`). `notify`:
/// `"now"` wakes a sleeping receiver with the send that finds it asleep,
/// `"defer"` waits until `wake_batch` messages wait or the oldest is
/// `max_age` seconds old (or `Channel.flush()`). `spin`: seconds a wait
/// spins before it sleeps (`None`: the process's spin policy). `full`:
/// `"block"` waits for ring space (up to the send timeout), `"fail"` raises
/// `Full` at once whatever the timeout (`send`, `sendv` and their async
/// forms). `hold_limit`: seconds the peer may
/// hold a buffer lent to it (`None`: no limit); past it `on_hold_expiry`
/// `"reclaim"` takes the buffer back (counted in `stats()["reclaimed"]`
/// and in `faults()`), `"abort"` closes the channel (`PeerFault`).
/// `futile_wake_limit`: wakes in a row that found nobody asleep before the
/// peer's sleep flag is distrusted.
#[pyclass(module = "zcio._zcio", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct ChannelPolicy {
    pub(crate) inner: zcio::ChannelPolicy,
}

#[pymethods]
impl ChannelPolicy {
    #[new]
    #[pyo3(signature = (*, notify="now", wake_batch=1, max_age=0.001, spin=None, full="block", hold_limit=None, on_hold_expiry="reclaim", futile_wake_limit=64))]
    #[allow(clippy::too_many_arguments)] // one per field of the policy
    fn new(
        notify: &str,
        wake_batch: u32,
        max_age: f64,
        spin: Option<f64>,
        full: &str,
        hold_limit: Option<f64>,
        on_hold_expiry: &str,
        futile_wake_limit: u32,
    ) -> PyResult<Self> {
        let mut p = zcio::ChannelPolicy {
            notify: match notify {
                "now" => Notify::Now,
                "defer" => Notify::Defer,
                o => {
                    return Err(PyValueError::new_err(format!(
                        "notify must be \"now\" or \"defer\", not {o:?}"
                    )))
                }
            },
            ..Default::default()
        };
        if wake_batch == 0 {
            return Err(PyValueError::new_err(
                "wake_batch must be at least 1 (messages per wake)",
            ));
        }
        p.wake_batch = wake_batch;
        p.max_age = finite_seconds("max_age", max_age)?;
        if p.max_age.is_zero() {
            return Err(PyValueError::new_err(
                "max_age must be more than 0 seconds (it bounds how long a receiver sleeps)",
            ));
        }
        if let Some(s) = spin {
            p.spin = finite_seconds("spin", s)?;
        }
        p.full = match full {
            "block" => FullPolicy::Block,
            "fail" => FullPolicy::Fail,
            o => {
                return Err(PyValueError::new_err(format!(
                    "full must be \"block\" or \"fail\", not {o:?}"
                )))
            }
        };
        let on_expiry = match on_hold_expiry {
            "reclaim" => HoldExpiry::Reclaim,
            "abort" => HoldExpiry::Abort,
            o => {
                return Err(PyValueError::new_err(format!(
                    "on_hold_expiry must be \"reclaim\" or \"abort\", not {o:?}"
                )))
            }
        };
        p.hold = match hold_limit {
            None => None,
            Some(l) => Some(HoldLimit {
                limit: finite_seconds("hold_limit", l)?,
                on_expiry,
            }),
        };
        if futile_wake_limit == 0 {
            return Err(PyValueError::new_err(
                "futile_wake_limit must be at least 1",
            ));
        }
        p.futile_wake_limit = futile_wake_limit;
        Ok(Self { inner: p })
    }

    /// `"now"` or `"defer"`.
    #[getter]
    fn notify(&self) -> &'static str {
        match self.inner.notify {
            Notify::Now => "now",
            Notify::Defer => "defer",
        }
    }

    #[getter]
    fn wake_batch(&self) -> u32 {
        self.inner.wake_batch
    }

    /// Seconds.
    #[getter]
    fn max_age(&self) -> f64 {
        self.inner.max_age.as_secs_f64()
    }

    /// Seconds.
    #[getter]
    fn spin(&self) -> f64 {
        self.inner.spin.as_secs_f64()
    }

    /// `"block"` or `"fail"`.
    #[getter]
    fn full(&self) -> &'static str {
        match self.inner.full {
            FullPolicy::Block => "block",
            FullPolicy::Fail => "fail",
        }
    }

    /// Seconds, or `None` for no limit.
    #[getter]
    fn hold_limit(&self) -> Option<f64> {
        self.inner.hold.map(|h| h.limit.as_secs_f64())
    }

    /// `"reclaim"` or `"abort"` (`"reclaim"` when there is no limit).
    #[getter]
    fn on_hold_expiry(&self) -> &'static str {
        match self.inner.hold.map(|h| h.on_expiry) {
            Some(HoldExpiry::Abort) => "abort",
            _ => "reclaim",
        }
    }

    #[getter]
    fn futile_wake_limit(&self) -> u32 {
        self.inner.futile_wake_limit
    }

    fn __repr__(&self) -> String {
        format!(
            "zcio.ChannelPolicy(notify={:?}, wake_batch={}, max_age={}, spin={}, full={:?}, hold_limit={}, on_hold_expiry={:?}, futile_wake_limit={})",
            self.notify(),
            self.wake_batch(),
            self.max_age(),
            self.spin(),
            self.full(),
            self.hold_limit()
                .map_or_else(|| "None".to_string(), |l| l.to_string()),
            self.on_hold_expiry(),
            self.futile_wake_limit()
        )
    }
}

/// AccessPolicy(uids=None, gids=())
/// --
///
/// Who may connect to a listener, decided on the kernel's credentials of
/// the connecting process (Rust's `zcio::AccessPolicy`): a process whose
/// uid is in `uids` or whose gid is in `gids`. `uids=None`: this process's
/// effective uid (the default of every listener). A policy that admits
/// nobody is refused (`ValueError`).
#[pyclass(module = "zcio._zcio", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct AccessPolicy {
    pub(crate) inner: zcio::AccessPolicy,
}

#[pymethods]
impl AccessPolicy {
    #[new]
    #[pyo3(signature = (uids=None, gids=Vec::new()))]
    fn new(uids: Option<Vec<u32>>, gids: Vec<u32>) -> PyResult<Self> {
        let uids = uids.unwrap_or_else(|| zcio::AccessPolicy::default().uids);
        if uids.is_empty() && gids.is_empty() {
            return Err(PyValueError::new_err(
                "an AccessPolicy must admit at least one uid or gid",
            ));
        }
        Ok(Self {
            inner: zcio::AccessPolicy { uids, gids },
        })
    }

    #[getter]
    fn uids(&self) -> Vec<u32> {
        self.inner.uids.clone()
    }

    #[getter]
    fn gids(&self) -> Vec<u32> {
        self.inner.gids.clone()
    }

    /// allows(uid, gid) -> bool: whether a peer with these ids may connect.
    fn allows(&self, uid: u32, gid: u32) -> bool {
        self.inner.allows(uid, gid)
    }

    fn __repr__(&self) -> String {
        format!(
            "zcio.AccessPolicy(uids={:?}, gids={:?})",
            self.inner.uids, self.inner.gids
        )
    }
}

/// The keyword arguments besides the bounds that `Listener`,
/// `Channel.connect` and `Channel.pair` take (`access` only the listener).
const OPTIONS: &[&str] = &[
    "policy",
    "access",
    "ring_entries",
    "notice_entries",
    "connect_timeout",
    "max_in_flight",
    "max_bytes_in_flight",
    "populate",
    "liveness_interval",
    "max_region_len",
    "lane_slots",
    "lane_slot_size",
];

/// A power of two in 8..=2^20 (the segment's ring sizes).
fn ring_size(what: &str, v: &Bound<'_, PyAny>) -> PyResult<u32> {
    let n: u64 = v.extract()?;
    if !n.is_power_of_two() || !(8..=1 << 20).contains(&n) {
        return Err(PyValueError::new_err(format!(
            "{what} must be a power of two from 8 to 1048576, not {n}"
        )));
    }
    Ok(n as u32)
}

/// A channel configuration with the bounds given (seconds; `None`: the
/// default; `math.inf`: none) and the further keyword arguments in
/// `options` (`OPTIONS`; `access` only if `listener`). `who` names the
/// call in errors.
pub(crate) fn channel_config(
    who: &str,
    send_timeout: Option<f64>,
    recv_timeout: Option<f64>,
    accept_timeout: Option<f64>,
    options: Option<&Bound<'_, PyDict>>,
    listener: bool,
) -> PyResult<ChannelConfig> {
    let mut cfg = ChannelConfig::default();
    if let Some(t) = send_timeout {
        cfg.send_timeout = seconds_arg("send_timeout", t)?;
    }
    if let Some(t) = recv_timeout {
        cfg.recv_timeout = seconds_arg("recv_timeout", t)?;
    }
    if let Some(t) = accept_timeout {
        cfg.accept_timeout = seconds_arg("accept_timeout", t)?;
    }
    let Some(options) = options else {
        return Ok(cfg);
    };
    for (k, v) in options.iter() {
        let key: String = k.extract()?;
        if !OPTIONS.contains(&key.as_str()) || (key == "access" && !listener) {
            let allowed: Vec<&str> = OPTIONS
                .iter()
                .copied()
                .filter(|o| listener || *o != "access")
                .collect();
            return Err(PyTypeError::new_err(format!(
                "{who} got an unexpected keyword argument '{key}'; the channel options are send_timeout, recv_timeout{}, {}",
                if listener { ", accept_timeout" } else { "" },
                allowed.join(", ")
            )));
        }
        if v.is_none() {
            continue;
        }
        match key.as_str() {
            "policy" => {
                cfg.policy = v
                    .cast::<ChannelPolicy>()
                    .map_err(|_| PyTypeError::new_err("policy must be a zcio.ChannelPolicy"))?
                    .get()
                    .inner;
            }
            "access" => {
                cfg.access = v
                    .cast::<AccessPolicy>()
                    .map_err(|_| PyTypeError::new_err("access must be a zcio.AccessPolicy"))?
                    .get()
                    .inner
                    .clone();
            }
            "ring_entries" => cfg.ring_entries = ring_size("ring_entries", &v)?,
            "notice_entries" => cfg.notice_entries = ring_size("notice_entries", &v)?,
            "connect_timeout" => {
                let d = finite_seconds("connect_timeout", v.extract()?)?;
                if d.is_zero() {
                    return Err(PyValueError::new_err(
                        "connect_timeout must be more than 0 seconds",
                    ));
                }
                cfg.connect_timeout = d;
            }
            "max_in_flight" => {
                let n: usize = v.extract()?;
                if n == 0 {
                    return Err(PyValueError::new_err(
                        "max_in_flight must be at least 1 (slices the peer may hold)",
                    ));
                }
                cfg.max_in_flight = n;
            }
            "max_bytes_in_flight" => {
                let n: u64 = v.extract()?;
                if n == 0 {
                    return Err(PyValueError::new_err(
                        "max_bytes_in_flight must be at least 1 (bytes the peer may hold)",
                    ));
                }
                cfg.max_bytes_in_flight = n;
            }
            "populate" => cfg.populate = v.extract()?,
            "liveness_interval" => {
                let d = finite_seconds("liveness_interval", v.extract()?)?;
                if d < Duration::from_millis(1) {
                    return Err(PyValueError::new_err(
                        "liveness_interval must be at least 0.001 seconds",
                    ));
                }
                cfg.liveness_interval = d;
            }
            "max_region_len" => {
                let n: u64 = v.extract()?;
                if n < 4096 {
                    return Err(PyValueError::new_err(
                        "max_region_len must be at least 4096 bytes",
                    ));
                }
                cfg.max_region_len = n;
            }
            "lane_slots" => {
                let n: u32 = v.extract()?;
                if n > 65536 {
                    return Err(PyValueError::new_err(
                        "lane_slots must be from 0 (off) to 65536",
                    ));
                }
                cfg.lane.slots = n;
            }
            "lane_slot_size" => {
                let n: usize = v.extract()?;
                if n > 1 << 30 {
                    return Err(PyValueError::new_err(
                        "lane_slot_size must be from 0 (off) to 1 GiB",
                    ));
                }
                cfg.lane.slot_size = n;
            }
            _ => unreachable!("checked against OPTIONS above"),
        }
    }
    Ok(cfg)
}

/// The configuration in effect as a dict (`Channel.config()`).
pub(crate) fn config_dict<'py>(
    py: Python<'py>,
    cfg: &ChannelConfig,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item(
        "policy",
        Bound::new(py, ChannelPolicy { inner: cfg.policy })?,
    )?;
    d.set_item(
        "access",
        Bound::new(
            py,
            AccessPolicy {
                inner: cfg.access.clone(),
            },
        )?,
    )?;
    d.set_item("ring_entries", cfg.ring_entries)?;
    d.set_item("notice_entries", cfg.notice_entries)?;
    d.set_item("send_timeout", seconds_of(cfg.send_timeout))?;
    d.set_item("recv_timeout", seconds_of(cfg.recv_timeout))?;
    d.set_item("connect_timeout", seconds_of(cfg.connect_timeout))?;
    d.set_item("accept_timeout", seconds_of(cfg.accept_timeout))?;
    d.set_item("max_in_flight", cfg.max_in_flight)?;
    d.set_item("max_bytes_in_flight", cfg.max_bytes_in_flight)?;
    d.set_item("populate", cfg.populate)?;
    d.set_item("liveness_interval", cfg.liveness_interval.as_secs_f64())?;
    d.set_item("max_region_len", cfg.max_region_len)?;
    d.set_item("lane_slots", cfg.lane.slots)?;
    d.set_item("lane_slot_size", cfg.lane.slot_size)?;
    Ok(d)
}
