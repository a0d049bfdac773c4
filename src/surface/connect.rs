//! The one way to connect: by name, to whatever the name holds.
//!
//! [`Channel::connect`] opens the object under the name and reads its first word once: a
//! channel's magic makes this end the channel's connector; a listener's makes it a new client
//! of the listener (a fresh channel, once the server accepts it). The
//! [`Endpoint`](crate::Endpoint) and async connects come through here for shared memory, so
//! every surface reaches the same things by the same name.

use std::time::{Duration, Instant};

use crate::error::OpenError;
use crate::service::listener::connect_client;
use crate::shm::channel::{peek_magic, Channel};
use crate::shm::layout::listener::LISTENER_MAGIC;
use crate::shm::layout::topic::TOPIC_MAGIC;
use crate::shm::mapping::{self, Mapping};
use crate::wait::{Deadline, WaitStrategy};

impl Channel {
    /// Connects to the channel or listener `name` made by another process (or thread): to a
    /// channel, as its connector; to a [`Listener`](crate::Listener), as a new client of it,
    /// waiting until its server accepts (see [`Listener`](crate::Listener)).
    ///
    /// Errors about the name say it. Fails with [`OpenError::InvalidName`] for a name nothing
    /// can have, [`OpenError::NotFound`] or [`OpenError::NotReady`] if it is not there yet (see
    /// [`connect_timeout`](Channel::connect_timeout) to wait for it), with
    /// [`OpenError::AlreadyConnected`] if another endpoint holds a channel's connecting end
    /// (or held it and closed or died: a channel serves one connection; a listener serves one
    /// client after another), with [`OpenError::TooManyClients`] when a listener admits no
    /// more, [`OpenError::PeerGone`] or [`OpenError::Disconnected`] when a listener's server
    /// died or closed it, with [`OpenError::NotAChannel`] if the entry is not a regular file (a
    /// link, which is never followed, a directory, a FIFO...), with [`OpenError::NotPrivate`]
    /// if it is not this user's alone, and with [`OpenError::BadMagic`],
    /// [`OpenError::VersionMismatch`], [`OpenError::LayoutMismatch`] or
    /// [`OpenError::SizeMismatch`] if the mapping is not one this build understands.
    ///
    /// ```
    /// use shmlink::{Channel, Config, Listener, WaitStrategy};
    /// # let name = format!("doc-connect-{}", std::process::id());
    /// // A channel: this end becomes its connector.
    /// let mut server = Channel::create(&name, &Config::default())?;
    /// let mut client = Channel::connect(&name, WaitStrategy::Block)?;
    /// client.send(b"hi")?;
    /// assert_eq!(&*server.recv()?, b"hi");
    ///
    /// // A listener: this end becomes a new client, with a channel of its own.
    /// # let svc = format!("doc-connect-svc-{}", std::process::id());
    /// let listener = Listener::bind(&svc, &Config::default())?;
    /// let client = std::thread::spawn(move || Channel::connect(&svc, WaitStrategy::Block));
    /// let mut conn = listener.accept()?;
    /// let mut client = client.join().unwrap()?;
    /// client.send(b"hello")?;
    /// assert_eq!(&*conn.recv()?, b"hello");
    /// # Ok::<(), shmlink::Error>(())
    /// ```
    pub fn connect(name: &str, wait: WaitStrategy) -> Result<Channel, OpenError> {
        mapping::validate_name(name)?;
        connect_once(name, wait, None)
    }

    /// Like [`connect`](Channel::connect), retrying while nothing ready is under the name,
    /// and waiting for a listener's server to accept, until `timeout` has passed. Then it fails
    /// with [`OpenError::NotFound`], naming the channel, if there is still nothing under that
    /// name, and with [`OpenError::Timeout`] if something is there that has not become ready
    /// (its creator is still making it, or died doing so: [`segments`](crate::segments) tells
    /// which) or a listener that did not accept us in time. Any other error ends the wait at
    /// once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shmlink::{Channel, OpenError, WaitStrategy};
    /// let err = Channel::connect_timeout("nobody-made-this", WaitStrategy::Spin, Duration::from_millis(10))
    ///     .unwrap_err();
    /// assert!(matches!(&err, OpenError::NotFound { channel: name } if name == "nobody-made-this"));
    /// assert_eq!(
    ///     err.to_string(),
    ///     r#"no channel or listener named "nobody-made-this" (its server must create or bind it first)"#
    /// );
    /// ```
    pub fn connect_timeout(
        name: &str,
        wait: WaitStrategy,
        timeout: Duration,
    ) -> Result<Channel, OpenError> {
        mapping::validate_name(name)?;
        let deadline = Deadline::after(timeout).instant();
        mapping::retry_until_there(deadline, || connect_once(name, wait, deadline))
    }
}

/// One attempt to connect to what is under `name` on shared memory.
fn connect_once(
    name: &str,
    wait: WaitStrategy,
    deadline: Option<Instant>,
) -> Result<Channel, OpenError> {
    connect_mapping(Mapping::open_named(name)?, name, wait, deadline)
}

/// Connects to the object under `name`, open in `map`, by what its first word says it is: a
/// listener (as a new client, waiting for the accept until `deadline`) or a channel.
pub(crate) fn connect_mapping(
    map: Mapping,
    name: &str,
    wait: WaitStrategy,
    deadline: Option<Instant>,
) -> Result<Channel, OpenError> {
    match peek_magic(&map) {
        LISTENER_MAGIC => connect_client(map, name, wait, deadline),
        TOPIC_MAGIC => Err(OpenError::NotAChannel {
            channel: name.into(),
            reason: "a topic, not a channel or listener (join it with Subscriber::connect or \
                     EndpointSubscriber::connect)"
                .into(),
        }),
        magic => Channel::connect_mapping(map, name.into(), wait, magic),
    }
}
