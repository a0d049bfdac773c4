//! The receiving half: frames read in place, fragments reassembled.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::ring::{kind, Consumer, Frame, ReadGuard};
use crate::wait::Waiter;

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

impl RecvHalf {
    /// Largest message [`recv`](Channel::recv) reassembles.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Sets the largest message this half reassembles and publishes it, so that the peer's
    /// sends of longer messages fail at the peer with [`Error::TooLarge`]. A longer message
    /// already on its way when the limit drops is refused here as [`Error::Corrupt`].
    pub fn set_max_message(&mut self, max: usize) {
        self.max_message = max;
        self.shared.publish_max_message(max);
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// True while the peer endpoint is connected and its process runs.
    pub fn is_peer_connected(&mut self) -> bool {
        self.peer.state() == crate::layout::PEER_PRESENT && self.peer.check().is_ok()
    }

    /// The peer's process id, once it has connected.
    pub fn peer_pid(&mut self) -> Option<u32> {
        let _ = self.peer.check();
        self.peer.id.map(|id| id.pid)
    }

    /// Receives the next frame, waiting for it. The frame stays in the ring until the guard
    /// drops.
    ///
    /// Fails with [`Error::Disconnected`] once the peer closed and everything it sent was
    /// received, [`Error::PeerGone`] soon after the peer process dies (at once with `Block` on
    /// Linux, within a few milliseconds otherwise), and [`Error::Corrupt`] if the ring holds an
    /// invalid frame.
    #[inline]
    pub fn recv(&mut self) -> Result<ReadGuard<'_>> {
        self.recv_deadline(None)
    }

