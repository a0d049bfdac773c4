//! A channel's mapping: the segment header (whose fields a listener's mapping starts with too),
//! the endpoints' records, the ring headers and their wait cells.
//!
//! ```text
//! offset 0      SegmentHeader   magic, version, sizes, ready word, one PeerInfo per endpoint
//! RINGS_OFFSET  RingHeader[2]   ring 0: creator -> connector, ring 1: connector -> creator
//! COUNTERS_OFFSET  Counters[4]  each ring's sender's and receiver's counts (`counters.rs`)
//! HEADER_SIZE   region 0        `capacity` bytes of frames
//! + capacity    region 1        `capacity` bytes of frames
//! ```
//!
//! # Liveness: byte locks, not pids
//!
//! Whether an endpoint is alive is not stored in the header at all: each endpoint holds a write
//! lock (an open-file-description lock, see `crate::sys::lock`) on one byte of the shared object
//! for its whole lifetime, the byte at the offset of its own [`PeerInfo`]:
//!
//! ```text
//! CREATOR_LOCK    offset of SegmentHeader::creator     taken before the object is sized
//! CONNECTOR_LOCK  offset of SegmentHeader::connector   taken before the slot is claimed
//! ```
//!
//! The kernel releases a lock when its holder dies, however it dies, and a peer asks the kernel
//! (`F_OFD_GETLK`) rather than `/proc`, so the verdict needs no pid and holds across PID
//! namespaces. [`PeerInfo::state`] says what the endpoint did (claimed, present, closed); the
//! lock says whether it is still there. [`PeerInfo::pid`] and [`PeerInfo::start_time`] are
//! information only (error messages, listings) and never decide anything.

use crate::sync::{AtomicU32, AtomicU64};
use std::mem::offset_of;
// The size checks below hold for the real atomics; loom's model-checked ones are larger.
#[cfg(not(loom))]
use std::mem::{align_of, size_of};

use super::frame::FRAME_ALIGN;
use super::{Padded, CELL_ALIGN, HEADER_SIZE, LAYOUT_VERSION, MAGIC, POINTER_WIDTH};
use crate::error::OpenError;
use crate::wait::WaitCell;

/// Smallest ring capacity accepted.
pub(crate) const MIN_CAPACITY: usize = 256;
/// Largest ring capacity accepted (frame tags and lengths are 32-bit quantities).
pub(crate) const MAX_CAPACITY: usize = 1 << 31;

/// [`PeerInfo::state`]: nobody has claimed this end yet.
pub(crate) const PEER_ABSENT: u32 = 0;
/// [`PeerInfo::state`]: a process holds this end (alive while it holds the end's lock).
pub(crate) const PEER_PRESENT: u32 = 1;
/// [`PeerInfo::state`]: the process that held this end closed it.
pub(crate) const PEER_CLOSED: u32 = 2;

/// [`PeerInfo::state`]: a connector holding [`CONNECTOR_LOCK`] has claimed this end and is
/// filling in its details. Without a lock holder it is a claimer that died: the next connector
/// takes the slot over.
pub(crate) const PEER_CLAIMING: u32 = 3;

/// The byte of the shared object whose write lock the creator holds for its lifetime.
pub(crate) const CREATOR_LOCK: u64 = offset_of!(SegmentHeader, creator) as u64;
/// The byte of the shared object whose write lock the connector holds for its lifetime.
pub(crate) const CONNECTOR_LOCK: u64 = offset_of!(SegmentHeader, connector) as u64;

/// [`PeerInfo::wait_mode`] values; `0` means "not announced yet".
#[allow(dead_code)]
pub(crate) const MODE_UNKNOWN: u32 = 0;
/// The endpoint busy-waits and never sleeps in the kernel.
pub(crate) const MODE_SPIN: u32 = 1;
/// The endpoint may sleep on the futex words and must be woken.
pub(crate) const MODE_BLOCK: u32 = 2;

/// What one endpoint records about itself.
#[repr(C)]
#[derive(Debug)]
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
pub struct PeerInfo {
    /// `PEER_ABSENT`, `PEER_CLAIMING`, `PEER_PRESENT` or `PEER_CLOSED`.
    pub state: AtomicU32,
    /// `MODE_SPIN` or `MODE_BLOCK`, written before `state` becomes `PEER_PRESENT`.
    pub wait_mode: AtomicU32,
    /// Process id of the holder, as the holder sees it (its own PID namespace). Information
    /// only: liveness is judged by the endpoint's lock.
    pub pid: AtomicU32,
    /// Reserved, zero.
    pub _reserved: AtomicU32,
    /// Start time of the holder process (clock ticks since boot, 0 where unknown).
    /// Information only, like `pid`.
    pub start_time: AtomicU64,
    /// Largest message this endpoint accepts, in bytes. Written before `state` becomes
    /// `PEER_PRESENT` and again whenever the endpoint changes its limit; a sender reads it
    /// before each message too large for one frame.
    pub max_message: AtomicU64,
}

