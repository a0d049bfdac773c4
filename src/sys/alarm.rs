//! The alarm: a flag of this process that the death watcher raises with its news of a peer,
//! for code that looks at the peer without sleeping. Plain process memory, so it exists under
//! loom too (where nothing registers, and nothing raises it but its owner).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A flag that the death watcher raises with its news of a peer, for code that looks at the
/// peer without sleeping (a sender, before each send: one load), and a count of the
/// registrations that would raise it. Whoever lowers it (`take`) then asks the peer's end: the
/// flag is news, never the verdict.
#[derive(Debug)]
pub(crate) struct Alarm {
    raised: AtomicBool,
    /// Live registrations that raise this alarm. The last one to go raises it once more, so
    /// that its owner looks again (and may register itself).
    watched: AtomicU32,
}

impl Alarm {
    /// An alarm raised from the start (its owner has not looked at the peer yet), that no
    /// registration raises yet.
    pub(crate) fn new() -> Alarm {
        Alarm {
            raised: AtomicBool::new(true),
            watched: AtomicU32::new(0),
        }
    }

    /// True while the alarm is raised: one load.
    #[inline(always)]
    pub(crate) fn is_raised(&self) -> bool {
        // Relaxed: a hint that sends its reader to `take`, whose Acquire swap pairs with the
        // Release store in `raise`; news seen one call late costs that call nothing but a
        // message sent into a ring that nobody reads.
        self.raised.load(Ordering::Relaxed)
    }

    /// Lowers the alarm: true if it was raised.
    pub(crate) fn take(&self) -> bool {
        // Acquire: pairs with the Release store in `raise`, so the look at the peer that follows
        // comes after what the raiser saw (the process's exit, which let go of its locks, the
        // end found free, or the last registration gone).
        self.raised.swap(false, Ordering::Acquire)
    }

    /// Raises the alarm.
    pub(crate) fn raise(&self) {
        // Release: pairs with the Acquire swap in `take`.
        self.raised.store(true, Ordering::Release);
    }

    /// Counts a registration that raises this alarm.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn watched_by_one_more(&self) {
        // Relaxed: a count; see `is_watched`.
        self.watched.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a registration gone; the last one to go raises the alarm, so that its owner
    /// looks again and, if nothing else covers the peer, registers.
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn watched_by_one_less(&self) {
        // Relaxed: a count; `raise` publishes (Release).
        if self.watched.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.raise();
        }
    }

    /// True while a registration with the watcher raises this alarm on news of the peer.
    pub(crate) fn is_watched(&self) -> bool {
        // Relaxed: read after `take` (Acquire); a registration that ends after this look
        // raises the alarm again (see `DeathWatch::drop`), so a stale answer costs one look.
        self.watched.load(Ordering::Relaxed) != 0
    }
}
