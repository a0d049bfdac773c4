//! The one-shot servers a rendezvous file names: the checks of a server's socket and directory
//! around a connect ([`Connecting`]), the making of a server whose directory is closed to
//! everybody else and moved into this process's home ([`new_server`]), the removal of the homes
//! of processes that are gone, and the retiring of a server that is no longer published
//! ([`unlink_server`], [`wake`]).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ipc_channel::ipc::{IpcOneShotServer, IpcSender};
use serde::{Deserialize, Serialize};

use super::{kind_of, random_u64, tmp_dir, Result};
use crate::error::OpenError as Error;
use crate::sys::{self, euid, lock};

/// The identity of a one-shot server's directory, to tell it from one made again under the
/// same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ServerDir {
    dev: u64,
    ino: u64,
}

/// Checks the one-shot server `server` (a socket path) that the rendezvous file of `name`
/// names: a socket of the effective user in a directory of the effective user that nobody else
/// can write. `Err(NotFound { channel })` when either is gone (a stale file).
pub(super) fn server_dir(name: &str, server: &str) -> Result<ServerDir> {
    let socket = Path::new(server);
    let Some(dir) = socket.parent().filter(|_| socket.is_absolute()) else {
        return Err(Error::NotAChannel {
            channel: name.into(),
            reason: format!("its rendezvous file names {server:?}, not a socket path"),
        });
    };
    if server.len() > MAX_SOCKET_PATH {
        return Err(Error::NotAChannel {
            channel: name.into(),
            reason: format!(
                "its rendezvous file names a socket path longer than {MAX_SOCKET_PATH} bytes, \
                 more than a socket address holds"
            ),
        });
    }
    let lstat = |path: &Path| match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::NotFound {
            channel: name.into(),
        }),
        Err(e) => Err(Error::Io(e)),
    };
    let me = euid();
    let refuse = |path: &Path, meta: &std::fs::Metadata| Error::NotPrivate {
        channel: path.display().to_string().into(),
        owner: meta.uid(),
        mode: meta.mode() & 0o7777,
        expected: me,
    };
    let d = lstat(dir)?;
    if !d.is_dir() {
        return Err(Error::NotAChannel {
            channel: name.into(),
            reason: format!(
                "its server's directory {} is not a directory",
                dir.display()
            ),
        });
    }
    if d.uid() != me || d.mode() & 0o022 != 0 {
        return Err(refuse(dir, &d));
    }
    let s = lstat(socket)?;
    if !s.file_type().is_socket() {
        return Err(Error::NotAChannel {
            channel: name.into(),
            reason: format!("its server {server} is {}", kind_of(s.file_type())),
        });
    }
    if s.uid() != me {
        return Err(refuse(socket, &s));
    }
    Ok(ServerDir {
        dev: d.dev(),
        ino: d.ino(),
    })
}

/// A connection being made to the one-shot server that the rendezvous file of a channel names,
/// checked to be this user's (see the module docs). The connect runs on a thread of its own: a
/// server whose queue of connections is full holds a connect until it takes one, which a
/// connection that sends nothing can put off for as long as it stays; the thread ends by itself
/// once the server takes the connection or closes.
pub(crate) struct Connecting<T> {
    name: String,
    server: String,
    before: ServerDir,
    done: mpsc::Receiver<io::Result<IpcSender<T>>>,
}

impl<T> Connecting<T>
where
    T: Serialize + for<'de> Deserialize<'de> + Send + 'static,
{
    /// Checks the server `server` of channel `name` and starts connecting to it.
    /// `Err(NotFound { channel })` when the server is gone (a stale rendezvous file).
    pub(crate) fn start(name: &str, server: &str) -> Result<Connecting<T>> {
        let before = server_dir(name, server)?;
        let (done, connected) = mpsc::sync_channel(1);
        let target = server.to_owned();
        std::thread::Builder::new()
            .name("shmlink-connect".to_owned())
            .spawn(move || {
                let _ = done.send(IpcSender::<T>::connect(target));
            })?;
        Ok(Connecting {
            name: name.into(),
            server: server.to_owned(),
            before,
            done: connected,
        })
    }

    /// Waits at most `wait` for the connection: `Ok(None)` while it is still being made,
    /// `Err(NotFound { channel })` when the server went away (or its directory is not the one
    /// checked before: nothing has been sent yet).
    pub(crate) fn wait(&self, wait: Duration) -> Result<Option<IpcSender<T>>> {
        let gone = || Error::NotFound {
            channel: self.name.as_str().into(),
        };
        let sender = match self.done.recv_timeout(wait) {
            Ok(Ok(sender)) => sender,
            Ok(Err(_)) | Err(mpsc::RecvTimeoutError::Disconnected) => return Err(gone()),
            Err(mpsc::RecvTimeoutError::Timeout) => return Ok(None),
        };
        if server_dir(&self.name, &self.server)? != self.before {
            return Err(gone());
        }
        Ok(Some(sender))
    }
}

