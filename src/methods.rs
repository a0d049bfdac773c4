//! The one method set: every message surface ([`Channel`](crate::Channel), its halves,
//! [`Endpoint`](crate::Endpoint) on either backend, and the async channel) offers the same
//! operations under the same names, with the same meaning and the same documentation.
//!
//! | | blocking | now | deadline |
//! | --- | --- | --- | --- |
//! | send bytes | `send` | `try_send` | `send_timeout` |
//! | send JSON | `send_json` | `try_send_json` | `send_json_timeout` |
//! | write in place | `reserve` | `try_reserve` | `reserve_timeout` |
//! | receive in place | `recv` | `try_recv` | `recv_timeout` |
//! | receive into a buffer | `recv_into` | `try_recv_into` | `recv_into_timeout` |
//! | receive JSON | `recv_json` | `try_recv_json` | `recv_json_timeout` |
//! | send many | `send_batch` | `try_send_batch` | `send_batch_timeout` |
//! | receive many | `recv_batch` | `try_recv_batch` | `recv_batch_timeout` |
//!
//! Each surface implements one core per operation, taking a [`Deadline`](crate::wait::Deadline)
//! (`Now`, `At(instant)` or `Never`): `send_until`, `send_json_until`, `reserve_until`,
//! `send_batch_until`, `recv_until`, `recv_into_until`, `recv_batch_until`. The macros here write the public forms from those cores,
//! once; the documentation text is in the `doc_*` macros, shared by the blocking and the async
//! forms.

/// The documentation of each operation, shared by every surface (blocking and async).
macro_rules! doc_send {
    () => {
        "Sends one message, waiting for room for as long as it takes.\n\n\
         A message of up to `max_frame` bytes travels as one frame; a longer one, up to \
         `max_message`, in fragments as the peer reads them, and the receiver gets it whole. \
         Fails with [`SendError::TooLarge`](crate::SendError::TooLarge) past the receiver's \
         limit or this side's (before anything is written; the channel keeps working), \
         [`SendError::Disconnected`](crate::SendError::Disconnected) once the peer closed, and \
         [`SendError::PeerGone`](crate::SendError::PeerGone) once its process is known dead, \
         whether or not the ring has room: on shared memory the process's death watcher hears \
         of the death at once (through the peer's pidfd; a peer that recorded another process \
         is found by its look at every peer's lock, within about a second) and every send form \
         looks at what it heard, one load per send; where no watcher covers the peer (no \
         pidfds, a peer in another pid namespace) only a send that waits for room finds out. \
         On the ipc-channel backend the first send to a dead peer fails (a send with a \
         deadline, handed to the lane, may be accepted first and the next one fail), and every \
         send after it."
    };
}

macro_rules! doc_try_send {
    () => {
        "Sends one message if it can go out whole now, else \
         [`SendError::Full`](crate::SendError::Full), with nothing sent.\n\n\
         A message longer than one frame goes only if the ring has room for all its fragments \
         now (one that needs more than about half the ring may have to wait until the peer \
         has read and moved on: use `send` or `send_timeout` for those); one that could never \
         fit the ring at once is [`SendError::TooLarge`](crate::SendError::TooLarge)."
    };
}

macro_rules! doc_send_timeout {
    () => {
        "Like `send`, giving up with [`SendError::Timeout`](crate::SendError::Timeout) once \
         `timeout` has passed.\n\n\
         A message sent in fragments that times out part-way is withdrawn: the receiver drops \
         the part it got and never sees the message, and the next send goes through as usual."
    };
}

macro_rules! doc_send_json {
    () => {
        "Serialises `value` as JSON and sends it as one message, waiting for room.\n\n\
         On shared memory the text is written straight into the ring, in a grant sized from \
         earlier messages; a value that does not fit it is serialised again into a buffer the \
         endpoint keeps and sent from there, in fragments if it is longer than a frame. Values \
         of any size up to `max_message` go through. A value that cannot be serialised fails \
         with [`SendError::Json`](crate::SendError::Json) and sends nothing."
    };
}

