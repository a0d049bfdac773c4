//! The waiting state of one half of a channel: its blocking waits, which sleep through the
//! handshake of `handshake.rs` (see the module docs of `crate::wait`).

use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;

use super::policy::{note_woke_peer, Policy};
use super::{WaitStrategy, CHECK_INTERVAL, SPINS_PER_CLOCK_READ, UNWATCHED_SLICE};
use crate::error::WaitError as Error;

type Result<T, E = Error> = std::result::Result<T, E>;
use super::handshake::{self, WaitCell};
use crate::sync::DeathWatch;
use crate::sys::HoldsEnd;

/// After spinning this long without data, `Spin` yields the core once per batch of polls, so a
/// peer that shares the core (an oversubscribed machine) gets to run instead of waiting for the
/// end of our time slice. A message that arrives sooner never pays for it.
const SPIN_POLITE_AFTER: Duration = Duration::from_micros(20);

/// What a waiter needs to know about the other endpoint.
pub(crate) trait Peer {
    /// `Err` once the peer closed (`Disconnected`) or, when `process` is true, once
    /// its process is gone (`PeerGone`). With `process` false this is one load from
    /// the mapping.
    fn check(&mut self, process: bool) -> Result<()>;
    /// The channel's name, for the `Timeout` a wait past its deadline returns.
    fn channel(&self) -> crate::error::ChannelName;
    /// The pid and process start time (clock ticks since boot) the peer recorded, once it is
    /// connected. The peer chose them: they say which process to watch, never whether the peer
    /// is alive.
    fn process(&mut self) -> Option<(u32, u64)>;
    /// What the death watcher asks, on its own thread, about once a second: whether the peer
    /// still holds its end. Called once the peer is connected.
    fn holds_end(&self) -> HoldsEnd;
    /// A flag of this process that the death watcher raises each time it has news of the
    /// peer (see [`DeathWatch::register`]), for code that looks at the peer without sleeping
    /// (a sender, before each send). None by default.
    fn alarm(&self) -> Option<std::sync::Arc<crate::sys::Alarm>> {
        None
    }
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
    /// Sleeps in the kernel since [`take_sleeps`](Waiter::take_sleeps) last asked.
    sleeps: u64,
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

impl Waiter {
    /// How this waiter waits.
    pub(crate) fn strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// A waiter that has not waited yet.
    pub(crate) fn new(strategy: WaitStrategy) -> Waiter {
        Waiter {
            strategy,
            policy: Policy::default(),
            watch: Watch::Pending,
            sleeps: 0,
        }
    }

    /// How many times this waiter went to sleep in the kernel since the last call (for the
    /// counters).
    pub(crate) fn take_sleeps(&mut self) -> u64 {
        std::mem::take(&mut self.sleeps)
    }

