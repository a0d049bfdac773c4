//! Threads that sleep on futex words for a [`Selector`](super::Selector) whose channels do not
//! fit in one `futex_waitv` call (at most 128 words).
//!
//! The selector announces its sleep on every channel itself (so the handshake of each channel
//! is the one of `crate::wait`, made by the selector's thread) and sleeps on the first batch of
//! words plus the pool's *woken* word. Each further batch of up to 127 words goes to one pool
//! thread, which waits on it together with its own control word. A pool thread whose wait ends
//! for another reason than being called off records which of its words the kernel named (or
//! that it does not know), increments the woken word and wakes it, so the selector wakes and
//! looks at that channel. If nothing is to be read there, the selector hands that thread its
//! batch again with the word's new value ([`Pool::rehand`]) and sleeps on: a wake-up with
//! nothing behind it costs the selector a look at one channel (at most one batch when the thread
//! cannot say which word), however many channels it has.
//!
//! A pool thread never touches a channel's memory: it only hands the kernel the addresses and
//! the values the selector read. The selector calls its threads off when its own wait ends and
//! returns without waiting for them: a pool thread still in the kernel on a word whose memory
//! has been unmapped since is woken by its control word, gets `EFAULT`, or compares against
//! whatever is mapped there now, which at worst is a spurious return, never a memory access by
//! Rust code (see `FutexWaitv`).

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;

use crate::sync::{futex_wait, futex_waitv, futex_wake, wait_any};
use crate::sync::{AtomicBool, AtomicU32, Mutex, Ordering};
use crate::sys::{FutexWaitv, WaitAny, WAITV_MAX};

/// Channel words one pool thread waits on (the last slot is its control word).
pub(super) const PER_THREAD: usize = WAITV_MAX - 1;

/// What a pool thread shares with the selector.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    /// The generation: incremented by the selector to hand over a batch and again to call it
    /// off. A pool thread waits on it (with its batch) while it holds the batch's generation.
    control: AtomicU32,
    /// The batch and the generation it was handed over at.
    batch: Mutex<(u32, Vec<FutexWaitv>)>,
    /// Set (before a last increment of `control`) when the selector drops.
    stop: AtomicBool,
    /// What the thread's last wait that was not called off ended on: [`NOTHING`], the index of
    /// the word plus one, or [`UNKNOWN`]. Taken by the selector.
    fired: AtomicU32,
}

/// `Slot::fired`: no report since the selector last took one.
const NOTHING: u32 = 0;
/// `Slot::fired`: a word of the batch changed, which one is not known.
const UNKNOWN: u32 = u32::MAX;

/// What a pool thread reported, taken with [`Pool::take_fired`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fired {
    /// Nothing since the last look.
    Nothing,
    /// The word at this index of the thread's batch.
    Word(usize),
    /// Some word of the thread's batch.
    Unknown,
}

#[derive(Debug)]
struct Worker {
    slot: Arc<Slot>,
    /// Only joined when the pool drops: nothing a panic could leave half-done, so a selector
    /// stays unwind-safe as it was before it had threads.
    thread: Option<AssertUnwindSafe<JoinHandle<()>>>,
}

/// The pool of a selector: its threads, spawned as they are first needed, and the word they
/// wake it on.
#[derive(Debug, Default)]
pub(super) struct Pool {
    workers: Vec<Worker>,
    /// How many workers hold a batch now (the first ones).
    busy: usize,
    woken: Arc<AtomicU32>,
}

impl Pool {
    /// The word the selector also waits on, with the value to expect: read it before
    /// [`dispatch`](Pool::dispatch).
    pub(super) fn woken(&self) -> FutexWaitv {
        woken_entry(&self.woken)
    }

    /// Hands `words` to the pool, [`PER_THREAD`] to a thread, spawning threads as needed.
    /// Returns false (with nothing handed over) if a thread could not be spawned.
    pub(super) fn dispatch(&mut self, words: &[FutexWaitv]) -> bool {
        let needed = words.len().div_ceil(PER_THREAD);
        while self.workers.len() < needed {
            let slot = Arc::new(Slot::default());
            let woken = Arc::clone(&self.woken);
            let theirs = Arc::clone(&slot);
            let thread = std::thread::Builder::new()
                .name("shmlink-select".into())
                .stack_size(64 * 1024)
                .spawn(move || serve(&theirs, &woken));
            match thread {
                Ok(t) => self.workers.push(Worker {
                    slot,
                    thread: Some(AssertUnwindSafe(t)),
                }),
                Err(_) => return false,
            }
        }
        for (worker, chunk) in self.workers.iter().zip(words.chunks(PER_THREAD)) {
            // Relaxed: a report left from an earlier sleep; one stored late (by a thread that
            // woke just before it was called off) only makes the selector look again.
            worker.slot.fired.store(NOTHING, Ordering::Relaxed);
            hand(&worker.slot, chunk);
        }
        self.busy = needed;
        true
    }

    /// How many threads hold a batch of the last [`dispatch`](Pool::dispatch).
    pub(super) fn busy(&self) -> usize {
        self.busy
    }

