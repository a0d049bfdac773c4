//! The synchronisation primitives the ring and the wait code are written against.
//!
//! Normally these are the standard atomics, the futex calls and the death watcher of
//! `crate::sys`. Built with `RUSTFLAGS="--cfg loom"`, they are loom's model-checked atomics, a
//! futex stand-in that parks the calling model thread until the word changes, and a death
//! watcher that declines every registration, so loom explores every interleaving of the real
//! `ring` and `wait` code (see the `loom_tests` module).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;

#[cfg(loom)]
use std::time::Duration;

#[cfg(not(loom))]
pub(crate) use crate::sys::{futex_wait, futex_wake, wait_any, DeathWatch};

#[cfg(loom)]
use crate::sys::{FutexWaitv, WaitAny};

#[cfg(loom)]
thread_local! {
    /// Whether this model thread's timed sleeps end (see [`slices_end`]).
    static SLICES_END: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Under loom, makes the timed sleeps of the calling model thread end without a wake-up (after
/// one yield), as a slice or a deadline ends; by default they last until the word changes.
#[cfg(all(loom, test))]
pub(crate) fn slices_end(end: bool) {
    SLICES_END.with(|s| s.set(end));
}

/// Under loom: returns once the word differs from `expected`, whatever the timeout, unless the
/// thread asked for its timed sleeps to end ([`slices_end`]): a timed sleep that ended early
/// would hide a lost wake-up, so by default a lost wake-up leaves the thread polling forever,
/// which loom reports.
#[cfg(loom)]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    if timeout.is_some() && SLICES_END.with(|s| s.get()) {
        loom::thread::yield_now();
        return;
    }
    // Acquire: as the kernel's own read is not an ordering, the callers do not rely on this one
    // either; it only notices the change.
    while word.load(Ordering::Acquire) == expected {
        loom::thread::yield_now();
    }
}

/// Under loom: `futex_waitv` over words made by [`futex_waitv`] (loom atomics), as
/// [`futex_wait`] sleeps on one: returns the index of the first word that no longer holds its
/// value (or, for a timed sleep of a thread whose slices end, `Returned` after one yield).
#[cfg(loom)]
pub(crate) fn wait_any(words: &[FutexWaitv], timeout: Option<Duration>) -> WaitAny {
    if timeout.is_some() && SLICES_END.with(|s| s.get()) {
        loom::thread::yield_now();
        return WaitAny::Returned;
    }
    loop {
        for (k, w) in words.iter().enumerate() {
            // SAFETY: under loom every entry the handshake sleeps on is made by `futex_waitv`
            // below from a loom `AtomicU32` (its address stands in for its value's), which the
            // caller keeps alive across the wait.
            let word = unsafe { &*(w.addr() as *const AtomicU32) };
            // Acquire: as in `futex_wait`, only notices the change.
            if word.load(Ordering::Acquire) != w.expected() {
                return WaitAny::Woken(k);
            }
        }
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
