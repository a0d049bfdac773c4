//! `shmlink._shmlink`: the Python extension of shmlink, built with PyO3 and maturin.
//!
//! The Python package `shmlink` (python/shmlink/) re-exports what this module defines and sets
//! its JSON codec. Every wait here releases the GIL, and waits in slices of [`SLICE`], checking
//! for signals between them, so Ctrl-C interrupts a blocked call within one slice. A batch
//! receive stops taking messages one slice after its first, so a peer that never lets the ring
//! run dry cannot keep it (and the GIL) either.

use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyMemoryError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};

use shmlink::{
    Backend, Channel as RsChannel, Config, Connection, Endpoint as RsEndpoint, Error,
    Listener as RsListener, Selector as RsSelector, WaitStrategy,
};

/// The longest a wait runs without the GIL before it looks for a pending signal (Ctrl-C), and
/// the longest a batch receive goes on taking messages after its first.
const SLICE: Duration = Duration::from_millis(50);

/// How many messages a batch receive takes at a time with the GIL held, between two looks at
/// its bounds.
const BATCH_CHUNK: usize = 256;

/// The bytes a message of `len` bytes takes in a ring as one frame: an 8-byte header and the
/// payload padded to 8 bytes (a message of several frames takes at least as much).
fn frame_bytes(len: usize) -> usize {
    8 + len.div_ceil(8) * 8
}

create_exception!(
    shmlink,
    ShmlinkError,
    PyException,
    "Base class of every shmlink error."
);
create_exception!(
    shmlink,
    Timeout,
    ShmlinkError,
    "A wait ran past its deadline."
);
create_exception!(
    shmlink,
    Full,
    ShmlinkError,
    "No room in the channel now (try_ forms)."
);
create_exception!(
    shmlink,
    Empty,
    ShmlinkError,
    "Nothing waiting now (try_ forms)."
);
create_exception!(
    shmlink,
    Disconnected,
    ShmlinkError,
    "The peer closed its end."
);
create_exception!(
    shmlink,
    PeerGone,
    ShmlinkError,
    "The peer's process exited or was killed without closing its end."
);
create_exception!(
    shmlink,
    TooLarge,
    ShmlinkError,
    "The message is longer than the receiver (or this side, or the buffer) accepts."
);
create_exception!(
    shmlink,
    Corrupt,
    ShmlinkError,
    "The shared memory holds a value this side will not interpret."
);
create_exception!(
    shmlink,
    NotFound,
    ShmlinkError,
    "Nothing exists under that name (yet)."
);
create_exception!(
    shmlink,
    NotReady,
    ShmlinkError,
    "The channel exists but its creator has not finished making it."
);
create_exception!(
    shmlink,
    AlreadyExists,
    ShmlinkError,
    "A channel or listener of that name exists and its creator is alive."
);
create_exception!(
    shmlink,
    AlreadyConnected,
    ShmlinkError,
    "The channel already has (or had) its connecting end."
);
create_exception!(
    shmlink,
    InvalidName,
    ShmlinkError,
    "The name is not acceptable."
);
create_exception!(
    shmlink,
    InvalidConfig,
    ShmlinkError,
    "A configuration value is out of range."
);
create_exception!(
    shmlink,
    NotPrivate,
    ShmlinkError,
    "The object under the name belongs to another user or is open to other users."
);
create_exception!(
    shmlink,
    NotAChannel,
    ShmlinkError,
    "The entry under the name is not a shmlink channel."
);
create_exception!(
    shmlink,
    Incompatible,
    ShmlinkError,
    "The channel was made by an incompatible build (magic, version, layout or size)."
);
create_exception!(
    shmlink,
    TooManyClients,
    ShmlinkError,
    "The listener serves as many clients as it accepts."
);
create_exception!(
    shmlink,
    Closed,
    ShmlinkError,
    "The object was closed on this side."
);
create_exception!(
    shmlink,
    IoError,
    ShmlinkError,
    "An operating-system call failed."
);

