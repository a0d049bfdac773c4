//! One server, many clients on the fallback backend: a listener that hands out one
//! [`IpcDuplex`] per client.
//!
//! The listener owns an accept thread that publishes one
//! [`IpcOneShotServer`](ipc_channel::ipc::IpcOneShotServer) after another in the rendezvous file
//! (`listener\n<pid>\n<server>`, replaced in one step; the file's rules are in
//! `rendezvous.rs`), and passes each resulting connection to [`IpcListener::accept`]
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

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ipc_channel::ipc::{self, IpcSender};
use ipc_channel::TryRecvError;
use serde::{Deserialize, Serialize};

use super::rendezvous::{self, Connecting, Kind, Published};
use super::{connector_side, validate_name, Halves, IpcDuplex};
use crate::error::{ChannelName, OpenError as Error};
use crate::layout::listener::MAX_CLIENTS;
use crate::layout::CREATOR_LOCK;
use crate::sys::lock;

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
/// is on [`crate::layout::CREATOR_LOCK`]).
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

/// Where the lock file of listener or channel `name` lives (beside its rendezvous file).
#[cfg(any(test, feature = "test-hooks"))]
pub(crate) fn lock_path(name: &str) -> PathBuf {
    rendezvous::path_of(name, Kind::Lock)
}

/// Opens the lock file of `name` (checked as [`rendezvous::open`] does); `Err(NotFound)`
/// without one.
fn open_lock(name: &str, write: bool) -> Result<File> {
    let path = rendezvous::checked_path(name, Kind::Lock, false)?;
    rendezvous::open(
        &path,
        name,
        Kind::Lock,
        OpenOptions::new().read(true).write(write),
    )
}

