//! One server, many clients on the fallback backend: a listener that hands out one
//! [`IpcDuplex`] per client.
//!
//! The listener owns an accept thread that publishes one
//! [`IpcOneShotServer`](ipc_channel::ipc::IpcOneShotServer) after another in the rendezvous file
//! (`listener\n<pid>\n<server>`, replaced in one step; the file's rules are in
//! `rendezvous/`), and passes each resulting connection to [`IpcListener::accept`]
//! through a queue. A client reads the file, connects to the server it names and sends a hello
//! with the creator's halves of a new duplex (as for a plain channel) and a sender for the
//! reply:
//!
//! * the accept thread answers [`Reply::Accepted`] before queueing the connection, or
//!   [`Reply::Refused`] while it holds `max_clients` live connections (a lease in each
//!   handed-out connection counts them; dropping it frees the place); only this thread adds to
//!   the count;
//! * several clients may read the same server name, and the one-shot server takes one of them:
//!   the others' hellos are discarded with the server's socket, which closes their reply
//!   channel without an answer. Such a client reads the file again and retries, within its
//!   deadline.
//!
//! Each server waits for its one hello on a thread of its own
//! ([`IpcOneShotServer::accept`](ipc_channel::ipc::IpcOneShotServer::accept) has no timeout), so a
//! connection that sends nothing holds that server only, not the listener: a client whose answer is
//! late (more than [`CLIENT_CHECK`]) says so by holding the [`WAITING_BYTE`] lock of the lock file,
//! and when the current server has taken no hello for [`HELLO_WAIT`] while a client says so, the
//! accept thread retires it (wakes its thread if it is idle, removes its socket so that nobody else
//! connects to it) and publishes the next one. The waiting client sees the file name another server
//! and retries there. At most [`MAX_SERVING`] servers wait for a hello at once: past that, nothing
//! is retired until one of them ends, so silent connections cannot make threads without bound.
//!
//! Liveness is an open-file-description lock (`crate::sys::lock`) on the lock file beside the
//! rendezvous file (`shmlink-<name>.ipc.lock`), held for the listener's whole life: a second
//! listener of the same name fails while it is held, and a listener whose process died
//! (lock released by the kernel) is reclaimed by the next [`IpcListener::bind`]. A waiting
//! client that sees the lock released stops waiting. Pids are only reported, never judged.
//!
//! Dropping the listener stops the accept thread (it sets the stop flag under the mutex the
//! thread publishes under, so nothing is published after it, and sends the thread a stop
//! event); the thread wakes its servers' threads and removes their sockets, and the drop
//! removes the rendezvous file and the lock file while still holding the lock. A server thread
//! held by a connection that sends nothing ends when that connection closes; it publishes
//! nothing and its socket is gone.
//!
//! This file holds the listener ([`IpcListener`]: `bind`, `accept`, its drop) and what it shares
//! with its accept thread (the queue of connections, the stop flag, the hello and the reply);
//! `serve.rs` the accept thread; `connect.rs` a client's side; `lease.rs` a client's place (its
//! [`Lease`]) and the lock file; `tests.rs` the unit tests.

use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ipc_channel::ipc::IpcSender;
use serde::{Deserialize, Serialize};

mod connect;
mod lease;
mod serve;

use super::rendezvous::{self, Kind, Serves};
use super::topic::history_message;
use super::{validate_name, Halves, IpcDuplex};
use crate::error::{ChannelName, OpenError as Error};
use crate::seam::SendCore;
use crate::shm::layout::listener::MAX_CLIENTS;
use crate::shm::layout::topic::MAX_SUBSCRIBERS;
use crate::shm::layout::CREATOR_LOCK;
use crate::wait::Deadline;
pub(crate) use connect::{connect, wrong_kind};
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) use lease::lock_path;
pub(crate) use lease::{alive, remove_dead_server, take_lock, Lease};
use serve::Worker;

type Result<T, E = Error> = std::result::Result<T, E>;

/// How often a client waiting for the server's answer looks whether the listener still lives
/// and still publishes the server it waits on; an answer later than this is late.
const CLIENT_CHECK: Duration = Duration::from_millis(10);
/// How long the current server may go without a hello while a client's answer is late before
/// the accept thread retires it and publishes the next one.
const HELLO_WAIT: Duration = Duration::from_millis(250);
/// Most one-shot servers waiting for their hello at once (each on a thread).
const MAX_SERVING: usize = 8;
/// The byte of the lock file a client holds while its answer is late (the listener's own lock
/// is on [`crate::shm::layout::CREATOR_LOCK`]).
const WAITING_BYTE: u64 = 1;
const _: () = assert!(WAITING_BYTE != CREATOR_LOCK);
/// How long a dropped listener waits for its accept thread to end (it only stays longer while
/// the operating system keeps it from running); after that the thread is left to end alone.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// What a client sends to the current one-shot server.
#[derive(Serialize, Deserialize)]
enum Hello {
    /// A client: the creator's halves of its connection, and where to answer.
    Client {
        halves: Halves,
        reply: IpcSender<Reply>,
    },
}