/// The Python exception for a library error, with its details as attributes (`channel` on
/// every error that names one).
fn to_py(e: impl Into<Error>) -> PyErr {
    use shmlink::{OpenError as O, RecvError as R, SendError as S};
    let e: Error = e.into();
    let msg = e.to_string();
    let mut attrs: Vec<(&str, String)> = e
        .channel()
        .map(|c| vec![("channel", c.to_string())])
        .unwrap_or_default();
    let err = match e {
        Error::Open(O::Timeout { .. })
        | Error::Send(S::Timeout { .. })
        | Error::Recv(R::Timeout { .. }) => Timeout::new_err(msg),
        Error::Send(S::Full { .. }) => Full::new_err(msg),
        Error::Recv(R::Empty { .. }) | Error::Open(O::NoClient { .. }) => Empty::new_err(msg),
        Error::Open(O::Disconnected { .. })
        | Error::Send(S::Disconnected { .. })
        | Error::Recv(R::Disconnected { .. }) => Disconnected::new_err(msg),
        Error::Open(O::PeerGone { pid, .. })
        | Error::Send(S::PeerGone { pid, .. })
        | Error::Recv(R::PeerGone { pid, .. }) => {
            attrs.push(("pid", pid.to_string()));
            PeerGone::new_err(msg)
        }
        Error::Send(S::TooLarge { len, max, .. }) | Error::Recv(R::TooLarge { len, max, .. }) => {
            attrs.push(("len", len.to_string()));
            attrs.push(("max", max.to_string()));
            TooLarge::new_err(msg)
        }
        Error::Open(O::Corrupt { .. })
        | Error::Send(S::Corrupt { .. })
        | Error::Recv(R::Corrupt { .. }) => Corrupt::new_err(msg),
        Error::Open(O::NotFound { .. }) => NotFound::new_err(msg),
        Error::Open(O::NotReady { .. }) => NotReady::new_err(msg),
        Error::Open(O::AlreadyExists { .. }) => AlreadyExists::new_err(msg),
        Error::Open(O::AlreadyConnected { .. }) => AlreadyConnected::new_err(msg),
        Error::Open(O::InvalidName { .. }) => InvalidName::new_err(msg),
        Error::Open(O::InvalidConfig { .. }) | Error::UnknownWaitStrategy { .. } => {
            InvalidConfig::new_err(msg)
        }
        Error::Open(O::NotPrivate { .. }) => NotPrivate::new_err(msg),
        Error::Open(O::NotAChannel { .. }) => NotAChannel::new_err(msg),
        Error::Open(
            O::BadMagic { .. }
            | O::VersionMismatch { .. }
            | O::LayoutMismatch { .. }
            | O::SizeMismatch { .. },
        ) => Incompatible::new_err(msg),
        Error::Open(O::TooManyClients { .. }) => TooManyClients::new_err(msg),
        Error::Open(O::Io(io)) | Error::Send(S::Io(io)) | Error::Recv(R::Io(io)) => {
            attrs.push(("errno", io.raw_os_error().unwrap_or(0).to_string()));
            IoError::new_err(msg)
        }
        _ => ShmlinkError::new_err(msg),
    };
    if !attrs.is_empty() {
        Python::with_gil(|py| {
            let value = err.value(py);
            for (key, v) in attrs {
                let _ = match v.parse::<u64>() {
                    Ok(n) if key != "channel" => value.setattr(key, n),
                    _ => value.setattr(key, v),
                };
            }
        });
    }
    err
}

fn closed() -> PyErr {
    Closed::new_err("the channel is closed")
}

/// A wait's end: `None` for no deadline.
fn deadline(timeout: Option<f64>) -> PyResult<Option<Instant>> {
    match timeout {
        None => Ok(None),
        Some(t) if t.is_finite() && t >= 0.0 => {
            let d =
                Duration::try_from_secs_f64(t).map_err(|e| PyValueError::new_err(e.to_string()))?;
            Ok(Some(
                Instant::now().checked_add(d).unwrap_or_else(far_future),
            ))
        }
        Some(t) if t.is_infinite() && t > 0.0 => Ok(None),
        Some(t) => Err(PyValueError::new_err(format!(
            "timeout must be a non-negative number of seconds or None, not {t}"
        ))),
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// The slice to wait next and whether it is the last before the deadline.
fn next_slice(deadline: Option<Instant>) -> (Duration, bool) {
    match deadline {
        None => (SLICE, false),
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left <= SLICE {
                (left, true)
            } else {
                (SLICE, false)
            }
        }
    }
}

fn parse_wait(wait: &str) -> PyResult<WaitStrategy> {
    wait.parse().map_err(|_| {
        PyValueError::new_err(format!(
            "wait must be 'block', 'spin' or 'yield', not {wait:?}"
        ))
    })
}

/// Locks `m` without blocking while holding the GIL: first a try, then, if another thread
/// holds it, a wait with the GIL released (the holder may need the GIL to finish).
fn lock<'a, T: Send>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    match m.try_lock() {
        Ok(g) => g,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => {
            py.allow_threads(|| Guard(m.lock().unwrap_or_else(|p| p.into_inner())))
                .0
        }
    }
}

/// Carries a guard out of `allow_threads` (the guard itself is not `Send`, but it is only
/// moved back to the thread that took it).
struct Guard<G>(G);
// SAFETY: `allow_threads` runs its closure on the calling thread, so the guard never leaves
// the thread that locked the mutex; the wrapper only satisfies the `Ungil` bound.
unsafe impl<G> Send for Guard<G> {}

