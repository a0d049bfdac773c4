//! The publisher: a ring's producer whose gate is the subscribers' table.

use std::collections::VecDeque;
use std::os::unix::io::{AsRawFd, RawFd};
use std::ptr::NonNull;
use std::time::Instant;

use crate::error::{ChannelName, OpenError, SendError, WaitError};
use crate::shm::channel::mode_of;
use crate::shm::layout::topic::{
    slot_lock, MODE_LOSSLESS, SLOT_ACTIVE, SLOT_DROPPED, SLOT_FREE, SLOT_JOINING,
};
use crate::shm::layout::{PEER_CLOSED, PEER_PRESENT, READY};
use crate::shm::mapping::{self, Mapping};
use crate::shm::ring::{kind, max_payload, Gate, Producer, RingPtrs, WriteGrant, FRAME_ALIGN};
use crate::sync::Ordering;
use crate::sys::{lock, HoldsEnd, ProcessId};
use crate::wait::{self, Deadline, Waiter, CHECK_INTERVAL};

use super::protocol;
use super::{Parts, TopicConfig, TopicMode};
use crate::shm::layout::topic::{state_name, state_of, with_state};

/// The publishing end of a topic: one writer, whose every message each subscriber receives.
///
/// It has every send form of a [`Channel`](crate::Channel) (`send`, `try_send`,
/// `send_timeout`, JSON, plain values, `reserve`, batches: the [`Sender`](crate::Sender)
/// set), each written once into the ring whatever the number of subscribers. Messages are at
/// most [`max_message`](Publisher::max_message) bytes (`capacity / 2 - 72`): a topic does not
/// fragment. Dropping the publisher closes the topic (subscribers get
/// [`RecvError::Disconnected`](crate::RecvError::Disconnected) once they have read everything)
/// and removes its name.
///
/// ```
/// use shmlink::{Publisher, Subscriber, TopicConfig, WaitStrategy};
/// let name = format!("doc-topic-{}", std::process::id());
/// let mut publisher = Publisher::create(&name, &TopicConfig::default())?;
/// let mut a = Subscriber::connect(&name, WaitStrategy::Block)?;
/// let mut b = Subscriber::connect(&name, WaitStrategy::Block)?;
/// publisher.send(b"tick")?;
/// assert_eq!(&*a.recv()?, b"tick");
/// assert_eq!(&*b.recv()?, b"tick");
/// # Ok::<(), shmlink::Error>(())
/// ```
pub struct Publisher {
    tx: Producer,
    /// Dropped before `map`: its registrations point into it.
    wait: Waiter,
    table: Table,
    max: usize,
    /// Serialisation buffer for JSON.
    scratch: Vec<u8>,
    // Declared last: the mapping everything above points into. Owns the name.
    _map: Mapping,
}

// SAFETY: the pointers in `tx` and `table` point into `map`, which the publisher owns; all
// shared words are atomics.
unsafe impl Send for Publisher {}

/// One subscriber as its publisher sees it ([`Publisher::subscribers`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubscriberInfo {
    /// Its slot, for [`Publisher::drop_subscriber`].
    pub slot: usize,
    /// `"joining"`, `"active"` or `"dropped"`.
    pub state: &'static str,
    /// The process id it recorded (information only).
    pub pid: u32,
    /// Whether its process still holds the slot.
    pub alive: bool,
    /// How many bytes of the ring it has still to read: what it holds back in a lossless
    /// topic.
    pub behind: u64,
}

/// The subscribers' table, as the publisher's waits and its gate see it.
struct Table {
    parts: Parts,
    fd: RawFd,
    name: ChannelName,
    last_sweep: Option<Instant>,
}

