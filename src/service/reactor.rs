//! The async reactor: one thread per process (started on first use) that sleeps with
//! `futex_waitv` on the futex words of every task waiting on it in `crate::surface::tokio` (those that
//! cannot sleep on a futex ring of their own, see `super::direct`, and accepts), plus a control
//! word that new waits ring, and wakes a task's `Waker` once its word changes or its deadline
//! passes. How a task hands its word over (read the word, announce, fence, look again) is in
//! `crate::surface::tokio`; the reactor only compares words and clocks, and wakes.
//!
//! One kernel wait takes at most 128 words: the reactor sleeps on its control word and the
//! first 126 tasks' words, and hands every further batch of 127 to a thread of a selector's
//! pool (`super::pool`, threads named `shmlink-select`), which sleeps on it and wakes the
//! reactor when a word changes. So any number of idle tasks costs the reactor no timed
//! wake-ups (the death watcher still looks once a second, on its own thread); each wait
//! that starts costs the pool threads a hand-over and a call-off. Without `futex_waitv`
//! (kernels before 5.16) the reactor looks every millisecond instead.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::Waker;
use std::time::{Duration, Instant};

use super::pool::Pool;
use crate::sys::{futex_wake, FutexWaitv, WaitAny, WAITV_MAX};
use crate::wait::handshake;
use crate::wait::UNWATCHED_SLICE;

/// The sleep slice when not every waiting word fits one kernel wait (the pool could not be
/// had), or without `futex_waitv`.
const POLL_SLICE: Duration = Duration::from_millis(1);

/// One task waiting on one word.
struct Entry {
    /// A futex word in a channel's or listener's mapping. Dereferenced only with the reactor's
    /// lock held: its owner removes the entry (under the lock) before the memory can go.
    word: *const AtomicU32,
    /// The value the task read before it looked at its ring one last time.
    seen: u32,
    /// The death watcher does not cover the task's peer: wake it every [`UNWATCHED_SLICE`]
    /// anyway, so that it looks at the peer.
    timed: bool,
    /// When the task's wait ends whatever the word says (its operation's deadline).
    deadline: Option<Instant>,
    waker: Waker,
}

#[derive(Default)]
struct Table {
    /// Indexed by registration id; `None` when that registration is not waiting.
    entries: Vec<Option<Entry>>,
    /// Ids free for reuse.
    free: Vec<usize>,
}

// SAFETY: `Entry::word` points into a mapping that stays mapped while the entry exists (see
// `Entry`); it is only read through, atomically, under the reactor's mutex.
unsafe impl Send for Table {}

struct Reactor {
    table: Mutex<Table>,
    /// Bumped (and woken) whenever a task starts waiting, so the reactor adds its word.
    control: AtomicU32,
}

/// The process's reactor, once started.
static REACTOR: OnceLock<&'static Reactor> = OnceLock::new();

/// How many tasks sleep through the reactor now (none if it was never started).
pub(crate) fn waiting() -> usize {
    REACTOR
        .get()
        .map_or(0, |reactor| reactor.lock().entries.iter().flatten().count())
}

