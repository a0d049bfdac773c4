//! The single-producer/single-consumer frame protocol.
//!
//! A ring is a ring header (`RingHeader` in the layout) plus a power-of-two region of bytes. It knows nothing of where that
//! memory comes from: [`new`] puts it on the heap for use inside one process, and
//! [`crate::Channel`] puts two of them in a named shared mapping.
//!
//! # Frames
//!
//! Every frame starts on an 8-byte boundary, right after the frame before it, with one `u64`
//! header word, followed by the payload:
//!
//! ```text
//! bits  0..32  payload length in bytes
//! bits 32..35  kind: DATA, a fragment of a larger message, SKIP (to the next cache line) or
//!              PAD (to the start of the region)
//! bits 35..64  tag: bits 3..32 of the frame's free-running start index
//! ```
//!
//! Small frames share cache lines, so a stream of small messages moves a line per several
//! messages. A frame that fits in one line (a message of up to 56 bytes) never straddles two:
//! when it would, the producer writes a SKIP word and starts the frame at the next line, so a
//! round trip of such messages moves one line each way.
//!
//! A frame never wraps: when it does not fit before the end of the region the producer writes a
//! PAD word and starts the frame at offset 0, so every payload is one contiguous slice. (Once a
//! lap, a producer whose consumer has read everything also goes back to offset 0 early, to stay
//! in warm cache lines.) A SKIP or a PAD is published together with the frame behind it, when
//! that frame is committed, and the one wake-up of the commit covers both: a grant that is
//! dropped publishes nothing, and a consumer is never left asleep in front of a marker while the
//! producer waits for the room its skipping would free.
//!
//! # Publishing
//!
//! The producer keeps one invariant: *the header word at its current position is zero*. To
//! publish a frame it writes the payload, writes zero into the header word of the *next* frame,
//! and only then stores this frame's header word with `Release`. The consumer polls the header
//! word at its own position with `Acquire`: zero means "nothing yet", anything else is a frame
//! whose payload (and the zeroed next word) it is guaranteed to see. The consumer therefore never
//! reads the producer's index on the hot path: the only cache lines that move per message are the
//! ones holding the frame.
//!
//! After each publish the producer also zeroes the word where a next frame of the same size
//! would end (`zero_ahead`), and remembers it until a grant reaches it; a publish that ends
//! there finds its zero in place and stores nothing before the header word. In a ping-pong of
//! one-line messages that word opens the line after the next, which the consumer's prefetcher
//! tends to take while it waits; storing the zero again would have to win that line back before
//! the header word could become visible.
//!
//! A batch (`Producer::try_send_batch`) writes its frames as single sends would place them, keeps
//! back the word at the producer's position, zeroes the word after the last frame, and stores
//! the kept word last: one `Release` store publishes the batch, since the consumer reaches every
//! other word of it through that one.
//!
//! The consumer publishes its index (`head`) with `Release` after it has finished reading a
//! frame; the producer rereads it with `Acquire` only when its cached copy says the ring is full.
//!
//! Indices are free-running `u64` byte counters; the offset is `index & (capacity - 1)`.
//!
//! # Untrusted memory
//!
//! The other side of a shared ring is another process. Nothing read from the shared memory is
//! trusted: a header word with a wrong tag, an unknown kind or a length that runs past the region,
//! and a consumer index that moves backwards or past the producer, are reported as
//! [`RecvError::Corrupt`](crate::RecvError::Corrupt) or
//! [`SendError::Corrupt`](crate::SendError::Corrupt). The consumer's own index and the producer's
//! own index are kept in local memory and never reread from the mapping.
//!
//! The common case is judged in one compare: a header word whose upper half is exactly the tag
//! of the consumer's position and the kind `DATA`, with a length of at most a frame's that ends
//! inside the region, is a frame (`Consumer::data_now`). Any other word goes to the full
//! judgement (`poll_frame_slow`), which decides from the word that same load read.

mod consumer;
mod heap;
#[cfg(loom)]
mod loom;
mod producer;
mod ptrs;
pub(crate) mod tally;
#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(loom, test))]
pub(crate) use self::loom::announce;
pub(crate) use crate::shm::layout::frame::{
    decode, encode, frame_size, kind, max_payload, next_line, skips_to_line, tag_of, FRAME_ALIGN,
    FRAME_HEADER, LINE, REWIND_AT,
};
pub(crate) use consumer::Frame;
pub use consumer::{Consumer, ReadGuard};
pub use heap::new;
pub(crate) use heap::Owned;
pub use producer::{Producer, WriteGrant};
pub(crate) use ptrs::{RingParts, RingPtrs};
pub(crate) use tally::Tally;

use crate::error::{ChannelName, RecvError, SendError};
use crate::seam::{Grant, Message, Sealed};
use crate::sync::Ordering;

/// Ordering of the store that publishes a frame header word.
/// Release: pairs with [`OBSERVE`] in `Consumer::poll_frame`, so the payload written before it is
/// visible to the consumer that sees the header.
pub(crate) const PUBLISH: Ordering = Ordering::Release;
/// Ordering of the load that observes a frame header word. Acquire: pairs with [`PUBLISH`].
pub(crate) const OBSERVE: Ordering = Ordering::Acquire;
/// Ordering of the store of the consumer's index after it has read a frame.
/// Release: pairs with [`RECLAIM`] in `Producer::refresh_head`, so the consumer's reads of a
/// frame happen before the producer overwrites that space.
pub(crate) const RELEASE_SPACE: Ordering = Ordering::Release;
/// Ordering of the producer's load of the consumer's index. Acquire: pairs with
/// [`RELEASE_SPACE`].
pub(crate) const RECLAIM: Ordering = Ordering::Acquire;

/// What stands for the consumer's index in a ring with many readers (a topic's publisher,
/// `crate::shm::topic`): asked only when the producer's cached index says there is no room,
/// and told of every frame published. Batches (`Producer::write_batch`) publish several frames
/// with one word, so a producer with a gate sends one frame at a time.
pub(crate) trait Gate: Send {
    /// The index behind which the producer, at `tail`, may write now (at most `tail`, never
    /// below what it returned before), for frames that would end at `end`.
    fn reclaim(&mut self, tail: u64, end: u64) -> Result<u64, SendError>;
    /// The frame at `start` was published; the producer's position is now `next` (it was
    /// `from` before the publish, markers included). Wakes the readers that may sleep in front
    /// of it (see `Producer::notify_consumer`, whose rule holds for each reader): whether it
    /// made a wake-up call.
    fn published(&mut self, start: u64, next: u64, from: u64) -> bool;
}

// What the ring lends out, as the seam names it.

impl Sealed for WriteGrant<'_> {}

impl Grant for WriteGrant<'_> {
    #[inline]
    fn commit(self, used: usize) -> Result<(), SendError> {
        WriteGrant::commit(self, used);
        Ok(())
    }
}

impl Sealed for ReadGuard<'_> {}

impl Message for ReadGuard<'_> {
    #[inline]
    fn json<'de, T: serde::Deserialize<'de>>(&'de self) -> Result<T, RecvError> {
        ReadGuard::json(self)
    }

    #[inline]
    fn channel(&self) -> &ChannelName {
        ReadGuard::channel(self)
    }
}
