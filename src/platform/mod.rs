//! What depends on the operating system: sleeping on a word of shared memory (a futex on Linux)
//! and learning at once that a peer process died (a watcher thread on pidfds on Linux).
//!
//! Elsewhere (and under loom) `Block` sleeps in short timed slices, and a dead peer is noticed
//! by the periodic look at its process that those slices allow (see `crate::wait`).

pub(crate) mod futex;

#[cfg(all(target_os = "linux", not(loom)))]
mod linux;
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) use linux::{futex_wait, futex_wake, DeathWatch};

#[cfg(not(all(target_os = "linux", not(loom))))]
mod fallback;
#[cfg(not(all(target_os = "linux", not(loom))))]
#[allow(unused_imports)]
pub(crate) use fallback::{futex_wait, futex_wake, DeathWatch};
