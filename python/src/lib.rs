//! `shmlink._shmlink`: the Python extension of shmlink, built with PyO3 and maturin.
//!
//! The Python package `shmlink` (python/shmlink/) re-exports what this module defines and sets
//! its JSON codec. Every wait here releases the GIL, and waits in slices of
//! [`SLICE`](wait::SLICE), checking for signals between them, so Ctrl-C interrupts a blocked
//! call within one slice. A batch receive stops taking messages one slice after its first, so a
//! peer that never lets the ring run dry cannot keep it (and the GIL) either.
//!
//! One module per class (`channel`, `endpoint`, `listener`, `selector`; `topic` holds both of a
//! topic's), the exceptions in
//! `errors`, and the message method set in `methods`, written once for every Rust type a
//! channel holds; `buffer`, `json` and `wait` are what they share.

mod buffer;
mod channel;
mod endpoint;
mod errors;
mod json;
mod listener;
mod methods;
mod segments;
mod selector;
mod topic;
mod wait;

use pyo3::prelude::*;

#[pymodule]
fn _shmlink(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<channel::Channel>()?;
    m.add_class::<endpoint::Endpoint>()?;
    m.add_class::<listener::Listener>()?;
    m.add_class::<selector::Selector>()?;
    m.add_class::<topic::Publisher>()?;
    m.add_class::<topic::Subscriber>()?;
    m.add_function(wrap_pyfunction!(json::_set_codec, m)?)?;
    m.add_function(wrap_pyfunction!(segments::scan, m)?)?;
    m.add_function(wrap_pyfunction!(segments::inspect, m)?)?;
    m.add_function(wrap_pyfunction!(segments::reclaim, m)?)?;
    m.add_function(wrap_pyfunction!(segments::list_fallback, m)?)?;
    m.add_function(wrap_pyfunction!(segments::stats_json, m)?)?;
    m.add_function(wrap_pyfunction!(segments::prometheus, m)?)?;
    m.add("SLICE_SECONDS", wait::SLICE.as_secs_f64())?;
    m.add("MAX_NAME_LEN", shmlink::MAX_NAME_LEN)?;
    errors::add_to(m)?;
    Ok(())
}
