//! The duplex channel: two rings in one named mapping, one per direction.
//!
//! [`Channel::create`] makes the mapping and owns the name; [`Channel::connect`] finds it by name.
//! Ring 0 carries frames from the creator to the connector, ring 1 the other way.

mod open;
mod peer;
use peer::PeerWatch;
mod probe;
mod recv;
mod send;
#[cfg(test)]
mod tests;

pub use recv::RecvHalf;
pub use send::{SendHalf, SliceWriter};

use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::Result;
use crate::layout::{PeerInfo, SegmentHeader, MODE_BLOCK, MODE_SPIN, PEER_CLOSED, PEER_PRESENT};
use crate::mapping::Mapping;
use crate::ring::{ReadGuard, WriteGrant};
use crate::wait::{self, WaitStrategy};

/// Default for [`Channel::max_message`]: 1 GiB.
pub const DEFAULT_MAX_MESSAGE: usize = 1 << 30;

/// How a channel is made.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes in each direction's ring: a power of two from 256 B to 2 GiB. A single frame can
    /// carry up to `capacity / 2 - 72` bytes.
    pub capacity: usize,
    /// How this endpoint waits for data or room.
    pub wait: WaitStrategy,
}

impl Default for Config {
    /// 1 MiB per direction, [`WaitStrategy::Block`].
    fn default() -> Self {
        Config {
            capacity: 1 << 20,
            wait: WaitStrategy::Block,
        }
    }
}

impl Config {
    /// A default configuration with another wait strategy.
    pub fn with_wait(wait: WaitStrategy) -> Self {
        Config {
            wait,
            ..Config::default()
        }
    }
}

/// Which end of a channel this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Made the mapping and owns its name.
    Creator,
    /// Found the mapping by name.
    Connector,
}

/// One end of a duplex shared-memory channel.
///
/// Both ends can send and receive. Sending copies the bytes into the ring (or lets you write
/// them in place with [`reserve`](Channel::reserve) / [`send_json`](Channel::send_json));
/// receiving hands out a [`ReadGuard`] that borrows the frame in place until it is dropped.
///
/// ```no_run
/// use shmlink::{Channel, Config};
/// let mut server = Channel::create("demo", &Config::default())?;
/// // ... in another process: let mut client = Channel::connect("demo", Default::default())?;
/// let request = server.recv()?;
/// println!("got {} bytes", request.len());
/// # Ok::<(), shmlink::Error>(())
/// ```
pub struct Channel {
    sender: SendHalf,
    receiver: RecvHalf,
    me: NonNull<PeerInfo>,
    wait: WaitStrategy,
    role: Role,
    name: String,
    // Declared last: dropped after the ring ends that point into it. Only kept alive.
    _map: Mapping,
}

// SAFETY: every pointer in a channel points into `map`, which moves with it; cross-process
// access goes through atomics and the frame protocol. A channel is not `Sync`: each end is
// single-producer and single-consumer.
unsafe impl Send for Channel {}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("wait", &self.wait)
            .field("capacity", &self.capacity())
            .finish()
    }
}

pub(crate) fn mode_of(wait: WaitStrategy) -> u32 {
    match wait {
        WaitStrategy::Block => MODE_BLOCK,
        WaitStrategy::Spin | WaitStrategy::SpinYield => MODE_SPIN,
    }
}

fn segment(map: &Mapping) -> &SegmentHeader {
    // SAFETY: callers only use this on mappings at least HEADER_SIZE bytes long (checked at
    // create/open); the mapping is page-aligned and `SegmentHeader` is all atomics, valid for
    // any bit pattern.
    unsafe { map.ptr().cast::<SegmentHeader>().as_ref() }
}

impl Channel {
    /// The name given at create / connect time (or the file path).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which end this is.
    pub fn role(&self) -> Role {
        self.role
    }

    /// How this end waits.
    pub fn wait_strategy(&self) -> WaitStrategy {
        self.wait
    }

    /// Bytes in each ring.
    pub fn capacity(&self) -> usize {
        self.sender.tx.capacity()
    }

    /// Largest payload one frame carries (`capacity / 2 - 72`).
    pub fn max_frame(&self) -> usize {
        self.sender.tx.max_len()
    }

    /// True while the peer endpoint is connected and its process runs.
    pub fn is_peer_connected(&mut self) -> bool {
        let peer = &mut self.receiver.peer;
        peer.state() == PEER_PRESENT && peer.check().is_ok()
    }

