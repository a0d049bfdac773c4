//! `pipe`: the child's standard input and output, length-prefixed frames.
//!
//! The child duplicates its descriptors 0 and 1 for the transport and points descriptor 1 at
//! standard error, so a stray `println!` can never corrupt the stream. On Linux both pipes are
//! grown to the ring size (`F_SETPIPE_SZ`, best effort). The reader takes one frame (and the next
//! header) per `read`, not all there is (`framed::Reads::Bounded`): a pipe's writer wakes its reader
//! only when the pipe was empty.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::process::{ChildStdin, ChildStdout};

use serde::Serialize;

use super::framed::{Framed, Reads};
use super::{ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use crate::Error;

enum Ends {
    Parent(Framed<ChildStdout, ChildStdin>),
    Child(Framed<File, File>),
}

/// One end of the pipe transport.
pub struct Pipe {
    ends: Ends,
}

/// The parent side before the child runs: nothing to prepare.
pub struct PipeListener {
    opts: Options,
}

impl Transport for Pipe {
    type Listener = PipeListener;
    const KIND: Kind = Kind::Pipe;

    fn listen(_name: &str, opts: &Options) -> Result<PipeListener> {
        Ok(PipeListener { opts: opts.clone() })
    }

    fn connect(_address: &str, opts: &Options, _peer: Peer) -> Result<Pipe> {
        let input = dup(0)?;
        let output = dup(1)?;
        // SAFETY: dup2 on two descriptors this process has open (2 is standard error); from now
        // on descriptor 1 writes to standard error, and the transport owns its own duplicate.
        if unsafe { libc::dup2(2, 1) } < 0 {
            return Err(Error::Io(io::Error::last_os_error()));
        }
        grow_pipe(input.as_raw_fd(), opts.ring_size);
        grow_pipe(output.as_raw_fd(), opts.ring_size);
        Ok(Pipe {
            ends: Ends::Child(Framed::with_reads(input, output, max_message(opts), Reads::Bounded)),
        })
    }

    fn max_message(&self) -> usize {
        match &self.ends {
            Ends::Parent(f) => f.max_message(),
            Ends::Child(f) => f.max_message(),
        }
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        match &mut self.ends {
            Ends::Parent(f) => f.send(msg),
            Ends::Child(f) => f.send(msg),
        }
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        match &mut self.ends {
            Ends::Parent(f) => f.send_json(value),
            Ends::Child(f) => f.send_json(value),
        }
    }

    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        match &mut self.ends {
            Ends::Parent(f) => f.recv_with(read),
            Ends::Child(f) => f.recv_with(read),
        }
    }

    fn send_bare(&mut self, msg: &[u8]) -> Result<()> {
        match &mut self.ends {
            Ends::Parent(f) => f.send_bare(msg),
            Ends::Child(f) => f.send_bare(msg),
        }
    }

    fn recv_bare<R>(&mut self, size: usize, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        match &mut self.ends {
            Ends::Parent(f) => f.recv_bare(size, read),
            Ends::Child(f) => f.recv_bare(size, read),
        }
    }

    fn send_batch(&mut self, msgs: &[Vec<u8>]) -> Result<()> {
        match &mut self.ends {
            Ends::Parent(f) => f.send_batch(msgs),
            Ends::Child(f) => f.send_batch(msgs),
        }
    }

    fn recv_batch(&mut self, size: usize, max: usize, read: impl FnMut(&[u8])) -> Result<usize> {
        match &mut self.ends {
            Ends::Parent(f) => f.recv_batch(size, max, read),
            Ends::Child(f) => f.recv_batch(size, max, read),
        }
    }
}

impl Listener for PipeListener {
    type Transport = Pipe;

    fn address(&self) -> String {
        "stdio".to_owned()
    }

    fn accept(self, stdio: ChildStdio, _peer: Peer) -> Result<Pipe> {
        let missing = || {
            Error::Io(io::Error::new(
                io::ErrorKind::NotConnected,
                "the pipe transport needs the child spawned with piped stdin and stdout",
            ))
        };
        let stdin = stdio.stdin.ok_or_else(missing)?;
        let stdout = stdio.stdout.ok_or_else(missing)?;
        grow_pipe(stdin.as_raw_fd(), self.opts.ring_size);
        grow_pipe(stdout.as_raw_fd(), self.opts.ring_size);
        Ok(Pipe {
            ends: Ends::Parent(Framed::with_reads(stdout, stdin, max_message(&self.opts), Reads::Bounded)),
        })
    }
}

fn max_message(opts: &Options) -> usize {
    super::framed::max_message(opts)
}

fn dup(fd: RawFd) -> Result<File> {
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor number has no memory-safety preconditions; a bad
    // descriptor is reported as an error.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(Error::Io(io::Error::last_os_error()));
    }
    // SAFETY: `new` is a freshly duplicated descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(new) })
}

/// Grows the pipe to `bytes`, or to the largest size an unprivileged process may ask for
/// (`/proc/sys/fs/pipe-max-size`, 1 MiB by default) when `bytes` is over it. Best effort.
#[cfg(target_os = "linux")]
pub(crate) fn grow_pipe(fd: RawFd, bytes: usize) {
    let set = |bytes: usize| {
        let size = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: F_SETPIPE_SZ on a descriptor the caller keeps open; failure (not a pipe, over
        // the user's limit) is reported through the return value only.
        unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, size) >= 0 }
    };
    if set(bytes) {
        return;
    }
    let limit = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok());
    if let Some(limit) = limit.filter(|&l| l < bytes) {
        set(limit);
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn grow_pipe(_fd: RawFd, _bytes: usize) {}
