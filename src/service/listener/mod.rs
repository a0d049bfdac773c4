//! One server, many clients: a [`Listener`] hands out one duplex [`Channel`] per client.
//!
//! The listener is a small mapping under the listener's name (`/shmlink-<name>`, its own magic
//! number, so [`segments`](crate::segments) lists it like a channel whose creator is the
//! server). It holds a fixed number of client slots (the limit on concurrent clients) and a
//! doorbell futex word (the bytes are drawn in `crate::layout::listener`).
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

use std::borrow::{Borrow, BorrowMut};
use std::mem::size_of;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::channel::{mode_of, Channel, Config};
use crate::error::{ChannelName, OpenError};
use crate::layout::listener::{
    listener_size, slot_lock, ListenerHeader, Slot, LISTENER_MAGIC, LISTENER_VERSION, MAX_CLIENTS,
    SLOTS_OFFSET, SLOT_ACTIVE, SLOT_CLAIMED, SLOT_FREE, SLOT_NAMED, SLOT_PENDING,
};
use crate::layout::{
    check_capacity, valid_capacity, SegmentHeader, CREATOR_LOCK, PEER_CLOSED, PEER_PRESENT, READY,
    RINGS_OFFSET,
};
use crate::mapping::{self, Mapping};
use crate::sys::{futex_wait, futex_wake, lock, ProcessId};
use crate::wait::WaitStrategy;

type Result<T, E = OpenError> = std::result::Result<T, E>;

/// Concurrent clients a listener admits by default ([`Listener::bind`]).
pub const DEFAULT_MAX_CLIENTS: usize = 64;
/// How often a client waiting to be accepted looks whether the server still runs.
const CLIENT_CHECK: Duration = Duration::from_millis(10);
/// How often a waiting `accept` looks for slots claimed by clients that died, while some slot is
/// claimed and not yet published (or a name waits to be removed again).
const SWEEP_PERIOD: Duration = Duration::from_millis(100);

/// How long the server keeps trying to remove the name of a client that looked alive when its
/// connection ended (a process that is being killed holds its files for a moment).
const RECLAIM_FOR: Duration = Duration::from_secs(5);

/// The listener mapping, shared by the listener and the connections it handed out.
struct ListenerMap {
    map: Mapping,
    slots: usize,
    name: ChannelName,
    /// Names of ended connections whose client looked alive when the connection was dropped
    /// (its process may still be exiting), with when to stop trying: retried every sweep.
    reclaim_later: Mutex<Vec<(String, Instant)>>,
    /// The server's own record of the slots its connections lease, one flag per slot (empty on
    /// a client's side): what the server holds is never read from the slot words, which any
    /// process of the user can write. A flag and its slot word change together under
    /// `lease_lock`; a flag read without it is a hint, checked again under it.
    leased: Box<[AtomicBool]>,
    lease_lock: Mutex<()>,
}

// SAFETY: the mapping is plain memory that stays valid while `ListenerMap` lives; every access to it
// goes through atomics (`SegmentHeader`, `ListenerHeader`, `Slot` are all atomics).
unsafe impl Sync for ListenerMap {}

impl ListenerMap {
    fn header(&self) -> &SegmentHeader {
        // SAFETY: the mapping is page-aligned and at least SLOTS_OFFSET bytes (checked when it
        // was made or opened); the header is all atomics, valid for any bytes.
        unsafe { self.map.ptr().cast::<SegmentHeader>().as_ref() }
    }

    fn control(&self) -> &ListenerHeader {
        // SAFETY: as in `header`: RINGS_OFFSET + size_of::<ListenerHeader>() <= SLOTS_OFFSET
        // (asserted above), 1024 is a multiple of the header's alignment (128, from
        // `CachePadded`), and the fields are atomics.
        unsafe { &*(self.map.ptr().as_ptr().add(RINGS_OFFSET) as *const ListenerHeader) }
    }

    fn slot(&self, i: usize) -> &Slot {
        assert!(i < self.slots);
        // SAFETY: `i < slots` and the mapping holds `listener_size(slots)` bytes (checked when
        // it was made or opened), so the slot lies inside it, 64-aligned; all fields are
        // atomics.
        unsafe {
            &*(self
                .map
                .ptr()
                .as_ptr()
                .add(SLOTS_OFFSET + i * size_of::<Slot>()) as *const Slot)
        }
    }

    fn new(map: Mapping, name: &str, slots: usize) -> ListenerMap {
        ListenerMap {
            map,
            slots,
            name: name.into(),
            reclaim_later: Mutex::new(Vec::new()),
            leased: Box::new([]),
            lease_lock: Mutex::new(()),
        }
    }

