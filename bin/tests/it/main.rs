//! The harness's integration tests, in one binary (`cargo test -p shmlink-harness --test it`):
//! the behaviour suite over every transport (`transports`), `ipc-parent` end to end
//! (`ipc_parent`), and no allocation per message on the `shm` JSON path (`alloc`, which installs
//! a counting global allocator for this binary and counts per thread).

mod alloc;
mod ipc_parent;
mod transports;
