//! `zcio._zcio`: the extension module behind the Python package `zcio`
//! (the package lives in `python/zcio`, its documentation in
//! `docs/python.md`).
//!
//! Rules kept throughout:
//! * Received bytes are exported read-only through the buffer protocol and
//!   live inside the exporting object, so CPython's own reference from
//!   every view (`Py_buffer.obj`, numpy's `base`) keeps them; the Rust
//!   message (whose drop sends the deallocation notice) goes only with the
//!   last of them.
//! * Every blocking call releases the GIL and waits in slices, handling
//!   signals between them.
//! * Rust errors become the exceptions of `zcio._errors`; nothing panics on
//!   input from Python or from a peer.

mod aio;
mod array;
mod buffer;
mod channel;
mod config;
mod errors;
mod forward;
mod ipc;
mod lane;
mod listen;
mod msg;
mod np;
mod pool;
mod proxy;
mod reservation;
mod ring;
mod semantics;
mod splice;
mod typed;
// The type tag of typed messages, shared with the C library (one encoder
// and checker for both frontends).
#[path = "../../zcio-c/src/typetag.rs"]
mod typetag;
mod wait;

use pyo3::prelude::*;

pub(crate) use np::numpy;

/// page_size() -> int: the system page size in bytes (the granularity of
/// buffers and ring data areas).
#[pyfunction]
fn page_size() -> usize {
    zcio::page_size()
}

/// set_non_dumpable(): mark this process non-dumpable (prctl
/// `PR_SET_DUMPABLE` 0): no core dump and no ptrace attach by other
/// processes of the same user, so the bytes it maps from peers cannot be
/// read through `/proc/PID/mem` or a debugger. Cannot be undone.
#[pyfunction]
fn set_non_dumpable() -> PyResult<()> {
    zcio::set_non_dumpable().map_err(|e| {
        pyo3::exceptions::PyOSError::new_err((
            e.raw_os_error(),
            format!("prctl(PR_SET_DUMPABLE): {e}"),
        ))
    })
}

#[pymodule]
fn _zcio(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<pool::Pool>()?;
    m.add_class::<pool::PoolBuffer>()?;
    m.add_class::<msg::Msg>()?;
    m.add_class::<msg::MsgView>()?;
    m.add_class::<channel::Listener>()?;
    m.add_class::<channel::Channel>()?;
    m.add_class::<config::ChannelPolicy>()?;
    m.add_class::<config::AccessPolicy>()?;
    m.add_function(wrap_pyfunction!(channel::_sendable, m)?)?;
    m.add_function(wrap_pyfunction!(channel::_sendable_parts, m)?)?;
    m.add_class::<lane::LaneSender>()?;
    m.add_class::<lane::LaneLoan>()?;
    m.add_class::<lane::LaneReceiver>()?;
    m.add_class::<lane::LaneMsg>()?;
    m.add_class::<ring::RingProducer>()?;
    m.add_class::<ring::RingConsumer>()?;
    m.add_class::<ring::Peek>()?;
    m.add_class::<ring::PeekView>()?;
    m.add_function(wrap_pyfunction!(ring::ring_unlink, m)?)?;
    m.add_function(wrap_pyfunction!(ring::ring_list, m)?)?;
    m.add_function(wrap_pyfunction!(ring::ring_stat, m)?)?;
    m.add_function(wrap_pyfunction!(ring::ring_dir, m)?)?;
    m.add_function(wrap_pyfunction!(ring::ring_path, m)?)?;
    m.add_class::<reservation::RingReservation>()?;
    m.add_class::<ipc::Envelope>()?;
    m.add_class::<ipc::RendezvousListener>()?;
    m.add_class::<ipc::Rendezvous>()?;
    m.add_function(wrap_pyfunction!(ipc::recv_any, m)?)?;
    m.add_function(wrap_pyfunction!(wait::set_spin_policy, m)?)?;
    m.add_function(wrap_pyfunction!(page_size, m)?)?;
    m.add_function(wrap_pyfunction!(forward::forward, m)?)?;
    m.add("MAX_SLICES", zcio::Msg::MAX_SLICES)?;
    m.add_function(wrap_pyfunction!(set_non_dumpable, m)?)?;
    {
        use zcio::ring::Geometry as G;
        m.add("RING_MAX_CONSUMERS", G::MAX_CONSUMERS)?;
        m.add("RING_MAX_SOURCES", G::MAX_SOURCES)?;
        m.add("RING_BLOCK_HEADER_LEN", G::BLOCK_HEADER_LEN)?;
        m.add("RING_MAX_DATA_LEN", G::MAX_DATA_LEN)?;
        m.add("RING_MAX_DESCRIPTORS", G::MAX_DESCRIPTORS)?;
        m.add("RING_MAX_SLOT_SIZE", G::MAX_SLOT_SIZE)?;
    }
    m.add("MAX_FDS", zcio::rendezvous::Envelope::MAX_FDS)?;
    m.add_function(wrap_pyfunction!(wait::spin_policy, m)?)?;
    m.add_class::<proxy::Proxies>()?;
    m.add_class::<proxy::ProxyEndpoint>()?;
    m.add_class::<proxy::Ticket>()?;
    m.add_class::<proxy::Reply>()?;
    m.add_class::<splice::Association>()?;
    m.add_class::<splice::Completion>()?;
    m.add_class::<splice::SpliceStatus>()?;
    m.add_class::<splice::DefaultIncrement>()?;
    m.add("DEFAULT", splice::DefaultIncrement)?;
    m.add_function(wrap_pyfunction!(splice::splice, m)?)?;
    m.add_function(wrap_pyfunction!(splice::cp, m)?)?;
    m.add_function(wrap_pyfunction!(splice::load_module, m)?)?;
    m.add_function(wrap_pyfunction!(splice::module_names, m)?)?;
    m.add_class::<semantics::SemanticEndpoint>()?;
    m.add_class::<semantics::ArenaBuffer>()?;
    m.add_class::<semantics::OwnedBuffer>()?;
    m.add_class::<semantics::Received>()?;
    m.add_function(wrap_pyfunction!(semantics::semantics_names, m)?)?;
    m.add_class::<semantics::CostModel>()?;
    m.add_function(wrap_pyfunction!(semantics::calibration_path, m)?)?;
    m.add_function(wrap_pyfunction!(semantics::calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(typed::_typed_header, m)?)?;
    m.add_function(wrap_pyfunction!(typed::_typed_check, m)?)?;
    Ok(())
}
