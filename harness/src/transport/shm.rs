//! `shm`: the shmlink duplex channel, through [`Endpoint`] so that it falls back to ipc-channel
//! exactly as the library does (the report says which backend ran).
//!
//! JSON messages are serialised straight into the ring ([`Endpoint::send_json`]) and decoded
//! from the frame while it is still in the ring ([`shmlink::Received::json`]), so `&str` fields
//! borrow from shared memory and a message costs no heap allocation.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{ChildStdio, JsonMessage, Kind, Listener, Options, Peer, Result, Transport};
use crate::Error;
use shmlink::{Backend, Config, Endpoint, OpenError, RecvError};

/// What the child sends first, so that the parent knows it connected.
pub(super) const HELLO: &[u8] = b"shmlink-hello";
/// How long one wait of the handshake lasts before the peer is checked.
const SLICE: Duration = Duration::from_millis(50);

/// One end of the shm transport.
pub struct Shm {
    endpoint: Endpoint,
    max: usize,
}

/// The created channel, waiting for the child.
pub struct ShmListener {
    endpoint: Endpoint,
    opts: Options,
}

impl Shm {
    /// The backend the library chose (ipc-channel when the fallback was forced or needed).
    pub fn backend(&self) -> Backend {
        self.endpoint.backend()
    }

    /// The underlying endpoint.
    pub fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }
}

impl Transport for Shm {
    type Listener = ShmListener;
    const KIND: Kind = Kind::Shm;

    fn listen(name: &str, opts: &Options) -> Result<ShmListener> {
        let config = Config {
            capacity: opts.ring_size,
            wait: opts.wait,
        };
        let endpoint = Endpoint::create(&format!("{name}-shm"), &config)?;
        Ok(ShmListener {
            endpoint,
            opts: opts.clone(),
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<Shm> {
        let mut endpoint = connect_endpoint(address, opts, &peer)?;
        endpoint.send(HELLO)?;
        let max = endpoint.max_message();
        Ok(Shm { endpoint, max })
    }

    fn max_message(&self) -> usize {
        self.max
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        if msg.len() > self.max {
            return Err(Error::TooLarge {
                len: msg.len(),
                max: self.max,
            });
        }
        Ok(self.endpoint.send(msg)?)
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        Ok(self.endpoint.send_json(value)?)
    }

    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let msg = self.endpoint.recv()?;
        read(&msg)
    }

    fn echo(&mut self, buf: &mut Vec<u8>) -> Result<()> {
        match self.endpoint.as_channel() {
            // Send straight from the received frame (or reassembled message) into the other
            // ring: one copy per echo instead of two.
            Some(channel) => {
                let (tx, rx) = channel.split();
                let msg = rx.recv()?;
                Ok(tx.send(&msg)?)
            }
            None => {
                let len = self.recv_with(|bytes| {
                    buf.clear();
                    buf.extend_from_slice(bytes);
                    Ok(bytes.len())
                })?;
                self.send(&buf[..len])
            }
        }
    }

    fn recv_json<M: JsonMessage, R>(
        &mut self,
        read: impl for<'a> FnOnce(M::Of<'a>) -> Result<R>,
    ) -> Result<R> {
        let msg = self.endpoint.recv()?;
        let value = msg.json::<M::Of<'_>>()?;
        read(value)
    }
}

impl ShmListener {
    /// The backend the library chose.
    pub fn backend(&self) -> Backend {
        self.endpoint.backend()
    }
}

impl Listener for ShmListener {
    type Transport = Shm;

    fn address(&self) -> String {
        self.endpoint.name().to_owned()
    }

    fn backend(&self) -> &'static str {
        self.endpoint.backend().as_str()
    }

    fn accept(mut self, _stdio: ChildStdio, peer: Peer) -> Result<Shm> {
        await_hello(&mut self.endpoint, &self.opts, &peer)?;
        let max = self.endpoint.max_message();
        Ok(Shm {
            endpoint: self.endpoint,
            max,
        })
    }
}

/// Connects to the endpoint at `address`, retrying while it is not there yet (until the peer
/// dies or the connect timeout passes). The caller then says [`HELLO`].
pub(super) fn connect_endpoint(address: &str, opts: &Options, peer: &Peer) -> Result<Endpoint> {
    let deadline = Instant::now() + opts.connect_timeout;
    loop {
        match Endpoint::connect_timeout(address, opts.wait, SLICE) {
            Ok(e) => return Ok(e),
            // Not there yet, or there and not ready within the slice.
            Err(OpenError::NotFound(_) | OpenError::Timeout) if Instant::now() < deadline => {
                peer.check()?
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits on the listening side for the connector's [`HELLO`] (until the peer dies or the
/// connect timeout passes).
pub(super) fn await_hello(endpoint: &mut Endpoint, opts: &Options, peer: &Peer) -> Result<()> {
    let deadline = Instant::now() + opts.connect_timeout;
    loop {
        match endpoint.recv_timeout(SLICE) {
            Ok(msg) if &msg[..] == HELLO => return Ok(()),
            Ok(_) => return Err(crate::garbled("unexpected handshake message".to_owned())),
            Err(RecvError::Timeout) => {
                peer.check()?;
                if Instant::now() >= deadline {
                    return Err(Error::Timeout);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}
