//! The macros that write a surface's forms: the inherent forms of a blocking surface (calls
//! of [`Sender`](crate::Sender)'s and [`Receiver`](crate::Receiver)'s), the async forms, and
//! the cores of a wrapper handed to what it holds.

/// Writes the inherent send forms of a blocking surface, each a call of [`Sender`]'s
/// (crate::Sender): the surface must have the sending cores ([`SendCore`](super::SendCore)),
/// or this fails to compile naming the trait it lacks. `grant` is the surface's grant type,
/// `setup` the examples' first lines (they make a sender `tx` and its peer's receiver `rx`),
/// `commit` the line that commits the example's grant `grant` of 5 bytes, `long` (optional)
/// the comment over the example's send of 3 MiB.
macro_rules! send_methods {
    (grant: $grant:ty, setup: $setup:expr, commit: $commit:expr $(,)?) => {
        send_methods!(
            grant: $grant,
            setup: $setup,
            commit: $commit,
            long: " // Longer than a frame (of a 1 MiB ring): fragmented, and received whole.",
        );
    };
    (grant: $grant:ty, setup: $setup:expr, commit: $commit:expr, long: $long:expr $(,)?) => {
        #[doc = doc_send!()]
        ///
        /// ```
        #[doc = $setup]
        /// tx.send(b"hello")?;
        /// assert_eq!(&*rx.recv()?, b"hello");
        #[doc = $long]
        /// let long = vec![7u8; 3 << 20];
        /// std::thread::scope(|s| {
        ///     let sender = s.spawn(|| tx.send(&long));
        ///     assert_eq!(rx.recv().unwrap().len(), long.len());
        ///     sender.join().unwrap()
        /// })?;
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn send(&mut self, bytes: &[u8]) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::send(self, bytes)
        }

        #[doc = doc_try_send!()]
        #[inline]
        pub fn try_send(&mut self, bytes: &[u8]) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::try_send(self, bytes)
        }

        #[doc = doc_send_timeout!()]
        pub fn send_timeout(
            &mut self,
            bytes: &[u8],
            timeout: std::time::Duration,
        ) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::send_timeout(self, bytes, timeout)
        }

        #[doc = doc_send_json!()]
        ///
        /// ```
        #[doc = $setup]
        /// tx.send_json(&serde_json::json!({ "id": 7, "name": "seven" }))?;
        /// let got: serde_json::Value = rx.recv_json()?;
        /// assert_eq!(got["name"], "seven");
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn send_json<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::send_json(self, value)
        }

        #[doc = doc_try_send_json!()]
        pub fn try_send_json<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::try_send_json(self, value)
        }

        #[doc = doc_send_json_timeout!()]
        pub fn send_json_timeout<T: serde::Serialize + ?Sized>(
            &mut self,
            value: &T,
            timeout: std::time::Duration,
        ) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::send_json_timeout(self, value, timeout)
        }

        #[doc = doc_send_value!()]
        ///
        /// ```
        /// use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
        ///
        /// #[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Debug, PartialEq)]
        /// #[repr(C)]
        /// struct Tick {
        ///     price: u64,
        ///     qty: u32,
        ///     side: u32,
        /// }
        ///
        #[doc = $setup]
        /// tx.send_value(&Tick { price: 101, qty: 5, side: 1 })?;
        /// let tick = rx.recv_value::<Tick>()?;
        /// assert_eq!((tick.price, tick.qty, tick.side), (101, 5, 1));
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn send_value<T: zerocopy::IntoBytes + zerocopy::Immutable + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::send_value(self, value)
        }

        #[doc = doc_try_send_value!()]
        #[inline]
        pub fn try_send_value<T: zerocopy::IntoBytes + zerocopy::Immutable + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::try_send_value(self, value)
        }

        #[doc = doc_send_value_timeout!()]
        pub fn send_value_timeout<T: zerocopy::IntoBytes + zerocopy::Immutable + ?Sized>(
            &mut self,
            value: &T,
            timeout: std::time::Duration,
        ) -> Result<(), $crate::SendError> {
            <Self as $crate::Sender>::send_value_timeout(self, value, timeout)
        }

        #[doc = doc_reserve!()]
        ///
        /// ```
        #[doc = $setup]
        /// let mut grant = tx.reserve(64)?;
        /// grant[..5].copy_from_slice(b"hello");
        #[doc = $commit]
        /// assert_eq!(&*rx.recv()?, b"hello");
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn reserve(&mut self, len: usize) -> Result<$grant, $crate::SendError> {
            <Self as $crate::Sender>::reserve(self, len)
        }

        #[doc = doc_try_reserve!()]
        #[inline]
        pub fn try_reserve(&mut self, len: usize) -> Result<$grant, $crate::SendError> {
            <Self as $crate::Sender>::try_reserve(self, len)
        }

        #[doc = doc_reserve_timeout!()]
        pub fn reserve_timeout(
            &mut self,
            len: usize,
            timeout: std::time::Duration,
        ) -> Result<$grant, $crate::SendError> {
            <Self as $crate::Sender>::reserve_timeout(self, len, timeout)
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
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn send_batch<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
        ) -> Result<usize, $crate::SendError> {
            <Self as $crate::Sender>::send_batch(self, batch)
        }

        #[doc = doc_try_send_batch!()]
        #[inline]
        pub fn try_send_batch<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
        ) -> Result<usize, $crate::SendError> {
            <Self as $crate::Sender>::try_send_batch(self, batch)
        }

        #[doc = doc_send_batch_timeout!()]
        pub fn send_batch_timeout<B: AsRef<[u8]>>(
            &mut self,
            batch: &[B],
            timeout: std::time::Duration,
        ) -> Result<usize, $crate::SendError> {
            <Self as $crate::Sender>::send_batch_timeout(self, batch, timeout)
        }
    };
}

