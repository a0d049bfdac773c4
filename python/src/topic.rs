//! `Publisher` and `Subscriber`: a topic's two kinds of end, with the send and the receive
//! halves of the method set written once in [`methods`](crate::methods).

use std::sync::Mutex;
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use shmlink::{
    EndpointPublisher as RsPublisher, EndpointSubscriber as RsSubscriber, OpenError,
    SubscriberConfig, TopicConfig, TopicMode,
};

use crate::buffer::{Payload, RawBuffer};
use crate::errors::{closed, to_py};
use crate::json::{codec, decode_json, encode_json, encoded_bytes};
use crate::methods::{self, Cell};
use crate::wait::{deadline, lock, next_slice, parse_backend, parse_wait};

/// The publishing end of a topic (see the package documentation).
#[pyclass(frozen, module = "shmlink")]
pub struct Publisher {
    end: Cell<RsPublisher>,
    name: String,
}

impl Publisher {
    fn send_bytes(
        &self,
        py: Python<'_>,
        bytes: &[u8],
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<()> {
        methods::send(py, &self.end, bytes, deadline, try_only)
    }

    fn send_batch_list(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyAny>,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<usize> {
        let payloads = batch
            .try_iter()?
            .map(|obj| Payload::from_obj(&obj?))
            .collect::<PyResult<Vec<_>>>()?;
        let views: Vec<&[u8]> = payloads.iter().map(Payload::bytes).collect();
        methods::send_batch(py, &self.end, &views, deadline, try_only)
    }

    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut RsPublisher) -> R) -> PyResult<R> {
        let mut g = lock(py, &self.end);
        Ok(f(g.as_mut().ok_or_else(closed)?))
    }
}

#[pymethods]
impl Publisher {
    /// Makes the topic `name` (a ring of `capacity` bytes, a power of two) and publishes on it.
    /// `mode` is `"lossless"` (the publisher waits for the slowest live subscriber) or
    /// `"overwrite"` (it never waits; a lapped subscriber gets `Lagged`); `history` messages
    /// are kept for subscribers that join late and ask for them.
    /// The backend is shared memory where a mapping can be made, else the ipc-channel fallback
    /// (each subscriber sent a copy of each message); `backend` (`"shm"` or `"ipc-channel"`)
    /// forces one.
    #[staticmethod]
    #[pyo3(signature = (name, capacity = 1 << 20, wait = "block", mode = "lossless", history = 0, max_subscribers = shmlink::DEFAULT_MAX_SUBSCRIBERS, backend = None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        name: &str,
        capacity: usize,
        wait: &str,
        mode: &str,
        history: usize,
        max_subscribers: usize,
        backend: Option<&str>,
    ) -> PyResult<Publisher> {
        let backend = parse_backend(backend)?;
        let mode = match mode {
            "lossless" => TopicMode::Lossless,
            "overwrite" => TopicMode::Overwrite,
            other => {
                return Err(to_py(OpenError::InvalidConfig {
                    channel: name.into(),
                    what: format!("mode must be 'lossless' or 'overwrite', not {other:?}"),
                }))
            }
        };
        let config = TopicConfig {
            capacity,
            wait: parse_wait(wait)?,
            mode,
            history,
            max_subscribers,
        };
        let publisher = py
            .allow_threads(|| match backend {
                None => RsPublisher::create(name, &config),
                Some(b) => RsPublisher::create_with(name, &config, b),
            })
            .map_err(to_py)?;
        Ok(Publisher {
            end: Mutex::new(Some(publisher)),
            name: name.to_owned(),
        })
    }

    /// Publishes `data` (bytes-like) to every subscriber, waiting for room up to `timeout`
    /// seconds (`None`: as long as it takes; an overwrite topic never waits).
    #[pyo3(signature = (data, timeout = None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        let p = Payload::from_obj(data)?;
        self.send_bytes(py, p.bytes(), deadline(timeout)?, false)
    }

    /// Publishes `data` now, or raises `Full`.
    fn try_send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = Payload::from_obj(data)?;
        self.send_bytes(py, p.bytes(), None, true)
    }

    /// Publishes `obj` encoded as JSON.
    #[pyo3(signature = (obj, timeout = None))]
    fn send_json(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let encoded = encode_json(py, obj)?;
        let end = deadline(timeout)?;
        self.send_bytes(py, encoded_bytes(py, &encoded)?, end, false)
    }

    /// Publishes `obj` encoded as JSON now, or raises `Full`.
    fn try_send_json(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let encoded = encode_json(py, obj)?;
        self.send_bytes(py, encoded_bytes(py, &encoded)?, None, true)
    }

    /// Publishes a plain value as one message (its bytes, as `Channel.send_value`).
    #[pyo3(signature = (value, timeout = None))]
    fn send_value(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        self.send(py, value, timeout)
    }

    /// `send_value` now, or raises `Full`.
    fn try_send_value(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.try_send(py, value)
    }

    /// Publishes the messages of `batch` in order; how many went (as `Channel.send_batch`).
    #[pyo3(signature = (batch, timeout = None))]
    fn send_batch(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<usize> {
        self.send_batch_list(py, batch, deadline(timeout)?, false)
    }

    /// `send_batch` of the messages that go now; raises `Full` when not even the first does.
    fn try_send_batch(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.send_batch_list(py, batch, None, true)
    }

    /// The subscribers now in the topic's table: a list of dicts with `slot`, `state`
    /// (`"joining"`, `"active"`, `"dropped"`), `pid`, `alive` and `behind` (bytes of the ring
    /// it has still to read).
    fn subscribers(&self, py: Python<'_>) -> PyResult<Py<PyList>> {
        let subs = self.with(py, |p| p.subscribers())?;
        let list = PyList::empty(py);
        for s in subs {
            let d = PyDict::new(py);
            d.set_item("slot", s.slot)?;
            d.set_item("state", s.state)?;
            d.set_item("pid", s.pid)?;
            d.set_item("alive", s.alive)?;
            d.set_item("behind", s.behind)?;
            list.append(d)?;
        }
        Ok(list.unbind())
    }

    /// How many subscribers read now.
    #[getter]
    fn subscriber_count(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |p| p.subscriber_count())
    }

    /// Messages published so far.
    #[getter]
    fn published(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |p| p.published())
    }

    /// Drops the subscriber in `slot` (its next receive raises `Dropped`); False if no
    /// subscriber holds it.
    fn drop_subscriber(&self, py: Python<'_>, slot: usize) -> PyResult<bool> {
        self.with(py, |p| p.drop_subscriber(slot))
    }

    /// The largest message (`capacity / 2 - 72`: a topic does not fragment).
    #[getter]
    fn max_message(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |p| p.max_message())
    }

    /// `"lossless"` or `"overwrite"`.
    #[getter]
    fn mode(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |p| match p.mode() {
            TopicMode::Overwrite => "overwrite",
            _ => "lossless",
        })
    }

    /// The topic's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// `"shm"` or `"ipc-channel"`.
    #[getter]
    fn backend(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |p| p.backend().as_str())
    }

    /// Closes the topic: subscribers read what is left, then get `Disconnected`. Closing
    /// twice does nothing.
    fn close(&self, py: Python<'_>) {
        let old = lock(py, &self.end).take();
        py.allow_threads(move || drop(old));
    }

    /// Whether this end is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        lock(py, &self.end).is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { " closed" } else { "" };
        format!("<shmlink publisher {:?}{state}>", self.name)
    }
}

