//! Topics on the ipc-channel backend: [`IpcPublisher`] and [`IpcSubscriber`], behind
//! `EndpointPublisher` and `EndpointSubscriber` where no mapping can be made.
//!
//! The publisher serves its subscribers as a listener serves clients (`listener/`, its
//! rendezvous file marked `topic` or `topic-overwrite`): each subscriber is a duplex of its
//! own, and each message is sent to each subscriber, a copy each (the cost the docs state: one
//! system call and one copy per subscriber and message, where shared memory writes a message
//! once). A subscriber is queued by the accept thread before its connect returns, and the
//! publisher takes in the queued ones before each message, so every subscriber gets every
//! message published after its connect returned.
//!
//! What a slow subscriber costs, as on shared memory:
//! * lossless: a send first waits (until its deadline) until every subscriber's sending thread
//!   is free, so it times out (or is `Full`) having sent to nobody; then it sends to each
//!   (without a deadline on the caller's thread, in turn: the publisher waits for the slowest);
//! * overwrite: the publisher never waits: a subscriber whose sending thread is still busy
//!   misses the message, and the next message that reaches it carries the count
//!   ([`RecvError::Lagged`] once, then that message).
//!
//! History: the listener's queue keeps the last messages and greets each new subscriber with
//! them, in one message, under the lock the publisher adds each message under (see
//! `listener::Queue::push`), and the subscriber keeps as many as it asked for.
//!
//! Each message carries a tag byte: [`DATA`] (the bytes follow), [`LAGGED`] (the count of
//! missed messages, then the bytes), [`HISTORY`] (length-prefixed messages). A dropped
//! subscriber ([`IpcPublisher::drop_subscriber`]) is told by the goodbye byte of its duplex
//! ([`DROPPED`](super::DROPPED)): [`RecvError::Dropped`] once it has read what was sent.

use std::cell::RefCell;
use std::collections::VecDeque;

use serde::Serialize;

use super::listener::{self, IpcListener, Lease};
use super::rendezvous::{self, Published, Serves};
use super::{Ended, IpcDuplex, IpcMessage, BATCH_BYTES, BATCH_MESSAGES, DROPPED, MAX_MESSAGE};
use crate::error::{ChannelName, OpenError, RecvError, SendError};
use crate::seam::{Grant, Sealed};
use crate::shm::topic::{SubscriberConfig, SubscriberInfo, TopicConfig, TopicMode};
use crate::wait::{self, Deadline};

/// A message: the tag, then its bytes.
const DATA: u8 = 0;
/// A message after missed ones: the tag, the count (8 bytes, little-endian), then its bytes.
const LAGGED: u8 = 1;
/// The messages kept for a late subscriber: the tag, then each as a 4-byte little-endian
/// length and its bytes, oldest first.
const HISTORY: u8 = 2;
/// Where the bytes of a [`DATA`] message start.
const DATA_AT: usize = 1;
/// Where the bytes of a [`LAGGED`] message start.
const LAGGED_AT: usize = 9;

/// Largest message a topic on this backend carries.
pub(crate) const MAX_TOPIC_MESSAGE: usize = MAX_MESSAGE - LAGGED_AT;

/// The greeting of a late subscriber: the newest of `kept` that fit in one message.
pub(super) fn history_message(kept: &VecDeque<Vec<u8>>) -> Vec<u8> {
    let mut room = MAX_MESSAGE - 1;
    let newest = kept
        .iter()
        .rev()
        .take_while(|m| {
            let fits = m.len() + 4 <= room;
            room = room.saturating_sub(m.len() + 4);
            fits
        })
        .count();
    let mut out = vec![HISTORY];
    for m in kept.iter().skip(kept.len() - newest) {
        // At most MAX_TOPIC_MESSAGE (< 2^32) bytes each.
        out.extend_from_slice(&(m.len() as u32).to_le_bytes());
        out.extend_from_slice(m);
    }
    out
}

/// A topic's mode from whether it overwrites.
fn mode_of(overwrite: bool) -> TopicMode {
    if overwrite {
        TopicMode::Overwrite
    } else {
        TopicMode::Lossless
    }
}

/// One subscriber as the publisher holds it.
struct Member {
    duplex: IpcDuplex,
    /// Overwrite: messages it missed since the last one that reached it.
    missed: u64,
    /// Its place among the subscribers the topic admits.
    _lease: Lease,
}

/// A topic's publisher on the ipc-channel backend.
pub(crate) struct IpcPublisher {
    name: ChannelName,
    /// The subscribers, by slot (a free slot is `None`).
    members: RefCell<Vec<Option<Member>>>,
    overwrite: bool,
    published: u64,
    /// The message being sent: its tag, then its bytes.
    out: Vec<u8>,
    /// A lagged subscriber's copy of it.
    lagged: Vec<u8>,
    /// Declared last: the subscribers see their duplexes close before the name goes.
    listener: IpcListener,
}

