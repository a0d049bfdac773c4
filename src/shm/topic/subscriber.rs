//! The subscriber: a channel's receiving half over its own cursor in a topic's ring.

use std::ptr::NonNull;

use crate::error::{ChannelName, OpenError, RecvError};
use crate::shm::channel::{mode_of, peek_magic, Overtaken, Reader, RecvHalf};
use crate::shm::layout::topic::{
    slot_lock, state_of, with_state, MODE_LOSSLESS, SLOT_ACTIVE, SLOT_FREE, SLOT_JOINING,
    STATE_MASK,
};
use crate::shm::layout::{CREATOR_LOCK, PEER_PRESENT};
use crate::shm::mapping::{self, Mapping};
use crate::shm::ring::{ReadGuard, RingPtrs};
use crate::sync::Ordering;
use crate::sys::{lock, ProcessId};
use crate::wait::{self, Deadline, WaitStrategy};

use super::protocol;
use super::{Parts, SubscriberConfig, TopicMode};

/// How many positions a joining subscriber tries before it gives up on a topic whose words
/// never let it settle (only a hostile publisher's can keep it from settling).
const JOIN_TRIES: usize = 100_000;

/// A subscriber of a topic: it receives every message its [`Publisher`](crate::Publisher)
/// publishes after it joined (and, if it asked, some published before), in order.
///
/// It has every receive form of a [`Channel`](crate::Channel) (`recv`, `try_recv`,
/// `recv_timeout`, into a buffer, JSON, plain values, batches: the
/// [`Receiver`](crate::Receiver) set). In a lossless topic messages are read in place, as on a
/// channel, and the publisher waits for this subscriber; in an overwrite topic each message is
/// copied out first (and checked against what the publisher overwrote meanwhile), and a
/// subscriber that falls a ring behind gets [`RecvError::Lagged`] once. Once the publisher
/// closed (or died) and everything it sent is read, receives fail with
/// [`RecvError::Disconnected`] (or [`RecvError::PeerGone`]).
pub struct Subscriber {
    rx: RecvHalf,
    parts: Parts,
    slot: usize,
    /// Overwrite: the number of the next message we expect (for `Lagged::missed`).
    next_seq: u64,
    /// Overwrite: the copy of the last message.
    copy: Vec<u8>,
}

// SAFETY: `parts` points into the mapping `rx` keeps alive; atomics only.
unsafe impl Send for Subscriber {}

impl Subscriber {
    /// Joins the topic `name` as a new subscriber that waits with `wait`: it receives every
    /// message published from now on. [`OpenError::NotFound`] if there is no such topic,
    /// [`OpenError::TooManySubscribers`] if the topic has as many as it admits,
    /// [`OpenError::NotAChannel`] if `name` is a channel or a listener.
    pub fn connect(name: &str, wait: WaitStrategy) -> Result<Subscriber, OpenError> {
        Self::connect_with(name, &SubscriberConfig { wait, history: 0 })
    }

