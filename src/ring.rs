//! The single-producer/single-consumer frame protocol.
//!
//! A ring is a [`RingHeader`] plus a power-of-two region of bytes. It knows nothing of where that
//! memory comes from: [`new`] puts it on the heap for use inside one process, and
//! [`crate::Channel`] puts two of them in a named shared mapping.
//!
//! # Frames
//!
//! Every frame starts on a cache-line (64-byte) boundary with one `u64` header word, followed by
//! the payload:
//!
//! ```text
//! bits  0..32  payload length in bytes
//! bits 32..35  kind: DATA, PAD (skip to the start of the region), or a fragment of a larger message
//! bits 35..64  tag: bits 3..32 of the frame's free-running start index
//! ```
//!
//! A frame never wraps: when it does not fit before the end of the region the producer writes a
//! PAD word and starts the frame at offset 0, so every payload is one contiguous slice.
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
//! [`Error::Corrupt`]. The consumer's own index and the producer's own index are kept in local
//! memory and never reread from the mapping.

use crate::sync::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::alloc::{self, Layout};
use std::cell::{Cell, OnceCell};
use std::ptr::NonNull;

use crate::error::{Error, Result};
use crate::layout::{check_capacity, RingHeader, WaitCell, MODE_SPIN};
use crate::wait;

/// Size of a frame header word.
pub(crate) const FRAME_HEADER: usize = 8;
/// How far into a lap the producer of a ring of at least four times this size goes before it
/// tries to rewind to the start of the region (see `Producer::maybe_rewind`).
pub(crate) const REWIND_AT: u64 = 128 * 1024;
/// Every frame starts on a cache-line boundary, so two frames never share a line: a consumer
/// polling the next header never pulls the line the producer is filling, and a message of up to
/// 56 bytes moves exactly one line.
pub(crate) const FRAME_ALIGN: usize = 64;

/// Frame kinds stored in bits 32..35 of the header word. Zero is never a valid header.
pub(crate) mod kind {
    /// A whole message.
    pub const DATA: u8 = 1;
    /// Skip to offset 0 of the region.
    pub const PAD: u8 = 2;
    /// First fragment of a message too large for one frame; the payload starts with the total
    /// length as a little-endian `u64`.
    pub const FRAG_FIRST: u8 = 3;
    /// A middle fragment.
    pub const FRAG_MORE: u8 = 4;
    /// The last fragment.
    pub const FRAG_LAST: u8 = 5;
    /// The highest valid kind.
    pub const MAX: u8 = 5;
}

/// Ordering of the store that publishes a frame header word.
/// Release: pairs with [`OBSERVE`] in `Consumer::try_read`, so the payload written before it is
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

const TAG_SHIFT: u32 = 35;
const TAG_MASK: u64 = (1 << 29) - 1;
const KIND_SHIFT: u32 = 32;

#[inline]
fn tag_of(index: u64) -> u64 {
    (index >> 3) & TAG_MASK
}

#[inline]
pub(crate) fn encode(index: u64, kind: u8, len: u32) -> u64 {
    (tag_of(index) << TAG_SHIFT) | (u64::from(kind) << KIND_SHIFT) | u64::from(len)
}

#[inline]
fn decode(word: u64) -> (u64, u8, u32) {
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
    capacity / 2 - FRAME_ALIGN - FRAME_HEADER
}

/// Where a ring's memory lives. Both ends hold one; the memory must outlive both.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingPtrs {
    pub header: NonNull<RingHeader>,
    pub region: NonNull<u8>,
    pub capacity: usize,
    /// The wait mode the *other* end announced (`MODE_*`), read to decide whether it needs a
    /// wake-up call.
    pub peer_mode: NonNull<AtomicU32>,
}

impl RingPtrs {
    #[inline]
    fn header(&self) -> &RingHeader {
        // SAFETY: `RingPtrs` is only built (by `Owned::new` or the channel) over a live,
        // initialised `RingHeader` that outlives every end holding these pointers; all fields
        // are atomics, so shared references to them are sound even while the peer writes.
        unsafe { self.header.as_ref() }
    }

    #[inline]
    fn peer_mode(&self) -> u32 {
        // SAFETY: same allocation rules as `header`; the cell is an atomic.
        // Relaxed: the mode is written once before the peer marks itself present and never
        // changes; a stale MODE_UNKNOWN only makes us take the (safe) wake path.
        unsafe { self.peer_mode.as_ref() }.load(Ordering::Relaxed)
    }

    /// The header word at `offset`, which must be 8-aligned and below the capacity.
    #[cfg(not(loom))]
    #[inline]
    fn word(&self, offset: usize) -> &AtomicU64 {
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
    fn bytes(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset <= self.capacity);
        // SAFETY: `offset` is inside the region (or one past its end), which is one allocation.
        unsafe { self.region.as_ptr().add(offset) }
    }

    /// Under loom: the header word at `offset`, from the model's table.
    #[cfg(loom)]
    fn word(&self, offset: usize) -> &AtomicU64 {
        self.loom_region().word(offset)
    }

    /// Under loom: the payload byte at `offset`, in the model's byte buffer.
    #[cfg(loom)]
    fn bytes(&self, offset: usize) -> *mut u8 {
        self.loom_region().bytes(offset)
    }

