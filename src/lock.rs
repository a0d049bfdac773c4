//! Endpoint locks: how one process tells whether another still holds its end of a channel.
//!
//! Each endpoint holds a write lock on one byte of the shared object (the creator's byte and the
//! connector's byte, see [`crate::layout::CREATOR_LOCK`] and [`crate::layout::CONNECTOR_LOCK`])
//! for as long as it has the object open. On Linux these are open-file-description locks
//! (`F_OFD_SETLK`): they belong to the open file, not to the process, so
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
//!
//! Elsewhere (no open-file-description locks, and no PID namespaces to worry about), the
//! creator's byte is approximated by an `flock` on the whole object, and the connector's byte is
//! not locked at all: whether a connector is alive falls back to `kill(pid, 0)` on the pid it
//! recorded (which a reused pid or an unreaped zombie can fool), and a dead claimer's slot is
//! not reclaimable (a listener's client slots neither).

use std::fs::File;
use std::os::unix::io::{AsRawFd, RawFd};

use crate::error::{Error, Result};

/// Which endpoint's byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// The creator's byte: held from before the object is sized until the creator drops it.
    Creator,
    /// The connector's byte: taken before the connecting slot is claimed.
    Connector,
    /// A byte of a listener's client slot, at this offset: held by a client from before it
    /// claims the slot until it has been accepted (or gave up).
    Slot(u64),
}

impl End {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn byte(self) -> u64 {
        match self {
            End::Creator => crate::layout::CREATOR_LOCK,
            End::Connector => crate::layout::CONNECTOR_LOCK,
            End::Slot(byte) => byte,
        }
    }
}

/// Takes `end`'s lock on `file`. With `wait == false`, returns `Ok(false)` at once when another
/// open of the object holds it; with `wait == true`, waits until it is free.
pub(crate) fn take(file: &File, end: End, wait: bool) -> Result<bool> {
    imp::take(file.as_raw_fd(), end, wait)
}

/// Releases `end`'s lock on `file`, taken with [`take`].
pub(crate) fn release(file: &File, end: End) -> Result<()> {
    imp::release(file.as_raw_fd(), end)
}

/// True while some other open of the object holds `end`'s lock (the endpoint's process, or a
/// process that inspects or reclaims a segment whose creator died).
#[cfg(test)]
fn held_elsewhere(fd: RawFd, end: End) -> Result<bool> {
    imp::held_elsewhere(fd, end)
}

