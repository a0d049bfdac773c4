//! The receiving half: frames read in place, fragments reassembled.

use std::sync::Arc;
use std::time::Instant;

use std::ptr::NonNull;

use crate::error::{ChannelName, RecvError, WaitError};
use crate::shm::layout::topic::{state_of, SLOT_DROPPED};
use crate::shm::ring::{kind, Consumer, Frame, ReadGuard};
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::wait::{self, Deadline, Waiter};

use super::*;

/// The receiving half of a [`Channel`], borrowed from [`Channel::split`] or owned from
/// [`Channel::into_split`]. It keeps the channel's mapping alive for as long as it exists.
pub struct RecvHalf {
    pub(super) rx: Consumer,
    pub(super) peer: PeerWatch,
    /// Dropped before `shared`: its death-watch registration points into the mapping.
    pub(super) wait: Waiter,
    /// Largest message reassembled from fragments.
    pub(super) max_message: usize,
    /// Reassembly buffer for fragmented messages, kept from one completed message to the next
    /// (released when a message fails or is withdrawn).
    pub(super) assembly: Vec<u8>,
    /// Where the receiver is in a fragmented message.
    pub(super) assembling: Assembling,
    /// For a reader of a ring with many readers (a topic's subscriber): the words that say
    /// it was overtaken. None for a channel's.
    pub(super) overtaken: Option<Overtaken>,
    // Declared last: the mapping `rx` and `peer` point into, kept alive by this half.
    pub(super) shared: Arc<Shared>,
}

/// Where a receiver is in a fragmented message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assembling {
    /// Between messages.
    Idle,
    /// Collecting a message of this many bytes.
    Collecting(usize),
    /// Dropping the rest of a message that was refused part-way (it failed to reassemble, and
    /// the error was returned once): its remaining fragments are skipped, up to and including
    /// its last, so the messages after it still come through.
    Discarding,
}

/// The words that tell a reader of a ring with many readers (a topic's subscriber) that it
/// can read no further where it is: its slot's state (the writer dropped it) and, when the
/// writer overwrites, the writer's claim (it lagged: its position fell below the claim).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Overtaken {
    /// The reader's slot's state word.
    pub(crate) state: NonNull<AtomicU32>,
    /// The writer's claim, where it overwrites.
    pub(crate) claim: Option<NonNull<AtomicU64>>,
}

impl Overtaken {
    /// `Dropped` when the writer dropped the reader; `Lagged` (with `missed` 0: the caller
    /// counts) when its position `at` fell below the claim.
    #[inline]
    fn check(&self, at: u64, channel: &ChannelName) -> Result<(), RecvError> {
        // SAFETY: both point into the mapping the half's `shared` keeps alive; atomics.
        let state = unsafe { self.state.as_ref() };
        // Relaxed: the writer's verdict; nothing is read by it.
        if state_of(state.load(Ordering::Relaxed)) == SLOT_DROPPED {
            return Err(RecvError::Dropped {
                channel: channel.clone(),
            });
        }
        if let Some(claim) = self.claim {
            // SAFETY: as above.
            let claim = unsafe { claim.as_ref() };
            // Acquire: pairs with the writer's Release fence after its claim store.
            if claim.load(Ordering::Acquire) > at {
                return Err(RecvError::Lagged {
                    channel: channel.clone(),
                    missed: 0,
                });
            }
        }
        Ok(())
    }
}

/// What a reader of a ring with many readers is made of (see `RecvHalf::reader_of_many`).
pub(crate) struct Reader {
    /// The ring, whose consumer's index is the reader's own cursor.
    pub(crate) ptrs: crate::shm::ring::RingPtrs,
    /// The reader's own record, closed when the half drops.
    pub(crate) me: NonNull<crate::shm::layout::PeerInfo>,
    /// The writer's record, watched as a channel's peer.
    pub(crate) writer: NonNull<crate::shm::layout::PeerInfo>,
    /// The byte the writer's end keeps locked.
    pub(crate) writer_lock: u64,
    /// What tells the reader it was overtaken.
    pub(crate) overtaken: Overtaken,
}

