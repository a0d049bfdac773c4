//! `fifo`: two named pipes (`mkfifo`), one per direction, length-prefixed frames.
//!
//! The parent creates `ipcbench-<name>-fifo-p2c` and `-c2p` in the temporary directory and opens
//! the read end of `c2p` at once (a non-blocking open of a read end never waits). The child
//! opens the write end of `c2p`, which succeeds because that reader exists, then the read end of
//! `p2c`; the parent's accept retries a non-blocking open of the write end of `p2c` until that
//! reader exists, removes both names (the open pipes keep working) and writes a hello. Until the
//! hello arrives, end of file on `p2c` only means that the parent has not opened it yet, so the
//! child polls for it (watching the parent) before it switches the pipe to blocking mode. Like `pipe`, each pipe is grown to the ring size
//! (`F_SETPIPE_SZ`, best effort) and read one frame (and the next header) per `read`
//! (`framed::Reads::Bounded`).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::pipe::grow_pipe;
use super::framed::{self, Framed, Reads};
use super::{poll_until, ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use crate::Error;

/// What the parent writes first, unframed, once it holds the write end of `p2c`.
const HELLO: &[u8; 8] = b"ipcbfifo";

/// One end of the named-pipe transport.
pub struct Fifo {
    framed: Framed<File, File>,
}

/// The two named pipes, the read end of `c2p` open, waiting for the child.
pub struct FifoListener {
    reader: File,
    paths: FifoPaths,
    base: PathBuf,
    opts: Options,
}

/// Removes both pipe names on drop.
struct FifoPaths {
    p2c: PathBuf,
    c2p: PathBuf,
}

impl Drop for FifoPaths {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.p2c);
        let _ = std::fs::remove_file(&self.c2p);
    }
}

fn paths(base: &Path) -> (PathBuf, PathBuf) {
    let with = |suffix: &str| {
        let mut name = base.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    (with("-p2c"), with("-c2p"))
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::InvalidConfig(format!("path {path:?} holds a NUL byte")))
}

/// Opens a pipe end without blocking: `O_NONBLOCK`, then back to blocking mode once open.
fn open_end(path: &Path, flags: libc::c_int) -> io::Result<File> {
    let file = open_nonblocking(path, flags)?;
    set_blocking(file.as_raw_fd())?;
    Ok(file)
}

fn open_nonblocking(path: &Path, flags: libc::c_int) -> io::Result<File> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in path"))?;
    // SAFETY: `c` is NUL-terminated; open has no other memory preconditions.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn set_blocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL / F_SETFL on a descriptor the caller keeps open.
    let ok = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `Ok(None)` for the errors that mean "not there yet": no such name, or no reader on it.
fn not_yet(result: io::Result<File>) -> Result<Option<File>> {
    match result {
        Ok(f) => Ok(Some(f)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENXIO)) => Ok(None),
        Err(e) => Err(Error::Io(e)),
    }
}

impl Transport for Fifo {
    type Listener = FifoListener;
    const KIND: Kind = Kind::Fifo;

    fn listen(name: &str, opts: &Options) -> Result<FifoListener> {
        let base = std::env::temp_dir().join(format!("{}{name}-fifo", super::HARNESS_PREFIX));
        let (p2c, c2p) = paths(&base);
        for path in [&p2c, &c2p] {
            let _ = std::fs::remove_file(path);
            let c = c_path(path)?;
            // SAFETY: `c` is NUL-terminated.
            if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
                return Err(Error::Io(io::Error::last_os_error()));
            }
        }
        let paths = FifoPaths { p2c, c2p };
        let reader = open_end(&paths.c2p, libc::O_RDONLY)?;
        Ok(FifoListener {
            reader,
            paths,
            base,
            opts: opts.clone(),
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<Fifo> {
        let (p2c, c2p) = paths(Path::new(address));
        // The parent's reader of c2p exists once the name does.
        let writer = poll_until(peer, opts.connect_timeout, || {
            not_yet(open_end(&c2p, libc::O_WRONLY))
        })?;
        let mut reader = open_nonblocking(&p2c, libc::O_RDONLY)?;
        let mut hello = [0u8; HELLO.len()];
        let mut got = 0;
        poll_until(peer, opts.connect_timeout, || {
            match io::Read::read(&mut reader, &mut hello[got..]) {
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(Error::Io(e)),
            }
            Ok((got == HELLO.len()).then_some(()))
        })?;
        if &hello != HELLO {
            return Err(crate::garbled("unexpected fifo handshake".to_owned()));
        }
        set_blocking(reader.as_raw_fd())?;
        grow_pipe(reader.as_raw_fd(), opts.ring_size);
        grow_pipe(writer.as_raw_fd(), opts.ring_size);
        Ok(Fifo {
            framed: Framed::with_reads(reader, writer, framed::max_message(opts), Reads::Bounded),
        })
    }

    framed_methods!();
}

impl Listener for FifoListener {
    type Transport = Fifo;

    fn address(&self) -> String {
        self.base.to_string_lossy().into_owned()
    }

    fn accept(self, _stdio: ChildStdio, peer: Peer) -> Result<Fifo> {
        let FifoListener {
            reader,
            paths,
            opts,
            ..
        } = self;
        // The child opens its writer of c2p before its reader of p2c, so once this open finds
        // a reader the child holds both ends.
        let mut writer = poll_until(peer, opts.connect_timeout, || {
            not_yet(open_end(&paths.p2c, libc::O_WRONLY))
        })?;
        drop(paths);
        io::Write::write_all(&mut writer, HELLO).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => super::closed(),
            _ => Error::Io(e),
        })?;
        grow_pipe(reader.as_raw_fd(), opts.ring_size);
        grow_pipe(writer.as_raw_fd(), opts.ring_size);
        Ok(Fifo {
            framed: Framed::with_reads(reader, writer, framed::max_message(&opts), Reads::Bounded),
        })
    }
}
