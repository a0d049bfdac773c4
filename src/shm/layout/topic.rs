//! A topic's mapping: one ring that one publisher writes and many subscribers read, each at
//! its own position, and the table of their positions.
//!
//! ```text
//! 0              SegmentHeader  topic magic, version, region offset, ring capacity, total size,
//!                               ready word, creator = the publisher
//! 384            TopicInfo      mode, history, slot count, index length, offsets
//! 512            RingHeader     tail (the publisher's index), data_wait (woken on close
//!                               only), space_wait (the publisher sleeps here)
//! 1024           TopicWords     floor, proposal, claim, published, joins (one line each)
//! 1664           Counters       the publisher's counts (`counters.rs`)
//! INDEX_OFFSET   IndexEntry[index_len]    where the last messages start and end
//! slots_offset   SubscriberSlot[slots]    per subscriber, 128 bytes: its record, the
//!                                         slot's state, its cursor, the cell it sleeps on,
//!                                         its counts
//! region_offset  region         `capacity` bytes of frames (the frame protocol of `frame.rs`)
//! ```
//!
//! A subscriber holds the lock on its slot's byte of the object (at the slot's offset) for as
//! long as it is subscribed, as a channel's endpoints hold theirs; the publisher holds
//! `CREATOR_LOCK`. The protocol (the reclaim rule, the join, the overwrite check) is in
//! `crate::shm::topic`.

use crate::sync::{AtomicU32, AtomicU64};
use std::mem::offset_of;
#[cfg(not(loom))]
use std::mem::size_of;

use super::counters::Counters;
use super::{Padded, PeerInfo, WaitCell, CELL_ALIGN};
#[cfg(not(loom))]
use super::{RingHeader, SegmentHeader};

/// `b"SHMTOPIC"` read as a little-endian `u64`.
pub(crate) const TOPIC_MAGIC: u64 = u64::from_le_bytes(*b"SHMTOPIC");
/// Bumped whenever the topic layout or its protocol changes.
pub(crate) const TOPIC_VERSION: u32 = 2;
/// Offset of [`TopicInfo`].
pub(crate) const INFO_OFFSET: usize = 384;
/// Offset of the ring header.
pub(crate) const RING_OFFSET: usize = 512;
/// Offset of [`TopicWords`].
pub(crate) const WORDS_OFFSET: usize = 1024;
/// Offset of the publisher's [`Counters`].
pub(crate) const TOPIC_COUNTERS_OFFSET: usize = 1664;
/// Offset of the index.
pub(crate) const INDEX_OFFSET: usize = 2048;
/// Most subscribers one topic admits.
pub const MAX_SUBSCRIBERS: usize = 1024;
/// Longest index (the most messages a late subscriber can ask for, and how far back a lapped
/// one can be put).
pub(crate) const MAX_INDEX: usize = 1 << 16;
/// Shortest index.
pub(crate) const MIN_INDEX: usize = 256;

/// [`TopicInfo::mode`]: the publisher reuses space only behind the slowest live subscriber.
pub(crate) const MODE_LOSSLESS: u32 = 1;
/// [`TopicInfo::mode`]: the publisher never waits; lapped subscribers are told what they
/// missed.
pub(crate) const MODE_OVERWRITE: u32 = 2;

/// [`SubscriberSlot::state`]: nobody holds the slot.
pub(crate) const SLOT_FREE: u32 = 0;
/// A subscriber holds the slot and is settling its cursor (see `shm::topic` for the join).
pub(crate) const SLOT_JOINING: u32 = 1;
/// A subscriber holds the slot and reads from its cursor.
pub(crate) const SLOT_ACTIVE: u32 = 2;
/// The publisher dropped the subscriber (its cursor was out of range, or the publisher was
/// asked to): the publisher no longer waits for it.
pub(crate) const SLOT_DROPPED: u32 = 3;

/// The low byte of a slot's state word is its state (`SLOT_*`); the bits above it count the
/// joins, so that a publisher that judged one subscriber's cursor never drops the next holder
/// of the slot for it.
pub(crate) const STATE_MASK: u32 = 0xff;

/// The state of a slot's state word.
#[inline]
pub(crate) fn state_of(word: u32) -> u32 {
    word & STATE_MASK
}

/// `word` with its state replaced by `state` (the join count kept).
#[inline]
pub(crate) fn with_state(word: u32, state: u32) -> u32 {
    (word & !STATE_MASK) | state
}

/// The name of the state in a slot's state word, for listings: `"free"`, `"joining"`,
/// `"active"`, `"dropped"`, or `"unknown"` for a byte no state has.
pub(crate) fn state_name(word: u32) -> &'static str {
    match state_of(word) {
        SLOT_FREE => "free",
        SLOT_JOINING => "joining",
        SLOT_ACTIVE => "active",
        SLOT_DROPPED => "dropped",
        _ => "unknown",
    }
}

