//! Async send, receive and accept (cargo feature `tokio`), without a thread per channel.
//!
//! [`AsyncChannel`] has the method set of [`Channel`]: the blocking and `_timeout` forms are
//! `async`, the `try_` forms are plain methods, and each has the same meaning as on
//! [`Channel`] (every send fragments a message longer than a frame; `recv` lends the message
//! out in place, as a [`ReadGuard`]).
//!
//! ```no_run
//! # async fn demo() -> shmlink::Result<()> {
//! use shmlink::tokio::{connect, AsyncListener};
//! use shmlink::Config;
//!
//! // Server task
//! let mut listener = AsyncListener::bind("svc", &Config::default())?;
//! let mut conn = listener.accept().await?;
//! let request = conn.recv().await?.to_vec();
//! conn.send(&request).await?;
//!
//! // Client task (usually another process)
//! let mut client = connect("svc").await?;
//! client.send(b"ping").await?;
//! let reply = client.recv().await?;
//! # Ok(()) }
//! ```
//!
//! # Cancelling
//!
//! Every future here can be dropped at any point (by `select!`, or a `timeout` of the runtime)
//! without harm: a receive that is dropped takes nothing (the part of a fragmented message it
//! gathered stays for the next receive), and a send dropped part-way through a fragmented
//! message withdraws it, as a send that timed out does: the receiver never sees any of it, and
//! the next send goes through as usual. A dropped reservation sends nothing. A batch receive
//! hands its messages to its closure in the poll that completes it, so a dropped one took
//! nothing; a dropped batch send may have sent some of its first messages (each whole) and
//! not the rest, and cannot say how many: the `_timeout` form ends with the count instead.
//!
//! # How it waits
//!
//! A receive that finds its ring empty (or a send that finds no room) waits as a synchronous
//! [`WaitStrategy::Block`] receive does, with the same adaptive policy: it polls the ring for up
//! to 20 us (longer after its thread moved a large frame), but only while at least a quarter of its recent polls found a message (bar a
//! short probe now and then), and right after it woke its peer it polls or sleeps at once,
//! whichever has lately been quicker. Between batches of polls (a few microseconds each) it
//! yields to the runtime, so the other tasks of the thread run meanwhile and a peer task on the
//! same thread can answer. So on a runtime thread, a task whose peer answers within
//! microseconds gets about the round trip of a synchronous `Block` channel; a task whose polls
//! stop finding messages (a slow peer, or many busy tasks on the thread) soon stops polling and
//! costs the thread nothing while it waits. While the machine has more runnable threads than
//! CPUs, every task (as every `Block` wait of the process) sleeps at once; and a runtime thread
//! whose tasks take turns at polling stops polling for a while (every task on it sleeps at
//! once) when a batch of its polls lost the core: on a machine with more runnable threads than
//! cores, a thread kept runnable by its polls waits behind the busy ones with every task it
//! serves.
//!
//! To sleep, a task announces a sleeper on the channel's data cell exactly as a `Block`
//! receive does (read the word, announce, fence, look again) and returns `Pending` after
//! handing the word and the value it read to one of two waiters:
//!
//! * **Its own futex ring**, on a tokio runtime with its I/O driver, where the kernel has
//!   `io_uring` futex waits (Linux 6.7 and later, not refused by a sandbox): the task submits a
//!   futex wait on the word to a small `io_uring` of its own, whose descriptor is registered
//!   with the runtime like a socket's. The peer's existing wake-up call completes the wait, the
//!   descriptor turns readable, and the runtime thread, woken by its own poll, runs the task:
//!   one thread hand-off, as for a socket. The ring is made at the task's first sleep, on the
//!   runtime that polls it (one descriptor per direction that has slept: see
//!   [descriptors](#descriptors)), and stays with the channel; the completion runs on the
//!   thread that submitted the wait, so on a
//!   multi-thread runtime whose worker parked elsewhere it can take a second hand-off. The
//!   ring is an ordinary one on every runtime: a ring for the runtime's thread alone
//!   (`IORING_SETUP_DEFER_TASKRUN`, an eventfd polled in its place) woke the runtime some
//!   15.6 ms after the peer's wake-up on Linux 6.18, so it is not used.
//! * **The reactor** otherwise (outside a tokio runtime, on older kernels, or once the
//!   process's rings hold their share of its descriptors): one thread per process (started on
//!   first use) that sleeps with `futex_waitv` on the futex words of every task waiting on it,
//!   plus a control word that new waits ring, and wakes the task's `Waker` when its word
//!   changes. That costs two hand-offs (peer, reactor, runtime thread), which is
//!   what the polls save when the peer answers quickly. Those hand-offs also let the scheduler
//!   put two runtime threads that talk to each other on one core; polling cannot pay there,
//!   the policy stops, and each message then costs a sleep and a wake-up (several times a
//!   synchronous round trip) until the scheduler moves them apart.
//!
//! Sends that find the ring full wait on the ring's space cell the same way; accepts wait on
//! the listener's doorbell through the reactor.
//!
//! # Descriptors
//!
//! An `AsyncChannel` holds what its [`Channel`] holds (the mapping's descriptor, and a pidfd
//! for each direction that slept while the death watcher covers its peer). Each direction that
//! sleeps on a futex ring of its own adds the ring's descriptor, so a channel whose both
//! directions slept holds up to two more. The rings of a process hold at most a quarter of its soft `RLIMIT_NOFILE` (read
//! when a ring is made), and at most 2,048 descriptors: a direction that first sleeps when they
//! hold that many sleeps through the reactor instead, for the channel's life: so
//! the rings never hold more than a quarter of the process's descriptors. [`sleepers`] says
//! how many rings and descriptors they hold and how many directions were sent to the reactor
//! for the limit.
//!
//! # Sharing the thread
//!
//! Every operation that ends (with a message, with room, or with an error) takes a unit of the
//! task's tokio budget, as an operation on a tokio socket or channel does (a batch receive, one
//! per message it hands). A task whose channel
//! always has a message ready (a backlog, or a peer quick enough to answer within the task's
//! polls) is made to yield to its runtime when the budget of its turn is spent, so the other
//! tasks of its thread run meanwhile instead of waiting until that channel runs dry: a server
//! task whose client answers within microseconds would otherwise keep a current-thread runtime
//! to itself, and its other clients would wait.
//! [`unconstrained`](::tokio::task::coop::unconstrained) lifts the budget for a future that
//! must not yield.
//!
//! # Runtime
//!
//! Inside a tokio runtime, the runtime must have its I/O driver (`enable_io`, or
//! `enable_all`, as `#[tokio::main]` and `Runtime::new` have): a task's sleep is registered
//! with it, as a tokio socket's readiness is, and like tokio's own `AsyncFd` the first sleep
//! panics on a runtime without one. An `AsyncChannel` belongs to the runtime on which it first
//! slept, as a tokio socket belongs to the runtime it was registered with: that runtime's
//! driver must keep running for its wake-ups to arrive. Polled outside any tokio runtime (by
//! another executor), the futures sleep through the reactor and need nothing but a `Waker`.
//!
//! A peer process that dies without closing is noticed as by a `Block` receive: before it
//! sleeps, the task registers the peer with the process's death watcher (a thread holding a
//! pidfd per peer and looking at each peer's lock once a second) on the word it sleeps on; the
//! watcher records the death and changes the word, and the woken task reports
//! [`RecvError::PeerGone`]. So an idle task, its runtime thread and the reactor make no timed
//! wake-ups; what remains is the watcher's one look a second, on its own thread, while any
//! peer of the process is watched. Only a task whose peer the watcher cannot cover (no
//! pidfds, a peer in another pid namespace) is woken every 10 ms to look at it. Over more than
//! 126 tasks the reactor has threads sleep on the further words for it (see
//! `service/reactor.rs`); without `futex_waitv` (kernels before 5.16) it looks every
//! millisecond instead of sleeping until woken.
//!
//! A wait with a deadline (the `_timeout` forms) ends at its deadline too (a timeout linked
//! to the futex wait on the task's ring, or the reactor's clock), and the task returns
//! `Timeout`.
//!
//! Topics have async ends too: [`AsyncPublisher`] (the send forms, waiting for room in a
//! lossless topic as [`AsyncChannel`] waits) and [`AsyncSubscriber`] (the receive forms).
//!
//! [`connect`] waits for the server on tokio's blocking pool. Channels for tasks wait with
//! [`WaitStrategy::Block`]: the peer only makes wake-up calls for ends that announced they may
//! sleep.

