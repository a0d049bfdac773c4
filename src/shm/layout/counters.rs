//! What each side of a ring counts, for whoever looks (`shmlink stat`, `segments::stats`).
//!
//! Each side writes its own [`Counters`] and nothing else does: plain `Relaxed` stores of
//! values the side keeps in its own memory (never read back from the mapping, never read by
//! the protocol). A peer that writes the other side's counters misleads only the viewer.
//!
//! ```text
//! channel  COUNTERS_OFFSET  Padded<Counters>[4]  ring 0's sender, ring 0's receiver,
//!                                                 ring 1's sender, ring 1's receiver
//! topic    TOPIC_COUNTERS_OFFSET  Padded<Counters>  the publisher's
//!          each SubscriberSlot    Counters        that subscriber's
//! ```

// The std atomics, not the crate's (`crate::sync`, loom's under the models): nothing of the
// protocol reads these, so the models have nothing to explore in them.
use std::sync::atomic::AtomicU64;

/// Offset, in a channel's header page, of the counters: after the two ring headers.
pub(crate) const COUNTERS_OFFSET: usize = 2048;

/// One side's counts. All zero in a fresh mapping; only the side that owns them writes them.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Messages sent (a sender) or received (a receiver); a message in fragments counts once.
    pub(crate) messages: AtomicU64,
    /// Payload bytes of those messages.
    pub(crate) bytes: AtomicU64,
    /// Fragments, of messages longer than a frame.
    pub(crate) fragments: AtomicU64,
    /// A sender: times a send found the ring full (back-pressure).
    pub(crate) full: AtomicU64,
    /// Times a wait of this side went to sleep (a blocking one in the kernel, an async task
    /// parked).
    pub(crate) sleeps: AtomicU64,
    /// Wake-up calls this side made to a sleeping peer.
    pub(crate) wakes: AtomicU64,
    /// A sender: the highest fill of the ring, in bytes, seen when it looked at the reader's
    /// position (at least once a lap, and whenever the ring looked full).
    pub(crate) high_water: AtomicU64,
    /// Nanoseconds since the Unix epoch at a recent message: written with the first message,
    /// every 256th, and whenever the side woke its peer, found the ring full or slept.
    pub(crate) last_ns: AtomicU64,
    /// A topic's subscriber: messages it missed, overwritten before it read them.
    pub(crate) missed: AtomicU64,
}

/// Bytes of [`Counters`].
pub(crate) const COUNTERS_SIZE: usize = 72;

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Counters>() == COUNTERS_SIZE);
    assert!(std::mem::size_of::<super::Padded<Counters>>() == super::CELL_ALIGN);
    assert!(super::RINGS_OFFSET + 2 * std::mem::size_of::<super::RingHeader>() <= COUNTERS_OFFSET);
    assert!(COUNTERS_OFFSET + 4 * super::CELL_ALIGN <= super::HEADER_SIZE);
};
