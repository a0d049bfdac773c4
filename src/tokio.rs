//! Async send, receive and accept (cargo feature `tokio`), without a thread per channel.
//!
//! ```no_run
//! # async fn demo() -> shmlink::Result<()> {
//! use shmlink::tokio::{connect, AsyncListener};
//! use shmlink::Config;
//!
//! // Server task
//! let mut listener = AsyncListener::bind("svc", &Config::default())?;
//! let mut conn = listener.accept().await?;
//! let request = conn.recv().await?;
//! conn.send(&request).await?;
//!
//! // Client task (usually another process)
//! let mut client = connect("svc").await?;
//! client.send(b"ping").await?;
//! let reply = client.recv().await?;
//! # Ok(()) }
//! ```
//!
//! # How it waits
//!
//! One reactor thread per process (started on first use) sleeps with `futex_waitv` on the futex
//! words of every channel a task is waiting on, plus a control word that new waits ring. A task
//! that finds its ring empty announces a sleeper on the channel's data cell exactly as a `Block`
//! receive does (read the word, announce, fence, look again), hands the word and the value it
//! read to the reactor, and returns `Pending`. The peer's existing wake-up call changes the
//! word; the reactor sees it and wakes the task's `Waker`. Sends that find the ring full wait on
//! the ring's space cell the same way, and accepts on the listener's doorbell.
//!
//! A peer that dies without closing wakes nobody: every
//! [`LIVENESS_PERIOD`] the reactor wakes every waiting task, which
//! looks at its peer and reports [`Error::PeerGone`]. With more than 127
//! waiting tasks, or without `futex_waitv` (older kernels, other platforms), the reactor looks
//! every millisecond instead of sleeping until woken.
//!
//! The futures only need a `Waker`; the `tokio` runtime is used for [`connect`], whose wait for
//! the server runs on tokio's blocking pool. Channels for tasks wait with
//! [`WaitStrategy::Block`]: the peer only makes wake-up calls for ends that announced they may
//! sleep. For the lowest latency at the price of a core, poll a `Spin` channel's `try_recv`
//! instead.

use std::borrow::BorrowMut;
use std::future::poll_fn;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::task::{Poll, Waker};
use std::time::Duration;

use crate::channel::{Channel, Config};
use crate::error::{Error, Result};
use crate::layout::WaitCell;
use crate::listener::{Connection, Listener};
use crate::platform::futex::{self, WaitAny, Waiter, WAITV_MAX};
use crate::ring::full_fence;
use crate::selector::LIVENESS_PERIOD;
use crate::wait::WaitStrategy;

/// The sleep slice when not every waiting word fits one kernel wait.
const POLL_SLICE: Duration = Duration::from_millis(1);
/// The smallest poll budget of a channel with [`AsyncChannel::set_spin`].
const SPIN_MIN: Duration = Duration::from_micros(4);

/// One task waiting on one word.
struct Entry {
    /// A futex word in a channel's or listener's mapping. Dereferenced only with the reactor's
    /// lock held: its owner removes the entry (under the lock) before the memory can go.
    word: *const AtomicU32,
    /// The value the task read before it looked at its ring one last time.
    seen: u32,
    waker: Waker,
}

#[derive(Default)]
struct State {
    /// Indexed by registration id; `None` when that registration is not waiting.
    entries: Vec<Option<Entry>>,
    /// Ids free for reuse.
    free: Vec<usize>,
}

// SAFETY: `Entry::word` points into a mapping that stays mapped while the entry exists (see
// `Entry`); it is only read through, atomically, under the reactor's mutex.
unsafe impl Send for State {}

struct Reactor {
    state: Mutex<State>,
    /// Bumped (and woken) whenever a task starts waiting, so the reactor adds its word.
    control: AtomicU32,
}

