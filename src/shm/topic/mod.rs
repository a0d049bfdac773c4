//! Topics: one publisher, many subscribers, over one ring in a named mapping.
//!
//! The publisher writes each message once, as a channel's producer writes it
//! (`shm::ring::Producer`, with a [`Gate`](crate::shm::ring::Gate) standing for the consumer's
//! index); each subscriber reads it in place with a consumer of its own (`shm::ring::Consumer`
//! over its slot's cursor, inside a channel's receiving half), at its own position. The
//! layout is in `shm::layout::topic`, the protocol on the shared words in [`protocol`]: what
//! a slow subscriber costs (lossless: the publisher's floor never passes a live cursor;
//! overwrite: the publisher claims space ahead and a subscriber checks its copy against the
//! claim) and how a subscriber joins.

mod protocol;
mod publisher;
mod subscriber;

#[cfg(all(loom, test))]
pub(crate) use protocol::{
    fresh, index_read, index_write, join, lossless_floor, overwrite_claim, Cursors,
};
pub use publisher::{Publisher, SubscriberInfo};
pub use subscriber::Subscriber;

use std::ptr::NonNull;

use crate::error::{ChannelName, OpenError};
use crate::shm::layout::counters::Counters;
use crate::shm::layout::topic::{
    topic_offsets, IndexEntry, SubscriberSlot, TopicInfo, TopicWords, INDEX_OFFSET, INFO_OFFSET,
    MAX_INDEX, MAX_SUBSCRIBERS, MIN_INDEX, MODE_LOSSLESS, MODE_OVERWRITE, RING_OFFSET,
    TOPIC_COUNTERS_OFFSET, TOPIC_MAGIC, TOPIC_VERSION, WORDS_OFFSET,
};
use crate::shm::layout::{valid_capacity, RingHeader, SegmentHeader, READY};
use crate::shm::mapping::Mapping;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::wait::WaitStrategy;

/// Default for [`TopicConfig::max_subscribers`].
pub const DEFAULT_MAX_SUBSCRIBERS: usize = 64;

/// What a slow subscriber costs, chosen when the topic is created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TopicMode {
    /// The publisher reuses space only behind the slowest live subscriber: a full ring makes
    /// `send` wait (and `try_send` fail with [`SendError::Full`](crate::SendError::Full)), as
    /// on a channel. A subscriber that dies stops holding the publisher back.
    #[default]
    Lossless,
    /// The publisher never waits: a subscriber that falls more than a ring behind is told how
    /// many messages it missed ([`RecvError::Lagged`](crate::RecvError::Lagged), once), then
    /// reads on from the oldest message still there. Every message is copied out of the ring
    /// before it is handed over (and checked against what the publisher overwrote meanwhile).
    Overwrite,
}

/// How a topic is made.
#[derive(Clone, Debug)]
pub struct TopicConfig {
    /// Bytes in the ring: a power of two from 256 B to 2 GiB. A message can be up to
    /// `capacity / 2 - 72` bytes (topics do not fragment).
    pub capacity: usize,
    /// How the publisher waits for room (lossless topics).
    pub wait: WaitStrategy,
    /// What a slow subscriber costs.
    pub mode: TopicMode,
    /// Messages the publisher keeps for subscribers that join late and ask for them (as far as
    /// the ring holds them; at most 65536). In a lossless topic the retained messages take
    /// ring space the publisher would otherwise reuse.
    pub history: usize,
    /// Most subscribers at once (1 to 1024).
    pub max_subscribers: usize,
}

impl Default for TopicConfig {
    /// 1 MiB, [`WaitStrategy::Block`], lossless, no history, 64 subscribers.
    fn default() -> Self {
        TopicConfig {
            capacity: 1 << 20,
            wait: WaitStrategy::Block,
            mode: TopicMode::Lossless,
            history: 0,
            max_subscribers: DEFAULT_MAX_SUBSCRIBERS,
        }
    }
}

