//! The synchronisation primitives the ring and the wait code are written against.
//!
//! Normally these are the standard atomics and the platform's futex calls. Built with
//! `RUSTFLAGS="--cfg loom"`, they are loom's model-checked atomics and a futex stand-in that
//! parks the calling model thread until the word changes, so loom explores every interleaving of
//! the real `ring` and `wait` code (see the `loom_tests` module).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use std::time::Duration;

/// Sleeps while `*word == expected`, for at most `timeout` (`None`: until woken). May return
/// early for no reason; callers re-check their condition.
#[cfg(not(loom))]
#[inline]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    crate::platform::futex_wait(word, expected, timeout)
}

/// Wakes every thread sleeping on `word` (in any process that maps it).
#[cfg(not(loom))]
#[inline]
pub(crate) fn futex_wake(word: &AtomicU32) {
    crate::platform::futex_wake(word)
}

/// Under loom: returns once the word differs from `expected`. A timed wait returns at once (a
/// spurious wake-up, which callers tolerate), so the models only check untimed waits: a lost
/// wake-up then leaves the thread waiting forever, which loom reports as a deadlock.
#[cfg(loom)]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    if timeout.is_some() {
        return;
    }
    // Acquire: pairs with the Release increment of the waker, as the kernel's read does not
    // but the callers' own Acquire load of the word does; the stand-in only needs to notice the
    // change.
    while word.load(Ordering::Acquire) == expected {
        loom::thread::yield_now();
    }
}

/// Under loom the waiter polls the word, so there is no one to wake.
#[cfg(loom)]
pub(crate) fn futex_wake(_word: &AtomicU32) {}
