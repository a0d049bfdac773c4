//! The writing end: room for frames, grants written in place, publishing.

use crate::sync::Ordering;

use crate::error::{ChannelName, OpenError, SendError};
use crate::shm::layout::{WaitCell, MODE_SPIN};
use crate::wait;

use super::*;

/// `ProducerState::zeroed` when no word is known to have been zeroed ahead.
const NOT_ZEROED: u64 = u64::MAX;

/// The frame size (or a quarter of the ring, if less) from which [`Producer::write_batch`]
/// publishes a frame on its own, as `send` does: the copy of such a frame costs far more than
/// its publish, and a consumer copying out the frames already published while the producer
/// writes the next wins more than one publish for the lot would. Smaller frames of a batch
/// are published together.
pub(crate) const BATCH_SLICE: u64 = 8 * 1024;

/// The writing end of a ring.
pub struct Producer {
    /// In an allocation of its own (see [`ProducerState`]).
    pub(super) state: Box<ProducerState>,
}

/// What a producer keeps: aligned to 128 bytes (two cache lines, the unit the prefetcher pulls)
/// and boxed, so the indices it writes on every message live on lines of their own wherever the
/// `Producer` itself is kept: beside its consumer on one stack or in one struct, or in memory a
/// foreign allocator hands out (a Python object), which honours no alignment beyond 16 bytes.
#[repr(align(128))]
pub(crate) struct ProducerState {
    pub(super) ptrs: RingPtrs,
    pub(super) mask: u64,
    /// Our index: bytes published so far. Never reread from shared memory.
    pub(super) tail: u64,
    /// Last value of the consumer's index we read.
    pub(super) cached_head: u64,
    /// Index from which the next rewind to the start of the region may be tried.
    pub(super) next_rewind: u64,
    /// The index whose header word `zero_ahead` last zeroed, while nothing has been written
    /// over it since (`NOT_ZEROED`: none): a publish that ends there finds its zero in place.
    pub(super) zeroed: u64,
    pub(super) max_len: usize,
    pub(super) _owned: Option<std::sync::Arc<Owned>>,
    /// The channel's name, for errors (`"ring"` for a ring between threads).
    pub(super) channel: ChannelName,
    /// A ring with many readers (a topic's): what stands for the consumer's index, told of
    /// each frame published. None for a ring of two ends.
    pub(super) gate: Option<Box<dyn Gate>>,
    /// What this end counts, and where it copies the counts.
    pub(super) tally: Tally,
}

// SAFETY: the producer only holds pointers into memory that outlives it (kept alive by `_owned`
// or, in a channel, by the `Arc` of the mapping that the half holding this end owns); all
// cross-thread access goes through atomics.
unsafe impl Send for ProducerState {}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.state.ptrs.capacity)
            .field("tail", &self.state.tail)
            .field("cached_head", &self.state.cached_head)
            .finish()
    }
}

impl Producer {
    /// # Safety
    /// `ptrs` must describe a live, initialised ring that outlives the producer, and at most one
    /// producer may exist for it at a time.
    pub(crate) unsafe fn new(
        ptrs: RingPtrs,
        owned: Option<std::sync::Arc<Owned>>,
        channel: ChannelName,
    ) -> Result<Self, OpenError> {
        let capacity = ptrs.capacity;
        // Acquire: pairs with the Release stores of our predecessor (a fresh ring is all zero).
        let tail = ptrs.header().tail.load(Ordering::Acquire);
        let head = ptrs.head().load(RECLAIM);
        if tail % FRAME_ALIGN as u64 != 0
            || head % FRAME_ALIGN as u64 != 0
            || head > tail
            || tail - head > capacity as u64
        {
            return Err(OpenError::corrupt(
                &channel,
                format!("ring indices out of range: head {head}, tail {tail}"),
            ));
        }
        Ok(Producer {
            state: Box::new(ProducerState {
                ptrs,
                mask: capacity as u64 - 1,
                tail,
                cached_head: head,
                next_rewind: if capacity >= 4 * REWIND_AT as usize {
                    (tail & !(capacity as u64 - 1)) + REWIND_AT
                } else {
                    u64::MAX
                },
                zeroed: NOT_ZEROED,
                max_len: max_payload(capacity),
                _owned: owned,
                channel,
                gate: None,
                // SAFETY: the counters live with the ring, which outlives us (our contract).
                tally: unsafe { Tally::new(ptrs.counters) },
            }),
        })
    }