macro_rules! doc_try_send_json {
    () => {
        "Like `send_json`, if the message can go out whole now (see `try_send`), else \
         [`SendError::Full`](crate::SendError::Full), with nothing sent."
    };
}

macro_rules! doc_send_json_timeout {
    () => {
        "Like `send_json`, giving up with [`SendError::Timeout`](crate::SendError::Timeout) \
         once `timeout` has passed; a value sent in fragments that times out part-way is \
         withdrawn, as with `send_timeout`."
    };
}

macro_rules! doc_reserve {
    () => {
        "Reserves room for a message of `len` bytes (at most `max_frame`), waiting for it, and \
         lends it out to be written in place; `commit(used)` sends the first `used` bytes as \
         one message, and a grant dropped without a commit sends nothing.\n\n\
         On shared memory the grant is the frame itself, in the ring; on the ipc-channel \
         backend it is a buffer of the endpoint's that the commit sends. Fails with \
         [`SendError::TooLarge`](crate::SendError::TooLarge) for a `len` past one frame or the \
         receiver's limit."
    };
}

macro_rules! doc_try_reserve {
    () => {
        "Like `reserve`, if there is room now, else [`SendError::Full`](crate::SendError::Full)."
    };
}

macro_rules! doc_reserve_timeout {
    () => {
        "Like `reserve`, giving up with [`SendError::Timeout`](crate::SendError::Timeout) once \
         `timeout` has passed."
    };
}

macro_rules! doc_recv {
    () => {
        "Receives the next message, waiting for it for as long as it takes, and lends it out: \
         the guard derefs to the bytes (on shared memory, read in place in the ring, which \
         the guard releases when it drops).\n\n\
         A message that came in fragments is handed over whole, reassembled. Fails with \
         [`RecvError::Disconnected`](crate::RecvError::Disconnected) once the peer closed and \
         everything it sent has been received, \
         [`RecvError::PeerGone`](crate::RecvError::PeerGone) soon after its process died, and \
         [`RecvError::Corrupt`](crate::RecvError::Corrupt) if the ring holds something that is \
         not a valid message."
    };
}

macro_rules! doc_try_recv {
    () => {
        "Receives the next message if a whole one is there now, else \
         [`RecvError::Empty`](crate::RecvError::Empty).\n\n\
         One call takes at most a ring's worth of fragments of a long message; the part \
         received is kept, and a later call hands the message over once it is complete."
    };
}

macro_rules! doc_recv_timeout {
    () => {
        "Like `recv`, giving up with [`RecvError::Timeout`](crate::RecvError::Timeout) once \
         `timeout` has passed (also while the fragments of a long message keep arriving: the \
         part received is kept for the next call)."
    };
}

macro_rules! doc_recv_into {
    () => {
        "Receives the next message into `buf`, replacing its contents, and returns its length, \
         waiting for it.\n\n\
         `buf` keeps its capacity, so a caller that reuses it allocates only for a message \
         longer than any before. A message that was reassembled (or, on the ipc-channel \
         backend, received into a buffer of its own) trades places with `buf` instead of being \
         copied."
    };
}

macro_rules! doc_try_recv_into {
    () => {
        "Like `recv_into`, if a whole message is there now (see `try_recv`), else \
         [`RecvError::Empty`](crate::RecvError::Empty)."
    };
}

macro_rules! doc_recv_into_timeout {
    () => {
        "Like `recv_into`, giving up with [`RecvError::Timeout`](crate::RecvError::Timeout) \
         once `timeout` has passed."
    };
}

macro_rules! doc_recv_json {
    () => {
        "Receives the next message and decodes it as JSON into an owned value, waiting for \
         it.\n\n\
         To borrow string fields from the message instead, `recv` it and decode it with the \
         guard's `json`. A message that is not valid JSON for `T` is \
         [`RecvError::Json`](crate::RecvError::Json) (the message is consumed; the channel \
         keeps working)."
    };
}

