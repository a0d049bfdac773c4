//! The topic's protocol on its shared words, apart from the mapping (so that the loom models
//! in `loom_tests` run this very code): the lossless reclaim rule and the join it pairs with,
//! the overwrite claim and the check it pairs with, and the index of recent messages.
//!
//! # The reclaim rule (lossless)
//!
//! The publisher may write over the bytes of indices below its *floor*; the floor never passes
//! a live subscriber's cursor. When its cached floor says the ring is full it takes a round:
//!
//! 1. scan the slots: each `JOINING` or `ACTIVE` slot's cursor is a bound (a `JOINING` one no
//!    lower than the last floor; an `ACTIVE` one below the last floor, past the publisher's
//!    position or not 8-aligned is hostile: the slot is dropped and bounds nothing);
//! 2. `m1` = the lowest bound (at most its position, and at most the oldest message it keeps
//!    for late joiners); store it in `proposal`; fence (SeqCst, F-P);
//! 3. scan again: `m2`; the new floor is `min(m1, m2)`.
//!
//! A subscriber joins by marking its slot `JOINING`, then, in a loop: pick a position `p` (the
//! publisher's position, or a retained message), store it as its cursor, fence (SeqCst, F-S),
//! load `proposal`, and stop once `p >= proposal`. Then it marks the slot `ACTIVE`.
//!
//! Why no round takes a floor past a joined subscriber's `p`: the SeqCst fences F-P of the
//! round and F-S of the subscriber's last try are in one order. If F-S comes first, the
//! round's second scan (after F-P) sees the slot `JOINING` (or `ACTIVE`) with `p` or a later
//! cursor, so `m2 <= p`. If F-P comes first, the subscriber's proposal load (after F-S) sees
//! the round's proposal or a later one, so `p >= m1`. Later rounds scan a cursor at least
//! `p`. (The same store, fence, load on each side as the sleep/wake handshake of
//! `wait::handshake`.)
//!
//! # The overwrite claim
//!
//! An overwrite publisher never waits: before it writes over old bytes it stores how far it
//! will go in `claim` (every byte below it may change from then on) and fences (Release). A
//! subscriber copies a message out, fences (Acquire), and loads `claim`: if the claim is still
//! at or below where the message began, no byte it copied was written over (had its copy seen
//! any such write, the fences would make the claim before that write visible to its load). If
//! not, it lagged: it takes the oldest message still there from the index.
//!
//! # The index
//!
//! Where the last messages start and end, one entry per message, written by the publisher
//! after the message is published, as a sequence lock (`seq` is 0 while the entry changes).

use crate::shm::layout::topic::{
    state_of, with_state, IndexEntry, SLOT_ACTIVE, SLOT_DROPPED, SLOT_JOINING,
};
use crate::shm::ring::FRAME_ALIGN;
use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

/// The subscribers' words, as the publisher reads them.
pub(crate) trait Cursors {
    /// Number of slots.
    fn slots(&self) -> usize;
    /// Slot `i`'s state word.
    fn state(&self, i: usize) -> &AtomicU32;
    /// Slot `i`'s cursor.
    fn cursor(&self, i: usize) -> &AtomicU64;
}

