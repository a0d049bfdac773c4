//! One conformance suite over every surface and backend: `Channel` on shared memory, `Endpoint`
//! on shared memory, `Endpoint` on the ipc-channel backend, and the async API (`shmlink::tokio`)
//! on shared memory, twice: on a tokio runtime (`async_shm`: a task sleeps on its own futex
//! ring, which must be had where the kernel offers `io_uring` futex waits unless
//! `SHMLINK_TEST_NO_IO_URING` says this machine refuses them; then the suite says once that
//! `async_shm` ran on the reactor) and outside one (`async_reactor`: through the reactor
//! thread). Each case is written once, as a function generic over [`Surface`], and the
//! `suite!` macro at the end runs every case against every surface, so a test reads
//! `conformance::<surface>::<case>`.
//!
//! Where the surfaces legitimately differ, [`Caps`] says so, once; a case that meets a
//! difference asks the surface's capabilities and checks what that surface promises instead.
//! Deaths are real: the peer is this test binary run again (`peer_process`, the role
//! `conformance-peer`), on the same
//! surface, and killed with SIGKILL.

use crate::support;

pub(crate) mod topics;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use shmlink::zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};
use shmlink::{
    Backend, Channel, Config, Connection, Endpoint, EndpointListener, Grant, Listener, OpenError,
    Receiver, RecvError, SendError, Sender, Value, WaitStrategy, MAX_NAME_LEN,
};
use support::{
    assert_nothing_left, reap_killed, unique, wait_for_line, ChildGuard, FallbackFiles, NameGuard,
    Watchdog, WATCHDOG,
};

/// What a deadline form is given when it is expected to give up.
const SHORT: Duration = Duration::from_millis(30);
/// A whole case (several MiB through a debug build on a loaded two-core machine).
const CASE_LIMIT: Duration = Duration::from_secs(60);
/// Frames a peer sends before it closes or is killed.
const BEFORE_THE_END: u64 = 40;
/// The role of a re-run of this binary that plays a peer (given
/// `<surface> <create|connect> <name>`).
const PEER_ROLE: &str = "conformance-peer";

/// Where the surfaces legitimately differ. Every case runs on every surface; these say what a
/// surface promises where they differ.
#[derive(Clone, Copy, Debug)]
struct Caps {
    /// Messages longer than a frame travel in fragments (shared memory, whose frames are at most
    /// half a ring). The ipc-channel backend sends every message whole: its frame is its
    /// largest message (256 MiB), so the sizes around a frame are not sent there.
    frames: bool,
    /// A message sent before the peer connected waits in the ring (shared memory). The
    /// ipc-channel backend has nowhere to put it until the peer connects: `try_send` is `Full`
    /// and the deadline forms time out.
    sends_before_connect: bool,
    /// The messages of a batch send that fit the ring's room become readable together
    /// (shared memory, which publishes them with one store). The ipc-channel backend sends
    /// them one after another.
    batches_whole: bool,
    /// The most messages one batch receive hands over against a sender that never stops:
    /// a ring's worth of one-byte frames on shared memory (plus the one that crosses the mark),
    /// a count on the ipc-channel backend.
    batch_bound: usize,
}

const SHM: Caps = Caps {
    frames: true,
    sends_before_connect: true,
    batches_whole: true,
    batch_bound: RING / 16 + 1,
};

const IPC_CHANNEL: Caps = Caps {
    frames: false,
    sends_before_connect: false,
    batches_whole: false,
    batch_bound: 1024,
};

/// One surface on one backend: how its ends are made, and its listener.
trait Surface: 'static {
    /// The module name of its tests, and its name for a peer process.
    const NAME: &'static str;
    const CAPS: Caps;
    /// Its peer processes run with the test hook that forces the ipc-channel backend
    /// (`shmlink::testing::FORCE_FALLBACK_ENV`), and make their ends with the plain `create`
    /// and `bind`, which must then choose that backend.
    const FORCED_IN_PEERS: bool = false;
    type End: End;
    /// What its listener's accept returns.
    type Accepted: End;
    type Listener: Send;
    fn create(name: &str, config: &Config) -> Result<Self::End, OpenError>;
    fn connect(name: &str, timeout: Duration) -> Result<Self::End, OpenError>;
    fn bind(name: &str, config: &Config, max_clients: usize) -> Result<Self::Listener, OpenError>;
    fn accept(listener: &mut Self::Listener) -> Result<Self::Accepted, OpenError>;
}

/// A type the value forms carry in these cases.
trait PlainValue: FromBytes + KnownLayout + Immutable + Copy {}

impl<V: FromBytes + KnownLayout + Immutable + Copy> PlainValue for V {}

/// The one method set, run to completion: every blocking surface has it through the library's
/// traits ([`shmlink::Sender`], [`shmlink::Receiver`]) in one impl, and the async surface has
/// it by running each waiting form on the end's own runtime. Received messages are copied out,
/// since each surface lends them in a guard of its own; a grant is filled with `fill` and
/// commits `fill.len()` bytes. The sending forms are here, the receiving ones in [`RecvEnd`]
/// (a topic's publisher has only these, its subscribers only those).
trait SendEnd: Send + 'static {
    fn send(&mut self, bytes: &[u8]) -> Result<(), SendError>;
    fn try_send(&mut self, bytes: &[u8]) -> Result<(), SendError>;
    fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), SendError>;
    fn send_json<T: Serialize>(&mut self, value: &T) -> Result<(), SendError>;
    fn try_send_json<T: Serialize>(&mut self, value: &T) -> Result<(), SendError>;
    fn send_json_timeout<T: Serialize>(
        &mut self,
        value: &T,
        timeout: Duration,
    ) -> Result<(), SendError>;
    fn send_value<V: IntoBytes + Immutable>(&mut self, value: &V) -> Result<(), SendError>;
    fn try_send_value<V: IntoBytes + Immutable>(&mut self, value: &V) -> Result<(), SendError>;
    fn send_value_timeout<V: IntoBytes + Immutable>(
        &mut self,
        value: &V,
        timeout: Duration,
    ) -> Result<(), SendError>;
    fn reserve(&mut self, len: usize, fill: &[u8]) -> Result<(), SendError>;
    fn try_reserve(&mut self, len: usize, fill: &[u8]) -> Result<(), SendError>;
    fn reserve_timeout(
        &mut self,
        len: usize,
        fill: &[u8],
        timeout: Duration,
    ) -> Result<(), SendError>;
    /// `try_reserve(len)`, and the grant dropped without a commit.
    fn reserve_and_drop(&mut self, len: usize) -> Result<(), SendError>;
    fn send_batch(&mut self, batch: &[Vec<u8>]) -> Result<usize, SendError>;
    fn try_send_batch(&mut self, batch: &[Vec<u8>]) -> Result<usize, SendError>;
    fn send_batch_timeout(
        &mut self,
        batch: &[Vec<u8>],
        timeout: Duration,
    ) -> Result<usize, SendError>;
    fn max_frame(&mut self) -> usize;
}

/// The receiving forms of [`End`].
trait RecvEnd: Send + 'static {
    fn recv(&mut self) -> Result<Vec<u8>, RecvError>;
    fn try_recv(&mut self) -> Result<Vec<u8>, RecvError>;
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Vec<u8>, RecvError>;
    fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecvError>;
    fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecvError>;
    fn recv_into_timeout(
        &mut self,
        buf: &mut Vec<u8>,
        timeout: Duration,
    ) -> Result<usize, RecvError>;
    fn recv_json<T: DeserializeOwned>(&mut self) -> Result<T, RecvError>;
    fn try_recv_json<T: DeserializeOwned>(&mut self) -> Result<T, RecvError>;
    fn recv_json_timeout<T: DeserializeOwned>(&mut self, timeout: Duration)
        -> Result<T, RecvError>;
    /// The value a `recv_value` lent, copied out (its reference checked to be aligned).
    fn recv_value<V: PlainValue>(&mut self) -> Result<V, RecvError>;
    fn try_recv_value<V: PlainValue>(&mut self) -> Result<V, RecvError>;
    fn recv_value_timeout<V: PlainValue>(&mut self, timeout: Duration) -> Result<V, RecvError>;
    /// The messages a batch receive handed over, copied out (checked against its count).
    fn recv_batch(&mut self, max: usize) -> Result<Vec<Vec<u8>>, RecvError>;
    fn try_recv_batch(&mut self, max: usize) -> Result<Vec<Vec<u8>>, RecvError>;
    fn recv_batch_timeout(
        &mut self,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Vec<u8>>, RecvError>;
    /// `try_recv` of a message that starts with its number ([`numbered`]): the number, read
    /// from the message where it lies, without copying it out (a consumer as quick as it gets).
    fn try_recv_number(&mut self) -> Result<u64, RecvError>;
}

/// Both halves of the method set: one end of a duplex surface.
trait End: SendEnd + RecvEnd {}

impl<T: SendEnd + RecvEnd> End for T {}

/// The number a [`numbered`] message of at least 8 bytes starts with.
fn number_of(msg: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    head.copy_from_slice(&msg[..8]);
    u64::from_le_bytes(head)
}

/// Runs a batch receive that hands its messages to a closure, and checks the count it returns
/// against what it handed.
fn collect_batch(
    recv: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<usize, RecvError>,
) -> Result<Vec<Vec<u8>>, RecvError> {
    let mut got = Vec::new();
    let count = recv(&mut |msg: &[u8]| got.push(msg.to_vec()))?;
    assert_eq!(count, got.len(), "a batch receive counts what it handed");
    Ok(got)
}

fn fill_and_commit(mut grant: impl Grant, len: usize, fill: &[u8]) -> Result<(), SendError> {
    assert_eq!(grant.len(), len, "a grant lends what was reserved");
    grant[..fill.len()].copy_from_slice(fill);
    grant.commit(fill.len())
}

/// A received value copied out, after checking that the reference it was read through was
/// aligned for its type.
fn value_out<V: Copy, G>(value: Value<G, V>) -> V
where
    Value<G, V>: std::ops::Deref<Target = V>,
{
    let at = std::ptr::from_ref::<V>(&value) as usize;
    assert_eq!(
        at % std::mem::align_of::<V>(),
        0,
        "a value is read through an aligned reference"
    );
    *value
}

/// The largest grant of an end.
trait MaxFrame {
    fn max_frame(&mut self) -> usize;
}

impl MaxFrame for Channel {
    fn max_frame(&mut self) -> usize {
        Channel::max_frame(self)
    }
}

impl MaxFrame for Connection {
    fn max_frame(&mut self) -> usize {
        Channel::max_frame(self.channel())
    }
}

impl MaxFrame for Endpoint {
    fn max_frame(&mut self) -> usize {
        Endpoint::max_frame(self)
    }
}