macro_rules! doc_try_recv_json {
    () => {
        "Like `recv_json`, if a whole message is there now (see `try_recv`), else \
         [`RecvError::Empty`](crate::RecvError::Empty)."
    };
}

macro_rules! doc_recv_json_timeout {
    () => {
        "Like `recv_json`, giving up with [`RecvError::Timeout`](crate::RecvError::Timeout) \
         once `timeout` has passed."
    };
}

macro_rules! doc_send_batch {
    () => {
        "Sends the messages of `batch` in order, waiting for room for as long as it takes, and \
         returns how many went out.\n\n\
         Each message travels as `send` sends it and is received on its own (by `recv`, or \
         many at a time by `recv_batch`). On shared memory the messages of up to a frame are \
         written as many at a time as the ring has room for and published together, with one \
         release and one look at whether the receiver sleeps for the lot where `send` takes \
         one per message: the way to stream small messages fast. The count is the whole \
         batch unless a message could not go after others had (the peer closed, its process \
         died, the message is too large): the count then says which one, and the next call, \
         starting with it, returns the error. A call fails only when its first message did \
         not go."
    };
}

macro_rules! doc_try_send_batch {
    () => {
        "Like `send_batch`, for the messages that can go out now (one longer than a frame only \
         whole, as with `try_send`): [`SendError::Full`](crate::SendError::Full) when not even \
         the first can."
    };
}

macro_rules! doc_send_batch_timeout {
    () => {
        "Like `send_batch`, stopping once `timeout` has passed: the count says how many went \
         out, and [`SendError::Timeout`](crate::SendError::Timeout) is returned when not even \
         the first did."
    };
}

macro_rules! doc_recv_batch {
    () => {
        "Receives the next message, waiting for it for as long as it takes, then the messages \
         that are there now behind it, up to `max` in all; hands each to `f`, in order, and \
         returns how many it handed.\n\n\
         On shared memory the messages are read in place and their room goes back to the \
         sender in batches, not message by message: the way to drain a stream of small \
         messages fast. A message that came in fragments is handed over whole. `f` borrows \
         each message for its call only; the bytes of a frame read in place are in memory the \
         peer can write, so decode JSON from a copy (as `recv_json` does). An error met after \
         the first message ends the batch and the next call returns it: a call fails only when \
         it handed nothing. A `max` of 0 returns 0 at once.\n\n\
         One call does bounded work whatever `max` is, so `usize::MAX` is safe against a \
         sender that never lets the channel run empty: on shared memory it takes, after the \
         first message, no more once it has read a ring's capacity of bytes (about a ring's \
         worth of messages); on the ipc-channel backend at most 1024 messages, and none more \
         once they came to 1 MiB. The deadline forms also stop handing messages once their \
         deadline has passed (looked at every 64 messages on shared memory, at every message \
         on the ipc-channel backend); the async forms hand over one such call's worth per \
         operation and take a unit of the task's tokio budget per message handed, so a task \
         that drains a busy channel yields to the other tasks of its thread."
    };
}

macro_rules! doc_try_recv_batch {
    () => {
        "Like `recv_batch`, without waiting for the first message: \
         [`RecvError::Empty`](crate::RecvError::Empty) when no whole message is there now."
    };
}

macro_rules! doc_recv_batch_timeout {
    () => {
        "Like `recv_batch`, waiting for the first message until `timeout` has passed, then \
         [`RecvError::Timeout`](crate::RecvError::Timeout)."
    };
}

