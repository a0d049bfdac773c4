//! How an endpoint waits when the ring is empty (or full).
//!
//! * [`WaitStrategy::Spin`] busy-polls with `spin_loop` hints: the lowest latency, one core at
//!   100% while waiting. After 20 us without data it also yields the core between batches of
//!   polls. Use it only where each endpoint has a core of its own: when processes outnumber the
//!   cores, a spinner burns the time slices its peer needs.
//! * [`WaitStrategy::SpinYield`] backs off with [`crossbeam_utils::Backoff`] and then yields the
//!   core to other threads between polls.
//! * [`WaitStrategy::Block`] adapts: it spins (for 20 us) only while at least a quarter of its
//!   recent spins found data; when its peer is mostly asleep, descheduled or waiting for the
//!   core we would spin on, it sleeps at once
//!   (with a short probe spin now and then to notice when spinning pays again). Right after it
//!   woke its peer (which cannot answer before it has run) it sleeps at once, or polls politely
//!   for a while, whichever has lately been quicker. While the machine has more runnable
//!   threads than CPUs (many server threads, many busy tasks, other busy processes), every
//!   `Block` wait of the process sleeps at once: a spin would keep a CPU from a thread with
//!   work, perhaps the one that would answer. The process learns it from the scheduler's count
//!   of runnable threads (`/proc/loadavg`, read at most every 5 ms, and at once when a batch of
//!   polls lost its core, on a clock read a wait makes anyway; smoothed, so a moment's extra
//!   thread changes nothing and the end of a crowd is noticed within tens of milliseconds; see
//!   `crowd.rs`, which keeps the file open). A thread that polls for several waits in
//!   turn (a runtime thread serving many tasks) also stops polling for a while once a batch of
//!   its polls lost the core (`Policy::note_poll_batch`). After its thread published or read a
//!   large frame (16 KiB or more) it spins longer, 1 us per KiB of that frame up to 2 ms: long
//!   enough for the peer to copy one like it, which a large echo or a stream of large frames
//!   waits for (`policy::spin_for_frame`). It sleeps in the kernel on a futex word
//!   inside the mapping until the peer wakes it. This policy (`Policy`, in `policy.rs`) also
//!   drives the async waits of `crate::surface::tokio`, which sleep on a futex ring of their own or
//!   through a reactor thread instead.
//!
//! A sleeping `Block` endpoint makes no timed wake-ups (the death watcher's thread does: one
//! look a second while any peer is watched, see below). A peer that closes wakes it; a peer
//! process that dies is noticed by the process's death watcher (one thread holding a pidfd per
//! watched peer, see `crate::sys`), which wakes it. The pidfd is of the process the peer
//! recorded, which the peer chose; so the watcher also asks, once a second, whether each watched
//! peer still holds its end (its lock), and wakes the sleepers of one that does not. Whatever a
//! peer recorded, its death ends a wait within about a second, and a woken sleeper asks the
//! peer's end itself before it reports anything. Where no watcher can be had (no pidfds, or a
//! peer in another pid namespace) it sleeps in slices of 10 ms and looks at the peer's end
//! after each. Spinning endpoints look at the peer every few milliseconds. Every wait honours
//! its optional deadline.
//!
//! # The sleep/wake handshake
//!
//! ```text
//! sleeper                                   waker
//! s = futex.load(Acquire)       <- A        publish data (Release store)
//! peer closed or dead? -> return            fence(SeqCst)            <- F2
//! sleepers += 1                             if sleepers != 0 {
//! fence(SeqCst)                 <- F1           futex += 1 (Release)
//! if data is there: sleepers -= 1, return       futex_wake(futex)
//! futex_wait(futex, s)                      }
//! sleepers -= 1
//! ```
//!
//! F1 and F2 are SeqCst fences, so the two "store then load" sequences cannot both read the old
//! value: either the sleeper sees the data, or the waker sees `sleepers != 0`. In the second case
//! the waker changes the futex word after the sleeper read `s`, so `futex_wait` returns at once
//! or is woken: a wake-up cannot be lost. The waker pays for F2 only when the peer announced
//! that it may sleep (its wait mode is not `Spin`). A producer also skips the wake-up when the
//! consumer's index (stored before its F1) is behind the first word it just published: the
//! consumer then sleeps in front of an earlier frame, whose publish woke it
//! (`wake_if_sleeping_and`; see `Producer::notify_consumer`), so a stream pays one wake-up per
//! sleep of its consumer, not one per message. The other way, a consumer gives a producer that
//! sleeps for room space a quarter of the ring at a time (`Consumer::release`), so a stream
//! whose consumer is the slower side wakes its producer a few times a lap, as a pipe does.
//!
//! A closing peer and the death watcher do not look at `sleepers`: they first record why (the
//! peer state `CLOSED`, the watcher's news flag), then increment the futex word with Release
//! and wake it. The sleeper reads the word (A, Acquire) *before* it looks at the state and the
//! flag. If A reads the incremented word, it synchronises with that increment and sees the
//! reason; if it reads an older value, `futex_wait(futex, s)` returns at once or is woken by
//! the call that follows the increment. Either way the sleeper does not sleep through it.
//!
//! `handshake.rs` holds the handshake's two sides, written once (`observe` is A, `fence` is F1,
//! `wake_if_sleeping` is F2 and the wake-up, `wake` the unconditional one) and used by every
//! sleeper: the blocking waits, the async tasks and the selector. `policy.rs` holds the `Block`
//! policy (what a wait learnt, the plan for the next one) and its tuned constants, `crowd.rs`
//! the process-wide view of whether runnable threads outnumber the CPUs; `waiter.rs`
//! the per-half `Waiter` (the blocking waits) and its death-watch registration. The async
//! task's side of a wait (its poll, its announcement kept across polls, its sleep on a futex
//! ring of its own or through the reactor) is `service/task.rs`, which needs the channel.