/// `End` for every blocking surface, through the library's own method set
/// ([`shmlink::Sender`] and [`shmlink::Receiver`]).
impl<E: Sender + MaxFrame + Send + 'static> SendEnd for E {
    fn send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        Sender::send(self, bytes)
    }
    fn try_send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        Sender::try_send(self, bytes)
    }
    fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), SendError> {
        Sender::send_timeout(self, bytes, timeout)
    }
    fn send_json<T: Serialize>(&mut self, value: &T) -> Result<(), SendError> {
        Sender::send_json(self, value)
    }
    fn try_send_json<T: Serialize>(&mut self, value: &T) -> Result<(), SendError> {
        Sender::try_send_json(self, value)
    }
    fn send_json_timeout<T: Serialize>(
        &mut self,
        value: &T,
        timeout: Duration,
    ) -> Result<(), SendError> {
        Sender::send_json_timeout(self, value, timeout)
    }
    fn send_value<V: IntoBytes + Immutable>(&mut self, value: &V) -> Result<(), SendError> {
        Sender::send_value(self, value)
    }
    fn try_send_value<V: IntoBytes + Immutable>(&mut self, value: &V) -> Result<(), SendError> {
        Sender::try_send_value(self, value)
    }
    fn send_value_timeout<V: IntoBytes + Immutable>(
        &mut self,
        value: &V,
        timeout: Duration,
    ) -> Result<(), SendError> {
        Sender::send_value_timeout(self, value, timeout)
    }
    fn reserve(&mut self, len: usize, fill: &[u8]) -> Result<(), SendError> {
        fill_and_commit(Sender::reserve(self, len)?, len, fill)
    }
    fn try_reserve(&mut self, len: usize, fill: &[u8]) -> Result<(), SendError> {
        fill_and_commit(Sender::try_reserve(self, len)?, len, fill)
    }
    fn reserve_timeout(
        &mut self,
        len: usize,
        fill: &[u8],
        timeout: Duration,
    ) -> Result<(), SendError> {
        fill_and_commit(Sender::reserve_timeout(self, len, timeout)?, len, fill)
    }
    fn reserve_and_drop(&mut self, len: usize) -> Result<(), SendError> {
        drop(Sender::try_reserve(self, len)?);
        Ok(())
    }
    fn send_batch(&mut self, batch: &[Vec<u8>]) -> Result<usize, SendError> {
        Sender::send_batch(self, batch)
    }
    fn try_send_batch(&mut self, batch: &[Vec<u8>]) -> Result<usize, SendError> {
        Sender::try_send_batch(self, batch)
    }
    fn send_batch_timeout(
        &mut self,
        batch: &[Vec<u8>],
        timeout: Duration,
    ) -> Result<usize, SendError> {
        Sender::send_batch_timeout(self, batch, timeout)
    }
    fn max_frame(&mut self) -> usize {
        MaxFrame::max_frame(self)
    }
}

impl<E: Receiver + Send + 'static> RecvEnd for E {
    fn recv(&mut self) -> Result<Vec<u8>, RecvError> {
        Receiver::recv(self).map(|m| m.to_vec())
    }
    fn try_recv(&mut self) -> Result<Vec<u8>, RecvError> {
        Receiver::try_recv(self).map(|m| m.to_vec())
    }
    fn recv_timeout(&mut self, timeout: Duration) -> Result<Vec<u8>, RecvError> {
        Receiver::recv_timeout(self, timeout).map(|m| m.to_vec())
    }
    fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecvError> {
        Receiver::recv_into(self, buf)
    }
    fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecvError> {
        Receiver::try_recv_into(self, buf)
    }
    fn recv_into_timeout(
        &mut self,
        buf: &mut Vec<u8>,
        timeout: Duration,
    ) -> Result<usize, RecvError> {
        Receiver::recv_into_timeout(self, buf, timeout)
    }
    fn recv_json<T: DeserializeOwned>(&mut self) -> Result<T, RecvError> {
        Receiver::recv_json(self)
    }
    fn try_recv_json<T: DeserializeOwned>(&mut self) -> Result<T, RecvError> {
        Receiver::try_recv_json(self)
    }
    fn recv_json_timeout<T: DeserializeOwned>(
        &mut self,
        timeout: Duration,
    ) -> Result<T, RecvError> {
        Receiver::recv_json_timeout(self, timeout)
    }
    fn recv_value<V: PlainValue>(&mut self) -> Result<V, RecvError> {
        Receiver::recv_value::<V>(self).map(value_out)
    }
    fn try_recv_value<V: PlainValue>(&mut self) -> Result<V, RecvError> {
        Receiver::try_recv_value::<V>(self).map(value_out)
    }
    fn recv_value_timeout<V: PlainValue>(&mut self, timeout: Duration) -> Result<V, RecvError> {
        Receiver::recv_value_timeout::<V>(self, timeout).map(value_out)
    }
    fn recv_batch(&mut self, max: usize) -> Result<Vec<Vec<u8>>, RecvError> {
        collect_batch(|f| Receiver::recv_batch(self, max, f))
    }
    fn try_recv_batch(&mut self, max: usize) -> Result<Vec<Vec<u8>>, RecvError> {
        collect_batch(|f| Receiver::try_recv_batch(self, max, f))
    }
    fn recv_batch_timeout(
        &mut self,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<Vec<u8>>, RecvError> {
        collect_batch(|f| Receiver::recv_batch_timeout(self, max, timeout, f))
    }
    fn try_recv_number(&mut self) -> Result<u64, RecvError> {
        Receiver::try_recv(self).map(|m| number_of(&m))
    }
}

/// `Channel` on shared memory; its listener is `Listener`.
struct ChannelShm;

impl Surface for ChannelShm {
    const NAME: &'static str = "channel_shm";
    const CAPS: Caps = SHM;
    type End = Channel;
    type Accepted = Connection;
    type Listener = Listener;
    fn create(name: &str, config: &Config) -> Result<Channel, OpenError> {
        Channel::create(name, config)
    }
    fn connect(name: &str, timeout: Duration) -> Result<Channel, OpenError> {
        Channel::connect_timeout(name, WaitStrategy::Block, timeout)
    }
    fn bind(name: &str, config: &Config, max_clients: usize) -> Result<Listener, OpenError> {
        Listener::bind_with_limit(name, config, max_clients)
    }
    fn accept(listener: &mut Listener) -> Result<Connection, OpenError> {
        listener.accept()
    }
}

/// `Endpoint` on the backend `B` (its `Backend` by index: 0 shared memory, 1 ipc-channel),
/// with `EndpointListener`.
struct EndpointOn<const B: u8>;

type EndpointShm = EndpointOn<0>;
type EndpointIpc = EndpointOn<1>;

impl<const B: u8> EndpointOn<B> {
    const BACKEND: Backend = if B == 0 {
        Backend::Shm
    } else {
        Backend::IpcChannel
    };
}

impl<const B: u8> Surface for EndpointOn<B> {
    const NAME: &'static str = if B == 0 {
        "endpoint_shm"
    } else {
        "endpoint_ipc"
    };
    const CAPS: Caps = if B == 0 { SHM } else { IPC_CHANNEL };
    const FORCED_IN_PEERS: bool = B == 1;
    type End = Endpoint;
    type Accepted = Endpoint;
    type Listener = EndpointListener;
    fn create(name: &str, config: &Config) -> Result<Endpoint, OpenError> {
        let end = if shmlink::testing::forced() {
            Endpoint::create(name, config)?
        } else {
            Endpoint::create_with(name, config, Self::BACKEND)?
        };
        assert_eq!(end.backend(), Self::BACKEND);
        Ok(end)
    }
    fn connect(name: &str, timeout: Duration) -> Result<Endpoint, OpenError> {
        let end = Endpoint::connect_timeout(name, WaitStrategy::Block, timeout)?;
        assert_eq!(
            end.backend(),
            Self::BACKEND,
            "the connector finds the backend"
        );
        Ok(end)
    }
    fn bind(name: &str, config: &Config, max: usize) -> Result<EndpointListener, OpenError> {
        let listener = if shmlink::testing::forced() {
            EndpointListener::bind_with_limit(name, config, max)?
        } else {
            EndpointListener::bind_with(name, config, Self::BACKEND, max)?
        };
        assert_eq!(listener.backend(), Self::BACKEND);
        Ok(listener)
    }
    fn accept(listener: &mut EndpointListener) -> Result<Endpoint, OpenError> {
        listener.accept()
    }
}

#[cfg(feature = "tokio")]
mod async_surface {
    //! The async API on shared memory: each end runs its futures on an executor of its own,
    //! either a tokio runtime (whose I/O driver a task's sleep is registered with, where the
    //! kernel allows) or a plain one outside any runtime (the task sleeps through the reactor
    //! thread).