use std::borrow::BorrowMut;
use std::future::poll_fn;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use crate::error::{OpenError, RecvError, SendError};
use crate::seam::{RecvCore, SendCore};
use crate::service::reactor::Registration;
use crate::service::task::{empty, full, not_now, Side, Want};
use crate::service::{Connection, Listener};
use crate::shm::channel::{Channel, Config};
use crate::shm::ring::{ReadGuard, WriteGrant};
use crate::shm::topic::{Publisher, Subscriber};
use crate::wait::{Deadline, WaitStrategy};

/// How the async directions of this process sleep: see [descriptors](crate::surface::tokio#descriptors).
/// A snapshot, for monitoring and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sleepers {
    /// Futex rings this process's directions hold now (each direction that slept on one keeps
    /// it for the channel's life).
    pub rings: usize,
    /// Descriptors the futex rings of this process's directions hold now.
    pub ring_descriptors: usize,
    /// The most descriptors those rings may hold now: a quarter of the soft `RLIMIT_NOFILE`,
    /// at most 2,048.
    pub ring_descriptor_limit: usize,
    /// Directions that first slept when the rings held their limit, and so sleep through the
    /// reactor (counted since the process started).
    pub over_limit: u64,
    /// Waits (receives, sends, accepts) asleep through the reactor now.
    pub through_reactor: usize,
    /// Whether this process found that it cannot have futex rings at all (a kernel before 6.7,
    /// `io_uring` refused by a sandbox or disabled): every task sleeps through the reactor.
    pub rings_unsupported: bool,
}