/// Writes the inherent receive forms of a blocking surface, each a call of
/// [`Receiver`](crate::Receiver)'s: the surface must have the receiving cores
/// ([`RecvCore`](super::RecvCore)), or this fails to compile naming the trait it lacks.
/// `guard` is the surface's guard type; `setup` as for `send_methods!`.
macro_rules! recv_methods {
    (guard: $guard:ty, setup: $setup:expr $(,)?) => {
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
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn recv(&mut self) -> Result<$guard, $crate::RecvError> {
            <Self as $crate::Receiver>::recv(self)
        }

        #[doc = doc_try_recv!()]
        #[inline]
        pub fn try_recv(&mut self) -> Result<$guard, $crate::RecvError> {
            <Self as $crate::Receiver>::try_recv(self)
        }

        #[doc = doc_recv_timeout!()]
        #[inline]
        pub fn recv_timeout(
            &mut self,
            timeout: std::time::Duration,
        ) -> Result<$guard, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_timeout(self, timeout)
        }

        #[doc = doc_recv_into!()]
        ///
        /// ```
        #[doc = $setup]
        /// let mut buf = Vec::new();
        /// tx.send(b"one")?;
        /// assert_eq!(rx.recv_into(&mut buf)?, 3);
        /// assert_eq!(buf, b"one");
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_into(self, buf)
        }

        #[doc = doc_try_recv_into!()]
        #[inline]
        pub fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, $crate::RecvError> {
            <Self as $crate::Receiver>::try_recv_into(self, buf)
        }

        #[doc = doc_recv_into_timeout!()]
        pub fn recv_into_timeout(
            &mut self,
            buf: &mut Vec<u8>,
            timeout: std::time::Duration,
        ) -> Result<usize, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_into_timeout(self, buf, timeout)
        }

        #[doc = doc_recv_json!()]
        ///
        /// ```
        #[doc = $setup]
        /// tx.send(br#"{"n": 3}"#)?;
        /// let got: std::collections::HashMap<String, u32> = rx.recv_json()?;
        /// assert_eq!(got["n"], 3);
        /// Ok::<(), shmlink::Error>(())
        /// ```
        pub fn recv_json<T: serde::de::DeserializeOwned>(
            &mut self,
        ) -> Result<T, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_json(self)
        }

        #[doc = doc_try_recv_json!()]
        pub fn try_recv_json<T: serde::de::DeserializeOwned>(
            &mut self,
        ) -> Result<T, $crate::RecvError> {
            <Self as $crate::Receiver>::try_recv_json(self)
        }

        #[doc = doc_recv_json_timeout!()]
        pub fn recv_json_timeout<T: serde::de::DeserializeOwned>(
            &mut self,
            timeout: std::time::Duration,
        ) -> Result<T, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_json_timeout(self, timeout)
        }

        #[doc = doc_recv_value!()]
        ///
        /// ```
        #[doc = $setup]
        /// tx.send_value(&[1.5f64, -2.0])?;
        /// let pair = rx.recv_value::<[f64; 2]>()?;
        /// assert_eq!(*pair, [1.5, -2.0]);
        /// drop(pair);
        /// tx.send(b"three")?;
        /// let wrong = rx.recv_value::<u64>();
        /// assert!(matches!(wrong, Err(shmlink::RecvError::WrongSize { len: 5, expected: 8, .. })));
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn recv_value<T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable>(
            &mut self,
        ) -> Result<$crate::Value<$guard, T>, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_value(self)
        }

        #[doc = doc_try_recv_value!()]
        #[inline]
        pub fn try_recv_value<
            T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable,
        >(
            &mut self,
        ) -> Result<$crate::Value<$guard, T>, $crate::RecvError> {
            <Self as $crate::Receiver>::try_recv_value(self)
        }

        #[doc = doc_recv_value_timeout!()]
        pub fn recv_value_timeout<
            T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable,
        >(
            &mut self,
            timeout: std::time::Duration,
        ) -> Result<$crate::Value<$guard, T>, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_value_timeout(self, timeout)
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
        /// Ok::<(), shmlink::Error>(())
        /// ```
        #[inline]
        pub fn recv_batch(
            &mut self,
            max: usize,
            f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_batch(self, max, f)
        }

        #[doc = doc_try_recv_batch!()]
        #[inline]
        pub fn try_recv_batch(
            &mut self,
            max: usize,
            f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            <Self as $crate::Receiver>::try_recv_batch(self, max, f)
        }

        #[doc = doc_recv_batch_timeout!()]
        pub fn recv_batch_timeout(
            &mut self,
            max: usize,
            timeout: std::time::Duration,
            f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            <Self as $crate::Receiver>::recv_batch_timeout(self, max, timeout, f)
        }
    };
}