    use super::*;
    use shmlink::tokio::{AsyncChannel, AsyncListener};
    use std::borrow::BorrowMut;
    use std::future::Future;
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};

    /// Where an end's futures run.
    pub(crate) struct Exec {
        /// Runs the futures if `direct`; else only `connect`, which uses tokio's blocking pool.
        rt: tokio::runtime::Runtime,
        direct: bool,
    }

    /// Wakes the thread that polls.
    struct Unpark(std::thread::Thread);

    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    /// Fails every `async_shm` case where the kernel offers `io_uring` futex waits and the
    /// library cannot make a futex ring (unless the machine refuses them on purpose), and says
    /// once when the `async_shm` cases run on the reactor instead.
    fn check_async_path() {
        static PATH: std::sync::OnceLock<()> = std::sync::OnceLock::new();
        PATH.get_or_init(|| {
            let direct = shmlink::testing::async_wakes_directly();
            let kernel = shmlink::testing::kernel_has_io_uring_futex_waits();
            assert!(
                direct || !kernel || shmlink::testing::io_uring_refused_on_purpose(),
                "the kernel offers io_uring futex waits, yet the library made no futex ring: \
                 async_shm would run on the reactor (set {}=1 if this machine refuses io_uring \
                 on purpose)",
                shmlink::testing::NO_IO_URING_ENV
            );
            // Said by the test process, not by each peer process, past the test harness's
            // capture of a passing test's output.
            if !direct && crate::roles::playing().is_none() {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "conformance: no futex ring here (kernel offers io_uring futex waits: \
                     {kernel}); every async_shm case runs on the reactor thread"
                );
            }
        });
    }

    impl Exec {
        pub(crate) fn new(direct: bool) -> Exec {
            if direct {
                check_async_path();
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .build()
                .expect("a tokio runtime");
            Exec { rt, direct }
        }

        pub(crate) fn block_on<F: Future>(&self, future: F) -> F::Output {
            if self.direct {
                return self.rt.block_on(future);
            }
            let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
            let mut cx = Context::from_waker(&waker);
            let mut future = std::pin::pin!(future);
            loop {
                if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                    return out;
                }
                std::thread::park();
            }
        }
    }

    pub(super) struct AsyncEnd<C: BorrowMut<Channel>> {
        // First: dropped before the runtime.
        ch: AsyncChannel<C>,
        rt: Exec,
    }

    pub(super) struct AsyncServer {
        listener: AsyncListener,
        rt: Exec,
    }

    /// The async API (`shmlink::tokio`) on shared memory; its listener is `AsyncListener`.
    /// `DIRECT`: polled on a tokio runtime with its I/O driver; else outside any runtime.
    pub(super) struct AsyncShm<const DIRECT: bool>;

    impl<const DIRECT: bool> Surface for AsyncShm<DIRECT> {
        const NAME: &'static str = if DIRECT { "async_shm" } else { "async_reactor" };
        const CAPS: Caps = SHM;
        type End = AsyncEnd<Channel>;
        type Accepted = AsyncEnd<Connection>;
        type Listener = AsyncServer;
        fn create(name: &str, config: &Config) -> Result<Self::End, OpenError> {
            let ch = AsyncChannel::new(Channel::create(name, config)?)?;
            Ok(AsyncEnd {
                ch,
                rt: Exec::new(DIRECT),
            })
        }
        fn connect(name: &str, timeout: Duration) -> Result<Self::End, OpenError> {
            let rt = Exec::new(DIRECT);
            let ch = rt
                .rt
                .block_on(shmlink::tokio::connect_timeout(name, timeout))?;
            Ok(AsyncEnd { ch, rt })
        }
        fn bind(name: &str, config: &Config, max: usize) -> Result<AsyncServer, OpenError> {
            let listener = AsyncListener::new(Listener::bind_with_limit(name, config, max)?)?;
            Ok(AsyncServer {
                listener,
                rt: Exec::new(DIRECT),
            })
        }
        fn accept(server: &mut AsyncServer) -> Result<Self::Accepted, OpenError> {
            let ch = server.rt.block_on(server.listener.accept())?;
            Ok(AsyncEnd {
                ch,
                rt: Exec::new(DIRECT),
            })
        }
    }

    /// The sending forms on an async end (`ch`, run on `rt`): an `AsyncChannel`'s or an
    /// `AsyncPublisher`'s, which have the same async forms.
    macro_rules! async_send_end {
        (impl [$($head:tt)*] max_frame($me:ident) $max:expr) => {
            impl $($head)* {
                fn send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
                    self.rt.block_on(self.ch.send(bytes))
                }
                fn try_send(&mut self, bytes: &[u8]) -> Result<(), SendError> {
                    self.ch.try_send(bytes)
                }
                fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<(), SendError> {
                    self.rt.block_on(self.ch.send_timeout(bytes, timeout))
                }
                fn send_json<T: Serialize>(&mut self, value: &T) -> Result<(), SendError> {
                    self.rt.block_on(self.ch.send_json(value))
                }
                fn try_send_json<T: Serialize>(&mut self, value: &T) -> Result<(), SendError> {
                    self.ch.try_send_json(value)
                }
                fn send_json_timeout<T: Serialize>(
                    &mut self,
                    value: &T,
                    timeout: Duration,
                ) -> Result<(), SendError> {
                    self.rt.block_on(self.ch.send_json_timeout(value, timeout))
                }
                fn send_value<V: IntoBytes + Immutable>(&mut self, value: &V) -> Result<(), SendError> {
                    self.rt.block_on(self.ch.send_value(value))
                }
                fn try_send_value<V: IntoBytes + Immutable>(&mut self, value: &V) -> Result<(), SendError> {
                    self.ch.try_send_value(value)
                }
                fn send_value_timeout<V: IntoBytes + Immutable>(
                    &mut self,
                    value: &V,
                    timeout: Duration,
                ) -> Result<(), SendError> {
                    self.rt.block_on(self.ch.send_value_timeout(value, timeout))
                }
                fn reserve(&mut self, len: usize, fill: &[u8]) -> Result<(), SendError> {
                    let ch = &mut self.ch;
                    self.rt
                        .block_on(async { fill_and_commit(ch.reserve(len).await?, len, fill) })
                }
                fn try_reserve(&mut self, len: usize, fill: &[u8]) -> Result<(), SendError> {
                    fill_and_commit(self.ch.try_reserve(len)?, len, fill)
                }
                fn reserve_timeout(
                    &mut self,
                    len: usize,
                    fill: &[u8],
                    timeout: Duration,
                ) -> Result<(), SendError> {
                    let ch = &mut self.ch;
                    self.rt.block_on(async {
                        fill_and_commit(ch.reserve_timeout(len, timeout).await?, len, fill)
                    })
                }
                fn reserve_and_drop(&mut self, len: usize) -> Result<(), SendError> {
                    drop(self.ch.try_reserve(len)?);
                    Ok(())
                }
                fn send_batch(&mut self, batch: &[Vec<u8>]) -> Result<usize, SendError> {
                    self.rt.block_on(self.ch.send_batch(batch))
                }
                fn try_send_batch(&mut self, batch: &[Vec<u8>]) -> Result<usize, SendError> {
                    self.ch.try_send_batch(batch)
                }
                fn send_batch_timeout(
                    &mut self,
                    batch: &[Vec<u8>],
                    timeout: Duration,
                ) -> Result<usize, SendError> {
                    self.rt.block_on(self.ch.send_batch_timeout(batch, timeout))
                }
                fn max_frame(&mut self) -> usize {
                    let $me = self;
                    $max
                }
            }
        };
    }
    pub(super) use async_send_end;

    /// The receiving forms on an async end: an `AsyncChannel`'s or an `AsyncSubscriber`'s.
    macro_rules! async_recv_end {
        (impl [$($head:tt)*]) => {
            impl $($head)* {
                fn recv_value<V: PlainValue>(&mut self) -> Result<V, RecvError> {
                    let ch = &mut self.ch;
                    self.rt
                        .block_on(async { ch.recv_value::<V>().await.map(value_out) })
                }
                fn try_recv_value<V: PlainValue>(&mut self) -> Result<V, RecvError> {
                    self.ch.try_recv_value::<V>().map(value_out)
                }
                fn recv_value_timeout<V: PlainValue>(&mut self, timeout: Duration) -> Result<V, RecvError> {
                    let ch = &mut self.ch;
                    self.rt
                        .block_on(async { ch.recv_value_timeout::<V>(timeout).await.map(value_out) })
                }
                fn recv(&mut self) -> Result<Vec<u8>, RecvError> {
                    let ch = &mut self.ch;
                    self.rt
                        .block_on(async { ch.recv().await.map(|m| m.to_vec()) })
                }
                fn try_recv(&mut self) -> Result<Vec<u8>, RecvError> {
                    self.ch.try_recv().map(|m| m.to_vec())
                }
                fn recv_timeout(&mut self, timeout: Duration) -> Result<Vec<u8>, RecvError> {
                    let ch = &mut self.ch;
                    self.rt
                        .block_on(async { ch.recv_timeout(timeout).await.map(|m| m.to_vec()) })
                }
                fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecvError> {
                    self.rt.block_on(self.ch.recv_into(buf))
                }
                fn try_recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize, RecvError> {
                    self.ch.try_recv_into(buf)
                }
                fn recv_into_timeout(
                    &mut self,
                    buf: &mut Vec<u8>,
                    timeout: Duration,
                ) -> Result<usize, RecvError> {
                    self.rt.block_on(self.ch.recv_into_timeout(buf, timeout))
                }
                fn recv_json<T: DeserializeOwned>(&mut self) -> Result<T, RecvError> {
                    self.rt.block_on(self.ch.recv_json())
                }
                fn try_recv_json<T: DeserializeOwned>(&mut self) -> Result<T, RecvError> {
                    self.ch.try_recv_json()
                }
                fn recv_json_timeout<T: DeserializeOwned>(
                    &mut self,
                    timeout: Duration,
                ) -> Result<T, RecvError> {
                    self.rt.block_on(self.ch.recv_json_timeout(timeout))
                }
                fn recv_batch(&mut self, max: usize) -> Result<Vec<Vec<u8>>, RecvError> {
                    let (ch, rt) = (&mut self.ch, &self.rt);
                    collect_batch(|f| rt.block_on(ch.recv_batch(max, f)))
                }
                fn try_recv_batch(&mut self, max: usize) -> Result<Vec<Vec<u8>>, RecvError> {
                    collect_batch(|f| self.ch.try_recv_batch(max, f))
                }
                fn recv_batch_timeout(
                    &mut self,
                    max: usize,
                    timeout: Duration,
                ) -> Result<Vec<Vec<u8>>, RecvError> {
                    let (ch, rt) = (&mut self.ch, &self.rt);
                    collect_batch(|f| rt.block_on(ch.recv_batch_timeout(max, timeout, f)))
                }
                fn try_recv_number(&mut self) -> Result<u64, RecvError> {
                    self.ch.try_recv().map(|m| number_of(&m))
                }
            }
        };
    }
    pub(super) use async_recv_end;

    async_send_end!(impl [<C: BorrowMut<Channel> + Send + 'static> SendEnd for AsyncEnd<C>]
        max_frame(end) Channel::max_frame(end.ch.get_mut()));
    async_recv_end!(impl [<C: BorrowMut<Channel> + Send + 'static> RecvEnd for AsyncEnd<C>]);
}

#[cfg(feature = "tokio")]
use async_surface::AsyncShm;

// ---------------------------------------------------------------------------------------------
// Helpers

/// The capacity of the cases' rings.
const RING: usize = 64 << 10;

/// A ring of 64 KiB, so that a frame is small and long messages go in fragments.
fn config() -> Config {
    Config {
        capacity: RING,
        wait: WaitStrategy::Block,
    }
}

/// The names a case uses, and the removal of whatever a killed process left under them.
struct Names {
    name: String,
    _shm: NameGuard,
    _files: FallbackFiles,
}

fn names<S: Surface>(tag: &str) -> Names {
    names_under(&format!("cf-{}-{tag}", S::NAME))
}

/// [`Names`] for a name made unique from `stem`.
fn names_under(stem: &str) -> Names {
    let name = unique(stem);
    Names {
        _shm: NameGuard(name.clone()),
        _files: FallbackFiles(name.clone()),
        name,
    }
}

/// A created end and a connected one.
fn pair<S: Surface>(name: &str) -> (S::End, S::End) {
    let a = S::create(name, &config()).expect("create");
    let b = S::connect(name, WATCHDOG).expect("connect");
    (a, b)
}

/// Message `i` of `len` bytes: its number, then bytes that depend on it and their place.
fn numbered(i: u64, len: usize) -> Vec<u8> {
    let mut out: Vec<u8> = (0..len).map(|k| (k as u64 * 7 + i) as u8).collect();
    let head = len.min(8);
    out[..head].copy_from_slice(&i.to_le_bytes()[..head]);
    out
}

fn expect_message(got: Result<Vec<u8>, RecvError>, want: &[u8], what: &str) {
    match got {
        Ok(got) => {
            assert_eq!(got.len(), want.len(), "{what}: length");
            assert!(got == want, "{what}: the bytes changed on the way");
        }
        Err(e) => panic!("{what}: {e:?}"),
    }
}

/// Polls a `try_` form until it has something other than `Empty` (the watchdog bounds it).
fn first_not_empty<T>(mut attempt: impl FnMut() -> Result<T, RecvError>) -> Result<T, RecvError> {
    loop {
        match attempt() {
            Err(RecvError::Empty { .. }) => std::thread::yield_now(),
            other => return other,
        }
    }
}

/// Sends numbered messages of `len` bytes until the peer, which reads nothing, can take no
/// more, then empty ones until not even those fit, so that no message of any length can go now.
/// Returns the lengths sent, in order.
///
/// "No more" is a `send_timeout` that gives up twice in a row, the second time after waiting
/// [`FULL_CONFIRM`]: on the ipc-channel backend a `Timeout` only says that the lane's thread
/// has not sent the last message yet, which a thread kept off the core by a loaded machine
/// also causes; a lane that still has not sent it after that long is held by a full socket.
fn fill(end: &mut impl SendEnd, len: usize) -> Vec<usize> {
    /// How long the second try waits for room before the channel counts as full.
    const FULL_CONFIRM: Duration = Duration::from_millis(250);
    let mut sent = Vec::new();
    for len in [len, 0] {
        loop {
            let message = numbered(sent.len() as u64, len);
            let result = match end.send_timeout(&message, SHORT) {
                Err(SendError::Timeout { .. }) => end.send_timeout(&message, FULL_CONFIRM),
                first => first,
            };
            match result {
                Ok(()) => sent.push(len),
                Err(SendError::Timeout { .. }) => break,
                Err(e) => panic!("filling: {e:?}"),
            }
            assert!(
                sent.len() < 100_000,
                "a peer that reads nothing took {} messages",
                sent.len()
            );
        }
    }
    sent
}

fn drain(end: &mut impl RecvEnd, sent: &[usize]) {
    for (i, &len) in sent.iter().enumerate() {
        let want = numbered(i as u64, len);
        expect_message(end.recv_timeout(WATCHDOG), &want, "a queued message");
    }
}

fn assert_gave_up_at_deadline<T: std::fmt::Debug, E: std::fmt::Debug>(
    what: &str,
    timed_out: fn(&E) -> bool,
    call: impl FnOnce() -> Result<T, E>,
) {
    let started = Instant::now();
    let got = call();
    let waited = started.elapsed();
    assert!(
        matches!(&got, Err(e) if timed_out(e)),
        "{what}: expected Timeout, got {got:?}"
    );
    assert!(
        waited >= SHORT,
        "{what}: gave up after {waited:?}, before its deadline"
    );
}

fn send_timed_out(e: &SendError) -> bool {
    matches!(e, SendError::Timeout { .. })
}

fn recv_timed_out(e: &RecvError) -> bool {
    matches!(e, RecvError::Timeout { .. })
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Note {
    id: u32,
    text: String,
}

fn note(id: u32, len: usize) -> Note {
    Note {
        id,
        text: "é".repeat(len / 2),
    }
}

// ---------------------------------------------------------------------------------------------
// The cases

/// Sends messages of `sizes` from `from` on one thread while `to` receives them on this one.
fn one_way(from: &mut impl SendEnd, to: &mut impl RecvEnd, sizes: &[usize]) {
    std::thread::scope(|s| {
        s.spawn(|| {
            for (i, &len) in sizes.iter().enumerate() {
                from.send(&numbered(i as u64, len)).expect("send");
            }
        });
        for (i, &len) in sizes.iter().enumerate() {
            let want = numbered(i as u64, len);
            expect_message(to.recv_timeout(CASE_LIMIT), &want, &format!("{len} bytes"));
        }
    });
}

/// Empty, one byte, a line, a frame and a byte either side of it, several frames, several MiB:
/// each arrives whole and in order, both ways.
fn messages_of_every_size_class_arrive_whole_and_in_order<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "every size class");
    let names = names::<S>("sizes");
    let (mut a, mut b) = pair::<S>(&names.name);
    let frame = a.max_frame();
    let mut sizes = vec![0, 1, 80];
    if S::CAPS.frames {
        sizes.extend([frame - 1, frame, frame + 1, 3 * frame + 7]);
    }
    sizes.push(5 << 20);
    one_way(&mut a, &mut b, &sizes);
    one_way(&mut b, &mut a, &sizes);
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// `send_json`, `try_send_json` and `send_json_timeout` meet `recv_json`, `try_recv_json` and
/// `recv_json_timeout`; a value of several MiB goes through; a message that is not JSON for
/// the type is `RecvError::Json` and the channel keeps working.
fn json_goes_through_every_send_and_receive_form<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "json");
    let names = names::<S>("json");
    let (mut a, mut b) = pair::<S>(&names.name);
    a.send_json(&note(1, 10)).expect("send_json");
    assert_eq!(b.recv_json::<Note>().expect("recv_json"), note(1, 10));
    a.try_send_json(&note(2, 100)).expect("try_send_json");
    assert_eq!(b.recv_json_timeout::<Note>(WATCHDOG).unwrap(), note(2, 100));
    a.send_json_timeout(&note(3, 1000), WATCHDOG)
        .expect("send_json_timeout");
    assert_eq!(
        first_not_empty(|| b.try_recv_json::<Note>()).unwrap(),
        note(3, 1000)
    );
    assert_gave_up_at_deadline("recv_json_timeout", recv_timed_out, || {
        b.recv_json_timeout::<Note>(SHORT)
    });
    // Several MiB of text, in fragments where the backend has frames.
    let big = note(4, 3 << 20);
    std::thread::scope(|s| {
        s.spawn(|| a.send_json(&big).expect("send_json of several MiB"));
        assert!(
            b.recv_json::<Note>().unwrap() == big,
            "the big value changed"
        );
    });
    // Not JSON for `Note`: an error for that message only.
    a.send(b"{\"id\": \"seven\"}").unwrap();
    assert!(matches!(b.recv_json::<Note>(), Err(RecvError::Json { .. })));
    a.send_json(&note(5, 2)).unwrap();
    assert_eq!(b.recv_json::<Note>().unwrap(), note(5, 2));
    // A value that cannot be serialised sends nothing.
    let unserialisable: std::collections::HashMap<(u8, u8), u8> = [((1, 2), 3)].into();
    assert!(matches!(
        a.send_json(&unserialisable),
        Err(SendError::Json { .. })
    ));
    assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// `recv_into` replaces the caller's buffer with the message, whether the buffer was too
/// small (it grows) or longer (it is cut to the message); the `try_` and deadline forms leave
/// it as it was when there is nothing.
fn recv_into_replaces_the_callers_buffer_whatever_its_size<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "recv_into");
    let names = names::<S>("into");
    let (mut a, mut b) = pair::<S>(&names.name);
    let mut small = Vec::with_capacity(4);
    a.send(&numbered(0, 100)).unwrap();
    assert_eq!(b.recv_into(&mut small).unwrap(), 100);
    assert_eq!(small, numbered(0, 100));
    let mut long = vec![0xAA; 4096];
    a.send(b"short").unwrap();
    assert_eq!(b.recv_into_timeout(&mut long, WATCHDOG).unwrap(), 5);
    assert_eq!(long, b"short");
    assert!(matches!(
        b.try_recv_into(&mut long),
        Err(RecvError::Empty { .. })
    ));
    assert_gave_up_at_deadline("recv_into_timeout", recv_timed_out, || {
        b.recv_into_timeout(&mut long, SHORT)
    });
    assert_eq!(
        long, b"short",
        "a receive that got nothing leaves the buffer alone"
    );
    a.try_send(b"now").unwrap();
    assert_eq!(first_not_empty(|| b.try_recv_into(&mut long)).unwrap(), 3);
    assert_eq!(long, b"now");
    // Several MiB into the small buffer.
    let big = numbered(1, 3 << 20);
    let mut buf = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| a.send(&big).expect("send several MiB"));
        assert_eq!(b.recv_into(&mut buf).unwrap(), big.len());
    });
    assert!(buf == big, "the long message changed on the way");
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// With nothing there, `try_recv` is `Empty`; with a peer that reads nothing, sends fill the
/// channel until `try_send` (and `try_send_json`, `try_reserve`) is `Full`. Nothing was lost
/// or sent twice: the peer then reads every message in order, and sending goes on.
fn try_forms_are_empty_and_full_where_the_others_would_wait<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "try forms");
    let names = names::<S>("try");
    let (mut a, mut b) = pair::<S>(&names.name);
    assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
    assert!(matches!(
        b.try_recv_json::<Note>(),
        Err(RecvError::Empty { .. })
    ));
    let len = (16 << 10).min(a.max_frame());
    let sent = fill(&mut a, len);
    assert!(!sent.is_empty(), "nothing could be sent");
    assert!(matches!(
        a.try_send(&numbered(0, len)),
        Err(SendError::Full { .. })
    ));
    assert!(matches!(a.try_send(b""), Err(SendError::Full { .. })));
    assert!(matches!(
        a.try_send_json(&note(0, 8)),
        Err(SendError::Full { .. })
    ));
    assert!(matches!(
        a.try_reserve(len, b"x"),
        Err(SendError::Full { .. })
    ));
    drain(&mut b, &sent);
    assert!(matches!(b.try_recv(), Err(RecvError::Empty { .. })));
    a.send_timeout(b"after", WATCHDOG).unwrap();
    expect_message(
        first_not_empty(|| b.try_recv()),
        b"after",
        "after the drain",
    );
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// A plain value of the kind the value forms carry: a `#[repr(C)]` struct with no padding.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Tick {
    price: u64,
    qty: u32,
    side: u32,
}