/// A subscriber of a topic (see the package documentation).
#[pyclass(frozen, module = "shmlink")]
pub struct Subscriber {
    end: Cell<RsSubscriber>,
    name: String,
}

impl Subscriber {
    fn new_value(
        &self,
        py: Python<'_>,
        cls: &Bound<'_, PyAny>,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<PyObject> {
        let value = cls.call0()?;
        let buffer = RawBuffer::writable(&value)?;
        methods::recv(py, &self.end, deadline, try_only, &|_py, m, c| {
            if m.len() != buffer.len() {
                return Err(to_py(shmlink::RecvError::WrongSize {
                    channel: c.clone(),
                    len: m.len(),
                    expected: buffer.len(),
                }));
            }
            buffer.copy_in(m, c).map(drop)
        })?;
        drop(buffer);
        Ok(value.unbind())
    }

    fn recv_bytes(
        &self,
        py: Python<'_>,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<Py<PyBytes>> {
        methods::recv(py, &self.end, deadline, try_only, &|py, m, _| {
            Ok(PyBytes::new(py, m).unbind())
        })
    }

    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut RsSubscriber) -> R) -> PyResult<R> {
        let mut g = lock(py, &self.end);
        Ok(f(g.as_mut().ok_or_else(closed)?))
    }
}

