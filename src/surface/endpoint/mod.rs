//! [`Endpoint`]: the shared-memory [`Channel`] when a mapping can be made, the ipc-channel
//! fallback when it cannot, behind one send / receive API; its listener is in `listener.rs`.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

use serde::Deserialize;

mod listener;
mod topic;
pub use listener::EndpointListener;
pub use topic::{EndpointPublisher, EndpointSubscriber};

use crate::error::{ChannelName, OpenError, RecvError, SendError};
use crate::ipc::listener as ipc_listener;
use crate::ipc::{self, rendezvous, IpcDuplex, IpcGrant, IpcMessage, IpcTopicGrant};
use crate::seam::{Grant, Message, RecvCore, Sealed, SendCore};
use crate::service::listener::SlotLease;
use crate::service::Connection;
use crate::shm::channel::{Channel, Config};
use crate::shm::mapping::{self, Entry, Mapping};
use crate::shm::ring::{ReadGuard, WriteGrant};
use crate::surface::connect::connect_mapping;
use crate::wait::{Deadline, WaitStrategy};

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
/// It offers the same methods as [`Channel`], with the same meaning, on both backends:
/// messages of any length up to [`max_message`](Endpoint::max_message) (fragmented where the
/// backend needs it), grants ([`reserve`](Endpoint::reserve)), receives in place, into a
/// buffer or as JSON, a deadline form of every wait, `Disconnected` after a clean close and
/// everything sent has been received, `PeerGone` when the peer process died.
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

/// `$body` with `$backend` bound to the endpoint's backend, for the calls both backends make
/// alike: the one place an endpoint tells them apart.
macro_rules! on_backend {
    ($inner:expr, $backend:ident => $body:expr) => {
        match $inner {
            Inner::Shm($backend) => $body,
            Inner::Ipc($backend) => $body,
        }
    };
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("backend", &self.backend())
            .field("name", &self.name())
            .finish()
    }
}

/// A received message, from [`Endpoint::recv`] (or [`EndpointSubscriber::recv`]). Derefs to the bytes: a frame still in the
/// shared-memory ring (released when this drops) or the fallback's receive buffer.
pub struct Received<'a> {
    msg: Msg<'a>,
}

enum Msg<'a> {
    Shm(ReadGuard<'a>),
    /// A fallback's message, and its channel's name for errors.
    Ipc(IpcMessage<'a>),
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
            Msg::Ipc(msg) => msg,
        }
    }
}

impl<'a> Received<'a> {
    /// Decodes the message as JSON; the value may borrow from the message, as with
    /// [`ReadGuard::json`] (which says which fields can).
    pub fn json<T: Deserialize<'a>>(&'a self) -> Result<T, RecvError> {
        match &self.msg {
            Msg::Shm(guard) => guard.json(),
            Msg::Ipc(msg) => msg.json(),
        }
    }
}

impl Sealed for Received<'_> {}

impl Message for Received<'_> {
    fn json<'de, T: Deserialize<'de>>(&'de self) -> Result<T, RecvError> {
        Received::json(self)
    }

    fn channel(&self) -> &ChannelName {
        match &self.msg {
            Msg::Shm(guard) => guard.channel(),
            Msg::Ipc(msg) => msg.channel(),
        }
    }
}

/// Room for one message, from [`Endpoint::reserve`] (or
/// [`EndpointPublisher::reserve`]), written in place. Derefs to the bytes: a
/// frame in the shared-memory ring, or a buffer of the fallback's. [`commit`](Reserved::commit)
/// sends it; dropped, it sends nothing.
#[must_use = "a grant that is dropped without commit() sends nothing"]
pub struct Reserved<'a> {
    grant: Room<'a>,
}

enum Room<'a> {
    Shm(WriteGrant<'a>),
    Ipc(IpcGrant<'a>),
    /// A topic's on the fallback: sent to every subscriber.
    IpcTopic(IpcTopicGrant<'a>),
}

/// `$body` with `$g` bound to the room of either backend.
macro_rules! on_grant {
    ($grant:expr, $g:ident => $body:expr) => {
        match $grant {
            Room::Shm($g) => $body,
            Room::Ipc($g) => $body,
            Room::IpcTopic($g) => $body,
        }
    };
}

impl Reserved<'_> {
    /// Sends the first `used` bytes (at most the reserved length) as one message. Never fails
    /// on shared memory (the frame is published in place); on the fallback it reports what a
    /// send would.
    pub fn commit(self, used: usize) -> Result<(), SendError> {
        match self.grant {
            Room::Shm(grant) => {
                grant.commit(used);
                Ok(())
            }
            Room::Ipc(grant) => grant.commit(used),
            Room::IpcTopic(grant) => grant.commit(used),
        }
    }
}

impl Sealed for Reserved<'_> {}

impl Grant for Reserved<'_> {
    fn commit(self, used: usize) -> Result<(), SendError> {
        Reserved::commit(self, used)
    }
}

