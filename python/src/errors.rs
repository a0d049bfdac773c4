//! The exceptions: `ShmlinkError` and one subclass per kind of library error, the library's
//! errors turned into them (with their details as attributes), and `JsonError`.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyTuple, PyType};

use shmlink::Error;

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
    TooManySubscribers,
    ShmlinkError,
    "The topic has as many subscribers as its publisher admits."
);
create_exception!(
    shmlink,
    Lagged,
    ShmlinkError,
    "A subscriber of an overwrite topic fell a ring behind: `missed` messages are gone; the \
     next receive gives the oldest one still there."
);
create_exception!(
    shmlink,
    Dropped,
    ShmlinkError,
    "The topic's publisher dropped this subscriber; subscribe again to go on."
);
create_exception!(
    shmlink,
    WrongSize,
    ShmlinkError,
    "A message that is not exactly one value of the type recv_value asked for (consumed)."
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

/// The Python exception for a library error, with its details as attributes.
pub(crate) fn to_py(e: impl Into<Error>) -> PyErr {
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
        Error::Recv(R::WrongSize { len, expected, .. }) => {
            attrs.push(("len", len.to_string()));
            attrs.push(("expected", expected.to_string()));
            WrongSize::new_err(msg)
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
        Error::Open(O::TooManySubscribers { limit, .. }) => {
            attrs.push(("limit", limit.to_string()));
            TooManySubscribers::new_err(msg)
        }
        Error::Recv(R::Lagged { missed, .. }) => {
            attrs.push(("missed", missed.to_string()));
            Lagged::new_err(msg)
        }
        Error::Recv(R::Dropped { .. }) => Dropped::new_err(msg),
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

pub(crate) fn closed() -> PyErr {
    Closed::new_err("the channel is closed")
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
pub(crate) fn json_error(py: Python<'_>, cause: PyErr, data: Option<Py<PyBytes>>) -> PyErr {
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

/// Adds every exception to the module `m`.
pub(crate) fn add_to(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("JsonError", json_error_type(py)?)?;
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
        WrongSize,
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
        TooManySubscribers,
        Lagged,
        Dropped,
        Closed,
        IoError
    );
    Ok(())
}
