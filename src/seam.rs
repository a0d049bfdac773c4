//! The seam between the faces and the backends: the cores each backend implements
//! ([`SendCore`], [`RecvCore`]: one per operation, each taking a [`Deadline`]), and what they
//! lend out ([`Grant`], [`Message`]). The shared-memory halves (`shm::channel`) and the
//! ipc-channel duplex (`ipc`) implement the cores; every public form of every surface is
//! written from them in `surface`. The cores are private to the crate, so the set is sealed.

use std::ops::{Deref, DerefMut};

use serde::Serialize;

use crate::error::{ChannelName, RecvError, SendError};
use crate::wait::Deadline;

/// The cores a backend implements: private to the crate, so the set is sealed (a type outside
/// it cannot have them, hence cannot be a [`Sender`](crate::Sender) or
/// [`Receiver`](crate::Receiver)).
pub(crate) mod core {
    use super::*;

    /// The sending cores: what each send form of a surface comes down to.
    pub trait SendCore {
        /// What [`reserve_until`](SendCore::reserve_until) lends out.
        type Grant<'a>: Grant
        where
            Self: 'a;

        /// Sends `bytes` as one message (in fragments past a frame), waiting for room until
        /// `deadline`.
        fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError>;

        /// Serialises `value` as JSON and sends it as one message, waiting until `deadline`.
        fn send_json_until<T: Serialize + ?Sized>(
            &mut self,
            value: &T,
            deadline: Deadline,
        ) -> Result<(), SendError>;

        /// Room for one message of `len` bytes, written in place, once there is room (until
        /// `deadline`).
        fn reserve_until(
            &mut self,
            len: usize,
            deadline: Deadline,
        ) -> Result<Self::Grant<'_>, SendError>;

        /// The messages of `batch` in order, as many as go before `deadline`; how many went.
        fn send_batch_until<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
            deadline: Deadline,
        ) -> Result<usize, SendError>;
    }

    /// The receiving cores: what each receive form of a surface comes down to.
    pub trait RecvCore {
        /// What [`recv_until`](RecvCore::recv_until) lends out.
        type Guard<'a>: Message
        where
            Self: 'a;

        /// The next whole message, lent out, waiting for it until `deadline`.
        fn recv_until(&mut self, deadline: Deadline) -> Result<Self::Guard<'_>, RecvError>;

        /// The next whole message into `buf` (replacing its contents); its length.
        fn recv_into_until(
            &mut self,
            buf: &mut Vec<u8>,
            deadline: Deadline,
        ) -> Result<usize, RecvError>;

        /// The next message (waiting for it until `deadline`) and those there now behind it,
        /// up to `max`, each handed to `f`; how many were handed.
        fn recv_batch_until<F: FnMut(&[u8])>(
            &mut self,
            max: usize,
            f: &mut F,
            deadline: Deadline,
        ) -> Result<usize, RecvError>;
    }

    /// Keeps [`Grant`] and [`Message`] to the crate's own types.
    pub trait Sealed {}
}

pub(crate) use self::core::{RecvCore, Sealed, SendCore};

/// Room for one message, written in place: [`WriteGrant`](crate::WriteGrant) on shared memory,
/// [`Reserved`](crate::Reserved) from an [`Endpoint`](crate::Endpoint). What
/// [`Sender::reserve`](crate::Sender::reserve) lends out.
pub trait Grant: DerefMut<Target = [u8]> + core::Sealed {
    /// Sends the first `used` bytes (at most the reserved length) as one message; dropped
    /// without a commit, the grant sends nothing. On shared memory it cannot fail (the frame
    /// is published in place); on the ipc-channel backend it reports what a send would.
    fn commit(self, used: usize) -> Result<(), SendError>;
}

/// A received message, lent out: [`ReadGuard`](crate::ReadGuard) on shared memory,
/// [`Received`](crate::Received) from an [`Endpoint`](crate::Endpoint). What
/// [`Receiver::recv`](crate::Receiver::recv) hands over. It derefs to the same bytes, at the same address, for as
/// long as it lives (which [`Value`](crate::Value) relies on).
pub trait Message: Deref<Target = [u8]> + core::Sealed {
    /// Decodes the message as JSON; the value may borrow from the message.
    fn json<'de, T: serde::Deserialize<'de>>(&'de self) -> Result<T, RecvError>;

    /// The name of the channel the message came through.
    fn channel(&self) -> &ChannelName;
}