/// How the async directions of this process sleep now (see [`Sleepers`]).
pub fn sleepers() -> Sleepers {
    Sleepers {
        rings: crate::sys::rings(),
        ring_descriptors: crate::sys::ring_descriptors_held(),
        ring_descriptor_limit: crate::sys::ring_descriptor_limit(),
        over_limit: crate::sys::rings_over_limit(),
        through_reactor: crate::service::reactor::waiting(),
        rings_unsupported: crate::sys::rings_unsupported(),
    }
}

/// A [`Channel`] (or a [`Connection`]) with the channel's method set in async form: the
/// blocking and `_timeout` forms of every operation are `async`, the `try_` forms plain
/// methods, all with the meaning they have on [`Channel`].
///
/// Waits as a synchronous [`WaitStrategy::Block`] channel does (see the [module
/// docs](crate::surface::tokio#how-it-waits)): a short poll while polls pay, yielding to the runtime
/// between batches, then a sleep on the task's own futex ring (or through the reactor). Every
/// future may be dropped at any
/// point ([cancelling](crate::surface::tokio#cancelling)).
pub struct AsyncChannel<C: BorrowMut<Channel> = Channel> {
    recv_side: Side,
    send_side: Side,
    // Last: the registrations are disarmed (in `drop`) before the channel's memory goes.
    channel: C,
}

impl<C: BorrowMut<Channel>> std::fmt::Debug for AsyncChannel<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncChannel")
            .field("channel", self.channel.borrow())
            .finish()
    }
}

impl<C: BorrowMut<Channel>> AsyncChannel<C> {
    /// Wraps a channel whose end waits with [`WaitStrategy::Block`]
    /// ([`OpenError::InvalidConfig`] for another strategy: its peer would never wake the task).
    pub fn new(channel: C) -> Result<Self, OpenError> {
        let ch: &Channel = channel.borrow();
        needs_block(ch.name(), ch.wait_strategy())?;
        Ok(AsyncChannel {
            recv_side: Side::new(),
            send_side: Side::new(),
            channel,
        })
    }

    /// The channel, for its synchronous methods.
    pub fn get_mut(&mut self) -> &mut Channel {
        // The caller may swap another channel in and drop this one: nothing of it may stay
        // registered with the reactor or announced on its cells.
        self.withdraw();
        self.channel.borrow_mut()
    }

    async_methods!();

    /// The channel for an operation that does not wait (a `try_` form): no sleeper of an
    /// abandoned future stays announced on its cells.
    fn now(&mut self) -> &mut Channel {
        let ch: &mut Channel = self.channel.borrow_mut();
        self.recv_side.sleeper.withdraw_from(ch.data_cell());
        self.send_side.sleeper.withdraw_from(ch.space_cell());
        ch
    }

