//! The server's side: [`Listener`] binds the listener's mapping, and each accept scans the
//! slots, leases the first pending one and connects to its client's channel; once per sweep
//! period the scan frees slots whose claimer died and retries the removal of ended connections'
//! names. Dropping the listener tells the waiting clients and removes dead connections' names.

use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::OpenError;
use crate::shm::channel::{mode_of, Channel, Config};
use crate::shm::layout::listener::{
    listener_size, slot_lock, LISTENER_MAGIC, LISTENER_VERSION, MAX_CLIENTS, SLOT_CLAIMED,
    SLOT_FREE, SLOT_NAMED, SLOT_PENDING,
};
use crate::shm::layout::{check_capacity, PEER_CLOSED, PEER_PRESENT, READY};
use crate::shm::mapping::{self, Mapping};
use crate::sys::{futex_wait, futex_wake, lock, ProcessId};
#[cfg(feature = "tokio")]
use crate::wait::WaitStrategy;

use super::slots::{connection_name, ListenerMap};
use super::{Connection, Result, SlotLease};

/// Concurrent clients a listener admits by default ([`Listener::bind`]).
pub const DEFAULT_MAX_CLIENTS: usize = 64;
/// How often a waiting `accept` looks for slots claimed by clients that died, while some slot is
/// claimed and not yet published (or a name waits to be removed again).
const SWEEP_PERIOD: Duration = Duration::from_millis(100);

/// A server's end of a [`Listener`]: accepts one [`Connection`] per client.
///
/// ```no_run
/// use shmlink::{Config, Listener};
/// let listener = Listener::bind("svc", &Config::default())?;
/// loop {
///     let mut conn = listener.accept()?;
///     std::thread::spawn(move || {
///         while let Ok(msg) = conn.recv().map(|m| m.to_vec()) {
///             if conn.send(&msg).is_err() {
///                 break;
///             }
///         }
///     });
/// }
/// # Ok::<(), shmlink::Error>(())
/// ```
///
/// Clients connect with [`Channel::connect`] (or [`Endpoint::connect`](crate::Endpoint::connect))
/// to the listener's name. To serve many connections from one thread, put them in a
/// [`Selector`](crate::Selector).
pub struct Listener {
    shared: Arc<ListenerMap>,
    config: Config,
    /// Where the next scan starts, so no slot is always served last.
    next: AtomicUsize,
    /// When the last sweep ran, in milliseconds since one sweep period before `born` (0: none
    /// has, and the first scan sweeps).
    last_sweep: AtomicU64,
    born: Instant,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("name", &self.shared.name)
            .field("max_clients", &self.shared.slots)
            .field("capacity", &self.config.capacity)
            .field("wait", &self.config.wait)
            .finish()
    }
}

impl Listener {
    /// Makes the listener `name` with room for [`DEFAULT_MAX_CLIENTS`] concurrent clients.
    /// Every connection has rings of `config.capacity` bytes; the server's ends wait with
    /// `config.wait`. The clients make their connections' channels: one with larger rings (only
    /// a hostile client makes one) is refused before it is mapped, and that client's connect
    /// fails with [`OpenError::Disconnected`].
    ///
    /// The name is in the same namespace as channels and follows the same rule
    /// ([`OpenError::InvalidName`]; at most [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes): a live
    /// channel or listener of that name gives [`OpenError::AlreadyExists`]; one whose creator died
    /// is removed and replaced; an entry that is not a channel or listener is left alone
    /// ([`OpenError::NotAChannel`]).
    pub fn bind(name: &str, config: &Config) -> Result<Listener> {
        Self::bind_with_limit(name, config, DEFAULT_MAX_CLIENTS)
    }

    /// Like [`bind`](Listener::bind), admitting at most `max_clients` (1 to [`MAX_CLIENTS`])
    /// clients at once: past it, a client's connect fails with [`OpenError::TooManyClients`].
    pub fn bind_with_limit(name: &str, config: &Config, max_clients: usize) -> Result<Listener> {
        mapping::validate_name(name)?;
        check_capacity(name, config.capacity)?;
        if !(1..=MAX_CLIENTS).contains(&max_clients) {
            return Err(OpenError::InvalidConfig {
                channel: name.into(),
                what: format!("max_clients {max_clients} must be between 1 and {MAX_CLIENTS}"),
            });
        }
        let size = listener_size(max_clients);
        let map = match Mapping::create_named(name, size) {
            Err(OpenError::AlreadyExists { .. })
                if crate::shm::segments::reclaim_if_dead(name)? =>
            {
                Mapping::create_named(name, size)?
            }
            other => other?,
        };
        let shared = ListenerMap::for_server(map, name, max_clients);
        let hdr = shared.header();
        let me = ProcessId::current();
        // Relaxed stores: published by the Release store of `ready` below, which clients read
        // with Acquire before anything else.
        hdr.write_fixed(LISTENER_MAGIC, LISTENER_VERSION, config.capacity, size);
        shared
            .control()
            .slots
            .store(max_clients as u32, Ordering::Relaxed);
        hdr.creator.record(me, mode_of(config.wait));
        hdr.creator.state.store(PEER_PRESENT, Ordering::Relaxed);
        // Release: pairs with the Acquire load of `ready` in `ListenerMap::open`.
        hdr.ready.store(READY, Ordering::Release);
        // A previous server's clients that died after it dropped their connections.
        reclaim_dead_connections(name);
        Ok(Listener {
            shared: Arc::new(shared),
            config: config.clone(),
            next: AtomicUsize::new(0),
            last_sweep: AtomicU64::new(0),
            born: Instant::now(),
        })
    }

