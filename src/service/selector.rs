//! One thread waiting on many channels: [`Selector`].
//!
//! The selector sleeps on the data futex words of every channel at once with `futex_waitv`
//! (Linux 5.16 and later), through the handshake every sleeper uses (`wait::handshake`): for
//! each channel it reads the futex word and announces a sleeper, then, after a `SeqCst` fence,
//! looks at every ring once more before it sleeps. A sender that publishes after that look sees the
//! announcement and wakes the word, so no wake-up is lost and the sender pays nothing new.
//!
//! A peer process that dies without closing is noticed the way a channel's own `Block` wait
//! notices it: the selector registers each channel's peer with the process's death watcher on
//! the very word it sleeps on (the registration of the channel's receiving half, shared with
//! its own receives), and the watcher records the death (the exit of the process the peer
//! recorded, or, whatever the peer recorded, its lock found free in the watcher's look once a
//! second) and wakes that word. So an idle selector makes no timed wake-ups at all; what
//! remains is the watcher's own look once a second, on its thread, while any peer is watched.
//!
//! Limits and degraded paths, all documented on [`Selector`]:
//! * a peer the watcher cannot cover (no pidfds, a peer in another pid namespace, a channel
//!   whose peer has not connected yet) is looked at every 10 ms, so the selector sleeps in
//!   slices of that length while there is one;
//! * at most 128 words per kernel wait: with more channels the selector works on the channels
//!   found ready lately (the last 16, `hot`) alone while they keep it busy: it looks at every
//!   channel once per [`HOT_SLICE`] and otherwise at those (a look at a thousand channels costs
//!   tens of microseconds), and sleeps on their words alone for as long as one of them was
//!   ready within [`HOT_LINGER`] (and at least [`HOT_SLICE`] per wait), so a busy client, or
//!   one that pauses between requests, is answered at the cost of a few channels, and a
//!   message on another channel may wait that slice. After that it announces a sleeper on
//!   every channel, sleeps on the first batch of words and hands every further batch of 127 to
//!   a thread of its pool (`pool.rs`), which sleeps on it and wakes the selector when a word
//!   changes. Each sleep
//!   that gets this far costs a wake-up of each pool thread to hand over its batch and one to
//!   call it off; an idle selector still makes no timed wake-ups. A wake-up from that sleep
//!   looks at the channels whose words changed alone: the others have nothing new since the
//!   look before the sleep;
//! * a wake-up with nothing to read behind it (a peer that bumps its word for nothing) does not
//!   end the sleep: the selector looks again at the channels whose words changed (the one the
//!   kernel named, or the words of a batch it did not name) and sleeps on with their new values
//!   (`rearm`), so its cost does not grow with the set; after [`SPURIOUS_MAX`] of them in one
//!   sleep it sleeps a [`POLL_SLICE`] without waiting on the words, then looks at every channel;
//! * a [`SelectorWaker`] (`Selector::waker`) raises a flag whose word every sleep of the
//!   selector waits on (one slot of its own batch): a wake ends the sleep at once, and a wake
//!   while it does not sleep stays raised and ends its next wait; the slices of the degraded
//!   paths below (a millisecond at most) end before the selector looks at the flag;
//! * channels whose receiving end waits with `Spin` or `SpinYield` are never woken by their
//!   peer, and without `futex_waitv` (kernels before 5.16) nothing is: in both cases
//!   the selector looks every millisecond instead of sleeping.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::listener::{Connection, Listener};
use super::pool::{Fired, Pool, PER_THREAD};
use crate::error::OpenError;
use crate::shm::channel::{Channel, RecvHalf};
use crate::shm::topic::Subscriber;
use crate::sys::{FutexWaitv, WaitAny, WAITV_MAX};
use crate::wait::handshake::{self, WakeFlag};
use crate::wait::{Policy, WaitStrategy, UNWATCHED_SLICE};
use sealed::Readable;
/// Keeps [`Selectable`] to the crate's own types, and says where each keeps its receiving half.
pub(crate) mod sealed {
    /// What the selector reads of a member of its set: its receiving half.
    pub trait Readable {
        fn reader(&mut self) -> &mut crate::shm::channel::RecvHalf;
    }
}

/// What a [`Selector`] waits on: a [`Channel`] (its receiving side), an accepted
/// [`Connection`], a topic's [`Subscriber`], or a reference or box of one. Sealed.
pub trait Selectable: sealed::Readable {}

impl sealed::Readable for Channel {
    fn reader(&mut self) -> &mut RecvHalf {
        self.split().1
    }
}
impl Selectable for Channel {}

impl sealed::Readable for Connection {
    fn reader(&mut self) -> &mut RecvHalf {
        self.channel().split().1
    }
}
impl Selectable for Connection {}

impl sealed::Readable for Subscriber {
    fn reader(&mut self) -> &mut RecvHalf {
        Subscriber::reader(self)
    }
}
impl Selectable for Subscriber {}

