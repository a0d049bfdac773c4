//! The duplex's send and receive cores (the one place each message operation of
//! [`IpcDuplex`] is written), and what they lend out: [`IpcMessage`], a received message, and
//! [`IpcGrant`], a buffer to write a message in place.

use serde::Serialize;

use super::{IpcDuplex, BATCH_BYTES, BATCH_MESSAGES};
use crate::error::{ChannelName, RecvError, SendError};
use crate::seam::{Grant, Message, Sealed};
use crate::wait::{self, Deadline};

impl crate::seam::RecvCore for IpcDuplex {
    type Guard<'a> = IpcMessage<'a>;

    /// The core of every receive: the next message, lent out until the next call.
    fn recv_until(&mut self, deadline: Deadline) -> Result<IpcMessage<'_>, RecvError> {
        self.receive(deadline)?;
        Ok(IpcMessage {
            bytes: &self.inbox,
            channel: &self.name,
        })
    }

    /// The core of every receive into a buffer: the next message, which trades places with
    /// `buf` (it arrived in a buffer of its own).
    fn recv_into_until(
        &mut self,
        buf: &mut Vec<u8>,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        self.receive(deadline)?;
        std::mem::swap(buf, &mut self.inbox);
        Ok(buf.len())
    }

    /// The core of every batch receive: the next message (waiting for it until `deadline`)
    /// and those there now after it, up to `max`, each handed to `f`. Returns how many; an
    /// error fails the call only if it met the first message, else it ends the batch.
    ///
    /// A peer can keep messages coming for as long as it likes, so one call hands at most
    /// [`BATCH_MESSAGES`] messages, none after the first once they came to [`BATCH_BYTES`],
    /// and, with an instant for a deadline, none after the first once it has passed.
    fn recv_batch_until<F: FnMut(&[u8])>(
        &mut self,
        max: usize,
        f: &mut F,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        let mut bytes = 0;
        wait::in_steps(max.min(BATCH_MESSAGES), |read| {
            if read > 0
                && (bytes >= BATCH_BYTES
                    || matches!(deadline, Deadline::At(_)) && deadline.passed())
            {
                return Ok(0);
            }
            let msg = self.recv_until(if read == 0 { deadline } else { Deadline::Now })?;
            bytes += msg.len();
            f(&msg);
            Ok(1)
        })
    }
}

impl crate::seam::SendCore for IpcDuplex {
    type Grant<'a> = IpcGrant<'a>;

    /// The core of every send: one message, whole. Waits until `deadline` for the connector
    /// and for the lane to be free; a send with a deadline then hands the message to the lane,
    /// one without sends it on this thread.
    fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        self.ready_to_send(bytes.len(), deadline)?;
        self.send_ready(bytes, deadline)
    }

    /// The core of every JSON send: serialised into the duplex's buffer, then sent as
    /// [`send_until`](IpcDuplex::send_until) sends.
    fn send_json_until<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let result = match crate::json::encode(&mut out, value) {
            Ok(()) => self.send_until(&out, deadline),
            Err(source) => Err(SendError::Json {
                channel: self.name.clone(),
                source,
            }),
        };
        self.out = out;
        result
    }

    /// The core of every reservation: a buffer of `len` bytes of the duplex's, lent out once
    /// a message of that length may be sent (see [`send_until`](IpcDuplex::send_until));
    /// [`IpcGrant::commit`] sends it.
    fn reserve_until(&mut self, len: usize, deadline: Deadline) -> Result<IpcGrant<'_>, SendError> {
        self.ready_to_send(len, deadline)?;
        self.out.clear();
        self.out.resize(len, 0);
        Ok(IpcGrant {
            duplex: self,
            deadline,
        })
    }

    /// The core of every batch send: one message after another (this backend has no frames to
    /// publish together). Returns how many went out; an error fails the call only if it met
    /// the first message, else it ends the batch.
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

/// A buffer of an [`IpcDuplex`]'s, lent out by [`IpcDuplex::reserve_until`] to be written in
/// place and sent by [`commit`](IpcGrant::commit); dropped, it sends nothing.
pub(crate) struct IpcGrant<'a> {
    duplex: &'a mut IpcDuplex,
    deadline: Deadline,
}

impl IpcGrant<'_> {
    /// Sends the first `used` bytes (at most the grant's length) as one message: on this
    /// thread for a grant reserved without a deadline, else through the lane, which the
    /// reservation found free.
    pub(crate) fn commit(self, used: usize) -> Result<(), SendError> {
        let used = used.min(self.duplex.out.len());
        let out = std::mem::take(&mut self.duplex.out);
        let result = self.duplex.send_ready(&out[..used], self.deadline);
        self.duplex.out = out;
        result
    }
}

/// A received message, lent out until the next call: the duplex's buffer, and its name for
/// errors.
pub(crate) struct IpcMessage<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) channel: &'a ChannelName,
}

impl std::ops::Deref for IpcMessage<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

impl Sealed for IpcMessage<'_> {}

impl Message for IpcMessage<'_> {
    fn json<'de, T: serde::Deserialize<'de>>(&'de self) -> Result<T, RecvError> {
        crate::json::decode(self.bytes).map_err(|source| RecvError::Json {
            channel: self.channel.clone(),
            source,
        })
    }

    fn channel(&self) -> &ChannelName {
        self.channel
    }
}

impl Sealed for IpcGrant<'_> {}

impl Grant for IpcGrant<'_> {
    fn commit(self, used: usize) -> Result<(), SendError> {
        IpcGrant::commit(self, used)
    }
}

impl std::ops::Deref for IpcGrant<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.duplex.out
    }
}

impl std::ops::DerefMut for IpcGrant<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.duplex.out
    }
}
