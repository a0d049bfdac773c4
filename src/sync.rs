//! The synchronisation primitives the ring and the wait code are written against.
//!
//! Normally these are the standard atomics, the futex calls and the death watcher of
//! `crate::sys`. Built with `RUSTFLAGS="--cfg loom"`, they are loom's model-checked atomics, a
//! futex stand-in that parks the calling model thread until the word changes, and a death
//! watcher that declines every registration, so loom explores every interleaving of the real
//! `ring` and `wait` code (see the `loom_tests` module).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
use std::time::Duration;

#[cfg(not(loom))]
pub(crate) use crate::sys::{futex_wait, futex_wake, DeathWatch};

/// Under loom: returns once the word differs from `expected`, whatever the timeout (the models
/// use no deadlines, and a timed sleep that ended early would hide a lost wake-up). A lost
/// wake-up leaves the thread polling forever, which loom reports.
#[cfg(loom)]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, _timeout: Option<Duration>) {
    // Acquire: as the kernel's own read is not an ordering, the callers do not rely on this one
    // either; it only notices the change.
    while word.load(Ordering::Acquire) == expected {
        loom::thread::yield_now();
    }
}

/// Under loom the waiter polls the word, so there is no one to wake.
#[cfg(loom)]
pub(crate) fn futex_wake(_word: &AtomicU32) {}

/// Under loom there is no death watcher: [`DeathWatch::register`] always declines, so waiters
/// sleep in slices and look at the peer after each (the models' peers never die).
#[cfg(loom)]
pub(crate) struct DeathWatch(());

#[cfg(loom)]
impl DeathWatch {
    /// Always `None` under loom.
    pub(crate) fn register(
        _pid: u32,
        _start_time: u64,
        _word: &AtomicU32,
        _holds_end: crate::sys::HoldsEnd,
    ) -> Option<DeathWatch> {
        None
    }

    /// Never true: there is no watcher.
    pub(crate) fn take_news(&self) -> bool {
        false
    }
}

/// A `futex_waitv` entry for a wait cell's word (loom's atomic in loom builds, where the wait is
/// never made: the address of the object stands in for the address of its value, which for the
/// standard atomic is the same).
pub(crate) fn futex_waitv(word: &AtomicU32, expected: u32) -> crate::sys::FutexWaitv {
    #[cfg(not(loom))]
    {
        crate::sys::FutexWaitv::new(word, expected)
    }
    #[cfg(loom)]
    {
        crate::sys::FutexWaitv::at(word as *const AtomicU32 as usize, expected)
    }
}

#[cfg(all(loom, test))]
pub(crate) use self::loom_storage::announce;
#[cfg(loom)]
pub(crate) use self::loom_storage::{LoomRegion, LoomStorage};

/// Heap rings for the models: the ring header and the header words as loom atomics, and every
/// 64-byte line of payload guarded by a loom cell, so loom checks that the producer's writes of a
/// payload happen before the consumer's reads of it and those before the next lap's writes.
#[cfg(loom)]
mod loom_storage {
    use std::ptr::NonNull;

    use super::{AtomicU32, AtomicU64};
    use crate::error::Result;
    use crate::layout::{Padded, RingHeader, WaitCell, MODE_BLOCK};

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
        region: Box<LoomRegion>,
    }

    /// The region of a heap ring, under loom.
    pub(crate) struct LoomRegion {
        words: Box<[AtomicU64]>,
        bytes: Box<[std::cell::UnsafeCell<u8>]>,
        lines: Box<[loom::cell::UnsafeCell<()>]>,
    }

    // SAFETY: the payload bytes are shared between one producer and one consumer by the frame
    // protocol, which is what the models check (through `lines`); everything else is atomics.
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
        pub(crate) fn new(capacity: usize) -> Result<LoomStorage> {
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
                region: Box::new(LoomRegion {
                    words: (0..capacity / 8).map(|_| AtomicU64::new(0)).collect(),
                    bytes: (0..capacity)
                        .map(|_| std::cell::UnsafeCell::new(0))
                        .collect(),
                    lines: (0..capacity / 64)
                        .map(|_| loom::cell::UnsafeCell::new(()))
                        .collect(),
                }),
            })
        }

        /// As `Owned::parts`: the header, the mode words and the region (a `LoomRegion`).
        pub(crate) fn parts(
            &self,
        ) -> (
            NonNull<RingHeader>,
            NonNull<AtomicU32>,
            NonNull<AtomicU32>,
            NonNull<u8>,
        ) {
            (
                NonNull::from(&*self.header),
                NonNull::from(&self.modes[0]),
                NonNull::from(&self.modes[1]),
                NonNull::from(&*self.region).cast(),
            )
        }
    }

    impl LoomRegion {
        pub(crate) fn word(&self, offset: usize) -> &AtomicU64 {
            &self.words[offset / 8]
        }

        pub(crate) fn bytes(&self, offset: usize) -> *mut u8 {
            self.bytes.as_ptr().wrapping_add(offset) as *mut u8
        }

        fn lines(&self, offset: usize, len: usize) -> &[loom::cell::UnsafeCell<()>] {
            if len == 0 {
                return &[];
            }
            &self.lines[offset / 64..=(offset + len - 1) / 64]
        }

        /// The producer writes `len` payload bytes at `ptr`.
        pub(crate) fn track_write(&self, ptr: *mut u8, len: usize) {
            let offset = ptr as usize - self.bytes.as_ptr() as usize;
            for line in self.lines(offset, len) {
                line.with_mut(|_| ());
            }
        }

        /// The consumer reads `len` payload bytes at `offset`.
        pub(crate) fn track_read(&self, offset: usize, len: usize) {
            for line in self.lines(offset, len) {
                line.with(|_| ());
            }
        }
    }
}
