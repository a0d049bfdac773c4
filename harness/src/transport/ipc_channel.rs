//! `ipc-channel`: the library's fallback backend, chosen explicitly with
//! [`Endpoint::create_with`] and [`Backend::IpcChannel`]. Bytes go through ipc-channel's bytes
//! channels as they are, so there is no second serialisation; each received message is one heap
//! buffer (the channel allocates it).

use serde::Serialize;

use super::shm::{await_hello, connect_endpoint, HELLO};
use super::{ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use crate::Error;
use shmlink::{Backend, Config, Endpoint};

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
        let mut endpoint = connect_endpoint(address, opts, &peer)?;
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
        Ok(self.endpoint.send(msg)?)
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        Ok(self.endpoint.send_json(value)?)
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
        await_hello(&mut self.endpoint, &self.opts, &peer)?;
        let max = self.endpoint.max_message();
        Ok(IpcChannel {
            endpoint: self.endpoint,
            max,
        })
    }
}