    /// Under loom the region pointer of a heap ring points at a `LoomRegion`.
    #[cfg(loom)]
    fn loom_region(&self) -> &crate::sync::LoomRegion {
        // SAFETY: under loom only `ring::new` makes rings, and it points `region` at the
        // `LoomRegion` its storage keeps alive for as long as the ends.
        unsafe { self.region.cast::<crate::sync::LoomRegion>().as_ref() }
    }
}

/// Heap storage for an in-process ring.
#[cfg(not(loom))]
pub(crate) struct Owned {
    ptr: NonNull<u8>,
    layout: Layout,
}

/// Under loom, heap storage made of loom's atomics (see `crate::sync`).
#[cfg(loom)]
pub(crate) use crate::sync::LoomStorage as Owned;

// SAFETY: the allocation is plain memory accessed only through atomics and the frame protocol;
// it can be freed from any thread.
#[cfg(not(loom))]
unsafe impl Send for Owned {}
// SAFETY: `Owned` has no interior state of its own; shared access goes through the protocol.
#[cfg(not(loom))]
unsafe impl Sync for Owned {}

#[cfg(not(loom))]
impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, freed once (the last Arc).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Offset of the region inside an in-process allocation: the header rounded up to 128 bytes,
/// plus one 128-byte cell for the peer-mode words.
#[cfg(not(loom))]
const HEAP_REGION_OFFSET: usize = std::mem::size_of::<RingHeader>() + 128;

#[cfg(not(loom))]
impl Owned {
    /// A zeroed ring of `capacity` bytes whose ends both announce `MODE_SPIN`.
    pub(crate) fn new(capacity: usize) -> Result<Owned> {
        let layout = Layout::from_size_align(HEAP_REGION_OFFSET + capacity, 128)
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| Error::InvalidConfig("out of memory".into()))?;
        let owned = Owned { ptr, layout };
        // In one process both ends are told the other spins until one of them blocks (`Block`
        // is not offered for in-process rings), so no wake-ups are needed.
        let (_, mode_c, mode_p, _) = owned.parts();
        // SAFETY: the words are inside the allocation and suitably aligned (see `parts`).
        unsafe {
            mode_c.as_ref().store(MODE_SPIN, Ordering::Relaxed);
            mode_p.as_ref().store(MODE_SPIN, Ordering::Relaxed);
        }
        Ok(owned)
    }

    /// The ring header, the two peer-mode words (read by the producer, by the consumer) and the
    /// region.
    pub(crate) fn parts(
        &self,
    ) -> (
        NonNull<RingHeader>,
        NonNull<AtomicU32>,
        NonNull<AtomicU32>,
        NonNull<u8>,
    ) {
        // All-zero bytes are a valid `RingHeader` (atomics and padding) and a valid empty region.
        // SAFETY: every offset is inside the allocation: the header is at 0, the mode words right
        // after it (4-aligned since the header size is a multiple of 128), the region after those.
        unsafe {
            let modes = self.ptr.as_ptr().add(std::mem::size_of::<RingHeader>());
            (
                self.ptr.cast::<RingHeader>(),
                NonNull::new_unchecked(modes as *mut AtomicU32),
                NonNull::new_unchecked(modes.add(4) as *mut AtomicU32),
                NonNull::new_unchecked(self.ptr.as_ptr().add(HEAP_REGION_OFFSET)),
            )
        }
    }
}

/// Creates an in-process ring of `capacity` bytes (a power of two, at least 256).
///
/// This is the same protocol the shared channel uses, on heap memory; it is handy for moving
/// variable-length byte frames between threads.
///
/// ```
/// let (mut tx, mut rx) = shmlink::ring::new(1024)?;
/// tx.try_send(b"hello")?;
/// assert_eq!(&*rx.try_read()?, b"hello");
/// # Ok::<(), shmlink::Error>(())
/// ```
pub fn new(capacity: usize) -> Result<(Producer, Consumer)> {
    check_capacity(capacity)?;
    let owned = std::sync::Arc::new(Owned::new(capacity)?);
    let (header, mode_c, mode_p, region) = owned.parts();
    let base = RingPtrs {
        header,
        region,
        capacity,
        peer_mode: mode_c,
    };
    // SAFETY: the memory is kept alive by the `Arc` each end holds.
    let producer = unsafe { Producer::new(base, Some(owned.clone())) }?;
    let consumer_ptrs = RingPtrs {
        peer_mode: mode_p,
        ..base
    };
    // SAFETY: as above.
    let consumer = unsafe { Consumer::new(consumer_ptrs, Some(owned)) }?;
    Ok((producer, consumer))
}

/// The writing end of a ring.
pub struct Producer {
    ptrs: RingPtrs,
    mask: u64,
    /// Our index: bytes published so far. Never reread from shared memory.
    tail: u64,
    /// Last value of the consumer's index we read.
    cached_head: u64,
    /// Index from which the next rewind to the start of the region may be tried.
    next_rewind: u64,
    max_len: usize,
    _owned: Option<std::sync::Arc<Owned>>,
}

// SAFETY: the producer only holds pointers into memory that outlives it (kept alive by `_owned`
// or, in a channel, by the `Arc` of the mapping that the half holding this end owns); all
// cross-thread access goes through atomics.
unsafe impl Send for Producer {}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.ptrs.capacity)
            .field("tail", &self.tail)
            .field("cached_head", &self.cached_head)
            .finish()
    }
}