impl Reactor {
    fn get() -> &'static Reactor {
        REACTOR.get_or_init(|| {
            let reactor: &'static Reactor = Box::leak(Box::new(Reactor {
                table: Mutex::new(Table::default()),
                control: AtomicU32::new(0),
            }));
            std::thread::Builder::new()
                .name("shmlink-reactor".into())
                .spawn(move || reactor.run())
                .expect("spawn the shmlink reactor thread");
            reactor
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic while the lock was held leaves the table consistent (plain assignments).
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self) {
        let mut waiters = Vec::with_capacity(WAITV_MAX);
        let mut spill = Vec::new();
        let mut pool = Pool::default();
        // Until the kernel says it has no `futex_waitv`: then the pool is no use.
        let mut waitv = true;
        let mut woken = Vec::new();
        // When the timed entries were last woken.
        let mut last_tick = Instant::now();
        loop {
            // Acquire: pairs with the Release increment in `arm`; the entry added before it is
            // in the table we read next.
            let control = self.control.load(Ordering::Acquire);
            waiters.clear();
            spill.clear();
            waiters.push(FutexWaitv::new(&self.control, control));
            let mut timed = false;
            let mut earliest: Option<Instant> = None;
            {
                let table = self.lock();
                for entry in table.entries.iter().flatten() {
                    timed |= entry.timed;
                    if let Some(d) = entry.deadline {
                        earliest = Some(earliest.map_or(d, |e| e.min(d)));
                    }
                    // SAFETY: see `Entry::word`: we hold the lock.
                    let word = FutexWaitv::new(unsafe { &*entry.word }, entry.seen);
                    // One slot kept for the pool's word.
                    if waiters.len() < WAITV_MAX - 1 {
                        waiters.push(word);
                    } else {
                        spill.push(word);
                    }
                }
            }
            // The pool's threads wait on the rest (the words' addresses only: see
            // `FutexWaitv`), and wake the reactor through the pool's word.
            let overflow = !spill.is_empty() && {
                let handed = waitv && {
                    // Read the pool's word before handing over the batches (see `Pool::woken`).
                    waiters.push(pool.woken());
                    pool.dispatch(&spill)
                };
                if waitv && !handed {
                    waiters.pop();
                }
                !handed
            };
            if !timed {
                // The first timed entry gets a whole slice.
                last_tick = Instant::now();
            }
            // No timeout while every waiting task's peer is watched, every word fits and no
            // task has a deadline.
            let tick_in = timed.then(|| UNWATCHED_SLICE.saturating_sub(last_tick.elapsed()));
            let due_in = earliest.map(|d| d.saturating_duration_since(Instant::now()));
            let timeout = [tick_in, due_in, overflow.then_some(POLL_SLICE)]
                .into_iter()
                .flatten()
                .min();
            // Step 4 of the handshake, for the tasks (each announced its sleeper, fenced and
            // looked again before it armed its entry with the value it read).
            if handshake::sleep_any(&waiters, timeout) == WaitAny::Unsupported {
                waitv = false;
                std::thread::sleep(timeout.map_or(POLL_SLICE, |t| t.min(POLL_SLICE)));
            }
            if !spill.is_empty() && !overflow {
                pool.call_off();
            }
            let tick = timed && last_tick.elapsed() >= UNWATCHED_SLICE;
            if tick {
                last_tick = Instant::now();
            }
            {
                let now = Instant::now();
                let mut table = self.lock();
                for slot in table.entries.iter_mut() {
                    let fire = match slot {
                        Some(e) => {
                            // SAFETY: see `Entry::word`: we hold the lock.
                            let word = unsafe { &*e.word };
                            // Acquire: pairs with the Release increment of the waker (or of
                            // the death watcher).
                            (tick && e.timed)
                                || e.deadline.is_some_and(|d| now >= d)
                                || word.load(Ordering::Acquire) != e.seen
                        }
                        None => false,
                    };
                    if fire {
                        if let Some(e) = slot.take() {
                            woken.push(e.waker);
                        }
                    }
                }
            }
            for waker in woken.drain(..) {
                waker.wake();
            }
        }
    }
}

/// A task's place in the reactor's table; removed (under the lock) when dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    id: usize,
}

impl Registration {
    pub(crate) fn new() -> Registration {
        let mut table = Reactor::get().lock();
        let id = match table.free.pop() {
            Some(id) => id,
            None => {
                table.entries.push(None);
                table.entries.len() - 1
            }
        };
        Registration { id }
    }

    /// Asks the reactor to wake `waker` once `word` no longer holds `seen`, or `deadline`
    /// passed (and, if `timed`, at the next tick of [`UNWATCHED_SLICE`]). The caller keeps the
    /// memory of `word` mapped until it calls `disarm` or drops the registration.
    pub(crate) fn arm(
        &self,
        word: &AtomicU32,
        seen: u32,
        timed: bool,
        deadline: Option<Instant>,
        waker: &Waker,
    ) {
        let reactor = Reactor::get();
        {
            let mut table = reactor.lock();
            table.entries[self.id] = Some(Entry {
                word,
                seen,
                timed,
                deadline,
                waker: waker.clone(),
            });
        }
        // Release: pairs with the Acquire load at the top of the reactor's loop.
        reactor.control.fetch_add(1, Ordering::Release);
        futex_wake(&reactor.control);
    }

    pub(crate) fn disarm(&self) {
        Reactor::get().lock().entries[self.id] = None;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut table = Reactor::get().lock();
        table.entries[self.id] = None;
        table.free.push(self.id);
    }
}
