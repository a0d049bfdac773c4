//! The ipc-channel backend (the fallback of `Endpoint`): a duplex byte channel over the
//! `ipc-channel` crate, for hosts where a shared-memory mapping cannot be made. This file is the
//! duplex ([`IpcDuplex`]); `rendezvous.rs` is where the backend's ends meet (its files and the
//! one-shot servers they name), `listener.rs` its listener.
//!
//! Bootstrap: the creator opens an [`IpcOneShotServer`] and publishes the server's name in a
//! rendezvous file named after the channel (`shmlink-<name>.ipc`, in a directory no other user
//! can write, opened and read under the rules of `rendezvous.rs`). The connector reads the
//! file, checks the server and connects to it, and sends it the two halves the creator needs: a
//! sender for the creator-to-connector direction's receiver it keeps, and a receiver for the
//! direction it sends on. The creator accepts in a background thread, so [`IpcDuplex::create`]
//! returns at once (like a mapping that exists before anybody connects); the first send or
//! receive waits for the connector.
//!
//! A peer that exits closes its ends, so a receive returns instead of hanging. Which error it
//! returns depends on how the peer went: each end also holds a small "goodbye" channel from the
//! other, on which the peer's drop sends one byte before its data channels close. A closed data
//! channel with a goodbye behind it is [`Error::Disconnected`]; without one the peer process
//! died (or exited without dropping its end), which is [`Error::PeerGone`] with the pid the
//! peer recorded at the handshake (the creator's is in the rendezvous file, the connector's
//! comes with its halves). Received messages are owned buffers (the channel allocates them);
//! the duplex keeps the last one and lends it out.
//!
//! A listener (`listener.rs`) uses the same rendezvous file, marked as a listener's
//! (`listener\n<pid>\n<server>`); [`IpcDuplex::connect_until`] connects to either.

use std::io;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ipc_channel::ipc::{
    self, IpcBytesReceiver, IpcBytesSender, IpcOneShotServer, IpcReceiver, IpcSender,
};
use ipc_channel::{IpcError, TryRecvError};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub(crate) mod listener;
pub(crate) mod rendezvous;

use crate::Error;
use rendezvous::{Kind, Published};

type Result<T, E = Error> = std::result::Result<T, E>;

/// Largest message sent in one piece (ipc-channel splits large messages itself).
pub(crate) const MAX_MESSAGE: usize = 256 << 20;

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

/// True when `Endpoint::create` and `EndpointListener::bind` must use this backend: with the
/// `force-fallback` cargo feature (and, in test builds, when `crate::testing` says so).
pub(crate) fn forced() -> bool {
    #[cfg(feature = "test-hooks")]
    if crate::testing::fallback_forced_by_env() {
        return true;
    }
    cfg!(feature = "force-fallback")
}