impl Reactor {
    fn get() -> &'static Reactor {
        static REACTOR: OnceLock<&'static Reactor> = OnceLock::new();
        REACTOR.get_or_init(|| {
            let reactor: &'static Reactor = Box::leak(Box::new(Reactor {
                state: Mutex::new(State::default()),
                control: AtomicU32::new(0),
            }));
            std::thread::Builder::new()
                .name("shmlink-reactor".into())
                .spawn(move || reactor.run())
                .expect("spawn the shmlink reactor thread");
            reactor
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves the table consistent (plain assignments).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self) {
        let mut waiters = Vec::with_capacity(WAITV_MAX);
        let mut woken = Vec::new();
        let mut last_tick = std::time::Instant::now();
        loop {
            // Acquire: pairs with the Release increment in `arm`; the entry added before it is
            // in the table we read next.
            let control = self.control.load(Ordering::Acquire);
            waiters.clear();
            waiters.push(Waiter::new(&self.control, control));
            let mut overflow = false;
            {
                let state = self.lock();
                for entry in state.entries.iter().flatten() {
                    if waiters.len() == WAITV_MAX {
                        overflow = true;
                        break;
                    }
                    // SAFETY: see `Entry::word`: we hold the lock.
                    waiters.push(Waiter::new(unsafe { &*entry.word }, entry.seen));
                }
            }
            let tick_in = LIVENESS_PERIOD.saturating_sub(last_tick.elapsed());
            let timeout = if overflow {
                tick_in.min(POLL_SLICE)
            } else {
                tick_in
            };
            if futex::wait_any(&waiters, Some(timeout)) == WaitAny::Unsupported {
                std::thread::sleep(timeout.min(POLL_SLICE));
            }
            let tick = last_tick.elapsed() >= LIVENESS_PERIOD;
            if tick {
                last_tick = std::time::Instant::now();
            }
            {
                let mut state = self.lock();
                for slot in state.entries.iter_mut() {
                    let fire = match slot {
                        // SAFETY: see `Entry::word`: we hold the lock. Acquire: pairs with the
                        // Release increment of the waker.
                        Some(e) => tick || unsafe { &*e.word }.load(Ordering::Acquire) != e.seen,
                        None => false,
                    };
                    if fire {
                        if let Some(e) = slot.take() {
                            woken.push(e.waker);
                        }
                    }
                }
            }
            for waker in woken.drain(..) {
                waker.wake();
            }
        }
    }
}

/// A task's place in the reactor's table; removed (under the lock) when dropped.
#[derive(Debug)]
struct Registration {
    id: usize,
}

impl Registration {
    fn new() -> Registration {
        let mut state = Reactor::get().lock();
        let id = match state.free.pop() {
            Some(id) => id,
            None => {
                state.entries.push(None);
                state.entries.len() - 1
            }
        };
        Registration { id }
    }

    /// Asks the reactor to wake `waker` once `word` no longer holds `seen` (or at the next
    /// liveness tick). The caller keeps the memory of `word` mapped until it calls `disarm` or
    /// drops the registration.
    fn arm(&self, word: &AtomicU32, seen: u32, waker: &Waker) {
        let reactor = Reactor::get();
        {
            let mut state = reactor.lock();
            state.entries[self.id] = Some(Entry {
                word,
                seen,
                waker: waker.clone(),
            });
        }
        // Release: pairs with the Acquire load at the top of the reactor's loop.
        reactor.control.fetch_add(1, Ordering::Release);
        futex::wake(&reactor.control);
    }

    fn disarm(&self) {
        Reactor::get().lock().entries[self.id] = None;
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut state = Reactor::get().lock();
        state.entries[self.id] = None;
        state.free.push(self.id);
    }
}

/// Whether a sleeper is announced on a wait cell; withdrawn when the task looks again or goes
/// away.
#[derive(Default)]
struct Announced(bool);