/// The first bytes of every mapping.
#[repr(C)]
#[derive(Debug)]
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
pub struct SegmentHeader {
    /// `MAGIC`.
    pub magic: AtomicU64,
    /// `LAYOUT_VERSION`.
    pub version: AtomicU32,
    /// `HEADER_SIZE`: offset of the first region.
    pub header_size: AtomicU32,
    /// Bytes in each ring region (a power of two).
    pub capacity: AtomicU64,
    /// Bytes in the whole mapping.
    pub total_size: AtomicU64,
    /// `READY` once initialised; written last by the creator.
    pub ready: AtomicU32,
    /// The frame alignment the creator's build uses (`FRAME_ALIGN`, 8).
    pub frame_align: AtomicU32,
    /// The alignment of the padded cells in the creator's build (`CELL_ALIGN`).
    pub cell_align: AtomicU32,
    /// The creator's pointer width in bits (`POINTER_WIDTH`).
    pub pointer_width: AtomicU32,
    /// The creating endpoint.
    pub creator: Padded<PeerInfo>,
    /// The connecting endpoint.
    pub connector: Padded<PeerInfo>,
}

/// Shared state of one ring. The frames themselves live in the region.
#[repr(C)]
#[derive(Debug)]
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
pub struct RingHeader {
    /// Producer index: bytes ever published (free-running).
    pub tail: Padded<AtomicU64>,
    /// Consumer index: bytes ever released (free-running).
    pub head: Padded<AtomicU64>,
    /// The consumer sleeps here when the ring is empty.
    pub data_wait: Padded<WaitCell>,
    /// The producer sleeps here when the ring is full.
    pub space_wait: Padded<WaitCell>,
}

// The sizes hold for the real atomics; loom's model-checked ones are larger.
#[cfg(not(loom))]
const _: () = {
    use super::RINGS_OFFSET;
    assert!(offset_of!(SegmentHeader, magic) == 0);
    assert!(offset_of!(SegmentHeader, version) == 8);
    assert!(offset_of!(SegmentHeader, header_size) == 12);
    assert!(offset_of!(SegmentHeader, capacity) == 16);
    assert!(offset_of!(SegmentHeader, total_size) == 24);
    assert!(offset_of!(SegmentHeader, ready) == 32);
    assert!(offset_of!(SegmentHeader, frame_align) == 36);
    assert!(offset_of!(SegmentHeader, cell_align) == 40);
    assert!(offset_of!(SegmentHeader, pointer_width) == 44);
    assert!(offset_of!(SegmentHeader, creator) == 128);
    assert!(offset_of!(SegmentHeader, connector) == 256);
    assert!(size_of::<SegmentHeader>() == 384);
    assert!(offset_of!(PeerInfo, start_time) == 16);
    assert!(offset_of!(PeerInfo, max_message) == 24);
    assert!(size_of::<PeerInfo>() == 32);
    assert!(align_of::<Padded<PeerInfo>>() == CELL_ALIGN);
    assert!(size_of::<Padded<PeerInfo>>() == CELL_ALIGN);
    assert!(align_of::<Padded<u8>>() == CELL_ALIGN);
    assert!(offset_of!(RingHeader, tail) == 0);
    assert!(offset_of!(RingHeader, head) == CELL_ALIGN);
    assert!(offset_of!(RingHeader, data_wait) == 2 * CELL_ALIGN);
    assert!(offset_of!(RingHeader, space_wait) == 3 * CELL_ALIGN);
    assert!(size_of::<RingHeader>() == 4 * CELL_ALIGN);
    assert!(CREATOR_LOCK != CONNECTOR_LOCK);
    assert!(size_of::<SegmentHeader>() <= RINGS_OFFSET);
    assert!(RINGS_OFFSET + 2 * size_of::<RingHeader>() <= HEADER_SIZE);
    assert!(RINGS_OFFSET % CELL_ALIGN == 0);
};

/// Bytes a mapping with two rings of `capacity` bytes needs.
pub(crate) fn segment_size(capacity: usize) -> usize {
    HEADER_SIZE + 2 * capacity
}

/// Whether a ring of `capacity` bytes may be made.
pub(crate) fn valid_capacity(capacity: usize) -> bool {
    capacity.is_power_of_two() && (MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity)
}

