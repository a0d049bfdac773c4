//! The sending half: frames, fragments and JSON written in place.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::layout::{PEER_CLOSED, PEER_PRESENT};
use crate::ring::{kind, Producer, WriteGrant};
use crate::wait::Waiter;

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
    /// A fragmented message was cut short (a send timed out after its first fragment went
    /// out): the next frame must tell the receiver to drop what it has of it.
    pub(super) cut: bool,
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
    /// closed, `TooLarge` past our own limit or the one the peer published.
    #[inline]
    fn send_allowed(&self, len: usize) -> Result<()> {
        let state = self.peer.state();
        if state == PEER_CLOSED {
            return Err(self.peer.disconnected());
        }
        let max = if state == PEER_PRESENT {
            self.max_message.min(self.peer_limit())
        } else {
            // No limit published yet: the peer has not connected.
            self.max_message
        };
        if len > max {
            return Err(Error::TooLarge { len, max });
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

    /// Reserves room for a frame of `len` bytes (at most [`max_frame`](Channel::max_frame)),
    /// waiting for the peer to make room if needed.
    pub fn reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.reserve_kind(len, kind::DATA, None)
    }

    /// Reserves room for a frame of `len` bytes if there is room now ([`Error::Full`] if not).
    pub fn try_reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.send_allowed(len)?;
        if self.cut {
            self.end_cut_message(None)?;
        }
        self.tx.try_reserve(len)
    }

    /// Sends the frame that tells the receiver to drop the fragments it has of a message cut
    /// short. `wait`: `None` to fail with [`Error::Full`] if there is no room now, else the
    /// deadline to wait for room until.
    #[cold]
    fn end_cut_message(&mut self, wait: Option<Option<Instant>>) -> Result<()> {
        let start = loop {
            match self.tx.room_for(0)? {
                Some(start) => break start,
                None => match wait {
                    Some(deadline) => self.wait_room(0, deadline)?,
                    None => return Err(Error::Full),
                },
            }
        };
        self.tx.grant_at(start, 0, kind::FRAG_ABORT).commit(0);
        self.cut = false;
        Ok(())
    }

    #[inline]
    fn reserve_kind(
        &mut self,
        len: usize,
        kind: u8,
        deadline: Option<Instant>,
    ) -> Result<WriteGrant<'_>> {
        self.send_allowed(len)?;
        if self.cut {
            self.end_cut_message(Some(deadline))?;
        }
        if len > self.tx.max_len() {
            return Err(Error::TooLarge {
                len,
                max: self.tx.max_len(),
            });
        }
        let start = loop {
            match self.tx.room_for(len)? {
                Some(start) => break start,
                None => self.wait_room(len, deadline)?,
            }
        };
        Ok(self.tx.grant_at(start, len, kind))
    }

    #[inline]
    fn wait_room(&mut self, len: usize, deadline: Option<Instant>) -> Result<()> {
        let tx = &mut self.tx;
        let cell = tx.space_cell() as *const _;
        // SAFETY: the cell lives in the mapping, not in `tx`, so the reference stays valid while
        // `tx` is borrowed mutably by the closure below.
        let cell = unsafe { &*cell };
        self.wait.wait_until(
            cell,
            deadline,
            // A corrupt index makes `has_room` fail; report "ready" so the caller's reserve
            // returns that error.
            || tx.has_room(len).unwrap_or(true),
            &mut self.peer,
        )
    }

    /// Sends one message, waiting for room.
    ///
    /// A message up to [`max_frame`](Channel::max_frame) bytes is one frame; a larger one, up to
    /// [`max_message`](SendHalf::max_message), is streamed in fragments as the peer reads them.
    /// Fails with [`Error::TooLarge`] past this side's `max_message` or the one the peer
    /// published (before anything is written; the channel keeps working),
    /// [`Error::Disconnected`] once the peer closed, and [`Error::PeerGone`] if the peer died
    /// while we waited for room.
    #[inline]
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.send_deadline(bytes, None)
    }

    /// Sends one frame if there is room now ([`Error::Full`] if not). Never fragments.
    #[inline]
    pub fn try_send(&mut self, bytes: &[u8]) -> Result<()> {
        self.send_allowed(bytes.len())?;
        if self.cut {
            self.end_cut_message(None)?;
        }
        self.tx.try_send(bytes)
    }

    /// Like [`send`](Channel::send), giving up with [`Error::Timeout`] after `timeout`. A
    /// fragmented message that times out part-way is withdrawn: the receiver drops the part it
    /// got (it never sees the message), and the next send goes through as usual.
    pub fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<()> {
        self.send_deadline(bytes, Some(Instant::now() + timeout))
    }

    #[inline]
    fn send_deadline(&mut self, bytes: &[u8], deadline: Option<Instant>) -> Result<()> {
        if bytes.len() <= self.tx.max_len() {
            let mut grant = self.reserve_kind(bytes.len(), kind::DATA, deadline)?;
            grant.copy_from_slice(bytes);
            grant.commit(bytes.len());
            Ok(())
        } else {
            self.send_fragments(bytes, deadline)
        }
    }

    #[inline(never)]
    fn send_fragments(&mut self, bytes: &[u8], deadline: Option<Instant>) -> Result<()> {
        self.send_allowed(bytes.len())?;
        let chunk = self.tx.max_len();
        let mut grant = self.reserve_kind(chunk, kind::FRAG_FIRST, deadline)?;
        let (total, rest) = grant.split_at_mut(8);
        total.copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        let mut sent = rest.len();
        rest.copy_from_slice(&bytes[..sent]);
        grant.commit(chunk);
        while sent < bytes.len() {
            let n = chunk.min(bytes.len() - sent);
            let kind = if sent + n == bytes.len() {
                kind::FRAG_LAST
            } else {
                kind::FRAG_MORE
            };
            let mut grant = match self.reserve_kind(n, kind, deadline) {
                Ok(grant) => grant,
                Err(e) => {
                    self.cut = true;
                    return Err(e);
                }
            };
            grant.copy_from_slice(&bytes[sent..sent + n]);
            grant.commit(n);
            sent += n;
        }
        Ok(())
    }

    /// Serialises `value` as JSON straight into the ring: no intermediate buffer.
    ///
    /// The value is written into a grant sized from earlier messages (twice the longest JSON
    /// text sent so far that fit one frame). A value that does not fit it is serialised once
    /// more, into a buffer the half keeps, and sent from there at its exact size: in one frame,
    /// or, when it is larger than one frame ([`max_frame`](Channel::max_frame)), in fragments
    /// like any long message; after such a value the next one goes straight to the buffer
    /// until one fits a frame again. Only JSON longer than
    /// [`max_message`](SendHalf::max_message) fails, with [`Error::TooLarge`]. A value that
    /// cannot be serialised fails with [`Error::Json`] and sends nothing.
    #[inline]
    pub fn send_json<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.send_json_deadline(value, None)
    }

    /// Like [`send_json`](SendHalf::send_json), giving up with [`Error::Timeout`] after
    /// `timeout`. A value sent in fragments that times out part-way is withdrawn, as with
    /// [`send_timeout`](SendHalf::send_timeout).
    pub fn send_json_timeout<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        timeout: Duration,
    ) -> Result<()> {
        self.send_json_deadline(value, Some(Instant::now() + timeout))
    }

    #[inline]
    fn send_json_deadline<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let max = self.tx.max_len().min(self.max_message());
        if self.json_hint != JSON_BUFFERED {
            let mut grant = self.reserve_kind(self.json_hint.min(max), kind::DATA, deadline)?;
            let mut out = SliceWriter::new(&mut grant);
            match serde_json::to_writer(&mut out, value) {
                Ok(()) => {
                    let used = out.written();
                    grant.commit(used);
                    self.learn_json_len(used, max);
                    return Ok(());
                }
                // Too long for the grant, which is dropped: it published nothing.
                Err(e) if e.is_io() => {}
                Err(e) => return Err(Error::Json(e)),
            }
        }
        self.send_json_buffered(value, deadline)
    }

    /// Serialises `value` into the half's buffer and sends it from there: its length is known
    /// before any room is reserved.
    #[inline(never)]
    fn send_json_buffered<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        let result = serde_json::to_writer(&mut buf, value)
            .map_err(Error::from)
            .and_then(|()| {
                let max = self.tx.max_len().min(self.max_message());
                if buf.len() <= max {
                    self.learn_json_len(buf.len(), max);
                } else {
                    self.json_hint = JSON_BUFFERED;
                }
                self.send_deadline(&buf, deadline)
            });
        self.scratch = buf;
        result
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
