//! The one method set: every message surface ([`Channel`](crate::Channel), its halves,
//! [`Endpoint`](crate::Endpoint) on either backend, an accepted
//! [`Connection`](crate::Connection), and the async channel) offers the same operations under
//! the same names, with the same meaning and the same documentation.
//!
//! | | blocking | now | deadline |
//! | --- | --- | --- | --- |
//! | send bytes | `send` | `try_send` | `send_timeout` |
//! | send JSON | `send_json` | `try_send_json` | `send_json_timeout` |
//! | send a plain value | `send_value` | `try_send_value` | `send_value_timeout` |
//! | write in place | `reserve` | `try_reserve` | `reserve_timeout` |
//! | send many | `send_batch` | `try_send_batch` | `send_batch_timeout` |
//! | receive in place | `recv` | `try_recv` | `recv_timeout` |
//! | receive into a buffer | `recv_into` | `try_recv_into` | `recv_into_timeout` |
//! | receive JSON | `recv_json` | `try_recv_json` | `recv_json_timeout` |
//! | receive a plain value | `recv_value` | `try_recv_value` | `recv_value_timeout` |
//! | receive many | `recv_batch` | `try_recv_batch` | `recv_batch_timeout` |
//!
//! The set is a type: a backend implements the crate's two core traits, [`SendCore`] and
//! [`RecvCore`] (one core per operation, each taking a [`Deadline`]: `Now`, `At(instant)` or
//! `Never`), once for the shared-memory halves and once for the ipc-channel duplex; every
//! surface implements them by handing each core to what it holds, in one impl. The public
//! traits [`Sender`] and [`Receiver`] write every form from the cores, once, as provided
//! methods, for every type that has the cores (and for generic code: `fn f(tx: &mut impl
//! Sender)`). Each blocking surface also has the forms as inherent methods, written by
//! [`send_methods!`] and [`recv_methods!`] as calls of the trait's (so that they need no
//! import and rustdoc shows their documentation and an example on each type): a surface
//! without the cores fails to compile there, naming the trait it lacks. The async surface's
//! forms, which await, are written by `async_methods!` from its async cores. The documentation
//! text of each operation is in the `doc_*` macros, shared by all of them.

#[macro_use]
mod docs;
#[macro_use]
mod forms;
mod channel;
pub(crate) mod connect;
pub(crate) mod endpoint;
#[cfg(feature = "tokio")]
pub mod tokio;
mod topic;
mod value;

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::error::{RecvError, SendError};
use crate::wait::Deadline;

pub use value::Value;

use crate::seam::{Message, RecvCore, SendCore};

/// Every send form, for every type with the sending cores: [`Channel`](crate::Channel),
/// [`SendHalf`](crate::SendHalf), [`Endpoint`](crate::Endpoint) and
/// [`Connection`](crate::Connection). Each also has these as inherent methods (no import
/// needed); the trait is for code generic over the surface:
///
/// ```
/// use shmlink::{Channel, Config, Endpoint, Sender, WaitStrategy};
///
/// fn greet(tx: &mut impl Sender) -> Result<(), shmlink::SendError> {
///     tx.send(b"hello")?;
///     tx.send_json(&[1, 2, 3])
/// }
///
/// let name = format!("doc-sender-{}", std::process::id());
/// let mut tx = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
/// let mut rx = Endpoint::connect(&name, WaitStrategy::Spin)?;
/// greet(&mut tx)?;
/// assert_eq!(&*rx.recv()?, b"hello");
/// assert_eq!(rx.recv_json::<Vec<u32>>()?, [1, 2, 3]);
/// Ok::<(), shmlink::Error>(())
/// ```
pub trait Sender: SendCore {
    #[doc = doc_send!()]
    #[inline]
    fn send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        self.send_until(bytes, Deadline::Never)
    }

    #[doc = doc_try_send!()]
    #[inline]
    fn try_send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        self.send_until(bytes, Deadline::Now)
    }

    #[doc = doc_send_timeout!()]
    fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), SendError> {
        self.send_until(bytes, Deadline::after(timeout))
    }

    #[doc = doc_send_json!()]
    #[inline]
    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SendError> {
        self.send_json_until(value, Deadline::Never)
    }

    #[doc = doc_try_send_json!()]
    fn try_send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), SendError> {
        self.send_json_until(value, Deadline::Now)
    }

    #[doc = doc_send_json_timeout!()]
    fn send_json_timeout<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        timeout: Duration,
    ) -> Result<(), SendError> {
        self.send_json_until(value, Deadline::after(timeout))
    }

    #[doc = doc_send_value!()]
    #[inline]
    fn send_value<T: IntoBytes + Immutable + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), SendError> {
        self.send_until(value.as_bytes(), Deadline::Never)
    }

    #[doc = doc_try_send_value!()]
    #[inline]
    fn try_send_value<T: IntoBytes + Immutable + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), SendError> {
        self.send_until(value.as_bytes(), Deadline::Now)
    }

    #[doc = doc_send_value_timeout!()]
    fn send_value_timeout<T: IntoBytes + Immutable + ?Sized>(
        &mut self,
        value: &T,
        timeout: Duration,
    ) -> Result<(), SendError> {
        self.send_until(value.as_bytes(), Deadline::after(timeout))
    }

    #[doc = doc_reserve!()]
    #[inline]
    fn reserve(&mut self, len: usize) -> Result<Self::Grant<'_>, SendError> {
        self.reserve_until(len, Deadline::Never)
    }

    #[doc = doc_try_reserve!()]
    #[inline]
    fn try_reserve(&mut self, len: usize) -> Result<Self::Grant<'_>, SendError> {
        self.reserve_until(len, Deadline::Now)
    }

    #[doc = doc_reserve_timeout!()]
    fn reserve_timeout(
        &mut self,
        len: usize,
        timeout: Duration,
    ) -> Result<Self::Grant<'_>, SendError> {
        self.reserve_until(len, Deadline::after(timeout))
    }

    #[doc = doc_send_batch!()]
    #[inline]
    fn send_batch<B: AsRef<[u8]>>(&mut self, batch: &[B]) -> Result<usize, SendError> {
        self.send_batch_until(batch, Deadline::Never)
    }

    #[doc = doc_try_send_batch!()]
    #[inline]
    fn try_send_batch<B: AsRef<[u8]>>(&mut self, batch: &[B]) -> Result<usize, SendError> {
        self.send_batch_until(batch, Deadline::Now)
    }

    #[doc = doc_send_batch_timeout!()]
    fn send_batch_timeout<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        timeout: Duration,
    ) -> Result<usize, SendError> {
        self.send_batch_until(batch, Deadline::after(timeout))
    }
}