/// Checks a user-facing channel name before it reaches the file system (the same rules as
/// the shared-memory backend: [`crate::mapping::validate_name`]).
pub(crate) fn validate_name(name: &str) -> Result<()> {
    crate::mapping::validate_name(name)
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
        accepted: mpsc::Receiver<Result<Halves>>,
        server_name: String,
        /// Kept only to be removed on drop (when the connector arrives or the creator goes).
        _rendezvous: Rendezvous,
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
    name: String,
    link: Link,
    /// The peer's process id: from the rendezvous file (connector) or the handshake (creator).
    peer_pid: Option<u32>,
    /// How the peer ended, once a closed channel showed that it did.
    ended: Option<Ended>,
    /// The last message received, lent out by the receive calls.
    inbox: Vec<u8>,
    /// Reused by [`IpcDuplex::send_json`].
    out: Vec<u8>,
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
#[derive(Clone, Copy, Debug)]
enum Ended {
    /// Dropped cleanly: it said goodbye.
    Closed,
    /// Gone without a goodbye: its process died or exited without dropping its end.
    Gone,
}

fn ipc_error(e: IpcError) -> Error {
    match e {
        IpcError::Disconnected => Error::disconnected(""),
        IpcError::Io(e) => io_error(e),
        IpcError::SerializationError(e) => Error::corrupt("", format!("ipc-channel message: {e}")),
    }
}

fn io_error(e: io::Error) -> Error {
    match e.kind() {
        io::ErrorKind::BrokenPipe
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::NotConnected => Error::disconnected(""),
        _ => Error::Io(e),
    }
}

/// A connector's end before it is handed out: see [`connector_side`].
pub(crate) struct ConnectorLink(Link);

/// The channels of one connection: the halves for the creator, and the connector's own end.
pub(crate) fn connector_side() -> Result<(Halves, ConnectorLink)> {
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
    pub(crate) fn create(name: &str) -> Result<IpcDuplex> {
        validate_name(name)?;
        let path = rendezvous::checked_path(name, Kind::Rendezvous, true)?;
        if listener::alive(name)? {
            return Err(Error::AlreadyExists(name.to_owned()));
        }
        let (server, server_name) = IpcOneShotServer::<Halves>::new()?;
        rendezvous::close_server_dir(&server_name)?;
        rendezvous::publish(&path, &format!("{}\n{server_name}", std::process::id()))?;
        let rendezvous = Rendezvous(path);
        let (done, accepted) = mpsc::channel();
        let channel = name.to_owned();
        std::thread::Builder::new()
            .name(format!("shmlink-accept-{name}"))
            .spawn(move || {
                // ipc-channel panics on some malformed messages (a channel index out of range):
                // that is a corrupt bootstrap, not the end of the process.
                let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    server.accept()
                })) {
                    Ok(accepted) => {
                        accepted
                            .map(|(_bootstrap, halves)| halves)
                            .map_err(|e| match e {
                                // Our own drop woke us up, or the connector died half-way.
                                IpcError::Disconnected => Error::disconnected(""),
                                e => ipc_error(e),
                            })
                    }
                    Err(_) => Err(Error::corrupt(&channel, "malformed bootstrap message")),
                };
                // The creator may be gone (dropped while pending): nobody to tell.
                let _ = done.send(result);
            })?;
        Ok(IpcDuplex {
            name: name.to_owned(),
            link: Link::Pending {
                accepted,
                server_name,
                _rendezvous: rendezvous,
            },
            peer_pid: None,
            ended: None,
            inbox: Vec::new(),
            out: Vec::new(),
        })
    }

    /// Connects to the channel `name` made by [`IpcDuplex::create`], or to the listener `name`
    /// (see `listener.rs`), waiting until that listener has accepted.
    /// `Err(NotFound)` when no creator has published it (yet).
    #[cfg(test)]
    pub(crate) fn connect(name: &str) -> Result<IpcDuplex> {
        IpcDuplex::connect_until(name, None)
    }

    /// Connects to the channel `name` made by [`IpcDuplex::create`], or to the listener `name`
    /// (see `listener.rs`), waiting until that listener has answered: at most until
    /// `deadline` ([`Error::Timeout`]). `Err(NotFound)` when nothing is published (yet).
    pub(crate) fn connect_until(name: &str, deadline: Option<Instant>) -> Result<IpcDuplex> {
        validate_name(name)?;
        let (creator_pid, server_name) = match rendezvous::read(name)? {
            Published::Channel { pid, server } => (pid, server),
            Published::Listener { .. } => {
                return listener::connect(name, deadline);
            }
        };
        // A stale file (its creator died or already accepted) has no server behind it: that
        // is `NotFound`.
        let bootstrap = rendezvous::connect_server::<Halves>(name, &server_name, deadline)?;
        let (halves, link) = connector_side()?;
        bootstrap.send(halves).map_err(ipc_error)?;
        Ok(IpcDuplex::with_link(name, link.0, creator_pid))
    }

    /// An end in `link`, connected to the process `peer_pid`.
    fn with_link(name: &str, link: Link, peer_pid: u32) -> IpcDuplex {
        IpcDuplex {
            name: name.to_owned(),
            link,
            peer_pid: Some(peer_pid),
            ended: None,
            inbox: Vec::new(),
            out: Vec::new(),
        }
    }

    /// The creator's end made from the halves a connector sent (a listener's connection).
    pub(crate) fn from_halves(name: &str, halves: Halves) -> IpcDuplex {
        let (tx, rx, bye_tx, bye_rx, pid) = halves;
        IpcDuplex::with_link(
            name,
            Link::Connected {
                tx,
                rx,
                bye_tx,
                bye_rx,
            },
            pid,
        )
    }

    /// The connector's end of a connection whose creator is the process `peer_pid` and got
    /// the other halves.
    pub(crate) fn connector(name: &str, link: ConnectorLink, peer_pid: u32) -> IpcDuplex {
        IpcDuplex::with_link(name, link.0, peer_pid)
    }

    /// [`IpcDuplex::connect`], retried until the channel appears or `timeout` passes.
    #[cfg(test)]
    pub(crate) fn connect_timeout(name: &str, timeout: Duration) -> Result<IpcDuplex> {
        let deadline = Instant::now() + timeout;
        loop {
            match IpcDuplex::connect(name) {
                Err(Error::NotFound(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(Error::NotFound(_)) => return Err(Error::Timeout),
                other => return other,
            }
        }
    }

    /// The channel's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Largest message [`IpcDuplex::send`] accepts.
    pub(crate) fn max_message(&self) -> usize {
        MAX_MESSAGE
    }

    /// The peer's process id, once it has connected.
    pub(crate) fn peer_pid(&mut self) -> Option<u32> {
        let _ = self.wait_connected(Some(Duration::ZERO));
        self.peer_pid
    }

    /// True while the peer is connected and has neither closed its end nor died.
    pub(crate) fn is_peer_connected(&mut self) -> bool {
        if self.wait_connected(Some(Duration::ZERO)).is_err() || self.ended.is_some() {
            return false;
        }
        let Link::Connected { bye_rx, .. } = &self.link else {
            return false;
        };
        match bye_rx.try_recv() {
            Err(TryRecvError::Empty) => true,
            Ok(_) => {
                self.ended = Some(Ended::Closed);
                false
            }
            Err(TryRecvError::IpcError(_)) => {
                self.ended = Some(Ended::Gone);
                false
            }
        }
    }

    /// What a closed data channel means: [`Error::Disconnected`] if the peer said goodbye,
    /// [`Error::PeerGone`] if it did not.
    fn peer_ended(&mut self) -> Error {
        if self.ended.is_none() {
            let Link::Connected { bye_rx, .. } = &self.link else {
                return Error::disconnected(&self.name);
            };
            // The goodbye was sent before the peer's data channels closed, so it is there
            // already if it was sent at all; the short wait only covers the two sockets being
            // read in another order than they were written.
            self.ended = Some(match bye_rx.try_recv_timeout(Duration::from_millis(20)) {
                Ok(_) => Ended::Closed,
                Err(_) => Ended::Gone,
            });
        }
        match (self.ended, self.peer_pid) {
            (Some(Ended::Gone), Some(pid)) => Error::PeerGone {
                channel: self.name.clone(),
                pid,
            },
            _ => Error::disconnected(&self.name),
        }
    }

    /// Maps a receive or send failure, telling a clean close from a death.
    fn disconnect_error(&mut self, e: Error) -> Error {
        match e {
            Error::Disconnected { .. } => self.peer_ended(),
            e => e.in_channel(&self.name),
        }
    }

    /// Waits until the connector has arrived: forever with `None`, else at most `timeout`
    /// (`Err(Timeout)`, and the call may be repeated).
    pub(crate) fn wait_connected(&mut self, timeout: Option<Duration>) -> Result<()> {
        let result = match &self.link {
            Link::Connected { .. } => return Ok(()),
            Link::Broken => return Err(Error::disconnected(&self.name)),
            Link::Pending { accepted, .. } => match timeout {
                None => accepted.recv().map_err(|_| Error::disconnected("")),
                Some(t) => match accepted.recv_timeout(t) {
                    Ok(r) => Ok(r),
                    Err(mpsc::RecvTimeoutError::Timeout) => return Err(Error::Timeout),
                    Err(mpsc::RecvTimeoutError::Disconnected) => Err(Error::disconnected("")),
                },
            },
        };
        match result.and_then(|r| r) {
            Ok((tx, rx, bye_tx, bye_rx, pid)) => {
                // Dropping the pending link removes the rendezvous file.
                self.link = Link::Connected {
                    tx,
                    rx,
                    bye_tx,
                    bye_rx,
                };
                self.peer_pid = Some(pid);
                Ok(())
            }
            Err(e) => {
                self.link = Link::Broken;
                Err(e.in_channel(&self.name))
            }
        }
    }

    fn halves(&mut self) -> Result<(&IpcBytesSender, &IpcBytesReceiver)> {
        self.wait_connected(None)?;
        match &self.link {
            Link::Connected { tx, rx, .. } => Ok((tx, rx)),
            _ => Err(Error::disconnected(&self.name)),
        }
    }

    /// Sends one message.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<()> {
        if bytes.len() > MAX_MESSAGE {
            return Err(Error::TooLarge {
                len: bytes.len(),
                max: MAX_MESSAGE,
            });
        }
        let (tx, _) = self.halves()?;
        let result = tx.send(bytes).map_err(io_error);
        result.map_err(|e| self.disconnect_error(e))
    }

    /// Serialises `value` as JSON into a reused buffer and sends it.
    pub(crate) fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        let result = match serde_json::to_writer(&mut out, value) {
            Ok(()) => self.send(&out),
            Err(e) => Err(Error::Json(e)),
        };
        self.out = out;
        result
    }

    /// Waits for one message and lends it out until the next call.
    pub(crate) fn recv(&mut self) -> Result<&[u8]> {
        let (_, rx) = self.halves()?;
        match rx.recv().map_err(ipc_error) {
            Ok(bytes) => self.inbox = bytes,
            Err(e) => return Err(self.disconnect_error(e)),
        }
        Ok(&self.inbox)
    }

    /// One message if one is waiting now, else `Err(Empty)`.
    pub(crate) fn try_recv(&mut self) -> Result<&[u8]> {
        match self.wait_connected(Some(Duration::ZERO)) {
            Err(Error::Timeout) => return Err(Error::Empty),
            other => other?,
        }
        let (_, rx) = self.halves()?;
        self.inbox = match rx.try_recv() {
            Ok(bytes) => bytes,
            Err(TryRecvError::Empty) => return Err(Error::Empty),
            Err(TryRecvError::IpcError(e)) => {
                let e = ipc_error(e);
                return Err(self.disconnect_error(e));
            }
        };
        Ok(&self.inbox)
    }

    /// Waits at most `timeout` for one message (`Err(Timeout)` after that).
    pub(crate) fn recv_timeout(&mut self, timeout: Duration) -> Result<&[u8]> {
        let deadline = Instant::now() + timeout;
        let mut turns = 0u32;
        loop {
            match self.try_recv() {
                Ok(_) => return Ok(&self.inbox),
                Err(Error::Empty) => {}
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout);
            }
            turns += 1;
            if turns < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Waits for one message and decodes it as JSON.
    pub(crate) fn recv_json<T: DeserializeOwned>(&mut self) -> Result<T> {
        let bytes = self.recv()?;
        Ok(serde_json::from_slice(bytes)?)
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
                // Before the data channels close (the fields drop after this): the peer that
                // sees them closed finds the goodbye and reports a clean close.
                let _ = bye_tx.send(GOODBYE);
            }
            Link::Broken => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated() {
        assert!(validate_name("ok-name_1.2").is_ok());
        for bad in ["", ".hidden", "-dash", "a/b", "sp ace", &"x".repeat(201)] {
            assert!(
                matches!(validate_name(bad), Err(Error::InvalidName { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn duplex_in_one_process() -> Result<()> {
        let name = format!("fallback-unit-{}", std::process::id());
        let mut a = IpcDuplex::create(&name)?;
        let mut b = IpcDuplex::connect_timeout(&name, Duration::from_secs(5))?;
        a.send(b"ping")?;
        assert_eq!(b.recv()?, b"ping");
        b.send_json(&("pong", 7u64))?;
        let (word, n): (String, u64) = a.recv_json()?;
        assert_eq!((word.as_str(), n), ("pong", 7));
        assert!(matches!(a.try_recv(), Err(Error::Empty)));
        assert!(
            !rendezvous::rendezvous_path(&name).exists(),
            "rendezvous file removed after accept"
        );
        drop(b);
        assert!(matches!(
            a.recv_timeout(Duration::from_secs(5)),
            Err(Error::Disconnected { .. })
        ));
        Ok(())
    }

    #[test]
    fn dropping_a_pending_creator_cleans_up() -> Result<()> {
        let name = format!("fallback-pending-{}", std::process::id());
        let a = IpcDuplex::create(&name)?;
        assert!(rendezvous::rendezvous_path(&name).exists());
        drop(a);
        assert!(!rendezvous::rendezvous_path(&name).exists());
        assert!(matches!(IpcDuplex::connect(&name), Err(Error::NotFound(_))));
        Ok(())
    }
}
