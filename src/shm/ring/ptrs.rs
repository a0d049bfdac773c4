//! Where a ring's memory lives: the pointers both ends hold.

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use std::ptr::NonNull;

use crate::shm::layout::counters::Counters;
use crate::shm::layout::{RingHeader, WaitCell};

/// Where a ring's memory lives. Both ends hold one; the memory must outlive both.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingPtrs {
    pub header: NonNull<RingHeader>,
    /// The consumer's index: `header.head` for a ring of two ends; a subscriber's cursor in
    /// its slot for a topic's reader, and the publisher's floor for a topic's writer (see
    /// `crate::shm::topic`).
    pub head: NonNull<AtomicU64>,
    /// Where the consumer sleeps for data: `header.data_wait` for a ring of two ends; a
    /// subscriber's own cell in its slot for a topic's reader (its publisher wakes each
    /// subscriber on its own).
    pub data_cell: NonNull<WaitCell>,
    pub region: NonNull<u8>,
    pub capacity: usize,
    /// The wait mode the *other* end announced (`MODE_*`), read to decide whether it needs a
    /// wake-up call.
    pub peer_mode: NonNull<AtomicU32>,
    /// This end's own counters (written by this end only).
    pub counters: NonNull<Counters>,
}

impl RingPtrs {
    #[inline]
    pub(super) fn header(&self) -> &RingHeader {
        // SAFETY: `RingPtrs` is only built (by `Owned::new` or the channel) over a live,
        // initialised `RingHeader` that outlives every end holding these pointers; all fields
        // are atomics, so shared references to them are sound even while the peer writes.
        unsafe { self.header.as_ref() }
    }

    /// Where the consumer sleeps for data (see `data_cell`).
    #[inline]
    pub(super) fn data_cell(&self) -> &WaitCell {
        // SAFETY: as in `header`: the cell lives in the same memory and is atomics.
        unsafe { self.data_cell.as_ref() }
    }

    /// The consumer's index (see `head`).
    #[inline]
    pub(super) fn head(&self) -> &AtomicU64 {
        // SAFETY: as in `header`: the word lives in the same memory (the ring header, or a
        // topic's header or slot) and is an atomic.
        unsafe { self.head.as_ref() }
    }

    #[inline]
    pub(super) fn peer_mode(&self) -> u32 {
        // SAFETY: same allocation rules as `header`; the cell is an atomic.
        // Relaxed: the mode is written once before the peer marks itself present and never
        // changes; a stale MODE_UNKNOWN only makes us take the (safe) wake path.
        unsafe { self.peer_mode.as_ref() }.load(Ordering::Relaxed)
    }

    /// The header word at `offset`, which must be 8-aligned and below the capacity.
    #[cfg(not(loom))]
    #[inline]
    pub(super) fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset % 8 == 0 && offset < self.capacity);
        // SAFETY: the region is `capacity` bytes, 8-aligned (page- or 64-aligned in practice),
        // and `offset` is an 8-aligned offset below `capacity` (every caller masks an index with
        // `capacity - 1` and indices only move in multiples of 8), so the 8 bytes are inside the
        // region and aligned for an `AtomicU64`. Header words are only ever accessed atomically.
        unsafe { &*(self.region.as_ptr().add(offset) as *const AtomicU64) }
    }

    /// The payload byte at `offset` (at most the capacity).
    #[cfg(not(loom))]
    #[inline]
    pub(super) fn bytes(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset <= self.capacity);
        // SAFETY: `offset` is inside the region (or one past its end), which is one allocation.
        unsafe { self.region.as_ptr().add(offset) }
    }

    /// Under loom: the header word at `offset`, from the model's table.
    #[cfg(loom)]
    pub(super) fn word(&self, offset: usize) -> &AtomicU64 {
        self.loom_region().word(offset)
    }

    /// Under loom: the payload byte at `offset`, in the model's byte buffer.
    #[cfg(loom)]
    pub(super) fn bytes(&self, offset: usize) -> *mut u8 {
        self.loom_region().bytes(offset)
    }

    /// Under loom the region pointer of a heap ring points at a `LoomRegion`.
    #[cfg(loom)]
    pub(super) fn loom_region(&self) -> &super::loom::LoomRegion {
        // SAFETY: under loom only `ring::new` makes rings, and it points `region` at the
        // `LoomRegion` its storage keeps alive for as long as the ends.
        unsafe { self.region.cast::<super::loom::LoomRegion>().as_ref() }
    }
}

/// Where the parts of a heap ring's storage are (the ring header, the mode word each end
/// announces, the region), as its storage (`Owned`, or loom's) lays them out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingParts {
    pub header: NonNull<RingHeader>,
    /// The mode the consumer announced: read by the producer.
    pub consumer_mode: NonNull<AtomicU32>,
    /// The mode the producer announced: read by the consumer.
    pub producer_mode: NonNull<AtomicU32>,
    pub region: NonNull<u8>,
    /// The producer's counters and the consumer's.
    pub counters: [NonNull<Counters>; 2],
}

impl RingParts {
    /// The pointers of the producer and of the consumer of a ring of `capacity` bytes.
    pub(crate) fn ends(self, capacity: usize) -> (RingPtrs, RingPtrs) {
        // SAFETY: `header` points at a live `RingHeader` (see the field).
        let header = unsafe { self.header.as_ref() };
        let head = NonNull::from(&*header.head);
        let producer = RingPtrs {
            header: self.header,
            head,
            data_cell: NonNull::from(&*header.data_wait),
            region: self.region,
            capacity,
            peer_mode: self.consumer_mode,
            counters: self.counters[0],
        };
        let consumer = RingPtrs {
            peer_mode: self.producer_mode,
            counters: self.counters[1],
            ..producer
        };
        (producer, consumer)
    }
}
