//! `Listener`: a name clients connect to; `accept` gives each client its own `Channel`.

use std::sync::Mutex;

use pyo3::prelude::*;

use shmlink::{Config, Connection, Listener as RsListener};

use crate::channel::Channel;
use crate::errors::{to_py, Closed};
use crate::wait::{deadline, lock, lock_nogil, next_slice, parse_wait};

/// A server's name that clients connect to (with `Channel.connect(name)`), each getting its
/// own channel from `accept`.
#[pyclass(frozen, module = "shmlink")]
pub struct Listener {
    inner: Mutex<Option<RsListener>>,
    name: String,
}

#[pymethods]
impl Listener {
    /// Binds the name `name`; each client's channel has `capacity` bytes per direction.
    #[staticmethod]
    #[pyo3(signature = (name, capacity = 1 << 20, wait = "block", max_clients = None))]
    fn bind(
        py: Python<'_>,
        name: &str,
        capacity: usize,
        wait: &str,
        max_clients: Option<usize>,
    ) -> PyResult<Listener> {
        let config = Config {
            capacity,
            wait: parse_wait(wait)?,
        };
        let l = py
            .allow_threads(|| match max_clients {
                None => RsListener::bind(name, &config),
                Some(n) => RsListener::bind_with_limit(name, &config, n),
            })
            .map_err(to_py)?;
        Ok(Listener {
            inner: Mutex::new(Some(l)),
            name: name.to_owned(),
        })
    }

    /// Accepts the next client, waiting up to `timeout` seconds (`None`: until one comes).
    #[pyo3(signature = (timeout = None))]
    fn accept(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Channel> {
        let end = deadline(timeout)?;
        loop {
            let (slice, last) = next_slice(end);
            let r = py.allow_threads(|| {
                let g = lock_nogil(&self.inner);
                let l = g.as_ref().ok_or(None)?;
                l.accept_timeout(slice).map_err(Some)
            });
            match r {
                Ok(conn) => {
                    let name = conn_name(&conn);
                    return Ok(Channel::wrap(conn, name));
                }
                Err(Some(shmlink::OpenError::Timeout { .. })) if !last => py.check_signals()?,
                Err(e) => {
                    return Err(e.map_or_else(|| Closed::new_err("the listener is closed"), to_py))
                }
            }
        }
    }

    /// Accepts a client waiting now, or raises `Empty`.
    fn try_accept(&self, py: Python<'_>) -> PyResult<Channel> {
        let g = lock(py, &self.inner);
        let l = g
            .as_ref()
            .ok_or_else(|| Closed::new_err("the listener is closed"))?;
        let conn = l.try_accept().map_err(to_py)?;
        let name = conn_name(&conn);
        Ok(Channel::wrap(conn, name))
    }

    /// The listener's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// How many clients it serves at once.
    #[getter]
    fn max_clients(&self, py: Python<'_>) -> PyResult<usize> {
        let g = lock(py, &self.inner);
        let l = g
            .as_ref()
            .ok_or_else(|| Closed::new_err("the listener is closed"))?;
        Ok(l.max_clients())
    }

    /// Stops accepting and removes the name (accepted channels stay open).
    fn close(&self, py: Python<'_>) {
        let old = lock(py, &self.inner).take();
        py.allow_threads(move || drop(old));
    }

    /// Whether the listener is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        lock(py, &self.inner).is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!("<shmlink listener {:?}>", self.name)
    }
}

fn conn_name(conn: &Connection) -> String {
    conn.name().to_owned()
}