/// Whether `end` is alive: on Linux, whether some other open of the object holds its lock (the
/// endpoint's process, or for a moment a process that inspects or reclaims a segment whose
/// creator died); `recorded_pid` is not consulted. Elsewhere the connector's end has no lock, and
/// its recorded pid is asked instead. Allocation-free: a waiting endpoint asks this every few
/// milliseconds.
pub(crate) fn alive(fd: RawFd, end: End, recorded_pid: u32) -> Result<bool> {
    imp::alive(fd, end, recorded_pid)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use super::*;

    fn request(kind: libc::c_int, end: End) -> libc::flock {
        libc::flock {
            l_type: kind as libc::c_short,
            l_whence: libc::SEEK_SET as libc::c_short,
            l_start: end.byte() as libc::off_t,
            l_len: 1,
            // Must be 0 for open-file-description locks.
            l_pid: 0,
        }
    }

    pub(super) fn take(fd: RawFd, end: End, wait: bool) -> Result<bool> {
        let cmd = if wait {
            libc::F_OFD_SETLKW
        } else {
            libc::F_OFD_SETLK
        };
        let mut lock = request(libc::F_WRLCK, end);
        loop {
            // SAFETY: `lock` is a valid, initialised `struct flock` on our stack for the whole
            // call; the kernel reads it and may write it back. A bad descriptor is an error
            // return, not undefined behaviour.
            if unsafe { libc::fcntl(fd, cmd, &mut lock as *mut libc::flock) } == 0 {
                return Ok(true);
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN | libc::EACCES) if !wait => return Ok(false),
                _ => return Err(Error::Io(err)),
            }
        }
    }

    pub(super) fn release(fd: RawFd, end: End) -> Result<()> {
        let mut lock = request(libc::F_UNLCK, end);
        // SAFETY: as in `take`.
        if unsafe { libc::fcntl(fd, libc::F_OFD_SETLK, &mut lock as *mut libc::flock) } != 0 {
            return Err(Error::Io(std::io::Error::last_os_error()));
        }
        Ok(())
    }

    pub(super) fn held_elsewhere(fd: RawFd, end: End) -> Result<bool> {
        let mut lock = request(libc::F_WRLCK, end);
        // SAFETY: as in `take`; F_OFD_GETLK writes the first conflicting lock (or F_UNLCK) back
        // into `lock`.
        if unsafe { libc::fcntl(fd, libc::F_OFD_GETLK, &mut lock as *mut libc::flock) } != 0 {
            return Err(Error::Io(std::io::Error::last_os_error()));
        }
        Ok(lock.l_type != libc::F_UNLCK as libc::c_short)
    }

    pub(super) fn alive(fd: RawFd, end: End, _recorded_pid: u32) -> Result<bool> {
        held_elsewhere(fd, end)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod imp {
    use super::*;

    fn flock(fd: RawFd, op: libc::c_int) -> Result<bool> {
        loop {
            // SAFETY: flock takes no pointers; a bad descriptor is an error return.
            if unsafe { libc::flock(fd, op) } == 0 {
                return Ok(true);
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) => return Ok(false),
                _ => return Err(Error::Io(err)),
            }
        }
    }

    pub(super) fn take(fd: RawFd, end: End, wait: bool) -> Result<bool> {
        match end {
            End::Creator if wait => flock(fd, libc::LOCK_EX),
            End::Creator => flock(fd, libc::LOCK_EX | libc::LOCK_NB),
            End::Connector | End::Slot(_) => Ok(true),
        }
    }

    pub(super) fn release(fd: RawFd, end: End) -> Result<()> {
        match end {
            End::Creator => flock(fd, libc::LOCK_UN).map(drop),
            End::Connector | End::Slot(_) => Ok(()),
        }
    }

    pub(super) fn held_elsewhere(fd: RawFd, end: End) -> Result<bool> {
        match end {
            End::Creator => {
                if !flock(fd, libc::LOCK_EX | libc::LOCK_NB)? {
                    return Ok(true);
                }
                flock(fd, libc::LOCK_UN)?;
                Ok(false)
            }
            End::Connector | End::Slot(_) => Ok(true),
        }
    }

    pub(super) fn alive(fd: RawFd, end: End, recorded_pid: u32) -> Result<bool> {
        match end {
            End::Creator => held_elsewhere(fd, end),
            // Without byte locks a slot's claimer cannot be judged: assume it lives.
            End::Slot(_) => Ok(true),
            End::Connector => {
                let Ok(pid) = libc::pid_t::try_from(recorded_pid) else {
                    return Ok(false);
                };
                if pid <= 0 {
                    return Ok(false);
                }
                // SAFETY: kill with signal 0 sends nothing; it only checks that the pid exists.
                let r = unsafe { libc::kill(pid, 0) };
                Ok(r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_two_ends_are_independent_and_each_open_sees_the_others() {
        let (path, creator) = object("ends");
        let connector = reopen(&path);
        let observer = reopen(&path);
        assert!(!held_elsewhere(observer.as_raw_fd(), End::Creator).unwrap());
        assert!(take(&creator, End::Creator, false).unwrap());
        assert!(take(&connector, End::Connector, false).unwrap());
        // Same process, other opens: they conflict (unlike process-associated locks).
        assert!(held_elsewhere(observer.as_raw_fd(), End::Creator).unwrap());
        assert!(held_elsewhere(observer.as_raw_fd(), End::Connector).unwrap());
        assert!(held_elsewhere(creator.as_raw_fd(), End::Connector).unwrap());
        assert!(!held_elsewhere(creator.as_raw_fd(), End::Creator).unwrap());
        assert!(!take(&observer, End::Connector, false).unwrap());
        // Closing another descriptor of the object releases nothing.
        drop(reopen(&path));
        assert!(held_elsewhere(observer.as_raw_fd(), End::Connector).unwrap());
        // Closing the holder's descriptor releases its lock.
        drop(connector);
        assert!(!held_elsewhere(observer.as_raw_fd(), End::Connector).unwrap());
        assert!(take(&observer, End::Connector, false).unwrap());
        drop(creator);
        std::fs::remove_file(&path).unwrap();
    }
}
