//! Python buffers: the bytes to send from any bytes-like object, and the writable buffer
//! `recv_into` copies a message into (the buffer protocol, through the stable ABI).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use shmlink::{ChannelName, RecvError};

use crate::errors::to_py;

/// Bytes to send: borrowed from a `bytes`, or copied from any other buffer.
pub(crate) enum Payload<'py> {
    Bytes(Bound<'py, PyBytes>),
    Owned(Vec<u8>),
}

impl Payload<'_> {
    pub(crate) fn from_obj<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Payload<'py>> {
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

    pub(crate) fn bytes(&self) -> &[u8] {
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
pub(crate) struct RawBuffer(Box<ffi::Py_buffer>);

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

    /// `obj`'s buffer, for `recv_into` to write a message into: a `TypeError` if it is
    /// read-only, a `ValueError` if it is not C-contiguous.
    pub(crate) fn writable(obj: &Bound<'_, PyAny>) -> PyResult<RawBuffer> {
        let buf = RawBuffer::get(obj)?;
        if buf.readonly() {
            return Err(PyTypeError::new_err(format!(
                "recv_into needs a writable buffer, not a read-only {}",
                obj.get_type().name()?
            )));
        }
        if !buf.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "recv_into needs a C-contiguous buffer; this {} is not (pass a contiguous \
                 copy, e.g. numpy.ascontiguousarray, and copy back)",
                obj.get_type().name()?
            )));
        }
        Ok(buf)
    }

    /// Copies the message `m` to the start of a buffer from [`writable`](Self::writable) and
    /// returns its length; `TooLarge` (nothing copied, naming `channel`) for a message longer
    /// than the buffer.
    /// Called with the GIL held.
    pub(crate) fn copy_in(&self, m: &[u8], channel: &ChannelName) -> PyResult<usize> {
        let cap = self.len();
        if m.len() > cap {
            return Err(to_py(RecvError::TooLarge {
                channel: channel.clone(),
                len: m.len(),
                max: cap,
            }));
        }
        // SAFETY: `self` holds the buffer's export, so its memory stays allocated and unmoved
        // (a bytearray cannot resize while exported); it is writable and C-contiguous (checked
        // by `writable`), so its `cap >= m.len()` bytes start at `ptr`; `m` is in the ring or a
        // heap copy, never inside the caller's buffer, so the two do not overlap. The GIL is
        // held.
        unsafe {
            std::ptr::copy_nonoverlapping(m.as_ptr(), self.ptr(), m.len());
        }
        Ok(m.len())
    }

    /// The length in bytes.
    pub(crate) fn len(&self) -> usize {
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
