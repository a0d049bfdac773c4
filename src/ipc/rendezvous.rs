//! Where the fallback backend meets: its files, and the one-shot servers they name.
//!
//! A channel or listener on the fallback is found through a small rendezvous file named after
//! it (`shmlink-<name>.ipc`), and whoever holds the name (a listener or a channel's creator)
//! keeps a lock on a file beside it (`shmlink-<name>.ipc.lock`). Both live in one directory that no other user can write:
//!
//! * `$XDG_RUNTIME_DIR` when it is an absolute path to a directory (not a link) owned by the
//!   effective user and writable by nobody else;
//! * otherwise `<tmp>/shmlink-<euid>` (`<tmp>` is [`std::env::temp_dir`]: `$TMPDIR` or `/tmp`),
//!   made with mode 0700 on first use, and used only while `lstat` finds a directory (not a
//!   link) owned by the effective user that gives no permission to group or others. Anything
//!   else under that name is refused with an error naming the path.
//!
//! The files are opened without following a link, without blocking (on a FIFO planted there)
//! and without taking a terminal, and used only when `fstat` of the open descriptor finds a
//! regular file of the effective user that no other user may read or write. A rendezvous file
//! is read up to [`MAX_RENDEZVOUS`] bytes. It is replaced in one step: written under a fresh
//! name made with `O_CREAT | O_EXCL | O_NOFOLLOW` (mode 0600), then renamed into place.
//!
//! A rendezvous file names an `ipc-channel` one-shot server: a socket in a directory that
//! ipc-channel made in the temporary directory, which the server's process closes to everybody
//! else before it publishes the name. Before a connector sends anything there it
//! checks that the socket and its directory belong to the effective user and that nobody else
//! can write the directory, connects, and checks that the directory is still the same one, so a
//! server directory removed and made again by someone else is not trusted either
//! ([`Connecting`]).

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ipc_channel::ipc::IpcSender;
use serde::{Deserialize, Serialize};

use crate::error::OpenError as Error;
use crate::sys::{self, euid};

type Result<T, E = Error> = std::result::Result<T, E>;

/// Longest rendezvous file read (its contents are a pid and a socket path).
pub(crate) const MAX_RENDEZVOUS: usize = 4096;

/// First line of a listener's rendezvous file.
pub(crate) const LISTENER_TAG: &str = "listener";

/// The fallback's files of one channel or listener.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// `shmlink-<name>.ipc`: what to connect to.
    Rendezvous,
    /// `shmlink-<name>.ipc.lock`: the liveness of the listener or channel creator holding the name.
    Lock,
}

impl Kind {
    fn file_name(self, name: &str) -> String {
        match self {
            Kind::Rendezvous => format!("shmlink-{name}.ipc"),
            Kind::Lock => format!("shmlink-{name}.ipc.lock"),
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Rendezvous => "rendezvous file",
            Kind::Lock => "lock file",
        }
    }
}

/// `$XDG_RUNTIME_DIR`, if it can be trusted (see [`trusted_runtime_dir`]).
fn runtime_dir() -> Option<PathBuf> {
    trusted_runtime_dir(std::env::var_os("XDG_RUNTIME_DIR")?)
}

/// `dir`, if it is an absolute path to a directory of ours that nobody else can write (judged
/// with `lstat`: a link is not followed, and not used).
fn trusted_runtime_dir(dir: std::ffi::OsString) -> Option<PathBuf> {
    let dir = PathBuf::from(dir);
    if !dir.is_absolute() {
        return None;
    }
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    (meta.is_dir() && meta.uid() == euid() && meta.mode() & 0o022 == 0).then_some(dir)
}

/// The directory the fallback's files live in, unchecked: `$XDG_RUNTIME_DIR` when it can be
/// trusted, else `<tmp>/shmlink-<euid>`.
fn dir_path() -> PathBuf {
    runtime_dir().unwrap_or_else(|| std::env::temp_dir().join(format!("shmlink-{}", euid())))
}

/// Refuses a private directory that is not a directory of ours closed to everybody else.
fn check_private_dir(dir: &Path, meta: &std::fs::Metadata) -> Result<()> {
    let me = euid();
    let mode = meta.mode() & 0o7777;
    let problem = if meta.file_type().is_symlink() {
        "a symbolic link".to_owned()
    } else if !meta.is_dir() {
        "not a directory".to_owned()
    } else if meta.uid() != me {
        format!("owned by uid {}", meta.uid())
    } else if mode & 0o077 != 0 {
        format!("mode {mode:04o}")
    } else {
        return Ok(());
    };
    Err(Error::Io(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{}: refusing it as the directory of shmlink's fallback files: it is {problem}, \
             where a directory owned by uid {me} with mode 0700 is needed (remove it, and \
             shmlink makes it again)",
            dir.display()
        ),
    )))
}