impl Table {
    /// Frees the slots whose subscriber died without closing (nobody holds their lock): they
    /// no longer hold the publisher back. True if one was freed.
    fn sweep(&mut self) -> bool {
        self.last_sweep = Some(Instant::now());
        let mut freed = false;
        for i in 0..self.parts.slots {
            let slot = self.parts.slot(i);
            // Acquire: pairs with the Release stores of a subscriber's join.
            let word = slot.state.load(Ordering::Acquire);
            let state = state_of(word);
            if state == SLOT_FREE {
                continue;
            }
            let held = lock::alive(self.fd, slot_lock(self.parts.slots_offset, i)).unwrap_or(true);
            if !held {
                // Release: nothing of the slot is read after; SeqCst would do no more. A word
                // that changed (a new subscriber took the slot) is left alone.
                freed |= slot
                    .state
                    .compare_exchange(
                        word,
                        with_state(word, SLOT_FREE),
                        Ordering::SeqCst,
                        Ordering::Relaxed,
                    )
                    .is_ok();
            }
        }
        freed
    }

    /// [`sweep`](Table::sweep), at most once per check interval.
    fn sweep_throttled(&mut self) {
        if self
            .last_sweep
            .is_none_or(|last| last.elapsed() >= CHECK_INTERVAL)
        {
            self.sweep();
        }
    }
}

impl wait::Peer for Table {
    fn check(&mut self, process: bool) -> Result<(), WaitError> {
        // The subscribers never end a publisher's wait: a dead one's slot is freed, and the
        // wait goes on with room or without.
        if process {
            self.sweep();
        }
        Ok(())
    }

    fn channel(&self) -> ChannelName {
        self.name.clone()
    }

    fn process(&mut self) -> Option<(u32, u64)> {
        // Many processes, none to watch: the wait sleeps in slices and sweeps after each.
        None
    }

    fn holds_end(&self) -> HoldsEnd {
        Box::new(|| true)
    }
}

/// What stands for the consumer's index in the publisher's producer (see `protocol`).
struct TopicGate {
    parts: Parts,
    /// The last floor (lossless) or claim (overwrite) returned.
    last: u64,
    /// Messages published so far.
    seq: u64,
    /// Lossless with a history: where the retained messages start, oldest first.
    kept: VecDeque<u64>,
    /// Whether the index is kept (overwrite, or a history).
    indexed: bool,
    /// The count of joins as last read (`TopicWords::joins`).
    joins: u64,
    /// The slots a subscriber may sleep on: every slot in use when `joins` was last read.
    readers: Vec<usize>,
}

impl TopicGate {
    /// Wakes the subscribers that may sleep in front of the frames published from `from` on:
    /// after F2, looks at the count of joins (a subscriber counts its join before it can
    /// sleep, so a new one is seen here whenever its look could miss this publish) and, for
    /// each slot in use with a sleeper announced, at its cursor: a subscriber whose cursor
    /// (published before it slept) is below `from` sleeps in front of an earlier frame, whose
    /// publish woke it (`Producer::notify_consumer`'s rule); in an overwrite topic one the
    /// claim has passed is woken whatever its cursor (it lagged, and its receive says so).
    fn wake(&mut self, from: u64) -> bool {
        let parts = self.parts;
        let overwrite = parts.mode != MODE_LOSSLESS;
        let claim = self.last;
        let (joins, readers) = (&mut self.joins, &mut self.readers);
        wait::wake_readers(|wake| {
            // Relaxed: ordered by F2 (see above).
            let now = parts.words().joins.load(Ordering::Relaxed);
            if now != *joins {
                *joins = now;
                readers.clear();
                readers.extend((0..parts.slots).filter(|&i| {
                    // Relaxed: ordered by F2; a slot that goes in use later counts a join.
                    state_of(parts.slot(i).state.load(Ordering::Relaxed)) != SLOT_FREE
                }));
            }
            for &i in readers.iter() {
                let slot = parts.slot(i);
                wake(&slot.data_wait, &mut || {
                    // Relaxed: ordered by F2 (see above).
                    let cursor = slot.cursor.load(Ordering::Relaxed);
                    cursor >= from || (overwrite && cursor < claim)
                });
            }
        })
    }
}

