//! `Endpoint`: a `Channel` on shared memory where a mapping can be made, else on ipc-channel.

use pyo3::prelude::*;

use shmlink::{Config, Endpoint as RsEndpoint};

use crate::channel::Channel;
use crate::errors::to_py;
use crate::wait::{connect_sliced, deadline, parse_backend, parse_wait};

/// One end of a channel on the shared-memory backend or, where no mapping can be made, the
/// ipc-channel one: the same methods as `Channel`.
#[pyclass(extends = Channel, frozen, module = "shmlink")]
pub struct Endpoint {}

#[pymethods]
impl Endpoint {
    /// Makes a channel named `name`, on shared memory if it can, else on ipc-channel.
    /// `backend` (`"shm"` or `"ipc-channel"`) forces one.
    #[staticmethod]
    #[pyo3(signature = (name, capacity = 1 << 20, wait = "block", backend = None))]
    fn create(
        py: Python<'_>,
        name: &str,
        capacity: usize,
        wait: &str,
        backend: Option<&str>,
    ) -> PyResult<Py<Endpoint>> {
        let config = Config {
            capacity,
            wait: parse_wait(wait)?,
        };
        let backend = parse_backend(backend)?;
        let ep = py
            .allow_threads(|| match backend {
                None => RsEndpoint::create(name, &config),
                Some(b) => RsEndpoint::create_with(name, &config, b),
            })
            .map_err(to_py)?;
        Py::new(py, (Endpoint {}, Channel::wrap(ep, name.to_owned())))
    }

    /// Connects to the channel or listener named `name`, on whichever backend it is.
    #[staticmethod]
    #[pyo3(signature = (name, wait = "block", timeout = None))]
    fn connect(
        py: Python<'_>,
        name: &str,
        wait: &str,
        timeout: Option<f64>,
    ) -> PyResult<Py<Endpoint>> {
        let wait = parse_wait(wait)?;
        let ep = match deadline(timeout)? {
            None => py.allow_threads(|| RsEndpoint::connect(name, wait)),
            Some(end) => connect_sliced(py, end, |t| RsEndpoint::connect_timeout(name, wait, t))?,
        }
        .map_err(to_py)?;
        Py::new(py, (Endpoint {}, Channel::wrap(ep, name.to_owned())))
    }
}
