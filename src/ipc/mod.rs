//! The ipc-channel backend (the fallback of `Endpoint`): a duplex byte channel over the
//! `ipc-channel` crate, for hosts where a shared-memory mapping cannot be made. This file is the
//! duplex ([`IpcDuplex`]): how it is made, connects and fails; `cores.rs` its send and receive
//! cores and the message and grant they lend out; `lane.rs` the thread a send with a deadline
//! hands its message to; `rendezvous/` is where the backend's ends meet (its files and the
//! one-shot servers they name), `listener/` its listener, `topic.rs` a topic's publisher and
//! subscribers on this backend, `listing.rs` what its files say of everything made on it;
//! `tests.rs` the duplex's unit tests.
//!
//! Bootstrap: the creator opens an [`IpcOneShotServer`](ipc_channel::ipc::IpcOneShotServer) and
//! publishes the server's name in a rendezvous file named after the channel (`shmlink-<name>.ipc`,
//! in a directory no other user can write, opened and read under the rules of `rendezvous/`). The
//! connector reads the file, checks the server and connects to it, and sends it the two halves the
//! creator needs: a sender for the creator-to-connector direction's receiver it keeps, and a
//! receiver for the direction it sends on. The creator accepts in a background thread, so
//! [`IpcDuplex::create`] returns at once (like a mapping that exists before anybody connects); the
//! first send or receive waits for the connector.
//!
//! A peer that exits closes its ends, so a receive returns instead of hanging. Which error it
//! returns depends on how the peer went: each end also holds a small "goodbye" channel from the
//! other, on which the peer's drop sends one byte before its data channels close. A closed data
//! channel with a goodbye behind it is `Disconnected`; without one the peer process died (or
//! exited without dropping its end), which is `PeerGone` with the pid the peer recorded at the
//! handshake (the creator's is in the rendezvous file, the connector's comes with its halves).
//! Received messages are owned buffers (the channel allocates them); the duplex keeps the last
//! one and lends it out.
//!
//! Deadlines. ipc-channel sends block while the peer's socket buffer is full and offer no
//! timed send (nor the socket to poll), so a send with a deadline hands its message to the
//! duplex's lane (`lane.rs`): a thread that sends one message at a time. The send waits, until
//! its deadline, only for the lane to be free, and the message is then as good as sent (as if
//! the socket had taken it); a send without a deadline goes out on the caller's thread once the
//! lane is free. ipc-channel offers no timed receive on a byte channel either, so a receive with
//! a deadline polls (yielding, then in 50 us naps) until then.
//!
//! A listener (`listener/`) uses the same rendezvous file, marked as a listener's
//! (`listener\n<pid>\n<server>`); [`IpcDuplex::connect_until`] connects to either.

use std::cell::{Cell, RefCell};
use std::io;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ipc_channel::ipc::{self, IpcBytesReceiver, IpcBytesSender, IpcReceiver, IpcSender};
use ipc_channel::{IpcError, TryRecvError};

mod cores;
mod lane;
pub(crate) mod listener;
pub(crate) mod listing;
pub(crate) mod rendezvous;
mod topic;

use crate::error::{ChannelName, OpenError, RecvError, SendError, WaitError};
use crate::wait::Deadline;
pub(crate) use cores::{IpcGrant, IpcMessage};
use lane::Lane;
use rendezvous::{Kind, Published};
pub(crate) use topic::{IpcPublisher, IpcSubscriber, IpcTopicGrant, MAX_TOPIC_MESSAGE};

/// Largest message sent in one piece (ipc-channel splits large messages itself).
pub(crate) const MAX_MESSAGE: usize = 256 << 20;

/// The most messages one batch receive hands over (each is a receive call of its own).
const BATCH_MESSAGES: usize = 1024;
/// The bytes after which a batch receive takes no further message.
const BATCH_BYTES: usize = 1 << 20;

/// What the connector sends the creator: the creator's data sender and receiver, its goodbye
/// sender and receiver, and the connector's pid.
pub(crate) type Halves = (
    IpcBytesSender,
    IpcBytesReceiver,
    IpcSender<u8>,
    IpcReceiver<u8>,
    u32,
);