/// Writes the methods of the async surface from its async cores (`send_until`,
/// `send_json_until`, `reserve_until`, `send_batch_until`, `recv_until`, `recv_into_until`,
/// `recv_batch_until`) and, for the `try_` forms, which do not wait, the surface's own cores
/// (through `now()`): both halves, for a surface that sends and receives.
#[cfg(feature = "tokio")]
macro_rules! async_methods {
    () => {
        async_send_methods!();
        async_recv_methods!();
    };
}

/// The send forms of an async surface (see `async_methods!`): an async publisher's.
#[cfg(feature = "tokio")]
macro_rules! async_send_methods {
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
            $crate::Sender::try_send(self.now(), bytes)
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
            $crate::Sender::try_send_json(self.now(), value)
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
            $crate::Sender::try_reserve(self.now(), len)
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

        #[doc = doc_send_value!()]
        pub async fn send_value<T: zerocopy::IntoBytes + zerocopy::Immutable + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            self.send_until(value.as_bytes(), $crate::wait::Deadline::Never)
                .await
        }

        #[doc = doc_try_send_value!()]
        pub fn try_send_value<T: zerocopy::IntoBytes + zerocopy::Immutable + ?Sized>(
            &mut self,
            value: &T,
        ) -> Result<(), $crate::SendError> {
            $crate::Sender::try_send_value(self.now(), value)
        }

        #[doc = doc_send_value_timeout!()]
        pub async fn send_value_timeout<T: zerocopy::IntoBytes + zerocopy::Immutable + ?Sized>(
            &mut self,
            value: &T,
            timeout: std::time::Duration,
        ) -> Result<(), $crate::SendError> {
            self.send_until(value.as_bytes(), $crate::wait::Deadline::after(timeout))
                .await
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
            $crate::Sender::try_send_batch(self.now(), batch)
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
    };
}

