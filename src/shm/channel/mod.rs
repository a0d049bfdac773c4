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
pub use send::SendHalf;
#[cfg(feature = "test-hooks")]
pub use send::SliceWriter;

use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use crate::error::{ChannelName, RecvError, SendError};
use crate::seam::SendCore;
use crate::shm::layout::{PeerInfo, SegmentHeader, WaitCell, MODE_BLOCK, MODE_SPIN, PEER_CLOSED};
use crate::shm::mapping::Mapping;
use crate::shm::ring::ReadGuard;
use crate::wait::{self, Deadline, WaitStrategy};

pub(crate) use open::peek_magic;
pub(crate) use recv::{Overtaken, Reader, Ready};

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
/// A channel is two halves, a [`SendHalf`] and a [`RecvHalf`]: borrow them with
/// [`split`](Channel::split) (to send while a received message is still borrowed, or to use
/// them from two threads) or take them apart with [`into_split`](Channel::into_split). The
/// endpoint closes when the last of its halves is dropped.
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
    wait: WaitStrategy,
    role: Role,
}

/// What both halves of one endpoint share: the mapping and this endpoint's record in it. Each
/// half holds it in an `Arc`, so the mapping lives as long as either half, wherever the halves
/// move (another thread, another channel through `mem::swap`). Dropping the last half closes
/// the endpoint.
pub(super) struct Shared {
    /// This endpoint's record in the mapping.
    me: NonNull<PeerInfo>,
    /// Where the peer's consumer sleeps on our outbound ring.
    out_data: NonNull<WaitCell>,
    /// Where the peer's producer sleeps on our inbound ring.
    in_space: NonNull<WaitCell>,
    pub(super) name: ChannelName,
    // Declared last: unmapped after `drop` below has used the pointers into it. Only kept alive.
    _map: Mapping,
}

// SAFETY: every pointer in `Shared` points into `map`, which it owns and which stays mapped
// until `Shared` drops; the pointees are atomics, which any thread may use. `Mapping` is
// `Send`, and `&Shared` gives only reads of immutable fields and atomic accesses.
unsafe impl Send for Shared {}
// SAFETY: as above: shared references allow only atomic accesses and reads of the name.
unsafe impl Sync for Shared {}

impl Shared {
    pub(super) fn me(&self) -> &PeerInfo {
        // SAFETY: points into `self.map`, alive as long as `self`; all fields are atomics.
        unsafe { self.me.as_ref() }
    }

    /// Announces the largest message this endpoint accepts.
    pub(super) fn publish_max_message(&self, max: usize) {
        // Relaxed: a standalone value; the peer's sender loads it with Relaxed before each
        // message and orders nothing else by it.
        self.me().max_message.store(max as u64, Ordering::Relaxed);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Record the close, then wake a peer that sleeps waiting for data from us or for room
        // in our inbound ring (the orderings are in `handshake::close`).
        // SAFETY: both cells point into `self.map`, still mapped; they are atomics.
        let cells = unsafe { [self.out_data.as_ref(), self.in_space.as_ref()] };
        wait::handshake::close(&self.me().state, PEER_CLOSED, cells);
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("name", &self.name())
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
        &self.receiver.shared.name
    }

