//! The client side of a listener: [`connect`] reads the rendezvous file, connects to the
//! server it names and sends its hello, and waits for the answer, saying (by the waiting byte
//! of the lock file) when that answer is late, and trying the next server when its hello was
//! not taken.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::time::{Duration, Instant};

use ipc_channel::ipc;
use ipc_channel::TryRecvError;

use super::lease::open_lock;
use super::{alive, Hello, Reply, Result, CLIENT_CHECK, WAITING_BYTE};
use crate::error::OpenError as Error;
use crate::ipc::rendezvous::{self, Connecting, Published, Serves};
use crate::ipc::{connector_side, IpcDuplex};
use crate::shm::layout::CREATOR_LOCK;
use crate::sys::lock;

/// Connects to the listener `name` (whose rendezvous file says it is one): waits until the
/// server has accepted or refused, at most until `deadline`.
pub(crate) fn connect(name: &str, deadline: Option<Instant>, topic: bool) -> Result<IpcDuplex> {
    let past = |deadline: Option<Instant>| deadline.is_some_and(|d| Instant::now() >= d);
    loop {
        let (pid, server) = match rendezvous::read(name)? {
            Published::Listener {
                pid,
                server,
                serves,
            } => {
                if matches!(serves, Serves::Topic { .. }) != topic {
                    return Err(wrong_kind(name, topic));
                }
                (pid, server)
            }
            // Replaced by a plain channel meanwhile.
            Published::Channel { .. } if !topic => return IpcDuplex::connect_until(name, deadline),
            Published::Channel { .. } => return Err(wrong_kind(name, topic)),
        };
        // A file whose listener died: nothing behind it until a new listener binds.
        if !alive(name)? {
            return Err(Error::NotFound {
                channel: name.into(),
            });
        }
        if let Some(duplex) = attempt(name, pid, &server, deadline, topic)? {
            return Ok(duplex);
        }
        // Not taken: another client got that server, which is being replaced. Read again.
        if past(deadline) {
            return Err(Error::Timeout {
                channel: name.into(),
                waited_for: crate::error::NOT_ACCEPTED,
            });
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What a connect finds under a name served for the other kind: a topic where a channel or
/// listener was wanted (`topic` false), or the reverse.
pub(crate) fn wrong_kind(name: &str, topic: bool) -> Error {
    Error::NotAChannel {
        channel: name.into(),
        reason: if topic {
            "a channel or listener, not a topic (connect to it with Endpoint::connect)".into()
        } else {
            "a topic, not a channel or listener (join it with EndpointSubscriber::connect)".into()
        },
    }
}

/// A client's wait for the server `server` of listener `name`, between two looks.
struct Waiting<'a> {
    name: &'a str,
    server: &'a str,
    pid: u32,
    deadline: Option<Instant>,
    /// The client's own open of the lock file, once its answer is late: it holds the waiting
    /// byte (released when this closes) and asks whether the listener lives.
    lock: Option<File>,
}

impl Waiting<'_> {
    /// How long to wait before the next look.
    fn slice(&self) -> Duration {
        match self.deadline {
            Some(d) => CLIENT_CHECK.min(d.saturating_duration_since(Instant::now())),
            None => CLIENT_CHECK,
        }
    }

    /// Looks after a wait that brought nothing: `Err(Timeout)` past the deadline, `PeerGone`
    /// when the listener died, `Ok(false)` when it publishes another server now (this one will
    /// not answer), else says that this client's answer is late and `Ok(true)`.
    fn still_waiting(&mut self) -> Result<bool> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Error::Timeout {
                channel: self.name.into(),
                waited_for: crate::error::NOT_ACCEPTED,
            });
        }
        if self.lock.is_none() {
            match open_lock(self.name, true) {
                Ok(file) => self.lock = Some(file),
                Err(Error::NotFound { .. }) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        let Some(file) = &self.lock else {
            return Ok(false);
        };
        if !lock::alive(file.as_raw_fd(), CREATOR_LOCK)? {
            return Err(Error::PeerGone {
                channel: self.name.into(),
                pid: self.pid,
            });
        }
        // Held by another waiting client already: it says the same for both.
        let _ = lock::take(file, WAITING_BYTE, false)?;
        Ok(matches!(rendezvous::read(self.name),
            Ok(Published::Listener { server, .. }) if server == self.server))
    }
}

/// One try with the server `server`: `Ok(None)` if it did not take our hello.
fn attempt(
    name: &str,
    pid: u32,
    server: &str,
    deadline: Option<Instant>,
    topic: bool,
) -> Result<Option<IpcDuplex>> {
    let mut waiting = Waiting {
        name,
        server,
        pid,
        deadline,
        lock: None,
    };
    let connecting = match Connecting::<Hello>::start(name, server) {
        Ok(connecting) => connecting,
        Err(Error::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let bootstrap = loop {
        match connecting.wait(waiting.slice()) {
            Ok(Some(bootstrap)) => break bootstrap,
            Ok(None) => {}
            Err(Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        }
        if !waiting.still_waiting()? {
            return Ok(None);
        }
    };
    let (halves, link) = connector_side()?;
    // Made before the answer comes, so that giving up says goodbye (a clean close) to a server
    // that accepted us after all.
    let duplex = IpcDuplex::connector(name, link, pid);
    let (reply, answer) = ipc::channel::<Reply>()?;
    if bootstrap.send(Hello::Client { halves, reply }).is_err() {
        return Ok(None);
    }
    drop(bootstrap);
    loop {
        match answer.try_recv_timeout(waiting.slice()) {
            Ok(Reply::Accepted) => return Ok(Some(duplex)),
            Ok(Reply::Refused { limit }) => {
                let channel = name.into();
                let limit = usize::try_from(limit).unwrap_or(usize::MAX);
                return Err(if topic {
                    Error::TooManySubscribers { channel, limit }
                } else {
                    Error::TooManyClients { channel, limit }
                });
            }
            Err(TryRecvError::Empty) => {}
            // The server went without answering: our hello was not taken (or the listener
            // died, which the caller finds out).
            Err(TryRecvError::IpcError(_)) => return Ok(None),
        }
        if !waiting.still_waiting()? {
            return Ok(None);
        }
    }
}
