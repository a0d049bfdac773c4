//! The `Block` policy: when to spin, when to sleep at once, when to poll after waking the peer,
//! learnt from recent waits. Its constants are tuned by measurement (`just waits`, and the
//! `clients` rows of the harness, `ipc-parent clients`, for the async waits).

#[cfg(not(loom))]
use std::cell::Cell;
use std::time::{Duration, Instant};

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
/// A post-wake average with no wait in it yet: never the quicker one.
const UNKNOWN: u32 = u32::MAX;
/// A sleep right after waking the peer that lasts longer than this means the peer's answer
/// waited for a core to wake up from idle, not for the work itself.
const SLOW_WAKE: Duration = Duration::from_micros(25);
/// Right after waking its peer, a `Block` endpoint tries the other way (poll instead of
/// sleeping at once, or the reverse) in one such wait in this many, to keep both timings
/// current as the machine gets busy or quiet.
const POST_WAKE_EXPLORE: u32 = 32;
/// A batch of polls (a hundred-odd loads of the ring and at most one `yield_now`:
/// microseconds) that the clock says took longer than this lost its core meanwhile: the
/// machine had more runnable threads than cores. No timer tick, and no quick turn of a peer
/// that shares the core, takes that long.
#[cfg_attr(loom, allow(dead_code))]
const DESCHEDULED: Duration = Duration::from_micros(250);
/// Once a poll lost its core on a thread that polls for several waits in turn (a runtime
/// thread serving many tasks), every `Block` wait of the thread sleeps at once for this long
/// (see [`Policy::note_poll_batch`]). Long enough that polling stays a small part of the time
/// while the machine is busy (it takes a time slice of polling to notice again), short enough
/// to resume soon once it is quiet.
#[cfg_attr(loom, allow(dead_code))]
const HOLD_OFF: Duration = Duration::from_millis(50);
/// A thread counts as polling for several waits until one wait has run this many batches in a
/// row (milliseconds of polling): the tasks of a runtime thread that mostly sleep take turns
/// at polling only now and then.
#[cfg_attr(loom, allow(dead_code))]
const SHARED_FOR: u32 = 1024;
/// A frame of at least this many bytes (header included) that a thread publishes or releases
/// sets the spin of the thread's next `Block` wait (see [`spin_for_frame`]). Smaller ones are
/// copied well within [`BLOCK_SPIN`] and leave it alone: the ring tests one length per message
/// and does nothing more for them.
pub(crate) const LARGE_FRAME: u64 = 16 * 1024;
/// How long the peer may take per KiB of a large frame before its answer (or the next frame
/// of a stream) is due, when it copies or checks the frame as it comes: a copy at 1 GB/s,
/// several times slower than a copy between two cores of a virtual machine, so that a spin
/// that is long enough for the copy is not cut short by a slow moment of the machine.
const SPIN_PER_KIB: Duration = Duration::from_micros(1);
/// The longest spin a large frame buys (2 MiB's worth): past it a sleep and a wake-up are a
/// few per cent of the copy, and a wait that outlasts its spin is cheaper asleep.
const LARGE_SPIN_MAX: Duration = Duration::from_millis(2);

/// What one endpoint learnt from its recent waits, and the plan for its next one: the policy of
/// [`WaitStrategy::Block`](super::WaitStrategy::Block), shared by the synchronous waits
/// ([`Waiter`](super::Waiter)) and the async ones (`crate::surface::tokio`), which differ only in how
/// they sleep.
#[derive(Clone, Debug)]
pub(crate) struct Policy {
    /// Moving average (weight 1/8) of the share of recent spins that found data, out of
    /// [`ONE`].
    hit_share: u32,
    /// Waits since the last spin, for the occasional probe.
    since_spin: u32,
    /// Moving average (weight 1/8), out of [`ONE`], of the share of sleeps right after waking
    /// the peer that took longer than `slow_wake` but no longer than [`POST_WAKE_SPIN`].
    slow_wakes: u32,
    /// Moving averages (weight 1/8), in nanoseconds, of how long a wait right after waking the
    /// peer took when it slept at once and when it polled first (see
    /// [`learn`](Policy::learn)); [`UNKNOWN`] before the first.
    post_wake_sleep: u32,
    post_wake_poll: u32,
    /// Waits right after waking the peer, for the occasional try of the other way.
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
    /// Right after waking the peer: sleep at once.
    SleepAfterWake,
}

