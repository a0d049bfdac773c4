//! The sending half: frames, fragments and JSON written in place.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::SendError;
use crate::shm::layout::{PEER_CLOSED, PEER_PRESENT};
use crate::shm::ring::{frame_size, kind, Producer, WriteGrant, FRAME_ALIGN, FRAME_HEADER};
use crate::wait::{self, Deadline, Waiter};

use super::*;

/// The sending half of a [`Channel`], borrowed from [`Channel::split`] or owned from
/// [`Channel::into_split`]: it can move to another thread while the receiving half keeps
/// working, so two peers can each stream large messages to the other at once without waiting on
/// each other. It keeps the channel's mapping alive for as long as it exists.
pub struct SendHalf {
    pub(super) tx: Producer,
    pub(super) peer: PeerWatch,
    /// Dropped before `shared`: its death-watch registration points into the mapping.
    pub(super) wait: Waiter,
    /// Size of the grant [`send_json`](SendHalf::send_json) serialises into first, or
    /// `JSON_BUFFERED` while the last JSON text was longer than a frame.
    pub(super) json_hint: usize,
    /// Largest message this side sends (fragmented messages included).
    pub(super) max_message: usize,
    /// Serialisation buffer for JSON values too large for one frame.
    pub(super) scratch: Vec<u8>,
    /// A fragmented message is under way: its first fragment went out and its last did not.
    /// The next message to start first tells the receiver to drop what it has of this one (a
    /// `FRAG_ABORT` frame), so a message whose send timed out, failed or was abandoned
    /// part-way (a dropped async send) is never delivered in part.
    pub(super) unfinished: bool,
    // Declared last: the mapping `tx` and `peer` point into, kept alive by this half.
    pub(super) shared: Arc<Shared>,
}