/// A value aligned past a frame's 8 bytes, so that it is read in place only when it happens to
/// land on a 64-byte boundary, and copied out otherwise.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Clone, Copy, Debug, PartialEq)]
#[repr(C, align(64))]
struct Wide {
    words: [u64; 8],
}

/// Plain values go through every value form and come back equal, read through an aligned
/// reference: small ones read in place, an over-aligned one, and one longer than a frame (in
/// fragments, so reassembled and copied out); a message of the wrong size is `WrongSize` for
/// that message only, and the `try_` and deadline forms are `Empty`, `Full` and `Timeout` where
/// the others would wait.
fn plain_values_go_through_every_value_form<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "values");
    let names = names::<S>("values");
    let (mut a, mut b) = pair::<S>(&names.name);
    let tick = |n: u64| Tick {
        price: 100 + n,
        qty: n as u32,
        side: (n % 2) as u32,
    };
    a.send_value(&tick(1)).expect("send_value");
    assert_eq!(b.recv_value::<Tick>().expect("recv_value"), tick(1));
    a.try_send_value(&tick(2)).expect("try_send_value");
    assert_eq!(b.recv_value_timeout::<Tick>(WATCHDOG).unwrap(), tick(2));
    a.send_value_timeout(&tick(3), WATCHDOG)
        .expect("send_value_timeout");
    assert_eq!(
        first_not_empty(|| b.try_recv_value::<Tick>()).unwrap(),
        tick(3)
    );
    // Sent as plain bytes, received as a value: nothing but the bytes travels.
    a.send(tick(4).as_bytes()).unwrap();
    assert_eq!(b.recv_value::<Tick>().unwrap(), tick(4));
    for n in 0..4u64 {
        let wide = Wide { words: [n; 8] };
        a.send_value(&wide).unwrap();
        assert_eq!(b.recv_value::<Wide>().unwrap(), wide);
    }
    // Longer than a frame (of half the ring, less its header) where the backend has frames.
    type Big = [u64; RING / 16];
    assert!(std::mem::size_of::<Big>() > RING / 2 - 72);
    let big: Box<Big> = Box::new(std::array::from_fn(|i| i as u64 * 7));
    std::thread::scope(|s| {
        s.spawn(|| {
            a.send_value(&*big)
                .expect("send_value of a value past a frame")
        });
        assert!(
            b.recv_value::<Big>().unwrap() == *big,
            "the big value changed"
        );
    });
    // The wrong size, either way: an error for that message only.
    a.send(b"three").unwrap();
    assert!(matches!(
        b.recv_value::<u64>(),
        Err(RecvError::WrongSize {
            len: 5,
            expected: 8,
            ..
        })
    ));
    a.send_value(&tick(5)).unwrap();
    assert!(matches!(
        b.recv_value::<u64>(),
        Err(RecvError::WrongSize {
            len: 16,
            expected: 8,
            ..
        })
    ));
    a.send_value(&tick(6)).unwrap();
    assert_eq!(b.recv_value::<Tick>().unwrap(), tick(6));
    assert!(matches!(
        b.try_recv_value::<Tick>(),
        Err(RecvError::Empty { .. })
    ));
    assert_gave_up_at_deadline("recv_value_timeout", recv_timed_out, || {
        b.recv_value_timeout::<Tick>(SHORT)
    });
    let sent = fill(&mut a, 16);
    assert!(matches!(
        a.try_send_value(&tick(7)),
        Err(SendError::Full { .. })
    ));
    assert_gave_up_at_deadline("send_value_timeout", send_timed_out, || {
        a.send_value_timeout(&tick(7), SHORT)
    });
    drain(&mut b, &sent);
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// Every deadline form gives up with `Timeout` once its deadline passed, not before: the
/// receives on an empty channel, the sends and the grant on a full one.
fn every_deadline_form_gives_up_at_its_deadline<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "deadlines");
    let names = names::<S>("deadline");
    let (mut a, mut b) = pair::<S>(&names.name);
    let mut buf = Vec::new();
    assert_gave_up_at_deadline("recv_timeout", recv_timed_out, || b.recv_timeout(SHORT));
    assert_gave_up_at_deadline("recv_into_timeout", recv_timed_out, || {
        b.recv_into_timeout(&mut buf, SHORT)
    });
    assert_gave_up_at_deadline("recv_json_timeout", recv_timed_out, || {
        b.recv_json_timeout::<Note>(SHORT)
    });
    let len = (16 << 10).min(a.max_frame());
    let sent = fill(&mut a, len);
    assert_gave_up_at_deadline("send_timeout", send_timed_out, || {
        a.send_timeout(b"late", SHORT)
    });
    assert_gave_up_at_deadline("send_json_timeout", send_timed_out, || {
        a.send_json_timeout(&note(0, 8), SHORT)
    });
    assert_gave_up_at_deadline("reserve_timeout", send_timed_out, || {
        a.reserve_timeout(len, b"late", SHORT)
    });
    // Nothing of what gave up arrives.
    drain(&mut b, &sent);
    assert!(matches!(
        b.recv_timeout(SHORT),
        Err(RecvError::Timeout { .. })
    ));
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// A grant (`reserve`, `try_reserve`, `reserve_timeout`) is written in place and sends the
/// bytes committed, no more; one dropped without a commit sends nothing; one longer than a
/// frame is `TooLarge`.
fn a_grant_sends_only_what_is_committed<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "grants");
    let names = names::<S>("grant");
    let (mut a, mut b) = pair::<S>(&names.name);
    a.reserve(64, b"grant").expect("reserve");
    expect_message(b.recv(), b"grant", "reserve");
    a.try_reserve(16, b"").expect("try_reserve");
    expect_message(b.recv_timeout(WATCHDOG), b"", "an empty commit");
    a.reserve_timeout(100, &[9; 100], WATCHDOG)
        .expect("reserve_timeout");
    expect_message(b.recv_timeout(WATCHDOG), &[9; 100], "reserve_timeout");
    a.reserve_and_drop(32).expect("try_reserve");
    assert!(matches!(
        b.recv_timeout(SHORT),
        Err(RecvError::Timeout { .. })
    ));
    let frame = a.max_frame();
    if S::CAPS.frames {
        a.reserve(frame, &numbered(0, frame))
            .expect("a grant of a whole frame");
        expect_message(
            b.recv_timeout(WATCHDOG),
            &numbered(0, frame),
            "a whole frame",
        );
    }
    assert!(matches!(
        a.try_reserve(frame + 1, b""),
        Err(SendError::TooLarge { len, .. }) if len == frame + 1
    ));
    a.send(b"still works").unwrap();
    expect_message(b.recv_timeout(WATCHDOG), b"still works", "after TooLarge");
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// What a send does before anybody connected: [`Caps::sends_before_connect`].
fn sending_before_the_peer_connects_does_what_the_backend_promises<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "before connect");
    let names = names::<S>("early");
    let mut a = S::create(&names.name, &config()).expect("create");
    let mut early = Vec::new();
    if S::CAPS.sends_before_connect {
        a.try_send(b"early").expect("try_send before connect");
        a.send_timeout(b"early too", SHORT)
            .expect("send_timeout before connect");
        early = vec![&b"early"[..], &b"early too"[..]];
    } else {
        assert!(matches!(a.try_send(b"early"), Err(SendError::Full { .. })));
        assert_gave_up_at_deadline("send_timeout before connect", send_timed_out, || {
            a.send_timeout(b"early", SHORT)
        });
        assert_gave_up_at_deadline("send_json_timeout before connect", send_timed_out, || {
            a.send_json_timeout(&note(0, 2), SHORT)
        });
    }
    let mut b = S::connect(&names.name, WATCHDOG).expect("connect");
    a.send(b"after").unwrap();
    for want in early {
        expect_message(b.recv_timeout(WATCHDOG), want, "sent before connect");
    }
    expect_message(b.recv_timeout(WATCHDOG), b"after", "sent after connect");
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// A peer that drops its end (either one) is `Disconnected`, naming the channel, once
/// everything it sent before has been received; a send to it is `Disconnected` too.
fn a_peer_that_closes_is_disconnected_after_everything_it_sent<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "close");
    for creator_closes in [false, true] {
        let names = names::<S>("close");
        let name = &names.name;
        let (a, b) = pair::<S>(name);
        let (mut closing, mut staying) = if creator_closes { (a, b) } else { (b, a) };
        for i in 0..BEFORE_THE_END {
            closing.send(&numbered(i, i as usize * 3)).unwrap();
        }
        drop(closing);
        for i in 0..BEFORE_THE_END {
            let want = numbered(i, i as usize * 3);
            expect_message(
                staying.recv_timeout(WATCHDOG),
                &want,
                "sent before the close",
            );
        }
        match staying.recv_timeout(WATCHDOG) {
            Err(RecvError::Disconnected { channel }) => assert_eq!(channel, *name),
            other => panic!("creator closes {creator_closes}: {other:?}"),
        }
        assert!(matches!(
            staying.try_recv(),
            Err(RecvError::Disconnected { .. })
        ));
        match staying.send(b"anyone?") {
            Err(SendError::Disconnected { channel }) => assert_eq!(channel, *name),
            other => panic!("a send to a closed peer: {other:?}"),
        }
        drop(staying);
        assert_nothing_left(name);
    }
}