    /// [`connect`](Subscriber::connect), asking for up to `config.history` of the messages
    /// published before it joined (as many as the publisher still keeps, see
    /// [`TopicConfig::history`](crate::TopicConfig::history)).
    ///
    /// ```
    /// use shmlink::{Publisher, Subscriber, SubscriberConfig, TopicConfig};
    /// let name = format!("doc-history-{}", std::process::id());
    /// let config = TopicConfig { history: 2, ..TopicConfig::default() };
    /// let mut publisher = Publisher::create(&name, &config)?;
    /// for m in [&b"one"[..], b"two", b"three"] {
    ///     publisher.send(m)?;
    /// }
    /// let late = SubscriberConfig { history: 5, ..SubscriberConfig::default() };
    /// let mut sub = Subscriber::connect_with(&name, &late)?;
    /// assert_eq!(&*sub.recv()?, b"two");
    /// assert_eq!(&*sub.recv()?, b"three");
    /// # Ok::<(), shmlink::Error>(())
    /// ```
    pub fn connect_with(name: &str, config: &SubscriberConfig) -> Result<Subscriber, OpenError> {
        mapping::validate_name(name)?;
        let map = Mapping::open_named(name)?;
        let magic = peek_magic(&map);
        let name: ChannelName = name.into();
        let parts = Parts::read(&map, &name, magic)?;
        let slot = Self::claim_slot(&map, &parts, &name)?;
        let s = parts.slot(slot);
        s.peer.record(ProcessId::current(), mode_of(config.wait));
        // Relaxed: information only (a subscriber limits nothing).
        s.peer.max_message.store(u64::MAX, Ordering::Relaxed);
        // Release: the record above comes with it (for listings).
        s.peer.state.store(PEER_PRESENT, Ordering::Release);
        // Holding the slot's lock, we are its only subscriber; the publisher only ever
        // exchanges the word it read, so a store here wins over its stale exchanges.
        // Relaxed: the next store orders it.
        let word = s.state.load(Ordering::Relaxed);
        let joining = (word & !STATE_MASK).wrapping_add(STATE_MASK + 1) | SLOT_JOINING;
        // Relaxed: ordered before the publisher's scans by the join's fence (`protocol`).
        s.state.store(joining, Ordering::Relaxed);
        // A sleeper a dead holder announced sleeps no more.
        // Relaxed: only this holder's waits touch the cell from now on.
        s.data_wait.sleepers.store(0, Ordering::Relaxed);
        // Counted before this subscriber can sleep: the publisher, after each publish, looks
        // at the count (after its F2; this store comes before our first wait's F1) and wakes
        // this slot from then on. Relaxed: ordered by those fences.
        parts.words().joins.fetch_add(1, Ordering::Relaxed);
        let history = config.history.min(parts.history);
        let failed = |what: &str| {
            // SeqCst, as the drop's: a slot given back; its lock goes with the mapping.
            s.state
                .store(with_state(joining, SLOT_FREE), Ordering::SeqCst);
            OpenError::corrupt(&name, what.to_owned())
        };
        let (position, next_seq) = if parts.mode == MODE_LOSSLESS {
            let tail = &parts.ring_header().tail;
            let pick = |proposal: u64| {
                // Acquire: pairs with the publisher's Release store of its position.
                let tail = tail.load(Ordering::Acquire);
                if history > 0 {
                    if let Some((_, start)) = parts.oldest_since(proposal, history) {
                        return Some(start.min(tail));
                    }
                }
                Some(tail)
            };
            let p = protocol::join(&s.cursor, &parts.words().proposal, pick, JOIN_TRIES)
                .ok_or_else(|| {
                    failed("the publisher's proposal never falls behind its position")
                })?;
            (p, 0)
        } else {
            let (p, seq) = Self::overwrite_start(&parts, history)
                .ok_or_else(|| failed("the topic's index never holds a whole entry"))?;
            // Relaxed: information only (an overwrite publisher reads no cursor).
            s.cursor.store(p, Ordering::Relaxed);
            (p, seq)
        };
        // Release: pairs with the Acquire load of the reclaim rule's scans: the settled cursor
        // comes with it. A publisher that dropped us meanwhile keeps its word: we then read
        // nothing.
        let _ = s.state.compare_exchange(
            joining,
            with_state(joining, SLOT_ACTIVE),
            Ordering::Release,
            Ordering::Relaxed,
        );
        debug_assert!(position == s.cursor.load(Ordering::Relaxed));
        let hdr = parts.segment();
        let ptrs = RingPtrs {
            header: parts.ring(),
            head: NonNull::from(&s.cursor),
            data_cell: NonNull::from(&s.data_wait),
            region: parts.region(),
            capacity: parts.capacity,
            peer_mode: NonNull::from(&hdr.creator.wait_mode),
            counters: NonNull::from(&s.counters),
        };
        let overtaken = Overtaken {
            state: NonNull::from(&s.state),
            claim: (parts.mode != MODE_LOSSLESS).then(|| NonNull::from(&*parts.words().claim)),
        };
        let reader = Reader {
            ptrs,
            me: NonNull::from(&s.peer),
            writer: NonNull::from(&*hdr.creator),
            writer_lock: CREATOR_LOCK,
            overtaken,
        };
        // SAFETY: every pointer above points into `map`, which moves into the half; the slot
        // is ours (its lock), so the half is its cursor's only consumer.
        let rx = unsafe { RecvHalf::reader_of_many(map, name, reader, config.wait) };
        // On failure the mapping is gone with the half, and with it the slot's lock: the
        // publisher's next sweep frees the slot.
        let rx = rx?;
        Ok(Subscriber {
            rx,
            parts,
            slot,
            next_seq,
            copy: Vec::new(),
        })
    }