    /// The core of every async send of bytes: fragment after fragment as room comes, so a
    /// message of any length goes through. Stopped part-way (deadline, error, or the future
    /// dropped), the message is withdrawn by the next one.
    async fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        let (side, ch) = (&mut self.send_side, self.channel.borrow_mut());
        let want = Want::Room(bytes.len().min(ch.max_frame()));
        let mut sent = 0;
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, ch, want, deadline, |ch| {
                not_now(ch.send_part(bytes, &mut sent), full)
            })
        })
        .await
    }

    /// The core of every async JSON send: in place in the ring when the value fits the usual
    /// grant now, else serialised once into the channel's buffer and sent from there.
    async fn send_json_until<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        let ch: &mut Channel = self.channel.borrow_mut();
        if ch.send_json_in_place(value, Deadline::Now)? {
            return Ok(());
        }
        let buf = ch.serialise_json(value)?;
        let result = self.send_until(&buf, deadline).await;
        self.channel.borrow_mut().give_back_scratch(buf);
        result
    }

    /// The core of every async reservation: waits for room for a frame of `len` bytes, then
    /// lends it out.
    async fn reserve_until(
        &mut self,
        len: usize,
        deadline: Deadline,
    ) -> Result<WriteGrant<'_>, SendError> {
        let (side, ch) = (&mut self.send_side, self.channel.borrow_mut());
        let want = Want::Room(len.min(ch.max_frame()));
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, ch, want, deadline, |ch| {
                // Found room: the grant is dropped (it publishes nothing) and taken again
                // below, where it can be lent out; the room stays ours.
                not_now(ch.reserve_until(len, Deadline::Now).map(drop), full)
            })
        })
        .await?;
        self.channel.borrow_mut().reserve_until(len, Deadline::Now)
    }

    /// The core of every async batch send: the messages of up to a frame as many at a time as
    /// fit (waiting for room for the first of each group), a longer one as `send_until` sends
    /// it. Returns how many went out; an error fails the call only if it met the first.
    async fn send_batch_until<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        let mut sent = 0;
        while sent < batch.len() {
            match self.send_some(&batch[sent..], deadline).await {
                Ok(n) => sent += n,
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    }

    /// One step of [`send_batch_until`](AsyncChannel::send_batch_until) (`rest` is not empty).
    async fn send_some<B: AsRef<[u8]>>(
        &mut self,
        rest: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        let (side, ch) = (&mut self.send_side, self.channel.borrow_mut());
        let first = rest[0].as_ref();
        if first.len() > ch.max_frame() {
            return self.send_until(first, deadline).await.map(|()| 1);
        }
        let frames = rest
            .iter()
            .take_while(|msg| msg.as_ref().len() <= ch.max_frame())
            .count();
        let want = Want::Room(first.len());
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, ch, want, deadline, |ch| {
                not_now(ch.send_batch_until(&rest[..frames], Deadline::Now), full)
            })
        })
        .await
    }

    /// The core of every async batch receive: waits for a whole message, then hands it and
    /// those there now behind it to `f` (at most a ring's worth: see
    /// `RecvHalf::recv_batch_until`). Each message handed takes a unit of the task's tokio
    /// budget, as a receive of each would: the operation's own, then one more per message
    /// after the first, for as long as the budget lasts (what it hands is handed; a budget
    /// spent on the way makes the task's next operation yield).
    async fn recv_batch_until(
        &mut self,
        max: usize,
        f: &mut impl FnMut(&[u8]),
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        if max == 0 {
            return Ok(0);
        }
        let (side, ch) = (&mut self.recv_side, self.channel.borrow_mut());
        let mut wait = None;
        poll_fn(|cx| {
            let got =
                std::task::ready!(side.poll_op(cx, &mut wait, ch, Want::Data, deadline, |ch| {
                    not_now(ch.recv_batch_until(max, f, Deadline::Now), empty)
                }));
            if let Ok(handed) = got {
                for _ in 1..handed {
                    match ::tokio::task::coop::poll_proceed(cx) {
                        Poll::Ready(coop) => coop.made_progress(),
                        // Spent: the runtime has been asked to poll the task again, and its
                        // next operation yields.
                        Poll::Pending => break,
                    }
                }
            }
            Poll::Ready(got)
        })
        .await
    }

    /// The core of every async receive: waits for a whole message, then lends it out.
    async fn recv_until(&mut self, deadline: Deadline) -> Result<ReadGuard<'_>, RecvError> {
        let (side, ch) = (&mut self.recv_side, self.channel.borrow_mut());
        let mut wait = None;
        let ready = poll_fn(|cx| {
            side.poll_op(cx, &mut wait, ch, Want::Data, deadline, |ch| {
                not_now(ch.next_ready(Deadline::Now), empty)
            })
        })
        .await?;
        Ok(self.channel.borrow_mut().take_ready(ready))
    }

    /// The core of every async receive into a buffer.
    async fn recv_into_until(
        &mut self,
        buf: &mut Vec<u8>,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        let (side, ch) = (&mut self.recv_side, self.channel.borrow_mut());
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, ch, Want::Data, deadline, |ch| {
                not_now(ch.recv_into_until(buf, Deadline::Now), empty)
            })
        })
        .await
    }

    fn withdraw(&mut self) {
        let ch: &Channel = self.channel.borrow();
        self.recv_side.sleeper.withdraw_from(ch.data_cell());
        self.send_side.sleeper.withdraw_from(ch.space_cell());
        self.recv_side.disarm();
        self.send_side.disarm();
    }
}