/// A whole message found by [`RecvHalf::next_ready`], not yet lent out: a frame in the ring,
/// or the reassembly buffer. Holds no borrow, so a caller can find it in a loop (an async poll)
/// and take it afterwards.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ready {
    Frame(Frame),
    Assembled,
}

impl RecvHalf {
    /// Largest message [`recv`](Channel::recv) reassembles.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Sets the largest message this half reassembles and publishes it, so that the peer's
    /// sends of longer messages fail at the peer with
    /// [`SendError::TooLarge`](crate::SendError::TooLarge). A longer message already on its way
    /// when the limit drops is refused here with [`RecvError::TooLarge`].
    pub fn set_max_message(&mut self, max: usize) {
        self.max_message = max;
        self.shared.publish_max_message(max);
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// True while the peer endpoint is connected and its process runs.
    pub fn is_peer_connected(&self) -> bool {
        self.peer.state() == crate::shm::layout::PEER_PRESENT && self.peer.check().is_ok()
    }

    /// The peer's process id, once it has connected.
    pub fn peer_pid(&self) -> Option<u32> {
        let _ = self.peer.check();
        self.peer.pid()
    }

    /// Where the ring region this half reads lies in this process (for the test hooks).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn region(&self) -> std::ops::Range<usize> {
        self.rx.region()
    }

    /// The name errors carry.
    pub(crate) fn channel_name(&self) -> &ChannelName {
        &self.shared.name
    }

    /// Counts `n` messages a topic's subscriber missed (see `crate::shm::layout::counters`).
    pub(crate) fn count_missed(&self, n: u64) {
        self.rx.tally().missed(n);
    }

    /// How far it has read: the free-running index of its ring.
    #[inline]
    pub(crate) fn position(&self) -> u64 {
        self.rx.position()
    }

    /// Moves a reader of a ring with many readers to `index` (a frame another reader
    /// could read next: an entry of a topic's index), dropping a message in fragments under
    /// way.
    pub(crate) fn reposition(&mut self, index: u64) -> Result<(), RecvError> {
        self.assembling = Assembling::Idle;
        self.rx.reposition(index)
    }

    /// True when this reader can read no further where it is (see [`Overtaken`]).
    #[inline]
    pub(crate) fn overtaken_now(&self) -> bool {
        self.overtaken().is_err()
    }

    /// `Dropped` or `Lagged` when this reader can read no further (see [`Overtaken`]); `Ok`
    /// for a channel's.
    #[inline]
    pub(crate) fn overtaken(&self) -> Result<(), RecvError> {
        match &self.overtaken {
            Some(o) => o.check(self.rx.position(), &self.shared.name),
            None => Ok(()),
        }
    }

