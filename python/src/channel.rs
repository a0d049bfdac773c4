//! `Channel`: one end of a duplex channel, whatever Rust type holds it (a channel, a server's
//! connection, or an `Endpoint` on either backend); its message methods go through
//! [`Methods`](crate::methods::Methods).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use shmlink::{Channel as RsChannel, Config};

use crate::buffer::{Payload, RawBuffer};
use crate::errors::{closed, to_py};
use crate::json::{codec, decode_json, encode_json, encoded_bytes};
use crate::methods::{Held, Info, Methods, Slot};
use crate::wait::{connect_sliced, deadline, parse_wait};

/// One end of a duplex channel (see the package documentation).
#[pyclass(subclass, frozen, module = "shmlink")]
pub struct Channel {
    pub(crate) end: Box<dyn Methods>,
    name: String,
}

impl Channel {
    pub(crate) fn wrap<H: Held>(held: H, name: String) -> Channel {
        Channel {
            end: Box::new(Slot::new(held)),
            name,
        }
    }

    /// Sends the messages of `batch` (an iterable of bytes-like objects): see
    /// [`methods::send_batch`](crate::methods::send_batch).
    fn send_batch_list(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyAny>,
        deadline: Option<std::time::Instant>,
        try_only: bool,
    ) -> PyResult<usize> {
        let payloads = batch
            .try_iter()?
            .map(|obj| Payload::from_obj(&obj?))
            .collect::<PyResult<Vec<_>>>()?;
        let views: Vec<&[u8]> = payloads.iter().map(Payload::bytes).collect();
        self.end.send_batch(py, &views, deadline, try_only)
    }

    /// `recv_value` and `try_recv_value`: a new `cls()`, and the next message copied into its
    /// buffer (now, `try_only`, or within `deadline`).
    fn new_value(
        &self,
        py: Python<'_>,
        cls: &Bound<'_, PyAny>,
        deadline: Option<std::time::Instant>,
        try_only: bool,
    ) -> PyResult<PyObject> {
        let value = cls.call0()?;
        let buffer = RawBuffer::writable(&value)?;
        self.end.recv_value(py, &buffer, deadline, try_only)?;
        drop(buffer);
        Ok(value.unbind())
    }

    /// Runs `f` on the end, or raises `Closed`.
    fn with_end<R>(&self, py: Python<'_>, f: impl FnOnce(&mut dyn Info) -> R) -> PyResult<R> {
        let mut locked = self.end.lock(py);
        let held = locked.held().ok_or_else(closed)?;
        Ok(f(held))
    }
}

#[pymethods]
impl Channel {
    /// Makes a channel named `name` (`capacity` bytes per direction, a power of two), to which
    /// one peer connects with `Channel.connect(name)`.
    #[staticmethod]
    #[pyo3(signature = (name, capacity = 1 << 20, wait = "block"))]
    fn create(py: Python<'_>, name: &str, capacity: usize, wait: &str) -> PyResult<Channel> {
        let config = Config {
            capacity,
            wait: parse_wait(wait)?,
        };
        let ch = py
            .allow_threads(|| RsChannel::create(name, &config))
            .map_err(to_py)?;
        Ok(Channel::wrap(ch, name.to_owned()))
    }

    /// Connects to the channel or listener named `name`, waiting up to `timeout` seconds for it
    /// to appear (`None`: try once).
    #[staticmethod]
    #[pyo3(signature = (name, wait = "block", timeout = None))]
    fn connect(py: Python<'_>, name: &str, wait: &str, timeout: Option<f64>) -> PyResult<Channel> {
        let wait = parse_wait(wait)?;
        let end = deadline(timeout)?;
        let ch = match end {
            None => py.allow_threads(|| RsChannel::connect(name, wait)),
            Some(end) => connect_sliced(py, end, |t| RsChannel::connect_timeout(name, wait, t))?,
        }
        .map_err(to_py)?;
        Ok(Channel::wrap(ch, name.to_owned()))
    }