impl<T: Selectable + ?Sized> sealed::Readable for &mut T {
    fn reader(&mut self) -> &mut RecvHalf {
        (**self).reader()
    }
}
impl<T: Selectable + ?Sized> Selectable for &mut T {}

impl<T: Selectable + ?Sized> sealed::Readable for Box<T> {
    fn reader(&mut self) -> &mut RecvHalf {
        (**self).reader()
    }
}
impl<T: Selectable + ?Sized> Selectable for Box<T> {}

/// The sleep slice of the degraded paths.
const POLL_SLICE: Duration = Duration::from_millis(1);
/// How long the hot phase sleeps, on the recently ready channels alone, before the selector
/// sleeps on every channel with its pool's help.
const HOT_SLICE: Duration = Duration::from_millis(1);
/// How many recently ready channels the hot phase covers.
const HOT_MAX: usize = 16;
/// How long after the last wait that found a channel ready the hot phase lasts (at least
/// [`HOT_SLICE`] of each wait): a client that talks at least this often keeps the selector
/// sleeping on the recently ready channels alone, at the cost of a look at every channel once
/// per [`HOT_SLICE`].
const HOT_LINGER: Duration = Duration::from_millis(50);
/// Wake-ups with nothing to read one sleep takes before it sleeps a [`POLL_SLICE`] without
/// waiting on the words.
const SPURIOUS_MAX: u32 = 64;
/// `Selector::owners`: the listener's doorbell.
const BELL: usize = usize::MAX;
/// `Selector::owners`: the pool's woken word.
const WOKEN: usize = usize::MAX - 1;
/// `Selector::owners`: the word of the selector's wakers.
const WAKE: usize = usize::MAX - 2;

/// Waits on many channels from one thread and says which are ready.
///
/// A channel is *ready* when a frame is waiting in it or its peer is gone (closed, or its
/// process died: the next receive reports which). The set may hold channels, accepted
/// connections or topic subscribers ([`Selectable`]); a subscriber is also ready once it
/// lagged or was dropped (its next receive says so). [`wait`](Selector::wait) returns the indices
/// of the ready channels, starting at a point that moves on every call: serve each returned
/// channel once (one message, or a bounded batch) before waiting again, and a chatty channel
/// cannot starve the others.
///
/// ```no_run
/// use shmlink::{Config, Listener, Selector};
/// let listener = Listener::bind("svc", &Config::default())?;
/// let mut conns = Vec::new();
/// let mut selector = Selector::new();
/// loop {
///     // Accepts new clients into `conns` and returns the connections with something to read
///     // (the indices borrow the selector, not `conns`).
///     for &i in selector.wait_accept(&listener, &mut conns, None)? {
///         match conns[i].try_recv().map(|m| m.to_vec()) {
///             Ok(msg) => conns[i].send(&msg)?,
///             Err(e) if e.is_transient() => {}
///             Err(_) => {} // gone: removed below
///         }
///     }
///     conns.retain_mut(|c| c.is_peer_connected());
/// }
/// # Ok::<(), shmlink::Error>(())
/// ```
///
/// To stop such a loop without a polling timeout (on a signal, or from another thread), take a
/// [`waker`](Selector::waker) before it: its [`wake`](SelectorWaker::wake) ends the wait under
/// way (or the next one) with no ready channel, and [`woken`](Selector::woken) then says true
/// (the example on [`waker`](Selector::waker) is a whole server that shuts down so).
///
/// The receiving ends should wait with [`WaitStrategy::Block`] (the default): their peers only
/// make wake-up calls for ends that announced they may sleep. Then an idle selector sleeps
/// until a message, a close or a death wakes it, with no timed wake-ups (only the process's
/// death-watcher thread wakes, once a second, to look at the watched peers' locks): that
/// watcher (a thread holding a pidfd per peer) wakes it when a peer process
/// dies, so the dead peer's channel is ready at once and its next receive reports
/// [`RecvError::PeerGone`](crate::RecvError::PeerGone). A peer the watcher cannot cover (no pidfds,
/// a peer in another pid namespace, one that has not connected yet) is looked at every 10 ms
/// instead, as a `Block` receive does. Ends with another strategy, or a kernel without
/// `futex_waitv` (before 5.16), make the selector look every millisecond instead of sleeping
/// until woken.
///
/// One kernel wait takes at most 128 words. Over more channels a selector sleeps with the help
/// of threads of its own (one per further 127 channels, started when first needed, named
/// `shmlink-select`, ended when the selector drops). While the 16 channels found ready most
/// recently keep it busy (one of them ready within the last 50 ms), it looks at the others once
/// a millisecond and sleeps on those 16 alone (a millisecond at least in each wait) before it
/// sleeps on every channel: a message on another channel may wait that long while the
/// selector is busy, and a client that pauses between requests is answered as fast as a lone
/// channel's, for a look at every channel each millisecond (tens of microseconds over a
/// thousand channels). A sleep on every channel costs a wake-up of each helper thread to hand
/// over its words and one to call it off; the wake-up that ends it looks at the channels
/// whose words changed, not at every channel.
///
/// A peer that bumps and wakes its channel's futex word with nothing to read wakes the
/// selector, which looks at that channel again (not at every channel) and sleeps on; nothing is
/// reported for it. After 64 such wake-ups in one wait the selector sleeps a millisecond without
/// waiting on the words, so a peer that keeps on costs it a bounded share of a core whatever the
/// number of channels, and a message on another channel may wait that millisecond.
///
/// While the selector's thread is the only one receiving on the channels, every index a wait
/// returns is a channel with a message waiting or a peer gone, and no index comes twice in one
/// call.
#[derive(Debug, Default)]
pub struct Selector {
    start: usize,
    ready: Vec<usize>,
    waiters: Vec<FutexWaitv>,
    /// The words beyond the selector's own batch, for the pool's threads.
    spill: Vec<FutexWaitv>,
    /// What each word of `waiters` is: a channel's index, [`BELL`] or [`WOKEN`].
    owners: Vec<usize>,
    /// The channel of each word of `spill`.
    spill_owners: Vec<usize>,
    /// The channels of `recent` still in the set where they were, for this call.
    hot: Vec<usize>,
    /// Whether the scans look at the `hot` channels alone.
    narrow: bool,
    /// When every channel was last looked at; kept only while `pooled`.
    last_full: Option<Instant>,
    /// Whether this call's channels outnumber one kernel wait (the hot phase, and
    /// `last_full`, matter only then).
    pooled: bool,
    /// When a wait over more channels than one kernel wait takes last found one ready.
    last_ready: Option<Instant>,
    /// Channels whose sleeper count we raised, to lower again.
    announced: Vec<usize>,
    /// Scratch: the channels already announced in this sleep.
    marked: Vec<bool>,
    /// The channels found ready lately, as (index, address of the data word), most recent
    /// first: the hot phase sleeps on them alone.
    recent: Vec<(usize, usize)>,
    /// The threads that sleep on the words beyond the first batch.
    pool: Pool,
    /// Whether the last scan found a channel whose peer the death watcher does not cover.
    unwatched: bool,
    /// When the peers the death watcher does not cover were last looked at.
    last_check: Option<Instant>,
    /// Whether (and how long) a wait polls before it sleeps: learnt as a channel's `Block`
    /// wait learns it, since a selector's thread serves its channels as a `Block` end does.
    policy: Policy,
    /// The flag its [`SelectorWaker`]s raise, made by the first [`waker`](Selector::waker).
    wake: Option<Arc<WakeFlag>>,
    /// Whether the last wait was ended by a waker.
    woken: bool,
}

