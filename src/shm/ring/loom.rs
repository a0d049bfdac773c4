//! Heap rings for the loom models (built only under `--cfg loom`): the ring header and the
//! header words as loom atomics, and every 8 bytes of payload (the unit frames are laid out in,
//! so two frames never share one) guarded by a loom cell, so
//! loom checks that the producer's writes of a payload happen before the consumer's reads of it
//! and those before the next lap's writes.

use std::ptr::NonNull;

use super::RingParts;
use crate::error::OpenError;
use crate::shm::layout::counters::Counters;
use crate::shm::layout::{Padded, RingHeader, WaitCell, MODE_BLOCK};
use crate::sync::{AtomicU32, AtomicU64};

thread_local! {
    static ANNOUNCE: std::cell::Cell<u32> = const { std::cell::Cell::new(MODE_BLOCK) };
}

/// The wait mode both ends of the heap rings this thread makes next announce: `MODE_BLOCK`
/// (the default) makes every publish and release take the wake-up path, with its SeqCst
/// fence; `MODE_SPIN` leaves only the ring's own orderings to check.
#[cfg(test)]
pub(crate) fn announce(mode: u32) {
    ANNOUNCE.with(|a| a.set(mode));
}

/// Everything a heap ring holds, under loom.
pub(crate) struct LoomStorage {
    header: Box<RingHeader>,
    modes: Box<[AtomicU32; 2]>,
    counters: Box<[Counters; 2]>,
    region: Box<LoomRegion>,
}

/// The region of a heap ring, under loom.
pub(crate) struct LoomRegion {
    words: Box<[AtomicU64]>,
    bytes: Box<[std::cell::UnsafeCell<u8>]>,
    units: Box<[::loom::cell::UnsafeCell<()>]>,
}

// SAFETY: the payload bytes are shared between one producer and one consumer by the frame
// protocol, which is what the models check (through `units`); everything else is atomics.
unsafe impl Send for LoomStorage {}
// SAFETY: as above.
unsafe impl Sync for LoomStorage {}

fn cell() -> WaitCell {
    WaitCell {
        futex: AtomicU32::new(0),
        sleepers: AtomicU32::new(0),
    }
}

impl LoomStorage {
    pub(crate) fn new(capacity: usize) -> Result<LoomStorage, OpenError> {
        Ok(LoomStorage {
            header: Box::new(RingHeader {
                tail: Padded(AtomicU64::new(0)),
                head: Padded(AtomicU64::new(0)),
                data_wait: Padded(cell()),
                space_wait: Padded(cell()),
            }),
            modes: Box::new([
                AtomicU32::new(ANNOUNCE.with(|a| a.get())),
                AtomicU32::new(ANNOUNCE.with(|a| a.get())),
            ]),
            counters: Box::default(),
            region: Box::new(LoomRegion {
                words: (0..capacity / 8).map(|_| AtomicU64::new(0)).collect(),
                bytes: (0..capacity)
                    .map(|_| std::cell::UnsafeCell::new(0))
                    .collect(),
                units: (0..capacity / 8)
                    .map(|_| ::loom::cell::UnsafeCell::new(()))
                    .collect(),
            }),
        })
    }

    /// As `Owned::parts`; the region is the `LoomRegion`.
    pub(crate) fn parts(&self) -> RingParts {
        RingParts {
            header: NonNull::from(&*self.header),
            consumer_mode: NonNull::from(&self.modes[0]),
            producer_mode: NonNull::from(&self.modes[1]),
            region: NonNull::from(&*self.region).cast(),
            counters: [
                NonNull::from(&self.counters[0]),
                NonNull::from(&self.counters[1]),
            ],
        }
    }
}

impl LoomRegion {
    pub(crate) fn word(&self, offset: usize) -> &AtomicU64 {
        &self.words[offset / 8]
    }

    pub(crate) fn bytes(&self, offset: usize) -> *mut u8 {
        self.bytes.as_ptr().wrapping_add(offset) as *mut u8
    }

    fn units(&self, offset: usize, len: usize) -> &[::loom::cell::UnsafeCell<()>] {
        if len == 0 {
            return &[];
        }
        &self.units[offset / 8..=(offset + len - 1) / 8]
    }

    /// The producer writes `len` payload bytes at `ptr`.
    pub(crate) fn track_write(&self, ptr: *mut u8, len: usize) {
        let offset = ptr as usize - self.bytes.as_ptr() as usize;
        for unit in self.units(offset, len) {
            unit.with_mut(|_| ());
        }
    }

    /// The consumer reads `len` payload bytes at `offset`.
    pub(crate) fn track_read(&self, offset: usize, len: usize) {
        for unit in self.units(offset, len) {
            unit.with(|_| ());
        }
    }
}