/// Writes the sending methods of a surface from its cores `send_until`, `send_json_until` and
/// `reserve_until`. `$grant` is the surface's grant type; `$setup` is the example's hidden
/// preamble, which makes a sender `tx` and its peer's receiver `rx`; `$commit` commits the
/// example's grant `grant` of 5 bytes.
macro_rules! send_methods {
    ($grant:ty, $setup:expr, $commit:expr) => {
        #[doc = doc_send!()]
        ///
        /// ```
        #[doc = $setup]
        /// tx.send(b"hello")?;
        /// assert_eq!(&*rx.recv()?, b"hello");
        /// // Longer than a frame (of a 1 MiB ring): fragmented, and received whole.
        /// let long = vec![7u8; 3 << 20];
        /// std::thread::scope(|s| {
        ///     let sender = s.spawn(|| tx.send(&long));
        ///     assert_eq!(rx.recv().unwrap().len(), long.len());
        ///     sender.join().unwrap()
        /// })?;
        /// # Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn send(&mut self, bytes: &[u8]) -> Result<(), $crate::SendError> {
            self.send_until(bytes, $crate::wait::Deadline::Never)
        }

        #[doc = doc_try_send!()]
        #[inline]
        pub fn try_send(&mut self, bytes: &[u8]) -> Result<(), $crate::SendError> {
            self.send_until(bytes, $crate::wait::Deadline::Now)
        }

        #[doc = doc_send_timeout!()]
        pub fn send_timeout(
            &mut self,
            bytes: &[u8],
            timeout: std::time::Duration,
        ) -> Result<(), $crate::SendError> {
            self.send_until(bytes, $crate::wait::Deadline::after(timeout))
        }

        #[doc = doc_send_json!()]
        ///
        /// ```
        #[doc = $setup]
        /// tx.send_json(&serde_json::json!({ "id": 7, "name": "seven" }))?;
        /// let got: serde_json::Value = rx.recv_json()?;
        /// assert_eq!(got["name"], "seven");
        /// # Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn send_json<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            self.send_json_until(value, $crate::wait::Deadline::Never)
        }

        #[doc = doc_try_send_json!()]
        pub fn try_send_json<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            self.send_json_until(value, $crate::wait::Deadline::Now)
        }

        #[doc = doc_send_json_timeout!()]
        pub fn send_json_timeout<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
            timeout: std::time::Duration,
        ) -> Result<(), $crate::SendError> {
            self.send_json_until(value, $crate::wait::Deadline::after(timeout))
        }

        #[doc = doc_reserve!()]
        ///
        /// ```
        #[doc = $setup]
        /// let mut grant = tx.reserve(64)?;
        /// grant[..5].copy_from_slice(b"hello");
        #[doc = $commit]
        /// assert_eq!(&*rx.recv()?, b"hello");
        /// # Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn reserve(&mut self, len: usize) -> Result<$grant, $crate::SendError> {
            self.reserve_until(len, $crate::wait::Deadline::Never)
        }

        #[doc = doc_try_reserve!()]
        #[inline]
        pub fn try_reserve(&mut self, len: usize) -> Result<$grant, $crate::SendError> {
            self.reserve_until(len, $crate::wait::Deadline::Now)
        }

        #[doc = doc_reserve_timeout!()]
        pub fn reserve_timeout(
            &mut self,
            len: usize,
            timeout: std::time::Duration,
        ) -> Result<$grant, $crate::SendError> {
            self.reserve_until(len, $crate::wait::Deadline::after(timeout))
        }

        #[doc = doc_send_batch!()]
        ///
        /// ```
        #[doc = $setup]
        /// let sent = tx.send_batch(&[&b"one"[..], b"two", b"three"])?;
        /// assert_eq!(sent, 3);
        /// let mut got = Vec::new();
        /// assert_eq!(rx.recv_batch(16, |msg| got.push(msg.to_vec()))?, 3);
        /// assert_eq!(got, [&b"one"[..], b"two", b"three"]);
        /// # Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn send_batch<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
        ) -> Result<usize, $crate::SendError> {
            self.send_batch_until(batch, $crate::wait::Deadline::Never)
        }

        #[doc = doc_try_send_batch!()]
        #[inline]
        pub fn try_send_batch<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
        ) -> Result<usize, $crate::SendError> {
            self.send_batch_until(batch, $crate::wait::Deadline::Now)
        }

        #[doc = doc_send_batch_timeout!()]
        pub fn send_batch_timeout<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
            timeout: std::time::Duration,
        ) -> Result<usize, $crate::SendError> {
            self.send_batch_until(batch, $crate::wait::Deadline::after(timeout))
        }
    };
}

