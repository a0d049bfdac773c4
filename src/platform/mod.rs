//! What depends on the operating system: sleeping on a word of shared memory (a futex on Linux)
//! and learning that a peer died (a watcher thread on Linux: at once from a pidfd of the
//! process the peer recorded, and within a second from a look at whether it still holds its
//! end, whatever it recorded).
//!
//! Elsewhere (and under loom) `Block` sleeps in short timed slices, and a dead peer is noticed
//! by the periodic look at its process that those slices allow (see `crate::wait`).

pub(crate) mod futex;

/// Asks whether a peer still holds its end of a channel (its endpoint lock): `false` once it no
/// longer does (it closed, or its process died). The death watcher calls it on its own thread.
pub(crate) type HoldsEnd = Box<dyn Fn() -> bool + Send>;

#[cfg(all(target_os = "linux", not(loom)))]
mod linux;
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) use linux::{futex_wait, futex_wake, DeathWatch};

#[cfg(not(all(target_os = "linux", not(loom))))]
mod fallback;
#[cfg(not(all(target_os = "linux", not(loom))))]
#[allow(unused_imports)]
pub(crate) use fallback::{futex_wait, futex_wake, DeathWatch};
