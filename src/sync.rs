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
/// take the path of an unwatched peer and look at it after each sleep (the models' peers never
/// die).
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
        _alarm: Option<std::sync::Arc<crate::sys::Alarm>>,
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
