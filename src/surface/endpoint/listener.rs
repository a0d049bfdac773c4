//! [`EndpointListener`]: one server, many clients, on either backend.

use std::time::Duration;

use super::{fallback_only, mapping_unavailable, Endpoint, Inner, Lease};
use crate::error::OpenError;
use crate::ipc::listener::{self as ipc_listener, IpcListener};
use crate::service::listener::DEFAULT_MAX_CLIENTS;
use crate::service::Listener;
use crate::shm::channel::Config;
use crate::wait::Deadline;

use super::Backend;

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// One server, many clients, on either backend: each client that connects with
/// [`Endpoint::connect`] to the listener's name gets its own duplex connection, which
/// [`accept`](EndpointListener::accept) hands to the server as an [`Endpoint`].
///
/// On shared memory this is a [`Listener`] (each accepted endpoint wraps a [`Connection`](crate::Connection)).
/// On the fallback an accept thread publishes the listener in its rendezvous file, answers
/// each client that connects, and queues its connection for `accept`. Both behave alike:
///
/// * at most [`max_clients`](EndpointListener::max_clients) connections live at once: past
///   that, [`Endpoint::connect`] fails with [`OpenError::TooManyClients`]; dropping an accepted
///   endpoint frees its place;
/// * a client that closes gives [`RecvError::Disconnected`](crate::RecvError::Disconnected)
///   on the server's endpoint, one that dies gives
///   [`RecvError::PeerGone`](crate::RecvError::PeerGone); a server that dies gives `PeerGone`
///   to every client;
/// * a live listener's name cannot be bound again ([`OpenError::AlreadyExists`]); the name of one
///   whose process died is reclaimed by the next bind. Dropping the listener removes its name.
///
/// ```
/// # let name = format!("doc-endpoint-listener-{}", std::process::id());
/// use shmlink::{Backend, Config, Endpoint, EndpointListener, WaitStrategy};
/// // Chosen explicitly here, so that the example runs the same everywhere.
/// let listener = EndpointListener::bind_with(&name, &Config::default(), Backend::IpcChannel, 2)?;
/// let server = std::thread::spawn(move || -> shmlink::Result<()> {
///     for _ in 0..2 {
///         let mut client = listener.accept()?;
///         let request = client.recv()?.to_vec();
///         client.send(&request)?;
///     }
///     Ok(())
/// });
/// for word in ["one", "two"] {
///     let mut client = Endpoint::connect_timeout(&name, WaitStrategy::Block, std::time::Duration::from_secs(5))?;
///     assert_eq!(client.backend(), Backend::IpcChannel);
///     client.send(word.as_bytes())?;
///     assert_eq!(&*client.recv()?, word.as_bytes());
/// }
/// server.join().expect("server thread")?;
/// # Ok::<(), shmlink::Error>(())
/// ```
#[derive(Debug)]
pub struct EndpointListener {
    inner: ListenerInner,
}

// Shared between threads like a `Listener`: `accept` takes `&self`.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<EndpointListener>();
};

#[derive(Debug)]
enum ListenerInner {
    Shm(Listener),
    Ipc(IpcListener),
}

impl EndpointListener {
    /// Makes the listener `name` with room for [`DEFAULT_MAX_CLIENTS`] concurrent clients: a
    /// shared-memory [`Listener`] (connections with rings of `config.capacity` bytes, the
    /// server's ends waiting with `config.wait`), or the fallback, by the rule of
    /// [`Endpoint::create`].
    pub fn bind(name: &str, config: &Config) -> Result<EndpointListener> {
        EndpointListener::bind_with_limit(name, config, DEFAULT_MAX_CLIENTS)
    }

    /// Like [`bind`](EndpointListener::bind), admitting at most `max_clients` (1 to
    /// [`MAX_CLIENTS`](crate::MAX_CLIENTS)) clients at once.
    pub fn bind_with_limit(
        name: &str,
        config: &Config,
        max_clients: usize,
    ) -> Result<EndpointListener> {
        if fallback_only() {
            return EndpointListener::bind_with(name, config, Backend::IpcChannel, max_clients);
        }
        match Listener::bind_with_limit(name, config, max_clients) {
            Ok(listener) => Ok(EndpointListener {
                inner: ListenerInner::Shm(listener),
            }),
            Err(e) if mapping_unavailable(&e) => {
                EndpointListener::bind_with(name, config, Backend::IpcChannel, max_clients)
                    .map_err(|_| e)
            }
            Err(e) => Err(e),
        }
    }

    /// Makes the listener `name` on the given backend, admitting at most `max_clients`
    /// clients at once, whatever the environment says. The fallback ignores `config`.
    pub fn bind_with(
        name: &str,
        config: &Config,
        backend: Backend,
        max_clients: usize,
    ) -> Result<EndpointListener> {
        let inner = match backend {
            Backend::Shm => {
                ListenerInner::Shm(Listener::bind_with_limit(name, config, max_clients)?)
            }
            Backend::IpcChannel => ListenerInner::Ipc(IpcListener::bind(name, max_clients)?),
        };
        Ok(EndpointListener { inner })
    }

    /// The listener's name.
    pub fn name(&self) -> &str {
        match &self.inner {
            ListenerInner::Shm(l) => l.name(),
            ListenerInner::Ipc(l) => l.name(),
        }
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        match &self.inner {
            ListenerInner::Shm(_) => Backend::Shm,
            ListenerInner::Ipc(_) => Backend::IpcChannel,
        }
    }

    /// Most clients admitted at once.
    pub fn max_clients(&self) -> usize {
        match &self.inner {
            ListenerInner::Shm(l) => l.max_clients(),
            ListenerInner::Ipc(l) => l.max_clients(),
        }
    }

    /// The shared-memory [`Listener`] underneath, when that is the backend (to wait on it
    /// with a [`Selector`](crate::Selector)).
    pub fn as_listener(&self) -> Option<&Listener> {
        match &self.inner {
            ListenerInner::Shm(l) => Some(l),
            ListenerInner::Ipc(_) => None,
        }
    }

    /// Waits for the next client.
    pub fn accept(&self) -> Result<Endpoint> {
        match &self.inner {
            ListenerInner::Shm(l) => l.accept().map(Endpoint::from),
            ListenerInner::Ipc(l) => l.accept(None).map(accepted),
        }
    }

    /// Like [`accept`](EndpointListener::accept), giving up with [`OpenError::Timeout`] after
    /// `timeout`.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Endpoint> {
        match &self.inner {
            ListenerInner::Shm(l) => l.accept_timeout(timeout).map(Endpoint::from),
            ListenerInner::Ipc(l) => l.accept(Deadline::after(timeout).instant()).map(accepted),
        }
    }

    /// A client that is waiting now, else [`OpenError::NoClient`].
    pub fn try_accept(&self) -> Result<Endpoint> {
        match &self.inner {
            ListenerInner::Shm(l) => l.try_accept().map(Endpoint::from),
            ListenerInner::Ipc(l) => l.try_accept().map(accepted),
        }
    }
}

/// The endpoint of a connection the fallback listener accepted.
fn accepted((duplex, lease): ipc_listener::Accepted) -> Endpoint {
    Endpoint {
        inner: Inner::Ipc(duplex),
        _lease: Some(Lease::Ipc(lease)),
    }
}