    /// Lends out a message [`next_ready`](RecvHalf::next_ready) found.
    #[inline]
    pub(crate) fn take(&mut self, ready: Ready) -> ReadGuard<'_> {
        match ready {
            Ready::Frame(frame) => self.rx.guard(frame),
            Ready::Assembled => ReadGuard::assembled(&self.assembly, &self.shared.name),
        }
    }

    /// The next whole message. With [`Deadline::Now`] returns [`RecvError::Empty`] at once
    /// (after a throttled look at the peer), else waits for it until the deadline.
    ///
    /// A peer can keep fragments coming for as long as it likes, so the loop never trusts the
    /// stream to end: with [`Deadline::Now`] it takes at most one ring's worth of fragments per
    /// call and then reports [`RecvError::Empty`]; with a deadline it looks at the clock after
    /// every fragment. Either way the message under way is kept and the next call goes on with it.
    #[inline]
    pub(crate) fn next_ready(&mut self, wait: Deadline) -> Result<Ready, RecvError> {
        // The common case, inline: a whole message in one frame is there now, with no message
        // in fragments under way. (`data_now` judges the header word it loads; anything else
        // is judged from a load of its own in `next_ready_slow`.)
        if self.assembling == Assembling::Idle {
            if let Some(frame) = self.rx.data_now() {
                return Ok(Ready::Frame(frame));
            }
        }
        self.next_ready_slow(wait)
    }

    /// [`next_ready`](RecvHalf::next_ready) off its common path: nothing there yet (wait),
    /// a marker, a fragment, a corrupt frame.
    #[inline(never)]
    fn next_ready_slow(&mut self, wait: Deadline) -> Result<Ready, RecvError> {
        let mut budget = self.rx.capacity() as u64;
        loop {
            match self.rx.poll_frame() {
                Ok(Some(frame))
                    if frame.kind() == kind::DATA && self.assembling == Assembling::Idle =>
                {
                    return Ok(Ready::Frame(frame))
                }
                Ok(Some(frame)) => {
                    if self.assembling == Assembling::Discarding
                        && matches!(frame.kind(), kind::DATA | kind::FRAG_FIRST)
                    {
                        // The refused message is over: its sender went on to the next one.
                        self.assembling = Assembling::Idle;
                        if frame.kind() == kind::DATA {
                            return Ok(Ready::Frame(frame));
                        }
                    }
                    let size = frame.size();
                    if self.absorb_fragment(frame)? {
                        return Ok(Ready::Assembled);
                    }
                    #[cfg(test)]
                    super::tests::limits_and_fragments::fragment_taken();
                    match wait {
                        Deadline::Now => {
                            budget = budget.saturating_sub(size);
                            if budget == 0 {
                                return Err(RecvError::Empty {
                                    channel: self.shared.name.clone(),
                                });
                            }
                        }
                        Deadline::At(at) if Instant::now() >= at => {
                            return Err(RecvError::Timeout {
                                channel: self.shared.name.clone(),
                            })
                        }
                        _ => {}
                    }
                }
                Ok(None) => {
                    // A reader of a ring with many readers that was overtaken finds no more.
                    self.overtaken()?;
                    match wait {
                        Deadline::Now => {
                            self.peer.check_throttled()?;
                            return Err(RecvError::Empty {
                                channel: self.shared.name.clone(),
                            });
                        }
                        Deadline::At(at) => self.wait_data(Some(at))?,
                        Deadline::Never => self.wait_data(None)?,
                    }
                }
                // Overtaken, the frames at our position are not the ones to read.
                Err(e) => return Err(self.overtaken().err().unwrap_or(e)),
            }
        }
    }

    /// Copies a fragment into the reassembly buffer; true once the message is complete.
    ///
    /// The shared payload is read once: the length prefix into a local, the rest into the
    /// buffer; only lengths the ring already validated and those copies are judged. A message
    /// that fails (an allocation that fails, a fragment out of sequence) is reported once; its
    /// remaining fragments are then skipped (see [`Assembling::Discarding`]).
    #[inline(never)]
    fn absorb_fragment(&mut self, frame: Frame) -> Result<bool, RecvError> {
        use Assembling::{Collecting, Discarding, Idle};
        let max_frame = self.rx.max_len();
        let guard = self.rx.guard(frame);
        let result = match (self.assembling, guard.kind()) {
            (Idle, kind::FRAG_FIRST) => match guard.get(..8) {
                Some(prefix) => {
                    let mut total = [0u8; 8];
                    total.copy_from_slice(prefix);
                    let total = u64::from_le_bytes(total);
                    let body = &guard[8..];
                    // A message that fits one frame is never fragmented, so a reassembled
                    // message is always longer than any frame.
                    let well_formed =
                        |t: usize| t > max_frame && !body.is_empty() && body.len() <= t;
                    match usize::try_from(total) {
                        // Our limit dropped while the message was on its way.
                        Ok(t) if well_formed(t) && t > self.max_message => {
                            Err(RecvError::TooLarge {
                                channel: self.shared.name.clone(),
                                len: t,
                                max: self.max_message,
                            })
                        }
                        Ok(t) if well_formed(t) => {
                            // Room for what arrived, not for what was announced: the total is
                            // the peer's word, the bytes are real.
                            self.assembly.clear();
                            append(&mut self.assembly, body, t).map(|()| {
                                self.assembling = Collecting(t);
                                false
                            })
                        }
                        _ => Err(corrupt(
                            &self.shared.name,
                            format!(
                                "fragmented message of {total} bytes starting with {} (fragmented \
                                 messages are longer than a frame, {max_frame})",
                                body.len(),
                            ),
                        )),
                    }
                }
                None => Err(corrupt(
                    &self.shared.name,
                    "first fragment shorter than its length prefix",
                )),
            },
            (Collecting(_), kind::FRAG_MORE | kind::FRAG_LAST) if guard.is_empty() => {
                // The sender never makes one; a stream of them would be work without progress.
                Err(corrupt(&self.shared.name, "empty fragment"))
            }
            (Collecting(total), k @ (kind::FRAG_MORE | kind::FRAG_LAST)) => {
                if self.assembly.len() + guard.len() > total {
                    Err(corrupt(
                        &self.shared.name,
                        format!("fragments exceed the announced {total} bytes"),
                    ))
                } else {
                    append(&mut self.assembly, &guard, total).and_then(|()| {
                        if k == kind::FRAG_MORE {
                            Ok(false)
                        } else if self.assembly.len() == total {
                            self.assembling = Idle;
                            Ok(true)
                        } else {
                            Err(corrupt(
                                &self.shared.name,
                                format!(
                                    "message ended at {} of the announced {total} bytes",
                                    self.assembly.len()
                                ),
                            ))
                        }
                    })
                }
            }
            // The sender gave up on the message: it never happened.
            (Collecting(_), kind::FRAG_ABORT) => {
                self.assembly = Vec::new();
                self.assembling = Idle;
                Ok(false)
            }
            (Discarding, kind::FRAG_MORE) => Ok(false),
            (Discarding, kind::FRAG_LAST | kind::FRAG_ABORT) => {
                self.assembling = Idle;
                Ok(false)
            }
            (state, k) => Err(corrupt(
                &self.shared.name,
                format!(
                    "frame kind {k} out of sequence (reassembling: {})",
                    state != Idle
                ),
            )),
        };
        drop(guard);
        // Fragments of a message that failed may keep coming; the ones a well-behaved sender
        // sends next (a whole message, or the first fragment of one) end the discarding.
        // The buffer of a message that will not be completed (refused, or withdrawn above) is
        // given back: it may be as large as the peer made it grow, and only a completed
        // message's buffer is worth keeping for the next one.
        result.inspect_err(|_| {
            self.assembly = Vec::new();
            self.assembling = Discarding;
        })
    }

    #[inline]
    fn wait_data(&mut self, deadline: Option<Instant>) -> Result<(), RecvError> {
        let rx = &self.rx;
        let (overtaken, name) = (self.overtaken, &self.shared.name);
        let ready =
            || rx.has_data() || overtaken.is_some_and(|o| o.check(rx.position(), name).is_err());
        let result = self
            .wait
            .wait_until(rx.data_cell(), deadline, ready, &mut self.peer);
        rx.tally().slept(self.wait.take_sleeps());
        match result {
            Err(e @ (WaitError::Disconnected { .. } | WaitError::PeerGone { .. })) => {
                // Frames published before the close are visible now (Acquire in `state`).
                if rx.has_data() {
                    Ok(())
                } else {
                    Err(e.into())
                }
            }
            other => Ok(other?),
        }
    }
}

