//! Where the fallback backend meets: its files, and the one-shot servers they name.
//!
//! A channel or listener on the fallback is found through a small rendezvous file named after
//! it (`shmlink-<name>.ipc`), and whoever holds the name (a listener or a channel's creator)
//! keeps a lock on a file beside it (`shmlink-<name>.ipc.lock`). Both live in one directory
//! that no other user can write:
//!
//! * `$XDG_RUNTIME_DIR` when it is an absolute path to a directory (not a link) owned by the
//!   effective user and writable by nobody else;
//! * otherwise the first of `<tmp>/shmlink-<euid>`, `<tmp>/shmlink-<euid>-1`, ...
//!   `<tmp>/shmlink-<euid>-15` ([`TMP_CANDIDATES`] names; `<tmp>` is [`std::env::temp_dir`]:
//!   `$TMPDIR` or `/tmp`) that `lstat` finds to be a directory (not a link) owned by the
//!   effective user that gives no permission to group or others. When none is, a creator makes
//!   the first absent one with mode 0700. A name another user took first (a directory of any
//!   mode, a link, a file) is skipped, by creators and connectors alike, so it cannot deny the
//!   backend to the user; only when all of them are taken does a creator fail, with an error
//!   that says to set `TMPDIR` or `XDG_RUNTIME_DIR` to a directory of the user's.
//!
//! The files are opened without following a link, without blocking (on a FIFO planted there)
//! and without taking a terminal, and used only when `fstat` of the open descriptor finds a
//! regular file of the effective user that no other user may read or write. A rendezvous file
//! is read up to [`MAX_RENDEZVOUS`] bytes. It is replaced in one step: written under a fresh
//! name made with `O_CREAT | O_EXCL | O_NOFOLLOW` (mode 0600), then renamed into place.
//!
//! A rendezvous file names an `ipc-channel` one-shot server: a socket in a directory that
//! ipc-channel makes in the temporary directory, which the server's process closes to everybody
//! else and moves into a directory of its own (`servers-<16 hex>`, see [`new_server`]) in the
//! fallback's directory under the temporary directory (the one above, or made for this when
//! the files are in `$XDG_RUNTIME_DIR`: a directory moves only within its file system) before
//! it publishes the name; the next `create` or `bind` of any name removes such a directory once
//! its process is gone. Before a connector sends anything there it checks that the socket and
//! its directory belong to the effective user, that nobody else can write the directory and
//! that the path fits a socket address whole, connects, and checks that the directory is still
//! the same one, so a server directory removed and made again by someone else is not trusted
//! either ([`Connecting`]).

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ipc_channel::ipc::{IpcOneShotServer, IpcSender};
use serde::{Deserialize, Serialize};

use crate::error::OpenError as Error;
use crate::sys::{self, euid, lock};

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

/// How many names under the temporary directory both ends walk for the fallback's directory:
/// `shmlink-<euid>`, then `shmlink-<euid>-1` up to `shmlink-<euid>-15`.
pub(crate) const TMP_CANDIDATES: usize = 16;

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

/// The names under the temporary directory ([`std::env::temp_dir`]) that may hold the
/// fallback's files, in the order every process walks them.
fn tmp_candidates(tmp: &Path) -> impl Iterator<Item = PathBuf> + '_ {
    let me = euid();
    (0..TMP_CANDIDATES).map(move |i| match i {
        0 => tmp.join(format!("shmlink-{me}")),
        i => tmp.join(format!("shmlink-{me}-{i}")),
    })
}

/// What is wrong with `meta` (from `lstat`) as the directory of the fallback's files: `None`
/// for a directory, not a link, of the effective user that gives no permission to group or
/// others.
fn distrust(meta: &std::fs::Metadata) -> Option<String> {
    let me = euid();
    let mode = meta.mode() & 0o7777;
    Some(if meta.file_type().is_symlink() {
        "a symbolic link".to_owned()
    } else if !meta.is_dir() {
        "not a directory".to_owned()
    } else if meta.uid() != me {
        format!("owned by uid {}", meta.uid())
    } else if mode & 0o077 != 0 {
        format!("mode {mode:04o}")
    } else {
        return None;
    })
}

