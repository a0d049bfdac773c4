//! The listener's mapping as both sides see it ([`ListenerMap`]): its header, its slot words
//! and doorbell; the server's own record of the slots its connections lease and the lease
//! protocol on the words (take a pending slot, end a lease, free a slot no lease holds); a
//! client's [`Claim`] on a free slot (claimed, named, pending; given back when dropped short of
//! being accepted); and the names of ended connections that are removed again later.

use std::mem::size_of;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{ChannelName, OpenError};
use crate::shm::layout::listener::{
    listener_size, slot_lock, ListenerHeader, Slot, LISTENER_VERSION, MAX_CLIENTS, SLOTS_OFFSET,
    SLOT_ACTIVE, SLOT_CLAIMED, SLOT_FREE,
};
use crate::shm::layout::{SegmentHeader, READY, RINGS_OFFSET};
use crate::shm::mapping::Mapping;
use crate::sys::{futex_wake, lock, ProcessId};

use super::Result;

/// How long the server keeps trying to remove the name of a client that looked alive when its
/// connection ended (a process that is being killed holds its files for a moment).
const RECLAIM_FOR: Duration = Duration::from_secs(5);

/// The listener mapping, shared by the listener and the connections it handed out.
pub(super) struct ListenerMap {
    pub(super) map: Mapping,
    pub(super) slots: usize,
    pub(super) name: ChannelName,
    /// Names of ended connections whose client looked alive when the connection was dropped
    /// (its process may still be exiting), with when to stop trying: retried every sweep.
    reclaim_later: Mutex<Vec<(String, Instant)>>,
    /// The server's own record of the slots its connections lease, one flag per slot (empty on
    /// a client's side): what the server holds is never read from the slot words, which any
    /// process of the user can write. A flag and its slot word change together under
    /// `lease_lock`; a flag read without it is a hint, checked again under it.
    pub(super) leased: Box<[AtomicBool]>,
    lease_lock: Mutex<()>,
}

// SAFETY: the mapping is plain memory that stays valid while `ListenerMap` lives; every access to it
// goes through atomics (`SegmentHeader`, `ListenerHeader`, `Slot` are all atomics).
unsafe impl Sync for ListenerMap {}

impl ListenerMap {
    pub(super) fn header(&self) -> &SegmentHeader {
        // SAFETY: the mapping is page-aligned and at least SLOTS_OFFSET bytes (checked when it
        // was made or opened); the header is all atomics, valid for any bytes.
        unsafe { self.map.ptr().cast::<SegmentHeader>().as_ref() }
    }

    pub(super) fn control(&self) -> &ListenerHeader {
        // SAFETY: as in `header`: RINGS_OFFSET + size_of::<ListenerHeader>() <= SLOTS_OFFSET
        // (asserted above), 1024 is a multiple of the header's alignment (128, from
        // `CachePadded`), and the fields are atomics.
        unsafe { &*(self.map.ptr().as_ptr().add(RINGS_OFFSET) as *const ListenerHeader) }
    }

    pub(super) fn slot(&self, i: usize) -> &Slot {
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

    /// The server's listener `name` in `map`, made with room for `slots` clients: none leased.
    pub(super) fn for_server(map: Mapping, name: &str, slots: usize) -> ListenerMap {
        ListenerMap {
            leased: (0..slots).map(|_| AtomicBool::new(false)).collect(),
            ..ListenerMap::new(map, name, slots)
        }
    }

    /// The listener `name` opened by a client (`map`, whose first word read
    /// `LISTENER_MAGIC`), its header checked. Every error names it.
    pub(super) fn from_mapping(map: Mapping, name: &str) -> Result<ListenerMap> {
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
    pub(super) fn take_lease(&self, i: usize, pending: u64) -> Option<u64> {
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
    pub(super) fn end_lease(&self, i: usize, active: u64) {
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
    pub(super) fn free_unleased(&self, i: usize, word: u64) {
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
    pub(super) fn server(&self) -> (u32, ProcessId) {
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
    pub(super) fn reclaim(&self, name: String) {
        if let Ok(crate::segments::Reclaim::Alive) = crate::shm::segments::reclaim(&name) {
            self.lock_reclaims()
                .push((name, Instant::now() + RECLAIM_FOR));
        }
    }

    pub(super) fn lock_reclaims(&self) -> std::sync::MutexGuard<'_, Vec<(String, Instant)>> {
        // A panic while the lock was held leaves a valid list.
        self.reclaim_later.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn retry_reclaims(&self) {
        let mut later = std::mem::take(&mut *self.lock_reclaims());
        let now = Instant::now();
        later.retain(|(name, until)| {
            now < *until
                && matches!(
                    crate::shm::segments::reclaim(name),
                    Ok(crate::segments::Reclaim::Alive)
                )
        });
        self.lock_reclaims().extend(later);
    }

    pub(super) fn ring_doorbell(&self) {
        let bell = &self.control().doorbell;
        // Release: pairs with the Acquire load in `Listener::accept_deadline`: a server that
        // reads the new value sees the pending slot published before it.
        bell.fetch_add(1, Ordering::Release);
        futex_wake(bell);
    }
}

pub(super) fn connection_name(listener: &str, pid: u32, seq: u64) -> String {
    format!("{listener}.{pid}.{seq}")
}

/// A slot this client claimed and has not been accepted in yet: given back (freed) when
/// dropped, unless the server took it meanwhile (the word is no longer ours).
///
/// We hold the slot's lock for as long as the claim lives (it goes with our descriptor of the
/// listener, which outlives the claim), so no other client can claim the slot in between and
/// have its claim freed by ours.
pub(super) struct Claim<'a> {
    pub(super) slot: &'a Slot,
    /// What we last stored in the slot word.
    pub(super) word: u64,
}

impl Claim<'_> {
    /// Moves the slot to `state`, keeping our pid in the word. Release: pairs with the
    /// server's Acquire load of the slot word in `scan`: publishes `seq` and `start_time`.
    pub(super) fn set_state(&mut self, state: u64) {
        let word = (self.word & !0xffff_ffff) | state;
        self.slot.word.store(word, Ordering::Release);
        self.word = word;
    }

    /// The server accepted us: the slot is its lease's to free.
    pub(super) fn accepted(self) {
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
pub(super) fn claim(shared: &ListenerMap, pid: u32) -> Result<Option<Claim<'_>>> {
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