impl SendHalf {
    /// Largest payload one frame carries (`capacity / 2 - 72`).
    pub fn max_frame(&self) -> usize {
        self.tx.max_len()
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Fails unless a message of `len` bytes may go out now: `Disconnected` once the peer
    /// closed, `PeerGone` once its process is known dead, `TooLarge` past our own limit or the
    /// one the peer published.
    #[inline]
    fn send_allowed(&mut self, len: usize) -> Result<(), SendError> {
        let max = self.send_limit()?;
        if len > max {
            return Err(SendError::TooLarge {
                channel: self.shared.name.clone(),
                len,
                max,
            });
        }
        Ok(())
    }

    /// The largest message that may go out now (see [`max_message`](SendHalf::max_message)),
    /// from one look at the peer's state and limit and one at the alarm the death watcher
    /// raises: `Disconnected` once the peer closed, `PeerGone` once its process is known dead.
    #[inline]
    fn send_limit(&mut self) -> Result<usize, SendError> {
        let state = self.peer.state();
        if state == PEER_PRESENT && !self.peer.alarm().is_raised() {
            return Ok(self.max_message.min(self.peer_limit()));
        }
        self.send_limit_slow(state)
    }

    /// [`send_limit`](SendHalf::send_limit) off its common path: a peer that is not there
    /// (yet, or any more), or an alarm raised.
    #[cold]
    #[inline(never)]
    fn send_limit_slow(&mut self, state: u32) -> Result<usize, SendError> {
        match state {
            PEER_CLOSED => Err(SendError::Disconnected {
                channel: self.shared.name.clone(),
            }),
            PEER_PRESENT => {
                self.look_at_peer()?;
                Ok(self.max_message.min(self.peer_limit()))
            }
            // No limit published yet: the peer has not connected.
            _ => Ok(self.max_message),
        }
    }

    /// The alarm was raised: at first (the peer is there now), on news from the death watcher,
    /// because the peer was found gone, or because the last registration that raised it went.
    /// Lowers it, makes sure the watcher raises it on the peer's death (unless a registration
    /// of either half does already, this half registers the peer, on the cell a full ring's
    /// wait sleeps on), and asks the peer's end: `PeerGone` (and the alarm raised again, so
    /// every later send comes here and gets it at once) if the peer's process is gone,
    /// `Disconnected` if it closed.
    fn look_at_peer(&mut self) -> Result<(), SendError> {
        let alarm = self.peer.alarm();
        if !alarm.take() {
            return Ok(());
        }
        let checked = if alarm.is_watched() {
            Ok(())
        } else {
            self.wait.register(self.tx.space_cell(), &mut self.peer)
        }
        .and_then(|()| self.peer.check());
        if let Err(e) = checked {
            self.peer.alarm().raise();
            return Err(e.into());
        }
        Ok(())
    }

    /// The limit the peer published, read once. Any value is a valid limit (a peer that
    /// publishes a small one only refuses its own messages).
    #[inline]
    fn peer_limit(&self) -> usize {
        // Relaxed: a standalone value, stored with Relaxed by the peer's `set_max_message`
        // (and before its Release store of PEER_PRESENT, which `state` read with Acquire).
        let published = self.peer.info().max_message.load(Ordering::Relaxed);
        usize::try_from(published).unwrap_or(usize::MAX)
    }

    /// Largest message [`send`](SendHalf::send) accepts: this side's own limit and, once the
    /// peer has connected, the limit it published, whichever is lower.
    pub fn max_message(&self) -> usize {
        if self.peer.state() == PEER_PRESENT {
            self.max_message.min(self.peer_limit())
        } else {
            self.max_message
        }
    }

    /// Sets the largest message this half sends (the peer's published limit applies too).
    pub fn set_max_message(&mut self, max: usize) {
        self.max_message = max;
    }

    /// One step of [`send_batch_until`](SendHalf::send_batch_until) (`rest` is not empty): the
    /// first message alone if it is longer than a frame, else it and as many of the frames
    /// after it as fit with it, once there is room for it.
    fn send_some<B: AsRef<[u8]>>(
        &mut self,
        rest: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        let first = rest[0].as_ref();
        if first.len() > self.tx.max_len() {
            return self.send_until(first, deadline).map(|()| 1);
        }
        let max = self.send_limit()?.min(self.tx.max_len());
        if first.len() > max {
            return Err(SendError::TooLarge {
                channel: self.shared.name.clone(),
                len: first.len(),
                max,
            });
        }
        if self.unfinished {
            self.withdraw_unfinished(deadline)?;
        }
        // `write_batch` places the first frame as `room` does: 0 is no room for it now.
        loop {
            match self.tx.write_batch(rest, max)? {
                0 => self.wait_room(first.len(), deadline)?,
                sent => return Ok(sent),
            }
        }
    }

    /// [`send_until`](crate::seam::SendCore::send_until) off its common path: every look and
    /// wait a send of bytes may need, one frame or fragments.
    #[inline(never)]
    fn send_slow(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        if bytes.len() <= self.tx.max_len() {
            // Placed and written straight away: no grant is handed back through a `Result`.
            // (`place` without its look at the frame's size, checked just above.)
            self.send_allowed(bytes.len())?;
            if self.unfinished {
                self.withdraw_unfinished(deadline)?;
            }
            let start = self.room(bytes.len(), deadline)?;
            self.tx.write_at(start, bytes, kind::DATA);
            Ok(())
        } else {
            self.send_fragmented(bytes, deadline)
        }
    }

    /// Room for a frame of `len` bytes of kind `kind`, waiting for it until `deadline`. A frame
    /// that starts a message first withdraws an unfinished one.
    #[inline]
    fn reserve_kind(
        &mut self,
        len: usize,
        kind: u8,
        deadline: Deadline,
    ) -> Result<WriteGrant<'_>, SendError> {
        let start = self.place(len, kind, deadline)?;
        Ok(self.tx.grant_at(start, len, kind))
    }

    /// Where a frame of `len` bytes of kind `kind` goes, once there is room for it (waiting
    /// for it until `deadline`): what [`reserve_kind`](SendHalf::reserve_kind) checks and
    /// waits for before it hands out a grant there.
    #[inline(always)]
    fn place(&mut self, len: usize, kind: u8, deadline: Deadline) -> Result<u64, SendError> {
        self.send_allowed(len)?;
        self.place_allowed(len, kind, deadline)
    }

    /// [`place`](SendHalf::place) for a frame that [`send_limit`](SendHalf::send_limit) has
    /// already allowed.
    #[inline(always)]
    fn place_allowed(
        &mut self,
        len: usize,
        kind: u8,
        deadline: Deadline,
    ) -> Result<u64, SendError> {
        if self.unfinished && matches!(kind, kind::DATA | kind::FRAG_FIRST) {
            self.withdraw_unfinished(deadline)?;
        }
        if len > self.tx.max_len() {
            return Err(SendError::TooLarge {
                channel: self.shared.name.clone(),
                len,
                max: self.tx.max_len(),
            });
        }
        self.room(len, deadline)
    }

    /// Where a frame of `len` bytes (at most a frame's payload) goes, once there is room for
    /// it, waiting for it until `deadline`.
    #[inline(always)]
    fn room(&mut self, len: usize, deadline: Deadline) -> Result<u64, SendError> {
        loop {
            match self.tx.room_for(len)? {
                Some(start) => return Ok(start),
                None => self.wait_room(len, deadline)?,
            }
        }
    }