/// Checks a capacity chosen by a caller for the channel or listener `channel`.
pub(crate) fn check_capacity(channel: &str, capacity: usize) -> Result<(), OpenError> {
    if !valid_capacity(capacity) {
        return Err(OpenError::InvalidConfig {
            channel: channel.into(),
            what: format!(
                "ring capacity {capacity} must be a power of two between {MIN_CAPACITY} and \
                 {MAX_CAPACITY} (Config::capacity)"
            ),
        });
    }
    Ok(())
}

impl PeerInfo {
    /// Records the process holding this end and how it waits. Relaxed stores: published by the
    /// Release store that follows them (of `state`, or of the header's `ready`).
    pub(crate) fn record(&self, me: crate::sys::ProcessId, wait_mode: u32) {
        use std::sync::atomic::Ordering::Relaxed;
        self.pid.store(me.pid, Relaxed);
        self.start_time.store(me.start_time, Relaxed);
        self.wait_mode.store(wait_mode, Relaxed);
    }
}

impl SegmentHeader {
    /// Writes the fixed fields a creator fills in before `ready`. Relaxed stores: published by
    /// the creator's Release store of `ready`, which openers read with Acquire first.
    pub(crate) fn write_fixed(&self, magic: u64, version: u32, capacity: usize, total: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.magic.store(magic, Relaxed);
        self.version.store(version, Relaxed);
        self.header_size.store(HEADER_SIZE as u32, Relaxed);
        self.capacity.store(capacity as u64, Relaxed);
        self.total_size.store(total as u64, Relaxed);
    }

    /// Writes the layout parameters of this build (the fields `validate` compares).
    pub(crate) fn write_layout(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        // Relaxed: published by the creator's Release store of `ready`.
        self.frame_align.store(FRAME_ALIGN as u32, Relaxed);
        self.cell_align.store(CELL_ALIGN as u32, Relaxed);
        self.pointer_width.store(POINTER_WIDTH, Relaxed);
    }

    /// Checks that the layout parameters the creator's build wrote are this build's.
    pub(crate) fn check_layout(&self, name: &str) -> Result<(), OpenError> {
        use std::sync::atomic::Ordering::Relaxed;
        for (field, cell, expected) in [
            ("frame alignment", &self.frame_align, FRAME_ALIGN as u32),
            ("cell alignment", &self.cell_align, CELL_ALIGN as u32),
            ("pointer width", &self.pointer_width, POINTER_WIDTH),
        ] {
            // Relaxed: published before `ready`, which the caller read with Acquire.
            let found = cell.load(Relaxed);
            if found != expected {
                return Err(OpenError::LayoutMismatch {
                    channel: name.into(),
                    field,
                    found: found.into(),
                    expected: expected.into(),
                });
            }
        }
        Ok(())
    }

    /// Checks the fixed fields of a header the creator has marked ready, against the real
    /// length of the mapping; `magic` is the first word, as the caller read it. Returns the ring
    /// capacity. `name` names the channel in errors.
    pub(crate) fn validate(
        &self,
        magic: u64,
        mapping_len: usize,
        name: &str,
    ) -> Result<usize, OpenError> {
        use std::sync::atomic::Ordering::Relaxed;
        if magic != MAGIC {
            return Err(OpenError::BadMagic {
                channel: name.into(),
                magic,
            });
        }
        // Relaxed: these fields were published by the creator before `ready`, which the caller
        // has already read with Acquire.
        let version = self.version.load(Relaxed);
        if version != LAYOUT_VERSION {
            return Err(OpenError::VersionMismatch {
                channel: name.into(),
                found: version,
                expected: LAYOUT_VERSION,
            });
        }
        self.check_layout(name)?;
        let header_size = self.header_size.load(Relaxed) as usize;
        if header_size != HEADER_SIZE {
            return Err(OpenError::size_mismatch(
                name,
                format!("header size {header_size}, expected {HEADER_SIZE}"),
            ));
        }
        let capacity = self.capacity.load(Relaxed);
        let capacity = usize::try_from(capacity)
            .ok()
            .filter(|c| valid_capacity(*c))
            .ok_or_else(|| {
                OpenError::size_mismatch(name, format!("ring capacity {capacity} is invalid"))
            })?;
        let total = self.total_size.load(Relaxed);
        if total != segment_size(capacity) as u64 {
            return Err(OpenError::size_mismatch(
                name,
                format!("total size {total} does not match two rings of {capacity} bytes"),
            ));
        }
        if (total as usize) > mapping_len {
            return Err(OpenError::size_mismatch(
                name,
                format!("header says {total} bytes but the mapping has {mapping_len}"),
            ));
        }
        Ok(capacity)
    }
}
