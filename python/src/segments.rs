//! The channels on this machine: `scan`, `inspect`, `reclaim`, `list_fallback` and the
//! counters (`stats_json`, `prometheus`), which `python -m shmlink` lists, shows and cleans
//! them with.

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
    d.set_item("kind", seg.kind)?;
    d.set_item("age_s", seg.age.map(|a| a.as_secs()))?;
    d.set_item("creator", endpoint(&seg.creator)?)?;
    d.set_item("connector", endpoint(&seg.connector)?)?;
    let subscribers = seg
        .subscribers
        .iter()
        .map(endpoint)
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("subscribers", subscribers)?;
    d.set_item("listener", seg.listener.as_deref())?;
    Ok(d.into_any().unbind())
}

/// The channels, listeners and topics of the ipc-channel fallback, as dicts (`name`, `kind`,
/// `pid`, `alive`).
#[pyfunction]
pub(crate) fn list_fallback(py: Python<'_>) -> PyResult<Vec<PyObject>> {
    py.allow_threads(shmlink::segments::list_fallback)
        .iter()
        .map(|f| {
            let d = PyDict::new(py);
            d.set_item("name", &f.name)?;
            d.set_item("kind", f.kind)?;
            d.set_item("pid", f.pid)?;
            d.set_item("alive", f.alive)?;
            Ok(d.into_any().unbind())
        })
        .collect()
}

/// The counters of the channel, topic or listener `name` as the JSON document of
/// `shmlink stat --json` (`shmlink::segments::Stats` serialised).
#[pyfunction]
pub(crate) fn stats_json(py: Python<'_>, name: &str) -> PyResult<String> {
    let stats = py
        .allow_threads(|| shmlink::segments::stats(name))
        .map_err(to_py)?;
    serde_json::to_string(&stats)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// The counters of the named channels, topics and listeners in the Prometheus text format
/// (`shmlink::segments::prometheus`).
#[pyfunction]
pub(crate) fn prometheus(py: Python<'_>, names: Vec<String>) -> PyResult<String> {
    let all = py
        .allow_threads(|| {
            names
                .iter()
                .map(|n| shmlink::segments::stats(n))
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(to_py)?;
    Ok(shmlink::segments::prometheus(&all))
}