    /// The listener `name` opened by a client (`map`, whose first word read
    /// `LISTENER_MAGIC`), its header checked. Every error names it.
    fn from_mapping(map: Mapping, name: &str) -> Result<ListenerMap> {
        if map.len() < SLOTS_OFFSET {
            return Err(OpenError::size_mismatch(
                name,
                format!(
                    "a listener's mapping of {} bytes is smaller than its header",
                    map.len()
                ),
            ));
        }
        let probe = ListenerMap::new(map, name, 0);
        let hdr = probe.header();
        // Acquire: pairs with the Release store of `ready` in `Listener::bind`; the magic was
        // written before it.
        if hdr.ready.load(Ordering::Acquire) != READY {
            return Err(OpenError::NotReady {
                channel: name.into(),
            });
        }
        let version = hdr.version.load(Ordering::Relaxed);
        if version != LISTENER_VERSION {
            return Err(OpenError::VersionMismatch {
                channel: name.into(),
                found: version,
                expected: LISTENER_VERSION,
            });
        }
        let slots = probe.control().slots.load(Ordering::Relaxed) as usize;
        let total = hdr.total_size.load(Ordering::Relaxed);
        if !(1..=MAX_CLIENTS).contains(&slots)
            || total != listener_size(slots) as u64
            || listener_size(slots) > probe.map.len()
        {
            return Err(OpenError::size_mismatch(
                name,
                format!(
                    "{slots} listener slots and {total} bytes do not fit a mapping of {}",
                    probe.map.len()
                ),
            ));
        }
        Ok(ListenerMap { slots, ..probe })
    }

