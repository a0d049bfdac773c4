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
//!   for a while, whichever has lately been quicker. It sleeps in the kernel on a futex word
//!   inside the mapping (Linux) until the peer wakes it. This policy (`Policy`) also drives
//!   the async waits of `crate::tokio`, which sleep through a reactor thread instead.
//!
//! A sleeping `Block` endpoint makes no timed wake-ups. A peer that closes wakes it; a peer
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
//! that it may sleep (its wait mode is not `Spin`).
//!
//! A closing peer and the death watcher do not look at `sleepers`: they first record why (the
//! peer state `CLOSED`, the watcher's news flag), then increment the futex word with Release
//! and wake it. The sleeper reads the word (A, Acquire) *before* it looks at the state and the
//! flag. If A reads the incremented word, it synchronises with that increment and sees the
//! reason; if it reads an older value, `futex_wait(futex, s)` returns at once or is woken by
//! the call that follows the increment. Either way the sleeper does not sleep through it.

use std::str::FromStr;
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use crate::error::{Error, Result};
use crate::layout::WaitCell;
use crate::sync::{self, fence, DeathWatch, Ordering};
use crate::sys::HoldsEnd;

/// How an endpoint waits for data or for room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum WaitStrategy {
    /// Busy-poll with `spin_loop` hints. Lowest latency; burns a core while waiting.
    Spin,
    /// Exponential backoff, then `yield` between polls.
    SpinYield,
    /// Spin briefly while spinning has recently paid off, else sleep in the kernel until woken.
    /// Costs a wake-up syscall on the sending side when the receiver is asleep; idle, it makes
    /// no timed wake-ups.
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
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "spin" => Ok(WaitStrategy::Spin),
            "yield" | "spin-yield" | "spinyield" | "spin_yield" => Ok(WaitStrategy::SpinYield),
            "block" => Ok(WaitStrategy::Block),
            _ => Err(Error::InvalidConfig(format!(
                "unknown wait strategy {s:?} (expected spin, yield or block)"
            ))),
        }
    }
}

/// How often a spinning side looks at its peer's process, and the least time between two such
/// looks in `PeerWatch::check_throttled`.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_millis(5);
/// How long a `Block` sleeper without a death watcher sleeps before it looks at the peer.
pub(crate) const UNWATCHED_SLICE: Duration = Duration::from_millis(10);
/// Polls between two looks at the clock while spinning.
pub(crate) const SPINS_PER_CLOCK_READ: u32 = 128;
/// How long `Block` spins before it sleeps, when it spins.
const BLOCK_SPIN: Duration = Duration::from_micros(20);
/// Fixed-point one for the share of recent spins that found data.
const ONE: u32 = 1 << 10;
/// `Block` keeps spinning while at least this share of its recent spins found data. Below it,
/// the peer is mostly asleep, descheduled, or waiting for the very core we spin on, and a spin
/// only burns the time slice it needs (the scheduler then also favours the processes that did
/// not spin). A miss costs little more than the spin, while a wait that spun too little costs
/// a sleep and a wake-up on both sides, so even a minority of hits keeps spinning on.
const MIN_HIT_SHARE: u32 = ONE / 4;
/// A `Block` endpoint that stopped spinning still spins on one wait in this many, to notice
/// when spinning pays again.
const PROBE_EVERY: u32 = 256;
/// How long `Block` may poll (yielding between batches) right after it woke its peer, when
/// that has recently been quicker than sleeping: enough to cover the peer's wake-up on an
/// otherwise idle core (tens of microseconds on a virtual machine), so that two endpoints that
/// keep waking each other can fall back into spinning instead of sleeping turn by turn.
const POST_WAKE_SPIN: Duration = Duration::from_micros(150);
/// A sleep right after waking the peer that lasts longer than this means the peer's answer
/// waited for a core to wake up from idle, not for the work itself.
const SLOW_WAKE: Duration = Duration::from_micros(25);
/// While it polls after waking its peer, a `Block` endpoint still sleeps at once in one such
/// wait in this many, to see whether sleeping has become quick (the machine got busy).
const POST_WAKE_EXPLORE: u32 = 32;