impl IpcPublisher {
    /// Creates the topic `name` on this backend. `config.capacity` and `config.wait` mean
    /// nothing here (no ring; a lossless send blocks on the subscribers' sockets).
    pub(crate) fn create(name: &str, config: &TopicConfig) -> Result<IpcPublisher, OpenError> {
        super::validate_name(name)?;
        config.check_limits(name)?;
        let overwrite = config.mode == TopicMode::Overwrite;
        let listener = IpcListener::serve(
            name,
            config.max_subscribers,
            Serves::Topic { overwrite },
            config.history,
        )?;
        Ok(IpcPublisher {
            name: name.into(),
            members: RefCell::new(Vec::new()),
            overwrite,
            published: 0,
            out: Vec::new(),
            lagged: Vec::new(),
            listener,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn mode(&self) -> TopicMode {
        mode_of(self.overwrite)
    }

    pub(crate) fn published(&self) -> u64 {
        self.published
    }

    /// Takes in the subscribers that joined since the last look; `sent` is added to the
    /// history in the same step.
    fn admit(&self, sent: Option<&[u8]>) {
        let mut members = self.members.borrow_mut();
        // An error the accept thread reported ends it: no subscriber joins after it, and the
        // publisher goes on with those it has.
        for (duplex, lease) in self.listener.arrivals(sent).into_iter().flatten() {
            let member = Some(Member {
                duplex,
                missed: 0,
                _lease: lease,
            });
            match members.iter().position(Option::is_none) {
                Some(free) => members[free] = member,
                None => members.push(member),
            }
        }
    }

    /// The subscribers now joined, each as [`SubscriberInfo`] says (`behind` is 0: this
    /// backend cannot see how far a subscriber has read).
    pub(crate) fn subscribers(&self) -> Vec<SubscriberInfo> {
        self.admit(None);
        let members = self.members.borrow();
        members
            .iter()
            .enumerate()
            .filter_map(|(slot, m)| {
                let m = m.as_ref()?;
                Some(SubscriberInfo {
                    slot,
                    state: "active",
                    pid: m.duplex.peer_pid().unwrap_or(0),
                    alive: m.duplex.is_peer_connected(),
                    behind: 0,
                })
            })
            .collect()
    }

    /// Subscribers joined and still connected; those that left give their places back here
    /// (or at the next send, which finds them gone).
    pub(crate) fn subscriber_count(&self) -> usize {
        self.admit(None);
        let mut members = self.members.borrow_mut();
        for member in members.iter_mut() {
            if member
                .as_ref()
                .is_some_and(|m| !m.duplex.is_peer_connected())
            {
                *member = None;
            }
        }
        members.iter().flatten().count()
    }

    /// Drops the subscriber in `slot`: it reads what was sent to it, then
    /// [`RecvError::Dropped`].
    pub(crate) fn drop_subscriber(&mut self, slot: usize) -> bool {
        self.admit(None);
        match self.members.get_mut().get_mut(slot).and_then(Option::take) {
            Some(mut member) => {
                member.duplex.goodbye = DROPPED;
                true
            }
            None => false,
        }
    }

    /// Fails unless a message of `len` bytes may go out now: lossless, waits until
    /// `deadline` until every subscriber can take it (`Full` for [`Deadline::Now`]).
    /// Subscribers found gone are dropped.
    fn ready(&mut self, len: usize, deadline: Deadline) -> Result<(), SendError> {
        if len > MAX_TOPIC_MESSAGE {
            return Err(SendError::TooLarge {
                channel: self.name.clone(),
                len,
                max: MAX_TOPIC_MESSAGE,
            });
        }
        self.admit(None);
        if self.overwrite {
            return Ok(());
        }
        for member in self.members.get_mut() {
            let Some(m) = member else { continue };
            match m.duplex.ready_to_send(len + DATA_AT, deadline) {
                Ok(()) => {}
                Err(SendError::Full { .. }) => {
                    return Err(SendError::Full {
                        channel: self.name.clone(),
                    })
                }
                Err(SendError::Timeout { .. }) => {
                    return Err(SendError::Timeout {
                        channel: self.name.clone(),
                    })
                }
                // Closed, dead or broken: it stops holding the topic.
                Err(_) => *member = None,
            }
        }
        Ok(())
    }

    /// Sends `self.out` (tag and bytes), which [`ready`](IpcPublisher::ready) said may go.
    fn publish(&mut self, deadline: Deadline) {
        let out = std::mem::take(&mut self.out);
        self.admit(Some(&out[DATA_AT..]));
        let mut lagged = std::mem::take(&mut self.lagged);
        for member in self.members.get_mut() {
            let Some(m) = member else { continue };
            let sent = if !self.overwrite {
                m.duplex.send_ready(&out, deadline)
            } else {
                match m.duplex.ready_to_send(out.len() + LAGGED_AT, Deadline::Now) {
                    Ok(()) if m.missed == 0 => m.duplex.send_ready(&out, Deadline::Now),
                    Ok(()) => {
                        lagged.clear();
                        lagged.push(LAGGED);
                        lagged.extend_from_slice(&m.missed.to_le_bytes());
                        lagged.extend_from_slice(&out[DATA_AT..]);
                        m.missed = 0;
                        m.duplex.send_ready(&lagged, Deadline::Now)
                    }
                    Err(SendError::Full { .. }) => {
                        m.missed += 1;
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            };
            if sent.is_err() {
                *member = None;
            }
        }
        self.lagged = lagged;
        self.out = out;
        self.published += 1;
    }

    /// `self.out` made ready for a message: the tag alone.
    fn start(&mut self) {
        self.out.clear();
        self.out.push(DATA);
    }
}

impl crate::seam::SendCore for IpcPublisher {
    type Grant<'a> = IpcTopicGrant<'a>;

    /// The core of every send: to every subscriber, as the module says.
    fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        self.ready(bytes.len(), deadline)?;
        self.start();
        self.out.extend_from_slice(bytes);
        self.publish(deadline);
        Ok(())
    }

    fn send_json_until<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        self.start();
        let mut out = std::mem::take(&mut self.out);
        let encoded = crate::json::encode(&mut out, value);
        self.out = out;
        if let Err(source) = encoded {
            return Err(SendError::Json {
                channel: self.name.clone(),
                source,
            });
        }
        let len = self.out.len() - DATA_AT;
        self.ready(len, deadline)?;
        self.publish(deadline);
        Ok(())
    }

    fn reserve_until(
        &mut self,
        len: usize,
        deadline: Deadline,
    ) -> Result<IpcTopicGrant<'_>, SendError> {
        self.ready(len, deadline)?;
        self.start();
        self.out.resize(DATA_AT + len, 0);
        Ok(IpcTopicGrant {
            publisher: self,
            deadline,
        })
    }

    fn send_batch_until<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        wait::in_steps(batch.len(), |sent| {
            self.send_until(batch[sent].as_ref(), deadline).map(|()| 1)
        })
    }
}

/// Room for one message of an [`IpcPublisher`], written in place and sent to every subscriber
/// by [`commit`](IpcTopicGrant::commit); dropped, it sends nothing.
pub(crate) struct IpcTopicGrant<'a> {
    publisher: &'a mut IpcPublisher,
    deadline: Deadline,
}