    /// Makes this the producer of a ring with many readers: `gate` stands for the consumer's
    /// index from now on, and every publish wakes whoever sleeps for data.
    pub(crate) fn set_gate(&mut self, gate: Box<dyn Gate>) {
        self.state.gate = Some(gate);
        // Readers behind may still need the start of the region: no early rewinds.
        self.state.next_rewind = u64::MAX;
    }

    /// Our index: bytes published so far.
    #[inline]
    pub(crate) fn position(&self) -> u64 {
        self.state.tail
    }

    /// Bytes in the ring region.
    pub fn capacity(&self) -> usize {
        self.state.ptrs.capacity
    }

    /// Largest payload a single frame can carry.
    pub fn max_len(&self) -> usize {
        self.state.max_len
    }

    /// Rereads the consumer's index (or asks the gate of a ring with many readers, for room
    /// up to `end`). Fails if it moved backwards or past us.
    #[inline(never)]
    pub(super) fn refresh_head(&mut self, end: u64) -> Result<(), SendError> {
        let head = match self.state.gate.as_mut() {
            Some(gate) => gate.reclaim(self.state.tail, end)?,
            None => self.state.ptrs.head().load(RECLAIM),
        };
        if head < self.state.cached_head || head > self.state.tail || head % FRAME_ALIGN as u64 != 0
        {
            return Err(SendError::Corrupt {
                channel: self.state.channel.clone(),
                what: format!(
                    "consumer index {head} outside [{}, {}]",
                    self.state.cached_head, self.state.tail
                ),
            });
        }
        self.state.cached_head = head;
        self.state.tally.fill(self.state.tail - head);
        Ok(())
    }

    /// Where a frame of `len` bytes goes when it follows a frame that ends at index `end`:
    /// right there; at the next cache line (after a SKIP) if it would straddle two lines although
    /// it fits in one; or at the start of the next lap (after a PAD) if it does not fit before
    /// the end of the region.
    #[inline]
    fn place_after(&self, end: u64, len: usize) -> u64 {
        let fs = frame_size(len) as u64;
        let cap = self.state.mask + 1;
        let mut pos = end & self.state.mask;
        let mut start = end;
        if skips_to_line(pos, fs) {
            let line = next_line(pos);
            start += line - pos;
            pos = line;
        }
        if pos + fs <= cap {
            start
        } else {
            start + (cap - pos)
        }
    }

    /// Where a frame of `len` bytes would start (after a SKIP or a PAD, as `place_after`
    /// places it, or rewound), if there is room for it and the next header word right now. Rereads the
    /// consumer's index only when the cached one says there is no room.
    /// `Ok(None)`: no room now; `Err`: the consumer's index is corrupt.
    #[inline]
    pub(crate) fn room_for(&mut self, len: usize) -> Result<Option<u64>, SendError> {
        let fs = frame_size(len) as u64;
        let mut start = self.place_after(self.state.tail, len);
        if self.state.tail >= self.state.next_rewind && start == self.state.tail {
            start = self.maybe_rewind(self.state.tail & self.state.mask, fs)?;
        }
        if !self.fits(start + fs) {
            self.refresh_head(start + fs)?;
            if !self.fits(start + fs) {
                return Ok(None);
            }
        }
        Ok(Some(start))
    }