/// The topic's fixed parameters, written by the publisher before `ready`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct TopicInfo {
    /// `MODE_LOSSLESS` or `MODE_OVERWRITE`.
    pub(crate) mode: AtomicU32,
    /// Messages the publisher keeps for subscribers that join late.
    pub(crate) history: AtomicU32,
    /// Number of subscriber slots.
    pub(crate) slots: AtomicU32,
    /// Entries in the index (a power of two).
    pub(crate) index_len: AtomicU32,
    /// Offset of the first slot.
    pub(crate) slots_offset: AtomicU64,
    /// Offset of the region.
    pub(crate) region_offset: AtomicU64,
}

/// The publisher's words, each on lines of its own.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct TopicWords {
    /// Lossless: the index behind which the publisher last allowed itself to write (every
    /// live cursor was at or past it). Information for listings.
    pub(crate) floor: Padded<AtomicU64>,
    /// Lossless: the floor the publisher is about to take, stored before its last look at the
    /// cursors; a joining subscriber compares its cursor with it (the join).
    pub(crate) proposal: Padded<AtomicU64>,
    /// Overwrite: bytes below this index may be overwritten at any moment; stored before the
    /// publisher writes over them (the overwrite check).
    pub(crate) claim: Padded<AtomicU64>,
    /// Messages published so far.
    pub(crate) published: Padded<AtomicU64>,
    /// Joins so far: a joiner counts itself here before it can sleep, and the publisher, which
    /// looks at it after each publish, adds its slot to the ones it wakes.
    pub(crate) joins: Padded<AtomicU64>,
}

/// Where one recent message is: written by the publisher after the message is published, as a
/// sequence lock (`seq` is 0 while the entry changes).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct IndexEntry {
    /// The message's sequence number plus one; 0 while the entry is written.
    pub(crate) seq: AtomicU64,
    /// Index of its frame.
    pub(crate) start: AtomicU64,
    /// The publisher's index after it (where the next message's frame, or the marker in
    /// front of it, starts).
    pub(crate) end: AtomicU64,
    /// Reserved, zero.
    pub(crate) _reserved: AtomicU64,
}

/// One subscriber's record: its end (as a channel endpoint's record: closed on drop, its
/// wait mode, who it is), where it is in the join, and its cursor.
#[repr(C, align(128))]
#[derive(Debug)]
pub(crate) struct SubscriberSlot {
    /// The subscriber's end: `PEER_PRESENT` while subscribed, `PEER_CLOSED` once it closed;
    /// its wait mode, pid and start time (information only: the slot's lock decides).
    pub(crate) peer: PeerInfo,
    /// `SLOT_FREE`, `SLOT_JOINING`, `SLOT_ACTIVE` or `SLOT_DROPPED`.
    pub(crate) state: AtomicU32,
    /// Reserved, zero.
    pub(crate) _reserved: AtomicU32,
    /// The subscriber's index: everything before it is read (the consumer's `head`).
    pub(crate) cursor: AtomicU64,
    /// Where the subscriber sleeps for messages: the publisher wakes each subscriber on its
    /// own cell, and only one that may sleep in front of what it published.
    pub(crate) data_wait: WaitCell,
    /// The subscriber's counts (its receiver's), written by its holder only.
    pub(crate) counters: Counters,
}

/// Where the parts of a topic of `slots` subscribers and an index of `index_len` entries lie:
/// (offset of the slots, offset of the region).
pub(crate) const fn topic_offsets(index_len: usize, slots: usize) -> (usize, usize) {
    let slots_offset = round_up(INDEX_OFFSET + index_len * INDEX_ENTRY, CELL_ALIGN);
    let region_offset = round_up(slots_offset + slots * SLOT_SIZE, 4096);
    (slots_offset, region_offset)
}

/// Bytes of one index entry.
pub(crate) const INDEX_ENTRY: usize = 32;
/// Bytes of one slot.
pub(crate) const SLOT_SIZE: usize = 128;

const fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// The byte a subscriber in slot `i` keeps locked.
pub(crate) fn slot_lock(slots_offset: usize, i: usize) -> u64 {
    (slots_offset + i * SLOT_SIZE + offset_of!(SubscriberSlot, state)) as u64
}

#[cfg(not(loom))]
const _: () = {
    assert!(size_of::<SegmentHeader>() == INFO_OFFSET);
    assert!(size_of::<TopicInfo>() <= RING_OFFSET - INFO_OFFSET);
    assert!(size_of::<RingHeader>() == WORDS_OFFSET - RING_OFFSET);
    assert!(WORDS_OFFSET + size_of::<TopicWords>() <= TOPIC_COUNTERS_OFFSET);
    assert!(TOPIC_COUNTERS_OFFSET % CELL_ALIGN == 0);
    assert!(TOPIC_COUNTERS_OFFSET + size_of::<Padded<Counters>>() <= INDEX_OFFSET);
    assert!(size_of::<IndexEntry>() == INDEX_ENTRY);
    assert!(size_of::<SubscriberSlot>() == SLOT_SIZE);
};