/// Connects to the one-shot server `server` of channel `name` ([`Connecting`]), waiting at most
/// until `deadline` ([`Error::Timeout`]).
pub(crate) fn connect_server<T>(
    name: &str,
    server: &str,
    deadline: Option<Instant>,
) -> Result<IpcSender<T>>
where
    T: Serialize + for<'de> Deserialize<'de> + Send + 'static,
{
    let connecting = Connecting::<T>::start(name, server)?;
    loop {
        let wait = match deadline {
            None => Duration::MAX,
            Some(d) => d.saturating_duration_since(Instant::now()),
        };
        if let Some(sender) = connecting.wait(wait)? {
            return Ok(sender);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::Timeout {
                channel: name.into(),
                waited_for: crate::error::NOT_ANSWERED,
            });
        }
    }
}

/// Closes the directory ipc-channel made for the new one-shot server `server` of this process
/// to everybody else (mode 0700; it follows the umask otherwise), before it is published: then
/// no other user can reach the socket, and connectors, which refuse a server directory that
/// others can write, accept it whatever the umask.
pub(crate) fn close_server_dir(server: &str) -> io::Result<()> {
    let dir = Path::new(server)
        .parent()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// The longest socket path a connect reaches as it is: ipc-channel copies at most this many
/// bytes of a path into a socket address (`sun_path` less its terminating NUL), so a longer
/// one would be cut short and reach another path than the one checked.
pub(super) const MAX_SOCKET_PATH: usize = 107;

/// The start of the names of the directories where processes of this user keep their one-shot
/// servers' directories (`servers-<16 hex>`, and its lock file `servers-<16 hex>.lock`), in
/// the fallback's directory under the temporary directory.
const HOMES_PREFIX: &str = "servers-";

/// The byte of a home's lock file its process holds.
const HOME_LOCK: u64 = 0;

/// True when `path` (not followed) is the file `file` has open.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(open), Ok(now)) => open.dev() == now.dev() && open.ino() == now.ino(),
        _ => false,
    }
}

/// This process's directory for its one-shot servers' directories, in the fallback's
/// directory under the temporary directory (the file system ipc-channel makes them on), with
/// a lock file beside it that the process holds: once the process is gone, the lock is free
/// and the next `create` or `bind` of any name removes both ([`remove_dead_homes`]). Removed,
/// with anything in it, once the process's last server is done with.
struct Home {
    dir: PathBuf,
    lock_path: PathBuf,
    /// Holds the lock on [`HOME_LOCK`]; closed (releasing it) after the files are removed.
    _lock: File,
}

impl Home {
    fn make(parent: &Path) -> io::Result<Home> {
        loop {
            let id = format!("{HOMES_PREFIX}{:016x}", random_u64());
            let lock_path = parent.join(format!("{id}.lock"));
            let made = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&lock_path);
            let lock = match made {
                Ok(lock) => lock,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            };
            // A process cleaning up may have taken the new file's lock before us, and removes
            // the file: then make another.
            if !lock::take(&lock, HOME_LOCK, false)? || !same_file(&lock, &lock_path) {
                continue;
            }
            let dir = parent.join(&id);
            if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                let _ = std::fs::remove_file(&lock_path);
                return Err(e);
            }
            return Ok(Home {
                dir,
                lock_path,
                _lock: lock,
            });
        }
    }

    /// This process's home, made if it has none: `None` when the fallback's directory under
    /// the temporary directory cannot be had or the home cannot be made there.
    fn get() -> Option<Arc<Home>> {
        static HOME: Mutex<Weak<Home>> = Mutex::new(Weak::new());
        // Nothing under the lock leaves the cell half-updated: ignore poisoning.
        let mut cell = HOME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(home) = cell.upgrade() {
            return Some(home);
        }
        let parent = tmp_dir(&std::env::temp_dir(), true).ok()??;
        let home = Arc::new(Home::make(&parent).ok()?);
        *cell = Arc::downgrade(&home);
        Some(home)
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        // Both removed while the lock is held: nobody else removes them meanwhile.
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.lock_path);
    }
}

