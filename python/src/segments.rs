//! The channels on this machine: `scan`, `inspect` and `reclaim`, which `python -m shmlink`
//! lists and cleans them with.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::to_py;

/// What `scan` returns: the channels, and the entries skipped with the reason.
type Listing = (Vec<PyObject>, Vec<(String, String)>);

/// The channels on this machine, as dicts (the fields of `shmlink-clean`'s listing), and the
/// entries named like channels that are not ones, as `(name, reason)`.
#[pyfunction]
pub(crate) fn scan(py: Python<'_>) -> PyResult<Listing> {
    let listing = py.allow_threads(shmlink::segments::scan).map_err(to_py)?;
    let mut out = Vec::new();
    for seg in &listing.channels {
        out.push(segment_dict(py, seg)?);
    }
    let skipped = listing
        .skipped
        .into_iter()
        .map(|s| (s.name, s.reason))
        .collect();
    Ok((out, skipped))
}

/// The channel named `name`, as a dict like `scan`'s.
#[pyfunction]
pub(crate) fn inspect(py: Python<'_>, name: &str) -> PyResult<PyObject> {
    let seg = py
        .allow_threads(|| shmlink::segments::inspect(name))
        .map_err(to_py)?;
    segment_dict(py, &seg)
}

/// Removes the channel named `name` if its creator is gone: returns `"removed"`,
/// `"vanished"`, `"alive"` or `"not-a-channel"`.
#[pyfunction]
pub(crate) fn reclaim(py: Python<'_>, name: &str) -> PyResult<&'static str> {
    use shmlink::segments::Reclaim;
    let r = py
        .allow_threads(|| shmlink::segments::reclaim(name))
        .map_err(to_py)?;
    Ok(match r {
        Reclaim::Removed => "removed",
        Reclaim::Vanished => "vanished",
        Reclaim::Alive => "alive",
        Reclaim::NotAChannel => "not-a-channel",
    })
}

fn segment_dict(py: Python<'_>, seg: &shmlink::segments::SegmentInfo) -> PyResult<PyObject> {
    let endpoint = |e: &shmlink::segments::EndpointInfo| -> PyResult<PyObject> {
        let d = PyDict::new(py);
        d.set_item("state", e.state)?;
        d.set_item("pid", e.pid)?;
        d.set_item("alive", e.alive)?;
        Ok(d.into_any().unbind())
    };
    let d = PyDict::new(py);
    d.set_item("name", &seg.name)?;
    d.set_item("size", seg.size)?;
    d.set_item("ready", seg.ready)?;
    d.set_item("stale", seg.stale)?;
    d.set_item("creator", endpoint(&seg.creator)?)?;
    d.set_item("connector", endpoint(&seg.connector)?)?;
    Ok(d.into_any().unbind())
}
