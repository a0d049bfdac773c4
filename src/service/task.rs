//! The async task's side of a wait (the engine under `crate::surface::tokio`): one direction of an
//! `AsyncChannel` polls its ring as the `Block` policy plans, yielding to the runtime between
//! batches, then sleeps through the handshake of `wait/handshake.rs` with its announcement kept
//! across polls ([`Announced`]): read the word and announce (steps 1 and 2), register the peer
//! with the death watcher, fence and look again (step 3), and hand the word and the value read
//! to its own futex ring (`service::direct`) or to the reactor (`service::reactor`), which
//! complete the sleep (step 4) and wake the task's `Waker`. The announcement is withdrawn
//! (step 5) when the task polls again, when its operation ends, and when the channel goes.
//!
//! The module docs of `crate::surface::tokio` say how it behaves; this file is how it is made. It sits in
//! `service/`, beside the two sleepers it hands its word to, because it needs the channel
//! (`wait` lies below `shm::channel` in the layers); the handshake it follows is `wait`'s.

use std::task::{Context, Poll};
use std::time::Instant;

use super::direct::{Armed, DirectWait};
use super::reactor::Registration;
use crate::error::{ChannelName, RecvError, SendError, WaitError};
use crate::shm::channel::Channel;
use crate::shm::layout::WaitCell;
use crate::shm::ring::tally::Tally;
use crate::shm::topic::{Publisher, Subscriber};
use crate::wait::handshake::{self, Announced};
use crate::wait::{Deadline, Plan, Policy, SPINS_PER_CLOCK_READ, UNWATCHED_SLICE};

/// What a task waits for: a frame to receive, or room for a frame of this many bytes.
#[derive(Clone, Copy)]
pub(crate) enum Want {
    Data,
    Room(usize),
}

/// What an async side waits on: a channel (either direction), a topic's subscriber (data)
/// or its publisher (room).
pub(crate) trait Waitable {
    /// The cell the peer wakes when `want` may be met.
    fn cell(&self, want: Want) -> &WaitCell;
    /// True when the operation should be tried again: what we want is there, or the peer
    /// closed (the operation then reports it).
    fn ready(&mut self, want: Want) -> bool;
    /// Registers the peer with the death watcher on [`cell`](Waitable::cell)'s word (see
    /// `Channel::watch_recv_peer`): `Ok(false)` where nobody can be watched.
    fn watch(&mut self, want: Want) -> Result<bool, WaitError>;
    /// Looks at the peer now (after each slice of an unwatched sleep).
    fn check_peer(&mut self) -> Result<(), WaitError>;
    /// The name errors carry.
    fn channel_name(&self) -> &ChannelName;
    /// What the side that waits for `want` counts (its sleeps).
    fn tally(&self, want: Want) -> &Tally;
}

impl Waitable for Channel {
    fn cell(&self, want: Want) -> &WaitCell {
        match want {
            Want::Data => self.data_cell(),
            Want::Room(_) => self.space_cell(),
        }
    }

    fn ready(&mut self, want: Want) -> bool {
        let there = match want {
            Want::Data => self.has_data(),
            Want::Room(len) => self.has_room(len),
        };
        there || self.peer_closed()
    }

    fn watch(&mut self, want: Want) -> Result<bool, WaitError> {
        match want {
            Want::Data => self.watch_recv_peer(),
            Want::Room(_) => self.watch_send_peer(),
        }
    }

    fn check_peer(&mut self) -> Result<(), WaitError> {
        Channel::check_peer(self)
    }

    fn channel_name(&self) -> &ChannelName {
        Channel::channel_name(self)
    }

    fn tally(&self, want: Want) -> &Tally {
        match want {
            Want::Data => self.recv_tally(),
            Want::Room(_) => self.send_tally(),
        }
    }
}

impl Waitable for Subscriber {
    fn cell(&self, _: Want) -> &WaitCell {
        self.reader_ref().data_cell()
    }

    fn ready(&mut self, _: Want) -> bool {
        let r = self.reader();
        r.has_data() || r.peer_closed()
    }

    fn watch(&mut self, _: Want) -> Result<bool, WaitError> {
        self.reader().watch_peer()
    }

    fn check_peer(&mut self) -> Result<(), WaitError> {
        self.reader().check_peer()
    }

    fn channel_name(&self) -> &ChannelName {
        self.reader_ref().channel_name()
    }

    fn tally(&self, _: Want) -> &Tally {
        self.reader_ref().tally()
    }
}

impl Waitable for Publisher {
    fn cell(&self, _: Want) -> &WaitCell {
        self.space_cell()
    }

    fn ready(&mut self, want: Want) -> bool {
        match want {
            Want::Room(len) => self.has_room(len),
            Want::Data => true,
        }
    }

    fn watch(&mut self, _: Want) -> Result<bool, WaitError> {
        // Many subscribers, none to watch: the task sleeps in slices and sweeps after each.
        Ok(false)
    }

