//! Platforms without futexes or pidfds (and loom builds): timed sleeps, no death watcher.

use std::time::{Duration, Instant};

use super::HoldsEnd;
use crate::sync::{AtomicU32, Ordering};

/// How long one slice of a sleep without a futex lasts.
const SLICE: Duration = Duration::from_micros(50);

/// Sleeps in short slices while `*word == expected`, for at most `timeout`.
#[allow(dead_code)]
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let until = timeout.map(|t| Instant::now() + t);
    // Acquire: pairs with the waker's Release increment of the word.
    while word.load(Ordering::Acquire) == expected && until.is_none_or(|u| Instant::now() < u) {
        std::thread::sleep(SLICE);
    }
}

/// Nothing to do: sleepers look at the word after every slice.
#[allow(dead_code)]
pub(crate) fn futex_wake(_word: &AtomicU32) {}

/// No watcher here: [`DeathWatch::register`] always declines, and waiters fall back to timed
/// sleeps with periodic looks at the peer.
pub(crate) struct DeathWatch(());

impl DeathWatch {
    /// Always `None` on this platform.
    pub(crate) fn register(
        _pid: u32,
        _start_time: u64,
        _word: &AtomicU32,
        _holds_end: HoldsEnd,
    ) -> Option<DeathWatch> {
        None
    }

    /// Never true: there is no watcher.
    pub(crate) fn take_news(&self) -> bool {
        false
    }
}