/// The byte a clean close sends on the goodbye channel.
const GOODBYE: u8 = 1;
/// The byte a topic's publisher sends on the goodbye channel of a subscriber it drops.
const DROPPED: u8 = 2;

/// How an end that said goodbye with `byte` ended.
fn said(byte: u8) -> Ended {
    if byte == DROPPED {
        Ended::Dropped
    } else {
        Ended::Closed
    }
}

/// True when `Endpoint::create` and `EndpointListener::bind` must use this backend: with the
/// `force-fallback` cargo feature (and, in test builds, when `crate::testing` says so).
pub(crate) fn forced() -> bool {
    #[cfg(feature = "test-hooks")]
    if crate::hooks::fallback_forced_by_env() {
        return true;
    }
    cfg!(feature = "force-fallback")
}

/// Checks a user-facing channel name before it reaches the file system (the same rules as
/// the shared-memory backend: [`crate::shm::mapping::validate_name`]).
pub(crate) fn validate_name(name: &str) -> Result<(), OpenError> {
    crate::shm::mapping::validate_name(name)
}

/// Removes the rendezvous file on drop.
#[derive(Debug)]
struct Rendezvous(PathBuf);

impl Drop for Rendezvous {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where an end's connection to its peer stands.
enum Link {
    /// Creator, before the connector arrived.
    Pending {
        accepted: mpsc::Receiver<Result<Halves, WaitError>>,
        server_name: String,
        /// Kept only to be removed on drop (when the connector arrives or the creator goes).
        _rendezvous: Rendezvous,
        /// The server's directory, removed on drop likewise.
        _server_home: Option<rendezvous::ServerHome>,
    },
    Connected {
        tx: IpcBytesSender,
        rx: IpcBytesReceiver,
        /// Our goodbye to the peer, sent on drop.
        bye_tx: IpcSender<u8>,
        /// The peer's goodbye to us.
        bye_rx: IpcReceiver<u8>,
    },
    /// The accept failed; the error was returned once.
    Broken,
}

/// One end of a duplex byte channel over ipc-channel.
pub(crate) struct IpcDuplex {
    name: ChannelName,
    link: Link,
    /// What the accept thread sent, when a query (`&self`) found it before a send or receive
    /// took it in.
    arrived: RefCell<Option<Result<Halves, WaitError>>>,
    /// The peer's process id: from the rendezvous file (connector) or the handshake (creator).
    peer_pid: Option<u32>,
    /// How the peer ended, once a closed channel showed that it did.
    ended: Cell<Option<Ended>>,
    /// The last message received, lent out by the receive calls.
    inbox: Vec<u8>,
    /// What a grant lends out, and where `send_json` serialises.
    out: Vec<u8>,
    /// The thread that sends for the sends with a deadline, once one came. It holds a copy of
    /// the data sender, so the peer sees the channel closed only once the lane's last message
    /// is out (and the goodbye, sent first, is there by then).
    lane: Option<Lane>,
    /// What the drop says on the goodbye channel: [`GOODBYE`], or [`DROPPED`].
    goodbye: u8,
    /// The creator's hold on its name (`None` on a connector's end and a listener's
    /// connection). Declared last: it is released after the rendezvous file is removed.
    _name_lock: Option<NameLock>,
}

/// A creator's lock on its name (the lock file a listener of the name takes too): removed,
/// while still locked, on drop, so a new creator cannot have taken the name in between.
#[derive(Debug)]
struct NameLock {
    path: PathBuf,
    /// Holds the lock; closed (releasing it) after the file is removed.
    _file: std::fs::File,
}

impl Drop for NameLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl std::fmt::Debug for IpcDuplex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let link = match self.link {
            Link::Pending { .. } => "pending",
            Link::Connected { .. } => "connected",
            Link::Broken => "broken",
        };
        f.debug_struct("IpcDuplex")
            .field("name", &self.name)
            .field("link", &link)
            .finish()
    }
}

