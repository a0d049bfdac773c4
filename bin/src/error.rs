//! The harness's error: one vocabulary for every transport, the library's among them.
//!
//! A transport's own failures (a mapping of the wrong size, a queue name with a NUL byte, a peer
//! that sent what the workload does not expect) are said in the harness's words; the library's
//! errors that every transport shares a meaning for (timeout, too large, the peer closed or is
//! gone, nothing under the name) become the same variants, so that the conformance suite asks
//! every transport the same question. Any other library error is kept as it is ([`Error::Shm`]).

use std::io;

/// What can go wrong in the harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting or address the transport cannot use.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// Something of that name exists already.
    #[error("{0:?} is taken")]
    AlreadyExists(String),
    /// Nothing of that name (yet).
    #[error("nothing named {0:?}")]
    NotFound(String),
    /// A wait ran past its deadline.
    #[error("timed out")]
    Timeout,
    /// A message longer than the transport carries.
    #[error("message of {len} bytes exceeds the maximum of {max} bytes")]
    TooLarge {
        /// Requested length.
        len: usize,
        /// Largest length the transport accepts.
        max: usize,
    },
    /// The peer closed its end.
    #[error("the peer closed its end")]
    Disconnected,
    /// The peer process is gone.
    #[error("the peer (process {pid}) is gone")]
    PeerGone {
        /// Its process id, where known (0 if not).
        pid: u32,
    },
    /// The peer sent something the workload does not expect (a wrong sequence number, a
    /// damaged echo, an unknown handshake), or a transport's shared memory holds something
    /// it does not understand.
    #[error("garbled: {0}")]
    Garbled(String),
    /// An operating-system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A value could not be encoded or decoded as JSON.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Any other error of the library.
    #[error(transparent)]
    Shm(shmlink::Error),
}

impl Error {
    /// True when the peer is no longer there: closed cleanly or gone.
    pub fn is_disconnect(&self) -> bool {
        matches!(self, Error::Disconnected | Error::PeerGone { .. })
    }
}

impl From<shmlink::Error> for Error {
    fn from(e: shmlink::Error) -> Error {
        use shmlink::{OpenError, RecvError, SendError};
        match e {
            shmlink::Error::Open(OpenError::Timeout { .. })
            | shmlink::Error::Send(SendError::Timeout { .. })
            | shmlink::Error::Recv(RecvError::Timeout { .. }) => Error::Timeout,
            shmlink::Error::Send(SendError::TooLarge { len, max, .. })
            | shmlink::Error::Recv(RecvError::TooLarge { len, max, .. }) => {
                Error::TooLarge { len, max }
            }
            shmlink::Error::Open(OpenError::Disconnected { .. })
            | shmlink::Error::Send(SendError::Disconnected { .. })
            | shmlink::Error::Recv(RecvError::Disconnected { .. }) => Error::Disconnected,
            shmlink::Error::Open(OpenError::PeerGone { pid, .. })
            | shmlink::Error::Send(SendError::PeerGone { pid, .. })
            | shmlink::Error::Recv(RecvError::PeerGone { pid, .. }) => Error::PeerGone { pid },
            shmlink::Error::Open(OpenError::NotFound { channel }) => {
                Error::NotFound(channel.to_string())
            }
            shmlink::Error::Open(OpenError::Io(e))
            | shmlink::Error::Send(SendError::Io(e))
            | shmlink::Error::Recv(RecvError::Io(e)) => Error::Io(e),
            shmlink::Error::Send(SendError::Json { source, .. })
            | shmlink::Error::Recv(RecvError::Json { source, .. }) => Error::Json(source),
            e => Error::Shm(e),
        }
    }
}

macro_rules! from_library {
    ($($ty:ident),+) => {$(
        impl From<shmlink::$ty> for Error {
            fn from(e: shmlink::$ty) -> Error {
                shmlink::Error::from(e).into()
            }
        }
    )+};
}

from_library!(OpenError, SendError, RecvError);

/// The harness's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error a harness endpoint reports when its peer sent something the workload does not
/// expect (a wrong sequence number, a damaged echo, an unknown handshake).
pub fn garbled(what: impl Into<String>) -> Error {
    Error::Garbled(what.into())
}
