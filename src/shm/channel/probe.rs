//! What the services (selector, async reactor) need to see of a channel without receiving from
//! it: the futex cells its peer wakes, and cheap readiness probes.

use crate::error::WaitError;
use crate::shm::layout::{WaitCell, PEER_CLOSED};
use crate::wait::WaitStrategy;

use super::{Channel, RecvHalf};

impl RecvHalf {
    /// The cell the writer wakes after publishing a frame to us (when we announced `Block`).
    pub(crate) fn data_cell(&self) -> &WaitCell {
        self.rx.data_cell()
    }

    /// True when a receive would not find the ring empty: a frame is waiting (one relaxed
    /// load), or, for a reader of a ring with many readers, it was dropped or lapped.
    pub(crate) fn has_data(&self) -> bool {
        self.rx.has_data() || self.overtaken_now()
    }

    /// True once the writer closed its end (no look at its process).
    pub(crate) fn peer_closed(&self) -> bool {
        self.peer.state() == PEER_CLOSED
    }

    /// What this half counts (an async wait adds its sleeps here).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn tally(&self) -> &crate::shm::ring::tally::Tally {
        self.rx.tally()
    }

    /// How a receive on this half waits.
    pub(crate) fn wait_strategy(&self) -> WaitStrategy {
        self.wait.strategy()
    }

    /// Makes sure the process's death watcher covers the peer on the futex word of
    /// [`data_cell`](RecvHalf::data_cell), where a receive sleeps: `Ok(true)` while it does (the
    /// peer's death bumps and wakes that word), `Ok(false)` when it cannot (the peer has not
    /// connected yet, no pidfds, a peer in another pid namespace: look at the peer now and
    /// then instead), `Err` once the peer closed or its process is gone (remembered, so the
    /// next receive reports it too, after any frames still in the ring). Read the word before
    /// calling this (see `Waiter::watch`).
    pub(crate) fn watch_peer(&mut self) -> Result<bool, WaitError> {
        self.wait.watch(self.rx.data_cell(), &mut self.peer)
    }

    /// Looks at the peer now: `Err(Disconnected)` once it closed, `Err(PeerGone)` once its
    /// process is gone.
    pub(crate) fn check_peer(&self) -> Result<(), WaitError> {
        self.peer.check()
    }
}

impl Channel {
    /// The cell the peer wakes after publishing a frame to us (when we announced `Block`).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn data_cell(&self) -> &WaitCell {
        self.receiver.rx.data_cell()
    }

    /// What the receiving side counts.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn recv_tally(&self) -> &crate::shm::ring::tally::Tally {
        self.receiver.tally()
    }

    /// What the sending side counts.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn send_tally(&self) -> &crate::shm::ring::tally::Tally {
        self.sender.tx.tally()
    }

    /// The cell the peer wakes after making room in our outbound ring.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn space_cell(&self) -> &WaitCell {
        self.sender.tx.space_cell()
    }

    /// True when a frame is waiting to be read: one relaxed load.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn has_data(&self) -> bool {
        self.receiver.has_data()
    }

    /// True when a frame of `len` bytes fits in the outbound ring now (a corrupt index counts
    /// as room, so the send that follows reports it).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn has_room(&mut self, len: usize) -> bool {
        self.sender.tx.has_room(len).unwrap_or(true)
    }

    /// Where the ring region we receive from lies in this process (for the test hooks).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn recv_region(&self) -> std::ops::Range<usize> {
        self.receiver.rx.region()
    }

    /// True once the peer closed its end (no look at its process).
    pub(crate) fn peer_closed(&self) -> bool {
        self.receiver.peer_closed()
    }

    /// Makes sure the process's death watcher covers the peer on the futex word of
    /// [`data_cell`](Channel::data_cell), where a receive sleeps: `Ok(true)` while it does (the
    /// peer's death bumps and wakes that word), `Ok(false)` when it cannot (the peer has not
    /// connected yet, no pidfds, a peer in another pid namespace: look at the peer now and
    /// then instead), `Err` once the peer closed or its process is gone (remembered, so the
    /// next receive reports it too, after any frames still in the ring). Read the word before
    /// calling this (see `Waiter::watch`).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn watch_recv_peer(&mut self) -> Result<bool, WaitError> {
        self.receiver.watch_peer()
    }

    /// Like [`watch_recv_peer`](Channel::watch_recv_peer), on the futex word of
    /// [`space_cell`](Channel::space_cell), where a send waiting for room sleeps.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn watch_send_peer(&mut self) -> Result<bool, WaitError> {
        let s = &mut self.sender;
        s.wait.watch(s.tx.space_cell(), &mut s.peer)
    }

    /// Looks at the peer now: `Err(Disconnected)` once it closed, `Err(PeerGone)` once its
    /// process is gone.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn check_peer(&self) -> Result<(), WaitError> {
        self.receiver.check_peer()
    }
}