    /// Takes a slot: a free one whose lock we get, else one whose holder died without
    /// closing (nobody holds its lock).
    fn claim_slot(map: &Mapping, parts: &Parts, name: &ChannelName) -> Result<usize, OpenError> {
        for free_only in [true, false] {
            for i in 0..parts.slots {
                // Relaxed: a hint; the lock decides.
                let state = state_of(parts.slot(i).state.load(Ordering::Relaxed));
                if free_only && state != SLOT_FREE {
                    continue;
                }
                if lock::take(map.file(), slot_lock(parts.slots_offset, i), false)? {
                    return Ok(i);
                }
            }
        }
        Err(OpenError::TooManySubscribers {
            channel: name.clone(),
            limit: parts.slots,
        })
    }

    /// Where an overwrite subscriber starts, and the number of the message there: after the
    /// last message published, or `history` messages back (as far as the ring and the index
    /// still hold them).
    fn overwrite_start(parts: &Parts, history: usize) -> Option<(u64, u64)> {
        let words = parts.words();
        for _ in 0..JOIN_TRIES {
            if history > 0 {
                // Acquire: pairs with the publisher's Release fence after its claim.
                let claim = words.claim.load(Ordering::Acquire);
                if let Some(found) = parts.oldest_since(claim, history) {
                    return Some((found.1, found.0));
                }
            }
            // Acquire: pairs with the publisher's Release store: the entry below is written.
            let published = words.published.load(Ordering::Acquire);
            if published == 0 {
                return Some((0, 0));
            }
            if let Some((seq, _, end)) = protocol::index_read(parts.entry(published - 1)) {
                if seq == published - 1 {
                    return Some((end, published));
                }
            }
            std::hint::spin_loop();
        }
        None
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        self.rx.name()
    }

    /// Its receiving half (for the selector and the async surface).
    pub(crate) fn reader(&mut self) -> &mut RecvHalf {
        &mut self.rx
    }

    /// Where its ring region and its whole mapping lie in this process (for the test hooks).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn regions(&self) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let ring = self.rx.region();
        let start = ring.end - self.parts.region_offset - self.parts.capacity;
        (ring.clone(), start..ring.end)
    }

    /// Its receiving half, to look at.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn reader_ref(&self) -> &RecvHalf {
        &self.rx
    }

    /// What a slow subscriber costs on this topic.
    pub fn mode(&self) -> TopicMode {
        self.parts.topic_mode()
    }

    /// The slot this subscriber holds (as [`Publisher::subscribers`](crate::Publisher::subscribers)
    /// names it).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Largest message the publisher sends (`capacity / 2 - 72`).
    pub fn max_message(&self) -> usize {
        crate::shm::ring::max_payload(self.parts.capacity)
    }

    /// True while the publisher is there and its process runs.
    pub fn is_peer_connected(&self) -> bool {
        self.rx.is_peer_connected()
    }

    /// The publisher's process id.
    pub fn peer_pid(&self) -> Option<u32> {
        self.rx.peer_pid()
    }

    /// Overwrite topics: the next message copied into `self.copy`, checked against the
    /// publisher's claim; `Lagged` (once) when it was written over, after which the subscriber
    /// stands at the oldest message still there.
    fn next_copied(&mut self, deadline: Deadline) -> Result<(), RecvError> {
        let parts = self.parts;
        let claim = &*parts.words().claim;
        // Catch-ups in a row that found nothing missed. An honest publisher that laps us again
        // has published more by the next one, which then reports the messages missed; one whose
        // claim stays past every message it indexes (or whose count of messages goes back)
        // would keep us here for ever, so past [`IDLE_CATCH_UPS`] that is `Corrupt`.
        let mut idle_catch_ups = 0;
        loop {
            let from = self.rx.position();
            match self.rx.next_ready(deadline) {
                Ok(ready) => {
                    let msg = self.rx.take(ready);
                    self.copy.clear();
                    self.copy.extend_from_slice(&msg);
                    drop(msg);
                    if protocol::fresh(claim, from) {
                        self.next_seq += 1;
                        return Ok(());
                    }
                }
                Err(RecvError::Lagged { .. }) => {}
                Err(e) => return Err(e),
            }
            match self.catch_up()? {
                Some(missed) => {
                    self.rx.count_missed(missed);
                    return Err(RecvError::Lagged {
                        channel: self.rx.channel_name().clone(),
                        missed,
                    });
                }
                None if idle_catch_ups < IDLE_CATCH_UPS => idle_catch_ups += 1,
                None => {
                    return Err(RecvError::Corrupt {
                        channel: self.rx.channel_name().clone(),
                        what: "the topic's claim stays past every message its index holds".into(),
                    })
                }
            }
        }
    }

    /// Puts a lagged overwrite subscriber at the oldest message still there: how many it
    /// missed (None when it missed none: it stood in front of markers only).
    fn catch_up(&mut self) -> Result<Option<u64>, RecvError> {
        let words = self.parts.words();
        // Acquire: pairs with the publisher's Release fence after its claim.
        let claim = words.claim.load(Ordering::Acquire);
        let (seq, start) = match self.parts.oldest_since(claim, self.parts.index_len) {
            Some(found) => found,
            None => Self::overwrite_start(&self.parts, 0)
                .map(|(p, s)| (s, p))
                .ok_or_else(|| RecvError::Corrupt {
                    channel: self.rx.channel_name().clone(),
                    what: "the topic's index never holds a whole entry".into(),
                })?,
        };
        self.rx.reposition(start)?;
        let missed = seq.saturating_sub(self.next_seq);
        self.next_seq = seq;
        Ok((missed > 0).then_some(missed))
    }
}