impl Plan {
    /// Whether [`Policy::learn`] asks how long a wait by this plan took (only a wait right
    /// after waking the peer is timed): a caller that reads the clock only for that reads it
    /// only then.
    pub(crate) fn timed(self) -> bool {
        !matches!(self, Plan::Spin(_))
    }

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
            post_wake_sleep: UNKNOWN,
            post_wake_poll: UNKNOWN,
            post_wakes: 0,
            slow_wake: SLOW_WAKE,
        }
    }
}

impl Policy {
    /// The policy of an async task. A task's wake-up reaches it through its runtime (the I/O
    /// driver, or the reactor thread and then the runtime), which costs more than a thread's
    /// however idle the cores are: any sleep right after waking the peer that a poll of
    /// [`POST_WAKE_SPIN`] would have saved counts for polling (a task's poll yields to the
    /// runtime between batches, so the thread's other tasks still run).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn for_tasks() -> Policy {
        Policy {
            slow_wake: Duration::ZERO,
            ..Policy::default()
        }
    }

    /// How the next wait goes. While the machine has more runnable threads than CPUs (see
    /// `crowd.rs`) or this thread's polls are held off (see
    /// [`note_poll_batch`](Policy::note_poll_batch)), sleep at once and learn nothing: a poll
    /// would keep a CPU from a thread with work, perhaps the one that would answer. Right
    /// after this thread woke the peer, the peer answers only once it has been woken and got a
    /// core, perhaps the one we would spin on: poll or sleep,
    /// whichever has lately been quicker (see `post_wake_polls`). Otherwise spin for the learnt
    /// budget (see `spin_budget`).
    pub(crate) fn plan(&mut self) -> Plan {
        #[cfg(not(loom))]
        let crowded = super::crowd::crowded();
        #[cfg(loom)]
        let crowded = false;
        self.plan_in(crowded)
    }

    /// [`plan`](Policy::plan), told whether the machine is crowded.
    fn plan_in(&mut self, crowded: bool) -> Plan {
        // The thread's state is taken in any case: a mark of a woken peer is for the next
        // wait alone.
        match take_thread_state() {
            _ if crowded => Plan::Spin(Duration::ZERO),
            ThreadState::PollsHeld => Plan::Spin(Duration::ZERO),
            ThreadState::WokePeer if self.post_wake_polls() => Plan::PollAfterWake,
            ThreadState::WokePeer => Plan::SleepAfterWake,
            ThreadState::Plain => Plan::Spin(self.spin_budget(take_large_frame())),
        }
    }

    /// Tells the process-wide view of the machine the time, from a clock read that a wait
    /// made anyway (before it sleeps at once, or after a batch of polls): at most every few
    /// milliseconds, that reads how many threads are runnable (see `crowd.rs`). Never called on
    /// the path of a wait whose first look finds data.
    #[inline]
    pub(crate) fn note_time(now: Instant) {
        #[cfg(not(loom))]
        super::crowd::note_time(now, super::crowd::LOOK_EVERY);
        #[cfg(loom)]
        let _ = now;
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
            Plan::Spin(_) => {}
            Plan::SleepAfterWake => self.learn_post_wake_sleep(took()),
            // A poll that ran out and slept counts as at least its `POST_WAKE_SPIN` of
            // polling, which it spent for nothing.
            Plan::PollAfterWake => self.post_wake_poll = fold_time(self.post_wake_poll, took()),
        }
    }

    /// Tells the policy that one of its polls ran a batch from `began` to `ended`, with nothing
    /// but the batch (and at most a `yield_now`) on this thread in between.
    ///
    /// A batch longer than [`DESCHEDULED`] lost its core: the machine has more runnable threads
    /// than cores. The process then looks at the count of runnable threads without waiting for
    /// its next look (see [`note_time`](Policy::note_time)): if it confirms the crowd, every
    /// `Block` wait of the process sleeps at once. And if this thread recently polled for
    /// another wait too (a runtime thread serving several tasks; see [`SHARED_FOR`]), every
    /// `Block` wait of the thread sleeps at once for [`HOLD_OFF`] whatever the count says (or
    /// where it cannot be read). Such a thread's polls keep it runnable all the time, and
    /// a thread that never sleeps is the one the scheduler makes wait behind the busy ones, with
    /// every task it serves: sleeping serves them sooner. The policy's own averages cannot see
    /// it: a descheduled poll finds its data when it gets the core back, and counts as a hit.
    // Out of line: called only once a wait's first batch of polls found nothing, and kept out
    // of the waits that end within it.
    #[inline(never)]
    pub(crate) fn note_poll_batch(&self, began: Instant, ended: Instant) {
        let lost = ended.saturating_duration_since(began) > DESCHEDULED;
        #[cfg(not(loom))]
        THREAD.with(|polls| {
            // Which wait polled: the policy's address (a wait that moves between polls only
            // looks like another, and may hold off sooner).
            let me = std::ptr::from_ref(self) as usize;
            // The thread's first poll counts as alone: a thread is taken to poll for one
            // wait until it polls for another.
            let last = polls.last.replace(me);
            let alone = if last == me || last == 0 {
                polls.alone.get().saturating_add(1)
            } else {
                0
            };
            polls.alone.set(alone);
            if alone < SHARED_FOR && lost {
                polls.held_until.set(Some(ended + HOLD_OFF));
            }
        });
        #[cfg(not(loom))]
        super::crowd::note_time(
            ended,
            if lost {
                super::crowd::LOOK_AGAIN_AFTER
            } else {
                super::crowd::LOOK_EVERY
            },
        );
        #[cfg(loom)]
        let _ = lost;
    }

    /// Folds the outcome of a spin into the moving average: it found data (`hit`), or it ran
    /// out and data came only after the waiter went to sleep.
    #[inline]
    fn learn_spin(&mut self, hit: bool) {
        self.since_spin = 0;
        self.hit_share = fold(self.hit_share, if hit { ONE } else { 0 });
    }

    /// How long `Block` spins before it sleeps: [`BLOCK_SPIN`], or longer when this thread has
    /// just moved a frame of `large` bytes (see [`spin_for_frame`]), or nothing when too few
    /// of its recent spins found data (bar an occasional probe). The length is fixed rather
    /// than fitted to how soon recent spins found data: a spin cut to the typical wait misses
    /// the slightly longer ones, and each miss costs a sleep and a wake-up on both sides.
    fn spin_budget(&mut self, large: u64) -> Duration {
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
        spin_for_frame(large)
    }

    /// Right after waking the peer: poll (`true`, for at most [`POST_WAKE_SPIN`], yielding
    /// between batches) or sleep at once (`false`). Sleeping at once is right when the woken
    /// peer gets a core quickly and may need ours (a busy machine). Polling is right when most
    /// of those sleeps last longer than `slow_wake` (the cores are idle and each wake-up is
    /// paid twice per round trip), and also when recent polls found the answer sooner than
    /// recent sleeps did: on a quiet machine whose cores are awake a wake-up is quick, yet each
    /// sleep still costs one per message on both sides, where polling lets the two ends fall
    /// back into spinning. One post-wake wait in [`POST_WAKE_EXPLORE`] tries the other way, to
    /// keep both timings current; a new policy sleeps at once.
    fn post_wake_polls(&mut self) -> bool {
        if cfg!(loom) {
            return false;
        }
        self.post_wakes = self.post_wakes.wrapping_add(1);
        let explore = self.post_wakes % POST_WAKE_EXPLORE == 0;
        let polls = self.slow_wakes > ONE / 2 || self.post_wake_poll < self.post_wake_sleep;
        polls != explore
    }

    /// Folds how long a sleep right after waking the peer took into what the policy knows. A
    /// sleep longer than [`POST_WAKE_SPIN`] waited for the peer to have something to say (a
    /// paced exchange), not for a core: it counts against polling in the share of slow sleeps
    /// and is left out of the sleeps' average.
    fn learn_post_wake_sleep(&mut self, took: Duration) {
        let slow = took > self.slow_wake && took <= POST_WAKE_SPIN;
        self.slow_wakes = fold(self.slow_wakes, if slow { ONE } else { 0 });
        if took <= POST_WAKE_SPIN {
            self.post_wake_sleep = fold_time(self.post_wake_sleep, took);
        }
    }
}