impl TopicConfig {
    /// Checks what every backend limits: the number of subscribers and the history.
    pub(crate) fn check_limits(&self, name: &str) -> Result<(), OpenError> {
        let config = self;
        let bad = |what: String| OpenError::InvalidConfig {
            channel: name.into(),
            what,
        };
        if !(1..=MAX_SUBSCRIBERS).contains(&config.max_subscribers) {
            return Err(bad(format!(
                "max_subscribers {} must be between 1 and {MAX_SUBSCRIBERS} \
                 (TopicConfig::max_subscribers)",
                config.max_subscribers
            )));
        }
        if config.history > MAX_INDEX {
            return Err(bad(format!(
                "history {} must be at most {MAX_INDEX} (TopicConfig::history)",
                config.history
            )));
        }
        Ok(())
    }

    /// The largest message a topic made with this configuration carries: `capacity / 2 - 72`
    /// (a topic does not fragment; [`Publisher::max_message`] says the same of a made one). 0
    /// for a capacity too small to make a topic.
    pub fn max_message(&self) -> usize {
        use crate::shm::ring::{FRAME_HEADER, LINE};
        (self.capacity / 2).saturating_sub(LINE + FRAME_HEADER)
    }
}

/// How a subscriber joins.
#[derive(Clone, Debug, Default)]
pub struct SubscriberConfig {
    /// How it waits for messages.
    pub wait: WaitStrategy,
    /// How many of the messages published before it joined it asks for (at most what the
    /// publisher keeps, [`TopicConfig::history`]).
    pub history: usize,
}

/// Where the parts of a topic's mapping lie, for a topic whose fixed fields were checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parts {
    base: NonNull<u8>,
    pub(crate) capacity: usize,
    pub(crate) mode: u32,
    pub(crate) history: usize,
    pub(crate) slots: usize,
    pub(crate) index_len: usize,
    pub(crate) slots_offset: usize,
    pub(crate) region_offset: usize,
}

// SAFETY: `Parts` is only pointers into a mapping that whoever holds it keeps alive; every
// pointee is an atomic.
unsafe impl Send for Parts {}

/// The index length a topic of `capacity` bytes keeping `history` messages gets.
#[cfg(feature = "test-hooks")]
pub(crate) fn index_len(capacity: usize, history: usize) -> usize {
    Parts::index_len(capacity, history)
}

impl Parts {
    /// The index length a topic of `capacity` bytes keeping `history` messages gets: enough
    /// for the history, and about one entry per KiB of ring (where a lapped overwrite
    /// subscriber is put back), a power of two within [MIN_INDEX, MAX_INDEX].
    pub(crate) fn index_len(capacity: usize, history: usize) -> usize {
        history
            .max(capacity / 1024)
            .next_power_of_two()
            .clamp(MIN_INDEX, MAX_INDEX)
    }

    /// The bytes a topic with these parameters maps.
    pub(crate) fn size(capacity: usize, index_len: usize, slots: usize) -> usize {
        topic_offsets(index_len, slots).1 + capacity
    }

    /// Checks a creator's configuration: the index length and the mapping size.
    pub(crate) fn plan(name: &str, config: &TopicConfig) -> Result<(usize, usize), OpenError> {
        crate::shm::layout::check_capacity(name, config.capacity)?;
        config.check_limits(name)?;
        let index_len = Self::index_len(config.capacity, config.history);
        Ok((
            index_len,
            Self::size(config.capacity, index_len, config.max_subscribers),
        ))
    }

    /// Writes the fixed fields of a new topic (all but `ready`, which the publisher stores
    /// last). Relaxed stores: published by that Release store.
    pub(crate) fn write(map: &Mapping, config: &TopicConfig, index_len: usize) -> Parts {
        let (slots_offset, region_offset) = topic_offsets(index_len, config.max_subscribers);
        let hdr = segment(map);
        hdr.write_fixed(
            TOPIC_MAGIC,
            TOPIC_VERSION,
            config.capacity,
            region_offset + config.capacity,
        );
        hdr.write_layout();
        // Relaxed: as above. (`header_size` is where the region starts.)
        hdr.header_size
            .store(region_offset as u32, Ordering::Relaxed);
        let parts = Parts {
            base: map.ptr(),
            capacity: config.capacity,
            mode: match config.mode {
                TopicMode::Lossless => MODE_LOSSLESS,
                TopicMode::Overwrite => MODE_OVERWRITE,
            },
            history: config.history,
            slots: config.max_subscribers,
            index_len,
            slots_offset,
            region_offset,
        };
        let info = parts.info();
        info.mode.store(parts.mode, Ordering::Relaxed);
        info.history.store(config.history as u32, Ordering::Relaxed);
        info.slots.store(parts.slots as u32, Ordering::Relaxed);
        info.index_len.store(index_len as u32, Ordering::Relaxed);
        info.slots_offset
            .store(slots_offset as u64, Ordering::Relaxed);
        info.region_offset
            .store(region_offset as u64, Ordering::Relaxed);
        parts
    }