fn lock_nogil<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a Python channel holds: a channel, a server's connection (a channel that frees its
/// listener slot when dropped), or an endpoint on either backend.
enum Inner {
    Chan(RsChannel),
    Conn(Connection),
    Ep(RsEndpoint),
}

/// Runs `$body` with `$x` bound to the inner endpoint, whatever its kind (they share the
/// library's method set).
macro_rules! each {
    ($inner:expr, $x:ident => $body:expr) => {
        match $inner {
            Inner::Chan($x) => $body,
            Inner::Conn($x) => $body,
            Inner::Ep($x) => $body,
        }
    };
}

impl Inner {
    fn channel(&mut self) -> Option<&mut RsChannel> {
        match self {
            Inner::Chan(c) => Some(c),
            Inner::Conn(c) => Some(c.channel()),
            Inner::Ep(e) => e.as_channel(),
        }
    }
}

/// Bytes to send: borrowed from a `bytes`, or copied from any other buffer.
enum Payload<'py> {
    Bytes(Bound<'py, PyBytes>),
    Owned(Vec<u8>),
}

impl Payload<'_> {
    fn from_obj<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Payload<'py>> {
        if let Ok(b) = obj.downcast::<PyBytes>() {
            return Ok(Payload::Bytes(b.clone()));
        }
        if obj.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "send takes bytes-like data, not str (encode it, or use send_json)",
            ));
        }
        Ok(Payload::Owned(RawBuffer::get(obj)?.to_vec(obj.py())?))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Payload::Bytes(b) => b.as_bytes(),
            Payload::Owned(v) => v,
        }
    }
}

/// An object's buffer (the buffer protocol), seen as bytes whatever its item type: a numpy
/// array of any dtype, a `bytearray`, a `memoryview`... Released when dropped.
///
/// PyO3's `PyBuffer<u8>` refuses a buffer whose items are not bytes; this asks for the export
/// without a format, which tells the exporter the bytes are all that is looked at.
///
/// The view is boxed: an exporter may point its `shape` into the view itself, so it must not
/// move while exported.
struct RawBuffer(Box<ffi::Py_buffer>);

// SAFETY: the view is only read, written through or released with the GIL held (every method
// takes it or is called under it, and `Drop` takes it), as PyO3's own `PyBuffer` does.
unsafe impl Send for RawBuffer {}
// SAFETY: as for `Send`: with the GIL held, one thread at a time touches it.
unsafe impl Sync for RawBuffer {}

impl RawBuffer {
    /// Exports `obj`'s buffer, read-only or writable, contiguous or strided (not indirect).
    fn get(obj: &Bound<'_, PyAny>) -> PyResult<RawBuffer> {
        let mut view = Box::new(ffi::Py_buffer::new());
        // SAFETY: `obj` is a live object and the GIL is held (`Bound`); `view` points to a
        // `Py_buffer` the call fills in. PyBUF_STRIDES without PyBUF_FORMAT: shape and strides
        // given, the items seen as unsigned bytes.
        let rc = unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, ffi::PyBUF_STRIDES) };
        if rc == -1 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(RawBuffer(view))
    }

    /// The length in bytes.
    fn len(&self) -> usize {
        // A buffer's length is never negative.
        usize::try_from(self.0.len).unwrap_or(0)
    }

    fn readonly(&self) -> bool {
        self.0.readonly != 0
    }

    fn is_c_contiguous(&self) -> bool {
        // SAFETY: the view was filled by `PyObject_GetBuffer` and not released; the GIL is held
        // by the caller (every caller holds a `Python` or a `Bound`).
        unsafe { ffi::PyBuffer_IsContiguous(&*self.0, b'C' as std::ffi::c_char) != 0 }
    }

    /// The first byte (of `len` bytes when C-contiguous).
    fn ptr(&self) -> *mut u8 {
        self.0.buf.cast()
    }

    /// A copy of the bytes, in C order whatever the layout.
    fn to_vec(&self, py: Python<'_>) -> PyResult<Vec<u8>> {
        let mut v = Vec::<u8>::with_capacity(self.len());
        // SAFETY: `v` has room for `len` bytes, which `PyBuffer_ToContiguous` writes (in C
        // order, from a view filled by `PyObject_GetBuffer` and not released) before `set_len`
        // exposes them; the GIL is held (`py`).
        unsafe {
            let rc = ffi::PyBuffer_ToContiguous(
                v.as_mut_ptr().cast(),
                &*self.0,
                self.0.len,
                b'C' as std::ffi::c_char,
            );
            if rc == -1 {
                return Err(PyErr::fetch(py));
            }
            v.set_len(self.len());
        }
        Ok(v)
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        Python::with_gil(|_| {
            // SAFETY: the view was filled by `PyObject_GetBuffer` and is released once, here,
            // with the GIL held.
            unsafe { ffi::PyBuffer_Release(&mut *self.0) }
        });
    }
}