/// How long a `Block` wait spins (when it spins) after its thread moved a frame of `large`
/// bytes (0: none of at least [`LARGE_FRAME`]): [`BLOCK_SPIN`], or [`SPIN_PER_KIB`] per KiB
/// of the frame, up to [`LARGE_SPIN_MAX`].
///
/// What the thread waits for next is the peer's copy of a frame of about that size: the
/// echo of the message it sent (which the peer reads and writes back), or the next frame of
/// a stream of such frames (which the producer writes while the consumer reads this one).
/// Copying a MiB takes tens of microseconds, longer than [`BLOCK_SPIN`], and a wait that
/// spins too little pays a sleep on its side and a wake-up on the peer's per message, where
/// spinning through the copy pays neither; a spin that ran out on such waits counts as a miss
/// as any other, so a peer that takes longer than its copy (paced, or short of a core) is
/// slept through again once too few spins find data.
fn spin_for_frame(large: u64) -> Duration {
    let per_kib = u32::try_from(large / 1024).unwrap_or(u32::MAX);
    SPIN_PER_KIB
        .saturating_mul(per_kib)
        .clamp(BLOCK_SPIN, LARGE_SPIN_MAX)
}

/// One step of a moving average of weight 1/8.
fn fold(average: u32, sample: u32) -> u32 {
    average - average / 8 + sample / 8
}