/// A handle that ends a [`Selector`]'s wait at once, from another thread or from a signal
/// handler: made by [`Selector::waker`], cloneable, `Send` and `Sync`.
///
/// [`wake`](SelectorWaker::wake) is one atomic store and one `FUTEX_WAKE` system call: no
/// allocation, no lock, so it is async-signal-safe. The wait it ends (the one under way, or
/// else the selector's next one) returns an empty set of ready channels, and
/// [`Selector::woken`] then says true. Waking a selector that has been dropped does nothing.
#[derive(Clone, Debug)]
pub struct SelectorWaker {
    flag: Arc<WakeFlag>,
}

impl SelectorWaker {
    /// Ends the selector's wait under way at once, or, if none is under way, its next wait
    /// (several wakes before a wait end that one wait). What the waking thread wrote before
    /// the call is visible to the selector's thread once [`Selector::woken`] says true.
    pub fn wake(&self) {
        self.flag.raise();
    }
}

/// What the wait loop needs of a set of channels.
trait Set {
    fn len(&self) -> usize;
    fn channel(&mut self, i: usize) -> &mut RecvHalf;
    /// The listener's doorbell, if new clients are accepted into the set.
    fn bell(&self) -> Option<&AtomicU32>;
    /// Accepts the clients waiting now.
    fn accept(&mut self) -> Result<(), OpenError>;
}

struct Plain<'a, C>(&'a mut [C]);

impl<C: Selectable> Set for Plain<'_, C> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn channel(&mut self, i: usize) -> &mut RecvHalf {
        self.0[i].reader()
    }
    fn bell(&self) -> Option<&AtomicU32> {
        None
    }
    fn accept(&mut self) -> Result<(), OpenError> {
        Ok(())
    }
}

struct Accepting<'a> {
    listener: &'a Listener,
    conns: &'a mut Vec<Connection>,
}