#[pymethods]
impl Subscriber {
    /// Joins the topic `name`, asking for up to `history` messages published before it came,
    /// and waiting up to `timeout` seconds for the topic to appear (`None`: try once).
    #[staticmethod]
    #[pyo3(signature = (name, wait = "block", history = 0, timeout = None))]
    fn connect(
        py: Python<'_>,
        name: &str,
        wait: &str,
        history: usize,
        timeout: Option<f64>,
    ) -> PyResult<Subscriber> {
        let config = SubscriberConfig {
            wait: parse_wait(wait)?,
            history,
        };
        let end = deadline(timeout)?;
        let sub = loop {
            let r = py.allow_threads(|| RsSubscriber::connect_with(name, &config));
            match (r, end) {
                (Err(OpenError::NotFound { .. } | OpenError::NotReady { .. }), Some(end))
                    if Instant::now() < end =>
                {
                    let (slice, _) = next_slice(Some(end));
                    py.allow_threads(|| {
                        std::thread::sleep(slice.min(std::time::Duration::from_millis(5)))
                    });
                    py.check_signals()?;
                }
                (r, _) => break r.map_err(to_py)?,
            }
        };
        Ok(Subscriber {
            end: Mutex::new(Some(sub)),
            name: name.to_owned(),
        })
    }

    /// Receives the next message, waiting up to `timeout` seconds.
    #[pyo3(signature = (timeout = None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyBytes>> {
        self.recv_bytes(py, deadline(timeout)?, false)
    }

    /// Receives the message waiting now, or raises `Empty`.
    fn try_recv(&self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        self.recv_bytes(py, None, true)
    }

    /// Receives the next message into `buffer`; its length.
    #[pyo3(signature = (buffer, timeout = None))]
    fn recv_into(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<usize> {
        let buffer = RawBuffer::writable(buffer)?;
        methods::recv(py, &self.end, deadline(timeout)?, false, &|_py, m, c| {
            buffer.copy_in(m, c)
        })
    }

    /// `recv_into` of the message waiting now, or raises `Empty`.
    fn try_recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buffer = RawBuffer::writable(buffer)?;
        methods::recv(py, &self.end, None, true, &|_py, m, c| buffer.copy_in(m, c))
    }

    /// Receives the next message and decodes it as JSON.
    #[pyo3(signature = (timeout = None))]
    fn recv_json(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyObject> {
        codec(py)?;
        let b = self.recv_bytes(py, deadline(timeout)?, false)?;
        decode_json(py, b)
    }

    /// Receives the message waiting now and decodes it as JSON, or raises `Empty`.
    fn try_recv_json(&self, py: Python<'_>) -> PyResult<PyObject> {
        codec(py)?;
        let b = self.recv_bytes(py, None, true)?;
        decode_json(py, b)
    }

    /// Receives the next message as a value of `cls` (as `Channel.recv_value`).
    #[pyo3(signature = (cls, timeout = None))]
    fn recv_value(
        &self,
        py: Python<'_>,
        cls: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<PyObject> {
        self.new_value(py, cls, deadline(timeout)?, false)
    }

    /// `recv_value` of the message waiting now, or raises `Empty`.
    fn try_recv_value(&self, py: Python<'_>, cls: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        self.new_value(py, cls, None, true)
    }

    /// Receives the next message and those there now behind it, up to `max`: a list of
    /// `bytes` (as `Channel.recv_batch`).
    #[pyo3(signature = (max, timeout = None))]
    fn recv_batch(&self, py: Python<'_>, max: usize, timeout: Option<f64>) -> PyResult<Py<PyList>> {
        methods::recv_batch(py, &self.end, max, deadline(timeout)?, false)
    }

    /// `recv_batch` of the messages there now, or raises `Empty`.
    fn try_recv_batch(&self, py: Python<'_>, max: usize) -> PyResult<Py<PyList>> {
        methods::recv_batch(py, &self.end, max, None, true)
    }

    /// The slot this subscriber holds (as `Publisher.subscribers()` names it); `None` on the
    /// ipc-channel backend, whose publisher numbers its subscribers itself.
    #[getter]
    fn slot(&self, py: Python<'_>) -> PyResult<Option<usize>> {
        self.with(py, |s| s.slot())
    }

    /// `"shm"` or `"ipc-channel"`.
    #[getter]
    fn backend(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |s| s.backend().as_str())
    }

    /// The publisher's process id.
    #[getter]
    fn peer_pid(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        self.with(py, |s| s.peer_pid())
    }

    /// Whether the publisher is there and its process runs.
    fn is_peer_connected(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |s| s.is_peer_connected())
    }

    /// The largest message the publisher sends.
    #[getter]
    fn max_message(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |s| s.max_message())
    }

    /// The topic's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Leaves the topic (a lossless publisher no longer waits for it). Closing twice does
    /// nothing.
    fn close(&self, py: Python<'_>) {
        let old = lock(py, &self.end).take();
        py.allow_threads(move || drop(old));
    }

    /// Whether this end is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        lock(py, &self.end).is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { " closed" } else { "" };
        format!("<shmlink subscriber {:?}{state}>", self.name)
    }
}