    /// Waits until `ready()` returns true.
    ///
    /// When the peer closed or died, `ready()` is tried once more (so data sent just before is
    /// still delivered) and the error is returned. `cell` is where `Block` sleeps. Returns
    /// `Timeout` past `deadline`.
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
        match self.strategy {
            WaitStrategy::Block => self.wait_block(cell, deadline, &mut ready, peer),
            _ => self.wait_spin(deadline, &mut ready, peer),
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
        self.register(cell, peer)?;
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

    /// Registers the peer with the death watcher, on `cell`'s futex word, unless that was
    /// tried already or the peer has not connected yet: `Err` once the peer closed or its
    /// process is gone (asked right after a registration, which may come after the death).
    pub(crate) fn register(&mut self, cell: &WaitCell, peer: &mut impl Peer) -> Result<()> {
        if let Watch::Pending = self.watch {
            if let Some((pid, start_time)) = peer.process() {
                self.watch = match DeathWatch::register(
                    pid,
                    start_time,
                    &cell.futex,
                    peer.holds_end(),
                    peer.alarm(),
                ) {
                    Some(w) => Watch::Watched(w),
                    None => Watch::Unavailable,
                };
                // Whatever the watcher will say, the process may be gone already.
                peer.check(true)?;
            }
        }
        Ok(())
    }

    /// `Spin` and `SpinYield`: poll, looking at the peer every [`CHECK_INTERVAL`].
    ///
    /// The clock is first read after the first batch of polls (where the deadline is first
    /// looked at in any case): a message that arrives within it, as in a ping-pong, costs
    /// no clock read. The intervals then count from that read.
    fn wait_spin(
        &mut self,
        deadline: Option<Instant>,
        ready: &mut impl FnMut() -> bool,
        peer: &mut impl Peer,
    ) -> Result<()> {
        // (started, next_check), from the first look at the clock.
        let mut clock: Option<(Instant, Instant)> = None;
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
                    // A yield may give the core away for a whole time slice on a busy machine:
                    // the clock is read (and the peer looked at when due) after every one, not
                    // after a batch of them.
                    break;
                } else {
                    backoff.snooze();
                }
            }
            let now = Instant::now();
            let (started, next_check) = clock.get_or_insert((now, now + CHECK_INTERVAL));
            if self.strategy == WaitStrategy::Spin
                && now.duration_since(*started) >= SPIN_POLITE_AFTER
            {
                std::thread::yield_now();
            }
            if now >= *next_check {
                if let Err(e) = peer.check(true) {
                    return finish(ready, e);
                }
                *next_check = now + CHECK_INTERVAL;
            }
            if deadline.is_some_and(|d| now >= d) {
                return finish(
                    ready,
                    Error::Timeout {
                        channel: peer.channel(),
                    },
                );
            }
        }
    }

    /// `Block`: poll as the policy plans (yielding between batches right after waking the
    /// peer), then sleep until woken, and teach the policy how it went.
    ///
    /// As in `wait_spin`, a wait that polls first reads the clock only after its first batch
    /// of polls, and its budget counts from there; a wait that sleeps at once reads it first
    /// (the policy times that sleep).
    fn wait_block(
        &mut self,
        cell: &WaitCell,
        deadline: Option<Instant>,
        ready: &mut impl FnMut() -> bool,
        peer: &mut impl Peer,
    ) -> Result<()> {
        let plan = self.policy.plan();
        let (budget, polite) = plan.poll();
        let started = if budget.is_zero() {
            let now = Instant::now();
            Policy::note_time(now);
            now
        } else {
            let mut started = None;
            let mut last = None;
            loop {
                for _ in 0..SPINS_PER_CLOCK_READ {
                    if ready() {
                        // A post-wake poll is timed from the first batch's look at the
                        // clock: a wait that ends within the first batch took next to nothing.
                        self.policy.learn(plan, false, || {
                            started.map_or(Duration::ZERO, |s: Instant| s.elapsed())
                        });
                        return Ok(());
                    }
                    std::hint::spin_loop();
                }
                let now = Instant::now();
                match last.replace(now) {
                    // A batch of polls (and the yield before it) that lost its core.
                    Some(last) => self.policy.note_poll_batch(last, now),
                    None => Policy::note_time(now),
                }
                let began = *started.get_or_insert(now);
                if now >= began + budget || deadline.is_some_and(|d| now >= d) {
                    break began;
                }
                if polite {
                    std::thread::yield_now();
                }
            }
        };
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
            // A: before the looks at the peer below (see `handshake::observe`).
            let seen = handshake::observe(cell);
            let (timeout, unwatched) = match self.prepare_sleep(cell, peer, deadline) {
                Ok(Some(t)) => t,
                Ok(None) => {
                    return finish(
                        ready,
                        Error::Timeout {
                            channel: peer.channel(),
                        },
                    )
                    .map(|()| false)
                }
                Err(e) => return finish(ready, e).map(|()| false),
            };
            self.sleeps += 1;
            if handshake::sleep(cell, seen, timeout, ready) || ready() {
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

/// Wakes whoever sleeps on `cell`, if anyone announced it (the waker's side of the
/// handshake, `handshake::wake_if_sleeping`), and tells the policy that this thread woke its
/// peer. Called after publishing.
/// Whether it made the call.
#[inline]
pub(crate) fn wake_if_sleeping(cell: &WaitCell) -> bool {
    let woke = handshake::wake_if_sleeping(cell);
    if woke {
        note_woke_peer();
    }
    woke
}

/// [`wake_if_sleeping_and`] for a writer that many readers sleep on, each on a cell of its
/// own (a topic's publisher): one F2 for all of them (`handshake::after_publish`), then `each`
/// hands every cell a reader may sleep on, with the test of whether an earlier wake-up covers
/// it, to the function it is given.
/// Whether it woke any.
#[inline]
pub(crate) fn wake_readers(
    each: impl FnOnce(&mut dyn FnMut(&WaitCell, &mut dyn FnMut() -> bool)),
) -> bool {
    let mut woke = false;
    handshake::after_publish(|| {
        each(&mut |cell, needed| woke |= handshake::wake_if_announced(cell, needed))
    });
    if woke {
        note_woke_peer();
    }
    woke
}

/// [`wake_if_sleeping`], waking only if `needed()` says that no earlier wake-up covers the
/// sleeper (see `handshake::wake_if_sleeping_and`): whether it made the call.
#[inline]
pub(crate) fn wake_if_sleeping_and(cell: &WaitCell, needed: impl FnOnce() -> bool) -> bool {
    let woke = handshake::wake_if_sleeping_and(cell, needed);
    if woke {
        note_woke_peer();
    }
    woke
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{AtomicU32, Ordering};

    /// A peer that is always there and never tells its process.
    struct Anonymous;

    impl Peer for Anonymous {
        fn check(&mut self, _process: bool) -> Result<()> {
            Ok(())
        }
        fn channel(&self) -> crate::error::ChannelName {
            "anonymous".into()
        }
        fn process(&mut self) -> Option<(u32, u64)> {
            None
        }
        fn holds_end(&self) -> HoldsEnd {
            Box::new(|| true)
        }
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
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
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
        fn channel(&self) -> crate::error::ChannelName {
            "recorded".into()
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
