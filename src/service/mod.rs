//! Services, for servers with many clients: a [`Listener`] that hands out one channel per client,
//! a [`Selector`] that waits on many channels from one thread, and the reactor thread behind
//! the async API (`crate::surface::tokio`). All three sleep on futex words in the channels' and the
//! listener's mappings (`futex_waitv` for many at once) and rely on the death watcher for the
//! peers of the channels they wait on.

#[cfg(feature = "tokio")]
pub(crate) mod direct;
pub(crate) mod listener;
pub(crate) mod pool;
#[cfg(feature = "tokio")]
pub(crate) mod reactor;
mod selector;
#[cfg(feature = "tokio")]
pub(crate) mod task;

pub use listener::{Connection, Listener, DEFAULT_MAX_CLIENTS};
pub use selector::{Selectable, Selector, SelectorWaker};