impl Set for Accepting<'_> {
    fn len(&self) -> usize {
        self.conns.len()
    }
    fn channel(&mut self, i: usize) -> &mut RecvHalf {
        self.conns[i].reader()
    }
    fn bell(&self) -> Option<&AtomicU32> {
        Some(self.listener.doorbell())
    }
    fn accept(&mut self) -> Result<(), OpenError> {
        loop {
            match self.listener.try_accept() {
                Ok(conn) => self.conns.push(conn),
                Err(OpenError::NoClient { .. }) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }
}

impl Selector {
    /// A selector; it keeps only scratch space and its rotating start point.
    pub fn new() -> Selector {
        Selector::default()
    }

    /// A handle that ends this selector's wait from another thread or a signal handler (see
    /// [`SelectorWaker`]). Every waker of a selector wakes it through the same word, which its
    /// waits sleep on from the first call (a slot of the 128 words of one kernel wait).
    ///
    /// A server loop that a signal or another thread shuts down, with no polling timeout:
    ///
    /// ```no_run
    /// use std::sync::OnceLock;
    ///
    /// use shmlink::{Config, Listener, Selector, SelectorWaker};
    ///
    /// static WAKER: OnceLock<SelectorWaker> = OnceLock::new();
    ///
    /// extern "C" fn on_sigterm(_signal: libc::c_int) {
    ///     // Async-signal-safe: one atomic store and one futex wake-up call.
    ///     if let Some(waker) = WAKER.get() {
    ///         waker.wake();
    ///     }
    /// }
    ///
    /// fn main() -> Result<(), shmlink::Error> {
    ///     let listener = Listener::bind("svc", &Config::default())?;
    ///     let mut conns = Vec::new();
    ///     let mut selector = Selector::new();
    ///     let _ = WAKER.set(selector.waker());
    ///     // SAFETY: `on_sigterm` only calls async-signal-safe code; the sigaction is
    ///     // zeroed and then filled in completely.
    ///     unsafe {
    ///         let mut action: libc::sigaction = std::mem::zeroed();
    ///         action.sa_sigaction = on_sigterm as extern "C" fn(libc::c_int) as usize;
    ///         libc::sigemptyset(&mut action.sa_mask);
    ///         libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    ///     }
    ///     // Another thread may stop the loop the same way, with a clone of the waker.
    ///     let waker = selector.waker();
    ///     std::thread::spawn(move || {
    ///         std::thread::sleep(std::time::Duration::from_secs(60));
    ///         waker.wake();
    ///     });
    ///     loop {
    ///         let ready = selector.wait_accept(&listener, &mut conns, None)?.to_vec();
    ///         if selector.woken() {
    ///             break;
    ///         }
    ///         for i in ready {
    ///             match conns[i].try_recv().map(|m| m.to_vec()) {
    ///                 Ok(msg) => conns[i].send(&msg)?,
    ///                 Err(e) if e.is_transient() => {}
    ///                 Err(_) => {} // gone: removed below
    ///             }
    ///         }
    ///         conns.retain_mut(|c| c.is_peer_connected());
    ///     }
    ///     // Dropping the connections closes them: each client's next receive says so.
    ///     drop(conns);
    ///     Ok(())
    /// }
    /// ```
    pub fn waker(&mut self) -> SelectorWaker {
        let flag = self.wake.get_or_insert_with(Arc::default);
        SelectorWaker {
            flag: Arc::clone(flag),
        }
    }

    /// Whether the last [`wait`](Selector::wait) or [`wait_accept`](Selector::wait_accept) was
    /// ended by a [`SelectorWaker`] (it then returned no ready channel; those that are ready
    /// are returned by the next wait).
    pub fn woken(&self) -> bool {
        self.woken
    }

    /// Waits until at least one of `channels` is ready, or `timeout` passes (`None`: no
    /// timeout), or a [`SelectorWaker`] wakes it, and returns the indices of the ready ones
    /// (empty after a timeout, and after a wake: see [`woken`](Selector::woken)).
    pub fn wait<C: Selectable>(
        &mut self,
        channels: &mut [C],
        timeout: Option<Duration>,
    ) -> &[usize] {
        let deadline = timeout.and_then(|t| crate::wait::Deadline::after(t).instant());
        // Only accepting can fail, and a plain set accepts nobody.
        let _ = self.run(&mut Plain(channels), deadline);
        &self.ready
    }

    /// Like [`wait`](Selector::wait), also accepting every client that connects to `listener`
    /// into `conns` (new connections are appended, and returned if they are ready). Returns
    /// early, possibly with no ready channel, after accepting a client. A wake ends it as it
    /// ends `wait`, before it accepts anyone.
    pub fn wait_accept(
        &mut self,
        listener: &Listener,
        conns: &mut Vec<Connection>,
        timeout: Option<Duration>,
    ) -> Result<&[usize], OpenError> {
        let deadline = timeout.and_then(|t| crate::wait::Deadline::after(t).instant());
        self.run(&mut Accepting { listener, conns }, deadline)?;
        Ok(&self.ready)
    }

    /// The ready channels among `channels` right now, without waiting.
    pub fn poll<C: Selectable>(&mut self, channels: &mut [C]) -> &[usize] {
        let mut set = Plain(channels);
        self.rotate(set.len());
        self.scan(&mut set);
        &self.ready
    }

    fn rotate(&mut self, n: usize) {
        self.start = if n == 0 { 0 } else { (self.start + 1) % n };
    }

    /// Fills `ready` with the channels that have data, whose peer closed, or whose peer the
    /// death watcher saw die; registers new peers with the watcher and notes whether some
    /// cannot be (`unwatched`).
    ///
    /// Before a sleep, call it after reading the futex words: the watcher records a death
    /// before it bumps the word, so a death this scan misses changes a word we then wait on.
    ///
    /// While `narrow`, looks at the recently ready channels (`hot`) alone.
    fn scan(&mut self, set: &mut dyn Set) {
        self.ready.clear();
        if self.narrow {
            for k in 0..self.hot.len() {
                let i = self.hot[k];
                if self.probe(set.channel(i)) {
                    self.ready.push(i);
                }
            }
            return;
        }
        self.unwatched = false;
        if self.pooled {
            self.last_full = Some(Instant::now());
        }
        let n = set.len();
        for k in 0..n {
            let i = (self.start + k) % n;
            if self.probe(set.channel(i)) {
                self.ready.push(i);
            }
        }
    }

    /// True when `ch` is ready; registers its peer with the watcher (see `scan`).
    fn probe(&mut self, ch: &mut RecvHalf) -> bool {
        let gone = match ch.watch_peer() {
            Ok(watched) => {
                self.unwatched |= !watched;
                false
            }
            Err(_) => true,
        };
        gone || ch.has_data() || ch.peer_closed()
    }

    /// Fills `hot` with the recently ready channels that are still in `set` where they were.
    fn find_hot(&mut self, set: &mut dyn Set) {
        self.hot.clear();
        let n = set.len();
        for k in 0..self.recent.len() {
            let (i, addr) = self.recent[k];
            if i < n && cell_addr(set.channel(i)) == addr && !self.hot.contains(&i) {
                self.hot.push(i);
            }
        }
    }

    /// True when any ring holds a frame or any peer closed: the cheap test polled while
    /// spinning, before the full scan.
    fn any_data(&self, set: &mut dyn Set) -> bool {
        let probe = |ch: &mut RecvHalf| ch.has_data() || ch.peer_closed();
        if self.narrow {
            self.hot.iter().any(|&i| probe(set.channel(i)))
        } else {
            (0..set.len()).any(|i| probe(set.channel(i)))
        }
    }

    /// Looks at the process of every peer the death watcher does not cover; the ones gone are
    /// ready.
    fn check_peers(&mut self, set: &mut dyn Set) {
        self.last_check = Some(Instant::now());
        let n = set.len();
        for k in 0..n {
            let i = (self.start + k) % n;
            let ch = set.channel(i);
            let gone = match ch.watch_peer() {
                Ok(true) => false,
                Ok(false) => ch.check_peer().is_err(),
                Err(_) => true,
            };
            if gone && !self.ready.contains(&i) {
                self.ready.push(i);
            }
        }
    }

    /// When the peers the death watcher does not cover are to be looked at next, if there are
    /// any.
    fn next_check(&self) -> Option<Instant> {
        self.unwatched.then(|| {
            self.last_check
                .map_or_else(Instant::now, |t| t + UNWATCHED_SLICE)
        })
    }

    fn run(&mut self, set: &mut dyn Set, deadline: Option<Instant>) -> Result<(), OpenError> {
        self.woken = false;
        if self.take_wake() {
            self.ready.clear();
            return Ok(());
        }
        self.run_once(set, deadline)?;
        if !self.ready.is_empty() {
            self.remember(set);
            if self.pooled {
                self.last_ready = Some(Instant::now());
            }
        }
        Ok(())
    }

    fn run_once(&mut self, set: &mut dyn Set, deadline: Option<Instant>) -> Result<(), OpenError> {
        // Acquire: pairs with the client's Release increment of the doorbell.
        let mut bell_seen = set.bell().map(|b| b.load(Ordering::Acquire));
        if bell_seen.is_some() {
            set.accept()?;
        }
        self.rotate(set.len());
        // Over more channels than one kernel wait takes, a wait soon after a full scan looks
        // at the recently ready channels alone: the others are looked at every `HOT_SLICE`.
        let pooled = set.len() + usize::from(bell_seen.is_some()) + self.wake_words() > WAITV_MAX;
        self.pooled = pooled;
        self.find_hot(set);
        // The clock is read only where the answer depends on it: one look at a ring costs
        // less than a look at the clock.
        self.narrow = pooled
            && !self.hot.is_empty()
            && self
                .last_full
                .is_some_and(|t| Instant::now() < t + HOT_SLICE);
        self.scan(set);
        // Busy channels keep the selector from sleeping: look at the unwatched peers here too,
        // so a dead one is reported in time however much the others talk.
        if self.next_check().is_some_and(|t| Instant::now() >= t) {
            self.check_peers(set);
        }
        if !self.ready.is_empty() {
            return Ok(());
        }
        // Every channel was looked at just now if not before: from here on, until the sleep,
        // the recently ready ones are enough.
        self.narrow = pooled && !self.hot.is_empty();
        // Poll for a while, as the policy says: a reply that is already on its way costs no
        // sleep, but right after this thread woke a peer that needs a core, or where polls
        // stopped paying, it sleeps at once.
        let plan = self.policy.plan();
        let started = plan.timed().then(Instant::now);
        let took = move || started.map_or(Duration::ZERO, |s| s.elapsed());
        if self.poll_rings(set, plan.poll()) {
            self.policy.learn(plan, false, took);
        }
        self.scan(set);
        if !self.ready.is_empty() {
            return Ok(());
        }
        // With more channels than one kernel wait takes, sleep first on the recently ready
        // ones alone, for `HOT_SLICE` and for as long as one was ready within `HOT_LINGER`
        // (looking at every channel each `HOT_SLICE`): a busy client, or one that pauses
        // between its requests, is answered without waking the pool.
        let quiet_since = Instant::now();
        Policy::note_time(quiet_since);
        let hot_until = self
            .last_ready
            .map_or(quiet_since, |t| t + HOT_LINGER)
            .max(quiet_since + HOT_SLICE);
        loop {
            let now = Instant::now();
            let next_check = self.next_check();
            if next_check.is_some_and(|t| now >= t) {
                self.check_peers(set);
                if !self.ready.is_empty() {
                    return Ok(());
                }
            }
            if let Some(bell) = set.bell() {
                // Acquire: as above.
                let rung = bell.load(Ordering::Acquire);
                if Some(rung) != bell_seen {
                    bell_seen = Some(rung);
                    let before = set.len();
                    set.accept()?;
                    if set.len() != before {
                        self.scan(set);
                        return Ok(());
                    }
                }
            }
            if deadline.is_some_and(|d| now >= d) {
                self.ready.clear();
                return Ok(());
            }
            // No timeout unless there is a deadline or a peer nobody watches for us.
            let nap = [deadline, self.next_check().map(|t| t.max(now))]
                .into_iter()
                .flatten()
                .min()
                .map(|t| t.saturating_duration_since(now));
            let hot = pooled && !self.hot.is_empty() && now < hot_until;
            if hot && self.last_full.is_none_or(|t| now >= t + HOT_SLICE) {
                self.narrow = false;
                self.scan(set);
                if !self.ready.is_empty() {
                    return Ok(());
                }
            }
            self.narrow = hot;
            let nap = match self.last_full {
                Some(full) if hot => {
                    let until = hot_until.min(full + HOT_SLICE);
                    let slice = until.saturating_duration_since(now);
                    Some(nap.map_or(slice, |n| n.min(slice)))
                }
                _ => nap,
            };
            let polled = self.sleep(set, bell_seen, nap, hot);
            if polled {
                std::thread::sleep(nap.map_or(POLL_SLICE, |n| n.min(POLL_SLICE)));
            }
            if self.take_wake() {
                self.ready.clear();
                return Ok(());
            }
            if !self.ready.is_empty() {
                // The sleep found these: the look before it, or, after a wake-up, the look at
                // the channels whose words changed. Every other channel it slept on kept its
                // word, so has nothing new since that look (see `rearm`): no look at every
                // channel for the one that woke us.
                self.policy.learn(plan, true, took);
                return Ok(());
            }
            // A timeout, or a wake-up in a phase that sleeps in slices: look (at every channel
            // unless in the hot phase).
            self.scan(set);
            if !self.ready.is_empty() {
                self.policy.learn(plan, true, took);
                return Ok(());
            }
        }
    }

    /// Polls the rings for `budget`, yielding the core between batches if `polite`; true once
    /// one holds a frame (or its peer closed).
    fn poll_rings(&self, set: &mut dyn Set, (budget, polite): (Duration, bool)) -> bool {
        if budget.is_zero() {
            return false;
        }
        // Look at the clock after about 32 looks at a ring, and at least once per pass; the
        // budget counts from the first look at the clock, after the first batch (as a
        // `Waiter`'s does), so a frame that is already on its way costs no clock read.
        let probed = if self.narrow {
            self.hot.len()
        } else {
            set.len()
        };
        let passes = (32 / probed.max(1)).max(1);
        let mut until = None;
        loop {
            // Look at the rings between single pause hints (a pause can take 100+ cycles), and
            // at the clock once per batch.
            for _ in 0..passes {
                if self.any_data(set) {
                    return true;
                }
                std::hint::spin_loop();
            }
            let now = Instant::now();
            Policy::note_time(now);
            if now >= *until.get_or_insert(now + budget) {
                return false;
            }
            if polite {
                std::thread::yield_now();
            }
        }
    }

    /// Announces a sleeper on the channels (every one, or in the `hot` phase only the recently
    /// ready ones), looks once more, and sleeps until a word is woken or `nap` passes (`None`:
    /// no timeout; a millisecond at most when not every channel can wake us, [`HOT_SLICE`] at
    /// most in the hot phase). Words beyond the first batch go to the pool's threads. True when
    /// the kernel cannot wait on many words and the caller must sleep a short slice itself.
    fn sleep(
        &mut self,
        set: &mut dyn Set,
        bell_seen: Option<u32>,
        nap: Option<Duration>,
        hot: bool,
    ) -> bool {
        let n = set.len();
        self.waiters.clear();
        self.spill.clear();
        self.owners.clear();
        self.spill_owners.clear();
        self.announced.clear();
        let pooled = n + usize::from(bell_seen.is_some()) + self.wake_words() > WAITV_MAX;
        // The selector's own batch keeps a slot for the pool's word when there is a pool.
        let own = WAITV_MAX - usize::from(pooled);
        let mut partial = false;
        if let Some(flag) = &self.wake {
            // Waited for while lowered: a raise before the kernel compares it ends the sleep at
            // once, one after it wakes it.
            self.waiters.push(flag.word());
            self.owners.push(WAKE);
        }
        if let (Some(bell), Some(seen)) = (set.bell(), bell_seen) {
            self.waiters.push(FutexWaitv::new(bell, seen));
            self.owners.push(BELL);
        }
        // The recently ready channels first, in the selector's own batch: a busy client wakes
        // this thread directly, not through a pool thread.
        self.marked.clear();
        self.marked.resize(n, false);
        for k in 0..self.hot.len() {
            let i = self.hot[k];
            self.marked[i] = true;
            partial |= !self.announce(set, i, own);
        }
        if !hot {
            for k in 0..n {
                let i = (self.start + k) % n;
                if !self.marked[i] {
                    partial |= !self.announce(set, i, own);
                }
            }
        }
        // Step 3, F1 (see `handshake::fence`): either the scan below sees the peer's frame, or
        // the peer sees our sleeper and changes the futex word we (or a pool thread) are about
        // to wait on. A death or a close recorded after the loads above changes the word too.
        handshake::fence();
        self.scan(set);
        let mut polled = false;
        if self.ready.is_empty() {
            let mut dispatched = false;
            if !self.spill.is_empty() && !partial {
                // Read the pool's word before handing over the batches (see `Pool::woken`).
                self.waiters.push(self.pool.woken());
                self.owners.push(WOKEN);
                dispatched = self.pool.dispatch(&self.spill);
                partial |= !dispatched;
            }
            let timeout = if hot {
                Some(nap.map_or(HOT_SLICE, |n| n.min(HOT_SLICE)))
            } else if partial {
                Some(nap.map_or(POLL_SLICE, |n| n.min(POLL_SLICE)))
            } else {
                nap
            };
            let until = timeout.map(|t| Instant::now() + t);
            let mut spurious = 0;
            loop {
                let left = until.map(|u| u.saturating_duration_since(Instant::now()));
                let woke = handshake::sleep_any(&self.waiters, left);
                if woke == WaitAny::Unsupported {
                    polled = true;
                    break;
                }
                // A wake-up with nothing to read behind it (a peer that bumps its word for
                // nothing) sleeps again at the cost of a look at the channels whose words
                // changed, not at every channel. The phases that sleep in slices leave.
                if hot
                    || partial
                    || until.is_some_and(|u| Instant::now() >= u)
                    || !self.rearm(set, woke)
                {
                    break;
                }
                spurious += 1;
                if spurious == SPURIOUS_MAX {
                    // A peer keeps waking us with nothing to read, faster than we can sleep
                    // again: it gets a slice of sleep instead of a core, and every channel a
                    // look when it ends.
                    let slice = until.map_or(POLL_SLICE, |u| {
                        u.saturating_duration_since(Instant::now()).min(POLL_SLICE)
                    });
                    std::thread::sleep(slice);
                    break;
                }
            }
            if dispatched {
                self.pool.call_off();
            }
        }
        for &i in &self.announced {
            handshake::withdraw(set.channel(i).data_cell());
        }
        polled && self.ready.is_empty()
    }

    /// Announces a sleeper on channel `i` and adds its word to the selector's own batch (while
    /// it has fewer than `own` words) or to the pool's. False for a channel whose receiving
    /// end does not block: its peer never wakes it, so it must be polled.
    fn announce(&mut self, set: &mut dyn Set, i: usize, own: usize) -> bool {
        let ch = set.channel(i);
        if ch.wait_strategy() != WaitStrategy::Block {
            return false;
        }
        // Steps 1 and 2: the scan after the fence sees a death or a close that changed the word
        // before the load (see `handshake::observe`).
        let word = handshake::announce_word(ch.data_cell());
        if self.waiters.len() < own {
            self.waiters.push(word);
            self.owners.push(i);
        } else {
            self.spill.push(word);
            self.spill_owners.push(i);
        }
        self.announced.push(i);
        true
    }

    /// After a wait on the words of [`sleep`](Selector::sleep) returned (`woke`): looks at the
    /// channels whose words changed (the one the kernel named, or, when it named none, every
    /// word of the own batch whose value is no longer the one waited for; for the pool's word,
    /// the words its threads report) and, where nothing is ready, waits for the word's new
    /// value from then on. True when every changed word was taken up that way, so the selector
    /// may sleep again on the same words; false when a channel is ready, the doorbell rang, or
    /// a pool thread could not be handed its batch again.
    fn rearm(&mut self, set: &mut dyn Set, woke: WaitAny) -> bool {
        let changed = match woke {
            WaitAny::Woken(k) => k..k + 1,
            _ => 0..self.waiters.len(),
        };
        for k in changed {
            let expected = self.waiters[k].expected();
            match self.owners[k] {
                WAKE => {
                    if woke != WaitAny::Returned || self.wake.as_ref().is_some_and(|f| f.raised()) {
                        return false;
                    }
                }
                BELL => {
                    // Acquire: as in `run_once`.
                    let rung = set.bell().map(|b| b.load(Ordering::Acquire));
                    if woke != WaitAny::Returned || rung != Some(expected) {
                        return false;
                    }
                }
                WOKEN => {
                    let now = self.pool.woken_now();
                    if woke == WaitAny::Returned && now == expected {
                        continue;
                    }
                    // From here, a report this look misses increments the word again.
                    self.waiters[k].set_expected(now);
                    if !self.rearm_pool(set) {
                        return false;
                    }
                }
                i => {
                    let Some(seen) = self.look_again(set, i, expected, woke == WaitAny::Returned)
                    else {
                        return false;
                    };
                    self.waiters[k].set_expected(seen);
                }
            }
        }
        true
    }

    /// [`rearm`](Selector::rearm) for the words the pool's threads report: each thread that
    /// reported gets its batch again with the new values.
    fn rearm_pool(&mut self, set: &mut dyn Set) -> bool {
        for w in 0..self.pool.busy() {
            let first = w * PER_THREAD;
            let last = self.spill.len().min(first + PER_THREAD);
            let changed = match self.pool.take_fired(w) {
                Fired::Nothing => continue,
                Fired::Word(j) if first + j < last => first + j..first + j + 1,
                _ => first..last,
            };
            let only_changed = changed.len() > 1;
            for j in changed {
                let (i, expected) = (self.spill_owners[j], self.spill[j].expected());
                let Some(seen) = self.look_again(set, i, expected, only_changed) else {
                    return false;
                };
                self.spill[j].set_expected(seen);
            }
            self.pool.rehand(w, &self.spill[first..last]);
        }
        true
    }

    /// Channel `i`, whose word was `expected` when the selector went to sleep on it, woke it
    /// (or, if `unless_same`, may have): reads the word again and, after the fence of the
    /// handshake, looks at the channel. The word's new value to wait for, or `None` if the
    /// channel is ready. Its sleeper stays announced all along.
    fn look_again(
        &mut self,
        set: &mut dyn Set,
        i: usize,
        expected: u32,
        unless_same: bool,
    ) -> Option<u32> {
        let ch = set.channel(i);
        // Step 1 again, with the sleeper announced since.
        let seen = handshake::observe(ch.data_cell());
        if unless_same && seen == expected {
            return Some(seen);
        }
        // F1 again: either the look below sees what the peer published, or the peer changes
        // the word after the load above.
        handshake::fence();
        let unwatched = self.unwatched;
        if self.probe(set.channel(i)) {
            self.ready.push(i);
            return None;
        }
        // A peer the death watcher stopped covering needs the sleep in slices: leave.
        (self.unwatched == unwatched).then_some(seen)
    }

    /// How many words of a kernel wait the wakers' word takes: 1 once a waker was made.
    fn wake_words(&self) -> usize {
        usize::from(self.wake.is_some())
    }

    /// True (once) if a waker raised the selector's flag since it was last taken; notes that
    /// the wait was woken.
    fn take_wake(&mut self) -> bool {
        let raised = self.wake.as_ref().is_some_and(|f| f.take());
        self.woken |= raised;
        raised
    }

    /// Remembers the channels just found ready (the first [`HOT_MAX`]) as the recent ones.
    fn remember(&mut self, set: &mut dyn Set) {
        let mut recent: Vec<(usize, usize)> = Vec::with_capacity(HOT_MAX);
        for &i in self.ready.iter().take(HOT_MAX) {
            recent.push((i, cell_addr(set.channel(i))));
        }
        for &old in &self.recent {
            if recent.len() == HOT_MAX {
                break;
            }
            if !recent.contains(&old) {
                recent.push(old);
            }
        }
        self.recent = recent;
    }
}

/// The address of a channel's data word: with its index, how the selector knows a recently
/// ready channel again in the next call (a stale pair only costs a slot in the hot phase).
fn cell_addr(ch: &RecvHalf) -> usize {
    ch.data_cell() as *const _ as usize
}