impl Gate for TopicGate {
    fn reclaim(&mut self, tail: u64, end: u64) -> Result<u64, SendError> {
        let cap = self.parts.capacity as u64;
        let words = self.parts.words();
        self.last = if self.parts.mode == MODE_LOSSLESS {
            // Retained messages the frames up to `end` would overwrite are let go.
            while self
                .kept
                .front()
                .is_some_and(|&start| start + cap < end + FRAME_ALIGN as u64)
            {
                self.kept.pop_front();
            }
            let keep = self.kept.front().copied().unwrap_or(tail).max(self.last);
            let floor =
                protocol::lossless_floor(&self.parts, &words.proposal, self.last, tail, keep);
            // Relaxed: information for listings (and the index a successor's producer would
            // start from).
            words.floor.store(floor, Ordering::Relaxed);
            floor
        } else {
            protocol::overwrite_claim(&words.claim, self.last, tail, end, cap)
        };
        Ok(self.last)
    }

    #[inline]
    fn published(&mut self, start: u64, next: u64, from: u64) -> bool {
        let seq = self.seq;
        self.seq += 1;
        if self.indexed {
            protocol::index_write(self.parts.entry(seq), seq, start, next);
            if self.parts.history > 0 && self.parts.mode == MODE_LOSSLESS {
                self.kept.push_back(start);
                if self.kept.len() > self.parts.history {
                    self.kept.pop_front();
                }
            }
        }
        // Release: pairs with the Acquire load of subscribers that look for messages in the
        // index (`Parts::oldest_since`, the join): the entries below it are written.
        self.parts
            .words()
            .published
            .store(self.seq, Ordering::Release);
        self.wake(from)
    }
}

impl Publisher {
    /// Creates the topic `name` (a mapping named `/shmlink-<name>`, mode 0600) and becomes
    /// its publisher. Names follow the one rule of channels; a topic, channel or listener of
    /// that name whose creator is gone is replaced, one whose creator is alive is
    /// [`OpenError::AlreadyExists`].
    pub fn create(name: &str, config: &TopicConfig) -> Result<Publisher, OpenError> {
        mapping::validate_name(name)?;
        let (index_len, size) = Parts::plan(name, config)?;
        let map = match Mapping::create_named(name, size) {
            Err(OpenError::AlreadyExists { .. })
                if crate::shm::segments::reclaim_if_dead(name)? =>
            {
                Mapping::create_named(name, size)?
            }
            other => other?,
        };
        let parts = Parts::write(&map, config, index_len);
        let hdr = parts.segment();
        let me = &hdr.creator;
        me.record(ProcessId::current(), mode_of(config.wait));
        let max = max_payload(config.capacity);
        // Relaxed: published by the Release store of `ready` below.
        me.max_message.store(max as u64, Ordering::Relaxed);
        me.state.store(PEER_PRESENT, Ordering::Relaxed);
        let ptrs = RingPtrs {
            header: parts.ring(),
            head: NonNull::from(&*parts.words().floor),
            // Unused: the gate wakes each subscriber on its own cell.
            data_cell: NonNull::from(&*parts.ring_header().data_wait),
            region: parts.region(),
            capacity: config.capacity,
            peer_mode: NonNull::from(&me.wait_mode),
            counters: parts.counters(),
        };
        let name: ChannelName = name.into();
        // SAFETY: the ring lives in `map`, which the publisher owns and drops after `tx`; the
        // publisher is its only producer (it made the mapping).
        let mut tx = unsafe { Producer::new(ptrs, None, name.clone()) }?;
        tx.set_gate(Box::new(TopicGate {
            parts,
            last: 0,
            seq: 0,
            kept: VecDeque::new(),
            indexed: config.mode == TopicMode::Overwrite || config.history > 0,
            joins: 0,
            readers: Vec::new(),
        }));
        // Release: pairs with the Acquire load of `ready` in `Parts::read`.
        hdr.ready.store(READY, Ordering::Release);
        Ok(Publisher {
            tx,
            wait: Waiter::new(config.wait),
            table: Table {
                parts,
                fd: map.file().as_raw_fd(),
                name,
                last_sweep: None,
            },
            max,
            scratch: Vec::new(),
            _map: map,
        })
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.table.name
    }

