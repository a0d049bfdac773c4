//! Named shared-memory objects (`shm_open`, `shm_unlink`), the effective user, and a
//! non-blocking connect to a Unix socket by path.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::unix::io::{FromRawFd, OwnedFd};

/// The effective user id: the owner every object and file this crate trusts must have.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() }
}

/// `shm_open(name, flags, mode)`: a new descriptor of the named shared-memory object.
pub(crate) fn shm_open(name: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
    // SAFETY: `name` is a valid NUL-terminated string; shm_open only reads it and returns a new
    // descriptor (or -1).
    let fd = unsafe { libc::shm_open(name.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor we just opened and own; `File` closes it once.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `shm_unlink(name)`: removes the name of a shared-memory object (processes that map it keep
/// their mappings).
pub(crate) fn shm_unlink(name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is a valid NUL-terminated string; shm_unlink only reads it.
    if unsafe { libc::shm_unlink(name.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A connection to the `SOCK_SEQPACKET` Unix socket at `path`, made without blocking: `None`
/// when nothing listens there or its queue of connections is full.
pub(crate) fn connect_seqpacket_now(path: &str) -> Option<OwnedFd> {
    let path = CString::new(path).ok()?;
    // SAFETY: an all-zero `sockaddr_un` is a valid (empty) address.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let bytes = path.as_bytes_with_nul();
    if bytes.len() > addr.sun_path.len() {
        return None;
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (to, from) in addr.sun_path.iter_mut().zip(bytes) {
        *to = *from as libc::c_char;
    }
    let kind = libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socket takes no pointers and returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_UNIX, kind, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is a descriptor we just made and own; `OwnedFd` closes it once, on drop.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `addr` is a valid `sockaddr_un` on our stack for the whole call, and the length
    // passed is its size; a refused or failed connect is only an error return.
    let connected = unsafe {
        libc::connect(
            fd,
            std::ptr::addr_of!(addr).cast::<libc::sockaddr>(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    (connected == 0).then_some(socket)
}
