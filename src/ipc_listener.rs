//! One server, many clients on the fallback backend: a listener that hands out one
//! [`IpcDuplex`] per client.
//!
//! The listener owns an accept thread that loops: make an [`IpcOneShotServer`], publish its
//! name in the rendezvous file (`listener\n<pid>\n<server>`, replaced in one step), accept one
//! bootstrap message, and pass the resulting connection to [`IpcListener::accept`] through a
//! queue. A client reads the file, connects to the server it names and sends a hello with the
//! creator's halves of a new duplex (as for a plain channel) and a sender for the reply:
//!
//! * the server answers [`Reply::Accepted`] before queueing the connection, or
//!   [`Reply::Refused`] while it holds `max_clients` live connections (a lease in each
//!   handed-out connection counts them; dropping it frees the place);
//! * several clients may read the same server name, and the one-shot server takes one of them:
//!   the others' hellos are discarded with the server's socket, which closes their reply
//!   channel without an answer. Such a client reads the file again and retries, within its
//!   deadline.
//!
//! Liveness is an open-file-description lock ([`crate::lock`]) on a lock file beside the
//! rendezvous file (`shmlink-<name>.ipc.lock`), held for the listener's whole life: a second
//! listener of the same name fails while it is held, and a listener whose process died
//! (lock released by the kernel) is reclaimed by the next [`IpcListener::bind`]. A waiting
//! client that sees the lock released stops waiting. Pids are only reported, never judged.
//!
//! Dropping the listener stops the accept thread (it wakes the thread's current server with a
//! [`Hello::Wake`] after setting the stop flag; the thread publishes under the same mutex, so it
//! either sees the flag or is already waiting on the server the wake reaches), then removes the
//! rendezvous file and the lock file while still holding the lock.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ipc_channel::ipc::{self, IpcOneShotServer, IpcSender};
use ipc_channel::TryRecvError;
use serde::{Deserialize, Serialize};

use crate::fallback::{self, Halves, IpcDuplex};
use crate::listener::MAX_CLIENTS;
use crate::lock;
use crate::rendezvous::{self, Kind, Published};
use crate::Error;

type Result<T, E = Error> = std::result::Result<T, E>;

/// How often a client waiting for the server's answer looks whether the listener still lives.
const CLIENT_CHECK: Duration = Duration::from_millis(10);
/// How long a dropped listener waits for its accept thread to end (it only stays longer when a
/// client connected to its server and sent nothing); after that the thread is left to end alone.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// What a client (or the listener's own drop) sends to the current one-shot server.
#[derive(Serialize, Deserialize)]
enum Hello {
    /// A client: the creator's halves of its connection, and where to answer.
    Client {
        halves: Halves,
        reply: IpcSender<Reply>,
    },
    /// Sent by the listener's drop to wake its accept thread; ignored unless it is stopping.
    Wake,
}

/// The server's answer to a client's hello.
#[derive(Serialize, Deserialize, Debug)]
enum Reply {
    /// The connection is queued for [`IpcListener::accept`].
    Accepted,
    /// The listener holds as many connections as it admits.
    Refused { limit: u64 },
}