impl fmt::Debug for Reserved<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reserved")
            .field("len", &self.len())
            .finish()
    }
}

impl Deref for Reserved<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        on_grant!(&self.grant, g => g)
    }
}

impl DerefMut for Reserved<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        on_grant!(&mut self.grant, g => g)
    }
}

/// The backend a connect to `name` takes, told by what is under the name before anything is
/// opened (the rule [`Endpoint::connect`] states): a shared-memory object of this user, else the
/// fallback's rendezvous file, else anything else in the shared-memory namespace (whose open
/// reports what it is), else [`OpenError::NotFound`].
fn backend_under(name: &str) -> Result<Backend, OpenError> {
    match mapping::entry(name) {
        Entry::Mapping => Ok(Backend::Shm),
        _ if rendezvous::present(name) => Ok(Backend::IpcChannel),
        Entry::Other => Ok(Backend::Shm),
        Entry::Absent => Err(OpenError::NotFound {
            channel: name.into(),
        }),
    }
}

/// Whether `Endpoint::create` and `EndpointListener::bind` go straight to the fallback: when it
/// is forced, or when this system has no shared memory to make a mapping in (no directory of
/// shared-memory objects, `/dev/shm`).
fn fallback_only() -> bool {
    ipc::forced() || mapping::shm_dir().is_none()
}

/// Whether a failure to make a mapping (or a listener's) is one of this system's rather than of
/// the request: an operating-system error ([`OpenError::Io`]: `/dev/shm` full or not
/// writable, no descriptors left...), after which the fallback is tried. An invalid name or
/// configuration, or a name already taken, is returned as it is.
fn mapping_unavailable(e: &OpenError) -> bool {
    matches!(e, OpenError::Io(_))
}