/// The checked directory of the fallback's files. With `create`, a missing private directory
/// is made (mode 0700); without, it gives `Err(NotFound(name))`.
fn checked_dir(name: &str, create: bool) -> Result<PathBuf> {
    if let Some(dir) = runtime_dir() {
        return Ok(dir);
    }
    let dir = dir_path();
    if create {
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            // The umask may have taken bits away, never added any: make it exactly 0700.
            Ok(()) => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::Io(e)),
        }
    }
    match std::fs::symlink_metadata(&dir) {
        Ok(meta) => check_private_dir(&dir, &meta).map(|()| dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::NotFound(name.into())),
        Err(e) => Err(Error::Io(e)),
    }
}

/// Where the `kind` file of channel `name` lives, without checking or making its directory
/// (for tests, which look for the files).
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) fn path_of(name: &str, kind: Kind) -> PathBuf {
    dir_path().join(kind.file_name(name))
}

/// The `kind` file of channel `name` in its checked directory (made first with `create`).
pub(crate) fn checked_path(name: &str, kind: Kind, create: bool) -> Result<PathBuf> {
    Ok(checked_dir(name, create)?.join(kind.file_name(name)))
}

/// Where the rendezvous file of channel `name` lives (its directory neither checked nor made).
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) fn rendezvous_path(name: &str) -> PathBuf {
    path_of(name, Kind::Rendezvous)
}

fn kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Opens the `kind` file at `path` of channel `name` with `options`, without following a link,
/// blocking or taking a terminal, and refuses it unless it is a regular file of the effective
/// user that no other user may read or write (judged on the open descriptor).
pub(crate) fn open(path: &Path, name: &str, kind: Kind, options: &mut OpenOptions) -> Result<File> {
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    let not_a_channel = |is: &str| Error::NotAChannel {
        name: name.into(),
        reason: format!("its {} {} is {is}", kind.what(), path.display()),
    };
    let file = match options.custom_flags(flags).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Error::NotFound(name.into())),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(not_a_channel("a symbolic link"))
        }
        Err(e) => return Err(Error::Io(e)),
    };
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(not_a_channel(kind_of(meta.file_type())));
    }
    let mode = meta.mode() & 0o7777;
    if meta.uid() != euid() || mode & 0o077 != 0 {
        return Err(Error::NotPrivate {
            name: path.display().to_string().into(),
            owner: meta.uid(),
            mode,
            expected: euid(),
        });
    }
    Ok(file)
}

/// What a rendezvous file publishes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Published {
    /// A channel made by [`crate::fallback::IpcDuplex::create`]: its creator's pid and
    /// one-shot server.
    Channel { pid: u32, server: String },
    /// A listener ([`crate::ipc_listener`]): its pid and current one-shot server.
    Listener { pid: u32, server: String },
}

/// Reads the rendezvous file of `name`: `<pid>\n<server>` for a channel,
/// `listener\n<pid>\n<server>` for a listener. `Err(NotFound)` without a file,
/// `Err(NotReady)` for one that does not parse; a file that cannot be trusted, or is longer
/// than [`MAX_RENDEZVOUS`], is refused ([`Error::NotPrivate`], [`Error::NotAChannel`]).
pub(crate) fn read(name: &str) -> Result<Published> {
    let path = checked_path(name, Kind::Rendezvous, false)?;
    let file = open(&path, name, Kind::Rendezvous, OpenOptions::new().read(true))?;
    let mut contents = Vec::new();
    file.take(MAX_RENDEZVOUS as u64 + 1)
        .read_to_end(&mut contents)?;
    if contents.len() > MAX_RENDEZVOUS {
        return Err(Error::NotAChannel {
            name: name.into(),
            reason: format!(
                "its rendezvous file {} is longer than {MAX_RENDEZVOUS} bytes",
                path.display()
            ),
        });
    }
    parse(&contents).ok_or_else(|| Error::NotReady(name.into()))
}

fn parse(contents: &[u8]) -> Option<Published> {
    let contents = std::str::from_utf8(contents).ok()?;
    let split = |text: &str| {
        text.split_once('\n')
            .and_then(|(pid, server)| Some((pid.parse::<u32>().ok()?, server.to_owned())))
            .filter(|(_, server)| !server.is_empty() && !server.contains('\n'))
    };
    match contents.split_once('\n') {
        Some((LISTENER_TAG, rest)) => {
            split(rest).map(|(pid, server)| Published::Listener { pid, server })
        }
        _ => split(contents).map(|(pid, server)| Published::Channel { pid, server }),
    }
}

/// The prefix of the names a rendezvous file at `path` is written under before it is renamed
/// into place.
pub(crate) fn aside_prefix(path: &Path) -> Option<String> {
    Some(format!("{}.tmp-", path.file_name()?.to_str()?))
}