/// The directory of one of this process's one-shot servers, moved into the process's
/// [`Home`]: removed, with the socket in it, on drop (once the server is done with).
pub(crate) struct ServerHome {
    dir: PathBuf,
    _home: Arc<Home>,
}

impl Drop for ServerHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Makes a one-shot server: ipc-channel makes its socket in a new directory in the temporary
/// directory, which is closed to everybody else ([`close_server_dir`]) and then moved into
/// this process's [`Home`], so that nothing of it stays in the temporary directory if the
/// process is killed. Returns the server, the socket path to publish and what removes the
/// moved directory once the server is done with (`None` when it could not be moved: no home,
/// another file system, or a path too long for a socket address; it then stays where
/// ipc-channel made it, which removes it when the server is dropped).
pub(crate) fn new_server<T>() -> Result<(IpcOneShotServer<T>, String, Option<ServerHome>)>
where
    T: Serialize + for<'de> Deserialize<'de>,
{
    let (server, made) = IpcOneShotServer::<T>::new()?;
    close_server_dir(&made)?;
    Ok(match move_server(&made) {
        Some((moved, home)) => (server, moved, Some(home)),
        None => (server, made, None),
    })
}

/// Moves the directory of the new one-shot server `made` into this process's home: its new
/// socket path, and the guard that removes it.
fn move_server(made: &str) -> Option<(String, ServerHome)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let from = Path::new(made).parent()?;
    let home = Home::get()?;
    // Relaxed: only makes the name unique within the home, which is this process's alone.
    let dir = home
        .dir
        .join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
    let socket = dir.join("socket").to_str()?.to_owned();
    if socket.len() > MAX_SOCKET_PATH {
        return None;
    }
    // The socket keeps its listening server: a connect reaches it by its inode, under its new
    // name. ipc-channel removes the old path when the server is dropped, which finds nothing
    // there (or, if some process's temporary directory took the same random name meanwhile,
    // that one: the old name is as unlikely to come back as any such name is to be taken).
    std::fs::rename(from, &dir).ok()?;
    Some((socket, ServerHome { dir, _home: home }))
}

/// Removes the homes ([`Home`]) of processes of this user that are gone (their lock is free),
/// with the servers' directories in them. Only this user's lock files and directories in the
/// fallback's own directory are touched; a link is never followed.
pub(crate) fn remove_dead_homes() {
    let Ok(Some(parent)) = tmp_dir(&std::env::temp_dir(), false) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return;
    };
    let me = euid();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(id) = file_name
            .to_str()
            .and_then(|f| f.strip_suffix(".lock"))
            .filter(|f| f.starts_with(HOMES_PREFIX))
        else {
            continue;
        };
        let lock_path = entry.path();
        let Ok(lock) = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
            .open(&lock_path)
        else {
            continue;
        };
        let ours = lock
            .metadata()
            .is_ok_and(|m| m.file_type().is_file() && m.uid() == me);
        // Held while the home's process lives (or while another process removes it).
        if !ours || !lock::take(&lock, HOME_LOCK, false).unwrap_or(false) {
            continue;
        }
        if !same_file(&lock, &lock_path) {
            continue;
        }
        let dir = parent.join(id);
        if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir() && m.uid() == me) {
            let _ = std::fs::remove_dir_all(&dir);
        }
        let _ = std::fs::remove_file(&lock_path);
    }
}

/// Removes the socket of one of this process's one-shot servers that is no longer published,
/// so that nothing connects to it any more (the thread accepting on it keeps its listening
/// socket). Only a socket of this user in a directory of this user is removed.
pub(crate) fn unlink_server(server: &str) -> bool {
    server_dir("", server).is_ok() && std::fs::remove_file(server).is_ok()
}

/// Ends the wait of a thread that sits in `accept` on the one-shot server `server`: connects
/// without blocking and closes at once, which `accept` reports as a closed connection. Does
/// nothing when the server's queue of connections is full (its thread is not waiting in
/// `accept` then: it takes one of those) or the server is gone.
pub(crate) fn wake(server: &str) {
    drop(sys::connect_seqpacket_now(server));
}
