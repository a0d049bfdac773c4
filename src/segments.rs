//! The shmring mappings that exist on this machine: list them, tell live from dead, and remove
//! the ones whose creator is gone.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::layout::{SegmentHeader, HEADER_SIZE, MAGIC, PEER_ABSENT, PEER_CLOSED, PEER_PRESENT, READY};
use crate::mapping::{self, Mapping, OS_PREFIX};
use crate::process::ProcessId;

/// A mapping that is not ready after this long has lost its creator mid-initialisation.
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

/// One shmring segment found in the shared-memory directory.
#[derive(Clone, Debug)]
pub struct SegmentInfo {
    /// The channel name (without the `shmring-` prefix).
    pub name: String,
    /// Size of the mapping in bytes.
    pub size: u64,
    /// Whether the creator finished initialising it.
    pub ready: bool,
    /// The creating endpoint.
    pub creator: EndpointInfo,
    /// The connecting endpoint.
    pub connector: EndpointInfo,
    /// True when the creator is gone (or never finished initialising): nobody will remove the
    /// name, and [`clean_dead`] will.
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

/// Inspects the segment `name` without claiming anything in it.
pub fn inspect(name: &str) -> Result<SegmentInfo> {
    let age = mapping::shm_dir()
        .and_then(|dir| std::fs::metadata(dir.join(format!("{OS_PREFIX}{name}"))).ok())
        .and_then(|m| m.modified().ok())
        .and_then(|t| SystemTime::now().duration_since(t).ok());
    let map = match Mapping::open_named(name) {
        Err(Error::NotReady(_)) => None,
        other => Some(other?),
    };
    let absent = EndpointInfo {
        state: "unknown",
        pid: 0,
        alive: false,
    };
    let old_enough = age.is_some_and(|a| a >= INIT_GRACE);
    let Some(map) = map.filter(|m| m.len() >= HEADER_SIZE) else {
        return Ok(SegmentInfo {
            name: name.to_owned(),
            size: 0,
            ready: false,
            creator: absent.clone(),
            connector: absent,
            stale: old_enough,
        });
    };
    // SAFETY: the mapping is at least HEADER_SIZE bytes and page-aligned; the header is all
    // atomics, valid for any bytes.
    let hdr = unsafe { map.ptr().cast::<SegmentHeader>().as_ref() };
    // Acquire: pairs with the creator's Release store of `ready`.
    let ready = hdr.ready.load(Ordering::Acquire) == READY
        && hdr.magic.load(Ordering::Relaxed) == MAGIC;
    let creator = endpoint(&hdr.creator);
    let connector = endpoint(&hdr.connector);
    let stale = if ready {
        !creator.alive
    } else {
        (creator.pid != 0 && !creator.alive) || old_enough
    };
    Ok(SegmentInfo {
        name: name.to_owned(),
        size: map.len() as u64,
        ready,
        creator,
        connector,
        stale,
    })
}

/// Every shmring segment in the shared-memory directory (empty where there is none).
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
        if seg.stale && mapping::unlink(&seg.name).is_ok() {
            removed.push(seg.name);
        }
    }
    Ok(removed)
}

/// Removes the segment `name` if its creator is gone. True if it was removed (or had vanished).
pub(crate) fn reclaim_if_dead(name: &str) -> Result<bool> {
    match inspect(name) {
        Ok(info) if info.stale => match mapping::unlink(name) {
            Ok(()) | Err(Error::NotFound(_)) => Ok(true),
            Err(e) => Err(e),
        },
        Ok(_) => Ok(false),
        Err(Error::NotFound(_)) => Ok(true),
        Err(e) => Err(e),
    }
}