/// Makes a new file beside `path` to write its next contents in: a name no other file has
/// (pid, a counter and 64 random bits), made with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600.
fn create_aside(path: &Path) -> io::Result<(PathBuf, File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = aside_prefix(path).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        // Relaxed: only makes the name unique within this process.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // Each `RandomState` is seeded from the operating system's randomness.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let aside =
            path.with_file_name(format!("{prefix}{}-{n}-{random:016x}", std::process::id()));
        let made = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&aside);
        match made {
            Ok(file) => return Ok((aside, file)),
            // Taken (a file left by a process killed half-way): take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Replaces the file at `path` with `contents` in one step (written aside, then renamed), so a
/// reader sees the old contents or the new, never a mix.
pub(crate) fn publish(path: &Path, contents: &str) -> io::Result<()> {
    let (aside, mut file) = create_aside(path)?;
    let written = file
        .write_all(contents.as_bytes())
        // The umask may have taken bits away from 0600, never added: make it exact.
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(0o600)));
    drop(file);
    written
        .and_then(|()| std::fs::rename(&aside, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&aside);
        })
}

/// Removes the files a process killed while it published (between making the file aside and
/// renaming it into place) left beside the rendezvous file of `name`. Only for the holder of the
/// listener lock of `name`, the only process that publishes under it: any such file is left
/// over. Only this user's regular files are touched (the directory is this user's alone).
pub(crate) fn remove_unpublished(name: &str) {
    let Ok(path) = checked_path(name, Kind::Rendezvous, false) else {
        return;
    };
    let (Some(dir), Some(prefix)) = (path.parent(), aside_prefix(&path)) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = euid();
    for entry in entries.flatten() {
        let leftover = entry
            .file_name()
            .to_str()
            .is_some_and(|f| f.starts_with(&prefix));
        // `DirEntry::metadata` does not follow a link.
        let ours = entry
            .metadata()
            .is_ok_and(|m| m.file_type().is_file() && m.uid() == me);
        if leftover && ours {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The identity of a one-shot server's directory, to tell it from one made again under the
/// same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ServerDir {
    dev: u64,
    ino: u64,
}

/// Checks the one-shot server `server` (a socket path) that the rendezvous file of `name`
/// names: a socket of the effective user in a directory of the effective user that nobody else
/// can write. `Err(NotFound(name))` when either is gone (a stale file).
fn server_dir(name: &str, server: &str) -> Result<ServerDir> {
    let socket = Path::new(server);
    let Some(dir) = socket.parent().filter(|_| socket.is_absolute()) else {
        return Err(Error::NotAChannel {
            name: name.into(),
            reason: format!("its rendezvous file names {server:?}, not a socket path"),
        });
    };
    let lstat = |path: &Path| match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::NotFound(name.into())),
        Err(e) => Err(Error::Io(e)),
    };
    let me = euid();
    let refuse = |path: &Path, meta: &std::fs::Metadata| Error::NotPrivate {
        name: path.display().to_string().into(),
        owner: meta.uid(),
        mode: meta.mode() & 0o7777,
        expected: me,
    };
    let d = lstat(dir)?;
    if !d.is_dir() {
        return Err(Error::NotAChannel {
            name: name.into(),
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
            name: name.into(),
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
    /// `Err(NotFound(name))` when the server is gone (a stale rendezvous file).
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
    /// `Err(NotFound(name))` when the server went away (or its directory is not the one checked
    /// before: nothing has been sent yet).
    pub(crate) fn wait(&self, wait: Duration) -> Result<Option<IpcSender<T>>> {
        let gone = || Error::NotFound(self.name.as_str().into());
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
            return Err(Error::Timeout);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    /// A directory of its own under the temporary directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir = std::env::temp_dir()
                .join(format!("shmlink-rendezvous-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Scratch {
        /// A directory `name` in the scratch directory, with permission bits `mode`.
        fn dir(&self, name: &str, mode: u32) -> PathBuf {
            let dir = self.0.join(name);
            std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            dir
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_private_directory_must_be_ours_closed_and_not_a_link() {
        let scratch = Scratch::new("dirs");
        let judge = |path: &Path| {
            let meta = std::fs::symlink_metadata(path).unwrap();
            check_private_dir(path, &meta)
        };
        let good = scratch.dir("good", 0o700);
        judge(&good).unwrap();

        let open = scratch.dir("open", 0o1777);
        let link = scratch.0.join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let file = scratch.0.join("file");
        std::fs::write(&file, "").unwrap();
        for (path, says) in [
            (&open, "mode 1777"),
            (&link, "symbolic link"),
            (&file, "not a directory"),
        ] {
            let err = judge(path).unwrap_err();
            let text = err.to_string();
            assert!(matches!(&err, Error::Io(e) if e.kind() == io::ErrorKind::PermissionDenied));
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains(says), "{text}");
        }
        if euid() == 0 {
            // Another user's directory (only root can give one away).
            let theirs = scratch.dir("theirs", 0o700);
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            let text = judge(&theirs).unwrap_err().to_string();
            assert!(text.contains("owned by uid 65534"), "{text}");
        }
    }

    #[test]
    fn a_runtime_directory_is_used_only_when_nobody_else_can_write_it() {
        let scratch = Scratch::new("runtime");
        let trusted = |path: &Path| trusted_runtime_dir(path.as_os_str().to_owned());
        let ours = scratch.dir("ours", 0o700);
        assert_eq!(trusted(&ours), Some(ours.clone()));
        // Readable by others is fine (the files in it are not); writable is not.
        std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(trusted(&ours), Some(ours.clone()));
        let shared = scratch.dir("shared", 0o1777);
        assert_eq!(trusted(&shared), None);
        let link = scratch.0.join("link");
        std::os::unix::fs::symlink(&ours, &link).unwrap();
        assert_eq!(trusted(&link), None);
        assert_eq!(trusted(Path::new("relative/dir")), None);
        assert_eq!(trusted(Path::new("")), None);
        if euid() == 0 {
            std::os::unix::fs::chown(&ours, Some(65534), Some(65534)).unwrap();
            assert_eq!(trusted(&ours), None);
        }
    }

    #[test]
    fn files_are_refused_unless_private_regular_and_not_links() {
        let scratch = Scratch::new("files");
        let open_at =
            |path: &Path| open(path, "x", Kind::Rendezvous, OpenOptions::new().read(true));
        let good = scratch.0.join("good");
        std::fs::write(&good, "1\n/s").unwrap();
        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o600)).unwrap();
        open_at(&good).unwrap();

        let readable = scratch.0.join("readable");
        std::fs::write(&readable, "1\n/s").unwrap();
        std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            open_at(&readable),
            Err(Error::NotPrivate { mode: 0o644, .. })
        ));

        let link = scratch.0.join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert!(
            matches!(open_at(&link), Err(Error::NotAChannel { reason, .. }) if reason.contains("symbolic link"))
        );

        let fifo = scratch.0.join("fifo");
        let c = CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Opening does not wait for a writer; the FIFO is refused as what it is.
        assert!(
            matches!(open_at(&fifo), Err(Error::NotAChannel { reason, .. }) if reason.contains("a FIFO"))
        );
        assert!(matches!(open_at(&scratch.0.join("none")), Err(Error::NotFound(n)) if n == "x"));
    }

    #[test]
    fn publishing_never_writes_through_a_link_and_leaves_one_private_file() {
        let scratch = Scratch::new("publish");
        let path = scratch.0.join("shmlink-p.ipc");
        let victim = scratch.0.join("victim");
        std::fs::write(&victim, "victim").unwrap();
        // A link in place of the file itself is replaced, not written through.
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        publish(&path, "7\n/tmp/x/socket").unwrap();
        publish(&path, "8\n/tmp/y/socket").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.mode() & 0o7777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "8\n/tmp/y/socket");
        let names: Vec<_> = std::fs::read_dir(&scratch.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "nothing left aside: {names:?}");
    }

    #[test]
    fn every_name_written_aside_is_new() {
        let scratch = Scratch::new("aside");
        let path = scratch.0.join("shmlink-a.ipc");
        let (first, file) = create_aside(&path).unwrap();
        drop(file);
        let (second, file) = create_aside(&path).unwrap();
        drop(file);
        assert_ne!(first, second);
        let prefix = aside_prefix(&path).unwrap();
        for made in [&first, &second] {
            let file_name = made.file_name().unwrap().to_str().unwrap();
            assert!(file_name.starts_with(&prefix), "{file_name}");
            let meta = std::fs::symlink_metadata(made).unwrap();
            assert_eq!(meta.mode() & 0o7777, 0o600);
        }
    }

    #[test]
    fn rendezvous_contents_parse_or_are_refused() {
        assert_eq!(
            parse(b"12\n/tmp/.tmpA/socket"),
            Some(Published::Channel {
                pid: 12,
                server: "/tmp/.tmpA/socket".into()
            })
        );
        assert_eq!(
            parse(b"listener\n13\n/tmp/.tmpB/socket"),
            Some(Published::Listener {
                pid: 13,
                server: "/tmp/.tmpB/socket".into()
            })
        );
        for bad in [
            &b""[..],
            b"12",
            b"x\n/s",
            b"12\n",
            b"12\n/a\n/b",
            b"\xff\n/s",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
