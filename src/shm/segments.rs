//! The shmlink mappings that exist on this machine: list them, tell live from dead, and remove
//! the ones whose creator is gone.
//!
//! Every endpoint holds a write lock on its own byte of the segment (the creator from the moment
//! it makes the segment until it drops it, the connector from its claim until it drops it; see
//! the layout docs). They are open-file-description locks: the kernel releases them when
//! the holder dies, however it dies, and asking about them involves no pid. So "can the
//! creator's lock be taken?" tells a dead creator from a live one without trusting pids, which
//! the system reuses and which another PID namespace numbers differently: the pids recorded in
//! the segment are shown, never believed. A segment whose creator died before it sized the
//! segment (size 0) is only judged stale after [`INIT_GRACE`], because a creator that is making
//! it right now looks the same for a few microseconds.
//!
//! Anyone can put an entry named `shmlink-*` in the shared-memory directory. Only a regular
//! object carrying the shmlink magic (or a creator's unfinished one: empty, or sized like a
//! segment with the header still all zero) is taken for a channel; directories, symbolic links
//! (never followed), other file types and objects without the magic are reported as skipped
//! and never touched. At most the header page of an object is mapped to judge it.

use std::os::unix::io::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use crate::error::OpenError;
use crate::shm::layout::listener::{is_listener_size, LISTENER_MAGIC};
use crate::shm::layout::topic::TOPIC_MAGIC;
use crate::shm::layout::{
    valid_capacity, SegmentHeader, CONNECTOR_LOCK, CREATOR_LOCK, HEADER_SIZE, MAGIC, PEER_ABSENT,
    PEER_CLAIMING, PEER_CLOSED, PEER_PRESENT, READY,
};
use crate::shm::mapping::{self, Mapping, OS_PREFIX};
use crate::sys::lock;

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// An unlocked, zero-sized segment older than this lost its creator mid-creation.
pub const INIT_GRACE: Duration = Duration::from_secs(5);

/// What is known about one endpoint of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointInfo {
    /// `absent`, `claiming`, `present`, `closed`, or `unknown`.
    pub state: &'static str,
    /// The process id the endpoint recorded, 0 if none. Information only: it is the pid in the
    /// endpoint's own PID namespace, and it decides nothing.
    pub pid: u32,
    /// Whether a process holds this endpoint's lock on the segment (the endpoint is alive).
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
    /// Whether a process holds the creator's lock on it (the creator is alive, or for a moment
    /// another process inspects a segment whose creator died).
    pub owner_locked: bool,
    /// The creating endpoint.
    pub creator: EndpointInfo,
    /// The connecting endpoint (`unknown` for a topic, whose readers are `subscribers`).
    pub connector: EndpointInfo,
    /// `"channel"`, `"listener"` or `"topic"` (`"channel"` too for a segment whose creator
    /// has not written its header yet).
    pub kind: &'static str,
    /// A topic's subscribers, one per slot in use: `joining`, `active` or `dropped`, the pid
    /// each recorded, and whether it still holds its slot. Empty for the other kinds.
    pub subscribers: Vec<EndpointInfo>,
    /// True when the creator is gone (whether or not it finished initialising): nobody will
    /// remove the name, and [`clean_dead`] will.
    pub stale: bool,
    /// How long ago the object was last sized (when its creator made it), where the system
    /// says.
    pub age: Option<Duration>,
    /// For a listener's connection (a channel named `<listener>.<client pid>.<n>`, its creator
    /// the client and its connector the server): the listener's name, when [`scan`] found that
    /// listener too. `None` for everything else, and from [`inspect`].
    pub listener: Option<String>,
}

pub(crate) fn endpoint(info: &crate::shm::layout::PeerInfo, alive: bool) -> EndpointInfo {
    // Acquire: pairs with the Release stores of the endpoint's state.
    let state = info.state.load(Ordering::Acquire);
    EndpointInfo {
        state: match state {
            PEER_ABSENT => "absent",
            PEER_CLAIMING => "claiming",
            PEER_PRESENT => "present",
            PEER_CLOSED => "closed",
            _ => "unknown",
        },
        // Relaxed: information only.
        pid: info.pid.load(Ordering::Relaxed),
        alive,
    }
}

/// An entry named like a channel that is not one (or could not be examined): left alone by
/// listing and cleaning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The entry's name in the shared-memory directory, prefix included.
    pub name: String,
    /// Why it is not taken for a channel.
    pub reason: String,
}

/// Everything named like a channel in the shared-memory directory, from [`scan`].
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// The channels, sorted by name.
    pub channels: Vec<SegmentInfo>,
    /// The entries that are not channels, sorted by name.
    pub skipped: Vec<Skipped>,
}

/// What was seen of one segment, with its object still open (and, if `locked`, our lock held).
struct Seen {
    info: SegmentInfo,
    file: std::fs::File,
}

/// What an entry turned out to be.
enum Looked {
    Channel(Seen),
    /// Not a channel, and why.
    Other(String),
}