    /// Bytes in the ring.
    pub fn capacity(&self) -> usize {
        self.tx.capacity()
    }

    /// Largest message (`capacity / 2 - 72`): a topic does not fragment.
    pub fn max_message(&self) -> usize {
        self.max
    }

    /// What a slow subscriber costs on this topic.
    pub fn mode(&self) -> TopicMode {
        self.table.parts.topic_mode()
    }

    /// Messages published so far.
    pub fn published(&self) -> u64 {
        // Relaxed: our own counter.
        self.table.parts.words().published.load(Ordering::Relaxed)
    }

    /// The subscribers now in the table (joining, reading, or dropped and not yet gone).
    pub fn subscribers(&self) -> Vec<SubscriberInfo> {
        let parts = &self.table.parts;
        let tail = self.tx.position();
        (0..parts.slots)
            .filter_map(|i| {
                let slot = parts.slot(i);
                // Relaxed: information only.
                let state = match state_name(slot.state.load(Ordering::Relaxed)) {
                    "free" | "unknown" => return None,
                    known => known,
                };
                let cursor = slot.cursor.load(Ordering::Relaxed);
                Some(SubscriberInfo {
                    slot: i,
                    state,
                    pid: slot.peer.pid.load(Ordering::Relaxed),
                    alive: lock::alive(self.table.fd, slot_lock(parts.slots_offset, i))
                        .unwrap_or(true),
                    behind: tail.saturating_sub(cursor),
                })
            })
            .collect()
    }

    /// Number of subscribers reading now (joined, not dropped).
    pub fn subscriber_count(&self) -> usize {
        let parts = &self.table.parts;
        (0..parts.slots)
            // Relaxed: information only.
            .filter(|&i| state_of(parts.slot(i).state.load(Ordering::Relaxed)) == SLOT_ACTIVE)
            .count()
    }

    /// Drops the subscriber in `slot` ([`SubscriberInfo::slot`]): the publisher no longer
    /// waits for it, and its next receive fails with
    /// [`RecvError::Dropped`](crate::RecvError::Dropped). For a subscriber that holds a
    /// lossless topic back and never reads. False if no subscriber holds the slot.
    pub fn drop_subscriber(&mut self, slot: usize) -> bool {
        let parts = &self.table.parts;
        if slot >= parts.slots {
            return false;
        }
        let state = &parts.slot(slot).state;
        // Relaxed: re-checked by the exchange.
        let word = state.load(Ordering::Relaxed);
        if !matches!(state_of(word), SLOT_JOINING | SLOT_ACTIVE) {
            return false;
        }
        // SeqCst: in the order of the reclaim rule's loads (a joiner that still settles its
        // cursor is dropped too, and its join fails).
        let dropped = state
            .compare_exchange(
                word,
                with_state(word, SLOT_DROPPED),
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .is_ok();
        if dropped {
            // A subscriber asleep waiting for a message hears of it now.
            wait::handshake::wake(&parts.slot(slot).data_wait);
        }
        dropped
    }

    /// What the publisher counts (an async wait adds its sleeps here).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn tally(&self) -> &crate::shm::ring::tally::Tally {
        self.tx.tally()
    }