/// [`fold`] for the post-wake averages, in nanoseconds: the first wait replaces [`UNKNOWN`],
/// and a wait counts as at most a millisecond, so the averages stay far from overflowing.
fn fold_time(average: u32, took: Duration) -> u32 {
    let nanos = took.as_nanos().min(1_000_000) as u32;
    match average {
        UNKNOWN => nanos,
        a => fold(a, nanos),
    }
}

/// What the waits of one thread tell each other: whether its last publish woke a peer, and
/// what its polls told [`Policy::note_poll_batch`].
#[cfg(not(loom))]
struct ThreadWaits {
    /// Set when this thread's last publish woke a sleeping peer: the peer needs a core (maybe
    /// ours) and a wake-up before it can answer, so our next wait does not spin (see
    /// [`Policy::plan`]).
    woke_peer: Cell<bool>,
    /// The address of the policy whose poll ran the thread's last batch.
    last: Cell<usize>,
    /// How many batches in a row, up to the last, that policy ran (from [`SHARED_FOR`] for the
    /// thread's first).
    alone: Cell<u32>,
    /// Until when every `Block` wait of the thread sleeps at once.
    held_until: Cell<Option<Instant>>,
    /// The largest frame of at least [`LARGE_FRAME`] bytes the thread published or released
    /// since the plan of its last `Block` wait that could spin, or 0 (see [`note_large_frame`]).
    large_frame: Cell<u64>,
}

