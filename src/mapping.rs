//! Named shared mappings: create, open, unlink, and the names they go by.
//!
//! Two kinds of backing are offered:
//! * a POSIX shared-memory object named `/shmlink-<name>` (on Linux it shows up as
//!   `/dev/shm/shmlink-<name>`), through `shm_open` and `memmap2`;
//! * a file at a path the caller chooses (a tmpfs or hugetlbfs file, say), through `memmap2`.
//!
//! Both are created exclusively with owner-only permissions (0600) and are removed by the creator
//! when it drops them. A creator takes its endpoint lock (a write lock on the creator's byte of
//! the object, see `lock.rs`) before it sizes the object and holds it for as long as the mapping
//! lives; the kernel releases it when the process dies, however it dies, so a lock that can be
//! taken means a dead creator, whatever happened to its pid since. Each [`Mapping`] keeps its own
//! open file description of the object, which is what endpoint locks belong to. Apart from that
//! lock, this module knows nothing about what is stored in a mapping.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::io::FromRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use memmap2::MmapMut;

use crate::error::{Error, Result};
use crate::lock;

/// Prefix of every OS-level name this crate creates.
pub const OS_PREFIX: &str = "shmlink-";
/// Longest channel name accepted (the OS limit is 255 bytes including the prefix).
pub const MAX_NAME_LEN: usize = 200;