impl<C: BorrowMut<Channel>> Drop for AsyncChannel<C> {
    fn drop(&mut self) {
        self.withdraw();
    }
}

/// A [`Listener`] with an async [`accept`](AsyncListener::accept).
#[derive(Debug)]
pub struct AsyncListener {
    reg: Option<Registration>,
    // Last: the registration is dropped (disarmed) before the listener's memory goes.
    listener: Listener,
}

impl AsyncListener {
    /// Binds the listener `name`; see [`Listener::bind`]. `config.wait` must be
    /// [`WaitStrategy::Block`], the only strategy whose connections tasks can wait on
    /// ([`OpenError::InvalidConfig`], naming the listener, before anything is bound).
    pub fn bind(name: &str, config: &Config) -> Result<AsyncListener, OpenError> {
        check_listener_wait(name, config.wait)?;
        Self::new(Listener::bind(name, config)?)
    }

    /// Wraps a listener whose connections wait with [`WaitStrategy::Block`]
    /// ([`OpenError::InvalidConfig`], naming the listener, for another strategy).
    pub fn new(listener: Listener) -> Result<AsyncListener, OpenError> {
        check_listener_wait(listener.name(), listener.wait_strategy())?;
        Ok(AsyncListener {
            reg: None,
            listener,
        })
    }

    /// The listener, for its synchronous methods.
    pub fn get_ref(&self) -> &Listener {
        &self.listener
    }