    /// Sends the frame that tells the receiver to drop the fragments it has of the unfinished
    /// message, waiting for room for it until `deadline`.
    #[cold]
    fn withdraw_unfinished(&mut self, deadline: Deadline) -> Result<(), SendError> {
        let start = loop {
            match self.tx.room_for(0)? {
                Some(start) => break start,
                None => self.wait_room(0, deadline)?,
            }
        };
        self.tx.grant_at(start, 0, kind::FRAG_ABORT).commit(0);
        self.unfinished = false;
        Ok(())
    }

    /// Waits for room for a frame of `len` bytes: `Full` at once for [`Deadline::Now`].
    #[inline]
    fn wait_room(&mut self, len: usize, deadline: Deadline) -> Result<(), SendError> {
        self.tx.tally().full();
        let until = match deadline {
            Deadline::Now => {
                return Err(SendError::Full {
                    channel: self.shared.name.clone(),
                })
            }
            Deadline::At(at) => Some(at),
            Deadline::Never => None,
        };
        let tx = &mut self.tx;
        let cell = tx.space_cell() as *const _;
        // SAFETY: the cell lives in the mapping, not in `tx`, so the reference stays valid while
        // `tx` is borrowed mutably by the closure below.
        let cell = unsafe { &*cell };
        let waited = self.wait.wait_until(
            cell,
            until,
            // A corrupt index makes `has_room` fail; report "ready" so the caller's reserve
            // returns that error.
            || tx.has_room(len).unwrap_or(true),
            &mut self.peer,
        );
        self.tx.tally().slept(self.wait.take_sleeps());
        waited?;
        Ok(())
    }

    /// A message longer than one frame: streamed in fragments as the peer reads them, or, for
    /// [`Deadline::Now`], sent whole if the ring has room for all of it now.
    #[inline(never)]
    fn send_fragmented(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        self.send_allowed(bytes.len())?;
        if deadline == Deadline::Now {
            return self.try_send_whole(bytes);
        }
        let mut sent = 0;
        self.send_fragments(bytes, &mut sent, deadline)
    }

    /// Sends the fragments of `bytes` from the one after the first `sent` bytes on, waiting for
    /// room for each until `deadline`, and counts in `sent` the bytes that went out. Stopped
    /// part-way (by the deadline, an error or, for [`Deadline::Now`], a full ring), it can be
    /// called again to go on; a message abandoned part-way is withdrawn by the next one.
    pub(crate) fn send_fragments(
        &mut self,
        bytes: &[u8],
        sent: &mut usize,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        let chunk = self.tx.max_len();
        loop {
            let (n, kind) = next_fragment(bytes.len(), *sent, chunk);
            let mut grant = self.reserve_kind(n, kind, deadline)?;
            *sent += fill_fragment(&mut grant, bytes, *sent);
            grant.commit(n);
            self.unfinished = kind != kind::FRAG_LAST;
            if kind == kind::FRAG_LAST {
                return Ok(());
            }
        }
    }