/// How the peer's end went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Dropped cleanly: it said goodbye.
    Closed,
    /// A topic's publisher dropped this subscriber ([`DROPPED`] for a goodbye).
    Dropped,
    /// Gone without a goodbye: its process died or exited without dropping its end.
    Gone,
}

/// What a failed ipc-channel call means.
enum Failure {
    /// The peer's end is closed (its process may have died: see [`IpcDuplex::peer_ended`]).
    Closed,
    Io(io::Error),
    /// A message ipc-channel could not decode.
    Garbled(String),
}

impl From<IpcError> for Failure {
    fn from(e: IpcError) -> Failure {
        match e {
            IpcError::Disconnected => Failure::Closed,
            IpcError::Io(e) => e.into(),
            IpcError::SerializationError(e) => {
                Failure::Garbled(format!("ipc-channel message: {e}"))
            }
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        match e.kind() {
            io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::NotConnected => Failure::Closed,
            _ => Failure::Io(e),
        }
    }
}

/// A connector's end before it is handed out: see [`connector_side`].
pub(crate) struct ConnectorLink(Link);

/// The channels of one connection: the halves for the creator, and the connector's own end.
pub(crate) fn connector_side() -> io::Result<(Halves, ConnectorLink)> {
    let (to_connector, from_creator) = ipc::bytes_channel()?;
    let (to_creator, from_connector) = ipc::bytes_channel()?;
    let (bye_to_connector, bye_from_creator) = ipc::channel::<u8>()?;
    let (bye_to_creator, bye_from_connector) = ipc::channel::<u8>()?;
    let halves = (
        to_connector,
        from_connector,
        bye_to_connector,
        bye_from_connector,
        std::process::id(),
    );
    let link = Link::Connected {
        tx: to_creator,
        rx: from_creator,
        bye_tx: bye_to_creator,
        bye_rx: bye_from_creator,
    };
    Ok((halves, ConnectorLink(link)))
}

impl IpcDuplex {
    /// Creates the channel `name` and publishes it for [`IpcDuplex::connect_until`]. Returns at once;
    /// the connection completes in the background.
    pub(crate) fn create(name: &str) -> Result<IpcDuplex, OpenError> {
        validate_name(name)?;
        // The name's lock, the one a listener of the name takes too: held while this end
        // lives, so a second creator (or listener) of a live name is refused, as in shared
        // memory.
        let (lock_path, lock_file) =
            listener::take_lock(name)?.ok_or_else(|| OpenError::AlreadyExists {
                channel: name.into(),
            })?;
        let name_lock = NameLock {
            path: lock_path,
            _file: lock_file,
        };
        listener::remove_dead_server(name);
        rendezvous::remove_dead_homes();
        let path = rendezvous::checked_path(name, Kind::Rendezvous, true)?;
        let (server, server_name, server_home) = rendezvous::new_server::<Halves>()?;
        rendezvous::publish(&path, &format!("{}\n{server_name}", std::process::id()))?;
        let rendezvous = Rendezvous(path);
        let (done, accepted) = mpsc::channel();
        let channel = ChannelName::from(name);
        std::thread::Builder::new()
            .name(format!("shmlink-accept-{name}"))
            .spawn(move || {
                // ipc-channel panics on some malformed messages (a channel index out of range):
                // that is a corrupt bootstrap, not the end of the process.
                let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    server.accept()
                })) {
                    Ok(Ok((_bootstrap, halves))) => Ok(halves),
                    // Our own drop woke us up, or the connector died half-way.
                    Ok(Err(IpcError::Disconnected)) => Err(WaitError::Disconnected { channel }),
                    Ok(Err(e)) => Err(match Failure::from(e) {
                        Failure::Closed => WaitError::Disconnected { channel },
                        Failure::Io(e) => WaitError::Io(e),
                        Failure::Garbled(what) => WaitError::Corrupt { channel, what },
                    }),
                    Err(_) => Err(WaitError::Corrupt {
                        channel,
                        what: "malformed bootstrap message".to_owned(),
                    }),
                };
                // The creator may be gone (dropped while pending): nobody to tell.
                let _ = done.send(result);
            })?;
        let mut duplex = IpcDuplex::new(
            name,
            Link::Pending {
                accepted,
                server_name,
                _rendezvous: rendezvous,
                _server_home: server_home,
            },
            None,
        );
        duplex._name_lock = Some(name_lock);
        Ok(duplex)
    }

    /// Connects to the channel `name` made by [`IpcDuplex::create`], or to the listener `name`
    /// (see `listener/`), waiting until that listener has answered: at most until
    /// `deadline` ([`OpenError::Timeout`]). `Err(NotFound)` when nothing is published (yet).
    pub(crate) fn connect_until(
        name: &str,
        deadline: Option<Instant>,
    ) -> Result<IpcDuplex, OpenError> {
        validate_name(name)?;
        let (creator_pid, server_name) = match rendezvous::read(name)? {
            Published::Channel { pid, server } => (pid, server),
            Published::Listener { .. } => {
                return listener::connect(name, deadline, false);
            }
        };
        // A stale file (its creator died: its lock is free) names no server that will take
        // us: that is `NotFound`, as is a file whose creator already took its connector.
        if !listener::alive(name)? {
            return Err(OpenError::NotFound {
                channel: name.into(),
            });
        }
        let bootstrap = rendezvous::connect_server::<Halves>(name, &server_name, deadline)?;
        let (halves, link) = connector_side()?;
        bootstrap.send(halves).map_err(|e| match Failure::from(e) {
            Failure::Io(e) => OpenError::Io(e),
            Failure::Closed => OpenError::NotFound {
                channel: name.into(),
            },
            Failure::Garbled(what) => OpenError::corrupt(name, what),
        })?;
        Ok(IpcDuplex::new(name, link.0, Some(creator_pid)))
    }

    /// An end in `link`, connected to the process `peer_pid` if it is known.
    fn new(name: &str, link: Link, peer_pid: Option<u32>) -> IpcDuplex {
        IpcDuplex {
            name: name.into(),
            link,
            arrived: RefCell::new(None),
            peer_pid,
            ended: Cell::new(None),
            inbox: Vec::new(),
            out: Vec::new(),
            lane: None,
            goodbye: GOODBYE,
            _name_lock: None,
        }
    }

    /// The creator's end made from the halves a connector sent (a listener's connection).
    pub(crate) fn from_halves(name: &str, halves: Halves) -> IpcDuplex {
        let (tx, rx, bye_tx, bye_rx, pid) = halves;
        IpcDuplex::new(
            name,
            Link::Connected {
                tx,
                rx,
                bye_tx,
                bye_rx,
            },
            Some(pid),
        )
    }

    /// The connector's end of a connection whose creator is the process `peer_pid` and got
    /// the other halves.
    pub(crate) fn connector(name: &str, link: ConnectorLink, peer_pid: u32) -> IpcDuplex {
        IpcDuplex::new(name, link.0, Some(peer_pid))
    }

    /// The channel's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Largest message [`IpcDuplex::send_until`] accepts, and the largest grant.
    pub(crate) fn max_message(&self) -> usize {
        MAX_MESSAGE
    }

    /// What the accept thread sent, if it has: looked at without waiting, and kept for the
    /// next send or receive to take in.
    fn arrival(&self) -> std::cell::Ref<'_, Option<Result<Halves, WaitError>>> {
        if let Link::Pending { accepted, .. } = &self.link {
            let mut arrived = self.arrived.borrow_mut();
            if arrived.is_none() {
                *arrived = accepted.try_recv().ok();
            }
        }
        self.arrived.borrow()
    }

    /// The peer's process id, once it has connected.
    pub(crate) fn peer_pid(&self) -> Option<u32> {
        match self.arrival().as_ref() {
            Some(Ok(halves)) => Some(halves.4),
            _ => self.peer_pid,
        }
    }

    /// True while the peer is connected and has neither closed its end nor died.
    pub(crate) fn is_peer_connected(&self) -> bool {
        if self.ended.get().is_some() {
            return false;
        }
        let arrival = self.arrival();
        let bye_rx = match (&self.link, arrival.as_ref()) {
            (Link::Connected { bye_rx, .. }, _) => bye_rx,
            (Link::Pending { .. }, Some(Ok(halves))) => &halves.3,
            _ => return false,
        };
        match bye_rx.try_recv() {
            Err(TryRecvError::Empty) => true,
            Ok(byte) => {
                self.ended.set(Some(said(byte)));
                false
            }
            Err(TryRecvError::IpcError(_)) => {
                self.ended.set(Some(Ended::Gone));
                false
            }
        }
    }

    /// What a closed data channel means: `Disconnected` if the peer said goodbye, `PeerGone`
    /// if it did not.
    fn peer_ended(&self) -> WaitError {
        if self.ended.get().is_none() {
            let Link::Connected { bye_rx, .. } = &self.link else {
                return WaitError::Disconnected {
                    channel: self.name.clone(),
                };
            };
            // The goodbye was sent before the peer's data channels closed, so it is there
            // already if it was sent at all; the short wait only covers the two sockets being
            // read in another order than they were written.
            self.ended.set(Some(
                match bye_rx.try_recv_timeout(Duration::from_millis(20)) {
                    Ok(byte) => said(byte),
                    Err(_) => Ended::Gone,
                },
            ));
        }
        match (self.ended.get(), self.peer_pid) {
            (Some(Ended::Gone), Some(pid)) => WaitError::PeerGone {
                channel: self.name.clone(),
                pid,
            },
            _ => WaitError::Disconnected {
                channel: self.name.clone(),
            },
        }
    }

    /// The error a failed call means for this end.
    fn failed(&self, failure: Failure) -> WaitError {
        match failure {
            Failure::Closed => self.peer_ended(),
            Failure::Io(e) => WaitError::Io(e),
            Failure::Garbled(what) => WaitError::Corrupt {
                channel: self.name.clone(),
                what,
            },
        }
    }

    /// Takes in the connector once it has arrived, waiting for it until `deadline`: `Ok(true)`
    /// once connected, `Ok(false)` if it has not arrived and `deadline` is
    /// [`Deadline::Now`], `Err(Timeout)` if it did not arrive by an instant.
    fn connect_peer(&mut self, deadline: Deadline) -> Result<bool, WaitError> {
        let result = match &self.link {
            Link::Connected { .. } => return Ok(true),
            Link::Broken => {
                return Err(WaitError::Disconnected {
                    channel: self.name.clone(),
                })
            }
            Link::Pending { accepted, .. } => match self.arrived.get_mut().take() {
                Some(arrived) => arrived,
                None => match deadline {
                    Deadline::Never => accepted.recv().unwrap_or_else(|_| {
                        Err(WaitError::Disconnected {
                            channel: self.name.clone(),
                        })
                    }),
                    Deadline::Now => match accepted.try_recv() {
                        Ok(r) => r,
                        Err(mpsc::TryRecvError::Empty) => return Ok(false),
                        Err(mpsc::TryRecvError::Disconnected) => Err(WaitError::Disconnected {
                            channel: self.name.clone(),
                        }),
                    },
                    Deadline::At(at) => {
                        match accepted.recv_timeout(at.saturating_duration_since(Instant::now())) {
                            Ok(r) => r,
                            Err(mpsc::RecvTimeoutError::Timeout) => {
                                return Err(WaitError::Timeout {
                                    channel: self.name.clone(),
                                })
                            }
                            Err(mpsc::RecvTimeoutError::Disconnected) => {
                                Err(WaitError::Disconnected {
                                    channel: self.name.clone(),
                                })
                            }
                        }
                    }
                },
            },
        };
        match result {
            Ok((tx, rx, bye_tx, bye_rx, pid)) => {
                // Dropping the pending link removes the rendezvous file.
                self.link = Link::Connected {
                    tx,
                    rx,
                    bye_tx,
                    bye_rx,
                };
                self.peer_pid = Some(pid);
                Ok(true)
            }
            Err(e) => {
                self.link = Link::Broken;
                Err(e)
            }
        }
    }

    /// Fails unless a message of `len` bytes may be sent now: waits until `deadline` for the
    /// connector and for the lane to be free (`Full` for [`Deadline::Now`] if either is not).
    fn ready_to_send(&mut self, len: usize, deadline: Deadline) -> Result<(), SendError> {
        if self.ended.get().is_some() {
            // Known closed or dead (a failed send or receive found out): no send goes now.
            return Err(self.peer_ended().into());
        }
        if len > MAX_MESSAGE {
            return Err(SendError::TooLarge {
                channel: self.name.clone(),
                len,
                max: MAX_MESSAGE,
            });
        }
        if !self.connect_peer(deadline)? {
            return Err(SendError::Full {
                channel: self.name.clone(),
            });
        }
        if let Some(lane) = &self.lane {
            match lane.wait_free(deadline) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(SendError::Full {
                        channel: self.name.clone(),
                    })
                }
                Err(Some(failure)) => return Err(self.failed(failure).into()),
                Err(None) => {
                    return Err(SendError::Timeout {
                        channel: self.name.clone(),
                    })
                }
            }
        }
        Ok(())
    }

    /// Sends `bytes` once [`ready_to_send`](IpcDuplex::ready_to_send) said it may.
    fn send_ready(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        let Link::Connected { tx, .. } = &self.link else {
            return Err(WaitError::Disconnected {
                channel: self.name.clone(),
            }
            .into());
        };
        if deadline == Deadline::Never {
            let result = tx.send(bytes);
            return result.map_err(|e| self.failed(e.into()).into());
        }
        let lane = match &mut self.lane {
            Some(lane) => lane,
            none => none.insert(Lane::start(&self.name, tx.clone())?),
        };
        lane.hand_over(bytes);
        Ok(())
    }

    /// Receives the next message into `inbox`, waiting for it until `deadline`.
    fn receive(&mut self, deadline: Deadline) -> Result<(), RecvError> {
        let mut turns = 0u32;
        loop {
            match self.connect_peer(deadline) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(RecvError::Empty {
                        channel: self.name.clone(),
                    })
                }
                Err(e) => return Err(e.into()),
            }
            let Link::Connected { rx, .. } = &self.link else {
                return Err(WaitError::Disconnected {
                    channel: self.name.clone(),
                }
                .into());
            };
            let failure = if deadline == Deadline::Never {
                match rx.recv() {
                    Ok(bytes) => {
                        self.inbox = bytes;
                        return Ok(());
                    }
                    Err(e) => Failure::from(e),
                }
            } else {
                match rx.try_recv() {
                    Ok(bytes) => {
                        self.inbox = bytes;
                        return Ok(());
                    }
                    Err(TryRecvError::Empty) => {
                        if deadline == Deadline::Now {
                            return Err(RecvError::Empty {
                                channel: self.name.clone(),
                            });
                        }
                        if deadline.passed() {
                            return Err(RecvError::Timeout {
                                channel: self.name.clone(),
                            });
                        }
                        // No timed receive on a byte channel: poll until the deadline.
                        turns += 1;
                        if turns < 64 {
                            std::thread::yield_now();
                        } else {
                            std::thread::sleep(Duration::from_micros(50));
                        }
                        continue;
                    }
                    Err(TryRecvError::IpcError(e)) => Failure::from(e),
                }
            };
            return Err(self.failed(failure).into());
        }
    }
}

impl Drop for IpcDuplex {
    fn drop(&mut self) {
        match &self.link {
            Link::Pending { server_name, .. } => {
                // Wake the accepting thread so that it ends (unless a connector is in the
                // middle of its handshake: then the thread ends with that).
                rendezvous::wake(server_name);
            }
            Link::Connected { bye_tx, .. } => {
                // Before the data channels close (the fields drop after this; the lane's copy
                // of the sender closes once its last message is out): the peer that sees them
                // closed finds the goodbye and reports a clean close.
                let _ = bye_tx.send(self.goodbye);
            }
            Link::Broken => {}
        }
    }
}

#[cfg(test)]
mod tests;