    /// Waits for the next client and connects to it.
    pub async fn accept(&mut self) -> Result<AsyncChannel<Connection>, OpenError> {
        let conn = poll_fn(|cx| {
            let bell = self.listener.doorbell();
            // Acquire: pairs with the client's Release increment of the doorbell.
            let seen = bell.load(Ordering::Acquire);
            match self.listener.try_accept() {
                Ok(conn) => return Poll::Ready(Ok(conn)),
                Err(OpenError::NoClient { .. }) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            // A client that published after `seen` changed the word: the reactor wakes us.
            self.reg
                .get_or_insert_with(Registration::new)
                .arm(bell, seen, false, None, cx.waker());
            Poll::Pending
        })
        .await?;
        AsyncChannel::new(conn)
    }
}

/// Refuses an end that waits with anything but [`WaitStrategy::Block`] for async use: its
/// peer would never wake the task.
fn needs_block(name: &str, wait: WaitStrategy) -> Result<(), OpenError> {
    if wait == WaitStrategy::Block {
        return Ok(());
    }
    Err(OpenError::InvalidConfig {
        channel: name.into(),
        what: format!("it waits with {wait}; async use needs block"),
    })
}

/// Refuses a listener whose connections would wait with anything but [`WaitStrategy::Block`]:
/// every accepted connection would fail in [`AsyncChannel::new`].
fn check_listener_wait(name: &str, wait: WaitStrategy) -> Result<(), OpenError> {
    if wait == WaitStrategy::Block {
        return Ok(());
    }
    Err(OpenError::InvalidConfig {
        channel: name.into(),
        what: format!("the listener's connections would wait with {wait}; async use needs block"),
    })
}

/// Connects to what is under `name`, as [`Channel::connect`] does (a channel, or a listener
/// as a new client of it), on tokio's blocking pool, where the wait for a listener's server to
/// accept runs.
pub async fn connect(name: &str) -> Result<AsyncChannel, OpenError> {
    let name = name.to_owned();
    on_blocking_pool(move || Channel::connect(&name, WaitStrategy::Block)).await
}

/// Like [`connect`], as [`Channel::connect_timeout`] does: retries while nothing ready is
/// under the name, and waits for a listener's server to accept, until `timeout` has passed.
pub async fn connect_timeout(name: &str, timeout: Duration) -> Result<AsyncChannel, OpenError> {
    let name = name.to_owned();
    on_blocking_pool(move || Channel::connect_timeout(&name, WaitStrategy::Block, timeout)).await
}

async fn on_blocking_pool(
    connect: impl FnOnce() -> Result<Channel, OpenError> + Send + 'static,
) -> Result<AsyncChannel, OpenError> {
    let channel = ::tokio::task::spawn_blocking(connect)
        .await
        .map_err(|e| OpenError::Io(std::io::Error::other(e)))??;
    AsyncChannel::new(channel)
}

/// A topic's [`Publisher`] with its send forms in async form (the blocking and `_timeout`
/// forms `async`, the `try_` forms plain): a send to a full lossless topic sleeps as an
/// [`AsyncChannel`]'s does, in slices of 10 ms (a publisher has no one peer to watch: after
/// each slice it frees the slots of subscribers that died).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use shmlink::tokio::{AsyncPublisher, AsyncSubscriber};
/// use shmlink::{Publisher, Subscriber, TopicConfig, WaitStrategy};
/// # let name = format!("doc-async-topic-{}", std::process::id());
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
/// runtime.block_on(async {
///     let mut publisher = AsyncPublisher::new(Publisher::create(&name, &TopicConfig::default())?)?;
///     let mut sub = AsyncSubscriber::new(Subscriber::connect(&name, WaitStrategy::Block)?)?;
///     publisher.send(b"tick").await?;
///     assert_eq!(&*sub.recv().await?, b"tick");
///     Ok::<(), shmlink::Error>(())
/// })?;
/// # Ok(()) }
/// ```
pub struct AsyncPublisher {
    send_side: Side,
    // Last: the registration is disarmed (in `drop`) before the publisher's memory goes.
    publisher: Publisher,
}

impl std::fmt::Debug for AsyncPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncPublisher")
            .field("publisher", &self.publisher)
            .finish()
    }
}

impl AsyncPublisher {
    /// Wraps a publisher (any wait strategy: its subscribers wake every sleeper).
    pub fn new(publisher: Publisher) -> Result<Self, OpenError> {
        Ok(AsyncPublisher {
            send_side: Side::new(),
            publisher,
        })
    }

    /// The publisher, for its synchronous methods.
    pub fn get_mut(&mut self) -> &mut Publisher {
        self.withdraw();
        &mut self.publisher
    }

    async_send_methods!();

    /// The publisher for a `try_` form: no sleeper of an abandoned future stays announced.
    fn now(&mut self) -> &mut Publisher {
        self.send_side
            .sleeper
            .withdraw_from(self.publisher.space_cell());
        &mut self.publisher
    }

    /// The core of every async send: waits for room for the whole message (a topic does
    /// not fragment), then sends it.
    async fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        let (side, p) = (&mut self.send_side, &mut self.publisher);
        let want = Want::Room(bytes.len());
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, p, want, deadline, |p| {
                not_now(p.send_until(bytes, Deadline::Now), full)
            })
        })
        .await
    }

    /// The core of every async JSON send: serialised, then sent as bytes.
    async fn send_json_until<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        let mut buf = Vec::new();
        crate::json::encode(&mut buf, value).map_err(|source| SendError::Json {
            channel: self.publisher.channel_name().clone(),
            source,
        })?;
        self.send_until(&buf, deadline).await
    }

    /// The core of every async reservation: waits for room, then lends it out.
    async fn reserve_until(
        &mut self,
        len: usize,
        deadline: Deadline,
    ) -> Result<WriteGrant<'_>, SendError> {
        let (side, p) = (&mut self.send_side, &mut self.publisher);
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, p, Want::Room(len), deadline, |p| {
                // Found room: the grant is dropped (it publishes nothing) and taken again
                // below, where it can be lent out; the room stays ours.
                not_now(p.reserve_until(len, Deadline::Now).map(drop), full)
            })
        })
        .await?;
        self.publisher.reserve_until(len, Deadline::Now)
    }

    /// The core of every async batch send: one message at a time, each waited for; how many
    /// went (an error fails the call only if it met the first).
    async fn send_batch_until<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        let mut sent = 0;
        for msg in batch {
            match self.send_until(msg.as_ref(), deadline).await {
                Ok(()) => sent += 1,
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    }

    fn withdraw(&mut self) {
        self.send_side
            .sleeper
            .withdraw_from(self.publisher.space_cell());
        self.send_side.disarm();
    }
}

