//! `raw-sync`: the method of the reference project (seed 002), written here from its
//! description: one single-slot mailbox per direction in a `shared_memory` mapping, signalled
//! with `raw_sync` busy events. It is the comparison row users of the reference know.
//!
//! Each mailbox has a `ready` event (a message is in the slot) and a `free` event (the slot was
//! emptied), both auto-reset busy events, a length word and the slot. The reference only needed
//! `ready` because a ping-pong never sends twice in a row; `free` makes the mailbox correct for
//! any traffic and costs one uncontended store per message.
//!
//! `raw_sync`'s busy events use relaxed atomics only, so this file adds a Release fence before
//! each `set` and an Acquire fence after each `wait`: that is what makes the slot's bytes
//! visible. Waits use a 20 ms timeout (instead of the reference's infinite one) so that a dead
//! or closed peer is noticed.

use std::mem::size_of;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use raw_sync::events::{BusyEvent, EventImpl, EventInit, EventState};
use raw_sync::Timeout;
use serde::Serialize;

use super::{
    await_connected, create_mapping, mapping_id, open_mapping, poll_until, ChildStdio, Kind,
    Listener, Options, Peer, Result, Transport,
};
use crate::Error;

const MAGIC: u64 = 0x7368_6d72_7273_796e; // "shmrrsyn"
/// Bytes before the first mailbox.
const HEADER: usize = 64;
/// Bytes of a mailbox before its slot: the two events and the length word.
const MAILBOX_HEADER: usize = 64;
const READY_AT: usize = 0;
const FREE_AT: usize = 8;
const LEN_AT: usize = 16;
/// How long one event wait spins before the peer is checked.
const WAIT_SLICE: Duration = Duration::from_millis(20);

#[repr(C)]
struct Header {
    magic: AtomicU64,
    slot: AtomicU64,
    ready: AtomicU32,
    closed: [AtomicU32; 2],
}

const _: () = assert!(size_of::<Header>() <= HEADER);

struct Mailbox {
    ready: Box<dyn EventImpl>,
    free: Box<dyn EventImpl>,
    /// Offset of the mailbox in the mapping.
    at: usize,
}

/// One end of the raw-sync transport.
pub struct RawSync {
    // Field order matters: the events point into the mapping, so they drop first.
    outbox: Mailbox,
    inbox: Mailbox,
    shmem: shared_memory::Shmem,
    slot: usize,
    me: usize,
    peer: Peer,
}

/// The created mapping, waiting for the child.
pub struct RawSyncListener {
    end: RawSync,
    id: String,
    opts: Options,
}

fn mailbox_at(direction: usize, slot: usize) -> usize {
    HEADER + direction * (MAILBOX_HEADER + slot)
}

fn event_error(e: Box<dyn std::error::Error>) -> Error {
    Error::Io(std::io::Error::other(format!("raw_sync event: {e}")))
}

impl RawSync {
    fn header(&self) -> &Header {
        // SAFETY: the mapping is page-aligned and at least HEADER bytes (checked at create and
        // open); the header is only accessed through atomics, all-zero bytes are valid for
        // them, and the borrow cannot outlive `self.shmem`.
        unsafe { &*self.shmem.as_ptr().cast::<Header>() }
    }

    fn len_word(&self, mailbox: &Mailbox) -> &AtomicU64 {
        // SAFETY: `at + LEN_AT` is 8-aligned (HEADER, MAILBOX_HEADER and the slot size are
        // multiples of 8) and inside the mapping; the word is only accessed atomically.
        unsafe {
            &*self
                .shmem
                .as_ptr()
                .add(mailbox.at + LEN_AT)
                .cast::<AtomicU64>()
        }
    }

    fn slot_ptr(&self, mailbox: &Mailbox) -> *mut u8 {
        // SAFETY: the slot lies inside the mapping (its size was checked at create and open).
        unsafe { self.shmem.as_ptr().add(mailbox.at + MAILBOX_HEADER) }
    }

    fn peer_closed(&self) -> bool {
        // Acquire: pairs with the Release store in Drop.
        self.header().closed[1 - self.me].load(Ordering::Acquire) != 0
    }

