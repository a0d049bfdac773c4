//! The accept thread ([`Worker`]): it publishes one one-shot server after another, waits for
//! each server's hello on a thread of the server's own, retires a stalled server, and answers
//! each client (accepted, with a [`Lease`], or refused) before queueing its connection for
//! [`IpcListener::accept`](super::IpcListener::accept).

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use ipc_channel::ipc::IpcSender;

use super::lease::open_lock;
use super::{
    locked, Control, Event, Hello, Lease, Queue, Reply, Result, HELLO_WAIT, MAX_SERVING,
    WAITING_BYTE,
};
use crate::error::OpenError as Error;
use crate::ipc::rendezvous::{self, Serves};
use crate::ipc::{Halves, IpcDuplex};
use crate::sys::lock;

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
pub(super) struct Worker {
    name: String,
    rendezvous: PathBuf,
    max_clients: usize,
    serves: Serves,
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
    /// The state of the accept thread of listener `name` (whose rendezvous file is at
    /// `rendezvous`), before its first server; `events` is its channel for the listener's
    /// [`Event::Stop`] and its servers' threads' [`Event::Ended`].
    pub(super) fn new(
        name: &str,
        rendezvous: PathBuf,
        max_clients: usize,
        serves: Serves,
        control: Arc<Mutex<Control>>,
        queue: Arc<Queue>,
        events: (mpsc::Sender<Event>, mpsc::Receiver<Event>),
    ) -> Worker {
        let (sender, events) = events;
        Worker {
            name: name.to_owned(),
            rendezvous,
            max_clients,
            serves,
            live: Arc::new(AtomicUsize::new(0)),
            control,
            queue,
            // The worker's own open of the lock file, without any lock: for asking whether a
            // client holds the waiting byte.
            waiting: open_lock(name, false).ok(),
            events,
            sender,
            serving: Vec::new(),
            next_id: 0,
        }
    }

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
    pub(super) fn publish_next(&mut self) -> Result<bool> {
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
            self.serves.tag(),
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
    pub(super) fn run(mut self) {
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
        let duplex = IpcDuplex::from_halves(&self.name, halves);
        if matches!(self.serves, Serves::Topic { .. }) {
            // A subscriber has joined once its connect returns: every message published after
            // that must reach it, so it is queued (for the publisher's next send to take in)
            // before it hears so. One that gave up meanwhile fails the publisher's first send
            // to it, which drops it.
            if !self.queue.push(Ok((duplex, lease))) {
                return false;
            }
            let _ = reply.send(Reply::Accepted);
            return true;
        }
        if reply.send(Reply::Accepted).is_err() {
            // The client gave up: its place goes with the lease.
            return true;
        }
        self.queue.push(Ok((duplex, lease)))
    }
}
