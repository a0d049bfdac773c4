//! The shmlink mappings that exist on this machine: list them, tell live from dead, and remove
//! the ones whose creator is gone.
//!
//! A creator holds an exclusive advisory lock (`flock`) on its segment from the moment it makes
//! it until it drops it; the kernel releases the lock when the process dies, however it dies.
//! So "can the lock be taken?" tells a dead creator from a live one without trusting pids,
//! which the system reuses. A segment whose creator died before it sized the segment (size 0)
//! is only judged stale after [`INIT_GRACE`], because a creator that is making it right now
//! looks the same for a few microseconds.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::layout::{
    SegmentHeader, HEADER_SIZE, MAGIC, PEER_ABSENT, PEER_CLOSED, PEER_PRESENT, READY,
};
use crate::mapping::{self, Mapping, OS_PREFIX};
use crate::process::ProcessId;

/// An unlocked, zero-sized segment older than this lost its creator mid-creation.
pub const INIT_GRACE: Duration = Duration::from_secs(5);

/// What is known about one endpoint of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// `absent`, `present`, `closed`, or `unknown`.
    pub state: &'static str,
    /// The recorded process id, 0 if none.
    pub pid: u32,
    /// Whether that process still runs.
    pub alive: bool,
}

/// One shmlink segment found in the shared-memory directory.
#[derive(Clone, Debug)]
pub struct SegmentInfo {
    /// The channel name (without the `shmlink-` prefix).
    pub name: String,
    /// Size of the mapping in bytes.
    pub size: u64,
    /// Whether the creator finished initialising it.
    pub ready: bool,
    /// Whether a process holds the creator's lock on it (the creator is alive).
    pub owner_locked: bool,
    /// The creating endpoint.
    pub creator: EndpointInfo,
    /// The connecting endpoint.
    pub connector: EndpointInfo,
    /// True when the creator is gone (whether or not it finished initialising): nobody will
    /// remove the name, and [`clean_dead`] will.
    pub stale: bool,
}

fn endpoint(info: &crate::layout::PeerInfo) -> EndpointInfo {
    // Acquire: pairs with the Release stores of the endpoint's state.
    let state = info.state.load(Ordering::Acquire);
    let id = ProcessId {
        pid: info.pid.load(Ordering::Relaxed),
        start_time: info.start_time.load(Ordering::Relaxed),
    };
    EndpointInfo {
        state: match state {
            PEER_ABSENT => "absent",
            PEER_PRESENT => "present",
            PEER_CLOSED => "closed",
            _ => "unknown",
        },
        pid: id.pid,
        alive: id.pid != 0 && id.is_alive(),
    }
}

/// What was seen of one segment, with its object still open (and, if `locked`, our lock held).
struct Seen {
    info: SegmentInfo,
    file: std::fs::File,
}

fn look(name: &str) -> Result<Seen> {
    let file = mapping::open_shm_file(name)?;
    let meta = file.metadata()?;
    let size = meta.len();
    let age = meta
        .modified()
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok());
    // Taking the lock succeeds only if no creator holds it, i.e. the creator is gone (or is in
    // the few microseconds between making the object and locking it, when its size is still 0).
    // We hold it while we look and, in `reclaim`, while we unlink, so two reclaimers cannot
    // both act on the same object.
    let owner_locked = !mapping::lock_exclusive(&file, false)?;
    let unknown = EndpointInfo {
        state: "unknown",
        pid: 0,
        alive: false,
    };
    let old_enough = age.is_some_and(|a| a >= INIT_GRACE);
    if size < HEADER_SIZE as u64 {
        let stale = !owner_locked && (size > 0 || old_enough);
        return Ok(Seen {
            info: SegmentInfo {
                name: name.to_owned(),
                size,
                ready: false,
                owner_locked,
                creator: unknown.clone(),
                connector: unknown,
                stale,
            },
            file,
        });
    }
    let map = Mapping::from_shm_file(file.try_clone()?, name)?;
    // SAFETY: the mapping is at least HEADER_SIZE bytes and page-aligned; the header is all
    // atomics, valid for any bytes.
    let hdr = unsafe { map.ptr().cast::<SegmentHeader>().as_ref() };
    // Acquire: pairs with the creator's Release store of `ready`.
    // A listener shares the header's first fields (its creator is the server), so it is listed
    // and judged like a channel.
    let magic = hdr.magic.load(Ordering::Relaxed);
    let ready = hdr.ready.load(Ordering::Acquire) == READY
        && (magic == MAGIC || magic == crate::listener::LISTENER_MAGIC);
    let creator = endpoint(&hdr.creator);
    let connector = endpoint(&hdr.connector);
    // Nobody holds the creator's lock: the creator is gone. The recorded pid (with its start
    // time, so a reused pid does not count) is a second opinion for segments made without the
    // lock.
    let stale = !owner_locked && !creator.alive;
    Ok(Seen {
        info: SegmentInfo {
            name: name.to_owned(),
            size,
            ready,
            owner_locked,
            creator,
            connector,
            stale,
        },
        file,
    })
}

/// Inspects the segment `name` without claiming anything in it.
pub fn inspect(name: &str) -> Result<SegmentInfo> {
    look(name).map(|seen| seen.info)
}

/// Every shmlink segment in the shared-memory directory (empty where there is none).
pub fn list() -> Result<Vec<SegmentInfo>> {
    let Some(dir) = mapping::shm_dir() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file = entry.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_prefix(OS_PREFIX)) else {
            continue;
        };
        if mapping::validate_name(name).is_err() {
            continue;
        }
        match inspect(name) {
            Ok(info) => out.push(info),
            // Gone between listing and opening, or not ours to open.
            Err(Error::NotFound(_)) => {}
            Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {}
            Err(e) => return Err(e),
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Removes every stale segment; returns the names removed.
pub fn clean_dead() -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for seg in list()? {
        if seg.stale && reclaim(&seg.name)? == Reclaim::Removed {
            removed.push(seg.name);
        }
    }
    Ok(removed)
}

/// What [`reclaim`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// The segment was stale and its name is removed.
    Removed,
    /// There is no segment by that name (any more), or it was replaced while we looked.
    Vanished,
    /// The segment's creator is alive (or still initialising it): left alone.
    Alive,
}

/// Removes the segment `name` if its creator is gone.
///
/// Safe against concurrent reclaimers and creators: the creator's lock is held from the check
/// to the unlink, and the name is removed only while it still refers to the object checked, so
/// a fresh segment made under the same name in the meantime is never removed.
pub fn reclaim(name: &str) -> Result<Reclaim> {
    let seen = match look(name) {
        Ok(seen) => seen,
        Err(Error::NotFound(_)) => return Ok(Reclaim::Vanished),
        Err(e) => return Err(e),
    };
    if !seen.info.stale {
        return Ok(Reclaim::Alive);
    }
    // We hold the lock on this object (stale implies we got it). Only a process that holds it
    // removes the name, and creators make new objects instead of reusing this one, so if the
    // name still refers to it now, it does until our unlink.
    if !mapping::still_named(&seen.file, name) {
        return Ok(Reclaim::Vanished);
    }
    match mapping::unlink(name) {
        Ok(()) => Ok(Reclaim::Removed),
        Err(Error::NotFound(_)) => Ok(Reclaim::Vanished),
        Err(e) => Err(e),
    }
}

/// Removes the segment `name` if its creator is gone. True if it was removed (or had vanished).
pub(crate) fn reclaim_if_dead(name: &str) -> Result<bool> {
    Ok(reclaim(name)? != Reclaim::Alive)
}