/// Where the lock file of listener `name` lives (beside its rendezvous file).
pub fn lock_path(name: &str) -> PathBuf {
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

/// True while a live listener holds the lock of `name`.
pub(crate) fn alive(name: &str) -> Result<bool> {
    match open_lock(name, false) {
        Ok(file) => lock::alive(file.as_raw_fd(), lock::End::Creator, 0),
        Err(Error::NotFound(_)) => Ok(false),
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

    /// The next item; `Ok(None)` when the thread ended and nothing is left, `Err(Timeout)` past
    /// `deadline`, `Err(Empty)` if `deadline` is now and nothing waits.
    fn pop(&self, deadline: Option<Instant>) -> Result<Option<Result<Accepted>>> {
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
                        return Err(Error::Timeout);
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
    /// The server the thread waits on, for the drop's wake.
    current: Option<String>,
}

fn locked(control: &Mutex<Control>) -> MutexGuard<'_, Control> {
    // Nothing in the guarded section can leave the state half-updated: ignore poisoning.
    control
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A listener on the fallback backend.
pub(crate) struct IpcListener {
    name: String,
    max_clients: usize,
    queue: Arc<Queue>,
    control: Arc<Mutex<Control>>,
    thread: Option<JoinHandle<()>>,
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
/// lock: `Ok(None)` when a live listener holds it.
fn take_lock(name: &str) -> Result<Option<File>> {
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
        if !lock::take(&file, lock::End::Creator, false)? {
            return Ok(None);
        }
        // A listener that was closing may have removed the file between our open and our
        // lock: then we locked a file nobody else will look at; open the new one.
        let ours = file.metadata()?;
        match std::fs::symlink_metadata(&path) {
            Ok(now) if now.dev() == ours.dev() && now.ino() == ours.ino() => return Ok(Some(file)),
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
fn remove_dead_server(name: &str) {
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
        fallback::validate_name(name)?;
        if !(1..=MAX_CLIENTS).contains(&max_clients) {
            return Err(Error::InvalidConfig(format!(
                "listener {name:?}: max_clients {max_clients} must be between 1 and {MAX_CLIENTS}"
            )));
        }
        let lock_file = take_lock(name)?.ok_or_else(|| Error::AlreadyExists(name.to_owned()))?;
        remove_dead_server(name);
        rendezvous::remove_unpublished(name);
        let control = Arc::new(Mutex::new(Control::default()));
        let queue = Arc::new(Queue::default());
        let worker = Worker {
            name: name.to_owned(),
            max_clients,
            live: Arc::new(AtomicUsize::new(0)),
            control: Arc::clone(&control),
            queue: Arc::clone(&queue),
        };
        // The first server is published before `bind` returns, so a client that connects
        // right after finds it.
        let first = match worker.next_server() {
            Ok(Some(first)) => first,
            // Not stopping: only the listener's drop sets that.
            other => {
                let _ = std::fs::remove_file(lock_path(name));
                return Err(other.err().unwrap_or_else(|| Error::disconnected(name)));
            }
        };
        let thread = std::thread::Builder::new()
            .name(format!("shmlink-listen-{name}"))
            .spawn(move || worker.run(first));
        let thread = match thread {
            Ok(thread) => thread,
            Err(e) => {
                let _ = std::fs::remove_file(rendezvous::rendezvous_path(name));
                let _ = std::fs::remove_file(lock_path(name));
                return Err(Error::Io(e));
            }
        };
        Ok(IpcListener {
            name: name.to_owned(),
            max_clients,
            queue,
            control,
            thread: Some(thread),
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
        Error::disconnected(&self.name)
    }

    /// Waits for the next connection; at most until `deadline`.
    pub(crate) fn accept(&self, deadline: Option<Instant>) -> Result<Accepted> {
        match self.queue.pop(deadline)? {
            Some(next) => next.map_err(|e| e.in_channel(&self.name)),
            None => Err(self.ended()),
        }
    }

    /// A connection that is waiting now, else [`Error::Empty`].
    pub(crate) fn try_accept(&self) -> Result<Accepted> {
        match self.accept(Some(Instant::now())) {
            Err(Error::Timeout) => Err(Error::Empty),
            other => other,
        }
    }
}

impl Drop for IpcListener {
    fn drop(&mut self) {
        let current = {
            let mut control = locked(&self.control);
            control.stopping = true;
            control.current.take()
        };
        // The thread waits on `current` (or, if it had not published it yet, sees the flag).
        if let Some(server) = current {
            if let Ok(sender) = IpcSender::<Hello>::connect(server) {
                let _ = sender.send(Hello::Wake);
            }
        }
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
        let _ = std::fs::remove_file(rendezvous::rendezvous_path(&self.name));
        let _ = std::fs::remove_file(lock_path(&self.name));
    }
}

/// The accept thread's state.
struct Worker {
    name: String,
    max_clients: usize,
    /// Live connections (leases handed out and not dropped).
    live: Arc<AtomicUsize>,
    control: Arc<Mutex<Control>>,
    queue: Arc<Queue>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // However the thread ends (a panic included), `accept` stops waiting for it.
        self.queue.end();
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
            let _ = std::fs::remove_file(rendezvous::rendezvous_path(&self.name));
        }
        self.queue.push(Err(e));
    }

    /// Makes the next one-shot server and publishes it; `Ok(None)` once the listener stops.
    fn next_server(&self) -> Result<Option<IpcOneShotServer<Hello>>> {
        let (server, server_name) = IpcOneShotServer::<Hello>::new()?;
        rendezvous::close_server_dir(&server_name)?;
        // Published under the lock that the drop sets `stopping` under: once the drop has set
        // it, nothing is published any more.
        let mut control = locked(&self.control);
        if control.stopping {
            return Ok(None);
        }
        let contents = format!(
            "{}\n{}\n{server_name}",
            rendezvous::LISTENER_TAG,
            std::process::id()
        );
        rendezvous::publish(&rendezvous::rendezvous_path(&self.name), &contents)?;
        control.current = Some(server_name);
        Ok(Some(server))
    }

    /// Serves `first` (already published), then each next server, until the listener stops.
    fn run(self, first: IpcOneShotServer<Hello>) {
        let mut server = first;
        while self.serve(server) {
            server = match self.next_server() {
                Ok(Some(next)) => next,
                Ok(None) => return,
                Err(e) => {
                    self.fail(e);
                    return;
                }
            };
        }
    }

    /// Takes one hello from `server` and answers it; false once the listener stops.
    fn serve(&self, server: IpcOneShotServer<Hello>) -> bool {
        // A connector that died half-way or sent something else is an error here: wait for
        // the next one. ipc-channel panics on some malformed messages (a channel index out of
        // range): that too is only a bad hello, not the end of the listener.
        let hello = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| server.accept()))
            .map_err(drop)
            .and_then(|accepted| accepted.map(|(_bootstrap, hello)| hello).map_err(drop));
        if self.stopping() {
            return false;
        }
        let Ok(Hello::Client { halves, reply }) = hello else {
            return true;
        };
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
            return Err(Error::NotFound(name.to_owned()));
        }
        if let Some(duplex) = attempt(name, pid, server, deadline)? {
            return Ok(duplex);
        }
        // Not taken: another client got that server, which is being replaced. Read again.
        if past(deadline) {
            return Err(Error::Timeout);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One try with the server `server`: `Ok(None)` if it did not take our hello.
fn attempt(
    name: &str,
    pid: u32,
    server: String,
    deadline: Option<Instant>,
) -> Result<Option<IpcDuplex>> {
    let bootstrap = match rendezvous::connect_server::<Hello>(name, &server, deadline) {
        Ok(bootstrap) => bootstrap,
        Err(Error::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let (halves, state) = fallback::connector_side()?;
    // Made before the answer comes, so that giving up says goodbye (a clean close) to a server
    // that accepted us after all.
    let duplex = IpcDuplex::connector(name, state, pid);
    let (reply, answer) = ipc::channel::<Reply>()?;
    if bootstrap.send(Hello::Client { halves, reply }).is_err() {
        return Ok(None);
    }
    drop(bootstrap);
    loop {
        let mut wait = CLIENT_CHECK;
        if let Some(d) = deadline {
            wait = wait.min(d.saturating_duration_since(Instant::now()));
        }
        match answer.try_recv_timeout(wait) {
            Ok(Reply::Accepted) => return Ok(Some(duplex)),
            Ok(Reply::Refused { limit }) => {
                return Err(Error::TooManyClients {
                    name: name.to_owned(),
                    limit: usize::try_from(limit).unwrap_or(usize::MAX),
                })
            }
            Err(TryRecvError::Empty) => {}
            // The server went without answering: our hello was not taken (or the listener
            // died, which the caller finds out).
            Err(TryRecvError::IpcError(_)) => return Ok(None),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::Timeout);
        }
        if !alive(name)? {
            return Err(Error::PeerGone {
                channel: name.to_owned(),
                pid,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(10);

    fn deadline() -> Option<Instant> {
        Some(Instant::now() + LIMIT)
    }

    #[test]
    fn files_left_by_a_publisher_killed_half_way_are_removed_by_the_next_bind() -> Result<()> {
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
    fn clients_racing_for_one_server_all_get_in() -> Result<()> {
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
        assert!(matches!(listener.try_accept(), Err(Error::Empty)));
        Ok(())
    }

    #[test]
    fn concurrent_accepts_each_keep_their_deadline() -> Result<()> {
        let name = format!("ipc-listener-accepts-{}", std::process::id());
        let listener = Arc::new(IpcListener::bind(&name, 2)?);
        let long = {
            let listener = Arc::clone(&listener);
            std::thread::spawn(move || listener.accept(deadline()).map(|(duplex, _)| duplex))
        };
        // Whichever of the two waits first, the short one ends at its deadline.
        assert!(matches!(
            listener.accept(Some(Instant::now() + Duration::from_millis(50))),
            Err(Error::Timeout)
        ));
        assert!(!long.is_finished(), "the long accept is still waiting");
        let mut client = connect(&name, deadline())?;
        let mut server = long.join().expect("accept thread")?;
        client.send(b"late")?;
        assert_eq!(server.recv_timeout(LIMIT)?, b"late");
        Ok(())
    }

    #[test]
    fn a_live_name_is_not_bound_twice_and_a_closed_one_leaves_nothing() -> Result<()> {
        let name = format!("ipc-listener-twice-{}", std::process::id());
        let listener = IpcListener::bind(&name, 1)?;
        assert!(matches!(IpcListener::bind(&name, 1), Err(Error::AlreadyExists(n)) if n == name));
        assert!(matches!(IpcDuplex::create(&name), Err(Error::AlreadyExists(n)) if n == name));
        assert!(alive(&name)?);
        drop(listener);
        assert!(!rendezvous::rendezvous_path(&name).exists());
        assert!(!lock_path(&name).exists());
        assert!(!alive(&name)?);
        assert!(matches!(
            connect(&name, deadline()),
            Err(Error::NotFound(_))
        ));
        drop(IpcListener::bind(&name, 1)?);
        Ok(())
    }

    #[test]
    fn garbage_hellos_do_not_stop_the_listener() -> Result<()> {
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
        assert_eq!(server.recv_timeout(LIMIT)?, b"still here");
        Ok(())
    }
}