/// Receives `want` (in order) with `recv_batch` calls of at most `max` messages each; the
/// first call waits, and every call hands at least one message and at most `max`.
fn recv_in_batches(end: &mut impl End, want: &[Vec<u8>], max: usize) {
    let mut got = 0;
    while got < want.len() {
        let batch = end.recv_batch(max).expect("recv_batch");
        assert!(
            (1..=max).contains(&batch.len()),
            "a batch of {} for a max of {max}",
            batch.len()
        );
        for msg in batch {
            assert!(got < want.len(), "more messages than were sent");
            assert!(msg == want[got], "message {got} changed on the way");
            got += 1;
        }
    }
}

/// `send_batch` and `send_batch_timeout` send every message of a batch, small ones and (on
/// shared memory) ones around a frame and longer, in order; `recv_batch` receives them in
/// batches of at most its `max`, whole and in order, and `recv_batch_timeout` the rest.
fn a_batch_arrives_whole_and_in_order<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "batches");
    let names = names::<S>("batch");
    let (mut a, mut b) = pair::<S>(&names.name);
    let frame = a.max_frame();
    let mut sizes: Vec<usize> = (0..600)
        .map(|i| [0, 1, 8, 55, 56, 57, 80, 200][i % 8])
        .collect();
    if S::CAPS.frames {
        sizes.extend([frame - 1, frame, frame + 1, 3 * frame + 7, 3]);
    }
    let batch: Vec<Vec<u8>> = (0..sizes.len())
        .map(|i| numbered(i as u64, sizes[i]))
        .collect();
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(a.send_batch(&batch).expect("send_batch"), batch.len()));
        recv_in_batches(&mut b, &batch, 7);
    });
    std::thread::scope(|s| {
        s.spawn(|| {
            let sent = b.send_batch_timeout(&batch, CASE_LIMIT);
            assert_eq!(sent.expect("send_batch_timeout"), batch.len());
        });
        let mut got = Vec::new();
        while got.len() < batch.len() {
            got.extend(
                a.recv_batch_timeout(usize::MAX, CASE_LIMIT)
                    .expect("recv_batch_timeout"),
            );
        }
        assert!(got == batch, "the messages changed on the way");
    });
    assert_eq!(a.send_batch(&[]).unwrap(), 0, "an empty batch");
    assert_eq!(b.recv_batch(0).unwrap().len(), 0, "a max of 0");
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// The batch forms where the ring is empty or full: `try_recv_batch` is `Empty` and
/// `recv_batch_timeout` gives up at its deadline; on a full ring `try_send_batch` is `Full` and
/// `send_batch_timeout` gives up, sending nothing; a batch larger than the room sends what fits
/// (at least its first message) and says how many, and exactly those arrive.
fn batch_forms_stop_where_the_ring_is_empty_or_full<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "batch limits");
    let names = names::<S>("batch-full");
    let (mut a, mut b) = pair::<S>(&names.name);
    assert!(matches!(b.try_recv_batch(8), Err(RecvError::Empty { .. })));
    assert_gave_up_at_deadline("recv_batch_timeout", recv_timed_out, || {
        b.recv_batch_timeout(8, SHORT)
    });
    let len = (16 << 10).min(a.max_frame());
    let sent = fill(&mut a, len);
    let more = vec![numbered(0, 1), numbered(1, 1)];
    assert!(matches!(
        a.try_send_batch(&more),
        Err(SendError::Full { .. })
    ));
    assert_gave_up_at_deadline("send_batch_timeout", send_timed_out, || {
        a.send_batch_timeout(&more, SHORT)
    });
    drain(&mut b, &sent);
    assert!(matches!(b.try_recv_batch(8), Err(RecvError::Empty { .. })));

    // More than the ring holds: some go, and just those arrive.
    let many: Vec<Vec<u8>> = (0..4096).map(|i| numbered(i, 100)).collect();
    let went = loop {
        match a.try_send_batch(&many) {
            Ok(n) => break n,
            // The ipc-channel backend's lane may still be busy with the last send.
            Err(SendError::Full { .. }) if !S::CAPS.frames => std::thread::yield_now(),
            other => panic!("try_send_batch on an empty ring: {other:?}"),
        }
    };
    assert!((1..=many.len()).contains(&went), "{went} of {}", many.len());
    if S::CAPS.frames {
        assert!(went < many.len(), "400 KiB went into a 64 KiB ring at once");
    }
    let mut got = Vec::new();
    while got.len() < went {
        got.extend(
            b.recv_batch_timeout(usize::MAX, WATCHDOG)
                .expect("the batch that went"),
        );
    }
    assert!(got[..] == many[..went], "what went is what arrives");
    assert!(matches!(
        b.recv_timeout(SHORT),
        Err(RecvError::Timeout { .. })
    ));
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// After a peer that closed, the batch receives hand over everything it sent and then fail
/// with `Disconnected`, and a batch send fails with `Disconnected`, sending nothing.
fn batches_end_at_a_peer_that_closed<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "batch close");
    let names = names::<S>("batch-close");
    let name = &names.name;
    let (mut a, mut b) = pair::<S>(name);
    let batch: Vec<Vec<u8>> = (0..BEFORE_THE_END)
        .map(|i| numbered(i, i as usize * 3))
        .collect();
    assert_eq!(a.send_batch(&batch).unwrap(), batch.len());
    drop(a);
    recv_in_batches(&mut b, &batch, 16);
    match b.recv_batch(16) {
        Err(RecvError::Disconnected { channel }) => assert_eq!(channel, *name),
        other => panic!("a batch receive after the close: {other:?}"),
    }
    assert!(matches!(
        b.try_recv_batch(16),
        Err(RecvError::Disconnected { .. })
    ));
    match b.send_batch(&batch) {
        Err(SendError::Disconnected { channel }) => assert_eq!(channel, *name),
        other => panic!("a batch send to a closed peer: {other:?}"),
    }
    drop(b);
    assert_nothing_left(name);
}