impl crate::seam::RecvCore for RecvHalf {
    type Guard<'a> = ReadGuard<'a>;

    /// The core of every receive: the next whole message, lent out.
    #[inline]
    fn recv_until(&mut self, deadline: Deadline) -> Result<ReadGuard<'_>, RecvError> {
        let ready = self.next_ready(deadline)?;
        Ok(self.take(ready))
    }

    /// The core of every receive into a buffer: the next whole message, copied into `buf`
    /// (replacing its contents; a reassembled one trades places with `buf` instead).
    fn recv_into_until(
        &mut self,
        buf: &mut Vec<u8>,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        match self.next_ready(deadline)? {
            Ready::Frame(frame) => {
                let msg = self.rx.guard(frame);
                buf.clear();
                buf.extend_from_slice(&msg);
            }
            Ready::Assembled => std::mem::swap(buf, &mut self.assembly),
        }
        Ok(buf.len())
    }

    /// The core of every batch receive: hands to `f`, in order, the next whole message
    /// (waiting for it until `deadline`) and those that are there now after it, up to `max`
    /// in all; frames are read in place and given back in batches. Returns how many it
    /// handed; an error fails the call only if it met the first message, else it ends the
    /// batch and the next call meets it again.
    ///
    /// A peer can keep the ring from running empty for as long as it likes, so `max` is not
    /// the only bound: after the first message the call takes no more once it has moved a
    /// ring's capacity past where it began (the first message included; the message that
    /// crosses that mark is the last, and a message in fragments taken after the first goes
    /// no further than `next_ready` takes it for [`Deadline::Now`], a ring's worth), and with
    /// an instant for a deadline it stops at the first look at the clock past it (after every
    /// [`BATCH_CLOCK_EVERY`] frames, and before each message in fragments).
    fn recv_batch_until<F: FnMut(&[u8])>(
        &mut self,
        max: usize,
        f: &mut F,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        let start = self.rx.position();
        let ring = self.rx.capacity() as u64;
        wait::in_steps(max, |read| {
            if read > 0 {
                if self.rx.position().wrapping_sub(start) >= ring || timed_out(deadline) {
                    return Ok(0);
                }
                // After the first: only what is there now, frame after frame while they are
                // whole messages (one look at the ring each, none at the peer); a fragment
                // goes the way of `next_ready`, which reassembles.
                let mut frames = 0;
                while read + frames < max && self.assembling == Assembling::Idle {
                    if self.rx.position() - start >= ring
                        || (frames % BATCH_CLOCK_EVERY == BATCH_CLOCK_EVERY - 1
                            && timed_out(deadline))
                    {
                        return Ok(frames);
                    }
                    match self.rx.poll_frame() {
                        Ok(Some(frame)) if frame.kind() == kind::DATA => {
                            self.rx.hand_over(frame, f);
                            frames += 1;
                        }
                        Ok(Some(_)) => break,
                        Ok(None) => return Ok(frames),
                        Err(e) if frames == 0 => return Err(e),
                        Err(_) => return Ok(frames),
                    }
                }
                if frames > 0 {
                    return Ok(frames);
                }
            }
            match self.next_ready(if read == 0 { deadline } else { Deadline::Now })? {
                Ready::Frame(frame) => self.rx.hand_over(frame, f),
                Ready::Assembled => f(&self.assembly),
            }
            Ok(1)
        })
    }
}