    /// Waits for `event`, checking every WAIT_SLICE whether the peer closed or died.
    fn wait(&self, event: &dyn EventImpl) -> Result<()> {
        loop {
            if event.wait(Timeout::Val(WAIT_SLICE)).is_ok() {
                // Acquire: pairs with the Release fence before the peer's `set` (the busy event
                // itself is relaxed).
                fence(Ordering::Acquire);
                return Ok(());
            }
            let gone = if self.peer_closed() {
                Some(super::closed())
            } else if self.peer.is_gone() {
                Some(self.peer.gone_error())
            } else {
                None
            };
            if let Some(e) = gone {
                // One last look: the peer may have signalled just before closing or exiting.
                if event.wait(Timeout::Val(Duration::ZERO)).is_ok() {
                    // Acquire: as above.
                    fence(Ordering::Acquire);
                    return Ok(());
                }
                return Err(e);
            }
        }
    }

    fn open_mailboxes(
        shmem: &shared_memory::Shmem,
        slot: usize,
        create: bool,
        me: usize,
    ) -> Result<(Mailbox, Mailbox)> {
        let mut boxes = Vec::with_capacity(2);
        for direction in 0..2 {
            let at = mailbox_at(direction, slot);
            // SAFETY: both event addresses lie in the mailbox header inside the mapping, which
            // outlives the events (RawSync drops them before the mapping). `new` writes the
            // event's initial state (creator); `from_existing` validates it (connector).
            let (ready, free) = unsafe {
                let base = shmem.as_ptr().add(at);
                if create {
                    let (ready, _) =
                        BusyEvent::new(base.add(READY_AT), true).map_err(event_error)?;
                    let (free, _) = BusyEvent::new(base.add(FREE_AT), true).map_err(event_error)?;
                    free.set(EventState::Signaled).map_err(event_error)?;
                    (ready, free)
                } else {
                    let (ready, _) =
                        BusyEvent::from_existing(base.add(READY_AT)).map_err(event_error)?;
                    let (free, _) =
                        BusyEvent::from_existing(base.add(FREE_AT)).map_err(event_error)?;
                    (ready, free)
                }
            };
            boxes.push(Mailbox { ready, free, at });
        }
        let (second, first) = (boxes.pop(), boxes.pop());
        let (Some(d0), Some(d1)) = (first, second) else {
            return Err(crate::garbled("mailboxes missing".to_owned()));
        };
        // Direction 0 carries creator -> connector.
        Ok(if me == 0 { (d0, d1) } else { (d1, d0) })
    }
}

impl Transport for RawSync {
    type Listener = RawSyncListener;
    const KIND: Kind = Kind::RawSync;

    fn listen(name: &str, opts: &Options) -> Result<RawSyncListener> {
        // The slot holds the largest message of the run: a mailbox cannot split one.
        let slot = opts
            .ring_size
            .max(opts.max_message)
            .checked_next_multiple_of(64)
            .ok_or_else(|| Error::InvalidConfig("raw-sync slot size overflows".to_owned()))?;
        let id = mapping_id(name, "rawsync");
        let shmem = create_mapping(&id, mailbox_at(2, slot))?;
        let (outbox, inbox) = RawSync::open_mailboxes(&shmem, slot, true, 0)?;
        let end = RawSync {
            outbox,
            inbox,
            shmem,
            slot,
            me: 0,
            peer: Peer::unknown(),
        };
        let header = end.header();
        // Relaxed: published by the Release store of `ready`.
        header.magic.store(MAGIC, Ordering::Relaxed);
        // Relaxed: published by the Release store of `ready`, like `magic`.
        header.slot.store(slot as u64, Ordering::Relaxed);
        // Release: pairs with the Acquire load of `ready` in `connect`; also publishes the
        // events' initial state written above.
        header.ready.store(1, Ordering::Release);
        Ok(RawSyncListener {
            end,
            id,
            opts: opts.clone(),
        })
    }