impl<S: SendCore + ?Sized> Sender for S {}

/// Every receive form, for every type with the receiving cores: [`Channel`](crate::Channel),
/// [`RecvHalf`](crate::RecvHalf), [`Endpoint`](crate::Endpoint) and
/// [`Connection`](crate::Connection). Each also has these as inherent methods (no import
/// needed); the trait is for code generic over the surface:
///
/// ```
/// use shmlink::{Channel, Config, Endpoint, Receiver, WaitStrategy};
///
/// fn total(rx: &mut impl Receiver) -> Result<u64, shmlink::RecvError> {
///     let mut sum = 0;
///     rx.try_recv_batch(usize::MAX, |msg| sum += msg.len() as u64)?;
///     Ok(sum)
/// }
///
/// let name = format!("doc-receiver-{}", std::process::id());
/// let mut tx = Endpoint::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
/// let mut rx = Channel::connect(&name, WaitStrategy::Spin)?;
/// tx.send(b"four")?;
/// tx.send(b"two")?;
/// assert_eq!(total(&mut rx)?, 7);
/// Ok::<(), shmlink::Error>(())
/// ```
pub trait Receiver: RecvCore {
    #[doc = doc_recv!()]
    #[inline]
    fn recv(&mut self) -> Result<Self::Guard<'_>, RecvError> {
        self.recv_until(Deadline::Never)
    }

    #[doc = doc_try_recv!()]
    #[inline]
    fn try_recv(&mut self) -> Result<Self::Guard<'_>, RecvError> {
        self.recv_until(Deadline::Now)
    }

    #[doc = doc_recv_timeout!()]
    #[inline]
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Self::Guard<'_>, RecvError> {
        self.recv_until(Deadline::after(timeout))
    }

    #[doc = doc_recv_into!()]
    #[inline]
    fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecvError> {
        self.recv_into_until(buf, Deadline::Never)
    }

    #[doc = doc_try_recv_into!()]
    #[inline]
    fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecvError> {
        self.recv_into_until(buf, Deadline::Now)
    }

    #[doc = doc_recv_into_timeout!()]
    fn recv_into_timeout(
        &mut self,
        buf: &mut Vec<u8>,
        timeout: Duration,
    ) -> Result<usize, RecvError> {
        self.recv_into_until(buf, Deadline::after(timeout))
    }

    #[doc = doc_recv_json!()]
    fn recv_json<T: DeserializeOwned>(&mut self) -> Result<T, RecvError> {
        self.recv_until(Deadline::Never)?.json()
    }

    #[doc = doc_try_recv_json!()]
    fn try_recv_json<T: DeserializeOwned>(&mut self) -> Result<T, RecvError> {
        self.recv_until(Deadline::Now)?.json()
    }

    #[doc = doc_recv_json_timeout!()]
    fn recv_json_timeout<T: DeserializeOwned>(
        &mut self,
        timeout: Duration,
    ) -> Result<T, RecvError> {
        self.recv_until(Deadline::after(timeout))?.json()
    }

    #[doc = doc_recv_value!()]
    #[inline]
    fn recv_value<T: FromBytes + KnownLayout + Immutable>(
        &mut self,
    ) -> Result<Value<Self::Guard<'_>, T>, RecvError> {
        Value::new(self.recv_until(Deadline::Never)?)
    }

    #[doc = doc_try_recv_value!()]
    #[inline]
    fn try_recv_value<T: FromBytes + KnownLayout + Immutable>(
        &mut self,
    ) -> Result<Value<Self::Guard<'_>, T>, RecvError> {
        Value::new(self.recv_until(Deadline::Now)?)
    }

    #[doc = doc_recv_value_timeout!()]
    fn recv_value_timeout<T: FromBytes + KnownLayout + Immutable>(
        &mut self,
        timeout: Duration,
    ) -> Result<Value<Self::Guard<'_>, T>, RecvError> {
        Value::new(self.recv_until(Deadline::after(timeout))?)
    }

    #[doc = doc_recv_batch!()]
    #[inline]
    fn recv_batch(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> Result<usize, RecvError> {
        self.recv_batch_until(max, &mut f, Deadline::Never)
    }

    #[doc = doc_try_recv_batch!()]
    #[inline]
    fn try_recv_batch(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> Result<usize, RecvError> {
        self.recv_batch_until(max, &mut f, Deadline::Now)
    }

    #[doc = doc_recv_batch_timeout!()]
    fn recv_batch_timeout(
        &mut self,
        max: usize,
        timeout: Duration,
        mut f: impl FnMut(&[u8]),
    ) -> Result<usize, RecvError> {
        self.recv_batch_until(max, &mut f, Deadline::after(timeout))
    }
}

impl<R: RecvCore + ?Sized> Receiver for R {}