impl IpcTopicGrant<'_> {
    /// Sends the first `used` bytes (at most the grant's length). The reservation found every
    /// subscriber ready, so this does not fail; a subscriber that joined since gets it too.
    pub(crate) fn commit(self, used: usize) -> Result<(), SendError> {
        let out = &mut self.publisher.out;
        out.truncate(DATA_AT + used.min(out.len() - DATA_AT));
        self.publisher.publish(self.deadline);
        Ok(())
    }
}

impl Sealed for IpcTopicGrant<'_> {}

impl Grant for IpcTopicGrant<'_> {
    fn commit(self, used: usize) -> Result<(), SendError> {
        IpcTopicGrant::commit(self, used)
    }
}

impl std::ops::Deref for IpcTopicGrant<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.publisher.out[DATA_AT..]
    }
}

impl std::ops::DerefMut for IpcTopicGrant<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.publisher.out[DATA_AT..]
    }
}

/// A topic's subscriber on the ipc-channel backend.
pub(crate) struct IpcSubscriber {
    duplex: IpcDuplex,
    overwrite: bool,
    /// Most retained messages it keeps of a greeting.
    history: usize,
    /// Where the bytes of the message the duplex holds start, while it is not handed out.
    held: Option<usize>,
    /// Messages missed before the held one, not yet told.
    lagged: Option<u64>,
    /// Retained messages not yet handed out, oldest first.
    backlog: VecDeque<Vec<u8>>,
}

impl IpcSubscriber {
    /// Joins the topic `name` published on this backend.
    pub(crate) fn connect_with(
        name: &str,
        config: &SubscriberConfig,
    ) -> Result<IpcSubscriber, OpenError> {
        super::validate_name(name)?;
        let overwrite = match rendezvous::read(name)? {
            Published::Listener {
                serves: Serves::Topic { overwrite },
                ..
            } => overwrite,
            _ => return Err(listener::wrong_kind(name, true)),
        };
        let duplex = listener::connect(name, None, true)?;
        Ok(IpcSubscriber {
            duplex,
            overwrite,
            history: config.history,
            held: None,
            lagged: None,
            backlog: VecDeque::new(),
        })
    }

