//! `ipc-channel`: the library's fallback backend, chosen explicitly with
//! [`Endpoint::create_with`] and [`Backend::IpcChannel`]. Bytes go through ipc-channel's bytes
//! channels as they are, so there is no second serialisation; each received message is one heap
//! buffer (the channel allocates it).

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use shmlink::{Backend, Config, Endpoint, Error};

/// What the child sends first, so that the parent knows it connected.
const HELLO: &[u8] = b"shmlink-hello";
/// How long one wait of the handshake lasts before the peer is checked.
const SLICE: Duration = Duration::from_millis(50);

/// One end of the ipc-channel transport.
pub struct IpcChannel {
    endpoint: Endpoint,
    max: usize,
}

/// The published channel, waiting for the child.
pub struct IpcChannelListener {
    endpoint: Endpoint,
    opts: Options,
}

impl Transport for IpcChannel {
    type Listener = IpcChannelListener;
    const KIND: Kind = Kind::IpcChannel;

    fn listen(name: &str, opts: &Options) -> Result<IpcChannelListener> {
        let endpoint = Endpoint::create_with(
            &format!("{name}-ipc"),
            &Config::default(),
            Backend::IpcChannel,
        )?;
        Ok(IpcChannelListener {
            endpoint,
            opts: opts.clone(),
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<IpcChannel> {
        let deadline = Instant::now() + opts.connect_timeout;
        let mut endpoint = loop {
            match Endpoint::connect_timeout(address, opts.wait, SLICE) {
                Ok(e) => break e,
                Err(Error::NotFound(_) | Error::NotReady(_)) if Instant::now() < deadline => {
                    peer.check()?
                }
                Err(e) => return Err(e),
            }
        };
        if endpoint.backend() != Backend::IpcChannel {
            return Err(Error::InvalidConfig(format!(
                "{address} is a {} channel, not ipc-channel",
                endpoint.backend()
            )));
        }
        endpoint.send(HELLO)?;
        let max = endpoint.max_message();
        Ok(IpcChannel { endpoint, max })
    }

    fn max_message(&self) -> usize {
        self.max
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        self.endpoint.send(msg)
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.endpoint.send_json(value)
    }

    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let msg = self.endpoint.recv()?;
        read(&msg)
    }
}

impl Listener for IpcChannelListener {
    type Transport = IpcChannel;

    fn address(&self) -> String {
        self.endpoint.name().to_owned()
    }

    fn accept(mut self, _stdio: ChildStdio, peer: Peer) -> Result<IpcChannel> {
        let deadline = Instant::now() + self.opts.connect_timeout;
        loop {
            match self.endpoint.recv_timeout(SLICE) {
                Ok(msg) if &msg[..] == HELLO => break,
                Ok(_) => return Err(Error::Corrupt("unexpected handshake message".to_owned())),
                Err(Error::Timeout) => {
                    peer.check()?;
                    if Instant::now() >= deadline {
                        return Err(Error::Timeout);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let max = self.endpoint.max_message();
        Ok(IpcChannel {
            endpoint: self.endpoint,
            max,
        })
    }
}