    /// The listener's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Most clients admitted at once.
    pub fn max_clients(&self) -> usize {
        self.shared.slots
    }

    /// How the server's ends of the connections wait.
    #[cfg(feature = "tokio")]
    pub(crate) fn wait_strategy(&self) -> WaitStrategy {
        self.config.wait
    }

    /// Waits for the next client and connects to it.
    pub fn accept(&self) -> Result<Connection> {
        self.accept_deadline(None)
    }

    /// Like [`accept`](Listener::accept), giving up with [`OpenError::Timeout`] after `timeout`.
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Connection> {
        self.accept_deadline(crate::wait::Deadline::after(timeout).instant())
    }

    /// Accepts a client that is waiting now: [`OpenError::NoClient`] if none is.
    pub fn try_accept(&self) -> Result<Connection> {
        self.scan()?.ok_or_else(|| OpenError::NoClient {
            channel: self.shared.name.clone(),
        })
    }

    /// Sleeps on the doorbell between scans. The sleep is timed (one sweep period) only while
    /// there is housekeeping to do: a slot claimed by a client that has not published it yet
    /// (it may die half-way) or a name to remove again. An idle listener sleeps until a client
    /// rings, or until the caller's deadline.
    fn accept_deadline(&self, deadline: Option<Instant>) -> Result<Connection> {
        let bell = &self.shared.control().doorbell;
        loop {
            // Acquire: pairs with the Release increment in `ListenerMap::ring_doorbell`.
            let seen = bell.load(Ordering::Acquire);
            let (conn, busy) = self.scan_for_work()?;
            if let Some(conn) = conn {
                return Ok(conn);
            }
            let now = Instant::now();
            let mut nap = busy.then_some(SWEEP_PERIOD);
            if let Some(d) = deadline {
                if now >= d {
                    return Err(OpenError::Timeout {
                        channel: self.shared.name.clone(),
                        waited_for: crate::error::NO_CLIENT_CAME,
                    });
                }
                nap = Some(nap.map_or(d - now, |n| n.min(d - now)));
            }
            futex_wait(bell, seen, nap);
        }
    }

    /// Makes the next scan sweep, however recent the last sweep (for the test hooks).
    #[cfg(feature = "test-hooks")]
    pub(crate) fn sweep_on_next_scan(&self) {
        // Relaxed: as in `scan_for_work`.
        self.last_sweep.store(0, Ordering::Relaxed);
    }

    /// The doorbell word, bumped by every client that waits to be accepted.
    pub(crate) fn doorbell(&self) -> &AtomicU32 {
        &self.shared.control().doorbell
    }

    /// Takes the first pending slot (starting after the one served last) and connects to its
    /// client. Once per sweep period, slots claimed by clients that died before publishing are
    /// freed on the way (and their channel names removed), and so are the names of ended
    /// connections that could not be removed at once.
    fn scan(&self) -> Result<Option<Connection>> {
        self.scan_for_work().map(|(conn, _)| conn)
    }