    /// Sends `data` (bytes-like), waiting for room up to `timeout` seconds (`None`: as long as
    /// it takes).
    #[pyo3(signature = (data, timeout = None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        let p = Payload::from_obj(data)?;
        self.end.send(py, p.bytes(), deadline(timeout)?, false)
    }

    /// Sends `data` now, or raises `Full`.
    fn try_send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = Payload::from_obj(data)?;
        self.end.send(py, p.bytes(), None, true)
    }

    /// Sends `obj` encoded as JSON (a failure to encode raises `JsonError`).
    #[pyo3(signature = (obj, timeout = None))]
    fn send_json(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let encoded = encode_json(py, obj)?;
        let end = deadline(timeout)?;
        self.end.send(py, encoded_bytes(py, &encoded)?, end, false)
    }

    /// Sends `obj` encoded as JSON now, or raises `Full`.
    fn try_send_json(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let encoded = encode_json(py, obj)?;
        self.end.send(py, encoded_bytes(py, &encoded)?, None, true)
    }

    /// Receives the next message, waiting up to `timeout` seconds (`None`: until one comes or
    /// the peer goes).
    #[pyo3(signature = (timeout = None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyBytes>> {
        self.end.recv(py, deadline(timeout)?, false)
    }

    /// Receives the message waiting now, or raises `Empty`.
    fn try_recv(&self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        self.end.recv(py, None, true)
    }

    /// Receives the next message into `buffer` (a writable bytes-like object) and returns its
    /// length. A message longer than the buffer raises `TooLarge` (and is dropped).
    #[pyo3(signature = (buffer, timeout = None))]
    fn recv_into(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<usize> {
        let buffer = RawBuffer::writable(buffer)?;
        self.end.recv_into(py, &buffer, deadline(timeout)?, false)
    }

    /// `recv_into` of the message waiting now, or raises `Empty`.
    fn try_recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let buffer = RawBuffer::writable(buffer)?;
        self.end.recv_into(py, &buffer, None, true)
    }

    /// Receives the next message and decodes it as JSON (a message that is not JSON raises
    /// `JsonError`, holding the message as `data`).
    #[pyo3(signature = (timeout = None))]
    fn recv_json(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<PyObject> {
        codec(py)?;
        let b = self.end.recv(py, deadline(timeout)?, false)?;
        decode_json(py, b)
    }

    /// Receives the message waiting now and decodes it as JSON, or raises `Empty`.
    fn try_recv_json(&self, py: Python<'_>) -> PyResult<PyObject> {
        codec(py)?;
        let b = self.end.recv(py, None, true)?;
        decode_json(py, b)
    }

    /// Sends a plain value as one message: the bytes of `value`, any object with a C-contiguous
    /// buffer (a `ctypes.Structure` instance, a numpy record or array...), as they are in
    /// memory. The receiver reads it with `recv_value` of the same type.
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

    /// Receives the next message as a value of `cls`, waiting up to `timeout` seconds: `cls()`
    /// makes an instance with a writable buffer (a `ctypes.Structure` subclass, a ctypes array
    /// type...) and the message, which must be exactly as long as that buffer, is copied into
    /// it. A message of another length raises `WrongSize` (and is consumed).
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

    /// Sends the messages of `batch` (an iterable of bytes-like objects) in order, waiting for
    /// room up to `timeout` seconds, and returns how many went: as many at a time as fit,
    /// published together. Fewer than all when one could not go after others had (its error
    /// is raised by the next call, which starts with it); raises only when the first did not.
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

    /// Receives the next message, waiting up to `timeout` seconds, and the messages there now
    /// behind it, up to `max` in all: a list of `bytes`. Taking the ones behind it ends after a
    /// ring's worth of them, one slice after the first, or at the deadline, whichever is first.
    #[pyo3(signature = (max, timeout = None))]
    fn recv_batch(&self, py: Python<'_>, max: usize, timeout: Option<f64>) -> PyResult<Py<PyList>> {
        self.end.recv_batch(py, max, deadline(timeout)?, false)
    }

    /// `recv_batch` of the messages there now (at most a ring's worth, in at most one slice),
    /// or raises `Empty`.
    fn try_recv_batch(&self, py: Python<'_>, max: usize) -> PyResult<Py<PyList>> {
        self.end.recv_batch(py, max, None, true)
    }

    /// Closes this end (the peer's next receive, after what was sent, raises `Disconnected`).
    /// Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        self.end.close(py);
    }

    /// Whether this end is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.end.lock(py).held().is_none()
    }

    /// The name the channel was made or found under.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The largest message that travels as one frame.
    #[getter]
    fn max_frame(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_end(py, |e| e.max_frame())
    }

    /// The largest message this end accepts (published to the peer).
    #[getter]
    fn get_max_message(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_end(py, |e| e.max_message())
    }

    #[setter]
    fn set_max_message(&self, py: Python<'_>, max: usize) -> PyResult<()> {
        self.with_end(py, |e| e.set_max_message(max))
    }

    /// Bytes in each direction's ring (`None` on the ipc-channel backend).
    #[getter]
    fn capacity(&self, py: Python<'_>) -> PyResult<Option<usize>> {
        self.with_end(py, |e| e.channel().map(|c| c.capacity()))
    }

    /// The peer's process id, once known.
    #[getter]
    fn peer_pid(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        self.with_end(py, |e| e.peer_pid())
    }

    /// Whether a peer is connected and has not closed.
    fn is_peer_connected(&self, py: Python<'_>) -> PyResult<bool> {
        self.with_end(py, |e| e.is_peer_connected())
    }

    /// `"shm"` or `"ipc-channel"`.
    #[getter]
    fn backend(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with_end(py, |e| e.backend().as_str())
    }

    /// The channel's counters, as `shmlink stat NAME --json` prints them: a dict with `name`,
    /// `kind`, `rings` (each direction's `capacity`, `fill`, and its `sender`'s and
    /// `receiver`'s counts), `subscribers` and `clients`. `NotAChannel` on the ipc-channel
    /// backend, which keeps no counters.
    fn stats(&self, py: Python<'_>) -> PyResult<PyObject> {
        if self.with_end(py, |e| e.backend())? == shmlink::Backend::IpcChannel {
            return Err(to_py(shmlink::OpenError::NotAChannel {
                channel: self.name.as_str().into(),
                reason: "it is on the ipc-channel backend, which keeps no counters".into(),
            }));
        }
        let text = crate::segments::stats_json(py, &self.name)?;
        Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
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
        format!("<shmlink channel {:?}{state}>", self.name)
    }
}
