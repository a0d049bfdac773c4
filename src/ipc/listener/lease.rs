//! A client's place and the listener's liveness: the [`Lease`] each handed-out connection
//! holds (counting the listener's live connections), and the lock file beside the rendezvous
//! file (`shmlink-<name>.ipc.lock`): taken for the listener's (or a channel creator's) whole
//! life, asked whether it is held, and the leftovers of a listener that died removed once it is
//! taken again.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::Result;
use crate::error::OpenError as Error;
use crate::ipc::rendezvous::{self, Kind, Published};
use crate::shm::layout::CREATOR_LOCK;
use crate::sys::lock;

/// Where the lock file of listener or channel `name` lives (beside its rendezvous file).
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) fn lock_path(name: &str) -> PathBuf {
    rendezvous::path_of(name, Kind::Lock)
}

/// Opens the lock file of `name` (checked as [`rendezvous::open`] does); `Err(NotFound)`
/// without one.
pub(super) fn open_lock(name: &str, write: bool) -> Result<File> {
    let path = rendezvous::checked_path(name, Kind::Lock, false)?;
    rendezvous::open(
        &path,
        name,
        Kind::Lock,
        OpenOptions::new().read(true).write(write),
    )
}

/// True while a live listener (or channel creator) holds the lock of `name`.
pub(crate) fn alive(name: &str) -> Result<bool> {
    match open_lock(name, false) {
        Ok(file) => Ok(lock::alive(file.as_raw_fd(), CREATOR_LOCK)?),
        Err(Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Counts a listener's live connections; each handed-out connection holds one [`Lease`].
#[derive(Debug)]
pub(crate) struct Lease(pub(super) Arc<AtomicUsize>);

impl Drop for Lease {
    fn drop(&mut self) {
        // Release: pairs with the accept thread's Acquire load of the count: the connection is
        // done with before its place is given to another client.
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// Opens (making it, and its directory, if need be) the lock file of `name` and takes its
/// lock: `Ok(None)` when a live listener or channel creator holds it. A listener and a channel's
/// creator take the same lock, so one name is one or the other, as in shared memory.
pub(crate) fn take_lock(name: &str) -> Result<Option<(PathBuf, File)>> {
    let path = rendezvous::checked_path(name, Kind::Lock, true)?;
    loop {
        let file = rendezvous::open(
            &path,
            name,
            Kind::Lock,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600),
        )?;
        if !lock::take(&file, CREATOR_LOCK, false)? {
            return Ok(None);
        }
        // A listener that was closing may have removed the file between our open and our
        // lock: then we locked a file nobody else will look at; open the new one.
        let ours = file.metadata()?;
        match std::fs::symlink_metadata(&path) {
            Ok(now) if now.dev() == ours.dev() && now.ino() == ours.ino() => {
                return Ok(Some((path, file)))
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::Io(e)),
        }
    }
}

/// With the lock of `name` taken: if its rendezvous file still names the one-shot server of a
/// listener that died, removes that server's socket and the directory ipc-channel made for it
/// (nobody else removes them). Only a socket of this user, alone in a `.tmp*` directory of this
/// user in the temporary directory, is touched.
pub(crate) fn remove_dead_server(name: &str) {
    let Ok(Published::Listener { server, .. }) = rendezvous::read(name) else {
        return;
    };
    let socket = Path::new(&server);
    let Some(dir) = socket.parent() else {
        return;
    };
    let made_by_ipc_channel = socket.file_name() == Some("socket".as_ref())
        && dir.parent() == Some(std::env::temp_dir().as_path())
        && dir
            .file_name()
            .and_then(|d| d.to_str())
            .is_some_and(|d| d.starts_with(".tmp"));
    if made_by_ipc_channel && rendezvous::unlink_server(&server) {
        // Fails, harmlessly, if anything else is in it.
        let _ = std::fs::remove_dir(dir);
    }
}