/// Writes the receiving methods of a surface from its cores `recv_until` and
/// `recv_into_until` (the JSON forms decode what `recv_until` lends out, with the guard's
/// `json`). `$guard` is the surface's guard type; `$setup` as for `send_methods!`.
macro_rules! recv_methods {
    ($guard:ty, $setup:expr) => {
        #[doc = doc_recv!()]
        ///
        /// ```
        #[doc = $setup]
        /// tx.send(b"ping")?;
        /// let msg = rx.recv()?;
        /// assert_eq!(&*msg, b"ping");
        /// drop(msg); // gives the frame back to the ring
        /// assert!(matches!(rx.try_recv(), Err(shmlink::RecvError::Empty { .. })));
        /// let waited = rx.recv_timeout(std::time::Duration::from_millis(1));
        /// assert!(matches!(waited, Err(shmlink::RecvError::Timeout { .. })));
        /// # Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn recv(&mut self) -> Result<$guard, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::Never)
        }

        #[doc = doc_try_recv!()]
        #[inline]
        pub fn try_recv(&mut self) -> Result<$guard, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::Now)
        }

        #[doc = doc_recv_timeout!()]
        #[inline]
        pub fn recv_timeout(
            &mut self,
            timeout: std::time::Duration,
        ) -> Result<$guard, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::after(timeout))
        }

        #[doc = doc_recv_into!()]
        ///
        /// ```
        #[doc = $setup]
        /// let mut buf = Vec::new();
        /// tx.send(b"one")?;
        /// assert_eq!(rx.recv_into(&mut buf)?, 3);
        /// assert_eq!(buf, b"one");
        /// # Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, $crate::RecvError> {
            self.recv_into_until(buf, $crate::wait::Deadline::Never)
        }

        #[doc = doc_try_recv_into!()]
        #[inline]
        pub fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, $crate::RecvError> {
            self.recv_into_until(buf, $crate::wait::Deadline::Now)
        }

        #[doc = doc_recv_into_timeout!()]
        pub fn recv_into_timeout(
            &mut self,
            buf: &mut Vec<u8>,
            timeout: std::time::Duration,
        ) -> Result<usize, $crate::RecvError> {
            self.recv_into_until(buf, $crate::wait::Deadline::after(timeout))
        }

        #[doc = doc_recv_json!()]
        ///
        /// ```
        #[doc = $setup]
        /// tx.send(br#"{"n": 3}"#)?;
        /// let got: std::collections::HashMap<String, u32> = rx.recv_json()?;
        /// assert_eq!(got["n"], 3);
        /// # Ok::<(), shmlink::Error>(())
        /// ```
        pub fn recv_json<T: serde::de::DeserializeOwned>(
            &mut self,
        ) -> Result<T, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::Never)?.json()
        }

        #[doc = doc_try_recv_json!()]
        pub fn try_recv_json<T: serde::de::DeserializeOwned>(
            &mut self,
        ) -> Result<T, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::Now)?.json()
        }

        #[doc = doc_recv_json_timeout!()]
        pub fn recv_json_timeout<T: serde::de::DeserializeOwned>(
            &mut self,
            timeout: std::time::Duration,
        ) -> Result<T, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::after(timeout))?
                .json()
        }

        #[doc = doc_recv_batch!()]
        ///
        /// ```
        #[doc = $setup]
        /// for n in 0..10u8 {
        ///     tx.send(&[n])?;
        /// }
        /// let mut sum = 0;
        /// let handed = rx.recv_batch(usize::MAX, |msg| sum += msg[0] as u32)?;
        /// assert_eq!((handed, sum), (10, 45));
        /// # Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn recv_batch(
            &mut self,
            max: usize,
            mut f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            self.recv_batch_until(max, &mut f, $crate::wait::Deadline::Never)
        }

        #[doc = doc_try_recv_batch!()]
        #[inline]
        pub fn try_recv_batch(
            &mut self,
            max: usize,
            mut f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            self.recv_batch_until(max, &mut f, $crate::wait::Deadline::Now)
        }

        #[doc = doc_recv_batch_timeout!()]
        pub fn recv_batch_timeout(
            &mut self,
            max: usize,
            timeout: std::time::Duration,
            mut f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            self.recv_batch_until(max, &mut f, $crate::wait::Deadline::after(timeout))
        }
    };
}

