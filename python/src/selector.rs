//! `Selector`: waits on many shared-memory channels at once.

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use shmlink::{Channel as RsChannel, Selector as RsSelector};

use crate::channel::Channel;
use crate::errors::Closed;
use crate::methods::Locked;
use crate::wait::{deadline, lock_nogil, next_slice};

/// Waits on many channels at once.
#[pyclass(module = "shmlink")]
pub struct Selector {
    inner: Mutex<RsSelector>,
}

impl Selector {
    fn run(
        &self,
        py: Python<'_>,
        channels: &Bound<'_, PyList>,
        timeout: Option<f64>,
        poll: bool,
    ) -> PyResult<Vec<usize>> {
        let chans: Vec<Py<Channel>> = channels
            .iter()
            .map(|c| c.extract::<Py<Channel>>())
            .collect::<PyResult<_>>()?;
        let end = if poll { None } else { deadline(timeout)? };
        // Lock in address order so that two selectors over overlapping sets cannot deadlock.
        let mut order: Vec<usize> = (0..chans.len()).collect();
        order.sort_by_key(|&i| chans[i].get() as *const Channel as usize);
        let refs: Vec<&Channel> = chans.iter().map(|c| c.get()).collect();
        loop {
            let (slice, last) = next_slice(end);
            let r = py.allow_threads(|| {
                let mut sel = lock_nogil(&self.inner);
                let mut guards: Vec<Option<Box<dyn Locked + '_>>> =
                    (0..refs.len()).map(|_| None).collect();
                for &i in &order {
                    guards[i] = Some(refs[i].end.lock_nogil());
                }
                let mut set: Vec<&mut RsChannel> = Vec::with_capacity(refs.len());
                for (i, g) in guards.iter_mut().enumerate() {
                    let held = g.as_mut().and_then(|g| g.held()).ok_or(Err(i))?;
                    set.push(held.channel().ok_or(Ok(i))?);
                }
                Ok(if poll {
                    sel.poll(&mut set).to_vec()
                } else {
                    sel.wait(&mut set, Some(slice)).to_vec()
                })
            });
            match r {
                Ok(ready) if !ready.is_empty() || poll || last => return Ok(ready),
                Ok(_) => py.check_signals()?,
                Err(Err(i)) => return Err(Closed::new_err(format!("channel {i} is closed"))),
                Err(Ok(i)) => {
                    return Err(PyValueError::new_err(format!(
                        "channel {i} is not on the shared-memory backend"
                    )))
                }
            }
        }
    }
}

#[pymethods]
impl Selector {
    #[new]
    fn new() -> Selector {
        Selector {
            inner: Mutex::new(RsSelector::new()),
        }
    }

    /// Waits until at least one of `channels` has a message (or its peer closed or died), or
    /// `timeout` seconds pass, and returns the indices of the ready ones (empty after a
    /// timeout).
    #[pyo3(signature = (channels, timeout = None))]
    fn wait(
        &self,
        py: Python<'_>,
        channels: &Bound<'_, PyList>,
        timeout: Option<f64>,
    ) -> PyResult<Vec<usize>> {
        self.run(py, channels, timeout, false)
    }

    /// The indices of the ready channels among `channels` now, without waiting.
    fn poll(&self, py: Python<'_>, channels: &Bound<'_, PyList>) -> PyResult<Vec<usize>> {
        self.run(py, channels, None, true)
    }
}
