//! Every byte's meaning: the `#[repr(C)]` structures of the shared mappings and the frame
//! word, and nothing else (no system calls, no protocol logic).
//!
//! Two kinds of mapping exist, and both start with the fields of a [`SegmentHeader`] (magic,
//! version, sizes, a ready word written last, the creator's record):
//!
//! * a channel ([`MAGIC`], `segment.rs`): the header, two ring headers, each side's counters
//!   (`counters.rs`), then two regions of frames, each frame starting with a frame word
//!   (`frame.rs`);
//! * a listener (`listener::LISTENER_MAGIC`, `listener.rs`): the header, the slot count and the
//!   doorbell, then one slot per client.
//!
//! Everything here lives in memory another process can write, so readers validate each field
//! before they use it (see [`SegmentHeader::validate`]). Only offsets and counters are stored,
//! never pointers: each process maps the segment at its own address. Any change here bumps
//! [`LAYOUT_VERSION`] (or, for the listener's own part, its `LISTENER_VERSION`).

pub(crate) mod counters;
pub(crate) mod frame;
pub(crate) mod listener;
mod segment;
pub(crate) mod topic;

/// The sleep/wake words of each ring's header: the waits' own type, placed in the mapping.
pub(crate) use crate::wait::WaitCell;
pub(crate) use segment::{
    check_capacity, segment_size, valid_capacity, CONNECTOR_LOCK, CREATOR_LOCK, MODE_BLOCK,
    MODE_SPIN, PEER_ABSENT, PEER_CLAIMING, PEER_CLOSED, PEER_PRESENT,
};
// The shared structs are `pub` (not `pub(crate)`) for the test hooks (`crate::testing`), which
// let the crate's tests and fuzz target forge mappings; without the hooks nothing reaches them.
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
pub use segment::{PeerInfo, RingHeader, SegmentHeader};

/// `b"SHMLINK\0"` read as a little-endian `u64`.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"SHMLINK\0");
/// Bumped whenever the layout or the frame protocol changes.
pub(crate) const LAYOUT_VERSION: u32 = 7;
/// Bytes before the first ring region; a page, so regions start page-aligned.
pub(crate) const HEADER_SIZE: usize = 4096;
/// Offset of the two ring headers inside the segment header page.
pub(crate) const RINGS_OFFSET: usize = 1024;
/// Alignment (and size) of every [`Padded`] cell, the same on every architecture.
pub(crate) const CELL_ALIGN: usize = 128;
/// Width of a pointer in the process that made the mapping, in bits.
pub(crate) const POINTER_WIDTH: u32 = usize::BITS;

/// Value of [`SegmentHeader::ready`] once the creator has initialised everything.
pub(crate) const READY: u32 = 0x5245_4459; // "REDY"

/// A value alone on `CELL_ALIGN` bytes: two cells never share a cache line (nor a pair of
/// lines that the prefetcher fetches together). The alignment is written out rather than taken
/// from a per-architecture constant, so that the layout is the same for every build.
#[repr(C, align(128))]
#[derive(Debug, Default)]
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}