#[cfg(not(loom))]
impl ThreadWaits {
    /// A thread's state before any of its waits.
    const fn new() -> ThreadWaits {
        ThreadWaits {
            woke_peer: Cell::new(false),
            last: Cell::new(0),
            alone: Cell::new(SHARED_FOR),
            held_until: Cell::new(None),
            large_frame: Cell::new(0),
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    static THREAD: ThreadWaits = const { ThreadWaits::new() };
}

/// What [`Policy::plan`] learns of its thread: one look at the thread's state per wait.
#[cfg_attr(loom, allow(dead_code))]
enum ThreadState {
    /// The thread's polls are held off (see [`Policy::note_poll_batch`]).
    PollsHeld,
    /// The thread's last publish woke a sleeping peer.
    WokePeer,
    /// Neither.
    Plain,
}

/// Takes the "just woke the peer" mark of this thread, and says whether its polls are held
/// off now (reading the clock only while they were).
#[inline]
fn take_thread_state() -> ThreadState {
    #[cfg(not(loom))]
    {
        THREAD.with(|t| {
            let woke = t.woke_peer.replace(false);
            match t.held_until.get() {
                Some(until) if polls_held(t, until) => ThreadState::PollsHeld,
                _ if woke => ThreadState::WokePeer,
                _ => ThreadState::Plain,
            }
        })
    }
    #[cfg(loom)]
    {
        ThreadState::Plain
    }
}

/// Whether the hold on the thread's polls, `until`, lasts (and forgets it once it is over).
#[cfg(not(loom))]
#[cold]
fn polls_held(t: &ThreadWaits, until: Instant) -> bool {
    let held = Instant::now() < until;
    if !held {
        t.held_until.set(None);
    }
    held
}

/// Takes the largest frame of at least [`LARGE_FRAME`] bytes this thread moved since the last
/// take (0: none).
#[inline]
fn take_large_frame() -> u64 {
    #[cfg(not(loom))]
    {
        THREAD.with(|t| t.large_frame.replace(0))
    }
    #[cfg(loom)]
    {
        0
    }
}

/// Tells the policy that this thread published or released a frame of `size` bytes, header
/// included, at least [`LARGE_FRAME`] (the ring calls it only for those): its next `Block`
/// wait that spins spins long enough for the peer to copy one like it (see
/// [`spin_for_frame`]).
#[cold]
#[inline(never)]
pub(crate) fn note_large_frame(size: u64) {
    #[cfg(not(loom))]
    THREAD.with(|t| t.large_frame.set(t.large_frame.get().max(size)));
    #[cfg(loom)]
    let _ = size;
}

/// Marks that this thread's last publish woke a sleeping peer (see `Policy::plan`).
#[inline]
pub(super) fn note_woke_peer() {
    #[cfg(not(loom))]
    THREAD.with(|t| t.woke_peer.set(true));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// How many of the next [`POST_WAKE_EXPLORE`] post-wake waits poll.
    fn polls(p: &mut Policy) -> usize {
        (0..POST_WAKE_EXPLORE)
            .filter(|_| p.post_wake_polls())
            .count()
    }

    #[test]
    fn after_waking_its_peer_block_polls_while_sleeps_wait_for_an_idle_core() {
        let mut p = Policy::default();
        assert_eq!(polls(&mut p), 1, "a new policy sleeps at once, bar one try");
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
                1,
                "sleeps of {took:?} do not call for polling"
            );
        }
    }

    #[test]
    fn after_waking_its_peer_block_polls_when_polls_have_been_quicker_than_quick_sleeps() {
        let mut p = Policy::default();
        // Sleeps of 8 us (a wake-up of a core that was awake) against polls that found the
        // answer within 2 us (a quiet machine): poll, bar one try of sleeping.
        for _ in 0..16 {
            p.learn(Plan::SleepAfterWake, true, || Duration::from_micros(8));
        }
        assert_eq!(polls(&mut p), 1, "no poll timed yet: sleeps, bar one try");
        for _ in 0..4 {
            p.learn(Plan::PollAfterWake, false, || Duration::from_micros(2));
        }
        assert_eq!(polls(&mut p), POST_WAKE_EXPLORE as usize - 1);
        // The machine got busy: polls wait for the core the peer needs, and run out.
        for _ in 0..16 {
            p.learn(Plan::PollAfterWake, true, || {
                POST_WAKE_SPIN + Duration::from_micros(20)
            });
        }
        assert_eq!(polls(&mut p), 1, "sleeps at once again");
        // A paced peer: sleeps that waited for its message leave the sleeps' average alone.
        let before = p.post_wake_sleep;
        for _ in 0..16 {
            p.learn(Plan::SleepAfterWake, true, || Duration::from_millis(1));
        }
        assert_eq!(p.post_wake_sleep, before);
        assert_eq!(polls(&mut p), 1);
    }