/// One candidate directory, as `lstat` finds it.
enum Candidate {
    /// A directory of ours closed to everybody else.
    Ours,
    /// Nothing under the name.
    Absent,
    /// Something else: what is wrong with it.
    Refused(String),
}

fn judge(dir: &Path) -> io::Result<Candidate> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => Ok(distrust(&meta).map_or(Candidate::Ours, Candidate::Refused)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Candidate::Absent),
        Err(e) => Err(e),
    }
}

/// The directory of the fallback's files under the temporary directory `tmp`: the first
/// candidate ([`tmp_candidates`]) that is a directory of ours closed to everybody else. When
/// none is: with `create`, the first absent candidate is made (mode 0700), skipping names
/// another user took (`Err` when they took them all); without, `Ok(None)`.
///
/// Only this user makes directories of this user, so every process of the user that walks the
/// same names agrees on the directory: a name taken by somebody else is skipped, and an absent
/// name before the directory in use is never made while that directory exists.
fn tmp_dir(tmp: &Path, create: bool) -> io::Result<Option<PathBuf>> {
    let mut absent = Vec::new();
    let mut refused = Vec::new();
    for dir in tmp_candidates(tmp) {
        match judge(&dir)? {
            Candidate::Ours => return Ok(Some(dir)),
            Candidate::Absent => absent.push(dir),
            Candidate::Refused(problem) => refused.push((dir, problem)),
        }
    }
    if !create {
        return Ok(None);
    }
    for dir in absent {
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            // The umask may have taken bits away, never added any: make it exactly 0700.
            Ok(()) => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?,
            // Made meanwhile, by another process of ours or by somebody else: judged below.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        match judge(&dir)? {
            Candidate::Ours => return Ok(Some(dir)),
            Candidate::Absent => {}
            Candidate::Refused(problem) => refused.push((dir, problem)),
        }
    }
    Err(denied(tmp, &refused))
}

/// The error when every candidate under the temporary directory is taken by something the
/// fallback cannot trust (`refused`: each name and what is wrong with it).
fn denied(tmp: &Path, refused: &[(PathBuf, String)]) -> io::Error {
    let first = refused
        .first()
        .map(|(dir, problem)| format!(" (the first, {}, is {problem})", dir.display()))
        .unwrap_or_default();
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "no directory for shmlink's fallback files: all {TMP_CANDIDATES} names it may use \
             under {}, shmlink-{me} and shmlink-{me}-1 to shmlink-{me}-{last}, are taken by \
             entries that are not directories of uid {me} with mode 0700{first}; set TMPDIR to \
             a directory of yours, or XDG_RUNTIME_DIR to a directory of yours that nobody else \
             can write, in every process that uses the channel",
            tmp.display(),
            me = euid(),
            last = TMP_CANDIDATES - 1,
        ),
    )
}

/// The directory the fallback's files live in, unchecked and not made: `$XDG_RUNTIME_DIR`
/// when it can be trusted, else the candidate under the temporary directory in use, or the one
/// that would be made.
#[cfg(any(test, feature = "test-hooks"))]
fn dir_path() -> PathBuf {
    if let Some(dir) = runtime_dir() {
        return dir;
    }
    let tmp = std::env::temp_dir();
    let mut first_absent = None;
    for dir in tmp_candidates(&tmp) {
        match judge(&dir) {
            Ok(Candidate::Ours) => return dir,
            Ok(Candidate::Absent) if first_absent.is_none() => first_absent = Some(dir),
            _ => {}
        }
    }
    first_absent.unwrap_or_else(|| tmp.join(format!("shmlink-{}", euid())))
}