/// After spinning this long without data, `Spin` yields the core once per batch of polls, so a
/// peer that shares the core (an oversubscribed machine) gets to run instead of waiting for the
/// end of our time slice. A message that arrives sooner never pays for it.
const SPIN_POLITE_AFTER: Duration = Duration::from_micros(20);

/// What a waiter needs to know about the other endpoint.
pub(crate) trait Peer {
    /// `Err` once the peer closed ([`Error::Disconnected`]) or, when `process` is true, once
    /// its process is gone ([`Error::PeerGone`]). With `process` false this is one load from
    /// the mapping.
    fn check(&mut self, process: bool) -> Result<()>;
    /// The pid and process start time (clock ticks since boot) the peer recorded, once it is
    /// connected. The peer chose them: they say which process to watch, never whether the peer
    /// is alive.
    fn process(&mut self) -> Option<(u32, u64)>;
    /// What the death watcher asks, on its own thread, about once a second: whether the peer
    /// still holds its end. Called once the peer is connected.
    fn holds_end(&self) -> HoldsEnd;
}

/// Whether the death watcher covers this waiter's peer.
enum Watch {
    /// Not tried yet (or the peer has not connected yet).
    Pending,
    /// The watcher wakes us when the process the peer recorded exits, or when the peer no
    /// longer holds its end.
    Watched(DeathWatch),
    /// No watcher for this peer: sleep in slices and look at the peer after each.
    Unavailable,
}

/// What one endpoint learnt from its recent waits, and the plan for its next one: the policy of
/// [`WaitStrategy::Block`], shared by the synchronous waits ([`Waiter`]) and the async ones
/// (`crate::tokio`), which differ only in how they sleep.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    /// Moving average (weight 1/8) of the share of recent spins that found data, out of
    /// [`ONE`].
    hit_share: u32,
    /// Waits since the last spin, for the occasional probe.
    since_spin: u32,
    /// Moving average (weight 1/8), out of [`ONE`], of the share of sleeps right after waking
    /// the peer that took longer than [`SLOW_WAKE`] but no longer than [`POST_WAKE_SPIN`].
    slow_wakes: u32,
    /// Waits right after waking the peer, for the occasional try of the slower way.
    post_wakes: u32,
    /// A sleep right after waking the peer that lasts longer than this (and no longer than
    /// [`POST_WAKE_SPIN`]) would have been saved by polling: [`SLOW_WAKE`] for a thread, zero
    /// for a task (see [`Policy::for_tasks`]).
    slow_wake: Duration,
}

/// How one `Block` wait goes, as [`Policy::plan`] chose it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Poll for this long (zero: not at all), then sleep until woken.
    Spin(Duration),
    /// Right after waking the peer, when polling has lately been quicker than sleeping: poll
    /// for at most [`POST_WAKE_SPIN`], letting others run between batches, then sleep.
    PollAfterWake,
    /// Right after waking the peer: sleep at once (and time the sleep).
    SleepAfterWake,
}

impl Plan {
    /// How long to poll before sleeping, and whether to let others run between batches.
    pub(crate) fn poll(self) -> (Duration, bool) {
        match self {
            Plan::Spin(budget) => (budget, false),
            Plan::PollAfterWake => (POST_WAKE_SPIN, true),
            Plan::SleepAfterWake => (Duration::ZERO, false),
        }
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            hit_share: ONE,
            since_spin: 0,
            slow_wakes: 0,
            post_wakes: 0,
            slow_wake: SLOW_WAKE,
        }
    }
}

