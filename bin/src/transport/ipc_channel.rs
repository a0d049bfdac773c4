//! `ipc-channel`: the library's duplex channel ([`shmlink::Endpoint`]) with the ipc-channel
//! backend asked for ([`Backend::IpcChannel`]), whose bytes go through ipc-channel's bytes
//! channels as they are, one heap buffer per received message. The same transport as `shm`
//! ([`EndpointTransport`]), with the backend chosen.

use super::shm::{BackendChoice, EndpointTransport};
use super::Kind;
use shmlink::Backend;

/// The ipc-channel backend, always.
pub struct Fallback;

impl BackendChoice for Fallback {
    const KIND: Kind = Kind::IpcChannel;
    const BACKEND: Option<Backend> = Some(Backend::IpcChannel);
}

/// The `ipc-channel` transport.
pub type IpcChannel = EndpointTransport<Fallback>;