/// Writes the methods of the async surface from its async cores (`send_until`,
/// `send_json_until`, `reserve_until`, `recv_until`, `recv_into_until`) and, for the `try_`
/// forms, which do not wait, the channel's own cores (through `now()`).
#[cfg(feature = "tokio")]
macro_rules! async_methods {
    () => {
        #[doc = doc_send!()]
        ///
        /// ```
        /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
        /// # use shmlink::{tokio::AsyncChannel, Channel, Config, WaitStrategy};
        /// # let name = format!("doc-async-send-{}", std::process::id());
        /// # let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
        /// runtime.block_on(async {
        ///     let mut tx = AsyncChannel::new(Channel::create(&name, &Config::default())?)?;
        ///     let mut rx = AsyncChannel::new(Channel::connect(&name, WaitStrategy::Block)?)?;
        ///     tx.send(b"hello").await?;
        ///     assert_eq!(&*rx.recv().await?, b"hello");
        ///     Ok::<(), shmlink::Error>(())
        /// })?;
        /// # Ok(()) }
        /// ```
        pub async fn send(&mut self, bytes: &[u8]) -> Result<(), $crate::SendError> {
            self.send_until(bytes, $crate::wait::Deadline::Never).await
        }

        #[doc = doc_try_send!()]
        pub fn try_send(&mut self, bytes: &[u8]) -> Result<(), $crate::SendError> {
            self.now().send_until(bytes, $crate::wait::Deadline::Now)
        }

        #[doc = doc_send_timeout!()]
        pub async fn send_timeout(
            &mut self,
            bytes: &[u8],
            timeout: std::time::Duration,
        ) -> Result<(), $crate::SendError> {
            self.send_until(bytes, $crate::wait::Deadline::after(timeout))
                .await
        }

        #[doc = doc_send_json!()]
        pub async fn send_json<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            self.send_json_until(value, $crate::wait::Deadline::Never)
                .await
        }

        #[doc = doc_try_send_json!()]
        pub fn try_send_json<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            self.now()
                .send_json_until(value, $crate::wait::Deadline::Now)
        }

        #[doc = doc_send_json_timeout!()]
        pub async fn send_json_timeout<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
            timeout: std::time::Duration,
        ) -> Result<(), $crate::SendError> {
            self.send_json_until(value, $crate::wait::Deadline::after(timeout))
                .await
        }

        #[doc = doc_reserve!()]
        pub async fn reserve(
            &mut self,
            len: usize,
        ) -> Result<$crate::WriteGrant<'_>, $crate::SendError> {
            self.reserve_until(len, $crate::wait::Deadline::Never).await
        }

        #[doc = doc_try_reserve!()]
        pub fn try_reserve(
            &mut self,
            len: usize,
        ) -> Result<$crate::WriteGrant<'_>, $crate::SendError> {
            self.now().reserve_until(len, $crate::wait::Deadline::Now)
        }

        #[doc = doc_reserve_timeout!()]
        pub async fn reserve_timeout(
            &mut self,
            len: usize,
            timeout: std::time::Duration,
        ) -> Result<$crate::WriteGrant<'_>, $crate::SendError> {
            self.reserve_until(len, $crate::wait::Deadline::after(timeout))
                .await
        }

        #[doc = doc_recv!()]
        pub async fn recv(&mut self) -> Result<$crate::ReadGuard<'_>, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::Never).await
        }

        #[doc = doc_try_recv!()]
        pub fn try_recv(&mut self) -> Result<$crate::ReadGuard<'_>, $crate::RecvError> {
            self.now().recv_until($crate::wait::Deadline::Now)
        }

        #[doc = doc_recv_timeout!()]
        pub async fn recv_timeout(
            &mut self,
            timeout: std::time::Duration,
        ) -> Result<$crate::ReadGuard<'_>, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::after(timeout))
                .await
        }

        #[doc = doc_recv_into!()]
        pub async fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, $crate::RecvError> {
            self.recv_into_until(buf, $crate::wait::Deadline::Never)
                .await
        }

        #[doc = doc_try_recv_into!()]
        pub fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, $crate::RecvError> {
            self.now().recv_into_until(buf, $crate::wait::Deadline::Now)
        }

        #[doc = doc_recv_into_timeout!()]
        pub async fn recv_into_timeout(
            &mut self,
            buf: &mut Vec<u8>,
            timeout: std::time::Duration,
        ) -> Result<usize, $crate::RecvError> {
            self.recv_into_until(buf, $crate::wait::Deadline::after(timeout))
                .await
        }

        #[doc = doc_recv_json!()]
        pub async fn recv_json<T: serde::de::DeserializeOwned>(
            &mut self,
        ) -> Result<T, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::Never).await?.json()
        }

        #[doc = doc_try_recv_json!()]
        pub fn try_recv_json<T: serde::de::DeserializeOwned>(
            &mut self,
        ) -> Result<T, $crate::RecvError> {
            self.now().recv_until($crate::wait::Deadline::Now)?.json()
        }

        #[doc = doc_recv_json_timeout!()]
        pub async fn recv_json_timeout<T: serde::de::DeserializeOwned>(
            &mut self,
            timeout: std::time::Duration,
        ) -> Result<T, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::after(timeout))
                .await?
                .json()
        }
        #[doc = doc_send_batch!()]
        pub async fn send_batch<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
        ) -> Result<usize, $crate::SendError> {
            self.send_batch_until(batch, $crate::wait::Deadline::Never)
                .await
        }

        #[doc = doc_try_send_batch!()]
        pub fn try_send_batch<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
        ) -> Result<usize, $crate::SendError> {
            self.now()
                .send_batch_until(batch, $crate::wait::Deadline::Now)
        }

        #[doc = doc_send_batch_timeout!()]
        pub async fn send_batch_timeout<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
            timeout: std::time::Duration,
        ) -> Result<usize, $crate::SendError> {
            self.send_batch_until(batch, $crate::wait::Deadline::after(timeout))
                .await
        }

        #[doc = doc_recv_batch!()]
        pub async fn recv_batch(
            &mut self,
            max: usize,
            mut f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            self.recv_batch_until(max, &mut f, $crate::wait::Deadline::Never)
                .await
        }

        #[doc = doc_try_recv_batch!()]
        pub fn try_recv_batch(
            &mut self,
            max: usize,
            mut f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            self.now()
                .recv_batch_until(max, &mut f, $crate::wait::Deadline::Now)
        }

        #[doc = doc_recv_batch_timeout!()]
        pub async fn recv_batch_timeout(
            &mut self,
            max: usize,
            timeout: std::time::Duration,
            mut f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            self.recv_batch_until(max, &mut f, $crate::wait::Deadline::after(timeout))
                .await
        }
    };
}
