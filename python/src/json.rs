//! JSON: the codec the package chose at import (`orjson` or `json`), which `send_json` encodes
//! with and `recv_json` decodes with.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyString};

use crate::errors::{json_error, ShmlinkError};

/// The JSON codec the package chose (`orjson` when importable, else `json`): set once at import.
static CODEC: GILOnceCell<(PyObject, PyObject)> = GILOnceCell::new();

pub(crate) fn codec(py: Python<'_>) -> PyResult<&(PyObject, PyObject)> {
    CODEC.get(py).ok_or_else(|| {
        ShmlinkError::new_err("no JSON codec set (import shmlink, not shmlink._shmlink)")
    })
}

/// Sets the functions `send_json` encodes with (returning `bytes` or `str`) and `recv_json`
/// decodes with (taking `bytes`).
#[pyfunction]
pub(crate) fn _set_codec(py: Python<'_>, dumps: PyObject, loads: PyObject) -> PyResult<()> {
    CODEC
        .set(py, (dumps, loads))
        .map_err(|_| ShmlinkError::new_err("the JSON codec is already set"))
}

/// `obj` encoded by the package's codec: a `bytes` or a `str`.
pub(crate) fn encode_json<'py>(
    py: Python<'py>,
    obj: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let dumps = codec(py)?.0.bind(py);
    let encoded = dumps.call1((obj,)).map_err(|e| json_error(py, e, None))?;
    if encoded.is_instance_of::<PyBytes>() || encoded.is_instance_of::<PyString>() {
        Ok(encoded)
    } else {
        let kind = encoded.get_type().name()?;
        let e = PyTypeError::new_err(format!("the JSON codec returned {kind}, not bytes or str"));
        Err(json_error(py, e, None))
    }
}

/// The bytes of what `encode_json` returned.
pub(crate) fn encoded_bytes<'a>(
    py: Python<'_>,
    encoded: &'a Bound<'_, PyAny>,
) -> PyResult<&'a [u8]> {
    match encoded.downcast::<PyBytes>() {
        Ok(b) => Ok(b.as_bytes()),
        Err(_) => encoded
            .downcast::<PyString>()?
            .to_str()
            .map(str::as_bytes)
            .map_err(|e| json_error(py, e, None)),
    }
}

/// A received message decoded by the package's codec.
pub(crate) fn decode_json(py: Python<'_>, msg: Py<PyBytes>) -> PyResult<PyObject> {
    let loads = &codec(py)?.1;
    loads
        .call1(py, (msg.clone_ref(py),))
        .map_err(|e| json_error(py, e, Some(msg)))
}
