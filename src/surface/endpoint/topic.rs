//! [`EndpointPublisher`] and [`EndpointSubscriber`]: a topic on shared memory where a mapping
//! can be made, on the ipc-channel fallback where it cannot, behind the one method set. They
//! lend out the endpoint's [`Received`] and [`Reserved`].

use std::fmt;

use super::{
    backend_under, fallback_only, mapping_unavailable, Backend, Msg, Received, Reserved, Room,
};
use crate::error::{OpenError, RecvError, SendError};
use crate::ipc::{IpcPublisher, IpcSubscriber};
use crate::seam::{RecvCore, SendCore};
use crate::shm::mapping;
use crate::shm::topic::{
    Publisher, Subscriber, SubscriberConfig, SubscriberInfo, TopicConfig, TopicMode,
};
use crate::wait::{Deadline, WaitStrategy};

/// A topic's publisher on whichever backend could be used: a [`Publisher`] where a mapping can
/// be made, else the ipc-channel fallback, chosen as [`Endpoint::create`](super::Endpoint::create)
/// chooses. Its subscribers ([`EndpointSubscriber`]) find the backend it chose.
///
/// The same methods, errors and modes on both backends: every message published after a
/// subscriber's connect returned reaches it, in order; a lossless topic's `send` waits for the
/// slowest subscriber (`Full` for `try_send`, `Timeout` for the deadline forms, having sent to
/// nobody); an overwrite topic never waits and a subscriber that fell behind gets
/// [`RecvError::Lagged`] once; a late subscriber may ask for the kept history; a dropped
/// subscriber gets [`RecvError::Dropped`].
///
/// What the fallback costs: it has no ring to share, so each message is sent to each
/// subscriber, a copy and a system call each (shared memory writes it once, and each
/// subscriber reads it in place). A lossless send without a deadline sends to the subscribers
/// in turn on the caller's thread; one with a deadline hands each copy to a sending thread of
/// that subscriber's. In an overwrite topic a subscriber misses a message when its sending
/// thread is still busy with the previous one. The ring's size and the publisher's
/// [`WaitStrategy`] mean nothing there, and [`SubscriberInfo::behind`] is 0.
///
/// ```
/// # let name = format!("doc-endpoint-topic-{}", std::process::id());
/// use shmlink::{Backend, EndpointPublisher, EndpointSubscriber, TopicConfig, WaitStrategy};
/// // Chosen explicitly here, so that the example runs the same everywhere.
/// let mut publisher =
///     EndpointPublisher::create_with(&name, &TopicConfig::default(), Backend::IpcChannel)?;
/// let mut a = EndpointSubscriber::connect(&name, WaitStrategy::Block)?;
/// let mut b = EndpointSubscriber::connect(&name, WaitStrategy::Block)?;
/// assert_eq!(a.backend(), Backend::IpcChannel);
/// publisher.send(b"tick")?;
/// assert_eq!(&*a.recv()?, b"tick");
/// assert_eq!(&*b.recv()?, b"tick");
/// # Ok::<(), shmlink::Error>(())
/// ```
pub struct EndpointPublisher {
    inner: PubInner,
}

// The shared-memory variant is the hot path: inline rather than behind a box.
#[allow(clippy::large_enum_variant)]
enum PubInner {
    Shm(Publisher),
    Ipc(IpcPublisher),
}

/// A topic's subscriber on the backend its publisher chose: a [`Subscriber`] on shared memory,
/// else the ipc-channel fallback. See [`EndpointPublisher`].
pub struct EndpointSubscriber {
    inner: SubInner,
}

#[allow(clippy::large_enum_variant)]
enum SubInner {
    Shm(Subscriber),
    Ipc(IpcSubscriber),
}

/// `$body` with `$b` bound to either backend's end.
macro_rules! on_pub {
    ($inner:expr, $b:ident => $body:expr) => {
        match $inner {
            PubInner::Shm($b) => $body,
            PubInner::Ipc($b) => $body,
        }
    };
}

macro_rules! on_sub {
    ($inner:expr, $b:ident => $body:expr) => {
        match $inner {
            SubInner::Shm($b) => $body,
            SubInner::Ipc($b) => $body,
        }
    };
}

impl fmt::Debug for EndpointPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointPublisher")
            .field("backend", &self.backend())
            .field("name", &self.name())
            .finish()
    }
}

impl fmt::Debug for EndpointSubscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EndpointSubscriber")
            .field("backend", &self.backend())
            .field("name", &self.name())
            .finish()
    }
}

