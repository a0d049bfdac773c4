//! One server, many clients: a [`Listener`] hands out one duplex [`Channel`] per client.
//!
//! The listener is a small mapping under the listener's name (`/shmlink-<name>`, its own magic
//! number, so [`segments`](crate::segments) lists it like a channel whose creator is the
//! server). It holds a fixed number of client slots (the limit on concurrent clients) and a
//! doorbell futex word (the bytes are drawn in `crate::shm::layout::listener`).
//!
//! A client ([`Channel::connect`] to the listener's name, which reads the magic and comes here,
//! `connect_client`) claims a free slot with a compare-and-swap, creates its own channel under
//! a name derived from the listener's (`<name>.<pid>.<seq>`), publishes the slot as pending and
//! rings the doorbell, then waits until the server has connected. The client is that channel's
//! creator, so everything the library knows about a channel applies to a connection: when the
//! client closes, its name and memory go away with it; when it dies, the server's end reports
//! `PeerGone` and the server removes the stale name when it drops the [`Connection`] (a client
//! killed after that is cleaned up when the listener is dropped, or by the next listener of
//! that name); when the server dies, every client's end reports `PeerGone`. An idle `accept`
//! sleeps until a client rings the doorbell: it wakes on a timer only while a client is
//! half-way through connecting (it may die there). A slot stays taken until the server drops
//! the connection, so a client's connect fails with [`OpenError::TooManyClients`] while the
//! server holds `max_clients` connections.
//!
//! Any process of the user can write the slots. The server never trusts a slot word for what it
//! holds itself: it keeps in its own memory which slots its connections lease, and frees every
//! slot in a state only it sets (active) or in no known state that no connection of its leases.
//! A slot in a client's states (claimed, named) is the client's only while the client holds
//! that slot's lock; a client gives its slot back on every way out of `connect` short of being
//! accepted, and does not claim one of a listener whose server is gone. Nor does the server take
//! a client's channel at its size: one with rings larger than the listener's capacity is
//! refused before it is mapped, its slot freed and its client told (it finds its slot given back
//! without a connection: [`OpenError::Disconnected`]).
//!
//! A plain [`Channel`] has one connector for its whole life (a second one gets
//! [`OpenError::AlreadyConnected`], even once the first has gone); a server that must outlive its
//! clients uses a listener.
//!
//! The files: `slots.rs`, the listener's mapping (`ListenerMap`) and what each side writes in
//! its slot words (the server's leases, a client's claim); `server.rs`, [`Listener`] (bind,
//! accept, the sweep of slots whose claimer died); `client.rs`, a client's side
//! (`connect_client`: claim, name, make the channel, publish, wait to be accepted). This file
//! holds what an accept hands out: the [`Connection`] and the [`SlotLease`] it holds.

mod client;
mod server;
mod slots;

use std::borrow::{Borrow, BorrowMut};
use std::sync::Weak;

use crate::error::OpenError;
use crate::shm::channel::Channel;

pub(crate) use client::connect_client;
pub use server::{Listener, DEFAULT_MAX_CLIENTS};
use slots::ListenerMap;

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// Holds a slot while the server holds the connection.
pub(crate) struct SlotLease {
    /// The listener; once it is gone there is no slot to free.
    shared: Weak<ListenerMap>,
    index: usize,
    /// The slot word the lease made (the client's pid, active).
    active: u64,
    /// The connection's channel name, created by the client.
    name: String,
}

impl Drop for SlotLease {
    fn drop(&mut self) {
        // A client that died cannot remove its channel's name: do it for it (only if its
        // creator is gone: the creator lock says so).
        match self.shared.upgrade() {
            Some(shared) => {
                shared.end_lease(self.index, self.active);
                shared.reclaim(std::mem::take(&mut self.name));
            }
            None => {
                let _ = crate::shm::segments::reclaim(&self.name);
            }
        }
    }
}

/// The server's end of one client's connection: a [`Channel`] (it derefs to one) that frees the
/// client's slot when dropped, and removes the client's channel name if the client died (at
/// once, or, if the client's process was still exiting, during one of the listener's next
/// accepts).
pub struct Connection {
    channel: Channel,
    _lease: SlotLease,
}

impl Connection {
    /// The client's channel.
    pub fn channel(&mut self) -> &mut Channel {
        &mut self.channel
    }

    /// The channel and the lease on its slot (to be dropped after the channel).
    pub(crate) fn into_parts(self) -> (Channel, SlotLease) {
        (self.channel, self._lease)
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("channel", &self.channel)
            .field("name", &self._lease.name)
            .finish()
    }
}

impl std::ops::Deref for Connection {
    type Target = Channel;
    fn deref(&self) -> &Channel {
        &self.channel
    }
}

impl std::ops::DerefMut for Connection {
    fn deref_mut(&mut self) -> &mut Channel {
        &mut self.channel
    }
}

impl Borrow<Channel> for Connection {
    fn borrow(&self) -> &Channel {
        &self.channel
    }
}

impl BorrowMut<Channel> for Connection {
    fn borrow_mut(&mut self) -> &mut Channel {
        &mut self.channel
    }
}
