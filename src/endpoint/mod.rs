//! [`Endpoint`]: the shared-memory [`Channel`] when a mapping can be made, the ipc-channel
//! fallback when it cannot, behind one send / receive API; its listener is in `listener.rs`.

use std::fmt;
use std::ops::Deref;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

mod listener;
pub use listener::EndpointListener;

use crate::error::KIND_LISTENER;
use crate::ipc::listener as ipc_listener;
use crate::ipc::{self, IpcDuplex};
use crate::mapping;
use crate::service::listener::SlotLease;
use crate::{Channel, Config, Connection, Error, Listener, ReadGuard, WaitStrategy};

type Result<T, E = Error> = std::result::Result<T, E>;

/// Which backend an [`Endpoint`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The lock-free ring in a named shared-memory mapping ([`Channel`]).
    Shm,
    /// The fallback: a pair of byte channels of the `ipc-channel` crate (Unix sockets), found
    /// through a small rendezvous file named after the channel.
    IpcChannel,
}

impl Backend {
    /// `"shm"` or `"ipc-channel"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Shm => "shm",
            Backend::IpcChannel => "ipc-channel",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One end of a duplex channel on whichever backend could be used: the shared-memory
/// [`Channel`] where a mapping can be made, else a fallback over the `ipc-channel` crate. The
/// connecting side finds the backend its creator chose.
///
/// Both backends behave alike: messages of any length up to
/// [`max_message`](Endpoint::max_message), [`Error::Disconnected`] after a clean close and
/// everything sent has been received, [`Error::PeerGone`] when the peer process died.
///
/// ```
/// # let name = format!("doc-endpoint-{}", std::process::id());
/// use shmlink::{Backend, Config, Endpoint, WaitStrategy};
/// // Chosen explicitly here, so that the example runs the same everywhere.
/// let mut server = Endpoint::create_with(&name, &Config::default(), Backend::IpcChannel)?;
/// let mut client = Endpoint::connect(&name, WaitStrategy::Block)?;
/// assert_eq!(client.backend(), Backend::IpcChannel);
/// client.send(b"hello")?;
/// assert_eq!(&*server.recv()?, b"hello");
/// assert_eq!(server.peer_pid(), Some(std::process::id()));
/// # Ok::<(), shmlink::Error>(())
/// ```
///
/// There is no `split`: on the fallback a received message is a buffer of the endpoint's own,
/// lent out until the next call. To reply with data borrowed from a request, copy the request
/// out first, or reach the shared-memory [`Channel`] with [`as_channel`](Endpoint::as_channel)
/// and use [`Channel::split`].
pub struct Endpoint {
    inner: Inner,
    /// For a connection a listener accepted: its place among the listener's clients, given
    /// back when the endpoint drops (after `inner`, which is declared first).
    _lease: Option<Lease>,
}

/// A listener's hold on one of its client places; held only to be dropped.
#[allow(dead_code)]
enum Lease {
    Shm(SlotLease),
    Ipc(ipc_listener::Lease),
}

// The shared-memory variant is the hot path: it stays inline rather than behind a box.
#[allow(clippy::large_enum_variant)]
enum Inner {
    Shm(Channel),
    Ipc(IpcDuplex),
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("backend", &self.backend())
            .field("name", &self.name())
            .finish()
    }
}

/// A received message, from [`Endpoint::recv`]. Derefs to the bytes: a frame still in the
/// shared-memory ring (released when this drops) or the fallback's receive buffer.
pub struct Received<'a> {
    msg: Msg<'a>,
}

enum Msg<'a> {
    Shm(ReadGuard<'a>),
    Bytes(&'a [u8]),
}

impl fmt::Debug for Received<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Received")
            .field("len", &self.len())
            .finish()
    }
}

impl Deref for Received<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.msg {
            Msg::Shm(guard) => guard,
            Msg::Bytes(bytes) => bytes,
        }
    }
}

impl<'a> Received<'a> {
    /// Decodes the message as JSON; the value may borrow from the message, as with
    /// [`ReadGuard::json`] (which says which fields can).
    pub fn json<T: Deserialize<'a>>(&'a self) -> Result<T> {
        match &self.msg {
            Msg::Shm(guard) => guard.json(),
            Msg::Bytes(bytes) => Ok(serde_json::from_slice(bytes)?),
        }
    }
}

/// Errors after which creating a mapping will not work here: use the fallback.
fn mapping_unavailable(e: &Error) -> bool {
    matches!(e, Error::Io(_))
}