    fn check_peer(&mut self) -> Result<(), WaitError> {
        self.sweep_dead();
        Ok(())
    }

    fn channel_name(&self) -> &ChannelName {
        Publisher::channel_name(self)
    }

    fn tally(&self, _: Want) -> &Tally {
        Publisher::tally(self)
    }
}

/// A wait under way, kept across the polls of one operation.
pub(crate) struct Wait {
    plan: Plan,
    started: Instant,
    /// Whether it went to sleep (past its poll).
    slept: bool,
    /// Whether it handed its word to the reactor.
    armed: bool,
}

/// What a waiting future does after [`Side::wait`].
pub(crate) enum Step {
    /// Try the operation again.
    Again,
    /// Return `Pending`: the reactor, or the task itself, wakes the waker.
    Pending,
    /// Fail with this error.
    Fail(WaitError),
}

/// How a [`Side`] sleeps.
pub(crate) enum Sleep {
    /// Not decided yet: decided at the first sleep, on the runtime that polls it.
    Undecided,
    /// Its own futex ring, polled by the runtime's I/O driver (boxed: an `io_uring` handle is
    /// large, and most sides never sleep).
    Direct(Box<DirectWait>),
    /// Through the reactor thread.
    Reactor,
}

/// One direction of an [`AsyncChannel`](crate::surface::tokio::AsyncChannel) (receiving, or sending into a full ring): what its
/// waits learnt, how it sleeps, its place in the reactor, and its sleeper on the channel's
/// cell.
pub(crate) struct Side {
    policy: Policy,
    sleep: Sleep,
    /// Its place in the reactor, taken when it first sleeps there.
    reg: Option<Registration>,
    pub(crate) sleeper: Announced,
}

impl Side {
    pub(crate) fn new() -> Side {
        Side {
            policy: Policy::for_tasks(),
            sleep: Sleep::Undecided,
            reg: None,
            sleeper: Announced::default(),
        }
    }

    /// Sleeps on `word` while it holds `seen`, until `deadline` (and, if `!watched`, at most
    /// [`UNWATCHED_SLICE`]): on the task's own futex ring where it has one, else through the
    /// reactor. `Again` when the wait is already over.
    fn sleep_on(
        &mut self,
        cx: &mut Context<'_>,
        w: &mut Wait,
        word: &std::sync::atomic::AtomicU32,
        seen: u32,
        watched: bool,
        deadline: Deadline,
    ) -> Step {
        if let Sleep::Undecided = self.sleep {
            self.sleep = DirectWait::new().map_or(Sleep::Reactor, |d| Sleep::Direct(Box::new(d)));
        }
        if let Sleep::Direct(direct) = &mut self.sleep {
            let left = deadline
                .instant()
                .map(|d| d.saturating_duration_since(Instant::now()));
            let slice = (!watched).then_some(UNWATCHED_SLICE);
            let timeout = [left, slice].into_iter().flatten().min();
            match direct.arm(cx, word, seen, timeout) {
                Ok(Armed::Pending) => return Step::Pending,
                Ok(Armed::Again) => return Step::Again,
                // The ring or the runtime's driver failed us (the runtime is shutting down):
                // the reactor serves from now on.
                Err(_) => self.sleep = Sleep::Reactor,
            }
        }
        // Armed after the look: a change of the word since `seen` stays in the word, and the
        // reactor's wait (which compares it with `seen`) returns at once for it.
        self.reg.get_or_insert_with(Registration::new).arm(
            word,
            seen,
            !watched,
            deadline.instant(),
            cx.waker(),
        );
        w.armed = true;
        Step::Pending
    }

    /// The operation succeeded: folds the wait, if there was one, into the policy.
    fn done(&mut self, wait: &mut Option<Wait>) {
        if let Some(w) = wait.take() {
            self.policy.learn(w.plan, w.slept, || w.started.elapsed());
            if w.armed {
                // Woken by something else than the reactor (a `select!` sibling): our entry
                // may still be there.
                self.disarm();
            }
        }
    }

    /// Takes the side's entry out of the reactor, if it has one.
    pub(crate) fn disarm(&self) {
        if let Some(reg) = &self.reg {
            reg.disarm();
        }
    }

    /// The operation ended with an error: nothing to learn.
    fn failed(&mut self, wait: &mut Option<Wait>) {
        if wait.take().is_some_and(|w| w.armed) {
            self.disarm();
        }
    }