/// The server's answer to a client's hello.
#[derive(Serialize, Deserialize, Debug)]
enum Reply {
    /// The connection is queued for [`IpcListener::accept`].
    Accepted,
    /// The listener holds as many connections as it admits.
    Refused { limit: u64 },
}

/// What the accept thread hands to [`IpcListener::accept`].
pub(crate) type Accepted = (IpcDuplex, Lease);
/// Connections the accept thread hands to `accept`: a deque under a mutex that is only held
/// for a moment, so that every `accept_timeout` of several threads keeps its deadline.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Result<Accepted>>,
    /// The accept thread ended: nothing more comes.
    ended: bool,
    /// The listener was dropped: nobody takes anything any more.
    closed: bool,
    /// A topic's history: the messages each new connection is greeted with.
    kept: Option<Kept>,
}

/// The last messages of a topic, kept for subscribers that join late.
struct Kept {
    /// How many.
    keep: usize,
    messages: VecDeque<Vec<u8>>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // Pushes and pops leave the state whole even if a panic unwinds: ignore poisoning.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `item`; false (and `item` dropped) once the listener is gone. A new connection
    /// of a topic with a history is greeted with it first, under the lock
    /// [`IpcListener::arrivals`] adds to the history under: a message is either in its greeting
    /// or sent to it once the publisher took it in, never both, never neither.
    fn push(&self, mut item: Result<Accepted>) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        if let (Ok((duplex, _)), Some(kept)) = (&mut item, &state.kept) {
            if !kept.messages.is_empty() {
                // Handed to the connection's own sending thread: this never waits for the
                // subscriber to read. A connection that fails here fails its first send.
                let _ = duplex.send_until(
                    &history_message(&kept.messages),
                    Deadline::At(Instant::now()),
                );
            }
        }
        state.items.push_back(item);
        self.ready.notify_one();
        true
    }

    /// Marks the end of the accept thread.
    fn end(&self) {
        self.lock().ended = true;
        self.ready.notify_all();
    }

    /// Marks the listener gone and returns what was never accepted (for the caller to drop
    /// outside the lock).
    fn close(&self) -> VecDeque<Result<Accepted>> {
        let mut state = self.lock();
        state.closed = true;
        std::mem::take(&mut state.items)
    }

    /// The next item; `Ok(None)` when the thread ended and nothing is left, `Err(Timeout)`
    /// naming the listener `name` past `deadline`.
    fn pop(
        &self,
        deadline: Option<Instant>,
        name: &ChannelName,
    ) -> Result<Option<Result<Accepted>>> {
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Ok(Some(item));
            }
            if state.ended {
                return Ok(None);
            }
            state = match deadline {
                None => self
                    .ready
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(Error::Timeout {
                            channel: name.clone(),
                            waited_for: crate::error::NO_CLIENT_CAME,
                        });
                    }
                    self.ready
                        .wait_timeout(state, d - now)
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .0
                }
            };
        }
    }
}

/// Shared by the listener and its accept thread.
#[derive(Default)]
struct Control {
    /// Set by the listener's drop: the thread publishes nothing more and ends.
    stopping: bool,
}

fn locked(control: &Mutex<Control>) -> MutexGuard<'_, Control> {
    // Nothing in the guarded section can leave the state half-updated: ignore poisoning.
    control
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What wakes the accept thread.
enum Event {
    /// The thread of server `id` ended: with a hello, or without (a connection that closed or
    /// sent something else, a wake).
    Ended { id: u64, hello: Option<Hello> },
    /// The listener was dropped.
    Stop,
}

/// A listener on the fallback backend.
pub(crate) struct IpcListener {
    name: ChannelName,
    max_clients: usize,
    queue: Arc<Queue>,
    control: Arc<Mutex<Control>>,
    /// Stops the accept thread.
    events: mpsc::Sender<Event>,
    thread: Option<JoinHandle<()>>,
    rendezvous: PathBuf,
    lock_path: PathBuf,
    /// Holds the listener's lock (released when this closes, after the files are removed).
    _lock_file: File,
}

impl std::fmt::Debug for IpcListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpcListener")
            .field("name", &self.name)
            .field("max_clients", &self.max_clients)
            .finish()
    }
}

impl IpcListener {
    /// Makes the listener `name`, admitting at most `max_clients` live connections.
    pub(crate) fn bind(name: &str, max_clients: usize) -> Result<IpcListener> {
        IpcListener::serve(name, max_clients, Serves::Clients, 0)
    }