    /// True when a frame of `len` bytes (at most `max_len`) can go right at our position, as
    /// decided from this end's own state alone: it needs no SKIP or PAD in front of it, no
    /// rewind is due, and it fits by the consumer's index as last read (the common case of a
    /// send). False when [`room_for`](Producer::room_for) must decide (it places the frame
    /// after a marker, rewinds, or rereads the consumer's index and judges it). No shared
    /// memory is read here, so there is nothing to check.
    #[inline(always)]
    pub(crate) fn room_here(&self, len: usize) -> bool {
        let fs = frame_size(len) as u64;
        let tail = self.state.tail;
        let pos = tail & self.state.mask;
        !skips_to_line(pos, fs)
            && pos + fs <= self.state.mask + 1
            && tail < self.state.next_rewind
            && self.fits(tail + fs)
    }

    /// Writes `bytes` as a `DATA` frame at our position, which
    /// [`room_here`](Producer::room_here) found room for, and publishes it: the whole send of
    /// a frame, inline.
    #[inline(always)]
    pub(crate) fn write_here(&mut self, bytes: &[u8]) {
        let at = self.state.tail;
        let len = bytes.len();
        copy_in(&mut self.grant_at(at, len, kind::DATA), bytes);
        let fs = frame_size(len) as u64;
        // Counted before the publish: whoever has the message sees the count.
        self.state.tally.frame(kind::DATA, len);
        self.release_word(at, at, encode(at, kind::DATA, len as u32), at + fs, fs);
    }

    /// True when frames may end at index `end`: the space up to it and the header word after
    /// it are free by the consumer's index as we last read it.
    #[inline]
    fn fits(&self, end: u64) -> bool {
        end + FRAME_HEADER as u64 - self.state.cached_head <= self.state.mask + 1
    }

    /// True when frames of the payload lengths `lens`, each placed right after the one before
    /// it from our position (never rewound early: see [`next_start`](Producer::next_start)),
    /// all fit in the ring now, with the header word after the last. Rereads the consumer's
    /// index only when the cached one says they do not.
    pub(crate) fn room_for_all(
        &mut self,
        lens: impl Iterator<Item = usize>,
    ) -> Result<bool, SendError> {
        let end = lens.fold(self.state.tail, |end, len| {
            self.place_after(end, len) + frame_size(len) as u64
        });
        if !self.fits(end) {
            self.refresh_head(end)?;
        }
        Ok(self.fits(end))
    }

    /// Where the next frame of `len` bytes starts in a sequence that
    /// [`room_for_all`](Producer::room_for_all) found room for: right after the frame before
    /// it.
    #[inline]
    pub(crate) fn next_start(&self, len: usize) -> u64 {
        self.place_after(self.state.tail, len)
    }

    /// Once per lap, past [`REWIND_AT`] bytes into it: if the consumer has read everything, start
    /// the next frame at the beginning of the region (after a PAD) instead of further on. A
    /// ring much larger than the caches then still works in the same few hundred kilobytes
    /// while it is lightly used, and those lines stay warm in both cores' caches.
    #[cold]
    pub(super) fn maybe_rewind(&mut self, pos: u64, fs: u64) -> Result<u64, SendError> {
        let cap = self.state.mask + 1;
        if pos < fs + FRAME_HEADER as u64 {
            // The frame would not fit before our position; look again at a later one.
            return Ok(self.state.tail);
        }
        let lap_end = self.state.tail + (cap - pos);
        self.state.next_rewind = lap_end + REWIND_AT;
        self.refresh_head(self.state.tail)?;
        Ok(if self.state.cached_head == self.state.tail {
            lap_end
        } else {
            self.state.tail
        })
    }

    /// True when a frame of `len` bytes fits right now.
    #[inline]
    pub(crate) fn has_room(&mut self, len: usize) -> Result<bool, SendError> {
        Ok(self.room_for(len)?.is_some())
    }