/// True for a size `Channel::create` gives a segment: a header page and two rings.
fn is_segment_size(size: u64) -> bool {
    size.checked_sub(HEADER_SIZE as u64)
        .filter(|rings| rings % 2 == 0)
        .and_then(|rings| usize::try_from(rings / 2).ok())
        .is_some_and(valid_capacity)
}

fn look(name: &str) -> Result<Looked> {
    let file = match mapping::open_shm_file(name) {
        Ok(file) => file,
        // A link (not followed), a directory, a FIFO...: say what it is rather than fail.
        Err(OpenError::NotAChannel { reason, .. }) => return Ok(Looked::Other(reason)),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    let size = meta.len();
    let age = meta
        .modified()
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok());
    // Judge the object by its size and the first word of its header page, the only part mapped
    // (it can be any size: a huge sparse file must not be mapped whole), before touching it.
    let map = if size == 0 {
        // A creator makes the object, locks it, then sizes it: maybe one at work right now.
        None
    } else if size < HEADER_SIZE as u64 {
        return Ok(Looked::Other(format!(
            "{size} bytes, smaller than a channel header"
        )));
    } else {
        let map = Mapping::prefix_of_shm_file(file.try_clone()?, name, HEADER_SIZE)?;
        // SAFETY: the mapping is HEADER_SIZE bytes and page-aligned; the header is all atomics,
        // valid for any bytes.
        let hdr = unsafe { map.ptr().cast::<SegmentHeader>().as_ref() };
        // Relaxed: one look at a word that, in a channel, never changes once written.
        let magic = hdr.magic.load(Ordering::Relaxed);
        // A creator sizes the object before it writes the header: a zero magic at a segment's
        // size is a creator at work (or dead) between the two.
        // A listener starts with the same header fields (its creator is the server): it is
        // listed, judged and reclaimed like a channel.
        let listener = magic == LISTENER_MAGIC || (magic == 0 && is_listener_size(size));
        if magic != MAGIC
            && magic != TOPIC_MAGIC
            && !(magic == 0 && is_segment_size(size))
            && !listener
        {
            return Ok(Looked::Other(format!(
                "{size} bytes without the shmlink magic (first word {magic:#018x})"
            )));
        }
        Some((map, magic))
    };
    // Taking the creator's lock succeeds only if no creator holds it, i.e. the creator is gone
    // (or is in the few microseconds between making the object and locking it, when its size
    // is still 0). We hold it while we look and, in `reclaim`, while we unlink, so two
    // reclaimers cannot both act on the same object.
    let owner_locked = !lock::take(&file, CREATOR_LOCK, false)?;
    let unknown = EndpointInfo {
        state: "unknown",
        pid: 0,
        alive: false,
    };
    let old_enough = age.is_some_and(|a| a >= INIT_GRACE);
    let Some((map, magic)) = map else {
        let stale = !owner_locked && old_enough;
        return Ok(Looked::Channel(Seen {
            info: SegmentInfo {
                name: name.to_owned(),
                size,
                ready: false,
                owner_locked,
                creator: unknown.clone(),
                connector: unknown,
                kind: "channel",
                subscribers: Vec::new(),
                stale,
                age,
                listener: None,
            },
            file,
        }));
    };
    // SAFETY: as above.
    let hdr = unsafe { map.ptr().cast::<SegmentHeader>().as_ref() };
    // Acquire: pairs with the creator's Release store of `ready`. The magic is the one judged
    // above, not read again.
    let ready = hdr.ready.load(Ordering::Acquire) == READY
        && (magic == MAGIC || magic == LISTENER_MAGIC || magic == TOPIC_MAGIC);
    let creator = endpoint(&hdr.creator, owner_locked);
    let (kind, connector, subscribers) = if magic == TOPIC_MAGIC {
        let subscribers = if ready {
            subscribers_of(&file, name, size)?
        } else {
            Vec::new()
        };
        let unknown = EndpointInfo {
            state: "unknown",
            pid: 0,
            alive: false,
        };
        ("topic", unknown, subscribers)
    } else {
        let connector = endpoint(&hdr.connector, false);
        let connector = EndpointInfo {
            alive: lock::alive(file.as_raw_fd(), CONNECTOR_LOCK)?,
            ..connector
        };
        let listener = magic == LISTENER_MAGIC || (magic == 0 && is_listener_size(size));
        let kind = if listener { "listener" } else { "channel" };
        (kind, connector, Vec::new())
    };
    // Nobody holds the creator's lock: the creator is gone, whatever pid the segment names.
    let stale = !owner_locked;
    Ok(Looked::Channel(Seen {
        info: SegmentInfo {
            name: name.to_owned(),
            size,
            ready,
            owner_locked,
            creator,
            connector,
            kind,
            subscribers,
            stale,
            age,
            listener: None,
        },
        file,
    }))
}