    /// Runs `attempt` (the operation, tried without waiting: `Ok(None)` when it found nothing
    /// to do) until it is done, waiting between attempts as [`wait`](Side::wait) plans, until
    /// `deadline`. The poll of every operation of an [`AsyncChannel`].
    pub(crate) fn poll_op<T, E: From<WaitError>, C: Waitable>(
        &mut self,
        cx: &mut Context<'_>,
        wait: &mut Option<Wait>,
        ch: &mut C,
        want: Want,
        deadline: Deadline,
        mut attempt: impl FnMut(&mut C) -> Result<Option<T>, E>,
    ) -> Poll<Result<T, E>> {
        // A unit of the task's budget per operation that ends, as tokio's own sockets and
        // channels take one (see "Sharing the thread" in the module docs). Out of budget: the
        // runtime wakes the task again once the thread's other tasks had their turn. Outside a
        // tokio runtime the budget is unlimited.
        let coop = std::task::ready!(::tokio::task::coop::poll_proceed(cx));
        loop {
            self.sleeper.withdraw_from(ch.cell(want));
            let error = match attempt(ch) {
                Ok(Some(done)) => {
                    coop.made_progress();
                    self.done(wait);
                    return Poll::Ready(Ok(done));
                }
                Ok(None) if deadline.passed() => E::from(WaitError::Timeout {
                    channel: ch.channel_name().clone(),
                }),
                Ok(None) => match self.wait(cx, wait, ch, want, deadline) {
                    Step::Again => continue,
                    Step::Pending => return Poll::Pending,
                    Step::Fail(e) => e.into(),
                },
                Err(e) => e,
            };
            coop.made_progress();
            self.failed(wait);
            return Poll::Ready(Err(error));
        }
    }

    /// Called when the operation found nothing to do: polls as the policy plans (yielding to
    /// the runtime between batches), then hands the cell's word to the reactor, with the
    /// deadline.
    fn wait<C: Waitable>(
        &mut self,
        cx: &mut Context<'_>,
        wait: &mut Option<Wait>,
        ch: &mut C,
        want: Want,
        deadline: Deadline,
    ) -> Step {
        let w = wait.get_or_insert_with(|| Wait {
            plan: self.policy.plan(),
            started: Instant::now(),
            slept: false,
            armed: false,
        });
        if !w.slept {
            let (budget, polite) = w.plan.poll();
            let batch = Instant::now();
            Policy::note_time(batch);
            if batch.duration_since(w.started) < budget {
                for _ in 0..SPINS_PER_CLOCK_READ {
                    if ch.ready(want) {
                        return Step::Again;
                    }
                    std::hint::spin_loop();
                }
                let mut now = Instant::now();
                let more = now.duration_since(w.started) < budget;
                if more && polite {
                    // Right after waking the peer, which may need this core to answer.
                    std::thread::yield_now();
                    now = Instant::now();
                }
                // The batch and its yield, in case they lost the core.
                self.policy.note_poll_batch(batch, now);
                if more {
                    // Let the thread's other tasks run (a peer task among them may be the one
                    // to answer), and poll again when the runtime comes back to us.
                    cx.waker().wake_by_ref();
                    return Step::Pending;
                }
            }
            w.slept = true;
        }
        let seen = self.sleeper.announce(ch.cell(want));
        // After reading the word: a death recorded later changes it (see `Waiter::watch`).
        let watched = match ch.watch(want) {
            Ok(watched) => watched,
            Err(e) => {
                self.sleeper.withdraw_from(ch.cell(want));
                return if ch.ready(want) {
                    Step::Again
                } else {
                    Step::Fail(e)
                };
            }
        };
        if !watched {
            // Woken every slice by the reactor: look at the peer's process each time.
            if let Err(e) = ch.check_peer() {
                self.sleeper.withdraw_from(ch.cell(want));
                return if ch.ready(want) {
                    Step::Again
                } else {
                    Step::Fail(e)
                };
            }
        }
        // F1, then the look (see `handshake::fence`): either we see the peer's frame (or room)
        // now, or it sees our sleeper and changes the word from `seen`.
        if handshake::look_again(|| ch.ready(want)) {
            // The peer answered meanwhile: no need to bother the reactor.
            self.sleeper.withdraw_from(ch.cell(want));
            return Step::Again;
        }
        // Slept on after the look: a change of the word since `seen` stays in the word, and
        // the wait (which compares it with `seen`) ends at once for it.
        let step = self.sleep_on(cx, w, &ch.cell(want).futex, seen, watched, deadline);
        if let Step::Pending = step {
            // A sleep, counted as a blocking wait counts each of its own.
            ch.tally(want).slept(1);
        }
        step
    }
}

/// `Ok(None)` for the "not now" error of an attempt (`Full`, `Empty`), for
/// [`Side::poll_op`].
pub(crate) fn not_now<T, E>(
    result: Result<T, E>,
    is_not_now: impl Fn(&E) -> bool,
) -> Result<Option<T>, E> {
    match result {
        Ok(done) => Ok(Some(done)),
        Err(e) if is_not_now(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) fn full(e: &SendError) -> bool {
    matches!(e, SendError::Full { .. })
}

pub(crate) fn empty(e: &RecvError) -> bool {
    matches!(e, RecvError::Empty { .. })
}