    /// Hands out the grant for a frame at `start`, as found by `room_for` with the same `len`
    /// (which must be at most `max_len`). A frame that starts at the next line or a new lap
    /// needs a SKIP or a PAD at our position first; it is published with the frame, on commit
    /// (see `publish`).
    #[inline]
    pub(crate) fn grant_at(&mut self, start: u64, len: usize, kind: u8) -> WriteGrant<'_> {
        let pos = (start & self.state.mask) as usize;
        // `room_for` placed the whole frame, header included, between `pos` and the end of the
        // region, so the payload starts inside it.
        let payload = self.state.ptrs.bytes(pos + FRAME_HEADER);
        if start + (FRAME_HEADER + len) as u64 > self.state.zeroed {
            // The grant's bytes reach the word zeroed ahead: whatever is written there, committed
            // or not, that word is no longer known to hold zero.
            self.state.zeroed = NOT_ZEROED;
        }
        WriteGrant {
            producer: self,
            payload,
            start,
            len,
            kind,
        }
    }

    /// Writes `bytes` as a frame of kind `kind` at `start`, as found by `room_for` with
    /// `bytes.len()` (at most `max_len`), and publishes it.
    #[inline]
    pub(crate) fn write_at(&mut self, start: u64, bytes: &[u8], kind: u8) {
        let mut grant = self.grant_at(start, bytes.len(), kind);
        copy_in(&mut grant, bytes);
        grant.commit(bytes.len());
    }

    /// The frame at `start` does not start at our position: it goes to the next cache line (it
    /// would have straddled two), or to the start of the region (it did not fit before the end
    /// of the region, or the producer rewinds). Zero the word at `start` (our invariant moves
    /// there), then publish a SKIP or a PAD at our position. Only called by `publish`, right
    /// before the frame itself, whose wake-up covers the marker too: a consumer asleep in front
    /// of it is woken, and a grant that is dropped publishes nothing.
    #[inline(never)]
    pub(super) fn skip_to(&mut self, start: u64) {
        self.word_at(start).store(0, Ordering::Relaxed);
        // PUBLISH (Release): pairs with OBSERVE in Consumer::poll_frame; orders the zero above
        // before the marker, so a consumer that follows it finds 0 or a newer frame.
        self.word_at(self.state.tail)
            .store(self.marker_to(start), PUBLISH);
        self.state.tail = start;
    }

    /// The word at our position that sends the consumer on to a frame at `start`: a PAD to the
    /// start of the region, else a SKIP to the next line.
    #[inline]
    fn marker_to(&self, start: u64) -> u64 {
        let marker = if start & self.state.mask == 0 {
            kind::PAD
        } else {
            kind::SKIP
        };
        encode(self.state.tail, marker, 0)
    }

    /// Reserves room for a frame of `len` bytes and hands out the payload to write in place.
    ///
    /// Returns [`SendError::Full`] when there is no room now and [`SendError::TooLarge`] when
    /// `len` can never fit. Commit the grant with [`WriteGrant::commit`]; dropping it writes
    /// nothing.
    ///
    /// ```
    /// let (mut tx, mut rx) = shmlink::ring::new(1024)?;
    /// let mut grant = tx.try_reserve(64)?;
    /// grant[..5].copy_from_slice(b"hello");
    /// grant.commit(5);
    /// assert_eq!(&*rx.try_read()?, b"hello");
    /// # Ok::<(), shmlink::Error>(())
    /// ```
    #[inline]
    pub fn try_reserve(&mut self, len: usize) -> Result<WriteGrant<'_>, SendError> {
        self.try_reserve_kind(len, kind::DATA)
    }

    #[inline]
    pub(crate) fn try_reserve_kind(
        &mut self,
        len: usize,
        kind: u8,
    ) -> Result<WriteGrant<'_>, SendError> {
        if len > self.state.max_len {
            return Err(SendError::TooLarge {
                channel: self.state.channel.clone(),
                len,
                max: self.state.max_len,
            });
        }
        match self.room_for(len)? {
            Some(start) => Ok(self.grant_at(start, len, kind)),
            None => Err(SendError::Full {
                channel: self.state.channel.clone(),
            }),
        }
    }

    /// Copies `data` into one frame: [`SendError::Full`] when there is no room now,
    /// [`SendError::TooLarge`] past [`max_len`](Producer::max_len).
    #[inline]
    pub fn try_send(&mut self, data: &[u8]) -> Result<(), SendError> {
        if data.len() <= self.state.max_len && self.room_here(data.len()) {
            self.write_here(data);
            return Ok(());
        }
        self.try_send_slow(data)
    }

    /// [`try_send`](Producer::try_send) when its own state does not show room: the consumer's
    /// index reread and judged, a rewind, or the error.
    #[inline(never)]
    fn try_send_slow(&mut self, data: &[u8]) -> Result<(), SendError> {
        let mut grant = self.try_reserve(data.len())?;
        grant.copy_from_slice(data);
        grant.commit(data.len());
        Ok(())
    }

    /// Copies the messages of `batch`, in order, each into a frame of its own, for as many of
    /// them as fit now, and publishes them together: one release store and one look at whether
    /// the consumer sleeps for the lot, where sending them one by one takes one each. Returns
    /// how many went out: [`SendError::Full`] when not even the first fits now,
    /// [`SendError::TooLarge`] when the first is longer than [`max_len`](Producer::max_len) (a
    /// later one that is ends the batch before it, as does the first that does not fit).
    ///
    /// ```
    /// let (mut tx, mut rx) = shmlink::ring::new(1024)?;
    /// assert_eq!(tx.try_send_batch(&[&b"one"[..], b"two", b"three"])?, 3);
    /// let mut got = Vec::new();
    /// assert_eq!(rx.try_read_batch(usize::MAX, |msg| got.push(msg.to_vec()))?, 3);
    /// assert_eq!(got, [&b"one"[..], b"two", b"three"]);
    /// # Ok::<(), shmlink::Error>(())
    /// ```
    pub fn try_send_batch<B: AsRef<[u8]>>(&mut self, batch: &[B]) -> Result<usize, SendError> {
        match batch.first().map(|m| m.as_ref().len()) {
            None => Ok(0),
            Some(len) if len > self.state.max_len => Err(SendError::TooLarge {
                channel: self.state.channel.clone(),
                len,
                max: self.state.max_len,
            }),
            Some(_) => match self.write_batch(batch, self.state.max_len)? {
                0 => Err(SendError::Full {
                    channel: self.state.channel.clone(),
                }),
                sent => Ok(sent),
            },
        }
    }

    /// Writes the messages of `batch` as `DATA` frames, in order: the first where `room_for`
    /// places it, each other right after the one before it as `place_after` places it,
    /// stopping before the first that is longer than `max` (at most `max_len`) or does not fit
    /// now. Frames smaller than [`BATCH_SLICE`] (or a quarter of the ring) are published
    /// together, with one release store: the word at the first index of the run (its first
    /// frame's, or the SKIP or PAD in front of it) is stored last. A consumer stops at that
    /// word until then, so every other word, payload and marker of the run is in place before
    /// it can reach them, and the zero that keeps the invariant is needed only after the run's
    /// last frame. A frame of that size or more ends the run before it and is published on its
    /// own, as `send` publishes it, so the consumer copies it out while the next is written.
    /// Returns how many went out (0: not even the first fits now, and nothing was written
    /// where the consumer can look).
    pub(crate) fn write_batch<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        max: usize,
    ) -> Result<usize, SendError> {
        let slice = BATCH_SLICE.min((self.state.mask + 1) / 4);
        let mut first = self.state.tail;
        let mut first_word = 0;
        // How many went out in the publishes made so far; the frames and bytes written since
        // the last (counted just before the publish that sends them, so that whoever has a
        // message sees its count).
        let mut published = 0;
        let mut run = (0u64, 0u64);
        let mut refreshed = false;
        let mut sent = 0;
        let mut last_size = 0;
        // Whether frames since `first` wait for their publish.
        let mut pending = false;
        for msg in batch {
            let bytes = msg.as_ref();
            let len = bytes.len();
            if len > max {
                break;
            }
            let fs = frame_size(len) as u64;
            let alone = fs >= slice;
            if alone && pending {
                // The run of smaller frames before it goes out first, reached through the
                // word at `first`.
                self.state.tally.messages(run.0, run.1);
                run = (0, 0);
                self.release_word(first, first, first_word, self.state.tail, last_size);
                first = self.state.tail;
                published = sent;
                pending = false;
            }
            let start = if sent == 0 {
                // Nothing written yet: placed (and rewound) as a single send is.
                match self.room_for(len)? {
                    Some(start) => start,
                    None => break,
                }
            } else {
                let start = self.place_after(self.state.tail, len);
                if !self.fits(start + fs) {
                    if refreshed {
                        break;
                    }
                    refreshed = true;
                    if let Err(e) = self.refresh_head(start + fs) {
                        // Nothing since `first` was published: the words written past it are
                        // in free space, where any value may lie. The frames published before
                        // it went out; the next call meets the error again.
                        self.state.tail = first;
                        return if published > 0 { Ok(published) } else { Err(e) };
                    }
                    if !self.fits(start + fs) {
                        break;
                    }
                }
                start
            };
            if start != self.state.tail {
                let marker = self.marker_to(start);
                self.put_word(self.state.tail, marker, first, &mut first_word);
            }
            // Written, not committed: the batch's first word publishes it with the rest.
            self.grant_at(start, len, kind::DATA).copy_from_slice(bytes);
            self.put_word(
                start,
                encode(start, kind::DATA, len as u32),
                first,
                &mut first_word,
            );
            self.state.tail = start + fs;
            last_size = fs;
            sent += 1;
            run = (run.0 + 1, run.1 + len as u64);
            pending = true;
            if alone {
                self.state.tally.messages(run.0, run.1);
                run = (0, 0);
                self.release_word(first, first, first_word, self.state.tail, last_size);
                first = self.state.tail;
                published = sent;
                pending = false;
            }
        }
        if pending {
            self.state.tally.messages(run.0, run.1);
            self.release_word(first, first, first_word, self.state.tail, last_size);
        }
        Ok(sent)
    }

    /// Stores the header word `word` of a batch at index `at`, or keeps it for last if `at` is
    /// the batch's first index `first` (see `write_batch`).
    #[inline]
    fn put_word(&self, at: u64, word: u64, first: u64, first_word: &mut u64) {
        if at == first {
            *first_word = word;
        } else {
            // PUBLISH (Release): pairs with OBSERVE in Consumer::poll_frame; not reachable
            // before the batch's first word, which is stored after it.
            self.word_at(at).store(word, PUBLISH);
        }
    }

    /// Publishes the frame at `start` (our position, or the next line or lap after a SKIP or a
    /// PAD) with `used` bytes of payload, and wakes the consumer if it may be asleep.
    #[inline]
    pub(super) fn publish(&mut self, start: u64, used: usize, kind: u8) {
        let from = self.state.tail;
        if start != from {
            self.skip_to(start);
        }
        let fs = frame_size(used) as u64;
        let at = self.state.tail;
        // Counted before the publish: whoever has the message sees the count.
        self.state.tally.frame(kind, used);
        self.release_word(from, at, encode(at, kind, used as u32), at + fs, fs);
    }

    /// The end of every publish: keeps the invariant (zeroes the word at `next`, our position
    /// after it, before anyone can get there), stores `word`, the header word at index `at`
    /// that the consumer is waiting on, moves our position to `next`, and then makes the
    /// informational copy of it, zeroes ahead for a next frame of `fs` bytes (the last one
    /// published) and, last, wakes the consumer (`from`: our position before this publish, see
    /// `notify_consumer`).
    #[inline]
    fn release_word(&mut self, from: u64, at: u64, word: u64, next: u64, fs: u64) {
        if next != self.state.zeroed {
            // Relaxed: published by the store of `word` below. (Where `zero_ahead` zeroed the
            // word at an earlier publish and no grant has reached it since, it still holds that
            // zero, published by this store too: storing it again would first have to win its
            // line back when the consumer's prefetcher took it, on the way to `word`.)
            self.word_at(next).store(0, Ordering::Relaxed);
        }
        // PUBLISH (Release): pairs with OBSERVE in Consumer::poll_frame; what was written before
        // it (payloads, the zero above, a batch's other words) becomes visible with this word.
        self.word_at(at).store(word, PUBLISH);
        self.state.tail = next;
        // Release: informational copy of our index, read by `Producer::new` of a successor.
        self.state.ptrs.header().tail.store(next, Ordering::Release);
        self.zero_ahead(next, fs);
        let woke = match self.state.gate.as_mut() {
            None => self.notify_consumer(from),
            // Many readers, each asleep on a cell of its own: the gate wakes them.
            Some(gate) => gate.published(at, next, from),
        };
        if woke {
            self.state.tally.woke();
        }
        if fs >= wait::LARGE_FRAME {
            // The consumer's copy of it is what this thread's next wait waits for.
            wait::note_large_frame(fs);
        }
    }

    /// Zeroes the header word where the frame after next would need its zero if it has the same
    /// size as this one (a ping-pong, a stream of equal records), and remembers it
    /// (`zeroed`): the next publish, if it ends there, finds the zero in place and stores
    /// nothing on its way to the header word. Any word in free space past our position may
    /// hold zero, so a wrong guess costs nothing but the store; words the consumer has not
    /// released are never touched.
    #[inline]
    pub(super) fn zero_ahead(&mut self, next: u64, fs: u64) {
        let ahead = next + fs;
        let same_lap = (next & self.state.mask) + fs < self.state.mask + 1;
        if same_lap && self.fits(ahead) {
            // Relaxed: published by the PUBLISH store of a later frame (see `release_word`).
            self.word_at(ahead).store(0, Ordering::Relaxed);
            self.state.zeroed = ahead;
        }
    }

    /// The header word at index `index`.
    #[inline]
    fn word_at(&self, index: u64) -> &crate::sync::AtomicU64 {
        self.state.ptrs.word((index & self.state.mask) as usize)
    }

    /// Wakes the consumer if it may be asleep in front of what was just published from index
    /// `from` (our position before the publish) on.
    ///
    /// A consumer asleep behind `from` (its published index below it) sleeps in front of a
    /// frame published earlier, and the publish of that frame woke it: it slept only after its
    /// look (after F1) found that frame's word zero, so that publish's F2 came after F1 and its
    /// look at `sleepers` saw the sleeper. Waking it again per frame, while it is on its way to
    /// a core, would cost a system call per message in a stream that outruns its consumer's
    /// wake-ups. The index it read is the one the consumer stored before that sleep: a consumer
    /// gives all it read back before it waits (see `Consumer::release`), before its F1, which
    /// our F2 follows whenever its look can miss this publish. A consumer that stores another
    /// index (a hostile one) can only delay its own wake-ups.
    /// Whether it made a wake-up call.
    #[inline]
    pub(super) fn notify_consumer(&self, from: u64) -> bool {
        if self.state.ptrs.peer_mode() != MODE_SPIN {
            let header = self.state.ptrs.header();
            wait::wake_if_sleeping_and(&header.data_wait, || {
                // Relaxed: ordered by F2 (see above and `handshake::wake_if_sleeping_and`).
                header.head.load(Ordering::Relaxed) >= from
            })
        } else {
            false
        }
    }

    /// What this end counts (see `crate::shm::layout::counters`).
    pub(crate) fn tally(&self) -> &Tally {
        &self.state.tally
    }

    /// The wait cell the producer sleeps on when the ring is full.
    pub(crate) fn space_cell(&self) -> &WaitCell {
        &self.state.ptrs.header().space_wait
    }

    /// The wait cell the consumer sleeps on (used to wake it on close).
    pub(crate) fn data_cell(&self) -> &WaitCell {
        self.state.ptrs.data_cell()
    }
}