    /// The name as errors carry it.
    #[cfg(feature = "tokio")]
    pub(crate) fn channel_name(&self) -> &ChannelName {
        &self.receiver.shared.name
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
    pub fn is_peer_connected(&self) -> bool {
        self.receiver.is_peer_connected()
    }

    /// The peer's process id, once it has connected.
    pub fn peer_pid(&self) -> Option<u32> {
        self.receiver.peer_pid()
    }

    /// Borrows the channel's sending and receiving halves at once.
    ///
    /// Two uses:
    /// * **Replying with data borrowed from a request.** A [`ReadGuard`] borrows the channel,
    ///   so `channel.send(&request[..])` does not compile while the request is held; with the
    ///   halves, the guard borrows only the receiving half and the reply goes out through the
    ///   sending half, with no copy in between:
    ///
    ///   ```
    ///   # let name = format!("doc-split-{}", std::process::id());
    ///   use shmlink::{Channel, Config, WaitStrategy};
    ///   let mut server = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
    ///   let mut client = Channel::connect(&name, WaitStrategy::Spin)?;
    ///   client.send(b"echo me")?;
    ///
    ///   let (tx, rx) = server.split();
    ///   let request = rx.recv()?; // borrows `rx` only
    ///   tx.send(&request)?; // straight from the inbound ring into the outbound one
    ///   drop(request);
    ///
    ///   assert_eq!(&*client.recv()?, b"echo me");
    ///   # Ok::<(), shmlink::Error>(())
    ///   ```
    /// * **Two threads**, one sending and one receiving (for example with
    ///   `std::thread::scope`). A [`Channel`] cannot receive while it is blocked in
    ///   [`send`](Channel::send); when both peers may send messages larger than the ring at the
    ///   same time, each needs a thread that keeps receiving, or the two sends wait on each
    ///   other forever. [`into_split`](Channel::into_split) gives owned halves for threads that
    ///   are not scoped.
    pub fn split(&mut self) -> (&mut SendHalf, &mut RecvHalf) {
        (&mut self.sender, &mut self.receiver)
    }

    /// Takes the channel apart into owned halves, which can move to other threads (both are
    /// `Send`). Each half keeps the mapping alive; the endpoint is closed, and the peer told,
    /// when both have been dropped.
    ///
    /// ```
    /// # let name = format!("doc-into-split-{}", std::process::id());
    /// use shmlink::{Channel, Config, WaitStrategy};
    /// let a = Channel::create(&name, &Config::with_wait(WaitStrategy::Spin))?;
    /// let mut b = Channel::connect(&name, WaitStrategy::Spin)?;
    /// let (mut tx, _rx) = a.into_split();
    /// std::thread::spawn(move || tx.send(b"from a thread")).join().unwrap()?;
    /// assert_eq!(&*b.recv()?, b"from a thread");
    /// # Ok::<(), shmlink::Error>(())
    /// ```
    pub fn into_split(self) -> (SendHalf, RecvHalf) {
        (self.sender, self.receiver)
    }

    /// Largest message this end accepts, and sends (default 1 GiB). Messages up to
    /// [`max_frame`](Channel::max_frame) travel in one frame; larger ones are split into
    /// fragments and reassembled.
    pub fn max_message(&self) -> usize {
        self.receiver.max_message()
    }

    /// Sets [`max_message`](Channel::max_message) for both directions and publishes it in the
    /// mapping: from then on the peer's sends of longer messages fail at the peer with
    /// [`SendError::TooLarge`] (before anything is written), and the channel keeps working.
    /// Set it before messages longer than the new limit can be in flight: one that is already
    /// on its way is refused here with [`RecvError::TooLarge`].
    pub fn set_max_message(&mut self, max: usize) {
        self.sender.set_max_message(max);
        self.receiver.set_max_message(max);
    }

    /// For the async surface: the next step of a send that fragments as room comes (see
    /// [`SendHalf::send_part`]).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn send_part(&mut self, bytes: &[u8], sent: &mut usize) -> Result<(), SendError> {
        self.sender.send_part(bytes, sent)
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn send_json_in_place<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
        deadline: Deadline,
    ) -> Result<bool, SendError> {
        self.sender.send_json_in_place(value, deadline)
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn serialise_json<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<Vec<u8>, SendError> {
        self.sender.serialise_json(value)
    }

    /// Gives back the buffer [`serialise_json`](Channel::serialise_json) lent.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn give_back_scratch(&mut self, buf: Vec<u8>) {
        self.sender.scratch = buf;
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn next_ready(&mut self, deadline: Deadline) -> Result<Ready, RecvError> {
        self.receiver.next_ready(deadline)
    }

    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn take_ready(&mut self, ready: Ready) -> ReadGuard<'_> {
        self.receiver.take(ready)
    }
}