    /// One step of a send that fragments as room comes, for a caller that waits for room
    /// itself (the async surface): sends what fits now of `bytes` from the first `sent` bytes
    /// on (`Full` when that is nothing, or not all), counting in `sent` what went out. A
    /// message of one frame is sent whole or not at all. Called again with the same `bytes`
    /// and `sent`, it goes on; a message abandoned part-way is withdrawn by the next one.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn send_part(&mut self, bytes: &[u8], sent: &mut usize) -> Result<(), SendError> {
        if bytes.len() <= self.tx.max_len() {
            return self.send_until(bytes, Deadline::Now);
        }
        if *sent == 0 {
            self.send_allowed(bytes.len())?;
        }
        self.send_fragments(bytes, sent, Deadline::Now)
    }

    /// Sends a message longer than one frame if all its fragments fit in the ring now: `Full`
    /// (nothing sent) if they do not, `TooLarge` if they never could.
    fn try_send_whole(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        if self.unfinished {
            self.withdraw_unfinished(Deadline::Now)?;
        }
        let chunk = self.tx.max_len();
        let max = whole_max(self.tx.capacity(), chunk);
        if bytes.len() > max {
            return Err(SendError::TooLarge {
                channel: self.shared.name.clone(),
                len: bytes.len(),
                max,
            });
        }
        if !self.tx.room_for_all(fragment_lens(bytes.len(), chunk))? {
            return Err(SendError::Full {
                channel: self.shared.name.clone(),
            });
        }
        // Each fragment goes where `room_for_all` placed it, in the room it found.
        let mut sent = 0;
        loop {
            let (n, kind) = next_fragment(bytes.len(), sent, chunk);
            let start = self.tx.next_start(n);
            let mut grant = self.tx.grant_at(start, n, kind);
            sent += fill_fragment(&mut grant, bytes, sent);
            grant.commit(n);
            if kind == kind::FRAG_LAST {
                return Ok(());
            }
        }
    }

    /// Serialises `value` straight into a grant sized from earlier messages (twice the longest
    /// JSON text sent so far that fit one frame): true if it was sent so, false if it did not
    /// fit the grant (or, for [`Deadline::Now`], there is no room for the grant now).
    #[inline]
    pub(crate) fn send_json_in_place<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<bool, SendError> {
        if !crate::json::ENCODES_IN_PLACE || self.json_hint == JSON_BUFFERED {
            return Ok(false);
        }
        // One look at the peer's state and limit serves both the grant's size and the check
        // that the message may go out.
        let max = self.tx.max_len().min(self.send_limit()?);
        let len = self.json_hint.min(max);
        let start = match self.place_allowed(len, kind::DATA, deadline) {
            Ok(start) => start,
            // The value may still fit at its exact size.
            Err(SendError::Full { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        let mut grant = self.tx.grant_at(start, len, kind::DATA);
        let mut out = SliceWriter::new(&mut grant);
        match crate::json::encode_into(&mut out, value) {
            Ok(()) => {
                let used = out.written();
                grant.commit(used);
                self.learn_json_len(used, max);
                Ok(true)
            }
            // Too long for the grant, which is dropped: it published nothing.
            Err(e) if e.is_io() => Ok(false),
            Err(e) => Err(SendError::Json {
                channel: self.shared.name.clone(),
                source: e,
            }),
        }
    }

    /// Serialises `value` into the half's buffer, taken out of the half (give it back to
    /// `scratch` once sent), and learns its length for the next in-place attempt.
    #[inline(never)]
    pub(crate) fn serialise_json<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<Vec<u8>, SendError> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        if let Err(e) = crate::json::encode(&mut buf, value) {
            self.scratch = buf;
            return Err(SendError::Json {
                channel: self.shared.name.clone(),
                source: e,
            });
        }
        let max = self.tx.max_len().min(self.max_message());
        if buf.len() <= max {
            self.learn_json_len(buf.len(), max);
        } else {
            self.json_hint = JSON_BUFFERED;
        }
        Ok(buf)
    }

    /// Grows the grant `send_json` starts with to twice a JSON text of `len` bytes that fit one
    /// frame, within `max`.
    #[inline]
    fn learn_json_len(&mut self, len: usize, max: usize) {
        if self.json_hint == JSON_BUFFERED || len * 2 > self.json_hint {
            self.json_hint = (len * 2).next_power_of_two().min(max);
        }
    }
}

impl crate::seam::SendCore for SendHalf {
    type Grant<'a> = WriteGrant<'a>;

    /// The core of every send of bytes: one frame, or fragments for a message longer than one.
    ///
    /// A message of one frame that may go out and finds room by our own copy of the consumer's
    /// index goes out here, inline: one look at the peer (its state, the alarm, its limit: each
    /// read once and judged where it is read), the frame placed and written, no `Result` or
    /// grant handed through a call. Anything else (a peer not there, an alarm, a message too
    /// long, an unfinished message to withdraw, a ring full by our copy of the index, a frame
    /// that goes after a SKIP or a PAD, a rewind due) takes [`send_slow`](SendHalf::send_slow),
    /// which decides all of it from its own reads, waits, and reports.
    #[inline]
    fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        let len = bytes.len();
        if len <= self.tx.max_len()
            && !self.unfinished
            && self.peer.state() == PEER_PRESENT
            && !self.peer.alarm().is_raised()
            && len <= self.max_message.min(self.peer_limit())
            && self.tx.room_here(len)
        {
            self.tx.write_here(bytes);
            return Ok(());
        }
        self.send_slow(bytes, deadline)
    }

    /// The core of every JSON send: in place in a grant where the value fits one, else through
    /// the half's buffer.
    #[inline]
    fn send_json_until<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        if self.send_json_in_place(value, deadline)? {
            return Ok(());
        }
        let buf = self.serialise_json(value)?;
        let result = self.send_until(&buf, deadline);
        self.scratch = buf;
        result
    }

    /// The core of every reservation: room for one frame of `len` bytes.
    #[inline]
    fn reserve_until(
        &mut self,
        len: usize,
        deadline: Deadline,
    ) -> Result<WriteGrant<'_>, SendError> {
        self.reserve_kind(len, kind::DATA, deadline)
    }

    /// The core of every batch send: the messages of `batch` in order, each as
    /// [`send_until`](SendHalf::send_until) sends it, those of up to a frame written as many
    /// at a time as fit and published together. Returns how many went out; an error (the
    /// deadline among them) fails the call only if it met the first message, else it ends the
    /// batch and the next call, which starts with that message, meets it again.
    fn send_batch_until<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        wait::in_steps(batch.len(), |sent| self.send_some(&batch[sent..], deadline))
    }
}

