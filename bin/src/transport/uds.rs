//! `uds`: a Unix domain stream socket, length-prefixed frames.
//!
//! `SO_SNDBUF` and `SO_RCVBUF` are set to the ring size on *both* ends: a write on a Unix
//! socket is bounded by the receiver's buffer, so one untuned end caps the whole connection.
//! The socket file lives in the temporary directory as `ipcbench-<name>-uds.sock` and is removed when
//! the listener (or the parent's transport) is dropped.

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;

use serde::Serialize;

use super::framed::{self, set_socket_buffers, Framed};
use super::{poll_until, ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use crate::Error;

/// One end of the Unix socket transport.
pub struct Uds {
    framed: Framed<UnixStream, UnixStream>,
    _path: Option<SocketPath>,
}

/// The bound socket, waiting for the child.
pub struct UdsListener {
    listener: UnixListener,
    path: SocketPath,
    opts: Options,
}

/// Removes the socket file on drop.
struct SocketPath(PathBuf);

impl Drop for SocketPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Uds {
    fn from_stream(stream: UnixStream, opts: &Options, path: Option<SocketPath>) -> Result<Uds> {
        set_socket_buffers(stream.as_raw_fd(), opts.ring_size)?;
        let reader = stream.try_clone()?;
        Ok(Uds {
            framed: Framed::new(reader, stream, framed::max_message(opts)),
            _path: path,
        })
    }
}

impl Transport for Uds {
    type Listener = UdsListener;
    const KIND: Kind = Kind::Uds;

    fn listen(name: &str, opts: &Options) -> Result<UdsListener> {
        let path = std::env::temp_dir().join(format!("ipcbench-{name}-uds.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        let path = SocketPath(path);
        listener.set_nonblocking(true)?;
        Ok(UdsListener {
            listener,
            path,
            opts: opts.clone(),
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<Uds> {
        let stream = poll_until(peer, opts.connect_timeout, || {
            match UnixStream::connect(address) {
                Ok(s) => Ok(Some(s)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(None),
                Err(e) => Err(Error::Io(e)),
            }
        })?;
        Uds::from_stream(stream, opts, None)
    }

    framed_methods!();
}

impl Uds {
    /// The socket's send buffer size as the kernel reports it (it may double the request).
    pub fn send_buffer(&self) -> Result<usize> {
        let fd = self.framed.writer().as_raw_fd();
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `fd` is the open socket this transport owns; `value` and `len` are live and
        // sized as getsockopt expects.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(Error::Io(std::io::Error::last_os_error()));
        }
        Ok(usize::try_from(value).unwrap_or(0))
    }
}

impl Listener for UdsListener {
    type Transport = Uds;

    fn address(&self) -> String {
        self.path.0.to_string_lossy().into_owned()
    }

    fn accept(self, _stdio: ChildStdio, peer: Peer) -> Result<Uds> {
        let stream = poll_until(peer, self.opts.connect_timeout, || {
            match self.listener.accept() {
                Ok((s, _)) => Ok(Some(s)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
                Err(e) => Err(Error::Io(e)),
            }
        })?;
        stream.set_nonblocking(false)?;
        Uds::from_stream(stream, &self.opts, Some(self.path))
    }
}