    /// The cell the publisher sleeps on while the ring is full (for the async surface).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn space_cell(&self) -> &crate::shm::layout::WaitCell {
        // SAFETY: the ring header is in `map`, alive as long as `self`; atomics.
        &unsafe { self.table.parts.ring().as_ref() }.space_wait
    }

    /// True when a message of `len` bytes fits now (a corrupt floor counts as room, so the
    /// send that follows reports it).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn has_room(&mut self, len: usize) -> bool {
        self.tx.has_room(len.min(self.max)).unwrap_or(true)
    }

    /// Frees the slots of subscribers that died without closing (at most once per check
    /// interval).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn sweep_dead(&mut self) {
        self.table.sweep_throttled();
    }

    /// The name errors carry.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn channel_name(&self) -> &ChannelName {
        &self.table.name
    }

    /// Fails unless a message of `len` bytes can go.
    #[inline]
    fn check_len(&self, len: usize) -> Result<(), SendError> {
        if len > self.max {
            return Err(SendError::TooLarge {
                channel: self.table.name.clone(),
                len,
                max: self.max,
            });
        }
        Ok(())
    }

    /// Where a frame of `len` bytes (at most `max`) goes, waiting for room until `deadline`.
    fn room(&mut self, len: usize, deadline: Deadline) -> Result<u64, SendError> {
        loop {
            if let Some(start) = self.tx.room_for(len)? {
                return Ok(start);
            }
            self.tx.tally().full();
            let until = match deadline {
                Deadline::Now => {
                    // A subscriber that died without closing no longer holds us back.
                    self.table.sweep_throttled();
                    if let Some(start) = self.tx.room_for(len)? {
                        return Ok(start);
                    }
                    return Err(SendError::Full {
                        channel: self.table.name.clone(),
                    });
                }
                Deadline::At(at) => Some(at),
                Deadline::Never => None,
            };
            // SAFETY: the ring header is in `map`, alive as long as `self`; the cell is
            // atomics.
            let cell = &unsafe { self.table.parts.ring().as_ref() }.space_wait;
            let tx = &mut self.tx;
            // A corrupt floor is met again by `room_for` above, which reports it.
            let waited = self.wait.wait_until(
                cell,
                until,
                || tx.has_room(len).unwrap_or(true),
                &mut self.table,
            );
            self.tx.tally().slept(self.wait.take_sleeps());
            waited?;
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        let parts = &self.table.parts;
        // SAFETY: the ring header is in `map`, still mapped.
        let ring = unsafe { parts.ring().as_ref() };
        // Record the close, then wake every subscriber asleep for a message (the orderings
        // are in `handshake::close`).
        wait::handshake::close(
            &parts.segment().creator.state,
            PEER_CLOSED,
            [&ring.data_wait, &ring.space_wait],
        );
        // Each subscriber sleeps on a cell of its own.
        for i in 0..parts.slots {
            let slot = parts.slot(i);
            // Relaxed: after the close's Release store, which a woken subscriber reads.
            if state_of(slot.state.load(Ordering::Relaxed)) != SLOT_FREE {
                wait::handshake::wake(&slot.data_wait);
            }
        }
    }
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("name", &self.name())
            .field("capacity", &self.capacity())
            .field("mode", &self.mode())
            .finish()
    }
}

impl crate::seam::SendCore for Publisher {
    type Grant<'a> = WriteGrant<'a>;

    #[inline]
    fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        if bytes.len() <= self.max && self.tx.room_here(bytes.len()) {
            self.tx.write_here(bytes);
            return Ok(());
        }
        self.check_len(bytes.len())?;
        let start = self.room(bytes.len(), deadline)?;
        self.tx.write_at(start, bytes, kind::DATA);
        Ok(())
    }

    fn send_json_until<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let sent = crate::json::encode(&mut buf, value)
            .map_err(|source| SendError::Json {
                channel: self.table.name.clone(),
                source,
            })
            .and_then(|()| self.send_until(&buf, deadline));
        self.scratch = buf;
        sent
    }

    fn reserve_until(
        &mut self,
        len: usize,
        deadline: Deadline,
    ) -> Result<WriteGrant<'_>, SendError> {
        self.check_len(len)?;
        let start = self.room(len, deadline)?;
        Ok(self.tx.grant_at(start, len, kind::DATA))
    }

    fn send_batch_until<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        // One frame at a time (each publish is a message the subscribers' index may name).
        let mut sent = 0;
        for msg in batch {
            match self.send_until(msg.as_ref(), deadline) {
                Ok(()) => sent += 1,
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    }
}