    /// Makes the listener `name` for what `serves` says (a topic's publisher serves its
    /// subscribers through one), admitting at most `max_clients` live connections; each
    /// connection is greeted with the last `keep` messages [`IpcListener::arrivals`] was given
    /// (a topic's history).
    pub(crate) fn serve(
        name: &str,
        max_clients: usize,
        serves: Serves,
        keep: usize,
    ) -> Result<IpcListener> {
        validate_name(name)?;
        let limit = match serves {
            Serves::Clients => MAX_CLIENTS,
            Serves::Topic { .. } => MAX_SUBSCRIBERS,
        };
        if !(1..=limit).contains(&max_clients) {
            return Err(Error::InvalidConfig {
                channel: name.into(),
                what: match serves {
                    Serves::Clients => {
                        format!("max_clients {max_clients} must be between 1 and {limit}")
                    }
                    Serves::Topic { .. } => {
                        format!("max_subscribers {max_clients} must be between 1 and {limit}")
                    }
                },
            });
        }
        let (lock_path, lock_file) = take_lock(name)?.ok_or_else(|| Error::AlreadyExists {
            channel: name.into(),
        })?;
        remove_dead_server(name);
        rendezvous::remove_dead_homes();
        rendezvous::remove_unpublished(name);
        let rendezvous = rendezvous::checked_path(name, Kind::Rendezvous, false)?;
        let control = Arc::new(Mutex::new(Control::default()));
        let queue = Arc::new(Queue::default());
        if keep > 0 {
            queue.lock().kept = Some(Kept {
                keep,
                messages: VecDeque::new(),
            });
        }
        let (events, received) = mpsc::channel();
        let mut worker = Worker::new(
            name,
            rendezvous.clone(),
            max_clients,
            serves,
            Arc::clone(&control),
            Arc::clone(&queue),
            (events.clone(), received),
        );
        // The first server is published before `bind` returns, so a client that connects
        // right after finds it.
        let first = worker.publish_next();
        if !matches!(first, Ok(true)) {
            drop(worker);
            let _ = std::fs::remove_file(&rendezvous);
            let _ = std::fs::remove_file(&lock_path);
            // Not stopping: only the listener's drop sets that.
            return Err(first.err().unwrap_or_else(|| Error::Disconnected {
                channel: name.into(),
            }));
        }
        let thread = std::thread::Builder::new()
            .name(format!("shmlink-listen-{name}"))
            .spawn(move || worker.run());
        let thread = match thread {
            Ok(thread) => thread,
            Err(e) => {
                let _ = std::fs::remove_file(&rendezvous);
                let _ = std::fs::remove_file(&lock_path);
                return Err(Error::Io(e));
            }
        };
        Ok(IpcListener {
            name: name.into(),
            max_clients,
            queue,
            control,
            events,
            thread: Some(thread),
            rendezvous,
            lock_path,
            _lock_file: lock_file,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn max_clients(&self) -> usize {
        self.max_clients
    }

    /// The accept thread ended (after an error it reported once).
    fn ended(&self) -> Error {
        Error::Disconnected {
            channel: self.name.clone(),
        }
    }

    /// Waits for the next connection; at most until `deadline`.
    pub(crate) fn accept(&self, deadline: Option<Instant>) -> Result<Accepted> {
        match self.queue.pop(deadline, &self.name)? {
            Some(next) => next,
            None => Err(self.ended()),
        }
    }

    /// Every connection waiting now; `sent`, if given, is added to the history connections
    /// are greeted with, in the same step (see `Queue::push`).
    pub(crate) fn arrivals(&self, sent: Option<&[u8]>) -> VecDeque<Result<Accepted>> {
        let mut state = self.queue.lock();
        if let (Some(kept), Some(sent)) = (&mut state.kept, sent) {
            if kept.messages.len() == kept.keep {
                kept.messages.pop_front();
            }
            kept.messages.push_back(sent.to_vec());
        }
        std::mem::take(&mut state.items)
    }

    /// A connection that is waiting now, else [`Error::NoClient`].
    pub(crate) fn try_accept(&self) -> Result<Accepted> {
        match self.accept(Some(Instant::now())) {
            Err(Error::Timeout { channel, .. }) => Err(Error::NoClient { channel }),
            other => other,
        }
    }
}

impl Drop for IpcListener {
    fn drop(&mut self) {
        // Under the mutex the thread publishes under: nothing is published after this.
        locked(&self.control).stopping = true;
        let _ = self.events.send(Event::Stop);
        if let Some(thread) = self.thread.take() {
            let deadline = Instant::now() + STOP_WAIT;
            while !thread.is_finished() && Instant::now() < deadline {
                // A bounded wait for a thread that has been told to stop; nothing to poll.
                std::thread::sleep(Duration::from_millis(1));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
        // Connections never accepted: dropped here, so their clients see a clean close.
        drop(self.queue.close());
        // Both removed while the lock is held: a new listener cannot have taken the name.
        let _ = std::fs::remove_file(&self.rendezvous);
        let _ = std::fs::remove_file(&self.lock_path);
    }
}

#[cfg(test)]
mod tests;
