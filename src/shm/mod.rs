//! The shared-memory backend: the mapping's layout (`layout/`), the lock-free ring of frames
//! (`ring/`), the duplex channel of two rings in one named mapping (`channel/`: create,
//! connect, its halves' cores, the peer's state and death), the named mappings themselves
//! (`mapping.rs`), the list of live and stale mappings (`segments.rs`) and what their counters
//! say (`stats.rs`), both public in `shmlink::segments`.

pub(crate) mod channel;
pub(crate) mod layout;
pub(crate) mod mapping;
pub mod ring;
pub(crate) mod segments;
pub(crate) mod stats;
pub(crate) mod topic;