/// One scan of the reclaim rule: the lowest bound the live cursors set, at most `tail`.
/// Drops (`SLOT_DROPPED`) an `ACTIVE` slot whose cursor is out of range.
fn scan(slots: &impl Cursors, floor: u64, tail: u64) -> u64 {
    let mut low = tail;
    for i in 0..slots.slots() {
        // Acquire: pairs with the subscriber's Release store of `ACTIVE` (its cursor before
        // it); the join's order comes from the fences (module docs).
        let word = slots.state(i).load(Ordering::Acquire);
        let state = state_of(word);
        if state != SLOT_JOINING && state != SLOT_ACTIVE {
            continue;
        }
        // Relaxed: ordered by the fences of the join (module docs); any value is judged.
        let cursor = slots.cursor(i).load(Ordering::Relaxed);
        let sane = cursor % FRAME_ALIGN as u64 == 0 && cursor <= tail;
        if state == SLOT_JOINING {
            // A cursor below the floor is a stale pick its subscriber will replace (it finds
            // the proposal past it); one out of range bounds nothing.
            if sane {
                low = low.min(cursor.max(floor));
            }
        } else if sane && cursor >= floor {
            low = low.min(cursor);
        } else {
            // Hostile: a joined cursor never moves back, and never past what was published.
            // Relaxed: the verdict orders nothing; a state word that changed (a new holder of
            // the slot, counted in its upper bits) is not the one judged, and is left alone.
            let _ = slots.state(i).compare_exchange(
                word,
                with_state(word, SLOT_DROPPED),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }
    low
}

/// One round of the reclaim rule (module docs): the new floor, between `floor` (the last one)
/// and `tail` (the publisher's position), at most `keep` (the oldest message kept for late
/// joiners, at least `floor`).
pub(crate) fn lossless_floor(
    slots: &impl Cursors,
    proposal: &AtomicU64,
    floor: u64,
    tail: u64,
    keep: u64,
) -> u64 {
    let m1 = scan(slots, floor, tail).min(keep).max(floor);
    // Relaxed, then F-P: the join (module docs).
    proposal.store(m1, Ordering::Relaxed);
    fence(Ordering::SeqCst);
    let m2 = scan(slots, floor, tail);
    m1.min(m2.max(floor))
}

/// The subscriber's side of the join: stores each position `pick` offers (given the proposal
/// last seen) as its cursor until one is at or past the proposal; returns it. `pick` returns
/// None when the topic holds nothing it can offer (a hostile publisher): the join fails.
pub(crate) fn join(
    cursor: &AtomicU64,
    proposal: &AtomicU64,
    mut pick: impl FnMut(u64) -> Option<u64>,
    tries: usize,
) -> Option<u64> {
    // Relaxed: a first guess only.
    let mut seen = proposal.load(Ordering::Relaxed);
    for _ in 0..tries {
        let p = pick(seen)?;
        // Relaxed, then F-S, then the load: the join (module docs).
        cursor.store(p, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        seen = proposal.load(Ordering::Relaxed);
        if p >= seen {
            return Some(p);
        }
    }
    None
}

/// The overwrite claim (module docs): the publisher at `tail` is about to write frames that
/// end at `end` in a ring of `capacity` bytes (and the header word after them); claims a
/// further eighth of the ring at once, so that it comes here once per eighth. Returns the
/// claim, which stands for the consumer's index: the publisher writes nothing below
/// `claim + capacity`.
pub(crate) fn overwrite_claim(
    claim: &AtomicU64,
    last: u64,
    tail: u64,
    end: u64,
    capacity: u64,
) -> u64 {
    let need = (end + FRAME_ALIGN as u64).saturating_sub(capacity);
    let ahead = (need + capacity / 8).next_multiple_of(FRAME_ALIGN as u64);
    let new = ahead.min(tail).max(last).max(need);
    if new != last {
        // Relaxed, then the fence: the claim is ordered before every write over the bytes it
        // gives up (pairs with the subscriber's Acquire fence after its copy, `fresh`).
        claim.store(new, Ordering::Relaxed);
        fence(Ordering::Release);
    }
    new
}

/// The subscriber's check after a copy of bytes that began at index `from` (module docs):
/// true when none of them was written over.
#[inline]
pub(crate) fn fresh(claim: &AtomicU64, from: u64) -> bool {
    // Acquire fence: pairs with the Release fence in `overwrite_claim`.
    fence(Ordering::Acquire);
    // Relaxed: ordered by the fence.
    claim.load(Ordering::Relaxed) <= from
}

/// Records message `seq` (from 0), whose frame starts at `start`, the publisher's position
/// after it being `end`.
#[inline]
pub(crate) fn index_write(entry: &IndexEntry, seq: u64, start: u64, end: u64) {
    // Relaxed, then the fence: readers that see any of the stores below see this 0 (pairs
    // with the Acquire fence in `index_read`).
    entry.seq.store(0, Ordering::Relaxed);
    fence(Ordering::Release);
    entry.start.store(start, Ordering::Relaxed);
    entry.end.store(end, Ordering::Relaxed);
    // Release: pairs with the Acquire load in `index_read`: the fields above come with it.
    entry.seq.store(seq + 1, Ordering::Release);
}

/// The message an entry records, if it was whole when read: (seq, start, end).
#[inline]
pub(crate) fn index_read(entry: &IndexEntry) -> Option<(u64, u64, u64)> {
    // Acquire: pairs with the Release store of `seq` in `index_write`.
    let seq = entry.seq.load(Ordering::Acquire);
    if seq == 0 {
        return None;
    }
    // Relaxed: checked by the second load of `seq` below.
    let start = entry.start.load(Ordering::Relaxed);
    let end = entry.end.load(Ordering::Relaxed);
    // Acquire fence: pairs with the Release fence in `index_write`.
    fence(Ordering::Acquire);
    (entry.seq.load(Ordering::Relaxed) == seq).then(|| (seq - 1, start, end))
}
