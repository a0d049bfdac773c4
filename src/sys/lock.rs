//! Byte locks: how one process tells whether another still holds its end of a channel.
//!
//! Each endpoint holds a write lock on one byte of the shared object (the creator's byte and the
//! connector's byte, `CREATOR_LOCK` and `CONNECTOR_LOCK` in the layout; a listener's client
//! holds the byte of its slot) for as long as it has the object open. These are
//! open-file-description locks (`F_OFD_SETLK`): they belong to the open file, not to the
//! process, so
//!
//! * the kernel releases them when the last descriptor of that open file closes, which happens
//!   when the process dies, however it dies (SIGKILL included);
//! * two opens of the object conflict even inside one process, so a creator and a connector in
//!   the same process (or a tool that inspects a segment) see each other's locks, and closing an
//!   unrelated descriptor of the same object releases nothing;
//! * asking (`F_OFD_GETLK`) names no process: the answer does not depend on pid numbers, so it
//!   holds across PID namespaces (two containers sharing `/dev/shm`) and is immune to pid reuse.
//!
//! A descriptor inherited over `fork` shares the open file, and with it the lock: a forked child
//! that keeps it open keeps its parent's endpoint looking alive.

use std::fs::File;
use std::os::unix::io::{AsRawFd, RawFd};

use std::io;

fn request(kind: libc::c_int, byte: u64) -> libc::flock {
    libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: byte as libc::off_t,
        l_len: 1,
        // Must be 0 for open-file-description locks.
        l_pid: 0,
    }
}

/// Takes the lock on `byte` of `file`. With `wait == false`, returns `Ok(false)` at once when
/// another open of the object holds it; with `wait == true`, waits until it is free.
pub(crate) fn take(file: &File, byte: u64, wait: bool) -> io::Result<bool> {
    let cmd = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    let mut lock = request(libc::F_WRLCK, byte);
    loop {
        // SAFETY: `lock` is a valid, initialised `struct flock` on our stack for the whole
        // call; the kernel reads it and may write it back. A bad descriptor is an error
        // return, not undefined behaviour.
        if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut lock as *mut libc::flock) } == 0 {
            return Ok(true);
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN | libc::EACCES) if !wait => return Ok(false),
            _ => return Err(err),
        }
    }
}

/// Releases the lock on `byte` of `file`, taken with [`take`].
pub(crate) fn release(file: &File, byte: u64) -> io::Result<()> {
    let mut lock = request(libc::F_UNLCK, byte);
    // SAFETY: as in `take`.
    if unsafe {
        libc::fcntl(
            file.as_raw_fd(),
            libc::F_OFD_SETLK,
            &mut lock as *mut libc::flock,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the end that locks `byte` is alive: whether some other open of the object holds the
/// lock (the endpoint's process, or for a moment a process that inspects or reclaims a segment
/// whose creator died). Allocation-free: a waiting endpoint asks this every few milliseconds.
pub(crate) fn alive(fd: RawFd, byte: u64) -> io::Result<bool> {
    let mut lock = request(libc::F_WRLCK, byte);
    // SAFETY: as in `take`; F_OFD_GETLK writes the first conflicting lock (or F_UNLCK) back into
    // `lock`.
    if unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut lock as *mut libc::flock) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lock.l_type != libc::F_UNLCK as libc::c_short)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CREATOR: u64 = 128;
    const CONNECTOR: u64 = 256;

    fn object(tag: &str) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!("shmlink-lock-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        (path, file)
    }

    fn reopen(path: &std::path::Path) -> File {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap()
    }

    #[test]
    fn the_two_ends_are_independent_and_each_open_sees_the_others() {
        let (path, creator) = object("ends");
        let connector = reopen(&path);
        let observer = reopen(&path);
        assert!(!alive(observer.as_raw_fd(), CREATOR).unwrap());
        assert!(take(&creator, CREATOR, false).unwrap());
        assert!(take(&connector, CONNECTOR, false).unwrap());
        // Same process, other opens: they conflict (unlike process-associated locks).
        assert!(alive(observer.as_raw_fd(), CREATOR).unwrap());
        assert!(alive(observer.as_raw_fd(), CONNECTOR).unwrap());
        assert!(alive(creator.as_raw_fd(), CONNECTOR).unwrap());
        assert!(!alive(creator.as_raw_fd(), CREATOR).unwrap());
        assert!(!take(&observer, CONNECTOR, false).unwrap());
        // Closing another descriptor of the object releases nothing.
        drop(reopen(&path));
        assert!(alive(observer.as_raw_fd(), CONNECTOR).unwrap());
        // Closing the holder's descriptor releases its lock.
        drop(connector);
        assert!(!alive(observer.as_raw_fd(), CONNECTOR).unwrap());
        assert!(take(&observer, CONNECTOR, false).unwrap());
        drop(creator);
        std::fs::remove_file(&path).unwrap();
    }
}
