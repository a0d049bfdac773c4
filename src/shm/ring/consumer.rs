//! The reading end: frames validated and read in place, guards that release them.

use crate::sync::Ordering;
use std::cell::{Cell, OnceCell};

use crate::error::{ChannelName, OpenError, RecvError};
use crate::shm::layout::{WaitCell, MODE_SPIN};
use crate::wait;

use super::*;

/// The reading end of a ring.
pub struct Consumer {
    /// In an allocation of its own (see [`ConsumerState`]).
    pub(super) state: Box<ConsumerState>,
}

/// What a consumer keeps: aligned and boxed as a producer's state is (see `ProducerState`).
#[repr(align(128))]
pub(crate) struct ConsumerState {
    pub(super) ptrs: RingPtrs,
    pub(super) mask: u64,
    /// Our index: bytes read so far. Never reread from shared memory.
    pub(super) head: u64,
    /// The index we last published: the space behind it is the producer's again. We publish in
    /// batches (see `Consumer::release`).
    pub(super) released: Cell<u64>,
    /// Publish once this many bytes have been read since the last time.
    pub(super) batch: u64,
    /// The last look at the ring found it empty: the next frame read was waited for.
    pub(super) found_empty: Cell<bool>,
    /// Our index when the ring was last found empty (see `Consumer::prefetch_ahead`).
    pub(super) empty_at: Cell<u64>,
    pub(super) max_len: usize,
    /// Private copies of frames for [`ReadGuard::json`]: lent to one guard at a time and given
    /// back when it drops, so decoding allocates only when a frame is larger than any before.
    pub(super) spare: Cell<Vec<u8>>,
    pub(super) _owned: Option<std::sync::Arc<Owned>>,
    /// The channel's name, for errors (`"ring"` for a ring between threads).
    pub(super) channel: ChannelName,
    /// What this end counts, and where it copies the counts.
    pub(super) tally: Tally,
}

// SAFETY: as for `ProducerState`; `spare`, `released` and `found_empty` are plain owned memory.
unsafe impl Send for ConsumerState {}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.state.ptrs.capacity)
            .field("head", &self.state.head)
            .finish()
    }
}

impl Consumer {
    /// # Safety
    /// As for [`Producer::new`], with at most one consumer at a time.
    pub(crate) unsafe fn new(
        ptrs: RingPtrs,
        owned: Option<std::sync::Arc<Owned>>,
        channel: ChannelName,
    ) -> Result<Self, OpenError> {
        // Acquire: pairs with the Release store of our predecessor's index.
        let head = ptrs.head().load(Ordering::Acquire);
        // Acquire: pairs with the producer's Release store of its informational index.
        let tail = ptrs.header().tail.load(Ordering::Acquire);
        if head % FRAME_ALIGN as u64 != 0
            || tail % FRAME_ALIGN as u64 != 0
            || head > tail
            || tail - head > ptrs.capacity as u64
        {
            return Err(OpenError::corrupt(
                &channel,
                format!("ring indices out of range: head {head}, tail {tail}"),
            ));
        }
        Ok(Consumer {
            state: Box::new(ConsumerState {
                mask: ptrs.capacity as u64 - 1,
                max_len: max_payload(ptrs.capacity),
                batch: release_batch(ptrs.capacity),
                ptrs,
                head,
                released: Cell::new(head),
                found_empty: Cell::new(false),
                empty_at: Cell::new(head),
                spare: Cell::new(Vec::new()),
                _owned: owned,
                channel,
                // SAFETY: the counters live with the ring, which outlives us (our contract).
                tally: unsafe { Tally::new(ptrs.counters) },
            }),
        })
    }

    /// Bytes in the ring region.
    pub fn capacity(&self) -> usize {
        self.state.ptrs.capacity
    }