impl Producer {
    /// # Safety
    /// `ptrs` must describe a live, initialised ring that outlives the producer, and at most one
    /// producer may exist for it at a time.
    pub(crate) unsafe fn new(ptrs: RingPtrs, owned: Option<std::sync::Arc<Owned>>) -> Result<Self> {
        let capacity = ptrs.capacity;
        // Acquire: pairs with the Release stores of our predecessor (a fresh ring is all zero).
        let tail = ptrs.header().tail.load(Ordering::Acquire);
        let head = ptrs.header().head.load(RECLAIM);
        if tail % FRAME_ALIGN as u64 != 0
            || head % FRAME_ALIGN as u64 != 0
            || head > tail
            || tail - head > capacity as u64
        {
            return Err(Error::corrupt(format!(
                "ring indices out of range: head {head}, tail {tail}"
            )));
        }
        Ok(Producer {
            ptrs,
            mask: capacity as u64 - 1,
            tail,
            cached_head: head,
            next_rewind: if capacity >= 4 * REWIND_AT as usize {
                (tail & !(capacity as u64 - 1)) + REWIND_AT
            } else {
                u64::MAX
            },
            max_len: max_payload(capacity),
            _owned: owned,
        })
    }

    /// Bytes in the ring region.
    pub fn capacity(&self) -> usize {
        self.ptrs.capacity
    }

    /// Largest payload a single frame can carry.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Rereads the consumer's index. Fails if it moved backwards or past us.
    #[inline(never)]
    fn refresh_head(&mut self) -> Result<()> {
        let head = self.ptrs.header().head.load(RECLAIM);
        if head < self.cached_head || head > self.tail || head % FRAME_ALIGN as u64 != 0 {
            return Err(Error::corrupt(format!(
                "consumer index {head} outside [{}, {}]",
                self.cached_head, self.tail
            )));
        }
        self.cached_head = head;
        Ok(())
    }

    /// Where a frame of `len` bytes would start (after a PAD if it does not fit before the end
    /// of the region), if there is room for it and the next header word right now. Rereads the
    /// consumer's index only when the cached one says there is no room.
    /// `Ok(None)`: no room now; `Err`: the consumer's index is corrupt.
    #[inline]
    pub(crate) fn room_for(&mut self, len: usize) -> Result<Option<u64>> {
        let fs = frame_size(len) as u64;
        let cap = self.mask + 1;
        let pos = self.tail & self.mask;
        let mut start = if pos + fs <= cap {
            self.tail
        } else {
            self.tail + (cap - pos)
        };
        if self.tail >= self.next_rewind && start == self.tail {
            start = self.maybe_rewind(pos, fs)?;
        }
        let need_end = start + fs + FRAME_HEADER as u64;
        if need_end - self.cached_head > cap {
            self.refresh_head()?;
            if need_end - self.cached_head > cap {
                return Ok(None);
            }
        }
        Ok(Some(start))
    }

    /// Once per lap, past [`REWIND_AT`] bytes into it: if the consumer has read everything, start
    /// the next frame at the beginning of the region (after a PAD) instead of further on. A
    /// ring much larger than the caches then still works in the same few hundred kilobytes
    /// while it is lightly used, and those lines stay warm in both cores' caches.
    #[cold]
    fn maybe_rewind(&mut self, pos: u64, fs: u64) -> Result<u64> {
        let cap = self.mask + 1;
        if pos < fs + FRAME_HEADER as u64 {
            // The frame would not fit before our position; look again at a later one.
            return Ok(self.tail);
        }
        let lap_end = self.tail + (cap - pos);
        self.next_rewind = lap_end + REWIND_AT;
        self.refresh_head()?;
        Ok(if self.cached_head == self.tail {
            lap_end
        } else {
            self.tail
        })
    }

    /// True when a frame of `len` bytes fits right now.
    #[inline]
    pub(crate) fn has_room(&mut self, len: usize) -> Result<bool> {
        Ok(self.room_for(len)?.is_some())
    }

