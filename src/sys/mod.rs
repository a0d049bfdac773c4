//! Everything that asks the operating system (Linux) for something beyond the standard
//! library: the only place with system calls.
//!
//! * [`futex_wait`] / [`futex_wake`] and [`wait_any`] (`futex_waitv`): sleeping on words of
//!   shared memory (`futex.rs`);
//! * [`DeathWatch`]: learning that a peer died, from a watcher thread that holds a pidfd for
//!   each watched peer and asks once a second whether each still holds its end (`watch.rs`);
//! * [`lock`]: the byte locks (`F_OFD_SETLK`) that say whether an endpoint is alive;
//! * [`ProcessId`]: who an endpoint is (pid and start time, information only; `process.rs`);
//! * `shm_open` / `shm_unlink`, the effective user, a non-blocking socket connect (`files.rs`);
//! * [`FutexRing`] (feature `tokio`): a futex wait that completes into a file descriptor an
//!   async runtime can poll (`uring.rs`).
//!
//! Nothing here knows the layout of a mapping: callers pass the words to sleep on and the bytes
//! to lock.

mod alarm;
mod files;
mod futex;
pub(crate) mod lock;
mod process;
#[cfg(all(feature = "tokio", not(loom)))]
mod uring;
// Under loom, `crate::sync` stands in for the watcher.
#[cfg(not(loom))]
mod watch;

pub(crate) use alarm::Alarm;
pub(crate) use files::{connect_seqpacket_now, euid, shm_open, shm_unlink};
#[cfg_attr(loom, allow(unused_imports))]
pub(crate) use futex::{futex_wait, futex_wake, wait_any, FutexWaitv, WaitAny, WAITV_MAX};
#[cfg(all(test, not(loom)))]
pub(crate) use process::start_time_at;
pub(crate) use process::ProcessId;
#[cfg(all(feature = "tokio", not(loom), any(test, feature = "test-hooks")))]
pub(crate) use uring::kernel_has_futex_ring_ops;
#[cfg(all(feature = "tokio", not(loom), test))]
pub(crate) use uring::tests as uring_tests;
#[cfg(all(feature = "tokio", not(loom)))]
pub(crate) use uring::{
    held as ring_descriptors_held, over_limit as rings_over_limit, ring_descriptor_limit, rings,
    unsupported as rings_unsupported, FutexRing,
};
#[cfg(not(loom))]
pub(crate) use watch::DeathWatch;

/// Asks whether a peer still holds its end of a channel (its endpoint lock): `false` once it no
/// longer does (it closed, or its process died). The death watcher calls it on its own thread.
pub(crate) type HoldsEnd = Box<dyn Fn() -> bool + Send>;