/// The next fragment of a message of `len` bytes (longer than a frame of `chunk` bytes) once
/// `sent` of its bytes went out: its frame's payload length and kind. The first fragment is a
/// whole frame that starts with the message's length (8 bytes); the last one may be shorter.
#[inline]
fn next_fragment(len: usize, sent: usize, chunk: usize) -> (usize, u8) {
    if sent == 0 {
        return (chunk, kind::FRAG_FIRST);
    }
    let n = chunk.min(len - sent);
    let kind = if sent + n == len {
        kind::FRAG_LAST
    } else {
        kind::FRAG_MORE
    };
    (n, kind)
}

/// Writes into a fragment's grant the bytes of `bytes` from `sent` on (after the length
/// prefix, for the first); returns how many of the message's bytes it holds.
#[inline]
fn fill_fragment(grant: &mut [u8], bytes: &[u8], sent: usize) -> usize {
    if sent == 0 {
        let (total, rest) = grant.split_at_mut(8);
        total.copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        rest.copy_from_slice(&bytes[..rest.len()]);
        rest.len()
    } else {
        grant.copy_from_slice(&bytes[sent..sent + grant.len()]);
        grant.len()
    }
}

/// The payload lengths of the frames a message of `len` bytes goes in.
fn fragment_lens(len: usize, chunk: usize) -> impl Iterator<Item = usize> {
    let mut sent = 0;
    std::iter::from_fn(move || {
        (sent < len).then(|| {
            let (n, kind) = next_fragment(len, sent, chunk);
            sent += if kind == kind::FRAG_FIRST { n - 8 } else { n };
            n
        })
    })
}

/// The longest message whose fragments fit in a ring of `capacity` bytes with frames of
/// `chunk` bytes all at once, laid end to end from the start of an empty region: what
/// `try_send` can ever send.
fn whole_max(capacity: usize, chunk: usize) -> usize {
    let room = capacity - FRAME_HEADER;
    let whole_frames = room / frame_size(chunk);
    let rest = room - whole_frames * frame_size(chunk);
    let last = (rest / FRAME_ALIGN * FRAME_ALIGN).saturating_sub(FRAME_HEADER);
    whole_frames * chunk - 8 + last
}

/// [`SendHalf::json_hint`] after a JSON text longer than a frame: serialise the next value into
/// the buffer first.
const JSON_BUFFERED: usize = usize::MAX;

// SAFETY: the half's pointers (in `tx` and `peer`) point into the mapping that its own
// `shared` field keeps alive, whichever channel or thread the half ends up in; all shared access
// goes through atomics and the frame protocol, and the half is the only user of its ring end
// (`&mut self` on every operation). The rest of its fields are plain owned data.
unsafe impl Send for SendHalf {}

/// `io::Write` into a fixed slice, failing with `WriteZero` once it is full: what
/// [`Channel::send_json`] gives serde_json over a write grant, public so that the same work can
/// be measured or reused outside a ring.
///
/// ```
/// let mut buf = [0u8; 64];
/// let mut out = shmlink::testing::SliceWriter::new(&mut buf);
/// serde_json::to_writer(&mut out, &[1, 2, 3]).unwrap();
/// assert_eq!(out.written(), 7);
/// ```
// `pub` for the test hooks (`crate::testing`): the harness and the JSON bench use it.
#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
pub struct SliceWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

#[cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]
impl<'a> SliceWriter<'a> {
    /// A writer at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a mut [u8]) -> Self {
        SliceWriter { buf, pos: 0 }
    }

    /// Bytes written so far.
    #[inline]
    pub fn written(&self) -> usize {
        self.pos
    }
}

impl std::io::Write for SliceWriter<'_> {
    #[inline]
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    #[inline]
    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        let end = self.pos + data.len();
        match self.buf.get_mut(self.pos..end) {
            Some(dst) => {
                dst.copy_from_slice(data);
                self.pos = end;
                Ok(())
            }
            None => Err(std::io::ErrorKind::WriteZero.into()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