    /// Hands out the grant for a frame at `start`, as found by `room_for` with the same `len`
    /// (which must be at most `max_len`), writing the PAD first if the frame starts a new lap.
    #[inline]
    pub(crate) fn grant_at(&mut self, start: u64, len: usize, kind: u8) -> WriteGrant<'_> {
        if start != self.tail {
            self.pad_to(start);
        }
        let pos = (start & self.mask) as usize;
        // `room_for` placed the whole frame, header included, between `pos` and the end of the
        // region, so the payload starts inside it.
        let payload = self.ptrs.bytes(pos + FRAME_HEADER);
        WriteGrant {
            producer: self,
            payload,
            len,
            kind,
        }
    }

    /// The frame does not fit before the end: zero the first word of the region (our invariant
    /// moves there), then publish a PAD at our position.
    #[cold]
    fn pad_to(&mut self, start: u64) {
        self.ptrs.word(0).store(0, Ordering::Relaxed);
        let pos = (self.tail & self.mask) as usize;
        // PUBLISH (Release): pairs with OBSERVE in Consumer::next_frame; orders the zero above
        // before the PAD, so a consumer that follows the PAD finds 0 or a newer frame.
        self.ptrs
            .word(pos)
            .store(encode(self.tail, kind::PAD, 0), PUBLISH);
        self.tail = start;
        // Release: informational copy of our index, read by `Producer::new` of a successor.
        self.ptrs.header().tail.store(start, Ordering::Release);
    }

    /// Reserves room for a frame of `len` bytes and hands out the payload to write in place.
    ///
    /// Returns [`Error::Full`] when there is no room now and [`Error::TooLarge`] when `len` can
    /// never fit. Commit the grant with [`WriteGrant::commit`]; dropping it writes nothing.
    #[inline]
    pub fn try_reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.try_reserve_kind(len, kind::DATA)
    }

    #[inline]
    pub(crate) fn try_reserve_kind(&mut self, len: usize, kind: u8) -> Result<WriteGrant<'_>> {
        if len > self.max_len {
            return Err(Error::TooLarge {
                len,
                max: self.max_len,
            });
        }
        match self.room_for(len)? {
            Some(start) => Ok(self.grant_at(start, len, kind)),
            None => Err(Error::Full),
        }
    }

    /// Copies `data` into one frame. [`Error::Full`] when there is no room now.
    #[inline]
    pub fn try_send(&mut self, data: &[u8]) -> Result<()> {
        let mut grant = self.try_reserve(data.len())?;
        grant.copy_from_slice(data);
        grant.commit(data.len());
        Ok(())
    }

    #[inline]
    fn publish(&mut self, used: usize, kind: u8) {
        let fs = frame_size(used) as u64;
        let pos = (self.tail & self.mask) as usize;
        let next = self.tail + fs;
        // Keep the invariant: the word at our next position is zero before anyone can get there.
        self.ptrs
            .word((next & self.mask) as usize)
            .store(0, Ordering::Relaxed);
        // PUBLISH (Release): pairs with OBSERVE in Consumer::try_read; the payload and the zero
        // above become visible with this word.
        self.ptrs
            .word(pos)
            .store(encode(self.tail, kind, used as u32), PUBLISH);
        self.tail = next;
        // Release: informational copy of our index (see `try_reserve_kind`).
        self.ptrs.header().tail.store(next, Ordering::Release);
        self.notify_consumer();
        self.zero_ahead(next, fs);
    }

    /// Zeroes the header word where the frame after next would need its zero if it has the same
    /// size as this one (a ping-pong, a stream of equal records). The store that keeps the
    /// invariant at the next commit then hits a cache line this core already owns, instead of
    /// waiting for it on the publishing path. Any word in free space past our position may hold
    /// zero, so a wrong guess costs nothing but the store; words the consumer has not released
    /// are never touched.
    #[inline]
    fn zero_ahead(&self, next: u64, fs: u64) {
        let ahead = next + fs;
        let cap = self.mask + 1;
        let same_lap = (next & self.mask) + fs < cap;
        if same_lap && ahead + FRAME_HEADER as u64 - self.cached_head <= cap {
            self.ptrs
                .word((ahead & self.mask) as usize)
                .store(0, Ordering::Relaxed);
        }
    }

    /// Wakes the consumer if it may be asleep.
    #[inline]
    fn notify_consumer(&self) {
        if self.ptrs.peer_mode() != MODE_SPIN {
            wait::wake_if_sleeping(&self.ptrs.header().data_wait);
        }
    }

    /// The wait cell the producer sleeps on when the ring is full.
    pub(crate) fn space_cell(&self) -> &WaitCell {
        &self.ptrs.header().space_wait
    }

    /// The wait cell the consumer sleeps on (used to wake it on close).
    pub(crate) fn data_cell(&self) -> &WaitCell {
        &self.ptrs.header().data_wait
    }
}

/// Room for one frame, written in place. Derefs to the payload bytes.
///
/// Call [`commit`](WriteGrant::commit) to publish; dropping the grant publishes nothing.
#[must_use = "a grant that is dropped without commit() sends nothing"]
pub struct WriteGrant<'a> {
    producer: &'a mut Producer,
    /// Start of the payload in the region.
    payload: *mut u8,
    len: usize,
    kind: u8,
}

impl WriteGrant<'_> {
    /// Publishes the first `used` bytes of the grant as one frame. `used` is clamped to the
    /// granted length.
    #[inline]
    pub fn commit(self, used: usize) {
        let used = used.min(self.len);
        self.producer.publish(used, self.kind);
    }

    /// Length of the grant.
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }
}

impl std::ops::Deref for WriteGrant<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: the payload bytes [pos + 8, pos + 8 + len) are inside the region (see
        // `grant_at`) and belong to the producer alone until the frame is published: the
        // consumer stops at the zero header word at `pos`.
        unsafe { std::slice::from_raw_parts(self.payload, self.len) }
    }
}

impl std::ops::DerefMut for WriteGrant<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // Under loom: the consumer must be done with these bytes (RELEASE_SPACE / RECLAIM).
        #[cfg(loom)]
        self.producer
            .ptrs
            .loom_region()
            .track_write(self.payload, self.len);
        // SAFETY: as in `deref`; we hold the only `&mut Producer`, so no other slice exists.
        unsafe { std::slice::from_raw_parts_mut(self.payload, self.len) }
    }
}

/// The reading end of a ring.
pub struct Consumer {
    ptrs: RingPtrs,
    mask: u64,
    /// Our index: bytes released so far. Never reread from shared memory.
    head: u64,
    max_len: usize,
    /// Private copies of frames for [`ReadGuard::json`]: lent to one guard at a time and given
    /// back when it drops, so decoding allocates only when a frame is larger than any before.
    spare: Cell<Vec<u8>>,
    _owned: Option<std::sync::Arc<Owned>>,
}

// SAFETY: as for `Producer`; `spare` is plain owned memory.
unsafe impl Send for Consumer {}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.ptrs.capacity)
            .field("head", &self.head)
            .finish()
    }
}

