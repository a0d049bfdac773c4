//! `socketpair`: an `AF_UNIX` `SOCK_STREAM` socket pair (`socketpair(2)`), length-prefixed
//! frames.
//!
//! The parent makes the pair when it sets up; the child's end is the one descriptor it leaves
//! inheritable (no `FD_CLOEXEC`), so the spawned child finds it open under the number the
//! address names (`fd:<n>`). The parent closes its copy of the child's end as it accepts, so the
//! child's exit is end of file on the parent's end. No name exists in any file system.
//!
//! A process that spawns other children between the set-up and the accept hands them the
//! descriptor too; the harness spawns one child at a time.
//!
//! Stream rather than seqpacket: a seqpacket message must fit in the socket buffer whole, a
//! stream carries any frame, and both ends get the same `SO_SNDBUF` / `SO_RCVBUF` as `uds`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use serde::Serialize;

use super::framed::{self, set_socket_buffers, Framed};
use super::{ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use crate::Error;

/// One end of the socket pair transport.
pub struct Socketpair {
    framed: Framed<UnixStream, UnixStream>,
}

/// Both ends of the pair; the child's is inheritable until the accept closes it here.
pub struct SocketpairListener {
    parent: OwnedFd,
    child: OwnedFd,
    opts: Options,
}

impl Socketpair {
    fn from_fd(fd: OwnedFd, opts: &Options) -> Result<Socketpair> {
        set_socket_buffers(fd.as_raw_fd(), opts.ring_size)?;
        let stream = UnixStream::from(fd);
        let reader = stream.try_clone()?;
        Ok(Socketpair {
            framed: Framed::new(reader, stream, framed::max_message(opts)),
        })
    }
}

fn last_error() -> Error {
    Error::Io(io::Error::last_os_error())
}

fn sock_option(fd: RawFd, option: libc::c_int) -> Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and sized as getsockopt expects; a bad descriptor is
    // reported as an error.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            option,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(last_error());
    }
    Ok(value)
}

impl Transport for Socketpair {
    type Listener = SocketpairListener;
    const KIND: Kind = Kind::Socketpair;

    fn listen(_name: &str, opts: &Options) -> Result<SocketpairListener> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` is a live array of two c_ints for socketpair to fill.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(last_error());
        }
        // SAFETY: socketpair succeeded: both descriptors are fresh and owned by nothing else.
        let (parent, child) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: F_SETFD on a descriptor we own; clearing FD_CLOEXEC lets the child inherit it.
        if unsafe { libc::fcntl(child.as_raw_fd(), libc::F_SETFD, 0) } != 0 {
            return Err(last_error());
        }
        Ok(SocketpairListener {
            parent,
            child,
            opts: opts.clone(),
        })
    }

    /// `address` is `fd:<n>`: a descriptor this process inherited for the transport, which
    /// nothing else in it uses; the transport takes it over (and closes it when dropped).
    fn connect(address: &str, opts: &Options, _peer: Peer) -> Result<Socketpair> {
        let fd: RawFd = address
            .strip_prefix("fd:")
            .and_then(|n| n.parse().ok())
            .filter(|&n| n > 2)
            .ok_or_else(|| {
                Error::InvalidConfig(format!("socketpair address {address:?} is not fd:<n>"))
            })?;
        // The descriptor must be an AF_UNIX stream socket: anything else is a wrong address.
        if sock_option(fd, libc::SO_DOMAIN)? != libc::AF_UNIX
            || sock_option(fd, libc::SO_TYPE)? != libc::SOCK_STREAM
        {
            return Err(Error::InvalidConfig(format!(
                "descriptor {fd} is not an AF_UNIX stream socket"
            )));
        }
        // SAFETY: F_SETFD on an open descriptor (checked above): our own children must not
        // inherit it.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(last_error());
        }
        // SAFETY: by the contract above the descriptor was inherited for this transport alone,
        // and it is open (checked); the transport becomes its only owner.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Socketpair::from_fd(owned, opts)
    }

    framed_methods!();
}

impl Listener for SocketpairListener {
    type Transport = Socketpair;

    fn address(&self) -> String {
        format!("fd:{}", self.child.as_raw_fd())
    }

    fn accept(self, _stdio: ChildStdio, _peer: Peer) -> Result<Socketpair> {
        let SocketpairListener {
            parent,
            child,
            opts,
        } = self;
        // The spawned child holds its own copy now; ours would hide its exit.
        drop(child);
        Socketpair::from_fd(parent, &opts)
    }
}
