//! Named shared mappings: create, open, unlink, and the names they go by.
//!
//! Two kinds of backing are offered:
//! * a POSIX shared-memory object named `/shmlink-<name>` (on Linux it shows up as
//!   `/dev/shm/shmlink-<name>`), through `shm_open` and `memmap2`;
//! * a file at a path the caller chooses (a tmpfs or hugetlbfs file, say), through `memmap2`.
//!
//! Both are created exclusively with owner-only permissions (0600) and are removed by the creator
//! when it drops them. A creator takes its endpoint lock (a write lock on the creator's byte of
//! the object, see `sys/lock.rs`) before it sizes the object and holds it for as long as the
//! mapping lives; the kernel releases it when the process dies, however it dies, so a lock that can be
//! taken means a dead creator, whatever happened to its pid since. Each [`Mapping`] keeps its own
//! open file description of the object, which is what endpoint locks belong to. Apart from that
//! lock, this module knows nothing about what is stored in a mapping.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use memmap2::MmapMut;

use crate::error::OpenError;
use crate::shm::layout::CREATOR_LOCK;
use crate::sys::{self, lock};

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// Prefix of every OS-level name this crate creates.
pub(crate) const OS_PREFIX: &str = "shmlink-";
/// Longest name of a channel or a listener, on either backend, in bytes. The whole rule: 1 to
/// `MAX_NAME_LEN` bytes of ASCII letters, digits, `.`, `_` and `-`, not starting with `.` or
/// `-` ([`OpenError::InvalidName`] otherwise).
///
/// A listener's connections are channels named `<name>.<pid>.<n>`, up to 32 bytes longer,
/// which the library makes itself; with the `shmlink-` prefix the longest of those still fits
/// in a file name (255 bytes), and so do the fallback's `shmlink-<name>.ipc.lock` files.
pub const MAX_NAME_LEN: usize = 200;
/// Longest suffix a listener adds to its name for a connection: `.<pid>.<seq>`, a `u32` and a
/// `u64` in decimal.
pub(crate) const CONNECTION_SUFFIX_MAX: usize = 2 + 10 + 20;
/// Longest name of an object the crate makes: a listener's connection.
const MAX_OBJECT_NAME_LEN: usize = MAX_NAME_LEN + CONNECTION_SUFFIX_MAX;
const _: () = {
    // NAME_MAX: the longest file name in /dev/shm, prefix included.
    assert!(OS_PREFIX.len() + MAX_OBJECT_NAME_LEN <= 255);
    // The literal in `validate_name`'s reason.
    assert!(MAX_NAME_LEN == 200);
};

/// The listener a connection's name (`<listener>.<pid>.<seq>`) names, if the name has that form.
pub(crate) fn connection_listener(name: &str) -> Option<&str> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (rest, seq) = name.rsplit_once('.')?;
    let (listener, pid) = rest.rsplit_once('.')?;
    (digits(seq) && digits(pid) && !listener.is_empty()).then_some(listener)
}

/// Checks a name a user chose, for a channel or a listener on either backend: 1 to
/// [`MAX_NAME_LEN`] bytes of `[A-Za-z0-9._-]`, not starting with `.` or `-`.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    check_name(name, MAX_NAME_LEN, "the name is longer than 200 bytes")
}

/// Checks the name of an object the crate may have made: a name [`validate_name`] accepts, or
/// a listener's connection named after one (`<name>.<pid>.<seq>`).
pub(crate) fn validate_object_name(name: &str) -> Result<()> {
    check_name(
        name,
        MAX_OBJECT_NAME_LEN,
        "the name is longer than any shmlink object's",
    )
}