    /// Leases slot `i`, whose word is `pending` (a client waiting there), to a connection: marks
    /// it leased and active, unless a connection of ours still leases it (its client, or another
    /// process of the user, rewrote the word) or the word changed (the client gave up). Returns
    /// the active word.
    fn take_lease(&self, i: usize, pending: u64) -> Option<u64> {
        let _guard = self.lock_leases();
        // Relaxed: the flags are only changed under `lease_lock`, which orders them.
        if self.leased[i].load(Ordering::Relaxed) {
            return None;
        }
        let active = (pending & !0xffff_ffff) | SLOT_ACTIVE;
        // Acquire on success: pairs with the client's Release store of PENDING (seq and start
        // time). Fails if the client gave up.
        self.slot(i)
            .word
            .compare_exchange(pending, active, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        self.leased[i].store(true, Ordering::Relaxed);
        Some(active)
    }

    /// Ends the lease on slot `i`, whose word we made `active`: frees the slot, unless the word
    /// was rewritten meanwhile (a scan frees it then, now that no lease holds it).
    fn end_lease(&self, i: usize, active: u64) {
        let _guard = self.lock_leases();
        self.leased[i].store(false, Ordering::Relaxed);
        // Relaxed: a free slot publishes nothing but its state.
        let _ = self.slot(i).word.compare_exchange(
            active,
            SLOT_FREE,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Frees slot `i`, seen holding `word` (active, or no known state), if no connection of
    /// ours leases it: a state nobody's protocol leaves there (another process of the user
    /// wrote it, or a lease's client rewrote its slot).
    fn free_unleased(&self, i: usize, word: u64) {
        // Relaxed: a hint; checked again under the lock.
        if self.leased[i].load(Ordering::Relaxed) {
            return;
        }
        let _guard = self.lock_leases();
        if !self.leased[i].load(Ordering::Relaxed) {
            // Relaxed: a free slot publishes nothing but its state.
            let _ = self.slot(i).word.compare_exchange(
                word,
                SLOT_FREE,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    fn lock_leases(&self) -> std::sync::MutexGuard<'_, ()> {
        // The lock guards no data of its own: a panic while it was held leaves nothing invalid.
        self.lease_lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The server process, and whether it closed the listener.
    fn server(&self) -> (u32, ProcessId) {
        let info = &self.header().creator;
        // Acquire: pairs with the Release stores of the creator's state in `bind` and `drop`.
        let state = info.state.load(Ordering::Acquire);
        let id = ProcessId {
            // Relaxed: written before the state, which we read with Acquire.
            pid: info.pid.load(Ordering::Relaxed),
            start_time: info.start_time.load(Ordering::Relaxed),
        };
        (state, id)
    }

    /// Removes the channel `name` if its creator is gone; if it looks alive (it may be exiting
    /// right now), tries again at the next sweeps for a while.
    fn reclaim(&self, name: String) {
        if let Ok(crate::segments::Reclaim::Alive) = crate::segments::reclaim(&name) {
            self.lock_reclaims()
                .push((name, Instant::now() + RECLAIM_FOR));
        }
    }

    fn lock_reclaims(&self) -> std::sync::MutexGuard<'_, Vec<(String, Instant)>> {
        // A panic while the lock was held leaves a valid list.
        self.reclaim_later.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn retry_reclaims(&self) {
        let mut later = std::mem::take(&mut *self.lock_reclaims());
        let now = Instant::now();
        later.retain(|(name, until)| {
            now < *until
                && matches!(
                    crate::segments::reclaim(name),
                    Ok(crate::segments::Reclaim::Alive)
                )
        });
        self.lock_reclaims().extend(later);
    }

    fn ring_doorbell(&self) {
        let bell = &self.control().doorbell;
        // Release: pairs with the Acquire load in `Listener::accept_deadline`: a server that
        // reads the new value sees the pending slot published before it.
        bell.fetch_add(1, Ordering::Release);
        futex_wake(bell);
    }
}

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

/// Connection numbers of this process: every client channel gets a new name.
static NEXT_SEQ: AtomicU64 = AtomicU64::new(0);

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
            Err(OpenError::AlreadyExists { .. }) if crate::segments::reclaim_if_dead(name)? => {
                Mapping::create_named(name, size)?
            }
            other => other?,
        };
        let shared = ListenerMap {
            leased: (0..max_clients).map(|_| AtomicBool::new(false)).collect(),
            ..ListenerMap::new(map, name, max_clients)
        };
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

/// Connects as a new client to the listener `name`, open in `map` (whose first word read
/// `LISTENER_MAGIC`): a new channel whose other end the server's
/// [`accept`](Listener::accept) gets. Waits until the server has accepted it, at most until
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

fn connection_name(listener: &str, pid: u32, seq: u64) -> String {
    format!("{listener}.{pid}.{seq}")
}

/// A slot this client claimed and has not been accepted in yet: given back (freed) when
/// dropped, unless the server took it meanwhile (the word is no longer ours).
///
/// We hold the slot's lock for as long as the claim lives (it goes with our descriptor of the
/// listener, which outlives the claim), so no other client can claim the slot in between and
/// have its claim freed by ours.
struct Claim<'a> {
    slot: &'a Slot,
    /// What we last stored in the slot word.
    word: u64,
}

impl Claim<'_> {
    /// Moves the slot to `state`, keeping our pid in the word. Release: pairs with the
    /// server's Acquire load of the slot word in `scan`: publishes `seq` and `start_time`.
    fn set_state(&mut self, state: u64) {
        let word = (self.word & !0xffff_ffff) | state;
        self.slot.word.store(word, Ordering::Release);
        self.word = word;
    }

    /// The server accepted us: the slot is its lease's to free.
    fn accepted(self) {
        std::mem::forget(self);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        // Relaxed: a free slot publishes nothing. Fails if the server took the slot: then it
        // finds our channel gone (or closed) and frees the slot itself.
        let _ = self.slot.word.compare_exchange(
            self.word,
            SLOT_FREE,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

/// Claims a free slot of `shared` for the process `pid`: its lock first, then the word.
fn claim(shared: &ListenerMap, pid: u32) -> Result<Option<Claim<'_>>> {
    let claimed = (u64::from(pid) << 32) | SLOT_CLAIMED;
    let file = shared.map.file();
    for i in 0..shared.slots {
        let slot = shared.slot(i);
        // Relaxed: a hint; the compare-and-swap below decides.
        if slot.word.load(Ordering::Relaxed) != SLOT_FREE || !lock::take(file, slot_lock(i), false)?
        {
            continue;
        }
        // Relaxed on both: the claim publishes nothing; the NAMED and PENDING stores do.
        if slot
            .word
            .compare_exchange(SLOT_FREE, claimed, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return Ok(Some(Claim {
                slot,
                word: claimed,
            }));
        }
        lock::release(file, slot_lock(i))?;
    }
    Ok(None)
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
    let Some(dir) = crate::mapping::shm_dir() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{}{listener}.", crate::mapping::OS_PREFIX);
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let is_connection = rest.split_once('.').is_some_and(|(pid, seq)| {
            !pid.is_empty()
                && !seq.is_empty()
                && pid.bytes().all(|b| b.is_ascii_digit())
                && seq.bytes().all(|b| b.is_ascii_digit())
        });
        if is_connection {
            let _ = crate::segments::reclaim(&format!("{listener}.{rest}"));
        }
    }
}

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
                let _ = crate::segments::reclaim(&self.name);
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

cores_through!(
    Connection,
    c => send: c.channel(),
    recv: c.channel(),
    grant: crate::ring::WriteGrant<'a>,
    guard: crate::ring::ReadGuard<'a>,
);

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