/// What a batch receive against a sender that never stops may take, on a loaded machine:
/// a ring's worth of messages copied out one by one, in a debug build.
const BOUNDED_BATCH: Duration = Duration::from_millis(200);

/// Against a sender that never lets the channel run empty (a process streaming one-byte
/// messages), a batch receive whose `max` is `usize::MAX` still returns soon, having handed
/// over at most a ring's worth ([`Caps::batch_bound`]), in order: `try_recv_batch`,
/// `recv_batch_timeout` with a 10 ms deadline and `recv_batch` each return within
/// [`BOUNDED_BATCH`], call after call.
fn a_batch_receive_does_bounded_work_against_a_sender_that_never_stops<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "endless batch");
    let names = names::<S>("endless");
    let name = &names.name;
    let mut end = S::create(name, &config()).expect("create");
    let mut child = spawn_peer::<S>("stream", name);
    wait_for_line(&mut child, "streaming");
    let mut next: Option<u8> = None;
    let mut handed = 0;
    for round in 0..5 {
        for form in ["try_recv_batch", "recv_batch_timeout", "recv_batch"] {
            let (got, took) = loop {
                let started = Instant::now();
                let got = match form {
                    "try_recv_batch" => end.try_recv_batch(usize::MAX),
                    "recv_batch_timeout" => {
                        end.recv_batch_timeout(usize::MAX, Duration::from_millis(10))
                    }
                    _ => end.recv_batch(usize::MAX),
                };
                match got {
                    // The stream was between two batches (or the 10 ms passed first).
                    Err(RecvError::Empty { .. } | RecvError::Timeout { .. }) => {
                        std::thread::yield_now()
                    }
                    got => break (got.expect(form), started.elapsed()),
                }
            };
            assert!(
                took <= BOUNDED_BATCH,
                "round {round}: {form}(usize::MAX) took {took:?} ({} messages)",
                got.len()
            );
            assert!(
                (1..=S::CAPS.batch_bound).contains(&got.len()),
                "round {round}: {form}(usize::MAX) handed {} messages, more than {}",
                got.len(),
                S::CAPS.batch_bound
            );
            for msg in &got {
                assert_eq!(msg.len(), 1, "a streamed message changed on the way");
                if let Some(want) = next {
                    assert_eq!(msg[0], want, "message {handed} out of order");
                }
                next = Some(msg[0].wrapping_add(1));
                handed += 1;
            }
        }
    }
    child.kill();
    reap_killed(&mut child);
    drop(end);
    assert_nothing_left(name);
}

/// Messages in a batch of this many (each a frame) go out with one `send_batch`.
const WHOLE_BATCH: u64 = 2000;
/// Batches sent to the poller.
const WHOLE_BATCHES: u64 = 150;

/// A batch is seen all or nothing: while a consumer polls with `try_recv` on another thread,
/// a producer sends batches of [`WHOLE_BATCH`] numbered messages with `send_batch`, each into a
/// ring with room for all of it (the consumer has taken the batch before). Where
/// [`Caps::batches_whole`], once the consumer sees the first message of a batch, the rest of
/// it is readable at once: `try_recv` never finds the ring empty in the middle of a batch.
/// Every surface delivers every message in order.
fn a_batch_becomes_readable_all_at_once<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "whole batches");
    let names = names::<S>("whole");
    let (mut a, mut b) = pair::<S>(&names.name);
    let batches: Vec<Vec<Vec<u8>>> = (0..WHOLE_BATCHES)
        .map(|round| {
            (0..WHOLE_BATCH)
                .map(|k| numbered(round * WHOLE_BATCH + k, 8))
                .collect()
        })
        .collect();
    let taken = AtomicUsize::new(0);
    // Set when the consumer is done, or failed: the producer stops waiting for it.
    let consumer_done = AtomicBool::new(false);
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let mut halfway = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            for (round, batch) in batches.iter().enumerate() {
                // The ring is empty: the whole batch fits its room.
                while taken.load(Ordering::Acquire) < round * WHOLE_BATCH as usize {
                    if consumer_done.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::yield_now();
                }
                assert_eq!(a.send_batch(batch).expect("send_batch"), batch.len());
            }
        });
        let _done = Done(&consumer_done);
        let total = WHOLE_BATCHES * WHOLE_BATCH;
        let mut got = 0;
        let mut idle = 0u64;
        while got < total {
            match b.try_recv_number() {
                Ok(number) => assert_eq!(number, got, "a message out of order"),
                Err(RecvError::Empty { .. }) if got % WHOLE_BATCH == 0 => {
                    // Between batches: watch closely for the next (yielding now and then on
                    // a loaded machine), so as to be there while it is written.
                    idle += 1;
                    if idle % 1024 == 0 {
                        std::thread::yield_now();
                    }
                    std::hint::spin_loop();
                    continue;
                }
                Err(RecvError::Empty { .. }) => {
                    assert!(
                        !S::CAPS.batches_whole,
                        "message {} of a batch was not there with the first",
                        got % WHOLE_BATCH
                    );
                    halfway += 1;
                    continue;
                }
                Err(e) => panic!("message {got}: {e:?}"),
            }
            got += 1;
            if got % WHOLE_BATCH == 0 {
                taken.store(got as usize, Ordering::Release);
            }
        }
    });
    if !S::CAPS.batches_whole {
        println!("{}: {halfway} looks found a batch in part", S::NAME);
    }
    drop((a, b));
    assert_nothing_left(&names.name);
}

/// How soon after a receiver's death every send says so: the death watcher hears of it
/// through the peer's pidfd at once; this is that, on a loaded machine.
const SEND_SEES_DEATH: Duration = Duration::from_secs(1);

/// One form of send, as a call on an end.
type SendForm<'a, E> = dyn FnMut(&mut E) -> Result<(), SendError> + 'a;

/// A send to a receiver whose process was killed says `PeerGone`, naming its pid, soon after
/// the death in every form: `try_send` within [`SEND_SEES_DEATH`] (it may go through, or find
/// the ring full, until the news arrives), and then every other form at its first call, before
/// it writes anything. A send before the kill goes through. Twice: with an end that only sent
/// before the kill, and with one that also waited in a receive (on shared memory its receiving
/// side then watches the peer, and the sender relies on that).
fn every_send_form_is_peer_gone_once_the_receiver_was_killed<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "killed receiver");
    for received_first in [false, true] {
        let names = names::<S>("kill-rx");
        let name = &names.name;
        let mut end = S::create(name, &config()).expect("create");
        let mut child = spawn_peer::<S>("sink", name);
        wait_for_line(&mut child, "connected");
        end.send(b"before").expect("a send before the kill");
        if received_first {
            assert!(matches!(
                end.recv_timeout(SHORT),
                Err(RecvError::Timeout { .. })
            ));
            end.send(b"after a receive")
                .expect("a send before the kill");
        }
        let pid = child.pid();
        child.kill();
        reap_killed(&mut child);
        sends_say_peer_gone(&mut end, name, pid);
        drop(end);
        assert_nothing_left(name);
    }
}