/// Copies `src` into `dst`, of the same length: up to 64 bytes inline, as at most two
/// overlapping loads and stores of one width (the way `memcpy` copies them, without the call),
/// so that the path of a small message calls nothing; longer ones with `copy_from_slice`.
#[inline(always)]
fn copy_in(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n > 64 || dst.len() != n {
        return copy_long(dst, src);
    }
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    /// Copies `W` bytes at offset 0 and at offset `n - W` (`W <= n`): all `n` when `n <= 2 * W`.
    ///
    /// # Safety
    /// `d` and `s` hold `n` bytes each, `W <= n`, and they do not overlap.
    #[inline(always)]
    unsafe fn ends<const W: usize>(d: *mut u8, s: *const u8, n: usize) {
        // SAFETY: [0, W) and [n - W, n) lie inside both buffers (`W <= n`); unaligned accesses.
        unsafe {
            let head = s.cast::<[u8; W]>().read_unaligned();
            let tail = s.add(n - W).cast::<[u8; W]>().read_unaligned();
            d.cast::<[u8; W]>().write_unaligned(head);
            d.add(n - W).cast::<[u8; W]>().write_unaligned(tail);
        }
    }
    // SAFETY: `dst` and `src` hold `n` bytes each (checked above) and do not overlap (one is
    // borrowed mutably); each branch's width is at most `n` and at least half of it.
    unsafe {
        if n >= 32 {
            ends::<32>(d, s, n);
        } else if n >= 16 {
            ends::<16>(d, s, n);
        } else if n >= 8 {
            ends::<8>(d, s, n);
        } else if n >= 4 {
            ends::<4>(d, s, n);
        } else if n > 0 {
            // 1 to 3 bytes: the first, the middle and the last cover them.
            *d = *s;
            *d.add(n / 2) = *s.add(n / 2);
            *d.add(n - 1) = *s.add(n - 1);
        }
    }
}