impl Drop for AsyncPublisher {
    fn drop(&mut self) {
        self.withdraw();
    }
}

/// A topic's [`Subscriber`] with its receive forms in async form (the blocking and
/// `_timeout` forms `async`, the `try_` forms plain), waiting as an [`AsyncChannel`]'s
/// receive waits (the death watcher covers the publisher). The example is on
/// [`AsyncPublisher`].
pub struct AsyncSubscriber {
    recv_side: Side,
    // Last: the registration is disarmed (in `drop`) before the subscriber's memory goes.
    subscriber: Subscriber,
}

impl std::fmt::Debug for AsyncSubscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSubscriber")
            .field("subscriber", &self.subscriber)
            .finish()
    }
}

impl AsyncSubscriber {
    /// Wraps a subscriber that waits with [`WaitStrategy::Block`]
    /// ([`OpenError::InvalidConfig`] for another strategy).
    pub fn new(mut subscriber: Subscriber) -> Result<Self, OpenError> {
        let strategy = subscriber.reader().wait_strategy();
        needs_block(subscriber.name(), strategy)?;
        Ok(AsyncSubscriber {
            recv_side: Side::new(),
            subscriber,
        })
    }

    /// The subscriber, for its synchronous methods.
    pub fn get_mut(&mut self) -> &mut Subscriber {
        self.withdraw();
        &mut self.subscriber
    }

    async_recv_methods!();

    /// The subscriber for a `try_` form: no sleeper of an abandoned future stays announced.
    fn now(&mut self) -> &mut Subscriber {
        let cell = self.subscriber.reader_ref().data_cell();
        self.recv_side.sleeper.withdraw_from(cell);
        &mut self.subscriber
    }

    /// Waits until a receive would find something (a message, a close, a lag or a drop).
    async fn until_ready(&mut self, deadline: Deadline) -> Result<(), RecvError> {
        let (side, s) = (&mut self.recv_side, &mut self.subscriber);
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, s, Want::Data, deadline, |s| {
                Ok::<_, RecvError>(
                    crate::service::task::Waitable::ready(s, Want::Data).then_some(()),
                )
            })
        })
        .await
    }

    /// The core of every async receive: waits, then lends the message out.
    async fn recv_until(&mut self, deadline: Deadline) -> Result<ReadGuard<'_>, RecvError> {
        self.until_ready(deadline).await?;
        self.subscriber.recv_until(Deadline::Now)
    }

    /// The core of every async receive into a buffer.
    async fn recv_into_until(
        &mut self,
        buf: &mut Vec<u8>,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        let (side, s) = (&mut self.recv_side, &mut self.subscriber);
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, s, Want::Data, deadline, |s| {
                not_now(s.recv_into_until(buf, Deadline::Now), empty)
            })
        })
        .await
    }

    /// The core of every async batch receive.
    async fn recv_batch_until(
        &mut self,
        max: usize,
        f: &mut impl FnMut(&[u8]),
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        if max == 0 {
            return Ok(0);
        }
        let (side, s) = (&mut self.recv_side, &mut self.subscriber);
        let mut wait = None;
        poll_fn(|cx| {
            side.poll_op(cx, &mut wait, s, Want::Data, deadline, |s| {
                not_now(s.recv_batch_until(max, f, Deadline::Now), empty)
            })
        })
        .await
    }

    fn withdraw(&mut self) {
        let cell = self.subscriber.reader_ref().data_cell();
        self.recv_side.sleeper.withdraw_from(cell);
        self.recv_side.disarm();
    }
}

impl Drop for AsyncSubscriber {
    fn drop(&mut self) {
        self.withdraw();
    }
}