impl Consumer {
    /// # Safety
    /// As for [`Producer::new`], with at most one consumer at a time.
    pub(crate) unsafe fn new(ptrs: RingPtrs, owned: Option<std::sync::Arc<Owned>>) -> Result<Self> {
        // Acquire: pairs with the Release store of our predecessor's index.
        let head = ptrs.header().head.load(Ordering::Acquire);
        // Acquire: pairs with the producer's Release store of its informational index.
        let tail = ptrs.header().tail.load(Ordering::Acquire);
        if head % FRAME_ALIGN as u64 != 0
            || tail % FRAME_ALIGN as u64 != 0
            || head > tail
            || tail - head > ptrs.capacity as u64
        {
            return Err(Error::corrupt(format!(
                "ring indices out of range: head {head}, tail {tail}"
            )));
        }
        Ok(Consumer {
            mask: ptrs.capacity as u64 - 1,
            max_len: max_payload(ptrs.capacity),
            ptrs,
            head,
            spare: Cell::new(Vec::new()),
            _owned: owned,
        })
    }

    /// Bytes in the ring region.
    pub fn capacity(&self) -> usize {
        self.ptrs.capacity
    }

    /// True when a frame (or a PAD) is waiting: one relaxed load, for spinning on.
    #[inline]
    pub fn has_data(&self) -> bool {
        // Relaxed: only a hint; `try_read` loads the same word again with OBSERVE.
        self.ptrs
            .word((self.head & self.mask) as usize)
            .load(Ordering::Relaxed)
            != 0
    }

    /// Takes the next frame, if one is there: [`Error::Empty`] when none is, and
    /// [`Error::Corrupt`] when the shared memory holds something that is not a valid frame.
    #[inline]
    pub fn try_read(&mut self) -> Result<ReadGuard<'_>> {
        let frame = self.next_frame()?;
        Ok(self.guard(frame))
    }

    /// Wraps a frame found by `next_frame` in a guard that releases it on drop.
    #[inline]
    pub(crate) fn guard(&mut self, frame: Frame) -> ReadGuard<'_> {
        ReadGuard {
            src: Source::Frame {
                consumer: self,
                offset: frame.offset,
                len: frame.len,
                kind: frame.kind,
                size: frame.size,
            },
            copy: OnceCell::new(),
        }
    }

    /// Validates the frame at our position, skipping at most one PAD.
    #[inline]
    pub(crate) fn next_frame(&mut self) -> Result<Frame> {
        let cap = self.mask + 1;
        let mut skipped = false;
        loop {
            let pos = (self.head & self.mask) as usize;
            // OBSERVE (Acquire): pairs with PUBLISH in Producer::publish / try_reserve_kind.
            let word = self.ptrs.word(pos).load(OBSERVE);
            if word == 0 {
                return Err(Error::Empty);
            }
            let (tag, kind, len) = decode(word);
            if tag != tag_of(self.head) {
                return Err(Error::corrupt(format!(
                    "frame header {word:#018x} at offset {pos} carries a tag for another position"
                )));
            }
            match kind {
                kind::PAD => {
                    if pos == 0 || skipped {
                        return Err(Error::corrupt(format!(
                            "padding marker at offset {pos} does not end a lap"
                        )));
                    }
                    skipped = true;
                    self.head += cap - pos as u64;
                    self.store_head();
                }
                kind::DATA..=kind::MAX => {
                    let len = len as usize;
                    let size = frame_size(len) as u64;
                    if len > self.max_len || pos as u64 + size > cap {
                        return Err(Error::corrupt(format!(
                            "frame of {len} bytes at offset {pos} runs past the region"
                        )));
                    }
                    return Ok(Frame {
                        offset: pos + FRAME_HEADER,
                        len,
                        kind,
                        size,
                    });
                }
                _ => {
                    return Err(Error::corrupt(format!(
                        "unknown frame kind {kind} at offset {pos}"
                    )))
                }
            }
        }
    }

    #[inline]
    fn store_head(&self) {
        // RELEASE_SPACE (Release): pairs with RECLAIM in Producer::refresh_head; our reads of the
        // frame happen before the producer may overwrite it.
        self.ptrs.header().head.store(self.head, RELEASE_SPACE);
        if self.ptrs.peer_mode() != MODE_SPIN {
            wait::wake_if_sleeping(&self.ptrs.header().space_wait);
        }
    }

    /// The wait cell the consumer sleeps on when the ring is empty.
    pub(crate) fn data_cell(&self) -> &WaitCell {
        &self.ptrs.header().data_wait
    }

    /// The wait cell the producer sleeps on (used to wake it on close).
    pub(crate) fn space_cell(&self) -> &WaitCell {
        &self.ptrs.header().space_wait
    }
}

/// A validated frame at the consumer's position, not yet handed out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    offset: usize,
    len: usize,
    kind: u8,
    size: u64,
}

impl Frame {
    /// The frame kind.
    #[inline]
    pub(crate) fn kind(&self) -> u8 {
        self.kind
    }

    /// Bytes of the ring the frame occupies, header included.
    #[inline]
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
}

/// One received message. Derefs to the payload bytes.
///
/// For a message that fit in one frame the bytes are read in place in the ring, and the space is
/// released when the guard drops. A message that arrived in fragments (larger than one frame) is
/// reassembled into the channel's buffer, which the guard borrows.
pub struct ReadGuard<'a> {
    src: Source<'a>,
    /// A private copy of a frame's bytes, made by the first [`json`](ReadGuard::json) call:
    /// what is decoded must be memory the peer cannot write.
    copy: OnceCell<Vec<u8>>,
}

