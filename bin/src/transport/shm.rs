//! `shm`: the library's duplex channel ([`Endpoint`]), one transport over both backends.
//! [`Shm`] lets the library choose (the ring, falling back to ipc-channel exactly as the library
//! does; the report says which backend ran); `ipc_channel.rs` asks for the fallback with the same
//! [`EndpointTransport`].
//!
//! JSON messages are serialised straight into the ring ([`Endpoint::send_json`]) and decoded
//! from the frame while it is still in the ring ([`shmlink::Received::json`]), so `&str` fields
//! borrow from shared memory and a message costs no heap allocation.

use std::marker::PhantomData;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{
    no_batch_form, ChildStdio, JsonMessage, Kind, Listener, Options, Peer, Result, Transport,
};
use crate::Error;
use shmlink::{Backend, Config, Endpoint, OpenError, RecvError};

/// What the child sends first, so that the parent knows it connected.
const HELLO: &[u8] = b"shmlink-hello";
/// How long one wait of the handshake lasts before the peer is checked.
const SLICE: Duration = Duration::from_millis(50);

/// Which backend an [`EndpointTransport`] asks the library for.
pub trait BackendChoice {
    /// The transport's kind.
    const KIND: Kind;
    /// The backend asked for (none: the library's choice).
    const BACKEND: Option<Backend>;
}

/// The library's choice: the ring, or the fallback where the library falls back.
pub struct Chosen;

impl BackendChoice for Chosen {
    const KIND: Kind = Kind::Shm;
    const BACKEND: Option<Backend> = None;
}

/// One end of an endpoint transport.
pub struct EndpointTransport<B> {
    endpoint: Endpoint,
    max: usize,
    backend: PhantomData<B>,
}

/// The `shm` transport.
pub type Shm = EndpointTransport<Chosen>;

/// The created endpoint, waiting for the child.
pub struct EndpointListener<B> {
    endpoint: Endpoint,
    opts: Options,
    backend: PhantomData<B>,
}

impl<B> EndpointTransport<B> {
    fn new(endpoint: Endpoint) -> Self {
        let max = endpoint.max_message();
        EndpointTransport {
            endpoint,
            max,
            backend: PhantomData,
        }
    }
}

impl<B: BackendChoice> Transport for EndpointTransport<B> {
    type Listener = EndpointListener<B>;
    const KIND: Kind = B::KIND;

    fn listen(name: &str, opts: &Options) -> Result<EndpointListener<B>> {
        let endpoint = match B::BACKEND {
            None => {
                let config = Config {
                    capacity: opts.ring_size,
                    wait: opts.wait,
                };
                Endpoint::create(&format!("{name}-shm"), &config)?
            }
            Some(backend) => {
                Endpoint::create_with(&format!("{name}-ipc"), &Config::default(), backend)?
            }
        };
        Ok(EndpointListener {
            endpoint,
            opts: opts.clone(),
            backend: PhantomData,
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<Self> {
        let mut endpoint = connect_endpoint(address, opts, &peer)?;
        if let Some(backend) = B::BACKEND.filter(|&b| b != endpoint.backend()) {
            return Err(Error::InvalidConfig(format!(
                "{address} is a {} channel, not {backend}",
                endpoint.backend()
            )));
        }
        endpoint.send(HELLO)?;
        Ok(Self::new(endpoint))
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

    fn send_batch(&mut self, msgs: &[Vec<u8>]) -> Result<()> {
        if !B::KIND.has_batch() {
            return Err(no_batch_form(B::KIND));
        }
        let mut sent = 0;
        while sent < msgs.len() {
            sent += self.endpoint.send_batch(&msgs[sent..])?;
        }
        Ok(())
    }

    fn recv_batch(&mut self, size: usize, max: usize, read: impl FnMut(&[u8])) -> Result<usize> {
        if !B::KIND.has_batch() {
            return Err(no_batch_form(B::KIND));
        }
        let _ = size;
        Ok(self.endpoint.recv_batch(max, read)?)
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

impl<B: BackendChoice> Listener for EndpointListener<B> {
    type Transport = EndpointTransport<B>;

    fn address(&self) -> String {
        self.endpoint.name().to_owned()
    }

    fn backend(&self) -> &'static str {
        self.endpoint.backend().as_str()
    }

    fn accept(mut self, _stdio: ChildStdio, peer: Peer) -> Result<EndpointTransport<B>> {
        await_hello(&mut self.endpoint, &self.opts, &peer)?;
        Ok(EndpointTransport::new(self.endpoint))
    }
}

/// Connects to the endpoint at `address`, retrying while it is not there yet (until the peer
/// dies or the connect timeout passes). The caller then says [`HELLO`].
fn connect_endpoint(address: &str, opts: &Options, peer: &Peer) -> Result<Endpoint> {
    let deadline = Instant::now() + opts.connect_timeout;
    loop {
        match Endpoint::connect_timeout(address, opts.wait, SLICE) {
            Ok(e) => return Ok(e),
            // Not there yet, or there and not ready within the slice.
            Err(OpenError::NotFound { .. } | OpenError::Timeout { .. })
                if Instant::now() < deadline =>
            {
                peer.check()?
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits on the listening side for the connector's [`HELLO`] (until the peer dies or the
/// connect timeout passes).
fn await_hello(endpoint: &mut Endpoint, opts: &Options, peer: &Peer) -> Result<()> {
    let deadline = Instant::now() + opts.connect_timeout;
    loop {
        match endpoint.recv_timeout(SLICE) {
            Ok(msg) if &msg[..] == HELLO => return Ok(()),
            Ok(_) => return Err(crate::garbled("unexpected handshake message".to_owned())),
            Err(RecvError::Timeout { .. }) => {
                peer.check()?;
                if Instant::now() >= deadline {
                    return Err(Error::Timeout);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}