impl Announced {
    /// Reads `cell`'s futex word and announces a sleeper on it; returns the value read.
    fn announce(&mut self, cell: &WaitCell) -> u32 {
        self.withdraw_from(cell);
        // Acquire: pairs with the Release increment in the peer's wake-up call.
        let seen = cell.futex.load(Ordering::Acquire);
        // Relaxed RMW, ordered by the fence the caller makes next (F1 of the handshake).
        cell.sleepers.fetch_add(1, Ordering::Relaxed);
        self.0 = true;
        seen
    }

    fn withdraw_from(&mut self, cell: &WaitCell) {
        if std::mem::take(&mut self.0) {
            // Relaxed: only the count matters; the peer reads it after its own fence.
            cell.sleepers.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A [`Channel`] (or a [`Connection`]) with async `send` and `recv`.
pub struct AsyncChannel<C: BorrowMut<Channel> = Channel> {
    recv_reg: Registration,
    send_reg: Registration,
    recv_sleeper: Announced,
    send_sleeper: Announced,
    /// Longest poll of the ring before a receive goes to the reactor (zero: never poll).
    spin_max: Duration,
    /// The current poll budget: halved when a poll finds nothing, doubled when it finds a
    /// message, between `SPIN_MIN` and `spin_max`.
    spin: Duration,
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
    /// Wraps a channel whose end waits with [`WaitStrategy::Block`] ([`Error::InvalidConfig`]
    /// for another strategy: its peer would never wake the task).
    pub fn new(channel: C) -> Result<Self> {
        let ch: &Channel = channel.borrow();
        if ch.wait_strategy() != WaitStrategy::Block {
            return Err(Error::InvalidConfig(format!(
                "channel {:?} waits with {}; async use needs block",
                ch.name(),
                ch.wait_strategy()
            )));
        }
        Ok(AsyncChannel {
            recv_reg: Registration::new(),
            send_reg: Registration::new(),
            recv_sleeper: Announced::default(),
            send_sleeper: Announced::default(),
            spin_max: Duration::ZERO,
            spin: Duration::ZERO,
            channel,
        })
    }

    /// Lets a receive that finds the ring empty poll it for up to `max` before it sleeps, as a
    /// synchronous `Block` receive does (zero, the default: sleep at once). Polling blocks the
    /// runtime thread meanwhile, so it pays where replies come within microseconds and a task
    /// per core is acceptable; where polling stops finding messages, the budget halves on each
    /// miss (down to a few microseconds) and doubles again on each hit.
    pub fn set_spin(&mut self, max: Duration) {
        self.spin_max = max;
        self.spin = max;
    }

    /// Polls the ring for the current budget; true once a frame (or a close) is there.
    fn poll_ring(&mut self) -> bool {
        if self.spin_max.is_zero() {
            return false;
        }
        let ch: &Channel = self.channel.borrow();
        let until = std::time::Instant::now() + self.spin;
        loop {
            for _ in 0..32 {
                if ch.has_data() || ch.peer_closed() {
                    self.spin = (self.spin * 2).min(self.spin_max);
                    return true;
                }
                std::hint::spin_loop();
            }
            if std::time::Instant::now() >= until {
                self.spin = (self.spin / 2).max(SPIN_MIN.min(self.spin_max));
                return false;
            }
        }
    }

    /// The channel, for its synchronous methods.
    pub fn get_mut(&mut self) -> &mut Channel {
        // The caller may swap another channel in and drop this one: nothing of it may stay
        // registered with the reactor or announced on its cells.
        self.withdraw();
        self.channel.borrow_mut()
    }

    /// Receives the next message (whole, reassembled if it came in fragments) as an owned
    /// vector. Errors as [`Channel::recv`].
    pub async fn recv(&mut self) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.recv_into(&mut buf).await?;
        Ok(buf)
    }

    /// Receives the next message into `buf` (replacing its contents); returns its length.
    pub async fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize> {
        poll_fn(|cx| loop {
            let ch: &mut Channel = self.channel.borrow_mut();
            self.recv_sleeper.withdraw_from(ch.data_cell());
            match ch.try_recv() {
                Ok(msg) => {
                    buf.clear();
                    buf.extend_from_slice(&msg);
                    return Poll::Ready(Ok(buf.len()));
                }
                Err(Error::Empty) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            if self.poll_ring() {
                continue;
            }
            let ch: &mut Channel = self.channel.borrow_mut();
            let seen = self.recv_sleeper.announce(ch.data_cell());
            self.recv_reg.arm(&ch.data_cell().futex, seen, cx.waker());
            // F1: pairs with F2 in the peer's `wake_if_sleeping` (see `wait`): either we see
            // its frame now, or it sees our sleeper and changes the word the reactor watches.
            full_fence();
            if !ch.has_data() && !ch.peer_closed() {
                return Poll::Pending;
            }
            self.recv_reg.disarm();
        })
        .await
    }

    /// Sends one message of at most [`max_frame`](Channel::max_frame) bytes
    /// ([`Error::TooLarge`] past it), waiting for room. Errors as [`Channel::send`].
    pub async fn send(&mut self, bytes: &[u8]) -> Result<()> {
        poll_fn(|cx| loop {
            let ch: &mut Channel = self.channel.borrow_mut();
            self.send_sleeper.withdraw_from(ch.space_cell());
            match ch.try_send(bytes) {
                Ok(()) => return Poll::Ready(Ok(())),
                // A peer that died never makes room: look at it before waiting.
                Err(Error::Full) => {
                    if let Err(e) = ch.check_peer() {
                        return Poll::Ready(Err(e));
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
            let seen = self.send_sleeper.announce(ch.space_cell());
            self.send_reg.arm(&ch.space_cell().futex, seen, cx.waker());
            // F1: as in `recv_into`, with the peer's F2 after it releases space.
            full_fence();
            if !ch.has_room(bytes.len()) && !ch.peer_closed() {
                return Poll::Pending;
            }
            self.send_reg.disarm();
        })
        .await
    }

    fn withdraw(&mut self) {
        let ch: &Channel = self.channel.borrow();
        self.recv_sleeper.withdraw_from(ch.data_cell());
        self.send_sleeper.withdraw_from(ch.space_cell());
        self.recv_reg.disarm();
        self.send_reg.disarm();
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
    /// [`WaitStrategy::Block`] for the connections to be usable from tasks.
    pub fn bind(name: &str, config: &Config) -> Result<AsyncListener> {
        Ok(Self::new(Listener::bind(name, config)?))
    }

    /// Wraps a listener.
    pub fn new(listener: Listener) -> AsyncListener {
        AsyncListener {
            reg: None,
            listener,
        }
    }

    /// The listener, for its synchronous methods.
    pub fn get_ref(&self) -> &Listener {
        &self.listener
    }

    /// Waits for the next client and connects to it.
    pub async fn accept(&mut self) -> Result<AsyncChannel<Connection>> {
        let conn = poll_fn(|cx| {
            let bell = self.listener.doorbell();
            // Acquire: pairs with the client's Release increment of the doorbell.
            let seen = bell.load(Ordering::Acquire);
            match self.listener.try_accept() {
                Ok(conn) => return Poll::Ready(Ok(conn)),
                Err(Error::Empty) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            // A client that published after `seen` changed the word: the reactor wakes us.
            self.reg
                .get_or_insert_with(Registration::new)
                .arm(bell, seen, cx.waker());
            Poll::Pending
        })
        .await?;
        AsyncChannel::new(conn)
    }
}

/// Connects to the listener `name` as a client (see [`Listener::connect`]); the wait for the
/// server to accept runs on tokio's blocking pool.
pub async fn connect(name: &str) -> Result<AsyncChannel> {
    let name = name.to_owned();
    let channel =
        ::tokio::task::spawn_blocking(move || Listener::connect(&name, WaitStrategy::Block))
            .await
            .map_err(|e| Error::Io(std::io::Error::other(e)))??;
    AsyncChannel::new(channel)
}