enum Source<'a> {
    Frame {
        consumer: &'a mut Consumer,
        offset: usize,
        len: usize,
        kind: u8,
        size: u64,
    },
    Assembled(&'a [u8]),
}

impl<'a> ReadGuard<'a> {
    /// A guard over bytes reassembled outside the ring.
    pub(crate) fn assembled(bytes: &'a [u8]) -> Self {
        ReadGuard {
            src: Source::Assembled(bytes),
            copy: OnceCell::new(),
        }
    }

    /// True when the bytes were reassembled from fragments outside the ring.
    #[inline]
    pub(crate) fn is_assembled(&self) -> bool {
        matches!(self.src, Source::Assembled(_))
    }

    /// The frame kind; `DATA` for reassembled messages.
    #[inline]
    pub(crate) fn kind(&self) -> u8 {
        match self.src {
            Source::Frame { kind, .. } => kind,
            Source::Assembled(_) => kind::DATA,
        }
    }

    /// Decodes the payload as JSON. The value may borrow `&str` and `&[u8]` fields, which stay
    /// valid until the guard drops.
    ///
    /// A frame read in place lives in memory the peer can write, so the first call copies it
    /// into a buffer the receiving end owns (and reuses: no allocation per message once it is
    /// large enough), checks that copy to be UTF-8 once, up front (JSON text always is), and
    /// decodes that same copy. A peer that rewrites the frame meanwhile can change the value
    /// decoded, never make a borrowed `&str` invalid. A reassembled message is already private
    /// and is decoded where it is.
    #[inline]
    pub fn json<'de, T: serde::Deserialize<'de>>(&'de self) -> Result<T> {
        let text = std::str::from_utf8(self.private_bytes())
            .map_err(<serde_json::Error as serde::de::Error>::custom)?;
        Ok(serde_json::from_str(text)?)
    }

    /// The payload in memory only this process writes: a copy of a frame read in place (made
    /// once per guard), or the reassembled message.
    fn private_bytes(&self) -> &[u8] {
        match &self.src {
            Source::Frame { consumer, .. } => self.copy.get_or_init(|| {
                let mut buf = consumer.spare.take();
                buf.clear();
                // The one read of the shared bytes; everything after it looks at `buf`.
                buf.extend_from_slice(self);
                buf
            }),
            Source::Assembled(bytes) => bytes,
        }
    }
}

impl std::ops::Deref for ReadGuard<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.src {
            Source::Frame {
                consumer,
                offset,
                len,
                ..
            } => {
                // Under loom: the producer's writes must be visible (PUBLISH / OBSERVE).
                #[cfg(loom)]
                consumer.ptrs.loom_region().track_read(*offset, *len);
                // SAFETY: `next_frame` checked that [offset, offset + len) lies inside the
                // region; the producer does not write there until we release it in `drop`. (A
                // hostile producer process can still change these bytes under us; they are
                // plain bytes, any value is valid.)
                unsafe { std::slice::from_raw_parts(consumer.ptrs.bytes(*offset), *len) }
            }
            Source::Assembled(bytes) => bytes,
        }
    }
}

impl Drop for ReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Source::Frame { consumer, size, .. } = &mut self.src {
            consumer.head += *size;
            consumer.store_head();
            if let Some(buf) = self.copy.take() {
                consumer.spare.set(buf);
            }
        }
    }
}

impl std::fmt::Debug for ReadGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadGuard")
            .field("len", &self.len())
            .finish()
    }
}

