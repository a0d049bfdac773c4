//! The frame word: the `u64` at the start of every frame in a ring region (see the ring
//! module's docs for the protocol that publishes and observes them).
//!
//! ```text
//! bits  0..32  payload length in bytes
//! bits 32..35  kind (`kind::DATA`, `kind::PAD`, `kind::SKIP`, a fragment...)
//! bits 35..64  tag: bits 3..32 of the frame's free-running start index
//! ```

/// Size of a frame header word.
pub(crate) const FRAME_HEADER: usize = 8;
/// How far into a lap the producer of a ring of at least four times this size goes before it
/// tries to rewind to the start of the region (see `Producer::maybe_rewind`).
pub(crate) const REWIND_AT: u64 = 128 * 1024;
/// Every frame starts on an 8-byte boundary (its header word is an aligned `u64`), right after
/// the frame before it: small messages share cache lines, so a stream of them moves a line per
/// several messages, not per message.
pub(crate) const FRAME_ALIGN: usize = 8;
/// A cache line. A frame of at most this size (header included) never straddles two lines: when
/// it would, the producer first writes a SKIP to the next line boundary, so a message of up to 56
/// bytes always moves exactly one line.
pub(crate) const LINE: usize = 64;

/// Frame kinds stored in bits 32..35 of the header word. Zero is never a valid header.
pub(crate) mod kind {
    /// A whole message.
    pub(crate) const DATA: u8 = 1;
    /// Skip to offset 0 of the region.
    pub(crate) const PAD: u8 = 2;
    /// First fragment of a message too large for one frame; the payload starts with the total
    /// length as a little-endian `u64`.
    pub(crate) const FRAG_FIRST: u8 = 3;
    /// A middle fragment.
    pub(crate) const FRAG_MORE: u8 = 4;
    /// The last fragment.
    pub(crate) const FRAG_LAST: u8 = 5;
    /// Drop the fragments received so far: the sender gave up on the message part-way (a send
    /// that timed out). Empty.
    pub(crate) const FRAG_ABORT: u8 = 6;
    /// Skip to the next cache-line boundary, in the same lap: the frame behind it would have
    /// straddled two lines. Empty, never at a line boundary itself.
    pub(crate) const SKIP: u8 = 7;
    /// The highest kind that carries (part of) a message.
    pub(crate) const MAX: u8 = 6;
}

pub(crate) const TAG_SHIFT: u32 = 35;
pub(crate) const TAG_MASK: u64 = (1 << 29) - 1;
pub(crate) const KIND_SHIFT: u32 = 32;

#[inline]
pub(crate) fn tag_of(index: u64) -> u64 {
    (index >> 3) & TAG_MASK
}

#[inline]
pub(crate) fn encode(index: u64, kind: u8, len: u32) -> u64 {
    (tag_of(index) << TAG_SHIFT) | (u64::from(kind) << KIND_SHIFT) | u64::from(len)
}

#[inline]
pub(crate) fn decode(word: u64) -> (u64, u8, u32) {
    (
        word >> TAG_SHIFT,
        ((word >> KIND_SHIFT) & 0x7) as u8,
        word as u32,
    )
}

/// Bytes a frame with a payload of `len` bytes occupies, header included.
#[inline]
pub(crate) const fn frame_size(len: usize) -> usize {
    (FRAME_HEADER + len + FRAME_ALIGN - 1) & !(FRAME_ALIGN - 1)
}

/// Largest payload one frame can carry in a ring of `capacity` bytes.
///
/// A frame (rounded up to whole cache lines) plus the next header word must fit in half the
/// ring, so that a frame that has to skip the end of the region always fits once the consumer
/// has caught up.
pub(crate) const fn max_payload(capacity: usize) -> usize {
    capacity / 2 - LINE - FRAME_HEADER
}

/// True when a frame of `size` bytes (see [`frame_size`]) placed at offset `pos` would straddle
/// two cache lines although it fits in one: it then starts at the next line instead.
#[inline]
pub(crate) const fn skips_to_line(pos: u64, size: u64) -> bool {
    size <= LINE as u64 && (pos % LINE as u64) + size > LINE as u64
}

/// The first line boundary after offset `pos`: where a SKIP at `pos` leads.
#[inline]
pub(crate) const fn next_line(pos: u64) -> u64 {
    (pos | (LINE as u64 - 1)) + 1
}