    /// Reads and checks the fixed fields of the topic in `map` (whose first word read
    /// `magic`, read once by the caller): each is read once, and every offset is computed here
    /// from the counts, never taken from the mapping.
    pub(crate) fn read(map: &Mapping, name: &ChannelName, magic: u64) -> Result<Parts, OpenError> {
        if map.len() < INDEX_OFFSET {
            return Err(OpenError::NotReady {
                channel: name.clone(),
            });
        }
        let hdr = segment(map);
        // Acquire: pairs with the publisher's Release store of `ready`.
        if hdr.ready.load(Ordering::Acquire) != READY || magic == 0 {
            return Err(OpenError::NotReady {
                channel: name.clone(),
            });
        }
        if magic != TOPIC_MAGIC {
            return Err(OpenError::NotAChannel {
                channel: name.clone(),
                reason: "a channel or listener, not a topic (connect to it with \
                         Channel::connect or Endpoint::connect)"
                    .into(),
            });
        }
        // Relaxed: published before `ready`, read above with Acquire.
        let version = hdr.version.load(Ordering::Relaxed);
        if version != TOPIC_VERSION {
            return Err(OpenError::VersionMismatch {
                channel: name.clone(),
                found: version,
                expected: TOPIC_VERSION,
            });
        }
        hdr.check_layout(name)?;
        let corrupt = |what: String| OpenError::corrupt(name, what);
        let capacity = usize::try_from(hdr.capacity.load(Ordering::Relaxed))
            .ok()
            .filter(|c| valid_capacity(*c))
            .ok_or_else(|| corrupt("ring capacity out of range".into()))?;
        // SAFETY: the mapping is at least INDEX_OFFSET bytes (checked above) and page-aligned;
        // `TopicInfo` is all atomics at an aligned offset inside it.
        let info = unsafe { &*map.ptr().as_ptr().add(INFO_OFFSET).cast::<TopicInfo>() };
        let mode = info.mode.load(Ordering::Relaxed);
        let history = info.history.load(Ordering::Relaxed) as usize;
        let slots = info.slots.load(Ordering::Relaxed) as usize;
        let index_len = info.index_len.load(Ordering::Relaxed) as usize;
        if mode != MODE_LOSSLESS && mode != MODE_OVERWRITE {
            return Err(corrupt(format!("topic mode {mode} is unknown")));
        }
        if !(1..=MAX_SUBSCRIBERS).contains(&slots)
            || !index_len.is_power_of_two()
            || !(MIN_INDEX..=MAX_INDEX).contains(&index_len)
            || history > MAX_INDEX
        {
            return Err(corrupt(format!(
                "topic of {slots} slots, an index of {index_len} and a history of {history}"
            )));
        }
        let (slots_offset, region_offset) = topic_offsets(index_len, slots);
        let total = region_offset + capacity;
        if hdr.total_size.load(Ordering::Relaxed) != total as u64 || total > map.len() {
            return Err(OpenError::size_mismatch(
                name,
                format!(
                    "a topic of {capacity} bytes and {slots} slots needs {total} bytes, the \
                     mapping has {}",
                    map.len()
                ),
            ));
        }
        Ok(Parts {
            base: map.ptr(),
            capacity,
            mode,
            history,
            slots,
            index_len,
            slots_offset,
            region_offset,
        })
    }

    /// The pointer to `offset` in the mapping, as a `T`.
    ///
    /// # Safety
    /// `offset` must be one of the checked offsets of the layout for a `T`.
    unsafe fn at<T>(&self, offset: usize) -> NonNull<T> {
        // SAFETY: per the contract, inside the mapping.
        unsafe { NonNull::new_unchecked(self.base.as_ptr().add(offset).cast::<T>()) }
    }