    /// Like [`recv`](Channel::recv), giving up with [`Error::Timeout`] after `timeout`, also
    /// while the fragments of a large message keep arriving (the part received is kept for the
    /// next call).
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<ReadGuard<'_>> {
        self.recv_deadline(Some(Instant::now() + timeout))
    }

    /// Receives the next frame if one is there: [`Error::Empty`] if not, [`Error::Disconnected`]
    /// or [`Error::PeerGone`] if none will come.
    ///
    /// A fragmented message is returned once its last fragment is there. One call takes at most
    /// a ring's worth of fragments; a longer message is put together over several calls, each
    /// returning [`Error::Empty`] until it is complete.
    #[inline]
    pub fn try_recv(&mut self) -> Result<ReadGuard<'_>> {
        self.next_message(None)
    }

    #[inline]
    fn recv_deadline(&mut self, deadline: Option<Instant>) -> Result<ReadGuard<'_>> {
        self.next_message(Some(deadline))
    }

    /// The next whole message. `wait`: `None` to return [`Error::Empty`] at once (after a
    /// throttled look at the peer), `Some(deadline)` to wait for it.
    ///
    /// A peer can keep fragments coming for as long as it likes, so the loop never trusts the
    /// stream to end: without a deadline (`try_recv`) it takes at most one ring's worth of
    /// fragments per call and then reports [`Error::Empty`]; with one it looks at the clock after
    /// every fragment. Either way the message under way is kept and the next call goes on with it.
    #[inline]
    fn next_message(&mut self, wait: Option<Option<Instant>>) -> Result<ReadGuard<'_>> {
        let mut budget = self.rx.capacity() as u64;
        loop {
            match self.rx.next_frame() {
                Ok(frame) if frame.kind() == kind::DATA && self.assembling == Assembling::Idle => {
                    return Ok(self.rx.guard(frame))
                }
                Ok(frame) => {
                    if self.assembling == Assembling::Discarding
                        && matches!(frame.kind(), kind::DATA | kind::FRAG_FIRST)
                    {
                        // The refused message is over: its sender went on to the next one.
                        self.assembling = Assembling::Idle;
                        if frame.kind() == kind::DATA {
                            return Ok(self.rx.guard(frame));
                        }
                    }
                    let size = frame.size();
                    if self.absorb_fragment(frame)? {
                        return Ok(ReadGuard::assembled(&self.assembly));
                    }
                    #[cfg(test)]
                    super::tests::fragment_taken();
                    match wait {
                        None => {
                            budget = budget.saturating_sub(size);
                            if budget == 0 {
                                return Err(Error::Empty);
                            }
                        }
                        Some(Some(deadline)) if Instant::now() >= deadline => {
                            return Err(Error::Timeout)
                        }
                        Some(_) => {}
                    }
                }
                Err(Error::Empty) => match wait {
                    Some(deadline) => self.wait_data(deadline)?,
                    None => {
                        self.peer.check_throttled()?;
                        return Err(Error::Empty);
                    }
                },
                Err(e) => return Err(e),
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
    fn absorb_fragment(&mut self, frame: Frame) -> Result<bool> {
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
                    let fragmented = |t: usize| t > max_frame && t <= self.max_message;
                    match usize::try_from(total) {
                        Ok(t) if fragmented(t) && !body.is_empty() && body.len() <= t => {
                            // Room for what arrived, not for what was announced: the total is
                            // the peer's word, the bytes are real.
                            self.assembly.clear();
                            append(&mut self.assembly, body, t).map(|()| {
                                self.assembling = Collecting(t);
                                false
                            })
                        }
                        _ => Err(Error::corrupt(
                            self.shared.name.as_str(),
                            format!(
                                "fragmented message of {total} bytes starting with {} (fragmented \
                                 messages are longer than a frame, {}, and at most {})",
                                body.len(),
                                max_frame,
                                self.max_message
                            ),
                        )),
                    }
                }
                None => Err(Error::corrupt(
                    self.shared.name.as_str(),
                    "first fragment shorter than its length prefix",
                )),
            },
            (Collecting(_), kind::FRAG_MORE | kind::FRAG_LAST) if guard.is_empty() => {
                // The sender never makes one; a stream of them would be work without progress.
                Err(Error::corrupt(self.shared.name.as_str(), "empty fragment"))
            }
            (Collecting(total), k @ (kind::FRAG_MORE | kind::FRAG_LAST)) => {
                if self.assembly.len() + guard.len() > total {
                    Err(Error::corrupt(
                        self.shared.name.as_str(),
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
                            Err(Error::corrupt(
                                self.shared.name.as_str(),
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
            (state, k) => Err(Error::corrupt(
                self.shared.name.as_str(),
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

    /// Receives one message (of any size) and copies it into `buf`, replacing its contents.
    /// Returns the length. `buf` keeps its capacity, so a caller that reuses it allocates only
    /// when a message is larger than any before.
    ///
    /// A message that arrived in fragments is handed over without a further copy: `buf` and the
    /// reassembly buffer trade places, and the channel keeps `buf`'s old allocation for the next
    /// one.
    pub fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize> {
        let msg = self.recv()?;
        if !msg.is_assembled() {
            buf.clear();
            buf.extend_from_slice(&msg);
            return Ok(buf.len());
        }
        drop(msg);
        std::mem::swap(buf, &mut self.assembly);
        Ok(buf.len())
    }

    #[inline]
    fn wait_data(&mut self, deadline: Option<Instant>) -> Result<()> {
        let rx = &self.rx;
        let result =
            self.wait
                .wait_until(rx.data_cell(), deadline, || rx.has_data(), &mut self.peer);
        match result {
            Err(e @ (Error::Disconnected { .. } | Error::PeerGone { .. })) => {
                // Frames published before the close are visible now (Acquire in `state`).
                if rx.has_data() {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            other => other,
        }
    }

    /// Receives one message and decodes it as JSON into an owned value. To borrow string
    /// fields from the message instead, use [`recv`](Channel::recv) and [`ReadGuard::json`].
    /// A message that is not valid JSON for `T` is [`Error::Json`]; the channel keeps working.
    pub fn recv_json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T> {
        let guard = self.recv()?;
        guard.json()
    }

    /// Like [`recv_json`](RecvHalf::recv_json), giving up with [`Error::Timeout`] after
    /// `timeout`.
    pub fn recv_json_timeout<T: serde::de::DeserializeOwned>(
        &mut self,
        timeout: Duration,
    ) -> Result<T> {
        let guard = self.recv_timeout(timeout)?;
        guard.json()
    }
}

// SAFETY: as for `SendHalf`: the pointers in `rx` and `peer` point into the mapping that the
// half's own `shared` field keeps alive, and the half is the only user of its ring end.
unsafe impl Send for RecvHalf {}

/// Appends `bytes` to a reassembly buffer for a message of `total` bytes. The buffer grows by
/// doubling, never past `total`, and an allocation that fails is an error, not an abort.
fn append(buf: &mut Vec<u8>, bytes: &[u8], total: usize) -> Result<()> {
    let needed = buf.len() + bytes.len();
    if needed > buf.capacity() {
        let target = needed
            .max(buf.capacity().saturating_mul(2))
            .min(total.max(needed));
        buf.try_reserve_exact(target - buf.len()).map_err(|_| {
            Error::Io(std::io::Error::new(
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
