//! `ipc-channel`: the library's fallback ([`IpcDuplex`]), a bytes channel bootstrapped with
//! `IpcOneShotServer`. Bytes go through `IpcBytesSender` as they are, so there is no second
//! serialisation; each received message is one heap buffer (the channel allocates it).

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use shmlink::testing::{IpcDuplex, FALLBACK_MAX_MESSAGE as MAX_MESSAGE};
use shmlink::Error;

const SLICE: Duration = Duration::from_millis(50);

/// One end of the ipc-channel transport.
pub struct IpcChannel {
    duplex: IpcDuplex,
}

/// The published one-shot server, waiting for the child.
pub struct IpcChannelListener {
    duplex: IpcDuplex,
    opts: Options,
}

impl Transport for IpcChannel {
    type Listener = IpcChannelListener;
    const KIND: Kind = Kind::IpcChannel;

    fn listen(name: &str, opts: &Options) -> Result<IpcChannelListener> {
        let duplex = IpcDuplex::create(&format!("{name}-ipc"))?;
        Ok(IpcChannelListener {
            duplex,
            opts: opts.clone(),
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<IpcChannel> {
        let deadline = Instant::now() + opts.connect_timeout;
        loop {
            match IpcDuplex::connect_timeout(address, SLICE) {
                Ok(duplex) => return Ok(IpcChannel { duplex }),
                Err(Error::Timeout) if Instant::now() < deadline => peer.check()?,
                Err(e) => return Err(e),
            }
        }
    }

    fn max_message(&self) -> usize {
        MAX_MESSAGE
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        if msg.len() > MAX_MESSAGE {
            return Err(Error::TooLarge {
                len: msg.len(),
                max: MAX_MESSAGE,
            });
        }
        self.duplex.send(msg)
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.duplex.send_json(value)
    }

    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        let bytes = self.duplex.recv()?;
        read(bytes)
    }
}

impl Listener for IpcChannelListener {
    type Transport = IpcChannel;

    fn address(&self) -> String {
        self.duplex.name().to_owned()
    }

    fn accept(mut self, _stdio: ChildStdio, peer: Peer) -> Result<IpcChannel> {
        let deadline = Instant::now() + self.opts.connect_timeout;
        loop {
            match self.duplex.wait_connected(Some(SLICE)) {
                Ok(()) => {
                    return Ok(IpcChannel {
                        duplex: self.duplex,
                    })
                }
                Err(Error::Timeout) => {
                    peer.check()?;
                    if Instant::now() >= deadline {
                        return Err(Error::Timeout);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}