impl EndpointPublisher {
    /// Creates the topic `name`, on the backend chosen by the rule of
    /// [`Endpoint::create`](super::Endpoint::create): the fallback where it is forced or the
    /// system has no shared memory, or where making the mapping fails with an operating-system
    /// error ([`OpenError::Io`]); else shared memory. Other errors are the request's, the
    /// same on either backend.
    pub fn create(name: &str, config: &TopicConfig) -> Result<EndpointPublisher, OpenError> {
        if fallback_only() {
            return EndpointPublisher::create_with(name, config, Backend::IpcChannel);
        }
        match Publisher::create(name, config) {
            Ok(publisher) => Ok(EndpointPublisher::from(publisher)),
            Err(e) if mapping_unavailable(&e) => {
                EndpointPublisher::create_with(name, config, Backend::IpcChannel).map_err(|_| e)
            }
            Err(e) => Err(e),
        }
    }

    /// Creates the topic `name` on the given backend, whatever the environment says.
    pub fn create_with(
        name: &str,
        config: &TopicConfig,
        backend: Backend,
    ) -> Result<EndpointPublisher, OpenError> {
        let inner = match backend {
            Backend::Shm => PubInner::Shm(Publisher::create(name, config)?),
            Backend::IpcChannel => PubInner::Ipc(IpcPublisher::create(name, config)?),
        };
        Ok(EndpointPublisher { inner })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        match &self.inner {
            PubInner::Shm(_) => Backend::Shm,
            PubInner::Ipc(_) => Backend::IpcChannel,
        }
    }

    /// The shared-memory publisher underneath, when that is the backend.
    pub fn as_publisher(&mut self) -> Option<&mut Publisher> {
        match &mut self.inner {
            PubInner::Shm(p) => Some(p),
            PubInner::Ipc(_) => None,
        }
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        on_pub!(&self.inner, b => b.name())
    }

    /// Largest message [`send`](EndpointPublisher::send) accepts: `capacity / 2 - 72` on
    /// shared memory, 256 MiB less 9 bytes on the fallback.
    pub fn max_message(&self) -> usize {
        match &self.inner {
            PubInner::Shm(p) => p.max_message(),
            PubInner::Ipc(_) => crate::ipc::MAX_TOPIC_MESSAGE,
        }
    }

    /// What a slow subscriber costs on this topic.
    pub fn mode(&self) -> TopicMode {
        on_pub!(&self.inner, b => b.mode())
    }

    /// Messages published so far.
    pub fn published(&self) -> u64 {
        on_pub!(&self.inner, b => b.published())
    }

    /// The subscribers now joined, as [`Publisher::subscribers`] gives them.
    pub fn subscribers(&self) -> Vec<SubscriberInfo> {
        on_pub!(&self.inner, b => b.subscribers())
    }

    /// Number of subscribers reading now.
    pub fn subscriber_count(&self) -> usize {
        on_pub!(&self.inner, b => b.subscriber_count())
    }

    /// Drops the subscriber in `slot` ([`SubscriberInfo::slot`]), as
    /// [`Publisher::drop_subscriber`] does: it reads what was already sent to it, then gets
    /// [`RecvError::Dropped`]. False if no subscriber holds the slot.
    pub fn drop_subscriber(&mut self, slot: usize) -> bool {
        on_pub!(&mut self.inner, b => b.drop_subscriber(slot))
    }

    send_methods!(
        grant: Reserved<'_>,
        setup: "use shmlink::{EndpointPublisher, EndpointSubscriber, TopicConfig, WaitStrategy};\n\
         let name = format!(\"doc-endpoint-publisher-{}\", std::process::id());\n\
         let config = TopicConfig { capacity: 8 << 20, ..TopicConfig::default() };\n\
         let mut tx = EndpointPublisher::create(&name, &config)?;\n\
         let mut rx = EndpointSubscriber::connect(&name, WaitStrategy::Spin)?;",
        commit: "grant.commit(5)?;",
        long: " // 3 MiB: one frame of this 8 MiB ring (a topic does not fragment).",
    );
}

impl From<Publisher> for EndpointPublisher {
    /// An endpoint publisher on an existing shared-memory topic.
    fn from(publisher: Publisher) -> EndpointPublisher {
        EndpointPublisher {
            inner: PubInner::Shm(publisher),
        }
    }
}

impl EndpointSubscriber {
    /// Joins the topic `name` on whichever backend its publisher chose (told as
    /// [`Endpoint::connect`](super::Endpoint::connect) tells it: a mapping under the name,
    /// else the fallback's rendezvous file). Errors as [`Subscriber::connect`]'s.
    pub fn connect(name: &str, wait: WaitStrategy) -> Result<EndpointSubscriber, OpenError> {
        EndpointSubscriber::connect_with(name, &SubscriberConfig { wait, history: 0 })
    }