/// The JSON codec the package chose (`orjson` when importable, else `json`): set once at import.
static CODEC: GILOnceCell<(PyObject, PyObject)> = GILOnceCell::new();

fn codec(py: Python<'_>) -> PyResult<&(PyObject, PyObject)> {
    CODEC.get(py).ok_or_else(|| {
        ShmlinkError::new_err("no JSON codec set (import shmlink, not shmlink._shmlink)")
    })
}

/// Sets the functions `send_json` encodes with (returning `bytes` or `str`) and `recv_json`
/// decodes with (taking `bytes`).
#[pyfunction]
fn _set_codec(py: Python<'_>, dumps: PyObject, loads: PyObject) -> PyResult<()> {
    CODEC
        .set(py, (dumps, loads))
        .map_err(|_| ShmlinkError::new_err("the JSON codec is already set"))
}

/// `JsonError`: a `ShmlinkError` and a `ValueError` (what the codecs raise for text that is not
/// JSON), made at import as `type(...)` does, since `create_exception!` takes one base.
static JSON_ERROR: GILOnceCell<Py<PyType>> = GILOnceCell::new();

fn json_error_type(py: Python<'_>) -> PyResult<&Py<PyType>> {
    JSON_ERROR.get_or_try_init(py, || {
        let bases = PyTuple::new(
            py,
            [py.get_type::<ShmlinkError>(), py.get_type::<PyValueError>()],
        )?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "shmlink")?;
        namespace.set_item(
            "__doc__",
            "A message that is not JSON (recv_json; `data` holds it), or an object the JSON codec \
             cannot encode (send_json; `data` is None). The codec's exception is the cause.",
        )?;
        Ok(py
            .get_type::<PyType>()
            .call1(("JsonError", bases, namespace))?
            .downcast_into::<PyType>()?
            .unbind())
    })
}

/// The codec's exception `cause` as a `JsonError` with the same message, `data` the message
/// that did not decode (`None` when encoding failed). An exception that says nothing about the
/// JSON (`KeyboardInterrupt`, `MemoryError`...) goes through as it is.
fn json_error(py: Python<'_>, cause: PyErr, data: Option<Py<PyBytes>>) -> PyErr {
    if !cause.is_instance_of::<PyException>(py) || cause.is_instance_of::<PyMemoryError>(py) {
        return cause;
    }
    let ty = match json_error_type(py) {
        Ok(ty) => ty.bind(py).clone(),
        Err(e) => return e,
    };
    let msg = cause
        .value(py)
        .str()
        .map_or_else(|_| String::from("JSON codec error"), |s| s.to_string());
    let err = PyErr::from_type(ty, msg);
    if let Err(e) = err.value(py).setattr("data", data) {
        return e;
    }
    err.set_cause(py, Some(cause));
    err
}

/// `obj` encoded by the package's codec: a `bytes` or a `str`.
fn encode_json<'py>(py: Python<'py>, obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
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
fn encoded_bytes<'a>(py: Python<'_>, encoded: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
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
fn decode_json(py: Python<'_>, msg: Py<PyBytes>) -> PyResult<PyObject> {
    let loads = &codec(py)?.1;
    loads
        .call1(py, (msg.clone_ref(py),))
        .map_err(|e| json_error(py, e, Some(msg)))
}

/// One end of a duplex channel (see the package documentation).
#[pyclass(subclass, frozen, module = "shmlink")]
pub struct Channel {
    inner: Mutex<Option<Inner>>,
    name: String,
}

impl Channel {
    fn wrap(inner: Inner, name: String) -> Channel {
        Channel {
            inner: Mutex::new(Some(inner)),
            name,
        }
    }