use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::error::Error;

#[cfg(not(loom))]
mod crowd;
pub(crate) mod handshake;
mod policy;
mod waiter;

pub(crate) use handshake::WaitCell;
#[cfg(feature = "tokio")]
pub(crate) use policy::Plan;
pub(crate) use policy::Policy;
pub(crate) use policy::{note_large_frame, LARGE_FRAME};
pub(crate) use waiter::{wake_if_sleeping, wake_if_sleeping_and, wake_readers, Peer, Waiter};

/// How an endpoint waits for data or for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum WaitStrategy {
    /// Busy-poll with `spin_loop` hints. Lowest latency; burns a core while waiting.
    Spin,
    /// Exponential backoff, then `yield` between polls.
    SpinYield,
    /// Spin briefly while spinning has recently paid off, else sleep in the kernel until woken.
    /// Costs a wake-up syscall on the sending side when the receiver is asleep; idle, it makes
    /// no timed wake-ups (the process's death-watcher thread looks at the watched peers' locks
    /// once a second).
    #[default]
    Block,
}

impl WaitStrategy {
    /// The name used on command lines: `spin`, `yield` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitStrategy::Spin => "spin",
            WaitStrategy::SpinYield => "yield",
            WaitStrategy::Block => "block",
        }
    }

    /// Every strategy, in order of increasing politeness.
    pub const ALL: [WaitStrategy; 3] = [
        WaitStrategy::Spin,
        WaitStrategy::SpinYield,
        WaitStrategy::Block,
    ];
}

impl std::fmt::Display for WaitStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses the names [`as_str`](WaitStrategy::as_str) prints and the variant names, in any case:
///
/// ```
/// use shmlink::WaitStrategy;
/// assert_eq!("block".parse::<WaitStrategy>()?, WaitStrategy::Block);
/// assert_eq!("Block".parse::<WaitStrategy>()?, WaitStrategy::Block);
/// assert_eq!("SpinYield".parse::<WaitStrategy>()?, WaitStrategy::SpinYield);
/// assert_eq!("spin-yield".parse::<WaitStrategy>()?, WaitStrategy::SpinYield);
/// assert!("nap".parse::<WaitStrategy>().is_err());
/// # Ok::<(), shmlink::Error>(())
/// ```
impl FromStr for WaitStrategy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "spin" => Ok(WaitStrategy::Spin),
            "yield" | "spin-yield" | "spinyield" | "spin_yield" => Ok(WaitStrategy::SpinYield),
            "block" => Ok(WaitStrategy::Block),
            _ => Err(Error::UnknownWaitStrategy {
                given: s.to_owned(),
            }),
        }
    }
}

/// How long an operation may wait: the one parameter every surface's core takes, from which
/// the blocking, `try_` and `_timeout` forms of each operation are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// Not at all: the `try_` forms.
    Now,
    /// Until this instant: the `_timeout` forms.
    At(Instant),
    /// For as long as it takes: the blocking forms.
    Never,
}

impl Deadline {
    /// `timeout` from now (or never, for a timeout too long to add to the clock).
    pub(crate) fn after(timeout: Duration) -> Deadline {
        Instant::now()
            .checked_add(timeout)
            .map_or(Deadline::Never, Deadline::At)
    }

    /// The instant a wait ends at, if any (`Now` is an instant already past).
    pub(crate) fn instant(self) -> Option<Instant> {
        match self {
            Deadline::Now => Some(Instant::now()),
            Deadline::At(at) => Some(at),
            Deadline::Never => None,
        }
    }

    /// True once the deadline has passed (always for `Now`).
    pub(crate) fn passed(self) -> bool {
        match self {
            Deadline::Now => true,
            Deadline::At(at) => Instant::now() >= at,
            Deadline::Never => false,
        }
    }
}

/// Runs a batch operation of up to `total` messages in steps: `step(done)`, given how many are
/// done, does the next one or more (and says how many; 0 ends the batch). The rule every batch
/// form keeps: an error fails the batch only if its first step met it; met later, it ends the
/// batch, which returns how many were done, and the next call meets it again.
pub(crate) fn in_steps<E>(
    total: usize,
    mut step: impl FnMut(usize) -> Result<usize, E>,
) -> Result<usize, E> {
    let mut done = 0;
    while done < total {
        match step(done) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done)
}

/// How often a spinning side looks at its peer's process, and the least time between two such
/// looks in `PeerWatch::check_throttled`.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_millis(5);
/// How long a `Block` sleeper without a death watcher sleeps before it looks at the peer.
pub(crate) const UNWATCHED_SLICE: Duration = Duration::from_millis(10);
/// Polls between two looks at the clock while spinning.
pub(crate) const SPINS_PER_CLOCK_READ: u32 = 128;