    pub(crate) fn segment(&self) -> &SegmentHeader {
        // SAFETY: at offset 0 of a page-aligned mapping at least INDEX_OFFSET bytes long; all
        // atomics.
        unsafe { self.at::<SegmentHeader>(0).as_ref() }
    }

    pub(crate) fn info(&self) -> &TopicInfo {
        // SAFETY: as in `segment`.
        unsafe { self.at::<TopicInfo>(INFO_OFFSET).as_ref() }
    }

    pub(crate) fn ring(&self) -> NonNull<RingHeader> {
        // SAFETY: as in `segment`; `RING_OFFSET` is 128-aligned.
        unsafe { self.at::<RingHeader>(RING_OFFSET) }
    }

    /// What a slow subscriber costs on this topic.
    pub(crate) fn topic_mode(&self) -> TopicMode {
        if self.mode == MODE_LOSSLESS {
            TopicMode::Lossless
        } else {
            TopicMode::Overwrite
        }
    }

    pub(crate) fn ring_header(&self) -> &RingHeader {
        // SAFETY: as in `ring`; all atomics.
        unsafe { self.ring().as_ref() }
    }

    pub(crate) fn words(&self) -> &TopicWords {
        // SAFETY: as in `segment`; `WORDS_OFFSET` is 128-aligned.
        unsafe { self.at::<TopicWords>(WORDS_OFFSET).as_ref() }
    }

    /// The publisher's counters.
    pub(crate) fn counters(&self) -> NonNull<Counters> {
        // SAFETY: as in `segment`; `TOPIC_COUNTERS_OFFSET` is 128-aligned and below the index.
        unsafe { self.at::<Counters>(TOPIC_COUNTERS_OFFSET) }
    }

    pub(crate) fn entry(&self, seq: u64) -> &IndexEntry {
        let i = (seq as usize) & (self.index_len - 1);
        // SAFETY: `i` is below `index_len`, whose entries (32 bytes each, 8-aligned) lie between
        // INDEX_OFFSET and `slots_offset`, inside the mapping (`read` and `plan` checked the
        // total size).
        unsafe {
            self.at::<IndexEntry>(INDEX_OFFSET + i * size_of::<IndexEntry>())
                .as_ref()
        }
    }

    pub(crate) fn slot(&self, i: usize) -> &SubscriberSlot {
        debug_assert!(i < self.slots);
        // SAFETY: `i` is below `slots`; slots are 128 bytes each from the 128-aligned
        // `slots_offset`, inside the mapping.
        unsafe {
            self.at::<SubscriberSlot>(self.slots_offset + i * size_of::<SubscriberSlot>())
                .as_ref()
        }
    }

    pub(crate) fn region(&self) -> NonNull<u8> {
        // SAFETY: the region is `capacity` bytes at the page-aligned `region_offset`.
        unsafe { self.at::<u8>(self.region_offset) }
    }

    /// The oldest message the index still records whose frame starts at or after `from`
    /// among the last `count` published: (seq, start). None when the index holds none that
    /// was whole when read.
    pub(crate) fn oldest_since(&self, from: u64, count: usize) -> Option<(u64, u64)> {
        // Acquire: pairs with the publisher's Release store of `published`: the entries below
        // it were written before.
        let published = self.words().published.load(Ordering::Acquire);
        let first = published.saturating_sub(count.min(self.index_len) as u64);
        (first..published).find_map(|seq| match protocol::index_read(self.entry(seq)) {
            Some((s, start, _)) if s == seq && start >= from => Some((seq, start)),
            _ => None,
        })
    }
}

impl protocol::Cursors for Parts {
    fn slots(&self) -> usize {
        self.slots
    }
    fn state(&self, i: usize) -> &AtomicU32 {
        &self.slot(i).state
    }
    fn cursor(&self, i: usize) -> &AtomicU64 {
        &self.slot(i).cursor
    }
}

fn segment(map: &Mapping) -> &SegmentHeader {
    // SAFETY: the mappings here are at least INDEX_OFFSET bytes (sized by the publisher, or
    // checked by `Parts::read` before this is called), page-aligned; all atomics.
    unsafe { map.ptr().cast::<SegmentHeader>().as_ref() }
}

use std::mem::size_of;