    #[test]
    fn a_task_polls_after_waking_its_peer_whenever_that_beats_a_sleep() {
        // Quick post-wake sleeps (a busy machine), no poll timed yet: a thread keeps sleeping
        // at once, a task, whose every sleep costs a trip through its runtime, polls.
        for (mut p, polls) in [(Policy::default(), false), (Policy::for_tasks(), true)] {
            for _ in 0..16 {
                p.learn(Plan::SleepAfterWake, true, || Duration::from_micros(3));
            }
            assert_eq!(p.post_wake_polls(), polls, "{p:?}");
        }
    }

    #[test]
    fn block_stops_spinning_when_spins_miss_and_probes_until_they_hit_again() {
        fresh_thread();
        let mut p = Policy::default();
        assert_eq!(
            p.plan_in(false),
            Plan::Spin(BLOCK_SPIN),
            "a new policy spins a little"
        );
        for _ in 0..16 {
            p.learn(Plan::Spin(BLOCK_SPIN), true, || BLOCK_SPIN * 2);
        }
        let mut spins = 0;
        for _ in 0..PROBE_EVERY {
            if p.plan_in(false) != Plan::Spin(Duration::ZERO) {
                spins += 1;
            }
        }
        assert_eq!(spins, 1, "only the probe spins once spins miss");
        // A wait that did not spin teaches nothing.
        p.learn(Plan::Spin(Duration::ZERO), false, || Duration::ZERO);
        for _ in 0..16 {
            p.learn(Plan::Spin(BLOCK_SPIN), false, || Duration::from_micros(1));
        }
        assert_eq!(
            p.plan_in(false),
            Plan::Spin(BLOCK_SPIN),
            "spins hit again: spin"
        );
    }

    #[test]
    fn every_wait_sleeps_at_once_and_learns_nothing_while_the_machine_is_crowded() {
        fresh_thread();
        let mut p = Policy::default();
        // A policy whose post-wake polls have been quicker than its post-wake sleeps.
        for _ in 0..16 {
            p.learn(Plan::SleepAfterWake, true, || Duration::from_micros(8));
        }
        for _ in 0..4 {
            p.learn(Plan::PollAfterWake, false, || Duration::from_micros(2));
        }
        let learnt = format!("{p:?}");
        note_woke_peer();
        assert_eq!(
            p.plan_in(true),
            Plan::Spin(Duration::ZERO),
            "right after waking the peer too"
        );
        assert_eq!(p.plan_in(true), Plan::Spin(Duration::ZERO));
        p.learn(Plan::Spin(Duration::ZERO), true, || {
            Duration::from_millis(1)
        });
        assert_eq!(format!("{p:?}"), learnt, "a crowded wait teaches nothing");
        // The crowd left: the crowded wait took the mark of the woken peer, so the next wait
        // spins; after the next wake-up, the post-wake plan is what it was.
        assert_eq!(p.plan_in(false), Plan::Spin(BLOCK_SPIN));
        note_woke_peer();
        assert_eq!(p.plan_in(false), Plan::PollAfterWake);
        fresh_thread();
    }

    #[test]
    fn a_large_frame_buys_its_next_wait_a_spin_as_long_as_its_copy_up_to_a_cap() {
        assert_eq!(
            spin_for_frame(0),
            BLOCK_SPIN,
            "no large frame: the usual spin"
        );
        assert_eq!(spin_for_frame(LARGE_FRAME), BLOCK_SPIN, "copied within it");
        assert_eq!(spin_for_frame(64 * 1024), SPIN_PER_KIB * 64);
        assert_eq!(spin_for_frame(1 << 20), SPIN_PER_KIB * 1024);
        assert_eq!(spin_for_frame(16 << 20), LARGE_SPIN_MAX);
        assert_eq!(spin_for_frame(u64::MAX), LARGE_SPIN_MAX, "no overflow");
    }