impl Endpoint {
    /// Creates the channel `name`. The backend, by this rule:
    ///
    /// * the ipc-channel fallback when the `force-fallback` cargo feature forces it, or when
    ///   the system has no shared memory to make a mapping in (no `/dev/shm`);
    /// * else a shared-memory ring;
    /// * and when making the mapping fails with an operating-system error
    ///   ([`OpenError::Io`]), the fallback; if that fails too, the mapping's error is returned.
    ///
    /// Any other error ([`OpenError::InvalidName`], [`OpenError::InvalidConfig`],
    /// [`OpenError::AlreadyExists`]) is the request's, the same on either backend, and is
    /// returned as it is. [`create_with`](Endpoint::create_with) chooses the backend
    /// explicitly.
    pub fn create(name: &str, config: &Config) -> Result<Endpoint, OpenError> {
        if fallback_only() {
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
    pub fn create_with(
        name: &str,
        config: &Config,
        backend: Backend,
    ) -> Result<Endpoint, OpenError> {
        let inner = match backend {
            Backend::Shm => Inner::Shm(Channel::create(name, config)?),
            Backend::IpcChannel => Inner::Ipc(IpcDuplex::create(name)?),
        };
        Ok(Endpoint {
            inner,
            _lease: None,
        })
    }

    /// Connects to what is under `name`, on whichever backend its creator used: a channel
    /// (this end becomes its connector) or a listener, an [`EndpointListener`] or a
    /// [`Listener`](crate::Listener) (this end becomes a new client of it, once the server
    /// accepts), as [`Channel::connect`] does.
    ///
    /// The backend is told by what is under the name, looked at before anything is opened:
    ///
    /// 1. a shared-memory object of this user (`/dev/shm/shmlink-<name>`): shared memory (its
    ///    first word says channel or listener);
    /// 2. else the fallback's rendezvous file: the fallback;
    /// 3. else anything else in the shared-memory namespace under the name (another user's
    ///    object, a link, a directory): its error, [`OpenError::NotPrivate`] or
    ///    [`OpenError::NotAChannel`];
    /// 4. else [`OpenError::NotFound`], naming the channel, whichever backend the process
    ///    would create on (the `force-fallback` feature changes only where `create` makes
    ///    things).
    ///
    /// Other errors as [`Channel::connect`]'s.
    pub fn connect(name: &str, wait: WaitStrategy) -> Result<Endpoint, OpenError> {
        mapping::validate_name(name)?;
        Endpoint::connect_until(name, wait, None)
    }

    /// [`Endpoint::connect`], retried while nothing ready is under the name, for at most
    /// `timeout`. Past the deadline it ends as [`Channel::connect_timeout`] does:
    /// [`OpenError::NotFound`], naming the channel, if nothing by that name appeared, and
    /// [`OpenError::Timeout`] if something did that was not ready in time, or a listener did
    /// not accept us in time.
    pub fn connect_timeout(
        name: &str,
        wait: WaitStrategy,
        timeout: Duration,
    ) -> Result<Endpoint, OpenError> {
        mapping::validate_name(name)?;
        let deadline = Deadline::after(timeout).instant();
        mapping::retry_until_there(deadline, || Endpoint::connect_until(name, wait, deadline))
    }

    /// One attempt of [`Endpoint::connect`]: the backend chosen by what is under the name.
    fn connect_until(
        name: &str,
        wait: WaitStrategy,
        deadline: Option<Instant>,
    ) -> Result<Endpoint, OpenError> {
        match backend_under(name)? {
            Backend::Shm => {
                let map = Mapping::open_named(name)?;
                connect_mapping(map, name, wait, deadline).map(Endpoint::from)
            }
            Backend::IpcChannel => Ok(Endpoint {
                inner: Inner::Ipc(IpcDuplex::connect_until(name, deadline)?),
                _lease: None,
            }),
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
    /// offers ([`Channel::split`], [`Channel::set_max_message`], ...).
    pub fn as_channel(&mut self) -> Option<&mut Channel> {
        match &mut self.inner {
            Inner::Shm(c) => Some(c),
            Inner::Ipc(_) => None,
        }
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        on_backend!(&self.inner, b => b.name())
    }

    /// Largest message [`send`](Endpoint::send) accepts.
    pub fn max_message(&self) -> usize {
        on_backend!(&self.inner, b => b.max_message())
    }

    /// Largest grant [`reserve`](Endpoint::reserve) lends: one frame on shared memory; on the
    /// fallback, which has no frames, [`max_message`](Endpoint::max_message).
    pub fn max_frame(&self) -> usize {
        match &self.inner {
            Inner::Shm(c) => c.max_frame(),
            Inner::Ipc(d) => d.max_message(),
        }
    }

    /// The peer's process id, once it has connected.
    pub fn peer_pid(&self) -> Option<u32> {
        on_backend!(&self.inner, b => b.peer_pid())
    }

    /// True while the peer is connected and has neither closed its end nor died.
    pub fn is_peer_connected(&self) -> bool {
        on_backend!(&self.inner, b => b.is_peer_connected())
    }

    send_methods!(
        grant: Reserved<'_>,
        setup: "use shmlink::{Config, Endpoint, WaitStrategy};\n\
         let name = format!(\"doc-endpoint-send-{}\", std::process::id());\n\
         let mut tx = Endpoint::create(&name, &Config::with_wait(WaitStrategy::Spin))?;\n\
         let mut rx = Endpoint::connect(&name, WaitStrategy::Spin)?;",
        commit: "grant.commit(5)?;",
    );

    recv_methods!(
        guard: Received<'_>,
        setup: "use shmlink::{Config, Endpoint, WaitStrategy};\n\
         let name = format!(\"doc-endpoint-recv-{}\", std::process::id());\n\
         let mut tx = Endpoint::create(&name, &Config::with_wait(WaitStrategy::Spin))?;\n\
         let mut rx = Endpoint::connect(&name, WaitStrategy::Spin)?;",
    );
}

impl SendCore for Endpoint {
    type Grant<'a> = Reserved<'a>;

    #[inline]
    fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        on_backend!(&mut self.inner, b => b.send_until(bytes, deadline))
    }

    #[inline]
    fn send_json_until<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        on_backend!(&mut self.inner, b => b.send_json_until(value, deadline))
    }

    #[inline]
    fn reserve_until(&mut self, len: usize, deadline: Deadline) -> Result<Reserved<'_>, SendError> {
        let grant = match &mut self.inner {
            Inner::Shm(c) => Room::Shm(c.reserve_until(len, deadline)?),
            Inner::Ipc(d) => Room::Ipc(d.reserve_until(len, deadline)?),
        };
        Ok(Reserved { grant })
    }

    fn send_batch_until<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        on_backend!(&mut self.inner, b => b.send_batch_until(batch, deadline))
    }
}

impl RecvCore for Endpoint {
    type Guard<'a> = Received<'a>;

    #[inline]
    fn recv_until(&mut self, deadline: Deadline) -> Result<Received<'_>, RecvError> {
        let msg = match &mut self.inner {
            Inner::Shm(c) => Msg::Shm(c.recv_until(deadline)?),
            Inner::Ipc(d) => Msg::Ipc(d.recv_until(deadline)?),
        };
        Ok(Received { msg })
    }

    #[inline]
    fn recv_into_until(
        &mut self,
        buf: &mut Vec<u8>,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        on_backend!(&mut self.inner, b => b.recv_into_until(buf, deadline))
    }

    fn recv_batch_until<F: FnMut(&[u8])>(
        &mut self,
        max: usize,
        f: &mut F,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        on_backend!(&mut self.inner, b => b.recv_batch_until(max, f, deadline))
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
    /// An endpoint on a connection a shared-memory [`Listener`](crate::Listener) accepted; its
    /// client's place is given back when the endpoint drops.
    fn from(connection: Connection) -> Endpoint {
        let (channel, lease) = connection.into_parts();
        Endpoint {
            inner: Inner::Shm(channel),
            _lease: Some(Lease::Shm(lease)),
        }
    }
}