/// The checked directory of the fallback's files. With `create`, a missing private directory
/// is made (mode 0700); without, it gives `Err(NotFound { channel })`.
fn checked_dir(name: &str, create: bool) -> Result<PathBuf> {
    if let Some(dir) = runtime_dir() {
        return Ok(dir);
    }
    tmp_dir(&std::env::temp_dir(), create)?.ok_or_else(|| Error::NotFound {
        channel: name.into(),
    })
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

/// Whether anything is at the place of the rendezvous file of `name`, looked at without
/// opening it: `false` only when its directory or the entry itself is absent. An entry that
/// cannot be looked at counts as there, so that reading it reports what is wrong.
pub(crate) fn present(name: &str) -> bool {
    match checked_path(name, Kind::Rendezvous, false) {
        Ok(path) => match std::fs::symlink_metadata(path) {
            Ok(_) => true,
            Err(e) => e.kind() != io::ErrorKind::NotFound,
        },
        Err(Error::NotFound { .. }) => false,
        Err(_) => true,
    }
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
    } else if file_type.is_file() {
        "a regular file"
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
        channel: name.into(),
        reason: format!("its {} {} is {is}", kind.what(), path.display()),
    };
    let file = match options.custom_flags(flags).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(Error::NotFound {
                channel: name.into(),
            })
        }
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
            channel: path.display().to_string().into(),
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
    /// A channel made by [`IpcDuplex::create`](super::IpcDuplex::create): its creator's pid and
    /// one-shot server.
    Channel { pid: u32, server: String },
    /// A listener ([`listener`](super::listener)): its pid and current one-shot server.
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
            channel: name.into(),
            reason: format!(
                "its rendezvous file {} is longer than {MAX_RENDEZVOUS} bytes",
                path.display()
            ),
        });
    }
    parse(&contents).ok_or_else(|| Error::NotReady {
        channel: name.into(),
    })
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

/// The name a rendezvous file at `path` is written under with counter `n` and random bits
/// `random`: `<file>.tmp-<pid>-<n>-<random as 16 hex>`.
fn aside_name(path: &Path, prefix: &str, n: u64, random: u64) -> PathBuf {
    path.with_file_name(format!("{prefix}{}-{n}-{random:016x}", std::process::id()))
}

/// The names to write the next contents of the file at `path` under, one after another: no
/// other file has one (pid, a counter and 64 random bits).
fn aside_names(path: &Path) -> io::Result<impl FnMut() -> PathBuf + '_> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = aside_prefix(path).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    Ok(move || {
        // Relaxed: only makes the name unique within this process.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        aside_name(path, &prefix, n, random_u64())
    })
}