/// Every send form on `end`, whose receiver (process `pid`) was just killed: `try_send` until
/// it says `PeerGone` (within [`SEND_SEES_DEATH`]), then each other form at its first call.
fn sends_say_peer_gone<E: End>(end: &mut E, name: &str, pid: u32) {
    let msg = numbered(1, 100);
    let batch = vec![numbered(2, 10), numbered(3, 10)];
    let killed = Instant::now();
    let gone = |what: &str, got: Result<(), SendError>| match got {
        Err(SendError::PeerGone { pid: p, channel }) => {
            assert_eq!(p, pid, "{what}: the pid");
            assert_eq!(channel, *name, "{what}: the channel");
            true
        }
        Ok(()) | Err(SendError::Full { .. }) => false,
        Err(e) => panic!("{what} to a killed receiver: {e:?}"),
    };
    while !gone("try_send", end.try_send(&msg)) {
        assert!(
            killed.elapsed() <= SEND_SEES_DEATH,
            "try_send to a receiver killed {:?} ago still goes through",
            killed.elapsed()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut forms: [(&str, &mut SendForm<'_, E>); 11] = [
        ("send", &mut |e| e.send(&msg)),
        ("send_timeout", &mut |e| e.send_timeout(&msg, WATCHDOG)),
        ("send_json", &mut |e| e.send_json(&note(1, 10))),
        ("try_send_json", &mut |e| e.try_send_json(&note(1, 10))),
        ("send_json_timeout", &mut |e| {
            e.send_json_timeout(&note(1, 10), WATCHDOG)
        }),
        ("reserve", &mut |e| e.reserve(16, b"x")),
        ("try_reserve", &mut |e| e.try_reserve(16, b"x")),
        ("reserve_timeout", &mut |e| {
            e.reserve_timeout(16, b"x", WATCHDOG)
        }),
        ("send_batch", &mut |e| e.send_batch(&batch).map(drop)),
        ("try_send_batch", &mut |e| {
            e.try_send_batch(&batch).map(drop)
        }),
        ("send_batch_timeout", &mut |e| {
            e.send_batch_timeout(&batch, WATCHDOG).map(drop)
        }),
    ];
    for (what, form) in &mut forms {
        assert!(
            gone(what, form(end)),
            "{what} to a receiver known dead went through"
        );
    }
}

/// The sending half of a split channel whose receiving half watched the peer (it waited) and
/// was then dropped still learns of the peer's death: the sender watches the peer itself from
/// then on.
#[test]
fn a_sending_half_whose_receiving_half_is_gone_still_learns_of_the_death() {
    let _dog = Watchdog::arm(CASE_LIMIT, "split sender");
    let names = names::<ChannelShm>("kill-split");
    let name = &names.name;
    let ch = Channel::create(name, &config()).expect("create");
    let mut child = spawn_peer::<ChannelShm>("sink", name);
    wait_for_line(&mut child, "connected");
    let (mut tx, mut rx) = ch.into_split();
    // The receiving half waits first, so the sender's first send finds the peer watched.
    assert!(matches!(
        rx.recv_timeout(SHORT),
        Err(RecvError::Timeout { .. })
    ));
    tx.send(b"while the receiving half watches").unwrap();
    drop(rx);
    tx.send(b"after it went").unwrap();
    let pid = child.pid();
    child.kill();
    reap_killed(&mut child);
    let killed = Instant::now();
    loop {
        match tx.try_send(b"anyone?") {
            Err(SendError::PeerGone { pid: p, .. }) => {
                assert_eq!(p, pid);
                break;
            }
            Ok(()) | Err(SendError::Full { .. }) => assert!(
                killed.elapsed() <= SEND_SEES_DEATH,
                "the sender did not hear of the death within {SEND_SEES_DEATH:?}"
            ),
            Err(e) => panic!("a send to a killed receiver: {e:?}"),
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(tx);
    assert_nothing_left(name);
}

/// Messages each client of a listener exchanges.
const CLIENT_MESSAGES: u64 = 20;

/// The peer's side, in a process of its own (this binary run again), on the surface its role
/// names (the role `conformance-peer`, see `roles`). Roles:
/// - `create` / `connect`: makes its end, waits for one message, sends [`BEFORE_THE_END`]
///   numbered ones, says `sent`, and waits to be killed;
/// - `client`: connects to a listener, checks the echo of [`CLIENT_MESSAGES`] messages, exits;
/// - `hold`: connects to a listener, checks one echo, says `connected`, waits to be killed;
/// - `serve`: binds a listener, says `ready`, and echoes for every client until killed;
/// - `stream`: connects, says `streaming`, and sends one-byte messages (a counter) in batches
///   of 64 as fast as the channel takes them, until a send fails or it is killed;
/// - `sink`: connects, says `connected`, reads nothing and waits to be killed.
pub(crate) fn peer_process(role: &str) {
    let words: Vec<&str> = role.split(' ').collect();
    let [surface, side, name] = words[..] else {
        panic!("bad role {role:?}");
    };
    match surface {
        "channel_shm" => peer::<ChannelShm>(side, name),
        "endpoint_shm" => peer::<EndpointShm>(side, name),
        "endpoint_ipc" => peer::<EndpointIpc>(side, name),
        #[cfg(feature = "tokio")]
        "async_shm" => peer::<AsyncShm<true>>(side, name),
        #[cfg(feature = "tokio")]
        "async_reactor" => peer::<AsyncShm<false>>(side, name),
        _ => panic!("no surface {surface:?}"),
    }
    std::process::exit(0);
}

/// Starts a peer process on `S` in `side` for `name`.
fn spawn_peer<S: Surface>(side: &str, name: &str) -> ChildGuard {
    let role = format!("{} {side} {name}", S::NAME);
    let mut env = vec![];
    if S::FORCED_IN_PEERS {
        env.push((shmlink::testing::FORCE_FALLBACK_ENV, "1"));
    }
    crate::roles::spawn(PEER_ROLE, &role, &env)
}

/// Waits to be killed; bounded, so that a parent that failed leaves no process behind.
fn wait_to_be_killed() -> ! {
    std::thread::sleep(Duration::from_secs(60));
    std::process::exit(1);
}

/// Message `i` of a listener's client: lengths that vary, one longer than a frame.
fn client_message(i: u64, frame: usize) -> Vec<u8> {
    let len = if i == 7 {
        frame + 1
    } else {
        (i as usize * 37) % 300
    };
    numbered(i, len)
}

fn peer<S: Surface>(side: &str, name: &str) {
    match side {
        "create" | "connect" => {
            let mut end = if side == "create" {
                let end = S::create(name, &config()).expect("peer create");
                println!("ready");
                end
            } else {
                S::connect(name, WATCHDOG).expect("peer connect")
            };
            expect_message(end.recv_timeout(WATCHDOG), b"hello", "the parent's hello");
            for i in 0..BEFORE_THE_END {
                end.send(&numbered(i, i as usize * 3)).expect("peer send");
            }
            println!("sent");
            wait_to_be_killed();
        }
        "client" => {
            let mut end = S::connect(name, WATCHDOG).expect("client connect");
            let frame = if S::CAPS.frames {
                end.max_frame()
            } else {
                1000
            };
            for i in 0..CLIENT_MESSAGES {
                let msg = client_message(i, frame);
                end.send(&msg).expect("client send");
                expect_message(end.recv_timeout(WATCHDOG), &msg, "an echo");
            }
        }
        "hold" => {
            let mut end = S::connect(name, WATCHDOG).expect("client connect");
            end.send(b"hold").expect("client send");
            expect_message(end.recv_timeout(WATCHDOG), b"hold", "an echo");
            println!("connected");
            wait_to_be_killed();
        }
        "stream" => {
            let mut end = S::connect(name, WATCHDOG).expect("streamer connect");
            // Every batch of 64 counted messages there is, made once.
            let batches: Vec<Vec<Vec<u8>>> = (0..=255u8)
                .map(|first| (0..64).map(|k| vec![first.wrapping_add(k)]).collect())
                .collect();
            let mut next = 0u8;
            println!("streaming");
            let started = Instant::now();
            while started.elapsed() < CASE_LIMIT {
                match end.send_batch(&batches[usize::from(next)]) {
                    Ok(sent) => next = next.wrapping_add(sent as u8),
                    Err(_) => break,
                }
            }
        }
        "sink" => {
            let _end = S::connect(name, WATCHDOG).expect("sink connect");
            println!("connected");
            wait_to_be_killed();
        }
        "serve" => {
            let mut listener = S::bind(name, &config(), 8).expect("bind");
            println!("ready");
            loop {
                let conn = S::accept(&mut listener).expect("accept");
                std::thread::spawn(move || echo_until_it_ends(conn));
            }
        }
        _ => panic!("no role {side:?}"),
    }
}

/// Echoes every message until a receive or send fails; returns the receive's error (a failed
/// send fails the test).
fn echo_until_it_ends(mut end: impl End) -> RecvError {
    loop {
        match end.recv_timeout(CASE_LIMIT) {
            Ok(msg) => end.send(&msg).expect("echo"),
            Err(e) => return e,
        }
    }
}

/// A peer whose process is killed (the creator or the connector) is `PeerGone`, naming its pid
/// and the channel, once everything it sent before has been received.
fn killed_peer<S: Surface>(peer_creates: bool) {
    let _dog = Watchdog::arm(CASE_LIMIT, "killed peer");
    let names = names::<S>(if peer_creates { "kill-cr" } else { "kill-co" });
    let name = &names.name;
    let side = if peer_creates { "create" } else { "connect" };
    let mut end;
    let mut child: ChildGuard;
    if peer_creates {
        child = spawn_peer::<S>(side, name);
        wait_for_line(&mut child, "ready");
        end = S::connect(name, WATCHDOG).expect("connect");
    } else {
        end = S::create(name, &config()).expect("create");
        child = spawn_peer::<S>(side, name);
    }
    end.send(b"hello").unwrap();
    wait_for_line(&mut child, "sent");
    let pid = child.pid();
    child.kill();
    reap_killed(&mut child);
    for i in 0..BEFORE_THE_END {
        let want = numbered(i, i as usize * 3);
        expect_message(end.recv_timeout(WATCHDOG), &want, "sent before the kill");
    }
    match end.recv_timeout(WATCHDOG) {
        Err(RecvError::PeerGone { pid: gone, channel }) => {
            assert_eq!(gone, pid);
            assert_eq!(channel, *name);
        }
        other => panic!("after the kill: {other:?}"),
    }
}

fn a_killed_connector_is_peer_gone_after_everything_it_sent<S: Surface>() {
    killed_peer::<S>(false);
}

fn a_killed_creator_is_peer_gone_after_everything_it_sent<S: Surface>() {
    killed_peer::<S>(true);
}

/// One rule for every name: a name outside it is `InvalidName` for create, connect and bind;
/// the longest name allowed (`MAX_NAME_LEN`) serves.
fn names_outside_the_one_rule_are_refused_and_the_longest_serves<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "names");
    let too_long = "x".repeat(MAX_NAME_LEN + 1);
    for bad in [
        "",
        ".hidden",
        "-dash",
        "a/b",
        "sp ace",
        "nul\0",
        too_long.as_str(),
    ] {
        let refused = |what: &str, e: Option<OpenError>| match e {
            Some(OpenError::InvalidName { name, .. }) => assert_eq!(name, bad),
            other => panic!("{what} {bad:?}: {other:?}"),
        };
        refused("create", S::create(bad, &config()).err());
        refused("connect", S::connect(bad, SHORT).err());
        refused("bind", S::bind(bad, &config(), 1).err());
    }
    let base = unique(&format!("cf-{}-longest", S::NAME));
    let longest = format!("{base}{}", "n".repeat(MAX_NAME_LEN - base.len()));
    let names = Names {
        _shm: NameGuard(longest.clone()),
        _files: FallbackFiles(longest.clone()),
        name: longest.clone(),
    };
    let (mut a, mut b) = pair::<S>(&longest);
    a.send(b"longest").unwrap();
    expect_message(b.recv_timeout(WATCHDOG), b"longest", "on the longest name");
    drop((a, b));
    let listener = S::bind(&longest, &config(), 1).expect("bind the longest name");
    let server = serve::<S>(listener, &longest, 1, Arc::new(AtomicUsize::new(0)));
    let mut client = S::connect(&longest, WATCHDOG).expect("connect to the longest name");
    client.send(b"longest").unwrap();
    expect_message(
        client.recv_timeout(WATCHDOG),
        b"longest",
        "a listener's echo",
    );
    drop(client);
    drop(server.join().expect("the server failed"));
    assert_nothing_left(&names.name);
}

/// A name whose creator lives is `AlreadyExists` for a second creator and for a listener, and
/// free again once the creator dropped.
fn a_name_in_use_is_already_exists_until_its_creator_drops<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "taken");
    let names = names::<S>("taken");
    let name = &names.name;
    let first = S::create(name, &config()).expect("create");
    match S::create(name, &config()) {
        Err(OpenError::AlreadyExists { channel: taken }) => assert_eq!(taken, *name),
        other => panic!("a second create: {:?}", other.err()),
    }
    assert!(matches!(
        S::bind(name, &config(), 1).err(),
        Some(OpenError::AlreadyExists { .. })
    ));
    let mut peer = S::connect(name, WATCHDOG).expect("connect");
    assert!(matches!(
        S::create(name, &config()).err(),
        Some(OpenError::AlreadyExists { .. })
    ));
    peer.send(b"still the first").unwrap();
    let mut first = first;
    expect_message(
        first.recv_timeout(WATCHDOG),
        b"still the first",
        "the first channel",
    );
    drop((first, peer));
    drop(S::create(name, &config()).expect("create once the name is free"));
    assert_nothing_left(name);
}

/// A connect with a deadline to a name nobody made fails with `NotFound`, naming it.
fn a_connect_to_a_missing_name_is_not_found_at_its_deadline<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "missing");
    let names = names::<S>("missing");
    let name = &names.name;
    match S::connect(name, SHORT) {
        Err(e @ OpenError::NotFound { .. }) => {
            assert!(matches!(&e, OpenError::NotFound { channel: n } if n == name));
            assert!(e.to_string().contains(name.as_str()), "{e}");
        }
        other => panic!("connect to a missing name: {:?}", other.err()),
    }
    assert_nothing_left(name);
}