/// Checks a user-facing channel name: 1 to 200 bytes of `[A-Za-z0-9._-]`, not
/// starting with `.` or `-`.
pub fn validate_name(name: &str) -> Result<()> {
    let fail = |reason| {
        Err(Error::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if name.is_empty() {
        return fail("the name is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return fail("the name is longer than 200 bytes");
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
pub fn os_name(name: &str) -> String {
    format!("/{OS_PREFIX}{name}")
}

/// Where named mappings show up in the file system, where the platform has such a place.
pub fn shm_dir() -> Option<&'static Path> {
    let dir = Path::new("/dev/shm");
    dir.is_dir().then_some(dir)
}

/// Removes the OS name of a channel. The memory stays mapped in processes that still use it.
pub fn unlink(name: &str) -> Result<()> {
    validate_name(name)?;
    let os = std::ffi::CString::new(os_name(name)).map_err(|_| Error::InvalidName {
        name: name.to_owned(),
        reason: "the name contains a NUL byte",
    })?;
    // SAFETY: `os` is a valid NUL-terminated string; shm_unlink only reads it.
    if unsafe { libc::shm_unlink(os.as_ptr()) } != 0 {
        let err = io::Error::last_os_error();
        return Err(if err.kind() == io::ErrorKind::NotFound {
            Error::NotFound(name.to_owned())
        } else {
            Error::Io(err)
        });
    }
    Ok(())
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
    std::ffi::CString::new(os_name(name)).map_err(|_| Error::InvalidName {
        name: name.to_owned(),
        reason: "the name contains a NUL byte",
    })
}

/// Opens `/shmlink-<name>` read-write, whatever its size (even 0), without mapping it.
///
/// A symbolic link is not followed (the open fails), and opening a FIFO or a device does not
/// block; callers that need a regular file check the type of what they opened.
pub(crate) fn open_shm_file(name: &str) -> Result<File> {
    validate_name(name)?;
    let os = c_name(name)?;
    let flags = libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    // SAFETY: `os` is a valid NUL-terminated string; shm_open only reads it and returns a new
    // descriptor (or -1).
    let fd = unsafe { libc::shm_open(os.as_ptr(), flags, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Err(if err.kind() == io::ErrorKind::NotFound {
            Error::NotFound(name.to_owned())
        } else {
            Error::Io(err)
        });
    }
    // SAFETY: `fd` is a descriptor we just opened and own; `File` closes it once.
    Ok(unsafe { File::from_raw_fd(fd) })
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

/// Refuses an object a connector should not trust: one that is not a regular file, is owned by
/// another user than our effective one, or has any permission bit besides 0600 (another user
/// could read or write it). Judged on the open descriptor, so the object checked is the object
/// mapped.
fn check_private(file: &File, name: &str) -> Result<()> {
    let meta = file.metadata()?;
    // SAFETY: geteuid takes no arguments and cannot fail.
    let me = unsafe { libc::geteuid() };
    let mode = meta.mode() & 0o7777;
    if meta.uid() != me || mode != 0o600 || !meta.file_type().is_file() {
        return Err(Error::NotPrivate {
            name: name.to_owned(),
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
    lock::take(file, lock::End::Creator, true)?;
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
    /// connector and [`crate::segments`] tell a live creator from a dead one.
    pub fn create_named(name: &str, len: usize) -> Result<Mapping> {
        validate_name(name)?;
        let os = c_name(name)?;
        let flags = libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC;
        // SAFETY: `os` is a valid NUL-terminated string; shm_open only reads it.
        let fd = unsafe { libc::shm_open(os.as_ptr(), flags, 0o600 as libc::mode_t) };
        if fd < 0 {
            let err = io::Error::last_os_error();
            return Err(if err.kind() == io::ErrorKind::AlreadyExists {
                Error::AlreadyExists(name.to_owned())
            } else {
                Error::Io(err)
            });
        }
        // SAFETY: `fd` is a descriptor we just opened and own; `File` closes it once.
        let file = unsafe { File::from_raw_fd(fd) };
        let made = prepare_new(&file, len);
        match made {
            Ok(map) => Ok(Self::from_parts(
                file,
                map,
                Name::Shm(name.to_owned()),
                true,
            )),
            Err(e) => {
                // SAFETY: as above.
                unsafe { libc::shm_unlink(os.as_ptr()) };
                Err(e)
            }
        }
    }

    /// Opens `/shmlink-<name>` read-write at whatever size it has, if it is a regular object
    /// owned by our effective user with mode 0600 ([`Error::NotPrivate`] if not).
    pub fn open_named(name: &str) -> Result<Mapping> {
        let file = open_shm_file(name)?;
        check_private(&file, name)?;
        if file.metadata()?.len() == 0 {
            // The creator has not sized it yet.
            return Err(Error::NotReady(name.to_owned()));
        }
        let map = map_file(&file)?;
        Ok(Self::from_parts(
            file,
            map,
            Name::Shm(name.to_owned()),
            false,
        ))
    }

    /// Maps the first `len` bytes of an already open shared-memory object at least that long,
    /// without owning its name.
    pub(crate) fn prefix_of_shm_file(file: File, name: &str, len: usize) -> Result<Mapping> {
        // SAFETY: as in `map_file`; only the first `len` bytes are mapped, which the caller
        // checked the object has.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(&file) }?;
        Ok(Self::from_parts(
            file,
            map,
            Name::Shm(name.to_owned()),
            false,
        ))
    }

    /// Creates a file at `path` exclusively (mode 0600), sized to `len` bytes, and maps it. The
    /// creator holds an exclusive advisory lock on it, as for named mappings.
    pub fn create_file(path: &Path, len: usize) -> Result<Mapping> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => Error::AlreadyExists(path.display().to_string()),
                _ => Error::Io(e),
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

    /// Opens and maps an existing file at `path`, if it is a regular file owned by our
    /// effective user with mode 0600 ([`Error::NotPrivate`] if not).
    pub fn open_file(path: &Path) -> Result<Mapping> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => Error::NotFound(path.display().to_string()),
                _ => Error::Io(e),
            })?;
        check_private(&file, &path.display().to_string())?;
        if file.metadata()?.len() == 0 {
            return Err(Error::NotReady(path.display().to_string()));
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
    pub fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Stops this instance from removing the name on drop (or makes it do so).
    pub fn set_owner(&mut self, owner: bool) {
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
                matches!(validate_name(bad), Err(Error::InvalidName { .. })),
                "{bad:?} accepted"
            );
        }
        let long = "a".repeat(300);
        assert!(matches!(
            validate_name(&long),
            Err(Error::InvalidName { .. })
        ));
        for good in ["a", "x.y_z-1", &"b".repeat(MAX_NAME_LEN)] {
            validate_name(good).unwrap();
        }
    }
}