/// Inspects the segment `name` without claiming anything in it. [`OpenError::NotAChannel`] if the
/// entry under that name is not a channel.
pub fn inspect(name: &str) -> Result<SegmentInfo> {
    match look(name)? {
        Looked::Channel(seen) => Ok(seen.info),
        Looked::Other(reason) => Err(OpenError::NotAChannel {
            channel: name.into(),
            reason,
        }),
    }
}

/// Every shmlink segment in the shared-memory directory (empty where there is none). Entries
/// that are not channels are left out; [`scan`] reports them too.
pub fn list() -> Result<Vec<SegmentInfo>> {
    scan().map(|listing| listing.channels)
}

/// Every entry named like a channel in the shared-memory directory: the channels, and the
/// entries skipped because they are not channels or could not be examined (another user's,
/// say). One odd entry never makes the whole scan fail.
pub fn scan() -> Result<Listing> {
    let mut out = Listing::default();
    let Some(dir) = mapping::shm_dir() else {
        return Ok(out);
    };
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let Some(name) = file.strip_prefix(OS_PREFIX) else {
            continue;
        };
        let skip = |reason: String| Skipped {
            name: file.clone().into_owned(),
            reason,
        };
        if let Err(e) = mapping::validate_object_name(name) {
            out.skipped.push(skip(e.to_string()));
            continue;
        }
        match look(name) {
            Ok(Looked::Channel(seen)) => out.channels.push(seen.info),
            Ok(Looked::Other(reason)) => out.skipped.push(skip(reason)),
            // Gone between listing and opening.
            Err(OpenError::NotFound { .. }) => {}
            Err(e) => out.skipped.push(skip(e.to_string())),
        }
    }
    out.channels.sort_by(|a, b| a.name.cmp(&b.name));
    out.skipped.sort_by(|a, b| a.name.cmp(&b.name));
    let listeners: std::collections::HashSet<String> = out
        .channels
        .iter()
        .filter(|s| s.kind == "listener")
        .map(|s| s.name.clone())
        .collect();
    for seg in out.channels.iter_mut().filter(|s| s.kind == "channel") {
        seg.listener = mapping::connection_listener(&seg.name)
            .filter(|l| listeners.contains(*l))
            .map(str::to_owned);
    }
    Ok(out)
}

/// Removes every stale segment; returns the names removed. Entries that are not channels, and
/// segments that cannot be removed, are left alone, and the rest are still cleaned.
pub fn clean_dead() -> Result<Vec<String>> {
    let mut removed = Vec::new();
    for seg in list()? {
        if seg.stale && matches!(reclaim(&seg.name), Ok(Reclaim::Removed)) {
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
    /// The entry under that name is not a channel: left alone.
    NotAChannel,
}

/// Removes the segment `name` if its creator is gone.
///
/// Safe against concurrent reclaimers and creators: the creator's lock is held from the check
/// to the unlink, and the name is removed only while it still refers to the object checked, so
/// a fresh segment made under the same name in the meantime is never removed.
pub fn reclaim(name: &str) -> Result<Reclaim> {
    match look(name) {
        Ok(Looked::Other(_)) => Ok(Reclaim::NotAChannel),
        looked => reclaim_looked(name, looked),
    }
}

/// [`reclaim`] of what `look(name)` found, unless it is not a channel.
fn reclaim_looked(name: &str, looked: Result<Looked>) -> Result<Reclaim> {
    let seen = match looked {
        Ok(Looked::Channel(seen)) => seen,
        Ok(Looked::Other(_)) => return Ok(Reclaim::NotAChannel),
        Err(OpenError::NotFound { .. }) => return Ok(Reclaim::Vanished),
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
        Err(OpenError::NotFound { .. }) => Ok(Reclaim::Vanished),
        Err(e) => Err(e),
    }
}

/// For a creator that found `name` taken: removes the segment if its creator is gone. True if
/// the name is free now (removed, or vanished meanwhile), false if a live creator holds it;
/// [`OpenError::NotAChannel`], saying what it is, if the entry is not a channel or listener.
pub(crate) fn reclaim_if_dead(name: &str) -> Result<bool> {
    let reclaimed = match look(name) {
        Ok(Looked::Other(reason)) => {
            return Err(OpenError::NotAChannel {
                channel: name.into(),
                reason,
            })
        }
        looked => reclaim_looked(name, looked)?,
    };
    Ok(matches!(reclaimed, Reclaim::Removed | Reclaim::Vanished))
}

/// A topic's subscribers, one per slot in use, for listings: each slot's state, the pid its
/// holder recorded, and whether a process holds its lock (see `stats::subscriber_stats`).
fn subscribers_of(file: &std::fs::File, name: &str, size: u64) -> Result<Vec<EndpointInfo>> {
    Ok(crate::shm::stats::subscriber_stats(file, name, size, 0)?
        .into_iter()
        .map(|s| EndpointInfo {
            state: s.state,
            pid: s.pid,
            alive: s.alive,
        })
        .collect())
}