/// The protocol's SeqCst fence, for the services that announce and wake sleepers on the same
/// cells as `wait` (see the handshake in `wait.rs`).
#[inline]
pub(crate) fn full_fence() {
    crate::sync::fence(Ordering::SeqCst);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn pattern(seed: usize, len: usize) -> Vec<u8> {
        (0..len).map(|i| (seed * 31 + i * 7) as u8).collect()
    }

    /// A ring whose positions have been advanced by `offset` bytes (a multiple of 8).
    fn ring_at(capacity: usize, offset: usize) -> (Producer, Consumer) {
        let (mut tx, mut rx) = new(capacity).unwrap();
        for _ in 0..offset / FRAME_ALIGN {
            tx.try_send(&[]).unwrap();
            drop(rx.try_read().unwrap());
        }
        (tx, rx)
    }

    #[test]
    fn fill_and_drain_in_order() {
        let (mut tx, mut rx) = new(4096).unwrap();
        for round in 0..5 {
            let mut sent = 0;
            loop {
                match tx.try_send(&pattern(round * 1000 + sent, 100)) {
                    Ok(()) => sent += 1,
                    Err(Error::Full) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            // 4096 bytes, 128-byte frames, 8 bytes kept for the next header word.
            assert_eq!(sent, 4096 / frame_size(100) - 1, "frames that fit");
            for i in 0..sent {
                let frame = rx.try_read().unwrap();
                assert_eq!(&*frame, &pattern(round * 1000 + i, 100)[..]);
            }
            assert!(matches!(rx.try_read(), Err(Error::Empty)));
        }
    }

    #[test]
    fn every_length_at_every_wrap_offset() {
        for capacity in [256usize, 512] {
            let max = max_payload(capacity);
            for offset in (0..capacity).step_by(FRAME_ALIGN) {
                for len in 0..=max {
                    let (mut tx, mut rx) = ring_at(capacity, offset);
                    let data = pattern(offset + len, len);
                    tx.try_send(&data).unwrap();
                    // A second frame right behind it, so the next-position bookkeeping is used.
                    tx.try_send(b"next").unwrap();
                    assert_eq!(
                        &*rx.try_read().unwrap(),
                        &data[..],
                        "offset {offset} len {len}"
                    );
                    assert_eq!(&*rx.try_read().unwrap(), b"next");
                    assert!(matches!(rx.try_read(), Err(Error::Empty)));
                }
            }
        }
    }

    #[test]
    fn full_is_not_never_fits() {
        let (mut tx, mut rx) = new(1024).unwrap();
        let max = tx.max_len();
        assert_eq!(max, 1024 / 2 - 72);
        assert!(matches!(
            tx.try_reserve(max + 1),
            Err(Error::TooLarge { len, max: m }) if len == max + 1 && m == max
        ));
        tx.try_send(&vec![1; max]).unwrap();
        tx.try_send(&vec![2; max]).unwrap();
        assert!(matches!(tx.try_reserve(max), Err(Error::Full)));
        assert!(matches!(tx.try_reserve(200), Err(Error::Full)));
        // Never-fits stays never-fits when full, too.
        assert!(matches!(
            tx.try_reserve(max + 1),
            Err(Error::TooLarge { .. })
        ));
        assert_eq!(&*rx.try_read().unwrap(), &vec![1; max][..]);
        assert_eq!(&*rx.try_read().unwrap(), &vec![2; max][..]);
        // After a full drain a maximal frame always fits, wherever the ring stands.
        tx.try_send(&vec![3; max]).unwrap();
        assert_eq!(&*rx.try_read().unwrap(), &vec![3; max][..]);
    }

    fn fill(tx: &mut Producer, len: usize) {
        loop {
            match tx.try_send(&vec![0; len]) {
                Ok(()) => {}
                Err(Error::Full) => return,
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn dropping_a_grant_aborts_it() {
        let (mut tx, mut rx) = new(256).unwrap();
        {
            let mut grant = tx.try_reserve(40).unwrap();
            grant.fill(0xAB);
        }
        assert!(matches!(rx.try_read(), Err(Error::Empty)));
        let mut grant = tx.try_reserve(40).unwrap();
        grant[..3].copy_from_slice(b"abc");
        grant.commit(3);
        assert_eq!(&*rx.try_read().unwrap(), b"abc");
        // Aborting a grant that needed a wrap leaves a consistent ring too.
        let (mut tx, mut rx) = new(1024).unwrap();
        for _ in 0..20 {
            drop(tx.try_reserve(300).unwrap());
            tx.try_send(&[9; 100]).unwrap();
            assert_eq!(&*rx.try_read().unwrap(), &[9; 100]);
        }
    }

    #[test]
    fn a_lightly_used_large_ring_rewinds_and_a_busy_one_does_not() {
        let capacity = 1 << 20;
        // Empty at every send: the producer comes back to the start of the region each lap.
        let (mut tx, mut rx) = new(capacity).unwrap();
        let mut furthest = 0;
        for i in 0..20_000 {
            let data = pattern(i, 1000);
            tx.try_send(&data).unwrap();
            furthest = furthest.max(tx.tail & tx.mask);
            assert_eq!(&*rx.try_read().unwrap(), &data[..]);
        }
        assert!(
            tx.tail > 16 * capacity as u64,
            "the traffic went around many laps"
        );
        assert!(
            furthest < REWIND_AT + 2 * frame_size(1000) as u64,
            "furthest position {furthest}"
        );
        // Eight frames in flight: never empty when the producer looks, so it uses the whole ring.
        let (mut tx, mut rx) = new(capacity).unwrap();
        let mut furthest = 0;
        for i in 0..20_000 {
            tx.try_send(&pattern(i, 1000)).unwrap();
            furthest = furthest.max(tx.tail & tx.mask);
            if i >= 8 {
                assert_eq!(&*rx.try_read().unwrap(), &pattern(i - 8, 1000)[..]);
            }
        }
        assert!(
            furthest > capacity as u64 / 2,
            "furthest position {furthest}"
        );
    }

    #[test]
    fn commit_clamps_to_the_grant() {
        let (mut tx, mut rx) = new(256).unwrap();
        let grant = tx.try_reserve(4).unwrap();
        grant.commit(1000);
        assert_eq!(rx.try_read().unwrap().len(), 4);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Send(usize),
        Read,
        Reserve(usize, usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..200).prop_map(Op::Send),
            Just(Op::Read),
            (0usize..200, 0usize..250).prop_map(|(l, u)| Op::Reserve(l, u)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 8 } else { 256 }))]
        #[test]
        fn matches_a_vecdeque_model(ops in proptest::collection::vec(op(), 1..400)) {
            let (mut tx, mut rx) = new(512).unwrap();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            let mut seed = 0usize;
            for op in ops {
                match op {
                    Op::Send(len) | Op::Reserve(len, _) if len > tx.max_len() => {
                        let too_large = matches!(tx.try_reserve(len), Err(Error::TooLarge { .. }));
                        prop_assert!(too_large);
                    }
                    Op::Send(len) => {
                        seed += 1;
                        let data = pattern(seed, len);
                        match tx.try_send(&data) {
                            Ok(()) => model.push_back(data),
                            Err(Error::Full) => prop_assert!(!model.is_empty(), "full while empty"),
                            Err(e) => prop_assert!(false, "unexpected {e}"),
                        }
                    }
                    Op::Reserve(len, used) => {
                        seed += 1;
                        match tx.try_reserve(len) {
                            Ok(mut grant) => {
                                let data = pattern(seed, len);
                                grant.copy_from_slice(&data);
                                let used = used.min(len);
                                grant.commit(used);
                                model.push_back(data[..used].to_vec());
                            }
                            Err(Error::Full) => prop_assert!(!model.is_empty(), "full while empty"),
                            Err(e) => prop_assert!(false, "unexpected {e}"),
                        }
                    }
                    Op::Read => match rx.try_read() {
                        Ok(frame) => {
                            let expected = model.pop_front();
                            prop_assert_eq!(Some(&frame[..]), expected.as_deref());
                        }
                        Err(Error::Empty) => prop_assert!(model.is_empty()),
                        Err(e) => prop_assert!(false, "unexpected {e}"),
                    },
                }
            }
            while let Some(expected) = model.pop_front() {
                let frame = rx.try_read().unwrap();
                prop_assert_eq!(&frame[..], &expected[..]);
            }
            prop_assert!(matches!(rx.try_read(), Err(Error::Empty)));
        }
    }

    fn corrupt_head_word(rx: &Consumer, word: u64) {
        rx.ptrs
            .word((rx.head & rx.mask) as usize)
            .store(word, Ordering::Relaxed);
    }

    #[test]
    fn hostile_frame_headers_are_corrupt_errors() {
        type Forge = Box<dyn Fn(u64) -> u64>;
        let cases: Vec<(&str, Forge)> = vec![
            ("wrong tag", Box::new(|idx| encode(idx + 64, kind::DATA, 4))),
            ("unknown kind", Box::new(|idx| encode(idx, 7, 4))),
            ("kind zero", Box::new(|idx| encode(idx, 0, 4))),
            (
                "length past max",
                Box::new(|idx| encode(idx, kind::DATA, 1000)),
            ),
            (
                "length u32::MAX",
                Box::new(|idx| encode(idx, kind::DATA, u32::MAX)),
            ),
        ];
        for (what, word) in cases {
            for offset in [0usize, 64, 128, 192] {
                let (_tx, mut rx) = ring_at(256, offset);
                corrupt_head_word(&rx, word(rx.head));
                for _ in 0..3 {
                    assert!(
                        matches!(rx.try_read(), Err(Error::Corrupt(_))),
                        "{what} at {offset} accepted"
                    );
                }
            }
        }
        // A frame that fits by length but would run past the end of the region.
        let (_tx, mut rx) = ring_at(1024, 960);
        corrupt_head_word(&rx, encode(rx.head, kind::DATA, 200));
        assert!(matches!(rx.try_read(), Err(Error::Corrupt(_))));
        // A PAD at offset 0 would skip a whole lap.
        let (_tx, mut rx) = ring_at(256, 0);
        corrupt_head_word(&rx, encode(rx.head, kind::PAD, 0));
        assert!(matches!(rx.try_read(), Err(Error::Corrupt(_))));
    }

    #[test]
    fn hostile_consumer_index_is_a_corrupt_error() {
        // Jumps past the producer.
        let (mut tx, rx) = new(256).unwrap();
        fill(&mut tx, 40);
        rx.ptrs.header().head.store(10_048, Ordering::Relaxed);
        assert!(matches!(tx.try_send(&[0; 40]), Err(Error::Corrupt(_))));
        // Moves backwards.
        let (mut tx, mut rx) = new(256).unwrap();
        for _ in 0..3 {
            tx.try_send(&[0; 40]).unwrap();
            drop(rx.try_read().unwrap());
        }
        fill(&mut tx, 40);
        rx.ptrs.header().head.store(64, Ordering::Relaxed);
        assert!(matches!(tx.try_send(&[0; 40]), Err(Error::Corrupt(_))));
        // Misaligned.
        let (mut tx, rx) = new(256).unwrap();
        fill(&mut tx, 40);
        rx.ptrs.header().head.store(8, Ordering::Relaxed);
        assert!(matches!(tx.try_send(&[0; 40]), Err(Error::Corrupt(_))));
    }

    #[test]
    fn threads_move_a_million_frames() {
        let n: u32 = if cfg!(miri) { 200 } else { 1_000_000 };
        let (mut tx, mut rx) = new(4096).unwrap();
        let t = std::thread::spawn(move || {
            for i in 0..n {
                let len = (i % 61) as usize;
                loop {
                    match tx.try_reserve(len + 4) {
                        Ok(mut g) => {
                            g[..4].copy_from_slice(&i.to_le_bytes());
                            g[4..].fill(i as u8);
                            g.commit(len + 4);
                            break;
                        }
                        Err(Error::Full) => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        });
        let mut i = 0u32;
        while i < n {
            match rx.try_read() {
                Ok(frame) => {
                    assert_eq!(frame.len(), (i % 61) as usize + 4);
                    assert_eq!(u32::from_le_bytes(frame[..4].try_into().unwrap()), i);
                    assert!(frame[4..].iter().all(|&b| b == i as u8));
                    i += 1;
                }
                Err(Error::Empty) => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        t.join().unwrap();
    }
}