    /// Where the region this consumer reads lies in this process (for the test hooks).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn region(&self) -> std::ops::Range<usize> {
        let start = self.state.ptrs.region.as_ptr() as usize;
        start..start + self.state.ptrs.capacity
    }

    /// How far the consumer has read: its free-running index, in bytes of the ring.
    #[inline]
    pub(crate) fn position(&self) -> u64 {
        self.state.head
    }

    /// Moves to `index`, where a frame starts that another reader of a ring with many
    /// readers could read next (a topic's subscriber that lagged is put back there), and
    /// publishes it as our index. Fails on an index that is not 8-aligned (none is a frame's).
    pub(crate) fn reposition(&mut self, index: u64) -> Result<(), RecvError> {
        if index % FRAME_ALIGN as u64 != 0 {
            return Err(self.corrupt(format!("a message said to start at index {index}")));
        }
        self.state.head = index;
        self.state.empty_at.set(index);
        self.state.found_empty.set(false);
        self.store_head();
        Ok(())
    }

    /// Largest payload a single frame carries.
    pub(crate) fn max_len(&self) -> usize {
        self.state.max_len
    }

    /// True when a frame (or a SKIP or a PAD) is waiting: one relaxed load, for spinning on.
    /// When none is, the space of the frames read so far goes back to the producer first (see
    /// `release`): whoever waits on this, waits with nothing held back.
    #[inline]
    pub fn has_data(&self) -> bool {
        // Relaxed: only a hint; `try_read` loads the same word again with OBSERVE.
        let data = self
            .state
            .ptrs
            .word((self.state.head & self.state.mask) as usize)
            .load(Ordering::Relaxed)
            != 0;
        if !data {
            self.caught_up();
        }
        data
    }

    /// Takes the next frame, if one is there: [`RecvError::Empty`] when none is, and
    /// [`RecvError::Corrupt`] when the shared memory holds something that is not a valid frame.
    #[inline]
    pub fn try_read(&mut self) -> Result<ReadGuard<'_>, RecvError> {
        let frame = self.next_frame()?;
        Ok(self.guard(frame))
    }

    /// Hands the frames that are there now, in order and up to `max` of them, to `f`, each
    /// read in place, and returns how many it handed: [`RecvError::Empty`] when none is
    /// there. An error met after the first frame ends the batch and is reported by the next
    /// call. The space of the frames read goes back to the producer in batches, as
    /// [`try_read`](Consumer::try_read)'s guards give it back, with no look ahead per frame.
    ///
    /// One call reads at most about a ring's worth: it takes no frame once it has moved the
    /// ring's capacity past where it began, so a producer that keeps the ring from running
    /// empty cannot keep it busy.
    pub fn try_read_batch(
        &mut self,
        max: usize,
        mut f: impl FnMut(&[u8]),
    ) -> Result<usize, RecvError> {
        let end = self.state.head + self.capacity() as u64;
        wait::in_steps(max, |_| {
            if self.state.head >= end {
                return Ok(0);
            }
            let frame = self.next_frame()?;
            if frame.kind != kind::DATA {
                return Err(self.corrupt(format!("frame of kind {} in a ring", frame.kind)));
            }
            self.hand_over(frame, &mut f);
            Ok(1)
        })
    }

    /// Hands the frame `frame`, which `poll_frame` found at our position, to `f` and moves
    /// past it; publishes our index once a batch's worth is read since the last time (the
    /// rest goes back when the ring is next found empty, or at the latest when we drop).
    #[inline]
    pub(crate) fn hand_over(&mut self, frame: Frame, f: &mut impl FnMut(&[u8])) {
        // Past it before `f` runs: a frame handed over is consumed, as a guard's is when it
        // drops, even if `f` unwinds. The producer cannot reuse its space before we publish.
        self.state.head += frame.size;
        self.state.found_empty.set(false);
        #[cfg(loom)]
        self.state
            .ptrs
            .loom_region()
            .track_read(frame.offset, frame.len);
        // SAFETY: `poll_frame` checked that [offset, offset + len) lies inside the region; the
        // producer does not write there until we publish an index past it, which happens only
        // after `f` returns. (A hostile producer process can still change these bytes under
        // us; they are plain bytes, any value is valid.)
        f(unsafe { std::slice::from_raw_parts(self.state.ptrs.bytes(frame.offset), frame.len) });
        self.state.tally.frame(frame.kind, frame.len);
        if self.state.head - self.state.released.get() >= self.state.batch {
            self.store_head();
        }
    }

    /// Wraps a frame found by `poll_frame` in a guard that releases it on drop.
    #[inline]
    pub(crate) fn guard(&mut self, frame: Frame) -> ReadGuard<'_> {
        ReadGuard {
            src: Source::Frame {
                consumer: self,
                offset: frame.offset,
                len: frame.len,
                kind: KindWord(frame.kind),
                size: frame.size,
            },
            copy: OnceCell::new(),
        }
    }

    /// Validates the frame at our position, skipping at most one SKIP or PAD.
    ///
    /// The errors are built out of line (`bad_frame`), so that the path of a valid frame
    /// stays short.
    #[inline]
    pub(crate) fn next_frame(&mut self) -> Result<Frame, RecvError> {
        match self.poll_frame()? {
            Some(frame) => Ok(frame),
            None => Err(RecvError::Empty {
                channel: self.state.channel.clone(),
            }),
        }
    }

    /// [`next_frame`](Consumer::next_frame) with `Ok(None)` for "no frame now": for the loops
    /// that wait or stop when the ring is empty, which then touch no error (nor the count of
    /// the channel name's `Arc`).
    #[inline]
    pub(crate) fn poll_frame(&mut self) -> Result<Option<Frame>, RecvError> {
        match self.look() {
            Ok(frame) => Ok(Some(frame)),
            Err(word) => self.poll_frame_slow(word),
        }
    }

    /// The `DATA` frame at our position, if the header word there is one that needs no more
    /// judging than this: the tag of our position and kind `DATA` (the upper half of the word
    /// compared at once), a length of at most `max_len` whose frame ends inside the region.
    /// `None` for anything else (nothing yet, a marker, a fragment, a corrupt word), which
    /// [`poll_frame`](Consumer::poll_frame) judges from its own load of the word.
    #[inline(always)]
    pub(crate) fn data_now(&self) -> Option<Frame> {
        self.look().ok()
    }

    /// [`data_now`](Consumer::data_now), handing back the word it loaded when that is not such
    /// a frame (every check of it is made on that one load, in `poll_frame_slow`).
    #[inline(always)]
    fn look(&self) -> Result<Frame, u64> {
        let pos = (self.state.head & self.state.mask) as usize;
        // OBSERVE (Acquire): pairs with PUBLISH in Producer::release_word / skip_to.
        let word = self.state.ptrs.word(pos).load(OBSERVE);
        // The tag (bits 35..64) and the kind (bits 32..35) a DATA frame here carries.
        if word >> 32 == encode(self.state.head, kind::DATA, 0) >> 32 {
            let len = word as u32 as usize;
            let size = frame_size(len);
            if len <= self.state.max_len && pos + size <= self.state.ptrs.capacity {
                self.prefetch_ahead(pos, size);
                return Ok(Frame {
                    offset: pos + FRAME_HEADER,
                    len,
                    kind: kind::DATA,
                    size: size as u64,
                });
            }
        }
        Err(word)
    }

    /// [`poll_frame`](Consumer::poll_frame) for a header word that `look` did not take:
    /// `word`, loaded there from our position, judged in full (and a SKIP or a PAD followed).
    #[inline(never)]
    fn poll_frame_slow(&mut self, mut word: u64) -> Result<Option<Frame>, RecvError> {
        let cap = self.state.mask + 1;
        let mut skipped = false;
        loop {
            let pos = (self.state.head & self.state.mask) as usize;
            if skipped {
                // OBSERVE (Acquire): pairs with PUBLISH in Producer::release_word / skip_to.
                word = self.state.ptrs.word(pos).load(OBSERVE);
            }
            if word == 0 {
                self.caught_up();
                return Ok(None);
            }
            let (tag, kind, len) = decode(word);
            if tag != tag_of(self.state.head) {
                return Err(self.bad_frame(Bad::Tag(word), pos));
            }
            match kind {
                kind::PAD => {
                    if pos == 0 || skipped {
                        return Err(self.bad_frame(Bad::Pad, pos));
                    }
                    skipped = true;
                    self.state.head += cap - pos as u64;
                    self.store_head();
                }
                kind::SKIP => {
                    // To the next line, which must lie inside this lap.
                    let to = next_line(pos as u64);
                    if pos % LINE == 0 || len != 0 || to >= cap || skipped {
                        return Err(self.bad_frame(Bad::Skip, pos));
                    }
                    skipped = true;
                    self.state.head += to - pos as u64;
                }
                kind::DATA..=kind::MAX => {
                    let len = len as usize;
                    let size = frame_size(len) as u64;
                    if len > self.state.max_len || pos as u64 + size > cap {
                        return Err(self.bad_frame(Bad::Length(len), pos));
                    }
                    self.prefetch_ahead(pos, size as usize);
                    return Ok(Some(Frame {
                        offset: pos + FRAME_HEADER,
                        len,
                        kind,
                        size,
                    }));
                }
                _ => return Err(self.bad_frame(Bad::Kind(kind), pos)),
            }
        }
    }

    /// [`RecvError::Corrupt`] for the frame header at offset `pos` that `poll_frame` refused.
    #[cold]
    #[inline(never)]
    fn bad_frame(&self, bad: Bad, pos: usize) -> RecvError {
        self.corrupt(match bad {
            Bad::Tag(word) => format!(
                "frame header {word:#018x} at offset {pos} carries a tag for another position"
            ),
            Bad::Pad => format!("padding marker at offset {pos} does not end a lap"),
            Bad::Skip => format!("skip marker at offset {pos} does not skip to a line in the lap"),
            Bad::Length(len) => {
                format!("frame of {len} bytes at offset {pos} runs past the region")
            }
            Bad::Kind(kind) => format!("unknown frame kind {kind} at offset {pos}"),
        })
    }

    /// [`RecvError::Corrupt`] in this ring's channel.
    #[cold]
    fn corrupt(&self, what: String) -> RecvError {
        RecvError::Corrupt {
            channel: self.state.channel.clone(),
            what,
        }
    }

    /// Gives the producer the space of the frames read so far, in batches: when a batch's worth
    /// is read (an eighth of the ring, at most 2 KiB, or a quarter of the ring while the producer
    /// sleeps for room: see `batch_read`); when the frame just read had to be waited
    /// for and ends a cache line; when it was the last one published (so a drained ring is
    /// wholly the producer's again); when a PAD skips the rest of a lap; when the ring is found
    /// empty (`caught_up`, from `poll_frame` or `has_data`: so before any wait, which always
    /// looks at one of them before it sleeps); and when the consumer drops. A producer waiting
    /// for room is woken then. Space is held back only while more frames wait to be read. The
    /// producer rereads our index only when its cached copy says the ring is full, and a stream
    /// that keeps the ring full then moves that line once per batch, not once per message.
    #[inline]
    pub(super) fn release(&mut self, size: u64) {
        self.state.head += size;
        if size >= wait::LARGE_FRAME {
            // The producer's copy of the next one is what this thread's next wait waits for.
            wait::note_large_frame(size);
        }
        // A frame that we had to wait for and that ends a cache line (a ping-pong of one-line
        // messages): publish at once, without looking at the next word, which is in a line
        // the producer is about to write (that look would put a transfer on the way to the
        // reply). Otherwise hold back until a batch is read or we reach the last frame
        // published. Relaxed: a hint (the next `poll_frame` loads the word again with OBSERVE);
        // non-zero is a frame the producer published, so the space held back now is given
        // back, at the latest, when that frame is read.
        let waited = self.state.found_empty.replace(false);
        if (waited && self.state.head % LINE as u64 == 0)
            || self.batch_read()
            || self
                .state
                .ptrs
                .word((self.state.head & self.state.mask) as usize)
                .load(Ordering::Relaxed)
                == 0
        {
            self.store_head();
        }
    }

    /// Whether a batch's worth of read space is held back, to give back now while more frames
    /// wait: [`release_batch`], or, while the producer sleeps for room, a quarter of the ring.
    /// Each publication of our index wakes a sleeping producer, and one that wakes to a batch
    /// of room fills it and sleeps again: a consumer that holds back a quarter of the ring wakes
    /// it a few times a lap, as a pipe's reader does, instead of once per batch, and the
    /// producer runs ahead into a quarter of the ring per wake-up. (When the ring is found
    /// empty everything goes back at once, as always.)
    #[inline]
    fn batch_read(&self) -> bool {
        let held = self.state.head - self.state.released.get();
        // Relaxed: a hint, read once per batch; a producer that announces its sleep just after
        // it is woken by the next publication, which the ring being found empty forces.
        held >= self.state.batch
            && (held >= self.state.ptrs.capacity as u64 / 4
                || self.space_cell().sleepers.load(Ordering::Relaxed) == 0)
    }

    /// The ring was found empty: the next frame is waited for, and nothing read stays held
    /// back while we wait.
    #[inline]
    fn caught_up(&self) {
        self.state.empty_at.set(self.state.head);
        self.state.found_empty.set(true);
        self.give_back();
    }

    /// While frames keep coming without the ring running empty (a backlog), asks for the line
    /// `PREFETCH_AHEAD` bytes past each line a small frame reaches into. Where the next frame
    /// is depends on the length in this one's header word, so without it the consumer waits
    /// for one line at a time; a consumer that keeps finding the ring empty (a ping-pong, a
    /// stream it keeps up with) never asks, so it does not take lines the producer is writing.
    /// Only small frames: a longer one takes long enough to copy that the hardware's own
    /// prefetch keeps up, and a look past its end lands in lines the producer may still be
    /// writing.
    #[inline]
    fn prefetch_ahead(&self, pos: usize, size: usize) {
        // Once per line: when this frame starts a line or reaches into the next one, the line
        // `PREFETCH_AHEAD` past the last line it reaches into.
        let last = pos + size - 1;
        // The backlog first: a consumer that keeps finding the ring empty (a ping-pong) asks
        // nothing more.
        if self.state.head - self.state.empty_at.get() >= BACKLOG
            && size <= PREFETCH_MAX_FRAME
            && (pos % LINE == 0 || pos / LINE != last / LINE)
        {
            let ahead = ((last & !(LINE - 1)) + PREFETCH_AHEAD) & self.state.mask as usize;
            #[cfg(all(target_arch = "x86_64", not(loom)))]
            // SAFETY: `ahead` is masked into the region, so the address is inside the mapping
            // (or allocation); a prefetch does not fault and reads nothing the program sees.
            unsafe {
                use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(self.state.ptrs.bytes(ahead).cast::<i8>());
            }
            #[cfg(not(all(target_arch = "x86_64", not(loom))))]
            let _ = ahead;
        }
    }

    /// Publishes our index if space read since the last publication is held back.
    #[inline]
    fn give_back(&self) {
        if self.state.released.get() != self.state.head {
            self.store_head();
        }
    }

    #[inline]
    pub(super) fn store_head(&self) {
        self.state.released.set(self.state.head);
        // RELEASE_SPACE (Release): pairs with RECLAIM in Producer::refresh_head; our reads of the
        // frames happen before the producer may overwrite them.
        self.state.ptrs.head().store(self.state.head, RELEASE_SPACE);
        if self.state.ptrs.peer_mode() != MODE_SPIN
            && wait::wake_if_sleeping(&self.state.ptrs.header().space_wait)
        {
            self.state.tally.woke();
        }
    }

    /// What this end counts (see `crate::shm::layout::counters`).
    pub(crate) fn tally(&self) -> &Tally {
        &self.state.tally
    }

    /// Under the loom models: never publish for a full batch, only for the other reasons
    /// `release` names.
    #[cfg(all(loom, test))]
    pub(crate) fn hold_back(&mut self) {
        self.state.batch = u64::MAX;
    }

    /// The wait cell the consumer sleeps on when the ring is empty.
    pub(crate) fn data_cell(&self) -> &WaitCell {
        self.state.ptrs.data_cell()
    }

    /// The wait cell the producer sleeps on (used to wake it on close).
    pub(crate) fn space_cell(&self) -> &WaitCell {
        &self.state.ptrs.header().space_wait
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// Bytes read since the ring was last found empty before the consumer prefetches ahead.
const BACKLOG: u64 = 4 * LINE as u64;
/// How far ahead of the lines it reads a consumer with a backlog prefetches: eight lines.
const PREFETCH_AHEAD: usize = 8 * LINE;
/// The largest frame, header included, after which the consumer prefetches.
const PREFETCH_MAX_FRAME: usize = 4 * LINE;

/// Bytes read between two publications of the consumer's index: an eighth of the ring, at most
/// 2 KiB. The producer of a full ring sees the room a batch frees at once; the most it can miss
/// while the consumer holds a batch back is this much of the ring.
fn release_batch(capacity: usize) -> u64 {
    (capacity as u64 / 8).min(2048)
}

/// What is wrong with a frame header that `Consumer::poll_frame` refused.
#[derive(Clone, Copy, Debug)]
enum Bad {
    /// The header word (its tag is for another position).
    Tag(u64),
    /// A PAD at the start of the region, or right after another marker.
    Pad,
    /// A SKIP at a line boundary, with a length, to the end of the region, or right after
    /// another marker.
    Skip,
    /// The payload length, which runs past the region.
    Length(usize),
    /// The unknown kind.
    Kind(u8),
}

/// A validated frame at the consumer's position, not yet handed out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub(super) offset: usize,
    pub(super) len: usize,
    pub(super) kind: u8,
    pub(super) size: u64,
}

