//! [`Endpoint`]: the shared-memory [`Channel`] when a mapping can be made, the ipc-channel
//! fallback ([`IpcDuplex`]) when it cannot, behind one send / receive API.

use std::fmt;
use std::ops::Deref;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::fallback::{self, IpcDuplex};
use crate::{Channel, Config, Error, ReadGuard, WaitStrategy};

type Result<T, E = Error> = std::result::Result<T, E>;

/// Which backend an [`Endpoint`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The lock-free ring in a named shared-memory mapping.
    Shm,
    /// The ipc-channel fallback.
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

/// One end of a duplex channel on whichever backend could be used.
///
/// ```no_run
/// # fn main() -> Result<(), shmlink::Error> {
/// use shmlink::{Config, Endpoint};
/// let mut server = Endpoint::create("demo", &Config::default())?;
/// println!("running on {}", server.backend());
/// let msg = server.recv()?;
/// assert_eq!(&msg[..], b"hello");
/// # Ok(()) }
/// ```
// The shared-memory variant is the hot path: it stays inline rather than behind a box.
#[allow(clippy::large_enum_variant)]
pub enum Endpoint {
    /// On the shared-memory ring.
    Shm(Channel),
    /// On the ipc-channel fallback.
    IpcChannel(IpcDuplex),
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("backend", &self.backend())
            .field("name", &self.name())
            .finish()
    }
}

/// A received message: a frame still in the ring (released on drop) or the fallback's buffer.
pub enum Received<'a> {
    /// A frame in the shared-memory ring.
    Shm(ReadGuard<'a>),
    /// A message the fallback received.
    Bytes(&'a [u8]),
}

impl Deref for Received<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Received::Shm(guard) => guard,
            Received::Bytes(bytes) => bytes,
        }
    }
}

impl<'a> Received<'a> {
    /// Decodes the message as JSON; `&str` fields may borrow from it.
    pub fn json<T: Deserialize<'a>>(&'a self) -> Result<T> {
        match self {
            Received::Shm(guard) => guard.json(),
            Received::Bytes(bytes) => Ok(serde_json::from_slice(bytes)?),
        }
    }
}

/// Errors after which creating a mapping will not work here: use the fallback.
fn mapping_unavailable(e: &Error) -> bool {
    matches!(e, Error::Io(_))
}

impl Endpoint {
    /// Creates the channel `name`: a shared-memory ring, or the ipc-channel fallback when no
    /// mapping can be made (an operating-system error) or the fallback is forced
    /// (the `SHMLINK_FORCE_FALLBACK` environment variable or the `force-fallback` feature).
    pub fn create(name: &str, config: &Config) -> Result<Endpoint> {
        if fallback::forced() {
            return IpcDuplex::create(name).map(Endpoint::IpcChannel);
        }
        match Channel::create(name, config) {
            Ok(channel) => Ok(Endpoint::Shm(channel)),
            Err(e) if mapping_unavailable(&e) => IpcDuplex::create(name)
                .map(Endpoint::IpcChannel)
                .map_err(|_| e),
            Err(e) => Err(e),
        }
    }

    /// Connects to the channel `name` on whichever backend its creator used.
    /// `Err(NotFound)` or `Err(NotReady)` when it is not there (yet).
    pub fn connect(name: &str, wait: WaitStrategy) -> Result<Endpoint> {
        if fallback::forced() {
            if let Ok(duplex) = IpcDuplex::connect(name) {
                return Ok(Endpoint::IpcChannel(duplex));
            }
        }
        match Channel::connect(name, wait) {
            Ok(channel) => Ok(Endpoint::Shm(channel)),
            Err(e @ (Error::NotFound(_) | Error::NotReady(_) | Error::Io(_))) => {
                match IpcDuplex::connect(name) {
                    Ok(duplex) => Ok(Endpoint::IpcChannel(duplex)),
                    Err(Error::NotFound(_)) => Err(e),
                    Err(other) => Err(other),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// [`Endpoint::connect`], retried while the channel is not there yet, for at most
    /// `timeout` (then `Err(Timeout)`).
    pub fn connect_timeout(name: &str, wait: WaitStrategy, timeout: Duration) -> Result<Endpoint> {
        let deadline = Instant::now() + timeout;
        loop {
            match Endpoint::connect(name, wait) {
                Err(Error::NotFound(_) | Error::NotReady(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(Error::NotFound(_) | Error::NotReady(_)) => return Err(Error::Timeout),
                other => return other,
            }
        }
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        match self {
            Endpoint::Shm(_) => Backend::Shm,
            Endpoint::IpcChannel(_) => Backend::IpcChannel,
        }
    }

    /// The channel's name.
    pub fn name(&self) -> &str {
        match self {
            Endpoint::Shm(c) => c.name(),
            Endpoint::IpcChannel(d) => d.name(),
        }
    }

    /// Largest message [`Endpoint::send`] accepts.
    pub fn max_message(&self) -> usize {
        match self {
            Endpoint::Shm(c) => c.max_message(),
            Endpoint::IpcChannel(d) => d.max_message(),
        }
    }

    /// Sends one message, waiting for room.
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            Endpoint::Shm(c) => c.send(bytes),
            Endpoint::IpcChannel(d) => d.send(bytes),
        }
    }

    /// Sends one message if there is room now (`Err(Full)` otherwise). The fallback has no
    /// notion of full and always sends.
    pub fn try_send(&mut self, bytes: &[u8]) -> Result<()> {
        match self {
            Endpoint::Shm(c) => c.try_send(bytes),
            Endpoint::IpcChannel(d) => d.send(bytes),
        }
    }

    /// Serialises `value` as JSON and sends it (in place in the ring on shared memory).
    pub fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        match self {
            Endpoint::Shm(c) => c.send_json(value),
            Endpoint::IpcChannel(d) => d.send_json(value),
        }
    }

    /// Waits for one message.
    pub fn recv(&mut self) -> Result<Received<'_>> {
        match self {
            Endpoint::Shm(c) => c.recv().map(Received::Shm),
            Endpoint::IpcChannel(d) => d.recv().map(Received::Bytes),
        }
    }

    /// Waits at most `timeout` for one message.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Received<'_>> {
        match self {
            Endpoint::Shm(c) => c.recv_timeout(timeout).map(Received::Shm),
            Endpoint::IpcChannel(d) => d.recv_timeout(timeout).map(Received::Bytes),
        }
    }

    /// One message if one is waiting now, else `Err(Empty)`.
    pub fn try_recv(&mut self) -> Result<Received<'_>> {
        match self {
            Endpoint::Shm(c) => c.try_recv().map(Received::Shm),
            Endpoint::IpcChannel(d) => d.try_recv().map(Received::Bytes),
        }
    }

    /// Waits for one message and decodes it as JSON into an owned value.
    pub fn recv_json<T: DeserializeOwned>(&mut self) -> Result<T> {
        let msg = self.recv()?;
        Ok(serde_json::from_slice(&msg)?)
    }
}