    /// Sends `bytes` now or within `deadline`, waiting in slices with the GIL released.
    fn send_bytes(
        &self,
        py: Python<'_>,
        bytes: &[u8],
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<()> {
        // Fast path, with the GIL held: a send that fits now (a message longer than a frame,
        // unless `try_only`, goes the slow way: `try_send` refuses one the ring cannot hold
        // whole, which a waiting send delivers as the peer reads).
        if let Ok(mut g) = self.inner.try_lock() {
            let inner = g.as_mut().ok_or_else(closed)?;
            if try_only || bytes.len() <= each!(inner, x => x.max_frame()) {
                match each!(inner, x => x.try_send(bytes)) {
                    Ok(()) => return Ok(()),
                    Err(shmlink::SendError::Full { .. }) if !try_only => {}
                    Err(e) => return Err(to_py(e)),
                }
            }
        } else if try_only {
            let r = py.allow_threads(|| {
                let mut g = lock_nogil(&self.inner);
                let inner = g.as_mut().ok_or(None)?;
                each!(inner, x => x.try_send(bytes)).map_err(|e| Some(Error::from(e)))
            });
            return r.map_err(|e| e.map_or_else(closed, to_py));
        }
        if try_only {
            return Err(to_py(shmlink::SendError::Full {
                channel: self.name.as_str().into(),
            }));
        }
        let mut whole = false;
        loop {
            let (slice, last) = next_slice(deadline);
            let r = py.allow_threads(|| {
                let mut g = lock_nogil(&self.inner);
                let inner = g.as_mut().ok_or(None)?;
                // A message longer than one frame is withdrawn if its deadline passes part-way:
                // it waits in one call (to its own deadline), not in slices.
                let long = bytes.len() > each!(inner, x => x.max_frame());
                let wait = if long {
                    whole = true;
                    deadline.map(|d| d.saturating_duration_since(Instant::now()))
                } else {
                    Some(slice)
                };
                match wait {
                    Some(w) => each!(inner, x => x.send_timeout(bytes, w)),
                    None => each!(inner, x => x.send(bytes)),
                }
                .map_err(|e| Some(Error::from(e)))
            });
            match r {
                Ok(()) => return Ok(()),
                Err(Some(Error::Send(shmlink::SendError::Timeout { .. }))) if !last && !whole => {
                    py.check_signals()?
                }
                Err(e) => return Err(e.map_or_else(closed, to_py)),
            }
        }
    }

    /// Receives one message now (`try_only`) or within `deadline`, and hands it to `take`
    /// (called with the GIL held).
    fn recv_with<R: Send>(
        &self,
        py: Python<'_>,
        deadline: Option<Instant>,
        try_only: bool,
        take: &(dyn Fn(Python<'_>, &[u8]) -> PyResult<R> + Sync),
    ) -> PyResult<R> {
        // Fast path, with the GIL held: a message waiting now.
        if let Ok(mut g) = self.inner.try_lock() {
            let inner = g.as_mut().ok_or_else(closed)?;
            match each!(inner, x => x.try_recv().map(|m| take(py, &m))) {
                Ok(r) => return r,
                Err(shmlink::RecvError::Empty { .. }) if !try_only => {}
                Err(e) => return Err(to_py(e)),
            }
        } else if try_only {
            // Another thread holds the channel: wait for it without the GIL, then try.
            let r = py.allow_threads(|| {
                let mut g = lock_nogil(&self.inner);
                let inner = g.as_mut().ok_or(None)?;
                each!(inner, x => x.try_recv().map(|m| Python::with_gil(|py| take(py, &m))))
                    .map_err(|e| Some(Error::from(e)))
            });
            return r.map_err(|e| e.map_or_else(closed, to_py))?;
        }
        if try_only {
            return Err(to_py(shmlink::RecvError::Empty {
                channel: self.name.as_str().into(),
            }));
        }
        loop {
            let (slice, last) = next_slice(deadline);
            let r = py.allow_threads(|| {
                let mut g = lock_nogil(&self.inner);
                let inner = g.as_mut().ok_or(None)?;
                // The message is copied out while it is in the ring, so the GIL is taken back
                // with the channel still locked: every other lock of it is taken without the GIL.
                each!(inner, x => x.recv_timeout(slice).map(|m| Python::with_gil(|py| take(py, &m))))
                    .map_err(|e| Some(Error::from(e)))
            });
            match r {
                Ok(r) => return r,
                Err(Some(Error::Recv(shmlink::RecvError::Timeout { .. }))) if !last => {
                    py.check_signals()?
                }
                Err(e) => return Err(e.map_or_else(closed, to_py)),
            }
        }
    }

    /// Sends the messages of `batch` (an iterable of bytes-like objects) in order: as many at a
    /// time as go now, with the GIL held, and, when none does, the next one as `send` sends it
    /// (waiting in slices). Returns how many went; an error after the first message ends the
    /// batch (the next call meets it again), except an exception that is not the library's
    /// (`KeyboardInterrupt` from a wait), which is raised whatever went.
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
        let mut sent = 0;
        let ended = |sent: usize, e: PyErr| {
            if sent > 0 && e.is_instance_of::<ShmlinkError>(py) {
                Ok(sent)
            } else {
                Err(e)
            }
        };
        while sent < views.len() {
            let now = match self.inner.try_lock() {
                Ok(mut g) => {
                    let inner = g.as_mut().ok_or_else(closed)?;
                    if try_only || views[sent].len() <= each!(inner, x => x.max_frame()) {
                        each!(inner, x => x.try_send_batch(&views[sent..]))
                    } else {
                        // Longer than a frame: `send` delivers it as the peer reads.
                        Err(shmlink::SendError::Full {
                            channel: self.name.as_str().into(),
                        })
                    }
                }
                Err(_) if try_only => {
                    // Another thread holds the channel: wait for it without the GIL, then try,
                    // as `try_send` does.
                    let rest = &views[sent..];
                    let r = py.allow_threads(|| {
                        let mut g = lock_nogil(&self.inner);
                        let inner = g.as_mut().ok_or(None)?;
                        each!(inner, x => x.try_send_batch(rest)).map_err(Some)
                    });
                    match r {
                        Ok(n) => Ok(n),
                        Err(None) => return ended(sent, closed()),
                        Err(Some(e)) => Err(e),
                    }
                }
                // Held by another thread: `send` below waits for it (and for room).
                Err(_) => Err(shmlink::SendError::Full {
                    channel: self.name.as_str().into(),
                }),
            };
            match now {
                Ok(n) => sent += n,
                Err(shmlink::SendError::Full { .. }) if try_only => {
                    return ended(
                        sent,
                        to_py(shmlink::SendError::Full {
                            channel: self.name.as_str().into(),
                        }),
                    );
                }
                Err(shmlink::SendError::Full { .. }) => {
                    match self.send_bytes(py, views[sent], deadline, false) {
                        Ok(()) => sent += 1,
                        Err(e) => return ended(sent, e),
                    }
                }
                Err(e) => return ended(sent, to_py(e)),
            }
        }
        Ok(sent)
    }

    /// Receives the next message as `recv` does (or now, `try_only`), then the messages there
    /// now behind it, up to `max` in all: a list of `bytes`.
    ///
    /// A peer that keeps the ring from running dry could keep a batch going for ever, so the
    /// messages after the first are taken in chunks of [`BATCH_CHUNK`] with the GIL held, and
    /// between chunks the batch looks at its bounds: it ends once it holds a ring's worth of
    /// frames, [`SLICE`] after its first message, or at its deadline, whichever comes first.
    /// Between chunks it also lets other threads take the GIL. It does not run signal handlers
    /// itself (one that raises would drop the messages already taken): it returns within a
    /// slice, and the interpreter runs them then.
    fn recv_batch_list(
        &self,
        py: Python<'_>,
        max: usize,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<Py<PyList>> {
        let list = PyList::empty(py);
        if max == 0 {
            return Ok(list.unbind());
        }
        let first = self.recv_bytes(py, deadline, try_only)?;
        let mut taken = frame_bytes(first.bind(py).as_bytes().len());
        list.append(first)?;
        let end = match deadline {
            Some(d) => d.min(Instant::now() + SLICE),
            None => Instant::now() + SLICE,
        };
        let mut budget = None;
        while list.len() < max {
            let want = (max - list.len()).min(BATCH_CHUNK);
            // Another thread holds the channel: the batch ends with what it has.
            let Ok(mut g) = self.inner.try_lock() else {
                break;
            };
            let Some(inner) = g.as_mut() else { break };
            // The ipc-channel backend has no ring: a default ring's worth.
            let budget = *budget.get_or_insert_with(|| {
                inner
                    .channel()
                    .map_or_else(|| Config::default().capacity, |c| c.capacity())
            });
            let mut failed = None;
            let got = each!(inner, x => x.try_recv_batch(want, |m| {
                taken += frame_bytes(m.len());
                if let Err(e) = list.append(PyBytes::new(py, m)) {
                    failed.get_or_insert(e);
                }
            }));
            drop(g);
            if let Some(e) = failed {
                return Err(e);
            }
            // Fewer than asked: nothing more there now. An error (`Empty` among them) ends
            // the batch too; the next call meets it.
            if got.map_or(true, |n| n < want) || taken >= budget || Instant::now() >= end {
                break;
            }
            py.allow_threads(|| ());
        }
        Ok(list.unbind())
    }

    fn recv_bytes(
        &self,
        py: Python<'_>,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<Py<PyBytes>> {
        self.recv_with(py, deadline, try_only, &|py, m| {
            Ok(PyBytes::new(py, m).unbind())
        })
    }

    fn recv_into_buf(
        &self,
        py: Python<'_>,
        buffer: &Bound<'_, PyAny>,
        deadline: Option<Instant>,
        try_only: bool,
    ) -> PyResult<usize> {
        let buf = RawBuffer::get(buffer)?;
        if buf.readonly() {
            return Err(PyTypeError::new_err(format!(
                "recv_into needs a writable buffer, not a read-only {}",
                buffer.get_type().name()?
            )));
        }
        if !buf.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "recv_into needs a C-contiguous buffer; this {} is not (pass a contiguous \
                 copy, e.g. numpy.ascontiguousarray, and copy back)",
                buffer.get_type().name()?
            )));
        }
        let cap = buf.len();
        let buf_ref = &buf;
        self.recv_with(py, deadline, try_only, &|_py, m| {
            if m.len() > cap {
                let err = to_py(shmlink::RecvError::TooLarge {
                    channel: self.name.as_str().into(),
                    len: m.len(),
                    max: cap,
                });
                return Err(err);
            }
            // SAFETY: `buf_ref` holds the buffer's export, so its memory stays allocated and
            // unmoved (a bytearray cannot resize while exported); it is writable and
            // C-contiguous (checked above), so its `cap >= m.len()` bytes start at `ptr`; `m`
            // is in the ring or a heap copy, never inside the caller's buffer, so the two do
            // not overlap. The GIL is held.
            unsafe {
                std::ptr::copy_nonoverlapping(m.as_ptr(), buf_ref.ptr(), m.len());
            }
            Ok(m.len())
        })
    }

    fn with_inner<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> R + Send,
    ) -> PyResult<R> {
        let mut g = lock(py, &self.inner);
        let inner = g.as_mut().ok_or_else(closed)?;
        Ok(f(inner))
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
        Ok(Channel::wrap(Inner::Chan(ch), name.to_owned()))
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
        Ok(Channel::wrap(Inner::Chan(ch), name.to_owned()))
    }

    /// Sends `data` (bytes-like), waiting for room up to `timeout` seconds (`None`: as long as
    /// it takes).
    #[pyo3(signature = (data, timeout = None))]
    fn send(&self, py: Python<'_>, data: &Bound<'_, PyAny>, timeout: Option<f64>) -> PyResult<()> {
        let p = Payload::from_obj(data)?;
        self.send_bytes(py, p.bytes(), deadline(timeout)?, false)
    }

    /// Sends `data` now, or raises `Full`.
    fn try_send(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let p = Payload::from_obj(data)?;
        self.send_bytes(py, p.bytes(), None, true)
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
        self.send_bytes(py, encoded_bytes(py, &encoded)?, end, false)
    }

    /// Sends `obj` encoded as JSON now, or raises `Full`.
    fn try_send_json(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let encoded = encode_json(py, obj)?;
        self.send_bytes(py, encoded_bytes(py, &encoded)?, None, true)
    }

    /// Receives the next message, waiting up to `timeout` seconds (`None`: until one comes or
    /// the peer goes).
    #[pyo3(signature = (timeout = None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyBytes>> {
        self.recv_bytes(py, deadline(timeout)?, false)
    }

    /// Receives the message waiting now, or raises `Empty`.
    fn try_recv(&self, py: Python<'_>) -> PyResult<Py<PyBytes>> {
        self.recv_bytes(py, None, true)
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
        self.recv_into_buf(py, buffer, deadline(timeout)?, false)
    }

    /// `recv_into` of the message waiting now, or raises `Empty`.
    fn try_recv_into(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        self.recv_into_buf(py, buffer, None, true)
    }

    /// Receives the next message and decodes it as JSON (a message that is not JSON raises
    /// `JsonError`, holding the message as `data`).
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
        self.recv_batch_list(py, max, deadline(timeout)?, false)
    }

    /// `recv_batch` of the messages there now (at most a ring's worth, in at most one slice),
    /// or raises `Empty`.
    fn try_recv_batch(&self, py: Python<'_>, max: usize) -> PyResult<Py<PyList>> {
        self.recv_batch_list(py, max, None, true)
    }

    /// Closes this end (the peer's next receive, after what was sent, raises `Disconnected`).
    /// Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        let old = lock(py, &self.inner).take();
        py.allow_threads(move || drop(old));
    }

    /// Whether this end is closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        lock(py, &self.inner).is_none()
    }

    /// The name the channel was made or found under.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The largest message that travels as one frame.
    #[getter]
    fn max_frame(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_inner(py, |i| each!(i, x => x.max_frame()))
    }

    /// The largest message this end accepts (published to the peer).
    #[getter]
    fn get_max_message(&self, py: Python<'_>) -> PyResult<usize> {
        self.with_inner(py, |i| each!(i, x => x.max_message()))
    }

    #[setter]
    fn set_max_message(&self, py: Python<'_>, max: usize) -> PyResult<()> {
        self.with_inner(py, |i| match i {
            Inner::Chan(c) => c.set_max_message(max),
            Inner::Conn(c) => c.channel().set_max_message(max),
            Inner::Ep(e) => {
                if let Some(c) = e.as_channel() {
                    c.set_max_message(max)
                }
            }
        })
    }

    /// Bytes in each direction's ring (`None` on the ipc-channel backend).
    #[getter]
    fn capacity(&self, py: Python<'_>) -> PyResult<Option<usize>> {
        self.with_inner(py, |i| i.channel().map(|c| c.capacity()))
    }

    /// The peer's process id, once known.
    #[getter]
    fn peer_pid(&self, py: Python<'_>) -> PyResult<Option<u32>> {
        self.with_inner(py, |i| each!(i, x => x.peer_pid()))
    }

    /// Whether a peer is connected and has not closed.
    fn is_peer_connected(&self, py: Python<'_>) -> PyResult<bool> {
        self.with_inner(py, |i| each!(i, x => x.is_peer_connected()))
    }

    /// `"shm"` or `"ipc-channel"`.
    #[getter]
    fn backend(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with_inner(py, |i| match i {
            Inner::Ep(e) => e.backend().as_str(),
            _ => Backend::Shm.as_str(),
        })
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

/// Connects with the GIL released, in slices of the deadline so that Ctrl-C interrupts.
fn connect_sliced<T: Send>(
    py: Python<'_>,
    end: Instant,
    f: impl Fn(Duration) -> Result<T, shmlink::OpenError> + Sync,
) -> PyResult<Result<T, shmlink::OpenError>> {
    loop {
        let (slice, last) = next_slice(Some(end));
        let r = py.allow_threads(|| f(slice));
        match r {
            Err(shmlink::OpenError::Timeout { .. } | shmlink::OpenError::NotFound { .. })
                if !last =>
            {
                py.check_signals()?
            }
            r => return Ok(r),
        }
    }
}

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
        let backend = match backend {
            None => None,
            Some("shm") => Some(Backend::Shm),
            Some("ipc-channel") => Some(Backend::IpcChannel),
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "backend must be 'shm' or 'ipc-channel', not {other:?}"
                )))
            }
        };
        let ep = py
            .allow_threads(|| match backend {
                None => RsEndpoint::create(name, &config),
                Some(b) => RsEndpoint::create_with(name, &config, b),
            })
            .map_err(to_py)?;
        Py::new(
            py,
            (Endpoint {}, Channel::wrap(Inner::Ep(ep), name.to_owned())),
        )
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
        Py::new(
            py,
            (Endpoint {}, Channel::wrap(Inner::Ep(ep), name.to_owned())),
        )
    }
}

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
                    return Ok(Channel::wrap(Inner::Conn(conn), name));
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
        Ok(Channel::wrap(Inner::Conn(conn), name))
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
                let mut guards: Vec<Option<MutexGuard<'_, Option<Inner>>>> =
                    (0..refs.len()).map(|_| None).collect();
                for &i in &order {
                    guards[i] = Some(lock_nogil(&refs[i].inner));
                }
                let mut set: Vec<&mut RsChannel> = Vec::with_capacity(refs.len());
                for (i, g) in guards.iter_mut().enumerate() {
                    let inner = g.as_mut().and_then(|g| g.as_mut()).ok_or(Err(i))?;
                    set.push(inner.channel().ok_or(Ok(i))?);
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

/// What `scan` returns: the channels, and the entries skipped with the reason.
type Listing = (Vec<PyObject>, Vec<(String, String)>);

/// The channels on this machine, as dicts (the fields of `shmlink-clean`'s listing), and the
/// entries named like channels that are not ones, as `(name, reason)`.
#[pyfunction]
fn scan(py: Python<'_>) -> PyResult<Listing> {
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
fn inspect(py: Python<'_>, name: &str) -> PyResult<PyObject> {
    let seg = py
        .allow_threads(|| shmlink::segments::inspect(name))
        .map_err(to_py)?;
    segment_dict(py, &seg)
}

/// Removes the channel named `name` if its creator is gone: returns `"removed"`,
/// `"vanished"`, `"alive"` or `"not-a-channel"`.
#[pyfunction]
fn reclaim(py: Python<'_>, name: &str) -> PyResult<&'static str> {
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

#[pymodule]
fn _shmlink(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Channel>()?;
    m.add_class::<Endpoint>()?;
    m.add_class::<Listener>()?;
    m.add_class::<Selector>()?;
    m.add_function(wrap_pyfunction!(_set_codec, m)?)?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(inspect, m)?)?;
    m.add_function(wrap_pyfunction!(reclaim, m)?)?;
    m.add("SLICE_SECONDS", SLICE.as_secs_f64())?;
    m.add("JsonError", json_error_type(py)?)?;
    m.add("MAX_NAME_LEN", shmlink::MAX_NAME_LEN)?;
    macro_rules! exc {
        ($($e:ident),*) => {$( m.add(stringify!($e), py.get_type::<$e>())?; )*};
    }
    exc!(
        ShmlinkError,
        Timeout,
        Full,
        Empty,
        Disconnected,
        PeerGone,
        TooLarge,
        Corrupt,
        NotFound,
        NotReady,
        AlreadyExists,
        AlreadyConnected,
        InvalidName,
        InvalidConfig,
        NotPrivate,
        NotAChannel,
        Incompatible,
        TooManyClients,
        Closed,
        IoError
    );
    Ok(())
}