    /// [`connect`](EndpointSubscriber::connect), asking for up to `config.history` of the
    /// messages published before it joined, as [`Subscriber::connect_with`] does.
    pub fn connect_with(
        name: &str,
        config: &SubscriberConfig,
    ) -> Result<EndpointSubscriber, OpenError> {
        mapping::validate_name(name)?;
        let inner = match backend_under(name)? {
            Backend::Shm => SubInner::Shm(Subscriber::connect_with(name, config)?),
            Backend::IpcChannel => SubInner::Ipc(IpcSubscriber::connect_with(name, config)?),
        };
        Ok(EndpointSubscriber { inner })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        match &self.inner {
            SubInner::Shm(_) => Backend::Shm,
            SubInner::Ipc(_) => Backend::IpcChannel,
        }
    }

    /// The shared-memory subscriber underneath, when that is the backend.
    pub fn as_subscriber(&mut self) -> Option<&mut Subscriber> {
        match &mut self.inner {
            SubInner::Shm(s) => Some(s),
            SubInner::Ipc(_) => None,
        }
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        on_sub!(&self.inner, b => b.name())
    }

    /// What a slow subscriber costs on this topic.
    pub fn mode(&self) -> TopicMode {
        on_sub!(&self.inner, b => b.mode())
    }

    /// Largest message the publisher sends.
    pub fn max_message(&self) -> usize {
        on_sub!(&self.inner, b => b.max_message())
    }

    /// The slot this subscriber holds (as [`EndpointPublisher::subscribers`] names it), on
    /// shared memory; `None` on the fallback, whose publisher numbers its subscribers itself
    /// when it takes them in.
    pub fn slot(&self) -> Option<usize> {
        match &self.inner {
            SubInner::Shm(s) => Some(s.slot()),
            SubInner::Ipc(_) => None,
        }
    }

    /// True while the publisher is there and its process runs.
    pub fn is_peer_connected(&self) -> bool {
        on_sub!(&self.inner, b => b.is_peer_connected())
    }

    /// The publisher's process id.
    pub fn peer_pid(&self) -> Option<u32> {
        on_sub!(&self.inner, b => b.peer_pid())
    }

    recv_methods!(
        guard: Received<'_>,
        setup: "use shmlink::{EndpointPublisher, EndpointSubscriber, TopicConfig, WaitStrategy};\n\
         let name = format!(\"doc-endpoint-subscriber-{}\", std::process::id());\n\
         let mut tx = EndpointPublisher::create(&name, &TopicConfig::default())?;\n\
         let mut rx = EndpointSubscriber::connect(&name, WaitStrategy::Spin)?;",
    );
}

impl From<Subscriber> for EndpointSubscriber {
    /// An endpoint subscriber on an existing shared-memory subscriber.
    fn from(subscriber: Subscriber) -> EndpointSubscriber {
        EndpointSubscriber {
            inner: SubInner::Shm(subscriber),
        }
    }
}

impl SendCore for EndpointPublisher {
    type Grant<'a> = Reserved<'a>;

    #[inline]
    fn send_until(&mut self, bytes: &[u8], deadline: Deadline) -> Result<(), SendError> {
        on_pub!(&mut self.inner, b => b.send_until(bytes, deadline))
    }

    #[inline]
    fn send_json_until<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<(), SendError> {
        on_pub!(&mut self.inner, b => b.send_json_until(value, deadline))
    }

    #[inline]
    fn reserve_until(&mut self, len: usize, deadline: Deadline) -> Result<Reserved<'_>, SendError> {
        let grant = match &mut self.inner {
            PubInner::Shm(p) => Room::Shm(p.reserve_until(len, deadline)?),
            PubInner::Ipc(p) => Room::IpcTopic(p.reserve_until(len, deadline)?),
        };
        Ok(Reserved { grant })
    }

    fn send_batch_until<B: AsRef<[u8]>>(
        &mut self,
        batch: &[B],
        deadline: Deadline,
    ) -> Result<usize, SendError> {
        on_pub!(&mut self.inner, b => b.send_batch_until(batch, deadline))
    }
}

impl RecvCore for EndpointSubscriber {
    type Guard<'a> = Received<'a>;

    #[inline]
    fn recv_until(&mut self, deadline: Deadline) -> Result<Received<'_>, RecvError> {
        let msg = match &mut self.inner {
            SubInner::Shm(s) => Msg::Shm(s.recv_until(deadline)?),
            SubInner::Ipc(s) => Msg::Ipc(s.recv_until(deadline)?),
        };
        Ok(Received { msg })
    }

    #[inline]
    fn recv_into_until(
        &mut self,
        buf: &mut Vec<u8>,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        on_sub!(&mut self.inner, b => b.recv_into_until(buf, deadline))
    }

    fn recv_batch_until<F: FnMut(&[u8])>(
        &mut self,
        max: usize,
        f: &mut F,
        deadline: Deadline,
    ) -> Result<usize, RecvError> {
        on_sub!(&mut self.inner, b => b.recv_batch_until(max, f, deadline))
    }
}
