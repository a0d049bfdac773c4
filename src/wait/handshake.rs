//! The sleep/wake handshake, written once (drawn in the module docs of `crate::wait`): every
//! sleeper of the crate (a `Block` wait, an async task, a selector over many channels) goes
//! through these steps, and every waker through [`wake_if_sleeping`] or [`wake`].
//!
//! The sleeper's steps, in this order:
//! 1. [`observe`] the futex word (load A), before it looks at the reasons to stop (the peer's
//!    state, the death watcher's news);
//! 2. [`announce`] a sleeper on the cell;
//! 3. [`look_again`]: the fence F1, then the look at the condition (or [`fence`] alone, when the
//!    look is a longer affair, as a selector's scan of its channels);
//! 4. sleep on the word while it holds the value A read ([`sleep_on`], or [`sleep_any`] for many
//!    words at once);
//! 5. [`withdraw`] the sleeper.
//!
//! [`sleep`] makes steps 2 to 5 for one word; an async task keeps its announcement across polls
//! in an [`Announced`]. A [`WakeFlag`] is a word a selector also sleeps on, which any thread (or
//! a signal handler) raises to end its wait.
//!
//! Everything here is built on `crate::sync`, so the loom models (`crate::loom_tests`) run this
//! very code.

use std::time::Duration;

use crate::sync::{self, AtomicU32, Ordering};
use crate::sys::{FutexWaitv, WaitAny};

/// Sleep/wake state for one side of one ring: the two words the handshake works on. It lives
/// in the mapping (each ring's header holds two, `shm::layout::RingHeader`), so its layout is
/// part of the shared-memory layout: `#[repr(C)]`, two `u32`s.
#[repr(C)]
#[derive(Debug)]
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
pub struct WaitCell {
    /// The futex word: bumped by the waker before each wake call.
    pub futex: AtomicU32,
    /// Non-zero while a waiter has announced that it is about to sleep or sleeping.
    pub sleepers: AtomicU32,
}

/// Step 1, load A: the futex word's value now, to sleep on. Read it before looking at the
/// peer's state and the death watcher's news.
#[inline]
pub(crate) fn observe(cell: &WaitCell) -> u32 {
    // A: Acquire, pairs with the Release increment in `wake` (a closing peer) and in the death
    // watcher, which each record their reason before it: if A reads their increment, the looks
    // after it see the reason; if not, the word no longer holds what A read, and the sleep on
    // it returns at once or is woken. A blocking wait looks at the peer before F1, so A alone
    // orders those looks; a selector and an async task look after F1, which orders them too.
    cell.futex.load(Ordering::Acquire)
}

/// Step 2: announces a sleeper on `cell`, so that a waker's [`wake_if_sleeping`] wakes it.
#[inline]
pub(crate) fn announce(cell: &WaitCell) {
    // Relaxed RMW: ordered by the fence F1 that follows (`look_again` or `fence`).
    cell.sleepers.fetch_add(1, Ordering::Relaxed);
}

/// Steps 1 and 2 for one of many words a sleeper sleeps on at once (a selector's): observes
/// `cell`'s word, announces a sleeper on it, and returns the entry for [`sleep_any`].
#[inline]
pub(crate) fn announce_word(cell: &WaitCell) -> FutexWaitv {
    let seen = observe(cell);
    announce(cell);
    sync::futex_waitv(&cell.futex, seen)
}

/// Step 3 without the look: the fence F1, after announcing and before looking at the condition.
#[inline]
pub(crate) fn fence() {
    // F1: SeqCst, pairs with F2 in `wake_if_sleeping`. Of the two "store, fence, load"
    // sequences (the sleeper's announcement then its look at the ring; the waker's publish then
    // its load of `sleepers`) one reads the other's store: either the sleeper sees the data, or
    // the waker sees the sleeper and changes the word.
    sync::fence(Ordering::SeqCst);
}

/// Step 3: the fence F1, then `ready()`: true when the condition holds now (withdraw, and do
/// not sleep).
#[inline]
pub(crate) fn look_again(ready: impl FnOnce() -> bool) -> bool {
    fence();
    ready()
}

/// Step 4 for one word: sleeps while `cell`'s word holds `seen` (the value [`observe`] read),
/// for at most `timeout`.
#[inline]
pub(crate) fn sleep_on(cell: &WaitCell, seen: u32, timeout: Option<Duration>) {
    sync::futex_wait(&cell.futex, seen, timeout);
}

/// Step 4 for many words: sleeps until one of them no longer holds its value (each read by
/// [`observe`] before the look) or is woken, or `timeout` passes.
#[inline]
pub(crate) fn sleep_any(words: &[FutexWaitv], timeout: Option<Duration>) -> WaitAny {
    sync::wait_any(words, timeout)
}

/// Step 5: withdraws a sleeper announced on `cell`.
#[inline]
pub(crate) fn withdraw(cell: &WaitCell) {
    // Relaxed: only the count matters; the waker reads it after its own fence F2, and a
    // sleeper still counted costs it no more than a wake-up call for nobody.
    cell.sleepers.fetch_sub(1, Ordering::Relaxed);
}

/// Steps 2 to 5 on one word: announces a sleeper on `cell` and sleeps while its word holds
/// `seen` (for at most `timeout`) unless `ready()` holds after announcing, then withdraws. True
/// if it saw `ready()`.
pub(crate) fn sleep(
    cell: &WaitCell,
    seen: u32,
    timeout: Option<Duration>,
    ready: &mut impl FnMut() -> bool,
) -> bool {
    announce(cell);
    let now_ready = look_again(ready);
    if !now_ready {
        sleep_on(cell, seen, timeout);
    }
    withdraw(cell);
    now_ready
}

