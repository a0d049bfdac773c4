//! A ring on the heap, for threads of one process.

#[cfg(not(loom))]
use std::alloc::{self, Layout};
#[cfg(not(loom))]
use std::ptr::NonNull;

use crate::error::{ChannelName, OpenError};
use crate::shm::layout::check_capacity;
#[cfg(not(loom))]
use crate::shm::layout::{RingHeader, MODE_SPIN};
#[cfg(not(loom))]
use crate::sync::{AtomicU32, Ordering};

use super::*;

/// The name a ring between threads goes by in its errors.
const RING_NAME: &str = "ring";

/// Heap storage for an in-process ring.
#[cfg(not(loom))]
pub(crate) struct Owned {
    pub(super) ptr: NonNull<u8>,
    pub(super) layout: Layout,
}

/// Under loom, heap storage made of loom's atomics (see `loom.rs`).
#[cfg(loom)]
pub(crate) use super::loom::LoomStorage as Owned;

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
/// one 128-byte cell for the peer-mode words, then one for each end's counters.
#[cfg(not(loom))]
const HEAP_REGION_OFFSET: usize = std::mem::size_of::<RingHeader>() + 3 * 128;

#[cfg(not(loom))]
impl Owned {
    /// A zeroed ring of `capacity` bytes whose ends both announce `MODE_SPIN`.
    pub(crate) fn new(capacity: usize) -> Result<Owned, OpenError> {
        let layout = Layout::from_size_align(HEAP_REGION_OFFSET + capacity, 128).map_err(|e| {
            OpenError::InvalidConfig {
                channel: RING_NAME.into(),
                what: e.to_string(),
            }
        })?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(|| {
            OpenError::Io(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("cannot allocate a ring of {capacity} bytes"),
            ))
        })?;
        let owned = Owned { ptr, layout };
        // In one process both ends are told the other spins until one of them blocks (`Block`
        // is not offered for in-process rings), so no wake-ups are needed.
        let parts = owned.parts();
        // SAFETY: the words are inside the allocation and suitably aligned (see `parts`).
        unsafe {
            parts
                .consumer_mode
                .as_ref()
                .store(MODE_SPIN, Ordering::Relaxed);
            parts
                .producer_mode
                .as_ref()
                .store(MODE_SPIN, Ordering::Relaxed);
        }
        Ok(owned)
    }

    /// Where the ring header, the two mode words and the region are in the allocation.
    pub(crate) fn parts(&self) -> RingParts {
        // All-zero bytes are a valid `RingHeader` (atomics and padding), valid `Counters` and a
        // valid empty region.
        // SAFETY: every offset is inside the allocation: the header is at 0, the mode words right
        // after it (4-aligned since the header size is a multiple of 128), the two counters in
        // the 128-byte cells after those (128-aligned), the region after them.
        unsafe {
            let modes = self.ptr.as_ptr().add(std::mem::size_of::<RingHeader>());
            let counters = |i: usize| NonNull::new_unchecked(modes.add(128 * (i + 1)).cast());
            RingParts {
                header: self.ptr.cast::<RingHeader>(),
                consumer_mode: NonNull::new_unchecked(modes as *mut AtomicU32),
                producer_mode: NonNull::new_unchecked(modes.add(4) as *mut AtomicU32),
                region: NonNull::new_unchecked(self.ptr.as_ptr().add(HEAP_REGION_OFFSET)),
                counters: [counters(0), counters(1)],
            }
        }
    }
}

/// Creates an in-process ring of `capacity` bytes (a power of two from 256 B to 2 GiB).
///
/// This is the same protocol the shared channel uses, on heap memory; it is handy for moving
/// variable-length byte frames between threads. It fails only for a capacity out of range
/// ([`OpenError::InvalidConfig`]) or when the memory cannot be had ([`OpenError::Io`] of kind
/// [`OutOfMemory`](std::io::ErrorKind::OutOfMemory)). Errors of the ring name its channel
/// `"ring"`.
///
/// ```
/// let (mut tx, mut rx) = shmlink::ring::new(1024)?;
/// tx.try_send(b"hello")?;
/// assert_eq!(&*rx.try_read()?, b"hello");
/// # Ok::<(), shmlink::Error>(())
/// ```
pub fn new(capacity: usize) -> Result<(Producer, Consumer), OpenError> {
    check_capacity(RING_NAME, capacity)?;
    let owned = std::sync::Arc::new(Owned::new(capacity)?);
    let (producer_ptrs, consumer_ptrs) = owned.parts().ends(capacity);
    let name = ChannelName::from(RING_NAME);
    // SAFETY: the memory is kept alive by the `Arc` each end holds; it is fresh and zeroed, so
    // the indices the ends read are valid.
    let producer = unsafe { Producer::new(producer_ptrs, Some(owned.clone()), name.clone()) }?;
    // SAFETY: as above.
    let consumer = unsafe { Consumer::new(consumer_ptrs, Some(owned), name) }?;
    Ok((producer, consumer))
}