/// How many frames a batch receive with a deadline hands between two looks at the clock.
const BATCH_CLOCK_EVERY: usize = 64;

/// True if `deadline` is an instant that has passed: where a batch that already handed a
/// message stops (`Now` and `Never` ask for what is there, bounded by the ring's worth).
#[inline]
fn timed_out(deadline: Deadline) -> bool {
    matches!(deadline, Deadline::At(_)) && deadline.passed()
}

/// [`RecvError::Corrupt`] in the channel `channel`.
#[cold]
fn corrupt(channel: &ChannelName, what: impl Into<String>) -> RecvError {
    RecvError::Corrupt {
        channel: channel.clone(),
        what: what.into(),
    }
}

// SAFETY: as for `SendHalf`: the pointers in `rx` and `peer` point into the mapping that the
// half's own `shared` field keeps alive, and the half is the only user of its ring end.
unsafe impl Send for RecvHalf {}

/// Appends `bytes` to a reassembly buffer for a message of `total` bytes. The buffer grows by
/// doubling, never past `total`, and an allocation that fails is an error, not an abort.
fn append(buf: &mut Vec<u8>, bytes: &[u8], total: usize) -> Result<(), RecvError> {
    let needed = buf.len() + bytes.len();
    if needed > buf.capacity() {
        let target = needed
            .max(buf.capacity().saturating_mul(2))
            .min(total.max(needed));
        buf.try_reserve_exact(target - buf.len()).map_err(|_| {
            RecvError::Io(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!(
                    "cannot grow the buffer to {target} bytes to reassemble a message of {total}"
                ),
            ))
        })?;
    }
    buf.extend_from_slice(bytes);
    Ok(())
}