impl Policy {
    /// The policy of an async task. A task sleeps through the reactor, so its wake-up costs
    /// two hand-offs between threads (peer, reactor, runtime thread) however idle the cores
    /// are: any sleep right after waking the peer that a poll of [`POST_WAKE_SPIN`] would have
    /// saved counts against sleeping (a task's poll yields to the runtime between batches, so
    /// the thread's other tasks still run).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn for_tasks() -> Policy {
        Policy {
            slow_wake: Duration::ZERO,
            ..Policy::default()
        }
    }

    /// How the next wait goes. Right after this thread woke the peer, the peer answers only
    /// once it has been woken and got a core, perhaps the one we would spin on: poll or sleep,
    /// whichever has lately been quicker (see `post_wake_polls`). Otherwise spin for the learnt
    /// budget (see `spin_budget`).
    pub(crate) fn plan(&mut self) -> Plan {
        if take_woke_peer() {
            if self.post_wake_polls() {
                Plan::PollAfterWake
            } else {
                Plan::SleepAfterWake
            }
        } else {
            Plan::Spin(self.spin_budget())
        }
    }

    /// Folds the end of a wait that went by `plan` into what the policy knows: data came
    /// while it polled (`slept` false) or only after it went to sleep, `took()` after the wait
    /// began (asked only when the plan needs it: a clock read per message is not free). Call it
    /// only for waits that ended with data: one that ends in a timeout or an error says nothing
    /// about whether polling pays.
    #[inline]
    pub(crate) fn learn(&mut self, plan: Plan, slept: bool, took: impl FnOnce() -> Duration) {
        match plan {
            Plan::Spin(budget) if !budget.is_zero() => self.learn_spin(!slept),
            Plan::SleepAfterWake => self.learn_post_wake(took()),
            _ => {}
        }
    }

    /// Folds the outcome of a spin into the moving average: it found data (`hit`), or it ran
    /// out and data came only after the waiter went to sleep.
    #[inline]
    fn learn_spin(&mut self, hit: bool) {
        self.since_spin = 0;
        self.hit_share = self.hit_share - self.hit_share / 8 + if hit { ONE / 8 } else { 0 };
    }

    /// How long `Block` spins before it sleeps: [`BLOCK_SPIN`], or nothing when too few of its
    /// recent spins found data (bar an occasional probe). The length is fixed rather than
    /// fitted to how soon recent spins found data: a spin cut to the typical wait misses the
    /// slightly longer ones, and each miss costs a sleep and a wake-up on both sides.
    fn spin_budget(&mut self) -> Duration {
        // Under loom the models check the sleep path; spinning would only add polls.
        if cfg!(loom) {
            return Duration::ZERO;
        }
        if self.hit_share < MIN_HIT_SHARE {
            self.since_spin += 1;
            if self.since_spin < PROBE_EVERY {
                return Duration::ZERO;
            }
        }
        BLOCK_SPIN
    }

    /// Right after waking the peer: poll (`true`, for at most [`POST_WAKE_SPIN`], yielding
    /// between batches) or sleep at once (`false`). Sleeping at once is right when the woken
    /// peer gets a core quickly: on a busy machine it may need ours, and a wake-up there takes a
    /// few microseconds. When most of those sleeps last longer than [`SLOW_WAKE`], the cores
    /// are idle and each wake-up is paid twice per round trip; polling then keeps our core
    /// awake, catches the answer as soon as it comes, and lets the two ends fall back into
    /// spinning. One post-wake wait in [`POST_WAKE_EXPLORE`] sleeps anyway, to notice the
    /// machine getting busy.
    fn post_wake_polls(&mut self) -> bool {
        if cfg!(loom) {
            return false;
        }
        self.post_wakes = self.post_wakes.wrapping_add(1);
        self.slow_wakes > ONE / 2 && self.post_wakes % POST_WAKE_EXPLORE != 0
    }

    /// Folds how long a sleep right after waking the peer took into [`Policy::slow_wakes`]. Only
    /// a sleep that a poll of [`POST_WAKE_SPIN`] would have saved counts as slow: a longer one
    /// waited for the peer to have something to say (a paced exchange), not for a core.
    fn learn_post_wake(&mut self, took: Duration) {
        let slow = took > self.slow_wake && took <= POST_WAKE_SPIN;
        self.slow_wakes = self.slow_wakes - self.slow_wakes / 8 + if slow { ONE / 8 } else { 0 };
    }
}

/// The waiting state of one half of a channel: its strategy, what it learnt from its recent
/// waits, and its registration with the death watcher.
///
/// Must be dropped before the mapping holding the wait cells it slept on is unmapped (its
/// registration points at a futex word in there, and asks about the peer through the mapping's
/// descriptor).
pub(crate) struct Waiter {
    strategy: WaitStrategy,
    policy: Policy,
    watch: Watch,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter")
            .field("strategy", &self.strategy)
            .field("policy", &self.policy)
            .field("watched", &matches!(self.watch, Watch::Watched(..)))
            .finish()
    }
}