    #[test]
    fn a_large_frame_sets_the_spin_of_the_next_wait_only() {
        fresh_thread();
        let mut p = Policy::default();
        note_large_frame(64 * 1024);
        note_large_frame(1 << 20);
        note_large_frame(LARGE_FRAME);
        assert_eq!(
            p.plan_in(false),
            Plan::Spin(spin_for_frame(1 << 20)),
            "the largest frame since the last wait"
        );
        assert_eq!(
            p.plan_in(false),
            Plan::Spin(BLOCK_SPIN),
            "taken by that wait"
        );
        // After waking its peer a wait plans as before; the frame counts for the next spin.
        note_large_frame(1 << 20);
        note_woke_peer();
        assert_eq!(p.plan_in(false), Plan::SleepAfterWake);
        assert_eq!(p.plan_in(false), Plan::Spin(spin_for_frame(1 << 20)));
        // Spins that ran out, long as they were: sleep at once, large frame or not.
        for _ in 0..16 {
            p.learn(Plan::Spin(LARGE_SPIN_MAX), true, || LARGE_SPIN_MAX * 2);
        }
        note_large_frame(1 << 20);
        assert_eq!(p.plan_in(false), Plan::Spin(Duration::ZERO));
        fresh_thread();
    }

    /// Forgets what this thread's waits told each other (tests may share a thread, as with
    /// `--test-threads=1`).
    fn fresh_thread() {
        THREAD.with(|t| {
            let new = ThreadWaits::new();
            t.woke_peer.set(new.woke_peer.get());
            t.last.set(new.last.get());
            t.alone.set(new.alone.get());
            t.held_until.set(new.held_until.get());
            t.large_frame.set(new.large_frame.get());
        });
    }

    /// `n` batches of `p`'s polls of `length` each, said to end a minute from now: a hold they
    /// start lasts past any time this test thread spends descheduled before its next `plan`.
    fn batches(p: &Policy, n: u32, length: Duration) {
        for _ in 0..n {
            let ended = Instant::now() + Duration::from_secs(60);
            p.note_poll_batch(ended - length, ended);
        }
    }

    #[test]
    fn a_thread_polling_for_several_waits_sleeps_at_once_after_a_poll_lost_its_core() {
        fresh_thread();
        let (mut a, mut b) = (Policy::for_tasks(), Policy::for_tasks());
        batches(&a, 1, Duration::from_micros(5));
        batches(&b, 1, DESCHEDULED / 2);
        assert_eq!(
            a.plan_in(false),
            Plan::Spin(BLOCK_SPIN),
            "short batches hold nothing"
        );
        // Another wait's poll on this thread lost its core: every wait of the thread sleeps.
        batches(&a, 1, DESCHEDULED * 4);
        note_woke_peer();
        assert_eq!(a.plan_in(false), Plan::Spin(Duration::ZERO));
        assert_eq!(
            b.plan_in(false),
            Plan::Spin(Duration::ZERO),
            "and learns nothing"
        );
        // Until the hold ends (the held wait took the mark: no post-wake plan now).
        THREAD.with(|t| t.held_until.set(Some(Instant::now())));
        assert_eq!(a.plan_in(false), Plan::Spin(BLOCK_SPIN));
        fresh_thread();
    }

    #[test]
    fn a_thread_polling_for_one_wait_keeps_to_its_policy_when_a_poll_lost_its_core() {
        fresh_thread();
        let (mut a, b) = (Policy::default(), Policy::default());
        batches(&a, 1, DESCHEDULED * 4);
        assert_eq!(
            a.plan_in(false),
            Plan::Spin(BLOCK_SPIN),
            "a thread's first wait polls alone"
        );
        batches(&b, 1, Duration::from_micros(5));
        // One wait polling alone for long enough: no longer a shared thread.
        batches(&a, SHARED_FOR, Duration::from_micros(5));
        batches(&a, 1, DESCHEDULED * 4);
        assert_eq!(a.plan_in(false), Plan::Spin(BLOCK_SPIN));
        // Another wait polls on the thread again: it counts as shared once more.
        batches(&b, 1, Duration::from_micros(5));
        batches(&a, 1, DESCHEDULED * 4);
        assert_eq!(a.plan_in(false), Plan::Spin(Duration::ZERO));
        fresh_thread();
    }
}
