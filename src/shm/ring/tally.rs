//! One side's counts: kept here, in the end's own memory, and copied into its [`Counters`] in
//! the mapping with plain stores (see `crate::shm::layout::counters`).

use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;
use std::time::SystemTime;

use crate::shm::layout::counters::Counters;
use crate::shm::layout::frame::kind;

/// Every this many messages a side writes the time (besides its waits and wake-ups).
const STAMP_EVERY: u64 = 256;

/// One side's counts and where it copies them.
#[derive(Debug)]
pub(crate) struct Tally {
    shared: NonNull<Counters>,
    messages: Cell<u64>,
    bytes: Cell<u64>,
    fragments: Cell<u64>,
    full: Cell<u64>,
    sleeps: Cell<u64>,
    wakes: Cell<u64>,
    high_water: Cell<u64>,
    missed: Cell<u64>,
}

impl Tally {
    /// Counts from zero into `shared`, which it writes and never reads (what a predecessor, or
    /// a hostile peer, left there is overwritten as the counts change).
    ///
    /// # Safety
    /// `shared` must point at `Counters` that outlive the tally.
    pub(crate) unsafe fn new(shared: NonNull<Counters>) -> Tally {
        let tally = Tally {
            shared,
            messages: Cell::new(0),
            bytes: Cell::new(0),
            fragments: Cell::new(0),
            full: Cell::new(0),
            sleeps: Cell::new(0),
            wakes: Cell::new(0),
            high_water: Cell::new(0),
            missed: Cell::new(0),
        };
        let c = tally.shared();
        for counter in [
            &c.messages,
            &c.bytes,
            &c.fragments,
            &c.full,
            &c.sleeps,
            &c.wakes,
            &c.high_water,
            &c.last_ns,
            &c.missed,
        ] {
            // Relaxed: information only.
            counter.store(0, Relaxed);
        }
        tally
    }

    /// Adds `n` to `ours` and stores the sum in `theirs`.
    #[inline(always)]
    fn add(ours: &Cell<u64>, theirs: &std::sync::atomic::AtomicU64, n: u64) -> u64 {
        // Wrapping: a count that reaches 2^64 starts again rather than stopping the side.
        let v = ours.get().wrapping_add(n);
        ours.set(v);
        // Relaxed (every store of the counters): information only; nothing of the protocol
        // reads it.
        theirs.store(v, Relaxed);
        v
    }

    #[inline(always)]
    fn shared(&self) -> &Counters {
        // SAFETY: per `new`'s contract; all atomics.
        unsafe { self.shared.as_ref() }
    }

    /// A frame of `kind` with `len` bytes of payload went through this side.
    #[inline(always)]
    pub(crate) fn frame(&self, kind: u8, len: usize) {
        if kind != kind::DATA {
            return self.fragment(kind, len);
        }
        Self::add(&self.bytes, &self.shared().bytes, len as u64);
        if Self::add(&self.messages, &self.shared().messages, 1) % STAMP_EVERY == 1 {
            self.stamp();
        }
    }

    #[cold]
    #[inline(never)]
    fn fragment(&self, kind: u8, len: usize) {
        if matches!(kind, kind::FRAG_FIRST | kind::FRAG_MORE | kind::FRAG_LAST) {
            Self::add(&self.fragments, &self.shared().fragments, 1);
            // A first fragment starts with the message's length (8 bytes), not its payload.
            let header = if kind == kind::FRAG_FIRST { 8 } else { 0 };
            Self::add(
                &self.bytes,
                &self.shared().bytes,
                (len as u64).saturating_sub(header),
            );
        }
        if kind == kind::FRAG_LAST
            && Self::add(&self.messages, &self.shared().messages, 1) % STAMP_EVERY == 1
        {
            self.stamp();
        }
    }

    /// `n` messages of `bytes` payload bytes in all went through at once (a batch).
    #[inline]
    pub(crate) fn messages(&self, n: u64, bytes: u64) {
        if n == 0 {
            return;
        }
        let before = self.messages.get();
        let after = Self::add(&self.messages, &self.shared().messages, n);
        Self::add(&self.bytes, &self.shared().bytes, bytes);
        if before == 0 || before / STAMP_EVERY != after / STAMP_EVERY {
            self.stamp();
        }
    }

    /// A send found the ring full.
    #[cold]
    pub(crate) fn full(&self) {
        Self::add(&self.full, &self.shared().full, 1);
        self.stamp();
    }

    /// This side woke its peer.
    #[cold]
    pub(crate) fn woke(&self) {
        Self::add(&self.wakes, &self.shared().wakes, 1);
        self.stamp();
    }

    /// A wait of this side slept `n` times (none: nothing to count).
    #[inline]
    pub(crate) fn slept(&self, n: u64) {
        if n > 0 {
            Self::add(&self.sleeps, &self.shared().sleeps, n);
            self.stamp();
        }
    }

    /// The ring held `fill` bytes when this side looked.
    #[inline]
    pub(crate) fn fill(&self, fill: u64) {
        if fill > self.high_water.get() {
            self.high_water.set(fill);
            self.shared().high_water.store(fill, Relaxed);
        }
    }

    /// A subscriber missed `n` messages.
    #[cold]
    pub(crate) fn missed(&self, n: u64) {
        Self::add(&self.missed, &self.shared().missed, n);
    }

    fn stamp(&self) {
        let ns = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.shared().last_ns.store(ns, Relaxed);
    }
}