fn check_name(name: &str, max: usize, too_long: &'static str) -> Result<()> {
    let fail = |reason| {
        Err(OpenError::InvalidName {
            name: name.into(),
            reason,
        })
    };
    if name.is_empty() {
        return fail("the name is empty");
    }
    if name.len() > max {
        return fail(too_long);
    }
    if name.starts_with('.') || name.starts_with('-') {
        return fail("the name must not start with '.' or '-'");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return fail("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// The OS-level name of a channel: `/shmlink-<name>`.
pub(crate) fn os_name(name: &str) -> String {
    format!("/{OS_PREFIX}{name}")
}

/// Where named mappings show up in the file system, where the platform has such a place.
pub(crate) fn shm_dir() -> Option<&'static Path> {
    let dir = Path::new("/dev/shm");
    dir.is_dir().then_some(dir)
}

/// What the shared-memory namespace holds under a channel's name, looked at without opening
/// it (`lstat` in [`shm_dir`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A regular file of our effective user: a mapping (or one its creator is still making).
    Mapping,
    /// Something else: another user's object, a link, a directory, or an entry that cannot be
    /// looked at. Opening it says what is wrong with it.
    Other,
    /// Nothing.
    Absent,
}

/// What is under `name` in the shared-memory namespace. Where the platform has no directory
/// that lists the objects, the object is opened to find out, and only "no such object" counts
/// as [`Entry::Absent`].
pub(crate) fn entry(name: &str) -> Entry {
    let meta = match shm_dir() {
        Some(dir) => std::fs::symlink_metadata(dir.join(format!("{OS_PREFIX}{name}"))),
        None => match open_shm_file(name) {
            Ok(file) => file.metadata(),
            Err(OpenError::NotFound { .. }) => return Entry::Absent,
            Err(_) => return Entry::Other,
        },
    };
    match meta {
        Ok(meta) if meta.file_type().is_file() && meta.uid() == sys::euid() => Entry::Mapping,
        Ok(_) => Entry::Other,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Entry::Absent,
        Err(_) => Entry::Other,
    }
}

/// Removes the OS name of a channel. The memory stays mapped in processes that still use it.
pub(crate) fn unlink(name: &str) -> Result<()> {
    validate_object_name(name)?;
    sys::shm_unlink(&c_name(name)?).map_err(|err| {
        if err.kind() == io::ErrorKind::NotFound {
            OpenError::NotFound {
                channel: name.into(),
            }
        } else {
            OpenError::Io(err)
        }
    })
}

/// Calls `connect` until it finds something under its name that is ready, or `deadline`
/// passes (never, without one); [`OpenError::NotFound`] and [`OpenError::NotReady`] are
/// retried, with a growing pause (there is nothing to wait on before the object exists). Past
/// the deadline, [`OpenError::NotFound`] (naming the object) if nothing is there,
/// [`OpenError::Timeout`] if something is that never became ready. Any other outcome is
/// returned at once.
pub(crate) fn retry_until_there<T>(
    deadline: Option<Instant>,
    mut connect: impl FnMut() -> Result<T>,
) -> Result<T> {
    let mut pause = Duration::from_micros(50);
    loop {
        match connect() {
            Err(OpenError::NotFound { .. } | OpenError::NotReady { .. })
                if deadline.is_none_or(|d| Instant::now() < d) =>
            {
                let left = deadline.map_or(pause, |d| d.saturating_duration_since(Instant::now()));
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Err(OpenError::NotReady { channel }) => {
                return Err(OpenError::Timeout {
                    channel,
                    waited_for: crate::error::NEVER_READY,
                })
            }
            other => return other,
        }
    }
}

/// An open shared-memory object or file, and the mapping of it.
struct Backing {
    /// Kept open for the mapping's lifetime: an endpoint's lock belongs to this open file
    /// description, and the kernel drops it when the process dies however it dies.
    file: File,
    // Only kept alive: unmapped on drop.
    _map: MmapMut,
    /// What to remove on drop when `owner` is set.
    name: Name,
    owner: bool,
}

enum Name {
    /// A channel name: `shm_unlink("/shmlink-<name>")`.
    Shm(String),
    /// A file path.
    File(PathBuf),
}

/// One mapped segment. The creator's instance removes the name (or file) on drop.
pub(crate) struct Mapping {
    backing: Backing,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping is plain memory that stays valid wherever the owning value moves.
unsafe impl Send for Mapping {}

fn c_name(name: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(os_name(name)).map_err(|_| OpenError::InvalidName {
        name: name.into(),
        reason: "the name contains a NUL byte",
    })
}

/// Opens `/shmlink-<name>` read-write, whatever its size (even 0), without mapping it, if it is
/// a regular file ([`OpenError::NotAChannel`], saying what it is, if not).
///
/// A symbolic link is not followed (the open fails, and the error says it is a link), and
/// opening a FIFO or a device does not block; the type is judged on the open descriptor.
pub(crate) fn open_shm_file(name: &str) -> Result<File> {
    validate_object_name(name)?;
    let os = c_name(name)?;
    let flags = libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let file = sys::shm_open(&os, flags, 0).map_err(|err| {
        let entry = shm_dir().map(|dir| dir.join(format!("{OS_PREFIX}{name}")));
        open_error(err, entry.as_deref(), name)
    })?;
    check_regular(&file, name)?;
    Ok(file)
}

/// What an entry that is not a regular file is, in words (for [`OpenError::NotAChannel`]); `None`
/// for a regular file.
fn not_regular(kind: std::fs::FileType) -> Option<&'static str> {
    use std::fs::FileType;
    use std::os::unix::fs::FileTypeExt;
    type Is = fn(&FileType) -> bool;
    let kinds: [(Is, &str); 6] = [
        (FileType::is_symlink, "a symbolic link (never followed)"),
        (FileType::is_dir, "a directory"),
        (FileType::is_fifo, "not a regular file but a FIFO"),
        (FileType::is_socket, "not a regular file but a socket"),
        (
            FileType::is_char_device,
            "not a regular file but a character device",
        ),
        (
            FileType::is_block_device,
            "not a regular file but a block device",
        ),
    ];
    if kind.is_file() {
        return None;
    }
    Some(
        kinds
            .iter()
            .find(|(is, _)| is(&kind))
            .map_or("not a regular file", |&(_, what)| what),
    )
}

fn not_a_channel(name: &str, what: &str) -> OpenError {
    OpenError::NotAChannel {
        channel: name.into(),
        reason: what.to_owned(),
    }
}

/// The error for a failed open of the object `name` at `entry`: [`OpenError::NotFound`] if there is
/// none, [`OpenError::NotAChannel`] if the entry is a link (not followed) or a directory (which
/// cannot be opened read-write), else the system's error.
fn open_error(err: io::Error, entry: Option<&Path>, name: &str) -> OpenError {
    if err.kind() == io::ErrorKind::NotFound {
        return OpenError::NotFound {
            channel: name.into(),
        };
    }
    // Looked at without following a link.
    match entry
        .and_then(|entry| std::fs::symlink_metadata(entry).ok())
        .and_then(|meta| not_regular(meta.file_type()))
    {
        Some(what) => not_a_channel(name, what),
        None => OpenError::Io(err),
    }
}

/// Refuses an open object that is not a regular file, saying what it is.
fn check_regular(file: &File, name: &str) -> Result<()> {
    match not_regular(file.metadata()?.file_type()) {
        Some(what) => Err(not_a_channel(name, what)),
        None => Ok(()),
    }
}

/// True while `file` is still the object the channel `name` refers to (nobody unlinked it
/// and made another). True where the platform has no shared-memory directory to look in.
pub(crate) fn still_named(file: &File, name: &str) -> bool {
    let Some(dir) = shm_dir() else {
        return true;
    };
    match (
        file.metadata(),
        std::fs::metadata(dir.join(format!("{OS_PREFIX}{name}"))),
    ) {
        (Ok(mine), Ok(named)) => mine.dev() == named.dev() && mine.ino() == named.ino(),
        _ => false,
    }
}

/// Refuses an object a connector should not trust: one owned by another user than our
/// effective one, or with any permission bit besides 0600 (another user could read or write
/// it). Judged on the open descriptor, so the object checked is the object mapped (whose type
/// was checked when it was opened).
fn check_private(file: &File, name: &str) -> Result<()> {
    let meta = file.metadata()?;
    let me = sys::euid();
    let mode = meta.mode() & 0o7777;
    if meta.uid() != me || mode != 0o600 {
        return Err(OpenError::NotPrivate {
            channel: name.into(),
            owner: meta.uid(),
            mode,
            expected: me,
        });
    }
    Ok(())
}

/// Makes a freshly created object a creator's segment: takes the creator lock, sets the mode to
/// exactly 0600, sizes it and maps it.
fn prepare_new(file: &File, len: usize) -> Result<MmapMut> {
    // Lock before sizing: a zero-sized object without a lock is one whose creator is (for a few
    // microseconds) between these calls, or died there. Waits only while a process that looks
    // at segments holds it for a moment.
    lock::take(file, CREATOR_LOCK, true)?;
    // The umask may have taken bits away from 0600, never added: make it exact.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.set_len(len as u64)?;
    map_file(file)
}

fn map_file(file: &File) -> Result<MmapMut> {
    // SAFETY: the object is shared with another process, which is the point: every access to
    // the mapped bytes goes through atomics or validated frame reads, and any bit pattern is
    // valid for them. Truncation by a third party is outside what the crate can defend against
    // (documented in the crate docs).
    Ok(unsafe { MmapMut::map_mut(file) }?)
}

impl Mapping {
    /// Creates `/shmlink-<name>` exclusively, `len` bytes of zeros, mode 0600, and holds the
    /// creator's lock on it until the mapping drops (or the process dies): that lock is how a
    /// connector and [`crate::shm::segments`] tell a live creator from a dead one.
    pub(crate) fn create_named(name: &str, len: usize) -> Result<Mapping> {
        validate_object_name(name)?;
        let os = c_name(name)?;
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC;
        let file = sys::shm_open(&os, flags, 0o600).map_err(|err| {
            if err.kind() == io::ErrorKind::AlreadyExists {
                OpenError::AlreadyExists {
                    channel: name.into(),
                }
            } else {
                OpenError::Io(err)
            }
        })?;
        let made = prepare_new(&file, len);
        match made {
            Ok(map) => Ok(Self::from_parts(file, map, Name::Shm(name.into()), true)),
            Err(e) => {
                let _ = sys::shm_unlink(&os);
                Err(e)
            }
        }
    }

    /// Opens `/shmlink-<name>` read-write at whatever size it has, if it is a regular object
    /// ([`OpenError::NotAChannel`] if not) owned by our effective user with mode 0600
    /// ([`OpenError::NotPrivate`] if not).
    pub(crate) fn open_named(name: &str) -> Result<Mapping> {
        let file = open_shm_file(name)?;
        check_private(&file, name)?;
        if file.metadata()?.len() == 0 {
            // The creator has not sized it yet.
            return Err(OpenError::NotReady {
                channel: name.into(),
            });
        }
        let map = map_file(&file)?;
        Ok(Self::from_parts(file, map, Name::Shm(name.into()), false))
    }

    /// Like [`open_named`](Mapping::open_named), for an object of at most `max_len` bytes: a
    /// longer one is refused ([`OpenError::SizeMismatch`]) before anything is mapped, and the
    /// length read is all that is mapped (an object grown afterwards maps no more).
    pub(crate) fn open_named_within(name: &str, max_len: usize) -> Result<Mapping> {
        let file = open_shm_file(name)?;
        check_private(&file, name)?;
        let len = file.metadata()?.len();
        if len == 0 {
            // The creator has not sized it yet.
            return Err(OpenError::NotReady {
                channel: name.into(),
            });
        }
        if len > max_len as u64 {
            return Err(OpenError::size_mismatch(
                name,
                format!("an object of {len} bytes, more than the {max_len} bytes allowed here"),
            ));
        }
        Self::prefix_of_shm_file(file, name, len as usize)
    }

    /// Maps the first `len` bytes of an already open shared-memory object at least that long,
    /// without owning its name.
    pub(crate) fn prefix_of_shm_file(file: File, name: &str, len: usize) -> Result<Mapping> {
        // SAFETY: as in `map_file`; only the first `len` bytes are mapped, which the caller
        // checked the object has.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(&file) }?;
        Ok(Self::from_parts(file, map, Name::Shm(name.into()), false))
    }

    /// Creates a file at `path` exclusively (mode 0600), sized to `len` bytes, and maps it. The
    /// creator holds an exclusive advisory lock on it, as for named mappings.
    pub(crate) fn create_file(path: &Path, len: usize) -> Result<Mapping> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => OpenError::AlreadyExists {
                    channel: path.display().to_string().into(),
                },
                _ => OpenError::Io(e),
            })?;
        let made = prepare_new(&file, len);
        match made {
            Ok(map) => Ok(Self::from_parts(
                file,
                map,
                Name::File(path.to_owned()),
                true,
            )),
            Err(e) => {
                let _ = std::fs::remove_file(path);
                Err(e)
            }
        }
    }

    /// Opens and maps an existing file at `path`, if it is a regular file ([`OpenError::NotAChannel`]
    /// if not: a link is not followed, a FIFO is opened without blocking) owned by our
    /// effective user with mode 0600 ([`OpenError::NotPrivate`] if not).
    pub(crate) fn open_file(path: &Path) -> Result<Mapping> {
        let shown = path.display().to_string();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| open_error(e, Some(path), &shown))?;
        check_regular(&file, &shown)?;
        check_private(&file, &shown)?;
        if file.metadata()?.len() == 0 {
            return Err(OpenError::NotReady {
                channel: shown.into(),
            });
        }
        let map = map_file(&file)?;
        Ok(Self::from_parts(
            file,
            map,
            Name::File(path.to_owned()),
            false,
        ))
    }

    fn from_parts(file: File, mut map: MmapMut, name: Name, owner: bool) -> Mapping {
        let len = map.len();
        // A zero-length mmap fails before we get here, so the pointer is a real mapping.
        let ptr = NonNull::new(map.as_mut_ptr()).unwrap_or(NonNull::dangling());
        Mapping {
            backing: Backing {
                file,
                _map: map,
                name,
                owner,
            },
            ptr,
            len,
        }
    }

    /// The open object: endpoint locks are taken and asked through it.
    pub(crate) fn file(&self) -> &File {
        &self.backing.file
    }

    /// Start of the mapping (page-aligned).
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Stops this instance from removing the name on drop (or makes it do so).
    pub(crate) fn set_owner(&mut self, owner: bool) {
        self.backing.owner = owner;
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if !self.backing.owner {
            return;
        }
        match &self.backing.name {
            Name::Shm(name) => {
                // Only remove the name if it is still ours: if someone judged us dead and made
                // a new channel under it, that one is not ours to remove.
                if still_named(&self.backing.file, name) {
                    let _ = unlink(name);
                }
            }
            Name::File(path) => {
                let same = match (self.backing.file.metadata(), std::fs::metadata(path)) {
                    (Ok(mine), Ok(named)) => mine.dev() == named.dev() && mine.ino() == named.ino(),
                    _ => false,
                };
                if same {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        // The mapping is unmapped and the descriptor closed (releasing the endpoint's lock)
        // afterwards, when the fields drop.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        for bad in [
            "",
            "../x",
            "a/b",
            ".hidden",
            "-x",
            "nul\0byte",
            "sp ace",
            "é",
        ] {
            assert!(
                matches!(validate_name(bad), Err(OpenError::InvalidName { .. })),
                "{bad:?} accepted"
            );
        }
        let long = "a".repeat(300);
        assert!(matches!(
            validate_name(&long),
            Err(OpenError::InvalidName { .. })
        ));
        for good in ["a", "x.y_z-1", &"b".repeat(MAX_NAME_LEN)] {
            validate_name(good).unwrap();
        }
    }

    #[test]
    fn a_connections_name_gives_its_listener_and_nothing_else_does() {
        assert_eq!(connection_listener("svc.12.3"), Some("svc"));
        // A listener name may itself end like a connection's.
        assert_eq!(connection_listener("svc.1.12.3"), Some("svc.1"));
        for not in ["svc", "svc.12", ".12.3", "svc.x.3", "svc.12.", "svc..3"] {
            assert_eq!(connection_listener(not), None, "{not}");
        }
    }

    #[test]
    fn connection_names_of_the_longest_listener_name_are_objects_names() {
        let longest = format!("{}.{}.{}", "b".repeat(MAX_NAME_LEN), u32::MAX, u64::MAX);
        assert_eq!(longest.len(), MAX_NAME_LEN + CONNECTION_SUFFIX_MAX);
        assert!(validate_name(&longest).is_err(), "a user may not choose it");
        validate_object_name(&longest).unwrap();
        assert!(validate_object_name(&format!("{longest}0")).is_err());
        assert!(validate_object_name(".x").is_err());
    }
}