impl Endpoint {
    /// Creates the channel `name`: a shared-memory ring, or the ipc-channel fallback when no
    /// mapping can be made (an operating-system error) or the fallback is forced by the
    /// `force-fallback` cargo feature. [`create_with`](Endpoint::create_with) chooses the
    /// backend explicitly.
    pub fn create(name: &str, config: &Config) -> Result<Endpoint> {
        if ipc::forced() {
            return Endpoint::create_with(name, config, Backend::IpcChannel);
        }
        match Channel::create(name, config) {
            Ok(channel) => Ok(Endpoint::from(channel)),
            Err(e) if mapping_unavailable(&e) => {
                Endpoint::create_with(name, config, Backend::IpcChannel).map_err(|_| e)
            }
            Err(e) => Err(e),
        }
    }

    /// Creates the channel `name` on the given backend, whatever the environment says. The
    /// fallback ignores `config` (it has no ring to size, and always blocks).
    pub fn create_with(name: &str, config: &Config, backend: Backend) -> Result<Endpoint> {
        let inner = match backend {
            Backend::Shm => Inner::Shm(Channel::create(name, config)?),
            Backend::IpcChannel => Inner::Ipc(IpcDuplex::create(name)?),
        };
        Ok(Endpoint {
            inner,
            _lease: None,
        })
    }

    /// Connects to the channel `name` on whichever backend its creator used, or, when `name`
    /// is an [`EndpointListener`], as a new client of it (waiting until it is accepted, as
    /// [`Listener::connect`] does). `Err(NotFound)` or `Err(NotReady)` when it is not there
    /// (yet), [`Error::TooManyClients`] when the listener admits no more clients.
    pub fn connect(name: &str, wait: WaitStrategy) -> Result<Endpoint> {
        Endpoint::connect_until(name, wait, None)
    }

    /// [`Endpoint::connect`], retried while the channel is not there yet, for at most
    /// `timeout`. Past the deadline it ends as [`Channel::connect_timeout`] does:
    /// [`Error::NotFound`], naming the channel, if nothing by that name appeared, and
    /// [`Error::Timeout`] if something did that was not ready in time, or a listener did not
    /// accept us in time.
    pub fn connect_timeout(name: &str, wait: WaitStrategy, timeout: Duration) -> Result<Endpoint> {
        let deadline = Instant::now() + timeout;
        mapping::retry_until_there(deadline, || {
            Endpoint::connect_until(name, wait, Some(deadline))
        })
    }

    fn connect_until(
        name: &str,
        wait: WaitStrategy,
        deadline: Option<Instant>,
    ) -> Result<Endpoint> {
        let ipc = |duplex| Endpoint {
            inner: Inner::Ipc(duplex),
            _lease: None,
        };
        if ipc::forced() {
            match IpcDuplex::connect_until(name, deadline) {
                Ok(duplex) => return Ok(ipc(duplex)),
                // Not published there: look for shared memory.
                Err(Error::NotFound(_) | Error::NotReady(_) | Error::Io(_)) => {}
                Err(e) => return Err(e),
            }
        }
        match Channel::connect(name, wait) {
            Ok(channel) => Ok(Endpoint::from(channel)),
            // A listener's name.
            Err(Error::WrongKind {
                found: KIND_LISTENER,
                ..
            }) => {
                let channel = match deadline {
                    None => Listener::connect(name, wait)?,
                    Some(d) => Listener::connect_timeout(
                        name,
                        wait,
                        d.saturating_duration_since(Instant::now()),
                    )?,
                };
                Ok(Endpoint::from(channel))
            }
            Err(e @ (Error::NotFound(_) | Error::NotReady(_) | Error::Io(_))) => {
                match IpcDuplex::connect_until(name, deadline) {
                    Ok(duplex) => Ok(ipc(duplex)),
                    Err(Error::NotFound(_)) => Err(e),
                    Err(other) => Err(other),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        match &self.inner {
            Inner::Shm(_) => Backend::Shm,
            Inner::Ipc(_) => Backend::IpcChannel,
        }
    }

    /// The shared-memory channel underneath, when that is the backend: for what only it
    /// offers ([`Channel::split`], grants, [`Channel::set_max_message`], ...).
    pub fn as_channel(&mut self) -> Option<&mut Channel> {
        match &mut self.inner {
            Inner::Shm(c) => Some(c),
            Inner::Ipc(_) => None,
        }
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        match &self.inner {
            Inner::Shm(c) => c.name(),
            Inner::Ipc(d) => d.name(),
        }
    }

    /// Largest message [`Endpoint::send`] accepts.
    pub fn max_message(&self) -> usize {
        match &self.inner {
            Inner::Shm(c) => c.max_message(),
            Inner::Ipc(d) => d.max_message(),
        }
    }

    /// The peer's process id, once it has connected.
    pub fn peer_pid(&mut self) -> Option<u32> {
        match &mut self.inner {
            Inner::Shm(c) => c.peer_pid(),
            Inner::Ipc(d) => d.peer_pid(),
        }
    }

    /// True while the peer is connected and has neither closed its end nor died.
    pub fn is_peer_connected(&mut self) -> bool {
        match &mut self.inner {
            Inner::Shm(c) => c.is_peer_connected(),
            Inner::Ipc(d) => d.is_peer_connected(),
        }
    }

    /// Sends one message, waiting for room (on the fallback: for the peer to connect).
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.inner {
            Inner::Shm(c) => c.send(bytes),
            Inner::Ipc(d) => d.send(bytes),
        }
    }

    /// Like [`send`](Endpoint::send), giving up with [`Error::Timeout`] after `timeout`. What the
    /// deadline covers on each backend is said at
    /// [`send_json_timeout`](Endpoint::send_json_timeout).
    pub fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<()> {
        match &mut self.inner {
            Inner::Shm(c) => c.send_timeout(bytes, timeout),
            Inner::Ipc(d) => {
                d.wait_connected(Some(timeout))?;
                d.send(bytes)
            }
        }
    }

    /// Sends one message if there is room now (`Err(Full)` otherwise). The fallback has no
    /// notion of full and always sends.
    pub fn try_send(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.inner {
            Inner::Shm(c) => c.try_send(bytes),
            Inner::Ipc(d) => d.send(bytes),
        }
    }

    /// Serialises `value` as JSON and sends it (in place in the ring on shared memory). Values
    /// of any size up to [`max_message`](Endpoint::max_message) go through.
    pub fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        match &mut self.inner {
            Inner::Shm(c) => c.send_json(value),
            Inner::Ipc(d) => d.send_json(value),
        }
    }

    /// Like [`send_json`](Endpoint::send_json), giving up with [`Error::Timeout`] after
    /// `timeout`.
    ///
    /// On shared memory this is [`Channel::send_json_timeout`]: the deadline covers the wait
    /// for room in the ring. The ipc-channel fallback has no ring to wait for: there the
    /// deadline covers the wait for the peer to connect, and the bytes then go to the socket,
    /// which takes them at once unless the peer has left its buffer full (a few hundred
    /// kilobytes unread); that last wait, for the peer to read, has no deadline.
    pub fn send_json_timeout<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
        timeout: Duration,
    ) -> Result<()> {
        match &mut self.inner {
            Inner::Shm(c) => c.send_json_timeout(value, timeout),
            Inner::Ipc(d) => {
                d.wait_connected(Some(timeout))?;
                d.send_json(value)
            }
        }
    }

