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
//!
//! This file holds the choice of the directory and the rules of the files in it (how they are
//! opened, read and published); `server.rs` the one-shot servers they name (the checks around a
//! connect, the servers' directories and their removal); `tests.rs` the unit tests.

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

mod server;

use crate::error::OpenError as Error;
use crate::sys::euid;
pub(crate) use server::{
    connect_server, new_server, remove_dead_homes, unlink_server, wake, Connecting, ServerHome,
};

type Result<T, E = Error> = std::result::Result<T, E>;

/// Longest rendezvous file read (its contents are a pid and a socket path).
pub(crate) const MAX_RENDEZVOUS: usize = 4096;

/// First line of a listener's rendezvous file.
pub(crate) const LISTENER_TAG: &str = "listener";
/// First line of a lossless topic's rendezvous file (its publisher serves like a listener).
const TOPIC_TAG: &str = "topic";
/// First line of an overwrite topic's rendezvous file.
const OVERWRITE_TOPIC_TAG: &str = "topic-overwrite";

/// What a listener's accept thread serves: clients of a listener, or a topic's subscribers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Serves {
    Clients,
    /// A topic's subscribers; `overwrite` for a topic whose publisher never waits.
    Topic {
        overwrite: bool,
    },
}

impl Serves {
    /// The first line of its rendezvous file.
    pub(crate) fn tag(self) -> &'static str {
        match self {
            Serves::Clients => LISTENER_TAG,
            Serves::Topic { overwrite: false } => TOPIC_TAG,
            Serves::Topic { overwrite: true } => OVERWRITE_TOPIC_TAG,
        }
    }
}

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

/// The names whose rendezvous files are in the fallback's directory now (none when it has no
/// directory yet): each `shmlink-<name>.ipc` whose name follows the one name rule.
pub(crate) fn published_names() -> Vec<String> {
    let Ok(dir) = checked_dir("", false) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| {
            let file = entry.file_name().into_string().ok()?;
            let name = file.strip_prefix("shmlink-")?.strip_suffix(".ipc")?;
            crate::shm::mapping::validate_name(name).ok()?;
            Some(name.to_owned())
        })
        .collect();
    names.sort();
    names
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
    /// A listener ([`listener`](super::listener)) or a topic's publisher (`topic.rs`): its
    /// pid, current one-shot server, and which of the two it is.
    Listener {
        pid: u32,
        server: String,
        serves: Serves,
    },
}

/// Reads the rendezvous file of `name`: `<pid>\n<server>` for a channel,
/// `listener\n<pid>\n<server>` for a listener, `topic\n...` or `topic-overwrite\n...` for a
/// topic. `Err(NotFound)` without a file,
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
    let listener = |rest: &str, serves| {
        split(rest).map(|(pid, server)| Published::Listener {
            pid,
            server,
            serves,
        })
    };
    match contents.split_once('\n') {
        Some((LISTENER_TAG, rest)) => listener(rest, Serves::Clients),
        Some((TOPIC_TAG, rest)) => listener(rest, Serves::Topic { overwrite: false }),
        Some((OVERWRITE_TOPIC_TAG, rest)) => listener(rest, Serves::Topic { overwrite: true }),
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

/// 64 bits from the operating system's randomness.
fn random_u64() -> u64 {
    // Each `RandomState` is seeded from the operating system's randomness.
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

#[cfg(test)]
mod tests;
