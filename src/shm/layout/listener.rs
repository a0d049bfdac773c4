//! A listener's mapping: the segment header's fields (the listener's magic, its version, the
//! connections' ring capacity, the server as creator), then its own header and one slot per
//! client:
//!
//! ```text
//! 0      SegmentHeader: listener magic, version, header size, the connections' ring capacity,
//!        total size, ready word, creator = the server process
//! 1024   ListenerHeader: slot count, doorbell word
//! 4096   slots, 64 bytes each: state word (client pid << 32 | state), sequence number,
//!        client start time, a futex word the server bumps once it has connected
//! ```
//!
//! A slot goes through its states in their numeric order, then back to free: a client claims a
//! free slot ([`SLOT_CLAIMED`]), writes the sequence number of the channel it makes
//! ([`SLOT_NAMED`]), publishes that channel ([`SLOT_PENDING`]), and the server that connected
//! to it leases the slot ([`SLOT_ACTIVE`]) until the connection ends. A client holds the lock
//! on its slot's byte of the object (at the slot's offset) from before its claim until it is
//! accepted or gives up; the protocol is in `crate::service::listener`.

use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU32, AtomicU64};

use crossbeam_utils::CachePadded;

use super::{SegmentHeader, HEADER_SIZE, RINGS_OFFSET};

/// `b"SHMLLSN\0"` read as a little-endian `u64`: the magic number of a listener's mapping,
/// which starts with the same header fields as a channel's.
pub(crate) const LISTENER_MAGIC: u64 = u64::from_le_bytes(*b"SHMLLSN\0");
/// Bumped whenever the listener layout or its slot protocol changes.
pub(crate) const LISTENER_VERSION: u32 = 2;
/// Offset of the first slot.
pub(crate) const SLOTS_OFFSET: usize = 4096;
/// Bytes per slot.
#[cfg(feature = "test-hooks")]
pub(crate) const SLOT_SIZE: usize = size_of::<Slot>();
/// Most clients one listener admits at once.
pub const MAX_CLIENTS: usize = 4096;

/// Slot states (low 32 bits of the slot word; the high 32 bits hold the client's pid): free.
pub(crate) const SLOT_FREE: u64 = 0;
/// Claimed by a client that has not written its sequence number yet.
pub(crate) const SLOT_CLAIMED: u64 = 1;
/// The client is creating its channel; the sequence number is written.
pub(crate) const SLOT_NAMED: u64 = 2;
/// The client's channel exists and waits for the server.
pub(crate) const SLOT_PENDING: u64 = 3;
/// The server holds the connection.
pub(crate) const SLOT_ACTIVE: u64 = 4;

/// Fixed fields of the listener, after the segment header.
#[repr(C)]
pub(crate) struct ListenerHeader {
    /// Number of slots.
    pub(crate) slots: AtomicU32,
    pub(crate) _reserved: AtomicU32,
    /// Bumped (and woken) by every client that publishes a pending slot.
    pub(crate) doorbell: CachePadded<AtomicU32>,
}

/// One client slot.
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// `pid << 32 | state`.
    pub(crate) word: AtomicU64,
    /// The client's connection number: its channel is `<listener>.<pid>.<seq>`.
    pub(crate) seq: AtomicU64,
    /// The client's process start time (0 where unknown).
    pub(crate) start_time: AtomicU64,
    /// Bumped (and woken) by the server once it has connected to the client's channel.
    pub(crate) accepted: AtomicU32,
}

const _: () = {
    assert!(size_of::<SegmentHeader>() <= RINGS_OFFSET);
    assert!(RINGS_OFFSET + size_of::<ListenerHeader>() <= SLOTS_OFFSET);
    assert!(size_of::<Slot>() == 64);
    assert!(offset_of!(Slot, word) == 0);
    assert!(SLOTS_OFFSET >= HEADER_SIZE);
    assert!(RINGS_OFFSET % std::mem::align_of::<ListenerHeader>() == 0);
    assert!(SLOTS_OFFSET % std::mem::align_of::<Slot>() == 0);
    assert!(SLOT_FREE < SLOT_CLAIMED && SLOT_CLAIMED < SLOT_NAMED);
    assert!(SLOT_NAMED < SLOT_PENDING && SLOT_PENDING < SLOT_ACTIVE);
};

/// Bytes of a listener's mapping with `slots` client slots.
pub(crate) fn listener_size(slots: usize) -> usize {
    SLOTS_OFFSET + slots * size_of::<Slot>()
}

/// True for a size `Listener::bind` gives its mapping (so a listener whose server died before it
/// wrote the header is still recognised, and reclaimed).
pub(crate) fn is_listener_size(size: u64) -> bool {
    size.checked_sub(SLOTS_OFFSET as u64)
        .filter(|slots| slots % size_of::<Slot>() as u64 == 0)
        .is_some_and(|slots| (1..=MAX_CLIENTS as u64).contains(&(slots / size_of::<Slot>() as u64)))
}

/// The byte of the listener's object whose lock a client holds on slot `i` while it waits to be
/// accepted: the slot's own offset.
pub(crate) fn slot_lock(i: usize) -> u64 {
    (SLOTS_OFFSET + i * size_of::<Slot>()) as u64
}