/// How many catch-ups in a row that find nothing missed an overwrite subscriber makes in one
/// receive before it reports the topic corrupt (each is bounded: a look at the index).
const IDLE_CATCH_UPS: u32 = 64;

impl Drop for Subscriber {
    fn drop(&mut self) {
        let state = &self.parts.slot(self.slot).state;
        // Relaxed, then SeqCst: the slot is free for the reclaim rule's next scan; the
        // publisher asleep for room is woken when `rx` closes our record.
        let word = state.load(Ordering::Relaxed);
        state.store(with_state(word, SLOT_FREE), Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber")
            .field("name", &self.name())
            .field("slot", &self.slot)
            .field("mode", &self.mode())
            .finish()
    }
}

impl crate::seam::RecvCore for Subscriber {
    type Guard<'a> = ReadGuard<'a>;

    #[inline]
    fn recv_until(&mut self, deadline: Deadline) -> Result<ReadGuard<'_>, RecvError> {
        if self.parts.mode == MODE_LOSSLESS {
            // `Dropped` once the publisher dropped us (a lossless reader has no claim to lag behind).
            self.rx.overtaken()?;
            return self.rx.recv_until(deadline);
        }
        self.next_copied(deadline)?;
        Ok(ReadGuard::assembled(&self.copy, self.rx.channel_name()))
    }

    fn recv_into_until(
        &mut self,
        buf: &mut Vec<u8>,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        if self.parts.mode == MODE_LOSSLESS {
            // `Dropped` once the publisher dropped us (a lossless reader has no claim to lag behind).
            self.rx.overtaken()?;
            return self.rx.recv_into_until(buf, deadline);
        }
        self.next_copied(deadline)?;
        std::mem::swap(buf, &mut self.copy);
        Ok(buf.len())
    }

    fn recv_batch_until<F: FnMut(&[u8])>(
        &mut self,
        max: usize,
        f: &mut F,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        if self.parts.mode == MODE_LOSSLESS {
            // `Dropped` once the publisher dropped us (a lossless reader has no claim to lag behind).
            self.rx.overtaken()?;
            return self.rx.recv_batch_until(max, f, deadline);
        }
        // At most a ring's worth per call, as on a channel.
        // Saturating: in overwrite mode the position follows what the publisher's index says,
        // which a hostile publisher can put anywhere.
        let end = self
            .rx
            .position()
            .saturating_add(self.parts.capacity as u64);
        wait::in_steps(max, |read| {
            if read > 0 && self.rx.position() >= end {
                return Ok(0);
            }
            match self.next_copied(if read == 0 { deadline } else { Deadline::Now }) {
                Ok(()) => {
                    f(&self.copy);
                    Ok(1)
                }
                Err(e) => Err(e),
            }
        })
    }
}
