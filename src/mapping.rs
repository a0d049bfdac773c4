//! Named shared mappings: create, open, unlink, and the names they go by.
//!
//! Two kinds of backing are offered:
//! * a POSIX shared-memory object named `/shmring-<name>` (on Linux it shows up as
//!   `/dev/shm/shmring-<name>`), through the `shared_memory` crate;
//! * a file at a path the caller chooses (a tmpfs or hugetlbfs file, say), through `memmap2`.
//!
//! Both are created exclusively with owner-only permissions (0600) and are removed by the creator
//! when it drops them. This module knows nothing about what is stored in a mapping.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use memmap2::MmapMut;
use shared_memory::{Shmem, ShmemConf, ShmemError};

use crate::error::{Error, Result};

/// Prefix of every OS-level name this crate creates.
pub const OS_PREFIX: &str = "shmring-";
/// Longest channel name accepted (the OS limit is 255 bytes including the prefix).
pub const MAX_NAME_LEN: usize = 200;

/// Checks a user-facing channel name: 1 to [`MAX_NAME_LEN`] bytes of `[A-Za-z0-9._-]`, not
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

/// The OS-level name of a channel: `/shmring-<name>`.
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

enum Backing {
    Shm(Shmem),
    File {
        // Only kept alive: unmapped on drop.
        _map: MmapMut,
        path: PathBuf,
        owner: bool,
    },
}

/// One mapped segment. The creator's instance removes the name (or file) on drop.
pub(crate) struct Mapping {
    backing: Backing,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping is plain memory that stays valid wherever the owning value moves; the
// `shared_memory` handle is only !Send because it stores a raw pointer.
unsafe impl Send for Mapping {}

fn shm_error(name: &str, e: ShmemError) -> Error {
    match e {
        ShmemError::MappingIdExists => Error::AlreadyExists(name.to_owned()),
        ShmemError::MapOpenFailed(code) if code == libc::ENOENT as u32 => {
            Error::NotFound(name.to_owned())
        }
        // A creator that has not sized the object yet: mmap of 0 bytes fails with EINVAL.
        ShmemError::MapOpenFailed(code) if code == libc::EINVAL as u32 => {
            Error::NotReady(name.to_owned())
        }
        ShmemError::MapCreateFailed(code)
        | ShmemError::MapOpenFailed(code)
        | ShmemError::UnknownOsError(code) => Error::Io(io::Error::from_raw_os_error(code as i32)),
        other => Error::Io(io::Error::other(other.to_string())),
    }
}

impl Mapping {
    /// Creates `/shmring-<name>` exclusively, `len` bytes of zeros, mode 0600.
    pub fn create_named(name: &str, len: usize) -> Result<Mapping> {
        validate_name(name)?;
        let shmem = ShmemConf::new()
            .os_id(os_name(name))
            .size(len)
            .create()
            .map_err(|e| shm_error(name, e))?;
        Self::from_shmem(shmem)
    }

    /// Opens `/shmring-<name>` read-write at whatever size it has.
    pub fn open_named(name: &str) -> Result<Mapping> {
        validate_name(name)?;
        let shmem = ShmemConf::new()
            .os_id(os_name(name))
            .open()
            .map_err(|e| shm_error(name, e))?;
        Self::from_shmem(shmem)
    }

    fn from_shmem(shmem: Shmem) -> Result<Mapping> {
        let len = shmem.len();
        let ptr = NonNull::new(shmem.as_ptr()).ok_or_else(|| io::Error::other("null mapping"))?;
        Ok(Mapping {
            backing: Backing::Shm(shmem),
            ptr,
            len,
        })
    }

    /// Creates a file at `path` exclusively (mode 0600), sized to `len` bytes, and maps it.
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
        let sized = file.set_len(len as u64);
        // SAFETY: the file was just created by us with O_EXCL; other processes that open it
        // follow the same protocol (atomics and validated frames). Truncation by a third party
        // is outside what the crate can defend against (documented in the crate docs).
        let mapped = sized.and_then(|_| unsafe { MmapMut::map_mut(&file) });
        let map = match mapped {
            Ok(map) => map,
            Err(e) => {
                let _ = std::fs::remove_file(path);
                return Err(Error::Io(e));
            }
        };
        Self::from_mmap(map, path, true)
    }

    /// Opens and maps an existing file at `path`.
    pub fn open_file(path: &Path) -> Result<Mapping> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => Error::NotFound(path.display().to_string()),
                _ => Error::Io(e),
            })?;
        if file.metadata()?.len() == 0 {
            return Err(Error::NotReady(path.display().to_string()));
        }
        // SAFETY: as in `create_file`.
        let map = unsafe { MmapMut::map_mut(&file) }?;
        Self::from_mmap(map, path, false)
    }

    fn from_mmap(mut map: MmapMut, path: &Path, owner: bool) -> Result<Mapping> {
        let len = map.len();
        let ptr = NonNull::new(map.as_mut_ptr()).ok_or_else(|| io::Error::other("null mapping"))?;
        Ok(Mapping {
            backing: Backing::File {
                _map: map,
                path: path.to_owned(),
                owner,
            },
            ptr,
            len,
        })
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
        match &mut self.backing {
            Backing::Shm(shmem) => {
                shmem.set_owner(owner);
            }
            Backing::File { owner: o, .. } => *o = owner,
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Backing::File {
            path, owner: true, ..
        } = &self.backing
        {
            let _ = std::fs::remove_file(path);
        }
        // `Shmem` unmaps and, for the owner, unlinks in its own Drop; `MmapMut` unmaps.
        let _ = &self.backing;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        for bad in ["", "../x", "a/b", ".hidden", "-x", "nul\0byte", "sp ace", "é"] {
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