    /// `scan`, also saying whether a later sweep has work: a slot claimed but not yet published,
    /// or a name to remove again.
    fn scan_for_work(&self) -> Result<(Option<Connection>, bool)> {
        let mut busy = !self.shared.lock_reclaims().is_empty();
        let n = self.shared.slots;
        let now_ms = self.born.elapsed().as_millis() as u64 + SWEEP_PERIOD.as_millis() as u64;
        // Relaxed: a throttle, not a synchronisation.
        let sweep = now_ms.saturating_sub(self.last_sweep.load(Ordering::Relaxed))
            >= SWEEP_PERIOD.as_millis() as u64;
        if sweep {
            self.last_sweep.store(now_ms, Ordering::Relaxed);
            self.shared.retry_reclaims();
        }
        // Relaxed: only spreads the starting point.
        let start = self.next.load(Ordering::Relaxed) % n;
        for k in 0..n {
            let i = (start + k) % n;
            let slot = self.shared.slot(i);
            // Acquire: pairs with the client's Release store of PENDING (seq and start time).
            let word = slot.word.load(Ordering::Acquire);
            let pid = (word >> 32) as u32;
            match word & 0xffff_ffff {
                SLOT_FREE => {}
                SLOT_PENDING => {
                    let Some(active) = self.shared.take_lease(i, word) else {
                        // The client gave up (nothing to do), or a connection of ours still
                        // leases the slot (someone rewrote its word): look again later.
                        busy |= self.shared.leased[i].load(Ordering::Relaxed);
                        continue;
                    };
                    self.next.store(i + 1, Ordering::Relaxed);
                    // Relaxed: published by the PENDING store that `take_lease`'s CAS read.
                    let seq = slot.seq.load(Ordering::Relaxed);
                    let name = connection_name(&self.shared.name, pid, seq);
                    let lease = SlotLease {
                        shared: Arc::downgrade(&self.shared),
                        index: i,
                        active,
                        name: name.clone(),
                    };
                    // A client's channel with rings larger than the listener's is refused
                    // before it is mapped: a client may not make the server map more than its
                    // configuration allows.
                    match Channel::connect_channel(&name, self.config.wait, self.config.capacity) {
                        Ok(channel) => {
                            // Release: pairs with the client's Acquire load of `accepted`; our
                            // connect (connector PRESENT) happened before.
                            slot.accepted.fetch_add(1, Ordering::Release);
                            futex_wake(&slot.accepted);
                            return Ok((
                                Some(Connection {
                                    channel,
                                    _lease: lease,
                                }),
                                busy,
                            ));
                        }
                        // The client gave up or died, or wrote something that is not a
                        // channel we take (not one at all, or larger than we allow): drop the
                        // lease (frees the slot, reclaims a dead name) and wake the client,
                        // which finds its slot given back without a connection.
                        Err(_) => {
                            drop(lease);
                            // Release: orders the freeing store of `end_lease` before the
                            // bump; pairs with the client's Acquire load of `accepted`.
                            slot.accepted.fetch_add(1, Ordering::Release);
                            futex_wake(&slot.accepted);
                        }
                    }
                }
                SLOT_CLAIMED | SLOT_NAMED if !sweep => busy = true,
                state @ (SLOT_CLAIMED | SLOT_NAMED) => {
                    // A claimer holds its slot's lock from before its claim until it is
                    // accepted: a claimed slot without it lost its client.
                    if lock::alive(self.shared.map.file().as_raw_fd(), slot_lock(i))? {
                        busy = true;
                        continue;
                    }
                    // Relaxed: published by the client's Release store of NAMED, which the
                    // Acquire load above read.
                    let seq = slot.seq.load(Ordering::Relaxed);
                    // Relaxed: nothing is published with a free slot but its state.
                    if slot
                        .word
                        .compare_exchange(word, SLOT_FREE, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                        && state == SLOT_NAMED
                    {
                        // It may have died with its channel made: remove the name.
                        self.shared
                            .reclaim(connection_name(&self.shared.name, pid, seq));
                    }
                }
                // Active (only the server makes a slot active, and it knows which it leased) or
                // no state at all: free unless a connection of ours holds it.
                _ => self.shared.free_unleased(i, word),
            }
        }
        Ok((None, busy))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Release: pairs with the Acquire load in `ListenerMap::server`: clients waiting to be
        // accepted stop waiting.
        self.shared
            .header()
            .creator
            .state
            .store(PEER_CLOSED, Ordering::Release);
        for i in 0..self.shared.slots {
            let slot = self.shared.slot(i);
            slot.accepted.fetch_add(1, Ordering::Release);
            futex_wake(&slot.accepted);
        }
        // Names of clients that died after their connection was dropped (while they were
        // alive) and after the last retry: nobody else would remove them.
        reclaim_dead_connections(&self.shared.name);
        // The name goes with the mapping, right after this (connections only hold a weak
        // reference to it).
    }
}

/// Removes the names of `listener`'s connections (`<listener>.<pid>.<seq>`) whose client is
/// gone: a client killed after the server dropped its connection leaves its name, and a
/// connection name is never created again, so nobody else would reclaim it. Live clients' names
/// are left alone (the creator lock decides, as for any channel).
fn reclaim_dead_connections(listener: &str) {
    for name in crate::shm::stats::connection_names(listener) {
        let _ = crate::shm::segments::reclaim(&name);
    }
}