    /// Waits for one message.
    pub fn recv(&mut self) -> Result<Received<'_>> {
        let msg = match &mut self.inner {
            Inner::Shm(c) => Msg::Shm(c.recv()?),
            Inner::Ipc(d) => Msg::Bytes(d.recv()?),
        };
        Ok(Received { msg })
    }

    /// Waits at most `timeout` for one message.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Received<'_>> {
        let msg = match &mut self.inner {
            Inner::Shm(c) => Msg::Shm(c.recv_timeout(timeout)?),
            Inner::Ipc(d) => Msg::Bytes(d.recv_timeout(timeout)?),
        };
        Ok(Received { msg })
    }

    /// One message if one is waiting now, else `Err(Empty)`.
    pub fn try_recv(&mut self) -> Result<Received<'_>> {
        let msg = match &mut self.inner {
            Inner::Shm(c) => Msg::Shm(c.try_recv()?),
            Inner::Ipc(d) => Msg::Bytes(d.try_recv()?),
        };
        Ok(Received { msg })
    }

    /// Waits for one message and decodes it as JSON into an owned value.
    pub fn recv_json<T: DeserializeOwned>(&mut self) -> Result<T> {
        match &mut self.inner {
            Inner::Shm(c) => c.recv_json(),
            Inner::Ipc(d) => d.recv_json(),
        }
    }

    /// Waits at most `timeout` for one message and decodes it as JSON into an owned value.
    pub fn recv_json_timeout<T: DeserializeOwned>(&mut self, timeout: Duration) -> Result<T> {
        match &mut self.inner {
            Inner::Shm(c) => c.recv_json_timeout(timeout),
            Inner::Ipc(d) => Ok(serde_json::from_slice(d.recv_timeout(timeout)?)?),
        }
    }
}

impl From<Channel> for Endpoint {
    /// An endpoint on an existing shared-memory channel.
    fn from(channel: Channel) -> Endpoint {
        Endpoint {
            inner: Inner::Shm(channel),
            _lease: None,
        }
    }
}

impl From<Connection> for Endpoint {
    /// An endpoint on a connection a shared-memory [`Listener`] accepted; its client's place
    /// is given back when the endpoint drops.
    fn from(connection: Connection) -> Endpoint {
        let (channel, lease) = connection.into_parts();
        Endpoint {
            inner: Inner::Shm(channel),
            _lease: Some(Lease::Shm(lease)),
        }
    }
}