impl Frame {
    /// The frame kind.
    #[inline]
    pub(crate) fn kind(&self) -> u8 {
        self.kind
    }

    /// Bytes of the ring the frame occupies, header included.
    #[inline]
    pub(crate) fn size(&self) -> u64 {
        self.size
    }
}

/// One received message. Derefs to the payload bytes.
///
/// For a message that fit in one frame the bytes are read in place in the ring, and the space is
/// released when the guard drops. A message that arrived in fragments (larger than one frame) is
/// reassembled into the channel's buffer, which the guard borrows.
pub struct ReadGuard<'a> {
    src: Source<'a>,
    /// A private copy of a frame's bytes, made by the first [`json`](ReadGuard::json) call:
    /// what is decoded must be memory the peer cannot write.
    copy: OnceCell<Vec<u8>>,
}

/// A frame's kind, in a word of its own: with every field of a frame's guard a whole word, a
/// guard that is moved (returned, kept in a handle, as the C API keeps it) is copied word by
/// word. With the kind a byte beside the enum's tag, the copy started at byte 1 and each of its
/// loads spanned two earlier stores, which the processor cannot forward: a C stream of 128-byte
/// messages read in place ran about 12% slower, measured.
#[derive(Clone, Copy)]
#[repr(align(8))]
struct KindWord(u8);