/// The receive forms of an async surface (see `async_methods!`): an async subscriber's.
#[cfg(feature = "tokio")]
macro_rules! async_recv_methods {
    () => {
        #[doc = doc_recv!()]
        pub async fn recv(&mut self) -> Result<$crate::ReadGuard<'_>, $crate::RecvError> {
            self.recv_until($crate::wait::Deadline::Never).await
        }

        #[doc = doc_try_recv!()]
        pub fn try_recv(&mut self) -> Result<$crate::ReadGuard<'_>, $crate::RecvError> {
            $crate::Receiver::try_recv(self.now())
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
            $crate::Receiver::try_recv_into(self.now(), buf)
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
            $crate::Receiver::try_recv_json(self.now())
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

        #[doc = doc_recv_value!()]
        pub async fn recv_value<
            T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable,
        >(
            &mut self,
        ) -> Result<$crate::Value<$crate::ReadGuard<'_>, T>, $crate::RecvError> {
            $crate::Value::new(self.recv_until($crate::wait::Deadline::Never).await?)
        }

        #[doc = doc_try_recv_value!()]
        pub fn try_recv_value<
            T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable,
        >(
            &mut self,
        ) -> Result<$crate::Value<$crate::ReadGuard<'_>, T>, $crate::RecvError> {
            $crate::Receiver::try_recv_value(self.now())
        }

        #[doc = doc_recv_value_timeout!()]
        pub async fn recv_value_timeout<
            T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable,
        >(
            &mut self,
            timeout: std::time::Duration,
        ) -> Result<$crate::Value<$crate::ReadGuard<'_>, T>, $crate::RecvError> {
            $crate::Value::new(
                self.recv_until($crate::wait::Deadline::after(timeout))
                    .await?,
            )
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
            f: impl FnMut(&[u8]),
        ) -> Result<usize, $crate::RecvError> {
            $crate::Receiver::try_recv_batch(self.now(), max, f)
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

/// `impl SendCore` and `impl RecvCore` for `$ty`, a surface whose cores are those of what it
/// holds: the sending ones of what `$send` reaches, the receiving ones of what `$recv` reaches
/// (expressions of `$s`, the surface). `grant` and `guard` name the lifetime `'a`.
macro_rules! cores_through {
    ($ty:ty, $s:ident => send: $send:expr, recv: $recv:expr, grant: $grant:ty, guard: $guard:ty $(,)?) => {
        impl $crate::seam::SendCore for $ty {
            type Grant<'a> = $grant;
            #[inline]
            fn send_until(
                &mut self,
                bytes: &[u8],
                deadline: $crate::wait::Deadline,
            ) -> Result<(), $crate::SendError> {
                let $s = self;
                $send.send_until(bytes, deadline)
            }
            #[inline]
            fn send_json_until<T: serde::Serialize + ?Sized>(
                &mut self,
                value: &T,
                deadline: $crate::wait::Deadline,
            ) -> Result<(), $crate::SendError> {
                let $s = self;
                $send.send_json_until(value, deadline)
            }
            #[inline]
            fn reserve_until(
                &mut self,
                len: usize,
                deadline: $crate::wait::Deadline,
            ) -> Result<Self::Grant<'_>, $crate::SendError> {
                let $s = self;
                $send.reserve_until(len, deadline)
            }
            #[inline]
            fn send_batch_until<B: AsRef<[u8]>>(
                &mut self,
                batch: &[B],
                deadline: $crate::wait::Deadline,
            ) -> Result<usize, $crate::SendError> {
                let $s = self;
                $send.send_batch_until(batch, deadline)
            }
        }

        impl $crate::seam::RecvCore for $ty {
            type Guard<'a> = $guard;
            #[inline]
            fn recv_until(
                &mut self,
                deadline: $crate::wait::Deadline,
            ) -> Result<Self::Guard<'_>, $crate::RecvError> {
                let $s = self;
                $recv.recv_until(deadline)
            }
            #[inline]
            fn recv_into_until(
                &mut self,
                buf: &mut Vec<u8>,
                deadline: $crate::wait::Deadline,
            ) -> Result<usize, $crate::RecvError> {
                let $s = self;
                $recv.recv_into_until(buf, deadline)
            }
            #[inline]
            fn recv_batch_until<F: FnMut(&[u8])>(
                &mut self,
                max: usize,
                f: &mut F,
                deadline: $crate::wait::Deadline,
            ) -> Result<usize, $crate::RecvError> {
                let $s = self;
                $recv.recv_batch_until(max, f, deadline)
            }
        }
    };
}
