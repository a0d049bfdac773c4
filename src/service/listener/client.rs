//! A client's side of a listener (`connect_client`, reached through `surface/connect.rs`): claims a
//! free slot, names its channel in the slot and makes it, publishes the slot, rings the doorbell
//! and waits until the server has connected, giving the slot back on every other way out.

use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::OpenError;
use crate::shm::channel::{Channel, Config};
use crate::shm::layout::listener::{SLOT_ACTIVE, SLOT_NAMED, SLOT_PENDING};
use crate::shm::layout::{valid_capacity, CREATOR_LOCK, PEER_CLOSED, PEER_PRESENT};
use crate::shm::mapping::Mapping;
use crate::sys::{futex_wait, lock, ProcessId};
use crate::wait::WaitStrategy;

use super::slots::{claim, connection_name, Claim, ListenerMap};
use super::Result;

/// How often a client waiting to be accepted looks whether the server still runs.
const CLIENT_CHECK: Duration = Duration::from_millis(10);

/// Connection numbers of this process: every client channel gets a new name.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

/// Connects as a new client to the listener `name`, open in `map` (whose first word read
/// `LISTENER_MAGIC`): a new channel whose other end the server's
/// [`accept`](super::Listener::accept) gets. Waits until the server has accepted it, at most until
/// `deadline`.
///
/// Fails with [`OpenError::TooManyClients`] when all its slots are taken,
/// [`OpenError::PeerGone`] if the server died (before or while we wait),
/// [`OpenError::Disconnected`] if it closes the listener while we wait or refuses our channel,
/// and
/// [`OpenError::Timeout`] past the deadline. A client that fails leaves no slot taken.
pub(crate) fn connect_client(
    map: Mapping,
    name: &str,
    wait: WaitStrategy,
    deadline: Option<Instant>,
) -> Result<Channel> {
    let shared = ListenerMap::from_mapping(map, name)?;
    connect_to(&shared, wait, deadline)
}

/// True while the server holds its creator lock on the listener.
fn server_alive(shared: &ListenerMap) -> Result<bool> {
    Ok(lock::alive(shared.map.file().as_raw_fd(), CREATOR_LOCK)?)
}

/// Connects to the listener of `shared` as a client: claims a slot, makes the channel the
/// server will connect to, and waits until it has (at most until `deadline`).
fn connect_to(
    shared: &ListenerMap,
    wait: WaitStrategy,
    deadline: Option<Instant>,
) -> Result<Channel> {
    let (state, server) = shared.server();
    if state != PEER_PRESENT {
        return Err(OpenError::Disconnected {
            channel: shared.name.clone(),
        });
    }
    // A listener whose server died: nobody would ever accept us, so claim nothing.
    if !server_alive(shared)? {
        return Err(server_gone(shared, server));
    }
    // Relaxed: published with `ready`, which `ListenerMap::open` read with Acquire.
    let capacity = shared.header().capacity.load(Ordering::Relaxed);
    let capacity = usize::try_from(capacity)
        .ok()
        .filter(|c| valid_capacity(*c))
        .ok_or_else(|| {
            OpenError::size_mismatch(&shared.name, format!("ring capacity {capacity} is invalid"))
        })?;
    let me = ProcessId::current();
    // From here on, every way out but being accepted gives the slot back (the claim's drop).
    let Some(mut claim) = claim(shared, me.pid)? else {
        // A slot may be held by a claimer that died before it rang, or hold a state no
        // connection of the server's leases: ring, so that a server asleep in `accept` looks,
        // and the next client finds the slot free.
        shared.ring_doorbell();
        return Err(OpenError::TooManyClients {
            channel: shared.name.clone(),
            limit: shared.slots,
        });
    };
    #[cfg(feature = "test-hooks")]
    crate::hooks::stop_point(crate::hooks::StopPoint::ListenerClaimed);
    let channel = create_channel(shared, &mut claim, me, &Config { capacity, wait })?;
    #[cfg(feature = "test-hooks")]
    crate::hooks::stop_point(crate::hooks::StopPoint::ListenerNamed);
    await_accept(shared, claim, channel, server, deadline)
}

/// [`OpenError::PeerGone`] for the listener's server.
fn server_gone(shared: &ListenerMap, server: ProcessId) -> OpenError {
    OpenError::PeerGone {
        channel: shared.name.clone(),
        pid: server.pid,
    }
}

/// Makes the client's channel for the slot `claim` holds, under the next free connection
/// number, naming it in the slot first.
fn create_channel(
    shared: &ListenerMap,
    claim: &mut Claim<'_>,
    me: ProcessId,
    config: &Config,
) -> Result<Channel> {
    let slot = claim.slot;
    loop {
        // Relaxed: only needs to be unique within this process.
        let seq = NEXT_SEQ.fetch_add(1, Ordering::Relaxed);
        // Name the channel in the slot before making it, so the server can remove it should we
        // die before publishing the slot.
        slot.seq.store(seq, Ordering::Relaxed);
        slot.start_time.store(me.start_time, Ordering::Relaxed);
        claim.set_state(SLOT_NAMED);
        match Channel::create_for_listener(&connection_name(&shared.name, me.pid, seq), config) {
            Ok(channel) => return Ok(channel),
            // A live channel of ours under that name (made by hand?): take the next number.
            Err(OpenError::AlreadyExists { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Publishes the slot `claim` holds (its channel made), rings the doorbell and waits until the
/// server has connected to `channel`, or closed or lost the listener, or `deadline` passed.
fn await_accept(
    shared: &ListenerMap,
    mut claim: Claim<'_>,
    channel: Channel,
    server: ProcessId,
    deadline: Option<Instant>,
) -> Result<Channel> {
    let slot = claim.slot;
    // Acquire: pairs with the server's Release increment after it connected.
    let mut seen = slot.accepted.load(Ordering::Acquire);
    claim.set_state(SLOT_PENDING);
    shared.ring_doorbell();
    loop {
        if channel.is_peer_connected() {
            claim.accepted();
            return Ok(channel);
        }
        if channel.peer_closed() {
            // The server took us and closed the connection at once.
            return Err(OpenError::Disconnected {
                channel: shared.name.clone(),
            });
        }
        let (state, _) = shared.server();
        if state == PEER_CLOSED {
            return Err(OpenError::Disconnected {
                channel: shared.name.clone(),
            });
        }
        // Our slot holds our word, pending or active (the server took it), for as long as the
        // server may still connect: it frees the slot when it refuses our channel (or failed to
        // connect to it). Our lock keeps other clients off it. Relaxed: only the value matters;
        // a server that connected and then freed the slot closed our channel first, which the
        // look above sees, or the next turn does.
        let word = slot.word.load(Ordering::Relaxed);
        if word != claim.word && word != (claim.word & !0xffff_ffff) | SLOT_ACTIVE {
            if channel.is_peer_connected() {
                continue;
            }
            return Err(OpenError::Disconnected {
                channel: shared.name.clone(),
            });
        }
        if !server_alive(shared)? {
            return Err(server_gone(shared, server));
        }
        let mut nap = CLIENT_CHECK;
        if let Some(d) = deadline {
            let now = Instant::now();
            if now >= d {
                return Err(OpenError::Timeout {
                    channel: shared.name.clone(),
                    waited_for: crate::error::NOT_ACCEPTED,
                });
            }
            nap = nap.min(d - now);
        }
        futex_wait(&slot.accepted, seen, Some(nap));
        // Acquire: as above.
        seen = slot.accepted.load(Ordering::Acquire);
    }
}
