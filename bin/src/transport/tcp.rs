//! `tcp`: a TCP connection, length-prefixed frames. `TCP_NODELAY` is set where a message waits
//! for its answer ([`Options::tcp_nodelay`]: ping-pong, sweep); a one-way stream leaves Nagle's
//! algorithm on, so that a sender that runs ahead fills segments instead of paying one per
//! message.
//!
//! The parent binds [`Options::tcp_addr`] (`127.0.0.1:0` by default: loopback, any free port)
//! and tells the child the address it got. Bind another address (for example `0.0.0.0:7000`)
//! and run the child on another host to measure a real network.

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;

use serde::Serialize;

use super::framed::{self, set_socket_buffers, Framed};
use super::{poll_until, ChildStdio, Kind, Listener, Options, Peer, Result, Transport};
use crate::Error;

/// One end of the TCP transport.
pub struct Tcp {
    framed: Framed<TcpStream, TcpStream>,
}

/// The bound TCP listener, waiting for the child.
pub struct TcpListenerSide {
    listener: TcpListener,
    opts: Options,
}

impl Tcp {
    fn from_stream(stream: TcpStream, opts: &Options) -> Result<Tcp> {
        stream.set_nodelay(opts.tcp_nodelay)?;
        set_socket_buffers(stream.as_raw_fd(), opts.ring_size)?;
        let reader = stream.try_clone()?;
        Ok(Tcp {
            framed: Framed::new(reader, stream, framed::max_message(opts)),
        })
    }
}

impl Transport for Tcp {
    type Listener = TcpListenerSide;
    const KIND: Kind = Kind::Tcp;

    fn listen(_name: &str, opts: &Options) -> Result<TcpListenerSide> {
        let listener = TcpListener::bind(opts.tcp_addr.as_str())?;
        listener.set_nonblocking(true)?;
        Ok(TcpListenerSide {
            listener,
            opts: opts.clone(),
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<Tcp> {
        let addrs: Vec<_> = address.to_socket_addrs()?.collect();
        let stream = poll_until(peer, opts.connect_timeout, || {
            match TcpStream::connect(&addrs[..]) {
                Ok(s) => Ok(Some(s)),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(None),
                Err(e) => Err(Error::Io(e)),
            }
        })?;
        Tcp::from_stream(stream, opts)
    }

    framed_methods!();
}

impl Listener for TcpListenerSide {
    type Transport = Tcp;

    fn address(&self) -> String {
        match self.listener.local_addr() {
            // A wildcard bind is reached through loopback by a local child.
            Ok(addr) if addr.ip().is_unspecified() => {
                let ip = if addr.is_ipv4() { "127.0.0.1" } else { "::1" };
                std::net::SocketAddr::new(ip.parse().unwrap_or(addr.ip()), addr.port()).to_string()
            }
            Ok(addr) => addr.to_string(),
            Err(_) => self.opts.tcp_addr.clone(),
        }
    }

    fn accept(self, _stdio: ChildStdio, peer: Peer) -> Result<Tcp> {
        let stream = poll_until(peer, self.opts.connect_timeout, || {
            match self.listener.accept() {
                Ok((s, _)) => Ok(Some(s)),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
                Err(e) => Err(Error::Io(e)),
            }
        })?;
        stream.set_nonblocking(false)?;
        Tcp::from_stream(stream, &self.opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(opts: &Options) -> (Tcp, Tcp) {
        let listener = match Tcp::listen("nodelay", opts) {
            Ok(l) => l,
            Err(e) => panic!("listen: {e}"),
        };
        let address = listener.address();
        let connecting = {
            let opts = opts.clone();
            std::thread::spawn(move || Tcp::connect(&address, &opts, Peer::unknown()))
        };
        let accepted = listener.accept(ChildStdio::default(), Peer::unknown());
        let connected = connecting.join().ok().and_then(|r| r.ok());
        match (accepted, connected) {
            (Ok(a), Some(c)) => (a, c),
            (a, c) => panic!("no connection: {:?} / {}", a.err(), c.is_some()),
        }
    }

    #[test]
    fn nagle_stays_on_for_a_stream_and_off_for_round_trips() {
        for nodelay in [false, true] {
            let opts = Options {
                tcp_nodelay: nodelay,
                ..Options::default()
            };
            let (a, c) = pair(&opts);
            for end in [&a, &c] {
                assert_eq!(end.framed.writer().nodelay().ok(), Some(nodelay));
            }
        }
    }
}