/// The server's side of a listener in this process: accepts `clients` connections, echoes
/// each on a thread of its own, and counts those whose client closed (`Disconnected`, naming
/// the channel). Joins to the listener.
fn serve<S: Surface>(
    mut listener: S::Listener,
    name: &str,
    clients: usize,
    closed: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<S::Listener> {
    let name = name.to_owned();
    std::thread::spawn(move || {
        let mut echoes = Vec::new();
        for _ in 0..clients {
            let conn = S::accept(&mut listener).expect("accept");
            let closed = Arc::clone(&closed);
            let name = name.clone();
            echoes.push(std::thread::spawn(move || match echo_until_it_ends(conn) {
                RecvError::Disconnected { channel } if channel.starts_with(&name) => {
                    closed.fetch_add(1, Ordering::SeqCst);
                }
                other => panic!("a server end: {other:?}"),
            }));
        }
        for echo in echoes {
            echo.join().expect("an echo thread failed");
        }
        listener
    })
}

/// Waits (bounded by the case's watchdog) until `count` reaches `want`.
fn wait_until_count(count: &AtomicUsize, want: usize) {
    while count.load(Ordering::SeqCst) < want {
        // A bounded wait for other threads to finish; nothing to sleep on.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Client processes connect to a listener in waves, each wave as many as the listener admits:
/// every client's messages (one longer than a frame) come back, each wave finds the places of
/// the one before free, and a closed listener leaves nothing.
fn clients_in_waves_through_a_listener_each_get_their_echoes<S: Surface>() {
    const CLIENTS: usize = 4;
    const WAVES: usize = 3;
    let _dog = Watchdog::arm(CASE_LIMIT, "waves");
    let names = names::<S>("waves");
    let name = &names.name;
    let listener = S::bind(name, &config(), CLIENTS).expect("bind");
    let closed = Arc::new(AtomicUsize::new(0));
    let server = serve::<S>(listener, name, CLIENTS * WAVES, Arc::clone(&closed));
    for wave in 0..WAVES {
        let mut clients: Vec<ChildGuard> = (0..CLIENTS)
            .map(|_| spawn_peer::<S>("client", name))
            .collect();
        for client in &mut clients {
            let status = client.reap_within(CASE_LIMIT);
            assert!(status.success(), "client {} failed: {status}", client.pid());
        }
        // The next wave needs every place: the server's ends of this one must be gone.
        wait_until_count(&closed, (wave + 1) * CLIENTS);
    }
    drop(server.join().expect("the server failed"));
    assert_nothing_left(name);
}

/// Past its limit a listener refuses a client with `TooManyClients`, naming it and the limit;
/// a place freed by dropping a connection (its client sees a clean close) admits the next.
fn a_client_past_the_limit_is_too_many_clients_until_a_place_is_freed<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "client limit");
    let names = names::<S>("limit");
    let name = &names.name;
    let mut listener = S::bind(name, &config(), 2).expect("bind");
    let mut clients = Vec::new();
    let mut accepted = Vec::new();
    for i in 0..2u64 {
        // A client waits for the server to accept it: one thread each.
        let connecting = {
            let name = name.clone();
            std::thread::spawn(move || S::connect(&name, WATCHDOG).expect("connect"))
        };
        let mut conn = S::accept(&mut listener).expect("accept");
        let mut client = connecting.join().expect("client thread");
        client.send(&numbered(i, 10)).unwrap();
        expect_message(
            conn.recv_timeout(WATCHDOG),
            &numbered(i, 10),
            "a client's message",
        );
        clients.push(client);
        accepted.push(conn);
    }
    match S::connect(name, WATCHDOG) {
        Err(OpenError::TooManyClients { channel: n, limit }) => {
            assert_eq!((n.as_str(), limit), (name.as_str(), 2));
        }
        other => panic!("a third client: {:?}", other.err()),
    }
    drop(accepted.remove(0));
    match clients[0].recv_timeout(WATCHDOG) {
        Err(RecvError::Disconnected { channel }) => assert!(channel.starts_with(name.as_str())),
        other => panic!("a client whose connection was dropped: {other:?}"),
    }
    let server = serve::<S>(listener, name, 1, Arc::new(AtomicUsize::new(0)));
    let mut third = S::connect(name, WATCHDOG).expect("a freed place admits a client");
    third.send(b"third").unwrap();
    expect_message(
        third.recv_timeout(WATCHDOG),
        b"third",
        "the third client's echo",
    );
    drop(third);
    drop((server.join().expect("the server failed"), accepted, clients));
    assert_nothing_left(name);
}

/// A client process killed while connected is `PeerGone` on the server's end, and its place
/// (the only one) admits the next client.
fn a_killed_client_is_peer_gone_and_frees_its_place<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "killed client");
    let names = names::<S>("kill-cl");
    let name = &names.name;
    let mut listener = S::bind(name, &config(), 1).expect("bind");
    let mut doomed = spawn_peer::<S>("hold", name);
    let mut conn = S::accept(&mut listener).expect("accept");
    expect_message(conn.recv_timeout(WATCHDOG), b"hold", "the client's message");
    conn.send(b"hold").unwrap();
    wait_for_line(&mut doomed, "connected");
    let pid = doomed.pid();
    doomed.kill();
    reap_killed(&mut doomed);
    match conn.recv_timeout(WATCHDOG) {
        Err(RecvError::PeerGone { pid: gone, channel }) => {
            assert_eq!(gone, pid);
            assert!(channel.starts_with(name.as_str()), "{channel}");
        }
        other => panic!("a killed client: {other:?}"),
    }
    drop(conn);
    let server = serve::<S>(listener, name, 1, Arc::new(AtomicUsize::new(0)));
    let mut next = spawn_peer::<S>("client", name);
    assert!(
        next.reap_within(CASE_LIMIT).success(),
        "the next client failed"
    );
    drop(server.join().expect("the server failed"));
    assert_nothing_left(name);
}

/// A listener process killed while clients are connected is `PeerGone` for every client, and
/// its name is reclaimed by the next listener (which a second bind then finds taken).
fn a_killed_listener_is_peer_gone_for_every_client_and_its_name_is_reclaimed<S: Surface>() {
    let _dog = Watchdog::arm(CASE_LIMIT, "killed listener");
    let names = names::<S>("kill-ls");
    let name = &names.name;
    let mut server = spawn_peer::<S>("serve", name);
    wait_for_line(&mut server, "ready");
    let mut clients: Vec<S::End> = (0..3u64)
        .map(|i| {
            let mut client = S::connect(name, WATCHDOG).expect("connect");
            client.send(&numbered(i, 5)).unwrap();
            expect_message(client.recv_timeout(WATCHDOG), &numbered(i, 5), "an echo");
            client
        })
        .collect();
    let pid = server.pid();
    server.kill();
    reap_killed(&mut server);
    for client in &mut clients {
        match client.recv_timeout(WATCHDOG) {
            Err(RecvError::PeerGone { pid: gone, channel }) => {
                assert_eq!(gone, pid);
                assert!(channel.starts_with(name.as_str()), "{channel}");
            }
            other => panic!("a client of a killed listener: {other:?}"),
        }
    }
    drop(clients);
    let listener = S::bind(name, &config(), 4).expect("bind over a dead listener");
    assert!(matches!(
        S::bind(name, &config(), 4).err(),
        Some(OpenError::AlreadyExists { .. })
    ));
    let server = serve::<S>(listener, name, 1, Arc::new(AtomicUsize::new(0)));
    let mut client = S::connect(name, WATCHDOG).expect("connect to the new listener");
    client.send(b"again").unwrap();
    expect_message(
        client.recv_timeout(WATCHDOG),
        b"again",
        "from the new listener",
    );
    drop(client);
    drop(server.join().expect("the server failed"));
    assert_nothing_left(name);
}

// ---------------------------------------------------------------------------------------------
// Every case over every surface

macro_rules! suite {
    ($(#[$attr:meta])* $module:ident: $surface:ty; [$($case:ident),* $(,)?]) => {
        $(#[$attr])*
        mod $module {
            $(
                #[test]
                fn $case() {
                    super::$case::<$surface>();
                }
            )*
        }
    };
}

macro_rules! every_surface {
    ($cases:tt) => {
        suite!(channel_shm: super::ChannelShm; $cases);
        suite!(endpoint_shm: super::EndpointShm; $cases);
        suite!(endpoint_ipc: super::EndpointIpc; $cases);
        suite!(#[cfg(feature = "tokio")] async_shm: super::AsyncShm<true>; $cases);
        suite!(#[cfg(feature = "tokio")] async_reactor: super::AsyncShm<false>; $cases);
    };
}

every_surface!([
    messages_of_every_size_class_arrive_whole_and_in_order,
    json_goes_through_every_send_and_receive_form,
    plain_values_go_through_every_value_form,
    recv_into_replaces_the_callers_buffer_whatever_its_size,
    try_forms_are_empty_and_full_where_the_others_would_wait,
    every_deadline_form_gives_up_at_its_deadline,
    a_grant_sends_only_what_is_committed,
    sending_before_the_peer_connects_does_what_the_backend_promises,
    a_peer_that_closes_is_disconnected_after_everything_it_sent,
    a_batch_arrives_whole_and_in_order,
    batch_forms_stop_where_the_ring_is_empty_or_full,
    batches_end_at_a_peer_that_closed,
    a_killed_connector_is_peer_gone_after_everything_it_sent,
    a_killed_creator_is_peer_gone_after_everything_it_sent,
    names_outside_the_one_rule_are_refused_and_the_longest_serves,
    a_name_in_use_is_already_exists_until_its_creator_drops,
    a_connect_to_a_missing_name_is_not_found_at_its_deadline,
    clients_in_waves_through_a_listener_each_get_their_echoes,
    a_client_past_the_limit_is_too_many_clients_until_a_place_is_freed,
    a_killed_client_is_peer_gone_and_frees_its_place,
    a_killed_listener_is_peer_gone_for_every_client_and_its_name_is_reclaimed,
    a_batch_receive_does_bounded_work_against_a_sender_that_never_stops,
    a_batch_becomes_readable_all_at_once,
    every_send_form_is_peer_gone_once_the_receiver_was_killed,
]);