    fn connect(address: &str, opts: &Options, peer: Peer) -> Result<RawSync> {
        let shmem = open_mapping(address, HEADER, peer, opts.connect_timeout)?;
        // SAFETY: as in `RawSync::header`: page-aligned, at least HEADER bytes, atomics only.
        let header = unsafe { &*shmem.as_ptr().cast::<Header>() };
        poll_until(peer, opts.connect_timeout, || {
            // Acquire: pairs with the Release store of `ready` in `listen`.
            Ok((header.ready.load(Ordering::Acquire) != 0).then_some(()))
        })?;
        // Relaxed: ordered after the Acquire load of `ready` above (as is `slot` below).
        let magic = header.magic.load(Ordering::Relaxed);
        if magic != MAGIC {
            return Err(crate::garbled(format!(
                "mapping {address:?} starts with {magic:#x}, not the raw-sync magic"
            )));
        }
        let slot = usize::try_from(header.slot.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
        if slot % 64 != 0
            || slot
                .checked_mul(2)
                .and_then(|s| s.checked_add(HEADER + 2 * MAILBOX_HEADER))
                .is_none_or(|total| total > shmem.len())
        {
            return Err(crate::garbled(format!(
                "mapping {address:?}: slot of {slot} bytes in a mapping of {}",
                shmem.len()
            )));
        }
        let (outbox, inbox) = RawSync::open_mailboxes(&shmem, slot, false, 1)?;
        let end = RawSync {
            outbox,
            inbox,
            shmem,
            slot,
            me: 1,
            peer,
        };
        // Release: pairs with the Acquire load of `ready` in `RawSyncListener::accept`.
        end.header().ready.store(2, Ordering::Release);
        Ok(end)
    }

    fn max_message(&self) -> usize {
        self.slot
    }

    fn send(&mut self, msg: &[u8]) -> Result<()> {
        if msg.len() > self.slot {
            return Err(Error::TooLarge {
                len: msg.len(),
                max: self.slot,
            });
        }
        self.wait(self.outbox.free.as_ref())?;
        // SAFETY: the slot holds `self.slot >= msg.len()` bytes; the `free` event we just
        // consumed means the peer is done with it and will not touch it until `ready` is set.
        unsafe {
            std::ptr::copy_nonoverlapping(msg.as_ptr(), self.slot_ptr(&self.outbox), msg.len())
        };
        // Relaxed: published by the Release fence below.
        self.len_word(&self.outbox)
            .store(msg.len() as u64, Ordering::Relaxed);
        // Release: pairs with the Acquire fence after the peer's wait on `ready`.
        fence(Ordering::Release);
        self.outbox
            .ready
            .set(EventState::Signaled)
            .map_err(event_error)
    }

    fn send_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec(value)?;
        self.send(&bytes)
    }

    fn recv_with<R>(&mut self, read: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
        self.wait(self.inbox.ready.as_ref())?;
        // Relaxed: ordered by the Acquire fence in `wait`.
        let len = self.len_word(&self.inbox).load(Ordering::Relaxed);
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > self.slot {
            return Err(crate::garbled(format!(
                "mailbox message of {len} bytes in a {} byte slot",
                self.slot
            )));
        }
        // SAFETY: `len` was checked against the slot, so the slice stays inside the mapping;
        // the `ready` event we consumed means the peer finished writing and will not write
        // again until we set `free`. (A peer that breaks the protocol can change the bytes
        // while we read them, the same caveat as the ring's ReadGuard; it cannot make us read
        // outside the mapping.)
        let bytes = unsafe { std::slice::from_raw_parts(self.slot_ptr(&self.inbox), len) };
        let result = read(bytes);
        // Release: pairs with the Acquire fence after the peer's wait on `free`: our reads of
        // the slot are done.
        fence(Ordering::Release);
        self.inbox
            .free
            .set(EventState::Signaled)
            .map_err(event_error)?;
        result
    }
}

impl Drop for RawSync {
    fn drop(&mut self) {
        // Release: pairs with the Acquire load in the peer's `peer_closed`.
        self.header().closed[self.me].store(1, Ordering::Release);
    }
}

impl Listener for RawSyncListener {
    type Transport = RawSync;

    fn address(&self) -> String {
        self.id.clone()
    }

    fn accept(mut self, _stdio: ChildStdio, peer: Peer) -> Result<RawSync> {
        self.end.peer = peer;
        let end = self.end;
        await_connected(&end.header().ready, peer, self.opts.connect_timeout)?;
        Ok(end)
    }
}