    pub(crate) fn name(&self) -> &str {
        self.duplex.name()
    }

    pub(crate) fn mode(&self) -> TopicMode {
        mode_of(self.overwrite)
    }

    pub(crate) fn max_message(&self) -> usize {
        MAX_TOPIC_MESSAGE
    }

    pub(crate) fn is_peer_connected(&self) -> bool {
        self.duplex.is_peer_connected()
    }

    pub(crate) fn peer_pid(&self) -> Option<u32> {
        self.duplex.peer_pid()
    }

    /// A receive's error as this subscriber's: the publisher's goodbye for a dropped
    /// subscriber makes a closed duplex [`RecvError::Dropped`].
    fn ended(&self, e: RecvError) -> RecvError {
        match e {
            RecvError::Disconnected { channel }
                if self.duplex.ended.get() == Some(Ended::Dropped) =>
            {
                RecvError::Dropped { channel }
            }
            e => e,
        }
    }

    fn corrupt(&self, what: &str) -> RecvError {
        RecvError::Corrupt {
            channel: self.duplex.name.clone(),
            what: format!("a topic message of the ipc-channel backend {what}"),
        }
    }

    /// Makes a message ready to hand out (`held`) or a lag ready to tell, waiting for one
    /// until `deadline`.
    fn fetch(&mut self, deadline: Deadline) -> Result<(), RecvError> {
        while self.held.is_none() && self.lagged.is_none() {
            if let Some(next) = self.backlog.pop_front() {
                self.duplex.inbox = next;
                self.held = Some(0);
                break;
            }
            if let Err(e) = self.duplex.receive(deadline) {
                return Err(self.ended(e));
            }
            let inbox = &self.duplex.inbox;
            match inbox.first() {
                Some(&DATA) => self.held = Some(DATA_AT),
                Some(&LAGGED) if inbox.len() >= LAGGED_AT => {
                    let mut count = [0; 8];
                    count.copy_from_slice(&inbox[1..LAGGED_AT]);
                    self.lagged = Some(u64::from_le_bytes(count));
                    self.held = Some(LAGGED_AT);
                }
                Some(&HISTORY) => {
                    let mut kept = VecDeque::new();
                    let mut rest = &inbox[1..];
                    while !rest.is_empty() {
                        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
                            return Err(self.corrupt("holds a history cut short"));
                        };
                        let len = u32::from_le_bytes(*len) as usize;
                        if len > tail.len() {
                            return Err(self.corrupt("holds a history cut short"));
                        }
                        if self.history > 0 {
                            if kept.len() == self.history {
                                kept.pop_front();
                            }
                            kept.push_back(tail[..len].to_vec());
                        }
                        rest = &tail[len..];
                    }
                    self.backlog = kept;
                }
                _ => return Err(self.corrupt("has an unknown tag")),
            }
        }
        Ok(())
    }

    /// The lag to tell, or where the held message starts (taking it).
    fn take(&mut self) -> Result<usize, RecvError> {
        if let Some(missed) = self.lagged.take() {
            return Err(RecvError::Lagged {
                channel: self.duplex.name.clone(),
                missed,
            });
        }
        Ok(self.held.take().unwrap_or(self.duplex.inbox.len()))
    }
}

impl crate::seam::RecvCore for IpcSubscriber {
    type Guard<'a> = IpcMessage<'a>;

    fn recv_until(&mut self, deadline: Deadline) -> Result<IpcMessage<'_>, RecvError> {
        self.fetch(deadline)?;
        let start = self.take()?;
        Ok(IpcMessage {
            bytes: &self.duplex.inbox[start..],
            channel: &self.duplex.name,
        })
    }

    fn recv_into_until(
        &mut self,
        buf: &mut Vec<u8>,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        self.fetch(deadline)?;
        let start = self.take()?;
        buf.clear();
        buf.extend_from_slice(&self.duplex.inbox[start..]);
        Ok(buf.len())
    }

    /// As the duplex's batch receive; a lag met after the first message ends the batch and is
    /// told by the next call.
    fn recv_batch_until<F: FnMut(&[u8])>(
        &mut self,
        max: usize,
        f: &mut F,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        let mut bytes = 0;
        wait::in_steps(max.min(BATCH_MESSAGES), |read| {
            if read > 0 {
                if bytes >= BATCH_BYTES || matches!(deadline, Deadline::At(_)) && deadline.passed()
                {
                    return Ok(0);
                }
                self.fetch(Deadline::Now)?;
                if self.lagged.is_some() {
                    return Ok(0);
                }
            }
            let msg = self.recv_until(if read == 0 { deadline } else { Deadline::Now })?;
            bytes += msg.len();
            f(&msg);
            Ok(1)
        })
    }
}