/// True while a live listener (or channel creator) holds the lock of `name`.
pub(crate) fn alive(name: &str) -> Result<bool> {
    match open_lock(name, false) {
        Ok(file) => Ok(lock::alive(file.as_raw_fd(), CREATOR_LOCK)?),
        Err(Error::NotFound { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Counts a listener's live connections; each handed-out connection holds one [`Lease`].
#[derive(Debug)]
pub(crate) struct Lease(Arc<AtomicUsize>);

impl Drop for Lease {
    fn drop(&mut self) {
        // Release: pairs with the accept thread's Acquire load of the count: the connection is
        // done with before its place is given to another client.
        self.0.fetch_sub(1, Ordering::Release);
    }
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
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // Pushes and pops leave the state whole even if a panic unwinds: ignore poisoning.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `item`; false (and `item` dropped) once the listener is gone.
    fn push(&self, item: Result<Accepted>) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
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

/// Opens (making it, and its directory, if need be) the lock file of `name` and takes its
/// lock: `Ok(None)` when a live listener or channel creator holds it. A listener and a channel's
/// creator take the same lock, so one name is one or the other, as in shared memory.
pub(crate) fn take_lock(name: &str) -> Result<Option<(PathBuf, File)>> {
    let path = rendezvous::checked_path(name, Kind::Lock, true)?;
    loop {
        let file = rendezvous::open(
            &path,
            name,
            Kind::Lock,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .mode(0o600),
        )?;
        if !lock::take(&file, CREATOR_LOCK, false)? {
            return Ok(None);
        }
        // A listener that was closing may have removed the file between our open and our
        // lock: then we locked a file nobody else will look at; open the new one.
        let ours = file.metadata()?;
        match std::fs::symlink_metadata(&path) {
            Ok(now) if now.dev() == ours.dev() && now.ino() == ours.ino() => {
                return Ok(Some((path, file)))
            }
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::Io(e)),
        }
    }
}

/// With the lock of `name` taken: if its rendezvous file still names the one-shot server of a
/// listener that died, removes that server's socket and the directory ipc-channel made for it
/// (nobody else removes them). Only a socket of this user, alone in a `.tmp*` directory of this
/// user in the temporary directory, is touched.
pub(crate) fn remove_dead_server(name: &str) {
    let Ok(Published::Listener { server, .. }) = rendezvous::read(name) else {
        return;
    };
    let socket = Path::new(&server);
    let Some(dir) = socket.parent() else {
        return;
    };
    let made_by_ipc_channel = socket.file_name() == Some("socket".as_ref())
        && dir.parent() == Some(std::env::temp_dir().as_path())
        && dir
            .file_name()
            .and_then(|d| d.to_str())
            .is_some_and(|d| d.starts_with(".tmp"));
    if made_by_ipc_channel && rendezvous::unlink_server(&server) {
        // Fails, harmlessly, if anything else is in it.
        let _ = std::fs::remove_dir(dir);
    }
}

impl IpcListener {
    /// Makes the listener `name`, admitting at most `max_clients` live connections.
    pub(crate) fn bind(name: &str, max_clients: usize) -> Result<IpcListener> {
        validate_name(name)?;
        if !(1..=MAX_CLIENTS).contains(&max_clients) {
            return Err(Error::InvalidConfig {
                channel: name.into(),
                what: format!("max_clients {max_clients} must be between 1 and {MAX_CLIENTS}"),
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
        let (events, received) = mpsc::channel();
        let mut worker = Worker {
            name: name.to_owned(),
            rendezvous: rendezvous.clone(),
            max_clients,
            live: Arc::new(AtomicUsize::new(0)),
            control: Arc::clone(&control),
            queue: Arc::clone(&queue),
            // The worker's own open of the lock file, without any lock: for asking whether a
            // client holds the waiting byte.
            waiting: open_lock(name, false).ok(),
            events: received,
            sender: events.clone(),
            serving: Vec::new(),
            next_id: 0,
        };
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

/// A one-shot server whose thread has not ended yet.
struct Serving {
    id: u64,
    server: String,
    /// Published now (at most one is).
    current: bool,
    /// Taken out of service: woken, its socket removed.
    retired: bool,
    /// Its directory, removed when it is taken out of service or its thread ends (or the
    /// accept thread does).
    home: Option<rendezvous::ServerHome>,
}

/// The accept thread's state.
struct Worker {
    name: String,
    rendezvous: PathBuf,
    max_clients: usize,
    /// Live connections (leases handed out and not dropped).
    live: Arc<AtomicUsize>,
    control: Arc<Mutex<Control>>,
    queue: Arc<Queue>,
    /// An open of the lock file, to ask whether a client's answer is late.
    waiting: Option<File>,
    events: mpsc::Receiver<Event>,
    /// Given to each server's thread.
    sender: mpsc::Sender<Event>,
    serving: Vec<Serving>,
    next_id: u64,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // However the thread ends (a panic included), `accept` stops waiting for it, and no
        // server of the listener stays waiting or reachable.
        self.queue.end();
        for serving in self.serving.iter().filter(|s| !s.retired) {
            rendezvous::wake(&serving.server);
            rendezvous::unlink_server(&serving.server);
        }
    }
}

impl Worker {
    fn stopping(&self) -> bool {
        locked(&self.control).stopping
    }

    /// Reports `e` to `accept` and takes the listener's server out of the rendezvous file, so
    /// that clients stop looking for it.
    fn fail(&self, e: Error) {
        let control = locked(&self.control);
        if !control.stopping {
            let _ = std::fs::remove_file(&self.rendezvous);
        }
        self.queue.push(Err(e));
    }

    /// Makes the next one-shot server, starts its thread and publishes it: `Ok(false)` once the
    /// listener stops.
    fn publish_next(&mut self) -> Result<bool> {
        let (server, server_name, server_home) = rendezvous::new_server::<Hello>()?;
        let id = self.next_id;
        self.next_id += 1;
        let events = self.sender.clone();
        std::thread::Builder::new()
            .name(format!("shmlink-hello-{}", self.name))
            .spawn(move || {
                // A connector that died half-way or sent something else is an error here.
                // ipc-channel panics on some malformed messages (a channel index out of
                // range): that too is only a bad hello, not the end of the listener.
                let hello =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| server.accept()))
                        .ok()
                        .and_then(|accepted| accepted.ok())
                        .map(|(_bootstrap, hello)| hello);
                // The listener may be gone: nobody to tell.
                let _ = events.send(Event::Ended { id, hello });
            })?;
        self.serving.push(Serving {
            id,
            server: server_name.clone(),
            current: false,
            retired: false,
            home: server_home,
        });
        // Published under the lock that the drop sets `stopping` under: once the drop has set
        // it, nothing is published any more (the drop of the worker wakes this server).
        let control = locked(&self.control);
        if control.stopping {
            return Ok(false);
        }
        let contents = format!(
            "{}\n{}\n{server_name}",
            rendezvous::LISTENER_TAG,
            std::process::id()
        );
        rendezvous::publish(&self.rendezvous, &contents)?;
        drop(control);
        if let Some(last) = self.serving.last_mut() {
            last.current = true;
        }
        Ok(true)
    }

    /// Publishes the next server; false (after reporting any error) when the thread must end.
    fn next(&mut self) -> bool {
        match self.publish_next() {
            Ok(published) => published,
            Err(e) => {
                self.fail(e);
                false
            }
        }
    }

    /// Serves until the listener stops (or publishing fails).
    fn run(mut self) {
        loop {
            match self.events.recv_timeout(HELLO_WAIT) {
                Ok(Event::Ended { id, hello }) => {
                    let was_current = self.ended(id);
                    if self.stopping() {
                        return;
                    }
                    if let Some(Hello::Client { halves, reply }) = hello {
                        if !self.answer(halves, reply) {
                            return;
                        }
                    }
                    if was_current && !self.next() {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if self.stopping() {
                        return;
                    }
                    if self.stalled() {
                        self.retire_current();
                        if !self.next() {
                            return;
                        }
                    }
                }
                Ok(Event::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    /// Forgets the server `id`, whose thread ended; true if it was the published one.
    fn ended(&mut self, id: u64) -> bool {
        let Some(at) = self.serving.iter().position(|s| s.id == id) else {
            return false;
        };
        self.serving.swap_remove(at).current
    }

    /// True when the published server should be given up: a client's answer is late and there
    /// is room for another server's thread.
    fn stalled(&self) -> bool {
        let late = match &self.waiting {
            // Unknown: assume a client waits.
            Some(file) => lock::alive(file.as_raw_fd(), WAITING_BYTE).unwrap_or(true),
            None => true,
        };
        late && self.serving.len() < MAX_SERVING && self.serving.iter().any(|s| s.current)
    }

    /// Takes the published server out of service: wakes its thread if it is waiting for a
    /// connection, and removes its socket so that no other connection reaches it.
    fn retire_current(&mut self) {
        if let Some(serving) = self.serving.iter_mut().find(|s| s.current) {
            serving.current = false;
            serving.retired = true;
            rendezvous::wake(&serving.server);
            rendezvous::unlink_server(&serving.server);
            serving.home = None;
        }
    }

    /// Answers a client's hello; false once the listener is gone.
    fn answer(&self, halves: Halves, reply: IpcSender<Reply>) -> bool {
        // Acquire: pairs with the Release decrement of a dropped lease. Only this thread adds,
        // so the count cannot grow between the check and the add.
        if self.live.load(Ordering::Acquire) >= self.max_clients {
            let limit = self.max_clients as u64;
            let _ = reply.send(Reply::Refused { limit });
            return true;
        }
        // Relaxed: the count publishes nothing; the lease's decrement is the Release.
        self.live.fetch_add(1, Ordering::Relaxed);
        let lease = Lease(Arc::clone(&self.live));
        if reply.send(Reply::Accepted).is_err() {
            // The client gave up: its place goes with the lease.
            return true;
        }
        let duplex = IpcDuplex::from_halves(&self.name, halves);
        self.queue.push(Ok((duplex, lease)))
    }
}

/// Connects to the listener `name` (whose rendezvous file says it is one): waits until the
/// server has accepted or refused, at most until `deadline`.
pub(crate) fn connect(name: &str, deadline: Option<Instant>) -> Result<IpcDuplex> {
    let past = |deadline: Option<Instant>| deadline.is_some_and(|d| Instant::now() >= d);
    loop {
        let (pid, server) = match rendezvous::read(name)? {
            Published::Listener { pid, server } => (pid, server),
            // Replaced by a plain channel meanwhile.
            Published::Channel { .. } => return IpcDuplex::connect_until(name, deadline),
        };
        // A file whose listener died: nothing behind it until a new listener binds.
        if !alive(name)? {
            return Err(Error::NotFound {
                channel: name.into(),
            });
        }
        if let Some(duplex) = attempt(name, pid, &server, deadline)? {
            return Ok(duplex);
        }
        // Not taken: another client got that server, which is being replaced. Read again.
        if past(deadline) {
            return Err(Error::Timeout {
                channel: name.into(),
                waited_for: crate::error::NOT_ACCEPTED,
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A client's wait for the server `server` of listener `name`, between two looks.
struct Waiting<'a> {
    name: &'a str,
    server: &'a str,
    pid: u32,
    deadline: Option<Instant>,
    /// The client's own open of the lock file, once its answer is late: it holds the waiting
    /// byte (released when this closes) and asks whether the listener lives.
    lock: Option<File>,
}

impl Waiting<'_> {
    /// How long to wait before the next look.
    fn slice(&self) -> Duration {
        match self.deadline {
            Some(d) => CLIENT_CHECK.min(d.saturating_duration_since(Instant::now())),
            None => CLIENT_CHECK,
        }
    }

    /// Looks after a wait that brought nothing: `Err(Timeout)` past the deadline, `PeerGone`
    /// when the listener died, `Ok(false)` when it publishes another server now (this one will
    /// not answer), else says that this client's answer is late and `Ok(true)`.
    fn still_waiting(&mut self) -> Result<bool> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::Timeout {
                channel: self.name.into(),
                waited_for: crate::error::NOT_ACCEPTED,
            });
        }
        if self.lock.is_none() {
            match open_lock(self.name, true) {
                Ok(file) => self.lock = Some(file),
                Err(Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        let Some(file) = &self.lock else {
            return Ok(false);
        };
        if !lock::alive(file.as_raw_fd(), CREATOR_LOCK)? {
            return Err(Error::PeerGone {
                channel: self.name.into(),
                pid: self.pid,
            });
        }
        // Held by another waiting client already: it says the same for both.
        let _ = lock::take(file, WAITING_BYTE, false)?;
        Ok(matches!(rendezvous::read(self.name),
            Ok(Published::Listener { server, .. }) if server == self.server))
    }
}

/// One try with the server `server`: `Ok(None)` if it did not take our hello.
fn attempt(
    name: &str,
    pid: u32,
    server: &str,
    deadline: Option<Instant>,
) -> Result<Option<IpcDuplex>> {
    let mut waiting = Waiting {
        name,
        server,
        pid,
        deadline,
        lock: None,
    };
    let connecting = match Connecting::<Hello>::start(name, server) {
        Ok(connecting) => connecting,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let bootstrap = loop {
        match connecting.wait(waiting.slice()) {
            Ok(Some(bootstrap)) => break bootstrap,
            Ok(None) => {}
            Err(Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        }
        if !waiting.still_waiting()? {
            return Ok(None);
        }
    };
    let (halves, link) = connector_side()?;
    // Made before the answer comes, so that giving up says goodbye (a clean close) to a server
    // that accepted us after all.
    let duplex = IpcDuplex::connector(name, link, pid);
    let (reply, answer) = ipc::channel::<Reply>()?;
    if bootstrap.send(Hello::Client { halves, reply }).is_err() {
        return Ok(None);
    }
    drop(bootstrap);
    loop {
        match answer.try_recv_timeout(waiting.slice()) {
            Ok(Reply::Accepted) => return Ok(Some(duplex)),
            Ok(Reply::Refused { limit }) => {
                return Err(Error::TooManyClients {
                    channel: name.into(),
                    limit: usize::try_from(limit).unwrap_or(usize::MAX),
                })
            }
            Err(TryRecvError::Empty) => {}
            // The server went without answering: our hello was not taken (or the listener
            // died, which the caller finds out).
            Err(TryRecvError::IpcError(_)) => return Ok(None),
        }
        if !waiting.still_waiting()? {
            return Ok(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::{Receiver, Sender};

    type Result<T = (), E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

    const LIMIT: Duration = Duration::from_secs(10);

    fn deadline() -> Option<Instant> {
        Some(Instant::now() + LIMIT)
    }

    #[test]
    fn files_left_by_a_publisher_killed_half_way_are_removed_by_the_next_bind() -> Result {
        let name = format!("ipc-listener-unpublished-{}", std::process::id());
        let path = rendezvous::checked_path(&name, Kind::Rendezvous, true)?;
        let leftover = path.with_extension("ipc.tmp-4242-7");
        std::fs::write(&leftover, "half-published")?;
        let listener = IpcListener::bind(&name, 1)?;
        let gone = !leftover.exists();
        let _ = std::fs::remove_file(&leftover);
        drop(listener);
        assert!(gone, "{} was left", leftover.display());
        assert!(!path.exists());
        Ok(())
    }

    #[test]
    fn clients_racing_for_one_server_all_get_in() -> Result {
        let name = format!("ipc-listener-race-{}", std::process::id());
        let listener = IpcListener::bind(&name, 8)?;
        let clients: Vec<_> = (0..8u8)
            .map(|i| {
                let name = name.clone();
                std::thread::spawn(move || -> Result<u8> {
                    let mut duplex = connect(&name, deadline())?;
                    duplex.send(&[i])?;
                    let reply = duplex.recv_timeout(LIMIT)?.to_vec();
                    Ok(reply[0])
                })
            })
            .collect();
        let mut accepted = Vec::new();
        for _ in 0..8 {
            let (mut duplex, lease) = listener.accept(deadline())?;
            let msg = duplex.recv_timeout(LIMIT)?.to_vec();
            duplex.send(&msg)?;
            accepted.push((duplex, lease));
        }
        let mut ids: Vec<u8> = clients
            .into_iter()
            .map(|c| c.join().expect("client thread"))
            .collect::<Result<_>>()?;
        ids.sort_unstable();
        assert_eq!(ids, (0..8).collect::<Vec<u8>>());
        // The ninth is refused while the eight are held.
        assert!(matches!(
            connect(&name, deadline()),
            Err(Error::TooManyClients { limit: 8, .. })
        ));
        assert!(matches!(listener.try_accept(), Err(Error::NoClient { .. })));
        Ok(())
    }

    #[test]
    fn concurrent_accepts_each_keep_their_deadline() -> Result {
        let name = format!("ipc-listener-accepts-{}", std::process::id());
        let listener = Arc::new(IpcListener::bind(&name, 2)?);
        let long = {
            let listener = Arc::clone(&listener);
            std::thread::spawn(move || listener.accept(deadline()).map(|(duplex, _)| duplex))
        };
        // Whichever of the two waits first, the short one ends at its deadline.
        assert!(matches!(
            listener.accept(Some(Instant::now() + Duration::from_millis(50))),
            Err(Error::Timeout { .. })
        ));
        assert!(!long.is_finished(), "the long accept is still waiting");
        let mut client = connect(&name, deadline())?;
        let mut server = long.join().expect("accept thread")?;
        client.send(b"late")?;
        assert_eq!(&*server.recv_timeout(LIMIT)?, b"late");
        Ok(())
    }

    #[test]
    fn a_live_name_is_not_bound_twice_and_a_closed_one_leaves_nothing() -> Result {
        let name = format!("ipc-listener-twice-{}", std::process::id());
        let listener = IpcListener::bind(&name, 1)?;
        assert!(
            matches!(IpcListener::bind(&name, 1), Err(Error::AlreadyExists { channel: n }) if n == name)
        );
        assert!(
            matches!(IpcDuplex::create(&name), Err(Error::AlreadyExists { channel: n }) if n == name)
        );
        assert!(alive(&name)?);
        drop(listener);
        assert!(!rendezvous::rendezvous_path(&name).exists());
        assert!(!lock_path(&name).exists());
        assert!(!alive(&name)?);
        assert!(matches!(
            connect(&name, deadline()),
            Err(Error::NotFound { .. })
        ));
        drop(IpcListener::bind(&name, 1)?);
        Ok(())
    }

    #[test]
    fn garbage_hellos_do_not_stop_the_listener() -> Result {
        let name = format!("ipc-listener-garbage-{}", std::process::id());
        let listener = IpcListener::bind(&name, 4)?;
        for _ in 0..3 {
            let Ok(Published::Listener { server, .. }) = rendezvous::read(&name) else {
                panic!("listener not published");
            };
            if let Ok(sender) = IpcSender::<(u64, String)>::connect(server.clone()) {
                let _ = sender.send((u64::MAX, "not a hello".to_owned()));
            }
            // Wait until the thread has moved on to its next server.
            let start = Instant::now();
            while start.elapsed() < LIMIT
                && matches!(rendezvous::read(&name),
                    Ok(Published::Listener { server: now, .. }) if now == server)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let mut client = connect(&name, deadline())?;
        let (mut server, _lease) = listener.accept(deadline())?;
        client.send(b"still here")?;
        assert_eq!(&*server.recv_timeout(LIMIT)?, b"still here");
        Ok(())
    }

    /// The server the rendezvous file of `name` names now.
    fn published(name: &str) -> String {
        match rendezvous::read(name) {
            Ok(Published::Listener { server, .. }) => server,
            other => panic!("listener {name} not published: {other:?}"),
        }
    }

    /// A connection to the server published now that sends nothing (until it is dropped).
    fn silent_connection(name: &str) -> IpcSender<Hello> {
        let start = Instant::now();
        loop {
            // Just after a client got in, the file may still name the server that took it.
            if let Ok(sender) = IpcSender::<Hello>::connect(published(name)) {
                return sender;
            }
            assert!(start.elapsed() < LIMIT, "no server of {name} to connect to");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A client gets in and its first message reaches the server.
    fn gets_in(listener: &IpcListener, name: &str) -> Result {
        let mut client = connect(name, deadline())?;
        let (mut server, _lease) = listener.accept(deadline())?;
        client.send(b"in")?;
        assert_eq!(&*server.recv_timeout(LIMIT)?, b"in");
        Ok(())
    }

    #[test]
    fn a_silent_connection_does_not_keep_other_clients_out() -> Result {
        let name = format!("ipc-listener-silent-{}", std::process::id());
        let listener = IpcListener::bind(&name, 4)?;
        // Connected to the current server for the whole test, and never says anything.
        let silent = silent_connection(&name);
        gets_in(&listener, &name)?;
        gets_in(&listener, &name)?;
        drop(silent);
        Ok(())
    }

    #[test]
    fn a_full_queue_of_silent_connections_does_not_keep_other_clients_out() -> Result {
        let name = format!("ipc-listener-queue-{}", std::process::id());
        let listener = IpcListener::bind(&name, 4)?;
        // One silent connection taken by the server's thread, and as many more as its queue
        // holds: a connect to it would now wait until one of them goes. (Filled again after a
        // pause until nothing more fits, since the thread takes its one connection meanwhile.)
        let server = published(&name);
        let mut silent = Vec::new();
        loop {
            let before = silent.len();
            silent.extend(
                std::iter::from_fn(|| crate::sys::connect_seqpacket_now(&server)).take(100),
            );
            assert!(silent.len() < 1000, "the queue of connections never filled");
            if silent.len() == before {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // On a thread of its own: a connect that waited on the full queue would fail the
        // accept below at its deadline instead of hanging the test.
        let client = {
            let name = name.clone();
            std::thread::spawn(move || -> Result {
                let mut client = connect(&name, deadline())?;
                client.send(b"in")?;
                Ok(client.recv_timeout(LIMIT).map(drop)?)
            })
        };
        let (mut server, _lease) = listener.accept(deadline())?;
        assert_eq!(&*server.recv_timeout(LIMIT)?, b"in");
        server.send(b"bye")?;
        client.join().expect("client thread")?;
        drop(silent);
        Ok(())
    }

    #[test]
    fn silent_connections_hold_a_bounded_number_of_servers() -> Result {
        let name = format!("ipc-listener-bounded-{}", std::process::id());
        let listener = IpcListener::bind(&name, 1)?;
        let mut silent = Vec::new();
        // Each silent connection holds one server (and its thread); the listener publishes
        // another one while it has room for its thread.
        for _ in 1..MAX_SERVING {
            silent.push(silent_connection(&name));
            gets_in(&listener, &name)?;
        }
        silent.push(silent_connection(&name));
        let short = Some(Instant::now() + 4 * HELLO_WAIT);
        assert!(matches!(connect(&name, short), Err(Error::Timeout { .. })));
        // Once they go, their servers' threads end and clients get in again.
        drop(silent);
        gets_in(&listener, &name)
    }

    #[test]
    fn a_listener_held_by_a_silent_connection_drops_cleanly() -> Result {
        let name = format!("ipc-listener-silent-drop-{}", std::process::id());
        let listener = IpcListener::bind(&name, 1)?;
        let server = published(&name);
        let silent = IpcSender::<Hello>::connect(server.clone()).expect("connect");
        drop(listener);
        assert!(!rendezvous::rendezvous_path(&name).exists());
        assert!(!lock_path(&name).exists());
        assert!(!Path::new(&server).exists(), "{server} left");
        assert!(matches!(
            connect(&name, deadline()),
            Err(Error::NotFound { .. })
        ));
        // Once the connection goes, the server's thread ends and removes its directory.
        drop(silent);
        let dir = Path::new(&server).parent().expect("a directory");
        let start = Instant::now();
        while dir.exists() && start.elapsed() < LIMIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!dir.exists(), "{} left", dir.display());
        Ok(())
    }
}