enum Source<'a> {
    Frame {
        consumer: &'a mut Consumer,
        offset: usize,
        len: usize,
        kind: KindWord,
        size: u64,
    },
    /// Bytes reassembled outside the ring, and the channel's name for errors.
    Assembled(&'a [u8], &'a ChannelName),
}

impl<'a> ReadGuard<'a> {
    /// A guard over bytes reassembled outside the ring.
    pub(crate) fn assembled(bytes: &'a [u8], channel: &'a ChannelName) -> Self {
        ReadGuard {
            src: Source::Assembled(bytes, channel),
            copy: OnceCell::new(),
        }
    }

    /// The frame kind; `DATA` for reassembled messages.
    #[inline]
    pub(crate) fn kind(&self) -> u8 {
        match self.src {
            Source::Frame { kind, .. } => kind.0,
            Source::Assembled(..) => kind::DATA,
        }
    }

    /// Decodes the payload as JSON. The value may borrow `&str` and `&[u8]` fields, which stay
    /// valid until the guard drops.
    ///
    /// A frame read in place lives in memory the peer can write, so the first call copies it
    /// into a buffer the receiving end owns (and reuses: no allocation per message once it is
    /// large enough) and decodes that same copy, checked as UTF-8 (JSON text always is) by the
    /// codec (serde_json, or sonic-rs with feature `sonic-json`). A peer that rewrites the frame
    /// meanwhile can change the value decoded, never make a borrowed `&str` invalid. A
    /// reassembled message is already private and is decoded where it is.
    #[inline]
    pub fn json<'de, T: serde::Deserialize<'de>>(&'de self) -> Result<T, RecvError> {
        crate::json::decode(self.private_bytes()).map_err(|source| RecvError::Json {
            channel: self.channel().clone(),
            source,
        })
    }