/// [`copy_in`] of more than 64 bytes: out of line, so that the path of a small message has no
/// call to save registers around.
#[cold]
#[inline(never)]
fn copy_long(dst: &mut [u8], src: &[u8]) {
    dst.copy_from_slice(src);
}

/// Room for one frame, written in place. Derefs to the payload bytes.
///
/// Call [`commit`](WriteGrant::commit) to publish; dropping the grant publishes nothing.
#[must_use = "a grant that is dropped without commit() sends nothing"]
pub struct WriteGrant<'a> {
    producer: &'a mut Producer,
    /// Start of the payload in the region.
    payload: *mut u8,
    /// Index of the frame: the producer's position, or the next line or lap (then the SKIP or
    /// PAD in front of it is published on commit).
    start: u64,
    len: usize,
    kind: u8,
}

// SAFETY: a grant is a unique borrow of its `Producer` (which is `Send`) plus a pointer into
// the memory that producer writes alone until the commit; moving it to another thread moves
// that unique access with it, as sending the `&mut Producer` itself would. (An async task that
// holds a grant across an await may move between threads.)
unsafe impl Send for WriteGrant<'_> {}

impl WriteGrant<'_> {
    /// Publishes the first `used` bytes of the grant as one frame. `used` is clamped to the
    /// granted length.
    #[inline]
    pub fn commit(self, used: usize) {
        let used = used.min(self.len);
        self.producer.publish(self.start, used, self.kind);
    }

    /// Length of the grant.
    #[inline]
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }
}

impl std::ops::Deref for WriteGrant<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: the payload bytes [pos + 8, pos + 8 + len) are inside the region (see
        // `grant_at`), in space the consumer has released (`room_for`), and belong to the
        // producer alone until the frame is published: the consumer stops at the zero header
        // word at the producer's position, and reaches the frame's only through it (directly,
        // or through the PAD published there on commit).
        unsafe { std::slice::from_raw_parts(self.payload, self.len) }
    }
}

impl std::ops::DerefMut for WriteGrant<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        // Under loom: the consumer must be done with these bytes (RELEASE_SPACE / RECLAIM).
        #[cfg(loom)]
        self.producer
            .state
            .ptrs
            .loom_region()
            .track_write(self.payload, self.len);
        // SAFETY: as in `deref`; we hold the only `&mut Producer`, so no other slice exists.
        unsafe { std::slice::from_raw_parts_mut(self.payload, self.len) }
    }
}