#[cfg(not(loom))]
thread_local! {
    /// Set when this thread's last publish woke a sleeping peer: the peer needs a core (maybe
    /// ours) and a wake-up before it can answer, so our next wait does not spin (see
    /// `Policy::plan`).
    static WOKE_PEER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Takes the "just woke the peer" mark of this thread.
#[inline]
fn take_woke_peer() -> bool {
    #[cfg(not(loom))]
    {
        WOKE_PEER.with(|w| w.replace(false))
    }
    #[cfg(loom)]
    {
        false
    }
}

impl Waiter {
    /// A waiter that has not waited yet.
    pub(crate) fn new(strategy: WaitStrategy) -> Waiter {
        Waiter {
            strategy,
            policy: Policy::default(),
            watch: Watch::Pending,
        }
    }

    /// Waits until `ready()` returns true.
    ///
    /// When the peer closed or died, `ready()` is tried once more (so data sent just before is
    /// still delivered) and the error is returned. `cell` is where `Block` sleeps. Returns
    /// [`Error::Timeout`] past `deadline`.
    #[inline]
    pub(crate) fn wait_until(
        &mut self,
        cell: &WaitCell,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> bool,
        peer: &mut impl Peer,
    ) -> Result<()> {
        if ready() {
            return Ok(());
        }
        let started = Instant::now();
        match self.strategy {
            WaitStrategy::Block => self.wait_block(cell, started, deadline, &mut ready, peer),
            _ => self.wait_spin(started, deadline, &mut ready, peer),
        }
    }

    /// Makes sure the death watcher covers the peer, on `cell`'s futex word: `Ok(true)` while
    /// it does, `Ok(false)` when it cannot (the peer has not connected yet, no pidfds, a peer in
    /// another pid namespace), `Err` once the peer closed or its process is gone.
    ///
    /// Read `cell`'s futex word (Acquire) before calling this: the watcher records a death
    /// before it bumps the word, so a sleeper that read the word first and then found no death
    /// here is woken by the bump (see the module docs).
    pub(crate) fn watch(&mut self, cell: &WaitCell, peer: &mut impl Peer) -> Result<bool> {
        if let Watch::Pending = self.watch {
            if let Some((pid, start_time)) = peer.process() {
                self.watch =
                    match DeathWatch::register(pid, start_time, &cell.futex, peer.holds_end()) {
                        Some(w) => Watch::Watched(w),
                        None => Watch::Unavailable,
                    };
                // Whatever the watcher will say, the process may be gone already.
                peer.check(true)?;
            }
        }
        match &self.watch {
            Watch::Watched(w) => {
                if w.take_news() {
                    // The process the peer recorded exited, or the peer's end looked free: its
                    // end decides (a peer may have recorded another process, and a look may
                    // have caught a tool holding a dead peer's end for a moment: then the
                    // watcher looks again within a second).
                    peer.check(true)?;
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// `Spin` and `SpinYield`: poll, looking at the peer every [`CHECK_INTERVAL`].
    fn wait_spin(
        &mut self,
        started: Instant,
        deadline: Option<Instant>,
        ready: &mut impl FnMut() -> bool,
        peer: &mut impl Peer,
    ) -> Result<()> {
        let mut next_check = started + CHECK_INTERVAL;
        let backoff = Backoff::new();
        loop {
            for _ in 0..SPINS_PER_CLOCK_READ {
                if ready() {
                    return Ok(());
                }
                if self.strategy == WaitStrategy::Spin {
                    std::hint::spin_loop();
                } else if backoff.is_completed() {
                    std::thread::yield_now();
                } else {
                    backoff.snooze();
                }
            }
            let now = Instant::now();
            if self.strategy == WaitStrategy::Spin
                && now.duration_since(started) >= SPIN_POLITE_AFTER
            {
                std::thread::yield_now();
            }
            if now >= next_check {
                if let Err(e) = peer.check(true) {
                    return finish(ready, e);
                }
                next_check = now + CHECK_INTERVAL;
            }
            if deadline.is_some_and(|d| now >= d) {
                return finish(ready, Error::Timeout);
            }
        }
    }

    /// `Block`: poll as the policy plans (yielding between batches right after waking the
    /// peer), then sleep until woken, and teach the policy how it went.
    fn wait_block(
        &mut self,
        cell: &WaitCell,
        started: Instant,
        deadline: Option<Instant>,
        ready: &mut impl FnMut() -> bool,
        peer: &mut impl Peer,
    ) -> Result<()> {
        let plan = self.policy.plan();
        let (budget, polite) = plan.poll();
        if !budget.is_zero() {
            let until = started + budget;
            loop {
                for _ in 0..SPINS_PER_CLOCK_READ {
                    if ready() {
                        self.policy.learn(plan, false, || started.elapsed());
                        return Ok(());
                    }
                    std::hint::spin_loop();
                }
                let now = Instant::now();
                if now >= until || deadline.is_some_and(|d| now >= d) {
                    break;
                }
                if polite {
                    std::thread::yield_now();
                }
            }
        }
        if self.sleep_until(cell, deadline, ready, peer)? {
            self.policy.learn(plan, true, || started.elapsed());
        }
        Ok(())
    }

    /// Sleeps until `ready()`: `Ok(true)` once it is, or the error that ends the wait (data
    /// that arrived meanwhile wins over it, see `finish`, as `Ok(false)`).
    fn sleep_until(
        &mut self,
        cell: &WaitCell,
        deadline: Option<Instant>,
        ready: &mut impl FnMut() -> bool,
        peer: &mut impl Peer,
    ) -> Result<bool> {
        loop {
            // A: Acquire, pairs with the Release increments in `wake` and in the death watcher
            // (see the module docs); it must come before the looks at the peer below.
            let seen = cell.futex.load(Ordering::Acquire);
            let (timeout, unwatched) = match self.prepare_sleep(cell, peer, deadline) {
                Ok(Some(t)) => t,
                Ok(None) => return finish(ready, Error::Timeout).map(|()| false),
                Err(e) => return finish(ready, e).map(|()| false),
            };
            if sleep(cell, seen, timeout, ready) || ready() {
                return Ok(true);
            }
            if unwatched {
                if let Err(e) = peer.check(true) {
                    return finish(ready, e).map(|()| false);
                }
            }
        }
    }

    /// The looks at the peer before a sleep, after the futex word was read: `Err` if the peer
    /// closed or died, `Ok(None)` past the deadline, else how long to sleep and whether nobody
    /// watches the peer's process for us.
    fn prepare_sleep(
        &mut self,
        cell: &WaitCell,
        peer: &mut impl Peer,
        deadline: Option<Instant>,
    ) -> Result<Option<(Option<Duration>, bool)>> {
        let watched = self.watch(cell, peer)?;
        peer.check(false)?;
        let now = Instant::now();
        let left = match deadline {
            Some(d) if now >= d => return Ok(None),
            Some(d) => Some(d - now),
            None => None,
        };
        Ok(Some(if watched {
            (left, false)
        } else {
            (
                Some(left.map_or(UNWATCHED_SLICE, |l| l.min(UNWATCHED_SLICE))),
                true,
            )
        }))
    }
}

/// The end of a wait that failed with `e`: data that arrived meanwhile wins.
#[inline]
fn finish(ready: &mut impl FnMut() -> bool, e: Error) -> Result<()> {
    if ready() {
        Ok(())
    } else {
        Err(e)
    }
}

/// Announces a sleeper on `cell` and sleeps while the futex word still holds `seen` (for at
/// most `timeout`), unless `ready()` turns true after announcing. True if it saw `ready()`.
fn sleep(
    cell: &WaitCell,
    seen: u32,
    timeout: Option<Duration>,
    ready: &mut impl FnMut() -> bool,
) -> bool {
    // Relaxed RMW, ordered by the SeqCst fence F1 right after it.
    cell.sleepers.fetch_add(1, Ordering::Relaxed);
    // F1: see the module docs; pairs with F2 in `wake_if_sleeping`.
    fence(Ordering::SeqCst);
    let now_ready = ready();
    if !now_ready {
        sync::futex_wait(&cell.futex, seen, timeout);
    }
    cell.sleepers.fetch_sub(1, Ordering::Relaxed);
    now_ready
}

/// Wakes whoever sleeps on `cell`, if anyone announced it. Called after publishing.
#[inline]
pub(crate) fn wake_if_sleeping(cell: &WaitCell) {
    // F2: see the module docs; pairs with F1 in `sleep`.
    fence(Ordering::SeqCst);
    // Relaxed: ordered by F2.
    if cell.sleepers.load(Ordering::Relaxed) != 0 {
        wake(cell);
        #[cfg(not(loom))]
        WOKE_PEER.with(|w| w.set(true));
    }
}

/// Wakes every sleeper on `cell` unconditionally (used on close, after the closed state is
/// stored).
pub(crate) fn wake(cell: &WaitCell) {
    // Release: pairs with the Acquire load A of the futex word in `Waiter::wait_block`.
    cell.futex.fetch_add(1, Ordering::Release);
    sync::futex_wake(&cell.futex);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::AtomicU32;

    /// A peer that is always there and never tells its process.
    struct Anonymous;

    impl Peer for Anonymous {
        fn check(&mut self, _process: bool) -> Result<()> {
            Ok(())
        }
        fn process(&mut self) -> Option<(u32, u64)> {
            None
        }
        fn holds_end(&self) -> HoldsEnd {
            Box::new(|| true)
        }
    }

    #[test]
    fn after_waking_its_peer_block_polls_only_while_sleeps_wait_for_an_idle_core() {
        let mut p = Policy::default();
        let polls = |p: &mut Policy| {
            (0..POST_WAKE_EXPLORE)
                .filter(|_| p.post_wake_polls())
                .count()
        };
        assert_eq!(polls(&mut p), 0, "a new policy sleeps at once after a wake");
        // Sleeps that a short poll would have saved: the peer's core was waking from idle.
        for _ in 0..16 {
            p.learn(Plan::SleepAfterWake, true, || Duration::from_micros(60));
        }
        assert_eq!(
            polls(&mut p),
            POST_WAKE_EXPLORE as usize - 1,
            "polls, but still sleeps once in a while to notice a busy machine"
        );
        // Quick wake-ups (a busy machine) or long gaps (a paced peer): sleep at once again.
        for took in [Duration::from_micros(3), Duration::from_millis(1)] {
            let mut p = Policy::default();
            for _ in 0..16 {
                p.learn(Plan::SleepAfterWake, true, || Duration::from_micros(60));
            }
            for _ in 0..16 {
                p.learn(Plan::SleepAfterWake, true, || took);
            }
            assert_eq!(
                polls(&mut p),
                0,
                "sleeps of {took:?} do not call for polling"
            );
        }
    }

    #[test]
    fn a_task_polls_after_waking_its_peer_whenever_that_beats_a_sleep() {
        // Quick post-wake sleeps (a busy machine): a thread keeps sleeping at once, a task,
        // whose every sleep costs two hand-offs through the reactor, polls.
        for (mut p, polls) in [(Policy::default(), false), (Policy::for_tasks(), true)] {
            for _ in 0..16 {
                p.learn(Plan::SleepAfterWake, true, || Duration::from_micros(3));
            }
            assert_eq!(p.post_wake_polls(), polls, "{p:?}");
        }
    }

    #[test]
    fn block_stops_spinning_when_spins_miss_and_probes_until_they_hit_again() {
        let mut p = Policy::default();
        assert_eq!(
            p.plan(),
            Plan::Spin(BLOCK_SPIN),
            "a new policy spins a little"
        );
        for _ in 0..16 {
            p.learn(Plan::Spin(BLOCK_SPIN), true, || BLOCK_SPIN * 2);
        }
        let mut spins = 0;
        for _ in 0..PROBE_EVERY {
            if p.plan() != Plan::Spin(Duration::ZERO) {
                spins += 1;
            }
        }
        assert_eq!(spins, 1, "only the probe spins once spins miss");
        // A wait that did not spin teaches nothing.
        p.learn(Plan::Spin(Duration::ZERO), false, || Duration::ZERO);
        for _ in 0..16 {
            p.learn(Plan::Spin(BLOCK_SPIN), false, || Duration::from_micros(1));
        }
        assert_eq!(p.plan(), Plan::Spin(BLOCK_SPIN), "spins hit again: spin");
    }

    fn cell() -> WaitCell {
        WaitCell {
            futex: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        }
    }

    #[test]
    fn an_unwatched_sleeper_keeps_its_deadline() {
        let cell = cell();
        let mut w = Waiter::new(WaitStrategy::Block);
        let timeout = Duration::from_millis(30);
        let started = Instant::now();
        let r = w.wait_until(&cell, Some(started + timeout), || false, &mut Anonymous);
        assert!(matches!(r, Err(Error::Timeout)), "{r:?}");
        assert!(started.elapsed() >= timeout, "ended before its deadline");
        assert!(matches!(w.watch, Watch::Pending), "nothing to watch");
        assert_eq!(cell.sleepers.load(Ordering::Relaxed), 0);
    }

    /// A peer that recorded this very process (which the death watcher can watch, and which
    /// outlives the test) and holds its end until `holds` is cleared.
    struct Recorded {
        holds: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    impl Recorded {
        fn new() -> Recorded {
            Recorded {
                holds: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            }
        }
    }

    impl Peer for Recorded {
        fn check(&mut self, process: bool) -> Result<()> {
            if process && !self.holds.load(Ordering::Relaxed) {
                return Err(Error::PeerGone {
                    channel: "recorded".into(),
                    pid: std::process::id(),
                });
            }
            Ok(())
        }
        fn process(&mut self) -> Option<(u32, u64)> {
            let start = crate::sys::start_time_at("/proc/self/stat")?;
            Some((std::process::id(), start))
        }
        fn holds_end(&self) -> HoldsEnd {
            let holds = self.holds.clone();
            Box::new(move || holds.load(Ordering::Relaxed))
        }
    }

    /// CPU time the calling thread has used so far.
    fn thread_cpu() -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    /// A watched sleeper sleeps with no timeout (the death watcher covers its peer): only the
    /// waker's wake-up can end this wait before its distant deadline, and it must, soon, having
    /// used next to no CPU meanwhile.
    #[test]
    fn a_watched_sleeper_sleeps_until_a_wake_ends_its_sleep() {
        let cell = cell();
        let mut w = Waiter::new(WaitStrategy::Block);
        let mut peer = Recorded::new();
        let deadline = Duration::from_secs(20);
        let asleep_for = Duration::from_millis(300);
        let data = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                // Give the waiter time to fall asleep; a bounded sleep, nothing to poll for.
                std::thread::sleep(asleep_for);
                data.store(true, std::sync::atomic::Ordering::Release);
                wake_if_sleeping(&cell);
            });
            let (started, cpu) = (Instant::now(), thread_cpu());
            let r = w.wait_until(
                &cell,
                Some(started + deadline),
                || data.load(std::sync::atomic::Ordering::Acquire),
                &mut peer,
            );
            let (took, cpu) = (started.elapsed(), thread_cpu() - cpu);
            assert!(r.is_ok(), "{r:?}");
            assert!(
                matches!(w.watch, Watch::Watched(_)),
                "the watcher covers the peer, so the sleep has no timed slices"
            );
            assert!(
                took < deadline / 4,
                "the wait ended only after {took:?}: not by the wake"
            );
            assert!(
                cpu * 10 < took,
                "used {cpu:?} of CPU in {took:?}: it did not sleep"
            );
        });
        assert_eq!(cell.sleepers.load(Ordering::Relaxed), 0);
    }

    /// The death watcher's look at the peer's end wakes a watched sleeper whose peer let go of
    /// its end while the process it recorded lives on.
    #[test]
    fn a_watched_sleeper_hears_within_seconds_that_its_peer_let_go_of_its_end() {
        let cell = cell();
        let mut w = Waiter::new(WaitStrategy::Block);
        let mut peer = Recorded::new();
        let holds = peer.holds.clone();
        let deadline = Duration::from_secs(20);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                holds.store(false, Ordering::Relaxed);
            });
            w.wait_until(&cell, Some(Instant::now() + deadline), || false, &mut peer)
        });
        assert!(matches!(r, Err(Error::PeerGone { .. })), "{r:?}");
        assert!(matches!(w.watch, Watch::Watched(_)));
    }
}