    /// The woken word's value now (see [`woken`](Pool::woken)): read it before
    /// [`take_fired`](Pool::take_fired).
    pub(super) fn woken_now(&self) -> u32 {
        // Acquire: pairs with the Release increment in `serve`, which follows its store of
        // `fired`: a report counted in the value read is seen by the `take_fired` after it.
        self.woken.load(Ordering::Acquire)
    }

    /// Takes what busy thread `w` reported since the last look.
    pub(super) fn take_fired(&self, w: usize) -> Fired {
        take_fired(&self.workers[w].slot)
    }

    /// Hands busy thread `w` its batch again, `words` (its chunk of the last dispatch, with the
    /// values the selector read since): for a thread that reported a word whose channel had
    /// nothing to read.
    pub(super) fn rehand(&mut self, w: usize, words: &[FutexWaitv]) {
        debug_assert!(w < self.busy && words.len() <= PER_THREAD);
        hand(&self.workers[w].slot, words);
    }

    /// Calls off the batches handed over by the last [`dispatch`](Pool::dispatch).
    pub(super) fn call_off(&mut self) {
        for worker in &self.workers[..self.busy] {
            // Release: pairs with the Acquire loads in `serve`.
            worker.slot.control.fetch_add(1, Ordering::Release);
            futex_wake(&worker.slot.control);
        }
        self.busy = 0;
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            stop(&worker.slot);
            if let Some(AssertUnwindSafe(thread)) = worker.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// The pool's woken word as the selector sleeps on it: read before the batches are handed over.
pub(crate) fn woken_entry(woken: &AtomicU32) -> FutexWaitv {
    // Acquire: pairs with the Release increment in `serve`. That the selector's wait sees an
    // increment made for a batch handed over after this load (or is woken by the call that
    // follows it) is coherence, not this ordering: the kernel compares the value.
    futex_waitv(woken, woken.load(Ordering::Acquire))
}

/// Takes what the thread of `slot` reported since the last look.
pub(crate) fn take_fired(slot: &Slot) -> Fired {
    // Relaxed: ordered by the Acquire load of `woken` before it (see `Pool::woken_now`); a
    // report stored after that load comes with an increment the selector's next wait sees.
    match slot.fired.swap(NOTHING, Ordering::Relaxed) {
        NOTHING => Fired::Nothing,
        UNKNOWN => Fired::Unknown,
        k => Fired::Word(k as usize - 1),
    }
}

/// Tells the thread of `slot` to return.
pub(crate) fn stop(slot: &Slot) {
    // Release: pairs with the Acquire load of `stop` in `serve`, made after it saw the
    // increment below.
    slot.stop.store(true, Ordering::Release);
    // Release: pairs with the Acquire load of `control` at the top of `serve`'s loop.
    slot.control.fetch_add(1, Ordering::Release);
    futex_wake(&slot.control);
}

/// Hands `words` to the thread of `slot` under a new generation.
pub(crate) fn hand(slot: &Slot, words: &[FutexWaitv]) {
    let mut batch = slot.batch.lock().unwrap_or_else(PoisonError::into_inner);
    // Relaxed: only the selector's thread writes `control`; the batch is published by the mutex.
    let generation = slot.control.load(Ordering::Relaxed).wrapping_add(1);
    batch.0 = generation;
    batch.1.clear();
    batch.1.extend_from_slice(words);
    drop(batch);
    // Release: pairs with the Acquire load in `serve`, which then takes the batch (published
    // by the mutex as well).
    slot.control.store(generation, Ordering::Release);
    futex_wake(&slot.control);
}

/// A pool thread: waits for a batch, waits on it, tells the selector (which word, if the kernel
/// said) when the wait ended for another reason than being called off.
pub(crate) fn serve(slot: &Slot, woken: &AtomicU32) {
    let mut served = None;
    let mut words = Vec::with_capacity(WAITV_MAX);
    loop {
        // Acquire: pairs with the Release store and increments of the selector (`dispatch`,
        // `call_off`, `drop`).
        let generation = slot.control.load(Ordering::Acquire);
        // Acquire: pairs with the Release store in `Pool::drop`.
        if slot.stop.load(Ordering::Acquire) {
            return;
        }
        let handed = {
            let batch = slot.batch.lock().unwrap_or_else(PoisonError::into_inner);
            let fresh = batch.0 == generation && served != Some(generation);
            if fresh {
                words.clear();
                words.extend_from_slice(&batch.1);
            }
            fresh
        };
        if !handed {
            futex_wait(&slot.control, generation, None);
            continue;
        }
        served = Some(generation);
        let batch = words.len();
        words.push(futex_waitv(&slot.control, generation));
        let woke = wait_any(&words, None);
        // Acquire: as above. Called off: the selector is awake already.
        if slot.control.load(Ordering::Acquire) == generation {
            let fired = match woke {
                WaitAny::Woken(k) if k < batch => k as u32 + 1,
                _ => UNKNOWN,
            };
            // Relaxed: published by the Release increment of `woken` below.
            slot.fired.store(fired, Ordering::Relaxed);
            // Release: pairs with the Acquire loads in `Pool::woken` and `Pool::woken_now`.
            woken.fetch_add(1, Ordering::Release);
            futex_wake(woken);
        }
    }
}