/// Makes a new file to write the next contents of a file in, under the first of `names` that
/// nothing has: made with `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600, so an entry planted
/// under a name (a link included) is never opened, only skipped.
fn create_aside(mut names: impl FnMut() -> PathBuf) -> io::Result<(PathBuf, File)> {
    loop {
        let aside = names();
        let made = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&aside);
        match made {
            Ok(file) => return Ok((aside, file)),
            // Taken (a file left by a process killed half-way, or planted): take the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Replaces the file at `path` with `contents` in one step (written aside, then renamed), so a
/// reader sees the old contents or the new, never a mix.
pub(crate) fn publish(path: &Path, contents: &str) -> io::Result<()> {
    publish_under(path, contents, aside_names(path)?)
}

/// [`publish`], writing aside under the first of `names` that nothing has.
fn publish_under(path: &Path, contents: &str, names: impl FnMut() -> PathBuf) -> io::Result<()> {
    let (aside, mut file) = create_aside(names)?;
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
/// can write. `Err(NotFound { channel })` when either is gone (a stale file).
fn server_dir(name: &str, server: &str) -> Result<ServerDir> {
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
const MAX_SOCKET_PATH: usize = 107;

/// The start of the names of the directories where processes of this user keep their one-shot
/// servers' directories (`servers-<16 hex>`, and its lock file `servers-<16 hex>.lock`), in
/// the fallback's directory under the temporary directory.
const HOMES_PREFIX: &str = "servers-";

/// The byte of a home's lock file its process holds.
const HOME_LOCK: u64 = 0;

/// 64 bits from the operating system's randomness.
fn random_u64() -> u64 {
    // Each `RandomState` is seeded from the operating system's randomness.
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

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
        let judge = |path: &Path| distrust(&std::fs::symlink_metadata(path).unwrap());
        let good = scratch.dir("good", 0o700);
        assert_eq!(judge(&good), None);

        let open = scratch.dir("open", 0o1777);
        let link = scratch.0.join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let file = scratch.0.join("file");
        std::fs::write(&file, "").unwrap();
        for (path, says) in [
            (&open, "mode 1777"),
            (&link, "a symbolic link"),
            (&file, "not a directory"),
        ] {
            assert_eq!(judge(path).as_deref(), Some(says));
        }
        if euid() == 0 {
            // Another user's directory (only root can give one away).
            let theirs = scratch.dir("theirs", 0o700);
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert_eq!(judge(&theirs).as_deref(), Some("owned by uid 65534"));
        }
    }

    /// The candidate names under `scratch`, in order.
    fn candidates(scratch: &Scratch) -> Vec<PathBuf> {
        tmp_candidates(&scratch.0).collect()
    }

    #[test]
    fn the_first_candidate_is_made_and_then_found_by_every_walk() {
        let scratch = Scratch::new("walk");
        let names = candidates(&scratch);
        assert_eq!(names.len(), TMP_CANDIDATES);
        assert_eq!(names[0], scratch.0.join(format!("shmlink-{}", euid())));
        assert_eq!(names[2], scratch.0.join(format!("shmlink-{}-2", euid())));
        assert_eq!(
            tmp_dir(&scratch.0, false).unwrap(),
            None,
            "nothing made yet"
        );
        let made = tmp_dir(&scratch.0, true).unwrap();
        assert_eq!(made.as_ref(), Some(&names[0]));
        let meta = std::fs::symlink_metadata(&names[0]).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o700);
        assert_eq!(tmp_dir(&scratch.0, false).unwrap(), made);
        assert_eq!(tmp_dir(&scratch.0, true).unwrap(), made);
    }

    #[test]
    fn names_taken_by_others_are_skipped_by_creators_and_connectors_alike() {
        let scratch = Scratch::new("squat");
        let names = candidates(&scratch);
        // A link, a file, a directory open to all, and (as root) another user's directory.
        std::os::unix::fs::symlink(&scratch.0, &names[0]).unwrap();
        std::fs::write(&names[1], "").unwrap();
        scratch.dir(names[2].file_name().unwrap().to_str().unwrap(), 0o777);
        let mut taken = 3;
        if euid() == 0 {
            let theirs = scratch.dir(names[3].file_name().unwrap().to_str().unwrap(), 0o700);
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            taken = 4;
        }
        assert_eq!(tmp_dir(&scratch.0, false).unwrap(), None);
        let made = tmp_dir(&scratch.0, true).unwrap();
        assert_eq!(made.as_ref(), Some(&names[taken]));
        assert_eq!(
            tmp_dir(&scratch.0, false).unwrap(),
            made,
            "a connector finds it"
        );
        // A name before it that comes free is not made while the one in use exists.
        std::fs::remove_file(&names[1]).unwrap();
        assert_eq!(tmp_dir(&scratch.0, true).unwrap(), made);
        assert!(!names[1].exists());
    }

    #[test]
    fn with_every_name_taken_the_error_says_what_the_user_can_do() {
        let scratch = Scratch::new("denied");
        for name in candidates(&scratch) {
            std::os::unix::fs::symlink("/", &name).unwrap();
        }
        assert_eq!(tmp_dir(&scratch.0, false).unwrap(), None);
        let err = tmp_dir(&scratch.0, true).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        let text = err.to_string();
        for says in [
            "TMPDIR",
            "XDG_RUNTIME_DIR",
            "a symbolic link",
            &scratch.0.display().to_string(),
        ] {
            assert!(text.contains(says), "{text}");
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
        assert!(
            matches!(open_at(&scratch.0.join("none")), Err(Error::NotFound { channel: n }) if n == "x")
        );
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
        let (first, file) = create_aside(aside_names(&path).unwrap()).unwrap();
        drop(file);
        let (second, file) = create_aside(aside_names(&path).unwrap()).unwrap();
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
    fn a_link_under_the_name_written_aside_is_skipped_not_written_through() {
        let scratch = Scratch::new("aside-link");
        let path = scratch.0.join("shmlink-l.ipc");
        let victim = scratch.0.join("victim");
        std::fs::write(&victim, "victim").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let prefix = aside_prefix(&path).unwrap();
        // The names the publisher takes: the first one a link to the victim, as a neighbour who
        // guessed it would plant it.
        let planted = aside_name(&path, &prefix, 0, 0x5eed);
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let fresh = aside_name(&path, &prefix, 1, 0x5eed);
        let mut names = [planted.clone(), fresh].into_iter();
        publish_under(&path, "9\n/tmp/z/socket", || names.next().unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "victim");
        assert_eq!(
            std::fs::symlink_metadata(&victim).unwrap().mode() & 0o7777,
            0o600
        );
        assert!(std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "9\n/tmp/z/socket");
        assert!(names.next().is_none(), "the publisher took the second name");
    }

    /// A socket listening at `path` (without blocking its accepts).
    fn listening(path: &Path) -> std::os::unix::net::UnixListener {
        let socket = std::os::unix::net::UnixListener::bind(path).unwrap();
        socket.set_nonblocking(true).unwrap();
        socket
    }

    #[test]
    fn a_server_is_refused_unless_its_socket_and_directory_are_ours_and_closed() {
        let scratch = Scratch::new("server");
        let check = |path: &Path| server_dir("n", path.to_str().unwrap());
        let good = scratch.dir("good", 0o700).join("socket");
        let _good = listening(&good);
        check(&good).unwrap();

        let open = scratch.dir("open", 0o777).join("socket");
        let open_socket = listening(&open);
        assert!(matches!(
            check(&open),
            Err(Error::NotPrivate { mode: 0o777, .. })
        ));
        let link = scratch.0.join("link");
        std::os::unix::fs::symlink(scratch.0.join("good"), &link).unwrap();
        assert!(matches!(check(&link.join("socket")),
            Err(Error::NotAChannel { reason, .. }) if reason.contains("not a directory")));
        let file = scratch.dir("file", 0o700).join("socket");
        std::fs::write(&file, "").unwrap();
        assert!(matches!(check(&file),
            Err(Error::NotAChannel { reason, .. }) if reason.contains("a regular file")));
        assert!(matches!(
            check(&scratch.0.join("good/none")),
            Err(Error::NotFound { .. })
        ));
        assert!(matches!(
            server_dir("n", "relative/socket"),
            Err(Error::NotAChannel { .. })
        ));
        let long = format!("/{}/socket", "d".repeat(MAX_SOCKET_PATH));
        assert!(matches!(server_dir("n", &long),
            Err(Error::NotAChannel { reason, .. }) if reason.contains("longer than")));
        if euid() == 0 {
            let theirs = scratch.dir("theirs", 0o700);
            let socket = theirs.join("socket");
            let _theirs = listening(&socket);
            std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
            assert!(matches!(
                check(&socket),
                Err(Error::NotPrivate { owner: 65534, .. })
            ));
            std::os::unix::fs::chown(&theirs, Some(0), Some(0)).unwrap();
            std::os::unix::fs::chown(&socket, Some(65534), Some(65534)).unwrap();
            assert!(matches!(
                check(&socket),
                Err(Error::NotPrivate { owner: 65534, .. })
            ));
        }
        // A connect to a refused server ends before it reaches the socket.
        let refused = connect_server::<u8>(
            "n",
            open.to_str().unwrap(),
            Some(Instant::now() + Duration::from_secs(10)),
        );
        assert!(matches!(refused, Err(Error::NotPrivate { .. })));
        assert_eq!(
            open_socket.accept().unwrap_err().kind(),
            io::ErrorKind::WouldBlock,
            "nobody connected"
        );
    }

    #[test]
    fn a_server_directory_made_again_while_connecting_is_not_trusted() {
        let (server, name) = IpcOneShotServer::<u8>::new().unwrap();
        close_server_dir(&name).unwrap();
        let socket = Path::new(&name);
        let dir = socket.parent().unwrap().to_owned();
        let moved = dir.with_extension("moved");
        let connecting = Connecting::<u8>::start("n", &name).unwrap();
        // The directory goes and another one, with the same socket in it, takes its name.
        std::fs::rename(&dir, &moved).unwrap();
        std::fs::DirBuilder::new().mode(0o700).create(&dir).unwrap();
        std::fs::rename(moved.join("socket"), socket).unwrap();
        let waited = connecting.wait(Duration::from_secs(10));
        let _ = std::fs::remove_dir_all(&moved);
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            matches!(&waited, Err(Error::NotFound { channel: n }) if *n == "n"),
            "{waited:?}"
        );
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
