//! The library's integration tests, in one binary (`cargo test --test it`), one module per
//! subject. A test that needs another process runs this binary again in a role: `roles` holds
//! the one table of roles, and the one test that runs the role a child was given.
//!
//! `conformance` is the one suite over every surface and backend; the other modules test what
//! only one of them does, or the library's defences.

mod support;

mod alloc;
mod conformance;
mod counters;
mod crash;
mod delivery;
mod echo;
mod endpoint_services;
mod errors;
mod examples;
mod fallback_trust;
mod hostile;
mod hostile_stream;
mod liveness;
mod roles;
mod segments;
mod selector_many;
mod selector_waker;
mod services;
mod stress;
#[cfg(feature = "tokio")]
mod tokio_api;
mod topic;
mod wait;