/// The waker's side, after publishing (a frame, or room): wakes whoever sleeps on `cell`, if
/// anyone announced it. True if it made the wake-up call.
#[inline]
pub(crate) fn wake_if_sleeping(cell: &WaitCell) -> bool {
    // F2: SeqCst, pairs with F1 in `fence` (see there).
    sync::fence(Ordering::SeqCst);
    // Relaxed: ordered by F2.
    if cell.sleepers.load(Ordering::Relaxed) != 0 {
        wake(cell);
        return true;
    }
    false
}

/// [`wake_if_sleeping`] for a waker that can tell, once it sees a sleeper announced, whether
/// an earlier wake-up already covers it: wakes only if `needed()` also says so. True if it
/// made the wake-up call. `needed` runs after F2, so its loads see what the sleeper stored
/// before its F1 whenever the sleeper's look could miss what the waker published.
#[inline]
pub(crate) fn wake_if_sleeping_and(cell: &WaitCell, needed: impl FnOnce() -> bool) -> bool {
    after_publish(|| wake_if_announced(cell, needed))
}

/// The waker's side for a writer that many readers sleep on, each on a cell of its own (a
/// topic's publisher): F2, then `each`, whose loads F2 orders after what was published, calls
/// [`wake_if_announced`] on every cell a reader may sleep on. What a reader stores before its
/// F1 (its position, its join) is visible to those loads whenever its look could miss the
/// publish.
#[inline]
pub(crate) fn after_publish<R>(each: impl FnOnce() -> R) -> R {
    // F2: SeqCst, pairs with F1 in `fence` (see there).
    sync::fence(Ordering::SeqCst);
    each()
}

/// Within [`after_publish`]: wakes the sleepers of `cell` if one is announced and `needed()`
/// says an earlier wake-up does not cover it. True if it made the wake-up call.
#[inline]
pub(crate) fn wake_if_announced(cell: &WaitCell, needed: impl FnOnce() -> bool) -> bool {
    // Relaxed: ordered by F2 (in `after_publish`).
    if cell.sleepers.load(Ordering::Relaxed) != 0 && needed() {
        wake(cell);
        return true;
    }
    false
}

/// Wakes every sleeper on `cell` unconditionally (on close, after the closed state is stored;
/// the death watcher does the same after recording a death).
pub(crate) fn wake(cell: &WaitCell) {
    // Release: pairs with the Acquire load A in `observe`.
    cell.futex.fetch_add(1, Ordering::Release);
    sync::futex_wake(&cell.futex);
}

/// A channel end's close: stores `closed` in its `state` word (in the mapping), then wakes
/// every sleeper on `cells` (its peer's waits for data from it and for room in its inbound
/// ring). The peer's sleepers read their word (A) before they look at the state, so none of
/// them sleeps through it.
pub(crate) fn close(state: &AtomicU32, closed: u32, cells: [&WaitCell; 2]) {
    // Release: pairs with the Acquire load of the state in the peer's `PeerWatch::state`: every
    // frame published before is visible to a peer that sees the close.
    state.store(closed, Ordering::Release);
    for cell in cells {
        wake(cell);
    }
}

/// Whether a sleeper is announced on a wait cell, across the polls of an async operation:
/// withdrawn when the task looks again or goes away.
#[derive(Debug, Default)]
#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
pub(crate) struct Announced(bool);

#[cfg_attr(not(feature = "tokio"), allow(dead_code))]
impl Announced {
    /// Steps 1 and 2: withdraws an earlier announcement, reads `cell`'s futex word and
    /// announces a sleeper on it; returns the value read, to sleep on after [`look_again`].
    pub(crate) fn announce(&mut self, cell: &WaitCell) -> u32 {
        self.withdraw_from(cell);
        let seen = observe(cell);
        announce(cell);
        self.0 = true;
        seen
    }

    /// Step 5, if a sleeper is announced.
    pub(crate) fn withdraw_from(&mut self, cell: &WaitCell) {
        if std::mem::take(&mut self.0) {
            withdraw(cell);
        }
    }
}

/// A word a sleeper also sleeps on (a selector's), which another thread or a signal handler
/// raises to end its wait at once: [`raise`](WakeFlag::raise) is one atomic store and one
/// `FUTEX_WAKE` system call (no allocation, no lock: async-signal-safe). A raise that comes
/// while nobody sleeps stays until [`take`](WakeFlag::take) takes it, so it ends the next wait.
#[derive(Debug, Default)]
pub(crate) struct WakeFlag {
    /// 1 while raised and not taken.
    word: AtomicU32,
}

impl WakeFlag {
    /// Raises the flag and wakes its sleeper.
    pub(crate) fn raise(&self) {
        // Release: pairs with the Acquire swap in `take`: what the raiser wrote before the
        // raise is visible to the sleeper that takes it.
        self.word.store(1, Ordering::Release);
        sync::futex_wake(&self.word);
    }

    /// True once if the flag was raised since the last `take` (and lowers it).
    pub(crate) fn take(&self) -> bool {
        // Relaxed first look, so a wait that finds it lowered pays no RMW; Acquire swap: pairs
        // with the Release store in `raise`.
        self.word.load(Ordering::Relaxed) != 0 && self.word.swap(0, Ordering::Acquire) != 0
    }

    /// Whether the flag is raised now (without taking it).
    pub(crate) fn raised(&self) -> bool {
        // Relaxed: a hint whether to stop sleeping; `take` orders what follows.
        self.word.load(Ordering::Relaxed) != 0
    }

    /// The word to sleep on while the flag is lowered (the kernel compares it with 0 when the
    /// sleep starts: a raise before that ends the sleep at once, one after it wakes it).
    pub(crate) fn word(&self) -> FutexWaitv {
        sync::futex_waitv(&self.word, 0)
    }
}