    /// The peer's process id, once it has connected.
    pub fn peer_pid(&mut self) -> Option<u32> {
        let _ = self.receiver.peer.check();
        self.receiver.peer.id.map(|id| id.pid)
    }

    /// Splits the channel into its sending and receiving halves, which can be used from two
    /// threads at once (for example with `std::thread::scope`).
    ///
    /// A [`Channel`] cannot receive while it is blocked in [`send`](Channel::send); when both
    /// peers may send messages larger than the ring at the same time, each needs a thread that
    /// keeps receiving, or the two sends wait on each other forever.
    pub fn split(&mut self) -> (&mut SendHalf, &mut RecvHalf) {
        (&mut self.sender, &mut self.receiver)
    }

    /// Largest message [`send`](Channel::send) accepts and [`recv`](Channel::recv) reassembles
    /// (default 1 GiB). Messages up to [`max_frame`](Channel::max_frame) travel in one frame;
    /// larger ones are split into fragments.
    pub fn max_message(&self) -> usize {
        self.sender.max_message
    }

    /// Sets [`max_message`](Channel::max_message) for both directions. The receiving side
    /// refuses (as [`Error::Corrupt`](crate::Error::Corrupt)) a fragmented message announced larger than its own limit.
    pub fn set_max_message(&mut self, max: usize) {
        self.sender.max_message = max;
        self.receiver.max_message = max;
    }

    /// Reserves room for a frame of `len` bytes (at most [`max_frame`](Channel::max_frame)),
    /// waiting for the peer to make room if needed.
    #[inline]
    pub fn reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.sender.reserve(len)
    }

    /// Reserves room for a frame of `len` bytes if there is room now ([`Error::Full`](crate::Error::Full) if not).
    #[inline]
    pub fn try_reserve(&mut self, len: usize) -> Result<WriteGrant<'_>> {
        self.sender.try_reserve(len)
    }

    /// Sends one message, waiting for room. See [`SendHalf::send`].
    #[inline]
    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.sender.send(bytes)
    }

    /// Sends one frame if there is room now ([`Error::Full`](crate::Error::Full) if not). Never fragments.
    #[inline]
    pub fn try_send(&mut self, bytes: &[u8]) -> Result<()> {
        self.sender.try_send(bytes)
    }

    /// Like [`send`](Channel::send), giving up with [`Error::Timeout`](crate::Error::Timeout) after `timeout`.
    pub fn send_timeout(&mut self, bytes: &[u8], timeout: Duration) -> Result<()> {
        self.sender.send_timeout(bytes, timeout)
    }

    /// Serialises `value` as JSON straight into the ring. See [`SendHalf::send_json`].
    #[inline]
    pub fn send_json<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.sender.send_json(value)
    }

    /// Receives the next message, waiting for it. See [`RecvHalf::recv`].
    #[inline]
    pub fn recv(&mut self) -> Result<ReadGuard<'_>> {
        self.receiver.recv()
    }

    /// Like [`recv`](Channel::recv), giving up with [`Error::Timeout`](crate::Error::Timeout) after `timeout`.
    #[inline]
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<ReadGuard<'_>> {
        self.receiver.recv_timeout(timeout)
    }

    /// Receives the next message if one is there. See [`RecvHalf::try_recv`].
    #[inline]
    pub fn try_recv(&mut self) -> Result<ReadGuard<'_>> {
        self.receiver.try_recv()
    }

    /// Receives one message and copies it into `buf`. See [`RecvHalf::recv_into`].
    pub fn recv_into(&mut self, buf: &mut Vec<u8>) -> Result<usize> {
        self.receiver.recv_into(buf)
    }

    /// Receives one message and decodes it as JSON into an owned value.
    pub fn recv_json<T: serde::de::DeserializeOwned>(&mut self) -> Result<T> {
        self.receiver.recv_json()
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: `me` points into `self.map`, still alive.
        let me = unsafe { self.me.as_ref() };
        // Release: pairs with the Acquire in the peer's `PeerWatch::state`: every frame we
        // published is visible to a peer that sees the close.
        me.state.store(PEER_CLOSED, Ordering::Release);
        // Wake a peer that sleeps waiting for data from us or for room in our inbound ring.
        wait::wake(self.sender.tx.data_cell());
        wait::wake(self.receiver.rx.space_cell());
    }
}