    /// The name of the channel the message came through, for errors.
    pub(crate) fn channel(&self) -> &ChannelName {
        match &self.src {
            Source::Frame { consumer, .. } => &consumer.state.channel,
            Source::Assembled(_, channel) => channel,
        }
    }

    /// The payload in memory only this process writes: a copy of a frame read in place (made
    /// once per guard), or the reassembled message.
    pub(super) fn private_bytes(&self) -> &[u8] {
        match &self.src {
            Source::Frame { consumer, .. } => self.copy.get_or_init(|| {
                let mut buf = consumer.state.spare.take();
                buf.clear();
                // The one read of the shared bytes; everything after it looks at `buf`.
                buf.extend_from_slice(self);
                buf
            }),
            Source::Assembled(bytes, _) => bytes,
        }
    }
}

impl std::ops::Deref for ReadGuard<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.src {
            Source::Frame {
                consumer,
                offset,
                len,
                ..
            } => {
                // Under loom: the producer's writes must be visible (PUBLISH / OBSERVE).
                #[cfg(loom)]
                consumer.state.ptrs.loom_region().track_read(*offset, *len);
                // SAFETY: `poll_frame` checked that [offset, offset + len) lies inside the
                // region; the producer does not write there until we release it in `drop`. (A
                // hostile producer process can still change these bytes under us; they are
                // plain bytes, any value is valid.)
                unsafe { std::slice::from_raw_parts(consumer.state.ptrs.bytes(*offset), *len) }
            }
            Source::Assembled(bytes, _) => bytes,
        }
    }
}

impl Drop for ReadGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Source::Frame {
            consumer,
            size,
            kind,
            len,
            ..
        } = &mut self.src
        {
            consumer.state.tally.frame(kind.0, *len);
            consumer.release(*size);
            if let Some(buf) = self.copy.take() {
                consumer.state.spare.set(buf);
            }
        }
    }
}

impl std::fmt::Debug for ReadGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadGuard")
            .field("len", &self.len())
            .finish()
    }
}
